//! The backend conformance suite: one set of kernels every backend must run correctly.
//!
//! Each [`Case`] is a HIR kernel exercising one op (every
//! unary, binary and comparison op on every dtype it accepts, `select`, `clamp`, every cast,
//! every reduction over inner, middle, outer and all axes with and without `keepdims`, every
//! running fold along inner, middle and outer axes both ways, broadcasting, several outputs) at sizes around the vector widths (0, 1, 3, 4, 5, 7, 8, 9, 17,
//! 33, 1000), and bounded loops (`loop_*`: fori and while loops, nested loops, no trips,
//! carries of several dtypes, reductions in bodies and tests). [`check`] runs a compiled case on fresh random inputs (special values included)
//! and compares it with the references: exactly-rounded ops must give the bits of the LIR
//! interpreter; transcendental ops must lie within the backend's documented ULP bound of the
//! `f64` oracle (NaN where the oracle is NaN, the same infinities). Backends instantiate it in
//! their tests with their own lowering and bounds.

use rfx_ir::hir::{Builder, Kernel};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_array};
use rfx_ir::{Array, ArrayData, BinaryOp, CmpOp, DType, ReduceOp, Scalar, ScanOp, TensorType, UnaryOp};

use rfx_lower::{Backend, Compiled, Transcendental, ulps};

/// One conformance kernel.
#[derive(Clone, Debug)]
pub struct Case {
    /// A readable unique name (`sin_f32_n17`).
    pub name: String,
    /// The kernel.
    pub kernel: Kernel,
    /// The op whose bound applies when the case is not exact (`"sin"`), else `None`.
    pub transcendental: Option<&'static str>,
    /// Largest finite input magnitude the case is meant for (`None`: the whole domain), e.g.
    /// trigonometric functions are checked on |x| < 1e5.
    pub domain: Option<f64>,
}

const SIZES: [usize; 11] = [0, 1, 3, 4, 5, 7, 8, 9, 17, 33, 1000];

fn elementwise_kernel(
    name: &str,
    dtype: DType,
    n: usize,
    arity: usize,
    build: &dyn Fn(&mut Builder, &[rfx_ir::hir::ValueId]) -> Option<rfx_ir::hir::ValueId>,
) -> Option<Kernel> {
    let mut b = Builder::new(name);
    let args: Vec<_> = (0..arity)
        .map(|i| b.input(format!("a{i}"), TensorType::new(dtype, [n])))
        .collect::<Result<_, _>>()
        .ok()?;
    let out = build(&mut b, &args)?;
    b.output("out", out).ok()?;
    b.finish().ok()
}

