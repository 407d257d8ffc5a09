"""Tests for the second-simulator check (mjx_walk.deploy.sim2sim) and `python -m mjx_walk.sim2sim`.

The references are independent of the code under test: the floor rotation is checked against the
slope's angle and direction written out by hand; each world's model against the manifest's draws
and the robot file's nominal values; the inclined floor against a C MuJoCo world built the MJX
way (level floor, tilted gravity) stepped side by side; the first observation against the MJX
env's own; the replay against MJX's evaluation of the same checkpoint with MJX's solver settings.
"""

import copy
import dataclasses
import json
import math
import pathlib
import shutil
import tempfile
import types
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk import sim2sim as sim2sim_cli
from mjx_walk.analysis import report
from mjx_walk.deploy import gaps as gaps_lib
from mjx_walk.deploy import sim2sim
from mjx_walk.evaluation import panel
from mjx_walk.run import ledger
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import env_state
from mjx_walk.sim import families
from mjx_walk.sim import ground as ground_lib
from mjx_walk.sim import robots
from mjx_walk.sim import terrain
from mjx_walk.sim._mjx import mjx

import commands
import configs
import runs

R = endings.ResetReason


def _gravity(degrees: float, direction: float) -> np.ndarray:
  tilt = math.radians(degrees)
  return 9.81 * np.array([math.sin(tilt) * math.cos(direction),
                          math.sin(tilt) * math.sin(direction), -math.cos(tilt)])


class FloorRotationTest(parameterized.TestCase):

  @parameterized.parameters((15.0, 0.0), (15.0, 2.0), (10.0, -2.5), (30.0, 1.0))
  def test_turns_gravity_straight_down_about_the_contour_line(self, degrees, direction):
    # Catches a rotation the wrong way round (floor tilted twice as much or not at all), about
    # the wrong axis, or not a rotation at all.
    rotation = sim2sim.floor_rotation(_gravity(degrees, direction))
    chex.assert_trees_all_close(rotation @ rotation.T, np.eye(3), atol=1e-12)
    self.assertAlmostEqual(np.linalg.det(rotation), 1.0, places=12)
    chex.assert_trees_all_close(rotation @ _gravity(degrees, direction) / 9.81,
                                np.array([0.0, 0.0, -1.0]), atol=1e-12)
    # The level floor's normal becomes the inclined floor's: tilted by the slope's angle ...
    normal = rotation @ np.array([0.0, 0.0, 1.0])
    self.assertAlmostEqual(math.degrees(math.acos(normal[2])), degrees, places=9)
    # ... about the contour line (horizontal, across the downhill direction), which stays put.
    contour = np.array([-math.sin(direction), math.cos(direction), 0.0])
    chex.assert_trees_all_close(rotation @ contour, contour, atol=1e-12)
    # Downhill is where the floor goes down: its normal leans that way.
    self.assertGreater(normal[:2] @ np.array([math.cos(direction), math.sin(direction)]), 0.0)

  def test_level_ground_is_not_turned(self):
    chex.assert_trees_all_close(sim2sim.floor_rotation(np.array([0.0, 0.0, -9.81])), np.eye(3))


def _panel_config(**changes):
  # Two envs in each of the five strata's families, so that every condition is present.
  return configs.replay(**changes)


