//! Whether a kernel's loop counters and element offsets fit in 32 bits, for code generators
//! that print loops in C-family source and choose the narrower index type where they can.

use rfx_ir::lir::{Inst, LirKernel, LirProgram};

/// `true` when `kernel`'s point count, the largest value any of its `index` instructions
/// computes, and the element count of every buffer of `program` are at most `i32::MAX`, so
/// 32-bit (signed or unsigned) indices cannot overflow.
pub fn indices_fit_i32(program: &LirProgram, kernel: &LirKernel) -> bool {
    let limit = i32::MAX as usize;
    let points = kernel.dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    // The largest value an `index` computes in the index type.
    let index_max = kernel
        .body
        .iter()
        .filter_map(|inst| match inst {
            Inst::Index { strides, .. } => {
                Some(kernel.dims.iter().zip(strides).fold(0usize, |acc, (&d, &s)| {
                    acc.saturating_add(d.saturating_sub(1).saturating_mul(s))
                }))
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    points.is_some_and(|p| p <= limit)
        && index_max <= limit
        && program.buffers().iter().all(|b| b.ty.shape.numel() <= limit)
}
