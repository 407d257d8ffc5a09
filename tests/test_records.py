"""Tests for mjx_walk.learn.records: the host reduction of a chunk's stacked metrics into ledger
records (`summarize`, `update_records`)."""

from absl.testing import absltest
import numpy as np

from mjx_walk.learn import records as records_lib


class SummarizeTest(absltest.TestCase):

  def test_summarize_sparse_families_and_histograms(self):
    counts = np.zeros((2, 3, 5))  # K = 2 updates, F = 3 families, R = 5 reasons
    counts[0, 0, 0] = 2  # family 0: 2 falls in update 1 ...
    counts[1, 0, 0] = 1  # ... and 1 in update 2
    counts[1, 2, 1] = 4  # family 2: 4 timeouts
    counts[0, 2, 3] = 1  # family 2: 1 body contact
    height = np.zeros((2, 18))
    height[0, 6], height[1, 6], height[1, 0] = 2, 1, 1
    record = records_lib.summarize({"audit/resets_by_family": counts,
                                    "audit/fall_height_counts": height,
                                    "audit/fall_tilt_counts": np.ones((2, 18)),
                                    "episode/count": np.array([3.0, 5.0]),
                                    "episode/return_sum": np.zeros(2),
                                    "episode/length_sum": np.zeros(2)})
    self.assertEqual(record["audit/resets_by_family"],
                     {"0": {"fall": 3}, "2": {"timeout": 4, "body_contact": 1}})
    self.assertEqual(record["audit/fall_height_counts"], [1] + [0] * 5 + [3] + [0] * 11)
    self.assertEqual(record["audit/fall_tilt_counts"], [2] * 18)
    self.assertEqual(record["episode/count"], 8.0)  # the scalars are reduced beside them

  def test_pools_episodes_over_updates(self):
    metrics = {
        "episode/count": np.array([0.0, 2.0, 2.0]),
        "episode/return_sum": np.array([0.0, 3.0, 5.0]),
        "episode/length_sum": np.array([0.0, 10.0, 30.0]),
        "reset/fall": np.array([0.0, 1.0, 0.0]),
        "reset/timeout": np.array([0.0, 1.0, 2.0]),
        "reward/total": np.array([1.0, 2.0, 3.0]),
    }
    metrics.update({
        "contact/touchdowns": np.array([0.0, 2.0, 6.0]),
        "contact/air_time_sum": np.array([0.0, 0.4, 1.2]),
        "contact/air_time_p90": np.array([0.0, 0.3, 0.5]),
        "audit/early_ends": np.array([0.0, 1.0, 0.0]),
        "sync/max_reset_share": np.array([0.1, 0.5, 0.2]),
        "sync/min_effective_families": np.array([3.0, 2.5, 4.0]),
        "audit/resets_by_family": np.zeros((3, 2, 5)),
        "trace/valid": np.zeros((3, 2), bool),
    })
    record = records_lib.summarize(metrics)
    # Swings pooled over touchdowns: 1.6 s / 8; the 90th percentile averaged over the updates
    # that had touchdowns: (0.3 + 0.5) / 2.
    self.assertAlmostEqual(record["contact/air_time_mean"], 0.2)
    self.assertAlmostEqual(record["contact/air_time_p90"], 0.4)
    self.assertEqual(record["audit/early_end_share"], 0.25)  # 1 of 4 episode ends
    self.assertEqual(record["sync/max_reset_share"], 0.5)  # the worst update
    self.assertEqual(record["sync/min_effective_families"], 2.5)
    self.assertEqual(record["audit/resets_by_family"], {})  # only non-zero counts are listed
    self.assertFalse(any(key.startswith("trace/") for key in record))
    self.assertEqual(record["episode/return"], 2.0)
    self.assertEqual(record["episode/length"], 10.0)
    self.assertEqual(record["reset/fall"], 0.25)
    self.assertEqual(record["reset/timeout"], 0.75)
    self.assertEqual(record["reward/total"], 2.0)
    empty = records_lib.summarize({k: v[:1] for k, v in metrics.items()})
    self.assertTrue(np.isnan(empty["episode/return"]))
    self.assertTrue(np.isnan(empty["contact/air_time_mean"]))  # no touchdown, no swing
    self.assertTrue(np.isnan(empty["contact/air_time_p90"]))
    self.assertTrue(np.isnan(empty["audit/early_end_share"]))


class UpdateRecordsTest(absltest.TestCase):

  def test_one_record_per_update_each_reduced_on_its_own(self):
    metrics = {
        "episode/count": np.array([2.0, 0.0]),
        "episode/return_sum": np.array([3.0, 0.0]),
        "episode/length_sum": np.array([10.0, 0.0]),
        "reset/fall": np.array([1.0, 0.0]),
        "reward/total": np.array([1.0, 3.0]),
        "trace/valid": np.zeros((2, 2), bool),
    }
    records = records_lib.update_records(metrics, first_update=4, batch_size=96, sps=1234.5,
                                         wall_seconds=8.0, device_memory=None)
    self.assertEqual([r["update"] for r in records], [5, 6])
    self.assertEqual([r["env_steps"] for r in records], [480, 576])  # update x batch size
    for record in records:
      self.assertEqual(record["kind"], "update")
      self.assertEqual((record["perf/sps"], record["perf/wall_seconds"]), (1234.5, 8.0))
      self.assertIsNone(record["device/memory_bytes"])
      self.assertFalse(any(key.startswith("trace/") for key in record))
    # Update 5 alone: 2 episodes of mean return 1.5 and length 5, one fall of two ends.
    self.assertEqual(records[0]["episode/return"], 1.5)
    self.assertEqual(records[0]["episode/length"], 5.0)
    self.assertEqual(records[0]["reset/fall"], 0.5)
    self.assertEqual(records[0]["reward/total"], 1.0)
    # Update 6 ended no episode: NaN means, not the chunk's pooled values.
    self.assertTrue(np.isnan(records[1]["episode/return"]))
    self.assertEqual(records[1]["reset/fall"], 0.0)
    self.assertEqual(records[1]["reward/total"], 3.0)


if __name__ == "__main__":
  absltest.main()
