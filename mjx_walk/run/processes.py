"""The processes of a multi-process run: joining it, which process writes, and the decisions every
process must take alike.

A run over several hosts is one process per host, joined by `start_processes` (`jax.distributed`)
before anything touches a device; the device mesh then spans every process's devices
(`mjx_walk.learn.sharding`). Process 0 is the primary (`is_primary`): it alone writes the run
folder's files. Whatever is decided from the wall clock or a signal is decided by process 0 and
broadcast (`agree`), or pooled (`any_process`), so every process takes the same branch; `barrier`
waits for all of them at a named point. Each of these is a collective every process must join,
and on one process each returns at once with its own value. `StopRequest` turns SIGTERM and
Ctrl-C into a request that the training loop pools with `any_process`.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import jax
from jax.experimental import multihost_utils
import numpy as np


def start_processes(coordinator_address: str | None = None, num_processes: int | None = None,
                    process_id: int | None = None) -> None:
  """Joins this process to a multi-process run through `jax.distributed.initialize`, before
  anything else touches a device.

  Arguments left None are detected from the cluster's environment as JAX does (Slurm, Open MPI,
  and the `JAX_COORDINATOR_ADDRESS` variable among others). On CPUs the processes exchange
  collectives through gloo.
  """
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(coordinator_address=coordinator_address,
                             num_processes=num_processes, process_id=process_id)
  # Arrays made outside the mesh (the MJX model, the panel's envs) go to this process's own
  # first device; the default would be the first device of all, process 0's.
  jax.config.update("jax_default_device", jax.local_devices()[0])


def is_primary() -> bool:
  """Whether this is process 0, the one that writes the run folder's files."""
  return jax.process_index() == 0


def agree(values: np.ndarray) -> np.ndarray:
  """Process 0's `values` on every process (a collective every process must join), so that
  decisions taken from the wall clock or a signal are the same everywhere."""
  if jax.process_count() == 1:
    return values
  return np.asarray(multihost_utils.broadcast_one_to_all(values))


def barrier(name: str) -> None:
  """Waits until every process reaches the barrier called `name`."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)


def any_process(flag: bool) -> bool:
  """Whether `flag` holds on any process (a collective every process must join)."""
  if jax.process_count() == 1:
    return flag
  return bool(np.any(multihost_utils.process_allgather(np.asarray(flag, np.int32))))


class StopRequest:
  """Turns SIGTERM and Ctrl-C into a request to stop after the current chunk.

  A second Ctrl-C while stopping raises KeyboardInterrupt at once.
  """

  def __init__(self):
    self.requested = False
    self._previous = {}

  def __enter__(self) -> StopRequest:
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGTERM, signal.SIGINT):
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc_info) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)

  def _handle(self, signum: int, frame: Any) -> None:
    del frame
    if self.requested and signum == signal.SIGINT:
      raise KeyboardInterrupt
    self.requested = True
    print(f"\n{signal.Signals(signum).name}: stopping after this chunk and saving a checkpoint "
          "(Ctrl-C again to abort without saving).", flush=True)
