"""Tests for mjx_walk.sim.ground: the ground checks on hand-made poses and contact lists, on the
plane and on a flat heightfield, against values written out here. The env's own steps on real
terrain are checked in test_env.py and test_terrain.py, and against C MuJoCo in test_sim2sim.py.
"""

import types

from absl.testing import absltest
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import ground
from mjx_walk.sim import robots
from mjx_walk.sim import terrain


def _pose(geometry: ground.Geometry, ngeom: int, foot_z: float) -> np.ndarray:
  """float32 [ngeom, 3] geom positions: every foot at height `foot_z`, the rest at 1 m."""
  xpos = np.zeros((ngeom, 3), np.float32)
  xpos[:, 2] = 1.0
  xpos[np.asarray(geometry.foot_geoms), 2] = foot_z
  return xpos


class PlaneTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.robot = robots.load("go2")
    cls.geometry = ground.Geometry.of(cls.robot, None)

  def test_heights_are_above_z_zero(self):
    self.assertEqual(float(ground.trunk_height(self.geometry, None, np.array(
        [3.0, -2.0, 0.31], np.float32), np.array([0.6, 0.0, 0.8, 0.0], np.float32))),
                     np.float32(0.31))
    radius = np.asarray(self.geometry.foot_radius)
    self.assertTrue(np.all(radius > 0.01))  # the Go2's foot spheres
    # Each foot's centre 5 cm above its radius: a clearance of 5 cm (its lowest point).
    xpos = _pose(self.geometry, self.robot.mj_model.ngeom, 0.0)
    xpos[np.asarray(self.geometry.foot_geoms), 2] = radius + 0.05
    np.testing.assert_allclose(ground.foot_heights(self.geometry, None, xpos), 0.05, atol=1e-7)

  def test_floor_normal_in_the_trunk_frame(self):
    # Upright: +z. Rolled 90 degrees about x (quaternion (cos 45, sin 45, 0, 0)): R^T z = +y.
    np.testing.assert_allclose(ground.floor_normal(np.array([1.0, 0, 0, 0], np.float32)),
                               [0.0, 0.0, 1.0], atol=1e-7)
    half = np.sqrt(0.5, dtype=np.float32)
    np.testing.assert_allclose(ground.floor_normal(np.array([half, half, 0, 0], np.float32)),
                               [0.0, 1.0, 0.0], atol=1e-6)

  def test_body_contact_from_a_contact_list(self):
    # Only a body geom (trunk, thigh) penetrating the floor counts, in either order of the pair;
    # a foot on the floor, a body geom touching another geom, or a gap does not.
    floor = self.geometry.floor_geom
    body = int(np.asarray(self.geometry.body_geoms)[0])
    foot = int(np.asarray(self.geometry.foot_geoms)[0])
    other = max(floor, body, foot) + 1
    cases = [
        ([[floor, body]], [-0.001], True),
        ([[body, floor]], [-0.001], True),
        ([[floor, body]], [0.001], False),
        ([[floor, foot]], [-0.01], False),
        ([[other, body]], [-0.01], False),
        ([[floor, foot], [body, floor]], [-0.01, -0.0001], True),
    ]
    for pairs, dist, want in cases:
      pairs, dist = np.array(pairs, np.int32), np.array(dist, np.float32)
      self.assertIs(bool(ground.floor_touches(self.geometry, pairs, dist, xp=np).any()), want,
                    (pairs, dist))
      self.assertIs(bool(ground.floor_touches(self.geometry, jnp.asarray(pairs),
                                              jnp.asarray(dist)).any()), want, (pairs, dist))

  def test_which_body_geoms_touch_from_a_contact_list(self):
    # floor_touches names the geoms, in body_geoms order: a thigh (the second body geom) under
    # the floor in either order of the pair, the trunk not.
    floor = self.geometry.floor_geom
    body = np.asarray(self.geometry.body_geoms)
    foot = int(np.asarray(self.geometry.foot_geoms)[0])
    cases = [
        ([[floor, body[1]]], [-0.001], [1]),
        ([[body[1], floor], [floor, body[0]]], [-0.001, 0.002], [1]),
        ([[floor, body[0]], [body[4], floor]], [-0.001, -0.01], [0, 4]),
        ([[floor, foot], [floor, body[2]]], [-0.01, 0.001], []),
    ]
    for pairs, dist, touching in cases:
      pairs, dist = np.array(pairs, np.int32), np.array(dist, np.float32)
      want = np.isin(np.arange(len(body)), touching)
      np.testing.assert_array_equal(ground.floor_touches(self.geometry, pairs, dist, xp=np),
                                    want, err_msg=str(pairs))
      np.testing.assert_array_equal(ground.floor_touches(
          self.geometry, jnp.asarray(pairs), jnp.asarray(dist)), want, err_msg=str(pairs))


class HeightfieldTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cfg = config_lib.TerrainConfig(ground="heightfield")
    cls.grid = terrain.Grid.from_config(cfg)
    cls.robot = robots.load("go2", terrain.heightfield(cfg))
    cls.geometry = ground.Geometry.of(cls.robot, cls.grid)
    cls.field = np.full((cls.grid.nodes, cls.grid.nodes), 0.2, np.float32)  # flat, 20 cm up

  def test_heights_are_above_the_surface(self):
    level = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    self.assertAlmostEqual(float(ground.trunk_height(self.geometry, self.field, np.array(
        [0.3, -0.7, 0.5], np.float32), level)), 0.3, places=6)
    xpos = _pose(self.geometry, self.robot.mj_model.ngeom, 0.2 + 0.05)
    radius = np.asarray(self.geometry.foot_radius)
    np.testing.assert_allclose(ground.foot_heights(self.geometry, self.field, xpos),
                               0.05 - radius, atol=1e-6)

  def test_the_trunks_height_is_above_the_ground_under_its_hips(self):
    # A 15 cm step rising between the samples at x = 0 and x = 0.1 (MuJoCo's surface is linear
    # in x between them). The reference turns the Go2's hips with MuJoCo's own rotation and reads
    # the step's profile by NumPy's interpolation, the heights' mean under the four hips.
    # Catches the height read under the origin (straddling, the front hips on the upper tread:
    # 0.15 m there, 0.225 m above the hips' mean) and hips not turned with the trunk.
    nodes_x = np.arange(self.grid.nodes) * self.grid.resolution - self.grid.half_size
    profile = np.where(nodes_x > 0.05, 0.15, 0.0).astype(np.float32)
    field = np.tile(profile, (self.grid.nodes, 1))  # [y, x]
    hips = np.asarray(self.robot.hip_offsets)
    np.testing.assert_allclose(np.abs(hips), [[0.1934, 0.0465, 0.0]] * 4)  # the Go2's MJCF
    half = np.sqrt(0.5)
    poses = {  # position, quaternion (w, x, y, z)
        "straddling": ([0.12, 0.4, 0.30], [1.0, 0.0, 0.0, 0.0]),
        "turned 90 degrees": ([0.12, 0.4, 0.30], [half, 0.0, 0.0, half]),
        "pitched up 20 degrees on the edge": (
            [0.02, -0.3, 0.33], [np.cos(np.deg2rad(10)), 0.0, -np.sin(np.deg2rad(10)), 0.0]),
        "on the upper tread": ([0.6, 0.0, 0.45], [1.0, 0.0, 0.0, 0.0]),
    }
    got = {}
    for name, (position, quat) in poses.items():
      position, quat = np.array(position), np.array(quat)
      rotation = np.zeros(9)
      mujoco.mju_quat2Mat(rotation, quat)
      world = position + hips @ rotation.reshape(3, 3).T  # [4, 3]
      want = position[2] - np.interp(world[:, 0], nodes_x, profile).mean()
      got[name] = float(ground.trunk_height(self.geometry, jnp.asarray(field), jnp.asarray(
          position, jnp.float32), jnp.asarray(quat, jnp.float32)))
      self.assertAlmostEqual(got[name], want, delta=1e-5, msg=name)
    self.assertAlmostEqual(got["straddling"], 0.30 - 0.075, delta=1e-5)
    self.assertAlmostEqual(got["on the upper tread"], 0.30, delta=1e-5)
    # Turned, all four hips stand over the rise (x = 0.0735 and 0.1665).
    self.assertAlmostEqual(got["turned 90 degrees"], 0.30 - (0.11025 + 0.15) / 2, delta=1e-5)

  def test_probe_points_follow_their_geoms(self):
    # Geoms at rest (identity orientation) at 1 m: each probe point is its lattice point there.
    ngeom = self.robot.mj_model.ngeom
    xpos = _pose(self.geometry, ngeom, 1.0)
    xmat = np.tile(np.eye(3, dtype=np.float32), (ngeom, 1, 1))
    points = np.asarray(ground.probe_points(self.geometry, xpos, xmat))
    np.testing.assert_allclose(points, np.asarray(self.geometry.probe_points) + [0.0, 0.0, 1.0],
                               atol=1e-6)
    # Turned 180 degrees about z, a point's x and y change sign.
    turn = np.tile(np.diag([-1.0, -1.0, 1.0]).astype(np.float32), (ngeom, 1, 1))
    turned = np.asarray(ground.probe_points(self.geometry, xpos, turn))
    np.testing.assert_allclose(turned[:, :2], -np.asarray(self.geometry.probe_points)[:, :2],
                               atol=1e-6)

  def test_a_probe_touches_within_its_radius(self):
    field = jnp.asarray(self.field)
    touch = jax.jit(lambda points: ground.surface_touches(self.geometry, field, points))
    radius = np.asarray(self.geometry.probe_radius)
    body = np.asarray(self.geometry.body_geoms)
    first = np.asarray(self.geometry.probe_geoms)[0]  # the geom the first probe point is on
    for gap, want in ((-0.001, body == first), (0.001, np.zeros(len(body), bool))):
      points = np.zeros((len(radius), 3), np.float32)
      points[:, 2] = 1.0  # every point far above
      points[0, 2] = 0.2 + radius[0] + gap  # but the first, `gap` beyond its radius
      np.testing.assert_array_equal(touch(points), want, err_msg=str(gap))

  def test_which_body_geoms_touch_the_heightfield(self):
    # Every geom at rest far above the 20 cm ground, then one thigh lowered until its lowest
    # probe point is 1 mm inside its radius: that thigh alone touches, the trunk does not.
    ngeom = self.robot.mj_model.ngeom
    body = np.asarray(self.geometry.body_geoms)
    xpos = _pose(self.geometry, ngeom, 1.0)
    xmat = np.tile(np.eye(3, dtype=np.float32), (ngeom, 1, 1))
    field = jnp.asarray(self.field)
    touches = jax.jit(lambda xpos, xmat: ground.body_touches(
        self.geometry, field, types.SimpleNamespace(geom_xpos=xpos, geom_xmat=xmat)))
    np.testing.assert_array_equal(touches(xpos, xmat), np.zeros(len(body), bool))
    thigh = body[2]
    mine = np.asarray(self.geometry.probe_geoms) == thigh
    lowest = np.asarray(self.geometry.probe_points)[mine, 2].min()
    radius = np.asarray(self.geometry.probe_radius)[mine].max()
    xpos[thigh, 2] = 0.2 + radius - lowest - 0.001
    np.testing.assert_array_equal(touches(xpos, xmat), body == thigh)


if __name__ == "__main__":
  absltest.main()
