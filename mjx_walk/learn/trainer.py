"""`TrainState` and the fused, jit-compiled training chunk: rollout, GAE and PPO update in one jit.

A chunk is one jitted function `Carry -> (Carry, Metrics)`:

  lax.scan over `updates_per_chunk` updates, each of which
    COLLECT TRAJECTORIES  lax.scan over `unroll_length` steps of the vmapped env and policy
    CALCULATE ADVANTAGE   GAE over the [T, N] block, truncations bootstrapped from final obs
    UPDATE NETWORK        lax.scan over epochs of lax.scan over shuffled minibatches

Nothing inside a chunk returns to the host. The carry is donated, so the env state and the
optimizer state are updated in place. The host loop (`mjx_walk.train`) moves the stacked metrics
off the device once per chunk, and `mjx_walk.learn.records` reduces them to ledger records.

Every update also runs the batch audits of `mjx_walk.learn.audit` on its [T, N] rollout (reset
reasons per family, fall heights and tilts, contact events, reward shares, reset synchrony,
effective families per minibatch) and keeps up to `audit.traces_per_update` early-end traces.
The audit plugs in at one place: each rollout step returns, beside the PPO transition, the env's
typed `StepSignals`, the early-end flag and that step's early-end traces (`Carry.trace` holds
every env's current episode, advanced by `audit.record_step`), and one `audit.rollout_metrics`
call in the update reduces them; all of it leaves the jit with the chunk's metrics (`trace/...`
keys for the traces).

The chunk is built from module-level pieces that share the static `_Parts`: `_init`,
`_rollout_step` and `_collect`, `_local_update`, `_epoch_step`, `_minibatch_step` and
`_update_metrics`.

Every update also reports which of `guard.GUARDED` (each loss term, the gradient norm, the
parameters, the optimizer state, the normalizer) held a NaN or inf (`guard/nonfinite`), so the host
stops a diverged run after the chunk, before anything of it is saved (`guard.first_divergence`).

On several devices (`mjx_walk.learn.sharding`) the chunk is still one jitted call. Each update's
COLLECT, ADVANTAGE and UPDATE run inside one `jax.shard_map` over the mesh: every device steps its
own block of the envs, computes GAE on it and takes the same SGD steps as every other device from
gradients averaged over all of them (the loss diagnostics and the KL that sets the adaptive
learning rate are averaged too, the advantages standardised over the whole minibatch, and the
normalizer merges every device's moments), so the replicated `TrainState` stays identical
everywhere. Global minibatch m is the union of every device's m-th minibatch, each shuffled
within that device's samples. The reset keys, family draws and action noise are drawn for the
whole batch and sliced, so env i gets the same ones on any number of devices. The update's
metrics are then computed outside the shard_map from the [T, N] rollout split over the devices,
as on one device; the rollout leaves the shard_map only once the epochs' collectives are done
(`sharding.after`: XLA's CPU runtime could otherwise run both at once and stall). On one
device nothing is wrapped: the program is the one-device program.

Several training seeds (`config.num_seeds` S > 1) train in the same jitted chunk: every leaf of
the carry gains a leading [S] seed axis, and each update and its metrics are `jax.vmap`ped over
it (inside the shard_map, over each device's seeds); nothing is reduced across seeds. Where the
seeds start and how one that diverges halts alone is `mjx_walk.learn.seeds`. With S = 1 the
program is the single-seed program.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import chex
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mjx_walk import config as config_lib
from mjx_walk.learn import audit
from mjx_walk.learn import cpu_lapack
from mjx_walk.learn import guard
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.learn import ppo
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import sharding
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state
from mjx_walk.sim import families
from mjx_walk.sim import terrain as terrain_lib

Metrics = dict[str, jax.Array]


@flax.struct.dataclass
class TrainState:
  """Everything the learner owns; saved whole by checkpoints."""

  params: networks.ActorCriticParams
  opt_state: optax.OptState
  normalizer: normalizer.NormalizerState
  key: jax.Array
  update_step: jax.Array
  """int32 []: PPO updates done. Env steps are exactly update_step * config.batch_size."""
  halted: jax.Array | None = None
  """With several seeds, bool []: this seed went non-finite and stopped learning
  (`seeds.halt_diverged`); None, no leaf at all, for a single-seed run."""


@flax.struct.dataclass
class Carry:
  """The donated state of a chunk."""

  train: TrainState
  env: env_state.EnvState
  """Batched over a leading [N] env axis."""
  trace: audit.EpisodeTrace
  """Each env's current episode so far (leaves [N, ...]), from which early ends are picked for
  replay; advanced by `audit.record_step` after every env step."""


@flax.struct.dataclass
class Transition:
  """One vmapped control step as the learner and the audit see it. Leading dims [T, N] once
  stacked."""

  policy_obs: jax.Array
  """[O] normalised policy observation the action was sampled from."""
  critic_obs: jax.Array
  """[P] normalised critic observation."""
  action: jax.Array
  """[A] raw sampled action."""
  log_prob: jax.Array
  """[] behaviour log-probability of `action`."""
  value: jax.Array
  """[] V(critic_obs)."""
  final_value: jax.Array
  """[] V(final observation of this step); bootstraps a timeout."""
  reward: jax.Array
  terminated: jax.Array
  truncated: jax.Array
  reset_reason: jax.Array
  metrics: dict[str, jax.Array]
  """The env's logging metrics of the step (`EnvState.metrics`)."""
  signals: env_state.StepSignals
  """What the batch audits read of the step (`EnvState.signals`)."""
  early_end: jax.Array
  """bool []: the step terminated an episode within `audit.early_end_steps` steps."""


