//! The exported loops' fast and straight-line forms: f32 `sin` and `cos` through the float
//! reduction (within 4 ULP of `f64` on a dense grid of [-4096, 4096], and an element's bits
//! independent of the other elements of its call); `exp`, `exp2`, `floor`, `ceil`, `round`,
//! `log` and `tanh` bit for bit with their previous branching helpers; and the loops
//! vectorised by GCC, without a run-time overlap check.

mod common;

use common::program;

use rfx_ir::DType;
use rfx_lower::ulps;

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
/// are within 4 ULP of the `f64` functions at each, with GCC and Clang, with and without FMA. A call with one
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
    // On x86-64 also with FMA (x86-64-v3), where the fast path fuses its steps.
    let mut flag_sets: Vec<&[&str]> = vec![&[]];
    if cfg!(target_arch = "x86_64") {
        flag_sets.push(&["-march=x86-64-v3"]);
    }
    for (cc, extra) in compilers
        .iter()
        .flat_map(|&cc| flag_sets.iter().map(move |&extra| (cc, extra)))
    {
        let out = common::compile_and_run(cc, extra, dir.path(), "fast_trig", &driver);
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
        eprintln!("{cc} {extra:?}: {checked:?} points, largest errors {worst:?} ULP");
    }
}

/// The `exp` and `exp2` helpers as they were before their straight-line form took `k / 2` by a
/// shift and clamped NaN in the first select: the reference of the bit-for-bit test.
const REFERENCE_EXP: &str = r#"
static float rf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t rb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static double rdf(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }
static uint64_t rdb(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }
static float rsel(int c, float a, float b) { return c ? a : b; }
static double rseld(int c, double a, double b) { return c ? a : b; }
static float rpow2(int32_t n) { return rf((uint32_t)(n + 127) << 23); }
static float rldexp(float p, float n) {
  int32_t k = (int32_t)n;
  int32_t k1 = (k >= 0) ? k / 2 : -((1 - k) / 2);
  return (p * rpow2(k1)) * rpow2(k - k1);
}
static float rpoly(float r) {
  float p = 1.9875691500e-4f;
  p = 1.3981999507e-3f + p * r;
  p = 8.3334519073e-3f + p * r;
  p = 4.1665795894e-2f + p * r;
  p = 1.6666665459e-1f + p * r;
  p = 5.0000001201e-1f + p * r;
  return (r + (r * r) * p) + 1.0f;
}
static float rexp(float x) {
  float xc = rsel(x != x, 0.0f, x), n, r;
  xc = rsel(xc > 89.0f, 89.0f, xc);
  xc = rsel(xc < -104.0f, -104.0f, xc);
  n = (xc * 1.44269502f + 12582912.0f) - 12582912.0f;
  r = (xc - n * 0.693359375f) - n * (-2.12194442e-4f);
  return rsel(x != x, x + x, rldexp(rpoly(r), n));
}
static float rexp2(float x) {
  float xc = rsel(x != x, 0.0f, x), n, r;
  xc = rsel(xc > 129.0f, 129.0f, xc);
  xc = rsel(xc < -152.0f, -152.0f, xc);
  n = (xc + 12582912.0f) - 12582912.0f;
  r = xc - n;
  return rsel(x != x, x + x, rldexp(rpoly(r * 0.693147182f), n));
}
static double rpow2d(int32_t n) { return rdf((uint64_t)(n + 1023) << 52); }
static double rldexpd(double p, double n) {
  int32_t k = (int32_t)n;
  int32_t k1 = (k >= 0) ? k / 2 : -((1 - k) / 2);
  return (p * rpow2d(k1)) * rpow2d(k - k1);
}
static double rpolyd(double r) {
  static const double c[12] = {
    0.5, 0.16666666666666666, 0.041666666666666664, 0.008333333333333333,
    0.001388888888888889, 0.0001984126984126984, 2.48015873015873e-5, 2.7557319223985893e-6,
    2.755731922398589e-7, 2.505210838544172e-8, 2.08767569878681e-9, 1.6059043836821613e-10 };
  double p = c[11];
  int i;
  for (i = 10; i >= 0; --i) p = c[i] + p * r;
  return (r + (r * r) * p) + 1.0;
}
static double rexpd(double x) {
  double xc = rseld(x != x, 0.0, x), n, r;
  xc = rseld(xc > 710.0, 710.0, xc);
  xc = rseld(xc < -746.0, -746.0, xc);
  n = (xc * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
  r = (xc - n * 0.6931471803691238) - n * 1.9082149292705877e-10;
  return rseld(x != x, x + x, rldexpd(rpolyd(r), n));
}
static double rexp2d(double x) {
  double xc = rseld(x != x, 0.0, x), n, r;
  xc = rseld(xc > 1025.0, 1025.0, xc);
  xc = rseld(xc < -1080.0, -1080.0, xc);
  n = (xc + 6755399441055744.0) - 6755399441055744.0;
  r = xc - n;
  return rseld(x != x, x + x, rldexpd(rpolyd(r * 0.6931471805599453), n));
}
"#;

/// The exported `exp` and `exp2` compute their previous helpers' bits: in f32 at every 251st
/// bit pattern (about 17 million, every exponent, both signs, NaNs and infinities), in f64 at
/// a million scattered bit patterns and a million points spread over [-1100, 1100]. (Every
/// f32 input was also compared once, outside the test suite: no difference.)
#[test]
fn exp_and_exp2_keep_their_bits() {
    let compilers = common::compilers();
    if compilers.is_empty() {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for (op, dtype, name) in [
        ("exp", "f32", "e32"),
        ("exp2", "f32", "t32"),
        ("exp", "f64", "e64"),
        ("exp2", "f64", "t64"),
    ] {
        export_unary(dir.path(), op, dtype, name);
    }
    let driver = format!(
        r#"#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "e32.c"
#include "t32.c"
#include "e64.c"
#include "t64.c"
#define N {N}
{REFERENCE_EXP}
static float x[N], y[N];
static double xd[N], yd[N];
int main(void) {{
  uint64_t u = 0, checked = 0, differ = 0, i, j;
  for (u = 0; u <= 0xffffffffu;) {{
    for (i = 0; i < N; ++i, u += 251u) x[i] = rf((uint32_t)u);
    if (e32(x, y, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rb(y[i]) != rb(rexp(x[i]));
    if (t32(x, y, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rb(y[i]) != rb(rexp2(x[i]));
    checked += 2 * N;
  }}
  for (j = 0; j < 512; ++j) {{
    for (i = 0; i < N; ++i) {{
      uint64_t k = j * N + i;
      xd[i] = (j & 1) ? rdf(k * UINT64_C(0x9e3779b97f4a7c15)) : -1100.0 + (double)k * (2200.0 / 1048576.0);
    }}
    if (e64(xd, yd, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rdb(yd[i]) != rdb(rexpd(xd[i]));
    if (t64(xd, yd, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rdb(yd[i]) != rdb(rexp2d(xd[i]));
    checked += 2 * N;
  }}
  printf("%llu %llu\n", (unsigned long long)checked, (unsigned long long)differ);
  return 0;
}}
"#
    );
    for cc in compilers {
        let out = common::compile_and_run(cc, &[], dir.path(), "exp_bits", &driver);
        let counts: Vec<u64> = out
            .split_whitespace()
            .map(|w| w.parse().expect("a count"))
            .collect();
        assert_eq!(counts.len(), 2, "{cc}: {out}");
        assert!(counts[0] > 36_000_000, "{cc}: checked {}", counts[0]);
        assert_eq!(counts[1], 0, "{cc}: {} results differ", counts[1]);
    }
}

/// Elementwise loops of `floor`, `ceil`, `round`, `log` and `tanh` vectorise for AVX2 in f32
/// and f64 (their helpers are straight-line code).
#[test]
fn gcc_vectorises_rounding_log_and_tanh_loops() {
    if !cfg!(target_arch = "x86_64") || !common::compilers().contains(&"gcc") {
        eprintln!("skipped: needs gcc on x86-64");
        return;
    }
    for dtype in ["f32", "f64"] {
        for op in ["floor", "ceil", "round", "log", "tanh"] {
            let text = format!(
                "kernel {op} {{\n  %x = input x : {dtype}[1024]\n  %y = {op} %x : {dtype}[1024]\n  output out = %y\n}}\n"
            );
            let name = format!("{op}_{dtype}");
            let export = rfx_codegen_c::c_source(&program(&text), &name).expect("export");
            let report = common::gcc_vectorizer_report(&export, &name);
            assert!(report.contains("loop vectorized"), "{name}:\n{report}");
        }
    }
}

/// The export benchmark's 10-op chain `((x*1.5+y)*0.5-sin(x))*cos(y)+exp(-x*x)` at 65,536
/// f32: GCC vectorises its first loop for AVX2 without a run-time check that the arrays do not
/// overlap (the definition's pointers are `restrict`), and its exact rerun is behind
/// `if (any_slow != 0)`.
#[test]
fn gcc_vectorises_the_chains_fast_loop_without_an_overlap_check() {
    if !cfg!(target_arch = "x86_64") || !common::compilers().contains(&"gcc") {
        eprintln!("skipped: needs gcc on x86-64");
        return;
    }
    let n = 65536;
    let text = format!(
        "kernel chain {{\n  %x = input x : f32[{n}]\n  %y = input y : f32[{n}]\n  \
         %a = const 1.5 : f32[]\n  %h = const 0.5 : f32[]\n  %xa = mul %x, %a : f32[{n}]\n  \
         %s1 = add %xa, %y : f32[{n}]\n  %s2 = mul %s1, %h : f32[{n}]\n  %sx = sin %x : f32[{n}]\n  \
         %s3 = sub %s2, %sx : f32[{n}]\n  %cy = cos %y : f32[{n}]\n  %s4 = mul %s3, %cy : f32[{n}]\n  \
         %nx = neg %x : f32[{n}]\n  %xx = mul %nx, %x : f32[{n}]\n  %e = exp %xx : f32[{n}]\n  \
         %r = add %s4, %e : f32[{n}]\n  output out = %r\n}}\n"
    );
    let export = rfx_codegen_c::c_source(&program(&text), "chain").expect("export");
    assert!(
        export.source.contains("if (any_slow != 0) {"),
        "{}",
        export.source
    );
    assert!(export.source.contains("chain_sin_fast_f32(") && export.source.contains("chain_cos_full_f32("));
    let report = common::gcc_vectorizer_report(&export, "chain");
    let first_loop = export
        .source
        .lines()
        .position(|l| l.contains("for (i0 = 0;"))
        .map(|i| i + 1)
        .expect("a loop");
    assert!(
        report.contains(&format!("chain.c:{first_loop}:")) && report.contains("loop vectorized"),
        "line {first_loop}:\n{report}"
    );
    assert!(!report.contains("versioned"), "{report}");
}

/// `floor`, `ceil` and `round` as they were before their straight-line form: the reference of
/// the bit-for-bit test.
const REFERENCE_ROUNDING: &str = r#"
static float rf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t rb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static double rdf(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }
static uint64_t rdb(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }
static float rabs(float x) { return rf(rb(x) & 0x7fffffffu); }
static double rabsd(double x) { return rdf(rdb(x) & UINT64_C(0x7fffffffffffffff)); }
static float rfloor(float x) {
  float t;
  if (!(rabs(x) < 8388608.0f) || x == 0.0f) return x;
  t = (float)(int32_t)x;
  return t > x ? t - 1.0f : t;
}
static float rceil(float x) {
  float t;
  if (!(rabs(x) < 8388608.0f) || x == 0.0f) return x;
  t = (float)(int32_t)x;
  if (t < x) t = t + 1.0f;
  return (t == 0.0f && x < 0.0f) ? rf(0x80000000u) : t;
}
static float rround(float x) {
  int32_t i;
  float d, t;
  if (!(rabs(x) < 8388608.0f) || x == 0.0f) return x;
  i = (int32_t)x;
  d = x - (float)i;
  if (d > 0.5f || (d == 0.5f && (i & 1))) i = i + 1;
  else if (d < -0.5f || (d == -0.5f && (i & 1))) i = i - 1;
  t = (float)i;
  return (t == 0.0f && x < 0.0f) ? rf(0x80000000u) : t;
}
static double rfloord(double x) {
  double t;
  if (!(rabsd(x) < 4503599627370496.0) || x == 0.0) return x;
  t = (double)(int64_t)x;
  return t > x ? t - 1.0 : t;
}
static double rceild(double x) {
  double t;
  if (!(rabsd(x) < 4503599627370496.0) || x == 0.0) return x;
  t = (double)(int64_t)x;
  if (t < x) t = t + 1.0;
  return (t == 0.0 && x < 0.0) ? rdf(UINT64_C(0x8000000000000000)) : t;
}
static double rroundd(double x) {
  int64_t i;
  double d, t;
  if (!(rabsd(x) < 4503599627370496.0) || x == 0.0) return x;
  i = (int64_t)x;
  d = x - (double)i;
  if (d > 0.5 || (d == 0.5 && (i & 1))) i = i + 1;
  else if (d < -0.5 || (d == -0.5 && (i & 1))) i = i - 1;
  t = (double)i;
  return (t == 0.0 && x < 0.0) ? rdf(UINT64_C(0x8000000000000000)) : t;
}
"#;

/// The exported `floor`, `ceil` and `round` compute their previous (branching) helpers' bits:
/// in f32 at every 251st bit pattern (about 17 million: every exponent, both signs, halves,
/// NaNs and infinities), in f64 at half a million scattered bit patterns and half a million
/// quarter-integers and nudged halves around 0. (Every f32 input was also compared once,
/// outside the test suite: no difference.)
#[test]
fn floor_ceil_and_round_keep_their_bits() {
    let compilers = common::compilers();
    if compilers.is_empty() {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let ops = ["floor", "ceil", "round"];
    for op in ops {
        export_unary(dir.path(), op, "f32", &format!("{op}32"));
        export_unary(dir.path(), op, "f64", &format!("{op}64"));
    }
    let includes: String = ops
        .iter()
        .map(|op| format!("#include \"{op}32.c\"\n#include \"{op}64.c\"\n"))
        .collect();
    let driver = format!(
        r#"#include <stdint.h>
#include <stdio.h>
#include <string.h>
{includes}#define N {N}
{REFERENCE_ROUNDING}
static float x[N], y[N];
static double xd[N], yd[N];
typedef int (*f32_fn)(const float *, float *, void *);
typedef int (*f64_fn)(const double *, double *, void *);
int main(void) {{
  f32_fn f32s[3] = {{ floor32, ceil32, round32 }};
  float (*r32s[3])(float) = {{ rfloor, rceil, rround }};
  f64_fn f64s[3] = {{ floor64, ceil64, round64 }};
  double (*r64s[3])(double) = {{ rfloord, rceild, rroundd }};
  uint64_t u, checked = 0, differ = 0, i, j;
  int k;
  for (u = 0; u <= 0xffffffffu;) {{
    for (i = 0; i < N; ++i, u += 251u) x[i] = rf((uint32_t)u);
    for (k = 0; k < 3; ++k) {{
      if (f32s[k](x, y, 0) != 0) return 1;
      for (i = 0; i < N; ++i) differ += rb(y[i]) != rb(r32s[k](x[i]));
      checked += N;
    }}
  }}
  for (j = 0; j < 256; ++j) {{
    for (i = 0; i < N; ++i) {{
      uint64_t n = j * N + i;
      xd[i] = (j & 1) ? rdf(n * UINT64_C(0x9e3779b97f4a7c15))
                      : rdf(rdb((double)((int64_t)n - 524288) * 0.25) + (n % 3) - 1);
    }}
    for (k = 0; k < 3; ++k) {{
      if (f64s[k](xd, yd, 0) != 0) return 1;
      for (i = 0; i < N; ++i) differ += rdb(yd[i]) != rdb(r64s[k](xd[i]));
      checked += N;
    }}
  }}
  printf("%llu %llu\n", (unsigned long long)checked, (unsigned long long)differ);
  return 0;
}}
"#
    );
    for cc in compilers {
        let out = common::compile_and_run(cc, &[], dir.path(), "rounding_bits", &driver);
        let counts: Vec<u64> = out
            .split_whitespace()
            .map(|w| w.parse().expect("a count"))
            .collect();
        assert_eq!(counts.len(), 2, "{cc}: {out}");
        assert!(counts[0] > 50_000_000, "{cc}: checked {}", counts[0]);
        assert_eq!(counts[1], 0, "{cc}: {} results differ", counts[1]);
    }
}

/// `log` and `tanh` as they were before their straight-line form (with early returns), calling
/// the export's own `exp` helpers (unchanged): the reference of the bit-for-bit test.
const REFERENCE_LOG_TANH: &str = r#"
static float rf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t rb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static double rdf(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }
static uint64_t rdb(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }
static float rlog(float x) {
  float xs = x, kadj = 0.0f, k, f, hfsq, s, z, p;
  uint32_t ix;
  if (x != x) return x;
  if (x == 0.0f) return rf(0xff800000u);
  if (x < 0.0f) return (x - x) / (x - x);
  if (x > 3.40282347e38f) return x;
  if (x < 1.17549435e-38f) { xs = x * 33554432.0f; kadj = -25.0f; }
  ix = rb(xs) + (0x3f800000u - 0x3f3504f3u);
  k = (float)((int32_t)(ix >> 23) - 127) + kadj;
  f = rf((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  hfsq = (f * f) * 0.5f;
  s = f / (f + 2.0f);
  z = s * s;
  p = 0.24279078841209412f;
  p = 0.2849878668785095f + p * z;
  p = 0.40000972151756287f + p * z;
  p = 0.6666666269302368f + p * z;
  return k * 0.6931381225585938f - ((hfsq - (s * (hfsq + z * p) + k * 9.05800061445916e-06f)) - f);
}
static float rtanh(float x) {
  float ax = rf(rb(x) & 0x7fffffffu), z, p, e, big;
  if (x == 0.0f) return x;
  if (ax < 0.625f) {
    z = x * x;
    p = -0.0057049887f;
    p = 0.020639088f + p * z;
    p = -0.053739715f + p * z;
    p = 0.13331442f + p * z;
    p = -0.3333328f + p * z;
    return x + x * (z * p);
  }
  e = tanh32_exp_f32(ax + ax);
  big = 1.0f - 2.0f / (e + 1.0f);
  return x < 0.0f ? -big : big;
}
static double rlogd(double x) {
  double xs = x, kadj = 0.0, k, f, hfsq, s, z, p;
  uint64_t ix;
  if (x != x) return x;
  if (x == 0.0) return rdf(UINT64_C(0xfff0000000000000));
  if (x < 0.0) return (x - x) / (x - x);
  if (x > 1.7976931348623157e308) return x;
  if (x < 2.2250738585072014e-308) { xs = x * 18014398509481984.0; kadj = -54.0; }
  ix = rdb(xs) + ((UINT64_C(0x3ff00000) - UINT64_C(0x3fe6a09e)) << 32);
  k = (double)((int32_t)(ix >> 52) - 1023) + kadj;
  f = rdf((ix & UINT64_C(0x000fffffffffffff)) + (UINT64_C(0x3fe6a09e) << 32)) - 1.0;
  hfsq = (f * f) * 0.5;
  s = f / (f + 2.0);
  z = s * s;
  p = 1.479819860511658591e-01;
  p = 1.531383769920937332e-01 + p * z;
  p = 1.818357216161805012e-01 + p * z;
  p = 2.222219843214978396e-01 + p * z;
  p = 2.857142874366239149e-01 + p * z;
  p = 3.999999999940941908e-01 + p * z;
  p = 6.666666666666735130e-01 + p * z;
  return k * 6.931471803691238165e-01 - ((hfsq - (s * (hfsq + z * p) + k * 1.908214929270587700e-10)) - f);
}
static double rtanhd(double x) {
  double ax = rdf(rdb(x) & UINT64_C(0x7fffffffffffffff)), z, p, q, e, big;
  if (x == 0.0) return x;
  if (ax < 0.625) {
    z = x * x;
    p = -9.64399179425052238628e-1;
    p = -9.92877231001918586564e1 + p * z;
    p = -1.61468768441708447952e3 + p * z;
    q = 1.0;
    q = 1.12811678491632931402e2 + q * z;
    q = 2.23548839060100583483e3 + q * z;
    q = 4.84406305325125486048e3 + q * z;
    return x + x * ((z * p) / q);
  }
  e = tanh64_exp_f64(ax + ax);
  big = 1.0 - 2.0 / (e + 1.0);
  return x < 0.0 ? -big : big;
}
"#;

/// The exported `log` and `tanh` compute their previous (branching) helpers' bits, NaNs
/// included: in f32 at every 251st bit pattern, in f64 at half a million scattered bit patterns
/// and half a million points of [-256, 256]. (Every f32 input was also compared once, outside
/// the test suite: no difference.)
#[test]
fn log_and_tanh_keep_their_bits() {
    let compilers = common::compilers();
    if compilers.is_empty() {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for op in ["log", "tanh"] {
        export_unary(dir.path(), op, "f32", &format!("{op}32"));
        export_unary(dir.path(), op, "f64", &format!("{op}64"));
    }
    let driver = format!(
        r#"#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "log32.c"
#include "log64.c"
#include "tanh32.c"
#include "tanh64.c"
#define N {N}
{REFERENCE_LOG_TANH}
static float x[N], y[N];
static double xd[N], yd[N];
int main(void) {{
  uint64_t u, checked = 0, differ = 0, i, j;
  for (u = 0; u <= 0xffffffffu;) {{
    for (i = 0; i < N; ++i, u += 251u) x[i] = rf((uint32_t)u);
    if (log32(x, y, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rb(y[i]) != rb(rlog(x[i]));
    if (tanh32(x, y, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rb(y[i]) != rb(rtanh(x[i]));
    checked += 2 * N;
  }}
  for (j = 0; j < 256; ++j) {{
    for (i = 0; i < N; ++i) {{
      uint64_t n = j * N + i;
      xd[i] = (j & 1) ? rdf(n * UINT64_C(0x9e3779b97f4a7c15)) : ((double)n - 524288.0) / 2048.0;
    }}
    if (log64(xd, yd, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rdb(yd[i]) != rdb(rlogd(xd[i]));
    if (tanh64(xd, yd, 0) != 0) return 1;
    for (i = 0; i < N; ++i) differ += rdb(yd[i]) != rdb(rtanhd(xd[i]));
    checked += 2 * N;
  }}
  printf("%llu %llu\n", (unsigned long long)checked, (unsigned long long)differ);
  return 0;
}}
"#
    );
    for cc in compilers {
        let out = common::compile_and_run(cc, &[], dir.path(), "log_tanh_bits", &driver);
        let counts: Vec<u64> = out
            .split_whitespace()
            .map(|w| w.parse().expect("a count"))
            .collect();
        assert_eq!(counts.len(), 2, "{cc}: {out}");
        assert!(counts[0] > 35_000_000, "{cc}: checked {}", counts[0]);
        assert_eq!(counts[1], 0, "{cc}: {} results differ", counts[1]);
    }
}

/// Two-pass loops over two dimensions, with and without an argument that needs the exact
/// reduction (and with ±Inf and NaN), and a scalar program (its code runs once, with the
/// branch to the exact helper): every result within 4 ULP of the interpreter's `f64` oracle,
/// special values as C99 gives them.
#[test]
fn two_pass_loops_and_scalar_code_match_the_oracle() {
    let mut jobs = Vec::new();
    let grid: Vec<f32> = (0..15).map(|i| (i as f32 - 7.0) * 0.9).collect();
    let mut wide = grid.clone();
    wide[4] = 1.0e30;
    wide[9] = 5000.5;
    let mut special = grid.clone();
    special[2] = f32::INFINITY;
    special[3] = f32::NEG_INFINITY;
    special[11] = f32::NAN;
    special[12] = -0.0;
    for op in ["sin", "cos"] {
        for (what, values) in [("grid", &grid), ("wide", &wide), ("special", &special)] {
            let text = format!(
                "kernel k {{\n  %x = input x : f32[3, 5]\n  %y = {op} %x : f32[3, 5]\n  output out = %y\n}}\n"
            );
            let data = rfx_ir::ArrayData::F32(values.clone());
            jobs.push(common::Job {
                name: format!("{op} {what}"),
                program: program(&text),
                inputs: vec![rfx_ir::Array::new(rfx_ir::Shape::new([3, 5]), data).expect("array")],
                ulp_bound: Some(4),
            });
        }
        for x in [0.5f32, -3000.0, 1.0e9, f32::NAN] {
            let text = format!(
                "kernel k {{\n  %x = input x : f32[]\n  %y = {op} %x : f32[]\n  output out = %y\n}}\n"
            );
            let data = rfx_ir::ArrayData::F32(vec![x]);
            jobs.push(common::Job {
                name: format!("{op} scalar {x}"),
                program: program(&text),
                inputs: vec![rfx_ir::Array::new(rfx_ir::Shape::new([]), data).expect("array")],
                ulp_bound: Some(4),
            });
        }
    }
    let scalar = rfx_codegen_c::c_source(&jobs[3].program, "s").expect("export");
    assert!(scalar.source.contains("s_sin_full_f32("), "{}", scalar.source);
    let two_pass = rfx_codegen_c::c_source(&jobs[1].program, "w").expect("export");
    assert!(
        two_pass.source.contains("if (any_slow != 0) {"),
        "{}",
        two_pass.source
    );
    common::check_with_every_compiler(&jobs, &[&[], &["-O3"]]);
}
