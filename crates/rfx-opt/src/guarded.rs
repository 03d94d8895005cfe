//! Transcendentals of guarded arguments computed once.
//!
//! A formula with a series branch near a singularity guards the argument of its closed form:
//! `sin(sqrt(select(small, 1, θ²)) * 0.5)`, so that the closed form is never evaluated where
//! it would divide by zero. Two such formulas (the `sin` and the `cos` of a half angle, each
//! with its own threshold) guard one argument with different conditions, so their
//! transcendentals are not common subexpressions: the kernel computes `sin` twice, or a `sin`
//! and a `cos` of values that cannot share one `sincos`.
//!
//! [`share_guarded_transcendentals`] moves the guard past the transcendental where that makes
//! it shared: `f(g(select(c, k, x)))` (with `g` a chain of float elementwise ops on one
//! non-constant operand) is `select(c, f(g(k)), f(g(x)))`, bit for bit, since a select gives the
//! bits of one operand and every op is a function of its operands' bits; `f(g(k))` folds to a
//! constant. It is done only where another transcendental (the same op, or `sin` against `cos`)
//! reads the same unguarded argument, so that the rewritten `f(g(x))` is computed once (the
//! e-graph's hash-consing merges the copies) or with its partner in one `sincos` call.

use std::collections::HashMap;

use rfx_ir::hir::{Builder, Kernel, Node, Op, ValueId, verify};
use rfx_ir::{Scalar, UnaryOp, semantics};

use crate::error::OptError;
use crate::passes::{live_values, mapped_operands, rebuild};

/// A value's structure up to the guards of its chain: the interned key of the expression with
/// every guard `select(c, k, x)` replaced by `x`.
type Key = usize;

/// A value `g(select(c, k, x))`: `g` a chain of float elementwise ops, each with one
/// non-constant operand.
#[derive(Clone, Copy)]
struct Guard {
    /// The guard's condition.
    cond: ValueId,
    /// `g(k)`, the value where the condition holds (or where it does not, with `k_first` false).
    k: Scalar,
    /// Whether `k` is the select's first operand (taken where `cond` holds).
    k_first: bool,
    /// The key of `g(x)`.
    unguarded: Key,
    /// The ops in `g`: a chain is followed up to [`MAX_CHAIN`] ops.
    depth: usize,
}

/// The longest chain `g` followed from a guard (the rebuilding of `g(x)` recurses along it).
const MAX_CHAIN: usize = 64;

/// Interns expression keys: equal structure, equal key.
#[derive(Default)]
struct Keys {
    ids: HashMap<(String, Vec<Key>), Key>,
}

impl Keys {
    fn key(&mut self, head: String, args: Vec<Key>) -> Key {
        let next = self.ids.len();
        *self.ids.entry((head, args)).or_insert(next)
    }
}

/// The head of `node` for [`Keys`]: its op and type.
fn head(node: &Node) -> String {
    format!("{:?}:{:?}", node.op, node.ty)
}

/// The splat constant `node` holds, if it is one.
fn constant(node: &Node) -> Option<Scalar> {
    match node.op {
        Op::Const(value) => Some(value),
        _ => None,
    }
}

/// Each value's key and, for a guarded value, its [`Guard`].
fn analyse(kernel: &Kernel) -> (Vec<Key>, Vec<Option<Guard>>) {
    let nodes = kernel.nodes();
    let mut keys = Keys::default();
    let mut plain: Vec<Key> = Vec::with_capacity(nodes.len());
    let mut guards: Vec<Option<Guard>> = Vec::with_capacity(nodes.len());
    for (index, node) in nodes.iter().enumerate() {
        let args: Vec<Key> = node
            .args
            .iter()
            .filter_map(|a| plain.get(a.index()).copied())
            .collect();
        let own = match node.op {
            // Inputs are told apart by position.
            Op::Input { .. } => keys.key(format!("input {index}"), Vec::new()),
            _ => keys.key(head(node), args),
        };
        plain.push(own);
        guards.push(guard_of(kernel, node, &plain, &guards, &mut keys));
    }
    (plain, guards)
}

