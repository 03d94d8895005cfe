//! The tables of the `f64` `pow` routine, computed once in double-double arithmetic.
//!
//! The routine follows the table-driven method of Szabolcs Nagy's `pow` (Arm's optimized
//! routines, in glibc and musl since 2018): `log|x|` as a double-double from a table of `1/c`,
//! `log c` over 128 subintervals of the mantissa, then `e^(y log|x|)` from a table of
//! `2^(j/128)`. The tables here are not copied from there: they are built from their definitions
//! once (when the JIT registers the routines, `aot::prepare_tables`), in double-double
//! arithmetic accurate to about `2^-100`, and checked by
//! `tests::pow_tables_hold_their_invariants`.

use std::sync::OnceLock;

/// Subintervals of the mantissa in the log table, and steps per octave in the exp table.
pub(super) const N: usize = 128;

/// The bits of `0x1.69555p-1`: the reduced mantissa `z` of `|x| = 2^k z` lies in
/// `[OFF, 2 OFF)` as values (about `[0.7077, 1.4155)`), which puts `z = 1` inside a subinterval
/// (not on an edge), so `x` near 1 takes `c = 1` and no cancellation.
pub(super) const OFF: u64 = 0x3fe6_9555_0000_0000;

/// One log-table entry: `inv_c = 1/c` (a multiple of `1/256` with at most 9 significant bits,
/// so `z inv_c - 1` is exact with an FMA), `log_c` (`log c` rounded to a multiple of `2^-43`,
/// so `k ln2_hi + log_c` is exact), `log_c_tail = log c - log_c`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LogEntry {
    pub inv_c: f64,
    pub log_c: f64,
    pub log_c_tail: f64,
}

/// Everything the `f64` `pow` routine reads.
#[derive(Debug)]
pub(super) struct PowTables {
    /// `ln 2` rounded to a multiple of `2^-42` (so `k ln2_hi` is exact for `|k| < 2^11`) and
    /// the rest.
    pub ln2_hi: f64,
    pub ln2_lo: f64,
    pub log: [LogEntry; N],
    /// `2^(j/N) = h_j (1 + t_j)`: entry `2j` holds the bits of `t_j`, entry `2j + 1` the bits
    /// of `h_j` less `j << 45`, so that adding `k << 45` for `k = q N + j` gives `h_j 2^q`.
    pub exp: [u64; 2 * N],
    /// `-ln2/N` in two parts, the head with 21 trailing zero bits so `k` times it is exact.
    pub neg_ln2_hi_n: f64,
    pub neg_ln2_lo_n: f64,
}

/// The tables, built on first use.
pub(super) fn tables() -> &'static PowTables {
    static TABLES: OnceLock<PowTables> = OnceLock::new();
    TABLES.get_or_init(build)
}

/// A double-double: the unevaluated sum `hi + lo` with `|lo| <= ulp(hi)/2`.
#[derive(Clone, Copy, Debug)]
struct Dd {
    hi: f64,
    lo: f64,
}

fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    Dd {
        hi: s,
        lo: (a - (s - bb)) + (b - bb),
    }
}

fn quick_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd {
        hi: s,
        lo: b - (s - a),
    }
}

impl Dd {
    fn from(x: f64) -> Dd {
        Dd { hi: x, lo: 0.0 }
    }

    fn add(self, other: Dd) -> Dd {
        let s = two_sum(self.hi, other.hi);
        let t = two_sum(self.lo, other.lo);
        let s = quick_two_sum(s.hi, s.lo + t.hi);
        quick_two_sum(s.hi, s.lo + t.lo)
    }

    fn neg(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }

    fn mul(self, other: Dd) -> Dd {
        let p = self.hi * other.hi;
        let e = self.hi.mul_add(other.hi, -p);
        quick_two_sum(p, e + (self.hi * other.lo + self.lo * other.hi))
    }

    fn mul_f64(self, x: f64) -> Dd {
        self.mul(Dd::from(x))
    }

    /// `self / other` by one correction of the double quotient (twice, for the last bits).
    fn div(self, other: Dd) -> Dd {
        let q1 = self.hi / other.hi;
        let r = self.add(other.mul_f64(q1).neg());
        let q2 = r.hi / other.hi;
        let r = r.add(other.mul_f64(q2).neg());
        let q3 = r.hi / other.hi;
        quick_two_sum(q1, q2).add(Dd::from(q3))
    }

