"""Tests for heightfield terrain (mjx_walk.sim.terrain and its use by the env, the families, the
config, the records and a resumed run).

References are independent of the code under test: the tiles' shapes from integer arithmetic on
the sample indices, the surface from the plane through each triangle's three vertices (and C
MuJoCo's own float64 heightfield collision), the curriculum from its rules applied by hand, and
the foot and body checks from NumPy on the heights. Each test says which bug it catches.
"""

import dataclasses
import functools
import json
import math
import pathlib
import tempfile

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mjx_walk import config as config_lib
from mjx_walk.learn import records as records_lib
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import storable
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families
from mjx_walk.sim import terrain

import configs

FLAT, ROUGH, SLOPE, STAIRS_UP, STAIRS_DOWN, OBSTACLES = range(6)
R_NONE = int(endings.ResetReason.NONE)
R_BODY = int(endings.ResetReason.BODY_CONTACT)
LEGS = ("FR", "FL", "RR", "RL")


def _config(**changes) -> config_lib.TrainConfig:
  """The default config on a heightfield (4 m tile, 0.1 m samples, 0.6 m margin, 1.2 m
  platform, 10 levels), spawning on the platform."""
  return configs.with_changes(**{"terrain__ground": "heightfield",
                                 "families__spawn_offset": 0.2, **changes})


CFG = _config()
GRID = terrain.Grid.from_config(CFG.terrain)
LEVELS = CFG.terrain.num_levels  # 10
TOP = LEVELS - 1


def _draw(kind, seed, low, high):
  return terrain.TerrainDraw(type=jnp.asarray(kind, jnp.int32),
                             seed=jnp.asarray(seed, jnp.uint32),
                             magnitude=jnp.asarray([low, high], jnp.float32),
                             shape=terrain.shapes(CFG.terrain, np.array([kind]),
                                                  np.array([seed]))[0])


@jax.jit
@chex.assert_max_traces(n=1)
def _heights_jit(draw, level):
  return terrain.heights(CFG.terrain, draw, level)


def _heights(kind, seed, low, high, level) -> np.ndarray:
  """float64 [nodes, nodes] of one tile, through one compiled function for every type."""
  return np.asarray(_heights_jit(_draw(kind, seed, low, high), jnp.asarray(level, jnp.int32)),
                    np.float64)


