//! Random well-typed HIR kernels for differential and property tests: kernels of a generator
//! configuration ([`random_kernel`], [`KernelGenConfig`]), large elementwise kernels heavy in
//! transcendentals ([`transcendental_kernel`]), the fuzzer's kernel of a seed ([`fuzz_kernel`]:
//! a configuration drawn from the seed, dimension sizes remapped, now and then batched by
//! `vmap`, or one seed in eight a kernel with bounded loops, [`fuzz_loop_kernel`]) and
//! large-kernel mode's ([`large_kernel`]).
//!
//! Generation is driven by `rfx_ir::testgen`'s deterministic RNG seeded by the caller, so a
//! failing case is reproduced from its seed alone; every generated kernel is built with the
//! [`Builder`] and therefore verifies. The fuzzer's random stream is decorrelated from its
//! inputs' (`random_inputs(&mut TestRng::new(seed), ..)`).

use rfx_ir::hir::{Builder, Kernel, Loop, Op, ValueId};
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_array, random_loop_kernel};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Scalar, ScanOp, Shape, TensorType, UnaryOp};

/// What random kernels may contain.
#[derive(Clone, Debug)]
pub struct KernelGenConfig {
    /// Nodes to attempt after the inputs (the kernel may be smaller when attempts fail typing).
    pub max_ops: usize,
    /// Most inputs.
    pub max_inputs: usize,
    /// Most outputs.
    pub max_outputs: usize,
    /// Most dimensions of the base shape.
    pub max_rank: usize,
    /// Largest dimension size.
    pub max_dim: usize,
    /// The float dtypes inputs may have (`i32` and `bool` values also arise from casts and
    /// comparisons when `allow_int_bool` is set).
    pub float_dtypes: Vec<DType>,
    /// Allow i32 and bool inputs and values.
    pub allow_int_bool: bool,
    /// Allow reductions.
    pub allow_reductions: bool,
    /// Allow broadcasting between operands of different shapes, `broadcast_to` and `reshape`.
    pub allow_broadcast: bool,
    /// Allow `iota` and `transpose`.
    pub allow_index: bool,
    /// Allow `literal`s (random constant tensors, special values included).
    pub allow_literal: bool,
    /// Allow `slice` and `pad`.
    pub allow_window: bool,
    /// Allow `gather` (tables of any dtype, `i32` and float indices, in range and out).
    pub allow_gather: bool,
    /// Allow scans (`cumsum`, `cumprod`, `cummax`, `cummin`, either direction).
    pub allow_scan: bool,
}

impl Default for KernelGenConfig {
    fn default() -> KernelGenConfig {
        KernelGenConfig {
            max_ops: 12,
            max_inputs: 3,
            max_outputs: 2,
            max_rank: 3,
            max_dim: 4,
            float_dtypes: vec![DType::F32, DType::F64],
            allow_int_bool: true,
            allow_reductions: true,
            allow_broadcast: true,
            allow_index: true,
            allow_literal: true,
            allow_window: true,
            allow_gather: true,
            allow_scan: true,
        }
    }
}

impl KernelGenConfig {
    /// The default configuration with kernels of up to `max_ops` ops.
    pub fn with_max_ops(max_ops: usize) -> KernelGenConfig {
        KernelGenConfig {
            max_ops,
            ..KernelGenConfig::default()
        }
    }
}

/// A random kernel named `name`.
pub fn random_kernel(rng: &mut TestRng, config: &KernelGenConfig, name: &str) -> Kernel {
    let mut b = Builder::new(name);
    let rank = rng.below(config.max_rank + 1);
    let base: Vec<usize> = (0..rank).map(|_| 1 + rng.below(config.max_dim.max(1))).collect();
    let float = *rng.pick(&config.float_dtypes).unwrap_or(&DType::F32);
    let mut values: Vec<ValueId> = Vec::new();
    let n_inputs = 1 + rng.below(config.max_inputs.max(1));
    for i in 0..n_inputs {
        let dtype = if config.allow_int_bool && rng.chance(0.15) {
            *rng.pick(&[DType::I32, DType::Bool]).unwrap_or(&float)
        } else {
            float
        };
        let shape = if config.allow_broadcast {
            sub_shape(rng, &base)
        } else {
            base.clone()
        };
        if let Ok(v) = b.input(format!("in{i}"), TensorType::new(dtype, shape)) {
            values.push(v);
        }
    }
    for _ in 0..config.max_ops {
        if let Some(v) = random_op(rng, config, &mut b, &values, float) {
            values.push(v);
        }
    }
    let n_outputs = 1 + rng.below(config.max_outputs.max(1));
    for i in 0..n_outputs {
        // Prefer recent values so that most of the kernel is live.
        let pick = values.len().saturating_sub(1 + rng.below(3.min(values.len())));
        if let Some(&v) = values.get(pick) {
            let _ = b.output(format!("out{i}"), v);
        }
    }
    match b.finish() {
        Ok(kernel) => kernel,
        // Unreachable in practice: at least one input exists and is output above.
        Err(_) => fallback_kernel(name),
    }
}

