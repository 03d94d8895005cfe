//! Expressions: numexpr-like strings compiled to HIR kernels.
//!
//! ```
//! use rfx::expr::{Signature, compile};
//!
//! let sig: Signature = "x: f32[3], y: f32[3]".parse()?;
//! let kernel = compile("sin(x*2.0) + y", &sig)?;
//! let f = rfx::jit_kernel(kernel);
//! let out = f.call((&[0.0f32, 1.0, 2.0], &[1.0f32, 2.0, 3.0]))?;
//! assert_eq!(out[0].as_slice::<f32>(), Some(&[1.0f32, 2.9092975, 2.2431974][..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Grammar
//!
//! A program is one or more statements separated by newlines or `;`: `name = expr` assigns,
//! a bare expression is a value. The last statement is the output (named by its assignment,
//! else `out`), unless [`compile_with_outputs`] names the outputs. `#` starts a comment.
//!
//! | precedence (loosest first) | operators |
//! |---|---|
//! | or | `a \| b` (bool) |
//! | and | `a & b` (bool) |
//! | comparison | `< <= > >= == !=` (not chained) |
//! | additive | `+ -` |
//! | multiplicative | `* / % @` (`%` is `fmod`, `@` NumPy's `matmul`) |
//! | unary | `-x`, `+x`, `~x` (logical not) |
//! | power | `x ** y` (right-associative; `-x**2 = -(x**2)`) |
//!
//! Unlike Python, `&` and `|` bind looser than comparisons, so `x > 0 & y < 1` means what it
//! says. Operands: numbers (`2`, `2.5`, `1e-3`; *weak*: they take the other operand's dtype),
//! `true`, `false`, `pi`, input and assigned names, lists of integers (`[0, 1]`, for axes and
//! shapes), dtype names (`f32`, `f64`, `i32`, `bool`, for `cast`) and function calls.
//!
//! Functions: every unary HIR op by name (`sin cos tan exp exp2 log log2 sqrt rsqrt recip abs
//! sign floor ceil round tanh atan asin acos sigmoid erf neg not`, with NumPy aliases `arctan
//! arcsin arccos ln`); `minimum`, `maximum`, `atan2`/`arctan2`, `pow`/`power`, `fmod`, `add`,
//! `sub`/`subtract`, `mul`/`multiply`, `div`/`divide`, `logical_and`, `logical_or`,
//! `logical_not`, `lt le gt ge eq ne`; `isnan isinf isfinite`; `where(c, a, b)`/`select`; `clip(x, lo, hi)`/`clamp`;
//! `cast(x, f64)`/`astype`; `reshape(x, [2, 3])`; `broadcast_to(x, [4, 3])`; reductions
//! `sum prod min max mean (x[, axis][, keepdims=true])` over every axis unless `axis` (an
//! integer or a list) is given. As in numexpr, `min` and `max` are reductions; the elementwise
//! forms are `minimum` and `maximum`. Indices and lookups: `argmin argmax (x[, axis])` (an
//! `i32` index, the first of equal extrema or the first NaN; into the flattened `x` without an
//! axis), `take(table, index[, axis])` (the flattened table without an axis) and
//! `take_along_axis(table, index, axis)`, NumPy's functions with `mode="clip"`: an index is
//! truncated and clamped into the axis, so `take(gains, i)` never reads outside `gains`.
//! Linear algebra and running sums, NumPy's functions: `matmul(a, b)` (also `a @ b`),
//! `dot(a, b)`, `cross(a, b[, axis])` (three components along the last axis unless `axis`),
//! `norm(x[, axis])` (`linalg.norm`: the Euclidean norm, of every element without an axis),
//! `diff(x[, axis])` (along the last axis unless `axis`), and `linalg`'s `inv(a)`, `det(a)` and
//! `solve(a, b)`. Running folds: `cumsum cumprod cummax cummin (x[, axis][, reverse=true])`
//! (NumPy's `cumsum`, `cumprod`, `maximum.accumulate` and `minimum.accumulate`, of the
//! flattened `x` without an axis; `reverse=true` folds from the axis's end, as JAX's), and
//! the linear recurrence `linrec(x, a[, axis][, reverse=true])` (`y[i] = a[i] y[i-1] + x[i]`
//! from `y[-1] = 0`, along the last axis unless `axis`: a low-pass filter over a signal).
//!
//! Every function, with its arguments and aliases, is in one table, [`functions()`], through
//! which the evaluator resolves each call (`rfx eval --list-functions` prints it).
//!
//! Errors ([`ExprError`]) carry the line and column, and print the line with a caret under the
//! offending token.

mod functions;
mod parse;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use rfx_ir::hir::Kernel;
use rfx_ir::{DType, ReduceOp, Scalar, ScanOp, Shape, TensorType, UnaryOp};

