"""MuJoCo MJX, imported without the noise of its optional backend.

`mujoco.mjx` tries to import its optional Warp backend and prints `Failed to import warp: ...`
to stdout when it is absent, as it is on a CPU install and in our pinned stack (we use
`impl="jax"`). A user reads that line as a failure, so the package imports MJX here, once, with
that print captured. Every module that needs MJX imports it from here.
"""

import contextlib
import io

with contextlib.redirect_stdout(io.StringIO()):
  from mujoco import mjx  # pylint: disable=g-import-not-at-top,unused-import

__all__ = ["mjx"]
