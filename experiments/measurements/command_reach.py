"""Which training families' commands can take a trunk as far as the curriculum's promotion asks,
and where their envs' levels stand: a heightfield run's curriculum split by the command's reach.

  python experiments/measurements/command_reach.py --run_dir=runs/<run> [--step=N]

A family's command schedule is the same in every episode. Under `terrain.promote_distance` (the
rough recipes: 2 m) an episode moves up only if it ends that far from its start, so the envs of
a family whose schedule, followed exactly, ends nearer (its reach,
`mjx_walk.sim.terrain.command_reach`) move up only by overshooting it, unless
`terrain.promote_within_reach` judges them by the commanded fraction. Prints ONE JSON line: the
run's promotion rule, and per terrain type of its training families: how many families, how many
reach less than the promotion distance, how many of those are commanded at least
`terrain.min_commanded_distance` (the ones `promote_within_reach` can promote), and, from the
checkpoint's env state (the newest, or --step), the levels of the type's envs: all of them, those
whose family reaches the distance, and those whose family does not (mean, median, how many at
level 5 or above, and how many at each level).
"""

from __future__ import annotations

import json

from absl import app
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from mjx_walk import cli
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import terrain as terrain_lib

# --run_dir and --step are the commands' own flags (`mjx_walk.cli`).


def family_reach(config, manifest) -> tuple[np.ndarray, np.ndarray]:
  """float [F] each training family's reach, m, and float [F] its commanded distance over an
  episode (the integral of |command xy|), m."""
  fams = manifest.train_families
  steps = round(config.env.episode_seconds * config.env.control_hz)
  dt = 1.0 / config.env.control_hz
  times = jnp.asarray([f.command_times for f in fams], jnp.float32)
  commands = jnp.asarray([f.commands for f in fams], jnp.float32)
  reach = jax.vmap(lambda t, c: terrain_lib.command_reach(t, c, steps, dt))(times, commands)
  # The commanded distance, as `terrain.track` sums it: |command xy| of each step's command.
  t = np.arange(steps) * dt
  current = np.sum(np.asarray(times)[:, None, :] <= t[None, :, None], axis=-1) - 1  # [F, T]
  speed = np.linalg.norm(np.asarray(commands)[np.arange(len(fams))[:, None], current, :2], axis=-1)
  return np.asarray(reach, np.float64), speed.sum(axis=1) * dt


def _levels(levels: np.ndarray, num_levels: int) -> dict:
  if levels.size == 0:
    return {"envs": 0}
  return {"envs": int(levels.size), "mean": round(float(levels.mean()), 3),
          "median": float(np.median(levels)), "at_5_or_above": int((levels >= 5).sum()),
          "per_level": np.bincount(levels, minlength=num_levels).tolist()}


def main(argv):
  del argv
  cli.quiet_library_logs()
  if not cli.RUN_DIR.value:
    cli.refuse("give --run_dir, a heightfield run")
  try:
    run_dir, step = policy_lib.resolve(cli.RUN_DIR.value, cli.STEP.value)
    config, manifest, _, _ = checkpoint.read_json_items(run_dir, step)
  except checkpoint.CheckpointError as error:
    cli.refuse(str(error))
  cfg = config.terrain
  if not cfg.heightfield:
    cli.refuse(f"{run_dir} trains on the plane (config.terrain.ground={cfg.ground!r}): it has no "
               "curriculum; give a heightfield run")
  if config.num_seeds != 1:
    cli.refuse(f"{run_dir} trains {config.num_seeds} seeds; give a single-seed run")
  env_item = ocp.PyTreeCheckpointer().restore(
      (checkpoint.directory(run_dir) / str(step) / "env").resolve())
  level = np.asarray(env_item["terrain_level"]).reshape(-1).astype(np.int64)  # [N]
  reach, commanded = family_reach(config, manifest)
  family = np.arange(level.size) % len(manifest.train_families)  # env i: family i % F
  kinds = np.array([f.terrain_type for f in manifest.train_families])
  distance = cfg.promote_distance
  per_type = {}
  for kind in dict.fromkeys(kinds):
    of_kind = kinds == kind
    short = of_kind & (reach < distance)
    env_kind, env_short = of_kind[family], short[family]
    per_type[kind] = {
        "families": int(of_kind.sum()),
        "short_of_the_distance": int(short.sum()),
        "short_and_judged": int((short & (commanded >= cfg.min_commanded_distance)).sum()),
        "levels": {
            "all": _levels(level[env_kind], cfg.num_levels),
            "reaching": _levels(level[env_kind & ~env_short], cfg.num_levels),
            "short": _levels(level[env_short], cfg.num_levels)},
    }
  print(json.dumps({
      "run_dir": str(run_dir), "step": step, "promote_distance": distance,
      "promote_within_reach": cfg.promote_within_reach,
      "min_commanded_distance": cfg.min_commanded_distance,
      "episode_seconds": config.env.episode_seconds, "types": per_type}))


if __name__ == "__main__":
  app.run(main)
