#!/usr/bin/env bash
# The device machine's one command: on the image's own Python and JAX, with only the wheels of
# experiments/device_wheels.sh carried in .whl/, it installs them, prints every version, runs a
# short smoke of existing tests, then experiments/gpu_check.py, all inside one deadline.
#
#   bash experiments/device_check.sh                  # on the GPU machine, from the repository root
#   bash experiments/device_check.sh --cpu            # the same steps on the CPU (gpu_check --tiny)
#   bash experiments/device_check.sh -- --train_minutes=0 --num_envs=16384,32768   # gpu_check flags
#
# Options: --cpu; --minutes=M, the deadline of the whole command (default 8, with --cpu 30);
# --wheels=DIR, the carried wheels (default .whl). After `--`, flags for gpu_check.py (not
# --out_dir, --budget_minutes or --tiny, which this command sets). PYTHON (default python3) is
# the interpreter: the image's own, which already holds jax, flax, optax, orbax-checkpoint,
# chex, numpy, onnx and the rest (experiments/device_image.txt).
#
# Steps, each printed and flushed as it comes (a run killed half-way keeps what it printed):
#   1. installs DIR/*.whl with `pip install --no-index --no-deps --target` into a new temporary
#      folder (nothing is fetched, nothing of the image's is replaced) and puts that folder and
#      the repository root on PYTHONPATH;
#   2. versions: python, jax, jaxlib, the CUDA plugin, mujoco, mujoco-mjx, flax, optax, orbax,
#      chex, numpy, onnx, onnxruntime, ml-collections, each package experiments/device_image.txt
#      pins (with its pin, so that its guesses can be replaced), and the devices; on a GPU
#      machine where JAX finds no GPU it stops here (exit status 3);
#   3. the smoke: SMOKE_TESTS below with pytest, under a time cap (150 s; with --cpu 2/5 of the
#      deadline): MJX physics against C MuJoCo, then a tiny training run and one of its chunks
#      saved and restored bit for bit;
#   4. experiments/gpu_check.py with what is left of the deadline as its --budget_minutes (on a
#      GPU with --train_minutes=3, the walking target's minutes, so that the env counts get the
#      rest; with --cpu, --tiny). It runs even when the smoke failed: its figures still count.
#
# Files, all under $OUT (default: a new folder runs/device_check-<time>; if set, it must be
# empty or new), at most 8 and none more than 2 folders down, where the device tool returns them:
#   device_check.jsonl   this command's JSON lines: `versions`, `smoke` (its verdict), `skip`,
#                        and `done` (passed, the smoke's verdict, gpu_check's exit status)
#   device_check.log     everything printed (the pytest output and gpu_check's stderr too)
#   gpu_check/gpu_check.jsonl, gpu_check/train.log, gpu_check/ledger.jsonl   gpu_check's files
#                        (its run folder lies deeper, in gpu_check/work/, and is not returned)
# The compilation cache is JAX_COMPILATION_CACHE_DIR, default /tmp/mjx_walk-device-check-cache.
#
# No videos are rendered (MUJOCO_GL=disable): the training run records that its videos were not
# rendered, and experiments/device_wheels.sh says why neither the GL bindings nor ffmpeg travel.
#
# Exit status: 0 when the smoke and gpu_check passed; 1 when either failed (its lines say which);
# 2 for a bad option (one `error:` line, nothing written); 3 when JAX finds no GPU on a GPU run.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

SMOKE_TESTS=(
  # MJX's physics against C MuJoCo on the same model: a 2 s standing rollout.
  tests/test_robots.py::test_go2_stands_for_two_seconds_in_mjx
  # The tiny training run (init, chunks, held-out panel, checkpoints, report), then one chunk
  # saved and restored bit for bit, and a damaged checkpoint refused.
  tests/test_checkpoint.py::SaveRestoreTest::test_round_trip_is_exact
  tests/test_checkpoint.py::SaveRestoreTest::test_flipped_bytes_never_restore
)

refuse() {
  echo "error: $1" >&2
  exit 2
}

mode=gpu
minutes=""
wheels=.whl
gpu_check_flags=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --cpu) mode=cpu ;;
    --minutes=*) minutes=${1#--minutes=} ;;
    --wheels=*) wheels=${1#--wheels=} ;;
    --) shift; gpu_check_flags=("$@"); break ;;
    *) refuse "unknown option $1; the options are --cpu, --minutes=M, --wheels=DIR, and after -- flags for gpu_check.py" ;;
  esac
  shift
