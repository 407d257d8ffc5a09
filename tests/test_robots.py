"""Tests for mjx_walk.sim.robots: the Go2 model's specifications, name resolution and load errors."""

import dataclasses
import pathlib

import chex
import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx
import numpy as np
import pytest

from mjx_walk.sim import robots

LEGS = ("FR", "FL", "RR", "RL")
SEGMENT = 0.213  # Go2 thigh and calf length, m


@pytest.fixture(scope="module")
def go2() -> robots.Robot:
  return robots.load("go2")


def _spec_with(**changes) -> robots.RobotSpec:
  return dataclasses.replace(robots.ROBOT_SPECS["go2"], **changes)


# GO2 SPECIFICATIONS


def test_go2_shapes_and_order(go2: robots.Robot):
  m = go2.mj_model
  assert go2.num_actions == m.nu == 12
  assert go2.joint_names == tuple(
      f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf"))
  actuator_names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(m.nu)]
  assert actuator_names == [n.removesuffix("_joint") for n in go2.joint_names]
  chex.assert_shape([go2.default_pose, go2.joint_lower, go2.joint_upper, go2.torque_limits,
                     go2.qpos_joint_adr, go2.qvel_joint_adr], (12,))
  chex.assert_shape(go2.init_qpos, (m.nq,))
  chex.assert_shape(go2.foot_geom_ids, (4,))
  chex.assert_shape(go2.body_contact_geom_ids, (len(go2.spec.body_contact_geoms),))
  # The hips in the trunk's frame: 0.1934 m fore and aft, 0.0465 m to each side (the MJCF's).
  np.testing.assert_allclose(go2.hip_offsets, [[0.1934, -0.0465, 0.0], [0.1934, 0.0465, 0.0],
                                               [-0.1934, -0.0465, 0.0], [-0.1934, 0.0465, 0.0]])
  assert m.nq == 19 and m.nv == 18  # free joint + 12 hinges


def test_go2_arrays_are_read_only(go2: robots.Robot):
  with pytest.raises(ValueError):
    go2.default_pose[0] = 1.0


def test_go2_mass(go2: robots.Robot):
  assert 14.0 <= mujoco.mj_getTotalmass(go2.mj_model) <= 16.0


def test_go2_leg_segment_lengths(go2: robots.Robot):
  m = go2.mj_model
  for leg in LEGS:
    calf = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{leg}_calf")
    foot = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"{leg}_foot")
    # The calf body sits at the knee, in the thigh frame; the foot sphere at the toe, in the calf's.
    np.testing.assert_allclose(np.linalg.norm(m.body_pos[calf]), SEGMENT, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(m.geom_pos[foot]), SEGMENT, atol=1e-6)
    np.testing.assert_allclose(m.geom_size[foot, 0], 0.022, atol=1e-6)


def test_go2_torque_limits_and_ranges(go2: robots.Robot):
  np.testing.assert_allclose(go2.torque_limits, np.tile([23.7, 23.7, 45.43], 4))
  np.testing.assert_allclose(go2.mj_model.actuator_forcerange[:, 0], -go2.torque_limits)
  np.testing.assert_allclose(go2.joint_lower[[0, 2]], [-1.0472, -2.7227])
  np.testing.assert_allclose(go2.joint_upper[[1, 7]], [3.4907, 4.5379])  # front, rear thigh
  # Position targets may span exactly the joint range.
  np.testing.assert_allclose(go2.mj_model.actuator_ctrlrange,
                             np.stack([go2.joint_lower, go2.joint_upper], axis=1))


def test_go2_home_pose(go2: robots.Robot):
  assert np.all(go2.joint_lower <= go2.default_pose)
  assert np.all(go2.default_pose <= go2.joint_upper)
  np.testing.assert_allclose(go2.default_pose, np.tile([0.0, 0.9, -1.8], 4))
  key = mujoco.mj_name2id(go2.mj_model, mujoco.mjtObj.mjOBJ_KEY, go2.spec.home_keyframe)
  np.testing.assert_allclose(go2.mj_model.key_ctrl[key], go2.default_pose)
  np.testing.assert_allclose(go2.init_qpos[go2.qpos_joint_adr], go2.default_pose)
  assert 0.27 <= go2.init_qpos[2] <= 0.30


def test_go2_gains_match_spec(go2: robots.Robot):
  m = go2.mj_model
  np.testing.assert_allclose(m.actuator_gainprm[:, 0], go2.spec.kp)
  np.testing.assert_allclose(m.dof_damping[go2.qvel_joint_adr], go2.spec.kd)


