"""Orbax checkpoints of a whole run, verified on restore: train state, env state, policy, manifest
and config.

A checkpoint is one step folder under `<run>/checkpoints/`, written by an orbax
`CheckpointManager` (a temporary folder renamed into place, so a save killed half-way never
touches the previous checkpoint). Its items:

  train     the full `TrainState`: parameters, optimizer state, normalizer with its count, PRNG
            key and update counter (env steps = update counter x batch size)
  env       the batched `EnvState` and, beside its fields, the trainer's episode traces
            (`Carry.trace`, leaves `trace_...`), so a resumed run continues the same episodes
            bit for bit
  policy    the actor parameters and the normalizer alone, for `mjx_walk.run.policy`
  manifest  the seed-family manifest (JSON), checked against its hash on restore
  config    the resolved config (JSON)
  progress  update, env steps, wall-clock seconds, the held-out score, and the devices and
            processes it was trained on, for people (JSON)
  contents  what the array items hold (JSON): every stored leaf's shape, dtype and sha256, and
            the config and manifest hashes

Restoring verifies everything before the state is used: the config against the run's
(`field: old -> new` for each difference that changes the computation), the manifest hash, each
leaf's shape and dtype against abstract shapes from `jax.eval_shape(trainer.init, key)`, and each
restored leaf's sha256 against `contents`. A failure names the step, the path and the leaf or
field. Resuming falls back past failed checkpoints to the newest intact one and says so; an
explicit step is refused. Nothing is reset or compiled to restore. An array item is stored as its
non-empty leaves by name, typed PRNG keys as their raw key data (`mjx_walk.run.storable`). Arrays
are stored whole, whatever number of devices or processes held them, so a checkpoint restores
onto any number (`sharding.Devices.place`).

A train state with a non-finite value is never saved (`DivergedError`): the keep-policy below
could otherwise rotate the last good checkpoint out. The newest `checkpoint.max_to_keep`
checkpoints are kept, and with `checkpoint.keep_best` also the one with the best held-out score
(mean success rate over the strata, fall rate breaking ties).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import sys
import threading
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable

import numpy as np
import orbax.checkpoint as ocp

from mjx_walk import config as config_lib
from mjx_walk.run import run_folder
from mjx_walk.run import storable
from mjx_walk.sim import families

if TYPE_CHECKING:  # the trainer is not imported at run time: `policy.load` reads checkpoints
  from mjx_walk.learn import trainer as trainer_lib

_ARRAY_ITEMS = ("train", "env", "policy")
_ITEMS = (*_ARRAY_ITEMS, "manifest", "config", "progress", "contents")


class CheckpointError(RuntimeError):
  """No checkpoint to restore, or none that is intact and compatible."""


class DivergedError(CheckpointError):
  """A train state with NaN or inf was about to be saved."""


def directory(run_dir: pathlib.Path | str) -> pathlib.Path:
  return run_folder.RunFolder(pathlib.Path(run_dir)).checkpoints


def held_out_score(result: dict[str, Any]) -> float:
  """Scalar summary of an evaluation for choosing the best checkpoint: higher is better."""
  strata = result["strata"].values()
  success = np.mean([s["success_rate"] for s in strata])
  fall = np.mean([s["fall_rate"] for s in strata])
  return float(success - 1e-3 * fall)


# WHAT A CHECKPOINT HOLDS


def _sha256(array: np.ndarray) -> str:
  return hashlib.sha256(np.ascontiguousarray(array).view(np.uint8)).hexdigest()


def _describe(stored: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
  """{leaf: {"shape", "dtype", "sha256"}} of a storable tree."""
  return {name: {"shape": list(a.shape), "dtype": str(a.dtype), "sha256": _sha256(a)}
          for name, a in stored.items()}


def _config_hash(config: config_lib.TrainConfig) -> str:
  return _config_dict_hash(config.to_dict())


def _config_dict_hash(values: dict[str, Any]) -> str:
  """sha256 of a config's dict as `TrainConfig.to_json` writes it. The stored dict is hashed as
  stored, so a checkpoint from before a config section existed still verifies."""
  return hashlib.sha256(json.dumps(values, indent=2, sort_keys=True).encode()).hexdigest()


def _check_layout(item: str, recorded: dict[str, Any], abstract: Any) -> list[str]:
  """Leaves of `item` whose recorded shape or dtype is not what this config's state needs."""
  expected = {name: storable.stored_spec(x)
              for name, x in storable.stored_leaves(abstract).items()}
  problems = [f"{item}/{name}: missing" for name in sorted(set(expected) - set(recorded))]
  problems += [f"{item}/{name}: not in this config's state"
               for name in sorted(set(recorded) - set(expected))]
  for name in sorted(set(expected) & set(recorded)):
    want, got = expected[name], recorded[name]
    if list(want.shape) != got["shape"] or str(want.dtype) != got["dtype"]:
      problems.append(f"{item}/{name}: saved {got['dtype']}{got['shape']}, this config needs "
                      f"{want.dtype}{list(want.shape)}")
  return problems


