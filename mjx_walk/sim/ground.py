"""The ground under the robot, on MuJoCo's plane or a heightfield tile, as pure functions of arrays.

Heights are measured from the ground under a point: above z = 0 on the plane (slopes there are
tilted gravity, so the floor stays level in the env's frame), above the heightfield's surface
under it otherwise (`mjx_walk.sim.terrain.surface`, the surface the feet collide with), and the
trunk's above that surface's mean under its hips. `Geometry` holds one robot's static part of
these checks (the floor geom, the trunk and thigh geoms and their probe points, the feet and
their radii, the hips, the heightfield's grid); `field` is an env's heightfield this episode,
float32 [nodes, nodes] in m, or None on the plane.

The trunk and thighs touch the ground when a penetrating contact with the floor plane is in the
last physics substep's contact list, or, on a heightfield, where they do not collide, when one
of their probe points (`Geometry.probe_*`) comes within its radius of the surface. The MJX env
(`mjx_walk.sim.env`) and the C MuJoCo replay (`mjx_walk.deploy.sim2sim`) both measure here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjx_walk.sim import observations
from mjx_walk.sim import robots
from mjx_walk.sim import terrain as terrain_lib


@dataclasses.dataclass(frozen=True)
class Geometry:
  """One robot's ground checks, static (closed over under jit). F feet, K body geoms, P probe
  points."""

  grid: terrain_lib.Grid | None
  """The heightfield's shape, or None on the plane."""
  floor_geom: int
  """The floor's geom id (the plane or the heightfield)."""
  body_geoms: jax.Array
  """int32 [K]: the trunk and thigh geoms whose touching the ground is `body_contact`."""
  foot_geoms: jax.Array
  """int32 [F]: the foot spheres, in foot order."""
  foot_radius: jax.Array
  """float32 [F]: their radii, m."""
  hips: jax.Array
  """float32 [H, 3]: the legs' roots in the trunk frame, m (`Robot.hip_offsets`)."""
  probe_geoms: jax.Array | None = None
  """int32 [P]: the geom each probe point belongs to (heightfield only)."""
  probe_points: jax.Array | None = None
  """float32 [P, 3]: each probe point in its geom's frame, m."""
  probe_radius: jax.Array | None = None
  """float32 [P]: the distance to the surface at which a probe point touches it, m."""

  @classmethod
  def of(cls, robot: robots.Robot, grid: terrain_lib.Grid | None) -> Geometry:
    """The checks of `robot` (its compiled model) on the plane, or on `grid`'s heightfield."""
    mj_model = robot.mj_model
    probes = {}
    if grid is not None:
      geoms, points, radius = _body_probes(mj_model, robot.body_contact_geom_ids)
      probes = dict(probe_geoms=jnp.asarray(geoms), probe_points=jnp.asarray(points),
                    probe_radius=jnp.asarray(radius))
    return cls(grid=grid, floor_geom=robot.floor_geom_id,
               body_geoms=jnp.asarray(robot.body_contact_geom_ids),
               foot_geoms=jnp.asarray(robot.foot_geom_ids),
               foot_radius=jnp.asarray(mj_model.geom_size[robot.foot_geom_ids, 0], jnp.float32),
               hips=jnp.asarray(robot.hip_offsets, jnp.float32),
               **probes)


def trunk_height(geometry: Geometry, field: jax.Array | None, position: jax.Array,
                 quat: jax.Array) -> jax.Array:
  """float32 []: the height of a trunk at `position` [3], of orientation `quat` [4] (w, x, y, z),
  above the ground, m: above z = 0 on the plane; on a heightfield, above the mean of the surface
  under its hips (`Geometry.hips`).

  The hips' mean is the ground the legs stand on. Straight under the origin, a trunk whose legs
  straddle a stair's edge reads one tread or the other, a riser apart, as the origin crosses the
  edge: a Go2 climbing 15 cm risers with its front legs on the upper tread reads about 0.2 m there,
  near `env.fall_height`. (legged_gym likewise measures its base height above the mean of its
  height scan.)
  """
  if field is None:
    return position[2]
  hips = position + observations.rotate(quat, geometry.hips)  # [H, 3]
  return position[2] - jnp.mean(terrain_lib.surface(field, geometry.grid, hips[:, 0:2])[0])


