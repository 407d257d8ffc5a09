"""The learning layer: networks, observation normalizer, PPO, the in-jit batch audits, the fused
training chunk, and the host reduction of its metrics to ledger records. Imports `config` and
`sim` from the package."""