/// Every conformance case.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut push =
        |name: String, kernel: Option<Kernel>, transcendental: Option<&'static str>, domain: Option<f64>| {
            if let Some(kernel) = kernel {
                cases.push(Case {
                    name,
                    kernel,
                    transcendental,
                    domain,
                });
            }
        };
    for dtype in DType::ALL {
        for &op in UnaryOp::ALL {
            if !op.accepts(dtype) {
                continue;
            }
            for n in SIZES {
                let name = format!("{op}_{dtype}_n{n}");
                let k = elementwise_kernel(&name, dtype, n, 1, &|b, a| b.unary(op, a[0]).ok());
                let trig = matches!(op, UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan);
                push(
                    name,
                    k,
                    op.is_transcendental().then_some(op.name()),
                    trig.then_some(1e5),
                );
            }
        }
        for &op in BinaryOp::ALL {
            if !op.accepts(dtype) {
                continue;
            }
            for n in SIZES {
                let name = format!("{op}_{dtype}_n{n}");
                let k = elementwise_kernel(&name, dtype, n, 2, &|b, a| b.binary(op, a[0], a[1]).ok());
                let t = matches!(op, BinaryOp::Pow | BinaryOp::Atan2).then_some(op.name());
                push(name, k, t, None);
            }
        }
        for &op in CmpOp::ALL {
            if !op.accepts(dtype) {
                continue;
            }
            for n in [1, 5, 17] {
                let name = format!("{op}_{dtype}_n{n}");
                push(
                    name.clone(),
                    elementwise_kernel(&name, dtype, n, 2, &|b, a| b.compare(op, a[0], a[1]).ok()),
                    None,
                    None,
                );
            }
        }
        for n in [1, 7, 33] {
            let name = format!("select_{dtype}_n{n}");
            let k = elementwise_kernel(&name, dtype, n, 2, &|b, a| {
                let c = if dtype == DType::Bool {
                    a[0]
                } else {
                    b.compare(CmpOp::Lt, a[0], a[1]).ok()?
                };
                b.select(c, a[0], a[1]).ok()
            });
            push(name, k, None, None);
            if dtype.is_numeric() {
                let name = format!("clamp_{dtype}_n{n}");
                let k = elementwise_kernel(&name, dtype, n, 1, &|b, a| {
                    let lo = b.scalar(Scalar::from_f64(dtype, -1.0));
                    let hi = b.scalar(Scalar::from_f64(dtype, 2.0));
                    b.clamp(a[0], lo, hi).ok()
                });
                push(name, k, None, None);
            }
            for to in DType::ALL {
                let name = format!("cast_{dtype}_to_{to}_n{n}");
                push(
                    name.clone(),
                    elementwise_kernel(&name, dtype, n, 1, &|b, a| b.cast(a[0], to).ok()),
                    None,
                    None,
                );
            }
        }
        if dtype.is_numeric() {
            for &op in ReduceOp::ALL {
                if !op.accepts(dtype) {
                    continue;
                }
                for (shape, axes) in [
                    (vec![1000], vec![0]),
                    (vec![0], vec![0]),
                    (vec![3, 17], vec![1]),
                    (vec![17, 3], vec![0]),
                    (vec![4, 9, 5], vec![1]),
                    (vec![4, 9, 5], vec![0, 2]),
                    (vec![4, 9, 5], vec![0, 1, 2]),
                    (vec![2, 1, 6], vec![1]),
                    (vec![3, 0, 8], vec![1]),
                    (vec![5, 11, 3], vec![0, 2]),
                    // Short rows reduced to one value (one sequential accumulator, whose
                    // points the CPU evaluates a vector at a time, adding the lanes in order).
                    (vec![5], vec![0]),
                    (vec![7], vec![0]),
                    (vec![11], vec![0]),
                    (vec![3, 4], vec![0, 1]),
                ] {
                    for keepdims in [false, true] {
                        let dims = dims_name(&shape);
                        let axes_s: String =
                            axes.iter().map(ToString::to_string).collect::<Vec<_>>().join("");
                        let name = format!("reduce_{op}_{dtype}_{dims}_axes{axes_s}_keep{keepdims}");
                        let mut b = Builder::new(name.clone());
                        let k = (|| {
                            let x = b.input("x", TensorType::new(dtype, shape.clone())).ok()?;
                            let r = b.reduce(op, x, &axes, keepdims).ok()?;
                            b.output("out", r).ok()?;
                            b.finish().ok()
                        })();
                        push(name, k, None, None);
                    }
                }
            }
        }
    }
    // A cost and its gradient: a short row's elementwise values stored and reduced to one value
    // in the same loop.
    for dtype in [DType::F32, DType::F64] {
        for n in [5usize, 7, 12] {
            let name = format!("store_and_sum_{dtype}_n{n}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, [n])).ok()?;
                let y = b.input("y", TensorType::new(dtype, [n])).ok()?;
                let xx = b.binary(BinaryOp::Mul, x, x).ok()?;
                let e = b.binary(BinaryOp::Sub, xx, y).ok()?;
                let s = b.reduce(ReduceOp::Sum, e, &[0], false).ok()?;
                b.output("terms", e).ok()?;
                b.output("sum", s).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
    // Broadcasting and several outputs sharing inputs.
    for dtype in [DType::F32, DType::F64, DType::I32] {
        let name = format!("broadcast_multi_output_{dtype}");
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [3, 1, 5])).ok()?;
            let y = b.input("y", TensorType::new(dtype, [4, 1])).ok()?;
            let s = b.binary(BinaryOp::Add, x, y).ok()?;
            let p = b.binary(BinaryOp::Mul, s, y).ok()?;
            let m = b.binary(BinaryOp::Max, x, p).ok()?;
            let r = b.reduce(ReduceOp::Sum, p, &[1], false).ok()?;
            b.output("sum", s).ok()?;
            b.output("prod", p).ok()?;
            b.output("max", m).ok()?;
            b.output("rowsum", r).ok()?;
            b.finish().ok()
        })();
        push(name, k, None, None);
    }
    index_cases(&mut push);
    window_cases(&mut push);
    gather_cases(&mut push);
    literal_cases(&mut push);
    product_cases(&mut push);
    block_cases(&mut push);
    block_variant_cases(&mut push);
    scan_cases(&mut push);
    crate::loop_cases::loop_cases(&mut push);
    cases
}

