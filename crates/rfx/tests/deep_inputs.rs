//! Inputs that are deep or long: expressions nested 20,000 levels, flat sums of 100,000 terms,
//! and chains of 20,000 HIR ops go through every stage (parse, print, verify, differentiate,
//! batch, optimise, lower, interpret, draw) on the default 2 MiB test thread, which a
//! recursive walk of them would overflow. Results are checked against closed forms and the
//! reference interpreter.

use rfx::expr::{MAX_NESTING, Signature, compile};
use rfx::{Array, Tensor};
use rfx_ir::hir::{Builder, Kernel};
use rfx_ir::interp::{Mode, run_hir, run_lir, run_mir};
use rfx_ir::{DType, TensorType, UnaryOp};

const DEPTH: usize = 20_000;
const TERMS: usize = 100_000;

fn sig() -> Signature {
    "x: f64[3]".parse().expect("signature")
}

fn x() -> Array {
    Array::from_slice(&[0.5f64, 1.0, 2.0])
}

fn interp(kernel: &Kernel, inputs: &[Array]) -> Vec<f64> {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    run_hir(kernel, &views, Mode::Native).expect("interpreter")[0].to_f64_vec()
}

/// The kernel compiled and run by the whole pipeline on the `interp` backend.
fn pipeline(kernel: Kernel, inputs: &[Array]) -> Vec<f64> {
    rfx::jit_kernel(kernel)
        .on_backend("interp")
        .call(inputs)
        .expect("compiled on interp")[0]
        .to_f64_vec()
}

/// `sin` applied `n` times, and the chain's kernel built with the HIR builder.
fn sine_chain(n: usize) -> Kernel {
    let mut b = Builder::new("chain");
    let mut v = b.input("x", TensorType::new(DType::F64, [3])).expect("input");
    for _ in 0..n {
        v = b.unary(UnaryOp::Sin, v).expect("sin");
    }
    b.output("out", v).expect("output");
    b.finish().expect("kernel")
}

fn iterate_sin(x: f64, n: usize) -> f64 {
    (0..n).fold(x, |v, _| v.sin())
}

/// d/dx sin^n(x) = prod cos(sin^k(x)), k < n.
fn chain_derivative(x: f64, n: usize) -> f64 {
    let (mut v, mut d) = (x, 1.0);
    for _ in 0..n {
        d *= v.cos();
        v = v.sin();
    }
    d
}

#[test]
fn nested_parentheses_and_negations_run() {
    let parens = format!("{}x * 2{}", "(".repeat(DEPTH), ")".repeat(DEPTH));
    let kernel = compile(&parens, &sig()).expect("parens");
    assert_eq!(pipeline(kernel, &[x()]), [1.0, 2.0, 4.0]);
    // An even number of negations, each in its own parentheses.
    let negs = format!("{}x{}", "-(".repeat(DEPTH), ")".repeat(DEPTH));
    let kernel = compile(&negs, &sig()).expect("negations");
    assert_eq!(pipeline(kernel, &[x()]), [0.5, 1.0, 2.0]);
}

#[test]
fn nested_calls_run() {
    let src = format!("{}x{}", "sin(".repeat(DEPTH), ")".repeat(DEPTH));
    let kernel = compile(&src, &sig()).expect("sines");
    let want: Vec<f64> = [0.5, 1.0, 2.0].iter().map(|&v| iterate_sin(v, DEPTH)).collect();
    assert_eq!(interp(&kernel, &[x()]), want);
    assert_eq!(pipeline(kernel, &[x()]), want);
}

#[test]
fn flat_sums_run() {
    let src = vec!["x"; TERMS].join(" + ");
    let kernel = compile(&src, &sig()).expect("sum");
    let n = TERMS as f64;
    // Every partial sum is an integer multiple of 0.5 below 2^53: exact.
    assert_eq!(pipeline(kernel, &[x()]), [0.5 * n, n, 2.0 * n]);
    let src = vec!["sin(x)"; TERMS / 10].join(" - ");
    let kernel = compile(&src, &sig()).expect("differences");
    let want = interp(&kernel, &[x()]);
    assert_eq!(pipeline(kernel, &[x()]), want);
}

#[test]
fn nesting_past_the_limit_is_a_typed_error() {
    let src = format!(
        "{}x{}",
        "sin(".repeat(MAX_NESTING + 1),
        ")".repeat(MAX_NESTING + 1)
    );
    let start = std::time::Instant::now();
    let err = compile(&src, &sig()).expect_err("too deep");
    assert!(err.message.contains("rfx::expr::MAX_NESTING"), "{}", err.message);
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
}

