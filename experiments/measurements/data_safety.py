"""Tries, as a new user would, every way the issue tracker found to lose or corrupt a run, and
shows what the command line does now.

  python experiments/measurements/data_safety.py                    # scratch folders, a temp dir
  python experiments/measurements/data_safety.py --workdir=/tmp/ds  # or here (must not exist)

Each row is one command run in a subprocess: its exit status, the first line it wrote to stderr
(or the line that matters on stdout), and whether the files that were already saved are byte for
byte what they were (sha256 of every file before and after). The scenarios: a reused run folder;
corrupted checkpoint bytes (resume, and an explicit --step); array data changed inside a valid
Orbax file (what only the checksums catch); a checkpoint written with other
network sizes; NaN and inf in float fields of every config section; a malformed robot MJCF; a
resume with every checkpoint unreadable; a forced divergence. Runs use the tests' tiny config
(8 envs, 2 updates per chunk), so the whole table takes a few minutes on 2 CPU cores.

Prints a markdown table, then one JSON line with every row.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np
import orbax.checkpoint as ocp

from mjx_walk import cli

REPO = pathlib.Path(__file__).resolve().parents[2]
_WORKDIR = flags.DEFINE_string("workdir", None, "Scratch folder (created; must not exist).")

TINY = [
    "--config.num_envs=8", "--config.unroll_length=6", "--config.updates_per_chunk=2",
    "--config.ppo.num_minibatches=2", "--config.ppo.num_epochs=2",
    "--config.network.actor_hidden_sizes=(16,16)", "--config.network.critic_hidden_sizes=(16,16)",
    "--config.env.episode_seconds=0.1", "--config.families.num_train_families=4",
    "--config.panel.families_per_stratum=1", "--config.panel.envs_per_family=1",
    "--config.panel.episode_seconds=0.1", "--config.panel.every_chunks=0",
    "--config.checkpoint.every_chunks=1", "--config.total_env_steps=288",  # 3 chunks
]


def digest(root: pathlib.Path) -> str:
  """One sha256 over every file's relative path and bytes under `root`."""
  total = hashlib.sha256()
  for path in sorted(p for p in root.rglob("*") if p.is_file()):
    total.update(str(path.relative_to(root)).encode())
    total.update(hashlib.sha256(path.read_bytes()).digest())
  return total.hexdigest()[:12]


def command(*args: str, cwd: pathlib.Path = REPO, module: str = "mjx_walk.train"
            ) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=str(cwd))
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                        cwd=cwd, env=env, timeout=900, check=False)


def first_line(text: str) -> str:
  return next((line for line in text.splitlines() if line.strip()), "")


def flip_bytes(step_dir: pathlib.Path) -> None:
  """Flips 4 bytes in the middle of every array data file of a checkpoint."""
  for victim in step_dir.glob("*/**/d/*"):
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4] = bytes(b ^ 0xFF for b in data[middle:middle + 4])
    victim.write_bytes(bytes(data))


