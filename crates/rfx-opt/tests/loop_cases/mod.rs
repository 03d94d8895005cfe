//! Hand-written HIR kernels with loops, one per edge case of compiling loops: for rfx-opt's
//! `tests/loops.rs` and, through a `#[path]` include, rfx-lower's tests of lowered loops.

use rfx_ir::hir::{BuildError, Builder, Kernel, Loop, ValueId};
use rfx_ir::{Array, BinaryOp, CmpOp, DType, ReduceOp, Scalar, TensorType, UnaryOp};

type Built = Result<Kernel, BuildError>;

/// A case: its name and how to build it.
type Case = (&'static str, fn() -> Built);

fn f32s(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims.to_vec())
}

fn i32_scalar() -> TensorType {
    TensorType::scalar(DType::I32)
}

/// A kernel with inputs named `c0, c1, ...` of `types` whose outputs are `f` of them.
fn kernel(
    name: &str,
    types: &[TensorType],
    f: impl FnOnce(&mut Builder, &[ValueId]) -> Result<Vec<ValueId>, BuildError>,
) -> Built {
    let mut b = Builder::new(name);
    let inputs = types
        .iter()
        .enumerate()
        .map(|(i, ty)| b.input(format!("c{i}"), ty.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, out) in f(&mut b, &inputs)?.into_iter().enumerate() {
        b.output(format!("o{i}"), out)?;
    }
    b.finish()
}

/// `fori_loop` over `trips` with `carries` carries of `types` (carries then invariants).
fn fori(trips: u64, carries: usize, body: Kernel) -> Loop {
    Loop {
        carries,
        trips,
        body,
        cond: None,
    }
}

/// `x * a + b` with scalar `f32` constants.
fn affine(b: &mut Builder, x: ValueId, a: f32, c: f32) -> Result<ValueId, BuildError> {
    let a = b.scalar(Scalar::F32(a));
    let c = b.scalar(Scalar::F32(c));
    let ax = b.binary(BinaryOp::Mul, x, a)?;
    b.binary(BinaryOp::Add, ax, c)
}

/// The body of Newton's iteration for `sqrt(a)`: `x' = 0.5 * (x + a / x)`.
fn newton_body() -> Built {
    kernel("newton", &[f32s(&[4]), f32s(&[4])], |b, v| {
        let q = b.binary(BinaryOp::Div, v[1], v[0])?;
        let s = b.binary(BinaryOp::Add, v[0], q)?;
        let half = b.scalar(Scalar::F32(0.5));
        Ok(vec![b.binary(BinaryOp::Mul, s, half)?])
    })
}

/// A carry of `f32[n]` and an `i32` counter: `x' = tanh(x * 0.9 + 0.3)`, `i' = i + 1`.
fn counted_body(n: usize) -> Built {
    kernel("counted", &[f32s(&[n]), i32_scalar()], |b, v| {
        let x = affine(b, v[0], 0.9, 0.3)?;
        let x = b.unary(UnaryOp::Tanh, x)?;
        let one = b.scalar(Scalar::I32(1));
        Ok(vec![x, b.binary(BinaryOp::Add, v[1], one)?])
    })
}

/// The test `i < limit` on the counter of [`counted_body`].
fn counter_below(n: usize, limit: i32) -> Built {
    kernel("below", &[f32s(&[n]), i32_scalar()], |b, v| {
        let limit = b.scalar(Scalar::I32(limit));
        Ok(vec![b.compare(CmpOp::Lt, v[1], limit)?])
    })
}

/// Every hand-written case with its name.
pub(crate) fn cases() -> Vec<(&'static str, Kernel)> {
    let cases: Vec<Case> = vec![
        ("newton_sqrt", newton_sqrt),
        ("unused_loop", unused_loop),
        ("only_second_carry_used", only_second_carry_used),
        ("zero_trips", zero_trips),
        ("one_trip", one_trip),
        ("literal_and_constant_invariants", literal_and_constant_invariants),
        ("two_loops_in_sequence", two_loops_in_sequence),
        ("loop_feeds_loop", loop_feeds_loop),
        ("nested_loops", nested_loops),
        ("results_are_outputs", results_are_outputs),
        ("while_stops_early", while_stops_early),
        ("while_hits_trips", while_hits_trips),
        ("while_zero_trips", while_zero_trips),
        ("while_on_float_test", while_on_float_test),
        ("while_in_fori", while_in_fori),
        ("reduction_in_body", reduction_in_body),
        ("unchanged_and_swapped_carries", unchanged_and_swapped_carries),
        ("values_across_stages", values_across_stages),
        ("scalar_carry_broadcast", scalar_carry_broadcast),
        ("dead_carries", dead_carries),
        (
            "while_counter_read_only_by_its_test",
            while_counter_read_only_by_its_test,
        ),
        ("stages_inside_a_body", stages_inside_a_body),
        ("while_one_trip", while_one_trip),
        ("empty_carry", empty_carry),
        ("invariant_work_in_body", invariant_work_in_body),
        (
            "test_inputs_named_like_moved_values",
            test_inputs_named_like_moved_values,
        ),
        ("invariant_inner_loops", invariant_inner_loops),
    ];
    cases
        .into_iter()
        .map(|(name, make)| (name, make().unwrap_or_else(|e| panic!("{name}: {e}"))))
        .collect()
}

/// A carry initialised from a kernel input and an invariant that is one.
fn newton_sqrt() -> Built {
    kernel("newton_sqrt", &[f32s(&[4])], |b, v| {
        let x = b.loop_(fori(8, 1, newton_body()?), &[v[0], v[0]])?;
        Ok(vec![x[0]])
    })
}

/// A loop whose results nothing reads: dead code.
fn unused_loop() -> Built {
    kernel("unused_loop", &[f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        b.loop_(fori(5, 2, counted_body(3)?), &[v[0], zero])?;
        let two = b.scalar(Scalar::F32(2.0));
        Ok(vec![b.binary(BinaryOp::Mul, v[0], two)?])
    })
}

fn b_zero_i32(b: &mut Builder) -> ValueId {
    b.scalar(Scalar::I32(0))
}

/// Only carry 1 is read after the loop; the loop node itself (carry 0) is not.
fn only_second_carry_used() -> Built {
    kernel("only_second_carry_used", &[f32s(&[3]), i32_scalar()], |b, v| {
        let r = b.loop_(fori(6, 2, counted_body(3)?), &[v[0], v[1]])?;
        let ten = b.scalar(Scalar::I32(10));
        Ok(vec![b.binary(BinaryOp::Mul, r[1], ten)?])
    })
}

/// A loop that runs no iteration returns its initial carries.
fn zero_trips() -> Built {
    kernel("zero_trips", &[f32s(&[3])], |b, v| {
        let init = b.unary(UnaryOp::Sin, v[0])?;
        let zero = b_zero_i32(b);
        let r = b.loop_(fori(0, 2, counted_body(3)?), &[init, zero])?;
        let one = b.scalar(Scalar::F32(1.0));
        Ok(vec![b.binary(BinaryOp::Add, r[0], one)?, r[1]])
    })
}

/// A loop that runs once is its body.
fn one_trip() -> Built {
    kernel("one_trip", &[f32s(&[3]), i32_scalar()], |b, v| {
        let r = b.loop_(fori(1, 2, counted_body(3)?), &[v[0], v[1]])?;
        Ok(vec![r[0], r[1]])
    })
}

/// Invariants that are a literal and a scalar constant; a carry initialised from a constant.
fn literal_and_constant_invariants() -> Built {
    let body = kernel(
        "body",
        &[f32s(&[3]), f32s(&[3]), TensorType::scalar(DType::F32)],
        |b, v| {
            let m = b.binary(BinaryOp::Mul, v[0], v[2])?;
            let s = b.binary(BinaryOp::Add, m, v[1])?;
            Ok(vec![b.unary(UnaryOp::Sin, s)?])
        },
    )?;
    kernel("literal_and_constant_invariants", &[f32s(&[3])], |b, v| {
        let table = Array::from_vec([3], vec![0.5f32, -1.25, 2.0]).expect("three values");
        let lit = b.literal(&table);
        let k = b.scalar(Scalar::F32(0.75));
        let zero = b.constant(Scalar::F32(0.0), [3]);
        let r = b.loop_(fori(7, 1, body), &[zero, lit, k])?;
        Ok(vec![b.binary(BinaryOp::Add, r[0], v[0])?])
    })
}

/// Two independent loops, one after the other.
fn two_loops_in_sequence() -> Built {
    kernel("two_loops_in_sequence", &[f32s(&[4]), f32s(&[3])], |b, v| {
        let sq = b.loop_(fori(6, 1, newton_body()?), &[v[0], v[0]])?;
        let zero = b_zero_i32(b);
        let c = b.loop_(fori(9, 2, counted_body(3)?), &[v[1], zero])?;
        let s = b.reduce_all(ReduceOp::Sum, sq[0])?;
        let out = b.binary(BinaryOp::Add, c[0], s)?;
        Ok(vec![out, c[1]])
    })
}

/// The second loop's carry starts from the first loop's result, its invariant is another one.
fn loop_feeds_loop() -> Built {
    let body = kernel("body", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let m = b.binary(BinaryOp::Mul, v[0], v[1])?;
        Ok(vec![b.unary(UnaryOp::Cos, m)?])
    })?;
    kernel("loop_feeds_loop", &[f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let first = b.loop_(fori(4, 2, counted_body(3)?), &[v[0], zero])?;
        let init = affine(b, first[0], 2.0, 0.0)?;
        let second = b.loop_(fori(5, 1, body.clone()), &[init, first[0]])?;
        Ok(vec![second[0], first[1]])
    })
}

