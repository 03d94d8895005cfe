//! `rfx bench`'s report: each row's sample counts, tails only from enough samples, baselines
//! compared like with like, the Rust loop beside every kernel, and the plot's labels.

use crate::common;

use std::process::Output;

use common::{rfx, temp_dir};
use serde_json::Value;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("bench json")).expect("json")
}

fn f64_at(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} in {v}"))
}

/// The table row of `kernel` at `size`, split into words.
fn row<'a>(text: &'a str, kernel: &str, size: u64) -> Vec<&'a str> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.len() > 2 && w[0] == kernel && w[1] == size.to_string())
        .unwrap_or_else(|| panic!("no row for {kernel} at {size} in\n{text}"))
}

#[test]
fn short_calls_give_tails_samples_and_like_with_like_ratios() {
    let dir = temp_dir("bench-report");
    let (json, svg) = (dir.join("bench.json"), dir.join("bench.svg"));
    let (json_arg, svg_arg) = (
        json.to_string_lossy().into_owned(),
        svg.to_string_lossy().into_owned(),
    );
    let out = rfx(&[
        "bench",
        "--sizes",
        "1,1024",
        "--iterations",
        "5",
        "--filter",
        "add",
        "--json-out",
        &json_arg,
        "--plot",
        &svg_arg,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // rfxJIT's lines stay as they were, introduced by what they are.
    assert!(text.contains("[cpu] add: "), "{text}");
    assert!(
        text.contains("the mean of the kernel's single timed calls in milliseconds"),
        "{text}"
    );
    assert!(text.contains("Rust µs") && text.contains("calls"), "{text}");
    // Every tail had enough samples: no dash, no footnote about dashes.
    assert!(!text.contains("–: too few calls"), "{text}");

    let report = read_json(&json);
    assert_eq!(report["schema_version"], 2);
    let date = report["date_utc"].as_str().expect("date_utc");
    assert_eq!(date.len(), "2026-01-01 00:00".len(), "{date}");
    assert!(date.starts_with("20"), "{date}");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "add at two sizes");
    for r in results {
        let size = r["size"].as_u64().expect("size");
        // A call of `add` at these sizes takes well under 100 µs: 10,000 samples fit in the
        // second the harness gives the tails, whatever --iterations says.
        assert_eq!(r["timing"]["samples"], 10_000, "{r}");
        let (p50, p99, p999, max) = (
            f64_at(r, "/timing/p50_s"),
            f64_at(r, "/timing/p99_s"),
            f64_at(r, "/timing/p999_s"),
            f64_at(r, "/timing/max_s"),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max, "{r}");
        assert!(
            f64_at(r, "/interp_p50_s") > p50,
            "the interpreter beat the kernel: {r}"
        );
        assert!(f64_at(r, "/rust_loop_p50_s") > 0.0, "{r}");
        // Both baselines: equally many calls of each side, the flat fields equal to them.
        for (base, fewest) in [("interp", 3), ("unfused", 5)] {
            let c = &r[base];
            let samples = c["samples"].as_u64().expect("samples");
            assert!(samples >= fewest, "{base}: {c}");
            let (p50_s, rfx_p50_s) = (f64_at(c, "/p50_s"), f64_at(c, "/rfx_p50_s"));
            assert!(p50_s > 0.0 && rfx_p50_s > 0.0, "{c}");
            assert_eq!(f64_at(r, &format!("/{base}_p50_s")), p50_s);
        }
        // The table's ratios are the comparisons' own.
        let words = row(&text, "add", size);
        let n = words.len();
        let ratio = |base: &str| {
            format!(
                "{:.1}x",
                f64_at(r, &format!("/{base}/p50_s")) / f64_at(r, &format!("/{base}/rfx_p50_s"))
            )
        };
        assert_eq!(words[n - 6], ratio("interp"), "{words:?}");
        assert_eq!(words[n - 5], ratio("unfused"), "{words:?}");
        assert_eq!(words[2], "10000", "{words:?}");
        // The interpreter is slower than the compiled kernel on the same calls.
        assert!(f64_at(r, "/interp/p50_s") > f64_at(r, "/interp/rfx_p50_s"), "{r}");
    }

    let svg = std::fs::read_to_string(&svg).expect("svg");
    let cpu = report["machine"]["cpu"].as_str().expect("cpu");
    assert!(svg.contains(cpu), "the machine in the title");
    assert!(svg.contains(date), "the date in the title");
    assert!(svg.contains("threads"), "the thread count in the title");
    assert!(svg.contains("Rust loop"), "the reference line's legend");
    let texts: Vec<&str> = svg.lines().map(str::trim).collect();
    for tick in ["1", "10", "100", "1,000"] {
        assert!(texts.contains(&tick), "tick {tick}");
    }
    assert!(
        !svg.contains("1000.0") && !svg.contains("1.0\n"),
        "no float-formatted ticks"
    );
    // The legend lies right of the chart: its labels start past the chart's width.
    for label in ["add (cpu)", "add (interpreter)", "Rust loop"] {
        let at = svg.find(label).unwrap_or_else(|| panic!("{label}"));
        let tag = &svg[svg[..at].rfind("<text").expect("text element")..at];
        let x: f64 = tag
            .split("x=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("x of {tag}"));
        assert!(x > 790.0, "{label} at x = {x}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rfx bench` of `add` at 16 points, 5 iterations, with `delay_us` microseconds injected into
/// each call, its JSON written to `json_arg`.
fn bench_add_with_delay(delay_us: u32, json_arg: &str) -> Output {
    let delay = format!("add={delay_us}");
    rfx(&[
        "bench",
        "--size",
        "16",
        "--iterations",
        "5",
        "--filter",
        "add",
        "--no-baselines",
        "--inject-delay-us",
        &delay,
        "--json-out",
        json_arg,
    ])
}

#[test]
fn long_calls_print_a_dash_for_a_tail_without_its_samples() {
    let dir = temp_dir("bench-tails");
    let json = dir.join("bench.json");
    let json_arg = json.to_string_lossy().into_owned();
    // 200 µs a call: 1,000 calls fit in a second (p99), 10,000 do not (p99.9).
    let out = bench_add_with_delay(200, &json_arg);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let r = &read_json(&json)["results"][0];
    assert_eq!(r["timing"]["samples"], 1_000, "{r}");
    assert!(f64_at(r, "/timing/p99_s") >= 200e-6, "{r}");
    assert!(r["timing"]["p999_s"].is_null(), "{r}");
    let words = row(&text, "add", 16);
    assert_eq!(words[2], "1000", "{words:?}");
    assert_eq!(words[6], "–", "p99.9 column: {words:?}");
    assert_ne!(words[5], "–", "p99 column: {words:?}");
    assert!(text.contains("–: too few calls for that tail"), "{text}");

    // 2 ms a call: not even 1,000 fit, the tails stay empty and the count is --iterations.
    let out = bench_add_with_delay(2000, &json_arg);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = &read_json(&json)["results"][0];
    assert_eq!(r["timing"]["samples"], 5, "{r}");
    assert!(
        r["timing"]["p99_s"].is_null() && r["timing"]["p999_s"].is_null(),
        "{r}"
    );
    let text = stdout(&out);
    let words = row(&text, "add", 16);
    assert_eq!(&words[5..7], ["–", "–"], "{words:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
