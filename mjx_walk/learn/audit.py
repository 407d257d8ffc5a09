"""Batch audits: when a massively parallel run fails, did the policy fail, or did the batch lie?

This module owns the audits of each PPO update's [T, N] rollout, and the early-end traces they
pick. Each audit is a pure function of arrays; the trainer calls them inside the jitted chunk
(no host round-trip) and they come out with the chunk's stacked metrics. The host only formats.

The trainer plugs the audit in at one place: every rollout step returns, besides the PPO
transition, the env's typed `StepSignals`, the early-end flag and `step_early_ends` (the traces
of episodes that ended early on that step; `EpisodeTrace`, carried by the trainer and advanced
by `record_step`, holds the current episode of every env), and `rollout_metrics` reduces the
stacked [T, N] rollout to the update's audit metrics and its first early-end traces.

  termination  reset reasons per family ([F, R] counts), trunk height and tilt at every `fall`
               (histograms over `FALL_HEIGHT_BINS` and `FALL_TILT_BINS`), and early ends:
               episodes that terminate within `audit.early_end_steps` control steps, with up to
               `audit.traces_per_update` of their state traces per update, to be replayed.
  contacts     touchdowns, lift-offs, foot slips, stumbles, swing (air) times, and each foot's
               share of control steps on the ground, counted over the update batch.
  rewards      each reward term's share of the total absolute reward.
  sync         the largest share of envs that reset in the same control step, and the effective
               number of families in a minibatch (inverse Simpson index, `effective_families`).

Contact events are counted per foot and per control step from four per-step signals the env
emits (`StepSignals.contact`, `.last_contact`, `.foot_speed`, `.air_time`):
  touchdown    the foot is in contact at the end of the step and was not at its start;
  lift-off     the reverse;
  slip         the foot is in contact at both ends of the step and its mean horizontal speed over
               the step exceeds `audit.slip_speed`;
  stumble      a touchdown whose mean horizontal speed over the step exceeds
               `audit.stumble_speed` (the foot hits the ground while still swinging forward), or
               a step on which the trunk or a thigh touches the ground (`StepSignals.body_contact`,
               counted once per env and step);
  swing        at each touchdown, the seconds the foot spent in the air before it (the quantity
               the `feet_air_time` reward pays at touchdown); reported as the mean and the 90th
               percentile (nearest rank) over the batch's touchdowns.
A foot's horizontal speed is the displacement of its sphere's centre over the control step
divided by the control period (`LocomotionEnv` keeps the previous foot positions in
`TaskState.foot_xy`), so it is a mean over the step, not an instantaneous velocity.

On the host, `mjx_walk.learn.records` writes these into the update records,
`mjx_walk.evaluation.traces` writes and replays the early-end traces, and `mjx_walk.analysis.flags`
turns the records into warnings in plain words.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping
from typing import Sequence

import chex
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import endings
from mjx_walk.sim import env_state

Metrics = dict[str, jax.Array]

FALL_HEIGHT_BINS: np.ndarray = np.round(np.arange(0.0, 0.45 + 1e-9, 0.025), 3)
"""Edges, m, of the trunk-height histogram at `fall` resets: 18 bins of 2.5 cm from 0 to 0.45 m.
Values outside land in the outer bins."""
FALL_TILT_BINS: np.ndarray = np.arange(0.0, 180.0 + 1e-9, 10.0)
"""Edges, degrees from the floor normal, of the trunk-tilt histogram at `fall` resets: 18 bins
of 10 degrees from 0 (level) to 180 (upside down)."""


# IN THE JIT: PURE REDUCTIONS OF ONE UPDATE'S ROLLOUT


def masked_histogram(values: jax.Array, mask: jax.Array, edges: np.ndarray) -> jax.Array:
  """Counts of `values` where `mask` holds, over fixed bins; outliers go to the outer bins.

  Args:
    values: float, any shape.
    mask: bool, the shape of `values`.
    edges: float [B + 1], increasing; bin b is [edges[b], edges[b + 1]).

  Returns:
    float32 [B]: counts.
  """
  chex.assert_equal_shape([values, mask])
  num_bins = len(edges) - 1
  index = jnp.searchsorted(jnp.asarray(edges[1:-1], jnp.float32), values.reshape(-1),
                           side="right")  # [V] in 0 .. B-1
  return jnp.bincount(index, weights=mask.reshape(-1).astype(jnp.float32), length=num_bins)


def reset_histogram_by_family(reset_reason: jax.Array, num_families: int) -> jax.Array:
  """How often each reset reason occurred in each family.

  Args:
    reset_reason: int32 [T, N], a `ResetReason` per step (NONE when the episode went on). Env n
      is in family n % num_families.
    num_families: F; N must be divisible by it.

  Returns:
    float32 [F, R]: counts; column r is `endings.ENDINGS[r]` (code r + 1).
  """
  _, num_envs = reset_reason.shape
  codes = jnp.arange(1, len(endings.ENDINGS) + 1)  # [R]
  per_env = jnp.sum(reset_reason[..., None] == codes, axis=0)  # [N, R]
  per_env = per_env.reshape(num_envs // num_families, num_families, -1)  # [N/F, F, R]
  return jnp.sum(per_env, axis=0).astype(jnp.float32)  # [F, R]


def fall_histograms(reset_reason: jax.Array, trunk_height: jax.Array,
                    trunk_tilt: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Trunk height and tilt on the steps that ended in `fall`.

  Args:
    reset_reason: int32 [T, N].
    trunk_height: float32 [T, N], m above the floor, before the auto-reset.
    trunk_tilt: float32 [T, N], degrees between the trunk's up axis and the floor normal.

  Returns:
    (float32 [len(FALL_HEIGHT_BINS) - 1], float32 [len(FALL_TILT_BINS) - 1]) counts.
  """
  fell = reset_reason == endings.ResetReason.FALL  # [T, N]
  return (masked_histogram(trunk_height, fell, FALL_HEIGHT_BINS),
          masked_histogram(trunk_tilt, fell, FALL_TILT_BINS))


