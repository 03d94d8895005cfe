//! The backend conformance suite (`rfx_check::conformance`) on the CPU backend: every op, dtype,
//! broadcast, reduction and multi-output case; exact ops bit for bit against the LIR
//! interpreter, transcendentals within 4 ULP of the f64 oracle (the documented bound; the
//! measured maxima are printed).

use std::collections::BTreeMap;

use rfx_check::conformance::{cases, check, stated_bound_differences};
use rfx_codegen_cpu::CpuBackend;
use rfx_lower::{Backend, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// The CPU backend's documented bound for every transcendental op, f32 and f64.
const BOUND_ULPS: u64 = 4;

#[test]
fn the_backend_states_the_bound_the_suite_asserts() {
    let differences = stated_bound_differences(&CpuBackend, BOUND_ULPS);
    assert!(differences.is_empty(), "{differences:#?}");
}

#[test]
fn every_conformance_case_passes_on_the_cpu_backend() {
    let cases = cases();
    assert!(cases.len() > 500, "only {} cases", cases.len());
    let mut failures = Vec::new();
    let mut worst: BTreeMap<String, u64> = BTreeMap::new();
    for case in &cases {
        let (mir, _) = optimize(&case.kernel, &OptConfig::default()).expect("optimize");
        let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
        let compiled = CpuBackend
            .compile(&lir, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        for seed in 0..3 {
            let result = check(case, &lir, compiled.as_ref(), BOUND_ULPS, seed);
            if let Some(op) = case.transcendental {
                let dtype = case
                    .kernel
                    .inputs()
                    .next()
                    .map(|(_, _, t)| t.dtype.to_string())
                    .unwrap_or_default();
                let entry = worst.entry(format!("{op} {dtype}")).or_default();
                *entry = (*entry).max(result.max_ulps);
            }
            if let Some(f) = result.failure {
                failures.push(format!("{} (seed {seed}): {f}", case.name));
                break;
            }
        }
    }
    eprintln!("max ULP error against the f64 oracle, CPU backend:");
    for (op, ulps) in &worst {
        eprintln!("  {op:<14} {ulps}");
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
