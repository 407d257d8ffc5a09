"""The training loop as a library: `run(config, run_dir)` trains one run and returns what it made.

  from mjx_walk import config as config_lib, runner
  from mjx_walk.analysis import report
  config = config_lib.default()
  config.total_env_steps = 2_000_000
  result = runner.run(config, "runs/short")
  result.run_dir, result.evaluation["strata"], result.policy.act(policy_obs)
  report.build(result.run_dir)     # plots and report.md, when wanted

It owns the host loop around the jitted chunk (`learn.trainer`): refusing bad input before
anything is written or compiled (a bad config value, a batch that does not split over the
devices, a leaked seed, a malformed robot MJCF, a folder that already holds a run, a resume
with no checkpoint that passes verification), claiming or reopening the run folder, resume (the
newest verified checkpoint, the ledger rewound to it), the schedule of evaluations, videos and
checkpoints, the divergence guard, and the stop on SIGTERM or Ctrl-C. After each chunk it moves
the chunk's metrics off the device (the one host sync per chunk), appends one `update` record
per update to the ledger and prints one progress line; every `panel.every_chunks` chunks (and
once at the end) it evaluates the policy on the held-out panel and prints the per-stratum table.
SIGTERM or Ctrl-C finishes the current chunk, saves, and returns. The first update whose losses,
gradient norm or parameters went non-finite stops the run: nothing of it is saved, a
`divergence` record goes to the ledger, and `Diverged` is raised.

Over several processes every process calls `run` with the same arguments; process 0 writes the
folder's files and its clock decides when to evaluate, save and stop. No flag is defined or
read here: `mjx_walk.train` is the command around it, and builds the run's report after it. The
report is an analysis of the finished folder (`mjx_walk.analysis.report`), not part of training:
the loop writes the records, traces and videos it reads.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import pathlib
import time
from typing import Any

import jax
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.analysis import videos as videos_lib
from mjx_walk.evaluation import panel
from mjx_walk.evaluation import traces as trace_files
from mjx_walk.learn import guard
from mjx_walk.learn import records as records_lib
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import sharding
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import processes
from mjx_walk.run import provenance
from mjx_walk.run import run_folder
from mjx_walk.sim import families
from mjx_walk.sim import robots


def _evaluate(evaluator: panel.Evaluator, carry: trainer_lib.Carry,
              config: config_lib.TrainConfig, folder: run_folder.RunFolder, run_start: float,
              log: ledger.Ledger, videos: bool) -> dict:
  """Runs the held-out panel, appends the eval record, and writes eval/<update>.json; with
  `videos`, also saves one traced episode per stratum and renders videos/<update>/. Videos that
  fail to render do not stop the run: the failure is printed and recorded
  (`videos.record_not_rendered`), so that report.md says so."""
  update = trainer_lib.update_count(carry.train)
  # A host copy: the evaluator runs on this process's first device, not on the mesh.
  if config.num_seeds == 1:
    result, traces = evaluator.run_with_traces(_host_policy(carry))
  else:
    result, traces = evaluator.run_seeds_with_traces(_host_policy(carry))
    result["halted_seeds"] = np.flatnonzero(np.asarray(carry.train.halted)).tolist()
  record = ledger.eval_record(result, update=update, env_steps=update * config.batch_size,
                              wall_seconds=time.perf_counter() - run_start)
  log.write(record)
  folder.write_eval(record)
  if videos:
    start = time.perf_counter()
    trace_files.save_eval_traces(folder.root, update, traces, evaluator.manifest)
    try:
      rendered = videos_lib.render_videos(folder.root, update, config)
    except Exception as error:  # pylint: disable=broad-except
      # Pictures never stop a run, but their absence is never silent: it is printed, and
      # recorded in the run folder for report.md to say. The traces are saved, and
      # `python -m mjx_walk.report --step=<update>` renders them later, on a machine with OpenGL.
      reason = " ".join(f"{type(error).__name__}: {error}".split())  # one line
      videos_lib.record_not_rendered(folder.root, update, reason)
      print(f"videos of update {update} NOT rendered ({reason}); report.md says so. The traces "
            f"are in {folder.eval_traces_path(update)}; render them on a machine with OpenGL "
            f"with: python -m mjx_walk.report {folder.root} --step={update}", flush=True)
    else:
      print(f"{len(rendered)} videos in {rendered[0].parent} "
            f"({time.perf_counter() - start:.0f} s)", flush=True)
  return record


class Diverged(RuntimeError):
  """The run stopped at an update whose losses, gradient norm or parameters went non-finite."""

  def __init__(self, message: str, update: int, quantities: list[str],
               last_checkpoint: int | None):
    super().__init__(message)
    self.update = update
    self.quantities = quantities
    self.last_checkpoint = last_checkpoint


def _check_before_writing(config: config_lib.TrainConfig, devices: sharding.Devices,
                          run_dir: pathlib.Path | str | None) -> families.Manifest:
  """Everything a new or resumed run can be refused for, checked before a file is written.

  Draws the manifest, which validates the config (the run's one validation) and refuses leaked
  seeds, then checks the batch's split over the devices and loads and checks the robot's MJCF.

  Raises:
    ValueError: naming the bad field or file (`robots.RobotError` for the MJCF).
  """
  manifest = families.make_manifest(config)
  sharding.check_geometry(config, devices.count)
  if run_dir is None and devices.processes > 1:
    raise ValueError(f"a run over {devices.processes} processes needs --run_dir (the same folder "
                     "for every process, on a file system they share)")
  robots.load(config.env.robot)
  return manifest


def _resume(folder: run_folder.RunFolder, config: config_lib.TrainConfig,
            manifest: families.Manifest, trainer: trainer_lib.Trainer
            ) -> tuple[trainer_lib.Carry, float]:
  """Restores the newest verified checkpoint, then rewinds the folder to it.

  Returns:
    The carry and the wall-clock seconds the run had already used.

  Raises:
    checkpoint.CheckpointError: no checkpoint passes verification; nothing was changed.
  """
  abstract = jax.eval_shape(trainer.init, seeds_lib.initial_keys(config))
  restored = checkpoint.restore(folder.root, abstract, config, manifest,
                                log=_say if processes.is_primary() else _quiet)
  processes.barrier("restored")  # every process has read the checkpoint before it is tidied
  if processes.is_primary():
    if folder.read_config() != config:
      folder.write_config(config)  # the resumable fields this command changed
    for path in checkpoint.set_aside_newer(folder.root, restored.step):
      _say(f"moved the checkpoint that failed verification to {path}")
    dropped = ledger.truncate_after(folder.ledger_path, restored.step,
                                    folder.dropped_ledger_path)
    if dropped:
      _say(f"the ledger had {dropped} records past update {restored.step} (written after the "
           f"last checkpoint); moved them to {folder.dropped_ledger_path}")
  processes.barrier("tidied")
  _say(f"resumed from update {restored.step} ({restored.progress['env_steps']:,} env steps) at "
       f"{restored.path}")
  saved_on = restored.progress.get("devices", 1), restored.progress.get("processes", 1)
  now_on = trainer.devices.count, trainer.devices.processes
  if saved_on != now_on:
    _say(f"the checkpoint was saved on {saved_on[0]} devices in {saved_on[1]} processes and this "
         f"run has {now_on[0]} in {now_on[1]}: the envs are resharded, {config.num_envs} in all "
         f"as before, {config.num_envs // now_on[0]} per device. The run goes on with the same "
         "envs, families, parameters and normalizer, but each device now shuffles other "
         "minibatches, so it is not the bit-for-bit continuation it would be on "
         f"{saved_on[0]} devices.")
  carry = trainer.devices.place(restored.carry, trainer.carry_shardings)
  return carry, float(restored.progress["wall_seconds"])


def _diverged(folder: run_folder.RunFolder, log: ledger.Ledger, update: int,
              quantities: list[str]) -> Diverged:
  """Records a divergence in the ledger and builds the error that stops the run."""
  saved = checkpoint.steps(folder.root)
  last = saved[-1] if saved else None
  log.write({"kind": "divergence", "update": update, "nonfinite": quantities,
             "last_checkpoint": last})
  if last is None:
    then = ("no checkpoint was saved before it; start a new run (lower ppo.learning_rate or "
            "ppo.max_learning_rate, or check the reward scales)")
  else:
    then = (f"every checkpoint up to update {last} is kept. Resume from it with:\n"
            f"  python -m mjx_walk.train --resume={folder.root}\n"
            "A resume recomputes the same updates bit for bit; if the divergence repeats, start "
            "a new run with a lower ppo.learning_rate or ppo.max_learning_rate")
  return Diverged(
      f"update {update} diverged: non-finite {', '.join(quantities)}. The run stopped and saved "
      f"nothing of the diverged state; {then}.", update, quantities, last)


@dataclasses.dataclass(frozen=True)
class Due:
  """What the host loop does after one chunk."""

  evaluate: bool = False
  """Run the held-out panel and write its record."""
  videos: bool = False
  """With the evaluation, save one traced episode per stratum and render them."""
  save: bool = False
  """Save a checkpoint (with the evaluation, if one ran, so the best one is kept)."""
  last: bool = False
  """The run's last chunk: evaluate with videos, then save."""


@dataclasses.dataclass
class Schedule:
  """Answers "evaluate, render, save or stop after chunk k?" for one run.

  The held-out panel runs every `panel.every_chunks` chunks, every `report.video_every_chunks`
  (then with videos) and, with `eval_every_seconds`, whenever that much wall-clock time has
  passed since the last evaluation. A checkpoint goes with every evaluation and every
  `checkpoint.every_chunks` chunks. The last chunk is the config's last one, or the first to end
  past `wall_budget_seconds` of the run; it evaluates with videos and saves. After a stop
  request nothing more is evaluated; the host loop saves and returns.
  """

  config: config_lib.TrainConfig
  wall_budget_seconds: float | None = None
  eval_every_seconds: float | None = None
  last_evaluation: float = 0.0
  """Wall-clock time (`time.perf_counter`) of the last evaluation, or of the schedule's start."""

  def after_chunk(self, chunk: int, now: float, run_seconds: float,
                  stop_requested: bool) -> Due:
    """What to do after 0-based chunk `chunk`, at `now`, `run_seconds` into the run."""
    if stop_requested:
      return Due(save=True)
    done = chunk + 1
    if done == self.config.num_chunks or (
        self.wall_budget_seconds is not None and run_seconds >= self.wall_budget_seconds):
      return Due(evaluate=True, videos=True, save=True, last=True)
    every = lambda n: bool(n) and done % n == 0
    videos = every(self.config.report.video_every_chunks)
    evaluate = videos or every(self.config.panel.every_chunks) or (
        self.eval_every_seconds is not None
        and now - self.last_evaluation >= self.eval_every_seconds)
    if evaluate:
      self.last_evaluation = now
    return Due(evaluate=evaluate, videos=videos,
               save=evaluate or every(self.config.checkpoint.every_chunks))


def _open_run(config: config_lib.TrainConfig, manifest: families.Manifest,
              devices: sharding.Devices, run_dir: pathlib.Path | str | None, resume: bool
              ) -> tuple[run_folder.RunFolder, trainer_lib.Trainer, trainer_lib.Carry, float]:
  """The run folder, the trainer and the carry to start from, and the seconds already run.

  A new run claims its folder only after the trainer is built (nothing compiles yet), so that
  nothing is left behind if building it fails; a resume checks there is a checkpoint first.
  Every process checks; process 0 alone creates or tidies the folder.
  """
  if resume:
    folder = run_folder.RunFolder.open(run_dir)
    if not checkpoint.steps(folder.root):
      raise checkpoint.CheckpointError(
          f"--resume={folder.root}: there is no checkpoint in {folder.checkpoints}; a resume "
          "continues from a saved checkpoint, so start a new run (another --run_dir) instead")
  elif run_dir is not None:
    run_folder.RunFolder(pathlib.Path(run_dir)).refuse_existing()
  trainer = trainer_lib.make_trainer(config, manifest=manifest, devices=devices)
  processes.barrier("checked")  # no process creates the folder before every one has checked it
  if resume:
    carry, seconds_before = _resume(folder, config, manifest, trainer)
  else:
    if processes.is_primary():
      folder = run_folder.RunFolder.create(run_dir, config, manifest)
    processes.barrier("created")
    if not processes.is_primary():
      folder = run_folder.RunFolder.open(run_dir)
    carry, seconds_before = trainer.init(seeds_lib.initial_keys(config)), 0.0
  return folder, trainer, carry, seconds_before


def _record_chunk(metrics: dict, config: config_lib.TrainConfig, folder: run_folder.RunFolder,
                  log: ledger.Ledger | _Discard, saver: checkpoint.Checkpointer, *,
                  first_update: int, sps: float, wall_seconds: float,
                  halted: np.ndarray | None = None) -> dict[str, Any]:
  """Appends a chunk's update records to the ledger and writes its early-end traces.

  With several seeds (`halted`: bool [S], the seeds halted before the chunk), see
  `_record_seed_chunk`.

  Returns:
    The chunk pooled into one record by `records.summarize`, for the progress line.

  Raises:
    Diverged: an update of the chunk went non-finite. The records up to it are written, then a
      `divergence` record; the saver is closed and nothing of the chunk is saved.
  """
  if halted is not None:
    return _record_seed_chunk(metrics, config, folder, log, saver, first_update=first_update,
                              sps=sps, wall_seconds=wall_seconds, halted=halted)
  records = records_lib.update_records(
      metrics, first_update=first_update, batch_size=config.batch_size, sps=sps,
      wall_seconds=wall_seconds, device_memory=records_lib.current_device_memory())
  divergence = guard.first_divergence(metrics)
  if divergence is not None:
    k, quantities = divergence
    for record in records[:k + 1]:
      log.write(record)
    saver.close()
    raise _diverged(folder, log, first_update + k + 1, quantities)
  if processes.is_primary():
    trace_files.write_early_ends(folder.root, metrics, first_update, config.audit.max_traces)
  for record in records:
    log.write(record)
  return records_lib.summarize(metrics)


def _record_seed_chunk(metrics: dict, config: config_lib.TrainConfig,
                       folder: run_folder.RunFolder, log: ledger.Ledger | _Discard,
                       saver: checkpoint.Checkpointer, *, first_update: int, sps: float,
                       wall_seconds: float, halted: np.ndarray) -> dict[str, Any]:
  """`_record_chunk` of a multi-seed run (metrics [K, S, ...]).

  A seed whose update went non-finite halted there (the trainer kept its last finite state): its
  `divergence` record (with `seed`) follows the chunk's update records, a line says so, and the
  other seeds go on. The update records pool the seeds still training at each update
  (`records.seed_update_records`); the early-end traces are the lowest such seed's.

  Raises:
    Diverged: every seed has halted; the saver is closed and nothing of the chunk is saved.
  """
  num_updates = len(metrics["guard/nonfinite"])
  active = np.repeat(~np.asarray(halted, bool)[None], num_updates, axis=0)  # [K, S]
  diverged = {seed: found for seed, found in guard.seed_divergences(metrics).items()
              if not halted[seed]}
  for seed, (k, _) in diverged.items():
    active[k:, seed] = False
  records = records_lib.seed_update_records(
      metrics, active, first_update=first_update, batch_size=config.batch_size, sps=sps,
      wall_seconds=wall_seconds, device_memory=records_lib.current_device_memory())
  training = np.flatnonzero(active[-1])
  if processes.is_primary() and training.size:
    trace_files.write_early_ends(folder.root, records_lib.seed_metrics(metrics, training[0]),
                                 first_update, config.audit.max_traces)
  for record in records:
    log.write(record)
  saved = checkpoint.steps(folder.root)
  say = _say if processes.is_primary() else _quiet
  for seed, (k, quantities) in sorted(diverged.items()):
    update = first_update + k + 1
    log.write({"kind": "divergence", "update": update, "seed": seed, "nonfinite": quantities,
               "last_checkpoint": saved[-1] if saved else None})
    say(f"seed {seed} diverged at update {update} (non-finite {', '.join(quantities)}): it "
         f"stopped there and keeps its update {update - 1} parameters; "
         f"{training.size} of {len(halted)} seeds train on.")
  if not training.size:
    saver.close()
    k, quantities = min(diverged.values()) if diverged else (0, [])
    raise _diverged(folder, log, first_update + k + 1, quantities)
  return records_lib.summarize_seeds(metrics, training.tolist())


def _save(saver: checkpoint.Checkpointer, carry: trainer_lib.Carry, run_start: float,
          evaluation: dict | None, score: float | None,
          devices: sharding.Devices) -> pathlib.Path:
  """Saves a checkpoint (every process takes part, with process 0's held-out `score`) and
  prints where, how big and how long it took.

  Raises:
    sharding.NotReplicatedError: the train state differs between devices or processes (it is
      computed the same everywhere, so this is a fault); nothing is saved.
  """
  sharding.check_replicated(carry.train)
  start = time.perf_counter()
  path = saver.save(carry, wall_seconds=time.perf_counter() - run_start, evaluation=evaluation,
                    score=score, devices=devices.count, processes=devices.processes)
  if processes.is_primary():
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    _say(f"checkpoint {path} ({size / 1e6:.1f} MB, saved in "
         f"{time.perf_counter() - start:.2f} s)")
  return path


def _say(message: str) -> None:
  print(message, flush=True)


def _quiet(message: str) -> None:
  del message


class _Discard:
  """The ledger of a process other than 0: it writes nothing."""

  def write(self, record: dict) -> None:
    del record


def _agreed(due: Due, stop_requested: bool) -> tuple[Due, bool]:
  """Process 0's decision after a chunk, on every process: what is due (it follows process 0's
  clock) and whether a stop was asked for (on any process). On one process, the arguments."""
  stop_anywhere = processes.any_process(stop_requested)
  if stop_anywhere and not due.last:
    due = Due(save=True)  # as `Schedule.after_chunk` answers a stop
  decided = processes.agree(np.asarray(dataclasses.astuple(due), np.int32))
  return Due(*(bool(x) for x in decided)), stop_anywhere


def _agreed_score(evaluation: dict | None) -> float | None:
  """Process 0's held-out score (it alone evaluates), on every process, to rank a checkpoint."""
  score = np.nan if evaluation is None else checkpoint.held_out_score(evaluation)
  score = float(processes.agree(np.asarray(score, np.float64)))
  return None if np.isnan(score) else score


@dataclasses.dataclass(frozen=True)
class RunResult:
  """What `run` returns: the folder it wrote, the final held-out evaluation, the trained policy
  (with several seeds, the best one's)."""

  run_dir: pathlib.Path
  """The run folder: config.json, manifest.json, ledger.jsonl, eval/, videos/, checkpoints/."""
  evaluation: dict | None
  """The final held-out panel's `eval` record (as in the ledger and eval/<update>.json); None
  when the run was stopped before its last chunk, and on every process but process 0."""
  policy: policy_lib.Policy
  """The policy of the last update, on the host: `policy.act(policy_obs)` -> actions."""
  env_steps: int
  """Env steps trained in all, a resumed run's earlier ones included."""
  stopped: bool
  """Whether SIGTERM or Ctrl-C ended the run before its last chunk (it saved and can resume)."""


def run(config: config_lib.TrainConfig, run_dir: pathlib.Path | str | None = None,
        resume: bool = False, *, wall_budget_seconds: float | None = None,
        eval_every_seconds: float | None = None,
        devices: sharding.Devices | None = None) -> RunResult:
  """Trains `config` to completion, or until SIGTERM / Ctrl-C, writing the run folder.

  The folder gets config.json, manifest.json, ledger.jsonl (recipe, one record per update, one
  per panel evaluation), eval/<update>.json and checkpoints/. Everything that can be refused
  (config values, a batch that does not split over the devices, leaked seeds, the robot's MJCF,
  a folder that already holds files, a resume without an intact checkpoint) is refused before
  anything is written or compiled.

  Over several processes every process calls `run` with the same arguments; process 0 writes
  the folder's files and its clock decides when to evaluate, save and stop.

  Args:
    config: the run configuration; for a resume, the saved one with any resumable changes.
    run_dir: the run folder; None for a new `runs/<UTC timestamp>` (one process only).
    resume: continue from the newest intact checkpoint in `run_dir`, appending to its ledger.
    wall_budget_seconds: end the run (final evaluation and checkpoint) after the first chunk
      that finishes past this many wall-clock seconds, counted from the start of the run
      (compilation and evaluations included). None: run all `config.num_chunks` chunks.
    eval_every_seconds: also evaluate whenever this many wall-clock seconds have passed since
      the last evaluation (for curves against wall-clock, as
      `experiments/measurements/learn_benchmark.py`).
    devices: the mesh to train on; every device of every process when omitted.

  Returns:
    The run folder, the final evaluation and the trained policy (`RunResult`).

  Raises:
    ValueError: a bad config or robot file; `run_folder.RunFolderError` for a folder that is
      taken (new run) or holds no run (resume).
    checkpoint.CheckpointError: a resume found no checkpoint that passes verification.
    Diverged: an update went non-finite; nothing of it was saved.
  """
  devices = sharding.for_seeds(devices or sharding.make(), config.num_seeds)
  primary = processes.is_primary()
  say = _say if primary else _quiet
  manifest = _check_before_writing(config, devices, run_dir)
  folder, trainer, carry, seconds_before = _open_run(config, manifest, devices, run_dir, resume)
  recipe = provenance.recipe(config, manifest, devices)
  say(f"run folder: {folder.root}")
  say(ledger.format_recipe(recipe))

  evaluator = panel.make_evaluator(config, manifest, trainer.networks)
  run_start = time.perf_counter() - seconds_before
  schedule = Schedule(config, wall_budget_seconds, eval_every_seconds,
                      last_evaluation=time.perf_counter())
  total = config.num_chunks * config.env_steps_per_chunk
  first_chunk = trainer_lib.update_count(carry.train) // config.updates_per_chunk
  saver = checkpoint.Checkpointer(folder.root, config, manifest)
  last_eval = None
  log_file = ledger.Ledger(folder.ledger_path) if primary else contextlib.nullcontext(_Discard())
  with log_file as log, processes.StopRequest() as stop:
    log.write(dict(recipe, resumed_from_update=trainer_lib.update_count(carry.train))
              if resume else recipe)
    for chunk in range(first_chunk, config.num_chunks):
      start = time.perf_counter()
      first_update = trainer_lib.update_count(carry.train)
      # With seeds, which had halted before this chunk (a few bytes, read before it starts).
      halted = None if config.num_seeds == 1 else np.asarray(carry.train.halted)
      carry, metrics = trainer.train_chunk(carry)
      metrics = jax.device_get(metrics)  # waits for the chunk; the only host sync per chunk
      seconds = time.perf_counter() - start
      sps = config.num_seeds * config.env_steps_per_chunk / seconds
      pooled = _record_chunk(metrics, config, folder, log, saver, first_update=first_update,
                             sps=sps, wall_seconds=time.perf_counter() - run_start,
                             halted=halted)
      steps = trainer_lib.env_steps(carry.train, config)
      line = records_lib.format_progress(steps, total, sps, pooled)
      say(line + (f"  (includes compile: {seconds:.0f} s)" if chunk == first_chunk else ""))

      now = time.perf_counter()
      due = schedule.after_chunk(chunk, now, now - run_start, stop.requested)
      due, stop.requested = _agreed(due, stop.requested)
      evaluation = None
      if due.evaluate and primary:
        evaluation = _evaluate(evaluator, carry, config, folder, run_start, log, due.videos)
        if not due.last:
          say(f"held-out panel at {steps:,} env steps:\n{ledger.format_eval_table(evaluation)}")
      # A stop that arrives during the evaluation still saves this chunk and returns.
      if due.save or stop.requested:
        path = _save(saver, carry, run_start, evaluation, _agreed_score(evaluation), devices)
      if due.last:
        last_eval = evaluation
        break
      if stop.requested:
        saver.close()
        say(f"stopped at update {trainer_lib.update_count(carry.train)} ({steps:,} env steps); "
            f"checkpoint {path}.\nresume with: python -m mjx_walk.train --resume={folder.root}")
        return _result(folder, trainer, carry, config, manifest, None, stopped=True)
  saver.close()
  if not primary:
    return _result(folder, trainer, carry, config, manifest, None, stopped=False)
  if last_eval is not None:
    say(f"held-out panel, final policy ({trainer_lib.env_steps(carry.train, config):,} env "
        f"steps):\n{ledger.format_eval_table(last_eval)}")
  return _result(folder, trainer, carry, config, manifest, last_eval, stopped=False)


def _host_policy(carry: trainer_lib.Carry) -> policy_lib.PolicyParams:
  """The carry's actor and normalizer, whole, as host arrays."""
  return sharding.to_host(policy_lib.PolicyParams(actor=carry.train.params.actor,
                                                  normalizer=carry.train.normalizer))


def _result(folder: run_folder.RunFolder, trainer: trainer_lib.Trainer, carry: trainer_lib.Carry,
            config: config_lib.TrainConfig, manifest: families.Manifest,
            evaluation: dict | None, stopped: bool) -> RunResult:
  """The `RunResult` of a run whose host loop ended with `carry`; with several seeds its policy
  is the final evaluation's best seed (`policy.best_seed`), or seed 0 without one."""
  params, seed = _host_policy(carry), 0
  if config.num_seeds > 1:
    seed = evaluation["video_seed"] if evaluation is not None else 0
    params = jax.tree.map(lambda leaf: leaf[seed], params)
  policy = policy_lib.Policy(
      params=params, observation_spec=trainer.env.observation_spec()["policy"],
      networks=trainer.networks, config=config, manifest=manifest,
      step=trainer_lib.update_count(carry.train), run_dir=folder.root, seed=seed)
  return RunResult(run_dir=folder.root, evaluation=evaluation, policy=policy,
                   env_steps=trainer_lib.env_steps(carry.train, config), stopped=stopped)


def resume_config(run_dir: pathlib.Path, cli_config: config_lib.TrainConfig,
                  overrides: dict[str, Any], config_file_given: bool) -> config_lib.TrainConfig:
  """The config a resumed run continues with.

  The run's saved config, with the fields given on this command line applied (all of
  `cli_config` when a --config file was given). Changing a field that changes the computation is
  refused.

  Args:
    run_dir: the run to resume.
    cli_config: the config this command line built.
    overrides: {dotted field: value} of each `--config.<field>` given on the command line.
    config_file_given: whether --config=<file> was given.

  Raises:
    ValueError: no saved config, or a changed field outside `config.RESUMABLE_FIELDS`, listing
      each with its old and new value.
  """
  try:
    saved = run_folder.RunFolder.open(run_dir).read_config()
  except run_folder.RunFolderError as error:
    raise run_folder.RunFolderError(f"--resume={run_dir}: {error}") from None
  if config_file_given:
    wanted = copy.deepcopy(cli_config)
  else:
    wanted = copy.deepcopy(saved)
    for field, value in overrides.items():
      config_lib.set_field(wanted, field, value)
  changes = config_lib.computation_changes(saved, wanted)
  if changes:
    listed = "\n".join(f"  {field}: {old!r} -> {new!r}" for field, old, new in changes)
    raise ValueError(
        f"--resume={run_dir}: this config changes what the run computes, so it would not be the "
        f"same run:\n{listed}\nOnly {', '.join(config_lib.RESUMABLE_FIELDS)} may change on a "
        "resume; start a new run for the others.")
  return wanted


