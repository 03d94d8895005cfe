//! Windows of concatenations read from their parts.
//!
//! A traced `concat` (every `stack`, block matrix and vector of scalars) is a chain of
//! `select`s by position along one axis over `pad`s (see [`super::regions`]). Before fusion
//! partitions a kernel, this pass rewrites two things about them:
//!
//! - A `slice` whose window lies inside one part (a quaternion's component, a block of a
//!   block matrix) is that part's window: the part itself when the window is all of it, a
//!   splat for a constant part, recursively through nested concatenations. Fused as it stood,
//!   the window computed every part at its points and chose one, and a concatenation read
//!   only through windows was stored (by a kernel of its own over the whole) to be read back.
//! - A part of lower rank than the concatenation (an unbatched block of a batched matrix,
//!   which the chain broadcast) is broadcast to the concatenation's rank where it is placed,
//!   so that fusion can store the concatenation part by part (`regions` places parts of the
//!   whole's rank only).
//! - An output that is an elementwise op (`unary`, `binary`, `cast`) of a concatenation of its
//!   shape, its other operands one value along the concatenation's axis (a negated Jacobian
//!   block matrix, a scaled stack), is the concatenation of the op of each part, recursively
//!   through parts that are concatenations along another axis. Fusion then stores it part by
//!   part like any stored concatenation, each part in the loop nest that computes (and, when
//!   the operand is stored too, stores) the operand's part, instead of a kernel of its own
//!   reading the operand back; a constant part gives the op's constant, folded when the op is
//!   exact.
//!
//! Each element is the same element of the same value as before, so the results are the same
//! bits.

use std::collections::{HashMap, HashSet};

use rfx_ir::hir::{Builder, Kernel, Op, ValueId};
use rfx_ir::{BinaryOp, CmpOp, DType, Scalar, TensorType, semantics};

use super::regions::{fills_other_axes, position_split};
use crate::error::OptError;
use crate::passes::{eliminate_dead_ops, finish_rebuilt, live_values, mapped_operands};

/// One part of a concatenation: positions `start..start + len` along its axis.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start: usize,
    len: usize,
    source: Source,
}

/// What a part is: a value (of the concatenation's rank or lower, its trailing axes'
/// extents those of the concatenation except along the axis) or a constant.
#[derive(Clone, Copy, Debug)]
enum Source {
    Value(ValueId),
    Const(Scalar),
}

/// A concatenation along `axis`: its parts in order, covering the axis.
#[derive(Clone, Debug)]
struct Pieces {
    axis: usize,
    pieces: Vec<Piece>,
}

impl Pieces {
    /// The part holding positions `start..start + len`, if one does.
    fn holding(&self, start: usize, len: usize) -> Option<&Piece> {
        self.pieces
            .iter()
            .find(|p| p.start <= start && start + len <= p.start + p.len)
    }
}

/// The constant `value` is, if it is one (a constant, or one broadcast).
fn constant(kernel: &Kernel, value: ValueId) -> Option<Scalar> {
    let node = kernel.node(value)?;
    match node.op {
        Op::Const(c) => Some(c),
        Op::BroadcastTo => constant(kernel, *node.args.first()?),
        _ => None,
    }
}

/// The first and one past the last position flagged in `within`, when they are contiguous.
fn contiguous(within: &[bool]) -> Option<(usize, usize)> {
    let lo = within.iter().position(|&w| w)?;
    let hi = within.iter().rposition(|&w| w)? + 1;
    within[lo..hi].iter().all(|&w| w).then_some((lo, hi))
}

