//! The walk of an LIR program shared by the exported languages.
//!
//! Each kernel becomes a block of the one exported function: its slots are local variables, its
//! preamble runs once (when its loop nest is not empty), then its loop nest runs sequentially in
//! row-major order. Reductions keep `reduce_lanes` partials per output and, when blocked, the
//! binary counter of leaves of [`rfx_ir::lir::ReduceLeaves`], exactly as the interpreter does.
//!
//! The walk decides the loops, their order and the reduction state; a [`Dialect`] spells each
//! statement and expression in its language (C in `emit.rs`, Rust in `rust.rs`).
//!
//! Before any code is written, [`loop_shapes`] decides each kernel's [`LoopShape`]: an
//! elementwise kernel that calls an op with a fast variant (one that flags the elements it
//! cannot compute exactly, such as `sin` of a huge argument) runs a first loop with the fast
//! variants and, only when some element was flagged, the same loop again with the exact code.

use rfx_ir::lir::{Inst, LirKernel, LirProgram, ReduceLeaves, ScanOrder, SlotId, Storage};
use rfx_ir::repeat::{KernelLoop, Step, steps};
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
    /// Opens a loop of `trips` iterations (at least one) with the counter `var` (closed by a
    /// `}` line); the trip count is the only place the count appears.
    fn trips_open(&self, var: &str, trips: u64) -> String;
    /// Leaves the innermost trips loop when `cond` (a `bool` expression) is false.
    fn break_unless(&self, cond: &str) -> String;
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
    /// Whether the language has a fast variant of `inst`: one that computes the exact result
    /// on the common path and flags the elements that need the exact code.
    fn has_fast_variant(&self, _kernel: &LirKernel, _inst: &Inst) -> bool {
        false
    }
    /// Which variant of the ops with a fast variant the expressions call from now on.
    fn set_variant(&mut self, _variant: Variant) {}
    /// Declares the slow-path flag `name`, clear.
    fn flag(&self, name: &str) -> String {
        format!("let mut {name}: u32 = 0;")
    }
    /// `acc |= flag;`.
    fn or_flag(&self, acc: &str, flag: &str) -> String {
        format!("{acc} |= {flag};")
    }
}

/// The code an op with a fast variant is spelled as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The exact code (every loop of [`LoopShape::Exact`]).
    Exact,
    /// The fast variant, which sets the flag `slow` on the elements it cannot compute.
    Fast,
    /// The fast variant's result where it applies and the exact code's elsewhere (a branch), so
    /// that every element's result is the same whichever loop computed it. Also the preamble's
    /// code, which runs once per call.
    Full,
}

/// How a kernel's loop nest is emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoopShape {
    /// One loop nest with the exact code.
    Exact,
    /// A loop nest with the fast variants that flags the elements that need the exact code
    /// (`any_slow`), then, when one was flagged, the same loop nest with [`Variant::Full`]. Only
    /// for kernels whose second run recomputes the first's results from unchanged inputs: no
    /// reduction or scan state, and no buffer both read and written (or sharing arena bytes
    /// with one written) by the kernel.
    FastThenExact,
}

/// Each kernel's loop shape, decided from the ops it calls and the buffers it reads and writes.
pub(crate) fn loop_shapes<D: Dialect>(program: &LirProgram, dialect: &D) -> Vec<LoopShape> {
    program
        .kernels()
        .iter()
        .map(|kernel| {
            let fast = kernel
                .body
                .iter()
                .any(|inst| dialect.has_fast_variant(kernel, inst));
            if fast && reruns_cleanly(program, kernel) {
                LoopShape::FastThenExact
            } else {
                LoopShape::Exact
            }
        })
        .collect()
}

