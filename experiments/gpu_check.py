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
the value, exit status 2. The command exits 1 when a stage raised, 0 otherwise (skips included).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable

from absl import app
from absl import flags
import jax
import jax.monitoring
import numpy as np

from mjx_walk import cli
from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk.analysis import report
from mjx_walk.evaluation import walking
from mjx_walk.learn import guard
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import throughput
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import ledger

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

CACHE_DIR = "work/cache/jax"
"""JAX's persistent compilation cache, under --out_dir, unless JAX_COMPILATION_CACHE_DIR is set."""

EXIT_FAILED = 1
"""Exit status when a stage raised (its `error` line says which and why)."""
EXIT_DEADLINE = 4
"""Exit status when the budget ran out during a stage (the `deadline` line says which)."""

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
  recipe: str
  """A key of `RECIPES`."""
  num_envs: tuple[int, ...]
  """Ascending, without repeats."""
  train_config: config_lib.TrainConfig
  bench_configs: dict[int, config_lib.TrainConfig]
  train_seconds: float
  budget_seconds: float
  eval_every_seconds: float
  out_dir: pathlib.Path


def seconds_since_process_start() -> float:
  """Wall-clock seconds since this process started (0 where /proc does not say)."""
  try:
    stat = pathlib.Path("/proc/self/stat").read_text()
    uptime = float(pathlib.Path("/proc/uptime").read_text().split()[0])
  except (OSError, ValueError):
    return 0.0
  # Field 22, counted after the command name's closing parenthesis (the name may hold spaces).
  start_ticks = int(stat[stat.rindex(")") + 2:].split()[19])
  return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


class Clock:
  """The budget: seconds used since the process started, and seconds left."""

  def __init__(self, budget_seconds: float):
    self.budget = budget_seconds
    self._start = time.perf_counter() - seconds_since_process_start()

  def now(self) -> float:
    return time.perf_counter() - self._start

  def left(self) -> float:
    return self.budget - self.now()