/// A loop in a loop's body, reading the outer body's invariant and carry.
fn nested_loops() -> Built {
    let inner = kernel("inner", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let s = b.binary(BinaryOp::Add, v[0], v[1])?;
        let s = affine(b, s, 0.5, 0.0)?;
        Ok(vec![b.unary(UnaryOp::Sin, s)?])
    })?;
    let outer = kernel("outer", &[f32s(&[3]), i32_scalar(), f32s(&[3])], |b, v| {
        let r = b.loop_(fori(4, 1, inner.clone()), &[v[0], v[2]])?;
        let next = affine(b, r[0], 1.0, 0.125)?;
        let one = b.scalar(Scalar::I32(1));
        Ok(vec![next, b.binary(BinaryOp::Add, v[1], one)?])
    })?;
    kernel("nested_loops", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let r = b.loop_(fori(3, 2, outer.clone()), &[v[0], zero, v[1]])?;
        Ok(vec![r[0], r[1]])
    })
}

/// Final carries returned as outputs directly, one of them twice, and an input returned too.
fn results_are_outputs() -> Built {
    kernel("results_are_outputs", &[f32s(&[3]), i32_scalar()], |b, v| {
        let r = b.loop_(fori(3, 2, counted_body(3)?), &[v[0], v[1]])?;
        Ok(vec![r[0], r[1], r[0], v[0]])
    })
}

