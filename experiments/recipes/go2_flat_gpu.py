"""One-GPU recipe: Go2 joystick walking on flat ground with 8192 envs.

  python experiments/measurements/learn_benchmark.py --config=experiments/recipes/go2_flat_gpu.py \
      --budget_minutes=5

The env, rewards and PPO settings are the CPU default's (lin vel in the observation, the 2 Hz
gait clock, 5 ms physics, gamma 0.97, init std 0.75; see experiments/README.md). Scaling from
its 512 envs follows the massively-parallel locomotion recipe: the batch grows with num_envs
(16x, 196,608 samples per update) while the horizon stays short (24 control steps, 0.48 s of
experience per env before each update), minibatches stay large (4 of 49,152 samples), and the
adaptive-KL schedule sets the learning rate instead of a hand-scaled one (sqrt(16) = 4x the
CPU's rate would be its fixed-rate equivalent). Wider networks use the bigger batch. The held-out
panel is evaluated every 5 chunks (9.8M env steps). On one H200 it trains at 817,267 env steps/s
and walks on the held-out flat stratum 2.71 minutes after its start (experiments/README.md).
"""

import dataclasses

from mjx_walk import config


def get_config() -> config.TrainConfig:
  base = config.default()
  return dataclasses.replace(
      base,
      num_envs=8192,
      unroll_length=24,
      updates_per_chunk=10,
      total_env_steps=200_000_000,
      network=dataclasses.replace(
          base.network,
          actor_hidden_sizes=(512, 256, 128),
          critic_hidden_sizes=(512, 256, 128),
      ),
      ppo=dataclasses.replace(base.ppo, num_minibatches=4, num_epochs=5, learning_rate=1e-3),
      panel=dataclasses.replace(base.panel, every_chunks=5),
  )
