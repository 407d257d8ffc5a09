"""The `panel` section: the held-out evaluation panel's strata, families and success thresholds,
and the names of the strata."""

import dataclasses

from mjx_walk.config import commands
from mjx_walk.config._checks import check_positive, check_positive_int, check_range, fail
from mjx_walk.config._checks import range_field

STRATA = ("flat", "slope", "push", "payload", "friction")
"""The default held-out evaluation strata: every one of them stands on level ground."""
STAIR_RISERS_CM = (5, 10, 15, 20)
"""Riser heights of the held-out stairs strata by step height, cm."""
STAIR_STRATA = {f"stairs_{way}_{cm}cm": (f"stairs_{way}", cm / 100)
                for way in ("up", "down") for cm in STAIR_RISERS_CM}
"""Held-out stairs of one direction and one riser height each, name -> (terrain type, riser m):
`stairs_up_15cm` climbs out of a pit of 15 cm steps, `stairs_down_15cm` descends a pyramid of
them, so the panel's table shows at which height a policy stops climbing."""
TERRAIN_STRATA = ("rough", "stairs", "obstacles") + tuple(STAIR_STRATA)
"""Held-out strata on heightfield terrain (`terrain.ground="heightfield"` only)."""
ALL_STRATA = STRATA + TERRAIN_STRATA
"""Every stratum `mjx_walk.sim.families` knows how to draw."""

@dataclasses.dataclass
class PanelConfig(commands.CommandRanges):
  """The held-out evaluation panel: strata of families that training never sees.

  Its families are drawn from `seed`, not from the run seed, so runs with different seeds are
  judged on the same panel and can be compared. Its command schedules come from its own
  `CommandRanges`. Conditions not named by a stratum are nominal:
  `nominal_friction`, `nominal_joint_friction`, no payload, full motor strength, no delay, no
  pushes, level ground.
  """

  seed: int = 2026
  """Seed of the panel's family seeds; the whole panel is a function of this section alone."""
  strata: tuple[str, ...] = STRATA
  families_per_stratum: int = 8
  envs_per_family: int = 4
  episode_seconds: float = 10.0
  """Length of every evaluation episode; reaching it is success if tracking is good enough."""
  every_chunks: int = 25
  """Evaluate every this many training chunks (0: only at the end of the run)."""
  nominal_friction: float = 0.8
  """Ground friction wherever a stratum does not set it (the training range's midpoint)."""
  nominal_joint_friction: float = 0.175
  """Joint friction of every panel family, N·m·s/rad (the training range's midpoint)."""
  slope_degrees: float = 15.0
  """`slope`: gravity tilted by this angle in a random direction (an inclined plane)."""
  push_force: float = 100.0
  """`push`: force of each push, N."""
  push_seconds: float = 0.1
  """`push`: duration of each push, s."""
  pushes_per_episode: int = 2
  payload_mass: tuple[float, float] = range_field(4.0, 6.0)
  """`payload`: trunk mass added, kg; must lie above the training range."""
  friction: tuple[float, float] = range_field(0.15, 0.3)
  """`friction`: ground friction; must lie below the training range."""
  success_lin_vel_error: float = 0.25
  """An episode succeeds if it does not terminate and its mean xy velocity error is below this,
  m/s, ..."""
  success_yaw_rate_error: float = 0.3
  """... and its mean yaw-rate error is below this, rad/s."""

  @property
  def num_envs(self) -> int:
    return len(self.strata) * self.families_per_stratum * self.envs_per_family

  @property
  def num_families(self) -> int:
    return len(self.strata) * self.families_per_stratum


def validate(panel: PanelConfig) -> None:
  """The panel section's own rules (held out from the training ranges, and terrain strata only
  on terrain: cross-section rules)."""
  if not isinstance(panel.seed, int) or panel.seed < 0:
    fail("panel.seed", panel.seed, "it must be a non-negative integer")
  if not panel.strata or len(set(panel.strata)) != len(panel.strata) or any(
      s not in ALL_STRATA for s in panel.strata):
    fail("panel.strata", panel.strata,
         f"it must be a non-empty tuple of distinct names from {', '.join(ALL_STRATA)}")
  for name in ("families_per_stratum", "envs_per_family"):
    check_positive_int(f"panel.{name}", getattr(panel, name))
  if not isinstance(panel.every_chunks, int) or panel.every_chunks < 0:
    fail("panel.every_chunks", panel.every_chunks,
         "it must be an integer >= 0 (0: at the end only)")
  for name in ("episode_seconds", "push_force", "push_seconds", "success_lin_vel_error",
               "success_yaw_rate_error"):
    check_positive(f"panel.{name}", getattr(panel, name))
  if not 0 <= panel.slope_degrees < 90:
    fail("panel.slope_degrees", panel.slope_degrees, "it must be in [0, 90)")
  if not isinstance(panel.pushes_per_episode, int) or panel.pushes_per_episode <= 0:
    fail("panel.pushes_per_episode", panel.pushes_per_episode, "it must be a positive integer")
  commands.validate("panel", panel)
  check_positive("panel.nominal_friction", panel.nominal_friction)
  if panel.nominal_joint_friction < 0:
    fail("panel.nominal_joint_friction", panel.nominal_joint_friction, "it must be >= 0")
  check_range("panel.payload_mass", panel.payload_mass)
  check_range("panel.friction", panel.friction, nonnegative=True)
