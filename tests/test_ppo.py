"""Tests for mjx_walk.learn.ppo: the GAE contract, the clipped loss, and the learning-rate plumbing."""

from __future__ import annotations

import functools

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mjx_walk.learn import networks
from mjx_walk.learn import ppo

_GAMMA, _LAMBDA = 0.99, 0.95


def _reference_gae(
    rewards, values, bootstrap, terminated, truncated, truncation_values, gamma, lam
):
  """Plain per-env reverse loop in float64, written from the GAE contract (docs/architecture.md)."""
  num_steps, num_envs = rewards.shape
  advantages = np.zeros((num_steps, num_envs))
  for n in range(num_envs):
    next_advantage = 0.0
    for t in reversed(range(num_steps)):
      if terminated[t, n]:
        next_value = 0.0  # a fall has no future
      elif truncated[t, n]:
        next_value = truncation_values[t, n]  # timeout: V(true final obs)
      elif t + 1 < num_steps:
        next_value = values[t + 1, n]
      else:
        next_value = bootstrap[n]
      delta = rewards[t, n] + gamma * next_value - values[t, n]
      done = terminated[t, n] or truncated[t, n]
      next_advantage = delta + (0.0 if done else gamma * lam * next_advantage)
      advantages[t, n] = next_advantage
  return advantages, advantages + values


class GaeTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_architecture_hand_computed_case(self):
    # docs/architecture.md, Invariants: gamma 0.99, lambda 0.95, two envs (columns A, B),
    # three steps, rewards 1, V = [5, 4, 3], bootstrap 2; B terminates on step 3.
    rewards = jnp.ones((3, 2))  # [T, N]
    values = jnp.array([[5.0, 5.0], [4.0, 4.0], [3.0, 3.0]])  # [T, N]
    bootstrap = jnp.array([2.0, 2.0])  # [N]
    terminated = jnp.array([[False, False], [False, False], [False, True]])  # [T, N]
    truncated = jnp.zeros((3, 2), bool)  # [T, N]
    advantages, returns = self.variant(ppo.compute_gae)(
        rewards, values, bootstrap, terminated, truncated, jnp.zeros((3, 2)), _GAMMA, _LAMBDA
    )
    # Env A, step 3: delta_3 = 1 + 0.99 * 2 - 3 = -0.02 = A_3 (nothing after it).
    # Env A, step 2: delta_2 = 1 + 0.99 * 3 - 4 = -0.03;
    #   A_2 = -0.03 + 0.99 * 0.95 * (-0.02) = -0.03 - 0.01881 = -0.04881 (documented: -0.049).
    # Env A, step 1: delta_1 = 1 + 0.99 * 4 - 5 = -0.04;
    #   A_1 = -0.04 + 0.9405 * (-0.04881) = -0.085905805.
    # Env B, step 3 terminates: delta_3 = 1 + 0 - 3 = -2.0 = A_3 (bootstrap 2 ignored).
    # Env B, step 2: A_2 = -0.03 + 0.9405 * (-2.0) = -0.03 - 1.881 = -1.911.
    # Env B, step 1: A_1 = -0.04 + 0.9405 * (-1.911) = -1.8372955.
    np.testing.assert_allclose(advantages[2, 0], -0.02, atol=1e-6)
    np.testing.assert_allclose(advantages[1, 0], -0.04881, atol=1e-6)
    np.testing.assert_allclose(advantages[2, 1], -2.0, atol=1e-6)
    np.testing.assert_allclose(advantages[1, 1], -1.911, atol=1e-6)
    np.testing.assert_allclose(advantages[0], [-0.085905805, -1.8372955], atol=1e-6)
    # Returns are the lambda-returns, computed here from their own recursion rather than as
    # A + V: G_t = r_t + gamma * ((1 - lambda) * V_{t+1} + lambda * G_{t+1}), G_t = r_t at a
    # termination, and the bootstrap V = 2 standing in for V_{t+1} and G_{t+1} after the last step.
    # Env A: G_3 = 1 + 0.99 * 2 = 2.98;
    #   G_2 = 1 + 0.99 * (0.05 * 3 + 0.95 * 2.98) = 1 + 0.99 * 2.981 = 3.95119;
    #   G_1 = 1 + 0.99 * (0.05 * 4 + 0.95 * 3.95119) = 1 + 0.99 * 3.9536305 = 4.914094195.
    # Env B: G_3 = 1 (terminated);
    #   G_2 = 1 + 0.99 * (0.05 * 3 + 0.95 * 1) = 1 + 0.99 * 1.1 = 2.089;
    #   G_1 = 1 + 0.99 * (0.05 * 4 + 0.95 * 2.089) = 1 + 0.99 * 2.18455 = 3.1627045.
    # Catches returns that are not advantages + values (e.g. the advantages alone, or the
    # values of the next step).
    chex.assert_trees_all_close(
        returns,
        jnp.array([[4.914094195, 3.1627045], [3.95119, 2.089], [2.98, 1.0]]),
        atol=1e-5,
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_python_reverse_loop(self):
    rng = np.random.default_rng(0)
    num_steps, num_envs = 16, 8
    rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    bootstrap = rng.normal(size=(num_envs,)).astype(np.float32)
    truncation_values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    terminated = rng.random((num_steps, num_envs)) < 0.15
    truncated = rng.random((num_steps, num_envs)) < 0.15
    terminated[3, 2] = truncated[3, 2] = True  # both at once: the termination wins
    truncated[-1, 0], terminated[-1, 0] = True, False  # a timeout on the last step
    self.assertTrue(terminated.any() and truncated.any() and (terminated & ~truncated).any())
    # Floats for the flags, as the env may emit them.
    advantages, returns = self.variant(ppo.compute_gae)(
        rewards, values, bootstrap, terminated.astype(np.float32), truncated.astype(np.float32),
        truncation_values, _GAMMA, _LAMBDA,
    )
    expected_adv, expected_ret = _reference_gae(
        rewards, values, bootstrap, terminated, truncated, truncation_values, _GAMMA, _LAMBDA
    )
    chex.assert_shape([advantages, returns], (num_steps, num_envs))
    chex.assert_trees_all_close(advantages, expected_adv, rtol=1e-5, atol=1e-5)
    chex.assert_trees_all_close(returns, expected_ret, rtol=1e-5, atol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_truncation_bootstraps_from_truncation_values(self):
    # One env, 4 steps, a timeout at t = 1. The auto-reset put the next episode's
    # first state in row 2, with a huge value that must not leak into A_1.
    gae = self.variant(ppo.compute_gae)
    rewards = jnp.ones((4, 1))
    values = jnp.array([[1.0], [2.0], [1000.0], [3.0]])
    truncated = jnp.array([[False], [True], [False], [False]])
    terminated = jnp.zeros((4, 1), bool)
    truncation_values = jnp.full((4, 1), -7.0).at[1, 0].set(2.5)
    bootstrap = jnp.array([4.0])
    advantages, _ = gae(
        rewards, values, bootstrap, terminated, truncated, truncation_values, _GAMMA, _LAMBDA
    )
    # A_1 = delta_1 = 1 + 0.99 * 2.5 - 2 = 1.475 (trace cut: the timeout ends the episode).
    np.testing.assert_allclose(advantages[1, 0], 1.475, atol=1e-5)
    # A_0 = delta_0 + 0.9405 * A_1, delta_0 = 1 + 0.99 * 2 - 1 = 1.98.
    np.testing.assert_allclose(advantages[0, 0], 1.98 + 0.9405 * 1.475, atol=1e-5)

    # Changing the next episode's value changes nothing before the timeout.
    other, _ = gae(
        rewards, values.at[2, 0].set(-123.0), bootstrap, terminated, truncated,
        truncation_values, _GAMMA, _LAMBDA,
    )
    chex.assert_trees_all_close(other[:2], advantages[:2], atol=1e-6)
    self.assertFalse(np.allclose(other[2], advantages[2]))  # row 2 is its own state

    # Changing truncation_values away from the timeout changes nothing at all.
    unused, _ = gae(
        rewards, values, bootstrap, terminated, truncated,
        truncation_values.at[0, 0].set(99.0).at[3, 0].set(-99.0), _GAMMA, _LAMBDA,
    )
    chex.assert_trees_all_close(unused, advantages, atol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_termination_ignores_every_next_value(self):
    gae = self.variant(ppo.compute_gae)
    rewards = jnp.array([[1.0], [0.5], [2.0]])
    values = jnp.array([[1.0], [3.0], [1000.0]])
    terminated = jnp.array([[False], [True], [False]])
    truncated = jnp.array([[False], [True], [False]])  # also flagged: must not matter
    truncation_values = jnp.full((3, 1), 500.0)
    bootstrap = jnp.array([10.0])
    advantages, _ = gae(
        rewards, values, bootstrap, terminated, truncated, truncation_values, _GAMMA, _LAMBDA
    )
    # A_1 = r_1 - V_1 = 0.5 - 3 = -2.5: neither V_2 (1000) nor the truncation value (500).
    np.testing.assert_allclose(advantages[1, 0], -2.5, atol=1e-6)
    # Even a non-finite next value cannot reach it.
    poisoned, _ = gae(
        rewards, values.at[2, 0].set(jnp.inf), bootstrap, terminated, truncated,
        truncation_values.at[1, 0].set(jnp.nan), _GAMMA, _LAMBDA,
    )
    chex.assert_trees_all_close(poisoned[:2], advantages[:2], atol=1e-6)

  def test_rejects_mismatched_shapes(self):
    with self.assertRaises(AssertionError):
      ppo.compute_gae(
          jnp.ones((3, 2)), jnp.ones((3, 2)), jnp.ones((3,)), jnp.zeros((3, 2)),
          jnp.zeros((3, 2)), jnp.zeros((3, 2)), _GAMMA, _LAMBDA,
      )


_O, _P, _A, _B = 6, 8, 3, 32
_LOG_2PI = np.log(2.0 * np.pi)
# Ratios of the off-policy batch: past 1 - eps, inside, and past 1 + eps for eps = 0.2 and 0.3,
# and none closer than 0.05 to a clip edge (0.7, 0.8, 1.2, 1.3), so float32 rounding cannot move
# a sample across one.
_RATIOS = (0.45, 0.6, 0.75, 0.85, 0.95, 1.0, 1.05, 1.15, 1.25, 1.4, 1.7)
# V - V_old of the off-policy batch: inside and past +-eps on both sides, none near an edge.
_VALUE_CHANGES = (-0.6, -0.35, -0.1, 0.05, 0.15, 0.4, 0.7)
# Configs the reference is checked under: the default, other coefficients (a hard-coded 0.2 or a
# coefficient applied to the wrong term shows), and each optional part switched off.
_LOSS_CONFIGS = {
    "default": ppo.LossConfig(),
    "coefficients": ppo.LossConfig(clip_eps=0.3, value_coef=0.5, entropy_coef=0.05),
    "raw_advantages": ppo.LossConfig(normalize_advantages=False),
    "unclipped_value": ppo.LossConfig(clip_value=False),
}


def _np_log_prob(mean, std, actions):
  """Diagonal Gaussian log density in float64, summed over the last (action) dim."""
  z = (actions - mean) / std
  return np.sum(-0.5 * z**2 - np.log(std) - 0.5 * _LOG_2PI, axis=-1)


def _reference_ppo_loss(mean, std, new_values, batch, cfg):
  """The clipped PPO objective in float64 NumPy, written from its definition.

  Args:
    mean: [B, A] policy means under the parameters being optimised.
    std: [B, A] policy stds under the same parameters.
    new_values: [B] V(critic_obs) under the same parameters.
    batch: the `ppo.Batch`.
    cfg: the `ppo.LossConfig`.

  Returns:
    (metrics, dloss_dlogp, dloss_dvalue): the six "loss/..." numbers, and the derivative of the
    total loss with respect to each sample's new log-prob [B] and new value [B] (what the chain
    rule multiplies with d logp / d params and d V / d params).
  """
  f64 = lambda x: np.asarray(x, np.float64)
  mean, std, new_values = f64(mean), f64(std), f64(new_values)
  actions, old_log_probs = f64(batch.actions), f64(batch.log_probs)
  old_values, advantages, returns = f64(batch.values), f64(batch.advantages), f64(batch.returns)
  size, eps = len(advantages), cfg.clip_eps

  log_ratio = _np_log_prob(mean, std, actions) - old_log_probs
  ratio = np.exp(log_ratio)
  if cfg.normalize_advantages:
    # Standardised over the minibatch: population std (ddof 0), and 1e-8 against a zero std.
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
  unclipped = -advantages * ratio
  clipped = -advantages * np.clip(ratio, 1.0 - eps, 1.0 + eps)
  # Pessimistic: the larger loss. The unclipped term carries the gradient unless the clipped one
  # is strictly larger (a ratio past the clip in the direction its advantage favours).
  policy = np.mean(np.maximum(unclipped, clipped))
  policy_live = ~(clipped > unclipped + 1e-12)

  error = new_values - returns
  if cfg.clip_value:
    change = new_values - old_values
    clipped_error = old_values + np.clip(change, -eps, eps) - returns
    value = np.mean(np.maximum(error**2, clipped_error**2))
    # The clipped error carries no gradient (the clip is flat) once V has moved past +-eps.
    value_live = (np.abs(change) <= eps) | (error**2 >= clipped_error**2)
  else:
    value = np.mean(error**2)
    value_live = np.ones(size, bool)

  entropy = np.mean(np.sum(0.5 + 0.5 * _LOG_2PI + np.log(std), axis=-1))
  metrics = {
      "loss/policy": policy,
      "loss/value": value,
      "loss/entropy": entropy,
      "loss/total": policy + cfg.value_coef * value - cfg.entropy_coef * entropy,
      # KL(old || new) estimated by E_old[(r - 1) - log r]: non-negative, 0 only at r = 1.
      "loss/approx_kl": np.mean((ratio - 1.0) - log_ratio),
      "loss/clipfrac": np.mean(np.abs(ratio - 1.0) > eps),
  }
  dloss_dlogp = np.where(policy_live, -advantages * ratio, 0.0) / size
  dloss_dvalue = cfg.value_coef * np.where(value_live, 2.0 * error, 0.0) / size
  return metrics, dloss_dlogp, dloss_dvalue


class PpoLossTest(chex.TestCase):

  def setUp(self):
    super().setUp()
    self.net = networks.make_actor_critic(_A, (16,), (16,), "tanh", init_std=0.5)
    self.params = self.net.init(jax.random.key(0), _O, _P)
    k_obs, k_cobs, k_act, k_adv, k_ret = jax.random.split(jax.random.key(1), 5)
    policy_obs = jax.random.normal(k_obs, (_B, _O))  # [B, O]
    critic_obs = jax.random.normal(k_cobs, (_B, _P))  # [B, P]
    mean, std = self.net.policy(self.params, policy_obs)  # [B, A]
    actions = networks.sample(k_act, mean, std)  # [B, A]
    # The behaviour policy is the current one: ratio == 1 everywhere.
    self.batch = ppo.Batch(
        policy_obs=policy_obs,
        critic_obs=critic_obs,
        actions=actions,
        log_probs=networks.log_prob(mean, std, actions),
        values=self.net.value(self.params, critic_obs),
        advantages=jax.random.normal(k_adv, (_B,)) * 3.0 + 1.0,
        returns=jax.random.normal(k_ret, (_B,)),
    )

  def _loss_and_grad(self, cfg: ppo.LossConfig):
    return self.variant(
        jax.value_and_grad(lambda p, b: ppo.ppo_loss(p, self.net, b, cfg), has_aux=True)
    )

  def _off_policy(self) -> tuple[networks.ActorCriticParams, ppo.Batch]:
    """Parameters moved away from their init, and a batch collected by another policy.

    Every ratio is one of `_RATIOS` (set through the behaviour log-probs), every V - V_old one of
    `_VALUE_CHANGES`; the advantages have mean ~1 and std ~3, so standardising them matters.
    """
    rng = np.random.default_rng(7)
    noise = jax.tree.map(lambda x: 0.3 * rng.standard_normal(x.shape).astype(np.float32),
                         self.params)
    params = jax.tree.map(lambda x, n: x + n, self.params, noise)  # log_std moves too
    mean, std = self.net.policy(params, self.batch.policy_obs)  # [B, A]
    new_values = self.net.value(params, self.batch.critic_obs)  # [B]
    ratios = rng.permutation(np.resize(_RATIOS, _B))  # [B]
    batch = self.batch.replace(
        log_probs=networks.log_prob(mean, std, self.batch.actions) - np.log(ratios),
        values=new_values - rng.permutation(np.resize(_VALUE_CHANGES, _B)),
        advantages=jnp.asarray(rng.normal(size=_B) * 3.0 + 1.0, jnp.float32),
        returns=new_values + jnp.asarray(rng.normal(size=_B) * 1.5, jnp.float32),
    )
    # The batch must exercise every branch of both max() terms, for standardised and raw
    # advantages alike, or a dropped max() could go unnoticed.
    raw = np.asarray(batch.advantages)
    for advantages in (raw, (raw - raw.mean()) / raw.std()):
      for eps in (0.2, 0.3):
        for past in (ratios > 1 + eps, ratios < 1 - eps):
          self.assertGreaterEqual(np.sum(past & (advantages > 0)), 2)
          self.assertGreaterEqual(np.sum(past & (advantages < 0)), 2)
    self.assertGreater(abs(raw.mean()), 0.3)
    self.assertGreater(raw.std(), 2.0)
    change = np.asarray(new_values - batch.values)
    error = np.asarray(new_values - batch.returns)
    clipped_error = error - change + np.clip(change, -0.2, 0.2)
    moved = np.abs(change) > 0.3
    self.assertTrue(np.any(moved & (clipped_error**2 > error**2)))
    self.assertTrue(np.any(moved & (clipped_error**2 < error**2)))
    return params, batch

  def _reference(self, params, batch, cfg):
    mean, std = self.net.policy(params, batch.policy_obs)
    return _reference_ppo_loss(mean, std, self.net.value(params, batch.critic_obs), batch, cfg)

  def _reference_grads(self, params, batch, cfg) -> networks.ActorCriticParams:
    """The loss gradient by the chain rule through the reference's per-sample derivatives.

    sum_i dL/dlogp_i * dlogp_i/dθ + dL/dV_i * dV_i/dθ - entropy_coef * d mean(entropy)/dθ, with
    the NumPy derivatives held constant: which samples carry gradient is decided in NumPy, not
    by the max() and clip() under test.
    """
    _, dlogp, dvalue = self._reference(params, batch, cfg)
    dlogp, dvalue = jnp.asarray(dlogp, jnp.float32), jnp.asarray(dvalue, jnp.float32)

    def linearised(p):
      mean, std = self.net.policy(p, batch.policy_obs)
      log_probs = networks.log_prob(mean, std, batch.actions)  # [B]
      values = self.net.value(p, batch.critic_obs)  # [B]
      entropy = jnp.mean(networks.entropy(std))
      return jnp.sum(dlogp * log_probs) + jnp.sum(dvalue * values) - cfg.entropy_coef * entropy

    return jax.grad(linearised)(params)

  @chex.variants(with_jit=True, without_jit=True)
  def test_on_policy_ratio_is_one(self):
    # Catches: metrics missing or renamed, a non-zero KL or clip fraction at ratio 1, the
    # entropy or the value MSE off, and (through the gradient) advantages that are not divided
    # by their std: at ratio 1 the policy loss is 0 whatever the division does, its gradient
    # is not.
    (loss, metrics), grads = self._loss_and_grad(ppo.LossConfig())(self.params, self.batch)
    self.assertEqual(
        set(metrics),
        {
            "loss/total", "loss/policy", "loss/value", "loss/entropy", "loss/approx_kl",
            "loss/clipfrac",
        },
    )
    chex.assert_shape(list(metrics.values()), ())
    np.testing.assert_allclose(metrics["loss/approx_kl"], 0.0, atol=1e-6)
    np.testing.assert_allclose(metrics["loss/clipfrac"], 0.0)
    # -mean(standardised advantages * 1) == 0.
    np.testing.assert_allclose(metrics["loss/policy"], 0.0, atol=1e-6)
    # Entropy of N(., 0.5) per dim, summed over A.
    np.testing.assert_allclose(
        metrics["loss/entropy"], _A * 0.5 * np.log(2 * np.pi * np.e * 0.25), rtol=1e-5
    )
    # Current values == collection values, so the clip is inactive: plain MSE.
    expected_value = np.mean((self.batch.values - self.batch.returns) ** 2)
    np.testing.assert_allclose(metrics["loss/value"], expected_value, rtol=1e-5)
    np.testing.assert_allclose(
        loss, metrics["loss/policy"] + expected_value - 0.01 * metrics["loss/entropy"], rtol=1e-5
    )
    np.testing.assert_allclose(metrics["loss/total"], loss)
    chex.assert_tree_all_finite(grads)
    chex.assert_trees_all_equal_structs(grads, self.params)
    # The actor's gradient is -1/B sum_i A_i * dlogp_i (r_i = 1, A standardised), so it scales
    # with 1 / std(A) = 1/3 here.
    chex.assert_trees_all_close(
        grads.actor,
        self._reference_grads(self.params, self.batch, ppo.LossConfig()).actor,
        rtol=1e-4, atol=1e-6,
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_hand_computed_off_policy_minibatch(self):
    # Catches, with arithmetic anyone can redo: a dropped pessimistic max (either half), the
    # advantages not divided by their std, a wrong KL estimator, a wrong clip fraction, a value
    # clip dropped or turned into a min, and the entropy bonus with the wrong sign.
    # Four samples at init (std 0.5 in each of the A = 3 dims), eps = 0.2:
    #   advantages A = [2, 2, -1, -1]: mean 0.5, population std 1.5, standardised [1, 1, -1, -1];
    #   ratios r = [1.5, 0.5, 1.1, 0.6];
    #   V - V_old = d = [0.5, -0.5, 0.1, 0]; V - R = [-1, -1, 0.5, 2].
    params = self.params
    sub = jax.tree.map(lambda x: x[:4], self.batch)
    mean, std = self.net.policy(params, sub.policy_obs)
    new_values = self.net.value(params, sub.critic_obs)
    ratios = np.array([1.5, 0.5, 1.1, 0.6])
    batch = sub.replace(
        log_probs=networks.log_prob(mean, std, sub.actions) - np.log(ratios),
        advantages=jnp.array([2.0, 2.0, -1.0, -1.0]),
        values=new_values - jnp.array([0.5, -0.5, 0.1, 0.0]),
        returns=new_values - jnp.array([-1.0, -1.0, 0.5, 2.0]),
    )
    (loss, metrics), _ = self._loss_and_grad(ppo.LossConfig())(params, batch)
    # Policy: -A r = [-1.5, -0.5, 1.1, 0.6]; -A clip(r, 0.8, 1.2) = [-1.2, -0.8, 1.1, 0.8];
    #   max = [-1.2, -0.5, 1.1, 0.8], mean 0.2 / 4 = 0.05.
    #   (Only the clipped term: -0.1 / 4 = -0.025; only the unclipped: -0.3 / 4 = -0.075;
    #   advantages not divided by 1.5: 0.075.)
    np.testing.assert_allclose(metrics["loss/policy"], 0.05, atol=1e-5)
    # KL: (r - 1) - log r = [0.5 - 0.4054651, -0.5 + 0.6931472, 0.1 - 0.0953102, -0.4 + 0.5108256]
    #   = [0.0945349, 0.1931472, 0.0046898, 0.1108256], mean 0.4031975 / 4 = 0.1007994.
    #   (mean(log r) = -0.1757994, mean(-log r) = 0.1757994, mean((r - 1)^2) = 0.1675.)
    np.testing.assert_allclose(metrics["loss/approx_kl"], 0.1007994, atol=1e-5)
    # |r - 1| > 0.2 for 1.5, 0.5 and 0.6: 3 / 4.
    np.testing.assert_allclose(metrics["loss/clipfrac"], 0.75)
    # Value: V_clip - R = (V - R) - d + clip(d, -0.2, 0.2) = [-1.3, -0.7, 0.5, 2];
    #   max((V - R)^2, (V_clip - R)^2) = [1.69, 1, 0.25, 4], mean 6.94 / 4 = 1.735.
    #   (Unclipped: 6.25 / 4 = 1.5625; min instead of max: 5.74 / 4 = 1.435.)
    np.testing.assert_allclose(metrics["loss/value"], 1.735, atol=1e-5)
    # Entropy: 3 * (0.5 + 0.5 log(2 pi) + log 0.5) = 3 * 0.7257914 = 2.1773741.
    np.testing.assert_allclose(metrics["loss/entropy"], 2.1773741, atol=1e-5)
    # Total: 0.05 + 1.0 * 1.735 - 0.01 * 2.1773741 = 1.7632263 (+ 0.0217737 would be 1.8067737).
    np.testing.assert_allclose(metrics["loss/total"], 1.7632263, atol=1e-5)
    np.testing.assert_allclose(loss, 1.7632263, atol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_off_policy_metrics_match_numpy_reference(self):
    # Catches any change to the arithmetic of the loss or its diagnostics: a dropped max() in
    # either direction, advantages not standardised (or without the division by their std), a
    # wrong KL estimator, a clip fraction off, the value clip dropped, and the coefficients
    # applied to the wrong terms; under four configs, ratios past both clip edges with both
    # signs of advantage, and a value function that has moved past the clip both ways.
    params, batch = self._off_policy()
    for name, cfg in _LOSS_CONFIGS.items():
      with self.subTest(name):
        (loss, metrics), _ = self._loss_and_grad(cfg)(params, batch)
        expected, _, _ = self._reference(params, batch, cfg)
        chex.assert_shape(list(metrics.values()), ())
        chex.assert_trees_all_close(
            {key: metrics[key] for key in expected}, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss, expected["loss/total"], rtol=1e-5, atol=1e-5)
        self.assertBetween(float(metrics["loss/clipfrac"]), 0.1, 0.9)  # both kinds present

  @chex.variants(with_jit=True, without_jit=True)
  def test_off_policy_gradient_matches_chain_rule(self):
    # Catches a pessimistic max that picks the wrong term (so a ratio past the clip in the
    # direction its advantage favours still pulls on the policy, or one past it in the other
    # direction stops being corrected), a value clip that lets the clipped branch carry gradient,
    # and a stop_gradient in the wrong place. The expected gradient applies the chain rule to
    # the reference's per-sample derivatives.
    params, batch = self._off_policy()
    for name in ("default", "coefficients", "unclipped_value"):
      cfg = _LOSS_CONFIGS[name]
      with self.subTest(name):
        _, grads = self._loss_and_grad(cfg)(params, batch)
        chex.assert_trees_all_close(
            grads, self._reference_grads(params, batch, cfg), rtol=1e-4, atol=1e-6)

  def _policy_only(self, **kwargs) -> ppo.LossConfig:
    return ppo.LossConfig(value_coef=0.0, entropy_coef=0.0, normalize_advantages=False, **kwargs)

  @chex.variants(with_jit=True, without_jit=True)
  def test_clipped_samples_give_no_policy_gradient(self):
    advantages = jnp.abs(self.batch.advantages) + 0.5  # [B] all positive
    # The new policy is e^1 ~ 2.7x more likely than the behaviour one: far past 1 + eps.
    far = self.batch.replace(advantages=advantages, log_probs=self.batch.log_probs - 1.0)
    (loss, metrics), grads = self._loss_and_grad(self._policy_only())(self.params, far)
    np.testing.assert_allclose(metrics["loss/clipfrac"], 1.0)
    # Every sample sits on the flat part of the clipped objective: -A * (1 + eps).
    np.testing.assert_allclose(metrics["loss/policy"], -1.2 * np.mean(advantages), rtol=1e-5)
    np.testing.assert_allclose(loss, metrics["loss/policy"], rtol=1e-6)
    chex.assert_trees_all_equal(grads, jax.tree.map(jnp.zeros_like, self.params))

  @chex.variants(with_jit=True, without_jit=True)
  def test_only_unclipped_samples_carry_gradient(self):
    advantages = jnp.abs(self.batch.advantages) + 0.5  # [B]
    half = _B // 2
    # First half clipped (ratio e), second half inside the clip (ratio e^0.05 ~ 1.05).
    shift = jnp.concatenate([jnp.full((half,), 1.0), jnp.full((_B - half,), 0.05)])  # [B]
    mixed = self.batch.replace(advantages=advantages, log_probs=self.batch.log_probs - shift)
    loss_and_grad = self._loss_and_grad(self._policy_only())
    (_, metrics), grads = loss_and_grad(self.params, mixed)
    np.testing.assert_allclose(metrics["loss/clipfrac"], 0.5)
    self.assertGreater(float(metrics["loss/approx_kl"]), 0.0)
    unclipped = jax.tree.map(lambda x: x[half:], mixed)
    _, grads_unclipped = loss_and_grad(self.params, unclipped)
    # The loss is a mean over B, so the unclipped half's gradient enters at weight 1/2.
    chex.assert_trees_all_close(
        grads, jax.tree.map(lambda g: 0.5 * g, grads_unclipped), rtol=1e-4, atol=1e-7
    )
    self.assertGreater(max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grads.actor)), 0.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_value_clip(self):
    current = self.batch.values  # [B]
    # The critic has already moved +1 from the collection values, past eps = 0.2,
    # and the targets lie further up, so the clipped error is the larger one.
    moved = self.batch.replace(values=current - 1.0, returns=current + 5.0)
    cfg = ppo.LossConfig(entropy_coef=0.0)
    (_, metrics), grads = self._loss_and_grad(cfg)(self.params, moved)
    # Clipped value = (V - 1) + 0.2 = V - 0.8, error (5.8)^2 = 33.64 > 25.
    np.testing.assert_allclose(metrics["loss/value"], 33.64, rtol=1e-5)
    chex.assert_trees_all_equal(grads.critic, jax.tree.map(jnp.zeros_like, self.params.critic))

    cfg_unclipped = ppo.LossConfig(entropy_coef=0.0, clip_value=False)
    (_, metrics), grads = self._loss_and_grad(cfg_unclipped)(self.params, moved)
    np.testing.assert_allclose(metrics["loss/value"], 25.0, rtol=1e-5)
    self.assertGreater(max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grads.critic)), 0.0)


class ExplainedVarianceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_cases(self):
    ev = self.variant(ppo.explained_variance)
    returns = jnp.array([1.0, -2.0, 3.0, 0.5, 4.0])
    np.testing.assert_allclose(ev(returns, returns), 1.0, atol=1e-6)
    np.testing.assert_allclose(ev(jnp.full_like(returns, returns.mean()), returns), 0.0, atol=1e-6)
    self.assertLess(float(ev(-returns, returns)), 0.0)
    flat = jnp.full((5,), 2.0)
    out = ev(jnp.arange(5.0), flat)  # nothing to explain
    np.testing.assert_allclose(out, 0.0)
    self.assertTrue(np.isfinite(out))


class LearningRateTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_adapt_learning_rate(self):
    adapt = self.variant(functools.partial(ppo.adapt_learning_rate, min_lr=1e-5, max_lr=1e-2))
    lr, desired = 1e-3, 0.01
    # kl > 2 * desired: down; kl < desired / 2: up.
    np.testing.assert_allclose(adapt(lr, 0.05, desired), lr / 1.5, rtol=1e-6)
    np.testing.assert_allclose(adapt(lr, 0.001, desired), lr * 1.5, rtol=1e-6)
    np.testing.assert_allclose(adapt(lr, 0.01, desired), lr, rtol=1e-6)  # in band: unchanged
    np.testing.assert_allclose(adapt(lr, 0.019, desired), lr, rtol=1e-6)
    np.testing.assert_allclose(adapt(lr, 0.05, 0.0), lr, rtol=1e-6)  # disabled
    np.testing.assert_allclose(adapt(lr, 0.05, -1.0), lr, rtol=1e-6)
    np.testing.assert_allclose(adapt(1.2e-5, 0.05, desired), 1e-5, rtol=1e-6)  # floor
    np.testing.assert_allclose(adapt(9e-3, 0.001, desired), 1e-2, rtol=1e-6)  # ceiling
    np.testing.assert_allclose(
        adapt(1e-3, 0.05, desired, factor=2.0, min_lr=1e-4, max_lr=1e-1), 5e-4, rtol=1e-6
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_set_get_learning_rate_changes_step_size(self):
    optimizer = ppo.make_optimizer(learning_rate=1e-3, max_grad_norm=10.0)
    params = {"w": jnp.zeros(3)}
    grads = {"w": jnp.array([0.1, -0.2, 0.3])}
    opt_state = optimizer.init(params)
    np.testing.assert_allclose(self.variant(ppo.get_learning_rate)(opt_state), 1e-3, rtol=1e-6)

    new_state = self.variant(ppo.set_learning_rate)(opt_state, 5e-3)
    np.testing.assert_allclose(ppo.get_learning_rate(new_state), 5e-3, rtol=1e-6)
    np.testing.assert_allclose(ppo.get_learning_rate(opt_state), 1e-3, rtol=1e-6)  # pure
    # Same tree, shapes and dtypes: usable as a scan carry without a retrace.
    chex.assert_trees_all_equal_shapes_and_dtypes(new_state, opt_state)

    # Adam's first step is ~ -lr * sign(g) (g under the clip norm), so the step scales with lr.
    old_updates, _ = optimizer.update(grads, opt_state, params)
    new_updates, _ = optimizer.update(grads, new_state, params)
    np.testing.assert_allclose(old_updates["w"], -1e-3 * np.sign(grads["w"]), rtol=1e-4)
    np.testing.assert_allclose(new_updates["w"], -5e-3 * np.sign(grads["w"]), rtol=1e-4)

    # And the changed rate survives the update, so it persists across steps.
    _, after = optimizer.update(grads, new_state, params)
    np.testing.assert_allclose(ppo.get_learning_rate(after), 5e-3, rtol=1e-6)

  def test_get_learning_rate_needs_inject_state(self):
    state = optax.adam(1e-3).init({"w": jnp.zeros(2)})
    with self.assertRaisesRegex(ValueError, "inject_hyperparams"):
      ppo.get_learning_rate(state)


if __name__ == "__main__":
  absltest.main()
