"""Learning curves of several runs on one figure, from their ledgers: how a recipe choice was made.

  python experiments/compare_runs.py --out=experiments/measurements/figures/recipe.png \
      baseline=runs/audit_10min linvel=runs/exp_linvel recipe=runs/exp_combo

Draws, against env steps and against wall-clock minutes, the training batch's xy-velocity
tracking error and mean swing (air) time, and the held-out `flat` stratum's xy-velocity error
and fall rate at every evaluation, one colour per run. Prints ONE JSON line: per run, its env
steps, wall-clock minutes and every `flat` evaluation, so the figure's numbers are quotable.
"""

from __future__ import annotations

import json
import pathlib

from absl import app
from absl import flags
from matplotlib.figure import Figure

from mjx_walk.run import ledger

_OUT = flags.DEFINE_string("out", "runs/compare.png", "Where the PNG goes.")

_TRAINING = (("tracking/lin_vel_error", "training lin vel error (m/s)"),
             ("contact/air_time_mean", "training mean air time (s)"))
_HELD_OUT = (("lin_vel_error", "held-out flat lin vel error (m/s)"),
             ("fall_rate", "held-out flat fall rate"))


def _parse(argument: str) -> tuple[str, pathlib.Path]:
  label, sep, path = argument.partition("=")
  if not sep or not label or not path:
    raise app.UsageError(f"{argument!r}: give runs as label=runs/<run>")
  if not (pathlib.Path(path) / ledger.FILENAME).is_file():
    raise app.UsageError(f"{argument!r}: there is no {ledger.FILENAME} in {path}")
  return label, pathlib.Path(path)


def main(argv: list[str]) -> None:
  runs = [_parse(a) for a in argv[1:]]
  if not runs:
    raise app.UsageError("give at least one run as label=runs/<run>")
  figure = Figure(figsize=(11, 12), layout="constrained")
  axes = figure.subplots(len(_TRAINING) + len(_HELD_OUT), 2, sharex="col")
  summary = {}
  for index, (label, run_dir) in enumerate(runs):
    records = ledger.read_run(run_dir)
    updates = ledger.of_kind(records, "update")
    evals = [r for r in ledger.of_kind(records, "eval") if "flat" in r["strata"]]
    color = f"C{index % 10}"
    for col, (update_x, eval_x, scale) in enumerate(
        (("env_steps", "env_steps", 1.0), ("perf/wall_seconds", "wall_seconds", 1 / 60))):
      for row, (key, name) in enumerate(_TRAINING):
        points = [(r[update_x] * scale, r[key]) for r in updates if r.get(key) is not None]
        axes[row, col].plot(*zip(*points), color=color, lw=1, label=label)
        axes[row, col].set_ylabel(name)
      for row, (metric, name) in enumerate(_HELD_OUT, start=len(_TRAINING)):
        points = [(r[eval_x] * scale, r["strata"]["flat"][metric]) for r in evals]
        if points:
          axes[row, col].plot(*zip(*points), color=color, marker="o", ms=4, lw=1, label=label)
        axes[row, col].set_ylabel(name)
    summary[label] = {
        "run_dir": str(run_dir),
        "env_steps": updates[-1]["env_steps"] if updates else 0,
        "minutes": round(updates[-1]["perf/wall_seconds"] / 60, 2) if updates else 0.0,
        "flat": [[r["env_steps"], round(r["wall_seconds"] / 60, 2)]
                 + [round(r["strata"]["flat"][m], 4) for m, _ in _HELD_OUT] for r in evals],
    }
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
