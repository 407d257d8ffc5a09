"""Tests for the ledger (mjx_walk.run.ledger) and the `python -m mjx_walk.ledger` command: recipe
arithmetic, update records, the JSONL file, tables, and the command's output and refusals, run
in-process (tests/commands.py)."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import types

from absl.testing import absltest
import jax
import numpy as np
import pytest

from mjx_walk import config as config_lib
from mjx_walk import ledger as ledger_cli
from mjx_walk.learn import records as records_lib
from mjx_walk.run import ledger
from mjx_walk.run import provenance
from mjx_walk.run import spread
from mjx_walk.sim import families

import commands
import configs

RECIPE_KEYS = (
    "kind", "num_envs", "unroll_length", "num_minibatches", "num_epochs", "control_hz",
    "updates_per_chunk", "samples_per_update", "seconds_per_env_per_update",
    "aggregate_robot_seconds_per_update", "minibatch_size", "sample_reuse", "num_train_families",
    "envs_per_family", "num_eval_families", "num_eval_envs", "strata", "device_kind",
    "device_count", "platform", "packages", "git_commit", "git_dirty", "manifest_hash",
    "panel_hash", "seed", "time",
)


def stand_in_manifest(panel_hash: str = "def") -> types.SimpleNamespace:
  return types.SimpleNamespace(hash="abc", panel_hash=panel_hash,
                               train_families=(None,) * 128, eval_families=(None,) * 40)


def big_config() -> config_lib.TrainConfig:
  cfg = config_lib.default()
  cfg.num_envs = 4096  # divisible by the 128 training families
  cfg.unroll_length = 24
  cfg.env.control_hz = 50.0
  cfg.ppo.num_minibatches = 4
  cfg.ppo.num_epochs = 5
  return cfg


def stratum(success, fall, timeout, falls):
  return {"num_envs": 32, "success_rate": success, "fall_rate": fall, "episode_length": 480.25,
          "lin_vel_error": 0.1234, "yaw_rate_error": 0.25, "return": 12.5,
          "reset": {"fall": falls, "timeout": timeout, "joint_limit": 0, "body_contact": 0,
                    "nonfinite": 0}}


def eval_result(panel_hash: str = "def", success: float = 0.875) -> dict:
  return {"panel_hash": panel_hash,
          "strata": {"flat": stratum(success, 0.09375, 28, 3), "slope": stratum(0.5, 0.25, 20, 8)}}


def two_update_metrics() -> dict[str, np.ndarray]:
  # Update 1: two episodes ended (returns summing to 10, lengths to 100), one fell, one timed out.
  # Update 2: no episode ended, so its return is undefined and its reset shares are 0.
  return {
      "episode/count": np.array([2.0, 0.0]),
      "episode/return_sum": np.array([10.0, 0.0]),
      "episode/length_sum": np.array([100.0, 0.0]),
      "reset/fall": np.array([1.0, 0.0]),
      "reset/timeout": np.array([1.0, 0.0]),
      "reward/total": np.array([0.1, 0.2]),
      "reward/tracking_lin_vel": np.array([0.3, 0.4]),
      "loss/approx_kl": np.array([0.01, 0.02]),
  }


def write_run(run_dir: pathlib.Path, panel_hash: str = "def", success: float = 0.875,
              with_eval: bool = True) -> None:
  run_dir.mkdir(parents=True)
  cfg = big_config()
  with ledger.Ledger(run_dir / ledger.FILENAME) as book:
    book.write(provenance.recipe(cfg, stand_in_manifest(panel_hash)))
    for record in records_lib.update_records(two_update_metrics(), first_update=0,
                                        batch_size=cfg.batch_size, sps=12345.0,
                                        wall_seconds=8.0, device_memory=None):
      book.write(record)
    if with_eval:
      book.write(ledger.eval_record(eval_result(panel_hash, success), update=2,
                                    env_steps=2 * cfg.batch_size, wall_seconds=9.5))


def test_recipe_figures_for_4096_envs_24_steps_50_hz():
  r = provenance.recipe(big_config(), stand_in_manifest())
  assert r["kind"] == "recipe"
  assert r["samples_per_update"] == 98304  # 4096 * 24
  assert r["seconds_per_env_per_update"] == pytest.approx(0.48)  # 24 / 50 Hz
  assert r["aggregate_robot_seconds_per_update"] == pytest.approx(1966.08)  # 98304 / 50
  assert r["minibatch_size"] == 24576  # 98304 / 4
  assert r["sample_reuse"] == 5
  assert (r["num_train_families"], r["envs_per_family"]) == (128, 32)
  assert (r["num_eval_families"], r["num_eval_envs"]) == (40, 5 * 8 * 4)
  assert r["strata"] == ["flat", "slope", "push", "payload", "friction"]
  assert (r["manifest_hash"], r["panel_hash"], r["seed"]) == ("abc", "def", 0)
  assert r["packages"]["numpy"] == np.__version__


def test_recipe_names_the_devices_jax_runs_on():
  # Catches a recipe that names the wrong backend or device count, on whatever machine the test
  # runs (CPU in CI, a GPU workstation): the reference is JAX's own device list.
  r = provenance.recipe(big_config(), stand_in_manifest())
  devices = jax.devices()
  assert (r["platform"], r["device_count"], r["device_kind"]) == (
      devices[0].platform, len(devices), devices[0].device_kind)


def _git_reference(repo: pathlib.Path) -> tuple[str | None, bool | None]:
  """(HEAD commit, dirty) of `repo` asked of git directly; (None, None) unless `repo` is the
  top of a git checkout."""
  def git(*args):
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() if done.returncode == 0 else None

  top = git("rev-parse", "--show-toplevel")
  if top is None or pathlib.Path(top).resolve() != repo:
    return None, None
  return git("rev-parse", "HEAD"), bool(git("status", "--porcelain"))


def test_recipe_records_the_commit_and_dirty_state():
  # Catches a recipe whose git_commit is not the package's HEAD, or whose git_dirty does not say
  # whether the working tree has changes (in a git checkout); and one that reports some other
  # repository's state for a copy of the package outside a checkout (then both are None).
  repo = pathlib.Path(provenance.__file__).resolve().parents[2]
  before = _git_reference(repo)
  r = provenance.recipe(big_config(), stand_in_manifest())
  after = _git_reference(repo)  # a commit or edit in between must not fail the test
  assert (r["git_commit"], r["git_dirty"]) in (before, after)


def test_recipe_has_every_key():
  r = provenance.recipe(big_config(), stand_in_manifest())
  assert set(RECIPE_KEYS) <= set(r), set(RECIPE_KEYS) - set(r)
  assert set(r["packages"]) == set(provenance.PACKAGES)
  json.dumps(r, allow_nan=False)  # plain JSON as it stands


def test_update_records_one_per_update():
  records = records_lib.update_records(two_update_metrics(), first_update=10, batch_size=96,
                                  sps=500.0, wall_seconds=3.0, device_memory=1024)
  assert len(records) == 2
  first, second = records
  assert [r["kind"] for r in records] == ["update", "update"]
  assert (first["update"], first["env_steps"]) == (11, 11 * 96)
  assert (second["update"], second["env_steps"]) == (12, 12 * 96)
  assert first["perf/sps"] == 500.0 and first["perf/wall_seconds"] == 3.0
  assert first["device/memory_bytes"] == 1024
  # summarize semantics, per update: return = return_sum / count, shares = reason / ends.
  assert first["episode/count"] == 2.0
  assert first["episode/return"] == pytest.approx(5.0)
  assert first["episode/length"] == pytest.approx(50.0)
  assert first["reset/fall"] == pytest.approx(0.5)
  assert first["reset/timeout"] == pytest.approx(0.5)
  assert first["reward/total"] == pytest.approx(0.1)
  assert first["reward/tracking_lin_vel"] == pytest.approx(0.3)
  assert first["loss/approx_kl"] == pytest.approx(0.01)
  assert second["episode/count"] == 0.0 and math.isnan(second["episode/return"])
  assert second["reset/fall"] == 0.0
  assert second["reward/total"] == pytest.approx(0.2)
  assert second["loss/approx_kl"] == pytest.approx(0.02)
  assert not any(key.endswith("_sum") for key in first)


def test_update_records_hold_the_audits_as_json(tmp_path):
  metrics = two_update_metrics()
  by_family = np.zeros((2, 3, 5))  # K = 2 updates, F = 3 families, R = 5 reasons
  by_family[0, 1, 0] = 1  # update 1: family 1 fell once ...
  by_family[0, 2, 1] = 1  # ... and family 2 timed out once
  heights = np.zeros((2, 18))
  heights[0, 6] = 1  # the fall: trunk at 0.15 .. 0.175 m
  metrics.update({"audit/resets_by_family": by_family, "audit/fall_height_counts": heights,
                  "audit/fall_tilt_counts": np.zeros((2, 18)),
                  "trace/valid": np.zeros((2, 2), bool), "trace/qpos": np.zeros((2, 2, 11, 19))})
  first, second = records_lib.update_records(metrics, first_update=0, batch_size=96, sps=1.0,
                                        wall_seconds=1.0, device_memory=None)
  assert first["audit/resets_by_family"] == {"1": {"fall": 1}, "2": {"timeout": 1}}
  assert first["audit/fall_height_counts"] == [0] * 6 + [1] + [0] * 11
  assert second["audit/resets_by_family"] == {}
  assert not any(key.startswith("trace/") for key in first)
  with ledger.Ledger(tmp_path / ledger.FILENAME) as book:
    book.write(first)
  assert ledger.read(tmp_path / ledger.FILENAME)[0]["audit/resets_by_family"] == {
      "1": {"fall": 1}, "2": {"timeout": 1}}


def test_ledger_round_trip(tmp_path):
  path = tmp_path / ledger.FILENAME
  r = provenance.recipe(big_config(), stand_in_manifest())
  update = {"kind": "update", "update": 1, "env_steps": 96, "episode/return": 2.5,
            "perf/sps": np.float32(100.0)}
  evaluation = ledger.eval_record(eval_result(), update=1, env_steps=96, wall_seconds=1.5)
  with ledger.Ledger(path) as book:
    for record in (r, update, evaluation):
      book.write(record)
  assert ledger.read(path) == [r, {**update, "perf/sps": 100.0}, evaluation]
  assert ledger.read_run(tmp_path)[2]["strata"]["flat"]["reset"]["timeout"] == 28
  assert evaluation["wall_seconds"] == 1.5 and evaluation["panel_hash"] == "def"


def test_nan_and_inf_are_written_as_null(tmp_path):
  path = tmp_path / ledger.FILENAME
  with ledger.Ledger(path) as book:
    book.write({"kind": "update", "episode/return": float("nan"),
                "nested": {"x": [1.0, float("inf")], "y": np.float32("nan")}})
  assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()
  assert ledger.read(path) == [
      {"kind": "update", "episode/return": None, "nested": {"x": [1.0, None], "y": None}}]


def test_write_refuses_a_bad_kind(tmp_path):
  with ledger.Ledger(tmp_path / ledger.FILENAME) as book:
    with pytest.raises(ValueError, match="'metrics'.*recipe, update, eval"):
      book.write({"kind": "metrics"})
    with pytest.raises(ValueError, match="None"):
      book.write({"update": 1})
  assert (tmp_path / ledger.FILENAME).read_text() == ""


def test_read_errors_name_the_path_and_line(tmp_path):
  path = tmp_path / ledger.FILENAME
  path.write_text('{"kind": "recipe"}\n{"kind": "update", "update": \n')
  with pytest.raises(ValueError, match=r"ledger\.jsonl:2: malformed"):
    ledger.read(path)
  with pytest.raises(FileNotFoundError, match="nowhere"):
    ledger.read(tmp_path / "nowhere.jsonl")
  with pytest.raises(FileNotFoundError, match="no run folder"):
    ledger.read_run(tmp_path / "missing_run")


def test_format_eval_table():
  record = ledger.eval_record(eval_result(), update=2, env_steps=196608, wall_seconds=9.5)
  record["strata"]["slope"]["return"] = None  # a NaN that went through the file
  table = ledger.format_eval_table(record)
  lines = table.splitlines()
  assert "196,608 env steps" in lines[0]
  flat = next(line for line in lines if line.startswith("flat"))
  slope = next(line for line in lines if line.startswith("slope"))
  for text in ("32", "87.5%", "9.4%", "480.2", "0.123", "0.250", "12.50", "timeout=28 fall=3"):
    assert text in flat, (text, flat)
  assert "50.0%" in slope and "timeout=20 fall=8" in slope and " - " in slope
  assert len({len(line) for line in lines[1:]}) <= 2  # fixed width (resets column aside)


def test_a_long_stratum_name_widens_the_column():
  record = ledger.eval_record(eval_result(), update=2, env_steps=196608, wall_seconds=9.5)
  record["strata"]["stairs_down_20cm"] = record["strata"].pop("slope")
  lines = ledger.format_eval_table(record).splitlines()
  # The envs column ends at the same place in the header and every row: 17 + 6 characters.
  assert [line[:23].rstrip()[-4:] for line in lines[1:]] == ["envs", "  32", "  32"], lines
  assert lines[3].startswith("stairs_down_20cm ")


def test_format_recipe():
  text = ledger.format_recipe(provenance.recipe(big_config(), stand_in_manifest()))
  for piece in ("4096 envs x 24 steps = 98,304", "0.48 s", "1,966.1 robot-seconds",
                "128 train (32 envs each)", "40 eval", "manifest   abc  panel def"):
    assert piece in text, piece


def test_format_comparison():
  a = ledger.eval_record(eval_result(success=0.5), update=2, env_steps=1, wall_seconds=1.0)
  b = ledger.eval_record(eval_result(success=0.875), update=4, env_steps=2, wall_seconds=2.0)
  text = ledger.format_comparison(a, b, ("runs/a", "runs/b"))
  flat = next(line for line in text.splitlines() if line.startswith("flat"))
  assert "runs/a" in text and "runs/b" in text
  assert "50.0%" in flat and "87.5%" in flat and "+37.5%" in flat


def test_format_eval_table_of_one_seed_is_pinned():
  # A run of one seed prints as it did before runs had several: no seed count, no interval line.
  # The expected text is written out by hand.
  record = ledger.eval_record(eval_result(), update=2, env_steps=196608, wall_seconds=9.5)
  assert ledger.format_eval_table(record) == "\n".join([
      "evaluation at update 2 (196,608 env steps), panel def",
      "stratum     envs  success    fall   length  lin err  yaw err    return  resets",
      "flat          32    87.5%    9.4%    480.2    0.123    0.250     12.50  timeout=28 fall=3",
      "slope         32    50.0%   25.0%    480.2    0.123    0.250     12.50  timeout=20 fall=8"])


def seed_stratum(success: float, fall: float, lin: float, yaw: float) -> dict:
  """One seed's table of one stratum, 32 envs."""
  falls = round(32 * fall)
  return {"num_envs": 32, "success_rate": success, "fall_rate": fall, "episode_length": 400.0,
          "lin_vel_error": lin, "yaw_rate_error": yaw, "return": 10.0,
          "reset": {"fall": falls, "timeout": 32 - falls}}


