//! A program above `MAX_WEIGHTED_INSTS` (12,000: a transcendental counts 20) is refused with
//! `Unsupported::Size` before NVRTC sees it (NVRTC would take hours on 20,000 ops); one below
//! is generated. No device or NVRTC is needed.

use rfx_codegen_cuda::cuda_source;
use rfx_ir::lir;
use rfx_lower::{BackendError, CompileOptions, Unsupported};

/// `y = sin(sin(…sin(x)))`, `sines` deep, over three elements.
fn sine_chain(sines: usize) -> lir::LirProgram {
    let mut text = String::from(
        "lir l arena 0 align 64 {\n  buf0: f32[3] = input x\n  buf1: f32[3] = output y\n  \
         kernel k0 dims [3] reduce 0 vector 4 thread_min 32768 tile 1024 lanes 1 {\n    \
         slots [f32, f32]\n    preamble {}\n    body {\n      s0 = load buf0 [1]\n",
    );
    for k in 0..sines {
        let (dst, src) = if k % 2 == 0 { (1, 0) } else { (0, 1) };
        text += &format!("      s{dst} = sin s{src}\n");
    }
    text += &format!("      store buf1 [1] = s{}\n    }}\n  }}\n}}\n", sines % 2);
    let program = lir::parse(&text).expect("the program parses");
    lir::verify(&program).expect("the program verifies");
    program
}

#[test]
fn a_program_past_the_weighted_size_limit_is_refused() {
    // 2 + 20 * 600 = 12,002 weighted instructions.
    let err = cuda_source(&sine_chain(600), &CompileOptions::default()).expect_err("past the limit");
    assert!(
        matches!(
            &err,
            BackendError::Unsupported {
                backend: "cuda",
                what: Unsupported::Size {
                    size: 12_002,
                    limit: 12_000,
                    ..
                }
            }
        ),
        "{err:?}"
    );
    // 2 + 20 * 599 = 11,982.
    let source = cuda_source(&sine_chain(599), &CompileOptions::default()).expect("within the limit");
    assert!(source.contains("sin"), "{source}");
}
