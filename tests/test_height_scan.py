"""Tests for mjx_walk.sim.height_scan and the scan in the env: the grid and its description, the
scan on hand-built ground against a NumPy reference, the scan of a trunk past the tile's edge,
the noise statistics, and the critic's clean scan. C MuJoCo's ray-cast scan is compared with it in
test_sim2sim.py.
"""

import dataclasses
import types

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families
from mjx_walk.sim import ground
from mjx_walk.sim import height_scan
from mjx_walk.sim import terrain

import configs

SCAN = config_lib.ScanConfig(enabled=True)  # 1.6 m x 1.0 m every 0.1 m: 17 x 11 points
DOWN = np.array([0.0, 0.0, -1.0], np.float32)
LEVEL = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
TURNED = np.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)], np.float32)  # yaw +90 deg


def _grid() -> terrain.Grid:
  """A 4 m tile every 0.1 m with a 1 m margin: 61 x 61 nodes from -3 m to 3 m."""
  return terrain.Grid(tile_size=4.0, resolution=0.1, cells=40, margin_cells=10,
                      platform_size=1.2)


def _geometry(grid: terrain.Grid | None) -> ground.Geometry:
  """The ground checks with `grid` (the scan reads only the grid)."""
  none = jnp.zeros(0, jnp.int32)
  return ground.Geometry(grid=grid, floor_geom=0, body_geoms=none, foot_geoms=none,
                         foot_radius=jnp.zeros(0), hips=jnp.zeros((0, 3)))


class GridTest(absltest.TestCase):

  def test_points_in_the_yaw_frame_rear_row_first_right_to_left(self):
    points = height_scan.grid_points(SCAN)
    chex.assert_shape(points, (187, 2))
    self.assertEqual(SCAN.shape, (17, 11))
    # Point k = i * 11 + j sits at x = -0.8 + 0.1 i (rear to front), y = -0.5 + 0.1 j (right
    # to left).
    np.testing.assert_allclose(points[0], [-0.8, -0.5], atol=1e-6)
    np.testing.assert_allclose(points[1], [-0.8, -0.4], atol=1e-6)
    np.testing.assert_allclose(points[11], [-0.7, -0.5], atol=1e-6)
    np.testing.assert_allclose(points[5 * 11 + 3], [-0.3, -0.2], atol=1e-6)
    np.testing.assert_allclose(points[-1], [0.8, 0.5], atol=1e-6)

  def test_the_block_is_last_and_describes_every_point(self):
    env_config = config_lib.EnvConfig()
    blind = env_lib.observations.policy_layout(env_config, 12)
    layout = env_lib.observations.policy_layout(env_config, 12,
                                                height_scan=height_scan.block(SCAN))
    described = layout.describe()
    self.assertEqual([b["name"] for b in described[:-1]], [b.name for b in blind.blocks])
    scan = described[-1]
    self.assertEqual((scan["name"], scan["offset"], scan["size"], scan["units"]),
                     ("height_scan", blind.size, 187, "m"))
    self.assertEqual((scan["rows"], scan["columns"], scan["spacing"], list(scan["clip"])),
                     (17, 11, 0.1, [-0.5, 1.0]))
    # The ONNX metadata is this description: the points in the observation's order.
    points = np.asarray(scan["points"])
    chex.assert_shape(points, (187, 2))
    np.testing.assert_allclose(points[[0, 1, 11, 186]],
                               [[-0.8, -0.5], [-0.8, -0.4], [-0.7, -0.5], [0.8, 0.5]], atol=1e-6)
    self.assertIn("point k = i * columns + j", scan["order"])