/// Every scan (the running folds and the linear recurrence) on every numeric dtype along
/// inner, middle and outer axes, both ways, at
/// lengths around the vector widths (0, 1, 7, 17 and 1000 points to a line) and over enough
/// lines for vectors of them (37 and 70); and scans fused
/// with their operand's and their consumers' elementwise work (an integrated velocity, a
/// running cost's value and its cost-to-go, a low-pass filter and its discounted
/// cost-to-go), a scan of a scan, and a reduction of a scan.
fn scan_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for &op in ScanOp::ALL {
            for (shape, axis, reverse) in [
                (vec![1000], 0, false),
                (vec![0], 0, true),
                (vec![1], 0, false),
                (vec![7], 0, true),
                (vec![3, 17], 1, false),
                (vec![17, 3], 0, true),
                (vec![4, 9, 5], 1, true),
                (vec![2, 1, 6], 1, false),
                // Rows enough for vectors of rows: groups of several vectors, single vectors
                // and a ragged end, rows apart (batch-major) and neighbouring (time-major).
                (vec![37, 9], 1, false),
                (vec![9, 37], 0, true),
                (vec![70, 5], 1, true),
            ] {
                let dims = dims_name(&shape);
                let way = if reverse { "rev" } else { "fwd" };
                let name = format!("scan_{op}_{dtype}_{dims}_axis{axis}_{way}");
                let mut b = Builder::new(name.clone());
                let k = (|| {
                    let x = b.input("x", TensorType::new(dtype, shape.clone())).ok()?;
                    let s = if op == ScanOp::Linear {
                        // A float coefficient `a / (|a| + 1)` lies in (-1, 1) (NaN for NaN
                        // and infinities), so lines decay rather than overflow, and is computed
                        // in the scan's kernel; an i32 one is drawn whole (products wrap).
                        let a = b.input("a", TensorType::new(dtype, shape.clone())).ok()?;
                        let coef = if dtype.is_float() {
                            let one = b.scalar(Scalar::from_f64(dtype, 1.0));
                            let size = b.unary(UnaryOp::Abs, a).ok()?;
                            let size = b.binary(BinaryOp::Add, size, one).ok()?;
                            b.binary(BinaryOp::Div, a, size).ok()?
                        } else {
                            a
                        };
                        b.linrec(x, coef, axis, reverse).ok()?
                    } else {
                        b.scan(op, x, axis, reverse).ok()?
                    };
                    b.output("out", s).ok()?;
                    b.finish().ok()
                })();
                push(name, k, None, None);
            }
        }
    }
    for dtype in [DType::F32, DType::F64] {
        for (steps, rows) in [(20usize, 1usize), (9, 33), (1000, 3)] {
            // Positions from velocities (`p0 + Σ v dt` along the time axis), the final
            // positions, and the remaining cost from each step (a reverse running sum).
            let name = format!("scan_fused_{dtype}_{rows}x{steps}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let v = b.input("v", TensorType::new(dtype, [rows, steps])).ok()?;
                let p0 = b.input("p0", TensorType::new(dtype, [rows, 1])).ok()?;
                let dt = b.scalar(Scalar::from_f64(dtype, 0.05));
                let step = b.binary(BinaryOp::Mul, v, dt).ok()?;
                let travelled = b.scan(ScanOp::Sum, step, 1, false).ok()?;
                let p = b.binary(BinaryOp::Add, travelled, p0).ok()?;
                let cost = b.binary(BinaryOp::Mul, p, p).ok()?;
                let to_go = b.scan(ScanOp::Sum, cost, 1, true).ok()?;
                let peak = b.scan(ScanOp::Max, to_go, 1, true).ok()?;
                let twice = b.scan(ScanOp::Sum, travelled, 1, false).ok()?;
                let total = b.reduce(ReduceOp::Sum, p, &[1], false).ok()?;
                b.output("p", p).ok()?;
                b.output("to_go", to_go).ok()?;
                b.output("peak", peak).ok()?;
                b.output("twice", twice).ok()?;
                b.output("total", total).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
            // A low-pass filter over each row (`y = 0.9 y + 0.1 x`), the discounted
            // cost-to-go of its squared output (`g = y² + 0.95 g` from the end), and the
            // filter's output kept too.
            let name = format!("scan_lowpass_{dtype}_{rows}x{steps}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, [rows, steps])).ok()?;
                let gain = b.scalar(Scalar::from_f64(dtype, 0.1));
                let decay = b.constant(Scalar::from_f64(dtype, 0.9), vec![rows, steps]);
                let discount = b.constant(Scalar::from_f64(dtype, 0.95), vec![rows, steps]);
                let driven = b.binary(BinaryOp::Mul, x, gain).ok()?;
                let y = b.linrec(driven, decay, 1, false).ok()?;
                let cost = b.binary(BinaryOp::Mul, y, y).ok()?;
                let to_go = b.linrec(cost, discount, 1, true).ok()?;
                b.output("y", y).ok()?;
                b.output("to_go", to_go).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
}

/// Blocks per point: nine values computed per point of `[n]`, concatenated into `[n, 9]`,
/// reshaped to `[n, 3, 3]` and scaled by a per-point factor, stored twice (a block consumer
/// that lowering folds into the kernel of its values, each block position written out).
fn block_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for dtype in [DType::F32, DType::F64] {
        for n in [3, 17, 33] {
            let name = format!("block_per_point_{dtype}_n{n}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, [n])).ok()?;
                let y = b.input("y", TensorType::new(dtype, [n])).ok()?;
                let d = b.input("d", TensorType::new(dtype, [n])).ok()?;
                let values = [
                    b.binary(BinaryOp::Mul, x, y).ok()?,
                    b.binary(BinaryOp::Add, x, y).ok()?,
                    b.binary(BinaryOp::Sub, x, y).ok()?,
                    b.binary(BinaryOp::Mul, x, x).ok()?,
                    b.unary(UnaryOp::Neg, y).ok()?,
                    b.binary(BinaryOp::Div, x, y).ok()?,
                    b.binary(BinaryOp::Sub, y, x).ok()?,
                    b.binary(BinaryOp::Max, x, y).ok()?,
                    b.binary(BinaryOp::Add, x, x).ok()?,
                ];
                let position = b.iota(dtype, [9], 0).ok()?;
                let mut whole = None;
                for (i, v) in values.into_iter().enumerate() {
                    let column = b.reshape(v, [n, 1]).ok()?;
                    let part = b.pad(column, &[0, i], [n, 9]).ok()?;
                    whole = Some(match whole {
                        None => part,
                        Some(before) => {
                            let at = b.constant(Scalar::from_f64(dtype, i as f64), []);
                            let here = b.compare(CmpOp::Ge, position, at).ok()?;
                            b.select(here, part, before).ok()?
                        }
                    });
                }
                let block = b.reshape(whole?, [n, 3, 3]).ok()?;
                let scale = b.reshape(d, [n, 1, 1]).ok()?;
                let scaled = b.binary(BinaryOp::Mul, block, scale).ok()?;
                let negated = b.unary(UnaryOp::Neg, scaled).ok()?;
                b.output("scaled", scaled).ok()?;
                b.output("negated", negated).ok()?;
                b.output("first", values[0]).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
}

/// Blocks per point around the block fold's limits: `i32` and `f32`/`f64` blocks of `r × c`
/// values per point of `[n]` (`n` 1 included; 64 positions, the most folded, and 65), scaled
/// and negated, and a `bool` block of their signs.
fn block_variant_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for dtype in [DType::I32, DType::F32, DType::F64] {
        for (n, r, c) in [(1, 3, 3), (5, 2, 3), (4, 8, 8), (3, 5, 13)] {
            let name = format!("block_variant_{dtype}_n{n}_{r}x{c}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, [n])).ok()?;
                let y = b.input("y", TensorType::new(dtype, [n])).ok()?;
                let d = b.input("d", TensorType::new(dtype, [n])).ok()?;
                let ops = [
                    BinaryOp::Mul,
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Max,
                    BinaryOp::Min,
                ];
                let position = b.iota(dtype, [r * c], 0).ok()?;
                let mut whole = None;
                for i in 0..r * c {
                    let (lhs, rhs) = if i % 2 == 0 { (x, y) } else { (y, x) };
                    let v = b.binary(ops[i % ops.len()], lhs, rhs).ok()?;
                    let column = b.reshape(v, [n, 1]).ok()?;
                    let part = b.pad(column, &[0, i], [n, r * c]).ok()?;
                    whole = Some(match whole {
                        None => part,
                        Some(before) => {
                            let at = b.constant(Scalar::from_f64(dtype, i as f64), []);
                            let here = b.compare(CmpOp::Ge, position, at).ok()?;
                            b.select(here, part, before).ok()?
                        }
                    });
                }
                let block = b.reshape(whole?, [n, r, c]).ok()?;
                let scale = b.reshape(d, [n, 1, 1]).ok()?;
                let scaled = b.binary(BinaryOp::Mul, block, scale).ok()?;
                let negated = b.unary(UnaryOp::Neg, scaled).ok()?;
                let zeros = b.constant(Scalar::from_f64(dtype, 0.0), [n, r, c]);
                let positive = b.compare(CmpOp::Gt, block, zeros).ok()?;
                b.output("scaled", scaled).ok()?;
                b.output("negated", negated).ok()?;
                b.output("positive", positive).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
}

/// Small matrix products `(a[:, :, None] * b[None]).sum(1)`, also with `b` transposed, at
/// shapes around the vector widths (ragged column counts, fewer columns than a vector, rows
/// short enough for one sequential accumulator and longer), and a kernel that stores a product
/// and reduces it in the same loop nest.
fn product_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for (m, k, n) in [
            (1, 5, 16),
            (2, 3, 5),
            (3, 3, 3),
            (4, 4, 4),
            (5, 6, 7),
            (6, 6, 6),
            (3, 12, 9),
            (8, 8, 8),
            (2, 20, 6),
        ] {
            for transposed in [false, true] {
                let name = format!(
                    "matmul_{dtype}_{}{}",
                    dims_name(&[m, k, n]),
                    if transposed { "_bt" } else { "" }
                );
                let mut b = Builder::new(name.clone());
                let kernel = (|| {
                    let x = b.input("a", TensorType::new(dtype, [m, k])).ok()?;
                    let y = if transposed {
                        let y = b.input("b", TensorType::new(dtype, [n, k])).ok()?;
                        b.transpose(y, &[1, 0]).ok()?
                    } else {
                        b.input("b", TensorType::new(dtype, [k, n])).ok()?
                    };
                    let x3 = b.reshape(x, [m, k, 1]).ok()?;
                    let y3 = b.reshape(y, [1, k, n]).ok()?;
                    let p = b.binary(BinaryOp::Mul, x3, y3).ok()?;
                    let r = b.reduce(ReduceOp::Sum, p, &[1], false).ok()?;
                    b.output("out", r).ok()?;
                    b.finish().ok()
                })();
                push(name, kernel, None, None);
            }
        }
        let name = format!("store_and_reduce_{dtype}");
        let mut b = Builder::new(name.clone());
        let kernel = (|| {
            let x = b.input("x", TensorType::new(dtype, [4, 6, 10])).ok()?;
            let y = b.binary(BinaryOp::Mul, x, x).ok()?;
            let r = b.reduce(ReduceOp::Sum, y, &[1], false).ok()?;
            b.output("square", y).ok()?;
            b.output("sum", r).ok()?;
            b.finish().ok()
        })();
        push(name, kernel, None, None);
    }
}

/// Literal data (special values included, drawn like inputs): read directly, combined with an
/// input of its shape, transposed, broadcast into larger domains, as the constant matrix of a
/// matrix-vector product (a reduction), empty, and long enough for every vector and tile path.
fn literal_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    let mut rng = TestRng::new(0x0011_e2a1);
    for dtype in DType::ALL {
        for (shape, x_shape, perm) in [
            (vec![3, 17], vec![3, 17], None),
            (vec![3, 17], vec![17, 3], Some(vec![1, 0])),
            (vec![5], vec![4, 9, 5], None),
            (vec![9, 1], vec![4, 9, 5], None),
            (vec![1000], vec![1000], None),
            (vec![0, 3], vec![0, 3], None),
        ] {
            let dims = dims_name(&shape);
            let t = if perm.is_some() { "_transposed" } else { "" };
            let name = format!("literal_{dtype}_{dims}{t}");
            let value = random_array(&mut rng, &TensorType::new(dtype, shape), 0.15);
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, x_shape)).ok()?;
                let mut c = b.literal(&value);
                if let Some(perm) = &perm {
                    c = b.transpose(c, perm).ok()?;
                }
                let r = match dtype {
                    DType::Bool => b.binary(BinaryOp::And, c, x).ok()?,
                    _ => b.binary(BinaryOp::Sub, x, c).ok()?,
                };
                b.output("out", r).ok()?;
                b.output("data", c).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
    for dtype in [DType::F32, DType::F64, DType::I32] {
        // `F x` with a constant 6x6 `F`: a product broadcast over rows, summed along them.
        let name = format!("literal_matvec_{dtype}");
        let f = random_array(&mut rng, &TensorType::new(dtype, [6, 6]), 0.0);
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [6])).ok()?;
            let c = b.literal(&f);
            let p = b.binary(BinaryOp::Mul, c, x).ok()?;
            let r = b.reduce(ReduceOp::Sum, p, &[1], false).ok()?;
            b.output("out", r).ok()?;
            b.finish().ok()
        })();
        push(name, k, None, None);
    }
}

