"""Tests for the held-out panel (mjx_walk.evaluation.panel) and the `python -m mjx_walk.evaluate`
command: episode accounting on constructed steps, per-stratum metrics on constructed episodes, a
deterministic jitted pass over a small panel with the traces of one env per stratum, one compile
for several policies, and the command's output and refusals, run in-process
(tests/commands.py)."""

import json
import pathlib
import shutil
import tempfile

from absl.testing import absltest
import chex
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk import evaluate as evaluate_cli
from mjx_walk.evaluation import panel
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import families

import commands
import configs
import runs

R = endings.ResetReason


def save_untrained_run(cfg: config_lib.TrainConfig, run_dir: pathlib.Path) -> None:
  """Saves a run folder of `cfg` with one checkpoint at update 0 whose arrays are zeros. Nothing
  is trained or compiled: the state's shapes come from `jax.eval_shape`. For refusals that must
  come before a policy's values are ever used."""
  trainer = trainer_lib.make_trainer(cfg)

  def zeros(spec):
    if jax.dtypes.issubdtype(spec.dtype, jax.dtypes.prng_key):
      return jax.random.wrap_key_data(
          jnp.zeros(jax.eval_shape(jax.random.key_data, spec).shape, jnp.uint32))
    return jnp.zeros(spec.shape, spec.dtype)

  carry = jax.tree.map(zeros, jax.eval_shape(trainer.init, jax.random.key(0)))
  run_folder.RunFolder.create(run_dir, cfg, trainer.manifest)
  saver = checkpoint.Checkpointer(run_dir, cfg, trainer.manifest)
  saver.save(carry, wall_seconds=0.0)
  saver.close()


def small_config() -> config_lib.TrainConfig:
  cfg = config_lib.default()
  cfg.num_envs = 8
  cfg.families.num_train_families = 4
  cfg.panel.families_per_stratum = 1
  cfg.panel.envs_per_family = 2
  cfg.panel.episode_seconds = 0.2  # 10 control steps
  cfg.network.actor_hidden_sizes = (16,)
  cfg.network.critic_hidden_sizes = (16,)
  return cfg


@flax.struct.dataclass
class _Signals:
  body_contact: jax.Array


@flax.struct.dataclass
class _Step:
  """A constructed batched env step: only the fields `accumulate` reads."""

  reward: jax.Array
  reset_reason: jax.Array
  truncated: jax.Array
  terminated: jax.Array
  metrics: dict[str, jax.Array]
  signals: _Signals


def _step(reward, reason, lin_err, yaw_err, touch=(False, False)):
  reason = jnp.asarray(reason, jnp.int32)
  return _Step(
      reward=jnp.asarray(reward, jnp.float32),
      reset_reason=reason,
      truncated=reason == R.TIMEOUT,
      terminated=(reason != R.NONE) & (reason != R.TIMEOUT),
      metrics={"tracking/lin_vel_error": jnp.asarray(lin_err, jnp.float32),
               "tracking/yaw_rate_error": jnp.asarray(yaw_err, jnp.float32)},
      signals=_Signals(body_contact=jnp.asarray(touch)))


class AccumulateTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_counts_each_episode_once_up_to_its_end(self):
    # Env 0 falls on step 2; env 1 times out on step 3. Steps after an end are ignored.
    # Env 0's body touches on steps 1 and 3 (after its end), env 1's on step 2.
    steps = [
        _step([1.0, 2.0], [R.NONE, R.NONE], [0.1, 0.3], [0.2, 0.0], [True, False]),
        _step([1.0, 2.0], [R.FALL, R.NONE], [0.3, 0.3], [0.4, 0.0], [False, True]),
        _step([9.0, 2.0], [R.NONE, R.TIMEOUT], [9.0, 0.3], [9.0, 0.6], [True, False]),
    ]
    stats = panel.empty_stats(2)
    accumulate = self.variant(panel.accumulate)
    for state in steps:
      stats = accumulate(stats, state)
    chex.assert_trees_all_equal(stats.alive, jnp.array([False, False]))
    chex.assert_trees_all_equal(stats.length, jnp.array([2, 3], jnp.int32))
    chex.assert_trees_all_equal(stats.reason, jnp.array([R.FALL, R.TIMEOUT], jnp.int32))
    chex.assert_trees_all_close(stats.episode_return, jnp.array([2.0, 6.0]))
    chex.assert_trees_all_close(stats.lin_vel_error_sum, jnp.array([0.4, 0.9]), atol=1e-6)
    chex.assert_trees_all_close(stats.yaw_rate_error_sum, jnp.array([0.6, 0.6]), atol=1e-6)
    chex.assert_trees_all_equal(stats.body_contact_steps, jnp.array([1, 1], jnp.int32))


