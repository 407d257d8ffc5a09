"""C MuJoCo's options in the second-simulator check (`mjx_walk.deploy.sim2sim`), by name: each
a change to the robot file's options, which are MJX's, to tell the gap one option makes from the
others'."""

import mujoco

SOLVERS = {
    "converged": {"iterations": 100, "ls_iterations": 50, "tolerance": 1e-10},
    "mjx": {},
}
"""C MuJoCo's constraint-solver settings by name: changes to the robot file's options, which are
MJX's (`mjx` changes nothing)."""

CCDS = {"native": 0, "mpr": int(mujoco.mjtDisableBit.mjDSBL_NATIVECCD)}
"""C MuJoCo's penetration depth and normal of convex collisions (the feet and knees on a
heightfield) by name, as the disable flag each adds: MuJoCo's own GJK/EPA (its default), or
libccd's MPR. A sphere sunk into a heightfield more than about half its radius meets the side walls
of the cells' prisms, which EPA often takes as the shortest way out (a horizontal normal) and MPR
less often; MJX takes the cell's top normal instead (experiments/README.md, "What makes it
fall: the cells' side walls")."""
