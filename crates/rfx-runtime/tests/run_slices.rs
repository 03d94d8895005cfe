//! `BoundKernel::run_slices`, which hands the backend the slices' addresses: the same values as
//! the checked `BoundKernel::run` on the CPU backend and on the interpreter (whose
//! `Compiled::run_addresses` is the trait's default), the checked path for calls with more
//! arguments than the address path keeps on the stack, and typed errors that name the argument.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx_ir::hir::parse;
use rfx_ir::{ArrayView, ArrayViewMut, DType, Shape};
use rfx_lower::CallError;
use rfx_runtime::{BoundKernel, CompileConfig, Executable, RuntimeError, compile, registry};

fn compiled(text: &str, backend: &str) -> Arc<Executable> {
    let kernel = parse(text).expect("kernel parses");
    Arc::new(compile(&kernel, &CompileConfig::with_backend(backend), registry()).expect("compiles"))
}

fn random(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-4.0..4.0)).collect()
}

/// `y = a * b + c` and `s = sum(y)` over 5 elements: `run_slices` gives `run`'s bits, and the
/// closed form, on both backends, call after call with fresh inputs.
#[test]
fn run_slices_matches_run_on_the_cpu_and_the_interpreter() {
    let text = "kernel fma { %a = input a : f64[5] %b = input b : f64[5] %c = input c : f64[5] \
                %p = mul %a, %b : f64[5] %y = add %p, %c : f64[5] %s = sum %y axes [0] : f64[] \
                output y = %y output s = %s }";
    let mut rng = StdRng::seed_from_u64(17);
    for backend in ["cpu", "interp"] {
        let mut bound = BoundKernel::new(compiled(text, backend));
        for _ in 0..20 {
            let (a, b, c) = (random(&mut rng, 5), random(&mut rng, 5), random(&mut rng, 5));
            let (mut y, mut s) = (vec![f64::NAN; 5], [f64::NAN]);
            bound
                .run_slices([&a[..], &b[..], &c[..]], [&mut y[..], &mut s[..]])
                .expect("runs");
            let want: Vec<f64> = (0..5).map(|i| a[i] * b[i] + c[i]).collect();
            assert_eq!(y, want, "{backend}");
            assert_eq!(s[0], want.iter().sum::<f64>(), "{backend}");

            let (shape, scalar) = (Shape::new([5]), Shape::scalar());
            let (mut y2, mut s2) = (vec![0.0; 5], [0.0]);
            let inputs = [
                ArrayView::new(&shape, &a[..]).expect("view"),
                ArrayView::new(&shape, &b[..]).expect("view"),
                ArrayView::new(&shape, &c[..]).expect("view"),
            ];
            let mut outputs = [
                ArrayViewMut::new(&shape, &mut y2[..]).expect("view"),
                ArrayViewMut::new(&scalar, &mut s2[..]).expect("view"),
            ];
            bound.run(&inputs, &mut outputs).expect("runs");
            assert_eq!((y2, s2), (y.clone(), s), "{backend}");
        }
    }
}

/// 12 inputs and one output (more than the short address array holds) and 40 (more than the
/// address path holds, so the call takes the checked path through views): the same sums, and
/// the same errors for a short input or an extra output.
#[test]
fn calls_with_many_arguments_give_the_same_results() {
    wide_call::<12>();
    wide_call::<40>();
}

fn wide_call<const N: usize>() {
    let mut text = String::from("kernel wide {");
    for i in 0..N {
        text.push_str(&format!(" %x{i} = input x{i} : f64[3]"));
    }
    text.push_str(" %s0 = add %x0, %x1 : f64[3]");
    for i in 2..N {
        text.push_str(&format!(" %s{} = add %s{}, %x{i} : f64[3]", i - 1, i - 2));
    }
    text.push_str(&format!(" output y = %s{} }}", N - 2));
    let mut rng = StdRng::seed_from_u64(N as u64);
    let xs: Vec<Vec<f64>> = (0..N).map(|_| random(&mut rng, 3)).collect();
    let inputs: [&[f64]; N] = std::array::from_fn(|i| &xs[i][..]);
    let mut want = [0.0f64; 3];
    for (k, w) in want.iter_mut().enumerate() {
        *w = xs[0][k] + xs[1][k];
        for x in &xs[2..] {
            *w += x[k];
        }
    }
    for backend in ["cpu", "interp"] {
        let mut bound = BoundKernel::new(compiled(&text, backend));
        let mut y = [f64::NAN; 3];
        bound.run_slices(inputs, [&mut y[..]]).expect("runs");
        assert_eq!(y, want, "{N} inputs, {backend}");
        let short = [0.0f64; 2];
        let mut bad = inputs;
        bad[7] = &short[..];
        let err = bound.run_slices(bad, [&mut y[..]]).expect_err("a short input");
        assert!(
            matches!(&err, RuntimeError::Call(CallError::Shape { name, .. }) if name == "inputs[7]"),
            "{N} inputs, {backend}: {err:?}"
        );
        let mut extra = [0.0f64; 3];
        let err = bound
            .run_slices(inputs, [&mut y[..], &mut extra[..]])
            .expect_err("an extra output");
        assert!(
            matches!(
                &err,
                RuntimeError::Call(CallError::Arity {
                    what: "outputs",
                    expected: 1,
                    found: 2
                })
            ),
            "{N} inputs, {backend}: {err:?}"
        );
    }
}

