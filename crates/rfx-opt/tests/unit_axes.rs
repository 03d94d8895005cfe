//! Roots whose iteration spaces differ only by axes of one (`[n]` beside `[n, 1]`, as `vmap`
//! makes them) share a loop nest: both have the same points in the same row-major order, so
//! one kernel computes each at its own points and writes each buffer whole. Every program is
//! checked bit for bit against the reference interpreter on the unoptimised kernel.

use rfx_ir::Array;
use rfx_ir::hir::parse;
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::mir::{BufKind, MirProgram};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_opt::{OptConfig, optimize};

/// `text` optimised with saturation on and off, each checked against the interpreter for a few
/// random inputs; returns both programs (saturated first).
fn fused(text: &str) -> [MirProgram; 2] {
    let kernel = parse(text).expect("parse");
    [true, false].map(|saturate| {
        let config = OptConfig {
            saturate,
            ..OptConfig::default()
        };
        let (program, _) = optimize(&kernel, &config).expect("optimize");
        for seed in 0..3 {
            let inputs = random_inputs(&mut TestRng::new(seed), &kernel, 0.1);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let expected = run_hir(&kernel, &views, Mode::Native).expect("run_hir");
            let got = run_mir(&program, &views, Mode::Native).expect("run_mir");
            assert_eq!(expected.len(), got.len());
            for (e, g) in expected.iter().zip(&got) {
                assert!(
                    same_values(e, g),
                    "seed {seed}:\nexpected {e:?}\ngot {g:?}\n{program}"
                );
            }
        }
        program
    })
}

fn temps(program: &MirProgram) -> usize {
    program
        .buffers()
        .iter()
        .filter(|b| b.kind == BufKind::Temp)
        .count()
}

#[test]
fn outputs_alternating_between_a_unit_axis_and_none_share_one_loop_nest() {
    // Each output reads the one before through a reshape that adds or drops an axis of one:
    // four loop nests, each reading the last one's buffer, when only equal iteration spaces
    // shared one.
    let text = "
kernel alternating {
  %x = input x : f64[5]
  %y = input y : f64[5,1]
  %s = sin %x : f64[5]
  %s2 = reshape %s : f64[5,1]
  %a = mul %s2, %y : f64[5,1]
  %a1 = reshape %a : f64[5]
  %b = add %a1, %s : f64[5]
  %b2 = reshape %b : f64[1,5]
  %c = exp %b2 : f64[1,5]
  output s = %s
  output a = %a
  output b = %b
  output c = %c
}";
    for program in fused(text) {
        assert_eq!(program.kernels().len(), 1, "{program}");
        assert_eq!(temps(&program), 0, "{program}");
    }
}

#[test]
fn unit_axes_anywhere_in_the_shape_share_a_loop_nest() {
    let text = "
kernel middle {
  %x = input x : f64[2,3]
  %w = input w : f64[3]
  %s = sin %x : f64[2,3]
  %m = reshape %s : f64[2,1,3]
  %t = mul %m, %w : f64[2,1,3]
  %u = reshape %t : f64[1,2,3]
  %v = cos %u : f64[1,2,3]
  %v2 = reshape %v : f64[2,3]
  %z = add %v2, %s : f64[2,3]
  output s = %s
  output t = %t
  output v = %v
  output z = %z
}";
    for program in fused(text) {
        assert_eq!(program.kernels().len(), 1, "{program}");
    }
}

#[test]
fn a_reduction_fixes_the_iteration_space_of_the_loop_nest_it_joins() {
    // The elementwise output comes first and opens a loop nest over `[4,1,3]`; the reduction,
    // whose axes are those of its operand `[4,3]`, joins it and the nest runs over `[4,3]`.
    let text = "
kernel reduce_joins {
  %x = input x : f64[4,3]
  %y = input y : f64[4,1,3]
  %e = exp %x : f64[4,3]
  %e3 = reshape %e : f64[4,1,3]
  %p = mul %e3, %y : f64[4,1,3]
  %r = sum %e axes [1] : f64[4]
  output p = %p
  output r = %r
}";
    for program in fused(text) {
        assert_eq!(program.kernels().len(), 1, "{program}");
        assert_eq!(program.kernels()[0].domain.dims(), &[4, 3], "{program}");
    }
    // The reduction first: the elementwise output joins its loop nest.
    let text = "
kernel reduce_first {
  %x = input x : f64[4,3]
  %y = input y : f64[4,1,3]
  %e = exp %x : f64[4,3]
  %r = sum %e axes [1] : f64[4]
  %e3 = reshape %e : f64[4,1,3]
  %p = mul %e3, %y : f64[4,1,3]
  output r = %r
  output p = %p
}";
    for program in fused(text) {
        assert_eq!(program.kernels().len(), 1, "{program}");
        assert_eq!(program.kernels()[0].domain.dims(), &[4, 3], "{program}");
    }
}

#[test]
fn two_reductions_over_spaces_differing_by_unit_axes_keep_their_own_loop_nests() {
    // Each reduction's axes are those of its own operand, so neither runs over the other's
    // space: two loop nests.
    let text = "
kernel two_reductions {
  %x = input x : f64[4,3]
  %e = exp %x : f64[4,3]
  %r = sum %e axes [1] : f64[4]
  %e3 = reshape %e : f64[4,1,3]
  %q = sum %e3 axes [2] : f64[4,1]
  output r = %r
  output q = %q
}";
    for program in fused(text) {
        assert_eq!(program.kernels().len(), 2, "{program}");
    }
}

#[test]
fn a_value_read_at_other_points_still_waits_for_its_loop_nest() {
    // The transpose reads `a` through a buffer (at the same points here, but a transpose is a
    // strided read of a complete buffer): `a` is stored by an earlier loop nest.
    let text = "
kernel transposed {
  %x = input x : f64[4,1]
  %a = sin %x : f64[4,1]
  %t = transpose %a perm [1,0] : f64[1,4]
  %b = mul %t, %t : f64[1,4]
  output a = %a
  output b = %b
}";
    for program in fused(text) {
        assert_eq!(program.kernels().len(), 2, "{program}");
    }
}
