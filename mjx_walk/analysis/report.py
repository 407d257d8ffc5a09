"""Pictures of a run: plots from its ledger, videos of held-out episodes, and `report.md`.

  python -m mjx_walk.report runs/<run>                      # plots and report.md from the ledger
  python -m mjx_walk.report runs/<run> --videos             # also render the newest saved traces
  python -m mjx_walk.report runs/<run> --step=1200          # evaluate checkpoint 1200 with traces,
                                                            # render it, then the report

This module owns what a run looks like to a reader. Everything here runs on the host, after the
fact, from files in the run folder (`ledger.jsonl`, `config.json`, `manifest.json`, the traces):

  plots/<name>.png               matplotlib figures from the ledger (`make_plots`): the learning
                                 curve, reward terms, reset reasons, contact events, fall height
                                 and tilt histograms, and the latest evaluation per stratum;
  eval/<update>_traces.npz       one traced held-out episode per stratum (`save_traces`), written
                                 from `panel.Evaluator.run_with_traces`;
  videos/<update>/<stratum>.mp4  those episodes rendered offscreen with `mujoco.Renderer`
                                 (`render_videos`), with `captions.json` beside them: the command
                                 schedule, how the episode ended and its length;
  report.md                      recipe, manifest summary, plots, videos, the latest evaluation
                                 table and the audit flags in plain words (`write_report`).

Rendering needs an OpenGL context. MuJoCo picks its backend (`MUJOCO_GL`) when it is first
imported; the package (`mjx_walk/__init__.py`) defaults it to `egl` on a Linux machine without a
display. A process that imported mujoco before mjx_walk must set `MUJOCO_GL` itself (`osmesa` is
the software fallback).
"""

from __future__ import annotations

import os
import dataclasses
import json
import pathlib
import re
import warnings
from typing import Any, Sequence

import imageio.v2 as imageio
from matplotlib.figure import Figure
import mujoco
import numpy as np
from PIL import Image
from PIL import ImageDraw

from mjx_walk.run import checkpoint
from mjx_walk import config as config_lib
from mjx_walk.analysis import flags as flags_lib
from mjx_walk.learn import audit
from mjx_walk.sim import env as env_lib
from mjx_walk.analysis import panel
from mjx_walk.sim import families
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.sim import robots
from mjx_walk.run import run_folder
# pylint: enable=g-import-not-at-top,wrong-import-position

CAPTIONS_FILENAME = "captions.json"

CAMERA_DISTANCE = 1.6
"""Metres from the trunk to the following camera."""
CAMERA_AZIMUTH = 135.0
"""Degrees; the camera's heading is fixed in the world, so turns show as turns."""
CAMERA_ELEVATION = -20.0
"""Degrees below the horizon."""

SHOWN_GEOM_GROUPS = 4
"""Geom groups 0-3 are drawn: the Go2 MJCF has visual geoms (group 2) for the hips and calves
only, and its trunk, thighs and feet exist as collision geoms (group 3)."""

_REASON_NAMES = {int(code): code.name.lower() for code in env_lib.ResetReason}
_TERMINATIONS = tuple(name for name in env_lib.REASON_NAMES if name != "timeout")


def check_gl() -> None:
  """Refuses early, and says why, when mujoco chose a GL backend that needs a display.

  Raises:
    RuntimeError: mujoco was imported with the GLFW backend (MUJOCO_GL unset) and there is no
      display; MUJOCO_GL=egl or osmesa must be set before mujoco is first imported.
  """
  backend = getattr(getattr(mujoco, "GLContext", None), "__module__", "")
  headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
  if backend.startswith("mujoco.glfw") and headless:
    raise RuntimeError(
        "offscreen rendering needs a headless GL backend, but mujoco was imported with GLFW and "
        "there is no display: set MUJOCO_GL=egl (or osmesa) in the environment, or before the "
        "first `import mujoco` of the process (`os.environ.setdefault('MUJOCO_GL', 'egl')`)")


# TRACES


@dataclasses.dataclass(frozen=True)
class SavedTraces:
  """`eval/<update>_traces.npz` read back: one traced episode per stratum, and what it was."""

  update: int
  strata: tuple[str, ...]
  """Stratum of each row, in panel order."""
  family_seeds: tuple[int, ...]
  """Seed of each row's evaluation family (look it up in manifest.json)."""
  panel_hash: str
  traces: panel.EpisodeTraces
  """NumPy leaves, [S, ...]."""


def traces_path(run_dir: pathlib.Path | str, update: int) -> pathlib.Path:
  return run_folder.RunFolder(pathlib.Path(run_dir)).eval_traces_path(update)


