"""rfxJIT's API (the `rfxJIT` package): each example of rfxJIT's guide, as written there with its
`...` placeholders filled, checked against NumPy; the passes each shown to change what they
should; the benchmark's command line."""

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import rfxjit


def guide_kernel():
    """The guide's kernel, f(x, y) = sin(x * 2) + y, its `...` filled as the guide means."""
    from rfxJIT.kernels.ir import Add, Const, Input, Kernel, Mul, Sin

    kernel = Kernel(
        inputs=[Input("x", dtype="float32"), Input("y", dtype="float32")],
        ops=[
            Const(2.0, dtype="float32"),
            Mul(Input("x"), Const(2.0)),
            Sin(Mul(Input("x"), Const(2.0))),
            Add(Sin(Mul(Input("x"), Const(2.0))), Input("y")),
        ],
        output=Add(Sin(Mul(Input("x"), Const(2.0))), Input("y")),
    )
    return kernel


X = np.array([0.0, 1.0, 2.0], dtype=np.float32)
Y = np.array([1.0, 2.0, 3.0], dtype=np.float32)


def expected_guide():
    return np.sin(X * np.float32(2.0)) + Y


def assert_f32(actual, expected):
    """Equal as float32 values, dtype float32: within a few float32 ulps of the magnitude of the
    terms (sin(x) + y cancels, so the tolerance is absolute as well as relative)."""
    actual = np.asarray(actual)
    assert actual.dtype == np.float32, actual.dtype
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual, np.asarray(expected, dtype=np.float32), rtol=4e-7, atol=4e-7)


# -- Kernel IR -------------------------------------------------------------------------------------


def test_kernel_ir_example_builds_an_immutable_kernel():
    from rfxJIT.kernels.ir import Add, Const, Input, Mul, Sin

    kernel = guide_kernel()
    assert len(kernel.ops) == 4
    assert kernel.output == kernel.ops[-1]
    assert kernel.input_names == ["x", "y"]
    # Structural: the same expression written twice is the same node.
    assert Mul(Input("x"), Const(2.0)) == Mul(Input("x", dtype="float32"), Const(2.0, dtype="float32"))
    assert Add(Sin(Mul(Input("x"), Const(2.0))), Input("y")) == kernel.output
    with pytest.raises(AttributeError):
        kernel.ops[0].value = 3.0  # frozen


def test_kernel_ir_rejects_undeclared_inputs_and_bad_operands():
    from rfxJIT.kernels.ir import Add, Const, Input, Kernel

    with pytest.raises(ValueError, match="Input\\('z'\\)"):
        Kernel(inputs=[Input("x", dtype="float32")], ops=[Add(Input("x"), Input("z"))])
    with pytest.raises(TypeError, match="operand"):
        Add(Input("x"), 2.0)
    with pytest.raises(TypeError, match="dtype"):
        Const(1.0, dtype="complex64")


# -- Optimisation passes ---------------------------------------------------------------------------


def test_constant_fold_example():
    from rfxJIT.kernels.ir import Add, Const, Input, Kernel, Mul
    from rfxJIT.kernels.optimize import constant_fold

    # Before: Add(Const(1.0), Const(2.0))  After: Const(3.0)
    kernel = Kernel(inputs=[], ops=[Add(Const(1.0), Const(2.0))])
    optimized = constant_fold(kernel)
    assert optimized.output == Const(3.0)
    assert optimized.ops == (Const(3.0),)

    # Inside a kernel: x * (sin(0.5) * 3) folds the constant subexpression, computed by rfx in
    # float32 as NumPy would.
    from rfxJIT.kernels.ir import Sin

    kernel = Kernel(
        inputs=[Input("x", dtype="float32")],
        ops=[Mul(Input("x"), Mul(Sin(Const(0.5)), Const(3.0)))],
    )
    optimized = constant_fold(kernel)
    folded = np.float32(np.sin(np.float32(0.5)) * np.float32(3.0))
    assert optimized.output.a == Input("x")
    assert isinstance(optimized.output.b, Const)
    assert np.float32(optimized.output.b.value) == folded
    # The guide's kernel has nothing to fold: unchanged.
    assert constant_fold(guide_kernel()) == guide_kernel()


def test_eliminate_dead_ops_example():
    from rfxJIT.kernels.ir import Cos, Input, Mul
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.kernels.optimize import eliminate_dead_ops

    base = guide_kernel()
    dead = [Cos(Input("y")), Mul(Cos(Input("y")), Input("x"))]
    kernel = base.replace(ops=[*base.ops[:2], *dead, *base.ops[2:]], output=base.output)
    # Removes operations not reachable from output
    cleaned = eliminate_dead_ops(kernel)
    assert len(kernel.ops) == 6
    assert cleaned.ops == base.ops
    assert len(lower_kernel(kernel).instrs) == 5 and len(lower_kernel(cleaned).instrs) == 3
    assert eliminate_dead_ops(base) == base


