//! Expressions: the grammar, every function family, named outputs, and errors with columns and
//! carets; results checked against closed forms and the reference interpreter.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::expr::{Signature, compile, compile_with_outputs};
use rfx::{Array, DType, TensorType};
use rfx_ir::interp::{Mode, run_hir};

fn sig(text: &str) -> Signature {
    text.parse().expect("signature")
}

fn run(src: &str, signature: &str, inputs: &[Array]) -> Vec<Array> {
    let kernel = compile(src, &sig(signature)).unwrap_or_else(|e| panic!("{src}: {e}"));
    let compiled = rfx::jit_kernel(kernel.clone())
        .call(inputs)
        .expect("compiled call");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let reference = run_hir(&kernel, &views, Mode::Native).expect("interpreter");
    for (c, r) in compiled.iter().zip(&reference) {
        for (a, b) in c.to_f64_vec().iter().zip(r.to_f64_vec()) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0) || (a.is_nan() && b.is_nan()),
                "{src}: {a} vs {b}"
            );
        }
    }
    compiled
}

fn random(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Array {
    Array::from_slice(&(0..n).map(|_| rng.random_range(lo..hi)).collect::<Vec<f32>>())
}

#[test]
fn rfxjit_example_expression() {
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    let y = Array::from_slice(&[1.0f32, 2.0, 3.0]);
    let out = run("sin(x*2.0) + y", "x: f32[3], y: f32[3]", &[x, y]);
    assert_eq!(
        out[0].as_slice::<f32>(),
        Some(&[1.0f32, 2.909_297_5, 2.243_197_5][..])
    );
}

#[test]
fn precedence_and_literals() {
    let mut rng = StdRng::seed_from_u64(3);
    let x = random(&mut rng, 6, 0.5, 2.0);
    let xs = x.as_slice::<f32>().expect("f32").to_vec();
    type Case = (&'static str, fn(f32) -> f32);
    let cases: [Case; 8] = [
        ("-x**2", |x| -(x * x)),
        ("2**-1 * x", |x| 0.5 * x),
        ("1 - x / 4 * 2", |x| 1.0 - x / 4.0 * 2.0),
        ("(1 - x) * 3 % 2", |x| ((1.0 - x) * 3.0) % 2.0),
        ("x ** 0.5 + 1e-1", |x| x.sqrt() + 0.1),
        ("where(x > 1 & x < 1.5 | x == 0.75, x, -x)", |x| {
            if (x > 1.0 && x < 1.5) || x == 0.75 { x } else { -x }
        }),
        (
            "where(~(x >= 1), 1.0, 0.0) + 2 * pi",
            |x| if x >= 1.0 { 0.0 } else { 1.0 } + 2.0 * std::f32::consts::PI,
        ),
        ("3 * 4 - x", |x| 12.0 - x),
    ];
    for (src, f) in cases {
        let out = run(src, "x: f32[6]", std::slice::from_ref(&x));
        let got = out[0].as_slice::<f32>().expect("f32");
        for (g, v) in got.iter().zip(&xs) {
            let want = f(*v);
            assert!(
                (g - want).abs() <= 2e-6 * want.abs().max(1.0),
                "{src} at {v}: {g} vs {want}"
            );
        }
    }
}

#[test]
fn functions_of_every_family() {
    let mut rng = StdRng::seed_from_u64(4);
    let x = Array::from_vec(
        vec![2, 3],
        (0..6).map(|_| rng.random_range(0.1f32..0.9)).collect(),
    )
    .expect("x");
    let y = random(&mut rng, 3, 0.1, 0.9);
    let sources = [
        "exp(x) + log(y) - sqrt(x) * rsqrt(y) + recip(x) + exp2(y) + log2(x)",
        "tanh(x) + atan(y) + arcsin(x) + arccos(y) + sigmoid(x) + tan(y) + cos(x) + abs(-x) + sign(x - 0.5)",
        "floor(x * 4) + ceil(y * 4) + round(x * 4) + neg(y)",
        "minimum(x, y) + maximum(x, 0.5) + atan2(x, y) + arctan2(y, x) + fmod(x, 0.3) + pow(x, y)",
        "clip(x, 0.2, 0.6) + clamp(y, 0.3, y) + where(lt(x, y), 1.0, 2.0) + cast(gt(x, 0.5), f32)",
        "sum(x) + sum(x, 0) + sum(x, axis=1, keepdims=true) + mean(x, [0, 1]) + max(x, -2) + min(x) + prod(y)",
    ];
    for src in &sources {
        let out = run(src, "x: f32[2,3], y: f32[3]", &[x.clone(), y.clone()]);
        assert!(out[0].to_f64_vec().iter().all(|v| v.is_finite()), "{src}");
    }
    // Reductions in closed form.
    let xs = x.to_f64_vec();
    let out = run(
        "s = sum(x, 1); m = max(x); s * m",
        "x: f32[2,3]",
        std::slice::from_ref(&x),
    );
    let m = xs.iter().cloned().fold(f64::MIN, f64::max);
    let expected = [(xs[0] + xs[1] + xs[2]) * m, (xs[3] + xs[4] + xs[5]) * m];
    for (g, e) in out[0].to_f64_vec().iter().zip(expected) {
        assert!((g - e).abs() < 1e-5, "{g} vs {e}");
    }
    let out = run(
        "reshape(broadcast_to(y, [2, 3]), [3, 2])",
        "y: f32[3]",
        std::slice::from_ref(&y),
    );
    assert_eq!(out[0].shape(), &rfx::Shape::new([3, 2]));
}

#[test]
fn indices_and_lookups() {
    // Ties (the first wins), a NaN (it wins), negative axes, the flattened form.
    let x = Array::from_vec(
        vec![3, 4],
        vec![
            2.0f32,
            -1.0,
            5.0,
            -1.0,
            f32::NAN,
            0.0,
            7.0,
            7.0,
            3.0,
            3.0,
            -0.0,
            0.0,
        ],
    )
    .expect("x");
    let cases: [(&str, &[usize], &[i32]); 8] = [
        ("argmin(x, 1)", &[3], &[1, 0, 2]),
        ("argmax(x, axis=-1)", &[3], &[2, 0, 0]),
        ("argmin(x, 0)", &[4], &[1, 0, 2, 0]),
        ("argmax(x, 0)", &[4], &[1, 2, 1, 1]),
        ("argmax(x)", &[], &[4]),
        ("argmin(where(x != x, 0, x))", &[], &[1]),
        ("argmax(x > 2.5, 1)", &[3], &[2, 2, 0]),
        ("argmax(isnan(x), 1)", &[3], &[0, 0, 0]),
    ];
    for (src, dims, want) in cases {
        let out = run(src, "x: f32[3,4]", std::slice::from_ref(&x));
        assert_eq!(out[0].shape().dims(), dims, "{src}");
        assert_eq!(out[0].as_slice::<i32>(), Some(want), "{src}");
    }
    // A gain picked by an operating point (clamped at both ends of the table), the rows of a
    // waypoint table by their index, and one column per row.
    let gains = Array::from_slice(&[0.5f64, 0.75, 1.25, 2.0]);
    let speed = Array::from_slice(&[-3.0f64, 0.2, 1.9, 2.5, 40.0]);
    let out = run("take(g, floor(v))", "g: f64[4], v: f64[5]", &[gains, speed]);
    assert_eq!(out[0].as_slice::<f64>(), Some(&[0.5, 0.5, 0.75, 1.25, 2.0][..]));
    let table = Array::from_vec(vec![3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).expect("t");
    let pick = Array::from_slice(&[2i32, 0]);
    let out = run(
        "take(t, i, 0) * 10",
        "t: f64[3,2], i: i32[2]",
        &[table.clone(), pick.clone()],
    );
    assert_eq!(out[0].shape().dims(), [2, 2]);
    assert_eq!(out[0].as_slice::<f64>(), Some(&[50.0, 60.0, 10.0, 20.0][..]));
    let out = run("take(t, i)", "t: f64[3,2], i: i32[2]", &[table.clone(), pick]);
    assert_eq!(out[0].as_slice::<f64>(), Some(&[3.0, 1.0][..]));
    let column = Array::from_vec(vec![3, 1], vec![1i32, 0, 1]).expect("column");
    let out = run(
        "take_along_axis(t, c, axis=1)",
        "t: f64[3,2], c: i32[3,1]",
        &[table, column],
    );
    assert_eq!(out[0].as_slice::<f64>(), Some(&[2.0, 3.0, 6.0][..]));
    // The nearest of four waypoints to each of two points, found and read in one expression.
    let path = Array::from_vec(vec![4, 2], vec![0.0f32, 0.0, 1.0, 0.5, 2.0, 0.0, 3.0, -1.0]).expect("path");
    let p = Array::from_vec(vec![2, 1, 2], vec![2.2f32, 0.3, 0.8, 0.9]).expect("p");
    let out = run(
        "d = p - reshape(path, [1, 4, 2]); take(path, argmin(sum(d * d, 2), 1), 0)",
        "p: f32[2,1,2], path: f32[4,2]",
        &[p, path],
    );
    assert_eq!(out[0].as_slice::<f32>(), Some(&[2.0f32, 0.0, 1.0, 0.5][..]));
}

#[test]
fn statements_and_named_outputs() {
    let sig = sig("x: f64[3], y: f64[3]");
    let kernel = compile("a = x * 2\nb = a + y; c = b * b", &sig).expect("compile");
    assert_eq!(kernel.outputs().len(), 1);
    assert_eq!(kernel.outputs()[0].name, "c");
    let kernel =
        compile_with_outputs("out1 = x + y; out2 = x * y", &sig, &["out1", "out2"]).expect("compile");
    let f = rfx::jit_kernel(kernel);
    let out = f.call((&[1.0f64, 2.0, 3.0], &[4.0f64, 5.0, 6.0])).expect("call");
    assert_eq!(out[0].as_slice::<f64>(), Some(&[5.0, 7.0, 9.0][..]));
    assert_eq!(out[1].as_slice::<f64>(), Some(&[4.0, 10.0, 18.0][..]));
    let kernel = compile("x + y  # a comment", &sig).expect("compile");
    assert_eq!(kernel.outputs()[0].name, "out");
    let ints = compile(
        "a * 3 - b / 2",
        &Signature::new()
            .input("a", TensorType::new(DType::I32, [2]))
            .input("b", TensorType::new(DType::I32, [2])),
    )
    .expect("ints");
    let out = rfx::jit_kernel(ints)
        .call((&[5i32, -1], &[7i32, -3]))
        .expect("call");
    assert_eq!(out[0].as_slice::<i32>(), Some(&[12, -1][..]));
}

#[test]
fn errors_have_columns_and_carets() {
    let s = sig("x: f32[3], y: f32[2]");
    let cases = [
        ("sin(x * 2.0", 1, 12, "expected `,` or `)`"),
        ("sinn(x)", 1, 1, "unknown function `sinn`"),
        ("x + z", 1, 5, "unknown name `z`"),
        ("x + y", 1, 3, "do not broadcast"),
        ("x $ y", 1, 3, "unexpected character `$`"),
        ("a = x\nb = a +", 2, 8, "expected an operand"),
        ("sum(x, 3)", 1, 8, "axis 3 is out of range"),
        ("1 < x < 2", 1, 7, "chained comparisons"),
        ("sin(x, y)", 1, 1, "takes 1 argument"),
        ("x = 1", 1, 1, "is an input"),
        ("cast(x, 2)", 1, 9, "expected a dtype"),
        ("sin(cast(x, i32))", 1, 1, "does not accept i32"),
        ("argmin(x, 1)", 1, 11, "axis 1 is out of range for rank 1"),
        (
            "argmax(x, 0, 1)",
            1,
            1,
            "`argmax` takes 1 argument(s) and an optional axis",
        ),
        ("take(x)", 1, 1, "`take` takes 2 argument(s)"),
        ("take(x, y, mode=1)", 1, 17, "no argument `mode`"),
        ("take_along_axis(x, y)", 1, 1, "an index and an axis"),
        (
            "take_along_axis(x, reshape(y, [2, 1]), 0)",
            1,
            1,
            "`gather` along axis 0",
        ),
        ("argmin(x, 0.5)", 1, 11, "`axis` must be an integer"),
    ];
    for (src, line, col, needle) in cases {
        let err = compile(src, &s).expect_err(src);
        assert_eq!((err.line, err.col), (line, col), "{src}: {err}");
        assert!(err.message.contains(needle), "{src}: {}", err.message);
        let text = err.to_string();
        let caret = text.lines().last().expect("caret line");
        assert_eq!(caret, format!("{}^", " ".repeat(col - 1)), "{src}:\n{text}");
        assert_eq!(err.one_line(), format!("{line}:{col}: {}", err.message));
    }
    let err = compile_with_outputs("a = x", &s, &["a", "b"]).unwrap_err();
    assert!(err.message.contains("output `b` is never assigned"));
    assert!("x: f33[3]".parse::<Signature>().is_err());
    assert!("x f32[3]".parse::<Signature>().is_err());
    assert_eq!(sig("x=f32[2,3], y: i32[]").to_string(), "x: f32[2,3], y: i32[]");
}
