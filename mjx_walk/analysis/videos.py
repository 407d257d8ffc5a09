"""Videos of held-out episodes: offscreen rendering with `mujoco.Renderer` and MP4s via ffmpeg.

  videos/<update>/<stratum>.mp4   one traced held-out episode per stratum
                                  (`eval/<update>_traces.npz`, `mjx_walk.evaluation.traces`),
                                  rendered by `render_videos` from a camera that follows the trunk,
                                  with the time, command and end reason burnt into each frame;
  videos/<update>/captions.json   beside them: each episode's family, command schedule, how it
                                  ended and its length (`format_caption` words one for the report).
  videos/<update>/not_rendered.json  instead, when they could not be rendered: why
                                  (`record_not_rendered`), for the report to say.

On a heightfield run (`terrain.ground="heightfield"`) each episode is drawn on its own ground: the
render model has the simulated model's heightfield, and the family's heights, regenerated from
the manifest (`terrain.held_out_heights`), are written into it and uploaded to the GL context
before its frames. The traced trunk stays on the tile (the env moves it back by whole tiles), and
the ground repeats with the tile, so the picture is seamless across such a move.

Rendering needs an OpenGL context. MuJoCo picks its backend (`MUJOCO_GL`) when it is first
imported; the package (`mjx_walk/__init__.py`) defaults it to `egl` on a Linux machine without a
display. A process that imported mujoco before mjx_walk must set `MUJOCO_GL` itself (`osmesa` is
the software fallback); `check_gl` refuses early when it did not.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any
from typing import Sequence
import warnings

import imageio.v2 as imageio
import mujoco
import numpy as np
from PIL import Image
from PIL import ImageDraw

from mjx_walk import config as config_lib
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.run import run_folder
from mjx_walk.sim import endings
from mjx_walk.sim import robots
from mjx_walk.sim import terrain as terrain_lib

CAPTIONS_FILENAME = "captions.json"
NOT_RENDERED_FILENAME = "not_rendered.json"
"""In `videos/<update>/`: why the videos of that update were not rendered."""

CAMERA_DISTANCE = 1.6
"""Metres from the trunk to the following camera."""
CAMERA_AZIMUTH = 135.0
"""Degrees; the camera's heading is fixed in the world, so turns show as turns."""
CAMERA_ELEVATION = -20.0
"""Degrees below the horizon."""

SHOWN_GEOM_GROUPS = 4
"""Geom groups 0-3 are drawn: the Go2 MJCF has visual geoms (group 2) for the hips and calves
only, and its trunk, thighs and feet exist as collision geoms (group 3)."""



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


def render_model(robot: robots.Robot, width: int, height: int) -> mujoco.MjModel:
  """The robot's scene for rendering: a checkered floor (so that motion shows under a following
  camera) and an offscreen buffer of at least width x height. Ids are the simulated model's; a
  robot loaded with a heightfield floor keeps it, of the same shape (`robots.scene_spec`), its
  heights written per episode by `render_episode`."""
  spec = robots.scene_spec(robot)
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


def set_ground(renderer: mujoco.Renderer, robot: robots.Robot, heights: np.ndarray) -> None:
  """Writes a heightfield's heights (float [nodes, nodes], m, rows along y) into the render
  model and uploads them to the renderer's GL context, which otherwise keeps drawing the heights
  the model had when the renderer was made."""
  model = renderer.model
  hfield = int(model.geom_dataid[robot.floor_geom_id])
  if model.geom_type[robot.floor_geom_id] != mujoco.mjtGeom.mjGEOM_HFIELD or hfield < 0:
    raise ValueError("the render model's floor is not a heightfield")
  nodes = (int(model.hfield_nrow[hfield]), int(model.hfield_ncol[hfield]))
  if np.shape(heights) != nodes:
    raise ValueError(f"heights of shape {np.shape(heights)} for a heightfield of {nodes}")
  start = int(model.hfield_adr[hfield])
  model.hfield_data[start:start + nodes[0] * nodes[1]] = np.asarray(heights).reshape(-1)
  # mujoco.Renderer (3.17) has no public upload: its GL context must be current for the call.
  context = getattr(renderer, "_gl_context", None)
  if context is not None:
    context.make_current()
  mujoco.mjr_uploadHField(model, renderer._mjr_context, hfield)  # pylint: disable=protected-access


