"""The benchmark timers: the compiled training chunk with XLA's memory estimate, a config's chunk
ready to time and the window that times it, the env's physics-only rollout, and timing one call.

What the throughput measurements share (`experiments/gpu_check.py` and the `bench_*.py` scripts
of `experiments/measurements/`); it defines no flags and touches no file.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp

from mjx_walk import config as config_lib
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state


def time_call(fn: Callable[..., Any], *args: Any) -> float:
  """Wall-clock seconds of `fn(*args)`, waiting until its results are on the device."""
  start = time.perf_counter()
  jax.block_until_ready(fn(*args))
  return time.perf_counter() - start


def program_bytes(compiled: jax.stages.Compiled) -> int | None:
  """XLA's estimate of a compiled program's device memory: arguments, outputs and temporaries.

  Returns:
    The bytes, or None where the backend gives no memory analysis.
  """
  memory = compiled.memory_analysis()
  if memory is None:
    return None
  return (memory.argument_size_in_bytes + memory.output_size_in_bytes
          + memory.temp_size_in_bytes)


@dataclasses.dataclass(frozen=True)
class CompiledChunk:
  """A trainer's fused training chunk, compiled ahead of its first call."""

  compiled: jax.stages.Compiled
  """Called as `compiled(carry) -> (carry, metrics)`; donates the carry like `train_chunk`."""
  seconds: float
  """Lower + compile, wall-clock."""
  bytes: int | None
  """`program_bytes` of the chunk."""


def compile_chunk(trainer: trainer_lib.Trainer, carry: trainer_lib.Carry) -> CompiledChunk:
  """Lowers and compiles `trainer.train_chunk` for `carry`, timing it.

  This counts as the chunk's one trace (`train_chunk` refuses a second), so the chunk must be
  run through the returned `compiled` from then on.
  """
  start = time.perf_counter()
  compiled = trainer.train_chunk.lower(carry).compile()
  seconds = time.perf_counter() - start
  return CompiledChunk(compiled=compiled, seconds=seconds, bytes=program_bytes(compiled))


def training_chunk(cfg: config_lib.TrainConfig
                   ) -> tuple[jax.stages.Compiled, trainer_lib.Carry, int]:
  """`cfg`'s training chunk compiled and called once (out of any timing): (the compiled chunk,
  the carry it returned, env steps per call, every seed's together)."""
  trainer = trainer_lib.make_trainer(config_lib.validate(cfg))
  carry = trainer.init(seeds_lib.initial_keys(cfg))
  compiled = compile_chunk(trainer, carry).compiled
  carry, metrics = compiled(carry)
  jax.block_until_ready(metrics)
  steps = cfg.num_seeds * cfg.num_envs * cfg.unroll_length * cfg.updates_per_chunk
  return compiled, carry, steps


def run_window(compiled: jax.stages.Compiled, carry: trainer_lib.Carry, steps: int,
               seconds: float) -> tuple[trainer_lib.Carry, float]:
  """Calls the chunk until `seconds` have passed: (the carry, env steps/s over the chunks
  finished)."""
  start, done = time.perf_counter(), 0
  while True:
    carry, metrics = compiled(carry)
    jax.block_until_ready(metrics)
    done += 1
    elapsed = time.perf_counter() - start
    if elapsed >= seconds:
      return carry, done * steps / elapsed


def physics_rollout(env: env_lib.LocomotionEnv, num_envs: int, unroll_length: int
                    ) -> Callable[[env_state.EnvState], env_state.EnvState]:
  """A jitted rollout of `unroll_length` steps of the env's own step with zero actions.

  The env's step is the whole of it (physics, observations, rewards, terminations, auto-reset);
  there is no policy. Takes and returns the batched env state (leaves [num_envs, ...]).
  """
  zeros = jnp.zeros((num_envs, env.action_size))

  @jax.jit
  def rollout(state: env_state.EnvState) -> env_state.EnvState:
    return jax.lax.scan(lambda s, _: (jax.vmap(env.step)(s, zeros), None), state, None,
                        unroll_length)[0]

  return rollout