def test_fuse_chains_example():
    from rfxJIT.kernels.ir import Add, Const, Cos, Fused, Input, Kernel, Mul, Sin, Sub
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.runtime.executor import execute_lowered
    from rfxJIT.kernels.optimize import fuse_chains

    kernel = guide_kernel()
    # Fuses sequential elementwise operations
    fused = fuse_chains(kernel)
    assert len(fused.ops) == 1 and isinstance(fused.ops[0], Fused)
    assert fused.ops[0].size == 3 and fused.ops[0].body == kernel.output
    assert [i.op for i in lower_kernel(fused).instrs] == ["fused"]
    assert [i.op for i in lower_kernel(kernel).instrs] == ["mul", "sin", "add"]

    # A value read twice ends a chain: m = x * 3 stays an op, sin(m) - cos(m) + y is one chain.
    x, y = Input("x"), Input("y")
    m = Mul(x, Const(3.0))
    out = Add(Sub(Sin(m), Cos(m)), y)
    k2 = Kernel(inputs=kernel.inputs, ops=[m, Sin(m), Cos(m), Sub(Sin(m), Cos(m)), out])
    f2 = fuse_chains(k2)
    assert f2.ops[0] == m
    assert len(f2.ops) == 2 and isinstance(f2.ops[1], Fused) and f2.ops[1].size == 4
    assert set(f2.ops[1].leaves) == {m, y}
    got = execute_lowered(lower_kernel(f2), inputs={"x": X, "y": Y}, backend="cpu")
    three = np.float32(3.0)
    assert_f32(got, np.sin(X * three) - np.cos(X * three) + Y)


def test_optimize_pipeline_example(capsys):
    from rfxJIT.kernels.optimize import optimize

    kernel = guide_kernel()
    # Apply all optimization passes
    optimized_kernel = optimize(kernel)
    print(f"Reduced from {len(kernel.ops)} to {len(optimized_kernel.ops)} ops")
    assert capsys.readouterr().out == "Reduced from 4 to 1 ops\n"


def test_optimize_folds_eliminates_and_fuses_and_keeps_values():
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.kernels.optimize import optimize
    from rfxJIT.runtime.benchmark import fused_chain_kernel
    from rfxJIT.runtime.executor import execute_lowered

    kernel = fused_chain_kernel()
    optimized = optimize(kernel)
    assert (len(kernel.ops), len(optimized.ops)) == (12, 1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(7).astype(np.float32)
    y = rng.standard_normal(7).astype(np.float32)
    f32 = np.float32
    want = np.tanh(np.sin(x * (f32(0.5) * f32(4.0)) + y) * f32(0.25) - y * f32(0.5))
    for k in (kernel, optimized):
        assert_f32(execute_lowered(lower_kernel(k), inputs={"x": x, "y": y}, backend="cpu"), want)


# -- Lowering and execution ------------------------------------------------------------------------


def test_lowering_and_execution_example(capsys):
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.runtime.executor import execute_lowered

    kernel = guide_kernel()
    # Lower to executable form
    lowered = lower_kernel(kernel)
    # Execute with inputs
    x = np.array([0.0, 1.0, 2.0], dtype=np.float32)
    y = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    result = execute_lowered(lowered, inputs={"x": x, "y": y}, backend="cpu")
    print(result)
    # sin(4) + 3 is 2.2431974 as a float32 (the guide's 3.9092975 is a typo).
    assert_f32(result, [1.0, 2.9092975, 2.2431974])
    assert_f32(result, expected_guide())
    assert capsys.readouterr().out == "[1.        2.9092975 2.2431974]\n"
    assert lowered.input_slots == {"x": 0, "y": 1}
    assert str(lowered).splitlines()[-1] == "  return s5"


def test_backend_selection_example():
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.runtime.executor import execute_lowered

    lowered = lower_kernel(guide_kernel())
    inputs = {"x": X, "y": Y}
    # CPU backend (default)
    result_cpu = execute_lowered(lowered, inputs, backend="cpu")
    assert_f32(result_cpu, expected_guide())
    assert_f32(execute_lowered(lowered, inputs, backend="interp"), expected_guide())
    # CUDA and Metal where this machine has the device; without one, BackendUnavailable.
    for backend in ("cuda", "metal"):
        try:
            result = execute_lowered(lowered, inputs, backend=backend)
        except rfxjit.BackendUnavailable:
            continue
        np.testing.assert_allclose(result, expected_guide(), rtol=1e-6, atol=1e-6)


def test_execute_lowered_errors_name_the_inputs():
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.runtime.executor import execute_lowered

    lowered = lower_kernel(guide_kernel())
    with pytest.raises(KeyError, match="missing \\['y'\\]"):
        execute_lowered(lowered, inputs={"x": X}, backend="cpu")
    with pytest.raises(ValueError, match="backend"):
        execute_lowered(lowered, inputs={"x": X, "y": Y}, backend="tpu")
    with pytest.raises(rfxjit.TraceError):
        execute_lowered(lowered, inputs={"x": X, "y": np.zeros(4, np.float32)}, backend="cpu")


def test_execute_lowered_converts_to_declared_dtypes_and_caches():
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.runtime.executor import execute_lowered

    lowered = lower_kernel(guide_kernel())
    got = execute_lowered(lowered, inputs={"x": [0.0, 1.0, 2.0], "y": Y.astype(np.float64)})
    assert_f32(got, expected_guide())
    execute_lowered(lowered, inputs={"x": X + 1, "y": Y})
    assert lowered._compiled["cpu"].cache_info().misses == 1


def test_reference_interpreter():
    from rfxJIT.runtime.interpreter import interpret

    assert_f32(interpret(guide_kernel(), {"x": X, "y": Y}), expected_guide())


# -- TinyJIT, trace, transforms --------------------------------------------------------------------


def test_tinyjit_example():
    from rfxJIT.runtime.tinyjit import jit

    @jit
    def compute(x, y):
        return np.sin(x * 2.0) + y

    # First call: traces and compiles
    result1 = compute(np.array([1.0, 2.0]), np.array([0.5, 1.0]))
    # Subsequent calls: uses cached kernel
    result2 = compute(np.array([3.0, 4.0]), np.array([1.5, 2.0]))
    np.testing.assert_allclose(result1, np.sin(np.array([1.0, 2.0]) * 2.0) + np.array([0.5, 1.0]), rtol=1e-15)
    np.testing.assert_allclose(result2, np.sin(np.array([3.0, 4.0]) * 2.0) + np.array([1.5, 2.0]), rtol=1e-15)
    assert result1.dtype == result2.dtype == np.float64
    info = compute.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    compute(np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, 2.0]))  # a new shape: traced again
    assert compute.cache_info().misses == 2


