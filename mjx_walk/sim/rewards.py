"""Reward terms for joystick locomotion, each a small pure function of one env's quantities.

Every term returns an unscaled float32 scalar. `mjx_walk.sim.env` evaluates them into a
`dict[str, Array]` keyed by the names in `RewardConfig`, multiplies each by its scale and the
control period, and reports every scaled term separately, so that a total built from shaping terms
cannot hide a policy that stands still.

Frames: linear and angular velocities are in the trunk frame; `command` is (vx, vy, yaw_rate) in
that frame too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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
) -> jax.Array:
  """exp(-|h - h_ref|^2 / 0.01): 1 when every foot's height follows the gait clock's reference.

  Each foot's own phase is (phase + offset) mod 1. During the first half of its cycle the foot
  swings and its reference height is `swing_height * sin(pi * s)`, s the progress through the
  swing; during the second half it stands and the reference is 0. With a near-zero command
  every reference is 0, so the clock asks a robot told to stand to keep its feet down.

  Args:
    foot_height: float32 [F], lowest point of each foot above the floor, m.
    phase: float32 [], the gait clock in [0, 1).
    offsets: float32 [F], each foot's phase offset (0 and 0.5 on the diagonals: a trot).
    command: float32 [3].
    swing_height: apex of the reference swing, m.
  """
  foot_phase = jnp.mod(phase + offsets, 1.0)  # [F]
  swinging = foot_phase < 0.5  # [F]
  reference = jnp.where(swinging, swing_height * jnp.sin(2.0 * jnp.pi * foot_phase), 0.0)  # [F]
  moving = (jnp.linalg.norm(command[:2]) > 0.1) | (jnp.abs(command[2]) > 0.1)
  reference = reference * moving
  error = jnp.sum(jnp.square(foot_height - reference))
  return jnp.exp(-error / 0.01)


def feet_slip(foot_speed: jax.Array, contact: jax.Array) -> jax.Array:
  """Squared horizontal speed of the feet that are on the ground, (m/s)^2."""
  return jnp.sum(jnp.square(foot_speed) * contact)


def pose(joint_pos: jax.Array, default_pose: jax.Array) -> jax.Array:
  """Squared deviation of the joints from the standing pose, rad^2."""
  return jnp.sum(jnp.square(joint_pos - default_pose))


def termination(terminated: jax.Array) -> jax.Array:
  """1 on the step an episode terminates (fall, contact, limit, non-finite), else 0."""
  return terminated.astype(jnp.float32)
