"""The training command: flags in, `runner.run` out.

  python -m mjx_walk.train                                   # embedded CPU default
  python -m mjx_walk.train --config=experiments/recipes/go2_flat.py --config.num_envs=1024
  python -m mjx_walk.train --config.total_env_steps=2000000 --run_dir=runs/short
  python -m mjx_walk.train --resume=runs/short --config.total_env_steps=4000000

It reads the flags (`--config` and its `--config.<field>` overrides, `--run_dir`, `--resume`,
`--scale_num_envs`, the multi-process flags), joins a multi-process run when asked, builds the
config (scaled, or the saved one of a resumed run with its resumable changes), calls
`mjx_walk.runner.run`, the training loop, and then builds the finished run's plots and report.md
(`mjx_walk.analysis.report`). Everything a run can be refused for is refused first,
as one `error:` line and exit status 2, before a file is written or anything compiles. SIGTERM or
Ctrl-C saves and exits 0 with the command that resumes the run; a run stopped by the divergence
guard exits 3 with the command that resumes from the last checkpoint.

It trains on every device the process sees (`mjx_walk.learn.sharding`), and across hosts with
`--coordinator_address`, `--num_processes` and `--process_id` (or `--distributed`, which takes
them from the cluster's environment): one command per process, the same flags on each. Every
process steps its own devices' envs and takes part in every chunk, checkpoint and decision;
process 0 alone writes the ledger, evaluations, traces, plots and the report.
"""

from __future__ import annotations

import pathlib
import traceback
from typing import Any

from absl import app
from absl import flags
from ml_collections import config_flags

from mjx_walk import cli
from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk import scaling
from mjx_walk.analysis import report
from mjx_walk.run import checkpoint
from mjx_walk.run import processes
from mjx_walk.run import run_folder


def _config_file(path: str) -> config_lib.TrainConfig:
  """`--config=<file>`: the file's get_config(). A file that is missing, has no get_config(), or
  whose code raises is refused as one `error:` line with exit status 2 (while the flags are
  parsed, before anything is written), never as a traceback."""
  try:
    return config_lib.load_file(path)
  except Exception as error:  # pylint: disable=broad-except
    frames = traceback.extract_tb(error.__traceback__)
    if isinstance(error, ValueError) and frames[-1].name == config_lib.load_file.__name__:
      cli.refuse(str(error))  # load_file's own: no such file, no get_config(), not a TrainConfig
    # Anything else comes from the file's own code: named, with the line it came from.
    lines = [frame.lineno for frame in frames
             if pathlib.Path(frame.filename).resolve() == pathlib.Path(path).resolve()]
    if isinstance(error, SyntaxError) and error.lineno:
      lines.append(error.lineno)
    where = f"line {lines[-1]}" if lines else "loading it"
    message = " ".join(f"{type(error).__name__}: {error}".split())
    cli.refuse(f"--config={path}: {where} raised {message}; a config file must run without error "
               "and define get_config() returning a TrainConfig")


_CONFIG = config_flags.DEFINE_config_dataclass(
    "config",
    config_lib.default(),
    "Run configuration. `--config=path/to/file.py` loads that file's get_config(); "
    "`--config.<field>=value` overrides any field, e.g. --config.ppo.learning_rate=3e-4.",
    parse_fn=_config_file,
)
_RESUME = flags.DEFINE_string(
    "resume", None,
    "Run folder to continue from its newest intact checkpoint, appending to its ledger. The "
    "saved config is used; --config.<field> may change only the run length and how often it "
    "evaluates and saves.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None,
    "Several processes (hosts): host:port of process 0, where the processes meet. Give the same "
    "value, --num_processes and each process's own --process_id to every process.")
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Several processes: how many take part in the run.")
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "Several processes: this process's index, 0 .. num_processes - 1. "
    "Process 0 writes the run folder.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False,
    "Join a multi-process run whose coordinator, process count and process index come from the "
    "cluster's environment, as jax.distributed detects them (Slurm, Open MPI, or "
    "JAX_COORDINATOR_ADDRESS with the flags above).")
_SCALE_NUM_ENVS = flags.DEFINE_integer(
    "scale_num_envs", None,
    "Train with this many envs, scaled from the loaded config (--config and its overrides) by the "
    "batch rule of mjx_walk/scaling.py: the families, the run length and the learning rates "
    "grow with the batch; the horizon, epochs, minibatch count and KL target are kept. Not "
    "with --resume (a resumed run keeps its saved config).")


