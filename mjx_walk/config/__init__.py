"""The typed run configuration: one module per section, the whole run in `run.py`.

Everything a run computes is decided by a `TrainConfig`. Each section (`env`, `families`,
`panel`, `terrain`, `scan`, `reward`, `network`, `ppo`, `audit`, `report`, `checkpoint`) has its own
module holding its dataclass, its vocabulary and its own `validate`; `run.py` holds the top
level, the rules that tie sections together, dotted field paths and loading. Everything is
re-exported here, so `config_lib.X` and every dotted `--config.<section>.<field>` path read the
same as before the split.
"""

from mjx_walk.config.audit import AuditConfig
from mjx_walk.config.checkpoint import CheckpointConfig
from mjx_walk.config.commands import CommandRanges
from mjx_walk.config.env import EnvConfig
from mjx_walk.config.families import FamilyConfig
from mjx_walk.config.network import ACTIVATIONS
from mjx_walk.config.network import NetworkConfig
from mjx_walk.config.panel import ALL_STRATA
from mjx_walk.config.panel import PanelConfig
from mjx_walk.config.panel import STAIR_RISERS_CM
from mjx_walk.config.panel import STAIR_STRATA
from mjx_walk.config.panel import STRATA
from mjx_walk.config.panel import TERRAIN_STRATA
from mjx_walk.config.ppo import PPOConfig
from mjx_walk.config.report import ReportConfig
from mjx_walk.config.reward import RewardConfig
from mjx_walk.config.run import computation_changes
from mjx_walk.config.run import default
from mjx_walk.config.run import flat_fields
from mjx_walk.config.run import from_dict
from mjx_walk.config.run import get_field
from mjx_walk.config.run import load_file
from mjx_walk.config.run import MAX_SEEDS
from mjx_walk.config.run import RESUMABLE_FIELDS
from mjx_walk.config.run import set_field
from mjx_walk.config.run import substeps
from mjx_walk.config.run import TrainConfig
from mjx_walk.config.run import validate
from mjx_walk.config.scan import ScanConfig
from mjx_walk.config.terrain import GROUNDS
from mjx_walk.config.terrain import PROMOTION_RULES
from mjx_walk.config.terrain import TERRAIN_TYPES
from mjx_walk.config.terrain import TerrainConfig

__all__ = [
    "ACTIVATIONS", "ALL_STRATA", "AuditConfig", "CheckpointConfig", "CommandRanges",
    "EnvConfig", "FamilyConfig", "GROUNDS", "MAX_SEEDS", "NetworkConfig", "PanelConfig",
    "PPOConfig", "PROMOTION_RULES",
    "RESUMABLE_FIELDS", "ReportConfig", "RewardConfig", "STAIR_RISERS_CM", "STAIR_STRATA",
    "STRATA", "ScanConfig", "TERRAIN_STRATA",
    "TERRAIN_TYPES", "TerrainConfig", "TrainConfig", "computation_changes", "default",
    "flat_fields", "from_dict", "get_field", "load_file", "set_field", "substeps", "validate",
]
