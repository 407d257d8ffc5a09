"""`python -m mjx_walk.report`: plots, videos and report.md of one run folder.

  python -m mjx_walk.report runs/<run>                      # plots and report.md from the ledger
  python -m mjx_walk.report runs/<run> --videos             # also render the newest saved traces
  python -m mjx_walk.report runs/<run> --step=1200          # evaluate checkpoint 1200 with traces,
                                                            # render it, then the report
"""

from __future__ import annotations

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk.analysis import report
from mjx_walk.analysis import videos
from mjx_walk.run import checkpoint

_VIDEOS = flags.DEFINE_bool(
    "videos", False, "Render one held-out episode per stratum: from the newest saved traces, or "
    "by evaluating the newest checkpoint when the run has none.")


def main(argv: list[str]) -> None:
  """Builds the report of one run folder and prints where everything is.

  Raises:
    SystemExit: status 2 for not exactly one run folder; status 1, with the reason on stderr,
      for a missing run folder, ledger, config or manifest, a malformed ledger, an unknown
      checkpoint step or one that fails verification, or (with --videos or --step) no usable
      offscreen GL backend. Nothing is evaluated or written then.
  """
  cli.quiet_library_logs()
  if len(argv) != 2:
    cli.refuse("give one run folder: python -m mjx_walk.report runs/<run> [--videos] "
               f"[--step=N]; got {argv[1:]}")
  try:
    built = report.build(argv[1], videos=_VIDEOS.value, step=cli.STEP.value)
  except (FileNotFoundError, ValueError, RuntimeError, checkpoint.CheckpointError) as error:
    cli.refuse(str(error), status=1)
  for plot in built.plots:
    print(f"plot   {plot.path}" if plot.path else f"plot   {plot.name}: skipped, {plot.note}")
  if built.traces:
    print(f"traces {built.traces}")
  for video in built.videos:
    print(f"video  {video}")
  if built.videos:
    print(f"captions {built.videos[0].parent / videos.CAPTIONS_FILENAME}")
  print(f"report {built.report}")


if __name__ == "__main__":
  app.run(main)
