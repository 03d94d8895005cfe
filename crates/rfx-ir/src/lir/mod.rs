//! LIR: the slot-based executable form.
//!
//! An [`LirProgram`] is a list of buffers with a memory plan (inputs and outputs are the
//! caller's; temporaries live at byte offsets in one arena) and a list of [`LirKernel`]s that run
//! in order. A kernel is a loop nest over `dims` (outermost first) whose trailing `reduce_dims`
//! dimensions are reduced; its `preamble` runs once per call and its `body` at every point of
//! the loop nest. Instructions read and write typed registers ([`SlotId`]); a slot may be
//! reassigned (slot reuse) but always holds its declared dtype. The [`Schedule`] (vector width,
//! thread split, tile) tells backends how to run the loop nest; it never changes the result.
//!
//! rfx-lower makes LIR from MIR; [`verify`] states its rules and [`crate::interp::run_lir`]
//! defines what it computes.

mod text;
mod verify;

pub use text::parse;
pub use verify::{VerifyError, VerifyErrorKind, VerifyErrors, VerifyLocation, verify};

use std::fmt;

use crate::ids::typed_id;
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::{BufId, DType, Scalar, TensorType};

typed_id!(
    /// A typed register of an LIR kernel: the index into the kernel's slot list. Prints as `s3`.
    SlotId,
    "s"
);

/// Where a buffer's memory is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Storage {
    /// A program input supplied by the caller; never written.
    Input {
        /// The input's name, unique among inputs.
        name: String,
    },
    /// A program output supplied (or allocated) by the caller.
    Output {
        /// The output's name, unique among outputs.
        name: String,
    },
    /// A temporary at a byte offset in the program's arena. Buffers whose lifetimes do not
    /// overlap may share arena bytes; buffers at overlapping bytes really share storage.
    Arena {
        /// Byte offset of element 0; a multiple of the dtype's size.
        offset: usize,
    },
    /// Constant data the compiled program owns (a HIR `literal`): one value per element in
    /// row-major order, each of the buffer's dtype; never written.
    Literal {
        /// The values.
        values: Vec<Scalar>,
    },
}

/// A dense, row-major buffer and where it lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LirBuffer {
    /// Element type and shape.
    pub ty: TensorType,
    /// Caller memory or arena offset.
    pub storage: Storage,
}

/// How a backend runs a kernel's loop nest. Only `reduce_lanes` affects results (it fixes the
/// order in which reductions combine); the other fields are performance hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    /// SIMD lanes per step of the innermost loop; a power of two, at least 1.
    pub vector_width: u32,
    /// Do not split the loop nest across threads below this many points per thread.
    pub min_elems_per_thread: usize,
    /// Points per tile (the unit of work handed to a thread or GPU block).
    pub tile: usize,
    /// Partial accumulators per reduction, so that vector backends can reduce lane-parallel and
    /// still give the interpreter's bits. A reduced point whose index along the innermost loop
    /// dimension is `j` combines into partial `j % reduce_lanes`; each partial starts at the
    /// op's identity; after the reduced points of a leading point are done, the partials are
    /// combined by the pairwise tree of [`reduce_lane_levels`] (with 8 lanes
    /// `((p0 ∘ p4) ∘ (p2 ∘ p6)) ∘ ((p1 ∘ p5) ∘ (p3 ∘ p7))`) and finished (mean divides by the
    /// count). `1` is a plain sequential reduction. At least 1.
    ///
    /// With more than one lane, a float `sum`, `mean` or `prod` of more than
    /// [`REDUCE_LEAF_POINTS`] points per output is blocked: its points are cut into leaves
    /// ([`ReduceLeaves`]), each leaf reduced into its own `reduce_lanes` partials from the
    /// identity as above, and the leaves' partials combined lane by lane in a binary tree
    /// ([`ReduceLeaves`] gives the tree) before the lanes are combined. The rounding error
    /// then grows with the logarithm of the point count, not linearly.
    pub reduce_lanes: u32,
    /// The GPU backends run each output's reduction as a block tree (the reduced points shared
    /// out among a block's threads, their partials combined in shared memory) instead of one
    /// thread's fold in the `reduce_lanes` order. Lowering sets it on kernels without scans
    /// that reduce at least 1024 points per output; a tree's float rounding differs from the
    /// interpreter's order, so differential tests read it too. The CPU backend and the
    /// interpreters ignore it. Printed as `tree` after the lanes.
    #[serde(default)]
    pub gpu_tree: bool,
}

