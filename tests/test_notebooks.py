"""The notebooks run top to bottom in a real kernel, as a user would run them (slow-marked).

`quickstart.ipynb` runs with its parameters cell replaced by a tiny config (the same geometry as
`configs.TINY`), so the whole notebook — install check, training, recipe, plots, eval table and
video — runs in CI's time. Every cell must finish without an error, and the cells that print the
run's records must print real figures of that run.
"""

import json
import pathlib

import nbclient
import nbformat
import pytest

from mjx_walk.evaluation import traces as trace_files
from mjx_walk.run import ledger

import configs
import runs
import pictures

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"

# Slow (`pytest -m slow`, which CI runs): each notebook starts a kernel of its own, which imports
# the stack, traces the trainer and the panel and renders videos, 38 and 43 CPU seconds on the
# 2-core machine (2026-12-06), 6% of the default suite's CPU for two tests.
pytestmark = pytest.mark.slow

# The notebook sets fields by dotted path, as the CLI does. The tiny panel as it is (5-step
# episodes, videos of 3 frames), so that the notebook's panel is the program the shared run
# compiled; it is evaluated every 2 chunks, so twice in 3 chunks.
TINY_OVERRIDES = {
    **{path.replace("__", "."): value for path, value in configs.TINY.items()},
    "total_env_steps": 3 * 8 * 6 * 2,
    "panel.every_chunks": 2,
    "report.video_width": 64,
    "report.video_height": 48,
}


# The walkthrough sets its sizes itself; these turn them into the tiny geometry (a chunk of 2
# updates of 8 envs x 6 steps, a panel of one env per family and 5-step episodes).
WALKTHROUGH_OVERRIDES = {path.replace("__", "."): value for path, value in configs.TINY.items()}


def _execute(notebook: nbformat.NotebookNode, cwd: pathlib.Path) -> nbformat.NotebookNode:
  client = nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                                   resources={"metadata": {"path": str(cwd)}})
  return client.execute()


def _errors(notebook: nbformat.NotebookNode) -> list[dict]:
  return [out for cell in notebook.cells for out in cell.get("outputs", [])
          if out.get("output_type") == "error"]


def _text(cell: nbformat.NotebookNode) -> str:
  return "".join(out.get("text", "") for out in cell.get("outputs", []))


def test_quickstart_runs_top_to_bottom(tmp_path):
  runs.warm()  # the tiny config's programs, compiled once for every worker
  notebook = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
  run_dir = tmp_path / "runs" / "quickstart"
  _set_parameters(notebook, f"RUN_DIR = {str(run_dir)!r}\nOVERRIDES = {TINY_OVERRIDES!r}\n")

  executed = _execute(notebook, tmp_path)

  assert not _errors(executed)
  # The run folder is the notebook's: its ledger holds the 6 updates of the tiny config, and the
  # cells printed this run's recipe and its final evaluation.
  records = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
  updates = ledger.of_kind(records, "update")
  evals = ledger.of_kind(records, "eval")
  assert [r["update"] for r in updates] == list(range(1, 7))
  assert [r["update"] for r in evals] == [4, 6]
  printed = "\n".join(_text(c) for c in executed.cells if c.cell_type == "code")
  assert "geometry   8 envs x 6 steps = 48 samples/update" in printed
  assert f"manifest   {records[0]['manifest_hash']}" in printed
  assert "evaluation at update 6 (288 env steps)" in printed
  for stratum in ("flat", "slope", "push", "payload", "friction"):
    assert f"\n{stratum:<10}{1:>6}" in printed
  images = [out for cell in executed.cells for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})]
  assert len(images) == 3  # the inline ledger plot, the learning curve and the reward terms
  # The final evaluation's videos were rendered, one per stratum, each one frame per 2 control
  # steps (50 Hz control, 25 fps) of its traced episode, and the video cell embedded one.
  # Catches a rendering failure the run swallows (the cell would print "no videos in ...").
  saved = trace_files.load_eval_traces(run_dir / "eval" / "6_traces.npz")
  for s, stratum in enumerate(saved.strata):
    frames, _ = pictures.read_video(run_dir / "videos" / "6" / f"{stratum}.mp4")
    assert frames.shape == (-(-int(saved.traces.length[s]) // 2), 48, 64, 3), stratum
  assert "no videos in" not in printed
  assert any("<video" in out.get("data", {}).get("text/html", "")
             for cell in executed.cells for out in cell.get("outputs", []))


def _set_parameters(notebook: nbformat.NotebookNode, source: str) -> None:
  """Replaces the one cell tagged `parameters` with `source`."""
  parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
  assert len(parameters) == 1
  parameters[0].source = source


def test_walkthrough_runs_top_to_bottom(tmp_path):
  runs.warm()
  # On the tiny geometry, so that its chunk and panel are the programs the trainer tests compile.
  notebook = nbformat.read(NOTEBOOKS / "walkthrough.ipynb", as_version=4)
  _set_parameters(notebook, f"OVERRIDES = {WALKTHROUGH_OVERRIDES!r}\n")
  executed = _execute(notebook, tmp_path)
  assert not _errors(executed)
  printed = "\n".join(_text(c) for c in executed.cells if c.cell_type == "code")
  assert "48 samples per update; 96 env steps per chunk" in printed
  for stratum in ("flat", "slope", "push", "payload", "friction"):
    assert f"\n{stratum:<10}{1:>6}" in printed
