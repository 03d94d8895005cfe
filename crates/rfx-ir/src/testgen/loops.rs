//! Random kernels with bounded loops ([`random_loop_kernel`]) for differential tests of every
//! stage that compiles loops.
//!
//! A generated kernel has `f32` or `f64` inputs of one small shape (plus, sometimes, a scalar),
//! and one loop (sometimes a second one reading the first one's results) whose body is
//! elementwise. Each float carry's next value is `bound(a * c + b * e)`, where `e` is a small
//! expression of the carries, the invariants and constants built from averages, scalings by
//! at most 0.9 and `sin`/`cos`/`tanh`/`atan`, and `bound` is `tanh`, `sin` or `clamp(., -2, 2)`:
//! every carry stays in `[-2, 2]` after one iteration whatever the inputs, and the body is
//! about 1-Lipschitz, so rounding differences between paths do not grow with the trip count.
//! A loop may also carry an `i32` counter (`i + 1` per iteration, fori's index), have a
//! `while` test (the counter below a constant, or the largest element of a float carry below a
//! constant) and hold one loop nested in its body.
//!
//! A `while` test on a float carry compares a rounded value with a constant: a path computing
//! in another precision (the interpreter's oracle mode against `f32`) may, rarely, stop one
//! iteration apart. Compare paths of one precision, or use [`LoopGenConfig::float_tests`] to
//! keep tests on the exact counter only.

use super::TestRng;
use crate::hir::{BuildError, Builder, Kernel, Loop, Node, Op, Output, ValueId};
use crate::ops::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use crate::{DType, Scalar, Shape, TensorType};

/// What [`random_loop_kernel`] may put in a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopGenConfig {
    /// The most iterations of the outer loops; each loop's `trips` is drawn from
    /// `0..=max_trips` (a nested loop's from `0..=max_trips.min(5)`).
    pub max_trips: u64,
    /// The most float carries per loop (from 1).
    pub max_float_carries: usize,
    /// Allow invariants: values the body reads but does not carry.
    pub invariants: bool,
    /// Allow an `i32` scalar counter carry (`i + 1` each iteration).
    pub counter: bool,
    /// Allow `while_loop`s.
    pub while_loops: bool,
    /// Allow `while` tests on a float carry (otherwise only on the counter).
    pub float_tests: bool,
    /// Allow one loop nested in a loop's body.
    pub nested: bool,
    /// Allow a second loop after the first, reading its results.
    pub chained: bool,
}

impl Default for LoopGenConfig {
    fn default() -> LoopGenConfig {
        LoopGenConfig {
            max_trips: 20,
            max_float_carries: 3,
            invariants: true,
            counter: true,
            while_loops: true,
            float_tests: true,
            nested: true,
            chained: true,
        }
    }
}

impl LoopGenConfig {
    /// Only single `fori_loop`s without nesting, counters or tests: the simplest loops.
    pub fn fori_only() -> LoopGenConfig {
        LoopGenConfig {
            counter: false,
            while_loops: false,
            nested: false,
            chained: false,
            ..LoopGenConfig::default()
        }
    }
}

/// A random kernel named `name` holding loops as `config` allows (see the module
/// documentation). Deterministic in the state of `rng`. The kernel always verifies; every
/// output is a final carry of a loop or a value computed from one.
pub fn random_loop_kernel(rng: &mut TestRng, config: &LoopGenConfig, name: &str) -> Kernel {
    build_kernel(rng, config, name).unwrap_or_else(|_| fallback_kernel(name))
}

/// A kernel that returns its input, for a generator bug (a builder error): named
/// `<name>_fallback`, so that tests that check the name catch it.
fn fallback_kernel(name: &str) -> Kernel {
    let node = Node {
        op: Op::Input {
            name: "x0".to_string(),
        },
        args: Vec::new(),
        ty: TensorType::scalar(DType::F32),
    };
    let output = Output {
        name: "out0".to_string(),
        value: ValueId::new(0),
    };
    Kernel::from_parts(format!("{name}_fallback"), vec![node], vec![output])
}

/// The draw shared by one kernel: its float dtype, the carries' shape and the limits.
struct Ctx<'a> {
    dtype: DType,
    shape: Shape,
    config: &'a LoopGenConfig,
}

impl Ctx<'_> {
    fn constant(&self, b: &mut Builder, value: f64) -> ValueId {
        b.scalar(float_scalar(self.dtype, value))
    }
}

fn float_scalar(dtype: DType, value: f64) -> Scalar {
    match dtype {
        DType::F32 => Scalar::F32(value as f32),
        _ => Scalar::F64(value),
    }
}

/// A constant with two decimals, exact enough in `f32` that prints and parses keep it.
fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

const SHAPES: [&[usize]; 5] = [&[], &[1], &[3], &[2, 2], &[4]];