def test_trace_captures_a_python_function_as_the_guide_kernel():
    from rfxJIT.kernels.ir import Const, Input, Mul, Sub
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.kernels.optimize import optimize
    from rfxJIT.kernels.trace import trace
    from rfxJIT.runtime.executor import execute_lowered

    def f(x, y):
        return np.sin(x * 2.0) + y

    kernel = trace(f, X, Y)
    guide = guide_kernel()
    assert kernel.name == "f" and kernel.inputs == guide.inputs
    assert kernel.ops == guide.ops and kernel.output == guide.output
    assert_f32(execute_lowered(lower_kernel(optimize(kernel)), inputs={"x": X, "y": Y}), expected_guide())
    # float64 examples give float64 constants (NumPy's promotion).
    k64 = trace(f, np.float64, np.float64)
    assert k64.ops[0].dtype == "float64"
    with pytest.raises(rfxjit.TraceError, match="numpy.sum"):
        trace(lambda x: np.sum(x), X)
    with pytest.raises(rfxjit.TraceError, match="numpy.greater"):
        trace(lambda x: np.greater(x, 0.0), X)
    with pytest.raises(rfxjit.TraceError, match="comparisons"):
        trace(lambda x: x > 0.0, X)
    # Scalars on either side, NEP 50 promotion: int32 * 2.5 computes in float64.
    k = trace(lambda i: 1 - 2.5 * i, np.int32)
    assert k.ops == (Const(2.5, "float64"), Mul(Const(2.5, "float64"), Input("i")), Const(1.0, "float64"),
                     Sub(Const(1.0, "float64"), Mul(Const(2.5, "float64"), Input("i"))))
    i = np.array([1, -2, 7], dtype=np.int32)
    np.testing.assert_array_equal(execute_lowered(lower_kernel(k), inputs={"i": i}), 1 - 2.5 * i)


def test_grad_and_value_and_grad_example(capsys):
    from rfxJIT.kernels.trace import trace  # noqa: F401 - imported as the guide does
    from rfxJIT.transforms import grad, value_and_grad

    # Define a loss function
    def loss_fn(x):
        return np.sum(x**2)

    # Compute gradient
    grad_fn = grad(loss_fn)
    x = np.array([1.0, 2.0, 3.0])
    dx = grad_fn(x)
    print(dx)  # [2.0, 4.0, 6.0]
    np.testing.assert_array_equal(dx, [2.0, 4.0, 6.0])
    # Compute both value and gradient
    value_and_grad_fn = value_and_grad(loss_fn)
    value, dx = value_and_grad_fn(x)
    print(value, dx)  # 14.0, [2.0, 4.0, 6.0]
    assert value == 14.0
    np.testing.assert_array_equal(dx, [2.0, 4.0, 6.0])
    assert capsys.readouterr().out == "[2. 4. 6.]\n14.0 [2. 4. 6.]\n"


