//! The thread count never changes a result: the peers benchmark's kernels (`x+y`, `x*y`,
//! `sin(x)`, `sin(x*2)+y`, the 10-op chain, the PID clip, and the value and gradient of
//! `sum(x²)`) and a batch of row sums, compiled for one thread and for two, give the same bits
//! on arrays large enough to be split (2¹⁹ points: even `x+y`, the cheapest body, gets more than
//! one thread at `LowerConfig::default()`'s 32,768 points per reference body). The exact ones
//! (no transcendental) also have the LIR interpreter's bits, the sums included (a sum with too
//! few outputs to share out runs in parts of its leaf tree); the transcendental ones are within
//! the backend's documented 4 ULP of it.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir::{Kernel, parse};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType, Shape};
use rfx_lower::{Backend, CompileOptions, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// Points per input: 2¹⁹.
const N: usize = 1 << 19;

/// How a kernel's CPU results must relate to the interpreter's.
#[derive(Clone, Copy, Debug)]
enum Reference {
    /// The same bits.
    Bits,
    /// Within this many ULP (of `f32`).
    Ulp(u32),
    /// Within this absolute bound.
    Abs(f64),
}

/// The kernel `name` over `f32[dims]` inputs named `inputs`, with `body` (HIR lines, `[N]`
/// standing for the inputs' shape) and `outputs`.
fn kernel(name: &str, inputs: &[&str], body: &str, outputs: &[&str]) -> Kernel {
    let shape = format!("[{N}]");
    let mut text = format!("kernel {name} {{\n");
    for i in inputs {
        text += &format!("  %{i} = input {i} : f32{shape}\n");
    }
    text += &body.replace("[N]", &shape);
    for o in outputs {
        text += &format!("  output {o} = %{o}\n");
    }
    text += "}\n";
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn lir_of(kernel: &Kernel) -> LirProgram {
    let (mir, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

/// Inputs for `kernel`, uniform in [-2, 2] (the peers script's range), from `seed`.
fn inputs(kernel: &Kernel, seed: u64) -> Vec<Array> {
    let mut rng = TestRng::new(seed);
    kernel
        .inputs()
        .map(|(_, _, ty)| {
            assert_eq!(ty.dtype, DType::F32);
            let data = (0..ty.shape.numel())
                .map(|_| rng.uniform(-2.0, 2.0) as f32)
                .collect();
            Array::new(ty.shape.clone(), ArrayData::F32(data)).expect("input")
        })
        .collect()
}

fn run(lir: &LirProgram, inputs: &[Array], threads: usize) -> Vec<Array> {
    let options = CompileOptions {
        max_threads: Some(threads),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(lir, &options).expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    compiled.run_to_new(&views).expect("run")
}

fn f32s(a: &Array) -> &[f32] {
    match a.data() {
        ArrayData::F32(v) => v,
        other => panic!("an f32 output, not {:?}", other.dtype()),
    }
}

/// The distance in units in the last place between two finite `f32` of the same sign, or
/// `u32::MAX` for anything else that differs.
fn ulps(a: f32, b: f32) -> u32 {
    if a.to_bits() == b.to_bits() {
        return 0;
    }
    if !a.is_finite() || !b.is_finite() || a.is_sign_negative() != b.is_sign_negative() {
        return if a == b { 0 } else { u32::MAX };
    }
    a.to_bits().abs_diff(b.to_bits())
}

fn check(name: &str, kernel: &Kernel, reference: Reference) {
    let lir = lir_of(kernel);
    let ins = inputs(kernel, 0x5eed ^ name.len() as u64);
    let one = run(&lir, &ins, 1);
    let two = run(&lir, &ins, 2);
    for (k, (a, b)) in one.iter().zip(&two).enumerate() {
        let (a, b) = (f32s(a), f32s(b));
        assert_eq!(a.len(), b.len());
        if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
            panic!(
                "{name}, output {k}, element {i}: one thread {}, two {}",
                a[i], b[i]
            );
        }
    }
    let views: Vec<_> = ins.iter().map(Array::view).collect();
    let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
    for (k, (got, want)) in one.iter().zip(&want).enumerate() {
        let (got, want) = (f32s(got), f32s(want));
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let ok = match reference {
                Reference::Bits => g.to_bits() == w.to_bits(),
                Reference::Ulp(n) => ulps(g, w) <= n,
                Reference::Abs(bound) => (f64::from(g) - f64::from(w)).abs() <= bound,
            };
            assert!(
                ok,
                "{name}, output {k}, element {i}: cpu {g}, interpreter {w} ({reference:?})"
            );
        }
    }
}

#[test]
fn elementwise_peers_kernels_keep_their_bits_on_two_threads() {
    let cases: [(&str, &[&str], &str, Reference); 6] = [
        (
            "add",
            &["x", "y"],
            "  %out = add %x, %y : f32[N]\n",
            Reference::Bits,
        ),
        (
            "mul",
            &["x", "y"],
            "  %out = mul %x, %y : f32[N]\n",
            Reference::Bits,
        ),
        ("sin", &["x"], "  %out = sin %x : f32[N]\n", Reference::Ulp(4)),
        (
            "fused_chain",
            &["x", "y"],
            "  %c = const 2.0 : f32[]\n  %m = mul %x, %c : f32[N]\n  %s = sin %m : f32[N]\n  %out = add %s, %y : f32[N]\n",
            // sin's 4 ULP, at most 1 in magnitude, added to y in [-2, 2]: within 2⁻²¹.
            Reference::Abs(1.0 / f64::from(1 << 21)),
        ),
        (
            "chain10",
            &["x", "y"],
            "  %a = const 1.5 : f32[]\n  %b = const 0.5 : f32[]\n  %p = mul %x, %a : f32[N]\n  %q = add %p, %y : f32[N]\n  %h = mul %q, %b : f32[N]\n  %sx = sin %x : f32[N]\n  %d = sub %h, %sx : f32[N]\n  %cy = cos %y : f32[N]\n  %e = mul %d, %cy : f32[N]\n  %xx = mul %x, %x : f32[N]\n  %nx = neg %xx : f32[N]\n  %ex = exp %nx : f32[N]\n  %out = add %e, %ex : f32[N]\n",
            // Three routines of 4 ULP each on values of magnitude at most 4: within 2⁻¹⁶.
            Reference::Abs(1.0 / f64::from(1 << 16)),
        ),
        (
            "pid_clip",
            &["e", "i", "d"],
            "  %kp = const 1.2 : f32[]\n  %ki = const 0.3 : f32[]\n  %kd = const 0.05 : f32[]\n  %lo = const -1.0 : f32[]\n  %hi = const 1.0 : f32[]\n  %a = mul %kp, %e : f32[N]\n  %b = mul %ki, %i : f32[N]\n  %c = mul %kd, %d : f32[N]\n  %s = add %a, %b : f32[N]\n  %t = add %s, %c : f32[N]\n  %u = clamp %t, %lo, %hi : f32[N]\n",
            Reference::Bits,
        ),
    ];
    for (name, ins, body, reference) in cases {
        let out = if name == "pid_clip" { "u" } else { "out" };
        check(name, &kernel(name, ins, body, &[out]), reference);
    }
}

#[test]
fn reductions_keep_their_bits_on_two_threads() {
    // The value and gradient of sum(x²), as one kernel (split in parts of its leaf tree on two
    // threads): the gradient and the sum have the interpreter's bits, which add the leaves in
    // the tree's order.
    let vg = kernel(
        "value_and_grad_sum_sq",
        &["x"],
        "  %two = const 2.0 : f32[]\n  %sq = mul %x, %x : f32[N]\n  %loss = sum %sq axes [0] : f32[]\n  %grad = mul %two, %x : f32[N]\n",
        &["loss", "grad"],
    );
    check("value_and_grad_sum_sq", &vg, Reference::Bits);
    // Row sums of a [512, 1024] batch (split by rows, 2¹⁹ points): the interpreter's bits.
    let text = "kernel rows {\n  %x = input x : f32[512, 1024]\n  %r = sum %x axes [1] : f32[512]\n  output r = %r\n}\n";
    let rows = parse(text).expect("parse");
    assert_eq!(
        rows.inputs().map(|(_, _, ty)| ty.shape.clone()).next(),
        Some(Shape::new([512, 1024]))
    );
    check("row_sums", &rows, Reference::Bits);
}

/// The bits of an `f32` or `f64` output, widened.
fn bits(a: &Array) -> Vec<u64> {
    match a.data() {
        ArrayData::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        ArrayData::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        other => panic!("a float output, not {:?}", other.dtype()),
    }
}

/// Inputs of `kernel` (`f32` or `f64`) uniform in `[lo, hi)`.
fn float_inputs(kernel: &Kernel, seed: u64, (lo, hi): (f64, f64)) -> Vec<Array> {
    let mut rng = TestRng::new(seed);
    kernel
        .inputs()
        .map(|(_, _, ty)| {
            let n = ty.shape.numel();
            let data = match ty.dtype {
                DType::F32 => ArrayData::F32((0..n).map(|_| rng.uniform(lo, hi) as f32).collect()),
                DType::F64 => ArrayData::F64((0..n).map(|_| rng.uniform(lo, hi)).collect()),
                other => panic!("a float input, not {other:?}"),
            };
            Array::new(ty.shape.clone(), data).expect("input")
        })
        .collect()
}

/// A long reduction whose outputs are too few to share among threads runs in parts of its
/// leaf tree (the leaves of `rfx_ir::lir::ReduceLeaves`, cut at nodes of the pairwise tree and
/// merged as the tree merges them): on one, two and four threads it gives the bits of the
/// interpreter, which adds the leaves in the tree's order. Full sums and means, row sums of a
/// few long rows, leaves of whole rows (two outputs of 300 rows of 1,000 points, the reduced
/// dims apart) and of row pieces with a short last one (5 rows of 3,000), leaf counts
/// that are not powers of two, the gradient stored beside the sum, `f32` and `f64`. A low
/// split threshold (128 points per reference body: a thread per 1,024 points of a sum) splits
/// arrays of a few thousand points, so that the cases stay small.
#[test]
fn reductions_in_parts_keep_the_interpreters_bits_on_any_thread_count() {
    let cases: [(&str, &str, &str, (f64, f64)); 9] = [
        (
            "two_leaves",
            "f32[4096]",
            "%r = sum %x axes [0] : f32[]",
            (-2.0, 2.0),
        ),
        (
            "five_leaves_short_last",
            "f32[9000]",
            "%r = sum %x axes [0] : f32[]",
            (-2.0, 2.0),
        ),
        (
            "ragged_full_sum",
            "f32[100003]",
            "%r = sum %x axes [0] : f32[]",
            (-2.0, 2.0),
        ),
        (
            "mean_f64",
            "f64[70001]",
            "%r = mean %x axes [0] : f64[]",
            (-2.0, 2.0),
        ),
        (
            "prod_near_one",
            "f64[40000]",
            "%r = prod %x axes [0] : f64[]",
            (0.9999, 1.0001),
        ),
        (
            "few_long_rows",
            "f32[3, 50000]",
            "%r = sum %x axes [1] : f32[3]",
            (-2.0, 2.0),
        ),
        (
            "row_groups",
            "f32[300, 2, 1000]",
            "%r = sum %x axes [0, 2] : f32[2]",
            (-2.0, 2.0),
        ),
        (
            "row_pieces",
            "f32[5, 2, 3000]",
            "%r = sum %x axes [0, 2] : f32[2]",
            (-2.0, 2.0),
        ),
        (
            "full_sum_of_rows",
            "f32[2, 60, 700]",
            "%r = sum %x axes [0, 1, 2] : f32[]",
            (-2.0, 2.0),
        ),
    ];
    let config = LowerConfig {
        min_elems_per_thread: 128,
        ..LowerConfig::default()
    };
    for (k, (name, ty, reduce, range)) in cases.into_iter().enumerate() {
        let text = format!("kernel {name} {{\n  %x = input x : {ty}\n  {reduce}\n  output r = %r\n}}\n");
        check_parts(name, &parse(&text).expect("parse"), &config, (k as u64, range));
    }
    // The value and gradient of sum(x²) in one kernel: the gradient is stored by whichever
    // thread runs its part.
    let vg = "kernel vg {\n  %x = input x : f32[50000]\n  %two = const 2.0 : f32[]\n  %sq = mul %x, %x : f32[50000]\n  %loss = sum %sq axes [0] : f32[]\n  %grad = mul %two, %x : f32[50000]\n  output loss = %loss\n  output grad = %grad\n}\n";
    check_parts(
        "value_and_grad",
        &parse(vg).expect("parse"),
        &config,
        (99, (-2.0, 2.0)),
    );
    // A sum of sines, whose pieces run through the tile routines where the target has them
    // (within 4 ULP of the interpreter's sines): one, two and four threads, bit for bit.
    for (ty, axes, out) in [("f32[30001]", "[0]", "f32[]"), ("f64[2, 9000]", "[1]", "f64[2]")] {
        let text = format!(
            "kernel sines {{\n  %x = input x : {ty}\n  %s = sin %x : {ty}\n  %r = sum %s axes {axes} : {out}\n  output r = %r\n}}\n"
        );
        let kernel = parse(&text).expect("parse");
        let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
        let lir = lower(&mir, &config).expect("lower").0;
        let ins = float_inputs(&kernel, 5, (-3.0, 3.0));
        let one = run(&lir, &ins, 1);
        for threads in [2, 4] {
            let many = run(&lir, &ins, threads);
            assert_eq!(
                bits(&one[0]),
                bits(&many[0]),
                "sum of sines {ty}, {threads} threads"
            );
        }
    }
}

/// `kernel` lowered with `config`, on one, two and four threads, against the interpreter, bit
/// for bit.
fn check_parts(name: &str, kernel: &Kernel, config: &LowerConfig, (seed, range): (u64, (f64, f64))) {
    let (mir, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, config).expect("lower").0;
    let ins = float_inputs(kernel, seed, range);
    let views: Vec<_> = ins.iter().map(Array::view).collect();
    let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
    for threads in [1, 2, 4] {
        let got = run(&lir, &ins, threads);
        for (k, (got, want)) in got.iter().zip(&want).enumerate() {
            let (got, want) = (bits(got), bits(want));
            assert_eq!(got.len(), want.len());
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{name}, {threads} threads, output {k}, element {i}: bits {:#x}, interpreter {:#x}",
                    got[i], want[i]
                );
            }
        }
    }
}
