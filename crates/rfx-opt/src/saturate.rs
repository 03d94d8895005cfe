//! Equality saturation: HIR → e-graph → bounded rewriting → extraction → HIR.
//!
//! Extraction picks the cheapest member of every e-class with a per-element cost model and
//! rebuilds the kernel as a DAG with one node per e-class, so common subexpressions are shared
//! (CSE by hash-consing) and everything unreachable from the outputs disappears (DCE). Inputs are
//! always kept, in order: they are the kernel's signature.

use std::collections::{BTreeMap, HashMap, HashSet};

use egg::{CostFunction, Extractor, Id, Runner, StopReason as EggStop};
use rfx_ir::hir::{Builder, Kernel, Op, ValueId};
use rfx_ir::{DType, TensorType, UnaryOp};

use crate::config::OptConfig;
use crate::error::OptError;
use crate::lang::{Head, Node, OrdScalar, RfxAnalysis, RfxGraph};
use crate::report::StopReason;
use crate::rules;

/// What saturation did.
pub(crate) struct Saturation {
    pub(crate) kernel: Kernel,
    pub(crate) rules_fired: BTreeMap<String, usize>,
    pub(crate) egraph_nodes: usize,
    pub(crate) egraph_classes: usize,
    pub(crate) iterations: usize,
    pub(crate) stop_reason: StopReason,
}

