"""Several seeds in one program against the same seeds as separate processes sharing the machine.

  python experiments/measurements/bench_seeds_vs_processes.py --num_envs=512 --num_seeds=4

Brax, MuJoCo Playground and rsl_rl train S seeds as S processes, each compiling and holding its
own copy of everything. This times, on the same machine and in the same rounds:
  seeds_sps      one process training S seeds of --num_envs envs each (`config.num_seeds=S`),
                 env steps/s of all seeds together, the machine otherwise idle;
  processes_sps  S processes, each training one seed of --num_envs envs (seed k of the S-seed
                 run), all at once: the sum of their env steps/s;
  seeds_over_processes = seeds_sps / processes_sps.
Each round times the S-seed program alone for --seconds, then the S processes together for
--seconds (each counts the training chunks it finishes within its window, and keeps training
until every process has finished its window, so none times a machine the others have left).
Every figure is the median over --repeats rounds; each process's own median is listed too.
Prints ONE JSON line. With XLA_FLAGS=--xla_force_host_platform_device_count=D in the
environment, every process (the S-seed one and the S single-seed ones) sees the CPU as D devices
and places its seeds or envs over them as on D accelerators.

--config is the training CLI's: a config file, and --config.<field> overrides of any field.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import jax

from mjx_walk import config as config_lib
from mjx_walk import train  # its flag --config: a file, plus --config.<field> overrides
from mjx_walk.learn import throughput

_NUM_ENVS = flags.DEFINE_integer("num_envs", 512, "Envs per seed.")
_SEEDS = flags.DEFINE_integer("num_seeds", 4, "Seeds, in one program or as processes.")
_UPDATES = flags.DEFINE_integer("updates_per_chunk", 2, "PPO updates per timed training chunk.")
_SECONDS = flags.DEFINE_float("seconds", 20.0, "Length of each timed window, s.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed rounds; the medians are reported.")
_WORKER = flags.DEFINE_integer("worker", -1, "Internal: this process is seed k's process.")
_SYNC = flags.DEFINE_string("sync_dir", "", "Internal: the folder the processes meet in.")

POLL_SECONDS = 0.02


def _wait_for(path: pathlib.Path, process: subprocess.Popen | None = None, k: int = 0) -> None:
  """Returns once `path` exists; raises SystemExit if seed k's `process` ended before it did."""
  while not path.exists():
    if process is not None and process.poll() is not None:
      raise SystemExit(f"seed {k}'s process exited with {process.returncode}")
    time.sleep(POLL_SECONDS)


def _worker(cfg: config_lib.TrainConfig, k: int, sync: pathlib.Path) -> None:
  """Seed k's process: compiles, says it is ready, then times a window on each round's go."""
  single = dataclasses.replace(cfg, num_seeds=1, seed=cfg.seed + k)
  compiled, carry, steps = throughput.training_chunk(single)
  (sync / f"ready_{k}").touch()
  for r in range(_REPEATS.value):
    _wait_for(sync / f"go_{r}")
    carry, sps = throughput.run_window(compiled, carry, steps, _SECONDS.value)
    (sync / f"result_{r}_{k}.tmp").write_text(json.dumps(sps))
    (sync / f"result_{r}_{k}.tmp").rename(sync / f"result_{r}_{k}")
    while not (sync / f"stop_{r}").exists():  # keep the machine as busy as the others see it
      carry, metrics = compiled(carry)
      jax.block_until_ready(metrics)


def main(argv):
  del argv
  cfg = train.config_flag()
  cfg.num_envs, cfg.updates_per_chunk = _NUM_ENVS.value, _UPDATES.value
  cfg.num_seeds = _SEEDS.value
  if _WORKER.value >= 0:
    _worker(cfg, _WORKER.value, pathlib.Path(_SYNC.value))
    return
  config_lib.validate(cfg)
  seeds = cfg.num_seeds
  with tempfile.TemporaryDirectory() as folder:
    sync = pathlib.Path(folder)
    workers = [subprocess.Popen([sys.executable, __file__, *sys.argv[1:], f"--worker={k}",
                                 f"--sync_dir={sync}"]) for k in range(seeds)]
    try:
      for k in range(seeds):  # the processes compile together, then this one
        _wait_for(sync / f"ready_{k}", workers[k], k)
      compiled, carry, steps = throughput.training_chunk(cfg)
      fused, together, each = [], [], [[] for _ in range(seeds)]
      for r in range(_REPEATS.value):
        carry, sps = throughput.run_window(compiled, carry, steps, _SECONDS.value)
        fused.append(sps)
        (sync / f"go_{r}").touch()
        rates = []
        for k in range(seeds):
          _wait_for(sync / f"result_{r}_{k}", workers[k], k)
          rates.append(json.loads((sync / f"result_{r}_{k}").read_text()))
          each[k].append(rates[-1])
        (sync / f"stop_{r}").touch()
        together.append(sum(rates))
    except BaseException:
      for worker in workers:
        worker.kill()
      raise
    finally:  # after the last round the processes return; on an error they are stopped
      for worker in workers:
        try:
          worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
          worker.kill()
  seeds_sps, processes_sps = statistics.median(fused), statistics.median(together)
  print(json.dumps({
      "num_seeds": seeds,
      "num_envs": cfg.num_envs,
      "unroll_length": cfg.unroll_length,
      "updates_per_chunk": cfg.updates_per_chunk,
      "device": jax.devices()[0].device_kind,
      "seconds": _SECONDS.value,
      "repeats": _REPEATS.value,
      "seeds_sps": round(seeds_sps),
      "processes_sps": round(processes_sps),
      "seeds_over_processes": round(seeds_sps / processes_sps, 3),
      "process_sps": [round(statistics.median(rates)) for rates in each],
  }))


if __name__ == "__main__":
  app.run(main)
