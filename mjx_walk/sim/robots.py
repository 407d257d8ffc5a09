"""Robot models: loading `robots/<name>/` MJCF into a `mujoco.MjModel`, name-to-index tables and
per-robot constants (default pose, PD gains, feet, body-contact geoms).

This module owns everything the rest of the package knows about a robot's file. Every id is
resolved by name with `mujoco.mj_name2id`, so nothing downstream hard-codes an index, and every
problem with the file (unknown robot, missing or malformed MJCF, a missing element, gains that
disagree with `RobotSpec`) raises `RobotError` here, before anything is compiled.

Only host-side NumPy/MuJoCo code lives here; `env.py` turns the results into `mjx.Model` and JAX
arrays.
"""

from __future__ import annotations

import dataclasses
import pathlib

import mujoco
import numpy as np

ROBOTS_DIR: pathlib.Path = pathlib.Path(__file__).resolve().parents[2] / "robots"
"""Root of the robot assets; `RobotSpec.scene_file` is relative to it."""


class RobotError(ValueError):
  """A bad robot name, or an MJCF file that is missing, malformed or lacks a required element."""


@dataclasses.dataclass(frozen=True)
class RobotSpec:
  """Per-robot constants that the MJCF alone does not say."""

  scene_file: str
  """Scene MJCF (robot plus floor), relative to `ROBOTS_DIR`."""
  trunk_body: str
  """Body carrying the free joint; base velocity, orientation and payload refer to it."""
  imu_site: str
  """Site at the trunk centre where the policy's IMU-like readings are taken."""
  feet: tuple[str, ...]
  """Foot geom names, order FR, FL, RR, RL."""
  body_contact_geoms: tuple[str, ...]
  """Geoms whose contact with the floor ends an episode (`body_contact` reset reason)."""
  limb_contact_geoms: tuple[str, ...]
  """The limbs among `body_contact_geoms`: with `env.limb_contact_ends` off, their touches cost
  `reward.limb_contact` instead of ending the episode."""
  hips: tuple[str, ...]
  """The legs' root bodies, children of `trunk_body`: the trunk's footprint. On a heightfield its
  height is measured above the mean ground under them (`mjx_walk.sim.ground.trunk_height`)."""
  knees: tuple[tuple[str, str], ...]
  """(geom name, body): a collision sphere at each body's origin, added to the scene with a
  heightfield floor. There the thigh capsules do not collide (`_heightfield_scene`); the knee
  spheres, cheap sphere-heightfield pairs like the feet, keep the legs' lower ends out of the
  ground."""
  knee_radius: float
  """The knee spheres' radius, m."""
  floor_geom: str
  """The ground plane geom."""
  home_keyframe: str
  """Keyframe with the standing pose; its qpos is the reset pose and its joints the default pose."""
  kp: float
  """Position-actuator stiffness, N·m/rad; must equal every actuator's kp in the MJCF."""
  kd: float
  """PD damping, N·m·s/rad. It is the MJCF joint `damping` (applied by MuJoCo to every actuated
  joint, outside the actuator's force clamp), not an actuator `kv`; must equal it."""
  action_scale: float
  """Radians of joint target offset per unit of policy action."""


ROBOT_SPECS: dict[str, RobotSpec] = {
    "go2": RobotSpec(
        scene_file="go2/scene.xml",
        trunk_body="trunk",
        imu_site="imu",
        feet=("FR_foot", "FL_foot", "RR_foot", "RL_foot"),
        body_contact_geoms=(
            "trunk_collision",
            "FR_thigh_collision",
            "FL_thigh_collision",
            "RR_thigh_collision",
            "RL_thigh_collision",
        ),
        limb_contact_geoms=(
            "FR_thigh_collision",
            "FL_thigh_collision",
            "RR_thigh_collision",
            "RL_thigh_collision",
        ),
        hips=("FR_hip", "FL_hip", "RR_hip", "RL_hip"),
        # The knee joints, where the thighs end: the thigh capsule's radius.
        knees=(("FR_knee", "FR_calf"), ("FL_knee", "FL_calf"), ("RR_knee", "RR_calf"),
               ("RL_knee", "RL_calf")),
        knee_radius=0.02,
        floor_geom="floor",
        home_keyframe="home",
        # kp 40: Playground's Go1 recipe (35) scaled by the mass ratio 15.2 / 12.7 kg, so the
        # home pose sags about as much as Go1's; see robots/go2/README.md.
        kp=40.0,
        kd=0.5,
        # 0.25 rad per unit action (legged_gym's Go2 value): one unit is ~10 N·m at kp 40.
        action_scale=0.25,
    ),
}


