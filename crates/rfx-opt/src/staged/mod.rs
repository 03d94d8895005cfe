//! Kernels with loops: [`crate::optimize`] for a HIR kernel that holds `loop` nodes.
//!
//! The kernel is split into *stages*, loop-free HIR kernels that each go through the ordinary
//! pipeline, and its loops, each compiled to a range of kernels that a
//! [`KernelLoop`] repeats. Stage `s` holds the nodes whose operands are all available after the
//! first `s` loops (in node order): a loop's results are available to the stages after its
//! own. Constants, literals and `iota`s are computed again in every stage that reads them, so
//! folding and fusion see them; every other value a later stage or a loop reads is stored in a
//! temporary buffer.
//!
//! A loop with `n` carries gets one temporary `C_k` per carry. Copy kernels write the initial
//! values into them before the loop (a value computed only to start a carry is written there
//! directly); the loop's range is its body, compiled the same way (it may hold loops), reading
//! `C_k` and the invariants' buffers and writing fresh temporaries `N_k`, then copy kernels `N_k ->
//! C_k`; the loop's results are the `C_k`. A carry the body returns unchanged has neither `N_k` nor
//! a copy, and a carry whose next value is computed after the range's last read of it is written in
//! place (`in_place.rs`). A `while_loop` body is *masked*: it computes `keep = cond(c)`, `next =
//! body(c)` and `c' = select(keep, next, c)`, and writes `keep` to the loop's exit flag, so that an
//! iteration after the test failed changes nothing and the loop may stop as soon as the flag is
//! false (a carry updated by one row has its row masked instead, and keeps its row store). A loop that runs no iteration, or whose body returns every carry unchanged, is its
//! initial values; a loop of one trip is its body (masked by its test for a `while_loop`). Carries
//! nothing reads after the loop (and that neither the kept carries nor the test need) are dropped,
//! and constant invariants are computed in the body (`prepare.rs`); what the body and the test
//! compute from the invariants alone is computed once, before the loop (`hoist.rs`).
//!
//! Stages and bodies are *linked* into one program: every stage program's buffers are
//! renumbered into the program's, its inputs bound to the buffers holding their values and its
//! outputs to the buffers their readers expect (a kernel output's buffer, a carry's `N_k`, a
//! temporary, the exit flag). A kernel output that is a loop's result or a value of an earlier
//! stage is copied into its output buffer by the stage where it is available.

mod hoist;
mod in_place;
mod prepare;

use std::collections::HashMap;

use rfx_ir::hir::{Builder, Kernel, Loop, Op, RowUpdate, ValueId, verify};
use rfx_ir::mir::{BufKind, Buffer, MirInst, MirKernel, MirOp, MirProgram, MirValue, Store};
use rfx_ir::repeat::KernelLoop;
use rfx_ir::{BufId, TensorType};

use crate::config::OptConfig;
use crate::error::OptError;
use crate::report::{OptReport, StopReason};
use prepare::{masked_body, prepare};

/// `true` when `kernel` has a loop node (bodies are only reached through one).
pub(crate) fn has_loops(kernel: &Kernel) -> bool {
    kernel.nodes().iter().any(|n| matches!(n.op, Op::Loop(_)))
}

