"""The typed run configuration: nested dataclasses, their validation, and derived quantities.

Everything a run computes is decided here. `validate` raises a `ValueError` naming the bad value
and what would be accepted, before anything is compiled, so a bad command line costs seconds, not
a compile. Derived quantities (batch size, substeps, updates per run) are read-only properties and
are never written back into the config.

The dataclasses are plain (not frozen) because `ml_collections.config_flags` applies
`--config.a.b=value` overrides with `setattr`; nothing in the package mutates a config after
`validate` has passed.
"""


import dataclasses
import json
import math
from typing import Any

ACTIVATIONS = ("elu", "relu", "tanh", "swish")
"""Accepted `network.activation` names: Flax's functions of the same names."""


def _range_field(low: float, high: float) -> Any:
  return dataclasses.field(default=(low, high))


@dataclasses.dataclass
class EnvConfig:
  """The locomotion task."""

  robot: str = "go2"
  """Robot name, a folder under robots/ registered in `mjx_walk.sim.robots` (checked when the
  robot is loaded, before anything is written or compiled)."""
  control_hz: float = 50.0
  """Policy rate in Hz. Must be a whole number of physics steps of the physics timestep."""
  physics_timestep: float = 0.005
  """Physics timestep, s; 0 keeps the robot's MJCF value (4 ms on Go2). 5 ms is legged_gym's
  value: 4 substeps per control step (experiments/README.md has its speed against 4 ms)."""
  episode_seconds: float = 20.0
  """Time limit; reaching it is a truncation (bootstrapped), not a termination."""
  action_clip: float = 5.0
  """Raw policy actions are clipped to [-action_clip, action_clip] before scaling."""
  init_joint_noise: float = 0.1
  """Uniform noise, rad, added to the standing pose at reset."""
  init_velocity_noise: float = 0.2
  """Uniform noise on the trunk's initial linear (m/s) and angular (rad/s) velocity."""
  obs_noise_scale: float = 1.0
  """Multiplies every policy-observation noise level below; 0 gives noise-free observations."""
  noise_lin_vel: float = 0.1
  """Uniform noise on the trunk linear velocity, m/s (the error of a leg-odometry estimate)."""
  noise_gyro: float = 0.2
  """Uniform noise on the trunk angular velocity, rad/s."""
  noise_gravity: float = 0.05
  """Uniform noise on the projected gravity vector (unit)."""
  noise_joint_pos: float = 0.03
  """Uniform noise on joint positions, rad."""
  noise_joint_vel: float = 1.5
  """Uniform noise on joint velocities, rad/s."""
  fall_height: float = 0.18
  """An episode ends as `fall` when the trunk drops below this height, m."""
  fall_tilt_degrees: float = 60.0
  """An episode ends as `fall` when the trunk's up axis tilts past this angle from vertical."""
  terminate_on_body_contact: bool = True
  """End the episode as `body_contact` when the trunk or a thigh touches the ground."""
  terminate_on_joint_limit: bool = False
  """End the episode as `joint_limit` when a joint comes within `joint_limit_margin` of its
  range."""
  joint_limit_margin: float = 0.02
  """Distance to a joint's range end, rad, that counts as hitting the limit."""
  gait_hz: float = 2.0
  """Frequency of the trot clock, Hz: its phase (sin, cos) joins the observations and drives the
  `gait_phase` reward's reference foot heights. 0 runs without a clock."""
  foot_contact_distance: float = 0.002
  """A foot is in contact when its signed distance to the floor is below this, m."""


STRATA = ("flat", "slope", "push", "payload", "friction")
"""The default held-out evaluation strata: every one of them stands on level ground."""
TERRAIN_STRATA = ("rough", "stairs", "obstacles")
"""Held-out strata on heightfield terrain (`terrain.ground="heightfield"` only)."""
ALL_STRATA = STRATA + TERRAIN_STRATA
"""Every stratum `mjx_walk.sim.families` knows how to draw."""
TERRAIN_TYPES = ("flat", "rough", "slope", "stairs_up", "stairs_down", "obstacles")
"""Heightfield terrain types (`mjx_walk.sim.terrain`), in code order."""
GROUNDS = ("plane", "heightfield")


@dataclasses.dataclass
class CommandRanges:
  """The joystick command schedule's ranges; the training families and the held-out panel each
  have their own (`families.command_*`, `panel.command_*`), declared and validated here once.

  A family's schedule is a sequence of commands, each held for an interval drawn from
  `command_resample_seconds`, each axis uniform in its range. Velocities are in the trunk's
  heading frame.
  """

  command_vx: tuple[float, float] = _range_field(-1.0, 1.0)
  """Forward velocity command range, m/s."""
  command_vy: tuple[float, float] = _range_field(-0.5, 0.5)
  """Lateral velocity command range, m/s."""
  command_yaw_rate: tuple[float, float] = _range_field(-0.5, 0.5)
  """Yaw-rate command range, rad/s."""
  command_resample_seconds: tuple[float, float] = _range_field(5.0, 10.0)
  """Time between two commands of a schedule, s, drawn per interval."""


