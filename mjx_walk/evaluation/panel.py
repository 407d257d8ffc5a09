"""Deterministic evaluation of a policy on the held-out panel, and its per-stratum metrics.

The panel is the manifest's evaluation families: `families_per_stratum` families for each stratum
(`flat`, `slope`, `push`, `payload`, `friction`), `envs_per_family` envs each, env j in family
j % E. Every env plays exactly one episode of `panel.episode_seconds` with the policy's mean action
(`policy.mean_action`, the same function `Policy.act` runs) and noise-free observations, from
reset keys fixed by the panel seed, so the same parameters give the same numbers. One jitted pass
collects everything; its argument is the policy's parameters (`policy.PolicyParams`), so one
compile serves every policy with the same networks. `summarize` reduces it per stratum on the
host.

The same pass also records `EpisodeTraces` of one env per stratum (the first env of the stratum's
first family): its qpos and command at every control step and how its episode ended, enough to
render a video of it (`mjx_walk.analysis.videos`). They are a few hundred kilobytes and cost no
extra compile: `Evaluator.__call__` and `Evaluator.run_with_traces` run the same jitted function.

Per stratum:
  success_rate     share of episodes that did not terminate (no fall, body contact, joint limit or
                   non-finite state) AND whose mean tracking errors are below
                   `panel.success_lin_vel_error` and `panel.success_yaw_rate_error`
  fall_rate        share of episodes that ended in any termination (the breakdown is in `reset`)
  episode_length   mean control steps per episode (a full episode is episode_seconds * control_hz)
  lin_vel_error    mean over episodes of the per-step mean |v_xy - command_xy|, m/s
  yaw_rate_error   mean over episodes of the per-step mean |yaw rate - command|, rad/s
  return           mean episode return
  body_contact_rate  mean over episodes of the share of their steps on which the trunk or a
                   thigh touched the ground; with `env.limb_contact_ends` off, the thighs'
                   touches that the episode survived (legs brushing a stair's edge)
  reset            how many episodes ended for each reset reason (`timeout` = survived)
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.learn import networks
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.run import spread as spread_lib
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state
from mjx_walk.sim import families

PANELS = ("heldout",)
"""Panels a checkpoint can be evaluated on: the run's held-out families from its manifest."""


@flax.struct.dataclass
class EpisodeStats:
  """One evaluation episode per env, accumulated step by step. Leaves [N] once batched."""

  alive: jax.Array
  """bool: the episode has not ended yet."""
  length: jax.Array
  """int32: control steps taken, including the one that ended the episode."""
  reason: jax.Array
  """int32: `ResetReason` that ended the episode (NONE while alive)."""
  episode_return: jax.Array
  lin_vel_error_sum: jax.Array
  """Sum over the episode's steps of the xy velocity error, m/s."""
  yaw_rate_error_sum: jax.Array
  body_contact_steps: jax.Array
  """int32: the episode's steps on which the trunk or a thigh touched the ground."""


def empty_stats(num_envs: int) -> EpisodeStats:
  zeros = jnp.zeros((num_envs,))
  return EpisodeStats(
      alive=jnp.ones((num_envs,), bool),
      length=jnp.zeros((num_envs,), jnp.int32),
      reason=jnp.zeros((num_envs,), jnp.int32),
      episode_return=zeros,
      lin_vel_error_sum=zeros,
      yaw_rate_error_sum=zeros,
      body_contact_steps=jnp.zeros((num_envs,), jnp.int32),
  )


def accumulate(stats: EpisodeStats, state: env_state.EnvState) -> EpisodeStats:
  """Adds one step to every episode still alive; the step that ends an episode counts.

  Args:
    stats: leaves [N].
    state: the batched env state returned by the step, leaves [N, ...].
  """
  return accumulate_step(stats, state.reset_reason, state.reward,
                         state.metrics["tracking/lin_vel_error"],
                         state.metrics["tracking/yaw_rate_error"], state.signals.body_contact)


def accumulate_step(stats: EpisodeStats, reason: jax.Array, reward: jax.Array,
                    lin_vel_error: jax.Array, yaw_rate_error: jax.Array,
                    body_contact: jax.Array) -> EpisodeStats:
  """`accumulate` from one step's figures, each [N]: its `ResetReason` (NONE while the episode
  goes on), reward, tracking errors and whether the trunk or a thigh touched the ground. Works
  on NumPy arrays as well as JAX ones."""
  xp = np if isinstance(reason, np.ndarray) else jnp
  live = stats.alive
  done = reason != endings.ResetReason.NONE  # [N]
  return EpisodeStats(
      alive=live & ~done,
      length=stats.length + live.astype(xp.int32),
      reason=xp.where(live & done, reason, stats.reason),
      episode_return=stats.episode_return + xp.where(live, reward, 0.0),
      lin_vel_error_sum=stats.lin_vel_error_sum + xp.where(live, lin_vel_error, 0.0),
      yaw_rate_error_sum=stats.yaw_rate_error_sum + xp.where(live, yaw_rate_error, 0.0),
      body_contact_steps=stats.body_contact_steps + (live & body_contact).astype(xp.int32),
  )