def _check_sums(item: str, recorded: dict[str, Any], stored: dict[str, Any]) -> list[str]:
  """Restored leaves of `item` whose bytes are not the ones saved."""
  problems = []
  for name, entry in recorded.items():
    array = np.asarray(stored[name])
    if list(array.shape) != entry["shape"] or str(array.dtype) != entry["dtype"]:
      problems.append(f"{item}/{name}: read back as {array.dtype}{list(array.shape)}, saved as "
                      f"{entry['dtype']}{entry['shape']}")
    elif _sha256(array) != entry["sha256"]:
      problems.append(f"{item}/{name}: checksum mismatch (the data changed after it was saved)")
  return problems


def _nonfinite_leaves(stored: dict[str, np.ndarray]) -> list[str]:
  return [name for name, a in stored.items()
          if np.issubdtype(a.dtype, np.inexact) and not np.isfinite(a).all()]


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
    self._manifest = manifest
    self._directory = directory(run_dir)
    self._manager = _manager(run_dir, config.checkpoint)

  def save(self, carry: trainer_lib.Carry, *, wall_seconds: float,
           evaluation: dict[str, Any] | None = None, score: float | None = None,
           devices: int = 1, processes: int = 1) -> pathlib.Path:
    """Saves the carry at its update step; returns the step folder.

    Over several processes every process calls it with the same values: the carry's blocks
    held by other processes are gathered, and Orbax writes each item once.

    Args:
      carry: the run's state after a chunk, on any number of devices; it is stored whole, so a
        resume may place it on another number.
      wall_seconds: seconds since the run started (recorded for people).
      evaluation: the held-out result of this step, if the panel ran; it ranks the checkpoint.
      score: the held-out score when `evaluation` is not at hand (a process that did not
        evaluate).
      devices: the devices the run trains on (recorded, so that a resume on another number
        says that it reshards).
      processes: the processes it trains in.

    Raises:
      DivergedError: the train state holds NaN or inf; nothing is saved.
    """
    train = carry.train
    step = int(np.asarray(train.update_step).reshape(-1)[0])  # every seed's is the same
    arrays = {"train": storable.to_storable(train),
              "env": storable.to_storable(_env_item(carry)),
              "policy": storable.to_storable(_policy_tree(train))}
    nonfinite = _nonfinite_leaves(arrays["train"])
    if nonfinite:
      raise DivergedError(f"refusing to save update {step}: the train state is not finite in "
                          f"{', '.join(nonfinite[:5])}")
    if evaluation is not None:
      score = held_out_score(evaluation)
    progress = {"update": step, "env_steps": step * self._config.batch_size,
                "wall_seconds": wall_seconds, "held_out_score": score, "devices": devices,
                "processes": processes}
    contents = {"config_sha256": _config_hash(self._config), "manifest_hash": self._manifest.hash,
                "items": {item: _describe(stored) for item, stored in arrays.items()}}
    self._manager.save(
        step,
        args=ocp.args.Composite(
            **{item: ocp.args.StandardSave(stored) for item, stored in arrays.items()},
            manifest=ocp.args.JsonSave(self._manifest.to_json()),
            config=ocp.args.JsonSave(self._config.to_dict()),
            progress=ocp.args.JsonSave(progress),
            contents=ocp.args.JsonSave(contents),
        ),
        metrics=None if score is None else {"score": score},
        force=True,
    )
    return self._directory / str(step)

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def _policy_tree(train: trainer_lib.TrainState) -> dict[str, Any]:
  return {"actor": train.params.actor, "normalizer": train.normalizer}


