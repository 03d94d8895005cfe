//! The `no_std` Rust module: the Rust dialect of the shared walk ([`crate::walk`]) and the
//! items around the function (its error enum, its work struct, helpers and literal tables).
//!
//! The module needs `core` only, and the `libm` crate where the program calls a function core
//! does not have on stable Rust (`sqrt`, `floor`, the transcendentals). It has no `unsafe`, no
//! allocation and no mutable statics. Temporaries live in a `Work` struct of one array per
//! element type, so the work space cannot be too small or misaligned.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{Inst, LirKernel, LirProgram, Storage};
use rfx_ir::{BinaryOp, BufId, DType, Scalar, UnaryOp};

use crate::walk::{Dialect, walk};
use crate::{ExportError, describe};

/// The generated module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RustExport {
    /// `NAME.rs`: a module with the function `NAME`, its `Error` enum and its `Work` struct.
    pub source: String,
}

/// The first version of the `libm` crate with every function the module may call
/// (`roundeven`, `roundevenf`).
pub const LIBM_VERSION: &str = "0.2.16";

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try", "typeof",
    "unsized", "virtual", "yield", "union", "_",
];

/// Checks that `name` can be the exported Rust function's name: an ASCII identifier (letters,
/// digits, `_`, not starting with a digit), not a keyword, not starting with `rfx_` (any case:
/// the module's helpers and tables use that prefix), at most 63 characters.
pub fn validate_rust_name(name: &str) -> Result<(), ExportError> {
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let reserved = name.len() >= 4 && name[..4].eq_ignore_ascii_case("rfx_");
    if !first_ok || !rest_ok || reserved || RUST_KEYWORDS.contains(&name) || name.len() > 63 {
        return Err(ExportError::InvalidRustName(name.to_string()));
    }
    Ok(())
}

/// Exports `program` as a `no_std` Rust module with a function called `name` (see the crate
/// docs for its API).
pub fn rust_source(program: &LirProgram, name: &str) -> Result<RustExport, ExportError> {
    validate_rust_name(name)?;
    rfx_ir::lir::verify(program).map_err(|e| ExportError::InvalidProgram(e.to_string()))?;
    let mut dialect = RustDialect {
        program,
        layout: work_layout(program),
        helpers: BTreeSet::new(),
        libm: BTreeSet::new(),
    };
    let body = walk(program, &mut dialect)?;
    Ok(RustExport {
        source: module(program, name, &dialect, &body),
    })
}

/// Where the arena buffers live in `Work`: one array per element type. Within a type, the
/// buffers keep the memory plan's offsets (scaled to elements from the lowest), so buffers that
/// share bytes in the plan share elements here.
struct WorkLayout {
    /// The array of each dtype present and its length.
    fields: Vec<(DType, usize)>,
    /// The element offset of each arena buffer in its dtype's array.
    offsets: Vec<Option<usize>>,
}

fn work_layout(program: &LirProgram) -> WorkLayout {
    let mut fields = Vec::new();
    let mut offsets = vec![None; program.buffers().len()];
    for dtype in [DType::F32, DType::F64, DType::I32, DType::Bool] {
        let size = dtype.size_bytes();
        let arena: Vec<(usize, usize, usize)> = program
            .buffers()
            .iter()
            .enumerate()
            .filter(|(i, b)| b.ty.dtype == dtype && crate::touched(program, *i))
            .filter_map(|(i, b)| match b.storage {
                Storage::Arena { offset } => Some((i, offset, b.ty.shape.numel())),
                _ => None,
            })
            .collect();
        let Some(low) = arena.iter().map(|&(_, offset, _)| offset).min() else {
            continue;
        };
        let mut len = 0;
        for &(i, offset, numel) in &arena {
            // Offsets are multiples of the dtype's size (the LIR's invariant).
            let at = (offset - low) / size;
            offsets[i] = Some(at);
            len = len.max(at + numel);
        }
        fields.push((dtype, len));
    }
    WorkLayout { fields, offsets }
}

fn field(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bools",
        DType::I32 => "i32s",
        DType::F32 => "f32s",
        DType::F64 => "f64s",
    }
}

/// The Rust type of a buffer element and of a register of `dtype`.
fn rust_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::I32 => "i32",
        DType::F32 => "f32",
        DType::F64 => "f64",
    }
}

