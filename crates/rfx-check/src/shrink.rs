//! The greedy shrinker: a mismatching kernel cut down to a smaller one that still mismatches.

use rfx_ir::hir::{self, Kernel, Node, Op, Output, ValueId};

/// The greedy shrinker: returns the smallest kernel it finds for which `fails` still holds
/// (`kernel` itself when nothing smaller does), trying at most `max_attempts` candidates.
///
/// Candidates, repeated until none is kept: keep a single output; replace every use of a node
/// by one of its operands of the same type, or by an input of the same type; drop unused
/// inputs. Each candidate is compacted (dead nodes removed) and verified before `fails` sees it.
pub fn shrink(kernel: &Kernel, max_attempts: usize, fails: &mut dyn FnMut(&Kernel) -> bool) -> Kernel {
    let mut best = kernel.clone();
    let mut attempts = 0;
    let size = |k: &Kernel| (k.op_count(), k.nodes().len(), k.outputs().len());
    'outer: loop {
        for candidate in shrink_candidates(&best) {
            if attempts >= max_attempts {
                break 'outer;
            }
            if size(&candidate) >= size(&best) {
                continue;
            }
            attempts += 1;
            if fails(&candidate) {
                best = candidate;
                continue 'outer;
            }
        }
        break;
    }
    best
}

/// Every one-step simplification of `kernel` that still verifies, compacted.
fn shrink_candidates(kernel: &Kernel) -> Vec<Kernel> {
    let mut candidates = Vec::new();
    let outputs = kernel.outputs();
    if outputs.len() > 1 {
        for output in outputs {
            candidates.extend(compact(
                kernel.nodes(),
                std::slice::from_ref(output),
                kernel.name(),
                true,
            ));
        }
    }
    let nodes = kernel.nodes();
    let inputs: Vec<ValueId> = kernel.inputs().map(|(v, _, _)| v).collect();
    // Later nodes first: replacing a node near the outputs removes the most.
    for (index, node) in nodes.iter().enumerate().rev() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let replacements = node
            .args
            .iter()
            .chain(&inputs)
            .copied()
            .filter(|r| r.index() < index && nodes[r.index()].ty == node.ty);
        let mut seen = Vec::new();
        for replacement in replacements {
            if seen.contains(&replacement) {
                continue;
            }
            seen.push(replacement);
            let replace = |v: ValueId| if v.index() == index { replacement } else { v };
            let new_nodes: Vec<Node> = nodes
                .iter()
                .map(|n| Node {
                    op: n.op.clone(),
                    args: n.args.iter().map(|&a| replace(a)).collect(),
                    ty: n.ty.clone(),
                })
                .collect();
            let new_outputs: Vec<Output> = outputs
                .iter()
                .map(|o| Output {
                    name: o.name.clone(),
                    value: replace(o.value),
                })
                .collect();
            candidates.extend(compact(&new_nodes, &new_outputs, kernel.name(), true));
        }
    }
    candidates.extend(compact(nodes, outputs, kernel.name(), false));
    candidates
}

/// The kernel of `nodes` and `outputs` without the nodes the outputs do not need (unused
/// inputs kept with `keep_inputs`), renumbered; `None` when it does not verify.
fn compact(nodes: &[Node], outputs: &[Output], name: &str, keep_inputs: bool) -> Option<Kernel> {
    let mut live = vec![false; nodes.len()];
    for output in outputs {
        *live.get_mut(output.value.index())? = true;
    }
    for index in (0..nodes.len()).rev() {
        let is_input = matches!(nodes[index].op, Op::Input { .. });
        if live[index] || (keep_inputs && is_input) {
            live[index] = true;
            for arg in &nodes[index].args {
                *live.get_mut(arg.index())? = true;
            }
        }
    }
    let mut new_id = vec![None; nodes.len()];
    let mut kept = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        if !live[index] {
            continue;
        }
        let args = node
            .args
            .iter()
            .map(|a| new_id[a.index()])
            .collect::<Option<Vec<ValueId>>>()?;
        new_id[index] = Some(ValueId::new(kept.len()));
        kept.push(Node {
            op: node.op.clone(),
            args,
            ty: node.ty.clone(),
        });
    }
    let outputs = outputs
        .iter()
        .map(|o| {
            Some(Output {
                name: o.name.clone(),
                value: new_id[o.value.index()]?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let kernel = Kernel::from_parts(name, kept, outputs);
    hir::verify(&kernel).ok()?;
    Some(kernel)
}
