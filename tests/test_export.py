"""Tests for the ONNX export (mjx_walk.deploy.onnx_policy) and the `python -m mjx_walk.export`
command: the model against the JAX policy on observations of a real MJX rollout, its interface,
its metadata against the robot and the config, the action clip, the graph of every activation and
of observations beyond the normaliser's clip, and the command's output, files and refusals (run
in-process, tests/commands.py).

One tiny run is trained once per module (one chunk of two PPO updates, so the observation
normaliser holds real statistics) and exported once by the command. The references are written
here in NumPy from the policy's `act`, the loaded robot and the config; the metadata is read with
`onnx.load`, not with the package's loader.
"""

import dataclasses
import functools
import hashlib
import importlib.metadata
import itertools
import json
import logging
import pathlib
import shutil
import tempfile
from unittest import mock

from absl.testing import absltest
import flax
import jax
import mujoco
import numpy as np
import onnx

from mjx_walk import config as config_lib
from mjx_walk import export as export_cli
from mjx_walk.deploy import onnx_export
from mjx_walk.deploy import onnx_policy
from mjx_walk.learn import networks
from mjx_walk.learn import normalizer
from mjx_walk.run import policy as policy_lib
from mjx_walk.run import run_folder
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import robots

import commands
import configs
import runs

TOLERANCE = 1e-5
STEP = 2
"""The tiny run's one checkpoint: after one chunk of two updates."""


def tiny_config() -> config_lib.TrainConfig:
  """The tiny test config with the C MuJoCo replay's panel (`configs.replay`), one chunk long:
  the command's rollout is the program test_sim2sim.py's export compiles."""
  return configs.replay(chunks=1)


@functools.cache
def trained_run() -> pathlib.Path:
  """A run folder (config, manifest, one checkpoint at update 2) of the tiny config trained for
  one chunk. Built once per test process."""
  runs.warm()  # the tiny config's programs, compiled once for every worker
  return runs.one_chunk(tiny_config(), "export_fixture_")


@functools.cache
def rollout() -> np.ndarray:
  """float32 [30, 7, O]: the policy observations of the command's own rollout (30 steps of 7
  panel envs) for the tiny run's policy."""
  return onnx_export.rollout_observations(policy_lib.load(trained_run()), num_envs=7, steps=30)


class LogRecords(logging.Handler):
  """Collects the WARNING and higher records that reach the root logger, where absl's handler
  would print them to stderr in a real command."""

  def __init__(self):
    super().__init__(logging.WARNING)
    self.records: list[logging.LogRecord] = []

  def emit(self, record: logging.LogRecord) -> None:
    self.records.append(record)


def read_metadata(path: pathlib.Path) -> dict:
  """The model's metadata_props, each value parsed from its JSON text, read with plain onnx."""
  return {prop.key: json.loads(prop.value) for prop in onnx.load(str(path)).metadata_props}


def max_diffs(model: onnx_policy.OnnxPolicy, pol: policy_lib.Policy, obs: np.ndarray,
              batch: int) -> tuple[float, float]:
  """(action, joint targets) max abs differences over `obs` [K, O] in batches of `batch`,
  against the JAX action clipped in NumPy and targets computed from it in NumPy."""
  robot = robots.load(pol.config.env.robot)
  clip = pol.config.env.action_clip
  worst_action = worst_targets = 0.0
  for start in range(0, len(obs), batch):
    x = obs[start:start + batch]  # [batch, O]
    action, targets = model.act(x)
    assert action.shape == targets.shape == (batch, robot.num_actions), action.shape
    assert action.dtype == targets.dtype == np.float32
    expected = np.clip(np.asarray(pol.act(x)), -clip, clip)  # [batch, A]
    expected_targets = (robot.default_pose.astype(np.float32)
                        + np.float32(robot.spec.action_scale) * expected)
    worst_action = max(worst_action, float(np.abs(action - expected).max()))
    worst_targets = max(worst_targets, float(np.abs(targets - expected_targets).max()))
  return worst_action, worst_targets