class WorldsTest(absltest.TestCase):
  """The C MuJoCo worlds of a small panel (one family per stratum, two envs each)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = _panel_config()
    cls.manifest = families.make_manifest(cls.config)
    cls.world = sim2sim.CMuJoCoPanel(cls.config, cls.manifest)
    cls.worlds, cls.start = cls.world.worlds()
    cls.robot = robots.load("go2")

  def family(self, j: int) -> families.Family:
    return self.manifest.eval_families[j % len(self.manifest.eval_families)]

  def test_every_world_carries_its_family_draw_and_the_converged_solver(self):
    # Catches a family's draw copied to the wrong env, a field left nominal, or MJX's solver kept.
    nominal = self.robot.mj_model
    trunk, floor = self.robot.trunk_body_id, self.robot.floor_geom_id
    dofs = np.asarray(self.robot.qvel_joint_adr)
    self.assertLen(self.worlds, 10)
    strata = set()
    for j, world in enumerate(self.worlds):
      family, model = self.family(j), world.model
      strata.add(family.stratum)
      chex.assert_trees_all_close(
          model.geom_friction[[floor, *self.robot.foot_geom_ids], 0],
          np.full(5, family.friction), rtol=1e-6)
      self.assertAlmostEqual(model.body_mass[trunk],
                             nominal.body_mass[trunk] + family.payload_mass, places=4)
      chex.assert_trees_all_close(model.dof_damping[dofs],
                                  np.full(12, 0.5 + family.joint_friction), rtol=1e-6)
      chex.assert_trees_all_close(model.actuator_gainprm[:, 0],
                                  np.full(12, 40.0 * family.motor_strength), rtol=1e-6)
      chex.assert_trees_all_close(model.opt.gravity, np.array([0.0, 0.0, -9.81]))
      self.assertEqual((model.opt.iterations, model.opt.ls_iterations, model.opt.tolerance),
                       (100, 50, 1e-10))
      tilt = math.degrees(math.acos(world.rotation[2, 2]))
      self.assertAlmostEqual(tilt, family.slope_degrees, places=4)
    self.assertEqual(strata, {"flat", "slope", "push", "payload", "friction"})
    simulator = self.world.simulator
    self.assertEqual({k: simulator[k] for k in ("settings", "solver", "iterations",
                                                 "ls_iterations", "tolerance", "integrator",
                                                 "cone", "precision", "ccd")},
                     {"settings": "converged", "solver": "NEWTON", "iterations": 100,
                      "ls_iterations": 50, "tolerance": 1e-10, "integrator": "EULER",
                      "cone": "PYRAMIDAL", "precision": "float64", "ccd": "native"})
    self.assertAlmostEqual(simulator["physics_timestep"], 0.005)
    self.assertEqual(simulator["contact_timeconst"], [0.02])  # the robot file's, MuJoCo's default
    payload = next(j for j in range(10) if self.family(j).stratum == "payload")
    self.assertGreater(self.worlds[payload].model.body_mass[trunk],
                       nominal.body_mass[trunk] + 3.9)

  def test_solver_iterations_reach_mjx_and_every_world_under_mjxs_settings(self):
    # `env.solver_iterations` is written to MJX's model and, under `solver="mjx"`, steps every C
    # MuJoCo world (the slope's inclined floor, compiled apart, too); the converged solver still
    # caps at its own 100, and the robot file's line search is kept. Catches the value not
    # applied in the env, or not copied to the worlds compiled from the robot's spec.
    config = dataclasses.replace(
        self.config, env=dataclasses.replace(self.config.env, solver_iterations=2))
    expected = {"mjx": (2, 5, 1e-8), "converged": (100, 50, 1e-10)}
    for solver, settings in expected.items():
      world = sim2sim.CMuJoCoPanel(config, self.manifest, solver)
      self.assertEqual(int(world.env.model.opt.iterations), 2)
      worlds, _ = world.worlds()
      self.assertLen(worlds, 10)
      for one in worlds:
        self.assertEqual((one.model.opt.iterations, one.model.opt.ls_iterations,
                          one.model.opt.tolerance), settings)
      self.assertEqual(world.simulator["iterations"], settings[0])
    robot_file = sim2sim.CMuJoCoPanel(self.config, self.manifest, "mjx")
    self.assertEqual({one.model.opt.iterations for one in robot_file.worlds()[0]}, {1})

  def test_the_first_observation_is_the_mjx_envs_own(self):
    # Catches a second, drifting copy of the observation, a state turned the wrong way into the
    # inclined world (the slope's projected gravity and velocities), or another reset state.
    obs, command = self.world.observe(
        self.worlds, np.zeros(10, np.int32), np.asarray(self.start.task.last_action),
        np.asarray(self.start.task.gait_phase))
    chex.assert_shape(obs, (10, self.world.env.policy_layout.size))
    chex.assert_trees_all_close(np.asarray(obs), self.start.obs["policy"], atol=2e-6)
    chex.assert_trees_all_close(np.asarray(command), self.start.task.command)
    slope = next(j for j in range(10) if self.family(j).stratum == "slope")
    gravity = self.world.env.policy_layout.offsets()["projected_gravity"]
    self.assertGreater(abs(float(obs[slope, gravity])), 0.1)  # the slope is felt

  def test_the_inclined_floor_is_the_tilted_world_turned(self):
    # Steps the slope env's world beside a C MuJoCo world built the MJX way (level floor,
    # gravity tilted) with the same solver and targets: each state must be the other turned.
    # Both use elliptic friction cones here: a pyramid's edges are placed around each contact
    # normal by a rule that does not turn with the world, so only a round cone makes the two
    # worlds exact turns of each other (with pyramids they part by about 1.5 mm in this second;
    # the floor left level in the inclined world parts them by 15 cm).
    slope = next(j for j in range(10) if self.family(j).stratum == "slope")
    inclined = self.world.worlds()[0][slope]
    tilted_model = mujoco.MjModel.from_xml_path(str(self.robot.xml_path))
    tilted_model.opt.timestep = inclined.model.opt.timestep
    for name in ("geom_friction", "body_mass", "body_ipos", "dof_damping", "actuator_gainprm",
                 "actuator_biasprm"):
      getattr(tilted_model, name)[:] = getattr(inclined.model, name)
    for name in ("iterations", "ls_iterations", "tolerance"):
      setattr(tilted_model.opt, name, getattr(inclined.model.opt, name))
    tilted_model.opt.gravity[:] = np.asarray(self.world.family_params.gravity[slope], np.float64)
    for model in (tilted_model, inclined.model):
      model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    tilted = mujoco.MjData(tilted_model)
    tilted.qpos[:] = self.start.data.qpos[slope]
    tilted.qvel[:] = self.start.data.qvel[slope]
    tilted.ctrl[:] = inclined.data.ctrl
    rotation = inclined.rotation
    for _ in range(200):  # 1 s: the robot stands on the 15 degree slope, or slides down it
      mujoco.mj_step(tilted_model, tilted)
      mujoco.mj_step(inclined.model, inclined.data)
    chex.assert_trees_all_close(rotation.T @ inclined.data.qpos[0:3], tilted.qpos[0:3],
                                atol=1e-7)
    chex.assert_trees_all_close(inclined.data.qpos[7:], tilted.qpos[7:], atol=1e-7)
    chex.assert_trees_all_close(rotation.T @ inclined.data.qvel[0:3], tilted.qvel[0:3],
                                atol=1e-6)
    self.assertGreater(np.linalg.norm(tilted.qpos[0:3] - self.start.data.qpos[slope][0:3]),
                       1e-4)  # it moved

  def test_fall_and_body_contact_are_judged_from_the_inclined_floor(self):
    # Catches heights measured along world z (on a 15 degree slope the trunk's world height is
    # not its height above the floor) and body contacts that read the wrong geom pairs.
    slope = next(j for j in range(10) if self.family(j).stratum == "slope")
    flat = next(j for j in range(10) if self.family(j).stratum == "flat")
    fresh, _ = self.world.worlds()
    worlds = [fresh[slope], fresh[flat]]
    world = self.world
    for w in worlds:
      mujoco.mj_forward(w.model, w.data)
    ok = np.ones(2, bool)
    steps, commands_ = np.zeros(2, np.int32), np.zeros((2, 3), np.float32)
    none, trunk = np.zeros((2, 5), bool), np.zeros((2, 5), bool)
    trunk[:, 0] = True
    standing, _ = world.judge(worlds, ok, none, steps, commands_)
    np.testing.assert_array_equal(standing, [R.NONE, R.NONE])
    self.assertEqual([world.body_touches(w).any() for w in worlds], [False, False])
    # Walk the slope's robot 3 m downhill along its floor: still standing on it, though its
    # world height is now below zero.
    inclined = worlds[0]
    downhill = -inclined.rotation[2, :2] / np.linalg.norm(inclined.rotation[2, :2])
    floor_frame = inclined.rotation.T @ inclined.data.qpos[0:3]
    floor_frame[:2] += 3.0 * downhill
    inclined.data.qpos[0:3] = inclined.rotation @ floor_frame
    mujoco.mj_forward(inclined.model, inclined.data)
    self.assertLess(inclined.data.qpos[2], 0.0)
    downhill_reason, _ = world.judge(worlds, ok, none, steps, commands_)
    np.testing.assert_array_equal(downhill_reason, [R.NONE, R.NONE])
    # Lower the trunk to 5 cm above each floor, keeping its pose relative to the floor.
    for w in worlds:
      floor_frame = w.rotation.T @ w.data.qpos[0:3]
      w.data.qpos[0:3] = w.rotation @ np.array([floor_frame[0], floor_frame[1], 0.05])
      mujoco.mj_forward(w.model, w.data)
    self.assertEqual([world.body_touches(w)[0] for w in worlds], [True, True])  # the trunk
    low, _ = world.judge(worlds, ok, trunk, steps, commands_)
    np.testing.assert_array_equal(low, [R.FALL, R.FALL])

  def test_the_payload_moves_the_trunks_centre_of_mass(self):
    # The payload is a point mass at the family's `payload_com` (trunk frame), so the trunk's
    # centre of mass is the mass-weighted mean of the nominal one and the payload's. Catches a
    # C model that keeps the nominal centre of mass (the payload felt in weight, not balance).
    nominal = self.robot.mj_model
    trunk = self.robot.trunk_body_id
    others = np.arange(nominal.nbody) != trunk
    mass, com = nominal.body_mass[trunk], nominal.body_ipos[trunk]
    moved = []
    for j, world in enumerate(self.worlds):
      family = self.family(j)
      expected = (mass * com + family.payload_mass * np.asarray(family.payload_com)) / (
          mass + family.payload_mass)
      chex.assert_trees_all_close(world.model.body_ipos[trunk], expected, atol=1e-6)
      # (the draw passes through float32: other bodies keep theirs to its rounding)
      chex.assert_trees_all_close(world.model.body_ipos[others], nominal.body_ipos[others],
                                  atol=1e-7)
      moved.append(float(np.abs(expected - com).max()))
    self.assertGreater(max(moved), 1e-3)  # the payload stratum's 4-6 kg moves it millimetres

  def test_the_actuators_get_the_delayed_targets_and_the_trunk_its_pushes(self):
    # Replays the panel with scripted actions, env j given an actuator delay of j % 2 control
    # steps (the panel's own families have none), and records what C MuJoCo holds at every
    # physics step: the position targets must be the standing pose plus action_scale times the
    # action of `delay` steps before (the reset's history before the first), and the force on
    # the trunk the family's pushes, each on for whole control steps from round(time / dt).
    # Catches pushes never applied, a delay skipped, and an action history not carried over.
    world = copy.copy(self.world)
    start_history = np.asarray(self.start.task.action_history)  # [N, D+1, A]
    num_envs, depth, num_actions = start_history.shape
    self.assertEqual(depth, 2)
    delays = np.arange(num_envs) % depth
    world.family_params = world.family_params.replace(action_delay=jnp.asarray(delays, jnp.int32))
    env, trunk = world.env, self.robot.trunk_body_id
    actions = np.random.default_rng(3).uniform(
        -0.3, 0.3, (env.episode_steps, num_envs, num_actions)).astype(np.float32)
    calls = iter(actions)
    held = {}  # id(MjData) -> (the data, [(ctrl, trunk force) at each physics step])
    real_step = mujoco.mj_step

    def recording_step(model, data):
      held.setdefault(id(data), (data, []))[1].append(
          (data.ctrl.copy(), data.xfrc_applied[trunk, 0:3].copy()))
      real_step(model, data)

    with mock.patch.object(mujoco, "mj_step", recording_step):
      stats, _ = world.replay(lambda obs: next(calls))
    # Every env is stepped at the first control step, in order: the first `num_envs` MjData
    # seen are envs 0, 1, ...
    received = [steps for _, steps in held.values()]
    self.assertLen(received, num_envs)
    default_pose = np.asarray(self.robot.default_pose, np.float32)
    scale = np.float32(self.robot.spec.action_scale)
    dt, pushed = env.dt, 0
    for j in range(num_envs):
      family = self.family(j)
      self.assertLen(received[j], env.substeps * int(stats.length[j]))
      history = list(start_history[j])  # newest first
      for t in range(int(stats.length[j])):
        history = [actions[t, j]] + history[:-1]
        targets = default_pose + scale * history[delays[j]]
        force = np.zeros(3)
        for at, direction, magnitude in zip(family.push_times, family.push_directions,
                                            family.push_magnitudes):
          first = round(at / dt)
          if first <= t < first + round(family.push_seconds / dt):
            force += magnitude * np.array([math.cos(direction), math.sin(direction), 0.0])
        if force.any():
          self.assertEqual(family.slope_degrees, 0.0)  # the world is MJX's: no turn
          pushed += 1
        for ctrl, trunk_force in received[j][t * env.substeps:(t + 1) * env.substeps]:
          chex.assert_trees_all_close(ctrl, targets, atol=1e-6)
          chex.assert_trees_all_close(trunk_force, force, atol=1e-4)
    self.assertGreater(pushed, 0)  # a push happened within the steps replayed


class HeightfieldWorldsTest(absltest.TestCase):
  """The C MuJoCo worlds of a heightfield run's panel: one env per family of the flat, slope,
  stairs, rough and obstacles strata. The references are the family's own tile and the MJX env's
  own wrap, trunk height and body-contact functions on the same pose."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = _panel_config(
        terrain__ground="heightfield", families__spawn_offset=0.2, panel__envs_per_family=1,
        panel__strata=("flat", "slope", "stairs", "rough", "obstacles"))
    cls.manifest = families.make_manifest(cls.config)
    cls.world = sim2sim.CMuJoCoPanel(cls.config, cls.manifest)
    cls.worlds, cls.start = cls.world.worlds()
    cls.grid = terrain.Grid.from_config(cls.config.terrain)
    env = cls.world.env
    cls.start_heights = np.asarray(jax.vmap(env.heights)(cls.start))

    def mjx_judgement(data, heights, qpos):
      data = mjx.kinematics(env.model, data.replace(qpos=qpos))
      return (ground_lib.trunk_height(env.ground, heights, data.qpos[0:3], data.qpos[3:7]),
              ground_lib.body_touches(env.ground, heights, data))

    cls.mjx_judgement = staticmethod(jax.jit(mjx_judgement))

  def index(self, stratum: str) -> int:
    return next(j for j, f in enumerate(self.manifest.eval_families) if f.stratum == stratum)

  def row(self, j: int) -> env_state.EnvState:
    return jax.tree.map(lambda x: x[j], self.start)

  def test_each_world_holds_its_familys_ground(self):
    # Catches a C model left flat, given another family's ground, or a slope stratum whose
    # inclined floor lost the heightfield.
    floor = self.world.env.robot.floor_geom_id
    for j, (family, world) in enumerate(zip(self.manifest.eval_families, self.worlds)):
      kind = config_lib.TERRAIN_TYPES.index(family.terrain_type)
      draw = terrain.TerrainDraw(
          type=jnp.int32(kind), seed=jnp.uint32(family.terrain_seed),
          magnitude=jnp.asarray(family.terrain_magnitude, jnp.float32),
          shape=terrain.shapes(self.config.terrain, np.array([kind]),
                               np.array([family.terrain_seed]))[0])
      expected = np.asarray(terrain.heights(self.config.terrain, draw, jnp.int32(5)))
      self.assertEqual(world.model.geom_type[floor], mujoco.mjtGeom.mjGEOM_HFIELD, family.stratum)
      self.assertEqual((world.model.hfield_nrow[0], world.model.hfield_ncol[0]),
                       (self.grid.nodes, self.grid.nodes))
      np.testing.assert_allclose(world.model.hfield_data.reshape(expected.shape), expected,
                                 atol=1e-6, err_msg=family.stratum)
      np.testing.assert_allclose(world.heights, self.start_heights[j], atol=1e-6)
      if family.stratum != "flat":
        self.assertGreater(np.ptp(expected) if family.stratum != "slope" else 1.0, 0.02)
    slope = self.worlds[self.index("slope")]
    turned = np.zeros(9)
    mujoco.mju_quat2Mat(turned, slope.model.geom_quat[floor])
    np.testing.assert_allclose(turned.reshape(3, 3), slope.rotation, atol=1e-9)
    self.assertIn("heightfield", self.world.simulator["ground"])

  def test_the_collision_option_reaches_every_world_and_turns_a_sunk_foots_normals(self):
    # A foot sunk 15 mm into the flat family's ground, its centre 5 mm past a cell's edge: the
    # prisms of the cells around it push it out along normals tilted from the vertical, MuJoCo's
    # own penetration recovery (native) further than libccd's MPR (at the pinned MuJoCo 3.17,
    # lowest normal z 0.37 against 0.57). Catches `--ccd` not set on the worlds (or not on the
    # slope's inclined floor, compiled apart), or set in place of the robot file's flags.
    mpr_panel = sim2sim.CMuJoCoPanel(self.config, self.manifest, ccd="mpr")
    mpr_worlds, _ = mpr_panel.worlds()
    robot_flags = self.world.env.robot.mj_model.opt.disableflags
    self.assertEqual((self.world.simulator["ccd"], mpr_panel.simulator["ccd"]), ("native", "mpr"))
    for native, mpr in zip(self.worlds, mpr_worlds):
      self.assertEqual(native.model.opt.disableflags, robot_flags)
      self.assertEqual(mpr.model.opt.disableflags,
                       robot_flags | mujoco.mjtDisableBit.mjDSBL_NATIVECCD)
    foot = self.world.env.robot.foot_geom_ids[0]
    radius = self.world.env.robot.mj_model.geom_size[foot, 0]
    lowest = []
    for world in (self.worlds[self.index("flat")], mpr_worlds[self.index("flat")]):
      data = mujoco.MjData(world.model)
      data.qpos[:] = world.data.qpos
      mujoco.mj_kinematics(world.model, data)
      at = data.geom_xpos[foot].copy()
      cell = np.floor((at[0:2] + self.grid.half_size) / self.grid.resolution)
      edge_x, mid_y = (cell + [1.0, 0.3]) * self.grid.resolution - self.grid.half_size
      data.qpos[0:3] += np.array([edge_x + 0.005, mid_y, radius - 0.015]) - at
      mujoco.mj_kinematics(world.model, data)
      mujoco.mj_collision(world.model, data)
      normals = [c.frame[2] for c in data.contact[:data.ncon] if foot in (c.geom1, c.geom2)]
      self.assertNotEmpty(normals)
      lowest.append(min(normals))
    self.assertLess(lowest[0], 0.5)
    self.assertGreater(lowest[1], lowest[0] + 0.1)

  def test_a_stiffer_contact_reaches_both_simulators_and_every_world(self):
    # `env.contact_timeconst` is written to every geom of MJX's model and of each C MuJoCo world
    # (the slope's inclined floor, compiled apart, too), and the record says so. A foot dropped
    # 3 cm onto the flat family's ground in C MuJoCo sinks at most 0.8 times as deep as with the
    # robot file's 0.02 s (6.5 against 10.5 mm from 10 cm on the plane). Catches the value not
    # applied in the env, not copied to the worlds, or written as the damping ratio.
    config = dataclasses.replace(
        self.config, env=dataclasses.replace(self.config.env, contact_timeconst=0.01))
    stiff_panel = sim2sim.CMuJoCoPanel(config, self.manifest)
    stiff_worlds, _ = stiff_panel.worlds()
    ngeom = self.world.env.robot.mj_model.ngeom
    chex.assert_trees_all_close(np.asarray(stiff_panel.env.model.geom_solref),
                                np.tile([0.01, 1.0], (ngeom, 1)), rtol=1e-6)
    for default, stiff in zip(self.worlds, stiff_worlds):
      chex.assert_trees_all_close(default.model.geom_solref, np.tile([0.02, 1.0], (ngeom, 1)))
      chex.assert_trees_all_close(stiff.model.geom_solref, np.tile([0.01, 1.0], (ngeom, 1)))
    self.assertEqual((self.world.simulator["contact_timeconst"],
                      stiff_panel.simulator["contact_timeconst"]), ([0.02], [0.01]))
    deepest = []
    for world in (self.worlds[self.index("flat")], stiff_worlds[self.index("flat")]):
      data = mujoco.MjData(world.model)
      data.qpos[:] = world.data.qpos
      data.qpos[2] += 0.03
      data.ctrl[:] = self.world.env.robot.default_pose
      sunk = 0.0
      for _ in range(100):
        mujoco.mj_step(world.model, data)
        sunk = max([sunk] + [-c.dist for c in data.contact[:data.ncon]])
      deepest.append(sunk)
    self.assertGreater(deepest[0], 0.002)
    self.assertLess(deepest[1], 0.8 * deepest[0])

  def test_the_wrap_is_the_envs(self):
    # Catches a trunk left off the tile, moved by the wrong amount, or moved along world axes
    # instead of the inclined floor's.
    env = self.world.env
    half = self.grid.tile_size / 2
    for stratum in ("stairs", "slope"):
      j = self.index(stratum)
      world = self.world.worlds()[0][j]
      away = np.asarray(self.start.data.qpos[j], np.float64).copy()
      away[0:2] = (half + 0.3, -(3 * half + 0.1))  # off the tile: one tile in x, two in y
      world.data.qpos[0:3] = world.rotation @ away[0:3]
      self.world.wrap([world])
      state = self.row(j)
      state = state.replace(data=state.data.replace(qpos=jnp.asarray(away, jnp.float32)))
      wrapped = np.asarray(env._wrap(state).data.qpos)
      np.testing.assert_allclose(world.rotation.T @ world.data.qpos[0:3], wrapped[0:3],
                                 atol=1e-5, err_msg=stratum)
      np.testing.assert_allclose(wrapped[0:2] - away[0:2], (-4.0, 8.0), atol=1e-5)
      inside = world.data.qpos.copy()
      self.world.wrap([world])  # on the tile: left where it is
      np.testing.assert_array_equal(world.data.qpos, inside)

  def test_heights_and_body_contact_are_measured_on_the_surface_as_the_env_does(self):
    # Catches heights read along world z or above z = 0, and body contact read from contacts
    # (the trunk and thighs do not collide with a heightfield): at poses standing, sunk into a
    # higher part of the ground, hovering 5 cm above it, and turned and tilted (the trunk's
    # height is read under its hips), C MuJoCo's figures are the MJX env's own.
    judged = []
    for stratum in ("stairs", "rough", "obstacles", "slope"):
      j = self.index(stratum)
      worlds, _ = self.world.worlds()
      world = worlds[j]
      heights = world.heights
      tile = heights[self.grid.margin_cells:-self.grid.margin_cells - 1,
                     self.grid.margin_cells:-self.grid.margin_cells - 1]
      row, col = np.unravel_index(np.argmax(tile), tile.shape)
      highest = (np.array([col, row]) + self.grid.margin_cells) * self.grid.resolution \
          - self.grid.half_size
      start = np.asarray(self.start.data.qpos[j], np.float64)
      standing = start.copy()
      sunk = start.copy()
      sunk[0:2] = highest + 0.05
      hover = sunk.copy()
      surface = float(terrain.surface(jnp.asarray(heights), self.grid,
                                      jnp.asarray(hover[0:2], jnp.float32))[0])
      hover[2] = surface + 0.05
      turned = standing.copy()  # turned and tilted: the hips stand elsewhere on the ground
      mujoco.mju_mulQuat(turned[3:7], standing[3:7], np.array([0.8, 0.1, 0.2, 0.55]))
      turned[3:7] /= np.linalg.norm(turned[3:7])
      for name, qpos in (("standing", standing), ("sunk", sunk), ("hovering", hover),
                         ("turned", turned)):
        world.data.qpos[:] = qpos
        world.data.qpos[0:3] = world.rotation @ qpos[0:3]
        mujoco.mju_mulQuat(world.data.qpos[3:7], sim2sim._quat(world.rotation), qpos[3:7])
        mujoco.mj_forward(world.model, world.data)
        c_height = float(self.world.trunk_heights([world])[0])
        c_contact = self.world.body_touches(world)
        m_height, m_contact = self.mjx_judgement(self.row(j).data, jnp.asarray(heights),
                                                 jnp.asarray(qpos, jnp.float32))
        what = f"{stratum}, {name}"
        self.assertAlmostEqual(c_height, float(m_height), delta=1e-4, msg=what)
        np.testing.assert_array_equal(c_contact, m_contact, what)
        reason, _ = self.world.judge([world], np.ones(1, bool), c_contact[None],
                                     np.zeros(1, np.int32), np.zeros((1, 3), np.float32))
        judged.append((what, int(reason[0]), bool(c_contact.any())))
    by_name = {what: (reason, contact) for what, reason, contact in judged}
    for stratum in ("stairs", "rough", "obstacles", "slope"):
      self.assertEqual(by_name[f"{stratum}, standing"], (R.NONE, False), stratum)
      self.assertEqual(by_name[f"{stratum}, hovering"], (R.FALL, True), stratum)
    # The stairs family's highest ground is above its start platform (up) or level with its
    # top (down): sunk into it, or standing there.
    self.assertIn(by_name["stairs, sunk"], ((R.FALL, True), (R.NONE, False)))

  def test_the_trunks_height_on_an_inclined_floor_reads_the_hips_in_the_floors_frame(self):
    # The slope's world is the one inclined floor, and its ground is level; given the stairs'
    # ground instead (the heights the trunk's height reads), a turned and tilted trunk on the
    # stairs' edges reads in C MuJoCo what MJX reads at the same pose in its own frame. Catches
    # the trunk's orientation passed in the world's frame, which turns the hips by the slope's
    # 15 degrees as well (at least one pose below reads 1 mm otherwise).
    j = self.index("slope")
    worlds, _ = self.world.worlds()
    stairs = worlds[self.index("stairs")].heights
    world = dataclasses.replace(worlds[j], heights=stairs)
    start = np.asarray(self.start.data.qpos[j], np.float64)
    tilt = np.array([0.8, 0.1, 0.2, 0.55]) / np.linalg.norm([0.8, 0.1, 0.2, 0.55])
    unturned = []
    for x, y in ((0.75, 0.1), (0.85, -0.2), (-0.7, 0.35), (0.2, 0.8), (0.95, 0.95)):
      qpos = start.copy()
      qpos[0:2] = x, y
      mujoco.mju_mulQuat(qpos[3:7], start[3:7], tilt)
      world.data.qpos[:] = qpos
      world.data.qpos[0:3] = world.rotation @ qpos[0:3]
      mujoco.mju_mulQuat(world.data.qpos[3:7], sim2sim._quat(world.rotation), qpos[3:7])
      c_height = float(self.world.trunk_heights([world])[0])
      m_height, _ = self.mjx_judgement(self.row(j).data, jnp.asarray(stairs),
                                       jnp.asarray(qpos, jnp.float32))
      self.assertAlmostEqual(c_height, float(m_height), delta=1e-5, msg=(x, y))
      unturned.append(float(ground_lib.trunk_height(
          self.world.env.ground, jnp.asarray(stairs), jnp.asarray(qpos[0:3], jnp.float32),
          jnp.asarray(world.data.qpos[3:7], jnp.float32))) - float(m_height))
    self.assertGreater(np.max(np.abs(unturned)), 1e-3)

  def test_a_standing_policy_lasts_its_episode_on_level_terrain(self):
    # Catches a replay loop that judges a heightfield as the plane (the stairs family stands in
    # a pit or on a pyramid, 0.4 m from z = 0) or reads body contact from contacts: the robot
    # holding its standing pose on the start platform stays up to the time limit, in MJX as
    # here, the 15 degree slope included: there the knee spheres, which collide with a
    # heightfield, hold the thighs off the floor (on the plane the thigh capsules reach it).
    zeros = lambda obs: np.zeros((len(obs), self.world.env.action_size), np.float32)
    stats, _ = self.world.replay(zeros)
    summary = self.world.summarize(stats)
    for stratum, figures in summary["strata"].items():
      ended = {reason: n for reason, n in figures["reset"].items() if n}
      self.assertEqual(ended, {"timeout": 1}, stratum)
      self.assertEqual(figures["body_contact_rate"], 0.0, stratum)