def seeded_eval(per_seed: list[dict], update: int = 2) -> dict:
  """An eval record of several seeds, as a run of `config.num_seeds` = len(per_seed) writes it."""
  strata, spreads = spread.across_seeds(per_seed)
  return ledger.eval_record({"panel_hash": "def", "num_seeds": len(per_seed), "strata": strata,
                             "seeds": per_seed, "spread": spreads},
                            update=update, env_steps=196608, wall_seconds=9.5)


def run_a_seeds() -> list[dict]:
  return [{"flat": seed_stratum(0.5, 0.25, 0.1, 0.5)}, {"flat": seed_stratum(0.75, 0.25, 0.2, 0.5)}]


def run_b_seeds() -> list[dict]:
  return [{"flat": seed_stratum(1.0, 0.0, 0.4, 0.25), "slope": seed_stratum(0.5, 0.5, 0.3, 0.3)},
          {"flat": seed_stratum(1.0, 0.5, 0.5, 0.25), "slope": seed_stratum(0.5, 0.5, 0.3, 0.3)}]


def test_format_eval_table_of_several_seeds():
  # Two seeds succeed on flat in 50% and 75%: a resample is both of one seed with probability
  # 1/4 (more than 2.5%), so the 95% interval runs from one seed's value to the other's.
  table = ledger.format_eval_table(seeded_eval(run_a_seeds()))
  lines = table.splitlines()
  assert lines[0] == ("evaluation at update 2 (196,608 env steps), panel def; 2 seeds: envs per "
                      "seed, figures the mean over seeds, resets summed over seeds")
  assert lines[2].split() == ["flat", "32", "62.5%", "25.0%", "400.0", "0.150", "0.500", "10.00",
                              "timeout=48", "fall=16"]
  assert lines[3] == " " * 12 + "success 95% CI [50.0%, 75.0%]  fall [25.0%, 25.0%]"
  assert len(lines) == 4