/// Whether running `kernel`'s loop nest twice computes the same results as once: it carries no
/// state from one point to the next (reduction, scan), and writes no buffer it reads, nor one
/// whose arena bytes overlap those of a buffer it reads (the memory plan reuses bytes).
fn reruns_cleanly(program: &LirProgram, kernel: &LirKernel) -> bool {
    if kernel.reduce_dims > 0 || kernel.scan.is_some() {
        return false;
    }
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for inst in kernel.preamble.iter().chain(&kernel.body) {
        match inst {
            Inst::Load { buf, .. } | Inst::Gather { buf, .. } => reads.push(*buf),
            Inst::Store { buf, .. } => writes.push(*buf),
            Inst::Reduce { .. } | Inst::Scan { .. } => return false,
            _ => {}
        }
    }
    let bytes = |buf: BufId| {
        program.buffer(buf).and_then(|b| match b.storage {
            Storage::Arena { offset } => {
                Some((offset, offset + b.ty.shape.numel() * b.ty.dtype.size_bytes()))
            }
            _ => None,
        })
    };
    writes.iter().all(|&w| {
        reads.iter().all(|&r| {
            r != w
                && match (bytes(r), bytes(w)) {
                    (Some((r0, r1)), Some((w0, w1))) => r1 <= w0 || w1 <= r0,
                    _ => true,
                }
        })
    })
}

/// Walks `program`, printing every kernel's block through `dialect` in the order of its steps
/// ([`rfx_ir::repeat::steps`]): a loop over a range of kernels is a loop of the language around
/// their blocks, whose trip count appears once, as a literal, so that the code's size does not
/// depend on it; with an exit flag, the loop breaks after an iteration that leaves the flag
/// false. A loop of no trips is a comment. Returns the function body lines (indented for a
/// function body).
pub(crate) fn walk<D: Dialect>(program: &LirProgram, dialect: &mut D) -> Result<String, ExportError> {
    let shapes = loop_shapes(program, dialect);
    let plan = steps(program.kernels().len(), program.loops())
        .map_err(|e| ExportError::InvalidProgram(e.to_string()))?;
    let mut w = Walk {
        program,
        d: dialect,
        out: String::new(),
        indent: 0,
    };
    w.steps(&plan, &shapes, 0)?;
    Ok(w.out)
}

