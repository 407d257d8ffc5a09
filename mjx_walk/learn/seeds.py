"""The seed axis of a multi-seed run: the keys its S training seeds start from, the families each
trains on, how they start, and halting a seed whose update went non-finite while the others
train on.

`mjx_walk.learn.trainer` vmaps every update over the seed axis (`config.num_seeds` > 1); this
module owns what is particular to that axis.
"""

from __future__ import annotations

import functools
from typing import Any
from typing import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from mjx_walk import config as config_lib
from mjx_walk.sim import families

if TYPE_CHECKING:
  from mjx_walk.learn import trainer as trainer_lib


def initial_keys(config: config_lib.TrainConfig) -> jax.Array:
  """The key `Trainer.init` starts a new run from: `jax.random.key(config.seed)`, or with
  S > 1 training seeds the [S] keys of seeds `config.seed + k`, so that seed k starts as a
  single-seed run of seed `config.seed + k` would (on the run's families)."""
  if config.num_seeds == 1:
    return jax.random.key(config.seed)
  return jnp.stack([jax.random.key(config.seed + k) for k in range(config.num_seeds)])


def env_families(config: config_lib.TrainConfig, manifest: families.Manifest
                 ) -> families.FamilyParams:
  """Each env's training family draw: env i of seed k gets family i % F of seed k's set, leaves
  [N, ...] ([S, N, ...] with several seeds)."""
  if config.num_seeds == 1 or not config.families_per_seed:
    one = families.for_envs(manifest.train_params(), config.num_envs)
    return one if config.num_seeds == 1 else jax.tree.map(
        lambda x: jnp.stack([x] * config.num_seeds), one)
  per = config.families.num_train_families
  sets = [families.stack_params(manifest.train_families[k * per:(k + 1) * per], manifest.terrain)
          for k in range(config.num_seeds)]
  draws = [families.for_envs(one.replace(index=one.index + k * per), config.num_envs)
           for k, one in enumerate(sets)]  # `index` stays the manifest's: k F + i
  return jax.tree.map(lambda *x: jnp.stack(x), *draws)


def map_init(init: Callable[[Any], Any], num_seeds: int) -> Callable[[Any], Any]:
  """`init` ((key, its envs' family draws) -> one seed's carry) over [S] keys and draws, one
  seed after another (`jax.lax.map`); `init` itself for one seed.

  Not vmapped: batched over seeds, the networks' orthogonal initialisers become batched QR
  factorizations, which jaxlib 0.10 fans out over the CPU's intra-op pool (as it does Cholesky
  factorizations, `mjx_walk.learn.cpu_lapack`), and the actor's and the critic's, running at
  once, left every worker waiting for the other's chunks (4 seeds of 512 envs on the 2-core
  CPU hung in their first init). One at a time, each seed's parameters, optimiser state and
  normaliser are bitwise those a single-seed run started from its key computes (its env states
  agree to float32 rounding).
  """
  if num_seeds == 1:
    return init
  return functools.partial(jax.lax.map, init)


def halt_diverged(before: trainer_lib.TrainState, after: trainer_lib.TrainState,
                  nonfinite: jax.Array) -> trainer_lib.TrainState:
  """The train state after an update of S seeds, with every seed whose update went non-finite
  (`nonfinite`: bool [S, Q], `guard/nonfinite`) or that had halted before kept as it was
  before the update, and marked halted. The update counter and the key advance for every seed,
  so the seeds stay in step."""
  halted = before.halted | jnp.any(nonfinite, axis=-1)  # [S]

  def keep(old: jax.Array, new: jax.Array) -> jax.Array:
    return jnp.where(halted.reshape(halted.shape + (1,) * (new.ndim - 1)), old, new)

  kept = jax.tree.map(keep, (before.params, before.opt_state, before.normalizer),
                      (after.params, after.opt_state, after.normalizer))
  return after.replace(params=kept[0], opt_state=kept[1], normalizer=kept[2], halted=halted)