/// `iota` and `transpose`: indices broadcast into larger domains, transposes of inputs (a load
/// with permuted strides), of computed values (stored, then read back), of transposes and of
/// an `iota`, and the identity matrix built from two indices, as Jacobian kernels build it.
fn index_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for (shape, axis, x_shape) in [
            (vec![1000], 0, vec![1000]),
            (vec![3, 17], 0, vec![17]),
            (vec![3, 17], 1, vec![3, 1]),
            (vec![4, 9, 5], 1, vec![4, 9, 5]),
            (vec![2, 1, 6], 1, vec![6]),
            // Rows long enough for the CPU's four-vector steps, with a ragged end: the column
            // index is carried from step to step.
            (vec![3, 37], 1, vec![37]),
        ] {
            let dims = dims_name(&shape);
            let name = format!("iota_{dtype}_{dims}_axis{axis}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, x_shape)).ok()?;
                let i = b.iota(dtype, shape, axis).ok()?;
                let r = b.binary(BinaryOp::Add, i, x).ok()?;
                b.output("out", r).ok()?;
                b.output("index", i).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
        for n in [7usize, 19] {
            let name = format!("identity_{dtype}_n{n}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, [n, n])).ok()?;
                let rows = b.iota(dtype, [n, n], 0).ok()?;
                let cols = b.iota(dtype, [n, n], 1).ok()?;
                let eye = b.compare(CmpOp::Eq, rows, cols).ok()?;
                let eye = b.cast(eye, dtype).ok()?;
                let r = b.binary(BinaryOp::Mul, eye, x).ok()?;
                b.output("out", r).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
    for dtype in DType::ALL {
        for (shape, perm) in [
            (vec![3, 17], vec![1, 0]),
            (vec![4, 9, 5], vec![2, 0, 1]),
            (vec![4, 9, 5], vec![0, 2, 1]),
            (vec![1, 6, 1], vec![2, 1, 0]),
            (vec![0, 3], vec![1, 0]),
        ] {
            let dims = dims_name(&shape);
            let p: String = perm.iter().map(ToString::to_string).collect();
            let name = format!("transpose_{dtype}_{dims}_perm{p}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, shape)).ok()?;
                let t = b.transpose(x, &perm).ok()?;
                b.output("out", t).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
    }
    for dtype in [DType::F32, DType::F64, DType::I32] {
        // A transpose of a computed value, added to a broadcast input and reduced.
        let name = format!("transpose_computed_{dtype}");
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [5, 33])).ok()?;
            let y = b.input("y", TensorType::new(dtype, [5])).ok()?;
            let s = b.binary(BinaryOp::Mul, x, x).ok()?;
            let t = b.transpose(s, &[1, 0]).ok()?;
            let r = b.binary(BinaryOp::Sub, t, y).ok()?;
            let sum = b.reduce(ReduceOp::Sum, t, &[0], false).ok()?;
            b.output("out", r).ok()?;
            b.output("colsum", sum).ok()?;
            b.finish().ok()
        })();
        push(name, k, None, None);
        // Transposes of a transpose and of an iota.
        let name = format!("transpose_chain_{dtype}");
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [4, 9, 5])).ok()?;
            let t = b.transpose(x, &[1, 2, 0]).ok()?;
            let t = b.transpose(t, &[2, 0, 1]).ok()?;
            let i = b.iota(dtype, [4, 9, 5], 2).ok()?;
            let i = b.transpose(i, &[2, 0, 1]).ok()?;
            let i = b.transpose(i, &[1, 2, 0]).ok()?;
            let r = b.binary(BinaryOp::Add, t, i).ok()?;
            b.output("out", r).ok()?;
            b.finish().ok()
        })();
        push(name, k, None, None);
    }
}