/// Reduced points per leaf of a blocked reduction (see [`Schedule::reduce_lanes`]), rounded up
/// to a multiple of the lanes. A reduction of at most this many points per output is one leaf,
/// the plain `reduce_lanes` order, which the GPU backends' one-thread folds (kernels without
/// [`Schedule::gpu_tree`]) also follow.
pub const REDUCE_LEAF_POINTS: usize = 2048;

/// The levels of the pairwise tree that combines a reduction's `reduce_lanes` partials into
/// partial 0 (see [`Schedule::reduce_lanes`]), first level first. A level `(half, offset)`
/// sets `p[i] = p[i] ∘ p[i + offset]` for every `i < half`; with `n` partials left, `half` is
/// `n / 2` and `offset` is `n - half`, which leaves `offset` partials (an odd one out, partial
/// `half`, passes to the next level unchanged). With a power of two lanes each level adds the
/// upper half onto the lower, as vector registers combine their halves, so a vector backend
/// runs it with whole-vector ops until one register is left. Empty for one lane.
pub fn reduce_lane_levels(reduce_lanes: u32) -> Vec<(usize, usize)> {
    let mut levels = Vec::new();
    let mut n = reduce_lanes.max(1) as usize;
    while n > 1 {
        let half = n / 2;
        levels.push((half, n - half));
        n -= half;
    }
    levels
}

/// Whether a reduction is blocked into leaves combined by a tree
/// ([`Schedule::reduce_lanes`]): a float `sum`, `mean` or `prod` with more than one lane. The
/// other reductions are exact in any order (`i32` sums wrap; `max` and `min` round nothing), so
/// they keep one set of partials.
pub fn reduce_is_blocked(op: ReduceOp, dtype: DType, reduce_lanes: u32) -> bool {
    reduce_lanes > 1 && dtype.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod)
}

/// How the reduced points of one output of a blocked reduction are cut into leaves, from the
/// reduced dims after the innermost (`row_len` points per row, the innermost loop dim) and the
/// product of the others (`rows`). The points run in row-major order; a leaf is a run of them
/// that starts at the beginning of a row (so at lane 0) and holds at most
/// `leaf = REDUCE_LEAF_POINTS` rounded up to a multiple of the lanes.
///
/// The leaves' partials are combined by a binary counter: leaf `c` (counting from 1) is pushed
/// on a stack after merging it `trailing_zeros(c)` times with the top of the stack
/// (`top ∘ leaf`, the earlier points on the left), and at the end the stack is folded from the
/// top (`s0 ∘ (s1 ∘ (… ∘ s_top))`, `s0` the oldest and largest). Every merge is lane by lane.
/// This is a pairwise tree of the leaves in order, built without recursion: no leaf passes
/// through more merges than the bit length of the leaf count ([`reduce_stack_depth`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceLeaves {
    /// All points in one leaf (at most `leaf` points, or a reduction that is not blocked): one
    /// set of partials.
    One,
    /// Rows of at most `leaf` points, `rows_per_leaf` consecutive rows to a leaf (the last leaf
    /// may hold fewer).
    RowGroups {
        /// Rows per leaf, at least 1.
        rows_per_leaf: usize,
    },
    /// Rows longer than `leaf`, each cut into pieces of `points` points (its last piece
    /// shorter).
    RowPieces {
        /// Points per piece: `leaf`, a multiple of the lanes.
        points: usize,
    },
}

