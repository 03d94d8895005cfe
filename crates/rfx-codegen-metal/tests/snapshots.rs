//! MSL and WGSL of representative kernels, snapshot-tested without a device (`INSTA_UPDATE=no`
//! in CI, so a stale snapshot fails). Every MSL kernel binds its buffers at `[[buffer(N)]]`.

mod common;

use common::{lower_kernel, parse};

const KERNELS: [(&str, &str); 9] = [
    (
        "fused_chain",
        "kernel fused_chain {
  %x = input x : f32[1000]
  %y = input y : f32[1000]
  %two = const 2.0 : f32[]
  %x2 = mul %x, %two : f32[1000]
  %s = sin %x2 : f32[1000]
  %out = add %s, %y : f32[1000]
  output out = %out
}",
    ),
    (
        "reduction",
        "kernel reduction {
  %x = input x : f32[4,97]
  %s = sum %x axes [1] : f32[4]
  %m = max %x axes [0] : f32[97]
  output s = %s
  output m = %m
}",
    ),
    (
        "tree_reduction",
        "kernel tree_reduction {
  %x = input x : f32[3,4096]
  %sq = mul %x, %x : f32[3,4096]
  %s = sum %sq axes [1] : f32[3]
  output s = %s
}",
    ),
    (
        "broadcast",
        "kernel broadcast {
  %a = input a : f32[3,1,5]
  %b = input b : f32[4,1]
  %c = add %a, %b : f32[3,4,5]
  output c = %c
}",
    ),
    (
        "compare_select",
        "kernel compare_select {
  %a = input a : f32[64]
  %b = input b : f32[64]
  %lt = lt %a, %b : bool[64]
  %ne = ne %a, %b : bool[64]
  %lo = min %a, %b : f32[64]
  %s = select %lt, %lo, %b : f32[64]
  output lt = %lt
  output ne = %ne
  output s = %s
}",
    ),
    (
        "int_ops",
        "kernel int_ops {
  %a = input a : i32[17]
  %b = input b : i32[17]
  %d = div %a, %b : i32[17]
  %m = fmod %a, %b : i32[17]
  %n = neg %a : i32[17]
  %f = cast %d : f32[17]
  output d = %d
  output m = %m
  output n = %n
  output f = %f
}",
    ),
    (
        // The double-f32 helpers and the table of log2 pairs (a dynamically indexed array).
        "pow",
        "kernel pow {
  %a = input a : f32[256]
  %b = input b : f32[256]
  %p = pow %a, %b : f32[256]
  output p = %p
}",
    ),
    (
        // A running sum along rows (blocks of 16 steps, then the tail) and a reverse running
        // maximum down the columns: one invocation per row of the scanned axis.
        "scans",
        "kernel scans {
  %v = input v : f32[8,37]
  %dt = const 0.05 : f32[]
  %s = mul %v, %dt : f32[8,37]
  %t = cumsum %s axis 1 : f32[8,37]
  %m = cummax %v axis 0 reverse : f32[8,37]
  output t = %t
  output m = %m
}",
    ),
    (
        // A low-pass filter along rows: each step scales the accumulator by the coefficient
        // and adds the operand, two rounded operations.
        "linrec",
        "kernel linrec {
  %x = input x : f32[8,37]
  %a = input a : f32[8,37]
  %k = const 0.25 : f32[]
  %d = mul %x, %k : f32[8,37]
  %y = linrec %d, %a axis 1 : f32[8,37]
  output y = %y
}",
    ),
];

#[test]
fn msl_snapshots_bind_real_buffers() {
    for (name, text) in KERNELS {
        let lir = lower_kernel(&parse(text));
        let msl = rfx_codegen_metal::msl(&lir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(msl.contains("[[buffer(0)]]"), "{name}:\n{msl}");
        assert!(!msl.contains("fake"), "{name}:\n{msl}");
        assert!(msl.contains("kernel void"), "{name}:\n{msl}");
        insta::assert_snapshot!(format!("{name}_msl"), msl);
    }
}

#[test]
fn wgsl_snapshots() {
    for (name, text) in KERNELS {
        let lir = lower_kernel(&parse(text));
        let wgsl = rfx_codegen_metal::wgsl(&lir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(wgsl.contains("@compute"), "{name}:\n{wgsl}");
        insta::assert_snapshot!(format!("{name}_wgsl"), wgsl);
    }
}