fn build_kernel(rng: &mut TestRng, config: &LoopGenConfig, name: &str) -> Result<Kernel, BuildError> {
    let dtype = if rng.chance(0.5) { DType::F32 } else { DType::F64 };
    let shape = Shape::new(rng.pick(&SHAPES).copied().unwrap_or(&[]).to_vec());
    let ctx = Ctx { dtype, shape, config };
    let mut b = Builder::new(name);
    let mut pool = Vec::new();
    for i in 0..1 + rng.below(3) {
        pool.push(b.input(format!("x{i}"), TensorType::new(dtype, ctx.shape.clone()))?);
    }
    if config.invariants && rng.chance(0.3) {
        pool.push(b.input("s", TensorType::scalar(dtype))?);
    }
    let first = random_loop(rng, &ctx, &mut b, &pool, config.max_trips, config.nested)?;
    let mut outputs = first.clone();
    if config.chained && rng.chance(0.3) {
        let mut next_pool = first.floats.clone();
        next_pool.extend(&pool);
        outputs = random_loop(rng, &ctx, &mut b, &next_pool, config.max_trips, false)?;
    }
    for (k, &value) in outputs.floats.iter().enumerate() {
        b.output(format!("out{k}"), value)?;
    }
    if let Some(counter) = outputs.counter {
        b.output("count", counter)?;
    }
    if rng.chance(0.3) {
        // A value computed after the loop from a carry and an input.
        let (carry, input) = (outputs.floats[0], pool[0]);
        let post = b.binary(BinaryOp::Add, carry, input)?;
        b.output("post", post)?;
    }
    b.finish()
}

/// The final carries of a generated loop: the float ones in carry order, then the counter.
#[derive(Clone)]
struct Finals {
    floats: Vec<ValueId>,
    counter: Option<ValueId>,
}

