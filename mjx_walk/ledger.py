"""`python -m mjx_walk.ledger`: prints a run's ledger, or compares two runs on the same panel.

  python -m mjx_walk.ledger runs/<run>              # recipe, last update, latest evaluation
                                                    # (and second-simulator check)
  python -m mjx_walk.ledger runs/<a> runs/<b>       # latest evaluations side by side

Two runs are compared only when they were evaluated on the same panel: their recipes name the same
panel hash, or, where those differ, their manifests hash to the same panel today (a run recorded
before the hash left out the curriculum's promotion rules records another hash for the same panel);
otherwise the command refuses and exits with status 1. When both latest evaluations hold several
training seeds (`seeds`), the comparison is over seeds (`ledger.format_seed_comparison`): per
stratum and figure, the difference of the means with its 95% bootstrap interval and whether it is
within the seed spread. Otherwise it is the means side by side (`ledger.format_comparison`), which
notes when only one run has several seeds. It imports no JAX or MuJoCo (but to read manifests,
where the recorded panel hashes differ), so it answers at once.
"""

from __future__ import annotations

import pathlib
from typing import Any

from absl import app

from mjx_walk import cli
from mjx_walk.run import ledger


def format_update(record: dict[str, Any]) -> str:
  return (f"last update {record['update']}: {record['env_steps']:,} env steps, "
          f"return {ledger.fmt(record.get('episode/return'), '.2f')}, "
          f"sps {ledger.fmt(record.get('perf/sps'), ',.0f')}")


def panel_hash_now(run_dir: str, recorded: str) -> str:
  """The run's panel hash as `Manifest.panel_hash` defines it now, from its manifest; the
  recorded hash where the run folder has no manifest.

  Raises:
    SystemExit: status 1, for a manifest that does not match its own recorded hash.
  """
  from mjx_walk.run import run_folder  # JAX comes with it: only when the recorded hashes differ
  try:
    return run_folder.RunFolder(pathlib.Path(run_dir)).read_manifest().panel_hash
  except FileNotFoundError:
    return recorded
  except ValueError as error:
    cli.refuse(f"{run_dir}: {error}", status=1)


def main(argv: list[str]) -> None:
  """Shows one run, or compares the latest evaluations of two runs on the same panel.

  Raises:
    SystemExit: status 2 for zero or more than two run folders; status 1, with the reason on
      stderr, for a missing or malformed ledger, a run without a recipe, an edited manifest
      (read where the recorded panel hashes differ), or two runs evaluated on different panels.
  """
  run_dirs = argv[1:]
  if not 1 <= len(run_dirs) <= 2:
    cli.refuse(f"give one run folder, or two to compare; got {len(run_dirs)}")
  runs = []
  for run_dir in run_dirs:
    try:
      records = ledger.read_run(run_dir)
    except (FileNotFoundError, ValueError) as error:
      cli.refuse(str(error), status=1)
    if ledger.latest(records, "recipe") is None:
      cli.refuse(f"{pathlib.Path(run_dir) / ledger.FILENAME} has no recipe record", status=1)
    runs.append(records)

  if len(runs) == 1:
    records = runs[0]
    print(ledger.format_recipe(ledger.latest(records, "recipe")))
    update, evaluation = ledger.latest(records, "update"), ledger.latest(records, "eval")
    print(format_update(update) if update else "no update yet")
    print(ledger.format_eval_table(evaluation) if evaluation else "no evaluation yet")
    second = ledger.latest(records, "sim2sim")
    if second:
      print(ledger.format_sim2sim(second))
    return

  hashes = [ledger.latest(records, "recipe")["panel_hash"] for records in runs]
  if hashes[0] != hashes[1]:
    hashes = [panel_hash_now(run_dir, recorded) for run_dir, recorded in zip(run_dirs, hashes)]
  if hashes[0] != hashes[1]:
    cli.refuse(f"refusing to compare: the evaluation panels differ ({run_dirs[0]}: panel "
               f"{hashes[0]}, {run_dirs[1]}: panel {hashes[1]}). Runs are compared only on the "
               "same panel.", status=1)
  evaluations = [ledger.latest(records, "eval") for records in runs]
  for run_dir, evaluation in zip(run_dirs, evaluations):
    if evaluation is None:
      cli.refuse(f"{run_dir} has no evaluation yet; nothing to compare", status=1)
  compare = (ledger.format_seed_comparison if all("seeds" in e for e in evaluations)
             else ledger.format_comparison)
  print(compare(evaluations[0], evaluations[1], (run_dirs[0], run_dirs[1])))


if __name__ == "__main__":
  app.run(main)
