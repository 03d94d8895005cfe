//! The HIR → HIR passes, each usable alone.

use rfx_ir::hir::{Builder, Kernel, Op, Output, ValueId, verify};
use rfx_ir::{BinaryOp, Scalar, Shape};

use crate::config::OptConfig;
use crate::error::OptError;
use crate::report::OptReport;
use crate::saturate::saturate;

/// The rebuilt value of each value of the kernel being rebuilt, by index (`None` for a value
/// not rebuilt yet, or not live).
pub(crate) type Rebuilt = [Option<ValueId>];

/// Rebuilds `kernel` through `map_node`, which gets the builder, the values rebuilt so far, the
/// node's value and the node, and its rebuilt operands, and returns the rebuilt value. Inputs
/// are kept in order.
pub(crate) fn rebuild(
    kernel: &Kernel,
    mut map_node: impl FnMut(
        &mut Builder,
        &Rebuilt,
        ValueId,
        &rfx_ir::hir::Node,
        &[ValueId],
    ) -> Result<ValueId, OptError>,
) -> Result<Kernel, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    let live = live_values(kernel);
    for (index, node) in kernel.nodes().iter().enumerate() {
        if let Op::Input { name } = &node.op {
            map[index] = Some(
                b.input(name.clone(), node.ty.clone())
                    .map_err(OptError::Rebuild)?,
            );
            continue;
        }
        if !live[index] {
            continue;
        }
        let args = mapped_operands(&map, &node.args)?;
        map[index] = Some(map_node(&mut b, &map, ValueId::new(index), node, &args)?);
    }
    finish_rebuilt(b, &map, kernel.outputs())
}

/// The values `map` gives to a node's operands `args` (a rebuilt kernel's ids by the old
/// kernel's value index); an operand without one is an optimiser bug, reported as such.
pub(crate) fn mapped_operands(map: &[Option<ValueId>], args: &[ValueId]) -> Result<Vec<ValueId>, OptError> {
    args.iter()
        .map(|a| {
            map.get(a.index())
                .copied()
                .flatten()
                .ok_or(OptError::InvalidValue(*a))
        })
        .collect()
}

/// Which values the outputs need.
pub(crate) fn live_values(kernel: &Kernel) -> Vec<bool> {
    reachable(kernel, kernel.outputs().iter().map(|o| o.value))
}

/// Which values `roots` are computed from (themselves included).
pub(crate) fn reachable(kernel: &Kernel, roots: impl IntoIterator<Item = ValueId>) -> Vec<bool> {
    let mut seen = vec![false; kernel.nodes().len()];
    let mut stack: Vec<ValueId> = roots.into_iter().collect();
    while let Some(value) = stack.pop() {
        if let Some(slot) = seen.get_mut(value.index())
            && !*slot
        {
            *slot = true;
            if let Some(node) = kernel.node(value) {
                stack.extend(node.args.iter().copied());
            }
        }
    }
    seen
}

/// Names `outputs` (of the old kernel) on the values `map` rebuilt them as, and finishes `b`.
pub(crate) fn finish_rebuilt<'a>(
    mut b: Builder,
    map: &[Option<ValueId>],
    outputs: impl IntoIterator<Item = &'a Output>,
) -> Result<Kernel, OptError> {
    for output in outputs {
        let value = map
            .get(output.value.index())
            .copied()
            .flatten()
            .ok_or(OptError::InvalidValue(output.value))?;
        b.output(output.name.clone(), value).map_err(OptError::Rebuild)?;
    }
    b.finish().map_err(OptError::Rebuild)
}

fn copy_node(b: &mut Builder, node: &rfx_ir::hir::Node, args: &[ValueId]) -> Result<ValueId, OptError> {
    b.copy(&node.op, args, &node.ty).map_err(OptError::Rebuild)
}

/// Removes every node the outputs do not need. Inputs are kept even when unused: they are the
/// kernel's signature.
pub fn eliminate_dead_ops(kernel: &Kernel) -> Result<Kernel, OptError> {
    rebuild(kernel, |b, _, _, node, args| copy_node(b, node, args))
}