/// Adds a loop to `b` whose operands come from `pool` (values of the kernel's dtype, of the
/// carries' shape or scalars).
fn random_loop(
    rng: &mut TestRng,
    ctx: &Ctx<'_>,
    b: &mut Builder,
    pool: &[ValueId],
    max_trips: u64,
    nested: bool,
) -> Result<Finals, BuildError> {
    let config = ctx.config;
    let n_floats = 1 + rng.below(config.max_float_carries.max(1));
    let mut operands = Vec::new();
    for _ in 0..n_floats {
        let mut init = *rng.pick(pool).unwrap_or(&pool[0]);
        if b.value_type(init)?.shape != ctx.shape {
            init = b.broadcast_to(init, ctx.shape.clone())?;
        }
        if rng.chance(0.3) {
            init = b.unary(UnaryOp::Tanh, init)?;
        }
        operands.push(init);
    }
    let has_counter = config.counter && rng.chance(0.4);
    if has_counter {
        operands.push(b.scalar(Scalar::I32(rng.below(3) as i32)));
    }
    let carries = operands.len();
    if config.invariants {
        for _ in 0..rng.below(3) {
            operands.push(*rng.pick(pool).unwrap_or(&pool[0]));
        }
    }
    let types = operands
        .iter()
        .map(|&v| b.value_type(v).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let body = random_body(rng, ctx, &types, n_floats, has_counter, nested)?;
    let cond = if config.while_loops && (has_counter || config.float_tests) && rng.chance(0.5) {
        Some(random_test(rng, ctx, &types, n_floats, has_counter, max_trips)?)
    } else {
        None
    };
    let trips = rng.below(max_trips as usize + 1) as u64;
    let finals = b.loop_(
        Loop {
            carries,
            trips,
            body,
            cond,
        },
        &operands,
    )?;
    Ok(Finals {
        floats: finals[..n_floats].to_vec(),
        counter: has_counter.then(|| finals[n_floats]),
    })
}

/// The body's inputs, named `c<k>` (float carries), `i` (the counter) and `inv<k>`.
fn body_inputs(
    b: &mut Builder,
    types: &[TensorType],
    n_floats: usize,
    has_counter: bool,
) -> Result<Vec<ValueId>, BuildError> {
    let carries = n_floats + usize::from(has_counter);
    types
        .iter()
        .enumerate()
        .map(|(k, ty)| {
            let name = match k {
                k if k < n_floats => format!("c{k}"),
                k if k < carries => "i".to_string(),
                k => format!("inv{}", k - carries),
            };
            b.input(name, ty.clone())
        })
        .collect()
}

fn random_body(
    rng: &mut TestRng,
    ctx: &Ctx<'_>,
    types: &[TensorType],
    n_floats: usize,
    has_counter: bool,
    nested: bool,
) -> Result<Kernel, BuildError> {
    let mut b = Builder::new("body");
    let inputs = body_inputs(&mut b, types, n_floats, has_counter)?;
    let carries = n_floats + usize::from(has_counter);
    // The terms expressions read: the float carries, the invariants and the counter as a float
    // scaled to at most a few units.
    let mut terms: Vec<ValueId> = inputs[..n_floats].to_vec();
    terms.extend(&inputs[carries..]);
    if has_counter {
        let index = b.cast(inputs[n_floats], ctx.dtype)?;
        let tenth = ctx.constant(&mut b, 0.1);
        terms.push(b.binary(BinaryOp::Mul, index, tenth)?);
    }
    let mut inner = None;
    if nested && rng.chance(0.4) {
        let inner_trips = ctx.config.max_trips.min(5);
        inner = Some(random_loop(rng, ctx, &mut b, &terms, inner_trips, false)?.floats[0]);
    }
    for (k, &carry) in inputs[..n_floats].iter().enumerate() {
        let mut e = random_expr(rng, ctx, &mut b, &terms, 2)?;
        if let (0, Some(inner)) = (k, inner) {
            let sum = b.binary(BinaryOp::Add, e, inner)?;
            let half = ctx.constant(&mut b, 0.5);
            e = b.binary(BinaryOp::Mul, sum, half)?;
        }
        let a = ctx.constant(&mut b, round2(rng.uniform(0.2, 0.9)));
        let weight = ctx.constant(&mut b, round2(rng.uniform(-0.5, 0.5)));
        let kept = b.binary(BinaryOp::Mul, carry, a)?;
        let mixed = b.binary(BinaryOp::Mul, e, weight)?;
        let next = b.binary(BinaryOp::Add, kept, mixed)?;
        let next = bound(rng, ctx, &mut b, next)?;
        b.output(format!("n{k}"), next)?;
    }
    if has_counter {
        let one = b.scalar(Scalar::I32(1));
        let next = b.binary(BinaryOp::Add, inputs[n_floats], one)?;
        b.output("ni", next)?;
    }
    b.finish()
}

/// `tanh`, `sin` or `clamp(., -2, 2)` of `x`: a value in `[-2, 2]`.
fn bound(rng: &mut TestRng, ctx: &Ctx<'_>, b: &mut Builder, x: ValueId) -> Result<ValueId, BuildError> {
    match rng.below(3) {
        0 => b.unary(UnaryOp::Tanh, x),
        1 => b.unary(UnaryOp::Sin, x),
        _ => {
            let lo = ctx.constant(b, -2.0);
            let hi = ctx.constant(b, 2.0);
            b.clamp(x, lo, hi)
        }
    }
}

/// A small expression of `terms` and constants, about 1-Lipschitz in its terms.
fn random_expr(
    rng: &mut TestRng,
    ctx: &Ctx<'_>,
    b: &mut Builder,
    terms: &[ValueId],
    depth: usize,
) -> Result<ValueId, BuildError> {
    if depth == 0 || rng.chance(0.25) {
        return Ok(match rng.pick(terms) {
            Some(&term) if !rng.chance(0.1) => term,
            _ => ctx.constant(b, round2(rng.uniform(-1.0, 1.0))),
        });
    }
    let x = random_expr(rng, ctx, b, terms, depth - 1)?;
    match rng.below(5) {
        0 => {
            let op = *rng
                .pick(&[
                    UnaryOp::Sin,
                    UnaryOp::Cos,
                    UnaryOp::Tanh,
                    UnaryOp::Atan,
                    UnaryOp::Neg,
                ])
                .unwrap_or(&UnaryOp::Sin);
            b.unary(op, x)
        }
        1 | 2 => {
            let y = random_expr(rng, ctx, b, terms, depth - 1)?;
            let op = if rng.chance(0.5) {
                BinaryOp::Add
            } else {
                BinaryOp::Sub
            };
            let sum = b.binary(op, x, y)?;
            let half = ctx.constant(b, 0.5);
            b.binary(BinaryOp::Mul, sum, half)
        }
        3 => {
            let scale = ctx.constant(b, round2(rng.uniform(-0.9, 0.9)));
            b.binary(BinaryOp::Mul, x, scale)
        }
        _ => {
            let lo = ctx.constant(b, -1.5);
            let hi = ctx.constant(b, 1.5);
            b.clamp(x, lo, hi)
        }
    }
}

/// A `while` test: the counter below a constant, or the largest element of a float carry
/// compared with a constant.
fn random_test(
    rng: &mut TestRng,
    ctx: &Ctx<'_>,
    types: &[TensorType],
    n_floats: usize,
    has_counter: bool,
    max_trips: u64,
) -> Result<Kernel, BuildError> {
    let mut b = Builder::new("test");
    let inputs = body_inputs(&mut b, types, n_floats, has_counter)?;
    let keep = if has_counter && (!ctx.config.float_tests || rng.chance(0.5)) {
        let limit = b.scalar(Scalar::I32(rng.below(max_trips as usize + 3) as i32));
        b.compare(CmpOp::Lt, inputs[n_floats], limit)?
    } else {
        let carry = inputs[rng.below(n_floats)];
        let largest = if ctx.shape.rank() == 0 {
            carry
        } else {
            b.reduce_all(ReduceOp::Max, carry)?
        };
        let limit = ctx.constant(&mut b, round2(rng.uniform(-0.5, 1.0)));
        let op = if rng.chance(0.5) { CmpOp::Lt } else { CmpOp::Gt };
        b.compare(op, largest, limit)?
    };
    b.output("keep", keep)?;
    b.finish()
}