class HeightScanWorldsTest(parameterized.TestCase):
  """C MuJoCo's ray-cast height scan (`CMuJoCoPanel.scan`, `mj_ray`) against the env's
  (`height_scan.measure` through `LocomotionEnv.readings`) on every stratum's ground: at rest
  (the panel's first observation) and at poses an episode reaches (moved, turned, tilted), on a
  heightfield and on the plane, whose slope stratum is an inclined floor in C MuJoCo and tilted
  gravity in MJX."""

  @parameterized.named_parameters(
      ("heightfield", dict(terrain__ground="heightfield", terrain__margin=1.0,
                           families__spawn_offset=0.2,
                           panel__strata=("flat", "slope", "stairs", "rough", "obstacles"))),
      ("plane", dict(panel__strata=("flat", "slope"))),
  )
  def test_the_two_scans_agree_within_a_millimetre(self, changes):
    config = _panel_config(panel__envs_per_family=1, scan__enabled=True, **changes)
    manifest = families.make_manifest(config)
    world = sim2sim.CMuJoCoPanel(config, manifest)
    worlds, start = world.worlds()
    env, num = world.env, len(worlds)
    layout = env.policy_layout
    at = slice(layout.offsets()["height_scan"], layout.size)
    # At rest: the observation's scan block, from the same reset, in both simulators.
    obs, _ = world.observe(worlds, np.zeros(num, np.int32), np.asarray(start.task.last_action),
                           np.asarray(start.task.gait_phase))
    np.testing.assert_allclose(np.asarray(obs)[:, at], np.asarray(start.obs["policy"])[:, at],
                               atol=1e-3)
    strata = [manifest.eval_families[j % len(manifest.eval_families)].stratum
              for j in range(num)]
    slope = strata.index("slope")
    rest = np.asarray(obs)[slope, at]
    self.assertGreater(np.ptp(rest), 0.2)  # the slope is seen along gravity
    # The replay casts rays for the worlds whose episodes go on: their observations are the same,
    # and only an ended world's scan block reads otherwise.
    alive = np.arange(num) != slope
    partial, _ = world.observe(worlds, np.zeros(num, np.int32),
                               np.asarray(start.task.last_action),
                               np.asarray(start.task.gait_phase), alive)
    np.testing.assert_array_equal(np.asarray(partial)[alive], np.asarray(obs)[alive])
    np.testing.assert_array_equal(np.asarray(partial)[slope, :at.start], np.asarray(obs)[
        slope, :at.start])
    self.assertGreater(np.abs(np.asarray(partial)[slope, at] - rest).max(), 0.1)
    # Mid-episode poses: the trunk moved on the tile, turned, rolled and pitched, in MJX's frame
    # (the floor's), carried into each C world by its rotation.
    rng = np.random.default_rng(0)
    data = mjx.make_data(env.model)
    mjx_scan = jax.jit(lambda qpos, family, field: env.readings(
        data.replace(qpos=qpos), family, field).height_scan)
    for j, c_world in enumerate(worlds):
      family = jax.tree.map(lambda x: x[j], world.family_params)
      for _ in range(3):
        qpos = np.asarray(start.data.qpos[j], np.float64).copy()
        half = np.asarray(rng.uniform(-0.3, 0.3, 3))
        yaw = rng.uniform(-np.pi, np.pi)
        turn = np.zeros(4)
        mujoco.mju_euler2Quat(turn, [half[0], half[1], yaw], "xyz")
        qpos[0:2] = rng.uniform(-1.5, 1.5, 2)
        qpos[2] = 0.25 + rng.uniform(0.0, 0.2) + (
            0.0 if c_world.heights is None else float(terrain.surface(
                jnp.asarray(c_world.heights), world.grid, jnp.asarray(qpos[0:2]))[0]))
        qpos[3:7] = turn
        c_world.data.qpos[0:3] = c_world.rotation @ qpos[0:3]
        mujoco.mju_mulQuat(c_world.data.qpos[3:7], sim2sim._quat(c_world.rotation), qpos[3:7])
        mujoco.mj_kinematics(c_world.model, c_world.data)
        expected = np.asarray(mjx_scan(jnp.asarray(qpos, jnp.float32), family,
                                       None if c_world.heights is None
                                       else jnp.asarray(c_world.heights)))
        np.testing.assert_allclose(world.scan(c_world), expected, atol=1e-3,
                                   err_msg=f"{strata[j]}, pose {qpos[:7].round(3)}")


  def test_a_robot_geom_in_the_floors_group_is_refused(self):
    robot = robots.load("go2")
    np.testing.assert_array_equal(sim2sim._floor_groups(robot), [1, 0, 0, 0, 0, 0])
    model = copy.copy(robot.mj_model)
    trunk = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "trunk_collision")
    model.geom_group[trunk] = 0
    with self.assertRaisesRegex(robots.RobotError, r"the height scan's rays see only the "
                                r"floor's geom group 0, but the geoms \['trunk_collision'\] are "
                                r"in it too: give them another group"):
      sim2sim._floor_groups(types.SimpleNamespace(mj_model=model,
                                                  floor_geom_id=robot.floor_geom_id))


