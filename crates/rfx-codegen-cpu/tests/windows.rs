//! Windowed loads (`load ... offset`) and clamping gathers on the CPU backend, from LIR text:
//! vector bodies, scalar tails and the preamble, in every dtype, with indices far outside the
//! buffer on both sides (`i32::MIN`, `i32::MAX`). Hand-computed expectations, and the LIR
//! interpreter on the same program.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir;
use rfx_ir::{Array, ArrayData, ArrayView, DType, Scalar};
use rfx_lower::Backend;

/// `gathered[i] = x[clamp(idx[i], 0, 4)]` over 9 points (two vectors and a tail);
/// `window[i] = x[2 + i]` over 3 points; `fixed = x[clamp(7)]` read in the preamble and
/// broadcast over 9 points.
fn program(dtype: &str) -> String {
    format!(
        "\
lir windows arena 0 align 64 {{
  buf0: {dtype}[5] = input x
  buf1: i32[9] = input idx
  buf2: {dtype}[9] = output gathered
  buf3: {dtype}[3] = output window
  buf4: {dtype}[9] = output fixed
  kernel k0 dims [9] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {{
    slots [i32, {dtype}, i32, {dtype}]
    preamble {{
      s2 = const 7
      s3 = gather buf0 s2
    }}
    body {{
      s0 = load buf1 [1]
      s1 = gather buf0 s0
      store buf2 [1] = s1
      store buf4 [1] = s3
    }}
  }}
  kernel k1 dims [3] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {{
    slots [{dtype}]
    preamble {{
    }}
    body {{
      s0 = load buf0 [1] offset 2
      store buf3 [1] = s0
    }}
  }}
}}
"
    )
}

const INDICES: [i32; 9] = [-5, 0, 1, 4, 5, 100, i32::MIN, i32::MAX, 2];

/// Parses, verifies, compiles and runs the LIR `text` on `inputs`, and checks that output `k`
/// of the CPU backend and of the LIR interpreter both hold the bits of `want[k]`.
fn check(what: &str, text: &str, inputs: &[ArrayView<'_>], want: &[Vec<Scalar>]) {
    let program = lir::parse(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    lir::verify(&program).unwrap_or_else(|e| panic!("{what}: {e}"));
    let compiled = CpuBackend
        .compile(&program, &Default::default())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let outputs = compiled
        .run_to_new(inputs)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let reference = run_lir(&program, inputs, Mode::Native).expect("interpreter");
    let bits = |v: &[Scalar]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
    for (k, want) in want.iter().enumerate() {
        let got: Vec<Scalar> = (0..want.len()).filter_map(|i| outputs[k].get(i)).collect();
        let interp: Vec<Scalar> = (0..want.len()).filter_map(|i| reference[k].get(i)).collect();
        assert_eq!(bits(&got), bits(want), "{what}, output {k}: {got:?}");
        assert_eq!(
            bits(&interp),
            bits(want),
            "{what}, output {k} (interpreter): {interp:?}"
        );
    }
}

#[test]
fn gathers_clamp_and_windows_start_at_their_offset_in_every_dtype() {
    for dtype in DType::ALL {
        let values: Vec<Scalar> = [1.5, -2.25, 3.0, -0.0, 7.75]
            .iter()
            .enumerate()
            .map(|(i, &v)| match dtype {
                DType::Bool => Scalar::Bool(i % 2 == 1),
                DType::I32 => Scalar::I32(10 * i as i32 - 17),
                _ => Scalar::from_f64(dtype, v),
            })
            .collect();
        let x = Array::new([5], ArrayData::from_scalars(dtype, values.clone()).expect("x")).expect("x");
        let idx = Array::new(
            [9],
            ArrayData::from_scalars(DType::I32, INDICES.iter().map(|&i| Scalar::I32(i))).expect("idx"),
        )
        .expect("idx");
        let clamp = |i: i32| values[i.clamp(0, 4) as usize];
        let gathered: Vec<Scalar> = INDICES.iter().map(|&i| clamp(i)).collect();
        let window: Vec<Scalar> = values[2..5].to_vec();
        let fixed = vec![values[4]; 9];
        check(
            &dtype.to_string(),
            &program(&dtype.to_string()),
            &[x.view(), idx.view()],
            &[gathered, window, fixed],
        );
    }
}

/// `x[clamp(i + c)]`, `x[clamp(i - c)]` and `x[clamp(c)]` over 23 points (an unrolled pass of
/// four vectors, single vectors and a scalar tail), the index `i + c` wrapping as `i32` does:
/// the gathers a pad's window compiles to, whose consecutive lanes read one vector inside the
/// buffer, one element when they all lie on one side of it, and lane by lane across an end or
/// a wrap.
fn stepped_program(dtype: &str, c: i32) -> String {
    format!(
        "\
lir stepped arena 0 align 64 {{
  buf0: {dtype}[9] = input x
  buf1: {dtype}[23] = output plus
  buf2: {dtype}[23] = output minus
  buf3: {dtype}[23] = output fixed
  kernel k0 dims [23] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {{
    slots [i32, i32, i32, {dtype}, i32, {dtype}, i32, i32, {dtype}]
    preamble {{
      s1 = const {c}
    }}
    body {{
      s0 = index [1]
      s2 = add s0, s1
      s3 = gather buf0 s2
      store buf1 [1] = s3
      s4 = sub s0, s1
      s5 = gather buf0 s4
      store buf2 [1] = s5
      s6 = index [0]
      s7 = add s6, s1
      s8 = gather buf0 s7
      store buf3 [1] = s8
    }}
  }}
}}
"
    )
}