def test_format_seed_comparison():
  # Worked out by hand. Run a's two seeds, run b's two: each run's resampled mean is one seed's
  # value twice with probability 1/4, so d's extremes have probability 1/16 = 6.25% > 2.5% and
  # are the interval's ends.
  #   success  a 0.5, 0.75 (mean 0.625); b 1, 1: d = 0.375 in [1 - 0.75, 1 - 0.5] (b better)
  #   fall     a 0.25, 0.25; b 0, 0.5 (mean 0.25): d = 0 in [-0.25, 0.25] (within spread)
  #   lin err  a 0.1, 0.2; b 0.4, 0.5: d = 0.3 in [0.4 - 0.2, 0.5 - 0.1] (b worse: lower is better)
  #   yaw err  a 0.5, 0.5; b 0.25, 0.25: d = -0.25 in [-0.25, -0.25] (b better)
  # Slope is b's alone: its rows have b's means and no difference.
  a, b = seeded_eval(run_a_seeds()), seeded_eval(run_b_seeds(), update=4)
  text = ledger.format_seed_comparison(a, b, ("runs/a", "runs/b"))
  lines = text.splitlines()
  assert lines[0].startswith("a = runs/a (update 2, 2 seeds), b = runs/b (update 4, 2 seeds); "
                             "d = b - a"), lines[0]
  assert lines[1].split() == ["stratum", "figure", "a", "b", "d", "95%", "interval", "of", "d",
                              "mark"]
  assert [line.split() for line in lines[2:]] == [
      ["flat", "success", "62.5%", "100.0%", "+37.5%", "[+25.0%,", "+50.0%]", "b", "better"],
      ["flat", "fall", "25.0%", "25.0%", "+0.0%", "[-25.0%,", "+25.0%]", "within", "spread"],
      ["flat", "lin", "err", "0.150", "0.450", "+0.300", "[+0.200,", "+0.400]", "b", "worse"],
      ["flat", "yaw", "err", "0.500", "0.250", "-0.250", "[-0.250,", "-0.250]", "b", "better"],
      ["slope", "success", "-", "50.0%", "-", "-", "-"],
      ["slope", "fall", "-", "50.0%", "-", "-", "-"],
      ["slope", "lin", "err", "-", "0.300", "-", "-", "-"],
      ["slope", "yaw", "err", "-", "0.300", "-", "-", "-"]]
  # The mark starts in the same column on every row with one.
  assert len({line.index(mark) for line in lines[2:6]
              for mark in ("within", "b better", "b worse") if mark in line}) == 1


