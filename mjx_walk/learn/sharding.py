"""The device mesh a run trains on, and the collectives of its data parallelism.

A run uses every device its processes see, on a 1-D mesh whose one axis, `AXIS`, splits the
global env batch into equal contiguous blocks: device d of D holds envs [d n, (d + 1) n) with
n = num_envs / D, so env i keeps training family i % F whatever D is, and the manifest still
answers "what did env i see". Across hosts, `jax.distributed` makes the mesh span every process's
devices, in process order.

What lives where:
  replicated   the `TrainState` (parameters, optimizer, normalizer, PRNG key, update counter):
               every device holds the same value and computes the same update from averaged
               gradients, so it stays the same (`differing_copies` checks it).
  split        the env states and the episode traces, leading axis [N] split by `AXIS`.

Inside the trainer's `jax.shard_map` each device sees its own block and these collectives, all
of which are the identity on one device (`axis_name` None):
  `mean`                    a float averaged over devices (gradients, loss diagnostics, the KL
                            the adaptive learning rate reads): every device holds an equal
                            share of every batch, so the mean of means is the global mean;
  `total`                   a count summed over devices;
  `local_rows`              this device's block of an array built for the whole batch (the
                            reset keys, the family draws, the action noise), so that env i
                            gets the same key, family and noise on any number of devices.
The normalizer merges its per-device moments exactly (`normalizer.update(axis_name=...)`).

On the host: `Devices.place` puts a host tree onto the mesh (a checkpoint restored on any
device count, a fresh PRNG key), and `to_host` brings a tree back as NumPy, gathering the
blocks other processes hold, so that checkpoints never depend on the device count. Joining the
processes of a multi-process run and the decisions they take together are
`mjx_walk.run.processes`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import jax
from jax.experimental import multihost_utils
import jaxlib.version
import numpy as np

from mjx_walk import config as config_lib

AXIS = "envs"
"""The mesh's one axis: the env batch."""

P = jax.sharding.PartitionSpec


@dataclasses.dataclass(frozen=True)
class Devices:
  """The devices a run trains on: a 1-D mesh over `AXIS`."""

  mesh: jax.sharding.Mesh

  @property
  def count(self) -> int:
    """D, devices in the mesh (over all processes)."""
    return self.mesh.size

  @property
  def processes(self) -> int:
    return len({device.process_index for device in self.mesh.devices.flat})

  @property
  def per_process(self) -> int:
    return self.count // self.processes

  @property
  def kind(self) -> str:
    return self.mesh.devices.flat[0].device_kind

  @property
  def replicated(self) -> jax.sharding.NamedSharding:
    """Every device holds the whole value."""
    return jax.sharding.NamedSharding(self.mesh, P())

  @property
  def split(self) -> jax.sharding.NamedSharding:
    """The leading axis is split into D equal blocks, in device order."""
    return jax.sharding.NamedSharding(self.mesh, P(AXIS))

  def describe(self) -> str:
    """e.g. "4 x cpu" or "16 x NVIDIA H200 (2 processes x 8)"."""
    text = f"{self.count} x {self.kind}"
    if self.processes > 1:
      text += f" ({self.processes} processes x {self.per_process})"
    return text

  def place(self, tree: Any, shardings: Any) -> Any:
    """Puts a tree held whole on every process (NumPy or single-device arrays, the same values
    everywhere) onto the mesh with `shardings` (a tree of `replicated` / `split`, or a prefix of
    it); each process transfers only the blocks its own devices hold. Typed PRNG keys keep
    their type."""

    def one(x, sharding):
      if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(one(jax.random.key_data(x), sharding),
                                        impl=jax.random.key_impl(x))
      host = np.asarray(x)
      return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(one, tree, _broadcast_prefix(shardings, tree))


def _broadcast_prefix(prefix: Any, tree: Any) -> Any:
  """A tree of shardings shaped like `tree`, from a prefix of it (a sharding covers a subtree)."""
  is_sharding = lambda x: isinstance(x, jax.sharding.Sharding)
  return jax.tree.map(lambda s, sub: jax.tree.map(lambda _: s, sub), prefix, tree,
                      is_leaf=is_sharding)


def make(devices: list[jax.Device] | None = None) -> Devices:
  """The 1-D mesh over `devices`, every device of every process by default (process order,
  then each process's own device order)."""
  devices = jax.devices() if devices is None else list(devices)
  devices.sort(key=lambda d: (d.process_index, d.id))
  return Devices(jax.sharding.Mesh(np.array(devices), (AXIS,)))


JAXLIB_RELEASE = tuple(int(part) for part in jaxlib.version.__version__.split(".")[:2])
"""The installed jaxlib's (major, minor) release line, on which the workarounds of faults of one
line key (here and in `cpu_lapack`)."""

SHARDY_FAILS_ON_EMPTY_OPERANDS = JAXLIB_RELEASE == (0, 11)
"""Whether the installed jaxlib's Shardy partitioner kills the process compiling a shard_map one
of whose operands (an input, or a constant its body closes over) holds no element.

jaxlib 0.11.2 does: a segmentation fault in Shardy's canonicalization of the manual computation
(`ManualComputationUnusedInputsPattern`), with no Python exception. MJX's model and data hold
such arrays (no equality constraints, no tendons, no contacts to solve yet), so every program of
the trainer on several devices died in its first compilation. jaxlib 0.10.2 and 0.12.0.1 compile
the same programs. `tests/test_sharding.py` runs the fault's smallest case in a process of its
own on the installed jaxlib and holds this flag to what it sees."""


