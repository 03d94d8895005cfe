//! The optimiser's default limits make its result a function of the kernel alone: equality
//! saturation stops at the node or iteration limit, or when saturated, never at the wall-clock
//! backstop, so the rules that fire (and, with the refining rules, the bits of the result) do
//! not depend on the machine's speed or load.

use std::time::Duration;

use rfx_check::generator::transcendental_kernel;
use rfx_ir::DType;
use rfx_ir::testgen::TestRng;
use rfx_opt::{OptConfig, StopReason, simplify};

/// Kernels of 10,000 ops: large enough that saturation takes several iterations and about
/// 0.1 s (a 20 ms wall-clock limit stopped them part way).
#[test]
fn the_default_limits_do_not_depend_on_time() {
    let default = OptConfig::default();
    let unbounded = OptConfig {
        time_limit: Duration::from_secs(3600),
        ..OptConfig::default()
    };
    for seed in 0..2 {
        let mut rng = TestRng::new(10_000 + seed);
        let kernel = transcendental_kernel(&mut rng, 10_000, DType::F32, 4, "k");
        let (got, report) = simplify(&kernel, &default).expect("simplify");
        assert!(
            !matches!(report.stop_reason, Some(StopReason::TimeLimit)),
            "seed {seed}: stopped by the clock after {} iterations",
            report.iterations
        );
        let (want, want_report) = simplify(&kernel, &unbounded).expect("simplify");
        assert_eq!(
            report.iterations, want_report.iterations,
            "seed {seed}: iterations"
        );
        assert_eq!(
            report.rules_fired, want_report.rules_fired,
            "seed {seed}: rules fired"
        );
        assert_eq!(
            got.to_string(),
            want.to_string(),
            "seed {seed}: the optimised kernel"
        );
    }
}
