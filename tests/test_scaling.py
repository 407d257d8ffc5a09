"""Tests for mjx_walk.scaling (the batch rule), the --scale_num_envs flag of the training command
and of experiments/measurements/learn_benchmark.py, and experiments/measurements/scaling_sweep.py's
plan and JSON lines.

Catches a rule that scales the wrong field or by the wrong factor (the expected numbers are
worked out by hand in each test, never by calling the rule), a derived config that `validate`
refuses, a target accepted that the rule cannot meet, a base config changed in place, a flag that
is ignored, applied after the run folder is written or accepted with --resume, and a sweep line
that loses a field or cannot be parsed. Nothing here trains: the commands stop at a robot that
does not exist or at a stand-in for `runner.run`; the sweep's real run is left to
experiments/README.md.
"""

import json
import math
import os
import pathlib
import subprocess
import sys
import textwrap
from unittest import mock

from absl import flags
from absl.testing import absltest
from absl.testing import parameterized

from mjx_walk import config as config_lib
from mjx_walk import scaling
from mjx_walk import runner
from mjx_walk import train as train_lib
from mjx_walk.evaluation import walking
from mjx_walk.sim import families

import commands
import configs

REPO = pathlib.Path(__file__).resolve().parent.parent
MEASUREMENTS = REPO / "experiments" / "measurements"
# The sweep's flags are defined here; the benchmark defines two of the same names, so it runs in a
# process of its own (`_run_learn_benchmark`).
scaling_sweep = commands.load_script(MEASUREMENTS / "scaling_sweep.py")

NO_ROBOT = "--config.env.robot=no_such_robot"
"""Makes a run that got past the flags fail at its robot, before anything is written or compiled."""


