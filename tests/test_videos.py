"""Tests for mjx_walk.analysis.videos: offscreen frames that show the robot, a slope drawn as an
inclined floor, MP4s that decode to the frames written, and the videos and captions of saved
evaluation traces (`mjx_walk.analysis.traces`). (The videos of a real run are checked in
tests/test_report.py.)"""

import json
import math
import pathlib

from absl.testing import absltest
import chex
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.analysis import panel
from mjx_walk.analysis import traces as trace_files
from mjx_walk.analysis import videos
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families
from mjx_walk.sim import robots

import pictures


def _robot_pixels(segmentation: np.ndarray, model: mujoco.MjModel) -> int:
  """Pixels of a segmentation image [H, W, 2] (object id, type) showing a geom of the robot."""
  ids, types = segmentation[..., 0], segmentation[..., 1]
  geom = (types == mujoco.mjtObj.mjOBJ_GEOM) & (ids >= 0)
  robot = np.zeros_like(geom)
  robot[geom] = model.geom_bodyid[ids[geom]] != 0  # body 0 is the world (the floor)
  return int(robot.sum())


class RenderTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.robot = robots.load("go2")
    cls.model = videos.render_model(cls.robot, 320, 240)
    cls.renderer = mujoco.Renderer(cls.model, height=240, width=320)

  @classmethod
  def tearDownClass(cls):
    cls.renderer.close()
    super().tearDownClass()

  def _frame(self, qpos: np.ndarray, gravity=(0.0, 0.0, -9.81), segmentation=False):
    if segmentation:
      self.renderer.enable_segmentation_rendering()
    try:
      return videos.render_episode(self.renderer, self.robot, qpos[None], np.array(gravity), 1)[0]
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
    frames = videos.render_episode(self.renderer, self.robot, qpos, np.array([0, 0, -9.81]), 1,
                                   overlay=[f"frame {i}" for i in range(7)])
    path = videos.write_video(pathlib.Path(self.create_tempdir().full_path) / "walk.mp4",
                              frames, fps=25)
    decoded, fps = pictures.read_video(path)
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
    path = trace_files.save_eval_traces(run_dir, 7, traces, manifest)
    self.assertEqual(path, run_dir / "eval" / "7_traces.npz")
    self.assertEqual(trace_files.eval_trace_updates(run_dir), [7])
    saved = trace_files.load_eval_traces(path)
    self.assertEqual((saved.update, saved.strata, saved.reason_names, saved.panel_hash),
                     (7, ("flat", "slope"), ("timeout", "fall"), manifest.panel_hash))
    self.assertEqual(saved.family_seeds, tuple(f.seed for f in manifest.eval_families))
    chex.assert_trees_all_equal(saved.traces, traces)
    with self.assertRaisesRegex(FileNotFoundError, "no evaluation traces at .*/8_traces.npz"):
      trace_files.load_eval_traces(run_dir / "eval" / "8_traces.npz")
    written = videos.render_videos(run_dir, 7, cfg)
    self.assertEqual([v.name for v in written], ["flat.mp4", "slope.mp4"])
    captions = json.loads((run_dir / "videos" / "7" / "captions.json").read_text())["videos"]
    every = cfg.env.control_hz // cfg.report.video_fps
    for video, length in zip(written, (9, 4)):
      self.assertLen(pictures.read_video(video)[0], math.ceil(length / every))
    self.assertEqual(captions["slope"]["end_reason"], "fall")
    self.assertTrue(captions["slope"]["terminated"])
    self.assertEqual(captions["flat"]["end_reason"], "timeout")
    self.assertFalse(captions["flat"]["terminated"])
    self.assertEqual(captions["flat"]["family_seed"], manifest.eval_families[0].seed)
    # Commands change at step 4: two segments for the 9-step episode, one for the 4-step one.
    self.assertEqual([(c["start_s"], c["vx"]) for c in captions["flat"]["commands"]],
                     [(0.0, 0.0), (4 / cfg.env.control_hz, 0.5)])
    self.assertLen(captions["slope"]["commands"], 1)


if __name__ == "__main__":
  absltest.main()
