//! The conformance suite's bounded loops (`Op::Loop`): kernels that every backend compiles
//! through the optimiser and lowering into programs with loops over kernel ranges.
//!
//! A `fori` loop carrying four dtypes at once (with its counter), `while` loops that stop early
//! on a scalar test or on a test that reduces a vector (and run to their maximum when the test
//! stays true), nested loops, loops of no trips, a vector carry whose body reduces it (a mean
//! taken each iteration, in f32, f64 and wrapping i32), a transcendental inside a loop body and
//! histories written one row per iteration (`set_row`, stored as row stores) in `fori` and
//! `while` loops, also a batch's history whose lanes stop at different iterations.
//! The exact cases are checked against the LIR interpreter bit for bit, the transcendental one
//! against the HIR interpreter's `f64` oracle, like every other case.

use rfx_ir::hir::{Builder, Kernel, Loop, ValueId};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Scalar, TensorType, UnaryOp};

type Push<'a> = dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>) + 'a;

fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims.to_vec())
}

/// A kernel with `types` as inputs named `v0, v1, ...` whose outputs `build` returns.
fn kernel(
    name: &str,
    types: &[TensorType],
    build: impl FnOnce(&mut Builder, &[ValueId]) -> Option<Vec<ValueId>>,
) -> Option<Kernel> {
    let mut b = Builder::new(name);
    let inputs: Vec<ValueId> = types
        .iter()
        .enumerate()
        .map(|(i, t)| b.input(format!("v{i}"), t.clone()))
        .collect::<Result<_, _>>()
        .ok()?;
    let outputs = build(&mut b, &inputs)?;
    for (i, v) in outputs.into_iter().enumerate() {
        b.output(format!("o{i}"), v).ok()?;
    }
    b.finish().ok()
}

/// A kernel of `inputs` that runs `spec` on `operands(inputs)` and returns every final carry.
fn looping(
    name: &str,
    inputs: &[TensorType],
    spec: Loop,
    operands: impl FnOnce(&mut Builder, &[ValueId]) -> Option<Vec<ValueId>>,
) -> Option<Kernel> {
    kernel(name, inputs, |b, v| {
        let operands = operands(b, v)?;
        b.loop_(spec, &operands).ok()
    })
}

/// Every loop case.
pub(crate) fn loop_cases(push: &mut Push<'_>) {
    for n in [1, 5, 17] {
        for trips in [0, 1, 7] {
            let name = format!("loop_fori_mixed_n{n}_t{trips}");
            push(name.clone(), fori_mixed(&name, n, trips), None, None);
        }
        for dtype in [DType::F32, DType::F64, DType::I32] {
            let name = format!("loop_mean_carry_{dtype}_n{n}");
            push(name.clone(), mean_carry(&name, dtype, n, 4), None, None);
        }
        let name = format!("loop_while_vector_n{n}");
        push(name.clone(), while_vector(&name, n, 40), None, None);
        let name = format!("loop_nested_n{n}");
        push(name.clone(), nested(&name, n, 3, 4), None, None);
        for dtype in [DType::F32, DType::F64] {
            let name = format!("loop_sin_{dtype}_n{n}");
            push(name.clone(), sine(&name, dtype, n), Some("sin"), Some(1e5));
        }
    }
    for trips in [0, 3, 100] {
        let name = format!("loop_while_scalar_t{trips}");
        push(name.clone(), while_scalar(&name, trips), None, None);
    }
    for (dtype, n, trips) in [
        (DType::F32, 1, 1),
        (DType::F32, 3, 7),
        (DType::F64, 5, 40),
        (DType::I32, 3, 7),
    ] {
        let name = format!("loop_row_history_{dtype}_n{n}_t{trips}");
        push(
            name.clone(),
            row_history(&name, dtype, n, trips, None),
            None,
            None,
        );
    }
    for (dtype, stop) in [(DType::F32, 3), (DType::F64, 9)] {
        let name = format!("loop_row_history_while_{dtype}_stop{stop}");
        push(
            name.clone(),
            row_history(&name, dtype, 3, 7, Some(stop)),
            None,
            None,
        );
    }
    for (dtype, lanes) in [(DType::F32, 3), (DType::F64, 5)] {
        let name = format!("loop_row_history_lanes_{dtype}_b{lanes}");
        push(name.clone(), lane_history(&name, dtype, lanes, 2, 7), None, None);
    }
}

