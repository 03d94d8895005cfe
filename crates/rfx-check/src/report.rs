//! What a fuzzing run found: per-path counts and the mismatches, printable.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// What happened on one path over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Kernels whose values were compared bit for bit (all outputs, or those a GPU tree
    /// reduction leaves comparable).
    pub compared: u64,
    /// Kernels not compared, or compared only in part, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Of `compared`, kernels with transcendental ops: compared bit for bit given the path's
    /// transcendental values, which were checked against the backend's ULP bounds.
    pub within_bounds: u64,
}

/// A path that disagreed with its reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The seed: the kernel's generator and its inputs' (`random_inputs(&mut
    /// TestRng::new(seed), ..)`).
    pub seed: u64,
    /// The path that disagreed.
    pub path: String,
    /// What differed, on the shrunk kernel when shrinking kept the mismatch.
    pub description: String,
    /// The shrunk kernel in HIR text.
    pub kernel: String,
    /// Non-input nodes before and after shrinking.
    pub ops_before_after: (usize, usize),
    /// The file written, with [`FuzzConfig::save_dir`](crate::FuzzConfig::save_dir).
    pub saved: Option<PathBuf>,
}

/// The result of a fuzzing run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuzzReport {
    /// Kernels generated and run.
    pub kernels: u64,
    /// Per path (`hir-interp`, `lir-interp`, `cpu`, `metal`, `cuda`, ...).
    pub paths: BTreeMap<String, PathStats>,
    /// Every mismatch, by seed.
    pub mismatches: Vec<Mismatch>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl FuzzReport {
    /// The stats of `path` (empty when it never ran).
    pub fn path(&self, path: &str) -> PathStats {
        self.paths.get(path).cloned().unwrap_or_default()
    }

    pub(crate) fn skip(&mut self, path: &str, reason: impl Into<String>) {
        *self
            .paths
            .entry(path.to_string())
            .or_default()
            .skipped
            .entry(reason.into())
            .or_default() += 1;
    }

    pub(crate) fn compared(&mut self, path: &str) {
        self.paths.entry(path.to_string()).or_default().compared += 1;
    }

    pub(crate) fn within_bounds(&mut self, path: &str) {
        self.paths.entry(path.to_string()).or_default().within_bounds += 1;
    }

    pub(crate) fn merge(&mut self, other: FuzzReport) {
        self.kernels += other.kernels;
        for (path, stats) in other.paths {
            let mine = self.paths.entry(path).or_default();
            mine.compared += stats.compared;
            mine.within_bounds += stats.within_bounds;
            for (reason, count) in stats.skipped {
                *mine.skipped.entry(reason).or_default() += count;
            }
        }
        self.mismatches.extend(other.mismatches);
    }
}

impl fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fuzz: {} kernels in {:.1?}, {} mismatch(es)",
            self.kernels,
            self.elapsed,
            self.mismatches.len()
        )?;
        for (path, stats) in &self.paths {
            writeln!(f, "  {path:<11} compared {:>7}", stats.compared)?;
            if stats.within_bounds > 0 {
                writeln!(
                    f,
                    "  {:<11} of which {:>7}  with transcendentals, within the ULP bounds",
                    "", stats.within_bounds
                )?;
            }
            for (reason, count) in &stats.skipped {
                writeln!(f, "  {:<11} skipped  {count:>7}  {reason}", "")?;
            }
        }
        for m in &self.mismatches {
            writeln!(
                f,
                "  MISMATCH seed {} path {}: {} (shrunk {} -> {} ops){}",
                m.seed,
                m.path,
                m.description,
                m.ops_before_after.0,
                m.ops_before_after.1,
                m.saved
                    .as_ref()
                    .map_or(String::new(), |p| format!(", saved to {}", p.display()))
            )?;
        }
        Ok(())
    }
}
