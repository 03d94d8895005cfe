//! The LIR verifier: every typing, slot and memory-plan rule, with all violations collected.

use std::collections::HashSet;
use std::fmt;

use super::{Inst, LirKernel, LirProgram, SlotId, Storage};
use crate::error::TypeError;
use crate::ids::is_identifier;
use crate::mir::MirOp;
use crate::mir::verify::{check_op, inexact_index, max_index};
use crate::repeat::{self, LoopNestError};
use crate::{BufId, DType, ReduceOp};

/// Where a verifier error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerifyLocation {
    /// The program header (its arena).
    Program,
    /// A buffer declaration.
    Buffer(BufId),
    /// A kernel's header (dims, reduced dims, schedule).
    Kernel {
        /// The kernel's index.
        kernel: usize,
    },
    /// A preamble instruction.
    Preamble {
        /// The kernel's index.
        kernel: usize,
        /// The instruction's index in the preamble.
        index: usize,
    },
    /// A body instruction.
    Body {
        /// The kernel's index.
        kernel: usize,
        /// The instruction's index in the body.
        index: usize,
    },
    /// A `loop` line: the loop's position in [`LirProgram::loops`].
    Loop(usize),
}

impl fmt::Display for VerifyLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyLocation::Program => f.write_str("program"),
            VerifyLocation::Buffer(buf) => write!(f, "{buf}"),
            VerifyLocation::Kernel { kernel } => write!(f, "kernel #{kernel}"),
            VerifyLocation::Preamble { kernel, index } => write!(f, "kernel #{kernel}, preamble #{index}"),
            VerifyLocation::Body { kernel, index } => write!(f, "kernel #{kernel}, body #{index}"),
            VerifyLocation::Loop(index) => write!(f, "loop #{index}"),
        }
    }
}