class ExportCommandTest(absltest.TestCase):
  """The command run once on the tiny run; its model checked against the JAX policy."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.run_dir = trained_run()
    cls.logs = LogRecords()
    logging.getLogger().addHandler(cls.logs)
    try:
      cls.ran = commands.run_main(export_cli.main, f"--run_dir={cls.run_dir}")
    finally:
      logging.getLogger().removeHandler(cls.logs)
    assert cls.ran.status == 0, cls.ran.err
    cls.folder = cls.run_dir / "export" / str(STEP)
    cls.model_path = cls.folder / "policy.onnx"
    cls.pol = policy_lib.load(cls.run_dir)
    cls.model = onnx_policy.OnnxPolicy(cls.model_path)
    cls.obs = rollout()  # [T, N, O]

  def test_prints_the_parity_and_the_files_written_and_nothing_else(self):
    # Catches library logs or warnings (onnx's, onnxruntime's) in the output, a parity record
    # that is not the one printed, and files written elsewhere.
    self.assertEqual((self.ran.status, self.ran.err), (0, ""))
    self.assertEqual([f"{r.name}: {r.getMessage()}" for r in self.logs.records], [])
    self.assertEqual(run_folder.RunFolder(self.run_dir).export_dir(STEP), self.folder)
    record = json.loads((self.folder / "parity.json").read_text())
    self.assertEqual(self.ran.out, f"{onnx_export.format_parity(record)}\n"
                     f"wrote {self.model_path}\nwrote {self.folder / 'parity.json'}\n")
    self.assertEqual(sorted(p.name for p in self.folder.iterdir()),
                     ["parity.json", "policy.onnx"])
    self.assertEqual(record["step"], STEP)
    self.assertEqual(record["policy_sha256"],
                     hashlib.sha256(self.model_path.read_bytes()).hexdigest())
    self.assertEqual(sorted(record["max_abs_diff"]), ["1", "2", "7"])
    for diffs in record["max_abs_diff"].values():
      self.assertLessEqual(max(diffs["action"], diffs["joint_targets"]), TOLERANCE)

  def test_the_observations_come_from_a_real_rollout(self):
    # Catches a parity check fed zeros, one repeated observation, or an unstepped env. The
    # trunk's gravity direction is read through the layout the model's metadata gives.
    layout = {b["name"]: b for b in self.model.metadata["observation_layout"]}
    self.assertEqual(self.obs.shape, (30, 7, self.pol.observation_spec.shape[-1]))
    self.assertTrue(np.isfinite(self.obs).all())
    gravity = layout["projected_gravity"]
    down = self.obs[..., gravity["offset"]:gravity["offset"] + 3]  # [T, N, 3]
    np.testing.assert_allclose(np.linalg.norm(down, axis=-1), 1.0, atol=1e-4)
    self.assertTrue((down[..., 2] < -0.8).all())  # standing, within 37 degrees of level
    joint_vel = layout["joint_vel"]
    velocities = self.obs[..., joint_vel["offset"]:joint_vel["offset"] + joint_vel["size"]]
    self.assertGreater(np.abs(velocities).max(), 1e-3)
    self.assertGreater(np.abs(np.diff(self.obs, axis=0)).max(), 1e-3)  # it moves in time
    self.assertGreater(np.abs(self.obs[:, 1:] - self.obs[:, :1]).max(), 1e-3)  # envs differ

  def test_the_model_matches_the_jax_policy_at_batch_sizes_1_2_and_7(self):
    # Catches a model without the normaliser or with other statistics, another actor, a wrong
    # standing pose or action scale, and a batch dimension that is not really symbolic.
    obs = self.obs.reshape(-1, self.obs.shape[-1])  # [210, O]
    # The normaliser moves the action here, so a model that skipped it could not pass.
    raw = policy_lib.mean_action(self.pol.networks, False, self.pol.params, obs)
    self.assertGreater(np.abs(np.asarray(raw) - np.asarray(self.pol.act(obs))).max(), 1e-2)
    for batch in (1, 2, 7):
      with self.subTest(batch=batch):
        action_diff, targets_diff = max_diffs(self.model, self.pol, obs, batch)
        self.assertLessEqual(action_diff, TOLERANCE)
        self.assertLessEqual(targets_diff, TOLERANCE)

  def test_one_input_obs_with_a_symbolic_batch_and_two_outputs(self):
    # Catches a model onnx's own checker refuses, and one that needs more than the standard
    # operators of opset 17 (or a newer IR than that opset's) that robot-side runtimes read.
    model = onnx.load(str(self.model_path))
    onnx.checker.check_model(model, full_check=True)
    self.assertEqual([(o.domain, o.version) for o in model.opset_import], [("", 17)])
    self.assertEqual(model.ir_version, 8)
    self.assertEqual({node.domain for node in model.graph.node}, {""})
    graph = model.graph
    obs_size = self.pol.observation_spec.shape[-1]
    action_size = robots.load(self.pol.config.env.robot).num_actions

    def signature(values):
      return [(v.name, v.type.tensor_type.elem_type,
               [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
              for v in values]

    batch = graph.input[0].type.tensor_type.shape.dim[0].dim_param
    self.assertNotEqual(batch, "")
    float32 = onnx.TensorProto.FLOAT
    self.assertEqual(signature(graph.input), [("obs", float32, [batch, obs_size])])
    self.assertEqual(signature(graph.output), [("action", float32, [batch, action_size]),
                                               ("joint_targets", float32, [batch, action_size])])

  def test_the_metadata_holds_the_robot_and_config_values(self):
    # Catches a value hard-coded or taken from elsewhere than the robot, the config, the manifest
    # and the checkpoint, and joints listed out of actuator order.
    cfg = tiny_config()
    spec = robots.ROBOT_SPECS[cfg.env.robot]
    robot = robots.load(cfg.env.robot)
    mj_model = robot.mj_model
    meta = read_metadata(self.model_path)
    self.assertEqual(self.model.metadata, meta)
    self.assertEqual(sorted(meta), sorted([
        "run_name", "step", "env_steps", "manifest_hash", "seed", "num_seeds", "joint_names",
        "default_pose",
        "action_scale", "action_clip", "kp", "kd", "torque_limits", "pd_control", "control_hz",
        "physics_timestep", "gait_hz", "observation_size", "action_size", "observation_layout",
        "normalization_folded", "command_ranges", "versions"]))
    # Joint names straight from the MJCF's actuators, in actuator order.
    self.assertEqual(meta["joint_names"], [
        mujoco.mj_id2name(mj_model, mujoco.mjtObj.mjOBJ_JOINT, mj_model.actuator_trnid[i, 0])
        for i in range(mj_model.nu)])
    np.testing.assert_allclose(meta["default_pose"], robot.default_pose, rtol=0, atol=0)
    np.testing.assert_allclose(meta["torque_limits"], mj_model.actuator_forcerange[:, 1])
    self.assertEqual((meta["action_scale"], meta["kp"], meta["kd"]),
                     (spec.action_scale, spec.kp, spec.kd))
    self.assertIn("joint damping", meta["pd_control"])
    self.assertEqual(
        (meta["action_clip"], meta["control_hz"], meta["physics_timestep"], meta["gait_hz"]),
        (cfg.env.action_clip, cfg.env.control_hz, cfg.env.physics_timestep, cfg.env.gait_hz))
    obs_size = self.pol.observation_spec.shape[-1]
    self.assertEqual((meta["observation_size"], meta["action_size"]), (obs_size, mj_model.nu))
    layout = meta["observation_layout"]
    self.assertEqual([b["offset"] for b in layout],
                     list(np.cumsum([0] + [b["size"] for b in layout])[:-1]))
    self.assertEqual(sum(b["size"] for b in layout), obs_size)
    self.assertEqual([b["name"] for b in layout],
                     ["base_lin_vel", "base_ang_vel", "projected_gravity", "command", "joint_pos",
                      "joint_vel", "last_action", "gait_clock"])
    self.assertTrue(all(b["units"] and b["description"] for b in layout))
    self.assertIn(f"{cfg.env.gait_hz:g} / {cfg.env.control_hz:g}", layout[-1]["description"])
    for section, ranges in (("train", cfg.families), ("panel", cfg.panel)):
      self.assertEqual(meta["command_ranges"][section], {
          name: list(getattr(ranges, name)) for name in (
              "command_vx", "command_vy", "command_yaw_rate", "command_resample_seconds")})
    manifest = json.loads((self.run_dir / "manifest.json").read_text())
    self.assertEqual(
        (meta["run_name"], meta["step"], meta["env_steps"], meta["manifest_hash"]),
        (self.run_dir.name, STEP, STEP * cfg.num_envs * cfg.unroll_length, manifest["hash"]))
    self.assertEqual((meta["seed"], meta["num_seeds"]), (0, 1))
    self.assertIs(meta["normalization_folded"], cfg.ppo.normalize_observations)
    self.assertEqual(meta["versions"], {
        "mjx_walk": importlib.metadata.version("mjx_walk"), "jax": jax.__version__,
        "flax": flax.__version__, "mujoco": mujoco.__version__,
        "mujoco-mjx": importlib.metadata.version("mujoco-mjx"),
        "onnx": onnx.__version__})

  def test_exporting_again_replaces_both_files(self):
    # Catches a second export that appends, refuses, leaves a temporary file behind, or
    # writes in place (same inode) rather than renaming a finished file into place. --seed=0,
    # which a single-seed run accepts, names the same policy and the same folder.
    before = {name: (self.folder / name).stat().st_ino for name in ("policy.onnx", "parity.json")}
    ran = commands.run_main(export_cli.main, f"--run_dir={self.run_dir}", f"--step={STEP}",
                            "--seed=0")
    self.assertEqual((ran.status, ran.err), (0, ""))
    self.assertEqual(sorted(p.name for p in self.folder.iterdir()),
                     ["parity.json", "policy.onnx"])
    for name, inode in before.items():
      self.assertNotEqual((self.folder / name).stat().st_ino, inode, name)
    record = json.loads((self.folder / "parity.json").read_text())
    self.assertEqual(record["policy_sha256"],
                     hashlib.sha256(self.model_path.read_bytes()).hexdigest())


class SeedExportTest(absltest.TestCase):
  """The command on a copy of the shared 2-seed run (checkpoints 2 and 4, evaluated at 4): one
  seed's policy exported, into a folder of its own."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.run_dir = pathlib.Path(tempfile.mkdtemp(prefix="export_seeds_")) / "run"
    shutil.copytree(runs.warm_seeds(), cls.run_dir)
    cls.ran = commands.run_main(export_cli.main, f"--run_dir={cls.run_dir}", "--seed=1")
    cls.folder = run_folder.RunFolder(cls.run_dir).export_dir(4, seed=1)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.run_dir.parent, ignore_errors=True)
    super().tearDownClass()

  def test_the_model_is_the_chosen_seeds_policy(self):
    # Catches an export of another seed than the chosen one (seed 0, the first of the stack),
    # and a model whose metadata does not say which seed it is.
    self.assertEqual((self.ran.status, self.ran.err), (0, ""))
    self.assertEqual(self.folder, self.run_dir / "export" / "4_seed1")
    self.assertEqual(sorted(p.name for p in (self.run_dir / "export").iterdir()), ["4_seed1"])
    record = json.loads((self.folder / onnx_export.PARITY).read_text())
    self.assertEqual(self.ran.out, f"{onnx_export.format_parity(record)}\n"
                     f"wrote {self.folder / 'policy.onnx'}\n"
                     f"wrote {self.folder / onnx_export.PARITY}\n")
    meta = read_metadata(self.folder / "policy.onnx")
    self.assertEqual((meta["step"], meta["seed"], meta["num_seeds"]), (4, 1, 2))
    model = onnx_policy.OnnxPolicy(self.folder / "policy.onnx")
    seeds = [policy_lib.load(self.run_dir, seed=k) for k in (0, 1)]
    obs = rollout().reshape(-1, rollout().shape[-1])  # [210, O] observations of a real rollout
    action_diff, targets_diff = max_diffs(model, seeds[1], obs, 7)
    self.assertLessEqual(max(action_diff, targets_diff), TOLERANCE)
    other_action, _ = max_diffs(model, seeds[0], obs, 7)
    self.assertGreater(other_action, 1e-3)

  def test_a_seed_that_names_none_of_the_run_is_refused_writing_nothing(self):
    run = self.run_dir.resolve()
    before = commands.folder_digest(self.run_dir)
    refusals = {
        (): f"{run} trained 2 seeds; give the seed to use: 0 to 1, or 'best'",
        ("--seed=2",): f"seed='2' is invalid for {run}: accepted are 0 to 1, or 'best'",
        ("--seed=one",): f"seed='one' is invalid for {run}: accepted are 0 to 1, or 'best'",
        ("--step=2", "--seed=best"): f"seed='best': {run} has no held-out evaluation at or "
                                     "before update 2 to choose by; give a seed index, 0 to 1",
    }
    for args, message in refusals.items():
      ran = commands.run_main(export_cli.main, f"--run_dir={self.run_dir}", *args)
      self.assertEqual((ran.status, ran.err, ran.out), (2, f"error: {message}\n", ""), args)
    self.assertEqual(commands.folder_digest(self.run_dir), before)


