"""Exporting a checkpoint's policy to ONNX, checked: the model (`mjx_walk.deploy.onnx_policy`),
its parity with the JAX policy on observations of a real MJX rollout, and the files.

`export(pol)` converts the policy, runs a short MJX rollout of the run's held-out panel env driven
by the policy, feeds its observations to the model in onnxruntime at batch sizes 1, 2 and 7, and
compares both outputs with the JAX policy's clipped action and the targets computed from it. A
model that differs by more than `PARITY_TOLERANCE` raises `ParityError` and nothing is written;
otherwise `export/<step>/policy.onnx` and `export/<step>/parity.json` are written, each in one
rename (exporting a step again replaces both); for seed k of a multi-seed run, into
`export/<step>_seed<k>/` (`export_dir`). `python -m mjx_walk.export` and
`python -m mjx_walk.sim2sim` (for a step not exported yet) call it.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any

import jax
import numpy as np

from mjx_walk.deploy import onnx_policy
from mjx_walk.evaluation import panel
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state

ROLLOUT_ENVS = 7
ROLLOUT_STEPS = 30
"""The parity check's rollout: this many panel envs for this many control steps."""
BATCH_SIZES = (1, 2, 7)
"""Batch sizes the model is run at; each divides ROLLOUT_ENVS * ROLLOUT_STEPS."""
PARITY_TOLERANCE = 1e-5
"""The largest absolute difference (action and joint targets) accepted."""
PARITY = "parity.json"


class ParityError(Exception):
  """The exported model does not compute what the JAX policy computes."""


def export_dir(pol: policy_lib.Policy) -> pathlib.Path:
  """The folder the export of `pol` goes to: `export/<step>/`, or `export/<step>_seed<k>/` for
  seed k of a multi-seed run."""
  return run_folder.RunFolder(pol.run_dir).export_dir(pol.step, pol.named_seed)


def rollout_observations(pol: policy_lib.Policy, num_envs: int, steps: int) -> np.ndarray:
  """Policy observations of a deterministic MJX rollout driven by the policy's mean action.

  The env is the run's held-out panel env (`panel.panel_config`: noise-free observations, the
  panel's episode length; episodes that end are reset), env i in the panel's family i % E, reset
  with keys from the panel seed.

  Args:
    pol: the loaded policy.
    num_envs: envs stepped side by side.
    steps: control steps.

  Returns:
    float32 [steps, num_envs, O]: the observation each env acted on at each step.
  """
  config = panel.panel_config(pol.config)
  env = env_lib.LocomotionEnv(config)
  family, keys = panel.panel_envs(config, pol.manifest, num_envs)  # leaves [N, ...]
  normalize = config.ppo.normalize_observations

  @jax.jit
  def run(params: policy_lib.PolicyParams) -> jax.Array:

    def step(state: env_state.EnvState, _) -> tuple[env_state.EnvState, jax.Array]:
      obs = state.obs["policy"]  # [N, O]
      action = policy_lib.mean_action(pol.networks, normalize, params, obs)  # [N, A]
      return jax.vmap(env.step)(state, action), obs

    state = jax.vmap(env.reset)(keys, family)
    return jax.lax.scan(step, state, None, steps)[1]  # [T, N, O]

  return np.asarray(run(pol.params))


def parity(model: onnx_policy.OnnxPolicy, pol: policy_lib.Policy, obs: np.ndarray,
           batch_sizes: tuple[int, ...]) -> dict[str, dict[str, float]]:
  """The largest absolute differences between the model and the JAX policy.

  The reference is `pol.act` clipped to the config's `env.action_clip` with NumPy, and the
  robot's standing pose plus its action scale times that, in NumPy.

  Args:
    model: the exported model.
    pol: the policy it was exported from.
    obs: float32 [K, O] observations; K is divisible by every batch size.
    batch_sizes: run the model and the policy on consecutive batches of each of these sizes.

  Returns:
    {str(batch size): {"action": max abs diff, "joint_targets": max abs diff}} over all of `obs`.
  """
  robot = env_lib.LocomotionEnv(pol.config).robot
  clip = pol.config.env.action_clip
  default_pose = np.asarray(robot.default_pose, np.float32)  # [A]
  scale = np.float32(robot.spec.action_scale)
  found = {}
  for size in batch_sizes:
    worst = {"action": 0.0, "joint_targets": 0.0}
    for batch in np.split(obs, len(obs) // size):  # each [size, O]
      action, targets = model.act(batch)
      expected = np.clip(np.asarray(pol.act(batch)), -clip, clip)  # [size, A]
      for name, got, want in (("action", action, expected),
                              ("joint_targets", targets, default_pose + scale * expected)):
        worst[name] = max(worst[name], float(np.max(np.abs(got - want))))
    found[str(size)] = worst
  return found


def export(pol: policy_lib.Policy) -> tuple[dict[str, Any], list[str]]:
  """Exports a policy, checks the model against it, and writes both files.

  Returns:
    (the parity record written to parity.json, the paths written).

  Raises:
    ParityError: the model differs from the policy by more than PARITY_TOLERANCE; nothing was
      written.
  """
  data = onnx_policy.to_model(pol).SerializeToString()
  obs = rollout_observations(pol, ROLLOUT_ENVS, ROLLOUT_STEPS)  # [T, N, O]
  diffs = parity(onnx_policy.OnnxPolicy(data), pol, obs.reshape(-1, obs.shape[-1]),
                 BATCH_SIZES)
  worst = max(max(d.values()) for d in diffs.values())
  if not worst <= PARITY_TOLERANCE:
    raise ParityError(f"the ONNX model differs from the JAX policy by up to {worst:.3g} (tolerance "
                     f"{PARITY_TOLERANCE:g}): {diffs}; nothing was written")
  record = {
      "step": pol.step,
      "policy_sha256": hashlib.sha256(data).hexdigest(),
      "observations": {"source": "rollout of the run's held-out panel env driven by the policy",
                       "envs": ROLLOUT_ENVS, "steps": ROLLOUT_STEPS},
      "tolerance": PARITY_TOLERANCE,
      "max_abs_diff": diffs,
  }
  folder = export_dir(pol)
  model_path = onnx_policy.write_atomically(folder / onnx_policy.FILENAME, data)
  parity_path = onnx_policy.write_atomically(folder / PARITY,
                                             (json.dumps(record, indent=1) + "\n").encode())
  return record, [str(model_path), str(parity_path)]


def format_parity(record: dict[str, Any]) -> str:
  """The parity record as lines for people."""
  seen = record["observations"]
  lines = [f"parity with the JAX policy on {seen['envs'] * seen['steps']} observations "
           f"({seen['envs']} panel envs x {seen['steps']} steps), max abs difference:"]
  for size, diffs in record["max_abs_diff"].items():
    lines.append(f"  batch {size:>2}: action {diffs['action']:.2e}  "
                 f"joint_targets {diffs['joint_targets']:.2e}")
  return "\n".join(lines)
