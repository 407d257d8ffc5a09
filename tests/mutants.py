"""Mutation check: plants known PPO and data-safety bugs in a copy of the repository and runs the tests meant to
catch each one.

  python tests/mutants.py              # every mutant
  python tests/mutants.py kl_mean_log_ratio gae_trace_not_cut_at_done   # some of them

The repository's files as git sees them (`git ls-files`: tracked files and new files that are
not ignored, as they are in the working tree) are copied to a temporary folder. The unmutated
copy runs every selected test first and must pass, or the check means nothing. Then each mutant
replaces one exact snippet of one package file, which must occur exactly once (the script
stops if it does not, so it cannot go stale silently), and runs only its own tests in the copy,
with PYTHONPATH pointing there; a pytest plugin asserts that the tests imported `mjx_walk`
from the copy, not the editable install. A mutant is KILLED when pytest reports failing tests
(exit status 1); any other failure to run (a collection error, say) is an ERROR, never a kill.

Slow tests: pytest runs with `-m ''`, overriding pyproject's `-m 'not slow'`, so a mutant whose
killing test is marked `slow` names that test's node id (or its class) and it runs. A selection
that names a whole file still runs only the file's default-suite tests: the guard plugin
deselects every slow test the selection does not name by node id or class, so that no file
selection pulls in a learning run.

Prints one line per mutant (name, file, KILLED / SURVIVED / ERROR, seconds) and a final JSON
line {"killed": k, "survived": s, "mutants": n}; exits non-zero unless every mutant was killed.
Not collected by pytest (the name does not match test_*.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent

# Test selections, as pytest node ids relative to the repository root.
PPO_LOSS = ("tests/test_ppo.py::PpoLossTest",)
GAE = ("tests/test_ppo.py::GaeTest",)
BOOTSTRAP = ("tests/test_trainer.py::CollectTest",)
ENV_FINAL_OBS = (
    "tests/test_env.py::EnvTest::test_timeout_is_a_truncation_with_true_final_obs",
    *BOOTSTRAP,
)
LR_TIMING = ("tests/test_trainer.py::TrainerTest::test_adapted_rate_applies_to_the_minibatch_it_"
             "was_measured_on",)
RATE_RULE = ("tests/test_trainer.py::TrainerTest::test_the_rate_follows_every_minibatchs_kl",)
GUARD = ("tests/test_trainer.py::TrainerTest::test_divergence_guard_names_what_went_non_finite",)
CHECKSUMS = ("tests/test_checkpoint.py::SaveRestoreTest::test_changed_array_data_is_caught_by_"
             "the_checksum_naming_the_leaf",)
LAYOUT = ("tests/test_checkpoint.py::SaveRestoreTest::test_other_network_sizes_are_refused_"
          "naming_the_field_and_the_leaves",)
RUN_FOLDER = ("tests/test_run_folder.py",)
SCAN_FRAME = ("tests/test_height_scan.py::ScanTest",
              "tests/test_sim2sim.py::HeightScanWorldsTest")
SCAN_WRAP = ("tests/test_height_scan.py::TileEdgeTest",)
SCAN_CRITIC = ("tests/test_height_scan.py::EnvScanTest",)
SCAN_LAYOUT = ("tests/test_height_scan.py::GridTest",)
SCAN_BRANCH = ("tests/test_networks.py::ScanEncoderTest",)
SCAN_BRANCH_EXPORT = ("tests/test_export.py::ScanBranchTest",)
FINITE = ("tests/test_config.py::ValidateTest",)
SCHEDULE = ("tests/test_runner_schedule.py",)
LAYERS = ("tests/test_layers.py",)
SHARDED_STEP = ("tests/test_sharding.py::CollectivesTest::test_an_sgd_step_on_a_split_minibatch_"
                "is_the_step_on_the_whole",)
SHARDED_NORMALIZER = ("tests/test_sharding.py::CollectivesTest::test_normalizer_merges_every_"
                      "devices_moments_exactly",)
SHARDED_ROWS = ("tests/test_sharding.py::CollectivesTest",)
AFTER = ("tests/test_sharding.py::CollectivesTest::test_after_hands_the_tree_back_bitwise_"
         "computed_from_the_loops_output",)
CONFIG = ("tests/test_config.py",)
GAIT_CLEARANCE = ("tests/test_rewards.py::RewardTermsTest",)
SEED_AXIS = ("tests/test_seeds.py::SeedAxisTest",)
SEED_SPREAD = ("tests/test_seeds.py::EvaluateSeedsTest",)
OBSERVATIONS = ("tests/test_observations.py",)
WORLDS = ("tests/test_sim2sim.py::WorldsTest",)
CCD = ("tests/test_sim2sim.py::HeightfieldWorldsTest::test_the_collision_option_reaches_every_"
       "world_and_turns_a_sunk_foots_normals",)
STIFF_CONTACT = ("tests/test_sim2sim.py::HeightfieldWorldsTest::test_a_stiffer_contact_reaches_"
                 "both_simulators_and_every_world",)
SOLVER_ITERATIONS = ("tests/test_sim2sim.py::WorldsTest::test_solver_iterations_reach_mjx_and_"
                     "every_world_under_mjxs_settings",)
GAP_INTERVALS = ("tests/test_sim2sim.py::GapsTest", "tests/test_sim2sim.py::GapIntervalsTest")
SIM2SIM_RECORD = ("tests/test_sim2sim.py::Sim2SimCommandTest::test_writes_the_record_and_prints_"
                  "the_table",)
SIM2SIM_COMMAND = ("tests/test_sim2sim.py::Sim2SimCommandTest::test_c_mujoco_with_mjx_solver_"
                   "settings_agrees_with_mjx",)
EXPORT_PARITY = ("tests/test_export.py::ExportCommandTest::test_the_model_matches_the_jax_"
                 "policy_at_batch_sizes_1_2_and_7",)
EXPORT_CLIP = ("tests/test_export.py::ActionClipTest",)
SCALING = ("tests/test_scaling.py",)
TERRAIN_TILES = ("tests/test_terrain.py::TileTest",)
TERRAIN_SURFACE = ("tests/test_terrain.py::SurfaceTest",)
TERRAIN_CURRICULUM = ("tests/test_terrain.py::CurriculumTest",)
TERRAIN_WRAP = ("tests/test_terrain.py::EnvTerrainTest::test_a_robot_one_tile_away_steps_as_on_"
                "the_tile",)
TRUNK_HEIGHT = ("tests/test_ground.py::HeightfieldTest::test_the_trunks_height_is_above_the_"
                "ground_under_its_hips",)
TRUNK_HEIGHT_C = ("tests/test_sim2sim.py::HeightfieldWorldsTest::test_the_trunks_height_on_an_"
                  "inclined_floor_reads_the_hips_in_the_floors_frame",)
TERRAIN_FAMILIES = ("tests/test_terrain.py::FamiliesTest",)
TERRAIN_RESET = ("tests/test_terrain.py::EnvTerrainTest::test_an_auto_reset_moves_the_level_by_"
                 "how_far_the_episode_went",
                 "tests/test_terrain.py::EnvTerrainTest::test_an_auto_reset_judges_a_command_"
                 "that_cannot_reach_2_m_by_what_it_walked")
PANEL_HASH = ("tests/test_terrain.py::FamiliesTest::test_the_manifest_is_a_pure_function_of_the_"
              "config_and_round_trips",
              "tests/test_ledger.py::test_cli_compares_runs_whose_manifests_hash_to_one_panel_today",
              "tests/test_ledger.py::test_cli_refuses_runs_whose_manifests_hash_to_two_panels")
PRE_SIGNALS = ("tests/test_checkpoint.py::ResumeTest::test_a_run_saved_before_the_typed_env_"
               "signals_restores_and_resumes_bit_for_bit",)
FIRST_UPDATE_AUDIT = ("tests/test_trainer.py::CollectTest::test_the_audit_counts_the_rollouts_"
                      "contacts_resets_and_families",)
TRUNCATE = ("tests/test_ledger.py::TestTruncateAfter",
            "tests/test_checkpoint.py::ResumeTest::test_two_plus_two_equals_four")
RAW_OBSERVATIONS = ("tests/test_trainer.py::RawObservationTest",)
TWO_CHUNKS = ("tests/test_trainer.py::TrainerTest::test_two_chunks",)
EVALUATE_CHECKPOINT = ("tests/test_checkpoint.py::SaveRestoreTest::test_evaluate_a_checkpoint",)
# Code paths that had no mutant: the curriculum's demotion and clip, the ONNX metadata, sim2sim's
# pushes, delay and payload, the ledger's format, the checkpoint keep policy, the env's
# termination rules, the panel's success thresholds and the KL averaged over devices.
EXPORT_METADATA = ("tests/test_export.py::ExportCommandTest::test_the_metadata_holds_the_robot_"
                   "and_config_values",)
SIM2SIM_ACTUATORS = ("tests/test_sim2sim.py::WorldsTest::test_the_actuators_get_the_delayed_"
                     "targets_and_the_trunk_its_pushes",)
SIM2SIM_PAYLOAD = ("tests/test_sim2sim.py::WorldsTest::test_the_payload_moves_the_trunks_centre_"
                   "of_mass",)
LEDGER_FORMAT = ("tests/test_ledger.py::test_nan_and_inf_are_written_as_null",
                 "tests/test_ledger.py::test_write_refuses_a_bad_kind",
                 "tests/test_ledger.py::LedgerFormatTest")
REWIND = ("tests/test_ledger.py::TestTruncateAfter",)
CHECKPOINT_KEEP = ("tests/test_checkpoint.py::KeepPolicyTest",)
ENDINGS = ("tests/test_endings.py",)
ENV_TERMINATION = (  # all on the quiet env: one compiled step
    "tests/test_env.py::EnvTest::test_timeout_is_a_truncation_with_true_final_obs",
    "tests/test_env.py::EnvTest::test_joint_limit",
    "tests/test_env.py::EnvTest::test_fall_by_tilt_and_body_contact",
)
PANEL_SUCCESS = ("tests/test_evaluate.py::SummarizeTest",
                 "tests/test_evaluate.py::SuccessThresholdsTest")
SHARDED_KL = ("tests/test_sharding.py::KlAcrossDevicesTest",)
EXPORT_ACTIVATIONS = ("tests/test_export.py::GraphTest::test_every_activation_matches_the_jax_"
                      "policy",)
EXPORT_NORMALIZER_CLIP = ("tests/test_export.py::GraphTest::test_observations_beyond_the_"
                          "normalizers_clip_match_the_jax_policy",)
CPU_LAPACK = ("tests/test_cpu_lapack.py",)
PARTITIONER = ("tests/test_sharding.py::PartitionerTest",)
DEVICE_CHECK_OUT = ("tests/test_device_check.py::RefusalTest::test_an_out_folder_holding_files_is_"
                    "left_as_it_was",)
DEVICE_CHECK_FLAGS = ("tests/test_device_check.py::RefusalTest::test_flags_it_sets_itself_are_"
                      "refused_for_gpu_check",)
DEVICE_CHECK_CPU = ("tests/test_device_check.py::DeviceCheckOnTheImageStackTest::test_device_"
                    "check_passes_on_the_cpu",)


@dataclasses.dataclass(frozen=True)
class Mutant:
  """One planted bug: `original` (exactly once in `path`) becomes `replacement`."""

  name: str
  path: str
  original: str
  replacement: str
  tests: tuple[str, ...]


MUTANTS = (
    # The clipped surrogate without its pessimistic max.
    Mutant("policy_loss_clipped_only", "mjx_walk/learn/ppo.py",
           "policy_loss = jnp.mean(jnp.maximum(surrogate, surrogate_clipped))",
           "policy_loss = jnp.mean(surrogate_clipped)", PPO_LOSS),
    Mutant("policy_loss_unclipped_only", "mjx_walk/learn/ppo.py",
           "policy_loss = jnp.mean(jnp.maximum(surrogate, surrogate_clipped))",
           "policy_loss = jnp.mean(surrogate)", PPO_LOSS),
    # Advantage normalisation that only centres.
    Mutant("advantages_not_divided_by_std", "mjx_walk/learn/ppo.py",
           "advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)",
           "advantages = advantages - advantages.mean()", PPO_LOSS),
    # The ratio upside down: old over new.
    Mutant("ratio_inverted", "mjx_walk/learn/ppo.py",
           "log_ratio = new_log_probs - batch.log_probs",
           "log_ratio = batch.log_probs - new_log_probs", PPO_LOSS),
    # Wrong approximate-KL estimators.
    Mutant("kl_mean_log_ratio", "mjx_walk/learn/ppo.py",
           "approx_kl = jnp.mean(jax.lax.stop_gradient((ratio - 1.0) - log_ratio))",
           "approx_kl = jnp.mean(jax.lax.stop_gradient(log_ratio))", PPO_LOSS),
    Mutant("kl_mean_neg_log_ratio", "mjx_walk/learn/ppo.py",
           "approx_kl = jnp.mean(jax.lax.stop_gradient((ratio - 1.0) - log_ratio))",
           "approx_kl = jnp.mean(jax.lax.stop_gradient(-log_ratio))", PPO_LOSS),
    Mutant("kl_squared_ratio", "mjx_walk/learn/ppo.py",
           "approx_kl = jnp.mean(jax.lax.stop_gradient((ratio - 1.0) - log_ratio))",
           "approx_kl = jnp.mean(jax.lax.stop_gradient((ratio - 1.0) ** 2))", PPO_LOSS),
    # The value clip dropped, and the entropy bonus turned into a penalty.
    Mutant("value_clip_dropped", "mjx_walk/learn/ppo.py",
           "value_loss = jnp.mean(jnp.maximum(value_error, value_error_clipped))",
           "value_loss = jnp.mean(value_error)", PPO_LOSS),
    Mutant("entropy_bonus_sign", "mjx_walk/learn/ppo.py",
           "total = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy",
           "total = policy_loss + cfg.value_coef * value_loss + cfg.entropy_coef * entropy",
           PPO_LOSS),
    # GAE: the trace runs on across episode ends; a fall bootstraps; a timeout bootstraps from
    # the next episode's first value; the value targets lose the values.
    Mutant("gae_trace_not_cut_at_done", "mjx_walk/learn/ppo.py",
           "advantage = delta + jnp.where(done, 0.0, gamma_lambda * next_advantage)",
           "advantage = delta + gamma_lambda * next_advantage", GAE),
    Mutant("gae_termination_bootstraps", "mjx_walk/learn/ppo.py",
           "next_values = jnp.where(terminated, 0.0, next_values)",
           "next_values = next_values", GAE),
    Mutant("gae_truncation_uses_next_row", "mjx_walk/learn/ppo.py",
           "next_values = jnp.where(truncated, truncation_values, next_values)",
           "next_values = next_values", GAE),
    Mutant("gae_returns_without_values", "mjx_walk/learn/ppo.py",
           "returns = advantages + values  # [T, N]",
           "returns = advantages  # [T, N]", GAE),
    # A timeout bootstrapped from the next episode's first observation: in the trainer, and in
    # the env's final_obs.
    Mutant("bootstrap_from_next_episode", "mjx_walk/learn/trainer.py",
           "final_obs = _normalize(parts, train.normalizer, next_env.final_obs)",
           "final_obs = _normalize(parts, train.normalizer, next_env.obs)", BOOTSTRAP),
    Mutant("env_final_obs_after_reset", "mjx_walk/sim/env.py",  # the plane's auto-reset
           "          obs=_tree_where(done, fresh.obs, final.obs),\n",
           "          obs=_tree_where(done, fresh.obs, final.obs),\n"
           "          final_obs=_tree_where(done, fresh.obs, final.obs),\n",
           ENV_FINAL_OBS),
    # The adapted learning rate applied one minibatch late (set after the optimizer step).
    Mutant("learning_rate_one_minibatch_late", "mjx_walk/learn/trainer.py",
           "    opt_state = ppo.set_learning_rate(opt_state, lr)\n"
           "  updates, opt_state = optimizer.update(grads, opt_state, params)\n",
           "  updates, opt_state = optimizer.update(grads, opt_state, params)\n"
           "  if ppo_cfg.desired_kl > 0:\n"
           "    opt_state = ppo.set_learning_rate(opt_state, lr)\n", LR_TIMING),
    # Each minibatch adapting the initial rate instead of the one the previous minibatch left.
    Mutant("learning_rate_not_carried", "mjx_walk/learn/trainer.py",
           "        ppo.get_learning_rate(opt_state), loss_metrics[\"loss/approx_kl\"], ",
           "        ppo_cfg.learning_rate, loss_metrics[\"loss/approx_kl\"], ", RATE_RULE),
    # Data safety: a divergence guard that never fires, a restore that skips the checksums or
    # the layout check, a run folder taken over, and NaN let through validation.
    Mutant("guard_never_fires", "mjx_walk/learn/guard.py",
           "  return jnp.stack([~_all_finite(watched[name]) for name in GUARDED])",
           "  return jnp.zeros((len(GUARDED),), bool)", GUARD),
    Mutant("checksums_skipped", "mjx_walk/run/checkpoint.py",
           "    elif _sha256(array) != entry[\"sha256\"]:",
           "    elif False:", CHECKSUMS),
    Mutant("layout_unchecked", "mjx_walk/run/checkpoint.py",
           "    if list(want.shape) != got[\"shape\"] or str(want.dtype) != got[\"dtype\"]:",
           "    if False:", LAYOUT),
    Mutant("run_folder_taken_over", "mjx_walk/run/run_folder.py",
           "    if not entries:\n      return\n",
           "    if True:\n      return\n", RUN_FOLDER),
    Mutant("nan_accepted", "mjx_walk/config/run.py",
           "  check_finite(config)\n", "", FINITE),
    # The renovation's structure: the host loop's schedule one chunk late, an upward import, a
    # ledger that loads JAX, the panel's command ranges left unvalidated, and a dotted path set
    # on the wrong section.
    Mutant("schedule_one_chunk_late", "mjx_walk/runner.py",
           "    done = chunk + 1\n", "    done = chunk\n", SCHEDULE),
    Mutant("sim_imports_upward", "mjx_walk/sim/rewards.py",
           "import jax.numpy as jnp\n",
           "import jax.numpy as jnp\n\nfrom mjx_walk.run import ledger  # noqa\n", LAYERS),
    Mutant("ledger_loads_jax", "mjx_walk/run/ledger.py",
           "import numpy as np\n", "import jax  # noqa\nimport numpy as np\n", LAYERS),
    Mutant("panel_commands_unvalidated", "mjx_walk/config/panel.py",
           "  commands.validate(\"panel\", panel)\n", "", CONFIG),
    Mutant("dotted_path_sets_the_top_level", "mjx_walk/config/run.py",
           "    section = getattr(section, part)\n", "", CONFIG),
    # The config package: a section's own checks not called, the cross-section rules skipped.
    Mutant("audit_section_unvalidated", "mjx_walk/config/run.py",
           "  audit_lib.validate(config.audit)\n", "", CONFIG),
    Mutant("cross_section_rules_skipped", "mjx_walk/config/run.py",
           "  _validate_across_sections(config)\n", "", CONFIG),
    # A checkpoint from before the typed signals read with two of its leaves swapped.
    Mutant("pre_signals_leaves_swapped", "mjx_walk/run/checkpoint.py",
           "    \"metrics_audit_contact\": \"signals_contact\",\n"
           "    \"metrics_audit_last_contact\": \"signals_last_contact\",\n",
           "    \"metrics_audit_contact\": \"signals_last_contact\",\n"
           "    \"metrics_audit_last_contact\": \"signals_contact\",\n", PRE_SIGNALS),
    # Leaving the JAX process: the observation turned by the trunk's rotation instead of its
    # inverse; the C MuJoCo slope left a level floor; heights read along world z instead of the
    # floor's normal; a family's draw not copied into its world; the gait clock stopped in the
    # replay; the ONNX model without the normalizer, or without the clip.
    Mutant("observation_rotated_forward", "mjx_walk/sim/observations.py",
           "  w, xyz = quat[..., :1], -quat[..., 1:]\n",
           "  w, xyz = quat[..., :1], quat[..., 1:]\n", OBSERVATIONS),
    Mutant("sim2sim_slope_left_level", "mjx_walk/deploy/sim2sim.py",
           "models[family] = self._nominal if level else self._inclined(rotation)",
           "models[family] = self._nominal", WORLDS),
    Mutant("sim2sim_height_along_world_z", "mjx_walk/deploy/sim2sim.py",
           "np.array([w.rotation[:, 2] @ w.data.qpos[0:3] for w in worlds], np.float32)",
           "np.array([w.data.qpos[2] for w in worlds], np.float32)", WORLDS),
    Mutant("sim2sim_ccd_not_applied", "mjx_walk/deploy/sim2sim.py",
           "    model.opt.disableflags |= self._ccd\n", "",
           CCD),
    Mutant("sim2sim_ccd_replaces_the_robots_flags", "mjx_walk/deploy/sim2sim.py",
           "model.opt.disableflags |= self._ccd", "model.opt.disableflags = self._ccd",
           CCD),
    Mutant("contact_timeconst_not_applied_in_the_env", "mjx_walk/sim/env.py",
           "      mj_model.geom_solref[:, 0] = config.env.contact_timeconst\n",
           "      pass\n", STIFF_CONTACT),
    Mutant("contact_timeconst_as_the_damping_ratio", "mjx_walk/sim/env.py",
           "mj_model.geom_solref[:, 0] = config.env.contact_timeconst",
           "mj_model.geom_solref[:, 1] = config.env.contact_timeconst", STIFF_CONTACT),
    Mutant("sim2sim_contact_not_copied", "mjx_walk/deploy/sim2sim.py",
           "    model.geom_solref[:] = self.env.robot.mj_model.geom_solref",
           "    pass", STIFF_CONTACT),
    Mutant("solver_iterations_not_applied_in_the_env", "mjx_walk/sim/env.py",
           "      mj_model.opt.iterations = config.env.solver_iterations\n",
           "      pass\n", SOLVER_ITERATIONS),
    Mutant("sim2sim_iterations_not_copied", "mjx_walk/deploy/sim2sim.py",
           "    model.opt.iterations = self.env.robot.mj_model.opt.iterations",
           "    pass", SOLVER_ITERATIONS),
    Mutant("solver_iterations_unchecked", "mjx_walk/config/env.py",
           "  if not isinstance(env.solver_iterations, int) or not 0 <= env.solver_iterations <= 100:",
           "  if False:", CONFIG),
    Mutant("contact_timeconst_unchecked_against_the_timestep", "mjx_walk/config/run.py",
           "  env_lib.check_contact_timeconst(config.env, timestep)\n", "", CONFIG),
    Mutant("sim2sim_family_not_applied", "mjx_walk/deploy/sim2sim.py",
           "        getattr(model, name)[:] = values[family]\n",
           "        pass\n", WORLDS),
    Mutant("sim2sim_clock_stopped", "mjx_walk/deploy/sim2sim.py",
           "      gait_phase = np.asarray(self._step_fns[\"clock\"](gait_phase))\n",
           "      gait_phase = np.asarray(gait_phase)\n", SIM2SIM_COMMAND),
    # The gaps' intervals: taken over every stratum's envs, or pairing each env with another
    # env's figures; the verdict reading one end of an interval; the enlarged panel not passed on.
    Mutant("sim2sim_interval_over_every_stratum", "mjx_walk/deploy/gaps.py",
           "    mine = strata == stratum  # [N]\n",
           "    mine = np.ones_like(strata, bool)\n", GAP_INTERVALS),
    Mutant("sim2sim_interval_unpaired", "mjx_walk/deploy/gaps.py",
           "gap = c_figures[key][mine] - mjx_figures[key][mine]",
           "gap = c_figures[key][mine] - np.roll(mjx_figures[key][mine], 1)", GAP_INTERVALS),
    Mutant("sim2sim_verdict_reads_one_end", "mjx_walk/deploy/gaps.py",
           "if any(low > TARGETS[key] or high < -TARGETS[key]", "if any(low > TARGETS[key]",
           GAP_INTERVALS),
    Mutant("sim2sim_envs_per_family_ignored", "mjx_walk/sim2sim.py",
           "_SOLVER.value, _ENVS_PER_FAMILY.value, strata,", "_SOLVER.value, None, strata,",
           SIM2SIM_RECORD),
    Mutant("onnx_without_normalizer", "mjx_walk/deploy/onnx_policy.py",
           "  normalize = pol.config.ppo.normalize_observations\n",
           "  normalize = False\n", EXPORT_PARITY),
    Mutant("onnx_without_clip", "mjx_walk/deploy/onnx_policy.py",
           "  action = g.node(\"Clip\", mean, g.constant(-clip, \"action/low\"), "
           "g.constant(clip, \"action/high\"),\n                  output=OUTPUTS[0])\n",
           "  action = g.node(\"Identity\", mean, output=OUTPUTS[0])\n", EXPORT_CLIP),
    # Data parallelism: gradients not averaged over devices, the normalizer's merge without the
    # spread of the device means, advantages standardised per device, every device stepping the
    # first block of envs, families counted by the device's own env index, and the check of
    # replicated state switched off.
    Mutant("grads_not_averaged", "mjx_walk/learn/trainer.py",
           "  grads, loss_metrics = sharding.mean((grads, loss_metrics), parts.axis_name)\n",
           "  loss_metrics = sharding.mean(loss_metrics, parts.axis_name)\n", SHARDED_STEP),
    Mutant("normalizer_mean_of_variances", "mjx_walk/learn/normalizer.py",
           "    batch_var = jax.lax.pmean(batch_var + jnp.square(device_mean - batch_mean), "
           "axis_name)\n",
           "    batch_var = jax.lax.pmean(batch_var, axis_name)\n", SHARDED_NORMALIZER),
    Mutant("advantages_per_device", "mjx_walk/learn/ppo.py",
           "  if cfg.normalize_advantages and axis_name is not None:\n",
           "  if False:\n", SHARDED_STEP),
    Mutant("every_device_first_block", "mjx_walk/learn/sharding.py",
           "  return jax.lax.dynamic_slice_in_dim(x, first_row(rows, axis_name), rows)\n",
           "  return jax.lax.dynamic_slice_in_dim(x, 0, rows)\n", SHARDED_ROWS),
    Mutant("family_counts_local_index", "mjx_walk/learn/audit.py",
           "  family = (first_env + samples % num_envs) % num_families  # [M, B]\n",
           "  family = (samples % num_envs) % num_families  # [M, B]\n", SHARDED_ROWS),
    Mutant("replicated_check_off", "mjx_walk/learn/sharding.py",
           "  differing = differing_copies(tree)\n", "  differing = []\n",
           ("tests/test_sharding.py::DevicesTest::test_the_train_state_is_the_same_on_every_"
            "device",)),
    # The rollout handed to the metrics' all-reduces before the PPO epochs' collectives are
    # done (the CI stall on 2 forced devices), and `after` letting XLA drop its dependency or
    # changing a NaN-valued loop's tree.
    Mutant("metrics_reduced_beside_the_epochs", "mjx_walk/learn/trainer.py",
           "  traj, early_ends, advantages, returns = sharding.after(  # reduced outside, after "
           "the epochs\n",
           "  traj, early_ends, advantages, returns = (lambda tree, *_: tree)(\n",
           ("tests/test_sharding.py::DevicesTest::test_no_collective_can_wait_beside_a_loops_"
            "own",)),
    Mutant("family_counts_beside_the_minibatches", "mjx_walk/learn/trainer.py",
           "  samples = sharding.after(permutation.reshape(num_minibatches, -1), carry, axis)\n",
           "  samples = permutation.reshape(num_minibatches, -1)\n",
           ("tests/test_sharding.py::DevicesTest::test_no_collective_can_wait_beside_a_loops_"
            "own",)),
    Mutant("after_folded_away", "mjx_walk/learn/sharding.py",
           "  return jax.tree.map(lambda x: jnp.where(never, jnp.zeros_like(x), x), tree)\n",
           "  return jax.tree.map(lambda x: jnp.where(False, jnp.zeros_like(x), x), tree)\n",
           AFTER),
    Mutant("after_nan_is_not_never", "mjx_walk/learn/sharding.py",
           "  never = (first != first) & (first == first)",
           "  never = first != first", AFTER),
    # The batch rule: the learning rate scaled linearly (SGD's rule), the families left as they
    # were, and a --scale_num_envs the training command never applies.
    Mutant("scaling_lr_linear", "mjx_walk/scaling.py",
           "  root = math.sqrt(num_envs / base)\n", "  root = num_envs / base\n", SCALING),
    Mutant("scaling_families_kept", "mjx_walk/scaling.py",
           "  scaled.families.num_train_families = num_envs // envs_per_family\n", "", SCALING),
    Mutant("scale_flag_ignored", "mjx_walk/train.py",
           "    config = apply_scale_flag(config)\n", "", SCALING),
    # Terrain: the surface split along the other diagonal, a promotion without the time limit,
    # a wrap that leaves the feet's last positions behind, a top level one short of the range's
    # end, and held-out families spawned off the platform.
    Mutant("surface_diagonal_flipped", "mjx_walk/sim/terrain.py",
           "  upper = v >= u  # the triangle (0,0), (1,1), (0,1)\n",
           "  upper = u + v <= 1.0\n", TERRAIN_SURFACE),
    Mutant("promotion_without_timeout", "mjx_walk/sim/terrain.py",
           "  up = timed_out & far_enough\n", "  up = far_enough\n", TERRAIN_CURRICULUM),
    Mutant("promotion_distance_without_the_wrap", "mjx_walk/sim/env.py",
           "jnp.linalg.norm(final.data.qpos[0:2] + ground.offset - start), reach)",
           "jnp.linalg.norm(final.data.qpos[0:2] - start), reach)", TERRAIN_RESET),
    Mutant("promotion_by_distance_ignored", "mjx_walk/sim/terrain.py",
           "  if cfg.promote_distance > 0:\n", "  if False:\n", TERRAIN_CURRICULUM),
    Mutant("promotion_within_reach_for_every_command", "mjx_walk/sim/terrain.py",
           "      far_enough |= (reach < cfg.promote_distance) & by_fraction\n",
           "      far_enough |= by_fraction\n", TERRAIN_CURRICULUM),
    Mutant("command_reach_over_one_step", "mjx_walk/sim/env.py",
           "                                         self.episode_steps, self.dt)\n",
           "                                         1, self.dt)\n", TERRAIN_RESET),
    Mutant("command_reach_without_the_turn", "mjx_walk/sim/terrain.py",
           "  turn = commands[:, 2] * dt  # [K]\n",
           "  turn = jnp.zeros_like(commands[:, 2])  # [K]\n", TERRAIN_CURRICULUM),
    Mutant("command_reach_counts_every_step_for_every_command", "mjx_walk/sim/terrain.py",
           "  n = (started - jnp.append(started[1:], 0)).astype(jnp.float32)  # [K] steps of each "
           "command\n", "  n = started.astype(jnp.float32)  # [K] steps of each command\n",
           TERRAIN_CURRICULUM),
    Mutant("panel_hash_takes_the_promotion_rules", "mjx_walk/sim/families.py",
           "                            if key not in config_lib.PROMOTION_RULES}\n",
           "                            if key not in ()}\n", PANEL_HASH),
    Mutant("ledger_compares_recorded_panel_hashes_only", "mjx_walk/ledger.py",
           "    hashes = [panel_hash_now(run_dir, recorded) for run_dir, recorded in zip(run_dirs, "
           "hashes)]\n", "    pass\n", PANEL_HASH),
    Mutant("wrap_leaves_feet_behind", "mjx_walk/sim/env.py",
           "        task=state.task.replace(foot_xy=state.task.foot_xy - shift),\n",
           "        task=state.task,\n", TERRAIN_WRAP),
    Mutant("top_level_short_of_the_range", "mjx_walk/sim/terrain.py",
           "  return level.astype(jnp.float32) / (num_levels - 1)\n",
           "  return level.astype(jnp.float32) / num_levels\n", TERRAIN_TILES),
    # The trunk's height on terrain: read straight under the origin, under hips that do not turn
    # with the trunk, or in C MuJoCo with the trunk's orientation left in the inclined world's
    # frame.
    Mutant("trunk_height_under_the_origin", "mjx_walk/sim/ground.py",
           "  return position[2] - jnp.mean(terrain_lib.surface(field, geometry.grid, "
           "hips[:, 0:2])[0])\n",
           "  return position[2] - terrain_lib.surface(field, geometry.grid, position[0:2])[0]\n",
           TRUNK_HEIGHT),
    Mutant("trunk_height_hips_not_turned", "mjx_walk/sim/ground.py",
           "  hips = position + observations.rotate(quat, geometry.hips)",
           "  hips = position + geometry.hips", TRUNK_HEIGHT),
    Mutant("sim2sim_trunk_turned_in_the_world", "mjx_walk/deploy/sim2sim.py",
           "      mujoco.mju_mulQuat(quat, _quat(w.rotation.T), w.data.qpos[3:7])\n",
           "      quat[:] = w.data.qpos[3:7]\n", TRUNK_HEIGHT_C),
    Mutant("held_out_spawn_off_the_platform", "mjx_walk/sim/families.py",
           "    spawn[\"spawn_offset\"] = tuple(scale * x for x in spawn[\"spawn_offset\"])\n",
           "", TERRAIN_FAMILIES),
    # Commands' failures made visible and refusals made before anything is written: a video
    # failure left out of report.md, or not recorded by the run; a --compare run checked only
    # after this run's evaluation was written, or its observation size never checked; a resume
    # without checkpoints not refused up front; a config file whose exception escapes; a
    # malformed ledger or a corrupted checkpoint that escapes a command as a traceback; a report
    # that evaluates and writes before finding it cannot render.
    Mutant("videos_failure_not_in_report", "mjx_walk/analysis/report.py",
           "  for update, reason in missing.items():\n",
           "  for update, reason in {}.items():\n",
           ("tests/test_train.py::CommandTest::test_videos_that_could_not_be_rendered_are_said_"
            "missing_in_the_output_and_the_report",)),
    Mutant("videos_failure_not_recorded", "mjx_walk/runner.py",
           "      videos_lib.record_not_rendered(folder.root, update, reason)\n", "",
           ("tests/test_train.py::CommandTest::test_videos_that_could_not_be_rendered_are_said_"
            "missing_in_the_output_and_the_report",)),
    Mutant("compare_checked_after_write", "mjx_walk/evaluation/panel.py",
           "  theirs = _compared_policy(compare, evaluator) if compare else None\n"
           "  record, _ = evaluate_policy(mine, mine.config, mine.manifest, evaluator)\n"
           "  path = run_folder.RunFolder(mine.run_dir).write_eval(record)\n",
           "  record, _ = evaluate_policy(mine, mine.config, mine.manifest, evaluator)\n"
           "  path = run_folder.RunFolder(mine.run_dir).write_eval(record)\n"
           "  theirs = _compared_policy(compare, evaluator) if compare else None\n",
           ("tests/test_evaluate.py::EvaluateCommandTest::test_a_compare_run_whose_checkpoint_is_"
            "corrupted_is_refused_before_anything_is_written",
            "tests/test_evaluate.py::EvaluateCommandTest::test_a_compare_run_that_observes_"
            "another_size_is_refused_before_anything_is_written")),
    Mutant("compare_observation_unchecked", "mjx_walk/evaluation/panel.py",
           "  if theirs.observation_spec.shape != spec.shape:\n", "  if False:\n",
           ("tests/test_evaluate.py::EvaluateCommandTest::test_a_compare_run_that_observes_"
            "another_size_is_refused_before_anything_is_written",)),
    Mutant("resume_without_checkpoints_unchecked", "mjx_walk/runner.py",
           "    if not checkpoint.steps(folder.root):\n", "    if False:\n",
           ("tests/test_train.py::RefusalWithoutATrainedRunTest",)),
    Mutant("config_file_exception_escapes", "mjx_walk/train.py",
           "    parse_fn=_config_file,\n", "    parse_fn=config_lib.load_file,\n",
           ("tests/test_train.py::RefusalWithoutATrainedRunTest",)),
    Mutant("ledger_command_malformed_escapes", "mjx_walk/ledger.py",
           "    except (FileNotFoundError, ValueError) as error:\n",
           "    except FileNotFoundError as error:\n",
           ("tests/test_ledger.py::test_cli_refuses_a_malformed_ledger_naming_the_file_and_line",)),
    Mutant("report_command_malformed_escapes", "mjx_walk/report.py",
           "  except (FileNotFoundError, ValueError, RuntimeError, checkpoint.CheckpointError)",
           "  except (FileNotFoundError, RuntimeError, checkpoint.CheckpointError)",
           ("tests/test_report.py::RunReportTest::test_command_refuses_a_malformed_ledger_"
            "writing_nothing",)),
    Mutant("report_announces_before_verifying", "mjx_walk/analysis/report.py",
           "      pol = (policy_lib.load(run_dir, step) if config.num_seeds == 1 else\n"
           "             policy_lib.load_all(run_dir, step))\n"
           "      log(f\"evaluating checkpoint {pol.step} with traces...\")\n",
           "      log(f\"evaluating checkpoint {policy_lib.resolve(run_dir, step)[1]} with "
           "traces...\")\n"
           "      pol = (policy_lib.load(run_dir, step) if config.num_seeds == 1 else\n"
           "             policy_lib.load_all(run_dir, step))\n",
           ("tests/test_report.py::RunReportTest::test_command_refuses_a_corrupted_checkpoint_"
            "writing_nothing",)),
    Mutant("report_renders_before_checking_gl", "mjx_walk/analysis/report.py",
           "    check_rendering()\n    saved = ", "    saved = ",
           ("tests/test_report.py::RunReportTest::test_command_without_a_gl_backend_refuses_"
            "before_evaluating",)),
    Mutant("evaluate_command_corrupted_escapes", "mjx_walk/evaluate.py",
           "  except (checkpoint.CheckpointError, ValueError) as error:\n",
           "  except ValueError as error:\n",
           ("tests/test_evaluate.py::EvaluateCommandTest::test_refuses_a_corrupted_checkpoint_"
            "writing_nothing",)),
    Mutant("export_command_corrupted_escapes", "mjx_walk/export.py",
           "  except (checkpoint.CheckpointError, ValueError) as error:\n",
           "  except ValueError as error:\n",
           ("tests/test_export.py::RefusalTest::test_a_corrupted_checkpoint",)),
    Mutant("sim2sim_command_corrupted_escapes", "mjx_walk/sim2sim.py",
           "  except (checkpoint.CheckpointError, ValueError) as error:\n",
           "  except ValueError as error:\n",
           ("tests/test_sim2sim.py::Sim2SimCommandTest::test_refuses_a_corrupted_checkpoint_"
            "writing_nothing",)),
    # Assertions that could not fail before: contact signals swapped or a step late between the
    # env, the rollout and the audit; the ledger rewound on a resume one record too far either
    # way; ppo.normalize_observations=False ignored by the normalizer's update or by what the
    # networks see; family mixing counted by time step or reduced by max; the policy std read
    # from the action mean; a compare that evaluates this run's policy again.
    Mutant("env_signals_contacts_swapped", "mjx_walk/sim/env.py",
           "        contact=jnp.where(finite, feet.contact, state.task.last_contact),\n"
           "        last_contact=state.task.last_contact,\n",
           "        contact=state.task.last_contact,\n"
           "        last_contact=jnp.where(finite, feet.contact, state.task.last_contact),\n",
           FIRST_UPDATE_AUDIT),
    Mutant("audit_contacts_swapped", "mjx_walk/learn/audit.py",
           "      signals.contact, signals.last_contact, signals.foot_speed, signals.air_time,\n",
           "      signals.last_contact, signals.contact, signals.foot_speed, signals.air_time,\n",
           FIRST_UPDATE_AUDIT),
    Mutant("rollout_signals_one_step_late", "mjx_walk/learn/trainer.py",
           "      signals=next_env.signals,\n", "      signals=env_state.signals,\n",
           FIRST_UPDATE_AUDIT),
    Mutant("ledger_keeps_one_record_too_many", "mjx_walk/run/ledger.py",
           "record.get(\"update\", 0) <= update\n", "record.get(\"update\", 0) <= update + 1\n",
           TRUNCATE),
    Mutant("ledger_drops_the_checkpoints_update", "mjx_walk/run/ledger.py",
           "record.get(\"update\", 0) <= update\n", "record.get(\"update\", 0) < update\n",
           TRUNCATE),
    Mutant("normalizer_updated_regardless", "mjx_walk/learn/trainer.py",
           "  if parts.config.ppo.normalize_observations:\n", "  if True:\n", RAW_OBSERVATIONS),
    Mutant("observations_normalized_regardless", "mjx_walk/learn/trainer.py",
           "  if not parts.config.ppo.normalize_observations:\n", "  if False:\n",
           RAW_OBSERVATIONS),
    Mutant("families_counted_by_time_step", "mjx_walk/learn/audit.py",
           "  family = (first_env + samples % num_envs) % num_families  # [M, B]\n",
           "  family = (first_env + samples // num_envs) % num_families  # [M, B]\n",
           TWO_CHUNKS),
    Mutant("effective_families_max", "mjx_walk/learn/trainer.py",
           "  fewest_effective = jnp.min(loss_metrics.pop(\"sync/effective_families\"))",
           "  fewest_effective = jnp.max(loss_metrics.pop(\"sync/effective_families\"))",
           FIRST_UPDATE_AUDIT),
    Mutant("std_mean_reads_the_mean", "mjx_walk/learn/trainer.py",
           "traj.policy_obs[0, :1])[1])", "traj.policy_obs[0, :1])[0])", TWO_CHUNKS),
    Mutant("compare_evaluates_this_run", "mjx_walk/evaluation/panel.py",
           "theirs = _chosen_policies(compare, None, None)",
           "theirs = _chosen_policies(run_dir, step, None)",
           EVALUATE_CHECKPOINT),
    # --- Code paths that had no mutant. ---
    # The curriculum: a failure that does not demote, walking at exactly the demotion fraction
    # demoting, and the level left unclipped at either end.
    Mutant("demotion_ignores_termination", "mjx_walk/sim/terrain.py",
           "  down = terminated | (judged & (progress < cfg.demote_fraction * commanded))\n",
           "  down = judged & (progress < cfg.demote_fraction * commanded)\n", TERRAIN_CURRICULUM),
    Mutant("demotion_at_the_fraction", "mjx_walk/sim/terrain.py",
           "  down = terminated | (judged & (progress < cfg.demote_fraction * commanded))\n",
           "  down = terminated | (judged & (progress <= cfg.demote_fraction * commanded))\n",
           TERRAIN_CURRICULUM),
    Mutant("level_unclipped_at_the_top", "mjx_walk/sim/terrain.py",
           "  return jnp.clip(moved, 0, cfg.num_levels - 1).astype(jnp.int32)\n",
           "  return jnp.maximum(moved, 0).astype(jnp.int32)\n", TERRAIN_CURRICULUM),
    Mutant("level_unclipped_at_the_bottom", "mjx_walk/sim/terrain.py",
           "  return jnp.clip(moved, 0, cfg.num_levels - 1).astype(jnp.int32)\n",
           "  return jnp.minimum(moved, cfg.num_levels - 1).astype(jnp.int32)\n",
           TERRAIN_CURRICULUM),
    # The ONNX metadata: joints listed by name instead of in actuator order, the model's qpos0
    # as the standing pose, kp and kd swapped, and block offsets at the blocks' ends.
    Mutant("onnx_joint_names_sorted", "mjx_walk/deploy/onnx_policy.py",
           "      \"joint_names\": list(robot.joint_names),\n",
           "      \"joint_names\": sorted(robot.joint_names),\n", EXPORT_METADATA),
    Mutant("onnx_default_pose_from_qpos0", "mjx_walk/deploy/onnx_policy.py",
           "      \"default_pose\": robot.default_pose.tolist(),\n",
           "      \"default_pose\": robot.mj_model.qpos0[7:].tolist(),\n", EXPORT_METADATA),
    Mutant("onnx_kp_kd_swapped", "mjx_walk/deploy/onnx_policy.py",
           "      \"kp\": spec.kp,\n      \"kd\": spec.kd,\n",
           "      \"kp\": spec.kd,\n      \"kd\": spec.kp,\n", EXPORT_METADATA),
    Mutant("onnx_layout_offsets_at_block_ends", "mjx_walk/sim/observations.py",
           "    return [{\"name\": b.name, \"offset\": offsets[b.name], \"size\": b.size, "
           "\"units\": b.units,\n",
           "    return [{\"name\": b.name, \"offset\": offsets[b.name] + b.size, \"size\": b.size, "
           "\"units\": b.units,\n", EXPORT_METADATA),
    # sim2sim: the pushes never applied, the action history not carried from step to step (the
    # delay reads the first step's history forever), the delay skipped, and the payload's
    # centre of mass left at the nominal trunk's.
    Mutant("sim2sim_push_not_applied", "mjx_walk/deploy/sim2sim.py",
           "    world.data.xfrc_applied[self.env.robot.trunk_body_id, 0:3] = world.rotation @ push\n",
           "",
           SIM2SIM_ACTUATORS),
    Mutant("sim2sim_history_not_carried", "mjx_walk/deploy/sim2sim.py",
           "      history, targets, push = jax.device_get(\n",
           "      _, targets, push = jax.device_get(\n", SIM2SIM_ACTUATORS),
    Mutant("sim2sim_delay_skipped", "mjx_walk/deploy/sim2sim.py",
           "      history, targets = env.actuate(family, history, action)\n",
           "      history, _ = env.actuate(family, history, action)\n"
           "      targets = self._default_pose + env.robot.spec.action_scale * action\n",
           SIM2SIM_ACTUATORS),
    Mutant("sim2sim_payload_com_nominal", "mjx_walk/deploy/sim2sim.py",
           "      return {name: getattr(model, name) for name in families.MODEL_FIELDS}\n",
           "      return {name: getattr(model, name) for name in families.MODEL_FIELDS\n"
           "              if name != \"body_ipos\"}\n", SIM2SIM_PAYLOAD),
    # The ledger's format: inf written as such (NaN only nulled), NumPy scalars not unwrapped,
    # any kind accepted on write or read, kind-less old records not counted as updates, the
    # sim2sim kind dropped, and truncation that drops the run's history, keeps a record past
    # the checkpoint, keeps a torn line, or deletes what it drops.
    Mutant("ledger_inf_written", "mjx_walk/run/ledger.py",
           "  if isinstance(value, float) and not math.isfinite(value):\n",
           "  if isinstance(value, float) and math.isnan(value):\n", LEDGER_FORMAT),
    Mutant("ledger_numpy_scalar_kept", "mjx_walk/run/ledger.py",
           "  if isinstance(value, np.generic):\n    value = value.item()\n", "", LEDGER_FORMAT),
    Mutant("ledger_write_any_kind", "mjx_walk/run/ledger.py",
           "    _check_kind(record, str(self.path))\n", "", LEDGER_FORMAT),
    Mutant("ledger_read_any_kind", "mjx_walk/run/ledger.py",
           "      _check_kind(record, f\"{path}:{number}\")\n", "", LEDGER_FORMAT),
    Mutant("ledger_kindless_not_an_update", "mjx_walk/run/ledger.py",
           "  return [r for r in records if r.get(\"kind\", \"update\") == kind]\n",
           "  return [r for r in records if r.get(\"kind\") == kind]\n", LEDGER_FORMAT),
    Mutant("ledger_sim2sim_kind_dropped", "mjx_walk/run/ledger.py",
           "KINDS = (\"recipe\", \"update\", \"eval\", \"divergence\", \"sim2sim\")\n",
           "KINDS = (\"recipe\", \"update\", \"eval\", \"divergence\")\n", LEDGER_FORMAT),
    Mutant("truncate_drops_history", "mjx_walk/run/ledger.py",
           "      keep = record.get(\"kind\") in _HISTORY_KINDS or "
           "record.get(\"update\", 0) <= update\n",
           "      keep = record.get(\"update\", 0) <= update\n", REWIND),
    Mutant("truncate_drops_checkpoint_update", "mjx_walk/run/ledger.py",
           "      keep = record.get(\"kind\") in _HISTORY_KINDS or "
           "record.get(\"update\", 0) <= update\n",
           "      keep = record.get(\"kind\") in _HISTORY_KINDS or "
           "record.get(\"update\", 0) < update\n",
           REWIND),
    Mutant("truncate_keeps_a_torn_line", "mjx_walk/run/ledger.py",
           "      keep = False  # a line torn by a kill\n", "      keep = True\n", REWIND),
    Mutant("truncate_deletes_what_it_drops", "mjx_walk/run/ledger.py",
           "      file.writelines(dropped)\n", "      pass\n", REWIND),
    # The checkpoint keep policy: the best never kept, the worst kept as the best, checkpoints
    # without a score kept forever, one checkpoint too many, and ties broken towards falls.
    Mutant("keep_best_ignored", "mjx_walk/run/checkpoint.py",
           "    if cfg.keep_best:\n", "    if False:\n", CHECKPOINT_KEEP),
    Mutant("keep_the_worst", "mjx_walk/run/checkpoint.py",
           "          get_metric_fn=lambda metrics: metrics[\"score\"], n=1,\n",
           "          get_metric_fn=lambda metrics: -metrics[\"score\"], n=1,\n", CHECKPOINT_KEEP),
    Mutant("keep_unscored_forever", "mjx_walk/run/checkpoint.py",
           "          keep_checkpoints_without_metrics=False))\n",
           "          keep_checkpoints_without_metrics=True))\n", CHECKPOINT_KEEP),
    Mutant("keep_one_too_many", "mjx_walk/run/checkpoint.py",
           "    policies.append(ocp.checkpoint_managers.LatestN(cfg.max_to_keep))\n",
           "    policies.append(ocp.checkpoint_managers.LatestN(cfg.max_to_keep + 1))\n",
           CHECKPOINT_KEEP),
    Mutant("score_ties_prefer_falls", "mjx_walk/run/checkpoint.py",
           "  return float(success - 1e-3 * fall)\n", "  return float(success + 1e-3 * fall)\n",
           CHECKPOINT_KEEP),
    # The env's termination rules: no fall by height, the tilt limit read as radians, body
    # contact never ending an episode, the joint-limit margin outside the limits, a timeout a
    # step late, and the time limit taking precedence over a failure.
    Mutant("fall_height_ignored", "mjx_walk/sim/endings.py",
           "  fell = (trunk_height < env.fall_height) | (\n", "  fell = (\n", ENDINGS),
    Mutant("fall_tilt_in_radians", "mjx_walk/sim/endings.py",
           "      floor_normal[2] < np.cos(np.deg2rad(env.fall_tilt_degrees)))\n",
           "      floor_normal[2] < np.cos(env.fall_tilt_degrees))\n", ENDINGS),
    Mutant("body_contact_never_ends", "mjx_walk/sim/endings.py",
           "    ending = ending & env.terminate_on_body_contact\n", "    ending = ending & False\n",
           ENDINGS),
    Mutant("limb_contact_always_ends", "mjx_walk/sim/endings.py",
           "    ending = (~np.asarray(limb_contact)) | env.limb_contact_ends\n",
           "    ending = (~np.asarray(limb_contact)) | True\n", ENDINGS),
    Mutant("trunk_contact_counted_a_limb", "mjx_walk/sim/endings.py",
           "    ending = (~np.asarray(limb_contact)) | env.limb_contact_ends\n",
           "    ending = np.asarray(limb_contact) & env.limb_contact_ends\n", ENDINGS),
    Mutant("joint_limit_margin_outside", "mjx_walk/sim/endings.py",
           "                (joint_pos > rules.joint_upper - margin)).any()\n",
           "                (joint_pos > rules.joint_upper + margin)).any()\n", ENDINGS),
    Mutant("timeout_a_step_late", "mjx_walk/sim/endings.py",
           "  timeout = step + 1 >= rules.episode_steps\n",
           "  timeout = step >= rules.episode_steps\n", ENDINGS),
    Mutant("timeout_before_failure", "mjx_walk/sim/endings.py",
           "      [~finite, fell, body_contact, at_limit, timeout],\n"
           "      [ResetReason.NONFINITE, ResetReason.FALL, ResetReason.BODY_CONTACT,\n"
           "       ResetReason.JOINT_LIMIT, ResetReason.TIMEOUT],\n",
           "      [timeout, ~finite, fell, body_contact, at_limit],\n"
           "      [ResetReason.TIMEOUT, ResetReason.NONFINITE, ResetReason.FALL,\n"
           "       ResetReason.BODY_CONTACT, ResetReason.JOINT_LIMIT],\n", ENDINGS),
    # The env's wiring of its measurements into the rules: body contact never reaches them.
    Mutant("env_body_contact_not_judged", "mjx_walk/sim/env.py",
           "                                measured.readings.joint_pos, measured.body_touches, finite,\n",
           "                                measured.readings.joint_pos, jnp.zeros(5, bool), finite,\n",
           ENV_TERMINATION),
    # The env's count of touching limbs: whether any touches, not how many.
    Mutant("limb_touches_not_counted", "mjx_walk/sim/env.py",
           "        limb_touches=(measured.body_touches & self.robot.limb_contact).sum(),\n",
           "        limb_touches=(measured.body_touches & self.robot.limb_contact).any(),\n",
           ("tests/test_terrain.py::EnvTerrainTest::"
            "test_a_thighs_touch_costs_limb_contact_and_the_episode_goes_on",)),
    # The ground and the reward table on their own: a foot's clearance measured from its
    # centre, the termination penalty dropped from the total, terms not scaled by the period.
    Mutant("foot_clearance_from_the_centre", "mjx_walk/sim/ground.py",
           "    return geom_xpos[geometry.foot_geoms, 2] - geometry.foot_radius\n",
           "    return geom_xpos[geometry.foot_geoms, 2]\n", ("tests/test_ground.py",)),
    # Which body touched: a probe counted for every geom whose id is at least its own, or a
    # contact pair's second geom compared with the floor twice.
    Mutant("body_touches_misgrouped", "mjx_walk/sim/ground.py",
           "(geometry.probe_geoms[:, None] == geometry.body_geoms)).any(axis=0)\n",
           "(geometry.probe_geoms[:, None] >= geometry.body_geoms)).any(axis=0)\n",
           ("tests/test_ground.py",)),
    Mutant("floor_touches_one_order_only", "mjx_walk/sim/ground.py",
           "          ((pairs[:, 1:2] == floor) & (pairs[:, 0:1] == geoms)))  # [C, K]\n",
           "          ((pairs[:, 1:2] == floor) & (pairs[:, 1:2] == geoms)))  # [C, K]\n",
           ("tests/test_ground.py",)),
    Mutant("termination_penalty_dropped", "mjx_walk/sim/rewards.py",
           "  return shaped + scaled.get(\"termination\", 0.0), scaled\n",
           "  return shaped, scaled\n", ("tests/test_rewards.py::StepRewardTest",)),
    Mutant("reward_terms_not_scaled_by_dt", "mjx_walk/sim/rewards.py",
           "  scaled = {name: scale * dt * jnp.where(finite, terms[name](), 0.0)\n",
           "  scaled = {name: scale * jnp.where(finite, terms[name](), 0.0)\n",
           ("tests/test_rewards.py::StepRewardTest",)),
    # The gait clock's clearance freeing the standing feet too, or a robot told to stand, or
    # never read from the config.
    Mutant("gait_clearance_frees_the_stance", "mjx_walk/sim/rewards.py",
           "    miss = jnp.where(swinging & moving, jnp.minimum(miss, 0.0), miss)\n",
           "    miss = jnp.where(moving, jnp.minimum(miss, 0.0), miss)\n", GAIT_CLEARANCE),
    Mutant("gait_clearance_when_told_to_stand", "mjx_walk/sim/rewards.py",
           "    miss = jnp.where(swinging & moving, jnp.minimum(miss, 0.0), miss)\n",
           "    miss = jnp.where(swinging, jnp.minimum(miss, 0.0), miss)\n", GAIT_CLEARANCE),
    Mutant("gait_clearance_not_read_from_the_config", "mjx_walk/sim/rewards.py",
           "          cfg.swing_clearance),\n", "          False),\n",
           ("tests/test_rewards.py::StepRewardTest",)),
    # The contact budget: never written to the heightfield scene; a budget below the feet
    # accepted (the run would compile, and drop a touching foot's contact).
    Mutant("contact_budget_not_in_the_scene", "mjx_walk/sim/robots.py",
           "  if ground.max_contact_points:\n", "  if False:\n",
           ("tests/test_robots.py::test_the_contact_budget_keeps_the_deepest_contacts_of_each_"
            "dimension",)),
    Mutant("contact_budget_below_the_feet_accepted", "mjx_walk/sim/robots.py",
           "    if 0 < heightfield.max_contact_points < len(spec.feet):\n",
           "    if False:\n",
           ("tests/test_robots.py::test_a_contact_budget_below_the_feet_is_refused",)),
    # The panel's success: without the velocity or the yaw-rate threshold, the two thresholds
    # swapped, an error at the threshold counted a success, and a fall that tracked well
    # counted a success.
    Mutant("success_without_lin_vel_threshold", "mjx_walk/evaluation/panel.py",
           "  success = survived & (lin_error < panel.success_lin_vel_error) & (\n",
           "  success = survived & (\n", PANEL_SUCCESS),
    Mutant("success_without_yaw_threshold", "mjx_walk/evaluation/panel.py",
           "      yaw_error < panel.success_yaw_rate_error)\n", "      yaw_error < np.inf)\n",
           PANEL_SUCCESS),
    Mutant("success_thresholds_swapped", "mjx_walk/evaluation/panel.py",
           "  success = survived & (lin_error < panel.success_lin_vel_error) & (\n"
           "      yaw_error < panel.success_yaw_rate_error)\n",
           "  success = survived & (lin_error < panel.success_yaw_rate_error) & (\n"
           "      yaw_error < panel.success_lin_vel_error)\n", PANEL_SUCCESS),
    Mutant("success_at_the_threshold", "mjx_walk/evaluation/panel.py",
           "  success = survived & (lin_error < panel.success_lin_vel_error) & (\n",
           "  success = survived & (lin_error <= panel.success_lin_vel_error) & (\n",
           PANEL_SUCCESS),
    Mutant("success_for_a_fall", "mjx_walk/evaluation/panel.py",
           "  success = survived & (lin_error < panel.success_lin_vel_error) & (\n",
           "  success = (lin_error < panel.success_lin_vel_error) & (\n", PANEL_SUCCESS),
    # The panel's body-contact rate: touches after the episode's end counted, or the share taken
    # of the panel's full episode rather than of the episode's own steps.
    Mutant("body_contact_counted_after_the_end", "mjx_walk/evaluation/panel.py",
           "      body_contact_steps=stats.body_contact_steps + (live & body_contact).astype(xp.int32),\n",
           "      body_contact_steps=stats.body_contact_steps + body_contact.astype(xp.int32),\n",
           ("tests/test_evaluate.py::AccumulateTest",)),
    Mutant("body_contact_rate_of_the_full_episode", "mjx_walk/evaluation/panel.py",
           "\"body_contact_rate\": stats.body_contact_steps / steps}",
           "\"body_contact_rate\": stats.body_contact_steps / 10}",
           PANEL_SUCCESS),
    # The KL that adapts the learning rate measured on this device's share of the minibatch
    # instead of averaged over devices.
    Mutant("kl_not_averaged_over_devices", "mjx_walk/learn/trainer.py",
           "        ppo.get_learning_rate(opt_state), loss_metrics[\"loss/approx_kl\"], "
           "ppo_cfg.desired_kl,\n",
           "        ppo.get_learning_rate(opt_state), ppo.ppo_loss(params, parts.networks, batch, "
           "parts.loss_config, parts.axis_name)[1][\"loss/approx_kl\"], ppo_cfg.desired_kl,\n",
           SHARDED_KL),
    # The ONNX graph: the hidden layers' activation left out, the normaliser's std multiplied
    # instead of divided, swish built as a bare sigmoid, and the normalised observation unclipped.
    Mutant("onnx_activation_dropped", "mjx_walk/deploy/onnx_policy.py",
           "    x = activate(g, x)\n",
           "    x = x\n", EXPORT_PARITY),
    Mutant("onnx_normalizer_std_multiplied", "mjx_walk/deploy/onnx_policy.py",
           "    x = g.node(\"Div\", x, g.constant(std, \"normalizer/std\"))\n",
           "    x = g.node(\"Mul\", x, g.constant(std, \"normalizer/std\"))\n", EXPORT_PARITY),
    Mutant("onnx_swish_bare_sigmoid", "mjx_walk/deploy/onnx_policy.py",
           "    \"swish\": lambda g, x: g.node(\"Mul\", x, g.node(\"Sigmoid\", x)),",
           "    \"swish\": lambda g, x: g.node(\"Sigmoid\", x),", EXPORT_ACTIVATIONS),
    Mutant("onnx_normalizer_unclipped", "mjx_walk/deploy/onnx_policy.py",
           "    x = g.node(\"Clip\", x, g.constant(-normalizer.CLIP, \"normalizer/low\"),\n"
           "               g.constant(normalizer.CLIP, \"normalizer/high\"))\n",
           "    x = g.node(\"Identity\", x)\n", EXPORT_NORMALIZER_CLIP),
    # The height scan: its grid fixed in the world's axes instead of the trunk's yaw frame; read
    # from a trunk past the tile's edge without the wrap (beyond the modelled margin); the
    # critic given the policy's noisy scan; the points' order reversed in the ONNX metadata.
    Mutant("scan_in_the_world_frame", "mjx_walk/sim/height_scan.py",
           "  heading = forward - jnp.dot(forward, up) * up\n",
           "  heading = jnp.array([1.0, 0.0, 0.0]) - up[0] * up\n", SCAN_FRAME),
    Mutant("scan_read_before_the_wrap", "mjx_walk/sim/env.py",
           "        position = position.at[0:2].add(-terrain_lib.wrap(self.grid, position[0:2]))\n",
           "        position = position\n", SCAN_WRAP),
    Mutant("scan_critic_given_the_noisy_scan", "mjx_walk/sim/env.py",
           "      noisy[-1] = height_scan.corrupt(",
           "      noisy[-1] = clean[-1] = height_scan.corrupt(", SCAN_CRITIC),
    Mutant("scan_metadata_order_reversed", "mjx_walk/sim/height_scan.py",
           "      \"points\": grid_points(scan).round(6).tolist(),\n",
           "      \"points\": grid_points(scan)[::-1].round(6).tolist(),\n", SCAN_LAYOUT),
    # The scan's branch: its features put before the other inputs instead of after them (the
    # MLP's first layer then reads every input at another place); the ONNX graph likewise.
    Mutant("scan_branch_features_first", "mjx_walk/learn/networks.py",
           "    return jnp.concatenate([rest, scan], axis=-1)  # [..., I - S + sizes[-1]]\n",
           "    return jnp.concatenate([scan, rest], axis=-1)  # [..., I - S + sizes[-1]]\n",
           SCAN_BRANCH),
    Mutant("onnx_scan_branch_features_first", "mjx_walk/deploy/onnx_policy.py",
           "    x = g.node(\"Concat\", rest, scan, axis=1)\n",
           "    x = g.node(\"Concat\", scan, rest, axis=1)\n", SCAN_BRANCH_EXPORT),
    # Several seeds: every seed left with seed 0's optimiser state (moments, step count and
    # adapted learning rate) after each update, instead of its own.
    Mutant("seeds_share_one_optimiser_state", "mjx_walk/learn/seeds.py",
           "  return after.replace(params=kept[0], opt_state=kept[1], normalizer=kept[2], "
           "halted=halted)\n",
           "  shared = jax.tree.map(lambda x: jnp.broadcast_to(x[:1], x.shape), kept[1])\n"
           "  return after.replace(params=kept[0], opt_state=shared, normalizer=kept[2], "
           "halted=halted)\n", SEED_AXIS),
    # Several seeds all started from the run seed's one key.
    Mutant("one_key_for_every_seed", "mjx_walk/learn/seeds.py",
           "jax.random.key(config.seed + k) for k in range(config.num_seeds)",
           "jax.random.key(config.seed) for k in range(config.num_seeds)", SEED_AXIS),
    # The spread of a multi-seed evaluation taken over env slots instead of over seeds.
    Mutant("seed_spread_over_envs", "mjx_walk/evaluation/panel.py",
           "    seed_stats = [jax.tree.map(lambda x, k=k: x[k], stats) for k in range(num_seeds)]\n",
           "    seed_stats = [jax.tree.map(lambda x, k=k: x[:, k], stats) for k in range(num_seeds)]\n",
           SEED_SPREAD),
    # One seed of a multi-seed run loaded with seed 0's parameters: the chosen seed exported and
    # evaluated alone as another.
    Mutant("chosen_seed_reads_seed_zero", "mjx_walk/run/policy.py",
           "jax.tree.map(lambda leaf: leaf[seed], self.params)",
           "jax.tree.map(lambda leaf: leaf[0], self.params)",
           ("tests/test_export.py::SeedExportTest", "tests/test_evaluate.py::SeedCommandTest")),
    # The comparison figure drawing and quoting `flat` whatever --stratum asks for.
    Mutant("compare_runs_ignores_the_stratum", "experiments/compare_runs.py",
           "stratum, kinds, at = _STRATUM.value,", "stratum, kinds, at = \"flat\",",
           ("tests/test_compare_runs.py",)),
    # The curriculum's levels taken once per level present, not once per env.
    Mutant("curriculum_levels_not_per_env", "mjx_walk/analysis/plots.py",
           "levels = np.repeat(np.arange(len(counts)), counts)  # one entry per env",
           "levels = np.flatnonzero(counts)",
           ("tests/test_plots.py::CurriculumTest", "tests/test_compare_runs.py")),
    # A level quoted past the run's last update as if the run had got there.
    Mutant("compare_runs_quotes_past_the_run", "experiments/compare_runs.py",
           "None if target > steps[-1] + stride else ", "",
           ("tests/test_compare_runs.py",)),
    # The LAPACK split gated on a release line whose jaxlib does not fan batches out.
    Mutant("cpu_lapack_split_on_the_wrong_line", "mjx_walk/learn/cpu_lapack.py",
           "FANS_OUT = sharding.JAXLIB_RELEASE == (0, 10)",
           "FANS_OUT = sharding.JAXLIB_RELEASE == (0, 11)", CPU_LAPACK),
    # GSPMD forced on every jaxlib instead of the one line whose Shardy dies on empty operands.
    Mutant("partitioner_switched_everywhere", "mjx_walk/learn/sharding.py",
           "SHARDY_FAILS_ON_EMPTY_OPERANDS = JAXLIB_RELEASE == (0, 11)",
           "SHARDY_FAILS_ON_EMPTY_OPERANDS = JAXLIB_RELEASE >= (0, 10)", PARTITIONER),
    # The device machine's command writing into an $OUT that holds another run's files.
    Mutant("device_check_takes_a_full_out", "experiments/device_check.sh",
           'if [ -e "$out" ] && { [ ! -d "$out" ] || [ -n "$(ls -A "$out")" ]; }; then\n',
           'if [ -e "$out" ] && [ ! -d "$out" ]; then\n', DEVICE_CHECK_OUT),
    # The device machine's command passing its own gpu_check flags through from the command line.
    Mutant("device_check_passes_its_budget_through", "experiments/device_check.sh",
           "    --out_dir*|--budget_minutes*|--tiny|--notiny)\n",
           "    --out_dir*|--tiny|--notiny)\n", DEVICE_CHECK_FLAGS),
    # A dependency of the bundle left out of it as if not needed: mujoco-mjx imports trimesh.
    Mutant("device_bundle_without_trimesh", "experiments/device_wheels.sh",
           "WHEELS=(mujoco==3.17.0 mujoco-mjx==3.17.0 ml-collections==1.1.0 trimesh==5.2.0)\n"
           "LEFT_OUT=(glfw pyopengl websockets)\n",
           "WHEELS=(mujoco==3.17.0 mujoco-mjx==3.17.0 ml-collections==1.1.0)\n"
           "LEFT_OUT=(glfw pyopengl websockets trimesh)\n", DEVICE_CHECK_CPU),
)

# Loaded into every pytest run of the copy (-p): fails the run unless the package the tests
# imported is the copy's; and, since the runs pass `-m ''`, deselects the `slow` tests that the
# selection did not name by their node id or their class (a whole file keeps the default
# suite's `-m 'not slow'`, so a file named here never pulls in a learning run).
_GUARD = '''
import os
import sys

import pytest


def _named(nodeid, args):
  """Whether a command-line selection names `nodeid` itself, its class, or a parameter of it."""
  return any("::" in arg and (nodeid == arg or nodeid.startswith((arg + "::", arg + "[")))
             for arg in args)


def pytest_collection_modifyitems(config, items):
  unnamed = [item for item in items
             if item.get_closest_marker("slow") and not _named(item.nodeid, config.args)]
  if unnamed:
    config.hook.pytest_deselected(items=unnamed)
    items[:] = [item for item in items if item not in unnamed]


def pytest_collection_finish(session):
  root = os.path.realpath(os.environ["MUTANTS_COPY"])
  module = sys.modules.get("mjx_walk")
  where = os.path.realpath(getattr(module, "__file__", None) or "(not imported)")
  if not where.startswith(root + os.sep):
    raise pytest.UsageError(f"mjx_walk was imported from {where}, not from the copy at {root}")
'''


def _source_files() -> list[str]:
  """The repository's files as git sees them: tracked, and new but not ignored."""
  out = subprocess.run(
      ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      capture_output=True, check=True).stdout
  names = sorted({name for name in out.decode().split("\0") if name})
  # A tracked file deleted in the working tree is left out.
  return [name for name in names if (REPO / name).is_file() and not (REPO / name).is_symlink()]


