"""Tests for mjx_walk.learn.trainer and the mjx_walk.train CLI on a tiny config."""

import functools
import json
import pathlib

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk import train as train_lib
from mjx_walk.learn import audit
from mjx_walk.learn import guard
from mjx_walk.learn import networks as networks_lib
from mjx_walk.learn import normalizer
from mjx_walk.learn import ppo
from mjx_walk.learn import records as records_lib
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import families

import commands
import configs
import runs

REPO = pathlib.Path(__file__).resolve().parent.parent


tiny_config = configs.tiny


def _rsl_rl_rate(lr: float, kl: float, ppo_cfg: config_lib.PPOConfig) -> float:
  """The KL-adaptive learning rate after one minibatch, in plain Python (rsl_rl's rule).

  KL above twice the target: the rate shrinks by 1.5 (not below the floor); below half the
  target: it grows by 1.5 (not above the ceiling); otherwise it stays.
  """
  desired = ppo_cfg.desired_kl
  floor, ceiling = ppo_cfg.min_learning_rate, ppo_cfg.max_learning_rate
  # A KL within rounding of a threshold would make the expected rate a coin toss.
  for threshold in (2.0 * desired, 0.5 * desired):
    assert abs(kl - threshold) > 1e-4 * threshold, (kl, threshold)
  if kl > 2.0 * desired:
    return max(floor, lr / 1.5)
  if kl < 0.5 * desired:
    return min(ceiling, lr * 1.5)
  return lr


def _expected_family_mixing(key: jax.Array, cfg: config_lib.TrainConfig, num_updates: int
                            ) -> tuple[jax.Array, np.ndarray, np.ndarray]:
  """The fewest distinct and effective training families in any minibatch of each update, as
  the design draws the minibatches, in NumPy.

  Each update splits the train key twice (the rollout's key, then the epochs'), shuffles the
  T x N samples once per epoch with `jax.random.permutation` and cuts the shuffle into M
  contiguous minibatches. Sample s comes from env s % N (the [T, N] rollout flattened), which
  trains in family (s % N) % F. Effective families: the inverse Simpson index (sum n)^2 / sum n^2.

  Returns:
    (the train key after the updates, int [U] fewest distinct families, float [U] fewest
    effective families).
  """
  t, n, f = cfg.unroll_length, cfg.num_envs, cfg.families.num_train_families
  fewest, effective = [], []
  for _ in range(num_updates):
    key, _ = jax.random.split(key)  # the rollout's key
    key, k_epochs = jax.random.split(key)
    distinct, inverse_simpson = [], []
    for k in jax.random.split(k_epochs, cfg.ppo.num_epochs):
      samples = np.asarray(jax.random.permutation(k, t * n)).reshape(cfg.ppo.num_minibatches, -1)
      counts = np.stack([np.bincount(row, minlength=f) for row in (samples % n) % f])  # [M, F]
      distinct.append((counts > 0).sum(axis=1).min())
      inverse_simpson.append((counts.sum(axis=1) ** 2 / (counts ** 2).sum(axis=1)).min())
    fewest.append(min(distinct))
    effective.append(min(inverse_simpson))
  return key, np.array(fewest), np.array(effective)


def _sgd_pieces() -> tuple[trainer_lib.Trainer, trainer_lib._Parts, networks_lib.ActorCriticParams]:
  """The tiny trainer (built, nothing compiled), the static pieces its SGD steps close over on one
  device, and fresh parameters."""
  trainer = trainer_lib.make_trainer(tiny_config())
  spec = trainer.env.observation_spec()
  parts = trainer_lib._Parts(
      config=trainer.config, env=trainer.env, networks=trainer.networks,
      optimizer=trainer.optimizer, loss_config=ppo.LossConfig(), observation_spec=spec,
      env_families=None, num_families=trainer.config.families.num_train_families,
      axis_name=None, local_envs=trainer.config.num_envs)
  params = trainer.networks.init(jax.random.key(0), spec["policy"].shape[-1],
                                 spec["critic"].shape[-1])
  return trainer, parts, params


def _on_policy_batch(trainer: trainer_lib.Trainer, params: networks_lib.ActorCriticParams, *,
                     size: int, log_prob_shift: np.ndarray | float = 0.0) -> ppo.Batch:
  """`size` random samples with actions drawn from `params`' policy and their log-probs under
  it (plus `log_prob_shift`: a behaviour policy that was not this one)."""
  spec = trainer.env.observation_spec()
  rng = np.random.default_rng(0)
  policy_obs = jnp.asarray(rng.normal(size=(size, spec["policy"].shape[-1])), jnp.float32)
  mean, std = trainer.networks.policy(params, policy_obs)
  actions = mean + std * jnp.asarray(rng.normal(size=mean.shape), jnp.float32)
  return ppo.Batch(
      policy_obs=policy_obs,
      critic_obs=jnp.asarray(rng.normal(size=(size, spec["critic"].shape[-1])), jnp.float32),
      actions=actions, log_probs=networks_lib.log_prob(mean, std, actions) + log_prob_shift,
      values=jnp.asarray(rng.normal(size=size), jnp.float32),
      advantages=jnp.asarray(rng.normal(size=size), jnp.float32),
      returns=jnp.asarray(rng.normal(size=size), jnp.float32))


