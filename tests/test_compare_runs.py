"""Tests for experiments/compare_runs.py: the held-out stratum it draws and quotes, and its
refusal of a stratum a run never evaluated. On hand-written ledgers (no training)."""

from __future__ import annotations

import json
import pathlib

from absl import app
from absl.testing import absltest

import commands
import pictures

ROOT = pathlib.Path(__file__).resolve().parents[1]
compare_runs = commands.load_script(ROOT / "experiments" / "compare_runs.py")


def _stratum(fall_rate: float, lin_vel_error: float) -> dict:
  return {"num_envs": 16, "success_rate": 1.0 - fall_rate, "fall_rate": fall_rate,
          "lin_vel_error": lin_vel_error, "yaw_rate_error": 0.1}


def _write_run(folder: pathlib.Path, evals: list[tuple[int, float, dict]]) -> pathlib.Path:
  """A run folder whose ledger holds three updates and the evaluations
  (env steps, wall seconds, strata)."""
  folder.mkdir(parents=True)
  records = [{"kind": "update", "update": u, "env_steps": 1000 * u, "perf/wall_seconds": 60.0 * u,
              "tracking/lin_vel_error": 0.5 / u, "contact/air_time_mean": 0.1 * u}
             for u in (1, 2, 3)]
  records += [{"kind": "eval", "update": steps // 1000, "env_steps": steps, "wall_seconds": seconds,
               "panel_hash": "0" * 64, "strata": strata} for steps, seconds, strata in evals]
  (folder / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  return folder


class CompareRunsTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    root = pathlib.Path(self.create_tempdir().full_path)
    self.out = root / "figure.png"
    self.scan = _write_run(root / "scan", [
        (2000, 120.0, {"flat": _stratum(0.0, 0.2), "stairs_up_10cm": _stratum(0.5, 0.4)}),
        (3000, 180.0, {"flat": _stratum(0.0, 0.1), "stairs_up_10cm": _stratum(0.0625, 0.3)})])
    self.blind = _write_run(root / "blind", [
        (3000, 150.0, {"flat": _stratum(0.0, 0.15), "stairs_up_10cm": _stratum(0.25, 0.35)})])
    self.flat_only = _write_run(root / "flat_only", [(3000, 150.0, {"flat": _stratum(0.0, 0.1)})])

  def test_the_chosen_stratum_is_quoted_from_each_ledger(self):
    ran = commands.run_main(compare_runs.main, f"--out={self.out}", "--stratum=stairs_up_10cm",
                            f"scan={self.scan}", f"blind={self.blind}")
    self.assertEqual(ran.status, 0, ran.err)
    runs = json.loads(ran.out)["runs"]
    # (env steps, minutes, xy error, fall rate) of each evaluation, as written above.
    self.assertEqual(runs["scan"]["stairs_up_10cm"], [[2000, 2.0, 0.4, 0.5], [3000, 3.0, 0.3, 0.0625]])
    self.assertEqual(runs["blind"]["stairs_up_10cm"], [[3000, 2.5, 0.35, 0.25]])
    self.assertEqual((runs["scan"]["env_steps"], runs["scan"]["minutes"]), (3000, 3.0))
    pictures.assert_png(self, self.out)

  def test_the_default_stratum_is_flat(self):
    ran = commands.run_main(compare_runs.main, f"--out={self.out}", f"blind={self.blind}")
    self.assertEqual(ran.status, 0, ran.err)
    self.assertEqual(json.loads(ran.out)["runs"]["blind"]["flat"], [[3000, 2.5, 0.15, 0.0]])

  def test_a_stratum_a_run_never_evaluated_is_refused_before_drawing(self):
    with self.assertRaisesRegex(
        app.UsageError, r"--stratum='stairs_up_10cm': no evaluation of flat_only=.*flat_only "
        r"holds it; its strata are flat$"):
      commands.run_main(compare_runs.main, f"--out={self.out}", "--stratum=stairs_up_10cm",
                        f"scan={self.scan}", f"flat_only={self.flat_only}")
    self.assertFalse(self.out.exists())


if __name__ == "__main__":
  absltest.main()