def contact_events(contact: jax.Array, last_contact: jax.Array, foot_speed: jax.Array,
                   air_time: jax.Array, body_contact: jax.Array, *, slip_speed: float,
                   stumble_speed: float) -> Metrics:
  """Counts the contact events of a batch (definitions in the module docstring).

  Args:
    contact: bool [T, N, F], each foot on the ground at the end of each step.
    last_contact: bool [T, N, F], the same at the start of the step (across an auto-reset, the
      new episode's first state, so no event straddles two episodes).
    foot_speed: float32 [T, N, F], mean horizontal foot speed over the step, m/s.
    air_time: float32 [T, N, F], at a touchdown the seconds the foot was in the air; read only
      where a touchdown happens.
    body_contact: bool [T, N], the trunk or a thigh touches the ground.
    slip_speed: m/s.
    stumble_speed: m/s.

  Returns:
    Scalars (float32) summed over the batch: `touchdowns`, `liftoffs`, `slips`,
    `stumble_touchdowns`, `body_contacts`, `stumbles` (the last two added), `air_time_sum`
    (seconds, over all touchdowns), `air_time_p90` (seconds; 0 without touchdowns), and
    `ground_share` float32 [F], the share of steps each foot ended on the ground.
  """
  touchdown = contact & ~last_contact  # [T, N, F]
  liftoff = ~contact & last_contact  # [T, N, F]
  slip = contact & last_contact & (foot_speed > slip_speed)  # [T, N, F]
  stumble_touchdown = touchdown & (foot_speed > stumble_speed)  # [T, N, F]
  count = lambda x: jnp.sum(x).astype(jnp.float32)
  num_touchdowns = jnp.sum(touchdown)
  swings = jnp.where(touchdown, air_time, jnp.inf).reshape(-1)  # [T*N*F]
  # Nearest-rank 90th percentile: the smallest swing with at least 90% of swings at or below it.
  rank = jnp.clip(jnp.ceil(0.9 * num_touchdowns).astype(jnp.int32) - 1, 0, swings.shape[0] - 1)
  p90 = jnp.where(num_touchdowns > 0, jnp.sort(swings)[rank], 0.0)
  return {
      "touchdowns": count(touchdown),
      "liftoffs": count(liftoff),
      "slips": count(slip),
      "stumble_touchdowns": count(stumble_touchdown),
      "body_contacts": count(body_contact),
      "stumbles": count(stumble_touchdown) + count(body_contact),
      "air_time_sum": jnp.sum(jnp.where(touchdown, air_time, 0.0)),
      "air_time_p90": p90,
      "ground_share": jnp.mean(contact.astype(jnp.float32), axis=(0, 1)),  # [F]
  }