fn while_loop(trips: u64, n: usize, limit: i32) -> Result<Loop, BuildError> {
    Ok(Loop {
        carries: 2,
        trips,
        body: counted_body(n)?,
        cond: Some(counter_below(n, limit)?),
    })
}

/// A `while_loop` whose test fails before `trips`.
fn while_stops_early() -> Built {
    kernel("while_stops_early", &[f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let r = b.loop_(while_loop(100, 3, 5)?, &[v[0], zero])?;
        Ok(vec![r[0], r[1]])
    })
}

/// A `while_loop` that runs all its `trips`, the counter starting from an input.
fn while_hits_trips() -> Built {
    kernel("while_hits_trips", &[f32s(&[3]), i32_scalar()], |b, v| {
        let r = b.loop_(while_loop(7, 3, 12)?, &[v[0], v[1]])?;
        Ok(vec![r[0], r[1]])
    })
}

/// A `while_loop` allowed no iteration.
fn while_zero_trips() -> Built {
    kernel("while_zero_trips", &[f32s(&[3]), i32_scalar()], |b, v| {
        let r = b.loop_(while_loop(0, 3, 12)?, &[v[0], v[1]])?;
        Ok(vec![r[0], r[1]])
    })
}

/// A `while_loop` testing a float carry: `max(x) < 10` while `x' = x * 1.5 + 0.25`.
fn while_on_float_test() -> Built {
    let body = kernel("grow", &[f32s(&[2, 3])], |b, v| {
        Ok(vec![affine(b, v[0], 1.5, 0.25)?])
    })?;
    let cond = kernel("small", &[f32s(&[2, 3])], |b, v| {
        let m = b.reduce_all(ReduceOp::Max, v[0])?;
        let ten = b.scalar(Scalar::F32(10.0));
        Ok(vec![b.compare(CmpOp::Lt, m, ten)?])
    })?;
    kernel("while_on_float_test", &[f32s(&[2, 3])], |b, v| {
        let spec = Loop {
            carries: 1,
            trips: 40,
            body,
            cond: Some(cond),
        };
        let r = b.loop_(spec, &[v[0]])?;
        Ok(vec![r[0]])
    })
}

