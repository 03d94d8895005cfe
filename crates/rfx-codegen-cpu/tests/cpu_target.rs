//! The explicit CPU target (`CompileOptions::cpu_target`): `baseline` code uses no fused
//! multiply-add and calls no AVX2 routine, `avx2` code calls the routines and is refused where
//! the CPU cannot run it, and code for every target the machine can run gives the
//! interpreter's results (bit for bit for exactly rounded ops, within the documented bound for
//! transcendentals).

use crate::common;

use rfx_codegen_cpu::{compile, dump_with};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_lower::{BackendError, CompileOptions, CpuTarget, LowerConfig, lower, ulps};
use rfx_opt::{OptConfig, optimize};

/// The CPU backend's documented bound for transcendental ops.
const BOUND_ULPS: u64 = 4;

/// A long elementwise loop with transcendentals (tiled with the AVX2 routines where the target
/// has them), a multiply-add fast math may contract, and a `floor` (an SSE4.1 instruction, a
/// library call on the baseline).
const MIXED: &str = "kernel mixed {
  %x = input x : f32[4096]
  %y = input y : f32[4096]
  %s = sin %x : f32[4096]
  %e = exp %y : f32[4096]
  %m = mul %s, %e : f32[4096]
  %a = add %m, %y : f32[4096]
  %f = floor %a : f32[4096]
  output a = %a
  output f = %f
}";

/// Exactly rounded ops only, with a reduction: every target must give the interpreter's bits.
const EXACT: &str = "kernel exact {
  %x = input x : f64[37, 5]
  %y = input y : f64[37, 5]
  %m = mul %x, %y : f64[37, 5]
  %c = ceil %m : f64[37, 5]
  %r = round %x : f64[37, 5]
  %s = sum %m axes [1] : f64[37]
  %t = add %c, %r : f64[37, 5]
  output s = %s
  output t = %t
}";

fn lir_of(text: &str) -> (rfx_ir::hir::Kernel, LirProgram) {
    let kernel = rfx_ir::hir::parse(text).expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    (
        kernel.clone(),
        lower(&mir, &LowerConfig::default()).expect("lower").0,
    )
}

fn options(cpu_target: CpuTarget, fast_math: bool) -> CompileOptions {
    CompileOptions {
        fast_math,
        cpu_target,
        ..CompileOptions::default()
    }
}

/// Whether this machine can run `avx2` code.
fn runs_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CLIF of every kernel of `text`, joined.
fn clif(text: &str, options: &CompileOptions) -> Result<String, BackendError> {
    let (_, lir) = lir_of(text);
    Ok(dump_with(&lir, options)?
        .into_iter()
        .map(|(_, clif, _)| clif)
        .collect())
}

/// The machine code listings of every kernel of `text`, joined.
fn asm(text: &str, options: &CompileOptions) -> String {
    let (_, lir) = lir_of(text);
    dump_with(&lir, options)
        .expect("dump")
        .into_iter()
        .map(|(_, _, asm)| asm)
        .collect()
}

/// Calls of tile routines: a call through one of the routines' signatures (two or three
/// pointers and a count, no result). No other function a kernel calls has one.
fn routine_calls(clif: &str) -> usize {
    let routine_sigs: Vec<String> = clif
        .lines()
        .filter_map(|l| {
            let (name, sig) = l.trim().split_once(" = ")?;
            (name.starts_with("sig")
                && (sig == "(i64, i64, i64) system_v" || sig == "(i64, i64, i64, i64) system_v"))
                .then(|| name.to_string())
        })
        .collect();
    let routine_fns: Vec<String> = clif
        .lines()
        .filter_map(|l| {
            let (name, decl) = l.trim().split_once(" = ")?;
            let sig = decl.split_whitespace().last()?;
            (name.starts_with("fn") && routine_sigs.iter().any(|s| s == sig)).then(|| name.to_string())
        })
        .collect();
    clif.lines()
        .filter(|l| {
            l.trim()
                .strip_prefix("call ")
                .and_then(|c| c.split('(').next())
                .is_some_and(|callee| routine_fns.iter().any(|f| f == callee))
        })
        .count()
}

