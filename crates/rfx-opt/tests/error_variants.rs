//! Raises the `OptError` variants that a caller's kernel can produce, and pins the messages of
//! the ones that only an optimiser bug could produce.

use rfx_ir::hir::{self, BuildError, Builder, ValueId};
use rfx_ir::{DType, TensorType, UnaryOp};
use rfx_opt::{OptConfig, OptError, constant_fold, fuse_chains, optimize, simplify};

/// `add` of an f32 and an i32 operand: a dtype mismatch the verifier rejects.
const DTYPE_MISMATCH: &str = "\
kernel k {
  %x = input x : f32[3]
  %y = input y : i32[3]
  %s = add %x, %y : f32[3]
  output out = %s
}
";

#[test]
fn every_pass_rejects_a_kernel_that_does_not_verify() {
    let kernel = hir::parse_unverified(DTYPE_MISMATCH).expect("the kernel parses");
    let err = optimize(&kernel, &OptConfig::default()).expect_err("the kernel is invalid");
    assert!(
        matches!(&err, OptError::InvalidKernel(errors) if !errors.errors().is_empty()),
        "{err:?}"
    );
    let err = simplify(&kernel, &OptConfig::default()).expect_err("the kernel is invalid");
    assert!(matches!(err, OptError::InvalidKernel(_)), "{err:?}");
    let err = constant_fold(&kernel).expect_err("the kernel is invalid");
    assert!(matches!(err, OptError::InvalidKernel(_)), "{err:?}");
    let err = fuse_chains(&kernel).expect_err("the kernel is invalid");
    assert!(matches!(err, OptError::InvalidKernel(_)), "{err:?}");
}

#[test]
fn fusion_reports_a_program_the_mir_verifier_rejects() {
    // A valid HIR kernel over `2^(bits/2) x 2^(bits/2)` elements: one more than `usize::MAX`.
    // Element counts saturate at `usize::MAX`, so the fused load's last index (`usize::MAX`,
    // also saturated) is not below the input's saturated element count, and the MIR verifier
    // rejects the program fusion produced. The optimiser reports that instead of returning it.
    let side = 1usize << (usize::BITS / 2);
    let mut b = Builder::new("huge");
    let x = b
        .input("x", TensorType::new(DType::F32, [side, side]))
        .expect("input");
    let y = b.unary(UnaryOp::Neg, x).expect("neg");
    b.output("out", y).expect("output");
    let kernel = b.finish().expect("a valid kernel");
    hir::verify(&kernel).expect("the HIR kernel verifies");

    let err = optimize(&kernel, &OptConfig::default()).expect_err("fusion output is rejected");
    assert!(
        matches!(&err, OptError::PassBroke { pass: "fuse", errors }
            if errors.contains("load reaches element")),
        "{err:?}"
    );
    let err = fuse_chains(&kernel).expect_err("fusion output is rejected");
    assert!(matches!(err, OptError::PassBroke { pass: "fuse", .. }), "{err:?}");
}

#[test]
fn optimiser_bug_variants_name_the_internal_error() {
    // Internal invariant: unreachable from the public API because every pass verifies its input
    // kernel first (`OptError::InvalidKernel`), the e-graph types each class with the same
    // `result_type` the verifier used, and every rewrite rule adds only nodes of the matched
    // class's type; so a verified kernel always has a typed e-class per value
    // (`InvalidValue`), an acyclic cheapest extraction with every operand built (`Cycle`) and a
    // rebuild that the `Builder` accepts (`Rebuild`).
    assert_eq!(
        OptError::InvalidValue(ValueId::new(3)).to_string(),
        "internal error: value %3 has no consistent type in the e-graph"
    );
    assert_eq!(
        OptError::Cycle.to_string(),
        "internal error: extraction met a cycle or a missing operand"
    );
    assert_eq!(
        OptError::Rebuild(BuildError::NoOutputs).to_string(),
        "internal error: rebuilt kernel is ill-typed: the kernel has no outputs"
    );
}
