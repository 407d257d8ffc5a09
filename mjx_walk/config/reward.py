"""The `reward` section: the scale of each reward term (`mjx_walk.sim.rewards`) and the kernels'
parameters."""

import dataclasses

from mjx_walk.config._checks import check_nonnegative, check_positive


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
  limb_contact: float = 0.0
  """Per limb touching the ground (the Go2's thighs: 0 to 4 each step); for terrain, where
  `env.limb_contact_ends` is off."""
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
  swing_clearance: bool = False
  """Whether the reference swing is only a least height: a swinging foot above it costs nothing
  in `gait_phase` (a foot may rise over a stair's edge), one below it costs as before."""

  def scales(self) -> dict[str, float]:
    """The term scales by name, without the kernel parameters."""
    kernel_params = ("only_positive", "tracking_sigma", "air_time_target", "swing_height",
                     "swing_clearance")
    return {
        f.name: getattr(self, f.name)
        for f in dataclasses.fields(self)
        if f.name not in kernel_params
    }


def validate(reward: RewardConfig) -> None:
  """The reward section's own rules (the gait term's clock is a cross-section rule)."""
  check_positive("reward.tracking_sigma", reward.tracking_sigma)
  check_nonnegative("reward.air_time_target", reward.air_time_target)
  check_positive("reward.swing_height", reward.swing_height)
