"""The whole run's config (`TrainConfig`, the top level of `--config`): its sections, its
top-level fields, the rules that tie one section to another, dotted field paths, and loading.

`validate` is the one entry: it refuses non-finite floats anywhere, then each section's own rules
(in that section's module), then the cross-section rules below, each raising a `ValueError`
that names the bad value and what would be accepted, before anything compiles. Derived
quantities (batch size, chunks) are read-only properties, never written back.

The dataclasses are plain (not frozen) because `ml_collections.config_flags` applies
`--config.a.b=value` overrides with `setattr`; nothing in the package mutates a config after
`validate` has passed.
"""

import dataclasses
import json
import math
from typing import Any

from mjx_walk.config import audit as audit_lib
from mjx_walk.config import checkpoint as checkpoint_lib
from mjx_walk.config import env as env_lib
from mjx_walk.config import families as families_lib
from mjx_walk.config import network as network_lib
from mjx_walk.config import panel as panel_lib
from mjx_walk.config import ppo as ppo_lib
from mjx_walk.config import report as report_lib
from mjx_walk.config import reward as reward_lib
from mjx_walk.config import scan as scan_lib
from mjx_walk.config import terrain as terrain_lib
from mjx_walk.config._checks import check_finite, check_positive_int, fail


@dataclasses.dataclass
class TrainConfig:
  """A whole run. The top level of `--config`."""

  num_envs: int = 512
  """Parallel environments."""
  unroll_length: int = 24
  """Control steps each env collects per update (the horizon T)."""
  updates_per_chunk: int = 4
  """PPO updates fused into one jitted chunk; the host logs once per chunk."""
  total_env_steps: int = 12_000_000
  """Run length; rounded up to whole chunks (experiments/README.md has the wall-clock time of the
  default and when it first walks on the held-out panel)."""
  seed: int = 0
  """Run seed: network init, env noise, and the training families' seeds."""
  num_seeds: int = 1
  """Training seeds S trained side by side in one compiled program (`mjx_walk.learn.trainer`):
  seed k has its own network initialisation, optimiser, normaliser, PPO and rollout keys (from
  `seed + k`) and adaptive learning rate, and its own num_envs envs; all of them share the
  training families and the held-out panel. 1 is the single-seed run."""
  families_per_seed: bool = False
  """With num_seeds > 1: each seed trains on families of its own, seed k's drawn from seed + k as
  a single-seed run of that seed would draw them (the manifest holds every seed's, seed k's at
  [k F, (k + 1) F) with F = families.num_train_families, and says so). False: every seed trains
  on the same families. The held-out panel is every seed's either way."""
  env: env_lib.EnvConfig = dataclasses.field(default_factory=env_lib.EnvConfig)
  families: families_lib.FamilyConfig = dataclasses.field(default_factory=families_lib.FamilyConfig)
  panel: panel_lib.PanelConfig = dataclasses.field(default_factory=panel_lib.PanelConfig)
  terrain: terrain_lib.TerrainConfig = dataclasses.field(default_factory=terrain_lib.TerrainConfig)
  scan: scan_lib.ScanConfig = dataclasses.field(default_factory=scan_lib.ScanConfig)
  checkpoint: checkpoint_lib.CheckpointConfig = dataclasses.field(
      default_factory=checkpoint_lib.CheckpointConfig)
  audit: audit_lib.AuditConfig = dataclasses.field(default_factory=audit_lib.AuditConfig)
  report: report_lib.ReportConfig = dataclasses.field(default_factory=report_lib.ReportConfig)
  reward: reward_lib.RewardConfig = dataclasses.field(default_factory=reward_lib.RewardConfig)
  network: network_lib.NetworkConfig = dataclasses.field(default_factory=network_lib.NetworkConfig)
  ppo: ppo_lib.PPOConfig = dataclasses.field(default_factory=ppo_lib.PPOConfig)

  @property
  def batch_size(self) -> int:
    """Samples per update: num_envs * unroll_length."""
    return self.num_envs * self.unroll_length

  @property
  def minibatch_size(self) -> int:
    return self.batch_size // self.ppo.num_minibatches

  @property
  def env_steps_per_chunk(self) -> int:
    return self.batch_size * self.updates_per_chunk

  @property
  def num_chunks(self) -> int:
    return max(1, math.ceil(self.total_env_steps / self.env_steps_per_chunk))

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)


MAX_SEEDS = 64
"""The most training seeds one run trains side by side."""


RESUMABLE_FIELDS = (
    "total_env_steps",
    "panel.every_chunks",
    "report.video_every_chunks",
    "checkpoint.every_chunks",
    "checkpoint.max_to_keep",
    "checkpoint.keep_best",
)
"""Fields a resumed run may change: how long it runs and how often it evaluates and saves. Every
other field changes what is computed, so a resume that changes it is refused."""


def get_field(config: TrainConfig, path: str) -> Any:
  """The value of a dotted field path, e.g. `get_field(cfg, "ppo.learning_rate")`.

  Raises:
    AttributeError: naming the whole path, when a part of it is not a field.
  """
  section, name = _parent(config, path)
  return getattr(section, name)


