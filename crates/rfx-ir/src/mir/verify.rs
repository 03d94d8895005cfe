//! The MIR verifier: every typing and dataflow rule, with all violations collected.

use std::collections::HashSet;
use std::fmt;

use super::{BufKind, MirKernel, MirOp, MirProgram, MirValue};
use crate::error::TypeError;
use crate::ids::is_identifier;
use crate::repeat::{self, LoopNestError};
use crate::{BufId, DType, ReduceOp, Shape};

/// Where a verifier error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerifyLocation {
    /// The program as a whole (its header).
    Program,
    /// A buffer declaration.
    Buffer(BufId),
    /// A kernel's header (its name and domain).
    Kernel {
        /// The kernel's index.
        kernel: usize,
    },
    /// A body instruction.
    Value {
        /// The kernel's index.
        kernel: usize,
        /// The value the instruction defines.
        value: MirValue,
    },
    /// A store.
    Store {
        /// The kernel's index.
        kernel: usize,
        /// The store's index in the kernel's store list.
        index: usize,
    },
    /// A reduction.
    Reduction {
        /// The kernel's index.
        kernel: usize,
        /// The reduction's index in the kernel's reduction list.
        index: usize,
    },
    /// A `loop` line: the loop's position in [`MirProgram::loops`].
    Loop(usize),
}

impl fmt::Display for VerifyLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyLocation::Program => f.write_str("program"),
            VerifyLocation::Buffer(buf) => write!(f, "{buf}"),
            VerifyLocation::Kernel { kernel } => write!(f, "kernel #{kernel}"),
            VerifyLocation::Value { kernel, value } => write!(f, "kernel #{kernel}, {value}"),
            VerifyLocation::Store { kernel, index } => write!(f, "kernel #{kernel}, store #{index}"),
            VerifyLocation::Reduction { kernel, index } => write!(f, "kernel #{kernel}, reduction #{index}"),
            VerifyLocation::Loop(index) => write!(f, "loop #{index}"),
        }
    }
}