/// The parts of `value` when it is a concatenation: a chain of `select`s by position along one
/// axis over `pad`s that place each part exactly on the positions chosen for it, and constants
/// on a range of positions. The chain's nodes may have lower rank than `value` (broadcast into
/// it). A part that is itself a concatenation along the same axis, of the same rank, is
/// flattened into its parts.
fn decompose(kernel: &Kernel, value: ValueId) -> Option<Pieces> {
    let dims = kernel.value_type(value)?.shape.dims().to_vec();
    let rank = dims.len();
    let (axis, holds, ..) = position_split(kernel, value)?;
    let mut pieces = Vec::new();
    let mut pending = vec![(value, vec![true; holds.len()])];
    while let Some((v, within)) = pending.pop() {
        let (lo, hi) = contiguous(&within)?;
        if let Some(c) = constant(kernel, v) {
            pieces.push(Piece {
                start: lo,
                len: hi - lo,
                source: Source::Const(c),
            });
            continue;
        }
        let node = kernel.node(v)?;
        let vdims = node.ty.shape.dims();
        let offset = rank.checked_sub(vdims.len())?;
        if vdims != &dims[offset..] || axis < offset {
            return None;
        }
        let own_axis = axis - offset;
        match &node.op {
            Op::Select => {
                let (a, holds, on_true, on_false) = position_split(kernel, v)?;
                if a != own_axis {
                    return None;
                }
                let chosen = |want: bool| -> Vec<bool> {
                    within.iter().zip(&holds).map(|(&w, &h)| w && h == want).collect()
                };
                for (operand, chosen) in [(on_true, chosen(true)), (on_false, chosen(false))] {
                    if chosen.iter().any(|&c| c) {
                        pending.push((operand, chosen));
                    }
                }
            }
            Op::Pad { low } => {
                let &part = node.args.first()?;
                let part_dims = kernel.value_type(part)?.shape.dims();
                let start = *low.get(own_axis)?;
                let len = *part_dims.get(own_axis)?;
                let exact = (lo, hi) == (start, start + len)
                    && part_dims.len() == vdims.len()
                    && fills_other_axes(low, part_dims, vdims, own_axis);
                if !exact {
                    return None;
                }
                let nested = (offset == 0)
                    .then(|| decompose(kernel, part))
                    .flatten()
                    .filter(|inner| inner.axis == axis);
                match nested {
                    Some(inner) => pieces.extend(inner.pieces.into_iter().map(|p| Piece {
                        start: p.start + start,
                        ..p
                    })),
                    None => pieces.push(Piece {
                        start,
                        len,
                        source: Source::Value(part),
                    }),
                }
            }
            _ => return None,
        }
    }
    pieces.sort_by_key(|p| p.start);
    let mut next = 0;
    for p in &pieces {
        if p.start != next || p.len == 0 {
            return None;
        }
        next += p.len;
    }
    (next == dims[axis] && pieces.len() > 1).then_some(Pieces { axis, pieces })
}

/// Rewrites `kernel` so that windows inside one part of a concatenation read the part, and
/// parts of lower rank are broadcast where they are placed (see the module documentation).
/// `None` when nothing changes.
pub(super) fn read_by_part(kernel: &Kernel) -> Result<Option<Kernel>, OptError> {
    let live = live_values(kernel);
    let chains: Vec<Option<Pieces>> = kernel
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let candidate = live[i] && matches!(node.op, Op::Select);
            candidate.then(|| decompose(kernel, ValueId::new(i))).flatten()
        })
        .collect();
    if chains.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut r = Rewriter {
        b: Builder::new(kernel.name()),
        chains: HashMap::new(),
        changed: false,
    };
    let outputs: HashSet<ValueId> = kernel.outputs().iter().map(|o| o.value).collect();
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    for (index, node) in kernel.nodes().iter().enumerate() {
        if let Op::Input { name } = &node.op {
            map[index] = Some(
                r.b.input(name.clone(), node.ty.clone())
                    .map_err(OptError::Rebuild)?,
            );
            continue;
        }
        if !live[index] {
            continue;
        }
        let args = mapped_operands(&map, &node.args)?;
        let value = if let Some(pieces) = &chains[index] {
            r.chain(pieces, &map, node, &args)?
        } else if outputs.contains(&ValueId::new(index))
            && let Some(value) = r.map_parts(kernel, node, &args)?
        {
            r.changed = true;
            value
        } else if let (Op::Slice { starts }, Some(&x)) = (&node.op, args.first())
            && r.inside_one_part(x, starts, node.ty.shape.dims())
        {
            r.changed = true;
            r.slice(x, starts, node.ty.shape.dims())?
        } else {
            r.b.copy(&node.op, &args, &node.ty).map_err(OptError::Rebuild)?
        };
        map[index] = Some(value);
    }
    if !r.changed {
        return Ok(None);
    }
    let rebuilt = finish_rebuilt(r.b, &map, kernel.outputs())?;
    // The chains and windows read no more are dropped.
    eliminate_dead_ops(&rebuilt).map(Some)
}

struct Rewriter {
    b: Builder,
    /// The concatenations of the rebuilt kernel, with their parts.
    chains: HashMap<ValueId, Pieces>,
    /// Whether anything was rewritten.
    changed: bool,
}

impl Rewriter {
    fn dims(&self, v: ValueId) -> Result<Vec<usize>, OptError> {
        Ok(self
            .b
            .value_type(v)
            .map_err(OptError::Rebuild)?
            .shape
            .dims()
            .to_vec())
    }

    /// Whether the window of `x` at `starts` of extents `window` lies inside one part of
    /// `x`, a concatenation.
    fn inside_one_part(&self, x: ValueId, starts: &[usize], window: &[usize]) -> bool {
        self.chains
            .get(&x)
            .is_some_and(|chain| match (starts.get(chain.axis), window.get(chain.axis)) {
                (Some(&s), Some(&w)) => chain.holding(s, w).is_some(),
                _ => false,
            })
    }

