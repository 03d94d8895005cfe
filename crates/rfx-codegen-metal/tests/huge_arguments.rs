//! `sin`, `cos` and `tan` on metal over the whole `f32` domain: beyond 32768 the WGSL reduces its
//! argument by Payne and Hanek's method on the bits (the device's built-ins gave ±1 for 1e30 and
//! FLT_MAX on lavapipe). Every argument must meet the bound `MetalBackend::ulp_bound` states
//! against the `f64` oracle (glibc's `sin`, exact reduction), and the values NumPy gives at
//! 1e30 and FLT_MAX. Without a wgpu adapter the tests print why they are skipped.

mod common;

use common::{adapter_or_skip, lower_kernel, parse, run_metal};
use rfx_codegen_metal::MetalBackend;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, DType, UnaryOp};
use rfx_lower::{Backend, Transcendental, ulps};

fn run_unary(op: UnaryOp, x: &[f32]) -> Vec<f32> {
    let n = x.len();
    let kernel = parse(&format!(
        "kernel t {{\n  %x = input x : f32[{n}]\n  %y = {op} %x : f32[{n}]\n  output y = %y\n}}"
    ));
    let inputs = [Array::from_vec(vec![n], x.to_vec()).expect("x")];
    let got = run_metal(&lower_kernel(&kernel), &inputs);
    got[0].as_slice::<f32>().expect("f32").to_vec()
}

/// Arguments beyond 32768: the first ones past it, every power of two up to 2^127 and its
/// neighbours, FLT_MAX, and random bit patterns over the whole range, both signs.
fn huge_arguments() -> Vec<f32> {
    let mut x = vec![32768.004f32, 32769.0, 1e30, f32::MAX, 1.6e6, 1e10, 3.4e38];
    for e in 16..=127 {
        let p = 2f32.powi(e);
        x.extend([
            p,
            f32::from_bits(p.to_bits() - 1),
            f32::from_bits(p.to_bits() + 1),
        ]);
    }
    let mut rng = TestRng::new(2026);
    x.extend((0..20_000).map(|_| {
        let bits = 0x4700_0001 + (rng.next_u64() % u64::from(0x7f7f_ffff - 0x4700_0001u32)) as u32;
        f32::from_bits(bits)
    }));
    let negated: Vec<f32> = x.iter().map(|v| -v).collect();
    x.extend(negated);
    x
}

#[test]
fn huge_arguments_meet_the_bound() {
    if !adapter_or_skip() {
        return;
    }
    let x = huge_arguments();
    let llvmpipe = MetalBackend.adapter().is_ok_and(|name| name.contains("llvmpipe"));
    for op in [UnaryOp::Sin, UnaryOp::Cos, UnaryOp::Tan] {
        let got = run_unary(op, &x);
        let t = Transcendental::unary(op).expect("transcendental");
        let mut worst = (0, 0.0f32);
        for (&g, &xv) in got.iter().zip(&x) {
            let args = [f64::from(xv)];
            let e = ulps(f64::from(g), t.oracle(&args), DType::F32);
            if e > worst.0 {
                worst = (e, xv);
            }
            if llvmpipe {
                let bound = MetalBackend
                    .ulp_bound(t, DType::F32, &args)
                    .expect("every finite argument has a bound");
                assert!(e <= bound, "{op}({xv:e}) = {g:e}: {e} ULP > {bound}");
            }
        }
        eprintln!(
            "{op}: worst {} ULP at x = {:e} over {} points",
            worst.0,
            worst.1,
            x.len()
        );
    }
}

/// The values of the probe, as NumPy gives them (`np.sin(np.float32(1e30))` and so on,
/// NumPy 2.4.6), not the ±1 of the built-ins.
#[test]
fn numpy_values_at_1e30_and_flt_max() {
    if !adapter_or_skip() {
        return;
    }
    let x = [1e30f32, f32::MAX, -1e30, -f32::MAX];
    let cases: [(UnaryOp, [f32; 4]); 3] = [
        (
            UnaryOp::Sin,
            [-0.791_163_44, -0.521_876_5, 0.791_163_44, 0.521_876_5],
        ),
        (UnaryOp::Cos, [-0.611_604_8, 0.853_021, -0.611_604_8, 0.853_021]),
        (UnaryOp::Tan, [1.293_586, -0.611_797_9, -1.293_586, 0.611_797_9]),
    ];
    for (op, want) in cases {
        let got = run_unary(op, &x);
        for ((&g, &w), &xv) in got.iter().zip(&want).zip(&x) {
            let e = ulps(f64::from(g), f64::from(w), DType::F32);
            assert!(e <= 2, "{op}({xv:e}) = {g:e}, NumPy {w:e}: {e} ULP");
        }
    }
}