def save_traces(run_dir: pathlib.Path | str, update: int, traces: panel.EpisodeTraces,
                manifest: families.Manifest) -> pathlib.Path:
  """Writes the traced episodes of one evaluation to `eval/<update>_traces.npz`.

  The file is self-describing: besides every `EpisodeTraces` field (gravity included, which sets
  the camera and the ground on a slope) it holds each row's stratum and family seed, the end
  reason's name and the panel hash. It is written to a temporary name and renamed into place, so
  a kill never leaves a torn file under the final name.

  Args:
    run_dir: the run folder.
    update: the update the evaluated policy comes from.
    traces: from `Evaluator.run_with_traces` (NumPy or device arrays).
    manifest: the run's manifest: names each traced family.

  Returns:
    The path written.
  """
  fields = {f.name: np.asarray(getattr(traces, f.name))
            for f in dataclasses.fields(panel.EpisodeTraces)}
  evaluated = [manifest.eval_families[int(i)] for i in fields["family_index"]]
  path = traces_path(run_dir, update)
  path.parent.mkdir(parents=True, exist_ok=True)
  temporary = path.with_name(f".{path.name}.tmp")
  with temporary.open("wb") as file:
    np.savez_compressed(
        file, update=np.int64(update), strata=np.array([f.stratum for f in evaluated]),
        family_seeds=np.array([f.seed for f in evaluated], np.int64),
        reason_names=np.array([_REASON_NAMES[int(r)] for r in fields["reason"]]),
        panel_hash=np.array(manifest.panel_hash), **fields)
  os.replace(temporary, path)
  return path


def load_traces(path: pathlib.Path | str) -> SavedTraces:
  """Reads a file written by `save_traces`.

  Raises:
    FileNotFoundError: naming the path.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"no evaluation traces at {path}")
  with np.load(path) as values:
    traces = panel.EpisodeTraces(**{f.name: values[f.name]
                                       for f in dataclasses.fields(panel.EpisodeTraces)})
    return SavedTraces(update=int(values["update"]),
                       strata=tuple(str(s) for s in values["strata"]),
                       family_seeds=tuple(int(s) for s in values["family_seeds"]),
                       panel_hash=str(values["panel_hash"]), traces=traces)


def trace_updates(run_dir: pathlib.Path | str) -> list[int]:
  """Updates with saved traces in the run folder, oldest first."""
  folder = run_folder.RunFolder(pathlib.Path(run_dir)).eval_dir
  found = (re.fullmatch(rf"(\d+){re.escape(run_folder.TRACES_SUFFIX)}", p.name)
           for p in folder.glob(f"*{run_folder.TRACES_SUFFIX}"))
  return sorted(int(m.group(1)) for m in found if m)


# VIDEOS


def render_model(robot: robots.Robot, width: int, height: int) -> mujoco.MjModel:
  """The robot's scene for rendering: a checkered floor (so that motion shows under a following
  camera) and an offscreen buffer of at least width x height. Ids are the simulated model's."""
  spec = mujoco.MjSpec.from_file(str(robot.xml_path))
  spec.add_texture(name="report_checker", type=mujoco.mjtTexture.mjTEXTURE_2D,
                   builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=512, height=512,
                   rgb1=[0.30, 0.34, 0.40], rgb2=[0.45, 0.50, 0.56])
  material = spec.add_material(name="report_floor", texrepeat=[2, 2], texuniform=True)
  material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "report_checker"
  floor = spec.geom(robot.spec.floor_geom)
  floor.material = "report_floor"
  floor.rgba = [1.0, 1.0, 1.0, 1.0]  # a non-default rgba would tint the texture
  spec.visual.global_.offwidth = max(width, spec.visual.global_.offwidth)
  spec.visual.global_.offheight = max(height, spec.visual.global_.offheight)
  model = spec.compile()
  if (model.nq, model.ngeom, model.nbody) != (robot.mj_model.nq, robot.mj_model.ngeom,
                                              robot.mj_model.nbody):
    raise RuntimeError(f"the render model of {robot.xml_path} does not match the simulated one")
  return model


def _level_quat(gravity: np.ndarray) -> np.ndarray:
  """Quaternion (w, x, y, z) of the rotation that turns `gravity` to point straight down.

  Applied to the whole scene, a slope's tilted gravity becomes vertical and the floor inclines,
  as it would look on a hillside. Identity for level ground.
  """
  up = -np.asarray(gravity, np.float64)
  up /= max(np.linalg.norm(up), 1e-9)
  to_up = np.zeros(4)
  mujoco.mju_quatZ2Vec(to_up, up)  # rotates +z onto `up`
  level = np.zeros(4)
  mujoco.mju_negQuat(level, to_up)  # rotates `up` onto +z
  return level


