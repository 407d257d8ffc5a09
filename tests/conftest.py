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


# The longest files first (cold compilation cache): pytest-xdist hands out whole files
# (`--dist loadfile`) in collection order, so a long file collected last would run alone at the
# end. Ordered by their summed test durations on a cold cache (`pytest --durations=0`,
# 2026-12-01: test_sharding (its subprocesses) about 400 s, test_env 190 s, test_checkpoint 180 s, test_trainer 170 s, test_notebooks 121 s,
# test_sim2sim 135 s, test_train 113 s, test_evaluate 98 s, test_export 55 s, test_families
# 52 s; test_gpu_check, alone with `-n 0`, 212 s, nearly all of it one subprocess compiling);
# test_terrain, about 260 s on a shared 2-core machine (2026-12-02), most of it its resume;
# the rest follow alphabetically.
_LONGEST_FIRST = ("test_sharding.py", "test_terrain.py", "test_gpu_check.py", "test_env.py",
                  "test_checkpoint.py",
                  "test_trainer.py", "test_notebooks.py", "test_sim2sim.py", "test_train.py",
                  "test_evaluate.py", "test_export.py", "test_families.py")


def pytest_collection_modifyitems(config, items):
  del config
  rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