impl ReduceLeaves {
    /// The leaves of a blocked reduction over `rows` rows of `row_len` points with
    /// `reduce_lanes` lanes (`One` with a single lane).
    pub fn of(reduce_lanes: u32, rows: usize, row_len: usize) -> ReduceLeaves {
        let lanes = reduce_lanes.max(1) as usize;
        let leaf = REDUCE_LEAF_POINTS.next_multiple_of(lanes);
        if lanes == 1 || row_len == 0 || rows.saturating_mul(row_len) <= leaf {
            ReduceLeaves::One
        } else if row_len <= leaf {
            ReduceLeaves::RowGroups {
                rows_per_leaf: leaf / row_len,
            }
        } else {
            ReduceLeaves::RowPieces { points: leaf }
        }
    }

    /// How many leaves `rows` rows of `row_len` points make.
    pub fn count(self, rows: usize, row_len: usize) -> usize {
        match self {
            ReduceLeaves::One => 1,
            ReduceLeaves::RowGroups { rows_per_leaf } => rows.div_ceil(rows_per_leaf.max(1)),
            ReduceLeaves::RowPieces { points } => rows.saturating_mul(row_len.div_ceil(points.max(1))),
        }
    }

    /// Whether point `j` of row `row` (of `rows` rows of `row_len` points) is the last of its
    /// leaf.
    pub fn ends_leaf(self, row: usize, j: usize, rows: usize, row_len: usize) -> bool {
        let row_end = j + 1 == row_len;
        match self {
            ReduceLeaves::One => row_end && row + 1 == rows,
            ReduceLeaves::RowGroups { rows_per_leaf } => {
                row_end && ((row + 1).is_multiple_of(rows_per_leaf.max(1)) || row + 1 == rows)
            }
            ReduceLeaves::RowPieces { points } => row_end || (j + 1).is_multiple_of(points.max(1)),
        }
    }
}

/// The stack depth the binary counter of [`ReduceLeaves`] reaches over `leaves` leaves (the
/// bit length of `leaves`); the stack holds `leaves.count_ones()` entries at the end.
pub fn reduce_stack_depth(leaves: usize) -> usize {
    (usize::BITS - leaves.leading_zeros()) as usize
}

impl Default for Schedule {
    fn default() -> Schedule {
        Schedule {
            vector_width: 1,
            min_elems_per_thread: 16384,
            tile: 1024,
            reduce_lanes: 1,
            gpu_tree: false,
        }
    }
}