/// A private function of the module, emitted once when used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RustHelper {
    DivI32,
    FmodI32,
    MinF32,
    MaxF32,
    MinF64,
    MaxF64,
    SignF32,
    SignF64,
    SigmoidF32,
    SigmoidF64,
}

impl RustHelper {
    fn source(self) -> &'static str {
        match self {
            RustHelper::DivI32 => concat!(
                "/// Floor division: `x / 0 = 0`, `i32::MIN / -1` wraps to `i32::MIN`.\n",
                "fn rfx_div_i32(a: i32, b: i32) -> i32 {\n",
                "    if b == 0 {\n        return 0;\n    }\n",
                "    let q = a.wrapping_div(b);\n",
                "    let r = a.wrapping_rem(b);\n",
                "    if r != 0 && ((r < 0) != (b < 0)) { q.wrapping_sub(1) } else { q }\n",
                "}\n"
            ),
            RustHelper::FmodI32 => concat!(
                "/// Truncated remainder with the dividend's sign: `x fmod 0 = 0`, `i32::MIN fmod -1 = 0`.\n",
                "fn rfx_fmod_i32(a: i32, b: i32) -> i32 {\n",
                "    if b == 0 { 0 } else { a.wrapping_rem(b) }\n",
                "}\n"
            ),
            RustHelper::MinF32 => concat!(
                "/// NumPy minimum: the first operand when it wins or is NaN, else the second.\n",
                "fn rfx_min_f32(a: f32, b: f32) -> f32 {\n",
                "    if a < b || a.is_nan() { a } else { b }\n",
                "}\n"
            ),
            RustHelper::MaxF32 => concat!(
                "/// NumPy maximum: the first operand when it wins or is NaN, else the second.\n",
                "fn rfx_max_f32(a: f32, b: f32) -> f32 {\n",
                "    if a > b || a.is_nan() { a } else { b }\n",
                "}\n"
            ),
            RustHelper::MinF64 => concat!(
                "/// NumPy minimum: the first operand when it wins or is NaN, else the second.\n",
                "fn rfx_min_f64(a: f64, b: f64) -> f64 {\n",
                "    if a < b || a.is_nan() { a } else { b }\n",
                "}\n"
            ),
            RustHelper::MaxF64 => concat!(
                "/// NumPy maximum: the first operand when it wins or is NaN, else the second.\n",
                "fn rfx_max_f64(a: f64, b: f64) -> f64 {\n",
                "    if a > b || a.is_nan() { a } else { b }\n",
                "}\n"
            ),
            RustHelper::SignF32 => concat!(
                "/// `sign(±0) = +0`, `sign(NaN) = NaN`.\n",
                "fn rfx_sign_f32(a: f32) -> f32 {\n",
                "    if a > 0.0 { 1.0 } else if a < 0.0 { -1.0 } else if a == 0.0 { 0.0 } else { a }\n",
                "}\n"
            ),
            RustHelper::SignF64 => concat!(
                "/// `sign(±0) = +0`, `sign(NaN) = NaN`.\n",
                "fn rfx_sign_f64(a: f64) -> f64 {\n",
                "    if a > 0.0 { 1.0 } else if a < 0.0 { -1.0 } else if a == 0.0 { 0.0 } else { a }\n",
                "}\n"
            ),
            RustHelper::SigmoidF32 => concat!(
                "/// `e / (1 + e)` with `e = exp(x)` below 0 (keeping tiny results), `1 / (1 + exp(-x))` above.\n",
                "fn rfx_sigmoid_f32(x: f32) -> f32 {\n",
                "    if x < 0.0 {\n        let e = libm::expf(x);\n        e / (1.0 + e)\n",
                "    } else {\n        1.0 / (1.0 + libm::expf(-x))\n    }\n",
                "}\n"
            ),
            RustHelper::SigmoidF64 => concat!(
                "/// `e / (1 + e)` with `e = exp(x)` below 0 (keeping tiny results), `1 / (1 + exp(-x))` above.\n",
                "fn rfx_sigmoid_f64(x: f64) -> f64 {\n",
                "    if x < 0.0 {\n        let e = libm::exp(x);\n        e / (1.0 + e)\n",
                "    } else {\n        1.0 / (1.0 + libm::exp(-x))\n    }\n",
                "}\n"
            ),
        }
    }

    /// The `libm` functions the helper calls.
    fn libm(self) -> &'static [&'static str] {
        match self {
            RustHelper::SigmoidF32 => &["expf"],
            RustHelper::SigmoidF64 => &["exp"],
            _ => &[],
        }
    }
}

