"""The `env` section: the locomotion task's timing, noise and episode endings, and its checks."""

import dataclasses

from mjx_walk.config._checks import check_nonnegative, check_positive, fail


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
  contact_timeconst: float = 0.0
  """The contact time constant, s (MuJoCo's `solref[0]`), written to every geom of the robot and
  its ground; 0 keeps the robot file's (MuJoCo's default, 0.02 s on Go2). Smaller is stiffer: a
  foot landing at speed sinks less deep (experiments/README.md, "A stiffer foot contact"). Both
  simulators step with it, MJX in training and C MuJoCo in `sim2sim`. MuJoCo stiffens no contact
  past two physics steps, so a value below that is refused."""
  solver_iterations: int = 0
  """Newton iterations of the constraint solver per physics step (MuJoCo's `opt.iterations`); 0
  keeps the robot file's (1 on Go2, the fastest). One iteration stops a sliding point contact in
  a fraction of the distance Coulomb friction allows, two make it Coulomb-correct, though not
  yet a body sliding on four contacts (experiments/README.md, "The friction gap is MJX's solver"
  and "Two iterations on the flat default"). Both simulators step with it, MJX in training and C
  MuJoCo in `sim2sim --solver=mjx`."""
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
  """An episode ends as `fall` when the trunk drops below this height above the ground, m (on a
  heightfield, above the ground's mean under its hips: `mjx_walk.sim.ground.trunk_height`)."""
  fall_tilt_degrees: float = 60.0
  """An episode ends as `fall` when the trunk's up axis tilts past this angle from vertical."""
  terminate_on_body_contact: bool = True
  """End the episode as `body_contact` when the trunk or a thigh touches the ground."""
  limb_contact_ends: bool = True
  """Whether a limb's touch (the Go2's thighs) ends the episode as `body_contact`. Off, only the
  trunk's does, and a touching limb costs `reward.limb_contact` each step instead (legged_gym's
  rough recipes: thighs and shanks penalised, the base terminal)."""
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


def validate(env: EnvConfig) -> None:
  """The env section's own rules (the gait clock's reward is checked with the reward section)."""
  check_positive("env.control_hz", env.control_hz)
  check_positive("env.episode_seconds", env.episode_seconds)
  check_positive("env.action_clip", env.action_clip)
  if env.physics_timestep < 0 or env.physics_timestep > 0.02:
    fail("env.physics_timestep", env.physics_timestep,
         "it must be 0 (the robot's MJCF timestep) or in (0, 0.02] s")
  if env.physics_timestep:
    substeps(env, env.physics_timestep)
    check_contact_timeconst(env, env.physics_timestep)
  if not isinstance(env.solver_iterations, int) or not 0 <= env.solver_iterations <= 100:
    fail("env.solver_iterations", env.solver_iterations,
         "it must be 0 (the robot file's) or a whole number of Newton iterations in [1, 100]")
  check_positive("env.fall_height", env.fall_height)
  if not 0 < env.fall_tilt_degrees <= 180:
    fail("env.fall_tilt_degrees", env.fall_tilt_degrees, "it must be in (0, 180]")
  for name in (
      "init_joint_noise", "init_velocity_noise", "obs_noise_scale", "noise_lin_vel",
      "noise_gyro", "noise_gravity", "noise_joint_pos", "noise_joint_vel", "joint_limit_margin",
  ):
    check_nonnegative(f"env.{name}", getattr(env, name))
  if env.gait_hz < 0 or env.gait_hz > env.control_hz / 4:
    fail("env.gait_hz", env.gait_hz,
         f"it must be 0 (no clock) or in (0, control_hz / 4 = {env.control_hz / 4:g}]")


def check_contact_timeconst(env: EnvConfig, timestep: float) -> None:
  """Refuses a contact time constant MuJoCo would not step with as written.

  Args:
    env: the env section.
    timestep: the physics timestep, s (`env.physics_timestep`, or the robot's MJCF value).

  Raises:
    ValueError: unless `env.contact_timeconst` is 0 or in [2 * timestep, 0.1] s (MuJoCo raises
      a time constant below two physics steps to two steps unless told not to).
  """
  value = env.contact_timeconst
  if value != 0 and not 2 * timestep <= value <= 0.1:
    fail("env.contact_timeconst", value,
         f"it must be 0 (the robot file's) or in [2 x the physics timestep = {2 * timestep:g}, "
         "0.1] s")


def substeps(env: EnvConfig, timestep: float) -> int:
  """Physics steps per control step, checked to be a whole number.

  Args:
    env: the env section.
    timestep: the physics timestep, s (`env.physics_timestep`, or the robot's MJCF value).

  Raises:
    ValueError: when 1 / control_hz is not a whole multiple of the timestep.
  """
  ratio = 1.0 / (env.control_hz * timestep)
  n = round(ratio)
  if n < 1 or abs(ratio - n) > 1e-6:
    fail(
        "env.control_hz",
        env.control_hz,
        f"1/control_hz must be a whole multiple of the physics timestep {timestep} s "
        f"(e.g. control_hz={1.0 / (timestep * max(n, 1)):g})",
    )
  return n
