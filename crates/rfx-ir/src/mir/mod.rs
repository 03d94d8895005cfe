//! MIR: primitive ops partitioned into fused kernels.
//!
//! A [`MirProgram`] is a list of typed [`Buffer`]s (program inputs, program outputs and
//! temporaries) and a list of [`MirKernel`]s that run in order. Each kernel is an iteration
//! space (its `domain`, a [`Shape`]) and a body of per-element scalar instructions in SSA form,
//! evaluated at every point of the domain. Buffers are only touched through index maps:
//! [`MirOp::Load`] reads with per-dimension strides (so contiguous, broadcast and scalar
//! operands are all just strides, never copies), a [`Store`] writes one value per domain point,
//! and a [`Reduction`] folds a value over some axes of the domain into a buffer of the kept dims.
//!
//! Composite ops (clamp and friends) do not exist here: rfx-opt decomposes them. Programs are
//! made with [`MirProgram::from_parts`] or parsed with [`parse`]; [`verify`] states the typing
//! rules, and [`crate::interp::run_mir`] defines what a program computes. A program may repeat
//! ranges of its kernels ([`MirProgram::with_loops`], [`crate::repeat`]).

pub(crate) mod text;
pub(crate) mod verify;

pub use text::parse;
pub use verify::{VerifyError, VerifyErrorKind, VerifyErrors, VerifyLocation, verify};

use std::fmt;

use crate::ids::typed_id;
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::{BufId, DType, Scalar, Shape, TensorType};

typed_id!(
    /// A value of a MIR kernel body: the index of the instruction that defines it. Prints as
    /// `%3`. Values are scoped to their kernel.
    MirValue,
    "%"
);

/// What a buffer is to the program.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BufKind {
    /// A program input, supplied by the caller; never written.
    Input {
        /// The input's name, unique among inputs.
        name: String,
    },
    /// A program output, returned to the caller; written exactly once, by a kernel outside
    /// every loop.
    Output {
        /// The output's name, unique among outputs.
        name: String,
    },
    /// A temporary that carries values from one kernel to later ones.
    Temp,
    /// Constant data of the program (a HIR `literal`): one value per element in row-major
    /// order, each of the buffer's dtype; never written.
    Literal {
        /// The values.
        values: Vec<Scalar>,
    },
}

/// A dense, row-major buffer of the program.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Buffer {
    /// Element type and shape.
    pub ty: TensorType,
    /// Input, output or temporary.
    pub kind: BufKind,
}

/// A MIR operation. Every instruction also declares its result dtype (`MirInst::dtype`); the
/// rules below say which dtype that must be.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum MirOp {
    /// Reads element `offset + sum(idx[d] * strides[d])` (counted in elements) of the
    /// row-major buffer `buf` at domain point `idx`. No operands; one stride per domain
    /// dimension; a stride of 0 broadcasts along that dimension; the offset starts a window
    /// (a slice). The result dtype is the buffer's dtype. The largest index reached must lie
    /// inside the buffer.
    Load {
        /// The buffer read.
        buf: BufId,
        /// Elements to advance per step of each domain dimension.
        strides: Vec<usize>,
        /// The element read at the domain's first point.
        offset: usize,
    },
    /// Reads element `clamp(i, 0, len - 1)` of buffer `buf` (of `len` elements, at least one),
    /// where `i` is the one operand, an `i32`, or an `f64` truncated toward zero first (NaN
    /// reads element 0; an `f64` kernel then needs no `i32` lanes): an indexed read that can
    /// never leave the buffer (JAX's clamping gather). The result dtype is the buffer's dtype.
    Gather {
        /// The buffer read.
        buf: BufId,
    },
    /// The number `sum(idx[d] * strides[d])` at domain point `idx`, in the result dtype: an
    /// `iota` read through the same index maps as a load. No operands; one stride per domain
    /// dimension; numeric result dtype, which must hold the largest value reached exactly
    /// ([`crate::semantics::max_exact_index`]).
    Index {
        /// Added per step of each domain dimension.
        strides: Vec<usize>,
    },
    /// A literal, the same at every point. No operands; the result dtype is the literal's.
    Const(Scalar),
    /// One operand; the op must accept its dtype ([`UnaryOp::accepts`]); the result has it.
    Unary(UnaryOp),
    /// Two operands of one dtype that the op accepts; the result has that dtype.
    Binary(BinaryOp),
    /// Two operands of one dtype that the comparison accepts; the result is `bool`.
    Compare(CmpOp),
    /// `select(cond, on_true, on_false)`: `cond` is `bool`, the other two share the result
    /// dtype (any). Only the selected operand's value matters.
    Select,
    /// One operand of any dtype converted to the result dtype with [`crate::semantics::cast`].
    Cast,
    /// The running fold of the one operand along domain axis `axis` ([`ScanOp`]): at point
    /// `idx`, the fold, from the op's identity, of the operand at the points that differ from
    /// `idx` only along `axis`, from coordinate 0 up to `idx[axis]` in order (with `reverse`,
    /// from the last coordinate down to `idx[axis]`). The op must accept the operand's dtype;
    /// the result has it. Every scan of a kernel has the same `axis` and `reverse`, and a
    /// kernel with a scan has no reductions: backends run the scanned axis in order, one
    /// running accumulator per scan and line. [`ScanOp::Linear`] takes a second operand, the
    /// coefficient, of the first one's dtype.
    Scan {
        /// The running fold.
        op: ScanOp,
        /// The scanned domain axis.
        axis: usize,
        /// Fold from the axis's last coordinate toward its first.
        reverse: bool,
    },
}

