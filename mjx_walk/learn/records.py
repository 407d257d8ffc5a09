"""The one host reduction that turns a chunk's metrics into the ledger's update records.

The trainer's chunk returns stacked metrics (leaves [K, ...], K updates); after the chunk's one
host sync, `update_records` reduces each update on its own with `summarize` into a
`kind="update"` record, and the progress line pools the whole chunk with the same `summarize`.
Nothing else reduces metrics on the host. The run's first record, its recipe, is
`mjx_walk.run.provenance.recipe`.
"""

from __future__ import annotations

from typing import Any
from typing import Mapping

import jax
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import endings


def summarize(metrics: Mapping[str, np.ndarray]) -> dict[str, Any]:
  """Host-side reduction of K updates' stacked metrics (leaves [K, ...]) to one record.

  Episode statistics are pooled over every episode that ended in the chunk; the reset-reason
  shares are fractions of those episode ends, and so is `audit/early_end_share`. Swing times
  are pooled over the chunk's touchdowns (`contact/air_time_mean`; the 90th percentile is the
  mean over updates that had any); both are NaN without touchdowns. Keys with `/min_` take the
  minimum over the K updates and keys with `/max_` the maximum; everything else is the mean.
  The non-scalar audits are summed over the K updates, as JSON-ready values:
  `audit/resets_by_family` {"<family index>": {"<reason>": count}} with non-zero counts only,
  `audit/fall_height_counts` and `audit/fall_tilt_counts` int counts over the bins
  `audit.FALL_HEIGHT_BINS` and `audit.FALL_TILT_BINS`. The `trace/...` metrics are left out.
  On a heightfield, `terrain/levels` {"<type>": [envs at each level]} is the curriculum after
  the last update, and `terrain/promotions` / `terrain/demotions` count the episodes that moved
  their env's level.
  """
  record = {}
  count = float(np.sum(metrics["episode/count"]))
  for key, value in metrics.items():
    value = np.asarray(value)
    if (key.endswith("_sum") or key == "episode/count" or key.startswith(("reset/", "trace/"))
        or value.ndim > 1 or key == "contact/air_time_p90"):
      continue
    reduce = np.min if "/min_" in key else np.max if "/max_" in key else np.mean
    record[key] = float(reduce(value))
  if "contact/touchdowns" in metrics:
    touchdowns = np.asarray(metrics["contact/touchdowns"])  # [K]
    swings = float(np.sum(touchdowns))
    record["contact/air_time_mean"] = (
        float(np.sum(metrics["contact/air_time_sum"]) / swings) if swings else float("nan"))
    p90 = np.asarray(metrics["contact/air_time_p90"])[touchdowns > 0]
    record["contact/air_time_p90"] = float(np.mean(p90)) if p90.size else float("nan")
  if "audit/early_ends" in metrics:
    record["audit/early_end_share"] = (
        float(np.sum(metrics["audit/early_ends"]) / count) if count else float("nan"))
  record["episode/count"] = count
  for name in ("return", "length"):
    # The float32 sum divided in float32 (a Python float divisor stays weak), as always.
    total = np.sum(metrics[f"episode/{name}_sum"])
    record[f"episode/{name}"] = float(total / count) if count else float("nan")
  for key, value in metrics.items():
    if key.startswith("reset/"):
      record[key] = float(np.sum(value) / count) if count else 0.0
  if "audit/resets_by_family" in metrics:
    counts = np.sum(np.asarray(metrics["audit/resets_by_family"]), axis=0)  # [F, R]
    record["audit/resets_by_family"] = {
        str(f): {endings.REASON_NAMES[r]: int(round(counts[f, r]))
                 for r in np.flatnonzero(counts[f])}
        for f in np.flatnonzero(counts.sum(axis=1))}
  for key in ("audit/fall_height_counts", "audit/fall_tilt_counts"):
    if key in metrics:
      record[key] = [int(round(c)) for c in np.sum(np.asarray(metrics[key]), axis=0)]
  if "terrain/levels" in metrics:
    counts = np.asarray(metrics["terrain/levels"])[-1]  # [types, levels] after the last update
    record["terrain/levels"] = {
        config_lib.TERRAIN_TYPES[t]: [int(round(c)) for c in counts[t]]
        for t in np.flatnonzero(counts.sum(axis=1))}
    for key in ("terrain/promotions", "terrain/demotions"):
      record[key] = float(np.sum(metrics[key]))
  return record


def update_records(metrics: dict[str, np.ndarray], *, first_update: int, batch_size: int,
                   sps: float, wall_seconds: float, device_memory: int | None) -> list[dict]:
  """One `kind="update"` record per update of a chunk.

  Args:
    metrics: the chunk's metrics on the host, every leaf of shape [K] (K updates).
    first_update: updates done before this chunk.
    batch_size: env steps per update (num_envs * unroll_length).
    sps: env steps per second of wall-clock over the chunk.
    wall_seconds: wall-clock seconds since the run started, at the end of the chunk.
    device_memory: bytes in use on this process's first device (`current_device_memory`), or
      None.

  Returns:
    K records, each update reduced on its own by `summarize`. The `trace/...` metrics are not
    recorded here (`evaluation.traces.write_early_ends` writes them to files).
  """
  num_updates = len(next(iter(metrics.values())))
  records = []
  for k in range(num_updates):
    record = _header(first_update + k + 1, batch_size, sps, wall_seconds, device_memory)
    update_metrics = {key: value[k:k + 1] for key, value in metrics.items()}
    record.update(summarize(update_metrics))
    records.append(record)
  return records


