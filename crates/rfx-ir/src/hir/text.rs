//! The HIR text format: printing (`Display`) and parsing.
//!
//! ```text
//! kernel fused_chain {
//!   %0 = input x : f32[3]
//!   %1 = input y : f32[3]
//!   %2 = const 2.0 : f32[]
//!   %3 = mul %0, %2 : f32[3]
//!   %4 = sin %3 : f32[3]
//!   %5 = add %4, %1 : f32[3]
//!   output out = %5
//! }
//! ```
//!
//! Grammar (newlines are not significant; `#` starts a comment):
//!
//! ```text
//! kernel    := "kernel" IDENT "{" statement* "}"
//! statement := VALUE "=" op ":" type | "output" IDENT "=" VALUE
//! op        := "input" IDENT
//!            | "const" LITERAL
//!            | "literal" "[" [LITERAL ("," LITERAL)*] "]"   # row-major, one per element
//!            | "iota" "axis" INT
//!            | "transpose" VALUE "perm" dims
//!            | REDUCE VALUE "axes" dims ["keepdims"]     # REDUCE: sum prod max min mean
//!            | SCAN VALUE "axis" INT ["reverse"]         # SCAN: cumsum cumprod cummax cummin
//!            | "loop" [VALUE ("," VALUE)*] counts "{" kernel "}"
//!            | "while_loop" [VALUE ("," VALUE)*] counts "{" kernel "}" "cond" "{" kernel "}"
//!            | "loop_output" VALUE "index" INT
//!            | OPNAME VALUE ("," VALUE)*                 # every other op
//! counts    := "carries" INT "trips" INT
//! type      := DTYPE dims                                # f32[2,3], bool[]
//! dims      := "[" [INT ("," INT)*] "]"
//! ```
//!
//! A loop's operands are its initial carries then its invariants; its body (and a
//! `while_loop`'s test) is a whole kernel with its own value names, printed indented inside the
//! loop's statement:
//!
//! ```text
//!   %2 = loop %0, %1 carries 1 trips 100 {
//!     kernel body {
//!       %0 = input c : f32[3]
//!       %1 = input v : f32[3]
//!       %2 = add %0, %1 : f32[3]
//!       output c = %2
//!     }
//!   } : f32[3]
//!   %3 = loop_output %2 index 0 : f32[3]
//! ```
//!
//! Loops nest at most [`super::MAX_LOOP_DEPTH`] deep; deeper text is a parse error.
//!
//! `max`/`min` followed by `axes` are reductions, otherwise the elementwise ops. Value names are
//! any `%identifier`; the parser numbers values densely in order of definition, so printing a
//! parsed kernel renumbers it. The target of `cast`, `broadcast_to` and `reshape`, and the
//! type of `iota` and `literal`, is the statement's type.

use std::collections::HashMap;
use std::fmt;

use super::{
    Kernel, Loop, MAX_LOOP_DEPTH, Node, Op, Output, ValueId, VerifyError, VerifyErrorKind, VerifyLocation,
    verify,
};
use crate::error::ParseError;
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::text::{Cursor, Token};
use crate::{Scalar, TensorType, parse_scalar};

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        print_kernel(self, f, &mut |_, _| Ok(()))
    }
}

/// Prints `kernel`, calling `annotate` after each line with what the line shows (used by the
/// verifier to attach errors).
pub(super) fn print_kernel(
    kernel: &Kernel,
    f: &mut dyn fmt::Write,
    annotate: &mut dyn FnMut(&mut dyn fmt::Write, VerifyLocation) -> fmt::Result,
) -> fmt::Result {
    print_kernel_at(kernel, f, 0, annotate)
}

