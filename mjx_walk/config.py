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
"""Held-out evaluation strata `mjx_walk.sim.families` knows how to draw."""


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
                _validate_checkpoint, _validate_audit_and_report, _validate_reward,
                _validate_network, _validate_ppo):
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
      s not in STRATA for s in panel.strata):
    _fail("panel.strata", panel.strata,
          f"it must be a non-empty tuple of distinct names from {', '.join(STRATA)}")
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
