"""Audit flags: the batch audits of a run's ledger turned into warnings in plain words.

Runs on the host from the ledger's update records (`mjx_walk.learn.audit` computes the audits
inside the jitted chunk; `mjx_walk.learn.records` writes them into the records). The report lists
every flag raised.

A run of several training seeds is audited seed by seed as well: `flags` judges the update
records, which pool the seeds still training; `seed_reset_shares` gives each seed's own reset
reasons (from the records' `seeds` lists), and `seed_divergences` says which seed halted at which
update and how far the others trained on (from the `divergence` records with a `seed`).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Mapping
from typing import Sequence

import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.run import ledger
from mjx_walk.run import run_folder

CONTACT_EVENTS: tuple[tuple[str, str], ...] = (
    ("contact/slips", "foot slips"),
    ("contact/stumbles", "stumbles"),
    ("contact/touchdowns", "touchdowns"),
    ("contact/liftoffs", "lift-offs"),
)
"""The counted contact events that `flags` checks against `audit.min_event_count`."""
SYNC_FLAG_SHARE = 0.1
"""`flags` reports a reset burst when more than this share of envs reset in one step ..."""
SYNC_FLAG_RATIO = 10.0
"""... and that share is this many times the update's mean share of envs resetting per step."""
MIN_EFFECTIVE_FAMILY_SHARE = 0.5
"""`flags` reports minibatches spanning fewer effective families than this share of the
training families."""


def _percent(share: float) -> str:
  """12%, 2.5%, 0.31%: enough digits to be non-zero."""
  if share >= 0.1 or share == 0:
    return f"{share:.0%}"
  return f"{share:.1%}" if share >= 0.01 else f"{share * 100:.2g}%"


def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
  values = [r[key] for r in records if r.get(key) is not None]
  return float(np.mean(values)) if values else None


