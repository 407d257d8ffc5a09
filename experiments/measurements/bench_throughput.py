"""Throughput of the fused training chunk against physics-only and policy rollouts of the same env.

  python experiments/measurements/bench_throughput.py --num_envs=1024 --unroll_length=24

Prints ONE JSON line. Every figure is env (control) steps per second after compilation, the
median over --repeats rounds; each round times all variants back to back, so machine noise hits
them alike and the ratios are side by side:
  mjx_sps      bare MJX: the robot's physics substeps only, zero actions, no task logic
  physics_sps  the env's own step (physics, observations, rewards, terminations, auto-reset),
               zero actions, no policy
  rollout_sps  env steps plus the policy (normalise, sample, value) and the early-end trace
               bookkeeping, as in training
  train_sps    the whole training chunk (rollout, GAE, PPO epochs)
  train_over_physics = train_sps / physics_sps, and train_over_mjx = train_sps / mjx_sps
compile_s is the first chunk's lower + compile time; bytes_per_env is XLA's memory estimate for
the compiled chunk (arguments, outputs and temporaries) divided by num_envs.

With a heightfield config (e.g. --config=experiments/recipes/go2_rough.py) the flat default is
also trained at the same batch, in the same rounds:
  flat_train_sps     the flat default's training chunk at the same envs, horizon and updates
  terrain_over_flat  = train_sps / flat_train_sps
(mjx_sps then steps the nominal model, whose heightfield is flat.) With a height scan
(`scan.enabled`, on in go2_rough.py) the same config without it is trained too:
  blind_train_sps    the same config, scan off, at the same batch
  scan_over_blind    = train_sps / blind_train_sps

  python experiments/measurements/bench_throughput.py --config=experiments/recipes/go2_rough.py \
      --num_envs=512

With --num_seeds=S > 1 the chunk trains S seeds of --num_envs envs each (`config.num_seeds`),
and two single-seed chunks are timed in the same rounds:
  train_sps             env steps/s of all S seeds together
  single_train_sps      one seed at the same num_envs
  wide_train_sps        one seed at S x num_envs, the same env steps per chunk
  seeds_over_singles    = train_sps / (S x single_train_sps): S seeds against S separate runs
                          one after another (1.0 would be no cost at all for the seed axis
                          beyond the work itself; a CPU already busy with one seed cannot reach
                          it, a GPU that one seed leaves idle can)
  seeds_over_wide       = train_sps / wide_train_sps: the seed axis against the same work as
                          one batch
  single_bytes_per_env, wide_bytes_per_env  beside bytes_per_env (the S-seed chunk's bytes over
                          S x num_envs)
The physics-only and policy rollouts (mjx_sps, physics_sps, rollout_sps) are then not timed.

  python experiments/measurements/bench_throughput.py --num_envs=512 --num_seeds=4
  python experiments/measurements/bench_throughput.py --num_envs=8 --num_seeds=4 \
      --config.families.num_train_families=8

With --against=<field>=<value> or <section.field>=<value> (repeatable) the same config with
those overrides is trained in the same rounds, each chunk counted by its own env steps (so
`--against=num_envs=512` or `--against=unroll_length=12` compares batch shapes):
  against            the overrides
  against_train_sps  its training chunk
  over_against       = train_sps / against_train_sps

  python experiments/measurements/bench_throughput.py --config=experiments/recipes/go2_rough.py \
      --num_envs=512 --config.terrain.max_contact_points=8 --against=terrain.max_contact_points=0
  python experiments/measurements/bench_throughput.py --config=experiments/recipes/go2_rough.py \
      --num_envs=256 --against=num_envs=512

--config is the training CLI's: a config file, and --config.<field> overrides of any field.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import statistics
import time

from absl import app
from absl import flags
import jax

from mjx_walk import config as config_lib
from mjx_walk import train  # its flag --config: a file, plus --config.<field> overrides
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import throughput
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.sim._mjx import mjx

_NUM_ENVS = flags.DEFINE_integer("num_envs", 1024, "Parallel envs.")
_UNROLL = flags.DEFINE_integer("unroll_length", 24, "Control steps per rollout.")
_UPDATES = flags.DEFINE_integer("updates_per_chunk", 2, "PPO updates per timed training chunk.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed rounds; the median is reported.")
_SEEDS = flags.DEFINE_integer("num_seeds", 1, "Training seeds of --num_envs envs each.")
_AGAINST = flags.DEFINE_multi_string(
    "against", [], "<[section.]field>=<value>: an override of the config trained beside it in the "
    "same rounds (repeatable; the overrides make one config).")


def _overridden(cfg: config_lib.TrainConfig, overrides: list[str]) -> config_lib.TrainConfig:
  """A copy of `cfg` with each `section.field=value` (a Python literal, or a bare string)."""
  cfg = copy.deepcopy(cfg)
  for item in overrides:
    path, equals, text = item.partition("=")
    *sections, name = path.split(".")
    target = cfg
    for section in sections:
      target = getattr(target, section, None)
    if not equals or target is None or not hasattr(target, name):
      raise app.UsageError(f"--against={item!r} is invalid: give <[section.]field>=<value> of a "
                           "field of the config")
    try:
      value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
      value = text
    setattr(target, name, value)
  return config_lib.validate(cfg)


def main(argv):
  del argv
  cfg = train.config_flag()
  cfg.num_envs, cfg.unroll_length = _NUM_ENVS.value, _UNROLL.value
  cfg.updates_per_chunk = _UPDATES.value
  cfg.num_seeds = _SEEDS.value
  config_lib.validate(cfg)
  seeds = cfg.num_seeds
  others = {}  # name -> its config, trained at the same batch in the same rounds
  if seeds > 1:
    others["single"] = dataclasses.replace(cfg, num_seeds=1)
    others["wide"] = dataclasses.replace(cfg, num_seeds=1, num_envs=seeds * cfg.num_envs)
  if cfg.terrain.heightfield:
    flat_cfg = config_lib.default()
    flat_cfg.num_envs, flat_cfg.unroll_length = cfg.num_envs, cfg.unroll_length
    flat_cfg.updates_per_chunk = cfg.updates_per_chunk
    others["flat"] = flat_cfg
  if _AGAINST.value:
    others["against"] = _overridden(cfg, _AGAINST.value)
  if cfg.scan.enabled:
    others["blind"] = dataclasses.replace(cfg, scan=dataclasses.replace(cfg.scan, enabled=False))
  chunks, carries, other_bytes = {}, {}, {}
  for name, other in others.items():
    other_trainer = trainer_lib.make_trainer(config_lib.validate(other))
    carries[name] = other_trainer.init(seeds_lib.initial_keys(other))
    compiled = throughput.compile_chunk(other_trainer, carries[name])
    chunks[name], other_bytes[name] = compiled.compiled, compiled.bytes
  trainer = trainer_lib.make_trainer(cfg)
  env = trainer.env
  n, t = cfg.num_envs, cfg.unroll_length
  carry = trainer.init(seeds_lib.initial_keys(cfg))

  @jax.jit
  def mjx_rollout(data):
    step = jax.vmap(lambda d: mjx.step(env.model, d))
    def body(d, _):
      return jax.lax.fori_loop(0, env.substeps, lambda _, x: step(x), d), None
    return jax.lax.scan(body, data, None, t)[0]

  physics_rollout = throughput.physics_rollout(env, n, t)

  @jax.jit
  def policy_rollout(carry):
    carry, traj, _ = trainer.collect(carry)
    return carry, traj.reward

  chunk = throughput.compile_chunk(trainer, carry)
  compiled_chunk, compile_s, chunk_bytes = chunk.compiled, chunk.seconds, chunk.bytes

  env_state = carry.env
  rollouts = seeds == 1  # the env and policy rollouts time one seed's envs
  if rollouts:  # warm every variant once (compiles the three rollouts)
    jax.block_until_ready(mjx_rollout(env_state.data))
    jax.block_until_ready(physics_rollout(env_state))
    jax.block_until_ready(policy_rollout(carry))

  times = {"mjx": [], "physics": [], "rollout": [], "train": [],
           **{f"{name}_train": [] for name in others}}
  for _ in range(_REPEATS.value):
    if rollouts:
      times["mjx"].append(throughput.time_call(mjx_rollout, env_state.data))
      times["physics"].append(throughput.time_call(physics_rollout, env_state))
      times["rollout"].append(throughput.time_call(policy_rollout, carry))
    start = time.perf_counter()
    carry, metrics = compiled_chunk(carry)
    jax.block_until_ready(metrics)
    times["train"].append(time.perf_counter() - start)
    env_state = carry.env
    for name, other in chunks.items():
      start = time.perf_counter()
      carries[name], metrics = other(carries[name])
      jax.block_until_ready(metrics)
      times[f"{name}_train"].append(time.perf_counter() - start)

  # Env steps per timed call: a rollout steps one seed's envs for the unroll; a training chunk
  # steps its own config's chunk for every seed (an --against override may change its envs,
  # unroll or updates, and the wide run has S x num_envs).
  chunk_steps = lambda c: c.num_seeds * c.env_steps_per_chunk
  steps = {"mjx": n * t, "physics": n * t, "rollout": n * t, "train": chunk_steps(cfg),
           **{f"{name}_train": chunk_steps(other) for name, other in others.items()}}
  sps = {name: steps[name] / statistics.median(ts) for name, ts in times.items() if ts}
  rounded = lambda name: round(sps[name]) if name in sps else None
  ratio = lambda a, b: round(sps[a] / sps[b], 3) if a in sps and b in sps else None
  per_env = lambda size, count: None if size is None else round(size / count)
  compared = {}
  if seeds > 1:
    compared.update(
        num_seeds=seeds, single_train_sps=round(sps["single_train"]),
        wide_train_sps=round(sps["wide_train"]),
        seeds_over_singles=round(sps["train"] / (seeds * sps["single_train"]), 3),
        seeds_over_wide=round(sps["train"] / sps["wide_train"], 3),
        single_bytes_per_env=per_env(other_bytes["single"], n),
        wide_bytes_per_env=per_env(other_bytes["wide"], seeds * n))
  if "flat" in others:
    compared.update(ground=cfg.terrain.ground, flat_train_sps=round(sps["flat_train"]),
                    terrain_over_flat=round(sps["train"] / sps["flat_train"], 3))
  if "against" in others:
    compared.update(against=_AGAINST.value, against_train_sps=round(sps["against_train"]),
                    over_against=round(sps["train"] / sps["against_train"], 3))
  if "blind" in others:
    compared.update(scan_points=cfg.scan.num_points, blind_train_sps=round(sps["blind_train"]),
                    scan_over_blind=round(sps["train"] / sps["blind_train"], 3))
  print(json.dumps({
      "num_envs": n,
      "unroll_length": t,
      "updates_per_chunk": cfg.updates_per_chunk,
      "substeps": env.substeps,
      "device": jax.devices()[0].device_kind,
      "mjx_sps": rounded("mjx"),
      "mjx_physics_steps_per_s": None if "mjx" not in sps else round(sps["mjx"] * env.substeps),
      "physics_sps": rounded("physics"),
      "rollout_sps": rounded("rollout"),
      "train_sps": round(sps["train"]),
      "train_over_physics": ratio("train", "physics"),
      "train_over_mjx": ratio("train", "mjx"),
      "rollout_over_physics": ratio("rollout", "physics"),
      "compile_s": round(compile_s, 1),
      "bytes_per_env": per_env(chunk_bytes, seeds * n),
      "repeats": _REPEATS.value,
      **compared,
  }))


if __name__ == "__main__":
  app.run(main)
