"""Tests for mjx_walk.train as a user meets it: what a new run prints and writes, what it refuses,
what it never touches, and how a diverged run stops.

The command's `main` runs in-process (tests/commands.py): every refusal is one `error:` line on
stderr, with no traceback and no flag help, and exit status 2, and the run folder's checksums are
the same before and after. One test runs the real command line in a subprocess, because a fresh
process is its point: nothing is printed while the package imports (a quiet start), and absl's
`app.run` turns the refusal into the process's exit status.
"""

import json
import math
import pathlib
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

from absl.testing import absltest
import chex
import jax

from mjx_walk import report as report_cli
from mjx_walk import runner
from mjx_walk import train as train_lib
from mjx_walk.analysis import videos as videos_lib
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import run_folder
from mjx_walk.sim import families
from mjx_walk.sim import robots

import commands
import configs
import runs
import pictures

REPO = pathlib.Path(__file__).resolve().parent.parent

# The tiny config of tests/configs.py as command-line flags.
TINY_FLAGS = [f"--config.{name.replace('__', '.')}={value}"
              for name, value in configs.TINY.items()]


def tiny_config(chunks: int = 2, **changes):
  return configs.tiny(chunks, panel__every_chunks=2, checkpoint__every_chunks=1, **changes)


# What mujoco.Renderer raises in a process started with MUJOCO_GL=disable.
NO_GL = AttributeError("module 'mujoco.rendering.classic.gl_context' has no attribute 'GLContext'")


def assert_videos(test: absltest.TestCase, run_dir: pathlib.Path, update: int,
                  config) -> list[pathlib.Path]:
  """The run rendered one MP4 per stratum of `update`'s traced episodes: each decodes to one
  frame per `control_hz / video_fps` control steps of its episode, of the configured size.
  Returns the videos."""
  saved = trace_files.load_eval_traces(run_folder.RunFolder(run_dir).eval_traces_path(update))
  every = round(config.env.control_hz / config.report.video_fps)
  paths = []
  for s, stratum in enumerate(config.panel.strata):
    path = run_dir / run_folder.VIDEOS / str(update) / f"{stratum}.mp4"
    test.assertTrue(path.is_file(), f"{path} was not rendered")
    frames, fps = pictures.read_video(path)
    test.assertEqual(frames.shape, (math.ceil(int(saved.traces.length[s]) / every),
                                    config.report.video_height, config.report.video_width, 3))
    test.assertEqual(fps, config.report.video_fps)
    paths.append(path)
  return paths


def assert_refused(test: absltest.TestCase, ran: commands.Ran, pattern: str) -> None:
  """`ran` is a refusal: exit status 2 and an `error:` message matching `pattern`, with no
  traceback and no flag help."""
  test.assertEqual(ran.status, 2, ran.err)
  test.assertRegex(ran.err, rf"^error: {pattern}")
  test.assertNotIn("Traceback", ran.err)
  test.assertNotIn("flags:", ran.err)  # absl's flag help


