//! The C source file: the C dialect of the shared walk ([`crate::walk`]) and the function
//! around it (argument checks, buffer pointers into `work`, helpers and literal tables).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{Inst, LirKernel, LirProgram, Storage};
use rfx_ir::{BinaryOp, BufId, DType, Scalar, UnaryOp};

use crate::helpers::Helper;
use crate::walk::{Dialect, Variant, walk};
use crate::{ExportError, c_type, work_align, work_layout};

/// Emits the source file of `program` as function `name`.
pub(crate) fn emit_program(program: &LirProgram, name: &str) -> Result<String, ExportError> {
    let mut e = CDialect {
        program,
        prefix: name.to_string(),
        helpers: BTreeSet::new(),
        variant: Variant::Exact,
    };
    let body = walk(program, &mut e)?;
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
    src.push_str(&definition(program, name));
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
    src.push_str(&body);
    src.push_str("  return 0;\n}\n");
    Ok(src)
}

/// The exported function's prototype (without the `;`): inputs, outputs, then `work`.
pub(crate) fn signature(program: &LirProgram, name: &str) -> String {
    parameters(program, name, "")
}

/// The definition's head: the prototype with `restrict` pointers. The ABI forbids an output to
/// overlap anything else, and inputs are only read (two may overlap: `restrict` allows that for
/// objects nobody modifies), so the qualifier states what the caller already promises and lets
/// the compiler vectorise without a run-time overlap check. It is on the definition only:
/// top-level qualifiers of parameters are not part of the function's type, and the header
/// stays valid C++.
fn definition(program: &LirProgram, name: &str) -> String {
    parameters(program, name, "restrict ")
}

fn parameters(program: &LirProgram, name: &str, qualifier: &str) -> String {
    let mut params = Vec::new();
    for (i, (_, _, ty)) in program.inputs().enumerate() {
        params.push(format!("const {} *{qualifier}in_{i}", c_type(ty.dtype)));
    }
    for (i, (_, _, ty)) in program.outputs().enumerate() {
        params.push(format!("{} *{qualifier}out_{i}", c_type(ty.dtype)));
    }
    params.push(format!("void *{qualifier}work"));
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

/// The C dialect of `program`, for the walk's tests.
#[cfg(test)]
pub(crate) fn test_dialect(program: &LirProgram) -> impl Dialect + '_ {
    CDialect {
        program,
        prefix: "t".to_string(),
        helpers: BTreeSet::new(),
        variant: Variant::Exact,
    }
}

/// The C spelling of the walk's statements and expressions; it collects the helpers the
/// expressions call.
struct CDialect<'a> {
    program: &'a LirProgram,
    prefix: String,
    helpers: BTreeSet<Helper>,
    variant: Variant,
}

impl CDialect<'_> {
    fn buf_dtype(&self, buf: BufId) -> DType {
        self.program.buffer(buf).map_or(DType::F32, |b| b.ty.dtype)
    }

    fn helper(&mut self, h: Helper, name: &str, args: &[&str]) -> String {
        self.helpers.insert(h);
        format!("{}_{name}({})", self.prefix, args.join(", "))
    }
}