def _copy_tree(dest: pathlib.Path) -> None:
  for name in _source_files():
    target = dest / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / name, target)


def _check_snippets(mutants, root: pathlib.Path) -> None:
  """Stops unless every original snippet occurs exactly once under `root` and every mutant
  still compiles."""
  problems = []
  for m in mutants:
    text = (root / m.path).read_text()
    count = text.count(m.original)
    if count != 1:
      problems.append(f"{m.name}: the snippet occurs {count} times in {m.path} (must be 1): "
                      f"{m.original!r}")
      continue
    if m.path.endswith(".sh"):  # a shell script: bash parses it without running it
      parsed = subprocess.run(["bash", "-n"], input=text.replace(m.original, m.replacement),
                              capture_output=True, text=True, check=False)
      if parsed.returncode:
        problems.append(f"{m.name}: the mutated {m.path} does not parse: {parsed.stderr}")
      continue
    try:
      compile(text.replace(m.original, m.replacement), m.path, "exec")
    except SyntaxError as error:
      problems.append(f"{m.name}: the mutated {m.path} does not compile: {error}")
  if problems:
    sys.exit("mutants.py is stale; update MUTANTS:\n  " + "\n  ".join(problems))


def _pytest(copy: pathlib.Path, guard_dir: pathlib.Path, tests, timeout: float) -> int:
  """Runs the selected tests in the copy; returns pytest's exit status (124 on a timeout)."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [str(copy), str(guard_dir)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
  env["PYTHONDONTWRITEBYTECODE"] = "1"  # a restored file must never meet a mutant's .pyc
  env["MUTANTS_COPY"] = str(copy)
  # `-m ''` overrides pyproject's `-m 'not slow'`, so that a slow test a mutant names by node id
  # runs instead of being deselected (exit status 5, an ERROR); the guard plugin deselects the
  # slow tests a selection did not name (a whole file stays the default suite's part of it).
  command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "_mutants_guard",
             "-m", "", "-x", "-q", "-n", "0", "--no-header", *tests]
  try:
    done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True,
                          timeout=timeout)
  except subprocess.TimeoutExpired:
    return 124
  if done.returncode not in (0, 1):
    print(done.stdout[-4000:] + done.stderr[-4000:], file=sys.stderr)
  return done.returncode


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
  parser.add_argument("--timeout", type=float, default=900.0,
                      help="seconds per pytest run; a mutant that runs longer is an ERROR")
  args = parser.parse_args(argv)
  known = {m.name: m for m in MUTANTS}
  unknown = [name for name in args.names if name not in known]
  if unknown:
    parser.error(f"unknown mutants {unknown}; known: {sorted(known)}")
  mutants = [known[name] for name in args.names] if args.names else list(MUTANTS)

  with tempfile.TemporaryDirectory(prefix="mjx_walk-mutants-") as tmp:
    copy, guard_dir = pathlib.Path(tmp) / "repo", pathlib.Path(tmp) / "guard"
    _copy_tree(copy)
    _check_snippets(mutants, copy)  # on the copy: the files the mutants are applied to
    guard_dir.mkdir()
    (guard_dir / "_mutants_guard.py").write_text(_GUARD)

    selected = list(dict.fromkeys(test for m in mutants for test in m.tests))
    start = time.monotonic()
    status = _pytest(copy, guard_dir, selected, args.timeout)
    print(f"{'(unmutated)':<33} {'-':<24} {'PASSED' if status == 0 else 'FAILED':<8} "
          f"{time.monotonic() - start:7.1f}s", flush=True)
    if status != 0:
      print("the unmutated copy fails its selected tests (exit status "
            f"{status}); fix that first", file=sys.stderr)
      return 2

    killed = survived = errors = 0
    for m in mutants:
      path = copy / m.path
      original = path.read_text()
      path.write_text(original.replace(m.original, m.replacement))
      start = time.monotonic()
      try:
        status = _pytest(copy, guard_dir, m.tests, args.timeout)
      finally:
        path.write_text(original)
      outcome = {0: "SURVIVED", 1: "KILLED"}.get(status, "ERROR")
      killed += outcome == "KILLED"
      survived += outcome == "SURVIVED"
      errors += outcome == "ERROR"
      print(f"{m.name:<33} {m.path:<24} {outcome:<8} {time.monotonic() - start:7.1f}s",
            flush=True)

  summary = {"killed": killed, "survived": survived, "mutants": len(mutants)}
  if errors:
    summary["errors"] = errors
  print(json.dumps(summary))
  return 0 if killed == len(mutants) else 1


if __name__ == "__main__":
  sys.exit(main())