/// The guard of `node`, from its operands' (`plain` and `guards` hold every earlier value's).
fn guard_of(
    kernel: &Kernel,
    node: &Node,
    plain: &[Key],
    guards: &[Option<Guard>],
    keys: &mut Keys,
) -> Option<Guard> {
    if !node.ty.dtype.is_float() {
        return None;
    }
    let operand = |a: &ValueId| kernel.node(*a);
    let same_type = |a: &ValueId| operand(a).is_some_and(|n| n.ty == node.ty);
    match (&node.op, node.args.as_slice()) {
        (Op::Select, [cond, a, b]) => {
            let (k, x, k_first) = match (operand(a).and_then(constant), operand(b).and_then(constant)) {
                (Some(k), None) => (k, b, true),
                (None, Some(k)) => (k, a, false),
                _ => return None,
            };
            same_type(x).then(|| Guard {
                cond: *cond,
                k,
                k_first,
                unguarded: plain.get(x.index()).copied().unwrap_or(usize::MAX),
                depth: 0,
            })
        }
        (Op::Unary(op), [x]) if same_type(x) => {
            let inner = guards
                .get(x.index())
                .copied()
                .flatten()
                .filter(|g| g.depth < MAX_CHAIN)?;
            Some(Guard {
                k: semantics::unary(*op, inner.k)?,
                unguarded: keys.key(head(node), vec![inner.unguarded]),
                depth: inner.depth + 1,
                ..inner
            })
        }
        (Op::Binary(op), [a, b]) => {
            let guarded = |v: &ValueId| {
                (guards.get(v.index()).copied().flatten()).filter(|g| g.depth < MAX_CHAIN && same_type(v))
            };
            let (inner, k, args) = match (
                guarded(a),
                operand(b).and_then(constant),
                operand(a).and_then(constant),
                guarded(b),
            ) {
                (Some(g), Some(c), _, _) => (
                    g,
                    semantics::binary(*op, g.k, c)?,
                    vec![g.unguarded, *plain.get(b.index())?],
                ),
                (_, _, Some(c), Some(g)) => (
                    g,
                    semantics::binary(*op, c, g.k)?,
                    vec![*plain.get(a.index())?, g.unguarded],
                ),
                _ => return None,
            };
            Some(Guard {
                k,
                unguarded: keys.key(head(node), args),
                depth: inner.depth + 1,
                ..inner
            })
        }
        _ => None,
    }
}

/// The partner whose value one `sincos` gives with `op`'s (`sin` and `cos`), or `op` itself.
fn partner(op: UnaryOp) -> UnaryOp {
    match op {
        UnaryOp::Sin => UnaryOp::Cos,
        UnaryOp::Cos => UnaryOp::Sin,
        other => other,
    }
}

/// The transcendentals of guarded arguments to rewrite: those whose unguarded argument another
/// transcendental of the same op or its partner also reads (guarded or not) through a different
/// value (one that reads the same value already shares it).
fn shared(kernel: &Kernel, plain: &[Key], guards: &[Option<Guard>], live: &[bool]) -> Vec<bool> {
    let nodes = kernel.nodes();
    // Every live transcendental's op, argument key unguarded (where guarded), argument key
    // and whether it is guarded, by position.
    let reads: Vec<Option<(UnaryOp, Key, Key, bool)>> = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| match (&node.op, node.args.as_slice()) {
            (Op::Unary(op), [x]) if op.is_transcendental() && live.get(index).copied().unwrap_or(false) => {
                let own = *plain.get(x.index())?;
                match guards.get(x.index()).copied().flatten() {
                    Some(g) => Some((*op, g.unguarded, own, true)),
                    None => Some((*op, own, own, false)),
                }
            }
            _ => None,
        })
        .collect();
    // The argument keys read by each op and unguarded argument.
    let mut by_read: HashMap<(UnaryOp, Key), Vec<Key>> = HashMap::new();
    for &(op, unguarded, own, _) in reads.iter().flatten() {
        by_read.entry((op, unguarded)).or_default().push(own);
    }
    let other_reader = |op: UnaryOp, unguarded: Key, own: Key| {
        by_read
            .get(&(op, unguarded))
            .is_some_and(|owns| owns.iter().any(|&o| o != own))
    };
    reads
        .iter()
        .map(|read| match *read {
            Some((op, unguarded, own, true)) => {
                other_reader(op, unguarded, own) || other_reader(partner(op), unguarded, own)
            }
            _ => false,
        })
        .collect()
}

