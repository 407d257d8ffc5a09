"""Pytest setup shared by every test module."""

import os
import tempfile

from absl import flags

# Offscreen rendering (tests/test_report.py) needs a headless GL backend. MuJoCo picks it when it
# is first imported, so this is set before any test module imports mujoco; `.ci/run` installs the
# EGL (and the OSMesa fallback) libraries. Export MUJOCO_GL=osmesa to use software rendering.
os.environ.setdefault("MUJOCO_GL", "egl")

# Many tests compile the same small programs (the env step, a tiny trainer chunk, the panel), in
# several xdist workers and in subprocesses that inherit this environment. JAX's persistent
# compilation cache turns every repeat into a disk read. Set before any test module imports jax.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "mjx_walk-test-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")


def pytest_configure(config):
  del config
  # absltest helpers (create_tempdir, create_tempfile) read absl flags; pytest never parses them.
  flags.FLAGS.mark_as_parsed()