def test_guide_pid_update_called_as_the_control_callback_does():
    from rfxJIT.runtime.tinyjit import jit

    # Define PID control kernel
    @jit
    def pid_update(error, integral, derivative, kp, ki, kd):
        output = kp * error + ki * integral + kd * derivative
        return np.clip(output, -1.0, 1.0)

    integral, prev_error, dt = 0.0, 0.0, 0.01
    for measurement in (0.3, 0.25, -4.0, 0.1):
        error = 0.0 - measurement
        integral += error * dt
        derivative = (error - prev_error) / dt
        output = pid_update(np.array([error]), np.array([integral]), np.array([derivative]), kp=0.5, ki=0.1, kd=0.05)
        want = np.clip(0.5 * error + 0.1 * integral + 0.05 * derivative, -1.0, 1.0)
        assert output.shape == (1,) and output[0] == want
        prev_error = error
    assert pid_update.cache_info().misses == 1


# -- Dispatch queue --------------------------------------------------------------------------------


def test_dispatch_queue_runs_in_order_on_one_worker():
    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.runtime.queue import DispatchQueue

    lowered = lower_kernel(guide_kernel())
    threads, order = set(), []

    def record(i):
        threads.add(threading.get_ident())
        order.append(i)
        return i

    with DispatchQueue() as queue:
        futures = [queue.submit_lowered(lowered, {"x": X + i, "y": Y}) for i in range(5)]
        marks = [queue.submit(record, i) for i in range(20)]
        queue.drain()
        assert all(f.done() for f in futures + marks)
    for i, f in enumerate(futures):
        assert_f32(f.result(), np.sin((X + np.float32(i)) * np.float32(2.0)) + Y)
    assert order == list(range(20)) and len(threads) == 1 and threading.get_ident() not in threads


# -- Benchmark -------------------------------------------------------------------------------------


def test_benchmark_cli_prints_rfxjit_lines_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "rfxJIT.runtime.benchmark", "--size", "256", "--iterations", "5", "--backend", "cpu", "--json-out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == "Benchmarking elementwise kernels (size=256, iterations=5)"
    import re

    for name, line in zip(["add", "mul", "sin", "fused_chain"], lines[1:5]):
        assert re.fullmatch(rf"\[cpu\] {name}: \d+\.\d{{3}}ms avg, \d+ ops/s", line), line
    assert lines[5:] == ["", "Optimization impact:", "- Reduced ops: 12 -> 1 (92% reduction)", "- Fused chains: 1"]
    report = json.loads(out.read_text())
    assert (report["size"], report["iterations"], report["backend"]) == (256, 5, "cpu")
    assert set(report["kernels"]) == {"add", "mul", "sin", "fused_chain"}
    assert all(k["avg_ms"] > 0 and k["ops_per_s"] > 0 for k in report["kernels"].values())
    assert report["optimization"] == {"ops_before": 12, "ops_after": 1, "reduction_pct": pytest.approx(91.666, abs=0.01), "fused_chains": 1}


def test_fuse_chains_fuses_dead_chains_whatever_the_op_order():
    from rfxJIT.kernels.ir import Add, Const, Cos, Exp, Fused, Input, Kernel, Mul
    from rfxJIT.kernels.optimize import eliminate_dead_ops, fuse_chains

    x, y = Input("x"), Input("y")
    a = Mul(x, Const(3.0))
    b = Exp(Cos(a))  # dead: a chain of three ops listed member-first
    out = Add(x, y)
    kernel = Kernel(inputs=[Input("x", dtype="float32"), Input("y", dtype="float32")], ops=[a, Cos(a), b, out])
    fused = fuse_chains(kernel)
    assert fused.ops == (Fused(b, 3, (x,)), out)
    # Fusion keeps dead ops (as one op); elimination removes them.
    assert eliminate_dead_ops(fused).ops == (out,)


def test_kernels_and_lowered_kernels_pickle():
    import pickle

    from rfxJIT.kernels.lowering import lower_kernel
    from rfxJIT.kernels.optimize import optimize
    from rfxJIT.runtime.executor import execute_lowered

    kernel = optimize(guide_kernel())
    assert pickle.loads(pickle.dumps(kernel)) == kernel
    lowered = lower_kernel(kernel)
    execute_lowered(lowered, inputs={"x": X, "y": Y})  # compiled in this process
    again = pickle.loads(pickle.dumps(lowered))
    assert again._compiled == {} and str(again) == str(lowered)
    assert_f32(execute_lowered(again, inputs={"x": X, "y": Y}), expected_guide())
