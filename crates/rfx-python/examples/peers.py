"""rfxjit beside NumPy, numba (`@njit`) and JAX (`jax.jit`, CPU), all in this one Python process,
on the benchmark's PID clip and 10-op chain (`crates/rfx-opt/tests/corpus/{pid_clip,chain10}.rfx`):

- a call at n = 1 and at 65,536 elements (float32): the median of single calls, each timed with
  `time.perf_counter_ns` around the literal call (the loops are generated, as `timeit` does, so
  no lambda or argument unpacking is timed); the timer's own overhead is the first row;
- the first call (trace, optimise, compile) of the 10-op chain: a fresh function each time,
  median of several;
- the Rust API's time for the same kernels: the HIR that rfxjit traced is written to files and
  timed by `crates/rfx/examples/python_peers.rs` (`Executable::run`, no Python), when that
  example is built (`cargo build --release -p rfx --features cuda,metal --example python_peers`).

Needs a release build of rfxjit (`pip install ./crates/rfx-python`; the dev build's routines are
unoptimised) and `pip install numba "jax[cpu]"`. Prints a Markdown table.

    python crates/rfx-python/examples/peers.py [--rust target/release/examples/python_peers]
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import rfxjit as rj

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numba  # noqa: E402


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def chain10(x, y):
    return ((x * 1.5 + y) * 0.5 - np.sin(x)) * np.cos(y) + np.exp(-x * x)


def pid_clip_jnp(e, i, d):
    return jnp.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def chain10_jnp(x, y):
    return ((x * 1.5 + y) * 0.5 - jnp.sin(x)) * jnp.cos(y) + jnp.exp(-x * x)


def pid_clip_loop(e, i, d, out):
    for k in range(out.size):
        out[k] = min(max(1.2 * e[k] + 0.3 * i[k] + 0.05 * d[k], -1.0), 1.0)


def chain10_loop(x, y, out):
    for k in range(out.size):
        a, b = x[k], y[k]
        out[k] = ((a * 1.5 + b) * 0.5 - np.sin(a)) * np.cos(b) + np.exp(-a * a)


def single_calls_ns(stmt, names, values, calls):
    """The time of each of `calls` executions of `stmt`, in ns."""
    params = ", ".join(["_n", "_clock", *names])
    src = (
        f"def _timed({params}):\n"
        "    _s = [0] * _n\n"
        "    for _k in range(_n):\n"
        "        _t0 = _clock()\n"
        f"        {stmt}\n"
        "        _s[_k] = _clock() - _t0\n"
        "    return _s\n"
    )
    scope = {}
    exec(compile(src, f"<timed {stmt}>", "exec"), scope)  # noqa: S102 - our own literal text
    timed = scope["_timed"]
    timed(min(calls, 200), time.perf_counter_ns, *values)  # warm up
    return timed(calls, time.perf_counter_ns, *values)


def median_us(stmt, names, values, calls, rounds=5):
    """The lowest median of `rounds` rounds of single calls, in µs."""
    return min(statistics.median(single_calls_ns(stmt, names, values, calls)) for _ in range(rounds)) / 1000


def first_call_ms(make, calls):
    """The median time of the first call of a fresh function, in ms (`make(k)` returns the
    function and its arguments; each k gives new shapes, so no cache can answer)."""
    times = []
    for k in range(calls):
        fn, args = make(k)
        t0 = time.perf_counter_ns()
        result = fn(*args)
        if hasattr(result, "block_until_ready"):
            result.block_until_ready()
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def rust_times(binary, hirs):
    """`{name: (compile_us, run_us)}` from the Rust example, or {} without it."""
    if not binary or not os.path.exists(binary):
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, text in hirs.items():
            path = os.path.join(tmp, f"{name}.hir")
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
        lines = subprocess.run([binary, *paths], check=True, capture_output=True, text=True).stdout
    times = {}
    for line in lines.splitlines():
        name, compile_us, run_ns = line.split()
        times[name] = (float(compile_us.split("=")[1]), float(run_ns.split("=")[1]) / 1000)
    return times


def rows_for(kernel, n, rust):
    """(label, µs) rows for one kernel at n elements, checked against NumPy first."""
    rng = np.random.default_rng(0)
    if kernel == "pid_clip":
        args = [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(3)]
        names, fn, fn_jnp, loop = ["e", "i", "d"], pid_clip, pid_clip_jnp, pid_clip_loop
    else:
        args = [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2)]
        names, fn, fn_jnp, loop = ["x", "y"], chain10, chain10_jnp, chain10_loop
    want = fn(*args)
    out = np.empty(n, np.float32)
    f = rj.jit(fn)
    bound = f.bind(*args)
    nb_expr = numba.njit(fn)
    nb_loop = numba.njit(loop)
    jf = jax.jit(fn_jnp)
    jargs = [jnp.asarray(a) for a in args]
    for got in (f(*args), bound(*args, out=out), nb_expr(*args), np.asarray(jf(*jargs))):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    nb_loop(*args, out)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)
    a = ", ".join(names)
    values = [*args, out, f, bound, nb_expr, nb_loop, jf, *jargs]
    scope = [*names, "out", "f", "bound", "nb_expr", "nb_loop", "jf", *(f"j{s}" for s in names)]
    ja = ", ".join(f"j{s}" for s in names)
    calls = 20000 if n == 1 else 300
    expr = "np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)" if kernel == "pid_clip" else (
        "((x * 1.5 + y) * 0.5 - np.sin(x)) * np.cos(y) + np.exp(-x * x)"
    )
    globals_np = [np]
    rows = [
        ("rfxjit bound (`k = f.bind(...)`; `k(..., out=out)`)", median_us(f"bound({a}, out=out)", scope, values, calls)),
        ("rfxjit `@jit` call through the cache (new output)", median_us(f"f({a})", scope, values, calls)),
        ("numba `@njit` loop into `out`", median_us(f"nb_loop({a}, out)", scope, values, calls)),
        ("numba `@njit` NumPy expression (new output)", median_us(f"nb_expr({a})", scope, values, calls)),
        ("JAX `jax.jit` (JAX arrays, `block_until_ready`)", median_us(f"jf({ja}).block_until_ready()", scope, values, calls)),
        ("NumPy expression", median_us(expr, [*scope, "np"], [*values, *globals_np], calls)),
    ]
    key = f"{kernel}_{n}"
    if key in rust:
        rows.append(("Rust `Executable::run` (same HIR, no Python)", rust[key][1]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rust", default="target/release/examples/python_peers", help="the Rust example's binary")
    opts = parser.parse_args()

    hirs = {}
    for kernel, fn, k in (("pid_clip", pid_clip, 3), ("chain10", chain10, 2)):
        for n in (1, 65536):
            args = [np.zeros(n, np.float32) for _ in range(k)]
            hirs[f"{kernel}_{n}"] = rj.jit(fn).bind(*args).hir()
    rust = rust_times(opts.rust, hirs)

    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, jax {jax.__version__}")
    print(f"rfxjit {rj.__version__ if hasattr(rj, '__version__') else ''}; GIL released from {rj._rfx.GIL_RELEASE_ELEMS} elements")
    timer = median_us("pass", [], [], 20000)
    print(f"\ntimer overhead (perf_counter_ns around `pass`): {timer:.3f} µs (not subtracted)\n")
    for kernel, n in (("pid_clip", 1), ("pid_clip", 65536), ("chain10", 1), ("chain10", 65536)):
        rows = rows_for(kernel, n, rust)
        base = rows[0][1]
        print(f"| {kernel} n = {n} | µs (median) | ÷ rfxjit bound |")
        print("|---|---|---|")
        for label, us in rows:
            print(f"| {label} | {us:.3f} | {us / base:.2f}× |")
        print()

    def fresh_rfx(k):
        x = np.full(1000 + k, 0.5, np.float32)
        return rj.jit(chain10), (x, x)

    def fresh_numba(k):
        x = np.full(1000 + k, 0.5, np.float32)
        return numba.njit(chain10), (x, x)

    def fresh_jax(k):
        x = jnp.full(1000 + k, 0.5, jnp.float32)
        return jax.jit(chain10_jnp), (x, x)

    firsts = [
        ("rfxjit `@jit` (trace + optimise + compile + call)", first_call_ms(fresh_rfx, 9)),
        ("numba `@njit` (type inference + LLVM + call)", first_call_ms(fresh_numba, 3)),
        ("JAX `jax.jit` (trace + XLA compile + call)", first_call_ms(fresh_jax, 5)),
    ]
    if "chain10_65536" in rust:
        firsts.append(("Rust `rfx_runtime::compile` of the traced HIR (optimise + compile)", rust["chain10_65536"][0] / 1000))
    print("| chain10: first call | ms (median) |")
    print("|---|---|")
    for label, ms in firsts:
        print(f"| {label} | {ms:.2f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
