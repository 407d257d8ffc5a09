"""Slow learning check, run by .ci/run: the default config learns to track commands with a gait.

`pytest -m slow` (about 4 minutes per seed on 2 cores). Each seed trains the default config for
40 chunks (1.97M env steps) and compares its last 5 updates with its first one, whose batch was
collected by the untrained policy. Being alive is not enough: the velocity-tracking error must
fall, the feet must leave the ground for longer, and episodes must end by timeout, not by falls.

This guards the learning signal end to end (env, rewards, gait clock, GAE, PPO, normalizer,
adaptive rate); the walking criteria on the held-out panel belong to
`experiments/measurements/learn_benchmark.py`.

The same check runs once more on 2 forced host devices (data parallel, in a subprocess: a
process's device count is fixed when JAX starts), which must learn like the one-device run.
"""

import json
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

import commands
from mjx_walk import config as config_lib
from mjx_walk.learn import records as records_lib
from mjx_walk.learn import trainer as trainer_lib

CHUNKS = 40


def _train(seed: int) -> list[dict[str, float]]:
  """The ledger's update records of `CHUNKS` chunks of the default config, trained from `seed`."""
  cfg = config_lib.default()
  cfg.seed = seed
  cfg.total_env_steps = CHUNKS * cfg.env_steps_per_chunk
  trainer = trainer_lib.make_trainer(cfg)
  carry = trainer.init(jax.random.key(cfg.seed))
  records = []
  for chunk in range(cfg.num_chunks):
    carry, metrics = trainer.train_chunk(carry)
    records += records_lib.update_records(
        jax.device_get(metrics), first_update=chunk * cfg.updates_per_chunk,
        batch_size=cfg.batch_size, sps=0.0, wall_seconds=0.0, device_memory=None)
  return records


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_default_config_learns_to_track_commands(seed):
  _check_learned(_train(seed))


@pytest.mark.slow
def test_default_config_learns_on_two_devices():
  tests = pathlib.Path(__file__).resolve().parent
  script = (f"import json, sys; sys.path.insert(0, {str(tests)!r}); import jax, test_learning; "
            "assert jax.device_count() == 2; print(json.dumps(test_learning._train(0)))")
  done = subprocess.run(
      [sys.executable, "-c", script], capture_output=True, text=True, timeout=1800,
      cwd=tests.parent,
      env=commands.forced_devices(2))
  assert done.returncode == 0, done.stderr[-3000:]
  _check_learned(json.loads(done.stdout.splitlines()[-1]))


def _check_learned(records: list[dict[str, float]]) -> None:
  first, late = records[0], records[-5:]

  def late_mean(key):
    return float(np.mean([r[key] for r in late]))

  # Measured on 2026-11-29, first update -> mean of the last 5, for seeds 0 / 1 / 2:
  #   xy tracking error, m/s   0.646 -> 0.447 / 0.660 -> 0.460 / 0.679 -> 0.549
  #   mean air time, s         0.045 -> 0.090 / 0.045 -> 0.095 / 0.047 -> 0.080
  #   reward per step          -0.0051 -> 0.0198 / -0.0049 -> 0.0208 / -0.0056 -> 0.0172
  #   timeout share of ends    0.55 / 0.65 / 0.41 (the untrained policy mostly collapses)
  # Each threshold is about half the smallest change measured.
  assert late_mean("tracking/lin_vel_error") < first["tracking/lin_vel_error"] - 0.06
  assert late_mean("contact/air_time_mean") > 1.3 * first["contact/air_time_mean"]
  assert late_mean("reward/total") > first["reward/total"] + 0.01
  ends = sum(r["episode/count"] for r in late)
  timeouts = sum(r["reset/timeout"] * r["episode/count"] for r in late)
  assert ends > 0 and timeouts / ends > 0.2