/// Slices of one dtype for a kernel of two: the error names the first argument of the other
/// dtype (an input or an output) and nothing is written.
#[test]
fn a_dtype_mismatch_names_the_argument() {
    let text = "kernel mixed { %x = input x : f32[2] %n = input n : i32[2] %c = cast %n : f32[2] \
                %y = add %x, %c : f32[2] %m = cast %y : i32[2] output y = %y output m = %m }";
    for backend in ["cpu", "interp"] {
        let mut bound = BoundKernel::new(compiled(text, backend));
        let (x, n) = ([1.5f32, -2.0], [3.0f32, 4.0]);
        let (mut y, mut m) = ([f32::NAN; 2], [f32::NAN; 2]);
        let err = bound
            .run_slices([&x[..], &n[..]], [&mut y[..], &mut m[..]])
            .expect_err("n is i32");
        assert!(
            matches!(&err, RuntimeError::Call(CallError::DType { name, expected: DType::I32, found: DType::F32 }) if name == "n"),
            "{backend}: {err:?}"
        );
        assert!(
            y.iter().chain(&m).all(|v| v.is_nan()),
            "{backend}: nothing written"
        );

        let (xi, ni) = ([1i32, 2], [3i32, 4]);
        let (mut yi, mut mi) = ([0i32; 2], [0i32; 2]);
        let err = bound
            .run_slices([&xi[..], &ni[..]], [&mut yi[..], &mut mi[..]])
            .expect_err("x is f32");
        assert!(
            matches!(&err, RuntimeError::Call(CallError::DType { name, expected: DType::F32, found: DType::I32 }) if name == "x"),
            "{backend}: {err:?}"
        );
    }
}

/// `y = x0 * c0 + x1 + … + c1 + c2` with the last inputs constant: 2 caller inputs (the short
/// address array) and 14 (the long one), on both backends; a clone, run after the original is
/// dropped, gives the same bits; a short slice or slices of another dtype are refused.
#[test]
fn constant_inputs_are_passed_by_address() {
    constant_call::<2>();
    constant_call::<14>();
}

fn constant_call<const N: usize>() {
    let mut text = String::from("kernel k {");
    for i in 0..N {
        text.push_str(&format!(" %x{i} = input x{i} : f64[3]"));
    }
    for j in 0..3 {
        text.push_str(&format!(" %c{j} = input c{j} : f64[3]"));
    }
    text.push_str(" %s0 = mul %x0, %c0 : f64[3]");
    let terms = (1..N)
        .map(|i| format!("%x{i}"))
        .chain(["%c1".into(), "%c2".into()]);
    for (k, term) in terms.enumerate() {
        text.push_str(&format!(" %s{} = add %s{k}, {term} : f64[3]", k + 1));
    }
    text.push_str(&format!(" output y = %s{} }}", N + 1));
    let mut rng = StdRng::seed_from_u64(100 + N as u64);
    let consts: Vec<Vec<f64>> = (0..3).map(|_| random(&mut rng, 3)).collect();
    let xs: Vec<Vec<f64>> = (0..N).map(|_| random(&mut rng, 3)).collect();
    let inputs: [&[f64]; N] = std::array::from_fn(|i| &xs[i][..]);
    let want: Vec<f64> = (0..3)
        .map(|k| {
            let mut w = xs[0][k] * consts[0][k];
            for x in &xs[1..] {
                w += x[k];
            }
            w + consts[1][k] + consts[2][k]
        })
        .collect();
    for backend in ["cpu", "interp"] {
        let arrays = consts
            .iter()
            .map(|c| rfx_ir::Array::from_vec([3], c.clone()).expect("array"))
            .collect();
        let mut bound = BoundKernel::with_constant_inputs(compiled(&text, backend), arrays);
        let mut y = [f64::NAN; 3];
        bound.run_slices(inputs, [&mut y[..]]).expect("runs");
        assert_eq!(y, *want, "{N} inputs, {backend}");

        let mut clone = bound.clone();
        drop(bound);
        let mut y2 = [f64::NAN; 3];
        clone.run_slices(inputs, [&mut y2[..]]).expect("the clone runs");
        assert_eq!(y2, *want, "{N} inputs, {backend}: the clone");

        let short = [0.0f64; 2];
        let mut bad = inputs;
        bad[N - 1] = &short[..];
        let err = clone.run_slices(bad, [&mut y2[..]]).expect_err("a short input");
        let name = format!("inputs[{}]", N - 1);
        assert!(
            matches!(&err, RuntimeError::Call(CallError::Shape { name: n, .. }) if *n == name),
            "{N} inputs, {backend}: {err:?}"
        );
        let xs32: Vec<Vec<f32>> = xs.iter().map(|x| x.iter().map(|&v| v as f32).collect()).collect();
        let inputs32: [&[f32]; N] = std::array::from_fn(|i| &xs32[i][..]);
        let mut y32 = [f32::NAN; 3];
        let err = clone
            .run_slices(inputs32, [&mut y32[..]])
            .expect_err("f32 slices for f64 arguments");
        assert!(
            matches!(&err, RuntimeError::Call(CallError::DType { name, expected: DType::F64, found: DType::F32 }) if name == "x0"),
            "{N} inputs, {backend}: {err:?}"
        );
        assert!(y32.iter().all(|v| v.is_nan()), "nothing written");
    }
}

