//! `cargo xtask peers`: rfx's benchmark and the peers script (`../shared/peers/peers.py`:
//! NumPy, numexpr, JAX, numba, CasADi, tinygrad, gcc C) on the same kernels and sizes, one
//! after the other on this machine, and rfx's speed ratio to each peer.
//!
//! ```text
//! cargo xtask peers [--label NAME] [--iterations N] [--markdown FILE] [--reuse-peers] [--threads N[,N…]]
//! ```
//!
//! `--threads 1,2` runs `rfx bench` once per thread count (one thread, then two) before the
//! one peers run, and prints a table for each.
//!
//! The peers need their Python environment first: `PEERS_WORKDIR=target/peers
//! ../shared/peers/setup.sh`. `--reuse-peers` skips the peers run and reads the stored run
//! `NAME` from `target/peers/results.json` (the peers script takes 6–7 minutes). rfx's figure
//! is `batch_p50_s` (median over batches of back-to-back calls, as the peers script measures);
//! a ratio above 1 means rfx is faster.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The peers script's kernels and rfx's names for them.
const KERNELS: [(&str, &str, &str); 7] = [
    ("K1", "add", "x+y"),
    ("K2", "mul", "x*y"),
    ("K3", "sin", "sin(x)"),
    ("K4", "fused_chain", "sin(x*2)+y"),
    ("K5", "chain10", "10-op chain"),
    ("K6", "pid_clip", "PID clip"),
    ("K7", "value_and_grad_sum_sq", "value+grad sum(x²)"),
];
const SIZES: [u64; 5] = [1, 16, 1024, 65536, 1_048_576];
/// The peers shown, with their column titles.
const PEERS: [(&str, &str); 8] = [
    ("c_vec1", "gcc C"),
    ("numpy_out", "NumPy out="),
    ("numexpr", "numexpr"),
    ("jax", "JAX jit"),
    ("numba", "numba"),
    ("casadi", "CasADi"),
    ("casadi_cgC", "CasADi C"),
    ("tinygrad", "tinygrad"),
];

