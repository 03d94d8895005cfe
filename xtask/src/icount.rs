//! `cargo xtask icount`: the instruction-count gate.
//!
//! Time on a shared 2-core machine is noise; the number of instructions a path executes is
//! not. The gate builds `rfx-cli`'s example `icount` (it runs the CPU backend only) in the
//! `test` profile with the workspace's test features, which `cargo xtask test` has already
//! built (a release build would add minutes to CI; the JIT's generated code is the same in both, and the Rust paths around it are counted
//! at the test profile's optimisation, with debug assertions and Cranelift's verifier on), runs each
//! measured path under `valgrind --tool=callgrind` with collection switched on only inside the
//! example's `icount_measured_region`, and divides callgrind's instruction total by the
//! path's iterations. The paths are compiled for a pinned CPU target (the example's
//! `TARGET`; x86-64-v3 for the paths named `_avx2`, which the gate skips on a CPU without AVX2
//! and FMA), so the counts are the same on every x86-64 machine; a path fails when it executes
//! more than `--threshold-pct` (10) percent more instructions per call than
//! `baselines/icount-x86_64.json`, and `--bless` re-records that file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// The measured paths and how many times each runs under callgrind. The counts are
/// deterministic, so the iterations only amortise the loop; they are kept small because
/// callgrind runs code about 50 times slower.
pub(crate) const PATHS: [(&str, u64); 8] = [
    ("pid_clip_n1.run", 2000),
    ("pid_clip_n1.run_args", 2000),
    ("pid_clip_n1.jit_call", 2000),
    ("compile_20op", 3),
    ("fused_chain_n1024.run_args", 200),
    ("chain10_n1024.run_args", 200),
    ("pid_clip_n1024_avx2.run_args", 200),
    ("value_and_grad_sum_sq_n1024_avx2.run_args", 200),
];

/// The exit status of the example for a path this CPU cannot run (its `UNAVAILABLE`: an
/// `_avx2` path without AVX2 and FMA).
const UNAVAILABLE: i32 = 3;

/// The widest path name, for the table.
const NAME_WIDTH: usize = 42;

/// The baseline file, relative to the workspace root.
pub(crate) const BASELINE: &str = "baselines/icount-x86_64.json";

/// One measured path: its instructions per call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Count {
    pub(crate) iterations: u64,
    pub(crate) per_call: f64,
}

/// A set of counts with what they depend on besides the code.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Report {
    /// `valgrind --version` (`valgrind-3.19.0`).
    pub(crate) valgrind: String,
    /// The CPU target the paths were compiled for (`baseline`; the `_avx2` paths' is
    /// x86-64-v3).
    pub(crate) target: String,
    pub(crate) counts: BTreeMap<String, Count>,
    /// The paths this CPU could not run (measured reports only; never written).
    pub(crate) skipped: Vec<String>,
}

impl Report {
    /// Reads a report or a baseline (the same layout).
    pub(crate) fn parse(text: &str) -> Result<Report, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        let field = |name: &str| {
            doc.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("no `{name}`"))
        };
        let paths = doc
            .get("paths")
            .and_then(Value::as_object)
            .ok_or("no `paths` object")?;
        let mut counts = BTreeMap::new();
        for (name, entry) in paths {
            let number = |key: &str| {
                entry
                    .get(key)
                    .and_then(Value::as_f64)
                    .ok_or_else(|| format!("path `{name}` has no number `{key}`"))
            };
            counts.insert(
                name.clone(),
                Count {
                    iterations: number("iterations")? as u64,
                    per_call: number("instructions_per_call")?,
                },
            );
        }
        Ok(Report {
            valgrind: field("valgrind")?,
            target: field("target")?,
            counts,
            skipped: Vec::new(),
        })
    }

    /// The report as pretty JSON (paths in name order).
    pub(crate) fn to_json(&self, threshold_pct: f64) -> String {
        let paths: serde_json::Map<String, Value> = self
            .counts
            .iter()
            .map(|(name, c)| {
                (
                    name.clone(),
                    json!({ "iterations": c.iterations, "instructions_per_call": c.per_call }),
                )
            })
            .collect();
        let doc = json!({
            "what": "instructions per call under valgrind --tool=callgrind, from cargo xtask icount",
            "valgrind": self.valgrind,
            "target": self.target,
            "threshold_pct": threshold_pct,
            "paths": paths,
        });
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
    }
}

