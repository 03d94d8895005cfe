//! LIR → WGSL text: one compute entry point per kernel, one storage binding per buffer.
//!
//! Every kernel runs one invocation per *unit*: a point of the loop nest for elementwise kernels,
//! a leading point for kernels with reductions (the invocation then walks the reduced points in
//! row-major order, keeping the LIR's `lanes` partial accumulators, so results match the LIR
//! interpreter bit for bit). Invocations are numbered `gid.x + gid.y * GRID_ROW`, so a kernel
//! with more than 65535 workgroups runs as a 2D grid.
//!
//! Where WGSL's own operators differ from rfx's semantics (NaN-propagating `min`/`max`, `sign`,
//! exact `fmod`, C99 `pow`, i32 floor division, saturating float → i32 casts, wrapping i32
//! arithmetic), the code calls small helper functions emitted at the top of the module. NaN
//! tests and the special float constants go through `bitcast`, which neither WGSL's constant
//! evaluator nor a fast-math shader compiler may fold away.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{Inst, LirKernel, LirProgram, ScanOrder, SlotId, Storage};
use rfx_ir::semantics::{reduce_finish, reduce_identity};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Scalar, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::BACKEND;
use crate::helpers::Helper;

/// Invocations per workgroup (the `@workgroup_size`).
pub(crate) const WORKGROUP_SIZE: u32 = 64;
/// Most workgroups along one grid dimension: WebGPU's guaranteed minimum of
/// `max_compute_workgroups_per_dimension`, so the generated code does not depend on the device.
pub(crate) const MAX_GROUPS_PER_DIM: u64 = 65535;

/// How one kernel is dispatched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelLayout {
    /// The entry point's name.
    pub(crate) entry: String,
    /// Invocations that do work (units); 0 means the kernel is not dispatched.
    pub(crate) units: u64,
    /// Workgroups along x and y.
    pub(crate) groups: (u32, u32),
    /// The buffers (by index, which is also the binding) the entry point uses, ascending.
    pub(crate) bindings: Vec<usize>,
    /// Loop iterations per invocation ([`loop_iterations`]).
    pub(crate) loop_iterations: u64,
}

/// A program's WGSL module and how to dispatch each kernel.
#[derive(Clone, Debug)]
pub(crate) struct Shader {
    pub(crate) source: String,
    pub(crate) kernels: Vec<KernelLayout>,
}

fn unsupported(what: Unsupported) -> BackendError {
    BackendError::Unsupported {
        backend: BACKEND,
        what,
    }
}

/// Rejects what WGSL cannot compute: any `f64` buffer or slot (WGSL has no f64; a silent
/// downcast would change results).
pub(crate) fn check_supported(program: &LirProgram) -> Result<(), BackendError> {
    let uses_f64 = program.buffers().iter().any(|b| b.ty.dtype == DType::F64)
        || program.kernels().iter().any(|k| k.slots.contains(&DType::F64));
    if uses_f64 {
        return Err(unsupported(Unsupported::DType(DType::F64)));
    }
    Ok(())
}

/// The WGSL type a value of `dtype` has in registers.
fn value_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::I32 => "i32",
        DType::F32 | DType::F64 => "f32",
    }
}

/// The WGSL element type of a storage buffer of `dtype` (bool is not host-shareable: u32 0/1).
fn storage_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "u32",
        DType::I32 => "i32",
        DType::F32 | DType::F64 => "f32",
    }
}

/// An exact WGSL expression for an `f32`: a decimal literal when the shortest decimal is the
/// value exactly (2.0, 0.5, -3.25), else the bits through `bitcast` (NaN, ±Inf, -0, 0.1, ...).
fn f32_literal(v: f32) -> String {
    let text = format!("{v:?}");
    let exact = v.is_finite()
        && v.to_bits() != 0x8000_0000
        && (v == 0.0 || v.abs() >= f32::MIN_POSITIVE)
        && text.parse::<f64>().is_ok_and(|d| d == f64::from(v))
        && !text.contains('e');
    if exact {
        format!("{text}f")
    } else {
        format!("bitcast<f32>(0x{:08x}u)", v.to_bits())
    }
}

fn i32_literal(v: i32) -> String {
    if v == i32::MIN {
        "bitcast<i32>(0x80000000u)".to_string()
    } else {
        format!("{v}i")
    }
}

fn scalar_literal(value: Scalar) -> String {
    match value {
        Scalar::Bool(b) => b.to_string(),
        Scalar::I32(v) => i32_literal(v),
        Scalar::F32(v) => f32_literal(v),
        // Rejected by `check_supported` before code generation.
        Scalar::F64(v) => f32_literal(v as f32),
    }
}

struct Emitter<'a> {
    program: &'a LirProgram,
    helpers: BTreeSet<Helper>,
}

fn slot(s: SlotId) -> String {
    format!("s{}", s.index())
}

fn compile_error(message: String) -> BackendError {
    BackendError::Compile {
        backend: BACKEND,
        message,
    }
}

