"""Tests for mjx_walk.sim.endings: the termination rules on hand-made measurements, each reason
against the thresholds written out here, and the order in which they win."""

from absl.testing import absltest
from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import endings

R = endings.ResetReason
LEVEL = np.array([0.0, 0.0, 1.0], np.float32)  # the floor's normal in the frame of an upright trunk
LIMBS = np.array([False, True, True, True, True])  # the Go2's body geoms: the trunk, four thighs
TRUNK = ~LIMBS


_JUDGES = {}
"""One jitted `end_reason` per set of rule changes: four small compiles for the whole file,
instead of one per primitive per call."""


def _rules(**changes) -> endings.Rules:
  env = config_lib.EnvConfig(fall_height=0.18, fall_tilt_degrees=60.0, episode_seconds=1.0,
                             control_hz=50.0, joint_limit_margin=0.02, **changes)
  return endings.Rules.of(env, np.full(12, -1.0, np.float32), np.full(12, 1.0, np.float32),
                          LIMBS)


def _judge(**changes):
  key = tuple(sorted(changes.items()))
  if key not in _JUDGES:
    rules = _rules(**changes)
    _JUDGES[key] = jax.jit(lambda *args: endings.end_reason(rules, *args))
  return _JUDGES[key]


def _joints(index: int, angle: float) -> np.ndarray:
  """float32 [12]: every joint at 0 rad but one."""
  joints = np.zeros(12, np.float32)
  joints[index] = angle
  return joints


def _reason(changes=None, height=0.3, normal=LEVEL, joints=None, body=False, finite=True,
            step=0):
  """`body`: which body geoms touch, bool [5], or True for the trunk alone."""
  joints = np.zeros(12, np.float32) if joints is None else joints
  touches = TRUNK if body is True else np.zeros(5, bool) if body is False else body
  return int(_judge(**(changes or {}))(
      jnp.asarray(height, jnp.float32), jnp.asarray(normal, jnp.float32), joints,
      jnp.asarray(touches), jnp.asarray(finite), jnp.asarray(step, jnp.int32)))


class EndReasonTest(parameterized.TestCase):

  def test_the_vocabulary(self):
    # Ledger keys and trace files read these labels; codes are stored in checkpoints.
    self.assertEqual(endings.REASON_NAMES,
                     ("fall", "timeout", "joint_limit", "body_contact", "nonfinite"))
    self.assertEqual(endings.TERMINATION_NAMES,
                     ("fall", "joint_limit", "body_contact", "nonfinite"))
    self.assertEqual([int(r) for r in endings.ENDINGS], [1, 2, 3, 4, 5])

  def test_an_upright_trunk_above_the_fall_height_goes_on(self):
    self.assertEqual(_reason(), R.NONE)

  def test_fall_by_height_at_the_threshold(self):
    # Below 0.18 m falls; at it, not (strictly below).
    self.assertEqual(_reason(None, height=0.1799), R.FALL)
    self.assertEqual(_reason(None, height=0.18), R.NONE)

  def test_fall_by_tilt_in_degrees(self):
    # Tilted 59 and 61 degrees about x: the floor normal's z in the trunk frame is cos(angle).
    for degrees, want in ((59.0, R.NONE), (61.0, R.FALL)):
      angle = np.deg2rad(degrees)
      normal = np.array([0.0, np.sin(angle), np.cos(angle)], np.float32)
      self.assertEqual(_reason(None, normal=normal), want, degrees)

  def test_body_contact_ends_only_when_the_rule_is_on(self):
    self.assertEqual(_reason(None, body=True), R.BODY_CONTACT)
    self.assertEqual(_reason(dict(terminate_on_body_contact=False), body=True), R.NONE)
    self.assertEqual(_reason(dict(terminate_on_body_contact=False), body=LIMBS), R.NONE)

  def test_a_limbs_touch_ends_only_while_limb_contact_ends(self):
    rear_thigh = np.array([False, False, False, True, False])
    self.assertEqual(_reason(None, body=rear_thigh), R.BODY_CONTACT)
    self.assertEqual(_reason(None, body=LIMBS), R.BODY_CONTACT)
    off = dict(limb_contact_ends=False)
    self.assertEqual(_reason(off, body=rear_thigh), R.NONE)
    self.assertEqual(_reason(off, body=LIMBS), R.NONE)
    # The trunk's touch ends the episode either way, with the limbs' or alone.
    self.assertEqual(_reason(off, body=True), R.BODY_CONTACT)
    self.assertEqual(_reason(off, body=np.ones(5, bool)), R.BODY_CONTACT)
    np.testing.assert_array_equal(_rules(**off).ending_touches, TRUNK)
    np.testing.assert_array_equal(_rules().ending_touches, np.ones(5, bool))

  def test_joint_limit_inside_the_margin(self):
    rules = dict(terminate_on_joint_limit=True)
    # Limits +-1 rad, margin 0.02: 0.985 is within the margin of the upper limit, 0.975 not.
    self.assertEqual(_reason(rules, joints=_joints(3, 0.985)), R.JOINT_LIMIT)
    self.assertEqual(_reason(rules, joints=_joints(3, 0.975)), R.NONE)
    self.assertEqual(_reason(rules, joints=_joints(0, -0.985)), R.JOINT_LIMIT)
    self.assertEqual(_reason(None, joints=_joints(3, 0.999)), R.NONE)  # rule off

  def test_timeout_on_the_last_step_of_the_episode(self):
    # 1 s at 50 Hz is 50 steps: the step taken after 49 others is the last.
    self.assertEqual(_rules().episode_steps, 50)
    self.assertEqual(_reason(None, step=48), R.NONE)
    self.assertEqual(_reason(None, step=49), R.TIMEOUT)

  def test_first_matching_reason_wins(self):
    # Non-finite before fall before body contact before the joint limit before the time limit.
    rules = dict(terminate_on_joint_limit=True)
    every = dict(height=0.0, body=True, joints=np.full(12, 0.999, np.float32), step=49)
    self.assertEqual(_reason(rules, finite=False, **every), R.NONFINITE)
    self.assertEqual(_reason(rules, **every), R.FALL)
    every["height"] = 0.3
    self.assertEqual(_reason(rules, **every), R.BODY_CONTACT)
    every["body"] = False
    self.assertEqual(_reason(rules, **every), R.JOINT_LIMIT)
    every["joints"] = np.zeros(12, np.float32)
    self.assertEqual(_reason(rules, **every), R.TIMEOUT)

  def test_batched_under_vmap(self):
    # The trainer and the replay call it on [N] rows.
    heights = np.array([0.3, 0.1, 0.3], np.float32)
    steps = np.array([0, 0, 49], np.int32)
    rules = _rules()
    got = jax.jit(jax.vmap(lambda h, s: endings.end_reason(
        rules, h, LEVEL, np.zeros(12, np.float32), np.zeros(5, bool), np.ones((), bool), s)))(
            heights, steps)
    chex.assert_shape(got, (3,))
    np.testing.assert_array_equal(got, [R.NONE, R.FALL, R.TIMEOUT])


if __name__ == "__main__":
  absltest.main()
