"""Does the batch rule hold as the env count grows? One config trained at several env counts, for
the same wall-clock budget each, judged on the held-out panel.

  python experiments/measurements/scaling_sweep.py --out_dir=runs/sweep    # 256 to 2048 envs
  python experiments/measurements/scaling_sweep.py --out_dir=runs/sweep_naive --naive
      # only num_envs changed
  python experiments/measurements/scaling_sweep.py --out_dir=/tmp/smoke --config=tiny.py \
      --num_envs=16,32 --budget_minutes=0.4    # a smoke run: tiny.py returns tests/configs.tiny()

Each count in --num_envs is the base config (the default, or --config with its overrides)
scaled by the rule of `mjx_walk/scaling.py` (`--scale_num_envs`'s rule), or with --naive only its
num_envs changed. The rule only scales out, so a count below the base's num_envs runs with only
num_envs changed as well, and its line says so. Every count's config is built and validated, and
every run folder checked, before the first one trains. Each trains with `mjx_walk.runner.run` for
--budget_minutes (default 6) of wall-clock, compilation and evaluations included, evaluating the
held-out panel every --eval_every_minutes (default 2) and at the end (the wall-clock setup of
`experiments/measurements/learn_benchmark.py`), into <out_dir>/<num_envs>_<rule>. As each run
ends it prints ONE JSON line:

  num_envs         the count
  rule             "scaled" (by the rule) or "naive" (only num_envs changed)
  changed          {dotted field: [base value, value]} of every field changed for this count
  note             why a count the rule was asked to scale ran naive (below the base); else absent
  minutes_to_walk, env_steps, train_sps, final, curve
                   `walking.summarize` of the run's ledger (`final` is the last
                   evaluation's per-stratum table, `curve` the `flat` stratum at each evaluation)
  budget_minutes, run_dir

A run that diverges adds `diverged_at_update` to its line, and the sweep goes on; a run stopped
with Ctrl-C or SIGTERM prints its line and ends the sweep.
"""

from __future__ import annotations

import copy
import json
import pathlib
import sys
from typing import Any

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk import scaling
from mjx_walk import train
from mjx_walk.analysis import report
from mjx_walk.evaluation import walking
from mjx_walk.run import ledger
from mjx_walk.run import run_folder

# The training command's flags: --config is the base config here (`train.config_flag`), --resume
# and --scale_num_envs are refused.

_NUM_ENVS = flags.DEFINE_list("num_envs", ["256", "512", "1024", "2048"],
                              "Env counts to train, comma-separated.")
_NAIVE = flags.DEFINE_bool("naive", False,
                           "Change only num_envs at every count, for contrast with the rule.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Folder for the runs: <out_dir>/<num_envs>_<rule>.")
# The wall-clock benchmark's two flags (experiments/measurements/learn_benchmark.py), with the
# sweep's defaults.
_BUDGET = flags.DEFINE_float("budget_minutes", 6.0, "Wall-clock budget, compile included.")
_EVAL_EVERY = flags.DEFINE_float("eval_every_minutes", 2.0, "Held-out evaluation interval.")

SCALED, NAIVE = "scaled", "naive"


def plan(base: config_lib.TrainConfig, counts: list[int], naive: bool
         ) -> list[tuple[str, config_lib.TrainConfig, str | None]]:
  """(rule, config, note) for each count, each config validated; nothing is trained.

  Args:
    base: the config every count starts from.
    counts: the env counts.
    naive: change only num_envs, at every count.

  Raises:
    ValueError: a count the rule (or, naive, `config.validate`) refuses, naming it.
  """
  planned = []
  for count in counts:
    if naive or count < base.num_envs:
      config = copy.deepcopy(base)
      config.num_envs = count
      config_lib.validate(config)
      note = None if naive else (f"below the base's {base.num_envs} envs, which the rule does not "
                                 "scale down to: only num_envs changed")
      planned.append((NAIVE, config, note))
    else:
      planned.append((SCALED, scaling.scale(base, count), None))
  return planned


def sweep_line(count: int, rule: str, changed: dict[str, tuple[Any, Any]], note: str | None,
               summary: dict, budget_minutes: float, run_dir: pathlib.Path) -> dict:
  """The JSON record of one count: what changed and what `walking.summarize` found."""
  line = {"num_envs": count, "rule": rule,
          "changed": {key: [old, new] for key, (old, new) in changed.items()}}
  if note:
    line["note"] = note
  line.update({key: summary[key] for key in ("minutes_to_walk", "env_steps", "train_sps",
                                             "final", "curve")})
  line.update(budget_minutes=budget_minutes, run_dir=str(run_dir))
  return line


def _counts(values: list[str]) -> list[int]:
  counts = []
  for value in values:
    try:
      counts.append(int(value))
    except ValueError:
      cli.refuse(f"--num_envs={','.join(values)}: {value!r} is not an integer; give "
                 "comma-separated env counts, e.g. --num_envs=512,1024,2048")
  if not counts or len(set(counts)) != len(counts):
    cli.refuse(f"--num_envs={','.join(values)}: give distinct env counts, e.g. "
               "--num_envs=512,1024,2048")
  return counts


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if not _OUT_DIR.value:
    cli.refuse("give --out_dir, the folder the sweep's runs go in")
  for name in ("run_dir", "resume", "scale_num_envs"):
    if flags.FLAGS[name].present:
      cli.refuse(f"--{name} is not a sweep flag: the runs go in --out_dir, one per --num_envs "
                 "count, each scaled by the rule (or --naive)")
  base = train.config_flag()
  budget, eval_every = _BUDGET.value, _EVAL_EVERY.value
  counts = _counts(_NUM_ENVS.value)
  try:
    planned = plan(base, counts, _NAIVE.value)
    run_dirs = [pathlib.Path(_OUT_DIR.value) / f"{count}_{rule}"
                for count, (rule, _, _) in zip(counts, planned)]
    for run_dir in run_dirs:
      run_folder.RunFolder(run_dir).refuse_existing()
  except ValueError as error:  # run_folder.RunFolderError is a ValueError too
    cli.refuse(str(error))
  for count, (rule, config, note), run_dir in zip(counts, planned, run_dirs):
    diverged = None
    try:
      ran = runner.run(walking.for_wall_clock(config), run_dir,
                       wall_budget_seconds=60 * budget, eval_every_seconds=60 * eval_every)
      if not ran.stopped:
        report.build(run_dir, log=lambda _: None)  # plots and report.md, as the train command
    except runner.Diverged as error:  # a result of the sweep, not a reason to stop it
      print(f"error: {error}", file=sys.stderr, flush=True)
      diverged = error.update
    records = ledger.read_run(run_dir)
    line = sweep_line(count, rule, scaling.changes(base, config), note,
                      walking.summarize(records), budget, run_dir)
    if diverged is not None:
      line["diverged_at_update"] = diverged
    print(json.dumps(line), flush=True)
    if diverged is None and records[-1]["kind"] != "eval":
      # Stopped by Ctrl-C or SIGTERM (a run that ends by its budget evaluates last).
      print(f"stopped at {count} envs; the sweep ends here", flush=True)
      return


if __name__ == "__main__":
  app.run(main)