def reward_shares(terms: Mapping[str, jax.Array]) -> Metrics:
  """Each term's share of the total absolute reward of the batch.

  Args:
    terms: {name: float32 [T, N] scaled per-step term} (before any only-positive clip).

  Returns:
    {name: float32 []}, summing to 1 (all 0 when every term is 0).
  """
  totals = {name: jnp.sum(jnp.abs(value)) for name, value in terms.items()}
  whole = sum(totals.values(), jnp.zeros(()))
  return {name: total / jnp.maximum(whole, 1e-12) for name, total in totals.items()}


def reset_sync(done: jax.Array) -> tuple[jax.Array, jax.Array]:
  """How synchronized the batch's resets are.

  Args:
    done: bool [T, N], the step ended an episode (terminated or truncated).

  Returns:
    (largest share of envs that ended an episode in the same step, mean share per step), float32.
  """
  per_step = jnp.mean(done.astype(jnp.float32), axis=1)  # [T]
  return jnp.max(per_step), jnp.mean(per_step)


def effective_families(counts: jax.Array) -> jax.Array:
  """The effective number of independent families in each minibatch.

  Defined as the inverse Simpson index (sum_f c_f)^2 / sum_f c_f^2 over the counts c_f of the
  minibatch's samples from each family f: the number of equally represented families that would
  give the same chance that two samples drawn from the minibatch share a family. It equals the
  number of distinct families when they are equally represented and is smaller when a few
  families dominate. It counts families, not envs: envs of one family share terrain, commands
  and randomization, so they are not independent evidence.

  Args:
    counts: float [M, F], samples per family in each of M minibatches.

  Returns:
    float32 [M].
  """
  counts = counts.astype(jnp.float32)
  total = jnp.sum(counts, axis=-1)  # [M]
  return jnp.square(total) / jnp.maximum(jnp.sum(jnp.square(counts), axis=-1), 1.0)


# EARLY-END TRACES


@flax.struct.dataclass
class EpisodeTrace:
  """The first L = `audit.early_end_steps` control steps of an env's current episode, for replay.

  Row 0 is the episode's reset state; row k the state after its k-th step, before any
  auto-reset. Rows past `length` are stale. The trainer carries one per env (`Carry.trace`,
  leaves [N, ...]) and advances it with `record_step` after every env step. A step that ends an
  episode leaves the trace in place, so that it can be picked up (`step_early_ends`); the next
  step starts a new trace from the new episode's reset state.
  """

  qpos: jax.Array
  """float32 [L + 1, nq]."""
  qvel: jax.Array
  """float32 [L + 1, nv]."""
  action: jax.Array
  """float32 [L, A]: the clipped action of each step."""
  length: jax.Array
  """int32 []: control steps taken since the reset (counts on past L)."""
  first_step: jax.Array
  """int32 []: `TaskState.step` at the reset state (0, except for an episode whose clock was
  started late, as the trainer does to stagger the first episodes)."""
  early_end: jax.Array
  """bool []: the step just recorded terminated the episode within L steps (a failure, not a
  timeout), so the trace holds a whole early end: `length` <= L steps and the state it ended in."""


def start_trace(state: env_state.EnvState, num_steps: int) -> EpisodeTrace:
  """A trace of one env that holds only its current state as the reset state (row 0).

  Args:
    state: one env's state (no leading axis), at the start of an episode.
    num_steps: L, the steps a trace keeps (`audit.early_end_steps`).
  """
  qpos, qvel = state.data.qpos, state.data.qvel  # [nq], [nv]
  return EpisodeTrace(
      qpos=jnp.zeros((num_steps + 1,) + qpos.shape).at[0].set(qpos),
      qvel=jnp.zeros((num_steps + 1,) + qvel.shape).at[0].set(qvel),
      action=jnp.zeros((num_steps,) + state.task.last_action.shape),
      length=jnp.zeros((), jnp.int32),
      first_step=state.task.step,
      early_end=jnp.zeros((), bool),
  )


