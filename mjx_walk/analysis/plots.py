"""The plots of a run, drawn from its ledger with matplotlib's Agg canvas (no display).

  plots/learning_curve.png    training return and held-out success, falls and tracking per
                              stratum, over env steps and over wall-clock
  plots/latest_eval.png       success and fall rate per stratum, latest held-out evaluation
  plots/reward_terms.png      each scaled reward term per control step, stacked
  plots/reset_reasons.png     the share of episode ends per reset reason
  plots/contact_events.png    the contact audit's event counts, air times and shares
  plots/fall_histograms.png   trunk height and tilt at each fall, against the env's thresholds
  plots/curriculum.png        heightfield runs only: each terrain type's mean curriculum level
                              over env steps, and the envs at each level after the last update

`make_plots` writes them all; each `plot_*` returns a `Plot`, which is skipped (no file, and a note
saying why) when the ledger holds nothing to draw. The curriculum plot is made only for a ledger
with terrain records (`terrain/levels`), so a run on the plane has the six others.

A run of several training seeds (`config.num_seeds` > 1) draws its spread as well: one thin line
per seed (each a `Line2D` with gid "seed <k>") of the figures its update records list seed by
seed (`seeds`: the training return, the reward per step, each reset reason's share) and of the
held-out figures of its eval records (`seeds`), and around each stratum's mean over seeds the
band of the 95% bootstrap interval over seeds (`spread`, `mjx_walk.run.spread`). A single-seed
ledger lists no seeds, and its figures have no such lines or bands.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any
from typing import Sequence

from matplotlib.figure import Figure
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.learn import audit
from mjx_walk.run import ledger
from mjx_walk.run import run_folder


@dataclasses.dataclass(frozen=True)
class Plot:
  """One figure of the report: written to `path`, or skipped for the reason in `note`."""

  name: str
  title: str
  path: pathlib.Path | None
  note: str | None = None
  caption: str | None = None
  """One sentence on what the figure shows, printed under it in the report; None for none."""
  figure: Figure | None = dataclasses.field(default=None, repr=False, compare=False)
  """The matplotlib figure written to `path` (None when skipped), for a caller that inspects
  what was drawn."""


SEED_GID = "seed {}"
"""The gid of seed k's thin line in a multi-seed figure ("seed 0", "seed 1", ...)."""
BAND_GID = "interval {}"
"""The gid of a stratum's 95%-interval band over seeds on a learning-curve axis."""
SEED_LINE = {"lw": 0.8, "alpha": 0.55}
"""How one seed's line is drawn: thin and faint beside the pooled or mean line."""


def _values(records: Sequence[dict[str, Any]], key: str) -> np.ndarray:
  """float [len(records)]; a missing or null figure is NaN."""
  return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records])


def _scalar_keys(records: Sequence[dict[str, Any]], prefix: str) -> list[str]:
  """Sorted keys starting with `prefix` that hold a number in some record."""
  return sorted({k for r in records for k, v in r.items()
                 if k.startswith(prefix) and isinstance(v, (int, float)) and
                 not isinstance(v, bool)})


def _line(ax: Any, x: np.ndarray, y: np.ndarray, **style: Any) -> None:
  """Plots the points where both x and y are defined, joined (an undefined figure, such as the
  return of an update in which no episode ended, is skipped rather than breaking the line)."""
  defined = np.isfinite(x) & np.isfinite(y)
  ax.plot(x[defined], y[defined], **style)


def _save(figure: Figure, path: pathlib.Path) -> pathlib.Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  figure.savefig(path, dpi=100)
  return path


def _per_stratum(evals: Sequence[dict[str, Any]], metric: str) -> dict[str, np.ndarray]:
  strata = list(dict.fromkeys(s for r in evals for s in r["strata"]))
  return {s: np.array([np.nan if r["strata"].get(s, {}).get(metric) is None
                       else r["strata"][s][metric] for r in evals]) for s in strata}


def seed_count(records: Sequence[dict[str, Any]]) -> int:
  """How many training seeds the update and eval records list (`seeds`); 1 for a single-seed
  ledger."""
  counts = [len(v) for r in records if isinstance(r.get("seeds"), dict)
            for v in r["seeds"].values() if isinstance(v, list)]
  counts += [len(r["seeds"]) for r in records if isinstance(r.get("seeds"), list)]
  return max(counts, default=1)


