//! The rewrite rules, in one named table, one rule per line.
//!
//! Every rule is tagged with its [`Exactness`]. [`Exactness::Exact`] rules give the same bits as
//! the original expression for every IEEE input (NaN stays NaN, ±Inf and −0 are kept), so they are
//! always on. [`Exactness::Refining`] rules replace an op that is not correctly rounded by one that
//! is (e.g. `pow(x, 2) → x*x`): the result may differ from the original by the original op's error
//! bound, never by more. [`Exactness::FastMath`] rules are only valid without NaN/Inf/−0 or with
//! reassociation, and run only when the user asks for fast-math. No rule's right-hand side costs
//! more than its left-hand side, and there is no blanket commutativity or associativity: the
//! commuted forms a rule needs are separate lines.
//!
//! Multiply-add contraction (`a * b + c` → one fused multiply-add) is not a rule here: whether
//! a fused op is fast is the target's business (a CPU without FMA would pay a libm call), so the
//! table keeps `add(mul(a, b), c)` shapes intact and the backends contract them when
//! `CompileOptions::fast_math` is set: the CPU backend emits Cranelift `fma` where the CPU has
//! FMA, CUDA compiles with `--use_fast_math` (which implies `--fmad=true`). In exact mode no
//! backend contracts, so exact kernels keep the interpreter's bits.

use egg::{Applier, ConditionalApplier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var};
use rfx_ir::{BinaryOp, DType, Scalar, UnaryOp, semantics};

use crate::lang::{Head, Node, OrdScalar, RfxAnalysis, RfxGraph};

/// How far a rule may change results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Exactness {
    /// Bit-identical for every input (NaN payloads aside).
    Exact,
    /// Replaces a not-correctly-rounded op by a correctly rounded equivalent; differs from the
    /// original by at most the original op's documented error.
    Refining,
    /// Valid only for finite, non-NaN inputs or up to reassociation; off unless fast-math is on.
    FastMath,
}

/// One named rule: what it does and how exact it is.
#[derive(Clone, Copy, Debug)]
pub struct RuleInfo {
    /// The rule's name, as it appears in reports.
    pub name: &'static str,
    /// Its exactness class.
    pub exactness: Exactness,
    /// What it rewrites, for documentation (`lhs → rhs [if condition]`).
    pub summary: &'static str,
}

type Rule = Rewrite<Node, RfxAnalysis>;

use std::sync::OnceLock;