class GapsTest(absltest.TestCase):

  def test_gap_is_c_minus_mjx_and_targets_bound_fall_and_speed_error(self):
    figures = dict(success_rate=0.5, fall_rate=0.10, episode_length=400.0, lin_vel_error=0.20,
                   yaw_rate_error=0.1)
    mjx = {"flat": figures, "slope": figures}
    c = {"flat": {**figures, "fall_rate": 0.149, "lin_vel_error": 0.249},
         "slope": {**figures, "fall_rate": 0.16, "success_rate": 0.25}}
    result = gaps_lib.gaps(mjx, c)
    self.assertAlmostEqual(result["flat"]["fall_rate"], 0.049)
    self.assertAlmostEqual(result["flat"]["lin_vel_error"], 0.049)
    self.assertTrue(result["flat"]["within_targets"])
    self.assertAlmostEqual(result["slope"]["fall_rate"], 0.06)
    self.assertAlmostEqual(result["slope"]["success_rate"], -0.25)
    self.assertFalse(result["slope"]["within_targets"])


  def test_the_intervals_say_within_beyond_or_undecided(self):
    # Catches a verdict that reads one end of an interval, or one target only.
    figures = dict(success_rate=0.5, fall_rate=0.1, episode_length=400.0, lin_vel_error=0.2,
                   yaw_rate_error=0.1)
    strata = {name: figures for name in ("a", "b", "c", "d", "e")}
    intervals = {"a": {"fall_rate": [-0.05, 0.05], "lin_vel_error": [-0.01, 0.05]},
                 "b": {"fall_rate": [-0.05, 0.06], "lin_vel_error": [0.0, 0.0]},
                 "c": {"fall_rate": [0.051, 0.3], "lin_vel_error": [0.0, 0.0]},
                 "d": {"fall_rate": [0.0, 0.0], "lin_vel_error": [-0.2, -0.051]},
                 "e": {"fall_rate": [-0.3, 0.3], "lin_vel_error": [-0.06, -0.01]},
                 "f": {"fall_rate": [0.0, 0.0], "lin_vel_error": [None, None]},
                 "g": {"fall_rate": [0.1, 0.2], "lin_vel_error": [None, None]}}
    strata.update(f=figures, g=figures)
    result = gaps_lib.gaps(strata, strata, intervals)
    self.assertEqual({name: gap["interval_targets"] for name, gap in result.items()},
                     {"a": "within", "b": "undecided", "c": "beyond", "d": "beyond",
                      "e": "undecided", "f": "undecided", "g": "beyond"})
    self.assertEqual(result["c"]["interval"], intervals["c"])
    self.assertTrue(all(gap["within_targets"] for gap in result.values()))
    self.assertNotIn("interval", gaps_lib.gaps(strata, strata)["a"])