@flax.struct.dataclass
class EpisodeTraces:
  """What one env per stratum did in an evaluation, for replay. Host NumPy after `device_get`.

  S is the number of strata, T = the panel's episode steps. Row s follows env `env_index[s]`, the
  first env of stratum s. `qpos[s, t]` is the state the policy acted on at control step t
  (t = 0 is the reset state), so steps 0 .. length[s] - 1 are the episode; the state the episode
  ended in is not kept (the env's auto-reset replaces it), and rows past the end belong to the
  next episode, which is not the evaluated one.
  """

  env_index: jax.Array
  """int32 [S]: the traced env of each stratum, in panel order."""
  family_index: jax.Array
  """int32 [S]: its evaluation family (env_index % E)."""
  qpos: jax.Array
  """float32 [S, T, nq]: the state at the start of each control step."""
  command: jax.Array
  """float32 [S, T, 3]: (vx m/s, vy m/s, yaw rate rad/s) the policy was given at each step."""
  length: jax.Array
  """int32 [S]: control steps in the episode, including the one that ended it."""
  reason: jax.Array
  """int32 [S]: the `ResetReason` that ended it."""
  episode_return: jax.Array
  """float32 [S]."""
  gravity: jax.Array
  """float32 [S, 3]: the family's world-frame gravity (tilted on a slope), m/s^2."""


def trace_env_indices(panel: config_lib.PanelConfig) -> np.ndarray:
  """The env traced in each stratum: the first env of the stratum's first family. int [S].

  Env j is in evaluation family j % E and families are stratum-major, so the first family of
  stratum s is family s * families_per_stratum, and the env with that same index is its first env.
  """
  return np.arange(len(panel.strata)) * panel.families_per_stratum


def panel_config(config: config_lib.TrainConfig) -> config_lib.TrainConfig:
  """The config the panel's env runs: the panel's episode length and noise-free observations."""
  env = dataclasses.replace(
      config.env, episode_seconds=config.panel.episode_seconds, obs_noise_scale=0.0)
  return dataclasses.replace(config, env=env)


def enlarged(config: config_lib.TrainConfig, envs_per_family: int) -> config_lib.TrainConfig:
  """`config` with its panel playing `envs_per_family` envs of each evaluation family: the same
  families, from more first states (`panel_envs`)."""
  return dataclasses.replace(config, panel=dataclasses.replace(
      config.panel, envs_per_family=envs_per_family))


def panel_envs(config: config_lib.TrainConfig, manifest: families.Manifest,
               num_envs: int | None = None) -> tuple[families.FamilyParams, jax.Array]:
  """Each panel env's family draw (env j in evaluation family j % E) and reset key, [N] each;
  N is the panel's `num_envs` unless given (the first N envs of a panel of that size)."""
  num_envs = config.panel.num_envs if num_envs is None else num_envs
  family_params = families.for_envs(manifest.eval_params(), num_envs)  # leaves [N, ...]
  return family_params, jax.random.split(jax.random.key(config.panel.seed), num_envs)


