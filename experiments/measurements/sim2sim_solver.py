"""How the second-simulator gap depends on C MuJoCo's constraint solver: one checkpoint's
held-out panel replayed in C MuJoCo (float64) at several Newton iteration caps, beside MJX.

  python experiments/measurements/sim2sim_solver.py --run_dir=runs/<run> [--step=N] \
      [--iterations=1,2,4,100] [--mjx_iterations=0,2] [--strata=NAME,...] [--envs_per_family=N]

Every replay starts from the same states with the same policy (JAX, in the loop) and differs
from the others only in `opt.iterations` (line search 50 steps, tolerance 1e-10 above one
iteration; one iteration is the Go2 file's own setting, 5 line-search steps and tolerance 1e-8).
MJX evaluates the panel once per cap of `--mjx_iterations` (`env.solver_iterations`; 0 is the
run's own), the same envs from the same first states, so MJX's own figures also show what the
solver makes of them. `--strata` replays only those strata in C MuJoCo and `--envs_per_family`
plays more envs of each family in both, as in `python -m mjx_walk.sim2sim`. Prints one JSON
line: per MJX cap its figures, and per C MuJoCo cap each stratum's fall rate, xy-velocity error
and success rate with their gaps to MJX at the first cap of `--mjx_iterations`, and the seconds
each replay took.
"""

from __future__ import annotations

import dataclasses
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

_MJX_ITERATIONS = flags.DEFINE_list(
    "mjx_iterations", ["0"], "Newton iteration caps MJX evaluates the panel with "
    "(env.solver_iterations; 0 is the run's own).")
_STRATA = flags.DEFINE_list("strata", None, "Strata C MuJoCo replays; every one by default.")
_ENVS_PER_FAMILY = flags.DEFINE_integer("envs_per_family", None,
                                        "Envs of each evaluation family, in both simulators.")

_FIGURES = ("fall_rate", "lin_vel_error", "success_rate")


def main(argv: list[str]) -> None:
  del argv
  pol = policy_lib.load(_RUN_DIR.value, _STEP.value)
  strata = panel.select_strata(pol.manifest, _STRATA.value)
  config = pol.config
  if _ENVS_PER_FAMILY.value is not None:
    config = panel.enlarged(config, _ENVS_PER_FAMILY.value)
  mjx_by_iterations = {}
  for text in _MJX_ITERATIONS.value:
    capped = config if int(text) == 0 else dataclasses.replace(
        config, env=dataclasses.replace(config.env, solver_iterations=int(text)))
    record, _ = panel.evaluate_policy(pol, capped, pol.manifest)
    mjx_by_iterations[int(text)] = {s: {k: v[k] for k in _FIGURES}
                                    for s, v in record["strata"].items() if s in strata}
  mjx = mjx_by_iterations[int(_MJX_ITERATIONS.value[0])]
  by_iterations = {}
  for text in _ITERATIONS.value:
    iterations = int(text)
    settings = (c_options.SOLVERS["converged"] | {"iterations": iterations} if iterations > 1
                else {"iterations": 1, "ls_iterations": 5, "tolerance": 1e-8})
    world = sim2sim.CMuJoCoPanel(config, pol.manifest, settings=settings)
    stats, seconds = world.replay(pol.act, strata)
    summary = world.summarize(stats)["strata"]
    by_iterations[iterations] = {"seconds": round(seconds, 1), **{
        s: {**{k: v[k] for k in _FIGURES},
            **{f"gap_{k}": v[k] - mjx[s][k] for k in _FIGURES}}
        for s, v in summary.items() if s in strata}}
  print(json.dumps({"run_dir": str(pol.run_dir), "step": pol.step,
                    "env_steps": pol.step * pol.config.batch_size,
                    "envs_per_family": config.panel.envs_per_family,
                    "mjx_by_iterations": mjx_by_iterations,
                    "c_mujoco_by_iterations": by_iterations}))


if __name__ == "__main__":
  app.run(main)
