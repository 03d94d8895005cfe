//! Large reductions on the GPU (block trees) and device-resident calls.
//!
//! Reductions of at least 1024 points per output run as block trees (see `codegen.rs`), so
//! float sums are compared with bounds rather than bits:
//! - against an accurate f64 reference (Neumaier summation): the tree's own bound,
//!   `(ceil(points / 256) + 20) · u · Σ|x|` (a thread folds at most `ceil(points / 256)`
//!   elements in sequence, then at most 8 + 10 tree levels combine the partials);
//! - against the interpreter's sequential sum: `2 (n − 1) · u · Σ|x|`, the two orders' bounds
//!   added.
//!
//! Products have no such gain: all n − 1 multiplications round in any grouping, so both
//! orders are within `γ(n−1) · |p|` of the exact product. i32 reductions (wrapping, so
//! associative) and `max`/`min` of non-zero values must give the interpreter's bits. Without a GPU every test prints why it was skipped.

mod common;

use common::lower_kernel;
use rfx_codegen_cuda::{CudaBackend, CudaOptions};
use rfx_ir::hir;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, accurate_sum, same_values};
use rfx_ir::{Array, DType, Scalar, Shape, TensorType};
use rfx_lower::{Backend, BackendError, CallError, Scratch};

fn no_gpu(test: &str) -> bool {
    match CudaBackend.check_available() {
        Ok(()) => false,
        Err(e) => {
            println!("skipped {test}: no CUDA driver/GPU ({e})");
            eprintln!("skipped {test}: no CUDA driver/GPU ({e})");
            true
        }
    }
}

fn run_gpu(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let compiled = CudaBackend
        .compile(lir, &Default::default())
        .unwrap_or_else(|e| panic!("compile: {e}\n{lir}"));
    run_compiled(&*compiled, lir, inputs)
}

/// Runs `compiled` (of `lir`) twice on `inputs` through host arrays; both calls must give the
/// same bits. Returns the first call's outputs.
fn run_compiled(compiled: &dyn rfx_lower::Compiled, lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut first = Vec::new();
    // Twice: the tree's arrival counters must be reset for the second call, and the order
    // is fixed, so both calls give the same bits.
    for _ in 0..2 {
        let outputs = compiled.run_to_new(&views).unwrap_or_else(|e| panic!("run: {e}"));
        if first.is_empty() {
            first = outputs;
        } else {
            for (a, b) in first.iter().zip(&outputs) {
                assert!(same_values(a, b), "{}: a second call gave other bits", lir.name());
            }
        }
    }
    first
}

fn uses_tree(lir: &LirProgram) -> bool {
    lir.kernels().iter().any(|k| {
        let split = k.dims.len() - k.reduce_dims;
        k.reduce_dims > 0 && k.dims[split..].iter().product::<usize>() >= 1024
    })
}

fn array(dtype: DType, shape: &[usize], values: Vec<f64>) -> Array {
    let shape = Shape::from(shape.to_vec());
    match dtype {
        DType::F32 => Array::from_vec(shape, values.iter().map(|&v| v as f32).collect()),
        DType::F64 => Array::from_vec(shape, values),
        DType::I32 => Array::from_vec(shape, values.iter().map(|&v| v as i32).collect()),
        DType::Bool => Array::from_vec(shape, values.iter().map(|&v| v != 0.0).collect()),
    }
    .expect("length matches the shape")
}

/// The points of unit `u` of a reduction over the trailing `reduced` axes after moving them
/// last: `(shape, axes)` with axes sorted.
fn unit_values(values: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let units: usize = kept.iter().map(|&d| shape[d]).product();
    let mut per_unit = vec![Vec::new(); units];
    let strides: Vec<usize> = (0..shape.len())
        .map(|d| shape[d + 1..].iter().product())
        .collect();
    for (flat, &v) in values.iter().enumerate() {
        let mut unit = 0;
        for &d in &kept {
            unit = unit * shape[d] + (flat / strides[d]) % shape[d];
        }
        per_unit[unit].push(v);
    }
    per_unit
}

fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", dims.join(","))
}

struct Reduction {
    op: &'static str,
    dtype: DType,
    shape: Vec<usize>,
    axes: Vec<usize>,
}