/// The Rust spelling of the walk's statements and expressions; it collects the helpers and the
/// `libm` functions the expressions call.
struct RustDialect<'a> {
    program: &'a LirProgram,
    layout: WorkLayout,
    helpers: BTreeSet<RustHelper>,
    libm: BTreeSet<&'static str>,
}

impl RustDialect<'_> {
    fn helper(&mut self, h: RustHelper, args: &[&str]) -> String {
        self.helpers.insert(h);
        self.libm.extend(h.libm());
        let name = match h {
            RustHelper::DivI32 => "div_i32",
            RustHelper::FmodI32 => "fmod_i32",
            RustHelper::MinF32 => "min_f32",
            RustHelper::MaxF32 => "max_f32",
            RustHelper::MinF64 => "min_f64",
            RustHelper::MaxF64 => "max_f64",
            RustHelper::SignF32 => "sign_f32",
            RustHelper::SignF64 => "sign_f64",
            RustHelper::SigmoidF32 => "sigmoid_f32",
            RustHelper::SigmoidF64 => "sigmoid_f64",
        };
        format!("rfx_{name}({})", args.join(", "))
    }

    /// A call of `libm`'s `f32` function `name32` or `f64` function `name64`.
    fn libm_call(
        &mut self,
        dtype: DType,
        name32: &'static str,
        name64: &'static str,
        args: &[&str],
    ) -> String {
        let name = if dtype == DType::F32 { name32 } else { name64 };
        self.libm.insert(name);
        format!("libm::{name}({})", args.join(", "))
    }

    /// Element `element` of `buf` as a place (read or written).
    fn place(&self, buf: BufId, element: &str) -> String {
        let Some(buffer) = self.program.buffer(buf) else {
            return format!("{buf}[{element}]");
        };
        match &buffer.storage {
            Storage::Input { .. } => {
                let pos = self.program.inputs().position(|(b, _, _)| b == buf).unwrap_or(0);
                format!("in_{pos}[{element}]")
            }
            Storage::Output { .. } => {
                let pos = self.program.outputs().position(|(b, _, _)| b == buf).unwrap_or(0);
                format!("out_{pos}[{element}]")
            }
            Storage::Arena { .. } => {
                let field = field(buffer.ty.dtype);
                match self
                    .layout
                    .offsets
                    .get(buf.index())
                    .copied()
                    .flatten()
                    .unwrap_or(0)
                {
                    0 => format!("work.{field}[{element}]"),
                    at => format!("work.{field}[{at} + {element}]"),
                }
            }
            Storage::Literal { .. } => format!("RFX_LIT_{}[{element}]", buf.index()),
        }
    }
}

