"""`python -m mjx_walk.export`: exports a saved checkpoint's policy to ONNX and checks it against
the JAX policy.

  python -m mjx_walk.export --run_dir=runs/<run> [--step=N] [--seed=K|best]

Writes `export/<step>/policy.onnx` into the run folder (the model and its metadata:
`mjx_walk.deploy.onnx_policy`) and `export/<step>/parity.json`. A run of several training seeds
needs --seed: the seed's model goes to `export/<step>_seed<k>/`, and its metadata says which seed
it is; without --seed the command refuses (one `error:` line, exit status 2, nothing written), as
it refuses a seed that names none of the run. Before writing, it runs a short MJX
rollout of the run's held-out panel env driven by the policy, feeds its observations to the
model in onnxruntime at batch sizes 1, 2 and 7, and compares both outputs with the JAX policy's
clipped action and the targets computed from it; it prints the largest absolute differences.
A model that differs by more than `onnx_export.PARITY_TOLERANCE` is refused (exit status 1)
and nothing is written. Exporting a step again replaces both files, each in one rename.
"""

from __future__ import annotations

from absl import app

from mjx_walk import cli
from mjx_walk.deploy import onnx_export
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib

EXIT_PARITY = 1
"""Exit status when the model does not match the JAX policy (nothing was written)."""


def main(argv: list[str]) -> None:
  cli.quiet_library_logs()
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if not cli.RUN_DIR.value:
    cli.refuse("give the run to export: --run_dir=runs/<run>")
  try:
    pol = policy_lib.load(cli.RUN_DIR.value, cli.STEP.value, cli.SEED.value)
  except (checkpoint.CheckpointError, ValueError) as error:
    cli.refuse(str(error))
  try:
    record, written = onnx_export.export(pol)
  except onnx_export.ParityError as error:
    cli.refuse(str(error), EXIT_PARITY)
  print(onnx_export.format_parity(record))
  for path in written:
    print(f"wrote {path}")


if __name__ == "__main__":
  app.run(main)
