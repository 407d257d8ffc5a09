"""Tests for mjx_walk.report: the report of a small real run, with every plot, its videos and
captions; offscreen frames that show the robot; MP4s that decode to the frames written; plots
from constructed audit records; and clear errors for bad input."""

import json
import math
import pathlib
import subprocess
import sys
import tempfile
import warnings

from absl.testing import absltest
import imageio.v2 as imageio
import mujoco
import numpy as np

import configs
from mjx_walk.run import checkpoint
from mjx_walk import config as config_lib
from mjx_walk.learn import audit
from mjx_walk.sim import env as env_lib
from mjx_walk.analysis import panel
from mjx_walk.sim import families
from mjx_walk.run import ledger
from mjx_walk.analysis import report
from mjx_walk.sim import robots
from mjx_walk.run import run_folder
from mjx_walk import train as train_lib

REPO = pathlib.Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALWAYS_PLOTTED = ("learning_curve", "latest_eval", "reward_terms", "reset_reasons")
AUDIT_PLOTS = ("contact_events", "fall_histograms")


def tiny_config() -> config_lib.TrainConfig:
  """Two chunks of 8 envs, 5-step episodes (so episodes end), a 5-env panel of 5-step episodes."""
  return configs.tiny(panel__every_chunks=1, checkpoint__every_chunks=1)


def _assert_png(test: absltest.TestCase, path: pathlib.Path) -> None:
  test.assertTrue(path.is_file(), f"{path} was not written")
  test.assertEqual(path.read_bytes()[:8], PNG_SIGNATURE, f"{path} is not a PNG")
  test.assertGreater(path.stat().st_size, 5_000, f"{path} is suspiciously small")


