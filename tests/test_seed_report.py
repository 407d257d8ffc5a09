"""Tests for the report of a run of several training seeds (mjx_walk.analysis.report, plots and
flags): the Seeds section, the per-seed lines and 95% bands of the plots, the minutes to walk over
seeds and the audits seed by seed, on a copy of the shared 2-seed run (`runs.warm_seeds`) and on
hand-built ledgers; and a single-seed run's report, which has none of it. Nothing is compiled:
the reports are built from the run folders' files, without videos."""

import json
import pathlib
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

from mjx_walk.analysis import flags as flags_lib
from mjx_walk.analysis import plots as plots_lib
from mjx_walk.analysis import report
from mjx_walk.evaluation import walking
from mjx_walk.run import ledger
from mjx_walk.run import spread as spread_lib
from mjx_walk.sim import families

import configs
import runs

STRATA = ("flat", "rough")


def _seed_strata(seed: int, evaluation: int, walks: bool) -> dict:
  """One seed's strata of a hand-built evaluation: `flat` meets the walking criteria when
  `walks`, `rough` improves with each evaluation."""
  flat = ({"success_rate": 0.9 - 0.05 * seed, "fall_rate": 0.01 * seed,
           "lin_vel_error": 0.1 + 0.02 * seed, "yaw_rate_error": 0.1} if walks else
          {"success_rate": 0.05 * seed, "fall_rate": 0.4 + 0.1 * seed,
           "lin_vel_error": 0.6 + 0.05 * seed, "yaw_rate_error": 0.5})
  rough = {"success_rate": 0.2 + 0.1 * evaluation + 0.02 * seed,
           "fall_rate": 0.3 - 0.05 * evaluation + 0.03 * seed, "lin_vel_error": 0.5 + 0.01 * seed,
           "yaw_rate_error": 0.4}
  common = {"num_envs": 4, "episode_length": 100.0, "return": 1.0,
            "reset": {"fall": 1, "timeout": 3}}
  return {"flat": {**common, **flat}, "rough": {**common, **rough}}


def seed_ledger(walk_at: list[int | None], num_updates: int = 6,
                halted: tuple[int, int] | None = None) -> list[dict]:
  """A hand-built ledger of len(walk_at) training seeds, without a recipe: an update record per
  update (48 env steps and 30 s each) listing each seed's return, reward and reset shares, and
  an eval record after every second update (wall-clock 1, 2, 3... minutes) in which seed k's
  `flat` stratum walks from evaluation `walk_at[k]` on (0-based; None: never).

  Args:
    walk_at: per seed, the first evaluation at which it walks, or None.
    num_updates: how many updates.
    halted: (seed, update): that seed goes non-finite at that update and halts (its values are
      null from then on, and a `divergence` record with its `seed` follows that update's record).
  """
  num_seeds = len(walk_at)
  records = []
  for update in range(1, num_updates + 1):
    alive = [halted is None or s != halted[0] or update < halted[1] for s in range(num_seeds)]
    fall = [0.5 - 0.05 * update + 0.02 * s for s in range(num_seeds)]
    per_seed = {"episode/return": [0.1 * update + 0.01 * s for s in range(num_seeds)],
                "reward/total": [0.01 * update - 0.001 * s for s in range(num_seeds)],
                "reset/fall": fall, "reset/timeout": [1.0 - f for f in fall]}
    per_seed = {key: [v if alive[s] else None for s, v in enumerate(values)]
                for key, values in per_seed.items()}
    pooled = {key: float(np.mean([v for v in values if v is not None]))
              for key, values in per_seed.items()}
    halted_seeds = [s for s in range(num_seeds) if not alive[s]]
    records.append({"kind": "update", "update": update, "env_steps": 48 * update,
                    "perf/wall_seconds": 30.0 * update, "episode/count": 10.0, **pooled,
                    "seeds": per_seed, "halted_seeds": halted_seeds})
    if halted is not None and update == halted[1]:
      records.append({"kind": "divergence", "update": update, "seed": halted[0],
                      "nonfinite": ["loss/total", "grad_norm"], "last_checkpoint": None})
    if update % 2 == 0:
      evaluation = update // 2 - 1
      seeds = [_seed_strata(s, evaluation, walk_at[s] is not None and evaluation >= walk_at[s])
               for s in range(num_seeds)]
      strata, spread = spread_lib.across_seeds(seeds)
      records.append({"kind": "eval", "update": update, "env_steps": 48 * update,
                      "wall_seconds": 60.0 * (evaluation + 1), "panel_hash": "hand-built",
                      "num_seeds": num_seeds, "strata": strata, "seeds": seeds,
                      "spread": spread, "video_seed": 0,
                      "halted_seeds": halted_seeds})
  return records