class Lines:
  """Prints the JSON lines: to stdout and to <out_dir>/gpu_check.jsonl, flushed one by one.

  Thread-safe (the deadline's timer prints too). Holds the stdout it was made with, so lines
  still reach it while the training run's own output is redirected to train.log.
  """

  def __init__(self, path: pathlib.Path, clock: Clock, precision: str):
    self._stdout = sys.stdout
    self._file = open(path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    self._clock = clock
    self._precision = precision
    self._lock = threading.Lock()

  def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
    line = {"kind": kind, **fields, "matmul_precision": self._precision,
            "at_s": round(self._clock.now(), 1)}
    text = json.dumps(line)
    with self._lock:
      for stream in (self._stdout, self._file):
        stream.write(text + "\n")
        stream.flush()
    return line

  def close(self) -> None:
    self._file.close()


class Deadline:
  """Ends the process when the budget runs out, saying which stage was running.

  Predictions keep the stages inside the budget; this is the guard for a stage that takes far
  longer than predicted (a compile cannot be interrupted any other way). During the training
  run, `salvage` reads what its ledger holds so far into the `deadline` line.
  """

  def __init__(self, clock: Clock, lines: Lines):
    self.stage = "start"
    self.salvage: Callable[[], dict[str, Any]] | None = None
    self._lines = lines
    self._timer = threading.Timer(max(0.0, clock.left()), self._fire)
    self._timer.daemon = True

  def __enter__(self) -> Deadline:
    self._timer.start()
    return self

  def __exit__(self, *exc_info) -> None:
    self._timer.cancel()

  def _fire(self) -> None:
    fields = {}
    if self.salvage is not None:
      try:
        fields["so_far"] = self.salvage()
      except Exception as error:  # pylint: disable=broad-except
        fields["so_far"] = f"unreadable ({type(error).__name__}: {error})"
    self._lines.emit("deadline", stage=self.stage,
                     message=f"the budget ran out during {self.stage}; stopped here", **fields)
    os._exit(EXIT_DEADLINE)  # pylint: disable=protected-access


class CacheHits:
  """Counts programs read from JAX's persistent compilation cache."""

  EVENT = "/jax/compilation_cache/cache_hits"

  def __init__(self):
    self.count = 0
    jax.monitoring.register_event_listener(self._on_event)

  def _on_event(self, event: str, **kwargs: Any) -> None:
    del kwargs
    if event == self.EVENT:
      self.count += 1


class Predictor:
  """Predicts a stage's seconds from what the env counts before it took."""

  def __init__(self, mode: Mode):
    self._mode = mode
    self.compile_s: float | None = None
    """The largest build (init, chunk and physics programs) of a count so far."""
    self.train_compile_s: float | None = None
    """The largest build of a count's init and chunk programs alone, what a training run
    compiles before its first chunk."""
    self._timing: tuple[int, float] | None = None
    """(num_envs, seconds of its timed rounds) of the last count measured."""

  @property
  def compile_estimate(self) -> float:
    return self.compile_s if self.compile_s is not None else self._mode.compile_guess_s

  @property
  def train_compile_estimate(self) -> float:
    if self.train_compile_s is not None:
      return self.train_compile_s
    return self._mode.compile_guess_s

  def bench(self, num_envs: int) -> tuple[float, str]:
    """(seconds, how they were predicted) for measuring `num_envs` envs."""
    if self.compile_s is None:
      build = f"programs {self.compile_estimate:.0f} s (guess)"
    else:
      build = f"programs {self.compile_estimate:.0f} s (the largest build so far)"
    if self._timing is None:
      timing, how = self._mode.timing_guess_s, "guess"
    else:
      envs, seconds = self._timing
      # Linear in the envs: an upper bound while a bigger batch runs at least as fast per env.
      timing, how = seconds * max(1.0, num_envs / envs), f"scaled from {envs} envs"
    return self.compile_estimate + timing, f"{build} + timed rounds {timing:.0f} s ({how})"

  def measured(self, num_envs: int, build_s: float, physics_compile_s: float,
               timing_s: float) -> None:
    self.compile_s = max(build_s, self.compile_s or 0.0)
    self.train_compile_s = max(build_s - physics_compile_s, self.train_compile_s or 0.0)
    self._timing = (num_envs, timing_s)


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


def _set_precision(value: str) -> None:
  """Sets the default matmul precision; refuses a value JAX does not accept."""
  try:
    jax.config.update("jax_default_matmul_precision", value)
  except ValueError as error:
    cli.refuse(f"--matmul_precision={value} is invalid: JAX refuses it ({error})")


def _check_flags(argv: list[str]) -> Plan:
  """Every flag checked, and every config validated, before anything compiles.

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
  _set_precision(_MATMUL_PRECISION.value)

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

  if _OUT_DIR.value is None:
    out_dir = pathlib.Path(tempfile.mkdtemp(prefix="gpu_check-"))
  else:
    out_dir = pathlib.Path(_OUT_DIR.value)
    if out_dir.exists() and not out_dir.is_dir():
      cli.refuse(f"--out_dir={out_dir} is a file; give an empty or new folder")
    held = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    if held:
      cli.refuse(f"--out_dir={out_dir} already holds {', '.join(held[:5])}"
                 f"{', ...' if len(held) > 5 else ''}; give an empty or new folder")
  return Plan(mode=mode, recipe=recipe, num_envs=counts, train_config=train_config,
              bench_configs=bench_configs, train_seconds=60 * train_minutes,
              budget_seconds=60 * budget, eval_every_seconds=60 * every, out_dir=out_dir)


def _device_memory() -> dict[str, int | None]:
  """The device's peak bytes in use so far and its limit; None where the backend has no stats."""
  stats = jax.devices()[0].memory_stats() or {}
  return {"device_peak_bytes": stats.get("peak_bytes_in_use"),
          "device_bytes_limit": stats.get("bytes_limit")}


def _version(name: str) -> str | None:
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def _header(plan: Plan, cache_dir: str) -> dict[str, Any]:
  device = jax.devices()[0]
  return {
      "python": platform.python_version(),
      "jax": jax.__version__,
      "jaxlib": _version("jaxlib"),
      "mujoco": _version("mujoco"),
      "mujoco_mjx": _version("mujoco-mjx"),
      "backend": jax.default_backend(),
      "platform_version": device.client.platform_version,
      "device_kind": device.device_kind,
      "device_count": jax.device_count(),
      "cpu_count": os.cpu_count(),
      "compilation_cache": cache_dir,
      "tiny": _TINY.value,
      "config": RECIPES[plan.recipe] + (" (shrunk by --tiny)" if _TINY.value else ""),
      "num_envs": list(plan.num_envs),
      "num_seeds": plan.train_config.num_seeds,
      "updates_per_chunk": _UPDATES.value,
      "repeats": _REPEATS.value,
      "train_minutes": plan.train_seconds / 60,
      "eval_every_minutes": plan.eval_every_seconds / 60,
      "budget_minutes": plan.budget_seconds / 60,
      "out_dir": str(plan.out_dir),
  }


def bench(config: config_lib.TrainConfig, repeats: int) -> tuple[dict[str, Any], float, float]:
  """Measures one env count: the training chunk and the physics-only rollout, side by side.

  Returns:
    (the line's figures, seconds building the programs, seconds of the timed rounds).
  """
  start = time.perf_counter()
  trainer = trainer_lib.make_trainer(config)
  carry = jax.block_until_ready(trainer.init(seeds_lib.initial_keys(config)))
  chunk = throughput.compile_chunk(trainer, carry)
  # With S seeds every seed's N envs: the physics rollout steps them all as one [S x N] batch.
  n, t = config.num_seeds * config.num_envs, config.unroll_length
  envs = lambda state: jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), state) if (
      config.num_seeds > 1) else state
  physics_start = time.perf_counter()
  physics = throughput.physics_rollout(trainer.env, n, t).lower(envs(carry.env)).compile()
  physics_compile_s = time.perf_counter() - physics_start
  build_s = time.perf_counter() - start

  # Each round times both, so load from elsewhere on the machine hits them alike.
  times: dict[str, list[float]] = {"physics": [], "train": []}
  nonfinite: set[str] = set()
  for _ in range(repeats):
    times["physics"].append(throughput.time_call(physics, envs(carry.env)))
    round_start = time.perf_counter()
    carry, metrics = chunk.compiled(carry)  # donates the carry, whose env the next round uses
    jax.block_until_ready(metrics)
    times["train"].append(time.perf_counter() - round_start)
    flags = np.asarray(jax.device_get(metrics["guard/nonfinite"]))  # [K, (S,) Q]
    flags = flags.reshape(flags.shape[0], -1, flags.shape[-1]).any(axis=1)  # any seed's
    divergence = guard.first_divergence({"guard/nonfinite": flags})
    if divergence is not None:
      nonfinite.update(divergence[1])
  timing_s = time.perf_counter() - start - build_s
  train_sps = n * t * config.updates_per_chunk / statistics.median(times["train"])
  physics_sps = n * t / statistics.median(times["physics"])
  return {
      "num_envs": config.num_envs,
      "num_seeds": config.num_seeds,
      "unroll_length": t,
      "updates_per_chunk": config.updates_per_chunk,
      "repeats": repeats,
      "train_sps": round(train_sps),
      "physics_sps": round(physics_sps),
      "train_over_physics": round(train_sps / physics_sps, 3),
      "compile_s": round(chunk.seconds, 2),
      "physics_compile_s": round(physics_compile_s, 2),
      "bytes_per_env": None if chunk.bytes is None else round(chunk.bytes / n),
      **_device_memory(),
      "nonfinite": sorted(nonfinite),
  }, build_s, timing_s


