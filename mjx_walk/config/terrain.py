"""The `terrain` section: the ground every env stands on (plane or heightfield tiles), the terrain
types and their difficulty ranges, and the level curriculum (read by `mjx_walk.sim.terrain`)."""

import dataclasses

from mjx_walk.config._checks import (check_nonnegative, check_positive, check_positive_int,
                                     check_range, fail, range_field)

TERRAIN_TYPES = ("flat", "rough", "slope", "stairs_up", "stairs_down", "obstacles")
"""Heightfield terrain types (`mjx_walk.sim.terrain`), in code order."""
GROUNDS = ("plane", "heightfield")
"""`terrain.ground`: MuJoCo's infinite plane, or a heightfield tile per env."""
PROMOTION_RULES = ("promote_fraction", "promote_distance", "promote_within_reach",
                   "demote_fraction", "min_commanded_distance")
"""The fields that only move a training env between levels when its episode ends: the held-out
panel's ground and episodes do not depend on them, so the panel's hash leaves them out
(`Manifest.panel_hash`) and runs that differ only in them are compared on one panel."""


@dataclasses.dataclass
class TerrainConfig:
  """The ground every env stands on, and the difficulty curriculum on heightfields.

  `plane` is MuJoCo's infinite plane (slopes are tilted gravity). `heightfield` gives every env
  its own periodic tile of terrain (`mjx_walk.sim.terrain`): a training family's seed fixes its
  terrain type and shape, and the env's curriculum level (0 .. num_levels - 1) fixes the
  difficulty d = level / (num_levels - 1), which scales each type's magnitude linearly from the
  low to the high end of its range below. On a heightfield only the feet and the robot's knees
  collide with the ground; the trunk and thighs are checked against its surface. The trunk's
  touch ends the episode as `body_contact` (`env.terminate_on_body_contact` must be on), and so
  does a thigh's unless `env.limb_contact_ends` is off.
  """

  ground: str = "plane"
  """"plane" or "heightfield"."""
  tile_size: float = 4.0
  """Side of the square terrain tile, m; the terrain repeats with this period, and a robot that
  walks off the tile is moved back by whole tiles onto the same ground."""
  margin: float = 0.6
  """Terrain modelled beyond each side of the tile, m, so that feet and body stay on it while
  the trunk is inside the tile."""
  resolution: float = 0.1
  """Spacing of the heightfield's samples, m; tile_size, margin, platform_size and rough_cell
  must be whole multiples of it."""
  max_contact_points: int = 0
  """MJX keeps at most this many contacts of each contact dimension per physics step, the
  deepest (the feet's condim-3 contacts, the knees' condim-1 ones), as MJX's own
  `max_contact_points` numeric; 0 keeps every slot its sphere-heightfield collider emits, 4 per
  sphere. Fewer slots make fewer constraint rows: at 8, 52 rows for the Go2 instead of 92
  (experiments/README.md, "Fewer contact slots"). C MuJoCo ignores it.
  At least the robot's feet (checked when the robot is loaded)."""
  platform_size: float = 1.2
  """Side of the flat square at the tile's centre where every episode starts, m."""
  types: tuple[str, ...] = ("rough", "slope", "stairs_up", "stairs_down", "obstacles")
  """Terrain types of the training families, from `TERRAIN_TYPES`."""
  type_weights: tuple[float, ...] = (0.2, 0.2, 0.2, 0.2, 0.2)
  """Probability of each of `types` for a training family (normalised)."""
  rough_height: tuple[float, float] = range_field(0.0, 0.10)
  """`rough`: bump height at difficulty 0 and 1, m (bumps are uniform in [0, height])."""
  rough_cell: float = 0.2
  """`rough`: spacing of the random bump heights, m (interpolated between them)."""
  slope_degrees: tuple[float, float] = range_field(0.0, 25.0)
  """`slope`: angle of the pyramid's faces at difficulty 0 and 1, degrees (up or down)."""
  stair_height: tuple[float, float] = range_field(0.05, 0.23)
  """`stairs_up` / `stairs_down`: riser height at difficulty 0 and 1, m."""
  stair_width: float = 0.3
  """Tread depth of every stair, m."""
  obstacle_height: tuple[float, float] = range_field(0.05, 0.20)
  """`obstacles`: the tallest block at difficulty 0 and 1, m (blocks are 0.25 to 1 of it)."""
  obstacle_count: int = 8
  """`obstacles`: blocks per tile."""
  obstacle_size: tuple[float, float] = range_field(0.3, 1.0)
  """`obstacles`: side lengths of the blocks, m."""
  num_levels: int = 10
  """Curriculum levels; level 0 is difficulty 0 and the last level difficulty 1."""
  initial_level_max: int = 3
  """Each env starts at a level drawn uniformly from 0 .. initial_level_max."""
  promote_fraction: float = 0.8
  """An episode that lasts to the time limit and walks at least this fraction of its commanded
  distance moves its env one level up (when `promote_distance` is 0)."""
  promote_distance: float = 0.0
  """When > 0, the promotion rule is instead by distance, as legged_gym's: an episode that lasts
  to the time limit and ends at least this far from where it started, m (in a straight line, the
  wrap's whole tiles included), moves its env one level up, whatever it was commanded; half the
  tile is the walk from its centre straight to its edge, across its terrain. Unlike legged_gym,
  an episode that fell is not promoted, however far it went. The demotion rule is the same
  under both."""
  promote_within_reach: bool = False
  """With `promote_distance` > 0: an episode whose command schedule cannot take a trunk
  `promote_distance` from its start (the schedule's reach, followed exactly: a turning or slow
  command's is short) is judged by the fraction rule instead: at the time limit, commanded at
  least `min_commanded_distance`, and `promote_fraction` of it walked along the command. A
  family's schedule is the same every episode, so without this its envs move up only by
  overshooting their command."""
  demote_fraction: float = 0.5
  """An episode that terminates (fall, body contact, ...) or walks less than this fraction of
  its commanded distance moves its env one level down."""
  min_commanded_distance: float = 2.0
  """Episodes commanded to walk less than this, m, judge nothing by distance (only a termination
  moves them down)."""
  panel_rough_height: float = 0.05
  """Held-out `rough` stratum: bump height, m."""
  panel_stair_height: float = 0.10
  """Held-out `stairs` stratum: riser height, m (its families alternate up and down)."""
  panel_obstacle_height: float = 0.08
  """Held-out `obstacles` stratum: the tallest block, m."""

  @property
  def heightfield(self) -> bool:
    return self.ground == "heightfield"