class ActionClipTest(absltest.TestCase):

  def test_actions_beyond_the_clip_are_clipped_to_the_configs_bound(self):
    # The actor's output layer is scaled 50-fold and the clip set to 0.5 (not the default 5),
    # so most raw actions lie outside it. Catches a model without the clip, a clip on the
    # targets only, and a clip bound taken from anywhere but the config.
    pol = policy_lib.load(trained_run())
    clip = 0.5
    actor = jax.tree_util.tree_map_with_path(
        lambda path, x: x * 50.0 if "out" in jax.tree_util.keystr(path) else x,
        pol.params.actor)
    env_cfg = dataclasses.replace(pol.config.env, action_clip=clip)
    big = dataclasses.replace(pol, params=pol.params.replace(actor=actor),
                              config=dataclasses.replace(pol.config, env=env_cfg))
    model_bytes = onnx_policy.to_model(big).SerializeToString()
    model = onnx_policy.OnnxPolicy(model_bytes)
    obs = rollout()[:2].reshape(14, -1)  # [14, O]: two steps of seven envs
    raw = np.asarray(big.act(obs))  # [14, A]
    self.assertGreater((np.abs(raw) > 2 * clip).mean(), 0.5)
    action, targets = model.act(obs)
    self.assertEqual(np.abs(action).max(), np.float32(clip))
    np.testing.assert_allclose(action, np.clip(raw, -clip, clip), rtol=0, atol=TOLERANCE)
    robot = robots.load(pol.config.env.robot)
    np.testing.assert_allclose(
        targets, robot.default_pose + robot.spec.action_scale * np.clip(raw, -clip, clip),
        rtol=0, atol=TOLERANCE)
    self.assertEqual(model.metadata["action_clip"], clip)


