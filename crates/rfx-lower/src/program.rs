//! MIR program → LIR program.

use rfx_ir::BufId;
use rfx_ir::lir::{self, Inst, LirBuffer, LirKernel, LirProgram, Storage};
use rfx_ir::mir::{self, BufKind, MirProgram};

use crate::config::LowerConfig;
use crate::error::LowerError;
use crate::lower::lower_kernel;
use crate::memplan::{Interval, plan_memory};
use crate::report::LowerReport;

/// Lowers a MIR program to LIR: each MIR kernel becomes one LIR kernel (or one per distinct
/// set of reduced axes, the first also doing the stores), loop nests are permuted so reduced
/// axes come last and coalesced, values get slots (reused once dead, constants pooled,
/// loop invariants hoisted to the preamble), and temporaries are placed in one arena by
/// [`plan_memory`]. Buffer ids are kept: `bufN` in MIR is `bufN` in LIR.
pub fn lower(program: &MirProgram, config: &LowerConfig) -> Result<(LirProgram, LowerReport), LowerError> {
    mir::verify(program).map_err(LowerError::InvalidMir)?;
    let buf_dtype = |b: BufId| program.buffer(b).map(|buf| buf.ty.dtype);
    let mut kernels: Vec<LirKernel> = Vec::new();
    let mut report = LowerReport::default();
    for mir_kernel in program.kernels() {
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

    // Lifetimes of temporaries over LIR kernels.
    let mut intervals: Vec<Interval> = Vec::new();
    for (index, buffer) in program.buffers().iter().enumerate() {
        if buffer.kind != BufKind::Temp {
            continue;
        }
        let buf = BufId::new(index);
        let touches = |k: &LirKernel, write: bool| {
            k.preamble.iter().chain(&k.body).any(|inst| match inst {
                Inst::Load { buf: b, .. } | Inst::Gather { buf: b, .. } => !write && *b == buf,
                Inst::Store { buf: b, .. } | Inst::Reduce { buf: b, .. } => write && *b == buf,
                _ => false,
            })
        };
        let start = kernels.iter().position(|k| touches(k, true)).unwrap_or(0);
        let end = kernels
            .iter()
            .rposition(|k| touches(k, false))
            .unwrap_or(start)
            .max(start);
        intervals.push(Interval {
            buf,
            bytes: buffer.ty.size_bytes(),
            start,
            end,
        });
    }
    let plan = plan_memory(&intervals, config.arena_align);
    report.arena_bytes = plan.arena_bytes;
    report.temp_bytes_without_reuse = intervals
        .iter()
        .map(|i| i.bytes.max(1).div_ceil(config.arena_align) * config.arena_align)
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
    );
    lir::verify(&lir).map_err(LowerError::InvalidLir)?;
    Ok((lir, report))
}
