"""The Python examples of the repository's README and the package's README run and print what
their comments say."""

import contextlib
import io
import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
READMES = [ROOT / "README.md", ROOT / "crates" / "rfx-python" / "README.md"]


def python_blocks(path):
    text = path.read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def numbers(text):
    return [float(t) for t in re.findall(r"-?\d+(?:\.\d*)?(?:e-?\d+)?", text)]


@pytest.mark.parametrize("path", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_readme_examples_print_what_their_comments_say(path):
    blocks = python_blocks(path)
    assert blocks, f"{path} has no python example"
    for block in blocks:
        expected = [
            line.split("#", 1)[1]
            for line in block.splitlines()
            if line.lstrip().startswith("print(") and "#" in line
        ]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(path), "exec"), {})
        printed = [line for line in out.getvalue().splitlines() if line.strip()]
        assert len(printed) == len(expected), (printed, expected)
        for got, want in zip(printed, expected):
            got_n, want_n = numbers(got), numbers(want)
            assert want_n, f"comment `{want}` names no value"
            np.testing.assert_array_equal(
                np.float32(got_n), np.float32(want_n), err_msg=f"{got} vs {want}"
            )
