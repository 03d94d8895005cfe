//! The differential oracle: one kernel run on every path and compared.
//!
//! The paths: `lir-interp` (`rfx_opt::optimize`, `rfx_lower::lower` and the LIR interpreter,
//! the reference of every backend); `hir-interp` (the HIR interpreter, [`Mode::Native`],
//! compared with `lir-interp`); `cpu`, `metal`, `cuda` (the [`Backends`] a caller hands in,
//! run on the same LIR and compared with `lir-interp`).
//!
//! The comparison rules are exact, so a reported mismatch is a bug, never noise:
//! - a backend must give the LIR interpreter's bits (any NaN equals any NaN) on kernels without
//!   transcendental ops ([`UnaryOp::is_transcendental`], `pow`, `atan2`);
//! - GPU kernels whose schedule says `gpu_tree` (lowering sets it where 1024 or more points per
//!   output are reduced) run as trees, whose float rounding differs from the interpreter's
//!   order: there only outputs computed without any float reduction are compared (an i32 or
//!   bool output computed from a float sum may differ too);
//! - `hir-interp` must give `lir-interp`'s bits on kernels without float reductions where no
//!   refining rewrite fired: lowering splits reductions into lanes (`Schedule::reduce_lanes`),
//!   which changes float sums and, through ±0 ties, `max` and `min`; a refining rewrite
//!   replaces `pow(x, 2)` by the more accurate `x * x`. Both interpreters compute
//!   transcendentals with the same `rfx_ir::semantics`.
//! - kernels with transcendentals ([`Transcendental`]) are compared in two parts on each
//!   backend, which must also give the same bits on a second call. The backend runs the kernel
//!   with every transcendental node's value and operands as extra outputs ([`Probed`]).
//!   Every transcendental value must lie within the backend's documented bound
//!   ([`Backend::ulp_bound`]) of the `f64` oracle at the backend's own operands; and the
//!   kernel's outputs and those operands must have the bits of the HIR interpreter run with
//!   the transcendental nodes replaced by the backend's values. So no error analysis is needed:
//!   approximations are checked one op at a time, and everything around them exactly. Outputs
//!   and operands a float reduction feeds must have the bits of the LIR interpreter run on the
//!   cut, lowered, with each reduction in the backend's lanes (those of the backend's kernel
//!   with the same loop nest); they are left out where no such kernel exists (rare) and behind
//!   GPU trees (as above), as are values where the backend documents no bound (metal outside
//!   its lavapipe table's ranges, or on another device).
//!
//! - in kernels with bounded loops, a loop whose body or test reduces floats counts as a float
//!   reduction, and a transcendental op inside a body or test (whose values cannot be made
//!   outputs) leaves the backend compared with its own second call only. The fuzzer's loop
//!   kernels hold exact ops only, so they are compared bit for bit.
//!
//! Large-kernel mode ([`FuzzConfig::large`]) compares each backend with `lir-interp` within
//! [`LARGE_TOLERANCE_F32`] / [`LARGE_TOLERANCE_F64`] instead.
//!
//! [`UnaryOp::is_transcendental`]: rfx_ir::UnaryOp::is_transcendental
//! [`Transcendental`]: rfx_lower::Transcendental
//! [`Probed`]: crate::probe::Probed

use std::collections::BTreeMap;
use std::fmt;

use rfx_ir::hir::{Kernel, Node, Op};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayData, ArrayView, BinaryOp, DType, Scalar};
use rfx_lower::{Backend, BackendError, LowerConfig, Scratch, Unsupported, order_inputs};
use rfx_opt::{Exactness, OptConfig};

use crate::corpus::FuzzConfig;
use crate::generator::large_kernel;
use crate::probe::{Probed, check_values, probe, with_lanes_of};
use crate::report::{FuzzReport, Mismatch};

/// The rate of special float values (NaN, ±Inf, −0, subnormals, huge) among the inputs.
pub const SPECIAL_RATE: f64 = 0.2;

/// Large-kernel mode's bound on the absolute difference of an `f32` output from the
/// interpreter's (values of magnitude at most 2; a value read from the wrong place is off by
/// 0.1 or more).
pub const LARGE_TOLERANCE_F32: f64 = 1e-3;

/// Large-kernel mode's bound for `f64` outputs.
pub const LARGE_TOLERANCE_F64: f64 = 1e-10;

/// The backends a run drives, by path name: each one, or why it is missing (not built, no
/// device). The checking crate depends on no backend; its caller hands them in.
#[derive(Clone)]
pub struct Backends {
    /// The `cpu` path.
    pub cpu: Result<&'static dyn Backend, String>,
    /// The `metal` path (run on every `metal_every`-th seed only).
    pub metal: Result<&'static dyn Backend, String>,
    /// The `cuda` path.
    pub cuda: Result<&'static dyn Backend, String>,
    /// The `c` path: the exported C compiled by the system C compiler (one compiler run per
    /// kernel, so callers hand it in only when asked for it).
    pub c: Result<&'static dyn Backend, String>,
}

impl Backends {
    /// No backend: only the interpreters run.
    pub fn none() -> Backends {
        let missing = || Err("not given".to_string());
        Backends {
            cpu: missing(),
            metal: missing(),
            cuda: missing(),
            c: missing(),
        }
    }

