"""Seed families and the run manifest: per-family draws, held-out strata, hashing, leakage check.

A seed family is a group of envs that share one seed. The seed fixes the family's spawn pose, its
command schedule and one domain-randomization draw (ground friction, trunk payload and its
centre of mass, joint friction, motor strength, actuator delay, a push schedule, and, for the
`slope` stratum, the direction of gravity). Envs of one family differ only by small per-env reset
noise and the policy's own sampling; env i belongs to family `i % num_families`, so any
contiguous shard of envs spans many families.

The `Manifest` is the frozen, hashable record of every family of a run: the training families
(seeds derived from the run seed) and the held-out evaluation families (seeds derived from the
panel seed, grouped in strata), every draw, and the ranges they came from. It is plain data, drawn
with NumPy on the host, written to `manifest.json`, and turned into `FamilyParams` arrays for the
env with `Manifest.train_params` / `Manifest.eval_params`.

Training seeds are drawn from [0, 2**31) and evaluation seeds from [2**31, 2**32), so the two are
disjoint by construction; explicit seeds in the config or a loaded manifest that share a seed are
refused with `LeakageError`, naming the shared seeds.

`apply_to_model` writes one family's draw into the nominal `mjx.Model` with `.replace`, inside the
env's step, so `jax.vmap` batches it. Adding a payload changes `body_mass` and `body_ipos` of the
trunk only. MuJoCo derives several constants from the masses when it compiles a model, and these
are NOT recomputed:
  * `body_inertia` / `body_iquat` of the trunk: the payload is treated as a point mass and its own
    rotational inertia about the new centre of mass (parallel axis) is ignored;
  * `body_subtreemass` (MJX recomputes subtree masses where its dynamics need them);
  * `body_invweight0`, `dof_invweight0`, `actuator_acc0` and `stat.meaninertia`, which scale the
    constraint solver's regularization; they keep the nominal robot's values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any
from typing import Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import robots
from mjx_walk.sim import terrain as terrain_lib
from mjx_walk.sim._mjx import mjx

TRAIN_SEED_SPACE = (0, 2**31)
EVAL_SEED_SPACE = (2**31, 2**32)
STANDARD_GRAVITY = 9.81

TERRAIN_FIELDS = ("terrain_type", "terrain_seed", "terrain_magnitude")
"""The `Family` fields of a family on a heightfield."""


class LeakageError(ValueError):
  """Training and evaluation families share a seed."""


@dataclasses.dataclass(frozen=True)
class Family:
  """One family's seed and everything drawn from it. Plain floats: JSON round-trips it exactly."""

  seed: int
  stratum: str | None
  """Evaluation stratum; None for a training family."""
  spawn_yaw: float
  """Heading at spawn, rad."""
  spawn_offset: tuple[float, float]
  """Spawn x, y offset, m."""
  command_times: tuple[float, ...]
  """Episode time at which each command of the schedule starts, s; the first is 0."""
  commands: tuple[tuple[float, float, float], ...]
  """(vx m/s, vy m/s, yaw rate rad/s) per entry of the schedule."""
  friction: float
  payload_mass: float
  """kg added to the trunk."""
  payload_com: tuple[float, float, float]
  """Where the payload sits, trunk frame, m."""
  joint_friction: float
  """N·m·s/rad added to every actuated joint's damping."""
  motor_strength: float
  """Scale of the actuators' position gain kp."""
  action_delay: int
  """Control steps between the policy's action and the actuators."""
  push_times: tuple[float, ...]
  """Episode time each push starts, s."""
  push_directions: tuple[float, ...]
  """Horizontal direction of each push in the world frame, rad."""
  push_magnitudes: tuple[float, ...]
  """N; 0 means no push."""
  push_seconds: float
  slope_degrees: float
  """Tilt of gravity from the floor normal, degrees (0 on level ground)."""
  slope_direction: float
  """World-frame direction of downhill, rad."""
  terrain_type: str | None = None
  """On a heightfield: the family's terrain type (`config.TERRAIN_TYPES`); None on the plane."""
  terrain_seed: int | None = None
  """On a heightfield: the seed of the terrain's shape."""
  terrain_magnitude: tuple[float, float] | None = None
  """On a heightfield: the type's magnitude at difficulty 0 and at difficulty 1 (m, degrees for
  `slope`); the same at both ends for a held-out family."""

  def to_dict(self) -> dict[str, Any]:
    """Plain values; a family on the plane has no terrain keys (as before terrain existed)."""
    values = dataclasses.asdict(self)
    if self.terrain_type is None:
      for name in TERRAIN_FIELDS:
        del values[name]
    return values

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> Family:
    fields = {f.name for f in dataclasses.fields(cls)}
    plane = fields - set(TERRAIN_FIELDS)
    if set(values) != fields and set(values) != plane:
      raise ValueError(
          f"a manifest family has keys {sorted(values)}; expected exactly {sorted(fields)}, or "
          f"{sorted(plane)} on the plane")

    def tuplify(x):
      return tuple(tuplify(v) for v in x) if isinstance(x, list) else x

    return cls(**{k: tuplify(v) for k, v in values.items()})


