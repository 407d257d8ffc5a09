"""Training throughput on a CPU seen as one device against the same CPU seen as several.

  python experiments/measurements/bench_host_devices.py \
      --config=experiments/recipes/go2_rough.py --devices=2

XLA's CPU client shows the whole machine as one device; with
XLA_FLAGS=--xla_force_host_platform_device_count=D it shows D, and the trainer places a run's
envs over them as over D accelerators (`mjx_walk.learn.sharding`: num_envs / D envs per device,
the gradients and observation statistics averaged over them). The device count is fixed when a
process starts, so this starts two processes at once, one of each, that compile the same
config's training chunk. Then, in each of --repeats rounds, each process in turn times a window
of --seconds (`throughput.run_window`) while the other waits idle: the one-device process first
in odd rounds, second in even ones. Prints ONE JSON line with each placement's env steps/s
(median over rounds), each round's ratio, and `devices_over_one`, the ratio of the medians.

--config is the training CLI's: a config file, and --config.<field> overrides of any field.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from absl import app
from absl import flags

from mjx_walk import config as config_lib
from mjx_walk import train  # its flag --config: a file, plus --config.<field> overrides
from mjx_walk.learn import throughput

_DEVICES = flags.DEFINE_integer("devices", 2, "Devices the CPU is seen as, against one.",
                                lower_bound=2)
_SECONDS = flags.DEFINE_float("seconds", 30.0, "Length of each timed window, s.")
_REPEATS = flags.DEFINE_integer("repeats", 4, "Timed rounds; the medians are reported.")
_WORKER = flags.DEFINE_bool("worker", False, "Internal: this process times windows on request.")

XLA_DEVICES = "--xla_force_host_platform_device_count"


def _worker(cfg: config_lib.TrainConfig) -> None:
  """Compiles, says `ready`, then times one window for each `go` line on stdin."""
  compiled, carry, steps = throughput.training_chunk(cfg)
  print("ready", flush=True)
  for line in sys.stdin:
    if line.strip() != "go":
      return
    carry, sps = throughput.run_window(compiled, carry, steps, _SECONDS.value)
    print(json.dumps(sps), flush=True)


def _start(devices: int) -> subprocess.Popen:
  """A worker process that sees the CPU as `devices` devices (any other XLA flags kept)."""
  kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(XLA_DEVICES)]
  env = dict(os.environ, XLA_FLAGS=" ".join([*kept, f"{XLA_DEVICES}={devices}"]))
  return subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--worker"], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _read(worker: subprocess.Popen, devices: int) -> str:
  line = worker.stdout.readline()
  if not line:
    raise SystemExit(f"the {devices}-device process exited with {worker.wait()}")
  return line.strip()


def main(argv):
  del argv
  cfg = train.config_flag()
  if _WORKER.value:
    _worker(cfg)
    return
  config_lib.validate(cfg)
  if cfg.num_envs % _DEVICES.value:
    raise SystemExit(f"--devices={_DEVICES.value} must divide num_envs={cfg.num_envs}")
  counts = (1, _DEVICES.value)
  workers = {d: _start(d) for d in counts}
  try:
    for d, worker in workers.items():
      if _read(worker, d) != "ready":
        raise SystemExit(f"the {d}-device process did not start")
    rates = {d: [] for d in counts}
    for r in range(_REPEATS.value):
      for d in counts if r % 2 == 0 else counts[::-1]:
        workers[d].stdin.write("go\n")
        workers[d].stdin.flush()
        rates[d].append(json.loads(_read(workers[d], d)))
  finally:
    for worker in workers.values():
      worker.stdin.close()
      try:
        worker.wait(timeout=60)
      except subprocess.TimeoutExpired:
        worker.kill()
  one, many = (statistics.median(rates[d]) for d in counts)
  print(json.dumps({
      "args": sys.argv[1:],
      "num_envs": cfg.num_envs,
      "unroll_length": cfg.unroll_length,
      "updates_per_chunk": cfg.updates_per_chunk,
      "devices": _DEVICES.value,
      "cpu_count": os.cpu_count(),
      "seconds": _SECONDS.value,
      "repeats": _REPEATS.value,
      "one_device_sps": round(one),
      "devices_sps": round(many),
      "devices_over_one": round(many / one, 3),
      "round_ratios": [round(b / a, 3) for a, b in zip(rates[1], rates[_DEVICES.value])],
  }))


if __name__ == "__main__":
  app.run(main)
