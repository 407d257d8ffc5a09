"""The `network` section: the actor-critic's sizes, activation and initial exploration."""

import dataclasses

from mjx_walk.config._checks import check_positive, fail

ACTIVATIONS = ("elu", "relu", "tanh", "swish")
"""Accepted `network.activation` names: Flax's functions of the same names."""


@dataclasses.dataclass
class NetworkConfig:
  """The actor-critic."""

  actor_hidden_sizes: tuple[int, ...] = (128, 64, 32)
  critic_hidden_sizes: tuple[int, ...] = (128, 64, 32)
  activation: str = "elu"
  init_std: float = 0.75
  """Initial std of the Gaussian policy, in action units (x action_scale = 0.19 rad on Go2).
  Too much exploration noise shakes the trunk until the penalties outweigh every tracking reward
  and only survival is learned; experiments/README.md has the runs that chose 0.75."""
  scan_encoder_sizes: tuple[int, ...] = ()
  """Widths of the height scan's own branch (`mjx_walk.learn.networks.ScanEncoder`), in the
  actor and in the critic: the scan's points pass through these layers and their output joins
  the other inputs of the MLP. Empty: the scan's points enter the MLP with the other inputs.
  Without the scan (`scan.enabled=False`) there is no branch, whatever the sizes, so that
  `--config.scan.enabled=False` trains a recipe blind as it stands."""


def validate(net: NetworkConfig) -> None:
  for name in ("actor_hidden_sizes", "critic_hidden_sizes"):
    sizes = getattr(net, name)
    if not sizes or any(not isinstance(s, int) or s <= 0 for s in sizes):
      fail(f"network.{name}", sizes, "it must be a non-empty tuple of positive integers")
  if net.activation not in ACTIVATIONS:
    fail("network.activation", net.activation, f"choose one of {', '.join(ACTIVATIONS)}")
  check_positive("network.init_std", net.init_std)
  sizes = net.scan_encoder_sizes
  if not isinstance(sizes, (tuple, list)) or any(
      not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in sizes):
    fail("network.scan_encoder_sizes", sizes,
         "it must be a tuple of positive integers, or empty for no scan branch")