/// What rule a MIR program breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    /// An instruction breaks its op's typing rule (arity, accepted dtypes, result dtype).
    #[error(transparent)]
    Type(#[from] TypeError),
    /// An operand that is not defined by an earlier instruction of the same body.
    #[error("operand {0} is not defined before its use")]
    UseBeforeDef(MirValue),
    /// A buffer id past the end of the buffer list.
    #[error("unknown buffer {0}")]
    UnknownBuffer(BufId),
    /// A load whose declared dtype is not the buffer's.
    #[error("load of {buf} (dtype {buffer}) declared as {declared}")]
    LoadDType {
        /// The buffer.
        buf: BufId,
        /// The buffer's dtype.
        buffer: DType,
        /// The instruction's dtype.
        declared: DType,
    },
    /// A load with one stride per something other than domain dimension.
    #[error("load has {found} stride(s) but the domain has rank {rank}")]
    StrideCount {
        /// Strides given.
        found: usize,
        /// The domain's rank.
        rank: usize,
    },
    /// A load that reaches past the end of its buffer.
    #[error("load reaches element {max_index} of {buf}, which has {numel} element(s)")]
    LoadOutOfBounds {
        /// The buffer.
        buf: BufId,
        /// The largest element index the load reads.
        max_index: usize,
        /// The buffer's element count.
        numel: usize,
    },
    /// An `index` whose largest value its dtype does not hold exactly.
    #[error("index reaches {max_index}, which {dtype} does not hold exactly")]
    IndexRange {
        /// The largest value reached.
        max_index: usize,
        /// The instruction's dtype.
        dtype: DType,
    },
    /// A store whose region reaches past the end of its buffer.
    #[error("store reaches element {max_index} of {buf}, which has {numel} element(s)")]
    StoreOutOfBounds {
        /// The buffer.
        buf: BufId,
        /// The largest element index the store writes.
        max_index: usize,
        /// The buffer's element count.
        numel: usize,
    },
    /// An element of a buffer written by stores with regions that they do not write exactly
    /// once between them (with the buffer's other writes).
    #[error("element {element} of {buf} is written {count} time(s) (exactly once expected)")]
    RegionCoverage {
        /// The buffer.
        buf: BufId,
        /// The first element written other than once.
        element: usize,
        /// How many times it is written.
        count: usize,
    },
    /// A row store whose index is not a one-element `i32` buffer, or whose row count is 0.
    #[error("the row index {index} of a row store must be a one-element i32 buffer, over at least one row")]
    RowIndex {
        /// The index buffer.
        index: BufId,
    },
    /// A kernel with more than one row store.
    #[error("a kernel has {count} row stores (at most one)")]
    RowStores {
        /// How many it has.
        count: usize,
    },
    /// A store or reduction whose buffer does not have the element count it writes.
    #[error("{buf} has {buffer} element(s) but {found} are written")]
    WriteNumel {
        /// The buffer.
        buf: BufId,
        /// The buffer's element count.
        buffer: usize,
        /// The element count written (domain points, or kept points of a reduction).
        found: usize,
    },
    /// A store or reduction of a value whose dtype is not the buffer's.
    #[error("{buf} has dtype {buffer} but a {value} value is written")]
    WriteDType {
        /// The buffer.
        buf: BufId,
        /// The buffer's dtype.
        buffer: DType,
        /// The written value's dtype.
        value: DType,
    },
    /// A reduction whose op rejects the value's dtype.
    #[error("`{op}` does not reduce {dtype} values")]
    ReduceDType {
        /// The reduction.
        op: ReduceOp,
        /// The value's dtype.
        dtype: DType,
    },
    /// A reduction's or a scan's axis at or past the domain's rank.
    #[error("axis {axis} is out of range for a rank-{rank} domain")]
    AxisOutOfRange {
        /// The axis.
        axis: usize,
        /// The domain's rank.
        rank: usize,
    },
    /// Reduction axes that are not strictly increasing.
    #[error("reduction axes {axes:?} are not sorted and unique")]
    AxesNotSorted {
        /// The axes as given.
        axes: Vec<usize>,
    },
    /// A scan along another axis or in the other direction than the kernel's first scan:
    /// backends run one scanned axis per kernel, in one order.
    #[error(
        "scan along axis {axis}{} in a kernel whose first scan runs along axis {first_axis}{}",
        if *reverse { " (reverse)" } else { "" },
        if *first_reverse { " (reverse)" } else { "" }
    )]
    ScanMismatch {
        /// This scan's axis.
        axis: usize,
        /// Whether it runs in reverse.
        reverse: bool,
        /// The kernel's first scan's axis.
        first_axis: usize,
        /// Whether that one runs in reverse.
        first_reverse: bool,
    },
    /// A reduction in a kernel with a scan (a scan's kernel runs its scanned axis in order,
    /// which a reduction's partial accumulators do not follow).
    #[error("a kernel with a scan has no reductions")]
    ScanWithReduction,
    /// A write to a program input.
    #[error("input buffer {0} is written")]
    WriteToInput(BufId),
    /// A write to a literal buffer.
    #[error("literal buffer {0} is written")]
    WriteToLiteral(BufId),
    /// An output no kernel writes.
    #[error("output buffer {0} is never written")]
    OutputNotWritten(BufId),
    /// A buffer written by more than one store or reduction in the program (only a temp
    /// written by some kernel inside a loop may be written by several kernels, one write each).
    #[error("{buf} is written {count} times (each buffer at most once)")]
    MultipleWrites {
        /// The buffer.
        buf: BufId,
        /// How many stores and reductions write it.
        count: usize,
    },
    /// A temp or output read by a kernel before any earlier kernel wrote it (a write inside a
    /// loop of zero trips that does not hold the reader does not count).
    #[error("{0} is read before an earlier kernel writes it")]
    ReadBeforeWrite(BufId),
    /// Program loops whose kernel ranges do not nest.
    #[error(transparent)]
    LoopNest(#[from] LoopNestError),
    /// A loop's exit flag that is not a one-element `bool` temporary.
    #[error("exit flag {0} is not a one-element bool temp")]
    ExitFlagType(BufId),
    /// A loop's exit flag that no kernel of the loop's range writes.
    #[error("exit flag {0} is not written by a kernel of the loop")]
    ExitFlagNotWritten(BufId),
    /// An output written by a kernel inside a loop (outputs are written once, outside loops).
    #[error("output buffer {0} is written inside a loop")]
    OutputWrittenInLoop(BufId),
    /// A kernel that reads a buffer it also writes.
    #[error("{0} is read by the kernel that writes it")]
    ReadOwnWrite(BufId),
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
    program: Box<MirProgram>,
    errors: Vec<VerifyError>,
}

