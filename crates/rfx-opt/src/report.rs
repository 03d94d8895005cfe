//! The optimisation report: what every pass did, as a value that prints and serialises.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rfx_ir::hir::ValueId;

/// Why the e-graph stopped rewriting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StopReason {
    /// No rule could add anything new.
    Saturated,
    /// The iteration limit was reached.
    IterationLimit(usize),
    /// The e-node limit was reached.
    NodeLimit(usize),
    /// The time limit was reached.
    TimeLimit,
    /// Saturation was switched off.
    NotRun,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Saturated => f.write_str("saturated"),
            StopReason::IterationLimit(n) => write!(f, "iteration limit ({n})"),
            StopReason::NodeLimit(n) => write!(f, "node limit ({n})"),
            StopReason::TimeLimit => f.write_str("time limit"),
            StopReason::NotRun => f.write_str("not run"),
        }
    }
}

/// Why a value was not fused into its consumer's kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum MissReason {
    /// The value has consumers in more than one kernel, so it is materialised once.
    FanOut,
    /// The value is a reduction result: it ends its kernel.
    Reduction,
    /// The consumer iterates over a different shape.
    Shape,
    /// The value is a kernel output and must be stored anyway.
    Output,
    /// A reshape of a value computed in the kernel cannot be an index map.
    Reshape,
    /// A transpose reads its operand at other points than its own: the operand is stored and
    /// read back with permuted strides.
    Transpose,
    /// A slice reads a window of its operand, which has other consumers and would cost more
    /// to compute once per window than to store: the operand is stored and read back at an
    /// offset.
    Slice,
    /// Computing a pad's operand at every point of the pad (its consumer's kernel computes it
    /// at each point less `low`, discarding the values outside the window) would cost more
    /// than storing it once and reading it back by clamped index.
    Pad,
    /// A `gather` reads its table at points its index computes: a computed table is stored
    /// and read back by index.
    Gather,
    /// A running fold is complete only once its kernel has run its scanned axis in order:
    /// kernels that read it elsewhere than at its own points read it stored.
    Scan,
    /// Computing the value where it is read would nest more than
    /// `rfx_opt::MAX_FRAME_NESTING` windows (pads, slices, reshapes, reductions computed
    /// elementwise) inside one another: it is stored, and the windows above it read it back.
    Nesting,
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MissReason::FanOut => "used by several kernels",
            MissReason::Reduction => "reduction result",
            MissReason::Shape => "consumer has another iteration space",
            MissReason::Output => "kernel output",
            MissReason::Reshape => "reshape of a computed value",
            MissReason::Transpose => "transpose of a computed value",
            MissReason::Slice => "slice of a computed value",
            MissReason::Pad => "pad of a computed value",
            MissReason::Nesting => "windows nested too deep",
            MissReason::Gather => "table of a gather",
            MissReason::Scan => "running fold",
        })
    }
}

/// What optimisation did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OptReport {
    /// Non-input HIR ops before optimisation.
    pub ops_before: usize,
    /// Non-input HIR ops after algebraic optimisation (before fusion and before the transposes
    /// [`crate::sink_transposes`] moves onto operands, which are views, not work).
    pub ops_after: usize,
    /// Rewrite rules that fired, by name, with their counts.
    pub rules_fired: BTreeMap<String, usize>,
    /// E-nodes in the final e-graph.
    pub egraph_nodes: usize,
    /// E-classes in the final e-graph.
    pub egraph_classes: usize,
    /// Rewriting iterations run.
    pub iterations: usize,
    /// Why rewriting stopped.
    pub stop_reason: Option<StopReason>,
    /// Fused kernels formed.
    pub kernels: usize,
    /// Values that were materialised rather than fused, with the reason.
    pub missed_fusions: Vec<(ValueId, MissReason)>,
    /// Wall time per pass, in order.
    pub time_per_pass: Vec<(String, Duration)>,
}

impl OptReport {
    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

impl fmt::Display for OptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ops_after <= self.ops_before {
            let reduction = if self.ops_before == 0 {
                0.0
            } else {
                100.0 * (self.ops_before - self.ops_after) as f64 / self.ops_before as f64
            };
            writeln!(
                f,
                "Reduced from {} to {} ops ({reduction:.0}% reduction)",
                self.ops_before, self.ops_after
            )?;
        } else {
            // `clamp` decomposes into `max` and `min`, for one.
            writeln!(
                f,
                "From {} to {} ops (decomposed ops count one each)",
                self.ops_before, self.ops_after
            )?;
        }
        writeln!(f, "Fused kernels: {}", self.kernels)?;
        let stop = self
            .stop_reason
            .map_or_else(|| "-".to_string(), |s| s.to_string());
        writeln!(
            f,
            "E-graph: {} nodes, {} classes, {} iterations, stopped: {stop}",
            self.egraph_nodes, self.egraph_classes, self.iterations
        )?;
        if !self.rules_fired.is_empty() {
            writeln!(f, "Rules fired:")?;
            for (name, count) in &self.rules_fired {
                writeln!(f, "  {name:<16} {count:>5}")?;
            }
        }
        if !self.missed_fusions.is_empty() {
            writeln!(f, "Not fused:")?;
            for (value, reason) in &self.missed_fusions {
                writeln!(f, "  {:<6} {reason}", value.to_string())?;
            }
        }
        if !self.time_per_pass.is_empty() {
            writeln!(f, "Time per pass:")?;
            for (pass, time) in &self.time_per_pass {
                writeln!(f, "  {pass:<16} {:>9.1} µs", time.as_secs_f64() * 1e6)?;
            }
        }
        Ok(())
    }
}
