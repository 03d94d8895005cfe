//! The tile routines on short rows and on rows' last elements (fewer than a vector's: the
//! masked loads and stores of [`read_part`] and [`write_part`]), in both compilations (AVX2,
//! and AVX-512 where the CPU has it): for every routine and every length up to a few vectors,
//! each element's bits are the one-element entry's, and nothing outside the rows is touched.
//! Every source row and result row ends where an inaccessible page starts, so a read or write
//! past a row's end faults, and the bytes of the result page before the row are checked
//! unchanged. The destination starts right after a source in one case (the placement that sent
//! LLVM's loop down its scalar path), for every kind of routine.

use super::one_tests::{Elem, assert_same, binary_entries, edge_values, pair_entries, unary_entries};
use super::*;
use crate::test_rng::Rng;

const PAGE: usize = 4096;

/// A byte every untouched byte of a result page holds.
const UNTOUCHED: u8 = 0xa5;

/// A readable and writable page followed by an inaccessible one.
struct Guarded {
    base: *mut u8,
}

impl Guarded {
    fn new() -> Guarded {
        // SAFETY: a fresh anonymous mapping of two pages, then the second made inaccessible;
        // both calls' results are checked.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert!(base != libc::MAP_FAILED, "mmap failed");
            let base = base.cast::<u8>();
            assert_eq!(
                libc::mprotect(base.add(PAGE).cast(), PAGE, libc::PROT_NONE),
                0,
                "mprotect failed"
            );
            std::ptr::write_bytes(base, UNTOUCHED, PAGE);
            Guarded { base }
        }
    }

    /// The accessible page.
    fn page(&mut self) -> &mut [u8] {
        // SAFETY: the first page is mapped readable and writable and owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.base, PAGE) }
    }

    /// The address of a row of `n` elements of `T` ending where the inaccessible page starts.
    fn row<T>(&mut self, n: usize) -> *mut T {
        self.page()[PAGE - n * std::mem::size_of::<T>()..]
            .as_mut_ptr()
            .cast()
    }

    /// Fills the row of `n` elements ending at the guard with `values`.
    fn fill<T: Copy>(&mut self, values: &[T]) -> *const T {
        let row = self.row::<T>(values.len());
        // SAFETY: `row` holds `values.len()` elements inside the accessible page.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), row, values.len()) };
        row
    }

    /// The row of `n` elements ending at the guard, after a call wrote it, and whether every
    /// byte before it still holds [`UNTOUCHED`].
    fn result<T: Copy>(&mut self, n: usize) -> (Vec<T>, bool) {
        let bytes = n * std::mem::size_of::<T>();
        let untouched = self.page()[..PAGE - bytes].iter().all(|&b| b == UNTOUCHED);
        let row = self.row::<T>(n);
        // SAFETY: `row` holds `n` elements inside the accessible page, all written by the call.
        let values = unsafe { std::slice::from_raw_parts(row, n) }.to_vec();
        (values, untouched)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the two pages mapped in `new`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), 2 * PAGE) };
    }
}

/// Row lengths: every length up to five vectors of the widest compilation, and some around
/// the routines' unrolled steps.
fn lengths() -> impl Iterator<Item = usize> {
    (0..=80).chain([95, 96, 97, 127, 128, 129, 200])
}

/// `n` values: random magnitudes, and edge values (which take the slow paths) in
/// about one element in eight.
fn values<T: Elem>(rng: &mut Rng, n: usize, edges: &[f64]) -> Vec<T> {
    (0..n)
        .map(|_| {
            let bits = rng.next_u64();
            let x = if bits.is_multiple_of(8) {
                edges[(bits >> 8) as usize % edges.len()]
            } else {
                let magnitude = 10f64.powf(rng.uniform(-3.0, 2.0));
                if bits >> 63 == 1 { -magnitude } else { magnitude }
            };
            T::from_f64(x)
        })
        .collect()
}