    /// The same backends with those whose [`Backend::check_available`] fails replaced by the
    /// reason (`no adapter`, `no GPU`).
    pub fn available(&self) -> Backends {
        let probe = |backend: &Result<&'static dyn Backend, String>, reason: &str| match backend {
            Ok(b) => match b.check_available() {
                Ok(()) => Ok(*b),
                Err(_) => Err(reason.to_string()),
            },
            Err(e) => Err(e.clone()),
        };
        Backends {
            cpu: probe(&self.cpu, "unavailable"),
            metal: probe(&self.metal, "no adapter"),
            cuda: probe(&self.cuda, "no GPU"),
            c: probe(&self.c, "no C compiler"),
        }
    }
}

impl fmt::Debug for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |b: &Result<&'static dyn Backend, String>| match b {
            Ok(backend) => backend.name().to_string(),
            Err(reason) => format!("({reason})"),
        };
        f.debug_struct("Backends")
            .field("cpu", &show(&self.cpu))
            .field("metal", &show(&self.metal))
            .field("cuda", &show(&self.cuda))
            .field("c", &show(&self.c))
            .finish()
    }
}

/// Large-kernel mode ([`FuzzConfig::large`]): the kernel of `seed` on every backend against the
/// LIR interpreter, within the mode's tolerances. A mismatch is recorded whole (not shrunk).
pub(crate) fn check_large(env: &Backends, seed: u64, with_metal: bool, report: &mut FuzzReport) {
    let kernel = large_kernel(seed);
    let ops = kernel.op_count();
    let mismatch = |report: &mut FuzzReport, path: &str, description: String| {
        report.mismatches.push(Mismatch {
            seed,
            path: path.to_string(),
            description,
            kernel: kernel.to_string(),
            ops_before_after: (ops, ops),
            saved: None,
        });
    };
    let inputs = random_inputs(&mut TestRng::new(seed), &kernel, SPECIAL_RATE);
    let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
    let reference = lower_kernel(&kernel).and_then(|(lir, _)| {
        run_lir(&lir, &views, Mode::Native)
            .map(|outputs| (lir, outputs))
            .map_err(|e| format!("interpreter: {}", one_line(&e)))
    });
    let (lir, expected) = match reference {
        Ok(found) => found,
        Err(description) => return mismatch(report, "lir-interp", description),
    };
    report.compared("lir-interp");
    let backends: [(&str, Result<&'static dyn Backend, String>); 4] = [
        ("cpu", env.cpu.clone()),
        (
            "metal",
            if with_metal {
                env.metal.clone()
            } else {
                Err("not this seed (--metal-every)".to_string())
            },
        ),
        ("cuda", env.cuda.clone()),
        ("c", env.c.clone()),
    ];
    for (path, backend) in backends {
        let backend = match backend {
            Ok(backend) => backend,
            Err(reason) => {
                report.skip(path, reason);
                continue;
            }
        };
        match run_backend(backend, &lir, &views, false) {
            Ok((got, _)) => match large_difference(&expected, &got) {
                None => report.compared(path),
                Some(description) => mismatch(report, path, description),
            },
            Err(BackendError::Unsupported { what, .. }) => report.skip(path, unsupported_reason(&what)),
            Err(e) => mismatch(report, path, one_line(&e)),
        }
    }
}

/// The report's line for a refusal: sizes over a limit are one line per limit, not one per
/// size (a large-kernel run refuses hundreds of programs, each of another size).
fn unsupported_reason(what: &Unsupported) -> String {
    match what {
        Unsupported::Size { what, limit, .. } => format!("unsupported: {what} over {limit}"),
        other => format!("unsupported: {other}"),
    }
}

/// The first element where `got` differs from `expected` by more than large-kernel mode's
/// tolerance (any NaN equals any NaN; infinities must match exactly).
fn large_difference(expected: &[Array], got: &[Array]) -> Option<String> {
    for (k, (want, have)) in expected.iter().zip(got).enumerate() {
        if want.shape() != have.shape() || want.dtype() != have.dtype() {
            return Some(format!(
                "output {k}: {} {} instead of {} {}",
                have.dtype(),
                have.shape(),
                want.dtype(),
                want.shape()
            ));
        }
        let tolerance = if want.dtype() == DType::F64 {
            LARGE_TOLERANCE_F64
        } else {
            LARGE_TOLERANCE_F32
        };
        for i in 0..want.data().len() {
            let (a, b) = (
                have.get(i).map_or(f64::NAN, |v| v.to_f64()),
                want.get(i).map_or(f64::NAN, |v| v.to_f64()),
            );
            let close = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tolerance;
            if !close {
                return Some(format!(
                    "output {k}, element {i}: {a} instead of {b} (tolerance {tolerance})"
                ));
            }
        }
    }
    None
}

/// Which paths to run; the reference (`lir-interp`) always runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PathSet {
    pub(crate) hir: bool,
    pub(crate) cpu: bool,
    pub(crate) metal: bool,
    pub(crate) cuda: bool,
    pub(crate) c: bool,
}