@flax.struct.dataclass
class FamilyParams:
  """One family's draw as arrays, for the env. Batched along a leading axis by `jax.vmap`."""

  index: jax.Array
  """int32 []: the family's index within its panel."""
  spawn_yaw: jax.Array
  """float32 []."""
  spawn_offset: jax.Array
  """float32 [2]."""
  command_times: jax.Array
  """float32 [K]."""
  commands: jax.Array
  """float32 [K, 3]."""
  friction: jax.Array
  payload_mass: jax.Array
  payload_com: jax.Array
  """float32 [3]."""
  joint_friction: jax.Array
  motor_strength: jax.Array
  action_delay: jax.Array
  """int32 []."""
  push_times: jax.Array
  """float32 [P]."""
  push_forces: jax.Array
  """float32 [P, 3]: world-frame force of each push, N."""
  push_seconds: jax.Array
  gravity: jax.Array
  """float32 [3]: world-frame gravity, m/s^2."""
  terrain: terrain_lib.TerrainDraw | None = None
  """The family's ground on a heightfield; None on the plane."""


# DRAWS


def _uniform(rng: np.random.Generator, bounds: Sequence[float]) -> float:
  return float(rng.uniform(bounds[0], bounds[1]))


def _command_schedule(rng: np.random.Generator, ranges: config_lib.CommandRanges,
                      episode_seconds: float
                      ) -> tuple[tuple[float, ...], tuple[tuple[float, float, float], ...]]:
  """Start times and commands covering one episode; the number of entries is fixed by the
  shortest resample interval, so every family of a panel has the same shape."""
  slots = math.ceil(episode_seconds / ranges.command_resample_seconds[0])
  times, commands, t = [], [], 0.0
  for _ in range(slots):
    times.append(t)
    commands.append((_uniform(rng, ranges.command_vx), _uniform(rng, ranges.command_vy),
                     _uniform(rng, ranges.command_yaw_rate)))
    t += _uniform(rng, ranges.command_resample_seconds)
  return tuple(times), tuple(commands)


def _pushes(rng: np.random.Generator, count: int, magnitude: Sequence[float],
            episode_seconds: float) -> dict[str, tuple[float, ...]]:
  times = rng.uniform(0.1 * episode_seconds, 0.9 * episode_seconds, count)
  return dict(
      push_times=tuple(sorted(float(t) for t in times)),
      push_directions=tuple(float(a) for a in rng.uniform(-math.pi, math.pi, count)),
      push_magnitudes=tuple(float(m) for m in rng.uniform(magnitude[0], magnitude[1], count)),
  )


