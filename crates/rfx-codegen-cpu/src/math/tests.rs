//! Accuracy and special-value tests of the math kernels, through a small JIT harness.
//!
//! For every function and type the harness compiles `fn(x: *const T, y: *const T,
//! out: *mut T, n: usize)`, a loop that applies the op with `ty` lanes per step, and compares
//! the results with Rust's `std` (glibc libm) computed in `f64` and rounded to the type.

use std::time::Instant;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{AbiParam, BlockArg, InstBuilder, MemFlagsData, Type, UserFuncName, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use rfx_ir::{BinaryOp, UnaryOp};

use super::{emit_binary, emit_unary};
use crate::test_rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Un(UnaryOp),
    Bin(BinaryOp),
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Un(op) => op.name(),
            Op::Bin(op) => op.name(),
        }
    }
}

const OPS: [Op; 15] = [
    Op::Un(UnaryOp::Sin),
    Op::Un(UnaryOp::Cos),
    Op::Un(UnaryOp::Tan),
    Op::Un(UnaryOp::Exp),
    Op::Un(UnaryOp::Exp2),
    Op::Un(UnaryOp::Log),
    Op::Un(UnaryOp::Log2),
    Op::Un(UnaryOp::Tanh),
    Op::Un(UnaryOp::Atan),
    Op::Un(UnaryOp::Asin),
    Op::Un(UnaryOp::Acos),
    Op::Un(UnaryOp::Sigmoid),
    Op::Un(UnaryOp::Erf),
    Op::Bin(BinaryOp::Atan2),
    Op::Bin(BinaryOp::Pow),
];

/// The accuracy bound asserted for every function, in ULP, both precisions.
const MAX_ULP: u64 = 4;
/// `|x|` up to which `f32` sin/cos/tan must meet [`MAX_ULP`] (the reduction runs in `f64`
/// lanes with the same three-part Cody–Waite constants as for `f64`).
const TRIG_F32_BOUND: f64 = 1.6e6;
/// `|x|` up to which `f64` sin/cos/tan must meet [`MAX_ULP`] (the three-part Cody–Waite
/// reduction is exact for `|q| < 2^20`).
const TRIG_F64_BOUND: f64 = 1.6e6;

fn jit_module() -> JITModule {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").expect("opt_level is a flag");
    flags.set("use_colocated_libcalls", "false").expect("a flag");
    flags.set("is_pic", "false").expect("a flag");
    let isa = cranelift_native::builder()
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA flags");
    JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()))
}

type Kernel<T> = unsafe extern "C" fn(*const T, *const T, *mut T, usize);

/// Compiles the loop `out[i..i+lanes] = op(x[i..], y[i..])` for `i` in steps of the lane
/// count of `ty`; `n` must be a multiple of it.
fn compile(module: &mut JITModule, op: Op, ty: Type) -> *const u8 {
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for _ in 0..4 {
        sig.params.push(AbiParam::new(ptr));
    }
    let name = format!("{}_{}", op.name(), ty);
    let id = module
        .declare_function(&name, Linkage::Export, &sig)
        .expect("declare");
    let mut ctx = module.make_context();
    let mut fbc = FunctionBuilderContext::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let entry = b.create_block();
        let head = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.append_block_param(head, ptr);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (x, y, out, n) = (params[0], params[1], params[2], params[3]);
        let zero = b.ins().iconst(ptr, 0);
        b.ins().jump(head, &[BlockArg::Value(zero)]);

        b.switch_to_block(head);
        let i = b.block_params(head)[0];
        let more = b.ins().icmp(IntCC::UnsignedLessThan, i, n);
        b.ins().brif(more, body, &[], exit, &[]);

        b.switch_to_block(body);
        let elem_bytes = i64::from(ty.lane_type().bytes());
        let offset = b.ins().imul_imm_u(i, elem_bytes);
        let mf = MemFlagsData::new().with_notrap();
        let xa = b.ins().iadd(x, offset);
        let xv = b.ins().load(ty, mf, xa, 0);
        let res = match op {
            Op::Un(u) => emit_unary(&mut b, u, xv, ty),
            Op::Bin(bo) => {
                let ya = b.ins().iadd(y, offset);
                let yv = b.ins().load(ty, mf, ya, 0);
                emit_binary(&mut b, bo, xv, yv, ty)
            }
        }
        .expect("a transcendental op on a float type");
        let oa = b.ins().iadd(out, offset);
        b.ins().store(mf, res, oa, 0);
        let next = b.ins().iadd_imm_u(i, i64::from(ty.lane_count()));
        b.ins().jump(head, &[BlockArg::Value(next)]);

        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    if std::env::var_os("RFX_MATH_DISASM").is_some_and(|v| v == name.as_str()) {
        ctx.set_disasm(true);
    }
    module.define_function(id, &mut ctx).expect("compiles");
    if let Some(vcode) = ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
        eprintln!("{vcode}");
    }
    module.clear_context(&mut ctx);
    module.finalize_definitions().expect("finalize");
    module.get_finalized_function(id)
}