def set_field(config: TrainConfig, path: str, value: Any) -> None:
  """Sets a dotted field path in place (before `validate`; nothing mutates a validated config).

  Raises:
    AttributeError: naming the whole path, when a part of it is not a field.
  """
  section, name = _parent(config, path)
  setattr(section, name, value)


def _parent(config: TrainConfig, path: str) -> tuple[Any, str]:
  """(the section holding the last part of `path`, that part's name)."""
  *parents, name = path.split(".")
  section = config
  for part in parents:
    if not dataclasses.is_dataclass(section) or part not in _field_names(section):
      raise AttributeError(f"config.{path} is not a config field")
    section = getattr(section, part)
  if not dataclasses.is_dataclass(section) or name not in _field_names(section):
    raise AttributeError(f"config.{path} is not a config field")
  return section, name


def flat_fields(config: TrainConfig) -> dict[str, Any]:
  """{dotted field path: value} of every leaf field, lists as tuples."""
  def flatten(section: Any, prefix: str) -> dict[str, Any]:
    flat = {}
    for field in dataclasses.fields(section):
      value = getattr(section, field.name)
      if dataclasses.is_dataclass(value):
        flat.update(flatten(value, f"{prefix}{field.name}."))
      else:
        flat[f"{prefix}{field.name}"] = tuple(value) if isinstance(value, list) else value
    return flat
  return flatten(config, "")


def _field_names(section: Any) -> set[str]:
  return {field.name for field in dataclasses.fields(section)}


def computation_changes(old: TrainConfig, new: TrainConfig) -> list[tuple[str, Any, Any]]:
  """Fields whose change would make a resumed run compute something else.

  Returns:
    (dotted field, old value, new value) for every differing field not in `RESUMABLE_FIELDS`.
  """
  before, after = flat_fields(old), flat_fields(new)
  return [(key, before.get(key), after.get(key)) for key in sorted(set(before) | set(after))
          if before.get(key) != after.get(key) and key not in RESUMABLE_FIELDS]


def validate(config: TrainConfig) -> TrainConfig:
  """Checks every field that could fail later, and returns the config unchanged.

  Args:
    config: the run configuration.

  Returns:
    `config`, so that `cfg = validate(get_config())` reads naturally.

  Raises:
    ValueError: naming the first bad field, its value, and what would be accepted.
  """
  check_finite(config)
  _validate_top_level(config)
  env_lib.validate(config.env)
  families_lib.validate(config.families)
  panel_lib.validate(config.panel)
  terrain_lib.validate(config.terrain)
  scan_lib.validate(config.scan)
  checkpoint_lib.validate(config.checkpoint)
  audit_lib.validate(config.audit)
  report_lib.validate(config.report)
  reward_lib.validate(config.reward)
  network_lib.validate(config.network)
  ppo_lib.validate(config.ppo)
  _validate_across_sections(config)
  return config


def _validate_top_level(config: TrainConfig) -> None:
  if not isinstance(config.seed, int) or config.seed < 0:
    fail("seed", config.seed, "it must be a non-negative integer")
  for name in ("num_envs", "unroll_length", "updates_per_chunk", "total_env_steps"):
    check_positive_int(name, getattr(config, name))
  if isinstance(config.num_seeds, bool) or not isinstance(config.num_seeds, int) or not (
      1 <= config.num_seeds <= MAX_SEEDS):
    fail("num_seeds", config.num_seeds,
         f"it must be an integer from 1 (one training seed) to {MAX_SEEDS}")
  if not isinstance(config.families_per_seed, bool):
    fail("families_per_seed", config.families_per_seed, "it must be True or False")
  if config.families_per_seed and config.families.train_family_seeds:
    fail("families_per_seed", True,
         "each seed draws its families from seed + k; leave families.train_family_seeds empty, "
         "or train every seed on those families with families_per_seed=False")


