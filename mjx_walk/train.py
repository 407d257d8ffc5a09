"""The training CLI: an absl app that reads flags, writes the run folder, and drives the chunks.

  python -m mjx_walk.train                                   # embedded CPU default
  python -m mjx_walk.train --config=experiments/go2_flat.py --config.num_envs=1024
  python -m mjx_walk.train --config.total_env_steps=2000000 --run_dir=runs/short

This module and the other entry points are the only places that read flags or write files. It
writes the manifest and prints the recipe before anything compiles. The host loop then runs one
jitted chunk at a time, moves its metrics off the device, appends one `update` record per update
to the ledger, prints one progress line per chunk, and every `panel.every_chunks` chunks (and once
at the end) evaluates the policy on the held-out panel and prints the per-stratum table.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import time


from absl import app
from absl import flags
import jax
from ml_collections import config_flags

from mjx_walk import config as config_lib
from mjx_walk import evaluate
from mjx_walk import families
from mjx_walk import ledger
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


def _evaluate(evaluator: evaluate.Evaluator, carry: trainer_lib.Carry,
              config: config_lib.TrainConfig, run_dir: pathlib.Path, run_start: float,
              log: ledger.Ledger) -> dict:
  """Runs the held-out panel, appends the eval record, and writes eval/<update>.json."""
  update = int(carry.train.update_step)
  result = evaluator(carry.train.params, carry.train.normalizer)
  record = ledger.eval_record(result, update=update, env_steps=update * config.batch_size,
                              wall_seconds=time.perf_counter() - run_start)
  log.write(record)
  (run_dir / "eval").mkdir(exist_ok=True)
  (run_dir / "eval" / f"{update}.json").write_text(json.dumps(record, indent=1))
  return record


def run(config: config_lib.TrainConfig, run_dir: pathlib.Path) -> pathlib.Path:
  """Trains `config` to completion, writing the run folder.

  The folder gets config.json, manifest.json, ledger.jsonl (recipe, one record per update, one
  per panel evaluation) and eval/<update>.json. Everything that can be refused (config values,
  leaked seeds) is checked before anything is written or compiled.
  """
  config_lib.validate(config)
  manifest = families.make_manifest(config)
  run_dir.mkdir(parents=True, exist_ok=True)
  (run_dir / "config.json").write_text(config.to_json())
  manifest.write(run_dir / "manifest.json")
  recipe = ledger.recipe(config, manifest)
  print(f"run folder: {run_dir}")
  print(ledger.format_recipe(recipe), flush=True)

  run_start = time.perf_counter()
  trainer = trainer_lib.make_trainer(config, manifest=manifest)
  evaluator = evaluate.make_evaluator(config, manifest, trainer.networks)
  carry = trainer.init(jax.random.key(config.seed))
  total = config.num_chunks * config.env_steps_per_chunk
  every = config.panel.every_chunks
  last_eval = None
  with ledger.Ledger(run_dir / ledger.FILENAME) as log:
    log.write(recipe)
    try:
      for chunk in range(config.num_chunks):
        start = time.perf_counter()
        first_update = int(carry.train.update_step)
        carry, metrics = trainer.train_chunk(carry)
        metrics = jax.device_get(metrics)  # waits for the chunk; the only host sync per chunk
        seconds = time.perf_counter() - start
        sps = config.env_steps_per_chunk / seconds
        for record in ledger.update_records(
            metrics, first_update=first_update, batch_size=config.batch_size, sps=sps,
            wall_seconds=time.perf_counter() - run_start,
            device_memory=ledger.current_device_memory()):
          log.write(record)
        steps = trainer_lib.env_steps(carry.train, config)
        line = format_progress(steps, total, sps, trainer_lib.summarize(metrics))
        if chunk == 0:
          line += f"  (includes compile: {seconds:.0f} s)"
        print(line, flush=True)
        if every and (chunk + 1) % every == 0 and chunk + 1 < config.num_chunks:
          last_eval = _evaluate(evaluator, carry, config, run_dir, run_start, log)
          print(f"held-out panel at {steps:,} env steps:\n"
                f"{ledger.format_eval_table(last_eval)}", flush=True)
    except KeyboardInterrupt:
      print("interrupted; evaluating the policy as it is. The ledger so far is kept.")
    last_eval = _evaluate(evaluator, carry, config, run_dir, run_start, log)
  print(f"held-out panel, final policy ({trainer_lib.env_steps(carry.train, config):,} env "
        f"steps):\n{ledger.format_eval_table(last_eval)}")
  print(f"done. config: {run_dir / 'config.json'}  manifest: {run_dir / 'manifest.json'}  "
        f"ledger: {run_dir / ledger.FILENAME}  evaluations: {run_dir / 'eval'}")
  return run_dir


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  run_dir = _RUN_DIR.value or str(
      pathlib.Path("runs") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S"))
  try:
    config_lib.validate(_CONFIG.value)
    families.make_manifest(_CONFIG.value)  # refuses leaked seeds before anything is written
  except ValueError as error:
    raise app.UsageError(str(error)) from None
  run(_CONFIG.value, pathlib.Path(run_dir))


if __name__ == "__main__":
  app.run(main)
