//! Raises `RuntimeError::Opt`, `RuntimeError::Lower` and `RuntimeError::Backend` through
//! `compile` and the cache with a bad kernel, bad lowering settings and an unknown backend, and
//! `RuntimeError::OutputTooLarge` through the easy call.

use rfx_ir::hir::{self, Kernel};
use rfx_ir::lir;
use rfx_lower::{BackendError, LowerConfig, LowerError};
use rfx_opt::OptError;
use rfx_runtime::{Cache, CacheKey, CompileConfig, RuntimeError, compile, registry};

/// `add` of an f32 and an i32 operand: a dtype mismatch the verifier rejects (one file, read
/// by the error-variant tests of rfx-ir, rfx-opt and rfx-runtime).
const DTYPE_MISMATCH: &str = include_str!("../../rfx-ir/tests/data/dtype_mismatch.rfx");

fn valid_kernel() -> Kernel {
    hir::parse("kernel k {\n  %x = input x : f32[3]\n  %y = mul %x, %x : f32[3]\n  output y = %y\n}\n")
        .expect("a valid kernel")
}

#[test]
fn compiling_a_kernel_that_does_not_verify_is_an_optimiser_error() {
    let kernel = hir::parse_unverified(DTYPE_MISMATCH).expect("the kernel parses");
    let err = compile(&kernel, &CompileConfig::with_backend("interp"), registry())
        .expect_err("the kernel is invalid");
    assert!(
        matches!(err, RuntimeError::Opt(OptError::InvalidKernel(_))),
        "{err:?}"
    );
    assert!(err.is_user_error());
}

#[test]
fn compiling_with_an_arena_alignment_that_is_not_a_power_of_two_is_a_lowering_error() {
    let config = CompileConfig {
        lower: LowerConfig {
            arena_align: 3,
            ..LowerConfig::default()
        },
        ..CompileConfig::with_backend("interp")
    };
    let err = compile(&valid_kernel(), &config, registry()).expect_err("alignment 3");
    let RuntimeError::Lower(LowerError::InvalidLir(errors)) = &err else {
        panic!("expected RuntimeError::Lower(LowerError::InvalidLir), got {err:?}");
    };
    assert!(
        errors
            .errors()
            .iter()
            .any(|e| matches!(e.kind, lir::VerifyErrorKind::ArenaAlign(3))),
        "{err}"
    );
}

#[test]
fn compiling_for_an_unknown_backend_is_a_backend_error() {
    let config = CompileConfig::with_backend("no_such_backend");
    let err = compile(&valid_kernel(), &config, registry()).expect_err("unknown backend");
    assert!(
        matches!(&err, RuntimeError::Backend(BackendError::UnknownBackend { name, .. })
            if name == "no_such_backend"),
        "{err:?}"
    );

    // The cache reports the same error and caches nothing.
    let cache = Cache::new("k");
    let kernel = valid_kernel();
    let key = CacheKey::of_kernel(&kernel, &config);
    let err = cache
        .get_or_compile(key, &config, registry(), || Ok::<_, RuntimeError>(kernel.clone()))
        .expect_err("unknown backend");
    assert!(
        matches!(err, RuntimeError::Backend(BackendError::UnknownBackend { .. })),
        "{err:?}"
    );
    assert_eq!(cache.compile_count(), 0);
}

#[test]
fn an_output_the_allocator_refuses_is_an_error_before_anything_runs_not_an_abort() {
    // 10^18 f32 elements: 4 EB, within `isize::MAX` bytes (so the kernel is valid) but more
    // than any machine's address space.
    let kernel = hir::parse(
        "kernel k {\n  %x = input x : f32[1]\n  %b = broadcast_to %x : f32[1000000000,1000000000]\n  output b = %b\n}\n",
    )
    .expect("the kernel verifies");
    let exe = compile(&kernel, &CompileConfig::with_backend("interp"), registry()).expect("compiles");
    let x = rfx_ir::Array::from_vec([1], vec![1.0f32]).expect("x");
    let err = exe.call(&[x.view()]).expect_err("4 EB output");
    assert!(
        matches!(&err, RuntimeError::OutputTooLarge { name, bytes } if name == "b" && *bytes == 4_000_000_000_000_000_000),
        "{err:?}"
    );
    assert!(err.is_user_error());
    assert!(
        err.to_string()
            .contains("output `b` needs 4000000000000000000 bytes"),
        "{err}"
    );
}

#[test]
fn a_pad_past_i32_indices_is_the_user_s_error() {
    let kernel = hir::parse(
        "kernel k {\n  %x = input x : f32[3]\n  %p = pad %x low [0] : f32[3000000000]\n  %s = sum %p axes [0] : f32[]\n  output s = %s\n}\n",
    )
    .expect("the kernel verifies");
    let err = compile(&kernel, &CompileConfig::with_backend("interp"), registry()).expect_err("pad too long");
    assert!(
        matches!(err, RuntimeError::Opt(OptError::IndexRange(_))),
        "{err:?}"
    );
    assert!(err.is_user_error(), "a documented limit is the user's error");
}
