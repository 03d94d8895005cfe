//! Device-resident arrays (`MetalBackend::to_device`, `MetalProgram::launch`): a control loop
//! whose state stays on the GPU gives, step after step, the bits of the host path and of the
//! LIR interpreter; bool and i32 arrays round-trip; wrong arity, dtypes and shapes are typed
//! errors that queue nothing. Without a wgpu adapter each test prints why it is skipped.

mod common;

use common::{adapter_or_skip, lower_kernel, parse};
use rfx_codegen_metal::{MetalBackend, MetalProgram};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, DType, Shape, TensorType};
use rfx_lower::{BackendError, CallError, Scratch, Unsupported};

/// A first-order low-pass step with a saturation, and its count of saturated elements.
const STEP: &str = "kernel step {
  %x = input x : f32[1000]
  %target = input target : f32[1000]
  %k = const 0.2 : f32[]
  %e = sub %target, %x : f32[1000]
  %de = mul %e, %k : f32[1000]
  %n = add %x, %de : f32[1000]
  %lo = const -0.75 : f32[]
  %hi = const 0.75 : f32[]
  %next = clamp %n, %lo, %hi : f32[1000]
  %sat = ne %next, %n : bool[1000]
  %one = const 1 : i32[]
  %zero = const 0 : i32[]
  %count = select %sat, %one, %zero : i32[1000]
  %total = sum %count axes [0] : i32[]
  output next = %next
  output saturated = %sat
  output total = %total
}";

/// A zeroed device array of `dtype` and `dims`.
fn zeros(dtype: DType, dims: &[usize]) -> rfx_codegen_metal::DeviceArray {
    MetalBackend
        .zeros(&TensorType::new(dtype, Shape::new(dims.to_vec())))
        .expect("zeros")
}

fn random_f32(rng: &mut TestRng, n: usize) -> Array {
    let values: Vec<f32> = (0..n).map(|_| rng.uniform(-1.5, 1.5) as f32).collect();
    Array::from_vec([n], values).expect("array")
}

fn bits(a: &Array) -> Vec<u64> {
    (0..a.data().len())
        .map(|i| a.get(i).map_or(u64::MAX, |s| s.to_f64().to_bits()))
        .collect()
}

/// `STEP` lowered and compiled, or `None` (the skip printed) without an adapter.
fn step_program() -> Option<(LirProgram, MetalProgram)> {
    if !adapter_or_skip() {
        return None;
    }
    let lir = lower_kernel(&parse(STEP));
    let program = MetalBackend
        .compile_program(&lir, &Default::default())
        .expect("compile");
    Some((lir, program))
}

#[test]
fn a_control_loop_keeps_its_state_on_the_device() {
    let Some((lir, program)) = step_program() else {
        return;
    };
    let mut rng = TestRng::new(0x5eed_0001);
    let x0 = random_f32(&mut rng, 1000);
    let target = random_f32(&mut rng, 1000);
    let mut state = MetalBackend.to_device(x0.view()).expect("to_device");
    let goal = MetalBackend.to_device(target.view()).expect("to_device");
    let mut next = zeros(DType::F32, &[1000]);
    let mut saturated = zeros(DType::Bool, &[1000]);
    let mut total = zeros(DType::I32, &[]);
    // The same steps on the host: the interpreter, and the backend's host path.
    let host = program.compiled();
    let mut x = x0.clone();
    for step in 0..12 {
        program
            .launch(&[&state, &goal], &mut [&mut next, &mut saturated, &mut total])
            .expect("launch");
        let want = run_lir(&lir, &[x.view(), target.view()], Mode::Native).expect("interpreter");
        let mut host_out: Vec<Array> = want
            .iter()
            .map(|a| Array::filled(rfx_ir::Scalar::zero(a.dtype()), a.shape().clone()))
            .collect();
        {
            let mut views: Vec<_> = host_out.iter_mut().map(Array::view_mut).collect();
            host.run(&[x.view(), target.view()], &mut views, &mut Scratch::new())
                .expect("host run");
        }
        // Read back only every few steps: the state never leaves the device in between.
        if step % 4 == 3 || step == 11 {
            let got = [
                MetalBackend.from_device(&next).expect("from_device"),
                MetalBackend.from_device(&saturated).expect("from_device"),
                MetalBackend.from_device(&total).expect("from_device"),
            ];
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let first_difference =
                    |a: &Array, b: &Array| bits(a).iter().zip(bits(b)).position(|(x, y)| *x != y);
                assert_eq!(g.shape(), w.shape());
                assert_eq!(
                    first_difference(g, w),
                    None,
                    "step {step}, output {k} against the interpreter"
                );
                assert_eq!(
                    first_difference(g, &host_out[k]),
                    None,
                    "step {step}, output {k} against the host path"
                );
            }
        }
        std::mem::swap(&mut state, &mut next);
        x = want.into_iter().next().expect("next");
    }
    // The loop converged into the saturation band: the count is the interpreter's.
    let total_now = MetalBackend.from_device(&total).expect("from_device");
    assert!(
        total_now.get(0).is_some_and(|s| s.to_f64() > 0.0),
        "{total_now:?}"
    );
}

