//! The walk of an LIR program shared by the exported languages.
//!
//! Each kernel becomes a block of the one exported function: its slots are local variables, its
//! preamble runs once (when its loop nest is not empty), then its loop nest runs sequentially in
//! row-major order. Reductions keep `reduce_lanes` partials per output and, when blocked, the
//! binary counter of leaves of [`rfx_ir::lir::ReduceLeaves`], exactly as the interpreter does.
//!
//! The walk decides the loops, their order and the reduction state; a [`Dialect`] spells each
//! statement and expression in its language (C in `emit.rs`, Rust in `rust.rs`).

use rfx_ir::lir::{Inst, LirKernel, LirProgram, ReduceLeaves, ScanOrder, SlotId};
use rfx_ir::{BinaryOp, BufId, CmpOp, DType, ReduceOp, Scalar, UnaryOp};

use crate::ExportError;

/// How one language writes the statements and expressions the walk asks for.
///
/// Statement methods return whole lines (without indentation); expression methods return an
/// expression whose operands are slot names, literals or other such expressions.
pub(crate) trait Dialect {
    /// Refuses an instruction the language cannot emit within its documented accuracy.
    fn check(&self, kernel: &LirKernel, inst: &Inst) -> Result<(), ExportError>;
    /// The type of loop indices in `kernel`.
    fn index_type(&self, program: &LirProgram, kernel: &LirKernel) -> &'static str;
    /// An index literal.
    fn uint(&self, n: usize) -> String;
    /// A one-line comment.
    fn comment(&self, text: &str) -> String;
    /// Slot `name` of `dtype`, set to `zero`.
    fn slot(&self, name: &str, dtype: DType, zero: &str) -> Vec<String>;
    /// A scan accumulator (set to `identity` before its first use by the walk).
    fn scan_acc(&self, name: &str, dtype: DType, identity: &str) -> Vec<String>;
    /// Opens `for var in 0..n` (closed by a `}` line).
    fn for_open(&self, var: &str, n: usize, index_ty: &str) -> Vec<String>;
    /// An immutable index variable.
    fn let_index(&self, var: &str, value: &str, index_ty: &str) -> String;
    /// Opens `if cond` (closed by a `}` line).
    fn if_open(&self, cond: &str) -> String;
    /// Opens `while cond` (closed by a `}` line).
    fn while_open(&self, cond: &str) -> String;
    /// Declares the lane counter `l` of a reduction block.
    fn lane_var(&self, index_ty: &str) -> Vec<String>;
    /// An array of `lanes` partials, each set to `init`.
    fn lane_array(&self, name: &str, dtype: DType, lanes: usize, init: &str) -> Vec<String>;
    /// A scratch array of `lanes` values, written before it is read (`init` where the language
    /// needs a value).
    fn scratch_array(&self, name: &str, dtype: DType, lanes: usize, init: &str) -> String;
    /// `stmt` (which reads `l`) for each lane `l` in `from..lanes`, as one line.
    fn each_lane(&self, from: usize, lanes: usize, stmt: &str) -> String;
    /// The leaf stack `st{i}[depth][lanes]`, its leaf counter `cnt{i}` and its height `top{i}`.
    fn leaf_stack(&self, i: usize, dtype: DType, depth: usize, lanes: usize, identity: &str) -> Vec<String>;
    /// A local `name` of `dtype` set to `value`, assigned again later.
    fn local(&self, name: &str, dtype: DType, value: &str) -> Vec<String>;
    /// A local counter `name` of the stack's height type set to `value`.
    fn height(&self, name: &str, value: &str) -> String;
    /// `c`, the leaf counter `cnt{i}` incremented.
    fn next_leaf(&self, i: usize) -> String;
    /// The expression of `value` of its own dtype.
    fn literal(&mut self, value: Scalar) -> String;
    /// `op x` for `x` of `dtype`.
    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &str) -> Result<String, ExportError>;
    /// `a op b` for operands of `dtype`.
    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &str, b: &str) -> String;
    /// `x` of `from` converted to `to`.
    fn cast(&mut self, from: DType, to: DType, x: &str) -> String;
    /// The loop position `value` (an index expression) as a `dtype` value.
    fn index_value(&self, dtype: DType, value: &str) -> String;
    /// `cond ? on_true : on_false`.
    fn select(&self, cond: &str, on_true: &str, on_false: &str) -> String;
    /// The clamped element index of a gather by `index` (a slot of `dtype`) into `last + 1`
    /// elements.
    fn gather_index(&self, index: &str, dtype: DType, last: usize) -> String;
    /// Element `element` of `buf` as a register value.
    fn read(&mut self, buf: BufId, element: &str) -> String;
    /// The statement storing register `value` into element `element` of `buf`.
    fn store(&mut self, buf: BufId, element: &str, value: &str) -> String;
}

