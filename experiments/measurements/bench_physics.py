"""Measures batched MJX physics steps/s for the Go2 scene and a few model variants.

Each variant is the shipped `robots/go2/scene.xml` with one change applied through `mujoco.MjSpec`,
so the numbers compare option choices on otherwise identical models. For every variant and batch
size the robot starts from the `home` keyframe with ctrl = home pose, `jax.vmap(mjx.step)` runs
inside a `jax.lax.scan`, and the timing excludes compilation. Also reports a 2 s standing check
(minimum trunk height, finiteness) per variant.

Usage:
  python experiments/measurements/bench_physics.py --variants=chosen,feet_only --batches=256,1024
  python experiments/measurements/bench_physics.py \
      --variants=chosen,hfield_feet,hfield_thighs,hfield_trunk --batches=256 --no_stand

Prints ONE JSON line.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Callable

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import robots
from mjx_walk.sim import terrain
from mjx_walk.sim._mjx import mjx

REPO = pathlib.Path(__file__).resolve().parents[2]
ROUGH_CONFIG = REPO / "experiments" / "recipes" / "go2_rough.py"
SCENE = REPO / "robots" / "go2" / "scene.xml"
LEGS = ("FR", "FL", "RR", "RL")
BODY_GEOMS = ("trunk_collision",) + tuple(f"{leg}_thigh_collision" for leg in LEGS)
FEET = tuple(f"{leg}_foot" for leg in LEGS)


def _feet_only(spec: mujoco.MjSpec) -> None:
  for name in BODY_GEOMS:
    spec.geom(name).contype = 0


def _body_condim3(spec: mujoco.MjSpec) -> None:
  for name in BODY_GEOMS:
    spec.geom(name).condim = 3


def _pairs(spec: mujoco.MjSpec) -> None:
  # Same contacts as the bit filter, declared explicitly: MJX then builds its pair list from
  # <pair> elements instead of scanning body pairs.
  for name in BODY_GEOMS + FEET:
    geom = spec.geom(name)
    geom.contype = 0
    spec.add_pair(geomname1="floor", geomname2=name, condim=geom.condim,
                  friction=[0.8, 0.8, 0.02, 0.01, 0.01])


def _trunk_capsule(spec: mujoco.MjSpec) -> None:
  geom = spec.geom("trunk_collision")
  geom.type = mujoco.mjtGeom.mjGEOM_CAPSULE
  geom.size = [0.057, 0.188 - 0.057, 0.0]  # radius, half-length: same 0.376 m overall length
  geom.quat = [np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0]  # capsule axis along trunk x


def _heightfield(colliding: tuple[str, ...]) -> Callable[[mujoco.MjSpec], None]:
  """The floor as experiments/recipes/go2_rough.py's heightfield (flat, 53 x 53 samples of
  0.1 m), with only `colliding` of the robot's body geoms (besides the feet) colliding with it."""
  def apply(spec: mujoco.MjSpec) -> None:
    shape = terrain.heightfield(config_lib.load_file(str(ROUGH_CONFIG)).terrain)
    spec.add_hfield(name="terrain", nrow=shape.nodes, ncol=shape.nodes,
                    size=[shape.half_size, shape.half_size, 1.0, shape.base],
                    userdata=[0.0] * (shape.nodes * shape.nodes))
    floor = spec.geom("floor")
    floor.type = mujoco.mjtGeom.mjGEOM_HFIELD
    floor.hfieldname = "terrain"
    for name in BODY_GEOMS:
      if not any(part in name for part in colliding):
        spec.geom(name).contype = 0
  return apply


def _with_knees(apply_floor: Callable[[mujoco.MjSpec], None]) -> Callable[[mujoco.MjSpec], None]:
  """`apply_floor`, and the Go2's knee spheres (`RobotSpec.knees`, `knee_radius`) colliding."""
  robot = robots.ROBOT_SPECS["go2"]

  def apply(spec: mujoco.MjSpec) -> None:
    apply_floor(spec)
    for name, body in robot.knees:
      spec.body(body).add_geom(
          name=name, type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[robot.knee_radius, 0, 0],
          contype=1, conaffinity=0, condim=1, density=0)
  return apply


def _budget(apply_floor: Callable[[mujoco.MjSpec], None], kept: int
            ) -> Callable[[mujoco.MjSpec], None]:
  """`apply_floor`, with MJX's `max_contact_points` numeric (`terrain.max_contact_points`)."""
  def apply(spec: mujoco.MjSpec) -> None:
    apply_floor(spec)
    spec.add_numeric(name="max_contact_points", data=[kept])
  return apply


def _options(**opts: float) -> Callable[[mujoco.MjSpec], None]:
  def apply(spec: mujoco.MjSpec) -> None:
    for key, value in opts.items():
      setattr(spec.option, key, value)
  return apply


VARIANTS: dict[str, Callable[[mujoco.MjSpec], None]] = {
    "chosen": lambda spec: None,
    "feet_only": _feet_only,
    "body_condim3": _body_condim3,
    "pairs": _pairs,
    "trunk_capsule": _trunk_capsule,
    "iter4_ls6": _options(iterations=4, ls_iterations=6),
    "iter2_ls4": _options(iterations=2, ls_iterations=4),
    "eulerdamp_on": _options(disableflags=0),
    "implicitfast": _options(integrator=mujoco.mjtIntegrator.mjINT_IMPLICITFAST, disableflags=0),
    # Heightfield floors: only the feet collide (as on terrain), or the thighs or trunk too.
    "hfield_feet": _heightfield(()),
    "hfield_thighs": _heightfield(("thigh",)),
    "hfield_trunk": _heightfield(("trunk",)),
    "hfield_knees": _with_knees(_heightfield(())),
    # The knees' floor with MJX keeping the deepest 12, 8 or 4 contacts of each dimension.
    "hfield_knees_budget12": _budget(_with_knees(_heightfield(())), 12),
    "hfield_knees_budget8": _budget(_with_knees(_heightfield(())), 8),
    "hfield_knees_budget4": _budget(_with_knees(_heightfield(())), 4),
}


