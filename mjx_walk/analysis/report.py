"""The markdown report of a run, `report.md`, and the errand that builds it with its pictures.

  python -m mjx_walk.report runs/<run>                      # plots and report.md from the ledger
  python -m mjx_walk.report runs/<run> --videos             # also render the newest saved traces
  python -m mjx_walk.report runs/<run> --step=1200          # evaluate checkpoint 1200 with traces,
                                                            # render it, then the report

This module owns what a run looks like to a reader: `report.md` holds the recipe, the manifest
summary, the latest evaluation table, the latest second-simulator table
(`mjx_walk.deploy.sim2sim`), the plots (`mjx_walk.analysis.plots`), the videos with their
captions (`mjx_walk.analysis.videos`) and the audit flags in plain words
(`mjx_walk.analysis.flags`). A run of several training seeds (`config.num_seeds` > 1) also has a
Seeds section (each seed's final held-out figures with their mean, interquartile mean and 95%
interval over seeds, each seed's last training figures, and the minutes to walk as a
distribution over seeds), its audits seed by seed (reset reasons, and which seed halted where),
and the seed its videos show; a single-seed run's report has none of these. `build` writes the
plots and the report from the files in the run folder, after the fact; with videos it first
renders saved evaluation traces (`mjx_walk.evaluation.traces`), or evaluates a checkpoint with
traces (`evaluate_with_traces`).

Videos that could not be rendered are never left unsaid: the training loop records why in
`videos/<update>/not_rendered.json` (`videos.record_not_rendered`), and the report's Videos section
says, for each such update not rendered since, that its videos are missing, why, and the command
that renders them. The report command checks that this process can render (`check_rendering`)
before a videos errand evaluates or writes anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import statistics
from typing import Any
from typing import Callable
from typing import Sequence

import mujoco

from mjx_walk import config as config_lib
from mjx_walk.analysis import flags as flags_lib
from mjx_walk.analysis import plots as plots_lib
from mjx_walk.analysis import videos as videos_lib
from mjx_walk.evaluation import panel
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.evaluation import walking
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.sim import families


def _range_table(values: dict[str, Any]) -> list[str]:
  lines = ["| field | value |", "|---|---|"]
  for key, value in values.items():
    if isinstance(value, list):
      value = "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    lines.append(f"| `{key}` | {value} |")
  return lines


def _manifest_section(manifest: families.Manifest, records: Sequence[dict[str, Any]]
                      ) -> list[str]:
  recipe = ledger.latest(records, "recipe") or {}
  strata = list(dict.fromkeys(manifest.eval_strata))
  lines = [
      "## Manifest", "",
      f"- {len(manifest.train_families)} training families"
      + (f", {recipe['envs_per_family']} envs each" if "envs_per_family" in recipe else "")
      + f"; {len(manifest.eval_families)} held-out families in {len(strata)} strata"
      + (f", {recipe['num_eval_envs']} envs" if "num_eval_envs" in recipe else "") + ".",
      f"- manifest hash `{manifest.hash}`, panel hash `{manifest.panel_hash}`.", "",
      "| stratum | families | family seeds |", "|---|---|---|",
  ]
  for stratum in strata:
    seeds = [f.seed for f in manifest.eval_families if f.stratum == stratum]
    lines.append(f"| {stratum} | {len(seeds)} | {', '.join(map(str, seeds))} |")
  lines += ["", "Training ranges (`ranges.train`, episode "
            f"{manifest.ranges.get('train_episode_seconds')} s):", ""]
  lines += _range_table(manifest.ranges.get("train", {}))
  lines += ["", "Held-out panel (`ranges.eval`):", ""]
  lines += _range_table(manifest.ranges.get("eval", {}))
  return lines + [""]


def _videos(run_dir: pathlib.Path, update: int | None) -> tuple[int, dict[str, Any]] | None:
  """(update, captions) of the videos rendered for `update` (None: the newest), or None."""
  captions = run_folder.RunFolder(run_dir).videos_dir().glob(f"*/{videos_lib.CAPTIONS_FILENAME}")
  found = dict(sorted((int(p.parent.name), p) for p in captions if p.parent.name.isdigit()))
  if not found or (update is not None and update not in found):
    return None
  update = max(found) if update is None else update
  return update, json.loads(found[update].read_text())["videos"]


def _not_rendered(run_dir: pathlib.Path) -> dict[int, str]:
  """{update: why} of the updates whose videos were not rendered (and have not been since)."""
  notes = run_folder.RunFolder(run_dir).videos_dir().glob(f"*/{videos_lib.NOT_RENDERED_FILENAME}")
  return {int(p.parent.name): json.loads(p.read_text())["reason"]
          for p in sorted(notes, key=lambda p: int(p.parent.name))
          if p.parent.name.isdigit()
          and not (p.parent / videos_lib.CAPTIONS_FILENAME).is_file()}


def check_rendering() -> None:
  """Refuses, saying why and what to set, when this process cannot render offscreen.

  Opens (and closes) a tiny offscreen context, as the videos will.

  Raises:
    RuntimeError: MuJoCo has no usable headless GL backend in this process (`MUJOCO_GL`
      unset without a display, `disable`, or a backend whose libraries are missing).
  """
  videos_lib.check_gl()
  try:
    renderer = mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), height=8, width=8)
  except Exception as error:  # pylint: disable=broad-except
    # MuJoCo raises AttributeError (MUJOCO_GL=disable), mujoco.FatalError (no GL platform
    # library) or the backend's own errors.
    raise RuntimeError(
        f"cannot render videos: no offscreen OpenGL context in this process with "
        f"MUJOCO_GL={os.environ.get('MUJOCO_GL')!r} ({type(error).__name__}: {error}); set "
        "MUJOCO_GL=egl (or osmesa, software) with its libraries installed before mujoco is "
        "first imported, or build the report without --videos and --step") from None
  renderer.close()


def _flags_section(records: Sequence[dict[str, Any]], config: config_lib.TrainConfig
                   ) -> list[str]:
  lines = ["## Audit flags", ""]
  raised = flags_lib.flags(list(records), config)
  if not raised:
    lines += ["No audit flag was raised.", ""]
  else:
    lines += [f"- {flag}" for flag in raised] + [""]
  num_seeds = seed_count(records)
  if num_seeds > 1:
    lines += _seed_audits(records, num_seeds)
  return lines


def seed_count(records: Sequence[dict[str, Any]]) -> int:
  """The run's number of training seeds: the recipe's `num_seeds`, else as many as its update
  and eval records list; 1 for a single-seed run."""
  recipe = ledger.latest(list(records), "recipe") or {}
  if recipe.get("num_seeds"):
    return int(recipe["num_seeds"])
  return plots_lib.seed_count([*ledger.of_kind(records, "update"),
                               *ledger.of_kind(records, "eval")])


_PERCENT, _ERROR = ".1%", ".3f"
_SEED_FIGURES = (("success", "success_rate", _PERCENT), ("falls", "fall_rate", _PERCENT),
                 ("xy error (m/s)", "lin_vel_error", _ERROR),
                 ("yaw error (rad/s)", "yaw_rate_error", _ERROR))
"""The Seeds section's held-out rows: label, figure (each of `spread.METRICS`), format."""
_TRAINING_FIGURES = (("return", "episode/return", ".3f"),
                     ("episode length", "episode/length", ".1f"),
                     ("reward per step", "reward/total", "+.4f"),
                     ("approx KL", "loss/approx_kl", ".4f"),
                     ("explained variance", "loss/explained_variance", ".3f"),
                     ("learning rate", "ppo/learning_rate", ".2e"),
                     ("policy std", "policy/std_mean", ".3f"),
                     ("mean terrain level", "terrain/mean_level", ".2f"))
