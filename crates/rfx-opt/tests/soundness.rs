//! Rewrite and fusion soundness on known cases: the optimised program must give the kernel's
//! bits (any NaN matching any NaN) with NaN/±Inf/−0/subnormals among the inputs. The same on
//! 10,000 random kernels per run is `rfx-check`'s `tests/soundness.rs`, beside the generator.

use rfx_ir::Array;
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_opt::{OptConfig, optimize, sink_transposes};

/// `rfx fuzz` seed 5644430 (after saturation): `%1` is wanted transposed by `[0,2,1]` both by a
/// sunk `ge` (broadcast to `[2,1,2]` first) and by a transpose node (as it is). A cache of one
/// view per operand and perm would hand the transpose the broadcast view, and the rebuilt kernel
/// would not type-check; views are cached by target shape too.
#[test]
fn one_operand_transposed_at_two_shapes_gets_two_views() {
    let kernel = rfx_ir::hir::parse(
        "kernel fuzz {\n %0 = input in0 : f32[1,1,2]\n %1 = transpose %0 perm [2,1,0] : f32[2,1,1]\n \
         %2 = ge %1, %0 : bool[2,1,2]\n %3 = transpose %1 perm [0,2,1] : f32[2,1,1]\n \
         %4 = select %2, %3, %0 : f32[2,1,2]\n %5 = transpose %4 perm [0,2,1] : f32[2,2,1]\n \
         output out1 = %5\n}",
    )
    .expect("kernel");
    let sunk = sink_transposes(&kernel).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = TestRng::new(5644430);
    for _ in 0..20 {
        let inputs = random_inputs(&mut rng, &kernel, 0.3);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).expect("valid kernel");
        let after = run_hir(&sunk, &views, Mode::Native).expect("valid sunk kernel");
        assert!(same_values(&expected[0], &after[0]), "{kernel}\n{sunk}");
    }
}

/// Lookups in every kind of table fusion reads: an input, a transposed, sliced or broadcast
/// input, a stored computed table, an `iota` (stored), a splat; by `i32`, `f32` and `f64`
/// indices spread below, inside and past the table (and NaN and infinities); inside a pad's
/// frame, a slice's frame and a reduction. The optimised program must give the interpreter's
/// bits.
#[test]
fn lookups_through_every_table_layout_keep_the_bits() {
    use rfx_ir::DType;
    let tables = [
        // (table statements producing `%t`, its type)
        ("%t = input tab", "f64[5, 4]"),
        (
            "%r = input tab : f64[4, 5]\n  %t = transpose %r perm [1, 0]",
            "f64[5, 4]",
        ),
        (
            "%r = input tab : f64[7, 6]\n  %t = slice %r starts [1, 2]",
            "f64[5, 4]",
        ),
        ("%r = input tab : f64[4]\n  %t = broadcast_to %r", "f64[5, 4]"),
        ("%r = input tab : f64[5, 4]\n  %t = sin %r", "f64[5, 4]"),
        ("%r = input tab : f64[5, 4]\n  %t = iota axis 0", "f64[5, 4]"),
        ("%r = input tab : f64[5, 4]\n  %t = const 1.5", "f64[5, 4]"),
    ];
    let mut rng = TestRng::new(0x6a7e_5eed);
    let mut checked = 0;
    for (t, (table, table_ty)) in tables.iter().enumerate() {
        for index_dtype in [DType::I32, DType::F32, DType::F64] {
            for axis in 0..2 {
                let index_ty = if axis == 0 { "[3, 4]" } else { "[5, 7]" };
                let uses = [
                    // Plain, in a pad's frame, in a slice's frame of a computed lookup, reduced.
                    format!("%g = gather %t, %ix axis {axis} : f64{index_ty}\n  output out = %g"),
                    format!(
                        "%g = gather %t, %ix axis {axis} : f64{index_ty}\n  %p = pad %g low [1, 2] : f64[9, 10]\n  output out = %p"
                    ),
                    format!(
                        "%g = gather %t, %ix axis {axis} : f64{index_ty}\n  %e = exp %g : f64{index_ty}\n  \
                         %s = slice %e starts [1, 1] : f64[2, 3]\n  output out = %s"
                    ),
                    format!(
                        "%g = gather %t, %ix axis {axis} : f64{index_ty}\n  %s = sum %g axes [1] : f64[{}]\n  output out = %s",
                        if axis == 0 { 3 } else { 5 }
                    ),
                ];
                for body in &uses {
                    // The index: an input scaled and shifted in the kernel, so that it spreads
                    // over the table and past both ends.
                    let (scale, shift) = match index_dtype {
                        DType::I32 => ("const 1 : i32[]", "const 2 : i32[]"),
                        DType::F32 => ("const 1.25 : f32[]", "const 2.5 : f32[]"),
                        _ => ("const 1.25 : f64[]", "const 2.5 : f64[]"),
                    };
                    let text = format!(
                        "kernel lookup {{\n  {table} : {table_ty}\n  %at = input at : {index_dtype}{index_ty}\n  \
                         %k = {scale}\n  %c = {shift}\n  %m = mul %at, %k : {index_dtype}{index_ty}\n  \
                         %ix = add %m, %c : {index_dtype}{index_ty}\n  {body}\n}}\n"
                    );
                    let kernel = rfx_ir::hir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                    for config in [OptConfig::exact(), OptConfig::default()] {
                        let (program, _) =
                            optimize(&kernel, &config).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
                        for round in 0..3 {
                            let inputs = random_inputs(&mut rng, &kernel, if round == 0 { 0.0 } else { 0.3 });
                            let views: Vec<_> = inputs.iter().map(Array::view).collect();
                            let expected = run_hir(&kernel, &views, Mode::Native).expect("valid kernel");
                            let got = run_mir(&program, &views, Mode::Native)
                                .unwrap_or_else(|e| panic!("{e}\n{program}"));
                            assert!(
                                same_values(&expected[0], &got[0]),
                                "table {t}, {index_dtype} index, axis {axis}\n{kernel}\n{program}\nexpected {:?}\ngot {:?}",
                                expected[0],
                                got[0]
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 7 * 3 * 2 * 4 * 2 * 3);
}
