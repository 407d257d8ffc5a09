"""The policy's observation: its layout, defined once, and how it is built from what a robot
measures.

The policy observation is a concatenation of named blocks. `policy_layout` lists them, in order,
with their sizes, units and noise; `policy_observation` builds the vector from `Readings` (what the
robot's IMU, state estimator and joint encoders give) and the task inputs (command, previous
action, gait clock). Every place that makes a policy observation goes through these two:

  * the MJX env (`mjx_walk.sim.env`), from `mjx.Data`, in training and on the panel;
  * the second-simulator check (`mjx_walk.deploy.sim2sim`), from C MuJoCo's `MjData`;
  * the ONNX export (`mjx_walk.deploy.onnx_policy`), which writes `Layout.describe()` into the
    model's metadata, so a robot-side program knows what to feed it.

Readings are taken in any world frame: the observation only uses them rotated into the trunk
frame, so a robot on a real inclined floor (C MuJoCo, gravity straight down) and one on a level
floor under tilted gravity (MJX) that stand alike observe alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from mjx_walk import config as config_lib

TROT_OFFSETS = {"FR": 0.0, "RL": 0.0, "FL": 0.5, "RR": 0.5}
"""Phase offset of each foot on the gait clock: the diagonal pairs swing half a cycle apart."""


class Readings(NamedTuple):
  """What one robot measures at one instant. float32; a leading batch axis is allowed."""

  quat: jax.Array
  """[4]: trunk orientation in the world frame, (w, x, y, z): the free joint's qpos[3:7]."""
  lin_vel: jax.Array
  """[3]: trunk linear velocity in the world frame, m/s: the free joint's qvel[0:3]."""
  ang_vel: jax.Array
  """[3]: trunk angular velocity in the trunk frame, rad/s: the free joint's qvel[3:6]."""
  down: jax.Array
  """[3]: the unit vector along gravity in the world frame."""
  joint_pos: jax.Array
  """[A]: actuated joint angles, rad, in actuator order."""
  joint_vel: jax.Array
  """[A]: actuated joint velocities, rad/s."""
  height_scan: jax.Array | None = None
  """[S]: the height scan (`mjx_walk.sim.height_scan`), m, as the robot's elevation map gives it;
  None without one."""


class TaskInputs(NamedTuple):
  """What the controller adds to the readings. float32; a leading batch axis is allowed."""

  command: jax.Array
  """[3]: (vx m/s, vy m/s, yaw rate rad/s) in the trunk frame."""
  last_action: jax.Array
  """[A]: the previous policy action, clipped to `env.action_clip`."""
  gait_phase: jax.Array
  """[]: the gait clock in [0, 1) (0 without a clock)."""


@dataclasses.dataclass(frozen=True)
class Block:
  """One named slice of the policy observation."""

  name: str
  size: int
  units: str
  description: str
  noise: str | None
  """The `config.EnvConfig` field holding this block's uniform noise half-width (scaled by
  `env.obs_noise_scale`); None for a block without it (noise-free, or noised by its own module,
  as the height scan)."""
  details: tuple[tuple[str, Any], ...] = ()
  """More about the block for a robot-side program, (key, plain value) pairs: the height scan's
  grid and the place of each point."""


@dataclasses.dataclass(frozen=True)
class Layout:
  """The policy observation's blocks, in order."""

  blocks: tuple[Block, ...]

  @property
  def size(self) -> int:
    return sum(b.size for b in self.blocks)

  def offsets(self) -> dict[str, int]:
    """Where each block starts in the observation vector."""
    starts, at = {}, 0
    for block in self.blocks:
      starts[block.name] = at
      at += block.size
    return starts

  def describe(self) -> list[dict[str, Any]]:
    """The layout as plain data: name, offset, size, units and description of each block."""
    offsets = self.offsets()
    return [{"name": b.name, "offset": offsets[b.name], "size": b.size, "units": b.units,
             "description": b.description, **dict(b.details)} for b in self.blocks]


def rotate_inverse(quat: jax.Array, vec: jax.Array) -> jax.Array:
  """Rotates world-frame vectors [..., 3] into the frame of the unit quaternion (w, x, y, z) [4]."""
  w, xyz = quat[..., :1], -quat[..., 1:]
  t = 2.0 * jnp.cross(xyz, vec)
  return vec + w * t + jnp.cross(xyz, t)


def rotate(quat: jax.Array, vec: jax.Array) -> jax.Array:
  """Rotates vectors [..., 3] in the frame of the unit quaternion (w, x, y, z) [4] into the world
  (the trunk's hips [H, 3] in `ground.trunk_height`): `rotate_inverse` by the conjugate."""
  return rotate_inverse(quat * jnp.array([1.0, -1.0, -1.0, -1.0]), vec)


