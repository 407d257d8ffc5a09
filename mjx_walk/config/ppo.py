"""The `ppo` section: PPO, its optimizer and the KL-adaptive learning rate."""

import dataclasses

from mjx_walk.config._checks import check_nonnegative, check_positive, check_positive_int, fail


@dataclasses.dataclass
class PPOConfig:
  """PPO and its optimizer."""

  learning_rate: float = 1e-3
  """Initial Adam learning rate; adapted during training when desired_kl > 0."""
  desired_kl: float = 0.01
  """Target approx-KL for the adaptive learning rate (rsl_rl's rule); 0 keeps the rate fixed.
  Before each minibatch's step, the approx-KL between the behaviour policy and the current
  parameters on that minibatch is measured: above 2 x desired_kl the rate is divided by 1.5, below
  desired_kl / 2 multiplied by 1.5, within [min_learning_rate, max_learning_rate]; that same
  step then uses the new rate."""
  min_learning_rate: float = 1e-5
  """Floor of the adaptive learning rate."""
  max_learning_rate: float = 1e-2
  """Ceiling of the adaptive learning rate."""
  num_epochs: int = 5
  num_minibatches: int = 4
  gamma: float = 0.97
  gae_lambda: float = 0.95
  clip_eps: float = 0.2
  value_coef: float = 1.0
  entropy_coef: float = 0.01
  max_grad_norm: float = 1.0
  normalize_observations: bool = True


def validate(ppo: PPOConfig) -> None:
  for name in ("num_epochs", "num_minibatches"):
    check_positive_int(f"ppo.{name}", getattr(ppo, name))
  for name in ("learning_rate", "clip_eps", "max_grad_norm"):
    check_positive(f"ppo.{name}", getattr(ppo, name))
  for name in ("gamma", "gae_lambda"):
    if not 0 < getattr(ppo, name) <= 1:
      fail(f"ppo.{name}", getattr(ppo, name), "it must be in (0, 1]")
  for name in ("desired_kl", "value_coef", "entropy_coef"):
    check_nonnegative(f"ppo.{name}", getattr(ppo, name))
  check_positive("ppo.min_learning_rate", ppo.min_learning_rate)
  if ppo.max_learning_rate < ppo.min_learning_rate:
    fail("ppo.max_learning_rate", ppo.max_learning_rate,
         f"it must be >= ppo.min_learning_rate={ppo.min_learning_rate}")
  if ppo.desired_kl > 0 and not (
      ppo.min_learning_rate <= ppo.learning_rate <= ppo.max_learning_rate):
    fail("ppo.learning_rate", ppo.learning_rate,
         f"with the adaptive rate (ppo.desired_kl > 0) it must lie in [ppo.min_learning_rate, "
         f"ppo.max_learning_rate] = [{ppo.min_learning_rate}, {ppo.max_learning_rate}]")
