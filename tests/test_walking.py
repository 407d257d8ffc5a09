"""Tests for mjx_walk.evaluation.walking's figures of a terrain run, from a ledger written out
here (nothing trains): when the terrain targets were first met, the terrain curve, and the
stairs by riser height."""

from absl.testing import absltest

from mjx_walk import config as config_lib
from mjx_walk.evaluation import walking


def _stratum(fall: float, lin: float = 0.1, success: float = 1.0) -> dict[str, float]:
  return {"fall_rate": fall, "lin_vel_error": lin, "yaw_rate_error": 0.1,
          "success_rate": success}


def _records() -> list[dict]:
  """Two evaluations of a terrain run: at 6 min stairs fall 40% (targets missed), at 12 min
  20% with flat walking and rough within its targets (met); the riser strata only in the second,
  as a panel without them would give the first."""
  first = {"flat": _stratum(0.0), "rough": _stratum(0.0, 0.2), "stairs": _stratum(0.4, 0.3, 0.5),
           "obstacles": _stratum(0.1)}
  risers = {name: _stratum(0.05 * i, 0.2, 1.0 - 0.05 * i)
            for i, name in enumerate(config_lib.STAIR_STRATA)}
  second = {**first, "stairs": _stratum(0.2, 0.25, 0.7), "obstacles": _stratum(0.0), **risers}
  return [
      {"kind": "recipe"},
      {"kind": "update", "update": 1, "env_steps": 100, "perf/sps": 10.0,
       "terrain/mean_level": 0.5, "terrain/levels": {"rough": [1, 0]}},
      {"kind": "eval", "update": 1, "env_steps": 100, "wall_seconds": 360.0, "strata": first},
      {"kind": "update", "update": 2, "env_steps": 200, "perf/sps": 20.0,
       "terrain/mean_level": 1.25, "terrain/levels": {"rough": [0, 1]}},
      {"kind": "eval", "update": 2, "env_steps": 200, "wall_seconds": 720.0, "strata": second},
  ]


class TerrainFiguresTest(absltest.TestCase):

  def test_targets_curve_levels_and_stairs_by_riser(self):
    summary = walking.summarize(_records())
    self.assertEqual(summary["minutes_to_walk"], 6.0)
    self.assertEqual(summary["minutes_to_terrain_targets"], 12.0)
    self.assertEqual(summary["terrain_curve"],
                     [[6.0, 100, 0.0, 0.2, 0.4, 0.1, 0.5], [12.0, 200, 0.0, 0.2, 0.2, 0.0, 1.25]])
    self.assertEqual(summary["final_levels"], {"rough": [0, 1]})
    self.assertEqual(summary["stairs_by_riser"], {
        "stairs_up_5cm": [0.0, 1.0], "stairs_up_10cm": [0.05, 0.95],
        "stairs_up_15cm": [0.1, 0.9], "stairs_up_20cm": [0.15, 0.85],
        "stairs_down_5cm": [0.2, 0.8], "stairs_down_10cm": [0.25, 0.75],
        "stairs_down_15cm": [0.3, 0.7], "stairs_down_20cm": [0.35, 0.65]})

  def test_without_riser_strata_there_is_no_riser_table(self):
    records = _records()[:3]
    summary = walking.summarize(records)
    self.assertIsNone(summary["minutes_to_terrain_targets"])
    self.assertIsNone(summary["stairs_by_riser"])


if __name__ == "__main__":
  absltest.main()