@dataclasses.dataclass
class FamilyConfig(CommandRanges):
  """The training panel: how many seed families, and the ranges every per-family draw comes from
  (the command ranges are `CommandRanges`').

  A family's seed fixes its spawn pose, its command schedule and one domain-randomization draw
  (see `mjx_walk.sim.families`); env i belongs to family i % num_train_families.
  """

  num_train_families: int = 128
  """Training seed families; num_envs must be divisible by it."""
  train_family_seeds: tuple[int, ...] = ()
  """Explicit training family seeds (exactly num_train_families of them). Empty: derived from
  `seed`. Seeds shared with the evaluation panel are refused as leakage."""
  spawn_yaw: tuple[float, float] = _range_field(-math.pi, math.pi)
  """Heading at spawn, rad."""
  spawn_offset: float = 0.5
  """Spawn x and y offsets are each uniform in [-spawn_offset, spawn_offset], m."""
  friction: tuple[float, float] = _range_field(0.4, 1.2)
  """Ground friction coefficient (sliding), written to the floor and the feet."""
  payload_mass: tuple[float, float] = _range_field(-3.0, 3.0)
  """Mass added to the trunk, kg (negative removes mass)."""
  payload_com_offset: float = 0.05
  """The payload sits at a trunk-frame offset uniform in [-x, x] on each axis, m."""
  joint_friction: tuple[float, float] = _range_field(0.05, 0.3)
  """Viscous joint friction added to the PD damping kd, N·m·s/rad."""
  motor_strength: tuple[float, float] = _range_field(0.9, 1.1)
  """Scale of every actuator's position gain kp (its gain and bias terms). The PD damping kd is
  the MJCF joint damping and is not scaled; the torque limits are not scaled either."""
  action_delay_steps: tuple[int, int] = _range_field(0, 1)
  """Actuator delay, whole control steps, inclusive."""
  push_force: tuple[float, float] = _range_field(0.0, 50.0)
  """Magnitude of each push on the trunk, N, in a random horizontal direction."""
  push_seconds: float = 0.1
  """Duration of each push, s (rounded to whole control steps)."""
  pushes_per_episode: int = 2
  """Pushes in each episode of the family, at times drawn uniformly in the episode."""
  slope_degrees: tuple[float, float] = _range_field(0.0, 10.0)
  """Ground slope, degrees: gravity tilted by this angle in a random direction (an inclined
  plane, as the panel's steeper `slope` stratum). (0, 0) trains on level ground only."""


@dataclasses.dataclass
class PanelConfig(CommandRanges):
  """The held-out evaluation panel: strata of families that training never sees.

  Its families are drawn from `seed`, not from the run seed, so runs with different seeds are
  judged on the same panel and can be compared. Its command schedules come from its own
  `CommandRanges`. Conditions not named by a stratum are nominal:
  `nominal_friction`, `nominal_joint_friction`, no payload, full motor strength, no delay, no
  pushes, level ground.
  """

  seed: int = 2026
  """Seed of the panel's family seeds; the whole panel is a function of this section alone."""
  strata: tuple[str, ...] = STRATA
  families_per_stratum: int = 8
  envs_per_family: int = 4
  episode_seconds: float = 10.0
  """Length of every evaluation episode; reaching it is success if tracking is good enough."""
  every_chunks: int = 25
  """Evaluate every this many training chunks (0: only at the end of the run)."""
  nominal_friction: float = 0.8
  """Ground friction wherever a stratum does not set it (the training range's midpoint)."""
  nominal_joint_friction: float = 0.175
  """Joint friction of every panel family, N·m·s/rad (the training range's midpoint)."""
  slope_degrees: float = 15.0
  """`slope`: gravity tilted by this angle in a random direction (an inclined plane)."""
  push_force: float = 100.0
  """`push`: force of each push, N."""
  push_seconds: float = 0.1
  """`push`: duration of each push, s."""
  pushes_per_episode: int = 2
  payload_mass: tuple[float, float] = _range_field(4.0, 6.0)
  """`payload`: trunk mass added, kg; must lie above the training range."""
  friction: tuple[float, float] = _range_field(0.15, 0.3)
  """`friction`: ground friction; must lie below the training range."""
  success_lin_vel_error: float = 0.25
  """An episode succeeds if it does not terminate and its mean xy velocity error is below this,
  m/s, ..."""
  success_yaw_rate_error: float = 0.3
  """... and its mean yaw-rate error is below this, rad/s."""

  @property
  def num_envs(self) -> int:
    return len(self.strata) * self.families_per_stratum * self.envs_per_family

  @property
  def num_families(self) -> int:
    return len(self.strata) * self.families_per_stratum


