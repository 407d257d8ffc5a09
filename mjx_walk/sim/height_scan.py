"""The height scan: a grid of points around the robot, fixed in its yaw frame, each reading the
trunk's height above the ground under it; and the sensing noise the policy reads it with.

The yaw frame is gravity's: its z axis is up (against gravity), its x axis the trunk's heading
(the trunk's x axis with its component along gravity removed), its y axis to the left. Point k
sits at (x_k, y_k) in that frame, at the trunk's height (`grid_points`, `describe`), and reads
the distance from there to the ground along gravity (`mjx_walk.sim.ground.depth_below`), clipped
to `scan.clip`: 0.3 m everywhere for a Go2 standing on flat ground, less where the ground rises
ahead (a stair), more where it falls away. Measured along gravity, a robot on MJX's level floor
under tilted gravity and one on C MuJoCo's inclined floor under vertical gravity read the same
scan, as a robot's elevation map (built in a gravity-aligned frame) would.

Noise (`corrupt`), scaled by `env.obs_noise_scale` like the other blocks, so the panel reads the
scan clean: the whole map shifted by a per-episode offset (`draw_offset`), uniform noise per
point and step, and points missing at `scan.missing_rate`, reading `clip[1]` (no ground seen).
The critic always reads the clean scan.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import ground as ground_lib
from mjx_walk.sim import observations

ORDER = ("row-major from the rear row to the front row (x from -length/2 to +length/2), each row "
         "from the right to the left (y from -width/2 to +width/2): point k = i * columns + j")
"""The points' order, in words, as the ONNX metadata gives it."""


def grid_points(scan: config_lib.ScanConfig) -> np.ndarray:
  """float32 [S, 2]: each point's (x forward, y left) in the trunk's yaw frame, m, in `ORDER`."""
  rows, columns = scan.shape
  x = -scan.length / 2 + scan.spacing * np.arange(rows)
  y = -scan.width / 2 + scan.spacing * np.arange(columns)
  return np.stack(np.meshgrid(x, y, indexing="ij"), axis=-1).reshape(-1, 2).astype(np.float32)


def yaw_frame(quat: jax.Array, down: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(heading [3], left [3]): world-frame unit vectors perpendicular to gravity `down` [3] (unit),
  the heading along the x axis of a trunk of orientation `quat` [4] (w, x, y, z)."""
  up = -down
  forward = observations.rotate(quat, jnp.array([1.0, 0.0, 0.0]))  # trunk x, world
  heading = forward - jnp.dot(forward, up) * up
  heading = heading / jnp.maximum(jnp.linalg.norm(heading), 1e-6)
  return heading, jnp.cross(up, heading)


def measure(scan: config_lib.ScanConfig, geometry: ground_lib.Geometry, field: jax.Array | None,
            points: jax.Array, position: jax.Array, quat: jax.Array,
            down: jax.Array) -> jax.Array:
  """float32 [S]: the clean scan of a trunk at `position` [3] with orientation `quat` [4] under
  gravity `down` [3] (unit), over the ground (`field`, None on the plane), at `points` [S, 2]
  (`grid_points`)."""
  heading, left = yaw_frame(quat, down)
  world = position + points[:, 0:1] * heading + points[:, 1:2] * left  # [S, 3]
  depth = ground_lib.depth_below(geometry, field, world, down)
  return jnp.clip(depth, scan.clip[0], scan.clip[1])


def draw_offset(scan: config_lib.ScanConfig, noise_scale: float, key: jax.Array) -> jax.Array:
  """float32 []: one episode's vertical offset of the whole map, m."""
  return (noise_scale * scan.offset_noise) * jax.random.uniform(key, (), minval=-1.0, maxval=1.0)


def corrupt(scan: config_lib.ScanConfig, noise_scale: float, clean: jax.Array,
            offset: jax.Array, key: jax.Array) -> jax.Array:
  """float32 [S]: the scan the policy reads this step: `clean` [S] shifted by the episode's
  `offset` [], plus uniform per-point noise, clipped, and each point missing (reading
  `clip[1]`) with probability `noise_scale * missing_rate`."""
  k_noise, k_missing = jax.random.split(key)
  noise = (noise_scale * scan.noise) * jax.random.uniform(
      k_noise, clean.shape, minval=-1.0, maxval=1.0)
  noisy = jnp.clip(clean + offset + noise, scan.clip[0], scan.clip[1])
  missing = jax.random.uniform(k_missing, clean.shape) < noise_scale * scan.missing_rate
  return jnp.where(missing, scan.clip[1], noisy)


def describe(scan: config_lib.ScanConfig) -> dict[str, Any]:
  """The scan for a robot-side program (the ONNX metadata): grid, order, units, clip and each
  point's (x, y) in the trunk's yaw frame."""
  rows, columns = scan.shape
  return {
      "frame": "the trunk's yaw frame: x the heading (the trunk's x axis level with the ground, "
               "perpendicular to gravity), y to the left, z up against gravity; origin at the "
               "trunk",
      "reading": "the trunk's height above the ground under the point, along gravity, m "
                 "(positive when the ground is below the trunk)",
      "order": ORDER,
      "rows": rows, "columns": columns, "spacing": scan.spacing,
      "clip": [float(scan.clip[0]), float(scan.clip[1])],
      "missing": f"a point with no ground measured reads clip[1] = {scan.clip[1]:g}",
      "points": grid_points(scan).round(6).tolist(),
  }


def block(scan: config_lib.ScanConfig) -> observations.Block:
  """The scan's block of the policy observation (`observations.policy_layout`), described."""
  rows, columns = scan.shape
  details = tuple((key, _frozen(value)) for key, value in describe(scan).items())
  return observations.Block(
      "height_scan", scan.num_points, "m",
      f"height scan: the trunk's height above the ground at {rows} x {columns} points every "
      f"{scan.spacing:g} m around the trunk, in its yaw frame, clipped to "
      f"[{scan.clip[0]:g}, {scan.clip[1]:g}]", None, details)


def _frozen(value: Any) -> Any:
  """Lists as tuples, so that a block stays hashable (JSON writes them back as lists)."""
  return tuple(_frozen(v) for v in value) if isinstance(value, list) else value