def _units() -> tuple[np.ndarray, np.ndarray]:
  """Integer geometry of the heightfield's nodes, in samples (0.1 m), from the node indices
  alone: (max-norm distance from the tile's centre [nodes, nodes], distance to the tile's
  edge [nodes, nodes]), each node taken to its tile sample (period `cells`)."""
  k = np.arange(GRID.nodes)
  tile_index = (k - GRID.margin_cells) % GRID.cells  # 0 .. 39, the centre at 20
  from_centre = np.abs(tile_index - GRID.cells // 2)
  norm = np.maximum(from_centre[None, :], from_centre[:, None])
  return norm, GRID.cells // 2 - norm


def _node_xy() -> tuple[np.ndarray, np.ndarray]:
  axis = -GRID.half_size + np.arange(GRID.nodes) * GRID.resolution
  return np.meshgrid(axis, axis)  # rows along y, columns along x


# The NumPy surface: the plane through the three vertices of MuJoCo's triangle under each point
# (each cell split along its diagonal from (x0, y0) to (x1, y1)).


def _np_surface(field, grid, xy):
  """(height [n], unit normal [n, 3]) float64 of the triangulated surface under points xy."""
  field = np.asarray(field, np.float64)
  res = grid.resolution
  out_h, out_n = [], []
  for x, y in np.asarray(xy, np.float64).reshape(-1, 2):
    fx, fy = (x + grid.half_size) / res, (y + grid.half_size) / res
    c, r = int(math.floor(fx)), int(math.floor(fy))
    u, v = fx - c, fy - r
    vertex = lambda dc, dr: np.array([(c + dc) * res, (r + dr) * res, field[r + dr, c + dc]])
    if v >= u:  # above the diagonal: (0,0), (1,1), (0,1)
      a, b, d = vertex(0, 0), vertex(1, 1), vertex(0, 1)
    else:  # below it: (0,0), (1,0), (1,1)
      a, b, d = vertex(0, 0), vertex(1, 0), vertex(1, 1)
    normal = np.cross(b - a, d - a)
    normal /= np.linalg.norm(normal) * np.sign(normal[2])
    px, py = fx * res, fy * res
    height = a[2] - (normal[0] * (px - a[0]) + normal[1] * (py - a[1])) / normal[2]
    out_h.append(height)
    out_n.append(normal)
  return np.array(out_h), np.array(out_n)


# 1. TILES


class TileTest(absltest.TestCase):

  def test_shape_and_periodicity_of_every_type(self):
    # Catches a heightfield whose margins are not copies of the tile (a wrap would then move the
    # robot onto other ground), or a wrong number of nodes for the model's hfield.
    for kind in range(6):
      for level in (0, 4, TOP):
        field = _heights(kind, 11, 0.05, 0.2 if kind != SLOPE else 25.0, level)
        chex.assert_shape(field, (GRID.nodes, GRID.nodes))
        self.assertEqual(GRID.nodes, 53)  # 40 tile samples + 2 x 6 margin + the closing one
        cells = GRID.cells
        np.testing.assert_array_equal(field[:, :GRID.nodes - cells], field[:, cells:])
        np.testing.assert_array_equal(field[:GRID.nodes - cells], field[cells:])

  def test_flat_is_zero(self):
    np.testing.assert_array_equal(_heights(FLAT, 3, 0.0, 0.0, TOP), 0.0)

  def test_stairs_against_integer_step_counts(self):
    # Stair k (0 at the edge) covers 0.3 m of tread; 4 whole treads fit between the 1.2 m
    # platform and the edge (1.4 m), so the platform is 4 risers below (stairs_up, a pit) or
    # above (stairs_down, a pyramid) the edge. Catches a wrong riser, step count, direction, or
    # a platform that is not level.
    norm, to_edge = _units()
    steps = np.minimum(to_edge // 3, 4)  # 3 samples per tread
    for kind, sign in ((STAIRS_UP, -1.0), (STAIRS_DOWN, 1.0)):
      for level in (0, 4, TOP):
        riser = 0.05 + level / TOP * (0.23 - 0.05)
        field = _heights(kind, 5, 0.05, 0.23, level)
        np.testing.assert_allclose(field, sign * riser * steps, atol=2e-6)
        self.assertEqual(len(np.unique(np.round(field, 6))), 5)  # edge + 4 risers
        centre, edge = field[norm == 0][0], field[norm == 20][0]
        if kind == STAIRS_UP:
          self.assertLess(centre, edge)
        else:
          self.assertGreater(centre, edge)
        np.testing.assert_allclose(field[norm <= 6], sign * 4 * riser, atol=2e-6)  # platform
        risers = np.diff(np.unique(field))
        np.testing.assert_allclose(risers, riser, rtol=1e-5)

  def test_magnitude_reaches_both_ends_of_the_range_exactly(self):
    # The "endpoints reachable" pitfall: level 0 must be the range's low end and the last level
    # exactly its high end (a difficulty of level / num_levels would stop at 90 %).
    for level, want in ((0, 0.05), (TOP, 0.23), (4, 0.05 + 4 / 9 * 0.18)):
      riser = -_heights(STAIRS_UP, 1, 0.05, 0.23, level)[26, 26] / 4  # the centre node
      self.assertAlmostEqual(riser, want, delta=1e-6)
      got = terrain.magnitude(_draw(STAIRS_UP, 1, 0.05, 0.23), jnp.asarray(level), LEVELS)
      self.assertAlmostEqual(float(got), want, delta=1e-7)
    top = terrain.magnitude(_draw(ROUGH, 1, 0.0, 0.1), jnp.asarray(TOP), LEVELS)
    self.assertEqual(float(top), float(np.float32(0.1)))

  def test_slope_faces_rise_or_fall_at_the_angle(self):
    # Finite differences along the row through the centre: the face from the edge to the
    # platform climbs (or descends) tan(angle) per metre, and the platform is flat. Both signs
    # occur over seeds. Catches a wrong angle unit, a missing sign draw or a sloped platform.
    norm, to_edge = _units()
    signs = set()
    for seed in range(6):
      for level, degrees in ((0, 5.0), (4, 5.0 + 4 / 9 * 20.0), (TOP, 25.0)):
        field = _heights(SLOPE, seed, 5.0, 25.0, level)
        row = field[26]  # y = 0
        face = np.diff(row[GRID.margin_cells:GRID.margin_cells + 14]) / GRID.resolution
        sign = np.sign(row[26] - row[GRID.margin_cells])
        np.testing.assert_allclose(face, sign * math.tan(math.radians(degrees)), rtol=1e-4)
        expected = sign * math.tan(math.radians(degrees)) * np.minimum(to_edge, 14) * 0.1
        np.testing.assert_allclose(field, expected, atol=1e-5)
        np.testing.assert_allclose(field[norm <= 6], field[26, 26], atol=1e-6)
        signs.add(sign)
    self.assertEqual(signs, {-1.0, 1.0})

  def test_rough_bumps_within_magnitude_and_platform_flat(self):
    # Catches bumps scaled wrong (above the magnitude or far below it), negative bumps, bumps
    # on the start platform, and a seed that does not change (or fix) the bumps.
    norm, _ = _units()
    for level, height in ((0, 0.02), (4, 0.02 + 4 / 9 * 0.08), (TOP, 0.10)):
      field = _heights(ROUGH, 9, 0.02, 0.10, level)
      self.assertGreaterEqual(field.min(), 0.0)
      self.assertLessEqual(field.max(), height + 1e-6)
      self.assertGreater(field.max(), 0.9 * height)  # 400 uniform bumps: the top one is near 1
      np.testing.assert_array_equal(field[norm <= 6], 0.0)
      # Within one bump cell (0.2 m) of the platform the bumps ramp up from zero.
      np.testing.assert_array_less(field[norm == 7], 0.5 * height + 1e-6)
    a, b = _heights(ROUGH, 9, 0.0, 0.1, TOP), _heights(ROUGH, 9, 0.0, 0.1, TOP)
    np.testing.assert_array_equal(a, b)
    self.assertGreater(np.abs(a - _heights(ROUGH, 10, 0.0, 0.1, TOP)).max(), 0.01)

  def test_obstacles_tops_within_a_quarter_to_all_of_the_magnitude(self):
    # Catches block tops outside [0.25, 1] x magnitude, blocks on the platform, too many
    # blocks, and a seed that does not change the layout.
    norm, _ = _units()
    for level, height in ((0, 0.05), (4, 0.05 + 4 / 9 * 0.15), (TOP, 0.20)):
      field = _heights(OBSTACLES, 21, 0.05, 0.20, level)
      tops = field[field > 0]
      self.assertGreater(tops.size, 0)
      self.assertGreaterEqual(tops.min(), 0.25 * height - 1e-6)
      self.assertLessEqual(tops.max(), height + 1e-6)
      self.assertLessEqual(len(np.unique(tops)), CFG.terrain.obstacle_count)
      np.testing.assert_array_equal(field[norm <= 6], 0.0)
    a = _heights(OBSTACLES, 21, 0.05, 0.2, TOP)
    np.testing.assert_array_equal(a, _heights(OBSTACLES, 21, 0.05, 0.2, TOP))
    self.assertFalse(np.array_equal(a > 0, _heights(OBSTACLES, 22, 0.05, 0.2, TOP) > 0))

  def test_wrap_moves_by_whole_tiles_to_the_nearest_copy(self):
    # Catches a wrap that floors instead of rounding (moving a trunk still on the tile) or that
    # moves by anything but whole tiles.
    cases = {(1.9, -1.9): (0.0, 0.0), (2.1, -2.1): (4.0, -4.0), (6.1, 0.3): (8.0, 0.0),
             (-5.9, 9.0): (-4.0, 8.0)}
    for xy, shift in cases.items():
      np.testing.assert_allclose(terrain.wrap(GRID, jnp.asarray(xy)), shift, atol=1e-6)


# 2. THE SURFACE


class SurfaceTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.field = _heights(ROUGH, 4, 0.0, 0.1, TOP)

  def test_height_and_normal_match_the_triangle_planes(self):
    # Catches the other diagonal, swapped rows and columns, or a normal not scaled by the
    # sample spacing.
    rng = np.random.default_rng(0)
    xy = rng.uniform(-GRID.half_size + 0.01, GRID.half_size - 0.01, (300, 2))
    height, normal = terrain.surface(jnp.asarray(self.field, jnp.float32), GRID, jnp.asarray(xy))
    want_h, want_n = _np_surface(self.field, GRID, xy)
    chex.assert_shape(height, (300,))
    chex.assert_shape(normal, (300, 3))
    np.testing.assert_allclose(height, want_h, atol=2e-6)
    np.testing.assert_allclose(normal, want_n, atol=2e-6)

  def test_clearance_equals_c_mujoco_contact_distance(self):
    # A sphere over the middle of a triangle, pressed 2 mm into the rough surface: C MuJoCo's
    # float64 heightfield collision reports the contact distance `clearance` computes. Catches
    # a surface that is not the one the physics collides with (a flipped diagonal, heights read
    # along the wrong axis).
    radius = 0.01
    xml = f"""
    <mujoco><asset><hfield name="ground" nrow="{GRID.nodes}" ncol="{GRID.nodes}"
      size="{GRID.half_size} {GRID.half_size} 1 0.5"/></asset>
      <worldbody><geom name="ground" type="hfield" hfield="ground"/>
        <body><freejoint/><geom name="ball" type="sphere" size="{radius}"/></body>
      </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    model.hfield_data[:] = self.field.reshape(-1)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(1)
    res, keep = GRID.resolution, 0.015  # the sphere's footprint stays inside one triangle
    checked = 0
    while checked < 60:
      c, r = rng.integers(0, GRID.nodes - 1, 2)
      u, v = rng.uniform(0, 1, 2)
      edges = (min(u, 1 - v, (v - u) / math.sqrt(2)) if v >= u
               else min(v, 1 - u, (u - v) / math.sqrt(2)))
      if edges * res < keep:
        continue
      x, y = -GRID.half_size + (c + u) * res, -GRID.half_size + (r + v) * res
      (h,), (n,) = _np_surface(self.field, GRID, [[x, y]])
      z = h + (radius - 0.002) / n[2]  # 2 mm into the triangle's plane
      data.qpos[:] = [x, y, z, 1, 0, 0, 0]
      mujoco.mj_forward(model, data)
      dists = [data.contact[i].dist for i in range(data.ncon)]
      self.assertNotEmpty(dists)
      got = terrain.clearance(jnp.asarray(self.field, jnp.float32), GRID,
                              jnp.asarray([x, y, z], jnp.float32), jnp.asarray(radius))
      self.assertAlmostEqual(float(got), min(dists), delta=1e-4)
      self.assertAlmostEqual(min(dists), -0.002, delta=1e-6)
      checked += 1

  def test_the_env_model_holds_the_grid(self):
    # Catches an hfield whose size or node count differs from the grid the env computes heights
    # on (the surface would not be the one MJX collides with).
    model = env_lib.LocomotionEnv(CFG).robot.mj_model
    self.assertEqual(model.nhfield, 1)
    self.assertEqual((model.hfield_nrow[0], model.hfield_ncol[0]), (GRID.nodes, GRID.nodes))
    np.testing.assert_allclose(model.hfield_size[0][:3], [2.6, 2.6, 1.0])
    self.assertGreater(model.hfield_size[0][3], 4 * 0.23)  # deeper than the deepest pit


# 3-6. THE ENV ON A HEIGHTFIELD


class EnvTerrainTest(absltest.TestCase):
  """Two envs, one compiled reset and step shared by every test."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # As the rough recipes: a thigh's touch costs reward.limb_contact, only the trunk's ends the
    # episode, and an episode that ends half a tile from its start is promoted, or, if its
    # command cannot take it that far, one that walks 80 % of its command. The fall height is
    # low, so that a trunk lowered to its thighs' height stands.
    cfg = _config(env__init_joint_noise=0.0, env__init_velocity_noise=0.0,
                  env__obs_noise_scale=0.0, env__limb_contact_ends=False,
                  reward__limb_contact=-1.0, env__fall_height=0.05,
                  terrain__promote_distance=2.0, terrain__promote_within_reach=True)
    cls.env = env = env_lib.LocomotionEnv(cfg)
    manifest = families.make_manifest(cfg)
    flat = [f for f in manifest.eval_families if f.stratum == "flat"][:2]
    params = families.stack_params(flat, cfg.terrain)  # nominal: no pushes, level gravity
    cls.params = params.replace(commands=jnp.zeros_like(params.commands))
    cls.reset = staticmethod(jax.jit(jax.vmap(env.reset)))
    cls.step = staticmethod(jax.jit(jax.vmap(env.step)))
    cls.heights = staticmethod(jax.jit(jax.vmap(env.heights)))
    cls.zero = jnp.zeros((2, env.action_size))
    model = env.robot.mj_model
    cls.foot_radius = model.geom_size[env.robot.foot_geom_ids, 0]

  def _family(self, kinds, seeds, lows, highs):
    draw = terrain.TerrainDraw(type=jnp.asarray(kinds, jnp.int32),
                               seed=jnp.asarray(seeds, jnp.uint32),
                               magnitude=jnp.asarray(np.stack([lows, highs], -1), jnp.float32),
                               shape=terrain.shapes(CFG.terrain, np.asarray(kinds),
                                                    np.asarray(seeds)))
    return self.params.replace(terrain=draw)

  def _fields(self, state) -> np.ndarray:
    """float64 [2, nodes, nodes]: each env's heightfield this episode."""
    return np.asarray(self.heights(state), np.float64)

  def _start(self, family, seed=0, same=False):
    keys = jax.random.split(jax.random.key(seed), 2)
    if same:
      keys = jnp.stack([keys[0], keys[0]])
      family = jax.tree.map(lambda x: jnp.stack([x[0], x[0]]), family)
    return self.reset(keys, family)

  def _set_qpos(self, state, i, xy=None, z=None, quat=None):
    qpos = state.data.qpos
    if xy is not None:
      qpos = qpos.at[i, 0:2].set(xy)
    if z is not None:
      qpos = qpos.at[i, 2].set(z)
    if quat is not None:
      qpos = qpos.at[i, 3:7].set(quat)
    return state.replace(data=state.data.replace(qpos=qpos))

  def test_first_reset_draws_levels_and_builds_their_ground(self):
    # The first level is drawn from 0 .. initial_level_max (3), the ground is the stairs of that
    # level, and no promotion or demotion is reported at a reset. Catches a first level drawn
    # over all levels, or a first reset that moves levels.
    norm, to_edge = _units()
    family = self._family([STAIRS_UP, STAIRS_DOWN], [1, 2], [0.05, 0.05], [0.23, 0.23])
    seen = set()
    for seed in range(10):
      state = self._start(family, seed)
      levels = np.asarray(state.terrain.level)
      seen.update(levels.tolist())
      for i, sign in ((0, -1.0), (1, 1.0)):
        riser = 0.05 + levels[i] / TOP * 0.18
        np.testing.assert_allclose(self._fields(state)[i],
                                   sign * riser * np.minimum(to_edge // 3, 4), atol=2e-6)
      np.testing.assert_array_equal(state.metrics["terrain/promoted"], 0.0)
      np.testing.assert_array_equal(state.metrics["terrain/demoted"], 0.0)
      np.testing.assert_array_equal(state.terrain.offset, 0.0)
    self.assertEqual(seen, {0, 1, 2, 3})

  def test_a_foot_rests_on_a_bump_at_its_height(self):
    # The robot is dropped onto rough ground off the platform and stands 0.3 s: each foot in contact rests on
    # the NumPy surface under it, not at z = 0. Catches an hfield the physics does not see (the
    # feet would sink to z = 0 or fall through), or heights written transposed.
    family = self._family([ROUGH, ROUGH], [7, 8], [0.05, 0.05], [0.05, 0.05])
    state = self._start(family)
    fields = self._fields(state)
    gx, gy = np.meshgrid(np.linspace(-0.35, 0.35, 15), np.linspace(-0.3, 0.3, 13))
    for i, xy in ((0, (1.3, 1.1)), (1, (-1.2, 1.4))):
      patch = np.stack([gx.ravel() + xy[0], gy.ravel() + xy[1]], -1)
      top = _np_surface(fields[i], GRID, patch)[0].max()
      state = self._set_qpos(state, i, xy=xy, z=float(state.data.qpos[i, 2]) + top + 0.005)
    for _ in range(15):  # 0.3 s: landed and at rest (later, zero actions drift off the bumps)
      state = self.step(state, self.zero)
      np.testing.assert_array_equal(state.reset_reason, R_NONE)
    feet = np.asarray(state.data.geom_xpos[:, self.env.robot.foot_geom_ids], np.float64)
    on_bumps = 0
    for i in range(2):
      height, normal = _np_surface(fields[i], GRID, feet[i, :, :2])
      gap = (feet[i, :, 2] - height) * normal[:, 2] - self.foot_radius
      touching = gap < 0.01
      self.assertGreaterEqual(touching.sum(), 3, gap)
      np.testing.assert_array_less(np.abs(gap[touching]), 3e-3)
      on_bumps += (height[touching] > 0.01).sum()
    self.assertGreater(on_bumps, 0)

  def _ridge(self, height):
    """A flat field with one ridge of nodes at y = 0, x = 0.1 and 0.2 m, `height` tall."""
    field = np.zeros((GRID.nodes, GRID.nodes), np.float32)
    x, y = _node_xy()
    field[(np.abs(y) < 1e-6) & (x > 0.05) & (x < 0.25)] = height
    return field

  def test_a_trunk_touching_the_terrain_ends_the_episode_as_body_contact(self):
    # Env 0's trunk bottom is 5 cm into a ridge under its front half; env 1's ridge is 3 cm below
    # the trunk. The trunk does not collide with the heightfield, so only the probe check can
    # see it. Catches probe points left in the geom frame, a radius added the wrong way, or a
    # body-contact check that reads the plane's contacts.
    family = self._family([FLAT, FLAT], [0, 0], [0.0, 0.0], [0.0, 0.0])
    state = self._start(family, same=True)
    robot, model = self.env.robot, self.env.robot.mj_model
    trunk = [g for g in robot.body_contact_geom_ids if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX]
    self.assertLen(trunk, 1)
    bottom = float(state.data.geom_xpos[0, trunk[0], 2]) - model.geom_size[trunk[0], 2]
    for i in range(2):
      state = self._set_qpos(state, i, xy=(0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0))
    # The ridges as the families' shapes at scale 1 (rough ground of magnitude 1 m).
    heights = jnp.stack([self._ridge(bottom + 0.05), self._ridge(bottom - 0.03)])
    ridged = state.family.terrain.replace(type=jnp.full((2,), ROUGH, jnp.int32),
                                          magnitude=jnp.ones((2, 2)), shape=heights)
    state = state.replace(family=state.family.replace(terrain=ridged))
    np.testing.assert_array_equal(self._fields(state), np.asarray(heights, np.float64))
    after = self.step(state, self.zero)
    np.testing.assert_array_equal(after.reset_reason, [R_BODY, R_NONE])
    np.testing.assert_array_equal(after.signals.body_contact, [True, False])
    np.testing.assert_array_equal(after.terminated, [True, False])

  def test_a_thighs_touch_costs_limb_contact_and_the_episode_goes_on(self):
    # Both trunks 9 cm above the flat platform (the box's bottom 3.3 cm above it), the calves
    # folded; env 0's four thighs swung 1 rad back reach the ground, env 1's front ones, at
    # 1.6 rad, stay above it. The thighs do not collide with the heightfield: only their probes
    # see them. Catches limb touches that end the episode, a penalty that counts the trunk or
    # ignores how many thighs touch, and touches not reported as body contact.
    family = self._family([FLAT, FLAT], [0, 0], [0.0, 0.0], [0.0, 0.0])
    state = self._start(family, same=True)
    robot = self.env.robot
    qpos = np.array(state.data.qpos)
    qpos[:, 2] = 0.09
    for i, front in ((0, 1.0), (1, 1.6)):
      for leg in LEGS:
        thigh = robot.qpos_joint_adr[robot.joint_names.index(f"{leg}_thigh_joint")]
        qpos[i, thigh] = front if leg[0] == "F" else 1.0
        qpos[i, robot.qpos_joint_adr[robot.joint_names.index(f"{leg}_calf_joint")]] = -2.7
    after = self.step(state.replace(data=state.data.replace(qpos=jnp.asarray(qpos))), self.zero)
    np.testing.assert_array_equal(after.reset_reason, [R_NONE, R_NONE])
    np.testing.assert_array_equal(after.terminated, [False, False])
    np.testing.assert_array_equal(after.signals.body_contact, [True, True])
    np.testing.assert_allclose(after.metrics["reward/limb_contact"],
                               [-1.0 * self.env.dt * 4, -1.0 * self.env.dt * 2], rtol=1e-6)

  def test_a_robot_one_tile_away_steps_as_on_the_tile(self):
    # Env 1 is env 0 moved one tile along x (its feet's last positions too): the step wraps it
    # back onto the same ground, records the tile in `offset`, and it ends where env 0 does.
    # Catches a missing wrap (its feet would be off the heightfield), an offset not recorded,
    # and the feet's last positions left unwrapped (a 200 m/s foot speed).
    family = self._family([ROUGH, ROUGH], [3, 3], [0.08, 0.08], [0.08, 0.08])
    state = self._start(family, same=True)
    tile = GRID.tile_size
    moved = self._set_qpos(state, 1, xy=state.data.qpos[1, 0:2] + jnp.array([tile, 0.0]))
    moved = moved.replace(task=moved.task.replace(
        foot_xy=moved.task.foot_xy.at[1, :, 0].add(tile)))
    after = self.step(moved, self.zero)
    np.testing.assert_allclose(after.terrain.offset, [[0.0, 0.0], [tile, 0.0]])
    np.testing.assert_allclose(after.data.qpos[1], after.data.qpos[0], atol=1e-4)
    np.testing.assert_allclose(after.signals.trunk_height[1], after.signals.trunk_height[0],
                               atol=1e-5)
    np.testing.assert_allclose(after.obs["critic"][1], after.obs["critic"][0], atol=1e-3)
    np.testing.assert_allclose(after.signals.foot_speed[1], after.signals.foot_speed[0],
                               atol=1e-2)
    np.testing.assert_array_equal(after.reset_reason, R_NONE)

  def test_a_trunk_beyond_half_a_tile_is_moved_back_onto_it(self):
    # On flat ground, env 0 stands at x = -1.7 m and env 1 at x = +2.3 m, the same spot of the
    # next tile: the step moves env 1 back by one tile. Catches a wrap that waits for a whole
    # tile (floor) or moves the wrong way.
    family = self._family([FLAT, FLAT], [0, 0], [0.0, 0.0], [0.0, 0.0])
    state = self._start(family, same=True)
    y = float(state.data.qpos[0, 1])
    state = self._set_qpos(state, 0, xy=(-1.7, y))
    state = self._set_qpos(state, 1, xy=(2.3, y))
    after = self.step(state, self.zero)
    np.testing.assert_allclose(after.terrain.offset, [[0.0, 0.0], [4.0, 0.0]])
    np.testing.assert_array_less(np.abs(after.data.qpos[:, 0]), GRID.tile_size / 2)
    np.testing.assert_allclose(after.data.qpos[1], after.data.qpos[0], atol=1e-4)

  def _at_the_time_limit(self, state, progress, offset=((0.0, 0.0), (0.0, 0.0))):
    """Both envs on their episode's last step at level 4, commanded 10 m, having walked
    `progress` m along the command and been moved back by `offset` (the wrap's)."""
    return state.replace(
        task=state.task.replace(step=jnp.full((2,), self.env.episode_steps - 1, jnp.int32)),
        terrain=state.terrain.replace(level=jnp.array([4, 4], jnp.int32),
                                      offset=jnp.asarray(offset, jnp.float32),
                                      commanded=jnp.array([10.0, 10.0]),
                                      progress=jnp.asarray(progress, jnp.float32)))

  def test_an_auto_reset_moves_the_level_by_how_far_the_episode_went(self):
    # Both episodes time out on this step, standing where they started, under the rough
    # recipes' rule (promoted 2 m from the start). Env 0, whose command (0.5 m/s forward)
    # reaches 2 m, walked all of its 10 m commanded, but back to its start: its level stays.
    # Env 1 walked nothing of its 10 m but was moved back by one tile on the way (the wrap's
    # offset): it ended 4 m from its start, and is promoted, its new ground the next level's.
    # Catches the recipe's rule not applied (env 0 promoted, env 1 demoted), the distance read
    # without the wrap's whole tiles (env 1 demoted), the reach of another schedule or of fewer
    # steps than the episode's (env 0 promoted), a promotion not applied or not reported, and
    # bookkeeping not cleared for the new episode.
    norm, to_edge = _units()
    family = self._family([STAIRS_UP, STAIRS_UP], [1, 1], [0.05, 0.05], [0.23, 0.23])
    family = family.replace(commands=family.commands.at[0, :, 0].set(0.5))
    state = self._at_the_time_limit(self._start(family), progress=[10.0, 0.0],
                                    offset=[[0.0, 0.0], [0.0, -4.0]])
    after = self.step(state, self.zero)
    np.testing.assert_array_equal(after.truncated, [True, True])
    np.testing.assert_array_equal(after.terrain.level, [4, 5])
    np.testing.assert_array_equal(after.metrics["terrain/promoted"], [0.0, 1.0])
    np.testing.assert_array_equal(after.metrics["terrain/demoted"], [0.0, 0.0])
    np.testing.assert_array_equal(after.metrics["terrain/level"], [4.0, 5.0])
    np.testing.assert_array_equal(after.terrain.commanded, 0.0)
    np.testing.assert_array_equal(after.terrain.progress, 0.0)
    riser = 0.05 + 5 / 9 * 0.18
    np.testing.assert_allclose(self._fields(after)[1], -riser * np.minimum(to_edge // 3, 4),
                               atol=2e-6)

  def test_an_auto_reset_judges_a_command_that_cannot_reach_2_m_by_what_it_walked(self):
    # Both envs stand still under a zero command (reach 0 m), at their start when the episode
    # times out, having been commanded 10 m. Env 0 walked 8 m of it along the command: promoted
    # (the fraction rule, 80 %). Env 1 walked 7.9 m: unchanged. Catches the within-reach rule
    # not wired into the auto-reset (env 0 unchanged) or applied with the wrong fraction.
    family = self._family([STAIRS_UP, STAIRS_UP], [1, 1], [0.05, 0.05], [0.23, 0.23])
    state = self._at_the_time_limit(self._start(family, same=True), progress=[8.0, 7.9])
    after = self.step(state, self.zero)
    np.testing.assert_array_equal(after.truncated, [True, True])
    np.testing.assert_array_equal(after.terrain.level, [5, 4])
    np.testing.assert_array_equal(after.metrics["terrain/promoted"], [1.0, 0.0])


# 6. THE CURRICULUM RULES


def _next_levels(level, terminated, timed_out, commanded, progress, distance=None,
                 promote_distance=0.0, reach=None):
  """The levels after each episode, under the commanded-fraction rule (`promote_distance`
  0), the distance rule, or with a `reach` per episode the distance rule within reach."""
  if distance is None:
    distance = jnp.zeros_like(commanded)
  rule = _next_levels_under(promote_distance, reach is not None)
  if reach is None:
    return rule(level, terminated, timed_out, commanded, progress, distance)
  return rule(level, terminated, timed_out, commanded, progress, distance, reach)


@functools.cache
def _next_levels_under(promote_distance, within_reach=False):
  cfg = dataclasses.replace(CFG.terrain, promote_distance=promote_distance,
                            promote_within_reach=within_reach)
  return jax.jit(jax.vmap(functools.partial(terrain.next_level, cfg)))


class CurriculumTest(absltest.TestCase):

  def test_rules_on_hand_built_episodes(self):
    # promote 0.8, demote 0.5, min commanded 2 m, levels 0 .. 9. Catches a promotion without the
    # timeout, a demotion that ignores termination, strict/loose comparisons at the fractions,
    # judging episodes commanded too little, and missing clips.
    cases = [  # level, terminated, timed out, commanded, progress -> next level
        (3, False, True, 10.0, 8.0, 4),    # exactly 80 %: promoted
        (3, False, True, 10.0, 7.9, 3),    # between the fractions: unchanged
        (3, False, False, 10.0, 9.0, 3),   # walked enough but did not time out: no promotion
        (3, True, False, 10.0, 9.0, 2),    # terminated: down
        (3, True, False, 0.5, 0.5, 2),     # terminated though barely commanded: down
        (3, False, True, 10.0, 4.9, 2),    # below 50 %: down
        (3, False, True, 10.0, 5.0, 3),    # exactly 50 %: unchanged
        (3, False, True, 1.9, 0.0, 3),     # commanded < 2 m: walking nothing is not judged
        (3, False, True, 1.9, 1.9, 3),     # ... nor is walking all of it
        (3, False, True, 2.0, 1.6, 4),     # exactly the minimum and 80 %
        (3, False, True, 4.0, 4.0, 4),     # a slow walker: 0.2 m/s for 20 s, all of it walked
        (TOP, False, True, 10.0, 10.0, TOP),  # clipped at the top
        (0, True, False, 10.0, 0.0, 0),    # clipped at the bottom
        (0, False, True, 10.0, -3.0, 0),   # walked backwards at level 0
    ]
    level, term, timeout, commanded, progress, want = (np.array(c) for c in zip(*cases))
    got = _next_levels(jnp.asarray(level, jnp.int32), jnp.asarray(term), jnp.asarray(timeout),
                       jnp.asarray(commanded, jnp.float32), jnp.asarray(progress, jnp.float32))
    np.testing.assert_array_equal(got, want)
    self.assertEqual(got.dtype, jnp.int32)

  def test_distance_rule_on_hand_built_episodes(self):
    # promote_distance 2 m, demote 0.5, min commanded 2 m. Catches the fraction rule still
    # deciding promotions, a promotion without the timeout or with a strict comparison, the
    # minimum commanded distance required of it, and a promotion that loses to a demotion.
    cases = [  # level, terminated, timed out, commanded, progress, distance -> next level
        (3, False, True, 10.0, 1.0, 2.0, 4),    # exactly 2 m away, though 10 % walked: up
        (3, False, True, 10.0, 10.0, 1.99, 3),  # all walked, 1.99 m away: unchanged
        (3, False, True, 10.0, 4.0, 1.0, 2),    # below 50 % and near its start: down
        (3, False, False, 10.0, 10.0, 5.0, 3),  # far, but did not time out
        (3, True, False, 10.0, 10.0, 5.0, 2),   # far, but terminated: down
        (3, False, True, 1.0, 2.5, 2.5, 4),     # commanded 1 m, went 2.5 m: up
        (TOP, False, True, 10.0, 10.0, 4.0, TOP),  # clipped at the top
    ]
    level, term, timeout, commanded, progress, distance, want = (
        np.array(c) for c in zip(*cases))
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    got = _next_levels(jnp.asarray(level, jnp.int32), jnp.asarray(term), jnp.asarray(timeout),
                       f32(commanded), f32(progress), f32(distance), promote_distance=2.0)
    np.testing.assert_array_equal(got, want)

  def test_within_reach_rule_on_hand_built_episodes(self):
    # promote_distance 2 m, promote 0.8, demote 0.5, min commanded 2 m, with
    # promote_within_reach: an episode whose command reaches less than 2 m is promoted by the
    # fraction rule. Catches the fraction rule applied to commands that reach 2 m, a reach
    # compared loosely (<=), the minimum commanded distance or the timeout not required of it,
    # and the distance rule lost.
    cases = [  # level, terminated, timed out, commanded, progress, distance, reach -> level
        (3, False, True, 5.0, 4.0, 0.3, 1.5, 4),    # reach 1.5 m, 80 % walked: up
        (3, False, True, 5.0, 3.9, 0.3, 1.5, 3),    # ... 78 % walked: unchanged
        (3, False, True, 5.0, 5.0, 1.5, 2.0, 3),    # reach exactly 2 m: the distance rule's
        (3, False, True, 5.0, 5.0, 1.9, 2.5, 3),    # reach 2.5 m, 1.9 m away: unchanged
        (3, False, True, 5.0, 1.0, 2.0, 2.5, 4),    # ... 2 m away: up, as without reach
        (3, False, True, 1.9, 1.9, 0.0, 0.5, 3),    # commanded < 2 m: not judged
        (3, False, False, 5.0, 5.0, 0.3, 1.5, 3),   # all walked, but not to the time limit
        (3, True, False, 5.0, 5.0, 0.3, 1.5, 2),    # terminated: down
        (3, False, True, 5.0, 2.4, 0.3, 1.5, 2),    # below 50 %: down
    ]
    level, term, timeout, commanded, progress, distance, reach, want = (
        np.array(c) for c in zip(*cases))
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    args = (jnp.asarray(level, jnp.int32), jnp.asarray(term), jnp.asarray(timeout),
            f32(commanded), f32(progress), f32(distance))
    got = _next_levels(*args, promote_distance=2.0, reach=f32(reach))
    np.testing.assert_array_equal(got, want)
    # Without promote_within_reach the first case is unchanged: the distance rule alone.
    np.testing.assert_array_equal(_next_levels(*args, promote_distance=2.0)[0], 3)

  def test_command_reach_against_closed_forms(self):
    # 500 steps of 0.02 s (10 s). Forward 0.4 m/s: 4 m. Lateral -0.3 m/s: 3 m. 1 m/s forward
    # for 5 s then back for 5 s: 0. An arc, 0.5 m/s at 0.4 rad/s: the chord 2 v / w sin(w T / 2)
    # = 2.2732 m (the heading of each step the one at its start, as the env's commands apply:
    # within 0.005 m of the continuous arc). A turn on the spot then forward 0.4 m/s from 4 s:
    # 2.4 m, whatever the heading turned to.
    times = jnp.asarray([[0.0, 20.0], [0.0, 20.0], [0.0, 5.0], [0.0, 20.0], [0.0, 4.0]])
    commands = jnp.asarray([
        [[0.4, 0.0, 0.0], [9.0, 9.0, 9.0]],
        [[0.0, -0.3, 0.0], [9.0, 9.0, 9.0]],
        [[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]],
        [[0.5, 0.0, 0.4], [9.0, 9.0, 9.0]],
        [[0.0, 0.0, 0.5], [0.4, 0.0, 0.0]],
    ])
    reach = jax.jit(jax.vmap(functools.partial(terrain.command_reach, num_steps=500, dt=0.02)))
    got = np.asarray(reach(times, commands))
    chex.assert_shape(got, (5,))
    arc = 2 * 0.5 / 0.4 * np.sin(0.4 * 10.0 / 2)
    np.testing.assert_allclose(got, [4.0, 3.0, 0.0, arc, 2.4], atol=5e-3)
    np.testing.assert_allclose(got[[0, 1, 2, 4]], [4.0, 3.0, 0.0, 2.4], atol=1e-4)

  def test_an_always_successful_policy_climbs_to_the_top_and_stays(self):
    # Every episode times out having walked all of its 10 m: from levels 0 .. 3 every env
    # reaches level 9 in at most 9 episodes and stays there (a mean level stalling below the
    # top would mean a clip or a promotion rule that lets envs fall back).
    level = jnp.asarray(np.arange(64) % 4, jnp.int32)
    yes, no, ten = jnp.ones(64, bool), jnp.zeros(64, bool), jnp.full((64,), 10.0)
    means = []
    for _ in range(15):
      level = _next_levels(level, no, yes, ten, ten)
      means.append(float(np.mean(level)))
    np.testing.assert_array_equal(level, TOP)
    self.assertEqual(means[8:], [float(TOP)] * 7)
    np.testing.assert_allclose(means[:3], [2.5, 3.5, 4.5])

  def test_track_accumulates_commanded_and_walked_distance(self):
    # Command (0.3, 0.4) m/s: 0.5 m/s along (0.6, 0.8); trunk velocity (1.0, 0.5): 0.6 + 0.4 =
    # 1.0 m/s along it. Over 0.02 s: 0.01 m commanded, 0.02 m walked. A zero command walks
    # nothing whatever the velocity. A lateral command (0, -1) with velocity (0.2, -0.5): 0.5.
    zero = jnp.zeros(())
    state = terrain.TerrainState(level=jnp.zeros((), jnp.int32), offset=jnp.zeros(2), commanded=jnp.asarray(1.0),
                                 progress=jnp.asarray(0.5))
    one = terrain.track(state, jnp.array([0.3, 0.4, 0.7]), jnp.array([1.0, 0.5, 0.3]), 0.02)
    self.assertAlmostEqual(float(one.commanded), 1.01, delta=1e-6)
    self.assertAlmostEqual(float(one.progress), 0.52, delta=1e-6)
    idle = terrain.track(state, jnp.array([0.0, 0.0, 0.5]), jnp.array([1.0, 0.5, 0.0]), 0.02)
    self.assertEqual((float(idle.commanded), float(idle.progress)), (1.0, 0.5))
    side = terrain.track(state.replace(commanded=zero, progress=zero),
                         jnp.array([0.0, -1.0, 0.0]), jnp.array([0.2, -0.5, 0.0]), 0.1)
    self.assertAlmostEqual(float(side.commanded), 0.1, delta=1e-7)
    self.assertAlmostEqual(float(side.progress), 0.05, delta=1e-7)


# 7. FAMILIES AND THE MANIFEST


class FamiliesTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = _config(panel__strata=config_lib.ALL_STRATA)
    cls.manifest = families.make_manifest(cls.config)

  def test_the_manifest_is_a_pure_function_of_the_config_and_round_trips(self):
    again = families.make_manifest(_config(panel__strata=config_lib.ALL_STRATA))
    self.assertEqual(again, self.manifest)
    self.assertEqual(again.hash, self.manifest.hash)
    loaded = families.Manifest.from_json(self.manifest.to_json())
    self.assertEqual(loaded, self.manifest)
    self.assertEqual(loaded.hash, self.manifest.hash)
    # A change of terrain changes the hashes (the panel's included: it stands on that ground).
    other = families.make_manifest(_config(panel__strata=config_lib.ALL_STRATA,
                                           terrain__panel_rough_height=0.06))
    self.assertNotEqual(other.panel_hash, self.manifest.panel_hash)
    # The curriculum's promotion rules move training envs only: the whole manifest's hash
    # changes, the panel's does not, so such runs are compared on one panel.
    rules = families.make_manifest(_config(
        panel__strata=config_lib.ALL_STRATA, terrain__promote_fraction=0.7,
        terrain__promote_distance=2.0, terrain__promote_within_reach=True,
        terrain__demote_fraction=0.4, terrain__min_commanded_distance=1.5))
    self.assertNotEqual(rules.hash, self.manifest.hash)
    self.assertEqual(rules.panel_hash, self.manifest.panel_hash)
    self.assertEqual(rules.eval_families, self.manifest.eval_families)

  def test_training_types_follow_the_weights(self):
    only_rough = families.make_manifest(_config(terrain__type_weights=(1.0, 0.0, 0.0, 0.0, 0.0)))
    self.assertEqual({f.terrain_type for f in only_rough.train_families}, {"rough"})
    self.assertEqual({f.terrain_magnitude for f in only_rough.train_families}, {(0.0, 0.1)})
    kinds = [f.terrain_type for f in self.manifest.train_families]
    self.assertLen(set(kinds), 5)  # 64 families over 5 equally likely types
    ranges = {"rough": (0.0, 0.1), "slope": (0.0, 25.0), "stairs_up": (0.05, 0.23),
              "stairs_down": (0.05, 0.23), "obstacles": (0.05, 0.2)}
    for f in self.manifest.train_families:
      self.assertEqual(f.terrain_magnitude, ranges[f.terrain_type])

  def test_held_out_strata_stand_on_the_panel_magnitudes(self):
    want = {"rough": ({"rough"}, 0.05), "stairs": ({"stairs_up", "stairs_down"}, 0.10),
            "obstacles": ({"obstacles"}, 0.08),
            "stairs_up_5cm": ({"stairs_up"}, 0.05), "stairs_up_10cm": ({"stairs_up"}, 0.10),
            "stairs_up_15cm": ({"stairs_up"}, 0.15), "stairs_up_20cm": ({"stairs_up"}, 0.20),
            "stairs_down_5cm": ({"stairs_down"}, 0.05),
            "stairs_down_10cm": ({"stairs_down"}, 0.10),
            "stairs_down_15cm": ({"stairs_down"}, 0.15),
            "stairs_down_20cm": ({"stairs_down"}, 0.20)}
    seen = set()
    for f in self.manifest.eval_families:
      kinds, size = want.get(f.stratum, ({"flat"}, 0.0))
      self.assertIn(f.terrain_type, kinds, f.stratum)
      self.assertEqual(f.terrain_magnitude, (size, size), f.stratum)
      seen.add(f.stratum)
    self.assertEqual(seen, set(config_lib.ALL_STRATA))  # stairs by riser height included

  def test_every_family_spawns_with_its_feet_on_the_platform(self):
    # The platform (1.2 m) is where every episode starts; the feet reach 0.35 m from the trunk.
    # Catches held-out families spawned up to 0.5 m from the centre (their feet would start
    # inside bumps, blocks or a riser).
    limit = CFG.terrain.platform_size / 2 - terrain.FOOT_REACH
    for f in self.manifest.train_families + self.manifest.eval_families:
      self.assertLessEqual(max(abs(x) for x in f.spawn_offset), limit + 1e-9, f.stratum)

  def test_the_plane_has_no_terrain_keys_and_old_manifests_still_load(self):
    plane = families.make_manifest(config_lib.default())
    for f in plane.train_families + plane.eval_families:
      self.assertFalse(set(families.TERRAIN_FIELDS) & set(f.to_dict()))
    self.assertNotIn("terrain", plane.ranges)
    self.assertIsNone(plane.train_params().terrain)
    old = pathlib.Path(__file__).parent / "data" / "pre_signals_run" / "manifest.json"
    loaded = families.Manifest.from_json(old.read_text())  # verifies its recorded hash
    self.assertEqual(loaded.hash, json.loads(old.read_text())["hash"])

  def test_a_shared_terrain_seed_is_leakage(self):
    train = [f for f in self.manifest.train_families if f.terrain_type != "flat"]
    held = [i for i, f in enumerate(self.manifest.eval_families) if f.stratum == "rough"]
    shared = train[0].terrain_seed
    evals = list(self.manifest.eval_families)
    evals[held[0]] = dataclasses.replace(evals[held[0]], terrain_seed=shared)
    with self.assertRaisesRegex(families.LeakageError, rf"terrain seeds \[{shared}\]"):
      families.Manifest(train_families=self.manifest.train_families,
                        eval_families=tuple(evals), ranges=self.manifest.ranges)
    # Flat ground has no shape: a flat held-out family's seed is not leakage.
    flat = [i for i, f in enumerate(self.manifest.eval_families) if f.terrain_type == "flat"]
    evals = list(self.manifest.eval_families)
    evals[flat[0]] = dataclasses.replace(evals[flat[0]], terrain_seed=shared)
    families.Manifest(train_families=self.manifest.train_families,
                      eval_families=tuple(evals), ranges=self.manifest.ranges)


# 8. CONFIG ERRORS


class ConfigTest(absltest.TestCase):

  def test_each_refusal_names_the_field_and_value(self):
    # Catches a refusal that never fires or names another field.
    cases = [
        (dict(terrain__ground="hill"), r"config\.terrain\.ground='hill' is invalid"),
        (dict(terrain__tile_size=4.05), r"config\.terrain\.tile_size=4\.05 is invalid"),
        (dict(terrain__platform_size=4.0), r"config\.terrain\.platform_size=4\.0 is invalid: "
         r"it must be smaller"),
        (dict(terrain__margin=0.4), r"config\.terrain\.margin=0\.4 is invalid"),
        (dict(terrain__types=("rough", "lava"), terrain__type_weights=(1.0, 1.0)),
         r"config\.terrain\.types=\('rough', 'lava'\) is invalid"),
        (dict(terrain__type_weights=(1.0,)), r"config\.terrain\.type_weights=\(1\.0,\) is "
         r"invalid"),
        (dict(terrain__num_levels=1), r"config\.terrain\.num_levels=1 is invalid"),
        (dict(terrain__initial_level_max=10), r"config\.terrain\.initial_level_max=10 is "
         r"invalid"),
        (dict(terrain__demote_fraction=0.8), r"config\.terrain\.demote_fraction=0\.8 is invalid"),
        (dict(terrain__promote_distance=-1.0), r"config\.terrain\.promote_distance=-1\.0 is "
         r"invalid: it must be >= 0"),
        (dict(terrain__promote_distance=float("nan")), r"config\.terrain\.promote_distance=nan "
         r"is invalid"),
        (dict(terrain__promote_within_reach=True), r"config\.terrain\.promote_within_reach=True "
         r"is invalid: it needs terrain\.promote_distance > 0 \(got 0\.0\)"),
        (dict(terrain__promote_within_reach=1), r"config\.terrain\.promote_within_reach=1 is "
         r"invalid: it must be True or False"),
        (dict(terrain__max_contact_points=-1), r"config\.terrain\.max_contact_points=-1 is "
         r"invalid: it must be 0 \(every contact slot\) or a positive integer"),
        (dict(terrain__max_contact_points=8.0), r"config\.terrain\.max_contact_points=8\.0 is "
         r"invalid"),
        (dict(families__spawn_offset=0.5), r"config\.terrain\.platform_size=1\.2 is invalid: "
         r"the robot"),
        (dict(env__terminate_on_body_contact=False),
         r"config\.env\.terminate_on_body_contact=False is invalid"),
    ]
    for changes, pattern in cases:
      with self.subTest(**{k: str(v) for k, v in changes.items()}):
        with self.assertRaisesRegex(ValueError, pattern):
          config_lib.validate(_config(**changes))
    plane = configs.with_changes(panel__strata=("flat", "rough"))
    with self.assertRaisesRegex(ValueError, r"config\.panel\.strata=\('flat', 'rough'\) is "
                                r"invalid: the strata \['rough'\] stand on heightfield"):
      config_lib.validate(plane)
    self.assertIs(config_lib.validate(CFG), CFG)


# 9. RECORDS


class RecordsTest(absltest.TestCase):

  def test_levels_per_type_and_summed_moves(self):
    # Catches levels summed over updates (they are the curriculum after the last one), empty
    # types listed, types named in the wrong order, and promotions averaged.
    levels = np.zeros((2, 6, LEVELS))
    levels[0, ROUGH, 0] = 8  # the first update: ignored
    levels[1, ROUGH, [0, 3]] = [2, 5]
    levels[1, OBSTACLES, TOP] = 1
    record = records_lib.summarize({
        "terrain/levels": levels, "terrain/mean_level": np.array([0.0, 3.0]),
        "terrain/promotions": np.array([3.0, 4.0]), "terrain/demotions": np.array([1.0, 0.0]),
        "episode/count": np.array([1.0, 1.0]), "episode/return_sum": np.zeros(2),
        "episode/length_sum": np.zeros(2)})
    self.assertEqual(record["terrain/levels"],
                     {"rough": [2, 0, 0, 5, 0, 0, 0, 0, 0, 0],
                      "obstacles": [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]})
    self.assertEqual((record["terrain/promotions"], record["terrain/demotions"]), (7.0, 1.0))
    self.assertEqual(record["terrain/mean_level"], 1.5)
    json.dumps(record)  # plain JSON values


# 10. A RESUMED RUN ON TERRAIN


def _host(tree):
  return jax.device_get(jax.tree.map(
      lambda x: jax.random.key_data(x) if storable.is_key(x) else x, tree))


# Slow-marked: the only test that compiles a heightfield training chunk (about 4 minutes of a
# cold 2-core machine); `pytest -m slow` runs it.
@pytest.mark.slow
class ResumeTest(absltest.TestCase):

  def test_one_chunk_saved_restored_and_continued_equals_two_straight(self):
    # Every leaf of the carry (the terrain's levels, heights and offsets included) after chunk,
    # save, restore, chunk equals two chunks straight, bit for bit; the first reset's levels are
    # the env's own draws; the chunk's update records carry the curriculum of the envs. Catches
    # terrain state left out of the checkpoint, or restored onto the wrong leaves.
    cfg = configs.tiny(chunks=2, terrain__ground="heightfield", families__spawn_offset=0.2)
    trainer = trainer_lib.make_trainer(cfg)
    key = jax.random.key(0)
    init = trainer.init(key)
    # The env keys as the trainer's init splits them: the first levels are reset's draws.
    k_env = jax.random.split(jax.random.split(key, 3)[1])[0]
    env = env_lib.LocomotionEnv(cfg)
    params = families.for_envs(trainer.manifest.train_params(), cfg.num_envs)
    drawn = jax.jit(jax.vmap(env.reset))(jax.random.split(k_env, cfg.num_envs), params)
    np.testing.assert_array_equal(init.env.terrain.level, drawn.terrain.level)
    np.testing.assert_array_equal(init.env.family.terrain.shape, drawn.family.terrain.shape)
    self.assertTrue(((np.asarray(init.env.terrain.level) >= 0)
                     & (np.asarray(init.env.terrain.level) <= 3)).all())

    first, metrics = trainer.train_chunk(init)
    first_host = _host(first)
    chex.assert_shape(first.env.family.terrain.shape, (cfg.num_envs, GRID.nodes, GRID.nodes))
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="terrain_resume_"))
    saver = checkpoint.Checkpointer(run_dir, cfg, trainer.manifest)
    saver.save(first, wall_seconds=0.0)
    saver.close()
    straight, _ = trainer.train_chunk(first)
    straight = _host(straight)

    abstract = jax.eval_shape(trainer.init, key)
    restored = checkpoint.restore(run_dir, abstract, cfg, trainer.manifest)
    chex.assert_trees_all_equal(_host(restored.carry), first_host)
    # A resumed run builds its trainer anew (this one's chunk is compiled for its own carry).
    resumed, _ = trainer_lib.make_trainer(cfg).train_chunk(restored.carry)
    chex.assert_trees_all_equal(_host(resumed), straight)

    # The chunk's records: the envs' types and levels at the chunk's end, counted in NumPy.
    kinds = np.asarray(first_host.env.family.terrain.type)
    levels = np.asarray(first_host.env.terrain.level)
    counts = np.zeros((6, LEVELS), int)
    np.add.at(counts, (kinds, levels), 1)
    want = {config_lib.TERRAIN_TYPES[t]: counts[t].tolist() for t in range(6) if counts[t].any()}
    records = records_lib.update_records(
        jax.device_get(metrics), first_update=0, batch_size=cfg.batch_size, sps=1.0,
        wall_seconds=1.0, device_memory=None)
    self.assertLen(records, cfg.updates_per_chunk)
    self.assertEqual(records[-1]["terrain/levels"], want)
    for record in records:
      self.assertEqual(sum(sum(c) for c in record["terrain/levels"].values()), cfg.num_envs)
      self.assertIn("terrain/promotions", record)


if __name__ == "__main__":
  absltest.main()
