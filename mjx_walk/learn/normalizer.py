"""Running observation statistics as pure functions.

This module owns the observation normalizer: a `NormalizerState` holding the
running mean, population variance and sample count of every observation leaf,
plus three pure functions over it (`init`, `update`, `normalize`). The state is
a pytree, so it lives in the trainer's `TrainState`, is updated inside the
jitted chunk, and is checkpointed and exported with the policy.

Observations are a pytree; in practice `{"policy": [O], "critic": [P]}`. Every
leaf of the statistics has the shape of ONE observation's leaf; batches may
carry any number of leading dims (`[N, O]`, `[T, N, O]`), which `update` merges.
"""

from __future__ import annotations

import math
from typing import Any

import chex
import flax
import jax
import jax.numpy as jnp

PyTree = Any

VAR_EPS = 1e-8
"""Added to the variance under the square root, so a feature that never varies (var == 0) maps
to 0 instead of dividing by zero."""
CLIP = 10.0
"""`normalize`'s default bound on a standardised observation."""


@flax.struct.dataclass
class NormalizerState:
  """Running statistics of an observation pytree.

  Attributes:
    mean: same structure and leaf shapes as one observation; float32.
    var: population variance (divided by count, not count - 1); same structure.
    count: float32 scalar, the number of observations merged so far. Exact up
      to 2**24 samples; past that it rounds by at most one part in 1e7, which
      only perturbs the merge weights by as much.
  """

  mean: PyTree
  var: PyTree
  count: jax.Array


def init(obs_example: PyTree) -> NormalizerState:
  """Creates the identity normalizer (mean 0, var 1, count 0).

  Args:
    obs_example: one observation without batch dims, e.g.
      `{"policy": float32 [O], "critic": float32 [P]}`; arrays or
      `jax.ShapeDtypeStruct`s (only shapes are read), so it can come from
      `jax.eval_shape(env.reset, key).obs`.

  Returns:
    A `NormalizerState` whose `normalize` is the identity.
  """
  mean = jax.tree.map(lambda x: jnp.zeros(x.shape, jnp.float32), obs_example)
  var = jax.tree.map(lambda x: jnp.ones(x.shape, jnp.float32), obs_example)
  return NormalizerState(mean=mean, var=var, count=jnp.zeros((), jnp.float32))


def _merge_leaf(
    mean: jax.Array, var: jax.Array, count: jax.Array, x: jax.Array, n: int,
    axis_name: str | None = None,
) -> tuple[jax.Array, jax.Array]:
  """Merges a batch into one leaf's statistics (Chan et al. parallel update).

  Args:
    mean: float32 [*S] running mean.
    var: float32 [*S] running population variance.
    count: float32 scalar, samples merged so far.
    x: [..., *S] the batch; every leading dim is a sample dim.
    n: the number of samples in the whole batch (the product of x's leading dims, times the
      device count under `axis_name`), static.
    axis_name: inside a shard_map, the device axis over which x is this device's equal share of
      the batch; the batch moments are then those of every device's samples together.

  Returns:
    (new_mean, new_var), float32 [*S] each.
  """
  x = jnp.asarray(x, jnp.float32).reshape((-1, *mean.shape))  # [n / D, *S]
  # Two-pass batch moments: stable in float32, unlike E[x^2] - E[x]^2.
  batch_mean = jnp.mean(x, axis=0)  # [*S]
  batch_var = jnp.mean(jnp.square(x - batch_mean), axis=0)  # [*S]
  if axis_name is not None:
    # Equal shares: the global mean is the mean of the device means, and the global variance
    # the mean of each device's variance plus its mean's squared offset from the global one.
    device_mean = batch_mean
    batch_mean = jax.lax.pmean(device_mean, axis_name)  # [*S]
    batch_var = jax.lax.pmean(batch_var + jnp.square(device_mean - batch_mean), axis_name)

  total = count + n
  # Weights in [0, 1] rather than raw sums (M2 = var * count), so nothing
  # grows with the run length and float32 keeps its precision for long runs.
  # At count == 0 the old statistics get weight 0 and the batch's are taken as is.
  w_old = count / total
  w_new = n / total
  delta = batch_mean - mean  # [*S]
  new_mean = mean + w_new * delta  # [*S]
  new_var = (
      w_old * var + w_new * batch_var + jnp.square(delta) * w_old * w_new
  )  # [*S]
  return new_mean, new_var


def update(state: NormalizerState, obs_batch: PyTree,
           axis_name: str | None = None) -> NormalizerState:
  """Merges a batch of observations into the running statistics.

  Args:
    state: the current statistics.
    obs_batch: same structure as one observation; each leaf float32
      [..., *S] where [*S] is that leaf's observation shape and all leading
      dims (e.g. [T, N]) are sample dims, merged together. At least one sample.
    axis_name: inside a `jax.shard_map`, the device axis over which `obs_batch` is this
      device's equal share of the batch: the statistics then merge every device's samples
      (counts summed, means and variances combined exactly), and stay the same on every device.

  Returns:
    The statistics over every observation seen so far, equal (up to float32
    rounding) to the mean and population variance over their concatenation.
  """
  chex.assert_trees_all_equal_structs(state.mean, obs_batch)
  leaves, treedef = jax.tree.flatten(obs_batch)
  means = treedef.flatten_up_to(state.mean)
  variances = treedef.flatten_up_to(state.var)
  for x, m in zip(leaves, means):
    chex.assert_shape(x, (..., *m.shape))
  # Every leaf of one observation comes from the same step, so all leaves must
  # agree on the number of samples; count is shared.
  sizes = {math.prod(x.shape[: x.ndim - m.ndim]) for x, m in zip(leaves, means)}
  if len(sizes) != 1:
    raise ValueError(
        f"obs_batch leaves disagree on the number of samples: {sorted(sizes)};"
        " every leaf must have the same leading (batch) dims."
    )
  (n,) = sizes
  if n == 0:
    raise ValueError("obs_batch holds no samples; expected at least one.")
  if axis_name is not None:
    n *= jax.lax.axis_size(axis_name)
  merged = [
      _merge_leaf(m, v, state.count, x, n, axis_name)
      for m, v, x in zip(means, variances, leaves)
  ]
  new_mean = treedef.unflatten([m for m, _ in merged])
  new_var = treedef.unflatten([v for _, v in merged])
  return NormalizerState(
      mean=new_mean, var=new_var, count=state.count + jnp.float32(n)
  )


def normalize(state: NormalizerState, obs: PyTree, clip: float = CLIP) -> PyTree:
  """Standardises observations with the running statistics.

  Args:
    state: the statistics.
    obs: same structure as one observation; each leaf [..., *S], any leading
      dims (broadcast against the statistics).
    clip: outputs are clipped to [-clip, clip], so one outlier (e.g. a
      near-constant feature that suddenly moves) cannot blow up the network.

  Returns:
    float32 pytree like `obs`: `(x - mean) / sqrt(var + 1e-8)`, clipped.
  """
  chex.assert_trees_all_equal_structs(state.mean, obs)

  def _one(x: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    chex.assert_shape(x, (..., *mean.shape))
    z = (jnp.asarray(x, jnp.float32) - mean) / jnp.sqrt(var + VAR_EPS)  # [..., *S]
    return jnp.clip(z, -clip, clip)  # [..., *S]

  return jax.tree.map(_one, obs, state.mean, state.var)