impl PathSet {
    /// Only the path named `path` (and the reference).
    pub(crate) fn only(path: &str) -> PathSet {
        PathSet {
            hir: path == "hir-interp",
            cpu: path == "cpu",
            metal: path == "metal",
            cuda: path == "cuda",
            c: path == "c",
        }
    }
}

/// What a kernel contains that limits comparisons.
struct Traits {
    transcendental: bool,
    /// A transcendental op inside a loop's body or test: its values cannot be made outputs, so
    /// a backend's results are compared with its own second call only.
    transcendental_in_loop: bool,
    float_reduction: bool,
    /// Per output (in kernel order): whether a float reduction feeds it.
    output_after_float_reduction: Vec<bool>,
}

fn is_transcendental(op: &Op) -> bool {
    match op {
        Op::Unary(u) => u.is_transcendental(),
        Op::Binary(b) => matches!(b, BinaryOp::Pow | BinaryOp::Atan2),
        _ => false,
    }
}

/// Whether a node of a loop body or test of `node` (at any depth) satisfies `property`.
fn in_loop(node: &Node, property: &dyn Fn(&Node) -> bool) -> bool {
    let Op::Loop(spec) = &node.op else {
        return false;
    };
    std::iter::once(&spec.body)
        .chain(&spec.cond)
        .flat_map(Kernel::nodes)
        .any(|inner| property(inner) || in_loop(inner, property))
}

fn traits_of(kernel: &Kernel) -> Traits {
    let nodes = kernel.nodes();
    let reduces = |n: &Node| matches!(n.op, Op::Reduce { .. }) && n.ty.dtype.is_float();
    // A loop whose body reduces floats is a float reduction (its lanes change the order).
    let is_float_reduction = |n: &Node| reduces(n) || in_loop(n, &reduces);
    // after[i]: a float reduction is node i or one of its ancestors.
    let mut after = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let fed = is_float_reduction(node) || node.args.iter().any(|a| after[a.index()]);
        after[i] = fed;
    }
    let transcendental_in_loop = nodes
        .iter()
        .any(|n| in_loop(n, &|inner: &Node| is_transcendental(&inner.op)));
    Traits {
        transcendental: transcendental_in_loop || nodes.iter().any(|n| is_transcendental(&n.op)),
        transcendental_in_loop,
        float_reduction: nodes.iter().any(is_float_reduction),
        output_after_float_reduction: kernel
            .outputs()
            .iter()
            .map(|o| after.get(o.value.index()).copied().unwrap_or(true))
            .collect(),
    }
}

/// Whether a kernel of `lir` runs its reductions as GPU trees ([`Schedule::gpu_tree`], which
/// lowering sets and the GPU backends follow).
///
/// [`Schedule::gpu_tree`]: rfx_ir::lir::Schedule::gpu_tree
fn uses_gpu_tree(lir: &LirProgram) -> bool {
    lir.kernels().iter().any(|k| k.schedule.gpu_tree)
}

/// What checking one kernel found: the mismatches as `(path, description)`, and comparisons
/// and skips counted into a report when one is given.
struct Tally<'r> {
    mismatches: Vec<(String, String)>,
    report: Option<&'r mut FuzzReport>,
}

impl Tally<'_> {
    /// Counts a comparison on `path` (`None`) or a skip with its reason.
    fn count(&mut self, path: &str, what: Option<String>) {
        if let Some(report) = self.report.as_deref_mut() {
            match what {
                None => report.compared(path),
                Some(reason) => report.skip(path, reason),
            }
        }
    }

    /// Counts a kernel whose transcendental values on `path` were checked against bounds.
    fn within_bounds(&mut self, path: &str) {
        if let Some(report) = self.report.as_deref_mut() {
            report.within_bounds(path);
        }
    }

    fn mismatch(&mut self, path: &str, description: String) {
        self.mismatches.push((path.to_string(), description));
    }
}

/// A kernel with its inputs, lowered and run on the reference path (`lir-interp`), for the
/// other paths to be compared with.
struct Reference<'a> {
    kernel: &'a Kernel,
    inputs: &'a [Array],
    traits: Traits,
    /// The kernel prepared for the bound-aware comparison (kernels with transcendentals).
    probed: Option<Probed>,
    lir: LirProgram,
    /// The inputs in the LIR's order.
    lir_inputs: Vec<ArrayView<'a>>,
    /// The LIR interpreter's outputs, in the LIR's order.
    outputs: Vec<Array>,
}

impl Reference<'_> {
    fn output_names(&self) -> Vec<&str> {
        self.lir.outputs().map(|(_, name, _)| name).collect()
    }
}