@dataclasses.dataclass
class TerrainConfig:
  """The ground every env stands on, and the difficulty curriculum on heightfields.

  `plane` is MuJoCo's infinite plane (slopes are tilted gravity). `heightfield` gives every env
  its own periodic tile of terrain (`mjx_walk.sim.terrain`): a training family's seed fixes its
  terrain type and shape, and the env's curriculum level (0 .. num_levels - 1) fixes the
  difficulty d = level / (num_levels - 1), which scales each type's magnitude linearly from the
  low to the high end of its range below. On a heightfield only the feet collide with the
  ground; the trunk and thighs are checked against its surface and end the episode as
  `body_contact` (`env.terminate_on_body_contact` must be on).
  """

  ground: str = "plane"
  """"plane" or "heightfield"."""
  tile_size: float = 4.0
  """Side of the square terrain tile, m; the terrain repeats with this period, and a robot that
  walks off the tile is moved back by whole tiles onto the same ground."""
  margin: float = 0.6
  """Terrain modelled beyond each side of the tile, m, so that feet and body stay on it while
  the trunk is inside the tile."""
  resolution: float = 0.1
  """Spacing of the heightfield's samples, m; tile_size, margin, platform_size and rough_cell
  must be whole multiples of it."""
  platform_size: float = 1.2
  """Side of the flat square at the tile's centre where every episode starts, m."""
  types: tuple[str, ...] = ("rough", "slope", "stairs_up", "stairs_down", "obstacles")
  """Terrain types of the training families, from `TERRAIN_TYPES`."""
  type_weights: tuple[float, ...] = (0.2, 0.2, 0.2, 0.2, 0.2)
  """Probability of each of `types` for a training family (normalised)."""
  rough_height: tuple[float, float] = _range_field(0.0, 0.10)
  """`rough`: bump height at difficulty 0 and 1, m (bumps are uniform in [0, height])."""
  rough_cell: float = 0.2
  """`rough`: spacing of the random bump heights, m (interpolated between them)."""
  slope_degrees: tuple[float, float] = _range_field(0.0, 25.0)
  """`slope`: angle of the pyramid's faces at difficulty 0 and 1, degrees (up or down)."""
  stair_height: tuple[float, float] = _range_field(0.05, 0.23)
  """`stairs_up` / `stairs_down`: riser height at difficulty 0 and 1, m."""
  stair_width: float = 0.3
  """Tread depth of every stair, m."""
  obstacle_height: tuple[float, float] = _range_field(0.05, 0.20)
  """`obstacles`: the tallest block at difficulty 0 and 1, m (blocks are 0.25 to 1 of it)."""
  obstacle_count: int = 8
  """`obstacles`: blocks per tile."""
  obstacle_size: tuple[float, float] = _range_field(0.3, 1.0)
  """`obstacles`: side lengths of the blocks, m."""
  num_levels: int = 10
  """Curriculum levels; level 0 is difficulty 0 and the last level difficulty 1."""
  initial_level_max: int = 3
  """Each env starts at a level drawn uniformly from 0 .. initial_level_max."""
  promote_fraction: float = 0.8
  """An episode that lasts to the time limit and walks at least this fraction of its commanded
  distance moves its env one level up."""
  demote_fraction: float = 0.5
  """An episode that terminates (fall, body contact, ...) or walks less than this fraction of
  its commanded distance moves its env one level down."""
  min_commanded_distance: float = 2.0
  """Episodes commanded to walk less than this, m, judge nothing by distance (only a termination
  moves them down)."""
  panel_rough_height: float = 0.05
  """Held-out `rough` stratum: bump height, m."""
  panel_stair_height: float = 0.10
  """Held-out `stairs` stratum: riser height, m (its families alternate up and down)."""
  panel_obstacle_height: float = 0.08
  """Held-out `obstacles` stratum: the tallest block, m."""

  @property
  def heightfield(self) -> bool:
    return self.ground == "heightfield"


@dataclasses.dataclass
class RewardConfig:
  """Scales of the named reward terms (see `mjx_walk.sim.rewards`), per second of control.

  The per-step reward is sum(scale * term) * control_dt, so a scale reads as a rate and does not
  change meaning when the control frequency does. A scale of 0 removes the term (and its cost).
  """

  tracking_lin_vel: float = 1.0
  tracking_ang_vel: float = 0.5
  lin_vel_z: float = -2.0
  ang_vel_xy: float = -0.05
  orientation: float = -5.0
  torques: float = -1e-4
  action_rate: float = -0.01
  feet_air_time: float = 1.0
  pose: float = -0.1
  gait_phase: float = 1.0
  """Feet following the trot clock's reference heights (needs `env.gait_hz` > 0)."""
  feet_slip: float = -0.1
  termination: float = -50.0
  """Applied once on the step an episode terminates (not on a timeout)."""
  only_positive: bool = True
  """Clip the per-step sum of all terms but `termination` at 0 (legged_gym's
  only_positive_rewards). Early on, penalties on a flailing policy outweigh what tracking earns;
  unclipped, being alive then costs more than dying and PPO learns to end episodes at once.
  The termination penalty is added after the clip, so a fall still costs something."""
  tracking_sigma: float = 0.25
  """Width of the exp(-error^2 / sigma) tracking kernels, (m/s)^2."""
  air_time_target: float = 0.1
  """Feet air time is rewarded for swings longer than this, s."""
  swing_height: float = 0.08
  """Apex of the gait clock's reference swing, m."""

  def scales(self) -> dict[str, float]:
    """The term scales by name, without the kernel parameters."""
    kernel_params = ("only_positive", "tracking_sigma", "air_time_target", "swing_height")
    return {
        f.name: getattr(self, f.name)
        for f in dataclasses.fields(self)
        if f.name not in kernel_params
    }