fn fallback_kernel(name: &str) -> Kernel {
    let mut b = Builder::new(name);
    let mut result = None;
    if let Ok(x) = b.input("x", TensorType::scalar(DType::F32))
        && b.output("out", x).is_ok()
    {
        result = b.finish().ok();
    }
    result.unwrap_or_else(|| Kernel::from_parts(name, Vec::new(), Vec::new()))
}

/// A suffix of `base` with some dimensions replaced by 1 (a shape that broadcasts to `base`).
fn sub_shape(rng: &mut TestRng, base: &[usize]) -> Vec<usize> {
    let drop = rng.below(base.len() + 1);
    base[drop..]
        .iter()
        .map(|&d| if rng.chance(0.25) { 1 } else { d })
        .collect()
}

fn random_op(
    rng: &mut TestRng,
    config: &KernelGenConfig,
    b: &mut Builder,
    values: &[ValueId],
    float: DType,
) -> Option<ValueId> {
    let &x = rng.pick(values)?;
    let xt = b.value_type(x).ok()?.clone();
    let partner = |rng: &mut TestRng, b: &Builder, dtype: DType| -> Option<ValueId> {
        let same: Vec<ValueId> = values
            .iter()
            .copied()
            .filter(|&v| b.value_type(v).is_ok_and(|t| t.dtype == dtype))
            .collect();
        rng.pick(&same).copied()
    };
    // Without `iota`, `transpose`, `literal`, `slice`, `pad`, `gather` and the scans the draws
    // are the ones made before they existed.
    let windows = 2 * usize::from(config.allow_window);
    let gathers = usize::from(config.allow_gather);
    let scans = usize::from(config.allow_scan);
    let choices = 14 + 2 * usize::from(config.allow_index) + usize::from(config.allow_literal) + windows;
    let draw = rng.below(choices + gathers + scans);
    let draw = if draw >= choices + gathers {
        20
    } else if draw >= choices {
        19
    } else if draw + windows >= choices {
        17 + draw + windows - choices
    } else if config.allow_literal && draw + windows == choices - 1 {
        16
    } else {
        draw
    };
    match draw {
        0..=3 => {
            let op = *rng.pick(UnaryOp::ALL)?;
            b.unary(op, x).ok()
        }
        4..=7 => {
            let op = *rng.pick(BinaryOp::ALL)?;
            let y = if rng.chance(0.3) {
                constant_like(rng, b, xt.dtype)
            } else {
                partner(rng, b, xt.dtype)?
            };
            if rng.chance(0.5) {
                b.binary(op, x, y).ok()
            } else {
                b.binary(op, y, x).ok()
            }
        }
        8 => {
            let op = *rng.pick(CmpOp::ALL)?;
            let y = partner(rng, b, xt.dtype)?;
            let c = b.compare(op, x, y).ok()?;
            if config.allow_int_bool || rng.chance(0.8) {
                let t = partner(rng, b, float)?;
                let f = partner(rng, b, float)?;
                b.select(c, t, f).ok()
            } else {
                None
            }
        }
        9 => {
            let lo = constant_like(rng, b, xt.dtype);
            let hi = constant_like(rng, b, xt.dtype);
            b.clamp(x, lo, hi).ok()
        }
        10 => {
            let to = if config.allow_int_bool {
                *rng.pick(&DType::ALL)?
            } else {
                float
            };
            b.cast(x, to).ok()
        }
        11 if config.allow_reductions && xt.shape.rank() > 0 => {
            let op = *rng.pick(ReduceOp::ALL)?;
            let axes: Vec<usize> = (0..xt.shape.rank()).filter(|_| rng.chance(0.5)).collect();
            let axes = if axes.is_empty() {
                vec![rng.below(xt.shape.rank())]
            } else {
                axes
            };
            b.reduce(op, x, &axes, rng.chance(0.3)).ok()
        }
        12 if config.allow_broadcast => {
            let extra = 1 + rng.below(config.max_dim.max(1));
            let mut dims = vec![extra];
            dims.extend(
                xt.shape
                    .dims()
                    .iter()
                    .map(|&d| if d == 1 { 1 + rng.below(3) } else { d }),
            );
            b.broadcast_to(x, dims).ok()
        }
        13 if config.allow_broadcast => {
            let numel = xt.shape.numel();
            let dims = if rng.chance(0.5) {
                vec![numel]
            } else {
                vec![1, numel]
            };
            b.reshape(x, dims).ok()
        }
        14 => {
            let dtype = if config.allow_int_bool && rng.chance(0.3) {
                DType::I32
            } else {
                float
            };
            let rank = xt.shape.rank();
            if rank == 0 {
                return None;
            }
            b.iota(dtype, xt.shape.clone(), rng.below(rank)).ok()
        }
        15 => {
            let dims = xt.shape.dims();
            // Half the time only axes of equal extent trade places, so the result still
            // combines with its neighbours (a square matrix transposed).
            let equal_only = rng.chance(0.5);
            let mut perm: Vec<usize> = (0..dims.len()).collect();
            for i in (1..perm.len()).rev() {
                let choices: Vec<usize> = (0..=i).filter(|&j| !equal_only || dims[j] == dims[i]).collect();
                if let Some(&j) = rng.pick(&choices) {
                    perm.swap(i, j);
                }
            }
            b.transpose(x, &perm).ok()
        }
        16 => random_literal(rng, b, &xt),
        17 => random_slice(rng, b, x, &xt),
        18 => random_pad(rng, config, b, x, &xt),
        19 => random_gather(rng, config, b, values, x, &xt),
        20 => random_scan(rng, b, values, x, &xt),
        _ => None,
    }
}