class CommandTest(absltest.TestCase):
  """One tiny run started from the command line, then the command's refusals next to it.

  The run renders videos after each of its two chunks. The first rendering fails as it does in a
  process without a GL context (mujoco.Renderer raises what it raises under MUJOCO_GL=disable);
  the second, at the end of the run, renders.
  """

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    runs.warm()  # the tiny config's programs, compiled once for every worker
    cls.root = pathlib.Path(tempfile.mkdtemp(prefix="train_command_"))
    cls.run_dir = cls.root / "run"
    cls.config = tiny_config(report__video_every_chunks=1)
    renderer = videos_lib.mujoco.Renderer
    made = []

    def first_without_gl(*args, **kwargs):
      made.append(None)
      if len(made) == 1:
        raise NO_GL
      return renderer(*args, **kwargs)

    with mock.patch.object(videos_lib.mujoco, "Renderer", side_effect=first_without_gl):
      cls.ran = commands.run_main(
          train_lib.main, f"--run_dir={cls.run_dir}", *TINY_FLAGS,
          f"--config.total_env_steps={cls.config.total_env_steps}",
          "--config.panel.every_chunks=2", "--config.checkpoint.every_chunks=1",
          "--config.report.video_every_chunks=1")

  def run_main(self, *args: str) -> commands.Ran:
    return commands.run_main(train_lib.main, *args)

  def assert_refused(self, ran: commands.Ran, pattern: str) -> None:
    assert_refused(self, ran, pattern)

  def test_a_new_run_prints_its_progress_and_writes_its_folder(self):
    self.assertEqual((self.ran.status, self.ran.err), (0, ""))
    folder = run_folder.RunFolder.open(self.run_dir)
    # The flags built exactly the tiny config, and the folder holds the whole run.
    self.assertEqual(folder.read_config(), self.config)
    self.assertEqual(checkpoint.steps(self.run_dir), [2, 4])
    records = ledger.read_run(self.run_dir)
    self.assertEqual([r["update"] for r in ledger.of_kind(records, "update")], [1, 2, 3, 4])
    # Evaluated with videos after each chunk (report.video_every_chunks=1).
    first, evaluation = ledger.of_kind(records, "eval")
    self.assertEqual((first["update"], evaluation["update"]), (2, 4))
    self.assertTrue(folder.eval_path(4).is_file())
    self.assertTrue(folder.eval_traces_path(4).is_file())
    self.assertTrue(folder.report_path.is_file())
    # The final evaluation's videos exist, and the report links each one.
    videos = assert_videos(self, self.run_dir, 4, self.config)
    text = folder.report_path.read_text()
    for path in videos:
      self.assertIn(f"]({run_folder.VIDEOS}/4/{path.name})", text)
    self.assertRegex(self.ran.out, rf"\n5 videos in {self.run_dir / run_folder.VIDEOS / '4'} "
                     r"\(\d+ s\)\n")
    lines = self.ran.out.splitlines()
    self.assertEqual(lines[0], f"run folder: {self.run_dir}")
    recipe = ledger.format_recipe(ledger.latest(records, "recipe")).splitlines()
    self.assertEqual(lines[1:1 + len(recipe)], recipe)
    progress = [line for line in lines if line.startswith("steps ")]
    self.assertLen(progress, 2)
    self.assertIn("(includes compile: ", progress[0])
    self.assertTrue(progress[1].startswith(f"steps {192:>11,}/192  sps"), progress[1])
    self.assertIn(f"held-out panel at 96 env steps:\n{ledger.format_eval_table(first)}\n",
                  self.ran.out)
    self.assertIn(f"held-out panel, final policy (192 env steps):\n"
                  f"{ledger.format_eval_table(evaluation)}\n", self.ran.out)
    self.assertTrue(lines[-1].startswith(f"done. config: {folder.config_path}  "), lines[-1])

  def test_an_unexpected_argument(self):
    target = self.root / "never-argument"
    ran = self.run_main(f"--run_dir={target}", "extra")
    self.assert_refused(ran, r"unexpected arguments: \['extra'\]\n$")
    self.assertFalse(target.exists())

  def test_resume_and_run_dir_together(self):
    before = commands.folder_digest(self.run_dir)
    target = self.root / "never-both"
    ran = self.run_main(f"--resume={self.run_dir}", f"--run_dir={target}")
    self.assert_refused(ran, r"give --resume=<run folder> or --run_dir, not both\n$")
    self.assertFalse(target.exists())
    self.assertEqual(commands.folder_digest(self.run_dir), before)

  def test_reused_run_folder(self):
    before = commands.folder_digest(self.run_dir)
    ran = self.run_main(f"--run_dir={self.run_dir}", *TINY_FLAGS)
    self.assert_refused(ran, rf"--run_dir={self.run_dir} already holds a run \(config\.json, "
                        rf"manifest\.json, ledger\.jsonl, checkpoints\); nothing was written\. "
                        rf"Continue that run with --resume={self.run_dir}, or start a new run "
                        r"with another --run_dir\.\n$")
    self.assertEqual(ran.out, "")
    self.assertEqual(commands.folder_digest(self.run_dir), before)
    # In Python too, with another config: the old run's checkpoints are all still there.
    with self.assertRaisesRegex(ValueError, "already holds a run"):
      runner.run(tiny_config(chunks=3, seed=1), self.run_dir)
    self.assertEqual(commands.folder_digest(self.run_dir), before)
    self.assertEqual(checkpoint.steps(self.run_dir), [2, 4])

  def test_non_finite_value(self):
    # One field from the command line; tests/test_config.py refuses NaN and inf in every one.
    target = self.root / "never-nan"
    ran = self.run_main(f"--run_dir={target}", "--config.ppo.entropy_coef=nan")
    self.assert_refused(ran, r"config\.ppo\.entropy_coef=nan is invalid: it must be a finite "
                        r"number \(not NaN or infinity\)\.\n$")
    self.assertFalse(target.exists())

  def test_a_resume_that_changes_the_computation(self):
    before = commands.folder_digest(self.run_dir)
    ran = self.run_main(f"--resume={self.run_dir}", "--config.ppo.learning_rate=0.01",
                        "--config.total_env_steps=1000")
    self.assert_refused(ran, rf"--resume={self.run_dir}: this config changes what the run "
                        r"computes, so it would not be the same run:\n"
                        r"  ppo\.learning_rate: 0\.001 -> 0\.01\n"
                        r"Only .* may change on a resume; start a new run for the others\.\n$")
    self.assertEqual(commands.folder_digest(self.run_dir), before)

  def test_a_blind_run_resumed_with_the_height_scan(self):
    # The scan adds an observation block: a blind checkpoint cannot continue with it (and the
    # reverse is the same field changed back).
    before = commands.folder_digest(self.run_dir)
    ran = self.run_main(f"--resume={self.run_dir}", "--config.scan.enabled=True")
    self.assert_refused(ran, rf"--resume={self.run_dir}: this config changes what the run "
                        r"computes, so it would not be the same run:\n"
                        r"  scan\.enabled: False -> True\n")
    self.assertEqual(commands.folder_digest(self.run_dir), before)

  def test_unknown_field_value_is_one_line(self):
    # absl parses the flags, as `app.run` does: status 1 and its one-line message.
    ran = self.run_main("--config.num_envs=abc")
    self.assertEqual(ran.status, 1)
    self.assertIn("--config.num_envs=abc", ran.err)
    self.assertLessEqual(len(ran.err.strip().splitlines()), 2)

  def test_malformed_mjcf_is_refused_before_the_folder_exists(self):
    robots_dir = self.root / "robots"
    shutil.copytree(REPO / "robots", robots_dir)
    go2 = robots_dir / "go2" / "go2.xml"
    go2.write_text(go2.read_text().replace("</mujoco>", ""))  # an unclosed root element
    target = self.root / "never-mjcf"
    with mock.patch.object(robots, "ROBOTS_DIR", robots_dir):
      ran = self.run_main(f"--run_dir={target}", *TINY_FLAGS)
    self.assert_refused(ran, rf"malformed MJCF {robots_dir / 'go2' / 'scene.xml'}: ")
    self.assertIn("XML Error", ran.err)  # MuJoCo's own words follow, on their lines
    self.assertFalse(target.exists())

  def test_malformed_mjcf_in_python(self):
    robots_dir = self.root / "robots-empty"
    (robots_dir / "go2").mkdir(parents=True)
    (robots_dir / "go2" / "scene.xml").write_text("<mujoco><worldbody><body></worldbody>")
    target = self.root / "never-mjcf-python"
    with mock.patch.object(robots, "ROBOTS_DIR", robots_dir):
      with self.assertRaisesRegex(robots.RobotError, "malformed MJCF"):
        runner.run(tiny_config(), target)
    self.assertFalse(target.exists())

  def test_every_checkpoint_unreadable(self):
    broken = self.root / "broken"
    shutil.copytree(self.run_dir, broken)
    for step in checkpoint.steps(broken):
      victim = max((p for p in (checkpoint.directory(broken) / str(step) / "train").rglob("*")
                    if p.is_file()), key=lambda p: p.stat().st_size)
      victim.write_bytes(victim.read_bytes()[:100])
    before = commands.folder_digest(broken)
    ran = self.run_main(f"--resume={broken}", "--config.total_env_steps=1000")
    self.assert_refused(ran, rf"no intact checkpoint in {checkpoint.directory(broken)}; every "
                        "one failed verification:\n")
    self.assertIn(f"checkpoint step 4 at {checkpoint.directory(broken) / '4'}: unreadable",
                  ran.err)
    self.assertIn(f"checkpoint step 2 at {checkpoint.directory(broken) / '2'}: unreadable",
                  ran.err)
    # Only the newest one's notice promises an older one.
    self.assertEqual(ran.out.count("trying an older one"), 1)
    self.assertEqual(commands.folder_digest(broken), before)  # nothing moved, rewound or rewritten

  def test_videos_that_could_not_be_rendered_are_said_missing_in_the_output_and_the_report(
      self):
    # Catches a rendering failure swallowed silently: the run must go on, say that the videos
    # of update 2 were not rendered and why, and its report.md must say so too, beside the
    # videos of update 4 that were rendered.
    folder = run_folder.RunFolder.open(self.run_dir)
    reason = f"AttributeError: {NO_GL}"
    self.assertIn(f"\nvideos of update 2 NOT rendered ({reason}); report.md says so. The traces "
                  f"are in {folder.eval_traces_path(2)}; render them on a machine with OpenGL "
                  f"with: python -m mjx_walk.report {self.run_dir} --step=2\n", self.ran.out)
    self.assertEqual(list(folder.videos_dir(2).glob("*.mp4")), [])
    self.assertEqual(json.loads((folder.videos_dir(2) / videos_lib.NOT_RENDERED_FILENAME).read_text()),
                     {"update": 2, "reason": reason})
    text = folder.report_path.read_text()
    self.assertIn(f"**The videos of update 2 were not rendered**: {reason}. Its traced episodes "
                  "are in `eval/2_traces.npz`; `python -m mjx_walk.report <run> --step=2` "
                  "renders them on a machine with OpenGL.", text)
    self.assertEqual(text.count("not rendered"), 1)  # update 4's were
    self.assertIn(f"]({run_folder.VIDEOS}/4/flat.mp4)", text)

  def test_the_command_the_run_gives_renders_the_missing_videos(self):
    # With a GL context, `report --step=2` renders update 2's saved traces, and the report then
    # links those videos instead of the notice.
    run_dir = self.root / "rendered-later"
    shutil.copytree(self.run_dir, run_dir)
    ran = commands.run_main(report_cli.main, str(run_dir), "--step=2")
    self.assertEqual((ran.status, ran.err), (0, ""))
    text = run_folder.RunFolder(run_dir).report_path.read_text()
    self.assertNotIn("not rendered", text)
    for path in assert_videos(self, run_dir, 2, self.config):
      self.assertIn(f"]({run_folder.VIDEOS}/2/{path.name})", text)

  def test_resume_falls_back_past_a_corrupted_checkpoint_and_says_so(self):
    flipped = self.root / "flipped"
    shutil.copytree(self.run_dir, flipped)
    newest = checkpoint.directory(flipped) / "4"
    before = commands.folder_digest(newest)
    for victim in (newest / "train").glob("**/d/*"):
      data = bytearray(victim.read_bytes())
      data[len(data) // 2] ^= 0xFF
      victim.write_bytes(bytes(data))
    flipped_digest = commands.folder_digest(newest)
    self.assertNotEqual(flipped_digest, before)
    ran = self.run_main(f"--resume={flipped}")
    self.assertEqual(ran.status, 0, ran.err)
    # zstd-compressed data: a flipped byte breaks the frame or changes the numbers.
    self.assertRegex(ran.out, rf"checkpoint step 4 at {newest}: (corrupted:\n    train/"
                     r"\w+: checksum mismatch|unreadable)")
    self.assertIn(f"restored step 2 from {checkpoint.directory(flipped) / '2'}, the newest intact "
                  "checkpoint", ran.out)
    # The corrupted one is moved aside, not deleted, and the run ends where it would have.
    self.assertTrue((flipped / "checkpoints_unreadable" / "4").is_dir())
    self.assertEqual(checkpoint.steps(flipped), [2, 4])
    self.assertEqual(commands.folder_digest(flipped / "checkpoints_unreadable" / "4"),
                     flipped_digest)


class RefusalWithoutATrainedRunTest(absltest.TestCase):
  """Refusals whose inputs need no training: each one `error:` line, exit status 2, nothing
  written or changed."""

  def test_resume_of_a_folder_without_checkpoints(self):
    # A run killed before its first checkpoint: refused by name, before anything compiles, and
    # nothing in the folder changes.
    empty = pathlib.Path(self.create_tempdir().full_path) / "run"
    cfg = tiny_config()
    run_folder.RunFolder.create(empty, cfg, families.make_manifest(cfg))
    checkpoint.directory(empty).mkdir()
    before = commands.folder_digest(empty)
    ran = commands.run_main(train_lib.main, f"--resume={empty}")
    assert_refused(self, ran, rf"--resume={empty}: there is no checkpoint in "
                   rf"{checkpoint.directory(empty)}; a resume continues from a saved checkpoint, "
                   r"so start a new run \(another --run_dir\) instead\n$")
    self.assertEqual(ran.out, "")
    self.assertEqual(commands.folder_digest(empty), before)

  def test_a_config_file_that_raises(self):
    # The file is the user's code: an exception in it, at import or in get_config(), is one
    # `error:` line naming the file, the line and the exception, while the flags are parsed;
    # never a traceback, and no run folder is created.
    files = {  # name: (code, the line that raises, the exception)
        "raises_in_get_config.py": ("def get_config():\n  raise KeyError('DATA_DIR')\n", 2,
                                    "KeyError: 'DATA_DIR'"),
        "raises_at_import.py": ("import os\nSCALE = 1 / 0\n", 2,
                                "ZeroDivisionError: division by zero"),
    }
    root = pathlib.Path(self.create_tempdir().full_path)
    for name, (code, line, raised) in files.items():
      path = root / name
      path.write_text(code)
      target = root / f"never-{path.stem}"
      ran = commands.run_main(train_lib.main, f"--config={path}", f"--run_dir={target}")
      self.assertEqual((ran.status, ran.out), (2, ""), ran.err)
      self.assertEqual(ran.err, f"error: --config={path}: line {line} raised {raised}; a config "
                       "file must run without error and define get_config() returning a "
                       "TrainConfig\n")
      self.assertFalse(target.exists())

  def test_a_contact_budget_below_the_feet(self):
    # The robot is loaded with the run's heightfield (for the trainer's env), and checked, before
    # anything is written.
    target = pathlib.Path(self.create_tempdir().full_path) / "never-budget"
    ran = commands.run_main(train_lib.main, *TINY_FLAGS, "--config.terrain.ground=heightfield",
                            "--config.families.spawn_offset=0.2",
                            "--config.terrain.max_contact_points=2", f"--run_dir={target}")
    assert_refused(self, ran, r"config\.terrain\.max_contact_points=2 is invalid: it must be 0 "
                   r"\(every contact slot\) or at least the 4 feet of go2\n$")
    self.assertFalse(target.exists())


class ProcessTest(absltest.TestCase):

  def test_the_command_line_starts_quietly_and_refuses_in_one_line(self):
    target = pathlib.Path(self.create_tempdir().full_path) / "never"
    result = subprocess.run(
        [sys.executable, "-m", "mjx_walk.train", f"--run_dir={target}",
         "--config.ppo.entropy_coef=nan"], capture_output=True, text=True, timeout=600, cwd=REPO)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertEqual(result.stderr, "error: config.ppo.entropy_coef=nan is invalid: it must be a "
                     "finite number (not NaN or infinity).\n")
    self.assertEqual(result.stdout, "")  # no `Failed to import warp` from MJX, nothing else
    self.assertFalse(target.exists())


class DivergenceTest(absltest.TestCase):

  def test_a_diverged_update_stops_the_run_and_keeps_the_good_checkpoints(self):
    # A run of the tiny config saved at update 2 whose critic output bias is 1e30: finite, so
    # the checkpoint saves and verifies, but every value is then ~1e30 and the value loss
    # (~1e56) overflows float32 in the first update after it. Resumed for two more chunks, the
    # run must stop at update 3 with the guard's names, keep checkpoint 2 as it was, and save
    # nothing of the diverged state. (A poisoned state rather than a learning rate that drives
    # the parameters off: the run then uses the tiny config's compiled chunk.)
    cfg = tiny_config(chunks=1)
    cfg.checkpoint.max_to_keep, cfg.checkpoint.keep_best, cfg.panel.every_chunks = 1, False, 0
    trainer = trainer_lib.make_trainer(cfg)
    carry, _ = trainer.train_chunk(trainer.init(jax.random.key(0)))
    critic = jax.tree_util.tree_map_with_path(
        lambda path, x: x.at[0].set(1e30) if "out" in jax.tree_util.keystr(path)
        and x.ndim == 1 else x, carry.train.params.critic)
    carry = carry.replace(train=carry.train.replace(
        params=carry.train.params.replace(critic=critic)))
    saved = jax.device_get(carry.train)
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "run"
    run_folder.RunFolder.create(run_dir, cfg, trainer.manifest)
    saver = checkpoint.Checkpointer(run_dir, cfg, trainer.manifest)
    saver.save(carry, wall_seconds=0.0)
    saver.close()

    ran = commands.run_main(train_lib.main, f"--resume={run_dir}",
                            f"--config.total_env_steps={3 * cfg.env_steps_per_chunk}")
    self.assertEqual(ran.status, train_lib.EXIT_DIVERGED, ran.err)
    self.assertNotIn("Traceback", ran.err)
    self.assertRegex(ran.err, r"^error: update 3 diverged: non-finite loss/total, .*loss/value"
                     r".*\. The run stopped and saved nothing of the diverged state; every "
                     r"checkpoint up to update 2 is kept\. Resume from it "
                     rf"with:\n  python -m mjx_walk.train --resume={run_dir}\n")
    self.assertEqual(checkpoint.steps(run_dir), [2])
    records = ledger.read_run(run_dir)
    self.assertEqual(records[-1]["kind"], "divergence")
    self.assertEqual(records[-1]["update"], 3)
    self.assertEqual(records[-1]["last_checkpoint"], 2)
    self.assertIn("loss/value", records[-1]["nonfinite"])
    self.assertEqual([r["update"] for r in ledger.of_kind(records, "update")], [3])
    self.assertIsNone(records[-2]["loss/total"])  # the diverged update's loss, as JSON null

    # The kept checkpoint is the state that was saved, bit for bit.
    restored = checkpoint.restore(run_dir, jax.eval_shape(trainer.init, jax.random.key(0)),
                                  run_folder.RunFolder.open(run_dir).read_config(),
                                  trainer.manifest)
    self.assertEqual(restored.step, 2)
    chex.assert_trees_all_equal(
        jax.device_get((restored.carry.train.params, restored.carry.train.opt_state,
                        restored.carry.train.normalizer)),
        (saved.params, saved.opt_state, saved.normalizer))


if __name__ == "__main__":
  absltest.main()
