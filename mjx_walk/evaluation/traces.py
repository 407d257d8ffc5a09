"""Trace files of a run and their replay: early-end traces from training, one traced episode per
stratum from each held-out evaluation.

  traces/<update>_<i>.npz       an episode that terminated within `audit.early_end_steps` control
                                steps (`write_early_ends`), picked inside the jitted chunk by
                                `mjx_walk.learn.audit.step_early_ends`; `replay_trace` re-simulates
                                one in MJX from its first state and recorded actions;
  eval/<update>_traces.npz      one held-out episode per stratum (`save_eval_traces`), for the
                                videos (`mjx_walk.analysis.videos`).

Files are written to a temporary name and renamed into place, or written under a name no other
file has, so a kill never leaves a torn file under a final name.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import re
from typing import Any
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk.evaluation import panel
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families


def write_early_ends(run_dir: pathlib.Path | str, metrics_chunk: Mapping[str, np.ndarray],
                 first_update: int, max_traces: int) -> list[pathlib.Path]:
  """Writes a chunk's early-end traces to `<run_dir>/traces/<update>_<i>.npz`.

  Each file holds `qpos` [length + 1, nq], `qvel` [length + 1, nv], `action` [length, A],
  `family`, `env`, `reason` (a `ResetReason` code), `reason_name`, `length`, `first_step` and
  `update`. Files are written until the folder holds `max_traces` of them; a file of the same
  name (an update redone after a resume) is overwritten.

  Args:
    run_dir: the run folder.
    metrics_chunk: the chunk's metrics on the host; the `trace/...` leaves [K, S, ...].
    first_update: updates done before this chunk (update k of the chunk is first_update + k + 1).
    max_traces: the most trace files the folder may hold.

  Returns:
    The paths written, in order.
  """
  if "trace/valid" not in metrics_chunk:
    return []
  folder = run_folder.RunFolder(pathlib.Path(run_dir)).traces_dir
  existing = len(list(folder.glob("*.npz"))) if folder.is_dir() else 0
  valid = np.asarray(metrics_chunk["trace/valid"])  # [K, S]
  written = []
  for k, i in zip(*np.nonzero(valid)):
    update = first_update + int(k) + 1
    path = folder / f"{update}_{i}.npz"
    if not path.exists():
      if existing >= max_traces:
        break
      existing += 1
    get = lambda name: np.asarray(metrics_chunk[f"trace/{name}"][k, i])
    length = int(get("length"))
    folder.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
      np.savez(file, qpos=get("qpos")[:length + 1], qvel=get("qvel")[:length + 1],
               action=get("action")[:length], family=get("family"), env=get("env"),
               reason=get("reason"),
               reason_name=np.str_(endings.ResetReason(int(get("reason"))).label),
               length=np.int32(length), first_step=get("first_step"), update=np.int32(update))
    written.append(path)
  return written


def load_early_end(path: pathlib.Path | str) -> dict[str, np.ndarray]:
  """One trace file written by `write_early_ends`, as a dict of arrays."""
  with np.load(path) as data:
    return {name: data[name] for name in data.files}


@functools.lru_cache(maxsize=4)
def _replayer(env: env_lib.LocomotionEnv):
  """Jitted replay of a fixed number of steps (the actions' length, `audit.early_end_steps` in
  `replay_trace`) from a recorded first state (one compile per env)."""

  def replay(family: families.FamilyParams, qpos: jax.Array, qvel: jax.Array,
             first_step: jax.Array, actions: jax.Array) -> jax.Array:
    state = env.reset(jax.random.key(0), family)
    # The reset's own draw (joint noise, velocity noise) is replaced by the recorded state; the
    # physics reads nothing else of the reset data (mjx.step recomputes every derived field).
    state = state.replace(data=state.data.replace(qpos=qpos, qvel=qvel),
                          task=state.task.replace(step=first_step))

    def body(state, action):
      state, final = env.step_with_final(state, action)
      # The state the step ended in, before any auto-reset, as the trainer traced it.
      return state, final.data.qpos

    _, stepped = jax.lax.scan(body, state, actions)  # [L, nq]
    return jnp.concatenate([qpos[None], stepped])  # [L + 1, nq]

  return jax.jit(replay)


def replay_trace(env: env_lib.LocomotionEnv, family_params: families.FamilyParams,
                 trace: Mapping[str, Any]) -> np.ndarray:
  """Re-simulates a recorded early end in MJX: the recorded actions from its first state.

  Args:
    env: an env built from the run's config.
    family_params: the trace's family draw, one family without a leading axis (e.g. row
      `trace["family"]` of `manifest.train_params()`).
    trace: a dict as written by `write_early_ends` (`load_early_end`): qpos, qvel, action,
      length and first_step.

  Returns:
    float32 [length + 1, nq]: the replayed qpos, row 0 the recorded first state; compare with
    `trace["qpos"]`.
  """
  length = int(trace["length"])
  steps = int(env.config.audit.early_end_steps)
  if not 0 < length <= steps:
    raise ValueError(f"trace length {length} is outside 1 .. audit.early_end_steps={steps}")
  actions = np.zeros((steps, env.action_size), np.float32)
  actions[:length] = np.asarray(trace["action"])[:length]
  qpos = _replayer(env)(family_params, jnp.asarray(trace["qpos"][0], jnp.float32),
                        jnp.asarray(trace["qvel"][0], jnp.float32),
                        jnp.asarray(int(trace.get("first_step", 0)), jnp.int32),
                        jnp.asarray(actions))
  return np.asarray(qpos)[:length + 1]


@dataclasses.dataclass(frozen=True)
class SavedEvalTraces:
  """`eval/<update>_traces.npz` read back: one traced episode per stratum, and what it was."""

  update: int
  strata: tuple[str, ...]
  """Stratum of each row, in panel order."""
  family_seeds: tuple[int, ...]
  """Seed of each row's evaluation family (look it up in manifest.json)."""
  reason_names: tuple[str, ...]
  """How each row's episode ended: its `ResetReason` in lowercase ("fall", "timeout")."""
  panel_hash: str
  traces: panel.EpisodeTraces
  """NumPy leaves, [S, ...]."""


