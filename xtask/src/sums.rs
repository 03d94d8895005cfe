//! `cargo xtask long-sums [--profile release] [--backend cpu]`: long float reductions against
//! their closed forms, through `rfx eval`: `sum` and `mean` of 10⁸ `f32` values of 0.1, `sum`
//! of 10⁸ `f64` values of 0.1, and `sum` of 10¹⁰ `f32` ones (a broadcast, so no memory is
//! read). Each result must lie within the bound `docs/errors.md` states for the blocked
//! pairwise order, `(min(n, 2048) / L + L + bit_length(ceil(n / 2048))) · u` relative (`L` the
//! lanes of a long reduction: 16 for `f32`, 8 for `f64`), plus one rounding for the mean and for the closed form
//! itself. A sequential `f32` sum is 1% off at 10⁷ and stops at 2²⁴ = 16,777,216 for ones.

use std::path::Path;

/// One check: the expression over input `x` (one element), its input value and dtype, the
/// point count and the exact result.
struct LongSum {
    name: &'static str,
    expr: String,
    dtype: &'static str,
    value: f64,
    points: u64,
    exact: f64,
    lanes: u64,
    /// Roundings beyond the sum's bound: the mean's division and the closed form's.
    extra_roundings: f64,
}

fn checks() -> Vec<LongSum> {
    let tenth_f32 = f64::from(0.1f32);
    vec![
        LongSum {
            name: "sum of 1e8 f32 values of 0.1",
            expr: "sum(broadcast_to(x, [100000000]))".into(),
            dtype: "f32",
            value: tenth_f32,
            points: 100_000_000,
            exact: tenth_f32 * 1e8,
            lanes: 16,
            extra_roundings: 1.0,
        },
        LongSum {
            name: "mean of 1e8 f32 values of 0.1",
            expr: "mean(broadcast_to(x, [100000000]))".into(),
            dtype: "f32",
            value: tenth_f32,
            points: 100_000_000,
            exact: tenth_f32,
            lanes: 16,
            extra_roundings: 2.0,
        },
        LongSum {
            name: "sum of 1e8 f64 values of 0.1",
            expr: "sum(broadcast_to(x, [100000000]))".into(),
            dtype: "f64",
            value: 0.1,
            points: 100_000_000,
            exact: 1e7,
            lanes: 8,
            extra_roundings: 1.0,
        },
        LongSum {
            name: "sum of 1e10 f32 ones (broadcast)",
            expr: "sum(broadcast_to(x, [100000, 100000]))".into(),
            dtype: "f32",
            value: 1.0,
            points: 10_000_000_000,
            exact: 1e10,
            lanes: 16,
            extra_roundings: 1.0,
        },
    ]
}

/// The relative bound of a blocked sum of `points` non-negative values (first order in the
/// unit roundoff `u`), plus `extra` roundings.
fn relative_bound(points: u64, lanes: u64, unit_roundoff: f64, extra: f64) -> f64 {
    const LEAF: u64 = 2048;
    let leaf = LEAF.next_multiple_of(lanes);
    let leaves = points.div_ceil(leaf);
    let depth = u64::from(u64::BITS - leaves.leading_zeros());
    unit_roundoff * ((points.min(leaf) / lanes + lanes + depth) as f64 + extra)
}

/// A one-element `.npy` file of `dtype` holding `value`.
fn npy_scalar(dtype: &str, value: f64) -> Vec<u8> {
    let descr = if dtype == "f64" { "<f8" } else { "<f4" };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
    // Magic (6) + version (2) + length (2) + header + newline, padded to a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).unwrap_or(0).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    if dtype == "f64" {
        bytes.extend_from_slice(&value.to_le_bytes());
    } else {
        bytes.extend_from_slice(&(value as f32).to_le_bytes());
    }
    bytes
}

