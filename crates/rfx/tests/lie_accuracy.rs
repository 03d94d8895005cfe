//! The table "Accuracy (measured)" of `docs/lie.md`, measured: the largest absolute errors of
//! `so3_exp`, `so3_exp_with_jacobians`' `Exp`, `so3_log(so3_exp(ω))` against `ω`, `so3_jr`,
//! `so3_jl`, `so3_jr_inv` and `so3_jl_inv`, in units of the dtype's roundoff `u`, against the
//! plain-Rust `f64` reference (`lie_ref`), over the angles the page lists (0, 1e-12, 1e-7, 1e-4,
//! 0.05, 0.4, 1, 2, 3, π - 1e-9, π and 400 seeded random angles near 0 and near π) on seeded
//! random axes, in `f64` and `f32`, on every backend of the build. (`so3_exp_with_jacobians`'
//! `Jr` and `Jl` are `so3_jr`'s and `so3_jl`'s operations, whose equality `lie_exp_jacobians.rs`
//! checks.)
//!
//! The test prints the measured table (`--nocapture`) and reads the page's: every figure the
//! page states for `f64` and `f32` bounds what the `cpu`, `interp` and `c` backends measure,
//! with half a unit of roundoff to spare (libm's last bit may differ on other machines), so
//! that an accuracy regression past the documented figures fails here rather than leaving the
//! page stale. Other backends (`cuda`, `metal`, where built and available) are measured and
//! printed.

use crate::lie_ref;

use lie_ref::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rfx::{DType, Tensor, lie};

const PI: f64 = std::f64::consts::PI;

/// The page the table lives on, and the heading above it.
const PAGE: &str = include_str!("../../../docs/lie.md");
const HEADING: &str = "### Accuracy (measured)";

/// The quantities measured, as the page's header cells name them, in its column order.
const COLUMNS: [&str; 7] = [
    "`so3_exp`",
    "`so3_exp_with_jacobians`' `Exp`",
    "`so3_log(so3_exp(ω))` vs `ω`",
    "`so3_jr`",
    "`so3_jl`",
    "`so3_jr_inv`",
    "`so3_jl_inv`",
];

/// The backends the page's figures are measured on and bound (`c` where a C compiler runs it;
/// the reference backends `cpu` and `interp` always).
const DOCUMENTED_BACKENDS: [&str; 3] = ["c", "cpu", "interp"];

/// What a measured figure may exceed the documented one by, in units of roundoff.
const SPARE_UNITS: f64 = 0.5;

/// The count of random angles near 0 and near π each (`angles` draws one of each per round).
const RANDOM_ROUNDS: usize = 200;
const SEED: u64 = 2026;

/// The measured errors of one backend, per column, in units of roundoff.
type Figures = [Option<f64>; COLUMNS.len()];

/// The test tangents: every angle of `angles` about its own seeded random axis.
fn tangents() -> Vec<V3> {
    let mut rng = StdRng::seed_from_u64(SEED);
    angles(RANDOM_ROUNDS, SEED)
        .into_iter()
        .map(|theta| scale(axis(&mut rng), theta))
        .collect()
}

/// `Log(Exp(ω))` exactly: `ω`, or where `‖ω‖ > π` (an `f32` tangent rounded past π) the
/// tangent of the same rotation with `θ - 2π`.
fn wrapped(w: V3) -> V3 {
    let theta = norm(w);
    if theta > PI {
        scale(w, (theta - 2.0 * PI) / theta)
    } else {
        w
    }
}

/// The largest error of `Log(Exp(ω))` against [`wrapped`] `ω`: where the reference quaternion's
/// `w` is within rounding of 0 (`θ` at π), `ω` and `-ω` are the same rotation and either may
/// come back.
fn log_error(got: &[f64], held: &[V3], dtype: DType) -> f64 {
    let mut worst = 0.0f64;
    for (i, &w) in held.iter().enumerate() {
        let (got, want) = (&got[3 * i..3 * i + 3], wrapped(w));
        let error = |sign: f64| {
            (0..3)
                .map(|k| (got[k] - sign * want[k]).abs())
                .fold(0.0, f64::max)
        };
        let e = if so3_exp(w)[0].abs() < 1e3 * roundoff(dtype) {
            error(1.0).min(error(-1.0))
        } else {
            error(1.0)
        };
        assert!(e.is_finite(), "log(exp)[{i}]: {got:?} against {want:?}");
        worst = worst.max(e);
    }
    worst
}

/// The largest `|got - want|`, failing on a value that is not finite.
fn error(what: &str, got: &[f64], want: &[f64]) -> f64 {
    assert!(got.iter().all(|g| g.is_finite()), "{what}: not finite");
    max_error(got, want).0
}