/// Runs a compiled kernel over `x` and `y` (padded to a whole number of vectors).
fn run<T: Copy + Default>(code: *const u8, lanes: usize, x: &[T], y: &[T]) -> Vec<T> {
    assert_eq!(x.len(), y.len());
    let n = x.len().div_ceil(lanes) * lanes;
    let mut xp = x.to_vec();
    let mut yp = y.to_vec();
    xp.resize(n, T::default());
    yp.resize(n, T::default());
    let mut out = vec![T::default(); n];
    // SAFETY: the kernel reads `n` elements of `xp` and `yp` and writes `n` of `out`, all of
    // which exist; `n` is a multiple of the lane count as the loop requires.
    unsafe {
        let f: Kernel<T> = std::mem::transmute(code);
        f(xp.as_ptr(), yp.as_ptr(), out.as_mut_ptr(), n);
    }
    out.truncate(x.len());
    out
}

fn reference(op: Op, x: f64, y: f64) -> f64 {
    match op {
        Op::Un(UnaryOp::Sin) => x.sin(),
        Op::Un(UnaryOp::Cos) => x.cos(),
        Op::Un(UnaryOp::Tan) => x.tan(),
        Op::Un(UnaryOp::Exp) => x.exp(),
        Op::Un(UnaryOp::Exp2) => x.exp2(),
        Op::Un(UnaryOp::Log) => x.ln(),
        Op::Un(UnaryOp::Log2) => x.log2(),
        Op::Un(UnaryOp::Tanh) => x.tanh(),
        Op::Un(UnaryOp::Atan) => x.atan(),
        Op::Un(UnaryOp::Asin) => x.asin(),
        Op::Un(UnaryOp::Acos) => x.acos(),
        Op::Un(UnaryOp::Sigmoid) => {
            if x < 0.0 {
                let e = x.exp();
                e / (1.0 + e)
            } else {
                1.0 / (1.0 + (-x).exp())
            }
        }
        // `libm`'s `erf` (std has none), the IR's reference.
        Op::Un(UnaryOp::Erf) => rfx_ir::semantics::unary(UnaryOp::Erf, rfx_ir::Scalar::F64(x))
            .map_or(f64::NAN, rfx_ir::Scalar::to_f64),
        Op::Bin(BinaryOp::Atan2) => x.atan2(y),
        Op::Bin(BinaryOp::Pow) => x.powf(y),
        Op::Un(_) | Op::Bin(_) => unreachable!("not a transcendental op"),
    }
}

/// Distance in ULP between two `f32`, as the conformance suite measures it (0 when both are
/// NaN; `u64::MAX` when only one is, and for zeros of opposite signs).
fn ulp_f32(got: f32, want: f32) -> u64 {
    rfx_lower::ulps(f64::from(got), f64::from(want), rfx_ir::DType::F32)
}

/// The same for two `f64`.
fn ulp_f64(got: f64, want: f64) -> u64 {
    rfx_lower::ulps(got, want, rfx_ir::DType::F64)
}

