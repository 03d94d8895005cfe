//! The walk of an LIR program that prints its C function.
//!
//! Each kernel becomes a block of the one exported function: its slots are local variables, its
//! preamble runs once (when its loop nest is not empty), then its loop nest runs sequentially in
//! row-major order. Reductions keep `reduce_lanes` partials per output and, when blocked, the
//! binary counter of leaves of [`rfx_ir::lir::ReduceLeaves`], exactly as the interpreter does.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{Inst, LirKernel, LirProgram, ReduceLeaves, ScanOrder, SlotId, Storage};
use rfx_ir::{BinaryOp, BufId, CmpOp, DType, ReduceOp, Scalar, UnaryOp};

use crate::helpers::Helper;
use crate::{ExportError, c_type, work_align, work_layout};

/// Emits the source file of `program` as function `name`.
pub(crate) fn emit_program(program: &LirProgram, name: &str) -> Result<String, ExportError> {
    let mut e = Emitter {
        program,
        prefix: name.to_string(),
        helpers: BTreeSet::new(),
        out: String::new(),
    };
    for (k, kernel) in program.kernels().iter().enumerate() {
        e.kernel(k, kernel)?;
    }
    let mut src = String::new();
    let _ = writeln!(
        src,
        "/* {name}.c: rfx program `{}` exported as C99 (exact IEEE mode).",
        program.name()
    );
    src.push_str(
        " * Compile with -ffp-contract=off (or an ISO mode such as -std=c99) and -fno-math-errno. */\n",
    );
    let _ = writeln!(src, "#include <stdint.h>\n#include \"{name}.h\"\n");
    src.push_str("#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0\n");
    src.push_str(
        "#error \"rfx exports need float and double evaluated in their own types (FLT_EVAL_METHOD 0)\"\n",
    );
    src.push_str("#endif\n");
    // Helpers in dependency order: each one's needs (recursively) first.
    fn visit(h: Helper, emitted: &mut BTreeSet<Helper>, order: &mut Vec<Helper>) {
        if emitted.insert(h) {
            for &n in h.needs() {
                visit(n, emitted, order);
            }
            order.push(h);
        }
    }
    let mut emitted: BTreeSet<Helper> = BTreeSet::new();
    let mut order: Vec<Helper> = Vec::new();
    for &h in &e.helpers {
        visit(h, &mut emitted, &mut order);
    }
    let prefix = format!("{name}_");
    for h in order {
        src.push('\n');
        src.push_str(&h.source().replace("P_", &prefix));
        src.push('\n');
    }
    for (index, buffer) in program.buffers().iter().enumerate() {
        if let Storage::Literal { values } = &buffer.storage {
            src.push('\n');
            src.push_str(&literal_data(name, BufId::new(index), buffer.ty.dtype, values));
        }
    }
    src.push('\n');
    src.push_str(&signature(program, name));
    src.push_str(" {\n");
    let layout = work_layout(program);
    let mut checks = Vec::new();
    for (i, _) in program.inputs().enumerate() {
        checks.push(format!("in_{i} == 0"));
    }
    for (i, _) in program.outputs().enumerate() {
        checks.push(format!("out_{i} == 0"));
    }
    if layout.bytes > 0 {
        checks.push("work == 0".to_string());
    }
    if !checks.is_empty() {
        let _ = writeln!(src, "  if ({}) return 1;", checks.join(" || "));
    }
    if layout.bytes > 0 {
        let _ = writeln!(
            src,
            "  if (((uintptr_t)work % {}u) != 0u) return 2;",
            work_align(program)
        );
    } else {
        src.push_str("  (void)work;\n");
    }
    for (index, buffer) in program.buffers().iter().enumerate() {
        let buf = BufId::new(index);
        let ty = c_type(buffer.ty.dtype);
        let line = match &buffer.storage {
            Storage::Input { .. } => {
                let pos = program.inputs().position(|(b, _, _)| b == buf).unwrap_or(0);
                format!("const {ty} *{buf} = in_{pos};")
            }
            Storage::Output { .. } => {
                let pos = program.outputs().position(|(b, _, _)| b == buf).unwrap_or(0);
                format!("{ty} *{buf} = out_{pos};")
            }
            Storage::Arena { .. } => {
                let offset = layout.offsets.get(index).copied().flatten().unwrap_or(0);
                format!("{ty} *{buf} = ({ty} *)((unsigned char *)work + {offset}u);")
            }
            Storage::Literal { .. } => continue,
        };
        let _ = writeln!(src, "  {line}");
        let _ = writeln!(src, "  (void){buf};");
    }
    src.push_str(&e.out);
    src.push_str("  return 0;\n}\n");
    Ok(src)
}

