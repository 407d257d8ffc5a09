"""The `audit` section: what the batch audits (`mjx_walk.learn.audit`) count as an event, and when
the flags (`mjx_walk.analysis.flags`) raise one."""

import dataclasses

from mjx_walk.config._checks import check_positive, fail


@dataclasses.dataclass
class AuditConfig:
  """The batch audits (see `mjx_walk.learn.audit` and `mjx_walk.analysis.flags`): what counts
  as an event, and when to flag it."""

  early_end_steps: int = 10
  """An episode that terminates within this many control steps is flagged as an early end."""
  traces_per_update: int = 2
  """State traces of early ends taken from each update (qpos, qvel and actions per step)."""
  max_traces: int = 50
  """Early-end traces kept in the run folder, at most."""
  slip_speed: float = 0.1
  """A foot in contact moving horizontally faster than this is slipping, m/s."""
  stumble_speed: float = 0.5
  """A foot touching down while moving horizontally faster than this stumbles, m/s."""
  min_event_count: int = 200
  """Contact events seen fewer times than this per update batch are flagged as too rare to learn
  from."""
  dominant_share: float = 0.5
  """A reward term with more than this share of the total absolute reward is flagged when
  tracking does not improve at the same time."""


def validate(audit: AuditConfig) -> None:
  for name in ("early_end_steps", "traces_per_update", "max_traces", "min_event_count"):
    value = getattr(audit, name)
    if not isinstance(value, int) or value < 0:
      fail(f"audit.{name}", value, "it must be an integer >= 0")
  for name in ("slip_speed", "stumble_speed"):
    check_positive(f"audit.{name}", getattr(audit, name))
  if not 0 < audit.dominant_share <= 1:
    fail("audit.dominant_share", audit.dominant_share, "it must be in (0, 1]")
