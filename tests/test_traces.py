"""Tests for the early-end trace files of mjx_walk.evaluation.traces: writing a chunk's traces until
the folder is full, and replaying a recorded early end in MJX to the same states."""

from __future__ import annotations

import functools
import pathlib

from absl.testing import absltest
import jax
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.learn import audit
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families

R = endings.ResetReason
_ = False
X = True


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


class WriteTest(absltest.TestCase):

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
      # Recorded as the trainer records them: traces advanced from each step's final state, the
      # update's first early ends picked from every step's.
      state = jax.vmap(env.reset)(keys, family)
      trace = jax.vmap(functools.partial(
          audit.start_trace, num_steps=cfg.audit.early_end_steps))(state)

      def body(carry, key):
        state, trace = carry
        action = 1.5 * jax.random.normal(key, (num_envs, env.action_size))  # [N, A]
        nxt, final = jax.vmap(env.step_with_final)(state, action)
        trace = jax.vmap(audit.record_step)(trace, state, final)
        ended = audit.step_early_ends(trace, nxt.family.index, nxt.reset_reason, num_traces)
        return (nxt, trace), ended

      _, per_step = jax.lax.scan(body, (state, trace),
                                 jax.random.split(jax.random.key(1), num_steps))
      return audit.first_early_ends(per_step, num_traces)

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

  def test_replay_refuses_a_trace_longer_than_the_audit_keeps(self):
    env = env_lib.LocomotionEnv(_early_end_config())
    family = jax.tree.map(lambda x: x[0], families.make_manifest(env.config).train_params())
    with self.assertRaisesRegex(ValueError, r"trace length 9 is outside 1 \.\. "
                                r"audit.early_end_steps=8"):
      trace_files.replay_trace(env, family, {"length": 9, "qpos": np.zeros((10, 19)),
                                             "qvel": np.zeros((10, 18)),
                                             "action": np.zeros((9, 12))})


if __name__ == "__main__":
  absltest.main()
