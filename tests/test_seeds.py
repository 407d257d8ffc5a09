"""Tests for several training seeds in one compiled program (`config.num_seeds`): the seed axis
of the trainer, its halting guard, the multi-seed ledger and evaluation, choosing a seed, resume
and the refusals.

The trainer tests share one 3-seed tiny trainer and its one compiled chunk (`SeedAxisTest`); the
single-seed programs they compare with are the tiny config's, which the rest of the suite
compiles anyway (`runs.warm`). The run tests share one 2-seed run of two chunks.
"""

import json
import pathlib
import shutil
import tempfile

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk.evaluation import panel
from mjx_walk.learn import guard
from mjx_walk.learn import records as records_lib
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import sharding
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import families

import configs
import conftest
import runs

SEEDS = 2


def _host(x) -> np.ndarray:
  """An array as NumPy, a typed PRNG key as its key data."""
  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


def _leaves(tree) -> list[np.ndarray]:
  return [_host(x) for x in jax.tree.leaves(tree)]


def _seed(tree, k: int):
  """Seed k's slice of a tree with a leading seed axis, as NumPy."""
  return jax.tree.map(lambda x: _host(x)[k], tree)


class SeedAxisTest(absltest.TestCase):
  """One chunk of the shared 2-seed run's config (`runs.seeds_config`, whose programs that run
  compiles), from `seeds.initial_keys`."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    runs.warm()  # the single-seed tiny programs, compiled once for the whole suite
    runs.warm_seeds()  # and the 2-seed ones
    cls.config = runs.seeds_config(chunks=1)
    chex.assert_equal(cls.config.num_seeds, SEEDS)
    conftest.trace_afresh()
    cls.trainer = trainer_lib.make_trainer(cls.config)
    cls.start = jax.device_get(cls.trainer.init(seeds_lib.initial_keys(cls.config)))
    carry, metrics = cls.trainer.train_chunk(cls.trainer.init(
        seeds_lib.initial_keys(cls.config)))
    cls.after, cls.metrics = jax.device_get(carry), jax.device_get(metrics)

  def _single(self, key: jax.Array):
    """The single-seed tiny trainer on the same families, one chunk from `key`."""
    conftest.trace_afresh()  # the shared tiny chunk's key, not one shaped by the 2-seed trace
    single = trainer_lib.make_trainer(configs.tiny(1), manifest=self.trainer.manifest)
    return jax.device_get(single.train_chunk(single.init(key)))

  def test_every_leaf_has_the_seed_axis_in_front(self):
    num_envs, updates = self.config.num_envs, self.config.updates_per_chunk
    chex.assert_shape(self.after.train.update_step, (SEEDS,))
    chex.assert_shape(self.after.train.halted, (SEEDS,))
    chex.assert_shape(self.after.env.reward, (SEEDS, num_envs))
    chex.assert_shape(self.metrics["reward/total"], (updates, SEEDS))
    chex.assert_shape(self.metrics["guard/nonfinite"], (updates, SEEDS, len(guard.GUARDED)))
    np.testing.assert_array_equal(self.after.train.update_step, [updates] * SEEDS)
    np.testing.assert_array_equal(self.after.train.halted, [False] * SEEDS)

  def test_a_single_seed_run_has_no_seed_axis_and_no_halted_leaf(self):
    single = jax.eval_shape(trainer_lib.make_trainer(configs.tiny(1)).init,
                            seeds_lib.initial_keys(configs.tiny(1)))
    self.assertIsNone(single.train.halted)
    self.assertEqual(single.train.update_step.shape, ())
    self.assertEqual(len(jax.tree.leaves(single.train)), len(jax.tree.leaves(self.after.train)) - 1)

  def test_seed_k_is_the_single_seed_run_started_from_its_key(self):
    # Seed 1 of the 2-seed program against the one-seed program from key(seed + 1): the same
    # computation, batched or not (XLA may sum in another order, hence the tolerance).
    carry, metrics = self._single(jax.random.key(self.config.seed + 1))
    chex.assert_trees_all_close(_seed(self.after.train.params, 1), carry.train.params,
                                atol=1e-6, rtol=1e-5)
    chex.assert_trees_all_close(_seed(self.after.train.normalizer, 1), carry.train.normalizer,
                                atol=1e-6, rtol=1e-5)
    np.testing.assert_allclose(self.metrics["reward/total"][:, 1], metrics["reward/total"],
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(self.metrics["ppo/learning_rate"][:, 1],
                               metrics["ppo/learning_rate"], rtol=1e-5)

  def test_seed_k_starts_as_the_single_seed_run_of_its_key(self):
    single = trainer_lib.make_trainer(configs.tiny(1), manifest=self.trainer.manifest)
    start = jax.device_get(single.init(jax.random.key(self.config.seed + 1)))
    for name in ("params", "opt_state", "normalizer", "key"):
      for a, b in zip(_leaves(_seed(getattr(self.start.train, name), 1)),
                      _leaves(getattr(start.train, name))):
        np.testing.assert_array_equal(a, b, err_msg=name)
    # The env reset runs inside the map's loop body, fused differently: equal to rounding.
    chex.assert_trees_all_close(_seed(self.start.env, 1), jax.tree.map(_host, start.env),
                                atol=1e-6, rtol=1e-6)

  def test_the_seeds_start_apart(self):
    first = _leaves(_seed(self.start.train.params, 0))
    for k in range(1, SEEDS):
      other = _leaves(_seed(self.start.train.params, k))
      self.assertTrue(any(not np.array_equal(a, b) for a, b in zip(first, other)), k)
    self.assertFalse(np.array_equal(self.start.env.data.qpos[0], self.start.env.data.qpos[1]))

  def test_a_nan_in_one_seed_leaves_the_others_bit_identical_and_halts_it(self):
    carry = self.trainer.init(seeds_lib.initial_keys(self.config))
    poisoned = jax.tree.map(lambda x: x.at[0].set(jnp.nan), carry.train.params.actor)
    carry = carry.replace(train=carry.train.replace(
        params=carry.train.params.replace(actor=poisoned)))
    carry, metrics = jax.device_get(self.trainer.train_chunk(carry))
    np.testing.assert_array_equal(carry.train.halted, [True, False])
    for a, b in zip(_leaves(_seed(carry.train, 1)), _leaves(_seed(self.after.train, 1))):
      np.testing.assert_array_equal(a, b)
    # The halted seed kept what it had before its first update (the poisoned actor, the fresh
    # critic and normalizer), while the flags name what went non-finite.
    chex.assert_trees_all_equal(_seed(carry.train.normalizer, 0),
                                _seed(self.start.train.normalizer, 0))
    chex.assert_trees_all_equal(_seed(carry.train.params.critic, 0),
                                _seed(self.start.train.params.critic, 0))
    self.assertEqual(sorted(guard.seed_divergences(metrics)), [0])
    self.assertEqual(guard.seed_divergences(metrics)[0][0], 0)


class EvaluateSeedsTest(absltest.TestCase):

  def test_every_seed_in_one_pass_and_the_interval_over_seeds(self):
    # Two seeds holding the same policy: each seed's figures are the single-seed evaluation's,
    # and seeds that agree have an interval of zero width, however much the envs differ.
    runs.warm()
    runs.warm_seeds()  # compiles the 2-seed panel, which this test runs too
    config = configs.tiny(1)
    pol = policy_lib.load(runs.warm())
    evaluator = panel.make_evaluator(pol.config, pol.manifest, pol.networks)
    single, _ = evaluator.run_with_traces(pol.params)
    twice = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 2), pol.params)
    result, traces = evaluator.run_seeds_with_traces(twice)
    self.assertEqual(result["num_seeds"], 2)
    self.assertEqual(result["video_seed"], 0)
    chex.assert_shape(traces.qpos, (len(config.panel.strata),) + traces.qpos.shape[1:])
    for k in range(2):
      self.assertEqual(result["seeds"][k], single["strata"])
    for stratum, figures in result["spread"].items():
      for name, summary in figures.items():
        value = single["strata"][stratum][name]
        self.assertAlmostEqual(summary["mean"], value, places=12)
        self.assertAlmostEqual(summary["ci_low"], value, places=12)
        self.assertAlmostEqual(summary["ci_high"], value, places=12)
    # The figures differ from stratum to stratum: the point intervals above come from the seeds
    # agreeing, not from every figure being alike.
    lin_errors = [result["seeds"][0][s]["lin_vel_error"] for s in result["seeds"][0]]
    self.assertGreater(np.ptp(lin_errors), 0.0)


class SeedRunTest(absltest.TestCase):
  """The suite's shared 2-seed tiny run of two chunks (`runs.warm_seeds`, read here, not
  changed), and the same config stopped after one chunk and resumed."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = pathlib.Path(tempfile.mkdtemp(prefix="seeds-"))
    (cls.root / "straight").symlink_to(runs.warm_seeds(), target_is_directory=True)
    cls.config = runs.seeds_config()
    runner.run(runs.seeds_config(chunks=1), cls.root / "resumed")
    cls.resumed = runner.run(cls.config, cls.root / "resumed", resume=True)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _records(self, name: str, kind: str) -> list[dict]:
    return ledger.of_kind(ledger.read_run(self.root / name), kind)

  def test_the_recipe_and_records_carry_every_seed(self):
    recipe = self._records("straight", "recipe")[0]
    self.assertEqual((recipe["num_seeds"], recipe["seeds"]), (2, [0, 1]))
    self.assertEqual((recipe["seed_rows"], recipe["devices_per_seed"]), (1, 1))
    updates = self._records("straight", "update")
    self.assertEqual([r["update"] for r in updates], [1, 2, 3, 4])
    for record in updates:
      self.assertLen(record["seeds"]["episode/return"], 2)
      self.assertEqual(record["halted_seeds"], [])
      # Each seed's own update and the pooled one: the pooled reward is the seeds' mean (every
      # seed has the same envs and steps).
      self.assertAlmostEqual(record["reward/total"], np.mean(record["seeds"]["reward/total"]),
                             places=6)
    evaluation = self._records("straight", "eval")[-1]
    self.assertEqual(evaluation["num_seeds"], 2)
    self.assertLen(evaluation["seeds"], 2)
    self.assertEqual(set(evaluation["spread"]), set(self.config.panel.strata))
    for stratum, figures in evaluation["strata"].items():
      per_seed = [seed[stratum]["fall_rate"] for seed in evaluation["seeds"]]
      self.assertAlmostEqual(figures["fall_rate"], np.mean(per_seed), places=12)
      self.assertEqual(figures["reset"]["timeout"],
                       sum(seed[stratum]["reset"]["timeout"] for seed in evaluation["seeds"]))
    # The run hands back the seed its last evaluation chose.
    self.assertEqual(self.resumed.policy.seed, self._records("resumed", "eval")[-1]["video_seed"])

  def test_a_resumed_run_is_the_straight_run_bit_for_bit(self):
    wall = {"perf/sps", "perf/wall_seconds", "wall_seconds", "device/memory_bytes"}
    strip = lambda r: {k: v for k, v in r.items() if k not in wall}
    straight = [strip(r) for r in self._records("straight", "update")]
    resumed = [strip(r) for r in self._records("resumed", "update")]
    self.assertEqual(json.dumps(resumed), json.dumps(straight))
    for k in range(2):
      a = policy_lib.load(self.root / "straight", seed=k).params
      b = policy_lib.load(self.root / "resumed", seed=k).params
      for x, y in zip(_leaves(a), _leaves(b)):
        np.testing.assert_array_equal(x, y)
    self.assertEqual(json.dumps(strip(self._records("resumed", "eval")[-1])),
                     json.dumps(strip(self._records("straight", "eval")[-1])))

  def test_each_seed_loads_on_its_own(self):
    pols = [policy_lib.load(self.root / "straight", seed=k) for k in range(2)]
    self.assertEqual([p.seed for p in pols], [0, 1])
    obs = np.zeros((3,) + pols[0].observation_spec.shape, np.float32)
    actions = [np.asarray(p.act(obs)) for p in pols]
    self.assertFalse(np.array_equal(actions[0], actions[1]))
    best = policy_lib.load(self.root / "straight", seed="best")
    self.assertEqual(best.seed, self._records("straight", "eval")[-1]["video_seed"])

  def test_refusals_name_the_value_and_what_is_accepted(self):
    run_dir = self.root / "straight"
    with self.assertRaisesRegex(ValueError, r"trained 2 seeds; give the seed to use: 0 to 1, "
                                            r"or 'best'"):
      policy_lib.load(run_dir)
    for bad in (2, -1, "two", True):
      with self.assertRaisesRegex(ValueError, rf"seed={bad!r} is invalid .* accepted are 0 to 1"):
        policy_lib.load(run_dir, seed=bad)
    with self.assertRaisesRegex(ValueError, r"num_seeds: 2 -> 3"):
      runner.resume_config(run_dir, configs.tiny(2, num_seeds=3), {"num_seeds": 3}, False)


