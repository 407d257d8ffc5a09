"""A trained run folder for the tests of commands that read one (imported as `runs`; tests/ is on
sys.path): one chunk of training, its checkpoint, config and manifest, and nothing else (no
evaluation, videos or report), so it costs one chunk's compile, shared with the trainer tests."""

from __future__ import annotations

import pathlib
import tempfile

import jax

from mjx_walk import config as config_lib
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import run_folder


def one_chunk(cfg: config_lib.TrainConfig, prefix: str) -> pathlib.Path:
  """Trains `cfg` for one chunk from seed key 0 and saves it as a new run folder.

  Returns:
    The run folder (`<temporary folder>/run`), with one checkpoint at update
    `cfg.updates_per_chunk`.
  """
  trainer = trainer_lib.make_trainer(cfg)
  carry, _ = trainer.train_chunk(trainer.init(jax.random.key(0)))
  run_dir = pathlib.Path(tempfile.mkdtemp(prefix=prefix)) / "run"
  run_folder.RunFolder.create(run_dir, cfg, trainer.manifest)
  saver = checkpoint.Checkpointer(run_dir, cfg, trainer.manifest)
  saver.save(carry, wall_seconds=0.0)
  saver.close()
  return run_dir