/// [`crate::optimize`] for a kernel with loops: stages optimised by the ordinary pipeline,
/// loops as [`KernelLoop`]s over their bodies' kernels, linked into one verified program.
pub(crate) fn optimize_staged(
    kernel: &Kernel,
    config: &OptConfig,
) -> Result<(MirProgram, OptReport), OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    let start = std::time::Instant::now();
    let mut linker = Linker {
        config,
        buffers: Vec::new(),
        kernels: Vec::new(),
        loops: Vec::new(),
        report: OptReport {
            ops_before: deep_op_count(kernel),
            ..OptReport::default()
        },
    };
    let inputs: Vec<BufId> = kernel
        .inputs()
        .map(|(_, name, ty)| {
            linker.push_buffer(
                ty.clone(),
                BufKind::Input {
                    name: name.to_string(),
                },
            )
        })
        .collect();
    let mut targets = Vec::with_capacity(kernel.outputs().len());
    for output in kernel.outputs() {
        let ty = kernel
            .value_type(output.value)
            .ok_or(OptError::InvalidValue(output.value))?;
        targets.push(Some(linker.push_buffer(
            ty.clone(),
            BufKind::Output {
                name: output.name.clone(),
            },
        )));
    }
    linker.level(kernel, &inputs, &targets, "")?;
    let Linker {
        buffers,
        mut kernels,
        mut loops,
        mut report,
        ..
    } = linker;
    let buffers = in_place::drop_untouched_temps(buffers, &mut kernels, &mut loops);
    let program = MirProgram::from_parts(kernel.name(), buffers, kernels).with_loops(loops);
    rfx_ir::mir::verify(&program).map_err(|e| OptError::PassBroke {
        pass: "link",
        errors: e.to_string(),
    })?;
    report.kernels = program.kernels().len();
    // The time outside the stages' passes: splitting, the HIR rewrites and linking.
    let passes: std::time::Duration = report.time_per_pass.iter().map(|(_, t)| *t).sum();
    report
        .time_per_pass
        .push(("link".to_string(), start.elapsed().saturating_sub(passes)));
    Ok((program, report))
}

/// Non-input ops of `kernel` and of every loop body and test in it.
fn deep_op_count(kernel: &Kernel) -> usize {
    let inner: usize = kernel
        .nodes()
        .iter()
        .filter_map(|n| match &n.op {
            Op::Loop(spec) => Some(deep_op_count(&spec.body) + spec.cond.as_ref().map_or(0, deep_op_count)),
            _ => None,
        })
        .sum();
    kernel.op_count() + inner
}

/// The program being linked: buffers, kernels and loops so far, and the merged report.
struct Linker<'c> {
    config: &'c OptConfig,
    buffers: Vec<Buffer>,
    kernels: Vec<MirKernel>,
    loops: Vec<KernelLoop>,
    report: OptReport,
}

/// What a value of a level (a kernel or a loop body) is, for splitting it into stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Not needed by the level's outputs.
    Dead,
    /// A kernel input: in its bound buffer.
    Input,
    /// A constant, literal or `iota`: computed again by each stage that reads it.
    Leaf,
    /// Computed by the stage of this index.
    Stage(usize),
    /// Final carry `carry` of the loop of this index (in node order).
    LoopResult { index: usize, carry: usize },
}

/// How one level (the kernel, or a loop body) splits into stages and loops.
struct Split {
    class: Vec<Class>,
    /// The loop nodes, in node order.
    loops: Vec<ValueId>,
    /// Values some later stage or loop reads from a buffer (not leaves).
    stored: Vec<bool>,
}

impl Split {
    fn new(kernel: &Kernel) -> Split {
        let live = crate::passes::live_values(kernel);
        let nodes = kernel.nodes();
        let mut class = vec![Class::Dead; nodes.len()];
        let mut loops = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            if !live[index] && !matches!(node.op, Op::Input { .. }) {
                continue;
            }
            let arg_class = |a: &ValueId| class.get(a.index()).copied().unwrap_or(Class::Dead);
            class[index] = match &node.op {
                Op::Input { .. } => Class::Input,
                Op::Loop(_) => {
                    loops.push(ValueId::new(index));
                    Class::LoopResult {
                        index: loops.len() - 1,
                        carry: 0,
                    }
                }
                Op::LoopOutput { index: carry } => match node.args.first().map(arg_class) {
                    Some(Class::LoopResult { index, .. }) => Class::LoopResult { index, carry: *carry },
                    _ => Class::Dead,
                },
                _ if node.args.is_empty() => Class::Leaf,
                _ => Class::Stage(
                    node.args
                        .iter()
                        .map(|a| available(arg_class(a)))
                        .max()
                        .unwrap_or(0),
                ),
            };
        }
        let mut stored = vec![false; nodes.len()];
        for (index, node) in nodes.iter().enumerate() {
            let user = class[index];
            for a in &node.args {
                if let Some(Class::Stage(s)) = class.get(a.index()).copied() {
                    let later = match user {
                        Class::Stage(t) => t != s,
                        Class::LoopResult { .. } => matches!(node.op, Op::Loop(_)),
                        _ => false,
                    };
                    stored[a.index()] |= later;
                }
            }
        }
        Split { class, loops, stored }
    }

    /// The first stage after which a value of this class can be read.
    fn available_at(&self, value: ValueId) -> usize {
        self.class.get(value.index()).copied().map_or(0, available)
    }
}