/// Runs `kernel` on the paths of `paths` with the inputs of `seed`; returns the mismatches as
/// `(path, description)`, and counts comparisons and skips into `report` when given.
pub(crate) fn check(
    config: &FuzzConfig,
    env: &Backends,
    kernel: &Kernel,
    seed: u64,
    paths: PathSet,
    report: Option<&mut FuzzReport>,
) -> Vec<(String, String)> {
    let mut tally = Tally {
        mismatches: Vec::new(),
        report,
    };
    if let Some(describe) = config.inject
        && let Some(description) = describe(kernel)
    {
        tally.mismatch("injected", description);
    }
    let inputs = random_inputs(&mut TestRng::new(seed), kernel, SPECIAL_RATE);
    let (reference, refined) = match run_reference(kernel, &inputs) {
        Ok(found) => found,
        Err((path, description)) => {
            tally.mismatch(path, description);
            return tally.mismatches;
        }
    };
    tally.count("lir-interp", None);
    if paths.hir {
        check_hir(&reference, refined, &mut tally);
    }
    let backends = [
        ("cpu", paths.cpu, &env.cpu),
        ("metal", paths.metal, &env.metal),
        ("cuda", paths.cuda, &env.cuda),
        ("c", paths.c, &env.c),
    ];
    for (path, wanted, backend) in backends {
        if !wanted {
            if path == "metal" {
                tally.count(path, Some("not sampled (--metal-every)".into()));
            }
            continue;
        }
        match backend {
            Ok(backend) => check_backend(&reference, path, *backend, &mut tally),
            Err(reason) => tally.count(path, Some(reason.clone())),
        }
    }
    tally.mismatches
}

