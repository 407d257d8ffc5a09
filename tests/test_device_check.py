"""Tests for experiments/device_wheels.sh and experiments/device_check.sh: the wheels carried to
the device machine and its one command, proved on the CPU before any GPU.

The slow test builds a CPython 3.12 venv holding exactly experiments/device_image.txt (the
device image's packages at its versions, jaxlib's CPU build in place of the CUDA one) and
nothing else, downloads the bundle with device_wheels.sh, and runs `device_check.sh --cpu` in
that venv end to end: the script installs the wheels itself, as on the machine, and a package
the project needs that is neither in the image nor in the bundle fails its smoke or gpu_check
here. The fast tests check device_check.sh's refusals: one `error:` line, exit status 2, and
nothing written, before anything is installed or compiled.

The venv is kept between runs in the temporary folder, under a name made from the pinned list
and the interpreter, and used only once complete; the wheels are downloaded every run (pip's
own cache may serve them). A fresh machine builds and downloads everything.
"""

import fcntl
import glob
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest
import pytest

from mjx_walk import config as config_lib

import conftest

REPO = pathlib.Path(__file__).resolve().parent.parent
WHEELS_SCRIPT = REPO / "experiments" / "device_wheels.sh"
CHECK_SCRIPT = REPO / "experiments" / "device_check.sh"
IMAGE = REPO / "experiments" / "device_image.txt"
LIMIT_MIB = 48


def _canonical(name: str) -> str:
  return re.sub(r"[-_.]+", "-", name).lower()


def image_pins() -> dict[str, str]:
  """{canonical name: pinned version} of experiments/device_image.txt."""
  pins = {}
  for line in IMAGE.read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
      name, version = line.split("==")
      pins[_canonical(name)] = version.strip()
  return pins


def find_python312() -> str | None:
  """A CPython 3.12 interpreter: python3.12 on PATH, else one of pyenv's versions."""
  root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
  candidates = [shutil.which("python3.12"),
                *sorted(glob.glob(os.path.join(root, "versions", "3.12*", "bin", "python3.12")))]
  for candidate in filter(None, candidates):
    done = subprocess.run([candidate, "-c", "import sys, venv; print(sys.version_info[:2])"],
                          capture_output=True, text=True, check=False)
    if done.returncode == 0 and done.stdout.strip() == "(3, 12)":
      return candidate
  return None


