//! The one-element entries ([`AotFn::one`]) and the block entries ([`AotFn::block`]) against
//! the routines on arrays: for every routine and dtype, the entries' results are the routine's,
//! bit for bit, over special values (NaN, ±∞,
//! ±0, subnormals, the largest finite values), every fast range's boundaries and their
//! neighbours, points next to multiples of π/4, and random bit patterns and magnitudes. The
//! arrays are long enough that the routine runs its vector loop, so the entry is compared with
//! the lanes of the code kernels run on tiles.

use super::*;
use crate::test_rng::Rng;
use rfx_ir::DType;

/// Values where some routine changes path (fast range ends, reduction boundaries, where a
/// result over- or underflows), in `f64`; each is tried with its neighbours and negated.
const BOUNDARIES: [f64; 40] = [
    0.0,
    0.5,
    0.625,
    0.66,
    1.0,
    2.0,
    10.0,
    1e-300,
    1e-30,
    1e-8,
    0.414_213_562_373_095_1, // tan(π/8)
    2.414_213_562_373_095,   // tan(3π/8)
    std::f64::consts::SQRT_2,
    std::f64::consts::FRAC_1_SQRT_2,
    std::f64::consts::LN_2,
    std::f64::consts::PI,
    87.0,
    88.0,
    88.72,
    104.0,
    125.0,
    127.0,
    128.0,
    150.0,
    350.0,
    708.0,
    709.0,
    709.8,
    745.2,
    1021.0,
    1023.0,
    1024.0,
    1075.0,
    32768.0, // 2^15, the `f32` trig fast range
    1.0e6,
    536_870_912.0, // 2^29, the `f64` trig fast range
    1.0e10,
    1e300,
    1e307,
    1e308,
];

/// Specials and boundary values of `dtype`, as `f64` (exact in `dtype`).
pub(super) fn edge_values(dtype: DType) -> Vec<f64> {
    let mut v = Vec::new();
    let mut push = |x: f64| {
        for x in [x, -x] {
            v.push(x);
            if dtype == DType::F32 {
                let x = x as f32;
                v.push(f64::from(x));
                for k in 1..=2 {
                    v.push(f64::from(f32::from_bits(x.to_bits().wrapping_add(k))));
                    v.push(f64::from(f32::from_bits(x.to_bits().wrapping_sub(k))));
                }
            } else {
                for k in 1..=2 {
                    v.push(f64::from_bits(x.to_bits().wrapping_add(k)));
                    v.push(f64::from_bits(x.to_bits().wrapping_sub(k)));
                }
            }
        }
    };
    for x in BOUNDARIES {
        push(x);
    }
    for k in 1..40 {
        push(f64::from(k) * std::f64::consts::FRAC_PI_4);
    }
    for k in [1e3, 1e5, 1e7, 1e8] {
        push((k * std::f64::consts::FRAC_2_PI).round() * std::f64::consts::FRAC_PI_2);
    }
    match dtype {
        DType::F32 => {
            for x in [
                f32::MIN_POSITIVE,
                f32::from_bits(1),
                f32::from_bits(0x0040_0000),
                f32::MAX,
                f32::INFINITY,
                f32::NAN,
                f32::EPSILON,
            ] {
                push(f64::from(x));
            }
        }
        _ => {
            for x in [
                f64::MIN_POSITIVE,
                f64::from_bits(1),
                f64::from_bits(0x0008_0000_0000_0000),
                f64::MAX,
                f64::INFINITY,
                f64::NAN,
                f64::EPSILON,
            ] {
                push(x);
            }
        }
    }
    v
}

/// The edge values, random bit patterns and random magnitudes from 1e-3 to 1e4 of either
/// sign, `count` random values of each kind.
fn inputs(dtype: DType, rng: &mut Rng, count: usize) -> Vec<f64> {
    let mut xs = edge_values(dtype);
    for _ in 0..count {
        let bits = rng.next_u64();
        xs.push(match dtype {
            DType::F32 => f64::from(f32::from_bits(bits as u32)),
            _ => f64::from_bits(bits),
        });
        let magnitude = 10f64.powf(rng.uniform(-3.0, 4.0));
        let x = if bits >> 63 == 1 { -magnitude } else { magnitude };
        xs.push(match dtype {
            DType::F32 => f64::from(x as f32),
            _ => x,
        });
    }
    xs
}

/// One of `dtype`'s elements, stored as `f64` and moved in and out of the routines' element
/// type by bits.
pub(super) trait Elem: Copy + Default {
    fn from_f64(x: f64) -> Self;
    fn bits(self) -> u64;
    fn is_nan(self) -> bool;
}

