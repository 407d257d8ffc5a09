"""Learning curves of several runs on one figure, from their ledgers: how a recipe choice was made.

  python experiments/compare_runs.py --out=experiments/measurements/figures/recipe.png \
      baseline=runs/audit_10min linvel=runs/exp_linvel recipe=runs/exp_combo

  python experiments/compare_runs.py --stratum=stairs_up_10cm --out=runs/stairs.png \
      scan=runs/rough_scan blind=runs/rough_blind

  python experiments/compare_runs.py --stratum=stairs_up_15cm --levels=stairs_up,stairs_down \
      --at=6.14e6,9.22e6 --out=runs/stairs.png recipe=runs/rough_hour fine=runs/rough_fine_hour

Draws, against env steps and against wall-clock minutes, the training batch's xy-velocity
tracking error and mean swing (air) time, and the held-out stratum's (--stratum, default `flat`)
xy-velocity error and fall rate at every evaluation, one colour per run. On heightfield runs,
--levels adds a row per terrain type: the mean curriculum level of its training envs after each
update (the median dotted). Prints ONE JSON line: per run, its env steps, wall-clock minutes and
every evaluation of that stratum (env steps, minutes, xy error, fall rate), and for --levels
each type's [env steps, mean level, median level] at the update nearest each --at (null past
the run's last update by more than one update's env steps) and at the last update, so that
runs of one recipe are compared per env step whatever their machines' speeds. A run whose
evaluations never held the stratum, or whose curriculum lacks a --levels type, is refused,
naming what it has, before anything is drawn.
"""

from __future__ import annotations

import json
import pathlib

from absl import app
from absl import flags
from matplotlib.figure import Figure
import numpy as np

from mjx_walk.analysis import plots
from mjx_walk.run import ledger

_OUT = flags.DEFINE_string("out", "runs/compare.png", "Where the PNG goes.")
_STRATUM = flags.DEFINE_string("stratum", "flat", "The held-out stratum whose evaluations are "
                               "drawn (a name in the runs' panels, e.g. stairs_up_10cm).")

_LEVELS = flags.DEFINE_list("levels", [], "Terrain types whose curriculum levels are drawn and "
                            "quoted (heightfield runs), e.g. stairs_up,stairs_down.")
_AT = flags.DEFINE_list("at", [], "Env steps at which --levels are quoted, e.g. 6.14e6,9.22e6: "
                        "each run's update nearest to each.")

_TRAINING = (("tracking/lin_vel_error", "training lin vel error (m/s)"),
             ("contact/air_time_mean", "training mean air time (s)"))
_HELD_OUT = (("lin_vel_error", "held-out {} lin vel error (m/s)"),
             ("fall_rate", "held-out {} fall rate"))


def _parse(argument: str) -> tuple[str, pathlib.Path]:
  label, sep, path = argument.partition("=")
  if not sep or not label or not path:
    raise app.UsageError(f"{argument!r}: give runs as label=runs/<run>")
  if not (pathlib.Path(path) / ledger.FILENAME).is_file():
    raise app.UsageError(f"{argument!r}: there is no {ledger.FILENAME} in {path}")
  return label, pathlib.Path(path)


def _env_steps(values: list[str]) -> list[float]:
  """--at as numbers, each > 0."""
  steps = []
  for value in values:
    try:
      step = float(value)
    except ValueError:
      step = float("nan")
    if not step > 0:
      raise app.UsageError(f"--at={value!r}: give env steps as positive numbers, e.g. 6.14e6")
    steps.append(step)
  return steps


def _curriculum(label: str, run_dir: pathlib.Path, records: list[dict],
                kinds: list[str]) -> plots.CurriculumSeries | None:
  """The run's curriculum when --levels asks for one, refused if it lacks a type."""
  if not kinds:
    return None
  series = plots.curriculum_series(records)
  held = list(series.mean_level) if series else []
  missing = [kind for kind in kinds if kind not in held]
  if missing:
    raise app.UsageError(
        f"--levels={','.join(kinds)}: {label}={run_dir} has no curriculum of "
        f"{', '.join(missing)}; its terrain types are "
        f"{', '.join(held) or 'none (it is not a heightfield run)'}")
  return series