done
for flag in "${gpu_check_flags[@]}"; do
  case "$flag" in
    --out_dir*|--budget_minutes*|--tiny|--notiny)
      refuse "$flag is set by device_check.sh (--out_dir is \$OUT/gpu_check, --budget_minutes what is left of --minutes, --tiny with --cpu); give the others after --" ;;
  esac
done
if [ -z "$minutes" ]; then
  if [ "$mode" = cpu ]; then minutes=30; else minutes=8; fi
fi
if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || [ "$(awk -v m="$minutes" 'BEGIN{print (m >= 2)}')" != 1 ]; then
  refuse "--minutes=$minutes is invalid: it must be a number of minutes >= 2"
fi
shopt -s nullglob
wheel_files=("$wheels"/*.whl)
shopt -u nullglob
if [ "${#wheel_files[@]}" -eq 0 ]; then
  refuse "no wheels in --wheels=$wheels: run 'bash experiments/device_wheels.sh' first (and carry .whl to the device machine)"
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
  refuse "PYTHON=$python is not a command; give the interpreter that holds jax (the image's python3)"
fi
out=${OUT:-runs/device_check-$(date +%Y%m%d-%H%M%S)}
if [ -e "$out" ] && { [ ! -d "$out" ] || [ -n "$(ls -A "$out")" ]; }; then
  refuse "OUT=$out is not an empty folder; give an empty or new one"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

deadline=$(awk -v m="$minutes" 'BEGIN{printf "%d", m * 60}')
# The smoke's cap: on a GPU 150 s; on the CPU, whose cold compiles are slow, 2/5 of the deadline.
if [ "$mode" = cpu ]; then smoke_cap=$((deadline * 2 / 5)); else smoke_cap=150; fi
# Kept for gpu_check's end after its budget (the interpreter's exit) and this command's last line.
END_MARGIN=15

# One JSON line, appended to device_check.jsonl and printed.
emit() {
  echo "$1" >>"$out/device_check.jsonl"
  echo "$1"
}

main() {
  echo "device_check: mode=$mode deadline=${deadline}s out=$out python=$(command -v "$python")"
  site=$(mktemp -d -t mjx_walk-device-site-XXXXXX)
  trap 'rm -rf "$site"' EXIT
  echo "device_check: installing ${#wheel_files[@]} wheels into $site"
  if ! timeout 120 "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps \
      --no-compile --no-cache-dir --target "$site" "${wheel_files[@]}"; then
    emit "{\"kind\": \"done\", \"passed\": false, \"error\": \"installing the wheels failed\", \"seconds\": $SECONDS}"
    return 1
  fi
  export PYTHONPATH="$site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONUNBUFFERED=1
  export MUJOCO_GL=disable
  export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/mjx_walk-device-check-cache}
  if [ "$mode" = cpu ]; then export JAX_PLATFORMS=cpu; fi
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
      --format=csv,noheader 2>&1 | sed 's/^/device_check: nvidia-smi: /'

  local versions
  versions=$(timeout 180 "$python" - "$mode" "$site" <<'EOF'
import importlib.metadata
import json
import pathlib
import platform
import re
import sys

mode, site = sys.argv[1], sys.argv[2]


def version(name):
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


names = ["jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin",
         "jax-cuda12-pjrt", "mujoco", "mujoco-mjx", "flax", "optax", "orbax-checkpoint", "chex",
         "numpy", "onnx", "onnxruntime", "ml-collections", "trimesh", "scipy", "absl-py"]
line = {"kind": "versions", "python": platform.python_version(),
        **{name: version(name) for name in names}}
pins = {}
for text in pathlib.Path("experiments/device_image.txt").read_text().splitlines():
  text = text.split("#", 1)[0].strip()
  if text:
    name, pin = re.split(r"==", text, maxsplit=1)
    pins[name.strip()] = {"pinned": pin.strip(), "installed": version(name.strip())}
line["image_pins"] = pins
line["image_pins_differing"] = sorted(n for n, p in pins.items() if p["pinned"] != p["installed"])
try:
  import mujoco
  line["mujoco_from"] = str(pathlib.Path(mujoco.__file__).parent.parent)
  line["mujoco_from_carried_wheels"] = line["mujoco_from"] == site
except Exception as error:  # pylint: disable=broad-except
  line["mujoco_import_error"] = f"{type(error).__name__}: {error}"
try:
  import jax
  line["backend"] = jax.default_backend()
  line["devices"] = [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices()]
except Exception as error:  # pylint: disable=broad-except
  line["backend"] = None
  line["jax_error"] = f"{type(error).__name__}: {error}"
print(json.dumps(line), flush=True)
for key in ["python", *names]:
  print(f"device_check: {key} {line[key]}", file=sys.stderr)
print(f"device_check: devices {line.get('devices')} (backend {line['backend']})", file=sys.stderr)
for name, pin in pins.items():
  if pin["pinned"] != pin["installed"]:
    print(f"device_check: {name} {pin['installed']} (experiments/device_image.txt pins "
          f"{pin['pinned']})", file=sys.stderr)
EOF
  )
  local status=$?
  if [ -z "$versions" ]; then
    emit "{\"kind\": \"done\", \"passed\": false, \"error\": \"reading the versions failed (exit $status)\", \"seconds\": $SECONDS}"
    return 1
  fi
  emit "$versions"
  local backend
  backend=$(echo "$versions" | "$python" -c "import json, sys; print(json.load(sys.stdin)['backend'])")
  if [ "$mode" = gpu ] && [ "$backend" != gpu ] && [ "$backend" != cuda ]; then
    emit "{\"kind\": \"done\", \"passed\": false, \"error\": \"JAX found no GPU (backend $backend; see the versions line): nothing was run\", \"seconds\": $SECONDS}"
    return 3
  fi

  local left=$((deadline - SECONDS - END_MARGIN))
  local smoke_s=$((left < smoke_cap ? left : smoke_cap))
  echo "device_check: smoke, at most ${smoke_s}s: ${SMOKE_TESTS[*]}"
  local smoke_start=$SECONDS
  # pyproject's addopts (three xdist workers) cleared: one process runs the few tests in order.
  timeout -k 10 "$smoke_s" "$python" -m pytest -p no:cacheprovider -o addopts="" -v -ra \
      "${SMOKE_TESTS[@]}" 2>&1 | tee "$site/smoke.log"
  local smoke_exit=${PIPESTATUS[0]}
  local smoke_summary
  smoke_summary=$(grep -E "^=+ .*(passed|failed|error|no tests ran).* =+$" "$site/smoke.log" \
                  | tail -1 | sed -E 's/^=+ (.*) =+$/\1/; s/"/\\"/g')
  local smoke_passed=false
  [ "$smoke_exit" = 0 ] && smoke_passed=true
  emit "{\"kind\": \"smoke\", \"passed\": $smoke_passed, \"exit\": $smoke_exit, \"timed_out\": $([ "$smoke_exit" = 124 ] || [ "$smoke_exit" = 137 ] && echo true || echo false), \"summary\": \"$smoke_summary\", \"seconds\": $((SECONDS - smoke_start)), \"at_s\": $SECONDS}"

  left=$((deadline - SECONDS - END_MARGIN))
  local check_exit=skipped
  if [ "$left" -lt 60 ]; then
    emit "{\"kind\": \"skip\", \"stage\": \"gpu_check\", \"reason\": \"${left}s left of the ${deadline}s deadline, under a minute\", \"at_s\": $SECONDS}"
  else
    local budget
    budget=$(awk -v s="$left" 'BEGIN{printf "%.2f", s / 60}')
    local flags=(--out_dir="$out/gpu_check" --budget_minutes="$budget")
    if [ "$mode" = cpu ]; then flags+=(--tiny); else flags+=(--train_minutes=3); fi
    echo "device_check: experiments/gpu_check.py ${flags[*]} ${gpu_check_flags[*]}"
    # gpu_check stops itself at its budget (exit 4); the outer cap only guards against a hang.
    timeout -k 10 $((left + 30)) "$python" experiments/gpu_check.py "${flags[@]}" \
        "${gpu_check_flags[@]}"
    check_exit=$?
  fi

  local passed=false
  [ "$smoke_passed" = true ] && [ "$check_exit" = 0 ] && passed=true
  emit "{\"kind\": \"done\", \"passed\": $passed, \"smoke_passed\": $smoke_passed, \"gpu_check_exit\": \"$check_exit\", \"seconds\": $SECONDS, \"deadline_s\": $deadline}"
  [ "$passed" = true ]
}

# In braces, so that bash has read all of it before it runs: an edit of this file during a run
# cannot change what the run does.
{
  main 2>&1 | tee -a "$out/device_check.log"
  exit "${PIPESTATUS[0]}"
}
