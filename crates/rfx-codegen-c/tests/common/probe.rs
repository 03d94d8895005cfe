//! Kernels with transcendental ops among other ops, checked one op at a time as rfx-check's
//! oracle checks a backend (its probing is private to it; this is the same construction): the
//! exported program computes the kernel plus every transcendental node's value and operands as
//! extra outputs (`instrumented`); each value must lie within the bound of the `f64` oracle at
//! the exported code's own operands, and every other output must have the bits of the HIR
//! interpreter running the kernel with the transcendental nodes replaced by the exported code's
//! values (`cut`). Outputs a float reduction feeds are left out (their rounding follows the
//! lowered program's lanes, which the HIR interpreter does not know) and counted.

use rfx_ir::hir::{self, Kernel, Node, Op, Output, ValueId};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::testgen::same_values;
use rfx_ir::{Array, DType, Scalar, TensorType};
use rfx_lower::{Transcendental, ulps};

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
    /// Outputs and operands left out because a float reduction feeds them.
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

/// Checks the exported program's outputs `got` (by name) for `probed`, given the kernel's
/// `inputs` (by name): every transcendental value within `bound` ULP of the `f64` oracle at
/// the program's own operands, everything else the HIR interpreter's bits.
pub(crate) fn check_probed(
    probed: &Probed,
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
    let mut cut_inputs = Vec::new();
    for (_, name, _) in probed.cut.inputs() {
        let array = match inputs.iter().find(|(n, _)| *n == name) {
            Some((_, a)) => *a,
            None => output(name)?,
        };
        cut_inputs.push(array.view());
    }
    let expected = run_hir(&probed.cut, &cut_inputs, Mode::Native).map_err(|e| format!("cut kernel: {e}"))?;
    for (o, want) in probed.cut.outputs().iter().zip(&expected) {
        if probed.after_float_reduction.contains(&o.name) {
            count.left_out += 1;
            continue;
        }
        let got = output(&o.name)?;
        if !same_values(want, got) {
            return Err(format!(
                "output `{}`: {:?} instead of {:?} (the HIR interpreter given the exported transcendental values)",
                o.name,
                got.data(),
                want.data()
            ));
        }
        count.exact += 1;
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
