"""Tests for mjx_walk.analysis.flags: the plain-words warnings drawn from the update records."""

from absl.testing import absltest

from mjx_walk import config as config_lib
from mjx_walk.analysis import flags as flags_lib


def _update(update: int, **values) -> dict:
  """A healthy update record (plenty of events, no early ends, no burst), with `values` set."""
  record = {"kind": "update", "update": update, "episode/count": 10.0, "audit/early_ends": 0.0,
            "contact/slips": 900.0, "contact/stumbles": 500.0, "contact/touchdowns": 5000.0,
            "contact/liftoffs": 5000.0, "reward_share/tracking_lin_vel": 0.6,
            "reward_share/feet_air_time": 0.1, "reward_share/termination": 0.3,
            "tracking/lin_vel_error": 0.5 - 0.01 * update, "sync/max_reset_share": 0.02,
            "sync/mean_reset_share": 0.01, "sync/min_effective_families": 120.0}
  record.update(values)
  return record


class FlagsTest(absltest.TestCase):

  def test_healthy_run_has_no_flags(self):
    records = [{"kind": "recipe"}] + [_update(u) for u in range(1, 9)] + [{"kind": "eval"}]
    self.assertEqual(flags_lib.flags(records, config_lib.default()), [])
    self.assertEqual(flags_lib.flags([], config_lib.default()), [])

  def test_sentences(self):
    cfg = config_lib.default()  # min_event_count 200, early_end_steps 10, dominant_share 0.5
    records = [_update(u) for u in range(1, 9)]  # window: the last 8 // 4 = 2 updates (7, 8)
    records[6].update({"contact/slips": 30.0})
    records[7].update({"contact/slips": 44.0})  # mean over updates 7, 8: 37
    records[0].update({"audit/early_ends": 12.0, "episode/count": 20.0})  # 12 of 90 episodes
    records[1].update({"audit/early_ends": 0.0, "episode/count": 10.0})
    for r in records[6:]:  # feet air time dominates while the tracking error rises 0.40 -> 0.45
      r.update({"reward_share/feet_air_time": 0.64, "reward_share/tracking_lin_vel": 0.2})
    records[6]["tracking/lin_vel_error"], records[7]["tracking/lin_vel_error"] = 0.40, 0.45
    records[4].update({"sync/max_reset_share": 0.41, "sync/mean_reset_share": 0.02})
    records[5].update({"sync/max_reset_share": 0.2, "sync/mean_reset_share": 0.01})
    records[2]["sync/min_effective_families"] = 12.34  # of 128 training families
    self.assertEqual(flags_lib.flags(records, cfg), [
        "foot slips appeared only 37 times per batch, under the 200 threshold (mean over the "
        "last 2 updates)",
        "13% of episodes ended within 10 steps (early ends: 12 of 90 over the run; their traces "
        "are in traces/)",
        "reward term feet_air_time holds 64% of the absolute reward while tracking did not "
        "improve over the last 2 updates (xy velocity error 0.40 -> 0.45 m/s)",
        "41% of envs reset in the same step at update 5 (on average 2.0% per step; 2 updates "
        "had such a burst)",
        "a minibatch spanned only 12.3 effective families (inverse Simpson index) of 128 at "
        "update 3",
    ])

  def test_dominant_term_with_improving_tracking_is_fine(self):
    records = [_update(u, **{"reward_share/feet_air_time": 0.7}) for u in range(1, 9)]
    self.assertEqual(flags_lib.flags(records, config_lib.default()), [])  # error falls each update


if __name__ == "__main__":
  absltest.main()