/// Makes the rewrite for a rule, given its name.
type MakeRule = fn(&'static str) -> Rule;

/// A constant predicate (`is_one`, `is_zero`, ...).
type ConstPred = fn(Scalar) -> bool;

/// The rule table. Conditions: `c` names a splat constant operand; "same type" means the
/// replacement has exactly the matched value's dtype and shape (no rule may change a shape by
/// dropping a broadcast).
#[rustfmt::skip]
const RULES: &[(RuleInfo, MakeRule)] = &[
    (info("add-neg-zero", Exactness::Exact, "x + (-0) → x, (-0) + x → x; i32: x + 0 → x [same type]"), |n| identity(n, "(add ?x ?c)", is_add_identity)),
    (info("add-neg-zero-l", Exactness::Exact, "(-0) + x → x [same type]"), |n| identity(n, "(add ?c ?x)", is_add_identity)),
    (info("sub-zero", Exactness::Exact, "x - (+0) → x [same type]"), |n| identity(n, "(sub ?x ?c)", is_sub_identity)),
    (info("mul-one", Exactness::Exact, "x * 1 → x [same type]"), |n| identity(n, "(mul ?x ?c)", is_one)),
    (info("mul-one-l", Exactness::Exact, "1 * x → x [same type]"), |n| identity(n, "(mul ?c ?x)", is_one)),
    (info("div-one", Exactness::Exact, "x / 1 → x [same type]"), |n| identity(n, "(div ?x ?c)", is_one)),
    (info("mul-two", Exactness::Exact, "x * 2 → x + x [same type]"), |n| when_const(n, "(mul ?x ?c)", "(add ?x ?x)", is_two)),
    (info("mul-two-l", Exactness::Exact, "2 * x → x + x [same type]"), |n| when_const(n, "(mul ?c ?x)", "(add ?x ?x)", is_two)),
    (info("div-pow2", Exactness::Exact, "x / c → x * (1/c) when c = ±2^k and 1/c is a normal float"), |n| div_to_mul(n, false)),
    (info("neg-neg", Exactness::Exact, "-(-x) → x"), |n| plain(n, "(neg (neg ?x))", "?x")),
    (info("not-not", Exactness::Exact, "not(not x) → x"), |n| plain(n, "(not (not ?x))", "?x")),
    (info("abs-neg", Exactness::Exact, "|-x| → |x|"), |n| plain(n, "(abs (neg ?x))", "(abs ?x)")),
    (info("abs-abs", Exactness::Exact, "||x|| → |x|"), |n| plain(n, "(abs (abs ?x))", "(abs ?x)")),
    (info("sub-neg", Exactness::Exact, "x - (-y) → x + y"), |n| plain(n, "(sub ?x (neg ?y))", "(add ?x ?y)")),
    (info("add-neg", Exactness::Exact, "x + (-y) → x - y"), |n| plain(n, "(add ?x (neg ?y))", "(sub ?x ?y)")),
    (info("neg-mul-neg", Exactness::Exact, "(-x) * (-y) → x * y"), |n| plain(n, "(mul (neg ?x) (neg ?y))", "(mul ?x ?y)")),
    (info("min-self", Exactness::Exact, "min(x, x) → x"), |n| plain(n, "(min ?x ?x)", "?x")),
    (info("max-self", Exactness::Exact, "max(x, x) → x"), |n| plain(n, "(max ?x ?x)", "?x")),
    (info("select-true", Exactness::Exact, "select(true, a, b) → a [same type]"), |n| identity_var(n, "(select ?c ?x ?y)", "?x", is_true)),
    (info("select-false", Exactness::Exact, "select(false, a, b) → b [same type]"), |n| identity_var(n, "(select ?c ?x ?y)", "?y", is_false)),
    (info("select-same", Exactness::Exact, "select(c, x, x) → x [same type]"), |n| same_type_rule(n, "(select ?c ?x ?x)", "?x")),
    (info("pow-zero", Exactness::Exact, "pow(x, 0) → 1 (C99: even for NaN)"), |n| const_result(n, "(pow ?x ?c)", is_zero, 1.0)),
    (info("pow-one", Exactness::Refining, "pow(x, 1) → x [same type]"), |n| identity(n, "(pow ?x ?c)", is_one)),
    (info("pow-two", Exactness::Refining, "pow(x, 2) → x * x [same type]"), |n| when_const(n, "(pow ?x ?c)", "(mul ?x ?x)", is_two)),
    (info("pow-neg-one", Exactness::Refining, "pow(x, -1) → recip(x) [same type]"), |n| when_const(n, "(pow ?x ?c)", "(recip ?x)", is_neg_one)),
    (info("pow-half", Exactness::FastMath, "pow(x, 0.5) → sqrt(x) (differs at -0 and -Inf)"), |n| when_const(n, "(pow ?x ?c)", "(sqrt ?x)", is_half)),
    (info("add-zero", Exactness::FastMath, "x + 0 → x (wrong for x = -0)"), |n| identity(n, "(add ?x ?c)", is_zero)),
    (info("add-zero-l", Exactness::FastMath, "0 + x → x (wrong for x = -0)"), |n| identity(n, "(add ?c ?x)", is_zero)),
    (info("mul-zero", Exactness::FastMath, "x * 0 → 0 (wrong for NaN, ±Inf, and the sign of zero)"), |n| const_result(n, "(mul ?x ?c)", is_zero, 0.0)),
    (info("mul-zero-l", Exactness::FastMath, "0 * x → 0 (wrong for NaN, ±Inf, and the sign of zero)"), |n| const_result(n, "(mul ?c ?x)", is_zero, 0.0)),
    (info("sub-self", Exactness::FastMath, "x - x → 0 (wrong for NaN and ±Inf)"), |n| self_const(n, "(sub ?x ?x)", 0.0)),
    (info("div-self", Exactness::FastMath, "x / x → 1 (wrong for 0, NaN and ±Inf)"), |n| self_const(n, "(div ?x ?x)", 1.0)),
    (info("exp-log", Exactness::FastMath, "exp(log x) → x (wrong for x < 0)"), |n| plain(n, "(exp (log ?x))", "?x")),
    (info("log-exp", Exactness::FastMath, "log(exp x) → x (wrong where exp overflows)"), |n| plain(n, "(log (exp ?x))", "?x")),
    (info("div-const", Exactness::FastMath, "x / c → x * (1/c) for any constant c"), |n| div_to_mul(n, true)),
];

const fn info(name: &'static str, exactness: Exactness, summary: &'static str) -> RuleInfo {
    RuleInfo {
        name,
        exactness,
        summary,
    }
}

/// Every rule, with its exactness class and summary, in table order.
pub fn rule_table() -> Vec<RuleInfo> {
    RULES.iter().map(|(info, _)| *info).collect()
}

/// The rules enabled at the given level: exact always, refining when `refining`, fast-math when
/// `fast_math`. Built once per level and process: parsing and compiling the patterns costs
/// more than saturating a small kernel.
pub(crate) fn rules(refining: bool, fast_math: bool) -> &'static [Rule] {
    static LEVELS: [OnceLock<Vec<Rule>>; 4] = [const { OnceLock::new() }; 4];
    LEVELS[usize::from(refining) * 2 + usize::from(fast_math)]
        .get_or_init(|| build_rules(refining, fast_math))
}