/// A `while_loop` in a `fori_loop`'s body, its counter restarting from the outer counter.
fn while_in_fori() -> Built {
    let outer = kernel("outer", &[f32s(&[3]), i32_scalar()], |b, v| {
        let r = b.loop_(while_loop(6, 3, 4)?, &[v[0], v[1]])?;
        let one = b.scalar(Scalar::I32(1));
        let x = affine(b, r[0], 0.5, -0.25)?;
        Ok(vec![x, b.binary(BinaryOp::Add, v[1], one)?])
    })?;
    kernel("while_in_fori", &[f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let r = b.loop_(fori(5, 2, outer.clone()), &[v[0], zero])?;
        Ok(vec![r[0], r[1]])
    })
}

/// A body of several fused kernels: `x' = x / (sum(x * x) + 1) + inv`.
fn reduction_in_body() -> Built {
    reduction_in_body_trips(6)
}

/// [`reduction_in_body`] with `trips` iterations.
pub(crate) fn reduction_in_body_trips(trips: u64) -> Built {
    let body = kernel("normalise", &[f32s(&[2, 4]), f32s(&[4])], |b, v| {
        let sq = b.binary(BinaryOp::Mul, v[0], v[0])?;
        let s = b.reduce(ReduceOp::Sum, sq, &[1], true)?;
        let s = affine(b, s, 1.0, 1.0)?;
        let q = b.binary(BinaryOp::Div, v[0], s)?;
        Ok(vec![b.binary(BinaryOp::Add, q, v[1])?])
    })?;
    kernel("reduction_in_body", &[f32s(&[2, 4]), f32s(&[4])], |b, v| {
        let r = b.loop_(fori(trips, 1, body.clone()), &[v[0], v[1]])?;
        Ok(vec![r[0]])
    })
}

/// A carry the body returns unchanged, and two carries that swap every iteration.
fn unchanged_and_swapped_carries() -> Built {
    let body = kernel("swap", &[f32s(&[3]), f32s(&[3]), f32s(&[3])], |b, v| {
        let a = b.unary(UnaryOp::Sin, v[2])?;
        let a = b.binary(BinaryOp::Add, a, v[0])?;
        Ok(vec![v[0], a, v[1]])
    })?;
    kernel(
        "unchanged_and_swapped_carries",
        &[f32s(&[3]), f32s(&[3])],
        |b, v| {
            let init = b.unary(UnaryOp::Neg, v[1])?;
            let r = b.loop_(fori(5, 3, body.clone()), &[v[0], v[1], init])?;
            Ok(vec![r[0], r[1], r[2]])
        },
    )
}

/// A value computed before the loop that the loop reads and that is also an output; one that
/// only the code after the loop reads.
fn values_across_stages() -> Built {
    kernel("values_across_stages", &[f32s(&[4]), f32s(&[4])], |b, v| {
        let before = b.unary(UnaryOp::Abs, v[0])?;
        let later = b.unary(UnaryOp::Exp, v[1])?;
        let r = b.loop_(fori(5, 1, newton_body()?), &[v[1], before])?;
        let after = b.binary(BinaryOp::Mul, r[0], later)?;
        Ok(vec![after, before])
    })
}

