"""Tests for mjx_walk.analysis.plots: the audit plots from constructed ledger records, and plots
skipped with a note when the ledger holds nothing to draw. (The six plots of a real run are
checked in tests/test_report.py.)"""

import pathlib

from absl.testing import absltest

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


if __name__ == "__main__":
  absltest.main()
