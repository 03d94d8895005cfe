//! The dependency rule: which crate may depend on which.
//!
//! The table below is the machine-checked form of the layering in `ARCHITECTURE.md`; change
//! both together. Normal and build dependencies are checked; dev-dependencies may additionally
//! use any workspace crate that does not depend on the crate under test (tests may, say, run
//! `rfx-opt` to produce MIR for a code generator's conformance suite).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// `(crate, workspace crates it may depend on)`.
pub(crate) const ALLOWED_WORKSPACE_DEPS: &[(&str, &[&str])] = &[
    ("rfx-ir", &[]),
    ("rfx-opt", &["rfx-ir"]),
    ("rfx-autodiff", &["rfx-ir"]),
    ("rfx-lower", &["rfx-ir"]),
    ("rfx-codegen-cpu", &["rfx-ir", "rfx-lower"]),
    ("rfx-codegen-cuda", &["rfx-ir", "rfx-lower"]),
    ("rfx-codegen-metal", &["rfx-ir", "rfx-lower"]),
    ("rfx-codegen-c", &["rfx-ir", "rfx-lower"]),
    (
        "rfx-runtime",
        &[
            "rfx-ir",
            "rfx-opt",
            "rfx-autodiff",
            "rfx-lower",
            "rfx-codegen-cpu",
            "rfx-codegen-cuda",
            "rfx-codegen-metal",
            "rfx-codegen-c",
        ],
    ),
    // The facade reaches the JIT backends through the runtime only; source export
    // (`rfx::export`) is an API of its own, so the facade calls `rfx-codegen-c` for it.
    (
        "rfx",
        &[
            "rfx-ir",
            "rfx-opt",
            "rfx-autodiff",
            "rfx-lower",
            "rfx-runtime",
            "rfx-codegen-c",
        ],
    ),
    ("rfx-control", &["rfx", "rfx-ir"]),
    // The checking crate drives backends through the `Backend` trait only; code generators
    // dev-depend on it for the conformance suite.
    ("rfx-check", &["rfx-ir", "rfx-opt", "rfx-autodiff", "rfx-lower"]),
    (
        "rfx-cli",
        &[
            "rfx",
            "rfx-ir",
            "rfx-opt",
            "rfx-autodiff",
            "rfx-lower",
            "rfx-runtime",
            "rfx-codegen-cpu",
            "rfx-codegen-cuda",
            "rfx-codegen-metal",
            "rfx-codegen-c",
            "rfx-control",
            "rfx-check",
        ],
    ),
    (
        "rfx-python",
        &["rfx", "rfx-ir", "rfx-runtime", "rfx-lower", "rfx-autodiff"],
    ),
    // wrenfold's benchmark kernels (`benches/wrenfold`), written on the facade.
    ("wrenfold-bench", &["rfx"]),
    ("xtask", &[]),
];

/// Heavy third-party crates and the one crate allowed to use each.
pub(crate) const EXCLUSIVE_DEPS: &[(&str, &str)] = &[
    ("egg", "rfx-opt"),
    ("cranelift-codegen", "rfx-codegen-cpu"),
    ("cranelift-frontend", "rfx-codegen-cpu"),
    ("cranelift-module", "rfx-codegen-cpu"),
    ("cranelift-jit", "rfx-codegen-cpu"),
    ("cranelift-native", "rfx-codegen-cpu"),
    ("cudarc", "rfx-codegen-cuda"),
    ("naga", "rfx-codegen-metal"),
    ("wgpu", "rfx-codegen-metal"),
    ("pyo3", "rfx-python"),
    ("numpy", "rfx-python"),
    ("urdf-rs", "rfx-control"),
    ("nalgebra", "rfx"),
];

/// The dependencies of one manifest, by table.
#[derive(Debug, Default)]
pub(crate) struct ManifestDeps {
    /// The package name.
    pub(crate) name: String,
    /// `[dependencies]`, `[build-dependencies]` and their `target.*` forms.
    pub(crate) normal: Vec<String>,
    /// `[dev-dependencies]` and `target.*.dev-dependencies`.
    pub(crate) dev: Vec<String>,
}

/// Reads the dependency names of a `Cargo.toml`.
pub(crate) fn read_manifest(text: &str) -> Result<ManifestDeps, String> {
    let value: toml::Table = text.parse().map_err(|e| format!("invalid TOML: {e}"))?;
    let name = value
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .ok_or("no package.name")?
        .to_string();
    let mut deps = ManifestDeps {
        name,
        ..ManifestDeps::default()
    };
    let mut collect = |table: &toml::Table| {
        for (key, is_dev) in [
            ("dependencies", false),
            ("build-dependencies", false),
            ("dev-dependencies", true),
        ] {
            if let Some(section) = table.get(key).and_then(|s| s.as_table()) {
                for (dep_key, spec) in section {
                    // `foo = { package = "bar" }` renames: the real crate is `bar`.
                    let real = spec.get("package").and_then(|p| p.as_str()).unwrap_or(dep_key);
                    let list = if is_dev { &mut deps.dev } else { &mut deps.normal };
                    list.push(real.to_string());
                }
            }
        }
    };
    collect(&value);
    if let Some(targets) = value.get("target").and_then(|t| t.as_table()) {
        for target in targets.values().filter_map(|t| t.as_table()) {
            collect(target);
        }
    }
    Ok(deps)
}