@dataclasses.dataclass(frozen=True)
class Trainer:
  """The static pieces of a run and its two entry points."""

  config: config_lib.TrainConfig
  env: env_lib.LocomotionEnv
  manifest: families.Manifest
  networks: networks.ActorCritic
  optimizer: optax.GradientTransformation
  devices: sharding.Devices
  """The mesh the chunk runs on; the carry's train state is replicated, its envs split."""
  carry_shardings: Carry
  """Each part of the carry's sharding (a prefix of the carry: train, env, trace)."""
  init: Callable[[jax.Array], Carry]
  """key -> Carry: fresh parameters, optimizer, normalizer and a reset batch of envs, on the
  mesh. With S > 1 seeds, keys [S] (`seeds.initial_keys`) -> a Carry with a leading seed axis."""
  collect: Callable[[Carry], tuple[Carry, Transition, audit.Traces]]
  """Not jitted: one rollout of `unroll_length` steps, the first part of every update (see
  `_collect`)."""
  train_chunk: Callable[[Carry], tuple[Carry, Metrics]]
  """Jitted, donating: runs `config.updates_per_chunk` updates."""


@dataclasses.dataclass(frozen=True)
class _Parts:
  """The static pieces every stage of a chunk closes over."""

  config: config_lib.TrainConfig
  env: env_lib.LocomotionEnv
  networks: networks.ActorCritic
  optimizer: optax.GradientTransformation
  loss_config: ppo.LossConfig
  observation_spec: env_state.Observation
  env_families: families.FamilyParams
  """Each env's training family draw, [N, ...] for the whole batch ([S, N, ...] with seeds)."""
  num_families: int
  axis_name: str | None
  """The device axis inside the shard_map; None on one device, where nothing is wrapped."""
  local_envs: int
  """n = N / D: the envs each device steps."""

  @property
  def local_batch(self) -> int:
    """T x n: the samples each device collects per update."""
    return self.config.unroll_length * self.local_envs


