//! The frame bound: a function whose compiled frame is larger than [`MAX_FRAME`] is refused
//! with `Unsupported::Size` naming the frame and the bound, one inside it gives its size.

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind, UserFuncName,
    types,
};
use cranelift_codegen::{Context, isa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use rfx_lower::{BackendError, CpuTarget, Unsupported};

use super::{MAX_FRAME, checked_frame};

/// A function `fn(i64)` that stores its argument into a stack slot of `bytes` bytes, compiled
/// for the baseline target with rfx's flags.
fn compiled_with_slot(bytes: u32) -> Context {
    let target = crate::target::target(CpuTarget::Baseline).unwrap_or_else(|e| panic!("{e}"));
    let isa: &dyn isa::TargetIsa = &*target.isa;
    let mut signature = Signature::new(isa.default_call_conv());
    signature.params.push(AbiParam::new(types::I64));
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), signature);
    let mut fbc = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut func, &mut fbc);
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        b.seal_block(block);
        let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 4));
        let x = b.block_params(block)[0];
        let at = b.ins().stack_addr(types::I64, slot, 0);
        b.ins().store(MemFlagsData::trusted(), x, at, 0);
        b.ins().return_(&[]);
        b.finalize(isa.frontend_config());
    }
    let mut ctx = Context::for_function(func);
    ctx.compile(isa, &mut ControlPlane::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    ctx
}

#[test]
fn a_frame_past_the_bound_is_a_typed_error() {
    let err = checked_frame(&compiled_with_slot(MAX_FRAME + 4096)).expect_err("past the bound");
    assert!(
        matches!(&err, BackendError::Unsupported { backend: "cpu", what: Unsupported::Size { what, size, limit } }
            if what.contains("stack frame") && *size > *limit && *limit == MAX_FRAME as usize),
        "{err:?}"
    );
}

#[test]
fn a_frame_inside_the_bound_gives_its_size() {
    let frame = checked_frame(&compiled_with_slot(64 * 1024)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        (64 * 1024..64 * 1024 + 256).contains(&frame),
        "frame of {frame} bytes"
    );
}
