"""Batched LAPACK calls on the CPU split so that jaxlib runs each one inline (jax 0.10.x).

jaxlib 0.10's CPU LAPACK kernels (`jaxlib/cpu/lapack_kernels.cc`) estimate a batched call's work
(n^3 / 3 per matrix for a Cholesky factorization, m^2 k for a triangular solve) and, from
`_PARALLEL_WORK` flops up, cut the batch into chunks that they schedule on XLA's intra-op thread
pool, then block until the chunks are done. The kernel itself runs on a worker of that same
pool. With several forced host devices every device's program runs on the one pool, which has
as many workers as the process has cores; when every worker is inside such a call waiting for
its chunks, no worker is left to run them, and the process sleeps forever. MJX's Newton solver
factorizes every env's Hessian (`jax.scipy.linalg.cho_factor`, vmapped: one `potrf` over the
device's envs), so the default config on 2 forced devices on a 2-core machine stalled in its
first chunks: both `tf_XLAEigen` workers in `jax::ParallelBatchMap` under `lapack_spotrf_ffi`,
waiting on a `BlockingCounter`.

`install()` lowers `cholesky` and `triangular_solve` on the CPU as several LAPACK calls over
consecutive slices of the batch, each below `_PARALLEL_WORK`, which jaxlib runs inline on the
calling worker. Each matrix still goes through the same LAPACK routine, so the results are
bitwise those of one call; only jaxlib's fan-out of a large batch over the pool is given up
(20 factorizations and solves of 512 18 x 18 matrices on one device, 2 cores: 17.4 ms -> 20.2 ms).

The threshold and the work estimates were read from jaxlib 0.10.2's `_lapack.so`; the lowerings
wrapped are jax's private CPU rules (`jax._src.lax.linalg`).

Only the jaxlib 0.10 line fans a batch out. From the 0.11 line on, jaxlib's open-source builds run
every batch inline again (jax commit 8599924, "Don't try to parallelize LAPACK kernels in
opensource builds", 2026-07-21): jaxlib 0.10.2's `_lapack.so` holds `ParallelBatchMap`,
`ThreadPool::Schedule` and `absl::BlockingCounter`, jaxlib 0.11.2's and 0.12.0.1's hold none of
them, and on both two forced devices factorized 1,000 times without the split. So `install()`
changes nothing on other lines (`FANS_OUT`), and jax's private modules are imported only on 0.10,
the line pyproject admits on Python 3.11 and CI tests there. `tests/test_cpu_lapack.py` reads the
installed `_lapack.so` and holds `FANS_OUT` to it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from mjx_walk.learn import sharding

FANS_OUT = sharding.JAXLIB_RELEASE == (0, 10)
"""Whether the installed jaxlib's CPU LAPACK kernels fan a large batch out over the intra-op pool
(and `install` splits it)."""

_PARALLEL_WORK = 200_000
"""jaxlib 0.10's threshold: a batched call with at least this much estimated work (flops) is
fanned out over the intra-op pool."""

_installed = False


def _cholesky_work(operand: jax.ShapeDtypeStruct) -> int:
  n = operand.shape[-1]
  return max(1, n ** 3 // 3)


def _triangular_solve_work(a: jax.ShapeDtypeStruct, b: jax.ShapeDtypeStruct) -> int:
  m = a.shape[-1]
  k = b.shape[-1] if b.shape[-2] == m else b.shape[-2]  # the right-hand sides
  return max(1, m * m * k, k * k * m)


def per_call(work_per_matrix: int) -> int:
  """The most matrices one call may hold for jaxlib to run it inline."""
  return max(1, (_PARALLEL_WORK - 1) // work_per_matrix)


def _split(mlir, primitive, lowering, work):
  """A CPU lowering of `primitive` that calls `lowering` on slices of the batch small enough to
  run inline; a batch that is already small enough is lowered unchanged. `mlir` is jax's
  private lowering module."""

  def split_lowering(ctx, *operands, **params):
    avals = ctx.avals_in
    batch_shape = avals[0].shape[:-2]
    batch = math.prod(batch_shape)
    per = per_call(work(*avals))
    if batch <= per or any(aval.shape[:-2] != batch_shape for aval in avals):
      return lowering(ctx, *operands, **params)

    def sliced(*arrays):
      flat = [x.reshape((batch,) + x.shape[-2:]) for x in arrays]
      parts = [primitive.bind(*[x[i:i + per] for x in flat], **params)
               for i in range(0, batch, per)]
      out = jnp.concatenate(parts)
      return out.reshape(batch_shape + out.shape[1:])

    return mlir.lower_fun(sliced, multiple_results=False)(ctx, *operands)

  return split_lowering


def install() -> None:
  """Registers the split CPU lowerings where jaxlib fans batches out (`FANS_OUT`), once.
  Programs lowered afterwards use them. Elsewhere jaxlib's own lowerings stay."""
  global _installed
  if _installed or not FANS_OUT:
    return
  # jax's private lowering rules, of the jaxlib 0.10 line only (see the module's docstring).
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lax import linalg  # pylint: disable=g-import-not-at-top
  mlir.register_lowering(
      linalg.cholesky_p,
      _split(mlir, linalg.cholesky_p, linalg._cholesky_cpu_lowering, _cholesky_work),
      platform="cpu")
  mlir.register_lowering(
      linalg.triangular_solve_p,
      _split(mlir, linalg.triangular_solve_p, linalg._triangular_solve_cpu_lower,
             _triangular_solve_work),
      platform="cpu")
  _installed = True
