"""The evaluation layer: the deterministic held-out panel evaluator, trace files and their replay
in MJX, and the walking criteria a run's evaluations are judged by. Imports `config`, `sim`,
`learn` and `run` from the package."""