impl Dialect for RustDialect<'_> {
    fn check(&self, _kernel: &LirKernel, _inst: &Inst) -> Result<(), ExportError> {
        Ok(())
    }

    fn index_type(&self, _program: &LirProgram, _kernel: &LirKernel) -> &'static str {
        "usize"
    }

    fn uint(&self, n: usize) -> String {
        n.to_string()
    }

    fn comment(&self, text: &str) -> String {
        format!("// {text}")
    }

    fn slot(&self, name: &str, dtype: DType, zero: &str) -> Vec<String> {
        vec![format!("let mut {name}: {} = {zero};", rust_type(dtype))]
    }

    fn scan_acc(&self, name: &str, dtype: DType, identity: &str) -> Vec<String> {
        vec![format!("let mut {name}: {} = {identity};", rust_type(dtype))]
    }

    fn for_open(&self, var: &str, n: usize, _index_ty: &str) -> Vec<String> {
        vec![format!("for {var} in 0..{n}usize {{")]
    }

    fn let_index(&self, var: &str, value: &str, _index_ty: &str) -> String {
        format!("let {var}: usize = {value};")
    }

    fn if_open(&self, cond: &str) -> String {
        format!("if {cond} {{")
    }

    fn while_open(&self, cond: &str) -> String {
        format!("while {cond} {{")
    }

    fn trips_open(&self, _var: &str, trips: u64) -> String {
        format!("for _ in 0..{trips}u64 {{")
    }

    fn break_unless(&self, cond: &str) -> String {
        format!("if !{cond} {{ break; }}")
    }

    fn lane_var(&self, _index_ty: &str) -> Vec<String> {
        Vec::new()
    }

    fn lane_array(&self, name: &str, dtype: DType, lanes: usize, init: &str) -> Vec<String> {
        vec![format!(
            "let mut {name}: [{}; {lanes}] = [{init}; {lanes}];",
            rust_type(dtype)
        )]
    }

    fn scratch_array(&self, name: &str, dtype: DType, lanes: usize, init: &str) -> String {
        format!(
            "let mut {name}: [{}; {lanes}] = [{init}; {lanes}];",
            rust_type(dtype)
        )
    }

    fn each_lane(&self, from: usize, lanes: usize, stmt: &str) -> String {
        format!("for l in {from}..{lanes}usize {{ {stmt} }}")
    }

    fn leaf_stack(&self, i: usize, dtype: DType, depth: usize, lanes: usize, identity: &str) -> Vec<String> {
        vec![
            format!(
                "let mut st{i}: [[{}; {lanes}]; {depth}] = [[{identity}; {lanes}]; {depth}];",
                rust_type(dtype)
            ),
            format!("let mut cnt{i}: u64 = 0;"),
            format!("let mut top{i}: usize = 0;"),
        ]
    }

    fn local(&self, name: &str, dtype: DType, value: &str) -> Vec<String> {
        vec![format!("let mut {name}: {} = {value};", rust_type(dtype))]
    }

    fn height(&self, name: &str, value: &str) -> String {
        format!("let mut {name}: usize = {value};")
    }

    fn next_leaf(&self, i: usize) -> String {
        format!("cnt{i} += 1; let mut c: u64 = cnt{i};")
    }

    fn literal(&mut self, value: Scalar) -> String {
        match value {
            Scalar::Bool(b) => b.to_string(),
            Scalar::I32(i32::MIN) => "i32::MIN".to_string(),
            Scalar::I32(v) if v < 0 => format!("({v}i32)"),
            Scalar::I32(v) => format!("{v}i32"),
            Scalar::F32(v) if v.is_normal() && v > 0.0 => format!("{v:?}f32"),
            Scalar::F32(v) if v.is_normal() => format!("(-{:?}f32)", -v),
            Scalar::F32(v) if v == 0.0 && v.is_sign_positive() => "0.0f32".to_string(),
            Scalar::F32(0.0) => "(-0.0f32)".to_string(),
            Scalar::F32(v) => format!("f32::from_bits(0x{:08x})", v.to_bits()),
            Scalar::F64(v) if v.is_normal() && v > 0.0 => format!("{v:?}f64"),
            Scalar::F64(v) if v.is_normal() => format!("(-{:?}f64)", -v),
            Scalar::F64(v) if v == 0.0 && v.is_sign_positive() => "0.0f64".to_string(),
            Scalar::F64(0.0) => "(-0.0f64)".to_string(),
            Scalar::F64(v) => format!("f64::from_bits(0x{:016x})", v.to_bits()),
        }
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &str) -> Result<String, ExportError> {
        let f32 = dtype == DType::F32;
        let one = if f32 { "1.0f32" } else { "1.0f64" };
        Ok(match (op, dtype) {
            (UnaryOp::Not, _) => format!("!{x}"),
            (UnaryOp::Neg, DType::I32) => format!("{x}.wrapping_neg()"),
            (UnaryOp::Neg, _) => format!("-{x}"),
            (UnaryOp::Abs, DType::I32) => format!("{x}.wrapping_abs()"),
            (UnaryOp::Abs, _) => format!("{x}.abs()"),
            (UnaryOp::Sign, DType::I32) => format!("{x}.signum()"),
            (UnaryOp::Sign, _) => {
                let h = if f32 {
                    RustHelper::SignF32
                } else {
                    RustHelper::SignF64
                };
                self.helper(h, &[x])
            }
            (UnaryOp::Recip, _) => format!("{one} / {x}"),
            (UnaryOp::Rsqrt, _) => {
                let root = self.libm_call(dtype, "sqrtf", "sqrt", &[x]);
                format!("{one} / {root}")
            }
            (UnaryOp::Sigmoid, _) => {
                let h = if f32 {
                    RustHelper::SigmoidF32
                } else {
                    RustHelper::SigmoidF64
                };
                self.helper(h, &[x])
            }
            _ => {
                let (name32, name64) = match op {
                    UnaryOp::Floor => ("floorf", "floor"),
                    UnaryOp::Ceil => ("ceilf", "ceil"),
                    UnaryOp::Round => ("roundevenf", "roundeven"),
                    UnaryOp::Sqrt => ("sqrtf", "sqrt"),
                    UnaryOp::Exp => ("expf", "exp"),
                    UnaryOp::Exp2 => ("exp2f", "exp2"),
                    UnaryOp::Log => ("logf", "log"),
                    UnaryOp::Log2 => ("log2f", "log2"),
                    UnaryOp::Sin => ("sinf", "sin"),
                    UnaryOp::Cos => ("cosf", "cos"),
                    UnaryOp::Tan => ("tanf", "tan"),
                    UnaryOp::Tanh => ("tanhf", "tanh"),
                    UnaryOp::Atan => ("atanf", "atan"),
                    UnaryOp::Asin => ("asinf", "asin"),
                    UnaryOp::Acos => ("acosf", "acos"),
                    UnaryOp::Erf => ("erff", "erf"),
                    other => return Err(ExportError::Unsupported(other.name().to_string())),
                };
                self.libm_call(dtype, name32, name64, &[x])
            }
        })
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &str, b: &str) -> String {
        let f32 = dtype == DType::F32;
        match (op, dtype) {
            (BinaryOp::And, _) | (BinaryOp::Min, DType::Bool) => format!("{a} & {b}"),
            (BinaryOp::Or, _) | (BinaryOp::Max, DType::Bool) => format!("{a} | {b}"),
            (BinaryOp::Add, DType::I32) => format!("{a}.wrapping_add({b})"),
            (BinaryOp::Sub, DType::I32) => format!("{a}.wrapping_sub({b})"),
            (BinaryOp::Mul, DType::I32) => format!("{a}.wrapping_mul({b})"),
            (BinaryOp::Div, DType::I32) => self.helper(RustHelper::DivI32, &[a, b]),
            (BinaryOp::Fmod, DType::I32) => self.helper(RustHelper::FmodI32, &[a, b]),
            (BinaryOp::Min, DType::I32) => format!("{a}.min({b})"),
            (BinaryOp::Max, DType::I32) => format!("{a}.max({b})"),
            (BinaryOp::Min, _) => {
                let h = if f32 {
                    RustHelper::MinF32
                } else {
                    RustHelper::MinF64
                };
                self.helper(h, &[a, b])
            }
            (BinaryOp::Max, _) => {
                let h = if f32 {
                    RustHelper::MaxF32
                } else {
                    RustHelper::MaxF64
                };
                self.helper(h, &[a, b])
            }
            (BinaryOp::Pow, _) => self.libm_call(dtype, "powf", "pow", &[a, b]),
            (BinaryOp::Atan2, _) => self.libm_call(dtype, "atan2f", "atan2", &[a, b]),
            (BinaryOp::Fmod, _) => self.libm_call(dtype, "fmodf", "fmod", &[a, b]),
            (BinaryOp::Add, _) => format!("{a} + {b}"),
            (BinaryOp::Sub, _) => format!("{a} - {b}"),
            (BinaryOp::Mul, _) => format!("{a} * {b}"),
            (BinaryOp::Div, _) => format!("{a} / {b}"),
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: &str) -> String {
        match (from, to) {
            _ if from == to => x.to_string(),
            (DType::Bool, DType::I32) => format!("i32::from({x})"),
            (DType::Bool, DType::F32) => format!("f32::from(u8::from({x}))"),
            (DType::Bool, DType::F64) => format!("f64::from(u8::from({x}))"),
            (DType::I32, DType::Bool) => format!("{x} != 0"),
            (DType::F32, DType::Bool) => format!("{x} != 0.0f32"),
            (DType::F64, DType::Bool) => format!("{x} != 0.0f64"),
            (DType::I32 | DType::F32, DType::F64) => format!("f64::from({x})"),
            // Float to i32 truncates toward zero and saturates, NaN gives 0; to f32 rounds to
            // nearest even: Rust's `as` is rfx's cast.
            (_, to) => format!("{x} as {}", rust_type(to)),
        }
    }

    fn index_value(&self, dtype: DType, value: &str) -> String {
        format!("({value}) as {}", rust_type(dtype))
    }

    fn select(&self, cond: &str, on_true: &str, on_false: &str) -> String {
        format!("if {cond} {{ {on_true} }} else {{ {on_false} }}")
    }

    fn gather_index(&self, index: &str, _dtype: DType, last: usize) -> String {
        // `as i64` truncates a float toward zero, saturates and maps NaN to 0.
        format!("({index} as i64).clamp(0, {last}) as usize")
    }

    fn read(&mut self, buf: BufId, element: &str) -> String {
        let place = self.place(buf, element);
        let storage = self.program.buffer(buf).map(|b| (&b.storage, b.ty.dtype));
        match storage {
            Some((Storage::Literal { .. }, DType::F32)) => format!("f32::from_bits({place})"),
            Some((Storage::Literal { .. }, DType::F64)) => format!("f64::from_bits({place})"),
            _ => place,
        }
    }

    fn store(&mut self, buf: BufId, element: &str, value: &str) -> String {
        format!("{} = {value};", self.place(buf, element))
    }
}

