//! `set_row` through `optimize`: the MIR program gives the HIR interpreter's bits, alone and as
//! the update of a loop's history carry (the recording loop of reverse mode), with random
//! indices (clamped) and special values.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a test failure")]

use rfx_ir::hir::{Builder, Kernel, Loop};
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_ir::{BinaryOp, DType, Scalar, Shape, TensorType, UnaryOp};
use rfx_opt::{OptConfig, optimize};

fn assert_same_bits(kernel: &Kernel, rounds: usize) {
    let program = optimize(kernel, &OptConfig::default())
        .unwrap_or_else(|e| panic!("{e}\n{kernel}"))
        .0;
    let mut rng = TestRng::new(48);
    for mode in [Mode::Native, Mode::Oracle] {
        for _ in 0..rounds {
            let inputs = random_inputs(&mut rng, kernel, 0.1);
            let views: Vec<_> = inputs.iter().map(rfx_ir::Array::view).collect();
            let expected = run_hir(kernel, &views, mode).unwrap();
            let found = run_mir(&program, &views, mode).unwrap_or_else(|e| panic!("{e}\n{program}"));
            for (e, f) in expected.iter().zip(&found) {
                assert!(same_values(e, f), "HIR {e:?}, MIR {f:?}\n{kernel}\n{program}");
            }
        }
    }
}

#[test]
fn a_set_row_compiles_to_the_interpreters_bits() {
    let mut b = Builder::new("k");
    let x = b.input("x", TensorType::new(DType::F32, [5, 3])).unwrap();
    let r = b.input("r", TensorType::new(DType::F32, [3])).unwrap();
    let i = b.input("i", TensorType::scalar(DType::I32)).unwrap();
    let s = b.unary(UnaryOp::Sin, r).unwrap();
    let y = b.set_row(x, s, i).unwrap();
    let z = b.binary(BinaryOp::Mul, y, x).unwrap();
    b.output("y", y).unwrap();
    b.output("z", z).unwrap();
    assert_same_bits(&b.finish().unwrap(), 20);
    // Every in-range index, and both sides out of range, on a fixed input.
    let mut b = Builder::new("k");
    let x = b.input("x", TensorType::new(DType::I32, [4])).unwrap();
    let r = b.input("r", TensorType::scalar(DType::I32)).unwrap();
    let i = b.input("i", TensorType::scalar(DType::I32)).unwrap();
    let y = b.set_row(x, r, i).unwrap();
    b.output("y", y).unwrap();
    let kernel = b.finish().unwrap();
    let program = optimize(&kernel, &OptConfig::default()).unwrap().0;
    let x = rfx_ir::Array::from_vec([4], vec![1i32, 2, 3, 4]).unwrap();
    let r = rfx_ir::Array::scalar(Scalar::I32(9));
    for (i, want) in [
        (-5, [9, 2, 3, 4]),
        (2, [1, 2, 9, 4]),
        (3, [1, 2, 3, 9]),
        (77, [1, 2, 3, 9]),
    ] {
        let i = rfx_ir::Array::scalar(Scalar::I32(i));
        let got = run_mir(&program, &[x.view(), r.view(), i.view()], Mode::Native).unwrap();
        assert_eq!(got[0].as_slice::<i32>().unwrap(), &want);
    }
}

/// A fori loop of `trips` trips recording the carry `c: f32[2]` entering each iteration into a
/// history `h: f32[trips, 2]` with `set_row(h, c, t)`, as reverse mode's recording loop does.
fn recording_loop(trips: usize) -> Kernel {
    recording_loop_with(trips, None)
}

/// [`recording_loop`] as a while loop of at most `trips` trips, running while `c0 + c1 < limit`.
fn recording_while_loop(trips: usize, limit: f32) -> Kernel {
    recording_loop_with(trips, Some(limit_cond(trips, limit)))
}

/// The test of a while loop over `c: f32[2]`, `t: i32[]`, `h: f32[trips, 2]` and the invariant
/// `k: f32[2]`: `c0 + c1 < limit`.
fn limit_cond(trips: usize, limit: f32) -> Kernel {
    let mut cond = Builder::new("cond");
    let c = cond.input("c", TensorType::new(DType::F32, [2])).unwrap();
    cond.input("t", TensorType::scalar(DType::I32)).unwrap();
    cond.input("h", TensorType::new(DType::F32, [trips, 2])).unwrap();
    cond.input("k", TensorType::new(DType::F32, [2])).unwrap();
    let sum = cond.reduce_all(rfx_ir::ReduceOp::Sum, c).unwrap();
    let limit = cond.scalar(Scalar::F32(limit));
    let keep = cond.compare(rfx_ir::CmpOp::Lt, sum, limit).unwrap();
    cond.output("keep", keep).unwrap();
    cond.finish().unwrap()
}

