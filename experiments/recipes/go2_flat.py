"""CPU default: Go2 joystick walking on flat ground, sized for a 2-core machine.

python -m mjx_walk.train --config=experiments/recipes/go2_flat.py --config.num_envs=1024
"""

from mjx_walk import config


def get_config() -> config.TrainConfig:
  return config.default()