def depth_below(geometry: Geometry, field: jax.Array | None, points: jax.Array,
                down: jax.Array, iterations: int = 3) -> jax.Array:
  """float32 [...]: how far each point [..., 3] is above the ground along the unit vector
  `down` [3] (gravity's direction), m: the distance a ray from the point along `down` travels to
  the ground (negative when the ground is above the point).

  On the plane the ray meets z = 0 exactly. On a heightfield it meets the surface where
  z + t * down_z = surface(xy + t * down_xy): exact in one evaluation under vertical gravity,
  and under tilted gravity the fixed point of `iterations` evaluations, which converges while
  the surface's gradient times tan(tilt) stays below 1 (a flat or gently sloped ground under the
  slope stratum's tilt).
  """
  rise = -down[2]  # > 0: gravity points down through the floor
  if field is None:
    return points[..., 2] / rise
  def refine(_, t):
    xy = points[..., :2] + t[..., None] * down[:2]
    return (points[..., 2] - terrain_lib.surface(field, geometry.grid, xy)[0]) / rise

  # A loop, not unrolled: XLA would fuse each evaluation into the next and repeat the earlier
  # surface lookups inside it (3 unrolled evaluations took 13 times one, for 512 envs on the CPU).
  return jax.lax.fori_loop(0, iterations, refine, jnp.zeros(points.shape[:-1], points.dtype))


def foot_heights(geometry: Geometry, field: jax.Array | None,
                 geom_xpos: jax.Array) -> jax.Array:
  """float32 [F]: each foot sphere's clearance, m: its lowest point above z = 0 on the plane;
  on a heightfield, the sphere's distance to the surface's plane under it. `geom_xpos` is every
  geom's position [ngeom, 3]."""
  if field is None:
    return geom_xpos[geometry.foot_geoms, 2] - geometry.foot_radius
  return terrain_lib.clearance(field, geometry.grid, geom_xpos[geometry.foot_geoms],
                               geometry.foot_radius)


def floor_normal(quat: jax.Array) -> jax.Array:
  """float32 [3]: the floor's normal (world +z) in the frame of a trunk of orientation `quat`
  [4] (w, x, y, z)."""
  return observations.rotate_inverse(quat, jnp.array([0.0, 0.0, 1.0]))


def floor_touches(geometry: Geometry, pairs: Any, dist: Any, xp: Any = jnp) -> Any:
  """bool [K]: which body geoms (`Geometry.body_geoms`, in order) penetrate the floor plane,
  from a contact list: `pairs` [C, 2] geom ids, `dist` [C] signed distances. `xp` is jax.numpy
  (MJX's fixed-size contact list, whose pairs are picked out by id on every call) or NumPy (C
  MuJoCo's `data.contact`)."""
  floor, geoms = geometry.floor_geom, xp.asarray(geometry.body_geoms)
  mine = (((pairs[:, 0:1] == floor) & (pairs[:, 1:2] == geoms)) |
          ((pairs[:, 1:2] == floor) & (pairs[:, 0:1] == geoms)))  # [C, K]
  return (mine & (dist[:, None] < 0.0)).any(axis=0)


def probe_points(geometry: Geometry, geom_xpos: jax.Array, geom_xmat: jax.Array) -> jax.Array:
  """float32 [P, 3]: the body-contact probe points in the frame of the geom positions
  [ngeom, 3] and orientations [ngeom, 3, 3] given (heightfield only)."""
  xpos, xmat = geom_xpos[geometry.probe_geoms], geom_xmat[geometry.probe_geoms]
  return xpos + jnp.einsum("pij,pj->pi", xmat, geometry.probe_points)


def surface_touches(geometry: Geometry, field: jax.Array, points: jax.Array) -> jax.Array:
  """bool [K]: which body geoms (`Geometry.body_geoms`, in order) have a probe point, of
  `points` [P, 3], within its radius of the heightfield's surface."""
  touch = terrain_lib.clearance(field, geometry.grid, points, geometry.probe_radius) < 0.0  # [P]
  return (touch[:, None] & (geometry.probe_geoms[:, None] == geometry.body_geoms)).any(axis=0)


def body_touches(geometry: Geometry, field: jax.Array | None, data: Any) -> jax.Array:
  """bool [K]: which body geoms (`Geometry.body_geoms`, in order; on the Go2 the trunk, then the
  four thighs) touch the ground in the MJX physics state `data`: its last substep's contacts on
  the plane (`floor_touches`), its geom poses on a heightfield (`surface_touches`)."""
  if field is None:
    contact = data._impl.contact  # pylint: disable=protected-access
    return floor_touches(geometry, contact.geom, contact.dist)
  return surface_touches(geometry, field,
                         probe_points(geometry, data.geom_xpos, data.geom_xmat))


def _body_probes(model: mujoco.MjModel, geom_ids: Any
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