class SummarizeTest(absltest.TestCase):

  def test_per_stratum_metrics_on_constructed_episodes(self):
    cfg = small_config()
    cfg.panel.strata = ("flat", "push")
    manifest = families.make_manifest(cfg)
    # 4 envs: env j is in eval family j % 2, so envs 0, 2 are `flat` and envs 1, 3 are `push`.
    stats = panel.EpisodeStats(
        alive=np.zeros(4, bool),
        length=np.array([10, 4, 10, 10], np.int32),
        reason=np.array([R.TIMEOUT, R.FALL, R.TIMEOUT, R.TIMEOUT], np.int32),
        episode_return=np.array([5.0, -1.0, 3.0, 4.0]),
        # Mean errors per env: 0.1, 0.5, 0.3, 0.2 m/s and 0.1, 0.1, 0.1, 0.4 rad/s.
        lin_vel_error_sum=np.array([1.0, 2.0, 3.0, 2.0]),
        yaw_rate_error_sum=np.array([1.0, 0.4, 1.0, 4.0]),
        body_contact_steps=np.array([5, 4, 0, 1], np.int32),
    )
    result = panel.summarize(stats, manifest, cfg)
    self.assertEqual(result["panel_hash"], manifest.panel_hash)
    flat, push = result["strata"]["flat"], result["strata"]["push"]
    # flat: both survive; env 2's lin error 0.3 >= 0.25 fails tracking -> 1 of 2 succeed.
    self.assertEqual(flat["num_envs"], 2)
    self.assertAlmostEqual(flat["success_rate"], 0.5)
    self.assertAlmostEqual(flat["fall_rate"], 0.0)
    self.assertAlmostEqual(flat["episode_length"], 10.0)
    self.assertAlmostEqual(flat["lin_vel_error"], 0.2)
    self.assertAlmostEqual(flat["yaw_rate_error"], 0.1)
    self.assertAlmostEqual(flat["return"], 4.0)
    self.assertAlmostEqual(flat["body_contact_rate"], 0.25)  # 5 of 10 steps and none
    self.assertEqual(flat["reset"], {"fall": 0, "timeout": 2, "joint_limit": 0,
                                     "body_contact": 0, "nonfinite": 0})
    # push: env 1 fell; env 3 survived but its yaw error 0.4 >= 0.3 fails -> no success.
    self.assertAlmostEqual(push["success_rate"], 0.0)
    self.assertAlmostEqual(push["fall_rate"], 0.5)
    self.assertAlmostEqual(push["episode_length"], 7.0)
    self.assertAlmostEqual(push["lin_vel_error"], 0.35)
    self.assertAlmostEqual(push["yaw_rate_error"], 0.25)
    self.assertAlmostEqual(push["return"], 1.5)
    self.assertAlmostEqual(push["body_contact_rate"], 0.55)  # 4 of 4 steps and 1 of 10
    self.assertEqual(push["reset"]["fall"], 1)
    self.assertEqual(push["reset"]["timeout"], 1)