def record_step(trace: EpisodeTrace, before: env_state.EnvState,
                final: env_state.EnvState) -> EpisodeTrace:
  """One env's trace after one more step: the state it ended in and its action appended.

  A step that follows an episode end starts a new trace from `before.data`, the new episode's
  reset state. Rows are written with a one-hot select rather than a scatter, which stays
  vectorised under `vmap`.

  Args:
    trace: the trace before the step.
    before: the state the step started from (the previous step's result, after its auto-reset).
    final: the state the step ended in, before any auto-reset
      (`LocomotionEnv.step_with_final`); `final.task.last_action` is the step's clipped action.

  Returns:
    The trace after the step, its `early_end` set when this step terminated the episode within
    L steps.
  """
  num_steps = trace.action.shape[0]  # L
  restart = before.terminated | before.truncated
  length = jnp.where(restart, 0, trace.length)  # steps before this one
  first_row = (jnp.arange(num_steps + 1) == 0)[:, None]  # [L + 1, 1]
  qpos = jnp.where(restart & first_row, before.data.qpos, trace.qpos)  # [L + 1, nq]
  qvel = jnp.where(restart & first_row, before.data.qvel, trace.qvel)  # [L + 1, nv]
  state_row = (jnp.arange(num_steps + 1) == length + 1)[:, None]  # [L + 1, 1]
  action_row = (jnp.arange(num_steps) == length)[:, None]  # [L, 1]
  return EpisodeTrace(
      qpos=jnp.where(state_row, final.data.qpos, qpos),
      qvel=jnp.where(state_row, final.data.qvel, qvel),
      action=jnp.where(action_row, final.task.last_action, trace.action),
      length=length + 1,
      first_step=before.task.step - length,
      early_end=final.terminated & (length + 1 <= num_steps),
  )


@flax.struct.dataclass
class Traces:
  """Early-end episodes picked from one rollout step or one update, S rows with a validity mask.

  L is `audit.early_end_steps`. Row s holds one episode that terminated after `length[s]` <= L
  control steps: its states 0 .. length (0 is the reset state, `length` the state it ended in,
  before the auto-reset) and the actions 0 .. length - 1 that led from each to the next. Entries
  past `length`, and rows with `valid` false, are zeros.
  """

  qpos: jax.Array
  """float32 [S, L + 1, nq]."""
  qvel: jax.Array
  """float32 [S, L + 1, nv]."""
  action: jax.Array
  """float32 [S, L, A]: the clipped policy actions."""
  family: jax.Array
  """int32 [S]: training family index."""
  env: jax.Array
  """int32 [S]: env index in the batch."""
  reason: jax.Array
  """int32 [S]: the `ResetReason` that ended the episode."""
  length: jax.Array
  """int32 [S]: control steps the episode lasted."""
  first_step: jax.Array
  """int32 [S]: the env's episode clock at the reset state (0, except for the staggered first
  episode of a run); pushes are scheduled on this clock, so a replay needs it."""
  valid: jax.Array
  """bool [S]."""


def _first_valid_rows(rows: Traces, num_rows: int) -> Traces:
  """The first `num_rows` valid rows of `rows` (leaves [C, ...]), in order; the rows left over
  are zeros with `valid` false."""
  (index,) = jnp.nonzero(rows.valid, size=num_rows, fill_value=0)  # [S]
  valid = jnp.arange(num_rows) < jnp.sum(rows.valid)  # [S]
  taken = jax.tree.map(lambda x: x[index], rows)
  return jax.tree.map(
      lambda x: jnp.where(valid.reshape((-1,) + (1,) * (x.ndim - 1)), x, jnp.zeros_like(x)),
      taken)


def step_early_ends(trace: EpisodeTrace, family: jax.Array, reason: jax.Array,
                    num_rows: int, first_env: jax.Array | int = 0) -> Traces:
  """This step's early ends, lowest env index first, at most `num_rows` of them.

  Taken right after `record_step`, while the ended episodes' traces are complete (the next step
  starts new ones).

  Args:
    trace: the batched traces after the step, leaves [N, ...].
    family: int32 [N], each env's family index.
    reason: int32 [N], each env's reset reason on this step.
    num_rows: S.
    first_env: the batch index of the first of these N envs (a device's block of a batch split
      over devices).

  Returns:
    S rows; states and actions past each episode's length are zeroed.
  """
  length = trace.length  # [N]
  states = jnp.arange(trace.qpos.shape[1])[None, :] <= length[:, None]  # [N, L + 1]
  actions = jnp.arange(trace.action.shape[1])[None, :] < length[:, None]  # [N, L]
  every_env = Traces(
      qpos=jnp.where(states[..., None], trace.qpos, 0.0),
      qvel=jnp.where(states[..., None], trace.qvel, 0.0),
      action=jnp.where(actions[..., None], trace.action, 0.0),
      family=family,
      env=first_env + jnp.arange(length.shape[0], dtype=jnp.int32),
      reason=reason,
      length=length,
      first_step=trace.first_step,
      valid=trace.early_end,
  )
  return _first_valid_rows(every_env, num_rows)


