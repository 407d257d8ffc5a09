"""The device mesh a run trains on, and the collectives of its data parallelism.

A run uses every device its processes see, on a 1-D mesh whose one axis, `AXIS`, splits the
global env batch into equal contiguous blocks: device d of D holds envs [d n, (d + 1) n) with
n = num_envs / D, so env i keeps training family i % F whatever D is, and the manifest still
answers "what did env i see". Across hosts, `jax.distributed` makes the mesh span every process's
devices, in process order.

A run of S > 1 training seeds (`config.num_seeds`) has a 2-D mesh, `SEED_AXIS` x `AXIS`: the
seeds are split over G = gcd(S, D) rows of devices and each seed's envs over the D / G devices
of its row. S seeds on S devices (or a multiple) train with no collective between devices at
all; 2 seeds on 8 devices put each seed on 4 devices that average its gradients. Every seed's
train state lives on its row only, the same on each device of the row.

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
                            gets the same key, family and noise on any number of devices;
  `after`                   a tree held back until a loop holding collectives has finished, so
                            that no collective outside the loop runs beside the loop's own.
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
import math
from typing import Any

import jax
from jax.experimental import multihost_utils
import jax.numpy as jnp
import jaxlib.version
import numpy as np

from mjx_walk import config as config_lib

AXIS = "envs"
"""The mesh's env axis: the env batch (the only axis of a single-seed run's mesh)."""
SEED_AXIS = "seeds"
"""The mesh's seed axis, for S > 1 training seeds."""

P = jax.sharding.PartitionSpec


@dataclasses.dataclass(frozen=True)
class Devices:
  """The devices a run trains on: a 1-D mesh over `AXIS`, or with several training seeds a 2-D
  mesh over `SEED_AXIS` x `AXIS`."""

  mesh: jax.sharding.Mesh

  @property
  def count(self) -> int:
    """D, devices in the mesh (over all processes)."""
    return self.mesh.size

  @property
  def seeded(self) -> bool:
    """Whether the mesh has a seed axis (a run of several training seeds)."""
    return SEED_AXIS in self.mesh.axis_names

  @property
  def seed_rows(self) -> int:
    """G, the rows of devices the seeds are split over (1 without a seed axis)."""
    return self.mesh.shape[SEED_AXIS] if self.seeded else 1

  @property
  def env_count(self) -> int:
    """The devices each seed's envs are split over: D / G."""
    return self.mesh.shape[AXIS]

  @property
  def train(self) -> jax.sharding.NamedSharding:
    """Where the train state lives: replicated, or with seeds split over the seed axis."""
    return jax.sharding.NamedSharding(self.mesh, P(SEED_AXIS) if self.seeded else P())

  @property
  def envs(self) -> jax.sharding.NamedSharding:
    """Where the env states live: the env axis split ([N, ...]), or [S, N, ...] split on both."""
    return jax.sharding.NamedSharding(self.mesh, P(SEED_AXIS, AXIS) if self.seeded else P(AXIS))

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
    """e.g. "4 x cpu", "16 x NVIDIA H200 (2 processes x 8)" or, with seeds, "8 x NVIDIA H200,
    seeds over 4 rows of 2"."""
    text = f"{self.count} x {self.kind}"
    if self.processes > 1:
      text += f" ({self.processes} processes x {self.per_process})"
    if self.seeded:
      rows = "1 row" if self.seed_rows == 1 else f"{self.seed_rows} rows"
      text += f", seeds over {rows} of {self.env_count}"
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


def make(devices: list[jax.Device] | None = None, num_seeds: int = 1) -> Devices:
  """The mesh over `devices`, every device of every process by default (process order, then
  each process's own device order): 1-D over `AXIS` for one training seed; for `num_seeds` S > 1,
  gcd(S, D) rows (`SEED_AXIS`) of the D devices in that order, each row one `AXIS`."""
  devices = jax.devices() if devices is None else list(devices)
  devices.sort(key=lambda d: (d.process_index, d.id))
  if num_seeds == 1:
    return Devices(jax.sharding.Mesh(np.array(devices), (AXIS,)))
  rows = math.gcd(num_seeds, len(devices))
  return Devices(jax.sharding.Mesh(np.array(devices).reshape(rows, -1), (SEED_AXIS, AXIS)))