/// A scalar carry read by a body of another shape through broadcasting.
fn scalar_carry_broadcast() -> Built {
    let body = kernel("acc", &[TensorType::scalar(DType::F32), f32s(&[2, 3])], |b, v| {
        let m = b.binary(BinaryOp::Mul, v[1], v[0])?;
        let t = b.unary(UnaryOp::Tanh, m)?;
        let s = b.reduce_all(ReduceOp::Mean, t)?;
        Ok(vec![b.binary(BinaryOp::Add, s, v[0])?])
    })?;
    kernel("scalar_carry_broadcast", &[f32s(&[2, 3])], |b, v| {
        let one = b.scalar(Scalar::F32(1.0));
        let r = b.loop_(fori(4, 1, body.clone()), &[one, v[0]])?;
        let out = b.binary(BinaryOp::Mul, v[0], r[0])?;
        Ok(vec![out])
    })
}

/// Carries nothing after the loop reads: carry 1 feeds carry 0, which is read, so it stays;
/// the counter (carry 2) and carry 3, which only feeds itself, go.
fn dead_carries() -> Built {
    let body = kernel(
        "body",
        &[f32s(&[3]), f32s(&[3]), i32_scalar(), f32s(&[3]), f32s(&[3])],
        |b, v| {
            let a = b.binary(BinaryOp::Add, v[0], v[1])?;
            let a = b.unary(UnaryOp::Tanh, a)?;
            let half = affine(b, v[1], 0.5, 0.0)?;
            let next_b = b.binary(BinaryOp::Add, half, v[4])?;
            let next_b = b.unary(UnaryOp::Cos, next_b)?;
            let one = b.scalar(Scalar::I32(1));
            let i = b.binary(BinaryOp::Add, v[2], one)?;
            let d = b.unary(UnaryOp::Sin, v[3])?;
            Ok(vec![a, next_b, i, d])
        },
    )?;
    kernel("dead_carries", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let r = b.loop_(fori(6, 4, body.clone()), &[v[0], v[1], zero, v[0], v[1]])?;
        Ok(vec![r[0]])
    })
}

/// A `while_loop` whose counter only its test reads after the loop: the counter stays.
fn while_counter_read_only_by_its_test() -> Built {
    kernel("while_counter_read_only_by_its_test", &[f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let r = b.loop_(while_loop(50, 3, 9)?, &[v[0], zero])?;
        Ok(vec![r[0]])
    })
}

/// An outer body with stages of its own: a value computed before its inner loop is the inner
/// loop's invariant and is read again after it, the inner carry starts from a value computed
/// for it alone; `iota` invariant and carry start; a constant output.
fn stages_inside_a_body() -> Built {
    let inner = kernel("inner", &[f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[2, 3])], |b, v| {
        let m = b.binary(BinaryOp::Mul, v[0], v[1])?;
        let m = b.binary(BinaryOp::Add, m, v[2])?;
        Ok(vec![b.unary(UnaryOp::Sin, m)?])
    })?;
    let outer = kernel("outer", &[f32s(&[2, 3]), f32s(&[2, 3])], |b, v| {
        let t = b.unary(UnaryOp::Cos, v[0])?;
        let start = b.unary(UnaryOp::Tanh, v[0])?;
        let iota = b.iota(DType::F32, [2, 3], 1)?;
        let r = b.loop_(fori(3, 1, inner.clone()), &[start, t, iota])?;
        let s = b.reduce(ReduceOp::Max, r[0], &[0], true)?;
        let next = b.binary(BinaryOp::Sub, t, s)?;
        let next = b.binary(BinaryOp::Add, next, v[1])?;
        Ok(vec![b.unary(UnaryOp::Tanh, next)?])
    })?;
    kernel("stages_inside_a_body", &[f32s(&[2, 3])], |b, v| {
        let iota = b.iota(DType::F32, [2, 3], 0)?;
        let r = b.loop_(fori(4, 1, outer.clone()), &[iota, v[0]])?;
        let seven = b.constant(Scalar::F32(7.0), [2]);
        Ok(vec![r[0], seven])
    })
}

/// `while_loop`s of one trip: one whose test holds for inputs from 0 on, one whose test fails
/// for all but inputs below -3.
fn while_one_trip() -> Built {
    kernel("while_one_trip", &[f32s(&[3]), i32_scalar()], |b, v| {
        let taken = b.loop_(while_loop(1, 3, 4)?, &[v[0], v[1]])?;
        let skipped = b.loop_(while_loop(1, 3, -3)?, &[v[0], v[1]])?;
        Ok(vec![taken[0], taken[1], skipped[0], skipped[1]])
    })
}