def image_venv(python: str) -> pathlib.Path:
  """The venv of experiments/device_image.txt for `python`, built unless a complete one is kept.

  Its folder is named by a hash of the pinned list and the interpreter's version, and is used
  only when its `complete` file exists, written after `pip check` passed; a build that stopped
  half-way is thrown away and redone. A file lock keeps two processes from building it at once.
  """
  version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True,
                           text=True, check=True).stdout
  key = hashlib.sha256((IMAGE.read_text() + version).encode()).hexdigest()[:12]
  venv = pathlib.Path(tempfile.gettempdir()) / f"mjx_walk-device-image-{key}"
  with open(f"{venv}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not (venv / "complete").is_file():
      shutil.rmtree(venv, ignore_errors=True)
      subprocess.run([python, "-m", "venv", str(venv)], check=True)
      pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
      subprocess.run([*pip, "install", "-q", "--no-deps", "-r", str(IMAGE)], check=True)
      subprocess.run([*pip, "check"], check=True)
      (venv / "complete").touch()
  return venv


def clean_env(**extra: str) -> dict[str, str]:
  """This process's environment without what would lead the venv's interpreter to other packages
  or compile differently (PYTHONPATH, a venv, the suite's XLA flags), or the smoke's tests to
  this session's shared folder, where a run trained on the suite's own stack may lie."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "XLA_FLAGS", "OUT",
                      conftest.SHARED)}
  env.update(extra)
  return env


def read_lines(path: pathlib.Path) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
class DeviceCheckOnTheImageStackTest(absltest.TestCase):
  """The bundle and the command on the image's package set. Slow (`pytest -m slow`): on a fresh
  machine it downloads and installs about 600 MB of packages, and the smoke and gpu_check --tiny
  compile from a cold cache (the venv's jax differs from the suite's), under device_check.sh's
  30-minute CPU deadline."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    python = find_python312()
    if python is None:
      raise absltest.SkipTest("no CPython 3.12 (python3.12 on PATH, or under pyenv's versions/) "
                              "to build the device image's venv with; jax 0.11 needs 3.12")
    start = time.perf_counter()
    cls.venv = image_venv(python)
    cls.venv_seconds = time.perf_counter() - start
    cls.python = str(cls.venv / "bin" / "python")
    cls.freeze = subprocess.run([cls.python, "-m", "pip", "freeze", "--all", "--exclude", "pip"],
                                capture_output=True, text=True, check=True).stdout
    cls.tmp = pathlib.Path(tempfile.mkdtemp(prefix="device_check-"))
    cls.wheels = cls.tmp / "whl"
    cls.out = cls.tmp / "out"
    cls.bundled = subprocess.run(["bash", str(WHEELS_SCRIPT), str(cls.wheels)],
                                 capture_output=True, text=True, check=False, cwd=REPO,
                                 env=clean_env(PYTHON=cls.python), timeout=900)
    cls.done = None
    if cls.bundled.returncode == 0:
      start = time.perf_counter()
      cls.done = subprocess.run(["bash", str(CHECK_SCRIPT), "--cpu", f"--wheels={cls.wheels}"],
                                capture_output=True, text=True, check=False, cwd=REPO,
                                env=clean_env(PYTHON=cls.python, OUT=str(cls.out)),
                                timeout=35 * 60)
      cls.check_seconds = time.perf_counter() - start
      print(f"device image venv ready in {cls.venv_seconds:.0f} s; device_check.sh --cpu took "
            f"{cls.check_seconds:.0f} s", file=sys.stderr)

  @classmethod
  def tearDownClass(cls):
    if hasattr(cls, "tmp"):
      shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def lines(self, name: str) -> list[dict]:
    self.assertIsNotNone(self.done, self.bundled.stdout + self.bundled.stderr)
    return read_lines(self.out / name)

  def test_the_venv_holds_exactly_the_image_list(self):
    # Catches a package of ours that the venv has only because pip pulled it in, which the
    # machine would lack: the venv must be the pinned list, no more, no less.
    installed = {}
    for line in self.freeze.splitlines():
      name, version = line.split("==")
      installed[_canonical(name)] = version
    self.assertEqual(installed, image_pins())
    self.assertEqual(installed["jax"], "0.11.2")
    self.assertEqual(installed["jaxlib"], "0.11.2")

  def test_the_bundle_is_the_four_wheels_under_48_mib(self):
    # Catches a bundle over what a device call carries, a second version of a package, and a
    # wheel for another interpreter or processor.
    self.assertEqual(self.bundled.returncode, 0, self.bundled.stdout + self.bundled.stderr)
    names = sorted(p.name for p in self.wheels.iterdir())
    self.assertLen(names, 4)
    for name, prefix in zip(names, ("ml_collections-1.1.0-", "mujoco-3.17.0-cp312-cp312-manylinux",
                                    "mujoco_mjx-3.17.0-py3-none-any", "trimesh-")):
      self.assertTrue(name.startswith(prefix), (name, prefix))
    self.assertIn("x86_64", names[1])
    total = sum(p.stat().st_size for p in self.wheels.iterdir())
    self.assertLessEqual(total, LIMIT_MIB * 2**20)
    printed = re.search(r"^ *([0-9.]+) MiB  total, 4 wheels", self.bundled.stdout, re.M)
    self.assertIsNotNone(printed, self.bundled.stdout)
    self.assertAlmostEqual(float(printed.group(1)), total / 2**20, delta=0.01)

  def test_device_check_passes_on_the_cpu(self):
    # Catches a dependency missing from the bundle (the smoke or gpu_check fails to import or
    # run), an install that leaves the carried mujoco unused, and any stage that failed.
    self.assertEqual(self.done.returncode, 0, self.done.stdout[-6000:] + self.done.stderr[-3000:])
    lines = self.lines("device_check.jsonl")
    self.assertEqual([line["kind"] for line in lines], ["versions", "smoke", "done"])
    versions, smoke, done = lines
    self.assertTrue(versions["python"].startswith("3.12."), versions["python"])
    self.assertEqual((versions["jax"], versions["jaxlib"]), ("0.11.2", "0.11.2"))
    self.assertEqual((versions["mujoco"], versions["mujoco-mjx"]), ("3.17.0", "3.17.0"))
    self.assertTrue(versions["mujoco_from_carried_wheels"], versions.get("mujoco_from"))
    self.assertEqual(versions["image_pins_differing"], [])
    self.assertEqual(versions["backend"], "cpu")
    self.assertTrue(smoke["passed"], smoke)
    self.assertRegex(smoke["summary"], r"^3 passed")
    self.assertTrue(done["passed"], done)
    self.assertLessEqual(done["seconds"], done["deadline_s"])

  def test_gpu_check_ran_every_stage_in_the_deadline(self):
    # Catches gpu_check failing or skipping on the image's stack, and its budget not fitting
    # in what the smoke left.
    lines = self.lines("gpu_check/gpu_check.jsonl")
    self.assertEqual([line["kind"] for line in lines],
                     ["header", "bench", "bench", "train", "done"])
    header, train, done = lines[0], lines[3], lines[-1]
    self.assertEqual(header["jax"], "0.11.2")
    self.assertTrue(header["tiny"])
    self.assertEqual(done["errors"], [])
    self.assertEqual(done["ran"], ["bench 16 envs", "bench 32 envs", "train"])
    self.assertEqual(sorted(train["final"]), sorted(config_lib.STRATA))
    check_done = self.lines("device_check.jsonl")[-1]
    self.assertLessEqual(check_done["seconds"], check_done["deadline_s"])

  def test_what_comes_back_from_out_fits_the_device_tool(self):
    # The device tool returns at most 8 files, none more than 2 folders below $OUT; the log and
    # the lines must be among them.
    shallow = sorted(str(p.relative_to(self.out)) for p in self.out.rglob("*")
                     if p.is_file() and len(p.relative_to(self.out).parts) <= 3)
    self.assertLessEqual(len(shallow), 8, shallow)
    for name in ("device_check.jsonl", "device_check.log", "gpu_check/gpu_check.jsonl",
                 "gpu_check/train.log", "gpu_check/ledger.jsonl"):
      self.assertIn(name, shallow)
    log = (self.out / "device_check.log").read_text()
    self.assertIn("3 passed", log)
    self.assertIn('"kind": "done"', log)


class RefusalTest(absltest.TestCase):
  """device_check.sh's bad options: one `error:` line, exit status 2, nothing written."""

  def refused(self, *args: str, out: pathlib.Path, wheels: pathlib.Path | None = None
              ) -> subprocess.CompletedProcess:
    if wheels is None:
      wheels = pathlib.Path(self.create_tempdir().full_path)
      (wheels / "a-1.0-py3-none-any.whl").write_bytes(b"")
    done = subprocess.run(["bash", str(CHECK_SCRIPT), f"--wheels={wheels}", *args],
                          capture_output=True, text=True, check=False, cwd=REPO,
                          env=clean_env(PYTHON=sys.executable, OUT=str(out)), timeout=60)
    self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
    self.assertEqual(done.stdout, "")
    self.assertLen(done.stderr.splitlines(), 1, done.stderr)
    self.assertTrue(done.stderr.startswith("error: "), done.stderr)
    return done

  def test_an_unknown_option_is_named(self):
    out = pathlib.Path(self.create_tempdir().full_path) / "out"
    done = self.refused("--gpu", out=out)
    self.assertIn("--gpu", done.stderr)
    self.assertFalse(out.exists())

  def test_flags_it_sets_itself_are_refused_for_gpu_check(self):
    # --out_dir and --budget_minutes given to gpu_check would break the deadline and $OUT.
    out = pathlib.Path(self.create_tempdir().full_path) / "out"
    done = self.refused("--", "--budget_minutes=30", out=out)
    self.assertIn("--budget_minutes=30", done.stderr)
    self.assertFalse(out.exists())

  def test_a_deadline_under_two_minutes_is_refused(self):
    out = pathlib.Path(self.create_tempdir().full_path) / "out"
    for minutes in ("1", "abc", "-5"):
      with self.subTest(minutes=minutes):
        done = self.refused(f"--minutes={minutes}", out=out)
        self.assertIn(f"--minutes={minutes}", done.stderr)
        self.assertFalse(out.exists())

  def test_an_out_folder_holding_files_is_left_as_it_was(self):
    # Catches a check that writes its lines into, or over, another run's files.
    out = pathlib.Path(self.create_tempdir().full_path)
    (out / "device_check.jsonl").write_text("earlier\n")
    done = self.refused(out=out)
    self.assertIn(str(out), done.stderr)
    self.assertEqual(sorted(p.name for p in out.iterdir()), ["device_check.jsonl"])
    self.assertEqual((out / "device_check.jsonl").read_text(), "earlier\n")

  def test_no_wheels_says_how_to_get_them(self):
    out = pathlib.Path(self.create_tempdir().full_path) / "out"
    empty = pathlib.Path(self.create_tempdir().full_path)
    done = self.refused("--cpu", out=out, wheels=empty)
    self.assertIn("experiments/device_wheels.sh", done.stderr)
    self.assertFalse(out.exists())


if __name__ == "__main__":
  absltest.main()