    /// An original concatenation: copied, its parts recorded; rebuilt with its parts of lower
    /// rank broadcast where they are placed.
    fn chain(
        &mut self,
        pieces: &Pieces,
        map: &[Option<ValueId>],
        node: &rfx_ir::hir::Node,
        args: &[ValueId],
    ) -> Result<ValueId, OptError> {
        let rank = node.ty.shape.rank();
        let mut mapped = pieces.clone();
        let mut lower_rank = false;
        for p in &mut mapped.pieces {
            if let Source::Value(v) = p.source {
                let new = map
                    .get(v.index())
                    .copied()
                    .flatten()
                    .ok_or(OptError::InvalidValue(v))?;
                lower_rank |= self.dims(new)?.len() < rank;
                p.source = Source::Value(new);
            }
        }
        if lower_rank {
            self.changed = true;
            return self.assemble(mapped, &node.ty);
        }
        let v = self.b.copy(&node.op, args, &node.ty).map_err(OptError::Rebuild)?;
        self.chains.insert(v, mapped);
        Ok(v)
    }

    /// The window of `x` at `starts` of extents `window` (of `x`'s rank): a window inside one
    /// part of a concatenation is that part's window, recursively.
    fn slice(&mut self, x: ValueId, starts: &[usize], window: &[usize]) -> Result<ValueId, OptError> {
        let dims = self.dims(x)?;
        if starts.iter().all(|&s| s == 0) && window == dims.as_slice() {
            return Ok(x);
        }
        if let Some(chain) = self.chains.get(&x)
            && let (Some(&s), Some(&w)) = (starts.get(chain.axis), window.get(chain.axis))
            && let Some(&piece) = chain.holding(s, w)
        {
            let axis = chain.axis;
            return match piece.source {
                Source::Const(c) => Ok(self.b.constant(c, window.to_vec())),
                Source::Value(p) => {
                    // A part of lower rank covers the trailing axes (`decompose`).
                    let offset = dims.len().saturating_sub(self.dims(p)?.len());
                    let mut inner_starts = starts[offset..].to_vec();
                    if let Some(start) = axis.checked_sub(offset).and_then(|a| inner_starts.get_mut(a)) {
                        *start -= piece.start;
                    }
                    let inner = self.slice(p, &inner_starts, &window[offset..])?;
                    if offset == 0 {
                        Ok(inner)
                    } else {
                        self.b
                            .broadcast_to(inner, window.to_vec())
                            .map_err(OptError::Rebuild)
                    }
                }
            };
        }
        self.b
            .slice(x, starts, window.to_vec())
            .map_err(OptError::Rebuild)
    }

    /// An output `node` (operands `args`) that is an elementwise op of one operand of its
    /// shape that is a concatenation, every other operand one value along the
    /// concatenation's axis: the concatenation of the op of each part (see
    /// [`Rewriter::apply_to_parts`]). `None` when `node` is anything else.
    fn map_parts(
        &mut self,
        kernel: &Kernel,
        node: &rfx_ir::hir::Node,
        args: &[ValueId],
    ) -> Result<Option<ValueId>, OptError> {
        if !matches!(node.op, Op::Unary(_) | Op::Binary(_) | Op::Cast) {
            return Ok(None);
        }
        let dims = node.ty.shape.dims().to_vec();
        let Some(at) = args
            .iter()
            .position(|a| self.chains.contains_key(a) && self.dims(*a).is_ok_and(|d| d == dims))
        else {
            return Ok(None);
        };
        let others: Vec<Option<Scalar>> = node.args.iter().map(|&a| constant(kernel, a)).collect();
        self.apply_to_parts(node, args, at, &others)
    }

