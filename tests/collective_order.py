"""Collectives of a compiled program that one device could have waiting at the same time.

XLA's CPU runtime starts a program's thunks in its schedule's order, and a collective only after
the one before it has started (a "scheduling" edge, not an execution edge). A loop (or a
conditional, or a call) whose body holds collectives can return before its body has finished, so
a collective after it that does not read its results can start while the body still waits in
one of its own. On forced host devices both then hold a worker of the pool that the devices
share (see `mjx_walk.learn.sharding.after`). `overlaps` reads a compiled module's text
(`jax.jit(f).lower(...).compile().as_text()`) and names every pair that this or another
schedule could run so: a collective and a nested sequence holding collectives (or two such
sequences) in one computation, neither of which reads the other's results.

Imported as `collective_order` by tests/sharded_runs.py and tests/test_sharding.py.
"""

from __future__ import annotations

import dataclasses
import re

COLLECTIVES = frozenset({
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "all-reduce-start", "all-gather-start", "collective-permute-start"})
"""HLO opcodes that wait for the other devices."""

NESTING = frozenset({"while", "conditional", "call"})
"""HLO opcodes that run other computations as nested thunk sequences."""

_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?([\w.\-]+) = (.*)$")
_OPCODE = re.compile(r"\s([a-z][a-z0-9\-]*)\(")
_CALLED = re.compile(
    r"\b(?:condition|body|to_apply|calls|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")


@dataclasses.dataclass(frozen=True)
class Instruction:
  name: str
  opcode: str
  operands: tuple[str, ...]
  called: tuple[str, ...]


def _parse_instruction(name: str, rest: str) -> Instruction:
  rest = " " + rest  # the opcode follows a space (or a tuple shape's parenthesis)
  match = _OPCODE.search(rest)
  if match is None:
    return Instruction(name, "?", (), ())
  start = match.end() - 1  # the opening parenthesis
  depth, end = 0, len(rest)
  for i in range(start, len(rest)):
    depth += {"(": 1, ")": -1}.get(rest[i], 0)
    if depth == 0:
      end = i
      break
  operands = tuple(re.findall(r"%([\w.\-]+)", rest[start:end]))
  attributes = rest[end:]
  called = list(_CALLED.findall(attributes))
  for group in _BRANCHES.findall(attributes):
    called += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
  return Instruction(name, match.group(1), operands, tuple(called))


def parse(text: str) -> dict[str, list[Instruction]]:
  """{computation name: its instructions in schedule order} of a scheduled HLO module's text."""
  if "is_scheduled=true" not in text.splitlines()[0]:
    raise ValueError("not a scheduled module: pass the compiled program's text")
  computations: dict[str, list[Instruction]] = {}
  current = None
  for line in text.splitlines():
    header = _HEADER.match(line)
    if header and not line.startswith(" "):
      current = computations.setdefault(header.group(1), [])
    elif line.strip() == "}":
      current = None
    elif current is not None and (instruction := _INSTRUCTION.match(line)):
      current.append(_parse_instruction(*instruction.groups()))
  return computations


def upstream(body: list[Instruction]) -> dict[str, set[str]]:
  """{instruction: every instruction of `body` whose result it reads, directly or not}."""
  found: dict[str, set[str]] = {}
  for i in body:
    found[i.name] = set(i.operands).union(*(found.get(o, set()) for o in i.operands))
  return found


def entry(text: str) -> str:
  """The name of the module's entry computation."""
  return next(_HEADER.match(line).group(1) for line in text.splitlines()
              if line.startswith("ENTRY "))


def count(text: str) -> int:
  """How many collectives the module holds, counting each once wherever it is nested."""
  return sum(i.opcode in COLLECTIVES for body in parse(text).values() for i in body)


def overlaps(text: str) -> list[str]:
  """'computation: A, B' for every two instructions of one computation that hold collectives,
  at least one of them in a nested sequence, when neither reads the other's results: on this
  schedule or on another machine's (the schedule depends on the processor XLA compiles for),
  the nested one can be waiting in a collective of its body while the other starts."""
  computations = parse(text)
  holds: dict[str, bool] = {}

  def holds_collectives(name: str) -> bool:
    if name not in holds:
      holds[name] = False  # a recursion guard; HLO computations do not recurse
      holds[name] = any(_waits(i) for i in computations.get(name, ()))
    return holds[name]

  def _waits(i: Instruction) -> bool:
    return i.opcode in COLLECTIVES or (
        i.opcode in NESTING and any(holds_collectives(c) for c in i.called))

  found = []
  for computation, body in computations.items():
    reads = upstream(body)
    waiting = [i for i in body if _waits(i)]
    for k, first in enumerate(waiting):
      found += [f"{computation}: {first.opcode} {first.name}, {later.opcode} {later.name}"
                for later in waiting[k + 1:]
                if NESTING & {first.opcode, later.opcode} and first.name not in reads[later.name]]
  return found
