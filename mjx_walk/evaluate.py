"""`python -m mjx_walk.evaluate`: evaluates a saved checkpoint on the run's held-out panel.

  python -m mjx_walk.evaluate --run_dir=runs/<run> [--step=N] [--seed=K|best]
                              [--panel=heldout] [--compare=runs/<other>]

Evaluates the checkpoint on the run's own panel (from its manifest), writes eval/<step>.json into
the run folder and prints the per-stratum table. A run of several training seeds is evaluated
seed by seed in one pass (the table gives the means over seeds and their 95% intervals); with
--seed, only that seed's policy is, and its record goes to eval/<step>_seed<k>.json, beside the
record of every seed. --compare also evaluates another run's newest checkpoint (or a checkpoint
folder, runs/<other>/checkpoints/<step>; every seed of a multi-seed run) on the SAME panel, by the
same code, and prints both side by side, over the seeds of both when both have several. Both
checkpoints are verified, the seed must name one of the run, and the other policy must observe
what this panel gives, before anything is evaluated or written; otherwise the command refuses
with one `error:` line and exit status 2.
"""

from __future__ import annotations

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk.evaluation import panel
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger

_PANEL = flags.DEFINE_string("panel", "heldout",
                             f"Panel to evaluate on: {', '.join(panel.PANELS)}.")
_COMPARE = flags.DEFINE_string(
    "compare", None, "Another run folder whose newest policy (every seed's, of a multi-seed "
    "run) is evaluated on this panel.")


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if not cli.RUN_DIR.value:
    cli.refuse("give the run to evaluate: --run_dir=runs/<run>")
  if _PANEL.value not in panel.PANELS:
    cli.refuse(
        f"--panel={_PANEL.value!r} is unknown; the panels are {', '.join(panel.PANELS)} (the "
        "run's held-out families from its manifest)")
  try:
    record, other, path = panel.evaluate_checkpoint(cli.RUN_DIR.value, cli.STEP.value,
                                                    _COMPARE.value, cli.SEED.value)
  except (checkpoint.CheckpointError, ValueError) as error:
    cli.refuse(str(error))
  print(ledger.format_eval_table(record))
  print(f"recorded in {path}")
  if other is not None:
    compare = (ledger.format_seed_comparison if "seeds" in record and "seeds" in other else
               ledger.format_comparison)
    print(compare(record, other, (cli.RUN_DIR.value, _COMPARE.value)))


if __name__ == "__main__":
  app.run(main)