/// Walks `program`, printing every kernel's block through `dialect`; returns the function body
/// lines (indented for a function body).
pub(crate) fn walk<D: Dialect>(program: &LirProgram, dialect: &mut D) -> Result<String, ExportError> {
    let mut w = Walk {
        program,
        d: dialect,
        out: String::new(),
    };
    for (k, kernel) in program.kernels().iter().enumerate() {
        w.kernel(k, kernel)?;
    }
    Ok(w.out)
}

struct Walk<'a, D> {
    program: &'a LirProgram,
    d: &'a mut D,
    out: String,
}

/// Where each reduction keeps its state, by body instruction index.
struct ReduceState {
    inst: usize,
    op: ReduceOp,
    buf: BufId,
    dtype: DType,
    blocked: bool,
}

impl<D: Dialect> Walk<'_, D> {
    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn lines(&mut self, depth: usize, lines: Vec<String>) {
        for text in lines {
            self.line(depth, &text);
        }
    }

    fn buf_dtype(&self, buf: BufId) -> DType {
        self.program.buffer(buf).map_or(DType::F32, |b| b.ty.dtype)
    }

    fn kernel(&mut self, k: usize, kernel: &LirKernel) -> Result<(), ExportError> {
        for inst in kernel.preamble.iter().chain(&kernel.body) {
            self.d.check(kernel, inst)?;
        }
        let index_ty = self.d.index_type(self.program, kernel);
        let comment = self.d.comment(&format!(
            "kernel {k}: {} over [{}]",
            kernel.name,
            join(&kernel.dims)
        ));
        self.line(1, &comment);
        self.line(1, "{");
        for (s, &dtype) in kernel.slots.iter().enumerate() {
            let zero = self.d.literal(Scalar::zero(dtype));
            let slot = self.d.slot(&format!("s{s}"), dtype, &zero);
            self.lines(2, slot);
        }
        let rank = kernel.dims.len();
        let split = rank - kernel.reduce_dims.min(rank);
        let (leading, reduced) = kernel.dims.split_at(split);
        let leading_numel: usize = leading.iter().product();
        let reduced_numel: usize = reduced.iter().product();
        if leading_numel > 0 && reduced_numel > 0 {
            for inst in &kernel.preamble {
                self.inst(2, kernel, inst, None)?;
            }
        }
        if leading_numel == 0 {
            self.line(1, "}");
            return Ok(());
        }
        // Scan accumulators.
        let scans: Vec<usize> = kernel
            .body
            .iter()
            .enumerate()
            .filter_map(|(i, inst)| matches!(inst, Inst::Scan { .. }).then_some(i))
            .collect();
        for &i in &scans {
            if let Inst::Scan { dst, op, .. } = &kernel.body[i] {
                let dtype = kernel.slot_dtype(*dst).unwrap_or(DType::F32);
                let identity = self.identity(op.reduce_op(), dtype);
                let acc = self.d.scan_acc(&format!("a{i}"), dtype, &identity);
                self.lines(2, acc);
            }
        }
        let mut depth = 2;
        for (d, &n) in leading.iter().enumerate() {
            let last = d + 1 == leading.len();
            if last && kernel.scan == Some(ScanOrder::Reverse) {
                let open = self.d.for_open(&format!("r{d}"), n, index_ty);
                self.lines(depth, open);
                let reversed = format!("{} - r{d}", self.d.uint(n - 1));
                let index = self.d.let_index(&format!("i{d}"), &reversed, index_ty);
                self.line(depth + 1, &index);
            } else {
                let open = self.d.for_open(&format!("i{d}"), n, index_ty);
                self.lines(depth, open);
            }
            depth += 1;
            if last && kernel.scan.is_some() {
                let first = if kernel.scan == Some(ScanOrder::Reverse) {
                    format!("r{d}")
                } else {
                    format!("i{d}")
                };
                let mut inits = Vec::new();
                for &i in &scans {
                    if let Inst::Scan { dst, op, .. } = &kernel.body[i] {
                        let dtype = kernel.slot_dtype(*dst).unwrap_or(DType::F32);
                        inits.push(format!("a{i} = {};", self.identity(op.reduce_op(), dtype)));
                    }
                }
                let open = self.d.if_open(&format!("{first} == 0"));
                self.line(depth, &format!("{open} {} }}", inits.join(" ")));
            }
        }
        if reduced.is_empty() {
            for (i, inst) in kernel.body.iter().enumerate() {
                self.inst(depth, kernel, inst, Some(&format!("a{i}")))?;
            }
        } else {
            self.reduction(depth, kernel, split, index_ty)?;
        }
        for _ in leading {
            depth -= 1;
            self.line(depth, "}");
        }
        self.line(1, "}");
        Ok(())
    }

    /// The reduced loops and the writes of one leading point (its indices are in scope).
    fn reduction(
        &mut self,
        depth: usize,
        kernel: &LirKernel,
        split: usize,
        index_ty: &str,
    ) -> Result<(), ExportError> {
        let rank = kernel.dims.len();
        let reduced = &kernel.dims[split..];
        let lanes = kernel.schedule.reduce_lanes.max(1) as usize;
        let reduced_numel: usize = reduced.iter().product();
        let row_len = reduced.last().copied().unwrap_or(1);
        let rows = reduced_numel.checked_div(row_len).unwrap_or(0);
        let leaves = ReduceLeaves::of(kernel.schedule.reduce_lanes, rows, row_len);
        let stack_depth = rfx_ir::lir::reduce_stack_depth(leaves.count(rows, row_len)).max(1);
        let mut states = Vec::new();
        for (i, inst) in kernel.body.iter().enumerate() {
            if let Inst::Reduce { op, buf, .. } = inst {
                let dtype = self.buf_dtype(*buf);
                let blocked = rfx_ir::lir::reduce_is_blocked(*op, dtype, kernel.schedule.reduce_lanes)
                    && leaves != ReduceLeaves::One;
                states.push(ReduceState {
                    inst: i,
                    op: *op,
                    buf: *buf,
                    dtype,
                    blocked,
                });
            }
        }
        self.line(depth, "{");
        let d1 = depth + 1;
        let lane_var = self.d.lane_var(index_ty);
        self.lines(d1, lane_var);
        for st in &states {
            let id = self.identity(st.op, st.dtype);
            let i = st.inst;
            let array = self.d.lane_array(&format!("a{i}"), st.dtype, lanes, &id);
            self.lines(d1, array);
            if st.blocked {
                let stack = self.d.leaf_stack(i, st.dtype, stack_depth, lanes, &id);
                self.lines(d1, stack);
            }
        }
        let mut d = d1;
        // An empty reduction writes the finished identities (its loops would never run).
        let reduced: &[usize] = if reduced_numel == 0 { &[] } else { reduced };
        let body_runs = reduced_numel > 0;
        for (j, &n) in reduced.iter().enumerate() {
            let dim = split + j;
            let open = self.d.for_open(&format!("i{dim}"), n, index_ty);
            self.lines(d, open);
            d += 1;
        }
        let lane = if lanes == 1 {
            "0".to_string()
        } else {
            format!("i{} % {}", rank - 1, self.d.uint(lanes))
        };
        if body_runs {
            for (i, inst) in kernel.body.iter().enumerate() {
                self.inst(d, kernel, inst, Some(&format!("a{i}[{lane}]")))?;
            }
        }
        if body_runs && states.iter().any(|s| s.blocked) {
            let cond = self.leaf_condition(kernel, split, leaves, rows, row_len);
            let open = self.d.if_open(&cond);
            self.line(d, &open);
            for st in states.iter().filter(|s| s.blocked) {
                self.push_leaf(d + 1, st, lanes);
            }
            self.line(d, "}");
        }
        for _ in reduced {
            d -= 1;
            self.line(d, "}");
        }
        let lead = row_expr(self.d, &kernel.dims[..split], 0);
        for st in &states {
            if st.blocked {
                self.fold_stack(d1, st, lanes);
            }
            self.write_reduced(d1, st, lanes, reduced_numel, &lead);
        }
        self.line(depth, "}");
        Ok(())
    }

    /// When a leaf of a blocked reduction ends (after the element at the current indices).
    fn leaf_condition(
        &self,
        kernel: &LirKernel,
        split: usize,
        leaves: ReduceLeaves,
        rows: usize,
        row_len: usize,
    ) -> String {
        let rank = kernel.dims.len();
        let u = |n: usize| self.d.uint(n);
        let j = format!("i{}", rank - 1);
        let row = row_expr(self.d, &kernel.dims[split..rank - 1], split);
        match leaves {
            ReduceLeaves::One => "0".to_string(),
            ReduceLeaves::RowGroups { rows_per_leaf } => format!(
                "{j} + {one} == {} && ((({row}) + {one}) % {} == {zero} || ({row}) + {one} == {})",
                u(row_len),
                u(rows_per_leaf),
                u(rows),
                one = u(1),
                zero = u(0),
            ),
            ReduceLeaves::RowPieces { points } => format!(
                "{j} + {one} == {} || ({j} + {one}) % {} == {zero}",
                u(row_len),
                u(points),
                one = u(1),
                zero = u(0),
            ),
        }
    }

    /// Folds reduction `st`'s leaf stack from the top into its partials:
    /// s0 ∘ (s1 ∘ (… ∘ s_top)).
    fn fold_stack(&mut self, d1: usize, st: &ReduceState, lanes: usize) {
        let i = st.inst;
        let (zero, one) = (self.d.uint(0), self.d.uint(1));
        let open = self.d.if_open(&format!("top{i} > {zero}"));
        self.line(d1, &open);
        let e = self.d.height("e", &format!("top{i} - {one}"));
        self.line(d1 + 1, &e);
        let copy = self.d.each_lane(0, lanes, &format!("a{i}[l] = st{i}[e][l];"));
        self.line(d1 + 1, &copy);
        let open = self.d.while_open(&format!("e > {zero}"));
        self.line(d1 + 1, &open);
        self.line(d1 + 2, &format!("e = e - {one};"));
        let c = self.combine(st.op, st.dtype, &format!("st{i}[e][l]"), &format!("a{i}[l]"));
        let merge = self.d.each_lane(0, lanes, &format!("a{i}[l] = {c};"));
        self.line(d1 + 2, &merge);
        self.line(d1 + 1, "}");
        self.line(d1, "}");
    }

    /// Combines reduction `st`'s lanes, finishes the value and stores it at `lead`.
    fn write_reduced(&mut self, d1: usize, st: &ReduceState, lanes: usize, count: usize, lead: &str) {
        let i = st.inst;
        self.line(d1, "{");
        let t = self.d.local("t", st.dtype, &format!("a{i}[0]"));
        self.lines(d1 + 1, t);
        if lanes > 1 {
            let c = self.combine(st.op, st.dtype, "t", &format!("a{i}[l]"));
            let fold = self.d.each_lane(1, lanes, &format!("t = {c};"));
            self.line(d1 + 1, &fold);
        }
        let fin = self.finish(st.op, st.dtype, "t", count);
        let store = self.d.store(st.buf, lead, &fin);
        self.line(d1 + 1, &store);
        self.line(d1, "}");
    }

    /// Pushes reduction `st`'s partials as one leaf onto its binary counter.
    fn push_leaf(&mut self, depth: usize, st: &ReduceState, lanes: usize) {
        let i = st.inst;
        let id = self.identity(st.op, st.dtype);
        let merged = self.combine(st.op, st.dtype, &format!("st{i}[top{i}][l]"), "leaf[l]");
        let (zero, one) = (self.d.uint(0), self.d.uint(1));
        self.line(depth, "{");
        let leaf = self.d.scratch_array("leaf", st.dtype, lanes, &id);
        self.line(depth + 1, &leaf);
        let next = self.d.next_leaf(i);
        self.line(depth + 1, &next);
        let take = self
            .d
            .each_lane(0, lanes, &format!("{{ leaf[l] = a{i}[l]; a{i}[l] = {id}; }}"));
        self.line(depth + 1, &take);
        let open = self.d.while_open(&format!("(c & {one}) == {zero}"));
        self.line(depth + 1, &open);
        self.line(depth + 2, &format!("top{i} = top{i} - {one};"));
        let merge = self.d.each_lane(0, lanes, &format!("leaf[l] = {merged};"));
        self.line(depth + 2, &merge);
        self.line(depth + 2, "c >>= 1;");
        self.line(depth + 1, "}");
        let put = self
            .d
            .each_lane(0, lanes, &format!("st{i}[top{i}][l] = leaf[l];"));
        self.line(depth + 1, &put);
        self.line(depth + 1, &format!("top{i} = top{i} + {one};"));
        self.line(depth, "}");
    }

    fn identity(&mut self, op: ReduceOp, dtype: DType) -> String {
        let value = rfx_ir::semantics::reduce_identity(op, dtype).unwrap_or(Scalar::zero(dtype));
        self.d.literal(value)
    }

    fn combine(&mut self, op: ReduceOp, dtype: DType, acc: &str, x: &str) -> String {
        let binary = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        self.d.binary(binary, dtype, acc, x)
    }

    fn finish(&mut self, op: ReduceOp, dtype: DType, acc: &str, count: usize) -> String {
        match (op, dtype) {
            (ReduceOp::Mean, DType::F32) => {
                let n = self.d.literal(Scalar::F32(count as f32));
                format!("{acc} / {n}")
            }
            (ReduceOp::Mean, DType::F64) => {
                let n = self.d.literal(Scalar::F64(count as f64));
                format!("{acc} / {n}")
            }
            (ReduceOp::Sum, DType::F32 | DType::F64) if count == 0 => self.d.literal(Scalar::zero(dtype)),
            _ => acc.to_string(),
        }
    }

    fn offset(&self, kernel: &LirKernel, strides: &[usize]) -> String {
        let terms: Vec<String> = strides
            .iter()
            .enumerate()
            .filter(|&(d, &s)| s != 0 && kernel.dims.get(d).is_some_and(|&n| n > 1))
            .map(|(d, &s)| {
                if s == 1 {
                    format!("i{d}")
                } else {
                    format!("i{d} * {}", self.d.uint(s))
                }
            })
            .collect();
        if terms.is_empty() {
            "0".to_string()
        } else {
            terms.join(" + ")
        }
    }

    fn inst(
        &mut self,
        depth: usize,
        kernel: &LirKernel,
        inst: &Inst,
        acc: Option<&str>,
    ) -> Result<(), ExportError> {
        let dtype = |s: SlotId| kernel.slot_dtype(s).unwrap_or(DType::F32);
        let text = match inst {
            Inst::Load {
                dst,
                buf,
                strides,
                offset,
            } => {
                let element = match offset {
                    0 => self.offset(kernel, strides),
                    at => format!("{} + {}", self.d.uint(*at), self.offset(kernel, strides)),
                };
                format!("{dst} = {};", self.d.read(*buf, &element))
            }
            Inst::Gather { dst, buf, index } => {
                let last = self
                    .program
                    .buffer(*buf)
                    .map_or(0, |b| b.ty.shape.numel().saturating_sub(1));
                let element = self.d.gather_index(&index.to_string(), dtype(*index), last);
                format!("{dst} = {};", self.d.read(*buf, &element))
            }
            Inst::Index { dst, strides } => {
                let value = self.d.index_value(dtype(*dst), &self.offset(kernel, strides));
                format!("{dst} = {value};")
            }
            Inst::Const { dst, value } => format!("{dst} = {};", self.d.literal(*value)),
            Inst::Unary { dst, op, src } => {
                let value = self.d.unary(*op, dtype(*src), &src.to_string())?;
                format!("{dst} = {value};")
            }
            Inst::Binary { dst, op, lhs, rhs } => {
                let value = self
                    .d
                    .binary(*op, dtype(*lhs), &lhs.to_string(), &rhs.to_string());
                format!("{dst} = {value};")
            }
            Inst::Compare { dst, op, lhs, rhs } => {
                let symbol = match op {
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                };
                format!("{dst} = {lhs} {symbol} {rhs};")
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => format!(
                "{dst} = {};",
                self.d
                    .select(&cond.to_string(), &on_true.to_string(), &on_false.to_string())
            ),
            Inst::Cast { dst, src } => {
                let value = self.d.cast(dtype(*src), dtype(*dst), &src.to_string());
                format!("{dst} = {value};")
            }
            Inst::Store { buf, strides, src } => {
                let element = self.offset(kernel, strides);
                self.d.store(*buf, &element, &src.to_string())
            }
            Inst::Reduce { op, buf, src } => {
                let Some(acc) = acc else { return Ok(()) };
                let combined = self.combine(*op, self.buf_dtype(*buf), acc, &src.to_string());
                format!("{acc} = {combined};")
            }
            Inst::Scan { dst, op, src, coef } => {
                let Some(acc) = acc else { return Ok(()) };
                let dt = dtype(*src);
                if let Some(coef) = coef {
                    let product = self.d.binary(BinaryOp::Mul, dt, &coef.to_string(), acc);
                    self.line(depth, &format!("{acc} = {product};"));
                }
                let combined = self.combine(op.reduce_op(), dt, acc, &src.to_string());
                format!("{acc} = {combined}; {dst} = {acc};")
            }
        };
        self.line(depth, &text);
        Ok(())
    }
}

/// The row-major linear index over `dims`, whose first loop index is `i{first}`.
fn row_expr<D: Dialect>(d: &D, dims: &[usize], first: usize) -> String {
    if dims.is_empty() {
        return "0".to_string();
    }
    let mut expr = format!("i{first}");
    for (k, &n) in dims.iter().enumerate().skip(1) {
        expr = format!("({expr}) * {} + i{}", d.uint(n), first + k);
    }
    expr
}

fn join(dims: &[usize]) -> String {
    dims.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