/// Rewrites each transcendental of a guarded argument that another transcendental shares (see
/// the module documentation) as the select of its folded constant and its unguarded value, or
/// `None` where there is none. The result is to be hash-consed (the unguarded chains repeat).
pub(crate) fn share_guarded_transcendentals(kernel: &Kernel) -> Result<Option<Kernel>, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    let live = live_values(kernel);
    let (plain, guards) = analyse(kernel);
    let rewrite = shared(kernel, &plain, &guards, &live);
    if !rewrite.iter().any(|&r| r) {
        return Ok(None);
    }
    // The rebuilt unguarded value `g(x)` of each guarded value, made on demand.
    let mut unguarded: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    rebuild(kernel, |b, map, value, node, args| {
        let index = value.index();
        match (
            &node.op,
            node.args.as_slice(),
            rewrite.get(index).copied().unwrap_or(false),
        ) {
            (Op::Unary(op), [x], true) => {
                let guard = guards
                    .get(x.index())
                    .copied()
                    .flatten()
                    .ok_or(OptError::InvalidValue(*x))?;
                match semantics::unary(*op, guard.k) {
                    Some(k) => {
                        let inner = unguarded_value(kernel, *x, map, &mut unguarded, b)?;
                        let f = b.unary(*op, inner).map_err(OptError::Rebuild)?;
                        let k = b.constant(k, node.ty.shape.clone());
                        let cond = mapped_operands(map, &[guard.cond])?[0];
                        let (a, c) = if guard.k_first { (k, f) } else { (f, k) };
                        b.select(cond, a, c).map_err(OptError::Rebuild)
                    }
                    None => b.copy(&node.op, args, &node.ty).map_err(OptError::Rebuild),
                }
            }
            _ => b.copy(&node.op, args, &node.ty).map_err(OptError::Rebuild),
        }
    })
    .map(Some)
}

/// The rebuilt `g(x)` of guarded value `v` (`g(select(c, k, x))`), built once.
fn unguarded_value(
    kernel: &Kernel,
    v: ValueId,
    map: &[Option<ValueId>],
    memo: &mut [Option<ValueId>],
    b: &mut Builder,
) -> Result<ValueId, OptError> {
    if let Some(done) = memo.get(v.index()).copied().flatten() {
        return Ok(done);
    }
    let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
    let is_const = |a: &ValueId| kernel.node(*a).and_then(constant).is_some();
    let value = match (&node.op, node.args.as_slice()) {
        (Op::Select, [_, a, x]) if is_const(a) => mapped_operands(map, &[*x])?[0],
        (Op::Select, [_, x, _]) => mapped_operands(map, &[*x])?[0],
        (Op::Unary(op), [x]) => {
            let inner = unguarded_value(kernel, *x, map, memo, b)?;
            b.unary(*op, inner).map_err(OptError::Rebuild)?
        }
        (Op::Binary(op), [l, r]) => {
            let (l, r) = if is_const(r) {
                (
                    unguarded_value(kernel, *l, map, memo, b)?,
                    mapped_operands(map, &[*r])?[0],
                )
            } else {
                (
                    mapped_operands(map, &[*l])?[0],
                    unguarded_value(kernel, *r, map, memo, b)?,
                )
            };
            b.binary(*op, l, r).map_err(OptError::Rebuild)?
        }
        _ => return Err(OptError::InvalidValue(v)),
    };
    if let Some(slot) = memo.get_mut(v.index()) {
        *slot = Some(value);
    }
    Ok(value)
}