class GraphTest(absltest.TestCase):
  """The graph against the JAX policy where the tiny run's export cannot show it: the other
  activations, and observations beyond the normaliser's clip."""

  def test_every_activation_matches_the_jax_policy(self):
    # The tiny run's parameters under each activation a config accepts (the parity test sees
    # only the tiny config's elu). Catches an activation mapped to other nodes than Flax's
    # function (swish as a bare sigmoid, elu with another alpha, relu and tanh swapped).
    pol = policy_lib.load(trained_run())
    clip = pol.config.env.action_clip
    obs = rollout()[:2].reshape(14, -1)  # [14, O]: two steps of seven envs
    actions = {}
    for activation in config_lib.ACTIVATIONS:
      with self.subTest(activation=activation):
        net = dataclasses.replace(pol.config.network, activation=activation)
        cfg = dataclasses.replace(pol.config, network=net)
        other = dataclasses.replace(
            pol, config=cfg, networks=networks.from_config(cfg, pol.networks.actor.action_size))
        action, _ = onnx_policy.OnnxPolicy(onnx_policy.to_model(other).SerializeToString()).act(obs)
        actions[activation] = np.clip(np.asarray(other.act(obs)), -clip, clip)  # [14, A]
        np.testing.assert_allclose(action, actions[activation], rtol=0, atol=TOLERANCE)
    # Each activation moves the action, so a model with another one could not pass.
    for a, b in itertools.combinations(config_lib.ACTIVATIONS, 2):
      self.assertGreater(np.abs(actions[a] - actions[b]).max(), 1e-3, (a, b))

  def test_observations_beyond_the_normalizers_clip_match_the_jax_policy(self):
    # Observations 20 to 2000 standard deviations from the run's mean, each feature on its own
    # side (seven, a batch the parity test has compiled the policy for). Catches a model that does not clip the normalised observation to +-10, or clips it
    # elsewhere (before the standardisation, or with another bound).
    pol = policy_lib.load(trained_run())
    clip = pol.config.env.action_clip
    stats = pol.params.normalizer
    mean = np.asarray(stats.mean["policy"], np.float32)  # [O]
    std = np.sqrt(np.asarray(stats.var["policy"], np.float32) + np.float32(1e-8))  # [O]
    rng = np.random.default_rng(0)
    sides = rng.choice([-1.0, 1.0], size=(7, mean.size))  # [7, O]
    distance = np.array([20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0])[:, None]  # [7, 1]
    obs = (mean + sides * distance * std).astype(np.float32)  # [7, O]
    expected = np.clip(np.asarray(pol.act(obs)), -clip, clip)  # [7, A]
    unclipped = policy_lib.mean_action(pol.networks, False, pol.params, (obs - mean) / std)
    self.assertGreater(np.abs(np.clip(np.asarray(unclipped), -clip, clip) - expected).max(), 1e-2)
    model = onnx_policy.OnnxPolicy(onnx_policy.to_model(pol).SerializeToString())
    action, _ = model.act(obs)
    np.testing.assert_allclose(action, expected, rtol=0, atol=TOLERANCE)