/// The interesting range of each unary function for the uniform half of the inputs.
fn interesting_range(op: Op, f64_lanes: bool) -> (f64, f64) {
    match op {
        Op::Un(UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan) => (-20.0, 20.0),
        Op::Un(UnaryOp::Exp) => {
            if f64_lanes {
                (-760.0, 720.0)
            } else {
                (-110.0, 95.0)
            }
        }
        Op::Un(UnaryOp::Exp2) => {
            if f64_lanes {
                (-1090.0, 1030.0)
            } else {
                (-155.0, 132.0)
            }
        }
        Op::Un(UnaryOp::Log | UnaryOp::Log2) => (0.0, 4.0),
        Op::Un(UnaryOp::Tanh) => (-12.0, 12.0),
        Op::Un(UnaryOp::Atan) => (-30.0, 30.0),
        Op::Un(UnaryOp::Asin | UnaryOp::Acos) => (-1.0, 1.0),
        Op::Un(UnaryOp::Erf) => (-7.0, 7.0),
        Op::Un(UnaryOp::Sigmoid) => {
            if f64_lanes {
                (-750.0, 60.0)
            } else {
                (-110.0, 30.0)
            }
        }
        _ => (-10.0, 10.0),
    }
}

fn edge_values_f64() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        1.5,
        -1.5,
        0.1,
        10.0,
        100.0,
        1e5,
        -1e5,
        1e6,
        1.5e6,
        -1.599e6,
        1e10,
        1e30,
        -1e30,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        1e-300,
        5e-324,
        -5e-324,
        1.0 - f64::EPSILON / 2.0,
        1.0 + f64::EPSILON,
        -1.0 + f64::EPSILON / 2.0,
        0.625,
        -0.625,
        0.66,
        2.414_213_562_373_095,
        0.414_213_562_373_095,
        88.722_839_111_673,
        88.72,
        89.0,
        -87.336_544_750_553_1,
        -103.972_077_083_991_8,
        -104.0,
        709.782_712_893_384,
        709.79,
        -708.396_418_532_264_1,
        -745.133_219_101_941_1,
        -746.0,
        127.999,
        128.0,
        -126.0,
        -149.0,
        -150.0,
        1023.999,
        1024.0,
        -1022.0,
        -1074.0,
        -1075.0,
    ];
    // Near multiples of π/2 (where the reduced argument is tiny).
    for k in [1.0, 2.0, 3.0, 4.0, 10.0, 100.0, 1000.0, 12_345.0, 65_536.0] {
        let m = k * std::f64::consts::FRAC_PI_2;
        v.extend([m, -m, m.next_up(), m.next_down()]);
    }
    v
}

fn edge_values_f32() -> Vec<f32> {
    let mut v: Vec<f32> = edge_values_f64().into_iter().map(|x| x as f32).collect();
    v.extend([
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007f_ffff),
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        1.0 - f32::EPSILON / 2.0,
        1.0 + f32::EPSILON,
        88.722_83,
        88.722_84,
        -103.972_08,
        -87.336_55,
        // f32 worst cases for the Cody–Waite reduction of sin/cos (Payne–Hanek test values).
        1.570_796_4,
        std::f32::consts::PI,
        4.712_389,
        6.283_185_5,
        105_414_350.0,
        16_367_173.0,
        8_248_251_000.0,
        98_986.2,
    ]);
    for k in 1..200 {
        let m = (k as f32) * std::f32::consts::FRAC_PI_2;
        v.extend([m, m.next_up(), m.next_down()]);
    }
    v
}

/// Inputs `(x, y)` for one op: random bit patterns (log-uniform magnitudes over the whole
/// exponent range, NaN and ±Inf included), uniform values in the interesting range, the edge
/// values (and for binary ops their pairwise products).
fn inputs_f64(op: Op, n_random: usize, rng: &mut Rng, f32_lanes: bool) -> Vec<(f64, f64)> {
    let mut inputs = Vec::with_capacity(n_random + 10_000);
    let random_bits = |rng: &mut Rng| -> f64 {
        if f32_lanes {
            f64::from(f32::from_bits(rng.next_u64() as u32))
        } else {
            f64::from_bits(rng.next_u64())
        }
    };
    let edges: Vec<f64> = if f32_lanes {
        edge_values_f32().into_iter().map(f64::from).collect()
    } else {
        edge_values_f64()
    };
    match op {
        Op::Un(_) => {
            let (lo, hi) = interesting_range(op, !f32_lanes);
            for i in 0..n_random {
                let x = if i % 2 == 0 {
                    random_bits(rng)
                } else {
                    rng.uniform(lo, hi)
                };
                inputs.push((x, 0.0));
            }
            inputs.extend(edges.iter().map(|&x| (x, 0.0)));
        }
        Op::Bin(bo) => {
            for i in 0..n_random {
                let pair = match (bo, i % 4) {
                    (_, 0) => (random_bits(rng), random_bits(rng)),
                    (BinaryOp::Atan2, _) => (rng.uniform(-10.0, 10.0), rng.uniform(-10.0, 10.0)),
                    (_, 1) => {
                        // Log-uniform x > 0 and y with |y log2 x| inside the exponent range.
                        let x = random_bits(rng).abs();
                        let range = if f32_lanes { 160.0 } else { 1100.0 };
                        let l = x.log2().abs().max(1.0);
                        (x, rng.uniform(-range, range) / l)
                    }
                    (_, 2) => (rng.uniform(0.0, 4.0), rng.uniform(-40.0, 40.0)),
                    _ => {
                        // Negative x with integer and non-integer y.
                        let y = rng.uniform(-30.0, 30.0);
                        let y = if i % 8 == 3 { y.round() } else { y };
                        (-rng.uniform(0.0, 4.0), y)
                    }
                };
                inputs.push(pair);
            }
            for &a in &edges {
                for &b in &edges {
                    inputs.push((a, b));
                }
            }
        }
    }
    inputs
}

