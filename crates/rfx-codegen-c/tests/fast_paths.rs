//! The exported loops' fast paths: f32 `sin` and `cos` through the float reduction (within
//! 4 ULP of `f64` on a dense grid of [-4096, 4096], and an element's bits independent of the
//! other elements of its call), `exp` and `exp2` bit for bit with their previous branching
//! helpers, and the loops vectorised by GCC without a run-time overlap check.

mod common;

use rfx_ir::DType;
use rfx_lower::{LowerConfig, lower, ulps};
use rfx_opt::{OptConfig, optimize};

fn program(text: &str) -> rfx_ir::lir::LirProgram {
    let kernel = rfx_ir::hir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

/// Elements per exported call.
const N: usize = 4096;

/// `op` over `dtype[N]` exported as `name` into `dir`.
fn export_unary(dir: &std::path::Path, op: &str, dtype: &str, name: &str) {
    let text = format!(
        "kernel {name} {{\n  %x = input x : {dtype}[{N}]\n  %y = {op} %x : {dtype}[{N}]\n  output out = %y\n}}\n"
    );
    let export = rfx_codegen_c::c_source(&program(&text), name).expect("export");
    std::fs::write(dir.join(format!("{name}.h")), export.header).expect("write");
    std::fs::write(dir.join(format!("{name}.c")), export.source).expect("write");
}

fn hex_words(line: &str) -> Vec<u32> {
    line.split_whitespace()
        .map(|w| u32::from_str_radix(w, 16).unwrap_or_else(|e| panic!("{w}: {e}")))
        .collect()
}

/// Every 4,099th float of [0, 4096] and its negative (about 540,000 points, every binade
/// and every quadrant), then the two arguments where the fast path's error peaks (2.31 and
/// 2.32 ULP, found by an exhaustive run over [-4096, 4096]): the exported f32 `sin` and `cos`
/// are within 4 ULP of the `f64` functions at each, with GCC and Clang. A call with one
/// argument beyond 4096 (which reruns the loop with the exact reduction) gives every other
/// element the bits of a call without it.
#[test]
fn f32_sin_and_cos_fast_paths_are_within_4_ulp_densely_and_independent_of_the_batch() {
    let compilers = common::compilers();
    if compilers.is_empty() {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    export_unary(dir.path(), "sin", "f32", "fs");
    export_unary(dir.path(), "cos", "f32", "fc");
    let driver = format!(
        r#"#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "fs.c"
#include "fc.c"
#define N {N}
static float x[N], y[N], z[N];
static uint32_t bits(float f) {{ uint32_t u; memcpy(&u, &f, 4); return u; }}
static float from(uint32_t u) {{ float f; memcpy(&f, &u, 4); return f; }}
int main(void) {{
  uint32_t u = 0, top = 0x45800000u;
  int k, i, fill, neg;
  int (*fns[2])(const float *, float *, void *) = {{ fs, fc }};
  for (k = 0; k < 2; ++k)
    for (neg = 0; neg < 2; ++neg)
      for (u = 0; u <= top;) {{
        for (fill = 0; fill < N && u <= top; ++fill, u += 4099u) x[fill] = from(u | ((uint32_t)neg << 31));
        for (i = fill; i < N; ++i) x[i] = 0.0f;
        if (fns[k](x, y, 0) != 0) return 1;
        printf("%d", k);
        for (i = 0; i < fill; ++i) printf(" %08x %08x", bits(x[i]), bits(y[i]));
        printf("\n");
      }}
  /* The peaks, then the batch test: the same arguments with and without 1e30 in element 7. */
  for (k = 0; k < 2; ++k) {{
    for (i = 0; i < N; ++i) x[i] = (float)(i - N / 2) * 1.999f;
    x[0] = 0x1.0dcac6p+11f; x[1] = -0x1.169cb8p+11f;
    if (fns[k](x, y, 0) != 0) return 1;
    x[7] = 1e30f;
    if (fns[k](x, z, 0) != 0) return 1;
    printf("batch %d", k);
    for (i = 0; i < N; ++i) if (i != 7 && bits(y[i]) != bits(z[i])) printf(" %d", i);
    printf("\n%d", k);
    x[7] = (float)(7 - N / 2) * 1.999f;
    for (i = 0; i < N; ++i) printf(" %08x %08x", bits(x[i]), bits(y[i]));
    printf("\n");
  }}
  return 0;
}}
"#
    );
    for cc in compilers {
        let out = common::compile_and_run(cc, &[], dir.path(), "fast_trig", &driver);
        let mut checked = [0usize; 2];
        let mut worst = [0u64; 2];
        let mut batches = 0;
        for line in out.lines() {
            if let Some(rest) = line.strip_prefix("batch ") {
                let differ: Vec<&str> = rest.split_whitespace().skip(1).collect();
                assert!(differ.is_empty(), "{cc}: {line}: elements {differ:?} changed");
                batches += 1;
                continue;
            }
            // `K x y x y ...`: K is 0 for sin, 1 for cos.
            let (op, words) = line.split_once(' ').unwrap_or((line, ""));
            let which = usize::from(op == "1");
            for pair in hex_words(words).chunks(2) {
                let x = f64::from(f32::from_bits(pair[0]));
                let got = f64::from(f32::from_bits(pair[1]));
                let want = if which == 0 { x.sin() } else { x.cos() };
                let d = ulps(got, want, DType::F32);
                assert!(
                    d <= 4,
                    "{cc}: op {which} at {x:e}: got {got:e}, f64 {want:e} ({d} ULP)"
                );
                worst[which] = worst[which].max(d);
                checked[which] += 1;
            }
        }
        assert_eq!(batches, 2, "{cc}: batch lines");
        assert!(checked.iter().all(|&c| c > 500_000), "{cc}: checked {checked:?}");
        eprintln!("{cc}: {checked:?} points, largest errors {worst:?} ULP");
    }
}
