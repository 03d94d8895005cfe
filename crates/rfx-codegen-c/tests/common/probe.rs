//! Kernels with transcendental ops among other ops, checked one op at a time as rfx-check's
//! oracle checks a backend, with its probing ([`rfx_check::probe`]): the exported program
//! computes the kernel plus every transcendental node's value and operands as extra outputs
//! (`instrumented`); each value must lie within the bound of the `f64` oracle at
//! the exported code's own operands, and every other output must have the bits of the HIR
//! interpreter running the kernel with the transcendental nodes replaced by the exported code's
//! values (`cut`). Outputs a float reduction feeds (whose rounding follows the lowered
//! program's reduction lanes, which the HIR interpreter does not know) must have the bits of
//! the LIR interpreter running the lowered `cut` with the exported program's lanes; where no
//! kernel of the exported program has the same loop nest to take them from, they are left out
//! and counted.

use rfx_check::probe::check_values;
#[allow(
    unused_imports,
    reason = "each test binary uses a different part of the shared module"
)]
pub(crate) use rfx_check::probe::{Probed, has_transcendental, probe};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::same_values;
use rfx_ir::{Array, ArrayView};
use rfx_lower::{LowerConfig, lower, order_inputs};
use rfx_opt::{OptConfig, optimize};

/// What [`check_probed`] compared.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ProbedCount {
    /// Transcendental values checked against the bound.
    pub(crate) values: usize,
    /// Outputs and operands compared bit for bit.
    pub(crate) exact: usize,
    /// Of those, outputs and operands a float reduction feeds (compared with the LIR
    /// interpreter in the exported program's lanes).
    pub(crate) after_reduction: usize,
    /// Outputs and operands a float reduction feeds, left out because no kernel of the
    /// exported program had the loop nest to take the lanes from.
    pub(crate) left_out: usize,
}

/// Checks the outputs `got` (by name) of `program`, the exported `probed.instrumented`, given
/// the kernel's `inputs` (by name): every transcendental value within `bound` ULP of the `f64`
/// oracle at the program's own operands, everything else the interpreters' bits.
pub(crate) fn check_probed(
    probed: &Probed,
    program: &LirProgram,
    inputs: &[(&str, &Array)],
    got: &[(&str, &Array)],
    bound: u64,
) -> Result<ProbedCount, String> {
    let output = |name: &str| {
        got.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| *a)
            .ok_or_else(|| format!("output `{name}` missing"))
    };
    let mut count = ProbedCount::default();
    let mut cut_inputs: Vec<(&str, ArrayView<'_>)> = Vec::new();
    for (_, name, _) in probed.cut.inputs() {
        let array = match inputs.iter().find(|(n, _)| *n == name) {
            Some((_, a)) => *a,
            None => output(name)?,
        };
        cut_inputs.push((name, array.view()));
    }
    let views: Vec<ArrayView<'_>> = cut_inputs.iter().map(|(_, v)| *v).collect();
    let expected = run_hir(&probed.cut, &views, Mode::Native).map_err(|e| format!("cut kernel: {e}"))?;
    let mut reduced = Vec::new();
    for (o, want) in probed.cut.outputs().iter().zip(&expected) {
        if probed.after_float_reduction.contains(&o.name) {
            reduced.push(o.name.as_str());
            continue;
        }
        compare(&o.name, want, output(&o.name)?, "the HIR interpreter")?;
        count.exact += 1;
    }
    if !reduced.is_empty() {
        match lowered_cut_in_lanes(probed, program) {
            Some(cut_lir) => {
                let ordered = order_inputs(&cut_lir, &cut_inputs).map_err(|e| format!("cut inputs: {e}"))?;
                let expected = run_lir(&cut_lir, &ordered, Mode::Native)
                    .map_err(|e| format!("lowered cut kernel: {e}"))?;
                for ((_, name, _), want) in cut_lir.outputs().zip(&expected) {
                    if reduced.contains(&name) {
                        compare(
                            name,
                            want,
                            output(name)?,
                            "the LIR interpreter in the program's lanes",
                        )?;
                        count.exact += 1;
                        count.after_reduction += 1;
                    }
                }
            }
            None => count.left_out += reduced.len(),
        }
    }
    count.values = check_values(probed, output, |_, _, _| Some(bound))?.bounded;
    Ok(count)
}

fn compare(name: &str, want: &Array, got: &Array, reference: &str) -> Result<(), String> {
    if same_values(want, got) {
        return Ok(());
    }
    Err(format!(
        "output `{name}`: {:?} instead of {:?} ({reference} given the exported transcendental values)",
        got.data(),
        want.data()
    ))
}

/// `probed.cut` optimized and lowered, with each reduction kernel in the reduction lanes of
/// `program`'s kernel of the same loop nest (the lanes fix a float reduction's rounding);
/// `None` where the cut does not lower or a loop nest has no such kernel, or two of them
/// differ in lanes.
fn lowered_cut_in_lanes(probed: &Probed, program: &LirProgram) -> Option<LirProgram> {
    let (mir, _) = optimize(&probed.cut, &OptConfig::default()).ok()?;
    let (cut, _) = lower(&mir, &LowerConfig::default()).ok()?;
    rfx_check::probe::with_lanes_of(program, &cut)
}