"""The Seeds section's training rows (`records.PER_SEED`): label, figure, format."""


def _seed_header(num_seeds: int, halted: Sequence[int] = ()) -> list[str]:
  """(the seed columns' names, "seed 1 (halted)" for a halted one; their header rules)."""
  names = [f"seed {k}" + (" (halted)" if k in halted else "") for k in range(num_seeds)]
  return [" | ".join(names), "|".join(["---"] * num_seeds)]


def _final_seed_table(evaluation: dict[str, Any], num_seeds: int) -> list[str]:
  """Each stratum's held-out figures per seed, with their mean, IQM and 95% interval."""
  halted = evaluation.get("halted_seeds") or []
  names, rules = _seed_header(num_seeds, halted)
  lines = [f"| stratum | figure | {names} | mean | IQM | 95% CI |",
           f"|---|---|{rules}|---|---|---|"]
  spreads = evaluation.get("spread") or {}
  for stratum in evaluation["strata"]:
    for label, key, spec in _SEED_FIGURES:
      values = [(seed.get(stratum) or {}).get(key) for seed in evaluation["seeds"]]
      values += [None] * (num_seeds - len(values))
      summary = (spreads.get(stratum) or {}).get(key) or {}
      cells = [ledger.fmt(v, spec) for v in values[:num_seeds]]
      interval = ("-" if summary.get("ci_low") is None or summary.get("ci_high") is None else
                  f"[{format(summary['ci_low'], spec)}, {format(summary['ci_high'], spec)}]")
      lines.append(f"| {stratum} | {label} | {' | '.join(cells)} | "
                   f"{ledger.fmt(summary.get('mean'), spec)} | "
                   f"{ledger.fmt(summary.get('iqm'), spec)} | {interval} |")
  return lines