impl Emitter<'_> {
    fn use_helper(&mut self, helper: Helper) -> &'static str {
        for dep in helper.deps() {
            self.helpers.insert(*dep);
        }
        self.helpers.insert(helper);
        helper.name()
    }

    fn buffer_dtype(&self, buf: rfx_ir::BufId) -> Result<DType, BackendError> {
        self.program
            .buffer(buf)
            .map(|b| b.ty.dtype)
            .ok_or_else(|| compile_error(format!("unknown buffer {buf}")))
    }

    /// The expression of a unary op on `x` of `dtype`.
    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &str) -> String {
        if dtype == DType::I32 {
            return match op {
                UnaryOp::Neg => format!("bitcast<i32>(0u - bitcast<u32>({x}))"),
                UnaryOp::Abs => format!("select({x}, bitcast<i32>(0u - bitcast<u32>({x})), {x} < 0i)"),
                _ => format!("sign({x})"),
            };
        }
        if dtype == DType::Bool {
            return format!("!{x}");
        }
        // The operand of a rounding op goes through `rfx_exact`, so the driver cannot see which
        // op produced it: NIR rewrites `sqrt(exp2(a))` to `exp2(0.5 * a)` and `exp2(log2(a))`
        // to `a` (found by `rfx fuzz` on lavapipe), which are neither exact nor NaN-correct.
        let opaque;
        let x = if op.is_transcendental() || matches!(op, UnaryOp::Sqrt | UnaryOp::Rsqrt) {
            opaque = format!("{}({x})", self.use_helper(Helper::Exact));
            opaque.as_str()
        } else {
            x
        };
        match op {
            UnaryOp::Neg => format!("-{x}"),
            // The sign bit cleared, not `abs`: Mesa folds `abs(sqrt(x))` to `sqrt(x)`, wrong
            // for x = -0 (sqrt(-0) = -0, abs must give +0; found by `rfx fuzz` on lavapipe).
            UnaryOp::Abs => format!("bitcast<f32>(bitcast<u32>({x}) & 0x7fffffffu)"),
            UnaryOp::Sign => format!("{}({x})", self.use_helper(Helper::SignF32)),
            UnaryOp::Floor => format!("floor({x})"),
            UnaryOp::Ceil => format!("ceil({x})"),
            // WGSL's `round` rounds half to even.
            UnaryOp::Round => format!("round({x})"),
            UnaryOp::Sqrt => format!("sqrt({x})"),
            // Kept as divisions (NIR would make them approximate `frsq`/`frcp`).
            UnaryOp::Rsqrt => format!("1.0f / {}(sqrt({x}))", self.use_helper(Helper::Exact)),
            UnaryOp::Recip => format!("1.0f / {}({x})", self.use_helper(Helper::Exact)),
            UnaryOp::Exp => format!("{}({x})", self.use_helper(Helper::ExpF32)),
            UnaryOp::Exp2 => format!("{}({x})", self.use_helper(Helper::Exp2F32)),
            UnaryOp::Log => format!("{}({x})", self.use_helper(Helper::LogF32)),
            UnaryOp::Log2 => format!("{}({x})", self.use_helper(Helper::Log2F32)),
            // Odd functions are `x` itself, correctly rounded, below 2^-12: this keeps -0 and
            // subnormal arguments, which GPU built-ins may flush or lose the sign of.
            UnaryOp::Sin => small_odd(self.use_helper(Helper::SinF32), x),
            UnaryOp::Cos => format!("{}({x})", self.use_helper(Helper::CosF32)),
            UnaryOp::Tan => small_odd(self.use_helper(Helper::TanF32), x),
            UnaryOp::Tanh => format!("{}({x})", self.use_helper(Helper::TanhF32)),
            UnaryOp::Atan => format!(
                "select({}, {x}, {}({x}))",
                small_odd(self.use_helper(Helper::AtanF32), x),
                self.use_helper(Helper::IsNan)
            ),
            UnaryOp::Asin => small_odd(self.use_helper(Helper::AsinF32), x),
            UnaryOp::Acos => format!("{}({x})", self.use_helper(Helper::AcosF32)),
            UnaryOp::Sigmoid => format!("{}({x})", self.use_helper(Helper::SigmoidF32)),
            UnaryOp::Erf => format!("{}({x})", self.use_helper(Helper::ErfF32)),
            UnaryOp::Not => format!("!{x}"),
        }
    }

    /// The expression of a binary op on `a`, `b` of `dtype`.
    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &str, b: &str) -> String {
        match dtype {
            DType::Bool => match op {
                BinaryOp::Or => format!("{a} || {b}"),
                _ => format!("{a} && {b}"),
            },
            // i32 arithmetic wraps; done on u32 so that no backend sees signed overflow (UB in MSL).
            DType::I32 => match op {
                BinaryOp::Add => format!("bitcast<i32>(bitcast<u32>({a}) + bitcast<u32>({b}))"),
                BinaryOp::Sub => format!("bitcast<i32>(bitcast<u32>({a}) - bitcast<u32>({b}))"),
                BinaryOp::Mul => format!("bitcast<i32>(bitcast<u32>({a}) * bitcast<u32>({b}))"),
                BinaryOp::Div => format!("{}({a}, {b})", self.use_helper(Helper::DivI32)),
                BinaryOp::Fmod => format!("{}({a}, {b})", self.use_helper(Helper::FmodI32)),
                BinaryOp::Min => format!("min({a}, {b})"),
                _ => format!("max({a}, {b})"),
            },
            DType::F32 | DType::F64 => match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                    let sym = match op {
                        BinaryOp::Add => "+",
                        BinaryOp::Sub => "-",
                        BinaryOp::Mul => "*",
                        _ => "/",
                    };
                    self.use_helper(Helper::Exact);
                    format!("rfx_exact({a}) {sym} rfx_exact2({b})")
                }
                BinaryOp::Pow => {
                    self.use_helper(Helper::Exact);
                    format!(
                        "{}(rfx_exact({a}), rfx_exact2({b}))",
                        self.use_helper(Helper::PowF32)
                    )
                }
                BinaryOp::Min => format!("{}({a}, {b})", self.use_helper(Helper::MinF32)),
                BinaryOp::Max => format!("{}({a}, {b})", self.use_helper(Helper::MaxF32)),
                BinaryOp::Atan2 => {
                    self.use_helper(Helper::Exact);
                    format!(
                        "{}(rfx_exact({a}), rfx_exact2({b}))",
                        self.use_helper(Helper::Atan2F32)
                    )
                }
                BinaryOp::Fmod => format!("{}({a}, {b})", self.use_helper(Helper::FmodF32)),
                BinaryOp::And => format!("{a} && {b}"),
                BinaryOp::Or => format!("{a} || {b}"),
            },
        }
    }

    fn compare(op: CmpOp, dtype: DType, a: &str, b: &str) -> String {
        match op {
            CmpOp::Lt => format!("{a} < {b}"),
            CmpOp::Le => format!("{a} <= {b}"),
            CmpOp::Gt => format!("{a} > {b}"),
            CmpOp::Ge => format!("{a} >= {b}"),
            CmpOp::Eq => format!("{a} == {b}"),
            // `!(a == b)` is true for NaN whichever way the target orders `!=`.
            CmpOp::Ne if dtype.is_float() => format!("!({a} == {b})"),
            CmpOp::Ne => format!("{a} != {b}"),
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: &str) -> String {
        match (from, to) {
            _ if from == to => x.to_string(),
            (DType::Bool, DType::I32) => format!("select(0i, 1i, {x})"),
            (DType::Bool, _) => format!("select(0.0f, 1.0f, {x})"),
            (DType::I32, DType::Bool) => format!("{x} != 0i"),
            (DType::I32, _) => format!("f32({x})"),
            // NaN → true, ±0 → false.
            (_, DType::Bool) => format!("(bitcast<u32>({x}) & 0x7fffffffu) != 0u"),
            (_, DType::I32) => format!("{}({x})", self.use_helper(Helper::F32ToI32)),
            _ => x.to_string(),
        }
    }

    fn combine(&mut self, op: ReduceOp, dtype: DType, acc: &str, x: &str) -> String {
        let binary_op = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        self.binary(binary_op, dtype, acc, x)
    }
}

