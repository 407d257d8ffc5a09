"""The split CPU lowering of batched Cholesky and triangular solves (mjx_walk/learn/cpu_lapack.py):
installed exactly where the installed jaxlib fans a batch out over its thread pool, each LAPACK
call then small enough for jaxlib to run inline, the results bitwise those of one matrix at a
time, and two forced host devices factorizing at once never stall."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mjx_walk.learn import cpu_lapack


def _spd(batch: int, n: int, seed: int = 0) -> np.ndarray:
  x = np.random.RandomState(seed).rand(batch, n, n).astype(np.float32)
  return x @ x.transpose(0, 2, 1) + n * np.eye(n, dtype=np.float32)


def test_the_split_is_installed_exactly_where_jaxlib_fans_a_batch_out():
  # Catches a release gate that splits where jaxlib already runs every batch inline (jax's
  # private lowerings wrapped for nothing) or that leaves a fanning-out jaxlib unsplit (the
  # stall). The reference is the installed kernel library itself: jaxlib's fan-out is its
  # `ParallelBatchMap`, which waits on an `absl::BlockingCounter` (both in jaxlib 0.10.2's
  # `_lapack.so`, neither in 0.11.2's or 0.12.0.1's).
  library = pathlib.Path(importlib.util.find_spec("jaxlib.cpu._lapack").origin).read_bytes()
  fans_out = b"ParallelBatchMap" in library or b"BlockingCounter" in library
  assert cpu_lapack.FANS_OUT == fans_out


def test_a_large_batch_becomes_calls_that_run_inline_with_the_same_results():
  # Where jaxlib fans out, a batch over its threshold must become several calls below it;
  # elsewhere jaxlib's one call stays. Either way each matrix is bitwise its own factorization.
  cpu_lapack.install()
  a = _spd(512, 18)  # MJX's Hessian of the quadruped: 18 dofs
  b = np.random.RandomState(1).rand(512, 18).astype(np.float32)

  def solve(a, b):
    factor = jax.scipy.linalg.cho_factor(a)
    return factor[0], jax.scipy.linalg.cho_solve(factor, b)

  batched = jax.jit(jax.vmap(solve))
  text = batched.lower(a, b).as_text()
  calls = re.findall(
      r"custom_call @lapack_spotrf_ffi\(%[^)]*\) .*: \(tensor<(\d+)x18x18xf32>", text)
  per_call = cpu_lapack.per_call(18 ** 3 // 3) if cpu_lapack.FANS_OUT else 512
  assert len(calls) == -(-512 // per_call)  # 18^3 / 3 flops each: 102 matrices a call
  assert all(int(n) <= per_call for n in calls)
  factor, x = batched(a, b)
  one = jax.jit(solve)  # no batch: one LAPACK call per matrix, never split
  for i in (0, 101, 102, 300, 511):
    f, y = one(a[i], b[i])
    np.testing.assert_array_equal(np.triu(factor[i]), np.triu(f))
    np.testing.assert_array_equal(x[i], y)


def test_a_matrix_that_is_not_positive_definite_still_gives_nans_alone():
  cpu_lapack.install()
  a = _spd(300, 18)
  a[150] = -np.eye(18)
  factor = np.asarray(jax.jit(jax.vmap(jnp.linalg.cholesky))(a))
  assert np.isnan(factor[150]).any()
  assert np.isfinite(np.delete(factor, 150, axis=0)).all()


@pytest.mark.slow
def test_two_forced_devices_factorizing_at_once_do_not_stall():
  # Slow-marked: its process compiles beside the suite's workers and loops 1,000 calls. A smoke check, not a proof: the stall is a race. Without the split lowering, loops like this
  # one stalled in 5 of 10 tries on 2 shared cores (both intra-op workers in jaxlib's LAPACK
  # kernel, waiting for batch chunks no worker was left to run); the proof is that every call
  # is below jaxlib's threshold (the first test).
  script = textwrap.dedent("""
      import jax, numpy as np
      from jax.sharding import Mesh, PartitionSpec as P
      from mjx_walk.learn import cpu_lapack
      cpu_lapack.install()
      mesh = Mesh(np.array(jax.devices()), ("d",))
      def body(a):
        def step(c, _):
          return c + 1e-3 * jax.scipy.linalg.cho_factor(c)[0], None
        return jax.lax.scan(step, a, None, 20)[0]
      f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
      x = np.random.rand(512, 18, 18).astype(np.float32)
      x = x @ x.transpose(0, 2, 1) + 18 * np.eye(18, dtype=np.float32)
      for _ in range(1000):
        jax.block_until_ready(f(x))
      print("done")
  """)
  done = subprocess.run(
      [sys.executable, "-c", script], capture_output=True, text=True, timeout=150,
      env=dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2"))
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stdout.split() == ["done"]