/// A history of a batch whose examples stop at different iterations, as `vmap` of a while
/// loop's recording loop holds it: carries `c: dtype[b, m]`, `t: i32[]`, `h: dtype[trips, b,
/// m]` with the invariant `a: dtype[b, m]`, running while any lane's `t < 2·lane`; per lane
/// `keep = t < 2·lane`, `c' = select(keep, c * a + 1, c)`, `t' = t + 1` and `h' = set_row(h,
/// select(keep, c, h[t]), t)`: the body reads the row it replaces (a row store after that
/// read), and the last lane runs to the maximum.
fn lane_history(name: &str, dtype: DType, lanes: usize, m: usize, trips: u64) -> Option<Kernel> {
    let rows = usize::try_from(trips).ok()?;
    let types = [
        ty(dtype, &[lanes, m]),
        ty(DType::I32, &[]),
        ty(dtype, &[rows, lanes, m]),
        ty(dtype, &[lanes, m]),
    ];
    let keep = |b: &mut Builder, t: ValueId| {
        let lane = b.iota(DType::I32, rfx_ir::Shape::new(vec![lanes]), 0).ok()?;
        let two = b.scalar(Scalar::I32(2));
        let limit = b.binary(BinaryOp::Mul, lane, two).ok()?;
        b.compare(CmpOp::Lt, t, limit).ok()
    };
    let body = kernel("record", &types, |b, v| {
        let (c, t, h, a) = (v[0], v[1], v[2], v[3]);
        let keep = keep(b, t)?;
        let keep = b.reshape(keep, rfx_ir::Shape::new(vec![lanes, 1])).ok()?;
        let ca = b.binary(BinaryOp::Mul, c, a).ok()?;
        let one = b.scalar(Scalar::from_f64(dtype, 1.0));
        let c1 = b.binary(BinaryOp::Add, ca, one).ok()?;
        let c1 = b.select(keep, c1, c).ok()?;
        let step = b.scalar(Scalar::I32(1));
        let t1 = b.binary(BinaryOp::Add, t, step).ok()?;
        let at = b.reshape(t, rfx_ir::Shape::new(vec![1, 1, 1])).ok()?;
        let at = b.broadcast_to(at, rfx_ir::Shape::new(vec![1, lanes, m])).ok()?;
        let old = b.gather(h, at, 0).ok()?;
        let old = b.reshape(old, rfx_ir::Shape::new(vec![lanes, m])).ok()?;
        let row = b.select(keep, c, old).ok()?;
        let h1 = b.set_row(h, row, t).ok()?;
        Some(vec![c1, t1, h1])
    })?;
    let cond = kernel("test", &types, |b, v| {
        let keep = keep(b, v[1])?;
        let count = b.cast(keep, DType::I32).ok()?;
        let count = b.reduce(ReduceOp::Sum, count, &[0], false).ok()?;
        Some(vec![b.cast(count, DType::Bool).ok()?])
    })?;
    let spec = Loop {
        carries: 3,
        trips,
        body,
        cond: Some(cond),
    };
    looping(name, &[ty(dtype, &[lanes, m])], spec, |b, v| {
        let zero = b.scalar(Scalar::I32(0));
        let empty = b.constant(Scalar::from_f64(dtype, 0.0), vec![rows, lanes, m]);
        let half = b.scalar(Scalar::from_f64(dtype, 0.5));
        let a = b.binary(BinaryOp::Mul, v[0], half).ok()?;
        Some(vec![v[0], zero, empty, a])
    })
}

/// Histories written one row per iteration (`set_row`, as reverse mode records carries) over
/// carries `c: dtype[n]`, `t: i32[]`, `h, g: dtype[trips, n]` with the invariant `a: dtype[n]`:
/// `h' = set_row(h, c, t)` (the carry entering the iteration, at the counter), `g' =
/// set_row(g, c * a, t + 1)` (a computed row at a computed index, clamped on the last trip),
/// `c' = c * a + 1`, `t' = t + 1`; with `stop`, a while loop running while `t < stop` (its
/// masked body masks the rows).
fn row_history(name: &str, dtype: DType, n: usize, trips: u64, stop: Option<i32>) -> Option<Kernel> {
    let rows = usize::try_from(trips).ok()?;
    let types = [
        ty(dtype, &[n]),
        ty(DType::I32, &[]),
        ty(dtype, &[rows, n]),
        ty(dtype, &[rows, n]),
        ty(dtype, &[n]),
    ];
    let body = kernel("record", &types, |b, v| {
        let (c, t, h, g, a) = (v[0], v[1], v[2], v[3], v[4]);
        let ca = b.binary(BinaryOp::Mul, c, a).ok()?;
        let one = b.scalar(Scalar::from_f64(dtype, 1.0));
        let c1 = b.binary(BinaryOp::Add, ca, one).ok()?;
        let step = b.scalar(Scalar::I32(1));
        let t1 = b.binary(BinaryOp::Add, t, step).ok()?;
        let h1 = b.set_row(h, c, t).ok()?;
        let g1 = b.set_row(g, ca, t1).ok()?;
        Some(vec![c1, t1, h1, g1])
    })?;
    let cond = match stop {
        Some(stop) => Some(kernel("test", &types, |b, v| {
            let stop = b.scalar(Scalar::I32(stop));
            Some(vec![b.compare(CmpOp::Lt, v[1], stop).ok()?])
        })?),
        None => None,
    };
    let spec = Loop {
        carries: 4,
        trips,
        body,
        cond,
    };
    looping(name, &[ty(dtype, &[n])], spec, |b, v| {
        let zero = b.scalar(Scalar::I32(0));
        let empty = b.constant(Scalar::from_f64(dtype, 0.0), vec![rows, n]);
        let half = b.scalar(Scalar::from_f64(dtype, 0.5));
        let a = b.binary(BinaryOp::Mul, v[0], half).ok()?;
        Some(vec![v[0], zero, empty, empty, a])
    })
}

