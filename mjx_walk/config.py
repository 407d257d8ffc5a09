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

from mjx_walk import robots

ACTIVATIONS = ("elu", "relu", "tanh", "swish")


def _range_field(low: float, high: float) -> Any:
  return dataclasses.field(default=(low, high))


@dataclasses.dataclass
class EnvConfig:
  """The locomotion task."""

  robot: str = "go2"
  """Robot name, a folder under robots/ registered in `mjx_walk.robots`."""
  control_hz: float = 50.0
  """Policy rate in Hz. Must be a whole number of physics steps of the robot's timestep."""
  episode_seconds: float = 20.0
  """Time limit; reaching it is a truncation (bootstrapped), not a termination."""
  command_vx: tuple[float, float] = _range_field(-1.0, 1.0)
  """Forward velocity command range, m/s, in the trunk's heading frame."""
  command_vy: tuple[float, float] = _range_field(-0.5, 0.5)
  """Lateral velocity command range, m/s."""
  command_yaw_rate: tuple[float, float] = _range_field(-0.5, 0.5)
  """Yaw-rate command range, rad/s."""
  command_resample_seconds: float = 10.0
  """A new command is drawn this often within an episode."""
  action_clip: float = 5.0
  """Raw policy actions are clipped to [-action_clip, action_clip] before scaling."""
  init_joint_noise: float = 0.1
  """Uniform noise, rad, added to the standing pose at reset."""
  init_velocity_noise: float = 0.2
  """Uniform noise on the trunk's initial linear (m/s) and angular (rad/s) velocity."""
  obs_noise_scale: float = 1.0
  """Multiplies every policy-observation noise level below; 0 gives noise-free observations."""
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
  """End the episode as `joint_limit` when a joint comes within `joint_limit_margin` of its range."""
  joint_limit_margin: float = 0.02
  """Distance to a joint's range end, rad, that counts as hitting the limit."""
  foot_contact_distance: float = 0.002
  """A foot is in contact when its signed distance to the floor is below this, m."""


