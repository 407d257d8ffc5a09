"""GAE with termination mask and truncation bootstrap; the clipped PPO loss.

This module owns the learning rule, as pure functions over arrays:
- `compute_gae`: advantages and value targets over a [T, N] rollout block, with
  terminations (no bootstrap) and truncations (bootstrap from the value of the
  true final observation) kept apart (tests/test_ppo.py checks the hand-computed case).
- `Batch`, `LossConfig`, `ppo_loss`: the clipped surrogate, the (clipped) value
  loss and the entropy bonus, with the diagnostics the ledger records.
- `explained_variance`, the optimizer (`make_optimizer`) and the adaptive
  learning rate (`get_learning_rate`, `set_learning_rate`, `adapt_learning_rate`).

It knows nothing about the env: the trainer passes plain arrays in, so nothing
here reaches into env state by field name.
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import flax
import jax
import jax.numpy as jnp
import optax

from mjx_walk.learn import networks as networks_lib

_INJECT_STATE_TYPES = (optax.InjectStatefulHyperparamsState, optax.InjectHyperparamsState)


# CALCULATE ADVANTAGE


def _gae_step(
    next_advantage: jax.Array, step: tuple[jax.Array, jax.Array], gamma_lambda: jax.Array | float
) -> tuple[jax.Array, jax.Array]:
  """One backward step of the GAE recursion (body of a reverse `lax.scan`).

  Args:
    next_advantage: carry, float32 [N], A_{t+1} (0 after the last step).
    step: (delta_t float32 [N], done_t bool [N]).
    gamma_lambda: gamma * lambda, scalar.

  Returns:
    (A_t, A_t): the new carry and the scanned output, float32 [N].
  """
  delta, done = step
  # An episode end of either kind cuts the trace: A_{t+1} belongs to the next
  # episode. jnp.where, not a (1 - done) product, so not even a non-finite
  # advantage there can leak back as 0 * inf = nan.
  advantage = delta + jnp.where(done, 0.0, gamma_lambda * next_advantage)  # [N]
  return advantage, advantage


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    bootstrap_value: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    truncation_values: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
  """Generalised advantage estimation with terminations and truncations kept apart.

  The env auto-resets, so at a step that ended an episode the next row's
  observation (and `values[t + 1]`) belongs to the NEXT episode. A termination
  (a fall) has no future, so it bootstraps from nothing. A truncation (a
  timeout) does have a future, so it bootstraps from V(true final observation),
  passed in as `truncation_values`; `values[t + 1]` is never used there.

  Args:
    rewards: float32 [T, N], r_t.
    values: float32 [T, N], V(s_t) at collection.
    bootstrap_value: float32 [N], V of the observation after the last step.
    terminated: bool or float32 [T, N], step t ended in a termination.
    truncated: bool or float32 [T, N], step t ended in a timeout.
    truncation_values: float32 [T, N], V(true final observation of step t);
      read only where `truncated` (and not `terminated`), anything elsewhere.
    gamma: discount factor.
    gae_lambda: GAE lambda.

  Returns:
    (advantages, returns): float32 [T, N] each; returns = advantages + values,
    the value-function targets.
  """
  chex.assert_rank(rewards, 2)
  num_steps, num_envs = rewards.shape
  chex.assert_shape(
      [rewards, values, terminated, truncated, truncation_values], (num_steps, num_envs)
  )
  chex.assert_shape(bootstrap_value, (num_envs,))

  terminated = jnp.asarray(terminated).astype(bool)  # [T, N]
  truncated = jnp.asarray(truncated).astype(bool)  # [T, N]
  done = jnp.logical_or(terminated, truncated)  # [T, N]

  # values[t + 1], except at a timeout, where the next row is already the next
  # episode and the true final observation's value stands in for it.
  next_values = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)  # [T, N]
  next_values = jnp.where(truncated, truncation_values, next_values)  # [T, N]
  # A termination has no future, so its next value is 0. jnp.where rather than a
  # (1 - terminated) product, so a non-finite value there cannot leak in as 0 * inf = nan.
  next_values = jnp.where(terminated, 0.0, next_values)  # [T, N]
  deltas = rewards + gamma * next_values - values  # [T, N]

  _, advantages = jax.lax.scan(
      functools.partial(_gae_step, gamma_lambda=gamma * gae_lambda),
      jnp.zeros((num_envs,), jnp.float32),
      (deltas, done),
      reverse=True,
  )  # [T, N]
  returns = advantages + values  # [T, N]
  return advantages, returns


# UPDATE NETWORK


@flax.struct.dataclass
class Batch:
  """One PPO sample set; every field has the leading dim [B] (B = T * N, or a minibatch)."""

  policy_obs: jax.Array
  """float32 [B, O] policy observations, already normalised."""
  critic_obs: jax.Array
  """float32 [B, P] critic observations, already normalised."""
  actions: jax.Array
  """float32 [B, A] actions taken (raw Gaussian samples)."""
  log_probs: jax.Array
  """float32 [B] log-prob of the actions under the behaviour policy."""
  values: jax.Array
  """float32 [B] V(s) at collection; the centre of the value clip."""
  advantages: jax.Array
  """float32 [B] GAE advantages."""
  returns: jax.Array
  """float32 [B] value targets (advantages + values)."""


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """Coefficients of the PPO loss; static (closed over by the jitted update)."""

  clip_eps: float = 0.2
  """Clip range of the probability ratio, and of the value change when `clip_value`."""
  value_coef: float = 1.0
  """Weight of the value loss (rsl_rl's 1.0 with an un-halved squared error)."""
  entropy_coef: float = 0.01
  """Weight of the entropy bonus (subtracted from the loss)."""
  clip_value: bool = True
  """Clip the value loss around the collection-time values, as rsl_rl."""
  normalize_advantages: bool = True
  """Standardise advantages per minibatch."""


def ppo_loss(
    params: networks_lib.ActorCriticParams,
    networks: networks_lib.ActorCritic,
    batch: Batch,
    cfg: LossConfig,
    axis_name: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """The clipped PPO objective on one minibatch.

  loss = policy + value_coef * value - entropy_coef * entropy, where policy is
  the clipped surrogate mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))) and value
  is mean((V - R)^2), or with `clip_value` mean(max((V - R)^2, (V_clip - R)^2))
  with V_clip = V_old + clip(V - V_old, -eps, eps).

  Args:
    params: the parameters being optimised.
    networks: the static actor-critic.
    batch: the samples, leading dim [B].
    cfg: loss coefficients.
    axis_name: inside a `jax.shard_map`, the device axis over which `batch` is this device's
      equal share of the minibatch: advantages are then standardised with the whole
      minibatch's mean and standard deviation. The loss and its metrics stay this share's
      means; the trainer averages them, and the gradients, over devices.

  Returns:
    (loss, metrics): the scalar loss to minimise, and float32 scalars
    "loss/total", "loss/policy", "loss/value", "loss/entropy" (the mean policy
    entropy, not its weighted term), "loss/approx_kl" (mean of
    (r - 1) - log r, an unbiased, non-negative estimator of KL(old || new)) and
    "loss/clipfrac" (fraction of samples whose ratio left [1 - eps, 1 + eps]).
  """
  chex.assert_rank([batch.policy_obs, batch.critic_obs, batch.actions], 2)
  batch_size = batch.actions.shape[0]
  chex.assert_shape(
      [batch.policy_obs, batch.critic_obs, batch.actions], [(batch_size, None)] * 3
  )
  chex.assert_shape(
      [batch.log_probs, batch.values, batch.advantages, batch.returns], (batch_size,)
  )

  # POLICY LOSS
  mean, std = networks.policy(params, batch.policy_obs)  # [B, A] each
  new_log_probs = networks_lib.log_prob(mean, std, batch.actions)  # [B]
  log_ratio = new_log_probs - batch.log_probs  # [B]
  ratio = jnp.exp(log_ratio)  # [B]

  advantages = batch.advantages  # [B]
  if cfg.normalize_advantages and axis_name is not None:
    whole_mean = jax.lax.pmean(advantages.mean(), axis_name)
    whole_std = jnp.sqrt(jax.lax.pmean(jnp.mean(jnp.square(advantages - whole_mean)), axis_name))
    advantages = (advantages - whole_mean) / (whole_std + 1e-8)  # [B]
  elif cfg.normalize_advantages:
    # Per minibatch, so the policy step size does not depend on the reward scale.
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # [B]
  surrogate = -advantages * ratio  # [B]
  surrogate_clipped = -advantages * jnp.clip(ratio, 1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps)  # [B]
  # The pessimistic (larger) loss: once the ratio has moved past the clip in the
  # direction the advantage favours, the sample stops contributing gradient.
  policy_loss = jnp.mean(jnp.maximum(surrogate, surrogate_clipped))

  # VALUE LOSS
  values = networks.value(params, batch.critic_obs)  # [B]
  value_error = jnp.square(values - batch.returns)  # [B]
  if cfg.clip_value:
    # Limit how far one update can move V from its collection value, as rsl_rl.
    value_change = jnp.clip(values - batch.values, -cfg.clip_eps, cfg.clip_eps)  # [B]
    values_clipped = batch.values + value_change  # [B]
    value_error_clipped = jnp.square(values_clipped - batch.returns)  # [B]
    value_loss = jnp.mean(jnp.maximum(value_error, value_error_clipped))
  else:
    value_loss = jnp.mean(value_error)

  # ENTROPY BONUS
  entropy = jnp.mean(networks_lib.entropy(std))

  total = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy

  # Diagnostics only: no gradient flows through them.
  approx_kl = jnp.mean(jax.lax.stop_gradient((ratio - 1.0) - log_ratio))
  clipfrac = jnp.mean(
      (jnp.abs(jax.lax.stop_gradient(ratio) - 1.0) > cfg.clip_eps).astype(jnp.float32)
  )
  metrics = {
      "loss/total": total,
      "loss/policy": policy_loss,
      "loss/value": value_loss,
      "loss/entropy": entropy,
      "loss/approx_kl": approx_kl,
      "loss/clipfrac": clipfrac,
  }
  metrics = jax.tree.map(jax.lax.stop_gradient, metrics)
  return total, metrics


def explained_variance(values: jax.Array, returns: jax.Array) -> jax.Array:
  """How much of the returns' variance the value function explains.

  Args:
    values: float32 [...] predicted values.
    returns: float32 [...] targets, same shape.

  Returns:
    float32 scalar 1 - var(returns - values) / var(returns): 1 for perfect
    values, 0 for a constant at the mean, negative when worse than that; 0 when
    var(returns) == 0 (nothing to explain).
  """
  chex.assert_equal_shape([values, returns])
  var_returns = jnp.var(returns)
  var_residual = jnp.var(returns - values)
  # Divide by a safe denominator so the untaken branch cannot produce nan.
  safe_var = jnp.where(var_returns > 0, var_returns, 1.0)
  return jnp.where(var_returns > 0, 1.0 - var_residual / safe_var, 0.0)


# OPTIMIZER AND LEARNING RATE


def make_optimizer(learning_rate: float, max_grad_norm: float) -> optax.GradientTransformation:
  """Adam after global-norm gradient clipping.

  The learning rate is injected as a hyperparameter, so it lives in the
  optimizer state: the adaptive schedule changes it inside the jitted chunk
  without recompiling.

  Args:
    learning_rate: the initial Adam learning rate.
    max_grad_norm: gradients are rescaled to at most this global L2 norm.

  Returns:
    The optax transformation.
  """
  return optax.chain(
      optax.clip_by_global_norm(max_grad_norm),
      optax.inject_hyperparams(optax.adam)(learning_rate=learning_rate),
  )


def _inject_index(opt_state: optax.OptState) -> int:
  """Position of the inject_hyperparams state in a `make_optimizer` chain state."""
  for i, state in enumerate(opt_state):
    if isinstance(state, _INJECT_STATE_TYPES):
      return i
  raise ValueError(
      "opt_state holds no inject_hyperparams state; expected the state of make_optimizer(...)."
  )


def get_learning_rate(opt_state: optax.OptState) -> jax.Array:
  """The current learning rate (float32 scalar) of a `make_optimizer` state."""
  return opt_state[_inject_index(opt_state)].hyperparams["learning_rate"]


def set_learning_rate(opt_state: optax.OptState, lr: jax.Array | float) -> optax.OptState:
  """Returns a copy of a `make_optimizer` state with the learning rate replaced.

  Args:
    opt_state: the optimizer state; not modified.
    lr: the new learning rate, a scalar.

  Returns:
    The new state, same structure and dtypes (so a scan carry keeps its type).
  """
  index = _inject_index(opt_state)
  inject_state = opt_state[index]
  old_lr = inject_state.hyperparams["learning_rate"]
  new_lr = jnp.asarray(lr, old_lr.dtype).reshape(old_lr.shape)
  hyperparams = {**inject_state.hyperparams, "learning_rate": new_lr}
  new_inject_state = inject_state._replace(hyperparams=hyperparams)
  return (*opt_state[:index], new_inject_state, *opt_state[index + 1 :])


def adapt_learning_rate(
    lr: jax.Array | float,
    approx_kl: jax.Array | float,
    desired_kl: jax.Array | float,
    *,
    min_lr: float,
    max_lr: float,
    factor: float = 1.5,
) -> jax.Array:
  """The rsl_rl KL-adaptive learning rate rule, jit-safe.

  If the last update's KL overshot twice the target the step was too big, so
  the rate shrinks; if it stayed under half the target the rate grows.

  Args:
    lr: current learning rate, scalar.
    approx_kl: the measured KL of the last update, scalar.
    desired_kl: target KL; <= 0 disables adaptation.
    min_lr: floor applied when shrinking (`ppo.min_learning_rate`).
    max_lr: ceiling applied when growing (`ppo.max_learning_rate`).
    factor: multiplicative step, > 1.

  Returns:
    float32 scalar: lr / factor (>= min_lr) if kl > 2 desired; lr * factor
    (<= max_lr) if kl < desired / 2; lr otherwise or when disabled.
  """
  lr = jnp.asarray(lr, jnp.float32)
  approx_kl = jnp.asarray(approx_kl, jnp.float32)
  desired_kl = jnp.asarray(desired_kl, jnp.float32)
  chex.assert_shape([lr, approx_kl, desired_kl], ())
  lowered = jnp.maximum(min_lr, lr / factor)
  raised = jnp.minimum(max_lr, lr * factor)
  new_lr = jnp.where(
      approx_kl > 2.0 * desired_kl, lowered, jnp.where(approx_kl < 0.5 * desired_kl, raised, lr)
  )
  return jnp.where(desired_kl > 0.0, new_lr, lr)
