"""docs/python.md's Ray example, run as written on a local Ray cluster of worker processes.
Skipped where `ray` is not installed (it is not among the test requirements)."""

import pathlib
import re

import pytest

pytest.importorskip("ray")

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "python.md"


def test_the_ray_example_of_the_docs_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if "import ray" in b]
    # The block checks its results against NumPy itself (np.testing.assert_allclose).
    exec(compile(block, str(DOC), "exec"), {"__name__": "ray_example"})
