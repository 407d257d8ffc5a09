"""Tests for mjx_walk.config: every validation error, derived quantities, file loading."""

import dataclasses
import pathlib

from absl.testing import absltest
from absl.testing import parameterized

from mjx_walk import config as config_lib
from mjx_walk import networks

REPO = pathlib.Path(__file__).resolve().parent.parent


def _with(**changes):
  """The default config with top-level or dotted-path fields changed."""
  cfg = config_lib.default()
  for path, value in changes.items():
    *parents, leaf = path.split("__")
    target = cfg
    for parent in parents:
      target = getattr(target, parent)
    setattr(target, leaf, value)
  return cfg


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
      ("unknown_robot", {"env__robot": "spot"}, r"config\.env\.robot='spot' .*known robots are go2"),
      ("zero_hz", {"env__control_hz": 0.0}, r"config\.env\.control_hz=0\.0 .*> 0"),
      ("reversed_range", {"env__command_vx": (1.0, -1.0)}, r"config\.env\.command_vx=\(1\.0, -1\.0\) .*low must be <= high"),
      ("bad_range_shape", {"env__command_vy": (0.5,)}, r"config\.env\.command_vy=\(0\.5,\) .*\(low, high\) pair"),
      ("negative_noise", {"env__noise_gyro": -0.1}, r"config\.env\.noise_gyro=-0\.1 .*>= 0"),
      ("empty_hidden", {"network__actor_hidden_sizes": ()}, r"config\.network\.actor_hidden_sizes=\(\) .*positive integers"),
      ("zero_hidden", {"network__critic_hidden_sizes": (64, 0)}, r"critic_hidden_sizes=\(64, 0\)"),
      ("bad_activation", {"network__activation": "gelu"}, r"activation='gelu' .*elu, relu, tanh, swish"),
      ("zero_lr", {"ppo__learning_rate": 0.0}, r"config\.ppo\.learning_rate=0\.0 .*> 0"),
      ("gamma_above_one", {"ppo__gamma": 1.5}, r"config\.ppo\.gamma=1\.5 .*\(0, 1\]"),
      ("negative_kl", {"ppo__desired_kl": -0.01}, r"config\.ppo\.desired_kl=-0\.01 .*>= 0"),
      ("zero_sigma", {"reward__tracking_sigma": 0.0}, r"config\.reward\.tracking_sigma=0\.0"),
      ("tilt", {"env__fall_tilt_degrees": 200.0}, r"fall_tilt_degrees=200\.0 .*\(0, 180\]"),
  )
  def test_error_names_value_and_accepted(self, changes, pattern):
    with self.assertRaisesRegex(ValueError, pattern):
      config_lib.validate(_with(**changes))

  def test_activation_names_match_networks(self):
    # config validates names without importing the network module (imports run one way).
    self.assertEqual(set(config_lib.ACTIVATIONS), set(networks.ACTIVATIONS))

  def test_substeps(self):
    cfg = config_lib.default()
    self.assertEqual(config_lib.substeps(cfg, 0.004), 5)
    cfg.env.control_hz = 60.0
    with self.assertRaisesRegex(ValueError, r"control_hz=60\.0 .*whole multiple of the robot timestep 0\.004"):
      config_lib.substeps(cfg, 0.004)

  def test_derived_quantities(self):
    cfg = _with(num_envs=64, unroll_length=10, updates_per_chunk=3, total_env_steps=5000,
                ppo__num_minibatches=4)
    self.assertEqual(cfg.batch_size, 640)
    self.assertEqual(cfg.minibatch_size, 160)
    self.assertEqual(cfg.env_steps_per_chunk, 1920)
    self.assertEqual(cfg.num_chunks, 3)  # ceil(5000 / 1920)

  def test_json_round_trip(self):
    cfg = _with(num_envs=64, network__actor_hidden_sizes=(32, 16), env__command_vx=(0.0, 0.5))
    restored = config_lib.from_dict(cfg.to_dict())
    self.assertEqual(restored, cfg)


class LoadFileTest(absltest.TestCase):

  def test_experiment_files_load(self):
    cfg = config_lib.load_file(str(REPO / "experiments" / "go2_flat.py"))
    self.assertEqual(cfg, config_lib.default())
    gpu = config_lib.validate(config_lib.load_file(str(REPO / "experiments" / "go2_flat_gpu.py")))
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


if __name__ == "__main__":
  absltest.main()
