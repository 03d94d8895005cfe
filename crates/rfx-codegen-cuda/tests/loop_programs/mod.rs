//! LIR programs with loops over ranges of their kernels (`rfx_ir::repeat`), written as LIR
//! text with the loops attached, as the optimiser links a `fori_loop` or `while_loop`: a copy
//! of the initial value into a carry buffer, the body writing the next carry into a fresh
//! temporary, a copy of it back into the carry, and a copy of the final carry into the output.
//! Each program comes with its result computed directly in Rust `f32` (the same operations in
//! the same order, so exact ops agree bit for bit), and [`unrolled`] gives the loop-free program
//! the LIR interpreter runs as the reference. Shared by the CUDA and metal backends' tests.

#![allow(dead_code, reason = "each test binary uses a different part")]

use rfx_ir::lir::{self, LirProgram};
use rfx_ir::repeat::{KernelLoop, Step, steps};
use rfx_ir::{Array, ArrayData, Shape};

/// Elements of each carried array.
pub(crate) const N: usize = 5;

/// `x`, then `a`, the inputs of [`fori`] and [`nested`].
pub(crate) fn fori_inputs() -> Vec<Array> {
    vec![
        f32_array(&[0.25, -1.5, 3.0, 1e-3, -7.75]),
        f32_array(&[0.5, -0.75, 0.9, 0.3, -0.1]),
    ]
}

pub(crate) fn f32_array(values: &[f32]) -> Array {
    Array::new(Shape::new(vec![values.len()]), ArrayData::F32(values.to_vec())).expect("an array")
}

pub(crate) fn f32_scalar(value: f32) -> Array {
    Array::new(Shape::new(vec![]), ArrayData::F32(vec![value])).expect("a scalar")
}

/// One LIR kernel: `dims`, `reduce` trailing reduced dims, its slots, preamble and body lines.
fn kernel(name: &str, dims: &str, reduce: usize, slots: &str, preamble: &[&str], body: &[&str]) -> String {
    let mut text = format!(
        "  kernel {name} dims {dims} reduce {reduce} vector 1 thread_min 16384 tile 1024 lanes 1 {{\n    \
         slots [{slots}]\n"
    );
    if preamble.is_empty() {
        text += "    preamble {}\n";
    } else {
        text += "    preamble {\n";
        for line in preamble {
            text += &format!("      {line}\n");
        }
        text += "    }\n";
    }
    text += "    body {\n";
    for line in body {
        text += &format!("      {line}\n");
    }
    text += "    }\n  }\n";
    text
}

/// A kernel copying `from` into `to`, both `f32[N]`.
fn copy(name: &str, from: &str, to: &str) -> String {
    kernel(
        name,
        &format!("[{N}]"),
        0,
        "f32",
        &[],
        &[&format!("s0 = load {from} [1]"), &format!("store {to} [1] = s0")],
    )
}

/// A kernel writing `c * a + x` into `to` (all `f32[N]`).
fn step(name: &str, c: &str, a: &str, x: &str, to: &str) -> String {
    kernel(
        name,
        &format!("[{N}]"),
        0,
        "f32, f32",
        &[],
        &[
            &format!("s0 = load {c} [1]"),
            &format!("s1 = load {a} [1]"),
            "s0 = mul s0, s1",
            &format!("s1 = load {x} [1]"),
            "s0 = add s0, s1",
            &format!("store {to} [1] = s0"),
        ],
    )
}

fn parse(text: &str, loops: Vec<KernelLoop>) -> LirProgram {
    let program = lir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    lir::verify(&program).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    program.with_loops(loops)
}

/// `fori_loop(0, trips, c -> c * a + x, x)`: inputs `x`, `a` (`f32[N]`), output `y`.
///
/// Kernels: `c = x`; loop `trips` times over [`n = c * a + x`, `c = n`]; `y = c`.
pub(crate) fn fori(trips: u64) -> LirProgram {
    let mut text = String::from(
        "lir fori arena 64 align 16 {\n  buf0: f32[5] = input x\n  buf1: f32[5] = input a\n  \
         buf2: f32[5] = output y\n  buf3: f32[5] = arena 0\n  buf4: f32[5] = arena 32\n",
    );
    text += &copy("init", "buf0", "buf3");
    text += &step("body", "buf3", "buf1", "buf0", "buf4");
    text += &copy("carry", "buf4", "buf3");
    text += &copy("out", "buf3", "buf2");
    text += "}\n";
    parse(
        &text,
        vec![KernelLoop {
            first: 1,
            end: 3,
            trips,
            exit: None,
        }],
    )
}

/// [`fori`]'s result, in Rust.
pub(crate) fn fori_expected(trips: u64, inputs: &[Array]) -> Vec<f32> {
    let (x, a) = (f32s(&inputs[0]), f32s(&inputs[1]));
    let mut c = x.clone();
    for _ in 0..trips {
        for i in 0..N {
            c[i] = c[i] * a[i] + x[i];
        }
    }
    c
}