impl Reduction {
    fn lir(&self) -> LirProgram {
        let out: Vec<usize> = (0..self.shape.len())
            .filter(|d| !self.axes.contains(d))
            .map(|d| self.shape[d])
            .collect();
        let axes: Vec<String> = self.axes.iter().map(ToString::to_string).collect();
        let text = format!(
            "kernel tree_{op} {{ %x = input x : {dt}{shape} %y = {op} %x axes [{axes}] : {dt}{out} output y = %y }}",
            op = self.op,
            dt = self.dtype,
            shape = shape_text(&self.shape),
            axes = axes.join(","),
            out = shape_text(&out),
        );
        let kernel = hir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        lower_kernel(&kernel)
    }
}

fn unit_roundoff(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        f64::from(f32::EPSILON) / 2.0
    } else {
        f64::EPSILON / 2.0
    }
}

fn check_float_reduction(r: &Reduction, rng: &mut TestRng) {
    let lir = r.lir();
    assert!(uses_tree(&lir), "{}: expected a tree reduction\n{lir}", r.op);
    let n: usize = r.shape.iter().product();
    let values: Vec<f64> = (0..n)
        .map(|_| match r.op {
            // Products of numbers near ±1 neither overflow nor underflow.
            "prod" => {
                let m = rng.uniform(0.9995, 1.0005);
                if rng.chance(0.5) { -m } else { m }
            }
            _ => {
                let v = rng.uniform(-1.0, 1.0);
                if v == 0.0 { 0.5 } else { v }
            }
        })
        .collect();
    let x = array(r.dtype, &r.shape, values);
    // The values as the kernel sees them (rounded to the dtype).
    let rounded = x.to_f64_vec();
    let got = run_gpu(&lir, std::slice::from_ref(&x));
    let expected = run_lir(&lir, &[x.view()], Mode::Native).expect("run_lir");
    let (got, expected) = (got[0].to_f64_vec(), expected[0].to_f64_vec());
    let units = unit_values(&rounded, &r.shape, &r.axes);
    let u = unit_roundoff(r.dtype);
    for (i, points) in units.iter().enumerate() {
        let (g, e) = (got[i], expected[i]);
        let count = points.len() as f64;
        let tree_levels = (points.len().div_ceil(256) + 20) as f64;
        let abs_sum: f64 = points.iter().map(|v| v.abs()).sum();
        let what = format!("{} {} {:?} axes {:?} unit {i}", r.op, r.dtype, r.shape, r.axes);
        match r.op {
            "sum" | "mean" => {
                let scale = if r.op == "mean" { count } else { 1.0 };
                let exact = accurate_sum(points.iter().copied()) / scale;
                let tree_bound = tree_levels * u * abs_sum / scale + u * exact.abs();
                let order_bound = 2.0 * (count - 1.0) * u * abs_sum / scale + 2.0 * u * exact.abs();
                assert!(
                    (g - exact).abs() <= tree_bound,
                    "{what}: got {g}, exact {exact}, bound {tree_bound}"
                );
                assert!(
                    (g - e).abs() <= order_bound,
                    "{what}: got {g}, interpreter {e}, bound {order_bound}"
                );
            }
            "prod" => {
                // Every one of the n − 1 multiplications rounds whatever the grouping, so a
                // tree has the sequential bound γ(n−1)·|p| (no log-depth gain as for sums).
                let bound = 2.0 * (count - 1.0) * u * e.abs() * 1.01;
                assert!(
                    (g - e).abs() <= bound,
                    "{what}: got {g}, interpreter {e}, bound {bound}"
                );
                if r.dtype == DType::F32 {
                    let exact: f64 = points.iter().product();
                    let bound = (count - 1.0) * u * exact.abs() * 1.01;
                    assert!(
                        (g - exact).abs() <= bound,
                        "{what}: got {g}, f64 product {exact}, bound {bound}"
                    );
                }
            }
            _ => assert_eq!(g.to_bits(), e.to_bits(), "{what}: got {g}, interpreter {e}"),
        }
    }
}

#[test]
fn float_tree_reductions_stay_within_their_rounding_bounds() {
    if no_gpu("float_tree_reductions_stay_within_their_rounding_bounds") {
        return;
    }
    let mut rng = TestRng::new(0x7ee5);
    let mut count = 0;
    for dtype in [DType::F32, DType::F64] {
        for op in ["sum", "mean", "prod", "max", "min"] {
            for (shape, axes) in [
                (vec![100_003], vec![0]),
                (vec![37, 5003], vec![1]),
                (vec![3001, 7], vec![0]),
                (vec![16, 64, 64], vec![1, 2]),
            ] {
                check_float_reduction(
                    &Reduction {
                        op,
                        dtype,
                        shape,
                        axes,
                    },
                    &mut rng,
                );
                count += 1;
            }
        }
    }
    check_float_reduction(
        &Reduction {
            op: "sum",
            dtype: DType::F32,
            shape: vec![1 << 22],
            axes: vec![0],
        },
        &mut rng,
    );
    println!("{} tree reductions checked on the GPU", count + 1);
}