/// A window: along each axis all of it, one element (which broadcasts back), or a
/// random run.
fn random_slice(rng: &mut TestRng, b: &mut Builder, x: ValueId, xt: &TensorType) -> Option<ValueId> {
    let (mut starts, mut window) = (Vec::new(), Vec::new());
    for &d in xt.shape.dims() {
        let len = match rng.below(3) {
            0 => d,
            1 => d.min(1),
            _ => rng.below(d + 1),
        };
        starts.push(rng.below(d - len + 1));
        window.push(len);
    }
    b.slice(x, &starts, window).ok()
}

/// Zeros around: along each axis none, up to two on either side, or filling an axis of
/// one out to the extent of a neighbour's.
fn random_pad(
    rng: &mut TestRng,
    config: &KernelGenConfig,
    b: &mut Builder,
    x: ValueId,
    xt: &TensorType,
) -> Option<ValueId> {
    let (mut low, mut dims) = (Vec::new(), Vec::new());
    for &d in xt.shape.dims() {
        let (lo, hi) = if d == 1 && rng.chance(0.5) {
            let to = 1 + rng.below(config.max_dim.max(1));
            let lo = rng.below(to);
            (lo, to - 1 - lo)
        } else if rng.chance(0.3) {
            (0, 0)
        } else {
            (rng.below(3), rng.below(3))
        };
        low.push(lo);
        dims.push(lo + d + hi);
    }
    b.pad(x, &low, dims).ok()
}