def train_run(config: config_lib.TrainConfig, out_dir: pathlib.Path, wall_budget_s: float,
              eval_every_s: float, recipe: str = "flat") -> dict[str, Any]:
  """Trains `config` with the training CLI's own loop into <out_dir>/work/runs/go2_<recipe>_gpu.

  Its printed output goes to <out_dir>/train.log, its ledger is copied to <out_dir>/ledger.jsonl.

  Returns:
    The line's figures (`walking.summarize` of the ledger, and where it is).
  """
  run_dir = out_dir / run_dir_of(recipe)
  with open(out_dir / "train.log", "w", encoding="utf-8") as log, \
      contextlib.redirect_stdout(log):
    runner.run(config, run_dir, wall_budget_seconds=wall_budget_s,
               eval_every_seconds=eval_every_s)
    report.build(run_dir)
  shutil.copyfile(run_dir / ledger.FILENAME, out_dir / ledger.FILENAME)
  return {
      **walking.summarize(ledger.read_run(run_dir)),
      "walking": walking.WALKING,
      "run_dir": str(run_dir),
  }


def _stage(name: str, lines: Lines, deadline: Deadline, errors: list[str],
           fn: Callable[[], Any], **context: Any) -> Any:
  """Runs one stage; a stage that raises prints an `error` line and the next stage runs."""
  deadline.stage = name
  try:
    return fn()
  except Exception as error:  # pylint: disable=broad-except
    errors.append(name)
    lines.emit("error", stage=name, **context,
               error=f"{type(error).__name__}: {error}"[:4000])
    return None