@dataclasses.dataclass
class NetworkConfig:
  """The actor-critic."""

  actor_hidden_sizes: tuple[int, ...] = (128, 64, 32)
  critic_hidden_sizes: tuple[int, ...] = (128, 64, 32)
  activation: str = "elu"
  init_std: float = 0.75
  """Initial std of the Gaussian policy, in action units (x action_scale = 0.19 rad on Go2).
  Too much exploration noise shakes the trunk until the penalties outweigh every tracking reward
  and only survival is learned; experiments/README.md has the runs that chose 0.75."""


@dataclasses.dataclass
class PPOConfig:
  """PPO and its optimizer."""

  learning_rate: float = 1e-3
  """Initial Adam learning rate; adapted during training when desired_kl > 0."""
  desired_kl: float = 0.01
  """Target approx-KL for the adaptive learning rate (rsl_rl's rule); 0 keeps the rate fixed.
  Before each minibatch's step, the approx-KL between the behaviour policy and the current
  parameters on that minibatch is measured: above 2 x desired_kl the rate is divided by 1.5, below
  desired_kl / 2 multiplied by 1.5, within [min_learning_rate, max_learning_rate]; that same
  step then uses the new rate."""
  min_learning_rate: float = 1e-5
  """Floor of the adaptive learning rate."""
  max_learning_rate: float = 1e-2
  """Ceiling of the adaptive learning rate."""
  num_epochs: int = 5
  num_minibatches: int = 4
  gamma: float = 0.97
  gae_lambda: float = 0.95
  clip_eps: float = 0.2
  value_coef: float = 1.0
  entropy_coef: float = 0.01
  max_grad_norm: float = 1.0
  normalize_observations: bool = True


@dataclasses.dataclass
class AuditConfig:
  """The batch audits (see `mjx_walk.learn.audit` and `mjx_walk.analysis.flags`): what counts
  as an event, and when to flag it."""

  early_end_steps: int = 10
  """An episode that terminates within this many control steps is flagged as an early end."""
  traces_per_update: int = 2
  """State traces of early ends taken from each update (qpos, qvel and actions per step)."""
  max_traces: int = 50
  """Early-end traces kept in the run folder, at most."""
  slip_speed: float = 0.1
  """A foot in contact moving horizontally faster than this is slipping, m/s."""
  stumble_speed: float = 0.5
  """A foot touching down while moving horizontally faster than this stumbles, m/s."""
  min_event_count: int = 200
  """Contact events seen fewer times than this per update batch are flagged as too rare to learn
  from."""
  dominant_share: float = 0.5
  """A reward term with more than this share of the total absolute reward is flagged when
  tracking does not improve at the same time."""


@dataclasses.dataclass
class ReportConfig:
  """Pictures of a run (see `mjx_walk.analysis.report`)."""

  video_every_chunks: int = 0
  """Also render held-out episodes every this many chunks (0: only at the end of the run)."""
  video_width: int = 320
  video_height: int = 240
  video_fps: int = 25
  """Frames per second of simulated time; the control rate must be a whole multiple of it."""


@dataclasses.dataclass
class CheckpointConfig:
  """When a run saves itself (see `mjx_walk.run.checkpoint`)."""

  every_chunks: int = 10
  """Save every this many chunks; the run also saves at its end and when stopped."""
  max_to_keep: int = 3
  """The newest checkpoints kept; older ones are deleted, except the best one."""
  keep_best: bool = True
  """Also keep the checkpoint with the best held-out score (mean success rate over the strata;
  fall rate breaks ties). Until an evaluation has been saved, the best is the latest."""


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
  env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
  families: FamilyConfig = dataclasses.field(default_factory=FamilyConfig)
  panel: PanelConfig = dataclasses.field(default_factory=PanelConfig)
  terrain: TerrainConfig = dataclasses.field(default_factory=TerrainConfig)
  checkpoint: CheckpointConfig = dataclasses.field(default_factory=CheckpointConfig)
  audit: AuditConfig = dataclasses.field(default_factory=AuditConfig)
  report: ReportConfig = dataclasses.field(default_factory=ReportConfig)
  reward: RewardConfig = dataclasses.field(default_factory=RewardConfig)
  network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
  ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)

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