def setUpModule():
  runs.warm()  # the tiny config's programs, compiled once for every worker


class TrainerTest(chex.TestCase):

  def test_two_chunks(self):
    # The tiny config as it is, so that the chunk is the program every tiny run compiles (the
    # rate each minibatch's KL must give is derived in `test_the_rate_follows_every_minibatchs_kl`).
    cfg = tiny_config()
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(cfg.seed))
    params_before = jax.device_get(carry.train.params)
    lr_before = float(ppo.get_learning_rate(carry.train.opt_state))
    key_before = jax.random.wrap_key_data(np.array(jax.random.key_data(carry.train.key)))
    # Episode clocks start staggered so that timeouts do not arrive for every env at once.
    start = np.asarray(carry.env.task.step)
    self.assertGreater(len(np.unique(start)), 1)
    self.assertTrue(np.all((start >= 0) & (start < trainer.env.episode_steps)))

    records, kls, rates, mixing = [], [], [], []
    for _ in range(2):
      carry, metrics = trainer.train_chunk(carry)
      metrics = jax.device_get(metrics)
      chex.assert_tree_all_finite(metrics)
      chex.assert_tree_shape_prefix(metrics, (cfg.updates_per_chunk,))
      records.append(records_lib.summarize(metrics))
      kls.extend(metrics["loss/approx_kl"])
      rates.extend(metrics["ppo/learning_rate"])
      mixing.append((metrics["families/min_per_minibatch"],
                     metrics["sync/min_effective_families"]))

    # Family mixing per update, as the design draws the minibatches (`_expected_family_mixing`).
    # Catches families counted from the wrong env or sample, over the wrong minibatches, or
    # minibatches that are not the shuffle of the train key. The key the reference ends on is
    # the trainer's, so the reference drew the same shuffles. (The exact contact and reset
    # shares of an update are checked in CollectTest, against its rollout.)
    k = cfg.updates_per_chunk
    key_after, fewest, effective = _expected_family_mixing(key_before, cfg, 2 * k)
    np.testing.assert_array_equal(jax.random.key_data(key_after),
                                  jax.random.key_data(carry.train.key))
    np.testing.assert_array_equal(np.concatenate([m[0] for m in mixing]), fewest)
    np.testing.assert_allclose(np.concatenate([m[1] for m in mixing]), effective, rtol=1e-6)
    for chunk, record in enumerate(records):
      self.assertEqual(record["families/min_per_minibatch"],
                       fewest[chunk * k:(chunk + 1) * k].min())
      shares = [record[f"reward_share/{name}"] for name in trainer.env.reward_scales]
      self.assertAlmostEqual(sum(shares), 1.0, places=5)
    # Env i trains in family i % F.
    np.testing.assert_array_equal(carry.env.family.index, np.arange(cfg.num_envs) % 4)
    # One trace for both chunks (the chex guard inside make_trainer would also raise).
    self.assertEqual(trainer.train_chunk._cache_size(), 1)
    self.assertEqual(trainer_lib.env_steps(carry.train, cfg), 2 * cfg.env_steps_per_chunk)
    self.assertEqual(int(carry.train.update_step), 2 * cfg.updates_per_chunk)
    chex.assert_trees_all_equal_shapes(params_before, carry.train.params)
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), params_before,
                           jax.device_get(carry.train.params))
    self.assertTrue(all(jax.tree.leaves(changed)))  # every actor and critic leaf was trained
    # The normalizer saw exactly one observation per env step.
    self.assertEqual(float(carry.train.normalizer.count), 2 * cfg.env_steps_per_chunk)
    # The reset histogram by family holds every episode end of the update, and its falls are
    # the fall histograms' entries.
    by_family = metrics["audit/resets_by_family"]  # [K, F, R]
    np.testing.assert_allclose(by_family.sum(axis=(1, 2)), metrics["episode/count"])
    falls = metrics["reset/fall"]  # [K]
    np.testing.assert_allclose(by_family[..., 0].sum(axis=1), falls)
    np.testing.assert_allclose(metrics["audit/fall_height_counts"].sum(axis=1), falls)
    np.testing.assert_allclose(metrics["audit/fall_tilt_counts"].sum(axis=1), falls)
    # Traces are valid only for early ends, and as many as the update had, up to the limit.
    valid = metrics["trace/valid"]  # [K, S]
    np.testing.assert_array_equal(
        valid.sum(axis=1), np.minimum(metrics["audit/early_ends"], cfg.audit.traces_per_update))
    # Episodes are 5 control steps long, so each update of 6 steps ends every env once or more.
    for record in records:
      self.assertGreaterEqual(record["episode/count"], cfg.num_envs)
      shares = sum(record[f"reset/{name}"] for name in endings.REASON_NAMES)
      self.assertAlmostEqual(shares, 1.0, places=5)
      self.assertGreater(record["reset/timeout"], 0.0)
    # The last update's policy std: the mean of exp(log_std) of the final parameters (floored at
    # 1e-3, far below them). Catches a std read from other parameters or another update.
    log_std = np.asarray(carry.train.params.actor["params"]["log_std"], np.float64)
    self.assertGreater(log_std.min(), np.log(1e-3))
    self.assertAlmostEqual(float(metrics["policy/std_mean"][-1]), np.exp(log_std).mean(),
                           delta=1e-6)
    # desired_kl > 0: the rule ran inside the jitted chunk, and each update records the rate its
    # last minibatch left (the last one is the optimizer's now). Catches an adaptation that does
    # not run in the chunk, or a recorded rate read before the update's steps.
    self.assertAlmostEqual(float(ppo.get_learning_rate(carry.train.opt_state)), float(rates[-1]),
                           delta=1e-9)
    self.assertGreater(np.max(np.abs(np.asarray(rates) - lr_before)), 1e-6, rates)

  def test_chunk_metrics_keys(self):
    cfg = tiny_config()
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(0))
    shapes = jax.eval_shape(trainer.train_chunk, carry)[1]
    k = cfg.updates_per_chunk
    scalars = ["loss/approx_kl", "loss/clipfrac", "loss/explained_variance", "policy/std_mean",
               "ppo/learning_rate", "reward/total", "reward/tracking_lin_vel",
               "episode/return_sum", "reset/fall", "reset/timeout", "reset/nonfinite",
               "audit/early_ends", "contact/touchdowns", "contact/liftoffs", "contact/slips",
               "contact/stumbles", "contact/stumble_touchdowns", "contact/body_contacts",
               "contact/air_time_sum", "contact/air_time_p90", "sync/max_reset_share",
               "sync/mean_reset_share", "sync/min_effective_families",
               "families/min_per_minibatch", "loss/grad_norm"]
    scalars += [f"contact/ground_share/{foot}" for foot in ("FR", "FL", "RR", "RL")]
    scalars += [f"reward_share/{name}" for name, scale in cfg.reward.scales().items() if scale]
    for key in scalars:
      self.assertIn(key, shapes)
      self.assertEqual(shapes[key].shape, (k,), key)
    nq, nv = trainer.env.model.nq, trainer.env.model.nv
    s, steps, a = cfg.audit.traces_per_update, cfg.audit.early_end_steps, trainer.env.action_size
    arrays = {
        "audit/resets_by_family": (k, cfg.families.num_train_families, 5),
        "audit/fall_height_counts": (k, 18), "audit/fall_tilt_counts": (k, 18),
        "trace/qpos": (k, s, steps + 1, nq), "trace/qvel": (k, s, steps + 1, nv),
        "trace/action": (k, s, steps, a), "trace/family": (k, s), "trace/env": (k, s),
        "trace/reason": (k, s), "trace/length": (k, s), "trace/first_step": (k, s),
        "trace/valid": (k, s), "guard/nonfinite": (k, len(guard.GUARDED)),
    }
    for key, shape in arrays.items():
      self.assertIn(key, shapes)
      self.assertEqual(shapes[key].shape, shape, key)

  def test_adapted_rate_applies_to_the_minibatch_it_was_measured_on(self):
    # One SGD step of the chunk (`_minibatch_step`, jitted as inside it) on a minibatch whose
    # behaviour log-probs are the current policy's: its KL is 0 < desired_kl / 2, so the rule
    # raises the rate from 1e-3 to 1.5e-3 for this very step. Adam's first step moves each
    # parameter by lr * g / (|g| + eps), so |delta| is the rate used wherever |g| >> eps:
    # 1.5e-3 here, 1e-3 if the new rate took effect one minibatch late.
    trainer, parts, params = _sgd_pieces()
    self.assertEqual(trainer.config.ppo.learning_rate, 1e-3)
    batch = _on_policy_batch(trainer, params, size=16)
    (after, opt_state), metrics = jax.jit(functools.partial(trainer_lib._minibatch_step, parts))(
        (params, trainer.optimizer.init(params)), batch)
    self.assertEqual(float(metrics["loss/approx_kl"]), 0.0)
    self.assertAlmostEqual(float(ppo.get_learning_rate(opt_state)), 1.5e-3, delta=1e-9)
    moved = np.concatenate([np.abs(a - b).ravel() for a, b in zip(
        jax.tree.leaves(jax.device_get(after.actor)), jax.tree.leaves(params.actor))])
    self.assertLessEqual(moved.max(), 1.5e-3 * (1 + 1e-4))
    self.assertGreaterEqual(np.quantile(moved, 0.9), 1.5e-3 * (1 - 1e-3))

  def test_the_rate_follows_every_minibatchs_kl(self):
    # Two epochs of the chunk's `_epoch_step` (jitted), two minibatches each: the first on a
    # rollout of the current policy (small KLs: the rate grows), the second on one whose
    # behaviour log-probs are off by N(0, 0.5) (KLs far above 2 * desired_kl: it shrinks). The
    # rate after each epoch is rsl_rl's rule (`_rsl_rl_rate`) applied to each minibatch's
    # recorded KL in turn. Catches an adaptation that does not run per minibatch (once per
    # epoch, update or chunk), reads another KL, or inverts or mis-scales the rule.
    trainer, parts, params = _sgd_pieces()
    size = parts.local_batch
    epoch = jax.jit(functools.partial(trainer_lib._epoch_step, parts))
    on_policy = _on_policy_batch(trainer, params, size=size)
    noise = np.random.default_rng(1).normal(0.0, 0.5, size).astype(np.float32)
    carry = (params, trainer.optimizer.init(params))
    lr = trainer.config.ppo.learning_rate
    for k, behaviour_shift in enumerate((None, noise)):
      batch = on_policy if behaviour_shift is None else _on_policy_batch(
          trainer, carry[0], size=size, log_prob_shift=behaviour_shift)
      carry, metrics = epoch(batch, carry, jax.random.key(k))
      kls = np.asarray(metrics["loss/approx_kl"])
      chex.assert_shape(kls, (trainer.config.ppo.num_minibatches,))
      for kl in kls:
        lr = _rsl_rl_rate(lr, float(kl), trainer.config.ppo)
      self.assertAlmostEqual(float(ppo.get_learning_rate(carry[1])), lr, delta=1e-6 * lr,
                             msg=f"epoch {k}, KLs {kls}")
      if behaviour_shift is not None:
        self.assertTrue(np.all(kls > 2 * trainer.config.ppo.desired_kl), kls)
    self.assertLess(lr, trainer.config.ppo.learning_rate * 1.5 ** 2)

  def test_divergence_guard_names_what_went_non_finite(self):
    cfg = tiny_config()
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(0))
    carry, metrics = trainer.train_chunk(carry)
    self.assertIsNone(guard.first_divergence(jax.device_get(metrics)))
    np.testing.assert_array_equal(metrics["guard/nonfinite"], False)
    # One NaN in the critic's output bias: the values, hence the advantages and every loss term
    # of the first minibatch, go NaN; the global-norm clip spreads the NaN gradient to every
    # parameter and Adam moment. The normalizer sees only observations and stays finite.
    critic = carry.train.params.critic
    poisoned = jax.tree_util.tree_map_with_path(
        lambda path, x: x.at[0].set(jnp.nan) if "out" in jax.tree_util.keystr(path)
        and x.ndim == 1 else x, critic)
    carry = carry.replace(train=carry.train.replace(
        params=carry.train.params.replace(critic=poisoned)))
    carry, metrics = trainer.train_chunk(carry)
    k, names = guard.first_divergence(jax.device_get(metrics))
    self.assertEqual(k, 0)
    self.assertEqual(names, [name for name in guard.GUARDED if name != "normalizer"])

  def test_first_divergence_reads_the_first_flagged_update(self):
    flags = np.zeros((3, len(guard.GUARDED)), bool)
    flags[1, guard.GUARDED.index("params/actor")] = True
    flags[2, :] = True
    self.assertEqual(guard.first_divergence({"guard/nonfinite": flags}),
                     (1, ["params/actor"]))

  def test_invalid_config_fails_before_compiling(self):
    cfg = tiny_config()
    cfg.num_envs = 9
    with self.assertRaisesRegex(ValueError, r"num_envs=9 .*num_minibatches=2"):
      trainer_lib.make_trainer(cfg)