/// Windows and paddings: of inputs, of computed values and of `iota`s, an element taken out
/// (`x[2]`), a concatenation, and both at sizes around the vector widths and with empty sides.
fn window_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for dtype in DType::ALL {
        let numeric = dtype.is_numeric();
        // Combines two values of `dtype`: `sub` for numbers, `ne` cast back for bools.
        let combine = |b: &mut Builder, x, y| -> Option<rfx_ir::hir::ValueId> {
            if numeric {
                b.binary(BinaryOp::Sub, x, y).ok()
            } else {
                b.binary(BinaryOp::Or, x, y).ok()
            }
        };
        for (shape, starts, window) in [
            (vec![6, 33], vec![1, 3], vec![4, 29]),
            (vec![9], vec![4], vec![5]),
            (vec![17], vec![0], vec![17]),
            (vec![5, 4, 3], vec![1, 0, 2], vec![3, 4, 1]),
            (vec![4, 6], vec![2, 6], vec![2, 0]),
        ] {
            let name = format!("slice_{dtype}_{}_at{}", dims_name(&shape), dims_name(&starts));
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, shape.clone())).ok()?;
                let s = b.slice(x, &starts, window.clone()).ok()?;
                b.output("out", s).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
            let name = format!("pad_{dtype}_{}_at{}", dims_name(&window), dims_name(&starts));
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let x = b.input("x", TensorType::new(dtype, window.clone())).ok()?;
                let p = b.pad(x, &starts, shape.clone()).ok()?;
                b.output("out", p).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
        // Two windows of one input combined, a window of a computed value, of an `iota`, and
        // one row taken out and broadcast back.
        let name = format!("slice_computed_{dtype}");
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [6, 33])).ok()?;
            let a = b.slice(x, &[1, 3], [4, 29]).ok()?;
            let c = b.slice(x, &[2, 0], [4, 29]).ok()?;
            let both = combine(&mut b, a, c)?;
            let sq = combine(&mut b, x, x)?;
            let sq = combine(&mut b, sq, x)?;
            let w = b.slice(sq, &[2, 4], [4, 29]).ok()?;
            let r = combine(&mut b, both, w)?;
            let row = b.slice(x, &[2, 0], [1, 33]).ok()?;
            let row = b.reshape(row, [33]).ok()?;
            let spread = combine(&mut b, x, row)?;
            b.output("out", r).ok()?;
            b.output("spread", spread).ok()?;
            if numeric {
                let i = b.iota(dtype, [6, 33], 1).ok()?;
                let i = b.slice(i, &[1, 3], [4, 29]).ok()?;
                let ri = combine(&mut b, a, i)?;
                b.output("iota", ri).ok()?;
            }
            b.finish().ok()
        })();
        push(name, k, None, None);
        // A concatenation along the last axis (pads summed or or-ed), padding a computed value,
        // and a pad read where it is reduced.
        let name = format!("concat_{dtype}");
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [5, 3])).ok()?;
            let y = b.input("y", TensorType::new(dtype, [5, 6])).ok()?;
            let px = b.pad(x, &[0, 0], [5, 9]).ok()?;
            let py = b.pad(y, &[0, 3], [5, 9]).ok()?;
            let cat = if numeric {
                b.binary(BinaryOp::Add, px, py).ok()?
            } else {
                b.binary(BinaryOp::Or, px, py).ok()?
            };
            let yy = combine(&mut b, y, y)?;
            let pyy = b.pad(yy, &[1, 2], [7, 9]).ok()?;
            b.output("cat", cat).ok()?;
            b.output("padded", pyy).ok()?;
            if numeric && dtype != DType::I32 {
                let total = b.reduce(ReduceOp::Sum, pyy, &[1], false).ok()?;
                b.output("rows", total).ok()?;
            }
            b.finish().ok()
        })();
        push(name, k, None, None);
    }
}