/// Whether `x` is inside the range where the op is held to [`MAX_ULP`].
fn in_accuracy_domain(op: Op, x: f64, f32_lanes: bool) -> bool {
    match op {
        Op::Un(UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan) => {
            !x.is_finite() || x.abs() < if f32_lanes { TRIG_F32_BOUND } else { TRIG_F64_BOUND }
        }
        _ => true,
    }
}

/// Max ULP error measured for one op and type: `(in-domain max, worst input, out-of-domain max)`.
struct Measured {
    max_ulp: u64,
    worst: (f64, f64, f64, f64),
    outside_max: u64,
    count: usize,
}

fn measure(module: &mut JITModule, op: Op, ty: Type, rng: &mut Rng, n_random: usize) -> Measured {
    let f32_lanes = ty.lane_type() == types::F32;
    let inputs = inputs_f64(op, n_random, rng, f32_lanes);
    let code = compile(module, op, ty);
    let lanes = ty.lane_count() as usize;
    let mut m = Measured {
        max_ulp: 0,
        worst: (0.0, 0.0, 0.0, 0.0),
        outside_max: 0,
        count: inputs.len(),
    };
    let mut record = |x: f64, y: f64, got: f64, want: f64, err: u64| {
        if in_accuracy_domain(op, x, f32_lanes) {
            if err > m.max_ulp {
                m.max_ulp = err;
                m.worst = (x, y, got, want);
            }
        } else {
            m.outside_max = m.outside_max.max(err);
        }
    };
    if f32_lanes {
        let xs: Vec<f32> = inputs.iter().map(|p| p.0 as f32).collect();
        let ys: Vec<f32> = inputs.iter().map(|p| p.1 as f32).collect();
        let out = run(code, lanes, &xs, &ys);
        for ((&x, &y), &got) in xs.iter().zip(&ys).zip(&out) {
            let want = reference(op, f64::from(x), f64::from(y)) as f32;
            record(
                f64::from(x),
                f64::from(y),
                f64::from(got),
                f64::from(want),
                ulp_f32(got, want),
            );
        }
    } else {
        let xs: Vec<f64> = inputs.iter().map(|p| p.0).collect();
        let ys: Vec<f64> = inputs.iter().map(|p| p.1).collect();
        let out = run(code, lanes, &xs, &ys);
        for ((&x, &y), &got) in xs.iter().zip(&ys).zip(&out) {
            let want = reference(op, x, y);
            record(x, y, got, want, ulp_f64(got, want));
        }
    }
    m
}

const TYPES: [Type; 4] = [types::F32X4, types::F32, types::F64X2, types::F64];

