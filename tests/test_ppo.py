"""Tests for mjx_walk.ppo: the GAE contract, the clipped loss, and the learning-rate plumbing."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl.testing import absltest

from mjx_walk import networks
from mjx_walk import ppo

_GAMMA, _LAMBDA = 0.99, 0.95


def _reference_gae(
    rewards, values, bootstrap, terminated, truncated, truncation_values, gamma, lam
):
  """Plain per-env reverse loop in float64, written from the DESIGN contract."""
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
  def test_design_hand_computed_case(self):
    # DESIGN.md section 3: gamma 0.99, lambda 0.95, two envs (columns A, B),
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
    #   A_2 = -0.03 + 0.99 * 0.95 * (-0.02) = -0.03 - 0.01881 = -0.04881 (DESIGN: -0.049).
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
    chex.assert_trees_all_close(returns, advantages + values, atol=1e-6)

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

  @chex.variants(with_jit=True, without_jit=True)
  def test_on_policy_ratio_is_one(self):
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
    # -mean(normalised advantages * 1) == 0.
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
    adapt = self.variant(ppo.adapt_learning_rate)
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
