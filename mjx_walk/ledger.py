"""The rollout ledger: `ledger.jsonl` in a run folder, its records, and a CLI to read it.

One JSON object per line, each with a `kind`:
  recipe  the run's batch geometry, policy lag, family counts, devices, packages, commit and
          manifest hash; the first record (a resumed run appends another);
  update  one per PPO update: speed, returns, every reward term, reset-reason shares, advantage
          and loss statistics, learning rate, device memory, and the batch audits
          (`mjx_walk.audit`: contact events, reward shares, synchrony, and as JSON objects and
          lists the reset reasons per family and the fall height and tilt histograms);
  eval    one per held-out panel evaluation, per stratum;
  divergence  the update at which the run stopped because a loss, gradient norm or parameter
          went non-finite, which ones did, and the checkpoint to resume from.

  python -m mjx_walk.ledger runs/<run>              # recipe, last update, latest evaluation
  python -m mjx_walk.ledger runs/<a> runs/<b>       # latest evaluations side by side

Host-side only (numpy and json), never under jit. Two runs are compared only when their recipes
name the same evaluation panel hash; otherwise the CLI refuses and exits with status 1.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import pathlib
import subprocess
from typing import TYPE_CHECKING, Any

from absl import app
import jax
import numpy as np

from mjx_walk import audit
from mjx_walk import cli
from mjx_walk import config as config_lib
from mjx_walk import run_folder
from mjx_walk import trainer as trainer_lib

if TYPE_CHECKING:
  from mjx_walk import families

FILENAME = run_folder.LEDGER
"""The ledger's name in a run folder (`mjx_walk.run_folder` names every path of a run)."""
KINDS = ("recipe", "update", "eval", "divergence")
_HISTORY_KINDS = ("recipe", "divergence")
PACKAGES = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "flax", "optax", "orbax-checkpoint", "chex",
            "numpy")
_REPO = pathlib.Path(__file__).resolve().parent.parent


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


def recipe(config: config_lib.TrainConfig, manifest: families.Manifest) -> dict[str, Any]:
  """The first record of a run: how much experience each update sees, and on what.

  Args:
    config: the run configuration.
    manifest: the run's seed-family manifest (train and eval families, hashes).

  Returns:
    The `kind="recipe"` record. Times are in seconds of simulated robot time unless named wall.
  """
  samples = config.num_envs * config.unroll_length
  control_hz = config.env.control_hz
  num_train_families = len(manifest.train_families)
  commit, dirty = _git_state()
  return {
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
      "device_kind": jax.devices()[0].device_kind,
      "device_count": jax.device_count(),
      "platform": jax.default_backend(),
      "packages": {name: _package_version(name) for name in PACKAGES},
      "git_commit": commit,
      "git_dirty": dirty,
      "manifest_hash": manifest.hash,
      "panel_hash": manifest.panel_hash,
      "seed": config.seed,
      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }


def update_records(metrics: dict[str, np.ndarray], *, first_update: int, batch_size: int,
                   sps: float, wall_seconds: float, device_memory: int | None) -> list[dict]:
  """One `kind="update"` record per update of a chunk.

  Args:
    metrics: the chunk's metrics on the host, every leaf of shape [K] (K updates).
    first_update: updates done before this chunk.
    batch_size: env steps per update (num_envs * unroll_length).
    sps: env steps per second of wall-clock over the chunk.
    wall_seconds: wall-clock seconds since the run started, at the end of the chunk.
    device_memory: bytes in use on device 0 (`current_device_memory`), or None.

  Returns:
    K records; each update is reduced on its own by `trainer.summarize` (scalars) and
    `audit.summarize` (the non-scalar audits, as JSON objects and lists). The `trace/...`
    metrics are not recorded here (`audit.write_traces` writes them to files).
  """
  num_updates = len(next(iter(metrics.values())))
  records = []
  for k in range(num_updates):
    update = first_update + k + 1
    record = {"kind": "update", "update": update, "env_steps": update * batch_size,
              "perf/sps": sps, "perf/wall_seconds": wall_seconds,
              "device/memory_bytes": device_memory}
    update_metrics = {key: value[k:k + 1] for key, value in metrics.items()}
    record.update(trainer_lib.summarize(update_metrics))
    record.update(audit.summarize(update_metrics))
    records.append(record)
  return records


def eval_record(result: dict[str, Any], *, update: int, env_steps: int,
                wall_seconds: float) -> dict[str, Any]:
  """A `kind="eval"` record: where in the run, then the evaluation result (panel_hash, strata)."""
  return {"kind": "eval", "update": update, "env_steps": env_steps, "wall_seconds": wall_seconds,
          **result}


def current_device_memory() -> int | None:
  """Bytes in use on device 0, or None where the backend reports no statistics (CPU)."""
  stats = jax.devices()[0].memory_stats()
  if not stats or "bytes_in_use" not in stats:
    return None
  return int(stats["bytes_in_use"])


