"""The joystick command ranges that the training families and the held-out panel each declare.

`families` and `panel` both subclass `CommandRanges`, so their `command_*` fields are declared and
checked here once.
"""

import dataclasses

from mjx_walk.config._checks import check_range, fail, range_field


@dataclasses.dataclass
class CommandRanges:
  """The joystick command schedule's ranges; the training families and the held-out panel each
  have their own (`families.command_*`, `panel.command_*`), declared and validated here once.

  A family's schedule is a sequence of commands, each held for an interval drawn from
  `command_resample_seconds`, each axis uniform in its range. Velocities are in the trunk's
  heading frame.
  """

  command_vx: tuple[float, float] = range_field(-1.0, 1.0)
  """Forward velocity command range, m/s."""
  command_vy: tuple[float, float] = range_field(-0.5, 0.5)
  """Lateral velocity command range, m/s."""
  command_yaw_rate: tuple[float, float] = range_field(-0.5, 0.5)
  """Yaw-rate command range, rad/s."""
  command_resample_seconds: tuple[float, float] = range_field(5.0, 10.0)
  """Time between two commands of a schedule, s, drawn per interval."""


def validate(section: str, ranges: CommandRanges) -> None:
  """The command ranges of `families` or `panel` (named by `section`): (low, high) pairs,
  intervals > 0."""
  for name in ("command_vx", "command_vy", "command_yaw_rate", "command_resample_seconds"):
    check_range(f"{section}.{name}", getattr(ranges, name))
  if ranges.command_resample_seconds[0] <= 0:
    fail(f"{section}.command_resample_seconds", ranges.command_resample_seconds,
         "both ends must be > 0")