def _last_update_table(update: dict[str, Any], num_seeds: int) -> list[str]:
  """The last update record's figures per seed (`seeds`), beside the seeds pooled."""
  seeds = update.get("seeds") or {}
  names, rules = _seed_header(num_seeds, update.get("halted_seeds") or [])
  lines = [f"| figure | {names} | seeds pooled |", f"|---|{rules}|---|"]
  for label, key, spec in _TRAINING_FIGURES:
    if key not in seeds:
      continue
    values = (list(seeds[key]) + [None] * num_seeds)[:num_seeds]
    lines.append(f"| {label} | {' | '.join(ledger.fmt(v, spec) for v in values)} | "
                 f"{ledger.fmt(update.get(key), spec)} |")
  return lines


def format_minutes_to_walk(minutes: Sequence[float | None] | None) -> str:
  """One line on the minutes to walk of several seeds (`walking.seed_minutes_to_walk`): each
  seed's, then the median and the range over the seeds that walked, and how many never did."""
  if minutes is None:
    return "Minutes to walk: undefined (the evaluations have no `flat` stratum per seed)."
  each = ", ".join(f"seed {k} " + ("never" if m is None else f"{m:g} min")
                   for k, m in enumerate(minutes))
  walked = [m for m in minutes if m is not None]
  never = len(minutes) - len(walked)
  if not walked:
    return f"Minutes to walk per seed: {each}. None of the {len(minutes)} seeds walked."
  over = "the seed that walked" if len(walked) == 1 else f"the {len(walked)} seeds that walked"
  return (f"Minutes to walk per seed: {each}. Median {statistics.median(walked):g} min and range "
          f"{min(walked):g} to {max(walked):g} min over {over}; "
          + (f"{never} of {len(minutes)} never walked." if never else "every seed walked."))


def _seeds_section(records: Sequence[dict[str, Any]], num_seeds: int) -> list[str]:
  """The Seeds section of a multi-seed run."""
  recipe = ledger.latest(list(records), "recipe") or {}
  evals = ledger.of_kind(records, "eval")
  seeded = [r for r in evals if isinstance(r.get("seeds"), list)]
  update = ledger.latest(list(records), "update")
  seeds = recipe.get("seeds") or list(range(num_seeds))
  lines = ["## Seeds", "",
           f"{num_seeds} training seeds (run seeds {', '.join(map(str, seeds))}), trained side "
           "by side on the same families and evaluated on the same held-out panel. A figure over "
           "seeds takes one value per seed: their mean, their interquartile mean (IQM) and the "
           "95% bootstrap interval of the mean (`mjx_walk.run.spread`).", ""]
  if seeded:
    final = seeded[-1]
    lines += [f"### Held-out panel per seed, update {final['update']}", ""]
    lines += _final_seed_table(final, num_seeds) + [""]
  else:
    lines += ["No held-out evaluation of the seeds yet.", ""]
  if update is not None and isinstance(update.get("seeds"), dict):
    lines += [f"### Training per seed, update {update['update']}", ""]
    lines += _last_update_table(update, num_seeds) + [""]
  lines += ["### Minutes to walk", ""]
  if seeded:
    lines += [f"The wall-clock minutes of the first evaluation whose `flat` stratum meets the "
              f"walking criteria ({_criteria()}), over {len(seeded)} "
              + ("evaluation." if len(seeded) == 1 else "evaluations."), "",
              format_minutes_to_walk(walking.seed_minutes_to_walk(seeded)), ""]
  else:
    lines += ["No held-out evaluation yet.", ""]
  return lines


def _criteria() -> str:
  """The walking criteria in words: fall rate at most 5%, ..."""
  names = {"fall_rate": ("fall rate", "{:.0%}"), "lin_vel_error": ("xy error", "{:g} m/s"),
           "yaw_rate_error": ("yaw error", "{:g} rad/s")}
  return ", ".join(f"{names[k][0]} at most {names[k][1].format(v)}" if k in names else
                   f"{k} at most {v:g}" for k, v in walking.WALKING.items())


