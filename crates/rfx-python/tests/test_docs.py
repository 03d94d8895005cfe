"""docs/python.md names every NumPy function the tracer supports, in the table generated from
the tracer's own tables."""

import os

import rfxjit._doctable as doctable
import rfxjit._tracer as tracer

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "python.md")


def test_every_supported_function_is_documented():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    missing = []
    for name in tracer.UFUNCS:
        if f"`{name}`" not in text and not (name.startswith("bitwise_") and "`bitwise_and`/`or`/`xor`" in text):
            missing.append(name)
    for func in tracer.FUNCTIONS:
        name = func.__name__
        if "linalg" in (func.__module__ or ""):
            name = f"linalg.{name}"
        if f"`{name}`" not in text and f"`{name}`/" not in text and f"/`{name}`" not in text:
            missing.append(name)
    assert not missing, f"docs/python.md does not name: {missing}"


def test_the_supported_functions_table_is_the_generated_one():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    assert doctable.splice(text) == text, (
        "docs/python.md's table of supported functions is stale: run "
        "`python -m rfxjit._doctable docs/python.md` in the test environment"
    )
