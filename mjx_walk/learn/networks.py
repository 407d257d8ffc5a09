"""The Flax actor-critic and its action distribution.

This module owns the policy and value networks (`Actor`, `Critic`, built from
one `MLP`, optionally behind a `ScanEncoder` that gives the height scan its own
branch), the static pair of them (`ActorCritic`) with its separate parameter
trees (`ActorCriticParams`), and the diagonal Gaussian action distribution as
pure functions (`sample`, `log_prob`, `entropy`).

Actions are raw Gaussian samples, not squashed with tanh: they are offsets from
the default pose that the env scales and clips. Keeping them unsquashed keeps
`log_prob` exact and cheap (no Jacobian correction), as in rsl_rl / legged_gym.

Nothing here knows about the env; observations arrive already normalised.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses
import math
from typing import Any

import chex
import flax
import flax.linen as nn
import jax
import jax.numpy as jnp

from mjx_walk import config as config_lib

PyTree = Any

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    name: getattr(nn, name) for name in config_lib.ACTIVATIONS}
"""Flax's function of each activation name `config.NetworkConfig.activation` accepts."""

# Floor on the policy std. exp(log_std) is positive already; the floor stops
# log_prob's 1/std^2 from exploding if one bad update drives log_std very low.
_LOG_STD_MIN = math.log(1e-3)

_LOG_2PI = math.log(2.0 * math.pi)


class MLP(nn.Module):
  """A plain multilayer perceptron with orthogonal init and zero biases.

  Attributes:
    hidden_sizes: width of each hidden layer, in order.
    out_size: width of the output layer (no activation on it).
    activation: a key of `ACTIVATIONS`, applied after every hidden layer.
    out_scale: gain of the orthogonal init of the output layer. Hidden layers
      use sqrt(2), the gain that keeps activations' scale through ReLU-like
      units (the PPO implementation-details default).
  """

  hidden_sizes: Sequence[int]
  out_size: int
  activation: str
  out_scale: float

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    """Maps float32 [..., I] to float32 [..., out_size]."""
    act = ACTIVATIONS[self.activation]
    for i, size in enumerate(self.hidden_sizes):
      x = nn.Dense(
          size,
          kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)),
          bias_init=nn.initializers.zeros,
          name=f"hidden_{i}",
      )(x)  # [..., size]
      x = act(x)  # [..., size]
    return nn.Dense(
        self.out_size,
        kernel_init=nn.initializers.orthogonal(self.out_scale),
        bias_init=nn.initializers.zeros,
        name="out",
    )(x)  # [..., out_size]


@dataclasses.dataclass(frozen=True)
class ScanBranch:
  """Where the height scan sits in an observation and the widths of its `ScanEncoder`.

  Attributes:
    start: where the scan starts in the observation vector.
    size: S, the number of scan points.
    sizes: the branch's layer widths, in order (non-empty).
  """

  start: int
  size: int
  sizes: tuple[int, ...]


class ScanEncoder(nn.Module):
  """The height scan's own branch: its slice of the observation through a small MLP.

  The scan's S values are taken out of the observation, passed through Dense layers of
  `branch.sizes` (each followed by the activation, orthogonal init with gain sqrt(2)), and
  their output is appended to the rest of the observation, which the network's MLP then reads.
  With S = 117 or 187 points against the Go2 recipe's 50 other inputs, the plain MLP's first
  layer sees the scan as most of its input; the branch compresses it to `sizes[-1]` features
  first.

  Attributes:
    branch: the scan's place and the layer widths.
    activation: a key of `ACTIVATIONS`.
  """

  branch: ScanBranch
  activation: str

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    """Maps float32 [..., I] to float32 [..., I - S + sizes[-1]]."""
    start, end = self.branch.start, self.branch.start + self.branch.size
    scan = obs[..., start:end]  # [..., S]
    rest = jnp.concatenate([obs[..., :start], obs[..., end:]], axis=-1)  # [..., I - S]
    act = ACTIVATIONS[self.activation]
    for i, width in enumerate(self.branch.sizes):
      scan = act(nn.Dense(
          width,
          kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)),
          bias_init=nn.initializers.zeros,
          name=f"hidden_{i}",
      )(scan))  # [..., width]
    return jnp.concatenate([rest, scan], axis=-1)  # [..., I - S + sizes[-1]]


def _encoded(branch: ScanBranch | None, activation: str, obs: jax.Array) -> jax.Array:
  """`obs` through the scan's branch, named `scan_encoder` in the caller's parameters."""
  if branch is None:
    return obs
  return ScanEncoder(branch, activation, name="scan_encoder")(obs)


