"""The rollout ledger as a file format: `ledger.jsonl` in a run folder, its record kinds, and how
they read as text.

One JSON object per line, each with a `kind`:
  recipe  the run's batch geometry, policy lag, family counts, devices, packages, commit and
          manifest hash; the first record (a resumed run appends another);
  update  one per PPO update: speed, returns, every reward term, reset-reason shares, advantage
          and loss statistics, learning rate, device memory, and the batch audits (contact
          events, reward shares, synchrony, and as JSON objects and lists the reset reasons per
          family and the fall height and tilt histograms);
  eval    one per held-out panel evaluation, per stratum; a run of several training seeds
          (`config.num_seeds` > 1) adds `num_seeds`, `seeds` (each seed's own table, in seed
          order) and `spread` (per stratum, the mean, interquartile mean and 95% interval over
          seeds of success, fall and the two tracking errors: `mjx_walk.run.spread`), and its
          `strata` are then the means over seeds, with the reset counts summed;
  divergence  the update at which the run stopped because a loss, gradient norm or parameter
          went non-finite, which ones did, and the checkpoint to resume from;
  sim2sim one per second-simulator check of a checkpoint (`python -m mjx_walk.sim2sim`): the
          panel's per-stratum table in C MuJoCo beside MJX's, the gap per stratum, the solver
          settings and the policy that ran (ONNX or JAX; in a multi-seed run, its `seed`).

`mjx_walk.run.provenance` builds the recipe record of a training run and `mjx_walk.learn.records`
its update records; `python -m mjx_walk.ledger` prints a ledger. This module imports only the
standard library, NumPy and `mjx_walk.run.spread` (no JAX, no MuJoCo), so reading a ledger starts
at once.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any
from typing import Iterable

import numpy as np

from mjx_walk.run import spread

FILENAME = "ledger.jsonl"
"""The ledger's name in a run folder."""
KINDS = ("recipe", "update", "eval", "divergence", "sim2sim")
_HISTORY_KINDS = ("recipe", "divergence")