/// A constant whose shape is not its input's: `run_slices` takes the checked path, which
/// refuses the call, on both backends.
#[test]
fn a_constant_of_the_wrong_shape_is_refused() {
    let text = "kernel k { %x = input x : f64[3] %c = input c : f64[3] %y = add %x, %c : f64[3] \
                output y = %y }";
    for backend in ["cpu", "interp"] {
        let wrong = rfx_ir::Array::from_vec([2], vec![1.0f64, 2.0]).expect("array");
        let mut bound = BoundKernel::with_constant_inputs(compiled(text, backend), vec![wrong]);
        let x = [1.0f64, 2.0, 3.0];
        let mut y = [f64::NAN; 3];
        let err = bound
            .run_slices([&x[..]], [&mut y[..]])
            .expect_err("c has 2 elements");
        assert!(
            matches!(&err, RuntimeError::Call(CallError::Shape { .. })),
            "{backend}: {err:?}"
        );
        assert!(y.iter().all(|v| v.is_nan()), "{backend}: nothing written");
    }
}

/// `run_slice_refs` on arrays of slices built once, the slices' elements rewritten between
/// calls (a control loop's arguments kept in place): the closed form on both backends, the
/// checked path's results for more arguments than the address path holds, and the same errors
/// as `run_slices`.
#[test]
fn run_slice_refs_runs_on_arrays_the_caller_keeps() {
    let text = "kernel axpy { %a = input a : f64[] %x = input x : f64[4] %y = input y : f64[4] \
                %p = mul %a, %x : f64[4] %z = add %p, %y : f64[4] output z = %z }";
    let mut rng = StdRng::seed_from_u64(23);
    for backend in ["cpu", "interp"] {
        let mut bound = BoundKernel::new(compiled(text, backend));
        let (mut a, mut x, mut y, mut z) = (vec![0.0], vec![0.0; 4], vec![0.0; 4], vec![f64::NAN; 4]);
        for _ in 0..10 {
            a.copy_from_slice(&random(&mut rng, 1));
            x.copy_from_slice(&random(&mut rng, 4));
            y.copy_from_slice(&random(&mut rng, 4));
            let inputs = [&a[..], &x[..], &y[..]];
            let mut outputs = [&mut z[..]];
            bound.run_slice_refs(&inputs, &mut outputs).expect("runs");
            let want: Vec<f64> = (0..4).map(|i| a[0] * x[i] + y[i]).collect();
            assert_eq!(z, want, "{backend}");
        }
        let mut short = [0.0; 3];
        let err = bound
            .run_slice_refs(&[&a[..], &x[..], &y[..]], &mut [&mut short[..]])
            .expect_err("a short output");
        assert!(
            matches!(&err, RuntimeError::Call(CallError::Shape { name, .. }) if name == "outputs[0]"),
            "{backend}: {err}"
        );
    }
    // 40 inputs: more than the address path holds, so the call goes through views.
    let mut text = String::from("kernel wide {");
    for i in 0..40 {
        text.push_str(&format!(" %x{i} = input x{i} : f64[2]"));
    }
    text.push_str(" %s0 = add %x0, %x1 : f64[2]");
    for i in 2..40 {
        text.push_str(&format!(" %s{} = add %s{}, %x{i} : f64[2]", i - 1, i - 2));
    }
    text.push_str(" output y = %s38 }");
    let mut bound = BoundKernel::new(compiled(&text, "cpu"));
    let data: Vec<Vec<f64>> = (0..40).map(|_| random(&mut rng, 2)).collect();
    let inputs: [&[f64]; 40] = std::array::from_fn(|i| &data[i][..]);
    let mut y = vec![f64::NAN; 2];
    bound.run_slice_refs(&inputs, &mut [&mut y[..]]).expect("runs");
    let want: Vec<f64> = (0..2)
        .map(|j| (1..40).fold(data[0][j], |s, i| s + data[i][j]))
        .collect();
    assert_eq!(y, want);
}
