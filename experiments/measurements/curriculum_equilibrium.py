"""Where a trained policy's terrain curriculum settles: per terrain type and level, how its
training episodes end, and the level distribution each promotion rule holds it at.

  python experiments/measurements/curriculum_equilibrium.py --run_dir=runs/<run> [--step=N]
      [--types=stairs_up,stairs_down] [--envs_per_level=32] [--deterministic]

For each level of each type, `--envs_per_level` envs on the run's own training families of that
type (repeated in turn) play one training episode from `LocomotionEnv.reset` at that level: the
training env (its episode length, observation and sensing noise) with the policy's sampled
actions, as the trainer acts (`--deterministic`: its mean). Each ended episode gives what the
curriculum reads (terminated, timed out, commanded, walked along the command, distance from
the start with the wrap's tiles), and `mjx_walk.sim.terrain.next_level` itself moves it under
three rules:
  run        the run's own terrain config;
  no_timeout the same, but an episode that ends by a fall is promoted when it went far enough
             (its time limit not required);
  legged_gym promotion as `no_timeout`, demotion only for walking less than demote_fraction of
             the command (a fall demotes nothing by itself), as legged_gym's
             `_update_terrain_curriculum`; what was walked is still the progress along the
             command, where legged_gym takes the straight distance from the start.
From the fixed policy's chance of moving up and down at each level, the levels form a birth and
death chain whose stationary distribution (pi[l+1] / pi[l] = up[l] / down[l+1]) is where the
curriculum settles if the policy stopped learning. Prints ONE JSON line: per type, per level the
episodes, falls, median distance, and per rule the up and down rates, then per rule the chain's
median and mean level.
"""

from __future__ import annotations

import dataclasses
import json

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import cli
from mjx_walk.learn import networks
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import terrain as terrain_lib

# --run_dir, --step and --seed are the commands' own flags (`mjx_walk.cli`).
_TYPES = flags.DEFINE_list("types", ["stairs_up", "stairs_down"],
                           f"Terrain types to measure, of {', '.join(terrain_lib.TYPES)}.")
_ENVS_PER_LEVEL = flags.DEFINE_integer("envs_per_level", 32, "Episodes per type and level.",
                                       lower_bound=1)
_DETERMINISTIC = flags.DEFINE_bool("deterministic", False,
                                   "Act with the policy's mean instead of sampling.")
_KEY = 7
"""The reset and action keys' seed: the same run and flags give the same numbers."""


def episodes(pol: policy_lib.Policy, kind: str, per_level: int, deterministic: bool
             ) -> dict[str, np.ndarray]:
  """One training episode per env at every level: {field: [levels * per_level]} with `level`,
  `terminated`, `timed_out`, `commanded`, `progress` and `distance`."""
  config = pol.config
  env = env_lib.LocomotionEnv(config)
  params = pol.manifest.train_params()
  mine = np.flatnonzero(np.asarray(params.terrain.type) == terrain_lib.TYPES.index(kind))
  if not mine.size:
    raise ValueError(f"--types: the run has no training family of type {kind!r}")
  levels = np.repeat(np.arange(config.terrain.num_levels), per_level)
  family = jax.tree.map(lambda x: x[np.resize(mine, per_level)][np.tile(
      np.arange(per_level), config.terrain.num_levels)], params)
  start = env.robot.init_qpos[0:2] + family.spawn_offset  # [N, 2], as the env's auto-reset

  def act(obs: jax.Array, key: jax.Array) -> jax.Array:
    mean, std = policy_lib.action_distribution(
        pol.networks, config.ppo.normalize_observations, pol.params, obs)
    return mean if deterministic else networks.sample(key, mean, std)

  @jax.jit
  def run(keys: jax.Array) -> dict[str, jax.Array]:
    state = jax.vmap(env.reset)(keys, family, jnp.asarray(levels, jnp.int32))
    n = levels.size
    zeros = jnp.zeros(n)
    first = {"ended": jnp.zeros(n, bool), "terminated": jnp.zeros(n, bool),
             "timed_out": jnp.zeros(n, bool), "commanded": zeros, "progress": zeros,
             "distance": zeros}

    def step(carry, key):
      state, seen = carry
      state, final = jax.vmap(env.step_with_final)(state, act(state.obs["policy"], key))
      ended = (final.terminated | final.truncated) & ~seen["ended"]  # [N]
      now = {"ended": ended, "terminated": final.terminated, "timed_out": final.truncated,
             "commanded": final.terrain.commanded, "progress": final.terrain.progress,
             "distance": jnp.linalg.norm(
                 final.data.qpos[:, 0:2] + final.terrain.offset - start, axis=-1)}
      seen = {name: seen[name] | ended if name == "ended" else jnp.where(ended, now[name], old)
              for name, old in seen.items()}
      return (state, seen), None

    action_keys = jax.random.split(jax.random.key(_KEY + 1), env.episode_steps)
    return jax.lax.scan(step, (state, first), action_keys)[0][1]

  seen = jax.device_get(run(jax.random.split(jax.random.key(_KEY), levels.size)))
  return {"level": levels, **{name: np.asarray(value) for name, value in seen.items()}}