class GapIntervalsTest(absltest.TestCase):
  """The gaps' intervals from hand-built episodes: two evaluation families, `flat` (envs 0, 2,
  4, 6) and `stairs` (envs 1, 3, 5, 7)."""

  manifest = types.SimpleNamespace(eval_strata=("flat", "stairs"),
                                   eval_families=[None, None])
  config = configs.replay()

  def stats(self, fell, lin_vel_error):
    timeout, fall = endings.ResetReason.TIMEOUT, endings.ResetReason.FALL
    length = np.full(8, 10, np.int32)
    return panel.EpisodeStats(
        alive=np.zeros(8, bool), length=length,
        reason=np.where(np.asarray(fell), int(fall), int(timeout)).astype(np.int32),
        episode_return=np.zeros(8, np.float32),
        lin_vel_error_sum=(np.asarray(lin_vel_error) * length).astype(np.float32),
        yaw_rate_error_sum=np.zeros(8, np.float32), body_contact_steps=np.zeros(8, np.int32))

  def test_the_gap_is_paired_env_by_env(self):
    # On flat the same two envs fall in both simulators: every resample of the envs gives a gap
    # of 0, where resampling each simulator on its own would not. On stairs one env of four
    # falls in C MuJoCo alone, so the resampled gap is 1/4 of Binomial(4, 1/4): 0 with
    # probability 0.316 and 0.75 or more with 0.051, 1 with 0.004; its 2.5% and 97.5%
    # quantiles are 0 and 0.75. The speed errors differ by 0.1 on every stairs env.
    mjx = self.stats(fell=[1, 0, 1, 0, 0, 0, 0, 0], lin_vel_error=[0.2] * 8)
    c = self.stats(fell=[1, 1, 1, 0, 0, 0, 0, 0], lin_vel_error=[0.2, 0.3] * 4)
    intervals = gaps_lib.gap_intervals(mjx, c, self.manifest, self.config)
    chex.assert_trees_all_close(
        intervals, {"flat": {"fall_rate": [0.0, 0.0], "lin_vel_error": [0.0, 0.0]},
                    "stairs": {"fall_rate": [0.0, 0.75], "lin_vel_error": [0.1, 0.1]}},
        atol=1e-6)

  def test_a_figure_that_is_not_finite_leaves_its_interval_undefined(self):
    # An episode whose state went non-finite in C MuJoCo (stairs env 3): its stratum's speed
    # interval is [None, None], and nothing else changes. Catches the check failing after its
    # whole replay, or a NaN interval that compares as inside every target.
    mjx = self.stats(fell=[0] * 8, lin_vel_error=[0.2] * 8)
    c = self.stats(fell=[0] * 8, lin_vel_error=[0.2, 0.2, 0.2, np.nan] + [0.2] * 4)
    intervals = gaps_lib.gap_intervals(mjx, c, self.manifest, self.config)
    self.assertEqual(intervals["stairs"]["lin_vel_error"], [None, None])
    chex.assert_trees_all_close(
        (intervals["stairs"]["fall_rate"], intervals["flat"]), (
            [0.0, 0.0], {"fall_rate": [0.0, 0.0], "lin_vel_error": [0.0, 0.0]}), atol=1e-6)
    self.assertEqual(gaps_lib.interval_verdict(intervals["stairs"]), "undecided")


