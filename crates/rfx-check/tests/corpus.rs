//! The corpus runner with the backends its caller hands in, and its typed errors.

use std::path::PathBuf;

use rfx_check::{Backends, CheckError, FuzzConfig, FuzzReport, replay_file, run};

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rfx-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// With no backend only the interpreters run; each missing backend is a skip with its reason,
/// never a mismatch. Handed the CPU backend, the same seeds are compared on it too.
#[test]
fn only_the_backends_handed_in_run() {
    let config = FuzzConfig {
        kernels: Some(40),
        first_seed: 100,
        metal_every: 0,
        threads: 2,
        ..FuzzConfig::default()
    };
    let report = run(&config).expect("run");
    assert!(report.mismatches.is_empty(), "{report}");
    assert_eq!(report.kernels, 40);
    assert_eq!(report.path("lir-interp").compared, 40, "{report}");
    let cpu = report.path("cpu");
    assert_eq!(cpu.compared, 0, "{report}");
    assert_eq!(cpu.skipped.get("not given"), Some(&40), "{report}");
    assert_eq!(
        report.path("cuda").skipped.get("not given"),
        Some(&40),
        "{report}"
    );

    let with_cpu = FuzzConfig {
        backends: Backends {
            cpu: Ok(&rfx_codegen_cpu::CpuBackend),
            ..Backends::none()
        },
        ..config
    };
    let report = run(&with_cpu).expect("run");
    assert!(report.mismatches.is_empty(), "{report}");
    assert_eq!(report.path("cpu").compared, 40, "{report}");
    assert!(report.path("cpu").skipped.is_empty(), "{report}");
}

/// A saved kernel that cannot be read or parsed is a typed error naming the file (and the
/// line and column of the parse error); nothing is counted.
#[test]
fn unreadable_and_malformed_files_are_typed_errors() {
    let dir = scratch_dir("replay");
    let config = FuzzConfig::default();
    let mut report = FuzzReport::default();

    let missing = dir.join("missing.rfx");
    match replay_file(&config, &missing, &mut report) {
        Err(CheckError::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("expected an I/O error, got {other:?}"),
    }

    let malformed = dir.join("cpu_7.rfx");
    std::fs::write(
        &malformed,
        "# seed: 7\nkernel k {\n %x = input x : f32[3]\n output y = %q\n}\n",
    )
    .expect("write");
    match replay_file(&config, &malformed, &mut report) {
        Err(error @ CheckError::Parse { line: 4, .. }) => {
            let text = error.to_string();
            assert!(text.starts_with(&format!("{}:4:", malformed.display())), "{text}");
        }
        other => panic!("expected a parse error on line 4, got {other:?}"),
    }
    assert_eq!(report, FuzzReport::default());

    // A well-formed file replays: its `# seed` header gives the inputs.
    let good = dir.join("cpu_8.rfx");
    std::fs::write(
        &good,
        "# seed: 8\nkernel k {\n %x = input x : f32[3]\n %y = neg %x : f32[3]\n output y = %y\n}\n",
    )
    .expect("write");
    replay_file(&config, &good, &mut report).expect("replay");
    assert_eq!(report.kernels, 1);
    assert_eq!(report.path("lir-interp").compared, 1, "{report}");
    assert!(report.mismatches.is_empty(), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
