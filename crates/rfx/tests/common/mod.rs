//! Helpers shared by the facade's integration tests.

#![allow(dead_code, unreachable_pub)]

use rfx::{Array, DType, JitError, TraceError};
use rfx_ir::TypeError;
use rfx_ir::hir::BuildError;

/// The `f64` values of `a`.
pub fn f64s(a: &Array) -> &[f64] {
    a.as_slice::<f64>().expect("an f64 array")
}

/// The typing rule a failed trace broke.
pub fn type_error(err: JitError) -> TypeError {
    match err {
        JitError::Trace(TraceError::Build {
            source: BuildError::Type { source, .. },
            ..
        }) => source,
        other => panic!("expected a typing error, got {other:?}"),
    }
}

/// An array of `dtype` holding `values` (rounded, truncated or tested `> 0` into it).
pub fn array_of(dtype: DType, dims: &[usize], values: &[f64]) -> Array {
    let shape = dims.to_vec();
    match dtype {
        DType::F32 => Array::from_vec(shape, values.iter().map(|&v| v as f32).collect()),
        DType::F64 => Array::from_vec(shape, values.to_vec()),
        DType::I32 => Array::from_vec(shape, values.iter().map(|&v| v as i32).collect()),
        DType::Bool => Array::from_vec(shape, values.iter().map(|&v| v > 0.0).collect()),
    }
    .expect("array")
}

/// The values [`array_of`] stores for `values`, as `f64`s (what a reference computes from).
pub fn as_stored(dtype: DType, values: &[f64]) -> Vec<f64> {
    values
        .iter()
        .map(|&v| match dtype {
            DType::F32 => f64::from(v as f32),
            DType::F64 => v,
            DType::I32 => f64::from(v as i32),
            DType::Bool => f64::from(u8::from(v > 0.0)),
        })
        .collect()
}