/// Prints `kernel` with its lines indented by `indent` spaces (a loop's body and test are
/// kernels printed inside the loop's statement).
fn print_kernel_at(
    kernel: &Kernel,
    f: &mut dyn fmt::Write,
    indent: usize,
    annotate: &mut dyn FnMut(&mut dyn fmt::Write, VerifyLocation) -> fmt::Result,
) -> fmt::Result {
    let pad = indent + 2;
    writeln!(f, "{:indent$}kernel {} {{", "", kernel.name())?;
    annotate(f, VerifyLocation::Kernel)?;
    for (index, node) in kernel.nodes().iter().enumerate() {
        let value = ValueId::new(index);
        write!(f, "{:pad$}{value} = ", "")?;
        print_op(node, f, pad)?;
        writeln!(f, " : {}", node.ty)?;
        annotate(f, VerifyLocation::Value(value))?;
    }
    for (index, output) in kernel.outputs().iter().enumerate() {
        writeln!(f, "{:pad$}output {} = {}", "", output.name, output.value)?;
        annotate(f, VerifyLocation::Output(index))?;
    }
    write!(f, "{:indent$}}}", "")?;
    if indent == 0 {
        f.write_str("\n")?;
    }
    Ok(())
}

/// Prints the op of a node whose statement is indented by `indent` spaces.
fn print_op(node: &Node, f: &mut dyn fmt::Write, indent: usize) -> fmt::Result {
    match &node.op {
        Op::Input { name } => return write!(f, "input {name}"),
        Op::Const(value) => return write!(f, "const {value}"),
        Op::Iota { axis } => return write!(f, "iota axis {axis}"),
        Op::Literal(values) => {
            f.write_str("literal ")?;
            return crate::text::write_literals(f, values);
        }
        _ => {}
    }
    f.write_str(node.op.name())?;
    for (i, arg) in node.args.iter().enumerate() {
        write!(f, "{}{arg}", if i == 0 { " " } else { ", " })?;
    }
    match &node.op {
        Op::Reduce { axes, keepdims, .. } => {
            f.write_str(" axes ")?;
            print_dims(f, axes)?;
            if *keepdims {
                f.write_str(" keepdims")?;
            }
        }
        Op::Transpose { perm } => {
            f.write_str(" perm ")?;
            print_dims(f, perm)?;
        }
        Op::Slice { starts } => {
            f.write_str(" starts ")?;
            print_dims(f, starts)?;
        }
        Op::Pad { low } => {
            f.write_str(" low ")?;
            print_dims(f, low)?;
        }
        Op::Gather { axis } => write!(f, " axis {axis}")?,
        Op::Scan { axis, reverse, .. } => {
            write!(f, " axis {axis}")?;
            if *reverse {
                f.write_str(" reverse")?;
            }
        }
        Op::Loop(spec) => print_loop(spec, f, indent)?,
        Op::LoopOutput { index } => write!(f, " index {index}")?,
        _ => {}
    }
    Ok(())
}

/// The part of a loop's statement after its operands: counts, then the body and the test as
/// kernels in braces.
fn print_loop(spec: &Loop, f: &mut dyn fmt::Write, indent: usize) -> fmt::Result {
    let no_annotation = &mut |_: &mut dyn fmt::Write, _| Ok(());
    write!(f, " carries {} trips {} {{", spec.carries, spec.trips)?;
    writeln!(f)?;
    print_kernel_at(&spec.body, f, indent + 2, no_annotation)?;
    write!(f, "\n{:indent$}}}", "")?;
    if let Some(cond) = &spec.cond {
        writeln!(f, " cond {{")?;
        print_kernel_at(cond, f, indent + 2, no_annotation)?;
        write!(f, "\n{:indent$}}}", "")?;
    }
    Ok(())
}

fn print_dims(f: &mut dyn fmt::Write, dims: &[usize]) -> fmt::Result {
    f.write_str("[")?;
    for (i, d) in dims.iter().enumerate() {
        write!(f, "{}{d}", if i == 0 { "" } else { "," })?;
    }
    f.write_str("]")
}

