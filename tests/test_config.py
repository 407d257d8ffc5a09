"""Tests for mjx_walk.config: every validation error, derived quantities, file loading."""

import dataclasses
import pathlib
import re

from absl.testing import absltest
from absl.testing import parameterized

from mjx_walk import config as config_lib
from mjx_walk.learn import networks

import configs

REPO = pathlib.Path(__file__).resolve().parent.parent


_with = configs.with_changes


class ValidateTest(parameterized.TestCase):

  def test_default_is_valid(self):
    cfg = config_lib.default()
    self.assertIs(config_lib.validate(cfg), cfg)

  @parameterized.named_parameters(
      ("envs_not_divisible", {"num_envs": 10, "ppo__num_minibatches": 4},
       r"config\.num_envs=10 .*divisible by ppo\.num_minibatches=4"),
      ("zero_envs", {"num_envs": 0}, r"config\.num_envs=0 .*positive integer"),
      ("negative_unroll", {"unroll_length": -3}, r"config\.unroll_length=-3 .*positive integer"),
      ("float_envs", {"num_envs": 12.5}, r"config\.num_envs=12\.5 .*positive integer"),
      ("zero_steps", {"total_env_steps": 0}, r"config\.total_env_steps=0"),
      ("zero_epochs", {"ppo__num_epochs": 0}, r"config\.ppo\.num_epochs=0"),
      ("zero_hz", {"env__control_hz": 0.0}, r"config\.env\.control_hz=0\.0 .*> 0"),
      ("reversed_range", {"families__command_vx": (1.0, -1.0)}, r"config\.families\.command_vx=\(1\.0, -1\.0\) .*low must be <= high"),
      ("bad_range_shape", {"families__command_vy": (0.5,)}, r"config\.families\.command_vy=\(0\.5,\) .*\(low, high\) pair"),
      ("negative_noise", {"env__noise_gyro": -0.1}, r"config\.env\.noise_gyro=-0\.1 .*>= 0"),
      ("empty_hidden", {"network__actor_hidden_sizes": ()}, r"config\.network\.actor_hidden_sizes=\(\) .*positive integers"),
      ("zero_hidden", {"network__critic_hidden_sizes": (64, 0)}, r"critic_hidden_sizes=\(64, 0\)"),
      ("bad_activation", {"network__activation": "gelu"}, r"activation='gelu' .*elu, relu, tanh, swish"),
      ("zero_scan_branch", {"network__scan_encoder_sizes": (64, 0)},
       r"config\.network\.scan_encoder_sizes=\(64, 0\) .*tuple of positive integers, or empty"),
      ("zero_lr", {"ppo__learning_rate": 0.0}, r"config\.ppo\.learning_rate=0\.0 .*> 0"),
      ("gamma_above_one", {"ppo__gamma": 1.5}, r"config\.ppo\.gamma=1\.5 .*\(0, 1\]"),
      ("negative_kl", {"ppo__desired_kl": -0.01}, r"config\.ppo\.desired_kl=-0\.01 .*>= 0"),
      ("zero_sigma", {"reward__tracking_sigma": 0.0}, r"config\.reward\.tracking_sigma=0\.0"),
      ("tilt", {"env__fall_tilt_degrees": 200.0}, r"fall_tilt_degrees=200\.0 .*\(0, 180\]"),
      ("coarse_timestep", {"env__physics_timestep": 0.05}, r"config\.env\.physics_timestep=0\.05 .*0 \(the robot's MJCF timestep\) or in \(0, 0\.02\]"),
      ("hz_off_the_timestep", {"env__control_hz": 60.0}, r"config\.env\.control_hz=60\.0 .*whole multiple of the physics timestep 0\.005 s \(e\.g\. control_hz=66\.6667\)"),
      ("contact_past_mujocos_stiffest", {"env__contact_timeconst": 0.009},
       r"config\.env\.contact_timeconst=0\.009 .*0 \(the robot file's\) or in \[2 x the physics timestep = 0\.01, 0\.1\] s"),
      ("negative_contact", {"env__contact_timeconst": -0.02}, r"config\.env\.contact_timeconst=-0\.02 .*0\.01, 0\.1\]"),
      ("negative_iterations", {"env__solver_iterations": -1},
       r"config\.env\.solver_iterations=-1 .*0 \(the robot file's\) or a whole number of Newton iterations in \[1, 100\]"),
      ("fractional_iterations", {"env__solver_iterations": 1.5}, r"config\.env\.solver_iterations=1\.5 .*\[1, 100\]"),
      ("too_many_iterations", {"env__solver_iterations": 101}, r"config\.env\.solver_iterations=101 .*\[1, 100\]"),
      ("gait_too_fast", {"env__gait_hz": 20.0}, r"config\.env\.gait_hz=20\.0 .*0 \(no clock\) or in \(0, control_hz / 4 = 12\.5\]"),
      ("gait_reward_without_clock", {"env__gait_hz": 0.0}, r"config\.reward\.gait_phase=1\.0 .*needs the gait clock: set env\.gait_hz > 0"),
      ("zero_swing", {"reward__swing_height": 0.0}, r"config\.reward\.swing_height=0\.0 .*> 0"),
      ("negative_linvel_noise", {"env__noise_lin_vel": -1.0}, r"config\.env\.noise_lin_vel=-1\.0 .*>= 0"),
      ("zero_min_lr", {"ppo__min_learning_rate": 0.0}, r"config\.ppo\.min_learning_rate=0\.0 .*> 0"),
      ("lr_bounds_reversed", {"ppo__max_learning_rate": 1e-6},
       r"config\.ppo\.max_learning_rate=1e-06 .*>= ppo\.min_learning_rate=1e-05"),
      ("lr_outside_bounds", {"ppo__learning_rate": 0.1},
       r"config\.ppo\.learning_rate=0\.1 .*lie in \[ppo\.min_learning_rate, "
       r"ppo\.max_learning_rate\] = \[1e-05, 0\.01\]"),
  )
  def test_error_names_value_and_accepted(self, changes, pattern):
    with self.assertRaisesRegex(ValueError, pattern):
      config_lib.validate(_with(**changes))

  @parameterized.named_parameters(
      # The training panel (config.families).
      ("zero_families", {"families__num_train_families": 0},
       r"config\.families\.num_train_families=0 .*positive integer"),
      ("envs_not_divisible_by_families", {"num_envs": 100},
       r"config\.num_envs=100 .*divisible by families\.num_train_families=128 "
       r"\(env i belongs to family i % 128\)"),
      ("wrong_seed_count", {"families__train_family_seeds": (1, 2, 3)},
       r"config\.families\.train_family_seeds=\(1, 2, 3\) .*exactly num_train_families=128 seeds"),
      ("negative_seed", {"families__num_train_families": 2, "families__train_family_seeds": (1, -2)},
       r"config\.families\.train_family_seeds=\(1, -2\) .*non-negative integers"),
      ("float_seed", {"families__num_train_families": 2, "families__train_family_seeds": (1, 2.5)},
       r"config\.families\.train_family_seeds=\(1, 2\.5\) .*non-negative integers"),
      ("duplicate_seeds", {"families__num_train_families": 2, "families__train_family_seeds": (7, 7)},
       r"config\.families\.train_family_seeds=\(7, 7\) .*distinct"),
      ("reversed_yaw_rate", {"families__command_yaw_rate": (0.5, -0.5)},
       r"config\.families\.command_yaw_rate=\(0\.5, -0\.5\) .*low must be <= high"),
      ("reversed_spawn_yaw", {"families__spawn_yaw": (1.0, 0.0)},
       r"config\.families\.spawn_yaw=\(1\.0, 0\.0\) .*low must be <= high"),
      ("negative_friction", {"families__friction": (-0.1, 1.0)},
       r"config\.families\.friction=\(-0\.1, 1\.0\) .*both ends must be >= 0"),
      ("zero_friction", {"families__friction": (0.0, 1.0)},
       r"config\.families\.friction=\(0\.0, 1\.0\) .*both ends must be > 0"),
      ("negative_joint_friction", {"families__joint_friction": (-0.05, 0.3)},
       r"config\.families\.joint_friction=\(-0\.05, 0\.3\) .*both ends must be >= 0"),
      ("negative_push", {"families__push_force": (-5.0, 50.0)},
       r"config\.families\.push_force=\(-5\.0, 50\.0\) .*both ends must be >= 0"),
      ("negative_delay", {"families__action_delay_steps": (-1, 1)},
       r"config\.families\.action_delay_steps=\(-1, 1\) .*both ends must be >= 0"),
      ("fractional_delay", {"families__action_delay_steps": (0, 1.5)},
       r"config\.families\.action_delay_steps=\(0, 1\.5\) .*pair of integers"),
      ("zero_motor_strength", {"families__motor_strength": (0.0, 1.1)},
       r"config\.families\.motor_strength=\(0\.0, 1\.1\) .*both ends must be > 0"),
      ("zero_resample", {"families__command_resample_seconds": (0.0, 5.0)},
       r"config\.families\.command_resample_seconds=\(0\.0, 5\.0\) .*both ends must be > 0"),
      ("reversed_resample", {"families__command_resample_seconds": (10.0, 5.0)},
       r"config\.families\.command_resample_seconds=\(10\.0, 5\.0\) .*low must be <= high"),
      ("reversed_payload", {"families__payload_mass": (3.0, -3.0)},
       r"config\.families\.payload_mass=\(3\.0, -3\.0\) .*low must be <= high"),
      ("negative_spawn_offset", {"families__spawn_offset": -0.5},
       r"config\.families\.spawn_offset=-0\.5 .*>= 0"),
      ("negative_com_offset", {"families__payload_com_offset": -0.01},
       r"config\.families\.payload_com_offset=-0\.01 .*>= 0"),
      ("zero_push_seconds", {"families__push_seconds": 0.0},
       r"config\.families\.push_seconds=0\.0 .*> 0"),
      ("negative_pushes", {"families__pushes_per_episode": -1},
       r"config\.families\.pushes_per_episode=-1 .*integer >= 0"),
      # The held-out evaluation panel (config.panel).
      ("unknown_stratum", {"panel__strata": ("flat", "hills")},
       r"config\.panel\.strata=\('flat', 'hills'\) .*distinct names from flat, slope, push, "
       r"payload, friction"),
      ("empty_strata", {"panel__strata": ()}, r"config\.panel\.strata=\(\) .*non-empty"),
      ("duplicate_strata", {"panel__strata": ("flat", "flat")},
       r"config\.panel\.strata=\('flat', 'flat'\) .*distinct"),
      ("zero_families_per_stratum", {"panel__families_per_stratum": 0},
       r"config\.panel\.families_per_stratum=0 .*positive integer"),
      ("zero_envs_per_family", {"panel__envs_per_family": 0},
       r"config\.panel\.envs_per_family=0 .*positive integer"),
      ("negative_every_chunks", {"panel__every_chunks": -1},
       r"config\.panel\.every_chunks=-1 .*integer >= 0"),
      ("zero_panel_episode", {"panel__episode_seconds": 0.0},
       r"config\.panel\.episode_seconds=0\.0 .*> 0"),
      ("zero_panel_push", {"panel__push_force": 0.0}, r"config\.panel\.push_force=0\.0 .*> 0"),
      ("vertical_slope", {"panel__slope_degrees": 90.0},
       r"config\.panel\.slope_degrees=90\.0 .*\[0, 90\)"),
      ("negative_slope", {"panel__slope_degrees": -15.0},
       r"config\.panel\.slope_degrees=-15\.0 .*\[0, 90\)"),
      ("zero_panel_pushes", {"panel__pushes_per_episode": 0},
       r"config\.panel\.pushes_per_episode=0 .*positive integer"),
      ("payload_stratum_inside_training", {"panel__payload_mass": (2.0, 5.0)},
       r"config\.panel\.payload_mass=\(2\.0, 5\.0\) .*above the training range "
       r"families\.payload_mass=\(-3\.0, 3\.0\)"),
      ("payload_stratum_at_training_edge", {"panel__payload_mass": (3.0, 5.0)},
       r"config\.panel\.payload_mass=\(3\.0, 5\.0\) .*above the training range"),
      ("friction_stratum_inside_training", {"panel__friction": (0.3, 0.5)},
       r"config\.panel\.friction=\(0\.3, 0\.5\) .*below the training range "
       r"families\.friction=\(0\.4, 1\.2\)"),
      ("friction_stratum_zero", {"panel__friction": (0.0, 0.3)},
       r"config\.panel\.friction=\(0\.0, 0\.3\) .*must be > 0"),
      ("friction_stratum_negative", {"panel__friction": (-0.1, 0.3)},
       r"config\.panel\.friction=\(-0\.1, 0\.3\) .*both ends must be >= 0"),
      ("friction_stratum_above_narrowed_training", {"families__friction": (0.1, 1.2)},
       r"config\.panel\.friction=\(0\.15, 0\.3\) .*below the training range "
       r"families\.friction=\(0\.1, 1\.2\)"),
      ("slope_stratum_inside_training", {"families__slope_degrees": (0.0, 15.0)},
       r"config\.panel\.slope_degrees=15\.0 .*steeper than the training range "
       r"families\.slope_degrees=\(0\.0, 15\.0\)"),
      ("negative_training_slope", {"families__slope_degrees": (-5.0, 5.0)},
       r"config\.families\.slope_degrees=\(-5\.0, 5\.0\) .*both ends must be >= 0"),
      ("vertical_training_slope", {"families__slope_degrees": (0.0, 90.0)},
       r"config\.families\.slope_degrees=\(0\.0, 90\.0\) .*\[0, 90\)"),
      ("negative_run_seed", {"seed": -1}, r"config\.seed=-1 .*non-negative integer"),
      ("negative_panel_seed", {"panel__seed": -5}, r"config\.panel\.seed=-5 .*non-negative"),
      ("reversed_panel_command", {"panel__command_vx": (1.0, -1.0)},
       r"config\.panel\.command_vx=\(1\.0, -1\.0\) .*low must be <= high"),
      ("zero_panel_resample", {"panel__command_resample_seconds": (0.0, 5.0)},
       r"config\.panel\.command_resample_seconds=\(0\.0, 5\.0\) .*> 0"),
      ("zero_nominal_friction", {"panel__nominal_friction": 0.0},
       r"config\.panel\.nominal_friction=0\.0 .*> 0"),
      ("negative_nominal_joint_friction", {"panel__nominal_joint_friction": -0.1},
       r"config\.panel\.nominal_joint_friction=-0\.1 .*>= 0"),
      ("zero_checkpoint_every", {"checkpoint__every_chunks": 0},
       r"config\.checkpoint\.every_chunks=0 .*positive integer"),
      ("zero_checkpoint_keep", {"checkpoint__max_to_keep": 0},
       r"config\.checkpoint\.max_to_keep=0 .*positive integer"),
      # The audit section's own module: a count, a speed and a share.
      ("negative_early_end_steps", {"audit__early_end_steps": -1},
       r"config\.audit\.early_end_steps=-1 .*integer >= 0"),
      ("zero_slip_speed", {"audit__slip_speed": 0.0}, r"config\.audit\.slip_speed=0\.0 .*> 0"),
      ("share_above_one", {"audit__dominant_share": 1.5},
       r"config\.audit\.dominant_share=1\.5 .*\(0, 1\]"),
  )
  def test_family_and_panel_errors_name_value_and_accepted(self, changes, pattern):
    with self.assertRaisesRegex(ValueError, pattern):
      config_lib.validate(_with(**changes))

  @parameterized.named_parameters(
      ("zero_spacing", {"scan__spacing": 0.0}, r"config\.scan\.spacing=0\.0 .*> 0, in m"),
      ("negative_spacing", {"scan__spacing": -0.1}, r"config\.scan\.spacing=-0\.1 .*> 0"),
      ("length_off_the_spacing", {"scan__length": 1.55},
       r"config\.scan\.length=1\.55 .*whole multiple of scan\.spacing=0\.1"),
      ("negative_width", {"scan__width": -0.2}, r"config\.scan\.width=-0\.2 .*>= 0"),
      ("too_many_points", {"scan__spacing": 0.02},
       r"config\.scan\.spacing=0\.02 .*would have 4131 points; at most 1024"),
      ("clip_without_zero", {"scan__clip": (0.1, 1.0)},
       r"config\.scan\.clip=\(0\.1, 1\.0\) .*low < 0 < high"),
      ("negative_noise", {"scan__noise": -0.01}, r"config\.scan\.noise=-0\.01 .*>= 0"),
      ("negative_offset_noise", {"scan__offset_noise": -0.1},
       r"config\.scan\.offset_noise=-0\.1 .*>= 0"),
      ("certainly_missing", {"scan__missing_rate": 1.0},
       r"config\.scan\.missing_rate=1\.0 .*\[0, 1\)"),
      ("not_a_flag", {"scan__enabled": "yes"}, r"config\.scan\.enabled='yes' .*True or False"),
      # The grid reaches hypot(0.8, 0.5) = 0.943 m from the trunk; the heightfield models 0.6 m
      # beyond the tile.
      ("beyond_the_margin", {"terrain__ground": "heightfield", "families__spawn_offset": 0.2},
       r"config\.scan\.length=1\.6 .*reaches 0\.943 m from the trunk, but the heightfield "
       r"models only terrain\.margin=0\.6 m beyond the tile: give a smaller grid or "
       r"terrain\.margin >= 0\.94"),
  )
  def test_scan_errors_name_value_and_accepted(self, changes, pattern):
    with self.assertRaisesRegex(ValueError, pattern):
      config_lib.validate(_with(**{"scan__enabled": True, **changes}))

  def test_scan_fields_are_not_read_while_it_is_off(self):
    config_lib.validate(_with(scan__spacing=0.0, scan__clip=(1.0, 2.0)))
    # On a heightfield with the margin the default grid needs, it is valid on.
    config_lib.validate(_with(scan__enabled=True, terrain__ground="heightfield",
                              terrain__margin=1.0, families__spawn_offset=0.2))

  def test_lr_bounds_apply_only_to_the_adaptive_rate(self):
    config_lib.validate(_with(ppo__learning_rate=0.1, ppo__desired_kl=0.0))  # a fixed rate

  @parameterized.parameters(float("nan"), float("inf"), float("-inf"))
  def test_every_float_field_refuses_non_finite_values(self, bad):
    # Each float field of the default config (every section), and each float inside a range
    # field, set in turn to `bad`: validate must name that field and say why. A field whose own
    # range check ran first (e.g. `not x > 0` is true for NaN) would name it too, but with
    # another reason; the finite check must come first for every one of them.
    checked = 0
    for section_name, section in [("", config_lib.default())] + [
        (f.name + ".", getattr(config_lib.default(), f.name))
        for f in dataclasses.fields(config_lib.TrainConfig)
        if dataclasses.is_dataclass(getattr(config_lib.default(), f.name))]:
      for field in dataclasses.fields(section):
        value = getattr(section, field.name)
        if isinstance(value, bool) or dataclasses.is_dataclass(value):
          continue
        if isinstance(value, float):
          bad_value = bad
        elif isinstance(value, tuple) and value and all(isinstance(v, float) for v in value):
          bad_value = (bad,) + value[1:]
        else:
          continue
        cfg = configs.with_changes(**{f"{section_name.rstrip('.')}__{field.name}"
                                      if section_name else field.name: bad_value})
        name = f"{section_name}{field.name}"
        with self.subTest(field=name):
          with self.assertRaisesRegex(
              ValueError, rf"^config\.{re.escape(name)}=.* is invalid: it must be a finite "
              r"number \(not NaN or infinity\)\.$"):
            config_lib.validate(cfg)
        checked += 1
    # Every section has float fields; this many are checked (a new float field adds to it).
    self.assertGreaterEqual(checked, 70)

  def test_held_out_checks_apply_only_to_strata_in_the_panel(self):
    # A payload, friction or slope range inside the training range is fine when its stratum is
    # absent.
    cfg = _with(panel__strata=("flat", "slope", "push"), panel__payload_mass=(0.0, 1.0),
                panel__friction=(0.5, 0.6))
    self.assertIs(config_lib.validate(cfg), cfg)
    self.assertEqual(cfg.panel.num_families, 3 * cfg.panel.families_per_stratum)
    self.assertEqual(cfg.panel.num_envs, 3 * cfg.panel.families_per_stratum *
                     cfg.panel.envs_per_family)
    cfg = _with(panel__strata=("flat", "push"), families__slope_degrees=(0.0, 20.0))
    self.assertIs(config_lib.validate(cfg), cfg)

  def test_explicit_family_seeds_are_valid(self):
    cfg = _with(num_envs=8, ppo__num_minibatches=2, families__num_train_families=4,
                families__train_family_seeds=(0, 11, 22, 33))
    self.assertIs(config_lib.validate(cfg), cfg)

  def test_activation_names_match_networks(self):
    # config validates names without importing the network module (imports run one way).
    self.assertEqual(set(config_lib.ACTIVATIONS), set(networks.ACTIVATIONS))

  def test_substeps(self):
    cfg = config_lib.default()
    self.assertEqual(config_lib.substeps(cfg, 0.004), 5)
    cfg.env.control_hz = 60.0
    with self.assertRaisesRegex(ValueError, r"control_hz=60\.0 .*whole multiple of the physics timestep 0\.004"):
      config_lib.substeps(cfg, 0.004)
    # With the robot file's timestep (physics_timestep=0), the contact is checked against it.
    cfg = config_lib.default()
    cfg.env.contact_timeconst = 0.008
    self.assertEqual(config_lib.substeps(cfg, 0.004), 5)
    cfg.env.contact_timeconst = 0.007
    with self.assertRaisesRegex(ValueError, r"contact_timeconst=0\.007 .*= 0\.008, 0\.1\] s"):
      config_lib.substeps(cfg, 0.004)

  def test_derived_quantities(self):
    cfg = _with(num_envs=64, unroll_length=10, updates_per_chunk=3, total_env_steps=5000,
                ppo__num_minibatches=4)
    self.assertEqual(cfg.batch_size, 640)
    self.assertEqual(cfg.minibatch_size, 160)
    self.assertEqual(cfg.env_steps_per_chunk, 1920)
    self.assertEqual(cfg.num_chunks, 3)  # ceil(5000 / 1920)

  def test_json_round_trip(self):
    cfg = _with(num_envs=64, network__actor_hidden_sizes=(32, 16), families__command_vx=(0.0, 0.5),
                families__train_family_seeds=(3, 1, 4, 15), families__num_train_families=4)
    restored = config_lib.from_dict(cfg.to_dict())
    self.assertEqual(restored, cfg)


