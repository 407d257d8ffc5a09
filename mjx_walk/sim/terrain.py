"""Heightfield terrain: each env's ground, generated in JAX, its surface, and the curriculum.

On `terrain.ground="heightfield"` every env stands on its own heightfield (its family's shape at
its level, `heights`), written into the nominal `mjx.Model` (`hfield_data`) on every step, so
`jax.vmap` batches it like the domain randomisation.

The ground is a square TILE of side L (`terrain.tile_size`) that repeats with period L in x
and y. The heightfield MJX collides with covers the tile plus a margin on each side, sampled
every `terrain.resolution` metres, and is centred on the world origin, so every coordinate stays
within a few metres of it (float32 loses contact precision far from the origin). When the trunk
leaves the tile, `wrap` moves the robot back by whole tiles: the ground under it is the same, so
nothing physical changes, and `TerrainState.offset` keeps the distance walked.

A tile is a function of (type, seed, magnitude), made by `tile`, and is its type's SHAPE (a
function of the seed alone, `unit_tile`) times the SCALE of the magnitude (`scale`: the magnitude
itself, or the tangent of a slope's angle):
  flat         zeros.
  rough        random bumps, uniform in [0, magnitude] m on a `rough_cell` grid, interpolated.
  slope        a pyramid whose faces rise (or, drawn from the seed, fall) at `magnitude` degrees
               from the tile's edge towards its centre.
  stairs_up    a pit of stairs, `magnitude` m risers: the robot starts at the bottom, climbs out.
  stairs_down  a pyramid of stairs: the robot starts on top and walks down.
  obstacles    `obstacle_count` rectangular blocks of 0.25 to 1 times `magnitude` m.
Every tile has a flat square platform (`terrain.platform_size`) at its centre, where episodes
start. A training family's seed fixes its type and seed (`TerrainDraw`); its env's curriculum
level fixes the magnitude, linearly from the low end of the type's range at level 0 to its high
end at the last level, so the endpoints of every range are reached exactly. A held-out family
has one fixed magnitude. Because the level only scales the family's shape, the shape is made
once per family, when its draws are stacked (`shapes`), and an env's ground at any level is
`scale * shape`: nothing is generated inside the training step.

The surface is MuJoCo's: each grid cell is two triangles split along the diagonal from
(x0, y0) to (x1, y1). `surface` gives the height and normal there, so that foot clearances,
trunk height and the body's contact with the ground are measured on the surface MJX collides
with.

The curriculum (`next_level`) moves an env's level at the end of each of its episodes, from what
the episode did against its command:
  up one    the episode reached the time limit and walked at least `promote_fraction` of its
            commanded distance (progress along the commanded direction, trunk frame), and was
            commanded at least `min_commanded_distance`; or, with `promote_distance` > 0 (the
            distance as legged_gym's, the time limit as well), it reached the time limit at
            least `promote_distance` from its start; with `promote_within_reach` too, an
            episode whose command cannot take it that far (`command_reach`) by the first rule;
  down one  it terminated (fell, touched the ground with its body, diverged), or it was
            commanded at least `min_commanded_distance` and walked less than `demote_fraction`
            of it;
  else      unchanged. Levels are clipped to [0, num_levels - 1]: an env at the top stays there.
Judging progress against the command (not a fixed distance) keeps a slow but correct walker from
being demoted; the first level is set at reset, before any episode, and only an ended episode
moves it. Each update reports where the curriculum stands (`curriculum_metrics`).
"""

from __future__ import annotations

import dataclasses
import math

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import robots

TYPES = config_lib.TERRAIN_TYPES
FLAT, ROUGH, SLOPE, STAIRS_UP, STAIRS_DOWN, OBSTACLES = range(len(TYPES))
FOOT_REACH = 0.35
"""How far the feet reach horizontally from the trunk, m (sizes the platform check)."""


