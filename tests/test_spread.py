"""Tests for the statistics across training seeds (mjx_walk/run/spread.py): the interquartile mean,
the bootstrap intervals over seeds, a multi-seed record's strata and spread, the difference of two
runs, and the refusals. Every expected number is worked out by hand in the test (pure NumPy, no
JAX)."""

from __future__ import annotations

import math

from absl.testing import absltest
import numpy as np

from mjx_walk.run import spread


def seed_stratum(success: float, fall: float, length: float, lin: float, yaw: float,
                 ret: float, reset: dict[str, int], num_envs: int = 32,
                 touch: float = 0.0) -> dict:
  """One seed's table for one stratum, as the panel's `summarize` gives it."""
  return {"num_envs": num_envs, "success_rate": success, "fall_rate": fall,
          "episode_length": length, "lin_vel_error": lin, "yaw_rate_error": yaw, "return": ret,
          "body_contact_rate": touch, "reset": reset}


def two_seeds() -> list[dict]:
  """Two seeds on flat and slope. On flat both seeds succeed in 24 of their 32 episodes (0.75):
  the episodes differ within each seed, the seeds agree. Seed 0 falls 4 times, seed 1 twice."""
  return [
      {"flat": seed_stratum(0.75, 0.125, 400.0, 0.1, 0.2, 10.0, {"fall": 4, "timeout": 28},
                            touch=0.25),
       "slope": seed_stratum(0.5, 0.25, 300.0, 0.5, 0.25, 4.0,
                             {"fall": 8, "timeout": 24, "joint_limit": 0})},
      {"flat": seed_stratum(0.75, 0.0625, 440.0, 0.3, 0.4, 14.0, {"timeout": 30, "fall": 2}),
       "slope": seed_stratum(0.25, 0.5, 200.0, 0.75, 0.5, 2.0,
                             {"fall": 12, "timeout": 16, "body_contact": 4})},
  ]


class IqmTest(absltest.TestCase):

  def test_drops_a_quarter_from_each_end(self):
    # n = 8: int(0.25 * 8) = 2 from each end of 1..7, 100 leaves 3, 4, 5, 6: mean 4.5. The 100
    # that would pull the plain mean to 16 is dropped; the order of the values does not matter.
    self.assertEqual(spread.iqm([1, 2, 3, 4, 5, 6, 7, 100]), 4.5)
    self.assertEqual(spread.iqm([100, 7, 1, 6, 2, 5, 3, 4]), 4.5)
    # n = 5: int(1.25) = 1 from each end of 1, 2, 3, 4, 50 leaves 2, 3, 4: mean 3.
    self.assertEqual(spread.iqm([50, 1, 2, 3, 4]), 3.0)

  def test_three_or_fewer_values_give_the_plain_mean(self):
    # int(0.25 * 3) = 0: nothing is dropped.
    self.assertAlmostEqual(spread.iqm([1.0, 2.0, 10.0]), 13.0 / 3.0)
    self.assertEqual(spread.iqm([0.5, 1.0]), 0.75)
    self.assertEqual(spread.iqm([7.0]), 7.0)
    self.assertIsInstance(spread.iqm([7.0]), float)

  def test_along_an_axis_one_row_at_a_time(self):
    rows = np.array([[1, 2, 3, 4, 5, 6, 7, 100], [8, 8, 0, 0, 8, 8, 0, 0]], dtype=float)
    # Row 2 sorted: 0, 0, 0, 0, 8, 8, 8, 8; the middle four 0, 0, 8, 8: mean 4.
    np.testing.assert_array_equal(spread.iqm(rows, axis=1), [4.5, 4.0])

  def test_refuses_no_values(self):
    with self.assertRaisesRegex(ValueError, "iqm of no values"):
      spread.iqm([])


