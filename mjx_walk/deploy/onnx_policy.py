"""A trained policy as an ONNX model: its graph, its metadata, the file, and a loader that runs it
with onnxruntime.

  model = onnx_policy.to_model(policy.load("runs/<run>"))   # onnx.ModelProto
  onnx_policy.write_atomically(path, model.SerializeToString())
  action, joint_targets = onnx_policy.OnnxPolicy(path).act(obs)   # NumPy float32 [B, A] each

The model has one input and two outputs, float32, with a symbolic batch dimension B:

  obs            [B, O]  the policy observation, laid out as the `observation_layout` metadata
                         says (`mjx_walk.sim.observations`, the layout the env builds from)
  action         [B, A]  the policy's deterministic action (`policy.mean_action`: normalise if
                         the run does, then the actor's mean), clipped to +-`env.action_clip` as
                         the env clips it; the next observation's `last_action`
  joint_targets  [B, A]  standing pose + the robot's action_scale x action, rad, in actuator
                         order: the PD targets the env sends its actuators (without the actuator
                         delay training randomised)

The graph is built node by node with the onnx package's helper API (`graph`), opset `OPSET`,
from the trained parameters, computing what `policy.mean_action` computes:

  z = clip((obs - mean) / sqrt(var + 1e-8), -10, 10)   the observation normaliser, if the run
                                                       normalises (`learn.normalizer.normalize`)
  z = concat(z[not scan], e(z[scan]))                  with a scan branch
                                                       (`network.scan_encoder_sizes`): the
                                                       height scan's values through its layers
                                                       e (act(x @ W_j + b_j) each), appended to
                                                       the other values
  h = act(z @ W_i + b_i)                               each hidden layer of the actor's mean MLP,
                                                       act the run's `network.activation`
  action = clip(h @ W_out + b_out, -action_clip, action_clip)
  joint_targets = default_pose + action_scale * action

The parameters and statistics are constants of the graph (initializers): the model needs nothing
but the observation. Nothing is sampled (the actor's std is not in the graph).

The metadata (`metadata_props`, read back by `OnnxPolicy.metadata`) holds what a robot-side
program needs and where the model came from; every value is JSON text (`json.loads` each one).
Each value is read from the loaded robot, the run's config and manifest and the checkpoint's
progress record, never written here by hand: see `metadata`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import pathlib
from typing import Any
from typing import Callable

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime

from mjx_walk import config as config_lib
from mjx_walk.learn import normalizer
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import env as env_lib

FILENAME = "policy.onnx"
"""The model's file name in `export/<step>/` of a run folder."""
INPUT = "obs"
OUTPUTS = ("action", "joint_targets")
BATCH = "B"
"""The symbolic name of the batch dimension of the input and the outputs."""
PACKAGES = ("mjx_walk", "jax", "flax", "mujoco", "mujoco-mjx", "onnx")
"""Packages whose installed versions the metadata records."""
OPSET = 17
"""The ONNX operator set of the graph (the default domain, nothing else): opset 17, of onnx 1.12
(2022), so that robot-side runtimes of the last years load the model. Every operator the graph
uses (Sub, Div, Clip, MatMul, Add, Mul, Elu, Relu, Tanh, Sigmoid) is defined as it is in opset
14 or earlier. The model's IR version is the lowest that opset needs
(`onnx.helper.find_min_ir_version_for`: 8)."""
GRAPH_NAME = "mjx_walk_policy"
"""The graph's name."""

DOC = (
    "mjx_walk locomotion policy. Input obs [B, O] float32: the policy observation, laid out as "
    "the observation_layout metadata says. Outputs, float32 [B, A] in actuator order "
    "(joint_names): action, the deterministic policy action clipped to +-action_clip (feed it back "
    "as the next observation's last_action), and joint_targets = default_pose + action_scale * "
    "action (rad), the PD position targets. Every metadata value is JSON text.")


def _package_version(name: str) -> str | None:
  """The installed version of a distribution, or None where it is not installed."""
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def _command_ranges(ranges: config_lib.CommandRanges) -> dict[str, list[float]]:
  """Every command range of a config section (`families` or `panel`), by field name."""
  return {field.name: list(getattr(ranges, field.name))
          for field in dataclasses.fields(config_lib.CommandRanges)}


