"""The run folder: every path of a run, and the one reader and writer of its config, manifest and
evaluation records.

  runs/<name>/
    config.json                 the resolved config (a resume records its resumable changes)
    manifest.json               the seed-family manifest, written once when the run is created
    ledger.jsonl                the rollout ledger (`mjx_walk.run.ledger`)
    ledger.dropped.jsonl        records a resume rewound past, moved out of the ledger
    checkpoints/<update>/       Orbax checkpoints (`mjx_walk.run.checkpoint`)
    checkpoints_unreadable/     checkpoints a resume fell back past, moved aside, never deleted
    eval/<update>.json          each held-out evaluation record (every seed's, in a multi-seed run)
    eval/<update>_seed<k>.json  one seed's evaluation of a multi-seed run (`evaluate --seed=k`)
    eval/<update>_traces.npz    one traced episode per stratum of an evaluation
    sim2sim/<update>.json       each second-simulator check (`python -m mjx_walk.sim2sim`)
    traces/<update>_<i>.npz     early-end traces of the batch audits
    export/<update>/            the ONNX export of a checkpoint (`mjx_walk.deploy.onnx_policy`):
                                policy.onnx and parity.json (re-exporting replaces both)
    export/<update>_seed<k>/    the same of seed k of a multi-seed run
    plots/  videos/<update>/  report.md

A run owns its folder. `RunFolder.create` refuses a folder that already holds anything, before
anything is written, so a new run can never overwrite, append to or rotate out another run's
files; the default folder name (a UTC timestamp) is claimed atomically and never collides.
`RunFolder.open` is for continuing or reading a run that exists. JSON files are written to a
temporary name and renamed into place, so a kill never leaves a torn config or record.

Host-side only: no JAX under jit, no MuJoCo.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
from typing import Any

from mjx_walk import config as config_lib
from mjx_walk.run import ledger
from mjx_walk.sim import families

CONFIG = "config.json"
MANIFEST = "manifest.json"
LEDGER = ledger.FILENAME
DROPPED_LEDGER = "ledger.dropped.jsonl"
CHECKPOINTS = "checkpoints"
UNREADABLE_CHECKPOINTS = "checkpoints_unreadable"
EVAL = "eval"
TRACES_SUFFIX = "_traces.npz"
TRACES = "traces"
SIM2SIM = "sim2sim"
PLOTS = "plots"
VIDEOS = "videos"
EXPORT = "export"
REPORT = "report.md"
DEFAULT_ROOT = pathlib.Path("runs")


class RunFolderError(ValueError):
  """A folder that cannot be used as asked: it already holds files, or holds no run."""


def _write_atomically(path: pathlib.Path, text: str, *, exclusive: bool = False) -> None:
  """Writes `text` to a temporary name beside `path` and renames it into place.

  With `exclusive`, an existing `path` is never replaced (FileExistsError instead).
  """
  temporary = path.with_name(f".{path.name}.tmp")
  temporary.write_text(text)
  if exclusive:
    try:
      os.link(temporary, path)  # fails if `path` exists, atomically
    finally:
      temporary.unlink()
  else:
    os.replace(temporary, path)


@dataclasses.dataclass(frozen=True)
class RunFolder:
  """The paths of one run folder. Build it with `create` (a new run) or `open` (an existing one)."""

  root: pathlib.Path

  @property
  def config_path(self) -> pathlib.Path:
    return self.root / CONFIG

  @property
  def manifest_path(self) -> pathlib.Path:
    return self.root / MANIFEST

  @property
  def ledger_path(self) -> pathlib.Path:
    return self.root / LEDGER

  @property
  def dropped_ledger_path(self) -> pathlib.Path:
    return self.root / DROPPED_LEDGER

  @property
  def checkpoints(self) -> pathlib.Path:
    return self.root.resolve() / CHECKPOINTS

  @property
  def unreadable_checkpoints(self) -> pathlib.Path:
    return self.root.resolve() / UNREADABLE_CHECKPOINTS

  @property
  def eval_dir(self) -> pathlib.Path:
    return self.root / EVAL

  @property
  def traces_dir(self) -> pathlib.Path:
    return self.root / TRACES

  @property
  def sim2sim_dir(self) -> pathlib.Path:
    return self.root / SIM2SIM

  @property
  def plots_dir(self) -> pathlib.Path:
    return self.root / PLOTS

  @property
  def report_path(self) -> pathlib.Path:
    return self.root / REPORT

  def eval_traces_path(self, update: int) -> pathlib.Path:
    return self.eval_dir / f"{update}{TRACES_SUFFIX}"

  def videos_dir(self, update: int | None = None) -> pathlib.Path:
    return self.root / VIDEOS if update is None else self.root / VIDEOS / str(update)

  def export_dir(self, update: int, seed: int | None = None) -> pathlib.Path:
    """Where the ONNX export of checkpoint `update` goes: `export/<update>/`, or for seed k of a
    multi-seed run (`Policy.named_seed`) `export/<update>_seed<k>/`."""
    return self.root / EXPORT / _stem(update, seed)

  # CREATING AND OPENING

  @classmethod
  def create(cls, path: pathlib.Path | str | None, config: config_lib.TrainConfig,
             manifest: families.Manifest) -> RunFolder:
    """Claims a folder for a new run and writes its config and manifest.

    Args:
      path: the folder; None for `runs/<UTC timestamp>`, with `-2`, `-3`, ... appended when a
        run started in the same second already has that name.
      config: the validated run configuration.
      manifest: the run's manifest.

    Raises:
      RunFolderError: `path` exists and is not an empty folder. Nothing is written then.
    """
    if path is None:
      folder = cls(_claim_default_folder())
    else:
      folder = cls(pathlib.Path(path))
      folder.refuse_existing()
      folder.root.mkdir(parents=True, exist_ok=True)
    _write_atomically(folder.config_path, config.to_json(), exclusive=True)
    _write_atomically(folder.manifest_path, manifest.to_json(), exclusive=True)
    return folder

  def refuse_existing(self) -> None:
    """Raises RunFolderError unless `root` is absent or an empty folder."""
    if not self.root.exists():
      return
    if not self.root.is_dir():
      raise RunFolderError(f"--run_dir={self.root} is a file, not a folder; give another "
                           "--run_dir.")
    entries = sorted(p.name for p in self.root.iterdir())
    if not entries:
      return
    held = [name for name in (CONFIG, MANIFEST, LEDGER, CHECKPOINTS) if name in entries]
    shown = ", ".join(held or entries[:5]) + (", ..." if len(entries) > 5 and not held else "")
    what = "already holds a run" if held else "is not empty"
    raise RunFolderError(
        f"--run_dir={self.root} {what} ({shown}); nothing was written. Continue that run with "
        f"--resume={self.root}, or start a new run with another --run_dir.")

  @classmethod
  def open(cls, path: pathlib.Path | str) -> RunFolder:
    """An existing run's folder.

    Raises:
      RunFolderError: naming the path, when there is no run there (no config.json).
    """
    folder = cls(pathlib.Path(path))
    if not folder.config_path.is_file():
      what = "no such folder" if not folder.root.is_dir() else f"{CONFIG} is missing"
      raise RunFolderError(f"{folder.root} holds no run ({what})")
    return folder

  # THE CONFIG, THE MANIFEST AND THE EVALUATION RECORDS

  def read_config(self) -> config_lib.TrainConfig:
    return config_lib.from_dict(json.loads(self.config_path.read_text()))

  def write_config(self, config: config_lib.TrainConfig) -> None:
    """Records a resumed run's config (only `config.RESUMABLE_FIELDS` may have changed)."""
    changes = config_lib.computation_changes(self.read_config(), config)
    if changes:
      raise RunFolderError(f"{self.config_path}: refusing to record a config that changes what "
                           f"the run computes: {changes}")
    _write_atomically(self.config_path, config.to_json())

  def read_manifest(self) -> families.Manifest:
    """The run's manifest, checked against its recorded hash.

    Raises:
      FileNotFoundError: naming the path; ValueError: an edited or corrupted manifest.
    """
    if not self.manifest_path.is_file():
      raise FileNotFoundError(f"no manifest at {self.manifest_path}")
    return families.Manifest.from_json(self.manifest_path.read_text())

  def eval_path(self, update: int, seed: int | None = None) -> pathlib.Path:
    return self.eval_dir / f"{_stem(update, seed)}.json"

  def write_eval(self, record: dict[str, Any]) -> pathlib.Path:
    """Writes an evaluation record to `eval/<update>.json`; returns the path. The record of one
    seed of a multi-seed run (with `seed`) goes to `eval/<update>_seed<k>.json` instead, so
    that the record of every seed keeps its name.

    An evaluation already recorded for the update is never replaced: the same result (same
    panel, same numbers) keeps the existing file, and a different one is written beside it as
    `eval/<update>.<n>.json` (`<update>_seed<k>.<n>.json`).
    """
    return _write_record(self.eval_dir, record, ("panel_hash", "strata"),
                         _stem(record["update"], record.get("seed")))

  def write_sim2sim(self, record: dict[str, Any]) -> pathlib.Path:
    """Writes a second-simulator record to `sim2sim/<update>.json`, never replacing one: as
    `write_eval`, a different result (another policy kind, other numbers) goes beside it."""
    return _write_record(self.sim2sim_dir, record,
                         ("panel_hash", "policy", "seed", "strata", "mjx"), str(record["update"]))