def _seed_lines(ax, seed: int) -> list:
  return [line for line in ax.get_lines() if line.get_gid() == plots_lib.SEED_GID.format(seed)]


def _seed_gids(figure) -> set[str]:
  """The gids of every artist of `figure` drawn for a seed or an interval over seeds."""
  return {artist.get_gid() for ax in figure.axes for artist in (*ax.lines, *ax.collections)
          if artist.get_gid() is not None}


def _plot(built_plots, name: str) -> plots_lib.Plot:
  return next(plot for plot in built_plots if plot.name == name)


def _interval(summary: dict, spec: str) -> str:
  return f"[{format(summary['ci_low'], spec)}, {format(summary['ci_high'], spec)}]"


def _write_report(test: absltest.TestCase, records: list[dict]) -> tuple[str, list]:
  """Writes `records` as a run folder's ledger.jsonl, reads it back and writes its plots and
  report.md: (the report's text, the plots)."""
  run_dir = pathlib.Path(test.create_tempdir().full_path)
  (run_dir / ledger.FILENAME).write_text("".join(json.dumps(r) + "\n" for r in records))
  records = ledger.read_run(run_dir)
  cfg = configs.tiny()
  written = plots_lib.make_plots(run_dir, records, cfg)
  path = report.write_report(run_dir, records, cfg, families.make_manifest(cfg), written)
  return path.read_text(), written