/// How a path compares with its baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    /// More instructions than the threshold allows: fails the gate.
    Slower,
    /// Fewer by more than the threshold: passes, and the baseline should be re-recorded.
    Faster,
    /// In the baseline, not measured: fails the gate.
    Missing,
    /// In the baseline, not run because this CPU cannot (an `_avx2` path without AVX2): passes.
    Skipped,
    /// Measured, not in the baseline: passes (bless to add it).
    New,
}

/// One row of the comparison table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub(crate) path: String,
    pub(crate) baseline: Option<f64>,
    pub(crate) current: Option<f64>,
    pub(crate) verdict: Verdict,
}

impl Row {
    /// The change in percent, where both counts exist.
    pub(crate) fn change_pct(&self) -> Option<f64> {
        Some((self.current? / self.baseline?.max(1e-9) - 1.0) * 100.0)
    }
}

/// Compares every path of `baseline` and `current`.
pub(crate) fn compare(baseline: &Report, current: &Report, threshold_pct: f64) -> Vec<Row> {
    let mut names: Vec<&String> = baseline.counts.keys().chain(current.counts.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|path| {
            let base = baseline.counts.get(path).map(|c| c.per_call);
            let cur = current.counts.get(path).map(|c| c.per_call);
            let verdict = match (base, cur) {
                (Some(b), Some(c)) if c > b * (1.0 + threshold_pct / 100.0) => Verdict::Slower,
                (Some(b), Some(c)) if c < b * (1.0 - threshold_pct / 100.0) => Verdict::Faster,
                (Some(_), Some(_)) => Verdict::Ok,
                (Some(_), None) if current.skipped.contains(path) => Verdict::Skipped,
                (Some(_), None) => Verdict::Missing,
                (None, _) => Verdict::New,
            };
            Row {
                path: path.clone(),
                baseline: base,
                current: cur,
                verdict,
            }
        })
        .collect()
}

/// Whether the rows pass the gate (no path slower, none missing).
pub(crate) fn passes(rows: &[Row]) -> bool {
    rows.iter()
        .all(|r| !matches!(r.verdict, Verdict::Slower | Verdict::Missing))
}

/// The comparison table, and the notes below it.
pub(crate) fn table(rows: &[Row], baseline: &Report, current: &Report, threshold_pct: f64) -> String {
    let mut out = format!(
        "{:<NAME_WIDTH$} {:>14} {:>14} {:>9}  verdict (threshold {threshold_pct}%)\n",
        "path", "baseline", "current", "change"
    );
    let number = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for r in rows {
        let verdict = match r.verdict {
            Verdict::Ok => "ok",
            Verdict::Slower => "SLOWER",
            Verdict::Faster => "faster",
            Verdict::Missing => "MISSING",
            Verdict::Skipped => "skipped (this CPU lacks AVX2 or FMA)",
            Verdict::New => "new",
        };
        out += &format!(
            "{:<NAME_WIDTH$} {:>14} {:>14} {:>9}  {verdict}\n",
            r.path,
            number(r.baseline),
            number(r.current),
            r.change_pct().map_or("-".to_string(), |c| format!("{c:+.1}%")),
        );
    }
    out += &format!(
        "(instructions per call under callgrind; target {}, {})\n",
        current.target, current.valgrind
    );
    if baseline.target != current.target {
        out += &format!(
            "note: the baseline was recorded for target {}, this run is for {}: re-record it\n",
            baseline.target, current.target
        );
    }
    if baseline.valgrind != current.valgrind {
        out += &format!(
            "note: the baseline was recorded with {}, this run used {}\n",
            baseline.valgrind, current.valgrind
        );
    }
    if rows
        .iter()
        .any(|r| matches!(r.verdict, Verdict::Faster | Verdict::New))
    {
        out += &format!(
            "note: paths more than {threshold_pct}% faster than the baseline, or new: if that is \
             work that landed, re-record the baseline with `cargo xtask icount --bless`\n"
        );
    }
    if !passes(rows) {
        out += &format!(
            "the instruction-count gate FAILED: a path executes more than {threshold_pct}% more \
             instructions per call than {BASELINE} (or was not measured)\n"
        );
    }
    out
}