fn fma_count(clif: &str) -> usize {
    clif.lines().filter(|l| l.contains(" = fma ")).count()
}

#[test]
fn baseline_uses_no_fma_and_no_routines() {
    for fast_math in [false, true] {
        let text =
            clif(MIXED, &options(CpuTarget::Baseline, fast_math)).expect("baseline compiles everywhere");
        assert_eq!(fma_count(&text), 0, "fast math {fast_math}:\n{text}");
        assert_eq!(routine_calls(&text), 0, "fast math {fast_math}:\n{text}");
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SSE2 only: no VEX-encoded instruction, no 256-bit register.
        let listing = asm(MIXED, &options(CpuTarget::Baseline, true));
        for line in listing.lines() {
            let mnemonic = line.split_whitespace().next().unwrap_or("");
            assert!(
                !line.contains("ymm") && !mnemonic.starts_with("vfmadd") && !mnemonic.starts_with("vmul"),
                "{line}"
            );
        }
    }
}

#[test]
fn avx2_calls_the_routines_or_is_unavailable() {
    let result = clif(MIXED, &options(CpuTarget::Avx2, true));
    if runs_avx2() {
        let text = result.expect("avx2 compiles on an AVX2 machine");
        assert!(routine_calls(&text) > 0, "{text}");
        assert!(fma_count(&text) > 0, "fast math contracts on avx2:\n{text}");
        let exact = clif(MIXED, &options(CpuTarget::Avx2, false)).expect("avx2");
        assert_eq!(fma_count(&exact), 0, "exact mode never contracts:\n{exact}");
    } else {
        match result {
            Err(BackendError::Unavailable {
                backend: "cpu",
                reason,
            }) => {
                assert!(reason.contains("avx2"), "{reason}");
            }
            other => panic!("expected Unavailable, got {:?}", other.map(|_| "code")),
        }
    }
}

/// Compiles `text` for `target` and compares it with the native-precision interpreter: bits
/// for exactly rounded kernels, else within [`BOUND_ULPS`] or an absolute `1e-5 (1 + |x|)`
/// (the multiply-add after `sin` may cancel a last-bit difference into a larger relative one).
fn check_against_interpreter(text: &str, target: CpuTarget, exact: bool) {
    let (kernel, lir) = lir_of(text);
    let compiled = match compile(&lir, &options(target, false)) {
        Ok(c) => c,
        Err(BackendError::Unavailable { .. }) if target == CpuTarget::Avx2 && !runs_avx2() => return,
        Err(e) => panic!("{target}: {e}"),
    };
    for seed in 0..2u64 {
        let mut rng = TestRng::new(seed);
        let inputs = random_inputs(&mut rng, &kernel, 0.05);
        let (got, want) = common::run_with_interpreter(&compiled, &lir, &inputs);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            for i in 0..w.data().len() {
                let (a, b) = (g.get(i).expect("got").to_f64(), w.get(i).expect("want").to_f64());
                let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                let close = ulps(a, b, w.dtype()) <= BOUND_ULPS || (a - b).abs() <= 1e-5 * (1.0 + b.abs());
                assert!(
                    same || (!exact && close),
                    "{target}, output {k}, element {i}: cpu {a:e}, interpreter {b:e}"
                );
            }
        }
    }
}

#[test]
fn every_target_gives_the_interpreters_results() {
    for target in CpuTarget::ALL {
        check_against_interpreter(EXACT, target, true);
        check_against_interpreter(MIXED, target, false);
    }
}

#[test]
fn the_compiled_program_keeps_its_target_for_its_dump() {
    let (_, lir) = lir_of(MIXED);
    let compiled = compile(&lir, &options(CpuTarget::Baseline, true)).expect("compile");
    let dumped: String = compiled.clif().concat();
    assert!(!dumped.is_empty());
    assert_eq!(fma_count(&dumped), 0, "{dumped}");
    assert_eq!(routine_calls(&dumped), 0, "{dumped}");
}