/// `f(x)`, or `x` where `|x| < 2^-12` (where `f(x) = x + O(x^3)` rounds to `x`).
fn small_odd(f: &str, x: &str) -> String {
    format!("select({f}({x}), {x}, abs({x}) < 0x1p-12f)")
}

/// The element index `sum(i_d * stride_d)` as WGSL.
fn index_expr(strides: &[usize]) -> String {
    let terms: Vec<String> = strides
        .iter()
        .enumerate()
        .filter(|(_, s)| **s != 0)
        .map(|(d, s)| {
            if *s == 1 {
                format!("i{d}")
            } else {
                format!("i{d} * {s}u")
            }
        })
        .collect();
    if terms.is_empty() {
        "0u".to_string()
    } else {
        terms.join(" + ")
    }
}

fn product(dims: &[usize]) -> u64 {
    dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// The names the module declares besides the entry points: `rfx_zero` and every helper
/// function, which a kernel's entry point (`rfx_<kernel name>`) must not take.
fn reserved_names() -> BTreeSet<String> {
    let mut names = BTreeSet::from(["rfx_zero".to_string()]);
    for &helper in Helper::ALL {
        for declared in helper.source().split("fn ").skip(1) {
            let name: String = declared
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    names
}

/// Generates the WGSL module of `program`. The program must verify and use no `f64`.
pub(crate) fn generate(program: &LirProgram) -> Result<Shader, BackendError> {
    check_supported(program)?;
    let mut emitter = Emitter {
        program,
        helpers: BTreeSet::new(),
    };
    let mut kernels_text = String::new();
    let mut layouts = Vec::new();
    let mut used_names = reserved_names();
    for (index, kernel) in program.kernels().iter().enumerate() {
        let mut entry = format!("rfx_{}", kernel.name);
        if used_names.contains(&entry) {
            entry = format!("rfx_{}_{index}", kernel.name);
        }
        while !used_names.insert(entry.clone()) {
            entry.push('_');
        }
        let layout = emit_kernel(&mut emitter, kernel, &entry, &mut kernels_text)?;
        layouts.push(layout);
    }
    let mut source = String::new();
    let w = &mut source;
    let _ = writeln!(
        w,
        "// rfx program `{}`: WGSL from rfx-codegen-metal.",
        program.name()
    );
    let _ = writeln!(w, "var<private> rfx_zero: u32;");
    let used: BTreeSet<usize> = layouts.iter().flat_map(|l| l.bindings.iter().copied()).collect();
    for (i, buffer) in program.buffers().iter().enumerate() {
        if !used.contains(&i) {
            continue;
        }
        let (access, what) = match &buffer.storage {
            Storage::Input { name } => ("read", format!("input `{name}`")),
            Storage::Output { name } => ("read_write", format!("output `{name}`")),
            Storage::Arena { offset } => ("read_write", format!("temporary (arena offset {offset})")),
            Storage::Literal { .. } => ("read", "literal data".to_string()),
        };
        // Fixed-size arrays: shapes are static, so neither wgpu's bounds checks nor the MSL need
        // a buffer-sizes table.
        let _ = writeln!(
            w,
            "@group(0) @binding({i}) var<storage, {access}> buf{i}: array<{}, {}>; // {what}: {}",
            storage_type(buffer.ty.dtype),
            buffer.ty.shape.numel().max(1),
            buffer.ty,
        );
    }
    let mut all_helpers = emitter.helpers.clone();
    for h in &emitter.helpers {
        all_helpers.extend(h.deps().iter().copied());
    }
    for helper in all_helpers {
        let _ = writeln!(w);
        w.push_str(helper.source());
    }
    source.push_str(&kernels_text);
    Ok(Shader {
        source,
        kernels: layouts,
    })
}

fn emit_kernel(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    entry: &str,
    out: &mut String,
) -> Result<KernelLayout, BackendError> {
    let rank = kernel.dims.len();
    // A kernel with scans has one unit per row of its innermost (scanned) dim.
    let split = match kernel.scan {
        Some(_) => rank.saturating_sub(1),
        None => rank.saturating_sub(kernel.reduce_dims),
    };
    let (leading, reduced) = kernel.dims.split_at(split);
    let units = product(leading);
    let reduced_numel = product(reduced);
    // Elementwise kernels without reduced dims: one unit per point.
    let runs_body = units > 0 && reduced_numel > 0;
    if units > u64::from(u32::MAX) {
        return Err(unsupported(Unsupported::Size {
            what: "points of a kernel's leading dims",
            size: usize::try_from(units).unwrap_or(usize::MAX),
            limit: u32::MAX as usize,
        }));
    }
    let total_groups = units.div_ceil(u64::from(WORKGROUP_SIZE));
    let groups_x = total_groups.min(MAX_GROUPS_PER_DIM);
    let groups_y = if groups_x == 0 {
        0
    } else {
        total_groups.div_ceil(groups_x)
    };
    let grid_row = groups_x * u64::from(WORKGROUP_SIZE);
    let has_reduce = kernel.body.iter().any(|i| matches!(i, Inst::Reduce { .. }));
    // Lowering decides which reductions run as workgroup trees (`Schedule::gpu_tree`); smaller
    // ones are folded by one invocation in the LIR `lanes` order.
    if has_reduce && units > 0 && kernel.schedule.gpu_tree && split < rank {
        return emit_tree_kernel(em, kernel, entry, out);
    }
    let mut bindings = BTreeSet::new();

    let mut body = String::new();
    let b = &mut body;
    let _ = writeln!(b);
    let _ = writeln!(
        b,
        "// kernel `{}`: dims {:?}, {} reduced, lanes {}.",
        kernel.name, kernel.dims, kernel.reduce_dims, kernel.schedule.reduce_lanes
    );
    let _ = writeln!(b, "@compute @workgroup_size({WORKGROUP_SIZE})");
    let _ = writeln!(b, "fn {entry}(@builtin(global_invocation_id) gid: vec3<u32>) {{");
    if groups_y > 1 {
        let _ = writeln!(b, "    let unit = gid.x + gid.y * {grid_row}u;");
    } else {
        let _ = writeln!(b, "    let unit = gid.x;");
    }
    let _ = writeln!(b, "    rfx_zero = gid.z;");
    let _ = writeln!(b, "    if (unit >= {units}u) {{");
    let _ = writeln!(b, "        return;");
    let _ = writeln!(b, "    }}");

    if !runs_body {
        // An empty reduction: every reduce writes its finished identity; nothing else runs.
        if units > 0 {
            for inst in &kernel.body {
                if let Inst::Reduce { op, buf, .. } = inst {
                    let dtype = em.buffer_dtype(*buf)?;
                    let value = reduce_identity(*op, dtype)
                        .and_then(|id| reduce_finish(*op, id, 0))
                        .ok_or_else(|| compile_error(format!("reduce {op} on {dtype}")))?;
                    bindings.insert(buf.index());
                    let _ = writeln!(
                        b,
                        "    buf{}[unit] = {};",
                        buf.index(),
                        store_value(dtype, &scalar_literal(value))
                    );
                }
            }
        }
        let _ = writeln!(b, "}}");
        out.push_str(&body);
        return Ok(KernelLayout {
            entry: entry.to_string(),
            units,
            groups: (groups_x as u32, groups_y as u32),
            bindings: bindings.into_iter().collect(),
            loop_iterations: 0,
        });
    }

    emit_unit_prologue(em, kernel, split, &mut bindings, b)?;
    if let Some(order) = kernel.scan {
        emit_scan_loop(em, kernel, order, &mut bindings, b)?;
    } else if !has_reduce {
        // Elementwise: the unit is the point.
        emit_body(em, kernel, "    ", None, &mut bindings, b)?;
    } else {
        emit_reduction_loops(em, kernel, split, reduced_numel, &mut bindings, b)?;
    }
    let _ = writeln!(b, "}}");
    out.push_str(&body);
    Ok(KernelLayout {
        entry: entry.to_string(),
        units,
        groups: (groups_x as u32, groups_y as u32),
        bindings: bindings.into_iter().collect(),
        loop_iterations: loop_iterations(kernel),
    })
}

/// The slot declarations, the preamble, and the leading indices `i0..i{split}` unravelled from
/// `unit` (innermost first): the start of every entry point after its `unit` guard.
fn emit_unit_prologue(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    split: usize,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    for (i, dtype) in kernel.slots.iter().enumerate() {
        let _ = writeln!(b, "    var s{i}: {};", value_type(*dtype));
    }
    if !kernel.preamble.is_empty() {
        let _ = writeln!(b, "    // preamble");
        for inst in &kernel.preamble {
            emit_inst(em, kernel, inst, "    ", bindings, b)?;
        }
    }
    if split > 0 {
        let _ = writeln!(b, "    var rest = unit;");
        for d in (0..split).rev() {
            let size = kernel.dims[d];
            if d == 0 {
                let _ = writeln!(b, "    let i0 = rest;");
            } else if size == 1 {
                let _ = writeln!(b, "    let i{d} = 0u;");
            } else {
                let _ = writeln!(b, "    let i{d} = rest % {size}u;");
                let _ = writeln!(b, "    rest = rest / {size}u;");
            }
        }
    }
    Ok(())
}

/// A kernel whose reductions run as workgroup trees: one workgroup of [`WORKGROUP_SIZE`]
/// invocations per unit (leading point). Invocation `l` folds, in increasing order, the reduced
/// points `r ≡ l (mod 64)` (row-major over the reduced dims, so neighbouring invocations read
/// neighbouring addresses); the 64 totals are then combined in workgroup memory by a fixed
/// tree (`v[l] ⊕= v[l + s]` for s = 32, 16, ..., 1, lower index on the left) and invocation 0
/// stores the result. The order depends only on the shape: results are deterministic, float
/// sums are within `(ceil(points / 64) + 6) · u · Σ|x|` of the exact sum, i32 reductions and
/// `max`/`min` give the interpreter's bits (a ±0 tie may keep either zero).
fn emit_tree_kernel(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    entry: &str,
    out: &mut String,
) -> Result<KernelLayout, BackendError> {
    let rank = kernel.dims.len();
    let split = rank.saturating_sub(kernel.reduce_dims);
    let (leading, reduced) = kernel.dims.split_at(split);
    let units = product(leading);
    let points = product(reduced);
    let groups_x = units.min(MAX_GROUPS_PER_DIM);
    let groups_y = units.div_ceil(groups_x.max(1));
    let mut bindings = BTreeSet::new();
    let mut b = String::new();
    let wg = WORKGROUP_SIZE;
    let _ = writeln!(b);
    let mut reduces = Vec::new();
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, .. } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            let identity = reduce_identity(*op, dtype)
                .ok_or_else(|| compile_error(format!("reduce {op} on {dtype}")))?;
            let _ = writeln!(
                b,
                "var<workgroup> {entry}_wg{k}: array<{}, {wg}>;",
                value_type(dtype)
            );
            reduces.push((k, *op, *buf, dtype, identity));
        }
    }
    let _ = writeln!(
        b,
        "// kernel `{}`: dims {:?}, {} reduced; a workgroup tree per unit ({units} unit(s) of {points} point(s)).",
        kernel.name, kernel.dims, kernel.reduce_dims
    );
    let _ = writeln!(b, "@compute @workgroup_size({wg})");
    let _ = writeln!(
        b,
        "fn {entry}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{"
    );
    if groups_y > 1 {
        let _ = writeln!(b, "    let unit = wid.x + wid.y * {groups_x}u;");
    } else {
        let _ = writeln!(b, "    let unit = wid.x;");
    }
    let _ = writeln!(b, "    rfx_zero = wid.z;");
    // `unit` is the same for the whole workgroup, so the barriers below stay in uniform
    // control flow.
    let _ = writeln!(b, "    if (unit >= {units}u) {{");
    let _ = writeln!(b, "        return;");
    let _ = writeln!(b, "    }}");
    emit_unit_prologue(em, kernel, split, &mut bindings, &mut b)?;
    for &(k, _, _, dtype, identity) in &reduces {
        let _ = writeln!(
            b,
            "    var acc{k}_0: {} = {};",
            value_type(dtype),
            scalar_literal(identity)
        );
    }
    let _ = writeln!(b, "    for (var r = lid; r < {points}u; r += {wg}u) {{");
    let _ = writeln!(b, "        var rr = r;");
    for d in (split..rank).rev() {
        let size = kernel.dims[d];
        if d == split {
            let _ = writeln!(b, "        let i{d} = rr;");
        } else {
            let _ = writeln!(b, "        let i{d} = rr % {size}u;");
            let _ = writeln!(b, "        rr = rr / {size}u;");
        }
    }
    emit_body(em, kernel, "        ", Some(0), &mut bindings, &mut b)?;
    let _ = writeln!(b, "    }}");
    for &(k, _, _, _, _) in &reduces {
        let _ = writeln!(b, "    {entry}_wg{k}[lid] = acc{k}_0;");
    }
    let _ = writeln!(b, "    workgroupBarrier();");
    let mut step = wg / 2;
    while step > 0 {
        let _ = writeln!(b, "    if (lid < {step}u) {{");
        for &(k, op, _, dtype, _) in &reduces {
            let value = em.combine(
                op,
                dtype,
                &format!("{entry}_wg{k}[lid]"),
                &format!("{entry}_wg{k}[lid + {step}u]"),
            );
            let _ = writeln!(b, "        {entry}_wg{k}[lid] = {value};");
        }
        let _ = writeln!(b, "    }}");
        let _ = writeln!(b, "    workgroupBarrier();");
        step /= 2;
    }
    let _ = writeln!(b, "    if (lid == 0u) {{");
    for &(k, op, buf, dtype, _) in &reduces {
        let mut total = format!("{entry}_wg{k}[0]");
        if op == ReduceOp::Mean {
            total = format!("{total} / {}", f32_literal(points as f32));
        }
        bindings.insert(buf.index());
        let _ = writeln!(
            b,
            "        buf{}[unit] = {};",
            buf.index(),
            store_value(dtype, &total)
        );
    }
    let _ = writeln!(b, "    }}");
    let _ = writeln!(b, "}}");
    out.push_str(&b);
    Ok(KernelLayout {
        entry: entry.to_string(),
        units,
        groups: (groups_x as u32, groups_y as u32),
        bindings: bindings.into_iter().collect(),
        loop_iterations: loop_iterations(kernel),
    })
}