fn build_rules(refining: bool, fast_math: bool) -> Vec<Rule> {
    RULES
        .iter()
        .filter(|(info, _)| match info.exactness {
            Exactness::Exact => true,
            Exactness::Refining => refining,
            Exactness::FastMath => fast_math,
        })
        .map(|(info, make)| make(info.name))
        .collect()
}

/// The rules with these names (for testing one rule alone).
#[cfg(test)]
pub(crate) fn rules_named(names: &[&str]) -> Vec<Rule> {
    RULES
        .iter()
        .filter(|(info, _)| names.contains(&info.name))
        .map(|(info, make)| make(info.name))
        .collect()
}

fn pattern(text: &str) -> Pattern<Node> {
    // The table is static and tested (`every_rule_builds`); a typo is a programming error.
    text.parse()
        .unwrap_or_else(|e| panic!("invariant: rule pattern `{text}` parses: {e}"))
}

fn var(name: &str) -> Var {
    name.parse()
        .unwrap_or_else(|e| panic!("invariant: `{name}` is a pattern variable: {e:?}"))
}

fn rewrite(
    name: &'static str,
    lhs: &str,
    applier: impl Applier<Node, RfxAnalysis> + Send + Sync + 'static,
) -> Rule {
    Rewrite::new(name, pattern(lhs), applier)
        .unwrap_or_else(|e| panic!("invariant: rule `{name}` is well formed: {e}"))
}

fn plain(name: &'static str, lhs: &str, rhs: &str) -> Rule {
    rewrite(name, lhs, pattern(rhs))
}

fn constant(graph: &RfxGraph, id: Id) -> Option<Scalar> {
    graph[id].data.constant
}

fn same_type(graph: &RfxGraph, a: Id, b: Id) -> bool {
    let (ta, tb) = (&graph[a].data.ty, &graph[b].data.ty);
    ta.is_some() && ta == tb
}

/// `lhs → ?x` when `?c` satisfies `pred` and `?x` has the matched value's type.
fn identity(name: &'static str, lhs: &str, pred: fn(Scalar) -> bool) -> Rule {
    identity_var(name, lhs, "?x", pred)
}

fn identity_var(name: &'static str, lhs: &str, result: &str, pred: fn(Scalar) -> bool) -> Rule {
    const_typed(name, lhs, result, result, pred)
}

fn same_type_rule(name: &'static str, lhs: &str, result: &str) -> Rule {
    let x = var(result);
    rewrite_if(name, lhs, result, move |g: &mut RfxGraph, id: Id, s: &Subst| {
        same_type(g, s[x], id)
    })
}

/// `lhs → rhs` when `?c` satisfies `pred` and `?x` has the matched value's type (the rhs is an
/// elementwise op of `?x` alone, so it then has that type too).
fn when_const(name: &'static str, lhs: &str, rhs: &str, pred: fn(Scalar) -> bool) -> Rule {
    const_typed(name, lhs, "?x", rhs, pred)
}

/// `lhs → rhs` when `?c` satisfies `pred` and `typed` has the matched value's type.
fn const_typed(name: &'static str, lhs: &str, typed: &str, rhs: &str, pred: fn(Scalar) -> bool) -> Rule {
    let (c, x) = (var("?c"), var(typed));
    rewrite_if(name, lhs, rhs, move |g: &mut RfxGraph, id: Id, s: &Subst| {
        constant(g, s[c]).is_some_and(pred) && same_type(g, s[x], id)
    })
}

/// `lhs → rhs` where `condition` holds for the match.
fn rewrite_if(
    name: &'static str,
    lhs: &str,
    rhs: &str,
    condition: impl Fn(&mut RfxGraph, Id, &Subst) -> bool + Send + Sync + 'static,
) -> Rule {
    rewrite(
        name,
        lhs,
        ConditionalApplier {
            condition,
            applier: pattern(rhs),
        },
    )
}