@dataclasses.dataclass(frozen=True)
class Evaluator:
  """The panel's env and its jitted one-pass evaluation."""

  config: config_lib.TrainConfig
  manifest: families.Manifest
  networks: networks.ActorCritic
  """The networks the evaluated policies have; `config.ppo.normalize_observations` says whether
  they normalize their observations."""
  env: env_lib.LocomotionEnv
  run: Callable[[policy_lib.PolicyParams], tuple[EpisodeStats, EpisodeTraces]]
  """Jitted policy parameters -> (final EpisodeStats with leaves [panel.num_envs], the
  EpisodeTraces of one env per stratum)."""
  run_seeds: Callable[[policy_lib.PolicyParams], tuple[EpisodeStats, EpisodeTraces]]
  """`run` vmapped over a leading seed axis of the parameters, jitted: the panel of every
  training seed in one pass (compiled on its first call only)."""

  def __call__(self, params: policy_lib.PolicyParams) -> dict[str, Any]:
    """Evaluates and summarizes: the per-stratum metrics as plain Python numbers."""
    return self.run_with_traces(params)[0]

  def run_with_traces(self, params: policy_lib.PolicyParams
                      ) -> tuple[dict[str, Any], EpisodeTraces]:
    """Evaluates once: (the per-stratum metrics, one traced episode per stratum as NumPy).

    The parameters go in as host arrays, wherever they come from (a checkpoint, the trainer's
    mesh, NumPy): jit compiles a program per input placement, and the panel's is one program
    for every caller."""
    stats, traces = jax.device_get(self.run(jax.device_get(params)))
    return summarize(stats, self.manifest, self.config), traces

  def run_seeds_with_traces(self, params: policy_lib.PolicyParams
                            ) -> tuple[dict[str, Any], EpisodeTraces]:
    """Evaluates S training seeds at once (`params` with a leading [S] axis).

    Returns:
      The result: `panel_hash`, `num_seeds`, `strata` (the mean over seeds, resets summed),
      `seeds` (each seed's own `strata`, in seed order), `spread` (per stratum, the mean, the
      interquartile mean and the 95% bootstrap interval over seeds of success, falls and
      tracking errors: `mjx_walk.run.spread`) and `video_seed`; and the traced episodes of
      `video_seed`, the seed `policy.best_seed` picks.
    """
    stats, traces = jax.device_get(self.run_seeds(jax.device_get(params)))
    num_seeds = np.asarray(stats.length).shape[0]
    # The units of the spread are the seeds: seed k's envs are stats[k].
    seed_stats = [jax.tree.map(lambda x, k=k: x[k], stats) for k in range(num_seeds)]
    per_seed = [summarize(one, self.manifest, self.config)["strata"] for one in seed_stats]
    strata, spread = spread_lib.across_seeds(per_seed)
    best = policy_lib.best_seed(per_seed)
    result = {"panel_hash": self.manifest.panel_hash, "num_seeds": num_seeds, "strata": strata,
              "seeds": per_seed, "spread": spread, "video_seed": best}
    return result, jax.tree.map(lambda x: x[best], traces)


def make_evaluator(config: config_lib.TrainConfig, manifest: families.Manifest,
                   nets: networks.ActorCritic) -> Evaluator:
  """Builds the panel's env and the jitted evaluation of a policy on it.

  Args:
    config: the run configuration (its `panel` section defines the panel, and
      `ppo.normalize_observations` whether the policy normalises its observations).
    manifest: the run's manifest; its evaluation families are the panel.
    nets: the actor-critic; only the actor's mean is used.
  """
  env = env_lib.LocomotionEnv(panel_config(config))
  num_envs = config.panel.num_envs
  family_params, reset_keys = panel_envs(config, manifest)
  batched_step = jax.vmap(env.step)
  traced = trace_env_indices(config.panel)  # [S]

  def run(params: policy_lib.PolicyParams) -> tuple[EpisodeStats, EpisodeTraces]:

    def step(carry: tuple[env_state.EnvState, EpisodeStats], _):
      """Carry: (batched env state, episode stats). Output: the traced envs' qpos and command."""
      state, stats = carry
      seen = (state.data.qpos[traced], state.task.command[traced])  # [S, nq], [S, 3]
      action = policy_lib.mean_action(nets, config.ppo.normalize_observations, params,
                                      state.obs["policy"])  # [N, A]
      state = batched_step(state, action)
      return (state, accumulate(stats, state)), seen

    state = jax.vmap(env.reset)(reset_keys, family_params)
    (_, stats), (qpos, command) = jax.lax.scan(
        step, (state, empty_stats(num_envs)), None, env.episode_steps)  # [T, S, nq], [T, S, 3]
    traces = EpisodeTraces(
        env_index=jnp.asarray(traced, jnp.int32),
        family_index=jnp.asarray(traced % len(manifest.eval_families), jnp.int32),
        qpos=jnp.swapaxes(qpos, 0, 1),  # [S, T, nq]
        command=jnp.swapaxes(command, 0, 1),  # [S, T, 3]
        length=stats.length[traced],
        reason=stats.reason[traced],
        episode_return=stats.episode_return[traced],
        gravity=family_params.gravity[traced],  # [S, 3]
    )
    return stats, traces

  return Evaluator(config=config, manifest=manifest, networks=nets, env=env, run=jax.jit(run),
                   run_seeds=jax.jit(jax.vmap(run)))


