"""How long a config takes to walk: train for a wall-clock budget, judging on the held-out panel.

  python experiments/measurements/learn_benchmark.py --budget_minutes=30
  python experiments/measurements/learn_benchmark.py --config=experiments/recipes/go2_flat_gpu.py \
      --budget_minutes=5
  python experiments/measurements/learn_benchmark.py --config.num_envs=1024 \
      --run_dir=runs/learn_1024
  python experiments/measurements/learn_benchmark.py --scale_num_envs=2048 --budget_minutes=10

Trains with `mjx_walk.runner.run` (the training loop: ledger, checkpoints, panel) for
--budget_minutes of wall-clock, compilation and evaluations included, evaluating the held-out
panel every --eval_every_minutes and at the end. --scale_num_envs=N scales the config to N envs by
the batch rule of `mjx_walk/scaling.py`, as it does for `python -m mjx_walk.train`. Prints ONE
JSON line:

  minutes_to_walk  wall-clock minutes at the first evaluation whose `flat` stratum meets the
                   walking criteria (fall rate <= 5%, xy-velocity tracking error <= 0.25 m/s,
                   yaw-rate error <= 0.3 rad/s), or null. The xy error bounds the forward error
                   from above, so this is at least as strict as forward tracking alone.
  final            per-stratum metrics of the last evaluation
  curve            (minutes, env steps, flat fall rate, lin err, yaw err) of every evaluation
  env_steps        env steps trained
  train_sps        median env steps/s over the run's chunks after the first (compile) chunk

On a config with the terrain strata (experiments/recipes/go2_rough.py) it also prints
  minutes_to_terrain_targets  the first evaluation where `rough` falls <= 10% with xy error
                              <= 0.3 m/s, `stairs` falls <= 25%, and `flat` walks; or null
  terrain_curve               (minutes, env steps, rough fall rate, rough xy error, stairs fall
                              rate, obstacles fall rate, mean curriculum level) per evaluation
  final_levels                the last update's envs per terrain type and level

  python experiments/measurements/learn_benchmark.py --config=experiments/recipes/go2_rough.py \
      --budget_minutes=60

The curve is also in the run's ledger, as for any run.
"""

from __future__ import annotations

import json

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk import runner
from mjx_walk import train  # its flags: --config, --scale_num_envs
from mjx_walk.analysis import report
from mjx_walk.evaluation import walking
from mjx_walk.run import ledger

# --config (a file, plus --config.<field> overrides), --scale_num_envs and --run_dir are the
# training CLI's own flags, defined by `mjx_walk.train`.
_BUDGET = flags.DEFINE_float("budget_minutes", 30.0, "Wall-clock budget, compile included.")
_EVAL_EVERY = flags.DEFINE_float("eval_every_minutes", 3.0, "Held-out evaluation interval.")


def main(argv: list[str]) -> None:
  del argv
  cli.quiet_library_logs()
  try:
    config = walking.for_wall_clock(train.apply_scale_flag(train.config_flag()))
  except ValueError as error:
    cli.refuse(str(error))
  run_dir = runner.run(config, cli.RUN_DIR.value, wall_budget_seconds=60 * _BUDGET.value,
                       eval_every_seconds=60 * _EVAL_EVERY.value).run_dir
  report.build(run_dir, log=lambda _: None)  # plots and report.md, as the train command
  result = walking.summarize(ledger.read_run(run_dir))
  result.update(budget_minutes=_BUDGET.value, run_dir=str(run_dir), num_envs=config.num_envs)
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)