class Actor(nn.Module):
  """The policy: a Gaussian with state-dependent mean and learned, state-independent std.

  The std is one learnable parameter `log_std` [A], not a second network head.
  A state-independent std (as in rsl_rl / legged_gym) keeps exploration from
  collapsing on states the critic has not seen yet, and no single minibatch can
  drive it to 0 for a region of state space. The log parameterisation keeps the
  std positive and gives gradients that are invariant to the std's scale.

  Attributes:
    hidden_sizes: hidden widths of the mean network.
    action_size: A, the number of actuated joints.
    activation: a key of `ACTIVATIONS`.
    init_std: the initial std of every action dim (> 0).
    scan_branch: the height scan's place and its own branch (`ScanEncoder`), or None to feed
      the scan to the MLP with the other inputs.
  """

  hidden_sizes: Sequence[int]
  action_size: int
  activation: str
  init_std: float
  scan_branch: ScanBranch | None = None

  @nn.compact
  def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Computes the action distribution.

    Args:
      obs: float32 [..., O] normalised policy observations.

    Returns:
      (mean, std): float32 [..., A] each; std is broadcast from `log_std`.
    """
    # Output gain 0.01: the initial mean action is ~0, i.e. the default pose,
    # so the first rollouts start from standing rather than random flailing.
    mean = MLP(
        self.hidden_sizes, self.action_size, self.activation, out_scale=0.01, name="mean"
    )(_encoded(self.scan_branch, self.activation, obs))  # [..., A]
    log_std = self.param(
        "log_std", nn.initializers.constant(math.log(self.init_std)), (self.action_size,)
    )  # [A]
    std = jnp.exp(jnp.maximum(log_std, _LOG_STD_MIN))  # [A]
    return mean, jnp.broadcast_to(std, mean.shape)  # [..., A] each


class Critic(nn.Module):
  """The value function V(s) on the (privileged) critic observation.

  Attributes:
    hidden_sizes: hidden widths.
    activation: a key of `ACTIVATIONS`.
    scan_branch: as `Actor.scan_branch`, at the scan's place in the critic observation.
  """

  hidden_sizes: Sequence[int]
  activation: str
  scan_branch: ScanBranch | None = None

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    """Maps float32 [..., P] critic observations to float32 [...] values."""
    value = MLP(self.hidden_sizes, 1, self.activation, out_scale=1.0,
                name="value")(_encoded(self.scan_branch, self.activation, obs))  # [..., 1]
    return value[..., 0]  # [...]


@flax.struct.dataclass
class ActorCriticParams:
  """The two networks' parameters, as separate trees.

  Separate trees make the separation of the two losses' gradients visible: the
  value loss reaches only `critic`, and the checkpoint can export `actor` alone
  for deployment.

  Attributes:
    actor: `Actor` variables, `{"params": {"mean": ..., "log_std": [A]}}`.
    critic: `Critic` variables, `{"params": {"value": ...}}`.
  """

  actor: PyTree
  critic: PyTree


@dataclasses.dataclass(frozen=True)
class ActorCritic:
  """The actor and critic modules; static (hashable), holds no parameters.

  Attributes:
    actor: the policy module.
    critic: the value module.
  """

  actor: Actor
  critic: Critic

  def init(self, key: jax.Array, policy_obs_size: int, critic_obs_size: int) -> ActorCriticParams:
    """Initialises both networks.

    Args:
      key: PRNG key.
      policy_obs_size: O, the policy observation width.
      critic_obs_size: P, the critic observation width.

    Returns:
      Fresh `ActorCriticParams`.
    """
    # Independent keys so the two networks' inits do not correlate.
    k_actor, k_critic = jax.random.split(key)
    actor = self.actor.init(k_actor, jnp.zeros((1, policy_obs_size), jnp.float32))
    critic = self.critic.init(k_critic, jnp.zeros((1, critic_obs_size), jnp.float32))
    return ActorCriticParams(actor=actor, critic=critic)

  def policy(self, params: ActorCriticParams, policy_obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Action distribution for float32 [..., O] observations; (mean, std) float32 [..., A]."""
    return self.actor.apply(params.actor, policy_obs)

  def value(self, params: ActorCriticParams, critic_obs: jax.Array) -> jax.Array:
    """Values float32 [...] for float32 [..., P] critic observations."""
    return self.critic.apply(params.critic, critic_obs)


