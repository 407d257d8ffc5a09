"""Tests for the package's layering (docs/architecture.md): imports run one way, and the light
entry points stay light.

Catches a module that imports from a layer above it (anywhere in the file, in a function or
under TYPE_CHECKING), a ledger reader that loads JAX or MuJoCo, a config file that loads MuJoCo,
a scaling rule that loads anything but the config and the standard library, a deployed policy
that drags in the trainer or the audit, and a module longer than 600 lines.
"""

import ast
import json
import pathlib
import subprocess
import sys
import textwrap

from absl.testing import absltest
import jax

from mjx_walk.learn import trainer as trainer_lib
from mjx_walk.run import checkpoint

import configs

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "mjx_walk"

LAYERS = {"config": 0, "scaling": 0, "sim": 1, "learn": 2, "run": 3, "evaluation": 4,
          "deploy": 5, "analysis": 6, "runner": 7}
"""Layer of each top-level name of the package (docs/architecture.md says what each owns);
anything else (the commands `train`, `evaluate`, `report`, `ledger`, `export`, `sim2sim`, and
`cli`, `__init__`) is the top layer. The held-out evaluation sits below both what leaves JAX
(`deploy`: ONNX and the C MuJoCo replay) and the run's pictures (`analysis`), which import
nothing of each other."""
MODULE_LAYERS = ("scaling", "runner")
"""The layers that are one module (a file, not a subpackage): the batch scaling rule and the
training loop. The config layer holds the `config` package and `scaling.py`."""
TOP = 8
MAX_MODULE_LINES = 600


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(REPO).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
  """Layer of a dotted module name inside the package (`mjx_walk.sim.env` -> 1)."""
  parts = module.split(".")
  return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def _imported(path: pathlib.Path) -> set[str]:
  """Every mjx_walk module a file imports, anywhere in it."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names if alias.name.startswith("mjx_walk"))
    elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mjx_walk"):
      # `from mjx_walk.sim import env` imports mjx_walk.sim.env; `from mjx_walk import config`
      # imports mjx_walk.config.
      names.update(f"{node.module}.{alias.name}" for alias in node.names)
  return names


def _run_python(code: str) -> dict:
  done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                        text=True, timeout=300, cwd=REPO, check=False)
  if done.returncode:
    raise AssertionError(done.stderr)
  return json.loads(done.stdout.strip().splitlines()[-1])


class LayeringTest(absltest.TestCase):

  def test_the_layer_table_knows_every_subpackage(self):
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    self.assertEqual(subpackages, set(LAYERS) - set(MODULE_LAYERS))
    self.assertTrue(all((PACKAGE / f"{name}.py").is_file() for name in MODULE_LAYERS))

  def test_no_module_imports_from_a_layer_above_it(self):
    upward = []
    files = sorted(PACKAGE.rglob("*.py"))
    self.assertGreater(len(files), 20)
    for path in files:
      importer = _module_name(path)
      for imported in _imported(path):
        if _layer(imported) > _layer(importer):
          upward.append(f"{importer} imports {imported}")
    self.assertEqual(upward, [])

  def test_no_module_is_longer_than_600_lines(self):
    # Catches a module grown past the size at which one concept no longer reads as one
    # (docs/architecture.md): a new capability belongs in a module of its own.
    lengths = {_module_name(path): len(path.read_text().splitlines())
               for path in PACKAGE.rglob("*.py")}
    self.assertGreater(lengths["mjx_walk.sim.env"], 400)  # the count reads real files
    self.assertEqual({name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}, {})

  def test_the_checker_sees_an_upward_import(self):
    # The check above must be able to fail: a sim module importing the trainer is upward.
    self.assertGreater(_layer("mjx_walk.learn.trainer"), _layer("mjx_walk.sim.env"))
    self.assertGreater(_layer("mjx_walk.analysis.report"), _layer("mjx_walk.run.checkpoint"))
    self.assertGreater(_layer("mjx_walk.train"), _layer("mjx_walk.runner"))
    self.assertGreater(_layer("mjx_walk.runner"), _layer("mjx_walk.evaluation.panel"))
    self.assertGreater(_layer("mjx_walk.deploy.sim2sim"), _layer("mjx_walk.evaluation.panel"))
    self.assertGreater(_layer("mjx_walk.evaluation.traces"), _layer("mjx_walk.run.provenance"))
    self.assertEqual(_imported(PACKAGE / "run" / "policy.py") & {"mjx_walk.learn.trainer"},
                     set())


class LightImportsTest(absltest.TestCase):

  def test_reading_a_ledger_loads_no_jax_or_mujoco(self):
    loaded = _run_python("""
        import json, sys
        from mjx_walk.run import ledger
        import mjx_walk.ledger
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "mujoco"))))
        """)
    self.assertEqual(loaded, [])

  def test_the_training_loop_defines_no_flag(self):
    # Catches a flag defined or read below the commands: a notebook that imports the loop must
    # not get the command's flags (nor absl's refusal of a second definition of one).
    defined = _run_python("""
        import json
        from absl import flags
        from mjx_walk import runner
        print(json.dumps({"ours": sorted(module for module in flags.FLAGS.flags_by_module_dict()
                                         if module.startswith("mjx_walk")),
                          "run": callable(runner.run)}))
        """)
    self.assertEqual(defined, {"ours": [], "run": True})
    # The command defines them: the check above sees flags where there are some.
    defined = _run_python("""
        import json
        from absl import flags
        from mjx_walk import train
        print(json.dumps(sorted(flags.FLAGS.flags_by_module_dict())))
        """)
    self.assertIn("mjx_walk.train", defined)

  def test_a_config_file_loads_no_mujoco(self):
    loaded = _run_python(f"""
        import json, sys
        from mjx_walk import config
        recipe = {str(REPO / "experiments" / "recipes" / "go2_flat.py")!r}
        cfg = config.validate(config.load_file(recipe))
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "mujoco")))
        """)
    self.assertEqual(loaded, [])

  def test_the_scaling_rule_loads_only_the_config_and_the_standard_library(self):
    # What the import adds to a bare interpreter's modules (a venv's .pth files load some of
    # their own at start-up).
    loaded = _run_python("""
        import json, sys
        before = set(sys.modules)
        from mjx_walk import config, scaling
        scaling.scale(config.default(), 2048)
        print(json.dumps(sorted(m for m in set(sys.modules) - before
                                if m.split(".")[0] not in sys.stdlib_module_names | {"mjx_walk"})))
        """)
    self.assertEqual(loaded, [])
    self.assertEqual(_imported(PACKAGE / "scaling.py"), {"mjx_walk.config"})

  def test_loading_a_policy_imports_no_trainer_or_audit(self):
    cfg = configs.tiny()
    trainer = trainer_lib.make_trainer(cfg)
    carry = trainer.init(jax.random.key(0))
    run_dir = pathlib.Path(self.create_tempdir().full_path)
    saver = checkpoint.Checkpointer(run_dir, cfg, trainer.manifest)
    saver.save(carry, wall_seconds=0.0)
    saver.close()
    loaded = _run_python(f"""
        import json, sys
        import numpy as np
        from mjx_walk.run import policy
        pol = policy.load({str(run_dir)!r})
        action = pol.act(np.zeros(pol.observation_spec.shape, np.float32))
        print(json.dumps({{"modules": sorted(m for m in sys.modules if m.startswith("mjx_walk")),
                          "action": list(action.shape)}}))
        """)
    self.assertEqual(loaded["action"], [trainer.env.action_size])
    self.assertIn("mjx_walk.run.policy", loaded["modules"])
    for heavy in ("mjx_walk.learn.trainer", "mjx_walk.learn.audit", "mjx_walk.learn.ppo",
                  "mjx_walk.evaluation.panel"):
      self.assertNotIn(heavy, loaded["modules"])


if __name__ == "__main__":
  absltest.main()