def _fields(tree: Any) -> dict[str, Any]:
  """{field name: value} of a dataclass (an `EnvState`), or a copy of a dict."""
  if dataclasses.is_dataclass(tree):
    return {field.name: getattr(tree, field.name) for field in dataclasses.fields(tree)}
  return dict(tree)


def _env_item(carry: trainer_lib.Carry) -> dict[str, Any]:
  """The tree stored as item "env": the env state's fields and `"trace"`, the episode traces.

  A dict key and an attribute give the same leaf name (`['data'].qpos` and `.data.qpos` are both
  `data_qpos`), so the traces are stored under `trace_...` as when they were an env state field.
  """
  return {**_fields(carry.env), "trace": carry.trace}


def _carry_with_env_item(carry: trainer_lib.Carry, item: dict[str, Any]) -> trainer_lib.Carry:
  """`carry` with its env state and traces taken from a restored "env" item."""
  env = {name: item[name] for name in _fields(carry.env)}
  if dataclasses.is_dataclass(carry.env):
    env = carry.env.replace(**env)
  return carry.replace(env=env, trace=item["trace"])


# RESTORING


@dataclasses.dataclass(frozen=True)
class Restored:
  carry: trainer_lib.Carry
  manifest: families.Manifest
  config: config_lib.TrainConfig
  step: int
  progress: dict[str, Any]
  path: pathlib.Path


class _Unusable(Exception):
  """One checkpoint failed verification; the message says what failed."""


def steps(run_dir: pathlib.Path | str) -> list[int]:
  """Saved steps, oldest first (an interrupted save's temporary folder is not a step)."""
  if not directory(run_dir).is_dir():
    return []
  manager = _manager(run_dir, None, read_only=True)
  try:
    return sorted(manager.all_steps())
  finally:
    manager.close()


def _ignore_aborted_reads() -> None:
  """Drops the 'Event loop is closed' errors of a restore that fails.

  When one file of a checkpoint cannot be read, Orbax closes its event loop while TensorStore
  still completes the item's other reads; each completion then fails to schedule its callback
  and Python prints a traceback through `sys.unraisablehook` (or `threading.excepthook`),
  dozens of them, after the error was already reported with its step and path. Those, and only
  those, are dropped.
  """
  previous = sys.unraisablehook
  if getattr(previous, "ignores_aborted_reads", False):
    return

  def hook(unraisable):
    error = unraisable.exc_value
    if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
      previous(unraisable)

  hook.ignores_aborted_reads = True
  sys.unraisablehook = hook
  previous_thread_hook = threading.excepthook

  def thread_hook(args):
    if not (isinstance(args.exc_value, RuntimeError)
            and str(args.exc_value) == "Event loop is closed"):
      previous_thread_hook(args)

  threading.excepthook = thread_hook


def _restore_items(run_dir: pathlib.Path | str, step: int, args: dict[str, Any]) -> Any:
  _ignore_aborted_reads()  # before the reads: their callbacks may fail while Orbax still raises
  manager = _manager(run_dir, None, read_only=True)
  try:
    return manager.restore(step, args=ocp.args.Composite(**args))
  except Exception as error:  # pylint: disable=broad-except
    # Orbax and TensorStore raise many types for a torn or missing file.
    raise _Unusable(f"unreadable ({type(error).__name__}: {str(error)[:300]})") from error
  finally:
    manager.close()


def read_json_items(run_dir: pathlib.Path | str, step: int) -> tuple[
    config_lib.TrainConfig, families.Manifest, dict[str, Any], dict[str, Any]]:
  """The config, manifest, progress and contents of a checkpoint, without touching its arrays.

  Raises:
    CheckpointError: naming the step and path, when they cannot be read or do not agree (the
      manifest's or the config's hash is not the one recorded in `contents`).
  """
  try:
    return _read_json_items(run_dir, step)
  except _Unusable as error:
    raise CheckpointError(f"checkpoint step {step} at {directory(run_dir) / str(step)}: "
                          f"{error}") from None


def _read_json_items(run_dir, step):
  items = _restore_items(run_dir, step, {name: ocp.args.JsonRestore() for name in (
      "config", "manifest", "progress", "contents")})
  try:
    manifest = families.Manifest.from_json(items["manifest"])
    config = config_lib.from_dict(items["config"])
  except (ValueError, TypeError, KeyError) as error:
    raise _Unusable(f"unreadable manifest or config ({error})") from error
  contents = items["contents"]
  if not isinstance(contents, dict) or not {"items", "config_sha256", "manifest_hash"} <= set(
      contents):
    raise _Unusable("it records no contents to verify against")
  if (contents["manifest_hash"] != manifest.hash
      or contents["config_sha256"] != _config_dict_hash(items["config"])):
    raise _Unusable("its manifest or config does not match the hashes recorded with it")
  return config, manifest, items["progress"], contents