def of_kind(records: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
  """The records of `kind`, in order. A record without a kind (written before kinds existed)
  counts as an update."""
  if kind not in KINDS:
    raise ValueError(f"ledger record kind {kind!r} is invalid; accepted kinds are "
                     f"{', '.join(KINDS)}.")
  return [r for r in records if r.get("kind", "update") == kind]


def eval_record(result: dict[str, Any], *, update: int, env_steps: int,
                wall_seconds: float) -> dict[str, Any]:
  """A `kind="eval"` record: where in the run, then the evaluation result (panel_hash, strata)."""
  return {"kind": "eval", "update": update, "env_steps": env_steps, "wall_seconds": wall_seconds,
          **result}


def _jsonable(value: Any) -> Any:
  """JSON has no NaN or inf: undefined figures (no episode ended yet) become null."""
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple, np.ndarray)):
    return [_jsonable(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def _check_kind(record: Any, where: str) -> None:
  kind = record.get("kind") if isinstance(record, dict) else None
  if kind not in KINDS:
    raise ValueError(f"{where}: ledger record kind {kind!r} is invalid; accepted kinds are "
                     f"{', '.join(KINDS)}.")


class Ledger:
  """Appends records to a ledger file, one flushed JSON line each.

  Usage: `with Ledger(run_dir / FILENAME) as ledger: ledger.write(record)`.
  """

  def __init__(self, path: pathlib.Path):
    self.path = pathlib.Path(path)
    self._file = self.path.open("a")

  def __enter__(self) -> Ledger:
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def write(self, record: dict[str, Any]) -> None:
    """Appends `record`; NaN and inf anywhere inside it are written as null.

    Raises:
      ValueError: when the record has no `kind` in KINDS.
    """
    _check_kind(record, str(self.path))
    self._file.write(json.dumps(_jsonable(record), allow_nan=False) + "\n")
    self._file.flush()  # a crash loses at most the record being written

  def close(self) -> None:
    self._file.close()


def read(path: pathlib.Path | str) -> list[dict[str, Any]]:
  """Every record of a ledger file, in order.

  Raises:
    FileNotFoundError: naming the path, when there is no such file.
    ValueError: naming the path and line number of a malformed line.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"no ledger at {path}")
  records = []
  with path.open() as file:
    for number, line in enumerate(file, start=1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: malformed ledger line ({error.msg})") from None
      _check_kind(record, f"{path}:{number}")
      records.append(record)
  return records


def truncate_after(path: pathlib.Path | str, update: int, dropped_path: pathlib.Path | str) -> int:
  """Rewinds a ledger to a checkpoint: drops records past `update`, and a torn last line.

  A run killed after its last checkpoint has ledger records that the resumed run will write
  again. They are moved, not deleted, to `dropped_path` (appended); the ledger itself is
  replaced atomically. Recipe and divergence records are history of the run and stay.

  Returns:
    How many lines were moved.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    return 0
  kept, dropped = [], []
  for line in path.read_text().splitlines(keepends=True):
    try:
      record = json.loads(line)
      keep = record.get("kind") in _HISTORY_KINDS or record.get("update", 0) <= update
    except json.JSONDecodeError:
      keep = False  # a line torn by a kill
    if line.strip():
      (kept if keep else dropped).append(line if line.endswith("\n") else line + "\n")
  if dropped:
    with pathlib.Path(dropped_path).open("a") as file:
      file.writelines(dropped)
    temporary = path.with_suffix(".tmp")
    temporary.write_text("".join(kept))
    os.replace(temporary, path)
  return len(dropped)


def read_run(run_dir: pathlib.Path | str) -> list[dict[str, Any]]:
  """The records of `run_dir`/ledger.jsonl; a missing folder raises FileNotFoundError."""
  run_dir = pathlib.Path(run_dir)
  if not run_dir.is_dir():
    raise FileNotFoundError(f"no run folder at {run_dir}")
  return read(run_dir / FILENAME)


def latest(records: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
  """The last record of `kind`, or None."""
  found = of_kind(records, kind)
  return found[-1] if found else None


def fmt(value: float | None, spec: str) -> str:
  """`value` formatted by `spec`, or "-" for an undefined (None) figure."""
  return "-" if value is None else format(value, spec)


def _format_learning_rate(schedule: dict[str, float] | None) -> str:
  if schedule is None:  # a recipe written before the schedule was recorded
    return "-"
  if not schedule["desired_kl"]:
    return f"{schedule['initial']:g}, fixed"
  return (f"{schedule['initial']:g}, adapted per minibatch to approx-KL {schedule['desired_kl']:g} "
          f"within [{schedule['min']:g}, {schedule['max']:g}]")


def format_recipe(recipe_record: dict[str, Any]) -> str:
  """A few lines: batch geometry, policy lag, families, devices, commit and hashes."""
  r = recipe_record
  packages = ", ".join(f"{name} {r['packages'].get(name)}"
                       for name in ("jax", "mujoco-mjx", "flax"))
  commit = (r["git_commit"] or "unknown")[:12] + (" (dirty)" if r["git_dirty"] else "")
  return "\n".join([
      f"geometry   {r['num_envs']} envs x {r['unroll_length']} steps = "
      f"{r['samples_per_update']:,} samples/update; {r['num_minibatches']} minibatches of "
      f"{r['minibatch_size']:,}, {r['num_epochs']} epochs (sample reuse {r['sample_reuse']}); "
      f"{r['updates_per_chunk']} updates/chunk",
      f"lr         {_format_learning_rate(r.get('learning_rate'))}",
      f"policy lag {r['seconds_per_env_per_update']:g} s per env per update at "
      f"{r['control_hz']:g} Hz; {r['aggregate_robot_seconds_per_update']:,.1f} robot-seconds "
      f"per update",
      f"families   {r['num_train_families']} train ({r['envs_per_family']} envs each), "
      f"{r['num_eval_families']} eval ({r['num_eval_envs']} envs; {', '.join(r['strata'])})",
      f"devices    {_format_devices(r)}; {packages}",
      f"commit     {commit}  seed {r['seed']}  started {r['time']}",
      f"manifest   {r['manifest_hash']}  panel {r['panel_hash']}",
  ])


def _format_devices(r: dict[str, Any]) -> str:
  """e.g. "4 x cpu (cpu), 128 envs each" or "16 x H200 (gpu) in 2 processes of 8, 512 envs
  each" (with seeds, "; 4 seeds (0, 1, 2, 3) over 4 rows of 1"); a recipe written before runs
  spanned devices has only the count and kind."""
  text = f"{r['device_count']} x {r['device_kind']} ({r['platform']})"
  if r.get("process_count", 1) > 1:
    text += f" in {r['process_count']} processes of {r['devices_per_process']}"
  if "envs_per_device" in r:
    text += f", {r['envs_per_device']} envs each"
  if r.get("num_seeds", 1) > 1:
    rows = "1 row" if r["seed_rows"] == 1 else f"{r['seed_rows']} rows"
    text += (f"; {r['num_seeds']} seeds ({', '.join(map(str, r['seeds']))}) over {rows} of "
             f"{r['devices_per_seed']}"
             + (", each on its own families" if r.get("families_per_seed") else ""))
  return text


def _resets(counts: dict[str, int | None]) -> str:
  """Nonzero reset-reason counts, most frequent first: 'timeout=28 fall=3'."""
  nonzero = sorted(((n, reason) for reason, n in counts.items() if n), reverse=True)
  return " ".join(f"{reason}={n}" for n, reason in nonzero) or "-"


def _name_width(names: Any) -> int:
  """The stratum column's width: 10, or one more than the longest name (`stairs_down_20cm`)."""
  return max([10] + [len(name) + 1 for name in names])


def format_eval_table(record: dict[str, Any]) -> str:
  """A fixed-width table of one evaluation, one row per stratum.

  For a record of several seeds (with `spread`) the header says how many and what the figures
  are (envs per seed, rates and errors the means over seeds, resets summed over seeds), and under
  each stratum's row a line gives the 95% intervals over seeds of its success and fall rates.
  """
  w = _name_width(record["strata"])
  header = (f"evaluation at update {record['update']} ({record['env_steps']:,} env steps), "
            f"panel {record.get('panel_hash')}")
  if record.get("seed") is not None:
    header += f"; training seed {record['seed']}"
  spreads = record.get("spread")
  if spreads is not None:
    header += (f"; {record.get('num_seeds', len(record.get('seeds', ())))} seeds: envs per seed, "
               "figures the mean over seeds, resets summed over seeds")
  lines = [header,
           f"{'stratum':<{w}}{'envs':>6}{'success':>9}{'fall':>8}{'length':>9}{'lin err':>9}"
           f"{'yaw err':>9}{'return':>10}  resets"]
  for name, s in record["strata"].items():
    lines.append(
        f"{name:<{w}}{s['num_envs']:>6}{fmt(s['success_rate'], '.1%'):>9}"
        f"{fmt(s['fall_rate'], '.1%'):>8}{fmt(s['episode_length'], '.1f'):>9}"
        f"{fmt(s['lin_vel_error'], '.3f'):>9}{fmt(s['yaw_rate_error'], '.3f'):>9}"
        f"{fmt(s['return'], '.2f'):>10}  {_resets(s['reset'])}")
    if spreads is not None and name in spreads:
      lines.append(f"{'':<{w}}  success 95% CI {_interval(spreads[name].get('success_rate'))}"
                   f"  fall {_interval(spreads[name].get('fall_rate'))}")
  return "\n".join(lines)


def _interval(summary: dict[str, float | None] | None, spec: str = ".1%") -> str:
  """A `spread` summary's 95% interval as "[71.9%, 90.6%]"; "-" when there is none."""
  if not summary or summary.get("ci_low") is None or summary.get("ci_high") is None:
    return "-"
  return f"[{format(summary['ci_low'], spec)}, {format(summary['ci_high'], spec)}]"


_COMPARED = (("success", "success_rate", "+.1%"), ("fall", "fall_rate", "+.1%"),
             ("lin err", "lin_vel_error", "+.3f"), ("yaw err", "yaw_rate_error", "+.3f"))


def format_comparison(a_record: dict[str, Any], b_record: dict[str, Any],
                      names: tuple[str, str]) -> str:
  """Two evaluations side by side: per stratum and metric, run a, run b, and b - a.

  When only one of the two records has several seeds, a last line says that d has no interval
  (`format_seed_comparison` gives one when both have).
  """
  strata = list(a_record["strata"]) + [s for s in b_record["strata"] if s not in a_record["strata"]]
  w = _name_width(strata)
  lines = [f"a = {names[0]} (update {a_record['update']}), b = {names[1]} "
           f"(update {b_record['update']}); d = b - a",
           f"{'stratum':<{w}}" + "".join(f"{f'{label} a':>10}{'b':>8}{'d':>8}"
                                        for label, _, _ in _COMPARED)]
  for name in strata:
    a, b = a_record["strata"].get(name, {}), b_record["strata"].get(name, {})
    row = f"{name:<{w}}"
    for _, key, spec in _COMPARED:
      va, vb = a.get(key), b.get(key)
      diff = None if va is None or vb is None else vb - va
      row += (f"{fmt(va, spec.lstrip('+')):>10}{fmt(vb, spec.lstrip('+')):>8}"
              f"{fmt(diff, spec):>8}")
    lines.append(row)
  seeded = ["seeds" in a_record, "seeds" in b_record]
  if seeded[0] != seeded[1]:
    lines.append(f"d has no interval over seeds: that needs several seeds on both sides, and "
                 f"{names[seeded.index(False)]} has one (the figures of "
                 f"{names[seeded.index(True)]} are the means over its seeds)")
  return "\n".join(lines)


_LABELS = {key: (label, spec) for label, key, spec in _COMPARED}
"""Per figure of spread.METRICS, its column label and the format of a difference of it."""
_LOWER_IS_BETTER = {"success_rate": False, "fall_rate": True, "lin_vel_error": True,
                    "yaw_rate_error": True}
"""Per figure of spread.METRICS, whether a lower value is the better one."""


def _seed_values(record: dict[str, Any], stratum: str, key: str) -> list[float] | None:
  """`key` of `stratum` in each of the record's seeds; None when a seed lacks it or it is null."""
  values = [seed.get(stratum, {}).get(key) for seed in record["seeds"]]
  return None if not values or any(v is None for v in values) else values


def _mark(found: dict[str, Any], key: str) -> str:
  """"within spread" when d's interval contains 0, else whether b is the better or the worse."""
  if found["within_spread"]:
    return "within spread"
  b_higher = found["ci_low"] > 0.0
  return "b worse" if b_higher == _LOWER_IS_BETTER[key] else "b better"


def format_seed_comparison(a_record: dict[str, Any], b_record: dict[str, Any],
                           names: tuple[str, str]) -> str:
  """Two evaluations of several seeds each, compared over their seeds.

  One row per stratum (a's first, then b's others) and figure of spread.METRICS: a's and b's
  means over seeds, d = b - a, d's 95% interval (`spread.difference`: each run's per-seed values
  resampled on their own) and a mark: "within spread" when the interval contains 0, else
  "b better" or "b worse" (higher success is better; lower fall and errors are). A stratum or
  figure missing from either side shows "-".

  Args:
    a_record, b_record: eval records with `seeds` (one single-seed strata table per seed).
    names: what to call runs a and b (their run folders).
  """
  strata = list(a_record["strata"]) + [s for s in b_record["strata"] if s not in a_record["strata"]]
  w = _name_width(strata)
  lines = [f"a = {names[0]} (update {a_record['update']}, {len(a_record['seeds'])} seeds), "
           f"b = {names[1]} (update {b_record['update']}, {len(b_record['seeds'])} seeds); "
           f"d = b - a of the means over seeds, its 95% interval a bootstrap over each run's seeds",
           f"{'stratum':<{w}}{'figure':<9}{'a':>8}{'b':>8}{'d':>9}  {'95% interval of d':<21}"
           f"mark"]
  for name in strata:
    for key in spread.METRICS:
      label, spec = _LABELS[key]
      va, vb = _seed_values(a_record, name, key), _seed_values(b_record, name, key)
      if va is None or vb is None:
        means = [fmt(None if v is None else float(np.mean(v)), spec[1:]) for v in (va, vb)]
        lines.append(f"{name:<{w}}{label:<9}{means[0]:>8}{means[1]:>8}{'-':>9}  {'-':<21}-")
        continue
      found = spread.difference(va, vb)
      lines.append(f"{name:<{w}}{label:<9}{format(found['a_mean'], spec[1:]):>8}"
                   f"{format(found['b_mean'], spec[1:]):>8}{format(found['diff'], spec):>9}  "
                   f"{_interval(found, spec):<21}{_mark(found, key)}")
  return "\n".join(lines)


_SIM2SIM_COLUMNS = (("success", "success_rate", ".1%", "+.1%"), ("fall", "fall_rate", ".1%", "+.1%"),
                    ("length", "episode_length", ".1f", "+.1f"),
                    ("lin err", "lin_vel_error", ".3f", "+.3f"),
                    ("yaw err", "yaw_rate_error", ".3f", "+.3f"))


def _of_seed(record: dict[str, Any]) -> str:
  """The words ` of seed k` for a record of one seed of a multi-seed run, else nothing."""
  return "" if record.get("seed") is None else f" of seed {record['seed']}"


def _timeconst(values: list[float]) -> str:
  """The contact time constants of a model's geoms, one or several, as `0.01` or `0.01/0.02`."""
  return "/".join(f"{value:g}" for value in values)


def format_sim2sim(record: dict[str, Any]) -> str:
  """A second-simulator check: per stratum and figure, MJX, C MuJoCo and the gap (C - MJX), then
  whether the stratum is within the targets, and the C MuJoCo reset reasons."""
  sim = record["simulator"]
  w = _name_width(record["strata"])
  targets = ", ".join(f"|{key}| <= {limit:g}" for key, limit in record["targets"].items())
  lines = [f"second simulator at update {record['update']} ({record['env_steps']:,} env steps): "
           f"{record['policy']} policy{_of_seed(record)} in {sim['engine']}, "
           f"{sim['precision']}, {sim['solver']} solver ({sim['settings']}: up to "
           f"{sim['iterations']} iterations, tolerance "
           f"{sim['tolerance']:g}), {sim.get('ccd', 'native')} collisions, "  # native before --ccd
           f"{sim['integrator']} at {sim['physics_timestep']:g} s, contact time constant "
           f"{_timeconst(sim.get('contact_timeconst', [0.02]))} s, "  # 0.02 before it was set
           f"{sim['slope']}; {record['wall_seconds']:.0f} s",
           f"m = MJX, c = C MuJoCo, d = c - m; targets: {targets}",
           f"{'stratum':<{w}}" + "".join(f"{f'{label} m':>10}{'c':>8}{'d':>8}"
                                        for label, _, _, _ in _SIM2SIM_COLUMNS)
           + "  targets  resets (c)"]
  for name, c in record["strata"].items():
    m, gap = record["mjx"][name], record["gap"][name]
    row = f"{name:<{w}}"
    for _, key, spec, gap_spec in _SIM2SIM_COLUMNS:
      row += f"{fmt(m[key], spec):>10}{fmt(c[key], spec):>8}{fmt(gap[key], gap_spec):>8}"
    lines.append(row + f"  {'met' if gap['within_targets'] else 'MISSED':<7}  "
                 f"{_resets(c['reset'])}")
  if all("interval" in gap for gap in record["gap"].values()):
    lines += _sim2sim_intervals(record, w)
  return "\n".join(lines)


def _sim2sim_intervals(record: dict[str, Any], width: int) -> list[str]:
  """The 95% interval of each targeted gap per stratum, and what they say of the targets."""
  keys = list(record["targets"])
  specs = {key: gap_spec for _, key, _, gap_spec in _SIM2SIM_COLUMNS}
  labels = {key: label for label, key, _, _ in _SIM2SIM_COLUMNS}
  lines = [f"95% intervals of d over each stratum's episodes (env by env, paired bootstrap; "
           f"{record['envs_per_family']} envs per family)",
           f"{'stratum':<{width}}" + "".join(f"{labels[key] + ' d':>22}" for key in keys)
           + "  episodes  targets"]
  for name, gap in record["gap"].items():
    row = f"{name:<{width}}"
    for key in keys:
      low, high = gap["interval"][key]
      row += f"{'[' + fmt(low, specs[key]) + ', ' + fmt(high, specs[key]) + ']':>22}"
    lines.append(row + f"{record['strata'][name]['num_envs']:>10}  {gap['interval_targets']}")
  return lines