impl VerifyErrors {
    /// The errors, in the order the verifier found them (program order).
    pub fn errors(&self) -> &[VerifyError] {
        &self.errors
    }

    /// The program that failed to verify.
    pub fn program(&self) -> &MirProgram {
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

/// Checks every rule of MIR and returns all violations.
///
/// Rules: operands are defined by earlier instructions of the same body; each op has its arity
/// and dtype rule (see [`MirOp`]); loads name existing buffers, have one stride per domain
/// dimension and stay inside the buffer; stores and reductions write buffers of the right
/// element count and dtype; reduction axes are in range, sorted and unique, and the reduction
/// accepts the dtype; scans run along an axis of the domain, all of a kernel's along one axis in
/// one direction, in a kernel without reductions; inputs are never written; every buffer is
/// written at most once (a temp written inside a loop may be written by several kernels, once
/// each) and every output exactly once, by a kernel outside every loop; temps and outputs are
/// read only by kernels after one that writes them (a write inside a loop of zero trips counts
/// only for readers in the same loop); input names and output names are unique; names are
/// identifiers. Loops nest ([`repeat::steps`]); a loop's exit flag is a one-element `bool`
/// temp that a kernel of its range writes.
pub fn verify(program: &MirProgram) -> Result<(), VerifyErrors> {
    let mut errors = Vec::new();
    let mut push = |location, kind| errors.push(VerifyError { location, kind });
    if !is_identifier(program.name()) {
        push(
            VerifyLocation::Program,
            VerifyErrorKind::InvalidName(program.name().to_string()),
        );
    }
    let (mut input_names, mut output_names) = (HashSet::new(), HashSet::new());
    for (i, buffer) in program.buffers().iter().enumerate() {
        let loc = VerifyLocation::Buffer(BufId::new(i));
        let (name, fresh, duplicate): (_, _, fn(String) -> VerifyErrorKind) = match &buffer.kind {
            BufKind::Input { name } => (
                name,
                input_names.insert(name),
                VerifyErrorKind::DuplicateInputName,
            ),
            BufKind::Output { name } => (
                name,
                output_names.insert(name),
                VerifyErrorKind::DuplicateOutputName,
            ),
            BufKind::Temp => continue,
            BufKind::Literal { values } => {
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

    // The kernels that write each buffer, one entry per store or reduction, in order. A row
    // store updates a buffer another write made and does not count.
    let mut writers = vec![Vec::new(); program.buffers().len()];
    for (k, kernel) in program.kernels().iter().enumerate() {
        let whole = kernel.stores.iter().filter(|s| s.row().is_none()).map(|s| s.buf);
        for buf in whole.chain(kernel.reductions.iter().map(|r| r.buf)) {
            if let Some(list) = writers.get_mut(buf.index()) {
                list.push(k);
            }
        }
    }
    // A buffer written by stores with regions is written once their parts are all written:
    // by the last of their kernels, once each element is written exactly once.
    for (i, list) in writers.iter_mut().enumerate() {
        let buf = BufId::new(i);
        let has_region = program.kernels().iter().any(|k| {
            k.stores
                .iter()
                .any(|s| s.buf == buf && s.region.as_ref().is_some_and(|r| r.row.is_none()))
        });
        if !has_region {
            continue;
        }
        if let Err(kind) = check_region_coverage(program, buf) {
            push(VerifyLocation::Buffer(buf), kind);
        }
        if let Some(&last) = list.last() {
            *list = vec![last];
        }
    }
    for (k, kernel) in program.kernels().iter().enumerate() {
        verify_kernel(program, k, kernel, &writers, &mut push);
    }
    let loops = program.loops();
    for (i, buffer) in program.buffers().iter().enumerate() {
        let buf = BufId::new(i);
        let loc = VerifyLocation::Buffer(buf);
        let count = writers[i].len();
        if matches!(buffer.kind, BufKind::Output { .. }) && count == 0 {
            push(loc, VerifyErrorKind::OutputNotWritten(buf));
        }
        // A temp may be rewritten by the kernels of a loop: once per kernel.
        let rewritten_in_loop = buffer.kind == BufKind::Temp
            && writers[i].windows(2).all(|w| w[0] != w[1])
            && writers[i].iter().any(|&k| repeat::in_loop(loops, k));
        if count > 1
            && !rewritten_in_loop
            && !matches!(buffer.kind, BufKind::Input { .. } | BufKind::Literal { .. })
        {
            push(loc, VerifyErrorKind::MultipleWrites { buf, count });
        }
    }
    verify_loops(program, &writers, &mut push);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(VerifyErrors {
            program: Box::new(program.clone()),
            errors,
        })
    }
}

/// The loops nest, and each exit flag is a one-element `bool` temp written inside its range.
fn verify_loops(
    program: &MirProgram,
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
        if buffer.kind != BufKind::Temp || buffer.ty.dtype != DType::Bool || buffer.ty.shape.numel() != 1 {
            push(loc, VerifyErrorKind::ExitFlagType(flag));
        }
        if !writers[flag.index()].iter().any(|&k| spec.contains(k)) {
            push(loc, VerifyErrorKind::ExitFlagNotWritten(flag));
        }
    }
}

fn verify_kernel(
    program: &MirProgram,
    k: usize,
    kernel: &MirKernel,
    writers: &[Vec<usize>],
    push: &mut impl FnMut(VerifyLocation, VerifyErrorKind),
) {
    let loops = program.loops();
    let in_loop = repeat::in_loop(loops, k);
    if !is_identifier(&kernel.name) {
        push(
            VerifyLocation::Kernel { kernel: k },
            VerifyErrorKind::InvalidName(kernel.name.clone()),
        );
    }
    let domain = &kernel.domain;
    let writes: HashSet<BufId> = kernel.writes().collect();
    for (i, inst) in kernel.body.iter().enumerate() {
        let loc = VerifyLocation::Value {
            kernel: k,
            value: MirValue::new(i),
        };
        let mut arg_dtypes = Vec::with_capacity(inst.args.len());
        for &arg in &inst.args {
            match kernel.body.get(arg.index()) {
                Some(def) if arg.index() < i => arg_dtypes.push(def.dtype),
                _ => push(loc, VerifyErrorKind::UseBeforeDef(arg)),
            }
        }
        if arg_dtypes.len() != inst.args.len() {
            continue;
        }
        if let Err(err) = check_op(&inst.op, &arg_dtypes, inst.dtype) {
            push(loc, err.into());
        }
        if let MirOp::Index { strides } = &inst.op
            && let Err(kind) = check_index(strides, domain.dims(), inst.dtype)
        {
            push(loc, kind);
        }
        if let MirOp::Scan { axis, reverse, .. } = inst.op {
            let rank = domain.rank();
            if axis >= rank {
                push(loc, VerifyErrorKind::AxisOutOfRange { axis, rank });
            }
            if let Some((first_axis, first_reverse)) = kernel.scan()
                && (first_axis, first_reverse) != (axis, reverse)
            {
                push(
                    loc,
                    VerifyErrorKind::ScanMismatch {
                        axis,
                        reverse,
                        first_axis,
                        first_reverse,
                    },
                );
            }
        }
        let (buf, window) = match &inst.op {
            MirOp::Load { buf, strides, offset } => (*buf, Some((strides, *offset))),
            MirOp::Gather { buf } => (*buf, None),
            _ => continue,
        };
        let Some(buffer) = program.buffer(buf) else {
            push(loc, VerifyErrorKind::UnknownBuffer(buf));
            continue;
        };
        if buffer.ty.dtype != inst.dtype {
            push(
                loc,
                VerifyErrorKind::LoadDType {
                    buf,
                    buffer: buffer.ty.dtype,
                    declared: inst.dtype,
                },
            );
        }
        let numel = buffer.ty.shape.numel();
        let reach = match window {
            Some((strides, offset)) => check_strides(buf, strides, offset, domain.dims(), numel),
            // A gather clamps its index into the buffer: it needs one element to read.
            None if numel == 0 => Err(VerifyErrorKind::LoadOutOfBounds {
                buf,
                max_index: 0,
                numel,
            }),
            None => Ok(()),
        };
        if let Err(kind) = reach {
            push(loc, kind);
        }
        if !matches!(buffer.kind, BufKind::Input { .. } | BufKind::Literal { .. }) {
            if writes.contains(&buf) {
                push(loc, VerifyErrorKind::ReadOwnWrite(buf));
            } else if !writers[buf.index()]
                .iter()
                .any(|&w| repeat::write_reaches(loops, w, k))
            {
                push(loc, VerifyErrorKind::ReadBeforeWrite(buf));
            }
        }
    }
    let value_dtype = |value: MirValue| kernel.body.get(value.index()).map(|inst| inst.dtype);
    for (index, store) in kernel.stores.iter().enumerate() {
        let loc = VerifyLocation::Store { kernel: k, index };
        let Some(dtype) = value_dtype(store.value) else {
            push(loc, VerifyErrorKind::UseBeforeDef(store.value));
            continue;
        };
        let numel = match &store.region {
            None => domain.numel(),
            Some(region) => {
                let numel = program.buffer(store.buf).map_or(0, |b| b.ty.shape.numel());
                // A row store reaches furthest at its last row.
                let last_row = region
                    .row
                    .as_ref()
                    .map_or(0, |r| r.rows.saturating_sub(1).saturating_mul(r.stride));
                let offset = region.offset.saturating_add(last_row);
                match check_strides(store.buf, &region.strides, offset, domain.dims(), numel) {
                    Err(VerifyErrorKind::LoadOutOfBounds {
                        buf,
                        max_index,
                        numel,
                    }) => {
                        push(
                            loc,
                            VerifyErrorKind::StoreOutOfBounds {
                                buf,
                                max_index,
                                numel,
                            },
                        );
                    }
                    Err(kind) => push(loc, kind),
                    Ok(()) => {}
                }
                // The coverage check counts the elements written.
                numel
            }
        };
        check_write(program, store.buf, dtype, numel, in_loop, &mut |kind| {
            push(loc, kind)
        });
        if let Some(row) = store.row() {
            check_row_store(program, k, kernel, store.buf, row, writers, &mut |kind| {
                push(loc, kind)
            });
        }
    }
    let row_stores = kernel.stores.iter().filter(|s| s.row().is_some()).count();
    if row_stores > 1 {
        push(
            VerifyLocation::Kernel { kernel: k },
            VerifyErrorKind::RowStores { count: row_stores },
        );
    }
    for (index, red) in kernel.reductions.iter().enumerate() {
        let loc = VerifyLocation::Reduction { kernel: k, index };
        if kernel.scan().is_some() {
            push(loc, VerifyErrorKind::ScanWithReduction);
        }
        let rank = domain.rank();
        let mut axes_ok = true;
        if let Some(&axis) = red.axes.iter().find(|&&axis| axis >= rank) {
            push(loc, VerifyErrorKind::AxisOutOfRange { axis, rank });
            axes_ok = false;
        }
        if red.axes.windows(2).any(|w| w[0] >= w[1]) {
            push(
                loc,
                VerifyErrorKind::AxesNotSorted {
                    axes: red.axes.clone(),
                },
            );
            axes_ok = false;
        }
        let Some(dtype) = value_dtype(red.value) else {
            push(loc, VerifyErrorKind::UseBeforeDef(red.value));
            continue;
        };
        if !red.op.accepts(dtype) {
            push(loc, VerifyErrorKind::ReduceDType { op: red.op, dtype });
        }
        if axes_ok {
            let kept = kept_numel(domain, &red.axes);
            check_write(program, red.buf, dtype, kept, in_loop, &mut |kind| {
                push(loc, kind)
            });
        } else if program.buffer(red.buf).is_none() {
            push(loc, VerifyErrorKind::UnknownBuffer(red.buf));
        }
    }
}

/// A row store of kernel `k` into `buf`: its index is a one-element `i32` buffer written before
/// (and not by the kernel), the buffer it updates is written before by another kernel, and the
/// kernel does not read it.
fn check_row_store(
    program: &MirProgram,
    k: usize,
    kernel: &MirKernel,
    buf: BufId,
    row: &crate::mir::RowIndex,
    writers: &[Vec<usize>],
    push: &mut impl FnMut(VerifyErrorKind),
) {
    let loops = program.loops();
    let written_before = |b: BufId| {
        writers
            .get(b.index())
            .is_some_and(|list| list.iter().any(|&w| w != k && repeat::write_reaches(loops, w, k)))
    };
    match program.buffer(row.index) {
        None => push(VerifyErrorKind::UnknownBuffer(row.index)),
        Some(index) if index.ty.dtype != DType::I32 || index.ty.shape.numel() != 1 || row.rows == 0 => {
            push(VerifyErrorKind::RowIndex { index: row.index });
        }
        Some(index) => {
            if kernel.writes().any(|w| w == row.index) {
                push(VerifyErrorKind::ReadOwnWrite(row.index));
            } else if !matches!(index.kind, BufKind::Input { .. } | BufKind::Literal { .. })
                && !written_before(row.index)
            {
                push(VerifyErrorKind::ReadBeforeWrite(row.index));
            }
        }
    }
    if kernel
        .body
        .iter()
        .any(|inst| matches!(&inst.op, MirOp::Load { buf: b, .. } | MirOp::Gather { buf: b } if *b == buf))
    {
        push(VerifyErrorKind::ReadOwnWrite(buf));
    }
    if !written_before(buf) {
        push(VerifyErrorKind::ReadBeforeWrite(buf));
    }
}

/// Counts the writes of each element of `buf`, which some stores write with regions: every
/// element must be written exactly once by the program's stores and reductions together.
fn check_region_coverage(program: &MirProgram, buf: BufId) -> Result<(), VerifyErrorKind> {
    let Some(buffer) = program.buffer(buf) else {
        return Err(VerifyErrorKind::UnknownBuffer(buf));
    };
    let numel = buffer.ty.shape.numel();
    let mut counts = vec![0usize; numel];
    let mut whole_writes = 0usize;
    for kernel in program.kernels() {
        whole_writes += kernel.reductions.iter().filter(|r| r.buf == buf).count();
        for store in kernel.stores.iter().filter(|s| s.buf == buf) {
            let Some(region) = &store.region else {
                whole_writes += 1;
                continue;
            };
            // A row store updates the buffer after its other writes.
            if region.row.is_some() {
                continue;
            }
            let dims = kernel.domain.dims();
            // Out-of-range regions and stride counts are reported at the store.
            if region.strides.len() != dims.len()
                || max_index(dims, &region.strides).is_some_and(|m| m.saturating_add(region.offset) >= numel)
            {
                return Ok(());
            }
            let mut idx = vec![0usize; dims.len()];
            for point in 0..kernel.domain.numel() {
                if let Some(count) = counts.get_mut(store.element(point, &idx)) {
                    *count += 1;
                }
                for axis in (0..dims.len()).rev() {
                    idx[axis] += 1;
                    if idx[axis] < dims[axis] {
                        break;
                    }
                    idx[axis] = 0;
                }
            }
        }
    }
    match counts.iter().position(|&c| c + whole_writes != 1) {
        Some(element) => Err(VerifyErrorKind::RegionCoverage {
            buf,
            element,
            count: counts[element] + whole_writes,
        }),
        None => Ok(()),
    }
}

/// The number of points of `domain` left after removing `axes`.
pub(crate) fn kept_numel(domain: &Shape, axes: &[usize]) -> usize {
    domain
        .dims()
        .iter()
        .enumerate()
        .filter(|(axis, _)| !axes.contains(axis))
        .fold(1usize, |acc, (_, &d)| acc.saturating_mul(d))
}

/// A write of `numel` elements of `dtype` into `buf` by a kernel, `in_loop` when the kernel
/// lies inside a loop.
fn check_write(
    program: &MirProgram,
    buf: BufId,
    dtype: DType,
    numel: usize,
    in_loop: bool,
    push: &mut impl FnMut(VerifyErrorKind),
) {
    let Some(buffer) = program.buffer(buf) else {
        push(VerifyErrorKind::UnknownBuffer(buf));
        return;
    };
    match buffer.kind {
        BufKind::Input { .. } => push(VerifyErrorKind::WriteToInput(buf)),
        BufKind::Literal { .. } => push(VerifyErrorKind::WriteToLiteral(buf)),
        BufKind::Output { .. } if in_loop => push(VerifyErrorKind::OutputWrittenInLoop(buf)),
        _ => {}
    }
    if buffer.ty.shape.numel() != numel {
        push(VerifyErrorKind::WriteNumel {
            buf,
            buffer: buffer.ty.shape.numel(),
            found: numel,
        });
    }
    if buffer.ty.dtype != dtype {
        push(VerifyErrorKind::WriteDType {
            buf,
            buffer: buffer.ty.dtype,
            value: dtype,
        });
    }
}

fn check_strides(
    buf: BufId,
    strides: &[usize],
    offset: usize,
    dims: &[usize],
    numel: usize,
) -> Result<(), VerifyErrorKind> {
    if strides.len() != dims.len() {
        return Err(VerifyErrorKind::StrideCount {
            found: strides.len(),
            rank: dims.len(),
        });
    }
    match max_index(dims, strides).map(|m| m.saturating_add(offset)) {
        Some(max_index) if max_index >= numel => Err(VerifyErrorKind::LoadOutOfBounds {
            buf,
            max_index,
            numel,
        }),
        _ => Ok(()),
    }
}

/// Checks an `index`'s stride count and that its dtype holds every value it reaches.
fn check_index(strides: &[usize], dims: &[usize], dtype: DType) -> Result<(), VerifyErrorKind> {
    if strides.len() != dims.len() {
        return Err(VerifyErrorKind::StrideCount {
            found: strides.len(),
            rank: dims.len(),
        });
    }
    match inexact_index(dims, strides, dtype) {
        Some(max_index) => Err(VerifyErrorKind::IndexRange { max_index, dtype }),
        None => Ok(()),
    }
}

/// The largest value an `index` with `strides` reaches over `dims`, when a numeric `dtype`
/// does not hold it exactly. Shared with the LIR verifier.
pub(crate) fn inexact_index(dims: &[usize], strides: &[usize], dtype: DType) -> Option<usize> {
    max_index(dims, strides).filter(|&m| dtype.is_numeric() && m > crate::semantics::max_exact_index(dtype))
}

/// The largest element index `sum(idx[d] * strides[d])` reaches over the iteration space
/// `dims`, or `None` when the space is empty. Saturates instead of overflowing.
pub(crate) fn max_index(dims: &[usize], strides: &[usize]) -> Option<usize> {
    if dims.contains(&0) {
        return None;
    }
    Some(dims.iter().zip(strides).fold(0usize, |acc, (&d, &s)| {
        acc.saturating_add((d - 1).saturating_mul(s))
    }))
}

/// Checks an elementwise op's arity and dtype rule given its operands' dtypes and its declared
/// result dtype. Shared with the LIR verifier.
pub(crate) fn check_op(op: &MirOp, args: &[DType], result: DType) -> Result<(), TypeError> {
    let name = op.name();
    TypeError::check_arity(name, op.arity(), args.len())?;
    let same = |args: &[DType]| -> Result<DType, TypeError> {
        match args.iter().find(|&&d| d != args[0]) {
            Some(&other) => Err(TypeError::DTypeMismatch {
                op: name,
                lhs: args[0],
                rhs: other,
            }),
            None => Ok(args[0]),
        }
    };
    let inferred = match op {
        MirOp::Load { .. } => result,
        MirOp::Gather { .. } => {
            if !matches!(args[0], DType::I32 | DType::F64) {
                return Err(TypeError::UnsupportedDType {
                    op: name,
                    dtype: args[0],
                });
            }
            result
        }
        MirOp::Index { .. } => {
            if !result.is_numeric() {
                return Err(TypeError::UnsupportedDType {
                    op: name,
                    dtype: result,
                });
            }
            result
        }
        MirOp::Const(value) => {
            if value.dtype() != result {
                return Err(TypeError::ConstantDType {
                    literal: value.dtype(),
                    declared: result,
                });
            }
            result
        }
        MirOp::Unary(u) => {
            if !u.accepts(args[0]) {
                return Err(TypeError::UnsupportedDType {
                    op: name,
                    dtype: args[0],
                });
            }
            args[0]
        }
        MirOp::Binary(b) => {
            let dtype = same(args)?;
            if !b.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            dtype
        }
        MirOp::Compare(c) => {
            let dtype = same(args)?;
            if !c.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            DType::Bool
        }
        MirOp::Select => {
            if args[0] != DType::Bool {
                return Err(TypeError::ConditionNotBool { found: args[0] });
            }
            same(&args[1..])?
        }
        MirOp::Cast => result,
        MirOp::Scan { op: s, .. } => {
            let dtype = same(args)?;
            if !s.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            dtype
        }
    };
    if inferred != result {
        return Err(TypeError::ResultType {
            declared: result.to_string(),
            inferred: inferred.to_string(),
        });
    }
    Ok(())
}