class SharedSeedRunTest(absltest.TestCase):
  """The report of a copy of the shared 2-seed run (evaluated at update 4), built once."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.run_dir = pathlib.Path(tempfile.mkdtemp(prefix="seed_report_")) / "run"
    shutil.copytree(runs.warm_seeds(), cls.run_dir)
    cls.records = ledger.read_run(cls.run_dir)
    cls.built = report.build(cls.run_dir, log=lambda *_: None)
    cls.text = cls.built.report.read_text()
    cls.evaluation = ledger.latest(cls.records, "eval")
    cls.update = ledger.latest(cls.records, "update")

  def test_the_seeds_section_lists_each_seeds_final_figures_and_their_spread(self):
    self.assertEqual(self.evaluation["num_seeds"], 2)
    self.assertIn("## Seeds\n\n2 training seeds (run seeds 0, 1)", self.text)
    self.assertIn(f"### Held-out panel per seed, update {self.evaluation['update']}\n\n"
                  "| stratum | figure | seed 0 | seed 1 | mean | IQM | 95% CI |", self.text)
    for stratum in self.evaluation["strata"]:
      for label, key, spec in (("success", "success_rate", ".1%"), ("falls", "fall_rate", ".1%"),
                               ("xy error (m/s)", "lin_vel_error", ".3f"),
                               ("yaw error (rad/s)", "yaw_rate_error", ".3f")):
        seeds = [format(seed[stratum][key], spec) for seed in self.evaluation["seeds"]]
        summary = self.evaluation["spread"][stratum][key]
        self.assertIn(f"| {stratum} | {label} | {seeds[0]} | {seeds[1]} | "
                      f"{format(summary['mean'], spec)} | {format(summary['iqm'], spec)} | "
                      f"{_interval(summary, spec)} |", self.text)

  def test_the_last_updates_training_figures_per_seed(self):
    seeds = self.update["seeds"]
    self.assertIn(f"| return | {seeds['episode/return'][0]:.3f} | "
                  f"{seeds['episode/return'][1]:.3f} | {self.update['episode/return']:.3f} |",
                  self.text)
    self.assertIn(f"| reward per step | {seeds['reward/total'][0]:+.4f} | "
                  f"{seeds['reward/total'][1]:+.4f} | {self.update['reward/total']:+.4f} |",
                  self.text)

  def test_minutes_to_walk_and_the_videos_seed(self):
    minutes = walking.seed_minutes_to_walk(ledger.of_kind(self.records, "eval"))
    self.assertEqual(minutes, [None, None])  # a tiny run does not walk
    self.assertIn(report.format_minutes_to_walk(minutes), self.text)
    self.assertIn("None of the 2 seeds walked.", self.text)
    self.assertIn(f"policy of update {self.evaluation['update']}, seed "
                  f"{self.evaluation['video_seed']}, the best of the 2 seeds", self.text)

  def test_the_audits_seed_by_seed(self):
    self.assertIn("The flags are judged on the seeds pooled. Seed by seed (2 seeds):", self.text)
    updates = ledger.of_kind(self.records, "update")
    reasons = sorted(k for k in updates[0]["seeds"] if k.startswith("reset/"))
    self.assertIn("| seed | " + " | ".join(r.split("/")[1] for r in reasons) + " | updates |",
                  self.text)
    for seed in range(2):
      # Every update of the tiny run ends episodes (5-step episodes, 6-step rollouts).
      shares = [np.mean([u["seeds"][r][seed] for u in updates]) for r in reasons]
      self.assertIn(f"| {seed} | " + " | ".join(f"{s:.1%}" for s in shares)
                    + f" | {len(updates)} |", self.text)
    self.assertIn("No seed diverged: every seed trained to the end.", self.text)

  def test_the_plots_draw_one_thin_line_per_seed_and_the_intervals(self):
    curve = _plot(self.built.plots, "learning_curve")
    self.assertIn("2 training seeds", curve.caption)
    self.assertIn(curve.caption, self.text)
    axes = curve.figure.axes  # rows return, success, falls, xy error; columns steps, wall-clock
    strata = list(self.evaluation["strata"])
    updates = ledger.of_kind(self.records, "update")
    for seed in range(2):
      # The training return: one thin line over the updates, then one per stratum at the eval.
      lines = _seed_lines(axes[0], seed)
      self.assertLen(lines, 1 + len(strata))
      np.testing.assert_allclose(lines[0].get_ydata(),
                                 [u["seeds"]["episode/return"][seed] for u in updates])
      for row, key in ((2, "success_rate"), (4, "fall_rate"), (6, "lin_vel_error")):
        lines = _seed_lines(axes[row], seed)
        self.assertLen(lines, len(strata))
        for line, stratum in zip(lines, strata):
          self.assertEqual(line.get_ydata().tolist(),
                           [self.evaluation["seeds"][seed][stratum][key]])
    for ax in axes[2:8]:
      self.assertEqual(sorted(c.get_gid() for c in ax.collections if c.get_gid()),
                       sorted(plots_lib.BAND_GID.format(s) for s in strata))
    rewards = _plot(self.built.plots, "reward_terms").figure.axes[0]
    for seed in range(2):
      (line,) = _seed_lines(rewards, seed)
      np.testing.assert_allclose(line.get_ydata(),
                                 [u["seeds"]["reward/total"][seed] for u in updates])
    per_seed = _plot(self.built.plots, "reset_reasons").figure.axes[1]
    self.assertEqual(per_seed.get_legend_handles_labels()[1], ["timeout"])
    for seed in range(2):
      (line,) = _seed_lines(per_seed, seed)  # only timeouts end the tiny run's episodes
      np.testing.assert_allclose(line.get_ydata(),
                                 [u["seeds"]["reset/timeout"][seed] for u in updates])


class HandBuiltSeedLedgerTest(absltest.TestCase):
  """Reports of hand-built multi-seed ledgers, written as a run folder's ledger.jsonl."""

  def test_minutes_to_walk_over_three_seeds(self):
    # Seed 0 walks from the 2nd evaluation (2 minutes), seed 2 from the 3rd (3 minutes), seed 1
    # never: the median and range are over the two that walked.
    records = seed_ledger([1, None, 2])
    text, _ = _write_report(self, records)
    evals = ledger.of_kind(records, "eval")
    self.assertEqual([r["wall_seconds"] for r in evals], [60.0, 120.0, 180.0])
    self.assertEqual(walking.seed_minutes_to_walk(evals), [2.0, None, 3.0])
    self.assertIn("over 3 evaluations.\n\nMinutes to walk per seed: seed 0 2 min, seed 1 never, "
                  "seed 2 3 min. Median 2.5 min and range 2 to 3 min over the 2 seeds that "
                  "walked; 1 of 3 never walked.", text)
    self.assertIn("| flat | success | 90.0% | 5.0% | 80.0% |", text)  # the last evaluation
    self.assertIn("No seed diverged: every seed trained to the end.", text)

  def test_minutes_to_walk_in_words(self):
    self.assertEqual(report.format_minutes_to_walk([4.5, 1.25, 3.0, 2.0]),
                     "Minutes to walk per seed: seed 0 4.5 min, seed 1 1.25 min, seed 2 3 min, "
                     "seed 3 2 min. Median 2.5 min and range 1.25 to 4.5 min over the 4 seeds "
                     "that walked; every seed walked.")
    self.assertEqual(report.format_minutes_to_walk([None, 7.0]),
                     "Minutes to walk per seed: seed 0 never, seed 1 7 min. Median 7 min and "
                     "range 7 to 7 min over the seed that walked; 1 of 2 never walked.")
    self.assertEqual(report.format_minutes_to_walk([None, None]),
                     "Minutes to walk per seed: seed 0 never, seed 1 never. None of the 2 seeds "
                     "walked.")
    self.assertIn("undefined", report.format_minutes_to_walk(None))

  def test_the_band_is_the_bootstrap_interval_not_the_seeds_range(self):
    # Five seeds: the 95% interval of the mean lies strictly inside the seeds' range.
    records = seed_ledger([0, 1, None, 2, None])
    evals = ledger.of_kind(records, "eval")
    ax = plots_lib.plot_learning_curve(
        records, pathlib.Path(self.create_tempdir().full_path) / "curve.png").figure.axes[2]
    x = [r["env_steps"] for r in evals]
    for stratum in STRATA:
      low = [r["spread"][stratum]["success_rate"]["ci_low"] for r in evals]
      high = [r["spread"][stratum]["success_rate"]["ci_high"] for r in evals]
      values = np.array([[seed[stratum]["success_rate"] for seed in r["seeds"]] for r in evals])
      self.assertTrue(np.all((np.array(low) > values.min(axis=1) + 1e-6)
                             | (np.array(high) < values.max(axis=1) - 1e-6)))
      (band,) = [c for c in ax.collections if c.get_gid() == plots_lib.BAND_GID.format(stratum)]
      vertices = {tuple(np.round(v, 9)) for path in band.get_paths() for v in path.vertices}
      for point in (*zip(x, low), *zip(x, high)):
        self.assertIn(tuple(np.round(point, 9)), vertices)
      for seed in range(5):  # the seeds' lines are drawn stratum by stratum
        line = _seed_lines(ax, seed)[STRATA.index(stratum)]
        np.testing.assert_allclose(line.get_ydata(), values[:, seed])

  def test_a_halted_seed_is_named_with_the_seeds_that_trained_on(self):
    records = seed_ledger([0, 1, None, 2, None], halted=(2, 4))
    text, written = _write_report(self, records)
    self.assertIn("- seed 2 went non-finite at update 4 (loss/total, grad_norm) and halted there, "
                  "keeping its update 3 parameters; seeds 0, 1, 3 and 4 trained on to update 6",
                  text)
    self.assertIn("| stratum | figure | seed 0 | seed 1 | seed 2 (halted) | seed 3 | seed 4 |",
                  text)
    resets = flags_lib.seed_reset_shares(records)
    self.assertEqual(resets.updates, [6, 6, 3, 6, 6])
    # Seed 2's fall share over updates 1 to 3 alone: 0.5 - 0.05 * 2 + 0.02 * 2.
    self.assertAlmostEqual(resets.shares["fall"][2], 0.44)
    self.assertIn(f"| 2 | {0.44:.1%} | {0.56:.1%} | 3 |", text)
    # Its training line stops at update 3; the others run to update 6.
    axes = _plot(written, "learning_curve").figure.axes
    self.assertLen(_seed_lines(axes[0], 2)[0].get_xdata(), 3)
    self.assertLen(_seed_lines(axes[0], 0)[0].get_xdata(), 6)

  def test_every_seed_halted(self):
    records = seed_ledger([None, None], num_updates=2, halted=(1, 2))
    records.append({"kind": "divergence", "update": 2, "nonfinite": ["grad_norm"],
                    "last_checkpoint": None})
    self.assertEqual(flags_lib.seed_divergences(records, 2), [
        "seed 1 went non-finite at update 2 (loss/total, grad_norm) and halted there, keeping "
        "its update 1 parameters; seed 0 trained on to update 2",
        "every seed had halted by update 2 (non-finite grad_norm): the run stopped there; no "
        "checkpoint was saved before it"])


class SingleSeedReportTest(absltest.TestCase):
  """A single-seed run's report and plots have nothing of the seeds."""

  def test_no_seed_section_lines_or_bands(self):
    run_dir = runs.trained("single_seed_report_")
    built = report.build(run_dir, log=lambda *_: None)
    text = built.report.read_text()
    for absent in ("## Seeds", "seeds pooled", "Seed by seed", "Minutes to walk", ", seed "):
      self.assertNotIn(absent, text)
    self.assertEqual(report.seed_count(ledger.read_run(run_dir)), 1)
    for plot in built.plots:
      if plot.figure is not None:
        self.assertEqual(_seed_gids(plot.figure), set(), plot.name)
    self.assertIsNone(_plot(built.plots, "learning_curve").caption)


if __name__ == "__main__":
  absltest.main()