def first_early_ends(per_step: Traces, num_rows: int) -> Traces:
  """An update's first S early ends, in step order and, within a step, env order.

  Args:
    per_step: `step_early_ends` of every rollout step, leaves [T, C, ...], each step's rows in
      env order (C = S, or D x S for the blocks of D devices side by side).
    num_rows: S.

  Returns:
    S rows (leaves [S, ...]); once S are found, later early ends are not kept.
  """
  flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), per_step)  # [T * S, ...]
  return _first_valid_rows(flat, num_rows)


# THE ONE CALL PER UPDATE


def rollout_metrics(signals: env_state.StepSignals, early_end: jax.Array,
                    env_metrics: Mapping[str, jax.Array], reset_reason: jax.Array,
                    done: jax.Array, early_end_traces: Traces, *, num_families: int,
                    audit: config_lib.AuditConfig, foot_names: Sequence[str],
                    num_traces: int | None = None) -> Metrics:
  """Every audit of one update's rollout, for the chunk's metrics.

  Args:
    signals: the rollout's stacked env signals, leaves [T, N, ...].
    early_end: bool [T, N], the step terminated an episode within `audit.early_end_steps`
      steps (`EpisodeTrace.early_end` after each step).
    env_metrics: the rollout's stacked env metrics; the `reward/<term>` entries [T, N] are read.
    reset_reason: int32 [T, N].
    done: bool [T, N], terminated or truncated.
    early_end_traces: `step_early_ends` of every step, leaves [T, C, ...]; C may be 0.
    num_families: F; env n is in family n % F.
    audit: thresholds.
    foot_names: F names in the env's foot order, for the `contact/ground_share/<foot>` keys.
    num_traces: S, the early ends to keep; default C. (Over D devices' blocks side by side,
      C = D x S.)

  Returns:
    Scalars except `audit/resets_by_family` [F, R], `audit/fall_height_counts` and
    `audit/fall_tilt_counts` [B], and, when S > 0, the update's first S early ends as
    `trace/<field>` [S, ...] (`first_early_ends`).
  """
  metrics = {"audit/resets_by_family": reset_histogram_by_family(reset_reason, num_families)}
  heights, tilts = fall_histograms(reset_reason, signals.trunk_height, signals.trunk_tilt)
  metrics["audit/fall_height_counts"] = heights
  metrics["audit/fall_tilt_counts"] = tilts
  metrics["audit/early_ends"] = jnp.sum(early_end).astype(jnp.float32)

  events = contact_events(
      signals.contact, signals.last_contact, signals.foot_speed, signals.air_time,
      signals.body_contact, slip_speed=audit.slip_speed, stumble_speed=audit.stumble_speed)
  ground_share = events.pop("ground_share")  # [F]
  metrics.update({f"contact/{name}": value for name, value in events.items()})
  for i, foot in enumerate(foot_names):
    metrics[f"contact/ground_share/{foot}"] = ground_share[i]

  terms = {key[len("reward/"):]: value for key, value in env_metrics.items()
           if key.startswith("reward/")}
  metrics.update({f"reward_share/{name}": share for name, share in reward_shares(terms).items()})
  metrics["sync/max_reset_share"], metrics["sync/mean_reset_share"] = reset_sync(done)
  num_traces = early_end_traces.valid.shape[1] if num_traces is None else num_traces
  if num_traces:
    picked = first_early_ends(early_end_traces, num_traces)
    metrics.update({f"trace/{field.name}": getattr(picked, field.name)
                    for field in dataclasses.fields(picked)})
  return metrics


def family_counts(samples: jax.Array, num_envs: int, num_families: int,
                   first_env: jax.Array | int = 0) -> jax.Array:
  """Samples of each family in each minibatch. samples: [M, B] indices into the flattened
  [T*N] batch of N envs, the first of which is env `first_env` of the whole batch: sample s
  came from env first_env + s % N, of family (first_env + s % N) % F. Returns int32 [M, F]."""
  family = (first_env + samples % num_envs) % num_families  # [M, B]
  rows = jnp.arange(samples.shape[0])[:, None]  # [M, 1]
  return jnp.zeros((samples.shape[0], num_families), jnp.int32).at[rows, family].add(1)