/// The reduced points of one unit: loops over the outer reduced dims and, along the innermost
/// dim, blocks of `unroll` points written out one after the other (then the tail, also written
/// out). `unroll` is a multiple of the LIR's `lanes`, so each copy's partial accumulator is
/// known statically: a scalar variable `acc{inst}_{lane}`, no dynamically indexed array.
/// Unrolling also keeps the loop count per invocation low (llvmpipe ends an invocation's loops
/// after 65535 iterations in total; see [`loop_iterations`]).
fn emit_reduction_loops(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    split: usize,
    reduced_numel: u64,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    let rank = kernel.dims.len();
    let lanes = kernel.schedule.reduce_lanes.max(1);
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, .. } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            let identity = reduce_identity(*op, dtype)
                .ok_or_else(|| compile_error(format!("reduce {op} on {dtype}")))?;
            let lit = scalar_literal(identity);
            let ty = value_type(dtype);
            for lane in 0..lanes {
                let _ = writeln!(b, "    var acc{k}_{lane}: {ty} = {lit};");
            }
        }
    }
    let mut indent = "    ".to_string();
    if split == rank {
        // A reduction over no dims (an axis of size 1 coalesced away): one point, lane 0.
        emit_body(em, kernel, "    ", Some(0), bindings, b)?;
    } else {
        emit_innermost(em, kernel, split, bindings, b, &mut indent)?;
    }
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, .. } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            // The LIR's pairwise tree of the partials, into `acc{k}_0`.
            for (half, offset) in rfx_ir::lir::reduce_lane_levels(lanes) {
                for i in 0..half {
                    let left = format!("acc{k}_{i}");
                    let value = em.combine(*op, dtype, &left, &format!("acc{k}_{}", i + offset));
                    let _ = writeln!(b, "    {left} = {value};");
                }
            }
            let _ = writeln!(b, "    var total{k} = acc{k}_0;");
            let mut total = format!("total{k}");
            if *op == ReduceOp::Mean {
                total = format!("{total} / {}", f32_literal(reduced_numel as f32));
            }
            let _ = writeln!(
                b,
                "    buf{}[unit] = {};",
                buf.index(),
                store_value(dtype, &total)
            );
        }
    }
    Ok(())
}

