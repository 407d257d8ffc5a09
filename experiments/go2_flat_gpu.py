"""One-GPU recipe: Go2 joystick walking on flat ground with 8192 envs.

Scaling from the CPU default follows the massively-parallel locomotion recipe: the batch grows
with num_envs while the horizon stays short (24 control steps, about 0.5 s of experience per env
before each update), minibatches stay large (4 of 49k samples), and the adaptive-KL schedule sets
the learning rate instead of a hand-scaled one. Untested on a GPU so far.
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
  )