def trunk_frame(readings: Readings) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(linear velocity, angular velocity, gravity direction), each [3] in the trunk frame."""
  lin_vel = rotate_inverse(readings.quat, readings.lin_vel)
  gravity = rotate_inverse(readings.quat, readings.down)
  return lin_vel, readings.ang_vel, gravity


def gait_clock_definition(env: config_lib.EnvConfig, foot_names: tuple[str, ...]) -> str:
  """The gait clock in words, with this config's numbers."""
  offsets = ", ".join(f"{name} {TROT_OFFSETS[name]:g}" for name in foot_names)
  return (f"(sin 2*pi*phi, cos 2*pi*phi). phi in [0, 1) starts uniformly at random at reset and "
          f"advances by gait_hz / control_hz = {env.gait_hz:g} / {env.control_hz:g} per control "
          f"step, after the step's action. Foot f's phase is (phi + offset_f) mod 1 with offsets "
          f"{offsets}; a foot is meant to swing while its phase is below 0.5.")


def policy_layout(env: config_lib.EnvConfig, num_actions: int,
                  foot_names: tuple[str, ...] = tuple(TROT_OFFSETS),
                  height_scan: Block | None = None) -> Layout:
  """The policy observation's blocks for an env config and a robot with `num_actions` joints;
  `height_scan` (`mjx_walk.sim.height_scan.block`) comes last, after the others' places."""
  a = num_actions
  blocks = [
      Block("base_lin_vel", 3, "m/s", "trunk linear velocity in the trunk frame (x forward, "
            "y left, z up); a state estimator's output on the robot", "noise_lin_vel"),
      Block("base_ang_vel", 3, "rad/s", "trunk angular velocity in the trunk frame (gyro)",
            "noise_gyro"),
      Block("projected_gravity", 3, "1", "unit vector along gravity in the trunk frame "
            "((0, 0, -1) standing level)", "noise_gravity"),
      Block("command", 3, "m/s, m/s, rad/s", "(vx, vy, yaw rate) to track, trunk frame", None),
      Block("joint_pos", a, "rad", "actuated joint angles minus the standing pose, actuator "
            "order", "noise_joint_pos"),
      Block("joint_vel", a, "rad/s", "actuated joint velocities, actuator order",
            "noise_joint_vel"),
      Block("last_action", a, "1", "the previous policy action, clipped to +-action_clip",
            None),
  ]
  if env.gait_hz:
    blocks.append(Block("gait_clock", 2, "1", gait_clock_definition(env, foot_names), None))
  if height_scan is not None:
    blocks.append(height_scan)
  return Layout(tuple(blocks))


def _values(readings: Readings, task: TaskInputs, default_pose: jax.Array
            ) -> dict[str, Callable[[], jax.Array]]:
  """How each block's value is computed, by block name."""
  lin_vel, ang_vel, gravity = trunk_frame(readings)

  def clock():
    angle = 2.0 * jnp.pi * task.gait_phase
    return jnp.stack([jnp.sin(angle), jnp.cos(angle)], axis=-1)

  return {
      "base_lin_vel": lambda: lin_vel,
      "base_ang_vel": lambda: ang_vel,
      "projected_gravity": lambda: gravity,
      "command": lambda: task.command,
      "joint_pos": lambda: readings.joint_pos - default_pose,
      "joint_vel": lambda: readings.joint_vel,
      "last_action": lambda: task.last_action,
      "gait_clock": clock,
      "height_scan": lambda: readings.height_scan,
  }


def policy_blocks(layout: Layout, readings: Readings, task: TaskInputs,
                  default_pose: jax.Array) -> list[jax.Array]:
  """The noise-free value of every block of `layout`, in order, each [..., size]."""
  values = _values(readings, task, default_pose)
  out = []
  for block in layout.blocks:
    value = values[block.name]()
    if value.shape[-1] != block.size:
      raise ValueError(f"observation block {block.name} has size {value.shape[-1]}, the layout "
                       f"says {block.size}")
    out.append(value)
  return out


def add_noise(layout: Layout, env: config_lib.EnvConfig, blocks: list[jax.Array],
              key: jax.Array) -> list[jax.Array]:
  """Each block plus uniform noise of half-width `env.obs_noise_scale * env.<block.noise>`.

  One key per block, split from `key` in layout order. A block whose noise field is 0 is left
  as it is; with `obs_noise_scale` 0 the others get zero times their draw.
  """
  keys = jax.random.split(key, len(blocks))
  noisy = []
  for k, block, value in zip(keys, layout.blocks, blocks):
    level = getattr(env, block.noise) if block.noise else 0.0
    if level:
      value = value + (env.obs_noise_scale * level) * jax.random.uniform(
          k, value.shape, minval=-1.0, maxval=1.0)
    noisy.append(value)
  return noisy


def policy_observation(layout: Layout, env: config_lib.EnvConfig, readings: Readings,
                       task: TaskInputs, default_pose: jax.Array,
                       key: jax.Array | None = None) -> jax.Array:
  """The policy observation [..., layout.size]: noisy with a key, noise-free without one."""
  blocks = policy_blocks(layout, readings, task, default_pose)
  if key is not None:
    blocks = add_noise(layout, env, blocks, key)
  return jnp.concatenate(blocks, axis=-1)