/// One LIR instruction. Operand slots must hold a value when the instruction runs (see
/// [`verify`]); the destination slot's declared dtype is the result dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Inst {
    /// `dst = buf[offset + sum(idx[d] * strides[d])]` at loop point `idx`; one stride per loop
    /// dimension. `dst` has the buffer's dtype. In the preamble every stride is 0.
    Load {
        /// Destination.
        dst: SlotId,
        /// The buffer read.
        buf: BufId,
        /// Elements to advance per step of each loop dimension.
        strides: Vec<usize>,
        /// The element read at the loop nest's first point.
        offset: usize,
    },
    /// `dst = buf[clamp(index, 0, len - 1)]` for a buffer of `len` (at least one) elements;
    /// `index` is an `i32` or `f64` slot, `dst` has the buffer's dtype (see
    /// [`crate::mir::MirOp::Gather`]).
    Gather {
        /// Destination.
        dst: SlotId,
        /// The buffer read.
        buf: BufId,
        /// The element index (clamped).
        index: SlotId,
    },
    /// `dst = sum(idx[d] * strides[d])` at loop point `idx`, in `dst`'s (numeric) dtype, which
    /// holds every value reached exactly. In the preamble every stride is 0 (the value is 0).
    Index {
        /// Destination.
        dst: SlotId,
        /// Added per step of each loop dimension.
        strides: Vec<usize>,
    },
    /// `dst = value`; the literal has `dst`'s dtype.
    Const {
        /// Destination.
        dst: SlotId,
        /// The literal.
        value: Scalar,
    },
    /// `dst = op(src)`; `src` and `dst` share a dtype the op accepts.
    Unary {
        /// Destination.
        dst: SlotId,
        /// The op.
        op: UnaryOp,
        /// Operand.
        src: SlotId,
    },
    /// `dst = op(lhs, rhs)`; all three share a dtype the op accepts.
    Binary {
        /// Destination.
        dst: SlotId,
        /// The op.
        op: BinaryOp,
        /// First operand.
        lhs: SlotId,
        /// Second operand.
        rhs: SlotId,
    },
    /// `dst = op(lhs, rhs)`; the operands share a dtype the comparison accepts; `dst` is bool.
    Compare {
        /// Destination.
        dst: SlotId,
        /// The comparison.
        op: CmpOp,
        /// First operand.
        lhs: SlotId,
        /// Second operand.
        rhs: SlotId,
    },
    /// `dst = cond ? on_true : on_false`; `cond` is bool, the others share `dst`'s dtype.
    Select {
        /// Destination.
        dst: SlotId,
        /// Condition.
        cond: SlotId,
        /// Value when `cond` is true.
        on_true: SlotId,
        /// Value when `cond` is false.
        on_false: SlotId,
    },
    /// `dst = cast(src)` to `dst`'s dtype ([`crate::semantics::cast`]); any dtypes.
    Cast {
        /// Destination.
        dst: SlotId,
        /// Operand.
        src: SlotId,
    },
    /// `buf[offset + sum(idx[d] * strides[d])] = src`; `src` has the buffer's dtype. Body
    /// only. Several stores (of one kernel or several) may write disjoint regions of one
    /// buffer (the parts of a concatenation, each stored at its own offset).
    Store {
        /// The buffer written.
        buf: BufId,
        /// Elements to advance per step of each loop dimension.
        strides: Vec<usize>,
        /// The element written at the loop nest's first point.
        offset: usize,
        /// The value stored.
        src: SlotId,
    },
    /// Combines `src` into the accumulator of element `lead` of `buf`, where `lead` is the
    /// row-major index of the current point over the leading (non-reduced) dims. Accumulators
    /// start at the op's identity for each leading point and are finished and written once its
    /// reduced dims are exhausted (`mean` divides by their point count). Body only; `src` has
    /// the buffer's dtype, which the op accepts.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The buffer written (one element per leading point).
        buf: BufId,
        /// The value combined.
        src: SlotId,
    },
    /// `dst = acc = combine(acc, src)` (`acc = coef * acc + src` for [`ScanOp::Linear`],
    /// rounded twice): combines `src` into this instruction's running
    /// accumulator and gives the result. The accumulator starts at the op's identity at the
    /// first point of each row of the innermost loop dim (each point of the outer dims), which
    /// a kernel with scans runs in its [`LirKernel::scan`] order. Body only; `src` and `dst`
    /// share a dtype the op accepts.
    Scan {
        /// Destination.
        dst: SlotId,
        /// The running fold.
        op: ScanOp,
        /// The value combined.
        src: SlotId,
        /// [`ScanOp::Linear`]'s coefficient, which scales the accumulator before `src` is
        /// added (`acc = coef * acc + src`); `None` for the folds. Of `src`'s dtype.
        coef: Option<SlotId>,
    },
}

impl Inst {
    /// The instruction's work in instruction-equivalents, the backends' one cost model: a
    /// transcendental counts 20, `pow` and `atan2` 40 (each an inlined approximation of tens of
    /// instructions), anything else 1. The CPU backend sizes its thread split and written-out
    /// code by it; the GPU backends bound their compilers' input by it.
    pub fn work(&self) -> usize {
        match self {
            Inst::Unary { op, .. } if op.is_transcendental() => 20,
            Inst::Binary {
                op: BinaryOp::Pow | BinaryOp::Atan2,
                ..
            } => 40,
            _ => 1,
        }
    }