#[test]
fn i32_tree_reductions_give_the_interpreters_bits() {
    if no_gpu("i32_tree_reductions_give_the_interpreters_bits") {
        return;
    }
    let mut rng = TestRng::new(0x132);
    for op in ["sum", "prod", "max", "min"] {
        for (shape, axes) in [
            (vec![200_001], vec![0]),
            (vec![9, 4099], vec![1]),
            (vec![2048, 3], vec![0]),
        ] {
            let r = Reduction {
                op,
                dtype: DType::I32,
                shape: shape.clone(),
                axes,
            };
            let lir = r.lir();
            let n: usize = shape.iter().product();
            // Full-range values: sums and products wrap, which stays associative.
            let values: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
            let x = Array::from_vec(Shape::from(shape.clone()), values).expect("shape");
            let got = run_gpu(&lir, std::slice::from_ref(&x));
            let expected = run_lir(&lir, &[x.view()], Mode::Native).expect("run_lir");
            assert_eq!(got[0].data(), expected[0].data(), "i32 {op} {shape:?}");
        }
    }
}

#[test]
fn tree_reductions_propagate_nan_and_infinity() {
    if no_gpu("tree_reductions_propagate_nan_and_infinity") {
        return;
    }
    let mut rng = TestRng::new(0x1af);
    for dtype in [DType::F32, DType::F64] {
        for op in ["sum", "mean", "prod", "max", "min"] {
            let r = Reduction {
                op,
                dtype,
                shape: vec![50_000],
                axes: vec![0],
            };
            let lir = r.lir();
            for special in [f64::NAN, f64::INFINITY] {
                // Factors near 1 keep products away from underflow: an order that reaches 0
                // before the infinity gives NaN (0 · Inf), one that does not gives Inf, and
                // both are right for their order.
                let (lo, hi) = if op == "prod" {
                    (0.9999, 1.0001)
                } else {
                    (0.5, 1.0)
                };
                let mut values: Vec<f64> = (0..50_000).map(|_| rng.uniform(lo, hi)).collect();
                let at = rng.below(values.len());
                values[at] = special;
                let x = array(dtype, &[50_000], values);
                let got = run_gpu(&lir, std::slice::from_ref(&x))[0].to_f64_vec()[0];
                let expected = run_lir(&lir, &[x.view()], Mode::Native).expect("run_lir")[0].to_f64_vec()[0];
                if expected.is_nan() {
                    assert!(got.is_nan(), "{op} {dtype} with {special} at {at}: got {got}");
                } else if op == "min" {
                    // min ignores a +Inf among finite values; the finite minimum is exact.
                    assert_eq!(got.to_bits(), expected.to_bits(), "{op} {dtype}");
                } else {
                    assert_eq!(got, expected, "{op} {dtype} with {special} at {at}");
                }
            }
        }
    }
}

#[test]
fn a_tree_reduction_fused_with_elementwise_outputs() {
    if no_gpu("a_tree_reduction_fused_with_elementwise_outputs") {
        return;
    }
    // value_and_grad(sum(x²)) per row: the value is a tree reduction, the gradient an
    // elementwise store in the same loop.
    let text = "kernel vg { %x = input x : f32[4,30000] %sq = mul %x, %x : f32[4,30000] \
                %s = sum %sq axes [1] : f32[4] %two = const 2.0 : f32[] %g = mul %x, %two : f32[4,30000] \
                output s = %s output g = %g }";
    let kernel = hir::parse(text).expect("parse");
    let lir = lower_kernel(&kernel);
    assert!(uses_tree(&lir));
    println!("{} LIR kernel(s)", lir.kernels().len());
    let mut rng = TestRng::new(0xa11);
    let values: Vec<f64> = (0..120_000).map(|_| rng.uniform(-2.0, 2.0)).collect();
    let x = array(DType::F32, &[4, 30000], values);
    let got = run_gpu(&lir, std::slice::from_ref(&x));
    let expected = run_lir(&lir, &[x.view()], Mode::Native).expect("run_lir");
    assert_eq!(
        got[1].data(),
        expected[1].data(),
        "the elementwise output is exact"
    );
    let rounded = x.to_f64_vec();
    for (row, (g, e)) in got[0]
        .to_f64_vec()
        .iter()
        .zip(expected[0].to_f64_vec())
        .enumerate()
    {
        let squares: Vec<f64> = rounded[row * 30000..(row + 1) * 30000]
            .iter()
            .map(|v| v * v)
            .collect();
        let exact = accurate_sum(squares.iter().copied());
        // Each square is rounded once (u·x²) before the sum.
        let bound = (30000f64 / 256.0 + 22.0) * unit_roundoff(DType::F32) * exact;
        assert!(
            (g - exact).abs() <= bound,
            "row {row}: got {g}, exact {exact}, interpreter {e}"
        );
    }
}