def _quote_levels(series: plots.CurriculumSeries, kind: str, at: list[float]) -> list:
  """[env steps, mean, median] of `kind` at the update nearest each of `at` (None past the last
  update by more than one update's env steps), then at the last update."""
  steps = series.env_steps
  stride = float(np.median(np.diff(steps))) if len(steps) > 1 else 0.0
  def point(i: int) -> list:
    return [int(steps[i]), round(float(series.mean_level[kind][i]), 3),
            float(series.median_level[kind][i])]
  quoted = [None if target > steps[-1] + stride else point(int(np.argmin(np.abs(steps - target))))
            for target in at]
  return quoted + [point(len(steps) - 1)]


def main(argv: list[str]) -> None:
  runs = [_parse(a) for a in argv[1:]]
  if not runs:
    raise app.UsageError("give at least one run as label=runs/<run>")
  stratum, kinds, at = _STRATUM.value, list(_LEVELS.value), _env_steps(_AT.value)
  loaded = []
  for label, run_dir in runs:
    records = ledger.read_run(run_dir)
    evals = ledger.of_kind(records, "eval")
    if not any(stratum in r["strata"] for r in evals):
      held = sorted({name for r in evals for name in r["strata"]})
      raise app.UsageError(
          f"--stratum={stratum!r}: no evaluation of {label}={run_dir} holds it; its strata are "
          f"{', '.join(held) or 'none (it has no evaluation)'}")
    loaded.append((label, run_dir, records, _curriculum(label, run_dir, records, kinds)))
  rows = len(_TRAINING) + len(_HELD_OUT) + len(kinds)
  figure = Figure(figsize=(11, 3 * rows), layout="constrained")
  axes = figure.subplots(rows, 2, sharex="col", squeeze=False)
  summary = {}
  for index, (label, run_dir, records, series) in enumerate(loaded):
    updates = ledger.of_kind(records, "update")
    evals = [r for r in ledger.of_kind(records, "eval") if stratum in r["strata"]]
    color = f"C{index % 10}"
    for col, (update_x, eval_x, scale) in enumerate(
        (("env_steps", "env_steps", 1.0), ("perf/wall_seconds", "wall_seconds", 1 / 60))):
      for row, (key, name) in enumerate(_TRAINING):
        points = [(r[update_x] * scale, r[key]) for r in updates if r.get(key) is not None]
        axes[row, col].plot(*zip(*points), color=color, lw=1, label=label)
        axes[row, col].set_ylabel(name)
      for row, (metric, name) in enumerate(_HELD_OUT, start=len(_TRAINING)):
        points = [(r[eval_x] * scale, r["strata"][stratum][metric]) for r in evals]
        axes[row, col].plot(*zip(*points), color=color, marker="o", ms=4, lw=1, label=label)
        axes[row, col].set_ylabel(name.format(stratum))
      for row, kind in enumerate(kinds, start=len(_TRAINING) + len(_HELD_OUT)):
        x = (series.env_steps, series.wall_seconds / 60)[col]
        axes[row, col].plot(x, series.mean_level[kind], color=color, lw=1.5, label=label)
        axes[row, col].plot(x, series.median_level[kind], color=color, lw=0.8, ls=":")
        axes[row, col].set_ylabel(f"{kind}: mean level (median dotted)")
    summary[label] = {
        "run_dir": str(run_dir),
        "env_steps": updates[-1]["env_steps"] if updates else 0,
        "minutes": round(updates[-1]["perf/wall_seconds"] / 60, 2) if updates else 0.0,
        stratum: [[r["env_steps"], round(r["wall_seconds"] / 60, 2)]
                  + [round(r["strata"][stratum][m], 4) for m, _ in _HELD_OUT] for r in evals],
    }
    if kinds:
      summary[label]["levels"] = {kind: _quote_levels(series, kind, at) for kind in kinds}
  for ax in axes.flat:
    ax.grid(alpha=0.3)
  axes[-1, 0].set_xlabel("env steps")
  axes[-1, 1].set_xlabel("wall-clock (minutes, compile included)")
  axes[0, 0].legend(fontsize="small")
  out = pathlib.Path(_OUT.value)
  out.parent.mkdir(parents=True, exist_ok=True)
  figure.savefig(out, dpi=80)
  print(json.dumps({"out": str(out), "runs": summary}))


if __name__ == "__main__":
  app.run(main)
