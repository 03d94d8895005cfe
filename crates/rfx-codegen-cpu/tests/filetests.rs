//! CPU file tests, as Cranelift's filetests: each `tests/filetests/*.lir` is a LIR program after
//! a `target NAME` line (`baseline` or `avx2`), and its CLIF for that target, each kernel's
//! chosen plan first, is compared with the blessed snapshot in `tests/snapshots` (bless with
//! `cargo insta review`, or `INSTA_UPDATE=always`). A pinned target makes the text the same on
//! every machine that can run it; an `avx2` file on a CPU without AVX2 and FMA is skipped, and
//! the test says so.

use std::path::{Path, PathBuf};

use rfx_codegen_cpu::dump_with;
use rfx_lower::{BackendError, CompileOptions, CpuTarget};

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "lir"))
        .collect();
    files.sort();
    files
}

/// The CLIF of the file at `path` for its target, or why its target cannot run here.
fn clif_of(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (header, program) = text
        .split_once('\n')
        .unwrap_or_else(|| panic!("{}: no `target` line", path.display()));
    let cpu_target = header
        .strip_prefix("target ")
        .and_then(CpuTarget::from_name)
        .unwrap_or_else(|| {
            panic!(
                "{}: `{header}` is not `target baseline` or `target avx2`",
                path.display()
            )
        });
    let lir = rfx_ir::lir::parse(program).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rfx_ir::lir::verify(&lir).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    let options = CompileOptions {
        cpu_target,
        ..CompileOptions::default()
    };
    match dump_with(&lir, &options) {
        Ok(kernels) => Ok(kernels
            .into_iter()
            .map(|(name, clif, _)| format!("== {name}\n{clif}"))
            .collect()),
        Err(BackendError::Unavailable { reason, .. }) if cpu_target == CpuTarget::Avx2 => Err(reason),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

#[test]
fn every_file_gives_its_blessed_clif() {
    let files = files();
    assert!(files.len() >= 8, "{} file tests", files.len());
    for path in files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("file")
            .to_string();
        match clif_of(&path) {
            Ok(clif) => insta::assert_snapshot!(stem.as_str(), clif),
            Err(reason) => eprintln!("skipped {stem}: {reason}"),
        }
    }
}

/// The plans the files pin: one file per loop shape, and the AOT routines on `avx2`.
#[test]
fn the_files_cover_every_plan() {
    let mut plans = Vec::new();
    for path in files() {
        if let Ok(clif) = clif_of(&path) {
            plans.extend(
                clif.lines()
                    .filter_map(|l| l.strip_prefix("; plan: "))
                    .map(str::to_string),
            );
        }
    }
    let mut wanted = vec![
        "elementwise",
        "scan",
        "reduction, partial sums",
        "reduction, outputs in lanes",
        "reduction, one output at a time",
    ];
    if clif_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests/tiled_sincos.lir")).is_ok() {
        wanted.extend(["elementwise, 4 lanes, AOT routines on tiles", "in tiled rows"]);
    }
    for want in wanted {
        assert!(
            plans.iter().any(|p| p.contains(want)),
            "no file plans `{want}`: {plans:?}"
        );
    }
}