def _spawn(rng: np.random.Generator, fam_cfg: config_lib.FamilyConfig) -> dict[str, Any]:
  return dict(
      spawn_yaw=_uniform(rng, fam_cfg.spawn_yaw),
      spawn_offset=tuple(float(x) for x in rng.uniform(
          -fam_cfg.spawn_offset, fam_cfg.spawn_offset, 2)),
  )


def draw_train_family(seed: int, config: config_lib.TrainConfig) -> Family:
  """Everything a training family's seed fixes, from the `config.families` ranges."""
  fam_cfg = config.families
  rng = np.random.default_rng(seed)
  spawn = _spawn(rng, fam_cfg)
  command_times, commands = _command_schedule(rng, fam_cfg, config.env.episode_seconds)
  # The draws below keep their order; each new kind of draw goes last, so that adding one
  # leaves every earlier draw of a seed as it was.
  friction = _uniform(rng, fam_cfg.friction)
  payload_mass = _uniform(rng, fam_cfg.payload_mass)
  payload_com = tuple(float(x) for x in rng.uniform(
      -fam_cfg.payload_com_offset, fam_cfg.payload_com_offset, 3))
  joint_friction = _uniform(rng, fam_cfg.joint_friction)
  motor_strength = _uniform(rng, fam_cfg.motor_strength)
  action_delay = int(rng.integers(fam_cfg.action_delay_steps[0],
                                  fam_cfg.action_delay_steps[1] + 1))
  pushes = _pushes(rng, fam_cfg.pushes_per_episode, fam_cfg.push_force, config.env.episode_seconds)
  slope_degrees = _uniform(rng, fam_cfg.slope_degrees)
  slope_direction = float(rng.uniform(-math.pi, math.pi)) if slope_degrees else 0.0
  ground = {}
  if config.terrain.heightfield:
    terrain = config.terrain
    weights = np.asarray(terrain.type_weights, float)
    kind = terrain.types[int(rng.choice(len(terrain.types), p=weights / weights.sum()))]
    ground = dict(terrain_type=kind, terrain_seed=int(rng.integers(0, 2**31)),
                  terrain_magnitude=_terrain_range(terrain, kind))
  return Family(
      seed=int(seed),
      stratum=None,
      command_times=command_times,
      commands=commands,
      friction=friction,
      payload_mass=payload_mass,
      payload_com=payload_com,
      joint_friction=joint_friction,
      motor_strength=motor_strength, action_delay=action_delay,
      push_seconds=float(fam_cfg.push_seconds),
      slope_degrees=slope_degrees,
      slope_direction=slope_direction,
      **pushes,
      **spawn,
      **ground,
  )


def _terrain_range(terrain: config_lib.TerrainConfig, kind: str) -> tuple[float, float]:
  """The training range of a terrain type's magnitude (m, degrees for slopes)."""
  ranges = {"flat": (0.0, 0.0), "rough": terrain.rough_height, "slope": terrain.slope_degrees,
            "stairs_up": terrain.stair_height, "stairs_down": terrain.stair_height,
            "obstacles": terrain.obstacle_height}
  return tuple(float(x) for x in ranges[kind])


def _held_out_ground(rng: np.random.Generator, terrain: config_lib.TerrainConfig,
                     stratum: str, position: int) -> dict[str, Any]:
  """A held-out family's ground on a heightfield: its stratum's terrain at one magnitude, or
  flat ground for the strata that do not test terrain. The `stairs` families alternate up and
  down with their `position` in the stratum, so the stratum holds both equally; a stratum of
  `config.STAIR_STRATA` holds one direction at one riser height. Draws the same
  numbers for every stratum."""
  seed = int(rng.integers(0, 2**31))
  upward = position % 2 == 0
  kind, size = {
      "rough": ("rough", terrain.panel_rough_height),
      "stairs": ("stairs_up" if upward else "stairs_down", terrain.panel_stair_height),
      "obstacles": ("obstacles", terrain.panel_obstacle_height),
      **config_lib.STAIR_STRATA,
  }.get(stratum, ("flat", 0.0))
  return dict(terrain_type=kind, terrain_seed=seed, terrain_magnitude=(float(size), float(size)))