def make_trainer(
    config: config_lib.TrainConfig,
    env: env_lib.LocomotionEnv | None = None,
    manifest: families.Manifest | None = None,
    devices: sharding.Devices | None = None,
) -> Trainer:
  """Builds the init function and the fused, jitted training chunk.

  Args:
    config: the run configuration; closed over, so it is static under jit. Validated here
      when the manifest is drawn here; a given manifest was drawn from a validated config.
    env: the env to train on; built from `config` when omitted.
    manifest: the run's families; `families.make_manifest(config)` (which validates the
      config) when omitted. Env i trains in training family i % num_train_families.
    devices: the mesh to train on; every device of every process when omitted.

  Returns:
    A `Trainer`. `trainer.train_chunk` compiles on its first call and never again.

  Raises:
    ValueError: a bad config value, or a batch that does not split evenly over the devices;
      nothing has compiled.
  """
  manifest = manifest or families.make_manifest(config)
  seeds = config.num_seeds
  devices = sharding.for_seeds(devices or sharding.make(), seeds)
  sharding.check_geometry(config, devices.count)
  if devices.count > 1:
    # Before anything is lowered: jaxlib 0.11's Shardy dies on MJX's zero-size arrays.
    sharding.avoid_partitioner_faults()
  if devices.count > 1 and devices.mesh.devices.flat[0].platform == "cpu":
    # Several devices share one CPU thread pool, on which jaxlib's batched LAPACK calls (MJX's
    # Cholesky) can deadlock; see `cpu_lapack`. Bitwise the same results on any device count;
    # one device keeps jaxlib's own lowering (and its speed).
    cpu_lapack.install()
  env = env or env_lib.LocomotionEnv(config)
  ppo_cfg = config.ppo
  parts = _Parts(
      config=config,
      env=env,
      networks=networks.from_config(config, env.action_size, env.scan_start),
      optimizer=ppo.make_optimizer(ppo_cfg.learning_rate, ppo_cfg.max_grad_norm),
      loss_config=ppo.LossConfig(clip_eps=ppo_cfg.clip_eps, value_coef=ppo_cfg.value_coef,
                                 entropy_coef=ppo_cfg.entropy_coef),
      observation_spec=env.observation_spec(),
      env_families=seeds_lib.env_families(config, manifest),
      num_families=config.families.num_train_families,
      axis_name=None if devices.env_count == 1 else sharding.AXIS,
      local_envs=config.num_envs // devices.env_count,
  )
  carry_shardings = Carry(train=devices.train, env=devices.envs, trace=devices.envs)
  # With seeds every spec gains the seed axis in front: [S, ...] and [S, N, ...].
  seed_axis = (sharding.SEED_AXIS,) if seeds > 1 else ()
  carry_specs = Carry(train=sharding.P(*seed_axis), env=sharding.P(*seed_axis, sharding.AXIS),
                      trace=sharding.P(*seed_axis, sharding.AXIS))
  # [T, N, ...] blocks of the rollout are split on their second axis.
  rollout_spec = sharding.P(*seed_axis, None, sharding.AXIS)
  per_seed = jax.vmap if seeds > 1 else lambda fn: fn  # each update vmapped over the seeds

  def on_devices(fn: Callable, in_specs, out_specs) -> Callable:
    """`fn` run on every device's block inside a shard_map; `fn` itself on one device."""
    if devices.count == 1:
      return fn
    # check_vma=False: MJX's solver is not written for shard_map's replication typing (its
    # while-loop conds mix per-device and replicated values). What that check would prove, that
    # the train state is the same on every device, `sharding.differing_copies` checks instead.
    return jax.shard_map(fn, mesh=devices.mesh, in_specs=in_specs, out_specs=out_specs,
                         check_vma=False)

  local_update = on_devices(
      per_seed(functools.partial(_local_update, parts)), (carry_specs,),
      (carry_specs, _LocalUpdate(traj=rollout_spec, early_ends=rollout_spec,
                                 advantages=rollout_spec, returns=rollout_spec,
                                 loss_metrics=sharding.P(*seed_axis))))
  update_metrics = per_seed(functools.partial(_update_metrics, parts))

  def update_step(carry: Carry, _) -> tuple[Carry, Metrics]:
    before = carry.train
    carry, out = local_update(carry)
    metrics = update_metrics(carry.train, out)
    if seeds > 1:
      carry = carry.replace(
          train=seeds_lib.halt_diverged(before, carry.train, metrics["guard/nonfinite"]))
    return carry, metrics

  def train_chunk(carry: Carry) -> tuple[Carry, Metrics]:
    """`updates_per_chunk` updates. Output metrics are stacked: leaves [K] ([K, S] with seeds)."""
    return jax.lax.scan(update_step, carry, None, config.updates_per_chunk)

  # Seeds start one by one (`seeds.map_init`), each as a single-seed run would.
  init = on_devices(seeds_lib.map_init(functools.partial(_init, parts), seeds),
                    ((sharding.P(*seed_axis), sharding.P(*seed_axis)),), carry_specs)
  collect = on_devices(per_seed(functools.partial(_collect, parts)), (carry_specs,),
                       (carry_specs, rollout_spec, rollout_spec))
  return Trainer(
      config=config,
      env=env,
      manifest=manifest,
      networks=parts.networks,
      optimizer=parts.optimizer,
      devices=devices,
      carry_shardings=carry_shardings,
      # With seeds, each seed's reset takes its own row of the [S, N] family draws.
      init=jax.jit(lambda key: init((key, parts.env_families)), out_shardings=carry_shardings),
      collect=collect,
      train_chunk=jax.jit(_traced_once(train_chunk), donate_argnums=0,
                          out_shardings=(carry_shardings, devices.replicated)),
  )


