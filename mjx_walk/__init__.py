"""mjx_walk: a JAX-native PPO trainer that teaches quadrupeds to walk in MuJoCo MJX."""

import os as _os
import sys as _sys

# MuJoCo picks its OpenGL backend once, when it is first imported, and every module here imports
# it. On a Linux machine without a display the default (GLFW) cannot render, so offscreen videos
# use EGL there unless the user chose a backend (MUJOCO_GL=osmesa renders in software).
if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
  _os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