/// `current` with path `spec`'s count multiplied (`PATH=FACTOR`, e.g.
/// `chain10_n1024.run_args=1.15`): the fault injection the gate's own check uses.
pub(crate) fn inject_slowdown(current: &mut Report, spec: &str) -> Result<(), String> {
    let (path, factor) = spec
        .split_once('=')
        .ok_or_else(|| format!("--inject-slowdown takes PATH=FACTOR, got `{spec}`"))?;
    let factor: f64 = factor
        .parse()
        .ok()
        .filter(|f: &f64| f.is_finite() && *f > 0.0)
        .ok_or_else(|| format!("--inject-slowdown: `{factor}` is not a positive factor"))?;
    let count = current
        .counts
        .get_mut(path)
        .ok_or_else(|| format!("--inject-slowdown: no measured path `{path}`"))?;
    count.per_call *= factor;
    Ok(())
}

/// The instruction total (`Ir`) of a callgrind output file: its `totals:` line (or `summary:`
/// in older files).
pub(crate) fn callgrind_total(text: &str) -> Result<u64, String> {
    let events: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("events:"))
        .ok_or("callgrind output without an `events:` line")?
        .split_whitespace()
        .collect();
    let column = events
        .iter()
        .position(|e| *e == "Ir")
        .ok_or("callgrind output does not count `Ir`")?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .or_else(|| text.lines().find_map(|l| l.strip_prefix("summary:")))
        .ok_or("callgrind output without a `totals:` line")?;
    line.split_whitespace()
        .nth(column)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("callgrind totals `{}` have no Ir count", line.trim()))
}

/// The options of `cargo xtask icount`.
#[derive(Debug, Default, PartialEq)]
struct Options {
    bless: bool,
    baseline: Option<PathBuf>,
    threshold_pct: Option<f64>,
    /// Compare this report instead of measuring.
    current: Option<PathBuf>,
    inject_slowdown: Option<String>,
    only: Option<String>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut opts = Options::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("`{flag}` needs a value"))
        };
        match flag.as_str() {
            "--bless" => opts.bless = true,
            "--baseline" => opts.baseline = Some(PathBuf::from(value()?)),
            "--threshold-pct" => {
                let v = value()?;
                opts.threshold_pct = Some(
                    v.parse()
                        .ok()
                        .filter(|t: &f64| *t > 0.0)
                        .ok_or_else(|| format!("--threshold-pct needs a positive number, got `{v}`"))?,
                );
            }
            "--current" => opts.current = Some(PathBuf::from(value()?)),
            "--inject-slowdown" => opts.inject_slowdown = Some(value()?),
            "--only" => opts.only = Some(value()?),
            other => {
                return Err(format!(
                    "unknown argument `{other}` (icount takes --bless, --baseline FILE, \
                     --threshold-pct N, --current FILE, --only PATH)"
                ));
            }
        }
    }
    if opts.bless && (opts.current.is_some() || opts.inject_slowdown.is_some() || opts.only.is_some()) {
        return Err("--bless measures every path: it takes no --current, --only or --inject-slowdown".into());
    }
    Ok(opts)
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