/// What rule an LIR program breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    /// An instruction breaks its op's dtype rule.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// A slot past the end of the kernel's slot list.
    #[error("unknown slot {0}")]
    UnknownSlot(SlotId),
    /// A slot read before any instruction wrote it (preamble writes are visible in the body; a
    /// body slot must be written earlier in the same iteration).
    #[error("{0} is read before it is written")]
    SlotReadBeforeWrite(SlotId),
    /// A body read of a preamble value whose slot the body overwrites, so a later iteration
    /// would read the body's value instead.
    #[error("{0} is read as a preamble value but the body overwrites it")]
    PreambleSlotClobbered(SlotId),
    /// A buffer id past the end of the buffer list.
    #[error("unknown buffer {0}")]
    UnknownBuffer(BufId),
    /// A load into a slot whose dtype is not the buffer's.
    #[error("load of {buf} (dtype {buffer}) into a {slot} slot")]
    LoadDType {
        /// The buffer.
        buf: BufId,
        /// The buffer's dtype.
        buffer: DType,
        /// The slot's dtype.
        slot: DType,
    },
    /// A store or reduce of a slot whose dtype is not the buffer's.
    #[error("{buf} has dtype {buffer} but a {slot} slot is written")]
    WriteDType {
        /// The buffer.
        buf: BufId,
        /// The buffer's dtype.
        buffer: DType,
        /// The slot's dtype.
        slot: DType,
    },
    /// A reduction whose op rejects the dtype.
    #[error("`{op}` does not reduce {dtype} values")]
    ReduceDType {
        /// The reduction.
        op: ReduceOp,
        /// The source slot's dtype.
        dtype: DType,
    },
    /// A load or store without exactly one stride per loop dimension.
    #[error("{found} stride(s) for a {rank}-dimensional loop nest")]
    StrideCount {
        /// Strides given.
        found: usize,
        /// Loop dimensions.
        rank: usize,
    },
    /// A load or store that reaches past the end of its buffer.
    #[error("reaches element {max_index} of {buf}, which has {numel} element(s)")]
    OutOfBounds {
        /// The buffer.
        buf: BufId,
        /// The largest element index reached.
        max_index: usize,
        /// The buffer's element count.
        numel: usize,
    },
    /// A reduce into a buffer whose element count is not the product of the leading dims.
    #[error("{buf} has {buffer} element(s) but the leading dims have {leading} point(s)")]
    ReduceNumel {
        /// The buffer.
        buf: BufId,
        /// The buffer's element count.
        buffer: usize,
        /// The product of the leading dims.
        leading: usize,
    },
    /// A store or reduce into a program input.
    #[error("input buffer {0} is written")]
    WriteToInput(BufId),
    /// A store or reduce into a literal buffer.
    #[error("literal buffer {0} is written")]
    WriteToLiteral(BufId),
    /// An output no kernel writes.
    #[error("output buffer {0} is never written")]
    OutputNotWritten(BufId),
    /// A row store whose index is not an `i32` slot the preamble defines, whose row count is 0,
    /// or whose kernel does not store into its buffer or also reads it.
    #[error(
        "the row store into {0} needs an i32 preamble slot, at least one row, a store into the buffer and no read of it"
    )]
    RowStore(BufId),
    /// An arena or output buffer read before an earlier kernel wrote it (a write inside a loop
    /// of zero trips that does not hold the reader does not count).
    #[error("{0} is read before an earlier kernel writes it")]
    ReadBeforeWrite(BufId),
    /// Program loops whose kernel ranges do not nest.
    #[error(transparent)]
    LoopNest(#[from] LoopNestError),
    /// A loop's exit flag that is not a one-element `bool` arena buffer.
    #[error("exit flag {0} is not a one-element bool arena buffer")]
    ExitFlagType(BufId),
    /// A loop's exit flag that no kernel of the loop's range writes.
    #[error("exit flag {0} is not written by a kernel of the loop")]
    ExitFlagNotWritten(BufId),
    /// An output written by a kernel inside a loop (outputs are written outside loops).
    #[error("output buffer {0} is written inside a loop")]
    OutputWrittenInLoop(BufId),
    /// More reduced dims than loop dims.
    #[error("{reduce_dims} reduced dims in a {rank}-dimensional loop nest")]
    ReduceDims {
        /// The reduced dims.
        reduce_dims: usize,
        /// The loop nest's rank.
        rank: usize,
    },
    /// A store, reduce or scan in the preamble.
    #[error("`{0}` is not allowed in the preamble")]
    WriteInPreamble(&'static str),
    /// A preamble load or index with a nonzero stride (it would differ between points).
    #[error("preamble load or index with nonzero strides {0:?}")]
    VaryingPreambleLoad(Vec<usize>),
    /// An `index` whose largest value its dtype does not hold exactly.
    #[error("index reaches {max_index}, which {dtype} does not hold exactly")]
    IndexRange {
        /// The largest value reached.
        max_index: usize,
        /// The slot's dtype.
        dtype: DType,
    },
    /// An arena buffer that ends past the arena.
    #[error("arena buffer {buf} spans bytes {offset}..{end} but the arena has {arena_bytes}")]
    ArenaOverflow {
        /// The buffer.
        buf: BufId,
        /// Its first byte.
        offset: usize,
        /// One past its last byte.
        end: usize,
        /// The arena size.
        arena_bytes: usize,
    },
    /// An arena buffer whose offset is not a multiple of its dtype's size.
    #[error("arena offset {offset} of {buf} is not a multiple of {align} bytes")]
    ArenaMisaligned {
        /// The buffer.
        buf: BufId,
        /// Its offset.
        offset: usize,
        /// Its dtype's size.
        align: usize,
    },
    /// An arena alignment that is not a power of two.
    #[error("arena alignment {0} is not a power of two")]
    ArenaAlign(usize),
    /// A reduction lane count of zero.
    #[error("reduction lane count must be at least 1")]
    ReduceLanes,
    /// A scan instruction in a kernel that names no scan order.
    #[error("a kernel with scans names its scan order (`scan forward` or `scan reverse`)")]
    ScanWithoutOrder,
    /// A scan order on a kernel that reduces or has no loop dim: its innermost loop dim is the
    /// scanned one, run in order.
    #[error(
        "a kernel with a scan order has a loop dim and reduces none (rank {rank}, {reduce_dims} reduced)"
    )]
    ScanLoopNest {
        /// The loop nest's rank.
        rank: usize,
        /// The reduced dims.
        reduce_dims: usize,
    },
    /// A vector width that is not a power of two.
    #[error("vector width {0} is not a power of two")]
    VectorWidth(u32),
    /// Two inputs with one name.
    #[error("duplicate input name `{0}`")]
    DuplicateInputName(String),
    /// Two outputs with one name.
    #[error("duplicate output name `{0}`")]
    DuplicateOutputName(String),
    /// A program, kernel or buffer name the text format cannot carry.
    #[error("`{0}` is not a valid name (letters, digits and `_`, not starting with a digit)")]
    InvalidName(String),
}