#[test]
fn accuracy_within_bounds() {
    let mut module = jit_module();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut failures = Vec::new();
    eprintln!(
        "max ULP error vs std (f64 reference rounded to the type); trig f32 |x| < {TRIG_F32_BOUND:e}, f64 |x| < {TRIG_F64_BOUND:e}"
    );
    eprintln!(
        "{:<8} {:>8} {:>8} {:>8} {:>8}   inputs per type",
        "op", "f32x4", "f32", "f64x2", "f64"
    );
    for op in OPS {
        let mut row = Vec::new();
        let mut count = 0;
        for ty in TYPES {
            let m = measure(&mut module, op, ty, &mut rng, 100_000);
            count = m.count;
            if m.max_ulp > MAX_ULP {
                failures.push(format!(
                    "{} {}: {} ULP at x={:e} y={:e}: got {:e}, want {:e}",
                    op.name(),
                    ty,
                    m.max_ulp,
                    m.worst.0,
                    m.worst.1,
                    m.worst.2,
                    m.worst.3
                ));
            }
            row.push(m.max_ulp.min(99_999_999).to_string());
        }
        eprintln!(
            "{:<8} {:>8} {:>8} {:>8} {:>8}   {count}",
            op.name(),
            row[0],
            row[1],
            row[2],
            row[3]
        );
    }
    assert!(
        failures.is_empty(),
        "over {MAX_ULP} ULP:\n{}",
        failures.join("\n")
    );
}

