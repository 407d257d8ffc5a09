"""Tests for mjx_walk.run.checkpoint, resuming through mjx_walk.train, and mjx_walk.run.policy.

Exact equality throughout: a restored checkpoint is the saved state bit for bit, and a run of
2 chunks resumed for 2 more equals a straight run of 4 in parameters, optimizer state, env state
and every ledger number that is not a wall-clock figure.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk import train as train_cli
from mjx_walk.evaluation import panel
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.run import storable
from mjx_walk.sim import families

import commands
import configs
import runs

REPO = pathlib.Path(__file__).resolve().parent.parent


def tiny_config(chunks: int = 2) -> config_lib.TrainConfig:
  return configs.tiny(chunks, panel__every_chunks=2, checkpoint__every_chunks=1)


def _host(tree):
  return jax.device_get(jax.tree.map(
      lambda x: jax.random.key_data(x) if storable.is_key(x) else x, tree))


# Floats computed here against floats stored by another machine: XLA's CPU code rounds differently
# between processor types and compiler settings (measured after 2 chunks: 2.1e-7 on log_std on
# another processor; 5.6e-4 on a solver warm start of magnitude 2.5 with the test suite's
# unoptimized compilation). Far below what a misread or swapped leaf moves.
_ACROSS_MACHINES = {"rtol": 1e-3, "atol": 1e-3}


def _saved_name(path) -> str:
  """A leaf's name in a checkpoint item as the code before the typed signals wrote it: its
  key path, with every run of other characters than letters, digits and _ made one _."""
  return re.sub(r"[^A-Za-z0-9_]+", "_", jax.tree_util.keystr(path)).strip("_")


def _assert_same_computation(test, a, b):
  """Equal integers, booleans and keys; floats within `_ACROSS_MACHINES`."""
  flat_a = dict(jax.tree_util.tree_leaves_with_path(a))
  flat_b = dict(jax.tree_util.tree_leaves_with_path(b))
  test.assertEqual(set(map(jax.tree_util.keystr, flat_a)), set(map(jax.tree_util.keystr, flat_b)))
  for path, leaf in flat_a.items():
    other = flat_b[path]
    if np.issubdtype(np.asarray(leaf).dtype, np.floating):
      np.testing.assert_allclose(leaf, other, err_msg=jax.tree_util.keystr(path),
                                 **_ACROSS_MACHINES)
    else:
      np.testing.assert_array_equal(leaf, other, err_msg=jax.tree_util.keystr(path))


def _assert_same_records(test, a, b, where: str):
  """JSON values equal in structure, strings, integers and nulls; floats within
  `_ACROSS_MACHINES`."""
  if isinstance(a, dict):
    test.assertEqual(sorted(a), sorted(b), where)
    for key in a:
      _assert_same_records(test, a[key], b[key], f"{where}.{key}")
  elif isinstance(a, list):
    test.assertEqual(len(a), len(b), where)
    for i, (x, y) in enumerate(zip(a, b)):
      _assert_same_records(test, x, y, f"{where}[{i}]")
  elif isinstance(a, float) or isinstance(b, float):
    np.testing.assert_allclose(a, b, err_msg=where, **_ACROSS_MACHINES)
  else:
    test.assertEqual(a, b, where)


def _without_wall_clock(records):
  drop = ("perf/sps", "perf/wall_seconds", "wall_seconds", "time", "resumed_from_update")
  return [{k: v for k, v in r.items() if k not in drop} for r in records if r["kind"] != "recipe"]


def _without_newer_figures(records):
  """`records` without the panel figures added after tests/data/pre_signals_run was written
  (each stratum's `body_contact_rate`)."""
  def strata(table):
    return {name: {k: v for k, v in figures.items() if k != "body_contact_rate"}
            for name, figures in table.items()}
  return [{**r, "strata": strata(r["strata"])} if "strata" in r else r for r in records]


class SaveRestoreTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    runs.warm()  # the tiny config's programs, compiled once for every worker
    cls.config = tiny_config()
    cls.trainer = trainer_lib.make_trainer(cls.config)
    carry = cls.trainer.init(jax.random.key(0))
    cls.first = _host(carry)
    cls.carry, _ = cls.trainer.train_chunk(carry)  # donates `carry`

  def _save_two(self, run_dir):
    saver = checkpoint.Checkpointer(run_dir, self.config, self.trainer.manifest)
    saver.save(self.trainer.init(jax.random.key(0)), wall_seconds=0.0)
    saver.save(self.carry, wall_seconds=1.5)
    saver.close()

  def test_round_trip_is_exact(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    self.assertEqual(checkpoint.steps(run_dir), [0, 2])
    abstract = jax.eval_shape(self.trainer.init, jax.random.key(0))
    restored = checkpoint.restore(run_dir, abstract, self.config, self.trainer.manifest)
    self.assertEqual(restored.step, 2)
    chex.assert_trees_all_equal(_host(restored.carry), _host(self.carry))
    self.assertEqual(restored.config, self.config)
    self.assertEqual(restored.manifest, self.trainer.manifest)
    self.assertEqual(restored.progress["env_steps"], 2 * self.config.batch_size)
    older = checkpoint.restore(run_dir, abstract, self.config, self.trainer.manifest, step=0)
    chex.assert_trees_all_equal(_host(older.carry), self.first)

  def _restore(self, run_dir, step=None, config=None, trainer=None, log=None):
    trainer = trainer or self.trainer
    abstract = jax.eval_shape(trainer.init, jax.random.key(0))
    return checkpoint.restore(run_dir, abstract, config or self.config, trainer.manifest,
                              step=step, log=log or (lambda _: None))

  def test_torn_file_falls_back_and_names_the_step(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    newest = checkpoint.directory(run_dir) / "2"
    # Truncate every array data file of the newest checkpoint's train state to half (the
    # biggest file alone is not always one the restore reads).
    for victim in (newest / "train").glob("**/d/*"):
      victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    notices = []
    restored = self._restore(run_dir, log=notices.append)
    self.assertEqual(restored.step, 0)
    self.assertIn(f"checkpoint step 2 at {newest}: unreadable", notices[0])
    self.assertIn("trying an older one", notices[0])
    self.assertIn("restored step 0", notices[-1])
    with self.assertRaisesRegex(checkpoint.CheckpointError, f"step 2 at {newest}"):
      self._restore(run_dir, step=2)

  def test_flipped_bytes_never_restore(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    newest = checkpoint.directory(run_dir) / "2"
    # The newest train state unreadable or other numbers: either way step 2 must not come back.
    runs.flip_bytes(newest, "train")
    notices = []
    restored = self._restore(run_dir, log=notices.append)
    self.assertEqual(restored.step, 0)
    chex.assert_trees_all_equal(_host(restored.carry), self.first)
    self.assertRegex(notices[0], rf"^checkpoint step 2 at {newest}: (corrupted|unreadable)")
    with self.assertRaisesRegex(checkpoint.CheckpointError, f"step 2 at {newest}"):
      self._restore(run_dir, step=2)  # an explicit step is refused, not replaced

  def test_changed_array_data_is_caught_by_the_checksum_naming_the_leaf(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    newest = checkpoint.directory(run_dir) / "2"
    # Silent corruption: the train item rewritten as a valid Orbax item whose one optimizer
    # moment is off by 6e10. Orbax reads it without complaint; only the checksum can tell.
    stored = storable.to_storable(self.carry.train)
    leaf = "opt_state_1_inner_state_0_nu_critic_params_value_hidden_0_kernel"
    stored[leaf] = stored[leaf].copy()
    stored[leaf][0, 0] += 6e10
    shutil.rmtree(newest / "train")
    with ocp.StandardCheckpointer() as writer:
      writer.save(newest / "train", stored)
    notices = []
    restored = self._restore(run_dir, log=notices.append)
    self.assertEqual(restored.step, 0)
    self.assertEqual(notices[0], f"checkpoint step 2 at {newest}: corrupted:\n    train/{leaf}: "
                     "checksum mismatch (the data changed after it was saved); trying an older one")
    with self.assertRaisesRegex(checkpoint.CheckpointError, f"train/{leaf}: checksum mismatch"):
      self._restore(run_dir, step=2)

  def test_other_network_sizes_are_refused_naming_the_field_and_the_leaves(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    wider = tiny_config()
    wider.network.actor_hidden_sizes = (32, 32)
    wider_trainer = trainer_lib.make_trainer(wider)
    with self.assertRaisesRegex(
        checkpoint.CheckpointError,
        r"(?s)no intact checkpoint.*step 2 .*written with another config:\n"
        r"    network\.actor_hidden_sizes: \(16, 16\) -> \(32, 32\)"):
      self._restore(run_dir, config=wider, trainer=wider_trainer)
    # The same config with another network's state: the layout check names leaf and shapes.
    with self.assertRaisesRegex(
        checkpoint.CheckpointError,
        r"train/opt_state_1_inner_state_0_mu_actor_params_mean_hidden_0_kernel: saved "
        r"float32\[50, 16\], this config "
        r"needs float32\[50, 32\]"):
      self._restore(run_dir, step=2, trainer=wider_trainer)

  def test_another_manifest_is_refused(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    other = tiny_config()
    other.panel.seed = 7  # a panel seed is not resumable: it changes the manifest
    with self.assertRaisesRegex(checkpoint.CheckpointError, r"panel\.seed: 2026 -> 7"):
      self._restore(run_dir, step=2, config=other)
    with self.assertRaisesRegex(checkpoint.CheckpointError, "is not this run's"):
      abstract = jax.eval_shape(self.trainer.init, jax.random.key(0))
      checkpoint.restore(run_dir, abstract, self.config,
                         trainer_lib.make_trainer(other).manifest, step=2)

  def test_a_non_finite_state_is_never_saved(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    train = self.carry.train
    broken = self.carry.replace(train=train.replace(
        params=jax.tree.map(lambda x: x.at[..., 0].set(jnp.nan), train.params),
        update_step=train.update_step + 1))
    saver = checkpoint.Checkpointer(run_dir, self.config, self.trainer.manifest)
    with self.assertRaisesRegex(checkpoint.DivergedError, "refusing to save update 3"):
      saver.save(broken, wall_seconds=2.0)
    saver.close()
    self.assertEqual(checkpoint.steps(run_dir), [0, 2])

  def test_policy_acts_like_the_trainer_actor(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    pol = policy_lib.load(run_dir)
    self.assertEqual(pol.step, 2)
    self.assertEqual(policy_lib.load(checkpoint.directory(run_dir) / "0").step, 0)
    obs = self.carry.env.obs  # [N, O] real observations
    train = self.carry.train
    expected, _ = self.trainer.networks.policy(
        train.params, normalizer.normalize(train.normalizer, obs)["policy"])
    chex.assert_trees_all_close(pol.act(obs["policy"]), expected, rtol=1e-6, atol=1e-6)
    chex.assert_shape(pol.observation_spec, obs["policy"].shape[1:])
    with self.assertRaisesRegex(checkpoint.CheckpointError, "neither a run folder"):
      policy_lib.load(run_dir / "nowhere")

  def test_evaluate_a_checkpoint(self):
    """Catches an evaluation that reads another checkpoint than the one asked for, a `compare`
    that loads the wrong policy (or evaluates this run's again) or another panel, and an eval
    file that does not hold the record."""
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    self._save_two(run_dir)
    # Compared with another policy: this run's untrained one, at update 0.
    compare = checkpoint.directory(run_dir) / "0"
    record, other, path = panel.evaluate_checkpoint(str(run_dir), None, compare=str(compare))
    self.assertEqual(record["update"], 2)
    self.assertEqual(other["update"], 0)
    self.assertEqual(record["panel_hash"], self.trainer.manifest.panel_hash)
    self.assertEqual(other["panel_hash"], self.trainer.manifest.panel_hash)
    self.assertEqual(sorted(record["strata"]), sorted(self.config.panel.strata))
    # The expectation: the panel run on each policy's parameters as the trainer held them in
    # memory, read from no file, on this run's panel.
    evaluator = panel.make_evaluator(self.config, self.trainer.manifest, self.trainer.networks)
    in_memory = lambda carry: evaluator(policy_lib.PolicyParams(
        actor=carry.train.params.actor, normalizer=carry.train.normalizer))["strata"]
    self.assertEqual(record["strata"], in_memory(self.carry))
    self.assertEqual(other["strata"], in_memory(self.first))
    self.assertNotEqual(other["strata"], record["strata"])  # the two policies act differently
    self.assertEqual(path, run_dir / "eval" / "2.json")
    saved = json.loads(path.read_text())
    self.assertEqual(saved["strata"], record["strata"])
    # A second evaluation of the same policy keeps the file: same panel, same numbers.
    before = path.stat().st_mtime_ns
    _, _, again = panel.evaluate_checkpoint(str(run_dir), 2)
    self.assertEqual((again, again.stat().st_mtime_ns), (path, before))


class ResumeTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # 4 straight chunks (checkpoints at updates 4, 6 and 8 kept), the reference of both resumes.
    cls.straight = pathlib.Path(tempfile.mkdtemp(prefix="resume_straight_")) / "run"
    keep = tiny_config(chunks=4)
    keep.checkpoint.max_to_keep = 3
    runner.run(keep, cls.straight)

  def test_two_plus_two_equals_four(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    split, straight = root / "split", self.straight
    runner.run(tiny_config(chunks=2), split)
    # Killed after its checkpoint at update 4, the run had written updates 5 and 6 (the straight
    # run's records of them) and half a line. Catches a resume that keeps a record past its
    # checkpoint (written twice once resumed), drops the checkpoint's own update or evaluation,
    # or rewrites the records it keeps.
    kept = (split / ledger.FILENAME).read_text()
    past = [line for line in (straight / ledger.FILENAME).read_text().splitlines(keepends=True)
            if json.loads(line)["kind"] == "update" and json.loads(line)["update"] in (5, 6)]
    self.assertLen(past, 2)
    torn = past[0][:40]
    (split / ledger.FILENAME).write_text(kept + "".join(past) + torn)
    runner.run(tiny_config(chunks=4), split, resume=True)
    self.assertEqual((split / run_folder.DROPPED_LEDGER).read_text(), "".join(past) + torn + "\n")
    text = (split / ledger.FILENAME).read_text()
    self.assertEqual(text[:len(kept)], kept)  # byte for byte
    appended = [json.loads(line) for line in text[len(kept):].splitlines()]
    self.assertEqual([(r["kind"], r.get("update")) for r in appended],
                     [("recipe", None)] + [("update", u) for u in range(5, 9)] + [("eval", 8)])

    abstract = jax.eval_shape(
        trainer_lib.make_trainer(tiny_config()).init, jax.random.key(0))
    restore = lambda run_dir: checkpoint.restore(run_dir, abstract, tiny_config(chunks=4),
                                                 trainer_lib.make_trainer(tiny_config()).manifest)
    a, b = restore(split), restore(straight)
    self.assertEqual((a.step, b.step), (8, 8))
    chex.assert_trees_all_equal(_host(a.carry), _host(b.carry))

    records_a, records_b = ledger.read_run(split), ledger.read_run(straight)
    self.assertEqual([r["kind"] for r in records_a].count("recipe"), 2)
    self.assertEqual(records_a[[r["kind"] for r in records_a].index("recipe", 1)]
                     ["resumed_from_update"], 4)
    self.assertEqual(_without_wall_clock(records_a), _without_wall_clock(records_b))
    self.assertEqual([r["update"] for r in ledger.of_kind(records_a, "update")],
                     list(range(1, 9)))

  def test_a_run_saved_before_the_typed_env_signals_restores_and_resumes_bit_for_bit(self):
    # tests/data/pre_signals_run: 2 chunks of the tiny config, saved at update 4 by the code
    # before the env reported its audit signals as a typed struct (they were float32 metrics),
    # on another machine. Three claims, each as strong as it can be across machines:
    # 1. Restored by today's code it returns exactly the stored arrays, each under its new name
    #    (a renamed leaf read onto the wrong one, or a value changed on the way, differs there).
    #    The reference is orbax's plain read of the stored items and the renaming written out
    #    here, not the restore's own table.
    # 2. It is today's code's own checkpoint at update 4, within float rounding: XLA's CPU code
    #    is not bit-identical across processor types (on an AMD EPYC, 7 of 12 log_std values
    #    differed by up to 2.1e-7), so floats are compared with a tolerance far below any
    #    swapped or misread leaf, and integers, booleans and keys exactly.
    #    Its ledger is the straight run's first records within the same tolerance.
    # 3. Resumed for 2 more chunks by the training command, it is those 2 chunks computed here
    #    from the restored state, bit for bit: both are this machine's. (Resumes against straight
    #    runs, bit for bit, are `test_two_plus_two_equals_four`.)
    old, straight = pathlib.Path(self.create_tempdir().full_path) / "old", self.straight
    shutil.copytree(pathlib.Path(__file__).parent / "data" / "pre_signals_run", old)
    saved = run_folder.RunFolder.open(old).read_config()
    self.assertEqual(checkpoint.steps(old), [4])
    longer = config_lib.from_dict(saved.to_dict())
    longer.total_env_steps *= 2
    # The straight run computes the same: only how long it runs and what it keeps differ.
    self.assertEqual(config_lib.computation_changes(longer, tiny_config(chunks=4)), [])
    trainer = trainer_lib.make_trainer(longer)
    abstract = jax.eval_shape(trainer.init, jax.random.key(0))
    restore = lambda run_dir, step=None: checkpoint.restore(
        run_dir, abstract, longer, trainer.manifest, step=step)
    restored = _host(restore(old).carry)

    renamed = {"signals_trunk_height": "metrics_audit_trunk_height",
               "signals_trunk_tilt": "metrics_audit_trunk_tilt",
               "signals_contact": "metrics_audit_contact",
               "signals_last_contact": "metrics_audit_last_contact",
               "signals_foot_speed": "metrics_audit_foot_speed",
               "signals_air_time": "metrics_audit_air_time",
               "signals_body_contact": "metrics_audit_body_contact",
               "trace_early_end": "metrics_audit_early_end"}
    for item in ("train", "env"):
      stored = ocp.StandardCheckpointer().restore((old / "checkpoints" / "4" / item).resolve())
      leaves = {_saved_name(path): leaf for path, leaf in
                jax.tree_util.tree_leaves_with_path(getattr(restored, item)) if leaf.size}
      names = {name: renamed.get(name, name) for name in leaves}
      # Every leaf is read from a stored one. Left unread: the episode traces, which that code
      # stored whole and today's state holds empty under this config (the restore reads only
      # non-empty leaves).
      self.assertEqual(set(stored) - set(names.values()),
                       set() if item == "train" else {
                           "metrics_audit_early_end", "trace_action", "trace_first_step",
                           "trace_length", "trace_qpos", "trace_qvel"})
      for name, leaf in leaves.items():
        np.testing.assert_array_equal(np.asarray(leaf, np.float64) if leaf.dtype == bool else leaf,
                                      stored[names[name]], err_msg=f"{item} {name}")

    _assert_same_computation(self, restored, _host(restore(straight, 4).carry))
    saved_records = _without_wall_clock(ledger.read_run(old))
    _assert_same_records(
        self, saved_records,
        _without_newer_figures(_without_wall_clock(ledger.read_run(straight)))[
            :len(saved_records)], "ledger")
    # Continued by the training command's resume, it is the same two chunks computed here from
    # the restored state, bit for bit (one machine, one compilation), and its ledger goes on.
    continued = trainer.devices.place(restore(old).carry, trainer.carry_shardings)
    for _ in range(2):
      continued, _ = trainer.train_chunk(continued)
    runner.run(longer, old, resume=True)
    resumed = restore(old)
    self.assertEqual(resumed.step, 8)
    chex.assert_trees_all_equal(_host(resumed.carry), _host(continued))
    records = ledger.read_run(old)
    self.assertEqual([r["update"] for r in ledger.of_kind(records, "update")], list(range(1, 9)))
    self.assertEqual(ledger.of_kind(records, "recipe")[1]["resumed_from_update"], 4)

  def test_incompatible_config_is_refused_naming_fields(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    (run_dir / "config.json").write_text(tiny_config().to_json())
    longer = runner.resume_config(
        run_dir, config_lib.default(), {"total_env_steps": 10_000}, config_file_given=False)
    self.assertEqual(longer.total_env_steps, 10_000)
    self.assertEqual(longer.num_envs, 8)  # everything else comes from the saved run
    with self.assertRaisesRegex(ValueError, r"(?s)network\.actor_hidden_sizes: \(16, 16\) -> "
                                r"\(8,\).*ppo\.learning_rate: 0\.001 -> 0\.0003"):
      runner.resume_config(
          run_dir, config_lib.default(),
          {"ppo.learning_rate": 3e-4, "network.actor_hidden_sizes": (8,)},
          config_file_given=False)

  def test_resume_without_a_run_is_refused_before_compiling(self):
    result = subprocess.run(
        [sys.executable, "-m", "mjx_walk.train", "--resume=/nonexistent/run"],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    self.assertNotEqual(result.returncode, 0)
    self.assertEqual(result.returncode, 2)
    self.assertEqual(result.stderr, "error: --resume=/nonexistent/run: /nonexistent/run holds no "
                     "run (no such folder)\n")


def fake_carry(step: int, size: int) -> trainer_lib.Carry:
  """A carry with the real structure around arrays of any size, for save-interruption tests."""
  train = trainer_lib.TrainState(
      params=networks.ActorCriticParams(actor={"w": jnp.full((size,), step, jnp.float32)},
                                        critic={"w": jnp.ones((3,))}),
      opt_state={"m": jnp.zeros((2,))},
      normalizer=normalizer.NormalizerState(mean={"x": jnp.zeros(2)}, var={"x": jnp.ones(2)},
                                            count=jnp.ones(())),
      key=jax.random.key(step),
      update_step=jnp.asarray(step, jnp.int32))
  return trainer_lib.Carry(train=train, env={"big": jnp.full((size,), step, jnp.float32)},
                           trace={"length": jnp.full((2,), step, jnp.int32)})


_KILLED_SAVE = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from mjx_walk import config as config_lib
    from mjx_walk.run import checkpoint
    from mjx_walk.sim import families
    from test_checkpoint import fake_carry
    cfg = config_lib.default()
    saver = checkpoint.Checkpointer(sys.argv[1], cfg, families.make_manifest(cfg))
    saver.save(fake_carry(1, 1000), wall_seconds=1.0)
    print("saved 1", flush=True)
    saver.save(fake_carry(2, 50_000_000), wall_seconds=2.0)  # 2 x 200 MB: killed mid-write
    print("saved 2", flush=True)
""")


class InterruptionTest(absltest.TestCase):

  def test_killed_save_keeps_the_previous_checkpoint(self):
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    process = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, str(run_dir),
                                str(pathlib.Path(__file__).parent)],
                               stdout=subprocess.PIPE, text=True, cwd=REPO)
    for line in process.stdout:  # MJX may print import notices first
      if line.strip() == "saved 1":
        break
    deadline = time.time() + 120
    while not any("tmp" in p.name for p in checkpoint.directory(run_dir).iterdir()):
      self.assertLess(time.time(), deadline, "the second save never started")
      time.sleep(0.01)
    process.kill()
    process.wait()
    self.assertEqual(checkpoint.steps(run_dir), [1])
    small = fake_carry(1, 1000)
    cfg = config_lib.default()
    restored = checkpoint.restore(run_dir, jax.eval_shape(lambda: small), cfg,
                                  families.make_manifest(cfg))
    chex.assert_trees_all_equal(_host(restored.carry), _host(small))

  def test_sigterm_saves_and_exits_zero_then_resumes(self):
    # The training command in this process, as `python -m mjx_walk.train` runs it, signalled by
    # a thread once the run has written its first update: a process of its own cost 45 CPU
    # seconds of importing and tracing on the 2-core machine (2026-12-06), this one reads the
    # tiny chunk the suite compiled. Python runs signal handlers in the main thread only; in any
    # other, SIGTERM would end the worker.
    self.assertIs(threading.current_thread(), threading.main_thread())
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "run"
    cfg = tiny_config(chunks=1000)
    cfg.checkpoint.every_chunks = 1000  # only the stop saves
    overrides = [
        f"--config.{field}={value}" for field, value in (
            ("num_envs", 8), ("unroll_length", 6), ("updates_per_chunk", 2),
            ("total_env_steps", cfg.total_env_steps), ("ppo.num_minibatches", 2),
            ("ppo.num_epochs", 2), ("network.actor_hidden_sizes", "(16,16)"),
            ("network.critic_hidden_sizes", "(16,16)"), ("env.episode_seconds", 0.1),
            ("families.num_train_families", 4), ("panel.families_per_stratum", 1),
            ("panel.envs_per_family", 1), ("panel.episode_seconds", 0.1),
            ("panel.every_chunks", 2), ("checkpoint.every_chunks", 1000))]
    ledger_path = run_dir / ledger.FILENAME
    returned = threading.Event()

    def signal_after_the_first_update():
      deadline = time.time() + 300
      while not returned.is_set() and time.time() < deadline:
        if ledger_path.is_file() and '"kind": "update"' in ledger_path.read_text():
          os.kill(os.getpid(), signal.SIGTERM)
          return
        time.sleep(0.2)

    sender = threading.Thread(target=signal_after_the_first_update, daemon=True)
    sender.start()
    ran = commands.run_main(train_cli.main, f"--run_dir={run_dir}", *overrides)
    returned.set()
    sender.join()
    self.assertEqual(ran.status, 0, ran.err)
    self.assertIn("SIGTERM: stopping after this chunk", ran.out)
    self.assertIn(f"resume with: python -m mjx_walk.train --resume={run_dir}", ran.out)
    saved = checkpoint.steps(run_dir)
    self.assertLen(saved, 1)
    updates = ledger.of_kind(ledger.read_run(run_dir), "update")
    self.assertEqual(updates[-1]["update"], saved[0])  # the ledger stops where the checkpoint is

    # The resumed run continues from the checkpoint for one more chunk.
    cfg.total_env_steps = (saved[0] // cfg.updates_per_chunk + 1) * cfg.env_steps_per_chunk
    runner.run(cfg, run_dir, resume=True)
    updates = ledger.of_kind(ledger.read_run(run_dir), "update")
    self.assertEqual([r["update"] for r in updates], list(range(1, saved[0] + 3)))



class KeepPolicyTest(absltest.TestCase):
  """Which checkpoints the keep policy leaves (`checkpoint.max_to_keep`, `checkpoint.keep_best`),
  on small fake carries: nothing is trained or compiled. The expected steps are worked by hand
  from the scores."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.manifest = families.make_manifest(tiny_config())

  def _kept(self, scores=(), max_to_keep=2, keep_best=True, evaluations=()) -> list[int]:
    """Saves steps 1, 2, ... with these held-out scores (None: not evaluated) or evaluations;
    returns the steps left on disk."""
    cfg = tiny_config()
    cfg.checkpoint.max_to_keep, cfg.checkpoint.keep_best = max_to_keep, keep_best
    self.run_dir = pathlib.Path(self.create_tempdir().full_path)
    saver = checkpoint.Checkpointer(self.run_dir, cfg, self.manifest)
    for step, score in enumerate(scores, start=1):
      saver.save(fake_carry(step, 4), wall_seconds=float(step), score=score)
    for step, evaluation in enumerate(evaluations, start=len(scores) + 1):
      saver.save(fake_carry(step, 4), wall_seconds=float(step), evaluation=evaluation)
    saver.close()
    return checkpoint.steps(self.run_dir)

  def test_the_newest_and_the_best_scored_are_kept(self):
    # Scores 0.1, 0.9, 0.3, 0.2, 0.5, 0.4 at steps 1..6 with max_to_keep 2: the newest two (5,
    # 6) and the best (2). Catches the best not kept, the worst kept as the best, and one
    # checkpoint too many.
    scores = (0.1, 0.9, 0.3, 0.2, 0.5, 0.4)
    self.assertEqual(self._kept(scores), [2, 5, 6])
    self.assertEqual(self._kept(scores, keep_best=False), [5, 6])
    self.assertEqual(self._kept(scores, max_to_keep=1), [2, 6])

  def test_checkpoints_without_a_score_rotate_out(self):
    # Until an evaluation is saved the best is the latest. Catches unscored checkpoints that
    # the best-of policy keeps forever, filling the disk of a run that never evaluates.
    self.assertEqual(self._kept((None, None, None, None)), [3, 4])
    self.assertEqual(self._kept((None, 0.5, None, None, None)), [2, 4, 5])

  def test_the_score_is_the_mean_success_with_falls_breaking_ties(self):
    # Steps 1 and 2 succeed equally (mean 0.5) but step 1 falls more: step 2 is the best, and
    # step 3 (fewer falls, less success) is not. Catches ties broken towards more falls.
    def evaluation(successes, falls):
      return {"strata": {name: {"success_rate": s, "fall_rate": f}
                         for name, s, f in zip(("flat", "slope"), successes, falls)}}

    evaluations = (evaluation((0.25, 0.75), (0.5, 0.5)), evaluation((0.5, 0.5), (0.0, 0.25)),
                   evaluation((0.25, 0.25), (0.0, 0.0)))
    self.assertEqual(self._kept((), max_to_keep=1, evaluations=evaluations + (None,)), [2, 4])
    progress = checkpoint.read_json_items(self.run_dir, 2)[2]
    self.assertEqual(progress["held_out_score"], 0.5 - 1e-3 * 0.125)


if __name__ == "__main__":
  absltest.main()