class FormatTest(absltest.TestCase):

  def test_the_table_sets_mjx_c_mujoco_and_the_gap_side_by_side(self):
    m = dict(num_envs=4, success_rate=1.0, fall_rate=0.0, episode_length=500.0,
             lin_vel_error=0.1, yaw_rate_error=0.05, reset={"timeout": 4})
    c = dict(m, success_rate=0.75, fall_rate=0.25, episode_length=410.5, lin_vel_error=0.2,
             reset={"timeout": 3, "fall": 1})
    record = {
        "update": 12, "env_steps": 1200, "policy": "onnx", "wall_seconds": 3.2,
        "simulator": {"engine": "C MuJoCo 3.17.0", "precision": "float64", "solver": "NEWTON",
                      "settings": "converged", "iterations": 100, "tolerance": 1e-10,
                      "integrator": "EULER", "physics_timestep": 0.005,
                      "slope": "inclined floor, vertical gravity"},
        "targets": gaps_lib.TARGETS, "mjx": {"friction": m}, "strata": {"friction": c},
        "gap": gaps_lib.gaps({"friction": m}, {"friction": c})}
    lines = ledger.format_sim2sim(record).splitlines()
    self.assertEqual(lines[3], "friction      100.0%   75.0%  -25.0%      0.0%   25.0%  +25.0%"
                               "     500.0   410.5   -89.5     0.100   0.200  +0.100     0.050"
                               "   0.050  +0.000  MISSED   timeout=3 fall=1")
    # A record from before the collision option was recorded ran MuJoCo's default.
    self.assertIn("onnx policy in C MuJoCo 3.17.0, float64, NEWTON solver (converged: up to "
                  "100 iterations, tolerance 1e-10), native collisions, EULER at 0.005 s, "
                  "contact time constant 0.02 s, inclined floor", lines[0])
    self.assertLen(lines, 4)  # a record without intervals (written before them) has no more
    record["simulator"]["ccd"] = "mpr"
    record["simulator"]["contact_timeconst"] = [0.01]
    self.assertIn("tolerance 1e-10), mpr collisions, EULER at 0.005 s, contact time constant "
                  "0.01 s, inclined", ledger.format_sim2sim(record).splitlines()[0])

    record["envs_per_family"] = 4
    record["gap"] = gaps_lib.gaps({"friction": m}, {"friction": c}, {
        "friction": {"fall_rate": [0.0, 0.75], "lin_vel_error": [0.06, 0.125]}})
    lines = ledger.format_sim2sim(record).splitlines()
    self.assertEqual(lines[4:], [
        "95% intervals of d over each stratum's episodes (env by env, paired bootstrap; 4 envs "
        "per family)",
        "stratum                   fall d             lin err d  episodes  targets",
        "friction         [+0.0%, +75.0%]      [+0.060, +0.125]         4  beyond"])


