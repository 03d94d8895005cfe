//! Random well-typed HIR kernels and inputs, for property and differential tests.
//!
//! Enabled by the `testgen` cargo feature. Generation is driven by a small deterministic RNG
//! seeded by the caller, so a failing case is reproduced from its seed alone. Every generated
//! kernel is built with the [`Builder`] and therefore verifies.

use crate::hir::{Builder, Kernel, ValueId};
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::{Array, ArrayData, DType, Scalar, Shape, TensorType};

/// SplitMix64: a tiny, fast, deterministic generator (not for cryptography).
#[derive(Clone, Debug)]
pub struct TestRng(u64);

impl TestRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> TestRng {
        TestRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`; returns 0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A uniform float in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform(0.0, 1.0) < p
    }

    /// A uniformly chosen element of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

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
        // A window: along each axis all of it, one element (which broadcasts back), or a
        // random run.
        17 => {
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
        // Zeros around: along each axis none, up to two on either side, or filling an axis of
        // one out to the extent of a neighbour's.
        18 => {
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
        // A lookup in `x` along a random axis, at an index of the same rank (its extent along
        // the axis drawn afresh): a value that broadcasts to it (random inputs reach below 0,
        // inside and past the table, and NaN), or an `iota`, or one minus it (all below 0).
        19 => {
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
        // A running fold along a random axis, either way.
        20 => {
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
                        .filter(|&v| b.value_type(v).is_ok_and(|t| *t == xt))
                        .collect();
                    *rng.pick(&same)?
                };
                return b.linrec(x, coef, axis, reverse).ok();
            }
            b.scan(op, x, axis, reverse).ok()
        }
        _ => None,
    }
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

/// Random inputs for `kernel`: floats mostly uniform in [-4, 4] with special values (±0, ±Inf,
/// NaN, subnormals, huge) mixed in with probability `special_rate`; i32 in [-20, 20]; bools
/// uniform.
pub fn random_inputs(rng: &mut TestRng, kernel: &Kernel, special_rate: f64) -> Vec<Array> {
    kernel
        .inputs()
        .map(|(_, _, ty)| random_array(rng, ty, special_rate))
        .collect()
}

/// A random array of type `ty` (see [`random_inputs`]).
pub fn random_array(rng: &mut TestRng, ty: &TensorType, special_rate: f64) -> Array {
    let n = ty.shape.numel();
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        -3e-39,
        1e30,
        -1e30,
        1.0,
        -1.0,
    ];
    let float = |rng: &mut TestRng| {
        if rng.chance(special_rate) {
            *rng.pick(&specials).unwrap_or(&0.0)
        } else {
            rng.uniform(-4.0, 4.0)
        }
    };
    let data = match ty.dtype {
        DType::Bool => ArrayData::Bool((0..n).map(|_| rng.chance(0.5)).collect()),
        DType::I32 => ArrayData::I32((0..n).map(|_| rng.below(41) as i32 - 20).collect()),
        DType::F32 => ArrayData::F32((0..n).map(|_| float(rng) as f32).collect()),
        DType::F64 => ArrayData::F64((0..n).map(|_| float(rng)).collect()),
    };
    Array::new(ty.shape.clone(), data)
        .unwrap_or_else(|_| Array::filled(Scalar::zero(ty.dtype), Shape::scalar()))
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