def render_episode(renderer: mujoco.Renderer, robot: robots.Robot, qpos: np.ndarray,
                   gravity: np.ndarray, every: int,
                   overlay: Sequence[str] | None = None) -> np.ndarray:
  """Renders every `every`-th state of an episode from a camera that follows the trunk.

  Args:
    renderer: built on `render_model(robot, ...)`.
    robot: the robot (trunk id, floor geom id, free joint).
    qpos: float [L, nq], the episode's states.
    gravity: float [3], the family's gravity; a tilted one is drawn as an inclined floor.
    every: render states 0, every, 2 * every, ...
    overlay: one caption per rendered frame, burnt into its top-left corner; None for none.

  Returns:
    uint8 [ceil(L / every), H, W, 3] (with segmentation rendering enabled on the renderer:
    int32 [ceil(L / every), H, W, 2] object ids and types, and no overlay).
  """
  model = renderer.model
  data = mujoco.MjData(model)
  level = _level_quat(gravity)
  rotation = np.zeros(9)
  mujoco.mju_quat2Mat(rotation, level)
  rotation = rotation.reshape(3, 3)
  floor = robot.floor_geom_id
  free = model.jnt_qposadr[model.body_jntadr[robot.trunk_body_id]]
  floor_pos, floor_quat = model.geom_pos[floor].copy(), model.geom_quat[floor].copy()
  camera = mujoco.MjvCamera()
  camera.type = mujoco.mjtCamera.mjCAMERA_FREE
  camera.distance, camera.azimuth, camera.elevation = (CAMERA_DISTANCE, CAMERA_AZIMUTH,
                                                       CAMERA_ELEVATION)
  option = mujoco.MjvOption()
  option.geomgroup[:SHOWN_GEOM_GROUPS] = 1
  frames = []
  try:
    model.geom_pos[floor] = rotation @ floor_pos
    mujoco.mju_mulQuat(model.geom_quat[floor], level, floor_quat)
    for n, t in enumerate(range(0, len(qpos), every)):
      state = np.asarray(qpos[t], np.float64).copy()
      state[free:free + 3] = rotation @ state[free:free + 3]
      mujoco.mju_mulQuat(state[free + 3:free + 7], level, np.asarray(qpos[t][free + 3:free + 7],
                                                                     np.float64))
      data.qpos[:] = state
      mujoco.mj_forward(model, data)
      camera.lookat[:] = data.xpos[robot.trunk_body_id]
      renderer.update_scene(data, camera, option)
      frame = renderer.render()
      if overlay is not None and frame.dtype == np.uint8:
        frame = _burn_text(frame, overlay[n])
      frames.append(frame)
  finally:
    model.geom_pos[floor], model.geom_quat[floor] = floor_pos, floor_quat
  return np.stack(frames)


def _burn_text(frame: np.ndarray, text: str) -> np.ndarray:
  """Writes `text` (lines) on a dark band in the frame's top-left corner."""
  image = Image.fromarray(frame)
  draw = ImageDraw.Draw(image, "RGBA")
  box = draw.multiline_textbbox((4, 3), text, spacing=2)
  draw.rectangle((0, 0, box[2] + 4, box[3] + 3), fill=(0, 0, 0, 140))
  draw.multiline_text((4, 3), text, fill=(255, 255, 255, 255), spacing=2)
  return np.asarray(image)