class ScanTest(absltest.TestCase):
  """On a heightfield that is 0 up to x = 0 and 0.1 m from x = 0.1 on (a ramp between)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.grid = _grid()
    cls.nodes_x = -3.0 + 0.1 * np.arange(cls.grid.nodes)
    cls.profile = np.where(cls.nodes_x > 0.05, 0.1, 0.0)
    cls.field = jnp.asarray(np.tile(cls.profile, (cls.grid.nodes, 1)), jnp.float32)
    cls.geometry = _geometry(cls.grid)
    cls.measure = staticmethod(jax.jit(lambda position, quat, down: height_scan.measure(
        SCAN, cls.geometry, cls.field, jnp.asarray(height_scan.grid_points(SCAN)), position,
        quat, down)))

  def _reference(self, world_x: np.ndarray, trunk_z: float) -> np.ndarray:
    """The trunk's height above the ground at world x, from NumPy's linear interpolation."""
    return np.clip(trunk_z - np.interp(world_x, self.nodes_x, self.profile), -0.5, 1.0)

  def test_a_step_under_the_front_half(self):
    trunk = np.array([0.05, 0.0, 0.3], np.float32)
    scan = np.asarray(self.measure(trunk, LEVEL, DOWN))
    chex.assert_shape(scan, (187,))
    points = height_scan.grid_points(SCAN)
    np.testing.assert_allclose(scan, self._reference(trunk[0] + points[:, 0], 0.3), atol=1e-6)
    rows = scan.reshape(17, 11)
    np.testing.assert_allclose(rows[:8], 0.3, atol=1e-6)  # behind: the low ground
    np.testing.assert_allclose(rows[8], 0.25, atol=1e-6)  # over the ramp, half way up
    np.testing.assert_allclose(rows[9:], 0.2, atol=1e-6)  # ahead: on the step

  def test_a_robot_turned_90_degrees_reads_the_step_on_its_right(self):
    # Heading +y, left -x: a point (x, y) of the grid is at world (0.05 - y, x).
    trunk = np.array([0.05, 0.0, 0.3], np.float32)
    scan = np.asarray(self.measure(trunk, TURNED, DOWN))
    points = height_scan.grid_points(SCAN)
    np.testing.assert_allclose(scan, self._reference(trunk[0] - points[:, 1], 0.3), atol=1e-6)
    columns = scan.reshape(17, 11)
    np.testing.assert_allclose(columns[:, :5], 0.2, atol=1e-6)  # right: the step
    np.testing.assert_allclose(columns[:, 6:], 0.3, atol=1e-6)  # left: the low ground

  def test_readings_are_clipped(self):
    high = np.asarray(self.measure(np.array([-1.0, 0.0, 3.0], np.float32), LEVEL, DOWN))
    low = np.asarray(self.measure(np.array([1.0, 0.0, -2.0], np.float32), LEVEL, DOWN))
    np.testing.assert_array_equal(high, np.float32(1.0))
    np.testing.assert_array_equal(low, np.float32(-0.5))

  def test_on_the_plane_under_tilted_gravity_it_reads_along_gravity(self):
    # Gravity tilted 15 degrees towards +x: against gravity, the level floor falls away ahead,
    # by tan(15 deg) per metre along the heading (which is perpendicular to gravity).
    tilt = np.radians(15.0)
    down = np.array([np.sin(tilt), 0.0, -np.cos(tilt)], np.float32)
    trunk = np.array([0.0, 0.0, 0.3], np.float32)  # 0.3 / cos(15 deg) above it along gravity
    scan = np.asarray(height_scan.measure(SCAN, _geometry(None), None,
                                          jnp.asarray(height_scan.grid_points(SCAN)),
                                          trunk, LEVEL, down))
    x = height_scan.grid_points(SCAN)[:, 0]
    np.testing.assert_allclose(scan, 0.3 / np.cos(tilt) + x * np.tan(tilt), atol=1e-5)


class TileEdgeTest(absltest.TestCase):
  """A trunk past the tile's edge reads the periodic ground, as after the wrap."""

  def test_past_the_edge_it_reads_as_from_the_tile(self):
    cfg = configs.with_changes(terrain__ground="heightfield", terrain__margin=1.0,
                               families__spawn_offset=0.2, scan__enabled=True)
    env = env_lib.LocomotionEnv(cfg)
    grid = env.grid
    shape = terrain.tile(grid, cfg.terrain, jnp.int32(terrain.ROUGH), jnp.uint32(7),
                         jnp.float32(0.1))  # [cells, cells]
    rows = grid.tile_rows()
    field = jnp.asarray(np.asarray(shape)[np.ix_(rows, rows)])
    family = types.SimpleNamespace(gravity=jnp.array([0.0, 0.0, -9.81]))
    data = env_lib.mjx.make_data(env.model)

    def scan(x):
      qpos = data.qpos.at[0:3].set(jnp.array([x, 0.3, 0.4])).at[3:7].set(jnp.asarray(LEVEL))
      return np.asarray(env.readings(data.replace(qpos=qpos), family, field).height_scan)

    # 0.3 m past the edge, the front row (0.8 m ahead) is beyond the 1 m margin; from the tile,
    # one period back, it is on it.
    past, on_tile = scan(2.0 + 0.3), scan(-2.0 + 0.3)
    self.assertGreater(np.ptp(on_tile), 0.02)  # rough ground: the readings differ
    np.testing.assert_allclose(past, on_tile, atol=1e-5)


