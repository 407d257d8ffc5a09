"""MuJoCo MJX, imported without the noise of its optional backend.

`mujoco.mjx` tries to import its optional Warp backend and prints `Failed to import warp: ...`
to stdout when it is absent, as it is on a CPU install and in our pinned stack (we use
`impl="jax"`). A user reads that line as a failure, so the package imports MJX here, once, with
that print captured. Every module that needs MJX imports it from here.

It also holds MJX's `step` and `kinematics` jitted once per process (`step`, `kinematics`). An
env's step and reset call them, so every program that traces an env (the trainer's chunk, its
init, the panel, a replay) traces MJX's physics once per process and shape instead of once per
program: the second trainer or evaluator of a process traces and lowers in about 3.6 s instead
of 8.9 s (the tiny test config on the 2-core machine). XLA inlines the call, so the compiled
programs compute the same bits as with MJX's functions traced in place (checked on a training
chunk, with and without XLA's optimizations).
"""

import contextlib
import io

with contextlib.redirect_stdout(io.StringIO()):
  from mujoco import mjx  # pylint: disable=g-import-not-at-top,unused-import

import jax

step = jax.jit(mjx.step)
"""`mjx.step(model, data)`, one trace per process and argument shapes."""

kinematics = jax.jit(mjx.kinematics)
"""`mjx.kinematics(model, data)`, one trace per process and argument shapes."""

__all__ = ["mjx", "step", "kinematics"]
