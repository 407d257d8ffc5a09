"""How the second-simulator gap depends on C MuJoCo's constraint solver: one checkpoint's
held-out panel replayed in C MuJoCo (float64) at several Newton iteration caps, beside MJX.

  python experiments/measurements/sim2sim_solver.py --run_dir=runs/<run> [--step=N] \
      [--iterations=1,2,4,100]

Every replay starts from the same states with the same policy (JAX, in the loop) and differs
from the others only in `opt.iterations` (line search 50 steps, tolerance 1e-10 above one
iteration; one iteration is MJX's own setting, 5 line-search steps and tolerance 1e-8). Prints
one JSON line: the MJX figures and, per iteration cap, each stratum's fall rate, xy-velocity error
and success rate with their gaps to MJX, and the seconds each replay took.
"""

from __future__ import annotations

import json

from absl import app
from absl import flags

from mjx_walk.deploy import c_options
from mjx_walk.deploy import sim2sim
from mjx_walk.evaluation import panel
from mjx_walk.run import policy as policy_lib

_RUN_DIR = flags.DEFINE_string("run_dir", None, "The run folder.", required=True)
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step; default the newest.")
_ITERATIONS = flags.DEFINE_list("iterations", ["1", "2", "4", "10", "100"],
                                "Newton iteration caps to replay the panel with.")

_FIGURES = ("fall_rate", "lin_vel_error", "success_rate")


def main(argv: list[str]) -> None:
  del argv
  pol = policy_lib.load(_RUN_DIR.value, _STEP.value)
  mjx_record, _ = panel.evaluate_policy(pol, pol.config, pol.manifest)
  mjx = {s: {k: v[k] for k in _FIGURES} for s, v in mjx_record["strata"].items()}
  by_iterations = {}
  for text in _ITERATIONS.value:
    iterations = int(text)
    settings = (c_options.SOLVERS["converged"] | {"iterations": iterations} if iterations > 1
                else {"iterations": 1, "ls_iterations": 5, "tolerance": 1e-8})
    world = sim2sim.CMuJoCoPanel(pol.config, pol.manifest, settings=settings)
    stats, seconds = world.replay(pol.act)
    strata = world.summarize(stats)["strata"]
    by_iterations[iterations] = {"seconds": round(seconds, 1), **{
        s: {**{k: v[k] for k in _FIGURES},
            **{f"gap_{k}": v[k] - mjx[s][k] for k in _FIGURES}} for s, v in strata.items()}}
  print(json.dumps({"run_dir": str(pol.run_dir), "step": pol.step,
                    "env_steps": pol.step * pol.config.batch_size, "mjx": mjx,
                    "c_mujoco_by_iterations": by_iterations}))


if __name__ == "__main__":
  app.run(main)