/// Parses a kernel and verifies it. Syntax errors and verification errors alike come back as a
/// [`ParseError`] at the line and column of the offending statement (the first error in text
/// order); use [`parse_unverified`] to get an unverified kernel and all verifier errors.
pub fn parse(src: &str) -> Result<Kernel, ParseError> {
    let (kernel, spans) = parse_with_spans(src)?;
    match verify(&kernel) {
        Ok(()) => Ok(kernel),
        Err(errors) => {
            let first = errors
                .errors()
                .iter()
                .map(|e| (error_span(&spans, e), e))
                .min_by_key(|(span, _)| *span);
            match first {
                Some(((line, col), error)) => Err(ParseError {
                    line,
                    col,
                    message: error.to_string(),
                }),
                None => Ok(kernel),
            }
        }
    }
}

/// The line and column of the statement a verifier error concerns: inside a loop's body or
/// test for errors found there.
fn error_span(spans: &Spans, error: &VerifyError) -> (usize, usize) {
    match error.location {
        VerifyLocation::Kernel => spans.kernel,
        VerifyLocation::Value(v) => {
            let inner = match (&error.kind, spans.loops.get(&v.index())) {
                (VerifyErrorKind::InLoopBody(inner), Some(l)) => Some((&l.body, inner)),
                (VerifyErrorKind::InLoopTest(inner), Some(l)) => l.cond.as_ref().map(|c| (c, inner)),
                _ => None,
            };
            match inner {
                Some((inner_spans, inner)) => error_span(inner_spans, inner),
                None => spans.values.get(v.index()).copied().unwrap_or(spans.kernel),
            }
        }
        VerifyLocation::Output(i) => spans.outputs.get(i).copied().unwrap_or(spans.kernel),
    }
}

/// Parses a kernel without verifying it: only syntax and name resolution are checked (every
/// `%name` must be defined somewhere in the kernel, but possibly after its use).
pub fn parse_unverified(src: &str) -> Result<Kernel, ParseError> {
    parse_with_spans(src).map(|(kernel, _)| kernel)
}

/// Line and column of each statement, for reporting verifier errors in text.
struct Spans {
    kernel: (usize, usize),
    values: Vec<(usize, usize)>,
    outputs: Vec<(usize, usize)>,
    /// The spans of the body and test of each loop node, by node index.
    loops: HashMap<usize, LoopSpans>,
}

/// The spans of a loop's body and test.
struct LoopSpans {
    body: Spans,
    cond: Option<Spans>,
}

/// A statement before value names are resolved.
struct RawNode<'a> {
    op: Op,
    args: Vec<Token<'a>>,
    ty: TensorType,
    loop_spans: Option<LoopSpans>,
}

fn parse_with_spans(src: &str) -> Result<(Kernel, Spans), ParseError> {
    let mut cur = Cursor::new(src)?;
    let parsed = parse_kernel(&mut cur, 0)?;
    cur.expect_eof()?;
    Ok(parsed)
}

/// Parses one kernel, the whole text or a loop's body or test at loop depth `depth`.
fn parse_kernel(cur: &mut Cursor<'_>, depth: usize) -> Result<(Kernel, Spans), ParseError> {
    let kernel_tok = cur.expect_keyword("kernel")?;
    let name = cur.expect_ident("a kernel name")?.text.to_string();
    cur.expect_punct("{")?;

    let mut raw_nodes = Vec::new();
    let mut raw_outputs = Vec::new();
    let mut names: HashMap<&str, ValueId> = HashMap::new();
    let mut spans = Spans {
        kernel: (kernel_tok.line, kernel_tok.col),
        values: Vec::new(),
        outputs: Vec::new(),
        loops: HashMap::new(),
    };
    loop {
        let tok = cur.peek();
        if cur.eat_punct("}") {
            break;
        }
        if cur.eat_keyword("output") {
            let out_name = cur.expect_ident("an output name")?.text.to_string();
            cur.expect_punct("=")?;
            let value = cur.expect_value()?;
            raw_outputs.push((out_name, value));
            spans.outputs.push((tok.line, tok.col));
            continue;
        }
        let def = cur.peek();
        if def.kind != crate::text::TokenKind::Value {
            return Err(cur.expected("a statement (`%name = ...`, `output name = %value`) or `}`"));
        }
        cur.bump();
        if names.insert(def.text, ValueId::new(raw_nodes.len())).is_some() {
            return Err(Cursor::message_at(
                def,
                format!("value `{}` is defined twice", def.text),
            ));
        }
        cur.expect_punct("=")?;
        let mut raw = parse_statement(cur, depth)?;
        if let Some(loop_spans) = raw.loop_spans.take() {
            spans.loops.insert(raw_nodes.len(), loop_spans);
        }
        raw_nodes.push(raw);
        spans.values.push((def.line, def.col));
    }

    let resolve = |tok: Token<'_>| {
        names
            .get(tok.text)
            .copied()
            .ok_or_else(|| Cursor::message_at(tok, format!("undefined value `{}`", tok.text)))
    };
    let nodes = raw_nodes
        .into_iter()
        .map(|raw| {
            let args = raw.args.into_iter().map(resolve).collect::<Result<Vec<_>, _>>()?;
            Ok(Node {
                op: raw.op,
                args,
                ty: raw.ty,
            })
        })
        .collect::<Result<Vec<_>, ParseError>>()?;
    let outputs = raw_outputs
        .into_iter()
        .map(|(name, tok)| {
            Ok(Output {
                name,
                value: resolve(tok)?,
            })
        })
        .collect::<Result<Vec<_>, ParseError>>()?;
    Ok((Kernel::from_parts(name, nodes, outputs), spans))
}

