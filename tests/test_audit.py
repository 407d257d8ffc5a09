"""Tests for mjx_walk.audit: every reduction on hand-built batches with known answers, trace
picking, writing and replay in MJX, the ledger summary, and the plain-words flags."""

from __future__ import annotations

import functools
import pathlib

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk.learn import audit
from mjx_walk.analysis import flags as flags_lib
from mjx_walk.analysis import traces as trace_files
from mjx_walk.learn import records as records_lib
from mjx_walk import config as config_lib
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families
from mjx_walk.run import run_folder

R = env_lib.ResetReason
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
    self.assertEqual(audit.REASON_NAMES,
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


def _fake_trace(num_envs: int, steps: int, lengths: list[int]) -> env_lib.EpisodeTrace:
  """Batched traces whose qpos row k of env n is 10 n + k (nq = nv = A = 1), stale rows 99."""
  rows = np.arange(steps + 1)[None, :]  # [1, L + 1]
  qpos = 10.0 * np.arange(num_envs)[:, None] + rows  # [N, L + 1]
  length = np.array(lengths, np.int32)
  qpos = np.where(rows <= length[:, None], qpos, 99.0)
  action = np.where(rows[:, :-1] < length[:, None], qpos[:, :-1] + 0.5, 99.0)
  return env_lib.EpisodeTrace(
      qpos=jnp.asarray(qpos[..., None], jnp.float32), qvel=jnp.asarray(-qpos[..., None]),
      action=jnp.asarray(action[..., None], jnp.float32), length=jnp.asarray(length),
      first_step=jnp.asarray(np.arange(num_envs, dtype=np.int32) * 100))


class PickTracesTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_fills_free_rows_lowest_env_first(self):
    steps = 3
    trace = _fake_trace(4, steps, lengths=[2, 1, 5, 3])
    one = jax.tree.map(lambda x: x[0], trace)
    picked = audit.empty_traces(3, one)
    family = jnp.array([0, 1, 0, 1], jnp.int32)
    reason = jnp.full((4,), R.FALL, jnp.int32)
    pick = self.variant(audit.pick_traces)
    # Step 1: envs 1 and 3 end early -> rows 0 and 1.
    picked = pick(picked, jnp.array([_, X, _, X]), trace, family, reason)
    np.testing.assert_array_equal(picked.valid, [X, X, _])
    np.testing.assert_array_equal(picked.env, [1, 3, 0])
    # Step 2: envs 0 and 1 end early; only the last row is free -> env 0; env 1 is dropped.
    picked = pick(picked, jnp.array([X, X, _, _]), trace, family, reason)
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


def _trace_metrics(num_updates: int, valid: list[list[bool]]) -> dict[str, np.ndarray]:
  """A chunk's `trace/...` metrics [K, S, ...] with traces of length 1 + s, nq = 2."""
  valid = np.array(valid)
  k, s = valid.shape
  steps = 3
  length = np.tile(1 + np.arange(s, dtype=np.int32), (k, 1))  # [K, S]
  qpos = np.arange(k * s * (steps + 1) * 2, dtype=np.float32).reshape(k, s, steps + 1, 2)
  return {
      "trace/qpos": qpos, "trace/qvel": -qpos,
      "trace/action": np.ones((k, s, steps, 12), np.float32),
      "trace/family": np.full((k, s), 7, np.int32), "trace/env": np.full((k, s), 15, np.int32),
      "trace/reason": np.full((k, s), int(R.BODY_CONTACT), np.int32),
      "trace/length": length, "trace/first_step": np.zeros((k, s), np.int32),
      "trace/valid": valid,
  }


class HostTest(absltest.TestCase):

  def test_summarize_sparse_families_and_histograms(self):
    counts = np.zeros((2, 3, 5))  # K = 2 updates, F = 3 families, R = 5 reasons
    counts[0, 0, 0] = 2  # family 0: 2 falls in update 1 ...
    counts[1, 0, 0] = 1  # ... and 1 in update 2
    counts[1, 2, 1] = 4  # family 2: 4 timeouts
    counts[0, 2, 3] = 1  # family 2: 1 body contact
    height = np.zeros((2, 18))
    height[0, 6], height[1, 6], height[1, 0] = 2, 1, 1
    record = records_lib.summarize({"audit/resets_by_family": counts,
                                    "audit/fall_height_counts": height,
                                    "audit/fall_tilt_counts": np.ones((2, 18)),
                                    "episode/count": np.array([3.0, 5.0]),
                                    "episode/return_sum": np.zeros(2),
                                    "episode/length_sum": np.zeros(2)})
    self.assertEqual(record["audit/resets_by_family"],
                     {"0": {"fall": 3}, "2": {"timeout": 4, "body_contact": 1}})
    self.assertEqual(record["audit/fall_height_counts"], [1] + [0] * 5 + [3] + [0] * 11)
    self.assertEqual(record["audit/fall_tilt_counts"], [2] * 18)
    self.assertEqual(record["episode/count"], 8.0)  # the scalars are reduced beside them

  def test_write_traces_until_the_folder_is_full(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    # K = 2 updates of S = 2 rows; update 11 has one valid trace, update 12 two.
    metrics = _trace_metrics(2, [[X, _], [X, X]])
    paths = trace_files.write_early_ends(run_dir, metrics, first_update=10, max_traces=2)
    self.assertEqual([p.name for p in paths], ["11_0.npz", "12_0.npz"])  # 12_1 over the limit
    trace = trace_files.load_early_end(paths[1])
    self.assertEqual(int(trace["length"]), 1)
    np.testing.assert_array_equal(trace["qpos"], metrics["trace/qpos"][1, 0, :2])
    np.testing.assert_array_equal(trace["qvel"], -trace["qpos"])
    self.assertEqual(trace["action"].shape, (1, 12))
    self.assertEqual((int(trace["family"]), int(trace["env"]), int(trace["update"])), (7, 15, 12))
    self.assertEqual((int(trace["reason"]), str(trace["reason_name"])),
                     (R.BODY_CONTACT, "body_contact"))
    # The folder is full: nothing new; an update redone after a resume overwrites its own file.
    self.assertEqual(trace_files.write_early_ends(run_dir, metrics, first_update=20, max_traces=2), [])
    again = trace_files.write_early_ends(run_dir, metrics, first_update=10, max_traces=2)
    self.assertEqual([p.name for p in again], ["11_0.npz", "12_0.npz"])
    self.assertEqual(len(list((run_dir / run_folder.TRACES).glob("*.npz"))), 2)
    self.assertEqual(trace_files.write_early_ends(run_dir, {"reward/total": np.zeros(2)}, 0, 5), [])


def _update(update: int, **values) -> dict:
  """A healthy update record (plenty of events, no early ends, no burst), with `values` set."""
  record = {"kind": "update", "update": update, "episode/count": 10.0, "audit/early_ends": 0.0,
            "contact/slips": 900.0, "contact/stumbles": 500.0, "contact/touchdowns": 5000.0,
            "contact/liftoffs": 5000.0, "reward_share/tracking_lin_vel": 0.6,
            "reward_share/feet_air_time": 0.1, "reward_share/termination": 0.3,
            "tracking/lin_vel_error": 0.5 - 0.01 * update, "sync/max_reset_share": 0.02,
            "sync/mean_reset_share": 0.01, "sync/min_effective_families": 120.0}
  record.update(values)
  return record


class FlagsTest(absltest.TestCase):

  def test_healthy_run_has_no_flags(self):
    records = [{"kind": "recipe"}] + [_update(u) for u in range(1, 9)] + [{"kind": "eval"}]
    self.assertEqual(flags_lib.flags(records, config_lib.default()), [])
    self.assertEqual(flags_lib.flags([], config_lib.default()), [])

  def test_sentences(self):
    cfg = config_lib.default()  # min_event_count 200, early_end_steps 10, dominant_share 0.5
    records = [_update(u) for u in range(1, 9)]  # window: the last 8 // 4 = 2 updates (7, 8)
    records[6].update({"contact/slips": 30.0})
    records[7].update({"contact/slips": 44.0})  # mean over updates 7, 8: 37
    records[0].update({"audit/early_ends": 12.0, "episode/count": 20.0})  # 12 of 90 episodes
    records[1].update({"audit/early_ends": 0.0, "episode/count": 10.0})
    for r in records[6:]:  # feet air time dominates while the tracking error rises 0.40 -> 0.45
      r.update({"reward_share/feet_air_time": 0.64, "reward_share/tracking_lin_vel": 0.2})
    records[6]["tracking/lin_vel_error"], records[7]["tracking/lin_vel_error"] = 0.40, 0.45
    records[4].update({"sync/max_reset_share": 0.41, "sync/mean_reset_share": 0.02})
    records[5].update({"sync/max_reset_share": 0.2, "sync/mean_reset_share": 0.01})
    records[2]["sync/min_effective_families"] = 12.34  # of 128 training families
    self.assertEqual(flags_lib.flags(records, cfg), [
        "foot slips appeared only 37 times per batch, under the 200 threshold (mean over the "
        "last 2 updates)",
        "13% of episodes ended within 10 steps (early ends: 12 of 90 over the run; their traces "
        "are in traces/)",
        "reward term feet_air_time holds 64% of the absolute reward while tracking did not "
        "improve over the last 2 updates (xy velocity error 0.40 -> 0.45 m/s)",
        "41% of envs reset in the same step at update 5 (on average 2.0% per step; 2 updates "
        "had such a burst)",
        "a minibatch spanned only 12.3 effective families (inverse Simpson index) of 128 at "
        "update 3",
    ])

  def test_dominant_term_with_improving_tracking_is_fine(self):
    records = [_update(u, **{"reward_share/feet_air_time": 0.7}) for u in range(1, 9)]
    self.assertEqual(flags_lib.flags(records, config_lib.default()), [])  # error falls each update


# TRACE REPLAY IN MJX


def _early_end_config() -> config_lib.TrainConfig:
  """Episodes that end early: the fall height sits just under the standing trunk height."""
  cfg = config_lib.default()
  cfg.env.fall_height = 0.265
  cfg.audit.early_end_steps = 8
  return cfg


class ReplayTest(absltest.TestCase):

  def test_replay_reproduces_recorded_states(self):
    cfg = _early_end_config()
    env = env_lib.LocomotionEnv(cfg)
    manifest = families.make_manifest(cfg)
    num_envs, num_steps, num_traces = 16, 12, 3
    family = families.for_envs(manifest.train_params(), num_envs)  # env n: family n

    @jax.jit
    def rollout(keys):
      state = jax.vmap(env.reset)(keys, family)
      one_trace = jax.tree.map(lambda x: x[0], state.trace)

      def body(carry, key):
        state, picked = carry
        action = 1.5 * jax.random.normal(key, (num_envs, env.action_size))  # [N, A]
        state = jax.vmap(env.step)(state, action)
        picked = audit.pick_traces(picked, state.metrics["audit/early_end"] > 0.5, state.trace,
                                   state.family.index, state.reset_reason)
        return (state, picked), None

      (_, picked), _ = jax.lax.scan(
          body, (state, audit.empty_traces(num_traces, one_trace)),
          jax.random.split(jax.random.key(1), num_steps))
      return picked

    picked = jax.device_get(rollout(jax.random.split(jax.random.key(0), num_envs)))
    self.assertTrue(np.all(picked.valid), "the rollout should end some episodes early")
    metrics = {f"trace/{name}": np.asarray(getattr(picked, name))[None]
               for name in ("qpos", "qvel", "action", "family", "env", "reason", "length",
                            "first_step", "valid")}
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    paths = trace_files.write_early_ends(run_dir, metrics, first_update=0, max_traces=num_traces)
    self.assertLen(paths, num_traces)
    train_params = manifest.train_params()
    for path in paths:
      trace = trace_files.load_early_end(path)
      self.assertBetween(int(trace["length"]), 1, cfg.audit.early_end_steps)
      self.assertIn(str(trace["reason_name"]), ("fall", "body_contact", "joint_limit"))
      # The episode really ended: the last recorded trunk height is below the threshold, or
      # another termination ended it.
      if str(trace["reason_name"]) == "fall":
        self.assertLess(float(trace["qpos"][-1, 2]), cfg.env.fall_height + 1e-6)
      params = jax.tree.map(lambda x: x[int(trace["family"])], train_params)
      replayed = trace_files.replay_trace(env, params, trace)
      self.assertEqual(replayed.shape, trace["qpos"].shape)
      np.testing.assert_allclose(replayed, trace["qpos"], atol=1e-4, err_msg=str(path))


if __name__ == "__main__":
  absltest.main()