def _multiple_of(where: str, value: float, step: float) -> None:
  if not value > 0 or abs(value / step - round(value / step)) > 1e-6:
    fail(where, value, f"it must be a positive whole multiple of terrain.resolution={step}")


def validate(terrain: TerrainConfig) -> None:
  """The terrain section's own rules; on a plane only `ground` is read. (The platform's room
  for the spawn offset and the body-contact ending are cross-section rules.)"""
  if terrain.ground not in GROUNDS:
    fail("terrain.ground", terrain.ground, f"it must be one of {', '.join(GROUNDS)}")
  if not terrain.heightfield:
    return
  check_positive("terrain.resolution", terrain.resolution)
  for name in ("tile_size", "margin", "platform_size", "rough_cell"):
    _multiple_of(f"terrain.{name}", getattr(terrain, name), terrain.resolution)
  if not isinstance(terrain.max_contact_points, int) or terrain.max_contact_points < 0:
    fail("terrain.max_contact_points", terrain.max_contact_points,
         "it must be 0 (every contact slot) or a positive integer")
  if terrain.platform_size >= terrain.tile_size:
    fail("terrain.platform_size", terrain.platform_size,
         f"it must be smaller than terrain.tile_size={terrain.tile_size}")
  cells = round(terrain.tile_size / terrain.resolution)
  if cells % round(terrain.rough_cell / terrain.resolution):
    fail("terrain.rough_cell", terrain.rough_cell,
         f"it must divide terrain.tile_size={terrain.tile_size} (the bumps repeat with the tile)")
  if terrain.margin < 0.5:
    fail("terrain.margin", terrain.margin,
         "it must be >= 0.5 m, so that the feet stay on the terrain while the trunk is on the tile")
  if (not terrain.types or len(set(terrain.types)) != len(terrain.types)
      or any(t not in TERRAIN_TYPES for t in terrain.types)):
    fail("terrain.types", terrain.types,
         f"it must be a non-empty tuple of distinct names from {', '.join(TERRAIN_TYPES)}")
  if (len(terrain.type_weights) != len(terrain.types) or any(w < 0 for w in terrain.type_weights)
      or not sum(terrain.type_weights) > 0):
    fail("terrain.type_weights", terrain.type_weights,
         f"give one weight >= 0 per terrain.types entry ({len(terrain.types)}), not all 0")
  for name in ("rough_height", "slope_degrees", "stair_height", "obstacle_height",
               "obstacle_size"):
    check_range(f"terrain.{name}", getattr(terrain, name), nonnegative=True)
  if terrain.slope_degrees[1] >= 60:
    fail("terrain.slope_degrees", terrain.slope_degrees, "both ends must be in [0, 60)")
  check_positive("terrain.stair_width", terrain.stair_width)
  if terrain.obstacle_size[0] <= 0:
    fail("terrain.obstacle_size", terrain.obstacle_size, "both ends must be > 0")
  check_positive_int("terrain.obstacle_count", terrain.obstacle_count)
  if not isinstance(terrain.num_levels, int) or terrain.num_levels < 2:
    fail("terrain.num_levels", terrain.num_levels, "it must be an integer >= 2")
  if (not isinstance(terrain.initial_level_max, int)
      or not 0 <= terrain.initial_level_max < terrain.num_levels):
    fail("terrain.initial_level_max", terrain.initial_level_max,
         f"it must be an integer in [0, terrain.num_levels - 1 = {terrain.num_levels - 1}]")
  if not 0 <= terrain.demote_fraction < terrain.promote_fraction:
    fail("terrain.demote_fraction", terrain.demote_fraction,
         f"it must be >= 0 and below terrain.promote_fraction={terrain.promote_fraction}")
  check_nonnegative("terrain.min_commanded_distance", terrain.min_commanded_distance)
  check_nonnegative("terrain.promote_distance", terrain.promote_distance)
  if not isinstance(terrain.promote_within_reach, bool):
    fail("terrain.promote_within_reach", terrain.promote_within_reach, "it must be True or False")
  if terrain.promote_within_reach and not terrain.promote_distance > 0:
    fail("terrain.promote_within_reach", terrain.promote_within_reach,
         f"it needs terrain.promote_distance > 0 (got {terrain.promote_distance}), whose rule it "
         "extends to commands that cannot reach that distance")
  for name in ("panel_rough_height", "panel_stair_height", "panel_obstacle_height"):
    check_nonnegative(f"terrain.{name}", getattr(terrain, name))
