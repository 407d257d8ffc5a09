"""The `scan` section: the height scan the policy sees (a grid of ground heights around the robot),
its sensing noise, and its own checks (read by `mjx_walk.sim.height_scan`)."""

import dataclasses
import math

from mjx_walk.config._checks import check_nonnegative, fail, range_field

MAX_POINTS = 1024
"""The most scan points a config may ask for (the observation grows by one per point)."""


@dataclasses.dataclass
class ScanConfig:
  """A grid of points fixed in the trunk's yaw frame, each reading the trunk's height above the
  ground under it, m (`mjx_walk.sim.height_scan`).

  The grid spans `length` along the trunk's heading and `width` across it, centred on the trunk,
  every `spacing` metres: (length / spacing + 1) x (width / spacing + 1) points. The policy reads
  it with sensing noise (`noise`, `offset_noise`, `missing_rate`, scaled like the other blocks by
  `env.obs_noise_scale`); the critic always reads it clean.
  """

  enabled: bool = False
  """Whether the policy and the critic observe the scan."""
  length: float = 1.6
  """Extent of the grid along the trunk's heading, m (from -length/2 behind to +length/2 ahead)."""
  width: float = 1.0
  """Extent of the grid across the heading, m (from -width/2 right to +width/2 left)."""
  spacing: float = 0.1
  """Distance between neighbouring points, m; length and width must be whole multiples of it."""
  clip: tuple[float, float] = range_field(-0.5, 1.0)
  """Readings are clipped to [low, high], m; a missing point reads `high` (no ground seen)."""
  noise: float = 0.0
  """Per point and control step: uniform noise of this half-width, m."""
  offset_noise: float = 0.0
  """Per episode: the whole map is shifted up or down by a uniform draw of this half-width, m
  (an elevation map's drift against the trunk)."""
  missing_rate: float = 0.0
  """Per point and control step: the probability that the point is missing and reads `clip[1]`
  (occlusion, a dropped cell of the elevation map)."""

  @property
  def shape(self) -> tuple[int, int]:
    """(points along the heading, points across it)."""
    return (round(self.length / self.spacing) + 1, round(self.width / self.spacing) + 1)

  @property
  def num_points(self) -> int:
    rows, columns = self.shape
    return rows * columns

  @property
  def reach(self) -> float:
    """The farthest point's horizontal distance from the trunk, m."""
    return math.hypot(self.length / 2, self.width / 2)


def validate(scan: ScanConfig) -> None:
  """The scan section's own rules (how far it may reach on a heightfield is a cross-section
  rule). Nothing is read while the scan is off."""
  if not isinstance(scan.enabled, bool):
    fail("scan.enabled", scan.enabled, "it must be True or False")
  if not scan.enabled:
    return
  if not scan.spacing > 0:
    fail("scan.spacing", scan.spacing, "it must be > 0, in m")
  for name in ("length", "width"):
    value = getattr(scan, name)
    if value < 0 or abs(value / scan.spacing - round(value / scan.spacing)) > 1e-6:
      fail(f"scan.{name}", value,
           f"it must be >= 0 and a whole multiple of scan.spacing={scan.spacing}")
  if scan.num_points > MAX_POINTS:
    fail("scan.spacing", scan.spacing,
         f"the grid of scan.length={scan.length} x scan.width={scan.width} would have "
         f"{scan.num_points} points; at most {MAX_POINTS} are accepted (a wider spacing or a "
         "smaller grid)")
  if not (isinstance(scan.clip, (tuple, list)) and len(scan.clip) == 2
          and scan.clip[0] < 0 < scan.clip[1]):
    fail("scan.clip", scan.clip,
         "it must be a (low, high) pair with low < 0 < high, in m (ground below and above the "
         "trunk)")
  for name in ("noise", "offset_noise"):
    check_nonnegative(f"scan.{name}", getattr(scan, name))
  if not 0 <= scan.missing_rate < 1:
    fail("scan.missing_rate", scan.missing_rate, "it must be in [0, 1)")