/// The first stage that can read a value of class `class`.
fn available(class: Class) -> usize {
    match class {
        Class::Stage(s) => s,
        Class::LoopResult { index, .. } => index + 1,
        Class::Dead | Class::Input | Class::Leaf => 0,
    }
}

/// Where the values of one level live once computed.
struct Level<'k> {
    kernel: &'k Kernel,
    split: Split,
    /// The buffer holding each value, once it is in one.
    loc: HashMap<ValueId, BufId>,
    /// The carries' buffers `C_k` of each loop, which hold its results once it has run.
    carries: Vec<Vec<BufId>>,
    /// The values written straight into a carry's buffer: each is read only as that carry's
    /// initial value.
    direct: HashMap<ValueId, BufId>,
    /// Where each level output goes; `None`: nowhere (a carry the body returns unchanged).
    targets: &'k [Option<BufId>],
    prefix: &'k str,
}

impl Level<'_> {
    fn buffer_of(&self, value: ValueId) -> Result<BufId, OptError> {
        match self.split.class.get(value.index()) {
            Some(Class::LoopResult { index, carry }) => self
                .carries
                .get(*index)
                .and_then(|r| r.get(*carry))
                .copied()
                .ok_or(OptError::InvalidValue(value)),
            _ => self.loc.get(&value).copied().ok_or(OptError::InvalidValue(value)),
        }
    }
}

/// One stage as a kernel of its own: its values and where its inputs and outputs live.
struct StageKernel {
    kernel: Kernel,
    /// The buffer bound to each input, by input name.
    inputs: HashMap<String, BufId>,
    /// The buffer each output writes, by output name.
    outputs: HashMap<String, BufId>,
}

