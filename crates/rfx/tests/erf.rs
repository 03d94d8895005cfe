//! `erf` end to end on the CPU: traced (`Tensor::erf`) and from an expression, in `f32` and
//! `f64`, against Python's `math.erf` (the table `rfx-ir/tests/data/erf.txt`, each value
//! checked against mpmath when it was generated), and its derivative against central finite
//! differences and the closed form `2/√π e^(−x²)`.

use rfx::expr::{Signature, compile};
use rfx::{Array, Tensor};

/// `(x, erf x)` pairs of the table, in `f64` and in `f32`.
type Pairs = (Vec<(f64, f64)>, Vec<(f32, f32)>);

/// `(x, erf x)` in `f64` and in `f32` from the table.
fn table() -> Pairs {
    let text = include_str!("../../rfx-ir/tests/data/erf.txt");
    let mut f64s = Vec::new();
    let mut f32s = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let b64 = |s: &str| f64::from_bits(u64::from_str_radix(s, 16).expect("hex"));
        let b32 = |s: &str| f32::from_bits(u32::from_str_radix(s, 16).expect("hex"));
        f64s.push((b64(f[0]), b64(f[1])));
        f32s.push((b32(f[2]), b32(f[3])));
    }
    (f64s, f32s)
}

/// ULP distance of two floats of one sign, or `u64::MAX` for a NaN or a wrong zero sign.
fn ulps64(a: f64, b: f64) -> u64 {
    if a.is_nan() || b.is_nan() || (a == 0.0 && b == 0.0 && a.to_bits() != b.to_bits()) {
        return if a.is_nan() && b.is_nan() { 0 } else { u64::MAX };
    }
    let key = |v: f64| {
        let bits = v.to_bits() as i64;
        if bits < 0 { i64::MIN - bits } else { bits }
    };
    key(a).abs_diff(key(b))
}

#[test]
fn erf_matches_python_in_f64_and_f32() {
    let (f64s, f32s) = table();
    let f = rfx::jit(|x: Tensor| x.erf());
    let xs: Vec<f64> = f64s.iter().map(|r| r.0).collect();
    let out = f.call((&xs[..],)).expect("f64 call");
    let got = out[0].as_slice::<f64>().expect("f64 output");
    for (&(x, want), &y) in f64s.iter().zip(got) {
        assert!(ulps64(y, want) <= 2, "f64 erf({x:e}) = {y:e}, Python {want:e}");
    }
    let xs: Vec<f32> = f32s.iter().map(|r| r.0).collect();
    let out = f.call((&xs[..],)).expect("f32 call");
    let got = out[0].as_slice::<f32>().expect("f32 output");
    for (&(x, want), &y) in f32s.iter().zip(got) {
        let d = ulps64(f64::from(y), f64::from(want)) >> 29;
        assert!(d <= 1, "f32 erf({x:e}) = {y:e}, Python {want:e}");
    }
    // NaN stays NaN.
    let out = f.call((&[f64::NAN, -f64::NAN][..],)).expect("NaN call");
    assert!(out[0].as_slice::<f64>().expect("f64").iter().all(|y| y.is_nan()));
}

#[test]
fn the_gaussian_cdf_from_an_expression() {
    let signature: Signature = "x: f64[5]".parse().expect("signature");
    let kernel = compile("0.5 * (1 + erf(x / sqrt(2.0)))", &signature).expect("compile");
    let x = [-3.0, -1.0, 0.0, 1.0, 1.959_963_984_540_054];
    let out = rfx::jit_kernel(kernel)
        .call(&[Array::from_vec(vec![5], x.to_vec()).expect("x")][..])
        .expect("call");
    // Φ by Python's `statistics.NormalDist().cdf`.
    let want = [
        0.0013498980316301,
        0.15865525393145707,
        0.5,
        0.8413447460685429,
        0.975,
    ];
    for (y, w) in out[0].to_f64_vec().iter().zip(want) {
        assert!((y - w).abs() <= 1e-15, "{y} vs {w}");
    }
}

#[test]
fn the_derivative_is_two_over_root_pi_times_the_gaussian() {
    let xs: Vec<f64> = (-24..=24).map(|i| f64::from(i) / 8.0).collect();
    let g = rfx::jit(rfx::grad(|x: Tensor| x.erf().sum(rfx::All)));
    let out = g.call((&xs[..],)).expect("grad call");
    let grad = out[0].as_slice::<f64>().expect("f64 grad");
    let erf = rfx::jit(|x: Tensor| x.erf());
    let h = 1e-5;
    let plus: Vec<f64> = xs.iter().map(|x| x + h).collect();
    let minus: Vec<f64> = xs.iter().map(|x| x - h).collect();
    let up = erf.call((&plus[..],)).expect("x + h");
    let down = erf.call((&minus[..],)).expect("x - h");
    let (up, down) = (up[0].to_f64_vec(), down[0].to_f64_vec());
    for (i, &x) in xs.iter().enumerate() {
        let closed = std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp();
        let finite = (up[i] - down[i]) / (2.0 * h);
        assert!(
            (grad[i] - closed).abs() <= 1e-15,
            "erf'({x}) = {}, closed form {closed}",
            grad[i]
        );
        assert!(
            (grad[i] - finite).abs() <= 1e-9,
            "erf'({x}) = {}, finite differences {finite}",
            grad[i]
        );
    }
}
