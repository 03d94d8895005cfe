//! The timing loop the examples share.

use std::time::Instant;

/// After `warmup` calls of `f`, the median over `samples` samples of the mean time of `calls`
/// calls, in ns.
pub(crate) fn median_ns(warmup: usize, samples: usize, calls: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_secs_f64() * 1e9 / calls as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