/// The rest of a `loop` or `while_loop` statement after its name (`op_tok`) and operands: the
/// counts, the body and, for `while_loop`, the test. `depth` is the depth of the kernel holding
/// the statement.
fn parse_loop(
    cur: &mut Cursor<'_>,
    op_tok: Token<'_>,
    depth: usize,
) -> Result<(Loop, LoopSpans), ParseError> {
    cur.expect_keyword("carries")?;
    let carries = cur.expect_usize("a carry count")?;
    cur.expect_keyword("trips")?;
    let trips_tok = cur.peek();
    let trips = cur.expect_usize("a trip count")?;
    let trips = u64::try_from(trips).map_err(|_| {
        Cursor::message_at(trips_tok, format!("trip count `{}` is too large", trips_tok.text))
    })?;
    if depth + 1 > MAX_LOOP_DEPTH {
        return Err(Cursor::message_at(
            op_tok,
            format!("loops nested more than {MAX_LOOP_DEPTH} deep"),
        ));
    }
    let block = |cur: &mut Cursor<'_>| {
        cur.expect_punct("{")?;
        let parsed = parse_kernel(cur, depth + 1)?;
        cur.expect_punct("}")?;
        Ok::<_, ParseError>(parsed)
    };
    let (body, body_spans) = block(cur)?;
    let (cond, cond_spans) = if op_tok.text == "while_loop" {
        cur.expect_keyword("cond")?;
        let (cond, spans) = block(cur)?;
        (Some(cond), Some(spans))
    } else {
        (None, None)
    };
    let spec = Loop {
        carries,
        trips,
        body,
        cond,
    };
    let spans = LoopSpans {
        body: body_spans,
        cond: cond_spans,
    };
    Ok((spec, spans))
}

