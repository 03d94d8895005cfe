//! Forward kinematics and the position Jacobian of a UR5 arm for 100,000 configurations,
//! rfx against plain Rust.
//!
//! `cargo run --release -p rfx-control --example batch_fk -- [N]`. rfx runs
//! `fk_dh6_jacobian(UR5)` (one compiled kernel: the FK and its reverse-mode derivatives) through
//! a bound handle with preallocated outputs; the plain-Rust side is the tests' reference (4×4
//! DH matrices and the geometric Jacobian `z × (p_end - p)`) and a hand-written loop with 3×3
//! frames. Each side is warmed up once and then timed for one run; the ratios are printed. The
//! rfx kernel runs twice: with the default configuration (a kernel this large is split over
//! the CPU backend's worker threads) and on the caller's thread only, the fair comparison with
//! the single-threaded plain-Rust loops.

#[path = "../tests/reference/mod.rs"]
#[expect(
    dead_code,
    reason = "the example uses the kinematics part of the tests' reference"
)]
mod reference;

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{DType, TensorType};
use rfx_control::{UR5, fk_dh6_jacobian};

/// FK and geometric Jacobian with 3×3 rotations, written for speed: `out[0..3]` is the position,
/// `out[3 + 6·row + joint]` the Jacobian.
fn hand_written(q: &[f64; 6], out: &mut [f64; 21]) {
    let mut rotation = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let mut origin = [0.0f64; 3];
    let mut axes = [[0.0f64; 3]; 6];
    let mut origins = [[0.0f64; 3]; 6];
    let twists = UR5.map(|p| p.alpha.sin_cos());
    for (j, p) in UR5.iter().enumerate() {
        axes[j] = [rotation[0][2], rotation[1][2], rotation[2][2]];
        origins[j] = origin;
        let (s, c) = (q[j] + p.theta_offset).sin_cos();
        let (sa, ca) = twists[j];
        let local = [[c, -s * ca, s * sa], [s, c * ca, -c * sa], [0.0, sa, ca]];
        let offset = [p.a * c, p.a * s, p.d];
        let mut next = [[0.0; 3]; 3];
        for r in 0..3 {
            for k in 0..3 {
                origin[r] += rotation[r][k] * offset[k];
            }
            for col in 0..3 {
                next[r][col] = (0..3).map(|k| rotation[r][k] * local[k][col]).sum();
            }
        }
        rotation = next;
    }
    out[..3].copy_from_slice(&origin);
    for j in 0..6 {
        let z = axes[j];
        let d = [
            origin[0] - origins[j][0],
            origin[1] - origins[j][1],
            origin[2] - origins[j][2],
        ];
        let col = [
            z[1] * d[2] - z[2] * d[1],
            z[2] * d[0] - z[0] * d[2],
            z[0] * d[1] - z[1] * d[0],
        ];
        for row in 0..3 {
            out[3 + 6 * row + j] = col[row];
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let mut rng = StdRng::seed_from_u64(42);
    let q: Vec<Vec<f64>> = (0..6)
        .map(|_| (0..n).map(|_| rng.random_range(-3.1..3.1)).collect())
        .collect();

    // rfx: bind (trace, optimise, compile), warm up, then one timed run.
    let jit = fk_dh6_jacobian(UR5);
    let types: Vec<TensorType> = (0..6).map(|_| TensorType::new(DType::F64, [n])).collect();
    let compile_start = Instant::now();
    let mut kernel = jit.bind(&types)?;
    let compile = compile_start.elapsed();
    let mut outputs: [Vec<f64>; 21] = std::array::from_fn(|_| vec![0.0f64; n]);
    let mut run_rfx = |outputs: &mut [Vec<f64>; 21]| {
        kernel.run_slices(
            [&q[0][..], &q[1][..], &q[2][..], &q[3][..], &q[4][..], &q[5][..]],
            outputs.each_mut().map(|v| v.as_mut_slice()),
        )
    };
    run_rfx(&mut outputs)?;
    let start = Instant::now();
    run_rfx(&mut outputs)?;
    let rfx_time = start.elapsed();

    // The same kernel on the caller's thread only (the default splits large kernels over the
    // CPU backend's worker pool), for a one-core comparison with the plain-Rust loops.
    let mut one_thread = rfx::CompileConfig::default();
    one_thread.lower.min_elems_per_thread = usize::MAX;
    let mut serial = rfx::jit_with(jit.func().clone(), one_thread).bind(&types)?;
    let mut serial_outputs: [Vec<f64>; 21] = std::array::from_fn(|_| vec![0.0f64; n]);
    let mut run_serial = |outputs: &mut [Vec<f64>; 21]| {
        serial.run_slices(
            [&q[0][..], &q[1][..], &q[2][..], &q[3][..], &q[4][..], &q[5][..]],
            outputs.each_mut().map(|v| v.as_mut_slice()),
        )
    };
    run_serial(&mut serial_outputs)?;
    let start = Instant::now();
    run_serial(&mut serial_outputs)?;
    let serial_time = start.elapsed();

    // Plain Rust: the tests' reference (4×4 matrices), array of structs output.
    let params: Vec<reference::Dh> = UR5.iter().map(|p| (p.a, p.alpha, p.d, p.theta_offset)).collect();
    let mut reference_out = vec![[0.0f64; 21]; n];
    let run_reference = |out: &mut Vec<[f64; 21]>| {
        for (i, slot) in out.iter_mut().enumerate() {
            let qi: [f64; 6] = std::array::from_fn(|j| q[j][i]);
            let p = reference::fk_dh(&params, &qi);
            let cols = reference::fk_dh_jacobian(&params, &qi);
            slot[..3].copy_from_slice(&p);
            for k in 0..18 {
                slot[3 + k] = cols[k % 6][k / 6];
            }
        }
    };
    run_reference(&mut reference_out);
    let start = Instant::now();
    run_reference(&mut reference_out);
    let reference_time = start.elapsed();

    // Plain Rust, hand-written.
    let mut hand_out = vec![[0.0f64; 21]; n];
    let run_hand = |out: &mut Vec<[f64; 21]>| {
        for (i, slot) in out.iter_mut().enumerate() {
            let qi: [f64; 6] = std::array::from_fn(|j| q[j][i]);
            hand_written(&qi, slot);
        }
    };
    run_hand(&mut hand_out);
    let start = Instant::now();
    run_hand(&mut hand_out);
    let hand_time = start.elapsed();

    let mut max_error = 0.0f64;
    let mut max_hand_error = 0.0f64;
    for i in 0..n {
        for k in 0..21 {
            max_error = max_error.max((outputs[k][i] - reference_out[i][k]).abs());
            max_error = max_error.max((serial_outputs[k][i] - reference_out[i][k]).abs());
            max_hand_error = max_hand_error.max((hand_out[i][k] - reference_out[i][k]).abs());
        }
    }
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!("UR5 FK + 3x6 position Jacobian, {n} configurations, f64");
    println!(
        "rfx kernel (FK + reverse-mode Jacobian, one compiled kernel): {:.3} ms  (compile {:.1} ms, once)",
        ms(rfx_time),
        ms(compile)
    );
    println!("rfx kernel, caller's thread only: {:.3} ms", ms(serial_time));
    println!(
        "plain Rust reference (4x4 DH matrices + geometric Jacobian): {:.3} ms",
        ms(reference_time)
    );
    println!(
        "plain Rust hand-written (3x3 frames + geometric Jacobian):   {:.3} ms",
        ms(hand_time)
    );
    let ratio =
        |slow: std::time::Duration, fast: std::time::Duration| slow.as_secs_f64() / fast.as_secs_f64();
    println!(
        "speed-up of rfx ({} threads / caller's thread only): over the reference {:.2}x / {:.2}x, over the hand-written loop {:.2}x / {:.2}x",
        std::thread::available_parallelism().map_or(1, usize::from),
        ratio(reference_time, rfx_time),
        ratio(reference_time, serial_time),
        ratio(hand_time, rfx_time),
        ratio(hand_time, serial_time)
    );
    println!(
        "max |rfx - reference| over all 21 outputs: {max_error:.2e} (hand-written: {max_hand_error:.2e})"
    );
    Ok(())
}
