"""Head-to-head: our fused training chunk against Brax PPO on the same env and batch geometry.

  pip install -e '.[bench]'   # brax==0.14.2, the optional `bench` extra; never a runtime dependency
  python experiments/measurements/bench_vs_brax.py --num_envs=512 --unroll_length=24 \
      --num_minibatches=4 --num_epochs=5 --repeats=5

Both trainers learn on the same `mjx_walk.sim.env.LocomotionEnv`: the same families (env i in
training family i % F, drawn by `families.make_manifest` as `mjx_walk.learn.trainer` does), the same
observations (Brax's policy reads the policy obs, its value net the privileged critic obs), the
same network sizes and activation, a Gaussian policy with a learned state-independent log std,
the same PPO hyperparameters (adaptive-KL learning rate included), and the same geometry: N envs,
T control steps per update, M minibatches, E epochs. Brax collects batch_size * num_minibatches
unrolls of T per update; with batch_size = N / M that is one unroll per env per update, as ours.

`BraxEnv` wraps our env in `brax.envs.base.Env`: its `reset(rng)` and `step(state, action)` are
batched (vmapped), because Brax PPO runs with `wrap_env=False` so that Brax's episode and
auto-reset wrappers are not stacked on our own auto-reset. The Brax `State` carries our batched
`EnvState` as `pipeline_state` (the per-env `FamilyParams` ride in `EnvState.family`), the dict
obs {"state": policy obs, "privileged_state": critic obs}, `done` = terminated | truncated and
`info["truncation"]` = truncated. Brax masks truncated steps out of its GAE
(`bootstrap_on_timeout=False`, its default) where ours bootstraps them from the final obs.

The work per update is alike, not identical. Ours evaluates V(obs) and V(final obs) at every
rollout step and runs its batch audits (`mjx_walk.learn.audit`) on every update; Brax's rollout runs
the policy only, and its loss evaluates the values and recomputes GAE on each minibatch of whole
per-env unrolls (ours shuffles single samples after one GAE pass).

Timing, side by side: Brax's train loop runs R + 1 training epochs of K = --updates_per_chunk PPO
updates each (`num_evals` = R + 2, evaluation off with `run_evals=False`) and calls `progress_fn`
after each. Each call runs and times one of our compiled chunks of the same K updates, so the two
alternate: Brax epoch, our chunk, Brax epoch, our chunk, ... Brax's first epoch compiles and is
dropped. Figures are env (control) steps per second, the median over the R timed rounds:
  brax_sps         Brax's own `training/sps`: the epoch's steps over the time of its pmapped
                   training_epoch call (no evaluation, no host loop work)
  brax_sps_wall    the epoch's steps over the wall-clock between two `progress_fn` calls, less the
                   time our chunk took inside the first of them (includes Brax's host loop)
  ours_sps         our chunk's steps over its wall-clock (one jitted call, results ready)
  ours_over_brax = ours_sps / brax_sps; ours_over_brax_rounds holds the ratio of each round
                   (its two figures were measured back to back) and _round_median their median.
Compile: ours_compile_s is the chunk's lower + compile; brax_first_epoch_s is Brax's first
training epoch (compile plus one epoch's work) and brax_compile_s that less the median epoch;
brax_xla_compile_s is XLA's compile time alone in Brax's `train` up to its first epoch's end
(env reset, evaluator reset, training epoch); brax_train_call_s is Brax's whole `train` call
(env reset, setup, every epoch) less our chunks. xla_compile_s_in_timed_rounds should be ~0: a
compile inside a timed round (a warning on stderr) would make its figures meaningless.

Brax 0.14.2 calls `jax.device_put_replicated`, which jax 0.10 removed; a stand-in is installed
before Brax is imported. Progress goes to stderr; stdout holds the ONE JSON line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import statistics
import sys
import time

from absl import app
from absl import flags
from flax import linen
import jax
import jax.numpy as jnp
import numpy as np

# mujoco.mjx prints its failed import of the optional `warp` backend to stdout; keep stdout for
# the JSON line. Later imports of mujoco.mjx (ours, Brax's) find the module already loaded.
with contextlib.redirect_stdout(sys.stderr):
  pass  # pylint: disable=g-import-not-at-top,unused-import

from mjx_walk import config as config_lib
from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.sim import env as env_lib
from mjx_walk.sim import env_state
from mjx_walk.sim import families

_BRAX_PMAP_AXIS = "i"
"""`brax.training.agents.ppo.train._PMAP_AXIS_NAME`, checked after the import below."""


def _device_put_replicated(x, devices):
  """Stand-in for `jax.device_put_replicated`, removed in jax 0.10: every leaf stacked along a new
  leading device axis of size len(devices), shard d on devices[d], which is what Brax's pmapped
  loop and its `_unpmap` (shard 0, axis 0 squeezed) expect.

  The arrays are laid out exactly as Brax's pmapped training epoch returns them: a NamedSharding
  over a mesh whose one axis is named after Brax's pmap axis. Any other layout (another mesh axis
  name, or one device's plain array) is a different input sharding to the pmapped epoch, and its
  second call compiles the whole epoch again (measured: 30 to 70 s on 2 cores), which would land
  in the first timed round.
  """
  devices = list(devices)
  mesh = jax.sharding.Mesh(np.array(devices), (_BRAX_PMAP_AXIS,))
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(_BRAX_PMAP_AXIS))
  return jax.tree.map(
      lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices)), sharding), x)


if not hasattr(jax, "device_put_replicated"):
  jax.device_put_replicated = _device_put_replicated

import brax  # pylint: disable=g-import-not-at-top,wrong-import-position
from brax.envs import base as brax_base  # pylint: disable=g-import-not-at-top,wrong-import-position
from brax.training.agents.ppo import networks as ppo_networks  # pylint: disable=g-import-not-at-top,wrong-import-position
from brax.training.agents.ppo import train as ppo_train  # pylint: disable=g-import-not-at-top,wrong-import-position

assert ppo_train._PMAP_AXIS_NAME == _BRAX_PMAP_AXIS, ppo_train._PMAP_AXIS_NAME  # pylint: disable=protected-access

_NUM_ENVS = flags.DEFINE_integer("num_envs", 512, "Parallel envs N, both trainers.")
_UNROLL = flags.DEFINE_integer("unroll_length", 24, "Control steps per env per update T.")
_MINIBATCHES = flags.DEFINE_integer("num_minibatches", 4, "Minibatches per epoch M.")
_EPOCHS = flags.DEFINE_integer("num_epochs", 5, "Epochs per update E.")
_UPDATES = flags.DEFINE_integer(
    "updates_per_chunk", 4, "PPO updates per timed round: our chunk and one Brax training epoch.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed rounds R; medians are reported.")
_CONFIG = flags.DEFINE_string("config", None, "Optional config file; defaults to the CPU default.")


def _log(message: str) -> None:
  print(f"[bench_vs_brax] {message}", file=sys.stderr, flush=True)


_XLA_COMPILE_S = [0.0]
"""Seconds XLA has spent compiling so far in this process (jax.monitoring's backend compile
events): tells whether a compile landed inside a timed round."""


def _on_event_duration(event: str, duration: float, **kwargs) -> None:
  del kwargs
  if event == "/jax/core/compile/backend_compile_duration":
    _XLA_COMPILE_S[0] += duration


class BraxEnv(brax_base.Env):
  """Our `LocomotionEnv` behind Brax's `Env` interface, batched over a leading env axis.

  `reset(rng)` takes keys [n, 2] and resets n envs, env i in training family i % F of
  `train_params`, with episode clocks staggered as `mjx_walk.learn.trainer` does; `step` steps
  all of them, our env auto-resetting finished ones in place.
  """

  def __init__(self, env: env_lib.LocomotionEnv, train_params: families.FamilyParams):
    self._env = env
    self._train_params = train_params
    spec = env.observation_spec()
    self._obs_size = {"state": spec["policy"].shape, "privileged_state": spec["critic"].shape}

  def _to_brax(self, s: env_state.EnvState) -> brax_base.State:
    done = s.terminated | s.truncated
    return brax_base.State(
        pipeline_state=s,
        obs={"state": s.obs["policy"], "privileged_state": s.obs["critic"]},
        reward=s.reward,
        done=done.astype(jnp.float32),
        metrics={},
        info={
            "truncation": s.truncated.astype(jnp.float32),
            # Read by Brax's rollout (extra_fields) and its evaluator; filled from our metrics.
            "episode_done": done.astype(jnp.float32),
            "episode_metrics": {"sum_reward": s.metrics["episode/return"],
                                "length": s.metrics["episode/length"]},
            "steps": s.task.step.astype(jnp.float32),
        },
    )

  def reset(self, rng: jax.Array) -> brax_base.State:
    n = rng.shape[0]
    env_families = families.for_envs(self._train_params, n)  # leaves [n, ...]
    state = jax.vmap(self._env.reset)(rng, env_families)
    start = jax.random.randint(
        jax.random.fold_in(rng[0], 1), (n,), 0, self._env.episode_steps)  # [n]
    state = state.replace(task=state.task.replace(step=start))
    return self._to_brax(state)

  def step(self, state: brax_base.State, action: jax.Array) -> brax_base.State:
    return self._to_brax(jax.vmap(self._env.step)(state.pipeline_state, action))

  @property
  def observation_size(self):
    return self._obs_size

  @property
  def action_size(self) -> int:
    return self._env.action_size

  @property
  def backend(self) -> str:
    return "mjx"


def main(argv):
  del argv
  cfg = config_lib.load_file(_CONFIG.value) if _CONFIG.value else config_lib.default()
  cfg.num_envs, cfg.unroll_length = _NUM_ENVS.value, _UNROLL.value
  cfg.ppo.num_minibatches, cfg.ppo.num_epochs = _MINIBATCHES.value, _EPOCHS.value
  cfg.updates_per_chunk = _UPDATES.value
  config_lib.validate(cfg)
  n, t, m, e, k = (cfg.num_envs, cfg.unroll_length, cfg.ppo.num_minibatches,
                   cfg.ppo.num_epochs, cfg.updates_per_chunk)
  repeats = _REPEATS.value
  steps_per_round = n * t * k
  net, ppo = cfg.network, cfg.ppo

  # OURS: build, compile, warm up.
  trainer = trainer_lib.make_trainer(cfg)
  carry = trainer.init(jax.random.key(cfg.seed))
  jax.block_until_ready(carry)
  start = time.perf_counter()
  chunk = trainer.train_chunk.lower(carry).compile()
  ours_compile_s = time.perf_counter() - start
  start = time.perf_counter()
  carry, metrics = chunk(carry)
  jax.block_until_ready(metrics)
  ours_first_chunk_s = time.perf_counter() - start
  _log(f"ours: compile {ours_compile_s:.1f} s, first chunk {ours_first_chunk_s:.1f} s")

  # BRAX on the same env and families.
  manifest = families.make_manifest(cfg)
  brax_env = BraxEnv(trainer.env, manifest.train_params())
  network_factory = functools.partial(
      ppo_networks.make_ppo_networks,
      policy_hidden_layer_sizes=tuple(net.actor_hidden_sizes),
      value_hidden_layer_sizes=tuple(net.critic_hidden_sizes),
      activation=getattr(linen, net.activation),
      policy_obs_key="state",
      value_obs_key="privileged_state",
      distribution_type="normal",
      noise_std_type="log",
      init_noise_std=net.init_std,
  )

  rounds = {"brax": [], "brax_wall": [], "ours": []}
  calls = []  # (wall time at the call, seconds our chunk took inside it, Brax's training/sps)
  state = {"carry": carry}
  compiled = {"last": 0.0, "brax_setup": 0.0, "timed_rounds": 0.0}

  def progress_fn(step, brax_metrics):
    arrived = time.perf_counter()
    sps = float(brax_metrics["training/sps"])
    brax_compile = _XLA_COMPILE_S[0] - compiled["last"]
    # Our chunk, right after Brax's epoch.
    begin = time.perf_counter()
    state["carry"], ours_metrics = chunk(state["carry"])
    jax.block_until_ready(ours_metrics)
    ours_s = time.perf_counter() - begin
    ours_compile = _XLA_COMPILE_S[0] - compiled["last"] - brax_compile
    compiled["last"] = _XLA_COMPILE_S[0]
    calls.append((arrived, ours_s, sps))
    index = len(calls) - 1
    if index == 0:
      compiled["brax_setup"] = brax_compile
      _log(f"brax: first epoch (compile) {steps_per_round / sps:.1f} s; "
           f"ours {steps_per_round / ours_s:.0f} sps (not counted)")
      return
    compiled["timed_rounds"] += brax_compile + ours_compile
    if brax_compile + ours_compile > 1.0:
      _log(f"WARNING: XLA compiled for {brax_compile:.1f} s (Brax) + {ours_compile:.1f} s (ours) "
           "inside this timed round; its figures include compilation")
    wall = (arrived - calls[index - 1][0]) - calls[index - 1][1]
    rounds["brax"].append(sps)
    rounds["brax_wall"].append(steps_per_round / wall)
    rounds["ours"].append(steps_per_round / ours_s)
    _log(f"round {index}/{repeats}: brax {sps:.0f} sps (wall {steps_per_round / wall:.0f}), "
         f"ours {steps_per_round / ours_s:.0f} sps, env steps {int(step)}")

  jax.monitoring.register_event_duration_secs_listener(_on_event_duration)
  compiled["last"] = _XLA_COMPILE_S[0]
  brax_start = time.perf_counter()
  ppo_train.train(
      environment=brax_env,
      num_timesteps=(repeats + 1) * steps_per_round,
      wrap_env=False,
      num_envs=n,
      episode_length=trainer.env.episode_steps,  # only sizes Brax's (unused) evaluator
      learning_rate=ppo.learning_rate,
      entropy_cost=ppo.entropy_coef,
      discounting=ppo.gamma,
      unroll_length=t,
      batch_size=n // m,
      num_minibatches=m,
      num_updates_per_batch=e,
      normalize_observations=ppo.normalize_observations,
      clipping_epsilon=ppo.clip_eps,
      gae_lambda=ppo.gae_lambda,
      max_grad_norm=ppo.max_grad_norm,
      vf_loss_coefficient=ppo.value_coef,
      desired_kl=ppo.desired_kl,
      learning_rate_schedule="ADAPTIVE_KL" if ppo.desired_kl > 0 else None,
      network_factory=network_factory,
      seed=cfg.seed,
      num_evals=repeats + 2,
      run_evals=False,
      num_eval_envs=16,  # Brax builds (and resets) its evaluator even with run_evals=False
      progress_fn=progress_fn,
  )
  brax_total_s = time.perf_counter() - brax_start
  if len(rounds["ours"]) != repeats:
    raise RuntimeError(f"expected {repeats} timed rounds, got {len(rounds['ours'])}")

  ours_sps = statistics.median(rounds["ours"])
  brax_sps = statistics.median(rounds["brax"])
  brax_first_epoch_s = steps_per_round / calls[0][2]
  ratios = [a / b for a, b in zip(rounds["ours"], rounds["brax"])]
  print(json.dumps({
      "num_envs": n,
      "unroll_length": t,
      "num_minibatches": m,
      "num_epochs": e,
      "updates_per_round": k,
      "env_steps_per_round": steps_per_round,
      "actor_hidden_sizes": list(net.actor_hidden_sizes),
      "critic_hidden_sizes": list(net.critic_hidden_sizes),
      "activation": net.activation,
      "brax_batch_size": n // m,
      "brax_obs": "dict: state=policy obs, privileged_state=critic obs",
      "device": jax.devices()[0].device_kind,
      "ours_sps": round(ours_sps),
      "brax_sps": round(brax_sps),
      "brax_sps_wall": round(statistics.median(rounds["brax_wall"])),
      "ours_over_brax": round(ours_sps / brax_sps, 3),
      "ours_over_brax_rounds": [round(r, 3) for r in ratios],
      "ours_over_brax_round_median": round(statistics.median(ratios), 3),
      "ours_sps_rounds": [round(x) for x in rounds["ours"]],
      "brax_sps_rounds": [round(x) for x in rounds["brax"]],
      "ours_compile_s": round(ours_compile_s, 1),
      "ours_first_chunk_s": round(ours_first_chunk_s, 1),
      "brax_first_epoch_s": round(brax_first_epoch_s, 1),
      "brax_compile_s": round(brax_first_epoch_s - steps_per_round / brax_sps, 1),
      "brax_xla_compile_s": round(compiled["brax_setup"], 1),
      "xla_compile_s_in_timed_rounds": round(compiled["timed_rounds"], 2),
      "brax_train_call_s": round(brax_total_s - sum(c[1] for c in calls), 1),
      "repeats": repeats,
      "versions": {"jax": jax.__version__, "brax": brax.__version__},
  }))


if __name__ == "__main__":
  app.run(main)