def moves(terrain: terrain_lib.TerrainConfig, seen: dict[str, np.ndarray]
          ) -> dict[str, np.ndarray]:
  """Each episode's next level minus its level under each rule (the module docstring)."""
  no_timeout = np.ones_like(seen["timed_out"])
  falls_unjudged = np.zeros_like(seen["terminated"])
  inputs = {"run": (seen["terminated"], seen["timed_out"]),
            "no_timeout": (seen["terminated"], no_timeout),
            "legged_gym": (falls_unjudged, no_timeout)}
  move = jax.jit(jax.vmap(lambda *a: terrain_lib.next_level(terrain, *a)))
  return {rule: np.asarray(move(seen["level"], terminated, timed_out, seen["commanded"],
                                seen["progress"], seen["distance"])) - seen["level"]
          for rule, (terminated, timed_out) in inputs.items()}


def stationary(up: np.ndarray, down: np.ndarray) -> np.ndarray:
  """The birth and death chain's stationary distribution over levels, from each level's chance
  of moving up and down; a level nothing leaves upward holds everything above it at 0."""
  pi = np.ones(len(up))
  for level in range(len(up) - 1):
    pi[level + 1] = pi[level] * up[level] / max(down[level + 1], 1e-12)
  return pi / pi.sum()


def measure(pol: policy_lib.Policy, kind: str, per_level: int, deterministic: bool
            ) -> dict:
  terrain = pol.config.terrain
  seen = episodes(pol, kind, per_level, deterministic)
  moved = moves(terrain, seen)
  result = {"levels": [], "settles": {}}
  for level in range(terrain.num_levels):
    at = seen["level"] == level
    row = {"level": level, "episodes": int(at.sum()),
           "falls": float(seen["terminated"][at].mean()),
           "median_distance": float(np.median(seen["distance"][at]))}
    for rule, move in moved.items():
      row[rule] = {"up": float((move[at] > 0).mean()), "down": float((move[at] < 0).mean())}
    result["levels"].append(row)
  for rule in moved:
    pi = stationary(np.array([row[rule]["up"] for row in result["levels"]]),
                    np.array([row[rule]["down"] for row in result["levels"]]))
    result["settles"][rule] = {"median_level": int(np.searchsorted(np.cumsum(pi), 0.5)),
                               "mean_level": float(pi @ np.arange(len(pi))),
                               "distribution": [round(float(p), 4) for p in pi]}
  return result


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if not cli.RUN_DIR.value:
    cli.refuse("give the run to measure: --run_dir=runs/<run>")
  bad = [kind for kind in _TYPES.value if kind not in terrain_lib.TYPES]
  if bad:
    cli.refuse(f"--types={','.join(_TYPES.value)} is invalid: {bad} are not terrain types "
               f"({', '.join(terrain_lib.TYPES)})")
  try:
    pol = policy_lib.load(cli.RUN_DIR.value, cli.STEP.value, cli.SEED.value)
  except (checkpoint.CheckpointError, ValueError) as error:
    cli.refuse(str(error))
  if not pol.config.terrain.heightfield:
    cli.refuse(f"{pol.run_dir} trained on the plane: it has no terrain curriculum")
  line = {"run_dir": str(pol.run_dir), "step": pol.step,
          "env_steps": pol.step * pol.config.batch_size, "envs_per_level": _ENVS_PER_LEVEL.value,
          "actions": "mean" if _DETERMINISTIC.value else "sampled",
          "terrain": {k: v for k, v in dataclasses.asdict(pol.config.terrain).items()
                      if k in ("promote_fraction", "promote_distance", "demote_fraction",
                               "min_commanded_distance", "num_levels")}}
  for kind in _TYPES.value:
    line[kind] = measure(pol, kind, _ENVS_PER_LEVEL.value, _DETERMINISTIC.value)
  print(json.dumps(line))


if __name__ == "__main__":
  app.run(main)