/// Points per pass of a scan's loop (the copies of the body in one iteration): fewer loop
/// iterations per invocation (see [`loop_iterations`]).
const SCAN_UNROLL: u64 = 16;

/// The row of a kernel with scans (its innermost dim) run point by point in the kernel's scan
/// order, in blocks of [`SCAN_UNROLL`] points then the tail, each scan folding into a running
/// accumulator `scan{inst}` that starts at its op's identity: the interpreter's sequential
/// order, so its bits.
fn emit_scan_loop(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    order: ScanOrder,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Scan { op, dst, .. } = inst {
            let dtype = slot_dtype(kernel, *dst)?;
            let identity = reduce_identity(op.reduce_op(), dtype)
                .ok_or_else(|| compile_error(format!("{op} on {dtype}")))?;
            let _ = writeln!(
                b,
                "    var scan{k}: {} = {};",
                value_type(dtype),
                scalar_literal(identity)
            );
        }
    }
    let last = kernel.dims.len().saturating_sub(1);
    let size = kernel.dims.get(last).copied().unwrap_or(1) as u64;
    // The position of the row's step `step` in the scan's order.
    let position = |step: &str| match order {
        ScanOrder::Forward => step.to_string(),
        ScanOrder::Reverse => format!("{}u - ({step})", size.saturating_sub(1)),
    };
    let blocks = size / SCAN_UNROLL;
    if blocks > 0 {
        let _ = writeln!(b, "    for (var blk = 0u; blk < {blocks}u; blk += 1u) {{");
        for u in 0..SCAN_UNROLL {
            let _ = writeln!(b, "        {{");
            let _ = writeln!(
                b,
                "            let i{last} = {};",
                position(&format!("blk * {SCAN_UNROLL}u + {u}u"))
            );
            emit_body(em, kernel, "            ", None, bindings, b)?;
            let _ = writeln!(b, "        }}");
        }
        let _ = writeln!(b, "    }}");
    }
    for step in blocks * SCAN_UNROLL..size {
        let _ = writeln!(b, "    {{");
        let _ = writeln!(b, "        let i{last} = {};", position(&format!("{step}u")));
        emit_body(em, kernel, "        ", None, bindings, b)?;
        let _ = writeln!(b, "    }}");
    }
    Ok(())
}

