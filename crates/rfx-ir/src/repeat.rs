//! Bounded loops over a range of a program's kernels, shared by MIR and LIR.
//!
//! A program (MIR or LIR) runs its kernels in order. A [`KernelLoop`] makes the kernels
//! `first..end` run up to `trips` times before the program goes on; loops nest (an inner
//! loop's range lies inside its outer loop's, and two ranges either nest or are disjoint).
//! A carried value lives in a temporary buffer that the range reads at its start and writes at
//! its end, so one iteration's results are the next one's operands. With `exit`, the range
//! writes a `bool` scalar buffer on every iteration and the loop stops after the first
//! iteration that leaves it `false` (a `while_loop`, whose body is written so that running the
//! remaining iterations would change nothing: backends that cannot read the flag cheaply may
//! run all `trips`).
//!
//! HIR's [`crate::hir::Loop`] is compiled to this form by the optimiser.
//!
//! The MIR and LIR verifiers check that loops nest ([`steps`] fails with a [`LoopNestError`]
//! otherwise), that an exit flag is a one-element `bool` temporary written by a kernel of its
//! range, that outputs are written outside loops, and that every read of a temporary follows a
//! write that surely ran ([`write_reaches`]: a loop of zero trips may skip its range). The MIR
//! and LIR interpreters walk [`steps`]; rfx-lower keeps a buffer touched inside a loop live over
//! the loop's whole range.

use crate::BufId;

/// Kernels `first..end` of a program, run up to `trips` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct KernelLoop {
    /// The first kernel of the range.
    pub first: usize,
    /// One past the last kernel of the range; `first < end`.
    pub end: usize,
    /// The trip count, or with `exit` the most iterations.
    pub trips: u64,
    /// A `bool` scalar temporary the range writes each iteration; the loop stops after an
    /// iteration that leaves it `false`.
    pub exit: Option<BufId>,
}

impl KernelLoop {
    /// Whether kernel `kernel` lies in the range `first..end`.
    pub fn contains(&self, kernel: usize) -> bool {
        self.first <= kernel && kernel < self.end
    }
}

/// Whether kernel `kernel` runs inside some loop of `loops`.
pub fn in_loop(loops: &[KernelLoop], kernel: usize) -> bool {
    loops.iter().any(|l| l.contains(kernel))
}

/// Whether a write by kernel `writer` has surely happened whenever kernel `reader` runs: the
/// writer comes first in program order and no loop of zero trips holds the writer without the
/// reader (a loop of at least one trip runs its range at least once, an exit flag only stops
/// it after an iteration; inside a loop holding both, the writer runs earlier in every
/// iteration). A write later in the same loop range does not count: the first iteration would
/// read before it.
pub fn write_reaches(loops: &[KernelLoop], writer: usize, reader: usize) -> bool {
    writer < reader
        && !loops
            .iter()
            .any(|l| l.trips == 0 && l.contains(writer) && !l.contains(reader))
}

/// One step of running a program: a kernel, or a loop over steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Run kernel `index` once.
    Kernel(usize),
    /// Run `body` up to `spec.trips` times (see [`KernelLoop`]).
    Loop {
        /// The loop.
        spec: KernelLoop,
        /// Its kernels and inner loops, in order.
        body: Vec<Step>,
    },
}

/// Loops that do not describe a nest of kernel ranges.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopNestError {
    /// A range that is empty or reaches past the last kernel.
    #[error("loop {index} over kernels {first}..{end} is empty or past the program's {kernels} kernels")]
    Range {
        /// The loop's position in the program's list.
        index: usize,
        /// Its first kernel.
        first: usize,
        /// One past its last kernel.
        end: usize,
        /// How many kernels the program has.
        kernels: usize,
    },
    /// Two ranges that overlap without one containing the other, or listed inner before outer.
    #[error("loop {index} overlaps an earlier loop without nesting inside it")]
    Overlap {
        /// The loop's position in the program's list.
        index: usize,
    },
}

impl LoopNestError {
    /// The offending loop's position in the program's list.
    pub fn index(&self) -> usize {
        match self {
            LoopNestError::Range { index, .. } | LoopNestError::Overlap { index } => *index,
        }
    }
}