def metadata(pol: policy_lib.Policy, env: env_lib.LocomotionEnv) -> dict[str, Any]:
  """What the model's metadata says, as plain data (`to_model` writes each value as JSON).

  Args:
    pol: the loaded policy.
    env: the run's env, built from `pol.config`.

  Returns:
    {key: JSON-serialisable value}:
      run_name, step, env_steps, manifest_hash: where the model came from (the run folder's
        name, the checkpoint's update step and env steps, the run manifest's content hash);
      seed, num_seeds: which of the run's training seeds the policy is (0 of 1 for a
        single-seed run);
      joint_names: the actuated joints in actuator order (the order of every [A] vector);
      default_pose: the standing pose, rad [A]; action_scale: rad of target per unit action;
      action_clip: the bound on the action;
      kp (N m/rad), kd (N m s/rad), torque_limits (N m [A]) and pd_control: the PD loop the
        policy was trained with (kd is the MJCF joint damping, see pd_control);
      control_hz: the policy rate; physics_timestep: the simulation step it was trained at, s;
      gait_hz: the gait clock's frequency (0: the observation has no clock);
      observation_size, action_size: O and A;
      observation_layout: [{name, offset, size, units, description}] of each observation block,
        in order (the gait clock's definition is in its description);
      normalization_folded: whether the graph normalises the observation with the run's
        statistics (the run's `ppo.normalize_observations`);
      command_ranges: {"train": ..., "panel": ...}, each {command_vx, command_vy,
        command_yaw_rate, command_resample_seconds: [low, high]};
      versions: {package: version} of the exporting environment.
  """
  robot, spec, layout = env.robot, env.robot.spec, env.policy_layout
  _, _, progress, _ = checkpoint.read_json_items(pol.run_dir, pol.step)
  return {
      "run_name": pol.run_dir.name,
      "step": pol.step,
      "env_steps": progress["env_steps"],
      "manifest_hash": pol.manifest.hash,
      "seed": pol.seed,
      "num_seeds": pol.config.num_seeds,
      "joint_names": list(robot.joint_names),
      "default_pose": robot.default_pose.tolist(),
      "action_scale": spec.action_scale,
      "action_clip": pol.config.env.action_clip,
      "kp": spec.kp,
      "kd": spec.kd,
      "torque_limits": robot.torque_limits.tolist(),
      "pd_control": (
          "torque = clip(kp * (joint_targets - q), -torque_limits, torque_limits) - kd * qdot, "
          "per joint, at the physics rate. kp is each position actuator's gain; kd is the MJCF "
          "joint damping MuJoCo applies to every actuated joint, outside the actuator's force "
          "clamp (not an actuator kv)."),
      "control_hz": pol.config.env.control_hz,
      "physics_timestep": float(robot.mj_model.opt.timestep),
      "gait_hz": pol.config.env.gait_hz,
      "observation_size": layout.size,
      "action_size": env.action_size,
      "observation_layout": layout.describe(),
      "normalization_folded": pol.config.ppo.normalize_observations,
      "command_ranges": {"train": _command_ranges(pol.config.families),
                         "panel": _command_ranges(pol.config.panel)},
      "versions": {name: _package_version(name) for name in PACKAGES},
  }


Dense = tuple[np.ndarray, np.ndarray]
"""One Dense layer's (kernel float32 [I, H], bias float32 [H]): y = x @ kernel + bias."""


def actor_layers(pol: policy_lib.Policy) -> list[Dense]:
  """The actor's mean network as Dense layers, in the order it applies them.

  Args:
    pol: the loaded policy.

  Returns:
    [(kernel, bias)] of `hidden_0` ... `hidden_{n-1}` and then `out` (the mean head), float32
    NumPy arrays, with n = len(network.actor_hidden_sizes).

  Raises:
    ValueError: the actor's parameters are not the layers its network declares.
  """
  actor = pol.networks.actor
  mean = pol.params.actor["params"]["mean"]
  names = [f"hidden_{i}" for i in range(len(actor.hidden_sizes))] + ["out"]
  if sorted(mean) != sorted(names):
    raise ValueError(f"the actor's mean network has layers {sorted(mean)}; its network "
                     f"declares {names}")
  layers = [(np.asarray(mean[name]["kernel"], np.float32), np.asarray(mean[name]["bias"],
                                                                       np.float32))
            for name in names]
  inputs = pol.observation_spec.shape[-1]
  if actor.scan_branch is not None:  # the scan's values replaced by the branch's features
    inputs += actor.scan_branch.sizes[-1] - actor.scan_branch.size
  widths = [inputs, *actor.hidden_sizes, actor.action_size]
  shapes = [(kernel.shape, bias.shape) for kernel, bias in layers]
  if shapes != [((i, o), (o,)) for i, o in zip(widths[:-1], widths[1:])]:
    raise ValueError(f"the actor's layers have (kernel, bias) shapes {shapes}; its network "
                     f"declares widths {widths}")
  return layers