# NAME RESOLUTION


def test_ids_resolve_to_their_names(go2: robots.Robot):
  m, spec = go2.mj_model, go2.spec
  name = lambda obj, i: mujoco.mj_id2name(m, obj, int(i))
  assert name(mujoco.mjtObj.mjOBJ_BODY, go2.trunk_body_id) == spec.trunk_body
  assert name(mujoco.mjtObj.mjOBJ_SITE, go2.imu_site_id) == spec.imu_site
  assert name(mujoco.mjtObj.mjOBJ_GEOM, go2.floor_geom_id) == spec.floor_geom
  assert tuple(name(mujoco.mjtObj.mjOBJ_GEOM, g) for g in go2.foot_geom_ids) == spec.feet
  assert tuple(name(mujoco.mjtObj.mjOBJ_GEOM, g)
               for g in go2.body_contact_geom_ids) == spec.body_contact_geoms
  for joint_name, qadr, vadr in zip(go2.joint_names, go2.qpos_joint_adr, go2.qvel_joint_adr):
    joint = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint_name)
    assert m.jnt_qposadr[joint] == qadr and m.jnt_dofadr[joint] == vadr


def test_only_floor_contacts(go2: robots.Robot):
  """MJX's static contact list holds exactly foot/trunk/thigh vs floor: no self collisions."""
  model = mjx.put_model(go2.mj_model, impl="jax")
  # make_data leaves contact.geom at -1; the collision pass fills in the (static) pair layout.
  collide = jax.jit(lambda d: mjx.collision(model, mjx.kinematics(model, d)))
  data = collide(mjx.make_data(model))
  pairs = {tuple(sorted(p)) for p in np.asarray(data._impl.contact.geom).tolist()}
  wanted = {tuple(sorted((go2.floor_geom_id, int(g))))
            for g in np.concatenate([go2.foot_geom_ids, go2.body_contact_geom_ids])}
  assert pairs == wanted


# ERRORS


def test_unknown_robot_lists_known_robots():
  with pytest.raises(robots.RobotError, match=r"config\.env\.robot='nope' is invalid: known robots are go2\."):
    robots.load("nope")
  assert robots.known_robots() == ("go2",)


def test_missing_file_names_the_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
  missing = tmp_path / "nope.xml"
  with pytest.raises(robots.RobotError, match="not found") as err:
    robots.load_mjcf(missing)
  assert str(missing) in str(err.value)
  # Through the registry too: a spec pointing at a file that is not there.
  monkeypatch.setitem(robots.ROBOT_SPECS, "ghost", _spec_with(scene_file="ghost/scene.xml"))
  with pytest.raises(robots.RobotError, match="ghost/scene.xml"):
    robots.load("ghost")


def test_malformed_mjcf_names_the_file_and_carries_mujocos_message(tmp_path: pathlib.Path):
  bad = tmp_path / "bad.xml"
  bad.write_text("<mujoco><worldbody><geom type='sphere' size='0.1'/></worldbod></mujoco>")
  with pytest.raises(ValueError) as mujoco_err:
    mujoco.MjModel.from_xml_path(str(bad))
  with pytest.raises(robots.RobotError) as err:
    robots.load_mjcf(bad)
  assert str(bad) in str(err.value)
  assert str(mujoco_err.value) in str(err.value)


@pytest.mark.parametrize("changes, message", [
    ({"feet": ("FR_foot", "FL_foot", "RR_foot", "XX_foot")}, "geom 'XX_foot' not found in"),
    ({"trunk_body": "torso"}, "body 'torso' not found in"),
    ({"imu_site": "gyro"}, "site 'gyro' not found in"),
    ({"home_keyframe": "crouch"}, "keyframe 'crouch' not found in"),
    ({"kp": 99.0}, "kp=99.0"),
    ({"kd": 2.0}, "kd=2.0"),
    ({"body_contact_geoms": ("trunk_collision", "floor"), "limb_contact_geoms": ()},
     "geom 'floor' in .* cannot collide"),
    ({"limb_contact_geoms": ("FR_thigh_collision", "FR_foot")},
     r"limb_contact_geoms \['FR_foot'\] of robot 'broken' \(.*\) are not body_contact_geoms"),
    ({"hips": ("FR_hip", "FL_hip", "RR_hip", "XX_hip")}, "body 'XX_hip' not found in"),
    ({"hips": ("FR_hip", "FL_thigh", "RR_hip", "RL_calf")},
     r"hips \['FL_thigh', 'RL_calf'\] of robot 'broken' \(.*\) are not children of 'trunk'"),
])
def test_spec_mismatch_names_element_and_file(changes, message, monkeypatch: pytest.MonkeyPatch):
  monkeypatch.setitem(robots.ROBOT_SPECS, "broken", _spec_with(**changes))
  with pytest.raises(robots.RobotError, match=message) as err:
    robots.load("broken")
  assert "go2/scene.xml" in str(err.value)