def save_eval_traces(run_dir: pathlib.Path | str, update: int, traces: panel.EpisodeTraces,
                     manifest: families.Manifest) -> pathlib.Path:
  """Writes the traced episodes of one evaluation to `eval/<update>_traces.npz`.

  The file is self-describing: besides every `EpisodeTraces` field (gravity included, which sets
  the camera and the ground on a slope) it holds each row's stratum and family seed, the end
  reason's name and the panel hash. It is written to a temporary name and renamed into place, so
  a kill never leaves a torn file under the final name.

  Args:
    run_dir: the run folder.
    update: the update the evaluated policy comes from.
    traces: from `Evaluator.run_with_traces` (NumPy or device arrays).
    manifest: the run's manifest: names each traced family.

  Returns:
    The path written.
  """
  fields = {f.name: np.asarray(getattr(traces, f.name))
            for f in dataclasses.fields(panel.EpisodeTraces)}
  evaluated = [manifest.eval_families[int(i)] for i in fields["family_index"]]
  path = run_folder.RunFolder(pathlib.Path(run_dir)).eval_traces_path(update)
  path.parent.mkdir(parents=True, exist_ok=True)
  temporary = path.with_name(f".{path.name}.tmp")
  with temporary.open("wb") as file:
    np.savez_compressed(
        file, update=np.int64(update), strata=np.array([f.stratum for f in evaluated]),
        family_seeds=np.array([f.seed for f in evaluated], np.int64),
        reason_names=np.array([endings.ResetReason(int(r)).label
                               for r in fields["reason"]]),
        panel_hash=np.array(manifest.panel_hash), **fields)
  os.replace(temporary, path)
  return path


def load_eval_traces(path: pathlib.Path | str) -> SavedEvalTraces:
  """Reads a file written by `save_eval_traces`.

  Raises:
    FileNotFoundError: naming the path.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"no evaluation traces at {path}")
  with np.load(path) as values:
    traces = panel.EpisodeTraces(**{f.name: values[f.name]
                                    for f in dataclasses.fields(panel.EpisodeTraces)})
    return SavedEvalTraces(update=int(values["update"]),
                           strata=tuple(str(s) for s in values["strata"]),
                           family_seeds=tuple(int(s) for s in values["family_seeds"]),
                           reason_names=tuple(str(r) for r in values["reason_names"]),
                           panel_hash=str(values["panel_hash"]), traces=traces)


def eval_trace_updates(run_dir: pathlib.Path | str) -> list[int]:
  """Updates with saved evaluation traces in the run folder, oldest first."""
  folder = run_folder.RunFolder(pathlib.Path(run_dir)).eval_dir
  found = (re.fullmatch(rf"(\d+){re.escape(run_folder.TRACES_SUFFIX)}", p.name)
           for p in folder.glob(f"*{run_folder.TRACES_SUFFIX}"))
  return sorted(int(m.group(1)) for m in found if m)
