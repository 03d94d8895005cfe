//! The unfused baseline of `rfx bench`: every HIR op of a kernel compiled as its own one-op
//! kernel and run in order, each result materialised in memory (rfxJIT's one NumPy call per op).
//!
//! Results live in a pool of buffers planned once ([`plan`]): an op writes a buffer of its type
//! that holds no live value, the way NumPy's allocator hands a freed temporary to the next op, so
//! the path holds the values live at one time rather than one array per op (the UR5 Jacobian's
//! 485 ops at 2^20 elements would be 2 GB).

use std::sync::Arc;

use anyhow::Context;
use rfx_ir::hir::{Builder, Kernel, Op};
use rfx_ir::{Array, Scalar, TensorType};
use rfx_lower::{Backend, Compiled, Scratch};
use rfx_opt::OptConfig;

/// Where the unfused path keeps one HIR value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    /// The kernel's input of this index.
    Input(usize),
    /// The pool's buffer of this index.
    Buffer(usize),
}

/// The unfused path's memory: a slot for every HIR value and the type of every pooled buffer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    /// Per HIR node, where its value lives.
    pub(crate) slots: Vec<Slot>,
    /// The pool's buffers.
    pub(crate) buffers: Vec<TensorType>,
}

impl Plan {
    /// Bytes of the pool's buffers.
    pub(crate) fn bytes(&self) -> u128 {
        self.buffers
            .iter()
            .map(|ty| ty.shape.numel() as u128 * ty.dtype.size_bytes() as u128)
            .sum()
    }
}

/// Plans the buffers of `kernel`'s unfused path. An op's result takes a free buffer of its type
/// (or a new one); its operands' buffers are freed after it when it is their last use, so no op
/// writes a buffer it reads. Kernel outputs are never freed; a result nothing reads is freed at
/// once.
pub(crate) fn plan(kernel: &Kernel) -> Plan {
    let nodes = kernel.nodes();
    let mut last_use: Vec<Option<usize>> = vec![None; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        for a in &node.args {
            if let Some(slot) = last_use.get_mut(a.index()) {
                *slot = Some(i);
            }
        }
    }
    for output in kernel.outputs() {
        if let Some(slot) = last_use.get_mut(output.value.index()) {
            *slot = Some(usize::MAX);
        }
    }
    let mut slots = Vec::with_capacity(nodes.len());
    let mut buffers: Vec<TensorType> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut inputs = 0;
    for (i, node) in nodes.iter().enumerate() {
        if let Op::Input { .. } = node.op {
            slots.push(Slot::Input(inputs));
            inputs += 1;
            continue;
        }
        let buffer = match free.iter().position(|&b| buffers[b] == node.ty) {
            Some(k) => free.swap_remove(k),
            None => {
                buffers.push(node.ty.clone());
                buffers.len() - 1
            }
        };
        slots.push(Slot::Buffer(buffer));
        let dead_operands = node
            .args
            .iter()
            .filter(|a| last_use.get(a.index()).copied().flatten() == Some(i))
            .filter_map(|a| slots.get(a.index()).copied());
        let dead_result = last_use[i].is_none().then_some(Slot::Buffer(buffer));
        for slot in dead_operands.chain(dead_result) {
            if let Slot::Buffer(b) = slot
                && !free.contains(&b)
            {
                free.push(b);
            }
        }
    }
    Plan { slots, buffers }
}

/// One op of the unfused path.
struct Step {
    compiled: Arc<dyn Compiled>,
    /// Where each operand lives.
    args: Vec<Slot>,
    /// The pool buffer it writes.
    out: usize,
}

/// Runs one op, its operands in `inputs` and `buffers`, writing `out`. The operands' views sit
/// on the stack (at most [`MAX_STACK_OPERANDS`]): the harness adds no allocation per op, so the
/// path costs what one kernel call per op costs.
fn run_step(
    step: &Step,
    inputs: &[Array],
    buffers: &[Option<Array>],
    out: &mut Array,
    scratch: &mut Scratch,
) -> anyhow::Result<()> {
    let view = |slot: Slot| match slot {
        Slot::Input(k) => inputs.get(k).map(Array::view),
        Slot::Buffer(b) => buffers.get(b).and_then(Option::as_ref).map(Array::view),
    };
    let outputs = &mut [out.view_mut()];
    match step.args.split_first() {
        None => step.compiled.run(&[], outputs, scratch)?,
        Some((&first, rest)) if rest.len() < MAX_STACK_OPERANDS => {
            let first = view(first).context("unfused operand")?;
            let mut views = [first; MAX_STACK_OPERANDS];
            for (v, &slot) in views[1..].iter_mut().zip(rest) {
                *v = view(slot).context("unfused operand")?;
            }
            step.compiled.run(&views[..=rest.len()], outputs, scratch)?;
        }
        Some(_) => {
            let views = step
                .args
                .iter()
                .map(|&slot| view(slot))
                .collect::<Option<Vec<_>>>()
                .context("unfused operand")?;
            step.compiled.run(&views, outputs, scratch)?;
        }
    }
    Ok(())
}

/// Operand views an op keeps on the stack (`select` and `clamp` have three).
const MAX_STACK_OPERANDS: usize = 4;

/// A kernel's unfused path, compiled, with its buffer pool.
pub(crate) struct Unfused {
    steps: Vec<Step>,
    /// The pool; a buffer is taken out only while its op runs.
    buffers: Vec<Option<Array>>,
}

