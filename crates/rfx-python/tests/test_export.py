"""`rfxjit.export`: NumPy functions exported as C, compiled with the system C compiler, loaded
with ctypes and compared with NumPy; gradients and Jacobians; the files written all or
nothing; refused names, languages and arguments."""

import ctypes
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import rfxjit as rj

DT = 0.01
# The flags the generated C is tested with (rfx_codegen_c::TESTED_FLAGS), plus a shared object.
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-fno-math-errno"]


def pid(error, integral, prev_error, kp, ki, kd):
    """One step of a clipped PID controller per joint: the command and the new integral."""
    new_integral = integral + error * DT
    derivative = (error - prev_error) / DT
    command = np.clip(kp * error + ki * new_integral + kd * derivative, -1.0, 1.0)
    return command, new_integral


def compiled(tmp_path, files, name):
    """The exported function `name` from `files`, compiled into a shared object and loaded;
    skips when there is no C compiler."""
    cc = os.environ.get("CC") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc or $CC) to compile the exported C with")
    for file_name, text in files.items():
        (tmp_path / file_name).write_text(text)
    library = tmp_path / f"lib{name}.so"
    result = subprocess.run(
        [cc, *CFLAGS, "-shared", "-fPIC", str(tmp_path / f"{name}.c"), "-o", str(library)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    function = getattr(ctypes.CDLL(str(library)), name)
    function.restype = ctypes.c_int
    return function


def work_buffer(header, name):
    """A work buffer of NAME_WORK_BYTES bytes aligned to NAME_WORK_ALIGN, as the header asks."""
    upper = name.upper()
    size = int(re.search(rf"#define {upper}_WORK_BYTES (\d+)u", header).group(1))
    align = int(re.search(rf"#define {upper}_WORK_ALIGN (\d+)u", header).group(1))
    raw = np.zeros(size + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + size], raw


def call(function, header, name, inputs, outputs):
    """Calls the exported function on NumPy arrays (C-contiguous); returns its return code."""
    work, keep_alive = work_buffer(header, name)
    pointers = [ctypes.c_void_p(a.ctypes.data) for a in (*inputs, *outputs)]
    pointers.append(ctypes.c_void_p(work.ctypes.data if work.size else None))
    code = function(*pointers)
    del keep_alive
    return code


def pid_inputs(rng, n=4):
    error, integral, prev_error = (rng.uniform(-2.0, 2.0, n).astype(np.float32) for _ in range(3))
    kp, ki, kd = (rng.uniform(0.0, 1.5, n).astype(np.float32) for _ in range(3))
    return error, integral, prev_error, kp, ki, kd


def test_an_exported_pid_compiled_with_cc_matches_numpy(tmp_path, rng):
    inputs = pid_inputs(rng)
    files = rj.export(rj.jit(pid), *inputs, name="pid", out_dir=tmp_path / "gen")
    assert list(files) == ["pid.h", "pid.c"]
    assert rj.jit(pid).export(*inputs, name="pid") == files
    assert "int pid(const float *in_0, const float *in_1, const float *in_2, const float *in_3, " in files["pid.h"]
    assert "float *out_0, float *out_1, void *work);" in files["pid.h"]
    for file_name, text in files.items():
        assert (tmp_path / "gen" / file_name).read_text() == text
    function = compiled(tmp_path, files, "pid")
    for _ in range(3):
        inputs = pid_inputs(rng)
        command, integral = np.empty(4, np.float32), np.empty(4, np.float32)
        assert call(function, files["pid.h"], "pid", inputs, [command, integral]) == 0
        want_command, want_integral = pid(*inputs)
        # Exact float32 ops in NumPy's order: the same bits up to NumPy's own rounding.
        np.testing.assert_allclose(command, want_command, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(integral, want_integral, rtol=1e-6, atol=1e-7)
        assert np.all(np.abs(command) <= 1.0)
        # And the same numbers as the jitted function.
        jit_command, jit_integral = rj.jit(pid)(*inputs)
        np.testing.assert_array_equal(command, jit_command)
        np.testing.assert_array_equal(integral, jit_integral)


def energy(x, w):
    return np.sum(w * x * x) + np.exp(x[0])


def test_grad_exports_the_value_then_the_gradients(tmp_path, rng):
    x, w = rng.uniform(-1.0, 1.0, 3), rng.uniform(0.5, 2.0, 3)
    files = rj.export(energy, x, w, name="energy", grad=(0, 1))
    header = files["energy.h"]
    assert "out_1: output `grad_x`, f64[3]" in header and "out_2: output `grad_w`, f64[3]" in header
    function = compiled(tmp_path, files, "energy")
    value, grad_x, grad_w = np.empty(1), np.empty(3), np.empty(3)
    assert call(function, header, "energy", [x, w], [value, grad_x, grad_w]) == 0
    np.testing.assert_allclose(value[0], energy(x, w), rtol=1e-14)
    want_x = 2.0 * w * x
    want_x[0] += np.exp(x[0])
    np.testing.assert_allclose(grad_x, want_x, rtol=1e-14)
    np.testing.assert_allclose(grad_w, x * x, rtol=1e-14)


def squash(a, x):
    return np.tanh(a @ x)


def test_jacobian_exports_the_value_then_the_jacobian(tmp_path, rng):
    a, x = rng.uniform(-1.0, 1.0, (3, 2)), rng.uniform(-1.0, 1.0, 2)
    files = rj.export(squash, a, x, name="squash", jacobian=1)
    header = files["squash.h"]
    assert "out_1: output `jac_out_x`, f64[3, 2]" in header, header
    function = compiled(tmp_path, files, "squash")
    value, jac = np.empty(3), np.empty((3, 2))
    assert call(function, header, "squash", [a, x], [value, jac]) == 0
    np.testing.assert_allclose(value, np.tanh(a @ x), rtol=1e-14)
    # d tanh(a x) / dx = sech²(a x) a, row by row.
    np.testing.assert_allclose(jac, (1.0 - np.tanh(a @ x) ** 2)[:, None] * a, rtol=1e-13, atol=1e-15)


def test_rust_exports_one_module(tmp_path):
    x = np.ones(3)
    files = rj.export(energy, x, x, lang="rust", name="energy", grad=0, out_dir=tmp_path)
    assert list(files) == ["energy.rs"]
    assert "pub fn energy(" in files["energy.rs"]
    assert "output `grad_x`, f64[3]" in files["energy.rs"]
    assert (tmp_path / "energy.rs").read_text() == files["energy.rs"]
    # `main` is refused as a C name only; `rfx_` is the Rust module's own prefix.
    assert list(rj.export(energy, x, x, lang="rust", name="main")) == ["main.rs"]
    with pytest.raises(rj.ExportError, match="`main` is not a valid C function name"):
        rj.export(energy, x, x, name="main")
    with pytest.raises(rj.ExportError, match="`rfx_energy` is not a valid Rust function name"):
        rj.export(energy, x, x, lang="rust", name="rfx_energy")


def test_a_bad_name_is_an_export_error_and_writes_nothing(tmp_path):
    x = np.ones(2, np.float32)
    out_dir = tmp_path / "gen"
    with pytest.raises(rj.ExportError, match="`2fast` is not a valid C function name"):
        rj.export(lambda x: x * 2.0, x, name="2fast", out_dir=out_dir)
    with pytest.raises(rj.ExportError, match="`int` is not a valid C function name"):
        rj.export(lambda x: x * 2.0, x, name="int", out_dir=out_dir)
    # Without name=, the function's own name; a lambda's is not a C identifier.
    with pytest.raises(rj.ExportError, match="`<lambda>` is not a valid C function name"):
        rj.export(rj.jit(lambda x: x * 2.0), x, out_dir=out_dir)
    assert list(rj.export(energy, x, x)) == ["energy.h", "energy.c"]
    assert not out_dir.exists()
    assert issubclass(rj.ExportError, rj.RfxError)


def test_refused_arguments_raise_clear_errors():
    x = np.ones(2)
    with pytest.raises(ValueError, match="unknown export language 'fortran'"):
        rj.export(energy, x, x, name="e", lang="fortran")
    with pytest.raises(ValueError, match="grad or jacobian, not both"):
        rj.export(energy, x, x, name="e", grad=0, jacobian=0)
    with pytest.raises(rj.AutodiffError, match="out of range"):
        rj.export(energy, x, x, name="e", grad=2)
    with pytest.raises(rj.AutodiffError, match="single-element output"):
        rj.export(squash, np.ones((3, 2)), x, name="s", grad=1)
    with pytest.raises(rj.AutodiffError, match="holds 2 arrays"):
        rj.export(lambda p: p[0] * p[1], (x, x), name="s", jacobian=0)
    with pytest.raises(rj.AutodiffError, match="only f32 and f64 inputs"):
        rj.export(lambda k, x: x * k, np.ones(2, np.int32), x, name="s", jacobian=0)
    with pytest.raises(rj.AutodiffError, match="has no f32 or f64 output"):
        rj.export(lambda x: x > 0.0, x, name="s", jacobian=0)
    static = rj.jit(lambda x, n: x * n, static_argnums=1)
    with pytest.raises(rj.AutodiffError, match="argument 1 is static"):
        rj.export(static, x, 3.0, name="s", grad=1)
    with pytest.raises(TypeError, match="name must be a str"):
        rj.export(energy, x, x, name=3)


def test_files_are_written_all_or_nothing(tmp_path):
    x = np.ones(2, np.float32)
    out_dir = tmp_path / "gen"
    out_dir.mkdir()
    (out_dir / "half.h").write_text("/* earlier header */\n")
    (out_dir / "half.c").mkdir()  # in the way of the source
    with pytest.raises(OSError, match="half.c exists and is not a regular file"):
        rj.export(lambda x: x + 1.0, x, name="half", out_dir=out_dir)
    assert (out_dir / "half.h").read_text() == "/* earlier header */\n"
    assert sorted(os.listdir(out_dir)) == ["half.c", "half.h"]
    # A successful export replaces earlier files and leaves no temporary file behind.
    (out_dir / "half.c").rmdir()
    (out_dir / "half.c").write_text("/* earlier source */\n")
    files = rj.export(lambda x: x + 1.0, x, name="half", out_dir=out_dir)
    assert sorted(os.listdir(out_dir)) == ["half.c", "half.h"]
    assert (out_dir / "half.h").read_text() == files["half.h"]
    assert (out_dir / "half.c").read_text() == files["half.c"]


def test_a_failed_rename_puts_the_earlier_files_back(tmp_path, monkeypatch):
    import rfxjit._export as export_module

    x = np.ones(2, np.float32)
    (tmp_path / "two.h").write_text("/* earlier header */\n")
    (tmp_path / "two.c").write_text("/* earlier source */\n")
    real_replace = os.replace

    def replace_failing_on_the_source(src, dst):
        # Renaming the new source into place fails, after the header was replaced.
        if str(dst).endswith("two.c") and str(src).endswith(".tmp"):
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(export_module.os, "replace", replace_failing_on_the_source)
    with pytest.raises(OSError, match="disk full"):
        rj.export(lambda x: x + 1.0, x, name="two", out_dir=tmp_path)
    assert (tmp_path / "two.h").read_text() == "/* earlier header */\n"
    assert (tmp_path / "two.c").read_text() == "/* earlier source */\n"
    assert sorted(os.listdir(tmp_path)) == ["two.c", "two.h"]
    # A new file (no earlier one) is removed again.
    (tmp_path / "two.h").unlink()
    with pytest.raises(OSError, match="disk full"):
        rj.export(lambda x: x + 1.0, x, name="two", out_dir=tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["two.c"]
