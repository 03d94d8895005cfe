//! The CPU target through the facade: a `CompileConfig` pins it, it is part of the cache key,
//! and code for every target the machine can run computes the same function.

use rfx::{CompileConfig, CpuTarget, JitError, Tensor};

/// `sin(2x) * exp(x / 8) + x` on 3000 elements (long enough for the AVX2 routines' tiles), in
/// f64 from the same f32 inputs.
fn reference(x: f32) -> f64 {
    let x = f64::from(x);
    (2.0 * x).sin() * (x / 8.0).exp() + x
}

#[test]
fn every_runnable_target_computes_the_kernel() {
    let xs: Vec<f32> = (0..3000).map(|i| (i as f32 - 1500.0) / 100.0).collect();
    for target in CpuTarget::ALL {
        let config = CompileConfig::default().cpu_target(target);
        assert_eq!(config.compile.cpu_target, target);
        let f = rfx::jit_with(|x: Tensor| (x * 2.0).sin() * (x / 8.0).exp() + x, config);
        let out = match f.call((&xs[..],)) {
            Ok(out) => out,
            Err(JitError::Runtime(e))
                if target == CpuTarget::Avx2 && e.to_string().contains("unavailable") =>
            {
                continue;
            }
            Err(e) => panic!("{target}: {e}"),
        };
        let got = out[0].as_slice::<f32>().expect("f32");
        for (&x, &y) in xs.iter().zip(got) {
            let want = reference(x);
            assert!(
                (f64::from(y) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{target}: x = {x}, got {y}, want {want}"
            );
        }
    }
}

#[test]
fn the_target_is_part_of_the_configuration() {
    let host = CompileConfig::default();
    let baseline = CompileConfig::default().cpu_target(CpuTarget::Baseline);
    assert_eq!(host.compile.cpu_target, CpuTarget::Host);
    assert_ne!(host, baseline);
    assert_eq!(baseline, CompileConfig::default().cpu_target(CpuTarget::Baseline));
}

/// The CLIF an executable dumps is the code of its own options: the baseline target's plan has
/// no AOT routines even where this CPU has them.
#[test]
fn the_clif_dump_follows_the_configured_target() {
    let config = CompileConfig::default().cpu_target(CpuTarget::Baseline);
    let f = rfx::jit_with(|x: Tensor| x.sin(), config);
    let exe = f
        .executable(&[rfx::TensorType::new(rfx::DType::F32, [4096])])
        .expect("compile");
    let stages = rfx_runtime::stage_dumps(&exe);
    let clif = &stages
        .iter()
        .find(|(stage, _)| *stage == "clif")
        .expect("a clif stage")
        .1;
    let plans: Vec<&str> = clif.lines().filter(|l| l.starts_with("; plan: ")).collect();
    assert_eq!(plans, ["; plan: elementwise, 4 lanes"], "{clif}");
}