/// The kernel that runs `body` (with the test `cond`) for `trips` trips from `c = c0`, `t = 0`
/// and a history of `h0`s, with the invariant `k`, and outputs the final `c`, `t` and `h`.
fn record(trips: usize, body: Kernel, cond: Option<Kernel>, h0: f32) -> Kernel {
    let mut b = Builder::new("record");
    let c0 = b.input("c0", TensorType::new(DType::F32, [2])).unwrap();
    let k = b.input("k", TensorType::new(DType::F32, [2])).unwrap();
    let t0 = b.scalar(Scalar::I32(0));
    let h0 = b.constant(Scalar::F32(h0), Shape::new([trips, 2]));
    let finals = b
        .loop_(
            Loop {
                carries: 3,
                trips: trips as u64,
                body,
                cond,
            },
            &[c0, t0, h0, k],
        )
        .unwrap();
    for (name, value) in ["c", "t", "h"].into_iter().zip(finals) {
        b.output(name, value).unwrap();
    }
    b.finish().unwrap()
}

fn recording_loop_with(trips: usize, cond: Option<Kernel>) -> Kernel {
    let carry = TensorType::new(DType::F32, [2]);
    let history = TensorType::new(DType::F32, [trips, 2]);
    let counter = TensorType::scalar(DType::I32);
    let mut body = Builder::new("body");
    let c = body.input("c", carry.clone()).unwrap();
    let t = body.input("t", counter.clone()).unwrap();
    let h = body.input("h", history.clone()).unwrap();
    let k = body.input("k", carry.clone()).unwrap();
    let one = body.scalar(Scalar::I32(1));
    let t_next = body.binary(BinaryOp::Add, t, one).unwrap();
    let h_next = body.set_row(h, c, t).unwrap();
    let s = body.unary(UnaryOp::Sin, c).unwrap();
    let c_next = body.binary(BinaryOp::Mul, s, k).unwrap();
    body.output("c", c_next).unwrap();
    body.output("t", t_next).unwrap();
    body.output("h", h_next).unwrap();
    record(trips, body.finish().unwrap(), cond, 0.0)
}

#[test]
fn a_recording_loop_compiles_to_the_interpreters_bits() {
    assert_same_bits(&recording_loop(6), 5);
}

#[test]
fn a_recording_loop_stores_one_row_per_iteration() {
    for trips in [6, 1000] {
        let program = optimize(&recording_loop(trips), &OptConfig::default()).unwrap().0;
        let [range] = program.loops() else {
            panic!("one loop expected:\n{program}");
        };
        let body = &program.kernels()[range.first..range.end];
        let row_stores = body
            .iter()
            .flat_map(|k| &k.stores)
            .filter(|s| s.row().is_some())
            .count();
        assert_eq!(row_stores, 1, "{program}");
        // No kernel of the loop touches the whole history: each iteration's work is O(|c|).
        assert!(body.iter().all(|k| k.domain.numel() <= 2), "{program}");
        let text = program.to_string();
        assert!(text.contains(&format!("rows {trips} stride 2")), "{text}");
        assert_eq!(rfx_ir::mir::parse(&text).unwrap(), program);
    }
}

#[test]
fn a_while_recording_loop_masks_the_row_and_gives_the_interpreters_bits() {
    // Random inputs stop the loop anywhere (or never); the rows after the exit stay as they were.
    for limit in [-1.0, 0.5, 3.0] {
        assert_same_bits(&recording_while_loop(6, limit), 5);
    }
    // A fixed input that stops after some iterations: the rows it wrote, then zeros.
    let kernel = recording_while_loop(8, 1.2);
    let program = optimize(&kernel, &OptConfig::default()).unwrap().0;
    let c0 = rfx_ir::Array::from_vec([2], vec![0.3f32, 0.4]).unwrap();
    let k = rfx_ir::Array::from_vec([2], vec![1.5f32, 1.9]).unwrap();
    let views = [c0.view(), k.view()];
    let want = run_hir(&kernel, &views, Mode::Native).unwrap();
    let got = run_mir(&program, &views, Mode::Native).unwrap();
    let ran = *want[1].as_slice::<i32>().unwrap().first().unwrap();
    assert!(0 < ran && ran < 8, "the test stops the loop early: {ran}");
    for (e, f) in want.iter().zip(&got) {
        assert!(same_values(e, f), "HIR {e:?}, MIR {f:?}\n{program}");
    }
}