use crate::trace::{All, Operand, Tensor, TraceGuard};
pub use functions::{Function, functions};
pub use parse::MAX_NESTING;
use parse::{Expr, NodeId, Pos, Program, Stmt};

/// A parse, name or type error in an expression, at a line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}\n{source_line}\n{caret}", caret = caret_line(*.col))]
pub struct ExprError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// What is wrong.
    pub message: String,
    /// The offending source line.
    pub source_line: String,
}

fn caret_line(col: usize) -> String {
    format!("{}^", " ".repeat(col.saturating_sub(1)))
}

impl ExprError {
    pub(crate) fn at(src: &str, pos: Pos, message: String) -> ExprError {
        ExprError {
            line: pos.line,
            col: pos.col,
            message,
            source_line: src
                .split('\n')
                .nth(pos.line.saturating_sub(1))
                .unwrap_or("")
                .to_string(),
        }
    }

    /// The error on one line: `line:col: message`.
    pub fn one_line(&self) -> String {
        format!("{}:{}: {}", self.line, self.col, self.message)
    }
}

/// The inputs of an expression: names with dtypes and shapes, in order.
///
/// Parses from `"x: f32[3], y: f32[2,3]"` (or `x=f32[3]`, the CLI's form).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signature {
    inputs: Vec<(String, TensorType)>,
}

/// A malformed signature string.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid signature entry `{entry}`: expected `name: dtype[dims]`, e.g. `x: f32[3]`")]
pub struct SignatureError {
    /// The entry that did not parse.
    pub entry: String,
}

impl Signature {
    /// An empty signature.
    pub fn new() -> Signature {
        Signature::default()
    }

    /// Adds an input.
    pub fn input(mut self, name: impl Into<String>, ty: TensorType) -> Signature {
        self.inputs.push((name.into(), ty));
        self
    }

    /// The inputs, in order.
    pub fn inputs(&self) -> &[(String, TensorType)] {
        &self.inputs
    }
}

/// Parses a tensor type written `f32[3]`, `f64[2,3]` or `i32[]`.
pub fn parse_tensor_type(text: &str) -> Option<TensorType> {
    let text = text.trim();
    let (dtype, rest) = text.split_once('[')?;
    let dtype = DType::from_name(dtype.trim())?;
    let dims = rest.trim().strip_suffix(']')?;
    let dims = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| d.trim().parse::<usize>().ok())
            .collect::<Option<Vec<_>>>()?
    };
    Some(TensorType::new(dtype, dims))
}

impl FromStr for Signature {
    type Err = SignatureError;

    fn from_str(text: &str) -> Result<Signature, SignatureError> {
        let mut signature = Signature::new();
        // Split on commas outside brackets.
        let mut depth = 0usize;
        let mut start = 0;
        let mut entries = Vec::new();
        for (i, c) in text.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    entries.push(&text[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        entries.push(&text[start..]);
        for entry in entries.into_iter().filter(|e| !e.trim().is_empty()) {
            let bad = || SignatureError {
                entry: entry.trim().to_string(),
            };
            let (name, ty) = entry.split_once([':', '=']).ok_or_else(bad)?;
            let ty = parse_tensor_type(ty).ok_or_else(bad)?;
            signature.inputs.push((name.trim().to_string(), ty));
        }
        Ok(signature)
    }
}

/// Compiles `source` to a HIR kernel over the inputs of `signature`. The last statement is the
/// output, named by its assignment target or `out`.
pub fn compile(source: &str, signature: &Signature) -> Result<Kernel, ExprError> {
    compile_impl(source, signature, None)
}

/// Compiles `source` with the outputs `outputs`, each an assigned name (or an input).
pub fn compile_with_outputs(
    source: &str,
    signature: &Signature,
    outputs: &[&str],
) -> Result<Kernel, ExprError> {
    compile_impl(source, signature, Some(outputs))
}

/// A value during evaluation.
#[derive(Clone, Debug)]
enum Val {
    Tensor(Tensor),
    Float(f64),
    Int(i64),
    Bool(bool),
    List(Vec<i64>),
    DType(DType),
}

impl Val {
    fn kind(&self) -> &'static str {
        match self {
            Val::Tensor(_) => "a tensor",
            Val::Float(_) | Val::Int(_) => "a number",
            Val::Bool(_) => "a boolean",
            Val::List(_) => "a list",
            Val::DType(_) => "a dtype",
        }
    }
}

struct Eval<'s> {
    src: &'s str,
    guard: TraceGuard,
    env: HashMap<String, Val>,
    /// The dtype bare literals take when no tensor decides: the first float input's, else f64.
    default_float: DType,
}

