"""A trained policy for use outside training: (normalizer, actor) from a run folder or checkpoint,
and the one definition of what a policy does with an observation.

  pol = policy.load("runs/<run>")                     # newest intact checkpoint
  pol = policy.load("runs/<run>/checkpoints/1200")    # one checkpoint
  pol = policy.load("runs/<run>", seed="best")        # one seed of a multi-seed run
  action = pol.act(obs["policy"])                     # jitted, [..., O] -> [..., A]
  every = policy.load_all("runs/<run>")               # every seed's, params [S, ...]

A run of several training seeds holds every seed's policy; `load` takes one, by index or `best`
(`choose_seed` says how), and a multi-seed run without a seed is refused. `load_all` reads every
seed's at once (`SeedPolicies`), for evaluating them in one pass; `SeedPolicies.policy` is one.

Only the checkpoint's `policy` item (actor parameters and observation normalizer) and its config
are read, and verified against the checksums saved with them; no trainer, optimizer or env batch
is built. The action is the policy's mean (`mean_action`: normalise if the run does, then the
actor's mean), raw: the env clips it to `env.action_clip` and scales it by the robot's action scale
around the standing pose, exactly as in training. The held-out panel
(`mjx_walk.evaluation.panel`) acts with the same function.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import flax.struct
import jax
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import run_folder
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families


@flax.struct.dataclass
class PolicyParams:
  """What a policy acts with: a pytree, passed to jitted functions as a traced argument.

  The checkpoint's `policy` item holds the same two trees under the same names.
  """

  actor: Any
  """The actor's variables, `{"params": {"mean": ..., "log_std": [A]}}`."""
  normalizer: normalizer.NormalizerState
  """Statistics of the whole observation ({"policy": [O], "critic": [P]}); only "policy" is
  read."""


