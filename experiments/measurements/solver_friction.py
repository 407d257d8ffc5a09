"""How much friction the constraint solver really applies: a block slides to rest on the floor,
under the robot's solver options (MJX's: one Newton iteration) and under converged ones.

  python experiments/measurements/solver_friction.py [--friction=0.2,0.5,0.8] \
      [--iterations=1,2,3,100]

A 4 kg box (four corner contacts) and a 4 kg, 2.2 cm sphere that slides without turning (one
contact, as the robot's loaded foot) are launched at 1 m/s along a level floor with
Coulomb friction mu; Coulomb's law stops it after v^2 / (2 mu g). Both use the robot file's
timestep, integrator and friction cone (`robots/go2`), with the physics timestep of the default
config; only the Newton iteration cap changes (above one iteration, 50 line-search steps and
tolerance 1e-10). Runs in C MuJoCo, float64, which with one iteration reproduces MJX's panel
figures to float32 rounding (`tests/test_sim2sim.py`). Prints one JSON line: per shape, friction
and iteration cap, the distance slid and its ratio to Coulomb's.
"""

from __future__ import annotations

import json

from absl import app
from absl import flags
import mujoco

from mjx_walk import config as config_lib
from mjx_walk.sim import robots

_FRICTION = flags.DEFINE_list("friction", ["0.2", "0.5", "0.8"], "Friction coefficients.")
_ITERATIONS = flags.DEFINE_list("iterations", ["1", "2", "3", "100"], "Newton iteration caps.")

_SHAPES = {"box": ('<freejoint/>', 'type="box" size="0.1 0.1 0.1" mass="4"'),
           # A sphere would roll; the foot slides without turning, as a loaded foot does.
           "foot": ('<joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 0 1"/>',
                    'type="sphere" size="0.022" mass="4"')}
_SPEED, _SECONDS, _G = 1.0, 2.0, 9.81


def slid(shape: str, mu: float, iterations: int, robot_opt: mujoco.MjOption,
         timestep: float) -> float:
  """Distance the shape slides from 1 m/s to rest (or in 2 s), m."""
  xml = f"""<mujoco><worldbody>
    <geom type="plane" size="0 0 1" friction="{mu} 0.02 0.01" condim="3"/>
    <body pos="0 0 0.2">{_SHAPES[shape][0]}<geom {_SHAPES[shape][1]} friction="{mu} 0.02 0.01"
    condim="3"/></body></worldbody></mujoco>"""
  model = mujoco.MjModel.from_xml_string(xml)
  for name in ("integrator", "cone", "solver", "ls_iterations", "tolerance", "disableflags"):
    setattr(model.opt, name, getattr(robot_opt, name))
  model.opt.timestep = timestep
  model.opt.iterations = iterations
  if iterations > 1:
    model.opt.ls_iterations, model.opt.tolerance = 50, 1e-10
  data = mujoco.MjData(model)
  for _ in range(int(0.5 / timestep)):  # settle on the floor
    mujoco.mj_step(model, data)
  start = float(data.qpos[0])
  data.qvel[:] = 0.0
  data.qvel[0] = _SPEED
  for _ in range(int(_SECONDS / timestep)):
    mujoco.mj_step(model, data)
  return float(data.qpos[0]) - start


def main(argv: list[str]) -> None:
  del argv
  robot = robots.load("go2")
  timestep = config_lib.default().env.physics_timestep or float(robot.mj_model.opt.timestep)
  result = {}
  for shape in _SHAPES:
    for mu in map(float, _FRICTION.value):
      coulomb = _SPEED**2 / (2 * mu * _G)
      for iterations in map(int, _ITERATIONS.value):
        distance = slid(shape, mu, iterations, robot.mj_model.opt, timestep)
        result[f"{shape} mu={mu:g} iterations={iterations}"] = {
            "slid_m": round(distance, 4), "coulomb_m": round(coulomb, 4),
            "ratio": round(distance / coulomb, 3)}
  print(json.dumps({"timestep": timestep, "slides": result}))


if __name__ == "__main__":
  app.run(main)
