//! The command line itself: `--version` (the version, the git commit, the backends),
//! `--backend`'s help listing every backend, an unavailable backend as a user error in `bench`
//! as in `eval`, shell completions, and `rfx eval --list-functions`.

use std::process::Command;

use crate::common;
use common::{RFX, rfx, stderr_of, stdout_of};

const BACKENDS: [&str; 5] = ["interp", "cpu", "cuda", "metal", "c"];

#[test]
fn version_names_the_commit_and_the_backends() {
    let out = rfx(&["--version"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    let prefix = format!("rfx {} (commit ", env!("CARGO_PKG_VERSION"));
    let rest = text.strip_prefix(&prefix).unwrap_or_else(|| panic!("{text}"));
    let (commit, rest) = rest
        .split_once("; backends: ")
        .unwrap_or_else(|| panic!("{text}"));
    // Built in a git checkout: an abbreviated hash of a commit this repository has (HEAD may
    // have moved on since the build); outside one, `unknown`.
    let in_checkout = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .is_ok_and(|o| o.status.success());
    if in_checkout {
        assert!(
            commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{text}"
        );
        let known = Command::new("git")
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("git");
        assert!(known.success(), "{commit} is not a commit of this repository");
    } else {
        assert_eq!(commit, "unknown");
    }
    let listed = rest
        .trim_end()
        .strip_suffix(')')
        .unwrap_or_else(|| panic!("{text}"));
    let names: Vec<&str> = listed
        .split(", ")
        .map(|b| b.trim_end_matches(" (not in this build)"))
        .collect();
    assert_eq!(names, BACKENDS, "{text}");
    assert!(
        !listed.contains("interp (not") && !listed.contains("cpu (not"),
        "{text}"
    );
}

#[test]
fn backend_help_lists_every_backend() {
    for sub in ["bench", "eval", "run", "grad"] {
        let help = stdout_of(&rfx(&[sub, "--help"]));
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with("--backend"))
            .unwrap_or_else(|| panic!("{sub}: {help}"));
        for backend in BACKENDS {
            assert!(line.contains(backend), "{sub}: {line}");
        }
    }
}

#[test]
fn an_unavailable_backend_is_a_user_error_in_bench_as_in_eval() {
    // A library path that does not exist makes CUDA unavailable on any machine (and a build
    // without the `cuda` feature has no CUDA at all): both are the user's to fix, exit 1.
    let dir = common::temp_dir("unavailable");
    let x = dir.join("x.npy");
    common::write_npy(&x, &[2], &[1.0f32, 2.0]);
    let run = |args: &[&str]| {
        Command::new(RFX)
            .args(args)
            .env("RFX_NVRTC_LIB", "/nonexistent/libnvrtc.so.12")
            .output()
            .expect("run rfx")
    };
    let x_arg = format!("x={}", x.display());
    let eval = run(&["eval", "x + 1.0", "--in", &x_arg, "--backend", "cuda"]);
    let bench = run(&[
        "bench",
        "--backend",
        "cuda",
        "--size",
        "4",
        "--iterations",
        "1",
        "--no-baselines",
    ]);
    for (what, out) in [("eval", &eval), ("bench", &bench)] {
        let err = stderr_of(out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.starts_with("error: ") && !err.contains("internal"),
            "{what}: {err}"
        );
        assert!(err.contains("cuda"), "{what}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_are_generated_for_each_shell() {
    let bash = rfx(&["completions", "bash"]);
    assert!(bash.status.success(), "{}", stderr_of(&bash));
    let script = stdout_of(&bash);
    for word in [
        "bench",
        "eval",
        "dump",
        "completions",
        "--list-functions",
        "--in-shapes",
    ] {
        assert!(script.contains(word), "bash completion lacks {word}");
    }
    // The script is valid bash, where bash is installed.
    if let Ok(mut child) = Command::new("bash")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .spawn()
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write");
        assert!(
            child.wait().expect("bash").success(),
            "bash -n rejects the script"
        );
    }
    assert!(stdout_of(&rfx(&["completions", "zsh"])).starts_with("#compdef rfx"));
    assert!(stdout_of(&rfx(&["completions", "fish"])).contains("complete -c rfx"));
    for shell in ["elvish", "powershell"] {
        assert!(rfx(&["completions", shell]).status.success(), "{shell}");
    }
    assert_eq!(
        rfx(&["completions", "tcsh"]).status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn eval_lists_the_expression_functions() {
    let out = rfx(&["eval", "--list-functions"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}(")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .to_string()
    };
    assert!(line("sin").contains("sin(x)"));
    assert!(line("atan2").contains("(also arctan2)"));
    assert!(line("sum").contains("sum(x[, axis][, keepdims=true])"));
    assert!(line("linrec").contains("linrec(x, a[, axis][, reverse=true])"));
    assert!(line("where").contains("(also select)"));
    // What the list names, an expression can call.
    for call in [
        "sin(x)",
        "arctan2(x, x)",
        "cumsum(x, reverse=true)",
        "where(x > 0, x, 0.0)",
    ] {
        assert!(text.contains(call.split('(').next().expect("name")));
        let out = rfx(&["dump", call, "--stage", "hir", "--in-shapes", "x=f32[3]"]);
        assert!(out.status.success(), "{call}: {}", stderr_of(&out));
    }
    // Listing takes nothing else.
    assert_eq!(
        rfx(&["eval", "--list-functions", "sin(x)"]).status.code(),
        Some(2)
    );
}

#[test]
fn the_build_script_records_the_commit_or_unknown_without_git() {
    // build.rs compiled and run as cargo runs it: in this checkout, in a directory outside any
    // (an unpacked release tarball), and with no `git` on the PATH.
    let dir = common::temp_dir("build-script");
    let exe = dir.join("build-script");
    let built = Command::new("rustc")
        .args(["--edition", "2024", "--crate-type", "bin", "-o"])
        .arg(&exe)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/build.rs"))
        .status()
        .expect("rustc");
    assert!(built.success());
    let tarball = dir.join("rfx-cli-0.1.0");
    std::fs::create_dir_all(&tarball).expect("dir");
    let run = |manifest_dir: &std::path::Path, path: Option<&str>| {
        let mut command = Command::new(&exe);
        command
            .env("CARGO_MANIFEST_DIR", manifest_dir)
            .env("GIT_CEILING_DIRECTORIES", &dir)
            .env_remove("RFX_GIT_COMMIT")
            .env_remove("GIT_DIR");
        if let Some(path) = path {
            command.env("PATH", path);
        }
        let out = command.output().expect("build script");
        assert!(out.status.success());
        stdout_of(&out)
    };
    let commit_of = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("cargo:rustc-env=RFX_GIT_COMMIT="))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    assert_eq!(commit_of(&run(&tarball, None)), "unknown");
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(commit_of(&run(manifest, Some(""))), "unknown", "no git installed");
    let in_checkout = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .current_dir(manifest)
        .output()
        .is_ok_and(|o| o.status.success());
    if in_checkout {
        let text = run(manifest, None);
        let commit = commit_of(&text);
        assert!(
            commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("cargo:rerun-if-changed=") && l.ends_with("HEAD")),
            "{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cpu_target_pins_the_instruction_set_of_dumps() {
    let asm = |target: &str| {
        let out = rfx(&[
            "dump",
            "x*y+z",
            "--stage",
            "asm",
            "--fast-math",
            "--cpu-target",
            target,
            "--in-shapes",
            "x=f64[64],y=f64[64],z=f64[64]",
        ]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        stdout_of(&out)
    };
    let baseline = asm("baseline");
    assert!(baseline.contains("mul"), "{baseline}");
    // The base x86-64 set: no fused multiply-add, no VEX-encoded or 256-bit instruction, even
    // with fast math on an FMA machine.
    for forbidden in ["fmadd", "ymm", "vmul", "vadd"] {
        assert!(!baseline.contains(forbidden), "{forbidden} in\n{baseline}");
    }
    let bad = rfx(&["dump", "x", "--stage", "clif", "--cpu-target", "pentium"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_of(&bad).contains("unknown CPU target `pentium` (one of: host, baseline, avx2)"),
        "{}",
        stderr_of(&bad)
    );
}
