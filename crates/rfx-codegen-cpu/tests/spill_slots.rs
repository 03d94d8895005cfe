//! A 16-byte spill slot must sit at a multiple of 16 bytes from the stack pointer: one that sits
//! 8 bytes off (after an 8-byte stack slot such as `sincos`'s cosine) straddles two cache lines
//! one time in four, and two pages when the caller's stack puts a page boundary there, each
//! reload then a page-split load: an unbatched call's time depended on its caller's stack
//! depth.

use crate::common;

use rfx_codegen_cpu::compile;
use rfx_lower::CompileOptions;

/// Eight products of `x` live across a `sin`/`cos` pair of `x[0]` (one `sincos` call, its
/// cosine returned through an 8-byte stack slot), combined after it into one value. With
/// `two_kernels` the value is a temporary that a second kernel scales `x` by (the two run as
/// one function); otherwise it is the output of the only kernel (a function of its own).
fn program(two_kernels: bool) -> String {
    let mut body = String::new();
    for i in 0..8 {
        body += &format!("      s{} = load buf0 [] offset {i}\n", 2 * i);
        body += &format!("      s{} = mul s{}, s{}\n", 2 * i + 1, 2 * i, 2 * i);
    }
    body += "      s16 = sin s0\n      s17 = cos s0\n";
    for i in 0..8 {
        let acc = if i == 0 {
            "s17".to_string()
        } else {
            format!("s{}", 17 + i)
        };
        body += &format!("      s{} = mul s{}, s16\n", 26 + i, 2 * i + 1);
        body += &format!("      s{} = add {acc}, s{}\n", 18 + i, 26 + i);
    }
    let slots = vec!["f64"; 34].join(", ");
    let (temporary, second) = if two_kernels {
        (
            "  buf1: f64[] = arena 0\n  buf2: f64[8] = output y\n",
            "  kernel k1 dims [8] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64]
    preamble {
      s0 = load buf1 [0]
    }
    body {
      s1 = load buf0 [1]
      s2 = mul s1, s0
      store buf2 [1] = s2
    }
  }\n",
        )
    } else {
        ("  buf1: f64[] = output t\n", "")
    };
    format!(
        "lir spills arena {arena} align 64 {{
  buf0: f64[8] = input x
{temporary}  kernel k0 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [{slots}]
    preamble {{}}
    body {{
{body}      store buf1 [] = s25
    }}
  }}
{second}}}",
        arena = if two_kernels { 64 } else { 0 },
    )
}

/// The stack-pointer offsets of the 16-byte spills and reloads (`movdqu`) in `asm`.
fn spill_offsets(asm: &str) -> Vec<u64> {
    asm.lines()
        .filter(|line| line.trim_start().starts_with("movdqu") && line.contains("(%rsp)"))
        .map(|line| {
            let operand = line
                .split([' ', ','])
                .find(|word| word.ends_with("(%rsp)"))
                .unwrap_or_else(|| panic!("no stack operand: {line}"));
            let offset = operand.trim_end_matches("(%rsp)");
            let offset = offset.rsplit('+').next().unwrap_or(offset);
            let hex = offset.trim_start_matches("0x");
            if offset.is_empty() {
                0
            } else if offset.starts_with("0x") {
                u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{e}: {line}"))
            } else {
                offset.parse().unwrap_or_else(|e| panic!("{e}: {line}"))
            }
        })
        .collect()
}

fn assert_aligned(asm: &str) {
    let offsets = spill_offsets(asm);
    assert!(offsets.len() >= 8, "only {} vector spills:\n{asm}", offsets.len());
    let off: Vec<u64> = offsets.iter().copied().filter(|o| o % 16 != 0).collect();
    assert!(off.is_empty(), "spill slots off 16 bytes at {off:x?}:\n{asm}");
}

/// Runs `lir` on the CPU backend and the interpreter on a few inputs, specials included.
fn assert_interpreter_bits(lir: &rfx_ir::lir::LirProgram) {
    let compiled = compile(lir, &CompileOptions::default()).expect("compile");
    for x in [
        [0.5, -1.25, 2.0, 3.5, -0.0, 1e-300, 7.25, -3.0],
        [1e6, 2.0, f64::NAN, 0.0, 1.0, -1.0, 0.125, 4.0],
        [f64::INFINITY, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        [-2.5e-8, 1e300, -1e300, 3.0, 0.3, 0.7, 1.1, 9.0],
    ] {
        let input = rfx_ir::Array::new([8], rfx_ir::ArrayData::F64(x.to_vec())).expect("array");
        let (got, want) = common::run_with_interpreter(&compiled, lir, &[input]);
        for (g, w) in got.iter().zip(&want) {
            for i in 0..w.data().len() {
                let (a, b) = (g.get(i).expect("got").to_f64(), w.get(i).expect("want").to_f64());
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "element {i}: {a} against {b} for {x:?}"
                );
            }
        }
    }
}

#[test]
fn a_one_function_programs_vector_spill_slots_sit_on_16_bytes() {
    let lir = rfx_ir::lir::parse(&program(true)).expect("LIR text");
    let (clif, asm) = rfx_codegen_cpu::dump_program(&lir, &CompileOptions::default())
        .expect("compile")
        .expect("one function");
    assert!(
        clif.contains("explicit_slot 8"),
        "no 8-byte slot (the sincos cosine):\n{clif}"
    );
    assert_aligned(&asm);
    assert_interpreter_bits(&lir);
}

#[test]
fn a_kernel_functions_vector_spill_slots_sit_on_16_bytes() {
    let lir = rfx_ir::lir::parse(&program(false)).expect("LIR text");
    let dumps = rfx_codegen_cpu::dump(&lir).expect("compile");
    let [(_, clif, asm)] = dumps.as_slice() else {
        panic!("{} functions", dumps.len());
    };
    assert!(
        clif.contains("explicit_slot 8"),
        "no 8-byte slot (the sincos cosine):\n{clif}"
    );
    assert_aligned(asm);
    assert_interpreter_bits(&lir);
}
