"""The learning layer: networks, observation normalizer, PPO, the in-jit batch audits, the device
mesh, the fused training chunk, the host reduction of its metrics to ledger records, and the
benchmark timers of the chunk and of the physics alone. Imports `config` and `sim` from the
package."""
