//! What `rfx` prints: results in their dtype's own form (integers, booleans, `float32` with
//! `float32`'s shortest digits, long arrays summarised as NumPy's `repr`), and errors in
//! expressions, kernel files and `--in-shapes` with a real position, the source line and a
//! caret.

use crate::common;
use common::{rfx, stderr_of, stdout_of, temp_dir, write_npy};

#[test]
fn results_print_in_their_dtype_s_form() {
    let dir = temp_dir("print");
    let x = dir.join("x.npy");
    write_npy(&x, &[3], &[0.0f32, 1.0, 2.0]);
    let xi = dir.join("i.npy");
    write_npy(&xi, &[2, 2], &[1i32, -2, 3, 4]);
    let y = dir.join("y.npy");
    write_npy(&y, &[3], &[1.0f32, 2.0, 3.0]);
    let (in_x, in_y) = (format!("x={}", x.display()), format!("y={}", y.display()));
    let in_i = format!("i={}", xi.display());
    // The doc example of rfx::expr (and rfxJIT's): float32's digits, not the float64 widening
    // 2.909297466278076 (NumPy's float32 repr: [1., 2.9092975, 2.2431974]).
    let out = rfx(&["eval", "sin(x*2.0)+y", "--in", &in_x, "--in", &in_y]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "out: f32[3] = [1.0, 2.9092975, 2.2431974]\n");
    let out = rfx(&[
        "eval",
        "a = i * 3; b = i > 0; c = sum(i)",
        "--outputs",
        "a,b,c",
        "--in",
        &in_i,
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out),
        "a: i32[2,2] = [[3, -6], [9, 12]]\nb: bool[2,2] = [[true, false], [true, true]]\nc: i32[] = 6\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn long_results_are_summarised_as_numpy_s_repr() {
    let dir = temp_dir("print-long");
    let x = dir.join("x.npy");
    let values: Vec<i32> = (0..1001).collect();
    write_npy(&x, &[1001], &values);
    let out = rfx(&["eval", "x * 2", "--in", &format!("x={}", x.display())]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    // np.arange(1001) * 2 prints as [   0    2    4 ... 1996 1998 2000].
    assert_eq!(
        stdout_of(&out),
        "out: i32[1001] = [0, 2, 4, ..., 1996, 1998, 2000]\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The three lines of an error at a place: the message, the source line, the caret.
fn error_lines(args: &[&str]) -> Vec<String> {
    let out = rfx(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr_of(&out));
    stderr_of(&out).lines().map(str::to_string).collect()
}

#[test]
fn expression_errors_show_the_line_and_a_caret() {
    let lines = error_lines(&["dump", "sin(x) + y", "--stage", "hir", "--in-shapes", "x=f32[3]"]);
    assert_eq!(
        lines,
        [
            "error: in expression: 1:10: unknown name `y`",
            "  sin(x) + y",
            "           ^"
        ]
    );
    // The caret under the column of a long line (200 terms, `q` at column 801), cut to a
    // window around it.
    let long = format!("{} + q", vec!["x"; 200].join(" + "));
    let lines = error_lines(&["dump", &long, "--stage", "hir", "--in-shapes", "x=f32[3]"]);
    assert_eq!(lines[0], "error: in expression: 1:801: unknown name `q`");
    assert!(
        lines[1].starts_with("  ...") && lines[1].ends_with("+ q"),
        "{lines:?}"
    );
    let caret = lines[2].find('^').expect("caret");
    assert_eq!(&lines[1][caret..=caret], "q", "{lines:?}");
}

#[test]
fn signature_errors_point_at_the_input_s_use_not_0_0() {
    // A duplicate input name is the signature's error: it points at the input's first use.
    let lines = error_lines(&[
        "dump",
        "y + x",
        "--stage",
        "hir",
        "--in-shapes",
        "x=f32[3],x=f32[3]",
    ]);
    assert!(
        lines[0].starts_with("error: in expression: 1:5: input `x`: "),
        "{lines:?}"
    );
    assert!(lines[0].contains("duplicate input name `x`"), "{lines:?}");
    assert_eq!(lines[1..], ["  y + x", "      ^"]);
}

#[test]
fn in_shapes_help_and_error_use_one_notation() {
    let help = stdout_of(&rfx(&["dump", "--help"]));
    let form = "NAME=DTYPE[DIMS] (DTYPE: f32, f64, i32 or bool; DIMS: comma-separated sizes, none for a \
                scalar), e.g. x=f32[3],m=f64[2,3],k=i32[]";
    assert!(help.contains(form), "{help}");
    let lines = error_lines(&["dump", "x", "--stage", "hir", "--in-shapes", "x: f33[3]"]);
    assert_eq!(
        lines,
        [format!(
            "error: --in-shapes: invalid entry `x: f33[3]`: expected {form}"
        )]
    );
    // The form the help gives works as it says.
    let out = rfx(&[
        "dump",
        "m + k",
        "--stage",
        "hir",
        "--in-shapes",
        "m=f64[2,3],k=f64[]",
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}

#[test]
fn kernel_file_errors_show_the_line_and_a_caret() {
    let dir = temp_dir("kernel-caret");
    let kernel = dir.join("bad.rfx");
    std::fs::write(
        &kernel,
        "kernel k {\n  %x = input x : f32[3]\n  %s = sinn %x : f32[3]\n  output s = %s\n}\n",
    )
    .expect("write");
    let lines = error_lines(&["dump", kernel.to_str().expect("utf-8"), "--stage", "hir"]);
    assert!(
        lines[0].starts_with(&format!("error: {}:3:", kernel.display())),
        "{lines:?}"
    );
    assert_eq!(lines[1], "    %s = sinn %x : f32[3]");
    let caret = lines[2].find('^').expect("caret");
    assert_eq!(&lines[1][caret..caret + 4], "sinn", "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
