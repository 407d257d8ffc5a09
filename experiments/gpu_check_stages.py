"""The stages of the accelerator check (`gpu_check.py`): its clock and deadline, the JSON lines, one
env count's measurement, the training run, and the plan run in order within the budget.

`gpu_check.py` imports this module only once its flags are checked: JAX, MJX and the trainer take
seconds to import, which a refused flag does not wait for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import pathlib
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

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

if TYPE_CHECKING:
  import gpu_check  # the command, which imports this module once its flags are checked

CACHE_DIR = "work/cache/jax"
"""JAX's persistent compilation cache, under --out_dir, unless JAX_COMPILATION_CACHE_DIR is set."""

EXIT_FAILED = 1
"""Exit status when a stage raised (its `error` line says which and why)."""
EXIT_DEADLINE = 4
"""Exit status when the budget ran out during a stage (the `deadline` line says which)."""


def set_precision(value: str) -> None:
  """Sets the default matmul precision before anything compiles; refuses (exit status 2, one
  `error:` line, nothing written) a value JAX does not accept."""
  try:
    jax.config.update("jax_default_matmul_precision", value)
  except ValueError as error:
    cli.refuse(f"--matmul_precision={value} is invalid: JAX refuses it ({error})")


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

  def __init__(self, mode: gpu_check.Mode):
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


def _header(plan: gpu_check.Plan, cache_dir: str) -> dict[str, Any]:
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
      "tiny": plan.tiny,
      "config": plan.recipe_file + (" (shrunk by --tiny)" if plan.tiny else ""),
      "num_envs": list(plan.num_envs),
      "num_seeds": plan.train_config.num_seeds,
      "updates_per_chunk": plan.updates_per_chunk,
      "repeats": plan.repeats,
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


def train_run(config: config_lib.TrainConfig, out_dir: pathlib.Path, run_dir: str,
              wall_budget_s: float, eval_every_s: float) -> dict[str, Any]:
  """Trains `config` with the training CLI's own loop into <out_dir>/<run_dir>.

  Its printed output goes to <out_dir>/train.log, its ledger is copied to <out_dir>/ledger.jsonl.

  Returns:
    The line's figures (`walking.summarize` of the ledger, and where it is).
  """
  folder = out_dir / run_dir
  with open(out_dir / "train.log", "w", encoding="utf-8") as log, \
      contextlib.redirect_stdout(log):
    runner.run(config, folder, wall_budget_seconds=wall_budget_s,
               eval_every_seconds=eval_every_s)
    report.build(folder)
  shutil.copyfile(folder / ledger.FILENAME, out_dir / ledger.FILENAME)
  return {
      **walking.summarize(ledger.read_run(folder)),
      "walking": walking.WALKING,
      "run_dir": str(folder),
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


def check(plan: gpu_check.Plan) -> int:
  """Runs the plan within its budget, counted from the process's start, printing its lines;
  returns the exit status."""
  clock = Clock(plan.budget_seconds)
  if plan.out_dir is None:
    plan = dataclasses.replace(plan, out_dir=pathlib.Path(tempfile.mkdtemp(prefix="gpu_check-")))
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
                      lambda c=count: bench(plan.bench_configs[c], plan.repeats),
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
            ledger.read_run(plan.out_dir / plan.run_dir))
        figures = _stage("train", lines, deadline, errors,
                         lambda: train_run(config, plan.out_dir, plan.run_dir, wall_budget,
                                           plan.eval_every_seconds))
        deadline.salvage = None
        if figures is not None:
          ran.append("train")
          lines.emit("train", config=plan.recipe_file, tiny=plan.tiny,
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
