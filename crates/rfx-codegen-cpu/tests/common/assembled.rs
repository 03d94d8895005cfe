//! What the tests of assembled passes share: kernels compiled for the CPU and run on rows
//! mixing special values with random ones, every element's bits compared with a reference, and
//! the count of assembled passes in a kernel's code.

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// Whether the host runs assembled passes and links the tile routines.
pub(crate) fn host_assembles() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

pub(crate) fn lir_of(src: &str) -> LirProgram {
    let kernel = rfx_ir::hir::parse(src).unwrap_or_else(|e| panic!("parse: {e:?}\n{src}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

pub(crate) fn compile_and_run(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    compile_and_run_on(lir, inputs, Some(1))
}

/// [`compile_and_run`] on at most `threads` threads (`None`: the backend's choice).
pub(crate) fn compile_and_run_on(lir: &LirProgram, inputs: &[Array], threads: Option<usize>) -> Vec<Array> {
    let compiled = CpuBackend
        .compile(
            lir,
            &CompileOptions {
                max_threads: threads,
                ..CompileOptions::default()
            },
        )
        .expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    compiled.run_to_new(&views).expect("run")
}

/// The bits of an element, every NaN alike.
pub(crate) fn bits(s: Scalar) -> u64 {
    if s.to_f64().is_nan() {
        u64::MAX
    } else {
        s.to_bits()
    }
}

/// The number of assembled passes in the compiled code of `lir` (from its listing).
pub(crate) fn assembled_passes(lir: &LirProgram) -> usize {
    dump(lir)
        .expect("dump")
        .iter()
        .map(|(_, _, asm)| asm.matches("; assembled pass").count())
        .sum()
}

/// Special values of `dtype`: NaN, zeros, infinities, subnormals, rounding ties, the kernels'
/// constants and their neighbours.
pub(crate) fn specials(dtype: DType) -> Vec<f64> {
    let tiny = if dtype == DType::F32 { 3e-39 } else { 4e-310 };
    vec![
        f64::NAN,
        -f64::NAN,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        tiny,
        -tiny,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        1.0,
        -1.0,
        0.75,
        3.0e5,
        -7.0e30,
        1.25,
    ]
}

/// A row of `n` elements: specials at every third position (cycled by a random offset), the
/// rest random in [-10, 10].
pub(crate) fn row(rng: &mut TestRng, dtype: DType, shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    let special = specials(dtype);
    let offset = rng.below(special.len());
    let values: Vec<Scalar> = (0..n)
        .map(|i| {
            let v = if i % 3 == rng.below(3) {
                special[(i + offset) % special.len()]
            } else {
                (rng.below(4001) as f64 - 2000.0) / 200.0
            };
            Scalar::from_f64(dtype, v)
        })
        .collect();
    Array::new(
        shape.to_vec(),
        ArrayData::from_scalars(dtype, values).expect("one dtype"),
    )
    .expect("row")
}

/// A scalar input (shape `[]`).
pub(crate) fn scalar(dtype: DType, v: f64) -> Array {
    Array::new(
        Vec::<usize>::new(),
        ArrayData::from_scalars(dtype, [Scalar::from_f64(dtype, v)]).expect("one dtype"),
    )
    .expect("scalar")
}

/// An input of a test kernel: a row (of the kernel's shape), a per-call scalar, or a
/// vector of given values (read whole by every element, as a per-call input).
#[derive(Clone, Copy)]
pub(crate) enum In {
    Row,
    Scalar(f64),
    Values(&'static [f64]),
}

pub(crate) fn inputs(rng: &mut TestRng, dtype: DType, ins: &[In], shape: &[usize]) -> Vec<Array> {
    ins.iter()
        .map(|i| match *i {
            In::Row => row(rng, dtype, shape),
            In::Scalar(v) => scalar(dtype, v),
            In::Values(vs) => Array::new(
                vec![vs.len()],
                ArrayData::from_scalars(dtype, vs.iter().map(|&v| Scalar::from_f64(dtype, v)))
                    .expect("one dtype"),
            )
            .expect("values"),
        })
        .collect()
}

/// The kernel `src` with `{S}` its shape and `{dt}` its dtype.
pub(crate) fn instantiate(src: &str, dt: &str, shape: &[usize]) -> String {
    let s: Vec<String> = shape.iter().map(usize::to_string).collect();
    src.replace("{S}", &s.join(", ")).replace("{dt}", dt)
}

pub(crate) fn dt_name(dtype: DType) -> &'static str {
    if dtype == DType::F32 { "f32" } else { "f64" }
}

/// Checks every output element of `got` against `want` (element `i` of output `k` at
/// `want(k, i)`).
pub(crate) fn check_bits(src: &str, got: &[Array], want: impl Fn(usize, usize) -> Scalar) {
    for (k, out) in got.iter().enumerate() {
        let n: usize = out.shape().dims().iter().product();
        for i in 0..n {
            let g = out.get(i).expect("got");
            let w = want(k, i);
            assert_eq!(
                bits(g),
                bits(w),
                "{src}\noutput {k}, element {i}: {g:?} ({:#x}) vs {w:?} ({:#x})",
                g.to_bits(),
                w.to_bits()
            );
        }
    }
}

/// Runs the exact body `src` (`{S}` the shape, `{dt}` the dtype) at each of `shapes` on the
/// CPU backend and on the LIR interpreter, and checks every element's bits. Returns how many
/// of the compiled kernels had an assembled pass.
pub(crate) fn exact_matches_interpreter(
    rng: &mut TestRng,
    src: &str,
    dtype: DType,
    ins: &[In],
    shapes: &[Vec<usize>],
) -> usize {
    exact_matches_interpreter_on(rng, src, dtype, ins, (shapes, 1))
}

/// [`exact_matches_interpreter`] with the CPU backend on at most `threads` threads.
pub(crate) fn exact_matches_interpreter_on(
    rng: &mut TestRng,
    src: &str,
    dtype: DType,
    ins: &[In],
    (shapes, threads): (&[Vec<usize>], usize),
) -> usize {
    let mut assembled = 0;
    for shape in shapes {
        let text = instantiate(src, dt_name(dtype), shape);
        let lir = lir_of(&text);
        if host_assembles() && assembled_passes(&lir) > 0 {
            assembled += 1;
        }
        let inputs = inputs(rng, dtype, ins, shape);
        let got = compile_and_run_on(&lir, &inputs, Some(threads));
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
        assert_eq!(got.len(), want.len());
        check_bits(&text, &got, |k, i| want[k].get(i).expect("want"));
    }
    assembled
}
