//! Zero allocations per real-time call: a counting global allocator (`tests/counting_alloc`,
//! installed in this test binary only, so it does not affect other tests) around `BoundKernel`
//! calls on the CPU backend.

use std::sync::atomic::Ordering;

mod counting_alloc;

use counting_alloc::{ALLOCATIONS, COUNTING};

use rfx::{ArrayView, ArrayViewMut, DType, Shape, Tensor, TensorType};

#[test]
fn real_time_calls_allocate_nothing_after_warm_up() {
    // A kernel with a temporary (the reduction feeds an elementwise kernel) so the scratch
    // arena is used.
    let f = rfx::jit(|x: Tensor, y: Tensor| {
        let centred = x - x.mean(rfx::All);
        ((centred * 2.0).sin() + y, centred.sum(rfx::All))
    });
    let ty = TensorType::new(DType::F32, [64]);
    let mut bound = f.bind(&[ty.clone(), ty]).expect("bind");
    assert_eq!(bound.executable().backend(), "cpu");
    let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
    let y: Vec<f32> = (0..64).map(|i| (i as f32 * 0.11).cos()).collect();
    let mut out = vec![0.0f32; 64];
    let mut total = [0.0f32; 1];
    let shape = Shape::new([64]);
    let scalar = Shape::scalar();

    // Warm-up grows the scratch.
    bound
        .run_slices([&x[..], &y[..]], [&mut out[..], &mut total[..]])
        .expect("warm-up");

    // The real-time path on arguments made (and checked) once.
    let mut args = bound.args().expect("args");
    args.input_mut::<f32>(0).expect("x").copy_from_slice(&x);
    args.input_mut::<f32>(1).expect("y").copy_from_slice(&y);
    bound.run_args(&mut args).expect("warm-up");

    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..1000 {
        bound.run_args(&mut args).expect("args call");
        bound
            .run_slices([&x[..], &y[..]], [&mut out[..], &mut total[..]])
            .expect("slices call");
        let inputs = [
            ArrayView::new(&shape, &x[..]).expect("view"),
            ArrayView::new(&shape, &y[..]).expect("view"),
        ];
        let mut outputs = [
            ArrayViewMut::new(&shape, &mut out[..]).expect("view"),
            ArrayViewMut::new(&scalar, &mut total[..]).expect("view"),
        ];
        bound.run(&inputs, &mut outputs).expect("views call");
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(
        ALLOCATIONS.load(Ordering::SeqCst),
        0,
        "allocations in 3000 real-time calls"
    );
    assert_eq!(args.output::<f32>(0), Some(&out[..]));
    assert_eq!(args.output::<f32>(1), Some(&total[..]));

    let mean = x.iter().sum::<f32>() / 64.0;
    for i in 0..64 {
        let expected = ((x[i] - mean) * 2.0).sin() + y[i];
        assert!((out[i] - expected).abs() < 1e-5, "{i}: {} vs {expected}", out[i]);
    }
    assert!(total[0].abs() < 1e-4);
}
