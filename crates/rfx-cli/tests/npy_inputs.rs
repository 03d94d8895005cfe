//! `.npy` inputs as NumPy writes them by default: `int64` (converted to `int32` after a range
//! check), Fortran order (transposed on reading), and `.npz` archives (stored and compressed).
//! The files under `tests/data` were written by NumPy (see its README).

use crate::common;
use common::{data_file, read_npy, rfx, stderr_of, temp_dir};

/// `rfx eval EXPR --in …` writing to a fresh directory: the `out` array's shape and values
/// as `T`, or the stderr of a failure.
fn eval_out<T: npyz::Deserialize>(
    tag: &str,
    expr: &str,
    inputs: &[String],
) -> Result<(Vec<u64>, Vec<T>), String> {
    let dir = temp_dir(tag);
    let o = dir.join("o");
    let mut args = vec!["eval".to_string(), expr.to_string()];
    for input in inputs {
        args.extend(["--in".to_string(), input.clone()]);
    }
    args.extend(["--out".to_string(), o.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = rfx(&refs);
    let result = if out.status.success() {
        Ok(read_npy::<T>(&o.join("out.npy")))
    } else {
        assert_eq!(
            out.status.code(),
            Some(1),
            "a bad input is a user error: {}",
            stderr_of(&out)
        );
        Err(stderr_of(&out))
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn input(name: &str, file: &str) -> String {
    format!("{name}={}", data_file(file).display())
}

#[test]
fn int64_from_np_arange_is_read_as_int32() {
    let (shape, values) =
        eval_out::<i32>("npy-int64", "x * 3", &[input("x", "arange_int64.npy")]).expect("eval");
    assert_eq!(shape, [6]);
    assert_eq!(values, [0, 3, 6, 9, 12, 15]);
    let (_, values) = eval_out::<i32>("npy-uint8", "x + 1", &[input("x", "uint8.npy")]).expect("eval");
    assert_eq!(values, [1, 201, 256], "uint8 widens to int32 (no wrap at 255)");
}

#[test]
fn integers_outside_int32_and_uint64_are_clear_errors() {
    let err =
        eval_out::<i32>("npy-big", "x", &[input("x", "big_int64.npy")]).expect_err("2**31 does not fit");
    assert!(err.contains("big_int64.npy"), "{err}");
    assert!(
        err.contains("integer values from -5 to 2147483648") && err.contains("do not fit int32"),
        "{err}"
    );
    let err = eval_out::<i32>("npy-u64", "x", &[input("x", "uint64.npy")]).expect_err("uint64");
    assert!(err.contains("dtype `<u8` is not supported"), "{err}");
}

#[test]
fn fortran_order_arrays_are_transposed_into_c_order() {
    // np.asfortranarray(np.arange(6).reshape(2, 3)) holds 0 3 1 4 2 5 in the file; rfx sees
    // the same 2x3 array as NumPy: row 0 is 0 1 2.
    let (shape, values) =
        eval_out::<f32>("npy-fortran", "x + 0.5", &[input("x", "fortran_f32.npy")]).expect("eval");
    assert_eq!(shape, [2, 3]);
    assert_eq!(values, [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
    // A reduction over an axis tells the layout apart: np.arange(24).reshape(2, 3, 4).sum(axis=2).
    let (shape, values) =
        eval_out::<i32>("npy-fortran3", "sum(x, 2)", &[input("x", "fortran_3d_int64.npy")]).expect("eval");
    assert_eq!(shape, [2, 3]);
    assert_eq!(values, [6, 22, 38, 54, 70, 86]);
}

#[test]
fn npz_archives_give_the_array_named_by_the_input_or_after_the_colon() {
    // np.savez("pair.npz", x=float32 [1.5, -2, 0.25], y=np.arange(3)): x by the input's name.
    let both = [input("x", "pair.npz"), input("y", "pair.npz")];
    let (_, values) = eval_out::<f32>("npz-names", "x * cast(y, f32)", &both).expect("eval");
    assert_eq!(values, [0.0, -2.0, 0.5]);
    let (_, values) = eval_out::<f32>("npz-member", "a + 1", &[input("a", "pair.npz:x")]).expect("eval");
    assert_eq!(values, [2.5, -1.0, 1.25]);
    // np.savez_compressed with one unnamed array (`arr_0`, deflated): the only array.
    let (shape, values) =
        eval_out::<f64>("npz-only", "v * 4", &[input("v", "single_compressed.npz")]).expect("eval");
    assert_eq!(shape, [5]);
    assert_eq!(values, [0.0, 1.0, 2.0, 3.0, 4.0]);
    let (_, values) =
        eval_out::<f64>("npz-arr0", "v", &[input("v", "single_compressed.npz:arr_0.npy")]).expect("eval");
    assert_eq!(values, [0.0, 0.25, 0.5, 0.75, 1.0]);
}

#[test]
fn npz_errors_name_the_arrays_an_archive_holds() {
    let err = eval_out::<f32>("npz-missing", "z", &[input("z", "pair.npz")]).expect_err("no z");
    assert!(
        err.contains("no array `z` in the archive (it holds x, y)"),
        "{err}"
    );
    assert!(err.contains("--in z=FILE.npz:ARRAY"), "{err}");
    let err = eval_out::<f32>("npz-bad-member", "z", &[input("z", "pair.npz:w")]).expect_err("no w");
    assert!(
        err.contains("no array `w` in the archive (it holds x, y)"),
        "{err}"
    );
    let err = eval_out::<f32>("npy-member", "z", &[input("z", "uint8.npy.npz:x")]).expect_err("missing file");
    assert!(err.contains("uint8.npy.npz: cannot open"), "{err}");
}