/// One exact special-value expectation: `op(x, y) == want` bit for bit (any NaN for NaN).
fn special_cases() -> Vec<(Op, f64, f64, f64)> {
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let un = |op: UnaryOp, x: f64, want: f64| (Op::Un(op), x, 0.0, want);
    let bin = |op: BinaryOp, x: f64, y: f64, want: f64| (Op::Bin(op), x, y, want);
    let mut cases = Vec::new();
    for op in UnaryOp::ALL.iter().copied().filter(|op| op.is_transcendental()) {
        cases.push(un(op, nan, nan));
    }
    for op in [
        UnaryOp::Sin,
        UnaryOp::Tan,
        UnaryOp::Tanh,
        UnaryOp::Atan,
        UnaryOp::Asin,
        UnaryOp::Erf,
    ] {
        cases.push(un(op, 0.0, 0.0));
        cases.push(un(op, -0.0, -0.0));
    }
    cases.extend([
        un(UnaryOp::Sin, inf, nan),
        un(UnaryOp::Sin, -inf, nan),
        un(UnaryOp::Cos, inf, nan),
        un(UnaryOp::Cos, -inf, nan),
        un(UnaryOp::Tan, inf, nan),
        un(UnaryOp::Cos, 0.0, 1.0),
        un(UnaryOp::Cos, -0.0, 1.0),
        un(UnaryOp::Exp, -inf, 0.0),
        un(UnaryOp::Exp, inf, inf),
        un(UnaryOp::Exp, 0.0, 1.0),
        un(UnaryOp::Exp, -0.0, 1.0),
        un(UnaryOp::Exp, 1000.0, inf),
        un(UnaryOp::Exp, -1000.0, 0.0),
        un(UnaryOp::Exp2, -inf, 0.0),
        un(UnaryOp::Exp2, inf, inf),
        un(UnaryOp::Exp2, 0.0, 1.0),
        un(UnaryOp::Exp2, 10.0, 1024.0),
        un(UnaryOp::Exp2, -10.0, 1.0 / 1024.0),
        un(UnaryOp::Exp2, 2000.0, inf),
        un(UnaryOp::Exp2, -2000.0, 0.0),
        un(UnaryOp::Log, 0.0, -inf),
        un(UnaryOp::Log, -0.0, -inf),
        un(UnaryOp::Log, -1.0, nan),
        un(UnaryOp::Log, -inf, nan),
        un(UnaryOp::Log, inf, inf),
        un(UnaryOp::Log, 1.0, 0.0),
        un(UnaryOp::Log2, 0.0, -inf),
        un(UnaryOp::Log2, -0.0, -inf),
        un(UnaryOp::Log2, -2.0, nan),
        un(UnaryOp::Log2, inf, inf),
        un(UnaryOp::Log2, 1.0, 0.0),
        un(UnaryOp::Log2, 8.0, 3.0),
        un(UnaryOp::Log2, 0.125, -3.0),
        un(UnaryOp::Tanh, inf, 1.0),
        un(UnaryOp::Tanh, -inf, -1.0),
        un(UnaryOp::Tanh, 50.0, 1.0),
        un(UnaryOp::Atan, inf, FRAC_PI_2),
        un(UnaryOp::Atan, -inf, -FRAC_PI_2),
        un(UnaryOp::Asin, 1.0, FRAC_PI_2),
        un(UnaryOp::Asin, -1.0, -FRAC_PI_2),
        un(UnaryOp::Asin, 1.5, nan),
        un(UnaryOp::Asin, -inf, nan),
        un(UnaryOp::Acos, 1.0, 0.0),
        un(UnaryOp::Acos, -1.0, PI),
        un(UnaryOp::Acos, 2.0, nan),
        un(UnaryOp::Acos, inf, nan),
        un(UnaryOp::Sigmoid, -inf, 0.0),
        un(UnaryOp::Sigmoid, inf, 1.0),
        un(UnaryOp::Sigmoid, 0.0, 0.5),
        un(UnaryOp::Sigmoid, -0.0, 0.5),
        un(UnaryOp::Erf, inf, 1.0),
        un(UnaryOp::Erf, -inf, -1.0),
        un(UnaryOp::Erf, 6.0, 1.0),
        un(UnaryOp::Erf, -30.0, -1.0),
        // atan2 (C99 F.9.1.4).
        bin(BinaryOp::Atan2, 0.0, 0.0, 0.0),
        bin(BinaryOp::Atan2, -0.0, 0.0, -0.0),
        bin(BinaryOp::Atan2, 0.0, -0.0, PI),
        bin(BinaryOp::Atan2, -0.0, -0.0, -PI),
        bin(BinaryOp::Atan2, 0.0, -1.0, PI),
        bin(BinaryOp::Atan2, -0.0, -1.0, -PI),
        bin(BinaryOp::Atan2, 0.0, 1.0, 0.0),
        bin(BinaryOp::Atan2, -0.0, 1.0, -0.0),
        bin(BinaryOp::Atan2, 1.0, 0.0, FRAC_PI_2),
        bin(BinaryOp::Atan2, -1.0, -0.0, -FRAC_PI_2),
        bin(BinaryOp::Atan2, 1.0, -inf, PI),
        bin(BinaryOp::Atan2, -1.0, -inf, -PI),
        bin(BinaryOp::Atan2, 1.0, inf, 0.0),
        bin(BinaryOp::Atan2, -1.0, inf, -0.0),
        bin(BinaryOp::Atan2, inf, 3.0, FRAC_PI_2),
        bin(BinaryOp::Atan2, -inf, -3.0, -FRAC_PI_2),
        bin(BinaryOp::Atan2, inf, -inf, 3.0 * FRAC_PI_4),
        bin(BinaryOp::Atan2, -inf, -inf, -3.0 * FRAC_PI_4),
        bin(BinaryOp::Atan2, inf, inf, FRAC_PI_4),
        bin(BinaryOp::Atan2, -inf, inf, -FRAC_PI_4),
        bin(BinaryOp::Atan2, nan, 1.0, nan),
        bin(BinaryOp::Atan2, 1.0, nan, nan),
        // pow (C99 F.9.4.4).
        bin(BinaryOp::Pow, nan, 0.0, 1.0),
        bin(BinaryOp::Pow, nan, -0.0, 1.0),
        bin(BinaryOp::Pow, inf, 0.0, 1.0),
        bin(BinaryOp::Pow, 1.0, nan, 1.0),
        bin(BinaryOp::Pow, 1.0, inf, 1.0),
        bin(BinaryOp::Pow, -1.0, inf, 1.0),
        bin(BinaryOp::Pow, -1.0, -inf, 1.0),
        bin(BinaryOp::Pow, nan, 1.0, nan),
        bin(BinaryOp::Pow, 2.0, nan, nan),
        bin(BinaryOp::Pow, -2.0, 0.5, nan),
        bin(BinaryOp::Pow, -8.0, 1.0 / 3.0, nan),
        bin(BinaryOp::Pow, -2.0, 3.0, -8.0),
        bin(BinaryOp::Pow, -2.0, 2.0, 4.0),
        bin(BinaryOp::Pow, -2.0, -1.0, -0.5),
        bin(BinaryOp::Pow, 0.0, -1.0, inf),
        bin(BinaryOp::Pow, -0.0, -1.0, -inf),
        bin(BinaryOp::Pow, -0.0, -2.0, inf),
        bin(BinaryOp::Pow, -0.0, -0.5, inf),
        bin(BinaryOp::Pow, 0.0, -inf, inf),
        bin(BinaryOp::Pow, -0.0, -inf, inf),
        bin(BinaryOp::Pow, 0.0, 3.0, 0.0),
        bin(BinaryOp::Pow, -0.0, 3.0, -0.0),
        bin(BinaryOp::Pow, -0.0, 2.0, 0.0),
        bin(BinaryOp::Pow, -0.0, 0.5, 0.0),
        bin(BinaryOp::Pow, 0.5, -inf, inf),
        bin(BinaryOp::Pow, 0.5, inf, 0.0),
        bin(BinaryOp::Pow, 2.0, -inf, 0.0),
        bin(BinaryOp::Pow, 2.0, inf, inf),
        bin(BinaryOp::Pow, -0.5, inf, 0.0),
        bin(BinaryOp::Pow, -2.0, inf, inf),
        bin(BinaryOp::Pow, -inf, -3.0, -0.0),
        bin(BinaryOp::Pow, -inf, -2.0, 0.0),
        bin(BinaryOp::Pow, -inf, -0.5, 0.0),
        bin(BinaryOp::Pow, -inf, 3.0, -inf),
        bin(BinaryOp::Pow, -inf, 2.0, inf),
        bin(BinaryOp::Pow, -inf, 0.5, inf),
        bin(BinaryOp::Pow, inf, -1.0, 0.0),
        bin(BinaryOp::Pow, inf, 0.5, inf),
        bin(BinaryOp::Pow, 2.0, 10.0, 1024.0),
        bin(BinaryOp::Pow, 10.0, 2.0, 100.0),
        bin(BinaryOp::Pow, 2.0, 1e6, inf),
        bin(BinaryOp::Pow, 2.0, -1e6, 0.0),
        bin(BinaryOp::Pow, -2.0, 1e6, inf),
        bin(BinaryOp::Pow, -2.0, 1e6 + 1.0, -inf),
    ]);
    cases
}

