"""Tests for mjx_walk.sim.observations: the policy observation's layout and how it is built.

The reference rotates vectors with MuJoCo's own quaternion routines (`mju_rotVecQuat` with the
conjugate quaternion) and concatenates the blocks by hand in the documented order.
"""

import dataclasses

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families
from mjx_walk.sim import observations

A = 12


def _to_trunk(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
  """A world-frame vector in the frame of `quat`, by MuJoCo's routines."""
  conjugate, out = np.zeros(4), np.zeros(3)
  mujoco.mju_negQuat(conjugate, np.asarray(quat, np.float64))
  mujoco.mju_rotVecQuat(out, np.asarray(vec, np.float64), conjugate)
  return out


def _random_readings(rng: np.random.Generator) -> observations.Readings:
  quat = rng.normal(size=4)
  down = rng.normal(size=3)
  return observations.Readings(
      quat=(quat / np.linalg.norm(quat)).astype(np.float32),
      lin_vel=rng.normal(size=3).astype(np.float32),
      ang_vel=rng.normal(size=3).astype(np.float32),
      down=(down / np.linalg.norm(down)).astype(np.float32),
      joint_pos=rng.normal(size=A).astype(np.float32),
      joint_vel=rng.normal(size=A).astype(np.float32))


def _reference(readings, task, default_pose, clock: bool) -> np.ndarray:
  parts = [_to_trunk(readings.quat, readings.lin_vel), readings.ang_vel,
           _to_trunk(readings.quat, readings.down), task.command,
           readings.joint_pos - default_pose, readings.joint_vel, task.last_action]
  if clock:
    angle = 2 * np.pi * float(task.gait_phase)
    parts.append([np.sin(angle), np.cos(angle)])
  return np.concatenate([np.asarray(p, np.float64) for p in parts])


class LayoutTest(absltest.TestCase):

  def test_blocks_offsets_and_sizes(self):
    layout = observations.policy_layout(config_lib.EnvConfig(), A)
    described = layout.describe()
    self.assertEqual([b["name"] for b in described],
                     ["base_lin_vel", "base_ang_vel", "projected_gravity", "command", "joint_pos",
                      "joint_vel", "last_action", "gait_clock"])
    self.assertEqual([(b["offset"], b["size"]) for b in described],
                     [(0, 3), (3, 3), (6, 3), (9, 3), (12, 12), (24, 12), (36, 12), (48, 2)])
    self.assertEqual(layout.size, 50)
    self.assertIn("2 / 50 per control step", described[-1]["description"])
    no_clock = observations.policy_layout(dataclasses.replace(config_lib.EnvConfig(), gait_hz=0.0),
                                          A)
    self.assertEqual((no_clock.size, no_clock.blocks[-1].name), (48, "last_action"))

  def test_the_envs_observation_has_the_layouts_size(self):
    for gait_hz in (2.0, 0.0):
      config = config_lib.default()
      config.env.gait_hz = gait_hz
      env = env_lib.LocomotionEnv(config)
      self.assertEqual(env.observation_spec()["policy"].shape, (env.policy_layout.size,))


class BuildTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_noise_free_observation_matches_mujocos_rotations(self):
    # Catches a rotation by the quaternion instead of its inverse, blocks out of order, the
    # joint angles not relative to the standing pose, or a clock with the wrong period.
    rng = np.random.default_rng(0)
    env = config_lib.EnvConfig()
    layout = observations.policy_layout(env, A)
    default_pose = rng.normal(size=A).astype(np.float32)
    for _ in range(3):
      readings = _random_readings(rng)
      task = observations.TaskInputs(command=rng.normal(size=3).astype(np.float32),
                                     last_action=rng.normal(size=A).astype(np.float32),
                                     gait_phase=np.float32(rng.uniform()))
      build = self.variant(lambda r, t: observations.policy_observation(layout, env, r, t,
                                                                        default_pose))
      obs = build(readings, task)
      chex.assert_shape(obs, (50,))
      chex.assert_trees_all_close(obs, _reference(readings, task, default_pose, True),
                                  atol=2e-6)

  def test_noise_is_uniform_within_each_blocks_level_and_only_there(self):
    rng = np.random.default_rng(1)
    env = config_lib.EnvConfig()
    layout = observations.policy_layout(env, A)
    readings = _random_readings(rng)
    task = observations.TaskInputs(np.ones(3, np.float32), np.ones(A, np.float32),
                                   np.float32(0.25))
    clean = observations.policy_observation(layout, env, readings, task, np.zeros(A, np.float32))
    keys = jax.random.split(jax.random.key(0), 200)
    noisy = jax.vmap(lambda k: observations.policy_observation(
        layout, env, readings, task, np.zeros(A, np.float32), k))(keys)  # [200, 50]
    offsets = layout.offsets()
    for block in layout.blocks:
      part = np.asarray(noisy - clean)[:, offsets[block.name]:offsets[block.name] + block.size]
      level = getattr(env, block.noise) if block.noise else 0.0
      self.assertLessEqual(np.abs(part).max(), level * 1.0001 + 1e-6, block.name)
      if level:
        self.assertGreater(np.abs(part).max(), 0.9 * level, block.name)  # the full range is used


class EnvObservationTest(absltest.TestCase):

  def test_the_envs_observation_on_a_slope_matches_an_independent_reference(self):
    # The env's noise-free observation of a reset state on a tilted-gravity family, against the
    # reference built from the same physics state: gravity is the family's, not world -z.
    config = config_lib.default()
    config.env.obs_noise_scale = 0.0
    env = env_lib.LocomotionEnv(config)
    family = families.draw_eval_family(2**31 + 5, config.panel, "slope")
    params = jax.tree.map(lambda x: x[0], families.stack_params([family]))
    state = jax.jit(env.reset)(jax.random.key(3), params)
    qpos, qvel = np.asarray(state.data.qpos), np.asarray(state.data.qvel)
    gravity = np.asarray(params.gravity, np.float64)
    readings = observations.Readings(
        quat=qpos[3:7], lin_vel=qvel[0:3], ang_vel=qvel[3:6], down=gravity / np.linalg.norm(
            gravity), joint_pos=qpos[np.asarray(env.robot.qpos_joint_adr)],
        joint_vel=qvel[np.asarray(env.robot.qvel_joint_adr)])
    task = observations.TaskInputs(np.asarray(state.task.command), np.zeros(A),
                                   np.asarray(state.task.gait_phase))
    expected = _reference(readings, task, env.robot.default_pose, True)
    chex.assert_trees_all_close(state.obs["policy"], expected, atol=2e-6)
    self.assertGreater(abs(expected[6]) + abs(expected[7]), 0.2)  # the slope tilts gravity
    chex.assert_trees_all_close(jnp.asarray(state.obs["critic"][:50]), expected, atol=2e-6)


if __name__ == "__main__":
  absltest.main()