class ChooseSeedTest(absltest.TestCase):

  def test_best_is_the_highest_held_out_score_at_or_before_the_step(self):
    root = pathlib.Path(tempfile.mkdtemp(prefix="best-"))
    strata = lambda success, fall: {"flat": {"success_rate": success, "fall_rate": fall},
                                    "push": {"success_rate": success, "fall_rate": fall}}
    records = [
        {"kind": "eval", "update": 2, "seeds": [strata(0.9, 0.0), strata(0.1, 0.5),
                                                 strata(0.2, 0.0)]},
        # Seeds 1 and 2 tie on success; seed 2 falls less. Seed 0 is behind.
        {"kind": "eval", "update": 4, "seeds": [strata(0.5, 0.0), strata(0.75, 0.25),
                                                 strata(0.75, 0.0)]},
        {"kind": "eval", "update": 6, "seeds": [strata(1.0, 0.0), strata(0.0, 1.0),
                                                 strata(0.0, 1.0)]},
    ]
    (root / ledger.FILENAME).write_text("".join(json.dumps(r) + "\n" for r in records))
    config = configs.tiny(1, num_seeds=3)
    self.assertEqual(policy_lib.choose_seed(root, config, 4, "best"), 2)
    self.assertEqual(policy_lib.choose_seed(root, config, 5, "best"), 2)
    self.assertEqual(policy_lib.choose_seed(root, config, 3, "best"), 0)
    self.assertEqual(policy_lib.choose_seed(root, config, 6, "best"), 0)
    self.assertEqual(policy_lib.choose_seed(root, config, 6, "1"), 1)
    with self.assertRaisesRegex(ValueError, r"no held-out evaluation at or before update 1"):
      policy_lib.choose_seed(root, config, 1, "best")
    single = configs.tiny(1)
    self.assertEqual(policy_lib.choose_seed(root, single, 6, None), 0)
    with self.assertRaisesRegex(ValueError, r"seed=1 is invalid .* 0, or none"):
      policy_lib.choose_seed(root, single, 6, 1)
    shutil.rmtree(root)