def avoid_partitioner_faults() -> None:
  """Makes the shard_maps lowered from here on compile on the installed jaxlib: where
  `SHARDY_FAILS_ON_EMPTY_OPERANDS`, the programs are partitioned by GSPMD, JAX's partitioner
  before Shardy (`jax_use_shardy_partitioner` off, the switch JAX's Shardy migration guide
  documents; XLA logs that GSPMD is to be deprecated). Elsewhere nothing changes. Process-wide:
  every program compiled afterwards uses it."""
  if SHARDY_FAILS_ON_EMPTY_OPERANDS:
    jax.config.update("jax_use_shardy_partitioner", False)


def check_geometry(config: config_lib.TrainConfig, num_devices: int) -> None:
  """Refuses a batch that cannot be split evenly over `num_devices`, before anything compiles.

  Each device steps num_envs / D envs and splits its T x num_envs / D samples into
  `ppo.num_minibatches` minibatches; global minibatch m is the union of every device's m-th.

  Raises:
    ValueError: naming the value and what would be accepted.
  """
  envs, minibatches = config.num_envs, config.ppo.num_minibatches
  if envs % num_devices:
    accepted = [n for n in (envs - envs % num_devices, envs - envs % num_devices + num_devices)
                if n > 0]
    raise ValueError(
        f"num_envs={envs} cannot be split over {num_devices} devices: it must be a multiple of "
        f"the device count (e.g. {' or '.join(map(str, accepted))}), or run on fewer devices")
  per_device = envs // num_devices
  if per_device % minibatches:
    raise ValueError(
        f"num_envs={envs} over {num_devices} devices leaves {per_device} envs per device, which "
        f"ppo.num_minibatches={minibatches} does not divide: each device splits its envs' "
        f"samples into the minibatches, so num_envs must be a multiple of "
        f"{num_devices} x {minibatches} = {num_devices * minibatches}")


# INSIDE THE SHARD_MAP


def mean(x: Any, axis_name: str | None) -> Any:
  """The mean over devices of a tree of floats (the identity on one device)."""
  return x if axis_name is None else jax.lax.pmean(x, axis_name)


def total(x: Any, axis_name: str | None) -> Any:
  """The sum over devices of a tree of counts (the identity on one device)."""
  return x if axis_name is None else jax.lax.psum(x, axis_name)


def device_count(axis_name: str | None) -> int:
  """D inside the shard_map (1 without one); static."""
  return 1 if axis_name is None else jax.lax.axis_size(axis_name)


def first_row(num_rows: int, axis_name: str | None) -> jax.Array | int:
  """The global index of this device's first row of a batch of which it holds `num_rows`."""
  return 0 if axis_name is None else jax.lax.axis_index(axis_name) * num_rows


def local_rows(x: jax.Array, axis_name: str | None) -> jax.Array:
  """This device's block of `x`, an array over the whole batch (leading axis [N]): rows
  [d N / D, (d + 1) N / D). The identity on one device."""
  if axis_name is None:
    return x
  rows = x.shape[0] // device_count(axis_name)
  return jax.lax.dynamic_slice_in_dim(x, first_row(rows, axis_name), rows)


# ON THE HOST


def to_host(tree: Any) -> Any:
  """A tree of arrays as NumPy, whole: an array split over other processes' devices is gathered
  from them (a collective every process must join), a typed PRNG key becomes its key data."""

  def one(x):
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)

  return jax.tree.map(one, tree)


def differing_copies(tree: Any) -> list[str]:
  """The leaves of a replicated tree whose copies differ between this process's devices (bitwise,
  NaNs equal), by path; empty when every copy is the same."""
  differing = []
  for path, x in jax.tree_util.tree_leaves_with_path(tree):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    copies = [np.asarray(shard.data) for shard in x.addressable_shards]
    if any(c.shape != copies[0].shape or c.tobytes() != copies[0].tobytes() for c in copies):
      differing.append(jax.tree_util.keystr(path))
  return differing


class NotReplicatedError(RuntimeError):
  """A value every device should hold the same differs between devices or processes."""


def check_replicated(tree: Any, what: str = "the train state") -> None:
  """Raises `NotReplicatedError` unless every device of every process holds the same `tree`
  (bitwise): the copies on this process's devices are compared, then a digest of this
  process's copy with process 0's (a collective every process must join)."""
  differing = differing_copies(tree)
  if differing:
    raise NotReplicatedError(f"{what} differs between this process's devices in "
                             f"{', '.join(differing[:5])}")
  if jax.process_count() == 1:
    return
  digest = hashlib.sha256()
  for leaf in jax.tree.leaves(tree):
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
      leaf = jax.random.key_data(leaf)
    digest.update(np.asarray(leaf.addressable_shards[0].data).tobytes())
  mine = np.frombuffer(digest.digest(), np.uint8)
  process0 = np.asarray(multihost_utils.broadcast_one_to_all(mine))  # process 0's on every one
  if not np.array_equal(process0, mine):
    raise NotReplicatedError(f"{what} of process {jax.process_index()} differs from process 0's")
