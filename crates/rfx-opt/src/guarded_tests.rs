//! Transcendentals of one argument under different guards: computed once after
//! [`crate::simplify`], with the interpreter's bits.

use rfx_ir::hir::{self, Kernel, Op};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, ArrayData, UnaryOp};

use crate::config::OptConfig;

/// `sin(sqrt(guard(x²)) * 0.5)` and `cos(sqrt(guard'(x²)) * 0.5)` with two thresholds (the
/// guards' constants on either side), a `sin` of a third guard, and a `sin` of an unrelated
/// guarded value that shares nothing.
fn half_angles(dt: &str) -> String {
    format!(
        "kernel k {{
 %x = input x : {dt}[16]
 %y = input y : {dt}[16]
 %t = mul %x, %x : {dt}[16]
 %c1 = const 0.07 : {dt}[]
 %c2 = const 0.046 : {dt}[]
 %c3 = const 0.03 : {dt}[]
 %one = const 1.0 : {dt}[]
 %half = const 0.5 : {dt}[]
 %m1 = lt %t, %c1 : bool[16]
 %m2 = lt %t, %c2 : bool[16]
 %m3 = ge %t, %c3 : bool[16]
 %g1 = select %m1, %one, %t : {dt}[16]
 %r1 = sqrt %g1 : {dt}[16]
 %h1 = mul %r1, %half : {dt}[16]
 %s1 = sin %h1 : {dt}[16]
 %q1 = div %s1, %r1 : {dt}[16]
 %g2 = select %m2, %one, %t : {dt}[16]
 %r2 = sqrt %g2 : {dt}[16]
 %h2 = mul %r2, %half : {dt}[16]
 %co = cos %h2 : {dt}[16]
 %g3 = select %m3, %t, %one : {dt}[16]
 %r3 = sqrt %g3 : {dt}[16]
 %h3 = mul %r3, %half : {dt}[16]
 %s3 = sin %h3 : {dt}[16]
 %s3sq = mul %s3, %s3 : {dt}[16]
 %gy = select %m1, %one, %y : {dt}[16]
 %sy = sin %gy : {dt}[16]
 output a = %q1
 output b = %co
 output c = %s3sq
 output d = %sy
}}"
    )
}

/// The `(op, operand)` of every `sin` and `cos` of `kernel`.
fn trig(kernel: &Kernel) -> Vec<(UnaryOp, usize)> {
    kernel
        .nodes()
        .iter()
        .filter_map(|n| match (&n.op, n.args.as_slice()) {
            (Op::Unary(op @ (UnaryOp::Sin | UnaryOp::Cos)), [x]) => Some((*op, x.index())),
            _ => None,
        })
        .collect()
}

fn inputs(kernel: &Kernel, values: &[f64]) -> Vec<Array> {
    kernel
        .inputs()
        .enumerate()
        .map(|(k, (_, _, ty))| {
            let pick = |i: usize| values[(i * (k + 1) + 3 * k) % values.len()];
            let n = ty.shape.numel();
            let data = match ty.dtype {
                rfx_ir::DType::F32 => ArrayData::F32((0..n).map(|i| pick(i) as f32).collect()),
                _ => ArrayData::F64((0..n).map(pick).collect()),
            };
            Array::new(ty.shape.clone(), data).unwrap()
        })
        .collect()
}

/// Every value's bits, NaN payloads aside.
fn bits(arrays: &[Array]) -> Vec<Option<u64>> {
    arrays
        .iter()
        .flat_map(|a| (0..a.data().len()).map(move |i| a.get(i).unwrap()))
        .map(|s| match s {
            rfx_ir::Scalar::F32(v) => (!v.is_nan()).then_some(u64::from(v.to_bits())),
            rfx_ir::Scalar::F64(v) => (!v.is_nan()).then_some(v.to_bits()),
            other => Some(other.to_bits()),
        })
        .collect()
}

#[test]
fn a_sin_and_a_cos_under_different_guards_read_one_value_and_keep_the_interpreters_bits() {
    for dt in ["f32", "f64"] {
        let before = hir::parse(&half_angles(dt)).unwrap();
        let (after, _) = crate::simplify(&before, &OptConfig::default()).unwrap();
        let ops = trig(&after);
        // sin(x/2) once (the third guard's copy merged), its cos from the same value, and
        // the unrelated sin of a guarded `y` left as it was.
        let sins: Vec<_> = ops.iter().filter(|(op, _)| *op == UnaryOp::Sin).collect();
        let coss: Vec<_> = ops.iter().filter(|(op, _)| *op == UnaryOp::Cos).collect();
        assert_eq!((sins.len(), coss.len()), (2, 1), "{dt}:\n{after}");
        assert!(
            sins.iter().any(|(_, x)| *x == coss[0].1),
            "{dt}: sin and cos of one value:\n{after}"
        );
        let unrelated = sins.iter().find(|(_, x)| *x != coss[0].1).unwrap();
        assert!(
            matches!(after.nodes()[unrelated.1].op, Op::Select),
            "{dt}: the unshared guard stays:\n{after}"
        );
        // Both branches of every guard, its thresholds, and the specials.
        let mut values = vec![
            0.0,
            -0.0,
            1e-12,
            -1e-7,
            0.1,
            0.2144,
            0.2145,
            0.2645,
            0.2646,
            0.17,
            1.0,
            -2.5,
            3.1,
            1e3,
            1e7,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE / 4.0,
        ];
        values.extend((0..40).map(|i| (f64::from(i) - 20.0) * 0.0137));
        let args = inputs(&before, &values);
        let views: Vec<_> = args.iter().map(Array::view).collect();
        let expected = run_hir(&before, &views, Mode::Native).unwrap();
        let got = run_hir(&after, &views, Mode::Native).unwrap();
        assert_eq!(bits(&expected), bits(&got), "{dt}");
    }
}

#[test]
fn guarded_transcendentals_that_share_nothing_or_share_one_value_are_left_alone() {
    // `sin` and `cos` of `gx` already read one value; `cos` of `gy` guards another.
    let text = "kernel k {
 %x = input x : f64[4]
 %y = input y : f64[4]
 %c = const 0.1 : f64[]
 %one = const 1.0 : f64[]
 %m = lt %x, %c : bool[4]
 %gx = select %m, %one, %x : f64[4]
 %gy = select %m, %one, %y : f64[4]
 %s = sin %gx : f64[4]
 %k = cos %gy : f64[4]
 %e = exp %gx : f64[4]
 %k2 = cos %gx : f64[4]
 %r = add %s, %k : f64[4]
 %r2 = add %r, %k2 : f64[4]
 %o = add %r2, %e : f64[4]
 output o = %o
}";
    let kernel = hir::parse(text).unwrap();
    assert!(
        crate::guarded::share_guarded_transcendentals(&kernel)
            .unwrap()
            .is_none()
    );
}
