"""Small configs shared by the test modules (imported as `configs`; tests/ is on sys.path)."""

from mjx_walk import config as config_lib

TINY = dict(
    num_envs=8,
    unroll_length=6,
    updates_per_chunk=2,
    ppo__num_minibatches=2,
    ppo__num_epochs=2,
    network__actor_hidden_sizes=(16, 16),
    network__critic_hidden_sizes=(16, 16),
    # 5-step episodes, so that timeouts, auto-resets and bootstraps all happen in two chunks.
    env__episode_seconds=0.1,
    families__num_train_families=4,
    panel__families_per_stratum=1,
    panel__envs_per_family=1,
    panel__episode_seconds=0.1,
)


def with_changes(**changes) -> config_lib.TrainConfig:
  """The default config with top-level or dotted-path fields changed (`panel__seed=3`)."""
  cfg = config_lib.default()
  for path, value in changes.items():
    config_lib.set_field(cfg, path.replace("__", "."), value)
  return cfg


def quiet() -> config_lib.TrainConfig:
  """The default config with no reset perturbation and no observation noise, and joint-limit
  terminations on: every env starts exactly in the standing pose. tests/test_env.py,
  test_families.py and test_audit.py step 4 envs of it, so they share its compiled programs."""
  return with_changes(env__init_joint_noise=0.0, env__init_velocity_noise=0.0,
                      env__obs_noise_scale=0.0, env__terminate_on_joint_limit=True)


def tiny(chunks: int = 2, **changes) -> config_lib.TrainConfig:
  """`chunks` chunks of 2 updates of 8 envs x 6 steps, 4 families, a 5-env panel of 5-step
  episodes and (16, 16) networks; `changes` as in `with_changes`."""
  return with_changes(**{**TINY, "total_env_steps": chunks * 8 * 6 * 2, **changes})


def replay(chunks: int = 2, **changes) -> config_lib.TrainConfig:
  """`tiny` with a panel of two envs per family and half-second episodes (25 steps, so that the
  pushes land and commands are tracked): the run test_export.py and test_sim2sim.py both train,
  so that they share its compiled ONNX-parity rollout and panel."""
  return tiny(chunks, **{"panel__envs_per_family": 2, "panel__episode_seconds": 0.5, **changes})