/// Rewrites composite ops into primitives the rest of the pipeline and MIR know:
/// `clamp(x, lo, hi)` becomes `min(max(x, lo), hi)`, which is its definition (so the rewrite is
/// exact). A scan along an axis of at most one element is its operand: each result is the op's
/// first step from its identity, which leaves the element (`-0 + x`, `1 * x`, `max(-inf, x)`;
/// a NaN stays NaN), and a linear recurrence along such an axis is that step, `coef * -0 + x`.
/// `set_row(x, row, i)` becomes `select(iota == clamp(i, 0, n - 1), row, x)` along axis 0 (its
/// definition: the bits of one operand or the other). Also removes dead nodes.
pub fn decompose(kernel: &Kernel) -> Result<Kernel, OptError> {
    rebuild(kernel, |b, _, _, node, args| match (&node.op, args) {
        (Op::SetRow, [x, row, index]) => set_row_as_select(b, &node.ty.shape, *x, *row, *index),
        (Op::Clamp, [x, lo, hi]) => {
            let lower = b.binary(BinaryOp::Max, *x, *lo).map_err(OptError::Rebuild)?;
            b.binary(BinaryOp::Min, lower, *hi).map_err(OptError::Rebuild)
        }
        (Op::Scan { axis, .. }, [x]) if node.ty.shape.dims().get(*axis).is_some_and(|&n| n <= 1) => Ok(*x),
        // A linear recurrence's one step from the identity: `coef * -0 + x`, rounded twice.
        (Op::Scan { axis, .. }, [x, coef]) if node.ty.shape.dims().get(*axis).is_some_and(|&n| n <= 1) => {
            let zero = b.scalar(Scalar::from_f64(node.ty.dtype, -0.0));
            let scaled = b.binary(BinaryOp::Mul, *coef, zero).map_err(OptError::Rebuild)?;
            b.binary(BinaryOp::Add, scaled, *x).map_err(OptError::Rebuild)
        }
        _ => copy_node(b, node, args),
    })
}

/// `set_row(x, row, index)` for `x` of `shape` as a select by row (see [`decompose`]).
fn set_row_as_select(
    b: &mut Builder,
    shape: &Shape,
    x: ValueId,
    row: ValueId,
    index: ValueId,
) -> Result<ValueId, OptError> {
    let dims = shape.dims();
    let rows = dims.first().copied().unwrap_or(1);
    let last = i32::try_from(rows.saturating_sub(1)).map_err(|_| OptError::InvalidValue(x))?;
    let zero = b.scalar(Scalar::I32(0));
    let top = b.scalar(Scalar::I32(last));
    let at = b.binary(BinaryOp::Max, index, zero).map_err(OptError::Rebuild)?;
    let at = b.binary(BinaryOp::Min, at, top).map_err(OptError::Rebuild)?;
    let mut column = vec![1; dims.len()];
    column[0] = rows;
    let iota = b
        .iota(rfx_ir::DType::I32, Shape::new(column), 0)
        .map_err(OptError::Rebuild)?;
    let here = b
        .compare(rfx_ir::CmpOp::Eq, iota, at)
        .map_err(OptError::Rebuild)?;
    let mut one_row = dims.to_vec();
    one_row[0] = 1;
    let row = b.reshape(row, Shape::new(one_row)).map_err(OptError::Rebuild)?;
    b.select(here, row, x).map_err(OptError::Rebuild)
}