class CollectTest(chex.TestCase):

  def test_timeouts_bootstrap_from_the_true_final_observation(self):
    """Catches a timeout bootstrapped from the next episode's first observation.

    After an auto-reset, `obs` is the next episode's first frame; the value of a truncated step
    must be that of the frame the episode ended on. Both ways to get this wrong are caught: the
    trainer reading `next_env.obs` instead of `next_env.final_obs`, and the env storing the
    reset observation in `final_obs`. The reference replays the rollout with the env's own step
    and gets each true final frame by taking the same step again with the episode clock turned
    back, so that the time limit does not fire and nothing resets.
    """
    # 5-step episodes, 6-step rollouts, staggered clocks: many timeouts. (The tiny config as it
    # is, as in every test of this class, so that they all run one compiled rollout, and the
    # chunk's program is the one TrainerTest compiles.)
    cfg = tiny_config()
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(3))
    # Besides the time limit, only the command schedule and the pushes read the episode clock; a
    # constant command and no pushes make the replay with the clock turned back the same step.
    fam = carry.env.family
    env_state = carry.env.replace(family=fam.replace(
        commands=jnp.broadcast_to(fam.commands[:, :1], fam.commands.shape),
        push_forces=jnp.zeros_like(fam.push_forces)))
    after, traj, _ = trainer.collect(carry.replace(env=env_state))
    train = after.train
    traj = jax.device_get(traj)
    num_steps, num_envs = traj.reward.shape
    truncated, terminated = np.asarray(traj.truncated), np.asarray(traj.terminated)
    self.assertGreaterEqual(truncated.sum(), num_envs)

    step = jax.jit(jax.vmap(trainer.env.step))
    update = jax.jit(normalizer.update)
    value = jax.jit(lambda norm, obs: trainer.networks.value(
        train.params, normalizer.normalize(norm, obs)["critic"]))
    norm = carry.train.normalizer
    state = env_state
    for t in range(num_steps):
      action = jnp.asarray(traj.action[t])
      nxt = step(state, action)
      # The replay is the rollout: same episode ends, rewards and normalised observations.
      np.testing.assert_array_equal(nxt.truncated, truncated[t])
      np.testing.assert_array_equal(nxt.terminated, terminated[t])
      np.testing.assert_allclose(nxt.reward, traj.reward[t], rtol=1e-4, atol=1e-6)
      norm = update(norm, state.obs)  # the rollout normalises with stats that include obs_t
      np.testing.assert_allclose(value(norm, state.obs), traj.value[t], rtol=1e-3, atol=1e-3)

      # The same step from the same state with the clock at 0: no timeout, no reset, so its
      # observation is the frame the episode ended on.
      rewound = state.replace(task=state.task.replace(
          step=jnp.where(truncated[t], 0, state.task.step)))
      continued = step(rewound, action)
      ended = truncated[t]
      np.testing.assert_array_equal(
          np.asarray(continued.reset_reason)[ended], endings.ResetReason.NONE)
      true_final = value(norm, continued.obs)  # [N]
      next_first = value(norm, nxt.obs)  # [N]
      if ended.any():
        # The two candidates differ by far more than the tolerance below, so it can tell them
        # apart.
        self.assertGreater(np.min(np.abs(true_final - next_first)[ended]), 0.05)
        np.testing.assert_allclose(
            traj.final_value[t][ended], np.asarray(true_final)[ended], rtol=1e-3, atol=1e-3,
            err_msg=f"step {t}: a timeout's final_value is not V(true final observation)")
        # Env level: final_obs is the frame the episode ended on, obs the next one's first.
        chex.assert_trees_all_close(
            jax.tree.map(lambda x: x[ended], nxt.final_obs),
            jax.tree.map(lambda x: x[ended], continued.obs), rtol=1e-5, atol=1e-5)
        for key in nxt.obs:
          self.assertFalse(np.allclose(nxt.obs[key][ended], nxt.final_obs[key][ended]), key)
      # Where the episode goes on, final_obs is obs, and final_value its value.
      going = ~(truncated[t] | terminated[t])
      chex.assert_trees_all_equal(
          jax.tree.map(lambda x: x[going], nxt.final_obs),
          jax.tree.map(lambda x: x[going], nxt.obs))
      np.testing.assert_allclose(
          traj.final_value[t][going], np.asarray(next_first)[going], rtol=1e-3, atol=1e-3)
      state = nxt
    # The replayed statistics are the rollout's.
    chex.assert_trees_all_close(norm, train.normalizer, rtol=1e-3, atol=1e-5)

  def test_traces_follow_each_episode_and_flag_early_ends(self):
    """Catches episode traces that miss an episode end, count from the wrong step or record the
    state after the auto-reset, and early-end flags that disagree with the episode lengths."""
    cfg = configs.tiny()  # 5-step episodes; early: within audit.early_end_steps = 10 steps
    early = cfg.audit.early_end_steps
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(4))
    # Env 0 starts 0.2 m lower, below the fall height, so its first step ends its episode
    # early; the other episodes run into the 5-step time limit (not early ends: no failure).
    carry = carry.replace(env=carry.env.replace(data=carry.env.data.replace(
        qpos=carry.env.data.qpos.at[0, 2].add(-0.2))))
    np.testing.assert_array_equal(carry.trace.length, 0)
    after, traj, early_ends = jax.device_get(trainer.collect(carry))
    done = np.asarray(traj.terminated | traj.truncated)  # [T, N]
    # Reference: steps since each env's last episode end, counted from the rollout's start.
    since_end = np.zeros(cfg.num_envs, np.int32)  # steps of the episode before this step
    for t in range(cfg.unroll_length):
      length = since_end + 1
      np.testing.assert_array_equal(
          traj.early_end[t], traj.terminated[t] & (length <= early), err_msg=f"step {t}")
      since_end = np.where(done[t], 0, length)
    self.assertTrue(traj.early_end[0, 0], "env 0 should end early on its first step")
    # The traces count the steps of each env's current episode; an episode that ended on the
    # last step keeps its trace until the next step.
    np.testing.assert_array_equal(after.trace.length, length)
    # Where the episode goes on and fits the trace, its last row is the current state.
    going = np.flatnonzero(~done[-1] & (length <= early))
    self.assertNotEmpty(going)
    np.testing.assert_array_equal(np.asarray(after.trace.qpos)[going, length[going]],
                                  np.asarray(after.env.data.qpos)[going])
    # Early ends are picked in step order, within a step by env; at most traces_per_update.
    valid = np.asarray(early_ends.valid)  # [T, S]
    np.testing.assert_array_equal(valid.sum(axis=1),
                                  np.minimum(traj.early_end.sum(axis=1), valid.shape[1]))
    for t, s in zip(*np.nonzero(valid)):
      env = int(early_ends.env[t, s])
      self.assertTrue(traj.early_end[t, env])
      self.assertEqual(int(early_ends.reason[t, s]), int(traj.reset_reason[t, env]))

  def test_the_audit_counts_the_rollouts_contacts_resets_and_families(self):
    """Catches contact signals wired the wrong way round or a step late between the env, the
    rollout and the audit: `contact` and `last_contact` swapped (in the env's signals or in the
    audit's inputs) count touchdowns as lift-offs and read the ground shares at the start of the
    step. Also catches reset and reward shares that are not the rollout's, and family mixing
    that is not the fewest over every epoch's minibatches.

    The reference: each foot's contact is its sphere's lowest point within
    `env.foot_contact_distance` of the floor, read from the physics state at the start of the
    rollout and, for envs still running, at its end; in between, a step starts with the contacts
    the previous step ended with. The chunk's first update, from the same carry, collects the
    same rollout, so its audit must give the counts NumPy takes of the rollout's signals.
    """
    cfg = configs.tiny()
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(5))
    env = trainer.env
    feet = np.asarray(env.robot.foot_geom_ids)
    radius = np.asarray(env.model.geom_size)[feet, 0]
    on_ground = lambda data: (np.asarray(data.geom_xpos)[:, feet, 2] - radius
                              < cfg.env.foot_contact_distance)  # [N, F]
    start = on_ground(carry.env.data)
    key_before = jax.random.wrap_key_data(np.array(jax.random.key_data(carry.train.key)))
    after, traj, _ = jax.device_get(trainer.collect(carry))
    contact = np.asarray(traj.signals.contact)  # [T, N, F], at the end of each step
    last = np.asarray(traj.signals.last_contact)  # [T, N, F], at its start
    done = np.asarray(traj.terminated | traj.truncated)  # [T, N]
    # Feet change contact within the first step, so the two ends of a step can be told apart.
    self.assertTrue((contact[0] != last[0]).any())
    np.testing.assert_array_equal(last[0], start)
    going = ~done[-1]
    self.assertTrue(going.any())
    np.testing.assert_array_equal(contact[-1][going], on_ground(after.env.data)[going])
    for t in range(cfg.unroll_length - 1):
      np.testing.assert_array_equal(last[t + 1][~done[t]], contact[t][~done[t]],
                                    err_msg=f"step {t + 1}")

    carry, metrics = trainer.train_chunk(carry)  # donates the carry it is given
    metrics = jax.device_get(metrics)
    first = {key: np.asarray(value)[0] for key, value in metrics.items()}
    touchdowns, liftoffs = np.sum(contact & ~last), np.sum(~contact & last)
    self.assertNotEqual(touchdowns, liftoffs)
    self.assertEqual(first["contact/touchdowns"], touchdowns)
    self.assertEqual(first["contact/liftoffs"], liftoffs)
    self.assertFalse(np.array_equal(contact.mean(axis=(0, 1)), last.mean(axis=(0, 1))))
    for i, foot in enumerate(env.foot_names):
      self.assertAlmostEqual(first[f"contact/ground_share/{foot}"], contact[..., i].mean(),
                             delta=1e-6, msg=foot)
    # Reset synchrony: the share of envs whose episode ended, per step.
    ended = done.mean(axis=1)  # [T]
    self.assertAlmostEqual(first["sync/max_reset_share"], ended.max(), delta=1e-6)
    self.assertAlmostEqual(first["sync/mean_reset_share"], ended.mean(), delta=1e-6)
    # Reward shares: each term's share of the summed absolute reward terms.
    magnitude = {key[len("reward/"):]: np.abs(np.asarray(value, np.float64)).sum()
                 for key, value in traj.metrics.items() if key.startswith("reward/")}
    total = sum(magnitude.values())
    for name, value in magnitude.items():
      self.assertAlmostEqual(first[f"reward_share/{name}"], value / total, delta=1e-5, msg=name)
    # Family mixing of both updates, the fewest over 2 epochs of 2 minibatches each.
    key_after, fewest, effective = _expected_family_mixing(key_before, cfg, cfg.updates_per_chunk)
    np.testing.assert_array_equal(jax.random.key_data(key_after),
                                  jax.random.key_data(carry.train.key))
    np.testing.assert_array_equal(metrics["families/min_per_minibatch"], fewest)
    np.testing.assert_allclose(metrics["sync/min_effective_families"], effective, rtol=1e-6)