def draw_eval_family(seed: int, panel: config_lib.PanelConfig, stratum: str,
                     terrain: config_lib.TerrainConfig | None = None,
                     position: int = 0) -> Family:
  """Everything a held-out family's seed fixes: nominal conditions plus its stratum's one.

  A function of the seed, `panel` and, on a heightfield, `terrain`'s panel magnitudes and
  platform alone (the spawn offset is scaled so that the feet start on the platform), so
  training ranges never move the panel. Every family draws the same numbers in the same order
  whatever its stratum. `position` is the family's place in its stratum (`stairs` alternate up
  and down with it).
  """
  if stratum not in config_lib.ALL_STRATA:
    raise ValueError(f"stratum {stratum!r} is unknown; known strata are {config_lib.ALL_STRATA}")
  rng = np.random.default_rng(seed)
  spawn = _spawn(rng, config_lib.FamilyConfig())
  if terrain and terrain.heightfield:
    # Episodes start on the tile's flat platform: the offset is scaled to keep the feet on it.
    reach = terrain.platform_size / 2 - terrain_lib.FOOT_REACH
    scale = min(1.0, reach / config_lib.FamilyConfig().spawn_offset)
    spawn["spawn_offset"] = tuple(scale * x for x in spawn["spawn_offset"])
  command_times, commands = _command_schedule(rng, panel, panel.episode_seconds)
  held_out = dict(
      slope_direction=float(rng.uniform(-math.pi, math.pi)),
      payload_mass=_uniform(rng, panel.payload_mass),
      friction=_uniform(rng, panel.friction),
      pushes=_pushes(rng, panel.pushes_per_episode, (panel.push_force, panel.push_force),
                     panel.episode_seconds),
  )
  no_pushes = dict(push_times=(0.0,) * panel.pushes_per_episode,
                   push_directions=(0.0,) * panel.pushes_per_episode,
                   push_magnitudes=(0.0,) * panel.pushes_per_episode)
  return Family(
      seed=int(seed),
      stratum=stratum,
      command_times=command_times,
      commands=commands,
      friction=held_out["friction"] if stratum == "friction" else float(panel.nominal_friction),
      payload_mass=held_out["payload_mass"] if stratum == "payload" else 0.0,
      payload_com=(0.0, 0.0, 0.0),
      joint_friction=float(panel.nominal_joint_friction),
      motor_strength=1.0,
      action_delay=0,
      push_seconds=float(panel.push_seconds),
      slope_degrees=float(panel.slope_degrees) if stratum == "slope" else 0.0,
      slope_direction=held_out["slope_direction"] if stratum == "slope" else 0.0,
      **(held_out["pushes"] if stratum == "push" else no_pushes),
      **spawn,
      **(_held_out_ground(rng, terrain, stratum, position)
         if terrain and terrain.heightfield else {}),
  )


def draw_family(seed: int, config: config_lib.TrainConfig, stratum: str | None,
                position: int = 0) -> Family:
  """A training family (stratum None) or a held-out family of `stratum` at `position` in it."""
  if stratum is None:
    return draw_train_family(seed, config)
  return draw_eval_family(seed, config.panel, stratum, config.terrain, position)


def _distinct_seeds(seed: int | Sequence[int], space: tuple[int, int], count: int) -> list[int]:
  rng = np.random.default_rng(seed)
  seeds: list[int] = []
  while len(seeds) < count:
    for s in rng.integers(space[0], space[1], count, dtype=np.int64):
      if int(s) not in seeds and len(seeds) < count:
        seeds.append(int(s))
  return seeds


