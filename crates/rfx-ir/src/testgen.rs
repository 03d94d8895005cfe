//! Random inputs for tests and benchmarks: a small deterministic RNG ([`TestRng`]) and arrays
//! of any type with special values mixed in ([`random_inputs`], [`random_array`]); and what
//! tests share beside them: the comparison of results with their reference ([`same_values`]),
//! an accurate reference sum ([`accurate_sum`]) and the reading of a corpus of kernels
//! ([`read_corpus`]).
//!
//! Enabled by the `testgen` cargo feature. Generation is driven by the RNG seeded by the
//! caller, so a failing case is reproduced from its seed alone. Random kernels are made by the
//! checking crate (`rfx-check`'s `generator`), except random kernels with bounded loops
//! ([`random_loop_kernel`]), which every stage that compiles loops tests against the HIR
//! interpreter.

mod loops;

use std::path::Path;

use crate::hir::Kernel;
use crate::{Array, ArrayData, DType, Scalar, Shape, TensorType};

pub use loops::{LoopGenConfig, random_loop_kernel};

/// SplitMix64: a tiny, fast, deterministic generator (not for cryptography).
#[derive(Clone, Debug)]
pub struct TestRng(u64);

impl TestRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> TestRng {
        TestRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`; returns 0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A uniform float in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform(0.0, 1.0) < p
    }

    /// A uniformly chosen element of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

/// The `.rfx` files of `dir` (kernels in the HIR text format), in name order, each as its file
/// stem and its text: how tests read a corpus.
pub fn read_corpus(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rfx") {
            files.push(path);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok((name, std::fs::read_to_string(&path)?))
        })
        .collect()
}

/// Neumaier's compensated sum of `values`: accurate to about one `f64` rounding of the result,
/// the reference tests hold a backend's reductions to.
pub fn accurate_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut comp) = (0.0f64, 0.0f64);
    for x in values {
        let t = sum + x;
        if sum.abs() >= x.abs() {
            comp += (sum - t) + x;
        } else {
            comp += (x - t) + sum;
        }
        sum = t;
    }
    sum + comp
}

/// Whether `a` and `b` have the same shape, dtype and value bits (`Scalar` compares bits), any
/// NaN matching any NaN: how tests compare a result with its reference.
pub fn same_values(a: &Array, b: &Array) -> bool {
    a.shape() == b.shape()
        && a.dtype() == b.dtype()
        && (0..a.data().len()).all(|i| {
            let (x, y) = (a.get(i), b.get(i));
            x == y
                || x.zip(y)
                    .is_some_and(|(x, y)| x.to_f64().is_nan() && y.to_f64().is_nan())
        })
}

/// The special float values random inputs mix in: signed zeros, infinities, NaN, subnormals
/// (as `f32` too), huge values and ±1.
pub const SPECIAL_VALUES: [f64; 11] = [
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e-40,
    -3e-39,
    1e30,
    -1e30,
    1.0,
    -1.0,
];

/// Random inputs for `kernel`: floats mostly uniform in [-4, 4] with special values (±0, ±Inf,
/// NaN, subnormals, huge) mixed in with probability `special_rate`; i32 in [-20, 20]; bools
/// uniform.
pub fn random_inputs(rng: &mut TestRng, kernel: &Kernel, special_rate: f64) -> Vec<Array> {
    kernel
        .inputs()
        .map(|(_, _, ty)| random_array(rng, ty, special_rate))
        .collect()
}

/// A random array of type `ty` (see [`random_inputs`]).
pub fn random_array(rng: &mut TestRng, ty: &TensorType, special_rate: f64) -> Array {
    let n = ty.shape.numel();
    let float = |rng: &mut TestRng| {
        if rng.chance(special_rate) {
            *rng.pick(&SPECIAL_VALUES).unwrap_or(&0.0)
        } else {
            rng.uniform(-4.0, 4.0)
        }
    };
    let data = match ty.dtype {
        DType::Bool => ArrayData::Bool((0..n).map(|_| rng.chance(0.5)).collect()),
        DType::I32 => ArrayData::I32((0..n).map(|_| rng.below(41) as i32 - 20).collect()),
        DType::F32 => ArrayData::F32((0..n).map(|_| float(rng) as f32).collect()),
        DType::F64 => ArrayData::F64((0..n).map(|_| float(rng)).collect()),
    };
    Array::new(ty.shape.clone(), data)
        .unwrap_or_else(|_| Array::filled(Scalar::zero(ty.dtype), Shape::scalar()))
}
