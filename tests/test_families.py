"""Tests for mjx_walk.sim.families: the run manifest, and what a family's draw does to the physics.

Manifest: a pure function of the config (run seed -> training families, panel seed -> evaluation
panel), training and evaluation seeds disjoint (leakage refused, also from an edited
manifest.json), an exact JSON round trip, every draw inside its configured range, and the
held-out strata outside the training ranges. Env i belongs to family i % F.

Physics: `apply_to_model` changes exactly the model fields it claims, to the manifest's values,
and the jitted env step simulates with them; the actuator delay is exactly the drawn number of
control steps; a 100 N push for 0.1 s changes the robot's momentum by 10 N·s; and tilting gravity
by 15 degrees over level ground is the same physics as a floor tilted by 15 degrees (checked
against C MuJoCo, then MJX against C).

Every test that steps the env shares one compiled batched reset and step (4 envs).
"""

import dataclasses
import functools
import hashlib
import json
import math

from absl.testing import absltest
import chex
import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx
import numpy as np

from mjx_walk import config as config_lib
from mjx_walk.sim import endings
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import families

import configs

NUM_ENVS = 4
TRAIN_KEYS = ("spawn_yaw", "spawn_offset", "command_times", "commands", "friction",
              "payload_mass", "payload_com", "joint_friction", "motor_strength", "action_delay",
              "push_times", "push_directions", "push_magnitudes", "push_seconds",
              "slope_degrees", "slope_direction")


_config = configs.with_changes


@functools.lru_cache(maxsize=None)
def _manifest(**changes) -> families.Manifest:
  return families.make_manifest(_config(**changes))


@functools.lru_cache(maxsize=None)
def _env() -> env_lib.LocomotionEnv:
  """`configs.quiet()`: every env starts in the standing pose, and the step is the one
  tests/test_env.py compiles."""
  return env_lib.LocomotionEnv(configs.quiet())


@functools.lru_cache(maxsize=None)
def _jitted():
  """Batched reset and step of `_env()`, compiled once for the whole file."""
  env = _env()
  return jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))


def _keys(n: int = NUM_ENVS) -> jax.Array:
  return jax.random.split(jax.random.key(0), n)


def _train_params(n: int = NUM_ENVS) -> families.FamilyParams:
  """The default manifest's training families for n envs; leaves [n, ...]."""
  return families.for_envs(_manifest().train_params(), n)


def _row(tree, i):
  return jax.tree.map(lambda x: x[i], tree)


def _column(fams, name) -> np.ndarray:
  return np.array([getattr(f, name) for f in fams], dtype=np.float64)


def _canonical_hash(content) -> str:
  """sha256 of canonical JSON: the manifest's documented hash of its content."""
  text = json.dumps(content, sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode()).hexdigest()


