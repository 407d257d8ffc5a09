"""Where a run comes from, written as its ledger's first record: the recipe (the batch geometry,
the policy lag, the family counts and the learning-rate rule of its config), the devices and
processes it trains on, the installed packages' versions and the commit of the repository the
package was loaded from, with whether its working tree had changes.

Read back by `python -m mjx_walk.ledger` and `mjx_walk.run.ledger.format_recipe`; a resumed run
appends another recipe record.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import pathlib
import subprocess
from typing import TYPE_CHECKING
from typing import Any

import jax

from mjx_walk import config as config_lib
from mjx_walk.learn import sharding

if TYPE_CHECKING:
  from mjx_walk.sim import families

PACKAGES = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "flax", "optax", "orbax-checkpoint", "chex",
            "numpy")
_REPO = pathlib.Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
  """Output of a git command in the package's repository, or None without git or a repo."""
  try:
    done = subprocess.run(["git", "-C", str(_REPO), *args], capture_output=True, text=True,
                          timeout=10, check=False)
  except (OSError, subprocess.SubprocessError):
    return None
  return done.stdout if done.returncode == 0 else None


def _git_state() -> tuple[str | None, bool | None]:
  """(commit, dirty) of the repository the package was loaded from."""
  out = _git("rev-parse", "--show-toplevel", "HEAD")
  # An installed copy in a venv inside some other repository must not report that repo's commit.
  if out is None or pathlib.Path(out.split()[0]).resolve() != _REPO:
    return None, None
  status = _git("status", "--porcelain")
  return out.split()[1], None if status is None else bool(status.strip())


def _package_version(name: str) -> str | None:
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def recipe(config: config_lib.TrainConfig, manifest: families.Manifest,
           devices: sharding.Devices | None = None) -> dict[str, Any]:
  """The first record of a run: how much experience each update sees, and on what.

  Args:
    config: the run configuration.
    manifest: the run's seed-family manifest (train and eval families, hashes).
    devices: the mesh the run trains on; every device of every process when omitted.

  Returns:
    The `kind="recipe"` record. Times are in seconds of simulated robot time unless named wall.
  """
  samples = config.num_envs * config.unroll_length
  control_hz = config.env.control_hz
  devices = sharding.for_seeds(devices or sharding.make(), config.num_seeds)
  num_train_families = config.families.num_train_families  # each seed's
  commit, dirty = _git_state()
  record = {
      "kind": "recipe",
      "num_envs": config.num_envs,
      "unroll_length": config.unroll_length,
      "num_minibatches": config.ppo.num_minibatches,
      "num_epochs": config.ppo.num_epochs,
      "control_hz": control_hz,
      "updates_per_chunk": config.updates_per_chunk,
      "samples_per_update": samples,
      # Policy lag: how much experience one env gathers under a policy before it changes.
      "seconds_per_env_per_update": config.unroll_length / control_hz,
      "aggregate_robot_seconds_per_update": samples / control_hz,
      "minibatch_size": samples // config.ppo.num_minibatches,
      "sample_reuse": config.ppo.num_epochs,
      # When and how far the adaptive rule moves the rate (config.PPOConfig.desired_kl).
      "learning_rate": {"initial": config.ppo.learning_rate, "desired_kl": config.ppo.desired_kl,
                        "min": config.ppo.min_learning_rate, "max": config.ppo.max_learning_rate},
      "num_train_families": num_train_families,
      "envs_per_family": config.num_envs // num_train_families,
      "num_eval_families": len(manifest.eval_families),
      "num_eval_envs": config.panel.num_envs,
      "strata": list(config.panel.strata),
      "device_kind": devices.kind,
      "device_count": devices.count,
      "process_count": devices.processes,
      "devices_per_process": devices.per_process,
      # The batch above is global: every device steps num_envs / device_count of the envs and
      # holds that share of every minibatch.
      "envs_per_device": config.num_envs // devices.env_count,
      "platform": jax.default_backend(),
      "packages": {name: _package_version(name) for name in PACKAGES},
      "git_commit": commit,
      "git_dirty": dirty,
      "manifest_hash": manifest.hash,
      "panel_hash": manifest.panel_hash,
      "seed": config.seed,
      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }
  if config.num_seeds > 1:
    # Seed k trains from seed + k, on the run's families or (families_per_seed) its own; the
    # seeds are split over `seed_rows` rows of the devices and each seed's envs over the
    # `devices_per_seed` of its row.
    record.update(num_seeds=config.num_seeds,
                  seeds=[config.seed + k for k in range(config.num_seeds)],
                  families_per_seed=config.families_per_seed,
                  seed_rows=devices.seed_rows, devices_per_seed=devices.env_count)
  return record