@dataclasses.dataclass(frozen=True)
class Grid:
  """The static geometry of the heightfield: what MJX compiles into its collision shapes.

  The tile has `cells` x `cells` samples (periodic: sample `cells` is sample 0). The heightfield
  has `nodes` x `nodes` samples, `margin_cells` beyond the tile on each side, plus the closing
  sample, and spans [-half_size, half_size] in x and y.
  """

  tile_size: float
  resolution: float
  cells: int
  margin_cells: int
  platform_size: float

  @classmethod
  def from_config(cls, terrain: config_lib.TerrainConfig) -> Grid:
    return cls(tile_size=float(terrain.tile_size), resolution=float(terrain.resolution),
               cells=round(terrain.tile_size / terrain.resolution),
               margin_cells=round(terrain.margin / terrain.resolution),
               platform_size=float(terrain.platform_size))

  @property
  def nodes(self) -> int:
    return self.cells + 2 * self.margin_cells + 1

  @property
  def half_size(self) -> float:
    """Half the side of the heightfield, m."""
    return (self.nodes - 1) * self.resolution / 2

  def tile_coordinates(self) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) float32 [cells, cells] of the tile's samples, rows along y, the centre at 0."""
    axis = np.arange(self.cells) * self.resolution - self.tile_size / 2
    x, y = np.meshgrid(axis, axis)
    return x.astype(np.float32), y.astype(np.float32)

  def tile_rows(self) -> np.ndarray:
    """int [nodes]: the tile sample under each heightfield sample along one axis."""
    return (np.arange(self.nodes) - self.margin_cells) % self.cells


@flax.struct.dataclass
class TerrainDraw:
  """What a family's seed fixes of its ground. Batched along a leading axis by `jax.vmap`."""

  type: jax.Array
  """int32 []: index into `TYPES`."""
  seed: jax.Array
  """uint32 []: the seed of the tile's shape."""
  magnitude: jax.Array
  """float32 [2]: the type's magnitude at difficulty 0 and 1 (m, or degrees for `slope`); both
  ends equal for a held-out family."""
  shape: jax.Array
  """float32 [nodes, nodes]: the heightfield per unit of scale (`unit_tile` over the whole
  field); the ground at a level is `scale(...) * shape`."""


@flax.struct.dataclass
class TerrainState:
  """One env's ground and curriculum bookkeeping, carried in `EnvState.terrain`."""

  level: jax.Array
  """int32 []: curriculum level of the current episode."""
  offset: jax.Array
  """float32 [2]: whole tiles the robot has been moved back by this episode, m (walked position
  = qpos xy + offset)."""
  commanded: jax.Array
  """float32 []: distance commanded so far this episode, m (the integral of |command xy|)."""
  progress: jax.Array
  """float32 []: distance walked along the commanded direction so far this episode, m."""


def difficulty(level: jax.Array, num_levels: int) -> jax.Array:
  """float32: level / (num_levels - 1), so level 0 is 0 and the last level exactly 1."""
  return level.astype(jnp.float32) / (num_levels - 1)


def magnitude(draw: TerrainDraw, level: jax.Array, num_levels: int) -> jax.Array:
  """The magnitude of the draw's type at `level`: linear between the range's ends."""
  d = difficulty(level, num_levels)
  return draw.magnitude[0] + d * (draw.magnitude[1] - draw.magnitude[0])


def scale(kind: jax.Array, size: jax.Array) -> jax.Array:
  """What a unit tile of type `kind` is multiplied by for magnitude `size`: tan(size degrees)
  for a slope, `size` metres otherwise."""
  return jnp.where(kind == SLOPE, jnp.tan(jnp.deg2rad(size)), size)


# TILES


def _platform_distance(grid: Grid) -> np.ndarray:
  """float32 [cells, cells]: each sample's distance outside the central platform (max-norm), m."""
  x, y = grid.tile_coordinates()
  return np.maximum(np.maximum(np.abs(x), np.abs(y)) - grid.platform_size / 2, 0.0)


def _rough(grid: Grid, cfg: config_lib.TerrainConfig, key: jax.Array):
  step = round(cfg.rough_cell / cfg.resolution)
  coarse = grid.cells // step
  bumps = jax.random.uniform(key, (coarse, coarse))  # periodic coarse grid
  # Bilinear interpolation between coarse samples, wrapping around the tile.
  pos = np.arange(grid.cells) / step
  i0 = np.floor(pos).astype(int)
  i1 = (i0 + 1) % coarse
  w = jnp.asarray(pos - i0, jnp.float32)
  rows = bumps[i0] * (1 - w)[:, None] + bumps[i1] * w[:, None]  # [cells, coarse]
  field = rows[:, i0] * (1 - w)[None, :] + rows[:, i1] * w[None, :]  # [cells, cells]
  # Rises from the platform's edge over one bump cell.
  ramp = np.minimum(_platform_distance(grid) / cfg.rough_cell, 1.0)
  return field * ramp


