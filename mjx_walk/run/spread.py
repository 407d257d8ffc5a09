"""The statistics across training seeds: how much a run's held-out figures move when only the
training seed changes, and whether two runs differ by more than that.

A run of `config.num_seeds` = S > 1 trains S policies from S seeds in one program and evaluates
each on the same held-out panel. Its eval record keeps every seed's per-stratum table (`seeds`),
the mean over seeds (`strata`), and per stratum, for each of METRICS, a `summary` (`spread`):
  mean     the plain mean of the S per-seed values;
  iqm      the interquartile mean: the mean of the values left after dropping the lowest and the
           highest quarter (int(0.25 * S) from each end), as rliable reports it; it equals the
           mean for S <= 3 and is hardly moved by one seed that failed or got lucky;
  ci_low, ci_high  the 95% percentile-bootstrap interval of the mean: the S values are
           resampled with replacement 10,000 times and the interval holds the middle 95% of the
           resampled means.
`difference` compares two runs the same way: the interval of b's mean minus a's, each run's seeds
resampled on their own; when it contains 0 the runs are within each other's seed spread.

Every figure here is over seeds, one value per seed, never over envs. The panel is the same for
every seed (the same families, reset keys and commands), so an env-level interval would only
measure how hard the panel's episodes are, and would shrink to nothing with more envs however
much another training seed changes the policy. What decides whether a change to the recipe
helped is whether it beats the spread that the seed alone causes, and that needs several seeds:
with one, the interval is the single value.

This module imports only the standard library and NumPy (no JAX), like `mjx_walk.run.ledger`.
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import Sequence

import numpy as np

METRICS = ("success_rate", "fall_rate", "lin_vel_error", "yaw_rate_error")
"""The per-stratum figures whose spread over seeds is reported."""
MEANS = ("success_rate", "fall_rate", "episode_length", "lin_vel_error", "yaw_rate_error",
         "return", "body_contact_rate")
"""The per-stratum figures averaged over seeds in a record's `strata`."""
_ROUNDING = 1e-9
"""A difference of means within this fraction of the largest value compared is rounding: 0."""


def _per_seed(values: Any, what: str = "values") -> np.ndarray:
  """`values` as a 1-D float array; refuses an empty one and non-finite values, naming them."""
  array = np.asarray(values, dtype=float)
  if array.ndim != 1:
    raise ValueError(f"{what} must be one value per seed (1-D); got shape {array.shape}")
  if array.size == 0:
    raise ValueError(f"{what}: no seeds")
  bad = ~np.isfinite(array)
  if bad.any():
    named = ", ".join(f"seed {i}: {array[i]}" for i in np.flatnonzero(bad))
    raise ValueError(f"{what} must be finite; got {named} (leave a diverged seed out)")
  return array