class ScanBranchTest(absltest.TestCase):
  """The graph of a policy whose height scan has its own branch (`network.scan_encoder_sizes`)
  against the JAX policy: the tiny run's config with the scan on, on fresh parameters."""

  def test_the_branch_matches_the_jax_policy(self):
    # Catches a model that feeds the scan to the MLP directly, gathers other values than the
    # scan's, or appends the branch's features before the other values instead of after.
    pol = policy_lib.load(trained_run())
    cfg = dataclasses.replace(
        pol.config, scan=dataclasses.replace(pol.config.scan, enabled=True),
        network=dataclasses.replace(pol.config.network, scan_encoder_sizes=(8, 4)))
    env = env_lib.LocomotionEnv(cfg)
    spec = env.observation_spec()
    nets = networks.from_config(cfg, env.action_size, env.scan_start)
    params = nets.init(jax.random.key(3), spec["policy"].shape[-1], spec["critic"].shape[-1])
    # The mean head's init gain is 0.01: scaled up, the actions span the clip.
    actor = jax.tree.map(lambda x: x, params.actor)
    actor["params"]["mean"]["out"]["kernel"] = actor["params"]["mean"]["out"]["kernel"] * 30.0
    rng = np.random.default_rng(1)
    size = spec["policy"].shape[-1]
    stats = normalizer.init(spec)
    stats = stats.replace(
        mean={**stats.mean, "policy": rng.normal(size=size).astype(np.float32)},
        var={**stats.var, "policy": rng.uniform(0.2, 3.0, size=size).astype(np.float32)})
    scanned = dataclasses.replace(
        pol, config=cfg, networks=nets, observation_spec=spec["policy"],
        params=policy_lib.PolicyParams(actor=actor, normalizer=stats))
    obs = rng.normal(size=(7, size)).astype(np.float32) * 2.0  # [7, O]
    expected = np.clip(np.asarray(scanned.act(obs)), -cfg.env.action_clip, cfg.env.action_clip)
    self.assertGreater(np.abs(expected).max(), 0.05)
    model = onnx_policy.OnnxPolicy(onnx_policy.to_model(scanned).SerializeToString())
    action, _ = model.act(obs)
    np.testing.assert_allclose(action, expected, rtol=0, atol=TOLERANCE)
    # The scan moves the action: a model that left the scan out could not pass.
    moved = obs.copy()
    moved[:, env.scan_start:] += 0.5
    self.assertGreater(np.abs(model.act(moved)[0] - action).max(), 1e-3)
    block = next(b for b in model.metadata["observation_layout"] if b["name"] == "height_scan")
    self.assertEqual((block["offset"], block["size"]), (env.scan_start, cfg.scan.num_points))