struct Walk<'a, D> {
    program: &'a LirProgram,
    d: &'a mut D,
    out: String,
    /// Levels of indentation added to every line: one per enclosing program loop.
    indent: usize,
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
    /// The blocks of `plan`'s kernels, inside `level` program loops.
    fn steps(&mut self, plan: &[Step], shapes: &[LoopShape], level: usize) -> Result<(), ExportError> {
        for step in plan {
            match step {
                Step::Kernel(k) => {
                    let kernel = self
                        .program
                        .kernels()
                        .get(*k)
                        .ok_or_else(|| ExportError::InvalidProgram(format!("no kernel {k}")))?;
                    let shape = shapes.get(*k).copied().unwrap_or(LoopShape::Exact);
                    self.kernel(*k, kernel, shape)?;
                }
                Step::Loop { spec, body } => self.repeat(spec, body, shapes, level)?,
            }
        }
        Ok(())
    }

    /// A program loop: its body's blocks inside a loop of `spec.trips` iterations, left early
    /// when the exit flag is false after one.
    fn repeat(
        &mut self,
        spec: &KernelLoop,
        body: &[Step],
        shapes: &[LoopShape],
        level: usize,
    ) -> Result<(), ExportError> {
        let exit = match spec.exit {
            None => None,
            Some(flag) => {
                let is_flag = self
                    .program
                    .buffer(flag)
                    .is_some_and(|b| b.ty.dtype == DType::Bool && b.ty.shape.numel() == 1);
                if !is_flag {
                    return Err(ExportError::InvalidProgram(format!(
                        "the exit flag {flag} of the loop over kernels {}..{} is not a bool scalar",
                        spec.first, spec.end
                    )));
                }
                Some(flag)
            }
        };
        let last = spec.end - 1;
        if spec.trips == 0 {
            let comment = self
                .d
                .comment(&format!("kernels {}..={last} repeat no times", spec.first));
            self.line(1, &comment);
            return Ok(());
        }
        let comment = self.d.comment(&match exit {
            Some(flag) => format!("kernels {}..={last} repeat while {flag} holds", spec.first),
            None => format!("kernels {}..={last} repeat", spec.first),
        });
        self.line(1, &comment);
        let open = self.d.trips_open(&format!("t{level}"), spec.trips);
        self.line(1, &open);
        self.indent += 1;
        let done = self.steps(body, shapes, level + 1);
        if done.is_ok()
            && let Some(flag) = exit
        {
            let cond = self.d.read(flag, "0");
            let stop = self.d.break_unless(&cond);
            self.line(1, &stop);
        }
        self.indent -= 1;
        done?;
        self.line(1, "}");
        Ok(())
    }

    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth + self.indent {
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

    fn kernel(&mut self, k: usize, kernel: &LirKernel, shape: LoopShape) -> Result<(), ExportError> {
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
            // The preamble runs once: the fast variants with a branch to the exact code.
            self.d.set_variant(Variant::Full);
            let done = kernel
                .preamble
                .iter()
                .try_for_each(|inst| self.inst(2, kernel, inst, None));
            self.d.set_variant(Variant::Exact);
            done?;
        }
        if leading_numel == 0 {
            self.line(1, "}");
            return Ok(());
        }
        if shape == LoopShape::FastThenExact && reduced.is_empty() {
            self.fast_then_exact(kernel, leading, index_ty)?;
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

    /// [`LoopShape::FastThenExact`]: the elementwise loop nest over `leading` with the fast
    /// variants, each point's flags gathered into `any_slow`, then the loop nest with
    /// [`Variant::Full`] when a flag was set.
    fn fast_then_exact(
        &mut self,
        kernel: &LirKernel,
        leading: &[usize],
        index_ty: &str,
    ) -> Result<(), ExportError> {
        let any = self.d.flag("any_slow");
        self.line(2, &any);
        for fast in [true, false] {
            let mut depth = 2;
            if !fast {
                let open = self.d.if_open("any_slow != 0");
                self.line(depth, &open);
                depth += 1;
            }
            for (d, &n) in leading.iter().enumerate() {
                let open = self.d.for_open(&format!("i{d}"), n, index_ty);
                self.lines(depth, open);
                depth += 1;
            }
            if fast {
                let slow = self.d.flag("slow");
                self.line(depth, &slow);
            }
            self.d
                .set_variant(if fast { Variant::Fast } else { Variant::Full });
            let done = kernel
                .body
                .iter()
                .try_for_each(|inst| self.inst(depth, kernel, inst, None));
            self.d.set_variant(Variant::Exact);
            done?;
            if fast {
                let or = self.d.or_flag("any_slow", "slow");
                self.line(depth, &or);
            }
            for _ in leading {
                depth -= 1;
                self.line(depth, "}");
            }
            if !fast {
                self.line(2, "}");
            }
        }
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

    /// Combines reduction `st`'s lanes by the pairwise tree of
    /// [`rfx_ir::lir::reduce_lane_levels`] (one loop per level, in the partials' array),
    /// finishes the value and stores it at `lead`.
    fn write_reduced(&mut self, d1: usize, st: &ReduceState, lanes: usize, count: usize, lead: &str) {
        let i = st.inst;
        self.line(d1, "{");
        for (half, offset) in rfx_ir::lir::reduce_lane_levels(u32::try_from(lanes).unwrap_or(1)) {
            let level = if half == 1 {
                let c = self.combine(st.op, st.dtype, &format!("a{i}[0]"), &format!("a{i}[{offset}]"));
                format!("a{i}[0] = {c};")
            } else {
                let upper = format!("a{i}[l + {}]", self.d.uint(offset));
                let c = self.combine(st.op, st.dtype, &format!("a{i}[l]"), &upper);
                self.d.each_lane(0, half, &format!("a{i}[l] = {c};"))
            };
            self.line(d1 + 1, &level);
        }
        let t = self.d.local("t", st.dtype, &format!("a{i}[0]"));
        self.lines(d1 + 1, t);
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
                // An integer or boolean compared with itself has a known result; printed as
                // `x >= x`, GCC's -Wtautological-compare would reject the file under -Werror.
                // (A float compared with itself is false for NaN and stays a comparison.)
                if lhs == rhs && !dtype(*lhs).is_float() {
                    let reflexive = matches!(op, CmpOp::Le | CmpOp::Ge | CmpOp::Eq);
                    format!("{dst} = {};", self.d.literal(Scalar::Bool(reflexive)))
                } else {
                    format!("{dst} = {lhs} {symbol} {rhs};")
                }
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
            Inst::Store {
                buf,
                strides,
                offset,
                src,
            } => {
                let mut element = match offset {
                    0 => self.offset(kernel, strides),
                    at => format!("{} + {}", self.d.uint(*at), self.offset(kernel, strides)),
                };
                // A row store's row: its clamped index (a preamble slot) times the row stride.
                if let Some(row) = kernel.row_store.as_ref().filter(|r| r.buf == *buf) {
                    let last = row.rows.saturating_sub(1);
                    let at = self.d.gather_index(&row.index.to_string(), DType::I32, last);
                    element = format!("{at} * {} + {element}", self.d.uint(row.stride));
                }
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

#[cfg(test)]
mod tests {
    use super::{LoopShape, loop_shapes};

    /// A kernel `name` over `dims` (`reduce` of them reduced) with `slots` and `body` lines.
    fn kernel(name: &str, dims: &str, reduce: usize, slots: &str, body: &[&str]) -> String {
        format!(
            "  kernel {name} dims [{dims}] reduce {reduce} vector 1 thread_min 32768 tile 1024 lanes 1 {{\n    \
             slots [{slots}]\n    preamble {{}}\n    body {{\n      {}\n    }}\n  }}\n",
            body.join("\n      ")
        )
    }

    fn shapes(buffers: &str, kernels: &[String]) -> Vec<LoopShape> {
        let text = format!("lir p arena 64 align 64 {{\n{buffers}{}}}\n", kernels.concat());
        let program = rfx_ir::lir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let dialect = crate::emit::test_dialect(&program);
        loop_shapes(&program, &dialect)
    }

    fn unary(name: &str, dtype: &str, op: &str, src: &str, dst: &str) -> String {
        let load = format!("s0 = load {src} [1]");
        let apply = format!("s1 = {op} s0");
        let store = format!("store {dst} [1] = s1");
        kernel(
            name,
            "4",
            0,
            &format!("{dtype}, {dtype}"),
            &[&load, &apply, &store],
        )
    }

    #[test]
    fn elementwise_f32_sin_and_cos_get_the_fast_loop_then_the_exact_one() {
        let io = "  buf0: f32[4] = input x\n  buf1: f32[4] = output y\n";
        for op in ["sin", "cos"] {
            let k = unary("k0", "f32", op, "buf0", "buf1");
            assert_eq!(shapes(io, &[k]), [LoopShape::FastThenExact], "{op}");
        }
        for op in ["exp", "tan", "neg"] {
            let k = unary("k0", "f32", op, "buf0", "buf1");
            assert_eq!(shapes(io, &[k]), [LoopShape::Exact], "{op}");
        }
        let io64 = "  buf0: f64[4] = input x\n  buf1: f64[4] = output y\n";
        let k = unary("k0", "f64", "sin", "buf0", "buf1");
        assert_eq!(shapes(io64, &[k]), [LoopShape::Exact], "f64 sin");
    }

    #[test]
    fn a_reduction_keeps_one_loop() {
        let io = "  buf0: f32[4] = input x\n  buf1: f32[] = output s\n";
        let k = kernel(
            "k0",
            "4",
            1,
            "f32, f32",
            &["s0 = load buf0 [1]", "s1 = sin s0", "reduce sum buf1 = s1"],
        );
        assert_eq!(shapes(io, &[k]), [LoopShape::Exact]);
    }

    /// A kernel whose output shares arena bytes with its input (the memory plan reuses them)
    /// keeps one loop: a second run would read what the first wrote.
    #[test]
    fn an_output_sharing_bytes_with_an_input_keeps_one_loop() {
        let chain = |sin_dst_offset: usize| {
            let buffers = format!(
                "  buf0: f32[4] = input x\n  buf1: f32[4] = output y\n  buf2: f32[4] = arena 0\n  \
                 buf3: f32[4] = arena {sin_dst_offset}\n"
            );
            let kernels = [
                unary("k0", "f32", "neg", "buf0", "buf2"),
                unary("k1", "f32", "sin", "buf2", "buf3"),
                unary("k2", "f32", "neg", "buf3", "buf1"),
            ];
            shapes(&buffers, &kernels)
        };
        use LoopShape::{Exact, FastThenExact};
        assert_eq!(chain(0), [Exact, Exact, Exact]);
        assert_eq!(chain(8), [Exact, Exact, Exact]);
        assert_eq!(chain(16), [Exact, FastThenExact, Exact]);
        // In place: the same buffer read and written.
        let io = "  buf0: f32[4] = input x\n  buf1: f32[4] = output y\n";
        let k = kernel(
            "k0",
            "4",
            0,
            "f32, f32",
            &["s0 = load buf1 [1]", "s1 = sin s0", "store buf1 [1] = s1"],
        );
        assert_eq!(shapes(io, &[k]), [Exact]);
    }
}