    /// The op's name in the text format.
    pub fn name(&self) -> &'static str {
        match self {
            Inst::Load { .. } => "load",
            Inst::Gather { .. } => "gather",
            Inst::Index { .. } => "index",
            Inst::Const { .. } => "const",
            Inst::Unary { op, .. } => op.name(),
            Inst::Binary { op, .. } => op.name(),
            Inst::Compare { op, .. } => op.name(),
            Inst::Select { .. } => "select",
            Inst::Cast { .. } => "cast",
            Inst::Store { .. } => "store",
            Inst::Reduce { .. } => "reduce",
            Inst::Scan { op, .. } => op.name(),
        }
    }

    /// The slot the instruction writes, if any.
    pub fn dst(&self) -> Option<SlotId> {
        match self {
            Inst::Load { dst, .. }
            | Inst::Gather { dst, .. }
            | Inst::Index { dst, .. }
            | Inst::Const { dst, .. }
            | Inst::Unary { dst, .. }
            | Inst::Binary { dst, .. }
            | Inst::Compare { dst, .. }
            | Inst::Select { dst, .. }
            | Inst::Cast { dst, .. }
            | Inst::Scan { dst, .. } => Some(*dst),
            Inst::Store { .. } | Inst::Reduce { .. } => None,
        }
    }

    /// The slot the instruction writes, to rename it ([`Inst::dst`]'s slot, mutable).
    pub fn dst_mut(&mut self) -> Option<&mut SlotId> {
        match self {
            Inst::Load { dst, .. }
            | Inst::Gather { dst, .. }
            | Inst::Index { dst, .. }
            | Inst::Const { dst, .. }
            | Inst::Unary { dst, .. }
            | Inst::Binary { dst, .. }
            | Inst::Compare { dst, .. }
            | Inst::Select { dst, .. }
            | Inst::Cast { dst, .. }
            | Inst::Scan { dst, .. } => Some(dst),
            Inst::Store { .. } | Inst::Reduce { .. } => None,
        }
    }

    /// The slots the instruction reads, in operand order.
    pub fn srcs(&self) -> Vec<SlotId> {
        match self {
            Inst::Load { .. } | Inst::Index { .. } | Inst::Const { .. } => Vec::new(),
            Inst::Unary { src, .. }
            | Inst::Cast { src, .. }
            | Inst::Gather { index: src, .. }
            | Inst::Store { src, .. }
            | Inst::Reduce { src, .. }
            | Inst::Scan { src, coef: None, .. } => {
                vec![*src]
            }
            Inst::Scan {
                src,
                coef: Some(coef),
                ..
            } => vec![*src, *coef],
            Inst::Binary { lhs, rhs, .. } | Inst::Compare { lhs, rhs, .. } => vec![*lhs, *rhs],
            Inst::Select {
                cond,
                on_true,
                on_false,
                ..
            } => vec![*cond, *on_true, *on_false],
        }
    }

    /// The instruction with each slot it reads replaced by `map(slot)` (its destination kept).
    pub fn map_srcs(&self, map: impl Fn(SlotId) -> SlotId) -> Inst {
        let mut out = self.clone();
        match &mut out {
            Inst::Load { .. } | Inst::Index { .. } | Inst::Const { .. } => {}
            Inst::Unary { src, .. }
            | Inst::Cast { src, .. }
            | Inst::Gather { index: src, .. }
            | Inst::Store { src, .. }
            | Inst::Reduce { src, .. } => *src = map(*src),
            Inst::Scan { src, coef, .. } => {
                *src = map(*src);
                if let Some(c) = coef {
                    *c = map(*c);
                }
            }
            Inst::Binary { lhs, rhs, .. } | Inst::Compare { lhs, rhs, .. } => {
                *lhs = map(*lhs);
                *rhs = map(*rhs);
            }
            Inst::Select {
                cond,
                on_true,
                on_false,
                ..
            } => {
                *cond = map(*cond);
                *on_true = map(*on_true);
                *on_false = map(*on_false);
            }
        }
        out
    }

    /// The buffer the instruction reads or writes, if any.
    pub fn buf(&self) -> Option<BufId> {
        match self {
            Inst::Load { buf, .. }
            | Inst::Gather { buf, .. }
            | Inst::Store { buf, .. }
            | Inst::Reduce { buf, .. } => Some(*buf),
            _ => None,
        }
    }
}