def _fail(where: str, value: Any, accepted: str) -> None:
  raise ValueError(f"config.{where}={value!r} is invalid: {accepted}.")


def _check_finite(section: Any, prefix: str = "") -> None:
  """Refuses NaN and +-inf in every float field (and every float inside a tuple field)."""
  for field in dataclasses.fields(section):
    value = getattr(section, field.name)
    where = f"{prefix}{field.name}"
    if dataclasses.is_dataclass(value):
      _check_finite(value, f"{where}.")
    elif any(isinstance(v, float) and not math.isfinite(v)
             for v in (value if isinstance(value, (tuple, list)) else (value,))):
      _fail(where, value, "it must be a finite number (not NaN or infinity)")


def _check_positive(where: str, value: float) -> None:
  if not value > 0:
    _fail(where, value, "it must be > 0")


def _check_range(where: str, value: Any, *, nonnegative: bool = False) -> None:
  if not (isinstance(value, (tuple, list)) and len(value) == 2):
    _fail(where, value, "it must be a (low, high) pair")
  low, high = value
  if not low <= high:
    _fail(where, value, "low must be <= high")
  if nonnegative and low < 0:
    _fail(where, value, "both ends must be >= 0")


def validate(config: TrainConfig) -> TrainConfig:
  """Checks every field that could fail later, and returns the config unchanged.

  Args:
    config: the run configuration.

  Returns:
    `config`, so that `cfg = validate(get_config())` reads naturally.

  Raises:
    ValueError: naming the first bad field, its value, and what would be accepted.
  """
  _check_finite(config)
  for check in (_validate_batch, _validate_env, _validate_families, _validate_panel,
                _validate_terrain, _validate_checkpoint, _validate_audit_and_report,
                _validate_reward, _validate_network, _validate_ppo):
    check(config)
  return config


def _check_positive_int(where: str, value: Any) -> None:
  if not isinstance(value, int) or value <= 0:
    _fail(where, value, "it must be a positive integer")


def _validate_batch(config: TrainConfig) -> None:
  for name, value in (("seed", config.seed), ("panel.seed", config.panel.seed)):
    if not isinstance(value, int) or value < 0:
      _fail(name, value, "it must be a non-negative integer")
  for name in ("num_envs", "unroll_length", "updates_per_chunk", "total_env_steps"):
    _check_positive_int(name, getattr(config, name))
  for name in ("num_epochs", "num_minibatches"):
    _check_positive_int(f"ppo.{name}", getattr(config.ppo, name))
  if config.num_envs % config.ppo.num_minibatches:
    _fail("num_envs", config.num_envs,
          f"it must be divisible by ppo.num_minibatches={config.ppo.num_minibatches}")


def _validate_env(config: TrainConfig) -> None:
  env = config.env
  _check_positive("env.control_hz", env.control_hz)
  _check_positive("env.episode_seconds", env.episode_seconds)
  _check_positive("env.action_clip", env.action_clip)
  if env.physics_timestep < 0 or env.physics_timestep > 0.02:
    _fail("env.physics_timestep", env.physics_timestep,
          "it must be 0 (the robot's MJCF timestep) or in (0, 0.02] s")
  if env.physics_timestep and env.control_hz > 0:
    substeps(config, env.physics_timestep)
  _check_positive("env.fall_height", env.fall_height)
  if not 0 < env.fall_tilt_degrees <= 180:
    _fail("env.fall_tilt_degrees", env.fall_tilt_degrees, "it must be in (0, 180]")
  for name in (
      "init_joint_noise", "init_velocity_noise", "obs_noise_scale", "noise_lin_vel",
      "noise_gyro", "noise_gravity", "noise_joint_pos", "noise_joint_vel", "joint_limit_margin",
  ):
    if getattr(env, name) < 0:
      _fail(f"env.{name}", getattr(env, name), "it must be >= 0")


def _validate_checkpoint(config: TrainConfig) -> None:
  for name in ("every_chunks", "max_to_keep"):
    _check_positive_int(f"checkpoint.{name}", getattr(config.checkpoint, name))


def _validate_reward(config: TrainConfig) -> None:
  env, reward = config.env, config.reward
  _check_positive("reward.tracking_sigma", reward.tracking_sigma)
  if reward.air_time_target < 0:
    _fail("reward.air_time_target", reward.air_time_target, "it must be >= 0")
  _check_positive("reward.swing_height", reward.swing_height)
  if env.gait_hz < 0 or env.gait_hz > env.control_hz / 4:
    _fail("env.gait_hz", env.gait_hz,
          f"it must be 0 (no clock) or in (0, control_hz / 4 = {env.control_hz / 4:g}]")
  if reward.gait_phase and not env.gait_hz:
    _fail("reward.gait_phase", reward.gait_phase,
          "it needs the gait clock: set env.gait_hz > 0, or give this term a scale of 0")


