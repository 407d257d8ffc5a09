"""Which body touched the ground when a held-out episode ended as `body_contact`: the trunk or a
thigh, per stratum.

  python experiments/measurements/body_contacts.py --run_dir=runs/<run> [--step=N] [--seed=K]

Replays the run's held-out panel as `mjx_walk.evaluate` does (the same envs, reset keys and mean
actions, so the same episodes end the same way) and, on the step that ends an episode as
`body_contact`, records which body-contact geoms touched the ground
(`mjx_walk.sim.ground.body_touches`: the trunk box, the four thigh capsules). Prints ONE JSON
line: per stratum with any such ending, the episodes, how many ended on body contact, how many
of those touched with the trunk and how many with thighs only, and the count per geom (an
episode counts once for each geom that touched on its last step).
"""

from __future__ import annotations

import collections
import json

from absl import app
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import cli
from mjx_walk.evaluation import panel
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import endings
from mjx_walk.sim import ground as ground_lib

# --run_dir, --step and --seed are the commands' own flags (`mjx_walk.cli`).


def ending_touches(pol: policy_lib.Policy
                   ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
  """Replays the panel: (the body-contact geoms' names [K]; bool [K] whether each is on the
  trunk's body; bool [N, K] the geoms touching on the step that ended each panel env's episode
  as body_contact, all False for other endings; int [N] each env's ResetReason)."""
  evaluator = panel.make_evaluator(pol.config, pol.manifest, pol.networks)
  env = evaluator.env
  family_params, reset_keys = panel.panel_envs(pol.config, pol.manifest)
  num_envs, num_geoms = reset_keys.shape[0], env.ground.body_geoms.shape[0]

  def touches(state) -> jax.Array:
    return ground_lib.body_touches(env.ground, env.heights(state), state.data)

  def run(params):
    def step(carry, _):
      state, alive, touched, reason = carry
      action = policy_lib.mean_action(pol.networks, pol.config.ppo.normalize_observations,
                                      params, state.obs["policy"])
      state, final = jax.vmap(env.step_with_final)(state, action)
      ended = alive & (final.reset_reason != endings.ResetReason.NONE)  # [N]
      contact = ended & (final.reset_reason == endings.ResetReason.BODY_CONTACT)
      touched = jnp.where(contact[:, None], jax.vmap(touches)(final), touched)
      reason = jnp.where(ended, final.reset_reason, reason)
      return (state, alive & ~ended, touched, reason), None

    start = (jax.vmap(env.reset)(reset_keys, family_params), jnp.ones(num_envs, bool),
             jnp.zeros((num_envs, num_geoms), bool), jnp.zeros(num_envs, jnp.int32))
    (_, _, touched, reason), _ = jax.lax.scan(step, start, None, env.episode_steps)
    return touched, reason

  touched, reason = jax.device_get(jax.jit(run)(jax.device_get(pol.params)))
  robot = env.robot
  on_trunk = robot.mj_model.geom_bodyid[robot.body_contact_geom_ids] == robot.trunk_body_id
  return (list(robot.spec.body_contact_geoms), on_trunk, np.asarray(touched),
          np.asarray(reason))


def main(argv: list[str]) -> None:
  del argv
  cli.quiet_library_logs()
  if not cli.RUN_DIR.value:
    cli.refuse("give --run_dir, the run whose policy is replayed")
  try:
    pol = policy_lib.load(cli.RUN_DIR.value, cli.STEP.value, cli.SEED.value)
  except (checkpoint.CheckpointError, ValueError) as error:
    cli.refuse(str(error))
  names, on_trunk, touched, reason = ending_touches(pol)
  strata = np.array(pol.manifest.eval_strata)[
      np.arange(len(reason)) % len(pol.manifest.eval_families)]
  trunk = touched[:, on_trunk].any(axis=1)  # [N]
  result = {}
  for stratum in dict.fromkeys(strata.tolist()):
    mine = strata == stratum
    contact = mine & (reason == endings.ResetReason.BODY_CONTACT)
    if not contact.any():
      continue
    per_geom = collections.Counter()
    for row in touched[contact]:
      per_geom.update(names[k] for k in np.flatnonzero(row))
    result[stratum] = {
        "episodes": int(mine.sum()),
        "body_contact": int(contact.sum()),
        "trunk": int((contact & trunk).sum()),
        "thighs_only": int((contact & ~trunk).sum()),
        "by_geom": dict(sorted(per_geom.items())),
    }
  print(json.dumps({"run_dir": str(pol.run_dir), "step": pol.step, "seed": pol.named_seed,
                    "body_geoms": names, "strata": result}))


if __name__ == "__main__":
  app.run(main)
