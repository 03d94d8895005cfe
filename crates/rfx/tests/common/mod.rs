//! Helpers shared by the facade's integration tests.

#![allow(dead_code, unreachable_pub)]

use rfx::{Array, JitError, TraceError};
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
