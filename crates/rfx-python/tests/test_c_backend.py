"""The `c` backend from Python: the exported C compiled by the system C compiler (`$CC`, else
`cc`) and loaded; exact kernels give the `cpu` backend's bits, a missing compiler raises
`BackendUnavailable`."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import rfxjit as rj


def test_c_is_a_backend_name():
    assert "c" in rj.backends()
    rj.jit(lambda a: a, backend="c")  # a known name: no ValueError


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)")
def test_the_c_backend_gives_the_cpu_backends_bits():
    def pid(e, d, i):
        u = 1.5 * e + 0.25 * d + 0.125 * i
        return np.clip(u, -1.0, 1.0), (e * e).sum()

    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        e, d, i = (rng.standard_normal(17).astype(dtype) for _ in range(3))
        got = rj.jit(pid, backend="c")(e, d, i)
        want = rj.jit(pid, backend="cpu")(e, d, i)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == dtype
            np.testing.assert_array_equal(g, w)
    f = rj.jit(lambda a: a * 2.0, backend="c")
    assert f.lower(np.ones(3, np.float32)).backend == "c"


def test_a_missing_compiler_raises_backend_unavailable():
    # `$CC` is read once per process, when the backend registry is first used: a fresh one.
    script = (
        "import numpy as np, rfxjit as rj\n"
        "f = rj.jit(lambda a: a + 1.0, backend='c')\n"
        "try:\n"
        "    f(np.ones(3, np.float32))\n"
        "except rj.BackendUnavailable as e:\n"
        "    print('unavailable:', e)\n"
    )
    env = dict(os.environ, CC="/nonexistent/rfx-cc", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("unavailable:") and "/nonexistent/rfx-cc" in out.stdout, out.stdout