#[test]
fn arrays_round_trip_in_every_device_dtype() {
    if !adapter_or_skip() {
        return;
    }
    let mut rng = TestRng::new(0x5eed_0002);
    let f = random_f32(&mut rng, 37);
    let i = Array::from_vec(
        [5, 3],
        (0..15)
            .map(|_| (rng.next_u64() % 2001) as i32 - 1000)
            .collect::<Vec<i32>>(),
    )
    .expect("i32");
    let b = Array::from_vec(
        [9],
        (0..9)
            .map(|_| rng.next_u64().is_multiple_of(2))
            .collect::<Vec<bool>>(),
    )
    .expect("bool");
    let empty = Array::from_vec([0], Vec::<f32>::new()).expect("empty");
    for a in [&f, &i, &b, &empty] {
        let device = MetalBackend.to_device(a.view()).expect("to_device");
        assert_eq!(device.ty(), &TensorType::new(a.dtype(), a.shape().clone()));
        let back = MetalBackend.from_device(&device).expect("from_device");
        assert_eq!(bits(&back), bits(a), "{:?}", a.dtype());
    }
    // Overwriting keeps the array, and the copy back lands in a caller's array too.
    let mut device = MetalBackend.to_device(f.view()).expect("to_device");
    let g = random_f32(&mut rng, 37);
    device.copy_from_host(g.view()).expect("copy_from_host");
    let mut out = Array::from_vec([37], vec![0.0f32; 37]).expect("out");
    device.copy_to_host(out.view_mut()).expect("copy_to_host");
    assert_eq!(bits(&out), bits(&g));
}

#[test]
fn wrong_arrays_are_typed_errors() {
    let Some((_, program)) = step_program() else {
        return;
    };
    let x = zeros(DType::F32, &[1000]);
    let short = zeros(DType::F32, &[999]);
    let ints = zeros(DType::I32, &[1000]);
    let mut next = zeros(DType::F32, &[1000]);
    let mut sat = zeros(DType::Bool, &[1000]);
    let mut total = zeros(DType::I32, &[]);
    let arity = program.launch(&[&x], &mut [&mut next, &mut sat, &mut total]);
    assert!(
        matches!(
            arity,
            Err(BackendError::Call(CallError::Arity {
                what: "inputs",
                expected: 2,
                found: 1
            }))
        ),
        "{arity:?}"
    );
    let shape = program.run_resident(&[&x, &short], &mut [&mut next, &mut sat, &mut total]);
    assert!(
        matches!(shape, Err(BackendError::Call(CallError::Shape { .. }))),
        "{shape:?}"
    );
    let dtype = program.launch(&[&ints, &x], &mut [&mut next, &mut sat, &mut total]);
    assert!(
        matches!(dtype, Err(BackendError::Call(CallError::DType { .. }))),
        "{dtype:?}"
    );
    let outputs = program.launch(&[&x, &x], &mut [&mut next, &mut total, &mut sat]);
    assert!(
        matches!(outputs, Err(BackendError::Call(CallError::DType { .. }))),
        "{outputs:?}"
    );
    // Nothing was queued: the outputs are still zeros.
    assert!(
        MetalBackend
            .from_device(&next)
            .expect("read")
            .as_slice::<f32>()
            .expect("f32")
            .iter()
            .all(|&v| v.to_bits() == 0)
    );
    // f64 has no device representation; a host array of another shape is refused.
    let f64_array = Array::from_vec([3], vec![1.0f64, 2.0, 3.0]).expect("f64");
    let refused = MetalBackend.to_device(f64_array.view());
    assert!(
        matches!(
            refused,
            Err(BackendError::Unsupported {
                what: Unsupported::DType(DType::F64),
                ..
            })
        ),
        "{refused:?}"
    );
    let mut device = zeros(DType::F32, &[1000]);
    let wrong = Array::from_vec([10], vec![0.5f32; 10]).expect("wrong");
    assert!(matches!(
        device.copy_from_host(wrong.view()),
        Err(BackendError::Call(CallError::Shape { .. }))
    ));
}