/// The innermost reduced dim (blocks of `unroll` points, then the tail) inside loops over the
/// outer reduced dims.
fn emit_innermost(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    split: usize,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
    indent: &mut String,
) -> Result<(), BackendError> {
    let rank = kernel.dims.len();
    let lanes = kernel.schedule.reduce_lanes.max(1);
    let unroll = unroll_factor(lanes);
    for d in split..rank - 1 {
        let size = kernel.dims[d];
        let _ = writeln!(b, "{indent}for (var i{d} = 0u; i{d} < {size}u; i{d} += 1u) {{");
        indent.push_str("    ");
    }
    let last = rank - 1;
    let size = kernel.dims[last] as u64;
    let blocks = size / u64::from(unroll);
    if blocks > 0 {
        let _ = writeln!(b, "{indent}for (var blk = 0u; blk < {blocks}u; blk += 1u) {{");
        for u in 0..unroll {
            let inner = format!("{indent}    ");
            let _ = writeln!(b, "{inner}{{");
            let _ = writeln!(b, "{inner}    let i{last} = blk * {unroll}u + {u}u;");
            emit_body(em, kernel, &format!("{inner}    "), Some(u % lanes), bindings, b)?;
            let _ = writeln!(b, "{inner}}}");
        }
        let _ = writeln!(b, "{indent}}}");
    }
    for point in blocks * u64::from(unroll)..size {
        let _ = writeln!(b, "{indent}{{");
        let _ = writeln!(b, "{indent}    let i{last} = {point}u;");
        let lane = (point % u64::from(lanes)) as u32;
        emit_body(em, kernel, &format!("{indent}    "), Some(lane), bindings, b)?;
        let _ = writeln!(b, "{indent}}}");
    }
    for _ in split..rank - 1 {
        indent.truncate(indent.len() - 4);
        let _ = writeln!(b, "{indent}}}");
    }
    Ok(())
}

