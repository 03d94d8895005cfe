//! The runtime cache with HIR kernels: fingerprints, backend and option changes, concurrent
//! single compiles, and the executor's results against the interpreter.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx_ir::hir::{Kernel, parse};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, Shape};
use rfx_runtime::{Cache, CacheKey, CompileConfig, MissReason, RuntimeError, registry};

fn kernel(n: usize) -> Kernel {
    parse(&format!(
        "kernel k {{ %x = input x : f32[{n}] %two = const 2.0 : f32[] %a = mul %x, %two : f32[{n}] \
         %s = sin %a : f32[{n}] %t = sum %s axes [0] : f32[] output s = %s output t = %t }}"
    ))
    .expect("kernel")
}

fn get(cache: &Cache, k: &Kernel, config: &CompileConfig) -> Arc<rfx_runtime::Executable> {
    let key = CacheKey::of_kernel(k, config);
    cache
        .get_or_compile(key, config, registry(), || Ok::<_, RuntimeError>(k.clone()))
        .expect("compile")
}

#[test]
fn keys_cover_kernel_backend_and_options() {
    let cache = Cache::new("k");
    let cpu = CompileConfig::default();
    let k3 = kernel(3);
    let exe = get(&cache, &k3, &cpu);
    get(&cache, &k3, &cpu);
    assert_eq!(cache.compile_count(), 1);
    assert_eq!(cache.hit_count(), 1);

    let k5 = kernel(5);
    get(&cache, &k5, &cpu);
    let reasons = cache.last_miss().expect("miss").reasons;
    assert!(matches!(reasons[0], MissReason::Kernel { .. }), "{reasons:?}");
    assert!(reasons.contains(&MissReason::InputShape {
        name: "x".into(),
        from: Shape::new([3]),
        to: Shape::new([5]),
    }));

    let interp = CompileConfig::with_backend("interp");
    get(&cache, &k5, &interp);
    assert_eq!(
        cache.last_miss().expect("miss").reasons,
        vec![MissReason::Backend {
            from: "cpu".into(),
            to: "interp".into()
        }]
    );
    let mut fast = CompileConfig::with_backend("interp");
    fast.opt.fast_math = true;
    get(&cache, &k5, &fast);
    let miss = cache.last_miss().expect("miss");
    assert!(
        matches!(
            miss.reasons[..],
            [MissReason::Options {
                stage: "optimiser",
                ..
            }]
        ),
        "{miss}"
    );
    assert_eq!(cache.compile_count(), 4);
    assert_eq!(cache.len(), 4);

    // The executable agrees with the interpreter on random inputs.
    let mut rng = StdRng::seed_from_u64(2);
    let x: Vec<f32> = (0..3).map(|_| rng.random_range(-2.0..2.0)).collect();
    let x = Array::from_slice(&x);
    let got = exe.call(&[x.view()]).expect("call");
    let want = run_hir(&k3, &[x.view()], Mode::Native).expect("interp");
    for (g, w) in got.iter().zip(&want) {
        for (a, b) in g.to_f64_vec().iter().zip(w.to_f64_vec()) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
    cache.clear();
    assert!(cache.is_empty());
}

#[test]
fn concurrent_callers_of_one_key_compile_once() {
    let cache = Cache::new("k");
    let config = CompileConfig::default();
    let k = kernel(16);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..20 {
                    get(&cache, &k, &config);
                }
            });
        }
    });
    assert_eq!(cache.compile_count(), 1);
    assert_eq!(cache.hit_count(), 159);
}

#[test]
fn failed_compiles_cache_nothing() {
    let cache = Cache::new("k");
    let config = CompileConfig::with_backend("no-such-backend");
    let k = kernel(2);
    let key = CacheKey::of_kernel(&k, &config);
    let err = cache
        .get_or_compile(key, &config, registry(), || Ok::<_, RuntimeError>(k.clone()))
        .unwrap_err();
    assert!(err.is_user_error());
    assert!(err.to_string().contains("unknown backend"), "{err}");
    assert_eq!(cache.compile_count(), 0);
    assert!(cache.is_empty());
    let cuda = CompileConfig::with_backend("cuda");
    let key = CacheKey::of_kernel(&k, &cuda);
    let err = cache
        .get_or_compile(key, &cuda, registry(), || Ok::<_, RuntimeError>(k.clone()))
        .unwrap_err();
    // Either this build lacks the CUDA backend (the cargo feature is off) or it has it and the
    // machine has no driver/GPU: both are a clear `unavailable` error, and nothing is cached.
    assert!(err.to_string().contains("is unavailable"), "{err}");
    assert!(cache.is_empty());
}
