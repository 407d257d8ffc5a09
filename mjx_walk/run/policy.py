"""A trained policy for use outside training: (normalizer, actor) from a run folder or checkpoint,
and the one definition of what a policy does with an observation.

  pol = policy.load("runs/<run>")                     # newest intact checkpoint
  pol = policy.load("runs/<run>/checkpoints/1200")    # one checkpoint
  action = pol.act(obs["policy"])                     # jitted, [..., O] -> [..., A]

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

from mjx_walk import config as config_lib
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.run import checkpoint
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


def mean_action(nets: networks.ActorCritic, normalize: bool, params: PolicyParams,
                policy_obs: jax.Array) -> jax.Array:
  """The policy's deterministic action: normalise the observation if the run does, then the
  actor's mean.

  Args:
    nets: the actor-critic (static); only the actor is applied.
    normalize: the run's `ppo.normalize_observations` (static).
    params: the actor's parameters and the observation statistics.
    policy_obs: float32 [..., O] policy observations.

  Returns:
    float32 [..., A] mean actions, raw (the env clips and scales them).
  """
  if normalize:
    stats = params.normalizer
    policy_stats = normalizer.NormalizerState(
        mean=stats.mean["policy"], var=stats.var["policy"], count=stats.count)
    policy_obs = normalizer.normalize(policy_stats, policy_obs)  # [..., O]
  mean, _ = nets.policy(networks.ActorCriticParams(actor=params.actor, critic=None),
                        policy_obs)  # [..., A]
  return mean


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

  def act(self, policy_obs: jax.Array) -> jax.Array:
    """Jitted `mean_action`: float32 [..., O] policy observations -> float32 [..., A]."""
    return _jitted_mean_action(self.networks, self.config.ppo.normalize_observations,
                               self.params, policy_obs)


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


def load(path: pathlib.Path | str, step: int | None = None) -> Policy:
  """Loads the policy of a run folder or a checkpoint folder.

  Args:
    path: `runs/<run>` or `runs/<run>/checkpoints/<step>`.
    step: with a run folder, the update step to load; None for the newest.

  Raises:
    checkpoint.CheckpointError: the path holds no such checkpoint, or it fails verification.
  """
  run_dir, step = resolve(path, step)
  config, manifest, _, contents = checkpoint.read_json_items(run_dir, step)
  env = env_lib.LocomotionEnv(config)  # static tables only; nothing is reset or compiled
  obs_spec = env.observation_spec()
  nets = networks.from_config(config, env.action_size, env.scan_start)
  abstract_params = jax.eval_shape(
      lambda key: nets.init(key, obs_spec["policy"].shape[-1], obs_spec["critic"].shape[-1]),
      jax.random.key(0))
  abstract = {"actor": abstract_params.actor,
              "normalizer": jax.eval_shape(normalizer.init, obs_spec)}
  restored = checkpoint.restore_policy(run_dir, abstract, step, contents)
  return Policy(params=PolicyParams(actor=restored["actor"], normalizer=restored["normalizer"]),
                observation_spec=obs_spec["policy"], networks=nets, config=config,
                manifest=manifest, step=step, run_dir=run_dir)
