"""The walking criteria on the held-out `flat` stratum, the terrain strata's targets, a training
run's figures against them read from its ledger, and the config of a run judged against the wall
clock.

What the wall-clock measurements share (`experiments/measurements/learn_benchmark.py`,
`experiments/measurements/scaling_sweep.py` and `experiments/gpu_check.py`): it defines no flags,
so every script can import it.
"""

from __future__ import annotations

import copy
import statistics

from mjx_walk import config as config_lib
from mjx_walk.run import ledger

WALKING = {"fall_rate": 0.05, "lin_vel_error": 0.25, "yaw_rate_error": 0.3}
"""The `flat` stratum's thresholds (each metric must be at or below its value)."""


TERRAIN_TARGETS = {"rough": {"fall_rate": 0.10, "lin_vel_error": 0.3},
                   "stairs": {"fall_rate": 0.25}}
"""The terrain strata's targets (at or below each value), met together with `flat` walking."""


def walks(flat: dict[str, float]) -> bool:
  return all(flat[key] <= limit for key, limit in WALKING.items())


def meets_terrain_targets(strata: dict[str, dict[str, float]]) -> bool:
  """`flat` walks and every terrain stratum meets `TERRAIN_TARGETS`."""
  return ("flat" in strata and walks(strata["flat"]) and all(
      stratum in strata and all(strata[stratum][k] <= v for k, v in limits.items())
      for stratum, limits in TERRAIN_TARGETS.items()))


def _terrain_figures(evals: list[dict], updates: list[dict]) -> dict:
  """On a heightfield run: when the terrain targets were first met, the terrain strata's curve
  (minutes, env steps, rough fall rate, rough xy error, stairs fall rate, obstacles fall rate,
  mean curriculum level of the update before), the last update's levels, and the last
  evaluation's stairs by riser height (None without those strata)."""
  meeting = [r for r in evals if meets_terrain_targets(r["strata"])]
  curve = []
  for r in evals:
    before = [u for u in updates if u["env_steps"] <= r["env_steps"]]
    level = before[-1].get("terrain/mean_level") if before else None
    strata = r["strata"]
    curve.append([round(r["wall_seconds"] / 60, 2), r["env_steps"],
                  round(strata["rough"]["fall_rate"], 4),
                  round(strata["rough"]["lin_vel_error"], 4),
                  round(strata["stairs"]["fall_rate"], 4),
                  round(strata["obstacles"]["fall_rate"], 4),
                  None if level is None else round(level, 3)])
  last = evals[-1]["strata"]
  return {
      "minutes_to_terrain_targets": (
          round(meeting[0]["wall_seconds"] / 60, 2) if meeting else None),
      "terrain_curve": curve,
      "final_levels": updates[-1].get("terrain/levels") if updates else None,
      # The last evaluation's stairs by riser height: [fall rate, success rate] per stratum.
      "stairs_by_riser": {
          name: [round(last[name]["fall_rate"], 4), round(last[name]["success_rate"], 4)]
          for name in config_lib.STAIR_STRATA if name in last} or None,
  }


def seed_minutes_to_walk(evals: list[dict]) -> list[float | None] | None:
  """With several training seeds, each seed's minutes to walk: the wall-clock minutes of the
  first evaluation whose `flat` stratum of that seed (`seeds[k]`) meets the walking criteria,
  or None for a seed that never did; None for a single-seed run."""
  if not evals or "seeds" not in evals[-1] or "flat" not in evals[-1]["strata"]:
    return None
  minutes = []
  for k in range(len(evals[-1]["seeds"])):
    walking = [r for r in evals if walks(r["seeds"][k]["flat"])]
    minutes.append(round(walking[0]["wall_seconds"] / 60, 2) if walking else None)
  return minutes


def summarize(records: list[dict]) -> dict:
  """The benchmark's JSON figures from a run's ledger records. With several training seeds
  `minutes_to_walk` is the seed mean's and `seed_minutes_to_walk` lists each seed's."""
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
      **({"seed_minutes_to_walk": seed_minutes_to_walk(evals)}
         if evals and "seeds" in evals[-1] else {}),
      **(_terrain_figures(evals, updates)
         if evals and all(s in evals[0]["strata"] for s in TERRAIN_TARGETS) else {}),
  }


def for_wall_clock(config: config_lib.TrainConfig) -> config_lib.TrainConfig:
  """A validated copy of `config` for a wall-clock budget: evaluations follow the clock
  (`eval_every_seconds`) instead of the chunk count, and the run is long enough never to end
  before the budget does."""
  config = copy.deepcopy(config)
  config.panel.every_chunks = 0
  config.total_env_steps = max(config.total_env_steps, 10**12)
  return config_lib.validate(config)