def train_seeds(config: config_lib.TrainConfig) -> list[int]:
  """The training family seeds: explicit ones from the config, else derived from the run seed;
  with `families_per_seed`, each training seed's in turn (seed k's derived from seed + k)."""
  if config.families.train_family_seeds:
    return [int(s) for s in config.families.train_family_seeds]
  sets = config.num_seeds if config.families_per_seed else 1
  # The trailing constant separates this stream from any other use of the run seed.
  return [s for k in range(sets) for s in _distinct_seeds(
      [config.seed + k, 0x7EA1], TRAIN_SEED_SPACE, config.families.num_train_families)]


def eval_seeds(config: config_lib.TrainConfig) -> list[int]:
  """The evaluation family seeds, from the panel seed, in stratum-major order."""
  return _distinct_seeds([config.panel.seed, 0xE7A1], EVAL_SEED_SPACE, config.panel.num_families)


def check_disjoint(train: Sequence[int], evaluation: Sequence[int], what: str = "seeds") -> None:
  """Refuses training and evaluation families sharing a (terrain) seed: `LeakageError`."""
  shared = sorted(set(train) & set(evaluation))
  if shared:
    raise LeakageError(f"training and evaluation families share {what} {shared}: " + (
        "a held-out family would be trained on. Use training seeds outside the evaluation panel "
        "(training seeds are drawn from [0, 2**31), evaluation seeds from [2**31, 2**32))."
        if what == "seeds" else "a held-out family would stand on ground that was trained on. "
        "Draw the panel from another panel.seed."))


# THE MANIFEST


def _ranges(config: config_lib.TrainConfig) -> dict[str, Any]:
  panel = dataclasses.asdict(config.panel)
  del panel["every_chunks"]  # when to evaluate does not change what the panel is
  ranges = {"train": dataclasses.asdict(config.families),
            "train_episode_seconds": config.env.episode_seconds, "eval": panel}
  if config.terrain.heightfield:
    ranges["terrain"] = dataclasses.asdict(config.terrain)
  if config.families_per_seed and config.num_seeds > 1:  # absent when seeds share one set
    ranges["seed_families"] = {"sets": config.num_seeds,
                               "families_per_set": config.families.num_train_families}
  return json.loads(json.dumps(ranges))  # tuples become lists, exactly as a reload sees them