/// The `static` table of literal buffer `buf` (floats as bit patterns, so every value is exact).
fn literal_table(buf: BufId, dtype: DType, values: &[Scalar]) -> String {
    let word = match dtype {
        DType::Bool => "bool",
        DType::I32 => "i32",
        DType::F32 => "u32",
        DType::F64 => "u64",
    };
    let words: Vec<String> = values
        .iter()
        .map(|&v| match v {
            Scalar::Bool(b) => b.to_string(),
            Scalar::I32(x) => x.to_string(),
            Scalar::F32(x) => format!("0x{:08x}", x.to_bits()),
            Scalar::F64(x) => format!("0x{:016x}", x.to_bits()),
        })
        .collect();
    let mut text = format!(
        "/// Literal {buf}: {} value(s) of {dtype}{}.\n#[allow(dead_code)]\nstatic RFX_LIT_{}: [{word}; {}] = [",
        values.len(),
        if dtype.is_float() { ", as bit patterns" } else { "" },
        buf.index(),
        values.len()
    );
    for chunk in words.chunks(8) {
        text.push_str("\n    ");
        text.push_str(&chunk.join(", "));
        text.push(',');
    }
    text.push_str(if words.is_empty() { "];\n" } else { "\n];\n" });
    text
}

/// The function's parameters: inputs, outputs, then `work`.
fn parameters(program: &LirProgram) -> Vec<String> {
    let mut params = Vec::new();
    for (i, (_, _, ty)) in program.inputs().enumerate() {
        params.push(format!("in_{i}: &[{}]", rust_type(ty.dtype)));
    }
    for (i, (_, _, ty)) in program.outputs().enumerate() {
        params.push(format!("out_{i}: &mut [{}]", rust_type(ty.dtype)));
    }
    params.push("work: &mut Work".to_string());
    params
}

