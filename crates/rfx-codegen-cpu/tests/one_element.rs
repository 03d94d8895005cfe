//! One-element kernels call the routines' one-element entries (CPUs with AVX2 and FMA): every
//! transcendental with a routine, in `f32` and `f64`, a `sin` and a `cos` of one value, and the
//! binary `atan2` and `pow`. The code calls a function of the element itself (`(f64) -> f64`,
//! no staging slot, no array routine), and gives the bits of the same kernel run over a long
//! row in tiles, element by element, and the interpreter's values within the backend's bound.

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower, ulps};
use rfx_opt::{OptConfig, optimize};

fn tile_routines_linked() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

fn lir_of(src: &str) -> LirProgram {
    let kernel = rfx_ir::hir::parse(src).expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

/// `src` with `{N}` replaced by `n`, compiled for one thread and run on `inputs` (as `dt`):
/// every output's elements as `f64` bits, and the interpreter's values.
fn run(src: &str, dt: &str, n: usize, inputs: &[&[f64]]) -> (Vec<Vec<u64>>, Vec<Vec<f64>>) {
    let lir = lir_of(&src.replace("{N}", &n.to_string()));
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(&lir, &options).expect("compile");
    let arrays: Vec<Array> = inputs
        .iter()
        .map(|v| {
            if dt == "f32" {
                Array::from_slice(&v.iter().map(|&e| e as f32).collect::<Vec<_>>())
            } else {
                Array::from_slice(v)
            }
        })
        .collect();
    let views: Vec<_> = arrays.iter().map(Array::view).collect();
    let mut outputs: Vec<Array> = lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    {
        let mut out_views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
        compiled
            .run(&views, &mut out_views, &mut Scratch::new())
            .expect("run");
    }
    let oracle = run_lir(&lir, &views, Mode::Native).expect("interpreter");
    let bits = outputs
        .iter()
        .map(|a| {
            (0..n)
                .map(|i| a.get(i).map_or(0, |v| v.to_f64().to_bits()))
                .collect()
        })
        .collect();
    let want = oracle
        .iter()
        .map(|a| {
            (0..n)
                .map(|i| a.get(i).map_or(f64::NAN, Scalar::to_f64))
                .collect()
        })
        .collect();
    (bits, want)
}

/// Arguments: specials, edges of the routines' fast ranges, and moderate values.
fn arguments(binary: bool) -> Vec<f64> {
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.75,
        1e-310,
        -1e-40,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        3.0e5,
        -1.0e7,
        1.0e30,
        88.7,
        -104.0,
        709.5,
        std::f64::consts::FRAC_PI_2,
        -std::f64::consts::PI,
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    while xs.len() < 64 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
        xs.push(if binary { 6.0 * u - 2.0 } else { 40.0 * u - 20.0 });
    }
    xs
}

/// The calls in a kernel's CLIF whose signature takes only floats (and, for `sincos`, one
/// pointer) and returns one float: the one-element entries.
fn one_element_calls(clif: &str) -> usize {
    let entry_sigs: Vec<&str> = clif
        .lines()
        .filter_map(|l| {
            let (name, sig) = l.trim().split_once(" = (")?;
            let one = [
                "f32) -> f32 ",
                "f64) -> f64 ",
                "f32, f32) -> f32 ",
                "f64, f64) -> f64 ",
                "f32, i64) -> f32 ",
                "f64, i64) -> f64 ",
            ]
            .iter()
            .any(|s| sig.starts_with(s));
            (name.starts_with("sig") && one).then_some(name)
        })
        .collect();
    let entries: Vec<String> = clif
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().split_once(" = ")?;
            let sig = rest.rsplit(' ').next()?;
            (name.starts_with("fn") && entry_sigs.contains(&sig)).then(|| format!("call {name}("))
        })
        .collect();
    clif.lines()
        .filter(|l| entries.iter().any(|e| l.contains(e.as_str())))
        .count()
}

/// A one-element kernel of `body` (over inputs `x` and, if `binary`, `y`): the entries called
/// `calls` times and no array routine or staging slot; its bits those of the kernel over 64
/// elements in tiles, element by element; within 4 ULP of the interpreter.
fn check(dt: &str, body: &str, outputs: &str, binary: bool, calls: usize) {
    let src = format!(
        "kernel k {{\n %x = input x : {dt}[{{N}}]\n{} {body}\n{outputs}\n}}",
        if binary {
            format!(" %y = input y : {dt}[{{N}}]\n")
        } else {
            String::new()
        }
    )
    .replace("{dt}", dt);
    let lir = lir_of(&src.replace("{N}", "1"));
    let clif: String = dump(&lir)
        .expect("dump")
        .into_iter()
        .map(|(_, clif, _)| clif)
        .collect();
    assert_eq!(one_element_calls(&clif), calls, "{src}\n{clif}");
    assert_eq!(clif.matches("call fn").count(), calls, "another call:\n{clif}");
    // The one slot a `sincos` entry's second result comes back through.
    let sincos = clif.contains(", i64) -> f");
    assert!(
        !clif.contains("explicit_slot") || sincos,
        "a staging slot:\n{clif}"
    );
    let xs = arguments(binary);
    let ys: Vec<f64> = xs
        .iter()
        .rev()
        .map(|&v| if v.is_finite() { v.abs() } else { v })
        .collect();
    let inputs: Vec<&[f64]> = if binary { vec![&xs, &ys] } else { vec![&xs] };
    let (tiled, _) = run(&src, dt, xs.len(), &inputs);
    for i in 0..xs.len() {
        let one: Vec<&[f64]> = inputs.iter().map(|v| &v[i..=i]).collect();
        let (bits, want) = run(&src, dt, 1, &one);
        for (k, (got, want)) in bits.iter().zip(&want).enumerate() {
            assert_eq!(
                got[0], tiled[k][i],
                "{src}\noutput {k}, element {i} ({:?}) alone and in tiles",
                one
            );
            let value = f64::from_bits(got[0]);
            let dtype = if dt == "f32" {
                rfx_ir::DType::F32
            } else {
                rfx_ir::DType::F64
            };
            assert!(
                ulps(value, want[0], dtype) <= 4 || (value - want[0]).abs() <= 1e-6,
                "{src}\noutput {k} at {one:?}: {value:e}, interpreter {:e}",
                want[0]
            );
        }
    }
}

#[test]
fn one_element_transcendentals_call_the_entries() {
    if !tile_routines_linked() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    for dt in ["f32", "f64"] {
        for op in [
            "sin", "cos", "tan", "exp", "exp2", "log", "log2", "tanh", "sigmoid", "atan", "asin", "acos",
        ] {
            check(
                dt,
                &format!("%o = {op} %x : {{dt}}[{{N}}]"),
                " output out = %o",
                false,
                1,
            );
        }
        // One `sincos` entry for both results.
        check(
            dt,
            "%s = sin %x : {dt}[{N}]\n %c = cos %x : {dt}[{N}]",
            " output s = %s\n output c = %c",
            false,
            1,
        );
        for op in ["atan2", "pow"] {
            check(
                dt,
                &format!("%o = {op} %x, %y : {{dt}}[{{N}}]"),
                " output out = %o",
                true,
                1,
            );
        }
    }
}
