"""The batch scaling rule: the config for a larger env count, derived from a tuned base config.

Scaling PPO out is not neutral. More envs make a larger batch per update, and a larger batch
changes the optimizer's gradient noise, how far the adaptive learning rate lets each update move
the policy, and how many distinct training conditions a minibatch spans. `scale` applies one rule
for all of it, stated in its docstring; `changes` lists what the rule changed, for printing.
The training command applies it with `--scale_num_envs=N`, before anything is validated,
written or compiled, so the run's config.json holds the scaled values and nothing else needs to
know a run was scaled.

This module is in the config layer: it imports only `mjx_walk.config` and the standard library.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from mjx_walk import config as config_lib

SCALED_FIELDS = (
    "num_envs",
    "total_env_steps",
    "families.num_train_families",
    "ppo.learning_rate",
    "ppo.max_learning_rate",
)
"""The fields `scale` changes; every other field is kept."""


def scale(config: config_lib.TrainConfig, num_envs: int) -> config_lib.TrainConfig:
  """The config for `num_envs` envs, scaled from `config` by the batch rule.

  With k = num_envs / config.num_envs (the base is the config given, overrides included; the
  default's is 512 envs), the rule is:

  - **Kept: the horizon** (`unroll_length`). An env still gathers 0.48 s of experience (24
    control steps at 50 Hz) under one policy before it changes, and GAE still cuts its traces
    at the same length: policy lag and the truncation bias are properties of the horizon, not
    of the number of envs. More envs widen the batch, as in the massively parallel locomotion
    recipe (Rudin et al. 2021: many envs, short horizons).
  - **Kept: `ppo.num_epochs` and `ppo.num_minibatches`.** Sample reuse stays 5 and the optimizer
    takes the same 4 x 5 = 20 Adam steps per update, each on a minibatch k times larger (the
    minibatch size is batch / num_minibatches). The extra samples lower each step's gradient
    noise; they do not buy more steps on the same data, which would move the policy further
    per update and take k times longer per update.
  - **Kept: `ppo.desired_kl`**, the adaptive rate's target. It is the trust region of one
    update, how far the policy may move per batch of experience; the controller then finds the
    rate that keeps the KL there at any batch size.
  - **x sqrt(k): `ppo.learning_rate` and `ppo.max_learning_rate`** (the initial rate and the
    adaptive rate's ceiling; the floor `ppo.min_learning_rate` is kept). A minibatch k times
    larger has gradient noise sqrt(k) times smaller, and Adam's square-root scaling rule
    (Malladi et al. 2022, "On the SDEs and scaling rules for adaptive gradient algorithms";
    linear scaling is SGD's) matches it with a rate sqrt(k) times larger. With a fixed rate
    (`ppo.desired_kl` = 0) this is the rate used throughout. With the adaptive rate it is where
    the first update starts and the limit the controller may not pass, not where it settles:
    in the default's 30-minute run (runs/default30, 512 envs, 1,200 updates) the rate ended its
    first update at 2.25e-3 and then stayed far below both (median 1.7e-4, 90th percentile
    3.1e-4, against the initial 1e-3 and the ceiling 1e-2). Scaling both keeps the ceiling's
    margin as the batch grows; experiments/measurements/scaling_sweep.py measures where the
    equilibrium goes. Both scale by the same factor, so the initial rate stays within [floor,
    ceiling] as `config.validate` requires.
  - **x k: `families.num_train_families`**, so envs per family stay constant (4 in the
    default). Envs of one family are near-duplicates (one seed fixes the spawn pose, command
    schedule and every randomized draw), so a batch's diversity is its number of families;
    without this, the 8192-env batch would be 64 copies of each of the default's 128 conditions.
    Family seeds are drawn as one stream from the run seed, so the base's families stay and
    the new ones are added to them.
  - **x k: `total_env_steps`** (rounded up), so the scaled run makes the same number of
    updates in the same number of chunks as the base: evaluations and checkpoints, counted in
    chunks, fall on the same updates.

  Everything else is kept, the held-out panel included, so scaled and base runs are judged on
  the same panel. A target is refused before anything is built when it is not a positive
  integer, is below the base (the rule scales out: scaling down would drop training families),
  or does not divide as the rule needs: num_envs must be a multiple of the envs per family, so
  the families grow by a whole number, and of `ppo.num_minibatches`.

  Args:
    config: the base config, a valid one (refused with `config.validate`'s error otherwise). It
      is not changed.
    num_envs: the target env count.

  Returns:
    A new, validated config. `scale(config, config.num_envs)` equals `config`.

  Raises:
    ValueError: naming the refused value and what would be accepted (or, for an invalid base,
      the bad field).
  """
  config_lib.validate(config)
  base = config.num_envs
  if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs <= 0:
    _refuse(num_envs, "it must be a positive integer")
  if num_envs < base:
    _refuse(num_envs, f"it must be at least the base config's num_envs={base}: the rule scales "
            "out, and scaling down would drop training families. For a smaller run, set num_envs "
            "and families.num_train_families themselves")
  envs_per_family = base // config.families.num_train_families
  step = math.lcm(envs_per_family, config.ppo.num_minibatches)
  if num_envs % step:
    below, above = num_envs - num_envs % step, num_envs - num_envs % step + step
    nearest = f"{below} or {above}" if below > base else f"{above}"
    _refuse(num_envs, f"it must be a multiple of {step}, so that every family keeps its "
            f"{envs_per_family} envs and the batch splits into ppo.num_minibatches="
            f"{config.ppo.num_minibatches} minibatches (e.g. {nearest})")
  if num_envs != base and config.families.train_family_seeds:
    _refuse(num_envs, "the base config lists its families.train_family_seeds explicitly, and "
            "the rule cannot make up seeds for the new families; leave the seeds empty (derived "
            "from seed) or set the seeds and num_envs by hand")

  root = math.sqrt(num_envs / base)
  scaled = copy.deepcopy(config)
  scaled.num_envs = num_envs
  scaled.total_env_steps = -(-config.total_env_steps * num_envs // base)  # ceil, exact integers
  scaled.families.num_train_families = num_envs // envs_per_family
  scaled.ppo.learning_rate = config.ppo.learning_rate * root
  scaled.ppo.max_learning_rate = config.ppo.max_learning_rate * root
  return config_lib.validate(scaled)


def changes(old: config_lib.TrainConfig,
            new: config_lib.TrainConfig) -> dict[str, tuple[Any, Any]]:
  """{dotted field: (old value, new value)} of every field that differs, in field order.

  For `scale`'s output against its base this lists what the rule changed (a subset of
  `SCALED_FIELDS`); it compares any two configs.
  """
  before, after = config_lib.flat_fields(old), config_lib.flat_fields(new)
  return {key: (before[key], after[key]) for key in before if before[key] != after[key]}


def format_changes(changed: dict[str, tuple[Any, Any]]) -> str:
  """One line per changed field, `  field: old -> new`, as the training command prints them."""
  return "\n".join(f"  {key}: {old!r} -> {new!r}" for key, (old, new) in changed.items())


def _refuse(num_envs: Any, accepted: str) -> None:
  raise ValueError(f"scaling to num_envs={num_envs!r} is refused: {accepted}.")