/// A lookup in `x` along a random axis, at an index of the same rank (its extent along
/// the axis drawn afresh): a value that broadcasts to it (random inputs reach below 0,
/// inside and past the table, and NaN), or an `iota`, or one minus it (all below 0).
fn random_gather(
    rng: &mut TestRng,
    config: &KernelGenConfig,
    b: &mut Builder,
    values: &[ValueId],
    x: ValueId,
    xt: &TensorType,
) -> Option<ValueId> {
    let rank = xt.shape.rank();
    if rank == 0 {
        return None;
    }
    let axis = rng.below(rank);
    let mut dims = xt.shape.dims().to_vec();
    dims[axis] = 1 + rng.below(config.max_dim.max(1));
    let shape = Shape::new(dims.clone());
    let numeric: Vec<ValueId> = values
        .iter()
        .copied()
        .filter(|&v| {
            b.value_type(v)
                .is_ok_and(|t| t.dtype != DType::Bool && t.shape.broadcasts_to(&shape))
        })
        .collect();
    let index = match rng.pick(&numeric) {
        Some(&v) if rng.chance(0.7) => b.broadcast_to(v, dims.clone()).ok()?,
        _ => {
            let dtype = *rng.pick(&[DType::I32, DType::F32, DType::F64])?;
            let count = b.iota(dtype, dims.clone(), axis).ok()?;
            if rng.chance(0.3) {
                let one = b.constant(Scalar::from_f64(dtype, 1.0), Vec::<usize>::new());
                b.binary(BinaryOp::Sub, one, count).ok()?
            } else {
                count
            }
        }
    };
    b.gather(x, index, axis).ok()
}

/// A running fold along a random axis, either way.
fn random_scan(
    rng: &mut TestRng,
    b: &mut Builder,
    values: &[ValueId],
    x: ValueId,
    xt: &TensorType,
) -> Option<ValueId> {
    let rank = xt.shape.rank();
    if rank == 0 {
        return None;
    }
    let op = *rng.pick(ScanOp::ALL)?;
    let (axis, reverse) = (rng.below(rank), rng.chance(0.5));
    if op == ScanOp::Linear {
        // The coefficient: another value of the operand's type (often a constant
        // splat, a filter's decay), never a bool.
        let coef = if rng.chance(0.5) {
            let c = constant_like(rng, b, xt.dtype);
            b.broadcast_to(c, xt.shape.dims().to_vec()).ok()?
        } else {
            let same: Vec<ValueId> = values
                .iter()
                .copied()
                .filter(|&v| b.value_type(v).is_ok_and(|t| *t == *xt))
                .collect();
            *rng.pick(&same)?
        };
        return b.linrec(x, coef, axis, reverse).ok();
    }
    b.scan(op, x, axis, reverse).ok()
}

/// A literal of type `ty`: what [`random_array`] draws, with one float value in five one of
/// the constants `constant_like` picks from (signed zeros, small integers, infinity, NaN).
fn random_literal(rng: &mut TestRng, b: &mut Builder, ty: &TensorType) -> Option<ValueId> {
    let drawn = random_array(rng, ty, 0.0);
    let values = (0..ty.shape.numel())
        .map(|i| match drawn.get(i) {
            Some(Scalar::F32(_) | Scalar::F64(_)) if rng.chance(0.2) => Some(constant_value(rng, ty.dtype)),
            other => other,
        })
        .collect::<Option<Vec<_>>>()?;
    b.literal_values(ty.clone(), values).ok()
}

fn constant_like(rng: &mut TestRng, b: &mut Builder, dtype: DType) -> ValueId {
    let value = constant_value(rng, dtype);
    b.scalar(value)
}

fn constant_value(rng: &mut TestRng, dtype: DType) -> Scalar {
    match dtype {
        DType::Bool => Scalar::Bool(rng.chance(0.5)),
        DType::I32 => Scalar::I32(rng.below(11) as i32 - 5),
        DType::F32 | DType::F64 => {
            let special = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, f64::INFINITY, f64::NAN];
            let v = if rng.chance(0.4) {
                *rng.pick(&special).unwrap_or(&1.0)
            } else {
                rng.uniform(-4.0, 4.0)
            };
            Scalar::from_f64(dtype, v)
        }
    }
}