def _validate_network(config: TrainConfig) -> None:
  net = config.network
  for name in ("actor_hidden_sizes", "critic_hidden_sizes"):
    sizes = getattr(net, name)
    if not sizes or any(not isinstance(s, int) or s <= 0 for s in sizes):
      _fail(f"network.{name}", sizes, "it must be a non-empty tuple of positive integers")
  if net.activation not in ACTIVATIONS:
    _fail("network.activation", net.activation, f"choose one of {', '.join(ACTIVATIONS)}")
  _check_positive("network.init_std", net.init_std)


def _validate_ppo(config: TrainConfig) -> None:
  ppo = config.ppo
  for name in ("learning_rate", "clip_eps", "max_grad_norm"):
    _check_positive(f"ppo.{name}", getattr(ppo, name))
  for name in ("gamma", "gae_lambda"):
    if not 0 < getattr(ppo, name) <= 1:
      _fail(f"ppo.{name}", getattr(ppo, name), "it must be in (0, 1]")
  for name in ("desired_kl", "value_coef", "entropy_coef"):
    if getattr(ppo, name) < 0:
      _fail(f"ppo.{name}", getattr(ppo, name), "it must be >= 0")
  _check_positive("ppo.min_learning_rate", ppo.min_learning_rate)
  if ppo.max_learning_rate < ppo.min_learning_rate:
    _fail("ppo.max_learning_rate", ppo.max_learning_rate,
          f"it must be >= ppo.min_learning_rate={ppo.min_learning_rate}")
  if ppo.desired_kl > 0 and not (
      ppo.min_learning_rate <= ppo.learning_rate <= ppo.max_learning_rate):
    _fail("ppo.learning_rate", ppo.learning_rate,
          f"with the adaptive rate (ppo.desired_kl > 0) it must lie in [ppo.min_learning_rate, "
          f"ppo.max_learning_rate] = [{ppo.min_learning_rate}, {ppo.max_learning_rate}]")


def _validate_commands(section: str, ranges: CommandRanges) -> None:
  """The command ranges of `families` or `panel`: (low, high) pairs, intervals > 0."""
  for name in ("command_vx", "command_vy", "command_yaw_rate", "command_resample_seconds"):
    _check_range(f"{section}.{name}", getattr(ranges, name))
  if ranges.command_resample_seconds[0] <= 0:
    _fail(f"{section}.command_resample_seconds", ranges.command_resample_seconds,
          "both ends must be > 0")


def _validate_families(config: TrainConfig) -> None:
  fam = config.families
  count = fam.num_train_families
  _check_positive_int("families.num_train_families", count)
  if config.num_envs % count:
    _fail("num_envs", config.num_envs,
          f"it must be divisible by families.num_train_families={count} (env i belongs to "
          f"family i % {count})")
  seeds = fam.train_family_seeds
  if seeds:
    if len(seeds) != count:
      _fail("families.train_family_seeds", seeds,
            f"give exactly num_train_families={count} seeds, or none to derive them from seed")
    if any(not isinstance(s, int) or s < 0 for s in seeds):
      _fail("families.train_family_seeds", seeds, "seeds must be non-negative integers")
    if len(set(seeds)) != len(seeds):
      _fail("families.train_family_seeds", seeds, "seeds must be distinct")
  _validate_commands("families", fam)
  _check_range("families.spawn_yaw", fam.spawn_yaw)
  for name in ("friction", "joint_friction", "motor_strength", "push_force",
               "action_delay_steps"):
    _check_range(f"families.{name}", getattr(fam, name), nonnegative=True)
  _check_range("families.payload_mass", fam.payload_mass)
  if fam.friction[0] <= 0 or fam.motor_strength[0] <= 0:
    bad = "friction" if fam.friction[0] <= 0 else "motor_strength"
    _fail(f"families.{bad}", getattr(fam, bad), "both ends must be > 0")
  if any(not isinstance(d, int) for d in fam.action_delay_steps):
    _fail("families.action_delay_steps", fam.action_delay_steps, "it must be a pair of integers")
  for name in ("spawn_offset", "payload_com_offset"):
    if getattr(fam, name) < 0:
      _fail(f"families.{name}", getattr(fam, name), "it must be >= 0")
  _check_positive("families.push_seconds", fam.push_seconds)
  if not isinstance(fam.pushes_per_episode, int) or fam.pushes_per_episode < 0:
    _fail("families.pushes_per_episode", fam.pushes_per_episode, "it must be an integer >= 0")
  _check_range("families.slope_degrees", fam.slope_degrees, nonnegative=True)
  if fam.slope_degrees[1] >= 90:
    _fail("families.slope_degrees", fam.slope_degrees, "both ends must be in [0, 90)")