#[test]
fn special_values_exact() {
    let mut module = jit_module();
    let cases = special_cases();
    let mut failures = Vec::new();
    for ty in TYPES {
        let lanes = ty.lane_count() as usize;
        let f32_lanes = ty.lane_type() == types::F32;
        for op in OPS {
            let mine: Vec<_> = cases.iter().filter(|c| c.0 == op).collect();
            if mine.is_empty() {
                continue;
            }
            let code = compile(&mut module, op, ty);
            // Each case in every lane position, so a lane-mixing bug cannot hide.
            let (mut xs, mut ys, mut wants) = (Vec::new(), Vec::new(), Vec::new());
            for &&(_, x, y, want) in &mine {
                for _ in 0..lanes.max(2) {
                    xs.push(x);
                    ys.push(y);
                    wants.push(want);
                }
            }
            let got: Vec<f64> = if f32_lanes {
                let xs32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
                let ys32: Vec<f32> = ys.iter().map(|&v| v as f32).collect();
                run(code, lanes, &xs32, &ys32)
                    .into_iter()
                    .map(f64::from)
                    .collect()
            } else {
                run(code, lanes, &xs, &ys)
            };
            for i in 0..xs.len() {
                let want = if f32_lanes {
                    f64::from(wants[i] as f32)
                } else {
                    wants[i]
                };
                let ok = if want.is_nan() {
                    got[i].is_nan()
                } else {
                    got[i].to_bits() == want.to_bits()
                };
                if !ok {
                    failures.push(format!(
                        "{}({:e}, {:e}) {}: got {:e}, want {:e}",
                        op.name(),
                        xs[i],
                        ys[i],
                        ty,
                        got[i],
                        want
                    ));
                }
            }
        }
    }
    failures.dedup();
    assert!(failures.is_empty(), "special values:\n{}", failures.join("\n"));
}

/// Every unary kernel returns `None`-free results for transcendental ops only.
#[test]
fn non_transcendental_ops_are_refused() {
    let mut module = jit_module();
    let mut ctx = module.make_context();
    let mut fbc = FunctionBuilderContext::new();
    ctx.func.signature.params.push(AbiParam::new(types::F32X4));
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let x = b.block_params(entry)[0];
    for &op in UnaryOp::ALL {
        assert_eq!(
            emit_unary(&mut b, op, x, types::F32X4).is_some(),
            op.is_transcendental(),
            "{op}"
        );
    }
    for &op in BinaryOp::ALL {
        let want = matches!(op, BinaryOp::Pow | BinaryOp::Atan2);
        assert_eq!(
            emit_binary(&mut b, op, x, x, types::F32X4).is_some(),
            want,
            "{op}"
        );
    }
    assert!(emit_unary(&mut b, UnaryOp::Sin, x, types::I32X4).is_none());
    let _ = &mut module;
}