class EvaluatorTest(absltest.TestCase):

  def test_deterministic_one_pass_over_the_panel(self):
    cfg = small_config()
    # Two families per stratum, so the traced env of each stratum is not simply env s.
    cfg.panel.families_per_stratum = 2
    cfg.panel.envs_per_family = 1
    manifest = families.make_manifest(cfg)
    nets = networks.make_actor_critic(action_size=12, actor_hidden_sizes=(16,),
                                      critic_hidden_sizes=(16,), activation="elu", init_std=0.5)
    evaluator = panel.make_evaluator(cfg, manifest, nets)
    spec = evaluator.env.observation_spec()
    # On the host, as `Evaluator.run_with_traces` hands them to the jitted pass (one program
    # per input placement).
    params = jax.device_get(policy_lib.PolicyParams(
        actor=nets.init(jax.random.key(1), spec["policy"].shape[-1],
                        spec["critic"].shape[-1]).actor,
        normalizer=normalizer.init(spec)))

    # The panel's env: noise-free observations and the panel's episode length.
    self.assertEqual(evaluator.env.env_config.obs_noise_scale, 0.0)
    self.assertEqual(evaluator.env.episode_steps, 10)
    stats, traces = jax.device_get(evaluator.run(params))
    again = jax.device_get(evaluator.run(params))
    chex.assert_trees_all_equal((stats, traces), again)
    chex.assert_shape(stats.length, (cfg.panel.num_envs,))
    # Every episode ended, within the panel's length, for a reason.
    self.assertFalse(stats.alive.any())
    self.assertTrue(np.all((stats.length >= 1) & (stats.length <= 10)))
    self.assertTrue(np.all(stats.reason != R.NONE))

    result = evaluator(params)
    self.assertEqual(sorted(result["strata"]), sorted(cfg.panel.strata))
    per_stratum = cfg.panel.families_per_stratum * cfg.panel.envs_per_family
    # Success recomputed from the episodes: survived to the time limit with both mean tracking
    # errors under the panel's thresholds; env j is in held-out family j % F.
    stratum_of = np.array([manifest.eval_families[j % len(manifest.eval_families)].stratum
                           for j in range(cfg.panel.num_envs)])
    lin = stats.lin_vel_error_sum / stats.length
    yaw = stats.yaw_rate_error_sum / stats.length
    success = ((stats.reason == R.TIMEOUT) & (lin < cfg.panel.success_lin_vel_error)
               & (yaw < cfg.panel.success_yaw_rate_error))
    for stratum, metrics in result["strata"].items():
      self.assertEqual(metrics["num_envs"], per_stratum)
      self.assertEqual(sum(metrics["reset"].values()), per_stratum)
      self.assertAlmostEqual(metrics["success_rate"], success[stratum_of == stratum].mean(),
                             places=6, msg=stratum)

    # The traced pass is the same compiled function, and summarizes the same.
    summary, host_traces = evaluator.run_with_traces(params)
    self.assertEqual(summary, result)
    chex.assert_trees_all_equal(host_traces, traces)
    self.assertEqual(evaluator.run._cache_size(), 1)  # pylint: disable=protected-access
    self._check_traces(cfg, manifest, evaluator, stats, traces)

    # Other parameters are a traced argument of the same compiled pass: another actor, and the
    # same actor with other observation statistics, each act otherwise.
    other_actor = params.replace(actor=nets.init(
        jax.random.key(2), spec["policy"].shape[-1], spec["critic"].shape[-1]).actor)
    shifted = params.replace(normalizer=params.normalizer.replace(
        mean=jax.tree.map(lambda m: m + 0.5, params.normalizer.mean)))
    for other in (other_actor, shifted):
      _, other_traces = evaluator.run_with_traces(other)
      self.assertFalse(np.array_equal(other_traces.qpos, traces.qpos))
    self.assertEqual(evaluator.run._cache_size(), 1)  # pylint: disable=protected-access

  def _check_traces(self, cfg, manifest, evaluator, stats, traces):
    strata, steps, nq = len(cfg.panel.strata), 10, evaluator.env.model.nq
    chex.assert_shape(traces.qpos, (strata, steps, nq))
    chex.assert_shape(traces.command, (strata, steps, 3))
    chex.assert_shape(traces.gravity, (strata, 3))
    for leaf in (traces.env_index, traces.family_index, traces.length, traces.reason,
                 traces.episode_return):
      chex.assert_shape(leaf, (strata,))
    # The first env of each stratum: env j is in family j % E, families are stratum-major.
    np.testing.assert_array_equal(traces.env_index, [0, 2, 4, 6, 8])
    np.testing.assert_array_equal(traces.family_index, traces.env_index % 10)
    self.assertEqual([manifest.eval_strata[f] for f in traces.family_index],
                     list(cfg.panel.strata))
    # How each traced episode ended is what the statistics say of that env.
    np.testing.assert_array_equal(traces.length, stats.length[traces.env_index])
    np.testing.assert_array_equal(traces.reason, stats.reason[traces.env_index])
    np.testing.assert_array_equal(traces.episode_return, stats.episode_return[traces.env_index])
    # Step 0 is the reset state (the panel's fixed reset keys), and the command it was given; to
    # float rounding, since the reset compiled alone and inside the scan may differ in the last
    # bit of the spawn quaternion's sin/cos.
    num_envs = cfg.panel.num_envs
    params = families.for_envs(manifest.eval_params(), num_envs)
    keys = jax.random.split(jax.random.key(cfg.panel.seed), num_envs)
    reset = jax.device_get(jax.jit(jax.vmap(evaluator.env.reset))(keys, params))
    np.testing.assert_allclose(traces.qpos[:, 0], reset.data.qpos[traces.env_index], atol=1e-6)
    np.testing.assert_allclose(traces.command[:, 0], reset.task.command[traces.env_index],
                               atol=1e-6)
    np.testing.assert_array_equal(traces.gravity, np.asarray(params.gravity)[traces.env_index])
    # After the first step the robot has moved.
    self.assertTrue(np.all(np.abs(traces.qpos[:, 1] - traces.qpos[:, 0]).max(axis=-1) > 0))


