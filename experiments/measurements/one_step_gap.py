"""Where MJX's physics and C MuJoCo's part, one control step at a time, on the states a policy
reaches in C MuJoCo.

  python experiments/measurements/one_step_gap.py --run_dir=runs/<run> [--step=N] \
      [--strata=flat,stairs_up_10cm,stairs_down_10cm] [--envs_per_family=4] [--ccd=native|mpr] \
      [--x64] [--all_contacts]

The held-out panel's envs of the named strata (level ones: a slope's world is turned) are
replayed in C MuJoCo (`sim2sim.CMuJoCoPanel` with MJX's solver settings, so that the solver is not
what differs, and the collision option `--ccd`) with the policy in the loop. Every control step of
every env is recorded: the state it starts from (qpos, qvel, the solver's warm start), its PD
targets and push, C MuJoCo's contacts at that state, and the state C MuJoCo ends the step in.
MJX then plays each recorded step once from the same state, with the same targets, push, family
model fields and heightfield, and the two ends are compared. `--x64` plays them in float64 in
MJX (JAX's x64 switched on after the replay), to tell float32's share; `--all_contacts` without
MJX's contact budget (`terrain.max_contact_points=0`).

Each step is classed by C MuJoCo's contacts at its start: "wall" when a contact's normal is
closer to the horizontal than to the vertical (z < 0.5: a sphere pushed out through the side of a
heightfield cell's prism, or resting on a riser steeper than 60 degrees); "shallow", of the others,
when a geom pair has a penetrating contact more than 1 mm shallower than that pair's deepest (C
MuJoCo keeps one contact for each prism a sphere reaches, MJX's heightfield collision only those
within 1 mm of the deepest: a foot in the corner of a tread and a riser held by one face in MJX,
by both in C MuJoCo); "surface" otherwise. Prints one JSON line: per stratum, C MuJoCo's
falls, and per class the number of steps, the deepest contact's penetration (mm), and the gap at
the step's end in the trunk's height (mm), linear velocity (m/s), angular velocity (rad/s) and
the largest joint velocity's (rad/s), each as its 50th, 90th and 99th percentiles; the shares of
the steps whose linear-velocity gap exceeds 0.05 m/s that are "wall" and "shallow" steps; and the
gaps of the 20 steps before each fall in C MuJoCo.
"""

from __future__ import annotations

import dataclasses
import json

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk.deploy import c_options
from mjx_walk.deploy import sim2sim
from mjx_walk.evaluation import panel
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import _mjx
from mjx_walk.sim import endings
from mjx_walk.sim import families

_RUN_DIR = flags.DEFINE_string("run_dir", None, "The run folder.", required=True)
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step; default the newest.")
_STRATA = flags.DEFINE_list("strata", ["flat", "stairs_up_10cm", "stairs_down_10cm"],
                            "Level panel strata to replay.")
_ENVS_PER_FAMILY = flags.DEFINE_integer("envs_per_family", 4, "Envs of each evaluation family.")
_CCD = flags.DEFINE_enum("ccd", "native", list(c_options.CCDS), "C MuJoCo's collision option.")
_X64 = flags.DEFINE_bool("x64", False, "MJX plays the recorded steps in float64.")
_ALL_CONTACTS = flags.DEFINE_bool("all_contacts", False,
                                  "MJX keeps every contact (terrain.max_contact_points=0).")

_BEFORE_FALL = 20  # control steps before a fall that are also summarised on their own
_WALL_NORMAL_Z = 0.5  # a contact normal's z below which the contact is a cell's side wall
_LARGE_GAP = 0.05  # m/s of trunk linear velocity after one control step
_MANIFOLD_MM = 1.0  # MJX's heightfield collisions keep a pair's contacts this close to its deepest