def _validate_panel(config: TrainConfig) -> None:
  panel, fam = config.panel, config.families
  if not panel.strata or len(set(panel.strata)) != len(panel.strata) or any(
      s not in ALL_STRATA for s in panel.strata):
    _fail("panel.strata", panel.strata,
          f"it must be a non-empty tuple of distinct names from {', '.join(ALL_STRATA)}")
  on_terrain = [s for s in panel.strata if s in TERRAIN_STRATA]
  if on_terrain and not config.terrain.heightfield:
    _fail("panel.strata", panel.strata,
          f"the strata {on_terrain} stand on heightfield terrain: set "
          f"terrain.ground='heightfield' or leave them out")
  for name in ("families_per_stratum", "envs_per_family"):
    _check_positive_int(f"panel.{name}", getattr(panel, name))
  if not isinstance(panel.every_chunks, int) or panel.every_chunks < 0:
    _fail("panel.every_chunks", panel.every_chunks,
          "it must be an integer >= 0 (0: at the end only)")
  for name in ("episode_seconds", "push_force", "push_seconds", "success_lin_vel_error",
               "success_yaw_rate_error"):
    _check_positive(f"panel.{name}", getattr(panel, name))
  if not 0 <= panel.slope_degrees < 90:
    _fail("panel.slope_degrees", panel.slope_degrees, "it must be in [0, 90)")
  if not isinstance(panel.pushes_per_episode, int) or panel.pushes_per_episode <= 0:
    _fail("panel.pushes_per_episode", panel.pushes_per_episode, "it must be a positive integer")
  _validate_commands("panel", panel)
  _check_positive("panel.nominal_friction", panel.nominal_friction)
  if panel.nominal_joint_friction < 0:
    _fail("panel.nominal_joint_friction", panel.nominal_joint_friction, "it must be >= 0")
  _check_range("panel.payload_mass", panel.payload_mass)
  _check_range("panel.friction", panel.friction, nonnegative=True)
  # A held-out stratum inside the training range would not be held out.
  if "payload" in panel.strata and panel.payload_mass[0] <= fam.payload_mass[1]:
    _fail("panel.payload_mass", panel.payload_mass,
          f"the payload stratum must lie above the training range families.payload_mass="
          f"{fam.payload_mass}")
  if "slope" in panel.strata and panel.slope_degrees <= fam.slope_degrees[1]:
    _fail("panel.slope_degrees", panel.slope_degrees,
          f"the slope stratum must be steeper than the training range families.slope_degrees="
          f"{fam.slope_degrees}")
  if "friction" in panel.strata and (
      panel.friction[1] >= fam.friction[0] or panel.friction[0] <= 0):
    _fail("panel.friction", panel.friction,
          f"the friction stratum must be > 0 and below the training range families.friction="
          f"{fam.friction}")


def _multiple_of(where: str, value: float, step: float) -> None:
  if not value > 0 or abs(value / step - round(value / step)) > 1e-6:
    _fail(where, value, f"it must be a positive whole multiple of terrain.resolution={step}")