fn device_case() -> (LirProgram, Vec<Array>) {
    let text = "kernel step { %x = input x : f32[5000] %y = input y : f32[5000] %two = const 2.0 : f32[] \
                %x2 = mul %x, %two : f32[5000] %s = sin %x2 : f32[5000] %o = add %s, %y : f32[5000] \
                %t = sum %o axes [0] : f32[] output o = %o output t = %t }";
    let lir = lower_kernel(&hir::parse(text).expect("parse"));
    let mut rng = TestRng::new(0xde7);
    let x = array(
        DType::F32,
        &[5000],
        (0..5000).map(|_| rng.uniform(-3.0, 3.0)).collect(),
    );
    let y = array(
        DType::F32,
        &[5000],
        (0..5000).map(|_| rng.uniform(-3.0, 3.0)).collect(),
    );
    (lir, vec![x, y])
}

#[test]
fn device_resident_calls_give_the_host_calls_bits() {
    if no_gpu("device_resident_calls_give_the_host_calls_bits") {
        return;
    }
    let (lir, inputs) = device_case();
    let program = CudaBackend
        .compile_program(&lir, &Default::default())
        .expect("compile");
    // Host path, three steps of y <- o (the output feeds the next call).
    let compiled = program.compiled();
    let (x, mut y) = (inputs[0].clone(), inputs[1].clone());
    let mut host_t = Vec::new();
    for _ in 0..3 {
        let mut o = Array::filled(Scalar::F32(0.0), [5000]);
        let mut t = Array::filled(Scalar::F32(0.0), Shape::scalar());
        compiled
            .run(
                &[x.view(), y.view()],
                &mut [o.view_mut(), t.view_mut()],
                &mut Scratch::new(),
            )
            .expect("host run");
        y = o;
        host_t.push(t);
    }
    // Resident path: the same three steps without leaving the GPU.
    let dx = CudaBackend.to_device(inputs[0].view()).expect("to_device");
    let mut dy = CudaBackend.to_device(inputs[1].view()).expect("to_device");
    let mut o = CudaBackend
        .zeros(&TensorType::new(DType::F32, [5000]))
        .expect("zeros");
    let mut t = CudaBackend
        .zeros(&TensorType::new(DType::F32, Shape::scalar()))
        .expect("zeros");
    let mut resident_t = Vec::new();
    for _ in 0..3 {
        program
            .launch(&[&dx, &dy], &mut [&mut o, &mut t])
            .expect("launch");
        dy.copy_from_device(&o).expect("dtod");
        resident_t.push(CudaBackend.from_device(&t).expect("from_device"));
    }
    assert_eq!(
        CudaBackend.from_device(&dy).expect("from_device").data(),
        y.data()
    );
    for (h, r) in host_t.iter().zip(&resident_t) {
        assert_eq!(h.data(), r.data());
    }
    let mut back = Array::filled(Scalar::F32(0.0), [5000]);
    dx.copy_to_host(back.view_mut()).expect("copy_to_host");
    assert_eq!(
        back.data(),
        inputs[0].data(),
        "a device array reads back unchanged"
    );
}

