"""How a second simulator's panel is judged against MJX's: per stratum, the gap (C MuJoCo minus
MJX) of each compared figure, the targets a gap must meet, and each targeted gap's 95% interval
over the stratum's episodes (`mjx_walk.deploy.sim2sim` runs the check and records all three)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.evaluation import panel
from mjx_walk.run import spread
from mjx_walk.sim import families

COMPARED = ("success_rate", "fall_rate", "episode_length", "lin_vel_error", "yaw_rate_error")
"""The per-stratum figures compared; the gap is C MuJoCo minus MJX."""
TARGETS = {"fall_rate": 0.05, "lin_vel_error": 0.05}
"""The largest gaps (absolute) at which a stratum's behaviour counts as carried over."""


def gaps(mjx_strata: dict[str, Any], c_strata: dict[str, Any],
         intervals: dict[str, dict[str, list[float]]] | None = None) -> dict[str, Any]:
  """Per stratum: C MuJoCo minus MJX for each of `COMPARED`, and whether `TARGETS` are met.

  With `intervals` (`gap_intervals`), each stratum also gets them (`interval`, the 95% interval
  of each targeted gap) and what they say of the targets (`interval_targets`):
    within     every interval lies inside its target: the gap is within the targets;
    beyond     some interval lies wholly outside its target: the gap is shown to exceed it;
    undecided  neither: the stratum's episodes are too few to tell, whatever `within_targets`
               (the gaps themselves against the targets) says.
  """
  result = {}
  for stratum, c in c_strata.items():
    m = mjx_strata[stratum]
    gap = {key: c[key] - m[key] for key in COMPARED}
    gap["within_targets"] = all(abs(gap[key]) <= limit for key, limit in TARGETS.items())
    if intervals is not None:
      gap["interval"] = intervals[stratum]
      gap["interval_targets"] = interval_verdict(intervals[stratum])
    result[stratum] = gap
  return result


def interval_verdict(interval: dict[str, list[float]]) -> str:
  """"within", "beyond" or "undecided" (`gaps`): the 95% intervals of a stratum's targeted gaps
  ({key of TARGETS: [low, high]}, [None, None] for none) against `TARGETS`."""
  known = {key: interval[key] for key in TARGETS if None not in interval[key]}
  if any(low > TARGETS[key] or high < -TARGETS[key] for key, (low, high) in known.items()):
    return "beyond"
  if len(known) == len(TARGETS) and all(
      -TARGETS[key] <= low and high <= TARGETS[key] for key, (low, high) in known.items()):
    return "within"
  return "undecided"


def gap_intervals(mjx_stats: panel.EpisodeStats, c_stats: panel.EpisodeStats,
                  manifest: families.Manifest, config: config_lib.TrainConfig
                  ) -> dict[str, dict[str, list[float]]]:
  """Per stratum, the 95% interval of each targeted gap (`TARGETS`), C MuJoCo minus MJX.

  Both simulators play the same envs from the same first states, so the gap is taken env by env
  (each env's figure in C MuJoCo minus its figure in MJX: a fall is 1, a survived episode 0)
  and the stratum's per-env gaps are resampled together (`spread.bootstrap_ci`, a paired
  percentile bootstrap of their mean: 10,000 resamples, seed 0). Here the unit is the episode,
  not the training seed: the question is how far the two simulators' figures for this one
  policy can be apart given how few episodes each stratum has.

  Args:
    mjx_stats, c_stats: each simulator's final statistics, leaves [N], env j in evaluation
      family j % E.
    manifest: gives each evaluation family's stratum.
    config: the panel's success thresholds.

  Returns:
    {stratum: {key of TARGETS: [low, high]}}; [None, None] where an episode's figure is not
    finite (a state that went non-finite).
  """
  mjx_figures, c_figures = (panel.episode_figures(jax.tree.map(np.asarray, stats), config)
                            for stats in (mjx_stats, c_stats))
  strata = panel.env_strata(manifest, len(mjx_figures["fall_rate"]))
  intervals = {}
  for stratum in dict.fromkeys(manifest.eval_strata):
    mine = strata == stratum  # [N]
    intervals[stratum] = {}
    for key in TARGETS:
      gap = c_figures[key][mine] - mjx_figures[key][mine]  # [episodes]
      intervals[stratum][key] = (list(spread.bootstrap_ci(gap)) if np.isfinite(gap).all()
                                 else [None, None])
  return intervals