class EvaluateCommandTest(absltest.TestCase):
  """`python -m mjx_walk.evaluate` on one small real run (checkpoints 2 and 4, evaluated by the
  training loop at update 4), trained once."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.run_dir = runs.trained("evaluate_command_")

  def assert_refused(self, ran: commands.Ran, message: str) -> None:
    self.assertEqual((ran.status, ran.err, ran.out), (2, f"error: {message}\n", ""))

  def copy_of_the_run(self) -> pathlib.Path:
    """A copy of the run (eval/4.json and no eval/2.json), for a test that must show that a
    refused command wrote nothing: `RunFolder.write_eval` keeps an existing record."""
    copy = pathlib.Path(self.create_tempdir().full_path) / "run"
    shutil.copytree(self.run_dir, copy)
    return copy

  def test_a_comparison_prints_both_records_computed_by_the_panel(self):
    # The newest checkpoint (4) was evaluated by the training loop: the command evaluates the
    # saved policy by the same code and keeps eval/4.json, writing no 4.1.json. It compares with
    # checkpoint 2 of the same run, whose figures are computed here by the panel evaluator run
    # directly on its loaded policy. Catches a comparison that evaluates this run's policy twice,
    # another step than the compared one, or on another panel; and a compared record written
    # into eval/.
    saved = json.loads(run_folder.RunFolder(self.run_dir).eval_path(4).read_text())
    compared = self.run_dir / run_folder.CHECKPOINTS / "2"
    theirs = policy_lib.load(compared)
    evaluator = panel.make_evaluator(theirs.config, theirs.manifest, theirs.networks)
    expected = ledger.eval_record(evaluator(theirs.params), update=2,
                                  env_steps=2 * theirs.config.batch_size, wall_seconds=None)
    self.assertNotEqual(expected["strata"], saved["strata"])  # the two policies act otherwise
    before = sorted(p.name for p in (self.run_dir / "eval").iterdir())
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}",
                            f"--compare={compared}")
    self.assertEqual((ran.status, ran.err), (0, ""))
    names = (str(self.run_dir), str(compared))
    self.assertEqual(ran.out, f"{ledger.format_eval_table(saved)}\n"
                     f"recorded in {self.run_dir / 'eval' / '4.json'}\n"
                     f"{ledger.format_comparison(saved, expected, names)}\n")
    self.assertEqual(sorted(p.name for p in (self.run_dir / "eval").iterdir()), before)

  def test_a_compare_run_whose_checkpoint_is_corrupted_is_refused_before_anything_is_written(
      self):
    # Catches a compare run loaded (and found corrupted) only after this run was evaluated and
    # eval/2.json written.
    mine, theirs = self.copy_of_the_run(), self.copy_of_the_run()
    runs.flip_bytes(theirs / run_folder.CHECKPOINTS / "4")
    before = commands.folder_digest(mine)
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={mine}", "--step=2",
                            f"--compare={theirs}")
    self.assertEqual((ran.status, ran.out), (2, ""))
    self.assertRegex(ran.err, rf"^error: --compare={theirs}: checkpoint step 4 at "
                     rf"{theirs.resolve() / run_folder.CHECKPOINTS / '4'}: "
                     r"(corrupted:\n    policy/\w+: checksum mismatch|unreadable \()")
    self.assertEqual(ran.err.count("error:"), 1)
    self.assertNotIn("Traceback", ran.err)
    self.assertEqual(commands.folder_digest(mine), before)

  def test_a_compare_run_that_observes_another_size_is_refused_before_anything_is_written(
      self):
    # A run without the gait clock observes 2 numbers fewer (its sin and cos). Catches its
    # observation size checked only after this run was evaluated and eval/2.json written.
    mine = self.copy_of_the_run()
    theirs = pathlib.Path(self.create_tempdir().full_path) / "no_clock"
    save_untrained_run(configs.tiny(env__gait_hz=0.0, reward__gait_phase=0.0), theirs)
    size = policy_lib.load(mine).observation_spec.shape[0]
    before = commands.folder_digest(mine)
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={mine}", "--step=2",
                            f"--compare={theirs}")
    self.assertEqual((ran.status, ran.out), (2, ""))
    self.assertEqual(ran.err, f"error: --compare={theirs}: its policy observes ({size - 2},), but "
                     f"this run's panel env gives ({size},); only a policy that observes "
                     f"({size},) can be compared on this panel\n")
    self.assertEqual(commands.folder_digest(mine), before)

  def test_refuses_a_corrupted_checkpoint_writing_nothing(self):
    # The newest checkpoint's policy bytes flipped: refused by name, not evaluated, nothing
    # written (catches a policy read without verifying it).
    run_dir = self.copy_of_the_run()
    runs.flip_bytes(run_dir / run_folder.CHECKPOINTS / "4")
    before = commands.folder_digest(run_dir)
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={run_dir}")
    self.assertEqual((ran.status, ran.out), (2, ""))
    self.assertRegex(ran.err, rf"^error: checkpoint step 4 at "
                     rf"{run_dir.resolve() / run_folder.CHECKPOINTS / '4'}: "
                     r"(corrupted:\n    policy/\w+: checksum mismatch|unreadable \()")
    self.assertEqual(ran.err.count("error:"), 1)
    self.assertEqual(commands.folder_digest(run_dir), before)

  def test_an_older_step_is_evaluated_and_recorded(self):
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "--step=2")
    self.assertEqual((ran.status, ran.err), (0, ""))
    path = self.run_dir / "eval" / "2.json"
    record = json.loads(path.read_text())
    self.assertEqual((record["update"], record["panel_hash"]),
                     (2, ledger.latest(ledger.read_run(self.run_dir), "recipe")["panel_hash"]))
    self.assertEqual(ran.out, f"{ledger.format_eval_table(record)}\nrecorded in {path}\n")

  def test_a_policy_acts_with_its_own_normalization_on_another_panel_config(self):
    # The panel's config says normalize_observations=False; the policy was trained with it on.
    # It must still be evaluated with its normalizer (the record of the run's own panel), and
    # an evaluator built for the other setting must be refused, not used.
    pol = policy_lib.load(self.run_dir, 4)
    saved = json.loads(run_folder.RunFolder(self.run_dir).eval_path(4).read_text())
    other = config_lib.from_dict(pol.config.to_dict())
    other.ppo.normalize_observations = False
    record, _ = panel.evaluate_policy(pol, other, pol.manifest)
    self.assertEqual(record["strata"], saved["strata"])
    unnormalized = panel.make_evaluator(other, pol.manifest, pol.networks)
    with self.assertRaisesRegex(ValueError, r"another ppo\.normalize_observations"):
      panel.evaluate_policy(pol, other, pol.manifest, unnormalized)

  def test_refuses_without_a_run_folder(self):
    self.assert_refused(commands.run_main(evaluate_cli.main),
                        "give the run to evaluate: --run_dir=runs/<run>")

  def test_refuses_an_unknown_panel(self):
    self.assert_refused(
        commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "--panel=rough"),
        "--panel='rough' is unknown; the panels are heldout (the run's held-out families from "
        "its manifest)")

  def test_refuses_a_step_that_was_not_saved(self):
    before = commands.folder_digest(self.run_dir)
    self.assert_refused(
        commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "--step=3"),
        f"no checkpoint at step 3 in {self.run_dir.resolve() / run_folder.CHECKPOINTS}; saved "
        "steps: [2, 4]")
    self.assertEqual(commands.folder_digest(self.run_dir), before)

  def test_refuses_a_positional_argument(self):
    self.assert_refused(
        commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "extra"),
        "unexpected arguments: ['extra']")

  def test_seed_zero_of_a_single_seed_run_is_its_policy_and_another_seed_is_refused(self):
    saved = json.loads(run_folder.RunFolder(self.run_dir).eval_path(4).read_text())
    before = commands.folder_digest(self.run_dir)
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "--seed=0")
    self.assertEqual((ran.status, ran.err), (0, ""))
    self.assertEqual(ran.out, f"{ledger.format_eval_table(saved)}\n"
                     f"recorded in {self.run_dir / 'eval' / '4.json'}\n")
    for bad in ("1", "-1"):
      self.assert_refused(
          commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", f"--seed={bad}"),
          f"seed={bad!r} is invalid for {self.run_dir.resolve()}: accepted are 0, or none (it "
          "trained one seed)")
    self.assertEqual(commands.folder_digest(self.run_dir), before)


class SeedCommandTest(absltest.TestCase):
  """`python -m mjx_walk.evaluate` on a copy of the shared 2-seed run (checkpoints 2 and 4, every
  seed evaluated by the training loop at update 4): every seed in one vmapped pass without
  --seed, one seed's policy alone with it."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    runs.warm()  # the single-seed panel, which a seed's policy alone runs
    cls.run_dir = pathlib.Path(tempfile.mkdtemp(prefix="evaluate_seeds_")) / "run"
    shutil.copytree(runs.warm_seeds(), cls.run_dir)
    cls.folder = run_folder.RunFolder(cls.run_dir)
    cls.saved = json.loads(cls.folder.eval_path(4).read_text())
    cls.ran = {seed: commands.run_main(evaluate_cli.main, f"--run_dir={cls.run_dir}",
                                       *([f"--seed={seed}"] if seed is not None else []))
               for seed in (None, 0, 1)}

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.run_dir.parent, ignore_errors=True)
    super().tearDownClass()

  def assert_refused(self, ran: commands.Ran, message: str) -> None:
    self.assertEqual((ran.status, ran.err, ran.out), (2, f"error: {message}\n", ""))

  def assert_same_figures(self, alone: dict, in_the_pass: dict) -> None:
    """One seed's panel figures evaluated alone against its figures in the vmapped pass: the
    counts and rates exactly, the means of float32 sums within 1e-5 relative. The lone program
    and the batched one may round differently: with jax 0.12 on an Intel Xeon with AVX-512
    FP16, the slope's yaw-rate error and return were 1e-6 apart."""
    self.assertEqual(alone.keys(), in_the_pass.keys())
    for stratum, want in in_the_pass.items():
      got = alone[stratum]
      self.assertEqual({k: v for k, v in got.items() if k not in self._ROUNDED},
                       {k: v for k, v in want.items() if k not in self._ROUNDED}, stratum)
      for name in self._ROUNDED:
        self.assertAlmostEqual(got[name], want[name], delta=1e-5 * max(1.0, abs(want[name])),
                               msg=(stratum, name))

  _ROUNDED = ("lin_vel_error", "yaw_rate_error", "return", "body_contact_rate")

  def test_every_seed_in_one_pass_is_each_seed_evaluated_alone(self):
    # The vmapped pass over the stacked parameters against each seed's policy loaded and
    # evaluated on its own: the same figures, seed by seed, and the means over the two. Catches
    # a pass that evaluates one seed twice, or a --seed that loads another seed.
    ran = self.ran[None]
    self.assertEqual((ran.status, ran.err), (0, ""))
    # The training loop's record of update 4 is the command's: kept, none written beside it.
    self.assertEqual(ran.out, f"{ledger.format_eval_table(self.saved)}\n"
                     f"recorded in {self.folder.eval_path(4)}\n")
    record, other, path = panel.evaluate_checkpoint(str(self.run_dir), None)
    self.assertEqual((other, path, record["num_seeds"]), (None, self.folder.eval_path(4), 2))
    self.assertEqual(record["seeds"], self.saved["seeds"])
    alone = []
    for k in (0, 1):
      self.assertEqual((self.ran[k].status, self.ran[k].err), (0, ""))
      one = json.loads(self.folder.eval_path(4, seed=k).read_text())
      self.assertEqual(self.ran[k].out, f"{ledger.format_eval_table(one)}\n"
                       f"recorded in {self.run_dir / 'eval' / f'4_seed{k}.json'}\n")
      self.assertEqual((one["seed"], one["update"], one["panel_hash"]),
                       (k, 4, record["panel_hash"]))
      self.assertNotIn("seeds", one)
      self.assert_same_figures(one["strata"], record["seeds"][k])
      alone.append(one["strata"])
    self.assertNotEqual(alone[0], alone[1])  # two policies that act otherwise
    for stratum, figures in record["strata"].items():
      for name in ("success_rate", "fall_rate", "lin_vel_error", "yaw_rate_error", "return"):
        seeds = [record["seeds"][k][stratum][name] for k in (0, 1)]
        self.assertAlmostEqual(figures[name], sum(seeds) / 2, places=12, msg=(stratum, name))
    self.assertEqual(sorted(p.name for p in self.folder.eval_dir.glob("*.json")),
                     ["4.json", "4_seed0.json", "4_seed1.json"])

  def test_best_is_the_seed_the_panel_picked(self):
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "--seed=best")
    best = self.saved["video_seed"]
    self.assertEqual(best, policy_lib.best_seed(self.saved["seeds"]))
    self.assertEqual((ran.status, ran.err), (0, ""))
    self.assertIn(f"; training seed {best}\n", ran.out)
    self.assertTrue(ran.out.endswith(f"recorded in {self.folder.eval_path(4, seed=best)}\n"))
    self.assert_same_figures(json.loads(self.folder.eval_path(4, seed=best).read_text())["strata"],
                             self.saved["seeds"][best])

  def test_two_multi_seed_policies_are_compared_over_their_seeds(self):
    # Checkpoint 2 of the same run as the other run: its seeds evaluated here directly.
    compared = self.run_dir / run_folder.CHECKPOINTS / "2"
    theirs = policy_lib.load_all(compared)
    evaluator = panel.make_evaluator(theirs.config, theirs.manifest, theirs.networks)
    result, _ = evaluator.run_seeds_with_traces(theirs.params)
    expected = ledger.eval_record(result, update=2, env_steps=2 * theirs.config.batch_size,
                                  wall_seconds=None)
    ran = commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}",
                            f"--compare={compared}")
    self.assertEqual((ran.status, ran.err), (0, ""))
    names = (str(self.run_dir), str(compared))
    self.assertEqual(ran.out, f"{ledger.format_eval_table(self.saved)}\n"
                     f"recorded in {self.folder.eval_path(4)}\n"
                     f"{ledger.format_seed_comparison(self.saved, expected, names)}\n")

  def test_seeds_that_name_none_of_the_run_are_refused_writing_nothing(self):
    run = self.run_dir.resolve()
    before = commands.folder_digest(self.run_dir)
    for bad in ("2", "-1", "two"):
      self.assert_refused(
          commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", f"--seed={bad}"),
          f"seed={bad!r} is invalid for {run}: accepted are 0 to 1, or 'best'")
    # No evaluation at or before update 2 to choose the best seed by.
    self.assert_refused(
        commands.run_main(evaluate_cli.main, f"--run_dir={self.run_dir}", "--step=2",
                          "--seed=best"),
        f"seed='best': {run} has no held-out evaluation at or before update 2 to choose by; "
        "give a seed index, 0 to 1")
    self.assertEqual(commands.folder_digest(self.run_dir), before)