/// A carry of no elements beside a counter.
fn empty_carry() -> Built {
    kernel("empty_carry", &[f32s(&[0]), i32_scalar()], |b, v| {
        let r = b.loop_(while_loop(9, 0, 5)?, &[v[0], v[1]])?;
        Ok(vec![r[0], r[1]])
    })
}

/// A body and a test that compute from the invariants alone: `x' = x * sum(sin(inv)) +
/// cos(inv)` while `max(x) < sum(exp(inv))`.
fn invariant_work_in_body() -> Built {
    let body = kernel("body", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let s = b.unary(UnaryOp::Sin, v[1])?;
        let s = b.reduce_all(ReduceOp::Sum, s)?;
        let c = b.unary(UnaryOp::Cos, v[1])?;
        let m = b.binary(BinaryOp::Mul, v[0], s)?;
        Ok(vec![b.binary(BinaryOp::Add, m, c)?])
    })?;
    let cond = kernel("test", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let m = b.reduce_all(ReduceOp::Max, v[0])?;
        let e = b.unary(UnaryOp::Exp, v[1])?;
        let e = b.reduce_all(ReduceOp::Sum, e)?;
        Ok(vec![b.compare(CmpOp::Lt, m, e)?])
    })?;
    kernel("invariant_work_in_body", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let spec = Loop {
            carries: 1,
            trips: 12,
            body: body.clone(),
            cond: Some(cond.clone()),
        };
        Ok(vec![b.loop_(spec, &[v[0], v[1]])?[0]])
    })
}

/// [`invariant_work_in_body`] with a test whose inputs have the names the values moved out of
/// the loop would get: the moved values are named apart from both kernels' inputs.
fn test_inputs_named_like_moved_values() -> Built {
    let mut b = Builder::new("test");
    let x = b.input("hoisted0", f32s(&[3]))?;
    let inv = b.input("hoisted1", f32s(&[3]))?;
    let m = b.reduce_all(ReduceOp::Max, x)?;
    let e = b.unary(UnaryOp::Exp, inv)?;
    let e = b.reduce_all(ReduceOp::Sum, e)?;
    let keep = b.compare(CmpOp::Lt, m, e)?;
    b.output("keep", keep)?;
    let cond = b.finish()?;
    let body = kernel("body", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let c = b.unary(UnaryOp::Cos, v[1])?;
        Ok(vec![b.binary(BinaryOp::Add, v[0], c)?])
    })?;
    kernel(
        "test_inputs_named_like_moved_values",
        &[f32s(&[3]), f32s(&[3])],
        |b, v| {
            let spec = Loop {
                carries: 1,
                trips: 12,
                body: body.clone(),
                cond: Some(cond.clone()),
            };
            Ok(vec![b.loop_(spec, &[v[0], v[1]])?[0]])
        },
    )
}

/// Inner loops that read only the outer loop's invariants, so move out of it whole: one of no
/// trips, one of one trip, one of five that carries a value nothing reads.
fn invariant_inner_loops() -> Built {
    let outer = kernel("outer", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let zero = b_zero_i32(b);
        let none = b.loop_(fori(0, 2, counted_body(3)?), &[v[1], zero])?;
        let once = b.loop_(fori(1, 2, counted_body(3)?), &[v[1], zero])?;
        let five = b.loop_(fori(5, 2, counted_body(3)?), &[v[1], zero])?;
        let s = b.binary(BinaryOp::Add, none[0], once[0])?;
        let s = b.binary(BinaryOp::Add, s, five[0])?;
        let x = b.binary(BinaryOp::Mul, v[0], s)?;
        Ok(vec![b.unary(UnaryOp::Sin, x)?])
    })?;
    kernel("invariant_inner_loops", &[f32s(&[3]), f32s(&[3])], |b, v| {
        let r = b.loop_(fori(4, 1, outer.clone()), &[v[0], v[1]])?;
        Ok(vec![r[0]])
    })
}