impl Dialect for CDialect<'_> {
    fn check(&self, kernel: &LirKernel, inst: &Inst) -> Result<(), ExportError> {
        check_supported(kernel, inst)
    }

    /// f32 `sin` and `cos`: a float reduction for |x| <= 4096 (see the helpers).
    fn has_fast_variant(&self, kernel: &LirKernel, inst: &Inst) -> bool {
        matches!(inst, Inst::Unary { op: UnaryOp::Sin | UnaryOp::Cos, src, .. }
            if kernel.slot_dtype(*src) == Some(DType::F32))
    }

    fn set_variant(&mut self, variant: Variant) {
        self.variant = variant;
    }

    fn flag(&self, name: &str) -> String {
        format!("uint32_t {name} = 0u;")
    }

    fn or_flag(&self, acc: &str, flag: &str) -> String {
        format!("{acc} |= {flag};")
    }

    fn index_type(&self, program: &LirProgram, kernel: &LirKernel) -> &'static str {
        if rfx_lower::indices_fit_i32(program, kernel) {
            "uint32_t"
        } else {
            "uint64_t"
        }
    }

    fn uint(&self, n: usize) -> String {
        format!("{n}u")
    }

    fn comment(&self, text: &str) -> String {
        format!("/* {text} */")
    }

    fn slot(&self, name: &str, dtype: DType, zero: &str) -> Vec<String> {
        vec![
            format!("{} {name} = {zero};", reg_type(dtype)),
            format!("(void){name};"),
        ]
    }

    fn scan_acc(&self, name: &str, dtype: DType, _identity: &str) -> Vec<String> {
        vec![format!("{} {name};", reg_type(dtype))]
    }

    fn for_open(&self, var: &str, n: usize, index_ty: &str) -> Vec<String> {
        vec![
            format!("{index_ty} {var};"),
            format!("for ({var} = 0; {var} < {n}u; ++{var}) {{"),
        ]
    }

    fn let_index(&self, var: &str, value: &str, index_ty: &str) -> String {
        format!("const {index_ty} {var} = {value};")
    }

    fn if_open(&self, cond: &str) -> String {
        format!("if ({cond}) {{")
    }

    fn while_open(&self, cond: &str) -> String {
        format!("while ({cond}) {{")
    }

    fn trips_open(&self, var: &str, trips: u64) -> String {
        format!("for (uint64_t {var} = 0; {var} < {trips}u; ++{var}) {{")
    }

    fn break_unless(&self, cond: &str) -> String {
        format!("if (!{cond}) break;")
    }

    fn lane_var(&self, index_ty: &str) -> Vec<String> {
        vec![format!("{index_ty} l;"), "(void)l;".to_string()]
    }

    fn lane_array(&self, name: &str, dtype: DType, lanes: usize, init: &str) -> Vec<String> {
        vec![
            format!("{} {name}[{lanes}];", reg_type(dtype)),
            self.each_lane(0, lanes, &format!("{name}[l] = {init};")),
        ]
    }

    fn scratch_array(&self, name: &str, dtype: DType, lanes: usize, _init: &str) -> String {
        format!("{} {name}[{lanes}];", reg_type(dtype))
    }

    fn each_lane(&self, from: usize, lanes: usize, stmt: &str) -> String {
        format!("for (l = {from}; l < {lanes}u; ++l) {stmt}")
    }

    fn leaf_stack(&self, i: usize, dtype: DType, depth: usize, lanes: usize, _identity: &str) -> Vec<String> {
        vec![
            format!("{} st{i}[{depth}][{lanes}];", reg_type(dtype)),
            format!("uint64_t cnt{i} = 0; unsigned top{i} = 0;"),
        ]
    }

    fn local(&self, name: &str, dtype: DType, value: &str) -> Vec<String> {
        vec![
            format!("{} {name} = {value};", reg_type(dtype)),
            format!("(void){name};"),
        ]
    }

    fn height(&self, name: &str, value: &str) -> String {
        format!("unsigned {name} = {value};")
    }

    fn next_leaf(&self, i: usize) -> String {
        format!("uint64_t c = ++cnt{i};")
    }

    fn index_value(&self, dtype: DType, value: &str) -> String {
        format!("({})({value})", reg_type(dtype))
    }

    fn select(&self, cond: &str, on_true: &str, on_false: &str) -> String {
        format!("{cond} ? {on_true} : {on_false}")
    }

    fn gather_index(&self, index: &str, dtype: DType, last: usize) -> String {
        match dtype {
            // Compared in single precision so that an f32 kernel needs no double
            // arithmetic (soft-float helpers on single-precision FPUs).
            DType::F32 => format!(
                "({index} > 0.0f ? ({index} < 2147483648.0f ? ((int64_t)(int32_t){index} < {last} ? (int64_t)(int32_t){index} : {last}) : {last}) : 0)"
            ),
            DType::F64 => format!(
                "((double){index} > 0.0 ? ((double){index} < {last}.0 ? (int64_t){index} : {last}) : 0)"
            ),
            _ => format!("({index} < 0 ? 0 : ({index} > {last} ? {last} : {index}))"),
        }
    }

    fn store(&mut self, buf: BufId, element: &str, value: &str) -> String {
        let value = if self.buf_dtype(buf) != DType::Bool {
            value.to_string()
        } else if is_slot(value) {
            format!("(uint8_t){value}")
        } else {
            format!("(uint8_t)({value})")
        };
        format!("{buf}[{element}] = {value};")
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

    /// Element `element` of `buf` as a register value.
    fn read(&mut self, buf: BufId, element: &str) -> String {
        let storage = self.program.buffer(buf).map(|b| &b.storage);
        let load = match storage {
            Some(Storage::Literal { .. }) => {
                let raw = format!("{}_lit_{}[{element}]", self.prefix, buf.index());
                match self.buf_dtype(buf) {
                    DType::F32 => self.helper(Helper::F32Bits, "f32_from_bits", &[&raw]),
                    DType::F64 => self.helper(Helper::F64Bits, "f64_from_bits", &[&raw]),
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
            (UnaryOp::Sin | UnaryOp::Cos, DType::F32) if self.variant != Variant::Exact => {
                let (h, name) = match (op, self.variant) {
                    (UnaryOp::Sin, Variant::Fast) => (Helper::SinFastF32, "sin_fast_f32"),
                    (UnaryOp::Sin, _) => (Helper::SinFastF32, "sin_full_f32"),
                    (_, Variant::Fast) => (Helper::CosFastF32, "cos_fast_f32"),
                    _ => (Helper::CosFastF32, "cos_full_f32"),
                };
                if self.variant == Variant::Fast {
                    self.helper(h, name, &[x, "&slow"])
                } else {
                    self.helper(h, name, &[x])
                }
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
                    UnaryOp::Sin => (Helper::SinF32, Helper::SinF64),
                    UnaryOp::Cos => (Helper::CosF32, Helper::CosF64),
                    UnaryOp::Tan => (Helper::TanF32, Helper::TanF64),
                    UnaryOp::Log2 => (Helper::Log2F32, Helper::Log2F64),
                    UnaryOp::Atan => (Helper::AtanF32, Helper::AtanF64),
                    UnaryOp::Asin => (Helper::AsinF32, Helper::AsinF64),
                    UnaryOp::Acos => (Helper::AcosF32, Helper::AcosF64),
                    UnaryOp::Erf => (Helper::ErfF32, Helper::ErfF64),
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
            (BinaryOp::Fmod, DType::F64) => self.helper(Helper::FmodF64, "fmod_f64", &[a, b]),
            (BinaryOp::Fmod, _) => self.helper(Helper::FmodF32, "fmod_f32", &[a, b]),
            (BinaryOp::Atan2, DType::F64) => self.helper(Helper::Atan2F64, "atan2_f64", &[a, b]),
            (BinaryOp::Atan2, _) => self.helper(Helper::Atan2F32, "atan2_f32", &[a, b]),
            (BinaryOp::Pow, DType::F64) => self.helper(Helper::PowF64, "pow_f64", &[a, b]),
            (BinaryOp::Pow, _) => self.helper(Helper::PowF32, "pow_f32", &[a, b]),
            (BinaryOp::Add, _) => format!("{a} + {b}"),
            (BinaryOp::Sub, _) => format!("{a} - {b}"),
            (BinaryOp::Mul, _) => format!("{a} * {b}"),
            (BinaryOp::Div, _) => format!("{a} / {b}"),
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
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::Log2,
    UnaryOp::Atan,
    UnaryOp::Asin,
    UnaryOp::Acos,
    UnaryOp::Erf,
];

/// Refuses the ops without a libm-free implementation within their bound.
fn check_supported(_kernel: &LirKernel, inst: &Inst) -> Result<(), ExportError> {
    match inst {
        Inst::Unary { op, .. } if op.is_transcendental() && !EMITTED_TRANSCENDENTALS.contains(op) => {
            Err(ExportError::Unsupported(op.name().to_string()))
        }
        _ => Ok(()),
    }
}

/// Whether `value` is a slot's name (`s` and digits).
fn is_slot(value: &str) -> bool {
    value
        .strip_prefix('s')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}
