"""The prepared accelerator check: throughput, compile time and memory at several env counts, then
a short training run of the GPU recipe, all inside one wall-clock budget.

  python experiments/gpu_check.py --out_dir=$OUT       # one GPU: 4 env counts, 4 min of training
  python experiments/gpu_check.py --tiny               # the same steps, sized for the CPU
  python experiments/gpu_check.py --num_envs=16384,32768 --train_minutes=0   # counts only
  python experiments/gpu_check.py --recipe=rough --num_envs=8192 --train_minutes=8  # terrain
  python experiments/gpu_check.py --num_envs=4096 --num_seeds=8 --train_minutes=0  # 8 seeds

Prints JSON lines on stdout, one object per line, each flushed as soon as it is known (a run
killed half-way keeps what it printed). Every line has a `kind`, the `matmul_precision` in force
and `at_s`, the seconds since the command started:

  header  versions (python, jax, jaxlib, mujoco, mujoco-mjx), backend, device kind and count,
          the compilation cache, and the plan: env counts, minutes of training, the budget.
  bench   one per env count, smallest first (so the device's peak memory so far is that
          count's): `train_sps`, env steps/s of the fused training chunk of
          `mjx_walk.learn.trainer` (the median of --repeats timed chunks of
          --updates_per_chunk updates, after compilation); `physics_sps`, the env's own step
          with zero actions and no policy (bench_throughput.py's `physics_sps`), timed in the
          same rounds; `train_over_physics`; `compile_s`, the chunk's lower + compile;
          `physics_compile_s`; `bytes_per_env`, XLA's memory analysis of the compiled chunk
          (arguments, outputs and temporaries) over num_envs; `device_peak_bytes` and
          `device_bytes_limit` from the device's memory statistics (null where the backend
          reports none, as on the CPU); `nonfinite`, the guarded quantities that went NaN or
          inf in the timed chunks; `compile_cache_hits`, programs read from the persistent
          compilation cache instead of compiled; `predicted_s` and `seconds`.
  train   the recipe (--recipe: `experiments/recipes/go2_flat_gpu.py`, or go2_rough_gpu.py with
          terrain and the height scan) trained by `mjx_walk.runner.run` (the training
          loop: ledger, checkpoints, held-out panel) for at most --train_minutes of wall-clock,
          compilation included, evaluated every --eval_every_minutes and at the end, as
          measurements/learn_benchmark.py does: `minutes_to_walk` (the first evaluation whose
          held-out `flat` stratum meets the walking criteria, `walking`), `final` (the last
          evaluation's per-stratum table), `curve`, `env_steps` and `train_sps`
          (mjx_walk/evaluation/walking.py).
  skip    a stage left out because it would not fit in what is left of the budget, and why.
  error   a stage that raised (its type and message); the other stages still run.
  deadline  printed, with the stage that was running, if the budget runs out anyway; the
          command then exits at once with status 4.
  done    seconds used, what ran, what was skipped or failed.

Order and deadline. The budget (--budget_minutes) counts from the start of the process. The env
counts run first, smallest first, then the training run. While counts run, the training run's
minutes plus `finish_s` (its last chunk, final evaluation with videos, checkpoint and report)
are kept for it. Before each count its cost is predicted: compiling its programs (the largest
compile of an earlier count, or the mode's `compile_guess_s` before any), plus its timed rounds
(the previous count's, scaled up by the env ratio, or `timing_guess_s`). A count that does not
fit is skipped with a `skip` line. The training run gets --train_minutes, or less if less is
left, and is skipped when what is left would not cover compiling its chunk (as long as a
count's init and chunk programs took) and `finish_s`. Compiled programs go
to JAX's persistent compilation cache (JAX_COMPILATION_CACHE_DIR if set, else
<out_dir>/work/cache/jax), so a count whose config equals the training run's shares its
compiled chunk with it (with --tiny, the first count does).

Precision. --matmul_precision (default `highest`: full float32 matmuls) is set with
`jax.config.update("jax_default_matmul_precision", ...)` before anything compiles; TF32 matmuls
have broken PPO for others. Any value JAX accepts may be given (`default`, `tensorfloat32`, ...).

--tiny runs every step above on the CPU, only smaller: env counts 16 and 32, the GPU recipe with
(16, 16) networks, 4-step rollouts, 4 training families and a 5-env panel of 5-step episodes,
15 s of training and a 6-minute budget. Compiling dominates it: on the 2-core CPU it takes about
45 s with a warm compilation cache, 2.5 minutes with a cold one and up to 4.5 minutes when other
work shares the cores (the budget is sized for that).

Files, all under --out_dir (default: a new temporary folder): gpu_check.jsonl (the lines
printed), train.log (the training run's own output) and ledger.jsonl (a copy of its ledger) at
the top, and the bulk three folders down, where the device machine's $OUT does not send files
back: the run folder work/runs/go2_<recipe>_gpu and, unless JAX_COMPILATION_CACHE_DIR is set, the
compilation cache work/cache/jax.

A bad flag is refused before anything compiles or is written: one `error:` line on stderr naming
the value, exit status 2. The flags are checked here, before the stages (gpu_check_stages.py) are
imported, so that a refusal takes a fraction of a second rather than the seconds JAX, MJX and
the trainer take to import; only --matmul_precision waits for JAX, which decides what it accepts.
The command exits 1 when a stage raised, 0 otherwise (skips included), and 4 at the deadline.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pathlib
from typing import Any

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk import config as config_lib

_NUM_ENVS = flags.DEFINE_string(
    "num_envs", None, "Comma-separated env counts to measure (default 4096,8192,16384,32768; "
    "with --tiny 16,32). Each must suit the recipe (divisible by its 128 training families "
    "and 4 minibatches).")
_TRAIN_MINUTES = flags.DEFINE_float(
    "train_minutes", None, "Most wall-clock minutes of the training run, compile included "
    "(default 4; with --tiny 0.25); 0 skips it.")
_BUDGET = flags.DEFINE_float(
    "budget_minutes", None, "Wall-clock budget of the whole command, from its start (default 8; "
    "with --tiny 6). What would not fit is skipped, with a line saying so.")
_EVAL_EVERY = flags.DEFINE_float(
    "eval_every_minutes", None, "Held-out panel interval of the training run (default 0.5; with "
    "--tiny 0.05).")
_MATMUL_PRECISION = flags.DEFINE_string(
    "matmul_precision", "highest", "jax_default_matmul_precision, set before anything compiles: "
    "highest (full float32), or any value JAX accepts (default, tensorfloat32, bfloat16, ...).")
_UPDATES = flags.DEFINE_integer(
    "updates_per_chunk", 2, "PPO updates per timed training chunk of the env counts.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed rounds per env count; medians are reported.")
_OUT_DIR = flags.DEFINE_string(
    "out_dir", None, "Empty or new folder for everything the command writes (default: a new "
    "temporary folder).")
_TINY = flags.DEFINE_bool(
    "tiny", False, "The same steps, sized for the CPU: for tests and smoke checks.")
_SEEDS = flags.DEFINE_integer(
    "num_seeds", 1, "Training seeds (config.num_seeds) of every env count and of the training "
    "run: a count of N envs then trains S seeds of N envs each, S x N envs in all, and its "
    "train_sps counts every seed's env steps.")
_RECIPE = flags.DEFINE_string(
    "recipe", "flat", "The GPU recipe measured and trained: flat (experiments/recipes/"
    "go2_flat_gpu.py) or rough (go2_rough_gpu.py: heightfield terrain, the curriculum and the "
    "height scan).")

REPO = pathlib.Path(__file__).resolve().parent.parent
RECIPES = {"flat": "experiments/recipes/go2_flat_gpu.py",
           "rough": "experiments/recipes/go2_rough_gpu.py"}
"""--recipe: the recipe trained and measured (its `get_config()`), under the repository's root."""