/// An index into `n` rows computed from a random input `at` (floats in [-4, 4], `i32` in
/// [-20, 20]): `at * scale + n / 2`, so that indices fall inside the table, below it and past
/// it (and NaN and the infinities, among a float's special values).
fn spread_index(b: &mut Builder, at: rfx_ir::hir::ValueId, n: usize) -> Option<rfx_ir::hir::ValueId> {
    let dtype = b.value_type(at).ok()?.dtype;
    let (scale, middle) = match dtype {
        DType::I32 => ((n / 24).max(1) as f64, (n / 2) as f64),
        _ => ((n as f64 / 6.0).max(0.5), n as f64 / 2.0),
    };
    let scale = b.scalar(Scalar::from_f64(dtype, scale));
    let middle = b.scalar(Scalar::from_f64(dtype, middle));
    let scaled = b.binary(BinaryOp::Mul, at, scale).ok()?;
    b.binary(BinaryOp::Add, scaled, middle).ok()
}

/// Table lookups: one-axis tables of every dtype by `i32`, `f32` and `f64` indices at sizes
/// around the vector widths (one row, empty lookups); rows and columns of a matrix; a computed
/// table; a lookup in a concatenation and in a reduction.
fn gather_cases(push: &mut dyn FnMut(String, Option<Kernel>, Option<&'static str>, Option<f64>)) {
    for table_dtype in DType::ALL {
        for index_dtype in [DType::I32, DType::F32, DType::F64] {
            for (n, m) in [(1, 5), (7, 17), (33, 1000), (300, 9), (7, 0)] {
                let name = format!("gather_{table_dtype}_by_{index_dtype}_t{n}_m{m}");
                let mut b = Builder::new(name.clone());
                let k = (|| {
                    let table = b.input("table", TensorType::new(table_dtype, [n])).ok()?;
                    let at = b.input("at", TensorType::new(index_dtype, [m])).ok()?;
                    let index = spread_index(&mut b, at, n)?;
                    let g = b.gather(table, index, 0).ok()?;
                    b.output("out", g).ok()?;
                    b.finish().ok()
                })();
                push(name, k, None, None);
            }
        }
    }
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for index_dtype in [DType::I32, DType::F64] {
            // Rows of a [5, 7] table and columns of it, by an index read along the other axis
            // with a stride (a transposed input).
            let name = format!("gather_matrix_{dtype}_by_{index_dtype}");
            let mut b = Builder::new(name.clone());
            let k = (|| {
                let table = b.input("table", TensorType::new(dtype, [5, 7])).ok()?;
                let rows_at = b.input("rows_at", TensorType::new(index_dtype, [3, 7])).ok()?;
                let cols_at = b.input("cols_at", TensorType::new(index_dtype, [9, 5])).ok()?;
                let rows_index = spread_index(&mut b, rows_at, 5)?;
                let rows = b.gather(table, rows_index, 0).ok()?;
                let cols_at = b.transpose(cols_at, &[1, 0]).ok()?;
                let cols_index = spread_index(&mut b, cols_at, 7)?;
                let cols = b.gather(table, cols_index, 1).ok()?;
                b.output("rows", rows).ok()?;
                b.output("cols", cols).ok()?;
                b.finish().ok()
            })();
            push(name, k, None, None);
        }
        // A table computed in the kernel (stored first), a lookup placed in a concatenation,
        // and one summed over rows.
        let name = format!("gather_computed_{dtype}");
        let mut b = Builder::new(name.clone());
        let k = (|| {
            let x = b.input("x", TensorType::new(dtype, [9])).ok()?;
            let at = b.input("at", TensorType::new(DType::I32, [4, 6])).ok()?;
            let y = b.input("y", TensorType::new(dtype, [4, 3])).ok()?;
            let table = b.binary(BinaryOp::Mul, x, x).ok()?;
            let table = b.broadcast_to(table, [6, 9]).ok()?;
            let table = b.transpose(table, &[1, 0]).ok()?;
            let index = spread_index(&mut b, at, 9)?;
            let g = b.gather(table, index, 0).ok()?;
            let pg = b.pad(g, &[0, 0], [4, 9]).ok()?;
            let py = b.pad(y, &[0, 6], [4, 9]).ok()?;
            let cat = b.binary(BinaryOp::Add, pg, py).ok()?;
            let rows = b.reduce(ReduceOp::Sum, g, &[1], false).ok()?;
            b.output("cat", cat).ok()?;
            b.output("rows", rows).ok()?;
            b.finish().ok()
        })();
        push(name, k, None, None);
    }
}

