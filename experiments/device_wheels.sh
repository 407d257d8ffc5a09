#!/usr/bin/env bash
# Downloads the wheels that the device machine's image lacks to train, evaluate and run
# experiments/device_check.sh: mujoco and mujoco-mjx 3.17.0, ml-collections, and trimesh (which
# mujoco-mjx imports), for CPython 3.12 on manylinux x86-64. The image has everything else the
# project imports (experiments/device_image.txt lists what it uses); nothing can be fetched there,
# and a call of the device tool carries at most 64 MiB, so this bundle must stay small.
#
#   bash experiments/device_wheels.sh          # into .whl/ (git-ignored), from the repository root
#   bash experiments/device_wheels.sh DEST     # into another folder
#
# It prints each wheel with its size and the total, and refuses (exit status 1, DEST unchanged)
# a bundle over 48 MiB. DEST ends up holding exactly these wheels, one version of each: any other
# .whl file in it is removed (two versions of a package stop the install on the machine).
# PYTHON (default python3) runs pip; any pip that downloads for another interpreter works.
#
# Every requirement a wheel declares (Requires-Dist, extras aside) must be in the bundle, in
# experiments/device_image.txt, or in LEFT_OUT below with the reason it is not needed; else the
# script stops and names it. Left out on purpose:
#   glfw, pyopengl  mujoco's GLFW window and its EGL and OSMesa contexts. The check renders no
#                   videos (device_check.sh sets MUJOCO_GL=disable, and mujoco imports without
#                   them): the training run records that its videos were not rendered, and its
#                   traces can be rendered later. Rendering would also need the GL libraries
#                   carried as system packages, and imageio-ffmpeg (27 MiB) to encode the MP4s.
#   websockets      only mujoco's experimental web viewer imports it.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=(mujoco==3.17.0 mujoco-mjx==3.17.0 ml-collections==1.1.0 trimesh==5.2.0)
LEFT_OUT=(glfw pyopengl websockets)
LIMIT_MIB=48

if [ "$#" -gt 1 ] || { [ "$#" -eq 1 ] && [ "${1:0:1}" = "-" ]; }; then
  echo "usage: bash experiments/device_wheels.sh [DEST]   (DEST defaults to .whl)" >&2
  exit 2
fi
dest=${1:-.whl}
if [ -e "$dest" ] && [ ! -d "$dest" ]; then
  echo "error: DEST=$dest is a file; give a folder (new, or one holding only wheels)" >&2
  exit 2
fi
python=${PYTHON:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$work" "${WHEELS[@]}"

# One wheel per requirement, every declared dependency accounted for, the sizes and the total.
"$python" - "$work" "$LIMIT_MIB" "${#WHEELS[@]}" "${LEFT_OUT[*]}" <<'EOF'
import email.parser
import pathlib
import re
import sys
import zipfile

folder, limit_mib, wanted = pathlib.Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
left_out = set(sys.argv[4].split())


def canonical(name):
  return re.sub(r"[-_.]+", "-", name).lower()


image = set()
for line in pathlib.Path("experiments/device_image.txt").read_text().splitlines():
  line = line.split("#", 1)[0].strip()
  if line:
    image.add(canonical(re.split(r"[=<>!~; \[]", line, maxsplit=1)[0]))

wheels = sorted(folder.glob("*.whl"))
if len(wheels) != wanted:
  sys.exit(f"error: pip saved {len(wheels)} wheels for {wanted} requirements: "
           f"{[w.name for w in wheels]}")
metadata = {}
for wheel in wheels:
  with zipfile.ZipFile(wheel) as archive:
    name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    metadata[wheel] = email.parser.Parser().parsestr(archive.read(name).decode())
bundle = {canonical(m["Name"]) for m in metadata.values()}
missing = []
for wheel, meta in metadata.items():
  for requirement in meta.get_all("Requires-Dist") or []:
    if re.search(r"\bextra\s*==", requirement):
      continue
    needed = canonical(re.split(r"[=<>!~; \[(]", requirement.strip(), maxsplit=1)[0])
    if needed not in bundle | image | left_out:
      missing.append(f"{needed} (required by {meta['Name']})")
if missing:
  sys.exit("error: needed by the bundle but neither in it, in experiments/device_image.txt nor "
           "left out on purpose: " + ", ".join(missing) + "; add each to WHEELS in "
           "experiments/device_wheels.sh (or to LEFT_OUT, saying why it is not needed)")

total = 0
for wheel in wheels:
  size = wheel.stat().st_size
  total += size
  print(f"{size / 2**20:7.2f} MiB  {wheel.name}")
print(f"{total / 2**20:7.2f} MiB  total, {len(wheels)} wheels (limit {limit_mib:g} MiB)")
if total > limit_mib * 2**20:
  sys.exit(f"error: the wheels come to {total / 2**20:.2f} MiB, over the {limit_mib:g} MiB a "
           "device call can carry beside the repository; nothing was changed in the destination")
EOF

mkdir -p "$dest"
for old in "$dest"/*.whl; do
  [ -e "$old" ] || continue
  [ -e "$work/$(basename "$old")" ] || rm -f "$old"
done
mv -f "$work"/*.whl "$dest"/
echo "in $dest"
