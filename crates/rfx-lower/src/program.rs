//! MIR program → LIR program.

use rfx_ir::BufId;
use rfx_ir::lir::{self, LirBuffer, LirKernel, LirProgram, Storage};
use rfx_ir::mir::{self, BufKind, MirProgram};
use rfx_ir::repeat::KernelLoop;

use crate::config::LowerConfig;
use crate::error::LowerError;
use crate::lower::lower_kernel;
use crate::memplan::{Interval, live_across_loops, plan_memory};
use crate::report::LowerReport;

/// Lowers a MIR program to LIR: each MIR kernel becomes one LIR kernel (or one per distinct
/// set of reduced axes, the first also doing the stores), loop nests are permuted so reduced
/// axes come last and coalesced, values get slots (reused once dead, constants pooled,
/// loop invariants hoisted to the preamble), and temporaries are placed in one arena by
/// [`plan_memory`]. Buffer ids are kept: `bufN` in MIR is `bufN` in LIR. The program's loops
/// carry over to the LIR kernels that the MIR kernels of their ranges became, and a temporary
/// touched inside a loop stays live over the loop's whole range ([`live_across_loops`]).
pub fn lower(program: &MirProgram, config: &LowerConfig) -> Result<(LirProgram, LowerReport), LowerError> {
    mir::verify(program).map_err(LowerError::InvalidMir)?;
    let buf_dtype = |b: BufId| program.buffer(b).map(|buf| buf.ty.dtype);
    let mut kernels: Vec<LirKernel> = Vec::new();
    let mut report = LowerReport::default();
    // The first LIR kernel of each MIR kernel, and one past the last.
    let mut starts = Vec::with_capacity(program.kernels().len() + 1);
    for mir_kernel in program.kernels() {
        starts.push(kernels.len());
        let mut axes_sets: Vec<Vec<usize>> = Vec::new();
        for reduction in &mir_kernel.reductions {
            if !axes_sets.contains(&reduction.axes) {
                axes_sets.push(reduction.axes.clone());
            }
        }
        if axes_sets.is_empty() {
            axes_sets.push(Vec::new());
        }
        for (part, axes) in axes_sets.iter().enumerate() {
            let name = if part == 0 {
                mir_kernel.name.clone()
            } else {
                format!("{}_{part}", mir_kernel.name)
            };
            let (kernel, kernel_report) =
                lower_kernel(mir_kernel, name, axes, part == 0, &buf_dtype, config)?;
            kernels.push(kernel);
            report.kernels.push(kernel_report);
        }
    }
    starts.push(kernels.len());
    let loops = map_loops(program.loops(), &starts);
    let is_temp = |b: BufId| program.buffer(b).is_some_and(|buf| buf.kind == BufKind::Temp);
    if loops.is_empty() {
        crate::block_fold::fold_blocks(&mut kernels, &mut report.kernels, &is_temp);
    }

    // Lifetimes of temporaries over LIR kernels.
    let mut intervals: Vec<Interval> = Vec::new();
    for (index, buffer) in program.buffers().iter().enumerate() {
        if buffer.kind != BufKind::Temp {
            continue;
        }
        let buf = BufId::new(index);
        let touches = |k: &LirKernel, write: bool| {
            if write {
                k.writes().any(|b| b == buf)
            } else {
                k.reads().any(|b| b == buf)
            }
        };
        // A temporary no kernel touches (its kernel was folded away) lives alone after the
        // last kernel, so it shares bytes with every other and never widens the arena's peak
        // past its own size.
        let untouched = kernels.iter().all(|k| !touches(k, true) && !touches(k, false));
        let start = if untouched {
            kernels.len() + index
        } else {
            kernels.iter().position(|k| touches(k, true)).unwrap_or(0)
        };
        let end = kernels
            .iter()
            .rposition(|k| touches(k, false))
            .unwrap_or(start)
            .max(start);
        let touched: Vec<usize> = (0..kernels.len())
            .filter(|&k| touches(&kernels[k], true) || touches(&kernels[k], false))
            .collect();
        let interval = Interval {
            buf,
            bytes: buffer.ty.size_bytes(),
            start,
            end,
        };
        intervals.push(live_across_loops(interval, &touched, &loops));
    }
    let plan = plan_memory(&intervals, config.arena_align);
    report.arena_bytes = plan.arena_bytes;
    report.temp_bytes_without_reuse = intervals
        .iter()
        .map(|i| crate::memplan::arena_footprint(i.bytes, config.arena_align))
        .sum();

    let mut buffers: Vec<LirBuffer> = program
        .buffers()
        .iter()
        .map(|b| LirBuffer {
            ty: b.ty.clone(),
            storage: match &b.kind {
                BufKind::Input { name } => Storage::Input { name: name.clone() },
                BufKind::Output { name } => Storage::Output { name: name.clone() },
                BufKind::Temp => Storage::Arena { offset: 0 },
                BufKind::Literal { values } => Storage::Literal {
                    values: values.clone(),
                },
            },
        })
        .collect();
    for (interval, offset) in intervals.iter().zip(&plan.offsets) {
        if let Some(b) = buffers.get_mut(interval.buf.index()) {
            b.storage = Storage::Arena { offset: *offset };
        }
    }
    let lir = LirProgram::from_parts(
        program.name(),
        buffers,
        plan.arena_bytes,
        config.arena_align,
        kernels,
    )
    .with_loops(loops);
    lir::verify(&lir).map_err(LowerError::InvalidLir)?;
    Ok((lir, report))
}

/// The MIR program's loops over the LIR kernels: MIR kernel `i` became LIR kernels
/// `starts[i]..starts[i + 1]` (at least one each), so a range `first..end` of MIR kernels is
/// `starts[first]..starts[end]` (the MIR verifier checked that every range lies inside the
/// program).
fn map_loops(loops: &[KernelLoop], starts: &[usize]) -> Vec<KernelLoop> {
    let at = |k: usize| starts.get(k).copied().unwrap_or(k);
    loops
        .iter()
        .map(|l| KernelLoop {
            first: at(l.first),
            end: at(l.end),
            ..*l
        })
        .collect()
}
