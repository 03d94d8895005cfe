//! Path tracking errors (`path_tracking`: the nearest point of a 64-waypoint path, its segment,
//! the signed cross-track distance and the heading error) against the same computation as a
//! plain Rust loop (rustc `-O`), measured alternately in one run, for one vehicle per call (a
//! control loop's use) and for 1024.
//!
//! `cargo run --release -p rfx-control --example path_speed`

mod timing;

use std::hint::black_box;

use rfx::TensorType;
use rfx_control::path_tracking;

const M: usize = 64;

/// The errors of one vehicle in `$t` arithmetic, written as one would in Rust: every segment's
/// nearest point, the nearest of them (the first of equals), then its side and direction.
macro_rules! track_rust {
    ($name:ident, $t:ty) => {
        fn $name(x: $t, y: $t, heading: $t, px: &[$t], py: &[$t]) -> (i32, f64, f64) {
            let (mut best, mut best_d2) = (0, <$t>::INFINITY);
            for j in 0..px.len() - 1 {
                let (ax, ay) = (px[j], py[j]);
                let (ex, ey) = (px[j + 1] - ax, py[j + 1] - ay);
                let (dx, dy) = (x - ax, y - ay);
                let len2 = ex * ex + ey * ey;
                let t = if len2 > 0.0 {
                    ((dx * ex + dy * ey) / len2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                let (qx, qy) = (dx - t * ex, dy - t * ey);
                let d2 = qx * qx + qy * qy;
                if d2 < best_d2 {
                    (best, best_d2) = (j, d2);
                }
            }
            let (ax, ay) = (px[best], py[best]);
            let (ex, ey) = (px[best + 1] - ax, py[best + 1] - ay);
            let cross = ex * (y - ay) - ey * (x - ax);
            let dist = best_d2.sqrt();
            let turn = ey.atan2(ex) - heading;
            let error = turn.sin().atan2(turn.cos());
            (
                best as i32,
                f64::from(if cross < 0.0 { -dist } else { dist }),
                f64::from(error),
            )
        }
    };
}

/// A vehicle's `(segment, cross_track, heading_error)` from its pose and the path.
type Track<T> = fn(T, T, T, &[T], &[T]) -> (i32, f64, f64);

track_rust!(track_f32, f32);
track_rust!(track_f64, f64);

fn run<T: rfx::Element + Copy + Into<f64>>(
    n: usize,
    from: fn(f64) -> T,
    track_rust: Track<T>,
) -> Result<(), Box<dyn std::error::Error>> {
    let jit = path_tracking();
    let px: Vec<T> = (0..M).map(|k| from(k as f64 * 0.5)).collect();
    let py: Vec<T> = (0..M).map(|k| from((k as f64 * 0.2).sin() * 3.0)).collect();
    let x: Vec<T> = (0..n)
        .map(|k| from(16.0 + 14.0 * (k as f64 * 0.37).sin()))
        .collect();
    let y: Vec<T> = (0..n).map(|k| from(2.5 * (k as f64 * 0.11).cos())).collect();
    let heading: Vec<T> = (0..n).map(|k| from((k as f64 * 0.7).sin())).collect();
    let types = [
        TensorType::new(T::DTYPE, [n]),
        TensorType::new(T::DTYPE, [n]),
        TensorType::new(T::DTYPE, [n]),
        TensorType::new(T::DTYPE, [M]),
        TensorType::new(T::DTYPE, [M]),
    ];
    let kernels = jit.executable(&types)?.mir().kernels().len();
    if std::env::var_os("PATH_SPEED_MIR").is_some() {
        println!("{}", jit.executable(&types)?.mir());
    }
    let mut bound = jit.bind(&types)?;
    let mut args = bound.args()?;
    for (k, values) in [&x, &y, &heading, &px, &py].into_iter().enumerate() {
        args.input_mut::<T>(k)
            .ok_or("an input of the bound dtype")?
            .copy_from_slice(values);
    }
    bound.run_args(&mut args)?;
    // Both give the same segments and errors (to the dtype's rounding).
    let segment = args.output::<i32>(0).ok_or("an i32 segment")?.to_vec();
    let cross = args.output::<T>(1).ok_or("cross_track")?.to_vec();
    let mut same = 0;
    for i in 0..n {
        let (j, c, _) = track_rust(x[i], y[i], heading[i], &px, &py);
        same += usize::from(j == segment[i] && (c - cross[i].into()).abs() < 1e-3);
    }
    let mut out = vec![(0, 0.0, 0.0); n];
    let calls = if n > 100 { 20 } else { 2000 };
    let (mut rfx_ns, mut rust_ns) = (0.0, 0.0);
    for _ in 0..3 {
        rfx_ns += timing::median_ns(calls, || bound.run_args(black_box(&mut args)).expect("run"));
        rust_ns += timing::median_ns(calls, || {
            let (px, py) = (black_box(&px), black_box(&py));
            for (i, o) in out.iter_mut().enumerate() {
                *o = track_rust(x[i], y[i], heading[i], px, py);
            }
            black_box(&out);
        });
    }
    println!(
        "path_tracking {}[{n:>4}] x {M} waypoints: rfx {:9.1} ns, Rust loop {:9.1} ns per call ({:.2}x), \
         {kernels} kernel(s), {same}/{n} agree",
        T::DTYPE,
        rfx_ns / 3.0,
        rust_ns / 3.0,
        rfx_ns / rust_ns,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [1, 1024] {
        run::<f32>(n, |v| v as f32, track_f32)?;
        run::<f64>(n, |v| v, track_f64)?;
    }
    Ok(())
}