class RuleTest(parameterized.TestCase):

  def test_512_to_2048_envs(self):
    base = config_lib.default()
    cfg = scaling.scale(base, 2048)
    # k = 2048 / 512 = 4, sqrt(k) = 2.
    self.assertEqual(cfg.num_envs, 2048)
    self.assertEqual(cfg.batch_size, 2048 * 24)         # 49,152 samples per update
    self.assertEqual(cfg.minibatch_size, 4 * 3072)      # 12,288 = 49,152 / 4 minibatches
    self.assertEqual(cfg.ppo.learning_rate, 2e-3)       # 1e-3 x 2
    self.assertEqual(cfg.ppo.max_learning_rate, 2e-2)   # 1e-2 x 2
    self.assertEqual(cfg.families.num_train_families, 512)  # 128 x 4
    self.assertEqual(cfg.num_envs // cfg.families.num_train_families, 4)  # as 512 / 128
    self.assertEqual(cfg.total_env_steps, 48_000_000)   # 12M x 4
    self.assertEqual(cfg.num_chunks, 245)               # ceil(48M / 196,608) = ceil(12M / 49,152)
    # Kept: the horizon (0.48 s of policy lag), reuse and SGD steps per update, the KL target,
    # the rate's floor, the panel.
    self.assertEqual(cfg.unroll_length, 24)
    self.assertEqual((cfg.ppo.num_epochs, cfg.ppo.num_minibatches), (5, 4))
    self.assertEqual(cfg.ppo.desired_kl, 0.01)
    self.assertEqual(cfg.ppo.min_learning_rate, 1e-5)
    self.assertEqual(cfg.panel, base.panel)
    self.assertEqual(cfg.updates_per_chunk, 4)

  def test_512_to_768_envs_is_not_a_power_of_two(self):
    cfg = scaling.scale(config_lib.default(), 768)
    # k = 1.5, sqrt(1.5) = 1.224744871391589.
    self.assertAlmostEqual(cfg.ppo.learning_rate, 1.224744871391589e-3, delta=1e-18)
    self.assertAlmostEqual(cfg.ppo.max_learning_rate, 1.224744871391589e-2, delta=1e-17)
    self.assertEqual(cfg.families.num_train_families, 192)  # 768 / 4 envs per family
    self.assertEqual(cfg.total_env_steps, 18_000_000)
    self.assertEqual(cfg.minibatch_size, 768 * 24 // 4)  # 4,608

  def test_the_run_length_rounds_up_and_keeps_the_chunk_count(self):
    base = configs.with_changes(total_env_steps=1001)
    cfg = scaling.scale(base, 768)
    self.assertEqual(cfg.total_env_steps, 1502)  # 1001 x 1.5 = 1501.5, rounded up
    self.assertEqual(cfg.num_chunks, base.num_chunks)

  def test_the_same_count_is_the_identity(self):
    base = config_lib.default()
    cfg = scaling.scale(base, 512)
    self.assertEqual(cfg, base)
    self.assertIsNot(cfg, base)
    self.assertEqual(scaling.changes(base, cfg), {})

  def test_the_base_is_not_changed(self):
    base = config_lib.default()
    scaling.scale(base, 4096)
    self.assertEqual(base, config_lib.default())

  def test_changes_name_each_scaled_field_with_old_and_new(self):
    base = config_lib.default()
    self.assertEqual(scaling.changes(base, scaling.scale(base, 1024)), {
        "num_envs": (512, 1024),
        "total_env_steps": (12_000_000, 24_000_000),
        "families.num_train_families": (128, 256),
        "ppo.learning_rate": (1e-3, 1e-3 * math.sqrt(2)),
        "ppo.max_learning_rate": (1e-2, 1e-2 * math.sqrt(2)),
    })
    self.assertEqual(tuple(scaling.changes(base, scaling.scale(base, 1024))),
                     scaling.SCALED_FIELDS)
    self.assertEqual(scaling.format_changes({"num_envs": (512, 1024)}), "  num_envs: 512 -> 1024")

  def test_a_fixed_rate_scales_without_the_adaptive_bounds(self):
    # desired_kl = 0: the rate is used as is, and validate does not hold it to the bounds.
    base = configs.with_changes(ppo__desired_kl=0.0, ppo__learning_rate=0.05)
    self.assertEqual(scaling.scale(base, 2048).ppo.learning_rate, 0.1)  # 0.05 x sqrt(4)

  @parameterized.named_parameters(
      # (base changes, targets): envs per family and minibatch count set the step.
      ("default", {}, (512, 516, 640, 768, 1000, 1024, 2048, 4096, 8192, 12288, 65536)),
      ("tiny", configs.TINY, (8, 10, 16, 32, 100)),  # 2 envs per family, 2 minibatches
      ("one_env_per_family_8_minibatches",
       {"num_envs": 64, "families__num_train_families": 64, "ppo__num_minibatches": 8},
       (64, 72, 128, 1000)),
      ("fixed_rate", {"ppo__desired_kl": 0.0, "ppo__learning_rate": 0.5}, (1024, 8192)),
  )
  def test_every_derived_config_is_valid(self, changes, targets):
    base = configs.with_changes(**changes)
    for target in targets:
      with self.subTest(num_envs=target):
        cfg = scaling.scale(base, target)
        self.assertIs(config_lib.validate(cfg), cfg)
        self.assertEqual(cfg.num_envs, target)
        self.assertEqual(cfg.num_envs // cfg.families.num_train_families,
                         base.num_envs // base.families.num_train_families)

  def test_the_gpu_config_scales_too(self):
    gpu = config_lib.load_file(str(REPO / "experiments" / "recipes" / "go2_flat_gpu.py"))
    cfg = scaling.scale(gpu, 16384)  # 64 envs per family there: 256 families
    self.assertEqual(cfg.families.num_train_families, 256)
    self.assertEqual(cfg.ppo.learning_rate, gpu.ppo.learning_rate * math.sqrt(2))

  def test_the_base_families_stay_and_new_ones_join(self):
    base = config_lib.default()
    before, after = (families.train_seeds(c) for c in (base, scaling.scale(base, 2048)))
    self.assertLen(after, 512)
    self.assertEqual(after[:128], before)
    self.assertLen(set(after), 512)

  @parameterized.named_parameters(
      ("zero", 0, r"num_envs=0 is refused: it must be a positive integer\.$"),
      ("negative", -1024, r"num_envs=-1024 is refused: it must be a positive integer\.$"),
      ("fractional", 1024.0, r"num_envs=1024\.0 is refused: it must be a positive integer\.$"),
      ("bool", True, r"num_envs=True is refused: it must be a positive integer\.$"),
      ("below_base", 256,
       r"num_envs=256 is refused: it must be at least the base config's num_envs=512: the rule "
       r"scales out, and scaling down would drop training families\."),
      ("not_divisible", 1001,
       r"num_envs=1001 is refused: it must be a multiple of 4, so that every family keeps its 4 "
       r"envs and the batch splits into ppo\.num_minibatches=4 minibatches \(e\.g\. 1000 or "
       r"1004\)\.$"),
      ("not_divisible_just_above_the_base", 514,
       r"num_envs=514 is refused: it must be a multiple of 4.*\(e\.g\. 516\)\.$"),
  )
  def test_refused_targets_name_the_value_and_what_is_accepted(self, target, pattern):
    base = config_lib.default()
    with self.assertRaisesRegex(ValueError, rf"^scaling to {pattern}"):
      scaling.scale(base, target)
    self.assertEqual(base, config_lib.default())

  def test_the_step_is_the_least_common_multiple(self):
    # 6 envs per family and 4 minibatches: multiples of 12.
    base = configs.with_changes(num_envs=24, families__num_train_families=4)
    self.assertEqual(scaling.scale(base, 36).families.num_train_families, 6)
    with self.assertRaisesRegex(ValueError, r"num_envs=30 .*a multiple of 12, so that every "
                                r"family keeps its 6 envs .* \(e\.g\. 36\)"):
      scaling.scale(base, 30)

  def test_explicit_family_seeds_cannot_grow(self):
    base = configs.tiny(families__train_family_seeds=(1, 2, 3, 4))
    self.assertEqual(scaling.scale(base, 8), base)
    with self.assertRaisesRegex(ValueError, r"num_envs=16 is refused: the base config lists its "
                                r"families\.train_family_seeds explicitly"):
      scaling.scale(base, 16)

  def test_an_invalid_base_is_refused_by_validate(self):
    with self.assertRaisesRegex(ValueError, r"^config\.ppo\.entropy_coef=nan is invalid"):
      scaling.scale(configs.with_changes(ppo__entropy_coef=float("nan")), 1024)


def _stand_in_for_run(seen: list):
  """Replaces `runner.run` under the train command: records the config it is given and stops the command (status 0)
  before anything is built, written or compiled."""
  def run(config, *args, **kwargs):
    del args, kwargs
    seen.append(config)
    raise SystemExit(0)
  return mock.patch.object(runner, "run", side_effect=run)


class TrainFlagTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = pathlib.Path(self.create_tempdir().full_path)

  def assert_refused(self, ran: commands.Ran, pattern: str) -> None:
    self.assertEqual(ran.status, 2, ran.err)
    self.assertRegex(ran.err, rf"^error: {pattern}")
    self.assertNotIn("Traceback", ran.err)

  def test_the_flag_scales_the_loaded_config_and_prints_the_changes(self):
    seen = []
    with _stand_in_for_run(seen):
      ran = commands.run_main(train_lib.main, "--scale_num_envs=2048",
                              f"--run_dir={self.root / 'run'}")
    self.assertEqual(ran.status, 0, ran.err)
    self.assertEqual(seen, [scaling.scale(config_lib.default(), 2048)])
    self.assertEqual(ran.out, (
        "--scale_num_envs=2048: the batch rule (mjx_walk/scaling.py) changed:\n"
        "  num_envs: 512 -> 2048\n"
        "  total_env_steps: 12000000 -> 48000000\n"
        "  families.num_train_families: 128 -> 512\n"
        "  ppo.learning_rate: 0.001 -> 0.002\n"
        "  ppo.max_learning_rate: 0.01 -> 0.02\n"))

  def test_overrides_are_part_of_the_base(self):
    seen = []
    with _stand_in_for_run(seen):
      ran = commands.run_main(train_lib.main, "--config.num_envs=1024",
                              "--config.ppo.learning_rate=5e-4", "--scale_num_envs=4096")
    self.assertEqual(ran.status, 0, ran.err)
    # k = 4096 / 1024 = 4; 1024 envs over 128 families is 8 envs per family.
    self.assertEqual(seen[0].families.num_train_families, 512)
    self.assertEqual(seen[0].ppo.learning_rate, 1e-3)
    self.assertIn("  num_envs: 1024 -> 4096\n", ran.out)

  def test_a_scaled_run_gets_to_its_checks_before_writing(self):
    # The real `run`: the scaled config passes validation and its 256-family manifest is drawn;
    # the missing robot then stops it, with nothing written or compiled.
    target = self.root / "never-robot"
    ran = commands.run_main(train_lib.main, "--scale_num_envs=1024", NO_ROBOT,
                            f"--run_dir={target}")
    self.assert_refused(ran, r"config\.env\.robot='no_such_robot' is invalid")
    self.assertIn("  families.num_train_families: 128 -> 256\n", ran.out)
    self.assertFalse(target.exists())

  def test_a_refused_value_stops_the_command_before_anything_is_written(self):
    for value, pattern in (
        ("1001", r"scaling to num_envs=1001 is refused: it must be a multiple of 4"),
        ("256", r"scaling to num_envs=256 is refused: it must be at least the base config's "
                r"num_envs=512"),
        ("0", r"scaling to num_envs=0 is refused: it must be a positive integer"),
        ("-8", r"scaling to num_envs=-8 is refused: it must be a positive integer")):
      with self.subTest(value=value):
        target = self.root / f"never-{value}"
        ran = commands.run_main(train_lib.main, f"--scale_num_envs={value}", NO_ROBOT,
                                f"--run_dir={target}")
        # The rule's refusal, not the robot's: the flag is applied before the run's checks.
        self.assert_refused(ran, pattern + r".*\.\n$")
        self.assertEqual(ran.out, "")
        self.assertFalse(target.exists())

  def test_not_with_resume(self):
    run_dir = self.root / "saved"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(config_lib.default().to_json())
    before = commands.folder_digest(run_dir)
    ran = commands.run_main(train_lib.main, f"--resume={run_dir}", "--scale_num_envs=1024")
    self.assert_refused(ran, r"give --resume=<run folder> or --scale_num_envs, not both: a "
                        r"resumed run keeps its saved config\n$")
    self.assertEqual(commands.folder_digest(run_dir), before)

  def test_learn_benchmark_takes_the_same_flag(self):
    done = _run_learn_benchmark("--scale_num_envs=1024")
    self.assertEqual(done.returncode, 0, done.stderr)
    expected = walking.for_wall_clock(scaling.scale(config_lib.default(), 1024))
    seen = [json.loads(line[len(_SEEN):]) for line in done.stdout.splitlines()
            if line.startswith(_SEEN)]
    self.assertEqual(seen, [json.loads(json.dumps(expected.to_dict()))])
    self.assertEqual(expected.panel.every_chunks, 0)  # evaluations follow the wall clock
    target = self.root / "never-benchmark"
    done = _run_learn_benchmark("--scale_num_envs=1001", f"--run_dir={target}")
    self.assertEqual(done.returncode, 2, done.stderr)
    self.assertRegex(done.stderr, r"(?m)^error: scaling to num_envs=1001 is refused")
    self.assertNotIn("Traceback", done.stderr)
    self.assertFalse(target.exists())


_SEEN = "runner.run got "


def _run_learn_benchmark(*args: str) -> subprocess.CompletedProcess:
  """Runs `python experiments/measurements/learn_benchmark.py <args>` with `runner.run` replaced
  by a stand-in that prints the config it is given (`_SEEN` and one JSON line) and exits 0."""
  code = textwrap.dedent(f"""
      import importlib.util, json, sys
      from unittest import mock
      from absl import app
      from mjx_walk import runner
      spec = importlib.util.spec_from_file_location(
          "learn_benchmark", {str(MEASUREMENTS / "learn_benchmark.py")!r})
      script = importlib.util.module_from_spec(spec)
      sys.modules["learn_benchmark"] = script
      spec.loader.exec_module(script)
      def run(config, *args, **kwargs):
        print({_SEEN!r} + json.dumps(config.to_dict()), flush=True)
        raise SystemExit(0)
      with mock.patch.object(runner, "run", side_effect=run):
        app.run(script.main)
      """)
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
  return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                        timeout=600, cwd=REPO, env=env, check=False)


def _ledger_records() -> list[dict]:
  """A run's ledger records as `walking.summarize` reads them: two chunks' updates at
  400 and 500 env steps/s (the first is the compile chunk's) and two evaluations, the second
  walking on `flat`."""
  strata = lambda lin: {"flat": {"fall_rate": 0.0, "lin_vel_error": lin, "yaw_rate_error": 0.1},
                        "slope": {"fall_rate": 0.5, "lin_vel_error": 0.4, "yaw_rate_error": 0.2}}
  return [
      {"kind": "recipe", "num_envs": 16},
      {"kind": "update", "update": 1, "env_steps": 96, "perf/sps": 3.0},
      {"kind": "update", "update": 2, "env_steps": 192, "perf/sps": 400.0},
      {"kind": "eval", "update": 2, "env_steps": 192, "wall_seconds": 60.0, "strata": strata(0.5)},
      {"kind": "update", "update": 3, "env_steps": 288, "perf/sps": 500.0},
      {"kind": "eval", "update": 3, "env_steps": 288, "wall_seconds": 90.0, "strata": strata(0.2)},
  ]


class SweepTest(absltest.TestCase):

  def test_the_plan_scales_each_count_by_the_rule(self):
    base = config_lib.default()
    planned = scaling_sweep.plan(base, [256, 512, 1024, 2048], naive=False)
    self.assertEqual([rule for rule, _, _ in planned], ["naive", "scaled", "scaled", "scaled"])
    # 256 is below the base: only num_envs changes (128 families of 2 envs), and it says why.
    rule, cfg, note = planned[0]
    self.assertEqual(scaling.changes(base, cfg), {"num_envs": (512, 256)})
    self.assertIn("below the base's 512 envs", note)
    self.assertEqual(planned[1][1], base)
    self.assertEqual(planned[3][1], scaling.scale(base, 2048))
    self.assertEqual([n for _, _, n in planned[1:]], [None] * 3)

  def test_the_naive_plan_changes_only_num_envs(self):
    base = config_lib.default()
    for count, (rule, cfg, note) in zip([256, 1024, 2048],
                                        scaling_sweep.plan(base, [256, 1024, 2048], naive=True)):
      self.assertEqual((rule, note), ("naive", None))
      self.assertEqual(scaling.changes(base, cfg), {"num_envs": (512, count)})
    with self.assertRaisesRegex(ValueError, r"config\.num_envs=1000 .*divisible by "
                                r"families\.num_train_families=128"):
      scaling_sweep.plan(base, [1000], naive=True)

  def test_one_parseable_json_line_per_count(self):
    base = configs.tiny()
    _, cfg, _ = scaling_sweep.plan(base, [32], naive=False)[0]
    summary = walking.summarize(_ledger_records())
    line = scaling_sweep.sweep_line(32, "scaled", scaling.changes(base, cfg), None, summary, 0.4,
                                    pathlib.Path("/tmp/out/32_scaled"))
    text = json.dumps(line)
    self.assertNotIn("\n", text)
    parsed = json.loads(text)
    self.assertEqual(set(parsed), {"num_envs", "rule", "changed", "minutes_to_walk", "env_steps",
                                   "train_sps", "final", "curve", "budget_minutes", "run_dir"})
    self.assertEqual((parsed["num_envs"], parsed["rule"]), (32, "scaled"))
    # 8 -> 32 envs: k = 4.
    self.assertEqual(parsed["changed"], {
        "num_envs": [8, 32], "total_env_steps": [192, 768],
        "families.num_train_families": [4, 16], "ppo.learning_rate": [0.001, 0.002],
        "ppo.max_learning_rate": [0.01, 0.02]})
    self.assertEqual(parsed["minutes_to_walk"], 1.5)  # the second evaluation, 90 s in
    self.assertEqual(parsed["env_steps"], 288)
    self.assertEqual(parsed["train_sps"], 450)  # median of the chunks after the compile chunk
    self.assertEqual(parsed["final"]["slope"]["fall_rate"], 0.5)
    self.assertEqual(parsed["curve"], [[1.0, 192, 0.0, 0.5, 0.1], [1.5, 288, 0.0, 0.2, 0.1]])
    self.assertEqual(parsed["run_dir"], "/tmp/out/32_scaled")
    noted = scaling_sweep.sweep_line(4, "naive", {}, "below the base", summary, 6.0,
                                     pathlib.Path("r"))
    self.assertEqual(json.loads(json.dumps(noted))["note"], "below the base")

  def test_the_command_refuses_before_training_anything(self):
    out = pathlib.Path(self.create_tempdir().full_path) / "sweep"
    taken = out / "512_scaled"
    taken.mkdir(parents=True)
    (taken / "ledger.jsonl").write_text("")
    for args, pattern in (
        (["--num_envs=1024,1001"], r"scaling to num_envs=1001 is refused: it must be a multiple "
                                   r"of 4"),
        (["--num_envs=1024,512"], rf"--run_dir={taken} already holds a run"),
        (["--num_envs=512,abc"], r"--num_envs=512,abc: 'abc' is not an integer"),
        (["--num_envs=512,512"], r"--num_envs=512,512: give distinct env counts"),
        (["--scale_num_envs=1024"], r"--scale_num_envs is not a sweep flag"),
        (["--run_dir=elsewhere"], r"--run_dir is not a sweep flag")):
      with self.subTest(args=args):
        ran = commands.run_main(scaling_sweep.main, f"--out_dir={out}", *args)
        self.assertEqual(ran.status, 2, ran.err)
        self.assertRegex(ran.err, rf"^error: {pattern}")
        self.assertEqual(sorted(p.name for p in out.iterdir()), ["512_scaled"])
    ran = commands.run_main(scaling_sweep.main)
    self.assertEqual((ran.status, ran.err), (2, "error: give --out_dir, the folder the sweep's "
                                                "runs go in\n"))

  def test_the_sweep_defaults(self):
    self.assertEqual(flags.FLAGS["num_envs"].default, ["256", "512", "1024", "2048"])
    self.assertEqual(flags.FLAGS["budget_minutes"].default, 6.0)


if __name__ == "__main__":
  absltest.main()