/// The order in which a kernel with scans runs its innermost loop dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ScanOrder {
    /// From index 0 up.
    Forward,
    /// From the last index down.
    Reverse,
}

impl ScanOrder {
    /// The order's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            ScanOrder::Forward => "forward",
            ScanOrder::Reverse => "reverse",
        }
    }
}

/// A kernel: a loop nest over `dims` running `preamble` once and `body` at every point.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LirKernel {
    /// The kernel's name (an identifier).
    pub name: String,
    /// The loop nest, outermost first.
    pub dims: Vec<usize>,
    /// How many trailing dims are reduced (at most `dims.len()`).
    pub reduce_dims: usize,
    /// For a kernel with [`Inst::Scan`]s: the order its innermost loop dim runs in, each row
    /// of it in turn with one running accumulator per scan (`None` for every other kernel). A
    /// kernel with scans reduces nothing and has at least one loop dim.
    pub scan: Option<ScanOrder>,
    /// How backends run the loop nest.
    pub schedule: Schedule,
    /// The dtype of each slot.
    pub slots: Vec<DType>,
    /// Runs once per call: constants, loads and indices with all-zero strides, ops on preamble
    /// slots.
    pub preamble: Vec<Inst>,
    /// Runs at every point of the loop nest, in row-major order.
    pub body: Vec<Inst>,
    /// A row store: the kernel's stores into one buffer land a run-time number of rows further
    /// (see [`RowStore`]).
    #[serde(default)]
    pub row_store: Option<RowStore>,
}

/// A kernel's stores into `buf` write `clamp(index, 0, rows - 1) * stride` elements further
/// than their index maps say (the MIR's [`crate::mir::RowIndex`]): `index` is an `i32` slot
/// the preamble defines, so a backend computes the shifted base address of `buf` once, when
/// the kernel starts. The kernel does not read `buf`, which was written before (the rows not
/// stored keep their values).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RowStore {
    /// The buffer the row is stored into.
    pub buf: BufId,
    /// The row, an `i32` preamble slot.
    pub index: SlotId,
    /// The number of rows the index is clamped into (at least 1).
    pub rows: usize,
    /// Elements from one row to the next.
    pub stride: usize,
}

impl RowStore {
    /// The elements the stores move for the index value `index`.
    pub fn shift(&self, index: i32) -> usize {
        let last = self.rows.saturating_sub(1);
        usize::try_from(index).unwrap_or(0).min(last) * self.stride
    }

    /// The elements the stores into `buf` move for the index value `index` under `row_store`
    /// (0 for another buffer or no row store).
    pub fn shift_of(row_store: Option<&RowStore>, buf: BufId, index: i32) -> usize {
        row_store.filter(|r| r.buf == buf).map_or(0, |r| r.shift(index))
    }
}

impl LirKernel {
    /// The declared dtype of `slot`, if it exists.
    pub fn slot_dtype(&self, slot: SlotId) -> Option<DType> {
        self.slots.get(slot.index()).copied()
    }

    /// The leading (non-reduced) dims.
    pub fn leading_dims(&self) -> &[usize] {
        &self.dims[..self.dims.len().saturating_sub(self.reduce_dims)]
    }

