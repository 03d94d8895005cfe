//! `set_row`: typing, the text format, DOT and both interpreter modes against the closed form
//! `out[j] = row if j == clamp(i, 0, n - 1) else x[j]`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a test failure")]

use rfx_ir::hir::{self, BuildError, Builder, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, DType, Scalar, Shape, TensorType, TypeError, dot};

/// `set_row(x, row, i)` for `x: dtype[shape]`.
fn kernel(dtype: DType, shape: &[usize]) -> Kernel {
    let mut b = Builder::new("set_row");
    let x = b.input("x", TensorType::new(dtype, shape.to_vec())).unwrap();
    let row = b
        .input("row", TensorType::new(dtype, shape[1..].to_vec()))
        .unwrap();
    let i = b.input("i", TensorType::scalar(DType::I32)).unwrap();
    let y = b.set_row(x, row, i).unwrap();
    b.output("y", y).unwrap();
    b.finish().unwrap()
}

/// The closed form, on row-major element lists.
fn expected(x: &[f64], row: &[f64], rows: usize, i: i32) -> Vec<f64> {
    let width = row.len();
    let target = i.clamp(0, rows as i32 - 1) as usize;
    let mut out = x.to_vec();
    out[target * width..(target + 1) * width].copy_from_slice(row);
    out
}

#[test]
fn set_row_replaces_the_clamped_row_in_both_modes() {
    let k = kernel(DType::F32, &[4, 2, 3]);
    let x: Vec<f32> = (0..24).map(|v| v as f32 * 0.5 - 3.0).collect();
    let row: Vec<f32> = (0..6).map(|v| 100.0 + v as f32).collect();
    let xa = Array::from_vec([4, 2, 3], x.clone()).unwrap();
    let ra = Array::from_vec([2, 3], row.clone()).unwrap();
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let r64: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
    for i in [-7, -1, 0, 1, 3, 4, 1000, i32::MIN, i32::MAX] {
        let ia = Array::scalar(Scalar::I32(i));
        for mode in [Mode::Native, Mode::Oracle] {
            let out = run_hir(&k, &[xa.view(), ra.view(), ia.view()], mode).unwrap();
            assert_eq!(out[0].shape(), &Shape::new([4, 2, 3]));
            assert_eq!(
                out[0].to_f64_vec(),
                expected(&x64, &r64, 4, i),
                "i = {i}, {mode:?}"
            );
        }
    }
}

#[test]
fn set_row_moves_bits_of_every_dtype() {
    // A vector of i32 rows of nothing but the scalar: shape [3].
    let k = kernel(DType::I32, &[3]);
    let xa = Array::from_vec([3], vec![1i32, 2, 3]).unwrap();
    let ra = Array::scalar(Scalar::I32(-9));
    let out = run_hir(
        &k,
        &[xa.view(), ra.view(), Array::scalar(Scalar::I32(2)).view()],
        Mode::Native,
    )
    .unwrap();
    assert_eq!(out[0].as_slice::<i32>().unwrap(), &[1, 2, -9]);
    // f64 NaN payloads and -0 go through unchanged.
    let k = kernel(DType::F64, &[2, 2]);
    let nan = f64::from_bits(0x7ff8_0000_0000_1234);
    let xa = Array::from_vec([2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap();
    let ra = Array::from_vec([2], vec![nan, -0.0f64]).unwrap();
    let out = run_hir(
        &k,
        &[xa.view(), ra.view(), Array::scalar(Scalar::I32(0)).view()],
        Mode::Native,
    )
    .unwrap();
    let bits: Vec<u64> = out[0]
        .as_slice::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(
        bits,
        vec![
            nan.to_bits(),
            (-0.0f64).to_bits(),
            3.0f64.to_bits(),
            4.0f64.to_bits()
        ]
    );
}

#[test]
fn set_row_prints_parses_and_draws() {
    let k = kernel(DType::F32, &[5, 2]);
    let text = k.to_string();
    assert!(text.contains("set_row %0, %1, %2 : f32[5,2]"), "{text}");
    let reparsed = hir::parse(&text).unwrap();
    assert_eq!(reparsed, k);
    assert_eq!(reparsed.to_string(), text);
    assert!(dot::hir_to_dot(&k).contains("set_row"));
}

#[test]
fn set_row_parse_errors_have_positions() {
    // A row of the wrong shape is a verifier error at the node's line.
    let text = "kernel k {\n  %0 = input x : f32[3,2]\n  %1 = input r : f32[3]\n  \
                %2 = input i : i32[]\n  %3 = set_row %0, %1, %2 : f32[3,2]\n  output y = %3\n}";
    let err = hir::parse(text).unwrap_err();
    assert_eq!(err.line, 5, "{err}");
    assert!(err.col >= 1, "{err}");
    assert!(err.to_string().contains("set_row"), "{err}");
}

/// The `TypeError` of a rejected `set_row`.
fn rejected(x: TensorType, row: TensorType, index: TensorType) -> TypeError {
    let mut b = Builder::new("k");
    let x = b.input("x", x).unwrap();
    let row = b.input("row", row).unwrap();
    let i = b.input("i", index).unwrap();
    match b.set_row(x, row, i) {
        Err(BuildError::Type { source, .. }) => source,
        other => panic!("expected a type error, got {other:?}"),
    }
}

#[test]
fn bad_set_rows_are_typed_errors() {
    let f32s = |d: &[usize]| TensorType::new(DType::F32, d.to_vec());
    let i32s = TensorType::scalar(DType::I32);
    let err = rejected(f32s(&[3, 2]), f32s(&[3]), i32s.clone());
    assert!(matches!(err, TypeError::SetRow { .. }), "{err:?}");
    let err = rejected(f32s(&[]), f32s(&[]), i32s.clone());
    assert!(matches!(err, TypeError::SetRow { .. }), "{err:?}");
    let err = rejected(f32s(&[0, 2]), f32s(&[2]), i32s.clone());
    assert!(matches!(err, TypeError::SetRow { .. }), "{err:?}");
    let err = rejected(f32s(&[3, 2]), f32s(&[2]), TensorType::new(DType::I32, [1]));
    assert!(matches!(err, TypeError::SetRow { .. }), "{err:?}");
    let err = rejected(f32s(&[3, 2]), f32s(&[2]), TensorType::scalar(DType::F32));
    assert!(
        matches!(
            err,
            TypeError::UnsupportedDType {
                op: "set_row",
                dtype: DType::F32
            }
        ),
        "{err:?}"
    );
    let err = rejected(f32s(&[3, 2]), TensorType::new(DType::F64, [2]), i32s);
    assert!(
        matches!(err, TypeError::DTypeMismatch { op: "set_row", .. }),
        "{err:?}"
    );
}
