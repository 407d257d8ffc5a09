"""The run layer: the run folder and everything saved in it (ledger, checkpoints) and the policy
loaded back from a checkpoint. Imports `config`, `sim` and `learn` from the package; the ledger
module imports nothing that loads JAX or MuJoCo."""
