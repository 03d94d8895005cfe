//! The body of a kernel at one position: the preamble's values, and one LIR instruction as Cranelift code.

use super::*;

/// Where [`Gen::emit_inst`] emits an instruction: `w` lanes, at `access` (the instruction's
/// access and the loop position; `None` in the preamble) with each access's offset `offs`, as
/// body instruction `body_index` (`None` in the preamble).
pub(super) struct InstAt<'p> {
    pub(super) w: u8,
    pub(super) access: Option<(usize, Value)>,
    pub(super) offs: &'p [Value],
    pub(super) body_index: Option<usize>,
}

impl<'k> Gen<'_, 'k> {
    /// The body at position `at` of the innermost dimension, `w` lanes at once. Reduction
    /// sources are returned in `reduced` (in `Reduce` order) for the caller to combine.
    pub(super) fn emit_body(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        at: Value,
        offs: &[Value],
        reduced: &mut Vec<(usize, Value)>,
    ) -> Result<(), BackendError> {
        let mut slots = self.preamble_slots(b, w);
        if w > 1 && self.caches.lane_steps.is_some() {
            // The preamble's values are splats.
            for (s, v) in slots.iter().enumerate() {
                if let (Some(v), Some(DType::I32)) = (v, self.kernel().slots.get(s)) {
                    self.note_step(*v, 0);
                }
            }
        }
        let body = self.kernel().body.clone();
        let plan = self.fold_plan(w, at, offs);
        let order = if self.cur.tiles.is_none() {
            emission_order(&body)
        } else {
            None
        };
        let pre = order.as_ref().map(|_| slots.clone());
        let mut values: Vec<Option<Value>> = vec![None; body.len()];
        let steps: Vec<usize> = match &order {
            Some(o) => o.order.clone(),
            None => (0..body.len()).collect(),
        };
        for i in steps {
            let inst = &body[i];
            if let (Some(o), Some(pre)) = (&order, &pre) {
                // Each source as its defining instruction left it (slots are reused).
                for (src, def) in inst.srcs().into_iter().zip(&o.defs[i]) {
                    let v = match def {
                        Some(d) => values[*d],
                        None => pre.get(src.index()).copied().flatten(),
                    };
                    if let (Some(v), Some(slot)) = (v, slots.get_mut(src.index())) {
                        *slot = Some(v);
                    }
                }
            }
            self.emit_body_inst(b, (w, at, offs), (i, inst), plan.as_deref(), &mut slots, reduced)?;
            if let Some(dst) = inst.dst() {
                values[i] = slots.get(dst.index()).copied().flatten();
            }
        }
        Ok(())
    }

    /// Body instruction `i` at position `at` (see [`Gen::emit_body`]), folded by `plan`.
    fn emit_body_inst(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (w, at, offs): (u8, Value, &[Value]),
        (i, inst): (usize, &Inst),
        plan: Option<&[Fold]>,
        slots: &mut [Option<Value>],
        reduced: &mut Vec<(usize, Value)>,
    ) -> Result<(), BackendError> {
        match (plan.map(|p| &p[i]), inst) {
            (Some(Fold::Skip), _) => return Ok(()),
            (Some(Fold::Constant(lanes)), _) => {
                if let Some(dst) = inst.dst() {
                    slots[dst.index()] = Some(self.lane_constants(b, w, lanes));
                }
                return Ok(());
            }
            (Some(Fold::Alias(src)), _) => {
                if let Some(dst) = inst.dst() {
                    slots[dst.index()] = slots.get(src.index()).copied().flatten();
                }
                return Ok(());
            }
            (Some(Fold::GatherPast(offset, elements)), Inst::Gather { dst, buf, .. }) => {
                let dtype = self.slot_dtype(*dst)?;
                let base = self.base(*buf)?;
                let size = dtype.size_bytes() as i64;
                let bytes = self.scale(b, *offset, size);
                let row = self.add(b, base, bytes);
                let lanes: Vec<Value> = elements
                    .iter()
                    .map(|&e| {
                        let addr = self.add_imm(b, row, e * size);
                        self.load_scalar(b, addr, None, dtype)
                    })
                    .collect();
                slots[dst.index()] = Some(self.assemble(b, w, &lanes, dtype));
                return Ok(());
            }
            (Some(Fold::GatherAt(elements)), Inst::Gather { dst, buf, .. }) => {
                let dtype = self.slot_dtype(*dst)?;
                let base = self.base(*buf)?;
                let lanes: Vec<Value> = elements
                    .iter()
                    .map(|&e| {
                        let addr = self.add_imm(b, base, (e * dtype.size_bytes()) as i64);
                        self.load_scalar(b, addr, None, dtype)
                    })
                    .collect();
                slots[dst.index()] = Some(self.assemble(b, w, &lanes, dtype));
                return Ok(());
            }
            _ => {}
        }
        let access = self.fx.info.access_of.get(i).copied().flatten();
        let place = InstAt {
            w,
            access: access.map(|a| (a, at)),
            offs,
            body_index: Some(i),
        };
        self.emit_inst(b, inst, place, slots, reduced)
    }

    /// Splats the preamble slots the body reads to the kernel's vector width, once, in the
    /// current (entry) block, when the innermost loop has at least `HOIST_MIN_ELEMS` elements.
    /// Without Cranelift's mid-end (no LICM) a splat made in a loop body is rebuilt on every
    /// pass: five broadcasts per pass of PID's clamp. Short kernels (a control loop's n = 1
    /// call) keep building them where they are used, and pay nothing when no pass runs.
    pub(super) fn hoist_splats(&mut self, b: &mut FunctionBuilder<'_>) {
        let kernel = self.kernel();
        let w = self.cur.width;
        self.fx.pre_splat = vec![None; self.fx.pre_scalar.len()];
        if w == 1 || kernel.dims.last().copied().unwrap_or(1) < HOIST_MIN_ELEMS {
            return;
        }
        let mut read = vec![false; self.fx.pre_scalar.len()];
        for inst in &kernel.body {
            for src in inst.srcs() {
                if let Some(r) = read.get_mut(src.index()) {
                    *r = true;
                }
            }
        }
        let imports = self.fx.imports;
        for (s, v) in self.fx.pre_scalar.iter().enumerate() {
            if let (Some(v), true) = (v, read[s]) {
                let dtype = kernel.slots[s];
                self.fx.pre_splat[s] = Some(
                    Emitter {
                        b: &mut *b,
                        w,
                        imports,
                    }
                    .splat(*v, dtype),
                );
            }
        }
    }

    /// The slot values at the start of a body of width `w`: the preamble's, splatted.
    pub(super) fn preamble_slots(&self, b: &mut FunctionBuilder<'_>, w: u8) -> Vec<Option<Value>> {
        (0..self.fx.pre_scalar.len())
            .map(|s| self.preamble_slot(b, w, s))
            .collect()
    }

    /// The preamble value of slot `s` at `w` lanes ([`Gen::preamble_slots`]).
    pub(super) fn preamble_slot(&self, b: &mut FunctionBuilder<'_>, w: u8, s: usize) -> Option<Value> {
        let v = self.fx.pre_scalar.get(s).copied().flatten();
        let hoisted = self
            .fx
            .pre_splat
            .get(s)
            .copied()
            .flatten()
            .filter(|_| w == self.cur.width);
        match (v, w) {
            _ if hoisted.is_some() => hoisted,
            (Some(v), 1) => Some(v),
            (Some(v), _) => {
                let dtype = self.kernel().slots[s];
                let imports = self.fx.imports;
                Some(self.pure(b, Pure::Splat, v.as_u32(), i64::from(w), |b| {
                    Emitter { b, w, imports }.splat(v, dtype)
                }))
            }
            (None, _) => None,
        }
    }

    /// [`Gen::preamble_slots`] for only the slots that the body instructions `insts` read (the
    /// others `None`): a tiled kernel has an ops segment between every two routine calls, and
    /// building every preamble value in each would make its compile time quadratic in its
    /// length.
    pub(super) fn preamble_slots_read(
        &self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        insts: &[usize],
    ) -> Vec<Option<Value>> {
        let body = &self.kernel().body;
        let mut slots = vec![None; self.fx.pre_scalar.len()];
        for inst in insts.iter().filter_map(|&i| body.get(i)) {
            for src in inst.srcs() {
                if slots.get(src.index()).is_some_and(Option::is_none) {
                    slots[src.index()] = self.preamble_slot(b, w, src.index());
                }
            }
        }
        slots
    }

    /// Emits one instruction at `place` (its width `w`; `access` is `(access index, position)`
    /// for loads and stores of the body; preamble loads read element 0).
    pub(super) fn emit_inst(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inst: &Inst,
        place: InstAt<'_>,
        slots: &mut [Option<Value>],
        reduced: &mut Vec<(usize, Value)>,
    ) -> Result<(), BackendError> {
        let InstAt {
            w,
            access,
            offs,
            body_index,
        } = place;
        let get = |slots: &[Option<Value>], s: SlotId| {
            slots
                .get(s.index())
                .copied()
                .flatten()
                .ok_or_else(|| internal(format!("slot {s} read before written")))
        };
        let value = match inst {
            Inst::Load { dst, buf, offset, .. } => {
                let dtype = self.slot_dtype(*dst)?;
                let base = self.base(*buf)?;
                let preloaded = body_index.and_then(|i| self.cur.preloaded.get(&i).copied());
                let v = match (preloaded, access) {
                    (Some(v), _) => v,
                    (None, None) => {
                        let addr = self.add_imm(b, base, (offset * dtype.size_bytes()) as i64);
                        self.load_scalar(b, addr, None, dtype)
                    }
                    (None, Some((k, at))) => self.load(b, Place { w, pos: at, offs }, k, base, dtype)?,
                };
                Some((*dst, v))
            }
            Inst::Gather { dst, buf, index } => {
                let dtype = self.slot_dtype(*dst)?;
                let index_dtype = self.slot_dtype(*index)?;
                let index = get(slots, *index)?;
                let step = self.step_of(index);
                Some((*dst, self.gather(b, w, *buf, (index, index_dtype), step, dtype)?))
            }
            Inst::Index { dst, .. } => {
                let dtype = self.slot_dtype(*dst)?;
                Some((*dst, self.emit_index(b, (w, access), offs, dtype)?))
            }
            Inst::Const { dst, value } => {
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.fx.imports,
                };
                let v = e.constant(*value);
                if w > 1 && matches!(value, Scalar::I32(_)) {
                    self.note_step(v, 0);
                }
                Some((*dst, v))
            }
            Inst::Unary { dst, op, src } => {
                let x = get(slots, *src)?;
                Some((*dst, self.emit_unary(b, w, *op, (*src, x))?))
            }
            Inst::Binary { dst, op, lhs, rhs } => {
                let (x, y) = (get(slots, *lhs)?, get(slots, *rhs)?);
                if let Some(v) = known_logic(b, w, *op, x, y) {
                    return self.define(slots, *dst, v);
                }
                Some((
                    *dst,
                    self.emit_binary(b, (w, body_index), *op, (*lhs, x), (*rhs, y))?,
                ))
            }
            Inst::Compare { dst, op, lhs, rhs } => {
                let dtype = self.slot_dtype(*lhs)?;
                let (x, y) = (get(slots, *lhs)?, get(slots, *rhs)?);
                let dfg = &b.func.dfg;
                if let (Some(lx), Some(ly)) = (known::lanes(dfg, x), known::lanes(dfg, y))
                    && let Some(lanes) = known::compare_lanes(*op, &lx, &ly)
                {
                    let v = known::bool_constant(b, w, &lanes);
                    return self.define(slots, *dst, v);
                }
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.fx.imports,
                };
                Some((*dst, e.compare(*op, x, y, dtype)))
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => {
                let dtype = self.slot_dtype(*dst)?;
                let (c, x, y) = (get(slots, *cond)?, get(slots, *on_true)?, get(slots, *on_false)?);
                // A condition known in every lane picks its operand here.
                if let Some(lanes) = known::bool_lanes(&b.func.dfg, c)
                    && let Some(&first) = lanes.first()
                    && lanes.iter().all(|&t| t == first)
                {
                    return self.define(slots, *dst, if first { x } else { y });
                }
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.fx.imports,
                };
                Some((*dst, e.select(c, x, y, cl_type(dtype, w))))
            }
            Inst::Cast { dst, src } => {
                let (from, to) = (self.slot_dtype(*src)?, self.slot_dtype(*dst)?);
                let x = get(slots, *src)?;
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.fx.imports,
                };
                Some((*dst, e.cast(x, from, to)?))
            }
            Inst::Store { buf, src, .. } => {
                let (k, at) = access.ok_or_else(|| internal("store outside the body"))?;
                let v = get(slots, *src)?;
                let base = self.base(*buf)?;
                self.store(b, Place { w, pos: at, offs }, k, base, v)?;
                None
            }
            Inst::Reduce { src, .. } => {
                reduced.push((body_index.unwrap_or(0), get(slots, *src)?));
                None
            }
            Inst::Scan { dst, op, src, coef } => {
                let x = get(slots, *src)?;
                let coef = coef.map(|c| get(slots, c)).transpose()?;
                Some((
                    *dst,
                    self.emit_scan_step(b, (w, body_index), *op, (*src, x), coef)?,
                ))
            }
        };
        if let Some((dst, v)) = value
            && let Some(slot) = slots.get_mut(dst.index())
        {
            *slot = Some(v);
        }
        Ok(())
    }

    /// Sets slot `dst` to `v` (what [`Gen::emit_inst`] does with an instruction's value).
    fn define(&self, slots: &mut [Option<Value>], dst: SlotId, v: Value) -> Result<(), BackendError> {
        if let Some(slot) = slots.get_mut(dst.index()) {
            *slot = Some(v);
        }
        Ok(())
    }

    /// An index value of `dtype` at width `w` and `access` (`None` in the preamble, where every
    /// stride is 0), each access's offset `offs`; `i32` vector indices note their lane step.
    fn emit_index(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (w, access): (u8, Option<(usize, Value)>),
        offs: &[Value],
        dtype: DType,
    ) -> Result<Value, BackendError> {
        Ok(match access {
            // In the preamble every stride is 0.
            None => {
                let zero = rfx_ir::semantics::index_value(0, dtype)
                    .ok_or_else(|| internal(format!("index of dtype {dtype}")))?;
                Emitter {
                    b: &mut *b,
                    w: 1,
                    imports: self.fx.imports,
                }
                .constant(zero)
            }
            Some((k, at)) => {
                let v = self.index(b, w, k, at, offs, dtype)?;
                if w > 1 && dtype == DType::I32 {
                    let step = if self.cur.row_indices.contains_key(&k) {
                        0
                    } else {
                        self.inner_stride(k)
                    };
                    if let Ok(step) = i64::try_from(step) {
                        self.note_step(v, step);
                    }
                }
                v
            }
        })
    }

    /// One step of the scan of body instruction `body_index` at width `w`: its running
    /// accumulator (scaled by `coef` first, for a linear recurrence) combined with `x`, the
    /// value of slot `src`.
    fn emit_scan_step(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (w, body_index): (u8, Option<usize>),
        op: ScanOp,
        (src, x): (SlotId, Value),
        coef: Option<Value>,
    ) -> Result<Value, BackendError> {
        let dtype = self.slot_dtype(src)?;
        let acc = body_index
            .and_then(|i| self.cur.scan_accs.iter_mut().find(|(at, _)| *at == i))
            .ok_or_else(|| internal("a scan outside a scanning kernel's body"))?;
        let mut em = Emitter {
            b: &mut *b,
            w,
            imports: self.fx.imports,
        };
        // A linear recurrence scales the accumulator first (`coef * acc + x`, rounded
        // twice: never contracted, even under fast math).
        let scaled = match coef {
            Some(coef) => em.binary(BinaryOp::Mul, coef, acc.1, dtype)?,
            None => acc.1,
        };
        let next = em.combine(op.reduce_op(), scaled, x, dtype)?;
        acc.1 = next;
        Ok(next)
    }

    /// A unary op of `x` (the value of slot `src`) at width `w`: scalar transcendentals by
    /// routine where there is one, a `sin` and a `cos` of one value from one `sincos` call.
    fn emit_unary(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        op: UnaryOp,
        (src, x): (SlotId, Value),
    ) -> Result<Value, BackendError> {
        let dtype = self.slot_dtype(src)?;
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.fx.imports,
        };
        // Scalar code (the preamble: loop invariants and all of a one-element kernel;
        // reductions one output at a time; scalar tails) calls the tile routine where
        // there is one: cheaper for one element than the inline polynomial.
        let by_routine = if w == 1 && op.is_transcendental() {
            // A `sin` and a `cos` of one value: one `sincos` call computes both.
            let pair = AotFn::for_op(op, dtype).and_then(AotFn::sincos_part);
            let block = e.b.current_block();
            match (pair, block) {
                (Some((routine, part)), Some(block))
                    if self.caches.sincos.contains_key(&(block, x)) || self.has_trig_partner(op, src) =>
                {
                    let results = match self.caches.sincos.get(&(block, x)) {
                        Some(&pair) => Some(pair),
                        None => crate::transcendental::pair_by_routine(&mut e, routine, x, dtype),
                    };
                    if let Some(pair) = results {
                        self.caches.sincos.insert((block, x), pair);
                    }
                    results.map(|(sin, cos)| if part == 0 { sin } else { cos })
                }
                _ => crate::transcendental::unary_by_routine(&mut e, op, x, dtype),
            }
        } else {
            None
        };
        match by_routine {
            Some(v) => Ok(v),
            None => e.unary(op, x, dtype),
        }
    }

    /// A binary op of `x` (slot `lhs`) and `y` (slot `rhs`) at width `w`: a float min or max
    /// with a constant bound as one instruction in the body (`body_index` set), a contracted
    /// multiply-add under fast math, else the exact op.
    fn emit_binary(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (w, body_index): (u8, Option<usize>),
        op: BinaryOp,
        (lhs, x): (SlotId, Value),
        (rhs, y): (SlotId, Value),
    ) -> Result<Value, BackendError> {
        let dtype = self.slot_dtype(lhs)?;
        // A clamp's bounds are usually constants: one `minps`/`maxps` each instead of
        // the five-op NaN-propagating select (see `Emitter::min_max_by_const`).
        let constant = |s: SlotId| {
            self.fx
                .pre_const
                .get(s.index())
                .copied()
                .flatten()
                .filter(|c| !c.is_nan())
        };
        let by_const = match op {
            BinaryOp::Min | BinaryOp::Max if dtype.is_float() && body_index.is_some() => {
                match (constant(lhs), constant(rhs)) {
                    (_, Some(c)) if c != 0.0 => Some((x, y)),
                    (Some(_), _) => Some((y, x)),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((a, c)) = by_const {
            let mut e = Emitter {
                b: &mut *b,
                w,
                imports: self.fx.imports,
            };
            Ok(e.min_max_by_const(op, a, c, cl_type(dtype, w)))
        } else if let Some(v) = self.contracted(b, op, x, y, dtype) {
            Ok(v)
        } else {
            let mut e = Emitter {
                b: &mut *b,
                w,
                imports: self.fx.imports,
            };
            let v = e.binary(op, x, y, dtype)?;
            if self.fx.contract && op == BinaryOp::Mul && dtype.is_float() {
                self.caches.products.insert(v, (x, y));
            }
            // Wrapping sums of evenly stepping lanes step evenly.
            if let (Some(sx), Some(sy)) = (self.step_of(x), self.step_of(y)) {
                let step = match op {
                    BinaryOp::Add => sx.checked_add(sy),
                    BinaryOp::Sub => sx.checked_sub(sy),
                    _ => None,
                };
                if let (Some(step), DType::I32) = (step, dtype) {
                    self.note_step(v, step);
                }
            }
            Ok(v)
        }
    }

    /// Fast-math contraction: `a * b + c`, `c + a * b`, `a * b - c` and `c - a * b` (float,
    /// any width) as one fused multiply-add when the first operand pair is a product emitted
    /// earlier in this function. The product itself stays for its other uses (Cranelift
    /// removes it when it has none). Only with fast math: the fused result is rounded once, so
    /// it can differ from the two-step result (it is never less accurate).
    pub(super) fn contracted(
        &self,
        b: &mut FunctionBuilder<'_>,
        op: BinaryOp,
        x: Value,
        y: Value,
        dtype: DType,
    ) -> Option<Value> {
        if !self.fx.contract || !dtype.is_float() {
            return None;
        }
        match op {
            BinaryOp::Add => {
                if let Some(&(a, c)) = self.caches.products.get(&x) {
                    Some(b.ins().fma(a, c, y))
                } else {
                    let &(a, c) = self.caches.products.get(&y)?;
                    Some(b.ins().fma(a, c, x))
                }
            }
            BinaryOp::Sub => {
                if let Some(&(a, c)) = self.caches.products.get(&x) {
                    let neg = b.ins().fneg(y);
                    Some(b.ins().fma(a, c, neg))
                } else {
                    let &(a, c) = self.caches.products.get(&y)?;
                    let neg = b.ins().fneg(a);
                    Some(b.ins().fma(neg, c, x))
                }
            }
            _ => None,
        }
    }
}

/// The order [`Gen::emit_body`] emits a body in, when it may differ from the body's: each
/// instruction's sources by defining instruction (`None`: the preamble's value), since slots
/// are reused.
pub(super) struct EmissionOrder {
    pub(super) order: Vec<usize>,
    pub(super) defs: Vec<Vec<Option<usize>>>,
}

/// Loads (and gathers, indices, constants) emitted right before their first use, and each store
/// right after its value (stores to one buffer in the body's order), so a large body keeps
/// fewer values live at once: the body's stores come last, and every value it stores would
/// otherwise be held (in a register or spilled) to the end. Only where no instruction reads a
/// buffer the body writes (no store then moves across a load of its buffer) and the body has
/// no reductions or scans; `None` otherwise, and for bodies emitted in their own order anyway.
pub(super) fn emission_order(body: &[Inst]) -> Option<EmissionOrder> {
    let mut written = Vec::new();
    for inst in body {
        match inst {
            Inst::Store { buf, .. } => written.push(*buf),
            Inst::Reduce { .. } | Inst::Scan { .. } => return None,
            _ => {}
        }
    }
    let reads_written = body.iter().any(
        |inst| matches!(inst, Inst::Load { buf, .. } | Inst::Gather { buf, .. } if written.contains(buf)),
    );
    if reads_written {
        return None;
    }
    let mut last_def: Vec<Option<usize>> = Vec::new();
    let mut defs = Vec::with_capacity(body.len());
    for (i, inst) in body.iter().enumerate() {
        defs.push(
            inst.srcs()
                .iter()
                .map(|s| last_def.get(s.index()).copied().flatten())
                .collect::<Vec<_>>(),
        );
        if let Some(dst) = inst.dst() {
            if last_def.len() <= dst.index() {
                last_def.resize(dst.index() + 1, None);
            }
            last_def[dst.index()] = Some(i);
        }
    }
    let lazy = |inst: &Inst| {
        matches!(
            inst,
            Inst::Load { .. } | Inst::Gather { .. } | Inst::Index { .. } | Inst::Const { .. }
        )
    };
    // Stores waiting for their value, per buffer in body order.
    let mut queues: Vec<(BufId, std::collections::VecDeque<usize>)> = Vec::new();
    for (i, inst) in body.iter().enumerate() {
        if let Inst::Store { buf, .. } = inst {
            match queues.iter_mut().find(|(b, _)| b == buf) {
                Some((_, q)) => q.push_back(i),
                None => queues.push((*buf, std::iter::once(i).collect())),
            }
        }
    }
    let mut emitted = vec![false; body.len()];
    let mut order = Vec::with_capacity(body.len());
    // Emits `i` after the lazy instructions it needs that are not emitted yet.
    fn ensure(i: usize, defs: &[Vec<Option<usize>>], emitted: &mut [bool], order: &mut Vec<usize>) {
        if emitted[i] {
            return;
        }
        for d in defs[i].iter().flatten() {
            ensure(*d, defs, emitted, order);
        }
        emitted[i] = true;
        order.push(i);
    }
    let flush = |emitted: &mut [bool],
                 order: &mut Vec<usize>,
                 queues: &mut Vec<(BufId, std::collections::VecDeque<usize>)>| {
        for (_, q) in queues.iter_mut() {
            while let Some(&s) = q.front() {
                let ready = defs[s].iter().flatten().all(|&d| emitted[d] || lazy(&body[d]));
                if !ready {
                    break;
                }
                q.pop_front();
                ensure(s, &defs, emitted, order);
            }
        }
    };
    flush(&mut emitted, &mut order, &mut queues);
    for (i, inst) in body.iter().enumerate() {
        if lazy(inst) || matches!(inst, Inst::Store { .. }) {
            continue;
        }
        ensure(i, &defs, &mut emitted, &mut order);
        flush(&mut emitted, &mut order, &mut queues);
    }
    // Anything left (unused loads): at the end.
    for i in 0..body.len() {
        ensure(i, &defs, &mut emitted, &mut order);
    }
    Some(EmissionOrder { order, defs })
}

/// `op` of two bool values known in every lane (`and`, `or`), as a constant (`None` for any
/// other op or operands).
fn known_logic(b: &mut FunctionBuilder<'_>, w: u8, op: BinaryOp, x: Value, y: Value) -> Option<Value> {
    if !matches!(op, BinaryOp::And | BinaryOp::Or) {
        return None;
    }
    let dfg = &b.func.dfg;
    if dfg.value_type(x) != cl_type(DType::Bool, w) {
        return None;
    }
    let (x, y) = (known::bool_lanes(dfg, x)?, known::bool_lanes(dfg, y)?);
    if x.len() != y.len() {
        return None;
    }
    let lanes: Vec<bool> = x
        .iter()
        .zip(&y)
        .map(|(&a, &c)| if op == BinaryOp::And { a && c } else { a || c })
        .collect();
    Some(known::bool_constant(b, w, &lanes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The LIR body of a per-example kernel: `out[i, 0] = x0 * x1 - x2` needs only `x`, the
    /// other outputs need `y` too; every store comes last in the body.
    fn body() -> Vec<Inst> {
        let text = "\
mir order {
  buf0: f64[8,3] = input x
  buf1: f64[8,2] = input y
  buf2: f64[8,3] = output out
  kernel rows [8,1] {
    %0 = load buf0 [3,0] : f64
    %1 = load buf0 [3,0] offset 1 : f64
    %2 = load buf0 [3,0] offset 2 : f64
    %3 = load buf1 [2,0] : f64
    %4 = load buf1 [2,0] offset 1 : f64
    %5 = mul %0, %1 : f64
    %6 = sub %5, %2 : f64
    %7 = mul %3, %6 : f64
    %8 = div %4, %7 : f64
    store buf2 [3,1] = %6
    store buf2 [3,1] offset 1 = %7
    store buf2 [3,1] offset 2 = %8
  }
}
";
        let program = rfx_ir::mir::parse(text).expect("parse");
        let (lir, _) = rfx_lower::lower(&program, &rfx_lower::LowerConfig::default()).expect("lower");
        lir.kernels()[0].body.clone()
    }

    #[test]
    fn loads_move_to_their_uses_and_stores_to_their_values() {
        let body = body();
        let o = emission_order(&body).expect("an order");
        let mut sorted = o.order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..body.len()).collect::<Vec<_>>(), "a permutation");
        let at = |i: usize| o.order.iter().position(|&j| j == i).expect("emitted");
        for (i, defs) in o.defs.iter().enumerate() {
            for d in defs.iter().flatten() {
                assert!(at(*d) < at(i), "{i} before its source {d}: {:?}", o.order);
            }
        }
        let stores: Vec<usize> = (0..body.len())
            .filter(|&i| matches!(body[i], Inst::Store { .. }))
            .collect();
        let y_loads: Vec<usize> = (0..body.len())
            .filter(|&i| matches!(&body[i], Inst::Load { buf, .. } if buf.index() == 1))
            .collect();
        assert_eq!((stores.len(), y_loads.len()), (3, 2));
        // The first output is stored before `y` is read; the stores keep their order.
        assert!(y_loads.iter().all(|&l| at(stores[0]) < at(l)), "{:?}", o.order);
        assert!(at(stores[0]) < at(stores[1]) && at(stores[1]) < at(stores[2]));
    }

    #[test]
    fn a_body_that_reads_a_buffer_it_writes_keeps_its_order() {
        let mut body = body();
        for inst in &mut body {
            if let Inst::Load { buf, .. } = inst
                && buf.index() == 1
            {
                *buf = BufId::new(2);
            }
        }
        assert!(emission_order(&body).is_none());
    }
}