impl Elem for f32 {
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Elem for f64 {
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// Asserts `one == tile` bit for bit (any NaN for a NaN: a NaN's payload is not specified).
pub(super) fn assert_same<T: Elem + std::fmt::Debug>(routine: AotFn, args: &[T], one: T, tile: T) {
    let same = one.bits() == tile.bits() || (one.is_nan() && tile.is_nan());
    assert!(
        same,
        "{routine:?} at {args:?}: one-element entry {one:?} ({:#x}), routine on a tile {tile:?} ({:#x})",
        one.bits(),
        tile.bits()
    );
}

/// A unary routine's tile entry and its one-element entry `one`, as their C ABIs' function
/// types for element type `T`.
///
/// # Safety
/// `routine` must be unary, `one` its one-element entry, and `T` its element type.
pub(super) unsafe fn unary_entries<T>(
    routine: AotFn,
    one: *const u8,
) -> (
    unsafe extern "C" fn(*const T, *mut T, usize),
    unsafe extern "C" fn(T) -> T,
) {
    // SAFETY: the addresses are of these types (the caller's contract).
    unsafe {
        (
            std::mem::transmute::<*const u8, unsafe extern "C" fn(*const T, *mut T, usize)>(
                routine.address(),
            ),
            std::mem::transmute::<*const u8, unsafe extern "C" fn(T) -> T>(one),
        )
    }
}

/// [`unary_entries`] for a routine with two results.
///
/// # Safety
/// As [`unary_entries`], for a two-result routine.
pub(super) unsafe fn pair_entries<T>(
    routine: AotFn,
    one: *const u8,
) -> (
    unsafe extern "C" fn(*const T, *mut T, *mut T, usize),
    unsafe extern "C" fn(T, *mut T) -> T,
) {
    // SAFETY: as in `unary_entries`.
    unsafe {
        (
            std::mem::transmute::<*const u8, unsafe extern "C" fn(*const T, *mut T, *mut T, usize)>(
                routine.address(),
            ),
            std::mem::transmute::<*const u8, unsafe extern "C" fn(T, *mut T) -> T>(one),
        )
    }
}

/// [`unary_entries`] for a binary routine.
///
/// # Safety
/// As [`unary_entries`], for a binary routine.
pub(super) unsafe fn binary_entries<T>(
    routine: AotFn,
    one: *const u8,
) -> (
    unsafe extern "C" fn(*const T, *const T, *mut T, usize),
    unsafe extern "C" fn(T, T) -> T,
) {
    // SAFETY: as in `unary_entries`.
    unsafe {
        (
            std::mem::transmute::<*const u8, unsafe extern "C" fn(*const T, *const T, *mut T, usize)>(
                routine.address(),
            ),
            std::mem::transmute::<*const u8, unsafe extern "C" fn(T, T) -> T>(one),
        )
    }
}

/// The block entries' compilations this CPU runs: AVX2 (`false`), and AVX-512 (`true`) where
/// it has AVX-512 F and VL.
fn block_compilations() -> Vec<bool> {
    let mut wide = vec![false];
    #[cfg(target_arch = "x86_64")]
    if crate::aot::avx512() {
        wide.push(true);
    }
    wide
}

/// Compares `routine`'s entry with the routine on the arrays built from `xs` (a unary or pair
/// routine) or from pairs of them (a binary one).
///
/// # Safety
/// The CPU must have AVX2 and FMA, and `T` must be `routine`'s element type.
unsafe fn check<T: Elem + std::fmt::Debug>(routine: AotFn, xs: &[f64], rng: &mut Rng) -> usize {
    let Some((_, one)) = routine.one() else {
        return 0;
    };
    let xs: Vec<T> = xs.iter().map(|&x| T::from_f64(x)).collect();
    let n = xs.len();
    // SAFETY (every call below): the addresses are `routine`'s, of the ABI its table line
    // names for element type `T` (the caller's contract), on buffers of `n` elements that do
    // not overlap; the caller checked the CPU.
    unsafe {
        match routine.computes() {
            Computes::Unary(_) => {
                let (tile, one) = unary_entries::<T>(routine, one);
                let mut ys = vec![T::default(); n];
                tile(xs.as_ptr(), ys.as_mut_ptr(), n);
                for (&x, &y) in xs.iter().zip(&ys) {
                    assert_same(routine, &[x], one(x), y);
                }
                for wide in block_compilations() {
                    let block = routine
                        .block_for(wide)
                        .expect("a unary routine has a block entry");
                    let block: unsafe extern "C" fn(*const T, *mut T) = std::mem::transmute(block);
                    let lanes = BLOCK_BYTES / std::mem::size_of::<T>();
                    let mut out = vec![T::default(); lanes];
                    for (xs, ys) in xs.chunks_exact(lanes).zip(ys.chunks_exact(lanes)) {
                        block(xs.as_ptr(), out.as_mut_ptr());
                        for ((&x, &o), &y) in xs.iter().zip(&out).zip(ys) {
                            assert_same(routine, &[x], o, y);
                        }
                    }
                }
                n
            }
            Computes::SinCos => {
                assert!(
                    routine.block().is_none(),
                    "{routine:?}: two results, no block entry"
                );
                let (tile, one) = pair_entries::<T>(routine, one);
                let (mut ys, mut zs) = (vec![T::default(); n], vec![T::default(); n]);
                tile(xs.as_ptr(), ys.as_mut_ptr(), zs.as_mut_ptr(), n);
                for ((&x, &y), &z) in xs.iter().zip(&ys).zip(&zs) {
                    let mut second = T::default();
                    let first = one(x, &raw mut second);
                    assert_same(routine, &[x], first, y);
                    assert_same(routine, &[x], second, z);
                }
                n
            }
            Computes::Binary(_) => {
                let (tile, one) = binary_entries::<T>(routine, one);
                // Every pair of edge values, and each value against random partners
                // (integers among them, for `pow` of negative bases).
                let edges: Vec<T> = edge_values(routine.dtype())
                    .into_iter()
                    .map(T::from_f64)
                    .collect();
                let mut a = Vec::new();
                let mut b = Vec::new();
                for &x in &edges {
                    for &y in &edges {
                        a.push(x);
                        b.push(y);
                    }
                }
                for &x in &xs {
                    let partner = match rng.next_u64() % 3 {
                        0 => xs[(rng.next_u64() % n as u64) as usize],
                        1 => T::from_f64((rng.uniform(-40.0, 40.0)).round()),
                        _ => T::from_f64(rng.uniform(-3.0, 3.0)),
                    };
                    a.extend([x, partner]);
                    b.extend([partner, x]);
                }
                let mut ys = vec![T::default(); a.len()];
                tile(a.as_ptr(), b.as_ptr(), ys.as_mut_ptr(), a.len());
                for ((&x, &y), &z) in a.iter().zip(&b).zip(&ys) {
                    assert_same(routine, &[x, y], one(x, y), z);
                }
                for wide in block_compilations() {
                    let block = routine
                        .block_for(wide)
                        .expect("a binary routine has a block entry");
                    let block: unsafe extern "C" fn(*const T, *const T, *mut T) = std::mem::transmute(block);
                    let lanes = BLOCK_BYTES / std::mem::size_of::<T>();
                    let mut out = vec![T::default(); lanes];
                    for ((a, b), ys) in a
                        .chunks_exact(lanes)
                        .zip(b.chunks_exact(lanes))
                        .zip(ys.chunks_exact(lanes))
                    {
                        block(a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
                        for (((&x, &y), &o), &z) in a.iter().zip(b).zip(&out).zip(ys) {
                            assert_same(routine, &[x, y], o, z);
                        }
                    }
                }
                a.len()
            }
            Computes::Fused => 0,
        }
    }
}

#[test]
fn every_one_element_entry_gives_its_routines_bits() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut entries = 0;
    for routine in AotFn::ALL {
        let whole_row = matches!(routine.computes(), Computes::Binary(op) if AotFn::whole_row(op, routine.dtype()) == Some(routine));
        if matches!(routine.computes(), Computes::Fused) || whole_row {
            assert!(
                routine.one().is_none(),
                "{routine:?}: a fused pass or whole-row op has no one-element entry"
            );
            continue;
        }
        assert!(routine.one().is_some(), "{routine:?} has no one-element entry");
        let xs = inputs(routine.dtype(), &mut rng, 20_000);
        // SAFETY: the CPU was checked above, and `T` is the routine's dtype.
        let checked = unsafe {
            match routine.dtype() {
                DType::F32 => check::<f32>(routine, &xs, &mut rng),
                _ => check::<f64>(routine, &xs, &mut rng),
            }
        };
        assert!(checked > 40_000, "{routine:?}: {checked} elements compared");
        entries += 1;
    }
    assert_eq!(
        entries,
        AotFn::ALL.len() - 2 - 12,
        "every routine but the fused passes and the twelve whole-row ops"
    );
}

#[test]
fn one_element_entry_symbols_are_distinct() {
    let mut symbols: Vec<&str> = AotFn::ALL
        .iter()
        .filter_map(|r| r.one().map(|(symbol, _)| symbol))
        .collect();
    let count = symbols.len();
    symbols.extend(AotFn::ALL.iter().map(|r| r.symbol()));
    symbols.sort_unstable();
    symbols.dedup();
    assert_eq!(symbols.len(), count + AotFn::ALL.len());
}
