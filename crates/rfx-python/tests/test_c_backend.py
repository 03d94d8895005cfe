"""The `c` backend from Python: the exported C compiled by the system C compiler (`$CC`, else
`cc`) and loaded; exact kernels give the `cpu` backend's bits, a missing compiler raises
`BackendUnavailable`."""

import shutil

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