class RawObservationTest(absltest.TestCase):

  def test_without_normalization_the_networks_see_raw_observations(self):
    """Catches a trainer that ignores `ppo.normalize_observations=False`: one that still updates
    the normalizer's statistics, or still standardises (and clips at 10) what the policy and the
    critic see."""
    cfg = configs.tiny(ppo__normalize_observations=False)
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(0))
    # Env 0 starts with observations far outside the normalizer's clip at 10.
    policy = np.array(carry.env.obs["policy"])
    critic = np.array(carry.env.obs["critic"])
    policy[0, :3], critic[0, :3] = 25.0, -40.0
    carry = carry.replace(env=carry.env.replace(obs={"policy": jnp.asarray(policy),
                                                     "critic": jnp.asarray(critic)}))
    after, traj, _ = jax.device_get(trainer.collect(carry))
    # The statistics stay the identity they start as: mean 0, variance 1, count 0.
    stats = after.train.normalizer
    self.assertEqual(float(stats.count), 0.0)
    for name, width in (("policy", policy.shape[1]), ("critic", critic.shape[1])):
      np.testing.assert_array_equal(stats.mean[name], np.zeros(width), err_msg=name)
      np.testing.assert_array_equal(stats.var[name], np.ones(width), err_msg=name)
    # The first step's action and value come from the raw observations.
    np.testing.assert_array_equal(traj.policy_obs[0], policy)
    np.testing.assert_array_equal(traj.critic_obs[0], critic)
    np.testing.assert_allclose(traj.value[0], trainer.networks.value(carry.train.params, critic),
                               rtol=1e-5, atol=1e-6)