def _validate_across_sections(config: TrainConfig) -> None:
  """The rules that read more than one section, each section already valid on its own."""
  fam, panel, terrain = config.families, config.panel, config.terrain
  # The batch splits into minibatches and into families.
  if config.num_envs % config.ppo.num_minibatches:
    fail("num_envs", config.num_envs,
         f"it must be divisible by ppo.num_minibatches={config.ppo.num_minibatches}")
  count = fam.num_train_families
  if config.num_envs % count:
    fail("num_envs", config.num_envs,
         f"it must be divisible by families.num_train_families={count} (env i belongs to "
         f"family i % {count})")
  # The gait reward follows the env's clock; videos sample whole control steps.
  if config.reward.gait_phase and not config.env.gait_hz:
    fail("reward.gait_phase", config.reward.gait_phase,
         "it needs the gait clock: set env.gait_hz > 0, or give this term a scale of 0")
  ratio = config.env.control_hz / config.report.video_fps
  if abs(ratio - round(ratio)) > 1e-9:
    fail("report.video_fps", config.report.video_fps,
         f"env.control_hz={config.env.control_hz} must be a whole multiple of it")
  # Terrain strata need terrain; a held-out stratum inside the training range would not be
  # held out.
  on_terrain = [s for s in panel.strata if s in panel_lib.TERRAIN_STRATA]
  if on_terrain and not terrain.heightfield:
    fail("panel.strata", panel.strata,
         f"the strata {on_terrain} stand on heightfield terrain: set "
         f"terrain.ground='heightfield' or leave them out")
  if "payload" in panel.strata and panel.payload_mass[0] <= fam.payload_mass[1]:
    fail("panel.payload_mass", panel.payload_mass,
         f"the payload stratum must lie above the training range families.payload_mass="
         f"{fam.payload_mass}")
  if "slope" in panel.strata and panel.slope_degrees <= fam.slope_degrees[1]:
    fail("panel.slope_degrees", panel.slope_degrees,
         f"the slope stratum must be steeper than the training range families.slope_degrees="
         f"{fam.slope_degrees}")
  if "friction" in panel.strata and (
      panel.friction[1] >= fam.friction[0] or panel.friction[0] <= 0):
    fail("panel.friction", panel.friction,
         f"the friction stratum must be > 0 and below the training range families.friction="
         f"{fam.friction}")
  # On a heightfield every episode starts on the platform, and only the feet collide.
  if terrain.heightfield:
    reach = fam.spawn_offset + 0.35
    if reach > terrain.platform_size / 2:
      fail("terrain.platform_size", terrain.platform_size,
           f"the robot (its feet reach 0.35 m from the trunk) spawns up to "
           f"families.spawn_offset={fam.spawn_offset} m from the tile's centre, so the "
           f"flat platform must be at least {2 * reach:g} m wide, or the spawn offset smaller")
    if not config.env.terminate_on_body_contact:
      fail("env.terminate_on_body_contact", False,
           "on a heightfield the trunk and thighs do not collide with the ground, so their "
           "contact must end the episode")
    # The scan reads the modelled ground, from a trunk on the tile: every point must stay on
    # the margin.
    scan = config.scan
    if scan.enabled and scan.reach > terrain.margin:
      fail("scan.length", scan.length,
           f"with scan.width={scan.width} the scan reaches {scan.reach:.3f} m from the trunk, "
           f"but the heightfield models only terrain.margin={terrain.margin} m beyond the "
           f"tile: give a smaller grid or terrain.margin >= {scan.reach:.2f}")


def substeps(config: TrainConfig, timestep: float) -> int:
  """Physics steps per control step of `config`'s env (`env.substeps`), checked to be whole;
  `env.contact_timeconst` is checked against the same timestep.

  Raises:
    ValueError: when 1 / control_hz is not a whole multiple of the timestep, or the contact
      time constant is below two of its steps.
  """
  env_lib.check_contact_timeconst(config.env, timestep)
  return env_lib.substeps(config.env, timestep)


def from_dict(values: dict[str, Any]) -> TrainConfig:
  """Rebuilds a config from `to_dict` output (e.g. a run's config.json)."""
  sections = {
      "env": env_lib.EnvConfig,
      "families": families_lib.FamilyConfig,
      "panel": panel_lib.PanelConfig,
      "terrain": terrain_lib.TerrainConfig,
      "scan": scan_lib.ScanConfig,
      "checkpoint": checkpoint_lib.CheckpointConfig,
      "audit": audit_lib.AuditConfig,
      "report": report_lib.ReportConfig,
      "reward": reward_lib.RewardConfig,
      "network": network_lib.NetworkConfig,
      "ppo": ppo_lib.PPOConfig,
  }
  kwargs = {}
  for key, value in values.items():
    if key in sections:
      fields = {f.name: f for f in dataclasses.fields(sections[key])}
      section = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items() if k in fields}
      kwargs[key] = sections[key](**section)
    else:
      kwargs[key] = value
  return TrainConfig(**kwargs)


def default() -> TrainConfig:
  """The embedded default: Go2 on flat ground, sized for a 2-core CPU."""
  return TrainConfig()


def load_file(path: str) -> TrainConfig:
  """Loads a config file exposing `get_config() -> TrainConfig` (e.g.
  experiments/recipes/go2_flat.py).

  Raises:
    ValueError: when the file is missing, has no `get_config`, or returns something else.
  """
  import importlib.util  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top

  file = pathlib.Path(path)
  if not file.is_file():
    raise ValueError(f"config file {path!r} does not exist; pass a Python file with get_config().")
  spec = importlib.util.spec_from_file_location(f"_mjx_walk_config_{file.stem}", file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  get_config = getattr(module, "get_config", None)
  if get_config is None:
    raise ValueError(f"config file {path!r} defines no get_config(); it must return a TrainConfig.")
  config = get_config()
  if not isinstance(config, TrainConfig):
    raise ValueError(
        f"get_config() in {path!r} returned {type(config).__name__}; it must return a TrainConfig.")
  return config
