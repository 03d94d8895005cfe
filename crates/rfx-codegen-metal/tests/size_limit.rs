//! On llvmpipe, a program above `LLVMPIPE_MAX_WEIGHTED_INSTS` (2,000: a transcendental counts
//! 20) is refused with `Unsupported::Size` at once, since llvmpipe's LLVM would compile its
//! shader for many minutes; a 20,000-op kernel heavy in transcendentals is the probe. A
//! program below the limit runs with the interpreter's values. Without a wgpu adapter the
//! tests print why they are skipped; on other adapters the limit does not apply.

mod common;

use common::{adapter_or_skip, lower_kernel, parse, run_metal};
use rfx_check::generator::transcendental_kernel;
use rfx_codegen_metal::MetalBackend;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, DType};
use rfx_lower::{Backend, BackendError, Unsupported};

fn on_llvmpipe() -> bool {
    adapter_or_skip() && MetalBackend.adapter().is_ok_and(|name| name.contains("llvmpipe"))
}

#[test]
fn a_twenty_thousand_op_kernel_is_refused_on_llvmpipe() {
    if !on_llvmpipe() {
        eprintln!("skipped: the adapter is not llvmpipe");
        return;
    }
    let kernel = transcendental_kernel(&mut TestRng::new(43), 20_000, DType::F32, 3, "large");
    // The optimiser and lowering of 20,000 ops run on a thread with a large stack, so that this
    // test exercises the backend whatever the depth of their walks.
    let lir = std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || lower_kernel(&kernel))
        .expect("spawn")
        .join()
        .expect("lower");
    let start = std::time::Instant::now();
    let err = MetalBackend
        .compile(&lir, &Default::default())
        .map(|_| ())
        .expect_err("past the limit");
    assert!(
        matches!(&err, BackendError::Unsupported { backend: "metal", what: Unsupported::Size { size, limit: 2_000, .. } } if *size > 2_000),
        "{err:?}"
    );
    assert!(
        start.elapsed().as_secs() < 10,
        "refused after {:?}",
        start.elapsed()
    );
}

#[test]
fn a_kernel_below_the_limit_runs() {
    if !adapter_or_skip() {
        return;
    }
    // 25 nested sines: about 500 weighted instructions.
    let mut expr = String::from("%x");
    let mut text = String::from("kernel nested {\n  %x = input x : f32[3]\n");
    for k in 0..25 {
        text += &format!("  %s{k} = sin {expr} : f32[3]\n");
        expr = format!("%s{k}");
    }
    text += &format!("  output y = {expr}\n}}\n");
    let lir = lower_kernel(&parse(&text));
    let inputs = [Array::from_vec(vec![3], vec![0.5f32, -2.0, 3.0]).expect("x")];
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
    let got = run_metal(&lir, &inputs);
    let (got, want) = (
        got[0].as_slice::<f32>().expect("f32"),
        want[0].as_slice::<f32>().expect("f32"),
    );
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5, "metal {g}, interpreter {w}");
    }
}