class SeedRecordsTest(absltest.TestCase):

  def test_a_halted_seed_is_left_out_of_the_pooled_record(self):
    # Two seeds, one update: seed 0 had 2 episodes of return 3 and 5, seed 1 one of return 40
    # and had halted. The pooled figures are seed 0's alone.
    metrics = {
        "episode/count": np.array([[2.0, 1.0]]),
        "episode/return_sum": np.array([[8.0, 40.0]]),
        "episode/length_sum": np.array([[20.0, 30.0]]),
        "reset/fall": np.array([[1.0, 1.0]]),
        "reset/timeout": np.array([[1.0, 0.0]]),
        "reward/total": np.array([[0.5, 9.0]]),
        "guard/nonfinite": np.zeros((1, 2, len(guard.GUARDED)), bool),
    }
    record, = records_lib.seed_update_records(
        metrics, np.array([[True, False]]), first_update=6, batch_size=48, sps=100.0,
        wall_seconds=1.0, device_memory=None)
    self.assertEqual((record["update"], record["env_steps"]), (7, 336))
    self.assertEqual(record["episode/return"], 4.0)
    self.assertEqual(record["episode/length"], 10.0)
    self.assertEqual(record["reset/fall"], 0.5)
    self.assertEqual(record["reward/total"], 0.5)
    self.assertEqual(record["seeds"]["episode/return"], [4.0, None])
    self.assertEqual(record["halted_seeds"], [1])
    pooled, = records_lib.seed_update_records(
        metrics, np.array([[True, True]]), first_update=6, batch_size=48, sps=100.0,
        wall_seconds=1.0, device_memory=None)
    self.assertEqual(pooled["episode/return"], 16.0)  # (3 + 5 + 40) / 3 episodes
    self.assertEqual(pooled["seeds"]["episode/return"], [4.0, 40.0])
    self.assertEqual(pooled["reset/fall"], 2 / 3)


