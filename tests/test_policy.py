"""Tests for mjx_walk.run.policy: `mean_action`, the one definition of how a policy acts, a
policy module that loads without the trainer, and every seed's policies loaded at once
(`load_all`; loading a policy from a checkpoint is tested in tests/test_checkpoint.py, choosing a
seed in tests/test_seeds.py, the panel that acts with it in tests/test_evaluate.py).

The reference normalises with NumPy, written here from the normalizer's formula, and applies the
actor's module directly.
"""

import pathlib
import subprocess
import sys

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.run import policy as policy_lib

import runs

REPO = pathlib.Path(__file__).resolve().parent.parent
OBS, CRITIC_OBS, ACTIONS = 7, 5, 3


class MeanActionTest(chex.TestCase):

  def setUp(self):
    super().setUp()
    self.nets = networks.make_actor_critic(action_size=ACTIONS, actor_hidden_sizes=(16,),
                                           critic_hidden_sizes=(16,), activation="elu",
                                           init_std=0.5)
    self.actor = self.nets.init(jax.random.key(0), OBS, CRITIC_OBS).actor
    rng = np.random.default_rng(0)
    self.obs = rng.normal(2.0, 3.0, (4, OBS)).astype(np.float32)  # [N, O]
    self.mean = rng.normal(1.0, 1.0, OBS).astype(np.float32)
    self.var = rng.uniform(0.5, 4.0, OBS).astype(np.float32)
    # The critic's statistics are NaN: the policy must never read them.
    nan = np.full(CRITIC_OBS, np.nan, np.float32)
    self.params = policy_lib.PolicyParams(
        actor=self.actor,
        normalizer=normalizer.NormalizerState(mean={"policy": self.mean, "critic": nan},
                                              var={"policy": self.var, "critic": nan},
                                              count=jnp.float32(100.0)))

  def actor_mean(self, policy_obs: np.ndarray) -> jax.Array:
    mean, _ = self.nets.actor.apply(self.actor, jnp.asarray(policy_obs))
    return mean

  @chex.variants(with_jit=True, without_jit=True)
  def test_normalises_with_the_policy_statistics_then_takes_the_actor_mean(self):
    # Catches a policy that skips the normalizer, reads another leaf's statistics, or samples.
    act = self.variant(policy_lib.mean_action, static_argnums=(0, 1))
    action = act(self.nets, True, self.params, self.obs)
    chex.assert_shape(action, (4, ACTIONS))
    normalised = np.clip((self.obs - self.mean) / np.sqrt(self.var + 1e-8), -10.0, 10.0)
    chex.assert_trees_all_close(action, self.actor_mean(normalised), rtol=1e-6, atol=1e-6)
    chex.assert_tree_all_finite(action)

  @chex.variants(with_jit=True, without_jit=True)
  def test_raw_observations_when_the_run_does_not_normalise(self):
    act = self.variant(policy_lib.mean_action, static_argnums=(0, 1))
    chex.assert_trees_all_close(act(self.nets, False, self.params, self.obs),
                                self.actor_mean(self.obs), rtol=1e-6, atol=1e-6)

  def test_any_leading_dims(self):
    # Catches statistics broadcast against the wrong axis of an unbatched or a [T, N, O]
    # observation. The reference: the NumPy normalisation, then the actor, row by row.
    normalised = np.clip((self.obs - self.mean) / np.sqrt(self.var + 1e-8), -10.0, 10.0)
    expected = np.stack([self.actor_mean(row[None])[0] for row in normalised])  # [N, A]
    single = policy_lib.mean_action(self.nets, True, self.params, self.obs[0])  # [O] -> [A]
    chex.assert_shape(single, (ACTIONS,))
    chex.assert_trees_all_close(single, expected[0], rtol=1e-6, atol=1e-6)
    blocks = policy_lib.mean_action(self.nets, True, self.params, self.obs.reshape(2, 2, OBS))
    chex.assert_trees_all_close(blocks, expected.reshape(2, 2, ACTIONS), rtol=1e-6, atol=1e-6)


class ImportTest(absltest.TestCase):

  def test_the_policy_needs_neither_the_trainer_nor_the_audit(self):
    # A fresh process is the point: which modules importing `policy` brings in.
    script = ("import sys; from mjx_walk.run import policy; "
              "print(sorted(m for m in sys.modules if m.startswith('mjx_walk.')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=REPO, check=True)
    loaded = done.stdout.strip()
    for module in ("mjx_walk.learn.trainer", "mjx_walk.learn.audit", "mjx_walk.learn.ppo",
                   "mjx_walk.analysis"):
      self.assertNotIn(f"'{module}", loaded)
    self.assertIn("'mjx_walk.run.policy'", loaded)


class LoadAllTest(absltest.TestCase):

  def test_every_seeds_parameters_stacked_in_seed_order(self):
    # The shared 2-seed run: seed k of the stack is what `load` gives for seed k, and its
    # policy is that seed's. Catches seeds stacked out of order or one seed read twice.
    run_dir = runs.warm_seeds()
    every = policy_lib.load_all(run_dir, 4)
    self.assertEqual((every.num_seeds, every.step, every.run_dir), (2, 4, run_dir.resolve()))
    for k in (0, 1):
      alone = policy_lib.load(run_dir, 4, seed=k)
      chex.assert_trees_all_equal(jax.tree.map(lambda x, k=k: x[k], every.params), alone.params)
      chex.assert_trees_all_equal(every.policy(k).params, alone.params)
      self.assertEqual((every.policy(k).seed, every.policy(k).named_seed), (k, k))
    self.assertTrue(any(not np.array_equal(leaf[0], leaf[1])
                        for leaf in jax.tree.leaves(every.params.actor)))  # two policies

  def test_a_single_seed_run_has_a_stack_of_one(self):
    run_dir = runs.warm()
    every = policy_lib.load_all(run_dir)
    alone = policy_lib.load(run_dir)
    self.assertEqual((every.num_seeds, alone.seed, alone.named_seed), (1, 0, None))
    chex.assert_trees_all_equal(every.params, jax.tree.map(lambda x: x[None], alone.params))


if __name__ == "__main__":
  absltest.main()