def check(plan: Plan, clock: Clock) -> int:
  """Runs the plan, printing its lines; returns the exit status."""
  plan.out_dir.mkdir(parents=True, exist_ok=True)
  if jax.config.jax_compilation_cache_dir is None:
    jax.config.update("jax_compilation_cache_dir", str(plan.out_dir / CACHE_DIR))
  lines = Lines(plan.out_dir / "gpu_check.jsonl", clock, jax.config.jax_default_matmul_precision)
  hits = CacheHits()
  ran, skipped, errors = [], [], []
  with Deadline(clock, lines) as deadline:
    lines.emit("header", **_header(plan, jax.config.jax_compilation_cache_dir))
    predictor = Predictor(plan.mode)
    kept = plan.train_seconds + plan.mode.finish_s if plan.train_seconds else 0.0
    for count in plan.num_envs:
      stage = f"bench {count} envs"
      predicted, how = predictor.bench(count)
      room = clock.left() - kept
      if predicted > room:
        skipped.append(stage)
        lines.emit("skip", stage="bench", num_envs=count, predicted_s=round(predicted),
                   reason=f"needs about {predicted:.0f} s ({how}); {max(room, 0):.0f} s are left "
                          f"of the {plan.budget_seconds:.0f} s budget with {kept:.0f} s kept for "
                          "the training run")
        continue
      start, hits_before = time.perf_counter(), hits.count
      result = _stage(stage, lines, deadline, errors,
                      lambda c=count: bench(plan.bench_configs[c], _REPEATS.value),
                      num_envs=count)
      if result is None:
        continue
      figures, build_s, timing_s = result
      predictor.measured(count, build_s, figures["physics_compile_s"], timing_s)
      ran.append(stage)
      lines.emit("bench", **figures, compile_cache_hits=hits.count - hits_before,
                 predicted_s=round(predicted), seconds=round(time.perf_counter() - start, 1))

    if not plan.train_seconds:
      skipped.append("train")
      lines.emit("skip", stage="train", reason="--train_minutes=0")
    else:
      available = clock.left() - plan.mode.finish_s
      needed = predictor.train_compile_estimate
      if available < needed:
        skipped.append("train")
        lines.emit("skip", stage="train", predicted_s=round(needed + plan.mode.finish_s),
                   reason=f"compiling its chunk needs about {needed:.0f} s and its end "
                          f"{plan.mode.finish_s:.0f} s; {max(clock.left(), 0):.0f} s are left of "
                          f"the {plan.budget_seconds:.0f} s budget")
      else:
        wall_budget = min(plan.train_seconds, available)
        start, hits_before = time.perf_counter(), hits.count
        config = plan.train_config
        deadline.salvage = lambda: walking.summarize(
            ledger.read_run(plan.out_dir / run_dir_of(plan.recipe)))
        figures = _stage("train", lines, deadline, errors,
                         lambda: train_run(config, plan.out_dir, wall_budget,
                                           plan.eval_every_seconds, plan.recipe))
        deadline.salvage = None
        if figures is not None:
          ran.append("train")
          lines.emit("train", config=RECIPES[plan.recipe], tiny=_TINY.value,
                     num_envs=config.num_envs,
                     updates_per_chunk=config.updates_per_chunk,
                     wall_budget_s=round(wall_budget, 1),
                     eval_every_s=round(plan.eval_every_seconds, 1), **figures,
                     compile_cache_hits=hits.count - hits_before,
                     seconds=round(time.perf_counter() - start, 1))
    deadline.stage = "done"
    lines.emit("done", seconds=round(clock.now(), 1), budget_s=round(plan.budget_seconds, 1),
               ran=ran, skipped=skipped, errors=errors, out_dir=str(plan.out_dir))
  lines.close()
  return EXIT_FAILED if errors else 0


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  plan = _check_flags(argv)
  raise SystemExit(check(plan, Clock(plan.budget_seconds)))


if __name__ == "__main__":
  app.run(main)
