//! Time per element of each transcendental alone (`out = op x`, `out = op(x, w)` for the two
//! binary ones) on one thread, in both widths, and each op's time over `exp`'s measured in the
//! same run: for choosing which tile routine to work on next (this machine's load makes single
//! figures unreliable; the ratios within a run are the steadier ones). The default size, 4096,
//! keeps the arrays in L1 and L2, so the figures are the routines' own cost; at 65536 the
//! cheaper ops (`exp`, `sqrt`) take about the time of the memory traffic.
//!
//! `cargo run --release -p rfx-codegen-cpu --example op_speed [-- --calls N] [--size N] [--filter OP]`

mod compile;

use std::time::Instant;

use rfx_ir::{ArrayView, ArrayViewMut, Element, Shape};
use rfx_lower::Scratch;

use compile::compile_one_thread;

/// Each op, its arity, and the input range its arguments are drawn from (inside its domain).
const OPS: [(&str, usize, f32, f32); 15] = [
    ("exp", 1, -10.0, 10.0),
    ("exp2", 1, -10.0, 10.0),
    ("log", 1, 0.01, 100.0),
    ("log2", 1, 0.01, 100.0),
    ("sin", 1, -10.0, 10.0),
    ("cos", 1, -10.0, 10.0),
    ("tan", 1, -1.5, 1.5),
    ("tanh", 1, -5.0, 5.0),
    ("sigmoid", 1, -10.0, 10.0),
    ("atan", 1, -10.0, 10.0),
    ("asin", 1, -1.0, 1.0),
    ("acos", 1, -1.0, 1.0),
    ("sqrt", 1, 0.0, 100.0),
    ("atan2", 2, -10.0, 10.0),
    ("pow", 2, 0.01, 4.0),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let calls: usize = match args.iter().position(|a| a == "--calls") {
        Some(p) => args.get(p + 1).ok_or("--calls needs a count")?.parse()?,
        None => 2000,
    };
    let n: usize = match args.iter().position(|a| a == "--size") {
        Some(p) => args.get(p + 1).ok_or("--size needs a count")?.parse()?,
        None => 4096,
    };
    let filter = match args.iter().position(|a| a == "--filter") {
        Some(p) => Some(args.get(p + 1).ok_or("--filter needs an op")?.clone()),
        None => None,
    };
    for dtype in ["f32", "f64"] {
        let mut exp_ns = None;
        for (op, arity, lo, hi) in OPS {
            if op != "exp" && filter.as_deref().is_some_and(|f| f != op) {
                continue;
            }
            let ns = if dtype == "f32" {
                time_op::<f32>(op, arity, (lo, hi), dtype, n, calls)?
            } else {
                time_op::<f64>(op, arity, (lo, hi), dtype, n, calls)?
            };
            let base = *exp_ns.get_or_insert(ns);
            println!(
                "{op:>8} {dtype}: {ns:6.3} ns per element   {:5.2}× exp",
                ns / base
            );
        }
    }
    Ok(())
}

/// The minimum over `calls` calls of `out = op(x[, w])`, in nanoseconds per element.
fn time_op<T: Element + Copy + Default + From<f32>>(
    op: &str,
    arity: usize,
    (lo, hi): (f32, f32),
    dtype: &str,
    n: usize,
    calls: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    let args = if arity == 1 { "%x" } else { "%x, %w" };
    let text = format!(
        "kernel k {{\n %x = input x : {dtype}[{n}]\n %w = input w : {dtype}[{n}]\n \
         %o = {op} {args} : {dtype}[{n}]\n output o = %o\n}}"
    );
    let (_, compiled) = compile_one_thread(&text)?;
    let shape = Shape::new([n]);
    // A fixed scramble of the range, so neighbouring elements take different paths.
    let data: Vec<Vec<T>> = (0..2)
        .map(|a| {
            (0..n)
                .map(|i| {
                    let u = ((i * 7919 + a * 104_729) % 10_007) as f32 / 10_007.0;
                    T::from(lo + (hi - lo) * u)
                })
                .collect()
        })
        .collect();
    let mut out = vec![T::default(); n];
    let inputs: Vec<ArrayView<'_>> = data
        .iter()
        .map(|d| ArrayView::new(&shape, d))
        .collect::<Result<_, _>>()?;
    let mut scratch = Scratch::new();
    let mut best = f64::INFINITY;
    for _ in 0..calls + 20 {
        let mut outputs = [ArrayViewMut::new(&shape, &mut out)?];
        let start = Instant::now();
        compiled.run(&inputs, &mut outputs, &mut scratch)?;
        best = best.min(start.elapsed().as_nanos() as f64);
    }
    Ok(best / n as f64)
}
