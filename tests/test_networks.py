"""Tests for mjx_walk.learn.networks: shapes, the Gaussian's formulas, init, separate parameter trees."""

from __future__ import annotations

import math

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk.learn import networks

_O, _P, _A = 7, 9, 4  # policy obs, critic obs, action widths
_INIT_STD = 0.7


def _make() -> networks.ActorCritic:
  return networks.make_actor_critic(
      action_size=_A,
      actor_hidden_sizes=(16, 8),
      critic_hidden_sizes=(16,),
      activation="elu",
      init_std=_INIT_STD,
  )


def _np_log_prob(mean: np.ndarray, std: np.ndarray, action: np.ndarray) -> np.ndarray:
  """Diagonal Gaussian log density in float64, written out independently."""
  var = std.astype(np.float64) ** 2
  per_dim = -((action - mean) ** 2) / (2 * var) - 0.5 * np.log(2 * np.pi * var)
  return per_dim.sum(-1)


class ActorCriticTest(chex.TestCase):

  def setUp(self):
    super().setUp()
    self.net = _make()
    self.params = self.net.init(jax.random.key(0), _O, _P)

  @chex.variants(with_jit=True, without_jit=True)
  def test_shapes_for_batched_obs(self):
    policy = self.variant(self.net.policy)
    value = self.variant(self.net.value)
    for batch in ((5,), (3, 5)):  # [N, .] and [T, N, .]
      mean, std = policy(self.params, jnp.ones((*batch, _O)))
      chex.assert_shape([mean, std], (*batch, _A))
      chex.assert_shape(value(self.params, jnp.ones((*batch, _P))), batch)

  def test_initial_std_and_small_initial_mean(self):
    obs = jax.random.normal(jax.random.key(1), (32, _O))
    mean, std = self.net.policy(self.params, obs)
    chex.assert_trees_all_close(std, jnp.full((32, _A), _INIT_STD), rtol=1e-6)
    chex.assert_shape(self.params.actor["params"]["log_std"], (_A,))
    # Output gain 0.01: initial actions stay near the default pose.
    self.assertLess(float(jnp.max(jnp.abs(mean))), 0.1)

  def test_zero_biases_at_init(self):
    for tree in (self.params.actor, self.params.critic):
      with_paths = jax.tree_util.tree_leaves_with_path(tree)
      biases = [leaf for path, leaf in with_paths if "bias" in str(path[-1])]
      self.assertNotEmpty(biases)
      for b in biases:
        chex.assert_trees_all_equal(b, jnp.zeros_like(b))

  def test_std_floor(self):
    # A log_std far below log(1e-3), as after a runaway update.
    actor = {"params": {**self.params.actor["params"], "log_std": jnp.full((_A,), -50.0)}}
    params = self.params.replace(actor=actor)
    _, std = self.net.policy(params, jnp.zeros((2, _O)))
    chex.assert_trees_all_close(std, jnp.full((2, _A), 1e-3), rtol=1e-5)

  def test_actor_and_critic_params_are_separate_trees(self):
    actor_leaves = {id(x) for x in jax.tree.leaves(self.params.actor)}
    critic_leaves = {id(x) for x in jax.tree.leaves(self.params.critic)}
    self.assertEmpty(actor_leaves & critic_leaves)
    self.assertIn("log_std", self.params.actor["params"])
    self.assertNotIn("log_std", self.params.critic["params"])

    obs = jax.random.normal(jax.random.key(2), (6, _P))

    def value_loss(params):
      return jnp.mean(jnp.square(self.net.value(params, obs) - 1.0))

    grads = jax.jit(jax.grad(value_loss))(self.params)
    # The critic loss reaches only the critic's parameters.
    chex.assert_trees_all_equal(grads.actor, jax.tree.map(jnp.zeros_like, self.params.actor))
    self.assertGreater(sum(float(jnp.sum(jnp.abs(g))) for g in jax.tree.leaves(grads.critic)), 0.0)

  def test_actor_critic_is_hashable_static(self):
    self.assertEqual(hash(self.net), hash(_make()))
    self.assertEqual(self.net, _make())

  def test_bad_activation_is_rejected(self):
    with self.assertRaisesRegex(ValueError, "activation='gelu'"):
      networks.make_actor_critic(_A, (8,), (8,), "gelu", 1.0)
    with self.assertRaisesRegex(ValueError, "init_std"):
      networks.make_actor_critic(_A, (8,), (8,), "elu", 0.0)


class DistributionTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_log_prob_matches_numpy(self):
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(3, 5, _A)).astype(np.float32)
    std = rng.uniform(0.1, 2.0, size=(3, 5, _A)).astype(np.float32)
    action = rng.normal(size=(3, 5, _A)).astype(np.float32)
    got = self.variant(networks.log_prob)(mean, std, action)
    chex.assert_shape(got, (3, 5))
    chex.assert_trees_all_close(got, _np_log_prob(mean, std, action), rtol=1e-5, atol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_entropy_closed_form(self):
    std = np.array([[0.5, 1.0, 2.0, 0.1], [1.0, 1.0, 1.0, 1.0]], np.float32)
    got = self.variant(networks.entropy)(std)
    # H = sum_i 0.5 * log(2 pi e sigma_i^2)
    expected = np.sum(0.5 * np.log(2 * np.pi * np.e * std.astype(np.float64) ** 2), axis=-1)
    chex.assert_trees_all_close(got, expected, rtol=1e-6)
    self.assertAlmostEqual(float(got[1]), 4 * 0.5 * math.log(2 * math.pi * math.e), places=5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_sample_statistics(self):
    mean = jnp.array([0.0, 1.0, -2.0, 0.5])  # [A]
    std = jnp.array([1.0, 0.1, 2.0, 0.5])  # [A]
    n = 10_000
    means = jnp.broadcast_to(mean, (n, _A))  # [n, A]
    stds = jnp.broadcast_to(std, (n, _A))  # [n, A]
    samples = self.variant(networks.sample)(jax.random.key(3), means, stds)  # [n, A]
    chex.assert_shape(samples, (n, _A))
    # Standard errors: std / sqrt(n) = 1% of std for the mean, ~0.7% for the std.
    np.testing.assert_allclose(samples.mean(0), mean, atol=float(4 * std.max() / math.sqrt(n)))
    np.testing.assert_allclose(samples.std(0), std, rtol=0.04)

  def test_log_prob_consistent_with_samples(self):
    # The log density at the sample's own mean is the Gaussian's maximum.
    mean = jnp.zeros((2, _A))
    std = jnp.ones((2, _A))
    at_mean = networks.log_prob(mean, std, mean)
    expected = jnp.full((2,), -0.5 * _A * math.log(2 * math.pi))
    chex.assert_trees_all_close(at_mean, expected, rtol=1e-6)


if __name__ == "__main__":
  absltest.main()