/// The one value `rfx eval` printed: `out: f32[] = [1000000.0]`.
fn printed_value(stdout: &str) -> Result<f64, String> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("out:"))
        .ok_or_else(|| format!("no `out:` line in {stdout:?}"))?;
    let list = line
        .rsplit_once('=')
        .map(|(_, v)| v.trim())
        .ok_or_else(|| format!("no value in {line:?}"))?;
    list.trim_start_matches('[')
        .trim_end_matches(']')
        .trim()
        .parse::<f64>()
        .map_err(|e| format!("{line:?}: {e}"))
}

/// Runs every check; `Ok(false)` when one is outside its bound.
pub(crate) fn long_sums(root: &Path, args: &[String]) -> Result<bool, String> {
    let flags = crate::perf::flags(args)?;
    if let Some(unknown) = flags
        .keys()
        .find(|k| !matches!(k.as_str(), "profile" | "backend"))
    {
        return Err(format!(
            "unknown flag `--{unknown}` (long-sums takes --profile NAME and --backend NAME)"
        ));
    }
    let profile = flags.get("profile").map_or("release", String::as_str);
    let backend = flags.get("backend").map_or("cpu", String::as_str);
    let dir = root.join("target").join("xtask-long-sums");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut all_within = true;
    for check in checks() {
        let input = dir.join(format!("x_{}_{}.npy", check.dtype, check.value));
        std::fs::write(&input, npy_scalar(check.dtype, check.value))
            .map_err(|e| format!("{}: {e}", input.display()))?;
        let started = std::time::Instant::now();
        let output = crate::cargo(root)
            .args([
                "run",
                "--quiet",
                "--profile",
                profile,
                "-p",
                "rfx-cli",
                "--",
                "eval",
            ])
            .arg(&check.expr)
            .arg("--in")
            .arg(format!("x={}", input.display()))
            .args(["--backend", backend])
            .output()
            .map_err(|e| format!("running rfx eval: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "rfx eval {:?} failed ({}): {}",
                check.expr,
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let got = printed_value(&String::from_utf8_lossy(&output.stdout))?;
        let unit_roundoff = if check.dtype == "f64" {
            f64::EPSILON / 2.0
        } else {
            f64::from(f32::EPSILON) / 2.0
        };
        let bound = relative_bound(check.points, check.lanes, unit_roundoff, check.extra_roundings);
        let error = (got - check.exact).abs() / check.exact;
        let within = error <= bound;
        all_within &= within;
        println!(
            "{:<36} {got:>20} exact {:>20} relative error {error:.2e} bound {bound:.2e} {} ({:.1} s)",
            check.name,
            check.exact,
            if within { "ok" } else { "OUTSIDE" },
            started.elapsed().as_secs_f64()
        );
    }
    Ok(all_within)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_padded_to_64_bytes() {
        let bytes = npy_scalar("f32", 0.5);
        assert_eq!(bytes.len(), 128 + 4);
        assert_eq!(usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 128 - 10);
        assert_eq!(bytes[127], b'\n');
        assert_eq!(&bytes[128..], &0.5f32.to_le_bytes());
        let bytes = npy_scalar("f64", 0.5);
        assert_eq!(&bytes[128..], &0.5f64.to_le_bytes());
    }

    #[test]
    fn reads_the_printed_value() {
        assert_eq!(printed_value("out: f32[] = [1000000.125]\n"), Ok(1_000_000.125));
        assert!(printed_value("nothing\n").is_err());
    }

    #[test]
    fn bound_grows_with_the_logarithm() {
        let u = f64::from(f32::EPSILON) / 2.0;
        // 128 points per lane in a leaf, 16 lanes, 16 levels for 10⁸ points, one rounding.
        let b8 = relative_bound(100_000_000, 16, u, 1.0);
        assert!((b8 / u - (128.0 + 16.0 + 16.0 + 1.0)).abs() < 1e-9, "{}", b8 / u);
        // A hundred times more points: 7 more levels.
        let b10 = relative_bound(10_000_000_000, 16, u, 1.0);
        assert!((b10 / u - b8 / u - 7.0).abs() < 1e-9, "{}", b10 / u - b8 / u);
        // Short sums: the sequential part is the sum's length.
        assert!((relative_bound(64, 8, u, 0.0) / u - (8.0 + 8.0 + 1.0)).abs() < 1e-9);
    }
}