/// A large elementwise kernel of at least `ops` nodes (constants included; inputs not), heavy in
/// transcendentals, over 1 to 3 inputs of `dtype` and shape `[len]`, with 1 to 3 outputs.
///
/// Every step maps values of magnitude at most 2 to values of magnitude at most 2 with a slope
/// of at most about 1 (`sin`, `cos`, `tanh`, `atan`, `sigmoid`, `exp(a/2)/2`, `log(2.5 + a)/2`,
/// `pow(1.5 + a/4, c)` for a constant `c` in `[-1, 1]`, `atan2(a, 1.5 + b/4)`, `(a ± b)/2`,
/// `a·b/2`), so rounding errors do not grow along the kernel: a backend's result stays within
/// a few thousand ULP of the interpreter's at any length, while a value read from the wrong
/// place is off by far more. Each step reads the latest value, and a binary one also a recent
/// value or, now and then, any earlier one, so that many values stay live across the
/// transcendentals at once. Inputs are first mapped through `sin` or `tanh`, so any finite
/// input works.
pub fn transcendental_kernel(rng: &mut TestRng, ops: usize, dtype: DType, len: usize, name: &str) -> Kernel {
    let mut b = Builder::new(name);
    let mut values: Vec<ValueId> = Vec::new();
    let n_inputs = 1 + rng.below(3);
    for i in 0..n_inputs {
        if let Ok(x) = b.input(format!("in{i}"), TensorType::new(dtype, vec![len])) {
            values.push(x);
        }
    }
    let constant = |b: &mut Builder, v: f64| b.scalar(Scalar::from_f64(dtype, v));
    let half = constant(&mut b, 0.5);
    let quarter = constant(&mut b, 0.25);
    let one_and_half = constant(&mut b, 1.5);
    let two_and_half = constant(&mut b, 2.5);
    let n_inputs = values.len();
    let mut nodes = 4;
    let first: Vec<ValueId> = values.clone();
    values.clear();
    for x in first {
        let op = if rng.chance(0.5) {
            UnaryOp::Sin
        } else {
            UnaryOp::Tanh
        };
        if let Ok(v) = b.unary(op, x) {
            values.push(v);
            nodes += 1;
        }
    }
    // A second operand: a recent value mostly, any one now and then.
    let operand = |rng: &mut TestRng, values: &[ValueId]| -> ValueId {
        let n = values.len();
        let back = if rng.chance(0.9) {
            rng.below(16.min(n))
        } else {
            rng.below(n)
        };
        values[n - 1 - back]
    };
    // Each step extends the chain from the latest value, so that nearly every op reaches the
    // first output (none is dead code).
    while nodes < ops && !values.is_empty() {
        let a = values[values.len() - 1];
        let c = operand(rng, &values);
        let made = match rng.below(12) {
            0 => b.unary(UnaryOp::Sin, a),
            1 => b.unary(UnaryOp::Cos, a),
            2 => b.unary(UnaryOp::Tanh, a),
            3 => b.unary(UnaryOp::Atan, a),
            4 => b.unary(UnaryOp::Sigmoid, a),
            5 => b
                .binary(BinaryOp::Mul, a, half)
                .and_then(|t| b.unary(UnaryOp::Exp, t))
                .and_then(|t| b.binary(BinaryOp::Mul, t, half)),
            6 => b
                .binary(BinaryOp::Add, a, two_and_half)
                .and_then(|t| b.unary(UnaryOp::Log, t))
                .and_then(|t| b.binary(BinaryOp::Mul, t, half)),
            7 => {
                let exponent = constant(&mut b, (rng.uniform(-1.0, 1.0) * 8.0).round() / 8.0);
                b.binary(BinaryOp::Mul, a, quarter)
                    .and_then(|t| b.binary(BinaryOp::Add, t, one_and_half))
                    .and_then(|t| b.binary(BinaryOp::Pow, t, exponent))
            }
            8 => b
                .binary(BinaryOp::Mul, c, quarter)
                .and_then(|t| b.binary(BinaryOp::Add, t, one_and_half))
                .and_then(|t| b.binary(BinaryOp::Atan2, a, t)),
            9 => b
                .binary(BinaryOp::Add, a, c)
                .and_then(|t| b.binary(BinaryOp::Mul, t, half)),
            10 => b
                .binary(BinaryOp::Sub, a, c)
                .and_then(|t| b.binary(BinaryOp::Mul, t, half)),
            _ => b
                .binary(BinaryOp::Mul, a, c)
                .and_then(|t| b.binary(BinaryOp::Mul, t, half)),
        };
        match made {
            Ok(v) => {
                nodes = v.index() + 1 - n_inputs;
                values.push(v);
            }
            Err(_) => break,
        }
    }
    let n_outputs = (1 + rng.below(3)).min(values.len());
    for i in 0..n_outputs {
        let v = if i == 0 {
            values[values.len() - 1]
        } else {
            operand(rng, &values)
        };
        let _ = b.output(format!("out{i}"), v);
    }
    b.finish().unwrap_or_else(|_| fallback_kernel(name))
}