/// The steps that run a program of `kernels` kernels with `loops` (outer before inner, in
/// order of their first kernel): the plan every backend's runner follows.
pub fn steps(kernels: usize, loops: &[KernelLoop]) -> Result<Vec<Step>, LoopNestError> {
    for (index, l) in loops.iter().enumerate() {
        if l.first >= l.end || l.end > kernels {
            return Err(LoopNestError::Range {
                index,
                first: l.first,
                end: l.end,
                kernels,
            });
        }
        // Each earlier loop must either contain this one or lie wholly before it.
        let nests = loops[..index]
            .iter()
            .all(|e| (e.first <= l.first && l.end <= e.end) || e.end <= l.first);
        if !nests {
            return Err(LoopNestError::Overlap { index });
        }
    }
    let mut next = 0;
    Ok(nest(0, kernels, loops, &mut next))
}

/// The steps of kernels `first..end`, taking loops from `loops[*next..]` while they start inside.
fn nest(first: usize, end: usize, loops: &[KernelLoop], next: &mut usize) -> Vec<Step> {
    let mut out = Vec::new();
    let mut k = first;
    while k < end {
        match loops.get(*next) {
            Some(l) if l.first == k && l.end <= end => {
                let spec = *l;
                *next += 1;
                let body = nest(spec.first, spec.end, loops, next);
                out.push(Step::Loop { spec, body });
                k = spec.end;
            }
            _ => {
                out.push(Step::Kernel(k));
                k += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: usize, end: usize, trips: u64) -> KernelLoop {
        KernelLoop {
            first,
            end,
            trips,
            exit: None,
        }
    }

    #[test]
    fn nested_loops_become_a_tree_of_steps() {
        let loops = [range(1, 4, 10), range(2, 3, 5)];
        let plan = steps(5, &loops).expect("a nest");
        assert_eq!(
            plan,
            vec![
                Step::Kernel(0),
                Step::Loop {
                    spec: loops[0],
                    body: vec![
                        Step::Kernel(1),
                        Step::Loop {
                            spec: loops[1],
                            body: vec![Step::Kernel(2)]
                        },
                        Step::Kernel(3)
                    ]
                },
                Step::Kernel(4)
            ]
        );
    }

    #[test]
    fn two_loops_over_one_range_nest() {
        let loops = [range(0, 2, 3), range(0, 2, 4)];
        let plan = steps(2, &loops).expect("a nest");
        assert_eq!(
            plan,
            vec![Step::Loop {
                spec: loops[0],
                body: vec![Step::Loop {
                    spec: loops[1],
                    body: vec![Step::Kernel(0), Step::Kernel(1)]
                }]
            }]
        );
    }

    #[test]
    fn writes_reach_later_kernels_unless_a_zero_trip_loop_skips_them() {
        let loops = [range(1, 3, 0), range(4, 6, 2)];
        assert!(write_reaches(&loops, 0, 1));
        assert!(
            !write_reaches(&loops, 1, 1),
            "a kernel does not read its own write"
        );
        assert!(
            write_reaches(&loops, 1, 2),
            "inside one zero-trip loop, both are skipped"
        );
        assert!(
            !write_reaches(&loops, 2, 3),
            "a zero-trip loop may skip the write"
        );
        assert!(write_reaches(&loops, 4, 6), "a loop of two trips runs its range");
        assert!(
            !write_reaches(&loops, 5, 4),
            "a later write in the range misses trip one"
        );
        assert!(in_loop(&loops, 5) && !in_loop(&loops, 3) && !in_loop(&loops, 6));
    }

    #[test]
    fn bad_ranges_are_errors() {
        assert!(matches!(
            steps(3, &[range(2, 2, 1)]),
            Err(LoopNestError::Range { .. })
        ));
        assert!(matches!(
            steps(3, &[range(1, 4, 1)]),
            Err(LoopNestError::Range { .. })
        ));
        assert_eq!(
            steps(4, &[range(0, 2, 1), range(1, 3, 1)]),
            Err(LoopNestError::Overlap { index: 1 })
        );
        assert_eq!(
            steps(4, &[range(1, 2, 1), range(0, 3, 1)]),
            Err(LoopNestError::Overlap { index: 1 })
        );
        let err = steps(3, &[range(0, 1, 1), range(2, 5, 1)]).expect_err("past the end");
        assert_eq!(
            (err.index(), err.to_string()),
            (
                1,
                "loop 1 over kernels 2..5 is empty or past the program's 3 kernels".to_string()
            )
        );
    }
}
