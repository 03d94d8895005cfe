//! Every integration-test file runs: the check `cargo xtask test` makes before `cargo test`.
//!
//! A crate whose manifest sets `autotests = false` gathers its test files into one binary,
//! `tests/integration.rs`, as `#[path = "file.rs"] mod file;` modules, and lists the files
//! that need a process of their own as `[[test]]` targets. Cargo then ignores any other file
//! in `tests/`: a test file added there and listed nowhere would never be compiled or run.
//! This check finds such files.

use std::path::Path;

/// The `tests/*.rs` files of each `autotests = false` crate under `crates/` that neither
/// `tests/integration.rs` nor a `[[test]]` target names, as paths relative to `root`.
pub(crate) fn unlisted(root: &Path) -> Result<Vec<String>, String> {
    let crates = root.join("crates");
    let mut missing = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&crates)
        .map_err(|e| format!("{}: {e}", crates.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    for dir in dirs {
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let manifest: toml::Table = text
            .parse()
            .map_err(|e| format!("{}: {e}", dir.join("Cargo.toml").display()))?;
        let autotests = manifest
            .get("package")
            .and_then(|p| p.get("autotests"))
            .and_then(toml::Value::as_bool);
        if autotests != Some(false) {
            continue;
        }
        let mut listed: Vec<String> = manifest
            .get("test")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let path = t.get("path").and_then(toml::Value::as_str).map(str::to_string);
                let name = t.get("name").and_then(toml::Value::as_str);
                path.or_else(|| name.map(|n| format!("tests/{n}.rs")))
            })
            .collect();
        let integration = std::fs::read_to_string(dir.join("tests/integration.rs")).unwrap_or_default();
        listed.extend(modules(&integration).map(|file| format!("tests/{file}")));
        let tests = dir.join("tests");
        let mut files: Vec<String> = std::fs::read_dir(&tests)
            .map_err(|e| format!("{}: {e}", tests.display()))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| name.ends_with(".rs"))
            .collect();
        files.sort();
        for file in files {
            let path = format!("tests/{file}");
            if !listed.contains(&path) {
                let relative = dir.strip_prefix(root).unwrap_or(&dir).join(&path);
                missing.push(relative.display().to_string());
            }
        }
    }
    Ok(missing)
}

/// The files of `#[path = "file.rs"]` attributes in `integration.rs`.
fn modules(integration: &str) -> impl Iterator<Item = &str> {
    integration.lines().filter_map(|line| {
        line.trim()
            .strip_prefix("#[path = \"")
            .and_then(|rest| rest.strip_suffix("\"]"))
    })
}

/// `Err` naming the unlisted files, for `cargo xtask test`.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let missing = unlisted(root)?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "these test files would never run (their crate sets `autotests = false`): add each to \
         its crate's tests/integration.rs as `#[path = \"file.rs\"] mod file;`, or as a \
         `[[test]]` target in its Cargo.toml:\n  {}",
        missing.join("\n  ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_test_file_listed_nowhere_is_found() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path();
        let krate = root.join("crates/demo");
        write(
            &krate.join("Cargo.toml"),
            "[package]\nname = \"demo\"\nautotests = false\n\n[[test]]\nname = \"integration\"\npath = \"tests/integration.rs\"\n\n[[test]]\nname = \"alone\"\n",
        );
        write(
            &krate.join("tests/integration.rs"),
            "//! Doc.\n\n#[path = \"a.rs\"]\nmod a;\n",
        );
        for file in ["a.rs", "alone.rs", "forgotten.rs"] {
            write(&krate.join("tests").join(file), "#[test]\nfn t() {}\n");
        }
        // A crate with cargo's discovery on is not checked.
        write(
            &root.join("crates/other/Cargo.toml"),
            "[package]\nname = \"other\"\n",
        );
        write(&root.join("crates/other/tests/x.rs"), "");
        let found = unlisted(root);
        let checked = check(root);
        assert_eq!(found, Ok(vec!["crates/demo/tests/forgotten.rs".to_string()]));
        assert!(checked.is_err_and(|e| e.contains("crates/demo/tests/forgotten.rs")));
    }

    #[test]
    fn every_test_file_of_this_workspace_is_listed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert_eq!(unlisted(&root), Ok(Vec::new()));
    }
}