def _listed(problems: list[str], limit: int = 6) -> str:
  """Indented lines, the first `limit` of them and a count of the rest."""
  shown = problems[:limit] + ([f"... and {len(problems) - limit} more"]
                              if len(problems) > limit else [])
  return "".join(f"\n    {line}" for line in shown)


# Checkpoints written before the env reported its audit signals as a typed struct hold them, in
# the "env" item, as float32 leaves of the env's metrics. Each maps to exactly one leaf of the
# current state, with the same shape and values (booleans stored as 0.0 and 1.0).
_PRE_SIGNALS_ENV_LEAVES = {
    "metrics_audit_trunk_height": "signals_trunk_height",
    "metrics_audit_trunk_tilt": "signals_trunk_tilt",
    "metrics_audit_contact": "signals_contact",
    "metrics_audit_last_contact": "signals_last_contact",
    "metrics_audit_foot_speed": "signals_foot_speed",
    "metrics_audit_air_time": "signals_air_time",
    "metrics_audit_body_contact": "signals_body_contact",
    "metrics_audit_early_end": "trace_early_end",
}


def _renamed_leaves(item: str, recorded: dict[str, Any], abstract: Any) -> dict[str, str]:
  """{saved name: current name} for an "env" item saved before the typed signals, else {}."""
  if item != "env" or not set(_PRE_SIGNALS_ENV_LEAVES) <= set(recorded):
    return {}
  expected = storable.stored_leaves(abstract)
  if not set(_PRE_SIGNALS_ENV_LEAVES.values()) <= set(expected):
    return {}
  return dict(_PRE_SIGNALS_ENV_LEAVES)


def _as_current(recorded: dict[str, Any], renamed: dict[str, str],
                abstract: Any) -> dict[str, Any]:
  """The recorded layout under the current names; a renamed float32 leaf of 0/1 values that is
  a bool now is recorded with the current dtype (its values are checked after reading)."""
  expected = storable.stored_leaves(abstract)
  current = {}
  for name, entry in recorded.items():
    new = renamed.get(name, name)
    if name in renamed and entry["dtype"] == "float32" and new in expected:
      entry = dict(entry, dtype=str(storable.stored_spec(expected[new]).dtype))
    current[new] = entry
  return current


def _read_renamed(stored: dict[str, Any], renamed: dict[str, str],
                  abstract: Any) -> dict[str, Any]:
  """Stored leaves under the current names and dtypes; a bool must have been stored as 0 or 1."""
  expected = storable.stored_leaves(abstract)
  current = {}
  for name, value in stored.items():
    new = renamed.get(name, name)
    value = np.asarray(value)
    dtype = storable.stored_spec(expected[new]).dtype
    if name in renamed and value.dtype != dtype:
      if dtype == np.bool_ and not np.isin(value, (0.0, 1.0)).all():
        raise _Unusable(f"{name}: saved values other than 0 and 1 cannot be read as {new}")
      value = value.astype(dtype)
    current[new] = value
  return current


def _verified_item(run_dir, step, item, abstract, contents) -> Any:
  """Restores one array item after checking its layout, and checks every leaf's checksum.

  An "env" item saved before the typed audit signals is read under its saved names, checked
  against its saved checksums, then renamed (`_PRE_SIGNALS_ENV_LEAVES`).
  """
  recorded = contents["items"].get(item)
  if recorded is None:
    raise _Unusable(f"it records no contents for {item}")
  renamed = _renamed_leaves(item, recorded, abstract)
  problems = _check_layout(item, _as_current(recorded, renamed, abstract), abstract)
  if problems:
    raise _Unusable(f"its arrays do not fit this config's state:{_listed(problems)}")
  targets = storable.restore_args(abstract).item
  by_current = {new: old for old, new in renamed.items()}
  targets = {by_current.get(name, name): (
      np.zeros(recorded[by_current[name]]["shape"], recorded[by_current[name]]["dtype"])
      if name in by_current else target) for name, target in targets.items()}
  stored = _restore_items(run_dir, step, {item: ocp.args.StandardRestore(targets)})[item]
  problems = _check_sums(item, recorded, stored)
  if problems:
    raise _Unusable(f"corrupted:{_listed(problems)}")
  return storable.from_storable(_read_renamed(stored, renamed, abstract), abstract)