impl Linker<'_> {
    fn push_buffer(&mut self, ty: TensorType, kind: BufKind) -> BufId {
        self.buffers.push(Buffer { ty, kind });
        BufId::new(self.buffers.len() - 1)
    }

    fn temp(&mut self, ty: &TensorType) -> BufId {
        self.push_buffer(ty.clone(), BufKind::Temp)
    }

    /// Compiles `kernel` (a program's kernel or a loop body) with its inputs in `inputs` and
    /// output `j` written to `targets[j]` (or not at all), appending kernels and loops.
    fn level(
        &mut self,
        kernel: &Kernel,
        inputs: &[BufId],
        targets: &[Option<BufId>],
        prefix: &str,
    ) -> Result<(), OptError> {
        let kernel = prepare(kernel)?;
        let split = Split::new(&kernel);
        // Each loop's carry buffers, made first: a value only a loop's carry starts from is
        // written straight into that carry's buffer.
        let mut carries = Vec::with_capacity(split.loops.len());
        let mut direct = HashMap::new();
        let uses = use_counts(&kernel, &split);
        for &node in &split.loops {
            let (spec, operands) = loop_node(&kernel, node)?;
            let mut bufs = Vec::with_capacity(spec.carries);
            for (k, &operand) in operands.iter().take(spec.carries).enumerate() {
                let ty = spec.carry_type(k).ok_or(OptError::InvalidValue(node))?;
                let buf = self.temp(ty);
                let class = split.class.get(operand.index()).copied();
                if uses.get(operand.index()) == Some(&1)
                    && matches!(class, Some(Class::Stage(_) | Class::Leaf))
                {
                    direct.insert(operand, buf);
                }
                bufs.push(buf);
            }
            carries.push(bufs);
        }
        let mut level = Level {
            kernel: &kernel,
            split,
            loc: kernel
                .inputs()
                .map(|(v, _, _)| v)
                .zip(inputs.iter().copied())
                .collect(),
            carries,
            direct,
            targets,
            prefix,
        };
        let loops = level.split.loops.clone();
        for stage in 0..=loops.len() {
            self.stage(&mut level, stage)?;
            if let Some(&node) = loops.get(stage) {
                self.compile_loop(&level, node, stage)?;
            }
        }
        Ok(())
    }

    /// Builds, optimises and links stage `stage` of `level`.
    fn stage(&mut self, level: &mut Level<'_>, stage: usize) -> Result<(), OptError> {
        let Some(stage_kernel) = self.stage_kernel(level, stage)? else {
            return Ok(());
        };
        let (program, report) = crate::passes::optimize_loop_free(&stage_kernel.kernel, self.config)?;
        merge_report(&mut self.report, report);
        let prefix = format!("{}s{stage}_", level.prefix);
        self.link(&program, &stage_kernel, &prefix)
    }

    /// The loop-free kernel of stage `stage`, or `None` when it has nothing to write. Records
    /// where the values it stores will be.
    fn stage_kernel(&mut self, level: &mut Level<'_>, stage: usize) -> Result<Option<StageKernel>, OptError> {
        let kernel = level.kernel;
        let split = &level.split;
        // (value, buffer) pairs the stage writes: the level outputs available now, then the
        // values later stages and loops read.
        let mut writes: Vec<(ValueId, BufId)> = Vec::new();
        for (output, target) in kernel.outputs().iter().zip(level.targets) {
            if let Some(target) = target
                && split.available_at(output.value) == stage
            {
                writes.push((output.value, *target));
            }
        }
        for (index, node) in kernel.nodes().iter().enumerate() {
            let value = ValueId::new(index);
            let needed = match split.class[index] {
                Class::Stage(s) => s == stage && split.stored[index],
                // A constant or `iota` a loop reads is stored by the stage before that loop.
                Class::Leaf => {
                    !level.loc.contains_key(&value)
                        && split
                            .loops
                            .get(stage)
                            .and_then(|&l| kernel.node(l))
                            .is_some_and(|l| l.args.contains(&value))
                }
                _ => false,
            };
            if !needed {
                continue;
            }
            let buf = match writes.iter().find(|(v, _)| *v == value) {
                Some(&(_, buf)) => buf,
                None => {
                    let buf = match level.direct.get(&value) {
                        Some(&carry) => carry,
                        None => self.temp(&node.ty),
                    };
                    writes.push((value, buf));
                    buf
                }
            };
            level.loc.insert(value, buf);
        }
        if writes.is_empty() {
            return Ok(None);
        }
        let stage_kernel = build_stage(level, stage, &writes)?;
        Ok(Some(stage_kernel))
    }

    /// Appends the kernels of `program`, a compiled stage, with its buffers renumbered: its
    /// inputs and outputs to the buffers `stage` binds, its literals and temporaries fresh.
    fn link(&mut self, program: &MirProgram, stage: &StageKernel, prefix: &str) -> Result<(), OptError> {
        let mut map = Vec::with_capacity(program.buffers().len());
        for buffer in program.buffers() {
            let bound = match &buffer.kind {
                BufKind::Input { name } => stage.inputs.get(name).copied(),
                BufKind::Output { name } => stage.outputs.get(name).copied(),
                BufKind::Literal { .. } | BufKind::Temp => {
                    Some(self.push_buffer(buffer.ty.clone(), buffer.kind.clone()))
                }
            };
            map.push(bound.ok_or_else(|| OptError::PassBroke {
                pass: "link",
                errors: format!("stage buffer of kind {:?} is bound to nothing", buffer.kind),
            })?);
        }
        let renumber = |buf: &mut BufId| {
            if let Some(&to) = map.get(buf.index()) {
                *buf = to;
            }
        };
        for kernel in program.kernels() {
            let mut kernel = kernel.clone();
            kernel.name = format!("{prefix}{}", kernel.name);
            for inst in &mut kernel.body {
                if let MirOp::Load { buf, .. } | MirOp::Gather { buf } = &mut inst.op {
                    renumber(buf);
                }
            }
            kernel.stores.iter_mut().for_each(|s| renumber(&mut s.buf));
            kernel.reductions.iter_mut().for_each(|r| renumber(&mut r.buf));
            self.kernels.push(kernel);
        }
        Ok(())
    }

    /// Compiles loop `index` of `level` (the node `node`): copies into the carries' buffers
    /// (of the initial values not written there already), then the range (the body and the
    /// copies back) as a [`KernelLoop`].
    fn compile_loop(&mut self, level: &Level<'_>, node: ValueId, index: usize) -> Result<(), OptError> {
        let (spec, operands) = loop_node(level.kernel, node)?;
        let operand_bufs = operands
            .iter()
            .map(|&a| level.buffer_of(a))
            .collect::<Result<Vec<_>, _>>()?;
        let carries = level.carries.get(index).ok_or(OptError::InvalidValue(node))?;
        let prefix = format!("{}l{index}_", level.prefix);
        let init: Vec<(BufId, BufId)> = operand_bufs
            .iter()
            .copied()
            .zip(carries.iter().copied())
            .filter(|(from, to)| from != to)
            .collect();
        self.copies(&format!("{prefix}init"), &init)?;

        // Carries updated by a row are stored by row stores (`in_place.rs`); a while body
        // masks their rows, which it always computes, so their stores follow the body and
        // may follow other reads of the carry. A fori body's row may be stored before it.
        let mut updates = spec.body.row_updates(spec.carries);
        if spec.cond.is_none() {
            updates.retain(|u| !u.read_elsewhere);
        }
        let body = match &spec.cond {
            Some(cond) if updates.is_empty() => masked_body(spec, cond)?,
            Some(cond) => in_place::masked_row_updates(spec, cond, &updates)?,
            None if updates.is_empty() => spec.body.clone(),
            None => in_place::without_row_updates(&spec.body, &updates)?,
        };
        let body_inputs: Vec<ValueId> = body.inputs().map(|(v, _, _)| v).collect();
        let mut targets = Vec::with_capacity(body.outputs().len());
        let mut back = Vec::new();
        for (k, output) in body.outputs().iter().enumerate() {
            let target = match carries.get(k) {
                // A carry the body returns unchanged stays in its buffer.
                Some(_) if body_inputs.get(k) == Some(&output.value) => None,
                Some(&carry) => {
                    let next = self.temp(&self.buffer_type(carry)?);
                    back.push((next, carry));
                    Some(next)
                }
                // The rows and indices of row updates, then a masked body's test result.
                None => {
                    let ty = body
                        .value_type(output.value)
                        .ok_or(OptError::InvalidValue(output.value))?;
                    Some(self.temp(ty))
                }
            };
            targets.push(target);
        }
        let exit = match spec.cond {
            Some(_) => targets.last().copied().flatten(),
            None => None,
        };
        let mut range_inputs = carries.to_vec();
        range_inputs.extend(operand_bufs.get(spec.carries..).unwrap_or_default());

        let first_loop = self.loops.len();
        let first = self.kernels.len();
        let (early, late) = self.row_stores(spec, &updates, &range_inputs, &targets, &prefix)?;
        self.kernels.extend(early);
        self.level(&body, &range_inputs, &targets, &prefix)?;
        self.kernels.extend(late);
        let inner = self.loops.get(first_loop..).unwrap_or_default();
        if let Some(range) = self.kernels.get_mut(first..) {
            back.retain(|&(next, carry)| !in_place::write_in_place(range, first, inner, next, carry));
        }
        self.copies(&format!("{prefix}next"), &back)?;
        let end = self.kernels.len();
        if first < end {
            self.loops.insert(
                first_loop,
                KernelLoop {
                    first,
                    end,
                    trips: spec.trips,
                    exit,
                },
            );
        }
        Ok(())
    }

    /// The row-store kernels of a loop's row `updates` (`in_place.rs`): those whose row and
    /// index are body inputs (in `range_inputs`) run first in the range, reading the values
    /// entering the iteration; the others after the body, from the extra outputs' `targets`
    /// (after the carries, in [`in_place::without_row_updates`]'s order). A while body's rows
    /// are masked ([`in_place::masked_row_updates`]): always computed, so stored after it.
    fn row_stores(
        &mut self,
        spec: &Loop,
        updates: &[RowUpdate],
        range_inputs: &[BufId],
        targets: &[Option<BufId>],
        prefix: &str,
    ) -> Result<(Vec<MirKernel>, Vec<MirKernel>), OptError> {
        let inputs: Vec<ValueId> = spec.body.inputs().map(|(v, _, _)| v).collect();
        let mut extra = targets.iter().skip(spec.carries).copied();
        let (mut early, mut late) = (Vec::new(), Vec::new());
        for (i, update) in updates.iter().enumerate() {
            let mut source = |value: ValueId, computed: bool| match inputs
                .iter()
                .position(|&v| v == value)
                .filter(|_| !computed)
            {
                Some(p) => Ok((
                    range_inputs
                        .get(p)
                        .copied()
                        .ok_or(OptError::InvalidValue(value))?,
                    true,
                )),
                None => extra
                    .next()
                    .flatten()
                    .map(|b| (b, false))
                    .ok_or(OptError::InvalidValue(value)),
            };
            let (row, row_in) = source(update.row, spec.cond.is_some())?;
            let (index, index_in) = source(update.index, false)?;
            let row_type = spec
                .body
                .value_type(update.row)
                .ok_or(OptError::InvalidValue(update.row))?;
            let carry_type = spec
                .carry_type(update.carry)
                .ok_or(OptError::InvalidValue(update.row))?;
            let rows = carry_type.shape.dims().first().copied().unwrap_or(1);
            let carry = *range_inputs
                .get(update.carry)
                .ok_or(OptError::InvalidValue(update.row))?;
            let name = format!("{prefix}row{i}");
            let kernel = in_place::row_store_kernel(name, row, row_type, carry, index, rows);
            if row_in && index_in {
                early.push(kernel);
            } else {
                late.push(kernel);
            }
        }
        Ok((early, late))
    }

    fn buffer_type(&self, buf: BufId) -> Result<TensorType, OptError> {
        self.buffers
            .get(buf.index())
            .map(|b| b.ty.clone())
            .ok_or_else(|| OptError::PassBroke {
                pass: "link",
                errors: format!("{buf} does not exist"),
            })
    }

    /// Appends kernels copying each `(from, to)` pair: one kernel per shape, each element read
    /// and written at its own row-major position.
    fn copies(&mut self, name: &str, pairs: &[(BufId, BufId)]) -> Result<(), OptError> {
        let mut kernels: Vec<MirKernel> = Vec::new();
        for &(from, to) in pairs {
            let ty = self.buffer_type(from)?;
            let position = match kernels.iter().position(|k| k.domain == ty.shape) {
                Some(position) => position,
                None => {
                    kernels.push(MirKernel {
                        name: name.to_string(),
                        domain: ty.shape.clone(),
                        body: Vec::new(),
                        stores: Vec::new(),
                        reductions: Vec::new(),
                    });
                    kernels.len() - 1
                }
            };
            let kernel = &mut kernels[position];
            kernel.body.push(MirInst {
                op: MirOp::Load {
                    buf: from,
                    strides: ty.shape.strides(),
                    offset: 0,
                },
                args: Vec::new(),
                dtype: ty.dtype,
            });
            kernel
                .stores
                .push(Store::whole(to, MirValue::new(kernel.body.len() - 1)));
        }
        self.kernels.extend(kernels);
        Ok(())
    }
}

