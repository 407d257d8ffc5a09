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
    update = first_update + k + 1
    record = {"kind": "update", "update": update, "env_steps": update * batch_size,
              "perf/sps": sps, "perf/wall_seconds": wall_seconds,
              "device/memory_bytes": device_memory}
    update_metrics = {key: value[k:k + 1] for key, value in metrics.items()}
    record.update(summarize(update_metrics))
    records.append(record)
  return records


def current_device_memory() -> int | None:
  """Bytes in use on this process's first device, or None where the backend reports no
  statistics (CPU)."""
  stats = jax.local_devices()[0].memory_stats()
  if not stats or "bytes_in_use" not in stats:
    return None
  return int(stats["bytes_in_use"])
