//! One test per rewrite rule: the rule fires on a kernel written for it, and the rewritten
//! kernel agrees with the original on the interpreter — bit for bit for exact rules (over every
//! special value), within the original op's error for refining rules, and on finite inputs for
//! fast-math rules.

use egg::Runner;
use rfx_ir::hir::{self, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, ArrayData};

use crate::config::OptConfig;
use crate::rules::{Exactness, rule_table, rules_named};
use crate::saturate::{extract_graph, to_egraph};

/// Values every exact rule is checked on, including every IEEE special case.
const SPECIALS: [f64; 16] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    0.5,
    -3.25,
    1e-40,
    -1e-310,
    1e30,
    3e38,
    f64::MAX,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    7.0,
];

fn finite_values() -> Vec<f64> {
    (0..64).map(|i| (i as f64 - 31.5) * 0.37).collect()
}

/// Fast-math rules hold on the domain where their ops are finite and invertible.
fn positive_values() -> Vec<f64> {
    (0..64).map(|i| (i as f64 + 1.0) * 0.29).collect()
}

/// Applies exactly one rule to `text` and returns the rewritten kernel and how often it fired.
fn apply_rule(name: &str, text: &str) -> (Kernel, Kernel, usize) {
    let kernel = hir::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = OptConfig::default();
    let (graph, ids) = to_egraph(&kernel, &config).unwrap();
    let rules = rules_named(&[name]);
    assert_eq!(rules.len(), 1, "rule `{name}` exists");
    let runner = crate::saturate::with_egg_clock(|| {
        Runner::default()
            .with_egraph(graph)
            .with_iter_limit(4)
            .run(&rules)
    });
    let fired: usize = runner
        .iterations
        .iter()
        .filter_map(|it| it.applied.get(&egg::Symbol::from(name)))
        .sum();
    let after = extract_graph(&kernel, &runner.egraph, &ids).unwrap();
    (kernel, after, fired)
}

fn input_array(kernel: &Kernel, values: &[f64]) -> Vec<Array> {
    kernel
        .inputs()
        .enumerate()
        .map(|(k, (_, _, ty))| {
            let n = ty.shape.numel();
            let pick = |i: usize| values[(i * (k + 1) + k) % values.len()];
            let data = match ty.dtype {
                rfx_ir::DType::F32 => ArrayData::F32((0..n).map(|i| pick(i) as f32).collect()),
                rfx_ir::DType::F64 => ArrayData::F64((0..n).map(pick).collect()),
                rfx_ir::DType::I32 => {
                    ArrayData::I32((0..n).map(|i| pick(i).clamp(-50.0, 50.0) as i32).collect())
                }
                rfx_ir::DType::Bool => ArrayData::Bool((0..n).map(|i| pick(i) > 0.0).collect()),
            };
            Array::new(ty.shape.clone(), data).unwrap()
        })
        .collect()
}

/// Maximum ULP distance between two results (NaN matches NaN; a NaN against a number is
/// `u64::MAX`).
fn max_ulps(a: &[Array], b: &[Array]) -> u64 {
    let mut worst = 0;
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.shape(), y.shape());
        for i in 0..x.data().len() {
            let (p, q) = (x.get(i).unwrap(), y.get(i).unwrap());
            let d = match (p, q) {
                (rfx_ir::Scalar::F32(p), rfx_ir::Scalar::F32(q)) if p.is_nan() && q.is_nan() => 0,
                (rfx_ir::Scalar::F64(p), rfx_ir::Scalar::F64(q)) if p.is_nan() && q.is_nan() => 0,
                (rfx_ir::Scalar::F32(p), rfx_ir::Scalar::F32(q)) => {
                    if p.is_nan() || q.is_nan() {
                        u64::MAX
                    } else {
                        ordered32(p).abs_diff(ordered32(q))
                    }
                }
                (rfx_ir::Scalar::F64(p), rfx_ir::Scalar::F64(q)) => {
                    if p.is_nan() || q.is_nan() {
                        u64::MAX
                    } else {
                        ordered64(p).abs_diff(ordered64(q))
                    }
                }
                (p, q) => u64::from(p != q) * u64::MAX,
            };
            worst = worst.max(d);
        }
    }
    worst
}

fn ordered32(x: f32) -> u64 {
    let bits = x.to_bits();
    u64::from(if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    })
}

fn ordered64(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 0x8000_0000_0000_0000
    }
}

