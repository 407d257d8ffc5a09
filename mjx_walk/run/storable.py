"""How a JAX tree is stored in an Orbax checkpoint, and rebuilt from one.

Orbax stores non-empty arrays only (mjx.Data has zero-size fields) and has no typed PRNG keys. A
tree is therefore stored as a flat dict {leaf name: NumPy array} of its non-empty leaves, named
by their path (`leaf_name`), typed keys as their uint32 key data, each whole on the host (blocks
held by other processes gathered); on restore it is rebuilt from the abstract tree of the same
structure (`jax.eval_shape`), the empty leaves recreated. `mjx_walk.run.checkpoint` stores every
array item this way.
"""

from __future__ import annotations

import math
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from mjx_walk.learn import sharding


def is_key(x: Any) -> bool:
  return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def leaf_name(path: Any) -> str:
  return re.sub(r"[^A-Za-z0-9_]+", "_", jax.tree_util.keystr(path)).strip("_")


def stored_leaves(tree: Any) -> dict[str, Any]:
  """{leaf name: leaf} for the non-empty leaves of a (concrete or abstract) tree."""
  leaves = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    if math.prod(leaf.shape) == 0:
      continue
    name = leaf_name(path)
    if name in leaves:
      raise ValueError(f"two leaves of a checkpointed tree are both named {name!r}")
    leaves[name] = leaf
  return leaves


def stored_spec(x: Any) -> jax.ShapeDtypeStruct:
  """Shape and dtype a leaf is stored with (a typed key as its key data)."""
  return jax.eval_shape(jax.random.key_data, x) if is_key(x) else jax.ShapeDtypeStruct(
      x.shape, x.dtype)


def to_storable(tree: Any) -> dict[str, np.ndarray]:
  """Whole host NumPy copies of the non-empty leaves (blocks held by other processes gathered),
  typed keys as their key data."""
  return sharding.to_host(stored_leaves(tree))


def restore_args(abstract: Any) -> ocp.args.StandardRestore:
  def target(x):
    spec = stored_spec(x)
    return np.zeros(spec.shape, spec.dtype)
  return ocp.args.StandardRestore({name: target(x) for name, x in stored_leaves(abstract).items()})


def from_storable(stored: dict[str, Any], abstract: Any) -> Any:
  """Rebuilds the tree of `abstract` from stored leaves (empty leaves are recreated)."""
  def restore_leaf(path, spec):
    if math.prod(spec.shape) == 0:
      return jnp.zeros(spec.shape, spec.dtype)
    value = stored[leaf_name(path)]
    if is_key(spec):
      return jax.random.wrap_key_data(jnp.asarray(value))  # the default impl, as jax.random.key
    return jnp.asarray(value, dtype=spec.dtype)
  return jax.tree_util.tree_map_with_path(restore_leaf, abstract)