def iqm(values: Sequence[float] | np.ndarray, axis: int | None = None) -> Any:
  """The interquartile mean: the mean after dropping int(0.25 * n) values from each end of the
  sorted values (scipy.stats.trim_mean(values, 0.25), which rliable uses).

  Args:
    values: one value per seed.
    axis: None (every value; returns a float), or the axis of seeds in an array of several
      samples (returns an array with that axis reduced), as `bootstrap_ci` calls it.
  """
  array = np.asarray(values, dtype=float)
  if axis is None:
    array, axis = array.ravel(), 0
  n = array.shape[axis]
  if n == 0:
    raise ValueError("iqm of no values")
  cut = int(0.25 * n)
  kept = np.take(np.sort(array, axis=axis), np.arange(cut, n - cut), axis=axis)
  result = kept.mean(axis=axis)
  return float(result) if result.ndim == 0 else result


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
  """The (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of bootstrap `samples`."""
  if not 0.0 < confidence < 1.0:
    raise ValueError(f"confidence must be in (0, 1); got {confidence}")
  low, high = np.quantile(samples, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
  return float(low), float(high)


def bootstrap_ci(values: Sequence[float] | np.ndarray,
                 statistic: Callable[..., Any] = np.mean, confidence: float = 0.95,
                 resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
  """The percentile-bootstrap interval of `statistic` over seeds.

  The n per-seed values are resampled with replacement `resamples` times (all at once, from
  `np.random.default_rng(seed)`, so the same arguments give the same interval), `statistic` is
  taken of each resample, and the interval runs from the (1 - confidence) / 2 to the
  (1 + confidence) / 2 quantile of those.

  Args:
    values: one finite value per seed.
    statistic: a reduction called as statistic(samples, axis=1) on the [resamples, n] array, as
      np.mean, np.median and `iqm` are.
    confidence: the interval's coverage, in (0, 1).
    resamples: how many resamples.
    seed: the resampling's random seed.

  Returns:
    (low, high); (v, v) for a single value v, and for n equal values.

  Raises:
    ValueError: no values, a non-finite one (named), or a confidence outside (0, 1).
  """
  array = _per_seed(values)
  if array.size == 1:
    _interval(array, confidence)  # the confidence is checked all the same
    return float(array[0]), float(array[0])
  rng = np.random.default_rng(seed)
  picks = rng.integers(0, array.size, size=(resamples, array.size))
  return _interval(np.asarray(statistic(array[picks], axis=1), dtype=float), confidence)


def summary(values: Sequence[float] | np.ndarray) -> dict[str, float]:
  """{"mean", "iqm", "ci_low", "ci_high"} of one value per seed; the interval is the 95%
  bootstrap interval of the mean (`bootstrap_ci` with its defaults).

  Raises:
    ValueError: no values, or a non-finite one (named: a diverged seed is left out by the caller).
  """
  array = _per_seed(values)
  low, high = bootstrap_ci(array)
  return {"mean": float(array.mean()), "iqm": iqm(array), "ci_low": low, "ci_high": high}


def _same_strata(per_seed: list[dict[str, Any]]) -> list[str]:
  """The strata names, in seed 0's order; refuses seeds whose names differ, naming the
  difference."""
  if not per_seed:
    raise ValueError("across_seeds needs at least one seed's strata; got an empty list")
  names = list(per_seed[0])
  for k, strata in enumerate(per_seed[1:], start=1):
    missing = [name for name in names if name not in strata]
    extra = [name for name in strata if name not in names]
    if missing or extra:
      raise ValueError(f"seed {k}'s strata differ from seed 0's: missing {missing or 'none'}, "
                       f"extra {extra or 'none'}")
  return names


def across_seeds(per_seed: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
  """A multi-seed eval record's `strata` and `spread`, from each seed's own `strata`.

  Args:
    per_seed: one single-seed `strata` dict per seed, in seed order: {stratum: {"num_envs",
      "success_rate", "fall_rate", "episode_length", "lin_vel_error", "yaw_rate_error",
      "return", "body_contact_rate", "reset": {reason: count}}}.

  Returns:
    (strata, spread). strata: per stratum, the mean over seeds of each of MEANS that every seed
    has (records written before `body_contact_rate` lack it), the num_envs of
    one seed, and the reset counts summed over seeds per reason. spread: per stratum, the
    `summary` of each of METRICS over seeds.

  Raises:
    ValueError: an empty list; seeds whose strata names differ, or whose num_envs in a stratum
      differ (named); a non-finite value of one of METRICS (named with its stratum).
  """
  names = _same_strata(per_seed)
  strata, spread = {}, {}
  for name in names:
    seeds = [seed_strata[name] for seed_strata in per_seed]
    counts = [s["num_envs"] for s in seeds]
    if len(set(counts)) != 1:
      raise ValueError(f"stratum {name!r}: the seeds' num_envs differ ({counts}); every seed is "
                       "evaluated on the same panel")
    reasons = list(dict.fromkeys(reason for s in seeds for reason in s["reset"]))
    strata[name] = {
        "num_envs": counts[0],
        **{key: float(np.mean(np.asarray([s[key] for s in seeds], dtype=float)))
           for key in MEANS if all(key in s for s in seeds)},
        "reset": {reason: sum(s["reset"].get(reason, 0) for s in seeds) for reason in reasons},
    }
    spread[name] = {}
    for key in METRICS:
      try:
        spread[name][key] = summary([s[key] for s in seeds])
      except (ValueError, TypeError) as error:
        raise ValueError(f"stratum {name!r}, {key}: {error}") from None
  return strata, spread


def difference(a_values: Sequence[float] | np.ndarray, b_values: Sequence[float] | np.ndarray,
               confidence: float = 0.95, resamples: int = 10_000,
               seed: int = 0) -> dict[str, Any]:
  """b's mean minus a's, for two independent groups of per-seed values, with its interval.

  Each group is resampled with replacement on its own (its own count of seeds), `resamples` times
  at once, and the interval is the percentile interval of the resampled b mean minus a mean.

  Args:
    a_values, b_values: one finite value per seed of runs a and b; the counts may differ.
    confidence, resamples, seed: as for `bootstrap_ci`.

  Returns:
    {"a_mean", "b_mean", "diff" (b_mean - a_mean), "ci_low", "ci_high", "within_spread" (True
    when the interval contains 0: the runs do not differ by more than their seeds do)}; a
    difference or bound within rounding (1e-9 of the largest value) of 0 is 0.

  Raises:
    ValueError: an empty group, a non-finite value (named), or a confidence outside (0, 1).
  """
  a, b = _per_seed(a_values, "run a's values"), _per_seed(b_values, "run b's values")
  rng = np.random.default_rng(seed)
  a_means = a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1)
  b_means = b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
  a_mean, b_mean = float(a.mean()), float(b.mean())
  # Means of equal values taken over different counts can differ in the last bits (three seeds
  # of 0.1 against two); a difference that small is rounding, and is read as exactly 0.
  rounding = _ROUNDING * max(np.abs(a).max(), np.abs(b).max())
  diff, low, high = (0.0 if abs(x) <= rounding else x
                     for x in (b_mean - a_mean, *_interval(b_means - a_means, confidence)))
  return {"a_mean": a_mean, "b_mean": b_mean, "diff": diff, "ci_low": low, "ci_high": high,
          "within_spread": bool(low <= 0.0 <= high)}