def _seed_audits(records: Sequence[dict[str, Any]], num_seeds: int) -> list[str]:
  """The audits of a multi-seed run, seed by seed: reset reasons and divergences."""
  lines = [f"The flags are judged on the seeds pooled. Seed by seed ({num_seeds} seeds):", ""]
  resets = flags_lib.seed_reset_shares(list(records))
  if resets is not None:
    reasons = list(resets.shares)
    lines += ["Share of each seed's episode ends per reset reason (the mean over the updates in "
              "which some of its episodes ended):", "",
              f"| seed | {' | '.join(reasons)} | updates |",
              f"|---|{'|'.join(['---'] * len(reasons))}|---|"]
    for k in range(min(num_seeds, len(resets.updates))):
      cells = [ledger.fmt(resets.shares[r][k], ".1%") for r in reasons]
      lines.append(f"| {k} | {' | '.join(cells)} | {resets.updates[k]} |")
    lines.append("")
  halts = flags_lib.seed_divergences(list(records), num_seeds)
  if halts:
    lines += [f"- {halt}" for halt in halts] + [""]
  else:
    lines += ["No seed diverged: every seed trained to the end.", ""]
  return lines


def _sim2sim_section(records: Sequence[dict[str, Any]]) -> list[str]:
  lines = ["## Second simulator", ""]
  check = ledger.latest(records, "sim2sim")
  if check is None:
    return lines + ["No second-simulator check yet: `python -m mjx_walk.sim2sim --run_dir=<run>` "
                    "replays the held-out panel in C MuJoCo.", ""]
  missed = [name for name, gap in check["gap"].items() if not gap["within_targets"]]
  verdict = ("every stratum is within the targets" if not missed else
             f"outside the targets: {', '.join(missed)}")
  return lines + [f"The held-out panel replayed in C MuJoCo with the {check['policy']} policy in "
                  f"the loop, beside MJX's evaluation of the same checkpoint; {verdict}.", "",
                  "```", ledger.format_sim2sim(check), "```", ""]


def write_report(run_dir: pathlib.Path | str, records: Sequence[dict[str, Any]],
                 config: config_lib.TrainConfig, manifest: families.Manifest,
                 plots: Sequence[plots_lib.Plot], video_update: int | None = None) -> pathlib.Path:
  """Writes `<run_dir>/report.md`: recipe, manifest summary, latest evaluation, the latest
  second-simulator check, plots, the
  videos of `video_update` (default the newest rendered) with their captions, and the audit
  flags in plain words. A run of several training seeds (`seed_count` > 1) also gets the Seeds
  section after the latest evaluation, its audits seed by seed, and the seed its videos show.

  Returns:
    The path written.
  """
  run_dir = pathlib.Path(run_dir)
  recipe = ledger.latest(records, "recipe")
  evaluation = ledger.latest(records, "eval")
  update = ledger.latest(records, "update")
  lines = [f"# Run report: {run_dir.resolve().name}", ""]
  if update is not None:
    lines += [f"{update['update']} updates, {update['env_steps']:,} env steps, "
              f"{update.get('perf/wall_seconds') or 0:,.0f} s of wall-clock.", ""]
  lines += ["## Recipe", "", "```",
            ledger.format_recipe(recipe) if recipe else "no recipe record", "```", ""]
  lines += _manifest_section(manifest, records)
  lines += ["## Latest evaluation", "", "```",
            ledger.format_eval_table(evaluation) if evaluation else "no evaluation yet",
            "```", ""]
  num_seeds = seed_count(records)
  if num_seeds > 1:
    lines += _seeds_section(records, num_seeds)
  lines += _sim2sim_section(records)
  lines += ["## Plots", ""]
  for plot in plots:
    lines.append(f"### {plot.title}")
    lines.append("")
    if plot.path is not None:
      lines.append(f"![{plot.title}]({plot.path.relative_to(run_dir).as_posix()})")
      if plot.caption:
        lines += ["", plot.caption]
    if plot.note:
      lines.append(f"_{plot.note}_")
    lines.append("")
  lines += ["## Videos", ""]
  missing = _not_rendered(run_dir)
  for update, reason in missing.items():
    lines += [f"**The videos of update {update} were not rendered**: {reason}. Its traced "
              f"episodes are in `{run_folder.EVAL}/{update}{run_folder.TRACES_SUFFIX}`; "
              f"`python -m mjx_walk.report <run> --step={update}` renders them on a machine "
              "with OpenGL.", ""]
  videos = _videos(run_dir, video_update)
  if videos is None:
    if not missing:
      lines += ["No videos yet: `python -m mjx_walk.report <run> --videos` renders them.", ""]
  else:
    video_update, captions = videos
    shown = next((r for r in ledger.of_kind(records, "eval")
                  if r.get("update") == video_update and r.get("video_seed") is not None), None)
    seed = ("" if shown is None else f", seed {shown['video_seed']}, the best of the "
            f"{len(shown.get('seeds') or ())} seeds on that evaluation")
    lines += [f"One held-out episode per stratum, policy of update {video_update}{seed} "
              f"(`{run_folder.VIDEOS}/{video_update}/{videos_lib.CAPTIONS_FILENAME}` has the "
              "details).", ""]
    for stratum, caption in captions.items():
      link = f"{run_folder.VIDEOS}/{video_update}/{caption['video']}"
      lines.append(f"- [{stratum}]({link}): {videos_lib.format_caption(caption)}")
    lines.append("")
  lines += _flags_section(records, config)
  path = run_folder.RunFolder(run_dir).report_path
  path.write_text("\n".join(lines))
  return path


