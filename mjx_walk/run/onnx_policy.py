"""A trained policy as an ONNX model: the exported function, its metadata, the file, and a loader
that runs it with onnxruntime.

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

The actor's parameters and the observation normaliser's statistics are closed over, so they are
constants of the graph: the model needs nothing but the observation. Nothing is sampled.

The metadata (`metadata_props`, read back by `OnnxPolicy.metadata`) holds what a robot-side
program needs and where the model came from; every value is JSON text (`json.loads` each one).
Each value is read from the loaded robot, the run's config and manifest and the checkpoint's
progress record, never written here by hand: see `metadata`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import logging
import os
import pathlib
import warnings
from typing import Any
from typing import Callable
from typing import Iterator

import jax
import jax.numpy as jnp
import jax2onnx
import numpy as np
import onnx
import onnxruntime

from mjx_walk import config as config_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import env as env_lib

FILENAME = "policy.onnx"
"""The model's file name in `export/<step>/` of a run folder."""
INPUT = "obs"
OUTPUTS = ("action", "joint_targets")
BATCH = "B"
"""The symbolic name of the batch dimension of the input and the outputs."""
PACKAGES = ("mjx_walk", "jax", "flax", "mujoco", "mujoco-mjx", "jax2onnx", "onnx")
"""Packages whose installed versions the metadata records."""

_CONVERTER_LOGGERS = ("jax2onnx", "onnx_ir")
"""Loggers quieted during a conversion: jax2onnx logs a traceback for each of its optional
plugins that fails to import against this JAX (dm_pix's, for one), and onnx_ir warns about
values of unknown type it skips while serialising. Neither affects the model. The plugins' own
DeprecationWarnings about JAX names are ignored for the same reason."""

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


def exported_function(pol: policy_lib.Policy, env: env_lib.LocomotionEnv
                      ) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
  """The function the model computes, with the policy's parameters closed over.

  Args:
    pol: the loaded policy (its parameters, networks and config).
    env: the run's env (its robot gives the standing pose and the action scale).

  Returns:
    obs float32 [B, O] -> (action [B, A], joint_targets [B, A]), as described in the module
    docstring.
  """
  nets, params = pol.networks, pol.params
  normalize = pol.config.ppo.normalize_observations
  clip = pol.config.env.action_clip
  default_pose = jnp.asarray(env.robot.default_pose, jnp.float32)  # [A]
  action_scale = env.robot.spec.action_scale

  def act(obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    action = jnp.clip(policy_lib.mean_action(nets, normalize, params, obs), -clip, clip)  # [B, A]
    return action, default_pose + action_scale * action  # [B, A], [B, A]

  return act


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


@contextlib.contextmanager
def _quiet_converter() -> Iterator[None]:
  """Raises the converter's loggers to ERROR and ignores DeprecationWarnings for the duration
  (see `_CONVERTER_LOGGERS`)."""
  loggers = [logging.getLogger(name) for name in _CONVERTER_LOGGERS]
  levels = [logger.level for logger in loggers]
  for logger in loggers:
    logger.setLevel(logging.ERROR)
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", DeprecationWarning)
      yield
  finally:
    for logger, level in zip(loggers, levels):
      logger.setLevel(level)


def to_model(pol: policy_lib.Policy) -> onnx.ModelProto:
  """Converts a loaded policy to an ONNX model with its metadata.

  Args:
    pol: the loaded policy.

  Returns:
    The model: input `obs` [B, O], outputs `action` and `joint_targets` [B, A], float32, the
    metadata of `metadata` as JSON text.

  Raises:
    ValueError: the env's observation layout does not describe the policy's observation.
  """
  env = env_lib.LocomotionEnv(pol.config)  # static tables only; nothing is reset or compiled
  obs_size = pol.observation_spec.shape[-1]
  if env.policy_layout.size != obs_size:
    raise ValueError(f"the observation layout has {env.policy_layout.size} entries but the "
                     f"policy observes {obs_size}")
  with _quiet_converter():
    model = jax2onnx.to_onnx(exported_function(pol, env), [(BATCH, obs_size)],
                             input_names=[INPUT], output_names=list(OUTPUTS),
                             model_name="mjx_walk_policy")
  model.doc_string = DOC
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
