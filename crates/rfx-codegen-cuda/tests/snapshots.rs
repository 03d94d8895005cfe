//! The generated CUDA C for a representative set of kernels, snapshot-tested (no GPU or NVRTC
//! needed). Review changes with `cargo insta review`.

mod common;

use common::lower_kernel;
use rfx_codegen_cuda::cuda_source;
use rfx_ir::hir;
use rfx_lower::CompileOptions;

fn source_of(text: &str, options: &CompileOptions) -> String {
    let kernel = hir::parse(text).expect("parse");
    let lir = lower_kernel(&kernel);
    let source = cuda_source(&lir, options).expect("cuda source");
    format!("{lir}\n// ---- CUDA C ----\n{source}")
}

fn exact(text: &str) -> String {
    source_of(text, &CompileOptions::default())
}

#[test]
fn fused_chain() {
    insta::assert_snapshot!(exact(
        "kernel fused_chain { %x = input x : f32[1024] %y = input y : f32[1024] %two = const 2.0 : f32[] \
         %x2 = mul %x, %two : f32[1024] %s = sin %x2 : f32[1024] %out = add %s, %y : f32[1024] output out = %out }"
    ));
}

#[test]
fn fused_chain_fast_math() {
    let options = CompileOptions {
        fast_math: true,
        ..CompileOptions::default()
    };
    insta::assert_snapshot!(source_of(
        "kernel fused_chain { %x = input x : f32[1024] %y = input y : f32[1024] %two = const 2.0 : f32[] \
         %x2 = mul %x, %two : f32[1024] %s = sin %x2 : f32[1024] %d = div %s, %y : f32[1024] \
         %g = sigmoid %d : f32[1024] output out = %g }",
        &options
    ));
}

#[test]
fn chain10() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rfx-opt/tests/corpus/chain10.rfx"
    ))
    .expect("chain10.rfx");
    insta::assert_snapshot!(exact(&text));
}

#[test]
fn reduction_middle_axis_mean_and_max() {
    insta::assert_snapshot!(exact(
        "kernel reduce { %x = input x : f32[4,5,19] %m = mean %x axes [1] : f32[4,19] \
         %s = max %x axes [1,2] : f32[4] output m = %m output s = %s }"
    ));
}

#[test]
fn inner_sum_with_lanes() {
    insta::assert_snapshot!(exact(
        "kernel sum_rows { %x = input x : f32[6,100] %s = sum %x axes [1] : f32[6] output s = %s }"
    ));
}

#[test]
fn broadcast() {
    insta::assert_snapshot!(exact(
        "kernel bcast { %a = input a : f32[8,16] %b = input b : f32[16] %s = input s : f32[] \
         %m = mul %a, %b : f32[8,16] %y = sub %m, %s : f32[8,16] output y = %y }"
    ));
}

#[test]
fn int_kernel() {
    insta::assert_snapshot!(exact(
        "kernel ints { %a = input a : i32[64] %b = input b : i32[64] %q = div %a, %b : i32[64] \
         %r = fmod %a, %b : i32[64] %n = neg %r : i32[64] %s = sign %q : i32[64] %y = add %n, %s : i32[64] \
         %f = input f : f32[64] %c = cast %f : i32[64] %z = max %y, %c : i32[64] output z = %z }"
    ));
}

#[test]
fn bool_select() {
    insta::assert_snapshot!(exact(
        "kernel gate { %x = input x : f32[32] %t = input t : f32[] %m = input m : bool[32] \
         %c = gt %x, %t : bool[32] %k = and %c, %m : bool[32] %z = const 0.0 : f32[] \
         %y = select %k, %x, %z : f32[32] %n = not %k : bool[32] output y = %y output n = %n }"
    ));
}

#[test]
fn f64_kernel() {
    insta::assert_snapshot!(exact(
        "kernel f64k { %x = input x : f64[3,7] %y = input y : f64[7] %p = pow %x, %y : f64[3,7] \
         %r = round %p : f64[3,7] %m = min %r, %x : f64[3,7] %i = const inf : f64[] %e = atan2 %m, %i : f64[3,7] \
         %f = cast %e : f32[3,7] output f = %f }"
    ));
}

#[test]
fn scans_both_ways() {
    // Positions integrated along each row and a cost-to-go down the columns: one thread per
    // row of each scanned axis, folding in order.
    insta::assert_snapshot!(exact(
        "kernel scans { %v = input v : f32[8,20] %p0 = input p0 : f32[8,1] %dt = const 0.05 : f32[] \
         %s = mul %v, %dt : f32[8,20] %t = cumsum %s axis 1 : f32[8,20] %p = add %t, %p0 : f32[8,20] \
         %c = mul %p, %p : f32[8,20] %g = cumsum %c axis 0 reverse : f32[8,20] %m = cummax %v axis 1 : f32[8,20] \
         output p = %p output g = %g output m = %m }"
    ));
}

#[test]
fn linear_recurrence() {
    // A low-pass filter along each row and a discounted sum from the end down the columns: the
    // accumulator scaled by `__fmul_rn` (never contracted into a multiply-add) before the add.
    insta::assert_snapshot!(exact(
        "kernel filters { %x = input x : f32[8,20] %a = input a : f32[8,20] %w = input w : f64[8,20] \
         %b = input b : f64[8,20] %k = const 0.25 : f32[] %d = mul %x, %k : f32[8,20] \
         %y = linrec %d, %a axis 1 : f32[8,20] %g = linrec %w, %b axis 0 reverse : f64[8,20] \
         output y = %y output g = %g }"
    ));
}
