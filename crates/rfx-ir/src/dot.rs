//! Graphviz DOT export of HIR kernels and MIR programs, for `rfx dot` and for looking at what a
//! pass did.
//!
//! The graphs are built with `petgraph` and printed in a deterministic order (nodes in definition
//! order), so the output can be snapshot-tested.

use std::fmt::Write as _;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::hir::{Kernel, MAX_LOOP_DEPTH, Op};
use crate::mir::{BufKind, MirProgram};

/// The DOT text of a HIR kernel: one graph node per HIR node (inputs as boxes, constants as
/// plain text, loops as hexagons labelled `loop ×trips` or `while_loop ≤trips`, outputs as
/// double octagons), edges from operands to users labelled with the operand position when an
/// op has more than one operand. Each loop's body and test are drawn beside it as dashed
/// clusters (nested loops as clusters inside, down to [`MAX_LOOP_DEPTH`] levels).
pub fn hir_to_dot(kernel: &Kernel) -> String {
    let graph = hir_graph(kernel);
    let mut out = render(&graph, kernel.name());
    let mut clusters = String::new();
    write_loop_clusters(&mut clusters, kernel, "n", 1);
    if !clusters.is_empty() {
        out.truncate(out.len() - "}\n".len());
        out.push_str(&clusters);
        out.push_str("}\n");
    }
    out
}

/// The graph of one HIR kernel (see [`hir_to_dot`]).
fn hir_graph(kernel: &Kernel) -> DiGraph<(String, &'static str), String> {
    let mut graph: DiGraph<(String, &'static str), String> = DiGraph::new();
    let ids: Vec<NodeIndex> = kernel
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let (label, shape) = match &node.op {
                Op::Input { name } => (format!("{name}\\n{}", node.ty), "box"),
                Op::Const(value) => (format!("{value}\\n{}", node.ty), "plaintext"),
                Op::Literal(_) => (format!("literal\\n{}", node.ty), "box3d"),
                Op::Loop(_) => (format!("%{i} {}\\n{}", describe(&node.op), node.ty), "hexagon"),
                op => (format!("%{i} {}\\n{}", describe(op), node.ty), "ellipse"),
            };
            graph.add_node((label, shape))
        })
        .collect();
    for (i, node) in kernel.nodes().iter().enumerate() {
        for (pos, arg) in node.args.iter().enumerate() {
            if let Some(&from) = ids.get(arg.index()) {
                let label = if node.args.len() > 1 {
                    pos.to_string()
                } else {
                    String::new()
                };
                graph.add_edge(from, ids[i], label);
            }
        }
    }
    for output in kernel.outputs() {
        let out = graph.add_node((output.name.clone(), "doubleoctagon"));
        if let Some(&from) = ids.get(output.value.index()) {
            graph.add_edge(from, out, String::new());
        }
    }
    graph
}

/// Writes a dashed cluster for the body and the test of each loop of `kernel`, whose graph
/// nodes are named with `prefix`; the clusters' own nodes get longer prefixes, so that every
/// name is unique.
fn write_loop_clusters(out: &mut String, kernel: &Kernel, prefix: &str, depth: usize) {
    if depth > MAX_LOOP_DEPTH {
        return;
    }
    for (i, node) in kernel.nodes().iter().enumerate() {
        let Op::Loop(spec) = &node.op else { continue };
        let parts = std::iter::once(("body", &spec.body)).chain(spec.cond.iter().map(|c| ("test", c)));
        for (part, inner) in parts {
            let inner_prefix = format!("{prefix}{i}_{part}_n");
            let _ = writeln!(out, "  subgraph \"cluster_{prefix}{i}_{part}\" {{");
            let _ = writeln!(
                out,
                "  label=\"%{i} {part} ({})\"; style=dashed;",
                escape(&describe(&node.op))
            );
            write_items(out, &hir_graph(inner), &inner_prefix);
            write_loop_clusters(out, inner, &inner_prefix, depth + 1);
            let _ = writeln!(out, "  }}");
        }
    }
}