def _verified(run_dir, step, abstract_carry, config, manifest) -> Restored:
  saved_config, saved_manifest, progress, contents = _read_json_items(run_dir, step)
  changes = config_lib.computation_changes(saved_config, config)
  if changes:
    raise _Unusable("written with another config:" + _listed(
        [f"{field}: {old!r} -> {new!r}" for field, old, new in changes], limit=len(changes)))
  if saved_manifest.hash != manifest.hash:
    raise _Unusable(f"its manifest (hash {saved_manifest.hash}) is not this run's (hash "
                    f"{manifest.hash}); the run cannot continue on other families")
  carry = _carry_with_env_item(
      abstract_carry.replace(
          train=_verified_item(run_dir, step, "train", abstract_carry.train, contents)),
      _verified_item(run_dir, step, "env", _env_item(abstract_carry), contents))
  return Restored(carry=carry, manifest=saved_manifest, config=saved_config, step=step,
                  progress=progress, path=directory(run_dir) / str(step))


def restore(run_dir: pathlib.Path | str, abstract_carry: trainer_lib.Carry,
            config: config_lib.TrainConfig, manifest: families.Manifest,
            step: int | None = None, log: Callable[[str], Any] = print) -> Restored:
  """Restores a verified checkpoint, falling back past failed ones unless `step` is given.

  Args:
    run_dir: the run folder.
    abstract_carry: `jax.eval_shape(trainer.init, key)` of the run's trainer.
    config: the run's config; a checkpoint whose config computes something else is refused.
    manifest: the run's manifest; a checkpoint of other families is refused.
    step: a specific update step; None for the newest intact checkpoint.
    log: where fallback notices go.

  Raises:
    CheckpointError: no checkpoint, the requested step is missing or fails verification, or
      every checkpoint does. The message names each step, path and what failed.
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
      restored = _verified(run_dir, candidate, abstract_carry, config, manifest)
    except _Unusable as error:
      failures.append(f"checkpoint step {candidate} at {path}: {error}")
      if step is None:
        older = "; trying an older one" if candidate != candidates[-1] else ""
        log(f"{failures[-1]}{older}")
      continue
    if failures:
      log(f"restored step {candidate} from {path}, the newest intact checkpoint")
    return restored
  if step is not None:
    raise CheckpointError(failures[0])
  raise CheckpointError(f"no intact checkpoint in {directory(run_dir)}; every one failed "
                        "verification:\n  " + "\n  ".join(failures))


def set_aside_newer(run_dir: pathlib.Path | str, step: int) -> list[pathlib.Path]:
  """Moves checkpoints newer than `step` (ones a restore fell back past) out of the manager's
  folder into `<run>/checkpoints_unreadable/`, so the resumed run can save those steps again.
  Nothing is deleted. Returns the new paths."""
  moved = []
  aside = run_folder.RunFolder(pathlib.Path(run_dir)).unreadable_checkpoints
  for newer in [s for s in steps(run_dir) if s > step]:
    target = aside / str(newer)
    aside.mkdir(exist_ok=True)
    if target.exists():
      target = target.with_name(f"{newer}-{len(list(aside.iterdir()))}")
    (directory(run_dir) / str(newer)).rename(target)
    moved.append(target)
  return moved


def restore_policy(run_dir: pathlib.Path | str, abstract_policy: dict[str, Any], step: int,
                   contents: dict[str, Any]) -> dict[str, Any]:
  """Restores and verifies only the `policy` item: {"actor": params, "normalizer": ...}.

  Args:
    run_dir: the run folder.
    abstract_policy: the abstract {"actor", "normalizer"} tree of the checkpoint's config.
    step: the update step.
    contents: the checkpoint's `contents` (from `read_json_items`).

  Raises:
    CheckpointError: naming the step, path and leaf that failed verification.
  """
  try:
    return _verified_item(run_dir, step, "policy", abstract_policy, contents)
  except _Unusable as error:
    raise CheckpointError(f"checkpoint step {step} at {directory(run_dir) / str(step)}: "
                          f"{error}") from None
