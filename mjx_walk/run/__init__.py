"""The run layer: the run folder and everything saved in it (ledger, checkpoints), the run's
provenance (its recipe record), the processes of a multi-process run, and the policy loaded back
from a checkpoint. Imports `config`, `sim` and `learn` from the package; the ledger module
imports nothing that loads JAX or MuJoCo."""