class FamiliesPerSeedTest(absltest.TestCase):

  def test_each_seed_draws_the_families_of_its_single_seed_run(self):
    config = configs.tiny(1, num_seeds=3, families_per_seed=True)
    manifest = families.make_manifest(config)
    per = config.families.num_train_families
    self.assertLen(manifest.train_families, 3 * per)
    self.assertEqual(manifest.ranges["seed_families"], {"sets": 3, "families_per_set": per})
    draws = seeds_lib.env_families(config, manifest)  # leaves [S, N]
    envs = np.arange(config.num_envs)
    for k in range(3):
      alone = families.make_manifest(configs.tiny(1, seed=config.seed + k))
      self.assertEqual(manifest.train_families[k * per:(k + 1) * per], alone.train_families)
      np.testing.assert_array_equal(draws.index[k], k * per + envs % per)
      np.testing.assert_array_equal(draws.friction[k],
                                    np.asarray(alone.train_params().friction)[envs % per])
    # Shared families leave the manifest as it was before seeds existed.
    shared = families.make_manifest(configs.tiny(1, num_seeds=3))
    self.assertEqual(shared.hash, families.make_manifest(configs.tiny(1)).hash)
    self.assertNotIn("seed_families", shared.ranges)

  def test_each_seeds_envs_start_on_its_own_families(self):
    runs.warm()
    config = configs.tiny(1, num_seeds=2, families_per_seed=True)
    trainer = trainer_lib.make_trainer(config)
    start = jax.device_get(trainer.init(seeds_lib.initial_keys(config)))
    per, envs = config.families.num_train_families, config.num_envs
    np.testing.assert_array_equal(start.env.family.index,
                                  [np.arange(envs) % per, per + np.arange(envs) % per])
    alone = families.make_manifest(configs.tiny(1, seed=config.seed + 1)).train_params()
    np.testing.assert_array_equal(start.env.family.friction[1],
                                  np.asarray(alone.friction)[np.arange(envs) % per])

  def test_explicit_family_seeds_cannot_be_drawn_per_seed(self):
    config = configs.tiny(1, num_seeds=2, families_per_seed=True,
                          families__train_family_seeds=(1, 2, 3, 4))
    with self.assertRaisesRegex(ValueError, r"config.families_per_seed=True is invalid: each seed "
                                            r"draws its families from seed \+ k"):
      config_lib.validate(config)


