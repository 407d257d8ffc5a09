"""Tests for mjx_walk.learn.audit: every reduction on hand-built batches with known answers, the
whole update audit on typed signals, and the early-end traces: recording from the env's final
states and picking. (The ledger summary is in test_records.py, the flags in test_flags.py, trace
files and their replay in MJX in test_traces.py.)"""

from __future__ import annotations

import functools

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.learn import audit
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state
from mjx_walk.sim import families

import configs

R = endings.ResetReason
_ = False
X = True


class ContactEventsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_counts_on_a_constructed_batch(self):
    # T = 3 steps, N = 2 envs, F = 2 feet; arrays are [T, N, F], written per env and foot over t.
    #   env 0 foot 0: last [1 1 0], now [1 0 1]: t0 stance at 0.05 m/s (no slip), t1 lift-off,
    #                 t2 touchdown at 0.3 m/s (no stumble) after 0.04 s in the air.
    #   env 0 foot 1: in stance throughout at 0.2, 0.05, 0.15 m/s: slips at t0 and t2.
    #   env 1 foot 0: last [0 1 0], now [1 0 1]: t0 touchdown at 0.8 m/s after 0.3 s (stumble),
    #                 t1 lift-off, t2 touchdown at 0.6 m/s after 0.02 s (stumble).
    #   env 1 foot 1: in the air throughout at 2 m/s: a swing, no event.
    #   env 1's trunk touches the ground at t2.
    def per_step(e0f0, e0f1, e1f0, e1f1):  # four length-3 sequences -> [T, N, F]
      return np.stack([np.stack([e0f0, e0f1], -1), np.stack([e1f0, e1f1], -1)], 1)

    last = per_step([1, 1, 0], [1, 1, 1], [0, 1, 0], [0, 0, 0]).astype(bool)
    now = per_step([1, 0, 1], [1, 1, 1], [1, 0, 1], [0, 0, 0]).astype(bool)
    speed = per_step([0.05, 0.0, 0.3], [0.2, 0.05, 0.15], [0.8, 0.0, 0.6], [2.0, 2.0, 2.0])
    air = per_step([0.0, 0.0, 0.04], [0.0, 0.0, 0.0], [0.3, 0.0, 0.02], [0.1, 0.2, 0.3])
    body = np.array([[_, _], [_, _], [_, X]])  # [T, N]
    events = self.variant(functools.partial(
        audit.contact_events, slip_speed=0.1, stumble_speed=0.5))(now, last, speed, air, body)
    self.assertEqual(float(events["touchdowns"]), 3)  # e0f0 t2, e1f0 t0, e1f0 t2
    self.assertEqual(float(events["liftoffs"]), 2)  # e0f0 t1, e1f0 t1
    self.assertEqual(float(events["slips"]), 2)  # e0f1 t0 (0.2), t2 (0.15)
    self.assertEqual(float(events["stumble_touchdowns"]), 2)  # e1f0 t0 (0.8), t2 (0.6)
    self.assertEqual(float(events["body_contacts"]), 1)  # env 1 at t2
    self.assertEqual(float(events["stumbles"]), 3)  # 2 touchdowns + 1 body contact
    # Swings ending in the touchdowns: 0.04, 0.3 and 0.02 s; sum 0.36 s. Nearest rank of the
    # 90th percentile over 3 swings: ceil(0.9 * 3) = 3rd smallest = 0.3 s.
    self.assertAlmostEqual(float(events["air_time_sum"]), 0.36, places=6)
    self.assertAlmostEqual(float(events["air_time_p90"]), 0.3, places=6)
    # Foot 0 ends 4 of 6 env-steps on the ground; foot 1 ends 3 of 6 (env 0 only).
    np.testing.assert_allclose(events["ground_share"], [4 / 6, 3 / 6], rtol=1e-6)

  def test_no_touchdown_gives_zero_percentile(self):
    down = np.ones((2, 1, 4), bool)  # standing still: no events at all
    events = audit.contact_events(down, down, np.zeros((2, 1, 4)), np.zeros((2, 1, 4)),
                                  np.zeros((2, 1), bool), slip_speed=0.1, stumble_speed=0.5)
    for key in ("touchdowns", "liftoffs", "slips", "stumbles", "air_time_sum", "air_time_p90"):
      self.assertEqual(float(events[key]), 0.0, key)
    np.testing.assert_array_equal(events["ground_share"], [1, 1, 1, 1])


class TerminationAuditTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_reset_histogram_by_family(self):
    # N = 4 envs in F = 2 families: envs 0 and 2 are family 0, envs 1 and 3 family 1.
    reasons = np.array([[R.FALL, R.NONE, R.TIMEOUT, R.FALL],
                        [R.NONE, R.BODY_CONTACT, R.FALL, R.NONE]], np.int32)  # [T, N]
    counts = self.variant(audit.reset_histogram_by_family, static_argnums=1)(reasons, 2)
    # Columns: fall, timeout, joint_limit, body_contact, nonfinite.
    self.assertEqual(endings.REASON_NAMES,
                     ("fall", "timeout", "joint_limit", "body_contact", "nonfinite"))
    np.testing.assert_array_equal(counts, [[2, 1, 0, 0, 0],    # env 0 fall, env 2 timeout, fall
                                           [1, 0, 0, 1, 0]])   # env 3 fall, env 1 body contact

  def test_bins(self):
    self.assertEqual(len(audit.FALL_HEIGHT_BINS), 19)  # 18 bins of 2.5 cm over 0 .. 0.45 m
    self.assertAlmostEqual(audit.FALL_HEIGHT_BINS[-1], 0.45)
    np.testing.assert_allclose(np.diff(audit.FALL_HEIGHT_BINS), 0.025, atol=1e-9)
    self.assertEqual(len(audit.FALL_TILT_BINS), 19)  # 18 bins of 10 degrees over 0 .. 180
    self.assertEqual(audit.FALL_TILT_BINS[-1], 180.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_fall_histograms(self):
    reasons = np.array([[R.FALL, R.NONE, R.TIMEOUT, R.FALL],
                        [R.NONE, R.BODY_CONTACT, R.FALL, R.NONE]], np.int32)  # [T, N]
    # The three falls: (t0, env 0) 0.16 m, 20 deg; (t0, env 3) 0.0625 m, 95 deg;
    # (t1, env 2) 0.17 m, 65 deg. Every other entry is ignored however odd.
    heights = np.full((2, 4), 0.3, np.float32)
    tilts = np.full((2, 4), 170.0, np.float32)
    for (t, n), h, tilt in (((0, 0), 0.16, 20.0), ((0, 3), 0.0625, 95.0), ((1, 2), 0.17, 65.0)):
      heights[t, n], tilts[t, n] = h, tilt
    height_counts, tilt_counts = self.variant(audit.fall_histograms)(reasons, heights, tilts)
    expected_heights = np.zeros(18)
    expected_heights[6] = 2  # 0.16 and 0.17 m in [0.15, 0.175)
    expected_heights[2] = 1  # 0.0625 m in [0.05, 0.075)
    expected_tilts = np.zeros(18)
    expected_tilts[[2, 9, 6]] = 1  # [20, 30), [90, 100), [60, 70)
    np.testing.assert_array_equal(height_counts, expected_heights)
    np.testing.assert_array_equal(tilt_counts, expected_tilts)

  def test_masked_histogram_outer_bins_hold_outliers(self):
    edges = np.array([0.0, 1.0, 2.0, 3.0])
    values = jnp.array([-5.0, 0.0, 0.5, 1.0, 2.99, 3.0, 7.0, 1.5])
    mask = jnp.array([X, X, X, X, X, X, X, _])
    # -5 -> bin 0 (below), 0 and 0.5 -> bin 0, 1.0 -> bin 1, 2.99 -> bin 2, 3.0 and 7 -> bin 2
    # (above), 1.5 masked out.
    np.testing.assert_array_equal(audit.masked_histogram(values, mask, edges), [3, 1, 3])


class RewardAndSyncTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_reward_shares(self):
    terms = {"a": jnp.array([[1.0, -1.0], [0.0, 2.0]]),  # |a| sums to 4
             "b": jnp.array([[-2.0, 0.0], [0.0, 0.0]]),  # |b| sums to 2
             "c": jnp.zeros((2, 2))}
    shares = self.variant(audit.reward_shares)(terms)
    chex.assert_trees_all_close(shares, {"a": 4 / 6, "b": 2 / 6, "c": 0.0}, rtol=1e-6)
    silent = self.variant(audit.reward_shares)({"a": jnp.zeros((2, 2))})
    self.assertEqual(float(silent["a"]), 0.0)  # no 0 / 0

  @chex.variants(with_jit=True, without_jit=True)
  def test_reset_sync(self):
    done = np.array([[X, _, _, _],    # 1 of 4 envs
                     [X, X, _, X],    # 3 of 4: the burst
                     [_, _, _, _]])   # none
    largest, mean = self.variant(audit.reset_sync)(done)
    self.assertAlmostEqual(float(largest), 0.75)
    self.assertAlmostEqual(float(mean), (0.25 + 0.75 + 0.0) / 3, places=6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_effective_families(self):
    counts = jnp.array([[4, 4, 0, 0],    # two equal families: 8^2 / (16 + 16) = 2
                        [8, 0, 0, 0],    # one family: 1
                        [1, 1, 1, 1],    # four equal families: 16 / 4 = 4
                        [6, 2, 0, 0]])   # skewed: 8^2 / (36 + 4) = 1.6
    np.testing.assert_allclose(self.variant(audit.effective_families)(counts), [2, 1, 4, 1.6],
                               rtol=1e-6)


class RolloutMetricsTest(chex.TestCase):

  def _rollout(self, num_traces: int):
    """T = 2 steps, N = 2 envs (env n in family n % 2), F = 1 foot, worked by hand below."""
    signals = env_state.StepSignals(
        trunk_height=jnp.array([[0.16, 0.3], [0.3, 0.3]]),
        trunk_tilt=jnp.array([[20.0, 0.0], [0.0, 0.0]]),
        contact=jnp.array([[X, _], [X, X]])[..., None],  # [T, N, F]
        last_contact=jnp.array([[_, _], [X, _]])[..., None],
        foot_speed=jnp.array([[0.6, 0.0], [0.3, 0.2]])[..., None],
        air_time=jnp.array([[0.2, 0.0], [0.0, 0.4]])[..., None],
        body_contact=jnp.array([[_, _], [_, X]]),
    )
    reasons = jnp.array([[R.FALL, R.NONE], [R.NONE, R.TIMEOUT]], jnp.int32)
    env_metrics = {"reward/a": jnp.array([[1.0, -1.0], [0.0, 0.0]]),  # |a| sums to 2
                   "reward/b": jnp.array([[2.0, 0.0], [0.0, 0.0]]),  # |b| sums to 2
                   "episode/return": jnp.full((2, 2), 100.0)}  # not a reward term
    rows = lambda *shape: jnp.zeros((2, num_traces) + shape)
    ints = lambda values: jnp.broadcast_to(jnp.array(values, jnp.int32)[:, None], (2, num_traces))
    # One early end, at step 0 in env 0; each step's candidates (`step_early_ends`) [T, S].
    early_end_traces = audit.Traces(
        qpos=rows(3, 2), qvel=rows(3, 2), action=rows(2, 1), family=ints([0, 0]),
        env=ints([0, 0]), reason=ints([R.FALL, 0]), length=ints([1, 0]),
        first_step=ints([7, 0]), valid=jnp.broadcast_to(jnp.array([X, _])[:, None], (2, num_traces)))
    return audit.rollout_metrics(
        signals, jnp.array([[X, _], [_, _]]), env_metrics, reasons, reasons != R.NONE,
        early_end_traces, num_families=2, audit=config_lib.AuditConfig(slip_speed=0.1,
                                                                       stumble_speed=0.5),
        foot_names=("FR",))

  def test_update_audit_on_typed_signals(self):
    metrics = self._rollout(num_traces=1)
    expected = {
        "audit/early_ends": 1.0,
        "contact/touchdowns": 2.0,  # t0 env 0, t1 env 1
        "contact/liftoffs": 0.0,
        "contact/slips": 1.0,  # t1 env 0: on the ground at both ends at 0.3 m/s
        "contact/stumble_touchdowns": 1.0,  # t0 env 0 at 0.6 m/s
        "contact/body_contacts": 1.0,  # t1 env 1
        "contact/stumbles": 2.0,
        "contact/air_time_sum": 0.6,  # 0.2 + 0.4 s
        "contact/air_time_p90": 0.4,  # nearest rank ceil(0.9 * 2) = 2nd smallest
        "contact/ground_share/FR": 0.75,  # 3 of 4 env-steps end on the ground
        "reward_share/a": 0.5,
        "reward_share/b": 0.5,
        "sync/max_reset_share": 0.5,  # one of two envs ends in each step
        "sync/mean_reset_share": 0.5,
    }
    for key, value in expected.items():
      self.assertAlmostEqual(float(metrics[key]), value, places=6, msg=key)
    self.assertNotIn("reward_share/episode/return", metrics)
    # Env 0 (family 0) fell, env 1 (family 1) timed out; the fall at 0.16 m and 20 degrees.
    np.testing.assert_array_equal(metrics["audit/resets_by_family"],
                                  [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0]])
    np.testing.assert_array_equal(np.flatnonzero(metrics["audit/fall_height_counts"]), [6])
    np.testing.assert_array_equal(np.flatnonzero(metrics["audit/fall_tilt_counts"]), [2])
    # The update's first early end, from step 0.
    np.testing.assert_array_equal(metrics["trace/valid"], [X])
    np.testing.assert_array_equal(metrics["trace/first_step"], [7])
    np.testing.assert_array_equal(metrics["trace/reason"], [R.FALL])
    chex.assert_shape(metrics["trace/qpos"], (1, 3, 2))

  def test_no_trace_keys_without_trace_rows(self):
    metrics = self._rollout(num_traces=0)
    self.assertFalse(any(key.startswith("trace/") for key in metrics))
    self.assertEqual(float(metrics["audit/early_ends"]), 1.0)


def _fake_trace(num_envs: int, steps: int, lengths: list[int],
                early_end: list[bool]) -> audit.EpisodeTrace:
  """Batched traces whose qpos row k of env n is 10 n + k (nq = nv = A = 1), stale rows 99."""
  rows = np.arange(steps + 1)[None, :]  # [1, L + 1]
  qpos = 10.0 * np.arange(num_envs)[:, None] + rows  # [N, L + 1]
  length = np.array(lengths, np.int32)
  qpos = np.where(rows <= length[:, None], qpos, 99.0)
  action = np.where(rows[:, :-1] < length[:, None], qpos[:, :-1] + 0.5, 99.0)
  return audit.EpisodeTrace(
      qpos=jnp.asarray(qpos[..., None], jnp.float32), qvel=jnp.asarray(-qpos[..., None]),
      action=jnp.asarray(action[..., None], jnp.float32), length=jnp.asarray(length),
      first_step=jnp.asarray(np.arange(num_envs, dtype=np.int32) * 100),
      early_end=jnp.asarray(early_end))


class PickTracesTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_fills_free_rows_lowest_env_first(self):
    steps = 3
    family = jnp.array([0, 1, 0, 1], jnp.int32)
    reason = jnp.full((4,), R.FALL, jnp.int32)
    pick = self.variant(audit.step_early_ends, static_argnums=3)
    # Step 1: envs 1 and 3 end early -> rows 0 and 1; row 2 stays empty (all zeros).
    first = pick(_fake_trace(4, steps, [2, 1, 5, 3], [_, X, _, X]), family, reason, 3)
    np.testing.assert_array_equal(first.valid, [X, X, _])
    np.testing.assert_array_equal(first.env, [1, 3, 0])
    for name, value in vars(jax.tree.map(lambda x: x[2], first)).items():
      np.testing.assert_array_equal(value, 0, err_msg=name)
    # Step 2: envs 0 and 1 end early (env 1 in a new episode).
    second = pick(_fake_trace(4, steps, [2, 1, 5, 3], [X, X, _, _]), family, reason, 3)
    np.testing.assert_array_equal(second.env, [0, 1, 0])
    # Over the update: only one row is left after step 1 -> env 0; env 1 is dropped.
    picked = self.variant(audit.first_early_ends, static_argnums=1)(
        jax.tree.map(lambda a, b: jnp.stack([a, b]), first, second), 3)
    np.testing.assert_array_equal(picked.valid, [X, X, X])
    np.testing.assert_array_equal(picked.env, [1, 3, 0])
    np.testing.assert_array_equal(picked.family, [1, 1, 0])
    np.testing.assert_array_equal(picked.length, [1, 3, 2])
    np.testing.assert_array_equal(picked.first_step, [100, 300, 0])
    np.testing.assert_array_equal(picked.reason, [R.FALL] * 3)
    # Rows past each episode's length are zeroed (env 1: states 0..1, env 0: states 0..2).
    np.testing.assert_array_equal(picked.qpos[..., 0], [[10, 11, 0, 0], [30, 31, 32, 33],
                                                        [0, 1, 2, 0]])
    np.testing.assert_array_equal(picked.action[..., 0], [[10.5, 0, 0], [30.5, 31.5, 32.5],
                                                          [0.5, 1.5, 0]])
    np.testing.assert_array_equal(picked.qvel, -picked.qpos)

  def test_fewer_early_ends_than_rows_leave_empty_rows(self):
    trace = _fake_trace(4, 3, [2, 1, 5, 3], [_, _, X, _])  # env 2 flagged, however long
    per_step = audit.step_early_ends(trace, jnp.zeros(4, jnp.int32),
                                     jnp.full((4,), R.FALL, jnp.int32), 2)
    none = audit.step_early_ends(trace.replace(early_end=jnp.zeros(4, bool)),
                                 jnp.zeros(4, jnp.int32), jnp.zeros(4, jnp.int32), 2)
    picked = audit.first_early_ends(
        jax.tree.map(lambda a, b: jnp.stack([a, b]), none, per_step), 2)
    np.testing.assert_array_equal(picked.valid, [X, _])
    np.testing.assert_array_equal(picked.env, [2, 0])
    np.testing.assert_array_equal(picked.qpos[0, :, 0], [20, 21, 22, 23])
    for name, value in vars(jax.tree.map(lambda x: x[1], picked)).items():
      np.testing.assert_array_equal(value, 0, err_msg=name)


# RECORDING FROM THE ENV'S FINAL STATES


@functools.lru_cache(maxsize=None)
def _quiet_env() -> env_lib.LocomotionEnv:
  """No reset perturbation, no observation noise: starts exactly in the standing pose.

  The same env as tests/test_env.py's (joint-limit terminations on), so that the compiled
  programs of 4 such envs are shared through the compilation cache.
  """
  return env_lib.LocomotionEnv(configs.quiet())


@functools.lru_cache(maxsize=None)
def _jitted(env: env_lib.LocomotionEnv):
  """Batched reset, step_with_final, record_step and start_trace, compiled once per shape and
  shared by the tests."""
  return (jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step_with_final)),
          jax.jit(jax.vmap(audit.record_step)),
          jax.jit(jax.vmap(audit.start_trace, in_axes=(0, None)), static_argnums=1))


