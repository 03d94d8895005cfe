//! Probing a kernel's transcendental ops, for checking them one op at a time: [`probe`] makes
//! the kernel that also outputs every transcendental node's value and operands (run by the
//! backend or exported program under test) and the kernel with those nodes cut out as inputs
//! (run by an interpreter on the values the backend computed), so that each transcendental
//! value is checked against a bound at its own operands and everything else bit for bit.
//! The oracle ([`crate::oracle`]) checks backends so; an exporter's tests can check the
//! programs it writes the same way.

use std::collections::BTreeMap;

use rfx_ir::hir::{self, Kernel, Node, Op, Output, ValueId};
use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, DType, Scalar, TensorType};
use rfx_lower::{Transcendental, ulps};

/// A kernel with transcendental ops prepared for the bound-aware comparison: the backend runs
/// `instrumented`, which also outputs each transcendental node's value and operands; the HIR
/// interpreter runs `cut`, where those values are inputs, so that everything but the
/// transcendental ops themselves is compared bit for bit.
#[derive(Clone, Debug)]
pub struct Probed {
    /// The kernel plus the outputs `__t{k}` (transcendental node `k`) and `__a{k}_{j}` (its
    /// operand `j`, broadcast to the node's shape).
    pub instrumented: Kernel,
    /// The kernel with transcendental node `k` replaced by an input `__t{k}`; its outputs are
    /// the kernel's, then the `__a{k}_{j}`.
    pub cut: Kernel,
    /// Per transcendental node: the op and its dtype.
    pub ops: Vec<(Transcendental, DType)>,
    /// Outputs of `cut` that a float reduction feeds: their rounding depends on the lane order,
    /// so they are compared with the LIR interpreter's (in the lanes of [`with_lanes_of`]),
    /// not the HIR's.
    pub after_float_reduction: Vec<String>,
}

/// The transcendental op `op` is, if it is one.
pub fn transcendental_of(op: &Op) -> Option<Transcendental> {
    match op {
        Op::Unary(u) => Transcendental::unary(*u),
        Op::Binary(b) => Transcendental::binary(*b),
        _ => None,
    }
}

/// Whether `kernel` holds a transcendental op (one [`probe`] would instrument).
pub fn has_transcendental(kernel: &Kernel) -> bool {
    kernel
        .nodes()
        .iter()
        .any(|node| transcendental_of(&node.op).is_some())
}

/// `kernel` prepared for the bound-aware comparison; `None` when the extra names clash or a
/// kernel does not verify.
pub fn probe(kernel: &Kernel) -> Option<Probed> {
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

/// `cut` (a [`Probed::cut`], lowered) with each reduction kernel's lanes set to those of the
/// kernel of `lir` (the program a backend ran) with the same dims and reduced dims, so that the
/// LIR interpreter rounds its reductions as the backend did: the probes' extra stores can
/// change lowering's choice between partial lanes and one accumulator. `None` when a reduction
/// of `cut` has no such kernel, or `lir` has two with different lanes.
pub fn with_lanes_of(lir: &LirProgram, cut: &LirProgram) -> Option<LirProgram> {
    let mut lanes = BTreeMap::new();
    for k in lir.kernels().iter().filter(|k| k.reduce_dims > 0) {
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
    Some(
        LirProgram::from_parts(
            cut.name(),
            cut.buffers().to_vec(),
            cut.arena_bytes(),
            cut.arena_align(),
            kernels,
        )
        .with_loops(cut.loops().to_vec()),
    )
}

/// What [`check_values`] compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValueCount {
    /// Transcendental values within their bound.
    pub bounded: usize,
    /// Values without a documented bound (not compared).
    pub unbounded: usize,
}

/// Every transcendental value of `probed` (the output `__t{k}` of [`Probed::instrumented`],
/// read by name through `output`) against the `f64` oracle at its own operands (the outputs
/// `__a{k}_{j}`): within the ULP bound `bound_of` gives for the op, dtype and operands, not
/// compared where it gives `None`. Returns the counts, or the first value beyond its bound or
/// output missing.
pub fn check_values<'a>(
    probed: &Probed,
    output: impl Fn(&str) -> Result<&'a Array, String>,
    bound_of: impl Fn(Transcendental, DType, &[f64]) -> Option<u64>,
) -> Result<ValueCount, String> {
    let mut count = ValueCount::default();
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
            let Some(bound) = bound_of(op, dtype, &args) else {
                count.unbounded += 1;
                continue;
            };
            count.bounded += 1;
            let value = values.get(i).map_or(f64::NAN, Scalar::to_f64);
            let want = op.oracle(&args);
            let d = ulps(value, want, dtype);
            if d > bound {
                let d = if d == u64::MAX {
                    "∞".to_string()
                } else {
                    d.to_string()
                };
                let args: Vec<String> = args.iter().map(|a| format!("{a:e}")).collect();
                return Err(format!(
                    "{}({}) ({dtype}, node __t{k}, element {i}) = {value:e}, oracle {want:e}: {d} ULP > {bound}",
                    op.name(),
                    args.join(", ")
                ));
            }
        }
    }
    Ok(count)
}
