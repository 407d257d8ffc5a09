"""Tests for mjx_walk.train as a user meets it: what it refuses, what it never touches, and how a
diverged run stops.

Every refusal is checked from the command line (one `error:` line on stderr, no traceback, no
flag help, exit status 2) and against a checksum of the run folder before and after.
"""

import hashlib
import pathlib
import shutil
import subprocess
import sys

from absl.testing import absltest
import jax
import numpy as np

import configs
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.sim import robots
from mjx_walk import train as train_lib
from mjx_walk.learn import trainer as trainer_lib

REPO = pathlib.Path(__file__).resolve().parent.parent

# The tiny config of tests/configs.py as command-line flags.
TINY_FLAGS = [f"--config.{name.replace('__', '.')}={value}"
              for name, value in configs.TINY.items()]


def tiny_config(chunks: int = 2, **changes):
  return configs.tiny(chunks, panel__every_chunks=2, checkpoint__every_chunks=1, **changes)


def folder_digest(root: pathlib.Path) -> dict[str, str]:
  """{relative path: sha256} of every file under `root`."""
  return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(root.rglob("*")) if p.is_file()}


def run_cli(*args: str, module: str = "mjx_walk.train") -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                        timeout=600, cwd=REPO)


class RefusalTest(absltest.TestCase):
  """Each refusal: exit status 2, one line on stderr, and the run folder unchanged."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = pathlib.Path(absltest.get_default_test_tmpdir()) / "refusals"
    shutil.rmtree(cls.root, ignore_errors=True)
    cls.config = tiny_config()
    cls.run_dir = train_lib.run(cls.config, cls.root / "run")  # checkpoints 2 and 4

  def assert_refused(self, result: subprocess.CompletedProcess, pattern: str) -> None:
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertRegex(result.stderr, rf"^error: {pattern}")
    self.assertNotIn("Traceback", result.stderr)
    self.assertNotIn("flags:", result.stderr)  # absl's flag help
    self.assertNotIn("Failed to import", result.stdout + result.stderr)  # a quiet start

  def test_reused_run_folder(self):
    before = folder_digest(self.run_dir)
    result = run_cli(f"--run_dir={self.run_dir}", *TINY_FLAGS)
    self.assert_refused(result, rf"--run_dir={self.run_dir} already holds a run \(config\.json, "
                        rf"manifest\.json, ledger\.jsonl, checkpoints\); nothing was written\. "
                        rf"Continue that run with --resume={self.run_dir}, or start a new run "
                        r"with another --run_dir\.\n$")
    self.assertEqual(folder_digest(self.run_dir), before)
    # In Python too, with another config: the old run's checkpoints are all still there.
    with self.assertRaisesRegex(ValueError, "already holds a run"):
      train_lib.run(tiny_config(chunks=3, seed=1), self.run_dir)
    self.assertEqual(folder_digest(self.run_dir), before)
    self.assertEqual(checkpoint.steps(self.run_dir), [2, 4])

  def test_non_finite_value(self):
    # One field from the command line; tests/test_config.py refuses NaN and inf in every one.
    target = self.root / "never-nan"
    result = run_cli(f"--run_dir={target}", "--config.ppo.entropy_coef=nan")
    self.assert_refused(result, r"config\.ppo\.entropy_coef=nan is invalid: it must be a finite "
                        r"number \(not NaN or infinity\)\.\n$")
    self.assertFalse(target.exists())

  def test_unknown_field_value_is_one_line(self):
    result = run_cli("--config.num_envs=abc")
    self.assertEqual(result.returncode, 1)
    self.assertIn("--config.num_envs=abc", result.stderr)
    self.assertLessEqual(len(result.stderr.strip().splitlines()), 2)

  def test_malformed_mjcf_is_refused_before_the_folder_exists(self):
    robots_dir = self.root / "robots"
    shutil.rmtree(robots_dir, ignore_errors=True)
    shutil.copytree(REPO / "robots", robots_dir)
    go2 = robots_dir / "go2" / "go2.xml"
    go2.write_text(go2.read_text().replace("</mujoco>", ""))  # an unclosed root element
    target = self.root / "never-mjcf"
    script = ("import sys; from absl import app; from mjx_walk import train; from mjx_walk.sim import robots; "
              f"robots.ROBOTS_DIR = __import__('pathlib').Path({str(robots_dir)!r}); "
              "app.run(train.main)")
    result = subprocess.run([sys.executable, "-c", script, f"--run_dir={target}", *TINY_FLAGS],
                            capture_output=True, text=True, timeout=600, cwd=REPO)
    self.assert_refused(result, rf"malformed MJCF {robots_dir / 'go2' / 'scene.xml'}: ")
    self.assertIn("XML Error", result.stderr)  # MuJoCo's own words follow, on their lines
    self.assertFalse(target.exists())

  def test_malformed_mjcf_in_python(self):
    robots_dir = self.root / "robots-empty"
    (robots_dir / "go2").mkdir(parents=True, exist_ok=True)
    (robots_dir / "go2" / "scene.xml").write_text("<mujoco><worldbody><body></worldbody>")
    target = self.root / "never-mjcf-python"
    saved = robots.ROBOTS_DIR
    robots.ROBOTS_DIR = robots_dir
    try:
      with self.assertRaisesRegex(robots.RobotError, "malformed MJCF"):
        train_lib.run(tiny_config(), target)
    finally:
      robots.ROBOTS_DIR = saved
    self.assertFalse(target.exists())

  def test_every_checkpoint_unreadable(self):
    broken = self.root / "broken"
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(self.run_dir, broken)
    for step in checkpoint.steps(broken):
      victim = max((p for p in (checkpoint.directory(broken) / str(step) / "train").rglob("*")
                    if p.is_file()), key=lambda p: p.stat().st_size)
      victim.write_bytes(victim.read_bytes()[:100])
    before = folder_digest(broken)
    result = run_cli(f"--resume={broken}", "--config.total_env_steps=1000")
    self.assert_refused(result, rf"no intact checkpoint in {checkpoint.directory(broken)}; every "
                        "one failed verification:\n")
    self.assertIn(f"checkpoint step 4 at {checkpoint.directory(broken) / '4'}: unreadable",
                  result.stderr)
    self.assertIn(f"checkpoint step 2 at {checkpoint.directory(broken) / '2'}: unreadable",
                  result.stderr)
    # Only the newest one's notice promises an older one.
    self.assertEqual(result.stdout.count("trying an older one"), 1)
    self.assertEqual(folder_digest(broken), before)  # nothing moved, rewound or rewritten

  def test_resume_falls_back_past_a_corrupted_checkpoint_and_says_so(self):
    flipped = self.root / "flipped"
    shutil.rmtree(flipped, ignore_errors=True)
    shutil.copytree(self.run_dir, flipped)
    newest = checkpoint.directory(flipped) / "4"
    before = folder_digest(newest)
    for victim in (newest / "train").glob("**/d/*"):
      data = bytearray(victim.read_bytes())
      data[len(data) // 2] ^= 0xFF
      victim.write_bytes(bytes(data))
    flipped_digest = folder_digest(newest)
    self.assertNotEqual(flipped_digest, before)
    result = run_cli(f"--resume={flipped}")
    self.assertEqual(result.returncode, 0, result.stderr)
    # zstd-compressed data: a flipped byte breaks the frame or changes the numbers.
    self.assertRegex(result.stdout, rf"checkpoint step 4 at {newest}: (corrupted:\n    train/"
                     r"\w+: checksum mismatch|unreadable)")
    self.assertIn(f"restored step 2 from {checkpoint.directory(flipped) / '2'}, the newest intact "
                  "checkpoint", result.stdout)
    # The corrupted one is moved aside, not deleted, and the run ends where it would have.
    self.assertTrue((flipped / "checkpoints_unreadable" / "4").is_dir())
    self.assertEqual(checkpoint.steps(flipped), [2, 4])
    self.assertEqual(folder_digest(flipped / "checkpoints_unreadable" / "4"), flipped_digest)


class DivergenceTest(absltest.TestCase):

  def test_a_diverged_update_stops_the_run_and_keeps_the_good_checkpoints(self):
    # A learning rate of 10 without the adaptive rule takes the tiny run's parameters to inf at
    # update 7 (chunk 4); checkpoints are saved after chunks 1-3 (updates 2, 4, 6), and only
    # the newest is kept by the keep-policy.
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "run"
    result = run_cli(f"--run_dir={run_dir}", *TINY_FLAGS, "--config.total_env_steps=960",
                     "--config.ppo.learning_rate=10", "--config.ppo.desired_kl=0",
                     "--config.checkpoint.every_chunks=1", "--config.checkpoint.max_to_keep=1",
                     "--config.checkpoint.keep_best=false", "--config.panel.every_chunks=0")
    self.assertEqual(result.returncode, train_lib.EXIT_DIVERGED, result.stderr)
    self.assertNotIn("Traceback", result.stderr)
    self.assertRegex(result.stderr, r"^error: update 7 diverged: non-finite loss/total, "
                     r"loss/policy, .*params/actor.*\. The run stopped and saved nothing of the "
                     r"diverged state; every checkpoint up to update 6 is kept\. Resume from it "
                     rf"with:\n  python -m mjx_walk.train --resume={run_dir}\n")
    self.assertEqual(checkpoint.steps(run_dir), [6])
    records = ledger.read_run(run_dir)
    self.assertEqual(records[-1]["kind"], "divergence")
    self.assertEqual(records[-1]["update"], 7)
    self.assertEqual(records[-1]["last_checkpoint"], 6)
    self.assertIn("loss/grad_norm", records[-1]["nonfinite"])
    self.assertEqual([r["update"] for r in records if r["kind"] == "update"], list(range(1, 8)))
    self.assertIsNone(records[-2]["loss/total"])  # the diverged update's loss, as JSON null

    # The kept checkpoint is intact and finite (experiments/data_safety.py also resumes it).
    cfg = tiny_config(chunks=10)
    cfg.ppo.learning_rate, cfg.ppo.desired_kl = 10.0, 0.0
    cfg.checkpoint.max_to_keep, cfg.checkpoint.keep_best, cfg.panel.every_chunks = 1, False, 0
    trainer = trainer_lib.make_trainer(cfg)
    restored = checkpoint.restore(run_dir, jax.eval_shape(trainer.init, jax.random.key(0)), cfg,
                                  trainer.manifest)
    self.assertEqual(restored.step, 6)
    train = restored.carry.train
    for leaf in jax.tree.leaves((train.params, train.opt_state, train.normalizer)):
      self.assertTrue(np.isfinite(np.asarray(leaf)).all())


if __name__ == "__main__":
  absltest.main()
