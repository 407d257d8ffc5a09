"""`python -m mjx_walk.sim2sim`: replays a checkpoint's held-out panel in C MuJoCo and sets the
table beside MJX's.

  python -m mjx_walk.sim2sim --run_dir=runs/<run> [--step=N] [--seed=K|best]
                             [--policy=onnx|jax] [--solver=converged|mjx] [--ccd=native|mpr]
                             [--envs_per_family=N] [--strata=NAME,...]

A run of several training seeds needs --seed (the record says which, `seed`); without one, or
with one that names none of the run, the command refuses before anything is compiled or written.
The policy runs in the loop through its ONNX export (`--policy=onnx`, the default: the file
`python -m mjx_walk.export` writes for the step and seed, exported first if there is none) or
through JAX (`--policy=jax`). C MuJoCo runs in float64 with a converged Newton solver
(`--solver=converged`); `--solver=mjx` keeps the robot file's MJX solver settings instead, to tell
a gap the solver makes from one that precision, contacts or the inclined floor make. Its convex
collisions (the feet and knees on a heightfield) recover penetration with MuJoCo's own algorithm
(`--ccd=native`, MuJoCo's default) or libccd's MPR (`--ccd=mpr`), to tell a gap that the
heightfield's cell walls make. The MJX evaluation of the same checkpoint runs first. Each gap
comes with its 95% interval over the stratum's episodes; `--envs_per_family` plays more episodes
of the same evaluation families in both simulators than the run's panel has, to narrow the
intervals; `--strata` replays only the named strata of the panel (MJX still evaluates all of it,
so every env starts as in the full check) and records only those. The record goes to
`sim2sim/<step>.json` and the run's ledger, and the report shows the latest one.
`mjx_walk.deploy.sim2sim` says what is the same and what differs.
"""

from __future__ import annotations

from absl import app
from absl import flags

from mjx_walk import cli
from mjx_walk.deploy import c_options
from mjx_walk.deploy import onnx_export
from mjx_walk.deploy import onnx_policy
from mjx_walk.deploy import sim2sim
from mjx_walk.evaluation import panel
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder

POLICIES = ("onnx", "jax")
_POLICY = flags.DEFINE_string(
    "policy", "onnx", "The policy in C MuJoCo's loop: onnx (the exported file, run by "
    "onnxruntime) or jax (the checkpoint, run by JAX).")
_SOLVER = flags.DEFINE_string(
    "solver", "converged", f"C MuJoCo's solver settings: {', '.join(c_options.SOLVERS)}.")
_CCD = flags.DEFINE_string(
    "ccd", "native", "C MuJoCo's penetration depth and normal of convex collisions: native "
    "(MuJoCo's own, its default) or mpr (libccd's).")
_ENVS_PER_FAMILY = flags.DEFINE_integer(
    "envs_per_family", None, "Envs of each evaluation family, in both simulators; the run's "
    "panel.envs_per_family by default.")
_STRATA = flags.DEFINE_list(
    "strata", None, "The panel strata to replay and record, comma-separated; every stratum of "
    "the run's panel by default.")


def _actor(pol: policy_lib.Policy, kind: str) -> sim2sim.Act:
  """The policy C MuJoCo runs: the step's ONNX export (written first if missing) or JAX."""
  if kind == "jax":
    return pol.act
  path = onnx_export.export_dir(pol) / onnx_policy.FILENAME
  if not path.is_file():
    record, _ = onnx_export.export(pol)
    print(f"exported {path}\n{onnx_export.format_parity(record)}")
  exported = onnx_policy.OnnxPolicy(path)
  return lambda obs: exported.act(obs)[0]


def main(argv: list[str]) -> None:
  """Runs the check and prints the table.

  Raises:
    SystemExit: status 2, with the reason on stderr, for a bad flag, a missing run folder, a
      step without a checkpoint or a seed that names none of the run; status 1 when the step's
      ONNX export fails its parity check.
      Nothing is written then.
  """
  cli.quiet_library_logs()
  if len(argv) > 1:
    cli.refuse(f"unexpected arguments: {argv[1:]}")
  if not cli.RUN_DIR.value:
    cli.refuse("give the run to check: --run_dir=runs/<run>")
  if _POLICY.value not in POLICIES:
    cli.refuse(f"--policy={_POLICY.value!r} is invalid: accepted policies are "
               f"{', '.join(POLICIES)}")
  if _SOLVER.value not in c_options.SOLVERS:
    cli.refuse(f"--solver={_SOLVER.value!r} is invalid: accepted solvers are "
               f"{', '.join(c_options.SOLVERS)}")
  if _CCD.value not in c_options.CCDS:
    cli.refuse(f"--ccd={_CCD.value!r} is invalid: accepted are {', '.join(c_options.CCDS)}")
  if _ENVS_PER_FAMILY.value is not None and _ENVS_PER_FAMILY.value < 1:
    cli.refuse(f"--envs_per_family={_ENVS_PER_FAMILY.value} is invalid: it must be a whole "
               "number of at least 1")
  try:
    pol = policy_lib.load(cli.RUN_DIR.value, cli.STEP.value, cli.SEED.value)
  except (checkpoint.CheckpointError, ValueError) as error:
    cli.refuse(str(error))
  try:
    strata = panel.select_strata(pol.manifest, _STRATA.value)
  except ValueError as error:
    cli.refuse(f"--{error}")
  try:
    act = _actor(pol, _POLICY.value)
  except onnx_export.ParityError as error:
    cli.refuse(str(error), status=1)
  record = sim2sim.check(pol, act, _POLICY.value, _SOLVER.value, _ENVS_PER_FAMILY.value, strata,
                         _CCD.value)
  folder = run_folder.RunFolder(pol.run_dir)
  path = folder.write_sim2sim(record)
  with ledger.Ledger(folder.ledger_path) as run_ledger:
    run_ledger.write(record)
  print(ledger.format_sim2sim(record))
  print(f"recorded in {path} and {folder.ledger_path}")


if __name__ == "__main__":
  app.run(main)