def test_format_comparison_notes_when_only_one_run_has_several_seeds():
  one = ledger.eval_record(eval_result(success=0.5), update=2, env_steps=1, wall_seconds=1.0)
  several = seeded_eval(run_b_seeds(), update=4)
  text = ledger.format_comparison(one, several, ("runs/a", "runs/b"))
  flat = next(line for line in text.splitlines() if line.startswith("flat"))
  assert flat.split()[1:4] == ["50.0%", "100.0%", "+50.0%"], flat  # b's mean over seeds
  assert text.splitlines()[-1] == (
      "d has no interval over seeds: that needs several seeds on both sides, and runs/a has one "
      "(the figures of runs/b are the means over its seeds)")
  # Two runs of one seed each: no note.
  assert "interval" not in ledger.format_comparison(one, one, ("runs/a", "runs/b"))


def write_seeded_eval(run_dir: pathlib.Path, per_seed: list[dict]) -> None:
  """Appends an evaluation of several seeds (at update 3) to a run written by `write_run`."""
  with ledger.Ledger(run_dir / ledger.FILENAME) as book:
    book.write(seeded_eval(per_seed, update=3))


def test_cli_compares_two_multi_seed_runs_over_seeds(tmp_path):
  for run, per_seed in (("a", run_a_seeds()), ("b", run_b_seeds())):
    write_run(tmp_path / run)
    write_seeded_eval(tmp_path / run, per_seed)
  write_run(tmp_path / "c")  # one seed
  names = {run: str(tmp_path / run) for run in "abc"}
  evaluations = {run: ledger.latest(ledger.read_run(tmp_path / run), "eval") for run in "abc"}
  ran = commands.run_main(ledger_cli.main, names["a"], names["b"])
  assert (ran.status, ran.err) == (0, "")
  assert ran.out == ledger.format_seed_comparison(
      evaluations["a"], evaluations["b"], (names["a"], names["b"])) + "\n"
  assert "95% interval of d" in ran.out and "[+25.0%, +50.0%]" in ran.out
  # One run of several seeds against one of one: the means side by side, and the note.
  ran = commands.run_main(ledger_cli.main, names["a"], names["c"])
  assert (ran.status, ran.err) == (0, "")
  assert ran.out == ledger.format_comparison(
      evaluations["a"], evaluations["c"], (names["a"], names["c"])) + "\n"
  assert "needs several seeds on both sides" in ran.out and "95% interval" not in ran.out


