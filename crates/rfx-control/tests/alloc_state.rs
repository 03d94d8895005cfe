//! A control loop of the state-in/state-out kernels allocates nothing after warm-up: a counting
//! global allocator (rfx's `tests/counting_alloc`, installed in this test binary only) around
//! a loop that filters the measurement with a bound `biquad` and runs a bound `pid_tunable`,
//! swapping each kernel's `state` and `state_next` buffers after each call and retuning the
//! PID halfway through by writing its `params` buffer.

use std::sync::atomic::Ordering;

#[path = "../../rfx/tests/counting_alloc/mod.rs"]
mod counting_alloc;

use counting_alloc::{ALLOCATIONS, COUNTING};

use rfx::{DType, TensorType};
use rfx_control::{
    BIQUAD_COEFFICIENTS, BIQUAD_STATE, PID_PARAMS, PID_STATE, PidGains, biquad, biquad_rest_state,
    butterworth_low_pass, pid_tunable,
};

const N: usize = 4;
const DT: f64 = 0.001;

#[test]
fn state_swapping_control_loop_allocates_nothing_after_warm_up() {
    let ty = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    let pid_jit = pid_tunable();
    let mut pid = pid_jit
        .bind(&[ty(&[N]), ty(&[N]), ty(&[PID_PARAMS]), ty(&[N, PID_STATE])])
        .expect("bind pid_tunable");
    let mut filter = biquad()
        .bind(&[ty(&[N]), ty(&[BIQUAD_COEFFICIENTS]), ty(&[N, BIQUAD_STATE])])
        .expect("bind biquad");

    let gains = PidGains {
        kp: 40.0,
        ki: 20.0,
        kd: 4.0,
        dt: DT,
        derivative_tf: 0.002,
        kt: 50.0,
        command_min: -8.0,
        command_max: 8.0,
        integral_min: -5.0,
        integral_max: 5.0,
    };
    let mut params = gains.to_params();
    let coefficients = butterworth_low_pass(100.0, DT);
    let setpoint = [1.0, 0.5, -0.5, 0.25];
    let (mut angle, mut velocity) = ([0.1f64; N], [0.0f64; N]);
    let mut filter_state = [0.0f64; N * BIQUAD_STATE];
    let mut pid_state = [0.0f64; N * PID_STATE];
    for i in 0..N {
        filter_state[i * BIQUAD_STATE..(i + 1) * BIQUAD_STATE]
            .copy_from_slice(&biquad_rest_state(coefficients, angle[i]));
        pid_state[i * PID_STATE..(i + 1) * PID_STATE].copy_from_slice(&PidGains::initial_state(angle[i]));
    }
    let (mut filter_next, mut pid_next) = ([0.0f64; N * BIQUAD_STATE], [0.0f64; N * PID_STATE]);
    let (mut filtered, mut command) = ([0.0f64; N], [0.0f64; N]);

    let mut step = |pid: &mut rfx::BoundKernel, filter: &mut rfx::BoundKernel, params: &[f64]| {
        filter
            .run_slices(
                [&angle[..], &coefficients[..], &filter_state[..]],
                [&mut filtered[..], &mut filter_next[..]],
            )
            .expect("filter");
        std::mem::swap(&mut filter_state, &mut filter_next);
        pid.run_slices(
            [&setpoint[..], &filtered[..], params, &pid_state[..]],
            [&mut command[..], &mut pid_next[..]],
        )
        .expect("pid");
        std::mem::swap(&mut pid_state, &mut pid_next);
        for i in 0..N {
            let acc = (command[i] - 0.1 * velocity[i] - 4.905 * angle[i].sin()) / 0.25;
            velocity[i] += acc * DT;
            angle[i] += velocity[i] * DT;
        }
    };

    step(&mut pid, &mut filter, &params); // warm-up: grows the scratch
    COUNTING.store(true, Ordering::SeqCst);
    for k in 0..5000 {
        if k == 2500 {
            // Retuning: new numbers in the same buffer.
            params = PidGains {
                kp: 30.0,
                kd: 3.0,
                ..gains
            }
            .to_params();
        }
        step(&mut pid, &mut filter, &params);
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations in the loop");
    assert_eq!(pid_jit.compile_count(), 1);
    for i in 0..N {
        assert!(
            (angle[i] - setpoint[i]).abs() < 0.05,
            "pendulum {i} settles: {}",
            angle[i]
        );
    }
}