def seed_values(records: Sequence[dict[str, Any]], key: str, num_seeds: int) -> np.ndarray:
  """float [num_seeds, len(records)]: each seed's `key` from the update records' `seeds` lists;
  NaN where a record lists none or the seed had halted (null)."""
  out = np.full((num_seeds, len(records)), np.nan)
  for i, record in enumerate(records):
    values = (record.get("seeds") or {}).get(key)
    for k, value in enumerate(values if isinstance(values, list) else []):
      if k < num_seeds and value is not None:
        out[k, i] = float(value)
  return out


def seed_strata(evals: Sequence[dict[str, Any]], metric: str, num_seeds: int
                ) -> dict[str, np.ndarray]:
  """Per stratum, float [num_seeds, len(evals)]: each seed's `metric` from the eval records'
  `seeds` (NaN where a record has no such seed or value)."""
  strata = list(dict.fromkeys(s for r in evals for s in r["strata"]))
  out = {s: np.full((num_seeds, len(evals)), np.nan) for s in strata}
  for i, record in enumerate(evals):
    for k, seed in enumerate(record.get("seeds") or []):
      for stratum, values in seed.items():
        if k < num_seeds and stratum in out and values.get(metric) is not None:
          out[stratum][k, i] = float(values[metric])
  return out


def seed_intervals(evals: Sequence[dict[str, Any]], metric: str
                   ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """Per stratum with a `spread` of `metric`, (ci_low, ci_high), each float [len(evals)]: the
  95% bootstrap interval over seeds of each evaluation (NaN where a record has none)."""
  out = {}
  for i, record in enumerate(evals):
    for stratum, figures in (record.get("spread") or {}).items():
      summary = figures.get(metric) or {}
      if summary.get("ci_low") is None or summary.get("ci_high") is None:
        continue
      low, high = out.setdefault(stratum, (np.full(len(evals), np.nan),
                                           np.full(len(evals), np.nan)))
      low[i], high[i] = summary["ci_low"], summary["ci_high"]
  return out


def _seed_lines(ax: Any, x: np.ndarray, per_seed: np.ndarray, color: str,
                label: str | None = None) -> None:
  """One thin line per seed (row of `per_seed`), gid "seed <k>"; the first one carries
  `label`."""
  for k, y in enumerate(per_seed):
    _line(ax, x, y, color=color, gid=SEED_GID.format(k), label=label if k == 0 else None,
          **SEED_LINE)


def _band(ax: Any, x: np.ndarray, low: np.ndarray, high: np.ndarray, color: str,
          stratum: str) -> None:
  """The interval low..high shaded over the points where it is defined; a single such point (one
  evaluation, which a band cannot show) gets a vertical bar instead."""
  defined = np.isfinite(x) & np.isfinite(low) & np.isfinite(high)
  if not defined.any():
    return
  ax.fill_between(x[defined], low[defined], high[defined], color=color, alpha=0.15, lw=0,
                  gid=BAND_GID.format(stratum))
  if defined.sum() == 1:
    ax.vlines(x[defined], low[defined], high[defined], color=color, lw=1.5, alpha=0.6)


def plot_learning_curve(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Training return and held-out success, falls and tracking per stratum, over env steps (left)
  and over wall-clock (right).

  With several training seeds the thick lines are the seeds pooled (training) and the mean over
  seeds (held-out); each seed adds a thin line of its own, and each stratum's mean the band of
  the 95% bootstrap interval over seeds of the figures that have one (success, falls, xy error).
  """
  title = "Learning curve"
  updates = ledger.of_kind(records, "update")
  evals = ledger.of_kind(records, "eval")
  if not updates:
    return Plot("learning_curve", title, None, "no update records yet")
  num_seeds = seed_count(updates + evals)
  rows = [("episode/return", "return", "return"), (None, "success_rate", "held-out success"),
          (None, "fall_rate", "held-out fall rate"),
          (None, "lin_vel_error", "held-out lin vel error (m/s)")]
  figure = Figure(figsize=(11, 11), layout="constrained")
  axes = figure.subplots(len(rows), 2, sharex="col")
  axes_x = [("env_steps", "env_steps", "env steps"),
            ("perf/wall_seconds", "wall_seconds", "wall-clock (s)")]
  for col, (update_x, eval_x, label) in enumerate(axes_x):
    x_updates = _values(updates, update_x)
    x_evals = _values(evals, eval_x)
    for row, (update_key, metric, name) in enumerate(rows):
      ax = axes[row, col]
      if num_seeds > 1:
        _seed_curves(ax, x_updates, updates, update_key, x_evals, evals, metric, num_seeds)
      else:
        if update_key:
          _line(ax, x_updates, _values(updates, update_key), color="black", lw=1.2,
                label="training episodes")
        for stratum, y in _per_stratum(evals, metric).items():
          _line(ax, x_evals, y, marker="o", ms=3, lw=1, label=f"held-out {stratum}")
      ax.set_ylabel(name)
      ax.grid(alpha=0.3)
      if metric in ("success_rate", "fall_rate"):
        ax.set_ylim(-0.05, 1.05)
    axes[-1, col].set_xlabel(label)
  handles, labels = axes[0, 0].get_legend_handles_labels()
  if handles:
    figure.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6),
                  fontsize="small")
  note = None if evals else "no held-out evaluation yet; training return only"
  caption = None if num_seeds == 1 else (
      f"{num_seeds} training seeds: the thick lines are the seeds pooled (training) and the mean "
      "over seeds (held-out), each thin line one seed, and the shaded band (a bar for a single "
      "evaluation) the 95% bootstrap interval of the mean over seeds.")
  return Plot("learning_curve", title, _save(figure, path), note, caption, figure)


def _seed_curves(ax: Any, x_updates: np.ndarray, updates: Sequence[dict[str, Any]],
                 update_key: str | None, x_evals: np.ndarray, evals: Sequence[dict[str, Any]],
                 metric: str, num_seeds: int) -> None:
  """One learning-curve axis of a multi-seed run: the pooled training line and a thin one per
  seed, then per stratum the mean over seeds, a thin line per seed and the 95% interval."""
  if update_key:
    _line(ax, x_updates, _values(updates, update_key), color="black", lw=1.2,
          label="training episodes (seeds pooled)")
    _seed_lines(ax, x_updates, seed_values(updates, update_key, num_seeds), "black",
                "training, each seed")
  intervals = seed_intervals(evals, metric)
  per_seed = seed_strata(evals, metric, num_seeds)
  for i, (stratum, y) in enumerate(_per_stratum(evals, metric).items()):
    color = f"C{i % 10}"
    if stratum in intervals:
      _band(ax, x_evals, *intervals[stratum], color, stratum)
    _seed_lines(ax, x_evals, per_seed[stratum], color)
    _line(ax, x_evals, y, color=color, marker="o", ms=3, lw=1.2,
          label=f"held-out {stratum}")


def plot_reward_terms(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Each scaled reward term per control step, stacked: gains above zero, penalties below. The
  terms and the total are the seeds pooled; with several seeds each one's total is a thin line."""
  title = "Reward terms"
  updates = ledger.of_kind(records, "update")
  terms = [k for k in _scalar_keys(updates, "reward/") if k != "reward/total"]
  if not terms:
    return Plot("reward_terms", title, None, "no reward/<term> figures in the ledger")
  x = _values(updates, "env_steps")
  values = np.nan_to_num(np.stack([_values(updates, k) for k in terms]))  # [terms, U]
  colors = [f"C{i % 10}" for i in range(len(terms))]
  labels = [k.split("/", 1)[1] for k in terms]
  figure = Figure(figsize=(10, 5.5), layout="constrained")
  ax = figure.subplots()
  ax.stackplot(x, np.maximum(values, 0.0), colors=colors, labels=labels, alpha=0.85)
  ax.stackplot(x, np.minimum(values, 0.0), colors=colors, alpha=0.85)
  if "reward/total" in _scalar_keys(updates, "reward/"):
    num_seeds = seed_count(updates)
    ax.plot(x, _values(updates, "reward/total"), color="black", lw=1.5,
            label="total" if num_seeds == 1 else "total (seeds pooled)")
    if num_seeds > 1:
      _seed_lines(ax, x, seed_values(updates, "reward/total", num_seeds), "black",
                  "total, each seed")
  ax.axhline(0.0, color="grey", lw=0.8)
  ax.set_xlabel("env steps")
  ax.set_ylabel("reward per control step (scaled)")
  ax.grid(alpha=0.3)
  ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
  return Plot("reward_terms", title, _save(figure, path), figure=figure)


def plot_reset_reasons(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """The share of episode ends per reset reason, over the updates in which some episode ended.

  With several training seeds the stack is the seeds pooled, and a second axis has one thin line
  per seed for each reason that ended some seed's episodes, over the updates in which that seed's
  episodes ended."""
  title = "Reset reasons"
  updates = ledger.of_kind(records, "update")
  keys = _scalar_keys(updates, "reset/")
  if not keys:
    return Plot("reset_reasons", title, None, "no reset/<reason> figures in the ledger yet "
                "(no episode has ended)")
  shares = np.stack([_values(updates, k) for k in keys])  # [reasons, U]
  # Updates in which some episode ended (otherwise every share is null, or 0).
  ended = np.isfinite(shares).all(axis=0) & (np.nansum(shares, axis=0) > 0)
  if not ended.any():
    return Plot("reset_reasons", title, None, "no episode has ended yet")
  x = _values(updates, "env_steps")[ended]
  num_seeds = seed_count(updates)
  if num_seeds > 1:
    figure = Figure(figsize=(10, 8), layout="constrained")
    ax, per_seed_ax = figure.subplots(2, 1, sharex=True)
  else:
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    ax = figure.subplots()
  ax.stackplot(x, shares[:, ended], labels=[k.split("/", 1)[1] for k in keys], alpha=0.85)
  ax.set_ylim(0.0, 1.0)
  if num_seeds == 1:
    ax.set_xlabel("env steps")
  ax.set_ylabel("share of episode ends" if num_seeds == 1 else
                "share of episode ends\n(seeds pooled)")
  ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
  if num_seeds > 1:
    _seed_reset_lines(per_seed_ax, updates, keys, num_seeds)
  return Plot("reset_reasons", title, _save(figure, path), figure=figure)


def _seed_reset_lines(ax: Any, updates: Sequence[dict[str, Any]], keys: Sequence[str],
                      num_seeds: int) -> None:
  """Each reset reason's share of each seed's episode ends (a thin line per seed, in the
  reason's color of the stack), for the reasons that ended some seed's episodes."""
  x = _values(updates, "env_steps")
  shares = np.stack([seed_values(updates, k, num_seeds) for k in keys])  # [reasons, S, U]
  # Per seed, the updates in which some of its episodes ended (all its shares 0 otherwise).
  ended = np.isfinite(shares).all(axis=0) & (np.nansum(shares, axis=0) > 0)  # [S, U]
  for i, key in enumerate(keys):
    seen = np.where(ended, shares[i], np.nan)
    if np.nansum(seen) > 0:
      _seed_lines(ax, x, seen, f"C{i % 10}", key.split("/", 1)[1])
  ax.set_ylim(-0.02, 1.02)
  ax.set_xlabel("env steps")
  ax.set_ylabel("share of episode ends\n(one line per seed)")
  ax.grid(alpha=0.3)
  if ax.get_legend_handles_labels()[0]:
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")


def plot_contact_events(records: Sequence[dict[str, Any]], path: pathlib.Path,
                        min_count: int | None = None) -> Plot:
  """Every `contact/` figure of the ledger per update, on up to three axes: event counts per
  batch (log scale, with the audit's `min_count` threshold; zero is drawn at 0.5), air-time
  statistics (s), and shares (`.../share...`, e.g. each foot's share of steps on the ground)."""
  title = "Contact events"
  updates = ledger.of_kind(records, "update")
  keys = _scalar_keys(updates, "contact/")
  if not keys:
    return Plot("contact_events", title, None,
                "no contact/ figures in the ledger (this run has no contact audit)")
  timing = [k for k in keys if "air_time" in k]
  shares = [k for k in keys if "share" in k and k not in timing]
  counts = [k for k in keys if k not in timing and k not in shares]
  groups = [(group, label) for group, label in (
      (counts, "events per update batch"), (timing, "feet air time (s)"),
      (shares, "share")) if group]
  x = _values(updates, "env_steps")
  figure = Figure(figsize=(10, 3.6 * len(groups)), layout="constrained")
  axes = np.atleast_1d(figure.subplots(len(groups), 1, sharex=True))
  for ax, (group, label) in zip(axes, groups):
    for key in group:
      y = _values(updates, key)
      ax.plot(x, np.maximum(y, 0.5) if group is counts else y, lw=1.2,
              label=key.split("/", 1)[1])
    if group is counts:
      if min_count:
        ax.axhline(min_count, color="red", ls="--", lw=1, label=f"flag below {min_count}")
      ax.set_yscale("log")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
  axes[-1].set_xlabel("env steps")
  return Plot("contact_events", title, _save(figure, path), figure=figure)


def _histogram(ax: Any, counts: np.ndarray, edges: np.ndarray, threshold: float | None,
               label: str) -> None:
  """Bars of `counts` over the bin `edges`; by bin index when the counts have other bins (a
  ledger written with other edges)."""
  if len(edges) == len(counts) + 1:
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", edgecolor="white")
    if threshold is not None and edges[0] <= threshold <= edges[-1]:
      ax.axvline(threshold, color="red", ls="--", lw=1.2, label=f"threshold {threshold:g}")
      ax.legend(fontsize="small")
  else:
    ax.bar(np.arange(len(counts)), counts)
  ax.set_xlabel(label)
  ax.set_ylabel("falls (whole run)")


def plot_fall_histograms(records: Sequence[dict[str, Any]], path: pathlib.Path,
                         config: config_lib.TrainConfig | None = None) -> Plot:
  """Trunk height and tilt at the moment of each `fall`, summed over the run, against the
  env's thresholds (`env.fall_height`, `env.fall_tilt_degrees`)."""
  title = "Fall height and tilt"
  updates = ledger.of_kind(records, "update")
  panels = [("audit/fall_height_counts", audit.FALL_HEIGHT_BINS, "trunk height at fall (m)",
             None if config is None else config.env.fall_height),
            ("audit/fall_tilt_counts", audit.FALL_TILT_BINS, "trunk tilt at fall (deg)",
             None if config is None else config.env.fall_tilt_degrees)]
  sums = {}
  for key, *_ in panels:
    rows = [np.asarray(r[key], float) for r in updates if isinstance(r.get(key), list)]
    if rows:
      sums[key] = np.sum(rows, axis=0)
  if not sums:
    return Plot("fall_histograms", title, None,
                "no audit/fall_height_counts or audit/fall_tilt_counts in the ledger")
  figure = Figure(figsize=(11, 4), layout="constrained")
  axes = figure.subplots(1, 2)
  for ax, (key, edges, label, threshold) in zip(axes, panels):
    if key not in sums:
      ax.set_axis_off()
      ax.set_title(f"no {key}")
      continue
    _histogram(ax, sums[key], np.asarray(edges, float), threshold, label)
    ax.set_title(f"{int(sums[key].sum())} falls")
  return Plot("fall_histograms", title, _save(figure, path), figure=figure)


def plot_latest_eval(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Success and fall rate per stratum, latest held-out evaluation."""
  title = "Latest evaluation per stratum"
  record = ledger.latest(records, "eval")
  if record is None:
    return Plot("latest_eval", title, None, "no held-out evaluation yet")
  strata = list(record["strata"])
  x = np.arange(len(strata))
  figure = Figure(figsize=(8, 4), layout="constrained")
  ax = figure.subplots()
  for offset, (metric, label, color) in zip(
      (-0.2, 0.2), (("success_rate", "success", "tab:green"), ("fall_rate", "fall", "tab:red"))):
    values = np.array([np.nan if record["strata"][s].get(metric) is None
                       else record["strata"][s][metric] for s in strata])
    bars = ax.bar(x + offset, values, width=0.4, label=label, color=color)
    ax.bar_label(bars, labels=[f"{v:.0%}" if np.isfinite(v) else "-" for v in values],
                 fontsize="small")
  ax.set_xticks(x, strata)
  ax.set_ylim(0.0, 1.1)
  ax.set_ylabel("share of episodes")
  ax.set_title(f"update {record['update']} ({record['env_steps']:,} env steps)")
  ax.legend()
  return Plot("latest_eval", title, _save(figure, path), figure=figure)


TERRAIN_LEVELS = "terrain/levels"
"""The update records' curriculum counts: {"<type>": [envs at each level]} after the update."""


@dataclasses.dataclass(frozen=True)
class CurriculumSeries:
  """The curriculum of a heightfield run, read from its update records' `terrain/levels`."""

  env_steps: np.ndarray
  """float [U]: env steps of each update record that has curriculum counts."""
  wall_seconds: np.ndarray
  """float [U]: those records' `perf/wall_seconds` (NaN where a record has none)."""
  mean_level: dict[str, np.ndarray]
  """Per terrain type, float [U]: the mean level of its envs after each update (sum of level
  times count over the count); NaN where the record has no envs of that type."""
  median_level: dict[str, np.ndarray]
  """Per terrain type, float [U]: the median of its envs' levels after each update (for an even
  count, the mean of the middle two, as `np.median`); NaN where there are none."""
  final_counts: dict[str, np.ndarray]
  """Per terrain type, int [levels]: how many envs stand at each level after the last update."""


def curriculum_series(records: Sequence[dict[str, Any]]) -> CurriculumSeries | None:
  """The mean level per terrain type over env steps and the last level counts, from the update
  records with `terrain/levels`; None when there are none (a run on the plane). Types appear in
  `config.TERRAIN_TYPES` order."""
  updates = [r for r in ledger.of_kind(records, "update")
             if isinstance(r.get(TERRAIN_LEVELS), dict)]
  if not updates:
    return None
  seen = {t for r in updates for t in r[TERRAIN_LEVELS]}
  types = [t for t in config_lib.TERRAIN_TYPES if t in seen] + sorted(
      seen - set(config_lib.TERRAIN_TYPES))
  mean_level, median_level = {}, {}
  for kind in types:
    means, medians = [], []
    for record in updates:
      counts = np.asarray(record[TERRAIN_LEVELS].get(kind, []), int)
      levels = np.repeat(np.arange(len(counts)), counts)  # one entry per env
      means.append(float(levels.mean()) if levels.size else np.nan)
      medians.append(float(np.median(levels)) if levels.size else np.nan)
    mean_level[kind], median_level[kind] = np.array(means), np.array(medians)
  last = updates[-1][TERRAIN_LEVELS]
  return CurriculumSeries(
      env_steps=_values(updates, "env_steps"), wall_seconds=_values(updates, "perf/wall_seconds"),
      mean_level=mean_level, median_level=median_level,
      final_counts={t: np.asarray(last[t], int) for t in types if t in last})


def plot_curriculum(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Each terrain type's mean curriculum level over env steps (left) and the number of envs at
  each level after the last update, per type (right)."""
  title = "Terrain curriculum"
  caption = ("Left, the mean curriculum level of the training envs on each terrain type after "
             "each update; right, how many of them stand at each level after the last one (an "
             "env goes up a level after an episode that walks its command to the time limit, "
             "and down after a termination or a short walk).")
  series = curriculum_series(records)
  if series is None:
    return Plot("curriculum", title, None, "no terrain/levels in the ledger (not a heightfield "
                "run)")
  num_levels = max(len(c) for c in series.final_counts.values()) if series.final_counts else 1
  figure = Figure(figsize=(12, 4.5), layout="constrained")
  left, right = figure.subplots(1, 2)
  for i, (kind, means) in enumerate(series.mean_level.items()):
    _line(left, series.env_steps, means, color=f"C{i % 10}", lw=1.5, marker="o", ms=3,
          label=kind)
  left.set_ylim(-0.2, num_levels - 0.8)
  left.set_xlabel("env steps")
  left.set_ylabel("mean level")
  left.grid(alpha=0.3)
  left.legend(fontsize="small")
  width = 0.8 / max(len(series.final_counts), 1)
  colors = {kind: f"C{i % 10}" for i, kind in enumerate(series.mean_level)}
  for i, (kind, counts) in enumerate(series.final_counts.items()):
    right.bar(np.arange(len(counts)) - 0.4 + (i + 0.5) * width, counts, width=width,
              color=colors[kind], label=kind)
  right.set_xticks(np.arange(num_levels))
  right.set_xlabel("level")
  right.set_ylabel("envs (after the last update)")
  right.grid(alpha=0.3, axis="y")
  right.legend(fontsize="small")
  return Plot("curriculum", title, _save(figure, path), caption=caption, figure=figure)


def make_plots(run_dir: pathlib.Path | str, records: Sequence[dict[str, Any]],
               config: config_lib.TrainConfig | None = None) -> list[Plot]:
  """Writes every plot of the report into `<run_dir>/plots/`.

  Args:
    run_dir: the run folder.
    records: its ledger (`ledger.read_run`).
    config: its configuration (thresholds drawn on the audit plots); None to draw none.

  Returns:
    One `Plot` per figure, in report order; a skipped one has `path` None and says why. The
    curriculum plot comes last, and only for a ledger with terrain records.
  """
  folder = run_folder.RunFolder(pathlib.Path(run_dir)).plots_dir
  min_count = None if config is None else config.audit.min_event_count
  terrain = [plot_curriculum(records, folder / "curriculum.png")] if curriculum_series(
      records) is not None else []
  return [
      plot_learning_curve(records, folder / "learning_curve.png"),
      plot_latest_eval(records, folder / "latest_eval.png"),
      plot_reward_terms(records, folder / "reward_terms.png"),
      plot_reset_reasons(records, folder / "reset_reasons.png"),
      plot_contact_events(records, folder / "contact_events.png", min_count),
      plot_fall_histograms(records, folder / "fall_histograms.png", config),
  ] + terrain