/// Moves transposes of computed elementwise values down to their operands:
/// `transpose(f(a, b), p)` becomes `f(transpose(a, p), transpose(b, p))`, recursively, with a
/// broadcast operand made explicit first (`transpose(broadcast_to(a, shape(f)), p)`). A
/// transpose then lands on an input, a literal, an `iota`, a constant or a value that is stored
/// anyway, all of which fusion reads through permuted strides, so the transposed value is
/// computed where it is used instead of being stored and copied. A value moves only when every
/// use of it wants it transposed the same way (nothing is computed twice). Elementwise ops
/// commute with any permutation of their points, so the results are the same bits. Also
/// removes dead nodes.
pub fn sink_transposes(kernel: &Kernel) -> Result<Kernel, OptError> {
    // `rebuild` verifies the kernel; the analysis before it only reads through checked indices.
    let live = live_values(kernel);
    let nodes = kernel.nodes();
    // `sunk[v] = Some(p)`: every use of `v` reads `transpose(v, p)`, so only that is built.
    let mut sunk: Vec<Option<Vec<usize>>> = vec![None; nodes.len()];
    // What each value's users want: `Some(p)` for transposed by `p`, `None` for as it is.
    let mut wants: Vec<Vec<Option<Vec<usize>>>> = vec![Vec::new(); nodes.len()];
    for output in kernel.outputs() {
        if let Some(w) = wants.get_mut(output.value.index()) {
            w.push(None);
        }
    }
    for index in (0..nodes.len()).rev() {
        let node = &nodes[index];
        if !live[index] {
            continue;
        }
        let elementwise = is_elementwise(&node.op);
        if elementwise || matches!(node.op, Op::Transpose { .. }) {
            sunk[index] = match wants[index].split_first() {
                Some((Some(p), rest)) if rest.iter().all(|w| w.as_ref() == Some(p)) => Some(p.clone()),
                _ => None,
            };
        }
        for &a in &node.args {
            let same_shape = kernel.value_type(a).is_some_and(|t| t.shape == node.ty.shape);
            let want = match (&node.op, &sunk[index]) {
                (Op::Transpose { perm }, outer) => {
                    let composed = compose(perm, outer.as_deref());
                    (!is_identity(&composed)).then_some(composed)
                }
                (_, Some(p)) if elementwise && same_shape => Some(p.clone()),
                _ => None,
            };
            if let Some(w) = wants.get_mut(a.index()) {
                w.push(want);
            }
        }
    }
    // Each node is rebuilt as it is or, for a sunk value, transposed by its `sunk` perm; `args`
    // are the operands so rebuilt. `views` holds the transposes of operands already built, by
    // operand, perm and the shape it was broadcast to first: a transpose node and a sunk
    // elementwise user may want the same operand by the same perm at two shapes.
    let mut views: std::collections::HashMap<(ValueId, Vec<usize>, Shape), ValueId> =
        std::collections::HashMap::new();
    rebuild(kernel, |b, _, value, node, args| {
        // `transpose(a, p)` for operand `a`, rebuilt as `built` (broadcast to `shape` first when
        // smaller).
        let mut operand = |b: &mut Builder,
                           a: ValueId,
                           built: ValueId,
                           p: &[usize],
                           shape: &Shape|
         -> Result<ValueId, OptError> {
            if sunk[a.index()].as_deref() == Some(p) || is_identity(p) {
                return Ok(built);
            }
            let key = (a, p.to_vec(), shape.clone());
            if let Some(&done) = views.get(&key) {
                return Ok(done);
            }
            let mut plain = built;
            if kernel.value_type(a).is_some_and(|t| &t.shape != shape) {
                plain = b.broadcast_to(plain, shape.clone()).map_err(OptError::Rebuild)?;
            }
            let view = b.transpose(plain, p).map_err(OptError::Rebuild)?;
            views.insert(key, view);
            Ok(view)
        };
        match (&node.op, &sunk[value.index()], node.args.first(), args.first()) {
            (Op::Transpose { perm }, outer, Some(&a), Some(&built)) => {
                let shape = kernel.value_type(a).map(|t| t.shape.clone()).unwrap_or_default();
                operand(b, a, built, &compose(perm, outer.as_deref()), &shape)
            }
            (_, Some(p), ..) => {
                let args = node
                    .args
                    .iter()
                    .zip(args)
                    .map(|(&a, &built)| operand(b, a, built, p, &node.ty.shape))
                    .collect::<Result<Vec<_>, _>>()?;
                let dims = compose(node.ty.shape.dims(), Some(p));
                let ty = rfx_ir::TensorType::new(node.ty.dtype, dims);
                b.copy(&node.op, &args, &ty).map_err(OptError::Rebuild)
            }
            _ => copy_node(b, node, args),
        }
    })
}

/// The ops whose result at a point depends only on their operands at that point.
fn is_elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Clamp | Op::Cast
    )
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

/// `items` permuted by `outer` (`outer[i]` picks item `i`); `items` itself without one. For
/// perms: `transpose(transpose(x, inner), outer)` is `transpose(x, compose(inner, outer))`.
fn compose<T: Copy>(items: &[T], outer: Option<&[usize]>) -> Vec<T> {
    match outer {
        Some(outer) => outer.iter().filter_map(|&i| items.get(i).copied()).collect(),
        None => items.to_vec(),
    }
}

/// Folds every value computable at compile time into a constant, in the value's own dtype (an
/// `f32` fold gives the bits the `f32` interpreter gives), and removes what became dead. No
/// algebraic rewriting happens. Takes a kernel without loops ([`OptError::Loop`]).
pub fn constant_fold(kernel: &Kernel) -> Result<Kernel, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    let config = OptConfig {
        refining: false,
        fast_math: false,
        iter_limit: 1,
        ..OptConfig::default()
    };
    // With no rules enabled beyond the exact table restricted to zero iterations' worth of
    // matches, saturation reduces to building the e-graph (which folds) and extracting.
    let (graph, ids) = crate::saturate::to_egraph(kernel, &config)?;
    crate::saturate::extract_graph(kernel, &graph, &ids)
}