impl MirOp {
    /// The op's name in the text format.
    pub fn name(&self) -> &'static str {
        match self {
            MirOp::Load { .. } => "load",
            MirOp::Gather { .. } => "gather",
            MirOp::Index { .. } => "index",
            MirOp::Const(_) => "const",
            MirOp::Unary(op) => op.name(),
            MirOp::Binary(op) => op.name(),
            MirOp::Compare(op) => op.name(),
            MirOp::Select => "select",
            MirOp::Cast => "cast",
            MirOp::Scan { op, .. } => op.name(),
        }
    }

    /// The number of operands the op takes.
    pub fn arity(&self) -> usize {
        match self {
            MirOp::Load { .. } | MirOp::Index { .. } | MirOp::Const(_) => 0,
            MirOp::Unary(_) | MirOp::Cast | MirOp::Gather { .. } => 1,
            MirOp::Scan { op, .. } => op.arity(),
            MirOp::Binary(_) | MirOp::Compare(_) => 2,
            MirOp::Select => 3,
        }
    }
}

/// One instruction of a kernel body: a scalar op applied at every domain point.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct MirInst {
    /// The operation.
    pub op: MirOp,
    /// The operands, each defined by an earlier instruction of the same body.
    pub args: Vec<MirValue>,
    /// The result dtype.
    pub dtype: DType,
}

/// Writes `value` at every domain point into `buf`, which has the value's dtype.
///
/// Without a region, the points are written in row-major order of the domain and the buffer
/// has as many elements as the domain. With one, point `idx` is written at element
/// `offset + sum(idx[d] * strides[d])`: the kernel fills one part of the buffer (a part of a
/// concatenation, stored where it lies in the whole). The stores with regions into one buffer,
/// of one kernel or several, write each of its elements exactly once between them, and nothing
/// else writes it; it is read only after the last of them — except *row stores*, regions with a
/// [`RowIndex`]: they update one row, chosen when the kernel runs, of a buffer written before
/// (the other rows keep their values), any number of times (a loop's history carry, one row
/// per iteration), and take no part in that count.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Store {
    /// The buffer written.
    pub buf: BufId,
    /// The value stored.
    pub value: MirValue,
    /// The part of the buffer written, or `None` for all of it in row-major order.
    #[serde(default)]
    pub region: Option<Region>,
}

/// Where a [`Store`] writes a kernel's points into part of its buffer: an index map like a
/// [`MirOp::Load`]'s.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Region {
    /// Elements to advance per step of each domain dimension (one stride each; distinct points
    /// must reach distinct elements).
    pub strides: Vec<usize>,
    /// The element written at the domain's first point (before the row's offset).
    pub offset: usize,
    /// A run-time row: the region moves `clamp(index, 0, rows - 1) * stride` elements further.
    #[serde(default)]
    pub row: Option<RowIndex>,
}

/// The run-time part of a row store's offset ([`Region::row`]): element 0 of `index`, a
/// one-element `i32` buffer written before the kernel runs (read like a load), clamped into
/// `0..rows` as JAX clamps a dynamic index, times `stride` elements. A kernel has at most one
/// row store, and does not read the buffer it writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RowIndex {
    /// The one-element `i32` buffer holding the row.
    pub index: BufId,
    /// The number of rows the index is clamped into (at least 1).
    pub rows: usize,
    /// Elements from one row to the next.
    pub stride: usize,
}

impl RowIndex {
    /// The elements the region moves for the index value `index`.
    pub fn shift(&self, index: i32) -> usize {
        let last = self.rows.saturating_sub(1);
        usize::try_from(index).unwrap_or(0).min(last) * self.stride
    }
}

impl Store {
    /// A store of `value` into all of `buf`, in row-major order of the domain.
    pub fn whole(buf: BufId, value: MirValue) -> Store {
        Store {
            buf,
            value,
            region: None,
        }
    }

    /// The row index of a row store ([`Region::row`]).
    pub fn row(&self) -> Option<&RowIndex> {
        self.region.as_ref().and_then(|r| r.row.as_ref())
    }

    /// The element of the buffer written at domain point `idx`, whose row-major index in the
    /// domain is `point`; a row store's run-time shift ([`RowIndex::shift`]) comes on top.
    pub fn element(&self, point: usize, idx: &[usize]) -> usize {
        match &self.region {
            None => point,
            Some(region) => idx
                .iter()
                .zip(&region.strides)
                .fold(region.offset, |acc, (&i, &s)| acc + i * s),
        }
    }
}

