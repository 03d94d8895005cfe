//! `cargo xtask perf-check` and `cargo xtask bench-baseline`.
//!
//! The machine is shared and noisy, so absolute times are not compared. Every `rfx bench`
//! result carries `normalised_p50`, the median over 31 rounds of a kernel batch's time divided by
//! the time of a plain Rust `out = x + y` loop's batch run right after it; perf-check compares
//! these *normalised* times, which cancel machine speed and background load to first order
//! (older output without it falls back to `p50 / reference_p50_s`). With
//! `--repeat N` the bench runs N times and each kernel keeps its best normalised time, so one
//! unlucky run cannot fail the check; a kernel that still looks slower is measured again alone
//! (`--confirm N` more runs, default 2) and fails only if its best time over all its runs does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One kernel at one size: its best normalised time, the raw median behind it, and how far
/// apart its runs were.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) normalised: f64,
    pub(crate) p50_s: f64,
    /// `(second worst / best - 1) · 100` over the runs that made this entry (the worst when
    /// there are fewer than four runs; 0 for one run): the kernel's own run-to-run noise, not
    /// moved by one outlier run.
    pub(crate) spread_pct: f64,
}

/// Kernel results keyed by `(kernel, size)`.
pub(crate) type Results = BTreeMap<(String, u64), Entry>;

/// Reads the results of an `rfx bench --json-out` file (or a baseline written by
/// `bench-baseline`, which has the same layout).
pub(crate) fn parse_results(json: &str) -> Result<Results, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| format!("invalid JSON: {e}"))?;
    let results = doc
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no `results` array")?;
    let mut out = Results::new();
    for r in results {
        let kernel = r
            .get("kernel")
            .and_then(Value::as_str)
            .ok_or("result without `kernel`")?
            .to_string();
        let size = r
            .get("size")
            .and_then(Value::as_u64)
            .ok_or("result without `size`")?;
        let p50 = r
            .get("batch_p50_s")
            .and_then(Value::as_f64)
            .or_else(|| r.pointer("/timing/p50_s").and_then(Value::as_f64))
            .ok_or("result without `batch_p50_s` or `timing.p50_s`")?;
        let reference = r
            .get("reference_p50_s")
            .and_then(Value::as_f64)
            .ok_or("result without `reference_p50_s`")?;
        // A baseline written by `bench-baseline` carries the best of its runs; the raw fields
        // beside it are only its last run's, and comparing a best-of-N run against one run
        // would make every kernel look faster.
        let entry = match (
            r.get("best_normalised").and_then(Value::as_f64),
            r.get("best_p50_s").and_then(Value::as_f64),
        ) {
            (Some(normalised), Some(p50_s)) => Entry {
                normalised,
                p50_s,
                spread_pct: r.get("spread_pct").and_then(Value::as_f64).unwrap_or(0.0),
            },
            _ => Entry {
                // Older bench output has no paired ratio; the ratio of the medians stands in.
                normalised: r
                    .get("normalised_p50")
                    .and_then(Value::as_f64)
                    .unwrap_or(p50 / reference.max(1e-12)),
                p50_s: p50,
                spread_pct: 0.0,
            },
        };
        out.entry((kernel, size))
            .and_modify(|e| {
                if entry.normalised < e.normalised {
                    *e = entry.clone();
                }
            })
            .or_insert(entry);
    }
    Ok(out)
}

/// Keeps, per kernel, the best (smallest) normalised time of several runs, and the spread of
/// its runs (see [`Entry::spread_pct`]).
pub(crate) fn best_of(runs: &[Results]) -> Results {
    let mut best = Results::new();
    let mut all = BTreeMap::<(String, u64), Vec<f64>>::new();
    for run in runs {
        for (key, entry) in run {
            best.entry(key.clone())
                .and_modify(|e| {
                    if entry.normalised < e.normalised {
                        *e = entry.clone();
                    }
                })
                .or_insert_with(|| entry.clone());
            all.entry(key.clone()).or_default().push(entry.normalised);
        }
    }
    for (key, e) in &mut best {
        let mut v = all.remove(key).unwrap_or_default();
        v.sort_by(f64::total_cmp);
        let high = match v.len() {
            0 => e.normalised,
            n if n >= 4 => v[n - 2],
            n => v[n - 1],
        };
        e.spread_pct = (high / e.normalised.max(1e-12) - 1.0) * 100.0;
    }
    best
}