class LoadFileTest(absltest.TestCase):

  def test_experiment_files_load(self):
    cfg = config_lib.load_file(str(REPO / "experiments" / "recipes" / "go2_flat.py"))
    self.assertEqual(cfg, config_lib.default())
    gpu = config_lib.validate(config_lib.load_file(
        str(REPO / "experiments" / "recipes" / "go2_flat_gpu.py")))
    self.assertGreaterEqual(gpu.num_envs, 8192)

  def test_missing_file(self):
    with self.assertRaisesRegex(ValueError, r"config file 'nope\.py' does not exist"):
      config_lib.load_file("nope.py")

  def test_file_without_get_config(self):
    path = self.create_tempfile("bad.py", content="X = 1\n").full_path
    with self.assertRaisesRegex(ValueError, r"defines no get_config\(\)"):
      config_lib.load_file(path)

  def test_file_returning_wrong_type(self):
    path = self.create_tempfile("bad.py", content="def get_config():\n  return {}\n").full_path
    with self.assertRaisesRegex(ValueError, r"returned dict; it must return a TrainConfig"):
      config_lib.load_file(path)

  def test_defaults_are_not_shared(self):
    a, b = config_lib.default(), config_lib.default()
    a.ppo.learning_rate = 5.0
    self.assertNotEqual(b.ppo.learning_rate, 5.0)
    self.assertTrue(dataclasses.is_dataclass(a))