fn output_of(command: &mut Command, what: &str) -> Result<String, String> {
    let out = command.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Builds the example and measures `paths` under callgrind.
fn measure(root: &Path, paths: &[(&str, u64)]) -> Result<Report, String> {
    let valgrind = output_of(
        Command::new("valgrind").arg("--version"),
        "valgrind --version (install valgrind: apt-get install valgrind)",
    )?;
    let status = crate::cargo(root)
        // The same packages and features as `cargo xtask test`'s `cargo test --workspace
        // --features rfx/nalgebra`, which builds the examples too: after it this build
        // compiles nothing. (`-p rfx-cli --no-default-features` would resolve other features
        // of Cranelift, egg and the rfx crates, and compile them all again.)
        .args([
            "build",
            "--profile",
            "test",
            "--quiet",
            "--workspace",
            "--features",
            "rfx/nalgebra",
        ])
        .args(["--example", "icount"])
        .status()
        .map_err(|e| format!("building the icount example: {e}"))?;
    if !status.success() {
        return Err(format!("building the icount example failed: {status}"));
    }
    let binary = target_dir(root).join("debug/examples/icount");
    let target = output_of(Command::new(&binary).arg("--target"), "icount --target")?;
    let dir = target_dir(root).join("icount");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut counts = BTreeMap::new();
    let mut skipped = Vec::new();
    for &(path, iterations) in paths {
        let start = std::time::Instant::now();
        let out_file = dir.join(format!("callgrind.{path}.out"));
        let out = Command::new("valgrind")
            .args(["--tool=callgrind", "--collect-atstart=no"])
            .arg("--toggle-collect=*icount_measured_region*")
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg(&binary)
            .args([path, &iterations.to_string()])
            .output()
            .map_err(|e| format!("running valgrind: {e}"))?;
        if out.status.code() == Some(UNAVAILABLE) {
            eprintln!("icount: {path:<NAME_WIDTH$} skipped: this CPU lacks AVX2 or FMA");
            skipped.push(path.to_string());
            continue;
        }
        if !out.status.success() {
            return Err(format!(
                "icount {path} under callgrind failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let text = std::fs::read_to_string(&out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
        let total = callgrind_total(&text)?;
        if total == 0 {
            return Err(format!(
                "callgrind counted no instructions for {path}: the measured region was not found"
            ));
        }
        let per_call = (total as f64 / iterations as f64 * 10.0).round() / 10.0;
        eprintln!(
            "icount: {path:<NAME_WIDTH$} {per_call:>14.1} instructions per call ({:.1} s)",
            start.elapsed().as_secs_f64()
        );
        counts.insert(path.to_string(), Count { iterations, per_call });
    }
    Ok(Report {
        valgrind,
        target,
        counts,
        skipped,
    })
}

fn read_report(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Report::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `cargo xtask icount [--bless] [--baseline FILE] [--threshold-pct 10] [--only PATH]`
/// (and, for the gate's own check, `--current FILE --inject-slowdown PATH=FACTOR`): returns
/// whether the gate passed.
pub(crate) fn icount(root: &Path, args: &[String]) -> Result<bool, String> {
    let opts = options(args)?;
    let baseline_path = opts.baseline.clone().unwrap_or_else(|| root.join(BASELINE));
    let threshold = opts.threshold_pct.unwrap_or(10.0);
    let start = std::time::Instant::now();
    let mut current = match &opts.current {
        Some(file) => read_report(file)?,
        None => {
            let paths: Vec<(&str, u64)> = PATHS
                .into_iter()
                .filter(|(p, _)| opts.only.as_deref().is_none_or(|only| only == *p))
                .collect();
            if paths.is_empty() {
                return Err(format!(
                    "--only: no path `{}` (paths: {})",
                    opts.only.unwrap_or_default(),
                    PATHS.map(|p| p.0).join(", ")
                ));
            }
            let report = measure(root, &paths)?;
            let file = target_dir(root).join("icount/current.json");
            std::fs::write(&file, report.to_json(threshold))
                .map_err(|e| format!("{}: {e}", file.display()))?;
            eprintln!(
                "icount: measured in {:.0} s, written to {}",
                start.elapsed().as_secs_f64(),
                file.display()
            );
            report
        }
    };
    if opts.bless {
        if !current.skipped.is_empty() {
            return Err(format!(
                "--bless needs every path measured; this CPU skipped {}",
                current.skipped.join(", ")
            ));
        }
        std::fs::write(&baseline_path, current.to_json(threshold))
            .map_err(|e| format!("{}: {e}", baseline_path.display()))?;
        println!("wrote {}", baseline_path.display());
        return Ok(true);
    }
    if let Some(spec) = &opts.inject_slowdown {
        inject_slowdown(&mut current, spec)?;
        println!("icount: injected slowdown {spec}");
    }
    let mut baseline = read_report(&baseline_path)?;
    if opts.only.is_some() {
        baseline
            .counts
            .retain(|path, _| current.counts.contains_key(path));
    }
    let rows = compare(&baseline, &current, threshold);
    print!("{}", table(&rows, &baseline, &current, threshold));
    Ok(passes(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded() -> Report {
        let path = crate::workspace_root().join(BASELINE);
        read_report(&path).expect("the recorded baseline")
    }

    /// The recorded baseline measures every path of the gate, for the pinned target.
    #[test]
    fn the_baseline_covers_every_path() {
        let base = recorded();
        let names: Vec<&str> = base.counts.keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = PATHS.iter().map(|p| p.0).collect();
        expected.sort();
        assert_eq!(names, expected);
        assert_eq!(base.target, "baseline");
        assert!(base.counts.values().all(|c| c.per_call > 10.0), "{base:?}");
    }

    /// The real counts against themselves pass; the same counts with a 15% slowdown injected
    /// into one path fail on exactly that path, and the table says so.
    #[test]
    fn a_fifteen_percent_slowdown_on_one_path_fails_the_gate() {
        let base = recorded();
        assert!(passes(&compare(&base, &base, 10.0)));
        for (path, _) in PATHS {
            let mut slowed = base.clone();
            inject_slowdown(&mut slowed, &format!("{path}=1.15")).expect("inject");
            let rows = compare(&base, &slowed, 10.0);
            assert!(!passes(&rows), "{path}: {rows:?}");
            let flagged: Vec<&str> = rows
                .iter()
                .filter(|r| r.verdict == Verdict::Slower)
                .map(|r| r.path.as_str())
                .collect();
            assert_eq!(flagged, vec![path]);
            let change = rows.iter().find(|r| r.path == path).and_then(Row::change_pct);
            assert!(change.is_some_and(|c| (c - 15.0).abs() < 0.01), "{change:?}");
            let text = table(&rows, &base, &slowed, 10.0);
            assert!(text.contains("SLOWER") && text.contains("FAILED"), "{text}");
        }
    }

    /// 9% more instructions passes, 11% fails; 15% fewer passes with a note to bless.
    #[test]
    fn the_threshold_is_ten_percent_each_way() {
        let base = recorded();
        let path = "chain10_n1024.run_args";
        let scaled = |factor: f64| {
            let mut r = base.clone();
            inject_slowdown(&mut r, &format!("{path}={factor}")).expect("inject");
            compare(&base, &r, 10.0)
        };
        assert!(passes(&scaled(1.09)));
        assert!(!passes(&scaled(1.11)));
        let faster = scaled(0.85);
        assert!(passes(&faster));
        assert!(faster.iter().any(|r| r.verdict == Verdict::Faster));
        assert!(table(&faster, &base, &base, 10.0).contains("--bless"));
    }

    #[test]
    fn a_missing_path_fails_and_a_new_one_passes() {
        let base = recorded();
        let mut fewer = base.clone();
        fewer.counts.remove("compile_20op");
        let rows = compare(&base, &fewer, 10.0);
        assert!(!passes(&rows));
        assert!(rows.iter().any(|r| r.verdict == Verdict::Missing));
        let rows = compare(&fewer, &base, 10.0);
        assert!(passes(&rows));
        assert!(rows.iter().any(|r| r.verdict == Verdict::New));
    }

    /// An `_avx2` path the CPU could not run passes as skipped; a path merely absent still
    /// fails, and a skipped path is never written into a report.
    #[test]
    fn a_path_this_cpu_cannot_run_is_skipped_not_missing() {
        let base = recorded();
        let path = "pid_clip_n1024_avx2.run_args";
        let mut current = base.clone();
        current.counts.remove(path);
        assert!(!passes(&compare(&base, &current, 10.0)));
        current.skipped.push(path.to_string());
        let rows = compare(&base, &current, 10.0);
        assert!(passes(&rows), "{rows:?}");
        let row = rows.iter().find(|r| r.path == path).expect("the row");
        assert_eq!(row.verdict, Verdict::Skipped);
        assert!(table(&rows, &base, &current, 10.0).contains("skipped"));
        assert!(!current.to_json(10.0).contains(path));
    }

    #[test]
    fn a_report_round_trips_through_json() {
        let base = recorded();
        assert_eq!(Report::parse(&base.to_json(10.0)).expect("parse"), base);
    }

    #[test]
    fn bad_injections_and_options_are_errors() {
        let mut base = recorded();
        assert!(inject_slowdown(&mut base, "chain10_n1024.run_args").is_err());
        assert!(inject_slowdown(&mut base, "nope=1.15").is_err());
        assert!(inject_slowdown(&mut base, "compile_20op=-1").is_err());
        assert!(options(&["--threshold-pct".into(), "x".into()]).is_err());
        assert!(options(&["--bless".into(), "--only".into(), "compile_20op".into()]).is_err());
        assert!(options(&["--frobnicate".into()]).is_err());
    }

    /// A callgrind file's `totals:` line, in the column of `Ir`.
    #[test]
    fn callgrind_totals_are_read_by_event_column() {
        let text = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\nevents: Ir Dr\n\
                    fn=(1) main\n0 5 2\ntotals: 123456 789\n";
        assert_eq!(callgrind_total(text), Ok(123_456));
        let text = "events: Dr Ir\nsummary: 7 42\n";
        assert_eq!(callgrind_total(text), Ok(42));
        assert!(callgrind_total("events: Ir\n").is_err());
        assert!(callgrind_total("totals: 5\n").is_err());
    }
}