def write_video(path: pathlib.Path | str, frames: np.ndarray, fps: int) -> pathlib.Path:
  """Encodes uint8 [F, H, W, 3] frames as H.264 MP4 with imageio-ffmpeg's bundled ffmpeg."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  with warnings.catch_warnings():
    # The writer starts ffmpeg with fork + exec; JAX's warning about forking a multithreaded
    # process is about a child that goes on running Python, which this one does not.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
    # yuv420p needs even sides only; imageio's default macro block of 16 would rescale any
    # frame whose sides are not multiples of 16.
    with imageio.get_writer(path, format="FFMPEG", mode="I", fps=fps, codec="libx264",
                            pixelformat="yuv420p", macro_block_size=2,
                            ffmpeg_log_level="error") as writer:
      for frame in frames:
        writer.append_data(frame)
  return path


def command_schedule(command: np.ndarray, length: int, control_hz: float) -> list[dict[str, float]]:
  """The commands an episode was given, merged into constant segments.

  Args:
    command: float [T, 3] per control step.
    length: control steps in the episode (rows past it are ignored).
    control_hz: control steps per second.

  Returns:
    [{"start_s", "end_s", "vx", "vy", "yaw_rate"}], in order, covering [0, length / control_hz).
  """
  command = np.asarray(command)[:max(length, 1)]
  changes = [0] + [t for t in range(1, len(command))
                   if not np.array_equal(command[t], command[t - 1])] + [len(command)]
  return [{"start_s": start / control_hz, "end_s": end / control_hz,
           "vx": float(command[start, 0]), "vy": float(command[start, 1]),
           "yaw_rate": float(command[start, 2])}
          for start, end in zip(changes[:-1], changes[1:])]


def _format_command(vx: float, vy: float, yaw_rate: float) -> str:
  return f"vx {vx:+.2f} vy {vy:+.2f} m/s, yaw {yaw_rate:+.2f} rad/s"


def format_caption(caption: dict[str, Any]) -> str:
  """One line about a video: its family, how the episode ended, and its command schedule."""
  schedule = "; ".join(f"{c['start_s']:.1f}-{c['end_s']:.1f} s: "
                       f"{_format_command(c['vx'], c['vy'], c['yaw_rate'])}"
                       for c in caption["commands"])
  return (f"family seed {caption['family_seed']}, ended by **{caption['end_reason']}** after "
          f"{caption['length_steps']} steps ({caption['seconds']:.2f} s), return "
          f"{caption['return']:.2f}; commands: {schedule}")


def render_videos(run_dir: pathlib.Path | str, update: int,
                  config: config_lib.TrainConfig) -> list[pathlib.Path]:
  """Renders `videos/<update>/<stratum>.mp4` from `eval/<update>_traces.npz`.

  Every `control_hz / video_fps`-th state of each traced episode becomes a frame, from a camera
  that follows the trunk; the time, command and end reason are burnt into each frame, and
  `captions.json` beside the videos holds each one's command schedule, end reason and length.

  Args:
    run_dir: the run folder.
    update: whose traces to render.
    config: the run configuration (robot, control rate, `report` section).

  Returns:
    The videos written, in panel order.

  Raises:
    FileNotFoundError: no traces saved for `update`.
    RuntimeError: no headless GL backend (see `check_gl`).
  """
  run_dir = pathlib.Path(run_dir)
  saved = load_traces(traces_path(run_dir, update))
  check_gl()
  report = config.report
  control_hz = config.env.control_hz
  every = max(1, round(control_hz / report.video_fps))
  robot = robots.load(config.env.robot)
  out = run_folder.RunFolder(run_dir).videos_dir(update)
  traces = saved.traces
  paths, captions = [], {}
  renderer = mujoco.Renderer(render_model(robot, report.video_width, report.video_height),
                             height=report.video_height, width=report.video_width)
  try:
    for s, stratum in enumerate(saved.strata):
      length = int(traces.length[s])
      reason = _REASON_NAMES.get(int(traces.reason[s]), str(int(traces.reason[s])))
      overlay = [
          f"{stratum}  t {t / control_hz:5.2f} s\n"
          f"cmd {_format_command(*(float(c) for c in traces.command[s, t]))}\n"
          f"ends: {reason} at {length / control_hz:.2f} s"
          for t in range(0, length, every)]
      frames = render_episode(renderer, robot, traces.qpos[s, :length], traces.gravity[s],
                              every, overlay)
      path = write_video(out / f"{stratum}.mp4", frames, report.video_fps)
      paths.append(path)
      captions[stratum] = {
          "video": path.name,
          "family_seed": saved.family_seeds[s],
          "env_index": int(traces.env_index[s]),
          "end_reason": reason,
          "terminated": reason in _TERMINATIONS,
          "length_steps": length,
          "seconds": length / control_hz,
          "return": float(traces.episode_return[s]),
          "frames": len(frames),
          "fps": report.video_fps,
          "commands": command_schedule(traces.command[s], length, control_hz),
      }
  finally:
    renderer.close()  # explicitly: a GL context left to the garbage collector errors at exit
  (out / CAPTIONS_FILENAME).write_text(json.dumps({"update": update, "videos": captions},
                                                  indent=1))
  return paths


# PLOTS


@dataclasses.dataclass(frozen=True)
class Plot:
  """One figure of the report: written to `path`, or skipped for the reason in `note`."""

  name: str
  title: str
  path: pathlib.Path | None
  note: str | None = None


def _values(records: Sequence[dict[str, Any]], key: str) -> np.ndarray:
  """float [len(records)]; a missing or null figure is NaN."""
  return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records])


def _scalar_keys(records: Sequence[dict[str, Any]], prefix: str) -> list[str]:
  """Sorted keys starting with `prefix` that hold a number in some record."""
  return sorted({k for r in records for k, v in r.items()
                 if k.startswith(prefix) and isinstance(v, (int, float)) and
                 not isinstance(v, bool)})


def _line(ax: Any, x: np.ndarray, y: np.ndarray, **style: Any) -> None:
  """Plots the points where both x and y are defined, joined (an undefined figure, such as the
  return of an update in which no episode ended, is skipped rather than breaking the line)."""
  defined = np.isfinite(x) & np.isfinite(y)
  ax.plot(x[defined], y[defined], **style)


def _save(figure: Figure, path: pathlib.Path) -> pathlib.Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  figure.savefig(path, dpi=100)
  return path


def _per_stratum(evals: Sequence[dict[str, Any]], metric: str) -> dict[str, np.ndarray]:
  strata = list(dict.fromkeys(s for r in evals for s in r["strata"]))
  return {s: np.array([np.nan if r["strata"].get(s, {}).get(metric) is None
                       else r["strata"][s][metric] for r in evals]) for s in strata}


def plot_learning_curve(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Training return and held-out success, falls and tracking per stratum, over env steps (left)
  and over wall-clock (right)."""
  title = "Learning curve"
  updates = [r for r in records if r["kind"] == "update"]
  evals = [r for r in records if r["kind"] == "eval"]
  if not updates:
    return Plot("learning_curve", title, None, "no update records yet")
  rows = [("episode/return", "return", "return"), (None, "success_rate", "held-out success"),
          (None, "fall_rate", "held-out fall rate"),
          (None, "lin_vel_error", "held-out lin vel error (m/s)")]
  figure = Figure(figsize=(11, 11), layout="constrained")
  axes = figure.subplots(len(rows), 2, sharex="col")
  axes_x = [("env_steps", "env_steps", "env steps"),
            ("perf/wall_seconds", "wall_seconds", "wall-clock (s)")]
  for col, (update_x, eval_x, label) in enumerate(axes_x):
    x_updates = _values(updates, update_x)
    x_evals = _values(evals, eval_x)
    for row, (update_key, metric, name) in enumerate(rows):
      ax = axes[row, col]
      if update_key:
        _line(ax, x_updates, _values(updates, update_key), color="black", lw=1.2,
              label="training episodes")
      for stratum, y in _per_stratum(evals, metric).items():
        _line(ax, x_evals, y, marker="o", ms=3, lw=1, label=f"held-out {stratum}")
      ax.set_ylabel(name)
      ax.grid(alpha=0.3)
      if metric in ("success_rate", "fall_rate"):
        ax.set_ylim(-0.05, 1.05)
    axes[-1, col].set_xlabel(label)
  handles, labels = axes[0, 0].get_legend_handles_labels()
  if handles:
    figure.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6),
                  fontsize="small")
  note = None if evals else "no held-out evaluation yet; training return only"
  return Plot("learning_curve", title, _save(figure, path), note)