# KNEES ON A HEIGHTFIELD

FLAT_FIELD = robots.Heightfield(nodes=21, half_size=2.0, base=0.5)


def _lowered_contacts(robot: robots.Robot, drop: float) -> set[str]:
  """The geoms in contact with the floor, in C MuJoCo, with the home pose lowered by `drop` m."""
  m = robot.mj_model
  d = mujoco.MjData(m)
  d.qpos[:] = robot.init_qpos
  d.qpos[2] -= drop
  mujoco.mj_forward(m, d)
  floor = robot.floor_geom_id
  return {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(g1 if g2 == floor else g2))
          for g1, g2 in d.contact.geom[:d.ncon]}


def test_the_knees_collide_with_a_heightfield_and_exist_only_there(go2: robots.Robot):
  field = robots.load("go2", FLAT_FIELD)
  m = field.mj_model
  names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(g)) for g in field.knee_geom_ids]
  assert names == [f"{leg}_knee" for leg in LEGS]
  for leg, g in zip(LEGS, field.knee_geom_ids):
    assert m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE
    assert m.geom_size[g, 0] == pytest.approx(0.02)
    assert mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[g])) == f"{leg}_calf"
    np.testing.assert_array_equal(m.geom_pos[g], 0.0)  # at the knee joint
  # They add no mass, and the plane's scene has none of them.
  np.testing.assert_allclose(m.body_mass, go2.mj_model.body_mass)
  assert go2.knee_geom_ids.shape == (0,)
  assert mujoco.mj_name2id(go2.mj_model, mujoco.mjtObj.mjOBJ_GEOM, "FR_knee") == -1
  # Kneeling: the home pose lowered until the knees are 1 cm into the ground. On the heightfield
  # the feet and knees touch it, the thighs do not; on the plane the thigh capsules do.
  d = mujoco.MjData(m)
  d.qpos[:] = field.init_qpos
  mujoco.mj_kinematics(m, d)
  knee_height = d.geom_xpos[field.knee_geom_ids, 2].min() - 0.02
  assert _lowered_contacts(field, knee_height + 0.01) == {
      f"{leg}_{part}" for leg in LEGS for part in ("knee", "foot")}
  on_plane = _lowered_contacts(go2, knee_height + 0.01)
  assert {f"{leg}_thigh_collision" for leg in LEGS} <= on_plane
  assert not any("knee" in name for name in on_plane)


def _mjx_contacts(field: robots.Heightfield, qpos: np.ndarray) -> dict[int, tuple]:
  """MJX's contacts of the Go2 on `field` at `qpos`, per contact dimension: (dist [C], the
  geom pairs [C, 2])."""
  model = mjx.put_model(robots.load("go2", field).mj_model, impl="jax")
  # Kinematics and collision only, one small program: no constraint solve to compile.
  collide = jax.jit(lambda data: mjx.collision(model, mjx.kinematics(model, data)))
  data = collide(mjx.make_data(model).replace(qpos=jnp.asarray(qpos)))
  contact = jax.device_get(data._impl.contact)
  return {dim: (np.asarray(contact.dist)[contact.dim == dim],
                np.asarray(contact.geom)[contact.dim == dim]) for dim in (1, 3)}


