"""How many contacts touch the ground per step, per contact dimension, in a run's held-out panel:
what a contact budget (`terrain.max_contact_points`) would drop.

  python experiments/measurements/contact_census.py --run_dir=runs/<run> [--budget=8]

Replays the run's held-out panel as `mjx_walk.evaluate` does (the same envs, reset keys and mean
actions) with every contact slot MJX's colliders emit (the run's own budget, if any, removed),
and counts, on the last physics substep of each control step of every env still in its first
episode, the contacts that touch (distance below 0) in each contact dimension (on the Go2's
heightfield: 3 for the feet, 1 for the knees). Prints ONE JSON line: per dimension, the slots,
the histogram of touching contacts per env step, the most, and the share of env steps with more
than --budget; and per stratum that share for each dimension.
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
from mjx_walk.evaluation import panel
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import endings
from mjx_walk.sim._mjx import mjx

# --run_dir, --step and --seed are the commands' own flags (`mjx_walk.cli`).
_BUDGET = flags.DEFINE_integer("budget", 8, "The contacts per dimension a budget would keep.")


def touching(pol: policy_lib.Policy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Replays the panel without a budget: (int [C] each contact slot's dimension; bool [T, N, C]
  whether each slot touched on each control step's last substep; bool [T, N] whether each env
  was still in its first episode)."""
  terrain = dataclasses.replace(pol.config.terrain, max_contact_points=0)
  config = dataclasses.replace(pol.config, terrain=terrain)
  evaluator = panel.make_evaluator(config, pol.manifest, pol.networks)
  env = evaluator.env
  family_params, reset_keys = panel.panel_envs(config, pol.manifest)

  def run(params):
    def step(carry, _):
      state, alive = carry
      action = policy_lib.mean_action(pol.networks, config.ppo.normalize_observations, params,
                                      state.obs["policy"])
      state, final = jax.vmap(env.step_with_final)(state, action)
      touched = final.data._impl.contact.dist < 0  # [N, C]
      ended = alive & (final.reset_reason != endings.ResetReason.NONE)
      return (state, alive & ~ended), (touched, alive)

    start = (jax.vmap(env.reset)(reset_keys, family_params), jnp.ones(reset_keys.shape[0], bool))
    _, (touched, alive) = jax.lax.scan(step, start, None, env.episode_steps)
    return touched, alive

  touched, alive = jax.device_get(jax.jit(run)(jax.device_get(pol.params)))
  dims = np.asarray(mjx.make_data(env.model)._impl.contact.dim)  # [C], the same in every env
  return dims, np.asarray(touched), np.asarray(alive)


def main(argv: list[str]) -> None:
  del argv
  cli.quiet_library_logs()
  if not cli.RUN_DIR.value:
    cli.refuse("give --run_dir, the run whose policy is replayed")
  if _BUDGET.value < 1:
    cli.refuse(f"--budget={_BUDGET.value} is invalid: it must be a positive integer")
  try:
    pol = policy_lib.load(cli.RUN_DIR.value, cli.STEP.value, cli.SEED.value)
  except (checkpoint.CheckpointError, ValueError) as error:
    cli.refuse(str(error))
  if not pol.config.terrain.heightfield:
    cli.refuse(f"--run_dir={cli.RUN_DIR.value} trained on the plane; the budget applies to a "
               "heightfield")
  dims, touched, alive = touching(pol)
  budget = _BUDGET.value
  strata = panel.env_strata(pol.manifest, alive.shape[1])
  result, above = {}, {}
  for dim in sorted(set(dims.tolist())):
    counts = touched[:, :, dims == dim].sum(axis=-1)  # [T, N]
    live = counts[alive]
    result[str(dim)] = {
        "slots": int((dims == dim).sum()),
        "histogram": np.bincount(live).tolist(),
        "most": int(live.max()),
        "share_above_budget": float(np.mean(live > budget)),
    }
    for stratum in dict.fromkeys(strata.tolist()):
      mine = alive & (strata == stratum)[None, :]
      above.setdefault(stratum, {})[str(dim)] = round(float(np.mean(counts[mine] > budget)), 6)
  print(json.dumps({"run_dir": str(pol.run_dir), "step": pol.step, "budget": budget,
                    "env_steps": int(alive.sum()), "dims": result,
                    "share_above_budget_by_stratum": above}))


if __name__ == "__main__":
  app.run(main)
