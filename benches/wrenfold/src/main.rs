//! `wrenfold-bench`: times wrenfold's four robotics kernels, rfx against the hand-written Rust,
//! in one run (`cargo xtask wrenfold-bench` builds it with `--release` and runs it).
//!
//! ```text
//! wrenfold-bench [--rounds N] [--batch N] [--calls N] [--json FILE]
//! ```
//!
//! Per kernel, `--rounds` rounds (default 201), each timing four things back to back, the
//! order of rfx and the hand-written code alternating from round to round:
//!
//! - **batch**: rfx's `vmap` of the kernel over `--batch` examples (default 1,024), one call
//!   of its `BoundKernel` on the CPU backend, against the hand-written function in a loop
//!   over the same examples (same arrays in and out);
//! - **n = 1**: `--calls` (default 1,024) back-to-back calls of the unbatched kernel through
//!   its `BoundKernel::run_slices` (the pre-bound call), each on the next example's slices of
//!   the batch arrays, against as many calls of the hand-written function; the time per call.
//!
//! The table gives each median and the ratio rfx / hand-written (below 1: rfx is faster).

use std::hint::black_box;
use std::time::Instant;

use serde_json::{Value, json};
use wrenfold_bench::kernels::{self, Spec};
use wrenfold_bench::{Batch, bind, generate, outputs, run_fixed};

struct Options {
    rounds: usize,
    batch: usize,
    calls: usize,
    json: Option<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        rounds: 201,
        batch: 1024,
        calls: 1024,
        json: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        let count = || {
            value
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("`{flag}` needs a positive whole number, got `{value}`"))
        };
        match flag.as_str() {
            "--rounds" => options.rounds = count()?,
            "--batch" => options.batch = count()?,
            "--calls" => options.calls = count()?,
            "--json" => options.json = Some(value.clone()),
            _ => {
                return Err(format!(
                    "unknown flag `{flag}` (takes --rounds N, --batch N, --calls N, --json FILE)"
                ));
            }
        }
    }
    Ok(options)
}

/// One kernel's medians, in seconds.
struct Row {
    name: &'static str,
    rfx_batch: f64,
    hw_batch: f64,
    rfx_one: f64,
    hw_one: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Example `i`'s slices of the batch inputs: input `k` holds `lens[k]` elements per example,
/// a shared input (`lens[k]` zero) is passed whole.
#[inline(always)]
fn example<'a, const I: usize>(lens: &[usize; I], inputs: &[&'a [f64]], i: usize) -> [&'a [f64]; I] {
    std::array::from_fn(|k| {
        if lens[k] == 0 {
            inputs[k]
        } else {
            &inputs[k][lens[k] * i..lens[k] * (i + 1)]
        }
    })
}

