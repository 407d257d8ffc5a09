"""Orbax checkpoints of a whole run, and restoring them: train state, env state, policy, manifest
and config.

A checkpoint is one step folder under `<run>/checkpoints/`, written by an orbax
`CheckpointManager` (a temporary folder renamed into place, so a save killed half-way never
touches the previous checkpoint). Its items:

  train     the full `TrainState`: parameters, optimizer state, normalizer with its count, PRNG
            key and update counter (env steps = update counter x batch size)
  env       the batched `EnvState`, so a resumed run continues the same episodes bit for bit
  policy    the actor parameters and the normalizer alone, for `mjx_walk.policy`
  manifest  the seed-family manifest (JSON), checked against its hash on restore
  config    the resolved config (JSON)
  progress  update, env steps, wall-clock seconds and the held-out score, for people (JSON)

Restoring works against abstract shapes from `jax.eval_shape(trainer.init, key)`: nothing is
reset or compiled to restore. Typed PRNG keys are stored as their raw key data.

The newest `checkpoint.max_to_keep` checkpoints are kept, and with `checkpoint.keep_best` also the
one with the best held-out score (mean success rate over the strata, fall rate breaking ties).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from mjx_walk import config as config_lib
from mjx_walk import families
from mjx_walk import trainer as trainer_lib

DIRNAME = "checkpoints"
_ITEMS = ("train", "env", "policy", "manifest", "config", "progress")


class CheckpointError(RuntimeError):
  """No checkpoint to restore, or none that is intact."""


def directory(run_dir: pathlib.Path | str) -> pathlib.Path:
  return pathlib.Path(run_dir).resolve() / DIRNAME


def held_out_score(result: dict[str, Any]) -> float:
  """Scalar summary of an evaluation for choosing the best checkpoint: higher is better."""
  strata = result["strata"].values()
  success = np.mean([s["success_rate"] for s in strata])
  fall = np.mean([s["fall_rate"] for s in strata])
  return float(success - 1e-3 * fall)


# STORABLE TREES
#
# Orbax stores non-empty arrays only (mjx.Data has zero-size fields) and has no typed PRNG keys.
# A tree is therefore stored as a flat dict {leaf path: NumPy array} of its non-empty leaves, keys
# as their uint32 key data, and rebuilt from the abstract tree on restore.


def _is_key(x: Any) -> bool:
  return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _leaf_name(path: Any) -> str:
  return re.sub(r"[^A-Za-z0-9_]+", "_", jax.tree_util.keystr(path)).strip("_")


def _stored_leaves(tree: Any) -> dict[str, Any]:
  """{leaf name: leaf} for the non-empty leaves of a (concrete or abstract) tree."""
  leaves = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    if math.prod(leaf.shape) == 0:
      continue
    name = _leaf_name(path)
    if name in leaves:
      raise ValueError(f"two leaves of a checkpointed tree are both named {name!r}")
    leaves[name] = leaf
  return leaves


def _to_storable(tree: Any) -> dict[str, np.ndarray]:
  """Host NumPy copies of the non-empty leaves, typed keys as their key data."""
  return {name: np.asarray(jax.device_get(jax.random.key_data(x) if _is_key(x) else x))
          for name, x in _stored_leaves(tree).items()}


def _restore_args(abstract: Any) -> ocp.args.StandardRestore:
  def target(x):
    spec = jax.eval_shape(jax.random.key_data, x) if _is_key(x) else x
    return np.zeros(spec.shape, spec.dtype)
  return ocp.args.StandardRestore({name: target(x) for name, x in _stored_leaves(abstract).items()})


def _from_storable(stored: dict[str, Any], abstract: Any) -> Any:
  """Rebuilds the tree of `abstract` from stored leaves (empty leaves are recreated)."""
  def restore_leaf(path, spec):
    if math.prod(spec.shape) == 0:
      return jnp.zeros(spec.shape, spec.dtype)
    value = stored[_leaf_name(path)]
    if _is_key(spec):
      return jax.random.wrap_key_data(jnp.asarray(value))  # the default impl, as jax.random.key
    return jnp.asarray(value, dtype=spec.dtype)
  return jax.tree_util.tree_map_with_path(restore_leaf, abstract)


# SAVING


def _manager(run_dir: pathlib.Path | str, cfg: config_lib.CheckpointConfig | None,
             read_only: bool = False) -> ocp.CheckpointManager:
  policies = []
  if cfg is not None:
    policies.append(ocp.checkpoint_managers.LatestN(cfg.max_to_keep))
    if cfg.keep_best:
      policies.append(ocp.checkpoint_managers.BestN(
          get_metric_fn=lambda metrics: metrics["score"], n=1,
          keep_checkpoints_without_metrics=False))
  options = ocp.CheckpointManagerOptions(
      preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies)
      if policies else None,
      # Synchronous: a save is complete (renamed into place) when `save` returns, so a stop
      # signal right after it loses nothing.
      enable_async_checkpointing=False,
      # A reader never saves, never creates the folder, and must not delete the temporary
      # folder of a save in progress elsewhere. (Orbax's read_only option does the same but
      # warns on every use.)
      cleanup_tmp_directories=not read_only,
      save_interval_steps=0 if read_only else 1,
      create=not read_only,
  )
  return ocp.CheckpointManager(directory(run_dir), options=options, item_names=_ITEMS)


class Checkpointer:
  """Saves a run's checkpoints into `<run_dir>/checkpoints/` under the config's keep policy."""

  def __init__(self, run_dir: pathlib.Path | str, config: config_lib.TrainConfig,
               manifest: families.Manifest):
    self._config = config
    self._manifest_json = manifest.to_json()
    self._manager = _manager(run_dir, config.checkpoint)

  def save(self, carry: trainer_lib.Carry, *, wall_seconds: float,
           evaluation: dict[str, Any] | None = None) -> pathlib.Path:
    """Saves the carry at its update step; returns the step folder.

    Args:
      carry: the run's state after a chunk.
      wall_seconds: seconds since the run started (recorded for people).
      evaluation: the held-out result of this step, if the panel ran; it ranks the checkpoint.
    """
    train = carry.train
    step = int(train.update_step)
    score = None if evaluation is None else held_out_score(evaluation)
    progress = {"update": step, "env_steps": step * self._config.batch_size,
                "wall_seconds": wall_seconds, "held_out_score": score}
    self._manager.save(
        step,
        args=ocp.args.Composite(
            train=ocp.args.StandardSave(_to_storable(train)),
            env=ocp.args.StandardSave(_to_storable(carry.env)),
            policy=ocp.args.StandardSave(_to_storable(_policy_tree(train))),
            manifest=ocp.args.JsonSave(self._manifest_json),
            config=ocp.args.JsonSave(self._config.to_dict()),
            progress=ocp.args.JsonSave(progress),
        ),
        metrics=None if score is None else {"score": score},
        force=True,
    )
    return pathlib.Path(self._manager.directory) / str(step)

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def _policy_tree(train: trainer_lib.TrainState) -> dict[str, Any]:
  return {"actor": train.params.actor, "normalizer": train.normalizer}


# RESTORING


@dataclasses.dataclass(frozen=True)
class Restored:
  carry: trainer_lib.Carry
  manifest: families.Manifest
  config: config_lib.TrainConfig
  step: int
  progress: dict[str, Any]
  path: pathlib.Path


def steps(run_dir: pathlib.Path | str) -> list[int]:
  """Saved steps, oldest first (an interrupted save's temporary folder is not a step)."""
  if not directory(run_dir).is_dir():
    return []
  manager = _manager(run_dir, None, read_only=True)
  try:
    return sorted(manager.all_steps())
  finally:
    manager.close()


def _restore_items(run_dir: pathlib.Path | str, step: int, args: dict[str, Any]) -> Any:
  manager = _manager(run_dir, None, read_only=True)
  try:
    return manager.restore(step, args=ocp.args.Composite(**args))
  finally:
    manager.close()


def read_json_items(run_dir: pathlib.Path | str, step: int) -> tuple[
    config_lib.TrainConfig, families.Manifest, dict[str, Any]]:
  """The config, manifest and progress of a checkpoint, without touching its arrays."""
  items = _restore_items(run_dir, step, {
      "config": ocp.args.JsonRestore(), "manifest": ocp.args.JsonRestore(),
      "progress": ocp.args.JsonRestore()})
  return (config_lib.from_dict(items["config"]), families.Manifest.from_json(items["manifest"]),
          items["progress"])


def restore(run_dir: pathlib.Path | str, abstract_carry: trainer_lib.Carry,
            step: int | None = None, log=print) -> Restored:
  """Restores a checkpoint against abstract shapes, falling back past broken ones.

  Args:
    run_dir: the run folder.
    abstract_carry: `jax.eval_shape(trainer.init, key)`.
    step: a specific update step; None for the newest intact checkpoint.
    log: where fallback notices go.

  Raises:
    CheckpointError: no checkpoint, the requested step is missing or broken, or every
      checkpoint is broken. The message names each step and path that failed.
  """
  available = steps(run_dir)
  if not available:
    raise CheckpointError(f"no checkpoint in {directory(run_dir)}")
  if step is not None and step not in available:
    raise CheckpointError(
        f"no checkpoint at step {step} in {directory(run_dir)}; saved steps are {available}")
  candidates = [step] if step is not None else sorted(available, reverse=True)
  failures = []
  for candidate in candidates:
    path = directory(run_dir) / str(candidate)
    try:
      items = _restore_items(run_dir, candidate, {
          "train": _restore_args(abstract_carry.train),
          "env": _restore_args(abstract_carry.env),
          "config": ocp.args.JsonRestore(),
          "manifest": ocp.args.JsonRestore(),
          "progress": ocp.args.JsonRestore(),
      })
      carry = trainer_lib.Carry(
          train=_from_storable(items["train"], abstract_carry.train),
          env=_from_storable(items["env"], abstract_carry.env))
      manifest = families.Manifest.from_json(items["manifest"])
      config = config_lib.from_dict(items["config"])
    except Exception as error:  # pylint: disable=broad-except
      failures.append(f"step {candidate} at {path}: {type(error).__name__}: {error}")
      if step is None:
        log(f"checkpoint step {candidate} at {path} is unreadable "
            f"({type(error).__name__}: {str(error)[:200]}); trying an older one")
      continue
    if failures:
      log(f"restored step {candidate} from {path}, the newest intact checkpoint")
    return Restored(carry=carry, manifest=manifest, config=config, step=candidate,
                    progress=items["progress"], path=path)
  raise CheckpointError("no intact checkpoint to restore:\n  " + "\n  ".join(failures))


def set_aside_newer(run_dir: pathlib.Path | str, step: int) -> list[pathlib.Path]:
  """Moves checkpoints newer than `step` (unreadable ones a restore fell back past) out of the
  manager's folder into `<run>/checkpoints_unreadable/`, so the resumed run can save those steps
  again. Nothing is deleted. Returns the new paths."""
  moved = []
  for newer in [s for s in steps(run_dir) if s > step]:
    target = pathlib.Path(run_dir).resolve() / "checkpoints_unreadable" / str(newer)
    target.parent.mkdir(exist_ok=True)
    if target.exists():
      target = target.with_name(f"{newer}-{len(list(target.parent.iterdir()))}")
    (directory(run_dir) / str(newer)).rename(target)
    moved.append(target)
  return moved


def restore_policy(run_dir: pathlib.Path | str, abstract_policy: dict[str, Any],
                   step: int) -> dict[str, Any]:
  """Restores only the `policy` item: {"actor": params, "normalizer": NormalizerState}."""
  items = _restore_items(run_dir, step, {"policy": _restore_args(abstract_policy)})
  return _from_storable(items["policy"], abstract_policy)
