"""How C MuJoCo's contact stiffness alone moves a trained policy's falls in the second simulator.

  python experiments/measurements/c_contact_stiffness.py --run_dir=runs/<run> [--step=N] \
      [--timeconsts=0.02,0.01] [--strata=flat,stairs_up_10cm,stairs_down_10cm] \
      [--envs_per_family=32] [--ccd=native|mpr]

The held-out panel's envs of the named strata are replayed in C MuJoCo (`sim2sim.CMuJoCoPanel`,
the converged solver, the JAX policy in the loop) once per contact time constant, each written to
every geom of every world in place of the run's own (`env.contact_timeconst`, or the robot
file's). MJX is not run: the policy and the panel are the run's, only C MuJoCo's contacts change,
so that a policy trained with one stiffness can be replayed with another. Prints one JSON line:
per time constant and stratum, the episodes, C MuJoCo's falls (any ending but the time limit),
and the deepest contact's penetration at each control step's end (mm; 50th, 90th, 99th
percentiles and the largest).
"""

from __future__ import annotations

import dataclasses
import json

from absl import app
from absl import flags
import numpy as np

from mjx_walk.config import env as env_config
from mjx_walk.deploy import c_options
from mjx_walk.deploy import sim2sim
from mjx_walk.evaluation import panel
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import endings

_RUN_DIR = flags.DEFINE_string("run_dir", None, "The run folder.", required=True)
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step; default the newest.")
_TIMECONSTS = flags.DEFINE_list("timeconsts", ["0.02", "0.01"],
                                "C MuJoCo's contact time constants to replay with, s.")
_STRATA = flags.DEFINE_list("strata", ["flat", "stairs_up_10cm", "stairs_down_10cm"],
                            "Panel strata to replay.")
_ENVS_PER_FAMILY = flags.DEFINE_integer("envs_per_family", 32, "Envs of each evaluation family.")
_CCD = flags.DEFINE_enum("ccd", "native", list(c_options.CCDS), "C MuJoCo's collision option.")


class _StiffnessPanel(sim2sim.CMuJoCoPanel):
  """The C MuJoCo panel with every geom's contact time constant replaced, recording the deepest
  contact after each control step."""

  def __init__(self, *args, timeconst: float, **kwargs):
    self.timeconst = timeconst
    self.deepest_mm = []  # (env, mm) per control step
    super().__init__(*args, **kwargs)

  def _configure(self, model):
    model = super()._configure(model)
    model.geom_solref[:, 0] = self.timeconst
    return model

  def physics(self, env_index, world, targets, push):
    finite = super().physics(env_index, world, targets, push)
    contacts = world.data.contact[:world.data.ncon]
    self.deepest_mm.append((env_index, -1000 * min((c.dist for c in contacts), default=0.0)))
    return finite


def main(argv: list[str]) -> None:
  del argv
  pol = policy_lib.load(_RUN_DIR.value, _STEP.value)
  strata = panel.select_strata(pol.manifest, _STRATA.value)
  config = panel.enlarged(pol.config, _ENVS_PER_FAMILY.value)
  worlds = {float(value): _StiffnessPanel(config, pol.manifest, "converged", ccd=_CCD.value,
                                          timeconst=float(value)) for value in _TIMECONSTS.value}
  for value, world in worlds.items():  # refused as a run's config would be, before any replay
    try:
      env_config.check_contact_timeconst(
          dataclasses.replace(pol.config.env, contact_timeconst=value),
          world.simulator["physics_timestep"])
    except ValueError as error:
      raise app.UsageError(f"--timeconsts: {error}") from error
  table = {}
  for value, world in worlds.items():
    stats, seconds = world.replay(pol.act, strata)
    env_strata = panel.env_strata(pol.manifest, world.num_envs)
    reason = np.asarray(stats.reason)
    fell = (reason != endings.ResetReason.NONE) & (reason != endings.ResetReason.TIMEOUT)
    envs, deepest = (np.asarray(column) for column in zip(*world.deepest_mm))
    rows = {}
    for stratum in strata:
      mine = env_strata[envs] == stratum
      rows[stratum] = {
          "episodes": int((env_strata == stratum).sum()),
          "c_falls": int(fell[env_strata == stratum].sum()),
          "deepest_mm": [round(float(np.percentile(deepest[mine], q)), 2) for q in (50, 90, 99)]
                        + [round(float(deepest[mine].max()), 2)]}
    table[f"{value:g}"] = {"replay_seconds": round(seconds, 1), "strata": rows}
  print(json.dumps({
      "run_dir": str(pol.run_dir), "step": pol.step, "ccd": _CCD.value,
      "trained_contact_timeconst": pol.config.env.contact_timeconst or "robot file's",
      "envs_per_family": _ENVS_PER_FAMILY.value, "percentiles": [50, 90, 99, 100],
      "timeconsts": table}))


if __name__ == "__main__":
  app.run(main)