def summarize(stats: EpisodeStats, manifest: families.Manifest,
              config: config_lib.TrainConfig) -> dict[str, Any]:
  """Per-stratum metrics from one episode per env (host-side NumPy).

  Args:
    stats: final statistics, leaves [N] with N = panel.num_envs; env j is in evaluation family
      j % E.
    manifest: gives each evaluation family's stratum.
    config: success thresholds.

  Returns:
    {"panel_hash": str, "strata": {stratum: {metric: value, "reset": {reason: count}}}}.
  """
  stats = jax.tree.map(np.asarray, stats)
  episodes = episode_figures(stats, config)
  strata = env_strata(manifest, stats.length.shape[0])
  result = {}
  for stratum in dict.fromkeys(manifest.eval_strata):
    mine = strata == stratum
    result[stratum] = {
        "num_envs": int(mine.sum()),
        **{key: float(values[mine].mean()) for key, values in episodes.items()},
        "reset": {code.label: int((stats.reason[mine] == code).sum())
                  for code in endings.ENDINGS},
    }
  return {"panel_hash": manifest.panel_hash, "strata": result}


def env_strata(manifest: families.Manifest, num_envs: int) -> np.ndarray:
  """str [N]: the stratum of each panel env (env j is in evaluation family j % E)."""
  return np.array(manifest.eval_strata)[np.arange(num_envs) % len(manifest.eval_families)]


def select_strata(manifest: families.Manifest, strata: list[str] | None) -> list[str]:
  """The panel strata `strata` names, in the panel's order; every one for None.

  Raises:
    ValueError: `strata` is empty or names a stratum the run's panel does not hold.
  """
  held = list(dict.fromkeys(manifest.eval_strata))
  if strata is None:
    return held
  if not strata or any(name not in held for name in strata):
    raise ValueError(f"strata={','.join(strata)!r} is invalid: accepted are one or more of the "
                     f"run's panel strata, comma-separated: {', '.join(held)}")
  return [name for name in held if name in strata]


def episode_figures(stats: EpisodeStats, config: config_lib.TrainConfig) -> dict[str, np.ndarray]:
  """Each episode's own figures, [N] each, whose mean over a stratum's episodes is the
  stratum's figure of the same name in `summarize` (success and falls as 1 or 0).

  Args:
    stats: final statistics, NumPy leaves [N].
    config: success thresholds (`panel`).
  """
  panel = config.panel
  steps = np.maximum(stats.length, 1)
  lin_error = stats.lin_vel_error_sum / steps  # [N]
  yaw_error = stats.yaw_rate_error_sum / steps  # [N]
  # An env still alive after the scan cannot happen (the panel's episode ends on a timeout), but
  # would count as survived rather than fallen.
  survived = (stats.reason == endings.ResetReason.TIMEOUT) | (
      stats.reason == endings.ResetReason.NONE)
  success = survived & (lin_error < panel.success_lin_vel_error) & (
      yaw_error < panel.success_yaw_rate_error)
  figures = {"success_rate": success, "fall_rate": ~survived, "episode_length": stats.length,
             "lin_vel_error": lin_error, "yaw_rate_error": yaw_error,
             "return": stats.episode_return, "body_contact_rate": stats.body_contact_steps / steps}
  return {key: values.astype(np.float64) if values.dtype == bool else values
          for key, values in figures.items()}


def evaluate_policy(pol: policy_lib.Policy | policy_lib.SeedPolicies,
                    config: config_lib.TrainConfig, manifest: families.Manifest,
                    evaluator: Evaluator | None = None
                    ) -> tuple[dict[str, Any], EpisodeTraces]:
  """Evaluates a loaded policy, or every seed's policy of a checkpoint, on a panel.

  Args:
    pol: the policy (`policy.load`), or every training seed's (`policy.load_all`), evaluated in
      one pass (`Evaluator.run_seeds_with_traces`); it acts as it was trained (its own networks
      and its own `ppo.normalize_observations`).
    config, manifest: define the panel and its env (not necessarily the policy's own run).
    evaluator: reused when given (one compile for several policies with the same networks and
      the same normalization).

  Returns:
    (the eval record at the policy's step, not written anywhere; one traced episode per stratum,
    of the record's `video_seed` for every seed's). The record of one seed of a multi-seed run
    says which (`seed`); that of every seed's has `num_seeds`, `seeds`, `spread` and
    `video_seed`.

  Raises:
    ValueError: the policy observes something other than the panel's env gives, or `evaluator`
      acts with other networks or another normalization than the policy.
  """
  normalize = pol.config.ppo.normalize_observations
  if evaluator is None:
    config = dataclasses.replace(
        config, ppo=dataclasses.replace(config.ppo, normalize_observations=normalize))
    evaluator = make_evaluator(config, manifest, pol.networks)
  elif not _acts_as(evaluator, pol):
    raise ValueError(f"{pol.run_dir}: the evaluator was built for other networks or another "
                     "ppo.normalize_observations than this policy's")
  spec = evaluator.env.observation_spec()["policy"]
  if pol.observation_spec.shape != spec.shape:
    raise ValueError(
        f"{pol.run_dir} observes {pol.observation_spec.shape}, but the panel's env gives "
        f"{spec.shape}; the policy cannot be evaluated on this panel")
  if isinstance(pol, policy_lib.SeedPolicies):
    summary, traces = evaluator.run_seeds_with_traces(pol.params)
  else:
    summary, traces = evaluator.run_with_traces(pol.params)
    if pol.named_seed is not None:
      summary = {"seed": pol.named_seed, **summary}
  record = ledger.eval_record(summary, update=pol.step,
                              env_steps=pol.step * pol.config.batch_size, wall_seconds=None)
  return record, traces