/// The spec and operands of the loop node `node`.
fn loop_node(kernel: &Kernel, node: ValueId) -> Result<(&Loop, &[ValueId]), OptError> {
    match kernel.node(node) {
        Some(rfx_ir::hir::Node {
            op: Op::Loop(spec),
            args,
            ..
        }) => Ok((spec, args)),
        _ => Err(OptError::InvalidValue(node)),
    }
}

/// How many times each value is read: as an operand of a live node or as an output.
fn use_counts(kernel: &Kernel, split: &Split) -> Vec<usize> {
    let mut uses = vec![0; kernel.nodes().len()];
    let live_args = kernel
        .nodes()
        .iter()
        .zip(&split.class)
        .filter(|(_, class)| **class != Class::Dead)
        .flat_map(|(node, _)| node.args.iter());
    for value in live_args.chain(kernel.outputs().iter().map(|o| &o.value)) {
        if let Some(count) = uses.get_mut(value.index()) {
            *count += 1;
        }
    }
    uses
}

/// The kernel of stage `stage`: its nodes, the leaves they read, an input per value it reads
/// from an earlier stage, a loop or the level's inputs, and an output per `(value, buffer)` of
/// `writes`.
fn build_stage(
    level: &Level<'_>,
    stage: usize,
    writes: &[(ValueId, BufId)],
) -> Result<StageKernel, OptError> {
    let kernel = level.kernel;
    let class = &level.split.class;
    let member = |v: ValueId| class.get(v.index()) == Some(&Class::Stage(stage));
    // The values the stage computes or reads: members, then what they and the writes need.
    let mut used = vec![false; kernel.nodes().len()];
    for (index, node) in kernel.nodes().iter().enumerate() {
        if member(ValueId::new(index)) {
            used[index] = true;
            for a in &node.args {
                used[a.index()] = true;
            }
        }
    }
    for (value, _) in writes {
        used[value.index()] = true;
    }
    let mut b = Builder::new(format!("{}_s{stage}", kernel.name()));
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut inputs = HashMap::new();
    // Values from outside the stage become its inputs, in node order.
    for index in 0..kernel.nodes().len() {
        let value = ValueId::new(index);
        let outside = matches!(class[index], Class::Input | Class::LoopResult { .. })
            || matches!(class[index], Class::Stage(s) if s != stage);
        if used[index] && outside {
            let ty = kernel.value_type(value).ok_or(OptError::InvalidValue(value))?;
            let name = format!("in{}", inputs.len());
            map.insert(
                value,
                b.input(name.clone(), ty.clone()).map_err(OptError::Rebuild)?,
            );
            inputs.insert(name, level.buffer_of(value)?);
        }
    }
    for (index, node) in kernel.nodes().iter().enumerate() {
        let value = ValueId::new(index);
        if !used[index] || !(member(value) || class[index] == Class::Leaf) {
            continue;
        }
        let args = node
            .args
            .iter()
            .map(|a| map.get(a).copied().ok_or(OptError::InvalidValue(*a)))
            .collect::<Result<Vec<_>, _>>()?;
        map.insert(
            value,
            b.copy(&node.op, &args, &node.ty).map_err(OptError::Rebuild)?,
        );
    }
    let mut outputs = HashMap::new();
    for (j, (value, buf)) in writes.iter().enumerate() {
        let name = format!("out{j}");
        let built = map.get(value).copied().ok_or(OptError::InvalidValue(*value))?;
        b.output(name.clone(), built).map_err(OptError::Rebuild)?;
        outputs.insert(name, *buf);
    }
    Ok(StageKernel {
        kernel: b.finish().map_err(OptError::Rebuild)?,
        inputs,
        outputs,
    })
}

/// Adds a stage's report to the program's: op counts, rules and e-graph sizes summed, the
/// first limit that stopped a stage's rewriting (else the first stop reason), missed fusions
/// (numbered by their stage's kernel) appended, pass times summed by pass.
fn merge_report(total: &mut OptReport, part: OptReport) {
    total.ops_after += part.ops_after;
    for (rule, count) in part.rules_fired {
        *total.rules_fired.entry(rule).or_default() += count;
    }
    total.egraph_nodes += part.egraph_nodes;
    total.egraph_classes += part.egraph_classes;
    total.iterations += part.iterations;
    let limited = |s: Option<StopReason>| {
        matches!(
            s,
            Some(StopReason::IterationLimit(_) | StopReason::NodeLimit(_) | StopReason::TimeLimit)
        )
    };
    if total.stop_reason.is_none() || (!limited(total.stop_reason) && limited(part.stop_reason)) {
        total.stop_reason = part.stop_reason;
    }
    total.missed_fusions.extend(part.missed_fusions);
    for (pass, time) in part.time_per_pass {
        match total.time_per_pass.iter_mut().find(|(p, _)| *p == pass) {
            Some((_, sum)) => *sum += time,
            None => total.time_per_pass.push((pass, time)),
        }
    }
}