def _slope(grid: Grid, key: jax.Array):
  sign = jnp.where(jax.random.bernoulli(key), 1.0, -1.0)
  x, y = grid.tile_coordinates()
  to_edge = grid.tile_size / 2 - np.maximum(np.abs(x), np.abs(y))  # 0 at the edge
  run = np.minimum(to_edge, grid.tile_size / 2 - grid.platform_size / 2)
  return sign * run


def _stairs(grid: Grid, cfg: config_lib.TerrainConfig, sign: float):
  x, y = grid.tile_coordinates()
  to_edge = grid.tile_size / 2 - np.maximum(np.abs(x), np.abs(y))
  most = math.floor((grid.tile_size - grid.platform_size) / 2 / cfg.stair_width + 1e-6)
  steps = np.minimum(np.floor(to_edge / cfg.stair_width + 1e-6), most)
  return jnp.asarray(sign * steps, jnp.float32)


def _obstacles(grid: Grid, cfg: config_lib.TerrainConfig, key: jax.Array):
  k_center, k_size, k_height = jax.random.split(key, 3)
  count = cfg.obstacle_count
  centers = jax.random.uniform(k_center, (count, 2), minval=-grid.tile_size / 2,
                               maxval=grid.tile_size / 2)
  half = jax.random.uniform(k_size, (count, 2), minval=cfg.obstacle_size[0],
                            maxval=cfg.obstacle_size[1]) / 2
  tops = jax.random.uniform(k_height, (count,), minval=0.25, maxval=1.0)
  x, y = grid.tile_coordinates()
  period = grid.tile_size

  def apart(a, b):  # periodic signed distance
    return jnp.abs(jnp.mod(a - b + period / 2, period) - period / 2)

  inside = ((apart(x[None], centers[:, 0, None, None]) < half[:, 0, None, None])
            & (apart(y[None], centers[:, 1, None, None]) < half[:, 1, None, None]))
  field = jnp.max(jnp.where(inside, tops[:, None, None], 0.0), axis=0)
  return jnp.where(_platform_distance(grid) > 0, field, 0.0)


def unit_tile(grid: Grid, cfg: config_lib.TerrainConfig, kind: jax.Array,
              seed: jax.Array) -> jax.Array:
  """float32 [cells, cells]: the shape of a tile of type `kind` (an index into TYPES) drawn from
  `seed`, per unit of `scale`: bumps and block tops in [0, 1], stairs in whole risers, slopes in
  metres of rise per unit of tan(angle). Rows along y; periodic."""
  key = jax.random.key(seed)
  branches = [
      lambda: jnp.zeros((grid.cells, grid.cells), jnp.float32),
      lambda: _rough(grid, cfg, key),
      lambda: _slope(grid, key),
      lambda: _stairs(grid, cfg, -1.0),
      lambda: _stairs(grid, cfg, 1.0),
      lambda: _obstacles(grid, cfg, key),
  ]
  return jax.lax.switch(kind, branches).astype(jnp.float32)


def tile(grid: Grid, cfg: config_lib.TerrainConfig, kind: jax.Array, seed: jax.Array,
         size: jax.Array) -> jax.Array:
  """float32 [cells, cells]: one tile of type `kind` shaped by `seed`, at magnitude `size` (m,
  or degrees for `slope`)."""
  return scale(kind, size) * unit_tile(grid, cfg, kind, seed)


def shapes(cfg: config_lib.TerrainConfig, kinds: np.ndarray, seeds: np.ndarray) -> jax.Array:
  """float32 [F, nodes, nodes]: `TerrainDraw.shape` of F families: each unit tile repeated over
  the tile and its margins. Computed once, when the families' draws are stacked."""
  grid = Grid.from_config(cfg)
  rows = grid.tile_rows()

  @jax.jit
  @jax.vmap
  def one(kind, seed):
    return unit_tile(grid, cfg, kind, seed)[rows][:, rows]

  return one(jnp.asarray(kinds, jnp.int32), jnp.asarray(seeds, jnp.uint32))


def heights(cfg: config_lib.TerrainConfig, draw: TerrainDraw, level: jax.Array) -> jax.Array:
  """float32 [nodes, nodes]: the heightfield of `draw` at curriculum `level`, m."""
  return scale(draw.type, magnitude(draw, level, cfg.num_levels)) * draw.shape