class FieldPathTest(absltest.TestCase):
  """The one walker of dotted field paths (the CLI's overrides, resume and the tests use it)."""

  def test_get_and_set_by_dotted_path(self):
    cfg = config_lib.default()
    config_lib.set_field(cfg, "ppo.learning_rate", 3e-4)
    config_lib.set_field(cfg, "panel.command_vx", (0.0, 0.5))
    config_lib.set_field(cfg, "seed", 7)
    self.assertEqual(cfg.ppo.learning_rate, 3e-4)
    self.assertEqual(cfg.panel.command_vx, (0.0, 0.5))
    self.assertEqual(cfg.families.command_vx, (-1.0, 1.0))  # the other section's own ranges
    self.assertEqual(cfg.seed, 7)
    self.assertEqual(config_lib.get_field(cfg, "ppo.learning_rate"), 3e-4)
    self.assertIs(config_lib.get_field(cfg, "network"), cfg.network)

  def test_unknown_paths_are_named(self):
    cfg = config_lib.default()
    for path in ("ppo.learning_rat", "nope.seed", "seed.x", "network.actor_hidden_sizes.0"):
      with self.assertRaisesRegex(AttributeError, rf"config\.{re.escape(path)} is not a config"):
        config_lib.set_field(cfg, path, 1)
    with self.assertRaisesRegex(AttributeError, r"config\.ppo\.gama is not a config field"):
      config_lib.get_field(cfg, "ppo.gama")
    self.assertEqual(cfg, config_lib.default())  # nothing was set

  def test_flat_fields_lists_every_leaf_field_once(self):
    flat = config_lib.flat_fields(config_lib.default())
    self.assertEqual(flat["ppo.learning_rate"], 1e-3)
    self.assertEqual(flat["families.command_resample_seconds"], (5.0, 10.0))
    self.assertEqual(flat["panel.command_yaw_rate"], (-0.5, 0.5))
    self.assertEqual(flat["num_envs"], 512)
    # Every dataclass field that is not itself a section, counted independently of flat_fields.
    def count(section):
      return sum(count(getattr(section, f.name)) if dataclasses.is_dataclass(
          getattr(section, f.name)) else 1 for f in dataclasses.fields(section))
    self.assertLen(flat, count(config_lib.default()))
    self.assertNotIn("ppo", flat)

  def test_command_ranges_are_one_type_in_both_sections(self):
    cfg = config_lib.default()
    self.assertIsInstance(cfg.families, config_lib.CommandRanges)
    self.assertIsInstance(cfg.panel, config_lib.CommandRanges)
    names = [f.name for f in dataclasses.fields(config_lib.CommandRanges)]
    self.assertEqual(names, ["command_vx", "command_vy", "command_yaw_rate",
                             "command_resample_seconds"])
    for name in names:  # the same defaults, declared once
      self.assertEqual(getattr(cfg.families, name), getattr(cfg.panel, name))


if __name__ == "__main__":
  absltest.main()
