"""Pytest setup shared by every test module: JAX's persistent compilation cache, the folder the
xdist workers share, the order files are handed out in, and the cache's figures at the end."""

import collections
import importlib.metadata
import json
import os
import pathlib
import tempfile
import time

from absl import flags
import pytest

# Offscreen rendering (tests/test_report.py) needs a headless GL backend. MuJoCo picks it when it
# is first imported, so this is set before any test module imports mujoco; `.ci/run` installs the
# EGL (and the OSMesa fallback) libraries. Export MUJOCO_GL=osmesa to use software rendering.
os.environ.setdefault("MUJOCO_GL", "egl")

# Many tests compile the same small programs (the env step, a tiny trainer chunk, the panel), in
# several xdist workers and in subprocesses that inherit this environment. JAX's persistent
# compilation cache turns every repeat into a disk read. Programs that compile in under a second
# are left out: keeping the ~2,700 single operations run outside jit too saved 40 s of compile
# and cost 50 s more of system time (measured on the 2-core machine). Set before any test module
# imports jax.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "mjx_walk-test-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")

SHARED = "MJX_WALK_TEST_SHARED"
"""The environment variable naming a folder of this pytest session that every xdist worker sees
(`runs.trained` builds its run there once, under a file lock)."""

_CACHE_EVENTS = {"/jax/compilation_cache/cache_hits": "hits",
                 "/jax/compilation_cache/cache_misses": "written"}
_COMPILE_SECONDS = "/jax/core/compile/backend_compile_duration"
_COMPILE_LOG = "MJX_WALK_COMPILE_LOG"
"""Set to a file's path to append one line per compiled or cache-read program to it: the test,
the program's name and its seconds (for finding programs that only one file uses)."""
_CPU_LOG = "MJX_WALK_CPU_LOG"
"""Set to a file's path to append one line per test phase to it: the CPU seconds this process
and the subprocesses it waited for spent on it (user and system), then its wall seconds. CPU
seconds hardly change when other work shares the cores, so they show what a test costs even on
a busy machine."""
_cache = collections.Counter()
_WORKER = pytest.StashKey[str]()
_running = {"test": "(collection)"}


def _count_event(event, **kwargs):
  del kwargs
  if event in _CACHE_EVENTS:
    _cache[_CACHE_EVENTS[event]] += 1


def _count_seconds(event, seconds, **kwargs):
  if event == _COMPILE_SECONDS:
    _cache["compiles"] += 1
    _cache["compile_seconds"] += seconds
    if os.environ.get(_COMPILE_LOG):
      with open(os.environ[_COMPILE_LOG], "a") as log:
        log.write(f"{seconds:8.2f} {kwargs.get('fun_name')} {_running['test']}\n")


def pytest_runtest_logstart(nodeid, location):
  del location
  _running["test"] = nodeid


def _cpu_seconds() -> float:
  t = os.times()
  return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
  del nextitem
  if not os.environ.get(_CPU_LOG):
    return (yield)
  cpu, wall = _cpu_seconds(), time.monotonic()
  try:
    return (yield)
  finally:
    with open(os.environ[_CPU_LOG], "a") as log:
      log.write(f"{_cpu_seconds() - cpu:8.2f} {time.monotonic() - wall:8.2f} {item.nodeid}\n")


# XLA's CPU backend without its LLVM optimizations: the tiny config's training chunk compiles in
# 20 s instead of 34 s and runs 0.07 s instead of 0.02 s (measured on the 2-core machine), and the
# default suite is mostly compiling. The same semantics, rounded differently in the last bits, so
# every bit-for-bit claim is checked between programs compiled alike. The slow tests (`-m slow`)
# train for real and keep the optimized programs users run; MJX_WALK_TEST_OPTIMIZED=1 keeps them
# for any run.
_QUICK_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# jaxlib 0.10's CPU fusion emitters take about half of what is left: with them off, the tiny chunk
# compiles in 17 CPU seconds instead of 31 to 35. jaxlib 0.11 dropped the switch (its own
# compile of that chunk takes 27 to 30), and XLA aborts on a flag it does not know, so it is set
# only for the jaxlib that has it.
_OLD_EMITTERS = "--xla_cpu_use_fusion_emitters=false"


def _quick_compile_flags() -> str:
  major, minor = (int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])
  return _QUICK_COMPILE + (f" {_OLD_EMITTERS}" if (major, minor) < (0, 11) else "")