class _Recorder(sim2sim.CMuJoCoPanel):
  """The C MuJoCo panel, recording every control step's start, inputs, contacts and end."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.steps = []

  def physics(self, env_index, world, targets, push):
    model, data = world.model, world.data
    start = dict(env=env_index, qpos=data.qpos.copy(), qvel=data.qvel.copy(),
                 warm=data.qacc_warmstart.copy(), ctrl=np.asarray(targets, np.float64),
                 push=np.asarray(push, np.float64))
    # The contacts at this state (mj_step computes them again, from the same positions).
    mujoco.mj_kinematics(model, data)
    mujoco.mj_collision(model, data)
    contacts = data.contact[:data.ncon]
    start["lowest_normal_z"] = min((c.frame[2] for c in contacts), default=1.0)
    start["deepest_mm"] = -1000 * min((c.dist for c in contacts), default=0.0)
    start["shallow"] = _shallow_contacts(contacts)
    finite = super().physics(env_index, world, targets, push)
    self.steps.append(dict(start, end_qpos=data.qpos.copy(), end_qvel=data.qvel.copy()))
    return finite


def _shallow_contacts(contacts) -> int:
  """How many of the penetrating contacts are over `_MANIFOLD_MM` shallower than the deepest
  contact of their own geom pair: those MJX's heightfield collisions leave out (they keep only a
  pair's contacts within 1 mm of its deepest), where C MuJoCo keeps one for every prism."""
  deepest = {}
  for c in contacts:
    pair = (int(c.geom[0]), int(c.geom[1]))
    deepest[pair] = min(deepest.get(pair, 0.0), float(c.dist))
  return sum(1 for c in contacts if c.dist < 0
             and c.dist > deepest[(int(c.geom[0]), int(c.geom[1]))] + _MANIFOLD_MM / 1000)


