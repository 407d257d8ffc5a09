"""What one env carries from control step to control step, and what each step reports.

`EnvState` is the whole state of one env (batched along leading axes by `jax.vmap`): its MJX
physics state, the observation the policy acts on next, the last step's reward, ending and
typed `StepSignals`, its seed-family draw, the task bookkeeping (`TaskState`) and, on a
heightfield, its curriculum state. `mjx_walk.sim.env` makes and steps them; the trainer, the
audit (`mjx_walk.learn.audit`, which reads `StepSignals`), the panel and the traces read them
without the env. `Measured` and `Feet` are what one step's stages read of the physics state it
ended in, each measured once.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.struct
import jax

from mjx_walk.sim import families
from mjx_walk.sim import observations
from mjx_walk.sim import terrain as terrain_lib
from mjx_walk.sim._mjx import mjx

Observation = dict[str, jax.Array]  # {"policy": [O], "critic": [P]}


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
  scan_offset: jax.Array | None = None
  """float32 []: this episode's vertical offset of the height scan the policy reads, m
  (`height_scan.draw_offset`); None without a scan."""


@flax.struct.dataclass
class StepSignals:
  """What the batch audits (`mjx_walk.learn.audit`) read of one control step.

  Measured at the end of the step, before any auto-reset; F is the number of feet, in
  `LocomotionEnv.foot_names` order. Batched, every field gains the leading env axes ([N] or
  [T, N]).
  """

  trunk_height: jax.Array
  """float32 []: height of the trunk origin above the ground, m (`ground.trunk_height`)."""
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


class Feet(NamedTuple):
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


class Measured(NamedTuple):
  """What the step's stages read of the physics state it ended in, each measured once."""

  readings: observations.Readings
  """What the robot's sensors read."""
  lin_vel: jax.Array
  """float32 [3]: trunk linear velocity, trunk frame, m/s."""
  ang_vel: jax.Array
  """float32 [3]: trunk angular velocity, trunk frame, rad/s."""
  gravity: jax.Array
  """float32 [3]: the family's gravity direction in the trunk frame."""
  floor_normal: jax.Array
  """float32 [3]: the floor's normal in the trunk frame."""
  trunk_height: jax.Array
  """float32 []: the trunk origin's height above the ground, m: above the plane, or above the
  heightfield's mean surface under the hips (`ground.trunk_height`)."""
  body_touches: jax.Array
  """bool [K]: which body-contact geoms (the trunk, the thighs) touch the ground (none on a
  non-finite step)."""
  feet: Feet