impl Eval<'_> {
    fn err(&self, pos: Pos, message: impl Into<String>) -> ExprError {
        ExprError::at(self.src, pos, message.into())
    }

    /// Turns a traced result into a value, or the trace's error at `pos`.
    fn traced(&self, pos: Pos, t: Tensor) -> Result<Val, ExprError> {
        if t.is_poisoned() {
            let message = match self.guard.error() {
                Some(error) => error.to_string(),
                None => "invalid operation".to_string(),
            };
            return Err(self.err(pos, message));
        }
        Ok(Val::Tensor(t))
    }

    fn operand(&self, pos: Pos, v: &Val) -> Result<Operand, ExprError> {
        match v {
            Val::Tensor(t) => Ok(Operand::Tensor(*t)),
            Val::Float(f) => Ok(Operand::Float(*f)),
            Val::Int(i) => Ok(Operand::Int(*i)),
            Val::Bool(b) => Ok(Operand::Bool(*b)),
            other => Err(self.err(
                pos,
                format!("expected a tensor or a number, found {}", other.kind()),
            )),
        }
    }

    /// A tensor for `v`: literals become constants of the default dtype.
    fn tensor(&self, pos: Pos, v: &Val) -> Result<Tensor, ExprError> {
        let scalar = match v {
            Val::Tensor(t) => return Ok(*t),
            Val::Float(f) => Scalar::from_f64(self.default_float, *f),
            Val::Int(i) => match i32::try_from(*i) {
                Ok(i) => Scalar::I32(i),
                Err(_) => Scalar::from_f64(self.default_float, *i as f64),
            },
            Val::Bool(b) => Scalar::Bool(*b),
            other => {
                return Err(self.err(
                    pos,
                    format!("expected a tensor or a number, found {}", other.kind()),
                ));
            }
        };
        Ok(self.guard.constant(scalar))
    }

    /// The value of statement `stmt`: its nodes evaluated in index order, which is post-order
    /// (operands first, left to right), so no recursion is needed however deep the tree.
    fn eval(&mut self, program: &Program, stmt: &Stmt) -> Result<Val, ExprError> {
        let end = stmt.value.index() + 1;
        let nodes = program.nodes.get(stmt.first..end).unwrap_or(&[]);
        let mut values: Vec<Option<Val>> = Vec::with_capacity(nodes.len());
        // Each node is the operand of one node, so its value is taken exactly once.
        let take = |values: &mut Vec<Option<Val>>, id: NodeId| {
            id.index()
                .checked_sub(stmt.first)
                .and_then(|i| values.get_mut(i))
                .and_then(Option::take)
        };
        for node in nodes {
            let pos = node.pos;
            let missing = || self.err(pos, "internal: an operand was evaluated twice");
            let value = match &node.expr {
                Expr::Num { value, int } => {
                    if *int && value.abs() < 9.0e15 {
                        Val::Int(*value as i64)
                    } else {
                        Val::Float(*value)
                    }
                }
                Expr::Name { name } => match self.env.get(name) {
                    Some(v) => v.clone(),
                    None => match name.as_str() {
                        "true" => Val::Bool(true),
                        "false" => Val::Bool(false),
                        "pi" => Val::Float(std::f64::consts::PI),
                        other => match DType::from_name(other) {
                            Some(dt) => Val::DType(dt),
                            None => return Err(self.err(pos, format!("unknown name `{other}`"))),
                        },
                    },
                },
                Expr::List { items } => {
                    let mut out = Vec::with_capacity(items.len());
                    for &item in items {
                        match take(&mut values, item).ok_or_else(missing)? {
                            Val::Int(i) => out.push(i),
                            other => {
                                return Err(self.err(
                                    pos,
                                    format!("list items must be integers, found {}", other.kind()),
                                ));
                            }
                        }
                    }
                    Val::List(out)
                }
                Expr::Unary { op, arg } => {
                    let v = take(&mut values, *arg).ok_or_else(missing)?;
                    match (*op, &v) {
                        ("+", Val::Tensor(_) | Val::Float(_) | Val::Int(_)) => v,
                        ("-", Val::Float(f)) => Val::Float(-f),
                        ("-", Val::Int(i)) => Val::Int(-i),
                        ("~", Val::Bool(b)) => Val::Bool(!b),
                        ("-", Val::Tensor(t)) => self.traced(pos, -*t)?,
                        ("~", Val::Tensor(t)) => self.traced(pos, !*t)?,
                        (op, other) => {
                            return Err(
                                self.err(pos, format!("`{op}` cannot be applied to {}", other.kind()))
                            );
                        }
                    }
                }
                Expr::Binary { op, lhs, rhs } => {
                    let a = take(&mut values, *lhs).ok_or_else(missing)?;
                    let b = take(&mut values, *rhs).ok_or_else(missing)?;
                    self.binary(op, a, b, pos)?
                }
                Expr::Call { name, args } => {
                    let mut evaluated = Vec::with_capacity(args.len());
                    for arg in args {
                        let v = take(&mut values, arg.value).ok_or_else(missing)?;
                        evaluated.push((arg.keyword.clone(), v, program.pos(arg.value)));
                    }
                    self.call(name, evaluated, pos)?
                }
            };
            values.push(Some(value));
        }
        take(&mut values, stmt.value).ok_or_else(|| self.err(program.pos(stmt.value), "internal: no value"))
    }

    fn binary(&mut self, op: &str, a: Val, b: Val, pos: Pos) -> Result<Val, ExprError> {
        if op == "@" {
            // NumPy's `matmul`; a number is a scalar, which it rejects with a typed error.
            let (a, b) = (self.tensor(pos, &a)?, self.tensor(pos, &b)?);
            return self.traced(pos, a.matmul(b));
        }
        // Two number literals fold at compile time.
        let num = |v: &Val| match v {
            Val::Float(f) => Some(*f),
            Val::Int(i) => Some(*i as f64),
            _ => None,
        };
        if let (Some(x), Some(y)) = (num(&a), num(&b)) {
            let both_int = matches!((&a, &b), (Val::Int(_), Val::Int(_)));
            let folded = match op {
                "+" => Some(x + y),
                "-" => Some(x - y),
                "*" => Some(x * y),
                "/" => Some(x / y),
                "**" => Some(x.powf(y)),
                "%" => Some(x % y),
                "<" => return Ok(Val::Bool(x < y)),
                "<=" => return Ok(Val::Bool(x <= y)),
                ">" => return Ok(Val::Bool(x > y)),
                ">=" => return Ok(Val::Bool(x >= y)),
                "==" => return Ok(Val::Bool(x == y)),
                "!=" => return Ok(Val::Bool(x != y)),
                _ => None,
            };
            if let Some(v) = folded {
                return Ok(if both_int && matches!(op, "+" | "-" | "*") && v.abs() < 2.0e9 {
                    Val::Int(v as i64)
                } else {
                    Val::Float(v)
                });
            }
        }
        // `**` needs a float tensor; an integer literal exponent is a weak float.
        let a_t = match &a {
            Val::Tensor(_) => self.operand(pos, &a)?,
            _ if matches!(b, Val::Tensor(_)) => self.operand(pos, &a)?,
            _ => Operand::Tensor(self.tensor(pos, &a)?),
        };
        let b_o = self.operand(pos, &b)?;
        let lhs = match a_t {
            Operand::Tensor(t) => t,
            literal => {
                // Literal on the left, tensor on the right: record with reversed operands.
                let Operand::Tensor(rt) = b_o else {
                    return Err(self.err(pos, "invalid operands"));
                };
                let t = match op {
                    "+" => rt.full_like(literal) + rt,
                    "-" => rt.full_like(literal) - rt,
                    "*" => rt.full_like(literal) * rt,
                    "/" => rt.full_like(literal) / rt,
                    "%" => rt.full_like(literal) % rt,
                    "**" => rt.full_like(literal).pow(rt),
                    "<" => rt.gt(literal),
                    "<=" => rt.ge(literal),
                    ">" => rt.lt(literal),
                    ">=" => rt.le(literal),
                    "==" => rt.eq(literal),
                    "!=" => rt.ne(literal),
                    "&" => rt & literal,
                    "|" => rt | literal,
                    other => return Err(self.err(pos, format!("unknown operator `{other}`"))),
                };
                return self.traced(pos, t);
            }
        };
        let t = match op {
            "+" => lhs + b_o,
            "-" => lhs - b_o,
            "*" => lhs * b_o,
            "/" => lhs / b_o,
            "%" => lhs % b_o,
            "**" => lhs.pow(b_o),
            "<" => lhs.lt(b_o),
            "<=" => lhs.le(b_o),
            ">" => lhs.gt(b_o),
            ">=" => lhs.ge(b_o),
            "==" => lhs.eq(b_o),
            "!=" => lhs.ne(b_o),
            "&" => lhs & b_o,
            "|" => lhs | b_o,
            other => return Err(self.err(pos, format!("unknown operator `{other}`"))),
        };
        self.traced(pos, t)
    }

    /// A call of `name` on its evaluated arguments (keyword, value, position).
    fn call(
        &mut self,
        name: &str,
        args: Vec<(Option<String>, Val, Pos)>,
        pos: Pos,
    ) -> Result<Val, ExprError> {
        let n_args = args.len();
        let mut positional = Vec::new();
        let mut keywords: Vec<(String, Val, Pos)> = Vec::new();
        for (keyword, v, arg_pos) in args {
            match keyword {
                Some(kw) => keywords.push((kw, v, arg_pos)),
                None => {
                    if !keywords.is_empty() {
                        return Err(self.err(arg_pos, "positional argument after a keyword argument"));
                    }
                    positional.push((v, arg_pos));
                }
            }
        }
        let arity = |this: &Self, n: usize| -> Result<(), ExprError> {
            if positional.len() == n && keywords.is_empty() {
                Ok(())
            } else {
                Err(this.err(pos, format!("`{name}` takes {n} argument(s), got {n_args}")))
            }
        };
        // Every call goes through the one table of functions (`functions.rs`).
        let function = match functions::resolve(name) {
            Some(functions::Resolved::Named(function)) => function,
            Some(functions::Resolved::Unary(op)) => {
                arity(self, 1)?;
                let t = self.tensor(positional[0].1, &positional[0].0)?;
                let t = match op {
                    UnaryOp::Not => !t,
                    UnaryOp::Neg => -t,
                    _ => Tensor::unary_by_op(t, op),
                };
                return self.traced(pos, t);
            }
            None => return Err(self.err(pos, format!("unknown function `{name}`"))),
        };
        let reduce_op = match function {
            "sum" => Some(ReduceOp::Sum),
            "prod" => Some(ReduceOp::Prod),
            "min" => Some(ReduceOp::Min),
            "max" => Some(ReduceOp::Max),
            "mean" => Some(ReduceOp::Mean),
            _ => None,
        };
        if let Some(op) = reduce_op {
            return self.reduction(name, op, &positional, &keywords, pos);
        }
        let binary_op = match function {
            "add" => Some("+"),
            "sub" => Some("-"),
            "mul" => Some("*"),
            "div" => Some("/"),
            "pow" => Some("**"),
            "fmod" => Some("%"),
            "logical_and" => Some("&"),
            "logical_or" => Some("|"),
            "lt" => Some("<"),
            "le" => Some("<="),
            "gt" => Some(">"),
            "ge" => Some(">="),
            "eq" => Some("=="),
            "ne" => Some("!="),
            _ => None,
        };
        if let Some(op) = binary_op {
            arity(self, 2)?;
            let (a, b) = (positional[0].0.clone(), positional[1].0.clone());
            return self.binary(op, a, b, pos);
        }
        match function {
            "minimum" | "maximum" | "atan2" => {
                arity(self, 2)?;
                let a = self.tensor(positional[0].1, &positional[0].0)?;
                let b = self.operand(positional[1].1, &positional[1].0)?;
                let t = match function {
                    "minimum" => a.min(b),
                    "maximum" => a.max(b),
                    _ => a.atan2(b),
                };
                self.traced(pos, t)
            }
            "where" => {
                arity(self, 3)?;
                let c = self.tensor(positional[0].1, &positional[0].0)?;
                let a = self.operand(positional[1].1, &positional[1].0)?;
                let b = self.operand(positional[2].1, &positional[2].0)?;
                // Two literal branches take the default float dtype.
                let a = match a {
                    Operand::Tensor(_) => a,
                    _ if matches!(b, Operand::Tensor(_)) => a,
                    _ => Operand::Tensor(self.tensor(positional[1].1, &positional[1].0)?),
                };
                self.traced(pos, c.select(a, b))
            }
            "clip" => {
                arity(self, 3)?;
                let x = self.tensor(positional[0].1, &positional[0].0)?;
                let lo = self.operand(positional[1].1, &positional[1].0)?;
                let hi = self.operand(positional[2].1, &positional[2].0)?;
                self.traced(pos, x.clamp(lo, hi))
            }
            "cast" => {
                arity(self, 2)?;
                let x = self.tensor(positional[0].1, &positional[0].0)?;
                let Val::DType(dtype) = positional[1].0 else {
                    return Err(self.err(positional[1].1, "expected a dtype (`f32`, `f64`, `i32`, `bool`)"));
                };
                self.traced(pos, x.cast(dtype))
            }
            "reshape" | "broadcast_to" => {
                arity(self, 2)?;
                let x = self.tensor(positional[0].1, &positional[0].0)?;
                let shape = self.shape_arg(&positional[1])?;
                let t = if function == "reshape" {
                    x.reshape(shape)
                } else {
                    x.broadcast_to(shape)
                };
                self.traced(pos, t)
            }
            "isnan" | "isinf" | "isfinite" => {
                arity(self, 1)?;
                let x = self.tensor(positional[0].1, &positional[0].0)?;
                let t = match function {
                    "isnan" => x.is_nan(),
                    "isinf" => x.is_inf(),
                    _ => x.is_finite(),
                };
                self.traced(pos, t)
            }
            "argmin" | "argmax" => {
                let (x, axis) = self.tensor_and_axis(name, 1, &positional, &keywords, pos)?;
                // No axis: the index into the flattened tensor (NumPy's `axis=None`).
                let (x, axis) = flat_unless(x, axis);
                let t = if function == "argmin" {
                    x.argmin(axis)
                } else {
                    x.argmax(axis)
                };
                self.traced(pos, t)
            }
            "take" => {
                let (table, axis) = self.tensor_and_axis(name, 2, &positional, &keywords, pos)?;
                let index = self.tensor(positional[1].1, &positional[1].0)?;
                let (table, axis) = flat_unless(table, axis);
                self.traced(pos, table.take(index, axis))
            }
            "take_along_axis" => {
                let (table, axis) = self.tensor_and_axis(name, 2, &positional, &keywords, pos)?;
                let Some(axis) = axis else {
                    return Err(self.err(pos, "`take_along_axis` takes a table, an index and an axis"));
                };
                let index = self.tensor(positional[1].1, &positional[1].0)?;
                self.traced(pos, table.take_along_axis(index, axis))
            }
            "matmul" | "dot" | "solve" => {
                arity(self, 2)?;
                let a = self.tensor(positional[0].1, &positional[0].0)?;
                let b = self.tensor(positional[1].1, &positional[1].0)?;
                let t = match function {
                    "matmul" => a.matmul(b),
                    "dot" => a.dot(b),
                    _ => a.solve(b),
                };
                self.traced(pos, t)
            }
            "inv" | "det" => {
                arity(self, 1)?;
                let a = self.tensor(positional[0].1, &positional[0].0)?;
                self.traced(pos, if function == "inv" { a.inv() } else { a.det() })
            }
            "cross" => {
                // NumPy's default axis is the last one of the operands' common shape.
                let (a, axis) = self.tensor_and_axis(name, 2, &positional, &keywords, pos)?;
                let b = self.tensor(positional[1].1, &positional[1].0)?;
                let rank = a.shape().rank().max(b.shape().rank());
                let axis = match axis {
                    // Counted in the first operand's rank: moved to the common one.
                    Some(axis) => axis + (rank - a.shape().rank()),
                    None => rank.saturating_sub(1),
                };
                self.traced(pos, a.cross(b, axis))
            }
            "norm" | "diff" => {
                let (x, axis) = self.tensor_and_axis(name, 1, &positional, &keywords, pos)?;
                let t = match (function, axis) {
                    ("norm", Some(axis)) => x.norm(axis),
                    ("norm", None) => x.norm(All),
                    (_, axis) => x.diff(axis.unwrap_or(x.shape().rank().saturating_sub(1))),
                };
                self.traced(pos, t)
            }
            "cumsum" | "cumprod" | "cummax" | "cummin" | "linrec" => {
                // `reverse=true` folds from the axis's end (JAX's `reverse`).
                let mut reverse = false;
                let mut rest = Vec::with_capacity(keywords.len());
                for (kw, v, p) in &keywords {
                    match (kw.as_str(), v) {
                        ("reverse", Val::Bool(b)) => reverse = *b,
                        ("reverse", _) => return Err(self.err(*p, "`reverse` must be true or false")),
                        _ => rest.push((kw.clone(), v.clone(), *p)),
                    }
                }
                if function == "linrec" {
                    // The coefficient, a tensor or a number of `x`'s dtype; along the last axis
                    // unless `axis` (as SciPy's `lfilter`).
                    let (x, axis) = self.tensor_and_axis(name, 2, &positional, &rest, pos)?;
                    let (coef_val, coef_pos) = (&positional[1].0, positional[1].1);
                    let coef = match coef_val {
                        Val::Float(f) => Operand::Float(*f),
                        Val::Int(i) => Operand::Int(*i),
                        other => Operand::Tensor(self.tensor(coef_pos, other)?),
                    };
                    let axis = axis.unwrap_or(x.shape().rank().saturating_sub(1));
                    return self.traced(pos, x.linrec(coef, axis, reverse));
                }
                let (x, axis) = self.tensor_and_axis(name, 1, &positional, &rest, pos)?;
                // No axis: the running fold of the flattened tensor, as NumPy's.
                let (x, axis) = flat_unless(x, axis);
                let op = ScanOp::from_name(function)
                    .ok_or_else(|| self.err(pos, format!("unknown function `{name}`")))?;
                self.traced(pos, x.scan(op, axis, reverse))
            }
            _ => self.lie_call(name, function, &positional, &keywords, pos),
        }
    }

    /// A call of a Lie group function of `rfx::lie` (`function`, spelled `name`): its
    /// positional arguments are tensors or numbers.
    fn lie_call(
        &mut self,
        name: &str,
        function: &str,
        positional: &[(Val, Pos)],
        keywords: &[(String, Val, Pos)],
        pos: Pos,
    ) -> Result<Val, ExprError> {
        let Some(lie) = crate::lie::expr_function(function) else {
            return Err(self.err(pos, format!("unknown function `{name}`")));
        };
        if let Some((keyword, _, at)) = keywords.first() {
            return Err(self.err(*at, format!("`{name}` takes no keyword argument `{keyword}`")));
        }
        let args = positional
            .iter()
            .map(|(v, p)| self.tensor(*p, v))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(t) = lie.call.apply(&args) else {
            let n = lie.call.arity();
            return Err(self.err(pos, format!("`{name}` takes {n} argument(s), got {}", args.len())));
        };
        self.traced(pos, t)
    }

    /// The first argument of a call that takes `before` positional arguments and then an
    /// optional axis (positional or `axis=`), with the axis resolved against its rank
    /// (negative axes count from the end).
    fn tensor_and_axis(
        &self,
        name: &str,
        before: usize,
        positional: &[(Val, Pos)],
        keywords: &[(String, Val, Pos)],
        pos: Pos,
    ) -> Result<(Tensor, Option<usize>), ExprError> {
        let usage = || format!("`{name}` takes {before} argument(s) and an optional axis");
        if positional.len() < before || positional.len() > before + 1 {
            return Err(self.err(pos, usage()));
        }
        let mut axis = positional.get(before).map(|(v, p)| (v, *p));
        for (kw, v, p) in keywords {
            match kw.as_str() {
                "axis" if axis.is_none() => axis = Some((v, *p)),
                _ => return Err(self.err(*p, format!("`{name}` has no argument `{kw}` here"))),
            }
        }
        let x = self.tensor(positional[0].1, &positional[0].0)?;
        let rank = x.shape().rank();
        let axis = match axis {
            None => None,
            Some((Val::Int(a), p)) => Some(self.axis_of(*a, rank, p)?),
            Some((other, p)) => {
                return Err(self.err(p, format!("`axis` must be an integer, found {}", other.kind())));
            }
        };
        Ok((x, axis))
    }

    /// `axis` of a rank-`rank` operand, negative from the end.
    fn axis_of(&self, axis: i64, rank: usize, p: Pos) -> Result<usize, ExprError> {
        let resolved = if axis < 0 { axis + rank as i64 } else { axis };
        usize::try_from(resolved)
            .ok()
            .filter(|&a| a < rank)
            .ok_or_else(|| self.err(p, format!("axis {axis} is out of range for rank {rank}")))
    }

    fn shape_arg(&self, arg: &(Val, Pos)) -> Result<Shape, ExprError> {
        match &arg.0 {
            Val::List(items) => items
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| self.err(arg.1, format!("negative dimension {d}"))))
                .collect::<Result<Vec<_>, _>>()
                .map(Shape::new),
            Val::Int(d) => usize::try_from(*d)
                .map(|d| Shape::new([d]))
                .map_err(|_| self.err(arg.1, format!("negative dimension {d}"))),
            other => Err(self.err(
                arg.1,
                format!("expected a shape like [2, 3], found {}", other.kind()),
            )),
        }
    }

    fn reduction(
        &mut self,
        name: &str,
        op: ReduceOp,
        positional: &[(Val, Pos)],
        keywords: &[(String, Val, Pos)],
        pos: Pos,
    ) -> Result<Val, ExprError> {
        if positional.is_empty() || positional.len() > 2 {
            return Err(self.err(pos, format!("`{name}` takes a tensor and an optional axis")));
        }
        let x = self.tensor(positional[0].1, &positional[0].0)?;
        let rank = x.shape().rank();
        let mut axis_arg = positional.get(1).map(|(v, p)| (v.clone(), *p));
        let mut keepdims = false;
        for (kw, v, p) in keywords {
            match (kw.as_str(), v) {
                ("axis", v) if axis_arg.is_none() => axis_arg = Some((v.clone(), *p)),
                ("keepdims", Val::Bool(b)) => keepdims = *b,
                ("keepdims", _) => return Err(self.err(*p, "`keepdims` must be true or false")),
                (kw, _) => return Err(self.err(*p, format!("`{name}` has no argument `{kw}`"))),
            }
        }
        let normalise = |this: &Self, axis: i64, p: Pos| this.axis_of(axis, rank, p);
        let axes: Vec<usize> = match axis_arg {
            None => (0..rank).collect(),
            Some((Val::Int(a), p)) => vec![normalise(self, a, p)?],
            Some((Val::List(items), p)) => items
                .iter()
                .map(|&a| normalise(self, a, p))
                .collect::<Result<_, _>>()?,
            Some((other, p)) => {
                return Err(self.err(
                    p,
                    format!("`axis` must be an integer or a list, found {}", other.kind()),
                ));
            }
        };
        self.traced(pos, x.reduce(op, axes, keepdims))
    }
}