/// `while_loop(c -> sum(c) < limit, c -> c * 2 + 1, x, max_iter = trips)` with an `i32`
/// counter of the iterations that ran: inputs `x` (`f32[N]`), `limit` (`f32[]`), outputs `y`
/// (`f32[N]`) and `count` (`i32[]`).
///
/// Kernels: `c = x`, `k = 0`; a loop of at most `trips` with exit flag `keep` over [`s =
/// sum(c)`, `keep = s < limit`, `n = keep ? c * 2 + 1 : c`, `m = keep ? k + 1 : k`, `c = n`,
/// `k = m`] (the masked body: once `keep` is false nothing changes); `y = c`, `count = k`.
pub(crate) fn while_program(trips: u64) -> LirProgram {
    let mut text = String::from(
        "lir while_sum arena 128 align 16 {\n  buf0: f32[5] = input x\n  buf1: f32[] = input limit\n  \
         buf2: f32[5] = output y\n  buf3: i32[] = output count\n  buf4: f32[5] = arena 0\n  \
         buf5: f32[5] = arena 32\n  buf6: f32[] = arena 64\n  buf7: bool[] = arena 72\n  \
         buf8: i32[] = arena 80\n  buf9: i32[] = arena 96\n",
    );
    text += &copy("init", "buf0", "buf4");
    text += &kernel(
        "count_init",
        "[]",
        0,
        "i32",
        &["s0 = const 0"],
        &["store buf8 [] = s0"],
    );
    text += &kernel(
        "total",
        &format!("[{N}]"),
        1,
        "f32",
        &[],
        &["s0 = load buf4 [1]", "reduce sum buf6 = s0"],
    );
    text += &kernel(
        "cond",
        "[]",
        0,
        "f32, f32, bool",
        &[],
        &[
            "s0 = load buf6 []",
            "s1 = load buf1 []",
            "s2 = lt s0, s1",
            "store buf7 [] = s2",
        ],
    );
    text += &kernel(
        "body",
        &format!("[{N}]"),
        0,
        "f32, f32, f32, f32, bool",
        &["s1 = const 2.0", "s2 = const 1.0"],
        &[
            "s0 = load buf4 [1]",
            "s4 = load buf7 [0]",
            "s3 = mul s0, s1",
            "s3 = add s3, s2",
            "s0 = select s4, s3, s0",
            "store buf5 [1] = s0",
        ],
    );
    text += &kernel(
        "count",
        "[]",
        0,
        "i32, i32, i32, bool",
        &["s1 = const 1"],
        &[
            "s0 = load buf8 []",
            "s3 = load buf7 []",
            "s2 = add s0, s1",
            "s0 = select s3, s2, s0",
            "store buf9 [] = s0",
        ],
    );
    text += &copy("carry", "buf5", "buf4");
    text += &kernel(
        "carry_count",
        "[]",
        0,
        "i32",
        &[],
        &["s0 = load buf9 []", "store buf8 [] = s0"],
    );
    text += &copy("out", "buf4", "buf2");
    text += &kernel(
        "out_count",
        "[]",
        0,
        "i32",
        &[],
        &["s0 = load buf8 []", "store buf3 [] = s0"],
    );
    text += "}\n";
    parse(
        &text,
        vec![KernelLoop {
            first: 2,
            end: 8,
            trips,
            exit: Some(rfx_ir::BufId::new(7)),
        }],
    )
}

/// `x`, then `limit`, the inputs of [`while_program`].
pub(crate) fn while_inputs(limit: f32) -> Vec<Array> {
    vec![f32_array(&[0.5, -1.25, 2.0, 0.0, 3.5]), f32_scalar(limit)]
}

/// [`while_program`]'s `y` and `count`, in Rust.
pub(crate) fn while_expected(trips: u64, inputs: &[Array]) -> (Vec<f32>, i32) {
    let limit = f32s(&inputs[1])[0];
    let mut c = f32s(&inputs[0]);
    let mut count = 0;
    for _ in 0..trips {
        let total = c.iter().fold(0.0f32, |s, &v| s + v);
        let keep = total < limit;
        if !keep {
            break;
        }
        for v in &mut c {
            *v = *v * 2.0 + 1.0;
        }
        count += 1;
    }
    (c, count)
}