/// `f` at `input` on `backend`, its first output, or `None` where `backend` cannot run it
/// (see `run`).
fn first_output<M, F: rfx::IntoKernelFn<M>>(backend: &str, f: F, input: &rfx::Array) -> Option<Vec<f64>> {
    let f = rfx::jit(f).on_backend(backend);
    run("accuracy column", backend, &f, (input,)).map(|mut out| out.swap_remove(0))
}

/// The columns' values at `input` on `backend`, from one kernel, or from a kernel per column
/// where `backend` cannot run that one (`metal` takes at most 32 buffers in a kernel).
fn outputs(backend: &str, input: &rfx::Array) -> [Option<Vec<f64>>; COLUMNS.len()] {
    let all = rfx::jit(|w: Tensor| {
        let q = lie::so3_exp(w);
        vec![
            q,
            lie::so3_exp_with_jacobians(w).0,
            lie::so3_log(q),
            lie::so3_jr(w),
            lie::so3_jl(w),
            lie::so3_jr_inv(w),
            lie::so3_jl_inv(w),
        ]
    })
    .on_backend(backend);
    if let Some(out) = run("all columns in one kernel", backend, &all, (input,)) {
        let mut out = out.into_iter();
        return std::array::from_fn(|_| out.next());
    }
    [
        first_output(backend, lie::so3_exp, input),
        first_output(backend, |w: Tensor| lie::so3_exp_with_jacobians(w).0, input),
        first_output(backend, |w: Tensor| lie::so3_log(lie::so3_exp(w)), input),
        first_output(backend, lie::so3_jr, input),
        first_output(backend, lie::so3_jl, input),
        first_output(backend, lie::so3_jr_inv, input),
        first_output(backend, lie::so3_jl_inv, input),
    ]
}

/// Every backend of the build that runs `dtype`, with its figures (`None` for a column the
/// backend cannot run).
fn measure(dtype: DType) -> Vec<(&'static str, Figures)> {
    let omegas = tangents();
    let held: Vec<V3> = stored(dtype, &flat(&omegas))
        .chunks(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let input = array(dtype, &[held.len(), 3], &flat(&held));
    let quats = flat(&held.iter().map(|&w| so3_exp(w)).collect::<Vec<Q>>());
    let jr: Vec<M3> = held.iter().map(|&w| so3_jr(w, false)).collect();
    let jl: Vec<M3> = held.iter().map(|&w| so3_jr(w, true)).collect();
    let jr_inv: Vec<M3> = held.iter().map(|&w| so3_jr_inv(w, false)).collect();
    let jl_inv: Vec<M3> = held.iter().map(|&w| so3_jr_inv(w, true)).collect();
    let want = [
        &quats,
        &quats,
        &vec![],
        &m3s(&jr),
        &m3s(&jl),
        &m3s(&jr_inv),
        &m3s(&jl_inv),
    ];
    let mut out = Vec::new();
    for backend in backends(dtype) {
        let mut figures: Figures = [None; COLUMNS.len()];
        for (k, got) in outputs(backend, &input).into_iter().enumerate() {
            let Some(got) = got else { continue };
            let e = if k == 2 {
                log_error(&got, &held, dtype)
            } else {
                error(&format!("{backend} {dtype}: {}", COLUMNS[k]), &got, want[k])
            };
            figures[k] = Some(e / roundoff(dtype));
        }
        out.push((backend, figures));
    }
    out
}

/// The page's table: its header cells after the first, and its rows as (dtype cell, figures
/// in units of roundoff). A cell's figure is the number before its ` u`.
fn documented_table() -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let section = PAGE
        .split_once(HEADING)
        .unwrap_or_else(|| panic!("docs/lie.md has no heading {HEADING:?}"))
        .1;
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_owned())
            .collect()
    };
    let mut lines = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    let header = cells(lines.next().expect("the accuracy table's header"));
    let rows = lines
        .skip(1)
        .map(|line| {
            let row = cells(line);
            let figures = row[1..]
                .iter()
                .map(|cell| {
                    cell.split_once(" u")
                        .and_then(|(number, _)| number.parse::<f64>().ok())
                        .unwrap_or_else(|| panic!("docs/lie.md: no figure in {cell:?}"))
                })
                .collect();
            (row[0].clone(), figures)
        })
        .collect();
    (header[1..].to_vec(), rows)
}

/// A markdown row: `label`, then each figure in units of roundoff.
fn row(label: &str, figures: &[Option<f64>]) -> String {
    let cells: Vec<String> = figures
        .iter()
        .map(|f| f.map_or(" skipped |".to_owned(), |f| format!(" {f:.1} u |")))
        .collect();
    format!("| {label} |{}", cells.concat())
}