def scan_layers(pol: policy_lib.Policy) -> list[Dense]:
  """The layers of the actor's height-scan branch (`networks.ScanEncoder`), in order; empty
  without one.

  Raises:
    ValueError: the branch's parameters are not the layers its network declares.
  """
  branch = pol.networks.actor.scan_branch
  if branch is None:
    return []
  params = pol.params.actor["params"].get("scan_encoder", {})
  names = [f"hidden_{i}" for i in range(len(branch.sizes))]
  if sorted(params) != sorted(names):
    raise ValueError(f"the actor's scan branch has layers {sorted(params)}; its network "
                     f"declares {names}")
  layers = [(np.asarray(params[name]["kernel"], np.float32),
             np.asarray(params[name]["bias"], np.float32)) for name in names]
  widths = [branch.size, *branch.sizes]
  shapes = [(kernel.shape, bias.shape) for kernel, bias in layers]
  if shapes != [((i, o), (o,)) for i, o in zip(widths[:-1], widths[1:])]:
    raise ValueError(f"the actor's scan branch has (kernel, bias) shapes {shapes}; its network "
                     f"declares widths {widths}")
  return layers


class _Builder:
  """Collects the nodes and initializers of one graph, naming each value once."""

  def __init__(self):
    self.nodes: list[onnx.NodeProto] = []
    self.initializers: list[onnx.TensorProto] = []
    self._count = 0

  def constant(self, value: Any, name: str) -> str:
    """A float32 initializer holding `value` (a scalar or an array); returns its name."""
    self.initializers.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
    return name

  def indices(self, value: Any, name: str) -> str:
    """An int64 initializer holding `value` (for Gather); returns its name."""
    self.initializers.append(numpy_helper.from_array(np.asarray(value, np.int64), name))
    return name

  def node(self, op: str, *inputs: str, output: str | None = None, **attributes: Any) -> str:
    """Appends one node of the default domain; returns the name of its (one) output."""
    if output is None:
      self._count += 1
      output = f"{op.lower()}_{self._count}"
    self.nodes.append(onnx.helper.make_node(op, list(inputs), [output], **attributes))
    return output

  def dense(self, x: str, layer: Dense, name: str) -> str:
    """x @ kernel + bias."""
    kernel, bias = layer
    product = self.node("MatMul", x, self.constant(kernel, f"{name}/kernel"))
    return self.node("Add", product, self.constant(bias, f"{name}/bias"))


ACTIVATIONS: dict[str, Callable[[_Builder, str], str]] = {
    "elu": lambda g, x: g.node("Elu", x, alpha=1.0),  # flax.linen.elu, alpha 1
    "relu": lambda g, x: g.node("Relu", x),
    "tanh": lambda g, x: g.node("Tanh", x),
    "swish": lambda g, x: g.node("Mul", x, g.node("Sigmoid", x)),  # flax.linen.swish: x sigmoid(x)
}
"""The nodes of each activation `config.ACTIVATIONS` names, as Flax defines it."""


