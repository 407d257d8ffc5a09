"""The simulation layer: robots, seed families, reward terms and the locomotion env, one env at a
time, in MJX. Imports only `mjx_walk.config` from the package."""
