"""Data parallelism (mjx_walk/learn/sharding.py and the trainer's shard_map): the collectives'
arithmetic, the batch's split over devices, runs on 2 and 4 devices against the one-device run,
checkpoints across device counts, and a run over two processes.

What is equal and what is close, between a run on D devices and on one, with the same global
batch (the claims tests below hold the code to):
  bitwise   the initial train state (parameters, optimizer, normalizer, key) and every env's
            reset state (joint positions and velocities, PRNG key, family, command, clocks),
            whatever D; the train state on every device of a run; a resume on the same D as the
            run that was stopped; a run over 2 processes of 1 device and over 1 process of 2
            devices.
  one ulp   the world positions forward kinematics derives from a reset state (body, geom and
            site positions, and the observations and foot positions read from them): XLA
            vectorizes the vmapped kinematics differently for 4 envs per device than for 8.
  close     the first update's rollout (rewards, resets, episode ends): the normalizer merges
            the devices' moments in another order, so actions differ by float rounding; one SGD
            step on a minibatch split over devices and on the same minibatch on one device.
  differs   later updates: each device shuffles its own samples into minibatches, so the global
            minibatches (and then the parameters) are other draws from the same distribution.

Multi-device runs need a process started with forced host devices, so they run in
`tests/sharded_runs.py` (4 devices) and the two-process run in two `python -m mjx_walk.train`
processes meeting on 127.0.0.1; both start side by side when the first test needs one. Those runs
compile every program again in processes of their own, beside the suite's workers (about 6
minutes of a 2-core machine), so `DevicesTest` and `ProcessesTest` are slow-marked: `pytest -m
slow` and the mutation check run them. The default suite keeps what kills the data-parallel
mutants cheaply: the collectives' arithmetic (vmap with a named axis stands for the mesh), the
geometry refusals, and the refusal before writing on a fake device set.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import collective_order
import commands
import configs
import test_audit
import test_train
from mjx_walk import config as config_lib
from mjx_walk import runner
from mjx_walk import train as train_lib
from mjx_walk.learn import audit
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.learn import ppo
from mjx_walk.learn import seeds as seeds_lib
from mjx_walk.learn import sharding
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint
from mjx_walk.run import ledger

REPO = pathlib.Path(__file__).resolve().parent.parent
_JOBS: dict[str, object] = {}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _start_jobs():
  """Starts the 4-device script and the two-process run side by side, once, when a test first
  needs either (the tests of the arithmetic need neither)."""
  if "work" in _JOBS:
    return
  work = pathlib.Path(tempfile.mkdtemp(prefix="sharding_"))
  _JOBS["work"] = work
  env = commands.forced_devices(4)
  _JOBS["devices"] = subprocess.Popen(
      [sys.executable, str(REPO / "tests" / "sharded_runs.py"), str(work / "devices")],
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  address = f"127.0.0.1:{_free_port()}"
  _JOBS["processes"] = [
      subprocess.Popen(
          [sys.executable, "-m", "mjx_walk.train", f"--run_dir={work / 'two_processes'}",
           f"--coordinator_address={address}", "--num_processes=2", f"--process_id={i}",
           *test_train.TINY_FLAGS, "--config.total_env_steps=192",
           "--config.checkpoint.every_chunks=1", "--config.panel.every_chunks=0"],
          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
      for i in range(2)]


def _finished(name: str):
  """The job's (return codes, outputs), waiting for it once."""
  _start_jobs()
  if name + "_done" not in _JOBS:
    procs = _JOBS[name] if isinstance(_JOBS[name], list) else [_JOBS[name]]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    _JOBS[name + "_done"] = ([p.returncode for p in procs], outs)
  return _JOBS[name + "_done"]


def tearDownModule():
  for name in ("devices", "processes"):
    procs = _JOBS.get(name)
    for p in procs if isinstance(procs, list) else [procs]:
      if p is not None and p.poll() is None:
        p.kill()


# THE ARITHMETIC OF THE COLLECTIVES, ON ONE DEVICE (vmap with a named axis stands for the mesh)


def _on_devices(fn, num_devices: int):
  """`fn` run as on `num_devices` devices: vmapped over a named axis, so that pmean, psum and
  axis_index act across the mapped blocks as across the devices of a mesh. Jitted: one program,
  not one per operation."""
  return jax.jit(jax.vmap(fn, axis_name=sharding.AXIS, axis_size=num_devices))


