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

For the batch audits (`mjx_walk.audit`) every step also reports, in `EnvState.metrics`, the trunk
height and tilt it ended in before any auto-reset, each foot's contact at both ends of the step,
its mean horizontal speed over the step and its air time, trunk or thigh contact with the ground,
and whether the step ended the episode early. `EnvState.trace` records the first
`audit.early_end_steps` states and actions of each episode, so that an early end can be replayed.
"""

from __future__ import annotations

import enum
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim._mjx import mjx
from mjx_walk.sim import families
from mjx_walk.sim import rewards
from mjx_walk.sim import robots

Observation = dict[str, jax.Array]  # {"policy": [O], "critic": [P]}


class ResetReason(enum.IntEnum):
  """Why an episode ended. NONE means it did not end on this step."""

  NONE = 0
  FALL = 1
  TIMEOUT = 2
  JOINT_LIMIT = 3
  BODY_CONTACT = 4
  NONFINITE = 5


REASON_NAMES: tuple[str, ...] = tuple(r.name.lower() for r in ResetReason if r != ResetReason.NONE)

TROT_OFFSETS = {"FR": 0.0, "RL": 0.0, "FL": 0.5, "RR": 0.5}
"""Phase offset of each foot on the gait clock: the diagonal pairs swing half a cycle apart."""


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
class EpisodeTrace:
  """The first L = `audit.early_end_steps` control steps of the current episode, for replay.

  Row 0 is the episode's reset state; row k the state after its k-th step, before any
  auto-reset. A step that ends an episode leaves the trace in place (so the trainer can pick it
  up from the returned state); the next step starts a new trace from the new episode's state.
  Rows past `length` are stale.
  """

  qpos: jax.Array
  """float32 [L + 1, nq]."""
  qvel: jax.Array
  """float32 [L + 1, nv]."""
  action: jax.Array
  """float32 [L, A]: the clipped action of each step."""
  length: jax.Array
  """int32 []: control steps taken since the reset (counts on past L)."""
  first_step: jax.Array
  """int32 []: `TaskState.step` at the reset state (0, except for an episode whose clock was
  started late, as the trainer does to stagger the first episodes)."""


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
  trace: EpisodeTrace
  metrics: dict[str, jax.Array]
  """Logging only: `reward/<term>` scaled per-step terms, `tracking/lin_vel_error` (m/s, xy)
  and `tracking/yaw_rate_error` (rad/s) of this step, and `episode/return`, `episode/length` of
  the episode that ended on this step (0 otherwise). Audit signals of this step, as float32 and
  measured before any auto-reset: `audit/trunk_height` (m) and `audit/trunk_tilt` (degrees from
  the floor normal); per foot [F], `audit/contact` and `audit/last_contact` (1 if on the ground
  at the end and at the start of the step), `audit/foot_speed` (mean horizontal speed over the
  step, m/s) and `audit/air_time` (s in the air, counting this step; read at touchdowns);
  `audit/body_contact` (1 if the trunk or a thigh touches the ground) and `audit/early_end` (1 if
  the step terminated an episode within `audit.early_end_steps` steps). A non-finite step
  reports no change of foot contact, no foot speed and no body contact."""


def _rotate_inverse(quat: jax.Array, vec: jax.Array) -> jax.Array:
  """Rotates a world-frame vector into the frame of the unit quaternion (w, x, y, z)."""
  w, xyz = quat[0], -quat[1:]
  t = 2.0 * jnp.cross(xyz, vec)
  return vec + w * t + jnp.cross(xyz, t)


def _uniform_noise(key: jax.Array, x: jax.Array, level: float) -> jax.Array:
  return x + level * jax.random.uniform(key, x.shape, minval=-1.0, maxval=1.0)


def _tree_where(cond: jax.Array, on_true: Any, on_false: Any) -> Any:
  return jax.tree.map(lambda a, b: jnp.where(cond, a, b), on_true, on_false)


class LocomotionEnv:
  """Joystick velocity tracking for a quadruped in MJX.

  Args:
    config: the run configuration; only `config.env` and `config.reward` are read.
  """

  def __init__(self, config: config_lib.TrainConfig):
    self.config = config
    self.env_config = config.env
    self.reward_config = config.reward
    self.robot = robots.load(config.env.robot)
    mj_model = self.robot.mj_model
    if config.env.physics_timestep:
      mj_model.opt.timestep = config.env.physics_timestep  # this env's own compiled copy
    self.model = mjx.put_model(mj_model, impl="jax")
    self.substeps = config_lib.substeps(config, float(mj_model.opt.timestep))
    self.dt = 1.0 / config.env.control_hz
    self.episode_steps = round(config.env.episode_seconds * config.env.control_hz)
    self.max_action_delay = int(config.families.action_delay_steps[1])
    self.trace_steps = int(config.audit.early_end_steps)

    self._default_pose = jnp.asarray(self.robot.default_pose, jnp.float32)  # [A]
    self._init_qpos = jnp.asarray(self.robot.init_qpos, jnp.float32)  # [nq]
    self._qpos_adr = jnp.asarray(self.robot.qpos_joint_adr)  # [A]
    self._qvel_adr = jnp.asarray(self.robot.qvel_joint_adr)  # [A]
    self._joint_lower = jnp.asarray(self.robot.joint_lower, jnp.float32)  # [A]
    self._joint_upper = jnp.asarray(self.robot.joint_upper, jnp.float32)  # [A]
    self._foot_geoms = jnp.asarray(self.robot.foot_geom_ids)  # [F]
    self._foot_radius = jnp.asarray(mj_model.geom_size[self.robot.foot_geom_ids, 0], jnp.float32)
    self._body_contact_geoms = jnp.asarray(self.robot.body_contact_geom_ids)  # [K]
    self._gait_offsets = jnp.asarray([TROT_OFFSETS[name] for name in self.foot_names],
                                     jnp.float32)  # [F]
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
        0, self.config, None)]))
    family = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), family)
    state = jax.eval_shape(self.reset, jax.random.key(0), family)
    return state.obs

  # COMMANDS AND PUSHES

  def _command(self, family: families.FamilyParams, step: jax.Array) -> jax.Array:
    """The family's scheduled command at control step `step` of the episode. [3]"""
    started = family.command_times <= step * self.dt  # [K]; the first entry starts at 0
    return family.commands[jnp.sum(started) - 1]

  def _push_force(self, family: families.FamilyParams, step: jax.Array) -> jax.Array:
    """World-frame force on the trunk during control step `step`, N. [3]

    Push times and durations are rounded to whole control steps, so a push of F newtons for
    d seconds changes the robot's momentum by exactly F * d.
    """
    start = jnp.round(family.push_times / self.dt)  # [P]
    duration = jnp.round(family.push_seconds / self.dt)
    active = (step >= start) & (step < start + duration)  # [P]
    return jnp.sum(jnp.where(active[:, None], family.push_forces, 0.0), axis=0)

  # RESET

  def reset(self, key: jax.Array, family: families.FamilyParams) -> EnvState:
    """Starts a new episode at the family's spawn pose with small per-env perturbations.

    Args:
      key: PRNG key for this env.
      family: this env's family draw (one family, no leading axis).

    Returns:
      The first state of an episode; `obs` is computed from the reset pose.
    """
    key, k_joint, k_vel, k_obs, k_phase = jax.random.split(key, 5)
    env = self.env_config
    qpos = self._init_qpos  # [nq]
    joint_noise = env.init_joint_noise * jax.random.uniform(
        k_joint, (self.action_size,), minval=-1.0, maxval=1.0)  # [A]
    joints = jnp.clip(self._default_pose + joint_noise, self._joint_lower, self._joint_upper)
    yaw = family.spawn_yaw
    yaw_quat = jnp.array([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)])  # [4]
    qpos = (qpos.at[0:2].add(family.spawn_offset).at[3:7].set(yaw_quat)
            .at[self._qpos_adr].set(joints))
    qvel = jnp.zeros(self.model.nv).at[0:6].set(
        env.init_velocity_noise * jax.random.uniform(k_vel, (6,), minval=-1.0, maxval=1.0))
    data = mjx.make_data(self.model).replace(qpos=qpos, qvel=qvel, ctrl=joints)
    # Kinematics alone positions the feet for the first observation; mjx.step recomputes the
    # full forward pass before it integrates, so nothing else needs to be valid here.
    data = mjx.kinematics(self.model, data)

    foot_height = self._foot_height(data)
    step = jnp.zeros((), jnp.int32)
    task = TaskState(
        command=self._command(family, step),
        last_action=jnp.zeros(self.action_size),
        action_history=jnp.zeros((self.max_action_delay + 1, self.action_size)),
        feet_air_time=jnp.zeros(self.num_feet),
        last_contact=foot_height < env.foot_contact_distance,
        step=step,
        episode_return=jnp.zeros(()),
        foot_xy=data.geom_xpos[self._foot_geoms, :2],
        gait_phase=jax.random.uniform(k_phase) if env.gait_hz else jnp.zeros(()),
    )
    trace = EpisodeTrace(
        qpos=jnp.zeros((self.trace_steps + 1, self.model.nq)).at[0].set(data.qpos),
        qvel=jnp.zeros((self.trace_steps + 1, self.model.nv)).at[0].set(data.qvel),
        action=jnp.zeros((self.trace_steps, self.action_size)),
        length=jnp.zeros((), jnp.int32),
        first_step=step,
    )
    obs = self._observe(data, task, family, k_obs)
    zero = jnp.zeros(())
    feet = jnp.zeros(self.num_feet)
    metrics = {f"reward/{name}": zero for name in self._reward_scales}
    metrics.update({name: zero for name in ("tracking/lin_vel_error", "tracking/yaw_rate_error",
                                            "episode/return", "episode/length")})
    metrics.update({f"audit/{name}": zero for name in (
        "trunk_height", "trunk_tilt", "body_contact", "early_end")})
    metrics.update({f"audit/{name}": feet for name in (
        "contact", "last_contact", "foot_speed", "air_time")})
    return EnvState(
        data=data,
        obs=obs,
        final_obs=obs,
        reward=zero,
        terminated=jnp.zeros((), bool),
        truncated=jnp.zeros((), bool),
        reset_reason=jnp.asarray(ResetReason.NONE, jnp.int32),
        key=key,
        family=family,
        task=task,
        trace=trace,
        metrics=metrics,
    )

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


  def _foot_height(self, data: mjx.Data) -> jax.Array:
    """Lowest point of each foot sphere above the floor plane z = 0, m. [F]"""
    return data.geom_xpos[self._foot_geoms, 2] - self._foot_radius

  def _trunk_frame(self, data: mjx.Data, family: families.FamilyParams
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Trunk linear velocity, angular velocity and gravity direction, all in the trunk frame.

    The gravity direction is the family's (tilted on a slope), as an IMU would measure it.
    """
    quat = data.qpos[3:7]
    lin_vel = _rotate_inverse(quat, data.qvel[0:3])  # [3] free-joint linear vel is world frame
    ang_vel = data.qvel[3:6]  # [3] free-joint angular vel is already in the body frame
    down = family.gravity / jnp.maximum(jnp.linalg.norm(family.gravity), 1e-6)  # [3]
    gravity = _rotate_inverse(quat, down)  # [3]
    return lin_vel, ang_vel, gravity

  def _observe(self, data: mjx.Data, task: TaskState, family: families.FamilyParams,
               key: jax.Array) -> Observation:
    """Builds the noisy policy observation and the noise-free privileged critic observation."""
    env = self.env_config
    lin_vel, ang_vel, gravity = self._trunk_frame(data, family)
    joint_pos = data.qpos[self._qpos_adr] - self._default_pose  # [A]
    joint_vel = data.qvel[self._qvel_adr]  # [A]
    clean = [
        lin_vel,  # 3 trunk linear velocity (a state estimator's output on the real robot)
        ang_vel,  # 3 trunk angular velocity
        gravity,  # 3 projected gravity
        task.command,  # 3 command
        joint_pos,  # A joint positions relative to the standing pose
        joint_vel,  # A joint velocities
        task.last_action,  # A previous action
    ]
    levels = [env.noise_lin_vel, env.noise_gyro, env.noise_gravity, 0.0, env.noise_joint_pos,
              env.noise_joint_vel, 0.0]
    if env.gait_hz:
      angle = 2.0 * jnp.pi * task.gait_phase
      clean.append(jnp.stack([jnp.sin(angle), jnp.cos(angle)]))  # 2 gait clock
      levels.append(0.0)
    keys = jax.random.split(key, len(clean))
    noisy = [
        _uniform_noise(k, x, env.obs_noise_scale * level) if level else x
        for k, x, level in zip(keys, clean, levels)
    ]
    foot_height = self._foot_height(data)  # [F]
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
      The next state. `reward`, `terminated`, `truncated`, `reset_reason`, `final_obs` and
      `metrics` describe the step just taken, even when `obs` already belongs to a new episode.
    """
    env = self.env_config
    family = state.family
    key, k_obs, k_reset = jax.random.split(state.key, 3)
    action = jnp.clip(action, -env.action_clip, env.action_clip)  # [A]
    history = jnp.concatenate([action[None], state.task.action_history[:-1]])  # [D+1, A]
    delayed = history[family.action_delay]  # [A] what the actuators receive this step
    targets = self._default_pose + self.robot.spec.action_scale * delayed  # [A]

    # PHYSICS
    model = families.apply_to_model(self.model, self.robot, family)

    def physics_step(_, data):
      return mjx.step(model, data)

    push = self._push_force(family, state.task.step)  # [3]
    xfrc = state.data.xfrc_applied.at[self.robot.trunk_body_id, 0:3].set(push)  # [nbody, 6]
    data = state.data.replace(ctrl=targets, xfrc_applied=xfrc)
    data = jax.lax.fori_loop(0, self.substeps, physics_step, data)
    finite = jnp.isfinite(data.qpos).all() & jnp.isfinite(data.qvel).all()
    # Zero a diverged state so no NaN reaches obs, reward or metrics; the env is reset below.
    data = data.replace(
        qpos=jnp.where(finite, data.qpos, self._init_qpos),
        qvel=jnp.where(finite, data.qvel, 0.0),
        geom_xpos=jnp.where(finite, data.geom_xpos, 0.0),
        actuator_force=jnp.where(finite, data.actuator_force, 0.0),
    )

    # TASK
    step_count = state.task.step + 1
    foot_height = self._foot_height(data)  # [F]
    contact = foot_height < env.foot_contact_distance  # [F]
    contact_filtered = contact | state.task.last_contact  # [F] debounces one-step chatter
    air_time = state.task.feet_air_time + self.dt  # [F]
    first_contact = (state.task.feet_air_time > 0.0) & contact_filtered  # [F]
    command = self._command(family, step_count)

    # TERMINATION
    lin_vel, ang_vel, gravity = self._trunk_frame(data, family)
    joint_pos = data.qpos[self._qpos_adr]  # [A]
    # Height and tilt are measured from the floor, whatever the direction of gravity.
    up = _rotate_inverse(data.qpos[3:7], jnp.array([0.0, 0.0, 1.0]))  # [3] floor normal, trunk frame
    fell = (data.qpos[2] < env.fall_height) | (
        up[2] < np.cos(np.deg2rad(env.fall_tilt_degrees)))
    body_touch = self._touches_floor(data, self._body_contact_geoms) & finite
    body_contact = body_touch if env.terminate_on_body_contact else jnp.zeros((), bool)
    at_limit = jnp.zeros((), bool)
    if env.terminate_on_joint_limit:
      margin = env.joint_limit_margin
      at_limit = ((joint_pos < self._joint_lower + margin) |
                  (joint_pos > self._joint_upper - margin)).any()
    timeout = step_count >= self.episode_steps
    # The first matching reason wins: a diverged state is reported as such even if it "fell".
    reason = jnp.select(
        [~finite, fell, body_contact, at_limit, timeout],
        [ResetReason.NONFINITE, ResetReason.FALL, ResetReason.BODY_CONTACT,
         ResetReason.JOINT_LIMIT, ResetReason.TIMEOUT],
        ResetReason.NONE,
    ).astype(jnp.int32)
    truncated = reason == ResetReason.TIMEOUT
    terminated = (reason != ResetReason.NONE) & ~truncated

    foot_xy = data.geom_xpos[self._foot_geoms, :2]  # [F, 2]
    foot_speed = jnp.linalg.norm(foot_xy - state.task.foot_xy, axis=-1) / self.dt  # [F]

    # REWARD
    terms = {
        "tracking_lin_vel": lambda: rewards.tracking_lin_vel(
            state.task.command, lin_vel, self.reward_config.tracking_sigma),
        "tracking_ang_vel": lambda: rewards.tracking_ang_vel(
            state.task.command, ang_vel, self.reward_config.tracking_sigma),
        "lin_vel_z": lambda: rewards.lin_vel_z(lin_vel),
        "ang_vel_xy": lambda: rewards.ang_vel_xy(ang_vel),
        "orientation": lambda: rewards.orientation(gravity),
        "torques": lambda: rewards.torques(data.actuator_force),
        "action_rate": lambda: rewards.action_rate(action, state.task.last_action),
        "feet_air_time": lambda: rewards.feet_air_time(
            air_time, first_contact, state.task.command, self.reward_config.air_time_target),
        "pose": lambda: rewards.pose(joint_pos, self._default_pose),
        "gait_phase": lambda: rewards.gait_phase(
            foot_height, state.task.gait_phase, self._gait_offsets, state.task.command,
            self.reward_config.swing_height),
        "feet_slip": lambda: rewards.feet_slip(foot_speed, contact & state.task.last_contact),
        "termination": lambda: rewards.termination(terminated),
    }
    scaled = {
        name: scale * self.dt * jnp.where(finite, terms[name](), 0.0)
        for name, scale in self._reward_scales.items()
    }
    shaped = sum((v for k, v in scaled.items() if k != "termination"), jnp.zeros(()))
    if self.reward_config.only_positive:
      shaped = jnp.maximum(shaped, 0.0)
    reward = shaped + scaled.get("termination", 0.0)
    episode_return = state.task.episode_return + reward

    task = TaskState(
        command=command,
        last_action=action,
        action_history=history,
        feet_air_time=air_time * ~contact_filtered,
        last_contact=contact,
        step=step_count,
        episode_return=episode_return,
        foot_xy=foot_xy,
        gait_phase=jnp.mod(state.task.gait_phase + env.gait_hz * self.dt, 1.0),
    )
    obs = self._observe(data, task, family, k_obs)
    done = terminated | truncated
    trace = self._record(state, data, action)
    metrics = {f"reward/{name}": value for name, value in scaled.items()}
    tracking_error = jnp.where(finite, jnp.stack([
        jnp.linalg.norm(lin_vel[:2] - state.task.command[:2]),
        jnp.abs(ang_vel[2] - state.task.command[2])]), 0.0)  # [2]
    metrics["tracking/lin_vel_error"] = tracking_error[0]
    metrics["tracking/yaw_rate_error"] = tracking_error[1]
    metrics["episode/return"] = jnp.where(done, episode_return, 0.0)
    metrics["episode/length"] = jnp.where(done, step_count, 0).astype(jnp.float32)
    # AUDIT SIGNALS (see mjx_walk.audit). A diverged step reports no contact event.
    metrics["audit/trunk_height"] = data.qpos[2]
    metrics["audit/trunk_tilt"] = jnp.degrees(jnp.arccos(jnp.clip(up[2], -1.0, 1.0)))
    metrics["audit/contact"] = jnp.where(finite, contact, state.task.last_contact).astype(
        jnp.float32)
    metrics["audit/last_contact"] = state.task.last_contact.astype(jnp.float32)
    metrics["audit/foot_speed"] = jnp.where(finite, foot_speed, 0.0)
    metrics["audit/air_time"] = air_time
    metrics["audit/body_contact"] = body_touch.astype(jnp.float32)
    metrics["audit/early_end"] = (terminated & (trace.length <= self.trace_steps)).astype(
        jnp.float32)

    # AUTO-RESET
    fresh = self.reset(k_reset, family)
    return EnvState(
        data=_tree_where(done, fresh.data, data),
        obs=_tree_where(done, fresh.obs, obs),
        final_obs=obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        reset_reason=reason,
        key=key,
        family=family,
        task=_tree_where(done, fresh.task, task),
        trace=trace,
        metrics=metrics,
    )

  def _record(self, state: EnvState, data: mjx.Data, action: jax.Array) -> EpisodeTrace:
    """The episode trace after this step: `data` (before any auto-reset) and `action` appended.

    A step that follows an episode end starts a new trace from `state.data`, the new episode's
    reset state. Rows are written with a one-hot select rather than a scatter, which stays
    vectorised under `vmap`.
    """
    trace = state.trace
    restart = state.terminated | state.truncated
    length = jnp.where(restart, 0, trace.length)  # steps before this one
    first_row = (jnp.arange(self.trace_steps + 1) == 0)[:, None]  # [L + 1, 1]
    qpos = jnp.where(restart & first_row, state.data.qpos, trace.qpos)  # [L + 1, nq]
    qvel = jnp.where(restart & first_row, state.data.qvel, trace.qvel)  # [L + 1, nv]
    state_row = (jnp.arange(self.trace_steps + 1) == length + 1)[:, None]  # [L + 1, 1]
    action_row = (jnp.arange(self.trace_steps) == length)[:, None]  # [L, 1]
    return EpisodeTrace(
        qpos=jnp.where(state_row, data.qpos, qpos),
        qvel=jnp.where(state_row, data.qvel, qvel),
        action=jnp.where(action_row, action, trace.action),
        length=length + 1,
        first_step=state.task.step - length,
    )