/// Points of the innermost reduced dim per loop iteration: a multiple of `lanes`, at least 16.
fn unroll_factor(lanes: u32) -> u32 {
    lanes * 16u32.div_ceil(lanes).max(1)
}

/// Loop iterations one invocation of `kernel` runs (the generated code's only loops are the
/// reduction loops). llvmpipe stops an invocation's loops after 65535 iterations in total, so
/// the runtime rejects kernels above that on llvmpipe rather than return wrong results.
pub(crate) fn loop_iterations(kernel: &LirKernel) -> u64 {
    if kernel.scan.is_some() {
        return kernel.dims.last().map_or(0, |&n| n as u64 / SCAN_UNROLL);
    }
    if kernel.reduce_dims == 0 {
        return 0;
    }
    let rank = kernel.dims.len();
    let split = rank - kernel.reduce_dims.min(rank);
    let points = product(&kernel.dims[split..]);
    if kernel.schedule.gpu_tree && product(&kernel.dims[..split]) > 0 && split < rank {
        // A workgroup tree: each invocation's one loop steps by the workgroup size.
        return points.div_ceil(u64::from(WORKGROUP_SIZE));
    }
    let unroll = u64::from(unroll_factor(kernel.schedule.reduce_lanes.max(1)));
    let mut outer = 1u64;
    let mut total = 0u64;
    for (d, &size) in kernel.dims.iter().enumerate().skip(split) {
        let iterations = if d == rank - 1 {
            size as u64 / unroll
        } else {
            size as u64
        };
        outer = outer.saturating_mul(iterations);
        total = total.saturating_add(outer);
    }
    total
}

/// The body at one point; `lane` is the partial accumulator its reductions combine into.
fn emit_body(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    indent: &str,
    lane: Option<u32>,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, src } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            bindings.insert(buf.index());
            let acc = format!("acc{k}_{}", lane.unwrap_or(0));
            let value = em.combine(*op, dtype, &acc, &slot(*src));
            let _ = writeln!(b, "{indent}{acc} = {value};");
        } else if let Inst::Scan { dst, op, src, coef } = inst {
            let dtype = slot_dtype(kernel, *src)?;
            let acc = format!("scan{k}");
            // A linear recurrence scales the accumulator first: `coef * acc + src`.
            let scaled = match coef {
                Some(coef) => format!("({})", em.binary(BinaryOp::Mul, dtype, &slot(*coef), &acc)),
                None => acc.clone(),
            };
            let value = em.combine(op.reduce_op(), dtype, &scaled, &slot(*src));
            let _ = writeln!(b, "{indent}{acc} = {value};");
            let _ = writeln!(b, "{indent}{} = {acc};", slot(*dst));
        } else {
            emit_inst(em, kernel, inst, indent, bindings, b)?;
        }
    }
    Ok(())
}

