//! Graphviz export snapshots.

use rfx_ir::{dot, hir, mir};

#[test]
fn hir_dot_of_the_fused_chain() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/corpus/hir/fused_chain.rfx"
    ))
    .expect("corpus file");
    let kernel = hir::parse(&text).expect("valid kernel");
    insta::assert_snapshot!(dot::hir_to_dot(&kernel));
}

#[test]
fn mir_dot_of_a_two_kernel_program() {
    let program = mir::parse(
        "mir mean_var {
           x: f32[4,8] = input x
           m: f32[4,1] = output mean
           v: f32[4] = output var
           kernel k0 [4,8] {
             %0 = load x [8,1] : f32
             reduce mean m = %0 axes [1]
           }
           kernel k1 [4,8] {
             %0 = load x [8,1] : f32
             %1 = load m [1,0] : f32
             %2 = sub %0, %1 : f32
             %3 = mul %2, %2 : f32
             reduce mean v = %3 axes [1]
           }
         }",
    )
    .expect("valid program");
    insta::assert_snapshot!(dot::mir_to_dot(&program));
}
