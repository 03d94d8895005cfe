//! The preamble (scalar code) with its costly select arms computed only when selected.
//!
//! A `select(c, a, b)` computes both `a` and `b` before choosing; where the instructions that
//! only feed one arm cost a transcendental or more (`sin(θ)/θ` beside its Taylor series near
//! 0), the preamble runs them in a block entered only when the select takes that arm. The
//! select still chooses between its two values, so the result is the same bits; the arm not
//! taken is never computed (nothing it would compute is observable: no instruction of an arm
//! stores, and its value feeds nothing else). Selects on one condition share one branch, so
//! `sin` and `cos` of one argument in two selects stay one `sincos` call.

use super::*;

/// The least work (in [`Inst::work`] units) of an arm's own instructions that runs behind a
/// branch: one transcendental. Cheaper arms are computed unconditionally (a mispredicted
/// branch costs more than a few arithmetic instructions).
const ARM_MIN_WORK: usize = 20;

/// Which preamble instructions run behind a branch ([`ArmPlan::of`]).
struct ArmPlan {
    /// For each preamble instruction, the instruction defining each of its sources (`None`:
    /// defined before the preamble, which does not happen in a verified kernel).
    defs: Vec<Vec<Option<usize>>>,
    /// For each instruction, the arm it is computed in, if it is deferred: the instruction
    /// defining the condition and the operand (1: true, 2: false) of the selects it feeds.
    arm: Vec<Option<(usize, usize)>>,
    /// Each deferred instruction's readers.
    uses: Vec<Vec<(usize, usize)>>,
}

impl ArmPlan {
    /// The deferred arms of `kernel`'s preamble, or `None` when no arm is worth a branch.
    ///
    /// An instruction is deferred into the arm `(c, k)` when every instruction reading it is
    /// either a select on condition `c` reading it as operand `k`, or itself deferred into
    /// that arm (so nothing outside the arm, the body included, sees its value). Arms whose
    /// instructions together cost less than [`ARM_MIN_WORK`] are not deferred.
    fn of(kernel: &LirKernel) -> Option<ArmPlan> {
        let pre = &kernel.preamble;
        let costly = pre.iter().any(|i| i.work() >= ARM_MIN_WORK);
        let selects = pre.iter().any(|i| matches!(i, Inst::Select { .. }));
        if !costly || !selects {
            return None;
        }
        let mut last_def: Vec<Option<usize>> = vec![None; kernel.slots.len()];
        let mut defs = Vec::with_capacity(pre.len());
        let mut uses: Vec<Vec<(usize, usize)>> = vec![Vec::new(); pre.len()];
        for (i, inst) in pre.iter().enumerate() {
            let d: Vec<Option<usize>> = (inst.srcs().iter())
                .map(|s| last_def.get(s.index()).copied().flatten())
                .collect();
            for (k, def) in d.iter().enumerate() {
                if let Some(def) = def {
                    uses[*def].push((i, k));
                }
            }
            defs.push(d);
            if let Some(dst) = inst.dst()
                && let Some(l) = last_def.get_mut(dst.index())
            {
                *l = Some(i);
            }
        }
        // Values the body (or a row store) reads after the preamble: never deferred.
        let mut live_out = vec![false; pre.len()];
        let body_reads = (kernel.body.iter())
            .flat_map(Inst::srcs)
            .chain(kernel.row_store.as_ref().map(|r| r.index));
        for s in body_reads {
            if let Some(Some(def)) = last_def.get(s.index()) {
                live_out[*def] = true;
            }
        }
        let movable = |inst: &Inst| {
            matches!(
                inst,
                Inst::Unary { .. }
                    | Inst::Binary { .. }
                    | Inst::Compare { .. }
                    | Inst::Select { .. }
                    | Inst::Cast { .. }
            )
        };
        // Readers come after what they read: one pass from the end decides every instruction.
        let mut arm: Vec<Option<(usize, usize)>> = vec![None; pre.len()];
        for i in (0..pre.len()).rev() {
            if !movable(&pre[i]) || live_out[i] || uses[i].is_empty() {
                continue;
            }
            let target = |&(u, k): &(usize, usize)| match (&pre[u], arm[u]) {
                (_, Some(a)) => Some(a),
                (Inst::Select { .. }, None) if k > 0 => defs[u][0].map(|c| (c, k)),
                _ => None,
            };
            let first = target(&uses[i][0]);
            if first.is_some() && uses[i].iter().all(|u| target(u) == first) {
                arm[i] = first;
            }
        }
        // Arms too cheap to branch over run in order after all.
        let mut work: HashMap<(usize, usize), usize> = HashMap::new();
        for (i, a) in arm.iter().enumerate() {
            if let Some(a) = a {
                *work.entry(*a).or_default() += pre[i].work();
            }
        }
        for a in arm.iter_mut() {
            if a.is_some_and(|a| work.get(&a).copied().unwrap_or(0) < ARM_MIN_WORK) {
                *a = None;
            }
        }
        arm.iter()
            .any(Option::is_some)
            .then_some(ArmPlan { defs, arm, uses })
    }
}