fn bench<const I: usize, const O: usize>(
    spec: &Spec,
    hw: impl Fn(&[&[f64]], usize, &mut [&mut [f64]], usize),
    options: &Options,
) -> Result<Row, String> {
    let batch: Batch = generate(spec, options.batch, 48);
    let inputs = batch.slices();
    // Elements per example of each input, zero for a shared one (looked up once, not per call).
    let lens: [usize; I] = std::array::from_fn(|k| {
        if spec.shared.contains(&spec.inputs[k].0) {
            0
        } else {
            spec.input_len(k)
        }
    });
    let mut batched = bind(spec, Some(batch.n), "cpu")?;
    let mut single = bind(spec, None, "cpu")?;
    let mut out_rfx = outputs(spec, batch.n);
    let mut out_hw = outputs(spec, batch.n);
    let mut one_rfx = outputs(spec, 1);
    let mut one_hw = outputs(spec, 1);
    let mut out_rfx: Vec<&mut [f64]> = out_rfx.iter_mut().map(Vec::as_mut_slice).collect();
    let mut out_hw: Vec<&mut [f64]> = out_hw.iter_mut().map(Vec::as_mut_slice).collect();
    let mut one_rfx: Vec<&mut [f64]> = one_rfx.iter_mut().map(Vec::as_mut_slice).collect();
    let mut one_hw: Vec<&mut [f64]> = one_hw.iter_mut().map(Vec::as_mut_slice).collect();
    let calls = options.calls;

    let mut rfx_batch = || -> Result<f64, String> {
        let start = Instant::now();
        run_fixed::<I, O>(&mut batched, &inputs, &mut out_rfx)?;
        Ok(start.elapsed().as_secs_f64())
    };
    let mut hw_batch = || {
        let start = Instant::now();
        for i in 0..batch.n {
            hw(&inputs, i, &mut out_hw, i);
        }
        black_box(&mut out_hw);
        start.elapsed().as_secs_f64()
    };
    let mut rfx_one = || -> Result<f64, String> {
        let start = Instant::now();
        for c in 0..calls {
            let x = example(&lens, &inputs, c % batch.n);
            run_fixed::<I, O>(&mut single, &x, &mut one_rfx)?;
        }
        Ok(start.elapsed().as_secs_f64() / calls as f64)
    };
    let mut hw_one = || {
        let start = Instant::now();
        for c in 0..calls {
            hw(&inputs, c % batch.n, &mut one_hw, 0);
            black_box(&mut one_hw);
        }
        start.elapsed().as_secs_f64() / calls as f64
    };
    // Warm-up: the first calls grow the scratch and fault the pages in.
    for _ in 0..3 {
        rfx_batch()?;
        hw_batch();
        rfx_one()?;
        hw_one();
    }
    let (mut rb, mut hb, mut ro, mut ho) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..options.rounds {
        if round % 2 == 0 {
            rb.push(rfx_batch()?);
            hb.push(hw_batch());
            ro.push(rfx_one()?);
            ho.push(hw_one());
        } else {
            hb.push(hw_batch());
            rb.push(rfx_batch()?);
            ho.push(hw_one());
            ro.push(rfx_one()?);
        }
    }
    Ok(Row {
        name: spec.name,
        rfx_batch: median(rb),
        hw_batch: median(hb),
        rfx_one: median(ro),
        hw_one: median(ho),
    })
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn markdown(rows: &[Row], options: &Options) -> String {
    let mut s = format!(
        "| kernel | batch {n}: rfx (µs) | hand-written (µs) | ratio | n = 1: rfx (ns) | hand-written (ns) | ratio |\n|---|---|---|---|---|---|---|\n",
        n = options.batch
    );
    for r in rows {
        s += &format!(
            "| {} | {:.2} | {:.2} | {:.2}× | {:.1} | {:.1} | {:.2}× |\n",
            r.name,
            r.rfx_batch * 1e6,
            r.hw_batch * 1e6,
            r.rfx_batch / r.hw_batch,
            r.rfx_one * 1e9,
            r.hw_one * 1e9,
            r.rfx_one / r.hw_one,
        );
    }
    s
}

fn run(args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let mut rows = Vec::new();
    for spec in &kernels::ALL {
        eprintln!("wrenfold-bench: {} ({} rounds)", spec.name, options.rounds);
        let row = match spec.name {
            "QuatLocalCoords" => bench::<2, 3>(spec, wrenfold_bench::hw_local_coords, &options)?,
            "QuatInterpolation" => bench::<3, 3>(spec, wrenfold_bench::hw_interpolation, &options)?,
            "ImuIntegration" => bench::<8, 6>(spec, wrenfold_bench::hw_imu, &options)?,
            _ => bench::<9, 8>(spec, wrenfold_bench::hw_projection, &options)?,
        };
        rows.push(row);
    }
    let cpu = cpu_model();
    println!(
        "wrenfold's kernels, f64, {} rounds, medians; {cpu}\n",
        options.rounds
    );
    println!("{}", markdown(&rows, &options));
    let goal = |met: bool| if met { "met" } else { "not met" };
    for r in &rows {
        println!(
            "{}: batch {} rfx faster than hand-written: {}; n = 1 within 1.15×: {}",
            r.name,
            options.batch,
            goal(r.rfx_batch < r.hw_batch),
            goal(r.rfx_one <= 1.15 * r.hw_one),
        );
    }
    if let Some(path) = &options.json {
        let report = json!({
            "cpu": cpu,
            "rounds": options.rounds,
            "batch": options.batch,
            "calls": options.calls,
            "kernels": rows.iter().map(|r| json!({
                "name": r.name,
                "rfx_batch_s": r.rfx_batch,
                "handwritten_batch_s": r.hw_batch,
                "rfx_one_s": r.rfx_one,
                "handwritten_one_s": r.hw_one,
            })).collect::<Vec<Value>>(),
        });
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
