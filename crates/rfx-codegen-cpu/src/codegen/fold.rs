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
        let known = |v: Value| self.caches.known.borrow().get(&v).copied();
        let at = match known(at) {
            Some(Known::Const(p)) => Some(p),
            _ => None,
        };
        // Element `e` of access `k` in each lane (its position's elements, or every lane's
        // when the access does not advance along the vector).
        let lane_elements = |k: usize, first: i64| -> Option<Vec<i64>> {
            let stride = i64::try_from(self.inner_stride(k)).ok()?;
            if stride == 0 {
                return Some(vec![first; lanes]);
            }
            let p = at?;
            Some((0..lanes as i64).map(|l| first + (p + l) * stride).collect())
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
            // An integral constant per lane, exact in the index's dtype.
            let offsets_of = |v: Option<Vec<Scalar>>| -> Option<Vec<i64>> {
                v?.into_iter()
                    .map(|x| match x {
                        Scalar::I32(k) => Some(i64::from(k)),
                        Scalar::F64(k) if k.fract() == 0.0 && k.abs() < 9.0e15 => Some(k as i64),
                        _ => None,
                    })
                    .collect()
            };
            let this_affine = match inst {
                Inst::Index { dst, .. }
                    if matches!(kernel.slots.get(dst.index()), Some(DType::I32 | DType::F64)) =>
                {
                    access.and_then(|k| {
                        let offset = *offs.get(k)?;
                        let (row, first) = match known(offset) {
                            Some(Known::Offset(row, c)) => (row, c),
                            None => (offset, 0),
                            Some(Known::Const(_)) => return None,
                        };
                        self.cur.index_ranges.contains_key(&row).then_some(())?;
                        Some((row, lane_elements(k, first)?))
                    })
                }
                Inst::Binary {
                    op: op @ (BinaryOp::Add | BinaryOp::Sub),
                    lhs,
                    rhs,
                    ..
                } => match (affine_of(*lhs), affine_of(*rhs)) {
                    (Some((row, a)), None) => offsets_of(value_of(*rhs)).map(|b| {
                        let sign = if *op == BinaryOp::Sub { -1 } else { 1 };
                        (row, a.iter().zip(&b).map(|(x, y)| x + sign * y).collect())
                    }),
                    (None, Some((row, b))) if *op == BinaryOp::Add => offsets_of(value_of(*lhs))
                        .map(|a| (row, a.iter().zip(&b).map(|(x, y)| x + y).collect())),
                    _ => None,
                },
                _ => None,
            };
            values[i] = match inst {
                Inst::Const { value, .. } => Some(vec![*value; lanes]),
                Inst::Index { dst, .. } => access.and_then(|k| {
                    let Some(Known::Const(o)) = offs.get(k).and_then(|&v| known(v)) else {
                        return None;
                    };
                    let dtype = *kernel.slots.get(dst.index())?;
                    lane_elements(k, o)?
                        .into_iter()
                        .map(|e| {
                            usize::try_from(e)
                                .ok()
                                .and_then(|e| rfx_ir::semantics::index_value(e, dtype))
                        })
                        .collect()
                }),
                Inst::Load { buf, .. } => access.and_then(|k| {
                    let values = self.fx.info.literals.get(buf.index()).copied().flatten()?;
                    // The pointer is the literal's base plus a known displacement.
                    let (literal, ptr) = (self.base(*buf).ok()?, *offs.get(k)?);
                    let bytes = match known(ptr) {
                        Some(Known::Offset(base, bytes)) if base == literal => bytes,
                        None if ptr == literal => 0,
                        _ => return None,
                    };
                    let size = i64::try_from(self.fx.info.accesses.get(k)?.dtype.size_bytes()).ok()?;
                    if bytes % size != 0 {
                        return None;
                    }
                    lane_elements(k, bytes / size)?
                        .into_iter()
                        .map(|e| usize::try_from(e).ok().and_then(|e| values.get(e).copied()))
                        .collect()
                }),
                Inst::Unary { op, src, .. } => (|| {
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
                })(),
                Inst::Cast { dst, src } => (|| {
                    let x = value_of(*src)?;
                    let to = *kernel.slots.get(dst.index())?;
                    lanewise(&|l| Some(rfx_ir::semantics::cast(x[l], to)))
                })(),
                Inst::Compare { op, lhs, rhs, .. } => (|| {
                    let (a, b) = (value_of(*lhs)?, value_of(*rhs)?);
                    lanewise(&|l| rfx_ir::semantics::compare(*op, a[l], b[l]).map(Scalar::Bool))
                })(),
                Inst::Binary { op, lhs, rhs, .. } => (|| {
                    let (a, b) = (value_of(*lhs), value_of(*rhs));
                    let all = |v: &Option<Vec<Scalar>>, x: bool| {
                        v.as_ref()
                            .is_some_and(|v| v.iter().all(|&s| s == Scalar::Bool(x)))
                    };
                    match op {
                        BinaryOp::And if all(&a, false) || all(&b, false) => {
                            Some(vec![Scalar::Bool(false); lanes])
                        }
                        BinaryOp::Or if all(&a, true) || all(&b, true) => {
                            Some(vec![Scalar::Bool(true); lanes])
                        }
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
                })(),
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
                    let len = self.fx.info.buffer_lens.get(buf.index()).copied();
                    let elements: Option<Vec<usize>> = value_of(*index).zip(len).and_then(|(index, len)| {
                        index
                            .into_iter()
                            .map(|i| rfx_ir::semantics::clamp_index(i, len))
                            .collect()
                    });
                    // An offset of known range plus constants that stay inside the buffer at
                    // every row: loads past the row's offset, no clamp.
                    if let (Some((row, firsts)), Some(len)) = (affine_of(*index), len)
                        && let Some(&last) = self.cur.index_ranges.get(&row)
                        && firsts
                            .iter()
                            .all(|&c| c >= 0 && i64::try_from(len).is_ok_and(|len| last + c < len))
                    {
                        past[i] = Some((row, firsts));
                        folds = true;
                    }
                    match elements {
                        None => None,
                        Some(elements) => {
                            folds = true;
                            // A lookup in a literal table is its value; elsewhere a load.
                            match self.fx.info.literals.get(buf.index()).copied().flatten() {
                                Some(values) => elements.iter().map(|&e| values.get(e).copied()).collect(),
                                None => {
                                    gathered[i] = Some(elements);
                                    None
                                }
                            }
                        }
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
        // Live instructions, from the stores and reductions back.
        let mut live = vec![false; n];
        for (i, inst) in kernel.body.iter().enumerate().rev() {
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
        Some(
            kernel
                .body
                .iter()
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
                .collect(),
        )
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
