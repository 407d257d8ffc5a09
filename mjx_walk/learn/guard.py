"""The divergence guard: which of the watched quantities of an update went non-finite, and the
first update of a chunk where one did.

Inside the jitted chunk, every update reports as `guard/nonfinite` (bool [Q]) which of `GUARDED`
held a NaN or inf: every minibatch's losses and gradient norm, and the parameters, optimizer state
and normalizer after the update (`nonfinite_quantities`, called by `mjx_walk.learn.trainer`). On
the host, `first_divergence` reads the chunk's flags, so the training loop stops a diverged run
before anything of it is saved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:
  from mjx_walk.learn import trainer as trainer_lib


GUARDED = ("loss/total", "loss/policy", "loss/value", "loss/entropy", "loss/approx_kl",
           "loss/grad_norm", "params/actor", "params/critic", "opt_state", "normalizer")
"""What the divergence guard watches: every minibatch's losses and gradient norm, and the
parameters, optimizer state and normalizer after each update (`guard/nonfinite`, bool [Q])."""


def _all_finite(tree) -> jax.Array:
  leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def nonfinite_quantities(loss_metrics: dict[str, jax.Array],
                         train: trainer_lib.TrainState) -> jax.Array:
  """bool [Q]: which of `GUARDED` held a NaN or inf in this update."""
  watched = {name: loss_metrics[name] for name in GUARDED if name.startswith("loss/")}
  watched.update({"params/actor": train.params.actor, "params/critic": train.params.critic,
                  "opt_state": train.opt_state, "normalizer": train.normalizer})
  return jnp.stack([~_all_finite(watched[name]) for name in GUARDED])


def first_divergence(metrics: dict[str, np.ndarray]) -> tuple[int, list[str]] | None:
  """The first update of a chunk whose `guard/nonfinite` fired, and the quantities that did.

  Args:
    metrics: the chunk's metrics on the host, `guard/nonfinite` of shape [K, Q].

  Returns:
    (k, names): k is the 0-based update of the chunk; None when all stayed finite.
  """
  flags = np.asarray(metrics["guard/nonfinite"])  # [K, Q]
  bad = np.flatnonzero(flags.any(axis=1))
  if not bad.size:
    return None
  k = int(bad[0])
  return k, [name for name, flag in zip(GUARDED, flags[k]) if flag]


def seed_divergences(metrics: dict[str, np.ndarray]) -> dict[int, tuple[int, list[str]]]:
  """`first_divergence` of each seed of a multi-seed chunk (`guard/nonfinite` of shape
  [K, S, Q]): {seed: (k, names)} for the seeds whose flags fired in this chunk."""
  flags = np.asarray(metrics["guard/nonfinite"])  # [K, S, Q]
  found = {}
  for seed in range(flags.shape[1]):
    divergence = first_divergence({"guard/nonfinite": flags[:, seed]})
    if divergence is not None:
      found[seed] = divergence
  return found