/// The largest value a resized kernel may hold, so that one kernel stays cheap.
const MAX_RESIZED_NUMEL: usize = 6000;

/// Dimension sizes that resizing picks from: empty, odd and even sizes around the CPU vector
/// widths (2 `f64` or 4 `f32` lanes, reductions in 4 or 8 partial accumulators).
const INTERESTING_DIMS: [usize; 12] = [0, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33];

/// Sizes beyond the GPU tree threshold, used for rank-1 kernels now and then.
const LARGE_DIMS: [usize; 3] = [1024, 1031, 2053];

/// Large-kernel mode's kernel of `seed`: 1,000 to 20,000 ops in `f32` or `f64`, 1 to 70
/// elements (a kernel's frame and staging depend on its length in ops, not elements; lengths
/// from 2 run the CPU's tiled code, 1 its straight-line code).
pub fn large_kernel(seed: u64) -> Kernel {
    let mut rng = TestRng::new(seed ^ 0x1a7e_6e4e_11a1_c0de);
    let ops = 1_000 + rng.below(19_001);
    let dtype = if rng.chance(0.5) { DType::F32 } else { DType::F64 };
    let len = 1 + rng.below(70);
    transcendental_kernel(&mut rng, ops, dtype, len, "large")
}

/// The kernel of `seed`: a generator configuration drawn from the seed, then dimension sizes
/// remapped (to 0, odd sizes, sizes around the vector widths, now and then a GPU-tree size),
/// then now and then a `vmap` of it. One seed in [`LOOP_SEEDS`] gives a kernel with bounded
/// loops instead ([`fuzz_loop_kernel`]).
pub fn fuzz_kernel(seed: u64) -> Kernel {
    // A stream of its own decides, so that the other seeds keep their kernels.
    let mut loop_rng = TestRng::new(seed ^ 0x100b_5eed_f022_c0de);
    if loop_rng.below(LOOP_SEEDS as usize) == 0
        && let Some(kernel) = fuzz_loop_kernel(&mut loop_rng)
    {
        return kernel;
    }
    // The generator's stream is decorrelated from the inputs' (`TestRng::new(seed)`).
    let mut rng = TestRng::new(seed ^ 0x5eed_f022_a11c_0de5);
    let float_dtypes = match rng.below(4) {
        0 => vec![DType::F64],
        1 => vec![DType::F32, DType::F64],
        _ => vec![DType::F32],
    };
    let config = KernelGenConfig {
        max_ops: 1 + rng.below(20),
        max_inputs: 1 + rng.below(4),
        max_outputs: 1 + rng.below(3),
        max_rank: rng.below(4),
        max_dim: 2 + rng.below(3),
        float_dtypes,
        allow_int_bool: rng.chance(0.8),
        allow_reductions: rng.chance(0.75),
        allow_broadcast: rng.chance(0.7),
        allow_index: rng.chance(0.5),
        allow_literal: rng.chance(0.5),
        allow_window: rng.chance(0.5),
        allow_gather: rng.chance(0.4),
        allow_scan: rng.chance(0.4),
    };
    let mut kernel = random_kernel(&mut rng, &config, "fuzz");
    // Most generated kernels hold a transcendental op, whose values are not compared: in two
    // kernels of three each one is replaced by an exactly rounded op of the same dtype.
    if rng.chance(0.67) {
        let exact = rebuild(&kernel, &[], &mut |op: &Op, dtype: DType| {
            exact_op(&mut rng, op, dtype)
        });
        kernel = exact.unwrap_or(kernel);
    }
    if !rng.chance(0.4) {
        let large = rng.chance(0.08);
        let map: Vec<usize> = (0..=config.max_dim)
            .map(|d| match d {
                0 | 1 => d,
                _ if large => *rng.pick(&LARGE_DIMS).unwrap_or(&d),
                _ => *rng.pick(&INTERESTING_DIMS).unwrap_or(&d),
            })
            .collect();
        kernel = rebuild(&kernel, &map, &mut |op: &Op, _: DType| op.clone()).unwrap_or(kernel);
    }
    // One kernel in ten is batched by `vmap`: inputs batched on random axes (moved to the front
    // by transposes), unit axes reshaped in, unbatched outputs broadcast; shapes the generator
    // seldom makes.
    if rng.chance(0.1) {
        let mut in_axes: Vec<Option<usize>> = kernel
            .inputs()
            .map(|(_, _, ty)| rng.chance(0.7).then(|| rng.below(ty.shape.rank() + 1)))
            .collect();
        if let Some(first) = in_axes.first_mut() {
            first.get_or_insert(0);
        }
        let size = *rng.pick(&[1, 2, 3, 5, 8, 17]).unwrap_or(&2);
        if let Ok(batched) = rfx_autodiff::vmap(&kernel, &in_axes, size) {
            kernel = batched;
        }
    }
    kernel
}

