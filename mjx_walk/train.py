"""The training CLI: an absl app that reads flags, writes the run folder, and drives the chunks.

  python -m mjx_walk.train                                   # embedded CPU default
  python -m mjx_walk.train --config=experiments/go2_flat.py --config.num_envs=1024
  python -m mjx_walk.train --config.total_env_steps=2000000 --run_dir=runs/short

This module and the other entry points are the only places that read flags or write files. The
host loop runs one jitted chunk at a time, moves its metrics off the device, appends one record
per update to `metrics.jsonl`, and prints one progress line per chunk.
"""

from __future__ import annotations

import datetime
import json
import math
import pathlib
import time
from typing import Any, TextIO

from absl import app
from absl import flags
import jax
from ml_collections import config_flags

from mjx_walk import config as config_lib
from mjx_walk import trainer as trainer_lib

_CONFIG = config_flags.DEFINE_config_dataclass(
    "config",
    config_lib.default(),
    "Run configuration. `--config=path/to/file.py` loads that file's get_config(); "
    "`--config.<field>=value` overrides any field, e.g. --config.ppo.learning_rate=3e-4.",
    parse_fn=config_lib.load_file,
)
_RUN_DIR = flags.DEFINE_string(
    "run_dir", None, "Folder the run writes into. Default: runs/<UTC timestamp>.")


def _json_value(value: Any) -> Any:
  """JSON has no NaN: undefined figures (no episode ended yet) are written as null."""
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def _write_update_records(file: TextIO, metrics: dict[str, Any], first_update: int,
                          batch_size: int, chunk_sps: float) -> None:
  """Appends one JSON line per update in the chunk."""
  num_updates = len(next(iter(metrics.values())))
  for k in range(num_updates):
    update = first_update + k + 1
    record = {"update": update, "env_steps": update * batch_size, "perf/sps": chunk_sps}
    record.update(trainer_lib.summarize({key: value[k:k + 1] for key, value in metrics.items()}))
    file.write(json.dumps({key: _json_value(v) for key, v in record.items()}) + "\n")
  file.flush()


def format_progress(env_steps: int, total: int, sps: float, record: dict[str, float]) -> str:
  """One progress line: steps, speed, episode return and length, and why episodes ended."""
  reasons = " ".join(
      f"{key.split('/')[1]}={record[key]:.0%}" for key in sorted(record) if key.startswith("reset/"))
  # Before the first episode ends there is no return to show yet.
  ret = f"{record['episode/return']:8.2f}" if record["episode/count"] else f"{'-':>8}"
  length = f"{record['episode/length']:6.1f}" if record["episode/count"] else f"{'-':>6}"
  return (
      f"steps {env_steps:>11,}/{total:,}  sps {sps:>7,.0f}  "
      f"return {ret}  len {length}  "
      f"reward/step {record['reward/total']:+.4f}  ends {int(record['episode/count']):>5}  "
      f"[{reasons}]"
  )


def run(config: config_lib.TrainConfig, run_dir: pathlib.Path) -> pathlib.Path:
  """Trains `config` to completion, writing config.json and metrics.jsonl into `run_dir`."""
  config_lib.validate(config)  # before anything is built or compiled
  run_dir.mkdir(parents=True, exist_ok=True)
  (run_dir / "config.json").write_text(config.to_json())
  print(f"run folder: {run_dir}")
  print(f"{config.num_envs} envs x {config.unroll_length} steps = {config.batch_size} samples "
        f"per update, {config.updates_per_chunk} updates per chunk, {config.num_chunks} chunks, "
        f"devices: {jax.devices()}")

  trainer = trainer_lib.make_trainer(config)
  carry = trainer.init(jax.random.key(config.seed))
  total = config.num_chunks * config.env_steps_per_chunk
  metrics_path = run_dir / "metrics.jsonl"
  with metrics_path.open("a") as metrics_file:
    try:
      for chunk in range(config.num_chunks):
        start = time.perf_counter()
        first_update = int(carry.train.update_step)
        carry, metrics = trainer.train_chunk(carry)
        metrics = jax.device_get(metrics)  # waits for the chunk; the only host sync per chunk
        seconds = time.perf_counter() - start
        sps = config.env_steps_per_chunk / seconds
        _write_update_records(metrics_file, metrics, first_update, config.batch_size, sps)
        steps = trainer_lib.env_steps(carry.train, config)
        line = format_progress(steps, total, sps, trainer_lib.summarize(metrics))
        if chunk == 0:
          line += f"  (includes compile: {seconds:.0f} s)"
        print(line, flush=True)
    except KeyboardInterrupt:
      print("interrupted; the metrics written so far are kept.")
  print(f"done. config: {run_dir / 'config.json'}  metrics: {metrics_path}")
  return run_dir


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  run_dir = _RUN_DIR.value or str(
      pathlib.Path("runs") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S"))
  try:
    config_lib.validate(_CONFIG.value)
  except ValueError as error:
    raise app.UsageError(str(error)) from None
  run(_CONFIG.value, pathlib.Path(run_dir))


if __name__ == "__main__":
  app.run(main)
