"""Tests for mjx_walk.run.run_folder: a new run never takes a folder that holds anything, the default
folder never collides, and nothing saved is replaced."""

import json
import os
import pathlib

from absl.testing import absltest

from mjx_walk.run import run_folder
from mjx_walk.sim import families

import configs


class CreateTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = configs.tiny()
    cls.manifest = families.make_manifest(cls.config)

  def test_create_writes_config_and_manifest_that_read_back(self):
    root = pathlib.Path(self.create_tempdir().full_path) / "run"
    folder = run_folder.RunFolder.create(root, self.config, self.manifest)
    self.assertEqual(sorted(p.name for p in root.iterdir()), ["config.json", "manifest.json"])
    self.assertEqual(folder.read_config(), self.config)
    self.assertEqual(folder.read_manifest().hash, self.manifest.hash)
    self.assertEqual(run_folder.RunFolder.open(root).root, root)

  def test_a_folder_with_a_run_is_refused_and_left_as_it_was(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    run_folder.RunFolder.create(root, self.config, self.manifest)
    (root / "ledger.jsonl").write_text('{"kind": "recipe"}\n')
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    other = configs.tiny(seed=5)
    with self.assertRaisesRegex(
        run_folder.RunFolderError,
        rf"^--run_dir={root} already holds a run \(config\.json, manifest\.json, "
        rf"ledger\.jsonl\); nothing was written\. Continue that run with --resume={root}, or "
        r"start a new run with another --run_dir\.$"):
      run_folder.RunFolder.create(root, other, families.make_manifest(other))
    self.assertEqual({p.name: p.read_bytes() for p in root.iterdir()}, before)

  def test_a_folder_with_other_files_is_refused(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    (root / "notes.txt").write_text("mine")
    with self.assertRaisesRegex(run_folder.RunFolderError, r"is not empty \(notes\.txt\)"):
      run_folder.RunFolder.create(root, self.config, self.manifest)
    self.assertEqual([p.name for p in root.iterdir()], ["notes.txt"])
    with self.assertRaisesRegex(run_folder.RunFolderError, "is a file, not a folder"):
      run_folder.RunFolder.create(root / "notes.txt", self.config, self.manifest)

  def test_default_folders_started_in_the_same_second_do_not_collide(self):
    cwd = os.getcwd()
    os.chdir(self.create_tempdir().full_path)
    try:
      made = [run_folder.RunFolder.create(None, self.config, self.manifest).root
              for _ in range(3)]
    finally:
      os.chdir(cwd)
    self.assertLen(set(made), 3)
    self.assertTrue(all(p.parent == pathlib.Path("runs") for p in made))
    # Same second or not, the later names extend the first one's timestamp.
    if made[0].name == made[1].name.rsplit("-", 1)[0]:
      self.assertEqual(made[1].name, f"{made[0].name}-2")

  def test_open_refuses_a_folder_without_a_run(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    with self.assertRaisesRegex(run_folder.RunFolderError, rf"^{root} holds no run \(config\.json "
                                r"is missing\)$"):
      run_folder.RunFolder.open(root)
    with self.assertRaisesRegex(run_folder.RunFolderError, r"holds no run \(no such folder\)"):
      run_folder.RunFolder.open(root / "absent")

  def test_resumed_config_may_change_only_resumable_fields(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    folder = run_folder.RunFolder.create(root, self.config, self.manifest)
    longer = configs.tiny(chunks=4)
    folder.write_config(longer)
    self.assertEqual(folder.read_config().total_env_steps, longer.total_env_steps)
    with self.assertRaisesRegex(run_folder.RunFolderError, r"ppo\.learning_rate"):
      folder.write_config(configs.tiny(chunks=4, ppo__learning_rate=3e-4))
    self.assertEqual(folder.read_config(), longer)


class EvalRecordTest(absltest.TestCase):

  def test_a_saved_evaluation_is_never_replaced(self):
    folder = run_folder.RunFolder(pathlib.Path(self.create_tempdir().full_path))
    record = {"kind": "eval", "update": 4, "panel_hash": "p", "wall_seconds": 3.0,
              "strata": {"flat": {"success_rate": 1.0}}}
    first = folder.write_eval(record)
    self.assertEqual(first, folder.root / "eval" / "4.json")
    # The same result from another evaluation (the evaluate CLI, no wall clock) keeps the file.
    self.assertEqual(folder.write_eval(dict(record, wall_seconds=None)), first)
    self.assertEqual(json.loads(first.read_text())["wall_seconds"], 3.0)
    # A different result for the same update goes beside it.
    changed = dict(record, strata={"flat": {"success_rate": 0.5}})
    second = folder.write_eval(changed)
    self.assertEqual(second, folder.root / "eval" / "4.2.json")
    self.assertEqual(json.loads(first.read_text())["strata"], record["strata"])
    self.assertEqual(json.loads(second.read_text())["strata"], changed["strata"])
    self.assertEqual(sorted(p.name for p in folder.eval_dir.iterdir()), ["4.2.json", "4.json"])

  def test_one_seeds_records_go_beside_the_runs(self):
    # A seed's evaluation with the same figures as the record of every seed is still its own
    # file, and a sim2sim check of another seed with the same figures is not taken for the first.
    folder = run_folder.RunFolder(pathlib.Path(self.create_tempdir().full_path))
    record = {"kind": "eval", "update": 4, "panel_hash": "p", "strata": {"flat": {}}}
    self.assertEqual(folder.write_eval(record), folder.eval_path(4))
    self.assertEqual(folder.write_eval(dict(record, seed=1)), folder.root / "eval" / "4_seed1.json")
    self.assertEqual(folder.eval_path(4, seed=1), folder.root / "eval" / "4_seed1.json")
    self.assertEqual(folder.export_dir(4, seed=1), folder.root / "export" / "4_seed1")
    self.assertEqual(folder.export_dir(4), folder.root / "export" / "4")
    check = {"kind": "sim2sim", "update": 4, "panel_hash": "p", "policy": "jax", "seed": 0,
             "strata": {}, "mjx": {}}
    self.assertEqual(folder.write_sim2sim(check), folder.sim2sim_dir / "4.json")
    self.assertEqual(folder.write_sim2sim(dict(check, seed=1)), folder.sim2sim_dir / "4.2.json")
    self.assertEqual(folder.write_sim2sim(dict(check, wall_seconds=2.0)),
                     folder.sim2sim_dir / "4.json")


if __name__ == "__main__":
  absltest.main()
