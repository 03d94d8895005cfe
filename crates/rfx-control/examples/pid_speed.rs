//! `pid_tunable` (gains, limits and filter constants as a run-time `params` input, the state in
//! one `[.., 3]` array) against `pid` (gains compiled in, the state in separate arrays) and
//! against `pid_tunable`'s step written as a plain Rust loop (rustc `-O`), measured alternately
//! in one run through the pre-bound call (`run_args`) at a few batch sizes.
//!
//! `cargo run --release -p rfx-control --example pid_speed -- [SIZES]`, SIZES a comma-separated
//! list of batch sizes (default `1,4,64,1024`).

mod timing;

use std::hint::black_box;

use rfx::{DType, TensorType};
use rfx_control::{PID_PARAMS, PID_STATE, PidConfig, PidGains, pid, pid_tunable};

const GAINS: PidGains = PidGains {
    kp: 2.0,
    ki: 1.0,
    kd: 0.05,
    dt: 0.001,
    derivative_tf: 0.01,
    kt: 0.5,
    command_min: -10.0,
    command_max: 10.0,
    integral_min: -1.0,
    integral_max: 1.0,
};

/// `pid_tunable`'s step in plain Rust, one loop per element, the state updated in place.
fn step_rust(r: &[f64], y: &[f64], p: &[f64; PID_PARAMS], state: &mut [f64], command: &mut [f64]) {
    let [kp, ki, kd, h, tf, kt, u_min, u_max, i_min, i_max] = *p;
    for (((r, y), s), c) in r
        .iter()
        .zip(y)
        .zip(state.chunks_exact_mut(PID_STATE))
        .zip(command)
    {
        let e = r - y;
        let derivative = (tf * s[1] - kd * (y - s[2])) / (tf + h);
        let v = kp * e + s[0] + derivative;
        let u = v.max(u_min).min(u_max);
        s[0] = (s[0] + h * (ki * e + kt * (u - v))).max(i_min).min(i_max);
        s[1] = derivative;
        s[2] = *y;
        *c = u;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ty = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    let config = PidConfig {
        kp: GAINS.kp,
        ki: GAINS.ki,
        kd: GAINS.kd,
        dt: GAINS.dt,
        integral_min: GAINS.integral_min,
        integral_max: GAINS.integral_max,
        command_min: GAINS.command_min,
        command_max: GAINS.command_max,
    };
    println!("batch   pid (gains compiled in)   pid_tunable   Rust loop (tunable step)   ns per call");
    let sizes: Vec<usize> = match std::env::args().nth(1) {
        Some(list) => list.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => vec![1, 4, 64, 1024],
    };
    for n in sizes {
        let mut fixed = pid(config).bind(&[ty(&[n]), ty(&[n]), ty(&[n]), ty(&[n])])?;
        let mut tunable =
            pid_tunable().bind(&[ty(&[n]), ty(&[n]), ty(&[PID_PARAMS]), ty(&[n, PID_STATE])])?;
        let mut fixed_args = fixed.args()?;
        let mut tunable_args = tunable.args()?;
        for k in 0..n {
            fixed_args.input_mut::<f64>(0).ok_or("f64")?[k] = 1.0;
            tunable_args.input_mut::<f64>(0).ok_or("f64")?[k] = 1.0;
        }
        tunable_args
            .input_mut::<f64>(2)
            .ok_or("f64")?
            .copy_from_slice(&GAINS.to_params());
        let (r, y) = (vec![1.0f64; n], vec![0.0f64; n]);
        let mut state = vec![0.0f64; n * PID_STATE];
        let mut command = vec![0.0f64; n];
        let params = GAINS.to_params();
        let calls = if n >= 1024 { 100 } else { 1000 };
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..3 {
            a.push(timing::median_ns(calls, || {
                fixed.run_args(&mut fixed_args).expect("pid")
            }));
            b.push(timing::median_ns(calls, || {
                tunable.run_args(&mut tunable_args).expect("pid_tunable")
            }));
            c.push(timing::median_ns(calls, || {
                step_rust(
                    black_box(&r),
                    black_box(&y),
                    black_box(&params),
                    &mut state,
                    &mut command,
                );
                black_box(&mut command);
            }));
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[1]
        };
        println!(
            "{n:>5}   {:>23.1}   {:>11.1}   {:>24.1}",
            med(&mut a),
            med(&mut b),
            med(&mut c)
        );
    }
    Ok(())
}