/// `[4, 9, 5]` as `4x9x5`, for case names.
fn dims_name(shape: &[usize]) -> String {
    shape
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// Random inputs for a case: special values mixed in, trigonometric inputs kept in their domain.
pub fn inputs(case: &Case, seed: u64) -> Vec<Array> {
    let mut rng = TestRng::new(seed);
    case.kernel
        .inputs()
        .map(|(_, _, ty)| {
            let a = random_array(&mut rng, ty, 0.15);
            match (case.domain, a.data()) {
                (Some(limit), ArrayData::F32(v)) => {
                    let v = v
                        .iter()
                        .map(|&x| {
                            if x.is_finite() && f64::from(x).abs() > limit {
                                x.signum() * 3.0
                            } else {
                                x
                            }
                        })
                        .collect();
                    Array::new(ty.shape.clone(), ArrayData::F32(v)).unwrap_or(a)
                }
                (Some(limit), ArrayData::F64(v)) => {
                    let v = v
                        .iter()
                        .map(|&x| {
                            if x.is_finite() && x.abs() > limit {
                                x.signum() * 3.0
                            } else {
                                x
                            }
                        })
                        .collect();
                    Array::new(ty.shape.clone(), ArrayData::F64(v)).unwrap_or(a)
                }
                _ => a,
            }
        })
        .collect()
}

/// Where `backend` does not document `bound` ([`Backend::ulp_bound`]) for every
/// transcendental op in `f32` and `f64`, or documents one for a call of the wrong arity or of
/// `i32`: one line each, empty when its stated bound is the one its conformance run asserts.
pub fn stated_bound_differences(backend: &dyn Backend, bound: u64) -> Vec<String> {
    let ops = UnaryOp::ALL
        .iter()
        .filter_map(|&u| Transcendental::unary(u))
        .chain(BinaryOp::ALL.iter().filter_map(|&b| Transcendental::binary(b)));
    let mut differences = Vec::new();
    for op in ops {
        let args = vec![0.5; op.arity()];
        for dtype in [DType::F32, DType::F64] {
            let stated = backend.ulp_bound(op, dtype, &args);
            if stated != Some(bound) {
                differences.push(format!("{} {dtype}: {stated:?}, not Some({bound})", op.name()));
            }
        }
        for (dtype, args, what) in [
            (DType::F32, &[][..], "no operands"),
            (DType::I32, &args[..], "i32"),
        ] {
            if let Some(stated) = backend.ulp_bound(op, dtype, args) {
                differences.push(format!("{} with {what}: Some({stated}), not None", op.name()));
            }
        }
    }
    differences
}

/// What one case gave.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case.
    pub name: String,
    /// Largest ULP error against the oracle (transcendental cases; 0 for exact ones).
    pub max_ulps: u64,
    /// `None` when the case passed; otherwise what was wrong.
    pub failure: Option<String>,
}

