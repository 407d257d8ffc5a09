"""The joystick locomotion task for ONE env: reset, step, observations, terminations, auto-reset.

`LocomotionEnv` holds only static things (the nominal `mjx.Model`, index arrays, the config).
`reset(key, family) -> EnvState` and `step(state, action) -> EnvState` are pure functions of one
env; the trainer batches them with `jax.vmap`. The env's seed-family draw (`FamilyParams`) is data
carried in its state: every step writes it into the nominal model with `.replace`, applies the
family's pushes and actuator delay, and reads the command from the family's schedule. The draw
survives auto-resets, so an env stays in its family for the whole run.

Episode ends carry a `ResetReason`. `fall`, `body_contact`, `joint_limit` and `nonfinite` are
terminations (no bootstrap); `timeout` is a truncation (bootstrapped from the value of the true
final observation). `step` auto-resets a finished env in place and keeps the pre-reset observation
in `EnvState.final_obs`, so the trainer never bootstraps from the next episode's first frame.
A non-finite physics state resets only its own env, is counted as `nonfinite`, and is replaced by
zeros before it can reach any reward, observation or metric.

On a heightfield (`terrain.ground="heightfield"`, `mjx_walk.sim.terrain`) the env also carries
its curriculum level (`EnvState.terrain`); its ground is its family's shape at that level,
written into the model's `hfield_data` on every step. Heights (trunk, feet) are measured from
the surface under them, the trunk and thighs touch the ground when their probe points
(`_body_probes`) reach the surface, a trunk that leaves the tile is moved back onto it (WRAP),
and each auto-reset moves the level by what the ended episode walked against its command.

`step` is a sequence of named stages: (wrap), physics, terminations, reward, signals, auto-reset.
Every step reports what the batch audits (`mjx_walk.learn.audit`) read of it as typed
`StepSignals` in `EnvState.signals`, measured before any auto-reset: the trunk height and tilt it
ended in, each foot's contact at both ends of the step, its mean horizontal speed over the step
and its air time, and trunk or thigh contact with the ground. `EnvState.metrics` is for logging
only. `step_with_final` also returns the whole state the step ended in before any auto-reset, from
which the trainer records the early-end traces (`mjx_walk.learn.audit.EpisodeTrace`).
"""

from __future__ import annotations

import enum
from typing import Any
from typing import NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import families
from mjx_walk.sim import observations
from mjx_walk.sim import rewards
from mjx_walk.sim import robots
from mjx_walk.sim import terrain as terrain_lib
from mjx_walk.sim import _mjx
from mjx_walk.sim._mjx import mjx

Observation = dict[str, jax.Array]  # {"policy": [O], "critic": [P]}


class ResetReason(enum.IntEnum):
  """Why an episode ended. NONE means it did not end on this step."""

  NONE = 0
  FALL = 1
  TIMEOUT = 2
  JOINT_LIMIT = 3
  BODY_CONTACT = 4
  NONFINITE = 5

  @property
  def label(self) -> str:
    """The reason's name in ledgers, evaluation records and trace files: "fall", "timeout"."""
    return self.name.lower()


ENDINGS: tuple[ResetReason, ...] = tuple(r for r in ResetReason if r != ResetReason.NONE)
"""Every reason an episode ends, in code order (code r + 1 is `ENDINGS[r]`)."""
REASON_NAMES: tuple[str, ...] = tuple(r.label for r in ENDINGS)
"""The labels of `ENDINGS`: the `reset/<name>` ledger keys and the evaluation's reset counts."""
TERMINATION_NAMES: tuple[str, ...] = tuple(
    r.label for r in ENDINGS if r != ResetReason.TIMEOUT)
"""The endings that are terminations (no bootstrap): every one but the time limit."""

@flax.struct.dataclass
class TaskState:
  """Per-env task bookkeeping carried between control steps."""

  command: jax.Array
  """float32 [3]: (vx m/s, vy m/s, yaw rate rad/s) in the trunk frame."""
  last_action: jax.Array
  """float32 [A]: the previous (clipped) policy action."""
  action_history: jax.Array
  """float32 [D+1, A]: the latest policy actions, newest first; the actuators get entry
  `family.action_delay`."""
  feet_air_time: jax.Array
  """float32 [F]: seconds each foot has been off the ground."""
  last_contact: jax.Array
  """bool [F]: foot contact on the previous step."""
  step: jax.Array
  """int32 []: control steps since the episode began."""
  episode_return: jax.Array
  """float32 []: reward summed over the episode so far."""
  foot_xy: jax.Array
  """float32 [F, 2]: world-frame horizontal position of each foot at the end of the previous
  step, m; differenced to give the foot's horizontal speed."""
  gait_phase: jax.Array
  """float32 []: the trot clock in [0, 1), advanced by gait_hz / control_hz per step; random at
  reset. Constant 0 without a clock (`env.gait_hz` = 0)."""


