//! LIR programs with loops over ranges of their kernels ([`rfx_ir::repeat`]), written by hand,
//! each with inputs and the outputs its recurrence gives, computed here in plain Rust: the
//! runner-level conformance cases of program loops that every backend's tests run.
//!
//! They cover a counted loop (`c = c * 0.5 + 1` in `f64`), zero and one trips, a loop with an
//! exit flag that stops it early (and one whose flag never clears, and one whose trip count
//! ends it first), nested loops, a reduction whose result the same iteration reads back (a
//! kernel's preamble re-run each iteration), and sizes that run as one function, as one
//! function per kernel and split across threads on the CPU. Every op is exact, so outputs
//! must match bit for bit.
//!
//! The HIR-level cases (`Op::Loop` kernels through the optimiser and lowering) are in
//! [`crate::conformance::cases`] (`loop_*`).

use rfx_ir::lir::{self, LirProgram};
use rfx_ir::repeat::KernelLoop;
use rfx_ir::{Array, BufId, Scalar};

/// One program with loops, its inputs and its expected outputs.
#[derive(Clone, Debug)]
pub struct LoopProgram {
    /// A readable unique name (`halving_f64_n4_t7`).
    pub name: String,
    /// The program (verified).
    pub program: LirProgram,
    /// Its inputs, in order.
    pub inputs: Vec<Array>,
    /// The outputs it must give, bit for bit.
    pub expected: Vec<Array>,
}

/// Sizes: a few points (a CPU program of such kernels runs as one function), more than one
/// function's worth (one function per kernel), and enough to split across threads.
const SIZES: [(usize, usize); 3] = [(4, 32768), (1500, 32768), (70_000, 1024)];

/// Every loop program.
pub fn loop_programs() -> Vec<LoopProgram> {
    let mut out = Vec::new();
    for (n, thread_min) in SIZES {
        for trips in [0u64, 1, 7, 100] {
            out.push(halving(n, thread_min, trips));
        }
        for (trips, limit) in [(1000u64, 20i32), (2, 20), (5, -100), (50, 1_000_000)] {
            out.push(counting_while(n, thread_min, trips, limit));
        }
        for (outer, inner) in [(3u64, 4u64), (0, 4), (3, 0)] {
            out.push(nested(n, thread_min, outer, inner));
        }
        out.push(reducing(n, thread_min, 5));
    }
    out
}

/// Compares `outputs` with `case.expected` bit for bit; `Err` names the first difference.
pub fn compare(case: &LoopProgram, outputs: &[Array]) -> Result<(), String> {
    if outputs.len() != case.expected.len() {
        return Err(format!(
            "{}: {} outputs, expected {}",
            case.name,
            outputs.len(),
            case.expected.len()
        ));
    }
    for (k, (want, got)) in case.expected.iter().zip(outputs).enumerate() {
        if want.dtype() != got.dtype() || want.shape() != got.shape() {
            return Err(format!("{}: output {k} has the wrong type", case.name));
        }
        let (want, got) = (want.to_f64_vec(), got.to_f64_vec());
        if let Some(i) = (0..want.len()).find(|&i| want[i].to_bits() != got[i].to_bits()) {
            return Err(format!(
                "{}: output {k} element {i}: expected {}, got {}",
                case.name, want[i], got[i]
            ));
        }
    }
    Ok(())
}

/// A kernel over `[n]`: `body` and `preamble` are its instruction lines.
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

fn range(first: usize, end: usize, trips: u64, exit: Option<usize>) -> KernelLoop {
    KernelLoop {
        first,
        end,
        trips,
        exit: exit.map(BufId::new),
    }
}

/// Parses `text`, attaches `loops` and verifies the result; the texts here are fixed, so a
/// failure is a bug of this module.
fn program(text: &str, loops: Vec<KernelLoop>) -> LirProgram {
    let program = lir::parse(text)
        .unwrap_or_else(|e| panic!("invariant: a loop program parses: {e}\n{text}"))
        .with_loops(loops);
    if let Err(e) = lir::verify(&program) {
        panic!("invariant: a loop program verifies: {e}\n{program}");
    }
    program
}

/// `y = f^trips(x)` with `f(c) = c * 0.5 + 1` on `n` f64 elements: kernels `x -> C`,
/// `C * 0.5 + 1 -> T`, `T -> C`, `C -> y`, the middle two in a loop.
fn halving(n: usize, thread_min: usize, trips: u64) -> LoopProgram {
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
    let x: Vec<f64> = (0..n).map(|i| (i % 97) as f64 * 0.75 - 30.0).collect();
    let y: Vec<f64> = x
        .iter()
        .map(|&x| (0..trips).fold(x, |c, _| c * 0.5 + 1.0))
        .collect();
    LoopProgram {
        name: format!("halving_f64_n{n}_t{trips}"),
        program: program(&text, vec![range(1, 3, trips, None)]),
        inputs: vec![Array::from_slice(&x)],
        expected: vec![Array::from_slice(&y)],
    }
}