def _init(parts: _Parts, key_and_families: tuple[jax.Array, families.FamilyParams]) -> Carry:
  """(key, the envs' family draws) -> Carry: fresh networks, optimizer, normalizer and envs."""
  (key, env_families), config, env = key_and_families, parts.config, parts.env
  k_net, k_env, k_loop = jax.random.split(key, 3)  # env keys are split per env below
  spec = parts.observation_spec
  params = parts.networks.init(k_net, spec["policy"].shape[-1], spec["critic"].shape[-1])
  train = TrainState(
      params=params,
      opt_state=parts.optimizer.init(params),
      normalizer=normalizer.init(spec),
      key=k_loop,
      update_step=jnp.zeros((), jnp.int32),
      halted=jnp.zeros((), bool) if config.num_seeds > 1 else None,
  )
  k_env, k_stagger = jax.random.split(k_env)
  # Drawn for the whole batch, then this device's block: env i gets the same key on any number
  # of devices.
  mine = lambda x: sharding.local_rows(x, parts.axis_name)
  env_state = jax.vmap(env.reset)(mine(jax.random.split(k_env, config.num_envs)),
                                  jax.tree.map(mine, env_families))
  # Start every env at a random point of its time limit, so that timeouts (and the resets
  # that follow) are spread over time instead of arriving for the whole batch in one step.
  # Each env's first episode is therefore shorter, and its reported length counts the offset.
  start = mine(jax.random.randint(k_stagger, (config.num_envs,), 0, env.episode_steps))  # [n]
  env_state = env_state.replace(task=env_state.task.replace(step=start))
  trace = jax.vmap(functools.partial(
      audit.start_trace, num_steps=config.audit.early_end_steps))(env_state)
  return Carry(train=train, env=env_state, trace=trace)


def _normalize(parts: _Parts, norm: normalizer.NormalizerState,
               obs: env_state.Observation) -> env_state.Observation:
  if not parts.config.ppo.normalize_observations:
    return obs
  return normalizer.normalize(norm, obs)


# COLLECT TRAJECTORIES


