#!/usr/bin/env bash
# Downloads the wheels a GPU machine without network access needs to install this project with
# the pinned stack and JAX's CUDA 12 backend: every dependency pyproject.toml pins, plus
# jax[cuda12] at the jax version installed here, which brings jax-cuda12-plugin and
# jax-cuda12-pjrt of that same version and the nvidia-*-cu12 CUDA runtime wheels they require
# (cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE, NCCL, nvJitLink, NVRTC, NVSHMEM, CUPTI, nvcc).
#
#   bash experiments/gpu_wheels.sh .whl              # download into .whl (over 3 GB)
#   bash experiments/gpu_wheels.sh .whl --dry-run    # resolve only: list the wheels, fetch none
#
# The wheels are for the GPU machine, not this one: CPython $PYTHON_VERSION (default 3.12) on
# manylinux x86-64, the device machines' interpreter. There, in the repository's root:
#
#   python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -q --no-index --find-links=.whl \
#       -e . "jax[cuda12]==<version>" \
#     && /tmp/venv/bin/python experiments/gpu_check.py --out_dir=$OUT
#
# (a fresh venv, so the machine's own JAX and CUDA plugin stay out of it; `pip install -e .`
# takes its pins from pyproject.toml, and setuptools and wheel are downloaded for its build).
# experiments/README.md ("Accelerator check") says why the device tool cannot carry this folder
# (over 3 GB against 64 MiB a call).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -lt 1 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: bash experiments/gpu_wheels.sh DEST [--dry-run]" >&2
  exit 2
fi
dest="$1"
dry_run=0
for arg in "${@:2}"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    *) echo "error: unknown argument $arg; the only option is --dry-run" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python}
python_version=${PYTHON_VERSION:-3.12}

# The jax version installed here (from pyproject's range); jaxlib and the plugin must equal it.
jax_version=$("$python" -c "import importlib.metadata as m; print(m.version('jax'))")
jaxlib_version=$("$python" -c "import importlib.metadata as m; print(m.version('jaxlib'))")
if [ "$jax_version" != "$jaxlib_version" ]; then
  echo "error: jax $jax_version and jaxlib $jaxlib_version differ here; install the pinned pair" \
       "first (pip install -e .)" >&2
  exit 2
fi

# pyproject.toml's dependencies, one requirement a line, plus the CUDA backend and the build's.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
requirements="$work/requirements.txt"
"$python" - "$requirements" <<'EOF'
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
  dependencies = tomllib.load(f)["project"]["dependencies"]
with open(sys.argv[1], "w") as out:
  out.write("\n".join(dependencies) + "\n")
EOF
{
  echo "jax[cuda12]==$jax_version"
  echo "jax-cuda12-plugin[with-cuda]==$jax_version"
  echo "jax-cuda12-pjrt==$jax_version"
  echo "setuptools>=68"
  echo "wheel"
} >> "$requirements"

target=(--only-binary=:all: --python-version "$python_version" --implementation cp
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        --platform manylinux1_x86_64)

if [ "$dry_run" = 1 ]; then
  "$python" -m pip install --quiet --dry-run --ignore-installed "${target[@]}" \
      --target "$work/target" --report "$work/report.json" -r "$requirements"
  "$python" - "$work/report.json" <<'EOF'
import json
import sys

with open(sys.argv[1]) as f:
  wheels = [item["download_info"]["url"].rsplit("/", 1)[-1] for item in json.load(f)["install"]]
print("\n".join(sorted(wheels)))
print(f"{len(wheels)} wheels would be downloaded (nothing was)")
EOF
  exit 0
fi

mkdir -p "$dest"
"$python" -m pip download --quiet "${target[@]}" -d "$dest" -r "$requirements"
echo "$(ls "$dest"/*.whl | wc -l) wheels, $(du -sh "$dest" | cut -f1) in $dest" \
     "(jax $jax_version with jax-cuda12-plugin and jax-cuda12-pjrt $jax_version)"