/// `c = x`, then up to `trips` times { `c = c + 3`; the flag `c[0] < limit` }, leaving when the
/// flag is false; `y = c` and the flag, in i32 on `n` elements. The body is masked by the flag
/// (`c = flag ? c + 3 : c`, `flag = flag ? c[0] < limit : flag`), as [`rfx_ir::repeat`] asks of
/// a loop with an exit flag, so a backend that runs every trip gives the same outputs.
fn counting_while(n: usize, thread_min: usize, trips: u64, limit: i32) -> LoopProgram {
    let bytes = n * 4;
    let mut text = format!(
        "lir count arena {} align 64 {{\n  buf0: i32[{n}] = input x\n  buf1: i32[{n}] = output y\n  \
         buf2: i32[{n}] = arena 0\n  buf3: i32[{n}] = arena {bytes}\n  buf4: bool[] = arena {}\n  \
         buf5: bool[] = output going\n",
        2 * bytes + 8,
        2 * bytes
    );
    text += &copy("enter", n, thread_min, "i32", 0, 2);
    // The flag starts true: a loop of no trips leaves it so.
    text += &kernel(
        "start",
        1,
        thread_min,
        "bool",
        "      s0 = const true\n",
        "      store buf4 [0] = s0\n",
    );
    text += &kernel(
        "step",
        n,
        thread_min,
        "i32, i32, i32, bool, i32",
        "      s1 = const 3\n",
        "      s0 = load buf2 [1]\n      s2 = add s0, s1\n      s3 = load buf4 [0]\n      \
         s4 = select s3, s2, s0\n      store buf3 [1] = s4\n",
    );
    text += &kernel(
        "test",
        1,
        thread_min,
        "i32, i32, bool, bool, bool",
        &format!("      s1 = const {limit}\n"),
        "      s0 = load buf3 [0]\n      s2 = lt s0, s1\n      s3 = load buf4 [0]\n      \
         s4 = select s3, s2, s3\n      store buf4 [0] = s4\n",
    );
    text += &copy("carry", n, thread_min, "i32", 3, 2);
    text += &copy("leave", n, thread_min, "i32", 2, 1);
    text += &copy("flag", 1, thread_min, "bool", 4, 5);
    text += "}\n";
    let x: Vec<i32> = (0..n as i32).map(|i| i % 7 - 3).collect();
    // Every element takes element 0's number of iterations.
    let mut iterations = 0;
    let mut going = true;
    let mut c0 = x[0];
    while iterations < trips && going {
        c0 += 3;
        going = c0 < limit;
        iterations += 1;
    }
    let y: Vec<i32> = x.iter().map(|&c| c + 3 * iterations as i32).collect();
    LoopProgram {
        name: format!("while_i32_n{n}_t{trips}_below{limit}"),
        program: program(&text, vec![range(2, 5, trips, Some(4))]),
        inputs: vec![Array::from_slice(&x)],
        expected: vec![Array::from_slice(&y), Array::scalar(Scalar::Bool(going))],
    }
}

/// `c = x`; `outer` times { `c = c + 1`; `inner` times { `c = c * 2` } }; `y = c`, in i32.
fn nested(n: usize, thread_min: usize, outer: u64, inner: u64) -> LoopProgram {
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
    let x: Vec<i32> = (0..n as i32).map(|i| i % 5 - 2).collect();
    let y: Vec<i32> = x
        .iter()
        .map(|&x| (0..outer).fold(x, |c, _| (0..inner).fold(c + 1, |c, _| c * 2)))
        .collect();
    LoopProgram {
        name: format!("nested_i32_n{n}_{outer}x{inner}"),
        program: program(&text, vec![range(1, 5, outer, None), range(3, 5, inner, None)]),
        inputs: vec![Array::from_slice(&x)],
        expected: vec![Array::from_slice(&y)],
    }
}

/// `c = x`; `trips` times { `s = sum(c)`; `c = c * 3 - s` } (wrapping i32); `y = c`. The sum
/// is read in the second kernel's preamble, which must run again each iteration.
fn reducing(n: usize, thread_min: usize, trips: u64) -> LoopProgram {
    let bytes = n * 4;
    let mut text = format!(
        "lir reducing arena {} align 64 {{\n  buf0: i32[{n}] = input x\n  buf1: i32[{n}] = output y\n  \
         buf2: i32[{n}] = arena 0\n  buf3: i32[{n}] = arena {bytes}\n  buf4: i32[] = arena {}\n",
        2 * bytes + 8,
        2 * bytes
    );
    text += &copy("enter", n, thread_min, "i32", 0, 2);
    text += &format!(
        "  kernel total dims [{n}] reduce 1 vector 4 thread_min {thread_min} tile 1024 lanes 1 {{\n    \
         slots [i32]\n    preamble {{}}\n    body {{\n      s0 = load buf2 [1]\n      reduce sum buf4 = s0\n    \
         }}\n  }}\n"
    );
    text += &kernel(
        "step",
        n,
        thread_min,
        "i32, i32, i32, i32, i32",
        "      s1 = load buf4 [0]\n      s2 = const 3\n",
        "      s0 = load buf2 [1]\n      s3 = mul s0, s2\n      s4 = sub s3, s1\n      store buf3 [1] = s4\n",
    );
    text += &copy("carry", n, thread_min, "i32", 3, 2);
    text += &copy("leave", n, thread_min, "i32", 2, 1);
    text += "}\n";
    let x: Vec<i32> = (0..n as i32).map(|i| (i * 37) % 11 - 5).collect();
    let mut c = x.clone();
    for _ in 0..trips {
        let s = c.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        for v in &mut c {
            *v = v.wrapping_mul(3).wrapping_sub(s);
        }
    }
    LoopProgram {
        name: format!("reducing_i32_n{n}_t{trips}"),
        program: program(&text, vec![range(1, 4, trips, None)]),
        inputs: vec![Array::from_slice(&x)],
        expected: vec![Array::from_slice(&c)],
    }
}