/// Runs `routine` (element type `T`) on every length, checking each element against the
/// one-element entry and the pages around the rows.
///
/// # Safety
/// The CPU must have AVX2 and FMA, and `T` must be `routine`'s element type.
unsafe fn check_tails<T: Elem + std::fmt::Debug>(routine: AotFn, rng: &mut Rng) {
    let Some((_, one)) = routine.one() else {
        return;
    };
    let edges = edge_values(routine.dtype());
    let (mut a, mut b, mut out, mut out2) = (Guarded::new(), Guarded::new(), Guarded::new(), Guarded::new());
    for n in lengths() {
        let xs: Vec<T> = values(rng, n, &edges);
        let ys: Vec<T> = values(rng, n, &edges);
        for page in [&mut out, &mut out2] {
            page.page().fill(UNTOUCHED);
        }
        let (src_a, src_b) = (a.fill(&xs), b.fill(&ys));
        // SAFETY (every call): the addresses are `routine`'s and its entry's, of the ABIs
        // its table line names for `T`; each row holds `n` elements inside its page, and no
        // result row overlaps a source or the other result.
        unsafe {
            match routine.computes() {
                Computes::Unary(_) => {
                    let (tile, one) = unary_entries::<T>(routine, one);
                    tile(src_a, out.row(n), n);
                    let (got, untouched) = out.result::<T>(n);
                    assert!(untouched, "{routine:?} at n = {n} wrote before its row");
                    for (&x, &y) in xs.iter().zip(&got) {
                        assert_same(routine, &[x], one(x), y);
                    }
                    // The result right after the source in one page, as staging buffers lie.
                    if n > 0 && 2 * n * std::mem::size_of::<T>() <= PAGE {
                        let dst = a.row::<T>(n);
                        let src = dst.sub(n);
                        std::ptr::copy_nonoverlapping(xs.as_ptr(), src, n);
                        tile(src, dst, n);
                        for (k, &x) in xs.iter().enumerate() {
                            assert_same(routine, &[x], one(x), *dst.add(k));
                        }
                    }
                }
                Computes::SinCos => {
                    let (tile, one) = pair_entries::<T>(routine, one);
                    tile(src_a, out.row(n), out2.row(n), n);
                    let ((first, u1), (second, u2)) = (out.result::<T>(n), out2.result::<T>(n));
                    assert!(u1 && u2, "{routine:?} at n = {n} wrote before its rows");
                    for ((&x, &y), &z) in xs.iter().zip(&first).zip(&second) {
                        let mut want = T::default();
                        assert_same(routine, &[x], one(x, &raw mut want), y);
                        assert_same(routine, &[x], want, z);
                    }
                    // Both results right after the source in one page.
                    if n > 0 && 3 * n * std::mem::size_of::<T>() <= PAGE {
                        let second = a.row::<T>(n);
                        let (first, src) = (second.sub(n), second.sub(2 * n));
                        std::ptr::copy_nonoverlapping(xs.as_ptr(), src, n);
                        tile(src, first, second, n);
                        for (k, &x) in xs.iter().enumerate() {
                            let mut want = T::default();
                            assert_same(routine, &[x], one(x, &raw mut want), *first.add(k));
                            assert_same(routine, &[x], want, *second.add(k));
                        }
                    }
                }
                Computes::Binary(_) => {
                    let (tile, one) = binary_entries::<T>(routine, one);
                    tile(src_a, src_b, out.row(n), n);
                    let (got, untouched) = out.result::<T>(n);
                    assert!(untouched, "{routine:?} at n = {n} wrote before its row");
                    for ((&x, &y), &o) in xs.iter().zip(&ys).zip(&got) {
                        assert_same(routine, &[x, y], one(x, y), o);
                    }
                    // The result right after the second source in one page.
                    if n > 0 && 2 * n * std::mem::size_of::<T>() <= PAGE {
                        let dst = b.row::<T>(n);
                        let src = dst.sub(n);
                        std::ptr::copy_nonoverlapping(ys.as_ptr(), src, n);
                        tile(src_a, src, dst, n);
                        for (k, (&x, &y)) in xs.iter().zip(&ys).enumerate() {
                            assert_same(routine, &[x, y], one(x, y), *dst.add(k));
                        }
                    }
                }
                Computes::Fused => {}
            }
        }
    }
}

#[test]
fn short_rows_and_last_elements_match_the_one_element_entries() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    let mut compilations = vec![true];
    if avx512() {
        compilations.push(false);
    }
    for narrow in compilations {
        NARROW.set(narrow);
        let mut rng = Rng(0x7a11_5eed);
        for routine in AotFn::ALL {
            // SAFETY: AVX2 and FMA were checked; the element type is the routine's.
            unsafe {
                match routine.dtype() {
                    rfx_ir::DType::F32 => check_tails::<f32>(routine, &mut rng),
                    _ => check_tails::<f64>(routine, &mut rng),
                }
            }
        }
        NARROW.set(false);
    }
}
