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
written into the model's `hfield_data` on every step. Heights (trunk, feet) and body contact are
measured from the ground under the robot (`mjx_walk.sim.ground`), a trunk that leaves the tile is
moved back onto it (WRAP), and each auto-reset moves the level by what the ended episode walked
against its command. The termination rules and the reset reasons are `mjx_walk.sim.endings`';
the reward table is `mjx_walk.sim.rewards`'.

`step` is a sequence of named stages: (wrap), physics, measure (the ground under the robot and
the trunk frame, once), terminations, reward, signals, auto-reset.
Every step reports what the batch audits (`mjx_walk.learn.audit`) read of it as typed
`StepSignals` in `EnvState.signals`, measured before any auto-reset: the trunk height and tilt it
ended in, each foot's contact at both ends of the step, its mean horizontal speed over the step
and its air time, and trunk or thigh contact with the ground. `EnvState.metrics` is for logging
only. `step_with_final` also returns the whole state the step ended in before any auto-reset, from
which the trainer records the early-end traces (`mjx_walk.learn.audit.EpisodeTrace`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from mjx_walk import config as config_lib
from mjx_walk.sim import endings
from mjx_walk.sim import families
from mjx_walk.sim import ground as ground_lib
from mjx_walk.sim import height_scan
from mjx_walk.sim import observations
from mjx_walk.sim import rewards
from mjx_walk.sim import robots
from mjx_walk.sim import terrain as terrain_lib
from mjx_walk.sim.endings import ResetReason
from mjx_walk.sim.env_state import EnvState
from mjx_walk.sim.env_state import Feet
from mjx_walk.sim.env_state import Measured
from mjx_walk.sim.env_state import Observation
from mjx_walk.sim.env_state import StepSignals
from mjx_walk.sim.env_state import TaskState
from mjx_walk.sim import _mjx
from mjx_walk.sim._mjx import mjx

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
    if config.env.physics_timestep:  # this env's own compiled copy
      mj_model.opt.timestep = config.env.physics_timestep
    if config.env.contact_timeconst:  # checked against the timestep by `substeps`
      mj_model.geom_solref[:, 0] = config.env.contact_timeconst
    if config.env.solver_iterations:
      mj_model.opt.iterations = config.env.solver_iterations
    # This process's own first device (MJX's default, the first of all, is process 0's).
    self.model = mjx.put_model(mj_model, device=jax.local_devices()[0], impl="jax")
    self.substeps = config_lib.substeps(config, float(mj_model.opt.timestep))
    self.dt = 1.0 / config.env.control_hz
    self.max_action_delay = int(config.families.action_delay_steps[1])

    self._default_pose = jnp.asarray(self.robot.default_pose, jnp.float32)  # [A]
    self._init_qpos = jnp.asarray(self.robot.init_qpos, jnp.float32)  # [nq]
    self._qpos_adr = jnp.asarray(self.robot.qpos_joint_adr)  # [A]
    self._qvel_adr = jnp.asarray(self.robot.qvel_joint_adr)  # [A]
    self._joint_lower = jnp.asarray(self.robot.joint_lower, jnp.float32)  # [A]
    self._joint_upper = jnp.asarray(self.robot.joint_upper, jnp.float32)  # [A]
    self.ground = ground_lib.Geometry.of(self.robot, self.grid)
    """The ground checks of this robot on this env's ground (`mjx_walk.sim.ground`)."""
    self.endings = endings.Rules.of(config.env, self._joint_lower, self._joint_upper,
                                    self.robot.limb_contact)
    """The termination rules (`mjx_walk.sim.endings`)."""
    self.episode_steps = self.endings.episode_steps
    self._gait_offsets = jnp.asarray(
        [observations.TROT_OFFSETS[name] for name in self.foot_names], jnp.float32)  # [F]
    self.scan_config = config.scan if config.scan.enabled else None
    """The height scan's section (`mjx_walk.sim.height_scan`), or None without a scan."""
    self._scan_points = None  # float32 [S, 2]
    if self.scan_config is not None:
      self._scan_points = jnp.asarray(height_scan.grid_points(config.scan))
    self.policy_layout = observations.policy_layout(
        config.env, self.action_size, self.foot_names,
        height_scan.block(config.scan) if self.scan_config is not None else None)
    """The policy observation's blocks (`mjx_walk.sim.observations`)."""
    self.reward_scales = rewards.scales(config.reward)
    """The non-zero reward scales: the terms each step evaluates and reports."""

  # SPECS

  @property
  def action_size(self) -> int:
    return self.robot.num_actions

  @property
  def scan_start(self) -> int | None:
    """Where the height scan starts in the policy observation (and in the critic's); None
    without a scan."""
    return self.policy_layout.offsets().get("height_scan")

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
    scan_offset = None
    if self.scan_config is not None:
      key, k_offset = jax.random.split(key)
      scan_offset = height_scan.draw_offset(self.scan_config, env.obs_noise_scale, k_offset)
    data = self._spawn(k_joint, k_vel, family, field)
    foot_height = ground_lib.foot_heights(self.ground, field, data.geom_xpos)  # [F]
    step = jnp.zeros((), jnp.int32)
    task = TaskState(
        command=self.command(family, step),
        last_action=jnp.zeros(self.action_size),
        action_history=jnp.zeros((self.max_action_delay + 1, self.action_size)),
        feet_air_time=jnp.zeros(self.num_feet),
        last_contact=foot_height < env.foot_contact_distance,
        step=step,
        episode_return=jnp.zeros(()),
        foot_xy=data.geom_xpos[self.ground.foot_geoms, :2],
        gait_phase=jax.random.uniform(k_phase) if env.gait_hz else jnp.zeros(()),
        scan_offset=scan_offset,
    )
    obs = self._observe(self.readings(data, family, field), task, k_obs, foot_height)
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
    metrics = {f"reward/{name}": zero for name in self.reward_scales}
    metrics.update({name: zero for name in ("tracking/lin_vel_error", "tracking/yaw_rate_error",
                                            "episode/return", "episode/length")})
    return signals, metrics

  # OBSERVATIONS

  def readings(self, data: mjx.Data, family: families.FamilyParams,
               field: jax.Array | None) -> observations.Readings:
    """What the robot measures in this physics state, on the ground `field` (None: the plane).
    The direction of gravity is the family's (tilted on a slope), as an IMU would measure it;
    the height scan, with one, is clean (the policy's noise is added by `_observe`)."""
    down = family.gravity / jnp.maximum(jnp.linalg.norm(family.gravity), 1e-6)  # [3]
    scan = None
    if self.scan_config is not None:
      position = data.qpos[0:3]
      if self.grid is not None:  # read from the tile, as after the next step's WRAP
        position = position.at[0:2].add(-terrain_lib.wrap(self.grid, position[0:2]))
      scan = height_scan.measure(self.scan_config, self.ground, field, self._scan_points,
                                 position, data.qpos[3:7], down)  # [S]
    return observations.Readings(
        quat=data.qpos[3:7], lin_vel=data.qvel[0:3], ang_vel=data.qvel[3:6], down=down,
        joint_pos=data.qpos[self._qpos_adr], joint_vel=data.qvel[self._qvel_adr],
        height_scan=scan)

  def _observe(self, readings: observations.Readings, task: TaskState, key: jax.Array,
               foot_height: jax.Array) -> Observation:
    """Builds the noisy policy observation and the noise-free privileged critic observation
    from the sensors' `readings` and each foot's clearance [F]. The critic reads the clean
    height scan; the policy reads it with the scan's own noise (`height_scan.corrupt`)."""
    env = self.env_config
    layout = self.policy_layout
    clean = observations.policy_blocks(
        layout, readings, observations.TaskInputs(task.command, task.last_action, task.gait_phase),
        self._default_pose)
    if self.scan_config is not None:
      key, k_scan = jax.random.split(key)
    noisy = observations.add_noise(layout, env, clean, key)
    if self.scan_config is not None:
      noisy[-1] = height_scan.corrupt(self.scan_config, env.obs_noise_scale, clean[-1],
                                      task.scan_offset, k_scan)  # the scan is the last block
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
    field = self.heights(state)  # this episode's ground; None on the plane
    data, action_history, finite = self._physics(state, action, field)
    measured = self._measure(state, data, field, finite)
    feet = measured.feet
    reason = endings.end_reason(self.endings, measured.trunk_height, measured.floor_normal,
                                measured.readings.joint_pos, measured.body_touches, finite,
                                state.task.step)
    truncated = reason == ResetReason.TIMEOUT
    terminated = (reason != ResetReason.NONE) & ~truncated
    reward, scaled = rewards.step_reward(
        self.reward_config, self.dt, self._reward_inputs(state, data, action, measured, terminated),
        finite)
    task = self._next_task(state, action, action_history, feet, reward)
    ground = state.terrain
    if ground is not None:
      ground = terrain_lib.track(ground, state.task.command, measured.lin_vel, self.dt)
    obs = self._observe(measured.readings, task, k_obs, feet.height)
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
        signals=self._signals(state, measured, finite),
        metrics=self._metrics(state, measured, scaled, task, terminated | truncated, finite),
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

  def _physics(self, state: EnvState, action: jax.Array, field: jax.Array | None
               ) -> tuple[mjx.Data, jax.Array, jax.Array]:
    """PHYSICS: the actuator delay, the PD targets, the family's push and `substeps` MJX steps.

    Args:
      state: the state the step starts from.
      action: float32 [A], the clipped policy action.
      field: the env's heightfield this episode (`heights`), None on the plane.

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
    if field is not None:
      model = model.replace(hfield_data=field.reshape(-1))

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

  def _measure(self, state: EnvState, data: mjx.Data, field: jax.Array | None,
               finite: jax.Array) -> Measured:
    """MEASURE: what the later stages read of the physics state the step ended in, each once:
    the sensors, the trunk frame, the ground under the trunk, body contact and the feet."""
    readings = self.readings(data, state.family, field)
    lin_vel, ang_vel, gravity = observations.trunk_frame(readings)
    return Measured(
        readings=readings, lin_vel=lin_vel, ang_vel=ang_vel, gravity=gravity,
        floor_normal=ground_lib.floor_normal(data.qpos[3:7]),
        trunk_height=ground_lib.trunk_height(self.ground, field, data.qpos[0:3], data.qpos[3:7]),
        body_touches=ground_lib.body_touches(self.ground, field, data) & finite,
        feet=self._feet(state, data, field))

  def _feet(self, state: EnvState, data: mjx.Data, field: jax.Array | None) -> Feet:
    """Each foot's height, contact, air time and mean horizontal speed over the step."""
    env = self.env_config
    height = ground_lib.foot_heights(self.ground, field, data.geom_xpos)  # [F]
    contact = height < env.foot_contact_distance  # [F]
    debounced = contact | state.task.last_contact  # [F] debounces one-step chatter
    xy = data.geom_xpos[self.ground.foot_geoms, :2]  # [F, 2]
    return Feet(
        height=height,
        contact=contact,
        debounced_contact=debounced,
        first_contact=(state.task.feet_air_time > 0.0) & debounced,
        air_time=state.task.feet_air_time + self.dt,
        xy=xy,
        speed=jnp.linalg.norm(xy - state.task.foot_xy, axis=-1) / self.dt,
    )

  def _reward_inputs(self, state: EnvState, data: mjx.Data, action: jax.Array,
                     measured: Measured, terminated: jax.Array) -> rewards.StepInputs:
    """REWARD: what the reward terms (`rewards.step_reward`) read of the step."""
    feet = measured.feet
    return rewards.StepInputs(
        command=state.task.command,  # the command this step was taken under
        lin_vel=measured.lin_vel, ang_vel=measured.ang_vel, gravity=measured.gravity,
        actuator_force=data.actuator_force, action=action, last_action=state.task.last_action,
        joint_pos=measured.readings.joint_pos, default_pose=self._default_pose,
        air_time=feet.air_time, first_contact=feet.first_contact, foot_height=feet.height,
        gait_phase=state.task.gait_phase, gait_offsets=self._gait_offsets,
        foot_speed=feet.speed, stance=feet.contact & state.task.last_contact,
        limb_touches=(measured.body_touches & self.robot.limb_contact).sum(),
        terminated=terminated)

  def _next_task(self, state: EnvState, action: jax.Array, action_history: jax.Array,
                 feet: Feet, reward: jax.Array) -> TaskState:
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
        scan_offset=state.task.scan_offset,
    )

  def next_gait_phase(self, phase: jax.Array) -> jax.Array:
    """The gait clock one control step later: advanced by gait_hz / control_hz, modulo 1."""
    return jnp.mod(phase + self.env_config.gait_hz * self.dt, 1.0)

  def _signals(self, state: EnvState, measured: Measured, finite: jax.Array) -> StepSignals:
    """SIGNALS: what the batch audits read of the step, at its end and before any auto-reset.

    A non-finite step reports no change of foot contact, no foot speed and no body contact.
    """
    up, feet = measured.floor_normal, measured.feet  # [3]
    return StepSignals(
        trunk_height=measured.trunk_height,
        trunk_tilt=jnp.degrees(jnp.arccos(jnp.clip(up[2], -1.0, 1.0))),
        contact=jnp.where(finite, feet.contact, state.task.last_contact),
        last_contact=state.task.last_contact,
        foot_speed=jnp.where(finite, feet.speed, 0.0),
        air_time=feet.air_time,
        body_contact=measured.body_touches.any(),
    )

  def _metrics(self, state: EnvState, measured: Measured, scaled: dict[str, jax.Array],
               task: TaskState, done: jax.Array, finite: jax.Array) -> dict[str, jax.Array]:
    """The step's logging metrics (`EnvState.metrics`); `task` is the one the step ended in."""
    command = state.task.command  # [3] the command this step was taken under
    metrics = {f"reward/{name}": value for name, value in scaled.items()}
    tracking_error = jnp.where(
        finite, tracking_errors(measured.lin_vel, measured.ang_vel, command), 0.0)  # [2]
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
    ground, metrics, cfg = final.terrain, dict(final.metrics), self.terrain_config
    if ground is None:
      fresh = self.reset(key, final.family)
    else:
      start = self._init_qpos[0:2] + final.family.spawn_offset  # [2]
      reach = (terrain_lib.command_reach(final.family.command_times, final.family.commands,
                                         self.episode_steps, self.dt)
               if cfg.promote_within_reach else None)
      level = terrain_lib.next_level(
          cfg, ground.level, final.terminated, final.truncated, ground.commanded,
          ground.progress, jnp.linalg.norm(final.data.qpos[0:2] + ground.offset - start), reach)
      fresh = self.reset(key, final.family, level)
      ground = _tree_where(done, fresh.terrain, final.terrain)
      metrics.update(self._terrain_metrics(final.family, final.terrain, ground, done))
    return final.replace(
        data=_tree_where(done, fresh.data, final.data),
        obs=_tree_where(done, fresh.obs, final.obs),
        task=_tree_where(done, fresh.task, final.task),
        terrain=ground,
        metrics=metrics,
    )