    /// The buffers the kernel's loads and gathers read, preamble first (with repeats).
    pub fn reads(&self) -> impl Iterator<Item = BufId> + '_ {
        self.preamble
            .iter()
            .chain(&self.body)
            .filter_map(|inst| match inst {
                Inst::Load { buf, .. } | Inst::Gather { buf, .. } => Some(*buf),
                _ => None,
            })
    }

    /// The buffers the kernel's stores and reductions write, preamble first (with repeats).
    pub fn writes(&self) -> impl Iterator<Item = BufId> + '_ {
        self.preamble
            .iter()
            .chain(&self.body)
            .filter_map(|inst| match inst {
                Inst::Store { buf, .. } | Inst::Reduce { buf, .. } => Some(*buf),
                _ => None,
            })
    }
}

/// An LIR program: buffers with their memory plan and the kernels that run in order.
///
/// Inputs are the [`Storage::Input`] buffers in buffer order, outputs the [`Storage::Output`]
/// buffers in buffer order. Arena buffers live at byte offsets in one arena of `arena_bytes`
/// bytes aligned to `arena_align`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LirProgram {
    name: String,
    buffers: Vec<LirBuffer>,
    arena_bytes: usize,
    arena_align: usize,
    kernels: Vec<LirKernel>,
    #[serde(default)]
    loops: Vec<crate::repeat::KernelLoop>,
}

impl LirProgram {
    /// Assembles a program without checking it; run [`verify`] before trusting it.
    pub fn from_parts(
        name: impl Into<String>,
        buffers: Vec<LirBuffer>,
        arena_bytes: usize,
        arena_align: usize,
        kernels: Vec<LirKernel>,
    ) -> LirProgram {
        LirProgram {
            name: name.into(),
            buffers,
            arena_bytes,
            arena_align,
            kernels,
            loops: Vec::new(),
        }
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All buffers; buffer `i` is `BufId::new(i)`.
    pub fn buffers(&self) -> &[LirBuffer] {
        &self.buffers
    }

    /// The buffer `id`, if it exists.
    pub fn buffer(&self, id: BufId) -> Option<&LirBuffer> {
        self.buffers.get(id.index())
    }

    /// The arena's size in bytes (the memory plan's peak).
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// The arena's alignment in bytes (a power of two).
    pub fn arena_align(&self) -> usize {
        self.arena_align
    }

    /// The kernels, in execution order.
    pub fn kernels(&self) -> &[LirKernel] {
        &self.kernels
    }

    /// The program with `loops` over ranges of its kernels (see [`crate::repeat`]); run
    /// `verify` before trusting it.
    pub fn with_loops(mut self, loops: Vec<crate::repeat::KernelLoop>) -> LirProgram {
        self.loops = loops;
        self
    }

    /// The loops over ranges of the kernels, outer before inner (see [`crate::repeat`]); empty
    /// for a program that runs each kernel once.
    pub fn loops(&self) -> &[crate::repeat::KernelLoop] {
        &self.loops
    }

    /// The inputs in order: `(buffer, name, type)`.
    pub fn inputs(&self) -> impl Iterator<Item = (BufId, &str, &TensorType)> + '_ {
        self.buffers
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match &b.storage {
                Storage::Input { name } => Some((BufId::new(i), name.as_str(), &b.ty)),
                _ => None,
            })
    }

    /// The outputs in order: `(buffer, name, type)`.
    pub fn outputs(&self) -> impl Iterator<Item = (BufId, &str, &TensorType)> + '_ {
        self.buffers
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match &b.storage {
                Storage::Output { name } => Some((BufId::new(i), name.as_str(), &b.ty)),
                _ => None,
            })
    }
}

/// Prints the program in the LIR text format, which [`parse`] reads back to an equal program.
impl fmt::Display for LirProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        text::print_program(&mut out, self, &|_| Vec::new())?;
        f.write_str(&out)
    }
}