class CollectivesTest(chex.TestCase):

  def test_normalizer_merges_every_devices_moments_exactly(self):
    rng = np.random.default_rng(0)
    before = rng.normal(3.0, 2.0, (50, 3)).astype(np.float32)
    # Four devices with very different data, so a mean of per-device variances would be wrong.
    blocks = np.stack([rng.normal(10.0 * d, 1.0 + d, (6, 3)) for d in range(4)]).astype(np.float32)
    state = normalizer.update(normalizer.init({"x": jnp.zeros(3)}), {"x": before})
    merged = _on_devices(
        lambda x: normalizer.update(state, {"x": x}, sharding.AXIS), 4)(blocks)
    everything = np.concatenate([before, blocks.reshape(-1, 3)]).astype(np.float64)
    for d in range(4):
      np.testing.assert_array_equal(merged.count[d], 74.0)  # counts summed, exactly
      np.testing.assert_allclose(merged.mean["x"][d], everything.mean(axis=0), rtol=1e-5)
      np.testing.assert_allclose(merged.var["x"][d], everything.var(axis=0), rtol=1e-4)
      chex.assert_trees_all_equal(jax.tree.map(lambda x: x[d], merged),
                                  jax.tree.map(lambda x: x[0], merged))

  def test_an_sgd_step_on_a_split_minibatch_is_the_step_on_the_whole(self):
    config = configs.tiny()
    one = trainer_lib.make_trainer(config)
    parts = functools.partial(trainer_lib._Parts, config=config, env=one.env,
                              networks=one.networks, optimizer=one.optimizer,
                              loss_config=ppo.LossConfig(clip_eps=0.2, value_coef=1.0,
                                                         entropy_coef=0.01),
                              observation_spec=None,
                              env_families=None, num_families=4)
    spec = one.env.observation_spec()
    obs_size, critic_size = spec["policy"].shape[-1], spec["critic"].shape[-1]
    params = one.networks.init(jax.random.key(1), obs_size, critic_size)
    opt_state = one.optimizer.init(params)
    rng = np.random.default_rng(2)
    size = 24
    policy_obs = rng.normal(size=(size, obs_size)).astype(np.float32)
    mean, std = one.networks.policy(params, policy_obs)
    actions = np.asarray(mean + std * rng.normal(size=mean.shape).astype(np.float32))
    batch = ppo.Batch(
        policy_obs=jnp.asarray(policy_obs),
        critic_obs=jnp.asarray(rng.normal(size=(size, critic_size)), jnp.float32),
        actions=jnp.asarray(actions),
        # Behaviour log-probs off the current policy, so the ratio and the KL are not trivial.
        log_probs=networks.log_prob(mean, std, actions) + jnp.asarray(
            rng.normal(0, 0.05, size), jnp.float32),
        values=jnp.asarray(rng.normal(size=size), jnp.float32),
        # Advantages of very different scale on each device: standardising per device would
        # change the step.
        advantages=jnp.asarray(np.concatenate([rng.normal(5 * d, 1 + d, size // 4)
                                               for d in range(4)]), jnp.float32),
        returns=jnp.asarray(rng.normal(size=size), jnp.float32))
    # Jitted, as inside the chunk (op by op it would compile every operation on its own).
    whole = jax.jit(functools.partial(trainer_lib._minibatch_step,
                                      parts(axis_name=None, local_envs=8)))(
                                          (params, opt_state), batch)
    split = _on_devices(
        lambda b: trainer_lib._minibatch_step(parts(axis_name=sharding.AXIS, local_envs=2),
                                              (params, opt_state), b), 4)(
        jax.tree.map(lambda x: x.reshape((4, size // 4) + x.shape[1:]), batch))
    for d in range(4):
      # Every device takes the same step ...
      chex.assert_trees_all_equal(jax.tree.map(lambda x: x[d], split),
                                  jax.tree.map(lambda x: x[0], split))
    # ... and it is the step on the whole minibatch: the same parameters, Adam moments, adapted
    # learning rate (from the whole minibatch's KL) and loss metrics.
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[0], split), whole, atol=1e-6, rtol=1e-5)
    self.assertNotEqual(float(ppo.get_learning_rate(whole[0][1])), config.ppo.learning_rate)

  def test_after_hands_the_tree_back_bitwise_computed_from_the_loops_output(self):
    tree = {"x": jnp.array([np.nan, -0.0, np.inf, 1.5], jnp.float32),
            "n": jnp.array([-3, 7], jnp.int32), "b": jnp.array([True, False])}
    bits = lambda t: {k: np.asarray(v).tobytes() for k, v in t.items()}
    for done in (np.nan, -np.inf, 0.0, -2.0):
      held = _on_devices(lambda d: sharding.after(tree, d, sharding.AXIS), 2)(
          jnp.full((2, 3), done, jnp.float32))
      for d in range(2):
        self.assertEqual(bits(jax.tree.map(lambda x: x[d], held)), bits(tree), done)
    self.assertIs(sharding.after(tree, jnp.zeros(3), None), tree)
    # In the compiled program every output reads `done` (the last parameter): XLA kept the
    # dependency that holds the tree back until the loop that wrote `done` has finished.
    text = jax.jit(lambda t, d: sharding.after(t, d, sharding.AXIS)).lower(
        tree, jnp.zeros(3)).compile().as_text()
    body = collective_order.parse(text)[collective_order.entry(text)]
    # The arguments flattened: the tree's leaves b, n, x, then `done`, parameter 3.
    (done_parameter,) = re.findall(r"%?([\w.\-]+) = f32\[3\]\{0\} parameter\(3\)", text)
    reads = collective_order.upstream(body)
    outputs = body[-1].operands  # the ROOT tuple's
    self.assertLen(outputs, 3)
    self.assertEqual([done_parameter in reads[o] for o in outputs], [True] * 3)

  def test_collective_order_finds_a_collective_that_does_not_read_a_loop_of_collectives(self):
    # Hand-written scheduled HLO: a while loop whose body all-reduces, then an all-reduce of the
    # loop's input (a pair: it can start while the body waits) or of the loop's result (none).
    # Catches a checker that misreads operands, nesting or called computations, and so would
    # pass the compiled chunk vacuously.
    module = textwrap.dedent("""\
        HloModule m, is_scheduled=true

        %add (a: f32[], b: f32[]) -> f32[] {
          %a = f32[] parameter(0)
          %b = f32[] parameter(1)
          ROOT %sum = f32[] add(%a, %b)
        }

        %cond (c: (s32[], f32[4])) -> pred[] {
          %c = (s32[], f32[4]{0}) parameter(0)
          %i = s32[] get-tuple-element(%c), index=0
          %n = s32[] constant(3)
          ROOT %lt = pred[] compare(%i, %n), direction=LT
        }

        %body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
          %p = (s32[], f32[4]{0}) parameter(0)
          %j = s32[] get-tuple-element(%p), index=0
          %v = f32[4]{0} get-tuple-element(%p), index=1
          %r = f32[4]{0} all-reduce(%v), channel_id=1, replica_groups={{0,1}}, to_apply=%add
          ROOT %t = (s32[], f32[4]{0}) tuple(%j, %r)
        }

        ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
          %x = f32[4]{0} parameter(0)
          %zero = s32[] constant(0)
          %init = (s32[], f32[4]{0}) tuple(%zero, %x)
          %loop = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
          %out = f32[4]{0} get-tuple-element(%loop), index=1
          %other = f32[4]{0} all-reduce(%SOURCE), channel_id=2, replica_groups={{0,1}}, to_apply=%add
          ROOT %both = (f32[4]{0}, f32[4]{0}) tuple(%out, %other)
        }
        """)
    beside = module.replace("%SOURCE", "%x")
    self.assertEqual(collective_order.count(beside), 2)
    self.assertEqual(collective_order.overlaps(beside),
                     ["main: while loop, all-reduce other"])
    self.assertEqual(collective_order.overlaps(module.replace("%SOURCE", "%out")), [])

  def test_each_device_takes_its_block_of_the_whole_batch(self):
    rows = _on_devices(lambda _: sharding.local_rows(jnp.arange(8) * 10, sharding.AXIS), 4)(
        jnp.zeros(4))
    np.testing.assert_array_equal(rows, [[0, 10], [20, 30], [40, 50], [60, 70]])
    first = _on_devices(lambda _: sharding.first_row(2, sharding.AXIS), 4)(jnp.zeros(4))
    np.testing.assert_array_equal(first, [0, 2, 4, 6])
    np.testing.assert_array_equal(sharding.local_rows(jnp.arange(3), None), [0, 1, 2])

  def test_family_counts_use_each_devices_global_env_index(self):
    # Device 1 of 2 holds envs 4..7 of 8; 3 families: env i is in family i % 3.
    samples = jnp.array([[0, 1, 2, 3, 4, 5, 6, 7]])  # sample s is local env s % 4, step s // 4
    counts = audit.family_counts(samples, num_envs=4, num_families=3, first_env=4)
    envs = 4 + np.arange(8) % 4
    np.testing.assert_array_equal(counts, [np.bincount(envs % 3, minlength=3)])


  def test_early_end_traces_carry_the_global_env_index(self):
    trace = test_audit._fake_trace(4, 3, [2, 1, 5, 3], [False, True, False, True])
    rows = audit.step_early_ends(trace, jnp.zeros(4, jnp.int32), jnp.ones(4, jnp.int32), 2,
                                 first_env=4)  # this device holds envs 4..7
    np.testing.assert_array_equal(rows.env, [5, 7])


class GeometryTest(absltest.TestCase):

  def test_a_batch_that_does_not_split_is_refused_naming_the_values(self):
    with self.assertRaisesRegex(ValueError, r"num_envs=510 cannot be split over 4 devices: it must "
                                r"be a multiple of the device count \(e.g. 508 or 512\)"):
      sharding.check_geometry(configs.with_changes(num_envs=510), 4)
    with self.assertRaisesRegex(ValueError, r"num_envs=24 over 4 devices leaves 6 envs per "
                                r"device, which ppo.num_minibatches=4 does not divide.*multiple "
                                r"of 4 x 4 = 16"):
      sharding.check_geometry(configs.with_changes(num_envs=24, families__num_train_families=4),
                              4)
    sharding.check_geometry(config_lib.default(), 128)  # 512 envs: 4 per device, 4 minibatches

  def test_multi_process_flags_are_refused_before_anything_starts(self):
    cases = {
        ("--num_processes=2",): "needs --coordinator_address, --num_processes and --process_id "
                                "together (missing --coordinator_address, --process_id)",
        ("--coordinator_address=127.0.0.1:1", "--num_processes=0", "--process_id=0"):
            "--num_processes=0: it must be a positive integer",
        ("--coordinator_address=127.0.0.1:1", "--num_processes=2", "--process_id=2"):
            "--process_id=2: it must be in 0 .. 1 for --num_processes=2",
        ("--coordinator_address=nohost", "--num_processes=2", "--process_id=0"):
            "--coordinator_address='nohost': give host:port of process 0",
    }
    for args, message in cases.items():
      with self.subTest(args=args):
        ran = commands.run_main(train_lib.main, *args)
        self.assertEqual(ran.status, 2)
        self.assertIn(message, ran.err)
        self.assertEqual(jax.process_count(), 1)  # nothing joined

  def test_a_run_over_processes_needs_a_run_folder(self):
    fake = type("TwoProcesses", (), {"count": 2, "processes": 2})()
    with self.assertRaisesRegex(ValueError, "a run over 2 processes needs --run_dir"):
      runner._check_before_writing(configs.tiny(), fake, None)

  def test_a_batch_that_does_not_split_is_refused_before_the_run_folder_exists(self):
    # Catches a split check made after the run folder is created (or not made at all): the
    # training loop itself is given 4 devices that 6 envs cannot be spread over. The fake device
    # set has only what the checks before writing read; nothing compiles.
    fake = type("FourDevices", (), {"count": 4, "processes": 1, "seeded": False})()
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "refused"
    with self.assertRaisesRegex(ValueError, r"num_envs=6 cannot be split over 4 devices: it must "
                                r"be a multiple of the device count \(e.g. 4 or 8\)"):
      runner.run(configs.tiny(1, num_envs=6, families__num_train_families=2), run_dir,
                    devices=fake)
    self.assertFalse(run_dir.exists())


# THE PARTITIONER OF THE INSTALLED JAXLIB


# The smallest case of jaxlib 0.11.2's Shardy fault: a shard_map over 2 devices handed a
# zero-size array. `avoided` first applies the trainer's workaround.
_EMPTY_OPERAND = textwrap.dedent("""
    import sys
    import jax
    import numpy as np
    from mjx_walk.learn import sharding
    if sys.argv[1] == "avoided":
      sharding.avoid_partitioner_faults()
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
    step = jax.jit(jax.shard_map(lambda x, empty: (x + 1, empty), mesh=mesh,
                                 in_specs=sharding.P("d"), out_specs=sharding.P("d")))
    x, empty = step(np.ones((2, 3), np.float32), np.zeros((2, 0), np.float32))
    print(np.asarray(x).tolist(), empty.shape)
""")


class PartitionerTest(absltest.TestCase):

  def test_the_partitioner_is_switched_exactly_where_jaxlib_dies_on_an_empty_operand(self):
    # Catches a release gate that leaves jaxlib 0.11's Shardy to kill every multi-device run (a
    # segmentation fault in the first compilation, no Python exception: MJX's model and data
    # hold zero-size arrays), or that switches partitioners on a jaxlib whose Shardy compiles.
    # The reference is the fault's smallest case, run on the installed jaxlib in processes of
    # their own, as is and after the workaround.
    env = commands.forced_devices(2, os.environ.get("XLA_FLAGS", ""))
    started = {how: subprocess.Popen([sys.executable, "-c", _EMPTY_OPERAND, how], cwd=REPO,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
               for how in ("as_is", "avoided")}  # side by side
    ran = {}
    for how, process in started.items():
      stdout, stderr = process.communicate(timeout=120)
      ran[how] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    self.assertEqual(ran["avoided"].returncode, 0, ran["avoided"].stderr[-3000:])
    self.assertEqual(ran["avoided"].stdout.splitlines()[-1],
                     "[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]] (2, 0)")
    self.assertIn(ran["as_is"].returncode, (0, -signal.SIGSEGV), ran["as_is"].stderr[-3000:])
    self.assertEqual(sharding.SHARDY_FAILS_ON_EMPTY_OPERANDS, ran["as_is"].returncode != 0)


# RUNS ON 2 AND 4 DEVICES AGAINST THE ONE-DEVICE RUN


def _load(name: str) -> dict[str, np.ndarray]:
  returncodes, outs = _finished("devices")
  if returncodes != [0]:
    raise AssertionError(f"tests/sharded_runs.py failed:\n{outs[0][-4000:]}")
  with np.load(_JOBS["work"] / "devices" / f"{name}.npz") as data:
    return dict(data)


@pytest.mark.slow
class DevicesTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    _start_jobs()
    # The one-device reference, in this process, while the jobs run.
    trainer = trainer_lib.make_trainer(sharded_config(2))
    carry = trainer.init(jax.random.key(0))
    cls.init = _flat(carry)
    carry, metrics = trainer.train_chunk(carry)
    cls.chunk = _flat(carry)
    cls.metrics = jax.device_get(metrics)
    cls.num_families = len(trainer.manifest.train_families)

  def test_the_initial_carry_is_the_same_on_any_number_of_devices(self):
    kinematics = (".env.data.x", ".env.data.geom_xpos", ".env.data.site_xpos", ".env.obs",
                  ".env.final_obs", ".env.task.foot_xy")
    for d in (2, 4):
      with self.subTest(devices=d):
        init = _load(f"init_{d}")
        chex.assert_trees_all_equal({k: v for k, v in init.items() if not k.startswith(kinematics)},
                                    {k: v for k, v in self.init.items()
                                     if not k.startswith(kinematics)})
        chex.assert_trees_all_close(init, self.init, atol=2.5e-7, rtol=0)

  def test_env_i_trains_in_family_i_mod_f_on_every_device(self):
    for d in (2, 4):
      family = _load(f"chunk_{d}")[".env.family.index"]
      np.testing.assert_array_equal(family, np.arange(8) % self.num_families)

  def test_seeds_take_rows_of_the_mesh_and_train_as_on_one_device(self):
    # 4 seeds on 4 devices: a seed per device, no collective, so each seed's chunk is the one
    # the single device computes for it. 2 seeds: rows of 2 devices that split each seed's envs;
    # the start is the same, and every copy of a seed's train state agrees within its row.
    _load("init_2")  # waits for the 4-device job
    meshes = json.loads((_JOBS["work"] / "devices" / "seeds.json").read_text())
    self.assertEqual(meshes["4"]["shape"], {"seeds": 4, "envs": 1})
    self.assertEqual(meshes["2"]["shape"], {"seeds": 2, "envs": 2})
    self.assertEqual(meshes["2"]["describe"], "4 x cpu, seeds over 2 rows of 2")
    self.assertEqual((meshes["2"]["differing"], meshes["4"]["differing"]), ([], []))
    for num_seeds in (2, 4):
      trainer = trainer_lib.make_trainer(sharded_config(1, num_seeds=num_seeds))
      carry, metrics = trainer.train_chunk(trainer.init(seeds_lib.initial_keys(trainer.config)))
      there = _load(f"seeds_{num_seeds}")
      here = {**_flat(carry), **{f"metric/{k}": np.asarray(v)
                                 for k, v in jax.device_get(metrics).items()}}
      chex.assert_shape(there[".train.update_step"], (num_seeds,))
      if num_seeds == 4:
        # The same per-seed program; the physics' float32 rounding, amplified over 2 updates of
        # 6 steps, leaves the env state about 2e-5 apart, the learner's state closer.
        learner = lambda tree: {k: v for k, v in tree.items()
                                if k.startswith((".train.params", ".train.normalizer"))}
        chex.assert_trees_all_close(learner(there), learner(here), atol=1e-5, rtol=1e-4)
        # The rest within 1e-3 of each leaf's largest magnitude (at least 1): a constraint
        # force or an acceleration sums terms far larger than some of its elements. On an Intel
        # Xeon a per-element 1e-3 failed: qacc_smooth 2.6e-3 apart at 1.59, in a leaf reaching
        # 623; every leaf was within 1.9e-5 of its own largest magnitude.
        for key, value in here.items():
          if value.dtype.kind != "f":
            np.testing.assert_array_equal(there[key], value, key)
            continue
          scale = max(1.0, float(np.max(np.abs(value), initial=0.0)))
          chex.assert_trees_all_close(there[key], value, atol=1e-3 * scale, rtol=0,
                                      custom_message=key)
      else:
        np.testing.assert_array_equal(there[".env.family.index"], here[".env.family.index"])
        self.assertTrue(all(np.all(np.isfinite(v)) for k, v in there.items()
                            if k.startswith(".train.params")))

  def test_a_seeded_checkpoint_restores_onto_another_device_count(self):
    # Saved from 2 seeds on 2 rows of 2 devices, placed on 2 rows of 1: every leaf as saved,
    # each seed's copies alike, and it trains on.
    _load("init_2")
    meshes = json.loads((_JOBS["work"] / "devices" / "seeds.json").read_text())
    self.assertEqual(meshes["restored"], {"shape": {"seeds": 2, "envs": 1}, "differing": []})
    saved, restored = _load("seeds_2"), _load("seeds_restored")
    chex.assert_trees_all_equal(restored, {k: v for k, v in saved.items()
                                           if not k.startswith("metric/")})
    after = _load("seeds_restored_chunk")
    np.testing.assert_array_equal(after[".train.update_step"], saved[".train.update_step"] + 2)
    self.assertTrue(all(np.all(np.isfinite(v)) for k, v in after.items()
                        if k.startswith(".train.params")))

  def test_the_train_state_is_the_same_on_every_device(self):
    _load("init_2")
    replicas = json.loads((_JOBS["work"] / "devices" / "replicas.json").read_text())
    self.assertEqual({k: replicas[k] for k in ("2", "4", "tampered")},
                     {"2": [], "4": [], "tampered": "the train state differs between this "
                      "process's devices in ['w']"})

  def test_no_collective_can_wait_beside_a_loops_own(self):
    # Without `sharding.after` in the update, the chunk on 2 devices had 3 such pairs (the PPO
    # epochs, then the metrics' all-reduces), on jaxlib 0.10.2 and 0.12.0.1 alike.
    _load("init_2")
    programs = json.loads((_JOBS["work"] / "devices" / "collectives.json").read_text())
    self.assertEqual(sorted(programs), ["2 devices", "2 seeds", "4 devices", "4 seeds"])
    for name, program in programs.items():
      with self.subTest(name):
        self.assertGreater(program["count"], 0)
        self.assertEqual(program["overlaps"], [])

  def test_a_batch_that_does_not_split_is_refused_before_anything_is_written(self):
    _load("init_2")
    replicas = json.loads((_JOBS["work"] / "devices" / "replicas.json").read_text())
    self.assertIn("num_envs=6 cannot be split over 4 devices", replicas["refused"])
    self.assertFalse(replicas["refused_wrote"])

  def test_the_first_rollout_matches_the_one_device_run(self):
    for d in (2, 4):
      metrics = {k[len("metric/"):]: v for k, v in _load(f"chunk_{d}").items()
                 if k.startswith("metric/")}
      with self.subTest(devices=d):
        for key in ("episode/count", "reset/timeout", "reset/fall", "audit/resets_by_family"):
          np.testing.assert_array_equal(metrics[key][0], self.metrics[key][0], err_msg=key)
        for key in ("reward/total", "episode/return_sum", "value/mean"):
          np.testing.assert_allclose(metrics[key][0], self.metrics[key][0], rtol=1e-4,
                                     err_msg=key)
        # Later updates shuffle other minibatches: the learning goes on, but not identically.
        self.assertEqual(metrics["families/min_per_minibatch"].min(), self.num_families)

  def test_a_checkpoint_resumes_bit_for_bit_on_the_same_device_count(self):
    # resumed_2: one chunk on 2 devices, saved, restored onto 2 devices and one more chunk.
    resumed = _load("resumed_2")
    config = sharded_config(2)
    trainer = trainer_lib.make_trainer(config)
    abstract = jax.eval_shape(trainer.init, jax.random.key(0))
    straight = checkpoint.restore(_JOBS["work"] / "devices" / "straight", abstract, config,
                                  trainer.manifest, step=4)
    # ... equals two straight chunks on 2 devices, every leaf.
    chex.assert_trees_all_equal(resumed, _flat(straight.carry))

  def test_a_checkpoint_resumes_resharded_on_another_device_count(self):
    same = _load("resumed_2")
    resumed = _load("resumed_4")
    self.assertEqual(int(resumed[".train.update_step"]), 4)
    self.assertTrue(all(np.isfinite(v).all() for v in resumed.values()
                        if np.issubdtype(v.dtype, np.floating)))
    # The same envs in the same families, each device now shuffling its own 2 envs' samples:
    # the parameters moved elsewhere.
    np.testing.assert_array_equal(resumed[".env.family.index"], same[".env.family.index"])
    log_std = ".train.params.actor['params']['log_std']"
    self.assertFalse(np.array_equal(resumed[log_std], same[log_std]))
    said = (_JOBS["work"] / "devices" / "resharded.txt").read_text()
    self.assertIn("resumed from update 2", said)
    self.assertIn("the checkpoint was saved on 2 devices in 1 processes and this run has 4 in 1: "
                  "the envs are resharded, 8 in all as before, 2 per device", said)
    self.assertIn("not the bit-for-bit continuation", said)
    # What it placed on the 4 devices is the checkpoint as saved on 2.
    saved = {k: v for k, v in _load("chunk_2").items() if not k.startswith("metric/")}
    chex.assert_trees_all_equal(_load("resharded_carry"), saved)


def sharded_config(chunks: int, **changes):
  """tests/sharded_runs.py's config."""
  return configs.tiny(chunks, checkpoint__every_chunks=1, panel__every_chunks=0, **changes)


def _flat(tree) -> dict[str, np.ndarray]:
  return {jax.tree_util.keystr(path): leaf for path, leaf in
          jax.tree_util.tree_leaves_with_path(sharding.to_host(tree))}




# A RUN OVER TWO PROCESSES


@pytest.mark.slow
class ProcessesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    returncodes, self.outs = _finished("processes")
    if returncodes != [0, 0]:
      raise AssertionError("the two-process run failed:\n" + "\n----\n".join(
          out[-3000:] for out in self.outs))
    self.run_dir = _JOBS["work"] / "two_processes"

  def test_one_ledger_written_once_by_process_zero(self):
    records = ledger.read_run(self.run_dir)
    recipes = ledger.of_kind(records, "recipe")
    self.assertLen(recipes, 1)
    self.assertEqual((recipes[0]["process_count"], recipes[0]["device_count"],
                      recipes[0]["devices_per_process"], recipes[0]["envs_per_device"]),
                     (2, 2, 1, 4))
    self.assertEqual([r["update"] for r in ledger.of_kind(records, "update")], [1, 2, 3, 4])
    self.assertLen(ledger.of_kind(records, "eval"), 1)
    self.assertEqual(checkpoint.steps(self.run_dir), [2, 4])
    # Orbax wrote each array item once, from process 0: whole arrays, gathered from both.
    written = {path.name for path in (self.run_dir / "checkpoints").rglob("ocdbt.process_*")}
    self.assertEqual(written, {"ocdbt.process_0"})
    self.assertIn("steps", self.outs[0])
    self.assertNotIn("steps ", self.outs[1])  # process 1 trains and saves, silently

  def test_two_processes_compute_what_one_process_on_two_devices_does(self):
    _load("init_2")
    one_process = _JOBS["work"] / "devices" / "straight"
    for step in (2, 4):
      contents = [checkpoint.read_json_items(run, step)[3]["items"]
                  for run in (self.run_dir, one_process)]
      # Every leaf's sha256, of the train state and of every env's state.
      self.assertEqual(contents[0], contents[1])
    # Each save also checked that both processes held the same train state
    # (`sharding.check_replicated`), or the run would have stopped.



class KlAcrossDevicesTest(chex.TestCase):
  """The approximate KL that adapts the learning rate, on a minibatch split over 4 devices (vmap
  with a named axis, as in CollectivesTest)."""

  def test_the_learning_rate_follows_the_kl_of_the_whole_minibatch(self):
    # Device 3's behaviour log-probs lie 0.3 above the current policy's, the other devices'
    # on them. Per sample the estimator is (r - 1) - log r with log r = -0.3, so device 3 alone
    # measures e^-0.3 - 1 + 0.3 = 0.0408 > 2 x desired_kl (it would lower the rate), devices
    # 0-2 measure 0 < desired_kl / 2 (they would raise it), and the whole minibatch 0.0102,
    # within [desired_kl / 2, 2 x desired_kl]: the rate stays. Catches each device adapting the
    # rate from the KL of its own share.
    config = configs.tiny()
    self.assertEqual(config.ppo.desired_kl, 0.01)
    one = trainer_lib.make_trainer(config)
    spec = one.env.observation_spec()
    obs_size, critic_size = spec["policy"].shape[-1], spec["critic"].shape[-1]
    params = one.networks.init(jax.random.key(1), obs_size, critic_size)
    opt_state = one.optimizer.init(params)
    rng = np.random.default_rng(4)
    size = 24
    policy_obs = rng.normal(size=(size, obs_size)).astype(np.float32)
    mean, std = one.networks.policy(params, policy_obs)
    actions = np.asarray(mean + std * rng.normal(size=mean.shape).astype(np.float32))
    offsets = np.repeat(np.float32([0.0, 0.0, 0.0, 0.3]), size // 4)
    batch = ppo.Batch(
        policy_obs=jnp.asarray(policy_obs),
        critic_obs=jnp.asarray(rng.normal(size=(size, critic_size)), jnp.float32),
        actions=jnp.asarray(actions),
        log_probs=networks.log_prob(mean, std, actions) + jnp.asarray(offsets),
        values=jnp.asarray(rng.normal(size=size), jnp.float32),
        advantages=jnp.asarray(rng.normal(size=size), jnp.float32),
        returns=jnp.asarray(rng.normal(size=size), jnp.float32))
    parts = trainer_lib._Parts(
        config=config, env=one.env, networks=one.networks, optimizer=one.optimizer,
        loss_config=ppo.LossConfig(clip_eps=0.2, value_coef=1.0, entropy_coef=0.01),
        observation_spec=None, env_families=None, num_families=4, axis_name=sharding.AXIS,
        local_envs=2)
    (_, opt_states), metrics = _on_devices(
        lambda b: trainer_lib._minibatch_step(parts, (params, opt_state), b), 4)(
            jax.tree.map(lambda x: x.reshape((4, size // 4) + x.shape[1:]), batch))
    whole_kl = (np.exp(-0.3) - 1.0 + 0.3) / 4  # 0.0102
    np.testing.assert_allclose(metrics["loss/approx_kl"], np.full(4, whole_kl), atol=1e-6)
    np.testing.assert_allclose(ppo.get_learning_rate(opt_states),
                               np.full(4, config.ppo.learning_rate), rtol=1e-6)


if __name__ == "__main__":
  absltest.main()