def test_cli_shows_one_run(tmp_path):
  write_run(tmp_path / "a")
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"))
  assert (ran.status, ran.err) == (0, "")
  records = ledger.read_run(tmp_path / "a")
  assert ran.out == (f"{ledger.format_recipe(ledger.latest(records, 'recipe'))}\n"
                     "last update 2: 196,608 env steps, return -, sps 12,345\n"
                     f"{ledger.format_eval_table(ledger.latest(records, 'eval'))}\n")
  assert "98,304 samples/update" in ran.out
  assert "flat" in ran.out and "slope" in ran.out and "timeout=28 fall=3" in ran.out


def test_cli_without_evaluation(tmp_path):
  write_run(tmp_path / "a", with_eval=False)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"))
  assert ran.status == 0
  assert ran.out.endswith("\nno evaluation yet\n")


def test_cli_compares_runs_on_the_same_panel(tmp_path):
  write_run(tmp_path / "a", success=0.5)
  write_run(tmp_path / "b", success=0.875)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"), str(tmp_path / "b"))
  assert (ran.status, ran.err) == (0, "")
  evaluations = [ledger.latest(ledger.read_run(tmp_path / run), "eval") for run in "ab"]
  assert ran.out == ledger.format_comparison(
      *evaluations, (str(tmp_path / "a"), str(tmp_path / "b"))) + "\n"
  assert "+37.5%" in ran.out


