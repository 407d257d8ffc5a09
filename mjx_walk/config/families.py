"""The `families` section: how many training seed families, and the ranges of their draws."""

import dataclasses
import math

from mjx_walk.config import commands
from mjx_walk.config._checks import (check_nonnegative, check_positive, check_positive_int,
                                     check_range, fail, range_field)


@dataclasses.dataclass
class FamilyConfig(commands.CommandRanges):
  """The training panel: how many seed families, and the ranges every per-family draw comes from
  (the command ranges are `CommandRanges`').

  A family's seed fixes its spawn pose, its command schedule and one domain-randomization draw
  (see `mjx_walk.sim.families`); env i belongs to family i % num_train_families.
  """

  num_train_families: int = 128
  """Training seed families; num_envs must be divisible by it."""
  train_family_seeds: tuple[int, ...] = ()
  """Explicit training family seeds (exactly num_train_families of them). Empty: derived from
  `seed`. Seeds shared with the evaluation panel are refused as leakage."""
  spawn_yaw: tuple[float, float] = range_field(-math.pi, math.pi)
  """Heading at spawn, rad."""
  spawn_offset: float = 0.5
  """Spawn x and y offsets are each uniform in [-spawn_offset, spawn_offset], m."""
  friction: tuple[float, float] = range_field(0.4, 1.2)
  """Ground friction coefficient (sliding), written to the floor and the feet."""
  payload_mass: tuple[float, float] = range_field(-3.0, 3.0)
  """Mass added to the trunk, kg (negative removes mass)."""
  payload_com_offset: float = 0.05
  """The payload sits at a trunk-frame offset uniform in [-x, x] on each axis, m."""
  joint_friction: tuple[float, float] = range_field(0.05, 0.3)
  """Viscous joint friction added to the PD damping kd, N·m·s/rad."""
  motor_strength: tuple[float, float] = range_field(0.9, 1.1)
  """Scale of every actuator's position gain kp (its gain and bias terms). The PD damping kd is
  the MJCF joint damping and is not scaled; the torque limits are not scaled either."""
  action_delay_steps: tuple[int, int] = range_field(0, 1)
  """Actuator delay, whole control steps, inclusive."""
  push_force: tuple[float, float] = range_field(0.0, 50.0)
  """Magnitude of each push on the trunk, N, in a random horizontal direction."""
  push_seconds: float = 0.1
  """Duration of each push, s (rounded to whole control steps)."""
  pushes_per_episode: int = 2
  """Pushes in each episode of the family, at times drawn uniformly in the episode."""
  slope_degrees: tuple[float, float] = range_field(0.0, 10.0)
  """Ground slope, degrees: gravity tilted by this angle in a random direction (an inclined
  plane, as the panel's steeper `slope` stratum). (0, 0) trains on level ground only."""


def validate(fam: FamilyConfig) -> None:
  """The families section's own rules (num_envs's split into families is a cross-section rule)."""
  count = fam.num_train_families
  check_positive_int("families.num_train_families", count)
  seeds = fam.train_family_seeds
  if seeds:
    if len(seeds) != count:
      fail("families.train_family_seeds", seeds,
           f"give exactly num_train_families={count} seeds, or none to derive them from seed")
    if any(not isinstance(s, int) or s < 0 for s in seeds):
      fail("families.train_family_seeds", seeds, "seeds must be non-negative integers")
    if len(set(seeds)) != len(seeds):
      fail("families.train_family_seeds", seeds, "seeds must be distinct")
  commands.validate("families", fam)
  check_range("families.spawn_yaw", fam.spawn_yaw)
  for name in ("friction", "joint_friction", "motor_strength", "push_force",
               "action_delay_steps"):
    check_range(f"families.{name}", getattr(fam, name), nonnegative=True)
  check_range("families.payload_mass", fam.payload_mass)
  if fam.friction[0] <= 0 or fam.motor_strength[0] <= 0:
    bad = "friction" if fam.friction[0] <= 0 else "motor_strength"
    fail(f"families.{bad}", getattr(fam, bad), "both ends must be > 0")
  if any(not isinstance(d, int) for d in fam.action_delay_steps):
    fail("families.action_delay_steps", fam.action_delay_steps, "it must be a pair of integers")
  for name in ("spawn_offset", "payload_com_offset"):
    check_nonnegative(f"families.{name}", getattr(fam, name))
  check_positive("families.push_seconds", fam.push_seconds)
  if not isinstance(fam.pushes_per_episode, int) or fam.pushes_per_episode < 0:
    fail("families.pushes_per_episode", fam.pushes_per_episode, "it must be an integer >= 0")
  check_range("families.slope_degrees", fam.slope_degrees, nonnegative=True)
  if fam.slope_degrees[1] >= 90:
    fail("families.slope_degrees", fam.slope_degrees, "both ends must be in [0, 90)")