def _validate_terrain(config: TrainConfig) -> None:
  terrain = config.terrain
  if terrain.ground not in GROUNDS:
    _fail("terrain.ground", terrain.ground, f"it must be one of {', '.join(GROUNDS)}")
  if not terrain.heightfield:
    return
  _check_positive("terrain.resolution", terrain.resolution)
  for name in ("tile_size", "margin", "platform_size", "rough_cell"):
    _multiple_of(f"terrain.{name}", getattr(terrain, name), terrain.resolution)
  if terrain.platform_size >= terrain.tile_size:
    _fail("terrain.platform_size", terrain.platform_size,
          f"it must be smaller than terrain.tile_size={terrain.tile_size}")
  cells = round(terrain.tile_size / terrain.resolution)
  if cells % round(terrain.rough_cell / terrain.resolution):
    _fail("terrain.rough_cell", terrain.rough_cell,
          f"it must divide terrain.tile_size={terrain.tile_size} (the bumps repeat with the tile)")
  if terrain.margin < 0.5:
    _fail("terrain.margin", terrain.margin,
          "it must be >= 0.5 m, so that the feet stay on the terrain while the trunk is on the tile")
  if (not terrain.types or len(set(terrain.types)) != len(terrain.types)
      or any(t not in TERRAIN_TYPES for t in terrain.types)):
    _fail("terrain.types", terrain.types,
          f"it must be a non-empty tuple of distinct names from {', '.join(TERRAIN_TYPES)}")
  if (len(terrain.type_weights) != len(terrain.types) or any(w < 0 for w in terrain.type_weights)
      or not sum(terrain.type_weights) > 0):
    _fail("terrain.type_weights", terrain.type_weights,
          f"give one weight >= 0 per terrain.types entry ({len(terrain.types)}), not all 0")
  for name in ("rough_height", "slope_degrees", "stair_height", "obstacle_height",
               "obstacle_size"):
    _check_range(f"terrain.{name}", getattr(terrain, name), nonnegative=True)
  if terrain.slope_degrees[1] >= 60:
    _fail("terrain.slope_degrees", terrain.slope_degrees, "both ends must be in [0, 60)")
  _check_positive("terrain.stair_width", terrain.stair_width)
  if terrain.obstacle_size[0] <= 0:
    _fail("terrain.obstacle_size", terrain.obstacle_size, "both ends must be > 0")
  _check_positive_int("terrain.obstacle_count", terrain.obstacle_count)
  if not isinstance(terrain.num_levels, int) or terrain.num_levels < 2:
    _fail("terrain.num_levels", terrain.num_levels, "it must be an integer >= 2")
  if (not isinstance(terrain.initial_level_max, int)
      or not 0 <= terrain.initial_level_max < terrain.num_levels):
    _fail("terrain.initial_level_max", terrain.initial_level_max,
          f"it must be an integer in [0, terrain.num_levels - 1 = {terrain.num_levels - 1}]")
  if not 0 <= terrain.demote_fraction < terrain.promote_fraction:
    _fail("terrain.demote_fraction", terrain.demote_fraction,
          f"it must be >= 0 and below terrain.promote_fraction={terrain.promote_fraction}")
  if terrain.min_commanded_distance < 0:
    _fail("terrain.min_commanded_distance", terrain.min_commanded_distance, "it must be >= 0")
  for name in ("panel_rough_height", "panel_stair_height", "panel_obstacle_height"):
    if getattr(terrain, name) < 0:
      _fail(f"terrain.{name}", getattr(terrain, name), "it must be >= 0")
  reach = config.families.spawn_offset + 0.35
  if reach > terrain.platform_size / 2:
    _fail("terrain.platform_size", terrain.platform_size,
          f"the robot (its feet reach 0.35 m from the trunk) spawns up to "
          f"families.spawn_offset={config.families.spawn_offset} m from the tile's centre, so the "
          f"flat platform must be at least {2 * reach:g} m wide, or the spawn offset smaller")
  if not config.env.terminate_on_body_contact:
    _fail("env.terminate_on_body_contact", False,
          "on a heightfield the trunk and thighs do not collide with the ground, so their "
          "contact must end the episode")


def _validate_audit_and_report(config: TrainConfig) -> None:
  audit, report = config.audit, config.report
  for name in ("early_end_steps", "traces_per_update", "max_traces", "min_event_count"):
    value = getattr(audit, name)
    if not isinstance(value, int) or value < 0:
      _fail(f"audit.{name}", value, "it must be an integer >= 0")
  for name in ("slip_speed", "stumble_speed"):
    _check_positive(f"audit.{name}", getattr(audit, name))
  if not 0 < audit.dominant_share <= 1:
    _fail("audit.dominant_share", audit.dominant_share, "it must be in (0, 1]")
  for name in ("video_width", "video_height", "video_fps"):
    _check_positive_int(f"report.{name}", getattr(report, name))
  if not isinstance(report.video_every_chunks, int) or report.video_every_chunks < 0:
    _fail("report.video_every_chunks", report.video_every_chunks,
          "it must be an integer >= 0 (0: videos only at the end of the run)")
  ratio = config.env.control_hz / report.video_fps
  if abs(ratio - round(ratio)) > 1e-9:
    _fail("report.video_fps", report.video_fps,
          f"env.control_hz={config.env.control_hz} must be a whole multiple of it")


def substeps(config: TrainConfig, timestep: float) -> int:
  """Physics steps per control step, checked to be a whole number.

  Args:
    config: the run configuration.
    timestep: the physics timestep, s (`env.physics_timestep`, or the robot's MJCF value).

  Raises:
    ValueError: when 1 / control_hz is not a whole multiple of the timestep.
  """
  ratio = 1.0 / (config.env.control_hz * timestep)
  n = round(ratio)
  if n < 1 or abs(ratio - n) > 1e-6:
    _fail(
        "env.control_hz",
        config.env.control_hz,
        f"1/control_hz must be a whole multiple of the physics timestep {timestep} s "
        f"(e.g. control_hz={1.0 / (timestep * max(n, 1)):g})",
    )
  return n


def from_dict(values: dict[str, Any]) -> TrainConfig:
  """Rebuilds a config from `to_dict` output (e.g. a run's config.json)."""
  sections = {
      "env": EnvConfig,
      "families": FamilyConfig,
      "panel": PanelConfig,
      "terrain": TerrainConfig,
      "checkpoint": CheckpointConfig,
      "audit": AuditConfig,
      "report": ReportConfig,
      "reward": RewardConfig,
      "network": NetworkConfig,
      "ppo": PPOConfig,
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
  """Loads a config file exposing `get_config() -> TrainConfig` (e.g. experiments/go2_flat.py).

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
