//! Constant folding at written-out positions: which body instructions are constants, aliases or fixed loads there.

use super::*;

/// What [`Gen::emit_body`] does with one body instruction at a position where some values are
/// constants ([`Gen::fold_plan`]).
#[derive(Clone, Debug)]
pub(super) enum Fold {
    /// Emit it.
    Emit,
    /// Nothing live reads it: emit nothing.
    Skip,
    /// Its value is these constants, one per lane.
    Constant(Vec<Scalar>),
    /// A select whose condition is the same constant in every lane: its value is this slot's.
    Alias(SlotId),
    /// A gather whose index is a constant in every lane: a load of these elements (already
    /// clamped), one per lane.
    GatherAt(Vec<usize>),
    /// A gather whose index is a row's offset (this value, of a known range) plus a constant
    /// per lane, inside the buffer at every row: a load of these elements past the offset.
    GatherPast(Value, Vec<i64>),
}

impl<'k> Gen<'_, 'k> {
    /// What to do with each body instruction at position `at` (`w` lanes) of the row whose
    /// pointers are `offs`, when some values there are constants: a position written out at a
    /// constant column (a small block, a concatenation's row) knows its indices lane by lane,
    /// and the elements of literal tables it reads, so the comparisons of a position with a
    /// bound, the selects they drive and lookups in literal tables are decided at compile time;
    /// a gather at a known index is a load of a known element (no clamp), and what only an
    /// unselected arm reads is not emitted at all (its loads included, which Cranelift would
    /// keep). `None` when nothing folds (a loop's positions): the body is emitted as it is.
    /// Folded values are computed by `rfx_ir::semantics`, the interpreters' definitions, and
    /// only for exactly rounded ops (whose CPU code gives those bits): indices, literals,
    /// comparisons, `not`, `and`, `or`, `neg`, `abs`, `floor`, `ceil`, `round`, `sqrt`, `add`,
    /// `sub`, `mul`, `div`, `min`, `max`, casts and selects.
    pub(super) fn fold_plan(&self, w: u8, at: Value, offs: &[Value]) -> Option<Vec<Fold>> {
        let kernel = self.kernel();
        if kernel.body.iter().any(|inst| matches!(inst, Inst::Scan { .. })) {
            return None;
        }
        let lanes = usize::from(w.max(1));
        let pos = FoldAt {
            lanes,
            at: match self.known_of(at) {
                Some(Known::Const(p)) => Some(p),
                _ => None,
            },
            offs,
        };
        let slot_count = kernel.slots.len();
        // The preamble's constants, by slot.
        let mut pre_known: Vec<Option<Vec<Scalar>>> = vec![None; slot_count];
        for inst in &kernel.preamble {
            if let Inst::Const { dst, value } = inst
                && let Some(slot) = pre_known.get_mut(dst.index())
            {
                *slot = Some(vec![*value; lanes]);
            }
        }
        let n = kernel.body.len();
        // The body instruction whose value each slot holds (`None`: the preamble's).
        let mut current: Vec<Option<usize>> = vec![None; slot_count];
        let mut values: Vec<Option<Vec<Scalar>>> = vec![None; n];
        let mut chosen: Vec<Option<SlotId>> = vec![None; n];
        let mut gathered: Vec<Option<Vec<usize>>> = vec![None; n];
        // Values that are an index offset of known range plus a constant per lane.
        let mut affine: Vec<Option<(Value, Vec<i64>)>> = vec![None; n];
        let mut past: Vec<Option<(Value, Vec<i64>)>> = vec![None; n];
        let mut operands: Vec<Vec<Option<usize>>> = Vec::with_capacity(n);
        let mut folds = false;
        for (i, inst) in kernel.body.iter().enumerate() {
            let value_of = |slot: SlotId| -> Option<Vec<Scalar>> {
                match current.get(slot.index()).copied().flatten() {
                    Some(j) => values[j].clone(),
                    None => pre_known.get(slot.index()).cloned().flatten(),
                }
            };
            let lanewise =
                |f: &dyn Fn(usize) -> Option<Scalar>| -> Option<Vec<Scalar>> { (0..lanes).map(f).collect() };
            operands.push(
                inst.srcs()
                    .iter()
                    .map(|s| current.get(s.index()).copied().flatten())
                    .collect(),
            );
            let access = self.fx.info.access_of.get(i).copied().flatten();
            let affine_of = |slot: SlotId| match current.get(slot.index()).copied().flatten() {
                Some(j) => affine[j].clone(),
                None => None,
            };
            let this_affine = match inst {
                Inst::Index { dst, .. }
                    if matches!(kernel.slots.get(dst.index()), Some(DType::I32 | DType::F64)) =>
                {
                    access.and_then(|k| self.affine_index(&pos, k))
                }
                Inst::Binary {
                    op: op @ (BinaryOp::Add | BinaryOp::Sub),
                    lhs,
                    rhs,
                    ..
                } => match (affine_of(*lhs), affine_of(*rhs)) {
                    (Some((row, a)), None) => integral_offsets(value_of(*rhs)).map(|b| {
                        let sign = if *op == BinaryOp::Sub { -1 } else { 1 };
                        (row, a.iter().zip(&b).map(|(x, y)| x + sign * y).collect())
                    }),
                    (None, Some((row, b))) if *op == BinaryOp::Add => integral_offsets(value_of(*lhs))
                        .map(|a| (row, a.iter().zip(&b).map(|(x, y)| x + y).collect())),
                    _ => None,
                },
                _ => None,
            };
            values[i] = match inst {
                Inst::Const { value, .. } => Some(vec![*value; lanes]),
                Inst::Index { dst, .. } => {
                    access.and_then(|k| self.index_lanes(&pos, k, *kernel.slots.get(dst.index())?))
                }
                Inst::Load { buf, .. } => access.and_then(|k| self.literal_lanes(&pos, k, *buf)),
                Inst::Unary { .. } | Inst::Cast { .. } | Inst::Compare { .. } | Inst::Binary { .. } => {
                    fold_exact(inst, &kernel.slots, lanes, &value_of)
                }
                Inst::Select {
                    cond,
                    on_true,
                    on_false,
                    ..
                } => {
                    let c = value_of(*cond);
                    let (t, f) = (value_of(*on_true), value_of(*on_false));
                    match c.as_deref() {
                        Some([Scalar::Bool(first), rest @ ..])
                            if rest.iter().all(|&x| x == Scalar::Bool(*first)) =>
                        {
                            let pick = if *first { *on_true } else { *on_false };
                            chosen[i] = Some(pick);
                            folds = true;
                            if *first { t } else { f }
                        }
                        Some(c) => match (t, f) {
                            (Some(t), Some(f)) => lanewise(&|l| {
                                Some(rfx_ir::semantics::select(c[l] == Scalar::Bool(true), t[l], f[l]))
                            }),
                            _ => None,
                        },
                        None => None,
                    }
                }
                Inst::Gather { buf, index, .. } => {
                    let fold = self.gather_fold(*buf, value_of(*index), affine_of(*index));
                    folds |= fold.past.is_some() || fold.elements.is_some();
                    past[i] = fold.past;
                    match (fold.elements, fold.literal) {
                        (Some(elements), None) => {
                            gathered[i] = Some(elements);
                            None
                        }
                        (_, Some(values)) => values,
                        (None, None) => None,
                    }
                }
                _ => None,
            };
            affine[i] = this_affine;
            folds |= values[i].is_some() && !matches!(inst, Inst::Const { .. });
            if let Some(dst) = inst.dst()
                && let Some(slot) = current.get_mut(dst.index())
            {
                *slot = Some(i);
            }
        }
        if !folds {
            return None;
        }
        Some(live_folds(
            &kernel.body,
            &operands,
            FoldFacts {
                values,
                chosen,
                gathered,
                past,
            },
        ))
    }

    fn known_of(&self, v: Value) -> Option<Known> {
        self.caches.known.borrow().get(&v).copied()
    }

    /// Element `first` of access `k` in each lane at `pos` (its position's elements, or every
    /// lane's when the access does not advance along the vector).
    fn lane_elements(&self, pos: &FoldAt<'_>, k: usize, first: i64) -> Option<Vec<i64>> {
        let stride = i64::try_from(self.inner_stride(k)).ok()?;
        if stride == 0 {
            return Some(vec![first; pos.lanes]);
        }
        let p = pos.at?;
        Some((0..pos.lanes as i64).map(|l| first + (p + l) * stride).collect())
    }

    /// Index access `k` at `pos` as an offset of known range plus a constant per lane.
    fn affine_index(&self, pos: &FoldAt<'_>, k: usize) -> Option<(Value, Vec<i64>)> {
        let offset = *pos.offs.get(k)?;
        let (row, first) = match self.known_of(offset) {
            Some(Known::Offset(row, c)) => (row, c),
            None => (offset, 0),
            Some(Known::Const(_)) => return None,
        };
        self.cur.index_ranges.contains_key(&row).then_some(())?;
        Some((row, self.lane_elements(pos, k, first)?))
    }

    /// Index access `k` at `pos` as constants of `dtype`, where its offset is a constant.
    fn index_lanes(&self, pos: &FoldAt<'_>, k: usize, dtype: DType) -> Option<Vec<Scalar>> {
        let Some(Known::Const(o)) = pos.offs.get(k).and_then(|&v| self.known_of(v)) else {
            return None;
        };
        self.lane_elements(pos, k, o)?
            .into_iter()
            .map(|e| {
                usize::try_from(e)
                    .ok()
                    .and_then(|e| rfx_ir::semantics::index_value(e, dtype))
            })
            .collect()
    }

    /// Load access `k` of literal buffer `buf` at `pos`, where its pointer is the literal's
    /// base plus a known displacement: the literal's elements there.
    fn literal_lanes(&self, pos: &FoldAt<'_>, k: usize, buf: BufId) -> Option<Vec<Scalar>> {
        let values = self.fx.info.literals.get(buf.index()).copied().flatten()?;
        let (literal, ptr) = (self.base(buf).ok()?, *pos.offs.get(k)?);
        let bytes = match self.known_of(ptr) {
            Some(Known::Offset(base, bytes)) if base == literal => bytes,
            None if ptr == literal => 0,
            _ => return None,
        };
        let size = i64::try_from(self.fx.info.accesses.get(k)?.dtype.size_bytes()).ok()?;
        if bytes % size != 0 {
            return None;
        }
        self.lane_elements(pos, k, bytes / size)?
            .into_iter()
            .map(|e| usize::try_from(e).ok().and_then(|e| values.get(e).copied()))
            .collect()
    }

    /// A gather from `buf` at `index` (its constants, or its offset of known range plus
    /// constants) at a position: the elements it reads where the index is constant (and their
    /// values in a literal table), or the constants past the row's offset where they stay
    /// inside the buffer at every row (a load with no clamp).
    fn gather_fold(
        &self,
        buf: BufId,
        index: Option<Vec<Scalar>>,
        affine: Option<(Value, Vec<i64>)>,
    ) -> GatherFold {
        let len = self.fx.info.buffer_lens.get(buf.index()).copied();
        let elements: Option<Vec<usize>> = index.zip(len).and_then(|(index, len)| {
            index
                .into_iter()
                .map(|i| rfx_ir::semantics::clamp_index(i, len))
                .collect()
        });
        let mut past = None;
        if let (Some((row, firsts)), Some(len)) = (affine, len)
            && let Some(&last) = self.cur.index_ranges.get(&row)
            && firsts
                .iter()
                .all(|&c| c >= 0 && i64::try_from(len).is_ok_and(|len| last + c < len))
        {
            past = Some((row, firsts));
        }
        let table = self.fx.info.literals.get(buf.index()).copied().flatten();
        let literal = match (&elements, table) {
            (Some(elements), Some(values)) => {
                Some(elements.iter().map(|&e| values.get(e).copied()).collect())
            }
            _ => None,
        };
        GatherFold {
            elements,
            literal,
            past,
        }
    }

    /// A `w`-lane value of the constants `lanes` (one per lane; a scalar at width 1).
    pub(super) fn lane_constants(&self, b: &mut FunctionBuilder<'_>, w: u8, lanes: &[Scalar]) -> Value {
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.fx.imports,
        };
        match lanes {
            [first, rest @ ..] if rest.iter().all(|x| x == first) => e.constant(*first),
            _ => {
                let mut bytes = Vec::with_capacity(16);
                for lane in lanes {
                    match *lane {
                        Scalar::F32(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        Scalar::F64(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        Scalar::I32(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        Scalar::Bool(v) => {
                            let width = if w == 2 { 8 } else { 4 };
                            bytes.extend(std::iter::repeat_n(if v { 0xff } else { 0 }, width));
                        }
                    }
                }
                let dtype = lanes.first().map_or(DType::F32, |s| s.dtype());
                let handle = b.func.dfg.constants.insert(bytes.into());
                b.ins().vconst(cl_type(dtype, w), handle)
            }
        }
    }
}

/// What [`Gen::fold_plan`] found of each body instruction at a position.
struct FoldFacts {
    /// Its value, lane by lane, where it is a constant.
    values: Vec<Option<Vec<Scalar>>>,
    /// For a select whose condition is one constant: the slot it picks.
    chosen: Vec<Option<SlotId>>,
    /// For a gather at constant indices: the (clamped) elements it loads.
    gathered: Vec<Option<Vec<usize>>>,
    /// For a gather at a row offset plus constants inside the buffer: the offset and constants.
    past: Vec<Option<(Value, Vec<i64>)>>,
}

/// The value of `inst`, one of the exactly rounded ops folding covers (`not`, `neg`, `abs`,
/// `floor`, `ceil`, `round`, `sqrt`, casts, comparisons, `and`, `or`, `add`, `sub`, `mul`,
/// `div`, `min`, `max`), in each of `lanes` lanes, when its operands are constants there
/// (`value_of`); `slots` are the kernel's slot dtypes.
fn fold_exact(
    inst: &Inst,
    slots: &[DType],
    lanes: usize,
    value_of: &dyn Fn(SlotId) -> Option<Vec<Scalar>>,
) -> Option<Vec<Scalar>> {
    let lanewise =
        |f: &dyn Fn(usize) -> Option<Scalar>| -> Option<Vec<Scalar>> { (0..lanes).map(f).collect() };
    match inst {
        Inst::Unary { op, src, .. } => {
            let exact = matches!(
                op,
                UnaryOp::Not
                    | UnaryOp::Neg
                    | UnaryOp::Abs
                    | UnaryOp::Floor
                    | UnaryOp::Ceil
                    | UnaryOp::Round
                    | UnaryOp::Sqrt
            );
            let x = value_of(*src).filter(|_| exact)?;
            lanewise(&|l| rfx_ir::semantics::unary(*op, x[l]))
        }
        Inst::Cast { dst, src } => {
            let x = value_of(*src)?;
            let to = *slots.get(dst.index())?;
            lanewise(&|l| Some(rfx_ir::semantics::cast(x[l], to)))
        }
        Inst::Compare { op, lhs, rhs, .. } => {
            let (a, b) = (value_of(*lhs)?, value_of(*rhs)?);
            lanewise(&|l| rfx_ir::semantics::compare(*op, a[l], b[l]).map(Scalar::Bool))
        }
        Inst::Binary { op, lhs, rhs, .. } => {
            let (a, b) = (value_of(*lhs), value_of(*rhs));
            let all = |v: &Option<Vec<Scalar>>, x: bool| {
                v.as_ref()
                    .is_some_and(|v| v.iter().all(|&s| s == Scalar::Bool(x)))
            };
            match op {
                BinaryOp::And if all(&a, false) || all(&b, false) => Some(vec![Scalar::Bool(false); lanes]),
                BinaryOp::Or if all(&a, true) || all(&b, true) => Some(vec![Scalar::Bool(true); lanes]),
                BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Min
                | BinaryOp::Max => {
                    let (a, b) = (a?, b?);
                    lanewise(&|l| rfx_ir::semantics::binary(*op, a[l], b[l]))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// What each instruction becomes: skipped where nothing live reads it (liveness runs from
/// the stores and reductions back, through the chosen arm of each decided select), a constant,
/// an alias, a load at known elements, or emitted as it is.
fn live_folds(body: &[Inst], operands: &[Vec<Option<usize>>], facts: FoldFacts) -> Vec<Fold> {
    // Live instructions, from the stores and reductions back.
    let FoldFacts {
        mut values,
        chosen,
        mut gathered,
        mut past,
    } = facts;
    let mut live = vec![false; body.len()];
    for (i, inst) in body.iter().enumerate().rev() {
        let root = matches!(inst, Inst::Store { .. } | Inst::Reduce { .. });
        if !(root || live[i]) {
            continue;
        }
        live[i] = true;
        if !root && (values[i].is_some() || gathered[i].is_some() || past[i].is_some()) {
            continue;
        }
        let srcs = inst.srcs();
        for (src, def) in srcs.iter().zip(&operands[i]) {
            if chosen[i].is_some_and(|pick| pick != *src) {
                continue;
            }
            if let Some(j) = *def {
                live[j] = true;
            }
        }
    }
    body.iter()
        .enumerate()
        .map(|(i, inst)| {
            if !live[i] {
                Fold::Skip
            } else if matches!(
                inst,
                Inst::Const { .. } | Inst::Store { .. } | Inst::Reduce { .. }
            ) {
                Fold::Emit
            } else if let Some(lanes) = values[i].take() {
                Fold::Constant(lanes)
            } else if let Some(pick) = chosen[i] {
                Fold::Alias(pick)
            } else if let Some(elements) = gathered[i].take() {
                Fold::GatherAt(elements)
            } else if let Some((row, elements)) = past[i].take() {
                Fold::GatherPast(row, elements)
            } else {
                Fold::Emit
            }
        })
        .collect()
}

/// A position [`Gen::fold_plan`] folds at: `lanes` lanes at loop position `at` (when it is a
/// constant), with each access's offset `offs`.
struct FoldAt<'a> {
    lanes: usize,
    at: Option<i64>,
    offs: &'a [Value],
}

/// An integral constant per lane, exact in an index's dtype.
fn integral_offsets(v: Option<Vec<Scalar>>) -> Option<Vec<i64>> {
    v?.into_iter()
        .map(|x| match x {
            Scalar::I32(k) => Some(i64::from(k)),
            Scalar::F64(k) if k.fract() == 0.0 && k.abs() < 9.0e15 => Some(k as i64),
            _ => None,
        })
        .collect()
}

/// What a gather folds to at a position ([`Gen::gather_fold`]).
struct GatherFold {
    /// The elements it reads, where its index is constant in every lane.
    elements: Option<Vec<usize>>,
    /// Where it reads a literal table at constant elements: their values (`None` when one
    /// lies outside the table).
    literal: Option<Option<Vec<Scalar>>>,
    /// The row offset and the constants past it, where every row stays inside the buffer.
    past: Option<(Value, Vec<i64>)>,
}
