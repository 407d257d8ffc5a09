"""Runs a command's `main` in this process, as `python -m mjx_walk.<command> <args>` would run it
(imported as `commands`; tests/ is on sys.path).

`run_main` parses the arguments with absl, exactly as `absl.app.run` does (a flag it cannot parse
prints `FATAL Flags parsing error` and exits 1), calls `main` with what is left, and returns the
exit status with everything printed to stdout and stderr. Every flag, the training config's value
included, is restored afterwards, so one test's arguments never leak into the next.
`folder_digest` fingerprints a run folder, to show that a refused command changed nothing.
`load_script` imports a script of experiments/ from its file (no script folder is on sys.path).
`forced_devices` is the environment of a subprocess with forced host devices.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import io
import os
import pathlib
import sys
import types
from typing import Callable
from unittest import mock

from absl import app
from absl import flags
from absl.testing import flagsaver

CONFIG_FLAG = "config"

COLLECTIVE_PATIENCE_SECONDS = 900
"""How long a forced host device waits in a collective for the others. XLA's CPU default (40 s)
aborts the process when one device's thread runs that much behind the other's, as it does on two
cores shared with the other test workers (seen in CI: an all-reduce of the 2-device learning run
killed with SIGABRT). A real stall still fails, after this wait or the test's own timeout."""
"""The training config's flag (`mjx_walk.train`), defined once `mjx_walk.train` is imported."""


@dataclasses.dataclass(frozen=True)
class Ran:
  """What a command did."""

  status: int
  """Exit status: 0 when `main` returned, else the code it exited with."""
  out: str
  err: str


def run_main(main: Callable[[list[str]], None], *args: str) -> Ran:
  """Runs `main` on the command line `prog <args>` and returns what it did.

  Args:
    main: a command's `main(argv)`.
    *args: the command-line arguments, flags and positional ones, in order.
  """
  argv = ["prog", *args]
  out, err = io.StringIO(), io.StringIO()
  status = 0
  with flagsaver.flagsaver(), mock.patch.object(sys, "argv", argv), \
      contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    if CONFIG_FLAG in flags.FLAGS:
      # ml_collections defines one flag per `--config.<field>` of the command line when the
      # config flag takes its default, reading sys.argv: at import in a real command. Taking the
      # default again here defines those of `argv` (flagsaver deletes them on the way out).
      flags.FLAGS.set_default(CONFIG_FLAG, flags.FLAGS[CONFIG_FLAG].default)
    try:
      main(app.parse_flags_with_usage(argv))
    except SystemExit as exit_info:
      status = exit_info.code
  return Ran(status=status, out=out.getvalue(), err=err.getvalue())


def folder_digest(root: pathlib.Path) -> dict[str, str]:
  """{relative path: sha256} of every file under `root`."""
  return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(root.rglob("*")) if p.is_file()}


def load_script(path: pathlib.Path) -> types.ModuleType:
  """The script at `path` as a module named after its file, as `python <path>` would run it but
  without running `main`: its flags are defined in this process."""
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[path.stem] = module  # what its dataclasses and absl's flag registry look up
  spec.loader.exec_module(module)
  return module


def forced_devices(count: int, xla_flags: str = "") -> dict[str, str]:
  """This process's environment for a subprocess whose JAX sees `count` forced host devices, with
  `xla_flags` kept and XLA's CPU collectives waiting `COLLECTIVE_PATIENCE_SECONDS`."""
  return dict(os.environ, XLA_FLAGS=" ".join([
      xla_flags, f"--xla_force_host_platform_device_count={count}",
      f"--xla_cpu_collective_call_terminate_timeout_seconds={COLLECTIVE_PATIENCE_SECONDS}"]).strip())