class ManifestTest(chex.TestCase):

  def test_manifest_is_a_pure_function_of_the_seeds(self):
    cfg = _config()
    first, second = families.make_manifest(cfg), families.make_manifest(cfg)
    self.assertEqual(first, second)
    self.assertEqual(first.hash, second.hash)
    self.assertEqual(first.to_json(), second.to_json())
    self.assertLen(first.train_families, cfg.families.num_train_families)  # 128
    self.assertLen(first.eval_families, cfg.panel.num_families)  # 5 strata x 8
    self.assertLen(first.hash, 64)

    # Another run seed: other training families, the same evaluation panel.
    other_run = _manifest(seed=1)
    self.assertEmpty({f.seed for f in first.train_families}
                     & {f.seed for f in other_run.train_families})
    self.assertNotEqual(first.train_families, other_run.train_families)
    self.assertEqual(first.eval_families, other_run.eval_families)
    self.assertEqual(first.panel_hash, other_run.panel_hash)
    self.assertNotEqual(first.hash, other_run.hash)

    # Another panel seed: the same training families, another panel.
    other_panel = _manifest(panel__seed=7)
    self.assertEqual(first.train_families, other_panel.train_families)
    self.assertNotEqual(first.panel_hash, other_panel.panel_hash)
    self.assertNotEqual(first.hash, other_panel.hash)
    self.assertEmpty({f.seed for f in first.eval_families}
                     & {f.seed for f in other_panel.eval_families})

    # When to evaluate is not what the panel is.
    self.assertEqual(_manifest(panel__every_chunks=3).hash, first.hash)

    # The panel is a function of config.panel alone: training ranges never move it.
    other_training = _manifest(families__pushes_per_episode=5,
                               families__command_resample_seconds=(2.0, 4.0),
                               families__friction=(0.5, 1.0), env__episode_seconds=12.0)
    self.assertEqual(other_training.eval_families, first.eval_families)
    self.assertEqual(other_training.panel_hash, first.panel_hash)
    self.assertNotEqual(other_training.hash, first.hash)

  def test_train_and_eval_seeds_are_disjoint_and_in_their_spaces(self):
    cfg = _config()
    train, evaluation = families.train_seeds(cfg), families.eval_seeds(cfg)
    self.assertLen(set(train), 128)
    self.assertLen(set(evaluation), 40)
    self.assertEmpty(set(train) & set(evaluation))
    self.assertTrue(all(0 <= s < 2**31 for s in train))
    self.assertTrue(all(2**31 <= s < 2**32 for s in evaluation))
    manifest = _manifest()
    self.assertEqual([f.seed for f in manifest.train_families], train)
    self.assertEqual([f.seed for f in manifest.eval_families], evaluation)
    families.check_disjoint(train, evaluation)  # no error

  def test_explicit_train_seeds_shared_with_the_panel_are_leakage(self):
    evaluation = families.eval_seeds(_config())
    leaked = (5, evaluation[3], 6, evaluation[17])
    cfg = _config(families__num_train_families=4, families__train_family_seeds=leaked)
    config_lib.validate(cfg)  # a well-formed config: only the manifest can see the leak
    shared = sorted([evaluation[3], evaluation[17]])
    with self.assertRaisesRegex(families.LeakageError,
                                rf"share seeds \[{shared[0]}, {shared[1]}\]"):
      families.make_manifest(cfg)
    with self.assertRaisesRegex(families.LeakageError, r"share seeds \[3\]"):
      families.check_disjoint([1, 2, 3], [3, 4])
    # The same explicit seeds without the shared ones are a valid run.
    clean = _config(families__num_train_families=4, families__train_family_seeds=(5, 6, 7, 8))
    self.assertEqual([f.seed for f in families.make_manifest(clean).train_families], [5, 6, 7, 8])

  def test_edited_manifest_json_is_refused(self):
    manifest = _manifest()
    values = json.loads(manifest.to_json())
    content = {k: values[k] for k in ("train_families", "eval_families", "ranges")}
    self.assertEqual(_canonical_hash(content), values["hash"])

    # A training family given an evaluation seed, with its hash recomputed: only the leakage
    # check can refuse it.
    leaked_seed = values["eval_families"][5]["seed"]
    values["train_families"][2]["seed"] = leaked_seed
    values["hash"] = _canonical_hash(
        {k: values[k] for k in ("train_families", "eval_families", "ranges")})
    with self.assertRaisesRegex(families.LeakageError, rf"share seeds \[{leaked_seed}\]"):
      families.Manifest.from_json(json.dumps(values))

    # A draw edited after the hash was written: the recorded hash is stale.
    values = json.loads(manifest.to_json())
    values["train_families"][0]["friction"] += 0.1
    with self.assertRaisesRegex(
        ValueError, rf"records {manifest.hash}; it was edited or corrupted") as raised:
      families.Manifest.from_json(json.dumps(values))
    self.assertNotIsInstance(raised.exception, families.LeakageError)

    values = json.loads(manifest.to_json())
    del values["ranges"]
    with self.assertRaisesRegex(ValueError, r"missing keys \['ranges'\]"):
      families.Manifest.from_json(json.dumps(values))

  def test_manifest_json_round_trips_exactly(self):
    manifest = _manifest()
    text = manifest.to_json()
    restored = families.Manifest.from_json(text)
    self.assertEqual(restored, manifest)
    self.assertEqual(restored.hash, manifest.hash)
    self.assertEqual(restored.panel_hash, manifest.panel_hash)
    self.assertEqual(restored.to_json(), text)
    chex.assert_trees_all_equal(restored.train_params(), manifest.train_params())
    chex.assert_trees_all_equal(restored.eval_params(), manifest.eval_params())

    values = json.loads(text)
    self.assertContainsSubset({"hash", "train_families", "eval_families", "ranges"}, values)
    self.assertEqual(values["hash"], manifest.hash)
    for family in values["train_families"]:
      self.assertContainsSubset({"seed", *TRAIN_KEYS}, family)
      self.assertIsNone(family["stratum"])
    self.assertEqual([f["stratum"] for f in values["eval_families"]],
                     [s for s in config_lib.STRATA for _ in range(8)])
    self.assertEqual(values["ranges"]["train"]["friction"], [0.4, 1.2])
    self.assertEqual(values["ranges"]["train"]["payload_mass"], [-3.0, 3.0])
    self.assertEqual(values["ranges"]["eval"]["payload_mass"], [4.0, 6.0])
    self.assertEqual(values["ranges"]["eval"]["seed"], 2026)
    # What did env 1234 see? Family 1234 % 128 of the file.
    env_family = values["train_families"][1234 % 128]
    self.assertEqual(env_family["seed"], manifest.train_families[1234 % 128].seed)

  def test_every_training_draw_lies_in_its_range(self):
    cfg = _config()
    ranges = cfg.families
    fams = _manifest().train_families
    params = _manifest().train_params()
    num, slots = len(fams), math.ceil(cfg.env.episode_seconds / ranges.command_resample_seconds[0])

    def within(values, bounds):
      values = np.asarray(values)
      self.assertTrue(np.all((values >= bounds[0]) & (values <= bounds[1])), (values, bounds))
      self.assertGreater(np.ptp(values), 0.0)  # really drawn, not a constant

    within(_column(fams, "spawn_yaw"), ranges.spawn_yaw)
    within(_column(fams, "spawn_offset"), (-ranges.spawn_offset, ranges.spawn_offset))
    commands = _column(fams, "commands")
    chex.assert_shape(commands, (num, slots, 3))
    for axis, bounds in enumerate((ranges.command_vx, ranges.command_vy, ranges.command_yaw_rate)):
      within(commands[..., axis], bounds)
    times = _column(fams, "command_times")
    np.testing.assert_array_equal(times[:, 0], 0.0)
    within(np.diff(times, axis=1), ranges.command_resample_seconds)
    within(_column(fams, "friction"), ranges.friction)
    within(_column(fams, "payload_mass"), ranges.payload_mass)
    within(_column(fams, "payload_com"),
           (-ranges.payload_com_offset, ranges.payload_com_offset))
    within(_column(fams, "joint_friction"), ranges.joint_friction)
    within(_column(fams, "motor_strength"), ranges.motor_strength)
    self.assertEqual(set(_column(fams, "action_delay")), {0.0, 1.0})
    within(_column(fams, "push_magnitudes"), ranges.push_force)
    # Every push, start to end, lies inside the episode.
    push_times = _column(fams, "push_times")
    within(push_times, (0.0, cfg.env.episode_seconds - ranges.push_seconds))
    chex.assert_shape(_column(fams, "push_times"), (num, ranges.pushes_per_episode))
    np.testing.assert_array_equal(_column(fams, "push_seconds"), ranges.push_seconds)
    within(_column(fams, "slope_degrees"), ranges.slope_degrees)

    # The env's arrays hold the same numbers (float32), gravity tilted by the family's slope
    # (vertical on level ground), pushes horizontal.
    chex.assert_shape(params.commands, (num, slots, 3))
    chex.assert_shape(params.push_forces, (num, ranges.pushes_per_episode, 3))
    chex.assert_trees_all_close(params.commands, commands.astype(np.float32))
    chex.assert_trees_all_equal(params.index, jnp.arange(num, dtype=jnp.int32))
    chex.assert_trees_all_close(
        jnp.linalg.norm(params.push_forces, axis=-1),
        _column(fams, "push_magnitudes").astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(params.push_forces[..., 2], 0.0)
    gravity = np.asarray(params.gravity, np.float64)  # [num, 3]
    np.testing.assert_allclose(np.linalg.norm(gravity, axis=-1), 9.81, rtol=1e-6)
    np.testing.assert_allclose(np.degrees(np.arccos(-gravity[:, 2] / 9.81)),
                               _column(fams, "slope_degrees"), atol=1e-3)

  def test_evaluation_strata(self):
    cfg = _config()
    manifest = _manifest()
    per = cfg.panel.families_per_stratum
    self.assertEqual(manifest.eval_strata, tuple(s for s in config_lib.STRATA for _ in range(per)))
    params = manifest.eval_params()
    by_stratum = {s: [f for f in manifest.eval_families if f.stratum == s]
                  for s in config_lib.STRATA}
    rows = {s: np.array([i for i, f in enumerate(manifest.eval_families) if f.stratum == s])
            for s in config_lib.STRATA}
    train = cfg.families

    # Conditions a stratum does not name are nominal: mid training range, no delay, full motors.
    for stratum, fams in by_stratum.items():
      np.testing.assert_allclose(_column(fams, "joint_friction"), 0.175)
      np.testing.assert_array_equal(_column(fams, "motor_strength"), 1.0)
      np.testing.assert_array_equal(_column(fams, "action_delay"), 0)
      np.testing.assert_array_equal(_column(fams, "payload_com"), 0.0)
      if stratum != "friction":
        np.testing.assert_allclose(_column(fams, "friction"), 0.8)
      if stratum != "payload":
        np.testing.assert_array_equal(_column(fams, "payload_mass"), 0.0)
      if stratum != "push":
        np.testing.assert_array_equal(_column(fams, "push_magnitudes"), 0.0)
      if stratum != "slope":
        np.testing.assert_array_equal(_column(fams, "slope_degrees"), 0.0)
        np.testing.assert_array_equal(params.gravity[rows[stratum]],
                                      np.tile(np.float32([0.0, 0.0, -9.81]), (per, 1)))

    # slope: gravity 15 degrees off the floor normal, full magnitude, in varied directions.
    gravity = np.asarray(params.gravity[rows["slope"]], np.float64)  # [per, 3]
    np.testing.assert_allclose(np.linalg.norm(gravity, axis=-1), 9.81, rtol=1e-6)
    tilt = np.degrees(np.arccos(-gravity[:, 2] / np.linalg.norm(gravity, axis=-1)))
    np.testing.assert_allclose(tilt, 15.0, atol=1e-3)
    self.assertGreater(np.ptp(_column(by_stratum["slope"], "slope_direction")), 1.0)

    # push: two 100 N horizontal pushes of 0.1 s inside each (10 s) evaluation episode.
    push = by_stratum["push"]
    np.testing.assert_array_equal(_column(push, "push_magnitudes"), 100.0)
    np.testing.assert_array_equal(_column(push, "push_seconds"), 0.1)
    times = _column(push, "push_times")
    self.assertTrue(np.all((times > 0.0) & (times + 0.1 < cfg.panel.episode_seconds)), times)
    forces = np.asarray(params.push_forces[rows["push"]])  # [per, 2, 3]
    np.testing.assert_allclose(np.linalg.norm(forces, axis=-1), 100.0, rtol=1e-6)
    np.testing.assert_array_equal(forces[..., 2], 0.0)

    # payload and friction: held out, beyond the training ranges.
    payload = _column(by_stratum["payload"], "payload_mass")
    self.assertTrue(np.all((payload >= 4.0) & (payload <= 6.0)), payload)
    self.assertGreater(payload.min(), train.payload_mass[1])
    friction = _column(by_stratum["friction"], "friction")
    self.assertTrue(np.all((friction >= 0.15) & (friction <= 0.3)), friction)
    self.assertLess(friction.max(), train.friction[0])

  def test_env_i_gets_family_i_mod_num_families(self):
    three = _row(_manifest().train_params(), np.arange(3))  # the first 3 families
    ten = families.for_envs(three, 10)
    np.testing.assert_array_equal(ten.index, np.arange(10) % 3)
    for i in range(10):
      chex.assert_trees_all_equal(_row(ten, i), _row(three, i % 3))
    np.testing.assert_array_equal(_train_params(512).index, np.arange(512) % 128)

    # The env carries its family: reset takes it, and an auto-reset keeps it.
    env = _env()
    reset, step = _jitted()
    state = reset(_keys(), families.for_envs(three, NUM_ENVS))
    np.testing.assert_array_equal(state.family.index, [0, 1, 2, 0])
    chex.assert_trees_all_equal(state.family, families.for_envs(three, NUM_ENVS))
    # The family fixes the spawn: offset and heading from its draw.
    spawn = families.for_envs(three, NUM_ENVS)
    chex.assert_trees_all_close(state.data.qpos[:, 0:2],
                                env.robot.init_qpos[0:2] + spawn.spawn_offset, atol=1e-6)
    yaw = 2.0 * jnp.arctan2(state.data.qpos[:, 6], state.data.qpos[:, 3])
    chex.assert_trees_all_close(jnp.angle(jnp.exp(1j * (yaw - spawn.spawn_yaw))),
                                jnp.zeros(NUM_ENVS), atol=1e-5)
    last = state.replace(task=state.task.replace(
        step=jnp.full((NUM_ENVS,), env.episode_steps - 1, jnp.int32)))
    after = step(last, jnp.zeros((NUM_ENVS, env.action_size)))
    np.testing.assert_array_equal(after.reset_reason, endings.ResetReason.TIMEOUT)
    np.testing.assert_array_equal(after.task.step, 0)
    chex.assert_trees_all_equal(after.family, state.family)


class PhysicsTest(chex.TestCase):

  def _non_nominal(self) -> tuple[families.Family, families.FamilyParams]:
    """A training family's draw with a slope family's gravity: every draw off nominal."""
    manifest = _manifest()
    slope_row = manifest.eval_strata.index("slope")
    slope = manifest.eval_families[slope_row]
    family = dataclasses.replace(manifest.train_families[1], slope_degrees=slope.slope_degrees,
                                 slope_direction=slope.slope_direction)
    params = _row(families.stack_params([family]), 0)
    chex.assert_trees_all_equal(params.gravity, manifest.eval_params().gravity[slope_row])
    return family, params

  def test_apply_to_model_changes_exactly_the_claimed_fields(self):
    env = _env()
    robot, nominal = env.robot, env.model
    family, params = self._non_nominal()
    changed = families.apply_to_model(nominal, robot, params)

    nominal_leaves, nominal_def = jax.tree_util.tree_flatten_with_path(nominal)
    changed_leaves, changed_def = jax.tree_util.tree_flatten_with_path(changed)
    self.assertEqual(nominal_def, changed_def)  # static fields (sizes, ids, types) untouched
    differ = {}
    for (path, before), (_, after) in zip(nominal_leaves, changed_leaves):
      chex.assert_equal_shape([before, after])
      if not np.array_equal(before, after):
        differ[jax.tree_util.keystr(path)] = (np.asarray(before), np.asarray(after))
    self.assertEqual(set(differ), {".geom_friction", ".body_mass", ".body_ipos", ".dof_damping",
                                   ".actuator_gainprm", ".actuator_biasprm", ".opt.gravity"})
    # Another simulator applies a family by copying MODEL_FIELDS (and building the slope): the
    # list must name every field written but gravity.
    self.assertEqual({f".{name}" for name in families.MODEL_FIELDS} | {".opt.gravity"},
                     set(differ))

    def only(name, mask):
      before, after = differ[name]
      np.testing.assert_array_equal(after[~mask], before[~mask], err_msg=name)
      return before, after

    trunk = robot.trunk_body_id
    ground = np.concatenate([[robot.floor_geom_id], robot.foot_geom_ids])
    dofs = np.asarray(robot.qvel_joint_adr)

    mask = np.zeros(nominal.geom_friction.shape, bool)
    mask[ground, 0] = True
    before, after = only(".geom_friction", mask)
    np.testing.assert_allclose(after[ground, 0], family.friction, rtol=1e-6)
    self.assertNotAlmostEqual(family.friction, float(before[robot.floor_geom_id, 0]))

    mask = np.zeros(nominal.body_mass.shape, bool)
    mask[trunk] = True
    before, after = only(".body_mass", mask)
    np.testing.assert_allclose(after[trunk], before[trunk] + family.payload_mass, rtol=1e-6)

    mask = np.zeros(nominal.body_ipos.shape, bool)
    mask[trunk] = True
    ipos_before, ipos_after = only(".body_ipos", mask)
    mass = float(before[trunk])
    expected_com = ((mass * ipos_before[trunk] + family.payload_mass * np.array(family.payload_com))
                    / (mass + family.payload_mass))
    np.testing.assert_allclose(ipos_after[trunk], expected_com, atol=1e-6)

    mask = np.zeros(nominal.dof_damping.shape, bool)
    mask[dofs] = True
    before, after = only(".dof_damping", mask)
    np.testing.assert_allclose(after[dofs], before[dofs] + family.joint_friction, rtol=1e-6)

    mask = np.zeros(nominal.actuator_gainprm.shape, bool)
    mask[:, 0] = True
    before, after = only(".actuator_gainprm", mask)
    np.testing.assert_allclose(after[:, 0], before[:, 0] * family.motor_strength, rtol=1e-6)
    mask = np.zeros(nominal.actuator_biasprm.shape, bool)
    mask[:, 1:3] = True
    before, after = only(".actuator_biasprm", mask)
    np.testing.assert_allclose(after[:, 1:3], before[:, 1:3] * family.motor_strength, rtol=1e-6)

    _, gravity = differ[".opt.gravity"]
    np.testing.assert_allclose(gravity, families._gravity(family), rtol=1e-6)  # pylint: disable=protected-access

    # Jitted and vmapped, as inside the env step, each env's model is its own family's.
    batch = _train_params()
    batched = jax.jit(jax.vmap(lambda p: families.apply_to_model(nominal, robot, p)))(batch)
    for i in range(NUM_ENVS):
      chex.assert_trees_all_close(_row(batched, i),
                                  families.apply_to_model(nominal, robot, _row(batch, i)))

  def test_env_step_simulates_each_envs_family_model(self):
    env = _env()
    robot = env.robot
    reset, step = _jitted()
    fams = _train_params()
    state = step(reset(_keys(), fams), jnp.zeros((NUM_ENVS, env.action_size)))
    np.testing.assert_array_equal(state.reset_reason, endings.ResetReason.NONE)
    # The composite inertia MJX computed inside the step holds the trunk's payload
    # (cinert[..., 9] is a body's mass).
    trunk = robot.trunk_body_id
    cinert = state.data._impl.cinert  # pylint: disable=protected-access
    chex.assert_trees_all_close(
        cinert[:, trunk, 9], robot.mj_model.body_mass[trunk] + fams.payload_mass, rtol=1e-6)
    self.assertGreater(np.ptp(np.asarray(cinert[:, trunk, 9])), 1.0)
    # Each foot-floor contact of the step uses the family's ground friction.
    contact = state.data._impl.contact  # pylint: disable=protected-access
    pair = np.asarray(contact.geom)  # [N, C, 2]
    feet = np.isin(pair, robot.foot_geom_ids)
    floor = pair == robot.floor_geom_id
    foot_floor = (feet[..., 0] & floor[..., 1]) | (feet[..., 1] & floor[..., 0])  # [N, C]
    for i in range(NUM_ENVS):
      self.assertGreaterEqual(int(foot_floor[i].sum()), env.num_feet)
      np.testing.assert_allclose(np.asarray(contact.friction)[i][foot_floor[i], 0],
                                 float(fams.friction[i]), rtol=1e-6)

  def test_actuator_delay_is_exactly_the_drawn_number_of_steps(self):
    env = _env()
    reset, step = _jitted()
    fams = _train_params()
    delays = np.array([0, 1, 1, 0])
    fams = fams.replace(action_delay=jnp.asarray(delays, jnp.int32))
    state = reset(_keys(), fams)
    scale = env.robot.spec.action_scale
    default_pose = np.asarray(env.robot.default_pose, np.float32)
    np.testing.assert_array_equal(state.data.ctrl, np.tile(default_pose, (NUM_ENVS, 1)))
    signal = np.linspace(-0.8, 0.8, env.action_size, dtype=np.float32)  # distinctive, per joint
    signal = signal * np.arange(1, NUM_ENVS + 1, dtype=np.float32)[:, None]  # [N, A]
    sent_at = 2
    for k in range(5):
      action = signal if k == sent_at else np.zeros_like(signal)
      state = step(state, jnp.asarray(action))
      np.testing.assert_array_equal(state.reset_reason, endings.ResetReason.NONE)
      arrives = (k == sent_at + delays)[:, None]  # [N, 1]
      expected = default_pose + scale * np.where(arrives, signal, 0.0)
      np.testing.assert_allclose(state.data.ctrl, expected, atol=1e-6, err_msg=f"step {k}")

  def test_push_changes_momentum_by_force_times_duration(self):
    """100 N for 0.1 s on the trunk of a robot floating in zero gravity: 10 N·s of momentum.

    Total linear momentum is the subtree mass of the world body times the velocity of the
    whole model's centre of mass (MuJoCo's `subtree_linvel[0]`), recomputed from qpos and qvel
    with C MuJoCo on the nominal model (no payload here, so the masses are the nominal ones).
    Joint, actuator and damping forces are internal; without gravity and contact only the push
    changes the momentum (explicit Euler conserves it to O(dt^2) per substep).
    """
    env = _env()
    reset, step = _jitted()
    dt = env.dt
    start_step, force = 5, 100.0
    directions = np.array([0.0, 1.0, 2.5, -2.0])  # rad, one per env
    push_forces = np.zeros((NUM_ENVS, 2, 3), np.float32)
    push_forces[:, 0, 0] = force * np.cos(directions)
    push_forces[:, 0, 1] = force * np.sin(directions)
    fams = _train_params().replace(
        gravity=jnp.zeros((NUM_ENVS, 3)),
        payload_mass=jnp.zeros(NUM_ENVS),
        push_times=jnp.tile(jnp.array([start_step * dt, 8.0]), (NUM_ENVS, 1)),
        push_forces=jnp.asarray(push_forces),  # the second push has no force
        push_seconds=jnp.full((NUM_ENVS,), 0.1),
    )
    state = reset(_keys(), fams)
    # High in the air (no contact), at rest.
    state = state.replace(data=state.data.replace(
        qpos=state.data.qpos.at[:, 2].set(3.0), qvel=jnp.zeros_like(state.data.qvel)))

    mj_model = env.robot.mj_model
    mj_data = mujoco.MjData(mj_model)
    total_mass = float(mj_model.body_subtreemass[0])

    def momentum(s) -> np.ndarray:  # [N, 3] N·s
      out = []
      for i in range(NUM_ENVS):
        mj_data.qpos[:], mj_data.qvel[:] = s.data.qpos[i], s.data.qvel[i]
        mujoco.mj_forward(mj_model, mj_data)
        mujoco.mj_subtreeVel(mj_model, mj_data)
        out.append(total_mass * mj_data.subtree_linvel[0].copy())
      return np.array(out)

    push_steps = round(0.1 / dt)  # 5 control steps
    history = [momentum(state)]
    zeros = jnp.zeros((NUM_ENVS, env.action_size))
    for _ in range(start_step + push_steps + 3):
      state = step(state, zeros)
      np.testing.assert_array_equal(state.reset_reason, endings.ResetReason.NONE)
      history.append(momentum(state))
    history = np.array(history)  # [steps + 1, N, 3]
    chex.assert_tree_all_finite(history)

    unit = np.stack([np.cos(directions), np.sin(directions), np.zeros(NUM_ENVS)], -1)  # [N, 3]
    # Before the push: nothing moves the centre of mass (gravity is the family's: zero).
    np.testing.assert_allclose(history[: start_step + 1], 0.0, atol=1e-3)
    # The push acts during exactly its 5 control steps, 2 N·s per step ...
    for k in range(push_steps + 1):
      np.testing.assert_allclose(history[start_step + k], force * dt * k * unit, atol=0.02,
                                 err_msg=f"{k} steps into the push")
    # ... 10 N·s in all, within 2%, along the push (none vertical or sideways), then no more.
    after = history[start_step + push_steps:]  # [4, N, 3]
    np.testing.assert_allclose(after, np.broadcast_to(10.0 * unit, after.shape), atol=0.2)
    along = np.einsum("tnk,nk->tn", after, unit)
    np.testing.assert_allclose(along, 10.0, rtol=0.02)
    # Vertical: 1.1e-3 N·s measured with 5 ms substeps (Euler's O(dt^2) drift of the internal
    # joint forces), 0.01% of the push.
    np.testing.assert_allclose(after[..., 2], 0.0, atol=2e-3)


def _box_slope_xml(floor_tilt_degrees: float) -> str:
  """Two 10 cm, 1 kg boxes on a plane tilted about y: friction 0.1 slides, 0.5 sticks."""
  boxes = "".join(f"""
      <body name="{name}"><freejoint/>
        <geom type="box" size="0.05 0.05 0.05" mass="1" friction="{mu} 0.005 0.0001"
              contype="1" conaffinity="0"/>
      </body>""" for name, mu in (("slider", 0.1), ("sticker", 0.5)))
  return f"""
  <mujoco>
    <option timestep="0.002" gravity="0 0 -{families.STANDARD_GRAVITY}"/>
    <worldbody>
      <geom name="floor" type="plane" size="0 0 0.05" euler="0 {floor_tilt_degrees} 0"
            friction="0.05 0.005 0.0001" contype="0" conaffinity="1"/>{boxes}
    </worldbody>
  </mujoco>"""


class SlopeTest(chex.TestCase):

  def test_tilted_gravity_is_an_inclined_plane(self):
    """A level floor under gravity tilted 15 degrees == a floor tilted 15 degrees, in its frame.

    The tilt is about the world y axis (slope direction 0, downhill +x), so even MuJoCo's
    contact frames (built from the normal and the world y axis) are the rotated ones and the
    two C simulations agree to round-off. MJX (float32, its own box-plane collider) is held to
    a millimetre.
    """
    slope = next(f for f in _manifest().eval_families if f.stratum == "slope")
    slope = dataclasses.replace(slope, slope_direction=0.0)
    tilt = math.radians(slope.slope_degrees)
    self.assertEqual(slope.slope_degrees, 15.0)
    tilted_floor = mujoco.MjModel.from_xml_string(_box_slope_xml(slope.slope_degrees))
    level_floor = mujoco.MjModel.from_xml_string(_box_slope_xml(0.0))
    # As apply_to_model does: the family's gravity vector in opt.gravity.
    level_floor.opt.gravity[:] = families._gravity(slope)  # pylint: disable=protected-access
    chex.assert_trees_all_close(np.float32(level_floor.opt.gravity),
                                families.stack_params([slope]).gravity[0])

    tilted, level = mujoco.MjData(tilted_floor), mujoco.MjData(level_floor)
    mujoco.mj_kinematics(tilted_floor, tilted)
    rotation = tilted.geom_xmat[0].reshape(3, 3)  # plane frame -> world
    plane_quat = np.zeros(4)
    mujoco.mju_mat2Quat(plane_quat, rotation.ravel())
    # Both boxes start 0.5 mm into the plane (a robust contact set), side by side along y.
    for i, y in enumerate((-0.5, 0.5)):
      start = np.array([0.0, y, 0.0495])
      level.qpos[7 * i:7 * i + 7] = [*start, 1.0, 0.0, 0.0, 0.0]
      tilted.qpos[7 * i:7 * i + 7] = [*(rotation @ start), *plane_quat]
    level_start = level.qpos.copy()

    steps = 500  # 1 s
    in_plane, on_level, in_plane_mat, on_level_mat = [], [], [], []
    for _ in range(steps):
      mujoco.mj_step(tilted_floor, tilted)
      mujoco.mj_step(level_floor, level)
      in_plane.append(tilted.xpos[1:] @ rotation)  # R^T x, row-wise
      on_level.append(level.xpos[1:].copy())
      in_plane_mat.append(rotation.T @ tilted.xmat[1:].reshape(-1, 3, 3))
      on_level_mat.append(level.xmat[1:].reshape(-1, 3, 3).copy())
    in_plane, on_level = np.array(in_plane), np.array(on_level)  # [T, 2, 3]
    np.testing.assert_allclose(in_plane, on_level, atol=1e-6)
    np.testing.assert_allclose(np.array(in_plane_mat), np.array(on_level_mat), atol=1e-6)

    # The physics is the expected one: mu 0.1 < tan 15 deg slides down at g (sin - mu cos),
    # mu 0.5 > tan 15 deg holds (up to the soft contact's creep).
    slide = 0.5 * families.STANDARD_GRAVITY * (math.sin(tilt) - 0.1 * math.cos(tilt)) * 1.0**2
    np.testing.assert_allclose(in_plane[-1, 0, 0], slide, rtol=0.01)
    self.assertLess(abs(in_plane[-1, 1, 0]), 2e-3)
    np.testing.assert_allclose(in_plane[:, :, 1], np.broadcast_to([-0.5, 0.5], (steps, 2)),
                               atol=1e-6)

    # MJX, level floor and tilted gravity, against C MuJoCo's tilted floor.
    model = mjx.put_model(level_floor, impl="jax")
    start = mjx.make_data(model).replace(qpos=jnp.asarray(level_start))

    @jax.jit
    def rollout(data):
      def body(data, _):
        data = mjx.step(model, data)
        return data, data.xpos[1:]
      return jax.lax.scan(body, data, None, steps)[1]

    np.testing.assert_allclose(np.asarray(rollout(start)), in_plane, atol=1e-3)


if __name__ == "__main__":
  absltest.main()