/// The DOT text of a MIR program: buffers as boxes (inputs and outputs named, temporaries as
/// `bufN`), kernels as components labelled with their iteration space, body size, stores and
/// reductions; edges from the buffers a kernel loads to it, and from it to the buffers it writes.
pub fn mir_to_dot(program: &MirProgram) -> String {
    let mut graph: DiGraph<(String, &'static str), String> = DiGraph::new();
    let buffers: Vec<NodeIndex> = program
        .buffers()
        .iter()
        .enumerate()
        .map(|(i, buffer)| {
            let (label, shape) = match &buffer.kind {
                BufKind::Input { name } => (format!("{name}\\n{}", buffer.ty), "box"),
                BufKind::Output { name } => (format!("{name}\\n{}", buffer.ty), "doubleoctagon"),
                BufKind::Temp => (format!("buf{i}\\n{}", buffer.ty), "box"),
                BufKind::Literal { .. } => (format!("literal buf{i}\\n{}", buffer.ty), "box3d"),
            };
            graph.add_node((label, shape))
        })
        .collect();
    for kernel in program.kernels() {
        let label = format!(
            "{} {}\\n{} ops, {} stores, {} reductions",
            kernel.name,
            kernel.domain,
            kernel.body.len(),
            kernel.stores.len(),
            kernel.reductions.len()
        );
        let node = graph.add_node((label, "component"));
        let mut reads: Vec<_> = kernel.reads().collect();
        reads.sort();
        reads.dedup();
        for buf in reads {
            if let Some(&from) = buffers.get(buf.index()) {
                graph.add_edge(from, node, String::new());
            }
        }
        let mut writes: Vec<_> = kernel.writes().collect();
        writes.sort();
        writes.dedup();
        for buf in writes {
            if let Some(&to) = buffers.get(buf.index()) {
                graph.add_edge(node, to, String::new());
            }
        }
    }
    render(&graph, program.name())
}

fn describe(op: &Op) -> String {
    match op {
        Op::Reduce { op, axes, keepdims } => {
            let axes = axes.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
            format!("{op} axes [{axes}]{}", if *keepdims { " keepdims" } else { "" })
        }
        Op::Scan { op, axis, reverse } => {
            format!("{op} axis {axis}{}", if *reverse { " reverse" } else { "" })
        }
        Op::Loop(spec) => {
            let bound = if spec.cond.is_some() { '≤' } else { '×' };
            let carries = match spec.carries {
                1 => "1 carry".to_string(),
                n => format!("{n} carries"),
            };
            format!("{} {bound}{}, {carries}", op.name(), spec.trips)
        }
        Op::LoopOutput { index } => format!("loop_output {index}"),
        other => other.name().to_string(),
    }
}

/// Prints a graph whose nodes are `(label, shape)` and whose edges carry a label.
pub(crate) fn render(graph: &DiGraph<(String, &'static str), String>, name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", escape(name));
    let _ = writeln!(out, "  rankdir=TB;");
    let _ = writeln!(out, "  node [fontname=\"monospace\"];");
    write_items(&mut out, graph, "n");
    out.push_str("}\n");
    out
}

/// Writes the nodes and edges of `graph`, naming each node `prefix` followed by its index.
fn write_items(out: &mut String, graph: &DiGraph<(String, &'static str), String>, prefix: &str) {
    for index in graph.node_indices() {
        let (label, shape) = &graph[index];
        let _ = writeln!(
            out,
            "  {prefix}{} [label=\"{}\", shape={shape}];",
            index.index(),
            escape_label(label)
        );
    }
    for edge in graph.edge_indices() {
        if let Some((from, to)) = graph.edge_endpoints(edge) {
            let (from, to) = (from.index(), to.index());
            let label = &graph[edge];
            if label.is_empty() {
                let _ = writeln!(out, "  {prefix}{from} -> {prefix}{to};");
            } else {
                let _ = writeln!(
                    out,
                    "  {prefix}{from} -> {prefix}{to} [label=\"{}\"];",
                    escape(label)
                );
            }
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Escapes quotes but keeps the `\n` line breaks labels use.
fn escape_label(text: &str) -> String {
    text.replace('"', "\\\"")
}