/// Runs `compiled` (made from `lir`, the case's lowered program) on fresh inputs and compares:
/// exact cases bit for bit (any NaN matching any NaN) with the LIR interpreter, transcendental
/// cases within `bound` ULP of the `f64` oracle.
pub fn check(case: &Case, lir: &LirProgram, compiled: &dyn Compiled, bound: u64, seed: u64) -> CaseResult {
    let inputs = inputs(case, seed);
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let fail = |msg: String| CaseResult {
        name: case.name.clone(),
        max_ulps: 0,
        failure: Some(msg),
    };
    let outputs = match compiled.run_to_new(&views) {
        Ok(outputs) => outputs,
        Err(e) => return fail(format!("run failed: {e}")),
    };
    let mut max_ulps = 0;
    if case.transcendental.is_none() {
        let expected = match run_lir(lir, &views, Mode::Native) {
            Ok(e) => e,
            Err(e) => return fail(format!("interpreter failed: {e}")),
        };
        for (e, g) in expected.iter().zip(&outputs) {
            for i in 0..e.data().len() {
                let (x, y) = (e.get(i), g.get(i));
                let same = x == y
                    || x.zip(y)
                        .is_some_and(|(x, y)| x.to_f64().is_nan() && y.to_f64().is_nan());
                if !same {
                    return fail(format!(
                        "element {i}: expected {x:?}, got {y:?} (input {:?})",
                        inputs.first().and_then(|a| a.get(i))
                    ));
                }
            }
        }
    } else {
        let oracle = match run_hir(&case.kernel, &views, Mode::Oracle) {
            Ok(o) => o,
            Err(e) => return fail(format!("oracle failed: {e}")),
        };
        for (o, g) in oracle.iter().zip(&outputs) {
            for i in 0..o.data().len() {
                let (want, got) = (
                    o.get(i).map_or(f64::NAN, Scalar::to_f64),
                    g.get(i).map_or(f64::NAN, Scalar::to_f64),
                );
                let d = ulps(got, want, g.dtype());
                if d > bound {
                    let ins: Vec<_> = inputs.iter().map(|a| a.get(i)).collect();
                    return fail(format!(
                        "element {i}: oracle {want:e}, got {got:e} ({d} ULP > {bound}) for inputs {ins:?}"
                    ));
                }
                max_ulps = max_ulps.max(d);
            }
        }
    }
    CaseResult {
        name: case.name.clone(),
        max_ulps,
        failure: None,
    }
}
