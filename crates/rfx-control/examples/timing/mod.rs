//! The timing loop the examples share.

use std::time::Instant;

/// Median over 101 samples of the mean time of `calls` calls, in ns.
pub(crate) fn median_ns(calls: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..calls.max(100) {
        f();
    }
    let mut times: Vec<f64> = (0..101)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_secs_f64() * 1e9 / calls as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[50]
}