class RefusalTest(absltest.TestCase):
  """Each refusal is one `error:` line with status 2, and nothing is created."""

  def assert_refused(self, ran: commands.Ran, message: str) -> None:
    self.assertEqual((ran.status, ran.err, ran.out), (2, f"error: {message}\n", ""))

  def test_a_run_folder_without_checkpoints(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    (root / "checkpoints").mkdir()
    ran = commands.run_main(export_cli.main, f"--run_dir={root}")
    self.assert_refused(ran, f"no checkpoint in {root.resolve() / 'checkpoints'}")
    self.assertEqual([p.name for p in root.iterdir()], ["checkpoints"])
    self.assertEqual(list((root / "checkpoints").iterdir()), [])

  def test_a_missing_run_folder(self):
    missing = pathlib.Path(self.create_tempdir().full_path) / "no_run"
    ran = commands.run_main(export_cli.main, f"--run_dir={missing}")
    self.assert_refused(ran, f"{missing.resolve()} is neither a run folder (with checkpoints/) "
                        "nor a checkpoint folder (<run>/checkpoints/<step>)")
    self.assertFalse(missing.exists())

  def test_a_step_that_was_not_saved(self):
    run_dir = trained_run()
    before = commands.folder_digest(run_dir)
    ran = commands.run_main(export_cli.main, f"--run_dir={run_dir}", "--step=3")
    self.assert_refused(ran, f"no checkpoint at step 3 in {run_dir.resolve() / 'checkpoints'}; "
                        f"saved steps: [{STEP}]")
    self.assertEqual(commands.folder_digest(run_dir), before)
    self.assertFalse((run_dir / "export" / "3").exists())

  def test_a_corrupted_checkpoint(self):
    # The checkpoint's policy bytes flipped (as tests/test_checkpoint.py corrupts one): refused
    # by name before anything is exported, and nothing is written. Catches a corrupted policy
    # exported, or a failed verification that escapes as a traceback.
    run_dir = pathlib.Path(self.create_tempdir().full_path) / "run"
    shutil.copytree(trained_run(), run_dir)
    shutil.rmtree(run_dir / "export", ignore_errors=True)  # other tests export into trained_run()
    newest = run_dir / "checkpoints" / str(STEP)
    runs.flip_bytes(newest)
    before = commands.folder_digest(run_dir)
    ran = commands.run_main(export_cli.main, f"--run_dir={run_dir}")
    self.assertEqual((ran.status, ran.out), (2, ""))
    self.assertRegex(ran.err, rf"^error: checkpoint step {STEP} at {newest.resolve()}: "
                     r"(corrupted:\n    policy/\w+: checksum mismatch|unreadable \()")
    self.assertEqual(ran.err.count("error:"), 1)
    self.assertEqual(commands.folder_digest(run_dir), before)
    self.assertFalse((run_dir / "export").exists())

  def test_a_model_that_differs_from_the_policy_is_refused_and_nothing_is_written(self):
    # The mean head's bias off by 1e-4 in the graph, so the action is off by 1e-4, ten times the
    # tolerance (the targets by action_scale times that). Catches a parity check that never
    # fails, and a command that writes (or replaces) the model before checking it.
    actor_layers = onnx_policy.actor_layers

    def off_by_1e4(pol):
      *hidden, (kernel, bias) = actor_layers(pol)
      return [*hidden, (kernel, bias + np.float32(1e-4))]

    run_dir = trained_run()
    before = commands.folder_digest(run_dir)
    with mock.patch.object(onnx_policy, "actor_layers", off_by_1e4):
      ran = commands.run_main(export_cli.main, f"--run_dir={run_dir}")
    self.assertEqual((ran.status, ran.out), (export_cli.EXIT_PARITY, ""))
    self.assertRegex(ran.err, r"^error: the ONNX model differs from the JAX policy by up to "
                     r"0\.0001 \(tolerance 1e-05\): .*; nothing was written\n$")
    self.assertEqual(commands.folder_digest(run_dir), before)

  def test_without_a_run_folder(self):
    self.assert_refused(commands.run_main(export_cli.main),
                        "give the run to export: --run_dir=runs/<run>")

  def test_a_positional_argument(self):
    self.assert_refused(commands.run_main(export_cli.main, "--run_dir=runs/a", "extra"),
                        "unexpected arguments: ['extra']")


if __name__ == "__main__":
  absltest.main()
