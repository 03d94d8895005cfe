//! A kernel's entry point is `rfx_<kernel name>`; a kernel named like something else the
//! module declares (`rfx_zero`, a helper such as `rfx_exact` or `rfx_sin_f32`) or like an
//! earlier kernel still gets a name of its own, so the shader parses and runs.

mod common;

use common::{adapter_or_skip, run_metal};
use rfx_codegen_metal::{msl, wgsl};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir;
use rfx_ir::{Array, ArrayData, Shape};

/// `y = ((x + 1) + 1) + 1`, one kernel per step through two temporaries, the kernels named
/// `names`.
fn program(names: [&str; 3]) -> lir::LirProgram {
    let step = |name: &str, from: &str, to: &str| {
        format!(
            "  kernel {name} dims [3] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {{\n    \
             slots [f32, f32]\n    preamble {{\n      s1 = const 1.0\n    }}\n    body {{\n      \
             s0 = load {from} [1]\n      s0 = add s0, s1\n      store {to} [1] = s0\n    }}\n  }}\n"
        )
    };
    let text = format!(
        "lir names arena 32 align 16 {{\n  buf0: f32[3] = input x\n  buf1: f32[3] = output y\n  \
         buf2: f32[3] = arena 0\n  buf3: f32[3] = arena 16\n{}{}{}}}\n",
        step(names[0], "buf0", "buf2"),
        step(names[1], "buf2", "buf3"),
        step(names[2], "buf3", "buf1"),
    );
    let program = lir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    lir::verify(&program).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    program
}

#[test]
fn kernels_named_like_helpers_or_each_other_get_their_own_entry_points() {
    for names in [["zero", "exact", "sin_f32"], ["zero", "zero", "zero_1"]] {
        let program = program(names);
        let source = wgsl(&program).unwrap_or_else(|e| panic!("{names:?}: {e}"));
        msl(&program).unwrap_or_else(|e| panic!("{names:?}: {e}"));
        assert_eq!(source.matches("@compute").count(), 3, "{source}");
        if !adapter_or_skip() {
            continue;
        }
        let x = Array::new(Shape::new(vec![3]), ArrayData::F32(vec![0.5, -2.0, 1e6])).expect("x");
        let got = run_metal(&program, std::slice::from_ref(&x));
        let want = run_lir(&program, &[x.view()], Mode::Native).expect("run_lir");
        assert_eq!(got, want, "{names:?}");
        assert_eq!(got[0].data(), &ArrayData::F32(vec![3.5, 1.0, 1_000_003.0]));
    }
}