def run_dir_of(recipe: str) -> str:
  """The training run's folder, under --out_dir."""
  return f"work/runs/go2_{recipe}_gpu"


# Flags that `mjx_walk.cli` defines for every command, which this one does not read.
_FOREIGN_FLAGS = ("run_dir", "step")


@dataclasses.dataclass(frozen=True)
class Mode:
  """What the check measures and the guesses it plans with before it has measured anything."""

  num_envs: tuple[int, ...]
  train_minutes: float
  budget_minutes: float
  eval_every_minutes: float
  shrink: dict[str, Any]
  """Dotted config fields set on the recipe (`ppo.num_epochs`); empty for the real check."""
  compile_guess_s: float
  """Seconds to build one env count's programs (init, chunk, physics) before any was measured."""
  timing_guess_s: float
  """Seconds of the first env count's timed rounds."""
  finish_s: float
  """Seconds kept after the training run's budget: its last chunk, the final evaluation with
  its videos, the checkpoint and the report (and the panel's compile if no evaluation ran
  before)."""


# The guesses are one H200's, from a cold cache (experiments/README.md, 2026-12-04): a count's
# programs took 77 to 91 s to build and its timed rounds 1.3 to 5.8 s; 95 and 5 leave a margin.
GPU = Mode(
    num_envs=(4096, 8192, 16384, 32768), train_minutes=4.0, budget_minutes=8.0,
    eval_every_minutes=0.5, shrink={}, compile_guess_s=95.0, timing_guess_s=5.0,
    finish_s=45.0)

