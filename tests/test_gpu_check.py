"""Tests for experiments/gpu_check.py, the prepared accelerator check, run whole on the CPU.

Every test runs the command in a subprocess, as it runs on a GPU machine: what it prints on
stdout (JSON lines) and stderr, its exit status, and what it writes are the point. One `--tiny`
run is shared by the tests of its lines: it takes every step of the real check (each env count's
training chunk and physics rollout, then a training run of the GPU recipe through
`mjx_walk.runner.run`), only smaller. Another run gets too small a budget and must skip every
stage, saying why, instead of overrunning it; a stage that takes far longer than predicted must
be stopped at the budget. Bad flags must be refused in one `error:` line naming the value,
before anything compiles or is written.
"""

import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

from absl.testing import absltest
import pytest

from mjx_walk import config as config_lib

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPO / "experiments" / "gpu_check.py"
TINY_COUNTS = [16, 32]
TINY_BUDGET_MINUTES = 30


def run_check(*args: str, code: str | None = None, timeout: float = 600
              ) -> tuple[subprocess.CompletedProcess, float]:
  """Runs `python experiments/gpu_check.py <args>`, importing this checkout's package (and, with
  `code`, the command as `gpu_check`).

  Args:
    *args: the command's flags.
    code: run this Python code (`python -c`) with the flags instead of the script.
    timeout: seconds before the test gives up on the process.

  Returns:
    The finished process (text stdout and stderr) and its wall-clock seconds.
  """
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [str(REPO), str(SCRIPT.parent)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
  program = [str(SCRIPT)] if code is None else ["-c", code]
  start = time.perf_counter()
  done = subprocess.run([sys.executable, *program, *args], capture_output=True, text=True,
                        timeout=timeout, cwd=REPO, env=env, check=False)
  return done, time.perf_counter() - start


def parse(stdout: str) -> list[dict]:
  """The JSON lines of stdout; fails on a line that is not one JSON object with a `kind`."""
  lines = [json.loads(text) for text in stdout.splitlines()]
  for line in lines:
    assert isinstance(line, dict) and "kind" in line, line
  return lines


@pytest.mark.slow
class TinyRunTest(absltest.TestCase):
  """One `--tiny` run: its lines, figures and files. Slow (`pytest -m slow`, which .ci/run runs):
  it compiles six programs, 189 s alone on a cold cache, and over 10 minutes beside the slow
  run's other workers; its budget is generous so that a busy machine does not make it skip the
  training run."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpu_check_tiny-"))
    cls.out_dir = cls.tmp / "out"
    # The check stops itself at its budget; the test waits that long and 5 minutes more (the
    # slow run's other workers share the two cores: on CI the first stage took 430 s, not 65).
    cls.done, cls.seconds = run_check("--tiny", f"--budget_minutes={TINY_BUDGET_MINUTES}",
                                      f"--out_dir={cls.out_dir}",
                                      timeout=(TINY_BUDGET_MINUTES + 5) * 60)
    cls.lines = parse(cls.done.stdout)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def of_kind(self, kind: str) -> list[dict]:
    return [line for line in self.lines if line["kind"] == kind]

  def test_it_runs_every_stage_in_order_and_succeeds(self):
    # Catches a stage that raised, one skipped although the budget holds it, a count measured
    # out of order, and a run that ends past its budget.
    self.assertEqual(self.done.returncode, 0, self.done.stderr[-3000:])
    self.assertEqual([line["kind"] for line in self.lines],
                     ["header", "bench", "bench", "train", "done"])
    done = self.lines[-1]
    self.assertEqual(done["ran"], ["bench 16 envs", "bench 32 envs", "train"])
    self.assertEqual(done["skipped"], [])
    self.assertEqual(done["errors"], [])
    self.assertLessEqual(done["seconds"], done["budget_s"])

  def test_every_line_states_the_full_float32_matmul_precision(self):
    # The default precision is set before anything compiles and read back from JAX's config.
    for line in self.lines:
      self.assertEqual(line["matmul_precision"], "highest", line["kind"])

  def test_the_header_names_the_stack_and_the_device(self):
    # Figures from a GPU are only comparable with the stack and device they came from.
    header = self.of_kind("header")[0]
    self.assertEqual(header["backend"], "cpu")
    self.assertEqual(header["device_kind"], "cpu")
    self.assertGreaterEqual(header["device_count"], 1)
    self.assertEqual(header["mujoco"], "3.17.0")
    # The installed jax, whichever line pyproject admits on this Python (0.10 on 3.11, 0.11.2 to
    # 0.12 on 3.12), read from its package metadata rather than from jax itself.
    self.assertEqual(header["jax"], importlib.metadata.version("jax"))
    self.assertEqual(header["num_envs"], TINY_COUNTS)
    self.assertTrue(header["tiny"])

  def test_each_env_count_has_positive_throughput_compile_time_and_memory(self):
    # Catches a figure that was never measured (zero or null), a count left out, and a chunk
    # that went non-finite while it was timed.
    benches = self.of_kind("bench")
    self.assertEqual([line["num_envs"] for line in benches], TINY_COUNTS)
    for line in benches:
      with self.subTest(num_envs=line["num_envs"]):
        for key in ("train_sps", "physics_sps", "train_over_physics", "compile_s",
                    "physics_compile_s", "bytes_per_env"):
          self.assertGreater(line[key], 0, key)
        # The CPU backend reports no memory statistics: null, not a made-up number.
        self.assertIsNone(line["device_peak_bytes"])
        self.assertEqual(line["nonfinite"], [])

  def test_the_training_line_has_the_final_table_of_every_stratum(self):
    # Catches a training run that never evaluated, a stratum missing from the table, and rates
    # that are not shares.
    train = self.of_kind("train")[0]
    self.assertEqual(train["config"], "experiments/recipes/go2_flat_gpu.py")
    self.assertEqual(sorted(train["final"]), sorted(config_lib.STRATA))
    for stratum, row in train["final"].items():
      with self.subTest(stratum=stratum):
        # Shares of the stratum's episodes, from its reset counts: every episode that did not
        # reach the time limit terminated, and only those that did can succeed.
        n, timeouts = row["num_envs"], row["reset"].get("timeout", 0)
        self.assertEqual(sum(row["reset"].values()), n)
        self.assertAlmostEqual(row["fall_rate"], 1.0 - timeouts / n)
        successes = row["success_rate"] * n
        self.assertAlmostEqual(successes, round(successes))
        self.assertLessEqual(round(successes), timeouts)
    self.assertGreater(train["env_steps"], 0)
    self.assertGreaterEqual(len(train["curve"]), 1)
    self.assertLessEqual(train["wall_budget_s"], 15.0)
    # A tiny policy trained for seconds does not walk; the field is there and null.
    self.assertIn("minutes_to_walk", train)
    self.assertEqual(train["walking"],
                     {"fall_rate": 0.05, "lin_vel_error": 0.25, "yaw_rate_error": 0.3})

  def test_it_writes_its_lines_the_run_and_its_log_under_out_dir(self):
    # Catches lines missing from the file a device machine sends back, and files outside
    # --out_dir or crowding the few that come back.
    self.assertEqual((self.out_dir / "gpu_check.jsonl").read_text(), self.done.stdout)
    run_dir = pathlib.Path(self.of_kind("train")[0]["run_dir"])
    self.assertEqual(run_dir, self.out_dir / "work" / "runs" / "go2_flat_gpu")
    self.assertEqual((self.out_dir / "ledger.jsonl").read_bytes(),
                     (run_dir / "ledger.jsonl").read_bytes())
    # Only these small files lie less than three folders down, where a device machine's $OUT
    # sends files back (at most 8); the run folder and the compilation cache lie deeper.
    shallow = sorted(str(p.relative_to(self.out_dir)) for p in self.out_dir.rglob("*")
                     if p.is_file() and len(p.relative_to(self.out_dir).parts) <= 3)
    self.assertEqual(shallow, ["gpu_check.jsonl", "ledger.jsonl", "train.log"])
    # The training run's own progress goes to its log, never between the JSON lines.
    self.assertIn("held-out panel, final policy", (self.out_dir / "train.log").read_text())


class BudgetTest(absltest.TestCase):

  def test_too_small_a_budget_skips_every_stage_and_says_why(self):
    # 15 s cannot hold a count's compile (guessed at 60 s) nor the training run's. Catches a
    # stage started without room for it (the run would overrun, or be killed without a word).
    # The precision given is the one every line states.
    out_dir = pathlib.Path(self.create_tempdir().full_path) / "out"
    done, seconds = run_check("--tiny", "--budget_minutes=0.25", "--matmul_precision=float32",
                              f"--out_dir={out_dir}")
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    lines = parse(done.stdout)
    self.assertEqual([line["kind"] for line in lines],
                     ["header", "skip", "skip", "skip", "done"])
    skips = lines[1:4]
    self.assertEqual([(s["stage"], s.get("num_envs")) for s in skips],
                     [("bench", 16), ("bench", 32), ("train", None)])
    for skip in skips:
      self.assertIn("s budget", skip["reason"])
      self.assertGreater(skip["predicted_s"], 0)
    self.assertEqual(lines[-1]["ran"], [])
    self.assertEqual({line["matmul_precision"] for line in lines}, {"float32"})
    self.assertLess(seconds, 15.0)
    self.assertFalse((out_dir / "work" / "runs").exists())


class DeadlineTest(absltest.TestCase):

  def test_a_stage_that_outruns_its_prediction_is_stopped_at_the_budget(self):
    # Guesses of 1 s let the first count start inside a 30 s budget that keeps nothing for
    # training; its 5000 timed rounds alone take minutes (34 ms a round at 16 envs here). The
    # guard ends the process at the budget, naming the stage. The budget leaves the start
    # (imports, the backend, the header) 30 s: with 12 s, a machine busy with the suite's other
    # workers once reached the budget before the header.
    code = textwrap.dedent("""
        import dataclasses
        from absl import app
        import gpu_check
        gpu_check.TINY = dataclasses.replace(
            gpu_check.TINY, compile_guess_s=1.0, timing_guess_s=0.0, finish_s=0.0)
        app.run(gpu_check.main)
        """)
    out_dir = pathlib.Path(self.create_tempdir().full_path) / "out"
    done, seconds = run_check(
        "--tiny", "--num_envs=16", "--repeats=5000", "--train_minutes=0", "--budget_minutes=0.5",
        f"--out_dir={out_dir}", code=code)
    self.assertEqual(done.returncode, 4, done.stderr[-3000:])
    lines = parse(done.stdout)
    self.assertEqual([line["kind"] for line in lines], ["header", "deadline"])
    self.assertEqual(lines[1]["stage"], "bench 16 envs")
    self.assertBetween(lines[1]["at_s"], 29.5, 31.0)
    self.assertLess(seconds, 33.0)
    self.assertEqual((out_dir / "gpu_check.jsonl").read_text(), done.stdout)


class FlagTest(absltest.TestCase):
  """Refused in one line naming the value, exit status 2, nothing compiled or written."""

  def assert_refused(self, flag: str, message_start: str):
    out_dir = pathlib.Path(self.create_tempdir().full_path) / "never"
    done, seconds = run_check("--tiny", flag, f"--out_dir={out_dir}")
    self.assertEqual(done.returncode, 2, done.stderr)
    self.assertEqual(done.stdout, "")
    self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
    self.assertTrue(done.stderr.startswith(message_start), done.stderr)
    self.assertFalse(out_dir.exists())
    # The imports alone take seconds; a compile would take tens of them.
    self.assertLess(seconds, 30.0)

  def test_env_counts_that_are_not_positive_integers(self):
    self.assert_refused("--num_envs=0,abc", "error: --num_envs=0,abc is invalid: 0 is not")
    self.assert_refused("--num_envs=16,abc",
                        "error: --num_envs=16,abc is invalid: 'abc' is not an integer")

  def test_an_env_count_the_recipe_cannot_split_into_its_families(self):
    self.assert_refused("--num_envs=10", "error: --num_envs=10: config.num_envs=10 is invalid")

  def test_a_flag_every_command_has_but_this_one_does_not_read(self):
    # Catches --run_dir accepted and ignored: the check writes only under --out_dir.
    self.assert_refused("--run_dir=runs/elsewhere",
                        "error: --run_dir is not read by gpu_check.py: it trains")

  def test_a_matmul_precision_jax_does_not_accept(self):
    self.assert_refused("--matmul_precision=fastest",
                        "error: --matmul_precision=fastest is invalid: JAX refuses it")

  def test_an_unknown_recipe(self):
    self.assert_refused("--recipe=stairs",
                        "error: --recipe=stairs is invalid: give one of flat, rough")

  def test_a_refusal_waits_for_no_heavy_import(self):
    # Catches JAX, MuJoCo, the trainer or the stages imported before the flags are checked: 5 s
    # of imports in every refused command (and in each refusal above).
    code = textwrap.dedent("""
        import sys
        from absl import app
        import gpu_check
        try:
          app.run(gpu_check.main, argv=["gpu_check.py", "--tiny", "--num_envs=10"])
        except SystemExit as stop:
          heavy = ("jax", "mujoco", "mjx_walk.runner", "gpu_check_stages")
          print(stop.code, [name for name in heavy if name in sys.modules])
        """)
    done, _ = run_check(code=code, timeout=120)
    self.assertEqual(done.stdout.splitlines()[-1], "2 []", done.stderr[-3000:])
    self.assertTrue(done.stderr.startswith("error: --num_envs=10: config.num_envs=10"),
                    done.stderr)


class RecipeTest(absltest.TestCase):
  """The recipes the check trains, as configs: read in a process of their own (the script
  defines its flags where it is loaded), nothing compiled."""

  def test_the_rough_recipe_is_terrain_with_the_height_scan_at_the_gpu_batch(self):
    code = textwrap.dedent("""
        import json
        import gpu_check
        from mjx_walk import config as config_lib
        out = {}
        for name in ("GPU", "TINY"):
          config = config_lib.validate(gpu_check._config(getattr(gpu_check, name), "rough"))
          out[name] = [config.terrain.ground, config.scan.enabled, config.scan.num_points,
                       config.num_envs, config.families.num_train_families,
                       config.panel.num_envs, list(config.network.scan_encoder_sizes),
                       config.env.contact_timeconst, config.env.episode_seconds,
                       config.terrain.promote_within_reach, config.env.solver_iterations]
        out["run_dir"] = gpu_check.run_dir_of("rough")
        print(json.dumps(out))
        """)
    done, _ = run_check(code=code, timeout=120)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    out = json.loads(done.stdout.splitlines()[-1])
    strata = len(config_lib.ALL_STRATA)
    self.assertEqual(out["GPU"],
                     ["heightfield", True, 117, 8192, 1024, strata * 8 * 4, [32, 16], 0.01, 10.0,
                      True, 2])
    self.assertEqual(out["TINY"], ["heightfield", True, 117, 16, 4, strata, [32, 16], 0.01, 10.0,
                                     True, 2])
    self.assertEqual(out["run_dir"], "work/runs/go2_rough_gpu")


if __name__ == "__main__":
  absltest.main()