/// Checks one manifest's dependencies; returns the violations.
pub(crate) fn check_manifest(deps: &ManifestDeps) -> Vec<String> {
    let mut problems = Vec::new();
    let rules: BTreeMap<&str, &[&str]> = ALLOWED_WORKSPACE_DEPS.iter().copied().collect();
    let Some(allowed) = rules.get(deps.name.as_str()) else {
        return vec![format!(
            "crate `{}` is not in the dependency rule table (xtask/src/deps.rs)",
            deps.name
        )];
    };
    for dep in &deps.normal {
        if rules.contains_key(dep.as_str()) && dep != &deps.name && !allowed.contains(&dep.as_str()) {
            problems.push(format!(
                "`{}` may not depend on `{dep}` (allowed: {allowed:?})",
                deps.name
            ));
        }
        if let Some((_, owner)) = EXCLUSIVE_DEPS.iter().find(|(heavy, _)| heavy == dep)
            && *owner != deps.name
        {
            problems.push(format!(
                "`{dep}` may only be used by `{owner}`, not by `{}`",
                deps.name
            ));
        }
    }
    for dep in &deps.dev {
        let dep_allowed = rules
            .get(dep.as_str())
            .is_some_and(|its| !its.contains(&deps.name.as_str()));
        if rules.contains_key(dep.as_str()) && dep != &deps.name && !dep_allowed {
            problems.push(format!(
                "`{}` may not dev-depend on `{dep}`, which depends on it",
                deps.name
            ));
        }
    }
    problems
}

/// Checks every crate under `root/crates`, `root/benches` and `root/xtask`.
pub(crate) fn check_workspace(root: &Path) -> Result<String, String> {
    let mut manifests = Vec::new();
    let crates_dir = root.join("crates");
    let entries = std::fs::read_dir(&crates_dir).map_err(|e| format!("{}: {e}", crates_dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path().join("Cargo.toml");
        if path.exists() {
            manifests.push(path);
        }
    }
    // Benchmark crates (`benches/*/Cargo.toml`) are workspace members too.
    if let Ok(entries) = std::fs::read_dir(root.join("benches")) {
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path().join("Cargo.toml");
            if path.exists() {
                manifests.push(path);
            }
        }
    }
    manifests.push(root.join("xtask/Cargo.toml"));
    manifests.sort();
    let mut report = String::new();
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for path in &manifests {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let deps = read_manifest(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        problems.extend(check_manifest(&deps));
        let _ = writeln!(report, "ok  {:<20} {}", deps.name, deps.normal.join(", "));
        seen.push(deps.name);
    }
    for (name, _) in ALLOWED_WORKSPACE_DEPS {
        if !seen.iter().any(|s| s == name) {
            problems.push(format!("crate `{name}` from the rule table has no manifest"));
        }
    }
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_follows_the_dependency_rule() {
        let root = crate::workspace_root();
        if let Err(problems) = check_workspace(&root) {
            panic!("dependency rule violated:\n{problems}");
        }
    }

    #[test]
    fn a_code_generator_depending_on_the_optimiser_is_rejected() {
        let deps = read_manifest(
            "[package]\nname = \"rfx-codegen-cpu\"\n[dependencies]\nrfx-opt = { path = \"../rfx-opt\" }\nrfx-lower.workspace = true\n",
        )
        .unwrap();
        let problems = check_manifest(&deps);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("may not depend on `rfx-opt`"));
    }

    #[test]
    fn a_heavy_dependency_outside_its_crate_is_rejected() {
        let deps = read_manifest(
            "[package]\nname = \"rfx-ir\"\n[target.'cfg(unix)'.dependencies]\ncranelift = { package = \"cranelift-codegen\", version = \"0.135\" }\n",
        )
        .unwrap();
        assert_eq!(
            check_manifest(&deps),
            vec!["`cranelift-codegen` may only be used by `rfx-codegen-cpu`, not by `rfx-ir`"]
        );
    }

    #[test]
    fn the_ir_may_not_depend_on_anything_in_the_workspace() {
        let deps =
            read_manifest("[package]\nname = \"rfx-ir\"\n[dependencies]\nrfx-lower = \"0.1\"\n").unwrap();
        assert_eq!(check_manifest(&deps).len(), 1);
    }

    #[test]
    fn the_checking_crate_reaches_backends_only_through_the_trait() {
        let deps = read_manifest(
            "[package]\nname = \"rfx-check\"\n[dependencies]\nrfx-lower.workspace = true\nrfx-codegen-cpu.workspace = true\n[dev-dependencies]\nrfx-codegen-cuda = { path = \"../rfx-codegen-cuda\" }\n",
        )
        .unwrap();
        let problems = check_manifest(&deps);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("may not depend on `rfx-codegen-cpu`"));
        // A code generator's tests may use it (it does not depend on them); the optimiser's
        // may not (it depends on the optimiser).
        let backend = read_manifest(
            "[package]\nname = \"rfx-codegen-metal\"\n[dev-dependencies]\nrfx-check = { path = \"../rfx-check\" }\n",
        )
        .unwrap();
        assert!(check_manifest(&backend).is_empty());
        let optimiser = read_manifest(
            "[package]\nname = \"rfx-opt\"\n[dev-dependencies]\nrfx-check = { path = \"../rfx-check\" }\n",
        )
        .unwrap();
        assert_eq!(check_manifest(&optimiser).len(), 1);
    }

    #[test]
    fn a_dev_dependency_cycle_is_rejected() {
        let deps =
            read_manifest("[package]\nname = \"rfx-ir\"\n[dev-dependencies]\nrfx-opt = \"0.1\"\n").unwrap();
        assert_eq!(check_manifest(&deps).len(), 1);
    }
}
