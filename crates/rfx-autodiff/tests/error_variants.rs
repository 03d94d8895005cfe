//! Raises `AdError::Internal` through `keep_outputs`, whose rebuilt kernel the HIR `Builder`
//! rejects when the caller names an output twice or names none.

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
fn keeping_one_output_twice_is_rejected_by_the_builder() {
    let both = value_and_grad(&kernel(), &["x"]).expect("value_and_grad");
    let err = keep_outputs(&both, &["grad_x", "grad_x"]).expect_err("`grad_x` twice");
    assert!(
        matches!(&err, AdError::Internal(BuildError::DuplicateOutput(name)) if name == "grad_x"),
        "{err:?}"
    );
}

#[test]
fn keeping_no_output_is_rejected_by_the_builder() {
    let err = keep_outputs(&kernel(), &[]).expect_err("a kernel needs an output");
    assert!(matches!(err, AdError::Internal(BuildError::NoOutputs)), "{err:?}");
}