/// Builds the e-graph of `kernel`; returns it with the e-class of every HIR value.
pub(crate) fn to_egraph(kernel: &Kernel, config: &OptConfig) -> Result<(RfxGraph, Vec<Id>), OptError> {
    let input_types: Vec<TensorType> = kernel.inputs().map(|(_, _, ty)| ty.clone()).collect();
    let analysis = RfxAnalysis {
        input_types,
        max_fold_elems: config.max_fold_elems,
    };
    let mut graph = RfxGraph::new(analysis);
    let mut ids: Vec<Id> = Vec::with_capacity(kernel.nodes().len());
    let mut input_index = 0u32;
    for (index, node) in kernel.nodes().iter().enumerate() {
        let head = match &node.op {
            Op::Input { .. } => {
                input_index += 1;
                Head::Input(input_index - 1)
            }
            Op::Const(value) => Head::Const(OrdScalar(*value), node.ty.shape.clone()),
            // `optimize` splits a kernel at its loops first: a stage holds none.
            Op::Loop(_) | Op::LoopOutput { .. } => return Err(OptError::Loop(ValueId::new(index))),
            Op::Unary(op) => Head::Unary(*op),
            Op::Binary(op) => Head::Binary(*op),
            Op::Compare(op) => Head::Compare(*op),
            Op::Select => Head::Select,
            Op::Clamp => Head::Clamp,
            Op::Cast => Head::Cast(node.ty.dtype),
            Op::BroadcastTo => Head::BroadcastTo(node.ty.shape.clone()),
            Op::Reshape => Head::Reshape(node.ty.shape.clone()),
            Op::Iota { axis } => Head::Iota(*axis, node.ty.dtype, node.ty.shape.clone()),
            Op::Literal(values) => Head::Literal(
                values.iter().map(|&v| OrdScalar(v)).collect(),
                node.ty.dtype,
                node.ty.shape.clone(),
            ),
            Op::Transpose { perm } => Head::Transpose(perm.clone()),
            Op::Slice { starts } => Head::Slice(starts.clone(), node.ty.shape.clone()),
            Op::Pad { low } => Head::Pad(low.clone(), node.ty.shape.clone()),
            Op::Gather { axis } => Head::Gather(*axis),
            Op::SetRow => Head::SetRow,
            Op::Reduce { op, axes, keepdims } => Head::Reduce(*op, axes.clone(), *keepdims),
            Op::Scan { op, axis, reverse } => Head::Scan(*op, *axis, *reverse),
        };
        let children = node
            .args
            .iter()
            .map(|a| {
                ids.get(a.index())
                    .copied()
                    .ok_or(OptError::InvalidValue(ValueId::new(index)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let id = graph.add(Node::new(head, children));
        if graph[id].data.ty.as_ref() != Some(&node.ty) {
            return Err(OptError::InvalidValue(ValueId::new(index)));
        }
        ids.push(id);
    }
    with_egg_clock(|| graph.rebuild());
    Ok((graph, ids))
}

/// Runs `f`, which runs egg, with egg's clock (`quanta`). Under Miri that is a mock clock whose
/// time stands still: the real one reads the CPU's time-stamp counter after a `cpuid` in inline
/// assembly, which Miri cannot execute. There only the iteration and node limits apply.
pub(crate) fn with_egg_clock<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(miri)]
    {
        let (clock, _) = quanta::Clock::mock();
        quanta::with_clock(&clock, f)
    }
    #[cfg(not(miri))]
    {
        f()
    }
}

/// Runs the enabled rules on `kernel` within the limits of `config` and extracts the cheapest
/// equivalent kernel.
pub(crate) fn saturate(kernel: &Kernel, config: &OptConfig) -> Result<Saturation, OptError> {
    let (graph, ids) = to_egraph(kernel, config)?;
    let rules = rules::rules(config.refining, config.fast_math);
    let runner = with_egg_clock(|| {
        Runner::default()
            .with_egraph(graph)
            .with_iter_limit(config.iter_limit)
            .with_node_limit(config.node_limit)
            .with_time_limit(config.time_limit)
            .run(rules)
    });
    let stop_reason = match &runner.stop_reason {
        Some(EggStop::Saturated) | None => StopReason::Saturated,
        Some(EggStop::IterationLimit(n)) => StopReason::IterationLimit(*n),
        Some(EggStop::NodeLimit(n)) => StopReason::NodeLimit(*n),
        Some(EggStop::TimeLimit(_)) => StopReason::TimeLimit,
        Some(EggStop::Other(_)) => StopReason::Saturated,
    };
    let mut rules_fired = BTreeMap::new();
    for iteration in &runner.iterations {
        for (name, count) in &iteration.applied {
            *rules_fired.entry(name.to_string()).or_insert(0) += count;
        }
    }
    let graph = &runner.egraph;
    let kernel = extract_graph(kernel, graph, &ids)?;
    Ok(Saturation {
        kernel,
        rules_fired,
        egraph_nodes: graph.total_number_of_nodes(),
        egraph_classes: graph.number_of_classes(),
        iterations: runner.iterations.len(),
        stop_reason,
    })
}

/// Per-element cost of an op; transcendentals are expensive, data movement is cheap.
pub(crate) fn op_cost(head: &Head, dtype: DType) -> f64 {
    let wide = if dtype == DType::F64 { 2.0 } else { 1.0 };
    match head {
        Head::Input(_) | Head::Const(..) => 0.0,
        // A load: dearer than the splat a literal of equal values folds to.
        Head::Literal(..) => 0.25,
        Head::BroadcastTo(_) | Head::Reshape(_) | Head::Transpose(_) | Head::Slice(..) => 0.25,
        // A masked, clamped read per point.
        Head::Pad(..) => 3.0,
        // A clamped index and a read by it.
        Head::Gather(_) => 3.0,
        // A select by row per point.
        Head::SetRow => 2.0,
        Head::Iota(..) => 1.0,
        Head::Cast(_) | Head::Select | Head::Compare(_) => 1.0,
        Head::Clamp => 2.0,
        Head::Binary(op) => match op {
            rfx_ir::BinaryOp::Div => 4.0 * wide,
            rfx_ir::BinaryOp::Fmod => 12.0 * wide,
            rfx_ir::BinaryOp::Pow => 40.0 * wide,
            rfx_ir::BinaryOp::Atan2 => 30.0 * wide,
            _ => 1.0,
        },
        Head::Unary(op) => match op {
            UnaryOp::Sqrt | UnaryOp::Recip | UnaryOp::Rsqrt => 4.0 * wide,
            op if op.is_transcendental() => 20.0 * wide,
            _ => 1.0,
        },
        Head::Reduce(..) | Head::Scan(..) => 1.0,
    }
}

struct PerElementCost<'a> {
    graph: &'a RfxGraph,
}

impl CostFunction<Node> for PerElementCost<'_> {
    type Cost = f64;

    fn cost<C>(&mut self, enode: &Node, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        // The node's own cost scales with the elements it computes: an op on a broadcast
        // scalar is cheaper than the same op on the broadcast result.
        let (numel, dtype) = match &enode.head {
            Head::Reduce(..) => enode
                .children
                .first()
                .and_then(|&c| self.graph[c].data.ty.as_ref())
                .map_or((1, DType::F32), |t| (t.shape.numel(), t.dtype)),
            _ => enode
                .children
                .first()
                .and_then(|&c| self.graph[c].data.ty.as_ref())
                .map_or((1, DType::F32), |t| (t.shape.numel(), t.dtype)),
        };
        let own = op_cost(&enode.head, dtype) * numel.max(1) as f64;
        enode.children.iter().fold(own, |acc, &c| acc + costs(c))
    }
}