impl Unfused {
    /// Compiles every op of `kernel` (not an input) on `backend` as its own kernel, with the
    /// fused kernel's fast-math setting, thread limit and CPU target.
    pub(crate) fn new(
        kernel: &Kernel,
        backend: &dyn Backend,
        fast_math: bool,
        exec: super::Exec,
    ) -> anyhow::Result<Unfused> {
        let config = OptConfig {
            saturate: false,
            fast_math,
            ..OptConfig::default()
        };
        let plan = plan(kernel);
        let mut steps = Vec::new();
        for (i, node) in kernel.nodes().iter().enumerate() {
            if let Op::Input { .. } = node.op {
                continue;
            }
            let mut b = Builder::new(format!("op{i}"));
            let mut params = Vec::new();
            for (k, a) in node.args.iter().enumerate() {
                let ty = kernel.value_type(*a).context("operand type")?.clone();
                params.push(b.input(format!("a{k}"), ty)?);
            }
            let v = b.copy(&node.op, &params, &node.ty)?;
            b.output("out", v)?;
            let single = b.finish()?;
            let (compiled, _, _) = super::compile(&single, backend, &config, exec)?;
            let args = node
                .args
                .iter()
                .map(|a| plan.slots.get(a.index()).copied().context("operand slot"))
                .collect::<anyhow::Result<_>>()?;
            let out = match plan.slots.get(i) {
                Some(Slot::Buffer(b)) => *b,
                _ => anyhow::bail!("op {i} of the unfused path has no buffer"),
            };
            steps.push(Step { compiled, args, out });
        }
        let buffers = plan
            .buffers
            .iter()
            .map(|ty| Some(Array::filled(Scalar::zero(ty.dtype), ty.shape.clone())))
            .collect();
        Ok(Unfused { steps, buffers })
    }

    /// Runs every op in order on the kernel's `inputs` (in the kernel's input order).
    pub(crate) fn run(&mut self, inputs: &[Array], scratch: &mut Scratch) -> anyhow::Result<()> {
        for step in &self.steps {
            let mut out = self.buffers[step.out].take().context("unfused buffer in use")?;
            let result = run_step(step, inputs, &self.buffers, &mut out, scratch);
            self.buffers[step.out] = Some(out);
            result?;
        }
        Ok(())
    }

    /// The value of HIR node `node` after [`Unfused::run`] (`None` for an input), its slot
    /// looked up in the `plan` it was built with.
    #[cfg(test)]
    pub(crate) fn value(&self, plan: &Plan, node: usize) -> Option<&Array> {
        match plan.slots.get(node)? {
            Slot::Buffer(b) => self.buffers.get(*b)?.as_ref(),
            Slot::Input(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfx_ir::interp::{Mode, run_hir};
    use rfx_ir::testgen::{TestRng, random_inputs};
    use rfx_lower::InterpBackend;

    fn kernel(n: usize) -> Kernel {
        super::super::kernels(n)
            .expect("kernels")
            .into_iter()
            .find(|(name, _)| name == "quat_mul")
            .expect("quat_mul")
            .1
    }

    #[test]
    fn the_pool_holds_the_live_values_not_one_buffer_per_op() {
        let k = kernel(8);
        let ops = k
            .nodes()
            .iter()
            .filter(|n| !matches!(n.op, Op::Input { .. }))
            .count();
        assert_eq!(ops, 28);
        let p = plan(&k);
        // The four outputs stay live to the end; each output's chain of products and sums
        // needs at most three more values at a time.
        assert!(p.buffers.len() <= 8, "{} buffers for {ops} ops", p.buffers.len());
        assert!(p.buffers.len() >= 4, "the four outputs");
        assert_eq!(p.bytes(), p.buffers.len() as u128 * 8 * 4);
        // No op writes a buffer one of its operands lives in.
        for (i, node) in k.nodes().iter().enumerate() {
            for a in &node.args {
                assert_ne!(p.slots[i], p.slots[a.index()], "node {i} overwrites its operand");
            }
        }
        // The four outputs live in four distinct buffers.
        let outs: std::collections::HashSet<_> =
            k.outputs().iter().map(|o| p.slots[o.value.index()]).collect();
        assert_eq!(outs.len(), 4);
    }

    #[test]
    fn the_unfused_path_computes_what_the_interpreter_computes() {
        let n = 5;
        for (name, k) in super::super::kernels(n).expect("kernels") {
            if !["quat_mul", "chain10", "pid_clip", "control_fk_ur5"].contains(&name.as_str()) {
                continue;
            }
            let inputs = random_inputs(&mut TestRng::new(3), &k, 0.0);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let expected = run_hir(&k, &views, Mode::Native).expect("interpreter");
            let mut unfused =
                Unfused::new(&k, &InterpBackend, false, super::super::Exec::default()).expect("unfused");
            let p = plan(&k);
            let mut scratch = Scratch::new();
            // Twice: a reused buffer's old contents must not leak into the second run.
            for _ in 0..2 {
                unfused.run(&inputs, &mut scratch).expect("run");
                for (output, want) in k.outputs().iter().zip(&expected) {
                    let got = unfused.value(&p, output.value.index()).expect("output buffer");
                    assert_eq!(got, want, "{name}: output {}", output.name);
                }
            }
            assert!(
                p.buffers.len() < unfused.steps.len(),
                "{name}: {} buffers for {} ops",
                p.buffers.len(),
                unfused.steps.len()
            );
        }
    }
}