/// One fuzz seed in this many gives a kernel with loops.
pub const LOOP_SEEDS: u64 = 8;

/// A kernel with bounded loops (`rfx_ir::testgen::random_loop_kernel`: fori and while loops,
/// counters, invariants, nested and chained loops) whose transcendental ops, in loop bodies and
/// tests too, are replaced by exactly rounded ones, so that every backend must give the LIR
/// interpreter's bits (a transcendental inside a loop has no value the oracle could bound).
/// `None` where the replacement does not type-check.
pub fn fuzz_loop_kernel(rng: &mut TestRng) -> Option<Kernel> {
    let config = LoopGenConfig {
        max_trips: *rng.pick(&[0, 3, 20, 200])?,
        ..LoopGenConfig::default()
    };
    let kernel = random_loop_kernel(rng, &config, "fuzz_loop");
    exact_everywhere(rng, &kernel)
}

/// `kernel` with every transcendental op, at every loop depth, replaced by an exactly rounded
/// op of the same dtype ([`exact_op`]).
fn exact_everywhere(rng: &mut TestRng, kernel: &Kernel) -> Option<Kernel> {
    let mut failed = false;
    let rebuilt = rebuild(kernel, &[], &mut |op: &Op, dtype: DType| match op {
        Op::Loop(spec) => {
            let body = exact_everywhere(rng, &spec.body);
            let cond = spec.cond.as_ref().map(|c| exact_everywhere(rng, c));
            match (body, cond) {
                (Some(body), None) => Op::Loop(Box::new(Loop {
                    body,
                    ..(**spec).clone()
                })),
                (Some(body), Some(Some(cond))) => Op::Loop(Box::new(Loop {
                    body,
                    cond: Some(cond),
                    ..(**spec).clone()
                })),
                _ => {
                    failed = true;
                    op.clone()
                }
            }
        }
        _ => exact_op(rng, op, dtype),
    })?;
    (!failed).then_some(rebuilt)
}

/// `op` itself, or an exactly rounded op accepting `dtype` in place of a transcendental one.
fn exact_op(rng: &mut TestRng, op: &Op, dtype: DType) -> Op {
    match op {
        Op::Unary(u) if u.is_transcendental() => {
            let exact: Vec<UnaryOp> = UnaryOp::ALL
                .iter()
                .copied()
                .filter(|e| !e.is_transcendental() && e.accepts(dtype))
                .collect();
            rng.pick(&exact).map_or_else(|| op.clone(), |&e| Op::Unary(e))
        }
        Op::Binary(BinaryOp::Pow | BinaryOp::Atan2) => {
            let exact: Vec<BinaryOp> = BinaryOp::ALL
                .iter()
                .copied()
                .filter(|e| !matches!(e, BinaryOp::Pow | BinaryOp::Atan2) && e.accepts(dtype))
                .collect();
            rng.pick(&exact).map_or_else(|| op.clone(), |&e| Op::Binary(e))
        }
        _ => op.clone(),
    }
}

