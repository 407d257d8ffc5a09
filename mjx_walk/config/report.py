"""The `report` section: the size and rate of a run's videos, and how often they are rendered."""

import dataclasses

from mjx_walk.config._checks import check_positive_int, fail


@dataclasses.dataclass
class ReportConfig:
  """Pictures of a run (see `mjx_walk.analysis.report`)."""

  video_every_chunks: int = 0
  """Also render held-out episodes every this many chunks (0: only at the end of the run)."""
  video_width: int = 320
  video_height: int = 240
  video_fps: int = 25
  """Frames per second of simulated time; the control rate must be a whole multiple of it."""


def validate(report: ReportConfig) -> None:
  """The report section's own rules (the video rate against the control rate is a
  cross-section rule)."""
  for name in ("video_width", "video_height", "video_fps"):
    check_positive_int(f"report.{name}", getattr(report, name))
  if not isinstance(report.video_every_chunks, int) or report.video_every_chunks < 0:
    fail("report.video_every_chunks", report.video_every_chunks,
         "it must be an integer >= 0 (0: videos only at the end of the run)")
