//! Optimiser settings.

use std::time::Duration;

/// How hard and how loosely to optimise. The defaults keep results exact (bit-identical to the
/// interpreter, except where a refining rule replaces a not-correctly-rounded op by a correctly
/// rounded one) and bound the e-graph so a control kernel optimises in well under a millisecond.
#[derive(Clone, Debug, PartialEq)]
pub struct OptConfig {
    /// Enable fast-math rules (valid only without NaN/Inf/−0, or up to reassociation).
    pub fast_math: bool,
    /// Enable refining rules (`pow(x, 2) → x*x`, ...).
    pub refining: bool,
    /// Stop rewriting after this many e-graph iterations.
    pub iter_limit: usize,
    /// Stop rewriting once the e-graph has this many e-nodes.
    pub node_limit: usize,
    /// Stop rewriting after this long: a backstop, far above what the node and iteration
    /// limits allow (a 10,000-op kernel saturates in about 0.2 s). Below that, which rules fire
    /// depends on the machine's speed and load, and with the refining rules so do the bits of
    /// the result: the default keeps compiled kernels a function of the kernel alone.
    pub time_limit: Duration,
    /// Largest reduction (elements reduced per output) folded at compile time.
    pub max_fold_elems: usize,
    /// Run equality saturation at all (off: only decomposition, DCE and fusion).
    pub saturate: bool,
}

impl Default for OptConfig {
    fn default() -> OptConfig {
        OptConfig {
            fast_math: false,
            refining: true,
            iter_limit: 8,
            node_limit: 10_000,
            time_limit: Duration::from_secs(30),
            max_fold_elems: 4096,
            saturate: true,
        }
    }
}

impl OptConfig {
    /// The default configuration with fast-math rules on.
    pub fn fast_math() -> OptConfig {
        OptConfig {
            fast_math: true,
            ..OptConfig::default()
        }
    }

    /// Only bit-exact rules: no refining, no fast-math.
    pub fn exact() -> OptConfig {
        OptConfig {
            refining: false,
            ..OptConfig::default()
        }
    }
}
