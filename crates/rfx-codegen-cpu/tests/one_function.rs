//! A program whose kernels are all too small to split across threads runs as one function, each
//! kernel's code continuing into the next's. Programs of several kinds of kernels (reductions
//! before elementwise work, scans, gathers, literals, windows, several outputs), in every
//! dtype, must give the LIR interpreter's bits and run as one function; a program with a large
//! kernel keeps one function per kernel.

use crate::common;

use rfx_codegen_cpu::compile;
use rfx_ir::hir;
use rfx_lower::{CompileOptions, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// The LIR kernels and the JIT functions of `text`'s program.
fn counts(text: &str) -> (usize, usize) {
    let kernel = hir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    (lir.kernels().len(), compiled.function_count())
}

fn programs(dt: &str, n: usize) -> Vec<String> {
    let float = dt != "i32";
    let mut out = vec![
        // Centering: a reduction read back at every point (two kernels).
        format!(
            "kernel center {{\n %x = input x : {dt}[{n},3]\n %s = sum %x axes [1] keepdims : {dt}[{n},1]\n \
             %sb = broadcast_to %s : {dt}[{n},3]\n %c = sub %x, %sb : {dt}[{n},3]\n %m = max %c axes [0] : {dt}[3]\n \
             output c = %c\n output m = %m\n}}"
        ),
        // A chain of small matrix products (`a b a`), each product stored before the next.
        format!(
            "kernel chain {{\n %a = input a : {dt}[{n},4,4]\n %b = input b : {dt}[{n},4,4]\n \
             %ae = reshape %a : {dt}[{n},4,4,1]\n %ab = broadcast_to %ae : {dt}[{n},4,4,4]\n \
             %bt = transpose %b perm [0,2,1] : {dt}[{n},4,4]\n %be = reshape %bt : {dt}[{n},1,4,4]\n \
             %bb = broadcast_to %be : {dt}[{n},4,4,4]\n %p = mul %ab, %bb : {dt}[{n},4,4,4]\n \
             %q = sum %p axes [3] : {dt}[{n},4,4]\n %qe = reshape %q : {dt}[{n},4,4,1]\n \
             %qb = broadcast_to %qe : {dt}[{n},4,4,4]\n %at = transpose %a perm [0,2,1] : {dt}[{n},4,4]\n \
             %ate = reshape %at : {dt}[{n},1,4,4]\n %atb = broadcast_to %ate : {dt}[{n},4,4,4]\n \
             %r = mul %qb, %atb : {dt}[{n},4,4,4]\n %o = sum %r axes [3] : {dt}[{n},4,4]\n output o = %o\n}}"
        ),
        // A running sum whose total is read back, and a window of it.
        format!(
            "kernel scan {{\n %x = input x : {dt}[{n},6]\n %c = cumsum %x axis 1 : {dt}[{n},6]\n \
             %t = sum %c axes [1] keepdims : {dt}[{n},1]\n %tb = broadcast_to %t : {dt}[{n},6]\n \
             %d = sub %c, %tb : {dt}[{n},6]\n %w = slice %c starts [0,2] : {dt}[{n},3]\n \
             output d = %d\n output w = %w\n}}"
        ),
    ];
    if float {
        // A lookup in a literal table by a computed index, then a normalisation.
        out.push(format!(
            "kernel lookup {{\n %x = input x : {dt}[{n},4]\n %t = literal [0.5, -1.25, 2.0, 3.5] : {dt}[4]\n \
             %a = abs %x : {dt}[{n},4]\n %i = floor %a : {dt}[{n},4]\n %tb = broadcast_to %t : {dt}[{n},4]\n \
             %g = gather %tb, %i axis 1 : {dt}[{n},4]\n \
             %s = sum %g axes [1] keepdims : {dt}[{n},1]\n %sb = broadcast_to %s : {dt}[{n},4]\n \
             %o = div %g, %sb : {dt}[{n},4]\n output o = %o\n}}"
        ));
    }
    out
}

#[test]
fn small_programs_run_as_one_function_with_the_interpreters_bits() {
    let (mut seed, mut several) = (9000, 0);
    for dt in ["f32", "f64", "i32"] {
        for n in [1usize, 3, 12] {
            for text in programs(dt, n) {
                seed += 1;
                common::assert_bits_match_interpreter(&text, 2, seed);
                let (kernels, functions) = counts(&text);
                assert_eq!(functions, 1, "{kernels} kernels, {functions} functions:\n{text}");
                several += usize::from(kernels >= 2);
            }
        }
    }
    // (One row's centering fuses into one kernel: its sum of three points is computed inline.)
    assert!(several >= 20, "only {several} programs of several kernels");
}

#[test]
fn a_program_with_a_large_kernel_keeps_one_function_per_kernel() {
    // 600 rows of 3: the elementwise kernel has 1800 points, too many for one function.
    for text in programs("f32", 600).into_iter().take(1) {
        common::assert_bits_match_interpreter(&text, 2, 11);
        let (kernels, functions) = counts(&text);
        assert_eq!(functions, kernels, "{text}");
    }
}

#[test]
fn a_program_whose_kernels_stage_tiles_keeps_one_frame_per_kernel() {
    // Small kernels of `f64` transcendentals run their routines on tiles staged on the stack
    // (4 KiB per staged value): together they would exceed the one-function frame limit, so
    // each kernel keeps its own function (and frame).
    let text = "kernel tiles {\n %x = input x : f64[500]\n %y = input y : f64[500]\n \
                %a = exp %x : f64[500]\n %b = sin %y : f64[500]\n %c = mul %a, %b : f64[500]\n \
                %d = tanh %c : f64[500]\n %e = atan %d : f64[500]\n %s = sum %e axes [0] keepdims : f64[1]\n \
                %sb = broadcast_to %s : f64[500]\n %f = cos %sb : f64[500]\n %g = mul %f, %e : f64[500]\n \
                %h = exp %g : f64[500]\n %k = log %h : f64[500]\n output k = %k\n output s = %s\n}";
    let (kernels, functions) = counts(text);
    assert!(kernels >= 2, "{kernels} kernels");
    assert_eq!(functions, kernels, "{text}");
}

/// Runs `text` on the CPU backend with a fresh scratch and the interpreter, asserting the same
/// bits; returns the lowered program, the JIT functions and the bytes the call took from the
/// scratch.
fn scratch_used(text: &str, seed: u64) -> (rfx_ir::lir::LirProgram, usize, usize) {
    use rfx_ir::Array;
    use rfx_ir::testgen::{TestRng, random_inputs};
    use rfx_lower::{Compiled, Scratch};
    let lir = common::assert_bits_match_interpreter(text, 2, seed);
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    let kernel = hir::parse(text).expect("parse");
    let inputs = random_inputs(&mut TestRng::new(seed), &kernel, 0.05);
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outputs: Vec<Array> = lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let mut out_views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
    let mut scratch = Scratch::new();
    compiled.run(&views, &mut out_views, &mut scratch).expect("run");
    let (_, want) = common::run_with_interpreter(&compiled, &lir, &inputs);
    for (got, want) in outputs.iter().zip(&want) {
        for i in 0..want.data().len() {
            let (a, b) = (
                got.get(i).expect("got").to_f64(),
                want.get(i).expect("want").to_f64(),
            );
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "element {i}\n{text}"
            );
        }
    }
    (lir, compiled.function_count(), scratch.capacity_bytes())
}