/// The exported function's prototype (without the `;`): inputs, outputs, then `work`.
pub(crate) fn signature(program: &LirProgram, name: &str) -> String {
    let mut params = Vec::new();
    for (i, (_, _, ty)) in program.inputs().enumerate() {
        params.push(format!("const {} *in_{i}", c_type(ty.dtype)));
    }
    for (i, (_, _, ty)) in program.outputs().enumerate() {
        params.push(format!("{} *out_{i}", c_type(ty.dtype)));
    }
    params.push("void *work".to_string());
    format!("int {name}({})", params.join(", "))
}

/// The `static const` array of literal buffer `buf` (bit patterns, so every value is exact).
fn literal_data(name: &str, buf: BufId, dtype: DType, values: &[Scalar]) -> String {
    let word = match dtype {
        DType::Bool => "uint8_t",
        DType::I32 => "int32_t",
        DType::F32 => "uint32_t",
        DType::F64 => "uint64_t",
    };
    let mut words: Vec<String> = values
        .iter()
        .map(|&v| match v {
            Scalar::Bool(b) => u8::from(b).to_string(),
            Scalar::I32(i32::MIN) => "INT32_MIN".to_string(),
            Scalar::I32(x) => x.to_string(),
            Scalar::F32(x) => format!("0x{:08x}u", x.to_bits()),
            Scalar::F64(x) => format!("UINT64_C(0x{:016x})", x.to_bits()),
        })
        .collect();
    if words.is_empty() {
        words.push("0".to_string());
    }
    let mut text = format!(
        "/* literal {buf}: {} value(s) of {dtype}, as bit patterns */\nstatic const {word} {name}_lit_{}[{}] = {{",
        values.len(),
        buf.index(),
        words.len()
    );
    for (i, chunk) in words.chunks(8).enumerate() {
        text.push_str(if i == 0 { "\n  " } else { ",\n  " });
        text.push_str(&chunk.join(", "));
    }
    text.push_str("\n};\n");
    text
}

fn reg_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "int",
        other => c_type(other),
    }
}

struct Emitter<'a> {
    program: &'a LirProgram,
    prefix: String,
    helpers: BTreeSet<Helper>,
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