def make_actor_critic(
    action_size: int,
    actor_hidden_sizes: Sequence[int],
    critic_hidden_sizes: Sequence[int],
    activation: str,
    init_std: float,
    scan: tuple[int, int] | None = None,
    scan_encoder_sizes: Sequence[int] = (),
) -> ActorCritic:
  """Builds the actor-critic from sizes.

  Args:
    action_size: A.
    actor_hidden_sizes: hidden widths of the policy mean network.
    critic_hidden_sizes: hidden widths of the value network.
    activation: one of `ACTIVATIONS`.
    init_std: initial policy std, > 0.
    scan: (start, size) of the height scan in the policy observation, which is also its place
      in the critic observation (the critic's extra inputs come after the policy's); None
      without a scan.
    scan_encoder_sizes: the scan branch's widths (`ScanEncoder`); empty for none.

  Returns:
    The static `ActorCritic`.

  Raises:
    ValueError: on an unknown activation, a non-positive size or init_std.
  """
  if activation not in ACTIVATIONS:
    raise ValueError(
        f"activation={activation!r} is unknown; expected one of {sorted(ACTIVATIONS)}."
    )
  if action_size <= 0:
    raise ValueError(f"action_size={action_size} must be a positive integer.")
  hidden = {"actor_hidden_sizes": actor_hidden_sizes, "critic_hidden_sizes": critic_hidden_sizes}
  for name, sizes in hidden.items():
    if any(s <= 0 for s in sizes):
      raise ValueError(f"{name}={tuple(sizes)} must hold positive integers.")
  if not init_std > 0:
    raise ValueError(f"init_std={init_std} must be > 0.")
  branch = None
  if scan_encoder_sizes:
    if scan is None:
      raise ValueError(f"scan_encoder_sizes={tuple(scan_encoder_sizes)} needs a height scan in "
                       "the observation; give scan=(start, size).")
    if any(s <= 0 for s in scan_encoder_sizes):
      raise ValueError(f"scan_encoder_sizes={tuple(scan_encoder_sizes)} must hold positive "
                       "integers.")
    branch = ScanBranch(scan[0], scan[1], tuple(scan_encoder_sizes))
  # Tuples, so the modules (and the ActorCritic) hash and can be jit-static.
  return ActorCritic(
      actor=Actor(tuple(actor_hidden_sizes), action_size, activation, float(init_std),
                  scan_branch=branch),
      critic=Critic(tuple(critic_hidden_sizes), activation, scan_branch=branch),
  )


def sample(key: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
  """Draws actions from the diagonal Gaussian.

  Args:
    key: PRNG key.
    mean: float32 [..., A].
    std: float32 [..., A], > 0.

  Returns:
    float32 [..., A] actions, unsquashed (the env clips).
  """
  chex.assert_equal_shape([mean, std])
  noise = jax.random.normal(key, mean.shape, mean.dtype)  # [..., A]
  return mean + std * noise  # [..., A]


def log_prob(mean: jax.Array, std: jax.Array, action: jax.Array) -> jax.Array:
  """Log density of actions under the diagonal Gaussian.

  Args:
    mean: float32 [..., A].
    std: float32 [..., A], > 0.
    action: float32 [..., A].

  Returns:
    float32 [...], summed over the action dim.
  """
  chex.assert_equal_shape([mean, std, action])
  z = (action - mean) / std  # [..., A]
  per_dim = -0.5 * jnp.square(z) - jnp.log(std) - 0.5 * _LOG_2PI  # [..., A]
  return jnp.sum(per_dim, axis=-1)  # [...]


def entropy(std: jax.Array) -> jax.Array:
  """Entropy of the diagonal Gaussian, which depends on the std only.

  Args:
    std: float32 [..., A], > 0.

  Returns:
    float32 [...], summed over the action dim: sum(0.5 + 0.5 log(2 pi) + log std).
  """
  if jnp.ndim(std) < 1:
    raise ValueError(f"std must have an action dim, got shape {jnp.shape(std)}.")
  return jnp.sum(0.5 + 0.5 * _LOG_2PI + jnp.log(std), axis=-1)  # [...]


def from_config(config: config_lib.TrainConfig, action_size: int,
                scan_start: int | None = None) -> ActorCritic:
  """The actor-critic a run's `config.network` describes, for `action_size` actions.

  `scan_start` is where the height scan starts in the policy observation (the env's
  `policy_layout.offsets()["height_scan"]`); it is needed only when the config gives the scan
  its own branch (`network.scan_encoder_sizes`).
  """
  net = config.network
  scan = None
  if config.scan.enabled and net.scan_encoder_sizes:
    if scan_start is None:
      raise ValueError("network.scan_encoder_sizes needs the scan's place in the observation: "
                       "pass scan_start.")
    scan = (scan_start, config.scan.num_points)
  return make_actor_critic(
      action_size=action_size,
      actor_hidden_sizes=net.actor_hidden_sizes,
      critic_hidden_sizes=net.critic_hidden_sizes,
      activation=net.activation,
      init_std=net.init_std,
      scan=scan,
      scan_encoder_sizes=net.scan_encoder_sizes if scan else (),
  )