TINY = Mode(
    num_envs=(16, 32), train_minutes=0.25, budget_minutes=6.0, eval_every_minutes=0.05,
    shrink={
        # tests/configs.py's shrink, on the GPU recipe. updates_per_chunk equals the counts'
        # default, so the training run's chunk is the first count's compiled program.
        "num_envs": 16, "unroll_length": 4, "updates_per_chunk": 2,
        "ppo.num_minibatches": 2, "ppo.num_epochs": 2,
        "network.actor_hidden_sizes": (16, 16), "network.critic_hidden_sizes": (16, 16),
        "families.num_train_families": 4, "panel.families_per_stratum": 1,
        "panel.envs_per_family": 1, "panel.episode_seconds": 0.1,
    },
    compile_guess_s=60.0, timing_guess_s=5.0, finish_s=30.0)


@dataclasses.dataclass(frozen=True)
class Plan:
  """The checked flags: what to run, in what order, within what budget."""

  mode: Mode
  tiny: bool
  recipe: str
  """A key of `RECIPES`."""
  num_envs: tuple[int, ...]
  """Ascending, without repeats."""
  updates_per_chunk: int
  """PPO updates per timed chunk of the env counts."""
  repeats: int
  """Timed rounds per env count."""
  matmul_precision: str
  """jax_default_matmul_precision, as given: JAX checks it when the stages set it."""
  train_config: config_lib.TrainConfig
  bench_configs: dict[int, config_lib.TrainConfig]
  train_seconds: float
  budget_seconds: float
  eval_every_seconds: float
  out_dir: pathlib.Path | None
  """None: a new temporary folder, made when the stages start."""

  @property
  def recipe_file(self) -> str:
    """The recipe's file, under the repository's root."""
    return RECIPES[self.recipe]

  @property
  def run_dir(self) -> str:
    """The training run's folder, under `out_dir`."""
    return run_dir_of(self.recipe)


def _config(mode: Mode, recipe: str) -> config_lib.TrainConfig:
  """The recipe, shrunk by the mode, set up for a wall-clock run as `walking.for_wall_clock`
  does."""
  config = config_lib.load_file(str(REPO / RECIPES[recipe]))
  for field, value in mode.shrink.items():
    config_lib.set_field(config, field, value)
  config.panel.every_chunks = 0  # evaluations follow the wall clock instead
  config.total_env_steps = max(config.total_env_steps, 10**12)  # the budget ends the run
  return config


def _parse_counts(text: str) -> tuple[int, ...]:
  accepted = "give comma-separated positive env counts, e.g. --num_envs=4096,8192"
  counts = []
  for item in text.split(","):
    try:
      count = int(item.strip())
    except ValueError:
      cli.refuse(f"--num_envs={text} is invalid: {item.strip()!r} is not an integer; {accepted}.")
    if count <= 0:
      cli.refuse(f"--num_envs={text} is invalid: {count} is not a positive count; {accepted}.")
    counts.append(count)
  return tuple(sorted(set(counts)))