@flax.struct.dataclass
class StepSignals:
  """What the batch audits (`mjx_walk.learn.audit`) read of one control step.

  Measured at the end of the step, before any auto-reset; F is the number of feet, in
  `LocomotionEnv.foot_names` order. Batched, every field gains the leading env axes ([N] or
  [T, N]).
  """

  trunk_height: jax.Array
  """float32 []: height of the trunk origin above the floor plane z = 0, m."""
  trunk_tilt: jax.Array
  """float32 []: angle between the trunk's up axis and the floor normal, degrees (0 level, 180
  upside down)."""
  contact: jax.Array
  """bool [F]: each foot on the ground at the end of the step (the start-of-step value on a
  non-finite step, so that it reports no contact event)."""
  last_contact: jax.Array
  """bool [F]: each foot on the ground at the start of the step (across an auto-reset, the new
  episode's first state)."""
  foot_speed: jax.Array
  """float32 [F]: each foot's mean horizontal speed over the step, m/s (its displacement over
  the control period; 0 on a non-finite step)."""
  air_time: jax.Array
  """float32 [F]: seconds each foot has been in the air, counting this step; meaningful at a
  touchdown, where it is the length of the swing that ended."""
  body_contact: jax.Array
  """bool []: the trunk or a thigh touches the ground (False on a non-finite step)."""


class _Feet(NamedTuple):
  """What one step's stages read of the feet at the end of the step. F feet."""

  height: jax.Array
  """float32 [F]: lowest point of each foot sphere above the floor, m."""
  contact: jax.Array
  """bool [F]: height below `env.foot_contact_distance`."""
  debounced_contact: jax.Array
  """bool [F]: in contact now or at the start of the step (debounces one-step chatter)."""
  first_contact: jax.Array
  """bool [F]: a debounced touchdown after time in the air."""
  air_time: jax.Array
  """float32 [F]: seconds in the air, counting this step."""
  xy: jax.Array
  """float32 [F, 2]: world-frame horizontal position, m."""
  speed: jax.Array
  """float32 [F]: mean horizontal speed over the step, m/s."""


@flax.struct.dataclass
class EnvState:
  """One env's full state. Batched along a leading axis by `jax.vmap`."""

  data: mjx.Data
  obs: Observation
  """Observation the policy acts on next (the new episode's first one after an auto-reset)."""
  final_obs: Observation
  """Observation at the end of this step before any auto-reset; equals `obs` when not done."""
  reward: jax.Array
  """float32 []: reward of the last step."""
  terminated: jax.Array
  """bool []: the last step ended the episode by a failure (no bootstrap)."""
  truncated: jax.Array
  """bool []: the last step hit the time limit (bootstrap from `final_obs`)."""
  reset_reason: jax.Array
  """int32 []: a `ResetReason`; NONE when the episode continues."""
  key: jax.Array
  family: families.FamilyParams
  """This env's seed-family draw; unchanged by auto-resets."""
  task: TaskState
  signals: StepSignals
  """What the batch audits read of the last step, measured before any auto-reset (all zero and
  False after `reset`)."""
  metrics: dict[str, jax.Array]
  """Logging only, float32 [] each: `reward/<term>` scaled per-step terms,
  `tracking/lin_vel_error` (m/s, xy) and `tracking/yaw_rate_error` (rad/s) of the last step, and
  `episode/return`, `episode/length` of the episode that ended on it (0 otherwise). On a
  heightfield also `terrain/type` and `terrain/level` of the env after the step, and
  `terrain/promoted`, `terrain/demoted` (1 where the episode that ended moved its env's level)."""
  terrain: terrain_lib.TerrainState | None = None
  """The env's ground and curriculum level on a heightfield; None on the plane. An auto-reset
  moves the level (`terrain.next_level`) and builds the new episode's ground."""


def tracking_errors(lin_vel: jax.Array, ang_vel: jax.Array, command: jax.Array) -> jax.Array:
  """float32 [2]: (|v_xy - command_xy| m/s, |yaw rate - command yaw rate| rad/s), from the trunk
  frame's linear and angular velocity [3] and the command [3] the step was taken under."""
  return jnp.stack([jnp.linalg.norm(lin_vel[:2] - command[:2]), jnp.abs(ang_vel[2] - command[2])])


def _tree_where(cond: jax.Array, on_true: Any, on_false: Any) -> Any:
  return jax.tree.map(lambda a, b: jnp.where(cond, a, b), on_true, on_false)


