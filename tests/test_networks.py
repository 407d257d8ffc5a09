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


def _np_elu(x: np.ndarray) -> np.ndarray:
  return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def _np_dense(x: np.ndarray, layer: dict) -> np.ndarray:
  return x @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"], np.float64)


class ScanEncoderTest(chex.TestCase):
  """The height scan's own branch: its slice of the observation through its layers, the
  output appended to the rest, in the actor and in the critic."""

  _START, _SCAN = 5, 6  # the scan fills obs[5:11]; the policy obs has 2 values after it
  _O, _P = 13, 16  # the critic's 3 extra inputs come after the policy's

  def setUp(self):
    super().setUp()
    self.net = networks.make_actor_critic(
        _A, (16, 8), (16,), "elu", _INIT_STD, scan=(self._START, self._SCAN),
        scan_encoder_sizes=(10, 3))
    self.params = self.net.init(jax.random.key(4), self._O, self._P)

  def _np_forward(self, tree: dict, obs: np.ndarray, head: str, layers: int) -> np.ndarray:
    """The network written out in float64: the branch, then the MLP on [rest, features]."""
    obs = obs.astype(np.float64)
    start, end = self._START, self._START + self._SCAN
    features = obs[:, start:end]
    for i in range(2):
      features = _np_elu(_np_dense(features, tree["scan_encoder"][f"hidden_{i}"]))
    x = np.concatenate([obs[:, :start], obs[:, end:], features], axis=-1)
    for i in range(layers):
      x = _np_elu(_np_dense(x, tree[head][f"hidden_{i}"]))
    return _np_dense(x, tree[head]["out"])

  def test_layer_shapes(self):
    for tree, width in ((self.params.actor, self._O), (self.params.critic, self._P)):
      branch = tree["params"]["scan_encoder"]
      chex.assert_shape([branch["hidden_0"]["kernel"], branch["hidden_1"]["kernel"]],
                        [(self._SCAN, 10), (10, 3)])
      mlp = tree["params"]["mean" if "mean" in tree["params"] else "value"]
      # The MLP reads the inputs other than the scan, then the branch's 3 features.
      chex.assert_shape(mlp["hidden_0"]["kernel"], (width - self._SCAN + 3, 16))

  @chex.variants(with_jit=True, without_jit=True)
  def test_actor_and_critic_match_numpy(self):
    rng = np.random.default_rng(5)
    # Scale the mean head up so that its output is not ~0 (its init gain is 0.01).
    actor = jax.tree.map(lambda x: x, self.params.actor)
    actor["params"]["mean"]["out"]["kernel"] = actor["params"]["mean"]["out"]["kernel"] * 100.0
    params = self.params.replace(actor=actor)
    obs = rng.normal(size=(4, self._O)).astype(np.float32)
    critic_obs = rng.normal(size=(4, self._P)).astype(np.float32)
    mean, _ = self.variant(self.net.policy)(params, obs)
    value = self.variant(self.net.value)(params, critic_obs)
    chex.assert_trees_all_close(
        mean, self._np_forward(params.actor["params"], obs, "mean", 2), rtol=1e-5, atol=1e-5)
    chex.assert_trees_all_close(
        value, self._np_forward(params.critic["params"], critic_obs, "value", 1)[:, 0],
        rtol=1e-5, atol=1e-5)
    self.assertGreater(float(jnp.std(mean)), 0.01)

  def test_without_sizes_no_branch(self):
    plain = networks.make_actor_critic(_A, (16, 8), (16,), "elu", _INIT_STD,
                                       scan=(self._START, self._SCAN))
    params = plain.init(jax.random.key(4), self._O, self._P)
    self.assertEqual(sorted(params.actor["params"]), ["log_std", "mean"])
    chex.assert_shape(params.actor["params"]["mean"]["hidden_0"]["kernel"], (self._O, 16))

  def test_bad_branch_is_rejected(self):
    with self.assertRaisesRegex(ValueError, r"scan_encoder_sizes=\(8,\) needs a height scan"):
      networks.make_actor_critic(_A, (8,), (8,), "elu", 1.0, scan_encoder_sizes=(8,))
    with self.assertRaisesRegex(ValueError, r"scan_encoder_sizes=\(8, 0\) must hold positive"):
      networks.make_actor_critic(_A, (8,), (8,), "elu", 1.0, scan=(0, 4),
                                 scan_encoder_sizes=(8, 0))


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