class SuccessThresholdsTest(absltest.TestCase):

  def test_success_needs_survival_and_each_error_strictly_below_its_own_threshold(self):
    # Catches a success that skips the velocity or the yaw-rate threshold, the two thresholds
    # swapped, an error equal to its threshold counted a success, and an episode that ended in
    # a failure but tracked well counted a success. The thresholds are set apart (0.25 m/s and
    # 0.5 rad/s) so that a swap shows; every mean error below is a sum over 8 steps exact in
    # binary, so the comparisons at the thresholds are exact.
    cfg = small_config()
    cfg.panel.strata = ("flat",)
    cfg.panel.success_lin_vel_error = 0.25
    cfg.panel.success_yaw_rate_error = 0.5
    manifest = families.make_manifest(cfg)
    cases = [  # reason, steps, mean lin error, mean yaw error -> success
        (R.TIMEOUT, 8, 0.125, 0.25, 1.0),       # both below
        (R.TIMEOUT, 8, 0.2421875, 0.4921875, 1.0),  # both just below (1/128 under)
        (R.TIMEOUT, 8, 0.25, 0.0, 0.0),         # lin error at its threshold
        (R.TIMEOUT, 8, 0.0, 0.5, 0.0),          # yaw error at its threshold
        (R.TIMEOUT, 8, 0.375, 0.0, 0.0),        # lin above 0.25 though below 0.5
        (R.TIMEOUT, 8, 0.0, 0.375, 1.0),        # yaw above 0.25 but below its own 0.5
        (R.TIMEOUT, 8, 0.0, 0.625, 0.0),        # yaw above
        (R.NONE, 8, 0.125, 0.25, 1.0),          # still alive at the end: survived
        (R.FALL, 3, 0.0, 0.0, 0.0),             # tracked perfectly, then fell
        (R.BODY_CONTACT, 3, 0.0, 0.0, 0.0),
        (R.JOINT_LIMIT, 3, 0.0, 0.0, 0.0),
        (R.NONFINITE, 3, 0.0, 0.0, 0.0),
    ]
    for reason, steps, lin, yaw, want in cases:
      with self.subTest(reason=int(reason), lin=lin, yaw=yaw):
        stats = panel.EpisodeStats(
            alive=np.array([reason == R.NONE]), length=np.array([steps], np.int32),
            reason=np.array([reason], np.int32), episode_return=np.zeros(1),
            lin_vel_error_sum=np.array([lin * steps]),
            yaw_rate_error_sum=np.array([yaw * steps]),
            body_contact_steps=np.zeros(1, np.int32))
        flat = panel.summarize(stats, manifest, cfg)["strata"]["flat"]
        self.assertEqual(flat["num_envs"], 1)
        self.assertEqual(flat["success_rate"], want)
        self.assertEqual(flat["fall_rate"], 0.0 if reason in (R.TIMEOUT, R.NONE) else 1.0)
        self.assertEqual((flat["lin_vel_error"], flat["yaw_rate_error"]), (lin, yaw))


if __name__ == "__main__":
  absltest.main()