def test_the_contact_budget_keeps_the_deepest_contacts_of_each_dimension():
  # Catches the budget not reaching MJX (every collider's 4 slots kept), and a budget that keeps
  # the first contacts rather than the deepest. The reference is the unbudgeted collision.
  field = robots.load("go2", FLAT_FIELD)
  m = field.mj_model
  d = mujoco.MjData(m)
  d.qpos[:] = field.init_qpos
  mujoco.mj_kinematics(m, d)
  knee_height = d.geom_xpos[field.knee_geom_ids, 2].min() - 0.02
  # The knees 1 cm into the ground, the trunk pitched 0.08 rad nose down, and the front-right
  # foot just past a sample's line, so that it touches two cells: 7 foot contacts, 3 knee ones.
  qpos = field.init_qpos.copy()
  qpos[2] -= knee_height + 0.01
  qpos[3:7] = [np.cos(0.04), 0.0, np.sin(0.04), 0.0]
  cell = 2 * FLAT_FIELD.half_size / (FLAT_FIELD.nodes - 1)  # 0.2 m
  foot_xy = d.geom_xpos[field.foot_geom_ids[0], :2]
  qpos[:2] += np.round(foot_xy / cell) * cell - foot_xy + [0.0065, 0.0]
  every = _mjx_contacts(FLAT_FIELD, qpos)
  kept = _mjx_contacts(dataclasses.replace(FLAT_FIELD, max_contact_points=4), qpos)
  assert [int((every[dim][0] < 0).sum()) for dim in (1, 3)] == [3, 7]
  for dim in (1, 3):
    dist, geoms = kept[dim]
    chex.assert_shape(dist, (4,))  # 16 slots without the budget
    deepest = np.sort(every[dim][0])[:4]
    chex.assert_trees_all_close(np.sort(dist), deepest, atol=1e-6)
    # Each kept contact that touches is one that touches without the budget.
    touching = {tuple(g) for g in every[dim][1][every[dim][0] < 0]}
    assert {tuple(g) for g in geoms[dist < 0]} <= touching
  # The foot contacts kept are not the first four that touch.
  first = every[3][0][every[3][0] < 0][:4]
  assert np.sort(first)[1] > deepest[1] + 1e-4


def test_a_contact_budget_below_the_feet_is_refused():
  for budget in (1, 3):
    with pytest.raises(robots.RobotError,
                       match=rf"config\.terrain\.max_contact_points={budget} is invalid: it must "
                             r"be 0 \(every contact slot\) or at least the 4 feet of go2"):
      robots.load("go2", dataclasses.replace(FLAT_FIELD, max_contact_points=budget))
  robots.load("go2", dataclasses.replace(FLAT_FIELD, max_contact_points=4))


def test_a_knee_on_a_missing_body_is_refused(monkeypatch: pytest.MonkeyPatch):
  knees = (("FR_knee", "FR_shin"),) + robots.ROBOT_SPECS["go2"].knees[1:]
  monkeypatch.setitem(robots.ROBOT_SPECS, "broken", _spec_with(knees=knees))
  robots.load("broken")  # the plane's scene has no knees
  with pytest.raises(robots.RobotError, match="body 'FR_shin' not found in .*go2/scene.xml"):
    robots.load("broken", FLAT_FIELD)


# STANDING


def test_go2_stands_for_two_seconds_in_mjx(go2: robots.Robot):
  """ctrl = home pose from the home keyframe: 500 steps of 4 ms stay finite and upright."""
  m = go2.mj_model
  steps = round(2.0 / m.opt.timestep)
  assert steps == 500
  model = mjx.put_model(m, impl="jax")
  data = mjx.make_data(model).replace(
      qpos=jnp.asarray(go2.init_qpos), ctrl=jnp.asarray(go2.default_pose))

  @jax.jit
  def rollout(data: mjx.Data) -> tuple[mjx.Data, jax.Array]:
    def body(d: mjx.Data, _) -> tuple[mjx.Data, jax.Array]:
      d = mjx.step(model, d)
      return d, d.xpos[go2.trunk_body_id, 2]  # trunk height
    return jax.lax.scan(body, data, None, length=steps)

  data, heights = rollout(data)  # heights: [steps]
  chex.assert_shape(heights, (steps,))
  chex.assert_tree_all_finite((data.qpos, data.qvel, heights))
  assert float(heights.min()) > 0.2
  # Feet still under the hips (no sliding away or sinking through the floor).
  feet = np.asarray(data.geom_xpos[go2.foot_geom_ids])  # [4, 3]
  np.testing.assert_allclose(np.abs(feet[:, 0]), 0.1934, atol=0.03)
  assert np.all(np.abs(feet[:, 2] - 0.022) < 0.005)

  # MJX must simulate the same model as C MuJoCo (nothing silently unsupported).
  c_data = mujoco.MjData(m)
  mujoco.mj_resetDataKeyframe(m, c_data, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home"))
  mujoco.mj_step(m, c_data, nstep=steps)
  np.testing.assert_allclose(float(heights[-1]), c_data.qpos[2], atol=5e-3)