def evaluate_checkpoint(run_dir: str, step: int | None, compare: str | None = None,
                        seed: int | str | None = None
                        ) -> tuple[dict[str, Any], dict[str, Any] | None, Any]:
  """Evaluates a run's checkpoint (and optionally another run's policy) on the run's panel.

  Which policies: with `seed` (`policy.choose_seed`: an index or `best`), that seed's; without,
  the run's one policy, or every seed's of a multi-seed run in one pass. The other run's
  (`compare`, its newest checkpoint) is its one policy, or every seed's of a multi-seed run.

  Everything the evaluation needs is checked first: both policies are loaded and verified, the
  seed must name one of the run, and the other one must observe what this panel's env gives.
  Only then is anything evaluated or written.

  Returns:
    (the run's eval record, the other run's eval record or None, the path of the first in
    <run_dir>/eval/: `RunFolder.write_eval` keeps a record already saved for that step, and
    writes one seed's of a multi-seed run apart, as eval/<step>_seed<k>.json).

  Raises:
    checkpoint.CheckpointError: either checkpoint is missing or fails verification.
    ValueError: `seed` names no seed of the run, or the other run's policy observes another
      size than this panel's env gives. Nothing is evaluated or written then.
  """
  mine = _chosen_policies(run_dir, step, seed)
  evaluator = make_evaluator(mine.config, mine.manifest, mine.networks)  # nothing compiles yet
  theirs = _compared_policy(compare, evaluator) if compare else None
  record, _ = evaluate_policy(mine, mine.config, mine.manifest, evaluator)
  path = run_folder.RunFolder(mine.run_dir).write_eval(record)
  other = None
  if theirs is not None:
    other, _ = evaluate_policy(theirs, mine.config, mine.manifest,
                               evaluator if _acts_as(evaluator, theirs) else None)
  return record, other, path


def _chosen_policies(path: str, step: int | None, seed: int | str | None
                     ) -> policy_lib.Policy | policy_lib.SeedPolicies:
  """`seed`'s policy (`policy.load`); without a seed, the run's one policy, or every seed's of a
  multi-seed run (`policy.load_all`)."""
  if seed is not None:
    return policy_lib.load(path, step, seed)
  everything = policy_lib.load_all(path, step)
  return everything if everything.num_seeds > 1 else everything.policy(0)


def _compared_policy(compare: str, evaluator: Evaluator
                     ) -> policy_lib.Policy | policy_lib.SeedPolicies:
  """The policy of `--compare` (every seed's of a multi-seed run), loaded, verified, and checked
  to observe what the panel gives.

  Raises:
    checkpoint.CheckpointError: it has no checkpoint, or its newest fails verification.
    ValueError: its observation is another size than the panel env's.
  """
  try:
    theirs = _chosen_policies(compare, None, None)
  except checkpoint.CheckpointError as error:
    raise checkpoint.CheckpointError(f"--compare={compare}: {error}") from None
  spec = evaluator.env.observation_spec()["policy"]
  if theirs.observation_spec.shape != spec.shape:
    raise ValueError(
        f"--compare={compare}: its policy observes {theirs.observation_spec.shape}, but this "
        f"run's panel env gives {spec.shape}; only a policy that observes {spec.shape} can be "
        "compared on this panel")
  return theirs


def _acts_as(evaluator: Evaluator, pol: policy_lib.Policy | policy_lib.SeedPolicies) -> bool:
  """Whether `evaluator` runs `pol` as it was trained: same networks, same normalization."""
  return (evaluator.networks == pol.networks and evaluator.config.ppo.normalize_observations
          == pol.config.ppo.normalize_observations)
