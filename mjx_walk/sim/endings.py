"""Why an episode ends: the reset reasons and the termination rules, as pure functions of arrays.

`ResetReason` is the one vocabulary of episode ends: the env's `reset_reason`, the ledger's
`reset/<label>` keys, the panel's reset counts and the trace files all use it. `end_reason`
judges one control step from what was measured at its end (trunk height and tilt above the
ground, joint angles, which body geoms touch the ground, finiteness, the step count); the MJX
env and the C MuJoCo replay (`mjx_walk.deploy.sim2sim`) both call it, so the two simulators end
episodes by the same rules.
"""

from __future__ import annotations

import dataclasses
import enum

import jax
import jax.numpy as jnp
import numpy as np

from mjx_walk import config as config_lib


class ResetReason(enum.IntEnum):
  """Why an episode ended. NONE means it did not end on this step."""

  NONE = 0
  FALL = 1
  TIMEOUT = 2
  JOINT_LIMIT = 3
  BODY_CONTACT = 4
  NONFINITE = 5

  @property
  def label(self) -> str:
    """The reason's name in ledgers, evaluation records and trace files: "fall", "timeout"."""
    return self.name.lower()


ENDINGS: tuple[ResetReason, ...] = tuple(r for r in ResetReason if r != ResetReason.NONE)
"""Every reason an episode ends, in code order (code r + 1 is `ENDINGS[r]`)."""
REASON_NAMES: tuple[str, ...] = tuple(r.label for r in ENDINGS)
"""The labels of `ENDINGS`: the `reset/<name>` ledger keys and the evaluation's reset counts."""
TERMINATION_NAMES: tuple[str, ...] = tuple(
    r.label for r in ENDINGS if r != ResetReason.TIMEOUT)
"""The endings that are terminations (no bootstrap): every one but the time limit."""


@dataclasses.dataclass(frozen=True)
class Rules:
  """The termination rules of one env config and robot (static: closed over under jit)."""

  env: config_lib.EnvConfig
  """`fall_height`, `fall_tilt_degrees`, `terminate_on_joint_limit` and `joint_limit_margin` are
  read (`terminate_on_body_contact` and `limb_contact_ends` through `ending_touches`)."""
  ending_touches: np.ndarray
  """bool [K]: which of the robot's body-contact geoms (`Robot.body_contact_geom_ids`) end the
  episode by touching the ground."""
  joint_lower: jax.Array
  """float32 [A]: the actuated joints' lower limits, rad."""
  joint_upper: jax.Array
  """float32 [A]: their upper limits, rad."""
  episode_steps: int
  """Control steps of an episode; the step that reaches it times out."""

  @classmethod
  def of(cls, env: config_lib.EnvConfig, joint_lower: jax.Array, joint_upper: jax.Array,
         limb_contact: np.ndarray) -> Rules:
    """The rules of `env` for a robot whose body-contact geoms are limbs where `limb_contact`
    (bool [K], `Robot.limb_contact`)."""
    ending = (~np.asarray(limb_contact)) | env.limb_contact_ends
    ending = ending & env.terminate_on_body_contact
    ending.setflags(write=False)
    return cls(env=env, ending_touches=ending, joint_lower=joint_lower, joint_upper=joint_upper,
               episode_steps=round(env.episode_seconds * env.control_hz))


def end_reason(rules: Rules, trunk_height: jax.Array, floor_normal: jax.Array,
               joint_pos: jax.Array, body_touches: jax.Array, finite: jax.Array,
               step: jax.Array) -> jax.Array:
  """Why a step ends the episode. int32 [], a `ResetReason` (NONE if it goes on).

  The first matching reason wins, so a diverged state is reported as `nonfinite` even if it
  also "fell". Height and tilt are measured from the floor, whatever the direction of gravity.

  Args:
    rules: the env's rules.
    trunk_height: float32 [], the trunk origin's height above the ground (`ground.trunk_height`), m.
    floor_normal: float32 [3], the floor's normal in the trunk frame.
    joint_pos: float32 [A], the actuated joint angles, rad.
    body_touches: bool [K], which body-contact geoms touch the ground; those of
      `rules.ending_touches` end the episode.
    finite: bool [], the physics state stayed finite.
    step: int32 [], control steps taken before this one in the episode.
  """
  env = rules.env
  fell = (trunk_height < env.fall_height) | (
      floor_normal[2] < np.cos(np.deg2rad(env.fall_tilt_degrees)))
  body_contact = (body_touches & rules.ending_touches).any()
  at_limit = jnp.zeros((), bool)
  if env.terminate_on_joint_limit:
    margin = env.joint_limit_margin
    at_limit = ((joint_pos < rules.joint_lower + margin) |
                (joint_pos > rules.joint_upper - margin)).any()
  timeout = step + 1 >= rules.episode_steps
  return jnp.select(
      [~finite, fell, body_contact, at_limit, timeout],
      [ResetReason.NONFINITE, ResetReason.FALL, ResetReason.BODY_CONTACT,
       ResetReason.JOINT_LIMIT, ResetReason.TIMEOUT],
      ResetReason.NONE,
  ).astype(jnp.int32)