fn compile_impl(source: &str, signature: &Signature, outputs: Option<&[&str]>) -> Result<Kernel, ExprError> {
    let program = parse::parse(source)?;
    let guard = TraceGuard::begin("expr");
    let mut env = HashMap::new();
    for (name, ty) in signature.inputs() {
        let t = guard.input(name, ty.clone());
        if t.is_poisoned() {
            let message = guard
                .error()
                .map_or_else(|| "invalid input".to_string(), |e| e.to_string());
            // The signature is not part of the source: the error points at the input's first
            // use, or at the start of an expression that does not use it.
            let pos = program
                .nodes
                .iter()
                .find(|node| matches!(&node.expr, Expr::Name { name: used } if used == name))
                .map_or(Pos { line: 1, col: 1 }, |node| node.pos);
            return Err(ExprError::at(source, pos, format!("input `{name}`: {message}")));
        }
        env.insert(name.clone(), Val::Tensor(t));
    }
    let default_float = signature
        .inputs()
        .iter()
        .map(|(_, ty)| ty.dtype)
        .find(|d| d.is_float())
        .unwrap_or(DType::F64);
    let mut eval = Eval {
        src: source,
        guard,
        env,
        default_float,
    };
    let mut last: Option<(String, Val, Pos)> = None;
    for stmt in &program.stmts {
        let value = eval.eval(&program, stmt)?;
        match &stmt.target {
            Some((name, pos)) => {
                if signature.inputs().iter().any(|(input, _)| input == name) {
                    return Err(eval.err(*pos, format!("`{name}` is an input and cannot be assigned")));
                }
                eval.env.insert(name.clone(), value.clone());
                last = Some((name.clone(), value, *pos));
            }
            None => last = Some(("out".to_string(), value, program.pos(stmt.value))),
        }
    }
    let mut named: Vec<(String, Val, Pos)> = Vec::new();
    match outputs {
        None => named.extend(last),
        Some(names) => {
            let end = program
                .stmts
                .last()
                .map_or(Pos { line: 1, col: 1 }, |s| program.pos(s.value));
            for name in names {
                match eval.env.get(*name) {
                    Some(v) => named.push(((*name).to_string(), v.clone(), end)),
                    None => return Err(eval.err(end, format!("output `{name}` is never assigned"))),
                }
            }
        }
    }
    let mut tensors = Vec::with_capacity(named.len());
    for (name, value, pos) in named {
        let t = eval.tensor(pos, &value)?;
        tensors.push((name, t));
    }
    let Eval { guard, src, .. } = eval;
    guard
        .finish(&tensors)
        .map_err(|e| ExprError::at(src, Pos { line: 1, col: 1 }, e.to_string()))
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, ty)) in self.inputs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}: {ty}")?;
        }
        Ok(())
    }
}