#[test]
fn device_resident_calls_reject_bad_arguments_before_launching() {
    if no_gpu("device_resident_calls_reject_bad_arguments_before_launching") {
        return;
    }
    let (lir, inputs) = device_case();
    let program = CudaBackend
        .compile_program(&lir, &Default::default())
        .expect("compile");
    let dx = CudaBackend.to_device(inputs[0].view()).expect("to_device");
    let short = CudaBackend
        .zeros(&TensorType::new(DType::F32, [4999]))
        .expect("zeros");
    let wrong = CudaBackend
        .zeros(&TensorType::new(DType::F64, [5000]))
        .expect("zeros");
    let mut o = CudaBackend
        .zeros(&TensorType::new(DType::F32, [5000]))
        .expect("zeros");
    let mut t = CudaBackend
        .zeros(&TensorType::new(DType::F32, Shape::scalar()))
        .expect("zeros");
    let err = program
        .launch(&[&dx, &short], &mut [&mut o, &mut t])
        .expect_err("short input");
    assert!(
        matches!(err, BackendError::Call(CallError::Shape { .. })),
        "{err:?}"
    );
    let err = program
        .launch(&[&dx, &wrong], &mut [&mut o, &mut t])
        .expect_err("f64 input");
    assert!(
        matches!(err, BackendError::Call(CallError::DType { .. })),
        "{err:?}"
    );
    let err = program
        .launch(&[&dx], &mut [&mut o, &mut t])
        .expect_err("one input");
    assert!(
        matches!(err, BackendError::Call(CallError::Arity { .. })),
        "{err:?}"
    );
    let mut host = Array::filled(Scalar::F32(0.0), [3]);
    let err = dx.copy_to_host(host.view_mut()).expect_err("short host array");
    assert!(
        matches!(err, BackendError::Call(CallError::Shape { .. })),
        "{err:?}"
    );
    // Nothing was written: the outputs still hold zeros.
    let zeros = CudaBackend.from_device(&o).expect("from_device");
    assert!(zeros.to_f64_vec().iter().all(|&v| v == 0.0));
}

#[test]
fn without_a_gpu_device_arrays_are_unavailable_not_a_panic() {
    if CudaBackend.check_available().is_ok() {
        println!("skipped: a GPU is present");
        return;
    }
    let x = Array::from_slice(&[1.0f32, 2.0]);
    let result = std::panic::catch_unwind(|| CudaBackend.to_device(x.view()).map(|_| ()))
        .expect("to_device must not panic");
    assert!(
        matches!(result, Err(BackendError::Unavailable { backend: "cuda", .. })),
        "{result:?}"
    );
    let result = std::panic::catch_unwind(|| CudaBackend.synchronize()).expect("no panic");
    assert!(
        matches!(result, Err(BackendError::Unavailable { .. })),
        "{result:?}"
    );
}

/// Host-array calls with arrays of every dtype and odd sizes give the interpreter's bits,
/// call after call with fresh inputs: through the one staging buffer (small arrays) and array
/// by array (past the staging limit of 1 MiB, or when the option is off).
#[test]
fn host_calls_through_staging_and_array_by_array_give_the_interpreters_bits() {
    // 70,000 points: 1.19 MB of inputs, past the staging limit.
    // (points, the staging option, whether the program stages).
    let sizes = [
        (1usize, true, true),
        (37, true, true),
        (37, false, false),
        (70_000, true, false),
    ];
    let kernels: Vec<_> = sizes
        .iter()
        .map(|&(n, _, _)| {
            let text = format!(
                "kernel io {{ %c = input c : bool[{n}] %i = input i : i32[{n}] %x = input x : f32[{n}] \
             %d = input d : f64[{n}] %xi = cast %i : f32[{n}] %s = select %c, %x, %xi : f32[{n}] \
             %dd = add %d, %d : f64[{n}] %ii = mul %i, %i : i32[{n}] %nc = not %c : bool[{n}] \
             %df = cast %s : f64[{n}] %m = mul %df, %d : f64[{n}] \
             output nc = %nc output s = %s output m = %m output ii = %ii output dd = %dd }}"
            );
            let kernel = hir::parse(&text).expect("parse");
            let lir = lower_kernel(&kernel);
            (kernel, lir)
        })
        .collect();
    // The kernels are well formed even where there is no GPU to run them.
    let mut rng = TestRng::new(0x57a6);
    for (kernel, lir) in &kernels {
        let inputs = rfx_ir::testgen::random_inputs(&mut rng, kernel, 0.2);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        assert_eq!(run_lir(lir, &views, Mode::Native).expect("run_lir").len(), 5);
    }
    if no_gpu("host_calls_through_staging_and_array_by_array_give_the_interpreters_bits") {
        return;
    }
    for (&(n, option, staged), (kernel, lir)) in sizes.iter().zip(&kernels) {
        let mut cuda = CudaOptions::default();
        cuda.stage_host_arrays = option;
        let program = CudaBackend
            .compile_program_with(lir, &Default::default(), &cuda)
            .expect("compile");
        assert_eq!(program.stages_host_arrays(), staged, "n = {n}");
        let mut rng = TestRng::new(0x57a6 + n as u64);
        let context = format!("n = {n}");
        host_calls_match_the_interpreter(&program, kernel, lir, &mut rng, 0.2, &context, |_, _, _| false);
    }
}