def _overrides() -> dict[str, Any]:
  """{dotted field: value} of each `--config.<field>` given on the command line."""
  paths = [name[len("config."):] for name in flags.FLAGS
           if name.startswith("config.") and flags.FLAGS[name].present]
  return {path: config_lib.get_field(_CONFIG.value, path) for path in paths}


def _start_processes() -> None:
  """Joins a multi-process run when the flags ask for one; refuses bad values first."""
  given = [_COORDINATOR.present, _NUM_PROCESSES.present, _PROCESS_ID.present]
  if not (_DISTRIBUTED.value or any(given)):
    return
  count, index, address = _NUM_PROCESSES.value, _PROCESS_ID.value, _COORDINATOR.value
  if not _DISTRIBUTED.value and not all(given):
    missing = [f"--{name}" for name, present in
               zip(("coordinator_address", "num_processes", "process_id"), given) if not present]
    cli.refuse(f"a multi-process run needs --coordinator_address, --num_processes and "
               f"--process_id together (missing {', '.join(missing)}), or --distributed to take "
               "them from the cluster's environment")
  if count is not None and count < 1:
    cli.refuse(f"--num_processes={count}: it must be a positive integer")
  if index is not None and count is not None and not 0 <= index < count:
    cli.refuse(f"--process_id={index}: it must be in 0 .. {count - 1} for --num_processes={count}")
  if address is not None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
      cli.refuse(f"--coordinator_address={address!r}: give host:port of process 0, e.g. "
                 "10.0.0.1:1234")
  try:
    processes.start_processes(address, count, index)
  except (ValueError, RuntimeError) as error:
    cli.refuse(f"could not join the multi-process run: {error}")


def config_flag() -> config_lib.TrainConfig:
  """The config --config gives (the CPU default, a file's get_config(), plus each
  --config.<field> override), for the scripts that share the flag."""
  return _CONFIG.value


def apply_scale_flag(config: config_lib.TrainConfig) -> config_lib.TrainConfig:
  """`config` scaled to --scale_num_envs by `scaling.scale`, printing each field it changed;
  `config` itself without the flag. Shared with experiments/measurements/learn_benchmark.py.

  Raises:
    ValueError: a target the rule refuses, or an invalid `config`; nothing is written.
  """
  if _SCALE_NUM_ENVS.value is None:
    return config
  scaled = scaling.scale(config, _SCALE_NUM_ENVS.value)
  changed = scaling.changes(config, scaled)
  print(f"--scale_num_envs={_SCALE_NUM_ENVS.value}: the batch rule (mjx_walk/scaling.py) "
        + (f"changed:\n{scaling.format_changes(changed)}" if changed else "changed nothing"),
        flush=True)
  return scaled


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if _RESUME.value and cli.RUN_DIR.value:
    cli.refuse("give --resume=<run folder> or --run_dir, not both")
  if _RESUME.value and _SCALE_NUM_ENVS.value is not None:
    cli.refuse("give --resume=<run folder> or --scale_num_envs, not both: a resumed run keeps "
               "its saved config")
  _start_processes()  # before anything touches a device
  config = _CONFIG.value
  try:
    config = apply_scale_flag(config)
    if _RESUME.value:
      config = runner.resume_config(pathlib.Path(_RESUME.value), config, _overrides(),
                                    flags.FLAGS["config"].present)
    result = runner.run(config, pathlib.Path(_RESUME.value or cli.RUN_DIR.value) if (
        _RESUME.value or cli.RUN_DIR.value) else None, resume=bool(_RESUME.value))
  except (ValueError, checkpoint.CheckpointError) as error:
    # Bad config values, robot files, run folders and checkpoints: refused before anything is
    # written or compiled (a resume's checkpoints are verified before the folder is touched).
    cli.refuse(str(error))
  except runner.Diverged as error:
    cli.refuse(str(error), status=EXIT_DIVERGED)
  if processes.is_primary() and not result.stopped:
    _report(result.run_dir)


def _report(run_dir: pathlib.Path) -> None:
  """Writes the finished run's plots and report.md, and says where everything is."""
  built = report.build(run_dir, log=lambda _: None)
  folder = run_folder.RunFolder(run_dir)
  print(f"done. config: {folder.config_path}  manifest: {folder.manifest_path}  "
        f"ledger: {folder.ledger_path}  evaluations: {folder.eval_dir}  "
        f"checkpoints: {folder.checkpoints}  report: {built.report} (plots, videos "
        f"and audit flags; rebuild with python -m mjx_walk.report {run_dir})", flush=True)


EXIT_DIVERGED = 3
"""Exit status of a run stopped by the divergence guard."""


if __name__ == "__main__":
  app.run(main)