/// Trigonometric error past the guaranteed range, reported (not asserted); results must
/// still lie in `[-1, 1]`.
#[test]
fn report_large_argument_trig() {
    let mut module = jit_module();
    let mut rng = Rng(7);
    for (ty, bounds) in [
        (types::F32X4, [1e5, 1e6, 1e7, 1e9, 1e12, 3e38]),
        (types::F64X2, [1e6, 1e7, 1e9, 1e12, 1e15, 1e300]),
    ] {
        let lanes = ty.lane_count() as usize;
        for op in [Op::Un(UnaryOp::Sin), Op::Un(UnaryOp::Cos)] {
            let code = compile(&mut module, op, ty);
            let mut line = format!("{} {}:", op.name(), ty);
            let mut lo: f64 = 1.0;
            for hi in bounds {
                let xs: Vec<f64> = (0..20_000)
                    .map(|_| (rng.uniform(lo.ln(), f64::ln(hi))).exp())
                    .collect();
                let max = if ty == types::F32X4 {
                    let x32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
                    let out = run(code, lanes, &x32, &x32);
                    assert!(
                        out.iter().all(|g| g.abs() <= 1.0),
                        "{} {ty} out of [-1, 1]",
                        op.name()
                    );
                    x32.iter()
                        .zip(&out)
                        .map(|(&x, &g)| ulp_f32(g, reference(op, f64::from(x), 0.0) as f32))
                        .max()
                } else {
                    let out = run(code, lanes, &xs, &xs);
                    assert!(
                        out.iter().all(|g| g.abs() <= 1.0),
                        "{} {ty} out of [-1, 1]",
                        op.name()
                    );
                    xs.iter()
                        .zip(&out)
                        .map(|(&x, &g)| ulp_f64(g, reference(op, x, 0.0)))
                        .max()
                };
                line += &format!("  [{lo:.0e},{hi:.0e}) {}", max.unwrap_or(0));
                lo = hi;
            }
            eprintln!("{line}");
        }
    }
}

/// Time per element of the f32x4 kernels against a scalar `std` loop (reported only).
#[test]
fn report_speed() {
    let mut module = jit_module();
    let n = 1 << 20;
    let mut rng = Rng(11);
    let xs: Vec<f32> = (0..n).map(|_| rng.uniform(0.01, 10.0) as f32).collect();
    for (op, scalar) in [
        (UnaryOp::Sin, f32::sin as fn(f32) -> f32),
        (UnaryOp::Exp, f32::exp as fn(f32) -> f32),
        (UnaryOp::Log, f32::ln as fn(f32) -> f32),
        (UnaryOp::Tanh, f32::tanh as fn(f32) -> f32),
    ] {
        let code = compile(&mut module, Op::Un(op), types::F32X4);
        // SAFETY: `code` is a kernel of this signature; it reads and writes `n` elements of
        // buffers that hold `n`, a multiple of 4.
        let kernel: Kernel<f32> = unsafe { std::mem::transmute(code) };
        let mut best_jit = f64::INFINITY;
        let mut best_std = f64::INFINITY;
        let mut out = vec![0.0_f32; n];
        for _ in 0..5 {
            let t = Instant::now();
            // SAFETY: as above.
            unsafe { kernel(xs.as_ptr(), xs.as_ptr(), out.as_mut_ptr(), n) };
            best_jit = best_jit.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
            let t = Instant::now();
            for (o, &x) in out.iter_mut().zip(&xs) {
                *o = scalar(std::hint::black_box(x));
            }
            best_std = best_std.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
        let per = |s: f64| s * 1e9 / n as f64;
        eprintln!(
            "{op:<5} f32x4 JIT {:.2} ns/elem, std scalar {:.2} ns/elem, ratio {:.1}x",
            per(best_jit),
            per(best_std),
            best_std / best_jit
        );
    }
}