/// Two nested loops: inputs `x`, `a` (`f32[N]`), output `y`.
///
/// Kernels: `d = x`; an outer loop of `outer` trips over [`c = d`; an inner loop of `inner`
/// trips over [`n = c * a + x`, `c = n`]; `m = (c + d) * 0.5`, `d = m`]; `y = d`.
pub(crate) fn nested(outer: u64, inner: u64) -> LirProgram {
    let mut text = String::from(
        "lir nested arena 160 align 16 {\n  buf0: f32[5] = input x\n  buf1: f32[5] = input a\n  \
         buf2: f32[5] = output y\n  buf3: f32[5] = arena 0\n  buf4: f32[5] = arena 32\n  \
         buf5: f32[5] = arena 64\n  buf6: f32[5] = arena 96\n",
    );
    text += &copy("init", "buf0", "buf3");
    text += &copy("enter", "buf3", "buf4");
    text += &step("body", "buf4", "buf1", "buf0", "buf5");
    text += &copy("carry", "buf5", "buf4");
    text += &kernel(
        "mix",
        &format!("[{N}]"),
        0,
        "f32, f32, f32",
        &["s2 = const 0.5"],
        &[
            "s0 = load buf4 [1]",
            "s1 = load buf3 [1]",
            "s0 = add s0, s1",
            "s0 = mul s0, s2",
            "store buf6 [1] = s0",
        ],
    );
    text += &copy("outer_carry", "buf6", "buf3");
    text += &copy("out", "buf3", "buf2");
    text += "}\n";
    parse(
        &text,
        vec![
            KernelLoop {
                first: 1,
                end: 6,
                trips: outer,
                exit: None,
            },
            KernelLoop {
                first: 2,
                end: 4,
                trips: inner,
                exit: None,
            },
        ],
    )
}

/// [`nested`]'s result, in Rust.
pub(crate) fn nested_expected(outer: u64, inner: u64, inputs: &[Array]) -> Vec<f32> {
    let (x, a) = (f32s(&inputs[0]), f32s(&inputs[1]));
    let mut d = x.clone();
    for _ in 0..outer {
        let mut c = d.clone();
        for _ in 0..inner {
            for i in 0..N {
                c[i] = c[i] * a[i] + x[i];
            }
        }
        for i in 0..N {
            d[i] = (c[i] + d[i]) * 0.5;
        }
    }
    d
}

pub(crate) fn f32s(array: &Array) -> Vec<f32> {
    match array.data() {
        ArrayData::F32(values) => values.clone(),
        other => panic!("expected f32 data, got {other:?}"),
    }
}

/// The loop-free program that runs the same kernels in the same order: every kernel of a loop
/// repeated once per trip (all `trips` of a loop with an exit flag, which its masked body makes
/// equal to stopping early). The LIR interpreter runs it as the reference.
pub(crate) fn unrolled(program: &LirProgram) -> LirProgram {
    fn flatten(steps: &[Step], out: &mut Vec<usize>) {
        for step in steps {
            match step {
                Step::Kernel(index) => out.push(*index),
                Step::Loop { spec, body } => {
                    for _ in 0..spec.trips {
                        flatten(body, out);
                    }
                }
            }
        }
    }
    let plan = steps(program.kernels().len(), program.loops()).expect("loops that nest");
    let mut order = Vec::new();
    flatten(&plan, &mut order);
    let kernels = order.iter().map(|&k| program.kernels()[k].clone()).collect();
    LirProgram::from_parts(
        program.name(),
        program.buffers().to_vec(),
        program.arena_bytes(),
        program.arena_align(),
        kernels,
    )
}

/// Bit-for-bit equality of `f32` arrays (no NaN arises in these programs).
pub(crate) fn same_bits(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| g.to_bits() == w.to_bits())
}

/// Whether running every trip of `program`'s loops gives what stopping at a false exit flag
/// gives, on `inputs` (the LIR interpreter runs both): what `rfx_ir::repeat` asks of a loop
/// with an exit flag (a masked body), and what a backend that does not read the flag needs.
pub(crate) fn masked(program: &LirProgram, inputs: &[Array]) -> bool {
    use rfx_ir::interp::{Mode, run_lir};
    if program.loops().iter().all(|l| l.exit.is_none()) {
        return true;
    }
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let looped = run_lir(program, &views, Mode::Native).unwrap_or_else(|e| panic!("run_lir: {e}\n{program}"));
    let flat = run_lir(&unrolled(program), &views, Mode::Native)
        .unwrap_or_else(|e| panic!("run_lir, unrolled: {e}\n{program}"));
    looped == flat
}

/// The shared loop programs (`rfx_check::loop_programs`) of the small and middle sizes (the
/// large one differs only in its constants and would take the interpreter long in [`masked`]).
pub(crate) fn shared_loop_programs() -> Vec<rfx_check::loop_programs::LoopProgram> {
    rfx_check::loop_programs::loop_programs()
        .into_iter()
        .filter(|case| {
            case.program
                .kernels()
                .iter()
                .all(|k| k.dims.iter().product::<usize>() < 65_536)
        })
        .collect()
}
