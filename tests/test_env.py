"""Tests for mjx_walk.sim.env: shapes and dtypes (the typed audit signals included), standing,
determinism, vmap, NaN isolation, episode ends and the final state before an auto-reset, and the
family's command schedule."""

import functools

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state
from mjx_walk.sim import families

import configs

NUM_ENVS = 4


def _config(**env_changes) -> config_lib.TrainConfig:
  cfg = config_lib.default()
  for name, value in env_changes.items():
    setattr(cfg.env, name, value)
  return cfg


@functools.lru_cache(maxsize=None)
def _env(**env_changes) -> env_lib.LocomotionEnv:
  return env_lib.LocomotionEnv(_config(**env_changes))


@functools.lru_cache(maxsize=None)
def _jitted(env: env_lib.LocomotionEnv):
  """Batched reset and step, compiled once per env and shared across tests."""
  return jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))


@functools.lru_cache(maxsize=None)
def _quiet_env() -> env_lib.LocomotionEnv:
  """`configs.quiet()`: no reset perturbation, no observation noise, joint-limit terminations
  on; one compiled env for most tests here and in test_families.py and test_audit.py."""
  return env_lib.LocomotionEnv(configs.quiet())


def _keys(n: int = NUM_ENVS, seed: int = 0) -> jax.Array:
  return jax.random.split(jax.random.key(seed), n)


@functools.lru_cache(maxsize=None)
def _manifest() -> families.Manifest:
  # Every env config below shares config.families, so one manifest serves them all.
  return families.make_manifest(_config())


def _families(n: int = NUM_ENVS) -> families.FamilyParams:
  """Env i's family draw (family i % F of the default training panel); leaves [n, ...]."""
  return families.for_envs(_manifest().train_params(), n)


def _flat_families(n: int = NUM_ENVS) -> families.FamilyParams:
  """Env i's family among the evaluation panel's nominal `flat` families; leaves [n, ...].

  Their command schedules are padded to the training panel's length with entries that never
  start (time +inf), which leaves every command as it was and feeds the same compiled step as
  the training families.
  """
  manifest = _manifest()
  flat = families.for_envs(families.stack_params(
      [f for f in manifest.eval_families if f.stratum == "flat"]), n)
  pad = _families(n).command_times.shape[-1] - flat.command_times.shape[-1]
  return flat.replace(
      command_times=jnp.pad(flat.command_times, ((0, 0), (0, pad)), constant_values=jnp.inf),
      commands=jnp.concatenate([flat.commands, jnp.repeat(flat.commands[:, -1:], pad, 1)], 1))


def _reset(reset, seed: int = 0):
  return reset(_keys(seed=seed), _families())


R_NONE, R_FALL = int(endings.ResetReason.NONE), int(endings.ResetReason.FALL)


def _select(tree, i):
  return jax.tree.map(lambda x: x[i], tree)