def for_seeds(devices: Devices, num_seeds: int) -> Devices:
  """`devices` arranged for `num_seeds` training seeds (the same devices, `make`'s mesh)."""
  rows = math.gcd(num_seeds, devices.count) if num_seeds > 1 else None
  if devices.seeded == (num_seeds > 1) and (rows is None or devices.seed_rows == rows):
    return devices
  return make(list(devices.mesh.devices.flat), num_seeds)


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
  With S > 1 training seeds the seeds take gcd(S, D) rows of the devices (`make`) and each
  seed's envs are split over the D / gcd(S, D) devices of a row.

  Raises:
    ValueError: naming the value and what would be accepted.
  """
  envs, minibatches, seeds = config.num_envs, config.ppo.num_minibatches, config.num_seeds
  rows = math.gcd(seeds, num_devices)
  over = num_devices // rows
  where = (f"{num_devices} devices" if seeds == 1 else
           f"the {over} devices each seed gets (num_seeds={seeds} over {num_devices} devices "
           f"puts the seeds on {rows} rows of {over})")
  if envs % over:
    accepted = " or ".join(str(n) for n in (envs - envs % over, envs - envs % over + over)
                           if n > 0)
    raise ValueError(
        f"num_envs={envs} cannot be split over {where}: " + (
            f"it must be a multiple of the device count (e.g. {accepted}), or run on fewer "
            "devices" if seeds == 1 else
            f"it must be a multiple of {over} (e.g. {accepted}), or give num_seeds a multiple "
            f"or divisor of {num_devices}"))
  per_device = envs // over
  if per_device % minibatches:
    raise ValueError(
        f"num_envs={envs} over {where} leaves {per_device} envs per device, which "
        f"ppo.num_minibatches={minibatches} does not divide: each device splits its envs' "
        f"samples into the minibatches, so num_envs must be a multiple of "
        f"{over} x {minibatches} = {over * minibatches}")


# INSIDE THE SHARD_MAP


def mean(x: Any, axis_name: str | None) -> Any:
  """The mean over devices of a tree of floats (the identity on one device)."""
  return x if axis_name is None else jax.lax.pmean(x, axis_name)


def total(x: Any, axis_name: str | None) -> Any:
  """The sum over devices of a tree of counts (the identity on one device)."""
  return x if axis_name is None else jax.lax.psum(x, axis_name)


def after(tree: Any, done: Any, axis_name: str | None) -> Any:
  """`tree`, bitwise, but computed once `done` is: the identity on one device.

  On several devices, hand the outputs of a loop that holds collectives through this before
  anything outside it reduces them. XLA's CPU runtime (jaxlib 0.10 to 0.12) orders a program's
  collectives by when they start, not by when they finish, and a loop can return before its
  body has. So the metrics' reductions of an update could start while its PPO epochs still
  waited in an all-reduce. Each waiting collective holds one worker of the one thread pool
  that every forced host device shares. On 2 cores, one device that ran ahead could hold both
  workers, and the other device never reached the collectives it was waited for. CI saw this in
  the 2-device learning run: two all-reduces of one run each waited with one of the two
  devices arrived, until the 900-second timeout. Reading `done` makes each leaf a new value that
  the runtime computes only after the loop has finished. `tests/collective_order.py` reads the
  compiled chunk for any collective that could start before such a loop ends.

  Args:
    tree: arrays of any dtypes.
    done: what the loop wrote (its first leaf, floating-point, is read).
    axis_name: the shard_map's axis; None on one device.
  """
  if axis_name is None:
    return tree
  first = jnp.ravel(jax.tree.leaves(done)[0])[0]
  never = (first != first) & (first == first)  # False, NaN included; XLA cannot fold it
  return jax.tree.map(lambda x: jnp.where(never, jnp.zeros_like(x), x), tree)


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
  NaNs equal), by path; empty when every copy is the same. A leaf split over the seed axis is
  compared block by block: the devices holding the same seeds must hold the same values."""
  differing = []
  for path, x in jax.tree_util.tree_leaves_with_path(tree):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    blocks: dict[str, list[np.ndarray]] = {}
    for shard in x.addressable_shards:
      blocks.setdefault(str(shard.index), []).append(np.asarray(shard.data))
    if any(c.shape != copies[0].shape or c.tobytes() != copies[0].tobytes()
           for copies in blocks.values() for c in copies):
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
    if not leaf.sharding.is_fully_replicated:
      continue  # split over the seed axis: each process holds other seeds
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
      leaf = jax.random.key_data(leaf)
    digest.update(np.asarray(leaf.addressable_shards[0].data).tobytes())
  mine = np.frombuffer(digest.digest(), np.uint8)
  process0 = np.asarray(multihost_utils.broadcast_one_to_all(mine))  # process 0's on every one
  if not np.array_equal(process0, mine):
    raise NotReplicatedError(f"{what} of process {jax.process_index()} differs from process 0's")
