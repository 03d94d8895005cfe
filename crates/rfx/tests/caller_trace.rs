//! `rfx::Trace`, the caller-driven trace front ends use: inputs, ops, errors, nesting, and a
//! trace dropped unfinished.

use rfx::{DType, TensorType, Trace};

#[test]
fn a_caller_driven_trace_compiles_and_runs() {
    let trace = Trace::begin("affine");
    let x = trace.input("x", TensorType::new(DType::F64, [3]));
    let y = trace.input("y", TensorType::new(DType::F64, [3]));
    let out = (x * 2.0).sin() + y;
    assert!(trace.error().is_none());
    let kernel = trace.finish(&[("out".to_string(), out)]).expect("a valid trace");
    let f = rfx::jit_kernel(kernel);
    let result = f.call((&[0.0f64, 1.0, 2.0], &[1.0f64, 2.0, 3.0])).expect("runs");
    let expected: Vec<f64> = [(0.0f64, 1.0f64), (1.0, 2.0), (2.0, 3.0)]
        .iter()
        .map(|(x, y)| (x * 2.0).sin() + y)
        .collect();
    assert_eq!(result[0].as_slice::<f64>(), Some(&expected[..]));
}

#[test]
fn a_broken_op_is_reported_at_once_and_by_finish() {
    let trace = Trace::begin("broken");
    let x = trace.input("x", TensorType::new(DType::F32, [3]));
    let y = trace.input("y", TensorType::new(DType::F32, [4]));
    let bad = x + y;
    assert!(bad.ty().is_none(), "a failed op gives a poisoned tensor");
    let error = trace.error().expect("the error is recorded");
    assert!(
        error.to_string().contains("[3]") && error.to_string().contains("[4]"),
        "{error}"
    );
    let finished = trace.finish(&[("out".to_string(), bad)]);
    assert_eq!(finished.err().map(|e| e.to_string()), Some(error.to_string()));
}

#[test]
fn an_unfinished_trace_is_discarded_and_the_outer_one_continues() {
    let outer = Trace::begin("outer");
    let x = outer.input("x", TensorType::new(DType::F64, [2]));
    {
        let inner = Trace::begin("inner");
        let z = inner.input("z", TensorType::new(DType::F64, [5]));
        let _ = z * 3.0;
        // Dropped without finishing.
    }
    let out = x * x;
    assert_eq!(out.shape().dims(), &[2]);
    let kernel = outer
        .finish(&[("out".to_string(), out)])
        .expect("the outer trace is intact");
    assert_eq!(kernel.inputs().count(), 1);
}

#[test]
fn a_kernel_inlined_into_a_trace_checks_its_arguments() {
    let inner = Trace::begin("twice");
    let x = inner.input("x", TensorType::new(DType::F32, [2]));
    let kernel = inner.finish(&[("out".to_string(), x * 2.0)]).expect("valid");

    let outer = Trace::begin("outer");
    let y = outer.input("y", TensorType::new(DType::F32, [2]));
    let z = outer.input("z", TensorType::new(DType::F64, [2]));
    let w = outer.input("w", TensorType::new(DType::F32, [3]));
    assert!(matches!(
        rfx::inline(&kernel, &[y, y]),
        Err(rfx::CallError::Arity { .. })
    ));
    assert!(matches!(
        rfx::inline(&kernel, &[z]),
        Err(rfx::CallError::DType { .. })
    ));
    assert!(matches!(
        rfx::inline(&kernel, &[w]),
        Err(rfx::CallError::Shape { .. })
    ));
    let twice = rfx::inline(&kernel, &[y]).expect("fits");
    let again = rfx::inline(&kernel, &[twice[0]]).expect("fits");
    let kernel = outer
        .finish(&[("out".to_string(), again[0] + z.cast(DType::F32) + w.sum_all())])
        .expect("valid");
    let out = rfx::jit_kernel(kernel)
        .call((&[1.0f32, 2.0], &[0.5f64, 0.25], &[1.0f32, 1.0, 1.0]))
        .expect("runs");
    assert_eq!(out[0].as_slice::<f32>(), Some(&[7.5f32, 11.25][..]));
}