/// Decomposition, equality saturation (folding, simplification, CSE), [`sink_transposes`] and
/// DCE: the HIR half of
/// [`crate::optimize`]. Returns the optimised kernel and a report without fusion results.
/// Takes a kernel without loops ([`OptError::Loop`]; [`crate::optimize`] splits a kernel at its
/// loops and simplifies the pieces).
pub fn simplify(kernel: &Kernel, config: &OptConfig) -> Result<(Kernel, OptReport), OptError> {
    let mut report = OptReport {
        ops_before: kernel.op_count(),
        ..OptReport::default()
    };
    let start = std::time::Instant::now();
    let decomposed = decompose(kernel)?;
    report
        .time_per_pass
        .push(("decompose".to_string(), start.elapsed()));
    let kernel = if config.saturate {
        let start = std::time::Instant::now();
        let sat = saturate(&decomposed, config)?;
        report
            .time_per_pass
            .push(("saturate".to_string(), start.elapsed()));
        report.rules_fired = sat.rules_fired;
        report.egraph_nodes = sat.egraph_nodes;
        report.egraph_classes = sat.egraph_classes;
        report.iterations = sat.iterations;
        report.stop_reason = Some(sat.stop_reason);
        // Transcendentals of one argument under different guards, computed once; hash-consed
        // again, which also folds the guards' constants.
        match crate::guarded::share_guarded_transcendentals(&sat.kernel)? {
            Some(shared) => constant_fold(&shared)?,
            None => sat.kernel,
        }
    } else {
        report.stop_reason = Some(crate::report::StopReason::NotRun);
        decomposed
    };
    if cfg!(debug_assertions) {
        verify(&kernel).map_err(|e| OptError::PassBroke {
            pass: "saturate",
            errors: e.to_string(),
        })?;
    }
    report.ops_after = kernel.op_count();
    let start = std::time::Instant::now();
    let kernel = sink_transposes(&kernel)?;
    report
        .time_per_pass
        .push(("sink_transposes".to_string(), start.elapsed()));
    Ok((kernel, report))
}

/// Partitions `kernel` into fused MIR kernels without algebraic optimisation (composites are
/// decomposed and dead code removed first). Use [`optimize`] for the whole pipeline. A kernel
/// with loops is split at them as [`optimize`] does.
pub fn fuse_chains(kernel: &Kernel) -> Result<rfx_ir::mir::MirProgram, OptError> {
    if crate::staged::has_loops(kernel) {
        let config = OptConfig {
            saturate: false,
            ..OptConfig::default()
        };
        return Ok(crate::staged::optimize_staged(kernel, &config)?.0);
    }
    let decomposed = sink_transposes(&decompose(kernel)?)?;
    let outcome = crate::fusion::fuse(&decomposed)?;
    rfx_ir::mir::verify(&outcome.program).map_err(|e| OptError::PassBroke {
        pass: "fuse",
        errors: e.to_string(),
    })?;
    Ok(outcome.program)
}

/// The whole pipeline: decomposition, equality saturation (constant folding, simplification,
/// CSE), DCE and fusion into MIR, verifying between passes. The report says what each pass did
/// and which values could not be fused, and why.
///
/// A kernel with loops is split at them: the loop-free stages between loops and each loop's
/// body (recursively) go through the pipeline, and the program repeats each body's kernels
/// with a [`rfx_ir::repeat::KernelLoop`]. Its report sums the stages'.
pub fn optimize(
    kernel: &Kernel,
    config: &OptConfig,
) -> Result<(rfx_ir::mir::MirProgram, OptReport), OptError> {
    if crate::staged::has_loops(kernel) {
        return crate::staged::optimize_staged(kernel, config);
    }
    optimize_loop_free(kernel, config)
}

/// [`optimize`] for a kernel without loop nodes.
pub(crate) fn optimize_loop_free(
    kernel: &Kernel,
    config: &OptConfig,
) -> Result<(rfx_ir::mir::MirProgram, OptReport), OptError> {
    let (simplified, mut report) = simplify(kernel, config)?;
    let start = std::time::Instant::now();
    let outcome = crate::fusion::fuse(&simplified)?;
    report.time_per_pass.push(("fuse".to_string(), start.elapsed()));
    rfx_ir::mir::verify(&outcome.program).map_err(|e| OptError::PassBroke {
        pass: "fuse",
        errors: e.to_string(),
    })?;
    report.kernels = outcome.program.kernels().len();
    report.missed_fusions = outcome.missed;
    Ok((outcome.program, report))
}
