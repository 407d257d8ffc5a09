"""One-GPU recipe: Go2 on heightfield terrain with a curriculum, 8192 envs.

  python experiments/measurements/learn_benchmark.py --config=experiments/recipes/go2_rough_gpu.py \
      --budget_minutes=20

The rough CPU config's ground, curriculum, height scan and held-out panel
(experiments/recipes/go2_rough.py) at the one-GPU batch of experiments/recipes/go2_flat_gpu.py
(8192 envs, 24-step horizon, 4 minibatches, (512, 256, 128) networks, with the rough recipe's
(32, 16) branch for the scan, its thigh contacts penalised rather than ending episodes, its gait
clock's swing as a least height, its stiffer foot contact, its ten-second episodes and its two
solver iterations, which the H200 figures predate). The training families grow with
the batch (1024, 8 envs each), so every terrain type spans many shapes. Its H200 figures are in
experiments/README.md ("A GPU recipe").
"""

import dataclasses
import pathlib

from mjx_walk import config as config_lib


def _load(name: str):
  return config_lib.load_file(str(pathlib.Path(__file__).resolve().parent / name))


def get_config() -> config_lib.TrainConfig:
  rough, gpu = _load("go2_rough.py"), _load("go2_flat_gpu.py")
  return dataclasses.replace(
      gpu,
      terrain=rough.terrain,
      scan=rough.scan,
      # The flat GPU recipe keeps the default env and rewards: the rough recipe's are taken
      # whole, so that a setting added there reaches this recipe too.
      env=rough.env,
      reward=rough.reward,
      network=dataclasses.replace(gpu.network,
                                  scan_encoder_sizes=rough.network.scan_encoder_sizes),
      families=dataclasses.replace(gpu.families, spawn_offset=rough.families.spawn_offset,
                                   num_train_families=1024),
      panel=dataclasses.replace(gpu.panel, strata=rough.panel.strata),
      total_env_steps=600_000_000,
  )