#[test]
fn a_long_chain_goes_through_every_stage() {
    let kernel = sine_chain(DEPTH);
    // Print, parse and verify the HIR.
    let text = kernel.to_string();
    let parsed = rfx_ir::hir::parse(&text).expect("HIR parses");
    assert_eq!(parsed.to_string(), text);
    rfx_ir::hir::verify(&parsed).expect("HIR verifies");
    assert!(rfx_ir::dot::hir_to_dot(&parsed).contains("digraph"));
    let want = interp(&kernel, &[x()]);
    assert_eq!(want[0], iterate_sin(0.5, DEPTH));
    // MIR: print, parse, verify, draw, interpret.
    let (mir, report) = rfx_opt::optimize(&kernel, &rfx_opt::OptConfig::default()).expect("optimises");
    assert_eq!(report.kernels, 1);
    let mir_text = mir.to_string();
    let mir_parsed = rfx_ir::mir::parse(&mir_text).expect("MIR parses");
    rfx_ir::mir::verify(&mir_parsed).expect("MIR verifies");
    assert!(rfx_ir::dot::mir_to_dot(&mir_parsed).contains("digraph"));
    let input = x();
    let view = [input.view()];
    assert_eq!(
        run_mir(&mir_parsed, &view, Mode::Native).expect("MIR runs")[0].to_f64_vec(),
        want
    );
    // LIR: lower, print, parse, verify, interpret.
    let (lir, _) = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default()).expect("lowers");
    let lir_text = lir.to_string();
    let lir_parsed = rfx_ir::lir::parse(&lir_text).expect("LIR parses");
    rfx_ir::lir::verify(&lir_parsed).expect("LIR verifies");
    assert_eq!(
        run_lir(&lir_parsed, &view, Mode::Native).expect("LIR runs")[0].to_f64_vec(),
        want
    );
}

#[test]
fn a_long_chain_differentiates_and_batches() {
    let kernel = sine_chain(DEPTH);
    let x0 = 0.5f64;
    let d = chain_derivative(x0, DEPTH);
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-12 * want.abs().max(1e-300);
    let point = [Array::from_slice(&[x0; 3])];
    let dual = [Array::from_slice(&[x0; 3]), Array::from_slice(&[1.0f64; 3])];
    let summed = {
        let mut b = Builder::new("chain_sum");
        let mut u = b.input("x", TensorType::new(DType::F64, [3])).expect("input");
        for _ in 0..DEPTH {
            u = b.unary(UnaryOp::Sin, u).expect("sin");
        }
        let s = b.reduce_all(rfx_ir::ReduceOp::Sum, u).expect("sum");
        b.output("out", s).expect("output");
        b.finish().expect("kernel")
    };
    let grad = rfx_autodiff::grad(&summed, &["x"]).expect("grad");
    for g in interp(&grad, &point) {
        assert!(close(g, d), "{g} vs {d}");
    }
    let tangent = rfx_autodiff::jvp(&kernel, &["x"]).expect("jvp");
    let views: Vec<_> = dual.iter().map(Array::view).collect();
    let out = run_hir(&tangent, &views, Mode::Native).expect("jvp runs");
    for t in out[1].to_f64_vec() {
        assert!(close(t, d), "{t} vs {d}");
    }
    let batched = rfx_autodiff::vmap(&kernel, &[Some(0)], 2).expect("vmap");
    let xs = Array::from_vec([2, 3], vec![0.5f64, 1.0, 2.0, 0.5, 1.0, 2.0]).expect("batch");
    let want = interp(&kernel, &[x()]);
    assert_eq!(interp(&batched, &[xs])[3..], want[..]);
}

#[test]
fn a_long_traced_chain_compiles() {
    let f = rfx::jit(|x: Tensor| {
        let mut v = x;
        for _ in 0..DEPTH {
            v = v.sin();
        }
        v
    })
    .on_backend("interp");
    let out = f.call((&[0.5f64, 1.0, 2.0],)).expect("traced");
    let want: Vec<f64> = [0.5, 1.0, 2.0].iter().map(|&v| iterate_sin(v, DEPTH)).collect();
    assert_eq!(out[0].to_f64_vec(), want);
    let df = rfx::jit(rfx::grad(|x: Tensor| {
        let mut v = x;
        for _ in 0..DEPTH {
            v = v.sin();
        }
        v.sum_all()
    }))
    .on_backend("interp");
    let out = df.call((&[0.5f64, 1.0, 2.0],)).expect("traced gradient");
    for (g, x0) in out[0].to_f64_vec().into_iter().zip([0.5f64, 1.0, 2.0]) {
        let want = chain_derivative(x0, DEPTH);
        assert!((g - want).abs() <= 1e-12 * want.abs(), "{g} vs {want}");
    }
}
