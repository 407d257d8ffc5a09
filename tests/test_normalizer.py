"""Tests for mjx_walk.learn.normalizer: running mean/var equal numpy's over the concatenation."""

from __future__ import annotations

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk.learn import normalizer

_O, _P = 5, 3  # policy and critic observation widths


def _random_obs(rng: np.random.Generator, *batch: int) -> dict[str, np.ndarray]:
  """A batch of observations with non-zero means and uneven scales per feature."""
  return {
      "policy": (rng.normal(size=(*batch, _O)) * np.arange(1, _O + 1) + 3.0).astype(np.float32),
      "critic": (rng.normal(size=(*batch, _P)) * 0.5 - 2.0).astype(np.float32),
  }


def _example() -> dict[str, jax.ShapeDtypeStruct]:
  return {
      "policy": jax.ShapeDtypeStruct((_O,), jnp.float32),
      "critic": jax.ShapeDtypeStruct((_P,), jnp.float32),
  }


class NormalizerTest(chex.TestCase):

  def test_init_is_identity(self):
    state = normalizer.init(_example())
    chex.assert_trees_all_equal(state.mean, {"policy": np.zeros(_O), "critic": np.zeros(_P)})
    chex.assert_trees_all_equal(state.var, {"policy": np.ones(_O), "critic": np.ones(_P)})
    self.assertEqual(float(state.count), 0.0)
    chex.assert_trees_all_equal_shapes_and_dtypes(state.mean, _random_obs(np.random.default_rng(0)))

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_numpy_over_concatenation(self):
    rng = np.random.default_rng(1)
    batches = [_random_obs(rng, n) for n in (64, 1, 200, 37)]
    update = self.variant(normalizer.update)
    state = normalizer.init(_example())
    for b in batches:
      state = update(state, b)
    everything = jax.tree.map(lambda *xs: np.concatenate(xs, axis=0).astype(np.float64), *batches)
    chex.assert_trees_all_close(
        state.mean, jax.tree.map(lambda x: x.mean(0), everything), rtol=1e-5
    )
    chex.assert_trees_all_close(
        state.var, jax.tree.map(lambda x: x.var(0), everything), rtol=1e-5
    )
    self.assertEqual(float(state.count), 64 + 1 + 200 + 37)

  @chex.variants(with_jit=True, without_jit=True)
  def test_first_update_takes_batch_statistics(self):
    # From count 0 the initial (0, 1) statistics must carry no weight at all.
    batch = _random_obs(np.random.default_rng(2), 50)
    state = self.variant(normalizer.update)(normalizer.init(_example()), batch)
    chex.assert_trees_all_close(state.mean, jax.tree.map(lambda x: x.mean(0), batch), rtol=1e-5)
    chex.assert_trees_all_close(state.var, jax.tree.map(lambda x: x.var(0), batch), rtol=1e-5)
    self.assertEqual(float(state.count), 50.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_time_env_batch_equals_flattened(self):
    rng = np.random.default_rng(3)
    update = self.variant(normalizer.update)
    state = update(normalizer.init(_example()), _random_obs(rng, 20))  # some history first
    block = _random_obs(rng, 6, 8)  # [T, N, D]
    flat = jax.tree.map(lambda x: x.reshape(48, -1), block)  # [T * N, D]
    from_block = update(state, block)
    from_flat = update(state, flat)
    chex.assert_trees_all_close(from_block, from_flat, rtol=1e-6)
    self.assertEqual(float(from_block.count), 20 + 48)

  @chex.variants(with_jit=True, without_jit=True)
  def test_normalized_data_is_standard(self):
    rng = np.random.default_rng(4)
    data = _random_obs(rng, 4000)
    state = normalizer.init(_example())
    for chunk in range(4):
      rows = slice(chunk * 1000, (chunk + 1) * 1000)
      state = normalizer.update(state, jax.tree.map(lambda x: x[rows], data))
    normalized = self.variant(normalizer.normalize)(state, data)
    zeros = {"policy": np.zeros(_O), "critic": np.zeros(_P)}
    ones = {"policy": np.ones(_O), "critic": np.ones(_P)}
    chex.assert_trees_all_close(jax.tree.map(lambda x: x.mean(0), normalized), zeros, atol=1e-4)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x.std(0), normalized), ones, atol=1e-3)

  @chex.variants(with_jit=True, without_jit=True)
  def test_normalize_clips(self):
    state = normalizer.init(_example())
    obs = {
        "policy": np.full((2, _O), 50.0, np.float32),
        "critic": np.full((2, _P), -50.0, np.float32),
    }
    out = self.variant(lambda s, o: normalizer.normalize(s, o, clip=5.0))(state, obs)
    expected = {"policy": np.full((2, _O), 5.0), "critic": np.full((2, _P), -5.0)}
    chex.assert_trees_all_close(out, expected)

  def test_long_run_stays_accurate_in_float32(self):
    # Many updates with a large offset: the weighted merge must not drift.
    rng = np.random.default_rng(5)
    update = jax.jit(normalizer.update)
    state = normalizer.init(_example())
    batches = [_random_obs(rng, 512) for _ in range(200)]
    batches = [jax.tree.map(lambda x: x + 1000.0, b) for b in batches]
    for b in batches:
      state = update(state, b)
    everything = jax.tree.map(lambda *xs: np.concatenate(xs, 0).astype(np.float64), *batches)
    expected_mean = jax.tree.map(lambda x: x.mean(0), everything)
    expected_var = jax.tree.map(lambda x: x.var(0), everything)
    chex.assert_trees_all_close(state.mean, expected_mean, rtol=1e-5)
    chex.assert_trees_all_close(state.var, expected_var, rtol=1e-3)
    self.assertEqual(float(state.count), 512 * 200)

  def test_wrong_feature_shape_is_rejected(self):
    state = normalizer.init(_example())
    bad = {"policy": np.zeros((4, _O + 1), np.float32), "critic": np.zeros((4, _P), np.float32)}
    with self.assertRaises(AssertionError):
      normalizer.update(state, bad)


if __name__ == "__main__":
  absltest.main()
