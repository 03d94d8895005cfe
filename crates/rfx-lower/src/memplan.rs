//! The memory plan: temporaries placed in one arena, reusing space once a buffer is dead (a
//! buffer touched inside a program loop is live over the loop's whole range).

use rfx_ir::BufId;
use rfx_ir::repeat::KernelLoop;

/// A temporary buffer's size and lifetime in kernel indices (`first_write..=last_read`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The buffer.
    pub buf: BufId,
    /// Bytes it needs.
    pub bytes: usize,
    /// The kernel that writes it.
    pub start: usize,
    /// The last kernel that reads it (`start` if none does).
    pub end: usize,
}

impl Interval {
    /// Whether two buffers are live at the same time.
    pub fn overlaps_in_time(&self, other: &Interval) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// `interval` widened over every loop whose range holds a kernel in `touched` (the kernels
/// that read or write the buffer): such a buffer stays live over the loop's whole range, since
/// a carry written at the range's end is read at its start on the next iteration, an invariant
/// is read on every iteration, and an exit flag is read after the range's last kernel. Another
/// buffer live inside the range then never shares its bytes.
pub fn live_across_loops(interval: Interval, touched: &[usize], loops: &[KernelLoop]) -> Interval {
    loops
        .iter()
        .filter(|l| touched.iter().any(|&k| l.contains(k)))
        .fold(interval, |acc, l| Interval {
            start: acc.start.min(l.first),
            end: acc.end.max(l.end.saturating_sub(1)),
            ..acc
        })
}

/// Where each temporary lives and how big the arena is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Byte offset of each interval's buffer, in the order of the intervals given.
    pub offsets: Vec<usize>,
    /// Arena size in bytes (the peak).
    pub arena_bytes: usize,
}

fn align_up(value: usize, align: usize) -> usize {
    value.div_ceil(align).saturating_mul(align)
}

/// Bytes from below which a buffer is not padded ([`arena_footprint`]).
const SKEW_MIN_BYTES: usize = 4096;

/// The bytes a buffer of `bytes` takes in the arena: its size rounded up to `align`, plus one
/// more `align` (at least 64 bytes: a cache line) for a buffer of 4 KiB or more. Without it,
/// buffers whose sizes are multiples of 4 KiB (`f64[1024, k]`) would all start at the same
/// address modulo 4 KiB, so a kernel reading or writing several of them at the same index
/// would touch one L1 cache set (and one set of 4 KiB-aliased addresses) for all of them; with
/// it, each buffer placed above another starts one line further round.
pub fn arena_footprint(bytes: usize, align: usize) -> usize {
    let size = align_up(bytes.max(1), align);
    if size >= SKEW_MIN_BYTES {
        size.saturating_add(align.max(64))
    } else {
        size
    }
}

/// Greedy best-fit placement: buffers are placed largest first; each goes at the lowest
/// aligned offset where it overlaps no already-placed buffer that is live at the same time.
/// Two simultaneously live buffers never overlap; buffers with disjoint lifetimes may share
/// bytes. `align` must be a power of two; every offset is a multiple of it.
pub fn plan_memory(intervals: &[Interval], align: usize) -> MemoryPlan {
    let align = align.max(1);
    let mut order: Vec<usize> = (0..intervals.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(intervals[i].bytes), intervals[i].start, i));
    let mut offsets = vec![0usize; intervals.len()];
    let mut placed: Vec<usize> = Vec::new();
    let mut arena_bytes = 0;
    for &i in &order {
        let size = arena_footprint(intervals[i].bytes, align);
        // Ranges already taken by buffers live at the same time, sorted by offset.
        let mut taken: Vec<(usize, usize)> = placed
            .iter()
            .filter(|&&j| intervals[j].overlaps_in_time(&intervals[i]))
            .map(|&j| {
                (
                    offsets[j],
                    offsets[j] + arena_footprint(intervals[j].bytes, align),
                )
            })
            .collect();
        taken.sort_unstable();
        let mut offset = 0;
        for (start, end) in taken {
            if offset + size <= start {
                break;
            }
            offset = offset.max(end);
        }
        offsets[i] = offset;
        arena_bytes = arena_bytes.max(offset + size);
        placed.push(i);
    }
    MemoryPlan { offsets, arena_bytes }
}
