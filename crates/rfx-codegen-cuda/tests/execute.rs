//! The CUDA backend on a GPU against the reference interpreters, and its behaviour without one.
//!
//! With a device, every kernel of the conformance set runs on it:
//! - kernels of exactly-rounded ops must give `run_lir`'s bits (a NaN may differ in payload);
//! - single transcendental ops (`unary_exp_f32`, `binary_pow_f64`, ...) must be within the
//!   documented CUDA ULP bound of `run_hir(.., Mode::Oracle)` (plus the reference's own
//!   rounding);
//! - chains of transcendentals (random kernels, the corpus) only have to run: composing
//!   approximations has no per-op bound;
//! - reductions of 1024 or more points run as block trees and are checked against their
//!   rounding bounds in `tests/tree.rs`; here they only have to run and repeat their bits.
//!
//! Without a driver or GPU these tests print `skipped: no CUDA driver/GPU (<reason>)`, and the
//! backend must answer `Unavailable`, not panic.

mod common;

use common::{Case, corpus_cases, op_cases, random_cases, suite_cases};
use rfx_codegen_cuda::CudaBackend;
use rfx_ir::hir::{Kernel, Op};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, BinaryOp, DType, Scalar};
use rfx_lower::{Backend, BackendError, Scratch, Transcendental};

fn libcuda_present() -> bool {
    ["libcuda.so.1", "libcuda.so"]
        .iter()
        // SAFETY: the driver library's initialisers have no preconditions.
        .any(|name| unsafe { libloading::Library::new(*name) }.is_ok())
}

/// `Some(reason)` when there is no GPU to run on.
fn no_gpu() -> Option<String> {
    match CudaBackend.check_available() {
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[test]
fn without_a_driver_the_backend_is_unavailable_not_a_panic() {
    let available =
        std::panic::catch_unwind(|| CudaBackend.check_available()).expect("check_available must not panic");
    let case = &op_cases()[0];
    let compiled =
        std::panic::catch_unwind(|| CudaBackend.compile(&case.lir, &Default::default()).map(|_| ()))
            .expect("compile must not panic");
    if libcuda_present() {
        println!("skipped: libcuda is present here; availability is {available:?}");
        return;
    }
    for result in [available, compiled] {
        match result {
            Err(BackendError::Unavailable { backend, reason }) => {
                assert_eq!(backend, "cuda");
                assert!(
                    reason.contains("libcuda") || reason.contains("NVRTC"),
                    "the reason should say what is missing: {reason}"
                );
            }
            other => panic!("expected BackendError::Unavailable without libcuda, got {other:?}"),
        }
    }
    assert_eq!(CudaBackend.name(), "cuda");
}

fn is_transcendental(op: &Op) -> bool {
    match op {
        Op::Unary(u) => u.is_transcendental(),
        Op::Binary(b) => matches!(b, BinaryOp::Pow | BinaryOp::Atan2),
        _ => false,
    }
}

/// The transcendental ops of `kernel`, those in its loops' bodies and tests included (a loop
/// runs them once per trip, so such a kernel is never held to one op's bound, nor to bits).
fn transcendental_count(kernel: &Kernel) -> usize {
    kernel
        .nodes()
        .iter()
        .map(|n| {
            let inner = match &n.op {
                Op::Loop(spec) => std::iter::once(&spec.body)
                    .chain(&spec.cond)
                    .map(transcendental_count)
                    .sum(),
                _ => 0,
            };
            usize::from(is_transcendental(&n.op)) + inner
        })
        .sum()
}

#[test]
fn transcendentals_in_loop_bodies_are_counted() {
    // Without a GPU too: the classifier decides which kernels are compared bit for bit.
    let cases = suite_cases();
    let looped = cases
        .iter()
        .find(|c| c.name.starts_with("suite_loop_sin_f32"))
        .expect("the suite has a loop of sin");
    assert_eq!(transcendental_count(&looped.kernel), 1, "{}", looped.name);
    let exact = cases
        .iter()
        .find(|c| c.name.starts_with("suite_loop_") && !c.name.contains("sin"))
        .map(|c| transcendental_count(&c.kernel));
    assert_eq!(exact, Some(0));
}

/// The documented bound ([`Backend::ulp_bound`]) of a single op, in ULP of the result's dtype.
fn ulp_bound(op: &Op, dtype: DType) -> f64 {
    let op = match op {
        Op::Unary(u) => Transcendental::unary(*u),
        Op::Binary(b) => Transcendental::binary(*b),
        _ => None,
    }
    .expect("a transcendental op");
    let args = vec![1.0; op.arity()];
    CudaBackend
        .ulp_bound(op, dtype, &args)
        .expect("CUDA documents every float bound") as f64
}

/// The spacing of `dtype` floats at `x` (the ULP), at least the smallest subnormal.
fn ulp(x: f64, dtype: DType) -> f64 {
    if dtype == DType::F32 {
        let a = (x as f32).abs();
        f64::from(f32::from_bits(a.to_bits() + 1)) - f64::from(a)
    } else {
        let a = x.abs();
        f64::from_bits(a.to_bits() + 1) - a
    }
}

fn same_bits(a: Option<Scalar>, b: Option<Scalar>) -> bool {
    a == b
        || a.zip(b)
            .is_some_and(|(x, y)| x.to_f64().is_nan() && y.to_f64().is_nan())
}

fn run_on_gpu(case: &Case, inputs: &[Array]) -> Vec<Array> {
    let compiled = CudaBackend
        .compile(&case.lir, &Default::default())
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.name, case.lir));
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outputs: Vec<Array> = case
        .lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    {
        let mut out_views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
        let mut scratch = Scratch::new();
        compiled
            .run(&views, &mut out_views, &mut scratch)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        // A second call reuses the device buffers and must give the same results.
        let mut again: Vec<Array> = case
            .lir
            .outputs()
            .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
            .collect();
        let mut again_views: Vec<_> = again.iter_mut().map(Array::view_mut).collect();
        compiled
            .run(&views, &mut again_views, &mut scratch)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        drop(out_views);
        for (a, b) in outputs.iter().zip(&again) {
            assert!(
                (0..a.data().len()).all(|i| same_bits(a.get(i), b.get(i))),
                "{}: the second call differs",
                case.name
            );
        }
    }
    outputs
}