/// `fori` over carries `x: f32[n]`, `i: i32[]`, `m: f64[n]`, `b: bool[n]` with the invariant
/// `a: f32[n]`: `x' = x * a + f32(i)`, `i' = i + 1`, `m' = max(m, f64(x))`,
/// `b' = b == (x < a)`.
fn fori_mixed(name: &str, n: usize, trips: u64) -> Option<Kernel> {
    let types = [
        ty(DType::F32, &[n]),
        ty(DType::I32, &[]),
        ty(DType::F64, &[n]),
        ty(DType::Bool, &[n]),
        ty(DType::F32, &[n]),
    ];
    let body = kernel("mixed_step", &types, |b, v| {
        let (x, i, m, flag, a) = (v[0], v[1], v[2], v[3], v[4]);
        let xa = b.binary(BinaryOp::Mul, x, a).ok()?;
        let fi = b.cast(i, DType::F32).ok()?;
        let x1 = b.binary(BinaryOp::Add, xa, fi).ok()?;
        let one = b.scalar(Scalar::I32(1));
        let i1 = b.binary(BinaryOp::Add, i, one).ok()?;
        let wide = b.cast(x, DType::F64).ok()?;
        let m1 = b.binary(BinaryOp::Max, m, wide).ok()?;
        let below = b.compare(CmpOp::Lt, x, a).ok()?;
        let f1 = b.compare(CmpOp::Eq, flag, below).ok()?;
        Some(vec![x1, i1, m1, f1])
    })?;
    let spec = Loop {
        carries: 4,
        trips,
        body,
        cond: None,
    };
    let inputs = [ty(DType::F32, &[n]), ty(DType::F64, &[n]), ty(DType::Bool, &[n])];
    looping(name, &inputs, spec, |b, v| {
        let zero = b.scalar(Scalar::I32(0));
        let a = b.unary(UnaryOp::Neg, v[0]).ok()?;
        Some(vec![v[0], zero, v[1], v[2], a])
    })
}

/// A vector carry whose body reduces it: `c' = (c - mean(c)) * 2 + 1` (in i32 the mean is a
/// sum: `c' = c * 3 - sum(c)`, wrapping).
fn mean_carry(name: &str, dtype: DType, n: usize, trips: u64) -> Option<Kernel> {
    let carry = ty(dtype, &[n]);
    let body = kernel("center", std::slice::from_ref(&carry), |b, v| {
        let c = v[0];
        if dtype == DType::I32 {
            let s = b.reduce_all(ReduceOp::Sum, c).ok()?;
            let three = b.scalar(Scalar::I32(3));
            let c3 = b.binary(BinaryOp::Mul, c, three).ok()?;
            return Some(vec![b.binary(BinaryOp::Sub, c3, s).ok()?]);
        }
        let mean = b.reduce_all(ReduceOp::Mean, c).ok()?;
        let d = b.binary(BinaryOp::Sub, c, mean).ok()?;
        let two = b.scalar(Scalar::from_f64(dtype, 2.0));
        let one = b.scalar(Scalar::from_f64(dtype, 1.0));
        let d2 = b.binary(BinaryOp::Mul, d, two).ok()?;
        Some(vec![b.binary(BinaryOp::Add, d2, one).ok()?])
    })?;
    let spec = Loop {
        carries: 1,
        trips,
        body,
        cond: None,
    };
    looping(name, &[carry], spec, |_, v| Some(vec![v[0]]))
}

