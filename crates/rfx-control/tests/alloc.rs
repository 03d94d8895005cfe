//! The real-time control loop step allocates nothing after warm-up: a counting global
//! allocator (rfx's `tests/counting_alloc`, installed in this test binary only, so no other test
//! is affected) around a loop that filters the measurement, runs the PID through pre-bound
//! kernels with preallocated outputs, and integrates a pendulum.

use std::sync::atomic::Ordering;

#[path = "../../rfx/tests/counting_alloc/mod.rs"]
mod counting_alloc;

use counting_alloc::{ALLOCATIONS, COUNTING};

use rfx::{DType, TensorType};
use rfx_control::{PidConfig, low_pass, pid, quat_slerp};

const N: usize = 4;
const DT: f64 = 0.001;

#[test]
fn control_loop_step_allocates_nothing_after_warm_up() {
    let config = PidConfig {
        kp: 40.0,
        ki: 20.0,
        kd: 4.0,
        dt: DT,
        integral_min: -5.0,
        integral_max: 5.0,
        command_min: -8.0,
        command_max: 8.0,
    };
    let ty = TensorType::new(DType::F64, [N]);
    let scalar = TensorType::new(DType::F64, []);
    let mut pid = pid(config)
        .bind(&[ty.clone(), ty.clone(), ty.clone(), ty.clone()])
        .expect("bind pid");
    let mut filter = low_pass()
        .bind(&[ty.clone(), ty.clone(), scalar])
        .expect("bind low_pass");
    let slerp_types: Vec<TensorType> = (0..9).map(|_| ty.clone()).collect();
    let mut slerp = quat_slerp().bind(&slerp_types).expect("bind slerp");

    let setpoint = [1.0, 0.5, -0.5, 0.25];
    let (mut angle, mut velocity) = ([0.1f64; N], [0.0f64; N]);
    let (mut filtered, mut prev_filtered, mut integral) = ([0.1f64; N], [0.1f64; N], [0.0f64; N]);
    let (mut command, mut next_integral, mut next_filtered) = ([0.0f64; N], [0.0f64; N], [0.0f64; N]);
    let alpha = [0.5f64];
    let (qa, qb, t) = ([0.5f64; N], [0.5f64; N], [0.3f64; N]);
    let mut q_out = [[0.0f64; N]; 4];

    let mut step =
        |pid: &mut rfx::BoundKernel, filter: &mut rfx::BoundKernel, slerp: &mut rfx::BoundKernel| {
            filter
                .run_slices([&angle[..], &filtered[..], &alpha[..]], [&mut next_filtered[..]])
                .expect("filter");
            prev_filtered = filtered;
            filtered = next_filtered;
            pid.run_slices(
                [&setpoint[..], &filtered[..], &prev_filtered[..], &integral[..]],
                [&mut command[..], &mut next_integral[..]],
            )
            .expect("pid");
            integral = next_integral;
            let [w, x, y, z] = &mut q_out;
            slerp
                .run_slices(
                    [
                        &qa[..],
                        &qa[..],
                        &qa[..],
                        &qa[..],
                        &qb[..],
                        &qb[..],
                        &qb[..],
                        &qb[..],
                        &t[..],
                    ],
                    [&mut w[..], &mut x[..], &mut y[..], &mut z[..]],
                )
                .expect("slerp");
            for i in 0..N {
                let acc = (command[i] - 0.1 * velocity[i] - 4.905 * angle[i].sin()) / 0.25;
                velocity[i] += acc * DT;
                angle[i] += velocity[i] * DT;
            }
        };

    step(&mut pid, &mut filter, &mut slerp); // warm-up: grows the scratch
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..5000 {
        step(&mut pid, &mut filter, &mut slerp);
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations in the loop");
    for i in 0..N {
        assert!(
            (angle[i] - setpoint[i]).abs() < 0.05,
            "pendulum {i} settles: {}",
            angle[i]
        );
    }
}