#[test]
fn a_one_function_program_keeps_its_temporaries_in_its_frame() {
    // Every small program of several kernels with temporaries: run as one function, none takes
    // scratch (the temporaries live in the function's frame, the call passes its arguments'
    // addresses as they are), with the interpreter's bits.
    let mut with_temporaries = 0;
    for dt in ["f32", "f64", "i32"] {
        for (k, text) in programs(dt, 3).into_iter().enumerate() {
            let (lir, functions, scratch) = scratch_used(&text, 9100 + k as u64);
            assert_eq!(functions, 1, "{text}");
            assert_eq!(scratch, 0, "arena of {} bytes\n{text}", lir.arena_bytes());
            with_temporaries += usize::from(lir.arena_bytes() > 0);
        }
    }
    assert!(
        with_temporaries >= 6,
        "only {with_temporaries} programs with temporaries"
    );
}

#[test]
fn a_one_function_program_with_a_large_arena_keeps_it_in_the_scratch() {
    // Eleven `f64` temporaries of 1,000 elements (88,000 bytes), each kernel under 1,024 points:
    // one function, its temporaries in the caller's scratch rather than the stack.
    let mut text = String::from("kernel wide {\n %x = input x : f64[1000]\n %v0 = mul %x, %x : f64[1000]\n");
    for i in 1..=10 {
        text += &format!(
            " %s{i} = sum %v{p} axes [0] keepdims : f64[1]\n %b{i} = broadcast_to %s{i} : f64[1000]\n \
             %v{i} = sub %v{p}, %b{i} : f64[1000]\n",
            p = i - 1
        );
    }
    text += " output o = %v10\n}";
    let (lir, functions, scratch) = scratch_used(&text, 9200);
    assert!(lir.kernels().len() >= 2, "{} kernels", lir.kernels().len());
    assert!(
        lir.arena_bytes() > 8 * 1024,
        "arena of {} bytes",
        lir.arena_bytes()
    );
    assert_eq!(functions, 1);
    assert!(
        scratch >= lir.arena_bytes(),
        "scratch {scratch}, arena {}",
        lir.arena_bytes()
    );
}