def test_cli_refuses_runs_on_different_panels(tmp_path):
  # The documented refusal: the reason on stderr and SystemExit with status 1.
  write_run(tmp_path / "a", panel_hash="panel111")
  write_run(tmp_path / "b", panel_hash="panel222")
  before = commands.folder_digest(tmp_path)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"), str(tmp_path / "b"))
  assert ran.status == 1
  assert ran.err == (f"error: refusing to compare: the evaluation panels differ ({tmp_path / 'a'}: "
                     f"panel panel111, {tmp_path / 'b'}: panel panel222). Runs are compared only "
                     "on the same panel.\n")
  assert ran.out == ""
  assert commands.folder_digest(tmp_path) == before


def write_manifest(run_dir: pathlib.Path, **terrain) -> str:
  """A heightfield run's manifest.json in `run_dir`; returns its panel hash."""
  cfg = configs.with_changes(terrain__ground="heightfield", families__spawn_offset=0.2,
                             **{f"terrain__{key}": value for key, value in terrain.items()})
  manifest = families.make_manifest(cfg)
  (run_dir / "manifest.json").write_text(manifest.to_json())
  return manifest.panel_hash


def test_cli_compares_runs_whose_manifests_hash_to_one_panel_today(tmp_path):
  # Recipes recorded under an older panel hash, which took in the promotion rules: the two
  # manifests differ in those rules only, so their panel hashes today agree and the runs compare.
  write_run(tmp_path / "a", panel_hash="panel111")
  write_run(tmp_path / "b", panel_hash="panel222", success=0.5)
  write_manifest(tmp_path / "a")
  write_manifest(tmp_path / "b", promote_distance=2.0, promote_within_reach=True)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"), str(tmp_path / "b"))
  assert (ran.status, ran.err) == (0, "")
  evaluations = [ledger.latest(ledger.read_run(tmp_path / run), "eval") for run in "ab"]
  assert ran.out == ledger.format_comparison(
      *evaluations, (str(tmp_path / "a"), str(tmp_path / "b"))) + "\n"


def test_cli_refuses_runs_whose_manifests_hash_to_two_panels(tmp_path):
  write_run(tmp_path / "a", panel_hash="panel111")
  write_run(tmp_path / "b", panel_hash="panel222")
  hashes = [write_manifest(tmp_path / "a"), write_manifest(tmp_path / "b", panel_stair_height=0.12)]
  before = commands.folder_digest(tmp_path)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"), str(tmp_path / "b"))
  assert (ran.status, ran.out) == (1, "")
  assert ran.err == (f"error: refusing to compare: the evaluation panels differ ({tmp_path / 'a'}: "
                     f"panel {hashes[0]}, {tmp_path / 'b'}: panel {hashes[1]}). Runs are compared "
                     "only on the same panel.\n")
  assert commands.folder_digest(tmp_path) == before


def test_cli_refuses_a_comparison_whose_manifest_was_edited(tmp_path):
  write_run(tmp_path / "a", panel_hash="panel111")
  write_run(tmp_path / "b", panel_hash="panel222")
  write_manifest(tmp_path / "a")
  write_manifest(tmp_path / "b")
  path = tmp_path / "b" / "manifest.json"
  values = json.loads(path.read_text())
  values["eval_families"][0]["seed"] += 1
  path.write_text(json.dumps(values))
  recorded = values["hash"]
  before = commands.folder_digest(tmp_path)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"), str(tmp_path / "b"))
  assert (ran.status, ran.out) == (1, "")
  assert ran.err.startswith(f"error: {tmp_path / 'b'}: manifest content hashes to ")
  assert ran.err.endswith(f" but records {recorded}; it was edited or corrupted\n")
  assert commands.folder_digest(tmp_path) == before


def test_cli_refuses_a_comparison_without_an_evaluation(tmp_path):
  write_run(tmp_path / "a")
  write_run(tmp_path / "b", with_eval=False)
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"), str(tmp_path / "b"))
  assert (ran.status, ran.out) == (1, "")
  assert ran.err == f"error: {tmp_path / 'b'} has no evaluation yet; nothing to compare\n"


def test_cli_wants_one_or_two_run_folders():
  # A wrong number of folders: one error line and status 2, not absl's flag help.
  for args in ((), ("a", "b", "c")):
    ran = commands.run_main(ledger_cli.main, *args)
    assert (ran.status, ran.out) == (2, "")
    assert ran.err == f"error: give one run folder, or two to compare; got {len(args)}\n"