class BootstrapTest(absltest.TestCase):

  def test_the_interval_of_a_mean_worked_out_by_hand(self):
    # Values 0, 0, 1: 27 equally likely resamples of three, whose means are 0 (8/27 = 29.6%),
    # 1/3 (12/27), 2/3 (6/27 = 22.2%) and 1 (1/27 = 3.7%). The 2.5% quantile falls inside the
    # 29.6% at 0 and the 97.5% quantile inside the 3.7% at 1, so the 95% interval is [0, 1]. The
    # 80% interval runs from the 10% quantile (at 0) to the 90% quantile: 8 + 12 = 20 of the 27
    # (74.1%) lie below 2/3 and 26 of them (96.3%) at or below it, so it is 2/3. Both margins are
    # many times the sampling error of 10,000 resamples (0.2% at 3.7%), so every seed agrees.
    for seed in range(5):
      self.assertEqual(spread.bootstrap_ci([0.0, 0.0, 1.0], seed=seed), (0.0, 1.0))
      low, high = spread.bootstrap_ci([0.0, 0.0, 1.0], confidence=0.8, seed=seed)
      self.assertEqual(low, 0.0)
      self.assertAlmostEqual(high, 2.0 / 3.0, places=12)

  def test_the_statistic_is_taken_of_each_resample(self):
    # The max of a resample of 0, 0, 1 is 0 only when all three are 0 (8/27 = 29.6%), so the
    # 80% interval of the max is [0, 1], where that of the mean ends at 2/3.
    self.assertEqual(spread.bootstrap_ci([0.0, 0.0, 1.0], statistic=np.max, confidence=0.8),
                     (0.0, 1.0))

  def test_one_value_or_equal_values_give_a_point(self):
    self.assertEqual(spread.bootstrap_ci([0.3]), (0.3, 0.3))
    self.assertEqual(spread.bootstrap_ci([0.75, 0.75, 0.75, 0.75]), (0.75, 0.75))

  def test_the_same_seed_gives_the_same_interval(self):
    values = [0.61, 0.72, 0.55, 0.9, 0.83]
    self.assertEqual(spread.bootstrap_ci(values, seed=3), spread.bootstrap_ci(values, seed=3))
    low, high = spread.bootstrap_ci(values)
    self.assertTrue(0.55 <= low < np.mean(values) < high <= 0.9, (low, high))

  def test_refuses_a_non_finite_value_naming_it(self):
    with self.assertRaisesRegex(ValueError, r"must be finite; got seed 1: nan"):
      spread.bootstrap_ci([0.5, math.nan, 0.25])
    with self.assertRaisesRegex(ValueError, r"confidence must be in \(0, 1\); got 95"):
      spread.bootstrap_ci([0.5, 0.25], confidence=95)


class SummaryTest(absltest.TestCase):

  def test_mean_iqm_and_interval(self):
    # 0.5, 0.75, 1: mean and IQM 0.75 (three values: nothing dropped). A resample's mean is 0.5
    # only when it is 0.5 three times (1/27 = 3.7%, more than 2.5%), and 1 likewise: the 95%
    # interval is [0.5, 1].
    found = spread.summary([0.5, 0.75, 1.0])
    self.assertEqual(found, {"mean": 0.75, "iqm": 0.75, "ci_low": 0.5, "ci_high": 1.0})
    self.assertTrue(all(type(value) is float for value in found.values()), found)

  def test_refuses_non_finite_values_naming_them(self):
    with self.assertRaisesRegex(ValueError, r"seed 0: inf, seed 2: nan \(leave a diverged"):
      spread.summary([math.inf, 0.5, math.nan])
    with self.assertRaisesRegex(ValueError, "no seeds"):
      spread.summary([])


class AcrossSeedsTest(absltest.TestCase):

  def test_a_figure_some_seed_lacks_is_left_out(self):
    # Records written before the panel counted body contacts have no body_contact_rate.
    seeds = two_seeds()
    del seeds[1]["flat"]["body_contact_rate"]
    strata, _ = spread.across_seeds(seeds)
    self.assertNotIn("body_contact_rate", strata["flat"])
    self.assertEqual(strata["slope"]["body_contact_rate"], 0.0)
    self.assertEqual(strata["flat"]["return"], 12.0)

  def test_means_sums_and_spread_against_hand_sums(self):
    strata, spreads = spread.across_seeds(two_seeds())
    self.assertEqual(list(strata), ["flat", "slope"])
    flat, slope = strata["flat"], strata["slope"]
    self.assertEqual(flat["num_envs"], 32)  # one seed's envs, not 64
    self.assertEqual(flat["success_rate"], 0.75)
    self.assertEqual(flat["fall_rate"], 0.09375)  # (0.125 + 0.0625) / 2
    self.assertEqual(flat["episode_length"], 420.0)  # (400 + 440) / 2
    self.assertAlmostEqual(flat["lin_vel_error"], 0.2)  # (0.1 + 0.3) / 2
    self.assertAlmostEqual(flat["yaw_rate_error"], 0.3)  # (0.2 + 0.4) / 2
    self.assertEqual(flat["return"], 12.0)  # (10 + 14) / 2
    self.assertEqual(flat["body_contact_rate"], 0.125)  # (0.25 + 0) / 2
    self.assertEqual(flat["reset"], {"fall": 6, "timeout": 58})  # 4 + 2, 28 + 30
    self.assertEqual(slope["success_rate"], 0.375)  # (0.5 + 0.25) / 2
    self.assertEqual(slope["fall_rate"], 0.375)
    self.assertEqual(slope["reset"], {"fall": 20, "timeout": 40, "joint_limit": 0,
                                      "body_contact": 4})
    self.assertEqual(list(spreads), ["flat", "slope"])
    self.assertEqual(set(spreads["flat"]), set(spread.METRICS))
    # Two seeds: a resample is both of one seed with probability 1/4 each, more than 2.5%, so
    # the 95% interval runs from the lower seed's value to the higher's.
    self.assertEqual(spreads["flat"]["fall_rate"],
                     {"mean": 0.09375, "iqm": 0.09375, "ci_low": 0.0625, "ci_high": 0.125})
    self.assertEqual(spreads["slope"]["success_rate"],
                     {"mean": 0.375, "iqm": 0.375, "ci_low": 0.25, "ci_high": 0.5})
    self.assertEqual(spreads["slope"]["lin_vel_error"],
                     {"mean": 0.625, "iqm": 0.625, "ci_low": 0.5, "ci_high": 0.75})

  def test_the_interval_is_over_seeds_not_envs(self):
    # On flat each seed's 32 episodes vary (24 succeed, 8 do not): an interval over envs would
    # have width. Over seeds there is one value per seed, both 0.75, so it is a point.
    _, spreads = spread.across_seeds(two_seeds())
    self.assertEqual(spreads["flat"]["success_rate"],
                     {"mean": 0.75, "iqm": 0.75, "ci_low": 0.75, "ci_high": 0.75})

  def test_refuses_an_empty_list(self):
    with self.assertRaisesRegex(ValueError, "at least one seed's strata; got an empty list"):
      spread.across_seeds([])

  def test_refuses_seeds_whose_strata_differ_naming_them(self):
    seeds = two_seeds()
    seeds[1]["stairs"] = seeds[1].pop("slope")
    with self.assertRaisesRegex(ValueError, r"seed 1's strata differ from seed 0's: missing "
                                r"\['slope'\], extra \['stairs'\]"):
      spread.across_seeds(seeds)

  def test_refuses_unequal_num_envs_naming_the_stratum(self):
    seeds = two_seeds()
    seeds[1]["slope"]["num_envs"] = 16
    with self.assertRaisesRegex(ValueError, r"stratum 'slope': the seeds' num_envs differ "
                                r"\(\[32, 16\]\)"):
      spread.across_seeds(seeds)

  def test_refuses_a_non_finite_figure_naming_the_stratum_and_seed(self):
    seeds = two_seeds()
    seeds[1]["flat"]["fall_rate"] = math.nan
    with self.assertRaisesRegex(ValueError, r"stratum 'flat', fall_rate: .*seed 1: nan"):
      spread.across_seeds(seeds)


