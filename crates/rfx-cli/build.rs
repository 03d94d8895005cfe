//! Records the git commit the `rfx` binary is built from, for `rfx --version`:
//! `RFX_GIT_COMMIT` is the commit's abbreviated hash, or `unknown` when the source is not a git
//! checkout (a crates.io or release tarball) or git is not installed. A builder may set
//! `RFX_GIT_COMMIT` in the environment to name the commit themselves.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RFX_GIT_COMMIT");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("RFX_GIT_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => git_commit(&manifest_dir).unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=RFX_GIT_COMMIT={commit}");
}

/// `git` run in `dir` with `args`, its trimmed stdout if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// The checkout's commit, with the files that change when it moves registered for a rerun
/// (only files that exist: cargo reruns a script on every build for a missing one).
fn git_commit(dir: &Path) -> Option<String> {
    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    let git_dir = PathBuf::from(git(dir, &["rev-parse", "--absolute-git-dir"])?);
    let head = git_dir.join("HEAD");
    let mut watched = vec![head.clone(), git_dir.join("packed-refs")];
    if let Some(reference) = std::fs::read_to_string(&head)
        .ok()
        .and_then(|text| text.strip_prefix("ref: ").map(|r| r.trim().to_string()))
    {
        watched.push(git_dir.join(reference));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(commit)
}
