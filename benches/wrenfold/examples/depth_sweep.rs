//! The n = 1 bound call of each of wrenfold's kernels (or, with `--hw`, the hand-written
//! function, called through a pointer) timed at 64 stack depths of its caller, 64 bytes apart:
//! the median per depth over `--rounds` rounds (1,024 calls each, on the next example's slices
//! each time), then the mean and the largest over the depths.
//!
//! A call's time can depend on where its frame lies relative to page boundaries, which the
//! caller's stack decides: a 16-byte spill slot straddling two pages makes each of its reloads
//! a page-split load (the padding of `pad_spill_area` in the CPU backend removed such windows,
//! 1.2–1.5× at some depths). A figure measured at one depth is one draw of this; the mean over
//! depths is what a caller at an arbitrary depth sees.
//!
//! ```text
//! cargo run --release -p wrenfold-bench --example depth_sweep -- [--kernel NAME] [--rounds N] [--hw]
//! ```

use std::hint::black_box;
use std::time::Instant;

use wrenfold_bench::kernels::{self, Spec};
use wrenfold_bench::{bind, generate, outputs, run_bound};

/// Runs `f` with `D` more bytes of this frame between it and the caller.
#[inline(never)]
fn at_depth<const D: usize>(f: &mut dyn FnMut() -> Result<f64, String>) -> Result<f64, String> {
    let pad = [0u8; D];
    black_box(&pad);
    let t = f();
    black_box(&pad);
    t
}

type AtDepth = fn(&mut dyn FnMut() -> Result<f64, String>) -> Result<f64, String>;

/// 64 depths, 64 bytes apart.
const DEPTHS: [AtDepth; 64] = {
    macro_rules! depths {
        ($($d:literal)*) => { [$(at_depth::<{ 16 + 64 * $d }> as AtDepth),*] };
    }
    depths!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
};

/// A hand-written kernel: `(inputs, example, outputs, output example)`.
type Handwritten = fn(&[&[f64]], usize, &mut [&mut [f64]], usize);

/// The hand-written function of `spec`.
fn handwritten(spec: &Spec) -> Handwritten {
    match spec.name {
        "QuatLocalCoords" => wrenfold_bench::hw_local_coords,
        "QuatInterpolation" => wrenfold_bench::hw_interpolation,
        "ImuIntegration" => wrenfold_bench::hw_imu,
        _ => wrenfold_bench::hw_projection,
    }
}

fn sweep(spec: &Spec, rounds: usize, hw: bool) -> Result<Vec<f64>, String> {
    let mut bound = bind(spec, None, "cpu")?;
    let batch = generate(spec, 1024, 48);
    let inputs = batch.slices();
    let examples: Vec<Vec<&[f64]>> = (0..batch.n)
        .map(|i| {
            (0..inputs.len())
                .map(|k| {
                    if spec.shared.contains(&spec.inputs[k].0) {
                        inputs[k]
                    } else {
                        let n = spec.input_len(k);
                        &inputs[k][n * i..n * (i + 1)]
                    }
                })
                .collect()
        })
        .collect();
    let mut out = outputs(spec, 1);
    let mut out: Vec<&mut [f64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
    let hw_fn = handwritten(spec);
    let calls = 1024;
    let mut time = || -> Result<f64, String> {
        let start = Instant::now();
        for c in 0..calls {
            if hw {
                hw_fn(&inputs, c % batch.n, &mut out, 0);
                black_box(&mut out);
            } else {
                run_bound(spec, &mut bound, &examples[c % batch.n], &mut out)?;
            }
        }
        Ok(start.elapsed().as_secs_f64() / calls as f64 * 1e9)
    };
    let mut times = vec![Vec::with_capacity(rounds); DEPTHS.len()];
    for _ in 0..rounds {
        for (at, depth) in times.iter_mut().zip(DEPTHS) {
            at.push(depth(&mut time)?);
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect())
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only = flag("--kernel");
    let rounds: usize = flag("--rounds").and_then(|r| r.parse().ok()).unwrap_or(5).max(1);
    let hw = args.iter().any(|a| a == "--hw");
    for spec in &kernels::ALL {
        if only.as_deref().is_some_and(|k| k != spec.name) {
            continue;
        }
        let medians = sweep(spec, rounds, hw)?;
        let mean = medians.iter().sum::<f64>() / medians.len() as f64;
        let (worst_at, worst) = medians
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, f64::NAN));
        let low = medians.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "{}{}: mean {mean:.1} ns, lowest {low:.1}, highest {worst:.1} (depth {})",
            spec.name,
            if hw { " (hand-written)" } else { "" },
            16 + 64 * worst_at
        );
        let line: Vec<String> = medians.iter().map(|t| format!("{t:.1}")).collect();
        println!("  {}", line.join(" "));
    }
    Ok(())
}