@dataclasses.dataclass
class RewardConfig:
  """Scales of the named reward terms (see `mjx_walk.rewards`), per second of control.

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

  def scales(self) -> dict[str, float]:
    """The term scales by name, without the kernel parameters."""
    kernel_params = ("only_positive", "tracking_sigma", "air_time_target")
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
  init_std: float = 0.5
  """Initial std of the Gaussian policy, in action units (x action_scale = 0.125 rad on Go2).
  At 1.0 the exploration noise alone shakes the trunk enough that the wobble and torque penalties
  outweigh all tracking reward, the clipped reward sits at 0, and nothing but survival is learned
  (measured: reward/step 0.0000 after 2.3M steps, against +0.0060 at 0.5 after 1.4M)."""


@dataclasses.dataclass
class PPOConfig:
  """PPO and its optimizer."""

  learning_rate: float = 1e-3
  """Initial Adam learning rate; adapted during training when desired_kl > 0."""
  desired_kl: float = 0.01
  """Target approx-KL per update for the adaptive learning rate; 0 keeps the rate fixed."""
  num_epochs: int = 5
  num_minibatches: int = 4
  gamma: float = 0.99
  gae_lambda: float = 0.95
  clip_eps: float = 0.2
  value_coef: float = 1.0
  entropy_coef: float = 0.01
  max_grad_norm: float = 1.0
  normalize_observations: bool = True


@dataclasses.dataclass
class TrainConfig:
  """A whole run. The top level of `--config`."""

  num_envs: int = 512
  """Parallel environments."""
  unroll_length: int = 24
  """Control steps each env collects per update (the horizon T)."""
  updates_per_chunk: int = 4
  """PPO updates fused into one jitted chunk; the host logs once per chunk."""
  total_env_steps: int = 6_000_000
  """Run length; rounded up to whole chunks."""
  seed: int = 0
  env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
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


def _fail(where: str, value: Any, accepted: str) -> None:
  raise ValueError(f"config.{where}={value!r} is invalid: {accepted}.")


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
  env, ppo, net, reward = config.env, config.ppo, config.network, config.reward
  for name in ("num_envs", "unroll_length", "updates_per_chunk", "total_env_steps"):
    value = getattr(config, name)
    if not isinstance(value, int) or value <= 0:
      _fail(name, value, "it must be a positive integer")
  for name in ("num_epochs", "num_minibatches"):
    value = getattr(ppo, name)
    if not isinstance(value, int) or value <= 0:
      _fail(f"ppo.{name}", value, "it must be a positive integer")
  if config.num_envs % ppo.num_minibatches:
    _fail(
        "num_envs",
        config.num_envs,
        f"it must be divisible by ppo.num_minibatches={ppo.num_minibatches}",
    )

  if env.robot not in robots.known_robots():
    _fail("env.robot", env.robot, f"known robots are {', '.join(robots.known_robots())}")
  _check_positive("env.control_hz", env.control_hz)
  _check_positive("env.episode_seconds", env.episode_seconds)
  _check_positive("env.command_resample_seconds", env.command_resample_seconds)
  _check_positive("env.action_clip", env.action_clip)
  _check_positive("env.fall_height", env.fall_height)
  if not 0 < env.fall_tilt_degrees <= 180:
    _fail("env.fall_tilt_degrees", env.fall_tilt_degrees, "it must be in (0, 180]")
  for name in ("command_vx", "command_vy", "command_yaw_rate"):
    _check_range(f"env.{name}", getattr(env, name))
  for name in (
      "init_joint_noise", "init_velocity_noise", "obs_noise_scale", "noise_gyro",
      "noise_gravity", "noise_joint_pos", "noise_joint_vel", "joint_limit_margin",
  ):
    if getattr(env, name) < 0:
      _fail(f"env.{name}", getattr(env, name), "it must be >= 0")

  _check_positive("reward.tracking_sigma", reward.tracking_sigma)
  if reward.air_time_target < 0:
    _fail("reward.air_time_target", reward.air_time_target, "it must be >= 0")

  for name in ("actor_hidden_sizes", "critic_hidden_sizes"):
    sizes = getattr(net, name)
    if not sizes or any(not isinstance(s, int) or s <= 0 for s in sizes):
      _fail(f"network.{name}", sizes, "it must be a non-empty tuple of positive integers")
  if net.activation not in ACTIVATIONS:
    _fail("network.activation", net.activation, f"choose one of {', '.join(ACTIVATIONS)}")
  _check_positive("network.init_std", net.init_std)

  for name in ("learning_rate", "clip_eps", "max_grad_norm"):
    _check_positive(f"ppo.{name}", getattr(ppo, name))
  for name in ("gamma", "gae_lambda"):
    if not 0 < getattr(ppo, name) <= 1:
      _fail(f"ppo.{name}", getattr(ppo, name), "it must be in (0, 1]")
  for name in ("desired_kl", "value_coef", "entropy_coef"):
    if getattr(ppo, name) < 0:
      _fail(f"ppo.{name}", getattr(ppo, name), "it must be >= 0")
  return config


def substeps(config: TrainConfig, timestep: float) -> int:
  """Physics steps per control step, checked to be a whole number.

  Args:
    config: the run configuration.
    timestep: the robot's physics timestep, s.

  Raises:
    ValueError: when 1 / control_hz is not a whole multiple of the timestep.
  """
  ratio = 1.0 / (config.env.control_hz * timestep)
  n = round(ratio)
  if n < 1 or abs(ratio - n) > 1e-6:
    _fail(
        "env.control_hz",
        config.env.control_hz,
        f"1/control_hz must be a whole multiple of the robot timestep {timestep} s "
        f"(e.g. control_hz={1.0 / (timestep * max(n, 1)):g})",
    )
  return n


def from_dict(values: dict[str, Any]) -> TrainConfig:
  """Rebuilds a config from `to_dict` output (e.g. a run's config.json)."""
  sections = {
      "env": EnvConfig,
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
