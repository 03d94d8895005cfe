//! Raises the `OptError` variants that a caller's kernel can produce, and pins the messages of
//! the ones that only an optimiser bug could produce.

use rfx_ir::hir::{self, BuildError, Builder, ValueId};
use rfx_ir::{DType, TensorType};
use rfx_opt::{OptConfig, OptError, constant_fold, fuse_chains, optimize, simplify};

/// `add` of an f32 and an i32 operand: a dtype mismatch the verifier rejects (one file, read
/// by the error-variant tests of rfx-ir, rfx-opt and rfx-runtime).
const DTYPE_MISMATCH: &str = include_str!("../../rfx-ir/tests/data/dtype_mismatch.rfx");

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
fn a_kernel_too_large_for_memory_never_reaches_fusion() {
    // `2^(bits/2) x 2^(bits/2)` elements, one more than `usize::MAX`: the builder refuses the
    // input, and a kernel that declares such a type anyway fails verification, so every pass
    // reports `InvalidKernel` rather than miscounting elements or handing the MIR verifier a
    // program it rejects.
    let side = 1usize << (usize::BITS / 2);
    let huge = TensorType::new(DType::F32, [side, side]);
    let mut b = Builder::new("huge");
    let err = b.input("x", huge.clone()).expect_err("no buffer holds that");
    assert!(
        matches!(
            err,
            BuildError::Type {
                source: rfx_ir::TypeError::TooLarge { .. },
                ..
            }
        ),
        "{err:?}"
    );
    let text = format!(
        "kernel huge {{\n %x = input x : f32[{side}, {side}]\n %y = neg %x : f32[{side}, {side}]\n output out = %y\n}}"
    );
    let kernel = hir::parse_unverified(&text).expect("it parses");
    let err = optimize(&kernel, &OptConfig::default()).expect_err("it does not verify");
    assert!(matches!(err, OptError::InvalidKernel(_)), "{err:?}");
}

#[test]
fn a_pass_that_breaks_its_output_is_reported() {
    // Internal invariant: unreachable from the public API because every pass's output is
    // verified in the tests of this crate (10,000 random kernels), and kernels too large to
    // count are rejected up front (`TypeError::TooLarge`); the variant carries the verifier's
    // report when a pass is wrong.
    let err = OptError::PassBroke {
        pass: "fuse",
        errors: "k0: load reaches element 9".to_string(),
    };
    assert!(err.to_string().contains("fuse"), "{err}");
    assert!(err.to_string().contains("load reaches element 9"), "{err}");
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

#[test]
fn a_pad_whose_indices_i32_does_not_hold_is_refused() {
    // A pad reads its operand by an `i32` element index: a result of 2^31 + 2 elements has
    // indices past what `i32` holds, and fusion says so instead of wrapping.
    let mut b = Builder::new("wide");
    let x = b.input("x", TensorType::new(DType::F32, [2])).expect("input");
    let p = b.pad(x, &[1], [(1usize << 31) + 2]).expect("the type is valid");
    b.output("out", p).expect("output");
    let kernel = b.finish().expect("kernel");
    let err = optimize(&kernel, &OptConfig::default()).expect_err("no i32 index reaches it");
    assert!(matches!(err, OptError::IndexRange(_)), "{err:?}");
    assert!(err.to_string().contains("`i32` does not hold"), "{err}");
}