/// `x` and `axis`, or without an axis `x` flattened and its only axis (NumPy's `axis=None`).
fn flat_unless(x: Tensor, axis: Option<usize>) -> (Tensor, usize) {
    match axis {
        Some(axis) => (x, axis),
        None => (x.reshape([x.shape().numel()]), 0),
    }
}

#[cfg(test)]
mod function_table_tests {
    use super::*;

    /// Every name and alias of the table is a function the evaluator calls: with the wrong
    /// number of arguments it says so, never "unknown function".
    #[test]
    fn every_listed_name_is_callable_and_nothing_else_is() {
        let sig: Signature = "x: f32[3]".parse().expect("signature");
        let listed = functions();
        for function in &listed {
            for name in std::iter::once(&function.name).chain(function.aliases) {
                let err = compile(&format!("{name}()"), &sig).expect_err("no arguments");
                assert!(!err.message.contains("unknown function"), "{name}: {err}");
            }
        }
        let err = compile("sinn(x)", &sig).expect_err("not listed");
        assert_eq!(err.message, "unknown function `sinn`");
        // Each name once.
        let mut names: Vec<&str> = listed
            .iter()
            .flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied()))
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a name is listed twice");
        assert!(listed.iter().any(|f| f.name == "sin" && f.args == "x"));
        assert!(listed.iter().any(|f| f.name == "atan" && f.aliases == ["arctan"]));
        assert!(listed.iter().any(|f| f.name == "max" && f.aliases == ["amax"]));
    }

    /// An alias computes what its function does.
    #[test]
    fn aliases_compile_to_their_function() {
        let sig: Signature = "x: f32[3], y: f32[3]".parse().expect("signature");
        for (alias, name) in [
            ("arctan2(x, y)", "atan2(x, y)"),
            ("amax(x)", "max(x)"),
            ("ln(x)", "log(x)"),
        ] {
            let a = compile(alias, &sig).expect(alias).to_string();
            let b = compile(name, &sig).expect(name).to_string();
            assert_eq!(a, b, "{alias}");
        }
    }
}
