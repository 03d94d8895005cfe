//! Raises the facade's `TraceError::ForeignTensor`, `TraceError::NoOutputs`,
//! `JitError::Runtime` and `JitError::InputCount` through `jit` with bad functions,
//! settings and transforms.

use std::cell::Cell;

use rfx::{CompileConfig, DType, JitError, Tensor, TensorType, TraceError};
use rfx_lower::{BackendError, LowerConfig, LowerError};
use rfx_runtime::RuntimeError;

thread_local! {
    /// A tensor smuggled out of a traced function (a test thread runs one test).
    static KEPT: Cell<Option<Tensor>> = const { Cell::new(None) };
}

#[test]
fn a_tensor_kept_from_another_trace_is_a_foreign_tensor() {
    let keep = rfx::jit(|x: Tensor| {
        KEPT.with(|kept| kept.set(Some(x)));
        x * 2.0
    });
    keep.call((&[1.0f32, 2.0, 3.0],))
        .expect("the first function is valid");
    let reuse = rfx::jit(|y: Tensor| {
        let old = KEPT.with(Cell::get).expect("the first trace kept its input");
        y + old
    });
    let err = reuse
        .call((&[1.0f32, 2.0, 3.0],))
        .expect_err("`old` belongs to a trace that has ended");
    assert!(
        matches!(err, JitError::Trace(TraceError::ForeignTensor { op: "add" })),
        "{err:?}"
    );
    assert_eq!(reuse.compile_count(), 0);
}

#[test]
fn a_function_returning_no_tensor_has_no_outputs() {
    let f = rfx::jit(|_x: Tensor| Vec::<Tensor>::new());
    let err = f.call((&[1.0f32, 2.0],)).expect_err("nothing is returned");
    assert!(matches!(err, JitError::Trace(TraceError::NoOutputs)), "{err:?}");
    let err = f
        .trace(&[TensorType::new(DType::F32, [2])])
        .expect_err("nothing is returned");
    assert!(matches!(err, JitError::Trace(TraceError::NoOutputs)), "{err:?}");
}

#[test]
fn a_compile_failure_after_tracing_is_a_runtime_error() {
    // An unknown backend.
    let f = rfx::jit(|x: Tensor| x.sin()).on_backend("no_such_backend");
    let err = f.call((&[1.0f32, 2.0],)).expect_err("no such backend");
    assert!(
        matches!(
            &err,
            JitError::Runtime(RuntimeError::Backend(BackendError::UnknownBackend { name, .. }))
                if name == "no_such_backend"
        ),
        "{err:?}"
    );
    assert!(err.is_user_error());

    // Lowering settings that give an invalid LIR program (alignment 3).
    let config = CompileConfig {
        lower: LowerConfig {
            arena_align: 3,
            ..LowerConfig::default()
        },
        ..CompileConfig::with_backend("interp")
    };
    let f = rfx::jit_with(|x: Tensor| x.sin(), config);
    let err = f.call((&[1.0f32, 2.0],)).expect_err("alignment 3");
    assert!(
        matches!(
            err,
            JitError::Runtime(RuntimeError::Lower(LowerError::InvalidLir(_)))
        ),
        "{err:?}"
    );
}

/// A kernel function whose kernel takes one more input than it declares.
struct Undeclared;

impl rfx::KernelFn for Undeclared {
    fn name(&self) -> String {
        "undeclared".to_string()
    }

    fn input_names(&self) -> Vec<String> {
        vec!["x".to_string()]
    }

    fn trace(&self, types: &[TensorType]) -> Result<rfx::Kernel, JitError> {
        let text = format!(
            "kernel undeclared {{\n %x = input x : {0}\n %y = input y : {0}\n %s = add %x, %y : {0}\n output s = %s\n}}",
            types[0]
        );
        Ok(rfx_ir::hir::parse(&text).expect("the kernel parses"))
    }
}

#[test]
fn a_transform_of_a_kernel_with_undeclared_inputs_is_an_input_count_error() {
    let f = rfx::jit(rfx::grad(Undeclared));
    let err = f
        .call((&[1.0f64],))
        .expect_err("the kernel takes an input `x` does not name");
    assert!(
        matches!(
            err,
            JitError::InputCount {
                transform: "grad",
                declared: 1,
                traced: 2
            }
        ),
        "{err:?}"
    );
}