def _digest(content: Any) -> str:
  text = json.dumps(content, sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Manifest:
  """Every family of a run. Build with `make_manifest`; load with `Manifest.from_json`."""

  train_families: tuple[Family, ...]
  eval_families: tuple[Family, ...]
  """In stratum-major order: families_per_stratum families of each stratum in turn."""
  ranges: dict[str, Any]
  """The config sections the draws came from: `train` (families), `eval` (panel), and with a
  set per training seed `seed_families` (how many; seed k's are [k F, (k + 1) F))."""

  def __post_init__(self):
    check_disjoint([f.seed for f in self.train_families], [f.seed for f in self.eval_families])
    check_disjoint(
        [f.terrain_seed for f in self.train_families if f.terrain_type not in (None, "flat")],
        [f.terrain_seed for f in self.eval_families if f.terrain_type not in (None, "flat")],
        what="terrain seeds")

  @property
  def hash(self) -> str:
    """sha256 of the whole content: training and evaluation families, and the ranges."""
    return _digest(self._content())

  @property
  def panel_hash(self) -> str:
    """The held-out panel's sha256 (families, ground less `PROMOTION_RULES`): runs match on it."""
    content = {"eval_families": [f.to_dict() for f in self.eval_families],
               "eval": self.ranges["eval"]}
    if "terrain" in self.ranges:
      content["terrain"] = {key: value for key, value in self.ranges["terrain"].items()
                            if key not in config_lib.PROMOTION_RULES}
    return _digest(content)

  @property
  def eval_strata(self) -> tuple[str, ...]:
    """Stratum of each evaluation family."""
    return tuple(f.stratum for f in self.eval_families)

  def _content(self) -> dict[str, Any]:
    return {
        "train_families": [f.to_dict() for f in self.train_families],
        "eval_families": [f.to_dict() for f in self.eval_families],
        "ranges": self.ranges,
    }

  def to_json(self) -> str:
    return json.dumps({"hash": self.hash, "panel_hash": self.panel_hash, **self._content()},
                      indent=1)

  @classmethod
  def from_json(cls, text: str) -> Manifest:
    """Parses `to_json` output and checks its hash and its train/eval disjointness.

    Raises:
      ValueError: the content does not match its recorded hash, or keys are missing.
      LeakageError: the manifest's training and evaluation families share a seed.
    """
    values = json.loads(text)
    missing = {"hash", "train_families", "eval_families", "ranges"} - set(values)
    if missing:
      raise ValueError(f"manifest is missing keys {sorted(missing)}")
    manifest = cls(
        train_families=tuple(Family.from_dict(f) for f in values["train_families"]),
        eval_families=tuple(Family.from_dict(f) for f in values["eval_families"]),
        ranges=values["ranges"],
    )
    if manifest.hash != values["hash"]:
      raise ValueError(
          f"manifest content hashes to {manifest.hash} but records {values['hash']}; "
          "it was edited or corrupted")
    return manifest

  @property
  def terrain(self) -> config_lib.TerrainConfig | None:
    """The terrain section the families' grounds were drawn under, or None on the plane."""
    if "terrain" not in self.ranges:
      return None
    values = self.ranges["terrain"]
    return config_lib.TerrainConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

  def train_params(self) -> FamilyParams:
    """The training families as arrays, leading axis [F] (with a set per seed, all S F)."""
    return stack_params(self.train_families, self.terrain)

  def eval_params(self) -> FamilyParams:
    """The evaluation families as arrays, leading axis [E]."""
    return stack_params(self.eval_families, self.terrain)


def make_manifest(config: config_lib.TrainConfig) -> Manifest:
  """The run's manifest, a pure function of the config (run seed, panel seed and ranges). The
  config is validated here, first: a run's one validation (`runner.run`, `trainer.make_trainer`).

  Raises:
    ValueError: a bad config value; `LeakageError`: training seeds that are evaluation seeds.
  """
  config_lib.validate(config)
  train, evaluation = train_seeds(config), eval_seeds(config)
  check_disjoint(train, evaluation)
  per = config.panel.families_per_stratum
  strata = [s for s in config.panel.strata for _ in range(per)]
  return Manifest(
      train_families=tuple(draw_family(s, config, None) for s in train),
      eval_families=tuple(draw_family(s, config, st, i % per)
                          for i, (s, st) in enumerate(zip(evaluation, strata))),
      ranges=_ranges(config),
  )


# ARRAYS FOR THE ENV


def _gravity(family: Family) -> np.ndarray:
  tilt, direction = math.radians(family.slope_degrees), family.slope_direction
  return STANDARD_GRAVITY * np.array(
      [math.sin(tilt) * math.cos(direction), math.sin(tilt) * math.sin(direction), -math.cos(tilt)])


def stack_params(families: Sequence[Family],
                 terrain: config_lib.TerrainConfig | None = None) -> FamilyParams:
  """Stacks families into `FamilyParams` with a leading [len(families)] axis.

  Families on a heightfield need the `terrain` config they were drawn under: their grounds'
  shapes (`terrain.shapes`) are made here, once.
  """

  def arr(name, dtype=np.float32):
    return jnp.asarray(np.array([getattr(f, name) for f in families], dtype=dtype))

  forces = np.array([
      [[m * math.cos(a), m * math.sin(a), 0.0]
       for a, m in zip(f.push_directions, f.push_magnitudes)] for f in families],
      dtype=np.float32).reshape(len(families), -1, 3)
  return FamilyParams(
      index=jnp.arange(len(families), dtype=jnp.int32),
      spawn_yaw=arr("spawn_yaw"),
      spawn_offset=arr("spawn_offset"),
      command_times=arr("command_times"),
      commands=arr("commands"),
      friction=arr("friction"),
      payload_mass=arr("payload_mass"),
      payload_com=arr("payload_com"),
      joint_friction=arr("joint_friction"),
      motor_strength=arr("motor_strength"),
      action_delay=arr("action_delay", np.int32),
      push_times=arr("push_times").reshape(len(families), -1),
      push_forces=jnp.asarray(forces),
      push_seconds=arr("push_seconds"),
      gravity=jnp.asarray(np.stack([_gravity(f) for f in families]).astype(np.float32)),
      terrain=_terrain_draws(families, terrain),
  )


def _terrain_draws(families: Sequence[Family], terrain: config_lib.TerrainConfig | None
                   ) -> terrain_lib.TerrainDraw | None:
  """The families' grounds as arrays, or None when every family stands on the plane."""
  on_terrain = [f.terrain_type is not None for f in families]
  if not any(on_terrain):
    return None
  if not all(on_terrain):
    raise ValueError("families on a heightfield and on the plane cannot be stacked together")
  if terrain is None or not terrain.heightfield:
    raise ValueError("families on a heightfield need the terrain config they were drawn under")
  kinds = np.array([config_lib.TERRAIN_TYPES.index(f.terrain_type) for f in families], np.int32)
  seeds = np.array([f.terrain_seed for f in families], np.uint32)
  return terrain_lib.TerrainDraw(
      type=jnp.asarray(kinds), seed=jnp.asarray(seeds),
      magnitude=jnp.asarray([f.terrain_magnitude for f in families], jnp.float32),
      shape=terrain_lib.shapes(terrain, kinds, seeds))


def for_envs(params: FamilyParams, num_envs: int) -> FamilyParams:
  """Each env's family draw: env i gets family i % F. Leading axis [num_envs]."""
  num_families = params.index.shape[0]
  return jax.tree.map(lambda x: x[np.arange(num_envs) % num_families], params)


MODEL_FIELDS = ("geom_friction", "body_mass", "body_ipos", "dof_damping", "actuator_gainprm",
                "actuator_biasprm")
"""The model fields `apply_to_model` writes, besides `opt.gravity`; another simulator copies these
to apply a family's draw (`mjx_walk.deploy.sim2sim`)."""


def apply_to_model(model: mjx.Model, robot: robots.Robot, params: FamilyParams) -> mjx.Model:
  """Writes ONE family's draw into the nominal model. Pure; vmapped when `params` is batched.

  Fields changed (and nothing else):
    geom_friction[floor and feet, 0]   ground friction (a contact takes the larger geom friction)
    body_mass[trunk], body_ipos[trunk] payload as a point mass at `payload_com`
    dof_damping[actuated dofs]         nominal kd + joint friction
    actuator_gainprm[:, 0], actuator_biasprm[:, 1:3]  kp (and any actuator kv) times motor strength
    opt.gravity                        tilted for a slope
  """
  trunk = robot.trunk_body_id
  ground = np.concatenate([[robot.floor_geom_id], robot.foot_geom_ids])
  mass = model.body_mass[trunk]
  new_mass = mass + params.payload_mass
  com = (mass * model.body_ipos[trunk] + params.payload_mass * params.payload_com) / new_mass
  dofs = np.asarray(robot.qvel_joint_adr)
  return model.replace(
      geom_friction=model.geom_friction.at[ground, 0].set(params.friction),
      body_mass=model.body_mass.at[trunk].set(new_mass),
      body_ipos=model.body_ipos.at[trunk].set(com),
      dof_damping=model.dof_damping.at[dofs].add(params.joint_friction),
      actuator_gainprm=model.actuator_gainprm.at[:, 0].multiply(params.motor_strength),
      actuator_biasprm=model.actuator_biasprm.at[:, 1:3].multiply(params.motor_strength),
      opt=model.opt.replace(gravity=params.gravity),
  )
