"""Tests for mjx_walk.sim.rewards: each term's value on hand-computed inputs, jitted and not."""

import dataclasses

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import rewards


class RewardTermsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_tracking(self):
    command = jnp.array([1.0, 0.5, 0.2])
    lin = self.variant(rewards.tracking_lin_vel, static_argnums=2)
    ang = self.variant(rewards.tracking_ang_vel, static_argnums=2)
    self.assertAlmostEqual(float(lin(command, jnp.array([1.0, 0.5, 9.0]), 0.25)), 1.0)
    # error^2 = 0.5^2 + 0.5^2 = 0.5 -> exp(-0.5 / 0.25) = exp(-2)
    self.assertAlmostEqual(float(lin(command, jnp.array([0.5, 0.0, 0.0]), 0.25)), np.exp(-2.0),
                           places=6)
    # yaw error 0.2 -> exp(-0.04 / 0.25)
    self.assertAlmostEqual(float(ang(command, jnp.array([3.0, 3.0, 0.0]), 0.25)), np.exp(-0.16),
                           places=6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_penalties(self):
    v = jnp.array([0.1, -0.2, 0.3])
    self.assertAlmostEqual(float(self.variant(rewards.lin_vel_z)(v)), 0.09, places=6)
    self.assertAlmostEqual(float(self.variant(rewards.ang_vel_xy)(v)), 0.05, places=6)
    self.assertAlmostEqual(float(self.variant(rewards.orientation)(v)), 0.05, places=6)
    self.assertAlmostEqual(float(self.variant(rewards.torques)(jnp.array([3.0, -4.0]))), 25.0)
    self.assertAlmostEqual(
        float(self.variant(rewards.action_rate)(jnp.array([1.0, 0.0]), jnp.array([0.0, 2.0]))),
        5.0)
    self.assertAlmostEqual(
        float(self.variant(rewards.pose)(jnp.array([0.1, 0.9]), jnp.array([0.0, 1.0]))), 0.02,
        places=6)
    self.assertEqual(float(self.variant(rewards.termination)(jnp.array(True))), 1.0)
    self.assertEqual(float(self.variant(rewards.termination)(jnp.array(False))), 0.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_feet_air_time_pays_at_touchdown_only_when_moving(self):
    air_time = jnp.array([0.3, 0.05, 0.4, 0.0])
    touchdown = jnp.array([True, True, False, False])
    fn = self.variant(rewards.feet_air_time, static_argnums=3)
    # (0.3 - 0.1) + (0.05 - 0.1): a short hop costs, a long swing pays; airborne feet wait.
    self.assertAlmostEqual(float(fn(air_time, touchdown, jnp.array([0.5, 0.0, 0.0]), 0.1)), 0.15,
                           places=6)
    # A standing command earns nothing, however the feet move.
    self.assertEqual(float(fn(air_time, touchdown, jnp.array([0.05, 0.05, 0.3]), 0.1)), 0.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_gait_phase_follows_the_trot_clock(self):
    fn = self.variant(rewards.gait_phase, static_argnums=4)
    offsets = jnp.array([0.0, 0.5, 0.5, 0.0])  # FR, FL, RR, RL: the diagonals half a cycle apart
    walk = jnp.array([0.5, 0.0, 0.0])
    h = 0.08
    # Phase 0.25: FR and RL are mid-swing (reference h), FL and RR mid-stance (reference 0).
    self.assertAlmostEqual(float(fn(jnp.array([h, 0.0, 0.0, h]), 0.25, offsets, walk, h)), 1.0,
                           places=6)
    # Feet left on the ground miss two apexes: exp(-2 h^2 / 0.01).
    self.assertAlmostEqual(float(fn(jnp.zeros(4), 0.25, offsets, walk, h)),
                           np.exp(-2 * h**2 / 0.01), places=6)
    # Phase 0.125: FR and RL a quarter into their swing, at h sin(pi / 4).
    up = h * np.sin(np.pi / 4)
    self.assertAlmostEqual(float(fn(jnp.array([up, 0.0, 0.0, up]), 0.125, offsets, walk, h)),
                           1.0, places=6)
    # Told to stand, every reference is 0 whatever the clock says; a turn in place still steps.
    stand = jnp.array([0.05, 0.0, 0.0])
    self.assertAlmostEqual(float(fn(jnp.zeros(4), 0.25, offsets, stand, h)), 1.0, places=6)
    self.assertAlmostEqual(float(fn(jnp.zeros(4), 0.25, offsets, jnp.array([0.0, 0.0, 0.3]), h)),
                           np.exp(-2 * h**2 / 0.01), places=6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_gait_phase_with_clearance_lets_a_swing_rise_above_its_reference(self):
    fn = self.variant(rewards.gait_phase, static_argnums=(4, 5))
    offsets = jnp.array([0.0, 0.5, 0.5, 0.0])
    walk = jnp.array([0.5, 0.0, 0.0])
    h = 0.08
    # Phase 0.25: FR and RL mid-swing. Lifted to 0.2 m (over a stair's edge) they cost nothing
    # with clearance, and 2 (0.2 - h)^2 without.
    high = jnp.array([0.2, 0.0, 0.0, 0.2])
    self.assertAlmostEqual(float(fn(high, 0.25, offsets, walk, h, True)), 1.0, places=6)
    self.assertAlmostEqual(float(fn(high, 0.25, offsets, walk, h, False)),
                           np.exp(-2 * (0.2 - h)**2 / 0.01), places=6)
    # A swing below its reference costs the same either way: FR at 0.03 m, RL at h.
    low = jnp.array([0.03, 0.0, 0.0, h])
    self.assertAlmostEqual(float(fn(low, 0.25, offsets, walk, h, True)),
                           np.exp(-(h - 0.03)**2 / 0.01), places=6)
    # A standing foot lifted (FL at 0.05 m) still costs, and so does any lifted foot of a robot
    # told to stand.
    stance_up = jnp.array([h, 0.05, 0.0, h])
    self.assertAlmostEqual(float(fn(stance_up, 0.25, offsets, walk, h, True)),
                           np.exp(-0.05**2 / 0.01), places=6)
    stand = jnp.array([0.05, 0.0, 0.0])
    self.assertAlmostEqual(float(fn(high, 0.25, offsets, stand, h, True)),
                           np.exp(-2 * 0.2**2 / 0.01), places=6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_feet_slip_counts_only_feet_on_the_ground(self):
    speed = jnp.array([0.2, 0.5, 1.0, 0.0])
    contact = jnp.array([True, True, False, True])
    self.assertAlmostEqual(float(self.variant(rewards.feet_slip)(speed, contact)), 0.29, places=6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_limb_contact_counts_the_touching_limbs(self):
    count = self.variant(rewards.limb_contact)(jnp.int32(3))
    chex.assert_type(count, jnp.float32)
    self.assertEqual(float(count), 3.0)


def _inputs(terminated: bool, force: float) -> rewards.StepInputs:
  """One step's inputs: planar velocity 0.5 m/s under a 1 m/s command, every actuator at
  `force`, everything else at rest."""
  zeros3, zeros12 = np.zeros(3, np.float32), np.zeros(12, np.float32)
  zeros4 = np.zeros(4, np.float32)
  return rewards.StepInputs(
      command=np.array([1.0, 0.0, 0.0], np.float32),
      lin_vel=np.array([0.5, 0.0, 0.0], np.float32),
      ang_vel=zeros3, gravity=np.array([0.0, 0.0, -1.0], np.float32),
      actuator_force=np.full(12, force, np.float32), action=zeros12, last_action=zeros12,
      joint_pos=zeros12, default_pose=zeros12, air_time=zeros4, first_contact=np.zeros(4, bool),
      foot_height=zeros4, gait_phase=np.float32(0.0), gait_offsets=zeros4, foot_speed=zeros4,
      stance=np.zeros(4, bool), limb_touches=np.int32(0), terminated=np.asarray(terminated))


class StepRewardTest(absltest.TestCase):
  """The table's sum against hand arithmetic: catches a term scaled twice or not by dt, the
  clip applied to the termination penalty (or not at all), a zero scale still reported, and a
  non-finite step that still pays."""

  # Every scale 0 but tracking_lin_vel 1, torques -1e-4 and termination -50; dt = 0.02 s.
  CFG = config_lib.RewardConfig(**{
      **{name: 0.0 for name in config_lib.RewardConfig().scales()},
      "tracking_lin_vel": 1.0, "torques": -1e-4, "termination": -50.0,
      "only_positive": True, "tracking_sigma": 0.25})
  DT = 0.02

  def setUp(self):
    super().setUp()
    self.reward = jax.jit(lambda x, finite: rewards.step_reward(self.CFG, self.DT, x, finite))

  def test_terms_and_total(self):
    reward, scaled = self.reward(_inputs(False, 10.0), True)
    self.assertEqual(sorted(scaled), ["termination", "torques", "tracking_lin_vel"])
    # tracking: exp(-0.5^2 / 0.25) = e^-1; torques: 12 * 10^2 = 1200 -> -1e-4 * 1200 = -0.12.
    self.assertAlmostEqual(float(scaled["tracking_lin_vel"]), 0.02 * np.exp(-1.0), places=7)
    self.assertAlmostEqual(float(scaled["torques"]), 0.02 * -0.12, places=7)
    self.assertEqual(float(scaled["termination"]), 0.0)
    self.assertAlmostEqual(float(reward), 0.02 * (np.exp(-1.0) - 0.12), places=7)

  def test_negative_shaping_is_clipped_but_the_termination_penalty_is_not(self):
    # 12 * 100^2 * 1e-4 = 12 outweighs the tracking term: the shaped sum clips to 0.
    reward, _ = self.reward(_inputs(False, 100.0), True)
    self.assertEqual(float(reward), 0.0)
    reward, scaled = self.reward(_inputs(True, 100.0), True)
    self.assertAlmostEqual(float(scaled["termination"]), 0.02 * -50.0, places=6)
    self.assertAlmostEqual(float(reward), -1.0, places=6)

  def test_a_non_finite_step_pays_nothing(self):
    reward, scaled = self.reward(_inputs(True, 10.0), False)
    self.assertEqual(float(reward), 0.0)
    self.assertEqual({k: float(v) for k, v in scaled.items()},
                     {"termination": 0.0, "torques": 0.0, "tracking_lin_vel": 0.0})

  def test_the_configs_swing_clearance_reaches_the_gait_term(self):
    # FR and RL mid-swing at 0.2 m under the 8 cm reference: free with the option, else
    # exp(-2 (0.2 - 0.08)^2 / 0.01).
    x = _inputs(False, 0.0)._replace(
        foot_height=np.array([0.2, 0.0, 0.0, 0.2], np.float32), gait_phase=np.float32(0.25),
        gait_offsets=np.array([0.0, 0.5, 0.5, 0.0], np.float32))
    for clearance, term in ((True, 1.0), (False, np.exp(-2 * 0.12**2 / 0.01))):
      cfg = dataclasses.replace(self.CFG, gait_phase=1.0, swing_height=0.08,
                                swing_clearance=clearance)
      _, scaled = rewards.step_reward(cfg, self.DT, x, jnp.asarray(True))
      self.assertAlmostEqual(float(scaled["gait_phase"]), self.DT * term, places=7)


if __name__ == "__main__":
  absltest.main()