class LocomotionEnv:
  """Joystick velocity tracking for a quadruped in MJX.

  Args:
    config: the run configuration. The env reads `config.env`, `config.reward` and, of
      `config.families`, `action_delay_steps` (its upper end sizes the action history);
      `observation_spec` also draws a dummy training family from `config.families` (and
      `config.env.episode_seconds`) for its shapes. Nothing else of the config is read.
  """

  def __init__(self, config: config_lib.TrainConfig):
    self.config = config
    self.env_config = config.env
    self.reward_config = config.reward
    self.terrain_config = config.terrain
    self.grid = None
    """The heightfield's shape (`terrain.Grid`), or None on the plane."""
    if config.terrain.heightfield:
      self.grid = terrain_lib.Grid.from_config(config.terrain)
    self.robot = robots.load(config.env.robot, terrain_lib.heightfield(config.terrain))
    mj_model = self.robot.mj_model
    if config.env.physics_timestep:
      mj_model.opt.timestep = config.env.physics_timestep  # this env's own compiled copy
    # This process's own first device: MJX's default, the first device of all, belongs to
    # process 0 in a multi-process run.
    self.model = mjx.put_model(mj_model, device=jax.local_devices()[0], impl="jax")
    self.substeps = config_lib.substeps(config, float(mj_model.opt.timestep))
    self.dt = 1.0 / config.env.control_hz
    self.episode_steps = round(config.env.episode_seconds * config.env.control_hz)
    self.max_action_delay = int(config.families.action_delay_steps[1])

    self._default_pose = jnp.asarray(self.robot.default_pose, jnp.float32)  # [A]
    self._init_qpos = jnp.asarray(self.robot.init_qpos, jnp.float32)  # [nq]
    self._qpos_adr = jnp.asarray(self.robot.qpos_joint_adr)  # [A]
    self._qvel_adr = jnp.asarray(self.robot.qvel_joint_adr)  # [A]
    self._joint_lower = jnp.asarray(self.robot.joint_lower, jnp.float32)  # [A]
    self._joint_upper = jnp.asarray(self.robot.joint_upper, jnp.float32)  # [A]
    self._foot_geoms = jnp.asarray(self.robot.foot_geom_ids)  # [F]
    self._foot_radius = jnp.asarray(mj_model.geom_size[self.robot.foot_geom_ids, 0], jnp.float32)
    self._body_contact_geoms = jnp.asarray(self.robot.body_contact_geom_ids)  # [K]
    if self.grid is not None:
      probes = _body_probes(mj_model, self.robot.body_contact_geom_ids)
      self._probe_geoms, self._probe_points, self._probe_radius = (jnp.asarray(p) for p in probes)
    self._gait_offsets = jnp.asarray(
        [observations.TROT_OFFSETS[name] for name in self.foot_names], jnp.float32)  # [F]
    self.policy_layout = observations.policy_layout(config.env, self.action_size,
                                                    self.foot_names)
    """The policy observation's blocks (`mjx_walk.sim.observations`)."""
    self._reward_scales = {
        name: scale for name, scale in config.reward.scales().items() if scale != 0.0
    }

  # SPECS

  @property
  def action_size(self) -> int:
    return self.robot.num_actions

  @property
  def num_feet(self) -> int:
    return len(self.robot.foot_geom_ids)

  @property
  def foot_names(self) -> tuple[str, ...]:
    """Short foot names in foot order ("FR", "FL", ...): the geom names without "_foot"."""
    return tuple(name.removesuffix("_foot") for name in self.robot.spec.feet)

  def observation_spec(self) -> Observation:
    """Shapes of one env's observations, from an abstract trace of `reset` (no physics runs)."""
    family = jax.eval_shape(lambda: families.stack_params([families.draw_family(
        0, self.config, None)], self.config.terrain))
    family = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), family)
    state = jax.eval_shape(self.reset, jax.random.key(0), family)
    return state.obs

  # COMMANDS AND PUSHES

  def command(self, family: families.FamilyParams, step: jax.Array) -> jax.Array:
    """The family's scheduled command at control step `step` of the episode. [3]"""
    started = family.command_times <= step * self.dt  # [K]; the first entry starts at 0
    return family.commands[jnp.sum(started) - 1]

  def push_force(self, family: families.FamilyParams, step: jax.Array) -> jax.Array:
    """World-frame force on the trunk during control step `step`, N. [3]

    Push times and durations are rounded to whole control steps, so a push of F newtons for
    d seconds changes the robot's momentum by exactly F * d.
    """
    start = jnp.round(family.push_times / self.dt)  # [P]
    duration = jnp.round(family.push_seconds / self.dt)
    active = (step >= start) & (step < start + duration)  # [P]
    return jnp.sum(jnp.where(active[:, None], family.push_forces, 0.0), axis=0)

  # RESET

  def reset(self, key: jax.Array, family: families.FamilyParams,
            level: jax.Array | None = None) -> EnvState:
    """Starts a new episode at the family's spawn pose with small per-env perturbations.

    Args:
      key: PRNG key for this env.
      family: this env's family draw (one family, no leading axis).
      level: on a heightfield, the curriculum level of the episode; None draws the env's first
        level uniformly from 0 .. `terrain.initial_level_max`. Ignored on the plane.

    Returns:
      The first state of an episode; `obs` is computed from the reset pose, and `signals` and
      `metrics` are zeros (no step taken yet).
    """
    if self.grid is None:
      key, k_joint, k_vel, k_obs, k_phase = jax.random.split(key, 5)
      ground = field = None
    else:
      key, k_joint, k_vel, k_obs, k_phase, k_level = jax.random.split(key, 6)
      ground = self._ground(k_level, level)
      field = terrain_lib.heights(self.terrain_config, family.terrain, ground.level)
    env = self.env_config
    data = self._spawn(k_joint, k_vel, family, field)
    foot_height = self._foot_height(data, field)
    step = jnp.zeros((), jnp.int32)
    task = TaskState(
        command=self.command(family, step),
        last_action=jnp.zeros(self.action_size),
        action_history=jnp.zeros((self.max_action_delay + 1, self.action_size)),
        feet_air_time=jnp.zeros(self.num_feet),
        last_contact=foot_height < env.foot_contact_distance,
        step=step,
        episode_return=jnp.zeros(()),
        foot_xy=data.geom_xpos[self._foot_geoms, :2],
        gait_phase=jax.random.uniform(k_phase) if env.gait_hz else jnp.zeros(()),
    )
    obs = self._observe(data, task, family, k_obs, field)
    signals, metrics = self._no_step_yet()
    if ground is not None:
      metrics.update(self._terrain_metrics(family, ground, ground, jnp.zeros((), bool)))
    return EnvState(
        data=data,
        obs=obs,
        final_obs=obs,
        reward=jnp.zeros(()),
        terminated=jnp.zeros((), bool),
        truncated=jnp.zeros((), bool),
        reset_reason=jnp.asarray(ResetReason.NONE, jnp.int32),
        key=key,
        family=family,
        task=task,
        signals=signals,
        metrics=metrics,
        terrain=ground,
    )

  def _ground(self, key: jax.Array, level: jax.Array | None) -> terrain_lib.TerrainState:
    """A new episode's curriculum state: `level` (or a first level drawn from `key`), with
    nothing walked yet."""
    cfg = self.terrain_config
    if level is None:
      level = jax.random.randint(key, (), 0, cfg.initial_level_max + 1)
    zero = jnp.zeros(())
    return terrain_lib.TerrainState(level=jnp.asarray(level, jnp.int32), offset=jnp.zeros(2),
                                    commanded=zero, progress=zero)

  def heights(self, state: EnvState) -> jax.Array | None:
    """float32 [nodes, nodes]: the env's heightfield this episode, m (None on the plane)."""
    if state.terrain is None:
      return None
    return terrain_lib.heights(self.terrain_config, state.family.terrain, state.terrain.level)

  def _terrain_metrics(self, family: families.FamilyParams, before: terrain_lib.TerrainState,
                       after: terrain_lib.TerrainState, done: jax.Array) -> dict[str, jax.Array]:
    moved = jnp.where(done, after.level - before.level, 0)
    return {"terrain/type": family.terrain.type.astype(jnp.float32),
            "terrain/level": after.level.astype(jnp.float32),
            "terrain/promoted": (moved > 0).astype(jnp.float32),
            "terrain/demoted": (moved < 0).astype(jnp.float32)}

  def _spawn(self, k_joint: jax.Array, k_vel: jax.Array, family: families.FamilyParams,
             field: jax.Array | None = None) -> mjx.Data:
    """The physics state an episode starts in: the family's spawn pose, joints perturbed
    around the standing pose by up to `env.init_joint_noise` rad, trunk velocities by up to
    `env.init_velocity_noise`. On a heightfield the robot stands on the ground under it."""
    env = self.env_config
    qpos = self._init_qpos  # [nq]
    joint_noise = env.init_joint_noise * jax.random.uniform(
        k_joint, (self.action_size,), minval=-1.0, maxval=1.0)  # [A]
    joints = jnp.clip(self._default_pose + joint_noise, self._joint_lower, self._joint_upper)
    yaw = family.spawn_yaw
    yaw_quat = jnp.array([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)])  # [4]
    qpos = (qpos.at[0:2].add(family.spawn_offset).at[3:7].set(yaw_quat)
            .at[self._qpos_adr].set(joints))
    if field is not None:
      qpos = qpos.at[2].add(terrain_lib.surface(field, self.grid, qpos[0:2])[0])
    qvel = jnp.zeros(self.model.nv).at[0:6].set(
        env.init_velocity_noise * jax.random.uniform(k_vel, (6,), minval=-1.0, maxval=1.0))
    data = mjx.make_data(self.model).replace(qpos=qpos, qvel=qvel, ctrl=joints)
    # Kinematics alone positions the feet for the first observation; mjx.step recomputes the
    # full forward pass before it integrates, so nothing else needs to be valid here.
    return _mjx.kinematics(self.model, data)

  def _no_step_yet(self) -> tuple[StepSignals, dict[str, jax.Array]]:
    """Signals and metrics of a state no step has led to: zeros and False, shaped as a step's."""
    zero = jnp.zeros(())
    per_foot = jnp.zeros(self.num_feet)
    no_contact = jnp.zeros(self.num_feet, bool)
    signals = StepSignals(trunk_height=zero, trunk_tilt=zero, contact=no_contact,
                          last_contact=no_contact, foot_speed=per_foot, air_time=per_foot,
                          body_contact=jnp.zeros((), bool))
    metrics = {f"reward/{name}": zero for name in self._reward_scales}
    metrics.update({name: zero for name in ("tracking/lin_vel_error", "tracking/yaw_rate_error",
                                            "episode/return", "episode/length")})
    return signals, metrics

  # OBSERVATIONS

  def _touches_floor(self, data: mjx.Data, geoms: jax.Array) -> jax.Array:
    """Whether any of `geoms` penetrates the floor, from the last substep's contacts.

    MJX keeps a fixed-size contact list whose geom pairs are filled in by the collision pass,
    so the pairs of interest are picked out by id on every call (a few dozen comparisons).
    """
    contact = data._impl.contact  # pylint: disable=protected-access
    floor = self.robot.floor_geom_id
    pair = contact.geom  # [C, 2]
    mine = ((pair[:, 0] == floor) & jnp.isin(pair[:, 1], geoms)) | (
        (pair[:, 1] == floor) & jnp.isin(pair[:, 0], geoms))  # [C]
    return (mine & (contact.dist < 0.0)).any()

  def _body_touches_floor(self, data: mjx.Data, finite: jax.Array,
                          field: jax.Array | None = None) -> jax.Array:
    """bool []: the trunk or a thigh touches the floor (never on a non-finite step).

    On a heightfield, where they do not collide, a body geom touches the ground when any of its
    probe points (`_body_probes`) is within its radius of the surface.
    """
    if field is None:
      return self._touches_floor(data, self._body_contact_geoms) & finite
    points = self.probe_points(data.geom_xpos, data.geom_xmat)
    return self.probes_touch_ground(field, points) & finite

  def probe_points(self, geom_xpos: jax.Array, geom_xmat: jax.Array) -> jax.Array:
    """float32 [P, 3]: the body-contact probe points (`_body_probes`) in the frame of the geom
    positions [ngeom, 3] and orientations [ngeom, 3, 3] given (heightfield only)."""
    xpos, xmat = geom_xpos[self._probe_geoms], geom_xmat[self._probe_geoms]
    return xpos + jnp.einsum("pij,pj->pi", xmat, self._probe_points)

  def probes_touch_ground(self, field: jax.Array, points: jax.Array) -> jax.Array:
    """bool []: a probe point [P, 3] is within its radius of the heightfield's surface."""
    return (terrain_lib.clearance(field, self.grid, points, self._probe_radius) < 0.0).any()

  def height_above_ground(self, field: jax.Array, position: jax.Array) -> jax.Array:
    """float32 []: height of a point [3] above the heightfield's surface under it, m."""
    return position[2] - terrain_lib.surface(field, self.grid, position[0:2])[0]

  def _trunk_height(self, data: mjx.Data, field: jax.Array | None = None) -> jax.Array:
    """Height of the trunk origin above the ground under it, m (above z = 0 on the plane)."""
    if field is None:
      return data.qpos[2]
    return self.height_above_ground(field, data.qpos[0:3])

  def _floor_normal(self, data: mjx.Data) -> jax.Array:
    """The floor normal (world +z) in the trunk frame. [3]"""
    return observations.rotate_inverse(data.qpos[3:7], jnp.array([0.0, 0.0, 1.0]))

  def _foot_height(self, data: mjx.Data, field: jax.Array | None = None) -> jax.Array:
    """Lowest point of each foot sphere above the floor plane z = 0, m; on a heightfield, the
    sphere's distance to the surface's plane under it. [F]"""
    if field is None:
      return data.geom_xpos[self._foot_geoms, 2] - self._foot_radius
    return terrain_lib.clearance(field, self.grid, data.geom_xpos[self._foot_geoms],
                                 self._foot_radius)

  def readings(self, data: mjx.Data, family: families.FamilyParams) -> observations.Readings:
    """What the robot measures in this physics state. The direction of gravity is the
    family's (tilted on a slope), as an IMU would measure it."""
    down = family.gravity / jnp.maximum(jnp.linalg.norm(family.gravity), 1e-6)  # [3]
    return observations.Readings(
        quat=data.qpos[3:7], lin_vel=data.qvel[0:3], ang_vel=data.qvel[3:6], down=down,
        joint_pos=data.qpos[self._qpos_adr], joint_vel=data.qvel[self._qvel_adr])

  def _trunk_frame(self, data: mjx.Data, family: families.FamilyParams
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Trunk linear velocity, angular velocity and gravity direction, all in the trunk frame."""
    return observations.trunk_frame(self.readings(data, family))

  def _observe(self, data: mjx.Data, task: TaskState, family: families.FamilyParams,
               key: jax.Array, field: jax.Array | None = None) -> Observation:
    """Builds the noisy policy observation and the noise-free privileged critic observation."""
    env = self.env_config
    layout = self.policy_layout
    clean = observations.policy_blocks(
        layout, self.readings(data, family),
        observations.TaskInputs(task.command, task.last_action, task.gait_phase),
        self._default_pose)
    noisy = observations.add_noise(layout, env, clean, key)
    foot_height = self._foot_height(data, field)  # [F]
    critic = clean + [
        (foot_height < env.foot_contact_distance).astype(jnp.float32),  # F foot contacts
        foot_height,  # F foot heights
    ]
    return {"policy": jnp.concatenate(noisy), "critic": jnp.concatenate(critic)}

  # STEP

  def step(self, state: EnvState, action: jax.Array) -> EnvState:
    """Advances one control step, then auto-resets the env if its episode ended.

    Args:
      state: this env's state.
      action: float32 [A], raw policy output; clipped, scaled and added to the standing pose to
        give the PD targets.

    Returns:
      The next state. `reward`, `terminated`, `truncated`, `reset_reason`, `final_obs`,
      `signals` and `metrics` describe the step just taken, even when `obs` already belongs to a
      new episode.
    """
    return self.step_with_final(state, action)[0]

  def step_with_final(self, state: EnvState, action: jax.Array) -> tuple[EnvState, EnvState]:
    """`step`, also returning the state the step ended in, before any auto-reset.

    Args:
      state: this env's state.
      action: float32 [A], raw policy output.

    Returns:
      (next, final). `next` is what `step` returns. `final` is the same state before the
      auto-reset: equal to `next` where the episode goes on; where it ended, its `data`, `obs`
      and `task` are those the episode ended in (the trainer records early-end traces from it).
      `final.task.last_action` is this step's clipped action. `final` is for reading only: it is
      not a state to step from.
    """
    key, k_obs, k_reset = jax.random.split(state.key, 3)
    clip = self.env_config.action_clip
    action = jnp.clip(action, -clip, clip)  # [A]
    state = self._wrap(state)
    data, action_history, finite = self._physics(state, action)
    reason = self._reset_reason(state, data, finite)
    truncated = reason == ResetReason.TIMEOUT
    terminated = (reason != ResetReason.NONE) & ~truncated
    feet = self._feet(state, data)
    reward, scaled = self._reward(state, data, action, feet, terminated, finite)
    task = self._next_task(state, action, action_history, feet, reward)
    ground = state.terrain
    if ground is not None:
      ground = terrain_lib.track(ground, state.task.command,
                                 self._trunk_frame(data, state.family)[0], self.dt)
    obs = self._observe(data, task, state.family, k_obs, self.heights(state))
    final = EnvState(
        data=data,
        obs=obs,
        final_obs=obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        reset_reason=reason,
        key=key,
        family=state.family,
        task=task,
        signals=self._signals(state, data, feet, finite),
        metrics=self._metrics(state, data, scaled, task, terminated | truncated, finite),
        terrain=ground,
    )
    return self._auto_reset(final, k_reset), final

  def _wrap(self, state: EnvState) -> EnvState:
    """WRAP: on a heightfield, a trunk that has left the tile is moved back by whole tiles
    (`terrain.wrap`), onto the same ground; so are the feet's last positions, and the move is
    added to `TerrainState.offset`. Nothing changes on the plane."""
    if self.grid is None:
      return state
    shift = terrain_lib.wrap(self.grid, state.data.qpos[0:2])  # [2]
    return state.replace(
        data=state.data.replace(qpos=state.data.qpos.at[0:2].add(-shift)),
        task=state.task.replace(foot_xy=state.task.foot_xy - shift),
        terrain=state.terrain.replace(offset=state.terrain.offset + shift))

  def actuate(self, family: families.FamilyParams, action_history: jax.Array,
              action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The actuator delay and the PD targets of one control step.

    Args:
      family: the env's family draw (its `action_delay`).
      action_history: float32 [D+1, A], the latest clipped actions, newest first.
      action: float32 [A], this step's clipped policy action.

    Returns:
      (history with `action` first [D+1, A], joint position targets [A] the actuators receive:
      the standing pose plus `action_scale` times the delayed action).
    """
    history = jnp.concatenate([action[None], action_history[:-1]])  # [D+1, A]
    delayed = history[family.action_delay]  # [A] what the actuators receive this step
    return history, self._default_pose + self.robot.spec.action_scale * delayed

  def _physics(self, state: EnvState, action: jax.Array
               ) -> tuple[mjx.Data, jax.Array, jax.Array]:
    """PHYSICS: the actuator delay, the PD targets, the family's push and `substeps` MJX steps.

    Args:
      state: the state the step starts from.
      action: float32 [A], the clipped policy action.

    Returns:
      (data, action_history, finite): the physics state at the end of the step; the action
      history float32 [D+1, A] with `action` first; bool [], whether the state stayed finite. A
      diverged state comes back as the initial pose at rest, with zero foot positions and
      actuator forces, so that no NaN reaches an observation, reward or signal (the env is then
      reset as `nonfinite`).
    """
    family = state.family
    history, targets = self.actuate(family, state.task.action_history, action)
    model = families.apply_to_model(self.model, self.robot, family)
    if state.terrain is not None:
      model = model.replace(hfield_data=self.heights(state).reshape(-1))

    def physics_step(_, data):
      return _mjx.step(model, data)

    push = self.push_force(family, state.task.step)  # [3]
    xfrc = state.data.xfrc_applied.at[self.robot.trunk_body_id, 0:3].set(push)  # [nbody, 6]
    data = state.data.replace(ctrl=targets, xfrc_applied=xfrc)
    data = jax.lax.fori_loop(0, self.substeps, physics_step, data)
    finite = jnp.isfinite(data.qpos).all() & jnp.isfinite(data.qvel).all()
    data = data.replace(
        qpos=jnp.where(finite, data.qpos, self._init_qpos),
        qvel=jnp.where(finite, data.qvel, 0.0),
        geom_xpos=jnp.where(finite, data.geom_xpos, 0.0),
        actuator_force=jnp.where(finite, data.actuator_force, 0.0),
    )
    return data, history, finite

  def _reset_reason(self, state: EnvState, data: mjx.Data, finite: jax.Array) -> jax.Array:
    """TERMINATIONS: why the step ended the episode. int32 [], a `ResetReason` (NONE if not)."""
    return self.end_reason(trunk_height=self._trunk_height(data, self.heights(state)),
                           floor_normal=self._floor_normal(data),
                           joint_pos=data.qpos[self._qpos_adr],
                           body_contact=self._body_touches_floor(data, finite,
                                                                 self.heights(state)),
                           finite=finite,
                           step=state.task.step)

  def end_reason(self, trunk_height: jax.Array, floor_normal: jax.Array, joint_pos: jax.Array,
                 body_contact: jax.Array, finite: jax.Array, step: jax.Array) -> jax.Array:
    """The termination rules: why a step ends the episode. int32 [], a `ResetReason`.

    The first matching reason wins, so a diverged state is reported as `nonfinite` even if it
    also "fell". Height and tilt are measured from the floor, whatever the direction of gravity.

    Args:
      trunk_height: float32 [], the trunk origin's height above the floor, m.
      floor_normal: float32 [3], the floor's normal in the trunk frame.
      joint_pos: float32 [A], the actuated joint angles, rad.
      body_contact: bool [], the trunk or a thigh touches the floor.
      finite: bool [], the physics state stayed finite.
      step: int32 [], control steps taken before this one in the episode.
    """
    env = self.env_config
    fell = (trunk_height < env.fall_height) | (
        floor_normal[2] < np.cos(np.deg2rad(env.fall_tilt_degrees)))
    if not env.terminate_on_body_contact:
      body_contact = jnp.zeros((), bool)
    at_limit = jnp.zeros((), bool)
    if env.terminate_on_joint_limit:
      margin = env.joint_limit_margin
      at_limit = ((joint_pos < self._joint_lower + margin) |
                  (joint_pos > self._joint_upper - margin)).any()
    timeout = step + 1 >= self.episode_steps
    return jnp.select(
        [~finite, fell, body_contact, at_limit, timeout],
        [ResetReason.NONFINITE, ResetReason.FALL, ResetReason.BODY_CONTACT,
         ResetReason.JOINT_LIMIT, ResetReason.TIMEOUT],
        ResetReason.NONE,
    ).astype(jnp.int32)

  def _feet(self, state: EnvState, data: mjx.Data) -> _Feet:
    """Each foot's height, contact, air time and mean horizontal speed over the step."""
    env = self.env_config
    height = self._foot_height(data, self.heights(state))  # [F]
    contact = height < env.foot_contact_distance  # [F]
    debounced = contact | state.task.last_contact  # [F] debounces one-step chatter
    xy = data.geom_xpos[self._foot_geoms, :2]  # [F, 2]
    return _Feet(
        height=height,
        contact=contact,
        debounced_contact=debounced,
        first_contact=(state.task.feet_air_time > 0.0) & debounced,
        air_time=state.task.feet_air_time + self.dt,
        xy=xy,
        speed=jnp.linalg.norm(xy - state.task.foot_xy, axis=-1) / self.dt,
    )

  def _reward(self, state: EnvState, data: mjx.Data, action: jax.Array, feet: _Feet,
              terminated: jax.Array, finite: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """REWARD: the step's reward and its non-zero terms.

    Each term is scaled by its weight and the control period, and is 0 on a non-finite step.
    The reward is the sum of the shaped terms (clipped at 0 with `reward.only_positive`) plus
    the termination term.

    Returns:
      (float32 [] reward, {term name: float32 [] scaled term}).
    """
    cfg = self.reward_config
    command = state.task.command  # [3] the command this step was taken under
    lin_vel, ang_vel, gravity = self._trunk_frame(data, state.family)
    joint_pos = data.qpos[self._qpos_adr]  # [A]
    terms = {
        "tracking_lin_vel": lambda: rewards.tracking_lin_vel(
            command, lin_vel, cfg.tracking_sigma),
        "tracking_ang_vel": lambda: rewards.tracking_ang_vel(
            command, ang_vel, cfg.tracking_sigma),
        "lin_vel_z": lambda: rewards.lin_vel_z(lin_vel),
        "ang_vel_xy": lambda: rewards.ang_vel_xy(ang_vel),
        "orientation": lambda: rewards.orientation(gravity),
        "torques": lambda: rewards.torques(data.actuator_force),
        "action_rate": lambda: rewards.action_rate(action, state.task.last_action),
        "feet_air_time": lambda: rewards.feet_air_time(
            feet.air_time, feet.first_contact, command, cfg.air_time_target),
        "pose": lambda: rewards.pose(joint_pos, self._default_pose),
        "gait_phase": lambda: rewards.gait_phase(
            feet.height, state.task.gait_phase, self._gait_offsets, command, cfg.swing_height),
        "feet_slip": lambda: rewards.feet_slip(feet.speed, feet.contact & state.task.last_contact),
        "termination": lambda: rewards.termination(terminated),
    }
    scaled = {
        name: scale * self.dt * jnp.where(finite, terms[name](), 0.0)
        for name, scale in self._reward_scales.items()
    }
    shaped = sum((v for k, v in scaled.items() if k != "termination"), jnp.zeros(()))
    if cfg.only_positive:
      shaped = jnp.maximum(shaped, 0.0)
    return shaped + scaled.get("termination", 0.0), scaled

  def _next_task(self, state: EnvState, action: jax.Array, action_history: jax.Array,
                 feet: _Feet, reward: jax.Array) -> TaskState:
    """The task bookkeeping at the end of the step, before any auto-reset."""
    step = state.task.step + 1
    return TaskState(
        command=self.command(state.family, step),
        last_action=action,
        action_history=action_history,
        feet_air_time=feet.air_time * ~feet.debounced_contact,
        last_contact=feet.contact,
        step=step,
        episode_return=state.task.episode_return + reward,
        foot_xy=feet.xy,
        gait_phase=self.next_gait_phase(state.task.gait_phase),
    )

  def next_gait_phase(self, phase: jax.Array) -> jax.Array:
    """The gait clock one control step later: advanced by gait_hz / control_hz, modulo 1."""
    return jnp.mod(phase + self.env_config.gait_hz * self.dt, 1.0)

  def _signals(self, state: EnvState, data: mjx.Data, feet: _Feet,
               finite: jax.Array) -> StepSignals:
    """SIGNALS: what the batch audits read of the step, at its end and before any auto-reset.

    A non-finite step reports no change of foot contact, no foot speed and no body contact.
    """
    up = self._floor_normal(data)  # [3]
    return StepSignals(
        trunk_height=self._trunk_height(data, self.heights(state)),
        trunk_tilt=jnp.degrees(jnp.arccos(jnp.clip(up[2], -1.0, 1.0))),
        contact=jnp.where(finite, feet.contact, state.task.last_contact),
        last_contact=state.task.last_contact,
        foot_speed=jnp.where(finite, feet.speed, 0.0),
        air_time=feet.air_time,
        body_contact=self._body_touches_floor(data, finite, self.heights(state)),
    )

  def _metrics(self, state: EnvState, data: mjx.Data, scaled: dict[str, jax.Array],
               task: TaskState, done: jax.Array, finite: jax.Array) -> dict[str, jax.Array]:
    """The step's logging metrics (`EnvState.metrics`); `task` is the one the step ended in."""
    lin_vel, ang_vel, _ = self._trunk_frame(data, state.family)
    command = state.task.command  # [3] the command this step was taken under
    metrics = {f"reward/{name}": value for name, value in scaled.items()}
    tracking_error = jnp.where(finite, tracking_errors(lin_vel, ang_vel, command), 0.0)  # [2]
    metrics["tracking/lin_vel_error"] = tracking_error[0]
    metrics["tracking/yaw_rate_error"] = tracking_error[1]
    metrics["episode/return"] = jnp.where(done, task.episode_return, 0.0)
    metrics["episode/length"] = jnp.where(done, task.step, 0).astype(jnp.float32)
    return metrics

  def _auto_reset(self, final: EnvState, key: jax.Array) -> EnvState:
    """AUTO-RESET: where the episode ended, a new episode's data, observation and task.

    Everything else (reward, flags, `final_obs`, signals, metrics) keeps describing the step
    just taken; the family draw survives the reset.
    """
    done = final.terminated | final.truncated
    if final.terrain is None:
      fresh = self.reset(key, final.family)
      return final.replace(
          data=_tree_where(done, fresh.data, final.data),
          obs=_tree_where(done, fresh.obs, final.obs),
          task=_tree_where(done, fresh.task, final.task),
      )
    level = terrain_lib.next_level(
        self.terrain_config, final.terrain.level, final.terminated, final.truncated,
        final.terrain.commanded, final.terrain.progress)
    fresh = self.reset(key, final.family, level)
    ground = _tree_where(done, fresh.terrain, final.terrain)
    metrics = dict(final.metrics)
    metrics.update(self._terrain_metrics(final.family, final.terrain, ground, done))
    return final.replace(
        data=_tree_where(done, fresh.data, final.data),
        obs=_tree_where(done, fresh.obs, final.obs),
        task=_tree_where(done, fresh.task, final.task),
        terrain=ground,
        metrics=metrics,
    )


def _body_probes(model, geom_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Points checked against a heightfield for body contact: (geom id [P], point in the geom's
  frame [P, 3], radius [P]). A box gives a 5 x 3 x 2 lattice over its volume's surface planes,
  a capsule 3 points along its axis and a sphere its centre, with the geom's radius."""
  geoms, points, radii = [], [], []
  for g in geom_ids:
    size, kind = model.geom_size[g], model.geom_type[g]
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
      lattice = [(x, y, z) for x in np.linspace(-size[0], size[0], 5)
                 for y in (-size[1], 0.0, size[1]) for z in (-size[2], size[2])]
      radius = 0.0
    elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
      lattice = [(0.0, 0.0, z) for z in (-size[1], 0.0, size[1])]
      radius = size[0]
    elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
      lattice, radius = [(0.0, 0.0, 0.0)], size[0]
    else:
      raise robots.RobotError(
          f"body-contact geom {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g)!r} is a "
          f"{mujoco.mjtGeom(kind).name}; on a heightfield they must be boxes, capsules or spheres")
    geoms += [g] * len(lattice)
    points += lattice
    radii += [radius] * len(lattice)
  return (np.asarray(geoms), np.asarray(points, np.float32), np.asarray(radii, np.float32))