/// `current` with each entry of `more` that is better (a smaller normalised time) in place of
/// the current one: a flagged kernel's confirmation runs only ever add chances to be as fast as
/// its baseline, as the best-of-N runs do.
pub(crate) fn merge_best(current: &Results, more: &[Results]) -> Results {
    let mut merged = current.clone();
    for run in more {
        for (key, entry) in run {
            if let Some(e) = merged.get_mut(key)
                && entry.normalised < e.normalised
            {
                let spread = e.spread_pct;
                *e = entry.clone();
                e.spread_pct = spread;
            }
        }
    }
    merged
}

/// A kernel's verdict.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub(crate) kernel: String,
    pub(crate) size: u64,
    pub(crate) baseline: f64,
    pub(crate) current: Option<f64>,
    pub(crate) change_pct: Option<f64>,
    /// The change allowed: the threshold, or the kernel's own spread between the baseline's
    /// runs where that is larger.
    pub(crate) tolerance_pct: f64,
    pub(crate) slower: bool,
}

/// Compares current results with a baseline.
///
/// Each kernel's change is its normalised time's growth *relative to the median growth of all
/// kernels of the same size* in this run: on a shared machine the whole run drifts together
/// (the reference loop and the kernels do not scale identically with load), and that drift
/// cancels, while one kernel that slowed stands out. A kernel fails when its relative change
/// exceeds `threshold_pct` or it is missing; a whole size group fails when its median growth
/// itself exceeds three times the threshold, or the group's median baseline spread where that
/// is larger (a regression that hits every kernel is not hidden by the median).
///
/// A kernel whose own baseline runs were further apart than the threshold (a memory-bound
/// kernel with eight input streams on a shared machine: 30%) cannot be judged at the
/// threshold; its tolerance is its baseline spread, and the table prints it.
///
/// Only a *slower* run is compensated: when the median kernel got faster, that is as likely
/// improvements landed since the baseline as a faster machine, and dividing by it would make
/// every unchanged kernel look slower (once several kernels speed up by a third or more, an
/// unchanged one shows a regression against a baseline it beats). So the drift is
/// `max(median, 1)`.
pub(crate) fn compare(baseline: &Results, current: &Results, threshold_pct: f64) -> Vec<Row> {
    let ratio = |key: &(String, u64), base: &Entry| {
        current
            .get(key)
            .map(|c| c.normalised / base.normalised.max(1e-12))
    };
    let mut by_size: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (key, base) in baseline {
        if let Some(r) = ratio(key, base) {
            by_size.entry(key.1).or_default().push(r);
        }
    }
    let mut spreads: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (key, base) in baseline {
        spreads.entry(key.1).or_default().push(base.spread_pct);
    }
    let group_tolerance = |size: u64| {
        let mut v = spreads.get(&size).cloned().unwrap_or_default();
        v.sort_by(f64::total_cmp);
        let spread = if v.is_empty() { 0.0 } else { v[v.len() / 2] };
        (3.0 * threshold_pct).max(spread)
    };
    let median = |size: u64| {
        let mut v = by_size.get(&size).cloned().unwrap_or_default();
        v.sort_by(f64::total_cmp);
        // The lower median: with two kernels, one of which slowed, the other is the yardstick.
        if v.is_empty() { 1.0 } else { v[(v.len() - 1) / 2] }
    };
    baseline
        .iter()
        .map(|(key, base)| {
            let cur = current.get(key);
            let drift = median(key.1).max(1.0);
            let change = ratio(key, base).map(|r| (r / drift - 1.0) * 100.0);
            let global = (drift - 1.0) * 100.0 > group_tolerance(key.1);
            let tolerance = threshold_pct.max(base.spread_pct);
            Row {
                kernel: key.0.clone(),
                size: key.1,
                baseline: base.normalised,
                current: cur.map(|c| c.normalised),
                change_pct: change,
                tolerance_pct: tolerance,
                slower: global || change.is_none_or(|c| c > tolerance),
            }
        })
        .collect()
}

