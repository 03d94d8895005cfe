//! The kernels of the state-in/state-out convention (`pid_tunable`, `biquad`) against plain f64
//! simulations of many steps, through bound calls with the state buffers swapped after each
//! call, as a control loop runs them. The references are written out here from the documented
//! equations (the PID) or in another realisation (the biquad in direct form I), and checked
//! against closed forms where one exists (the derivative of a ramp, the gain of the
//! Butterworth filter at DC and at its cut-off).

use rfx::{BoundKernel, DType, TensorType};
use rfx_control::{
    ALPHA_BETA_PARAMS, ALPHA_BETA_STATE, BIQUAD_COEFFICIENTS, BIQUAD_STATE, PID_PARAMS, PID_STATE, PidGains,
    alpha_beta, biquad, biquad_rest_state, butterworth_low_pass, pid_tunable,
};

const DT: f64 = 0.01;

fn f64s(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// One PID step in plain f64, the equations of `pid_tunable`'s documentation: returns the
/// command and updates `state`.
fn reference_pid(g: &PidGains, setpoint: f64, y: f64, state: &mut [f64; PID_STATE]) -> f64 {
    let [integral, derivative, y_prev] = *state;
    let e = setpoint - y;
    let derivative = (g.derivative_tf * derivative - g.kd * (y - y_prev)) / (g.derivative_tf + g.dt);
    let v = g.kp * e + integral + derivative;
    let u = v.clamp(g.command_min, g.command_max);
    let integral = (integral + g.dt * (g.ki * e + g.kt * (u - v))).clamp(g.integral_min, g.integral_max);
    *state = [integral, derivative, y];
    u
}

/// A mass on a damper, `m·a = u - c·v`, one semi-implicit Euler step.
fn plant(position: &mut f64, velocity: &mut f64, u: f64) {
    let acceleration = (u - 0.5 * *velocity) / 1.0;
    *velocity += acceleration * DT;
    *position += *velocity * DT;
}

fn gains() -> PidGains {
    PidGains {
        kp: 8.0,
        ki: 4.0,
        kd: 3.0,
        dt: DT,
        derivative_tf: 0.05,
        kt: 0.0,
        command_min: -100.0,
        command_max: 100.0,
        integral_min: -50.0,
        integral_max: 50.0,
    }
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * (1.0 + want.abs())
}

/// A batch of `B` PID loops closed around the plant for `steps` steps, kernel and reference side
/// by side, each loop with its own gains (`params` `[B, PID_PARAMS]`); the kernel's commands
/// must match the reference's at every step. Returns each loop's positions.
struct Loops<const B: usize> {
    kernel: BoundKernel,
    params: Vec<f64>,
    state: Vec<f64>,
    state_next: Vec<f64>,
    command: [f64; B],
    positions: [f64; B],
    velocities: [f64; B],
    reference_state: [[f64; PID_STATE]; B],
    reference_positions: [f64; B],
    reference_velocities: [f64; B],
}

impl<const B: usize> Loops<B> {
    fn new(jit: &rfx_control::ControlJit, gains: [PidGains; B]) -> Loops<B> {
        let kernel = jit
            .bind(&[
                f64s(&[B]),
                f64s(&[B]),
                f64s(&[B, PID_PARAMS]),
                f64s(&[B, PID_STATE]),
            ])
            .expect("bind pid_tunable");
        let mut loops = Loops {
            kernel,
            params: Vec::new(),
            state: (0..B).flat_map(|_| PidGains::initial_state(0.0)).collect(),
            state_next: vec![0.0; B * PID_STATE],
            command: [0.0; B],
            positions: [0.0; B],
            velocities: [0.0; B],
            reference_state: [PidGains::initial_state(0.0); B],
            reference_positions: [0.0; B],
            reference_velocities: [0.0; B],
        };
        loops.retune(gains);
        loops
    }

    fn retune(&mut self, gains: [PidGains; B]) {
        self.params = gains.iter().flat_map(PidGains::to_params).collect();
    }

    /// Runs `steps` steps towards `setpoint`, checking every command against the reference
    /// for `gains`; returns each loop's largest position.
    fn run(&mut self, gains: [PidGains; B], setpoint: f64, steps: usize) -> [f64; B] {
        let setpoints = [setpoint; B];
        let mut peak = [f64::NEG_INFINITY; B];
        for step in 0..steps {
            self.kernel
                .run_slices(
                    [
                        &setpoints[..],
                        &self.positions[..],
                        &self.params[..],
                        &self.state[..],
                    ],
                    [&mut self.command[..], &mut self.state_next[..]],
                )
                .expect("pid_tunable step");
            std::mem::swap(&mut self.state, &mut self.state_next);
            for b in 0..B {
                let want = reference_pid(
                    &gains[b],
                    setpoint,
                    self.reference_positions[b],
                    &mut self.reference_state[b],
                );
                assert!(
                    close(self.command[b], want, 1e-12),
                    "loop {b} step {step}: command {} != reference {want}",
                    self.command[b]
                );
                plant(&mut self.positions[b], &mut self.velocities[b], self.command[b]);
                plant(
                    &mut self.reference_positions[b],
                    &mut self.reference_velocities[b],
                    want,
                );
                peak[b] = peak[b].max(self.positions[b]);
            }
        }
        for b in 0..B {
            let state = &self.state[b * PID_STATE..(b + 1) * PID_STATE];
            for (k, (&got, &want)) in state.iter().zip(&self.reference_state[b]).enumerate() {
                assert!(
                    close(got, want, 1e-11),
                    "loop {b} state[{k}] {got} != reference {want}"
                );
            }
        }
        peak
    }
}

#[test]
fn pid_tunable_step_response_matches_the_reference_and_settles() {
    let jit = pid_tunable();
    // The same loop with the derivative filtered and unfiltered.
    let unfiltered = PidGains {
        derivative_tf: 0.0,
        ..gains()
    };
    let both = [gains(), unfiltered];
    let mut loops = Loops::new(&jit, both);
    loops.run(both, 1.0, 1500);
    for b in 0..2 {
        assert!(
            (loops.positions[b] - 1.0).abs() < 1e-3,
            "loop {b} settles: {}",
            loops.positions[b]
        );
        // At rest the integral carries the damper's load alone: u = c·v = 0 at v = 0.
        assert!(loops.state[b * PID_STATE].abs() < 1e-2);
    }
    assert_eq!(jit.compile_count(), 1);
}

#[test]
fn pid_tunable_first_step_and_filtered_derivative_of_a_ramp_are_closed_forms() {
    let g = PidGains {
        ki: 0.0,
        kp: 0.0,
        command_min: f64::NEG_INFINITY,
        command_max: f64::INFINITY,
        ..gains()
    };
    let jit = pid_tunable();
    let mut kernel = jit
        .bind(&[f64s(&[]), f64s(&[]), f64s(&[PID_PARAMS]), f64s(&[PID_STATE])])
        .expect("bind");
    let params = g.to_params();
    let (mut state, mut state_next) = (PidGains::initial_state(0.0), [0.0; PID_STATE]);
    let mut command = [0.0];
    // The measurement a ramp of slope 2 per step: d[k] = (Tf·d[k-1] - kd·2)/(Tf + h), which
    // tends to -kd·2/h; the first step is -kd·2/(Tf + h).
    let slope = 2.0;
    for k in 1..=400 {
        let y = [slope * k as f64];
        kernel
            .run_slices(
                [&[0.0][..], &y[..], &params[..], &state[..]],
                [&mut command[..], &mut state_next[..]],
            )
            .expect("step");
        std::mem::swap(&mut state, &mut state_next);
        if k == 1 {
            let want = -g.kd * slope / (g.derivative_tf + g.dt);
            assert!(
                close(command[0], want, 1e-13),
                "first derivative {} != {want}",
                command[0]
            );
        }
    }
    let ratio = g.derivative_tf / (g.derivative_tf + g.dt);
    let limit = -g.kd * slope / g.dt;
    // The geometric approach to the limit: after k steps, limit·(1 - ratio^k).
    let want = limit * (1.0 - ratio.powi(400));
    assert!(
        close(command[0], want, 1e-12),
        "derivative {} != {want}",
        command[0]
    );
    assert!(close(state[1], want, 1e-12));
    assert_eq!(state[2], slope * 400.0);
}

#[test]
fn pid_tunable_saturation_with_and_without_back_calculation() {
    // A command limit the step needs most of, and no integral clamp: only back-calculation
    // stops the windup.
    let saturating = PidGains {
        command_min: -3.0,
        command_max: 3.0,
        integral_min: f64::NEG_INFINITY,
        integral_max: f64::INFINITY,
        ..gains()
    };
    let tracking = PidGains {
        kt: 10.0,
        ..saturating
    };
    let both = [saturating, tracking];
    let jit = pid_tunable();
    let mut loops = Loops::new(&jit, both);
    let peak = loops.run(both, 2.0, 2500);
    // Both saturate at first; without back-calculation the wound-up integral overshoots far
    // more, and both settle in the end.
    let overshoot = peak.map(|p| p - 2.0);
    assert!(overshoot[0] > 0.3, "windup overshoot {}", overshoot[0]);
    assert!(
        overshoot[1] < overshoot[0] / 2.0,
        "back-calculation {} vs {}",
        overshoot[1],
        overshoot[0]
    );
    for b in 0..2 {
        assert!(
            (loops.positions[b] - 2.0).abs() < 1e-2,
            "loop {b}: {}",
            loops.positions[b]
        );
    }
    // The integral clamp alone (beside back-calculation off) bounds the integral state.
    let clamped = PidGains {
        integral_min: -0.5,
        integral_max: 0.5,
        ..saturating
    };
    let mut loops = Loops::new(&jit, [clamped]);
    loops.run([clamped], 2.0, 300);
    assert!(loops.state[0] <= 0.5);
    assert_eq!(
        jit.compile_count(),
        2,
        "one kernel per batch size, none per tuning"
    );
}

#[test]
fn pid_tunable_retunes_between_calls_without_a_compile() {
    let jit = pid_tunable();
    let soft = PidGains {
        kp: 2.0,
        ki: 0.5,
        kd: 1.0,
        ..gains()
    };
    let mut loops = Loops::new(&jit, [soft, gains()]);
    loops.run([soft, gains()], 1.0, 200);
    // New gains, limits and filter constant in the same buffer, the same bound kernel.
    let stiff = PidGains {
        kp: 20.0,
        ki: 10.0,
        kd: 5.0,
        derivative_tf: 0.02,
        kt: 5.0,
        command_max: 30.0,
        ..gains()
    };
    loops.retune([stiff, soft]);
    loops.run([stiff, soft], -0.5, 300);
    loops.retune([gains(), stiff]);
    loops.run([gains(), stiff], 0.25, 300);
    assert_eq!(jit.compile_count(), 1);
    // `call` with other parameter values hits the same compiled kernel too.
    let params = rfx::array(
        [2, PID_PARAMS],
        [stiff, soft].iter().flat_map(PidGains::to_params).collect(),
    )
    .expect("params");
    let state = rfx::array([2, PID_STATE], vec![0.0f64; 2 * PID_STATE]).expect("state");
    let out = jit
        .call((&[1.0f64, 1.0][..], &[0.0f64, 0.0][..], &params, &state))
        .expect("call");
    assert_eq!(out[0].as_slice::<f64>(), Some(&[stiff.kp, soft.kp][..]));
    assert_eq!(jit.compile_count(), 1);
}

#[test]
fn pid_tunable_shared_params_and_f32() {
    // One tuning `[PID_PARAMS]` for a batch of three, in f32.
    let g = gains();
    let jit = pid_tunable();
    let ty = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let mut kernel = jit
        .bind(&[ty(&[3]), ty(&[3]), ty(&[PID_PARAMS]), ty(&[3, PID_STATE])])
        .expect("bind f32");
    let params = g.to_params().map(|p| p as f32);
    let setpoint = [1.0f32, -1.0, 0.5];
    let measurement = [0.25f32, 0.5, 0.5];
    let state: Vec<f32> = [0.5f64, 0.0, 0.0]
        .iter()
        .flat_map(|&y| PidGains::initial_state(y))
        .map(|v| v as f32)
        .collect();
    let mut state_next = [0.0f32; 3 * PID_STATE];
    let mut command = [0.0f32; 3];
    kernel
        .run_slices(
            [&setpoint[..], &measurement[..], &params[..], &state[..]],
            [&mut command[..], &mut state_next[..]],
        )
        .expect("f32 step");
    for b in 0..3 {
        let mut reference_state = PidGains::initial_state(f64::from(state[b * PID_STATE + 2]));
        let want = reference_pid(
            &g,
            f64::from(setpoint[b]),
            f64::from(measurement[b]),
            &mut reference_state,
        );
        assert!(
            close(f64::from(command[b]), want, 1e-5),
            "{b}: {} != {want}",
            command[b]
        );
        for k in 0..PID_STATE {
            assert!(close(
                f64::from(state_next[b * PID_STATE + k]),
                reference_state[k],
                1e-5
            ));
        }
    }
}

#[test]
fn pid_tunable_rejects_a_state_or_params_of_the_wrong_size() {
    let jit = pid_tunable();
    let bad_state = jit.bind(&[f64s(&[2]), f64s(&[2]), f64s(&[PID_PARAMS]), f64s(&[2, 2])]);
    assert!(matches!(bad_state, Err(rfx::JitError::Trace(_))), "{bad_state:?}");
    let bad_params = jit.bind(&[
        f64s(&[2]),
        f64s(&[2]),
        f64s(&[PID_PARAMS - 1]),
        f64s(&[2, PID_STATE]),
    ]);
    assert!(
        matches!(bad_params, Err(rfx::JitError::Trace(_))),
        "{bad_params:?}"
    );
    let scalar_state = jit.bind(&[f64s(&[]), f64s(&[]), f64s(&[PID_PARAMS]), f64s(&[])]);
    assert!(
        matches!(scalar_state, Err(rfx::JitError::Trace(_))),
        "{scalar_state:?}"
    );
}

/// The biquad in direct form I, from its difference equation:
/// `y[n] = b0·x[n] + b1·x[n-1] + b2·x[n-2] - a1·y[n-1] - a2·y[n-2]`, from rest.
fn reference_biquad(c: [f64; BIQUAD_COEFFICIENTS], x: &[f64]) -> Vec<f64> {
    let [b0, b1, b2, a1, a2] = c;
    let mut y: Vec<f64> = Vec::with_capacity(x.len());
    for n in 0..x.len() {
        let at = |v: &[f64], k: usize| if n >= k { v[n - k] } else { 0.0 };
        let value = b0 * x[n] + b1 * at(x, 1) + b2 * at(x, 2) - a1 * at(&y, 1) - a2 * at(&y, 2);
        y.push(value);
    }
    y
}

/// Runs a bound biquad over `signals` (one per batch element), swapping the state buffers.
fn run_biquad(
    kernel: &mut BoundKernel,
    coefficients: &[f64],
    state: &mut Vec<f64>,
    signals: &[Vec<f64>],
) -> Vec<Vec<f64>> {
    let batch = signals.len();
    let mut state_next = vec![0.0; state.len()];
    let mut x = vec![0.0; batch];
    let mut y = vec![0.0; batch];
    let mut out = vec![Vec::new(); batch];
    for n in 0..signals[0].len() {
        for (x, signal) in x.iter_mut().zip(signals) {
            *x = signal[n];
        }
        kernel
            .run_slices(
                [&x[..], coefficients, &state[..]],
                [&mut y[..], &mut state_next[..]],
            )
            .expect("biquad step");
        std::mem::swap(state, &mut state_next);
        for b in 0..batch {
            out[b].push(y[b]);
        }
    }
    out
}

#[test]
fn biquad_matches_the_direct_form_one_reference() {
    let filters = [
        butterworth_low_pass(5.0, DT),
        butterworth_low_pass(20.0, DT),
        [0.2, -0.1, 0.05, -0.5, 0.25],
    ];
    let signals: Vec<Vec<f64>> = (0..3)
        .map(|b| {
            (0..300)
                .map(|n| ((n * (7 + b)) % 13) as f64 - 6.0 + (0.1 * n as f64).sin())
                .collect()
        })
        .collect();
    let jit = biquad();
    let mut kernel = jit
        .bind(&[
            f64s(&[3]),
            f64s(&[3, BIQUAD_COEFFICIENTS]),
            f64s(&[3, BIQUAD_STATE]),
        ])
        .expect("bind biquad");
    let coefficients: Vec<f64> = filters.iter().flatten().copied().collect();
    let mut state = vec![0.0; 3 * BIQUAD_STATE];
    let got = run_biquad(&mut kernel, &coefficients, &mut state, &signals);
    for b in 0..3 {
        let want = reference_biquad(filters[b], &signals[b]);
        for (n, (&g, &w)) in got[b].iter().zip(&want).enumerate() {
            assert!(close(g, w, 1e-12), "filter {b} sample {n}: {g} != {w}");
        }
    }
    assert_eq!(jit.compile_count(), 1);
}

#[test]
fn butterworth_low_pass_gain_at_dc_and_at_the_cut_off() {
    let (cutoff, dt) = (5.0, 0.001);
    let c = butterworth_low_pass(cutoff, dt);
    let jit = biquad();
    let mut kernel = jit
        .bind(&[f64s(&[2]), f64s(&[BIQUAD_COEFFICIENTS]), f64s(&[2, BIQUAD_STATE])])
        .expect("bind");
    // Signal 0: a sine at the cut-off, whose steady amplitude is 1/√2 (-3 dB); signal 1: a
    // constant 3.0 from a state at rest at 3.0 (no transient: every output is 3.0).
    let steps = 4000;
    let sine: Vec<f64> = (0..steps)
        .map(|n| (2.0 * std::f64::consts::PI * cutoff * dt * n as f64).sin())
        .collect();
    let mut state: Vec<f64> = [0.0, 0.0].into_iter().chain(biquad_rest_state(c, 3.0)).collect();
    let got = run_biquad(&mut kernel, &c, &mut state, &[sine, vec![3.0; steps]]);
    let amplitude = got[0][steps / 2..].iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(
        (amplitude - std::f64::consts::FRAC_1_SQRT_2).abs() < 2e-3,
        "amplitude {amplitude}"
    );
    for (n, &y) in got[1].iter().enumerate() {
        assert!(close(y, 3.0, 1e-12), "sample {n}: {y}");
    }
}

/// The α-β tracker in plain f64, from its equations; returns the residual.
fn reference_alpha_beta(params: [f64; 3], z: f64, state: &mut [f64; 2]) -> f64 {
    let [alpha, beta, dt] = params;
    let predicted = state[0] + dt * state[1];
    let residual = z - predicted;
    *state = [predicted + alpha * residual, state[1] + beta / dt * residual];
    residual
}

#[test]
fn alpha_beta_tracks_a_constant_velocity_target_and_matches_the_reference() {
    // Two trackers with their own gains, a target at 3 units/s from 1.0 with a bounded
    // wobble for the first 100 samples, then exactly on its line.
    let params = [[0.5, 0.2, DT], [0.85, 0.5, DT]];
    let jit = alpha_beta();
    let mut kernel = jit
        .bind(&[
            f64s(&[2]),
            f64s(&[2, ALPHA_BETA_PARAMS]),
            f64s(&[2, ALPHA_BETA_STATE]),
        ])
        .expect("bind alpha_beta");
    let flat_params: Vec<f64> = params.iter().flatten().copied().collect();
    let (mut state, mut state_next) = (vec![0.0; 4], vec![0.0; 4]);
    let mut reference = [[0.0; 2]; 2];
    let mut residual = [0.0; 2];
    for n in 0..600 {
        let t = n as f64 * DT;
        let wobble = if n < 100 { 0.05 * (7.0 * t).sin() } else { 0.0 };
        let z = [1.0 + 3.0 * t + wobble, 1.0 + 3.0 * t - wobble];
        kernel
            .run_slices(
                [&z[..], &flat_params[..], &state[..]],
                [&mut residual[..], &mut state_next[..]],
            )
            .expect("alpha_beta step");
        std::mem::swap(&mut state, &mut state_next);
        for b in 0..2 {
            let want = reference_alpha_beta(params[b], z[b], &mut reference[b]);
            assert!(close(residual[b], want, 1e-12), "tracker {b} step {n}");
        }
    }
    for b in 0..2 {
        // No steady-state error on a ramp: position 1 + 3·t at the last sample, velocity 3.
        let t = 599.0 * DT;
        assert!(
            (state[2 * b] - (1.0 + 3.0 * t)).abs() < 1e-6,
            "tracker {b} position {}",
            state[2 * b]
        );
        assert!(
            (state[2 * b + 1] - 3.0).abs() < 1e-5,
            "tracker {b} velocity {}",
            state[2 * b + 1]
        );
        assert!(close(state[2 * b], reference[b][0], 1e-12));
    }
    assert_eq!(jit.compile_count(), 1);
}

#[test]
fn the_control_page_example_runs() -> Result<(), Box<dyn std::error::Error>> {
    // docs/control.md's Rust example, as the page writes it.
    let gains = PidGains {
        kp: 8.0,
        ki: 4.0,
        kd: 0.5,
        dt: 0.001,
        derivative_tf: 0.01,
        kt: 20.0,
        command_min: -5.0,
        command_max: 5.0,
        integral_min: f64::NEG_INFINITY,
        integral_max: f64::INFINITY,
    };
    let ty = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    let jit = pid_tunable();
    // Two loops sharing one tuning: params [10], state [2, 3].
    let mut pid = jit.bind(&[ty(&[2]), ty(&[2]), ty(&[PID_PARAMS]), ty(&[2, PID_STATE])])?;

    let mut params = gains.to_params();
    let mut state: Vec<f64> = [0.0, 0.0]
        .iter()
        .flat_map(|&y| PidGains::initial_state(y))
        .collect();
    let mut state_next = vec![0.0; state.len()];
    let mut command = [0.0; 2];
    for step in 0..1000 {
        let measurement = [0.0, 0.1]; // read the sensors here
        pid.run_slices(
            [&[1.0, 1.0][..], &measurement[..], &params[..], &state[..]],
            [&mut command[..], &mut state_next[..]],
        )?;
        std::mem::swap(&mut state, &mut state_next);
        if step == 500 {
            // Retune: new numbers in the same buffer, the same compiled kernel.
            params = PidGains { kp: 6.0, ..gains }.to_params();
        }
    }
    assert_eq!(jit.compile_count(), 1);
    // Beyond the page: run on until the integral settles.
    for _ in 0..2500 {
        pid.run_slices(
            [&[1.0, 1.0][..], &[0.0, 0.1][..], &params[..], &state[..]],
            [&mut command[..], &mut state_next[..]],
        )?;
        std::mem::swap(&mut state, &mut state_next);
    }
    assert_eq!(jit.compile_count(), 1);
    // The measurements never move, so both loops saturate at the upper limit, and
    // back-calculation holds the (unclamped) integral where ki·e + kt·(u - v) = 0 with
    // v = kp·e + integral: integral = command_max + ki·e/kt - kp·e (kp = 6 after the retune).
    assert_eq!(command, [5.0, 5.0]);
    for (b, e) in [1.0, 0.9].into_iter().enumerate() {
        let want = 5.0 + 4.0 * e / 20.0 - 6.0 * e;
        let got = state[b * PID_STATE];
        assert!(
            (got - want).abs() < 1e-3,
            "loop {b}: integral {got}, steady state {want}"
        );
    }
    Ok(())
}
