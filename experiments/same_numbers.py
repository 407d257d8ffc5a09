"""Do two runs hold the same numbers? Compares two run folders record by record and leaf by leaf.

  python experiments/same_numbers.py runs/<before> runs/<after>

Made for behaviour-preserving changes: train the same fixed-seed short run on the commit before
and after, then compare. It reads the files directly (JSON lines, and the checkpoints' array items
through Orbax), not through the package's own readers, so that a change to those readers cannot
hide a difference.

  ledger       every `update` and `eval` record, every value except the wall-clock ones
               (`perf/sps`, `perf/wall_seconds`, `wall_seconds`, `device/memory_bytes`), compared
               for exact equality (floats included: the JSON text of each value);
  checkpoints  the same steps in both; every stored leaf of every array item (train, env,
               policy), compared by name, shape, dtype and bytes. `--renamed=old:new,...`
               pairs an env leaf whose name changed with its new name; a renamed leaf must
               still hold the same values (a float 0/1 that became a bool compares by value).

Prints one JSON line: the counts compared, the differences (at most 20 listed) and `same`.
Exit status 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import json
import pathlib
import sys

from absl import app
from absl import flags
from absl import logging
import numpy as np
import orbax.checkpoint as ocp

_RENAMED = flags.DEFINE_list(
    "renamed", [], "old_leaf:new_leaf pairs of checkpoint leaves whose name changed, e.g. "
    "env/metrics_audit_contact:env/signals_contact.")

WALL_CLOCK = {"perf/sps", "perf/wall_seconds", "wall_seconds", "device/memory_bytes"}
ARRAY_ITEMS = ("train", "env", "policy")


def _records(run_dir: pathlib.Path) -> list[dict]:
  lines = (run_dir / "ledger.jsonl").read_text().splitlines()
  return [r for r in map(json.loads, filter(str.strip, lines)) if r.get("kind") in ("update", "eval")]


def _flat(value, prefix: str = "") -> dict[str, str]:
  """{dotted key: JSON text} of every leaf value of a record."""
  if isinstance(value, dict):
    out = {}
    for key, inner in value.items():
      out.update(_flat(inner, f"{prefix}{key}."))
    return out
  return {prefix.rstrip("."): json.dumps(value)}


def compare_ledgers(before: pathlib.Path, after: pathlib.Path) -> tuple[int, list[str]]:
  a, b = _records(before), _records(after)
  problems = []
  if [(r["kind"], r["update"]) for r in a] != [(r["kind"], r["update"]) for r in b]:
    problems.append(f"record sequence differs: {len(a)} records before, {len(b)} after")
  values = 0
  for ra, rb in zip(a, b):
    fa = {k: v for k, v in _flat(ra).items() if k.split(".")[0] not in WALL_CLOCK}
    fb = {k: v for k, v in _flat(rb).items() if k.split(".")[0] not in WALL_CLOCK}
    where = f"{ra['kind']} {ra['update']}"
    for key in sorted(set(fa) | set(fb)):
      values += 1
      if fa.get(key) != fb.get(key):
        problems.append(f"{where}: {key}: {fa.get(key)} -> {fb.get(key)}")
  return values, problems


def _item(path: pathlib.Path) -> dict[str, np.ndarray]:
  with ocp.StandardCheckpointer() as checkpointer:
    tree = checkpointer.restore(path.resolve())
  return {name: np.asarray(value) for name, value in tree.items()}


def compare_checkpoints(before: pathlib.Path, after: pathlib.Path,
                        renamed: dict[str, str]) -> tuple[int, list[str]]:
  steps = lambda run: sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit())
  problems = []
  if steps(before) != steps(after):
    problems.append(f"checkpoint steps differ: {steps(before)} -> {steps(after)}")
  leaves = 0
  for step in sorted(set(steps(before)) & set(steps(after))):
    for item in ARRAY_ITEMS:
      a = _item(before / "checkpoints" / step / item)
      b = _item(after / "checkpoints" / step / item)
      mapping = {old.split("/", 1)[1]: new.split("/", 1)[1]
                 for old, new in renamed.items() if old.startswith(f"{item}/")}
      for name in sorted(a):
        leaves += 1
        new_name = mapping.get(name, name)
        where = f"step {step} {item}/{name}"
        if new_name not in b:
          problems.append(f"{where}: missing after")
          continue
        x, y = a[name], b[new_name]
        if name in mapping:
          same = x.shape == y.shape and np.array_equal(x.astype(np.float64), y.astype(np.float64))
        else:
          same = (x.shape == y.shape and x.dtype == y.dtype
                  and np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes())
        if not same:
          problems.append(f"{where}: differs ({x.dtype}{list(x.shape)} -> "
                          f"{y.dtype}{list(y.shape)})")
      extra = sorted(set(b) - {mapping.get(n, n) for n in a})
      problems += [f"step {step} {item}/{name}: only after" for name in extra]
  return leaves, problems


def main(argv: list[str]) -> None:
  if len(argv) != 3:
    raise app.UsageError("give two run folders: before and after")
  logging.set_verbosity(logging.WARNING)
  before, after = pathlib.Path(argv[1]), pathlib.Path(argv[2])
  renamed = dict(pair.split(":", 1) for pair in _RENAMED.value)
  values, ledger_problems = compare_ledgers(before, after)
  leaves, checkpoint_problems = compare_checkpoints(before, after, renamed)
  problems = ledger_problems + checkpoint_problems
  print(json.dumps({
      "ledger_values_compared": values, "ledger_differences": len(ledger_problems),
      "checkpoint_leaves_compared": leaves, "checkpoint_differences": len(checkpoint_problems),
      "renamed_leaves": len(renamed), "first_differences": problems[:20],
      "same": not problems}))
  sys.exit(0 if not problems else 1)


if __name__ == "__main__":
  app.run(main)
