"""Tests for mjx_walk.analysis.plots: the audit plots from constructed ledger records, and plots
skipped with a note when the ledger holds nothing to draw, and the curriculum plot of a heightfield
run's terrain records. (The six plots of a real run are checked in tests/test_report.py.)"""

import pathlib

from absl.testing import absltest
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.analysis import plots
from mjx_walk.learn import audit

import pictures


class ConstructedRecordsTest(absltest.TestCase):
  """Plots from constructed ledger records with the audit's keys."""

  def test_contact_and_fall_plots(self):
    updates = []
    bins = (len(audit.FALL_HEIGHT_BINS) - 1, len(audit.FALL_TILT_BINS) - 1)
    for k in range(1, 6):
      record = {"kind": "update", "update": k, "env_steps": 100 * k,
                "contact/touchdowns": 400.0 + k, "contact/liftoffs": 390.0,
                "contact/slips": 37.0, "contact/stumbles": 0.0,
                "contact/air_time_mean": 0.2}
      record["audit/fall_height_counts"] = [1] * bins[0]
      record["audit/fall_tilt_counts"] = [2] * bins[1]
      updates.append(record)
    folder = pathlib.Path(self.create_tempdir().full_path)
    plot = plots.plot_contact_events(updates, folder / "contact.png", min_count=200)
    pictures.assert_png(self, plot.path)
    plot = plots.plot_fall_histograms(updates, folder / "falls.png", config_lib.default())
    pictures.assert_png(self, plot.path)

  def test_missing_figures_are_skipped_with_a_note(self):
    folder = pathlib.Path(self.create_tempdir().full_path)
    updates = [{"kind": "update", "update": 1, "env_steps": 10, "reward/total": 0.1}]
    plot = plots.plot_contact_events(updates, folder / "contact.png")
    self.assertIsNone(plot.path)
    self.assertIn("no contact/", plot.note)
    self.assertIsNone(plots.plot_latest_eval(updates, folder / "eval.png").path)
    self.assertFalse(list(folder.iterdir()))


def terrain_ledger() -> list[dict]:
  """Three update records of a heightfield run with 3 curriculum levels, and an eval record."""
  levels = [{"rough": [4, 2, 0], "stairs_up": [0, 3, 1]},
            {"rough": [1, 3, 2], "stairs_up": [0, 0, 4]},
            {"rough": [0, 0, 6], "stairs_up": [2, 2, 0], "obstacles": [0, 1, 0]}]
  records = [{"kind": "update", "update": k + 1, "env_steps": 48 * (k + 1),
              "reward/total": 0.1, "terrain/levels": counts, "terrain/mean_level": 1.0,
              "terrain/promotions": 2.0, "terrain/demotions": 1.0}
             for k, counts in enumerate(levels)]
  return records + [{"kind": "eval", "update": 3, "env_steps": 144, "strata": {}}]


class CurriculumTest(absltest.TestCase):
  """The curriculum plot from constructed terrain records."""

  def test_mean_levels_are_the_counts_weighted_levels(self):
    # Catches a mean over the levels instead of the envs, levels counted from 1, or types
    # mixed up between updates. By hand: rough (0*4 + 1*2 + 2*0) / 6 = 1/3, then
    # (0 + 3 + 4) / 6 = 7/6, then 12 / 6 = 2; stairs_up (3 + 2) / 4 = 5/4, then 8 / 4 = 2, then
    # 2 / 4 = 1/2; obstacles only in the last update: level 1.
    series = plots.curriculum_series(terrain_ledger())
    np.testing.assert_array_equal(series.env_steps, [48, 96, 144])
    self.assertEqual(list(series.mean_level), ["rough", "stairs_up", "obstacles"])
    np.testing.assert_allclose(series.mean_level["rough"], [1 / 3, 7 / 6, 2.0])
    np.testing.assert_allclose(series.mean_level["stairs_up"], [5 / 4, 2.0, 1 / 2])
    np.testing.assert_allclose(series.mean_level["obstacles"], [np.nan, np.nan, 1.0])
    # The median env's level: rough 0 0 0 0 1 1 -> 0, then 0 1 1 1 2 2 -> 1, then 2; stairs_up
    # 1 1 1 2 -> 1, then 2, then 0 0 1 1 -> 0.5 (the middle two's mean).
    np.testing.assert_array_equal(series.median_level["rough"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(series.median_level["stairs_up"], [1.0, 2.0, 0.5])
    np.testing.assert_array_equal(series.median_level["obstacles"], [np.nan, np.nan, 1.0])
    np.testing.assert_array_equal(series.wall_seconds, [np.nan] * 3)  # none in these records
    self.assertEqual({k: v.tolist() for k, v in series.final_counts.items()},
                     {"rough": [0, 0, 6], "stairs_up": [2, 2, 0], "obstacles": [0, 1, 0]})

  def test_the_plot_is_written_for_terrain_records_only(self):
    folder = pathlib.Path(self.create_tempdir().full_path)
    plot = plots.plot_curriculum(terrain_ledger(), folder / "curriculum.png")
    pictures.assert_png(self, plot.path)
    self.assertIn("mean curriculum level", plot.caption)
    written = plots.make_plots(folder, terrain_ledger())
    self.assertEqual(written[-1].name, "curriculum")
    pictures.assert_png(self, written[-1].path)
    # A run on the plane has no terrain records and no curriculum plot.
    plane = [{k: v for k, v in r.items() if not k.startswith("terrain/")}
             for r in terrain_ledger()]
    self.assertIsNone(plots.curriculum_series(plane))
    names = [p.name for p in plots.make_plots(folder / "plane", plane)]
    self.assertEqual(names, ["learning_curve", "latest_eval", "reward_terms", "reset_reasons",
                             "contact_events", "fall_histograms"])
    self.assertFalse((folder / "plane" / "plots" / "curriculum.png").exists())
    skipped = plots.plot_curriculum(plane, folder / "skipped.png")
    self.assertIsNone(skipped.path)
    self.assertIn("no terrain/levels", skipped.note)


if __name__ == "__main__":
  absltest.main()