def main(argv: list[str]) -> None:
  del argv
  cli.quiet_library_logs()
  work = pathlib.Path(_WORKDIR.value or tempfile.mkdtemp(prefix="mjx_walk-data-safety-"))
  work.mkdir(parents=True, exist_ok=_WORKDIR.value is None)
  rows = []

  def row(scenario: str, shown: str, result: subprocess.CompletedProcess, message: str,
          unchanged: str) -> None:
    rows.append({"scenario": scenario, "command": shown, "exit": result.returncode,
                 "message": message, "saved_files_unchanged": unchanged})
    print(f"[{len(rows)}] {scenario}: exit {result.returncode}", file=sys.stderr, flush=True)

  # A finished run to abuse: checkpoints at updates 2, 4 and 6.
  base = work / "run"
  done = command(f"--run_dir={base}", *TINY)
  assert done.returncode == 0, done.stderr
  quiet = "Failed to import" not in done.stdout + done.stderr

  # 1. The same folder for a new run.
  before = digest(base)
  result = command(f"--run_dir={base}", *TINY, "--config.seed=1")
  row("reused run folder", "train --run_dir=run (a finished run) --config.seed=1", result,
      first_line(result.stderr), f"{before} -> {digest(base)}")

  # 2. A corrupted byte in the newest checkpoint: an explicit --step, then a resume.
  corrupt = work / "corrupt"
  shutil.copytree(base, corrupt)
  flip_bytes(corrupt / "checkpoints" / "6")
  before = digest(corrupt)
  result = command(f"--run_dir={corrupt}", "--step=6", module="mjx_walk.evaluate")
  row("corrupted checkpoint byte, explicit step", "evaluate --run_dir=corrupt --step=6", result,
      " ".join(result.stderr.split())[:220], f"{before} -> {digest(corrupt)}")
  older = {s: digest(corrupt / "checkpoints" / s) for s in ("2", "4")}
  broken = digest(corrupt / "checkpoints" / "6")
  result = command(f"--resume={corrupt}")
  notice = " ".join(line.strip() for line in result.stdout.splitlines()
                    if line.startswith(("checkpoint step 6", "    train/", "restored step")))
  kept = all(digest(corrupt / "checkpoints" / s) == d for s, d in older.items())
  moved = digest(corrupt / "checkpoints_unreadable" / "6") == broken
  row("corrupted checkpoint byte, resume", "train --resume=corrupt", result, notice[:300],
      f"checkpoints 2, 4 {'unchanged' if kept else 'CHANGED'}; 6 moved to "
      f"checkpoints_unreadable/ {'unchanged' if moved else 'CHANGED'}")

  # 2b. Silent corruption: the newest train item rewritten as a valid Orbax item whose one
  # Adam moment is off by 6e10 (what the old restore accepted without complaint).
  silent = work / "silent"
  shutil.copytree(base, silent)
  item = silent / "checkpoints" / "6" / "train"
  with ocp.StandardCheckpointer() as checkpointer:
    tree = {name: np.asarray(value) for name, value in checkpointer.restore(item).items()}
  leaf = sorted(name for name in tree if "_nu_actor" in name)[0]
  tree[leaf] = tree[leaf].copy()
  tree[leaf].flat[0] += 6e10
  shutil.rmtree(item)
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(item, tree)
  older = {s: digest(silent / "checkpoints" / s) for s in ("2", "4")}
  result = command(f"--resume={silent}")
  notice = " ".join(line.strip() for line in result.stdout.splitlines()
                    if line.startswith(("checkpoint step 6", "    train/", "restored step")))
  kept = all(digest(silent / "checkpoints" / s) == d for s, d in older.items())
  row("changed array data (a valid Orbax file)", "train --resume=silent", result, notice[:300],
      f"checkpoints 2, 4 {'unchanged' if kept else 'CHANGED'}; 6 moved to "
      "checkpoints_unreadable/")

  # 3. A checkpoint written with other network sizes, copied in as the newest step.
  wide = work / "wide"
  # (A flag given twice appends to a tuple field, so the tiny flags' sizes are replaced here.)
  wide_flags = [f for f in TINY if not f.startswith("--config.network.actor_hidden_sizes")]
  assert command(f"--run_dir={wide}", *wide_flags, "--config.network.actor_hidden_sizes=(32,32)",
                 "--config.total_env_steps=768").returncode == 0  # 8 chunks: step 16
  mixed = work / "mixed"
  shutil.copytree(base, mixed)
  shutil.copytree(wide / "checkpoints" / "16", mixed / "checkpoints" / "16")
  before = {s: digest(mixed / "checkpoints" / s) for s in ("2", "4", "6", "16")}
  # Four chunks: one more than the run had. The keep-policy may keep 10, so the comparison of
  # the older checkpoints is not confused by the newest three rotating the oldest out.
  result = command(f"--resume={mixed}", "--config.total_env_steps=384",
                   "--config.checkpoint.max_to_keep=10")
  notice = " ".join(line.strip() for line in result.stdout.splitlines()
                    if line.startswith(("checkpoint step 16", "    network", "restored step")))
  kept = all(digest(mixed / "checkpoints" / s) == before[s] for s in ("2", "4", "6"))
  moved = digest(mixed / "checkpoints_unreadable" / "16") == before["16"]
  row("checkpoint from other network sizes", "train --resume=mixed (step 16 from a (32,32) run)",
      result, notice[:300], f"checkpoints 2, 4, 6 {'unchanged' if kept else 'CHANGED'}; 16 "
      f"moved aside {'unchanged' if moved else 'CHANGED'}")

  # 4. NaN and inf, one float field of each config section.
  for flag in ("--config.env.physics_timestep=nan", "--config.families.push_seconds=inf",
               "--config.panel.push_force=-inf", "--config.reward.tracking_lin_vel=nan",
               "--config.network.init_std=inf", "--config.ppo.desired_kl=nan",
               "--config.ppo.entropy_coef=nan", "--config.ppo.value_coef=inf",
               "--config.ppo.learning_rate=inf", "--config.ppo.clip_eps=inf",
               "--config.env.noise_gyro=nan", "--config.audit.slip_speed=nan"):
    target = work / "never"
    result = command(f"--run_dir={target}", flag)
    row(f"non-finite {flag.split('=')[0][len('--config.'):]}", f"train {flag}", result,
        first_line(result.stderr), "no folder created" if not target.exists() else "CREATED")

  # 5. A malformed robot file, in a copy of the checkout.
  checkout = work / "checkout"
  files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
  for name in files:
    (checkout / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / name, checkout / name)
  go2 = checkout / "robots" / "go2" / "go2.xml"
  go2.write_text(go2.read_text().replace("</mujoco>", ""))
  target = work / "never-mjcf"
  result = command(f"--run_dir={target}", *TINY, cwd=checkout)
  row("malformed MJCF", "train (robots/go2/go2.xml without its closing tag)", result,
      " ".join(result.stderr.split())[:200],
      "no folder created" if not target.exists() else "CREATED")

  # 6. Every checkpoint unreadable.
  torn = work / "torn"
  shutil.copytree(base, torn)
  for step in ("2", "4", "6"):
    victim = max((p for p in (torn / "checkpoints" / step / "train").rglob("*") if p.is_file()),
                 key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[:100])
  before = digest(torn)
  result = command(f"--resume={torn}")
  row("every checkpoint unreadable", "train --resume=torn", result,
      first_line(result.stderr), f"{before} -> {digest(torn)}")

  # 7. A forced divergence: learning rate 10, fixed, diverges at update 7 (chunk 4).
  diverged = work / "diverged"
  result = command(f"--run_dir={diverged}", *TINY, "--config.total_env_steps=960",
                   "--config.ppo.learning_rate=10", "--config.ppo.desired_kl=0",
                   "--config.checkpoint.max_to_keep=1", "--config.checkpoint.keep_best=false")
  saved = sorted(int(p.name) for p in (diverged / "checkpoints").iterdir() if p.name.isdigit())
  last = json.loads((diverged / "ledger.jsonl").read_text().splitlines()[-1])
  row("forced divergence", "train --config.ppo.learning_rate=10 --config.ppo.desired_kl=0",
      result, " ".join(result.stderr.split())[:300],
      f"checkpoints {saved} kept; ledger ends with {last['kind']} at update {last['update']}")
  before = digest(diverged / "checkpoints")
  result = command(f"--resume={diverged}")
  row("forced divergence, resumed", "train --resume=diverged", result,
      first_line(result.stderr)[:120], f"checkpoints {before} -> "
      f"{digest(diverged / 'checkpoints')}")

  print(f"\nquiet start (no 'Failed to import' in a normal run's output): {quiet}\n")
  print("| scenario | command | exit | message | saved files |")
  print("|---|---|---|---|---|")
  for r in rows:
    print(f"| {r['scenario']} | `{r['command']}` | {r['exit']} | {r['message']} | "
          f"{r['saved_files_unchanged']} |")
  print(json.dumps({"workdir": str(work), "quiet_start": quiet, "rows": rows}))


if __name__ == "__main__":
  app.run(main)