/// Rebuilds a kernel from the cheapest node of each e-class reachable from the outputs.
pub(crate) fn extract_graph(original: &Kernel, graph: &RfxGraph, ids: &[Id]) -> Result<Kernel, OptError> {
    let extractor = Extractor::new(graph, PerElementCost { graph });
    let mut b = Builder::new(original.name());
    let mut built: HashMap<Id, ValueId> = HashMap::new();
    let mut inputs: Vec<ValueId> = Vec::new();
    for (_, name, ty) in original.inputs() {
        inputs.push(b.input(name, ty.clone()).map_err(OptError::Rebuild)?);
    }
    for output in original.outputs() {
        let root = ids
            .get(output.value.index())
            .copied()
            .ok_or(OptError::InvalidValue(output.value))?;
        let value = build_class(graph, &extractor, root, &mut b, &mut built, &inputs)?;
        b.output(output.name.clone(), value).map_err(OptError::Rebuild)?;
    }
    b.finish().map_err(OptError::Rebuild)
}

/// Builds the HIR for e-class `root` (and, first, its operands) without recursion.
fn build_class(
    graph: &RfxGraph,
    extractor: &Extractor<'_, PerElementCost<'_>, Node, RfxAnalysis>,
    root: Id,
    b: &mut Builder,
    built: &mut HashMap<Id, ValueId>,
    inputs: &[ValueId],
) -> Result<ValueId, OptError> {
    let mut stack = vec![(graph.find(root), false)];
    let mut expanded: HashSet<Id> = HashSet::new();
    while let Some((class, children_done)) = stack.pop() {
        if built.contains_key(&class) {
            continue;
        }
        let node = extractor.find_best_node(class);
        if !children_done {
            // An expanded class met again before it is built is its own operand.
            if !expanded.insert(class) {
                return Err(OptError::Cycle);
            }
            stack.push((class, true));
            for &child in node.children.iter().rev() {
                let child = graph.find(child);
                if !built.contains_key(&child) {
                    stack.push((child, false));
                }
            }
            continue;
        }
        let args = node
            .children
            .iter()
            .map(|&c| built.get(&graph.find(c)).copied().ok_or(OptError::Cycle))
            .collect::<Result<Vec<_>, _>>()?;
        let value = match &node.head {
            Head::Input(i) => inputs.get(*i as usize).copied().ok_or(OptError::Cycle)?,
            Head::Const(value, shape) => b.constant(value.0, shape.clone()),
            Head::Cast(dtype) => b.cast(first(&args)?, *dtype).map_err(OptError::Rebuild)?,
            Head::BroadcastTo(shape) => b
                .broadcast_to(first(&args)?, shape.clone())
                .map_err(OptError::Rebuild)?,
            Head::Reshape(shape) => b
                .reshape(first(&args)?, shape.clone())
                .map_err(OptError::Rebuild)?,
            Head::Slice(starts, shape) => b
                .slice(first(&args)?, starts, shape.clone())
                .map_err(OptError::Rebuild)?,
            Head::Pad(low, shape) => b
                .pad(first(&args)?, low, shape.clone())
                .map_err(OptError::Rebuild)?,
            Head::Iota(axis, dtype, shape) => {
                b.iota(*dtype, shape.clone(), *axis).map_err(OptError::Rebuild)?
            }
            Head::Literal(values, dtype, shape) => b
                .literal_values(
                    TensorType::new(*dtype, shape.clone()),
                    values.iter().map(|v| v.0).collect(),
                )
                .map_err(OptError::Rebuild)?,
            _ => b.op(node.to_op(), &args).map_err(OptError::Rebuild)?,
        };
        built.insert(class, value);
    }
    built.get(&graph.find(root)).copied().ok_or(OptError::Cycle)
}

fn first(args: &[ValueId]) -> Result<ValueId, OptError> {
    args.first().copied().ok_or(OptError::Cycle)
}