/// The declared dtype of `slot`, or the error for a slot the kernel does not declare.
fn slot_dtype(kernel: &LirKernel, slot: SlotId) -> Result<DType, BackendError> {
    kernel
        .slot_dtype(slot)
        .ok_or_else(|| compile_error(format!("kernel `{}`: unknown slot {slot}", kernel.name)))
}

/// Element `element` of buffer `buf` (of `dtype`) as a value: bools are stored as `u32`.
fn read_buffer(dtype: DType, buf: usize, element: &str) -> String {
    let load = format!("buf{buf}[{element}]");
    if dtype == DType::Bool {
        format!("{load} != 0u")
    } else {
        load
    }
}

/// `value` converted to the buffer's storage type.
fn store_value(dtype: DType, value: &str) -> String {
    if dtype == DType::Bool {
        format!("select(0u, 1u, {value})")
    } else {
        value.to_string()
    }
}

fn emit_inst(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    inst: &Inst,
    indent: &str,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    let dtype_of = |s: SlotId| slot_dtype(kernel, s);
    let expr = match inst {
        Inst::Load {
            buf, strides, offset, ..
        } => {
            bindings.insert(buf.index());
            let element = match offset {
                0 => index_expr(strides),
                at => format!("{at}u + {}", index_expr(strides)),
            };
            read_buffer(em.buffer_dtype(*buf)?, buf.index(), &element)
        }
        // The verifier guarantees at least one element; the index is clamped into them.
        Inst::Gather { buf, index, .. } => {
            bindings.insert(buf.index());
            let last = em
                .program
                .buffer(*buf)
                .map_or(0, |b| b.ty.shape.numel().saturating_sub(1))
                .min(i32::MAX as usize);
            let element = format!("u32(clamp({}, 0i, {last}i))", slot(*index));
            read_buffer(em.buffer_dtype(*buf)?, buf.index(), &element)
        }
        // Exact: the verifier bounds every value by what the dtype holds (2^24 for `f32`).
        Inst::Index { dst, strides } => match dtype_of(*dst)? {
            DType::F32 => format!("f32({})", index_expr(strides)),
            DType::I32 => format!("i32({})", index_expr(strides)),
            dtype => {
                return Err(compile_error(format!(
                    "kernel `{}`: index of dtype {dtype}",
                    kernel.name
                )));
            }
        },
        Inst::Const { value, .. } => scalar_literal(*value),
        Inst::Unary { op, src, .. } => em.unary(*op, dtype_of(*src)?, &slot(*src)),
        Inst::Binary { op, lhs, rhs, .. } => em.binary(*op, dtype_of(*lhs)?, &slot(*lhs), &slot(*rhs)),
        Inst::Compare { op, lhs, rhs, .. } => {
            Emitter::compare(*op, dtype_of(*lhs)?, &slot(*lhs), &slot(*rhs))
        }
        // A float select passes its operands through `rfx_exact`: Mesa turns a select between
        // known constants into arithmetic on the condition (`select(-1, 0, c)` gave -0 for a
        // true `c`; found by `rfx fuzz` on lavapipe).
        Inst::Select {
            cond,
            on_true,
            on_false,
            ..
        } if dtype_of(*on_true)? == DType::F32 => {
            let exact = em.use_helper(Helper::Exact);
            format!(
                "select({exact}({}), {exact}({}), {})",
                slot(*on_false),
                slot(*on_true),
                slot(*cond)
            )
        }
        Inst::Select {
            cond,
            on_true,
            on_false,
            ..
        } => format!("select({}, {}, {})", slot(*on_false), slot(*on_true), slot(*cond)),
        Inst::Cast { dst, src } => em.cast(dtype_of(*src)?, dtype_of(*dst)?, &slot(*src)),
        Inst::Store {
            buf,
            strides,
            offset,
            src,
        } => {
            bindings.insert(buf.index());
            let dtype = em.buffer_dtype(*buf)?;
            let mut element = match offset {
                0 => index_expr(strides),
                at => format!("{at}u + {}", index_expr(strides)),
            };
            // A row store's row: its clamped index (a preamble slot) times the row stride.
            if let Some(row) = kernel.row_store.as_ref().filter(|r| r.buf == *buf) {
                let last = i32::try_from(row.rows.saturating_sub(1))
                    .map_err(|_| compile_error(format!("kernel `{}`: too many rows", kernel.name)))?;
                element = format!(
                    "u32(clamp({}, 0i, {last}i)) * {}u + {element}",
                    slot(row.index),
                    row.stride
                );
            }
            let _ = writeln!(
                b,
                "{indent}buf{}[{}] = {};",
                buf.index(),
                element,
                store_value(dtype, &slot(*src))
            );
            return Ok(());
        }
        Inst::Reduce { .. } | Inst::Scan { .. } => {
            return Err(compile_error(format!(
                "kernel `{}`: `{}` outside the body",
                kernel.name,
                inst.name()
            )));
        }
    };
    if let Some(dst) = inst.dst() {
        let _ = writeln!(b, "{indent}{} = {expr};", slot(dst));
    }
    Ok(())
}