def plot_reward_terms(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Each scaled reward term per control step, stacked: gains above zero, penalties below."""
  title = "Reward terms"
  updates = [r for r in records if r["kind"] == "update"]
  terms = [k for k in _scalar_keys(updates, "reward/") if k != "reward/total"]
  if not terms:
    return Plot("reward_terms", title, None, "no reward/<term> figures in the ledger")
  x = _values(updates, "env_steps")
  values = np.nan_to_num(np.stack([_values(updates, k) for k in terms]))  # [terms, U]
  colors = [f"C{i % 10}" for i in range(len(terms))]
  labels = [k.split("/", 1)[1] for k in terms]
  figure = Figure(figsize=(10, 5.5), layout="constrained")
  ax = figure.subplots()
  ax.stackplot(x, np.maximum(values, 0.0), colors=colors, labels=labels, alpha=0.85)
  ax.stackplot(x, np.minimum(values, 0.0), colors=colors, alpha=0.85)
  if "reward/total" in _scalar_keys(updates, "reward/"):
    ax.plot(x, _values(updates, "reward/total"), color="black", lw=1.5, label="total")
  ax.axhline(0.0, color="grey", lw=0.8)
  ax.set_xlabel("env steps")
  ax.set_ylabel("reward per control step (scaled)")
  ax.grid(alpha=0.3)
  ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
  return Plot("reward_terms", title, _save(figure, path))


def plot_reset_reasons(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """The share of episode ends per reset reason, over the updates in which some episode ended."""
  title = "Reset reasons"
  updates = [r for r in records if r["kind"] == "update"]
  keys = _scalar_keys(updates, "reset/")
  if not keys:
    return Plot("reset_reasons", title, None, "no reset/<reason> figures in the ledger yet "
                "(no episode has ended)")
  shares = np.stack([_values(updates, k) for k in keys])  # [reasons, U]
  # Updates in which some episode ended (otherwise every share is null, or 0).
  ended = np.isfinite(shares).all(axis=0) & (np.nansum(shares, axis=0) > 0)
  if not ended.any():
    return Plot("reset_reasons", title, None, "no episode has ended yet")
  x = _values(updates, "env_steps")[ended]
  figure = Figure(figsize=(10, 4.5), layout="constrained")
  ax = figure.subplots()
  ax.stackplot(x, shares[:, ended], labels=[k.split("/", 1)[1] for k in keys], alpha=0.85)
  ax.set_ylim(0.0, 1.0)
  ax.set_xlabel("env steps")
  ax.set_ylabel("share of episode ends")
  ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
  return Plot("reset_reasons", title, _save(figure, path))


def plot_contact_events(records: Sequence[dict[str, Any]], path: pathlib.Path,
                        min_count: int | None = None) -> Plot:
  """Every `contact/` figure of the ledger per update, on up to three axes: event counts per
  batch (log scale, with the audit's `min_count` threshold; zero is drawn at 0.5), air-time
  statistics (s), and shares (`.../share...`, e.g. each foot's share of steps on the ground)."""
  title = "Contact events"
  updates = [r for r in records if r["kind"] == "update"]
  keys = _scalar_keys(updates, "contact/")
  if not keys:
    return Plot("contact_events", title, None,
                "no contact/ figures in the ledger (this run has no contact audit)")
  timing = [k for k in keys if "air_time" in k]
  shares = [k for k in keys if "share" in k and k not in timing]
  counts = [k for k in keys if k not in timing and k not in shares]
  groups = [(group, label) for group, label in (
      (counts, "events per update batch"), (timing, "feet air time (s)"),
      (shares, "share")) if group]
  x = _values(updates, "env_steps")
  figure = Figure(figsize=(10, 3.6 * len(groups)), layout="constrained")
  axes = np.atleast_1d(figure.subplots(len(groups), 1, sharex=True))
  for ax, (group, label) in zip(axes, groups):
    for key in group:
      y = _values(updates, key)
      ax.plot(x, np.maximum(y, 0.5) if group is counts else y, lw=1.2,
              label=key.split("/", 1)[1])
    if group is counts:
      if min_count:
        ax.axhline(min_count, color="red", ls="--", lw=1, label=f"flag below {min_count}")
      ax.set_yscale("log")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
  axes[-1].set_xlabel("env steps")
  return Plot("contact_events", title, _save(figure, path))


def _histogram(ax: Any, counts: np.ndarray, edges: np.ndarray | None, threshold: float | None,
               label: str) -> None:
  if edges is not None and len(edges) == len(counts) + 1:
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", edgecolor="white")
    if threshold is not None and edges[0] <= threshold <= edges[-1]:
      ax.axvline(threshold, color="red", ls="--", lw=1.2, label=f"threshold {threshold:g}")
      ax.legend(fontsize="small")
  else:
    ax.bar(np.arange(len(counts)), counts)
  ax.set_xlabel(label)
  ax.set_ylabel("falls (whole run)")


def plot_fall_histograms(records: Sequence[dict[str, Any]], path: pathlib.Path,
                         config: config_lib.TrainConfig | None = None) -> Plot:
  """Trunk height and tilt at the moment of each `fall`, summed over the run, against the
  env's thresholds (`env.fall_height`, `env.fall_tilt_degrees`)."""
  title = "Fall height and tilt"
  updates = [r for r in records if r["kind"] == "update"]
  panels = [("audit/fall_height_counts", "FALL_HEIGHT_BINS", "trunk height at fall (m)",
             None if config is None else config.env.fall_height),
            ("audit/fall_tilt_counts", "FALL_TILT_BINS", "trunk tilt at fall (deg)",
             None if config is None else config.env.fall_tilt_degrees)]
  sums = {}
  for key, *_ in panels:
    rows = [np.asarray(r[key], float) for r in updates if isinstance(r.get(key), list)]
    if rows:
      sums[key] = np.sum(rows, axis=0)
  if not sums:
    return Plot("fall_histograms", title, None,
                "no audit/fall_height_counts or audit/fall_tilt_counts in the ledger")
  figure = Figure(figsize=(11, 4), layout="constrained")
  axes = figure.subplots(1, 2)
  for ax, (key, bins, label, threshold) in zip(axes, panels):
    if key not in sums:
      ax.set_axis_off()
      ax.set_title(f"no {key}")
      continue
    edges = getattr(audit, bins, None)
    _histogram(ax, sums[key], None if edges is None else np.asarray(edges, float), threshold,
               label)
    ax.set_title(f"{int(sums[key].sum())} falls")
  return Plot("fall_histograms", title, _save(figure, path))


def plot_latest_eval(records: Sequence[dict[str, Any]], path: pathlib.Path) -> Plot:
  """Success and fall rate per stratum, latest held-out evaluation."""
  title = "Latest evaluation per stratum"
  record = ledger.latest(list(records), "eval")
  if record is None:
    return Plot("latest_eval", title, None, "no held-out evaluation yet")
  strata = list(record["strata"])
  x = np.arange(len(strata))
  figure = Figure(figsize=(8, 4), layout="constrained")
  ax = figure.subplots()
  for offset, (metric, label, color) in zip(
      (-0.2, 0.2), (("success_rate", "success", "tab:green"), ("fall_rate", "fall", "tab:red"))):
    values = np.array([np.nan if record["strata"][s].get(metric) is None
                       else record["strata"][s][metric] for s in strata])
    bars = ax.bar(x + offset, values, width=0.4, label=label, color=color)
    ax.bar_label(bars, labels=[f"{v:.0%}" if np.isfinite(v) else "-" for v in values],
                 fontsize="small")
  ax.set_xticks(x, strata)
  ax.set_ylim(0.0, 1.1)
  ax.set_ylabel("share of episodes")
  ax.set_title(f"update {record['update']} ({record['env_steps']:,} env steps)")
  ax.legend()
  return Plot("latest_eval", title, _save(figure, path))


def make_plots(run_dir: pathlib.Path | str, records: Sequence[dict[str, Any]],
               config: config_lib.TrainConfig | None = None) -> list[Plot]:
  """Writes every plot of the report into `<run_dir>/plots/`.

  Args:
    run_dir: the run folder.
    records: its ledger (`ledger.read_run`).
    config: its configuration (thresholds drawn on the audit plots); None to draw none.

  Returns:
    One `Plot` per figure, in report order; a skipped one has `path` None and says why.
  """
  folder = run_folder.RunFolder(pathlib.Path(run_dir)).plots_dir
  min_count = None if config is None else config.audit.min_event_count
  return [
      plot_learning_curve(records, folder / "learning_curve.png"),
      plot_latest_eval(records, folder / "latest_eval.png"),
      plot_reward_terms(records, folder / "reward_terms.png"),
      plot_reset_reasons(records, folder / "reset_reasons.png"),
      plot_contact_events(records, folder / "contact_events.png", min_count),
      plot_fall_histograms(records, folder / "fall_histograms.png", config),
  ]


# THE REPORT


def _range_table(values: dict[str, Any]) -> list[str]:
  lines = ["| field | value |", "|---|---|"]
  for key, value in values.items():
    if isinstance(value, list):
      value = "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    lines.append(f"| `{key}` | {value} |")
  return lines


def _manifest_section(manifest: families.Manifest, records: Sequence[dict[str, Any]]
                      ) -> list[str]:
  recipe = ledger.latest(list(records), "recipe") or {}
  strata = list(dict.fromkeys(manifest.eval_strata))
  lines = [
      "## Manifest", "",
      f"- {len(manifest.train_families)} training families"
      + (f", {recipe['envs_per_family']} envs each" if "envs_per_family" in recipe else "")
      + f"; {len(manifest.eval_families)} held-out families in {len(strata)} strata"
      + (f", {recipe['num_eval_envs']} envs" if "num_eval_envs" in recipe else "") + ".",
      f"- manifest hash `{manifest.hash}`, panel hash `{manifest.panel_hash}`.", "",
      "| stratum | families | family seeds |", "|---|---|---|",
  ]
  for stratum in strata:
    seeds = [f.seed for f in manifest.eval_families if f.stratum == stratum]
    lines.append(f"| {stratum} | {len(seeds)} | {', '.join(map(str, seeds))} |")
  lines += ["", "Training ranges (`ranges.train`, episode "
            f"{manifest.ranges.get('train_episode_seconds')} s):", ""]
  lines += _range_table(manifest.ranges.get("train", {}))
  lines += ["", "Held-out panel (`ranges.eval`):", ""]
  lines += _range_table(manifest.ranges.get("eval", {}))
  return lines + [""]


def _videos(run_dir: pathlib.Path, update: int | None) -> tuple[int, dict[str, Any]] | None:
  """(update, captions) of the videos rendered for `update` (None: the newest), or None."""
  found = dict(sorted((int(p.parent.name), p) for p in
                      run_folder.RunFolder(run_dir).videos_dir().glob(f"*/{CAPTIONS_FILENAME}")
                      if p.parent.name.isdigit()))
  if not found or (update is not None and update not in found):
    return None
  update = max(found) if update is None else update
  return update, json.loads(found[update].read_text())["videos"]


def _flags_section(records: Sequence[dict[str, Any]], config: config_lib.TrainConfig
                   ) -> list[str]:
  lines = ["## Audit flags", ""]
  raised = flags_lib.flags(list(records), config)
  if not raised:
    return lines + ["No audit flag was raised.", ""]
  return lines + [f"- {flag}" for flag in raised] + [""]


def write_report(run_dir: pathlib.Path | str, records: Sequence[dict[str, Any]],
                 config: config_lib.TrainConfig, manifest: families.Manifest,
                 plots: Sequence[Plot], video_update: int | None = None) -> pathlib.Path:
  """Writes `<run_dir>/report.md`: recipe, manifest summary, latest evaluation, plots, the
  videos of `video_update` (default the newest rendered) with their captions, and the audit
  flags in plain words.

  Returns:
    The path written.
  """
  run_dir = pathlib.Path(run_dir)
  recipe = ledger.latest(list(records), "recipe")
  evaluation = ledger.latest(list(records), "eval")
  update = ledger.latest(list(records), "update")
  lines = [f"# Run report: {run_dir.resolve().name}", ""]
  if update is not None:
    lines += [f"{update['update']} updates, {update['env_steps']:,} env steps, "
              f"{update.get('perf/wall_seconds') or 0:,.0f} s of wall-clock.", ""]
  lines += ["## Recipe", "", "```",
            ledger.format_recipe(recipe) if recipe else "no recipe record", "```", ""]
  lines += _manifest_section(manifest, records)
  lines += ["## Latest evaluation", "", "```",
            ledger.format_eval_table(evaluation) if evaluation else "no evaluation yet",
            "```", ""]
  lines += ["## Plots", ""]
  for plot in plots:
    lines.append(f"### {plot.title}")
    lines.append("")
    if plot.path is not None:
      lines.append(f"![{plot.title}]({plot.path.relative_to(run_dir).as_posix()})")
    if plot.note:
      lines.append(f"_{plot.note}_")
    lines.append("")
  lines += ["## Videos", ""]
  videos = _videos(run_dir, video_update)
  if videos is None:
    lines += ["No videos yet: `python -m mjx_walk.report <run> --videos` renders them.", ""]
  else:
    video_update, captions = videos
    lines += [f"One held-out episode per stratum, policy of update {video_update} "
              f"(`{run_folder.VIDEOS}/{video_update}/{CAPTIONS_FILENAME}` has the details).", ""]
    for stratum, caption in captions.items():
      link = f"{run_folder.VIDEOS}/{video_update}/{caption['video']}"
      lines.append(f"- [{stratum}]({link}): {format_caption(caption)}")
    lines.append("")
  lines += _flags_section(records, config)
  path = run_folder.RunFolder(run_dir).report_path
  path.write_text("\n".join(lines))
  return path


@dataclasses.dataclass(frozen=True)
class Built:
  """What `build` wrote."""

  report: pathlib.Path
  plots: list[Plot]
  videos: list[pathlib.Path]
  traces: pathlib.Path | None


def evaluate_with_traces(run_dir: pathlib.Path | str, step: int | None
                         ) -> tuple[dict[str, Any], pathlib.Path]:
  """Evaluates a checkpoint on the run's own panel and saves its traces.

  Returns:
    (the eval record, not written to the ledger; the traces file).

  Raises:
    checkpoint.CheckpointError: no such checkpoint, naming the step and the saved ones.
  """
  pol = policy_lib.load(run_dir, step)
  record, traces = panel.evaluate_policy(pol, pol.config, pol.manifest)
  return record, save_traces(run_dir, pol.step, traces, pol.manifest)


def build(run_dir: pathlib.Path | str, videos: bool = False, step: int | None = None,
          log: Any = print) -> Built:
  """Plots and report.md from the ledger; with `videos`, renders videos first.

  Args:
    run_dir: the run folder.
    videos: render `videos/<update>/`: from the newest saved traces, or, when the run has none
      or `step` is given, from a fresh evaluation of that checkpoint (newest when None).
    step: a checkpoint to render (implies `videos`); its saved traces are reused if present.
    log: where progress lines go.

  Raises:
    FileNotFoundError: no run folder, ledger, config or manifest there, naming the path.
    ValueError: a malformed ledger line.
    checkpoint.CheckpointError: `step` names no checkpoint of the run.
  """
  run_dir = pathlib.Path(run_dir)
  records = ledger.read_run(run_dir)
  folder = run_folder.RunFolder.open(run_dir)
  config = folder.read_config()
  manifest = folder.read_manifest()
  rendered, traces, update = [], None, None
  if videos or step is not None:
    saved = trace_updates(run_dir)
    if step is not None and step in saved:
      update = step
    elif step is None and saved:
      update = saved[-1]
    else:
      _, step = policy_lib.resolve(run_dir, step)  # refuses an unknown step before any work
      log(f"evaluating checkpoint {step} with traces...")
      record, _ = evaluate_with_traces(run_dir, step)
      update = record["update"]
      log(ledger.format_eval_table(record))
    traces = traces_path(run_dir, update)
    log(f"rendering the traced episodes of update {update}...")
    rendered = render_videos(run_dir, update, config)
  plots = make_plots(run_dir, records, config)
  path = write_report(run_dir, records, config, manifest, plots, video_update=update)
  return Built(report=path, plots=plots, videos=rendered, traces=traces)