#[test]
fn a_while_recording_loop_stores_one_row_per_iteration() {
    for trips in [6, 1000] {
        let program = optimize(&recording_while_loop(trips, 1.0), &OptConfig::default())
            .unwrap()
            .0;
        let [range] = program.loops() else {
            panic!("one loop expected:\n{program}");
        };
        assert!(range.exit.is_some(), "{program}");
        let body = &program.kernels()[range.first..range.end];
        let row_stores = body
            .iter()
            .flat_map(|k| &k.stores)
            .filter(|s| s.row().is_some())
            .count();
        assert_eq!(row_stores, 1, "{program}");
        // No kernel of the loop touches the whole history: the masked row, not the history.
        assert!(body.iter().all(|k| k.domain.numel() <= 2), "{program}");
    }
}

/// A loop (a while loop with `limit`) of `trips` trips over `c: f32[2]`, `t: i32[]`,
/// `h: f32[trips, 2]` whose body also reads the history it updates: `c' = sin(c) * k +
/// sum(h) / 8 + h[t - 1]` and `h' = set_row(h, c, t)`, `t' = t + 1`.
fn reading_loop(trips: usize, limit: Option<f32>) -> Kernel {
    let carry = TensorType::new(DType::F32, [2]);
    let history = TensorType::new(DType::F32, [trips, 2]);
    let counter = TensorType::scalar(DType::I32);
    let types = [carry.clone(), counter.clone(), history.clone(), carry.clone()];
    let mut body = Builder::new("body");
    let names = ["c", "t", "h", "k"];
    let [c, t, h, k] = [0, 1, 2, 3].map(|i| body.input(names[i], types[i].clone()).unwrap());
    let one = body.scalar(Scalar::I32(1));
    let t_next = body.binary(BinaryOp::Add, t, one).unwrap();
    let before = body.binary(BinaryOp::Sub, t, one).unwrap();
    let at = body.reshape(before, Shape::new([1, 1])).unwrap();
    let at = body.broadcast_to(at, Shape::new([1, 2])).unwrap();
    let last = body.gather(h, at, 0).unwrap();
    let last = body.reshape(last, Shape::new([2])).unwrap();
    let all = body.reduce_all(rfx_ir::ReduceOp::Sum, h).unwrap();
    let eighth = body.scalar(Scalar::F32(0.125));
    let all = body.binary(BinaryOp::Mul, all, eighth).unwrap();
    let s = body.unary(UnaryOp::Sin, c).unwrap();
    let c_next = body.binary(BinaryOp::Mul, s, k).unwrap();
    let c_next = body.binary(BinaryOp::Add, c_next, all).unwrap();
    let c_next = body.binary(BinaryOp::Add, c_next, last).unwrap();
    let h_next = body.set_row(h, c, t).unwrap();
    body.output("c", c_next).unwrap();
    body.output("t", t_next).unwrap();
    body.output("h", h_next).unwrap();
    let cond = limit.map(|limit| limit_cond(trips, limit));
    record(trips, body.finish().unwrap(), cond, 0.5)
}

#[test]
fn a_loop_that_reads_the_history_it_updates_gives_the_interpreters_bits() {
    // A while body's row is stored after every read of the history, so the history stays in
    // its buffer and takes one row store per iteration; a fori body's reads see the rows the
    // iterations before it stored.
    assert_same_bits(&reading_loop(6, None), 5);
    for limit in [-1.0, 0.5, 3.0] {
        assert_same_bits(&reading_loop(6, Some(limit)), 5);
    }
    let program = optimize(&reading_loop(6, Some(1.0)), &OptConfig::default())
        .unwrap()
        .0;
    let row_stores = program
        .kernels()
        .iter()
        .flat_map(|k| &k.stores)
        .filter(|s| s.row().is_some())
        .count();
    assert_eq!(row_stores, 1, "{program}");
}