/// Whether a kernel of `lir` reduces 1024 or more points per output: those run as block
/// trees (`codegen.rs`).
fn uses_tree(lir: &rfx_ir::lir::LirProgram) -> bool {
    lir.kernels().iter().any(|k| {
        let split = k.dims.len() - k.reduce_dims;
        k.reduce_dims > 0 && k.dims[split..].iter().product::<usize>() >= 1024
    })
}

/// Runs `case` on the GPU and checks it; returns `true` when it was compared (not only run).
fn check(case: &Case, seed: u64) -> bool {
    let mut rng = TestRng::new(seed);
    let inputs = random_inputs(&mut rng, &case.kernel, 0.2);
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let got = run_on_gpu(case, &inputs);
    if uses_tree(&case.lir) {
        // Block-tree reductions round differently from the interpreter's sequential order;
        // `tests/tree.rs` checks them against their error bounds. Here they only have to run
        // and repeat their bits (checked by `run_on_gpu`).
        return false;
    }
    match transcendental_count(&case.kernel) {
        0 => {
            let expected = run_lir(&case.lir, &views, Mode::Native).expect("run_lir");
            for (e, g) in expected.iter().zip(&got) {
                let bad = (0..e.data().len()).find(|&i| !same_bits(e.get(i), g.get(i)));
                assert!(
                    bad.is_none(),
                    "{}: element {bad:?} differs from the interpreter\n{}\nexpected {e:?}\ngot {g:?}",
                    case.name,
                    case.lir
                );
            }
            true
        }
        1 if case.name.starts_with("unary_")
            || case.name.starts_with("binary_") && !case.name.ends_with("_bcast") =>
        {
            let oracle = run_hir(&case.kernel, &views, Mode::Oracle).expect("run_hir oracle");
            let node = case
                .kernel
                .nodes()
                .iter()
                .find(|n| is_transcendental(&n.op))
                .expect("one transcendental");
            for (o, g) in oracle.iter().zip(&got) {
                let bound = ulp_bound(&node.op, g.dtype());
                for i in 0..g.data().len() {
                    let (Some(o), Some(g_value)) = (o.get(i), g.get(i)) else {
                        continue;
                    };
                    let (exact, value) = (o.to_f64(), g_value.to_f64());
                    // The reference rounded to the output dtype decides the special cases.
                    let rounded = if g.dtype() == DType::F32 {
                        f64::from(exact as f32)
                    } else {
                        exact
                    };
                    let ok = if rounded.is_nan() || value.is_nan() {
                        rounded.is_nan() && value.is_nan()
                    } else if rounded.is_infinite() || value.is_infinite() {
                        rounded == value || (value - exact).abs() <= (bound + 1.0) * ulp(value, g.dtype())
                    } else {
                        (value - exact).abs() <= (bound + 1.0) * ulp(rounded, g.dtype())
                    };
                    assert!(
                        ok,
                        "{}: element {i}: got {value:e}, oracle {exact:e} (bound {bound} ULP)",
                        case.name
                    );
                }
            }
            true
        }
        _ => false,
    }
}

#[test]
fn conformance_on_the_gpu_matches_the_interpreters() {
    if let Some(reason) = no_gpu() {
        println!("skipped: no CUDA driver/GPU ({reason})");
        eprintln!("skipped: no CUDA driver/GPU ({reason})");
        return;
    }
    let mut cases = op_cases();
    cases.extend(corpus_cases());
    cases.extend(random_cases(200));
    // The shared suite: its exact cases bit for bit; its transcendental cases (named
    // `suite_...`, so not held to a single op's bound here) only have to run.
    cases.extend(suite_cases());
    let mut compared = 0;
    for (seed, case) in (1u64..).zip(&cases) {
        compared += usize::from(check(case, seed));
    }
    println!(
        "{} kernels ran on the GPU, {compared} compared with the interpreters",
        cases.len()
    );
}