const ERROR_ITEMS: &str = r#"/// Why the function refused its arguments (it wrote nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
pub enum Error {
    /// Input `index` has `actual` elements where its array has `expected`.
    InputLength {
        /// The input's position among the inputs.
        index: usize,
        /// The array's element count.
        expected: usize,
        /// The slice's length.
        actual: usize,
    },
    /// Output `index` has `actual` elements where its array has `expected`.
    OutputLength {
        /// The output's position among the outputs.
        index: usize,
        /// The array's element count.
        expected: usize,
        /// The slice's length.
        actual: usize,
    },
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::InputLength { index, expected, actual } => {
                write!(f, "input {index} has {actual} elements, expected {expected}")
            }
            Error::OutputLength { index, expected, actual } => {
                write!(f, "output {index} has {actual} elements, expected {expected}")
            }
        }
    }
}

impl core::error::Error for Error {}
"#;

fn work_items(layout: &WorkLayout) -> String {
    let mut s = String::from(
        "/// Scratch for the function's intermediate arrays (their contents on entry do not matter).\n",
    );
    s.push_str("#[derive(Clone, Debug)]\npub struct Work {");
    s.push_str(if layout.fields.is_empty() { "}\n" } else { "\n" });
    let mut init = Vec::new();
    for &(dtype, len) in &layout.fields {
        let _ = writeln!(s, "    {}: [{}; {len}],", field(dtype), rust_type(dtype));
        let zero = match dtype {
            DType::Bool => "false",
            DType::I32 => "0",
            DType::F32 | DType::F64 => "0.0",
        };
        init.push(format!("{}: [{zero}; {len}]", field(dtype)));
    }
    if !layout.fields.is_empty() {
        s.push_str("}\n");
    }
    s.push_str("\n#[allow(dead_code)]\nimpl Work {\n    /// Zeroed scratch.\n");
    let init = if init.is_empty() {
        "{}".to_string()
    } else {
        format!("{{ {} }}", init.join(", "))
    };
    let _ = writeln!(
        s,
        "    pub const fn new() -> Self {{\n        Work {init}\n    }}\n}}\n"
    );
    s.push_str("impl Default for Work {\n    fn default() -> Self {\n        Self::new()\n    }\n}\n");
    s
}

