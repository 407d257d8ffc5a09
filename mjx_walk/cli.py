"""What every command-line entry point shares: refusing bad input, a quiet start, and the flags
more than one command reads.

A refusal is one message on stderr, `error: <what is wrong and what would be accepted>`, with exit
status 2 and neither a traceback nor the flag help: the message is the part a user needs. The
entry points call `refuse` for every error a user can cause (a bad flag or config value, a bad
robot file, a run folder that is taken, a checkpoint that fails verification) before anything is
written or compiled.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from absl import flags
from absl import logging

# Flags more than one command reads are defined here, once: absl refuses a flag name defined twice
# in one process, and the commands' `main` functions are imported side by side by the tests.
RUN_DIR = flags.DEFINE_string(
    "run_dir", None, "The run folder. train: the folder a new run writes into (default "
    "runs/<UTC timestamp>); evaluate, export: the run to read.")
STEP = flags.DEFINE_integer(
    "step", None, "Checkpoint step (an update number); default the newest intact checkpoint.")
SEED = flags.DEFINE_string(
    "seed", None, "evaluate, export, sim2sim: which training seed of a multi-seed run: an index "
    "0 to S-1, or best (the best seed by the latest held-out evaluation at or before the step: "
    "policy.best_seed). A single-seed run needs none (0 is accepted). Without it, evaluate "
    "evaluates every seed of a multi-seed run; export and sim2sim refuse one.")

EXIT_REFUSED = 2
"""Exit status of a refused command (bad input; nothing was written)."""


def refuse(message: str, status: int = EXIT_REFUSED) -> NoReturn:
  """Prints `error: message` to stderr and exits with `status`."""
  print(f"error: {message}", file=sys.stderr, flush=True)
  raise SystemExit(status)


def quiet_library_logs() -> None:
  """Keeps library INFO logs (Orbax, MJX) out of the progress output unless --verbosity is set."""
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
