"""Tests for mjx_walk.sim.rewards: each term's value on hand-computed inputs, jitted and not."""

from absl.testing import absltest
import chex
import jax.numpy as jnp
import numpy as np

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
  def test_feet_slip_counts_only_feet_on_the_ground(self):
    speed = jnp.array([0.2, 0.5, 1.0, 0.0])
    contact = jnp.array([True, True, False, True])
    self.assertAlmostEqual(float(self.variant(rewards.feet_slip)(speed, contact)), 0.29, places=6)


if __name__ == "__main__":
  absltest.main()
