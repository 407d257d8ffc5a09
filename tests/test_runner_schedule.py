"""Tests for mjx_walk.runner.Schedule: what the host loop does after each chunk, against tables
written out by hand. Catches an evaluation, video, checkpoint or end that comes a chunk early or
late, or a stop that still evaluates."""

from absl.testing import absltest

from mjx_walk import runner

import configs

E, V, S, L = "evaluate", "videos", "save", "last"


def _due(due: runner.Due) -> set[str]:
  return {name for name in (E, V, S, L) if getattr(due, name)}


class ScheduleTest(absltest.TestCase):

  def test_every_chunks_table(self):
    # 10 chunks; the panel every 4, videos every 6, checkpoints every 3 chunks.
    cfg = configs.tiny(chunks=10, panel__every_chunks=4, report__video_every_chunks=6,
                       checkpoint__every_chunks=3)
    self.assertEqual(cfg.num_chunks, 10)
    schedule = runner.Schedule(cfg)
    expected = {
        1: set(), 2: set(), 3: {S}, 4: {E, S}, 5: set(), 6: {E, V, S}, 7: set(), 8: {E, S},
        9: {S}, 10: {E, V, S, L},
    }
    for done, wanted in expected.items():
      got = _due(schedule.after_chunk(done - 1, now=0.0, run_seconds=0.0, stop_requested=False))
      self.assertEqual(got, wanted, f"after chunk {done}")

  def test_panel_every_zero_evaluates_only_at_the_end(self):
    cfg = configs.tiny(chunks=3, panel__every_chunks=0, checkpoint__every_chunks=100)
    schedule = runner.Schedule(cfg)
    got = [_due(schedule.after_chunk(k, 0.0, 0.0, False)) for k in range(3)]
    self.assertEqual(got, [set(), set(), {E, V, S, L}])

  def test_wall_clock_budget_and_evaluations(self):
    cfg = configs.tiny(chunks=100, panel__every_chunks=0, checkpoint__every_chunks=100)
    schedule = runner.Schedule(cfg, wall_budget_seconds=50.0, eval_every_seconds=10.0,
                              last_evaluation=1000.0)
    # (now, seconds into the run) -> what is due; evaluations every 10 s of wall-clock, counted
    # from the last one, and the first chunk to end past 50 s of the run is the last.
    steps = [((1005.0, 5.0), set()), ((1010.0, 10.0), {E, S}), ((1015.0, 15.0), set()),
             ((1019.9, 19.9), set()), ((1020.0, 20.0), {E, S}), ((1049.0, 49.0), {E, S}),
             ((1050.0, 50.0), {E, V, S, L})]
    for k, ((now, run_seconds), wanted) in enumerate(steps):
      self.assertEqual(_due(schedule.after_chunk(k, now, run_seconds, False)), wanted,
                       f"at {now}")

  def test_a_stop_saves_and_evaluates_nothing(self):
    cfg = configs.tiny(chunks=10, panel__every_chunks=1, report__video_every_chunks=1)
    schedule = runner.Schedule(cfg)
    self.assertEqual(_due(schedule.after_chunk(3, 0.0, 0.0, stop_requested=True)), {S})
    self.assertEqual(_due(schedule.after_chunk(9, 0.0, 0.0, stop_requested=True)), {S})


if __name__ == "__main__":
  absltest.main()
