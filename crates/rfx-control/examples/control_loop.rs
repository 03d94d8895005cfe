//! A pendulum under the rfx PID at 1 kHz, in simulated time.
//!
//! `cargo run --release -p rfx-control --example control_loop -- [SECONDS] [N]` simulates N
//! pendulums (default 1) for SECONDS (default 10) of simulated time. The plant is integrated in
//! plain Rust (semi-implicit Euler); the controller is the `rfx_control::pid` kernel, bound
//! once (a real-time handle) with preallocated outputs, so the loop allocates nothing. Prints
//! the tracking error and the distribution of the kernel call's latency.

use std::time::Instant;

use rfx::{DType, TensorType};
use rfx_control::{PidConfig, pid};

const DT: f64 = 0.001;
const MASS: f64 = 1.0;
const LENGTH: f64 = 0.5;
const DAMPING: f64 = 0.1;
const GRAVITY: f64 = 9.81;

/// The set point of pendulum `i` at time `t`: a step, then a slow sine from half-time on.
fn setpoint(i: usize, t: f64, duration: f64) -> f64 {
    let offset = 0.1 * i as f64;
    if t < duration / 2.0 {
        1.0 + offset
    } else {
        0.5 + offset + 0.5 * (2.0 * std::f64::consts::PI * 0.5 * t).sin()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let duration: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10.0);
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let steps = (duration / DT).round() as usize;

    let config = PidConfig {
        kp: 100.0,
        ki: 100.0,
        kd: 6.0,
        dt: DT,
        integral_min: -5.0,
        integral_max: 5.0,
        command_min: -8.0,
        command_max: 8.0,
    };
    let jit = pid(config);
    let ty = TensorType::new(DType::F64, [n]);
    let compile_start = Instant::now();
    let mut step = jit.bind(&[ty.clone(), ty.clone(), ty.clone(), ty])?;
    let compile_time = compile_start.elapsed();

    // Everything the loop touches is allocated here.
    let mut angle = vec![0.0f64; n];
    let mut velocity = vec![0.0f64; n];
    let mut prev_angle = vec![0.0f64; n];
    let mut integral = vec![0.0f64; n];
    let mut reference = vec![0.0f64; n];
    let mut command = vec![0.0f64; n];
    let mut next_integral = vec![0.0f64; n];
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(steps);
    let (mut squared_error, mut squared_error_settled, mut settled_samples) = (0.0f64, 0.0f64, 0usize);
    let mut max_error_settled = 0.0f64;

    // Warm-up call: grows the kernel's scratch (the one allocation of a bound kernel).
    step.run_slices(
        [&reference[..], &angle[..], &prev_angle[..], &integral[..]],
        [&mut command[..], &mut next_integral[..]],
    )?;

    for k in 0..steps {
        let t = k as f64 * DT;
        for (i, r) in reference.iter_mut().enumerate() {
            *r = setpoint(i, t, duration);
        }
        let start = Instant::now();
        step.run_slices(
            [&reference[..], &angle[..], &prev_angle[..], &integral[..]],
            [&mut command[..], &mut next_integral[..]],
        )?;
        latencies_ns.push(start.elapsed().as_nanos() as u64);
        integral.copy_from_slice(&next_integral);
        prev_angle.copy_from_slice(&angle);
        for i in 0..n {
            let torque = command[i] - DAMPING * velocity[i] - MASS * GRAVITY * LENGTH * angle[i].sin();
            velocity[i] += torque / (MASS * LENGTH * LENGTH) * DT;
            angle[i] += velocity[i] * DT;
            let error = reference[i] - angle[i];
            squared_error += error * error;
            // "Settled": more than 1 s after the step and after the switch to the sine.
            let since_change = if t < duration / 2.0 { t } else { t - duration / 2.0 };
            if since_change > 1.0 {
                squared_error_settled += error * error;
                settled_samples += 1;
                max_error_settled = max_error_settled.max(error.abs());
            }
        }
    }

    let rms = (squared_error / (steps * n) as f64).sqrt();
    let rms_settled = (squared_error_settled / settled_samples.max(1) as f64).sqrt();
    latencies_ns.sort_unstable();
    let percentile = |p: f64| {
        let index = ((p / 100.0) * (latencies_ns.len() - 1) as f64).round() as usize;
        latencies_ns[index] as f64 / 1000.0
    };
    println!(
        "pendulum x{n} under the rfx PID at 1 kHz for {duration} s simulated ({steps} steps), kernel compiled in {:.2} ms",
        compile_time.as_secs_f64() * 1e3
    );
    println!(
        "tracking error: RMS {rms:.4} rad over the run; once settled (>1 s after each set-point change) RMS {rms_settled:.4} rad, max {max_error_settled:.4} rad"
    );
    println!(
        "final: angle {:.4} rad, set point {:.4} rad",
        angle[0],
        setpoint(0, steps as f64 * DT, duration)
    );
    println!(
        "PID kernel call latency (µs, {} calls, including one Instant::now pair): p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        latencies_ns.len(),
        percentile(50.0),
        percentile(99.0),
        percentile(99.9),
        latencies_ns.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    Ok(())
}
