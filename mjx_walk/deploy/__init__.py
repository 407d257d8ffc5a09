"""The deploy layer: a trained policy leaving JAX. Its ONNX model (the exported function, the
metadata a robot needs, the atomic write) and an onnxruntime loader, the checked export (parity
with the JAX policy on a real rollout), and the held-out panel replayed in C MuJoCo beside MJX.
Imports `config`, `sim`, `learn`, `run` and `evaluation` from the package."""