class SeedRefusalTest(absltest.TestCase):

  def test_a_bad_seed_count_is_refused_naming_it(self):
    for bad in (0, -1, config_lib.MAX_SEEDS + 1, 1.5, True, "2"):
      with self.assertRaisesRegex(ValueError, rf"config.num_seeds={bad!r} is invalid: it must be "
                                              rf"an integer from 1 .* to {config_lib.MAX_SEEDS}"):
        config_lib.validate(configs.with_changes(num_seeds=bad))

  def test_envs_that_do_not_split_over_a_seeds_devices_are_refused(self):
    # 2 seeds on 4 devices: 2 rows of 2, so each seed's 6 envs split 3 per device, which 2
    # minibatches do not divide; 3 seeds on 4 devices: 1 row, 4 devices per seed.
    config = configs.with_changes(num_seeds=2, num_envs=6, ppo__num_minibatches=2)
    with self.assertRaisesRegex(ValueError, r"num_envs=6 over the 2 devices each seed gets "
                                            r"\(num_seeds=2 over 4 devices puts the seeds on 2 "
                                            r"rows of 2\) leaves 3 envs per device"):
      sharding.check_geometry(config, 4)
    config = configs.with_changes(num_seeds=3, num_envs=6, ppo__num_minibatches=2)
    with self.assertRaisesRegex(ValueError, r"num_envs=6 cannot be split over the 4 devices each "
                                            r"seed gets .* give num_seeds a multiple or divisor "
                                            r"of 4"):
      sharding.check_geometry(config, 4)
    sharding.check_geometry(configs.with_changes(num_seeds=4, num_envs=8,
                                                 ppo__num_minibatches=4), 4)


if __name__ == "__main__":
  absltest.main()
