"""mjx_walk: a JAX-native PPO trainer that teaches quadrupeds to walk in MuJoCo MJX."""

__version__ = "0.1.0"
