"""The multi-device half of tests/test_sharding.py, run in its own process with forced host
devices (a process's device count is fixed when JAX starts):

  XLA_FLAGS=--xla_force_host_platform_device_count=4 python tests/sharded_runs.py OUT_DIR

On meshes of 2 and 4 of the 4 CPU devices, with the tiny test config, it writes to OUT_DIR:
  init_<D>.npz         the initial carry, gathered to the host (leaf name -> array)
  chunk_<D>.npz        the carry after one chunk, and its metrics under `metric/...`
  collectives.json     per program (D devices, or S seeds on 4), how many collectives the
                       compiled chunk holds and those that could wait beside a loop's own
                       (`collective_order.overlaps`)
  replicas.json        per D, the leaves of the train state whose copies differ between devices,
                       what `check_replicated` said of an array with two different copies,
                       and what `runner.run` said of a batch that does not split over 4 devices
  straight/            a run folder with two straight chunks on 2 devices, checkpointed after
                       each (steps 2 and 4)
  resumed_<D>.npz      the carry after one more chunk from its step-2 checkpoint restored onto
                       D devices (2: the same count, 4: resharded)
  seeds_<S>.npz        S training seeds on the 4 devices after one chunk (S = 4: a seed per
                       device; S = 2: 2 rows of 2 devices), with the mesh in seeds.json
  seeds_restored.npz   the 2-seed carry saved there (seeds_saved/) and restored onto 2
                       devices (2 rows of 1); seeds_restored_chunk.npz one chunk after it
  resharded/           the same step-2 checkpoint resumed by the training command's resume on
                       4 devices; what it printed is in resharded.txt, the carry it placed in
                       resharded_carry.npz
The test compares them with the one-device run it computes itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import shutil
import sys

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import collective_order  # pylint: disable=g-import-not-at-top,wrong-import-position
import configs  # pylint: disable=g-import-not-at-top,wrong-import-position
from mjx_walk import runner  # pylint: disable=wrong-import-position
from mjx_walk.learn import seeds as seeds_lib  # pylint: disable=wrong-import-position
from mjx_walk.learn import sharding  # pylint: disable=wrong-import-position
from mjx_walk.learn import trainer as trainer_lib  # pylint: disable=wrong-import-position
from mjx_walk.run import checkpoint  # pylint: disable=wrong-import-position
from mjx_walk.run import run_folder  # pylint: disable=wrong-import-position


def config(chunks: int = 1, **changes):
  """The tiny config, checkpointed after every chunk and evaluated only at its end."""
  return configs.tiny(chunks, checkpoint__every_chunks=1, panel__every_chunks=0, **changes)


def flat(tree) -> dict[str, np.ndarray]:
  """{leaf path: whole host array}."""
  host = sharding.to_host(tree)
  return {jax.tree_util.keystr(path): leaf
          for path, leaf in jax.tree_util.tree_leaves_with_path(host)}


def collectives(trainer: trainer_lib.Trainer, carry) -> dict[str, object]:
  """What `collective_order` reads in the trainer's chunk, compiled for `carry` (the program the
  chunk's first call then runs)."""
  text = trainer.train_chunk.lower(carry).compile().as_text()
  return {"count": collective_order.count(text), "overlaps": collective_order.overlaps(text)}