/// Replaces the matched value by a splat constant `value` of its own type, when `?c` satisfies
/// `pred`.
fn const_result(name: &'static str, lhs: &str, pred: fn(Scalar) -> bool, value: f64) -> Rule {
    let c = var("?c");
    let applier = ConstApplier {
        value,
        guard: Some((c, pred)),
    };
    rewrite(name, lhs, applier)
}

fn self_const(name: &'static str, lhs: &str, value: f64) -> Rule {
    rewrite(name, lhs, ConstApplier { value, guard: None })
}

struct ConstApplier {
    value: f64,
    guard: Option<(Var, ConstPred)>,
}

impl Applier<Node, RfxAnalysis> for ConstApplier {
    fn apply_one(
        &self,
        graph: &mut RfxGraph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<Node>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        if let Some((c, pred)) = self.guard
            && !constant(graph, subst[c]).is_some_and(pred)
        {
            return Vec::new();
        }
        let Some(ty) = graph[eclass].data.ty.clone() else {
            return Vec::new();
        };
        if !ty.dtype.is_numeric() {
            return Vec::new();
        }
        let value = Scalar::from_f64(ty.dtype, self.value);
        let new = graph.add(Node::new(Head::Const(OrdScalar(value), ty.shape), Vec::new()));
        if graph.union(eclass, new) {
            vec![eclass]
        } else {
            Vec::new()
        }
    }
}

fn div_to_mul(name: &'static str, any_constant: bool) -> Rule {
    rewrite(name, "(div ?x ?c)", DivToMul { any_constant })
}

/// `x / c → x * r` with `r = 1/c` computed in `c`'s dtype. Exact when `c` is a power of two whose
/// reciprocal is a normal float: then `x / c` and `x * r` are the correctly rounded values of the
/// same real number.
struct DivToMul {
    any_constant: bool,
}

impl Applier<Node, RfxAnalysis> for DivToMul {
    fn apply_one(
        &self,
        graph: &mut RfxGraph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<Node>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let (x, c) = (subst[var("?x")], subst[var("?c")]);
        let (Some(value), Some(c_ty)) = (constant(graph, c), graph[c].data.ty.clone()) else {
            return Vec::new();
        };
        if !value.dtype().is_float() || !(self.any_constant || is_exact_reciprocal(value)) {
            return Vec::new();
        }
        let Some(recip) = semantics::unary(UnaryOp::Recip, value) else {
            return Vec::new();
        };
        if !self.any_constant && !is_exact_reciprocal(recip) {
            return Vec::new();
        }
        let r = graph.add(Node::new(Head::Const(OrdScalar(recip), c_ty.shape), Vec::new()));
        let product = graph.add(Node::new(Head::Binary(BinaryOp::Mul), vec![x, r]));
        if graph.union(eclass, product) {
            vec![eclass]
        } else {
            Vec::new()
        }
    }
}

/// `true` for ±2^k that is a normal float (its reciprocal is then exact unless it over- or
/// underflows, which the caller checks by testing the reciprocal too).
fn is_exact_reciprocal(value: Scalar) -> bool {
    match value {
        Scalar::F32(v) => v.is_normal() && v.to_bits() & 0x007f_ffff == 0,
        Scalar::F64(v) => v.is_normal() && v.to_bits() & 0x000f_ffff_ffff_ffff == 0,
        _ => false,
    }
}

fn is_value(value: Scalar, target: f64) -> bool {
    match value {
        Scalar::F32(v) => v.to_bits() == (target as f32).to_bits(),
        Scalar::F64(v) => v.to_bits() == target.to_bits(),
        Scalar::I32(v) => f64::from(v).to_bits() == target.to_bits(),
        Scalar::Bool(_) => false,
    }
}

fn is_add_identity(value: Scalar) -> bool {
    match value.dtype() {
        DType::I32 => is_value(value, 0.0),
        _ => is_value(value, -0.0),
    }
}

fn is_sub_identity(value: Scalar) -> bool {
    is_value(value, 0.0)
}

fn is_zero(value: Scalar) -> bool {
    is_value(value, 0.0) || (value.dtype().is_float() && is_value(value, -0.0))
}

fn is_one(value: Scalar) -> bool {
    is_value(value, 1.0)
}

fn is_two(value: Scalar) -> bool {
    is_value(value, 2.0)
}

fn is_neg_one(value: Scalar) -> bool {
    is_value(value, -1.0)
}

fn is_half(value: Scalar) -> bool {
    is_value(value, 0.5)
}

fn is_true(value: Scalar) -> bool {
    value == Scalar::Bool(true)
}

fn is_false(value: Scalar) -> bool {
    value == Scalar::Bool(false)
}
