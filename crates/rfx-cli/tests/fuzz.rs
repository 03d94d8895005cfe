//! The differential fuzzer's quick mode, run by CI: 20,000 random kernels through every path,
//! the saved regressions replayed, and the shrinker checked on an injected mismatch. The long
//! mode is `cargo xtask fuzz --minutes N`.

use std::path::PathBuf;

use rfx_cli::fuzz::{self, FuzzConfig, FuzzReport};

const QUICK_KERNELS: u64 = 20_000;

#[test]
fn twenty_thousand_random_kernels_agree_on_every_path() {
    let config = FuzzConfig {
        kernels: Some(QUICK_KERNELS),
        first_seed: 1,
        metal_every: 50,
        ..FuzzConfig::default()
    };
    let report = fuzz::run(&config).expect("fuzz run");
    eprint!("{report}");
    assert!(report.mismatches.is_empty(), "{report}");
    assert_eq!(report.kernels, QUICK_KERNELS);
    // Every kernel reached the reference and was compared on the CPU backend, in full but for
    // a rare kernel with transcendentals whose probed cut lowers its reductions into other lanes
    // (outputs after its float reductions left out).
    assert_eq!(report.path("lir-interp").compared, QUICK_KERNELS, "{report}");
    let cpu = report.path("cpu");
    assert_eq!(cpu.compared, QUICK_KERNELS, "{report}");
    let partial = "transcendental: outputs after a float reduction not compared";
    assert!(cpu.skipped.keys().all(|k| k == partial), "{report}");
    assert!(
        cpu.skipped.get(partial).copied().unwrap_or(0) <= QUICK_KERNELS / 1000,
        "{report}"
    );
    assert!(
        report.path("hir-interp").compared >= QUICK_KERNELS / 2,
        "{report}"
    );
    // The generator reaches what the comparison rules are about.
    let skipped = |path: &str, reason: &str| report.path(path).skipped.get(reason).copied().unwrap_or(0);
    assert!(
        skipped("hir-interp", "float reduction (lane order): ran only") > 0,
        "{report}"
    );
    // A quarter of the kernels hold transcendentals (two thirds of them are replaced by exact
    // ops): on the CPU their values are checked against its bounds.
    assert!(cpu.within_bounds >= QUICK_KERNELS / 8, "{report}");
    let metal = report.path("metal");
    if metal.skipped.contains_key("no adapter") {
        eprintln!("metal skipped: no adapter");
    } else if metal.skipped.keys().all(|k| !k.starts_with("not built")) {
        let sampled = QUICK_KERNELS / 50;
        // Each sampled kernel is compared (perhaps in part) or unsupported as a whole.
        let unsupported: u64 = metal
            .skipped
            .iter()
            .filter(|(reason, _)| reason.starts_with("unsupported"))
            .map(|(_, count)| count)
            .sum();
        assert_eq!(metal.compared + unsupported, sampled, "{report}");
        assert!(metal.compared >= sampled / 4, "{report}");
        assert!(skipped("metal", "unsupported: dtype f64") > 0, "{report}");
    }
}

#[test]
fn saved_regressions_replay_clean() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/regressions exists")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rfx"))
        .collect();
    files.sort();
    let config = FuzzConfig::default();
    let mut report = FuzzReport::default();
    for file in &files {
        fuzz::replay_file(&config, file, &mut report).expect("a saved regression parses");
    }
    eprintln!("{} regression file(s) replayed", files.len());
    assert!(report.mismatches.is_empty(), "{report}");
}

/// Any kernel with a `sin` node is declared mismatching: the shrinker must cut it down to a
/// smaller kernel that still has one, and the saved file must read back and reproduce.
#[test]
fn the_shrinker_keeps_an_injected_mismatch_in_a_smaller_kernel() {
    /// A `sin` the outputs need (generated kernels also hold dead nodes).
    fn has_sin(kernel: &rfx_ir::hir::Kernel) -> Option<String> {
        let nodes = kernel.nodes();
        let mut live = vec![false; nodes.len()];
        for output in kernel.outputs() {
            live[output.value.index()] = true;
        }
        for index in (0..nodes.len()).rev() {
            if live[index] {
                for arg in &nodes[index].args {
                    live[arg.index()] = true;
                }
            }
        }
        let sin =
            (0..nodes.len()).any(|i| live[i] && nodes[i].op == rfx_ir::hir::Op::Unary(rfx_ir::UnaryOp::Sin));
        sin.then(|| "the kernel computes a `sin`".to_string())
    }
    let save_dir = std::env::temp_dir().join(format!("rfx-fuzz-shrink-{}", std::process::id()));
    let config = FuzzConfig {
        kernels: Some(600),
        first_seed: 1,
        metal_every: 0,
        save_dir: Some(save_dir.clone()),
        max_shrink_attempts: 200,
        inject: Some(has_sin),
        ..FuzzConfig::default()
    };
    let report = fuzz::run(&config).expect("fuzz run");
    let injected: Vec<_> = report
        .mismatches
        .iter()
        .filter(|m| m.path == "injected")
        .collect();
    assert!(injected.len() >= 2, "{report}");
    assert!(
        report.mismatches.iter().all(|m| m.path == "injected"),
        "a real mismatch: {report}"
    );
    for m in &injected {
        let (before, after) = m.ops_before_after;
        let kernel = rfx_ir::hir::parse(&m.kernel).expect("the shrunk kernel parses");
        assert!(has_sin(&kernel).is_some(), "seed {}: {}", m.seed, m.kernel);
        assert!(after <= before, "seed {}", m.seed);
        if before > 3 {
            assert!(after < before, "seed {}: not shrunk\n{}", m.seed, m.kernel);
        }
        let saved = m.saved.as_ref().expect("saved");
        let text = std::fs::read_to_string(saved).expect("read the saved file");
        assert!(
            text.starts_with('#') && text.contains(&format!("# seed: {}", m.seed)),
            "{text}"
        );
        let mut replay = FuzzReport::default();
        fuzz::replay_file(&config, saved, &mut replay).expect("the saved file parses");
        assert_eq!(replay.mismatches.len(), 1, "{replay}");
        assert!(replay.mismatches[0].ops_before_after.1 <= after, "{replay}");
    }
    let smallest = injected.iter().map(|m| m.ops_before_after.1).min();
    assert_eq!(smallest, Some(1), "some kernel shrinks to a lone `sin`: {report}");
    let _ = std::fs::remove_dir_all(&save_dir);
}

/// `rfx fuzz --large`: generated kernels of 1,000 to 20,000 ops, heavy in transcendentals, run
/// on the CPU backend with the interpreter's values (within the mode's tolerance).
#[test]
fn large_kernels_agree_with_the_interpreter() {
    let config = FuzzConfig {
        kernels: Some(2),
        first_seed: 1,
        metal_every: 0,
        large: true,
        ..FuzzConfig::default()
    };
    let report = fuzz::run(&config).expect("fuzz run");
    assert!(report.mismatches.is_empty(), "{report}");
    assert_eq!(report.kernels, 2);
    assert_eq!(report.path("cpu").compared, 2, "{report}");
    for seed in 1..=2 {
        let ops = rfx_check::generator::large_kernel(seed).op_count();
        assert!((1_000..=20_100).contains(&ops), "seed {seed}: {ops} ops");
    }
}