def graph(pol: policy_lib.Policy, env: env_lib.LocomotionEnv) -> onnx.GraphProto:
  """The graph of the function the model computes (the module docstring's), from the policy's
  parameters and statistics.

  Args:
    pol: the loaded policy (its parameters, networks and config).
    env: the run's env (its robot gives the standing pose and the action scale).

  Returns:
    The graph: input `obs` [B, O], outputs `action` and `joint_targets` [B, A], float32.

  Raises:
    ValueError: an activation without ONNX nodes here, or actor parameters that are not the
      layers of its network.
  """
  activation = pol.networks.actor.activation
  if activation not in ACTIVATIONS:
    raise ValueError(f"activation={activation!r} has no ONNX form; exportable: "
                     f"{sorted(ACTIVATIONS)}")
  activate = ACTIVATIONS[activation]
  layers = actor_layers(pol)
  obs_size, action_size = pol.observation_spec.shape[-1], layers[-1][0].shape[1]
  clip = pol.config.env.action_clip
  normalize = pol.config.ppo.normalize_observations
  g = _Builder()
  x = INPUT
  if normalize:
    stats = pol.params.normalizer
    var = np.asarray(stats.var["policy"], np.float32)  # [O]
    std = np.sqrt(var + np.float32(normalizer.VAR_EPS))  # [O], in float32 as the JAX policy
    x = g.node("Sub", x, g.constant(stats.mean["policy"], "normalizer/mean"))
    x = g.node("Div", x, g.constant(std, "normalizer/std"))
    x = g.node("Clip", x, g.constant(-normalizer.CLIP, "normalizer/low"),
               g.constant(normalizer.CLIP, "normalizer/high"))
  branch = pol.networks.actor.scan_branch
  if branch is not None:
    in_scan = np.zeros(obs_size, bool)
    in_scan[branch.start:branch.start + branch.size] = True
    scan = g.node("Gather", x, g.indices(np.flatnonzero(in_scan), "scan/indices"), axis=1)
    rest = g.node("Gather", x, g.indices(np.flatnonzero(~in_scan), "scan/rest_indices"), axis=1)
    for j, layer in enumerate(scan_layers(pol)):
      scan = activate(g, g.dense(scan, layer, f"scan_encoder/hidden_{j}"))
    x = g.node("Concat", rest, scan, axis=1)
  for i, layer in enumerate(layers[:-1]):
    x = g.dense(x, layer, f"hidden_{i}")
    x = activate(g, x)
  mean = g.dense(x, layers[-1], "out")  # [B, A]
  action = g.node("Clip", mean, g.constant(-clip, "action/low"), g.constant(clip, "action/high"),
                  output=OUTPUTS[0])
  scaled = g.node("Mul", action, g.constant(env.robot.spec.action_scale, "action_scale"))
  g.node("Add", g.constant(env.robot.default_pose, "default_pose"), scaled, output=OUTPUTS[1])
  float32 = onnx.TensorProto.FLOAT
  return onnx.helper.make_graph(
      g.nodes, GRAPH_NAME,
      inputs=[onnx.helper.make_tensor_value_info(INPUT, float32, [BATCH, obs_size])],
      outputs=[onnx.helper.make_tensor_value_info(name, float32, [BATCH, action_size])
               for name in OUTPUTS],
      initializer=g.initializers)


def to_model(pol: policy_lib.Policy) -> onnx.ModelProto:
  """Builds the ONNX model of a loaded policy, with its metadata.

  Args:
    pol: the loaded policy.

  Returns:
    The model (opset `OPSET`): input `obs` [B, O], outputs `action` and `joint_targets` [B, A],
    float32, the metadata of `metadata` as JSON text.

  Raises:
    ValueError: the env's observation layout does not describe the policy's observation, or
      `graph` refuses the policy.
  """
  env = env_lib.LocomotionEnv(pol.config)  # static tables only; nothing is reset or compiled
  obs_size = pol.observation_spec.shape[-1]
  if env.policy_layout.size != obs_size:
    raise ValueError(f"the observation layout has {env.policy_layout.size} entries but the "
                     f"policy observes {obs_size}")
  opsets = [onnx.helper.make_opsetid("", OPSET)]
  model = onnx.helper.make_model(
      graph(pol, env), opset_imports=opsets,
      ir_version=onnx.helper.find_min_ir_version_for(opsets),
      producer_name="mjx_walk", producer_version=_package_version("mjx_walk") or "",
      doc_string=DOC)
  onnx.checker.check_model(model, full_check=True)
  onnx.helper.set_model_props(
      model, {key: json.dumps(value) for key, value in metadata(pol, env).items()})
  return model


def write_atomically(path: pathlib.Path, data: bytes) -> pathlib.Path:
  """Writes `data` to a temporary name beside `path` and renames it into place.

  An existing file at `path` is replaced in one step: a reader sees the old file or the new one,
  never a torn one, and a kill leaves at most the temporary behind.

  Returns:
    `path`.
  """
  path.parent.mkdir(parents=True, exist_ok=True)
  temporary = path.with_name(f".{path.name}.tmp")
  temporary.write_bytes(data)
  os.replace(temporary, path)
  return path


class OnnxPolicy:
  """An exported policy run by onnxruntime on the CPU.

  Args:
    model: the model file, or its serialised bytes.
  """

  def __init__(self, model: pathlib.Path | str | bytes):
    source = model if isinstance(model, bytes) else str(model)
    self._session = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    self.metadata: dict[str, Any] = {
        key: json.loads(value)
        for key, value in self._session.get_modelmeta().custom_metadata_map.items()}
    """The model's metadata, each value parsed from its JSON text."""

  def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs the model.

    Args:
      obs: float32 [B, O] policy observations (other float dtypes are cast).

    Returns:
      (action, joint_targets), float32 [B, A] each.
    """
    action, joint_targets = self._session.run(
        list(OUTPUTS), {INPUT: np.asarray(obs, np.float32)})
    return action, joint_targets