/// One verifier error: what is wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {kind}")]
pub struct VerifyError {
    /// Where.
    pub location: VerifyLocation,
    /// What.
    pub kind: VerifyErrorKind,
}

/// Every error the verifier found in one program.
///
/// `Display` prints the program in the text format with each error attached as a
/// `# error: ...` line after the line it concerns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct VerifyErrors {
    program: Box<LirProgram>,
    errors: Vec<VerifyError>,
}

impl VerifyErrors {
    /// The errors, in the order the verifier found them (program order).
    pub fn errors(&self) -> &[VerifyError] {
        &self.errors
    }

    /// The program that failed to verify.
    pub fn program(&self) -> &LirProgram {
        &self.program
    }
}

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let notes = |loc: &VerifyLocation| {
            self.errors
                .iter()
                .filter(|e| e.location == *loc)
                .map(|e| e.kind.to_string())
                .collect()
        };
        let mut out = String::new();
        super::text::print_program(&mut out, &self.program, &notes)?;
        f.write_str(&out)
    }
}

/// Checks every rule of LIR and returns all violations.
///
/// Rules: the arena alignment is a power of two; arena buffers fit in the arena and are
/// aligned to their dtype's size (overlapping arena buffers are allowed: that is the memory
/// plan's business); input and output names are unique identifiers; per kernel, `reduce_dims`
/// is at most the loop rank and the vector width a power of two; slots exist and are written
/// before they are read (preamble writes are visible in the body only if the body never
/// overwrites the slot); every instruction follows its dtype rule (see [`Inst`]); loads and
/// stores name existing buffers, have one stride per loop dimension and stay in bounds; a
/// reduce's buffer has one element per leading point; a kernel with scans names its scan order,
/// and a kernel with a scan order has a loop dim and reduces none; the preamble has no store, no
/// reduce, no scan and no load with a nonzero stride; inputs are never written; every output is
/// written, by kernels outside every loop; arena and output buffers are read only after an
/// earlier kernel wrote them (a write inside a loop of zero trips counts only for readers in
/// the same loop). Loops nest ([`repeat::steps`]); a loop's exit flag is a one-element `bool`
/// arena buffer that a kernel of its range writes.
pub fn verify(program: &LirProgram) -> Result<(), VerifyErrors> {
    let mut errors = Vec::new();
    let mut push = |location, kind| errors.push(VerifyError { location, kind });
    if !is_identifier(program.name()) {
        push(
            VerifyLocation::Program,
            VerifyErrorKind::InvalidName(program.name().to_string()),
        );
    }
    if !program.arena_align().is_power_of_two() {
        push(
            VerifyLocation::Program,
            VerifyErrorKind::ArenaAlign(program.arena_align()),
        );
    }
    let (mut input_names, mut output_names) = (HashSet::new(), HashSet::new());
    for (i, buffer) in program.buffers().iter().enumerate() {
        let buf = BufId::new(i);
        let loc = VerifyLocation::Buffer(buf);
        let (name, fresh, duplicate): (_, _, fn(String) -> VerifyErrorKind) = match &buffer.storage {
            Storage::Input { name } => (
                name,
                input_names.insert(name),
                VerifyErrorKind::DuplicateInputName,
            ),
            Storage::Output { name } => (
                name,
                output_names.insert(name),
                VerifyErrorKind::DuplicateOutputName,
            ),
            Storage::Arena { offset } => {
                let (offset, align) = (*offset, buffer.ty.dtype.size_bytes());
                let end = offset.saturating_add(buffer.ty.size_bytes());
                if end > program.arena_bytes() {
                    push(
                        loc,
                        VerifyErrorKind::ArenaOverflow {
                            buf,
                            offset,
                            end,
                            arena_bytes: program.arena_bytes(),
                        },
                    );
                }
                if offset % align != 0 {
                    push(loc, VerifyErrorKind::ArenaMisaligned { buf, offset, align });
                }
                continue;
            }
            Storage::Literal { values } => {
                if let Err(e) = crate::semantics::check_literal(values, &buffer.ty) {
                    push(loc, VerifyErrorKind::Type(e));
                }
                continue;
            }
        };
        if !is_identifier(name) {
            push(loc, VerifyErrorKind::InvalidName(name.clone()));
        } else if !fresh {
            push(loc, duplicate(name.clone()));
        }
    }

    // The kernels that write each buffer, in order (without repeats).
    let mut writers: Vec<Vec<usize>> = vec![Vec::new(); program.buffers().len()];
    for (k, kernel) in program.kernels().iter().enumerate() {
        for inst in kernel.preamble.iter().chain(&kernel.body) {
            if let Inst::Store { buf, .. } | Inst::Reduce { buf, .. } = inst
                && let Some(list) = writers.get_mut(buf.index())
                && list.last() != Some(&k)
            {
                list.push(k);
            }
        }
    }
    for (k, kernel) in program.kernels().iter().enumerate() {
        verify_kernel(program, k, kernel, &writers, &mut push);
    }
    verify_loops(program, &writers, &mut push);
    for (i, buffer) in program.buffers().iter().enumerate() {
        if matches!(buffer.storage, Storage::Output { .. }) && writers[i].is_empty() {
            push(
                VerifyLocation::Buffer(BufId::new(i)),
                VerifyErrorKind::OutputNotWritten(BufId::new(i)),
            );
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(VerifyErrors {
            program: Box::new(program.clone()),
            errors,
        })
    }
}

/// The loops nest, and each exit flag is a one-element `bool` arena buffer written inside its
/// range.
fn verify_loops(
    program: &LirProgram,
    writers: &[Vec<usize>],
    push: &mut impl FnMut(VerifyLocation, VerifyErrorKind),
) {
    let loops = program.loops();
    if let Err(e) = repeat::steps(program.kernels().len(), loops) {
        push(VerifyLocation::Loop(e.index()), VerifyErrorKind::LoopNest(e));
    }
    for (index, spec) in loops.iter().enumerate() {
        let Some(flag) = spec.exit else { continue };
        let loc = VerifyLocation::Loop(index);
        let Some(buffer) = program.buffer(flag) else {
            push(loc, VerifyErrorKind::UnknownBuffer(flag));
            continue;
        };
        let arena = matches!(buffer.storage, Storage::Arena { .. });
        if !arena || buffer.ty.dtype != DType::Bool || buffer.ty.shape.numel() != 1 {
            push(loc, VerifyErrorKind::ExitFlagType(flag));
        }
        if !writers[flag.index()].iter().any(|&k| spec.contains(k)) {
            push(loc, VerifyErrorKind::ExitFlagNotWritten(flag));
        }
    }
}

fn verify_kernel(
    program: &LirProgram,
    k: usize,
    kernel: &LirKernel,
    writers: &[Vec<usize>],
    push: &mut impl FnMut(VerifyLocation, VerifyErrorKind),
) {
    let header = VerifyLocation::Kernel { kernel: k };
    if !is_identifier(&kernel.name) {
        push(header, VerifyErrorKind::InvalidName(kernel.name.clone()));
    }
    let rank = kernel.dims.len();
    if kernel.reduce_dims > rank {
        push(
            header,
            VerifyErrorKind::ReduceDims {
                reduce_dims: kernel.reduce_dims,
                rank,
            },
        );
    }
    if kernel.schedule.reduce_lanes == 0 {
        push(header, VerifyErrorKind::ReduceLanes);
    }
    let has_scan = kernel.body.iter().any(|inst| matches!(inst, Inst::Scan { .. }));
    if has_scan && kernel.scan.is_none() {
        push(header, VerifyErrorKind::ScanWithoutOrder);
    }
    if kernel.scan.is_some() && (rank == 0 || kernel.reduce_dims > 0) {
        push(
            header,
            VerifyErrorKind::ScanLoopNest {
                rank,
                reduce_dims: kernel.reduce_dims,
            },
        );
    }
    if !kernel.schedule.vector_width.is_power_of_two() {
        push(header, VerifyErrorKind::VectorWidth(kernel.schedule.vector_width));
    }
    let leading_numel = kernel
        .leading_dims()
        .iter()
        .fold(1usize, |acc, &d| acc.saturating_mul(d));

    let mut preamble_written = vec![false; kernel.slots.len()];
    let mut body_writes = vec![false; kernel.slots.len()];
    for inst in &kernel.body {
        if let Some(slot) = inst.dst().and_then(|dst| body_writes.get_mut(dst.index())) {
            *slot = true;
        }
    }
    for (in_body, insts) in [(false, &kernel.preamble), (true, &kernel.body)] {
        let mut written = vec![false; kernel.slots.len()];
        for (index, inst) in insts.iter().enumerate() {
            let loc = if in_body {
                VerifyLocation::Body { kernel: k, index }
            } else {
                VerifyLocation::Preamble { kernel: k, index }
            };
            // Slot existence and definedness.
            let mut slots_ok = true;
            for src in inst.srcs() {
                if src.index() >= kernel.slots.len() {
                    push(loc, VerifyErrorKind::UnknownSlot(src));
                    slots_ok = false;
                } else if !written[src.index()] {
                    if !(in_body && preamble_written[src.index()]) {
                        push(loc, VerifyErrorKind::SlotReadBeforeWrite(src));
                    } else if body_writes[src.index()] {
                        push(loc, VerifyErrorKind::PreambleSlotClobbered(src));
                    }
                }
            }
            if let Some(dst) = inst.dst() {
                match written.get_mut(dst.index()) {
                    Some(flag) => *flag = true,
                    None => {
                        push(loc, VerifyErrorKind::UnknownSlot(dst));
                        slots_ok = false;
                    }
                }
            }
            if !in_body {
                match inst {
                    Inst::Store { .. } | Inst::Reduce { .. } | Inst::Scan { .. } => {
                        push(loc, VerifyErrorKind::WriteInPreamble(inst.name()));
                    }
                    Inst::Load { strides, .. } | Inst::Index { strides, .. }
                        if strides.iter().any(|&s| s != 0) =>
                    {
                        push(loc, VerifyErrorKind::VaryingPreambleLoad(strides.clone()));
                    }
                    _ => {}
                }
            }
            if slots_ok {
                check_inst(program, k, kernel, inst, leading_numel, writers, &mut |kind| {
                    push(loc, kind)
                });
            }
        }
        if !in_body {
            preamble_written = written;
        }
    }
    if let Some(row) = &kernel.row_store {
        let defined = kernel.preamble.iter().any(|inst| inst.dst() == Some(row.index));
        let all = || kernel.preamble.iter().chain(&kernel.body);
        let stored = all().any(|inst| matches!(inst, Inst::Store { buf, .. } if *buf == row.buf));
        let read = kernel.reads().any(|buf| buf == row.buf);
        if !defined || kernel.slot_dtype(row.index) != Some(DType::I32) || row.rows == 0 || !stored || read {
            push(header, VerifyErrorKind::RowStore(row.buf));
        }
    }
}

/// Dtype, buffer and stride rules of one instruction whose slots all exist.
fn check_inst(
    program: &LirProgram,
    k: usize,
    kernel: &LirKernel,
    inst: &Inst,
    leading_numel: usize,
    writers: &[Vec<usize>],
    push: &mut impl FnMut(VerifyErrorKind),
) {
    let loops = program.loops();
    let unwritten = |buf: BufId| {
        !writers[buf.index()]
            .iter()
            .any(|&w| repeat::write_reaches(loops, w, k))
    };
    let dtype = |slot: SlotId| kernel.slots.get(slot.index()).copied().unwrap_or(DType::Bool);
    let elementwise = match inst {
        Inst::Const { dst, value } => Some((MirOp::Const(*value), vec![], *dst)),
        Inst::Unary { dst, op, src } => Some((MirOp::Unary(*op), vec![dtype(*src)], *dst)),
        Inst::Binary { dst, op, lhs, rhs } => {
            Some((MirOp::Binary(*op), vec![dtype(*lhs), dtype(*rhs)], *dst))
        }
        Inst::Compare { dst, op, lhs, rhs } => {
            Some((MirOp::Compare(*op), vec![dtype(*lhs), dtype(*rhs)], *dst))
        }
        Inst::Select {
            dst,
            cond,
            on_true,
            on_false,
        } => Some((
            MirOp::Select,
            vec![dtype(*cond), dtype(*on_true), dtype(*on_false)],
            *dst,
        )),
        Inst::Cast { dst, src } => Some((MirOp::Cast, vec![dtype(*src)], *dst)),
        Inst::Scan { dst, op, src, coef } => Some((
            MirOp::Scan {
                op: *op,
                axis: 0,
                reverse: false,
            },
            std::iter::once(*src).chain(*coef).map(dtype).collect(),
            *dst,
        )),
        Inst::Index { dst, strides } => {
            if strides.len() != kernel.dims.len() {
                push(VerifyErrorKind::StrideCount {
                    found: strides.len(),
                    rank: kernel.dims.len(),
                });
            } else if let Some(max_index) = inexact_index(&kernel.dims, strides, dtype(*dst)) {
                push(VerifyErrorKind::IndexRange {
                    max_index,
                    dtype: dtype(*dst),
                });
            }
            Some((
                MirOp::Index {
                    strides: strides.clone(),
                },
                vec![],
                *dst,
            ))
        }
        Inst::Gather { index, .. } => {
            if !matches!(dtype(*index), DType::I32 | DType::F64) {
                push(VerifyErrorKind::Type(crate::error::TypeError::UnsupportedDType {
                    op: "gather",
                    dtype: dtype(*index),
                }));
            }
            None
        }
        Inst::Load { .. } | Inst::Store { .. } | Inst::Reduce { .. } => None,
    };
    if let Some((op, args, dst)) = elementwise {
        if let Err(err) = check_op(&op, &args, dtype(dst)) {
            push(err.into());
        }
        return;
    }
    let Some(buf) = inst.buf() else { return };
    let Some(buffer) = program.buffer(buf) else {
        push(VerifyErrorKind::UnknownBuffer(buf));
        return;
    };
    let buffer_dtype = buffer.ty.dtype;
    let numel = buffer.ty.shape.numel();
    let check_strides = |strides: &[usize], offset: usize, push: &mut dyn FnMut(VerifyErrorKind)| {
        if strides.len() != kernel.dims.len() {
            push(VerifyErrorKind::StrideCount {
                found: strides.len(),
                rank: kernel.dims.len(),
            });
        } else if let Some(max_index) = max_index(&kernel.dims, strides).map(|m| m.saturating_add(offset))
            && max_index >= numel
        {
            push(VerifyErrorKind::OutOfBounds {
                buf,
                max_index,
                numel,
            });
        }
    };
    match inst {
        Inst::Load {
            dst, strides, offset, ..
        } => {
            if dtype(*dst) != buffer_dtype {
                push(VerifyErrorKind::LoadDType {
                    buf,
                    buffer: buffer_dtype,
                    slot: dtype(*dst),
                });
            }
            check_strides(strides, *offset, push);
            if !matches!(buffer.storage, Storage::Input { .. } | Storage::Literal { .. }) && unwritten(buf) {
                push(VerifyErrorKind::ReadBeforeWrite(buf));
            }
        }
        Inst::Gather { dst, .. } => {
            if dtype(*dst) != buffer_dtype {
                push(VerifyErrorKind::LoadDType {
                    buf,
                    buffer: buffer_dtype,
                    slot: dtype(*dst),
                });
            }
            // The index is clamped into the buffer: it needs one element to read.
            if numel == 0 {
                push(VerifyErrorKind::OutOfBounds {
                    buf,
                    max_index: 0,
                    numel,
                });
            }
            if !matches!(buffer.storage, Storage::Input { .. } | Storage::Literal { .. }) && unwritten(buf) {
                push(VerifyErrorKind::ReadBeforeWrite(buf));
            }
        }
        Inst::Store {
            strides, offset, src, ..
        } => {
            check_write(&buffer.storage, (buf, buffer_dtype), dtype(*src), push);
            // A row store reaches furthest at its last row.
            let last_row = kernel
                .row_store
                .as_ref()
                .filter(|r| r.buf == buf)
                .map_or(0, |r| r.rows.saturating_sub(1).saturating_mul(r.stride));
            check_strides(strides, offset.saturating_add(last_row), push);
            check_loop_write(&buffer.storage, buf, repeat::in_loop(loops, k), push);
        }
        Inst::Reduce { op, src, .. } => {
            check_write(&buffer.storage, (buf, buffer_dtype), dtype(*src), push);
            check_loop_write(&buffer.storage, buf, repeat::in_loop(loops, k), push);
            if !op.accepts(dtype(*src)) {
                push(VerifyErrorKind::ReduceDType {
                    op: *op,
                    dtype: dtype(*src),
                });
            }
            if numel != leading_numel {
                push(VerifyErrorKind::ReduceNumel {
                    buf,
                    buffer: numel,
                    leading: leading_numel,
                });
            }
        }
        _ => {}
    }
}

/// A store or reduction may write an output or an arena temporary, never an input or a literal.
/// A write of a value of dtype `slot` into `buf` (of dtype `buffer`): the buffer must be
/// writable and of the value's dtype.
fn check_write(
    storage: &Storage,
    (buf, buffer): (BufId, DType),
    slot: DType,
    push: &mut impl FnMut(VerifyErrorKind),
) {
    check_writable(storage, buf, push);
    if slot != buffer {
        push(VerifyErrorKind::WriteDType { buf, buffer, slot });
    }
}

fn check_writable(storage: &Storage, buf: BufId, push: &mut impl FnMut(VerifyErrorKind)) {
    match storage {
        Storage::Input { .. } => push(VerifyErrorKind::WriteToInput(buf)),
        Storage::Literal { .. } => push(VerifyErrorKind::WriteToLiteral(buf)),
        Storage::Output { .. } | Storage::Arena { .. } => {}
    }
}

/// Outputs are written outside loops only.
fn check_loop_write(storage: &Storage, buf: BufId, in_loop: bool, push: &mut impl FnMut(VerifyErrorKind)) {
    if in_loop && matches!(storage, Storage::Output { .. }) {
        push(VerifyErrorKind::OutputWrittenInLoop(buf));
    }
}