@dataclasses.dataclass(frozen=True, eq=False)
class Robot:
  """A loaded robot: the compiled model plus every index and constant the env needs.

  Arrays are read-only NumPy arrays; per-joint arrays are in actuator order.
  """

  name: str
  spec: RobotSpec
  xml_path: pathlib.Path
  mj_model: mujoco.MjModel
  joint_names: tuple[str, ...]
  """Names of the actuated joints, in actuator order."""
  default_pose: np.ndarray
  """float [A]: joint angles of the home keyframe, rad."""
  init_qpos: np.ndarray
  """float [nq]: the full home keyframe qpos."""
  joint_lower: np.ndarray
  """float [A]: lower joint limits, rad."""
  joint_upper: np.ndarray
  """float [A]: upper joint limits, rad."""
  torque_limits: np.ndarray
  """float [A]: symmetric actuator force limits, N·m (upper end of `actuator_forcerange`)."""
  qpos_joint_adr: np.ndarray
  """int [A]: qpos addresses of the actuated joints."""
  qvel_joint_adr: np.ndarray
  """int [A]: dof (qvel) addresses of the actuated joints."""
  trunk_body_id: int
  imu_site_id: int
  foot_geom_ids: np.ndarray
  """int [F]: foot geom ids, in `spec.feet` order."""
  body_contact_geom_ids: np.ndarray
  """int [K]: ids of `spec.body_contact_geoms`."""
  limb_contact: np.ndarray
  """bool [K]: which of `body_contact_geom_ids` are limbs (`spec.limb_contact_geoms`)."""
  hip_offsets: np.ndarray
  """float [H, 3]: the origins of `spec.hips` in the trunk frame, m."""
  knee_geom_ids: np.ndarray
  """int [N]: the knee spheres' ids on a heightfield floor (`spec.knees`); empty on the plane."""
  floor_geom_id: int
  heightfield: Heightfield | None = None
  """The shape of the heightfield floor the scene's plane was replaced with; None on the plane."""

  @property
  def num_actions(self) -> int:
    """Number of actuated joints (one position actuator each)."""
    return len(self.joint_names)


def known_robots() -> tuple[str, ...]:
  """Names accepted by `load`, sorted."""
  return tuple(sorted(ROBOT_SPECS))


def load_mjcf(path: pathlib.Path) -> mujoco.MjModel:
  """Compiles one MJCF file.

  Args:
    path: the MJCF file; includes are resolved relative to its folder.

  Returns:
    The compiled model.

  Raises:
    RobotError: the file does not exist, or MuJoCo cannot compile it (the message names the file
      and carries MuJoCo's own error).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise RobotError(f"MJCF file not found: {path}")
  try:
    return mujoco.MjModel.from_xml_path(str(path))
  except ValueError as e:  # MuJoCo reports parse and compile errors as ValueError.
    raise RobotError(f"malformed MJCF {path}: {e}") from e


@dataclasses.dataclass(frozen=True)
class Heightfield:
  """A square heightfield to replace the scene's floor plane with (`mjx_walk.sim.terrain`)."""

  nodes: int
  """Samples along each side."""
  half_size: float
  """It spans [-half_size, half_size] in x and y, m."""
  base: float
  """Depth of its solid base below z = 0, m; every height must stay above -base."""
  max_contact_points: int = 0
  """MJX's contact budget per contact dimension on it (`terrain.max_contact_points`); 0 for
  every slot."""