class EnvTest(chex.TestCase):

  def test_shapes(self):
    env = _env()
    reset, step = _jitted(env)
    spec = env.observation_spec()
    num_actions, num_feet = env.action_size, env.num_feet
    self.assertEqual(num_actions, 12)
    policy_size = 3 + 3 + 3 + 3 + 3 * num_actions + 2  # ... and the gait clock's sin, cos
    critic_size = policy_size + 2 * num_feet
    self.assertEqual(spec["policy"].shape, (policy_size,))
    self.assertEqual(spec["critic"].shape, (critic_size,))
    state = step(_reset(reset), jnp.zeros((NUM_ENVS, num_actions)))
    chex.assert_shape(state.obs["policy"], (NUM_ENVS, policy_size))
    chex.assert_shape(state.obs["critic"], (NUM_ENVS, critic_size))
    chex.assert_shape(state.final_obs["critic"], (NUM_ENVS, critic_size))
    chex.assert_shape([state.reward, state.terminated, state.truncated, state.reset_reason],
                      (NUM_ENVS,))
    chex.assert_shape(state.task.command, (NUM_ENVS, 3))
    # Metrics are for logging only: the reward terms, tracking errors and episode statistics.
    expected = {f"reward/{name}" for name, scale in config_lib.RewardConfig().scales().items()
                if scale}
    expected |= {"tracking/lin_vel_error", "tracking/yaw_rate_error", "episode/return",
                 "episode/length"}
    self.assertEqual(set(state.metrics), expected)
    for name, value in state.metrics.items():
      chex.assert_shape(value, (NUM_ENVS,))
      chex.assert_type(value, jnp.float32)
    chex.assert_shape(state.task.foot_xy, (NUM_ENVS, num_feet, 2))
    self.assertEqual(env.foot_names, ("FR", "FL", "RR", "RL"))
    # Reset and step produce the same metrics and signals trees (the trainer's scan carries them).
    chex.assert_trees_all_equal_shapes_and_dtypes(_reset(reset).metrics, state.metrics)
    chex.assert_trees_all_equal_shapes_and_dtypes(_reset(reset).signals, state.signals)
    chex.assert_tree_all_finite(state.metrics)
    chex.assert_tree_all_finite(state.signals)
    # only_positive: the shaped part of the reward is clipped at 0, the termination added after.
    shaped = sum(state.metrics[f"reward/{name}"]
                 for name, scale in config_lib.RewardConfig().scales().items()
                 if scale and name != "termination")
    np.testing.assert_allclose(
        state.reward, np.maximum(shaped, 0.0) + state.metrics["reward/termination"], atol=1e-7)

  def test_signals_are_typed_with_the_documented_shapes(self):
    env = _quiet_env()
    reset, step = _jitted(env)
    num_feet = env.num_feet
    standing = reset(_keys(), _flat_families())  # the standing pose on level ground
    for state in (standing, step(standing, jnp.zeros((NUM_ENVS, env.action_size)))):
      signals = state.signals
      self.assertIsInstance(signals, env_state.StepSignals)
      # Booleans stay booleans: contacts at both ends of the step, and body contact.
      chex.assert_shape([signals.contact, signals.last_contact], (NUM_ENVS, num_feet))
      chex.assert_type([signals.contact, signals.last_contact], bool)
      chex.assert_shape(signals.body_contact, (NUM_ENVS,))
      chex.assert_type(signals.body_contact, bool)
      # Measurements are float32: per env, trunk height (m) and tilt (degrees); per foot, the
      # mean horizontal speed (m/s) and air time (s).
      chex.assert_shape([signals.trunk_height, signals.trunk_tilt], (NUM_ENVS,))
      chex.assert_shape([signals.foot_speed, signals.air_time], (NUM_ENVS, num_feet))
      chex.assert_type([signals.trunk_height, signals.trunk_tilt, signals.foot_speed,
                        signals.air_time], jnp.float32)
    # After one step from the standing pose: the trunk is where the physics left it, and the
    # start-of-step contact is the reset state's (every foot on the ground).
    np.testing.assert_array_equal(state.signals.trunk_height, state.data.qpos[:, 2])
    np.testing.assert_array_equal(state.signals.last_contact, True)
    # One control step of air time counted on top of the reset's zero.
    np.testing.assert_allclose(state.signals.air_time, env.dt, rtol=1e-6)

  def test_zero_actions_stand_for_two_seconds(self):
    env = _quiet_env()
    reset, step = _jitted(env)
    num_steps = round(2.0 * env.config.env.control_hz)

    # Nominal conditions (the evaluation panel's `flat` families): no pushes, no payload, no
    # actuator delay, so standing still is the whole story. Stepped by the batched step the
    # other tests compile (a scan around it would be a program of its own).
    state = reset(_keys(), _flat_families())
    seen = []
    for _ in range(num_steps):
      state = step(state, jnp.zeros((NUM_ENVS, env.action_size)))
      seen.append(jax.device_get((state.data.qpos[:, 2], state.reset_reason, state.signals)))
    heights, reasons, signals = jax.tree.map(lambda *xs: np.stack(xs), *seen)
    chex.assert_tree_all_finite(state.data.qpos)
    np.testing.assert_array_equal(reasons, endings.ResetReason.NONE)
    self.assertGreater(float(heights.min()), 0.22)
    # Standing still: over the last half second the trunk bobs by less than 1 cm and is level.
    last = heights[-round(0.5 * env.config.env.control_hz):]
    np.testing.assert_array_less(last.max(axis=0) - last.min(axis=0), 0.01)
    gravity = state.obs["policy"][:, 6:9]
    # Level within 6 degrees: the trunk's centre of mass sits 2 cm ahead of the hips, so the
    # PD-held stance pitches forward by about 4 degrees.
    np.testing.assert_allclose(gravity, np.tile([0.0, 0.0, -1.0], (NUM_ENVS, 1)), atol=0.1)
    # The audit signals agree: every foot on the ground on every step, none slipping (by the
    # audit's threshold) once settled, no body contact, the trunk level and at standing height.
    # Planted feet still creep at about 2 cm/s: MuJoCo's soft contacts allow a little sliding.
    np.testing.assert_array_equal(signals.contact, True)
    np.testing.assert_array_equal(signals.last_contact, True)
    settled = round(0.5 * env.config.env.control_hz)
    np.testing.assert_array_less(signals.foot_speed[settled:], env.config.audit.slip_speed / 2)
    np.testing.assert_array_equal(signals.body_contact, False)
    np.testing.assert_array_less(signals.trunk_tilt, 6.0)
    np.testing.assert_allclose(signals.trunk_height, heights, atol=1e-6)

  def test_same_key_same_state(self):
    env = _env()
    reset, step = _jitted(env)
    actions = 0.3 * jax.random.normal(jax.random.key(1), (NUM_ENVS, env.action_size))
    first = step(_reset(reset, seed=3), actions)
    # The same key through an env built and traced anew: anything drawn outside the key (a
    # NumPy or Python random draw, a clock read while tracing) would be baked into each trace
    # differently. The program is the same, so it is read from the compilation cache.
    again = env_lib.LocomotionEnv(_config())
    second = jax.jit(jax.vmap(again.step))(
        _reset(jax.jit(jax.vmap(again.reset)), seed=3), actions)
    chex.assert_trees_all_equal(first, second)
    other = step(_reset(reset, seed=4), actions)
    self.assertFalse(np.array_equal(first.data.qpos, other.data.qpos))

  def test_gait_clock(self):
    env = _env()
    self.assertEqual(env.config.env.gait_hz, 2.0)
    reset, step = _jitted(env)
    state = reset(_keys(), _flat_families())  # level ground: zero actions stand
    phase = np.asarray(state.task.gait_phase)  # [N], random at reset
    self.assertEqual(len(np.unique(phase)), NUM_ENVS)
    np.testing.assert_array_less(phase, 1.0)
    # The clock's sine and cosine close the policy observation, and the critic sees them too.
    clock = np.stack([np.sin(2 * np.pi * phase), np.cos(2 * np.pi * phase)], axis=-1)  # [N, 2]
    np.testing.assert_allclose(state.obs["policy"][:, -2:], clock, atol=1e-6)
    policy_size = state.obs["policy"].shape[-1]
    np.testing.assert_allclose(state.obs["critic"][:, policy_size - 2:policy_size], clock,
                               atol=1e-6)
    # 2 Hz at 50 Hz control: 0.04 of a cycle per step, wrapping at 1; 25 steps make a cycle.
    after = state
    for _ in range(25):
      after = step(after, jnp.zeros((NUM_ENVS, env.action_size)))
      np.testing.assert_array_equal(after.reset_reason, R_NONE)
    np.testing.assert_allclose(after.task.gait_phase, phase, atol=1e-5)
    one = step(state, jnp.zeros((NUM_ENVS, env.action_size)))
    np.testing.assert_allclose(one.task.gait_phase, np.mod(phase + 0.04, 1.0), atol=1e-6)
    # Without a clock there is no phase in the observation.
    self.assertEqual(env.observation_spec()["policy"].shape[0],
                     _env(gait_hz=0.0).observation_spec()["policy"].shape[0] + 2)

  def test_vmapped_step_matches_single_env_step(self):
    env = _env()
    reset, step = _jitted(env)
    single_step = jax.jit(env.step)
    state = _reset(reset)
    actions = 0.5 * jax.random.normal(jax.random.key(2), (NUM_ENVS, env.action_size))
    batched = step(state, actions)
    for i in range(NUM_ENVS):
      single = single_step(_select(state, i), actions[i])
      one = _select(batched, i)
      # Discrete outcomes match exactly; float state to vectorisation round-off (the batched
      # solver reduces in a different order; constraint forces differ by ~1e-5 relative).
      chex.assert_trees_all_equal(
          (one.reset_reason, one.terminated, one.truncated, one.task.step, one.key),
          (single.reset_reason, single.terminated, single.truncated, single.task.step, single.key))
      chex.assert_trees_all_close(
          (one.data.qpos, one.data.qvel, one.obs, one.final_obs, one.reward, one.metrics,
           one.task.command, one.task.feet_air_time, one.signals.trunk_height,
           one.signals.trunk_tilt, one.signals.foot_speed, one.signals.air_time),
          (single.data.qpos, single.data.qvel, single.obs, single.final_obs, single.reward,
           single.metrics, single.task.command, single.task.feet_air_time,
           single.signals.trunk_height, single.signals.trunk_tilt, single.signals.foot_speed,
           single.signals.air_time),
          atol=1e-4, rtol=1e-4)

  def test_nan_isolated_to_its_env(self):
    env = _env()
    reset, step = _jitted(env)
    state = _reset(reset)
    actions = jnp.zeros((NUM_ENVS, env.action_size))
    poisoned = state.replace(data=state.data.replace(qvel=state.data.qvel.at[1, 7].set(jnp.nan)))
    clean_next, poisoned_next = step(state, actions), step(poisoned, actions)

    reasons = np.asarray(poisoned_next.reset_reason)
    self.assertEqual(reasons[1], endings.ResetReason.NONFINITE)
    self.assertTrue(bool(poisoned_next.terminated[1]))
    self.assertFalse(bool(poisoned_next.truncated[1]))
    chex.assert_tree_all_finite(poisoned_next.obs)
    chex.assert_tree_all_finite(poisoned_next.final_obs)
    chex.assert_tree_all_finite(poisoned_next.reward)
    chex.assert_tree_all_finite(poisoned_next.metrics)
    chex.assert_tree_all_finite(poisoned_next.signals)
    # A diverged step reports no contact event, no foot speed and no body contact.
    np.testing.assert_array_equal(poisoned_next.signals.contact[1],
                                  poisoned_next.signals.last_contact[1])
    np.testing.assert_array_equal(poisoned_next.signals.foot_speed[1], 0.0)
    self.assertFalse(bool(poisoned_next.signals.body_contact[1]))
    chex.assert_tree_all_finite(poisoned_next.data.qpos)
    self.assertEqual(int(poisoned_next.task.step[1]), 0)  # that env started a new episode
    # Garbage physics earns nothing, not even the termination penalty: the step carries no
    # signal about the policy beyond "this episode is over".
    self.assertEqual(float(poisoned_next.reward[1]), 0.0)
    others = np.array([0, 2, 3])
    chex.assert_trees_all_equal(_select(poisoned_next, others), _select(clean_next, others))

  def test_timeout_is_a_truncation_with_true_final_obs(self):
    env = _quiet_env()
    reset, step = _jitted(env)
    state = _reset(reset)
    # The observation holds the step's command; flattening each family's schedule to its first
    # command, and removing its pushes, lets the last step of an episode be replayed at its
    # start below.
    commands = state.family.commands  # [N, K, 3]
    state = state.replace(family=state.family.replace(
        commands=jnp.broadcast_to(commands[:, :1], commands.shape),
        push_forces=jnp.zeros_like(state.family.push_forces)))
    # Every env is one step from the time limit; env 2 is also far below the fall height.
    last = state.replace(task=state.task.replace(
        step=jnp.full((NUM_ENVS,), env.episode_steps - 1, jnp.int32)))
    qpos = last.data.qpos.at[2, 2].set(0.1)
    last = last.replace(data=last.data.replace(qpos=qpos))
    nxt = step(last, jnp.zeros((NUM_ENVS, env.action_size)))

    expected = [endings.ResetReason.TIMEOUT] * NUM_ENVS
    expected[2] = endings.ResetReason.FALL  # failure takes precedence over the time limit
    np.testing.assert_array_equal(nxt.reset_reason, expected)
    np.testing.assert_array_equal(nxt.truncated, [True, True, False, True])
    np.testing.assert_array_equal(nxt.terminated, [False, False, True, False])
    # Every env auto-reset: step counters restart, and obs is the new episode's first frame
    # while final_obs is the frame the episode ended on.
    np.testing.assert_array_equal(nxt.task.step, 0)
    self.assertFalse(np.allclose(nxt.obs["critic"], nxt.final_obs["critic"]))
    # final_obs equals the observation of the same step taken without the reset: the same
    # state, keys and action at the episode's first step.
    first = last.replace(task=last.task.replace(step=jnp.zeros((NUM_ENVS,), jnp.int32)))
    continued = step(first, jnp.zeros((NUM_ENVS, env.action_size)))
    keep = np.array([0, 1, 3])
    np.testing.assert_array_equal(continued.reset_reason[keep], endings.ResetReason.NONE)
    chex.assert_trees_all_close(
        _select(nxt.final_obs, keep), _select(continued.obs, keep), atol=1e-6)
    np.testing.assert_allclose(nxt.metrics["episode/length"], env.episode_steps)
    # Only the terminated env paid the termination penalty.
    term = np.asarray(nxt.metrics["reward/termination"])
    self.assertLess(term[2], 0.0)
    np.testing.assert_array_equal(term[keep], 0.0)

  def test_fall_by_tilt_and_body_contact(self):
    env = _quiet_env()
    reset, step = _jitted(env)
    state = _reset(reset)
    qpos = state.data.qpos
    # env 0: rolled onto its side at standing height (tilt past the threshold).
    roll = np.pi / 2
    qpos = qpos.at[0, 3:7].set(jnp.array([np.cos(roll / 2), np.sin(roll / 2), 0.0, 0.0]))
    # env 1: trunk far below the fall height.
    qpos = qpos.at[1, 2].set(0.1)
    state = state.replace(data=state.data.replace(qpos=qpos))
    nxt = step(state, jnp.zeros((NUM_ENVS, env.action_size)))
    self.assertEqual(int(nxt.reset_reason[0]), endings.ResetReason.FALL)
    self.assertEqual(int(nxt.reset_reason[1]), endings.ResetReason.FALL)
    np.testing.assert_array_equal(nxt.reset_reason[2:], endings.ResetReason.NONE)

    # A body geom on the floor with the trunk upright above the fall height ends the episode by
    # body contact alone: env 1 at a trunk height of 0.2 m (the fall height is 0.18 m) with its
    # thighs hanging straight down (thigh 0, calf -1.2 rad, inside their ranges), so each thigh's
    # collision capsule (0.22 m below its hip) is 2 cm into the floor.
    state = _reset(reset)
    qpos = state.data.qpos.at[1, 2].set(0.2)
    for leg in range(4):
      qpos = qpos.at[1, 7 + 3 * leg + 1].set(0.0).at[1, 7 + 3 * leg + 2].set(-1.2)
    self.assertGreater(float(qpos[1, 2]), env.config.env.fall_height)
    nxt = step(state.replace(data=state.data.replace(qpos=qpos)),
               jnp.zeros((NUM_ENVS, env.action_size)))
    self.assertEqual(int(nxt.reset_reason[1]), endings.ResetReason.BODY_CONTACT)
    self.assertTrue(bool(nxt.terminated[1]))
    np.testing.assert_array_equal(np.asarray(nxt.reset_reason)[[0, 2, 3]], endings.ResetReason.NONE)

  def test_final_state_is_the_one_the_episode_ended_in(self):
    env = _quiet_env()
    reset = _jitted(env)[0]
    step_with_final = jax.jit(jax.vmap(env.step_with_final))
    state = _reset(reset)
    actions = 0.3 * jax.random.normal(jax.random.key(5), (NUM_ENVS, env.action_size))
    # Env 1 starts far below the fall height: its step ends the episode.
    dropped = state.replace(data=state.data.replace(qpos=state.data.qpos.at[1, 2].set(0.1)))
    nxt, final = step_with_final(dropped, actions)
    np.testing.assert_array_equal(nxt.reset_reason, [R_NONE, R_FALL, R_NONE, R_NONE])
    # `next` is what `step` returns: the same outcome exactly, the same state to float32
    # rounding. `step` is a program of its own, which XLA may fuse and so round differently, and
    # the contact solver's iterations grow a last-bit difference: 5e-6 in a joint velocity of
    # 3.6, 2e-4 in a warm-start acceleration of 0.11 beside others of 109. So each leaf is held
    # to 1e-4 of its own largest magnitude. A wrong state (one not reset, or the final one) is
    # off by whole units.
    by_step = _jitted(env)[1](dropped, actions)
    chex.assert_trees_all_equal_structs(nxt, by_step)
    for (path, ours), theirs in zip(jax.tree_util.tree_leaves_with_path(nxt),
                                    jax.tree.leaves(by_step)):
      if jnp.issubdtype(ours.dtype, jnp.floating):
        scale = float(np.max(np.abs(theirs), initial=1.0))
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * scale,
                                   err_msg=jax.tree_util.keystr(path))
      else:
        chex.assert_trees_all_equal(ours, theirs)
    # Where the episode goes on, the final state is the next one.
    going = np.array([0, 2, 3])
    chex.assert_trees_all_equal(_select(final, going), _select(nxt, going))
    # Where it ended, the final state is the one it ended in: the trunk still low, the step
    # counted, the clipped action recorded, the observation the one in `final_obs`; the next
    # state starts over at the standing height.
    self.assertLess(float(final.data.qpos[1, 2]), 0.18)
    self.assertGreater(float(nxt.data.qpos[1, 2]), 0.25)
    self.assertEqual(int(final.task.step[1]), 1)
    self.assertEqual(int(nxt.task.step[1]), 0)
    clip = env.env_config.action_clip
    np.testing.assert_array_equal(final.task.last_action, np.clip(actions, -clip, clip))
    chex.assert_trees_all_equal(final.obs, nxt.final_obs)
    # The step's own outcome is the same in both.
    chex.assert_trees_all_equal(
        (final.reward, final.reset_reason, final.signals, final.metrics, final.key),
        (nxt.reward, nxt.reset_reason, nxt.signals, nxt.metrics, nxt.key))
    self.assertLess(float(nxt.signals.trunk_height[1]), 0.18)

  def test_joint_limit(self):
    env = _quiet_env()
    reset, step = _jitted(env)
    state = _reset(reset)
    # Env 3 hangs in the air (legs unloaded) with its FR calf at the upper limit and a target
    # beyond it, so the joint stays pressed against the limit for the whole step.
    calf = 2
    qpos = state.data.qpos.at[3, env.robot.qpos_joint_adr[calf]].set(env.robot.joint_upper[calf])
    qpos = qpos.at[3, 2].set(1.0)
    # No actuator delay, so the target beyond the limit acts in this very step.
    no_delay = state.family.replace(action_delay=jnp.zeros_like(state.family.action_delay))
    state = state.replace(data=state.data.replace(qpos=qpos), family=no_delay)
    actions = jnp.zeros((NUM_ENVS, env.action_size)).at[3, calf].set(env.env_config.action_clip)
    nxt = step(state, actions)
    self.assertEqual(int(nxt.reset_reason[3]), endings.ResetReason.JOINT_LIMIT)
    self.assertTrue(bool(nxt.terminated[3]))
    np.testing.assert_array_equal(nxt.reset_reason[:3], endings.ResetReason.NONE)

  def test_command_follows_the_family_schedule(self):
    env = _quiet_env()
    reset, step = _jitted(env)
    state = _reset(reset)
    zeros = jnp.zeros((NUM_ENVS, env.action_size))
    envs = np.arange(NUM_ENVS)
    times = np.asarray(state.family.command_times)  # [N, K] s
    commands = np.asarray(state.family.commands)  # [N, K, 3]
    # Each env follows its own family's schedule (env i is family i here) ...
    chex.assert_trees_all_equal(state.family, _families())
    # ... and starts on its first entry; the policy observes the command (obs slice 6:9).
    np.testing.assert_array_equal(state.task.command, commands[:, 0])
    np.testing.assert_array_equal(state.obs["policy"][:, 9:12], commands[:, 0])
    for entry in (1, 2):
      start = times[:, entry] / env.dt  # [N] control steps
      # Times are continuous draws: none falls on a control step, so "before" is unambiguous.
      self.assertTrue(np.all(np.abs(start - np.round(start)) > 1e-3), start)
      first = np.ceil(start).astype(np.int32)  # [N] first control step of this entry
      self.assertTrue(np.all(first < env.episode_steps), first)
      for offset, row in ((-2, entry - 1), (-1, entry - 1), (0, entry), (1, entry)):
        # A step from step s yields the command of control step s + 1.
        before = state.replace(task=state.task.replace(step=jnp.asarray(first + offset - 1)))
        after = step(before, zeros)
        np.testing.assert_array_equal(after.reset_reason, endings.ResetReason.NONE)
        np.testing.assert_array_equal(after.task.step, first + offset)
        np.testing.assert_array_equal(after.task.command, commands[envs, row],
                                      err_msg=f"entry {entry}, offset {offset}")
        np.testing.assert_array_equal(after.obs["policy"][:, 9:12], commands[envs, row])
    # Distinct families get distinct schedules.
    self.assertEqual(len({tuple(t) for t in times.round(6)}), NUM_ENVS)


if __name__ == "__main__":
  absltest.main()