def _stem(update: int, seed: int | None) -> str:
  """A file name's stem: `<update>`, or `<update>_seed<k>` for seed k of a multi-seed run."""
  return str(update) if seed is None else f"{update}_seed{seed}"


def _write_record(directory: pathlib.Path, record: dict[str, Any], identity: tuple[str, ...],
                  stem: str) -> pathlib.Path:
  """Writes `record` to `<directory>/<stem>.json`, or keeps the file already there when it
  has the same `identity` fields, or writes it as `<stem>.<n>.json` beside a different one."""
  directory.mkdir(parents=True, exist_ok=True)
  update = record["update"]
  text = json.dumps(record, indent=1)
  reloaded = json.loads(text)  # as a reload reads it
  result = tuple(reloaded.get(key) for key in identity)
  for n in range(1, 1000):
    path = directory / (f"{stem}.json" if n == 1 else f"{stem}.{n}.json")
    if path.exists():
      saved = json.loads(path.read_text())
      if tuple(saved.get(key) for key in identity) == result:
        return path
      continue
    try:
      _write_atomically(path, text, exclusive=True)
    except FileExistsError:
      continue
    return path
  raise RunFolderError(f"{directory}: too many records for update {update}")


def _claim_default_folder() -> pathlib.Path:
  """Creates and returns a fresh `runs/<UTC timestamp>[-n]` folder (mkdir is the atomic claim)."""
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
  DEFAULT_ROOT.mkdir(parents=True, exist_ok=True)
  for n in range(1, 1000):
    candidate = DEFAULT_ROOT / (stamp if n == 1 else f"{stamp}-{n}")
    try:
      candidate.mkdir()
    except FileExistsError:
      continue
    return candidate
  raise RunFolderError(f"could not claim a new folder under {DEFAULT_ROOT} for {stamp}")