def _rollout_step(parts: _Parts, carry: Carry, key: jax.Array
                  ) -> tuple[Carry, tuple[Transition, audit.Traces]]:
  """One vmapped env step under the current policy, with what the audit keeps of it.

  Carry: the train state (its normalizer absorbs this step's observations), the batched env
  state and the episode traces. Output: the `Transition` (leaves [N, ...]) and this step's
  early ends (`audit.step_early_ends`, leaves [S, ...]).
  """
  train, env_state, nets = carry.train, carry.env, parts.networks
  if parts.config.ppo.normalize_observations:
    train = train.replace(normalizer=normalizer.update(train.normalizer, env_state.obs,
                                                       parts.axis_name))
  obs = _normalize(parts, train.normalizer, env_state.obs)
  mean, std = nets.policy(train.params, obs["policy"])  # [n, A]
  if parts.axis_name is None:
    action = networks.sample(key, mean, std)  # [N, A]
  else:
    # The whole batch's noise, then this device's rows: the same as on one device.
    noise = jax.random.normal(key, (parts.config.num_envs,) + mean.shape[1:], mean.dtype)
    action = mean + std * sharding.local_rows(noise, parts.axis_name)  # [n, A]
  next_env, final = jax.vmap(parts.env.step_with_final)(env_state, action)
  final_obs = _normalize(parts, train.normalizer, next_env.final_obs)
  trace = jax.vmap(audit.record_step)(carry.trace, env_state, final)
  transition = Transition(
      policy_obs=obs["policy"],
      critic_obs=obs["critic"],
      action=action,
      log_prob=networks.log_prob(mean, std, action),  # [N]
      value=nets.value(train.params, obs["critic"]),  # [N]
      final_value=nets.value(train.params, final_obs["critic"]),  # [N]
      reward=next_env.reward,
      terminated=next_env.terminated,
      truncated=next_env.truncated,
      reset_reason=next_env.reset_reason,
      metrics=next_env.metrics,
      signals=next_env.signals,
      early_end=trace.early_end,
  )
  early_ends = audit.step_early_ends(
      trace, next_env.family.index, next_env.reset_reason, parts.config.audit.traces_per_update,
      first_env=sharding.first_row(parts.local_envs, parts.axis_name))
  return Carry(train=train, env=next_env, trace=trace), (transition, early_ends)


def _collect(parts: _Parts, carry: Carry) -> tuple[Carry, Transition, audit.Traces]:
  """`unroll_length` vmapped steps under the current policy; consumes one split of train.key.

  Returns:
    The carry after the rollout (normalizer updated, key advanced, env states and traces
    stepped), the stacked transitions (leaves [T, n, ...]: this device's envs) and each step's
    early ends (leaves [T, S, ...]).
  """
  config = parts.config
  key, k_rollout = jax.random.split(carry.train.key)
  carry = carry.replace(train=carry.train.replace(key=key))
  carry, (traj, early_ends) = jax.lax.scan(
      functools.partial(_rollout_step, parts), carry,
      jax.random.split(k_rollout, config.unroll_length))
  chex.assert_shape(traj.reward, (config.unroll_length, parts.local_envs))
  return carry, traj, early_ends


# UPDATE NETWORK


def _minibatch_step(
    parts: _Parts, carry: tuple[networks.ActorCriticParams, optax.OptState], batch: ppo.Batch
) -> tuple[tuple[networks.ActorCriticParams, optax.OptState], Metrics]:
  """One SGD step. Carry: (params, opt_state). Output: the loss metrics, scalars.

  On several devices `batch` is this device's share of the minibatch; the gradients and the
  loss metrics are averaged over devices first, so every device takes the same step.
  """
  ppo_cfg, optimizer = parts.config.ppo, parts.optimizer
  params, opt_state = carry
  grads, loss_metrics = jax.grad(ppo.ppo_loss, has_aux=True)(
      params, parts.networks, batch, parts.loss_config, parts.axis_name)
  grads, loss_metrics = sharding.mean((grads, loss_metrics), parts.axis_name)
  if ppo_cfg.desired_kl > 0:
    # rsl_rl's order: the KL this minibatch measures before its step (behaviour policy against
    # the current parameters) sets the rate of this same step.
    lr = ppo.adapt_learning_rate(
        ppo.get_learning_rate(opt_state), loss_metrics["loss/approx_kl"], ppo_cfg.desired_kl,
        min_lr=ppo_cfg.min_learning_rate, max_lr=ppo_cfg.max_learning_rate)
    opt_state = ppo.set_learning_rate(opt_state, lr)
  updates, opt_state = optimizer.update(grads, opt_state, params)
  params = optax.apply_updates(params, updates)
  loss_metrics["loss/grad_norm"] = optax.tree.norm(grads)  # before clipping
  return (params, opt_state), loss_metrics