def flags(records: list[dict], config: config_lib.TrainConfig) -> list[str]:
  """Audit warnings in plain words, from a run's ledger records.

  Levels (contact-event counts, reward shares) are judged over the recent window: the last
  quarter of the update records, at least one. Events (early ends, reset bursts, thin
  minibatches) are judged over the whole run.
    * a contact event (`CONTACT_EVENTS`) counted fewer than `audit.min_event_count` times per
      batch on average over the window;
    * any early end: the share of episodes that terminated within `audit.early_end_steps`;
    * a reward term other than tracking holding more than `audit.dominant_share` of the
      absolute reward over the window while the xy velocity tracking error did not fall from the
      window's first half to its second (needs two updates or more);
    * an update in which more than `SYNC_FLAG_SHARE` of the envs reset in the same step, and that
      is `SYNC_FLAG_RATIO` times the update's mean per-step share (the worst one is named);
    * a minibatch spanning fewer than `MIN_EFFECTIVE_FAMILY_SHARE` x num_train_families
      effective families.

  Args:
    records: ledger records as read back (`ledger.read_run`); only `kind="update"` ones are used
      (records without a kind count as updates).
    config: the run's configuration (thresholds in `config.audit`).

  Returns:
    One sentence per flag; empty when nothing is wrong or there are no update records.
  """
  updates = ledger.of_kind(records, "update")
  if not updates:
    return []
  window = updates[-max(1, len(updates) // 4):]
  return [*_rare_contact_events(window, config.audit),
          *_early_ends(updates, config.audit),
          *_dominant_terms(window, config.audit),
          *_reset_bursts(updates),
          *_thin_minibatches(updates, config.families.num_train_families)]


def _span(window: Sequence[Mapping[str, Any]]) -> str:
  return f"the last {len(window)} updates" if len(window) > 1 else "the last update"


def _rare_contact_events(window: Sequence[Mapping[str, Any]],
                         audit: config_lib.AuditConfig) -> list[str]:
  over = f"mean over {_span(window)}" if len(window) > 1 else "in the last update"
  out = []
  for key, label in CONTACT_EVENTS:
    count = _mean(window, key)
    if count is not None and count < audit.min_event_count:
      out.append(f"{label} appeared only {count:.0f} times per batch, under the "
                 f"{audit.min_event_count} threshold ({over})")
  return out


def _early_ends(updates: Sequence[Mapping[str, Any]], audit: config_lib.AuditConfig) -> list[str]:
  early = sum(r.get("audit/early_ends") or 0.0 for r in updates)
  episodes = sum(r.get("episode/count") or 0.0 for r in updates)
  if not (early > 0 and episodes > 0):
    return []
  return [f"{_percent(early / episodes)} of episodes ended within {audit.early_end_steps} "
          f"steps (early ends: {early:.0f} of {episodes:.0f} over the run; their traces are in "
          f"{run_folder.TRACES}/)"]


def _dominant_terms(window: Sequence[Mapping[str, Any]],
                    audit: config_lib.AuditConfig) -> list[str]:
  half = len(window) // 2
  if not half:
    return []
  before = _mean(window[:half], "tracking/lin_vel_error")
  after = _mean(window[half:], "tracking/lin_vel_error")
  if before is None or after is None or after < before:
    return []
  out = []
  for key in sorted({k for r in window for k in r if k.startswith("reward_share/")}):
    term = key[len("reward_share/"):]
    share = _mean(window, key)
    if term.startswith("tracking") or share is None or share <= audit.dominant_share:
      continue
    out.append(f"reward term {term} holds {share:.0%} of the absolute reward while tracking "
               f"did not improve over {_span(window)} (xy velocity error {before:.2f} -> "
               f"{after:.2f} m/s)")
  return out


def _reset_bursts(updates: Sequence[Mapping[str, Any]]) -> list[str]:
  bursts = [r for r in updates if r.get("sync/max_reset_share") is not None
            and r["sync/max_reset_share"] > SYNC_FLAG_SHARE
            and r["sync/max_reset_share"] > SYNC_FLAG_RATIO * (r.get("sync/mean_reset_share") or 0)]
  if not bursts:
    return []
  worst = max(bursts, key=lambda r: r["sync/max_reset_share"])
  more = f"; {len(bursts)} updates had such a burst" if len(bursts) > 1 else ""
  return [f"{_percent(worst['sync/max_reset_share'])} of envs reset in the same step at update "
          f"{worst.get('update', '?')} (on average "
          f"{_percent(worst.get('sync/mean_reset_share') or 0.0)} per step{more})"]


def _thin_minibatches(updates: Sequence[Mapping[str, Any]], num_families: int) -> list[str]:
  thin = [r for r in updates if r.get("sync/min_effective_families") is not None]
  if not thin:
    return []
  worst = min(thin, key=lambda r: r["sync/min_effective_families"])
  if worst["sync/min_effective_families"] >= MIN_EFFECTIVE_FAMILY_SHARE * num_families:
    return []
  return [f"a minibatch spanned only {worst['sync/min_effective_families']:.1f} effective "
          f"families (inverse Simpson index) of {num_families} at update "
          f"{worst.get('update', '?')}"]


@dataclasses.dataclass(frozen=True)
class SeedResets:
  """The reset reasons of each training seed of a multi-seed run."""

  shares: dict[str, list[float | None]]
  """Per reason ("fall", "timeout", ...), each seed's mean share of its episode ends over the
  updates in which some of its episodes ended; None for a seed whose episodes never ended."""
  updates: list[int]
  """Per seed, how many updates the mean is over."""


def seed_reset_shares(records: list[dict]) -> SeedResets | None:
  """Each seed's share of episode ends per reset reason, from the update records' `seeds`
  lists (`records.seed_update_records`).

  A seed's share is its mean over the updates in which some of its episodes ended (the records
  list a seed's shares, not its episode counts, so updates are weighted alike); an update after
  the seed halted lists null and is left out.

  Returns:
    The shares, reasons in sorted order; None when no update record lists seeds (a single-seed
    run).
  """
  updates = [r for r in ledger.of_kind(records, "update") if isinstance(r.get("seeds"), dict)]
  reasons = sorted({k for r in updates for k in r["seeds"] if k.startswith("reset/")})
  if not reasons:
    return None
  num_seeds = max(len(r["seeds"][k]) for r in updates for k in reasons if k in r["seeds"])
  shares = np.full((len(reasons), num_seeds, len(updates)), np.nan)
  for u, record in enumerate(updates):
    for i, key in enumerate(reasons):
      for k, value in enumerate(record["seeds"].get(key) or []):
        if value is not None:
          shares[i, k, u] = value
  # An update of a seed counts when it lists every reason and some of its episodes ended.
  ended = np.isfinite(shares).all(axis=0) & (np.nansum(shares, axis=0) > 0)  # [S, U]
  counts = ended.sum(axis=1)
  means = {key.split("/", 1)[1]: [float(np.mean(shares[i, k, ended[k]])) if counts[k] else None
                                  for k in range(num_seeds)]
           for i, key in enumerate(reasons)}
  return SeedResets(shares=means, updates=[int(c) for c in counts])


def _seed_list(seeds: Sequence[int]) -> str:
  """seed 2; seeds 0 and 2; seeds 0, 1 and 3."""
  names = [str(s) for s in seeds]
  if len(names) == 1:
    return f"seed {names[0]}"
  return f"seeds {', '.join(names[:-1])} and {names[-1]}"


def seed_divergences(records: list[dict], num_seeds: int) -> list[str]:
  """Which seed halted at which update, and how far the others trained on, in plain words.

  One sentence per `divergence` record with a `seed` (a multi-seed run halts that seed alone,
  keeping its last finite parameters), naming the non-finite quantities and the seeds that went
  on with the update each last trained (from the update records' `halted_seeds`); and one for a
  `divergence` record without a seed, written when every seed had halted and the run stopped.

  Args:
    records: the run's ledger records.
    num_seeds: the run's number of training seeds.
  """
  updates = ledger.of_kind(records, "update")
  last = {}  # seed -> the last update it trained
  for record in updates:
    for seed in range(num_seeds):
      if seed not in (record.get("halted_seeds") or []):
        last[seed] = record.get("update")
  out = []
  for record in ledger.of_kind(records, "divergence"):
    update, quantities = record.get("update"), ", ".join(record.get("nonfinite") or []) or "?"
    if record.get("seed") is None:
      checkpoint = record.get("last_checkpoint")
      out.append(f"every seed had halted by update {update} (non-finite {quantities}): the run "
                 "stopped there; "
                 + ("no checkpoint was saved before it" if checkpoint is None else
                    f"its last checkpoint is update {checkpoint}"))
      continue
    seed = record["seed"]
    others = [s for s in range(num_seeds) if s != seed
              and (last.get(s) is None or update is None or last[s] >= update)]
    went_on = {}
    for other in others:
      went_on.setdefault(last.get(other), []).append(other)
    trained = "; ".join(
        f"{_seed_list(group)} trained on" + (f" to update {end}" if end is not None else "")
        # The longest-training group first; seeds of no known last update last.
        for end, group in sorted(went_on.items(),
                                 key=lambda item: (item[0] is None, -(item[0] or 0))))
    out.append(f"seed {seed} went non-finite at update {update} ({quantities}) and halted there, "
               f"keeping its update {update - 1 if isinstance(update, int) else '?'} parameters; "
               + (trained if trained else "no other seed was still training"))
  return out