impl Emitter<'_> {
    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn buf_dtype(&self, buf: BufId) -> DType {
        self.program.buffer(buf).map_or(DType::F32, |b| b.ty.dtype)
    }

    fn kernel(&mut self, k: usize, kernel: &LirKernel) -> Result<(), ExportError> {
        for inst in kernel.preamble.iter().chain(&kernel.body) {
            check_supported(kernel, inst)?;
        }
        let index_ty = index_type(self.program, kernel);
        self.line(
            1,
            &format!("/* kernel {k}: {} over [{}] */", kernel.name, join(&kernel.dims)),
        );
        self.line(1, "{");
        for (s, &dtype) in kernel.slots.iter().enumerate() {
            let zero = self.literal(Scalar::zero(dtype));
            self.line(2, &format!("{} s{s} = {zero};", reg_type(dtype)));
            self.line(2, &format!("(void)s{s};"));
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
            if let Inst::Scan { dst, .. } = &kernel.body[i] {
                let dtype = kernel.slot_dtype(*dst).unwrap_or(DType::F32);
                self.line(2, &format!("{} a{i};", reg_type(dtype)));
            }
        }
        let mut depth = 2;
        for (d, &n) in leading.iter().enumerate() {
            let last = d + 1 == leading.len();
            if last && kernel.scan == Some(ScanOrder::Reverse) {
                self.line(depth, &format!("{index_ty} r{d};"));
                self.line(depth, &format!("for (r{d} = 0; r{d} < {n}u; ++r{d}) {{"));
                self.line(depth + 1, &format!("const {index_ty} i{d} = {}u - r{d};", n - 1));
            } else {
                self.line(depth, &format!("{index_ty} i{d};"));
                self.line(depth, &format!("for (i{d} = 0; i{d} < {n}u; ++i{d}) {{"));
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
                self.line(depth, &format!("if ({first} == 0) {{ {} }}", inits.join(" ")));
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
        self.line(d1, &format!("{index_ty} l;"));
        self.line(d1, "(void)l;");
        for st in &states {
            let ty = reg_type(st.dtype);
            let id = self.identity(st.op, st.dtype);
            let i = st.inst;
            self.line(d1, &format!("{ty} a{i}[{lanes}];"));
            self.line(d1, &format!("for (l = 0; l < {lanes}u; ++l) a{i}[l] = {id};"));
            if st.blocked {
                self.line(d1, &format!("{ty} st{i}[{stack_depth}][{lanes}];"));
                self.line(d1, &format!("uint64_t cnt{i} = 0; unsigned top{i} = 0;"));
            }
        }
        let mut d = d1;
        // An empty reduction writes the finished identities (its loops would never run).
        let reduced: &[usize] = if reduced_numel == 0 { &[] } else { reduced };
        let body_runs = reduced_numel > 0;
        for (j, &n) in reduced.iter().enumerate() {
            let dim = split + j;
            self.line(d, &format!("{index_ty} i{dim};"));
            self.line(d, &format!("for (i{dim} = 0; i{dim} < {n}u; ++i{dim}) {{"));
            d += 1;
        }
        let lane = if lanes == 1 {
            "0".to_string()
        } else {
            format!("i{} % {lanes}u", rank - 1)
        };
        if body_runs {
            for (i, inst) in kernel.body.iter().enumerate() {
                self.inst(d, kernel, inst, Some(&format!("a{i}[{lane}]")))?;
            }
        }
        if body_runs && states.iter().any(|s| s.blocked) {
            let j = format!("i{}", rank - 1);
            let row = row_expr(&kernel.dims[split..rank - 1], split);
            let cond = match leaves {
                ReduceLeaves::One => "0".to_string(),
                ReduceLeaves::RowGroups { rows_per_leaf } => format!(
                    "{j} + 1u == {row_len}u && ((({row}) + 1u) % {rows_per_leaf}u == 0u || ({row}) + 1u == {rows}u)"
                ),
                ReduceLeaves::RowPieces { points } => {
                    format!("{j} + 1u == {row_len}u || ({j} + 1u) % {points}u == 0u")
                }
            };
            self.line(d, &format!("if ({cond}) {{"));
            for st in states.iter().filter(|s| s.blocked) {
                self.push_leaf(d + 1, st, lanes);
            }
            self.line(d, "}");
        }
        for _ in reduced {
            d -= 1;
            self.line(d, "}");
        }
        let lead = row_expr(&kernel.dims[..split], 0);
        for st in &states {
            let i = st.inst;
            let ty = reg_type(st.dtype);
            if st.blocked {
                // Fold the stack from the top: s0 ∘ (s1 ∘ (… ∘ s_top)).
                self.line(d1, &format!("if (top{i} > 0u) {{"));
                self.line(d1 + 1, &format!("unsigned e = top{i} - 1u;"));
                self.line(
                    d1 + 1,
                    &format!("for (l = 0; l < {lanes}u; ++l) a{i}[l] = st{i}[e][l];"),
                );
                self.line(d1 + 1, "while (e > 0u) {");
                self.line(d1 + 2, "e = e - 1u;");
                let c = self.combine(st.op, st.dtype, &format!("st{i}[e][l]"), &format!("a{i}[l]"));
                self.line(d1 + 2, &format!("for (l = 0; l < {lanes}u; ++l) a{i}[l] = {c};"));
                self.line(d1 + 1, "}");
                self.line(d1, "}");
            }
            self.line(d1, "{");
            self.line(d1 + 1, &format!("{ty} t = a{i}[0];"));
            self.line(d1 + 1, "(void)t;");
            if lanes > 1 {
                let c = self.combine(st.op, st.dtype, "t", &format!("a{i}[l]"));
                self.line(d1 + 1, &format!("for (l = 1; l < {lanes}u; ++l) t = {c};"));
            }
            let fin = self.finish(st.op, st.dtype, "t", reduced_numel);
            let value = if st.dtype == DType::Bool {
                format!("(uint8_t)({fin})")
            } else {
                fin
            };
            self.line(d1 + 1, &format!("{}[{lead}] = {value};", st.buf));
            self.line(d1, "}");
        }
        self.line(depth, "}");
        Ok(())
    }

    /// Pushes reduction `st`'s partials as one leaf onto its binary counter.
    fn push_leaf(&mut self, depth: usize, st: &ReduceState, lanes: usize) {
        let i = st.inst;
        let ty = reg_type(st.dtype);
        let id = self.identity(st.op, st.dtype);
        let merged = self.combine(st.op, st.dtype, &format!("st{i}[top{i}][l]"), "leaf[l]");
        self.line(depth, "{");
        self.line(depth + 1, &format!("{ty} leaf[{lanes}];"));
        self.line(depth + 1, &format!("uint64_t c = ++cnt{i};"));
        self.line(
            depth + 1,
            &format!("for (l = 0; l < {lanes}u; ++l) {{ leaf[l] = a{i}[l]; a{i}[l] = {id}; }}"),
        );
        self.line(depth + 1, "while ((c & 1u) == 0u) {");
        self.line(depth + 2, &format!("top{i} = top{i} - 1u;"));
        self.line(
            depth + 2,
            &format!("for (l = 0; l < {lanes}u; ++l) leaf[l] = {merged};"),
        );
        self.line(depth + 2, "c >>= 1;");
        self.line(depth + 1, "}");
        self.line(
            depth + 1,
            &format!("for (l = 0; l < {lanes}u; ++l) st{i}[top{i}][l] = leaf[l];"),
        );
        self.line(depth + 1, &format!("top{i} = top{i} + 1u;"));
        self.line(depth, "}");
    }

    fn helper(&mut self, h: Helper, name: &str, args: &[&str]) -> String {
        self.helpers.insert(h);
        format!("{}_{name}({})", self.prefix, args.join(", "))
    }

    fn identity(&mut self, op: ReduceOp, dtype: DType) -> String {
        let value = rfx_ir::semantics::reduce_identity(op, dtype).unwrap_or(Scalar::zero(dtype));
        self.literal(value)
    }

    /// A C expression of `value` in its own dtype that reads back bit for bit.
    fn literal(&mut self, value: Scalar) -> String {
        match value {
            Scalar::Bool(b) => u8::from(b).to_string(),
            Scalar::I32(i32::MIN) => "INT32_MIN".to_string(),
            Scalar::I32(v) if v < 0 => format!("({v})"),
            Scalar::I32(v) => v.to_string(),
            Scalar::F32(v) if v.is_normal() && v > 0.0 => format!("{v:?}f"),
            Scalar::F32(v) if v.is_normal() => format!("(-{:?}f)", -v),
            Scalar::F32(v) if v == 0.0 && v.is_sign_positive() => "0.0f".to_string(),
            Scalar::F32(0.0) => "(-0.0f)".to_string(),
            Scalar::F32(v) => {
                let bits = format!("0x{:08x}u", v.to_bits());
                self.helper(Helper::F32Bits, "f32_from_bits", &[&bits])
            }
            Scalar::F64(v) if v.is_normal() && v > 0.0 => format!("{v:?}"),
            Scalar::F64(v) if v.is_normal() => format!("(-{:?})", -v),
            Scalar::F64(v) if v == 0.0 && v.is_sign_positive() => "0.0".to_string(),
            Scalar::F64(0.0) => "(-0.0)".to_string(),
            Scalar::F64(v) => {
                let bits = format!("UINT64_C(0x{:016x})", v.to_bits());
                self.helper(Helper::F64Bits, "f64_from_bits", &[&bits])
            }
        }
    }

    fn combine(&mut self, op: ReduceOp, dtype: DType, acc: &str, x: &str) -> String {
        let binary = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        self.binary(binary, dtype, acc, x)
    }

    fn finish(&mut self, op: ReduceOp, dtype: DType, acc: &str, count: usize) -> String {
        match (op, dtype) {
            (ReduceOp::Mean, DType::F32) => {
                let n = self.literal(Scalar::F32(count as f32));
                format!("{acc} / {n}")
            }
            (ReduceOp::Mean, DType::F64) => {
                let n = self.literal(Scalar::F64(count as f64));
                format!("{acc} / {n}")
            }
            (ReduceOp::Sum, DType::F32) if count == 0 => "0.0f".to_string(),
            (ReduceOp::Sum, DType::F64) if count == 0 => "0.0".to_string(),
            _ => acc.to_string(),
        }
    }

    /// Element `element` of `buf` as a register value.
    fn read(&self, buf: BufId, element: &str) -> String {
        let storage = self.program.buffer(buf).map(|b| &b.storage);
        let load = match storage {
            Some(Storage::Literal { .. }) => {
                let raw = format!("{}_lit_{}[{element}]", self.prefix, buf.index());
                match self.buf_dtype(buf) {
                    DType::F32 => format!("{}_f32_from_bits({raw})", self.prefix),
                    DType::F64 => format!("{}_f64_from_bits({raw})", self.prefix),
                    DType::I32 | DType::Bool => raw,
                }
            }
            _ => format!("{buf}[{element}]"),
        };
        if self.buf_dtype(buf) == DType::Bool {
            format!("({load} != 0)")
        } else {
            load
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
                    format!("i{d} * {s}u")
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
        if let Some(buf) = inst.buf()
            && matches!(
                self.program.buffer(buf).map(|b| &b.storage),
                Some(Storage::Literal { .. })
            )
        {
            match self.buf_dtype(buf) {
                DType::F32 => {
                    self.helpers.insert(Helper::F32Bits);
                }
                DType::F64 => {
                    self.helpers.insert(Helper::F64Bits);
                }
                _ => {}
            }
        }
        let text = match inst {
            Inst::Load {
                dst,
                buf,
                strides,
                offset,
            } => {
                let element = match offset {
                    0 => self.offset(kernel, strides),
                    at => format!("{at}u + {}", self.offset(kernel, strides)),
                };
                format!("{dst} = {};", self.read(*buf, &element))
            }
            Inst::Gather { dst, buf, index } => {
                let last = self
                    .program
                    .buffer(*buf)
                    .map_or(0, |b| b.ty.shape.numel().saturating_sub(1));
                let element = match dtype(*index) {
                    // Compared in single precision so that an f32 kernel needs no double
                    // arithmetic (soft-float helpers on single-precision FPUs).
                    DType::F32 => format!(
                        "({index} > 0.0f ? ({index} < 2147483648.0f ? ((int64_t)(int32_t){index} < {last} ? (int64_t)(int32_t){index} : {last}) : {last}) : 0)"
                    ),
                    DType::F64 => format!(
                        "((double){index} > 0.0 ? ((double){index} < {last}.0 ? (int64_t){index} : {last}) : 0)"
                    ),
                    _ => format!("({index} < 0 ? 0 : ({index} > {last} ? {last} : {index}))"),
                };
                format!("{dst} = {};", self.read(*buf, &element))
            }
            Inst::Index { dst, strides } => {
                format!(
                    "{dst} = ({})({});",
                    reg_type(dtype(*dst)),
                    self.offset(kernel, strides)
                )
            }
            Inst::Const { dst, value } => format!("{dst} = {};", self.literal(*value)),
            Inst::Unary { dst, op, src } => {
                let value = self.unary(*op, dtype(*src), &src.to_string())?;
                format!("{dst} = {value};")
            }
            Inst::Binary { dst, op, lhs, rhs } => {
                let value = self.binary(*op, dtype(*lhs), &lhs.to_string(), &rhs.to_string());
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
            } => format!("{dst} = {cond} ? {on_true} : {on_false};"),
            Inst::Cast { dst, src } => {
                let value = self.cast(dtype(*src), dtype(*dst), &src.to_string());
                format!("{dst} = {value};")
            }
            Inst::Store { buf, strides, src } => {
                let value = if self.buf_dtype(*buf) == DType::Bool {
                    format!("(uint8_t){src}")
                } else {
                    src.to_string()
                };
                format!("{buf}[{}] = {value};", self.offset(kernel, strides))
            }
            Inst::Reduce { op, buf, src } => {
                let Some(acc) = acc else { return Ok(()) };
                let combined = self.combine(*op, self.buf_dtype(*buf), acc, &src.to_string());
                format!("{acc} = {combined};")
            }
            Inst::Scan { dst, op, src, coef } => {
                let Some(acc) = acc else { return Ok(()) };
                let dt = dtype(*src);
                let scaled = match coef {
                    Some(coef) => {
                        let product = self.binary(BinaryOp::Mul, dt, &coef.to_string(), acc);
                        self.line(depth, &format!("{acc} = {product};"));
                        acc.to_string()
                    }
                    None => acc.to_string(),
                };
                let combined = self.combine(op.reduce_op(), dt, &scaled, &src.to_string());
                format!("{acc} = {combined}; {dst} = {acc};")
            }
        };
        self.line(depth, &text);
        Ok(())
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &str) -> Result<String, ExportError> {
        let f32 = dtype == DType::F32;
        let pick = |a: Helper, b: Helper| if f32 { a } else { b };
        let sfx = if f32 { "f32" } else { "f64" };
        Ok(match (op, dtype) {
            (UnaryOp::Not, _) => format!("!{x}"),
            (UnaryOp::Neg, DType::I32) => self.helper(Helper::NegI32, "neg_i32", &[x]),
            (UnaryOp::Neg, _) => format!("-{x}"),
            (UnaryOp::Abs, DType::I32) => self.helper(Helper::AbsI32, "abs_i32", &[x]),
            (UnaryOp::Sign, DType::I32) => self.helper(Helper::SignI32, "sign_i32", &[x]),
            (UnaryOp::Rsqrt, DType::F32) => {
                let root = self.helper(Helper::SqrtF32, "sqrt_f32", &[x]);
                format!("1.0f / {root}")
            }
            (UnaryOp::Rsqrt, _) => {
                let root = self.helper(Helper::SqrtF64, "sqrt_f64", &[x]);
                format!("1.0 / {root}")
            }
            (UnaryOp::Recip, DType::F32) => format!("1.0f / {x}"),
            (UnaryOp::Recip, _) => format!("1.0 / {x}"),
            _ => {
                // A float op with a helper of each width, named after the op.
                let (h32, h64) = match op {
                    UnaryOp::Abs => (Helper::AbsF32, Helper::AbsF64),
                    UnaryOp::Sign => (Helper::SignF32, Helper::SignF64),
                    UnaryOp::Floor => (Helper::FloorF32, Helper::FloorF64),
                    UnaryOp::Ceil => (Helper::CeilF32, Helper::CeilF64),
                    UnaryOp::Round => (Helper::RoundF32, Helper::RoundF64),
                    UnaryOp::Sqrt => (Helper::SqrtF32, Helper::SqrtF64),
                    UnaryOp::Log => (Helper::LogF32, Helper::LogF64),
                    UnaryOp::Tanh => (Helper::TanhF32, Helper::TanhF64),
                    UnaryOp::Exp => (Helper::ExpF32, Helper::ExpF64),
                    UnaryOp::Exp2 => (Helper::Exp2F32, Helper::Exp2F64),
                    UnaryOp::Sigmoid => (Helper::SigmoidF32, Helper::SigmoidF64),
                    other => return Err(ExportError::Unsupported(other.name().to_string())),
                };
                self.helper(pick(h32, h64), &format!("{}_{sfx}", op.name()), &[x])
            }
        })
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &str, b: &str) -> String {
        match (op, dtype) {
            (BinaryOp::And, _) => format!("{a} && {b}"),
            (BinaryOp::Or, _) => format!("{a} || {b}"),
            (BinaryOp::Add, DType::I32) => self.helper(Helper::AddI32, "add_i32", &[a, b]),
            (BinaryOp::Sub, DType::I32) => self.helper(Helper::SubI32, "sub_i32", &[a, b]),
            (BinaryOp::Mul, DType::I32) => self.helper(Helper::MulI32, "mul_i32", &[a, b]),
            (BinaryOp::Div, DType::I32) => self.helper(Helper::DivI32, "div_i32", &[a, b]),
            (BinaryOp::Fmod, DType::I32) => self.helper(Helper::FmodI32, "fmod_i32", &[a, b]),
            (BinaryOp::Min, DType::I32) => self.helper(Helper::MinI32, "min_i32", &[a, b]),
            (BinaryOp::Max, DType::I32) => self.helper(Helper::MaxI32, "max_i32", &[a, b]),
            (BinaryOp::Min, DType::F64) => self.helper(Helper::MinF64, "min_f64", &[a, b]),
            (BinaryOp::Max, DType::F64) => self.helper(Helper::MaxF64, "max_f64", &[a, b]),
            (BinaryOp::Min, _) => self.helper(Helper::MinF32, "min_f32", &[a, b]),
            (BinaryOp::Max, _) => self.helper(Helper::MaxF32, "max_f32", &[a, b]),
            (BinaryOp::Add, _) => format!("{a} + {b}"),
            (BinaryOp::Sub, _) => format!("{a} - {b}"),
            (BinaryOp::Mul, _) => format!("{a} * {b}"),
            // Pow, atan2 and float fmod are refused before emission (`check_supported`).
            (BinaryOp::Div | BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Fmod, _) => format!("{a} / {b}"),
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: &str) -> String {
        match (from, to) {
            _ if from == to => x.to_string(),
            (DType::Bool, DType::I32) => format!("{x} ? 1 : 0"),
            (DType::Bool, DType::F32) => format!("{x} ? 1.0f : 0.0f"),
            (DType::Bool, DType::F64) => format!("{x} ? 1.0 : 0.0"),
            (DType::I32, DType::Bool) => format!("{x} != 0"),
            (DType::F32, DType::Bool) => format!("{x} != 0.0f"),
            (DType::F64, DType::Bool) => format!("{x} != 0.0"),
            (DType::F32, DType::I32) => self.helper(Helper::F32ToI32, "f32_to_i32", &[x]),
            (DType::F64, DType::I32) => self.helper(Helper::F64ToI32, "f64_to_i32", &[x]),
            _ => format!("({}){x}", reg_type(to)),
        }
    }
}

/// The transcendentals emitted (ports of the CPU backend's approximations, within its bound).
pub(crate) const EMITTED_TRANSCENDENTALS: &[UnaryOp] = &[
    UnaryOp::Exp,
    UnaryOp::Exp2,
    UnaryOp::Log,
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
];

/// Refuses the ops without a libm-free implementation within their bound.
fn check_supported(kernel: &LirKernel, inst: &Inst) -> Result<(), ExportError> {
    match inst {
        Inst::Unary { op, .. } if op.is_transcendental() && !EMITTED_TRANSCENDENTALS.contains(op) => {
            Err(ExportError::Unsupported(op.name().to_string()))
        }
        Inst::Binary {
            op: op @ (BinaryOp::Pow | BinaryOp::Atan2),
            ..
        } => Err(ExportError::Unsupported(op.name().to_string())),
        Inst::Binary {
            op: BinaryOp::Fmod,
            lhs,
            ..
        } if kernel.slot_dtype(*lhs).is_some_and(DType::is_float) => {
            Err(ExportError::Unsupported("fmod (float)".to_string()))
        }
        _ => Ok(()),
    }
}

/// The row-major linear index over `dims`, whose first loop index is `i{first}`.
fn row_expr(dims: &[usize], first: usize) -> String {
    if dims.is_empty() {
        return "0".to_string();
    }
    let mut expr = format!("i{first}");
    for (d, &n) in dims.iter().enumerate().skip(1) {
        expr = format!("({expr}) * {n}u + i{}", first + d);
    }
    expr
}

fn join(dims: &[usize]) -> String {
    dims.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// 32-bit indices when every loop count, buffer length and `index` value fits in an `int32_t`,
/// else 64-bit.
fn index_type(program: &LirProgram, kernel: &LirKernel) -> &'static str {
    let limit = i32::MAX as usize;
    let points = kernel.dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let index_max = kernel
        .body
        .iter()
        .filter_map(|inst| match inst {
            Inst::Index { strides, .. } => {
                Some(kernel.dims.iter().zip(strides).fold(0usize, |acc, (&d, &s)| {
                    acc.saturating_add(d.saturating_sub(1).saturating_mul(s))
                }))
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let fits = points.is_some_and(|p| p <= limit)
        && index_max <= limit
        && program.buffers().iter().all(|b| b.ty.shape.numel() <= limit);
    if fits { "uint32_t" } else { "uint64_t" }
}