@dataclasses.dataclass(frozen=True)
class Built:
  """What `build` wrote."""

  report: pathlib.Path
  plots: list[plots_lib.Plot]
  videos: list[pathlib.Path]
  traces: pathlib.Path | None


def evaluate_with_traces(pol: policy_lib.Policy | policy_lib.SeedPolicies
                         ) -> tuple[dict[str, Any], pathlib.Path]:
  """Evaluates a loaded checkpoint's policy (or every seed's) on its run's own panel and saves
  its traces (with several seeds, the best seed's).

  Returns:
    (the eval record, not written to the ledger; the traces file,
    `eval/<step>_traces.npz` of the policy's run).
  """
  record, traces = panel.evaluate_policy(pol, pol.config, pol.manifest)
  return record, trace_files.save_eval_traces(pol.run_dir, pol.step, traces, pol.manifest)


def build(run_dir: pathlib.Path | str, videos: bool = False, step: int | None = None,
          log: Callable[[str], Any] = print) -> Built:
  """Plots and report.md from the ledger; with `videos`, renders videos first.

  Args:
    run_dir: the run folder.
    videos: render `videos/<update>/`: from the newest saved traces, or, when the run has none
      or `step` is given, from a fresh evaluation of that checkpoint (newest when None).
    step: a checkpoint to render (implies `videos`); its saved traces are reused if present.
    log: where progress lines go.

  Raises:
    FileNotFoundError: no run folder, ledger, config or manifest there, naming the path.
    ValueError: a malformed ledger line.
    checkpoint.CheckpointError: `step` names no checkpoint of the run, or it fails
      verification.
    RuntimeError: videos were asked for and this process cannot render (`check_rendering`).
    Each is raised before anything is evaluated or written.
  """
  run_dir = pathlib.Path(run_dir)
  records = ledger.read_run(run_dir)
  folder = run_folder.RunFolder.open(run_dir)
  config = folder.read_config()
  manifest = folder.read_manifest()
  rendered, traces, update = [], None, None
  if videos or step is not None:
    check_rendering()
    saved = trace_files.eval_trace_updates(run_dir)
    if step is not None and step in saved:
      update = step
    elif step is None and saved:
      update = saved[-1]
    else:
      # An unknown step, or a checkpoint that fails verification, is refused before any work.
      # Every seed of a multi-seed run, in one pass; the traces are its `video_seed`'s.
      pol = (policy_lib.load(run_dir, step) if config.num_seeds == 1 else
             policy_lib.load_all(run_dir, step))
      log(f"evaluating checkpoint {pol.step} with traces...")
      record, _ = evaluate_with_traces(pol)
      update = record["update"]
      log(ledger.format_eval_table(record))
    traces = folder.eval_traces_path(update)
    log(f"rendering the traced episodes of update {update}...")
    rendered = videos_lib.render_videos(run_dir, update, config)
    (folder.videos_dir(update) / videos_lib.NOT_RENDERED_FILENAME).unlink(missing_ok=True)  # rendered now
  plots = plots_lib.make_plots(run_dir, records, config)
  path = write_report(run_dir, records, config, manifest, plots, video_update=update)
  return Built(report=path, plots=plots, videos=rendered, traces=traces)