/// The reference `Jr⁻¹` (`so3_jr_inv`, the closed form) against `Jr(ω)⁻¹` computed with
/// mpmath at 50 digits and rounded to `f64`, at a tangent near π (where the numerical inverse
/// of the reference `Jr`, `inv3`, is 6.8 u off), a generic one and one in the series branch;
/// and against `inv3` over the test tangents, within the numerical inverse's own rounding.
#[test]
fn reference_jr_inv_is_the_inverse_within_two_units() {
    let cases: [(V3, M3); 3] = [
        (
            [-2.932932677331843, 0.4849848320808219, -1.0159194576849595],
            [
                [0.8715960287465347, 0.36383836294731015, 0.5443898985922703],
                [-0.6520810947376494, 0.023857627322573592, 1.4165450769156402],
                [0.05940506651144834, -1.516387600416203, 0.10459826352702972],
            ],
        ),
        (
            [2.0, 1.0, -0.5],
            [
                [0.8854070276711644, 0.43334875572613696, 0.4083256221369315],
                [-0.06665124427386303, 0.6103838940819589, -1.0458371889315343],
                [-0.5916743778630685, 0.9541628110684658, 0.5416281106846575],
            ],
        ),
        (
            [0.1, -0.2, 0.15],
            [
                [0.9947853623805505, -0.07666868403822383, -0.09874848697133214],
                [0.07333131596177617, 0.9972883884378863, -0.05250302605733574],
                [0.10125151302866787, 0.047496973942664264, 0.9958282899044404],
            ],
        ),
    ];
    let u = roundoff(DType::F64);
    for (w, want) in cases {
        let got = m3s(&[so3_jr_inv(w, false)]);
        assert_close(&format!("Jr⁻¹({w:?})"), &got, &m3s(&[want]), 2.0 * u);
        // Jl⁻¹(ω) = Jr⁻¹(ω)ᵀ.
        let left = m3s(&[so3_jr_inv(w, true)]);
        assert_close(&format!("Jl⁻¹({w:?})"), &left, &m3s(&[transpose(&want)]), 2.0 * u);
    }
    for w in tangents() {
        for left in [false, true] {
            let numerical = m3s(&[inv3(&so3_jr(w, left))]);
            assert_close(
                &format!("inv3 at {w:?}"),
                &m3s(&[so3_jr_inv(w, left)]),
                &numerical,
                16.0 * u,
            );
        }
    }
}

#[test]
fn documented_lie_accuracy_bounds_the_measured_errors() {
    let measured = [DType::F64, DType::F32].map(|dtype| (dtype, measure(dtype)));
    println!("| |{}", COLUMNS.map(|c| format!(" {c} |")).concat());
    println!("|---|{}", "---|".repeat(COLUMNS.len()));
    for (dtype, backends) in &measured {
        let mut worst: Figures = [None; COLUMNS.len()];
        for (backend, figures) in backends {
            println!("{}", row(&format!("`{dtype}` {backend}"), figures));
            if DOCUMENTED_BACKENDS.contains(backend) {
                worst = std::array::from_fn(|k| match (worst[k], figures[k]) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                });
            }
        }
        // The page's row: the largest figure of the backends it documents.
        println!("{}", row(&format!("`{dtype}`"), &worst));
    }

    let (header, rows) = documented_table();
    assert_eq!(
        header, COLUMNS,
        "docs/lie.md's accuracy table names the columns this test measures, in order"
    );
    let mut failures = Vec::new();
    for (dtype, backends) in &measured {
        let label = format!("`{dtype}`");
        let documented = &rows
            .iter()
            .find(|(cell, _)| *cell == label)
            .unwrap_or_else(|| panic!("docs/lie.md's accuracy table has no row {label}"))
            .1;
        assert_eq!(documented.len(), COLUMNS.len(), "docs/lie.md: the row {label}");
        for name in ["cpu", "interp"] {
            assert!(
                backends.iter().any(|(backend, _)| *backend == name),
                "{dtype}: `{name}` did not run"
            );
        }
        for (name, figures) in backends {
            if !DOCUMENTED_BACKENDS.contains(name) {
                continue;
            }
            for (k, figure) in figures.iter().enumerate() {
                if let Some(figure) = *figure
                    && figure > documented[k] + SPARE_UNITS
                {
                    failures.push(format!(
                        "{name} {dtype} {}: {figure:.2} u, documented {} u",
                        COLUMNS[k], documented[k]
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "measured errors past docs/lie.md's accuracy table:\n{}",
        failures.join("\n")
    );
}