/// `while sum(v) < 1000` (at most `trips` times): `v' = v * 2 + 1`, `k' = k + 1`, over
/// `v: f32[n]` and the counter `k: i32[]`.
fn while_vector(name: &str, n: usize, trips: u64) -> Option<Kernel> {
    let types = [ty(DType::F32, &[n]), ty(DType::I32, &[])];
    let body = kernel("grow", &types, |b, v| {
        let two = b.scalar(Scalar::F32(2.0));
        let one = b.scalar(Scalar::F32(1.0));
        let v2 = b.binary(BinaryOp::Mul, v[0], two).ok()?;
        let v1 = b.binary(BinaryOp::Add, v2, one).ok()?;
        let step = b.scalar(Scalar::I32(1));
        let k1 = b.binary(BinaryOp::Add, v[1], step).ok()?;
        Some(vec![v1, k1])
    })?;
    let cond = kernel("small", &types, |b, v| {
        let s = b.reduce_all(ReduceOp::Sum, v[0]).ok()?;
        let limit = b.scalar(Scalar::F32(1000.0));
        Some(vec![b.compare(CmpOp::Lt, s, limit).ok()?])
    })?;
    let spec = Loop {
        carries: 2,
        trips,
        body,
        cond: Some(cond),
    };
    looping(name, &[ty(DType::F32, &[n])], spec, |b, v| {
        let zero = b.scalar(Scalar::I32(0));
        Some(vec![v[0], zero])
    })
}

/// `while s < limit` (at most `trips` times): `n' = n + 1`, `s' = s + f64(n')`, from
/// `n = 0`, `s = s0`: stops early for a small limit, at `trips` for a large one.
fn while_scalar(name: &str, trips: u64) -> Option<Kernel> {
    let types = [ty(DType::I32, &[]), ty(DType::F64, &[]), ty(DType::F64, &[])];
    let body = kernel("count", &types, |b, v| {
        let one = b.scalar(Scalar::I32(1));
        let n1 = b.binary(BinaryOp::Add, v[0], one).ok()?;
        let f = b.cast(n1, DType::F64).ok()?;
        Some(vec![n1, b.binary(BinaryOp::Add, v[1], f).ok()?])
    })?;
    let cond = kernel("below", &types, |b, v| {
        Some(vec![b.compare(CmpOp::Lt, v[1], v[2]).ok()?])
    })?;
    let spec = Loop {
        carries: 2,
        trips,
        body,
        cond: Some(cond),
    };
    let inputs = [ty(DType::F64, &[]), ty(DType::F64, &[])];
    looping(name, &inputs, spec, |b, v| {
        let zero = b.scalar(Scalar::I32(0));
        // The limit grows with the input so that random inputs stop at different counts.
        let scale = b.scalar(Scalar::F64(100.0));
        let limit = b.binary(BinaryOp::Mul, v[1], scale).ok()?;
        Some(vec![zero, v[0], limit])
    })
}

/// `outer` times { `y = y + 1`; `inner` times { `y = y * x` } } over `y: f64[n]` with the
/// invariant `x: f64[n]`.
fn nested(name: &str, n: usize, outer: u64, inner: u64) -> Option<Kernel> {
    let types = [ty(DType::F64, &[n]), ty(DType::F64, &[n])];
    let times = kernel("times", &types, |b, v| {
        Some(vec![b.binary(BinaryOp::Mul, v[0], v[1]).ok()?])
    })?;
    let body = kernel("step", &types, |b, v| {
        let one = b.scalar(Scalar::F64(1.0));
        let y1 = b.binary(BinaryOp::Add, v[0], one).ok()?;
        let spec = Loop {
            carries: 1,
            trips: inner,
            body: times,
            cond: None,
        };
        Some(vec![b.loop_(spec, &[y1, v[1]]).ok()?[0]])
    })?;
    let spec = Loop {
        carries: 1,
        trips: outer,
        body,
        cond: None,
    };
    looping(name, &types, spec, |_, v| Some(vec![v[0], v[1]]))
}

/// `while k < 1` (at most 5 times): `c' = sin(c)`, `k' = k + 1`: a transcendental inside a
/// loop body that runs once (one op, so the backend's bound of the oracle holds), in a loop
/// the optimiser cannot unroll.
fn sine(name: &str, dtype: DType, n: usize) -> Option<Kernel> {
    let types = [ty(dtype, &[n]), ty(DType::I32, &[])];
    let body = kernel("sine", &types, |b, v| {
        let one = b.scalar(Scalar::I32(1));
        Some(vec![
            b.unary(UnaryOp::Sin, v[0]).ok()?,
            b.binary(BinaryOp::Add, v[1], one).ok()?,
        ])
    })?;
    let cond = kernel("first", &types, |b, v| {
        let one = b.scalar(Scalar::I32(1));
        Some(vec![b.compare(CmpOp::Lt, v[1], one).ok()?])
    })?;
    let spec = Loop {
        carries: 2,
        trips: 5,
        body,
        cond: Some(cond),
    };
    // Only the float carry is an output: every output of a transcendental case is compared
    // with the oracle in ULP.
    kernel(name, &[ty(dtype, &[n])], |b, v| {
        let zero = b.scalar(Scalar::I32(0));
        Some(vec![b.loop_(spec, &[v[0], zero]).ok()?[0]])
    })
}
