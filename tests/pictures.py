"""Checks on the pictures a run writes, shared by the plot, video and report tests (imported as
`pictures`; tests/ is on sys.path)."""

import pathlib
import warnings

from absl.testing import absltest
import imageio.v2 as imageio
import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(test: absltest.TestCase, path: pathlib.Path) -> None:
  """`path` is a PNG file of a real figure (not an empty canvas)."""
  test.assertTrue(path.is_file(), f"{path} was not written")
  test.assertEqual(path.read_bytes()[:8], PNG_SIGNATURE, f"{path} is not a PNG")
  test.assertGreater(path.stat().st_size, 5_000, f"{path} is suspiciously small")


def read_video(path: pathlib.Path) -> tuple[np.ndarray, float]:
  """(uint8 [F, H, W, 3] decoded frames, frames per second) of an MP4."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")  # ffmpeg fork + exec
    reader = imageio.get_reader(path, format="FFMPEG")
    try:
      return np.stack([frame for frame in reader]), reader.get_meta_data()["fps"]
    finally:
      reader.close()
