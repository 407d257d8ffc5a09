"""The walking criteria on the held-out `flat` stratum, and a training run's figures against them
read from its ledger.

Imported by `learn_benchmark.py` and `gpu_check.py` (a script's own folder, experiments/, is on
`sys.path` when it runs). It defines no flags, so both can import it.
"""

from __future__ import annotations

import statistics

from mjx_walk.run import ledger

WALKING = {"fall_rate": 0.05, "lin_vel_error": 0.25, "yaw_rate_error": 0.3}
"""The `flat` stratum's thresholds (each metric must be at or below its value)."""


def walks(flat: dict[str, float]) -> bool:
  return all(flat[key] <= limit for key, limit in WALKING.items())


def summarize(records: list[dict]) -> dict:
  """The benchmark's JSON figures from a run's ledger records."""
  evals = ledger.of_kind(records, "eval")
  updates = ledger.of_kind(records, "update")
  first_chunk_sps = updates[0]["perf/sps"] if updates else None
  steady = [r["perf/sps"] for r in updates if r["perf/sps"] != first_chunk_sps]
  walking = [r for r in evals if "flat" in r["strata"] and walks(r["strata"]["flat"])]
  return {
      "minutes_to_walk": round(walking[0]["wall_seconds"] / 60, 2) if walking else None,
      "final": evals[-1]["strata"] if evals else None,
      "curve": [
          [round(r["wall_seconds"] / 60, 2), r["env_steps"]]
          + [round(r["strata"]["flat"][k], 4) for k in WALKING]
          for r in evals if "flat" in r["strata"]],
      "env_steps": updates[-1]["env_steps"] if updates else 0,
      "train_sps": round(statistics.median(steady)) if steady else None,
  }