/// `kernel` lowered and run by the LIR interpreter on `inputs`, and whether a refining rewrite
/// fired; or the path that failed (`lower`, `lir-interp`) and why.
fn run_reference<'a>(
    kernel: &'a Kernel,
    inputs: &'a [Array],
) -> Result<(Reference<'a>, bool), (&'static str, String)> {
    let traits = traits_of(kernel);
    let probed = if traits.transcendental && !traits.transcendental_in_loop {
        probe(kernel)
    } else {
        None
    };
    let (lir, refined) = lower_kernel(kernel).map_err(|e| ("lower", one_line(&e)))?;
    let named: Vec<(&str, ArrayView<'a>)> = kernel
        .inputs()
        .map(|(_, name, _)| name)
        .zip(inputs.iter().map(Array::view))
        .collect();
    let lir_inputs = order_inputs(&lir, &named).map_err(|e| ("lower", format!("the LIR's inputs: {e}")))?;
    let outputs = run_lir(&lir, &lir_inputs, Mode::Native).map_err(|e| ("lir-interp", one_line(&e)))?;
    let reference = Reference {
        kernel,
        inputs,
        traits,
        probed,
        lir,
        lir_inputs,
        outputs,
    };
    Ok((reference, refined))
}

/// The `hir-interp` path: the HIR interpreter's outputs must have the reference's bits, unless
/// a refining rewrite fired or the kernel reduces floats (lanes change the order).
fn check_hir(reference: &Reference<'_>, refined: bool, tally: &mut Tally<'_>) {
    let kernel = reference.kernel;
    let views: Vec<ArrayView<'_>> = reference.inputs.iter().map(Array::view).collect();
    let got = match run_hir(kernel, &views, Mode::Native) {
        Err(e) => return tally.mismatch("hir-interp", one_line(&e)),
        Ok(_) if refined => {
            let reason = "refined by the optimiser (pow(x, 2) -> x * x): ran only";
            return tally.count("hir-interp", Some(reason.into()));
        }
        Ok(_) if reference.traits.float_reduction => {
            let reason = "float reduction (lane order): ran only";
            return tally.count("hir-interp", Some(reason.into()));
        }
        Ok(got) => got,
    };
    // Match the HIR's outputs to the LIR's by name.
    let by_name: Vec<(&str, &Array)> = kernel
        .outputs()
        .iter()
        .map(|o| o.name.as_str())
        .zip(&got)
        .collect();
    for (name, expected) in reference.output_names().iter().zip(&reference.outputs) {
        let differs = match by_name.iter().find(|(n, _)| n == name) {
            None => Some(format!("output `{name}` missing from the HIR")),
            Some((_, g)) => first_difference(expected, g)
                .map(|d| format!("output `{name}`: {d} (LIR interpreter vs HIR)")),
        };
        if let Some(d) = differs {
            return tally.mismatch("hir-interp", d);
        }
    }
    tally.count("hir-interp", None);
}

/// Whether the backend of `path` runs reductions in the LIR interpreter's order even where the
/// schedule marks GPU trees: the CPU and the exported C (a sequential walk of the interpreter's
/// loops).
fn in_interpreter_order(path: &str) -> bool {
    matches!(path, "cpu" | "c")
}

/// The path of `backend`: its outputs must have the reference's bits (behind GPU trees, those
/// no float reduction feeds), the same on a second call where rounding could hide a race, and
/// kernels with transcendentals are compared by [`within_bounds`].
fn check_backend(reference: &Reference<'_>, path: &str, backend: &dyn Backend, tally: &mut Tally<'_>) {
    let (kernel, traits) = (reference.kernel, &reference.traits);
    let output_names = reference.output_names();
    let tree = !in_interpreter_order(path) && uses_gpu_tree(&reference.lir);
    let repeat = traits.transcendental || tree;
    let (got, again) = match run_backend(backend, &reference.lir, &reference.lir_inputs, repeat) {
        Ok(results) => results,
        Err(BackendError::Unsupported { what, .. }) => {
            return tally.count(path, Some(unsupported_reason(&what)));
        }
        Err(e) => return tally.mismatch(path, one_line(&e)),
    };
    if let Some(again) = &again {
        let nondeterministic = output_names
            .iter()
            .zip(got.iter().zip(again))
            .find_map(|(name, (a, b))| first_difference(a, b).map(|d| format!("output `{name}`: {d}")));
        if let Some(d) = nondeterministic {
            return tally.mismatch(path, format!("two calls differ: {d}"));
        }
    }
    if traits.transcendental {
        let Some(probed) = &reference.probed else {
            return tally.count(path, Some("transcendental: ran twice, same bits".into()));
        };
        match within_bounds(
            backend,
            !in_interpreter_order(path),
            probed,
            kernel,
            reference.inputs,
        ) {
            Err(d) => tally.mismatch(path, d),
            Ok(Bounded::Unsupported(reason)) => tally.count(path, Some(reason)),
            Ok(Bounded::Compared { checked, reasons }) => {
                if checked {
                    tally.within_bounds(path);
                }
                for reason in reasons {
                    tally.count(path, Some(reason));
                }
                tally.count(path, None);
            }
        }
        return;
    }
    let (mut partial, mut compared_any) = (false, false);
    let outputs = output_names.iter().zip(reference.outputs.iter().zip(&got));
    for (i, (name, (expected, g))) in outputs.enumerate() {
        // The LIR's outputs follow the kernel's (by name; see `traits_of`).
        let index = kernel.outputs().iter().position(|o| o.name == *name).unwrap_or(i);
        let after_float_reduction = traits
            .output_after_float_reduction
            .get(index)
            .copied()
            .unwrap_or(true);
        if tree && after_float_reduction {
            partial = true;
            continue;
        }
        compared_any = true;
        if let Some(d) = first_difference(expected, g) {
            return tally.mismatch(path, format!("output `{name}`: {d} (LIR interpreter vs {path})"));
        }
    }
    if partial {
        tally.count(
            path,
            Some("GPU tree: float-reduction outputs not compared".into()),
        );
    }
    if compared_any || output_names.is_empty() {
        tally.count(path, None);
    }
}

/// What [`within_bounds`] compared.
#[derive(Debug, PartialEq, Eq)]
enum Bounded {
    /// The backend does not run the kernel with its probes (more outputs than it binds).
    Unsupported(String),
    /// Compared, except for what `reasons` says (values without a documented bound, outputs
    /// after float reductions); `checked`: some transcendental value was checked against a
    /// bound.
    Compared { checked: bool, reasons: Vec<String> },
}

/// The bound-aware comparison of a kernel with transcendental ops on `backend`: runs
/// `probed.instrumented` there and requires
/// - every output and every transcendental operand to have the bits of the HIR interpreter
///   run on `probed.cut` with the backend's transcendental values (outputs a float reduction
///   feeds aside), and
/// - every transcendental value to lie within [`Backend::ulp_bound`] of the `f64` oracle at
///   the backend's own operands.
///
/// Returns what was compared, or the first difference.
fn within_bounds(
    backend: &dyn Backend,
    gpu_trees: bool,
    probed: &Probed,
    kernel: &Kernel,
    inputs: &[Array],
) -> Result<Bounded, String> {
    let by_input: Vec<(&str, &Array)> = kernel.inputs().map(|(_, name, _)| name).zip(inputs).collect();
    let named: Vec<(&str, ArrayView<'_>)> = by_input.iter().map(|(n, a)| (*n, a.view())).collect();
    let (lir, _) = lower_kernel(&probed.instrumented).map_err(|e| format!("instrumented kernel: {e}"))?;
    let ordered = order_inputs(&lir, &named).map_err(|e| format!("instrumented kernel's inputs: {e}"))?;
    let (got, _) = match run_backend(backend, &lir, &ordered, false) {
        Ok(results) => results,
        // The instrumented kernel has more outputs than the original: a size limit may only
        // apply to it.
        Err(BackendError::Unsupported { what, .. }) => {
            return Ok(Bounded::Unsupported(format!(
                "{} (with the probes)",
                unsupported_reason(&what)
            )));
        }
        Err(e) => return Err(format!("instrumented kernel: {}", one_line(&e))),
    };
    let got: BTreeMap<&str, &Array> = lir.outputs().map(|(_, name, _)| name).zip(&got).collect();
    let output = |name: &str| {
        got.get(name)
            .copied()
            .ok_or_else(|| format!("output `{name}` missing"))
    };

    // The exact parts, given the backend's transcendental values.
    let mut cut_inputs = Vec::new();
    for (_, name, _) in probed.cut.inputs() {
        let array = match by_input.iter().find(|(n, _)| *n == name) {
            Some((_, a)) => *a,
            None => output(name)?,
        };
        cut_inputs.push(array.view());
    }
    let expected = run_hir(&probed.cut, &cut_inputs, Mode::Native)
        .map_err(|e| format!("cut kernel: {}", one_line(&e)))?;
    for (o, e) in probed.cut.outputs().iter().zip(&expected) {
        if probed.after_float_reduction.contains(&o.name) {
            continue;
        }
        if let Some(d) = first_difference(e, output(&o.name)?) {
            return Err(format!(
                "output `{}`: {d} (HIR interpreter given the backend's transcendental values)",
                o.name
            ));
        }
    }
    // What a float reduction feeds: the LIR interpreter's bits on the lowered cut, whose
    // reductions run in the lanes of the backend's (GPU trees aside).
    let mut lane_order_compared = false;
    if !probed.after_float_reduction.is_empty() && (!gpu_trees || !uses_gpu_tree(&lir)) {
        let (cut_lir, _) = lower_kernel(&probed.cut).map_err(|e| format!("cut kernel: {e}"))?;
        if let Some(cut_lir) = with_lanes_of(&lir, &cut_lir) {
            let named_cut: Vec<(&str, ArrayView<'_>)> = probed
                .cut
                .inputs()
                .map(|(_, name, _)| name)
                .zip(cut_inputs.iter().cloned())
                .collect();
            let ordered =
                order_inputs(&cut_lir, &named_cut).map_err(|e| format!("cut kernel's inputs: {e}"))?;
            let expected = run_lir(&cut_lir, &ordered, Mode::Native)
                .map_err(|e| format!("lowered cut kernel: {}", one_line(&e)))?;
            for ((_, name, _), e) in cut_lir.outputs().zip(&expected) {
                if !probed.after_float_reduction.iter().any(|n| n == name) {
                    continue;
                }
                if let Some(d) = first_difference(e, output(name)?) {
                    return Err(format!(
                        "output `{name}`: {d} (LIR interpreter given the backend's transcendental values)"
                    ));
                }
            }
            lane_order_compared = true;
        }
    }

    // The transcendental values, at the backend's operands.
    let values = check_values(probed, output, |op, dtype, args| {
        backend.ulp_bound(op, dtype, args)
    })?;
    let mut reasons = Vec::new();
    if values.unbounded > 0 {
        reasons.push("transcendental: values without a documented bound not compared".to_string());
    }
    if !probed.after_float_reduction.is_empty() && !lane_order_compared {
        reasons.push("transcendental: outputs after a float reduction not compared".to_string());
    }
    Ok(Bounded::Compared {
        checked: values.bounded > 0,
        reasons,
    })
}

/// The kernel optimised and lowered with the default configuration, and whether a
/// [`Exactness::Refining`] rule fired (`pow(x, 2)` → `x * x`: more accurate than `pow`, so the
/// result may differ from the HIR's within `pow`'s bound).
fn lower_kernel(kernel: &Kernel) -> Result<(LirProgram, bool), String> {
    let (mir, report) = rfx_opt::optimize(kernel, &OptConfig::default())
        .map_err(|e| format!("optimize: {}", one_line(&e)))?;
    let refining: Vec<&str> = rfx_opt::rule_table()
        .into_iter()
        .filter(|r| r.exactness == Exactness::Refining)
        .map(|r| r.name)
        .collect();
    let refined = report
        .rules_fired
        .keys()
        .any(|name| refining.contains(&name.as_str()));
    rfx_lower::lower(&mir, &LowerConfig::default())
        .map(|(lir, _)| (lir, refined))
        .map_err(|e| format!("lower: {}", one_line(&e)))
}

/// Compiles and runs `lir` once (twice with `repeat`, on the same compiled program).
fn run_backend(
    backend: &dyn Backend,
    lir: &LirProgram,
    inputs: &[ArrayView<'_>],
    repeat: bool,
) -> Result<(Vec<Array>, Option<Vec<Array>>), BackendError> {
    let compiled = backend.compile(lir, &Default::default())?;
    let mut scratch = Scratch::new();
    let mut call = || -> Result<Vec<Array>, BackendError> {
        let mut outputs: Vec<Array> = lir
            .outputs()
            .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
            .collect();
        let mut views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
        compiled.run(inputs, &mut views, &mut scratch)?;
        drop(views);
        Ok(outputs)
    };
    let first = call()?;
    let second = if repeat { Some(call()?) } else { None };
    Ok((first, second))
}

/// The first element where `got` differs from `expected` in bits (any NaN equals any NaN), or
/// a shape or dtype difference; `None` when they agree.
fn first_difference(expected: &Array, got: &Array) -> Option<String> {
    if expected.shape() != got.shape() || expected.dtype() != got.dtype() {
        return Some(format!(
            "type {}{} vs {}{}",
            expected.dtype(),
            expected.shape(),
            got.dtype(),
            got.shape()
        ));
    }
    let index = match (expected.data(), got.data()) {
        (ArrayData::F32(a), ArrayData::F32(b)) => a
            .iter()
            .zip(b)
            .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan())),
        (ArrayData::F64(a), ArrayData::F64(b)) => a
            .iter()
            .zip(b)
            .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan())),
        (ArrayData::I32(a), ArrayData::I32(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        (ArrayData::Bool(a), ArrayData::Bool(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        _ => Some(0),
    }?;
    let show = |a: &Array| a.get(index).map_or("?".to_string(), |s| format!("{s:?}"));
    Some(format!(
        "element {index} of {}: expected {}, got {}",
        expected.shape(),
        show(expected),
        show(got)
    ))
}

fn one_line(error: &dyn fmt::Display) -> String {
    error.to_string().lines().next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rfx_ir::hir::Builder;
    use rfx_ir::lir::LirProgram;
    use rfx_ir::{ArrayView, ArrayViewMut, DataMut, ReduceOp, Shape, TensorType, UnaryOp};
    use rfx_lower::{CompileOptions, Compiled, Transcendental};

    use super::*;

    /// The CPU backend with the first element of the named outputs moved by `ulps` ULP after
    /// each call, and a bound of `bound` ULP for every transcendental: a backend with a known
    /// defect.
    struct Faulty {
        outputs: &'static [&'static str],
        ulps: u32,
        bound: u64,
    }

    struct FaultyCompiled {
        inner: Arc<dyn Compiled>,
        outputs: Vec<usize>,
        ulps: u32,
    }

    impl Backend for Faulty {
        fn name(&self) -> &'static str {
            "faulty"
        }

        fn check_available(&self) -> Result<(), BackendError> {
            Ok(())
        }

        fn compile(
            &self,
            program: &LirProgram,
            options: &CompileOptions,
        ) -> Result<Arc<dyn Compiled>, BackendError> {
            Ok(Arc::new(FaultyCompiled {
                inner: rfx_codegen_cpu::CpuBackend.compile(program, options)?,
                outputs: program
                    .outputs()
                    .enumerate()
                    .filter(|(_, (_, name, _))| self.outputs.contains(name))
                    .map(|(i, _)| i)
                    .collect(),
                ulps: self.ulps,
            }))
        }

        fn ulp_bound(&self, _: Transcendental, _: DType, _: &[f64]) -> Option<u64> {
            Some(self.bound)
        }
    }

    impl Compiled for FaultyCompiled {
        fn backend(&self) -> &'static str {
            "faulty"
        }

        fn program(&self) -> &LirProgram {
            self.inner.program()
        }

        fn run(
            &self,
            inputs: &[ArrayView<'_>],
            outputs: &mut [ArrayViewMut<'_>],
            scratch: &mut Scratch,
        ) -> Result<(), BackendError> {
            self.inner.run(inputs, outputs, scratch)?;
            for &i in &self.outputs {
                if let Some(DataMut::F32(values)) = outputs.get_mut(i).map(ArrayViewMut::data_mut)
                    && let Some(first) = values.first_mut()
                {
                    *first = f32::from_bits(first.to_bits() + self.ulps);
                }
            }
            Ok(())
        }
    }

    /// `y = sin(x) * 3 + x` on 4096 values in about [-10, 10], and its probe.
    fn sine_kernel() -> (Kernel, Vec<Array>, Probed) {
        let mut b = Builder::new("sine");
        let x = b.input("x", TensorType::new(DType::F32, [4096])).expect("input");
        let s = b.unary(UnaryOp::Sin, x).expect("sin");
        let three = b.constant(Scalar::F32(3.0), [4096]);
        let m = b.binary(BinaryOp::Mul, s, three).expect("mul");
        let y = b.binary(BinaryOp::Add, m, x).expect("add");
        b.output("y", y).expect("output");
        let kernel = b.finish().expect("kernel");
        let mut rng = TestRng::new(7);
        let x: Vec<f32> = (0..4096).map(|_| rng.uniform(-10.0, 10.0) as f32).collect();
        let inputs = vec![Array::new(Shape::from(vec![4096]), ArrayData::F32(x)).expect("array")];
        let probed = probe(&kernel).expect("probe");
        (kernel, inputs, probed)
    }

    #[test]
    fn the_probe_cuts_at_each_transcendental() {
        let (_, _, probed) = sine_kernel();
        assert_eq!(
            probed.ops,
            vec![(Transcendental::Unary(UnaryOp::Sin), DType::F32)]
        );
        let names = |k: &Kernel| k.outputs().iter().map(|o| o.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&probed.instrumented), ["y", "__t0", "__a0_0"]);
        assert_eq!(names(&probed.cut), ["y", "__a0_0"]);
        let inputs: Vec<&str> = probed.cut.inputs().map(|(_, name, _)| name).collect();
        assert_eq!(inputs, ["x", "__t0"]);
        assert!(probed.after_float_reduction.is_empty());
    }

    #[test]
    fn the_cpu_backend_is_within_its_bounds() {
        let (kernel, inputs, probed) = sine_kernel();
        let outcome = within_bounds(&rfx_codegen_cpu::CpuBackend, false, &probed, &kernel, &inputs);
        let expected = Bounded::Compared {
            checked: true,
            reasons: Vec::new(),
        };
        assert_eq!(outcome, Ok(expected));
    }

    #[test]
    fn a_bound_tighter_than_the_routines_is_caught() {
        // The CPU's `sin` is not correctly rounded everywhere (1 ULP measured): 0 ULP fails.
        let (kernel, inputs, probed) = sine_kernel();
        let strict = Faulty {
            outputs: &[],
            ulps: 0,
            bound: 0,
        };
        let error = within_bounds(&strict, false, &probed, &kernel, &inputs).expect_err("1 ULP > 0");
        assert!(
            error.starts_with("sin(") && error.ends_with("1 ULP > 0"),
            "{error}"
        );
    }

    #[test]
    fn a_wrong_transcendental_value_is_caught() {
        // `y = sin(x)`: the output and the probe are the same value, moved together.
        let mut b = Builder::new("sine");
        let x = b.input("x", TensorType::new(DType::F32, [64])).expect("input");
        let y = b.unary(UnaryOp::Sin, x).expect("sin");
        b.output("y", y).expect("output");
        let kernel = b.finish().expect("kernel");
        let inputs = vec![Array::new(Shape::from(vec![64]), ArrayData::F32(vec![0.75; 64])).expect("array")];
        let probed = probe(&kernel).expect("probe");
        let faulty = Faulty {
            outputs: &["y", "__t0"],
            ulps: 5,
            bound: 4,
        };
        let error = within_bounds(&faulty, false, &probed, &kernel, &inputs).expect_err("5 ULP > 4");
        assert!(
            error.contains("element 0") && error.contains("ULP > 4"),
            "{error}"
        );
    }

    /// `r = sum(sin(x) * x)` over rows of `n` (`rows` of them) and `m = max(r) * 2`, with
    /// inputs in about [-3, 3], and its probe.
    fn reduced_sine_kernel(rows: usize, n: usize) -> (Kernel, Vec<Array>, Probed) {
        let mut b = Builder::new("reduced");
        let x = b
            .input("x", TensorType::new(DType::F32, [rows, n]))
            .expect("input");
        let s = b.unary(UnaryOp::Sin, x).expect("sin");
        let v = b.binary(BinaryOp::Mul, s, x).expect("mul");
        let r = b.reduce(ReduceOp::Sum, v, &[1], false).expect("sum");
        let top = b.reduce_all(ReduceOp::Max, r).expect("max");
        let two = b.constant(Scalar::F32(2.0), Vec::<usize>::new());
        let m = b.binary(BinaryOp::Mul, top, two).expect("mul");
        b.output("r", r).expect("output");
        b.output("m", m).expect("output");
        let kernel = b.finish().expect("kernel");
        let mut rng = TestRng::new(11);
        let x: Vec<f32> = (0..rows * n).map(|_| rng.uniform(-3.0, 3.0) as f32).collect();
        let inputs = vec![Array::new(Shape::from(vec![rows, n]), ArrayData::F32(x)).expect("array")];
        let probed = probe(&kernel).expect("probe");
        (kernel, inputs, probed)
    }

    #[test]
    fn outputs_after_float_reductions_are_compared_in_lane_order() {
        // Short rows (one accumulator) and long ones (partial lanes): the CPU gives the LIR
        // interpreter's bits, so nothing is left out.
        for (rows, n) in [(3, 7), (5, 4096)] {
            let (kernel, inputs, probed) = reduced_sine_kernel(rows, n);
            assert_eq!(probed.after_float_reduction, ["r", "m"]);
            let outcome = within_bounds(&rfx_codegen_cpu::CpuBackend, false, &probed, &kernel, &inputs);
            let expected = Bounded::Compared {
                checked: true,
                reasons: Vec::new(),
            };
            assert_eq!(outcome, Ok(expected), "[{rows}, {n}]");
            // One ULP off in a row sum, or in what follows the reductions, is caught.
            for (name, outputs) in [("r", &["r"]), ("m", &["m"])] {
                let faulty = Faulty {
                    outputs,
                    ulps: 1,
                    bound: 4,
                };
                let error = within_bounds(&faulty, false, &probed, &kernel, &inputs).expect_err("1 ULP off");
                assert!(
                    error.starts_with(&format!("output `{name}`: element 0"))
                        && error.contains("LIR interpreter"),
                    "{error}"
                );
            }
        }
        // A backend whose long reductions run as trees leaves them out, and says so.
        let (kernel, inputs, probed) = reduced_sine_kernel(5, 4096);
        let faulty = Faulty {
            outputs: &["r"],
            ulps: 1,
            bound: 4,
        };
        let outcome = within_bounds(&faulty, true, &probed, &kernel, &inputs);
        let expected = Bounded::Compared {
            checked: true,
            reasons: vec!["transcendental: outputs after a float reduction not compared".to_string()],
        };
        assert_eq!(outcome, Ok(expected));
    }

    #[test]
    fn a_wrong_exact_value_downstream_is_caught() {
        let (kernel, inputs, probed) = sine_kernel();
        let faulty = Faulty {
            outputs: &["y"],
            ulps: 1,
            bound: 4,
        };
        let error = within_bounds(&faulty, false, &probed, &kernel, &inputs).expect_err("y is 1 ULP off");
        assert!(error.starts_with("output `y`: element 0"), "{error}");
    }

    #[test]
    fn size_refusals_share_one_report_line_per_limit() {
        let size = |size| Unsupported::Size {
            what: "weighted instructions",
            size,
            limit: 12_000,
        };
        assert_eq!(
            unsupported_reason(&size(101_806)),
            unsupported_reason(&size(98_140))
        );
        assert_eq!(
            unsupported_reason(&size(13_000)),
            "unsupported: weighted instructions over 12000"
        );
        assert_eq!(
            unsupported_reason(&Unsupported::DType(DType::F64)),
            "unsupported: dtype f64"
        );
    }
}
