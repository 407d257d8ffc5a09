"""Trained run folders for the tests of what reads one (imported as `runs`; tests/ is on sys.path).

`trained` copies the session's one tiny run of the training loop (`warm_seeds` is its 2-seed
counterpart), built once under a file lock by
whichever xdist worker asks first, so the evaluate and report tests share its compile and its
training; `warm` waits for that run, so that the tests compiling the tiny config's programs
themselves read them from the compilation cache instead of compiling them beside another worker. `one_chunk` trains a config for one chunk and saves
it without evaluation, videos or report, for the export and sim2sim command tests.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import tempfile

import jax

from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import run_folder

import configs
import conftest


def trained_config() -> config_lib.TrainConfig:
  """The shared run's config: 2 chunks of the tiny config, checkpointed after each (updates 2
  and 4) and evaluated after the second (eval/4.json)."""
  return configs.tiny(2, panel__every_chunks=2, checkpoint__every_chunks=1)


def warm() -> pathlib.Path:
  """The session's trained run of `trained_config()`, built by the first caller while the
  others wait: afterwards the tiny config's chunk, init and panel are in the compilation cache.

  Tests that compile those programs themselves call it first, so that two workers never
  compile the same program at once.
  """
  shared = pathlib.Path(os.environ[conftest.SHARED])
  built = shared / "trained" / "run"
  with open(shared / "trained.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while the first trains
    if not (shared / "trained" / "complete").exists():
      shutil.rmtree(shared / "trained", ignore_errors=True)
      conftest.trace_afresh()  # the keys a fresh process gives its programs
      runner.run(trained_config(), built)
      (shared / "trained" / "complete").touch()
  return built


def seeds_config(chunks: int = 2) -> config_lib.TrainConfig:
  """The shared 2-seed run's config: `trained_config()` with `num_seeds=2` (`chunks` of it)."""
  return configs.tiny(chunks, num_seeds=2, panel__every_chunks=2, checkpoint__every_chunks=1)


def warm_seeds() -> pathlib.Path:
  """The session's trained run of `seeds_config()` (2 seeds, evaluated at update 4), built once
  by the first caller while the others wait, as `warm` builds the single-seed one. Read it, or
  copy it before changing it."""
  shared = pathlib.Path(os.environ[conftest.SHARED])
  built = shared / "seeds" / "run"
  with open(shared / "seeds.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not (shared / "seeds" / "complete").exists():
      shutil.rmtree(shared / "seeds", ignore_errors=True)
      conftest.trace_afresh()
      runner.run(seeds_config(), built)
      (shared / "seeds" / "complete").touch()
  return built


def trained(prefix: str) -> pathlib.Path:
  """A fresh copy of the session's trained run of `trained_config()` (seed 0), its own to
  change: `<temporary folder named prefix...>/run`."""
  copy = pathlib.Path(tempfile.mkdtemp(prefix=prefix)) / "run"
  shutil.copytree(warm(), copy)
  return copy


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


def flip_bytes(checkpoint_dir: pathlib.Path, item: str = "policy") -> None:
  """Flips 4 bytes in the middle of every array data file of one item of a checkpoint (the
  `policy` item is the one a loaded policy reads). The data is zstd-compressed: a flip either
  breaks the frame (unreadable) or decompresses to other numbers, which only the checksums can
  tell."""
  for victim in (checkpoint_dir / item).glob("**/d/*"):  # the item's and the process's data
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4] = bytes(b ^ 0xFF for b in data[middle:middle + 4])
    victim.write_bytes(bytes(data))
