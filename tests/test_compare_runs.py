"""Tests for experiments/compare_runs.py: the held-out stratum and the curriculum levels it draws
and quotes, and its refusals of a stratum a run never evaluated, a terrain type it never trained
on and env steps that are not positive numbers. On hand-written ledgers (no training)."""

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


def _write_run(folder: pathlib.Path, evals: list[tuple[int, float, dict]],
               levels: list[dict] | None = None) -> pathlib.Path:
  """A run folder whose ledger holds three updates, with `levels` their curriculum counts if
  given, and the evaluations (env steps, wall seconds, strata)."""
  folder.mkdir(parents=True)
  records = [{"kind": "update", "update": u, "env_steps": 1000 * u, "perf/wall_seconds": 60.0 * u,
              "tracking/lin_vel_error": 0.5 / u, "contact/air_time_mean": 0.1 * u}
             for u in (1, 2, 3)]
  for record, counts in zip(records, levels or []):
    record["terrain/levels"] = counts
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
    # Envs per level 0, 1, 2 after each update.
    self.terrain = _write_run(root / "terrain", [(3000, 180.0, {"flat": _stratum(0.0, 0.1)})], [
        {"stairs_up": [3, 1, 0], "rough": [0, 2, 2]},
        {"stairs_up": [1, 2, 1], "rough": [0, 0, 4]},
        {"stairs_up": [0, 1, 3], "rough": [0, 0, 4]}])

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

  def test_levels_are_quoted_at_the_nearest_update_and_the_last(self):
    ran = commands.run_main(compare_runs.main, f"--out={self.out}", "--levels=stairs_up",
                            "--at=900,2400,3999,5000", f"terrain={self.terrain}")
    self.assertEqual(ran.status, 0, ran.err)
    # By hand, the levels of the four stairs_up envs: 0 0 0 1 (mean 0.25, median 0), 0 1 1 2
    # (1, 1), 1 2 2 2 (1.75, 2). 900 and 2400 are nearest the first and second updates; 3999 is
    # within one update's env steps of the last, 5000 beyond it (null); then the last update.
    self.assertEqual(json.loads(ran.out)["runs"]["terrain"]["levels"], {"stairs_up": [
        [1000, 0.25, 0.0], [2000, 1.0, 1.0], [3000, 1.75, 2.0], None, [3000, 1.75, 2.0]]})
    pictures.assert_png(self, self.out)

  def test_a_terrain_type_a_run_lacks_is_refused_before_drawing(self):
    with self.assertRaisesRegex(
        app.UsageError, r"--levels=stairs_up,stairs_down: terrain=.*terrain has no curriculum of "
        r"stairs_down; its terrain types are rough, stairs_up$"):
      commands.run_main(compare_runs.main, f"--out={self.out}", "--levels=stairs_up,stairs_down",
                        f"terrain={self.terrain}")
    with self.assertRaisesRegex(
        app.UsageError, r"blind=.*blind has no curriculum of stairs_up; its terrain types are "
        r"none \(it is not a heightfield run\)$"):
      commands.run_main(compare_runs.main, f"--out={self.out}", "--levels=stairs_up",
                        f"terrain={self.terrain}", f"blind={self.blind}")
    with self.assertRaisesRegex(app.UsageError, r"--at='-5': give env steps as positive numbers"):
      commands.run_main(compare_runs.main, f"--out={self.out}", "--levels=stairs_up",
                        "--at=6e6,-5", f"terrain={self.terrain}")
    self.assertFalse(self.out.exists())


if __name__ == "__main__":
  absltest.main()