class DifferenceTest(absltest.TestCase):

  def test_overlapping_groups_are_within_spread(self):
    # Each run's mean of two resampled values is 0 (1/4), 0.5 (1/2) or 1 (1/4); b - a is -1 with
    # probability 1/16 = 6.25% and 1 likewise, both more than 2.5%: the interval is [-1, 1].
    self.assertEqual(spread.difference([0.0, 1.0], [0.0, 1.0]),
                     {"a_mean": 0.5, "b_mean": 0.5, "diff": 0.0, "ci_low": -1.0, "ci_high": 1.0,
                      "within_spread": True})

  def test_clearly_separated_groups_are_not(self):
    # Every resampled mean of a lies in [0, 0.1] and of b in [0.9, 1]: b - a in [0.8, 1].
    found = spread.difference([0.0, 0.05, 0.1], [0.9, 0.95, 1.0])
    self.assertAlmostEqual(found["diff"], 0.9)
    self.assertTrue(0.8 <= found["ci_low"] < 0.9 < found["ci_high"] <= 1.0, found)
    self.assertFalse(found["within_spread"])
    found = spread.difference([0.9, 0.95, 1.0], [0.0, 0.05, 0.1])
    self.assertTrue(-1.0 <= found["ci_low"] < -0.9 < found["ci_high"] <= -0.8, found)
    self.assertFalse(found["within_spread"])

  def test_groups_of_different_counts_are_resampled_each_on_their_own(self):
    # b's three equal values always resample to 0.5; a's mean is 0.25, 0.5 or 0.75 with
    # probabilities 1/4, 1/2, 1/4, so b - a is 0.25, 0 or -0.25 and the interval [-0.25, 0.25].
    self.assertEqual(spread.difference([0.25, 0.75], [0.5, 0.5, 0.5]),
                     {"a_mean": 0.5, "b_mean": 0.5, "diff": 0.0, "ci_low": -0.25,
                      "ci_high": 0.25, "within_spread": True})

  def test_equal_values_over_different_counts_differ_by_nothing(self):
    # The mean of three 0.1s is 0.10000000000000002 in floating point, of two 0.1: rounding.
    found = spread.difference([0.1, 0.1, 0.1], [0.1, 0.1])
    self.assertEqual((found["diff"], found["ci_low"], found["ci_high"]), (0.0, 0.0, 0.0))
    self.assertTrue(found["within_spread"])

  def test_refuses_an_empty_group_or_a_non_finite_value(self):
    with self.assertRaisesRegex(ValueError, "run a's values: no seeds"):
      spread.difference([], [0.5])
    with self.assertRaisesRegex(ValueError, "run b's values must be finite; got seed 1: nan"):
      spread.difference([0.5], [0.5, math.nan])


def test_the_reported_figures():
  assert spread.METRICS == ("success_rate", "fall_rate", "lin_vel_error", "yaw_rate_error")


if __name__ == "__main__":
  absltest.main()
