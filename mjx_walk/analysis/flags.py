"""Audit flags: the batch audits of a run's ledger turned into warnings in plain words.

Runs on the host from the ledger's update records (`mjx_walk.learn.audit` computes the audits
inside the jitted chunk; `mjx_walk.learn.records` writes them into the records). The report lists
every flag raised.
"""

from __future__ import annotations

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