def held_out_heights(cfg: config_lib.TerrainConfig, draws: TerrainDraw) -> np.ndarray:
  """float32 [E, nodes, nodes]: the grounds of held-out families (`draws` batched along [E], e.g.
  `Manifest.eval_params().terrain`), regenerated from their type, seed and magnitude. A held-out
  magnitude has equal ends, so the level is immaterial: every level gives these heights."""
  at_level_0 = lambda draw: heights(cfg, draw, jnp.zeros((), jnp.int32))
  return np.asarray(jax.jit(jax.vmap(at_level_0))(draws))


def deepest(cfg: config_lib.TerrainConfig) -> float:
  """The largest depth below 0 any tile of `cfg` reaches, m (sizes the heightfield's base)."""
  grid = Grid.from_config(cfg)
  half_run = (grid.tile_size - grid.platform_size) / 2
  most = math.floor(half_run / cfg.stair_width + 1e-6)
  risers = (cfg.stair_height[1], cfg.panel_stair_height, max(config_lib.STAIR_RISERS_CM) / 100)
  stairs = most * max(risers)
  slope = math.tan(math.radians(cfg.slope_degrees[1])) * half_run
  return max(stairs, slope)


def heightfield(cfg: config_lib.TerrainConfig) -> robots.Heightfield | None:
  """The shape of the heightfield floor a run's robot is loaded with (`robots.load`), or None on
  the plane: the grid's samples and extent, and a solid base 0.2 m below the deepest tile. The
  env, the render model and C MuJoCo's second simulator all build their floor from it."""
  if not cfg.heightfield:
    return None
  grid = Grid.from_config(cfg)
  return robots.Heightfield(nodes=grid.nodes, half_size=grid.half_size, base=deepest(cfg) + 0.2,
                            max_contact_points=cfg.max_contact_points)


# THE SURFACE


