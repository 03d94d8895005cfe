//! A whole program as one function run by one block ([`ONE_LAUNCH_MAX_UNITS`]), its loops
//! included.
//!
//! Each kernel's code is its own function's body in a block scope of its own, and
//! `__syncthreads()` separates consecutive kernels: all of a block's global memory accesses
//! before the barrier are complete and visible to the whole block after it, so a kernel reads
//! what the kernels before it wrote, and arena space the memory plan reuses is written only
//! after its earlier readers are done. No kernel body returns early (only tree kernels do,
//! and they are not fused), so every thread reaches every barrier. Outputs lose
//! `__restrict__` here (a later kernel may read what an earlier one wrote through them);
//! inputs, never written, keep it.
//!
//! A program loop ([`rfx_ir::repeat::KernelLoop`]) becomes a `for` loop of the function around
//! its kernels' code, so the generated source holds the trip count once and does not grow with
//! it. Every kernel inside a loop has a barrier before it (the previous iteration's last kernel
//! wrote what the first one reads). A loop with an exit flag reads it after each iteration:
//! `__syncthreads()` makes the flag's write visible, then `__syncthreads_or(flag)` gives every
//! thread the same answer and keeps any thread from starting the next iteration (which writes
//! the flag again) before all have read it; the block leaves the loop together when it is
//! false.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::repeat::{KernelLoop, Step};
use rfx_ir::{BufId, DType};
use rfx_lower::CompileOptions;

use super::{
    Emitter, Helper, KernelLaunch, KernelPlan, ONE_LAUNCH_BLOCK, ONE_LAUNCH_MAX_EXTRA_POINTS,
    ONE_LAUNCH_MAX_UNITS, memory_type,
};

/// The whole program (run by `steps`) as one function run by one block, appended to `out`;
/// `None` (and nothing appended) when the program does not qualify: fewer than two kernels
/// and no loop, a block-tree reduction, a kernel of more than [`ONE_LAUNCH_MAX_UNITS`] units,
/// or one whose extra rounds in one block would add more than [`ONE_LAUNCH_MAX_EXTRA_POINTS`]
/// points to a thread's work.
pub(super) fn emit_one_launch(
    program: &LirProgram,
    options: &CompileOptions,
    steps: &[Step],
    helpers: &mut BTreeSet<Helper>,
    out: &mut String,
) -> Option<KernelLaunch> {
    if program.kernels().len() < 2 && program.loops().is_empty() {
        return None;
    }
    let mut plans = Vec::with_capacity(program.kernels().len());
    for kernel in program.kernels() {
        let emitter = Emitter {
            program,
            kernel,
            fast_math: options.fast_math,
            helpers: &mut *helpers,
            out: String::new(),
        };
        let plan = emitter.plan();
        let extra_rounds = plan.units.div_ceil(ONE_LAUNCH_BLOCK).saturating_sub(1);
        if plan.tree
            || plan.units > ONE_LAUNCH_MAX_UNITS
            || extra_rounds.saturating_mul(plan.reduced_points.max(1)) > ONE_LAUNCH_MAX_EXTRA_POINTS
        {
            return None;
        }
        plans.push(plan);
    }
    let params: BTreeSet<BufId> = plans.iter().flat_map(|p| p.params.iter().copied()).collect();
    let uses_arena = plans.iter().any(|p| p.uses_arena);
    let units = plans.iter().map(|p| p.units).max().unwrap_or(0);
    let entry = format!("rfx_program_{}", program.name());
    let mut text = String::new();
    let loops = match program.loops().len() {
        0 => String::new(),
        n => format!(", {n} loop(s) over them as loops of the function"),
    };
    let _ = writeln!(
        text,
        "// program `{}` in one launch: {} kernel(s) run by one block in order, a barrier between them{loops}.",
        program.name(),
        plans.len()
    );
    let _ = writeln!(text, "extern \"C\" __global__ void {entry}(");
    let mut param_text = Vec::new();
    for &buf in &params {
        let Some(buffer) = program.buffer(buf) else {
            continue;
        };
        let ty = memory_type(buffer.ty.dtype);
        match &buffer.storage {
            Storage::Input { name } => param_text.push((
                format!("const {ty}* __restrict__ {buf}"),
                format!("input `{name}`"),
            )),
            Storage::Output { name } => param_text.push((format!("{ty}* {buf}"), format!("output `{name}`"))),
            Storage::Arena { .. } | Storage::Literal { .. } => {}
        }
    }
    if uses_arena {
        param_text.push(("unsigned char* arena".to_string(), "temporaries".to_string()));
    }
    for (i, (param, what)) in param_text.iter().enumerate() {
        let comma = if i + 1 < param_text.len() { "," } else { "" };
        let _ = writeln!(text, "  {param}{comma}  // {what}");
    }
    text.push_str(") {\n");
    let mut writer = StepWriter {
        program,
        fast_math: options.fast_math,
        plans: &plans,
        params: &params,
        uses_arena,
        helpers,
        text,
        first: true,
    };
    writer.steps(steps, 1, false);
    let mut text = writer.text;
    text.push_str("}\n");
    out.push('\n');
    out.push_str(&text);
    Some(KernelLaunch {
        entry,
        params: params.into_iter().collect(),
        uses_arena,
        units,
        tree: None,
        single_block: true,
    })
}