/// For each rule: a kernel it should fire on (in f32 and f64 where the rule applies to both).
fn rule_cases() -> Vec<(&'static str, String)> {
    let unary = |dt: &str, body: &str| {
        format!(
            "kernel k {{\n %x = input x : {dt}[16]\n %y = input y : {dt}[16]\n {body}\n output o = %r\n}}"
        )
    };
    let mut cases = Vec::new();
    for dt in ["f32", "f64"] {
        let c = |v: &str| format!("%c = const {v} : {dt}[]");
        cases.push((
            "add-neg-zero",
            unary(dt, &format!("{}\n %r = add %x, %c : {dt}[16]", c("-0.0"))),
        ));
        cases.push((
            "add-neg-zero-l",
            unary(dt, &format!("{}\n %r = add %c, %x : {dt}[16]", c("-0.0"))),
        ));
        cases.push((
            "sub-zero",
            unary(dt, &format!("{}\n %r = sub %x, %c : {dt}[16]", c("0.0"))),
        ));
        cases.push((
            "mul-one",
            unary(dt, &format!("{}\n %r = mul %x, %c : {dt}[16]", c("1.0"))),
        ));
        cases.push((
            "mul-one-l",
            unary(dt, &format!("{}\n %r = mul %c, %x : {dt}[16]", c("1.0"))),
        ));
        cases.push((
            "div-one",
            unary(dt, &format!("{}\n %r = div %x, %c : {dt}[16]", c("1.0"))),
        ));
        cases.push((
            "mul-two",
            unary(dt, &format!("{}\n %r = mul %x, %c : {dt}[16]", c("2.0"))),
        ));
        cases.push((
            "mul-two-l",
            unary(dt, &format!("{}\n %r = mul %c, %x : {dt}[16]", c("2.0"))),
        ));
        cases.push((
            "div-pow2",
            unary(dt, &format!("{}\n %r = div %x, %c : {dt}[16]", c("-0.25"))),
        ));
        cases.push((
            "neg-neg",
            unary(dt, &format!("%n = neg %x : {dt}[16]\n %r = neg %n : {dt}[16]")),
        ));
        cases.push((
            "abs-neg",
            unary(dt, &format!("%n = neg %x : {dt}[16]\n %r = abs %n : {dt}[16]")),
        ));
        cases.push((
            "abs-abs",
            unary(dt, &format!("%n = abs %x : {dt}[16]\n %r = abs %n : {dt}[16]")),
        ));
        cases.push((
            "sub-neg",
            unary(
                dt,
                &format!("%n = neg %y : {dt}[16]\n %r = sub %x, %n : {dt}[16]"),
            ),
        ));
        cases.push((
            "add-neg",
            unary(
                dt,
                &format!("%n = neg %y : {dt}[16]\n %r = add %x, %n : {dt}[16]"),
            ),
        ));
        cases.push((
            "neg-mul-neg",
            unary(
                dt,
                &format!("%n = neg %x : {dt}[16]\n %m = neg %y : {dt}[16]\n %r = mul %n, %m : {dt}[16]"),
            ),
        ));
        cases.push(("min-self", unary(dt, &format!("%r = min %x, %x : {dt}[16]"))));
        cases.push(("max-self", unary(dt, &format!("%r = max %x, %x : {dt}[16]"))));
        cases.push((
            "select-true",
            unary(
                dt,
                &format!("%c = const true : bool[]\n %r = select %c, %x, %y : {dt}[16]"),
            ),
        ));
        cases.push((
            "select-false",
            unary(
                dt,
                &format!("%c = const false : bool[]\n %r = select %c, %x, %y : {dt}[16]"),
            ),
        ));
        cases.push((
            "select-same",
            unary(
                dt,
                &format!("%c = lt %x, %y : bool[16]\n %r = select %c, %x, %x : {dt}[16]"),
            ),
        ));
        cases.push((
            "pow-zero",
            unary(dt, &format!("{}\n %r = pow %x, %c : {dt}[16]", c("-0.0"))),
        ));
        cases.push((
            "pow-one",
            unary(dt, &format!("{}\n %r = pow %x, %c : {dt}[16]", c("1.0"))),
        ));
        cases.push((
            "pow-two",
            unary(dt, &format!("{}\n %r = pow %x, %c : {dt}[16]", c("2.0"))),
        ));
        cases.push((
            "pow-neg-one",
            unary(dt, &format!("{}\n %r = pow %x, %c : {dt}[16]", c("-1.0"))),
        ));
        cases.push((
            "pow-half",
            unary(dt, &format!("{}\n %r = pow %x, %c : {dt}[16]", c("0.5"))),
        ));
        cases.push((
            "add-zero",
            unary(dt, &format!("{}\n %r = add %x, %c : {dt}[16]", c("0.0"))),
        ));
        cases.push((
            "add-zero-l",
            unary(dt, &format!("{}\n %r = add %c, %x : {dt}[16]", c("0.0"))),
        ));
        cases.push((
            "mul-zero",
            unary(dt, &format!("{}\n %r = mul %x, %c : {dt}[16]", c("0.0"))),
        ));
        cases.push((
            "mul-zero-l",
            unary(dt, &format!("{}\n %r = mul %c, %x : {dt}[16]", c("0.0"))),
        ));
        cases.push(("sub-self", unary(dt, &format!("%r = sub %x, %x : {dt}[16]"))));
        cases.push(("div-self", unary(dt, &format!("%r = div %x, %x : {dt}[16]"))));
        cases.push((
            "exp-log",
            unary(dt, &format!("%l = log %x : {dt}[16]\n %r = exp %l : {dt}[16]")),
        ));
        cases.push((
            "log-exp",
            unary(dt, &format!("%l = exp %x : {dt}[16]\n %r = log %l : {dt}[16]")),
        ));
        cases.push((
            "div-const",
            unary(dt, &format!("{}\n %r = div %x, %c : {dt}[16]", c("3.0"))),
        ));
    }
    cases.push((
        "add-neg-zero",
        "kernel k {\n %x = input x : i32[16]\n %c = const 0 : i32[]\n %r = add %x, %c : i32[16]\n output o = %r\n}".into(),
    ));
    cases.push((
        "not-not",
        "kernel k {\n %x = input x : bool[16]\n %n = not %x : bool[16]\n %r = not %n : bool[16]\n output o = %r\n}".into(),
    ));
    cases
}