def _heightfield_scene(path: pathlib.Path, spec: RobotSpec, ground: Heightfield) -> mujoco.MjSpec:
  """The scene with its floor plane turned into a flat heightfield of `ground`'s shape.

  Heights are in metres (vertical scale 1); the env writes each env's heights into the model.
  Only spheres collide with it, the feet and the knees (`RobotSpec.knees`, added here): MJX's
  box- and capsule-heightfield collisions cost more than the rest of a step
  (experiments/README.md, "Terrain"), so the trunk and thighs lose their collision bits and the
  env checks them against the surface itself.
  """
  try:
    scene = mujoco.MjSpec.from_file(str(path))
  except ValueError as e:
    raise RobotError(f"malformed MJCF {path}: {e}") from e
  scene.add_hfield(name="terrain", nrow=ground.nodes, ncol=ground.nodes,
                   size=[ground.half_size, ground.half_size, 1.0, ground.base],
                   userdata=[0.0] * (ground.nodes * ground.nodes))
  if ground.max_contact_points:
    scene.add_numeric(name="max_contact_points", data=[ground.max_contact_points])
  floor = scene.geom(spec.floor_geom)
  if floor is None:
    raise RobotError(f"geom {spec.floor_geom!r} not found in {path}")
  floor.type = mujoco.mjtGeom.mjGEOM_HFIELD
  floor.hfieldname = "terrain"
  for name in spec.body_contact_geoms:
    geom = scene.geom(name)
    if geom is None:
      raise RobotError(f"geom {name!r} not found in {path}")
    geom.contype, geom.conaffinity = 0, 0
  collision = scene.geom(spec.feet[0])
  for name, body_name in spec.knees:
    body = scene.body(body_name)
    if body is None:
      raise RobotError(f"body {body_name!r} not found in {path}")
    body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[spec.knee_radius, 0, 0],
                  contype=collision.contype, conaffinity=collision.conaffinity, condim=1,
                  group=collision.group, density=0.0)
  return scene


def _with_heightfield(path: pathlib.Path, spec: RobotSpec, ground: Heightfield) -> mujoco.MjModel:
  """`_heightfield_scene`, compiled."""
  scene = _heightfield_scene(path, spec, ground)
  try:
    return scene.compile()
  except ValueError as e:
    raise RobotError(f"the scene {path} does not compile with a heightfield floor: {e}") from e


def scene_spec(robot: Robot) -> mujoco.MjSpec:
  """The robot's scene as an editable `mujoco.MjSpec`, with the heightfield floor it was loaded
  with, if any: compiled unchanged, it is `robot.mj_model` (same ids, same heightfield shape, its
  heights all zero). The render model and C MuJoCo's inclined floor start from it."""
  if robot.heightfield is None:
    return mujoco.MjSpec.from_file(str(robot.xml_path))
  return _heightfield_scene(robot.xml_path, robot.spec, robot.heightfield)


