"""The `checkpoint` section: when a run saves itself and which checkpoints it keeps."""

import dataclasses

from mjx_walk.config._checks import check_positive_int


@dataclasses.dataclass
class CheckpointConfig:
  """When a run saves itself (see `mjx_walk.run.checkpoint`)."""

  every_chunks: int = 10
  """Save every this many chunks; the run also saves at its end and when stopped."""
  max_to_keep: int = 3
  """The newest checkpoints kept; older ones are deleted, except the best one."""
  keep_best: bool = True
  """Also keep the checkpoint with the best held-out score (mean success rate over the strata;
  fall rate breaks ties). Until an evaluation has been saved, the best is the latest."""


def validate(checkpoint: CheckpointConfig) -> None:
  for name in ("every_chunks", "max_to_keep"):
    check_positive_int(f"checkpoint.{name}", getattr(checkpoint, name))
