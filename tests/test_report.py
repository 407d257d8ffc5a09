"""Tests for mjx_walk.analysis.report and the `python -m mjx_walk.report` command: the report of a
small real run, with every plot, its videos and captions, the saved traces it renders, and the
command's output and refusals, run in-process (tests/commands.py)."""

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

from absl.testing import absltest
import numpy as np

from mjx_walk import report as report_cli
from mjx_walk.analysis import plots as plots_lib
from mjx_walk.analysis import report
from mjx_walk.analysis import videos
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import families

import commands
import configs
import runs
import pictures
import test_plots

REPO = pathlib.Path(__file__).resolve().parent.parent
ALWAYS_PLOTTED = ("learning_curve", "latest_eval", "reward_terms", "reset_reasons")
AUDIT_PLOTS = ("contact_events", "fall_histograms")


class RunReportTest(absltest.TestCase):
  """One small real run, trained once; the report with videos built once from it."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # Two chunks of 8 envs, 5-step episodes (so episodes end), a 5-env panel of 5-step episodes.
    cls.config = runs.trained_config()
    cls.run_dir = runs.trained("report_fixture_")
    cls.records = ledger.read_run(cls.run_dir)
    # The run saved no traces, so --videos evaluates its newest checkpoint with traces.
    cls.built = report.build(cls.run_dir, videos=True, log=lambda *_: None)
    cls.text = cls.built.report.read_text()

  def test_every_plot_is_a_png_linked_from_the_report(self):
    names = [plot.name for plot in self.built.plots]
    self.assertEqual(names, list(ALWAYS_PLOTTED + AUDIT_PLOTS))
    required = ALWAYS_PLOTTED + AUDIT_PLOTS
    for plot in self.built.plots:
      if plot.name in required:
        self.assertIsNotNone(plot.path, f"{plot.name} skipped: {plot.note}")
      if plot.path is None:
        self.assertIn(plot.note, self.text)  # a skipped plot says why
        continue
      pictures.assert_png(self, plot.path)
      self.assertEqual(plot.path.parent, self.run_dir / run_folder.PLOTS)
      self.assertIn(f"]({run_folder.PLOTS}/{plot.path.name})", self.text)

  def test_report_sections(self):
    recipe = ledger.latest(self.records, "recipe")
    evaluation = ledger.latest(self.records, "eval")
    self.assertIn(ledger.format_recipe(recipe), self.text)
    self.assertIn(ledger.format_eval_table(evaluation), self.text)
    self.assertIn("## Audit flags", self.text)
    manifest = run_folder.RunFolder(self.run_dir).read_manifest()
    self.assertIn(manifest.panel_hash, self.text)
    for family in manifest.eval_families:  # every held-out family's seed, by stratum
      self.assertIn(f"| {family.stratum} | 1 | {family.seed} |", self.text)
    self.assertIn("`command_vx`", self.text)  # the ranges

  def test_videos_one_per_stratum_with_captions(self):
    update = ledger.latest(self.records, "update")["update"]
    self.assertEqual(self.built.traces, self.run_dir / "eval" / f"{update}_traces.npz")
    folder = self.run_dir / run_folder.VIDEOS / str(update)
    self.assertEqual(self.built.videos,
                     [folder / f"{stratum}.mp4" for stratum in self.config.panel.strata])
    captions = json.loads((folder / videos.CAPTIONS_FILENAME).read_text())["videos"]
    every = self.config.env.control_hz // self.config.report.video_fps
    for stratum, path in zip(self.config.panel.strata, self.built.videos):
      caption = captions[stratum]
      frames, _ = pictures.read_video(path)
      self.assertLen(frames, math.ceil(caption["length_steps"] / every))
      self.assertEqual(frames[0].shape, (self.config.report.video_height,
                                         self.config.report.video_width, 3))
      self.assertIn(caption["end_reason"], endings.REASON_NAMES)
      self.assertAlmostEqual(caption["commands"][0]["start_s"], 0.0)
      self.assertAlmostEqual(caption["commands"][-1]["end_s"], caption["seconds"])
      self.assertIn(f"]({run_folder.VIDEOS}/{update}/{stratum}.mp4)", self.text)
      self.assertIn(f"ended by **{caption['end_reason']}**", self.text)

  def test_saved_traces_describe_the_panel(self):
    saved = trace_files.load_eval_traces(self.built.traces)
    manifest = run_folder.RunFolder(self.run_dir).read_manifest()
    self.assertEqual(saved.strata, tuple(self.config.panel.strata))
    self.assertEqual(saved.family_seeds, tuple(f.seed for f in manifest.eval_families))
    self.assertEqual(saved.panel_hash, manifest.panel_hash)
    steps = round(self.config.panel.episode_seconds * self.config.env.control_hz)
    self.assertEqual(saved.traces.qpos.shape[:2], (len(self.config.panel.strata), steps))
    # The slope family's gravity is tilted by the panel's slope angle.
    slope = saved.traces.gravity[saved.strata.index("slope")]
    tilt = np.degrees(np.arccos(-slope[2] / np.linalg.norm(slope)))
    self.assertAlmostEqual(tilt, self.config.panel.slope_degrees, places=3)

  def test_a_step_that_is_not_saved_is_refused_by_name(self):
    with self.assertRaisesRegex(checkpoint.CheckpointError, "no checkpoint at step 3"):
      report.build(self.run_dir, step=3, log=lambda *_: None)

  def test_command_writes_the_plots_and_the_report(self):
    ran = commands.run_main(report_cli.main, str(self.run_dir))
    self.assertEqual((ran.status, ran.err), (0, ""))
    plots = self.run_dir / run_folder.PLOTS
    self.assertEqual(ran.out.splitlines(),
                     [f"plot   {plots / name}.png" for name in ALWAYS_PLOTTED + AUDIT_PLOTS]
                     + [f"report {self.run_dir / 'report.md'}"])
    for name in ALWAYS_PLOTTED + AUDIT_PLOTS:
      pictures.assert_png(self, plots / f"{name}.png")

  def test_command_renders_the_newest_saved_traces(self):
    update = ledger.latest(self.records, "update")["update"]
    folder = self.run_dir / run_folder.VIDEOS / str(update)
    ran = commands.run_main(report_cli.main, str(self.run_dir), "--videos")
    self.assertEqual((ran.status, ran.err), (0, ""))
    # The traces saved when the fixture was built are rendered: no new evaluation.
    plots = self.run_dir / run_folder.PLOTS
    self.assertEqual(ran.out.splitlines(),
                     [f"rendering the traced episodes of update {update}..."]
                     + [f"plot   {plots / name}.png" for name in ALWAYS_PLOTTED + AUDIT_PLOTS]
                     + [f"traces {self.built.traces}"]
                     + [f"video  {folder / stratum}.mp4" for stratum in self.config.panel.strata]
                     + [f"captions {folder / videos.CAPTIONS_FILENAME}",
                        f"report {self.run_dir / 'report.md'}"])

  def test_command_refuses_a_step_that_is_not_saved(self):
    before = commands.folder_digest(self.run_dir)
    ran = commands.run_main(report_cli.main, str(self.run_dir), "--step=3")
    self.assertEqual(ran.status, 1)
    self.assertEqual(ran.err, f"error: no checkpoint at step 3 in "
                     f"{self.run_dir.resolve() / run_folder.CHECKPOINTS}; saved steps: [2, 4]\n")
    self.assertEqual(ran.out, "")
    self.assertEqual(commands.folder_digest(self.run_dir), before)

  def copy_of_the_run(self) -> pathlib.Path:
    copy = pathlib.Path(self.create_tempdir().full_path) / "run"
    shutil.copytree(self.run_dir, copy)
    return copy

  def test_command_refuses_a_malformed_ledger_writing_nothing(self):
    # A ledger line cut short (a disk that filled up, a hand edit): refused naming the file and
    # the line, before a plot or the report is rewritten.
    run_dir = self.copy_of_the_run()
    path = run_dir / ledger.FILENAME
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:len(lines[1]) // 2] + "\n"
    path.write_text("".join(lines))
    before = commands.folder_digest(run_dir)
    ran = commands.run_main(report_cli.main, str(run_dir))
    self.assertEqual((ran.status, ran.out), (1, ""))
    self.assertRegex(ran.err, rf"^error: {path}:2: malformed ledger line \([^\n]+\)\n$")
    self.assertEqual(commands.folder_digest(run_dir), before)

  def test_command_refuses_a_corrupted_checkpoint_writing_nothing(self):
    # --videos on a run without saved traces evaluates its newest checkpoint, whose policy bytes
    # are flipped here: refused by name before anything is evaluated, rendered or written.
    run_dir = self.copy_of_the_run()
    for traces in (run_dir / run_folder.EVAL).glob(f"*{run_folder.TRACES_SUFFIX}"):
      traces.unlink()
    newest = run_dir / run_folder.CHECKPOINTS / "4"
    runs.flip_bytes(newest)
    before = commands.folder_digest(run_dir)
    ran = commands.run_main(report_cli.main, str(run_dir), "--videos")
    self.assertEqual((ran.status, ran.out), (1, ""))
    self.assertRegex(ran.err, rf"^error: checkpoint step 4 at {newest.resolve()}: "
                     r"(corrupted:\n    policy/\w+: checksum mismatch|unreadable \()")
    self.assertEqual(ran.err.count("error:"), 1)
    self.assertEqual(commands.folder_digest(run_dir), before)

  def test_command_without_a_gl_backend_refuses_before_evaluating(self):
    # A process whose MuJoCo has no GL context (MUJOCO_GL=disable, as a machine without EGL or
    # OSMesa leaves it) asked to render checkpoint 2, which has no saved traces. Catches a
    # command that evaluates and writes the traces first and then fails (with a traceback).
    run_dir = self.copy_of_the_run()
    before = commands.folder_digest(run_dir)
    result = subprocess.run(
        [sys.executable, "-m", "mjx_walk.report", str(run_dir), "--step=2"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env=dict(os.environ, MUJOCO_GL="disable"))
    self.assertEqual((result.returncode, result.stdout), (1, ""), result.stderr)
    self.assertEqual(result.stderr, "error: cannot render videos: no offscreen OpenGL context in "
                     "this process with MUJOCO_GL='disable' (AttributeError: module "
                     "'mujoco.rendering.classic.gl_context' has no attribute 'GLContext'); set "
                     "MUJOCO_GL=egl (or osmesa, software) with its libraries installed before "
                     "mujoco is first imported, or build the report without --videos and --step\n")
    self.assertEqual(commands.folder_digest(run_dir), before)

  def test_command_wants_one_run_folder(self):
    for args in ((), (str(self.run_dir), str(self.run_dir))):
      ran = commands.run_main(report_cli.main, *args)
      self.assertEqual(ran.status, 2)
      self.assertEqual(ran.err, "error: give one run folder: python -m mjx_walk.report "
                       f"runs/<run> [--videos] [--step=N]; got {list(args)}\n")
      self.assertEqual(ran.out, "")

  def test_command_names_a_missing_run_folder(self):
    missing = self.run_dir.parent / "no_such_run"
    ran = commands.run_main(report_cli.main, str(missing))
    self.assertEqual((ran.status, ran.err, ran.out),
                     (1, f"error: no run folder at {missing}\n", ""))
    self.assertFalse(missing.exists())


class CurriculumReportTest(absltest.TestCase):
  """The report of a heightfield run's ledger links the curriculum plot and says what it shows;
  the ledger is constructed (tests/test_plots.py), so nothing trains."""

  def test_the_curriculum_plot_is_linked_with_its_sentence(self):
    cfg = configs.tiny(terrain__ground="heightfield", families__spawn_offset=0.2)
    manifest = families.make_manifest(cfg)
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    records = test_plots.terrain_ledger()
    plots = plots_lib.make_plots(run_dir, records, cfg)
    path = report.write_report(run_dir, records, cfg, manifest, plots)
    text = path.read_text()
    curriculum = plots[-1]
    self.assertEqual(curriculum.name, "curriculum")
    self.assertIn(f"![{curriculum.title}]({run_folder.PLOTS}/curriculum.png)\n\n"
                  f"{curriculum.caption}", text)
    pictures.assert_png(self, run_dir / run_folder.PLOTS / "curriculum.png")


if __name__ == "__main__":
  absltest.main()
