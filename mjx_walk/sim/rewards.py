"""Reward terms for joystick locomotion, each a small pure function of one env's quantities.

Every term returns an unscaled float32 scalar. `step_reward` evaluates the terms of the table
below that have a non-zero scale in `RewardConfig` from one step's `StepInputs`, multiplies each
by its scale and the control period, and returns every scaled term beside the total, so that a
total built from shaping terms cannot hide a policy that stands still. `mjx_walk.sim.env` gathers
the inputs once per step.

Frames: linear and angular velocities are in the trunk frame; `command` is (vx, vy, yaw_rate) in
that frame too.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from mjx_walk import config as config_lib


def tracking_lin_vel(command: jax.Array, lin_vel: jax.Array, sigma: float) -> jax.Array:
  """exp(-|v_xy - command_xy|^2 / sigma): 1 when the planar velocity matches the command."""
  error = jnp.sum(jnp.square(command[:2] - lin_vel[:2]))
  return jnp.exp(-error / sigma)


def tracking_ang_vel(command: jax.Array, ang_vel: jax.Array, sigma: float) -> jax.Array:
  """exp(-(w_z - command_yaw)^2 / sigma): 1 when the yaw rate matches the command."""
  error = jnp.square(command[2] - ang_vel[2])
  return jnp.exp(-error / sigma)


def lin_vel_z(lin_vel: jax.Array) -> jax.Array:
  """Squared vertical trunk velocity (bouncing)."""
  return jnp.square(lin_vel[2])


def ang_vel_xy(ang_vel: jax.Array) -> jax.Array:
  """Squared roll and pitch rates (wobbling)."""
  return jnp.sum(jnp.square(ang_vel[:2]))


def orientation(projected_gravity: jax.Array) -> jax.Array:
  """Squared horizontal part of gravity in the trunk frame: 0 when the trunk is level."""
  return jnp.sum(jnp.square(projected_gravity[:2]))


def torques(actuator_force: jax.Array) -> jax.Array:
  """Sum of squared joint torques, N^2 m^2 (energy proxy)."""
  return jnp.sum(jnp.square(actuator_force))


def action_rate(action: jax.Array, last_action: jax.Array) -> jax.Array:
  """Squared change of the action between control steps (smoothness)."""
  return jnp.sum(jnp.square(action - last_action))


def feet_air_time(
    air_time: jax.Array,
    first_contact: jax.Array,
    command: jax.Array,
    target: float,
) -> jax.Array:
  """Rewards swings longer than `target` seconds, paid at touchdown.

  Zero when the planar command is near zero, so stepping in place cannot farm it while the
  robot is asked to stand.

  Args:
    air_time: float32 [F], seconds each foot has been in the air before this step's touchdown.
    first_contact: bool [F], feet touching down on this step.
    command: float32 [3].
    target: swing duration, s, above which a step earns reward.
  """
  per_foot = (air_time - target) * first_contact  # [F]
  moving = jnp.linalg.norm(command[:2]) > 0.1
  return jnp.sum(per_foot) * moving


def gait_phase(
    foot_height: jax.Array,
    phase: jax.Array,
    offsets: jax.Array,
    command: jax.Array,
    swing_height: float,
    clearance: bool = False,
) -> jax.Array:
  """exp(-|h - h_ref|^2 / 0.01): 1 when every foot's height follows the gait clock's reference.

  Each foot's own phase is (phase + offset) mod 1. During the first half of its cycle the foot
  swings and its reference height is `swing_height * sin(pi * s)`, s the progress through the
  swing; during the second half it stands and the reference is 0. With a near-zero command
  every reference is 0, so the clock asks a robot told to stand to keep its feet down. With
  `clearance`, a swinging foot's reference is a least height: a foot above it costs nothing (a
  swing may rise over a stair's edge), one below it costs as before; standing feet and a robot
  told to stand are held to 0 as without it.

  Args:
    foot_height: float32 [F], lowest point of each foot above the floor, m.
    phase: float32 [], the gait clock in [0, 1).
    offsets: float32 [F], each foot's phase offset (0 and 0.5 on the diagonals: a trot).
    command: float32 [3].
    swing_height: apex of the reference swing, m.
    clearance: whether a swinging foot may rise above its reference at no cost.
  """
  foot_phase = jnp.mod(phase + offsets, 1.0)  # [F]
  swinging = foot_phase < 0.5  # [F]
  reference = jnp.where(swinging, swing_height * jnp.sin(2.0 * jnp.pi * foot_phase), 0.0)  # [F]
  moving = (jnp.linalg.norm(command[:2]) > 0.1) | (jnp.abs(command[2]) > 0.1)
  reference = reference * moving
  miss = foot_height - reference  # [F]
  if clearance:
    miss = jnp.where(swinging & moving, jnp.minimum(miss, 0.0), miss)
  error = jnp.sum(jnp.square(miss))
  return jnp.exp(-error / 0.01)


def feet_slip(foot_speed: jax.Array, contact: jax.Array) -> jax.Array:
  """Squared horizontal speed of the feet that are on the ground, (m/s)^2."""
  return jnp.sum(jnp.square(foot_speed) * contact)


def pose(joint_pos: jax.Array, default_pose: jax.Array) -> jax.Array:
  """Squared deviation of the joints from the standing pose, rad^2."""
  return jnp.sum(jnp.square(joint_pos - default_pose))


def limb_contact(limb_touches: jax.Array) -> jax.Array:
  """The number of limbs touching the ground (on the Go2 its thighs, 0 to 4)."""
  return limb_touches.astype(jnp.float32)


def termination(terminated: jax.Array) -> jax.Array:
  """1 on the step an episode terminates (fall, contact, limit, non-finite), else 0."""
  return terminated.astype(jnp.float32)


class StepInputs(NamedTuple):
  """What the reward terms read of one control step. A actuated joints, F feet."""

  command: jax.Array
  """float32 [3]: the command the step was taken under."""
  lin_vel: jax.Array
  """float32 [3]: trunk linear velocity at the end of the step, trunk frame, m/s."""
  ang_vel: jax.Array
  """float32 [3]: trunk angular velocity, trunk frame, rad/s."""
  gravity: jax.Array
  """float32 [3]: the direction of gravity in the trunk frame (unit)."""
  actuator_force: jax.Array
  """float32 [A]: actuator forces, N·m."""
  action: jax.Array
  """float32 [A]: this step's clipped action."""
  last_action: jax.Array
  """float32 [A]: the previous step's clipped action."""
  joint_pos: jax.Array
  """float32 [A]: joint angles, rad."""
  default_pose: jax.Array
  """float32 [A]: the standing pose, rad."""
  air_time: jax.Array
  """float32 [F]: seconds each foot has been in the air, counting this step."""
  first_contact: jax.Array
  """bool [F]: a debounced touchdown after time in the air."""
  foot_height: jax.Array
  """float32 [F]: each foot's clearance above the ground, m."""
  gait_phase: jax.Array
  """float32 []: the trot clock at the start of the step, in [0, 1)."""
  gait_offsets: jax.Array
  """float32 [F]: each foot's phase offset in the trot."""
  foot_speed: jax.Array
  """float32 [F]: mean horizontal speed over the step, m/s."""
  stance: jax.Array
  """bool [F]: on the ground at both ends of the step (where a moving foot slips)."""
  limb_touches: jax.Array
  """int32 []: how many limb geoms (`Robot.limb_contact`) touch the ground."""
  terminated: jax.Array
  """bool []: the step ended the episode by a failure."""


