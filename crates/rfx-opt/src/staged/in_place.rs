//! Carries updated in place: a loop's range writes each carry's next value into a buffer
//! `N_k` and copies it into the carry's buffer `C_k` at the end of the range, because the
//! kernels of the range read `C_k` while `N_k` is being computed. When no kernel from the one
//! that writes `N_k` to the end of the range reads `C_k`, that kernel may write `C_k` itself:
//! every read of the old value has happened, and the copy is not needed.

use std::collections::BTreeSet;

use rfx_ir::BufId;
use rfx_ir::mir::{BufKind, Buffer, MirKernel, MirOp};
use rfx_ir::repeat::KernelLoop;

/// Makes the kernel of `range` (the kernels of a loop's range so far, the first of which is
/// kernel `first` of the program) that writes `next` write `carry` instead, with every later
/// read of `next` reading `carry`, when that is safe: one kernel writes `next`, once, outside
/// the range's `inner` loops; no kernel before it reads `next`; neither it nor any later
/// kernel reads or writes `carry`. Returns whether it did.
pub(super) fn write_in_place(
    range: &mut [MirKernel],
    first: usize,
    inner: &[KernelLoop],
    next: BufId,
    carry: BufId,
) -> bool {
    let mut writers = range
        .iter()
        .enumerate()
        .filter(|(_, k)| k.writes().any(|b| b == next));
    let (Some((writer, kernel)), None) = (writers.next(), writers.next()) else {
        return false;
    };
    let once = kernel.writes().filter(|&b| b == next).count() == 1;
    let in_inner = inner
        .iter()
        .any(|l| l.first <= first + writer && first + writer < l.end);
    let read_before = range[..writer].iter().any(|k| k.reads().any(|b| b == next));
    let carry_touched_after = range[writer..]
        .iter()
        .any(|k| k.reads().chain(k.writes()).any(|b| b == carry));
    if !once || in_inner || read_before || carry_touched_after {
        return false;
    }
    for kernel in &mut range[writer..] {
        rename(kernel, next, carry);
    }
    true
}

/// `kernel` with every read and write of `from` made on `to`.
fn rename(kernel: &mut MirKernel, from: BufId, to: BufId) {
    let swap = |buf: &mut BufId| {
        if *buf == from {
            *buf = to;
        }
    };
    for inst in &mut kernel.body {
        if let MirOp::Load { buf, .. } | MirOp::Gather { buf } = &mut inst.op {
            swap(buf);
        }
    }
    kernel.stores.iter_mut().for_each(|s| swap(&mut s.buf));
    kernel.reductions.iter_mut().for_each(|r| swap(&mut r.buf));
}

/// The buffers without the temporaries no kernel reads or writes and no loop uses as its exit
/// flag, with the kernels and loops renumbered to match.
pub(super) fn drop_untouched_temps(
    buffers: Vec<Buffer>,
    kernels: &mut [MirKernel],
    loops: &mut [KernelLoop],
) -> Vec<Buffer> {
    let touched: BTreeSet<BufId> = kernels
        .iter()
        .flat_map(|k| k.reads().chain(k.writes()).collect::<Vec<_>>())
        .chain(loops.iter().filter_map(|l| l.exit))
        .collect();
    let mut renumbered = Vec::with_capacity(buffers.len());
    let mut kept = Vec::with_capacity(buffers.len());
    for (i, buffer) in buffers.into_iter().enumerate() {
        if buffer.kind == BufKind::Temp && !touched.contains(&BufId::new(i)) {
            renumbered.push(None);
        } else {
            renumbered.push(Some(BufId::new(kept.len())));
            kept.push(buffer);
        }
    }
    let new_id = |buf: &mut BufId| {
        if let Some(Some(to)) = renumbered.get(buf.index()) {
            *buf = *to;
        }
    };
    for kernel in kernels.iter_mut() {
        for inst in &mut kernel.body {
            if let MirOp::Load { buf, .. } | MirOp::Gather { buf } = &mut inst.op {
                new_id(buf);
            }
        }
        kernel.stores.iter_mut().for_each(|s| new_id(&mut s.buf));
        kernel.reductions.iter_mut().for_each(|r| new_id(&mut r.buf));
    }
    for l in loops.iter_mut() {
        if let Some(exit) = &mut l.exit {
            new_id(exit);
        }
    }
    kept
}
