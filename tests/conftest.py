"""Pytest setup shared by every test module."""

from absl import flags


def pytest_configure(config):
  del config
  # absltest helpers (create_tempdir, create_tempfile) read absl flags; pytest never parses them.
  flags.FLAGS.mark_as_parsed()