    /// The op of `node` applied to each part of `args[at]`, a concatenation of `node`'s
    /// extents, placed where the part lies (a part that is itself a concatenation along
    /// another axis is split in turn), when every other operand is one value along the
    /// concatenation's axis (broadcast along it, so each part reads all of it). Each element
    /// is the op of the same operands as before: the same bits. A constant part gives the
    /// op's constant when the other operands are constants and the op is exact (no
    /// transcendental, whose backends approximate it), else the op computed on it. `others`
    /// holds the operands that are constants.
    fn apply_to_parts(
        &mut self,
        node: &rfx_ir::hir::Node,
        args: &[ValueId],
        at: usize,
        others: &[Option<Scalar>],
    ) -> Result<Option<ValueId>, OptError> {
        let Some(chain) = args.get(at).and_then(|a| self.chains.get(a)).cloned() else {
            return Ok(None);
        };
        let dims = self.dims(args[at])?;
        let rank = dims.len();
        for (k, &other) in args.iter().enumerate() {
            let odims = self.dims(other)?;
            let offset = rank.checked_sub(odims.len());
            let varies = match offset {
                Some(offset) => chain
                    .axis
                    .checked_sub(offset)
                    .and_then(|a| odims.get(a))
                    .is_some_and(|&d| d != 1),
                None => true,
            };
            if k != at && varies {
                return Ok(None);
            }
        }
        let folds = match node.op {
            Op::Unary(op) => !op.is_transcendental(),
            Op::Binary(op) => !matches!(op, BinaryOp::Pow | BinaryOp::Atan2),
            _ => true,
        };
        let mut mapped = chain.clone();
        for piece in &mut mapped.pieces {
            let mut part_dims = dims.clone();
            part_dims[chain.axis] = piece.len;
            let ty = TensorType::new(node.ty.dtype, part_dims.clone());
            if let Source::Const(c) = piece.source
                && folds
                && let Some(folded) = fold(&node.op, others, at, c, node.ty.dtype)
            {
                piece.source = Source::Const(folded);
                continue;
            }
            let part = match piece.source {
                Source::Const(c) => self.b.constant(c, part_dims.clone()),
                Source::Value(p) if self.dims(p)? == part_dims => p,
                Source::Value(p) => self
                    .b
                    .broadcast_to(p, part_dims.clone())
                    .map_err(OptError::Rebuild)?,
            };
            let mut part_args = args.to_vec();
            part_args[at] = part;
            let nested = match self.chains.get(&part) {
                Some(inner) if inner.axis != chain.axis => {
                    let part_node = rfx_ir::hir::Node {
                        op: node.op.clone(),
                        args: part_args.clone(),
                        ty: ty.clone(),
                    };
                    self.apply_to_parts(&part_node, &part_args, at, others)?
                }
                _ => None,
            };
            let value = match nested {
                Some(v) => v,
                None => self
                    .b
                    .copy(&node.op, &part_args, &ty)
                    .map_err(OptError::Rebuild)?,
            };
            piece.source = Source::Value(value);
        }
        self.assemble(mapped, &node.ty).map(Some)
    }

    /// The concatenation of `pieces` as a chain of `select`s by position over `pad`s, each
    /// part of lower rank broadcast to the chain's rank first (positions counted as `concat`
    /// counts them); recorded with its parts.
    fn assemble(&mut self, pieces: Pieces, ty: &TensorType) -> Result<ValueId, OptError> {
        let dims = ty.shape.dims().to_vec();
        let axis = pieces.axis;
        let extent = dims
            .get(axis)
            .copied()
            .ok_or(OptError::InvalidValue(ValueId::new(0)))?;
        let count = if ty.dtype.is_float() && extent <= semantics::max_exact_index(ty.dtype) {
            ty.dtype
        } else {
            DType::I32
        };
        let iota = self
            .b
            .iota(count, dims[axis..].to_vec(), 0)
            .map_err(OptError::Rebuild)?;
        let mut placed = Vec::with_capacity(pieces.pieces.len());
        for piece in &pieces.pieces {
            placed.push(match piece.source {
                Source::Const(c) => self.b.constant(c, dims.clone()),
                Source::Value(p) => {
                    let mut part_dims = dims.clone();
                    part_dims[axis] = piece.len;
                    let full = if self.dims(p)? == part_dims {
                        p
                    } else {
                        self.b.broadcast_to(p, part_dims).map_err(OptError::Rebuild)?
                    };
                    let mut low = vec![0; dims.len()];
                    low[axis] = piece.start;
                    self.b.pad(full, &low, dims.clone()).map_err(OptError::Rebuild)?
                }
            });
        }
        let invalid = || OptError::InvalidValue(ValueId::new(0));
        let mut acc = placed.pop().ok_or_else(invalid)?;
        for (piece, value) in pieces.pieces.iter().zip(placed).rev() {
            let end = semantics::index_value(piece.start + piece.len, count).ok_or_else(invalid)?;
            let bound = self.b.scalar(end);
            let cond = self
                .b
                .compare(CmpOp::Lt, iota, bound)
                .map_err(OptError::Rebuild)?;
            acc = self.b.select(cond, value, acc).map_err(OptError::Rebuild)?;
        }
        self.chains.insert(acc, pieces);
        Ok(acc)
    }
}

/// `op` of the constants `others` with `c` in place of operand `at`, in `dtype`.
fn fold(op: &Op, others: &[Option<Scalar>], at: usize, c: Scalar, dtype: DType) -> Option<Scalar> {
    let operand = |k: usize| {
        if k == at {
            Some(c)
        } else {
            others.get(k).copied().flatten()
        }
    };
    match *op {
        Op::Unary(op) => semantics::unary(op, c),
        Op::Binary(op) => semantics::binary(op, operand(0)?, operand(1)?),
        Op::Cast => Some(semantics::cast(c, dtype)),
        _ => None,
    }
}