def _floating(tree, dtype):
  return jax.tree.map(lambda x: x.astype(dtype) if isinstance(x, jax.Array)
                      and jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def _mjx_step(recorder: _Recorder, steps: dict[str, np.ndarray], dtype) -> tuple[np.ndarray, ...]:
  """MJX's end of each recorded step (qpos [T, nq], qvel [T, nv]), batched over the steps."""
  env = recorder.env
  model = _floating(env.model, dtype)
  template = _mjx.mjx.make_data(model)
  trunk = env.robot.trunk_body_id
  family = steps["env"] % len(recorder.manifest.eval_families)
  params = jax.tree.map(lambda x: np.asarray(x)[steps["env"]], recorder.family_params)
  fields = np.asarray(recorder._grounds)[family]  # pylint: disable=protected-access

  def one(params, field, qpos, qvel, warm, ctrl, push):
    m = families.apply_to_model(model, env.robot, params)
    m = _floating(m.replace(hfield_data=field.reshape(-1)), dtype)
    d = template.replace(qpos=qpos, qvel=qvel, qacc_warmstart=warm, ctrl=ctrl,
                         xfrc_applied=template.xfrc_applied.at[trunk, 0:3].set(push))
    d = jax.lax.fori_loop(0, env.substeps, lambda _, d: _mjx.mjx.step(m, d), d)
    return d.qpos, d.qvel

  run = jax.jit(jax.vmap(one))
  ends = []
  for lo in range(0, len(steps["env"]), 4096):
    part = slice(lo, lo + 4096)
    ends.append(jax.device_get(run(
        jax.tree.map(lambda x: x[part], params), fields[part],
        *(np.asarray(steps[k][part], dtype) for k in ("qpos", "qvel", "warm", "ctrl", "push")))))
  return tuple(np.concatenate(parts) for parts in zip(*ends))


def _percentiles(values: np.ndarray) -> list[float] | None:
  if not len(values):
    return None
  return [round(float(np.percentile(values, q)), 4) for q in (50, 90, 99)]


def main(argv: list[str]) -> None:
  del argv
  pol = policy_lib.load(_RUN_DIR.value, _STEP.value)
  strata = panel.select_strata(pol.manifest, _STRATA.value)
  config = panel.enlarged(pol.config, _ENVS_PER_FAMILY.value)
  if _ALL_CONTACTS.value:  # C MuJoCo has no contact budget either way
    config = dataclasses.replace(config, terrain=dataclasses.replace(
        config.terrain, max_contact_points=0))
  recorder = _Recorder(config, pol.manifest, solver="mjx", ccd=_CCD.value)
  if recorder.grid is None:
    raise app.UsageError(f"{pol.run_dir} trains on the plane: one_step_gap.py compares "
                         "heightfield collisions, on a run with terrain.ground='heightfield'")
  env_strata = panel.env_strata(pol.manifest, recorder.num_envs)
  gravity = np.asarray(recorder.family_params.gravity)  # [N, 3]
  tilted = sorted(str(s) for s in set(env_strata[np.abs(gravity[:, 0:2]).max(axis=1) > 0])
                  & set(strata))
  if tilted:
    raise app.UsageError(f"--strata={','.join(strata)} holds tilted strata {tilted}: C MuJoCo "
                         "turns their worlds, so their states are not MJX's; name level strata")
  stats, seconds = recorder.replay(pol.act, strata)
  steps = {k: np.stack([s[k] for s in recorder.steps]) for k in recorder.steps[0]}
  if _X64.value:
    jax.config.update("jax_enable_x64", True)
  qpos, qvel = _mjx_step(recorder, steps, np.float64 if _X64.value else np.float32)
  gap = {
      "trunk_height_mm": 1000 * np.abs(qpos[:, 2] - steps["end_qpos"][:, 2]),
      "lin_vel": np.linalg.norm(qvel[:, 0:3] - steps["end_qvel"][:, 0:3], axis=1),
      "ang_vel": np.linalg.norm(qvel[:, 3:6] - steps["end_qvel"][:, 3:6], axis=1),
      "joint_vel_max": np.abs(qvel[:, 6:] - steps["end_qvel"][:, 6:]).max(axis=1),
  }
  reason = np.asarray(stats.reason)
  fell = (reason != endings.ResetReason.NONE) & (reason != endings.ResetReason.TIMEOUT)  # [N]
  before_fall = np.zeros(len(steps["env"]), bool)
  for j in np.flatnonzero(fell):
    before_fall[np.flatnonzero(steps["env"] == j)[-_BEFORE_FALL:]] = True
  wall = steps["lowest_normal_z"] < _WALL_NORMAL_Z
  shallow = ~wall & (steps["shallow"] > 0)
  large = gap["lin_vel"] > _LARGE_GAP
  table = {}
  for stratum in strata:
    mine = env_strata[steps["env"]] == stratum
    rows = {"c_falls": int(fell[env_strata == stratum].sum()),
            "large_gaps_at_walls": round(float((mine & large & wall).sum()
                                               / max(1, (mine & large).sum())), 3),
            "large_gaps_at_shallow": round(float((mine & large & shallow).sum()
                                                 / max(1, (mine & large).sum())), 3)}
    for name, chosen in (("wall", mine & wall), ("shallow", mine & shallow),
                         ("surface", mine & ~wall & ~shallow),
                         ("before_fall", mine & before_fall)):
      rows[name] = {"steps": int(chosen.sum()),
                    "deepest_mm": _percentiles(steps["deepest_mm"][chosen]),
                    **{k: _percentiles(v[chosen]) for k, v in gap.items()}}
    table[stratum] = rows
  print(json.dumps({
      "run_dir": str(pol.run_dir), "step": pol.step, "ccd": _CCD.value,
      "mjx_dtype": str(qvel.dtype), "max_contact_points": config.terrain.max_contact_points,
      "envs_per_family": _ENVS_PER_FAMILY.value, "replay_seconds": round(seconds, 1),
      "percentiles": [50, 90, 99], "strata": table}))


if __name__ == "__main__":
  app.run(main)