/// Writes the steps of a one-launch function's body.
struct StepWriter<'a> {
    program: &'a LirProgram,
    fast_math: bool,
    plans: &'a [KernelPlan],
    /// The function's input and output parameters.
    params: &'a BTreeSet<BufId>,
    /// Whether the function takes the arena.
    uses_arena: bool,
    helpers: &'a mut BTreeSet<Helper>,
    text: String,
    /// No kernel's code has been written yet (the first needs no barrier before it).
    first: bool,
}

impl StepWriter<'_> {
    fn line(&mut self, indent: usize, line: &str) {
        for _ in 0..indent {
            self.text.push_str("  ");
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn steps(&mut self, steps: &[Step], indent: usize, in_loop: bool) {
        for step in steps {
            match step {
                Step::Kernel(index) => self.kernel(*index, indent, in_loop),
                Step::Loop { spec, body } => self.repeat(spec, body, indent),
            }
        }
    }

    /// Kernel `index`'s code in a block scope, after a barrier unless it is the function's
    /// first code outside any loop.
    fn kernel(&mut self, index: usize, indent: usize, in_loop: bool) {
        let (Some(kernel), Some(plan)) = (self.program.kernels().get(index), self.plans.get(index)) else {
            return;
        };
        let mut emitter = Emitter {
            program: self.program,
            kernel,
            fast_math: self.fast_math,
            helpers: &mut *self.helpers,
            out: String::new(),
        };
        if !self.first || in_loop {
            emitter.line(0, "__syncthreads();");
        }
        self.first = false;
        emitter.emit_comment(plan);
        emitter.line(0, "{");
        emitter.emit_body(plan);
        emitter.line(0, "}");
        let code = emitter.out;
        for line in code.lines() {
            if line.is_empty() {
                self.text.push('\n');
            } else {
                self.line(indent, line);
            }
        }
    }

    /// A loop over `body`, `spec.trips` times at most, leaving early when its exit flag is
    /// false after an iteration.
    fn repeat(&mut self, spec: &KernelLoop, body: &[Step], indent: usize) {
        let counter = format!("rfx_trip{indent}");
        let exit = spec.exit.and_then(|flag| self.flag(flag));
        let stop = match (&spec.exit, &exit) {
            (None, _) => String::new(),
            (Some(flag), Some(_)) => format!(", leaving when {flag} is false"),
            // Not readable here: running every trip gives the same result (a masked body).
            (Some(flag), None) => format!(", every trip ({flag} unread)"),
        };
        self.line(
            indent,
            &format!(
                "// loop over kernels {}..{}: at most {} trip(s){stop}.",
                spec.first, spec.end, spec.trips
            ),
        );
        self.line(
            indent,
            &format!(
                "for (unsigned long long {counter} = 0ull; {counter} < {}ull; ++{counter}) {{",
                spec.trips
            ),
        );
        self.steps(body, indent + 1, true);
        if let Some(flag) = exit {
            self.line(indent + 1, "__syncthreads();");
            self.line(indent + 1, &format!("if (!__syncthreads_or({flag} != 0)) break;"));
        }
        self.line(indent, "}");
        self.first = false;
    }

    /// The expression reading a loop's exit flag `buf` (a `bool` scalar, one byte in memory),
    /// or `None` when the function cannot read it.
    fn flag(&self, buf: BufId) -> Option<String> {
        let buffer = self.program.buffer(buf)?;
        if buffer.ty.dtype != DType::Bool || buffer.ty.shape.numel() != 1 {
            return None;
        }
        match buffer.storage {
            Storage::Arena { offset } if self.uses_arena => Some(format!("arena[{offset}]")),
            Storage::Output { .. } if self.params.contains(&buf) => Some(format!("{buf}[0]")),
            _ => None,
        }
    }
}