/// Nine distinct values of `dtype` (no two equal for numbers), and the array holding them.
fn nine_values(dtype: DType) -> (Vec<Scalar>, Array) {
    let values: Vec<Scalar> = (0..9)
        .map(|i| match dtype {
            DType::Bool => Scalar::Bool(i % 3 == 1),
            DType::I32 => Scalar::I32(7 * i - 20),
            _ => Scalar::from_f64(dtype, 1.25 * f64::from(i) - 4.5),
        })
        .collect();
    let x = Array::new([9], ArrayData::from_scalars(dtype, values.clone()).expect("x")).expect("x");
    (values, x)
}

#[test]
fn gathers_by_stepping_indices_read_vectors_inside_and_clamp_outside_in_every_dtype() {
    let offsets = [
        -40,
        -23,
        -22,
        -20,
        -9,
        -3,
        -1,
        0,
        1,
        3,
        6,
        9,
        14,
        30,
        i32::MAX - 5,
        i32::MAX - 22,
        i32::MAX,
        i32::MIN,
        i32::MIN + 3,
    ];
    for dtype in DType::ALL {
        let (values, x) = nine_values(dtype);
        for c in offsets {
            let at = |i: i32| values[i.clamp(0, 8) as usize];
            let points = 0..23i32;
            let plus: Vec<Scalar> = points.clone().map(|i| at(i.wrapping_add(c))).collect();
            let minus: Vec<Scalar> = points.clone().map(|i| at(i.wrapping_sub(c))).collect();
            let fixed: Vec<Scalar> = points.map(|_| at(c)).collect();
            check(
                &format!("{dtype}, c = {c}"),
                &stepped_program(&dtype.to_string(), c),
                &[x.view()],
                &[plus, minus, fixed],
            );
        }
    }
}

/// `x[clamp(trunc(i + c))]` and `x[clamp(trunc(2i + c))]` over 23 points with an `f64` index
/// (NaN reads element 0): what an `f64` pad's gathers compile to, so that an `f64` kernel needs
/// no `i32` lanes. Two lanes read one vector only when they are consecutive and inside.
fn f64_index_program(dtype: &str, c: f64) -> String {
    let c = rfx_ir::Scalar::F64(c);
    format!(
        "\
lir f64_index arena 0 align 64 {{
  buf0: {dtype}[9] = input x
  buf1: {dtype}[23] = output out
  buf2: {dtype}[23] = output doubled
  kernel k0 dims [23] reduce 0 vector 2 thread_min 16384 tile 1024 lanes 1 {{
    slots [f64, f64, f64, {dtype}, f64, {dtype}]
    preamble {{
      s1 = const {c}
    }}
    body {{
      s0 = index [1]
      s2 = add s0, s1
      s3 = gather buf0 s2
      store buf1 [1] = s3
      s4 = add s2, s0
      s5 = gather buf0 s4
      store buf2 [1] = s5
    }}
  }}
}}
"
    )
}

#[test]
fn gathers_by_f64_indices_truncate_and_clamp_in_every_dtype() {
    let offsets = [
        -40.0,
        -3.5,
        -0.5,
        0.0,
        0.7,
        3.25,
        8.9,
        30.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
        -1e300,
        9_007_199_254_740_992.0,
    ];
    for dtype in DType::ALL {
        let (values, x) = nine_values(dtype);
        for c in offsets {
            // Truncated toward zero, then clamped; NaN reads element 0.
            let at = |v: f64| {
                if v.is_nan() {
                    values[0]
                } else {
                    values[v.trunc().clamp(0.0, 8.0) as usize]
                }
            };
            let want: Vec<Scalar> = (0..23).map(|i| at(f64::from(i) + c)).collect();
            let doubled: Vec<Scalar> = (0..23).map(|i| at(f64::from(i) + c + f64::from(i))).collect();
            check(
                &format!("{dtype}, c = {c}"),
                &f64_index_program(&dtype.to_string(), c),
                &[x.view()],
                &[want, doubled],
            );
        }
    }
}