def load(name: str, heightfield: Heightfield | None = None) -> Robot:
  """Loads a registered robot and resolves every name in its `RobotSpec`.

  Args:
    name: a key of `ROBOT_SPECS`, e.g. "go2".
    heightfield: the shape of a heightfield floor to replace the scene's plane with, or None
      for the plane.

  Returns:
    The loaded `Robot`.

  Raises:
    RobotError: unknown name, missing or malformed MJCF, a name in the spec that the MJCF lacks,
      or an MJCF that disagrees with the spec (gains, limits, contacts).
  """
  if name not in ROBOT_SPECS:
    raise RobotError(f"config.env.robot={name!r} is invalid: known robots are "
                     f"{', '.join(known_robots())}.")
  spec = ROBOT_SPECS[name]
  path = ROBOTS_DIR / spec.scene_file
  model = load_mjcf(path)
  if heightfield is not None:
    if 0 < heightfield.max_contact_points < len(spec.feet):
      raise RobotError(
          f"config.terrain.max_contact_points={heightfield.max_contact_points} is invalid: it "
          f"must be 0 (every contact slot) or at least the {len(spec.feet)} feet of {name}")
    model = _with_heightfield(path, spec, heightfield)
  ids = _Resolver(model, path)

  trunk_body_id = ids.find(mujoco.mjtObj.mjOBJ_BODY, spec.trunk_body, "body")
  imu_site_id = ids.find(mujoco.mjtObj.mjOBJ_SITE, spec.imu_site, "site")
  floor_geom_id = ids.find(mujoco.mjtObj.mjOBJ_GEOM, spec.floor_geom, "geom")
  foot_geom_ids = np.array(
      [ids.find(mujoco.mjtObj.mjOBJ_GEOM, g, "geom") for g in spec.feet], dtype=int)
  body_contact_geom_ids = np.array(
      [ids.find(mujoco.mjtObj.mjOBJ_GEOM, g, "geom") for g in spec.body_contact_geoms], dtype=int)
  strangers = set(spec.limb_contact_geoms) - set(spec.body_contact_geoms)
  if strangers:
    raise RobotError(f"limb_contact_geoms {sorted(strangers)} of robot {name!r} ({path}) are "
                     f"not body_contact_geoms {list(spec.body_contact_geoms)}")
  limb_contact = np.isin(spec.body_contact_geoms, spec.limb_contact_geoms)
  knees = tuple(g for g, _ in spec.knees) if heightfield else ()
  knee_geom_ids = np.array(
      [ids.find(mujoco.mjtObj.mjOBJ_GEOM, g, "geom") for g in knees], dtype=int)
  key_id = ids.find(mujoco.mjtObj.mjOBJ_KEY, spec.home_keyframe, "keyframe")
  hip_ids = [ids.find(mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in spec.hips]
  strays = [b for b, i in zip(spec.hips, hip_ids) if model.body_parentid[i] != trunk_body_id]
  if strays:
    raise RobotError(f"hips {strays} of robot {name!r} ({path}) are not children of "
                     f"{spec.trunk_body!r}")

  if model.body_jntnum[trunk_body_id] < 1 or (
      model.jnt_type[model.body_jntadr[trunk_body_id]] != mujoco.mjtJoint.mjJNT_FREE):
    raise RobotError(f"body {spec.trunk_body!r} in {path} has no free joint")

  joint_ids = _actuated_joints(model, path)  # [A]
  joint_names = tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joint_ids)
  qpos_joint_adr = model.jnt_qposadr[joint_ids]  # [A]
  qvel_joint_adr = model.jnt_dofadr[joint_ids]  # [A]
  init_qpos = model.key_qpos[key_id].copy()  # [nq]
  default_pose = init_qpos[qpos_joint_adr]  # [A]

  unlimited = [n for n, j in zip(joint_names, joint_ids) if not model.jnt_limited[j]]
  if unlimited:
    raise RobotError(f"actuated joints without limits in {path}: {', '.join(unlimited)}")
  joint_lower, joint_upper = model.jnt_range[joint_ids].T  # [A], [A]
  outside = (default_pose < joint_lower) | (default_pose > joint_upper)
  if outside.any():
    bad = [n for n, o in zip(joint_names, outside) if o]
    raise RobotError(f"keyframe {spec.home_keyframe!r} in {path} is outside the range of {bad}")

  if not model.actuator_forcelimited.all():
    raise RobotError(f"every actuator in {path} needs forcelimited/forcerange (torque limits)")
  torque_limits = model.actuator_forcerange[:, 1].copy()  # [A]

  _check_gains(model, path, spec, qvel_joint_adr)
  checked = spec.feet + knees if heightfield else spec.feet + spec.body_contact_geoms
  checked_ids = [foot_geom_ids, knee_geom_ids] if heightfield else [foot_geom_ids,
                                                                   body_contact_geom_ids]
  for geom_name, geom_id in zip(checked, np.concatenate(checked_ids)):
    if not _collides(model, int(geom_id), floor_geom_id):
      raise RobotError(f"geom {geom_name!r} in {path} cannot collide with {spec.floor_geom!r}")

  return Robot(
      name=name,
      spec=spec,
      xml_path=path,
      mj_model=model,
      joint_names=joint_names,
      default_pose=_frozen(default_pose),
      init_qpos=_frozen(init_qpos),
      joint_lower=_frozen(joint_lower),
      joint_upper=_frozen(joint_upper),
      torque_limits=_frozen(torque_limits),
      qpos_joint_adr=_frozen(qpos_joint_adr),
      qvel_joint_adr=_frozen(qvel_joint_adr),
      trunk_body_id=trunk_body_id,
      imu_site_id=imu_site_id,
      foot_geom_ids=_frozen(foot_geom_ids),
      body_contact_geom_ids=_frozen(body_contact_geom_ids),
      limb_contact=_frozen(limb_contact),
      hip_offsets=_frozen(model.body_pos[hip_ids]),
      knee_geom_ids=_frozen(knee_geom_ids),
      floor_geom_id=floor_geom_id,
      heightfield=heightfield,
  )