class NoiseTest(absltest.TestCase):

  def test_per_point_noise_offset_and_missing_points(self):
    scan = dataclasses.replace(SCAN, noise=0.05, offset_noise=0.1, missing_rate=0.2)
    clean = jnp.full((187,), 0.3)
    keys = jax.random.split(jax.random.key(0), 400)
    offsets = jax.vmap(lambda k: height_scan.draw_offset(scan, 1.0, k))(keys)  # [400]
    noisy = np.asarray(jax.vmap(lambda o, k: height_scan.corrupt(scan, 1.0, clean, o, k))(
        offsets, keys))  # [400, 187]
    offsets = np.asarray(offsets)
    missing = noisy == np.float32(1.0)
    # Missing points: 0.2 of 74,800, within 4 standard deviations.
    self.assertAlmostEqual(missing.mean(), 0.2, delta=4 * np.sqrt(0.2 * 0.8 / missing.size))
    # The offsets: uniform in +-0.1 (std 0.1 / sqrt 3), one per episode.
    self.assertLessEqual(np.abs(offsets).max(), 0.1)
    self.assertAlmostEqual(offsets.std(), 0.1 / np.sqrt(3), delta=0.1 / np.sqrt(3) * 0.15)
    # The rest: 0.3 + the episode's offset + uniform noise in +-0.05 (std 0.05 / sqrt 3).
    error = (noisy - 0.3 - offsets[:, None])[~missing]
    self.assertLessEqual(np.abs(error).max(), 0.05 + 1e-6)
    self.assertAlmostEqual(error.mean(), 0.0, delta=0.002)
    self.assertAlmostEqual(error.std(), 0.05 / np.sqrt(3), delta=0.05 / np.sqrt(3) * 0.05)
    # Within one episode the offset is common: each row's mean error is about 0.
    np.testing.assert_array_less(np.abs(np.nanmean(np.where(missing, np.nan, noisy), axis=1)
                                        - 0.3 - offsets), 0.012)

  def test_without_noise_scale_the_scan_is_clean(self):
    scan = dataclasses.replace(SCAN, noise=0.05, offset_noise=0.1, missing_rate=0.2)
    clean = jnp.linspace(-0.4, 0.9, 187)
    key = jax.random.key(3)
    offset = height_scan.draw_offset(scan, 0.0, key)
    self.assertEqual(float(offset), 0.0)
    np.testing.assert_array_equal(height_scan.corrupt(scan, 0.0, clean, offset, key), clean)


class EnvScanTest(absltest.TestCase):

  def test_the_critic_reads_the_clean_scan_and_the_policy_the_noisy_one(self):
    cfg = configs.quiet()
    cfg.scan = dataclasses.replace(SCAN, noise=0.05, offset_noise=0.05, missing_rate=0.1)
    cfg.env = dataclasses.replace(cfg.env, obs_noise_scale=1.0)
    env = env_lib.LocomotionEnv(cfg)
    family = jax.tree.map(lambda x: x[0], families.make_manifest(cfg).train_params())
    state = jax.jit(env.reset)(jax.random.key(0), family)
    clean = np.asarray(env.readings(state.data, family, None).height_scan)
    size = env.policy_layout.size
    start = env.policy_layout.offsets()["height_scan"]
    policy = np.asarray(state.obs["policy"])[start:size]
    critic = np.asarray(state.obs["critic"])[start:size]
    np.testing.assert_allclose(critic, clean, atol=1e-6)  # the critic's block: clean
    self.assertGreater(np.abs(policy - clean).max(), 0.01)  # the policy's: noisy
    # The episode's offset is carried and drawn within its bound.
    self.assertLessEqual(abs(float(state.task.scan_offset)), 0.05)


if __name__ == "__main__":
  absltest.main()