def table(cfg: config_lib.RewardConfig, x: StepInputs) -> dict[str, Callable[[], jax.Array]]:
  """Every term of `RewardConfig.scales` by name, as a thunk of the step's inputs (a term with
  scale 0 is never evaluated)."""
  return {
      "tracking_lin_vel": lambda: tracking_lin_vel(x.command, x.lin_vel, cfg.tracking_sigma),
      "tracking_ang_vel": lambda: tracking_ang_vel(x.command, x.ang_vel, cfg.tracking_sigma),
      "lin_vel_z": lambda: lin_vel_z(x.lin_vel),
      "ang_vel_xy": lambda: ang_vel_xy(x.ang_vel),
      "orientation": lambda: orientation(x.gravity),
      "torques": lambda: torques(x.actuator_force),
      "action_rate": lambda: action_rate(x.action, x.last_action),
      "feet_air_time": lambda: feet_air_time(
          x.air_time, x.first_contact, x.command, cfg.air_time_target),
      "pose": lambda: pose(x.joint_pos, x.default_pose),
      "gait_phase": lambda: gait_phase(
          x.foot_height, x.gait_phase, x.gait_offsets, x.command, cfg.swing_height,
          cfg.swing_clearance),
      "feet_slip": lambda: feet_slip(x.foot_speed, x.stance),
      "limb_contact": lambda: limb_contact(x.limb_touches),
      "termination": lambda: termination(x.terminated),
  }


def scales(cfg: config_lib.RewardConfig) -> dict[str, float]:
  """The non-zero term scales, in `RewardConfig` order: the terms a step evaluates."""
  return {name: scale for name, scale in cfg.scales().items() if scale != 0.0}


def step_reward(cfg: config_lib.RewardConfig, dt: float, x: StepInputs, finite: jax.Array
                ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """The step's reward and its non-zero terms.

  Each term is scaled by its weight and the control period `dt`, and is 0 on a non-finite step
  (`finite` False). The reward is the sum of the shaped terms (clipped at 0 with
  `reward.only_positive`) plus the termination term.

  Returns:
    (float32 [] reward, {term name: float32 [] scaled term}).
  """
  terms = table(cfg, x)
  scaled = {name: scale * dt * jnp.where(finite, terms[name](), 0.0)
            for name, scale in scales(cfg).items()}
  shaped = sum((v for k, v in scaled.items() if k != "termination"), jnp.zeros(()))
  if cfg.only_positive:
    shaped = jnp.maximum(shaped, 0.0)
  return shaped + scaled.get("termination", 0.0), scaled