def _number(name: str, value: float, minimum: float, inclusive: bool) -> float:
  """Refuses a flag value that is not finite or not above (or at) `minimum`."""
  ok = math.isfinite(value) and (value >= minimum if inclusive else value > minimum)
  if not ok:
    bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
    cli.refuse(f"--{name}={value} is invalid: it must be a finite number {bound}.")
  return value


def _check_flags(argv: list[str]) -> Plan:
  """Every flag checked, and every config validated, before the stages are imported; the
  matmul precision, which JAX checks, is set by `gpu_check_stages.set_precision`.

  Refuses (exit status 2, one `error:` line) a bad value, naming it.
  """
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if _RECIPE.value not in RECIPES:
    cli.refuse(f"--recipe={_RECIPE.value} is invalid: give one of {', '.join(RECIPES)}")
  recipe = _RECIPE.value
  foreign = [name for name in _FOREIGN_FLAGS if flags.FLAGS[name].present]
  if foreign:
    cli.refuse(f"--{foreign[0]} is not read by gpu_check.py: it trains {RECIPES[recipe]} into "
               f"<out_dir>/{run_dir_of(recipe)}; its flags are --num_envs, --train_minutes, "
               "--budget_minutes, --eval_every_minutes, --matmul_precision, "
               "--updates_per_chunk, --repeats, --out_dir, --tiny and --recipe")
  mode = TINY if _TINY.value else GPU
  counts = _parse_counts(_NUM_ENVS.value) if _NUM_ENVS.value is not None else mode.num_envs
  value = lambda flag, default: default if flag.value is None else flag.value
  train_minutes = _number("train_minutes", value(_TRAIN_MINUTES, mode.train_minutes), 0, True)
  budget = _number("budget_minutes", value(_BUDGET, mode.budget_minutes), 0, False)
  every = _number("eval_every_minutes", value(_EVAL_EVERY, mode.eval_every_minutes), 0, False)
  _number("updates_per_chunk", _UPDATES.value, 1, True)
  _number("repeats", _REPEATS.value, 1, True)

  train_config = _config(mode, recipe)
  train_config.num_seeds = _SEEDS.value
  bench_configs = {}
  try:
    config_lib.validate(train_config)
    for count in counts:
      bench = copy.deepcopy(train_config)
      bench.num_envs, bench.updates_per_chunk = count, _UPDATES.value
      config_lib.validate(bench)
      bench_configs[count] = bench
  except ValueError as error:
    cli.refuse(f"--num_envs={_NUM_ENVS.value or ','.join(map(str, counts))}: {error}")

  out_dir = None
  if _OUT_DIR.value is not None:
    out_dir = pathlib.Path(_OUT_DIR.value)
    if out_dir.exists() and not out_dir.is_dir():
      cli.refuse(f"--out_dir={out_dir} is a file; give an empty or new folder")
    held = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    if held:
      cli.refuse(f"--out_dir={out_dir} already holds {', '.join(held[:5])}"
                 f"{', ...' if len(held) > 5 else ''}; give an empty or new folder")
  return Plan(mode=mode, tiny=_TINY.value, recipe=recipe, num_envs=counts,
              updates_per_chunk=_UPDATES.value, repeats=_REPEATS.value,
              matmul_precision=_MATMUL_PRECISION.value, train_config=train_config,
              bench_configs=bench_configs, train_seconds=60 * train_minutes,
              budget_seconds=60 * budget, eval_every_seconds=60 * every, out_dir=out_dir)


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  plan = _check_flags(argv)
  # Imported once the flags pass: JAX, MJX and the trainer take seconds to import (about 5 s on
  # the 2-core CPU), which a refused flag does not wait for.
  import gpu_check_stages  # pylint: disable=g-import-not-at-top
  gpu_check_stages.set_precision(plan.matmul_precision)
  raise SystemExit(gpu_check_stages.check(plan))


if __name__ == "__main__":
  app.run(main)
