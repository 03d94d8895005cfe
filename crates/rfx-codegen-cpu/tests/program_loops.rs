//! Programs with loops over ranges of their kernels (`rfx_ir::repeat`): the range runs its trip
//! count, a loop with an exit flag stops after the first iteration that leaves the flag false,
//! loops nest, and zero trips run nothing. Each program runs as one function (kernels of a few
//! points), as one function per kernel, and split across threads, through the checked call and
//! the pre-checked `run_args`, and is compared with the same recurrence computed here.

use rfx_codegen_cpu::{CpuBackend, compile};
use rfx_ir::lir::{self, LirProgram};
use rfx_ir::repeat::KernelLoop;
use rfx_ir::{Array, ArrayViewMut, BufId};
use rfx_lower::{Backend, CallArgs, CompileOptions, Compiled, Scratch};

/// A kernel over `[n]` copying or combining elementwise: `body` is its instruction lines.
fn kernel(name: &str, n: usize, thread_min: usize, slots: &str, preamble: &str, body: &str) -> String {
    format!(
        "  kernel {name} dims [{n}] reduce 0 vector 2 thread_min {thread_min} tile 1024 lanes 1 {{\n    \
         slots [{slots}]\n    preamble {{\n{preamble}    }}\n    body {{\n{body}    }}\n  }}\n"
    )
}

fn copy(name: &str, n: usize, thread_min: usize, dtype: &str, from: usize, to: usize) -> String {
    kernel(
        name,
        n,
        thread_min,
        dtype,
        "",
        &format!("      s0 = load buf{from} [1]\n      store buf{to} [1] = s0\n"),
    )
}

fn parse(text: &str, loops: Vec<KernelLoop>) -> LirProgram {
    let program = lir::parse(text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .with_loops(loops);
    lir::verify(&program).unwrap_or_else(|e| panic!("{e}\n{program}"));
    program
}

fn range(first: usize, end: usize, trips: u64, exit: Option<usize>) -> KernelLoop {
    KernelLoop {
        first,
        end,
        trips,
        exit: exit.map(BufId::new),
    }
}

/// `y = f^trips(x)` with `f(c) = c * 0.5 + 1` on `n` f64 elements: kernels `x -> C`,
/// `C -> T = C * 0.5 + 1`, `T -> C`, `C -> y`, the middle two in a loop.
fn halving(n: usize, thread_min: usize, trips: u64) -> LirProgram {
    let bytes = n * 8;
    let mut text = format!(
        "lir halving arena {} align 64 {{\n  buf0: f64[{n}] = input x\n  buf1: f64[{n}] = output y\n  \
         buf2: f64[{n}] = arena 0\n  buf3: f64[{n}] = arena {bytes}\n",
        2 * bytes
    );
    text += &copy("enter", n, thread_min, "f64", 0, 2);
    text += &kernel(
        "step",
        n,
        thread_min,
        "f64, f64, f64, f64, f64",
        "      s1 = const 0.5\n      s3 = const 1.0\n",
        "      s0 = load buf2 [1]\n      s2 = mul s0, s1\n      s4 = add s2, s3\n      store buf3 [1] = s4\n",
    );
    text += &copy("carry", n, thread_min, "f64", 3, 2);
    text += &copy("leave", n, thread_min, "f64", 2, 1);
    text += "}\n";
    parse(&text, vec![range(1, 3, trips, None)])
}

fn halving_reference(x: &[f64], trips: u64) -> Vec<f64> {
    x.iter()
        .map(|&x| (0..trips).fold(x, |c, _| c * 0.5 + 1.0))
        .collect()
}

/// Runs `program` on `inputs` through the checked call and through `run_args`; both must agree.
fn run(compiled: &dyn Compiled, inputs: &[Array]) -> Vec<Array> {
    let mut outputs: Vec<Array> = compiled
        .program()
        .outputs()
        .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outs: Vec<ArrayViewMut<'_>> = outputs.iter_mut().map(Array::view_mut).collect();
    let mut scratch = Scratch::new();
    compiled.run(&views, &mut outs, &mut scratch).expect("run");
    drop(outs);
    let mut args = CallArgs::new(compiled);
    for (k, input) in inputs.iter().enumerate() {
        args.set_input(k, input.view()).expect("set_input");
    }
    compiled.run_args(&mut args, &mut scratch).expect("run_args");
    assert_eq!(args.outputs(), outputs.as_slice(), "run_args and run differ");
    outputs
}

fn f64_input(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i as f64) * 0.75 - 3.0).collect()
}

#[test]
fn a_counted_loop_runs_its_range_trips_times_on_every_runner() {
    // (elements, thread_min): one function; one function per kernel; split across threads.
    for (n, thread_min) in [(4, 32768), (1500, 32768), (70_000, 1024)] {
        for trips in [0u64, 1, 2, 7, 100] {
            let program = halving(n, thread_min, trips);
            let compiled = CpuBackend
                .compile(&program, &CompileOptions::default())
                .expect("compile");
            let x = f64_input(n);
            let out = run(compiled.as_ref(), &[Array::from_slice(&x)]);
            let got = out[0].as_slice::<f64>().expect("f64");
            let want = halving_reference(&x, trips);
            let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "n {n}, {trips} trips: {:?} vs {:?}", &got[..4], &want[..4]);
        }
    }
}

#[test]
fn small_programs_with_loops_stay_one_function_and_large_ones_one_per_kernel() {
    let small = compile(&halving(4, 32768, 3), &CompileOptions::default()).expect("compile");
    assert_eq!(small.function_count(), 1);
    let large = compile(&halving(1500, 32768, 3), &CompileOptions::default()).expect("compile");
    assert_eq!(large.function_count(), 4);
}