fn parse_statement<'a>(cur: &mut Cursor<'a>, depth: usize) -> Result<RawNode<'a>, ParseError> {
    let op_tok = cur.expect_ident("an op name")?;
    let mut args = Vec::new();
    let mut literal = None;
    let mut literals = None;
    let mut loop_spans = None;
    let op = match op_tok.text {
        "loop" | "while_loop" => {
            if cur.peek().kind == crate::text::TokenKind::Value {
                args.push(cur.bump());
                while cur.eat_punct(",") {
                    args.push(cur.expect_value()?);
                }
            }
            let (spec, spans) = parse_loop(cur, op_tok, depth)?;
            loop_spans = Some(spans);
            Op::Loop(Box::new(spec))
        }
        "loop_output" => {
            args.push(cur.expect_value()?);
            cur.expect_keyword("index")?;
            Op::LoopOutput {
                index: cur.expect_usize("a carry index")?,
            }
        }
        "input" => Op::Input {
            name: cur.expect_ident("an input name")?.text.to_string(),
        },
        "const" => {
            literal = Some(cur.expect_literal()?);
            // Placeholder until the type is known; replaced below.
            Op::Const(Scalar::Bool(false))
        }
        "literal" => {
            literals = Some(cur.parse_literal_list()?);
            // Placeholder until the dtype is known; replaced below.
            Op::Literal(Vec::new())
        }
        "iota" => {
            cur.expect_keyword("axis")?;
            Op::Iota {
                axis: cur.expect_usize("an axis")?,
            }
        }
        "transpose" => {
            args.push(cur.expect_value()?);
            cur.expect_keyword("perm")?;
            Op::Transpose {
                perm: cur.parse_dims()?,
            }
        }
        "slice" => {
            args.push(cur.expect_value()?);
            cur.expect_keyword("starts")?;
            Op::Slice {
                starts: cur.parse_dims()?,
            }
        }
        "pad" => {
            args.push(cur.expect_value()?);
            cur.expect_keyword("low")?;
            Op::Pad {
                low: cur.parse_dims()?,
            }
        }
        "gather" => {
            args.push(cur.expect_value()?);
            cur.expect_punct(",")?;
            args.push(cur.expect_value()?);
            cur.expect_keyword("axis")?;
            Op::Gather {
                axis: cur.expect_usize("an axis")?,
            }
        }
        name => {
            args.push(cur.expect_value()?);
            let reduce = ReduceOp::from_name(name);
            if let Some(op) = ScanOp::from_name(name) {
                for _ in 1..op.arity() {
                    cur.expect_punct(",")?;
                    args.push(cur.expect_value()?);
                }
                cur.expect_keyword("axis")?;
                let axis = cur.expect_usize("an axis")?;
                let reverse = cur.eat_keyword("reverse");
                Op::Scan { op, axis, reverse }
            } else if let (Some(op), true) = (reduce, cur.at_keyword("axes")) {
                cur.bump();
                let axes = cur.parse_dims()?;
                let keepdims = cur.eat_keyword("keepdims");
                Op::Reduce { op, axes, keepdims }
            } else {
                while cur.eat_punct(",") {
                    args.push(cur.expect_value()?);
                }
                elementwise_op(name).ok_or_else(|| {
                    if reduce.is_some() {
                        Cursor::error_at(cur.peek(), "`axes` after the operand of a reduction")
                    } else {
                        Cursor::message_at(op_tok, format!("unknown op `{name}`"))
                    }
                })?
            }
        }
    };
    cur.expect_punct(":")?;
    let ty = cur.parse_tensor_type()?;
    let op = match (op, literal) {
        (Op::Const(_), Some(tok)) => Op::Const(parse_scalar(tok.text, ty.dtype).ok_or_else(|| {
            Cursor::message_at(
                tok,
                format!("`{}` is not a literal of dtype {}", tok.text, ty.dtype),
            )
        })?),
        (op, _) => op,
    };
    let op = match (op, literals) {
        (Op::Literal(_), Some(tokens)) => Op::Literal(crate::text::typed_literals(&tokens, ty.dtype)?),
        (op, _) => op,
    };
    Ok(RawNode {
        op,
        args,
        ty,
        loop_spans,
    })
}

fn elementwise_op(name: &str) -> Option<Op> {
    if let Some(op) = UnaryOp::from_name(name) {
        return Some(Op::Unary(op));
    }
    if let Some(op) = BinaryOp::from_name(name) {
        return Some(Op::Binary(op));
    }
    if let Some(op) = CmpOp::from_name(name) {
        return Some(Op::Compare(op));
    }
    match name {
        "select" => Some(Op::Select),
        "clamp" => Some(Op::Clamp),
        "set_row" => Some(Op::SetRow),
        "cast" => Some(Op::Cast),
        "broadcast_to" => Some(Op::BroadcastTo),
        "reshape" => Some(Op::Reshape),
        _ => None,
    }
}