def _epoch_step(
    parts: _Parts, batch: ppo.Batch, carry: tuple[networks.ActorCriticParams, optax.OptState],
    key: jax.Array
) -> tuple[tuple[networks.ActorCriticParams, optax.OptState], Metrics]:
  """One pass over `batch` (this device's samples) in shuffled minibatches. Output: loss
  metrics [M]."""
  config, axis = parts.config, parts.axis_name
  num_minibatches = config.ppo.num_minibatches
  if axis is not None:
    key = jax.random.fold_in(key, jax.lax.axis_index(axis))  # each device its own shuffle
  permutation = jax.random.permutation(key, parts.local_batch)  # [T*n]
  minibatches = jax.tree.map(
      lambda x: x[permutation].reshape((num_minibatches, -1) + x.shape[1:]), batch)
  carry, loss_metrics = jax.lax.scan(functools.partial(_minibatch_step, parts), carry, minibatches)
  samples = sharding.after(permutation.reshape(num_minibatches, -1), carry, axis)
  counts = sharding.total(audit.family_counts(
      samples, parts.local_envs, parts.num_families,
      first_env=sharding.first_row(parts.local_envs, axis)), axis)  # [M, F]
  loss_metrics["families/per_minibatch"] = jnp.sum(counts > 0, axis=1)  # [M]
  loss_metrics["sync/effective_families"] = audit.effective_families(counts)  # [M]
  return carry, loss_metrics


@flax.struct.dataclass
class _LocalUpdate:
  """What one update's shard_map hands to the metrics: this device's rollout block, with leaves
  [T, n, ...] (assembled to [T, N, ...] outside), and the loss metrics, the same everywhere."""

  traj: Transition
  early_ends: audit.Traces
  """Each step's first S early ends on this device, leaves [T, S, ...] ([T, D*S, ...] outside,
  in env order within each step)."""
  advantages: jax.Array
  returns: jax.Array
  loss_metrics: Metrics
  """[E, M] per epoch and minibatch, averaged over devices."""


def _local_update(parts: _Parts, carry: Carry) -> tuple[Carry, _LocalUpdate]:
  """COLLECT, ADVANTAGE and UPDATE of one PPO update, on this device's envs."""
  config, nets = parts.config, parts.networks
  # COLLECT TRAJECTORIES
  carry, traj, early_ends = _collect(parts, carry)
  train = carry.train
  key, k_epochs = jax.random.split(train.key)

  # CALCULATE ADVANTAGE
  last_obs = _normalize(parts, train.normalizer, carry.env.obs)
  bootstrap_value = nets.value(train.params, last_obs["critic"])  # [n]
  advantages, returns = ppo.compute_gae(
      rewards=traj.reward,
      values=traj.value,
      bootstrap_value=bootstrap_value,
      terminated=traj.terminated,
      truncated=traj.truncated,
      truncation_values=traj.final_value,
      gamma=config.ppo.gamma,
      gae_lambda=config.ppo.gae_lambda,
  )  # [T, n] each

  # UPDATE NETWORK
  flat = lambda x: x.reshape((parts.local_batch,) + x.shape[2:])  # [T, n, ...] -> [T*n, ...]
  batch = ppo.Batch(
      policy_obs=flat(traj.policy_obs),
      critic_obs=flat(traj.critic_obs),
      actions=flat(traj.action),
      log_probs=flat(traj.log_prob),
      values=flat(traj.value),
      advantages=flat(advantages),
      returns=flat(returns),
  )
  (params, opt_state), loss_metrics = jax.lax.scan(
      functools.partial(_epoch_step, parts, batch),
      (train.params, train.opt_state),
      jax.random.split(k_epochs, config.ppo.num_epochs),
  )
  train = train.replace(
      params=params, opt_state=opt_state, key=key, update_step=train.update_step + 1)
  traj, early_ends, advantages, returns = sharding.after(  # reduced outside, after the epochs
      (traj, early_ends, advantages, returns), params, parts.axis_name)
  return carry.replace(train=train), _LocalUpdate(
      traj=traj, early_ends=early_ends, advantages=advantages, returns=returns,
      loss_metrics=loss_metrics)