    fn to_f64(self) -> f64 {
        self.hi + self.lo
    }
}

/// `log(1 + t) - log(1 - t) = 2 atanh t` for `|t| <= 0.2`, summed until the terms vanish.
fn two_atanh(t: Dd) -> Dd {
    let t2 = t.mul(t);
    let mut power = t;
    let mut sum = t;
    for n in (3..200).step_by(2) {
        power = power.mul(t2);
        let term = power.div(Dd::from(n as f64));
        sum = sum.add(term);
        if term.hi.abs() < sum.hi.abs() * 1e-40 {
            break;
        }
    }
    sum.add(sum)
}

/// `ln 2 = 2 atanh(1/3)`.
fn ln2() -> Dd {
    two_atanh(Dd::from(1.0).div(Dd::from(3.0)))
}

/// `log v` for `v` in `[0.7, 1.42]` (exact `v`): `2 atanh((v - 1)/(v + 1))`.
fn log_near_one(v: f64) -> Dd {
    // v - 1 and v + 1 are exact for the few-bit `v` of the table.
    two_atanh(Dd::from(v - 1.0).div(Dd::from(v + 1.0)))
}

/// `e^a` for `0 <= a < 0.7` by its Taylor series.
fn exp_dd(a: Dd) -> Dd {
    let mut term = Dd::from(1.0);
    let mut sum = Dd::from(1.0);
    for n in 1..60 {
        term = term.mul(a).div(Dd::from(f64::from(n)));
        sum = sum.add(term);
        if term.hi.abs() < 1e-40 {
            break;
        }
    }
    sum
}

fn build() -> PowTables {
    let ln2 = ln2();
    // Multiples of 2^-42 below 1 have at most 42 significant bits; times |k| < 2^11, exact.
    let ln2_hi = (ln2.hi * 2f64.powi(42)).round() / 2f64.powi(42);
    let ln2_lo = ln2.add(Dd::from(-ln2_hi)).to_f64();

    let mut log = [LogEntry {
        inv_c: 1.0,
        log_c: 0.0,
        log_c_tail: 0.0,
    }; N];
    for (i, entry) in log.iter_mut().enumerate() {
        // The subinterval's ends as values (the bits run monotonically with the values).
        let lo = f64::from_bits(OFF + ((i as u64) << 45));
        let hi = f64::from_bits(OFF + ((i as u64 + 1) << 45));
        // The subintervals reaching within 2^-7.4 of 1 take c = 1 (log c = 0 exactly), so the
        // log of x near 1 has no cancellation.
        if (lo - 1.0).abs().max((hi - 1.0).abs()) < 0.0059 {
            continue;
        }
        let center = 0.5 * (lo + hi);
        // 1/c with few bits: a multiple of 1/N below 1 (N/center in [N, 2N)), of 1/(2N) above.
        let inv_c = if center < 1.0 {
            (N as f64 / center).round() / N as f64
        } else {
            (2.0 * N as f64 / center).round() / (2.0 * N as f64)
        };
        let log_c = log_near_one(inv_c).neg();
        let rounded = (log_c.hi * 2f64.powi(43)).round() / 2f64.powi(43);
        *entry = LogEntry {
            inv_c,
            log_c: rounded,
            log_c_tail: log_c.add(Dd::from(-rounded)).to_f64(),
        };
    }

    let mut exp = [0u64; 2 * N];
    for j in 0..N {
        let value = exp_dd(ln2.mul_f64(j as f64 / N as f64));
        let h = value.to_f64();
        let t = value.add(Dd::from(-h)).to_f64() / h;
        exp[2 * j] = t.to_bits();
        exp[2 * j + 1] = h.to_bits().wrapping_sub((j as u64) << 45);
    }

    let ln2_n = ln2.mul_f64(1.0 / N as f64);
    // 32 significant bits: k < 2^21 in the routine's range, so k times the head is exact.
    let head = (ln2_n.hi * 2f64.powi(39)).round() / 2f64.powi(39);
    PowTables {
        ln2_hi,
        ln2_lo,
        log,
        exp,
        neg_ln2_hi_n: -head,
        neg_ln2_lo_n: -ln2_n.add(Dd::from(-head)).to_f64(),
    }
}