def _jsonable(value: Any) -> Any:
  """JSON has no NaN or inf: undefined figures (no episode ended yet) become null."""
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple, np.ndarray)):
    return [_jsonable(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def _check_kind(record: Any, where: str) -> None:
  kind = record.get("kind") if isinstance(record, dict) else None
  if kind not in KINDS:
    raise ValueError(f"{where}: ledger record kind {kind!r} is invalid; accepted kinds are "
                     f"{', '.join(KINDS)}.")


class Ledger:
  """Appends records to a ledger file, one flushed JSON line each.

  Usage: `with Ledger(run_dir / FILENAME) as ledger: ledger.write(record)`.
  """

  def __init__(self, path: pathlib.Path):
    self.path = pathlib.Path(path)
    self._file = self.path.open("a")

  def __enter__(self) -> Ledger:
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def write(self, record: dict[str, Any]) -> None:
    """Appends `record`; NaN and inf anywhere inside it are written as null.

    Raises:
      ValueError: when the record has no `kind` in KINDS.
    """
    _check_kind(record, str(self.path))
    self._file.write(json.dumps(_jsonable(record), allow_nan=False) + "\n")
    self._file.flush()  # a crash loses at most the record being written

  def close(self) -> None:
    self._file.close()


def read(path: pathlib.Path | str) -> list[dict[str, Any]]:
  """Every record of a ledger file, in order.

  Raises:
    FileNotFoundError: naming the path, when there is no such file.
    ValueError: naming the path and line number of a malformed line.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"no ledger at {path}")
  records = []
  with path.open() as file:
    for number, line in enumerate(file, start=1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: malformed ledger line ({error.msg})") from None
      _check_kind(record, f"{path}:{number}")
      records.append(record)
  return records


def truncate_after(path: pathlib.Path | str, update: int, dropped_path: pathlib.Path | str) -> int:
  """Rewinds a ledger to a checkpoint: drops records past `update`, and a torn last line.

  A run killed after its last checkpoint has ledger records that the resumed run will write
  again. They are moved, not deleted, to `dropped_path` (appended); the ledger itself is
  replaced atomically. Recipe and divergence records are history of the run and stay.

  Returns:
    How many lines were moved.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    return 0
  kept, dropped = [], []
  for line in path.read_text().splitlines(keepends=True):
    try:
      record = json.loads(line)
      keep = record.get("kind") in _HISTORY_KINDS or record.get("update", 0) <= update
    except json.JSONDecodeError:
      keep = False  # a line torn by a kill
    if line.strip():
      (kept if keep else dropped).append(line if line.endswith("\n") else line + "\n")
  if dropped:
    with pathlib.Path(dropped_path).open("a") as file:
      file.writelines(dropped)
    temporary = path.with_suffix(".tmp")
    temporary.write_text("".join(kept))
    os.replace(temporary, path)
  return len(dropped)


def read_run(run_dir: pathlib.Path | str) -> list[dict[str, Any]]:
  """The records of `run_dir`/ledger.jsonl; a missing folder raises FileNotFoundError."""
  run_dir = pathlib.Path(run_dir)
  if not run_dir.is_dir():
    raise FileNotFoundError(f"no run folder at {run_dir}")
  return read(run_folder.RunFolder(run_dir).ledger_path)


def latest(records: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
  """The last record of `kind`, or None."""
  return next((r for r in reversed(records) if r["kind"] == kind), None)


def _fmt(value: float | None, spec: str) -> str:
  return "-" if value is None else format(value, spec)


def _format_learning_rate(schedule: dict[str, float] | None) -> str:
  if schedule is None:  # a recipe written before the schedule was recorded
    return "-"
  if not schedule["desired_kl"]:
    return f"{schedule['initial']:g}, fixed"
  return (f"{schedule['initial']:g}, adapted per minibatch to approx-KL {schedule['desired_kl']:g} "
          f"within [{schedule['min']:g}, {schedule['max']:g}]")


def format_recipe(recipe_record: dict[str, Any]) -> str:
  """A few lines: batch geometry, policy lag, families, devices, commit and hashes."""
  r = recipe_record
  packages = ", ".join(f"{name} {r['packages'].get(name)}" for name in ("jax", "mujoco-mjx", "flax"))
  commit = (r["git_commit"] or "unknown")[:12] + (" (dirty)" if r["git_dirty"] else "")
  return "\n".join([
      f"geometry   {r['num_envs']} envs x {r['unroll_length']} steps = "
      f"{r['samples_per_update']:,} samples/update; {r['num_minibatches']} minibatches of "
      f"{r['minibatch_size']:,}, {r['num_epochs']} epochs (sample reuse {r['sample_reuse']}); "
      f"{r['updates_per_chunk']} updates/chunk",
      f"lr         {_format_learning_rate(r.get('learning_rate'))}",
      f"policy lag {r['seconds_per_env_per_update']:g} s per env per update at "
      f"{r['control_hz']:g} Hz; {r['aggregate_robot_seconds_per_update']:,.1f} robot-seconds "
      f"per update",
      f"families   {r['num_train_families']} train ({r['envs_per_family']} envs each), "
      f"{r['num_eval_families']} eval ({r['num_eval_envs']} envs; {', '.join(r['strata'])})",
      f"devices    {r['device_count']} x {r['device_kind']} ({r['platform']}); {packages}",
      f"commit     {commit}  seed {r['seed']}  started {r['time']}",
      f"manifest   {r['manifest_hash']}  panel {r['panel_hash']}",
  ])


def _resets(counts: dict[str, int | None]) -> str:
  """Nonzero reset-reason counts, most frequent first: 'timeout=28 fall=3'."""
  nonzero = sorted(((n, reason) for reason, n in counts.items() if n), reverse=True)
  return " ".join(f"{reason}={n}" for n, reason in nonzero) or "-"


def format_eval_table(record: dict[str, Any]) -> str:
  """A fixed-width table of one evaluation, one row per stratum."""
  lines = [f"evaluation at update {record['update']} ({record['env_steps']:,} env steps), "
           f"panel {record.get('panel_hash')}",
           f"{'stratum':<10}{'envs':>6}{'success':>9}{'fall':>8}{'length':>9}{'lin err':>9}"
           f"{'yaw err':>9}{'return':>10}  resets"]
  for name, s in record["strata"].items():
    lines.append(
        f"{name:<10}{s['num_envs']:>6}{_fmt(s['success_rate'], '.1%'):>9}"
        f"{_fmt(s['fall_rate'], '.1%'):>8}{_fmt(s['episode_length'], '.1f'):>9}"
        f"{_fmt(s['lin_vel_error'], '.3f'):>9}{_fmt(s['yaw_rate_error'], '.3f'):>9}"
        f"{_fmt(s['return'], '.2f'):>10}  {_resets(s['reset'])}")
  return "\n".join(lines)


_COMPARED = (("success", "success_rate", "+.1%"), ("fall", "fall_rate", "+.1%"),
             ("lin err", "lin_vel_error", "+.3f"), ("yaw err", "yaw_rate_error", "+.3f"))


def format_comparison(a_record: dict[str, Any], b_record: dict[str, Any],
                      names: tuple[str, str]) -> str:
  """Two evaluations side by side: per stratum and metric, run a, run b, and b - a."""
  strata = list(a_record["strata"]) + [s for s in b_record["strata"] if s not in a_record["strata"]]
  lines = [f"a = {names[0]} (update {a_record['update']}), b = {names[1]} "
           f"(update {b_record['update']}); d = b - a",
           f"{'stratum':<10}" + "".join(f"{f'{label} a':>10}{'b':>8}{'d':>8}"
                                        for label, _, _ in _COMPARED)]
  for name in strata:
    a, b = a_record["strata"].get(name, {}), b_record["strata"].get(name, {})
    row = f"{name:<10}"
    for _, key, spec in _COMPARED:
      va, vb = a.get(key), b.get(key)
      diff = None if va is None or vb is None else vb - va
      row += (f"{_fmt(va, spec.lstrip('+')):>10}{_fmt(vb, spec.lstrip('+')):>8}"
              f"{_fmt(diff, spec):>8}")
    lines.append(row)
  return "\n".join(lines)


def _format_update(record: dict[str, Any]) -> str:
  return (f"last update {record['update']}: {record['env_steps']:,} env steps, "
          f"return {_fmt(record.get('episode/return'), '.2f')}, "
          f"sps {_fmt(record.get('perf/sps'), ',.0f')}")


def main(argv: list[str]) -> None:
  """Shows one run, or compares the latest evaluations of two runs on the same panel.

  Raises:
    SystemExit: status 2 for zero or more than two run folders; status 1, with the reason on
      stderr, for a missing or malformed ledger, a run without a recipe, or two runs evaluated
      on different panels.
  """
  run_dirs = argv[1:]
  if not 1 <= len(run_dirs) <= 2:
    cli.refuse(f"give one run folder, or two to compare; got {len(run_dirs)}")
  runs = []
  for run_dir in run_dirs:
    try:
      records = read_run(run_dir)
    except (FileNotFoundError, ValueError) as error:
      cli.refuse(str(error), status=1)
    if latest(records, "recipe") is None:
      cli.refuse(f"{pathlib.Path(run_dir) / FILENAME} has no recipe record", status=1)
    runs.append(records)

  if len(runs) == 1:
    records = runs[0]
    print(format_recipe(latest(records, "recipe")))
    update, evaluation = latest(records, "update"), latest(records, "eval")
    print(_format_update(update) if update else "no update yet")
    print(format_eval_table(evaluation) if evaluation else "no evaluation yet")
    return

  hashes = [latest(records, "recipe")["panel_hash"] for records in runs]
  if hashes[0] != hashes[1]:
    cli.refuse(f"refusing to compare: the evaluation panels differ ({run_dirs[0]}: panel "
               f"{hashes[0]}, {run_dirs[1]}: panel {hashes[1]}). Runs are compared only on the "
               "same panel.", status=1)
  evaluations = [latest(records, "eval") for records in runs]
  for run_dir, evaluation in zip(run_dirs, evaluations):
    if evaluation is None:
      cli.refuse(f"{run_dir} has no evaluation yet; nothing to compare", status=1)
  print(format_comparison(evaluations[0], evaluations[1], (run_dirs[0], run_dirs[1])))


if __name__ == "__main__":
  app.run(main)
