"""The second-simulator check: a checkpoint's held-out panel replayed in C MuJoCo, in float64 with
a converged solver and the policy in the loop, beside MJX's evaluation of the same checkpoint.

The same as the MJX panel (`mjx_walk.evaluation.panel`), by construction:
  * the envs, their families and their first states: `panel.panel_envs` and the MJX env's own
    `reset`, carried into C MuJoCo's frame;
  * every family condition: the model fields `families.apply_to_model` writes (ground friction,
    payload and its position, joint friction, motor strength; `families.MODEL_FIELDS`) are
    copied into each env's C model, and the command schedule, the pushes and the actuator delay
    come from the env's own `command`, `push_force` and `actuate`;
  * the observation (`observations.policy_observation`, from the one layout; its height scan, with
    one, cast by C MuJoCo's own rays, `CMuJoCoPanel.scan`), the termination
    rules (`endings.end_reason`), the tracking errors (`env.tracking_errors`) and the
    per-stratum summary (`panel.summarize`).

On a heightfield run (`terrain.ground="heightfield"`), also the ground: each world's model has the
env's heightfield (`robots.scene_spec`, the same shape) holding its family's heights, regenerated
from the manifest (`terrain.held_out_heights`); a trunk that leaves the tile is moved back by
whole tiles at the start of each control step, as `LocomotionEnv._wrap` does (`terrain.wrap`);
and the trunk's height and the trunk's and thighs' contact are measured against the surface
with the env's probes by `mjx_walk.sim.ground`, as the env measures them (the
trunk and thighs do not collide with a heightfield in either simulator). Positions are carried
into MJX's frame (the floor's) for this, so a slope stratum's inclined heightfield is measured
the same way.

Different, on purpose (`CMuJoCoPanel.simulator` records it):
  * precision: float64 against MJX's float32;
  * the solver (`c_options.SOLVERS`): by default Newton to a tolerance of 1e-10 (up to 100
    iterations, 50 line-search steps) against MJX's single iteration; "mjx" keeps MJX's settings,
    to tell a gap the solver makes from the others. The integrator (the robot file's Euler), the
    friction cone and the timestep are MJX's;
  * the collisions: C MuJoCo's own (`c_options.CCDS`, MuJoCo's default or libccd's MPR);
  * the slope: a real inclined floor under vertical gravity, against MJX's level floor under
    tilted gravity. C MuJoCo's world is MJX's turned by the rotation that takes the family's
    gravity to straight down (`floor_rotation`): the spawn pose and velocities and every push are
    turned with it, and heights and tilts are measured from the inclined floor.

Rewards are not recomputed here, so the C MuJoCo table has no `return` column. The check is a
host loop over the panel's envs (`mujoco.mj_step` per env and physics step, one batched policy
call per control step), a minute or two for the default panel on a 2-core CPU.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from typing import Any
from typing import Callable

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.deploy import c_options
from mjx_walk.deploy import gaps
from mjx_walk.evaluation import panel
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state
from mjx_walk.sim import families
from mjx_walk.sim import ground as ground_lib
from mjx_walk.sim import height_scan
from mjx_walk.sim import observations
from mjx_walk.sim import robots
from mjx_walk.sim import terrain as terrain_lib

RAY_START = 0.5
"""How far above the trunk's height plus the scan's lowest reading each scan ray starts, m."""


def _floor_groups(robot: robots.Robot) -> np.ndarray:
  """uint8 [6]: the geom groups the height scan's rays see: the floor's group alone.

  Raises:
    robots.RobotError: another geom of the scene (a part of the robot) is in the floor's group,
      so the rays would hit it.
  """
  model, floor = robot.mj_model, robot.floor_geom_id
  group = int(model.geom_group[floor])
  shared = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or str(g)
            for g in range(model.ngeom) if g != floor and model.geom_group[g] == group]
  if shared:
    raise robots.RobotError(
        f"the height scan's rays see only the floor's geom group {group}, but the geoms "
        f"{shared} are in it too: give them another group in the robot's MJCF")
  seen = np.zeros(6, np.uint8)
  seen[group] = 1
  return seen

Act = Callable[[np.ndarray], np.ndarray]
"""A policy: float32 [N, O] policy observations -> float32 [N, A] actions (clipped or raw)."""


def floor_rotation(gravity: np.ndarray) -> np.ndarray:
  """The smallest rotation taking the direction of `gravity` [3] to straight down. [3, 3]

  MJX builds a slope as a level floor (z = 0) under tilted gravity; turned by this rotation, the
  same world has vertical gravity and a floor inclined by the slope's angle through the origin.
  """
  g = np.asarray(gravity, np.float64) / np.linalg.norm(gravity)
  down = np.array([0.0, 0.0, -1.0])
  axis = np.cross(g, down)
  sin, cos = np.linalg.norm(axis), float(np.dot(g, down))
  if sin < 1e-12:
    return np.eye(3)
  angle = np.arctan2(sin, cos)
  quat = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis / sin])
  rotation = np.zeros(9)
  mujoco.mju_quat2Mat(rotation, quat)
  return rotation.reshape(3, 3)


def _quat(rotation: np.ndarray) -> np.ndarray:
  quat = np.zeros(4)
  mujoco.mju_mat2Quat(quat, rotation.reshape(9))
  return quat


@dataclasses.dataclass
class _World:
  """One panel env in C MuJoCo."""

  model: mujoco.MjModel
  data: mujoco.MjData
  rotation: np.ndarray
  """[3, 3]: from MJX's frame (level floor) to this world (gravity straight down)."""
  heights: np.ndarray | None = None
  """float32 [nodes, nodes]: on a heightfield, the family's ground (also in the model's
  `hfield_data`); None on the plane."""
  ground: tuple[mujoco.MjModel, mujoco.MjData] | None = None
  """With a height scan on a heightfield: the family's ground alone, for the scan's rays
  (`CMuJoCoPanel._ray_ground`); None otherwise (the rays see the world's own floor)."""