def _header(update: int, batch_size: int, sps: float, wall_seconds: float,
            device_memory: int | None) -> dict[str, Any]:
  """An update record's first fields: where in the run, and the chunk's speed."""
  return {"kind": "update", "update": update, "env_steps": update * batch_size,
          "perf/sps": sps, "perf/wall_seconds": wall_seconds,
          "device/memory_bytes": device_memory}


PER_SEED = ("episode/return", "episode/length", "reward/total", "loss/approx_kl",
            "loss/explained_variance", "ppo/learning_rate", "policy/std_mean",
            "terrain/mean_level")
"""The figures a multi-seed update record also lists seed by seed (`seeds`), beside every
reset-reason share."""


def seed_metrics(metrics: Mapping[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
  """One seed's metrics of a multi-seed chunk (leaves [K, S, ...] -> [K, ...])."""
  return {key: np.asarray(value)[:, seed] for key, value in metrics.items()}


def summarize_seeds(metrics: Mapping[str, np.ndarray], seeds: list[int]) -> dict[str, Any]:
  """`summarize` of a multi-seed chunk (leaves [K, S, ...]) over the given seeds: episodes,
  resets and audits are pooled over those seeds' envs as over a chunk's updates, and on a
  heightfield `terrain/levels` counts every one of those seeds' envs after the last update."""
  chosen = {key: np.asarray(value)[:, seeds] for key, value in metrics.items()}
  pooled = {key: value.reshape((-1,) + value.shape[2:]) for key, value in chosen.items()}
  record = summarize(pooled)
  if "terrain/levels" in chosen:
    counts = chosen["terrain/levels"][-1].sum(axis=0)  # [types, levels] over the seeds
    record["terrain/levels"] = {
        config_lib.TERRAIN_TYPES[t]: [int(round(c)) for c in counts[t]]
        for t in np.flatnonzero(counts.sum(axis=1))}
  return record


def seed_update_records(metrics: dict[str, np.ndarray], active: np.ndarray, *,
                        first_update: int, batch_size: int, sps: float, wall_seconds: float,
                        device_memory: int | None) -> list[dict]:
  """One `kind="update"` record per update of a multi-seed chunk.

  Each is `update_records`' record pooled over the seeds still training at that update
  (`summarize_seeds`), with `seeds`: {figure: [one value per seed]} for `PER_SEED` and the
  reset-reason shares, each seed's own update reduced by `summarize` (a halted seed's values
  are null), and `halted_seeds`. `perf/sps` counts the env steps of every seed.

  Args:
    metrics: the chunk's metrics on the host, leaves [K, S, ...].
    active: bool [K, S], the seeds whose update k counted (not halted before or at it).
    first_update, batch_size, sps, wall_seconds, device_memory: as `update_records`; batch_size
      is one seed's.
  """
  records = []
  for k, alive in enumerate(np.asarray(active, bool)):
    record = _header(first_update + k + 1, batch_size, sps, wall_seconds, device_memory)
    update = {key: value[k:k + 1] for key, value in metrics.items()}
    seeds = np.flatnonzero(alive).tolist()
    per_seed = [summarize(seed_metrics(update, s)) if alive[s] else None
                for s in range(len(alive))]
    if seeds:
      record.update(summarize_seeds(update, seeds))
      record["seeds"] = {key: [None if one is None else one[key] for one in per_seed]
                         for key in per_seed[seeds[0]]
                         if key in PER_SEED or key.startswith("reset/")}
    record["halted_seeds"] = np.flatnonzero(~alive).tolist()
    records.append(record)
  return records


def current_device_memory() -> int | None:
  """Bytes in use on this process's first device, or None where the backend reports no
  statistics (CPU)."""
  stats = jax.local_devices()[0].memory_stats()
  if not stats or "bytes_in_use" not in stats:
    return None
  return int(stats["bytes_in_use"])


def format_progress(env_steps: int, total: int, sps: float, record: dict[str, float]) -> str:
  """One progress line: steps, speed, episode return and length, and why episodes ended."""
  reasons = " ".join(
      f"{key.split('/')[1]}={record[key]:.0%}" for key in sorted(record)
      if key.startswith("reset/"))
  # Before the first episode ends there is no return to show yet.
  ret = f"{record['episode/return']:8.2f}" if record["episode/count"] else f"{'-':>8}"
  length = f"{record['episode/length']:6.1f}" if record["episode/count"] else f"{'-':>6}"
  return (
      f"steps {env_steps:>11,}/{total:,}  sps {sps:>7,.0f}  "
      f"return {ret}  len {length}  "
      f"reward/step {record['reward/total']:+.4f}  ends {int(record['episode/count']):>5}  "
      f"[{reasons}]"
  )
