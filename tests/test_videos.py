"""Tests for mjx_walk.analysis.videos: offscreen frames that show the robot, a slope drawn as an
inclined floor, a heightfield's ground drawn as it is simulated, MP4s that decode to the frames
written, and the videos and captions of saved evaluation traces (`mjx_walk.evaluation.traces`),
on the plane and on a heightfield run. (The videos of a real run are checked in
tests/test_report.py.)"""

import json
import math
import pathlib

from absl.testing import absltest
import chex
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.analysis import videos
from mjx_walk.evaluation import panel
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families
from mjx_walk.sim import robots
from mjx_walk.sim import terrain

import configs
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
        reason=np.array([endings.ResetReason.TIMEOUT, endings.ResetReason.FALL], np.int32),
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


def _heightfield_config(**changes) -> config_lib.TrainConfig:
  return configs.tiny(**{"terrain__ground": "heightfield", "families__spawn_offset": 0.2,
                         "report__video_width": 160, "report__video_height": 120, **changes})


def _ground(cfg: config_lib.TrainConfig, kind: str, size: float, seed: int = 3) -> np.ndarray:
  """A tile of `kind` at one magnitude, built from its type, seed and size as a family's is."""
  kind = config_lib.TERRAIN_TYPES.index(kind)
  shape = terrain.shapes(cfg.terrain, np.array([kind]), np.array([seed]))[0]
  draw = terrain.TerrainDraw(type=np.int32(kind), seed=np.uint32(seed),
                             magnitude=np.array([size, size], np.float32), shape=shape)
  return np.asarray(terrain.heights(cfg.terrain, draw, np.int32(0)))


def _on_ground(robot: robots.Robot, heights: np.ndarray, grid: terrain.Grid) -> np.ndarray:
  """The home pose standing on the ground at the tile's centre (the start platform)."""
  qpos = robot.init_qpos.copy()
  qpos[2] += heights[grid.nodes // 2, grid.nodes // 2]
  return qpos


class HeightfieldRenderTest(absltest.TestCase):
  """Frames of a heightfield run's render model: the simulated model's heightfield, its heights
  written and uploaded per episode."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = _heightfield_config()
    cls.grid = terrain.Grid.from_config(cls.config.terrain)
    cls.robot = robots.load("go2", terrain.heightfield(cls.config.terrain))
    cls.model = videos.render_model(cls.robot, 160, 120)
    cls.renderer = mujoco.Renderer(cls.model, height=120, width=160)

  @classmethod
  def tearDownClass(cls):
    cls.renderer.close()
    super().tearDownClass()

  def _frame(self, qpos: np.ndarray, heights: np.ndarray) -> np.ndarray:
    return videos.render_episode(self.renderer, self.robot, qpos[None],
                                 np.array([0.0, 0.0, -9.81]), 1, heights=heights)[0]

  def test_the_render_model_has_the_simulated_heightfield(self):
    # Catches a render model built on the plane, or with another heightfield shape (its
    # heights could then not be written, or would be drawn stretched).
    simulated = env_lib.LocomotionEnv(self.config).robot.mj_model
    floor = self.robot.floor_geom_id
    self.assertEqual(self.model.geom_type[floor], mujoco.mjtGeom.mjGEOM_HFIELD)
    for name in ("hfield_nrow", "hfield_ncol", "hfield_size"):
      np.testing.assert_array_equal(getattr(self.model, name), getattr(simulated, name), name)
    self.assertEqual((self.model.nq, self.model.ngeom, self.model.nbody),
                     (simulated.nq, simulated.ngeom, simulated.nbody))
    self.assertEqual(self.model.hfield_nrow[0], self.grid.nodes)
    self.assertGreaterEqual(self.model.geom_matid[floor], 0)  # the checkered material

  def test_the_ground_shows_and_each_episodes_heights_are_uploaded(self):
    # Catches heights left out of the render model, or written but not uploaded to the GL
    # context (the first heights would be drawn for every episode).
    flat = np.zeros((self.grid.nodes, self.grid.nodes), np.float32)
    stairs = _ground(self.config, "stairs_down", 0.1)
    qpos = _on_ground(self.robot, stairs, self.grid)
    on_flat = self._frame(qpos, flat)
    on_stairs = self._frame(qpos, stairs)
    changed = np.abs(on_flat.astype(int) - on_stairs.astype(int)).sum(axis=-1) > 30
    self.assertGreater(changed.mean(), 0.15, "the stairs barely show")
    self.assertGreater(on_stairs.std(), 10.0)
    # Back to the flat heights: the very same picture as the first time.
    np.testing.assert_array_equal(self._frame(qpos, flat), on_flat)
    np.testing.assert_array_equal(self.model.hfield_data, flat.reshape(-1))

  def test_heights_of_another_shape_are_refused(self):
    with self.assertRaisesRegex(ValueError, "heights of shape"):
      videos.set_ground(self.renderer, self.robot, np.zeros((3, 3)))

  def test_render_videos_draws_each_family_on_its_own_ground(self):
    # Catches videos drawn on flat ground, or on another family's ground, on a heightfield run:
    # the same pose on the flat and the stairs family shows different ground, and the stairs
    # video shows the stairs family's own tile, regenerated from the manifest.
    cfg = _heightfield_config(panel__strata=("flat", "stairs"))
    manifest = families.make_manifest(cfg)
    stairs_family = manifest.eval_families[1]
    self.assertEqual(stairs_family.stratum, "stairs")
    stairs = _ground(cfg, stairs_family.terrain_type, stairs_family.terrain_magnitude[0],
                     stairs_family.terrain_seed)
    steps, nq = 3, self.model.nq
    qpos = np.repeat(_on_ground(self.robot, stairs, self.grid)[None, None], 2, 0).repeat(steps, 1)
    traces = panel.EpisodeTraces(
        env_index=np.array([0, 1], np.int32), family_index=np.array([0, 1], np.int32),
        qpos=qpos.astype(np.float32).reshape(2, steps, nq), command=np.zeros((2, steps, 3),
                                                                               np.float32),
        length=np.array([steps, steps], np.int32),
        reason=np.array([endings.ResetReason.TIMEOUT] * 2, np.int32),
        episode_return=np.zeros(2, np.float32),
        gravity=np.asarray(manifest.eval_params().gravity))
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "run"
    run_folder.RunFolder.create(run_dir, cfg, manifest)
    trace_files.save_eval_traces(run_dir, 2, traces, manifest)
    flat_video, stairs_video = videos.render_videos(run_dir, 2, cfg)
    on_flat, on_stairs = (pictures.read_video(v)[0][0] for v in (flat_video, stairs_video))
    below_caption = slice(60, None)  # the captions differ; the ground is in the lower half
    changed = np.abs(on_flat[below_caption].astype(int)
                     - on_stairs[below_caption].astype(int)).sum(axis=-1) > 30
    self.assertGreater(changed.mean(), 0.1)
    expected = self._frame(qpos[1, 0].astype(np.float64), stairs)
    self.assertLess(np.abs(on_stairs[below_caption].astype(int)
                           - expected[below_caption].astype(int)).mean(), 8.0)


if __name__ == "__main__":
  absltest.main()
