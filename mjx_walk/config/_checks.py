"""What every section's validation shares: the one error format and the common checks.

Every refusal is a `ValueError` reading `config.<dotted field>=<value> is invalid: <what would be
accepted>.`, raised before anything is compiled or written.
"""

import dataclasses
import math
from typing import Any


def range_field(low: float, high: float) -> Any:
  """A `(low, high)` tuple field with that default."""
  return dataclasses.field(default=(low, high))


def fail(where: str, value: Any, accepted: str) -> None:
  """Refuses `config.<where>=<value>`, saying what would be accepted."""
  raise ValueError(f"config.{where}={value!r} is invalid: {accepted}.")


def check_finite(section: Any, prefix: str = "") -> None:
  """Refuses NaN and +-inf in every float field (and every float inside a tuple field)."""
  for field in dataclasses.fields(section):
    value = getattr(section, field.name)
    where = f"{prefix}{field.name}"
    if dataclasses.is_dataclass(value):
      check_finite(value, f"{where}.")
    elif any(isinstance(v, float) and not math.isfinite(v)
             for v in (value if isinstance(value, (tuple, list)) else (value,))):
      fail(where, value, "it must be a finite number (not NaN or infinity)")


def check_positive(where: str, value: float) -> None:
  if not value > 0:
    fail(where, value, "it must be > 0")


def check_positive_int(where: str, value: Any) -> None:
  if not isinstance(value, int) or value <= 0:
    fail(where, value, "it must be a positive integer")


def check_nonnegative(where: str, value: float) -> None:
  if value < 0:
    fail(where, value, "it must be >= 0")


def check_range(where: str, value: Any, *, nonnegative: bool = False) -> None:
  """A `(low, high)` pair with low <= high (and low >= 0 with `nonnegative`)."""
  if not (isinstance(value, (tuple, list)) and len(value) == 2):
    fail(where, value, "it must be a (low, high) pair")
  low, high = value
  if not low <= high:
    fail(where, value, "low must be <= high")
  if nonnegative and low < 0:
    fail(where, value, "both ends must be >= 0")