struct Options {
    label: String,
    iterations: String,
    markdown: Option<String>,
    reuse_peers: bool,
    /// `rfx bench --threads`, one bench run per count (`--threads 1,2`); empty: the default.
    threads: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        label: "xtask".to_string(),
        iterations: "200".to_string(),
        markdown: None,
        reuse_peers: false,
        threads: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--label" => options.label = value("--label")?,
            "--iterations" => options.iterations = value("--iterations")?,
            "--markdown" => options.markdown = Some(value("--markdown")?),
            "--reuse-peers" => options.reuse_peers = true,
            "--threads" => {
                let list = value("--threads")?;
                options.threads = list.split(',').map(|t| t.trim().to_string()).collect();
                if let Some(bad) = options
                    .threads
                    .iter()
                    .find(|t| !t.parse::<u32>().is_ok_and(|n| n > 0))
                {
                    return Err(format!("--threads takes thread counts (e.g. 1,2), got `{bad}`"));
                }
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(options)
}

/// Runs both benchmarks and prints (and optionally writes) the comparison.
pub(crate) fn peers(root: &Path, args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let work = root.join("target/peers");
    let script = root.join("../shared/peers/peers.py");
    let python = work.join("venv/bin/python");
    if !options.reuse_peers && !python.exists() {
        return Err(format!(
            "no peers environment at {}: run `PEERS_WORKDIR=target/peers {}` first",
            python.display(),
            root.join("../shared/peers/setup.sh").display()
        ));
    }
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let sizes: Vec<String> = SIZES.iter().map(u64::to_string).collect();
    // One bench run per thread count (`None`: rfx bench's default, every core).
    let counts: Vec<Option<&String>> = if options.threads.is_empty() {
        vec![None]
    } else {
        options.threads.iter().map(Some).collect()
    };
    let mut benches = Vec::new();
    for threads in &counts {
        let rfx_json = match threads {
            Some(t) => work.join(format!("rfx-threads-{t}.json")),
            None => work.join("rfx.json"),
        };
        eprintln!(
            "peers: rfx bench at sizes {}{}",
            sizes.join(","),
            threads.map_or(String::new(), |t| format!(", --threads {t}"))
        );
        let run = crate::perf::BenchRun {
            backend: "cpu".to_string(),
            size: sizes.join(","),
            iterations: options.iterations.clone(),
            repeat: 1,
            extra: threads
                .iter()
                .flat_map(|t| ["--threads".to_string(), (*t).clone()])
                .collect(),
        };
        crate::perf::run_bench(root, &run, &rfx_json)?;
        benches.push((*threads, rfx_json));
    }
    if !options.reuse_peers {
        eprintln!(
            "peers: {} --label {} (6-7 minutes)",
            script.display(),
            options.label
        );
        let status = Command::new(&python)
            .arg(&script)
            .args(["--label", &options.label])
            .env("PEERS_WORKDIR", &work)
            .status()
            .map_err(|e| format!("running the peers script: {e}"))?;
        if !status.success() {
            return Err(format!("the peers script failed: {status}"));
        }
    }
    let peers = read_json(&work.join("results.json"))?;
    let run = peers
        .pointer(&format!("/runs/{}", options.label))
        .ok_or_else(|| format!("no peers run labelled `{}` in results.json", options.label))?;
    let mut table = String::new();
    for (threads, rfx_json) in &benches {
        if benches.len() > 1 {
            let t = threads.map_or("default", String::as_str);
            table += &format!("rfx on {t} thread(s), `rfx bench --threads {t}`:\n\n");
        }
        table += &comparison(&read_json(rfx_json)?, run)?;
        table.push('\n');
    }
    let table = table.trim_end().to_string() + "\n";
    print!("{table}");
    if let Some(path) = &options.markdown {
        std::fs::write(path, &table).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("peers: wrote {path}");
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The markdown table: per kernel and size, rfx's µs and each peer's µs with rfx's speed-up.
pub(crate) fn comparison(rfx: &Value, run: &Value) -> Result<String, String> {
    let mut ours: BTreeMap<(String, u64), f64> = BTreeMap::new();
    for r in rfx
        .get("results")
        .and_then(Value::as_array)
        .ok_or("rfx.json has no results")?
    {
        if let (Some(kernel), Some(size), Some(t)) = (
            r.get("kernel").and_then(Value::as_str),
            r.get("size").and_then(Value::as_u64),
            r.get("batch_p50_s").and_then(Value::as_f64),
        ) {
            ours.insert((kernel.to_string(), size), t * 1e6);
        }
    }
    let mut theirs: BTreeMap<(String, String, u64), f64> = BTreeMap::new();
    for r in run
        .get("kernels")
        .and_then(Value::as_array)
        .ok_or("the peers run has no kernels")?
    {
        if let (Some(peer), Some(kernel), Some(n), Some(us)) = (
            r.get("peer").and_then(Value::as_str),
            r.get("kernel").and_then(Value::as_str),
            r.get("n").and_then(Value::as_u64),
            r.get("med_us").and_then(Value::as_f64),
        ) {
            theirs.insert((peer.to_string(), kernel.to_string(), n), us);
        }
    }
    let mut out = String::new();
    let _ = write!(out, "| kernel | n | rfx µs |");
    for (_, title) in PEERS {
        let _ = write!(out, " {title} |");
    }
    let _ = write!(out, "\n|---|---|---|");
    for _ in PEERS {
        let _ = write!(out, "---|");
    }
    out.push('\n');
    for (k, name, title) in KERNELS {
        for n in SIZES {
            let Some(&rfx_us) = ours.get(&(name.to_string(), n)) else {
                continue;
            };
            let _ = write!(out, "| {k} {title} | {n} | {} |", fmt_us(rfx_us));
            for (peer, _) in PEERS {
                match theirs.get(&(peer.to_string(), k.to_string(), n)) {
                    Some(&us) => {
                        let _ = write!(out, " {} ({:.1}×) |", fmt_us(us), us / rfx_us);
                    }
                    None => out.push_str(" – |"),
                }
            }
            out.push('\n');
        }
    }
    Ok(out)
}

fn fmt_us(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 1.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_pairs_rfx_with_each_peer_and_gives_rfx_speed_ups() {
        let rfx = serde_json::json!({"results": [
            {"kernel": "add", "size": 65536, "batch_p50_s": 10e-6},
            {"kernel": "pid_clip", "size": 1, "batch_p50_s": 0.05e-6},
        ]});
        let run = serde_json::json!({"kernels": [
            {"peer": "c_vec1", "kernel": "K1", "n": 65536, "med_us": 7.5},
            {"peer": "numpy_out", "kernel": "K1", "n": 65536, "med_us": 20.0},
            {"peer": "jax", "kernel": "K6", "n": 1, "med_us": 4.5},
            {"peer": "jax", "kernel": "K6", "n": 16, "error": "boom"},
        ]});
        let table = comparison(&rfx, &run).unwrap();
        assert!(
            table.contains("| K1 x+y | 65536 | 10.00 | 7.50 (0.8×) | 20.00 (2.0×) |"),
            "{table}"
        );
        assert!(table.contains("| K6 PID clip | 1 | 0.050 |"), "{table}");
        assert!(table.contains("4.50 (90.0×)"), "{table}");
        assert_eq!(table.lines().count(), 4, "header, rule and two rows:\n{table}");
    }

    #[test]
    fn thread_counts_are_a_comma_separated_list() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(parse(&args(&["--threads", "1,2"])).unwrap().threads, ["1", "2"]);
        assert_eq!(parse(&args(&["--threads", "1"])).unwrap().threads, ["1"]);
        assert!(parse(&args(&[])).unwrap().threads.is_empty());
        for bad in ["0", "1,x", "", "1,,2"] {
            assert!(parse(&args(&["--threads", bad])).is_err(), "{bad}");
        }
    }
}