def surface(field: jax.Array, grid: Grid, xy: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Height and unit normal of the heightfield's surface under world points `xy` [..., 2].

  The surface is MuJoCo's triangulation: in each cell, the triangle above the diagonal from
  (x0, y0) to (x1, y1) and the one below it. Points beyond the field take its edge.

  Returns:
    (height float32 [...], m; normal float32 [..., 3]).
  """
  last = grid.nodes - 1
  f = jnp.clip((xy + grid.half_size) / grid.resolution, 0.0, last - 1e-3)  # [..., 2]
  i = jnp.floor(f).astype(jnp.int32)
  u, v = f[..., 0] - i[..., 0], f[..., 1] - i[..., 1]  # along x, along y
  c, r = i[..., 0], i[..., 1]
  h00, h10 = field[r, c], field[r, c + 1]
  h01, h11 = field[r + 1, c], field[r + 1, c + 1]
  upper = v >= u  # the triangle (0,0), (1,1), (0,1)
  slope_x = jnp.where(upper, h11 - h01, h10 - h00)
  slope_y = jnp.where(upper, h01 - h00, h11 - h10)
  height = h00 + u * slope_x + v * slope_y
  normal = jnp.stack([-slope_x / grid.resolution, -slope_y / grid.resolution,
                      jnp.ones_like(height)], axis=-1)
  return height, normal / jnp.linalg.norm(normal, axis=-1, keepdims=True)


def clearance(field: jax.Array, grid: Grid, points: jax.Array, radius: jax.Array) -> jax.Array:
  """Distance from spheres at `points` [..., 3] of `radius` to the surface's plane under their
  centres, m ([...]; negative when they penetrate it)."""
  height, normal = surface(field, grid, points[..., :2])
  return (points[..., 2] - height) * normal[..., 2] - radius


def wrap(grid: Grid, xy: jax.Array) -> jax.Array:
  """float32 [2]: the whole tiles to move a trunk at `xy` back by, to bring it onto the tile."""
  return grid.tile_size * jnp.round(xy / grid.tile_size)


# THE CURRICULUM


def command_reach(command_times: jax.Array, commands: jax.Array, num_steps: int,
                  dt: float) -> jax.Array:
  """float32 []: how far from its start a trunk that follows a command schedule exactly for
  `num_steps` control steps of `dt` ends, m (a straight line): each step's (vx, vy) in the
  heading the yaw-rate commands have turned it to by the step's start.

  Args:
    command_times: float32 [K], when each command starts, s (the first at 0).
    commands: float32 [K, 3], (vx, vy, yaw rate) of each.
  """
  # Command k is current on the steps whose time is at or after its start and before the next
  # one's (as the env applies them); it turns the heading by `turn` a step. Its steps' sum of
  # e^(i heading) is a geometric series: n terms from the heading at its first step.
  t = jnp.arange(num_steps) * dt  # [T]
  started = jnp.sum(command_times[:, None] <= t[None, :], axis=1)  # [K]
  n = (started - jnp.append(started[1:], 0)).astype(jnp.float32)  # [K] steps of each command
  turn = commands[:, 2] * dt  # [K]
  first = jnp.cumsum(turn * n) - turn * n  # [K] the heading at each command's first step
  half = turn / 2
  still = half == 0
  series = jnp.where(still, n, jnp.sin(n * half) / jnp.where(still, 1.0, jnp.sin(half)))  # [K]
  middle = first + turn * (n - 1) / 2
  cos, sin = jnp.cos(middle), jnp.sin(middle)
  vx, vy = commands[:, 0], commands[:, 1]
  x, y = jnp.sum(series * (cos * vx - sin * vy)), jnp.sum(series * (sin * vx + cos * vy))
  return jnp.hypot(x, y) * dt


def next_level(cfg: config_lib.TerrainConfig, level: jax.Array, terminated: jax.Array,
               timed_out: jax.Array, commanded: jax.Array, progress: jax.Array,
               distance: jax.Array, reach: jax.Array | None = None) -> jax.Array:
  """int32 []: the level an env moves to after an episode (the rules in the module docstring).

  Args:
    cfg: the terrain config (fractions, minimum distance, number of levels).
    level: int32 [], the episode's level.
    terminated: bool [], the episode ended by a failure.
    timed_out: bool [], it reached the time limit.
    commanded: float32 [], the distance it was commanded to walk, m.
    progress: float32 [], the distance it walked along the command, m.
    distance: float32 [], how far from its start it ended, m (a straight line).
    reach: float32 [], how far its command would have taken it (`command_reach`), m; needed
      under `promote_within_reach` only.
  """
  judged = commanded >= cfg.min_commanded_distance
  by_fraction = judged & (progress >= cfg.promote_fraction * commanded)
  if cfg.promote_distance > 0:
    far_enough = distance >= cfg.promote_distance
    if cfg.promote_within_reach:
      far_enough |= (reach < cfg.promote_distance) & by_fraction
  else:
    far_enough = by_fraction
  up = timed_out & far_enough
  down = terminated | (judged & (progress < cfg.demote_fraction * commanded))
  moved = level + up.astype(jnp.int32) - (down & ~up).astype(jnp.int32)
  return jnp.clip(moved, 0, cfg.num_levels - 1).astype(jnp.int32)


def track(state: TerrainState, command: jax.Array, lin_vel: jax.Array,
          dt: float) -> TerrainState:
  """Adds one control step to the episode's commanded and walked distance.

  Args:
    state: the env's terrain state.
    command: float32 [3], the step's command (trunk frame).
    lin_vel: float32 [3], the trunk's linear velocity at the step's end (trunk frame).
    dt: the control period, s.
  """
  speed = jnp.linalg.norm(command[:2])
  direction = command[:2] / jnp.maximum(speed, 1e-6)
  along = jnp.where(speed > 1e-6, jnp.dot(lin_vel[:2], direction), 0.0)
  return state.replace(commanded=state.commanded + speed * dt,
                       progress=state.progress + along * dt)


def level_counts(cfg: config_lib.TerrainConfig, kinds: jax.Array, levels: jax.Array) -> jax.Array:
  """float32 [len(TYPES), num_levels]: how many envs stand on each type at each level."""
  onehot_kind = jax.nn.one_hot(kinds, len(TYPES))  # [N, types]
  onehot_level = jax.nn.one_hot(levels, cfg.num_levels)  # [N, levels]
  return onehot_kind.T @ onehot_level


def curriculum_metrics(cfg: config_lib.TerrainConfig,
                       step_metrics: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """The curriculum at the end of an update, from its env metrics ([T, N] each): envs per terrain
  type and level (`terrain/levels`, float32 [types, levels]), the mean level, and the episodes
  of the update that moved their env up or down."""
  kinds = step_metrics["terrain/type"][-1].astype(jnp.int32)  # [N]
  levels = step_metrics["terrain/level"][-1].astype(jnp.int32)  # [N]
  return {
      "terrain/levels": level_counts(cfg, kinds, levels),
      "terrain/mean_level": jnp.mean(levels.astype(jnp.float32)),
      "terrain/promotions": jnp.sum(step_metrics["terrain/promoted"]),
      "terrain/demotions": jnp.sum(step_metrics["terrain/demoted"]),
  }