class CMuJoCoPanel:
  """The run's held-out panel as C MuJoCo worlds, and the replay of a policy on it.

  Args:
    config: the run's config; its `panel` section defines the panel.
    manifest: the run's manifest (its evaluation families).
    solver: a key of `c_options.SOLVERS`.
    settings: other solver settings (`mujoco.MjOption` fields and values), recorded as "custom";
      for experiments that sweep them. Only with `solver` left at its default.
    ccd: a key of `c_options.CCDS`.
  """

  def __init__(self, config: config_lib.TrainConfig, manifest: families.Manifest,
               solver: str = "converged", settings: dict[str, float] | None = None,
               ccd: str = "native"):
    for name, value, accepted in (("solver", solver, c_options.SOLVERS),
                                  ("ccd", ccd, c_options.CCDS)):
      if value not in accepted:
        raise ValueError(f"{name} {value!r} is invalid: accepted are {', '.join(accepted)}")
    self.solver = solver if settings is None else "custom"
    self._ccd = c_options.CCDS[ccd]
    self._settings = c_options.SOLVERS[solver] if settings is None else dict(settings)
    self.config = config
    self.manifest = manifest
    self.env = env_lib.LocomotionEnv(panel.panel_config(config))
    self.family_params, self.reset_keys = panel.panel_envs(config, manifest)
    self.num_envs = config.panel.num_envs
    robot = self.env.robot
    self._default_pose = jnp.asarray(robot.default_pose, jnp.float32)
    self._qpos_adr = np.asarray(robot.qpos_joint_adr)
    self._qvel_adr = np.asarray(robot.qvel_joint_adr)
    self._family_fields = self._drawn_fields()  # {field: [E, ...]}
    self._scan_points = None  # float32 [S, 2], with a height scan
    self._ray_groups = None  # uint8 [6]: the geom groups the scan's rays see
    if self.env.scan_config is not None:
      self._scan_points = height_scan.grid_points(self.env.scan_config)
      self._ray_groups = _floor_groups(robot)
    self.grid = self.env.grid
    """The heightfield's shape (`terrain.Grid`), or None on the plane."""
    self._grounds = None  # float32 [E, nodes, nodes]: each evaluation family's heights
    if self.grid is not None:
      self._grounds = terrain_lib.held_out_heights(config.terrain,
                                                   manifest.eval_params().terrain)
    self._nominal = self._configure(copy.copy(robot.mj_model))
    self._step_fns = self._compile()

  def _configure(self, model: mujoco.MjModel) -> mujoco.MjModel:
    """Sets the run's timestep, contacts' solref, solver and collision settings, upright gravity."""
    model.opt.timestep = float(self.env.model.opt.timestep)
    model.geom_solref[:] = self.env.robot.mj_model.geom_solref  # the env's own, float64
    model.opt.iterations = self.env.robot.mj_model.opt.iterations  # the env's; `solver` may cap
    for name, value in self._settings.items():
      setattr(model.opt, name, value)
    model.opt.disableflags |= self._ccd
    model.opt.gravity[:] = (0.0, 0.0, -families.STANDARD_GRAVITY)
    return model

  def _inclined(self, rotation: np.ndarray) -> mujoco.MjModel:
    """The nominal model with its floor turned by `rotation` [3, 3].

    MuJoCo places the world body's geoms when it compiles a model (writing `geom_quat` later
    does not move them), so the floor is turned in the MJCF spec and the model compiled again
    (with the env's heightfield, if it has one).
    """
    spec = robots.scene_spec(self.env.robot)
    spec.geom(self.env.robot.spec.floor_geom).quat = _quat(rotation)
    return self._configure(spec.compile())

  @property
  def simulator(self) -> dict[str, Any]:
    """How C MuJoCo runs here, read back from the model it steps."""
    opt = self._nominal.opt
    ground = {} if self.grid is None else {
        "ground": "heightfield per family, the trunk wrapped onto the tile as in MJX"}
    return {
        "engine": f"C MuJoCo {mujoco.__version__}",
        "precision": "float64",
        "settings": self.solver,
        "solver": mujoco.mjtSolver(opt.solver).name.removeprefix("mjSOL_"),
        "iterations": int(opt.iterations),
        "ls_iterations": int(opt.ls_iterations),
        "tolerance": float(opt.tolerance),
        "integrator": mujoco.mjtIntegrator(opt.integrator).name.removeprefix("mjINT_"),
        "cone": mujoco.mjtCone(opt.cone).name.removeprefix("mjCONE_"),
        "ccd": "mpr" if opt.disableflags & c_options.CCDS["mpr"] else "native",
        "physics_timestep": float(opt.timestep),
        "contact_timeconst": sorted({float(t) for t in self._nominal.geom_solref[:, 0]}),
        "slope": "inclined floor, vertical gravity",
        **ground,
    }

  def _drawn_fields(self) -> dict[str, np.ndarray]:
    """Each evaluation family's values of `families.MODEL_FIELDS`, from the env's own
    `apply_to_model`. {field: [E, ...]}"""
    env = self.env

    def fields(params):
      model = families.apply_to_model(env.model, env.robot, params)
      return {name: getattr(model, name) for name in families.MODEL_FIELDS}

    return jax.tree.map(np.asarray, jax.jit(jax.vmap(fields))(self.manifest.eval_params()))

  def worlds(self) -> tuple[list[_World], env_state.EnvState]:
    """Every panel env's C model and first state: env j in family j % E, starting where the MJX
    panel's env j starts (its own `reset`), turned into the inclined floor's world. On a
    heightfield the model holds the family's ground.

    Returns:
      (the worlds, N of them; the MJX panel's first states, leaves [N, ...] NumPy).
    """
    start = jax.device_get(self._step_fns["reset"](self.reset_keys, self.family_params))
    gravity = np.asarray(self.family_params.gravity, np.float64)  # [N, 3]
    num_families = len(self.manifest.eval_families)
    models = {}  # family -> its floor's model, compiled once
    grounds = {}  # family -> its ground for the scan's rays, with a scan on a heightfield
    worlds = []
    for j in range(self.num_envs):
      family = j % num_families
      rotation = floor_rotation(gravity[j])
      if family not in models:
        level = np.array_equal(rotation, np.eye(3))
        models[family] = self._nominal if level else self._inclined(rotation)
      model = copy.copy(models[family])
      for name, values in self._family_fields.items():
        getattr(model, name)[:] = values[family]
      heights = ground = None
      if self._grounds is not None:
        heights = self._grounds[family]
        model.hfield_data[:] = heights.reshape(-1)  # the one heightfield: the floor's
        if self.env.scan_config is not None:
          if family not in grounds:
            grounds[family] = self._ray_ground(heights, rotation)
          ground = grounds[family]
      data = mujoco.MjData(model)
      qpos = np.asarray(start.data.qpos[j], np.float64)
      qvel = np.asarray(start.data.qvel[j], np.float64)
      data.qpos[:] = qpos
      data.qpos[0:3] = rotation @ qpos[0:3]
      mujoco.mju_mulQuat(data.qpos[3:7], _quat(rotation), qpos[3:7])
      data.qvel[:] = qvel
      data.qvel[0:3] = rotation @ qvel[0:3]  # the free joint's angular velocity is in its frame
      data.ctrl[:] = np.asarray(start.data.ctrl[j], np.float64)
      # Poses for what is read before the first step (the height scan's rays); every mj_step
      # computes them again from qpos.
      mujoco.mj_kinematics(model, data)
      worlds.append(_World(model=model, data=data, rotation=rotation, heights=heights,
                           ground=ground))
    return worlds, start

  def _ray_ground(self, heights: np.ndarray, rotation: np.ndarray
                  ) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """A model holding only the family's heightfield, posed as the world's floor, for the scan's
    rays. MuJoCo's heightfield is a surface over a solid base whose top is the geom's z = 0, and
    its ray test hits that top: a ground below 0 (the stairs' pit) would read as level there. So
    this copy holds the heights raised by the ground's depth, as MuJoCo expects them (0 to the
    top of the field's size), with the geom lowered by as much. The world's own floor, which the
    robot collides with, is left as it is."""
    depth = max(0.0, -float(heights.min()))
    top = max(float(heights.max()) + depth, 1e-3)
    grid = self.grid
    spec = mujoco.MjSpec()
    spec.add_hfield(name="ground", nrow=grid.nodes, ncol=grid.nodes,
                    size=[grid.half_size, grid.half_size, top, 0.1],
                    userdata=[0.0] * (grid.nodes * grid.nodes))
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname="ground",
                            pos=rotation @ np.array([0.0, 0.0, -depth]), quat=_quat(rotation))
    model = spec.compile()
    model.hfield_data[:] = ((heights.astype(np.float64) + depth) / top).reshape(-1)
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    return model, data

  def _compile(self) -> dict[str, Callable[..., Any]]:
    """The env's own per-step rules, batched over the panel's envs and jitted."""
    env = self.env
    layout = env.policy_layout

    def observe(readings, family, step, last_action, gait_phase):
      command = env.command(family, step)
      obs = observations.policy_observation(
          layout, env.env_config, readings,
          observations.TaskInputs(command, last_action, gait_phase), self._default_pose)
      return obs, command

    def actuate(family, history, action, step):
      history, targets = env.actuate(family, history, action)
      return history, targets, env.push_force(family, step)

    def judge(readings, trunk_height, normal, body_touches, finite, step, command):
      floor_normal = observations.rotate_inverse(readings.quat, normal)  # trunk frame
      reason = endings.end_reason(env.endings, trunk_height, floor_normal, readings.joint_pos,
                                  body_touches, finite, step)
      lin_vel, ang_vel, _ = observations.trunk_frame(readings)
      errors = jnp.where(finite, env_lib.tracking_errors(lin_vel, ang_vel, command), 0.0)
      return reason, errors

    fns = {"reset": jax.jit(jax.vmap(env.reset)), "observe": jax.jit(jax.vmap(observe)),
           "actuate": jax.jit(jax.vmap(actuate)), "judge": jax.jit(jax.vmap(judge)),
           "clock": jax.jit(env.next_gait_phase)}
    if self.grid is not None:
      grid = self.grid
      geometry = env.ground
      fns.update(trunk_height=jax.jit(jax.vmap(functools.partial(ground_lib.trunk_height,
                                                                 geometry))),
                 touches=jax.jit(lambda field, points: ground_lib.surface_touches(
                     geometry, field, points)),
                 probes=jax.jit(lambda xpos, xmat: ground_lib.probe_points(geometry, xpos, xmat)),
                 wrap=jax.jit(jax.vmap(lambda xy: terrain_lib.wrap(grid, xy))))
    return fns

  def readings(self, worlds: list[_World], scanned: np.ndarray | None = None
               ) -> observations.Readings:
    """What every robot measures now, in its own world frame, the height scan (with one) by
    `scan` for the worlds `scanned` marks (bool [N]; every world by default) and 0 for the
    others, whose readings are not used (an ended episode's, or the judging's, which reads no
    scan). Leaves [N, ...] float32."""
    qpos = np.stack([w.data.qpos for w in worlds])  # [N, nq]
    qvel = np.stack([w.data.qvel for w in worlds])  # [N, nv]
    down = np.tile([0.0, 0.0, -1.0], (len(worlds), 1))
    scans = None
    if self.env.scan_config is not None:
      scanned = np.ones(len(worlds), bool) if scanned is None else scanned
      scans = np.zeros((len(worlds), len(self._scan_points)))  # [N, S]
      for j in np.flatnonzero(scanned):
        scans[j] = self.scan(worlds[j])
    return jax.tree.map(lambda x: np.asarray(x, np.float32), observations.Readings(
        quat=qpos[:, 3:7], lin_vel=qvel[:, 0:3], ang_vel=qvel[:, 3:6], down=down,
        joint_pos=qpos[:, self._qpos_adr], joint_vel=qvel[:, self._qvel_adr],
        height_scan=scans))

  def scan(self, world: _World) -> np.ndarray:
    """float64 [S]: the height scan of a world's robot by C MuJoCo's own ray casting (`mj_ray`
    against the floor geom's group: the plane, the inclined floor, or the family's heightfield
    (`_ray_ground`)), not by the env's surface code. Each point of the grid
    (`height_scan.grid_points`, in the trunk's yaw frame under vertical gravity) casts a ray
    straight down from `RAY_START` above the trunk's height; the reading is the distance to the
    hit minus that lift, clipped, and `clip[1]` where nothing is hit."""
    scan = self.env.scan_config
    data = world.data
    rotation = np.zeros(9)
    mujoco.mju_quat2Mat(rotation, data.qpos[3:7])
    forward = rotation.reshape(3, 3)[:, 0]  # the trunk's x axis, world frame
    heading = np.array([forward[0], forward[1], 0.0])
    heading /= max(np.linalg.norm(heading), 1e-9)
    left = np.cross([0.0, 0.0, 1.0], heading)
    lift = RAY_START - scan.clip[0]
    points = self._scan_points.astype(np.float64)  # [S, 2]
    starts = (data.qpos[0:3] + points[:, 0:1] * heading + points[:, 1:2] * left
              + np.array([0.0, 0.0, lift]))
    down = np.array([0.0, 0.0, -1.0])
    geomid = np.zeros(1, np.int32)
    readings = np.empty(len(points))
    model, ray_data = world.ground or (world.model, data)
    for k, start in enumerate(starts):
      distance = mujoco.mj_ray(model, ray_data, start, down, self._ray_groups, 1, -1, geomid)
      readings[k] = scan.clip[1] if distance < 0 else distance - lift
    return np.clip(readings, scan.clip[0], scan.clip[1])

  def _floor_frame(self, world: _World, points: np.ndarray) -> np.ndarray:
    """World points [..., 3] in MJX's frame, where the floor (or heightfield) is level."""
    return points @ world.rotation  # rotation.T @ p for each p

  def wrap(self, worlds: list[_World]) -> None:
    """On a heightfield, moves each trunk that has left the tile back by whole tiles, as the MJX
    env does at the start of every step (`LocomotionEnv._wrap`): by `terrain.wrap` of its
    position in MJX's frame, along the floor (turned into the world for an inclined one)."""
    if self.grid is None or not worlds:
      return
    xy = np.stack([self._floor_frame(w, w.data.qpos[0:3])[0:2] for w in worlds])
    shifts = np.asarray(self._step_fns["wrap"](xy.astype(np.float32)), np.float64)  # [N, 2]
    for world, shift in zip(worlds, shifts):
      if shift.any():
        world.data.qpos[0:3] -= world.rotation @ np.array([shift[0], shift[1], 0.0])

  def body_touches(self, world: _World) -> np.ndarray:
    """bool [K]: which body geoms (the trunk, the thighs) touch the floor, by
    `ground.body_touches`'s rules: on the plane, a penetrating contact in the last physics step;
    on a heightfield, one of the geom's probe points within its radius of the surface, from the
    last physics step's positions."""
    if self.grid is not None:
      data = world.data
      points = np.asarray(self._step_fns["probes"](
          data.geom_xpos.astype(np.float32),
          data.geom_xmat.reshape(-1, 3, 3).astype(np.float32)), np.float64)  # [P, 3]
      points = self._floor_frame(world, points)
      return np.asarray(self._step_fns["touches"](world.heights, points.astype(np.float32)))
    data = world.data
    contacts = data.contact
    return ground_lib.floor_touches(self.env.ground, contacts.geom[:data.ncon],
                                    contacts.dist[:data.ncon], xp=np)

  def trunk_heights(self, worlds: list[_World]) -> np.ndarray:
    """float32 [N]: each trunk's height above its floor: along the inclined floor's normal on
    the plane; on a heightfield, above the surface's mean under its hips (`ground.trunk_height`,
    the pose taken into MJX's frame)."""
    if self.grid is None:
      return np.array([w.rotation[:, 2] @ w.data.qpos[0:3] for w in worlds], np.float32)
    positions = np.stack([self._floor_frame(w, w.data.qpos[0:3]) for w in worlds])
    quats = np.zeros((len(worlds), 4))
    for quat, w in zip(quats, worlds):  # the floor's inverse turn, then the trunk's
      mujoco.mju_mulQuat(quat, _quat(w.rotation.T), w.data.qpos[3:7])
    return np.asarray(self._step_fns["trunk_height"](
        np.stack([w.heights for w in worlds]), positions.astype(np.float32),
        quats.astype(np.float32)))

  def observe(self, worlds: list[_World], step: np.ndarray, last_action: np.ndarray,
              gait_phase: np.ndarray, alive: np.ndarray | None = None
              ) -> tuple[jax.Array, jax.Array]:
    """Every world's policy observation [N, O] and its command [N, 3] at control step `step`
    [N], from the readings, the previous actions [N, A] and the gait clocks [N]; the height scan
    is cast for the worlds `alive` marks (bool [N]; all by default), the others' observations
    are not used."""
    return self._step_fns["observe"](self.readings(worlds, alive), self.family_params, step,
                                     last_action, gait_phase)

  def judge(self, worlds: list[_World], finite: np.ndarray, body_touches: np.ndarray,
            step: np.ndarray, command: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Why each world's episode ends after its step, and the step's tracking errors.

    Heights and tilts are measured from each world's inclined floor, through the origin; on a
    heightfield, heights from the surface's mean under the hips (`trunk_heights`).

    Args:
      worlds: the panel's worlds after their physics steps, N of them.
      finite: bool [N], the state stayed finite; body_touches: bool [N, K], which body geoms
        touch the floor.
      step: int32 [N], control steps taken before this one; command: float32 [N, 3], the
        command the step was taken under.

    Returns:
      (int32 [N] `ResetReason`s, float32 [N, 2] xy-velocity and yaw-rate errors).
    """
    height = self.trunk_heights(worlds)
    normal = np.stack([w.rotation[:, 2] for w in worlds]).astype(np.float32)  # world frame
    return jax.device_get(self._step_fns["judge"](
        self.readings(worlds, np.zeros(len(worlds), bool)), height, normal, body_touches,
        finite, step, command))

  def physics(self, env_index: int, world: _World, targets: np.ndarray, push: np.ndarray
              ) -> bool:
    """One control step of panel env `env_index`'s physics: its PD targets [A] and push [3] (in
    MJX's frame) applied, `substeps` C MuJoCo steps. Returns whether the state stayed finite."""
    del env_index  # for subclasses that record the steps
    world.data.ctrl[:] = targets
    world.data.xfrc_applied[self.env.robot.trunk_body_id, 0:3] = world.rotation @ push
    for _ in range(self.env.substeps):
      mujoco.mj_step(world.model, world.data)
    # C MuJoCo resets a state whose accelerations blow up and only warns; that is a non-finite
    # state as MJX would see it.
    return bool(np.isfinite(world.data.qpos).all() and np.isfinite(world.data.qvel).all()
                and not world.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number)

  def replay(self, act: Act, strata: list[str] | None = None
             ) -> tuple[panel.EpisodeStats, float]:
    """Plays one episode per panel env with `act` in the loop.

    Args:
      act: the policy.
      strata: the strata whose envs play (`panel.select_strata`); None, every env. The others'
        episodes are not played: their statistics stay empty.

    Returns:
      (EpisodeStats with NumPy leaves [N], as the MJX panel's; the seconds the replay took).
    """
    started = time.perf_counter()
    env, num_envs = self.env, self.num_envs
    worlds, start = self.worlds()
    history = np.asarray(start.task.action_history)  # [N, D+1, A]
    last_action = np.asarray(start.task.last_action)  # [N, A]
    gait_phase = np.asarray(start.task.gait_phase)  # [N]
    step = np.zeros(num_envs, np.int32)
    stats = jax.tree.map(np.asarray, panel.empty_stats(num_envs))
    if strata is not None:
      stats = stats.replace(alive=np.isin(panel.env_strata(self.manifest, num_envs), strata))
    clip = env.env_config.action_clip
    for _ in range(env.episode_steps):
      # The wrap first: the height scan reads the ground from the tile, as MJX's does.
      self.wrap([worlds[j] for j in np.flatnonzero(stats.alive)])
      obs, command = self.observe(worlds, step, last_action, gait_phase, stats.alive)
      action = np.clip(np.asarray(act(np.asarray(obs)), np.float32), -clip, clip)  # [N, A]
      history, targets, push = jax.device_get(
          self._step_fns["actuate"](self.family_params, history, action, step))
      finite = np.ones(num_envs, bool)
      body_touches = np.zeros((num_envs, len(env.ground.body_geoms)), bool)
      for j in np.flatnonzero(stats.alive):
        finite[j] = self.physics(j, worlds[j], targets[j], push[j])
        body_touches[j] = self.body_touches(worlds[j]) & finite[j]
      reason, errors = self.judge(worlds, finite, body_touches, step, command)
      stats = panel.accumulate_step(stats, reason, np.zeros(num_envs, np.float32),
                                    errors[:, 0], errors[:, 1], body_touches.any(axis=1))
      last_action = action
      gait_phase = np.asarray(self._step_fns["clock"](gait_phase))
      step = step + 1
      if not stats.alive.any():
        break
    return stats, time.perf_counter() - started

  def summarize(self, stats: panel.EpisodeStats) -> dict[str, Any]:
    """The per-stratum table of a replay, as `panel.summarize` gives MJX's, without `return`."""
    summary = panel.summarize(stats, self.manifest, self.config)
    for figures in summary["strata"].values():
      del figures["return"]
    return summary


def record(pol: policy_lib.Policy, policy_kind: str, envs_per_family: int,
           mjx_summary: dict[str, Any], c_summary: dict[str, Any], simulator: dict[str, Any],
           seconds: float, intervals: dict[str, dict[str, list[float | None]]] | None = None
           ) -> dict[str, Any]:
  """The `kind="sim2sim"` ledger record of one check; of one seed of a multi-seed run, with its
  `seed`. `envs_per_family` is the panel's in the check (which may have enlarged the run's)."""
  seed = {} if pol.named_seed is None else {"seed": pol.named_seed}
  return {
      "kind": "sim2sim", "update": pol.step, "env_steps": pol.step * pol.config.batch_size,
      "policy": policy_kind, **seed, "simulator": simulator, "panel_hash": c_summary["panel_hash"],
      "envs_per_family": envs_per_family,
      "wall_seconds": seconds, "targets": gaps.TARGETS, "mjx": mjx_summary["strata"],
      "strata": c_summary["strata"],
      "gap": gaps.gaps(mjx_summary["strata"], c_summary["strata"], intervals),
  }


def check(pol: policy_lib.Policy, act: Act, policy_kind: str, solver: str = "converged",
          envs_per_family: int | None = None, strata: list[str] | None = None,
          ccd: str = "native") -> dict[str, Any]:
  """Evaluates `pol` on its run's panel in MJX and replays the panel in C MuJoCo with `act`.

  Args:
    pol: the loaded checkpoint; MJX evaluates it with `Policy.act`.
    act: the policy C MuJoCo runs in the loop (the ONNX export, or `pol.act`).
    policy_kind: "onnx" or "jax", recorded.
    solver: a key of `c_options.SOLVERS`.
    envs_per_family: the envs of each evaluation family in both simulators; None keeps the
      run's `panel.envs_per_family`. More envs play the same families from more first states
      (`panel.panel_envs`): more episodes per stratum, so narrower gap intervals.
    strata: the strata C MuJoCo replays and the record holds (`panel.select_strata`); None, all.
      MJX evaluates the whole panel either way, so each env starts as in the full check.
    ccd: a key of `c_options.CCDS`.

  Returns:
    The sim2sim record (`record`).

  Raises:
    ValueError: `strata` names none, or one the run's panel does not hold.
  """
  replayed = panel.select_strata(pol.manifest, strata)
  config = pol.config
  if envs_per_family is not None:
    config = panel.enlarged(config, envs_per_family)
  evaluator = panel.make_evaluator(config, pol.manifest, pol.networks)
  mjx_stats, _ = jax.device_get(evaluator.run(jax.device_get(pol.params)))
  world = CMuJoCoPanel(config, pol.manifest, solver, ccd=ccd)
  c_stats, seconds = world.replay(act, replayed)
  mjx_summary = panel.summarize(mjx_stats, pol.manifest, config)
  c_summary = world.summarize(c_stats)
  intervals = gaps.gap_intervals(mjx_stats, c_stats, pol.manifest, config)
  for by_stratum in (mjx_summary["strata"], c_summary["strata"], intervals):
    for name in set(by_stratum) - set(replayed):
      del by_stratum[name]
  return record(pol, policy_kind, config.panel.envs_per_family, mjx_summary, c_summary,
                world.simulator, seconds, intervals)