/// The doc comment and the length checks of the function.
fn argument_docs_and_checks(program: &LirProgram, name: &str) -> (String, String) {
    let mut docs = format!("/// Runs rfx program `{}`.\n///\n", program.name());
    let mut checks = String::new();
    let mut check = |docs: &mut String,
                     kind: &str,
                     var: String,
                     i: usize,
                     label: &str,
                     ty: &rfx_ir::TensorType| {
        let _ = writeln!(docs, "/// - `{var}`: {kind} `{label}`, {}", describe(ty));
        let n = ty.shape.numel();
        let variant = if kind == "input" {
            "InputLength"
        } else {
            "OutputLength"
        };
        let _ = writeln!(
            checks,
            "    if {var}.len() != {n} {{\n        return core::result::Result::Err(Error::{variant} {{ index: {i}, expected: {n}, actual: {var}.len() }});\n    }}"
        );
    };
    for (i, (_, label, ty)) in program.inputs().enumerate() {
        check(&mut docs, "input", format!("in_{i}"), i, label, ty);
    }
    for (i, (_, label, ty)) in program.outputs().enumerate() {
        check(&mut docs, "output", format!("out_{i}"), i, label, ty);
    }
    docs.push_str("/// - `work`: scratch ([`Work::new`]).\n///\n");
    docs.push_str(
        "/// Arrays are dense and row-major. Every exact op gives rfx's interpreter's bits.\n///\n",
    );
    docs.push_str("/// # Errors\n///\n");
    let _ = writeln!(
        docs,
        "/// [`Error::InputLength`] or [`Error::OutputLength`] when a slice's length is not its\n/// array's element count; `{name}` then writes nothing."
    );
    (docs, checks)
}

/// The whole module.
fn module(program: &LirProgram, name: &str, dialect: &RustDialect<'_>, body: &str) -> String {
    let mut src = String::new();
    let _ = writeln!(
        src,
        "// {name}.rs: rfx program `{}` exported as a no_std Rust module (exact IEEE mode).",
        program.name()
    );
    src.push_str("// No allocation, no `unsafe`, no mutable statics; usable from a `#![no_std]` crate.\n");
    if dialect.libm.is_empty() {
        src.push_str("// Needs no crate but `core`.\n");
    } else {
        let names: Vec<&str> = dialect.libm.iter().copied().collect();
        let _ = writeln!(
            src,
            "// Needs the `libm` crate ({LIBM_VERSION} or later) for: {}.",
            names.join(", ")
        );
    }
    src.push('\n');
    src.push_str(ERROR_ITEMS);
    src.push('\n');
    src.push_str(&work_items(&dialect.layout));
    src.push('\n');
    let (docs, checks) = argument_docs_and_checks(program, name);
    src.push_str(&docs);
    src.push_str(concat!(
        "#[allow(unused_mut, unused_variables, unused_assignments, unused_parens, unused_braces)]\n",
        "#[allow(non_snake_case, clippy::all, clippy::pedantic)]\n"
    ));
    let _ = writeln!(
        src,
        "pub fn {name}({}) -> Result<(), Error> {{",
        parameters(program).join(", ")
    );
    src.push_str(&checks);
    // The walk indents for a C function body (two spaces a level); Rust's is four.
    for line in body.lines() {
        let trimmed = line.trim_start_matches(' ');
        let levels = (line.len() - trimmed.len()) / 2;
        let _ = writeln!(src, "{}{trimmed}", "    ".repeat(levels));
    }
    // `Ok` and `Err` are spelled out so that a function named `Ok` or `Err` cannot shadow them.
    src.push_str("    core::result::Result::Ok(())\n}\n");
    for h in &dialect.helpers {
        src.push('\n');
        src.push_str("#[allow(dead_code)]\n#[inline]\n");
        src.push_str(h.source());
    }
    for (index, buffer) in program.buffers().iter().enumerate() {
        if let Storage::Literal { values } = &buffer.storage {
            src.push('\n');
            src.push_str(&literal_table(BufId::new(index), buffer.ty.dtype, values));
        }
    }
    src
}
