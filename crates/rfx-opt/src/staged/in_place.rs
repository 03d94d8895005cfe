//! Carries updated in place: a loop's range writes each carry's next value into a buffer
//! `N_k` and copies it into the carry's buffer `C_k` at the end of the range, because the
//! kernels of the range read `C_k` while `N_k` is being computed. When no kernel from the one
//! that writes `N_k` to the end of the range reads `C_k`, that kernel may write `C_k` itself:
//! every read of the old value has happened, and the copy is not needed.
//!
//! A carry whose next value is itself with one row replaced (`set_row`, the history of reverse
//! mode's recording loop) is updated in place by a row store of that row alone.

use std::collections::BTreeSet;

use rfx_ir::hir::{Builder, Kernel, Loop, RowUpdate, ValueId};
use rfx_ir::mir::{BufKind, Buffer, MirInst, MirKernel, MirOp, MirValue, Region, RowIndex, Store};
use rfx_ir::repeat::KernelLoop;
use rfx_ir::{BufId, TensorType};

use crate::error::OptError;

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
    for store in &mut kernel.stores {
        swap(&mut store.buf);
        if let Some(row) = store.region.as_mut().and_then(|r| r.row.as_mut()) {
            swap(&mut row.index);
        }
    }
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
        for store in &mut kernel.stores {
            new_id(&mut store.buf);
            if let Some(row) = store.region.as_mut().and_then(|r| r.row.as_mut()) {
                new_id(&mut row.index);
            }
        }
        kernel.reductions.iter_mut().for_each(|r| new_id(&mut r.buf));
    }
    for l in loops.iter_mut() {
        if let Some(exit) = &mut l.exit {
            new_id(exit);
        }
    }
    kept
}

/// `body` with each updated carry returned unchanged and, after its outputs, one output per
/// row and index value of `updates` that is not a body input (in order, rows before indices
/// for each update).
pub(super) fn without_row_updates(body: &Kernel, updates: &[RowUpdate]) -> Result<Kernel, OptError> {
    let mut b = Builder::new(body.name());
    let mut map: Vec<Option<ValueId>> = vec![None; body.nodes().len()];
    for (index, node) in body.nodes().iter().enumerate() {
        let args = crate::passes::mapped_operands(&map, &node.args)?;
        map[index] = Some(b.copy(&node.op, &args, &node.ty).map_err(OptError::Rebuild)?);
    }
    let inputs: Vec<ValueId> = body.inputs().map(|(v, _, _)| v).collect();
    let mapped = |v: ValueId| {
        map.get(v.index())
            .copied()
            .flatten()
            .ok_or(OptError::InvalidValue(v))
    };
    for (k, output) in body.outputs().iter().enumerate() {
        let value = match updates.iter().find(|u| u.carry == k) {
            Some(_) => mapped(inputs[k])?,
            None => mapped(output.value)?,
        };
        b.output(output.name.clone(), value).map_err(OptError::Rebuild)?;
    }
    for (i, update) in updates.iter().enumerate() {
        for (what, value) in [("row", update.row), ("index", update.index)] {
            if !inputs.contains(&value) {
                b.output(format!("{what}_update{i}"), mapped(value)?)
                    .map_err(OptError::Rebuild)?;
            }
        }
    }
    b.finish().map_err(OptError::Rebuild)
}

/// The masked body of a `while_loop` (`prepare::masked_body`) whose carries in `updates` are
/// updated by a row: such a carry is returned unchanged and its *row* is masked instead,
/// `select(keep, row, c_k[index])` (the row the update would replace, read back where the test
/// failed), so that the row store keeps the carry's other rows untouched and an iteration after
/// the test failed still changes nothing. Outputs: the carries (the others masked as in
/// `masked_body`), then per update its masked row and its index when that is not a body input,
/// then `keep`.
pub(super) fn masked_row_updates(
    spec: &Loop,
    cond: &Kernel,
    updates: &[RowUpdate],
) -> Result<Kernel, OptError> {
    let stripped = without_row_updates(&spec.body, updates)?;
    let body_inputs: Vec<ValueId> = spec.body.inputs().map(|(v, _, _)| v).collect();
    let mut b = Builder::new(spec.body.name());
    let (inputs, keep, next) = super::prepare::masked_carries(&mut b, spec, cond, &stripped)?;
    let mut extra = next.iter().skip(spec.carries).copied();
    let mut value_of = |v: ValueId| match body_inputs.iter().position(|&i| i == v) {
        Some(p) => inputs.get(p).copied().ok_or(OptError::InvalidValue(v)),
        None => extra.next().ok_or(OptError::InvalidValue(v)),
    };
    for (i, update) in updates.iter().enumerate() {
        let row = value_of(update.row)?;
        let index = value_of(update.index)?;
        let carry = *inputs
            .get(update.carry)
            .ok_or(OptError::InvalidValue(update.row))?;
        let old = row_at(&mut b, carry, index).map_err(OptError::Rebuild)?;
        let masked = b.select(keep, row, old).map_err(OptError::Rebuild)?;
        b.output(format!("row_update{i}"), masked)
            .map_err(OptError::Rebuild)?;
        if !body_inputs.contains(&update.index) {
            b.output(format!("index_update{i}"), index)
                .map_err(OptError::Rebuild)?;
        }
    }
    b.output("keep", keep).map_err(OptError::Rebuild)?;
    b.finish().map_err(OptError::Rebuild)
}

/// Row `clamp(index)` of `x` along axis 0 (a gather, which clamps as `set_row` does), of the
/// shape of one row.
fn row_at(b: &mut Builder, x: ValueId, index: ValueId) -> Result<ValueId, rfx_ir::hir::BuildError> {
    let shape = b.value_type(x)?.shape.clone();
    let row_shape = rfx_ir::Shape::new(shape.dims().get(1..).unwrap_or_default());
    let at = b.reshape(index, rfx_ir::Shape::new(vec![1; shape.rank()]))?;
    let one_row = rfx_ir::Shape::new([&[1][..], row_shape.dims()].concat());
    let at = b.broadcast_to(at, one_row)?;
    let row = b.gather(x, at, 0)?;
    b.reshape(row, row_shape)
}

/// The kernel storing the row in buffer `row` (of `row_type`, contiguous) into row `index[0]`
/// (clamped) of `carry`, a buffer of `rows` such rows.
pub(super) fn row_store_kernel(
    name: String,
    row: BufId,
    row_type: &TensorType,
    carry: BufId,
    index: BufId,
    rows: usize,
) -> MirKernel {
    let strides = row_type.shape.strides();
    MirKernel {
        name,
        domain: row_type.shape.clone(),
        body: vec![MirInst {
            op: MirOp::Load {
                buf: row,
                strides: strides.clone(),
                offset: 0,
            },
            args: Vec::new(),
            dtype: row_type.dtype,
        }],
        stores: vec![Store {
            buf: carry,
            value: MirValue::new(0),
            region: Some(Region {
                strides,
                offset: 0,
                row: Some(RowIndex {
                    index,
                    rows,
                    stride: row_type.shape.numel(),
                }),
            }),
        }],
        reductions: Vec::new(),
    }
}