class _Resolver:
  """Looks names up in one model and raises a `RobotError` naming the element and file."""

  def __init__(self, model: mujoco.MjModel, path: pathlib.Path):
    self._model = model
    self._path = path

  def find(self, obj: mujoco.mjtObj, name: str, kind: str) -> int:
    idx = mujoco.mj_name2id(self._model, obj, name)
    if idx < 0:
      raise RobotError(f"{kind} {name!r} not found in {self._path}")
    return int(idx)


def _actuated_joints(model: mujoco.MjModel, path: pathlib.Path) -> np.ndarray:
  """Joint ids driven by the actuators, in actuator order (the policy's action order)."""
  if model.nu == 0:
    raise RobotError(f"no actuators in {path}")
  not_joint = model.actuator_trntype != mujoco.mjtTrn.mjTRN_JOINT
  if not_joint.any():
    raise RobotError(f"actuators in {path} must drive joints directly (transmission 'joint')")
  joint_ids = model.actuator_trnid[:, 0].copy()  # [A]
  if len(set(joint_ids.tolist())) != len(joint_ids):
    raise RobotError(f"a joint in {path} is driven by more than one actuator")
  hinge = model.jnt_type[joint_ids] == mujoco.mjtJoint.mjJNT_HINGE
  if not hinge.all():
    raise RobotError(f"actuated joints in {path} must be hinges")
  return joint_ids


def _check_gains(model: mujoco.MjModel, path: pathlib.Path, spec: RobotSpec,
                 dof_adr: np.ndarray) -> None:
  """Fails when the MJCF's PD gains are not the ones `spec` documents.

  A `<position>` actuator compiles to gain kp and bias (0, -kp, -kv); the env's torque reasoning
  (action scale, reward on torques) assumes this form and these values.
  """
  kp = model.actuator_gainprm[:, 0]  # [A]
  bias = model.actuator_biasprm[:, :3]  # [A, 3]
  is_position = (
      (model.actuator_gaintype == mujoco.mjtGain.mjGAIN_FIXED)
      & (model.actuator_biastype == mujoco.mjtBias.mjBIAS_AFFINE)
      & np.isclose(bias[:, 0], 0.0) & np.isclose(bias[:, 1], -kp))
  if not is_position.all():
    raise RobotError(f"every actuator in {path} must be a <position> actuator")
  if not np.allclose(kp, spec.kp):
    raise RobotError(f"actuator kp in {path} ({sorted(set(kp.tolist()))}) must equal "
                     f"RobotSpec kp={spec.kp}")
  if not np.allclose(bias[:, 2], 0.0):
    # Damping belongs on the joints (RobotSpec.kd); an actuator kv would add a second, hidden kd.
    raise RobotError(f"actuators in {path} must have kv=0; put damping on the joints")
  damping = model.dof_damping[dof_adr]  # [A]
  if not np.allclose(damping, spec.kd):
    raise RobotError(f"joint damping in {path} ({sorted(set(damping.tolist()))}) must equal "
                     f"RobotSpec kd={spec.kd}")


def _collides(model: mujoco.MjModel, geom: int, floor: int) -> bool:
  """Whether MuJoCo will generate contacts between `geom` and `floor` (bit filter or <pair>)."""
  bits = (model.geom_contype[geom] & model.geom_conaffinity[floor]) | (
      model.geom_contype[floor] & model.geom_conaffinity[geom])
  pairs = set(zip(model.pair_geom1.tolist(), model.pair_geom2.tolist()))
  return bool(bits) or (geom, floor) in pairs or (floor, geom) in pairs


def _frozen(array: np.ndarray) -> np.ndarray:
  """A read-only copy, so a `Robot` shared between envs cannot be changed in place."""
  array = np.array(array)
  array.setflags(write=False)
  return array