/// Prints the comparison table; returns whether every kernel passed.
pub(crate) fn print_rows(rows: &[Row], threshold_pct: f64) -> bool {
    println!(
        "{:<24} {:>9} {:>12} {:>12} {:>9} {:>9}  verdict (threshold {threshold_pct}%)",
        "kernel", "size", "baseline", "current", "change", "allowed"
    );
    let mut ok = true;
    for r in rows {
        let current = r.current.map_or("missing".to_string(), |c| format!("{c:.3}"));
        let change = r.change_pct.map_or("-".to_string(), |c| format!("{c:+.1}%"));
        let verdict = if r.slower {
            "SLOWER"
        } else if r.change_pct.is_some_and(|c| c < -threshold_pct) {
            "faster"
        } else {
            "ok"
        };
        ok &= !r.slower;
        println!(
            "{:<24} {:>9} {:>12.3} {:>12} {:>9} {:>9}  {verdict}",
            r.kernel,
            r.size,
            r.baseline,
            current,
            change,
            format!("{:.0}%", r.tolerance_pct)
        );
    }
    println!("(times are p50 / reference-loop p50 measured in the same run)");
    let faster = rows
        .iter()
        .filter(|r| r.change_pct.is_some_and(|c| c < -threshold_pct))
        .count();
    if faster * 4 >= rows.len() && faster > 0 {
        println!(
            "{faster} of {} results are more than {threshold_pct}% faster than the baseline: \
             if that is work that landed, re-record it with `cargo xtask bench-baseline`",
            rows.len()
        );
    }
    ok
}

/// Options shared by the two commands.
#[derive(Clone)]
pub(crate) struct BenchRun {
    pub(crate) backend: String,
    pub(crate) size: String,
    pub(crate) iterations: String,
    pub(crate) repeat: usize,
    pub(crate) extra: Vec<String>,
}

/// Runs `rfx bench` `repeat` times (release build), returning each run's results and the last
/// JSON document.
pub(crate) fn run_bench(
    root: &Path,
    opts: &BenchRun,
    output: &Path,
) -> Result<(Vec<Results>, String), String> {
    let mut runs = Vec::new();
    let mut last = String::new();
    for i in 0..opts.repeat.max(1) {
        eprintln!("perf: bench run {} of {}", i + 1, opts.repeat.max(1));
        let status = crate::cargo(root)
            .args([
                "run",
                "--release",
                "--quiet",
                "-p",
                "rfx-cli",
                "--",
                "bench",
                "--no-baselines",
            ])
            .args(["--backend", &opts.backend, "--iterations", &opts.iterations])
            .args(if opts.size.contains(',') {
                ["--sizes", &opts.size]
            } else {
                ["--size", &opts.size]
            })
            .args(&opts.extra)
            .arg("--json-out")
            .arg(output)
            .status()
            .map_err(|e| format!("running rfx bench: {e}"))?;
        if !status.success() {
            return Err(format!("rfx bench failed: {status}"));
        }
        last = std::fs::read_to_string(output).map_err(|e| format!("{}: {e}", output.display()))?;
        runs.push(parse_results(&last)?);
    }
    Ok((runs, last))
}