impl<'k> Gen<'_, 'k> {
    /// The kernel's preamble, once, in scalar form (into `fx.pre_scalar`): in order, but with
    /// costly select arms run behind a branch on the select's condition (see the module
    /// documentation).
    pub(super) fn emit_preamble(&mut self, b: &mut FunctionBuilder<'_>) -> Result<(), BackendError> {
        let kernel = self.kernel();
        self.fx.pre_scalar = vec![None; kernel.slots.len()];
        self.fx.pre_const = vec![None; kernel.slots.len()];
        let plan = ArmPlan::of(kernel);
        // The value of each instruction emitted so far (a deferred one's through the merge of
        // its branch).
        let mut values: Vec<Option<Value>> = vec![None; kernel.preamble.len()];
        // The deferred instructions computed by a branch so far.
        let mut done = vec![false; kernel.preamble.len()];
        for (i, inst) in kernel.preamble.iter().enumerate() {
            if let Some(dst) = inst.dst()
                && let Some(c) = self.fx.pre_const.get_mut(dst.index())
            {
                *c = match inst {
                    Inst::Const { value, .. } if value.dtype().is_float() => Some(value.to_f64()),
                    _ => None,
                };
            }
            let mut slots = self.fx.pre_scalar.clone();
            if let Some(plan) = &plan {
                if plan.arm[i].is_some() {
                    continue;
                }
                if let Inst::Select {
                    on_true, on_false, ..
                } = inst
                {
                    let deferred = |k: usize| plan.defs[i][k].filter(|&d| plan.arm[d].is_some());
                    if [1, 2]
                        .iter()
                        .any(|&k| deferred(k).is_some_and(|d| values[d].is_none()))
                    {
                        self.emit_arm_branch(b, (plan, i), &mut values, &mut done)?;
                    }
                    for (k, slot) in [(1, on_true), (2, on_false)] {
                        if let Some(d) = deferred(k) {
                            let v = values[d].ok_or_else(|| internal("a deferred arm is not computed"))?;
                            if let Some(s) = slots.get_mut(slot.index()) {
                                *s = Some(v);
                            }
                        }
                    }
                }
            }
            self.emit_scalar_inst(b, inst, &mut slots)?;
            if let Some(dst) = inst.dst() {
                values[i] = slots.get(dst.index()).copied().flatten();
            }
            self.fx.pre_scalar = slots;
        }
        Ok(())
    }

    /// One preamble instruction in scalar form, reading and writing `slots`.
    fn emit_scalar_inst(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inst: &Inst,
        slots: &mut [Option<Value>],
    ) -> Result<(), BackendError> {
        let place = InstAt {
            w: 1,
            access: None,
            offs: &[],
            body_index: None,
        };
        self.emit_inst(b, inst, place, slots, &mut Vec::new())
    }

    /// The branch on the condition of select `at`: a block computing the deferred instructions
    /// of its true arms and one computing those of its false arms, each that has not been
    /// computed yet and reads only values there by now (the others wait for a later select on
    /// the condition). A value read after the branch leaves it through the merge block (a
    /// zero on the path that does not compute it, which no select takes) into `values`.
    fn emit_arm_branch(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (plan, at): (&ArmPlan, usize),
        values: &mut [Option<Value>],
        done: &mut [bool],
    ) -> Result<(), BackendError> {
        let kernel = self.kernel();
        let cond = plan.defs[at][0].ok_or_else(|| internal("a select's condition is not defined"))?;
        let c = values[cond].ok_or_else(|| internal("a select's condition is not emitted"))?;
        // Each arm's instructions that can be computed now, in order.
        let mut ready = vec![false; kernel.preamble.len()];
        let mut arms: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for m in 0..kernel.preamble.len() {
            let Some((c2, k)) = plan.arm[m] else { continue };
            let inputs_there =
                (plan.defs[m].iter()).all(|d| d.is_some_and(|d| values[d].is_some() || ready[d]));
            if c2 == cond && !done[m] && inputs_there {
                ready[m] = true;
                done[m] = true;
                arms[k - 1].push(m);
            }
        }
        // What leaves the branch: values read by a select or by an instruction computed later.
        let leaves: Vec<usize> = (arms.iter().flatten().copied())
            .filter(|&m| {
                plan.uses[m]
                    .iter()
                    .any(|&(u, _)| plan.arm[u].is_none() || !ready[u])
            })
            .collect();
        let (on_true, on_false, merge) = (b.create_block(), b.create_block(), b.create_block());
        let mut types = Vec::with_capacity(leaves.len());
        for &m in &leaves {
            let dtype = (kernel.preamble[m].dst())
                .and_then(|dst| kernel.slot_dtype(dst))
                .ok_or_else(|| internal("a deferred value has no slot"))?;
            types.push(dtype);
            b.append_block_param(merge, cl_type(dtype, 1));
        }
        b.ins().brif(c, on_true, &[], on_false, &[]);
        for (block, members) in [(on_true, &arms[0]), (on_false, &arms[1])] {
            b.switch_to_block(block);
            let mut computed: HashMap<usize, Value> = HashMap::new();
            let mut slots = vec![None; kernel.slots.len()];
            for &m in members {
                let inst = &kernel.preamble[m];
                for (src, def) in inst.srcs().into_iter().zip(&plan.defs[m]) {
                    let v = def.and_then(|d| computed.get(&d).copied().or(values[d]));
                    if let Some(slot) = slots.get_mut(src.index()) {
                        *slot = v;
                    }
                }
                self.emit_scalar_inst(b, inst, &mut slots)?;
                let v = (inst.dst())
                    .and_then(|dst| slots.get(dst.index()).copied().flatten())
                    .ok_or_else(|| internal("a deferred instruction defines nothing"))?;
                computed.insert(m, v);
            }
            let mut args = Vec::with_capacity(leaves.len());
            for (&m, &dtype) in leaves.iter().zip(&types) {
                let v = match computed.get(&m) {
                    Some(v) => *v,
                    None => Emitter {
                        b: &mut *b,
                        w: 1,
                        imports: self.fx.imports,
                    }
                    .constant(rfx_ir::Scalar::zero(dtype)),
                };
                args.push(BlockArg::Value(v));
            }
            b.ins().jump(merge, &args);
        }
        b.switch_to_block(merge);
        let params = b.block_params(merge).to_vec();
        for (&m, v) in leaves.iter().zip(params) {
            values[m] = Some(v);
        }
        Ok(())
    }
}