def test_cli_names_a_missing_folder_or_ledger(tmp_path):
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "missing"))
  assert (ran.status, ran.out) == (1, "")
  assert ran.err == f"error: no run folder at {tmp_path / 'missing'}\n"
  (tmp_path / "empty").mkdir()
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "empty"))
  assert (ran.status, ran.out) == (1, "")
  assert ran.err == f"error: no ledger at {tmp_path / 'empty' / ledger.FILENAME}\n"
  assert not list((tmp_path / "empty").iterdir())


def test_cli_refuses_a_ledger_without_a_recipe(tmp_path):
  (tmp_path / "a").mkdir()
  (tmp_path / "a" / ledger.FILENAME).write_text('{"kind": "update", "update": 1}\n')
  ran = commands.run_main(ledger_cli.main, str(tmp_path / "a"))
  assert (ran.status, ran.out) == (1, "")
  assert ran.err == f"error: {tmp_path / 'a' / ledger.FILENAME} has no recipe record\n"


def test_cli_refuses_a_malformed_ledger_naming_the_file_and_line(tmp_path):
  # A line cut short, and a record of a kind this version does not know: each refused with
  # status 1, naming the file and line (and the accepted kinds), alone or in a comparison;
  # nothing is printed or changed. Catches a malformed ledger that escapes as a traceback.
  write_run(tmp_path / "good")
  write_run(tmp_path / "cut")
  cut = tmp_path / "cut" / ledger.FILENAME
  lines = cut.read_text().splitlines(keepends=True)
  broken = lines[2][:len(lines[2]) // 2] + "\n"
  try:
    json.loads(broken)
  except json.JSONDecodeError as error:
    reason = error.msg  # the JSON parser's own words for the cut line
  cut.write_text("".join(lines[:2] + [broken] + lines[3:]))
  write_run(tmp_path / "unknown")
  unknown = tmp_path / "unknown" / ledger.FILENAME
  with unknown.open("a") as file:
    file.write('{"kind": "videos", "update": 2}\n')
  before = commands.folder_digest(tmp_path)
  for runs, message in (
      (("cut",), f"{cut}:3: malformed ledger line ({reason})"),
      (("good", "cut"), f"{cut}:3: malformed ledger line ({reason})"),
      (("unknown",), f"{unknown}:5: ledger record kind 'videos' is invalid; accepted kinds are "
                     f"{', '.join(ledger.KINDS)}.")):
    ran = commands.run_main(ledger_cli.main, *(str(tmp_path / run) for run in runs))
    assert (ran.status, ran.out) == (1, ""), ran.err
    assert ran.err == f"error: {message}\n"
  assert commands.folder_digest(tmp_path) == before


class TestTruncateAfter:
  """`ledger.truncate_after`, which a resume (`mjx_walk.train`) calls to rewind the ledger to the
  checkpoint it restored. Catches a rewind that keeps a record past the checkpoint (the resumed
  run would write that update twice), drops the checkpoint's own update or its evaluation, drops
  the run's history (recipes, divergences), rewrites a kept line, or deletes instead of moving."""

  # A run killed after its checkpoint at update 2: it wrote updates 3 and 4, an evaluation at 4
  # and half a line. Written out by hand, as `Ledger.write` writes (one JSON object a line).
  BEFORE = ('{"kind": "recipe", "seed": 0}\n',
            '{"kind": "update", "update": 1, "episode/return": null}\n',
            '{"kind": "update", "update": 2, "episode/return": 2.5}\n',
            '{"kind": "eval", "update": 2, "strata": {"flat": {"success_rate": 0.5}}}\n')
  # Past the checkpoint: a divergence (history, kept) among records that are dropped.
  AFTER = ('{"kind": "update", "update": 3, "episode/return": 3.5}\n',
           '{"kind": "divergence", "update": 4, "quantities": ["loss/total"]}\n',
           '{"kind": "update", "update": 4, "episode/return": 4.5}\n',
           '{"kind": "eval", "update": 4, "strata": {"flat": {"success_rate": 1.0}}}\n',
           '{"kind": "update", "upd')  # torn by the kill: no newline, not JSON

  def test_drops_the_records_past_the_checkpoint_and_keeps_the_rest_byte_for_byte(self, tmp_path):
    path, dropped = tmp_path / ledger.FILENAME, tmp_path / "ledger.dropped.jsonl"
    path.write_text("".join(self.BEFORE + self.AFTER))
    dropped.write_text('{"kind": "update", "update": 9}\n')  # from an earlier resume: kept
    moved = ledger.truncate_after(path, 2, dropped)
    assert moved == 4  # updates 3 and 4, the evaluation at 4, the torn line
    assert path.read_text() == "".join(self.BEFORE) + self.AFTER[1]
    assert dropped.read_text() == ('{"kind": "update", "update": 9}\n' + self.AFTER[0]
                                   + "".join(self.AFTER[2:4]) + self.AFTER[4] + "\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([ledger.FILENAME, dropped.name])
    # The resumed run appends from there: update 3 follows the checkpoint's records.
    with ledger.Ledger(path) as book:
      book.write({"kind": "update", "update": 3, "episode/return": 3.25})
    assert [(r["kind"], r.get("update")) for r in ledger.read(path)] == [
        ("recipe", None), ("update", 1), ("update", 2), ("eval", 2), ("divergence", 4),
        ("update", 3)]

  def test_nothing_past_the_checkpoint_leaves_the_files_alone(self, tmp_path):
    path, dropped = tmp_path / ledger.FILENAME, tmp_path / "ledger.dropped.jsonl"
    path.write_text("".join(self.BEFORE))
    before = path.stat().st_mtime_ns
    assert ledger.truncate_after(path, 2, dropped) == 0
    assert path.read_text() == "".join(self.BEFORE)
    assert path.stat().st_mtime_ns == before  # not rewritten
    assert not dropped.exists()
    assert ledger.truncate_after(tmp_path / "missing.jsonl", 2, dropped) == 0


class LedgerFormatTest(absltest.TestCase):
  """The file format: its kinds and JSON without NaN or NumPy types (the rewind to a checkpoint
  is `TestTruncateAfter`). The expected lines are written out here by hand."""

  KINDS = ("recipe", "update", "eval", "divergence", "sim2sim")
  """The kinds the module docstring documents."""

  def test_every_documented_kind_is_written_and_read_back(self):
    # Catches a kind missing from KINDS (a sim2sim check that could not be recorded) or one
    # accepted that is not documented.
    self.assertEqual(ledger.KINDS, self.KINDS)
    path = pathlib.Path(self.create_tempdir().full_path) / ledger.FILENAME
    records = [{"kind": kind, "update": i} for i, kind in enumerate(self.KINDS)]
    with ledger.Ledger(path) as book:
      for record in records:
        book.write(record)
    self.assertEqual(ledger.read(path), records)
    for record in records:
      self.assertEqual(ledger.of_kind(records, record["kind"]), [record])

  def test_read_refuses_an_unknown_or_missing_kind_naming_the_line(self):
    # Catches a reader that lets a record of another kind (or none) through to the tables.
    path = pathlib.Path(self.create_tempdir().full_path) / ledger.FILENAME
    accepted = "accepted kinds are recipe, update, eval, divergence, sim2sim."
    path.write_text('{"kind": "recipe"}\n{"kind": "metrics", "update": 1}\n')
    with self.assertRaises(ValueError) as raised:
      ledger.read(path)
    self.assertEqual(str(raised.exception),
                     f"{path}:2: ledger record kind 'metrics' is invalid; {accepted}")
    path.write_text('{"update": 1}\n')
    with self.assertRaises(ValueError) as raised:
      ledger.read(path)
    self.assertEqual(str(raised.exception),
                     f"{path}:1: ledger record kind None is invalid; {accepted}")

  def test_a_record_without_a_kind_counts_as_an_update(self):
    # Records written before kinds existed are updates; catches them dropped from the curves.
    old, evaluation, new = {"update": 1}, {"kind": "eval", "update": 1}, {"kind": "update",
                                                                          "update": 2}
    self.assertEqual(ledger.of_kind([old, evaluation, new], "update"), [old, new])
    self.assertEqual(ledger.of_kind([old, evaluation, new], "eval"), [evaluation])
    with self.assertRaisesRegex(ValueError, "'updates' is invalid"):
      ledger.of_kind([old], "updates")

  def test_numpy_values_nan_and_infinities_become_plain_json(self):
    # Catches infinities written as `Infinity` (not JSON) or refused, and NumPy scalars and
    # arrays that json cannot write. The line is compared character for character.
    path = pathlib.Path(self.create_tempdir().full_path) / ledger.FILENAME
    with ledger.Ledger(path) as book:
      book.write({"kind": "update", "a": np.float32(1.5), "b": np.int64(3),
                  "c": np.array([1.0, np.nan, np.inf]), "d": np.bool_(True),
                  "e": (np.float32(-np.inf), float("-inf")), "f": {7: np.float64(np.nan)}})
    self.assertEqual(path.read_text(), '{"kind": "update", "a": 1.5, "b": 3, '
                     '"c": [1.0, null, null], "d": true, "e": [null, null], "f": {"7": null}}\n')