/// Host-array calls of `program` on three sets of fresh inputs (each set run twice) give
/// `run_lir`'s bits (NaN for NaN), or values `close(output, got, expected)` accepts.
fn host_calls_match_the_interpreter(
    program: &rfx_codegen_cuda::CudaProgram,
    kernel: &hir::Kernel,
    lir: &LirProgram,
    rng: &mut TestRng,
    special_rate: f64,
    context: &str,
    close: impl Fn(usize, Scalar, Scalar) -> bool,
) {
    let compiled = program.compiled();
    for call in 0..3 {
        let inputs = rfx_ir::testgen::random_inputs(rng, kernel, special_rate);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_lir(lir, &views, Mode::Native).expect("run_lir");
        let outputs = run_compiled(&*compiled, lir, &inputs);
        for (k, (got, want)) in outputs.iter().zip(&expected).enumerate() {
            for p in 0..want.data().len() {
                let (g, w) = (got.get(p).expect("in range"), want.get(p).expect("in range"));
                let same = g == w || (g.to_f64().is_nan() && w.to_f64().is_nan());
                assert!(
                    same || close(k, g, w),
                    "{context}, call {call}, output {k}, element {p}: got {g:?}, expected {w:?}"
                );
            }
        }
    }
}

/// Programs of several small kernels run as one launch of one block, the kernels separated by
/// barriers: each reads what the ones before it wrote (row means, then deviations, then their
/// spread), and they give the interpreter's bits, call after call (but for the column sum of
/// 1100 rows, a block tree, which is held to a relative 1e-4). Past 1024 units per kernel,
/// or where one block's extra rounds would add more than 32 points to a thread's work (600
/// rows of 40), the program takes one launch per kernel again.
#[test]
fn small_multi_kernel_programs_run_in_one_launch_with_the_interpreters_bits() {
    // (rows, columns, one launch).
    let sizes = [
        (3usize, 5usize, true),
        (37, 19, true),
        (300, 7, true),
        (600, 40, false),
        (1100, 3, false),
    ];
    let cases: Vec<_> = sizes
        .iter()
        .map(|&(r, c, one)| {
            let text = format!(
                "kernel norm_rows {{ %x = input x : f32[{r},{c}] %m = mean %x axes [1] keepdims : f32[{r},1] \
                 %d = sub %x, %m : f32[{r},{c}] %sq = mul %d, %d : f32[{r},{c}] \
                 %v = mean %sq axes [1] keepdims : f32[{r},1] %eps = const 0.001 : f32[] \
                 %ve = add %v, %eps : f32[{r},1] %sd = sqrt %ve : f32[{r},1] %y = div %d, %sd : f32[{r},{c}] \
                 %t = sum %y axes [0] : f32[{c}] %w = input w : f64[{c}] %tw = cast %t : f64[{c}] \
                 %u = mul %tw, %w : f64[{c}] output y = %y output u = %u }}"
            );
            let kernel = hir::parse(&text).expect("parse");
            let lir = lower_kernel(&kernel);
            assert!(lir.kernels().len() >= 2, "{lir}");
            assert_eq!(uses_tree(&lir), r == 1100, "{lir}");
            let source = rfx_codegen_cuda::cuda_source(&lir, &Default::default()).expect("source");
            let functions = source.matches("__global__").count();
            let expected = if one { 1 } else { lir.kernels().len() };
            assert_eq!(functions, expected, "{source}");
            (kernel, lir, one)
        })
        .collect();
    if no_gpu("small_multi_kernel_programs_run_in_one_launch_with_the_interpreters_bits") {
        return;
    }
    for (kernel, lir, one) in &cases {
        let program = CudaBackend
            .compile_program(lir, &Default::default())
            .expect("compile");
        let expected_launches = if *one { 1 } else { lir.kernels().len() };
        let tree = uses_tree(lir);
        assert_eq!(program.launches(), expected_launches);
        let mut rng = TestRng::new(0x0e1a);
        let context = format!("{} {:?}", lir.name(), lir.kernels()[0].dims);
        // With 1100 rows the column sum (output `u`) is a block tree: its own order.
        let close = |k: usize, g: Scalar, w: Scalar| {
            k == 1 && tree && (g.to_f64() - w.to_f64()).abs() <= 1e-4 * w.to_f64().abs()
        };
        host_calls_match_the_interpreter(&program, kernel, lir, &mut rng, 0.0, &context, close);
    }
}