def main(out: pathlib.Path) -> None:
  assert jax.device_count() == 4, jax.devices()
  out.mkdir(parents=True, exist_ok=True)
  mesh = {d: sharding.make(jax.devices()[:d]) for d in (2, 4)}
  trainers = {d: trainer_lib.make_trainer(config(2), devices=mesh[d]) for d in (2, 4)}
  replicas, programs = {}, {}
  for d, trainer in trainers.items():
    carry = trainer.init(jax.random.key(0))
    np.savez(out / f"init_{d}.npz", **flat(carry))
    programs[f"{d} devices"] = collectives(trainer, carry)
    carry, metrics = trainer.train_chunk(carry)
    replicas[d] = sharding.differing_copies(carry.train)
    np.savez(out / f"chunk_{d}.npz", **flat(carry),
             **{f"metric/{k}": np.asarray(v) for k, v in jax.device_get(metrics).items()})
    if d == 2:
      # The run folder of two straight chunks on 2 devices, checkpointed after each.
      run = run_folder.RunFolder.create(out / "straight", trainer.config, trainer.manifest)
      saver = checkpoint.Checkpointer(run.root, trainer.config, trainer.manifest)
      saver.save(carry, wall_seconds=0.0, devices=2)
      carry, _ = trainer.train_chunk(carry)
      saver.save(carry, wall_seconds=0.0, devices=2)
      saver.close()
  # A "replicated" array whose two copies differ, as a fault would leave it: the check before
  # every save must name it.
  first, second = mesh[2].mesh.devices.flat
  tampered = jax.make_array_from_single_device_arrays(
      (3,), mesh[2].replicated,
      [jax.device_put(np.zeros(3, np.float32), first), jax.device_put(np.ones(3, np.float32), second)])
  try:
    sharding.check_replicated({"w": tampered})
    replicas["tampered"] = "not caught"
  except sharding.NotReplicatedError as error:
    replicas["tampered"] = str(error)
  # A batch that does not split over the devices: refused before anything is written.
  try:
    runner.run(configs.tiny(1, num_envs=6, families__num_train_families=2), out / "refused",
                  devices=mesh[4])
    replicas["refused"] = "not refused"
  except ValueError as error:
    replicas["refused"] = str(error)
  replicas["refused_wrote"] = (out / "refused").exists()
  (out / "replicas.json").write_text(json.dumps(replicas))

  # Its first checkpoint, continued for one chunk on 2 devices and on 4.
  for d, trainer in trainers.items():
    abstract = jax.eval_shape(trainer.init, jax.random.key(0))
    restored = checkpoint.restore(out / "straight", abstract, trainer.config, trainer.manifest,
                                  step=2)
    carry, _ = trainer.train_chunk(trainer.devices.place(restored.carry, trainer.carry_shardings))
    np.savez(out / f"resumed_{d}.npz", **flat(carry))

  # Several seeds over the 4 devices: 4 seeds a device each, 2 seeds on 2 rows of 2.
  meshes = {}
  for num_seeds in (2, 4):
    trainer = trainer_lib.make_trainer(config(1, num_seeds=num_seeds))
    carry = trainer.init(seeds_lib.initial_keys(trainer.config))
    programs[f"{num_seeds} seeds"] = collectives(trainer, carry)
    carry, metrics = trainer.train_chunk(carry)
    meshes[num_seeds] = {"shape": dict(trainer.devices.mesh.shape),
                         "describe": trainer.devices.describe(),
                         "differing": sharding.differing_copies(carry.train)}
    np.savez(out / f"seeds_{num_seeds}.npz", **flat(carry),
             **{f"metric/{k}": np.asarray(v) for k, v in jax.device_get(metrics).items()})
    if num_seeds == 2:  # saved from 2 rows of 2 devices, restored onto 2 rows of 1
      run_folder.RunFolder.create(out / "seeds_saved", trainer.config, trainer.manifest)
      saver = checkpoint.Checkpointer(out / "seeds_saved", trainer.config, trainer.manifest)
      saver.save(carry, wall_seconds=0.0, devices=4)
      saver.close()
      two = trainer_lib.make_trainer(trainer.config, devices=sharding.make(jax.devices()[:2]))
      abstract = jax.eval_shape(two.init, seeds_lib.initial_keys(two.config))
      restored = checkpoint.restore(out / "seeds_saved", abstract, two.config, two.manifest)
      placed = two.devices.place(restored.carry, two.carry_shardings)
      meshes["restored"] = {"shape": dict(two.devices.mesh.shape),
                            "differing": sharding.differing_copies(placed.train)}
      np.savez(out / "seeds_restored.npz", **flat(placed))
      placed, _ = two.train_chunk(placed)
      np.savez(out / "seeds_restored_chunk.npz", **flat(placed))
  (out / "seeds.json").write_text(json.dumps(meshes))
  (out / "collectives.json").write_text(json.dumps(programs))

  # The same checkpoint resumed on 4 devices by the training command's resume, which says so.
  resharded = out / "resharded"
  shutil.copytree(out / "straight", resharded)
  shutil.rmtree(resharded / "checkpoints" / "4")
  said = io.StringIO()
  with contextlib.redirect_stdout(said):
    trainer = trainers[4]
    carry, _ = runner._resume(run_folder.RunFolder.open(resharded), trainer.config,  # pylint: disable=protected-access
                                 trainer.manifest, trainer)
  (out / "resharded.txt").write_text(said.getvalue())
  np.savez(out / "resharded_carry.npz", **flat(carry))


if __name__ == "__main__":
  main(pathlib.Path(sys.argv[1]))