class FamilyCountsTest(absltest.TestCase):

  def test_counts_samples_per_family(self):
    # N = 4 envs, F = 2 families: env e is in family e % 2; sample s came from env s % 4.
    samples = np.array([[0, 4, 8, 2],    # envs 0, 0, 0, 2 -> family 0 only
                        [1, 3, 5, 7],    # envs 1, 3, 1, 3 -> family 1 only
                        [0, 1, 6, 11],   # envs 0, 1, 2, 3 -> both, equally
                        [0, 2, 4, 3]])   # envs 0, 2, 0, 3 -> 3 from family 0, 1 from family 1
    counts = audit.family_counts(samples, num_envs=4, num_families=2)
    np.testing.assert_array_equal(counts, [[4, 0], [0, 4], [2, 2], [3, 1]])


class TrainCliTest(absltest.TestCase):

  def test_run_writes_manifest_and_ledger(self):
    cfg = tiny_config()
    cfg.panel.every_chunks = 1
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "run"
    result = runner.run(cfg, run_dir)
    self.assertEqual(config_lib.from_dict(json.loads((run_dir / "config.json").read_text())), cfg)
    manifest = run_folder.RunFolder(run_dir).read_manifest()
    self.assertEqual(manifest, families.make_manifest(cfg))

    records = ledger.read_run(run_dir)
    kinds = [r["kind"] for r in records]
    # The recipe first, one update record per update, an evaluation after chunk 1 (of 2) and
    # one at the end.
    num_updates = cfg.num_chunks * cfg.updates_per_chunk
    self.assertEqual(kinds, ["recipe"] + ["update"] * 2 + ["eval"] + ["update"] * 2 + ["eval"])
    self.assertEqual(records[0]["manifest_hash"], manifest.hash)
    updates = ledger.of_kind(records, "update")
    self.assertEqual([r["update"] for r in updates], list(range(1, num_updates + 1)))
    self.assertEqual(updates[-1]["env_steps"], cfg.num_chunks * cfg.env_steps_per_chunk)
    for key in ("perf/sps", "episode/return", "episode/length", "reset/fall", "reward/pose",
                "advantage/mean", "advantage/std", "loss/approx_kl", "loss/clipfrac",
                "loss/explained_variance", "policy/std_mean", "ppo/learning_rate",
                "families/min_per_minibatch", "device/memory_bytes", "audit/early_ends",
                "audit/early_end_share", "contact/slips", "contact/stumbles",
                "contact/air_time_mean", "contact/ground_share/FR", "reward_share/pose",
                "sync/max_reset_share", "sync/min_effective_families"):
      self.assertIn(key, updates[0])
    # Non-scalar audits are JSON: the reset reasons per family, sparse, and the histograms.
    for record in updates:
      by_family = record["audit/resets_by_family"]
      self.assertEqual(sum(n for reasons in by_family.values() for n in reasons.values()),
                       record["episode/count"])
      self.assertTrue(set(by_family) <= {str(f) for f in range(cfg.families.num_train_families)})
      self.assertLen(record["audit/fall_height_counts"], 18)
      self.assertLen(record["audit/fall_tilt_counts"], 18)
      self.assertFalse(any(key.startswith("trace/") for key in record))
    evals = ledger.of_kind(records, "eval")
    self.assertEqual([r["update"] for r in evals], [2, 4])
    self.assertEqual(evals[-1]["panel_hash"], manifest.panel_hash)
    self.assertEqual(sorted(evals[-1]["strata"]), sorted(cfg.panel.strata))

    # What the library returns, against what the run wrote (read back from disk): catches a
    # result that is not the final evaluation, a policy of another update (the carry before the
    # last chunk, the initial parameters) or that misses the normalizer.
    self.assertEqual(result.run_dir.resolve(), run_dir.resolve())
    self.assertFalse(result.stopped)
    self.assertEqual(result.env_steps, cfg.num_chunks * cfg.env_steps_per_chunk)
    self.assertEqual(result.evaluation["update"], evals[-1]["update"])
    self.assertEqual(result.evaluation["panel_hash"], evals[-1]["panel_hash"])
    for name, stratum in evals[-1]["strata"].items():
      self.assertAlmostEqual(result.evaluation["strata"][name]["fall_rate"], stratum["fall_rate"])
    saved = policy_lib.load(run_dir)
    self.assertEqual((result.policy.step, saved.step), (num_updates, num_updates))
    chex.assert_trees_all_equal(result.policy.params, saved.params)
    chex.assert_shape(result.policy.act(np.zeros(saved.observation_spec.shape, np.float32)),
                      (saved.networks.actor.action_size,))
    saved = json.loads((run_dir / "eval" / "4.json").read_text())
    self.assertEqual(saved, evals[-1])

  def test_progress_line(self):
    record = {"episode/return": 3.25, "episode/length": 812.0, "episode/count": 40.0,
              "reward/total": 0.0045, "reset/fall": 0.25, "reset/timeout": 0.75}
    line = records_lib.format_progress(98_304, 6_045_696, 5123.4, record)
    self.assertIn("steps      98,304/6,045,696", line)
    self.assertIn("sps   5,123", line)
    self.assertIn("return     3.25  len  812.0", line)
    self.assertIn("ends    40  [fall=25% timeout=75%]", line)
    empty = dict(record, **{"episode/count": 0.0, "episode/return": float("nan")})
    self.assertIn("return        -  len      -", records_lib.format_progress(1, 2, 3.0, empty))

  def test_cli_rejects_bad_override_before_compiling(self):
    ran = commands.run_main(train_lib.main, f"--config={REPO / 'experiments/recipes/go2_flat.py'}",
                            "--config.num_envs=1001", "--run_dir=/nonexistent/never")
    self.assertEqual(ran.status, 2)
    self.assertEqual(ran.err, "error: config.num_envs=1001 is invalid: it must be divisible by "
                     "ppo.num_minibatches=4.\n")
    self.assertFalse(pathlib.Path("/nonexistent/never").exists())

if __name__ == "__main__":
  absltest.main()
