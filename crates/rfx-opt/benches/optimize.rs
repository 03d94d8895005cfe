//! Compile-time budget of the optimiser: `optimize` on a 20-op control kernel and on a 200-op
//! kernel (the targets are 300 µs and 5 ms on the 2-core CI machine).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rfx_ir::hir::{Builder, Kernel, ValueId};
use rfx_ir::{BinaryOp, DType, Scalar, TensorType, UnaryOp};
use rfx_opt::{OptConfig, optimize};

/// A control-style kernel of about `n_ops` ops: interleaved affine updates, products,
/// transcendentals and clamps over four state vectors, with constants to fold.
fn control_kernel(n_ops: usize) -> Kernel {
    let mut b = Builder::new("control");
    let ty = TensorType::new(DType::F32, [64]);
    let mut state: Vec<ValueId> = (0..4)
        .map(|i| b.input(format!("s{i}"), ty.clone()).expect("input"))
        .collect();
    let gains = [0.5f32, 1.5, 2.0, 0.25, 3.0];
    let mut ops = 0;
    let mut step = 0;
    while ops < n_ops {
        let (i, j) = (step % 4, (step + 1) % 4);
        let g = b.scalar(Scalar::F32(gains[step % gains.len()]));
        let one = b.scalar(Scalar::F32(1.0));
        let scaled = b.binary(BinaryOp::Mul, state[i], g).expect("mul");
        let shifted = b.binary(BinaryOp::Add, scaled, state[j]).expect("add");
        let bent = match step % 3 {
            0 => b.unary(UnaryOp::Sin, shifted).expect("sin"),
            1 => b.binary(BinaryOp::Mul, shifted, one).expect("mul one"),
            _ => b.unary(UnaryOp::Tanh, shifted).expect("tanh"),
        };
        state[i] = bent;
        ops += 5;
        step += 1;
    }
    for (i, &v) in state.iter().enumerate() {
        b.output(format!("o{i}"), v).expect("output");
    }
    b.finish().expect("kernel")
}

fn bench(c: &mut Criterion) {
    for n in [20, 200] {
        let kernel = control_kernel(n);
        let config = OptConfig::default();
        c.bench_function(&format!("optimize_{}_ops", kernel.op_count()), |bench| {
            bench.iter(|| optimize(black_box(&kernel), &config).expect("optimize"))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