class Sim2SimCommandTest(absltest.TestCase):
  """`python -m mjx_walk.sim2sim` on one tiny trained run (one chunk of two updates, its panel
  of half-second episodes), with MJX's solver settings in C MuJoCo, so that the two simulators
  should agree closely; once with the JAX policy in the loop, once with its ONNX export. Both
  play 4 envs per family, twice the run's panel, so that the enlarged panel is what both
  simulators play: one MJX panel program more than the suite's others, for 4 episodes a
  stratum."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    runs.warm()  # the tiny config's programs, compiled once for every worker
    cls.run_dir = runs.one_chunk(_panel_config(chunks=1), "sim2sim_command_")
    cls.ran = commands.run_main(sim2sim_cli.main, f"--run_dir={cls.run_dir}", "--policy=jax",
                                "--solver=mjx", "--envs_per_family=4")
    cls.path = run_folder.RunFolder(cls.run_dir).sim2sim_dir / "2.json"
    # The ONNX export in the loop (the default), exported by the command since step 2 has none;
    # three of the five strata replayed.
    cls.ran_onnx = commands.run_main(sim2sim_cli.main, f"--run_dir={cls.run_dir}",
                                     "--solver=mjx", "--envs_per_family=4",
                                     "--strata=friction,flat,slope")
    cls.onnx_path = cls.path.parent / "2.2.json"

  def test_writes_the_record_and_prints_the_table(self):
    self.assertEqual(self.ran.status, 0, self.ran.err)
    saved = json.loads(self.path.read_text())
    self.assertEqual((saved["kind"], saved["update"], saved["policy"]), ("sim2sim", 2, "jax"))
    self.assertEqual(saved["simulator"]["settings"], "mjx")
    self.assertEqual((saved["simulator"]["iterations"], saved["simulator"]["solver"]),
                     (1, "NEWTON"))
    self.assertEqual(ledger.of_kind(ledger.read_run(self.run_dir), "sim2sim")[0], saved)
    self.assertIn(ledger.format_sim2sim(saved), self.ran.out)
    self.assertEqual(set(saved["strata"]), {"flat", "slope", "push", "payload", "friction"})
    self.assertNotIn("return", saved["strata"]["flat"])
    # The enlarged panel in both simulators, and every gap inside its own interval.
    self.assertEqual(saved["envs_per_family"], 4)
    for stratum, gap in saved["gap"].items():
      self.assertEqual((saved["strata"][stratum]["num_envs"], saved["mjx"][stratum]["num_envs"]),
                       (4, 4), stratum)
      for key in gaps_lib.TARGETS:
        low, high = gap["interval"][key]
        self.assertTrue(low - 1e-9 <= gap[key] <= high + 1e-9, (stratum, key, gap))
      self.assertEqual(gap["interval_targets"], gaps_lib.interval_verdict(gap["interval"]))

  def test_c_mujoco_with_mjx_solver_settings_agrees_with_mjx(self):
    # Same solver, same start, same policy: float64 against float32 over 25 steps. On level
    # ground with sticking feet the two agree to float32 rounding; on the slope (where pyramid
    # edges sit differently around the inclined normal) and on low friction (sliding feet, where
    # rounding differences grow) to within 0.03 m/s and 0.05 rad/s, and one episode of the four
    # may end otherwise: one control step earlier or later by the same ending, or (on low
    # friction on an Intel Xeon with AVX-512 FP16, where XLA's float32 rounds differently) by
    # a body contact in C MuJoCo where MJX reached the time limit.
    # Catches a command schedule, push, payload, clock or delay that the replay applies
    # differently from the env.
    saved = json.loads(self.path.read_text())
    for stratum, c in saved["strata"].items():
      m = saved["mjx"][stratum]
      exact = stratum in ("flat", "push", "payload")
      if exact:
        self.assertEqual(c["reset"], m["reset"], stratum)
      else:  # the same episodes, at most one of them ending for another reason
        self.assertEqual(sum(c["reset"].values()), sum(m["reset"].values()), stratum)
        self.assertLessEqual(sum(abs(c["reset"][k] - m["reset"][k]) for k in m["reset"]), 2,
                             stratum)
      self.assertAlmostEqual(c["episode_length"], m["episode_length"],
                             delta=0.0 if exact else 1 / c["num_envs"], msg=stratum)
      self.assertAlmostEqual(c["lin_vel_error"], m["lin_vel_error"],
                             delta=1e-4 if exact else 0.03, msg=stratum)
      self.assertAlmostEqual(c["yaw_rate_error"], m["yaw_rate_error"],
                             delta=1e-4 if exact else 0.05, msg=stratum)
      self.assertGreater(m["lin_vel_error"], 0.05, stratum)  # commands are tracked, not zero
      if c["reset"] == m["reset"]:
        self.assertTrue(saved["gap"][stratum]["within_targets"], stratum)
      else:  # one ending of four moves the fall rate by 25 points: too few episodes to show a gap
        self.assertNotEqual(saved["gap"][stratum]["interval_targets"], "beyond", stratum)

  def test_the_onnx_export_in_the_loop_plays_as_the_jax_policy(self):
    # Catches an ONNX loop fed another observation layout or batch order than the JAX one.
    self.assertEqual(self.ran_onnx.status, 0, self.ran_onnx.err)
    export = run_folder.RunFolder(self.run_dir).export_dir(2)
    self.assertTrue((export / "policy.onnx").is_file())
    self.assertIn(f"exported {export / 'policy.onnx'}", self.ran_onnx.out)
    with_onnx, with_jax = (json.loads(p.read_text()) for p in (self.onnx_path, self.path))
    self.assertEqual((with_onnx["policy"], with_jax["policy"]), ("onnx", "jax"))
    # Only the named strata, in the panel's order, each with all its episodes: the replayed envs
    # are the named strata's, each from its own first state (the same endings as the full
    # replay, below), and the others are left out of every table.
    for table in ("strata", "mjx", "gap"):
      self.assertEqual(list(with_onnx[table]), ["flat", "slope", "friction"], table)
    for stratum in with_onnx["strata"]:
      self.assertEqual(with_onnx["mjx"][stratum], with_jax["mjx"][stratum], stratum)
      self.assertEqual(with_onnx["strata"][stratum]["num_envs"], 4, stratum)
    for stratum, c in with_onnx["strata"].items():
      reference = with_jax["strata"][stratum]
      self.assertEqual(c["reset"], reference["reset"], stratum)
      self.assertEqual(c["episode_length"], reference["episode_length"], stratum)
      self.assertAlmostEqual(c["lin_vel_error"], reference["lin_vel_error"], delta=0.01,
                             msg=stratum)
      self.assertAlmostEqual(c["yaw_rate_error"], reference["yaw_rate_error"], delta=0.05,
                             msg=stratum)

  def test_the_report_shows_the_latest_check(self):
    folder = run_folder.RunFolder.open(self.run_dir)
    records = ledger.read_run(self.run_dir)
    path = report.write_report(self.run_dir, records, folder.read_config(),
                               folder.read_manifest(), plots=[])
    text = path.read_text()
    latest = ledger.latest(records, "sim2sim")
    self.assertIn("## Second simulator", text)
    self.assertIn(ledger.format_sim2sim(latest), text)

  def assert_refused(self, ran: commands.Ran, message: str) -> None:
    self.assertEqual((ran.status, ran.err, ran.out), (2, f"error: {message}\n", ""))

  def test_refuses_bad_flags_and_missing_checkpoints_writing_nothing(self):
    before = commands.folder_digest(self.run_dir)
    self.assert_refused(
        commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", "--policy=tf"),
        "--policy='tf' is invalid: accepted policies are onnx, jax")
    self.assert_refused(
        commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", "--solver=fast"),
        "--solver='fast' is invalid: accepted solvers are converged, mjx")
    self.assert_refused(
        commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", "--ccd=gjk"),
        "--ccd='gjk' is invalid: accepted are native, mpr")
    self.assert_refused(commands.run_main(sim2sim_cli.main),
                        "give the run to check: --run_dir=runs/<run>")
    self.assert_refused(
        commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", "--envs_per_family=0"),
        "--envs_per_family=0 is invalid: it must be a whole number of at least 1")
    for strata in ("stairs", "flat,stairs", ""):
      self.assert_refused(
          commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", f"--strata={strata}"),
          f"--strata='{strata}' is invalid: accepted are one or more of the run's panel strata, "
          "comma-separated: flat, slope, push, payload, friction")
    self.assert_refused(
        commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", "--step=3"),
        f"no checkpoint at step 3 in {self.run_dir / 'checkpoints'}; saved steps: [2]")
    empty = pathlib.Path(tempfile.mkdtemp(prefix="sim2sim_empty_"))
    (empty / "checkpoints").mkdir()
    self.assert_refused(commands.run_main(sim2sim_cli.main, f"--run_dir={empty}"),
                        f"no checkpoint in {empty / 'checkpoints'}")
    self.assertEqual(commands.folder_digest(self.run_dir), before)

  def test_refuses_a_corrupted_checkpoint_writing_nothing(self):
    # The newest checkpoint's policy bytes flipped (as tests/test_checkpoint.py corrupts one):
    # refused by name before anything is exported, replayed or recorded, with either policy.
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="sim2sim_corrupted_")) / "run"
    shutil.copytree(self.run_dir, run_dir)
    newest = run_dir / "checkpoints" / "2"
    runs.flip_bytes(newest)
    before = commands.folder_digest(run_dir)
    for policy in ("onnx", "jax"):
      ran = commands.run_main(sim2sim_cli.main, f"--run_dir={run_dir}", f"--policy={policy}")
      self.assertEqual((ran.status, ran.out), (2, ""), policy)
      self.assertRegex(ran.err, rf"^error: checkpoint step 2 at {newest.resolve()}: "
                       r"(corrupted:\n    policy/\w+: checksum mismatch|unreadable \()")
      self.assertEqual(ran.err.count("error:"), 1)
      self.assertEqual(commands.folder_digest(run_dir), before)


class Sim2SimSeedTest(absltest.TestCase):
  """The command on a copy of the shared 2-seed run (checkpoints 2 and 4, evaluated at 4), with
  one seed's JAX policy in the loop and MJX's solver settings."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    runs.warm()  # the single-seed panel, which the MJX side runs
    cls.run_dir = pathlib.Path(tempfile.mkdtemp(prefix="sim2sim_seeds_")) / "run"
    shutil.copytree(runs.warm_seeds(), cls.run_dir)
    cls.evaluated = json.loads(run_folder.RunFolder(cls.run_dir).eval_path(4).read_text())
    cls.ran = commands.run_main(sim2sim_cli.main, f"--run_dir={cls.run_dir}", "--seed=1",
                                "--policy=jax", "--solver=mjx")

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.run_dir.parent, ignore_errors=True)
    super().tearDownClass()

  def test_the_record_names_the_seed_that_ran(self):
    # The MJX side is seed 1's evaluation alone, which is seed 1's figures of the training
    # loop's pass over both seeds. Catches another seed replayed, or a record without its seed.
    self.assertEqual((self.ran.status, self.ran.err), (0, ""))
    saved = json.loads((run_folder.RunFolder(self.run_dir).sim2sim_dir / "4.json").read_text())
    self.assertEqual((saved["kind"], saved["update"], saved["seed"], saved["policy"]),
                     ("sim2sim", 4, 1, "jax"))
    self.assertEqual(ledger.of_kind(ledger.read_run(self.run_dir), "sim2sim"), [saved])
    self.assertEqual(saved["mjx"], self.evaluated["seeds"][1])
    self.assertNotEqual(saved["mjx"], self.evaluated["seeds"][0])
    for stratum, c in saved["strata"].items():
      self.assertEqual(c["reset"], saved["mjx"][stratum]["reset"], stratum)
    self.assertIn(ledger.format_sim2sim(saved), self.ran.out)
    self.assertIn("jax policy of seed 1 in C MuJoCo", self.ran.out)

  def test_a_seed_that_names_none_of_the_run_is_refused_writing_nothing(self):
    run = self.run_dir.resolve()
    before = commands.folder_digest(self.run_dir)
    for args, message in (
        ((), f"{run} trained 2 seeds; give the seed to use: 0 to 1, or 'best'"),
        (("--seed=2", "--policy=jax"),
         f"seed='2' is invalid for {run}: accepted are 0 to 1, or 'best'")):
      ran = commands.run_main(sim2sim_cli.main, f"--run_dir={self.run_dir}", *args)
      self.assertEqual((ran.status, ran.err, ran.out), (2, f"error: {message}\n", ""), args)
    self.assertEqual(commands.folder_digest(self.run_dir), before)


if __name__ == "__main__":
  absltest.main()
