//! Kernels with transcendental ops among other ops, checked one op at a time as rfx-check's
//! oracle checks a backend (its probing is private to it; this is the same construction): the
//! exported program computes the kernel plus every transcendental node's value and operands as
//! extra outputs (`instrumented`); each value must lie within the bound of the `f64` oracle at
//! the exported code's own operands, and every other output must have the bits of the HIR
//! interpreter running the kernel with the transcendental nodes replaced by the exported code's
//! values (`cut`). Outputs a float reduction feeds (whose rounding follows the lowered
//! program's reduction lanes, which the HIR interpreter does not know) must have the bits of
//! the LIR interpreter running the lowered `cut` with the exported program's lanes; where no
//! kernel of the exported program has the same loop nest to take them from, they are left out
//! and counted.

use std::collections::BTreeMap;

use rfx_ir::hir::{self, Kernel, Node, Op, Output, ValueId};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::same_values;
use rfx_ir::{Array, ArrayView, DType, Scalar, TensorType};
use rfx_lower::{LowerConfig, Transcendental, lower, order_inputs, ulps};
use rfx_opt::{OptConfig, optimize};

/// A kernel prepared for [`check_probed`].
pub(crate) struct Probed {
    /// The kernel plus the outputs `__t{k}` (transcendental node `k`) and `__a{k}_{j}` (its
    /// operand `j`, broadcast to the node's shape).
    pub(crate) instrumented: Kernel,
    /// The kernel with transcendental node `k` replaced by an input `__t{k}`; its outputs are
    /// the kernel's, then the `__a{k}_{j}`.
    cut: Kernel,
    /// Per transcendental node: the op and its dtype.
    ops: Vec<(Transcendental, DType)>,
    /// Outputs of `cut` that a float reduction feeds.
    after_float_reduction: Vec<String>,
}

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

fn transcendental_of(op: &Op) -> Option<Transcendental> {
    match op {
        Op::Unary(u) => Transcendental::unary(*u),
        Op::Binary(b) => Transcendental::binary(*b),
        _ => None,
    }
}

/// Whether `kernel` holds a transcendental op.
pub(crate) fn has_transcendental(kernel: &Kernel) -> bool {
    kernel
        .nodes()
        .iter()
        .any(|node| transcendental_of(&node.op).is_some())
}

/// `kernel` prepared for [`check_probed`]; `None` when the extra names clash or a kernel does
/// not verify.
pub(crate) fn probe(kernel: &Kernel) -> Option<Probed> {
    let nodes = kernel.nodes();
    let mut after = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let reduces = matches!(node.op, Op::Reduce { .. }) && node.ty.dtype.is_float();
        after[i] = reduces || node.args.iter().any(|a| after[a.index()]);
    }
    let mut instrumented_nodes = nodes.to_vec();
    let mut cut_nodes = nodes.to_vec();
    let mut instrumented_outputs = kernel.outputs().to_vec();
    let mut cut_outputs = kernel.outputs().to_vec();
    let mut after_float_reduction: Vec<String> = kernel
        .outputs()
        .iter()
        .filter(|o| after[o.value.index()])
        .map(|o| o.name.clone())
        .collect();
    let mut ops = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let Some(op) = transcendental_of(&node.op) else {
            continue;
        };
        let k = ops.len();
        ops.push((op, node.ty.dtype));
        let t_name = format!("__t{k}");
        instrumented_outputs.push(Output {
            name: t_name.clone(),
            value: ValueId::new(index),
        });
        cut_nodes[index] = Node {
            op: Op::Input { name: t_name },
            args: Vec::new(),
            ty: node.ty.clone(),
        };
        for (j, arg) in node.args.iter().enumerate() {
            let arg_ty = &nodes[arg.index()].ty;
            let name = format!("__a{k}_{j}");
            let mut value = *arg;
            if arg_ty.shape != node.ty.shape {
                let broadcast = Node {
                    op: Op::BroadcastTo,
                    args: vec![*arg],
                    ty: TensorType::new(arg_ty.dtype, node.ty.shape.dims().to_vec()),
                };
                value = ValueId::new(instrumented_nodes.len());
                instrumented_nodes.push(broadcast.clone());
                cut_nodes.push(broadcast);
            }
            instrumented_outputs.push(Output {
                name: name.clone(),
                value,
            });
            cut_outputs.push(Output {
                name: name.clone(),
                value,
            });
            if after[arg.index()] {
                after_float_reduction.push(name);
            }
        }
    }
    let instrumented = Kernel::from_parts(kernel.name(), instrumented_nodes, instrumented_outputs);
    let cut = Kernel::from_parts(kernel.name(), cut_nodes, cut_outputs);
    hir::verify(&instrumented).ok()?;
    hir::verify(&cut).ok()?;
    Some(Probed {
        instrumented,
        cut,
        ops,
        after_float_reduction,
    })
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
    for (k, &(op, dtype)) in probed.ops.iter().enumerate() {
        let values = output(&format!("__t{k}"))?;
        let operands = (0..op.arity())
            .map(|j| output(&format!("__a{k}_{j}")))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..values.data().len() {
            let args: Vec<f64> = operands
                .iter()
                .map(|a| a.get(i).map_or(f64::NAN, Scalar::to_f64))
                .collect();
            let value = values.get(i).map_or(f64::NAN, Scalar::to_f64);
            let want = op.oracle(&args);
            let d = ulps(value, want, dtype);
            if d > bound {
                return Err(format!(
                    "{}({args:?}) ({dtype}, node __t{k}, element {i}) = {value:e}, oracle {want:e}: {d} ULP > {bound}",
                    op.name()
                ));
            }
            count.values += 1;
        }
    }
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
    let mut lanes = BTreeMap::new();
    for k in program.kernels().iter().filter(|k| k.reduce_dims > 0) {
        let key = (k.dims.clone(), k.reduce_dims);
        if *lanes.entry(key).or_insert(k.schedule.reduce_lanes) != k.schedule.reduce_lanes {
            return None;
        }
    }
    let kernels = cut
        .kernels()
        .iter()
        .cloned()
        .map(|mut k| {
            if k.reduce_dims > 0 {
                k.schedule.reduce_lanes = *lanes.get(&(k.dims.clone(), k.reduce_dims))?;
            }
            Some(k)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(LirProgram::from_parts(
        cut.name(),
        cut.buffers().to_vec(),
        cut.arena_bytes(),
        cut.arena_align(),
        kernels,
    ))
}