/// Two kernels of one element each: the first stores `x[0] * x[2] + x[1]` in a temporary, the
/// second scales `x` by it.
const FORWARDED: &str = "lir forwarded arena 64 align 64 {
  buf0: f64[3] = input x
  buf1: f64[] = arena 0
  buf2: f64[3] = output y
  kernel k0 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64]
    preamble {}
    body {
      s0 = load buf0 []
      s1 = load buf0 [] offset 2
      s2 = mul s0, s1
      s0 = load buf0 [] offset 1
      s1 = add s2, s0
      store buf1 [] = s1
    }
  }
  kernel k1 dims [3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64]
    preamble {
      s0 = load buf1 [0]
    }
    body {
      s1 = load buf0 [1]
      s2 = mul s1, s0
      store buf2 [1] = s2
    }
  }
}";

#[test]
fn the_one_function_reads_a_temporary_from_the_register_it_was_stored_from() {
    let lir = rfx_ir::lir::parse(FORWARDED).expect("LIR text");
    let (clif, _) = rfx_codegen_cpu::dump_program(&lir, &CompileOptions::default())
        .expect("compile")
        .expect("one function");
    // The arena is the function's first stack slot; every address in it is `stack_addr ss0`.
    let arena: Vec<&str> = clif
        .lines()
        .filter_map(|line| line.trim().split_once(" = stack_addr.i64 ss0"))
        .map(|(value, _)| value)
        .collect();
    let uses = |op: &str| {
        clif.lines()
            .filter(|line| line.contains(op))
            .filter(|line| line.split([' ', ',', '+']).any(|word| arena.contains(&word)))
            .count()
    };
    assert!(!arena.is_empty(), "no arena address:\n{clif}");
    assert_eq!(uses("store "), 1, "the first kernel's store:\n{clif}");
    assert_eq!(
        uses(" load."),
        0,
        "the second kernel reloads the temporary:\n{clif}"
    );
    // And the values are the interpreter's, specials included.
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    assert_eq!(compiled.function_count(), 1);
    for x in [
        [1.5, -2.0, 0.25],
        [f64::INFINITY, 1.0, 0.0],
        [f64::NAN, 3.0, -1.0],
        [-0.0, -0.0, 7.0],
        [1e308, 1e308, 10.0],
    ] {
        let input = rfx_ir::Array::new([3], rfx_ir::ArrayData::F64(x.to_vec())).expect("array");
        let (got, want) = common::run_with_interpreter(&compiled, &lir, &[input]);
        for i in 0..3 {
            let (a, b) = (
                got[0].get(i).expect("got").to_f64(),
                want[0].get(i).expect("want").to_f64(),
            );
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{x:?}[{i}]: {a} vs {b}"
            );
        }
    }
}