#[test]
fn every_rule_has_a_case_that_fires_and_agrees_with_the_interpreter() {
    let table = rule_table();
    let cases = rule_cases();
    for info in &table {
        assert!(
            cases.iter().any(|(n, _)| *n == info.name),
            "rule `{}` has no test case",
            info.name
        );
    }
    for (name, text) in cases {
        let info = table.iter().find(|i| i.name == name).unwrap();
        let (before, after, fired) = apply_rule(name, &text);
        assert!(fired > 0, "rule `{name}` did not fire on:\n{before}");
        assert!(
            after.op_count() <= before.op_count(),
            "`{name}` grew the kernel:\n{after}"
        );
        let values: Vec<f64> = match info.exactness {
            Exactness::FastMath => positive_values(),
            _ => SPECIALS.iter().copied().chain(finite_values()).collect(),
        };
        let inputs = input_array(&before, &values);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&before, &views, Mode::Native).unwrap();
        let got = run_hir(&after, &views, Mode::Native).unwrap();
        let ulps = max_ulps(&expected, &got);
        let bound = match info.exactness {
            Exactness::Exact => 0,
            // pow in glibc is within 1 ULP; x*x and recip are correctly rounded.
            Exactness::Refining => 1,
            // Fast-math rules are checked on finite inputs where they hold up to rounding of
            // the removed ops (exp/log round trips lose a few ULP).
            Exactness::FastMath => 1 << 12,
        };
        assert!(
            ulps <= bound,
            "rule `{name}` ({:?}) differs by {ulps} ULP:\n{before}\n{after}",
            info.exactness
        );
    }
}

#[test]
fn exact_rules_keep_nan_inf_and_signed_zero() {
    // The classic unsound rules must not exist in exact mode.
    for (name, text) in rule_cases() {
        let info = rule_table().into_iter().find(|i| i.name == name).unwrap();
        if info.exactness != Exactness::Exact {
            continue;
        }
        let (before, after, _) = apply_rule(name, &text);
        let inputs = input_array(&before, &SPECIALS);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&before, &views, Mode::Native).unwrap();
        let got = run_hir(&after, &views, Mode::Native).unwrap();
        for (e, g) in expected.iter().zip(&got) {
            for i in 0..e.data().len() {
                let (e, g) = (e.get(i).unwrap(), g.get(i).unwrap());
                let both_nan = e.to_f64().is_nan() && g.to_f64().is_nan();
                assert!(both_nan || e == g, "rule `{name}` changed {e} into {g}");
            }
        }
    }
}

#[test]
fn x_times_zero_is_not_folded_in_exact_mode() {
    let text = "kernel k {\n %x = input x : f32[4]\n %z = const 0.0 : f32[]\n %r = mul %x, %z : f32[4]\n output o = %r\n}";
    let kernel = hir::parse(text).unwrap();
    let (optimised, report) = crate::simplify(&kernel, &OptConfig::default()).unwrap();
    assert!(
        optimised
            .nodes()
            .iter()
            .any(|n| n.op == rfx_ir::hir::Op::Binary(rfx_ir::BinaryOp::Mul))
    );
    assert!(!report.rules_fired.contains_key("mul-zero"));
    let (fast, report) = crate::simplify(&kernel, &OptConfig::fast_math()).unwrap();
    assert_eq!(fast.op_count(), 1, "fast-math folds x*0 to a constant:\n{fast}");
    assert_eq!(report.rules_fired.get("mul-zero"), Some(&1));
}
