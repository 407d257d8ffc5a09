"""How long a config takes to walk: train for a wall-clock budget, judging on the held-out panel.

  python experiments/learn_benchmark.py --budget_minutes=30
  python experiments/learn_benchmark.py --config=experiments/go2_flat_gpu.py --budget_minutes=5
  python experiments/learn_benchmark.py --config.num_envs=1024 --run_dir=runs/learn_1024

Trains with `mjx_walk.train.run` (the CLI's own loop: ledger, checkpoints, panel) for
--budget_minutes of wall-clock, compilation and evaluations included, evaluating the held-out
panel every --eval_every_minutes and at the end. Prints ONE JSON line:

  minutes_to_walk  wall-clock minutes at the first evaluation whose `flat` stratum meets the
                   walking criteria (fall rate <= 5%, xy-velocity tracking error <= 0.25 m/s,
                   yaw-rate error <= 0.3 rad/s), or null. The xy error bounds the forward error
                   from above, so this is at least as strict as forward tracking alone.
  final            per-stratum metrics of the last evaluation
  curve            (minutes, env steps, flat fall rate, lin err, yaw err) of every evaluation
  env_steps        env steps trained
  train_sps        median env steps/s over the run's chunks after the first (compile) chunk

The curve is also in the run's ledger, as for any run.
"""

from __future__ import annotations

import copy
import json

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk import config as config_lib
from mjx_walk import train
from mjx_walk.run import ledger

# The criteria and the figures live in experiments/walking.py, beside this script, which defines
# no flags, so gpu_check.py imports them too; imported here under their old names.
from walking import WALKING  # pylint: disable=unused-import
from walking import summarize
from walking import walks  # pylint: disable=unused-import

# --config (a file, plus --config.<field> overrides) and --run_dir are the training CLI's own flags,
# defined by `mjx_walk.train`.
_BUDGET = flags.DEFINE_float("budget_minutes", 30.0, "Wall-clock budget, compile included.")
_EVAL_EVERY = flags.DEFINE_float("eval_every_minutes", 3.0, "Held-out evaluation interval.")

def main(argv: list[str]) -> None:
  del argv
  cli.quiet_library_logs()
  config = copy.deepcopy(flags.FLAGS.config)
  config.panel.every_chunks = 0  # evaluations follow the wall clock instead
  # Enough steps never to end before the budget does.
  config.total_env_steps = max(config.total_env_steps, 10**12)
  config_lib.validate(config)
  run_dir = train.run(config, cli.RUN_DIR.value, wall_budget_seconds=60 * _BUDGET.value,
                      eval_every_seconds=60 * _EVAL_EVERY.value)
  result = summarize(ledger.read_run(run_dir))
  result.update(budget_minutes=_BUDGET.value, run_dir=str(run_dir), num_envs=config.num_envs)
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)