def _traced_once(fn: Callable) -> Callable:
  """Turns an accidental recompile of `fn` (a shape or dtype drifting between chunks) into an
  error instead of a silent minute of compiling per chunk.

  The count belongs to this one function object. (`chex.assert_max_traces` counts by definition
  site, so a second trainer built from the same call site, as in a sweep or a resumed run in one
  process, would trip it.)
  """
  traces = 0

  @functools.wraps(fn)
  def guarded(*args):
    nonlocal traces
    traces += 1
    if traces > 1:
      raise AssertionError(
          f"{fn.__name__} was traced {traces} times; its input shapes or dtypes changed between "
          "calls, which would recompile every chunk")
    return fn(*args)

  return guarded


def _update_metrics(parts: _Parts, train: TrainState, out: _LocalUpdate) -> Metrics:
  """Reduces one update to its metrics: scalars, the audits' arrays and `guard/nonfinite`.

  Outside the shard_map: the rollout's [T, N] arrays are the whole batch, split over the devices,
  and every reduction below is over all of it.

  Args:
    parts: the trainer's static pieces.
    train: the train state after the update.
    out: the update's [T, N] rollout, each step's early ends ([T, S, ...]), advantages and
      returns (float32 [T, N]) and the [E, M] losses of every epoch and minibatch.
  """
  traj, early_ends, advantages, returns = out.traj, out.early_ends, out.advantages, out.returns
  loss_metrics = dict(out.loss_metrics)
  nonfinite = guard.nonfinite_quantities(loss_metrics, train)  # [Q], before any reduction
  fewest_families = jnp.min(loss_metrics.pop("families/per_minibatch"))  # over [E, M]
  fewest_effective = jnp.min(loss_metrics.pop("sync/effective_families"))  # over [E, M]
  ends = traj.terminated | traj.truncated  # [T, N]
  num_ends = jnp.sum(ends)
  metrics = {key: jnp.mean(value) for key, value in loss_metrics.items()}
  metrics.update({key: jnp.mean(value) for key, value in traj.metrics.items()
                  if key.startswith(("reward/", "tracking/"))})
  metrics["reward/total"] = jnp.mean(traj.reward)
  metrics["episode/count"] = num_ends.astype(jnp.float32)
  # Sums, not means: the host divides by episode/count pooled over a chunk, and an update in
  # which no episode ended contributes nothing instead of a 0/0.
  metrics["episode/return_sum"] = jnp.sum(traj.metrics["episode/return"])
  metrics["episode/length_sum"] = jnp.sum(traj.metrics["episode/length"])
  for code in endings.ENDINGS:
    metrics[f"reset/{code.label}"] = jnp.sum(traj.reset_reason == code).astype(jnp.float32)
  metrics["advantage/mean"] = jnp.mean(advantages)
  metrics["advantage/std"] = jnp.std(advantages)
  metrics["value/mean"] = jnp.mean(traj.value)
  metrics["loss/explained_variance"] = ppo.explained_variance(traj.value, returns)
  metrics["families/min_per_minibatch"] = fewest_families.astype(jnp.float32)
  metrics["sync/min_effective_families"] = fewest_effective
  metrics.update(audit.rollout_metrics(
      traj.signals, traj.early_end, traj.metrics, traj.reset_reason, ends, early_ends,
      num_families=parts.num_families, audit=parts.config.audit,
      foot_names=parts.env.foot_names, num_traces=parts.config.audit.traces_per_update))
  metrics["policy/std_mean"] = jnp.mean(parts.networks.policy(train.params,
                                                             traj.policy_obs[0, :1])[1])
  metrics["ppo/learning_rate"] = ppo.get_learning_rate(train.opt_state)
  if "terrain/level" in traj.metrics:
    metrics.update(terrain_lib.curriculum_metrics(parts.config.terrain, traj.metrics))
  metrics["guard/nonfinite"] = nonfinite
  return metrics


def update_count(train: TrainState) -> int:
  """PPO updates done (every seed of a run has done the same number)."""
  return int(np.asarray(train.update_step).reshape(-1)[0])


def env_steps(train: TrainState, config: config_lib.TrainConfig) -> int:
  """Exact env steps each seed consumed so far (a Python int: no int32 overflow on GPUs)."""
  return update_count(train) * config.batch_size
