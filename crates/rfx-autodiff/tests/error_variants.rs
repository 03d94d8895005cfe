//! `keep_outputs` rejects a caller's mistakes with user-facing errors (`AdError::DuplicateOutput`,
//! `AdError::NoOutputsKept`); `AdError::Internal` (a derivative node the builder rejects) is an
//! internal invariant, so only its message is checked.

use rfx_autodiff::{AdError, keep_outputs, value_and_grad};
use rfx_ir::hir::{self, BuildError};

/// `s = sum(sin(x))`.
const SUM_SIN: &str = "\
kernel k {
  %x = input x : f64[3]
  %y = sin %x : f64[3]
  %s = sum %y axes [0] : f64[]
  output s = %s
}
";

fn kernel() -> hir::Kernel {
    hir::parse(SUM_SIN).expect("a valid kernel")
}

#[test]
fn keeping_one_output_twice_is_a_user_error() {
    let both = value_and_grad(&kernel(), &["x"]).expect("value_and_grad");
    let err = keep_outputs(&both, &["grad_x", "grad_x"]).expect_err("`grad_x` twice");
    assert!(
        matches!(&err, AdError::DuplicateOutput { name } if name == "grad_x"),
        "{err:?}"
    );
}

#[test]
fn keeping_no_output_is_a_user_error() {
    let err = keep_outputs(&kernel(), &[]).expect_err("a kernel needs an output");
    assert!(matches!(err, AdError::NoOutputsKept), "{err:?}");
}

#[test]
fn an_internal_error_names_the_rejected_node() {
    // Internal invariant: unreachable from the public API because every derivative rule builds
    // nodes of the types the verifier derives (checked on random kernels by the autodiff tests);
    // `keep_outputs` rejects the caller mistakes that could otherwise reach the builder.
    let err = AdError::Internal(BuildError::NoOutputs);
    assert_eq!(
        err.to_string(),
        format!(
            "internal error: a derivative node was rejected: {}",
            BuildError::NoOutputs
        )
    );
}
