//! Block folding through lowering: a `[n, 3, 3]` block built from nine values per point of
//! `[n]` is written out in the kernel that computes the values, with the HIR interpreter's
//! bits; a block consumer with arithmetic of its own keeps its kernel.

#[path = "common/mod.rs"]
mod common;

use common::lower_kernel;
use rfx_ir::hir;
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::testgen::{TestRng, random_array};
use rfx_ir::{Array, ArrayView};
use rfx_lower::{InterpBackend, execute_lowered};

/// Nine values per point of `[n]`, concatenated to `[n, 9]`, read as `[n, 3, 3]` blocks scaled
/// by `d`; `extra` adds lines before the outputs.
fn block_kernel(n: usize, extra: &str) -> hir::Kernel {
    let mut text = format!(
        "kernel block {{\n %a = input a : f64[{n}]\n %b = input b : f64[{n}]\n %d = input d : f64[{n}]\n"
    );
    let ops = [
        "mul %a, %b",
        "add %a, %b",
        "sub %a, %b",
        "mul %a, %a",
        "sin %a",
        "mul %b, %b",
        "sub %b, %a",
        "div %a, %b",
        "add %a, %a",
    ];
    for (i, op) in ops.iter().enumerate() {
        text += &format!(
            " %v{i} = {op} : f64[{n}]\n %r{i} = reshape %v{i} : f64[{n},1]\n %p{i} = pad %r{i} low [0,{i}] : f64[{n},9]\n"
        );
    }
    text += " %io = iota axis 0 : f64[9]\n";
    let mut prev = "%p0".to_string();
    for i in 1..9 {
        text += &format!(
            " %c{i} = const {i}.0 : f64[]\n %g{i} = ge %io, %c{i} : bool[9]\n %s{i} = select %g{i}, %p{i}, {prev} : f64[{n},9]\n"
        );
        prev = format!("%s{i}");
    }
    text += &format!(
        " %m = reshape {prev} : f64[{n},3,3]\n %dd = reshape %d : f64[{n},1,1]\n %j = mul %m, %dd : f64[{n},3,3]\n \
         %nj = neg %j : f64[{n},3,3]\n{extra} output s = %v4\n output j = %j\n output nj = %nj\n}}"
    );
    hir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn bits(a: &Array) -> Vec<u64> {
    a.as_slice::<f64>()
        .expect("f64")
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn same_as_the_interpreter(kernel: &hir::Kernel, lir: &rfx_ir::lir::LirProgram) {
    let mut rng = TestRng::new(0xb10c);
    let inputs: Vec<(String, Array)> = kernel
        .inputs()
        .map(|(_, name, ty)| (name.to_string(), random_array(&mut rng, ty, 0.5)))
        .collect();
    let views: Vec<ArrayView<'_>> = inputs.iter().map(|(_, a)| a.view()).collect();
    let expected = run_hir(kernel, &views, Mode::Native).expect("interp");
    let named: Vec<(&str, ArrayView<'_>)> = inputs.iter().map(|(n, a)| (n.as_str(), a.view())).collect();
    let got = execute_lowered(lir, &named, &InterpBackend).expect("lowered");
    assert_eq!(expected.len(), got.len());
    for (e, (name, g)) in expected.iter().zip(&got) {
        assert_eq!(bits(e), bits(g), "{name}\n{lir}");
    }
}

#[test]
fn a_block_per_point_is_written_out_in_the_kernel_of_its_values() {
    for n in [2, 5, 17] {
        let kernel = block_kernel(n, "");
        let lir = lower_kernel(&kernel);
        assert_eq!(lir.kernels().len(), 1, "{lir}");
        assert_eq!(lir.kernels()[0].dims, vec![n], "{lir}");
        same_as_the_interpreter(&kernel, &lir);
    }
}

#[test]
fn a_block_consumer_with_arithmetic_of_its_own_keeps_its_kernel() {
    let extra = " %i1 = iota axis 1 : f64[5,3,3]\n %i2 = iota axis 2 : f64[5,3,3]\n %eq = eq %i1, %i2 : bool[5,3,3]\n \
                 %one = const 1.0 : f64[]\n %zero = const -0.0 : f64[]\n %eye = select %eq, %one, %zero : f64[5,3,3]\n \
                 %k = mul %m, %i2 : f64[5,3,3]\n %e2 = add %k, %eye : f64[5,3,3]\n output e = %e2\n";
    let kernel = block_kernel(5, extra);
    let lir = lower_kernel(&kernel);
    assert_eq!(lir.kernels().len(), 2, "{lir}");
    same_as_the_interpreter(&kernel, &lir);
}