def render_episode(renderer: mujoco.Renderer, robot: robots.Robot, qpos: np.ndarray,
                   gravity: np.ndarray, every: int,
                   overlay: Sequence[str] | None = None,
                   heights: np.ndarray | None = None) -> np.ndarray:
  """Renders every `every`-th state of an episode from a camera that follows the trunk.

  Args:
    renderer: built on `render_model(robot, ...)`.
    robot: the robot (trunk id, floor geom id, free joint).
    qpos: float [L, nq], the episode's states.
    gravity: float [3], the family's gravity; a tilted one is drawn as an inclined floor.
    every: render states 0, every, 2 * every, ...
    overlay: one caption per rendered frame, burnt into its top-left corner; None for none.
    heights: on a heightfield, the episode's ground (float [nodes, nodes], m; `set_ground`);
      None keeps the heights the render model has (on the plane, there are none).

  Returns:
    uint8 [ceil(L / every), H, W, 3] (with segmentation rendering enabled on the renderer:
    int32 [ceil(L / every), H, W, 2] object ids and types, and no overlay).
  """
  model = renderer.model
  if heights is not None:
    set_ground(renderer, robot, heights)
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
  On a heightfield each episode is drawn on its family's ground, regenerated from the run's
  manifest.

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
  folder = run_folder.RunFolder(pathlib.Path(run_dir))
  saved = trace_files.load_eval_traces(folder.eval_traces_path(update))
  check_gl()
  report = config.report
  control_hz = config.env.control_hz
  every = max(1, round(control_hz / report.video_fps))
  robot = robots.load(config.env.robot, terrain_lib.heightfield(config.terrain))
  out = folder.videos_dir(update)
  traces = saved.traces
  grounds = None  # [S, nodes, nodes] on a heightfield
  if robot.heightfield is not None:
    draws = folder.read_manifest().eval_params().terrain
    grounds = terrain_lib.held_out_heights(config.terrain, draws)[np.asarray(traces.family_index)]
  paths, captions = [], {}
  renderer = mujoco.Renderer(render_model(robot, report.video_width, report.video_height),
                             height=report.video_height, width=report.video_width)
  try:
    for s, stratum in enumerate(saved.strata):
      length = int(traces.length[s])
      reason = saved.reason_names[s]
      overlay = [
          f"{stratum}  t {t / control_hz:5.2f} s\n"
          f"cmd {_format_command(*(float(c) for c in traces.command[s, t]))}\n"
          f"ends: {reason} at {length / control_hz:.2f} s"
          for t in range(0, length, every)]
      frames = render_episode(renderer, robot, traces.qpos[s, :length], traces.gravity[s],
                              every, overlay, None if grounds is None else grounds[s])
      path = write_video(out / f"{stratum}.mp4", frames, report.video_fps)
      paths.append(path)
      captions[stratum] = {
          "video": path.name,
          "family_seed": saved.family_seeds[s],
          "env_index": int(traces.env_index[s]),
          "end_reason": reason,
          "terminated": reason in endings.TERMINATION_NAMES,
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


def record_not_rendered(run_dir: pathlib.Path | str, update: int, reason: str) -> pathlib.Path:
  """Records that the videos of `update` were not rendered, and why, for the report to say.

  Returns:
    The file written, `videos/<update>/not_rendered.json`.
  """
  folder = run_folder.RunFolder(pathlib.Path(run_dir)).videos_dir(update)
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / NOT_RENDERED_FILENAME
  path.write_text(json.dumps({"update": update, "reason": reason}, indent=1))
  return path