class RecordStepTest(absltest.TestCase):

  def test_trace_records_the_episode_and_outlives_its_end(self):
    env = _quiet_env()
    num_envs = 4
    manifest = families.make_manifest(env.config)
    reset, step, record, start = _jitted(env)
    state = reset(jax.random.split(jax.random.key(0), num_envs),
                  families.for_envs(manifest.train_params(), num_envs))
    # Traces of 10 steps (the default audit.early_end_steps) and of 3 steps, side by side.
    trace, short = start(state, 10), start(state, 3)
    qpos0 = np.asarray(state.data.qpos)
    np.testing.assert_array_equal(trace.qpos[:, 0], qpos0)  # row 0: the reset state
    np.testing.assert_array_equal(trace.length, 0)
    actions = 0.3 * jax.random.normal(jax.random.key(5), (3, num_envs, env.action_size))
    actions = actions.at[0, 0, 0].set(9.0)  # clipped to action_clip = 5 in the trace
    seen = [qpos0]
    for action in actions:
      nxt, final = step(state, action)
      trace, short = record(trace, state, final), record(short, state, final)
      state = nxt
      seen.append(np.asarray(final.data.qpos))
    np.testing.assert_array_equal(state.reset_reason, R.NONE)
    np.testing.assert_array_equal(trace.length, 3)
    np.testing.assert_array_equal(trace.first_step, 0)
    np.testing.assert_array_equal(np.swapaxes(trace.qpos[:, :4], 0, 1), np.stack(seen))
    np.testing.assert_array_equal(np.swapaxes(trace.action[:, :3], 0, 1),
                                  np.clip(actions, -5.0, 5.0))
    self.assertEqual(float(trace.action[0, 0, 0]), 5.0)
    np.testing.assert_array_equal(trace.early_end, False)
    chex.assert_trees_all_equal((short.qpos, short.action), (trace.qpos[:, :4], trace.action[:, :3]))

    # Env 1 drops below the fall height on its 4th step: an early end within 10 steps, but not
    # within 3.
    dropped = state.replace(data=state.data.replace(qpos=state.data.qpos.at[1, 2].set(0.1)))
    ended, final = step(dropped, actions[0])
    trace, short = record(trace, dropped, final), record(short, dropped, final)
    np.testing.assert_array_equal(ended.reset_reason, [R.NONE, R.FALL, R.NONE, R.NONE])
    np.testing.assert_array_equal(trace.early_end, [_, X, _, _])
    np.testing.assert_array_equal(short.early_end, False)
    np.testing.assert_array_equal(short.length, 4)  # counts on past L; the rows stay full
    chex.assert_trees_all_equal((short.qpos, short.action), (trace.qpos[:, :4], trace.action[:, :3]))
    # The returned state is the next episode's, but the trace still holds the one that ended,
    # including the state it ended in.
    self.assertEqual(int(trace.length[1]), 4)
    self.assertLess(float(trace.qpos[1, 4, 2]), 0.18)
    self.assertGreater(float(ended.data.qpos[1, 2]), 0.25)
    # The next step starts a new trace from the new episode's reset state.
    after, final = step(ended, actions[1])
    trace = record(trace, ended, final)
    np.testing.assert_array_equal(trace.length, [5, 1, 5, 5])
    np.testing.assert_array_equal(trace.qpos[1, 0], ended.data.qpos[1])
    np.testing.assert_array_equal(trace.qpos[1, 1], after.data.qpos[1])
    np.testing.assert_array_equal(trace.early_end, False)

  def test_first_step_follows_a_late_started_clock(self):
    env = _quiet_env()
    num_envs = 4  # the shapes of the test above: its compiled functions serve this one
    reset, step, record, start = _jitted(env)
    manifest = families.make_manifest(env.config)
    state = reset(jax.random.split(jax.random.key(0), num_envs),
                  families.for_envs(manifest.train_params(), num_envs))
    # The trainer staggers the first episodes: env 1's clock starts at 7, env 3's at 2.
    state = state.replace(task=state.task.replace(step=jnp.array([0, 7, 0, 2], jnp.int32)))
    trace = start(state, 10)
    for _ in range(2):
      nxt, final = step(state, jnp.zeros((num_envs, env.action_size)))
      trace, state = record(trace, state, final), nxt
    np.testing.assert_array_equal(trace.length, 2)
    np.testing.assert_array_equal(trace.first_step, [0, 7, 0, 2])
    np.testing.assert_array_equal(state.task.step, [2, 9, 2, 4])


if __name__ == "__main__":
  absltest.main()