def build(variant: str) -> mujoco.MjModel:
  spec = mujoco.MjSpec.from_file(str(SCENE))
  VARIANTS[variant](spec)
  return spec.compile()


def home_data(mj_model: mujoco.MjModel, model: mjx.Model, batch: int) -> mjx.Data:
  key_id = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_KEY, "home")
  data = mjx.make_data(model).replace(
      qpos=jnp.asarray(mj_model.key_qpos[key_id]), ctrl=jnp.asarray(mj_model.key_ctrl[key_id]))
  data = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), data)
  # Commit to the device up front: jit keys its cache on committedness, so uncommitted inputs
  # followed by the (committed) outputs would compile the rollout twice.
  return jax.device_put(data, jax.devices()[0])


def make_rollout(model: mjx.Model, steps: int) -> Callable[[mjx.Data], tuple[mjx.Data, jax.Array]]:
  """A jitted scan of `steps` batched physics steps; also returns the trunk height per step."""
  vstep = jax.vmap(mjx.step, in_axes=(None, 0))

  def body(data: mjx.Data, _) -> tuple[mjx.Data, jax.Array]:
    data = vstep(model, data)
    return data, data.qpos[:, 2]  # [B] trunk height

  return jax.jit(lambda data: jax.lax.scan(body, data, None, length=steps))


def bench(variants: list[str], batch: int, steps: int, repeats: int) -> dict[str, dict]:
  """Steps/s of every variant at one batch size, timed round-robin.

  All variants are compiled first, then each repeat times every variant once in turn, so load
  from other processes on the machine hits all variants alike and the ratios stay meaningful.
  """
  rollouts, states, compile_s, times = {}, {}, {}, {v: [] for v in variants}
  for variant in variants:
    mj_model = build(variant)
    model = mjx.put_model(mj_model, impl="jax")
    rollouts[variant] = make_rollout(model, steps)
    t0 = time.perf_counter()
    states[variant], _ = jax.block_until_ready(
        rollouts[variant](home_data(mj_model, model, batch)))
    compile_s[variant] = time.perf_counter() - t0
  for _ in range(repeats):
    for variant in variants:
      t0 = time.perf_counter()
      states[variant], _ = jax.block_until_ready(rollouts[variant](states[variant]))
      times[variant].append(time.perf_counter() - t0)
  return {
      v: {
          "steps_per_s": round(batch * steps / statistics.median(times[v])),
          "compile_s": round(compile_s[v], 1),
      } for v in variants
  }


def stand(variant: str, seconds: float = 2.0) -> dict:
  """Runs one env from home with ctrl = home pose; standing means finite and trunk above 0.2 m."""
  mj_model = build(variant)
  model = mjx.put_model(mj_model, impl="jax")
  steps = round(seconds / mj_model.opt.timestep)
  data, heights = make_rollout(model, steps)(home_data(mj_model, model, 1))
  heights = np.asarray(heights[:, 0])  # [steps]
  finite = bool(np.isfinite(np.asarray(data.qpos)).all() and np.isfinite(heights).all())
  return {
      "finite": finite,
      "min_height": round(float(heights.min()), 4),
      "final_height": round(float(heights[-1]), 4),
  }


def _log(message: str) -> None:
  # Progress goes to stderr so stdout stays the single JSON line.
  print(message, file=sys.stderr, flush=True)


_VARIANTS = flags.DEFINE_string("variants", "chosen", "Comma-separated variants to compare.")
_BATCHES = flags.DEFINE_string("batches", "256,1024", "Comma-separated batch sizes.")
_STEPS = flags.DEFINE_integer("steps", 20, "Physics steps per scan.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed repeats; the median is reported.")
_NO_STAND = flags.DEFINE_bool("no_stand", False, "Skip the 2 s standing check.")


def main(argv: list[str]) -> None:
  del argv
  unknown = sorted(set(_VARIANTS.value.split(",")) - set(VARIANTS))
  if unknown:
    raise app.UsageError(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
  variants = _VARIANTS.value.split(",")
  results = {}
  for variant in variants:
    mjx_data = mjx.make_data(build(variant), impl="jax")
    results[variant] = {
        "ncon_slots": int(mjx_data._impl.contact.dist.shape[0]),
        "nefc": int(mjx_data._impl.efc_J.shape[0]),
    }
  for batch in (int(b) for b in _BATCHES.value.split(",")):
    for variant, numbers in bench(variants, batch, _STEPS.value, _REPEATS.value).items():
      results[variant][f"batch_{batch}"] = numbers
      _log(f"{variant} batch {batch}: {numbers}")
  if not _NO_STAND.value:
    for variant in variants:
      results[variant]["stand"] = stand(variant)
      _log(f"{variant} stand: {results[variant]['stand']}")

  print(json.dumps({
      "bench": "mjx_physics_steps_per_s",
      "scene": str(SCENE.relative_to(SCENE.parents[2])),
      "steps_per_scan": _STEPS.value,
      "repeats": _REPEATS.value,
      "mujoco": mujoco.__version__,
      "jax": jax.__version__,
      "device": jax.devices()[0].device_kind,
      "cpu_count": os.cpu_count(),
      "machine": platform.machine(),
      "variants": results,
  }))


if __name__ == "__main__":
  app.run(main)