/// Reduces `value` over `axes` of the domain into `buf`.
///
/// The buffer holds the kept (non-reduced) dimensions in row-major order: its element count is
/// the product of the kept dims and its dtype the value's (keepdims is only a matter of the
/// buffer's declared shape). The reference interpreter combines the points of each reduced
/// slice in row-major order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Reduction {
    /// The reduction; it must accept the value's dtype.
    pub op: ReduceOp,
    /// The value reduced.
    pub value: MirValue,
    /// The reduced domain axes: sorted, unique, each below the domain's rank.
    pub axes: Vec<usize>,
    /// The buffer written.
    pub buf: BufId,
}

/// A fused kernel: an SSA body evaluated at every point of `domain`, and what it writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct MirKernel {
    /// The kernel's name (an identifier; need not be unique).
    pub name: String,
    /// The iteration space.
    pub domain: Shape,
    /// The instructions; instruction `i` defines value `%i`.
    pub body: Vec<MirInst>,
    /// Elementwise writes.
    pub stores: Vec<Store>,
    /// Reduction epilogues.
    pub reductions: Vec<Reduction>,
}

impl MirKernel {
    /// The instruction defining `value`, if it exists.
    pub fn inst(&self, value: MirValue) -> Option<&MirInst> {
        self.body.get(value.index())
    }

    /// The scanned axis and direction (`reverse`) of the kernel's first scan, if it has one
    /// (the verifier checks that every scan of a kernel has the same).
    pub fn scan(&self) -> Option<(usize, bool)> {
        self.body.iter().find_map(|inst| match inst.op {
            MirOp::Scan { axis, reverse, .. } => Some((axis, reverse)),
            _ => None,
        })
    }

    /// The buffers this kernel reads, in body order (with repeats), then the row indices of
    /// its row stores.
    pub fn reads(&self) -> impl Iterator<Item = BufId> + '_ {
        self.body
            .iter()
            .filter_map(|inst| match &inst.op {
                MirOp::Load { buf, .. } | MirOp::Gather { buf } => Some(*buf),
                _ => None,
            })
            .chain(self.stores.iter().filter_map(|s| s.row().map(|r| r.index)))
    }

    /// The buffers this kernel writes: stores first, then reductions.
    pub fn writes(&self) -> impl Iterator<Item = BufId> + '_ {
        self.stores
            .iter()
            .map(|s| s.buf)
            .chain(self.reductions.iter().map(|r| r.buf))
    }
}

/// A MIR program: buffers and the kernels that run over them, in order.
///
/// The program's inputs are its [`BufKind::Input`] buffers in buffer order, its outputs the
/// [`BufKind::Output`] buffers in buffer order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct MirProgram {
    name: String,
    buffers: Vec<Buffer>,
    kernels: Vec<MirKernel>,
    #[serde(default)]
    loops: Vec<crate::repeat::KernelLoop>,
}

impl MirProgram {
    /// Assembles a program without checking it; run [`verify`] before trusting it.
    pub fn from_parts(name: impl Into<String>, buffers: Vec<Buffer>, kernels: Vec<MirKernel>) -> MirProgram {
        MirProgram {
            name: name.into(),
            buffers,
            kernels,
            loops: Vec::new(),
        }
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All buffers; buffer `i` is `BufId::new(i)`.
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// The buffer `id`, if it exists.
    pub fn buffer(&self, id: BufId) -> Option<&Buffer> {
        self.buffers.get(id.index())
    }

    /// The kernels, in execution order.
    pub fn kernels(&self) -> &[MirKernel] {
        &self.kernels
    }

    /// The program with `loops` over ranges of its kernels (see [`crate::repeat`]); run
    /// `verify` before trusting it.
    pub fn with_loops(mut self, loops: Vec<crate::repeat::KernelLoop>) -> MirProgram {
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
            .filter_map(|(i, b)| match &b.kind {
                BufKind::Input { name } => Some((BufId::new(i), name.as_str(), &b.ty)),
                _ => None,
            })
    }

    /// The outputs in order: `(buffer, name, type)`.
    pub fn outputs(&self) -> impl Iterator<Item = (BufId, &str, &TensorType)> + '_ {
        self.buffers
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match &b.kind {
                BufKind::Output { name } => Some((BufId::new(i), name.as_str(), &b.ty)),
                _ => None,
            })
    }

    /// The number of body instructions over all kernels.
    pub fn op_count(&self) -> usize {
        self.kernels.iter().map(|k| k.body.len()).sum()
    }
}

/// Prints the program in the MIR text format, which [`parse`] reads back to an equal program.
impl fmt::Display for MirProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        text::print_program(&mut out, self, &|_| Vec::new())?;
        f.write_str(&out)
    }
}
