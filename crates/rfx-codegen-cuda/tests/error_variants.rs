//! Raises `BackendError::Runtime` on a CUDA device: compiling an LIR program whose arena is
//! larger than any device's memory fails to allocate it. Without a driver or GPU the test
//! prints why it was skipped, like the crate's other device tests.

use rfx_codegen_cuda::CudaBackend;
use rfx_ir::lir;
use rfx_lower::{Backend, BackendError, CompileOptions};

/// `y = -x` over three elements, declaring a 1 PiB (2^50-byte) arena it never uses.
const HUGE_ARENA: &str = "\
lir l arena 1125899906842624 align 64 {
  buf0: f32[3] = input x
  buf1: f32[3] = output y
  kernel k0 dims [3] reduce 0 vector 4 thread_min 32768 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf0 [1]
      s1 = neg s0
      store buf1 [1] = s1
    }
  }
}
";

#[test]
fn an_arena_larger_than_the_device_memory_is_a_runtime_error() {
    let program = lir::parse(HUGE_ARENA).expect("the program parses");
    lir::verify(&program).expect("an arena larger than its buffers is valid LIR");
    if let Err(reason) = CudaBackend.check_available() {
        println!("skipped: no CUDA driver/GPU ({reason})");
        eprintln!("skipped: no CUDA driver/GPU ({reason})");
        return;
    }
    let err = CudaBackend
        .compile(&program, &CompileOptions::default())
        .map(|_| ())
        .expect_err("no device has 1 PiB of memory");
    assert!(
        matches!(&err, BackendError::Runtime { backend: "cuda", message }
            if message.contains("allocating the arena")),
        "{err:?}"
    );
}