/// `kernel` rebuilt and type-checked with every dimension of size `d` replaced by `map[d]`
/// (sizes beyond `map` kept; 1 stays 1, so broadcasting is kept) and every op by
/// `replace_op(op, dtype of its first operand)`; `None` when a node no longer types or grew
/// too big.
fn rebuild(kernel: &Kernel, map: &[usize], replace_op: &mut dyn FnMut(&Op, DType) -> Op) -> Option<Kernel> {
    let map_dims =
        |dims: &[usize]| -> Vec<usize> { dims.iter().map(|&d| map.get(d).copied().unwrap_or(d)).collect() };
    let mut b = Builder::new(kernel.name());
    let mut ids: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
    for node in kernel.nodes() {
        let args: Vec<ValueId> = node.args.iter().map(|a| ids[a.index()]).collect();
        let value = match &node.op {
            Op::Input { name } => b
                .input(
                    name.clone(),
                    TensorType::new(node.ty.dtype, map_dims(node.ty.shape.dims())),
                )
                .ok()?,
            Op::Const(value) => b.constant(*value, map_dims(node.ty.shape.dims())),
            Op::Cast => b.cast(args[0], node.ty.dtype).ok()?,
            Op::Iota { axis } => b
                .iota(node.ty.dtype, map_dims(node.ty.shape.dims()), *axis)
                .ok()?,
            // The values repeat to fill the new element count.
            Op::Literal(values) => {
                let ty = TensorType::new(node.ty.dtype, map_dims(node.ty.shape.dims()));
                let n = ty.shape.numel();
                if n > MAX_RESIZED_NUMEL {
                    return None;
                }
                let values = if values.is_empty() {
                    vec![Scalar::zero(ty.dtype); n]
                } else {
                    values.iter().copied().cycle().take(n).collect()
                };
                b.literal_values(ty, values).ok()?
            }
            Op::BroadcastTo => b.broadcast_to(args[0], map_dims(node.ty.shape.dims())).ok()?,
            Op::Reshape => {
                let numel = b.value_type(args[0]).ok()?.shape.numel();
                let dims = node.ty.shape.dims();
                let non_unit: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] != 1).collect();
                // The generator reshapes to `[numel]` or `[1, numel]`: the one non-unit
                // dimension (or the last) takes the new element count.
                let mut to = dims.to_vec();
                match non_unit.as_slice() {
                    [i] => to[*i] = numel,
                    [] => {
                        if let Some(last) = to.last_mut() {
                            *last = numel;
                        }
                    }
                    _ => to = map_dims(dims),
                }
                b.reshape(args[0], to).ok()?
            }
            // A window spanning its operand spans the resized operand; another keeps its start
            // where it still fits.
            Op::Slice { starts } => {
                let old = kernel.value_type(*node.args.first()?)?.shape.dims().to_vec();
                let new = b.value_type(args[0]).ok()?.shape.dims().to_vec();
                let (mut at, mut window) = (Vec::new(), Vec::new());
                for (((&s, &w), &d), &n) in starts.iter().zip(node.ty.shape.dims()).zip(&old).zip(&new) {
                    let w = if w == d {
                        n
                    } else {
                        map.get(w).copied().unwrap_or(w).min(n)
                    };
                    at.push(s.min(n - w));
                    window.push(w);
                }
                b.slice(args[0], &at, window).ok()?
            }
            // Zeros as before around the resized operand, out to the resized extent when it
            // still holds them.
            Op::Pad { low } => {
                let old = kernel.value_type(*node.args.first()?)?.shape.dims().to_vec();
                let new = b.value_type(args[0]).ok()?.shape.dims().to_vec();
                let dims: Vec<usize> = low
                    .iter()
                    .zip(node.ty.shape.dims())
                    .zip(old.iter().zip(&new))
                    .map(|((&l, &p), (&d, &n))| {
                        let mapped = map.get(p).copied().unwrap_or(p);
                        if mapped >= l + n {
                            mapped
                        } else {
                            l + n + (p - l - d)
                        }
                    })
                    .collect();
                b.pad(args[0], low, dims).ok()?
            }
            Op::LoopOutput { index } => b.loop_output(*args.first()?, *index).ok()?,
            op => {
                let dtype = b.value_type(*args.first()?).ok()?.dtype;
                b.op(replace_op(op, dtype), &args).ok()?
            }
        };
        if b.value_type(value).ok()?.shape.numel() > MAX_RESIZED_NUMEL {
            return None;
        }
        ids.push(value);
    }
    for output in kernel.outputs() {
        b.output(output.name.clone(), ids[output.value.index()]).ok()?;
    }
    b.finish().ok()
}