/// `c = x`, then up to `trips` times `c = c + 3` with the flag `c < limit`; `y = c`, in i32
/// on `n` elements (every element takes the same path: the flag is element 0's).
fn counting_while(n: usize, thread_min: usize, trips: u64, limit: i32) -> LirProgram {
    let bytes = n * 4;
    let mut text = format!(
        "lir count arena {} align 64 {{\n  buf0: i32[{n}] = input x\n  buf1: i32[{n}] = output y\n  \
         buf2: i32[{n}] = arena 0\n  buf3: i32[{n}] = arena {bytes}\n  buf4: bool[] = arena {}\n",
        2 * bytes + 8,
        2 * bytes
    );
    text += &copy("enter", n, thread_min, "i32", 0, 2);
    text += &kernel(
        "step",
        n,
        thread_min,
        "i32, i32, i32",
        "      s1 = const 3\n",
        "      s0 = load buf2 [1]\n      s2 = add s0, s1\n      store buf3 [1] = s2\n",
    );
    text += &kernel(
        "test",
        1,
        thread_min,
        "i32, i32, bool",
        &format!("      s1 = const {limit}\n"),
        "      s0 = load buf3 [0]\n      s2 = lt s0, s1\n      store buf4 [0] = s2\n",
    );
    text += &copy("carry", n, thread_min, "i32", 3, 2);
    text += &copy("leave", n, thread_min, "i32", 2, 1);
    text += "}\n";
    parse(&text, vec![range(1, 4, trips, Some(4))])
}

#[test]
fn a_loop_with_an_exit_flag_stops_after_the_iteration_that_clears_it() {
    for (n, thread_min) in [(3, 32768), (1500, 32768), (70_000, 1024)] {
        for (trips, limit) in [(1000u64, 20i32), (2, 20), (0, 20), (5, -100), (1000, 100_000)] {
            let program = counting_while(n, thread_min, trips, limit);
            let compiled = CpuBackend
                .compile(&program, &CompileOptions::default())
                .expect("compile");
            let x = vec![1i32; n];
            let out = run(compiled.as_ref(), &[Array::from_slice(&x)]);
            let mut c = 1i32;
            for _ in 0..trips {
                c += 3;
                if c >= limit {
                    break;
                }
            }
            let got = out[0].as_slice::<i32>().expect("i32");
            assert!(
                got.iter().all(|&v| v == c),
                "n {n}, {trips} trips, limit {limit}: {} instead of {c}",
                got[0]
            );
        }
    }
}

/// `c = x`; 3 times { `c = c + 1`; 4 times { `c = c * 2` } }; `y = c`, in i32.
fn nested(n: usize, thread_min: usize, outer: u64, inner: u64) -> LirProgram {
    let bytes = n * 4;
    let mut text = format!(
        "lir nest arena {} align 64 {{\n  buf0: i32[{n}] = input x\n  buf1: i32[{n}] = output y\n  \
         buf2: i32[{n}] = arena 0\n  buf3: i32[{n}] = arena {bytes}\n",
        2 * bytes
    );
    let step = |name: &str, op: &str, constant: i32| {
        kernel(
            name,
            n,
            thread_min,
            "i32, i32, i32",
            &format!("      s1 = const {constant}\n"),
            &format!("      s0 = load buf2 [1]\n      s2 = {op} s0, s1\n      store buf3 [1] = s2\n"),
        )
    };
    text += &copy("enter", n, thread_min, "i32", 0, 2);
    text += &step("bump", "add", 1);
    text += &copy("carry_bump", n, thread_min, "i32", 3, 2);
    text += &step("double", "mul", 2);
    text += &copy("carry_double", n, thread_min, "i32", 3, 2);
    text += &copy("leave", n, thread_min, "i32", 2, 1);
    text += "}\n";
    parse(&text, vec![range(1, 5, outer, None), range(3, 5, inner, None)])
}

#[test]
fn nested_loops_run_the_inner_range_on_every_outer_iteration() {
    for (n, thread_min) in [(2, 32768), (1500, 32768), (70_000, 1024)] {
        for (outer, inner) in [(3u64, 4u64), (0, 4), (3, 0), (1, 1)] {
            let program = nested(n, thread_min, outer, inner);
            let compiled = CpuBackend
                .compile(&program, &CompileOptions::default())
                .expect("compile");
            let x: Vec<i32> = (0..n as i32).map(|i| i % 5 - 2).collect();
            let out = run(compiled.as_ref(), &[Array::from_slice(&x)]);
            let want: Vec<i32> = x
                .iter()
                .map(|&x| (0..outer).fold(x, |c, _| (0..inner).fold(c + 1, |c, _| c * 2)))
                .collect();
            assert_eq!(
                out[0].as_slice::<i32>().expect("i32"),
                want.as_slice(),
                "n {n}, {outer} x {inner}"
            );
        }
    }
}

#[test]
fn ten_thousand_trips_run_in_one_function() {
    let many = compile(&halving(4, 32768, 10_000), &CompileOptions::default()).expect("compile");
    assert_eq!(many.function_count(), 1);
    let x = f64_input(4);
    let out = run(&many, &[Array::from_slice(&x)]);
    assert_eq!(
        out[0].as_slice::<f64>().expect("f64"),
        halving_reference(&x, 10_000).as_slice()
    );
}

#[test]
fn an_exit_flag_that_is_not_a_bool_scalar_is_refused() {
    // The loop's exit names the f64 carry: a compile error, not a read of the wrong bytes.
    let program = halving(4, 32768, 3);
    let bad = program.clone().with_loops(vec![range(1, 3, 3, Some(2))]);
    let err = compile(&bad, &CompileOptions::default()).expect_err("an f64 exit flag");
    assert!(err.to_string().contains("exit"), "{err}");
}