def action_distribution(nets: networks.ActorCritic, normalize: bool, params: PolicyParams,
                        policy_obs: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The policy's Gaussian over actions: normalise the observation if the run does, then the
  actor.

  Args:
    nets: the actor-critic (static); only the actor is applied.
    normalize: the run's `ppo.normalize_observations` (static).
    params: the actor's parameters and the observation statistics.
    policy_obs: float32 [..., O] policy observations.

  Returns:
    (mean, std): float32 [..., A] each, raw actions (the env clips and scales them).
  """
  if normalize:
    stats = params.normalizer
    policy_stats = normalizer.NormalizerState(
        mean=stats.mean["policy"], var=stats.var["policy"], count=stats.count)
    policy_obs = normalizer.normalize(policy_stats, policy_obs)  # [..., O]
  return nets.policy(networks.ActorCriticParams(actor=params.actor, critic=None), policy_obs)


def mean_action(nets: networks.ActorCritic, normalize: bool, params: PolicyParams,
                policy_obs: jax.Array) -> jax.Array:
  """The policy's deterministic action, the mean of `action_distribution`: float32 [..., A],
  raw (the env clips and scales it)."""
  return action_distribution(nets, normalize, params, policy_obs)[0]


_jitted_mean_action = jax.jit(mean_action, static_argnums=(0, 1))
"""One compile per (networks, normalize, observation shape); the parameters are traced."""


@dataclasses.dataclass(frozen=True)
class Policy:
  """A loaded policy."""

  params: PolicyParams
  """The actor's parameters and the observation statistics, as saved."""
  observation_spec: jax.ShapeDtypeStruct
  """One env's policy observation, [O]."""
  networks: networks.ActorCritic
  config: config_lib.TrainConfig
  manifest: families.Manifest
  step: int
  run_dir: pathlib.Path
  seed: int = 0
  """Which training seed of the run this is (0 for a single-seed run)."""

  @property
  def named_seed(self) -> int | None:
    """The seed as the files and records of one policy name it: `seed` in a run of several
    training seeds, None in a single-seed run (whose files and records name no seed)."""
    return self.seed if self.config.num_seeds > 1 else None

  def act(self, policy_obs: jax.Array) -> jax.Array:
    """Jitted `mean_action`: float32 [..., O] policy observations -> float32 [..., A]."""
    return _jitted_mean_action(self.networks, self.config.ppo.normalize_observations,
                               self.params, policy_obs)


@dataclasses.dataclass(frozen=True)
class SeedPolicies:
  """Every training seed's policy of one checkpoint, read at once (`load_all`): the fields of
  `Policy`, with each leaf of `params` stacked over the seeds."""

  params: PolicyParams
  """Every seed's parameters, leaves [S, ...] with S = `config.num_seeds` (1 for a single-seed
  run); seed k's at [k]."""
  observation_spec: jax.ShapeDtypeStruct
  networks: networks.ActorCritic
  config: config_lib.TrainConfig
  manifest: families.Manifest
  step: int
  run_dir: pathlib.Path

  @property
  def num_seeds(self) -> int:
    return self.config.num_seeds

  def policy(self, seed: int) -> Policy:
    """Seed `seed`'s policy (an index 0 to S - 1; `choose_seed` turns `best` into one)."""
    return Policy(params=jax.tree.map(lambda leaf: leaf[seed], self.params),
                  observation_spec=self.observation_spec, networks=self.networks,
                  config=self.config, manifest=self.manifest, step=self.step,
                  run_dir=self.run_dir, seed=seed)


def resolve(path: pathlib.Path | str, step: int | None = None) -> tuple[pathlib.Path, int]:
  """(run folder, step) for a run folder (newest step unless given) or a checkpoint folder.

  Raises:
    checkpoint.CheckpointError: naming the path, when it is neither, or has no checkpoint.
  """
  path = pathlib.Path(path).resolve()
  if path.parent.name == run_folder.CHECKPOINTS and path.name.isdigit():
    run_dir, found = path.parent.parent, int(path.name)
    if step is not None and step != found:
      raise checkpoint.CheckpointError(f"{path} is step {found}, not the requested step {step}")
    return run_dir, found
  if (path / run_folder.CHECKPOINTS).is_dir():
    saved = checkpoint.steps(path)
    if not saved:
      raise checkpoint.CheckpointError(f"no checkpoint in {path / run_folder.CHECKPOINTS}")
    if step is None:
      return path, saved[-1]
    if step not in saved:
      raise checkpoint.CheckpointError(
          f"no checkpoint at step {step} in {path / run_folder.CHECKPOINTS}; saved steps: {saved}")
    return path, step
  raise checkpoint.CheckpointError(
      f"{path} is neither a run folder (with {run_folder.CHECKPOINTS}/) nor a checkpoint folder "
      f"(<run>/{run_folder.CHECKPOINTS}/<step>)")


BEST = "best"
"""The seed argument that picks the best seed by the held-out panel (`choose_seed`)."""


def best_seed(per_seed: list[dict[str, Any]]) -> int:
  """The rule that picks one seed of a multi-seed evaluation (`best`, and the evaluation's
  videos): the highest `checkpoint.held_out_score` of its strata (the mean success over the
  strata, less falls to break ties), the lowest index among equals.

  Args:
    per_seed: each seed's `strata` of one evaluation record (`record["seeds"]`).
  """
  scores = [checkpoint.held_out_score({"strata": strata}) for strata in per_seed]
  return int(np.argmax(scores))


def choose_seed(run_dir: pathlib.Path, config: config_lib.TrainConfig, step: int,
                seed: int | str | None) -> int:
  """The training seed `seed` names in a run of `config.num_seeds` seeds, at checkpoint `step`.

  A single-seed run needs no seed (None or 0). A run of S > 1 seeds needs one: an index 0 to
  S - 1, or `best`, the `best_seed` of the run's latest held-out evaluation at or before `step`
  (the ledger's `eval` records; each checkpoint saved with an evaluation has one at its step).

  Raises:
    ValueError: a seed out of range or not a number, a multi-seed run without a seed, or `best`
      with no evaluation to choose by; naming the value and what is accepted.
  """
  num_seeds = config.num_seeds
  accepted = (f"0 to {num_seeds - 1}, or {BEST!r}" if num_seeds > 1 else
              "0, or none (it trained one seed)")
  if seed is None:
    if num_seeds == 1:
      return 0
    raise ValueError(f"{run_dir} trained {num_seeds} seeds; give the seed to use: {accepted}")
  if seed == BEST:
    if num_seeds == 1:
      return 0
    evaluations = [r for r in ledger.of_kind(ledger.read_run(run_dir), "eval")
                   if r["update"] <= step and "seeds" in r]
    if not evaluations:
      raise ValueError(f"seed={BEST!r}: {run_dir} has no held-out evaluation at or before update "
                       f"{step} to choose by; give a seed index, 0 to {num_seeds - 1}")
    return best_seed(evaluations[-1]["seeds"])
  index = int(seed) if isinstance(seed, str) and seed.isdigit() else seed
  if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < num_seeds:
    raise ValueError(f"seed={seed!r} is invalid for {run_dir}: accepted are {accepted}")
  return index


def load(path: pathlib.Path | str, step: int | None = None,
         seed: int | str | None = None) -> Policy:
  """Loads the policy of a run folder or a checkpoint folder.

  Args:
    path: `runs/<run>` or `runs/<run>/checkpoints/<step>`.
    step: with a run folder, the update step to load; None for the newest.
    seed: for a run of several training seeds, which one (`choose_seed`): an index or `best`.

  Raises:
    checkpoint.CheckpointError: the path holds no such checkpoint, or it fails verification.
    ValueError: `seed` does not name a seed of the run; raised before any array is read.
  """
  run_dir, step = resolve(path, step)
  config, manifest, _, contents = checkpoint.read_json_items(run_dir, step)
  index = choose_seed(run_dir, config, step, seed)
  return _restore(run_dir, step, config, manifest, contents).policy(index)


def load_all(path: pathlib.Path | str, step: int | None = None) -> SeedPolicies:
  """Loads every training seed's policy of a run folder or a checkpoint folder, in one read.

  Args and raises as `load` (no seed to choose).
  """
  run_dir, step = resolve(path, step)
  config, manifest, _, contents = checkpoint.read_json_items(run_dir, step)
  return _restore(run_dir, step, config, manifest, contents)


def _restore(run_dir: pathlib.Path, step: int, config: config_lib.TrainConfig,
             manifest: families.Manifest, contents: dict[str, Any]) -> SeedPolicies:
  """Restores and verifies the checkpoint's `policy` item, every seed's, with its networks."""
  env = env_lib.LocomotionEnv(config)  # static tables only; nothing is reset or compiled
  obs_spec = env.observation_spec()
  nets = networks.from_config(config, env.action_size, env.scan_start)
  abstract_params = jax.eval_shape(
      lambda key: nets.init(key, obs_spec["policy"].shape[-1], obs_spec["critic"].shape[-1]),
      jax.random.key(0))
  abstract = {"actor": abstract_params.actor,
              "normalizer": jax.eval_shape(normalizer.init, obs_spec)}
  if config.num_seeds > 1:  # every seed's, [S, ...]
    abstract = jax.tree.map(
        lambda leaf: jax.ShapeDtypeStruct((config.num_seeds,) + leaf.shape, leaf.dtype), abstract)
  restored = checkpoint.restore_policy(run_dir, abstract, step, contents)
  if config.num_seeds == 1:  # saved without the seed axis
    restored = jax.tree.map(lambda leaf: leaf[None], restored)
  return SeedPolicies(params=PolicyParams(actor=restored["actor"],
                                          normalizer=restored["normalizer"]),
                      observation_spec=obs_spec["policy"], networks=nets, config=config,
                      manifest=manifest, step=step, run_dir=run_dir)