def _read_video(path: pathlib.Path) -> tuple[np.ndarray, float]:
  """(uint8 [F, H, W, 3] decoded frames, frames per second) of an MP4."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")  # ffmpeg fork + exec
    reader = imageio.get_reader(path, format="FFMPEG")
    try:
      return np.stack([frame for frame in reader]), reader.get_meta_data()["fps"]
    finally:
      reader.close()


def _robot_pixels(segmentation: np.ndarray, model: mujoco.MjModel) -> int:
  """Pixels of a segmentation image [H, W, 2] (object id, type) showing a geom of the robot."""
  ids, types = segmentation[..., 0], segmentation[..., 1]
  geom = (types == mujoco.mjtObj.mjOBJ_GEOM) & (ids >= 0)
  robot = np.zeros_like(geom)
  robot[geom] = model.geom_bodyid[ids[geom]] != 0  # body 0 is the world (the floor)
  return int(robot.sum())


class RunReportTest(absltest.TestCase):
  """One small real run, trained once; the report with videos built once from it."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = tiny_config()
    cls.run_dir = pathlib.Path(tempfile.mkdtemp(prefix="report_fixture_"))
    train_lib.run(cls.config, cls.run_dir)
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
      _assert_png(self, plot.path)
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
    self.assertEqual(self.built.traces, report.traces_path(self.run_dir, update))
    folder = self.run_dir / run_folder.VIDEOS / str(update)
    self.assertEqual(self.built.videos,
                     [folder / f"{stratum}.mp4" for stratum in self.config.panel.strata])
    captions = json.loads((folder / report.CAPTIONS_FILENAME).read_text())["videos"]
    every = self.config.env.control_hz // self.config.report.video_fps
    for stratum, path in zip(self.config.panel.strata, self.built.videos):
      caption = captions[stratum]
      frames, _ = _read_video(path)
      self.assertLen(frames, math.ceil(caption["length_steps"] / every))
      self.assertEqual(frames[0].shape, (self.config.report.video_height,
                                         self.config.report.video_width, 3))
      self.assertIn(caption["end_reason"], env_lib.REASON_NAMES)
      self.assertAlmostEqual(caption["commands"][0]["start_s"], 0.0)
      self.assertAlmostEqual(caption["commands"][-1]["end_s"], caption["seconds"])
      self.assertIn(f"]({run_folder.VIDEOS}/{update}/{stratum}.mp4)", self.text)
      self.assertIn(f"ended by **{caption['end_reason']}**", self.text)

  def test_saved_traces_describe_the_panel(self):
    saved = report.load_traces(self.built.traces)
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

  def test_cli_names_a_missing_run_folder(self):
    missing = self.run_dir.parent / "no_such_run"
    done = subprocess.run([sys.executable, "-m", "mjx_walk.report", str(missing)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    self.assertNotEqual(done.returncode, 0)
    self.assertIn(f"no run folder at {missing}", done.stderr)


class ConstructedRecordsTest(absltest.TestCase):
  """Plots from constructed ledger records with the audit's keys."""

  def test_contact_and_fall_plots(self):
    updates = []
    bins = (len(audit.FALL_HEIGHT_BINS) - 1, len(audit.FALL_TILT_BINS) - 1)
    for k in range(1, 6):
      record = {"kind": "update", "update": k, "env_steps": 100 * k,
                "contact/touchdowns": 400.0 + k, "contact/liftoffs": 390.0,
                "contact/slips": 37.0, "contact/stumbles": 0.0,
                "contact/air_time_mean": 0.2}
      record["audit/fall_height_counts"] = [1] * bins[0]
      record["audit/fall_tilt_counts"] = [2] * bins[1]
      updates.append(record)
    folder = pathlib.Path(self.create_tempdir().full_path)
    plot = report.plot_contact_events(updates, folder / "contact.png", min_count=200)
    _assert_png(self, plot.path)
    plot = report.plot_fall_histograms(updates, folder / "falls.png", config_lib.default())
    _assert_png(self, plot.path)

  def test_missing_figures_are_skipped_with_a_note(self):
    folder = pathlib.Path(self.create_tempdir().full_path)
    updates = [{"kind": "update", "update": 1, "env_steps": 10, "reward/total": 0.1}]
    plot = report.plot_contact_events(updates, folder / "contact.png")
    self.assertIsNone(plot.path)
    self.assertIn("no contact/", plot.note)
    self.assertIsNone(report.plot_latest_eval(updates, folder / "eval.png").path)
    self.assertFalse(list(folder.iterdir()))


class RenderTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.robot = robots.load("go2")
    cls.model = report.render_model(cls.robot, 320, 240)
    cls.renderer = mujoco.Renderer(cls.model, height=240, width=320)

  @classmethod
  def tearDownClass(cls):
    cls.renderer.close()
    super().tearDownClass()

  def _frame(self, qpos: np.ndarray, gravity=(0.0, 0.0, -9.81), segmentation=False):
    if segmentation:
      self.renderer.enable_segmentation_rendering()
    try:
      return report.render_episode(self.renderer, self.robot, qpos[None], np.array(gravity), 1)[0]
    finally:
      self.renderer.disable_segmentation_rendering()

  def test_a_frame_is_not_blank_and_shows_the_robot(self):
    home = self.robot.init_qpos.copy()
    frame = self._frame(home)
    self.assertEqual(frame.shape, (240, 320, 3))
    self.assertEqual(frame.dtype, np.uint8)
    self.assertGreater(frame.std(), 10.0)
    robot_pixels = _robot_pixels(self._frame(home, segmentation=True), self.model)
    self.assertGreater(robot_pixels, 0.03 * 240 * 320)  # the robot fills a fair part of it
    # The camera follows the trunk, so the robot is seen wherever it is...
    far = home.copy()
    far[0:2] += (25.0, -12.0)
    self.assertGreater(_robot_pixels(self._frame(far, segmentation=True), self.model),
                       0.5 * robot_pixels)
    # ...and the pixels counted are the robot's: the same view without it (its geoms made
    # invisible) has none, and differs from the frame with it.
    rgba = self.model.geom_rgba.copy()
    robot_geoms = self.model.geom_bodyid != 0
    self.model.geom_rgba[robot_geoms, 3] = 0.0
    try:
      empty = self._frame(home)
      self.assertEqual(_robot_pixels(self._frame(home, segmentation=True), self.model), 0)
    finally:
      self.model.geom_rgba[:] = rgba
    self.assertGreater(np.abs(frame.astype(int) - empty.astype(int)).sum(axis=-1).astype(bool)
                       .sum(), 0.03 * 240 * 320)

  def test_a_slope_tilts_the_floor_not_the_robot_out_of_view(self):
    home = self.robot.init_qpos.copy()
    tilt = np.radians(15.0)
    gravity = 9.81 * np.array([np.sin(tilt), 0.0, -np.cos(tilt)])
    level, sloped = self._frame(home), self._frame(home, gravity)
    self.assertGreater(np.abs(level.astype(int) - sloped.astype(int)).mean(), 1.0)
    self.assertGreater(_robot_pixels(self._frame(home, gravity, segmentation=True), self.model),
                       0.03 * 240 * 320)
    # The render model is left as it was.
    np.testing.assert_array_equal(self.model.geom_quat[self.robot.floor_geom_id], [1, 0, 0, 0])

  def test_video_decodes_to_the_frames_written(self):
    qpos = np.repeat(self.robot.init_qpos[None], 7, axis=0)
    qpos[:, 0] += np.linspace(0.0, 0.3, 7)
    frames = report.render_episode(self.renderer, self.robot, qpos, np.array([0, 0, -9.81]), 1,
                                   overlay=[f"frame {i}" for i in range(7)])
    path = report.write_video(pathlib.Path(self.create_tempdir().full_path) / "walk.mp4",
                              frames, fps=25)
    decoded, fps = _read_video(path)
    self.assertAlmostEqual(fps, 25.0)
    self.assertEqual(decoded.shape, (7, 240, 320, 3))
    # Lossy, but close to what was written.
    self.assertLess(np.abs(decoded.astype(int) - frames.astype(int)).mean(), 8.0)

  def test_render_videos_from_constructed_traces(self):
    cfg = config_lib.default()
    cfg.panel.strata = ("flat", "slope")
    cfg.panel.families_per_stratum = 1
    cfg.panel.envs_per_family = 1
    manifest = families.make_manifest(cfg)
    steps, nq = 9, self.model.nq
    qpos = np.repeat(self.robot.init_qpos[None, None], 2, axis=0).repeat(steps, axis=1)
    qpos[:, :, 0] += np.linspace(0.0, 0.2, steps)
    command = np.zeros((2, steps, 3), np.float32)
    command[:, 4:] = (0.5, 0.0, 0.1)
    traces = panel.EpisodeTraces(
        env_index=np.array([0, 1], np.int32), family_index=np.array([0, 1], np.int32),
        qpos=qpos.astype(np.float32).reshape(2, steps, nq), command=command,
        length=np.array([9, 4], np.int32),
        reason=np.array([env_lib.ResetReason.TIMEOUT, env_lib.ResetReason.FALL], np.int32),
        episode_return=np.array([1.0, -2.0], np.float32),
        gravity=np.asarray(manifest.eval_params().gravity))
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    path = report.save_traces(run_dir, 7, traces, manifest)
    self.assertEqual(path, run_dir / "eval" / "7_traces.npz")
    self.assertEqual(report.trace_updates(run_dir), [7])
    videos = report.render_videos(run_dir, 7, cfg)
    self.assertEqual([v.name for v in videos], ["flat.mp4", "slope.mp4"])
    captions = json.loads((run_dir / "videos" / "7" / "captions.json").read_text())["videos"]
    every = cfg.env.control_hz // cfg.report.video_fps
    for video, length in zip(videos, (9, 4)):
      self.assertLen(_read_video(video)[0], math.ceil(length / every))
    self.assertEqual(captions["slope"]["end_reason"], "fall")
    self.assertTrue(captions["slope"]["terminated"])
    self.assertEqual(captions["flat"]["family_seed"], manifest.eval_families[0].seed)
    # Commands change at step 4: two segments for the 9-step episode, one for the 4-step one.
    self.assertEqual([(c["start_s"], c["vx"]) for c in captions["flat"]["commands"]],
                     [(0.0, 0.0), (4 / cfg.env.control_hz, 0.5)])
    self.assertLen(captions["slope"]["commands"], 1)


if __name__ == "__main__":
  absltest.main()