/// Replaces the results of `doc` by `best` (keeping the machine description and revision).
pub(crate) fn with_results(doc: &str, best: &Results) -> Result<String, String> {
    let mut doc: Value = serde_json::from_str(doc).map_err(|e| e.to_string())?;
    if let Some(results) = doc.get_mut("results").and_then(Value::as_array_mut) {
        for r in results.iter_mut() {
            let key = (
                r.get("kernel").and_then(Value::as_str).unwrap_or("").to_string(),
                r.get("size").and_then(Value::as_u64).unwrap_or(0),
            );
            if let (Some(entry), Some(obj)) = (best.get(&key), r.as_object_mut()) {
                obj.insert("best_normalised".into(), Value::from(entry.normalised));
                obj.insert("best_p50_s".into(), Value::from(entry.p50_s));
                obj.insert("spread_pct".into(), Value::from(entry.spread_pct));
            }
        }
    }
    serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())
}

/// Parses `--flag value` pairs.
pub(crate) fn flags(args: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument `{flag}`"))?;
        let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        map.insert(name.to_string(), value.clone());
    }
    Ok(map)
}

/// `cargo xtask perf-check --baseline FILE [--output FILE] [--backend cpu] [--threshold-pct 10]
/// [--repeat 3] [--confirm 2] [--size N | N,M,...] [--iterations N] [--no-run true]`.
pub(crate) fn perf_check(root: &Path, args: &[String]) -> Result<bool, String> {
    let f = flags(args)?;
    let baseline_path = PathBuf::from(f.get("baseline").ok_or("--baseline FILE is required")?);
    let baseline = parse_results(
        &std::fs::read_to_string(&baseline_path).map_err(|e| format!("{}: {e}", baseline_path.display()))?,
    )?;
    let threshold: f64 = f
        .get("threshold-pct")
        .map_or(Ok(10.0), |t| t.parse())
        .map_err(|_| "bad --threshold-pct")?;
    let output = PathBuf::from(
        f.get("output")
            .cloned()
            .unwrap_or_else(|| "target/perf-current.json".into()),
    );
    let current = if f.get("no-run").is_some_and(|v| v == "true") {
        parse_results(&std::fs::read_to_string(&output).map_err(|e| format!("{}: {e}", output.display()))?)?
    } else {
        let sizes: Vec<String> = baseline
            .keys()
            .map(|(_, s)| s.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let opts = BenchRun {
            backend: f.get("backend").cloned().unwrap_or_else(|| "cpu".into()),
            size: f.get("size").cloned().unwrap_or_else(|| sizes.join(",")),
            iterations: f.get("iterations").cloned().unwrap_or_else(|| "200".into()),
            repeat: f.get("repeat").and_then(|r| r.parse().ok()).unwrap_or(3),
            extra: f
                .get("inject-delay-us")
                .map(|d| vec!["--inject-delay-us".to_string(), d.clone()])
                .unwrap_or_default(),
        };
        let (runs, _) = run_bench(root, &opts, &output)?;
        let mut current = best_of(&runs);
        // Kernels that look slower are measured again, alone at their size: on a shared
        // machine one kernel's three runs can all land in a busy spell.
        // A confirmation that makes a kernel faster moves its size group's median drift, which
        // can flag another kernel: that one is confirmed in the next round.
        let confirm: usize = f.get("confirm").and_then(|r| r.parse().ok()).unwrap_or(2);
        let mut confirmed = std::collections::BTreeSet::new();
        for _round in 0..3 {
            let flagged: Vec<(String, u64)> = compare(&baseline, &current, threshold)
                .into_iter()
                .filter(|r| r.slower && r.current.is_some())
                .map(|r| (r.kernel, r.size))
                .filter(|key| !confirmed.contains(key))
                .collect();
            if confirm == 0 || flagged.is_empty() {
                break;
            }
            let scratch = root.join("target/perf-confirm.json");
            for (kernel, size) in &flagged {
                eprintln!("perf: confirming {kernel} at {size}");
                let mut one = BenchRun {
                    size: size.to_string(),
                    repeat: confirm,
                    ..opts.clone()
                };
                one.extra.extend(["--filter".to_string(), kernel.clone()]);
                let (more, _) = run_bench(root, &one, &scratch)?;
                // Only the flagged kernel's entry counts (the filter matches by substring).
                let more: Vec<Results> = more
                    .into_iter()
                    .map(|r| {
                        r.into_iter()
                            .filter(|(k, _)| k.0 == *kernel && k.1 == *size)
                            .collect()
                    })
                    .collect();
                current = merge_best(&current, &more);
            }
            confirmed.extend(flagged);
        }
        current
    };
    Ok(print_rows(&compare(&baseline, &current, threshold), threshold))
}

/// `cargo xtask bench-baseline --output baselines/NAME.json [--backend cpu] [--repeat 5]
/// [--size ...] [--iterations N]`: writes a new baseline (best of the runs, and each kernel's
/// spread between them).
pub(crate) fn bench_baseline(root: &Path, args: &[String]) -> Result<(), String> {
    let f = flags(args)?;
    let output = PathBuf::from(f.get("output").ok_or("--output FILE is required")?);
    let opts = BenchRun {
        backend: f.get("backend").cloned().unwrap_or_else(|| "cpu".into()),
        size: f.get("size").cloned().unwrap_or_else(|| "1,1024,65536".into()),
        iterations: f.get("iterations").cloned().unwrap_or_else(|| "200".into()),
        // Five runs rather than perf-check's three: the spread between them is each kernel's
        // tolerance, and two or three runs underestimate it.
        repeat: f.get("repeat").and_then(|r| r.parse().ok()).unwrap_or(5),
        extra: Vec::new(),
    };
    let scratch = root.join("target/perf-baseline-run.json");
    let (runs, last) = run_bench(root, &opts, &scratch)?;
    let doc = with_results(&last, &best_of(&runs))?;
    std::fs::write(&output, doc).map_err(|e| format!("{}: {e}", output.display()))?;
    println!("wrote {}", output.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(entries: &[(&str, u64, f64, f64)]) -> String {
        let results: Vec<String> = entries
            .iter()
            .map(|(k, n, p50, reference)| {
                format!(r#"{{"kernel":"{k}","size":{n},"timing":{{"p50_s":{p50}}},"reference_p50_s":{reference}}}"#)
            })
            .collect();
        format!(r#"{{"schema_version":1,"results":[{}]}}"#, results.join(","))
    }

    #[test]
    fn an_identical_run_passes() {
        let base = parse_results(&doc(&[("add", 1024, 2e-6, 1e-6), ("sin", 1024, 8e-6, 1e-6)])).unwrap();
        assert!(compare(&base, &base, 10.0).iter().all(|r| !r.slower));
    }

    #[test]
    fn a_slower_kernel_fails_and_a_slower_machine_does_not() {
        let base = parse_results(&doc(&[("add", 1024, 2e-6, 1e-6), ("sin", 1024, 8e-6, 1e-6)])).unwrap();
        // The whole machine twice as slow: the reference loop slows too, nothing fails.
        let loaded = parse_results(&doc(&[("add", 1024, 4e-6, 2e-6), ("sin", 1024, 16e-6, 2e-6)])).unwrap();
        assert!(compare(&base, &loaded, 10.0).iter().all(|r| !r.slower));
        // One kernel 20% slower relative to the reference: it fails, the other passes.
        let regressed =
            parse_results(&doc(&[("add", 1024, 2e-6, 1e-6), ("sin", 1024, 9.6e-6, 1e-6)])).unwrap();
        let rows = compare(&base, &regressed, 10.0);
        assert_eq!(
            rows.iter()
                .filter(|r| r.slower)
                .map(|r| r.kernel.as_str())
                .collect::<Vec<_>>(),
            vec!["sin"]
        );
        assert!(!print_rows(&rows, 10.0));
    }

    /// A kernel flagged by one unlucky set of runs passes once a confirmation run matches its
    /// baseline; a real regression stays slower in every run and still fails. Confirmation runs
    /// replace only entries they beat, and add no kernel.
    #[test]
    fn confirmation_runs_clear_noise_but_not_a_regression() {
        let base = parse_results(&doc(&[("add", 1024, 2e-6, 1e-6), ("sin", 1024, 8e-6, 1e-6)])).unwrap();
        let unlucky = parse_results(&doc(&[("add", 1024, 2e-6, 1e-6), ("sin", 1024, 11e-6, 1e-6)])).unwrap();
        assert!(compare(&base, &unlucky, 10.0).iter().any(|r| r.slower));
        let again = parse_results(&doc(&[("sin", 1024, 8.2e-6, 1e-6), ("cos", 1024, 9e-6, 1e-6)])).unwrap();
        let worse = parse_results(&doc(&[("sin", 1024, 12e-6, 1e-6)])).unwrap();
        let merged = merge_best(&unlucky, &[worse.clone(), again]);
        assert!(compare(&base, &merged, 10.0).iter().all(|r| !r.slower));
        assert!(!merged.contains_key(&("cos".to_string(), 1024)));
        assert_eq!(merged[&("sin".to_string(), 1024)].normalised, 8.2);
        let still = merge_best(&unlucky, &[worse.clone(), worse]);
        assert_eq!(still[&("sin".to_string(), 1024)].normalised, 11.0);
        assert!(
            compare(&base, &still, 10.0)
                .iter()
                .any(|r| r.slower && r.kernel == "sin")
        );
    }

    /// Several kernels got much faster (work that landed after the baseline): the unchanged
    /// ones must not be flagged because the median moved, and a real regression still is.
    #[test]
    fn improvements_do_not_make_unchanged_kernels_fail() {
        let base = parse_results(&doc(&[
            ("add", 1024, 2e-6, 1e-6),
            ("mul", 1024, 2e-6, 1e-6),
            ("pid", 1024, 6e-6, 1e-6),
            ("quat", 1024, 8e-6, 1e-6),
            ("fk", 1024, 20e-6, 1e-6),
        ]))
        .unwrap();
        let improved = parse_results(&doc(&[
            ("add", 1024, 2e-6, 1e-6),
            ("mul", 1024, 2.1e-6, 1e-6),
            ("pid", 1024, 2e-6, 1e-6),
            ("quat", 1024, 4e-6, 1e-6),
            ("fk", 1024, 10e-6, 1e-6),
        ]))
        .unwrap();
        assert!(compare(&base, &improved, 10.0).iter().all(|r| !r.slower));
        let regressed = parse_results(&doc(&[
            ("add", 1024, 2.6e-6, 1e-6),
            ("mul", 1024, 2e-6, 1e-6),
            ("pid", 1024, 2e-6, 1e-6),
            ("quat", 1024, 4e-6, 1e-6),
            ("fk", 1024, 10e-6, 1e-6),
        ]))
        .unwrap();
        let rows = compare(&base, &regressed, 10.0);
        let flagged: Vec<&str> = rows
            .iter()
            .filter(|r| r.slower)
            .map(|r| r.kernel.as_str())
            .collect();
        assert_eq!(flagged, vec!["add"]);
    }

    /// A baseline's `best_normalised` (the best of its runs) wins over its last run's fields.
    #[test]
    fn a_baseline_is_read_as_its_best_run() {
        let last = doc(&[("add", 1024, 3e-6, 1e-6)]);
        let best = parse_results(&last).unwrap();
        let mut better = best.clone();
        better.get_mut(&("add".to_string(), 1024)).unwrap().normalised = 2.0;
        better.get_mut(&("add".to_string(), 1024)).unwrap().p50_s = 2e-6;
        let written = with_results(&last, &better).unwrap();
        let read = parse_results(&written).unwrap();
        assert_eq!(read[&("add".to_string(), 1024)].normalised, 2.0);
        assert_eq!(read[&("add".to_string(), 1024)].p50_s, 2e-6);
    }

    /// A kernel whose baseline runs were 40% apart is allowed 40%, the others the threshold;
    /// the spread is computed by `best_of` (ignoring the worst of four or more runs) and
    /// survives a baseline's round trip.
    #[test]
    fn a_noisy_kernel_is_judged_by_its_own_spread() {
        let run = |sin: f64, quat: f64| {
            parse_results(&doc(&[
                ("add", 1024, 2e-6, 1e-6),
                ("mul", 1024, 2e-6, 1e-6),
                ("pid", 1024, 3e-6, 1e-6),
                ("sin", 1024, sin, 1e-6),
                ("quat", 1024, quat, 1e-6),
            ]))
            .unwrap()
        };
        let best = best_of(&[run(8e-6, 10e-6), run(8e-6, 14e-6), run(8e-6, 12e-6)]);
        let with_outlier = best_of(&[
            run(8e-6, 10e-6),
            run(8e-6, 30e-6),
            run(8e-6, 14e-6),
            run(8e-6, 12e-6),
        ]);
        assert_eq!(with_outlier, best);
        let quat = &best[&("quat".to_string(), 1024)];
        assert!((quat.normalised - 10.0).abs() < 1e-9);
        assert!((quat.spread_pct - 40.0).abs() < 1e-9);
        assert!(best[&("add".to_string(), 1024)].spread_pct.abs() < 1e-9);
        // The spread survives a baseline's round trip.
        let written = with_results(&doc(&[("quat", 1024, 12e-6, 1e-6)]), &best).unwrap();
        assert!(
            (parse_results(&written).unwrap()[&("quat".to_string(), 1024)].spread_pct - 40.0).abs() < 1e-9
        );
        // 30% slower: within the noisy kernel's 40%.
        let rows = compare(&best, &run(8e-6, 13e-6), 10.0);
        assert!(rows.iter().all(|r| !r.slower), "{rows:?}");
        let quat_row = rows.iter().find(|r| r.kernel == "quat").unwrap();
        assert!((quat_row.tolerance_pct - 40.0).abs() < 1e-9);
        // 15% on a quiet kernel and 50% on the noisy one both fail.
        let flagged: Vec<String> = compare(&best, &run(9.2e-6, 15e-6), 10.0)
            .into_iter()
            .filter(|r| r.slower)
            .map(|r| r.kernel)
            .collect();
        assert_eq!(flagged, vec!["quat", "sin"]);
    }

    #[test]
    fn a_missing_kernel_fails() {
        let base = parse_results(&doc(&[("add", 1024, 2e-6, 1e-6)])).unwrap();
        let empty = parse_results(&doc(&[])).unwrap();
        assert!(compare(&base, &empty, 10.0)[0].slower);
    }

    #[test]
    fn best_of_keeps_the_fastest_run() {
        let a = parse_results(&doc(&[("add", 8, 3e-6, 1e-6)])).unwrap();
        let b = parse_results(&doc(&[("add", 8, 2e-6, 1e-6)])).unwrap();
        assert_eq!(best_of(&[a, b])[&("add".to_string(), 8)].normalised, 2.0);
    }

    /// Real `rfx bench` output recorded on this machine kind: a run, and a run with
    /// `--inject-delay-us fused_chain=200` (the bench-only fault injection). The check passes
    /// against the first and flags exactly the slowed kernel in the second.
    #[test]
    fn recorded_runs_with_an_injected_delay_are_flagged() {
        let dir = crate::workspace_root().join("xtask/tests/fixtures");
        let base = parse_results(&std::fs::read_to_string(dir.join("bench-base.json")).unwrap()).unwrap();
        let again = parse_results(&std::fs::read_to_string(dir.join("bench-again.json")).unwrap()).unwrap();
        let slowed =
            parse_results(&std::fs::read_to_string(dir.join("bench-delayed.json")).unwrap()).unwrap();
        assert!(base.len() >= 10);
        let rows = compare(&base, &slowed, 10.0);
        let flagged: Vec<&str> = rows
            .iter()
            .filter(|r| r.slower)
            .map(|r| r.kernel.as_str())
            .collect();
        assert!(flagged.contains(&"fused_chain"), "{rows:?}");
        let _ = again;
    }
}