def pytest_configure(config):
  # absltest helpers (create_tempdir, create_tempfile) read absl flags; pytest never parses them.
  flags.FLAGS.mark_as_parsed()
  xla_flags = os.environ.get("XLA_FLAGS", "")
  if (config.option.markexpr.strip() != "slow" and "MJX_WALK_TEST_OPTIMIZED" not in os.environ
      and _QUICK_COMPILE not in xla_flags):
    # Before JAX starts its CPU backend; inherited by the workers and every subprocess.
    os.environ["XLA_FLAGS"] = f"{xla_flags} {_quick_compile_flags()}".strip()
  # The controller makes the shared folder before it starts the workers, which inherit it.
  os.environ.setdefault(SHARED, tempfile.mkdtemp(prefix="mjx_walk-tests-"))
  import jax  # pylint: disable=g-import-not-at-top
  jax.monitoring.register_event_listener(_count_event)
  jax.monitoring.register_event_duration_secs_listener(_count_seconds)
  config.stash[_WORKER] = os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_unconfigure(config):
  # Each process leaves its figures in the shared folder; the controller sums them.
  path = pathlib.Path(os.environ[SHARED]) / f"jax-cache-{config.stash[_WORKER]}.json"
  path.write_text(json.dumps(dict(_cache)))


def trace_afresh() -> None:
  """Drops this process's traces and compiled programs, before a test traces a program that
  other workers (or the shared runs of `runs.py`) compile too.

  JAX keys its persistent compilation cache on the lowered module. A program traced after
  others in the same process reuses their cached inner traces (MJX's step, `jnp.where`, ...),
  so that its private functions can come out merged and numbered differently: another key,
  and a compile where a read was due. The tiny single-seed chunk traced after the 3-seed one
  got another key (a 46 s compile in the suite) and, after `jax.clear_caches()`, the key a
  fresh process gives it (2026-12-06). The price is tracing anew, and compiling anew the small
  programs the cache does not keep, whatever this process traced before: about 16 CPU seconds
  a call in `SeedRunTest`, where two calls (before its run and before its resume) cost 32 CPU
  seconds more than the 2-seed chunk they saved compiling (65 against 97, a warm cache). So it
  is called only where a program is shared and would otherwise be compiled.

  Tracing anew is most of that price, not compiling: clearing every JAX cache but the two that
  hold compiled programs (`xla_primitive_callable`, `_cached_compilation`) gives the same fresh
  key and cost as much (`SeedAxisTest` and `SeedRunTest`, a warm cache, twice each: 209 and 214
  CPU s against 212 and 223), and in a cold suite run `SeedRunTest` with two such clears read
  the 2-seed chunk instead of compiling it (10 s of compiling and reading instead of 54) yet took
  86 CPU s instead of 75 (2026-12-07). Called before every test, it took test_env,
  test_families, test_audit and test_observations from 167 to 209 CPU s (one process, a cold
  cache, the same 9 programs compiled either way).
  """
  import jax  # pylint: disable=g-import-not-at-top
  jax.clear_caches()


def pytest_terminal_summary(terminalreporter):
  total = collections.Counter()
  for path in pathlib.Path(os.environ[SHARED]).glob("jax-cache-*.json"):
    total.update(json.loads(path.read_text()))
  total.update(_cache)  # this process's own (the controller, or the only one with -n 0)
  terminalreporter.write_line(
      f"JAX compilation cache ({os.environ['JAX_COMPILATION_CACHE_DIR']}): "
      f"{total['hits']} programs read, {total['written']} compiled and written; "
      f"{total['compiles']} programs compiled or read in {total['compile_seconds']:.0f} s "
      "(subprocesses not counted)")


# The longest files first (cold compilation cache): pytest-xdist hands out whole files
# (`--dist loadfile`) in collection order (`--no-loadscope-reorder` in pyproject.toml; without it
# xdist sorts files by their number of tests, and this order would only break ties), so a long
# file collected last would run alone at the end. Ordered by their measured wall seconds on a cold
# cache (2026-12-06; tests/README.md, "The order files start in, again"); the rest follow
# alphabetically. A new long file belongs here.
_LONGEST_FIRST = ("test_checkpoint.py", "test_sim2sim.py", "test_trainer.py", "test_seeds.py",
                  "test_evaluate.py", "test_terrain.py", "test_gpu_check.py",
                  "test_train.py", "test_export.py", "test_env.py", "test_families.py",
                  "test_ppo.py", "test_traces.py", "test_layers.py", "test_report.py",
                  "test_sharding.py", "test_robots.py", "test_audit.py", "test_scaling.py",
                  "test_videos.py", "test_seed_report.py")


def pytest_collection_modifyitems(config, items):
  del config
  rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
