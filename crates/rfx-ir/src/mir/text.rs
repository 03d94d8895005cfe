//! The MIR text format: printing and parsing.
//!
//! ```text
//! program  := "mir" NAME "{" buffer* kernel* loop* "}"
//! buffer   := LABEL ":" TYPE "=" ("input" NAME | "output" NAME | "temp")
//! kernel   := "kernel" NAME DIMS "{" inst* (store | reduce)* "}"
//! inst     := VALUE "=" op ":" DTYPE
//! op       := "load" LABEL DIMS | "index" DIMS | "const" LITERAL
//!           | SCAN VALUE "axis" INT ["reverse"] | OPNAME VALUE ("," VALUE)*
//! store    := "store" LABEL [DIMS ["offset" INT]] "=" VALUE
//! reduce   := "reduce" REDUCEOP LABEL "=" VALUE "axes" DIMS
//! loop     := "loop" "kernels" FIRST ".." END "trips" INT ["exit" LABEL]
//! ```
//!
//! The `loop` lines come after the kernels, one per [`crate::repeat::KernelLoop`] in the
//! program's order; `FIRST..END` counts kernels from 0 and is written without spaces.
//!
//! Buffer labels and value names are renamed densely in order of definition, so any labels
//! parse, and printing always writes `bufN` and `%N`.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use super::{
    BufKind, Buffer, MirInst, MirKernel, MirOp, MirProgram, MirValue, Reduction, Region, RowIndex, Store,
    VerifyLocation,
};
use crate::error::ParseError;
use crate::ids::{write_index_list, write_list};
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::repeat::KernelLoop;
use crate::text::{Cursor, Token, TokenKind};
use crate::{BufId, DType, Shape, parse_scalar};

/// Writes the program; after each line, writes one `# error: ...` line for each note that
/// `notes` returns for the line's location.
pub(crate) fn print_program(
    out: &mut String,
    program: &MirProgram,
    notes: &dyn Fn(&VerifyLocation) -> Vec<String>,
) -> fmt::Result {
    let annotate = |out: &mut String, loc: VerifyLocation, indent: &str| -> fmt::Result {
        for note in notes(&loc) {
            writeln!(out, "{indent}# error: {note}")?;
        }
        Ok(())
    };
    writeln!(out, "mir {} {{", program.name())?;
    annotate(out, VerifyLocation::Program, "  ")?;
    for (i, buffer) in program.buffers().iter().enumerate() {
        let id = BufId::new(i);
        write!(out, "  {id}: {} = ", buffer.ty)?;
        match &buffer.kind {
            BufKind::Input { name } => writeln!(out, "input {name}")?,
            BufKind::Output { name } => writeln!(out, "output {name}")?,
            BufKind::Temp => writeln!(out, "temp")?,
            BufKind::Literal { values } => {
                out.push_str("literal ");
                crate::text::write_literals(out, values)?;
                out.push('\n');
            }
        }
        annotate(out, VerifyLocation::Buffer(id), "  ")?;
    }
    for (k, kernel) in program.kernels().iter().enumerate() {
        writeln!(out, "  kernel {} {} {{", kernel.name, kernel.domain)?;
        annotate(out, VerifyLocation::Kernel { kernel: k }, "    ")?;
        for (i, inst) in kernel.body.iter().enumerate() {
            let value = MirValue::new(i);
            write!(out, "    {value} = {}", inst.op.name())?;
            match &inst.op {
                MirOp::Load { buf, strides, offset } => {
                    write!(out, " {buf} ")?;
                    write_index_list(out, strides)?;
                    if *offset != 0 {
                        write!(out, " offset {offset}")?;
                    }
                }
                MirOp::Gather { buf } => {
                    write!(out, " {buf} ")?;
                    write_list(out, &inst.args)?;
                }
                MirOp::Index { strides } => {
                    out.push(' ');
                    write_index_list(out, strides)?;
                }
                MirOp::Const(literal) => write!(out, " {literal}")?,
                MirOp::Scan { axis, reverse, .. } => {
                    out.push(' ');
                    write_list(out, &inst.args)?;
                    write!(out, " axis {axis}")?;
                    if *reverse {
                        out.push_str(" reverse");
                    }
                }
                _ => {
                    out.push(' ');
                    write_list(out, &inst.args)?;
                }
            }
            writeln!(out, " : {}", inst.dtype)?;
            annotate(out, VerifyLocation::Value { kernel: k, value }, "    ")?;
        }
        for (index, store) in kernel.stores.iter().enumerate() {
            write!(out, "    store {}", store.buf)?;
            if let Some(region) = &store.region {
                out.push(' ');
                write_index_list(out, &region.strides)?;
                if region.offset != 0 {
                    write!(out, " offset {}", region.offset)?;
                }
                if let Some(row) = &region.row {
                    write!(out, " row {} rows {} stride {}", row.index, row.rows, row.stride)?;
                }
            }
            writeln!(out, " = {}", store.value)?;
            annotate(out, VerifyLocation::Store { kernel: k, index }, "    ")?;
        }
        for (index, red) in kernel.reductions.iter().enumerate() {
            write!(out, "    reduce {} {} = {} axes ", red.op, red.buf, red.value)?;
            write_index_list(out, &red.axes)?;
            out.push('\n');
            annotate(out, VerifyLocation::Reduction { kernel: k, index }, "    ")?;
        }
        writeln!(out, "  }}")?;
    }
    for (index, spec) in program.loops().iter().enumerate() {
        out.push_str("  ");
        write_loop(out, spec)?;
        out.push('\n');
        annotate(out, VerifyLocation::Loop(index), "  ")?;
    }
    writeln!(out, "}}")
}

/// Writes `loop kernels FIRST..END trips N [exit bufK]` (shared with the LIR format).
pub(crate) fn write_loop(out: &mut String, spec: &KernelLoop) -> fmt::Result {
    write!(
        out,
        "loop kernels {}..{} trips {}",
        spec.first, spec.end, spec.trips
    )?;
    if let Some(exit) = spec.exit {
        write!(out, " exit {exit}")?;
    }
    Ok(())
}

/// Parses a `loop` line (shared with the LIR format).
pub(crate) fn parse_loop(c: &mut Cursor<'_>, labels: &BufferLabels<'_>) -> Result<KernelLoop, ParseError> {
    c.expect_keyword("loop")?;
    c.expect_keyword("kernels")?;
    let tok = c.peek();
    let bounds = tok
        .text
        .split_once("..")
        .filter(|(a, b)| {
            let digits = |t: &str| !t.is_empty() && t.bytes().all(|d| d.is_ascii_digit());
            tok.kind == TokenKind::Number && digits(a) && digits(b)
        })
        .ok_or_else(|| c.expected("a kernel range `FIRST..END`"))?;
    let (first, end) = match (bounds.0.parse::<usize>(), bounds.1.parse::<usize>()) {
        (Ok(first), Ok(end)) => (first, end),
        _ => {
            return Err(Cursor::message_at(
                tok,
                format!("kernel range `{}` is too large", tok.text),
            ));
        }
    };
    c.bump();
    c.expect_keyword("trips")?;
    let trips_tok = c.peek();
    let trips = u64::try_from(c.expect_usize("a trip count")?)
        .map_err(|_| Cursor::message_at(trips_tok, "trip count is too large"))?;
    let exit = if c.eat_keyword("exit") {
        Some(labels.lookup(c)?)
    } else {
        None
    };
    Ok(KernelLoop {
        first,
        end,
        trips,
        exit,
    })
}

/// Parses a program in the MIR text format (see the module docs for the grammar).
///
/// The result is not verified: run [`super::verify`] on it. Errors carry the 1-based line and
/// column of the offending token.
pub fn parse(src: &str) -> Result<MirProgram, ParseError> {
    let mut c = Cursor::new(src)?;
    c.expect_keyword("mir")?;
    let name = c.expect_ident("a program name")?.text.to_string();
    c.expect_punct("{")?;
    let mut labels = BufferLabels::default();
    let mut buffers = Vec::new();
    while c.peek().kind == TokenKind::Ident && c.peek2().text == ":" {
        let label = c.bump();
        labels.declare(label, buffers.len())?;
        c.expect_punct(":")?;
        let ty = c.parse_tensor_type()?;
        c.expect_punct("=")?;
        let kind = if c.eat_keyword("input") {
            BufKind::Input {
                name: c.expect_ident("an input name")?.text.to_string(),
            }
        } else if c.eat_keyword("output") {
            BufKind::Output {
                name: c.expect_ident("an output name")?.text.to_string(),
            }
        } else if c.eat_keyword("temp") {
            BufKind::Temp
        } else if c.eat_keyword("literal") {
            let tokens = c.parse_literal_list()?;
            BufKind::Literal {
                values: crate::text::typed_literals(&tokens, ty.dtype)?,
            }
        } else {
            return Err(c.expected("`input`, `output`, `temp` or `literal`"));
        };
        buffers.push(Buffer { ty, kind });
    }
    let (mut kernels, mut loops) = (Vec::new(), Vec::new());
    while !c.eat_punct("}") {
        if c.at_keyword("loop") {
            loops.push(parse_loop(&mut c, &labels)?);
        } else if c.at_keyword("kernel") && loops.is_empty() {
            kernels.push(parse_kernel(&mut c, &labels)?);
        } else {
            let what = if !loops.is_empty() {
                "`loop` or `}`"
            } else if kernels.is_empty() {
                "a buffer declaration, `kernel`, `loop` or `}`"
            } else {
                "`kernel`, `loop` or `}`"
            };
            return Err(c.expected(what));
        }
    }
    c.expect_eof()?;
    Ok(MirProgram::from_parts(name, buffers, kernels).with_loops(loops))
}

fn parse_kernel(c: &mut Cursor<'_>, labels: &BufferLabels<'_>) -> Result<MirKernel, ParseError> {
    c.expect_keyword("kernel")?;
    let name = c.expect_ident("a kernel name")?.text.to_string();
    let domain = Shape::new(c.parse_dims()?);
    c.expect_punct("{")?;
    let mut values = ValueNames::default();
    let mut body = Vec::new();
    while c.peek().kind == TokenKind::Value {
        let def = c.expect_value()?;
        c.expect_punct("=")?;
        let inst = parse_inst(c, labels, &values)?;
        values.define(def, body.len())?;
        body.push(inst);
    }
    let (mut stores, mut reductions) = (Vec::new(), Vec::new());
    while !c.eat_punct("}") {
        if c.eat_keyword("store") {
            let buf = labels.lookup(c)?;
            let region = if c.peek().kind == TokenKind::Punct && c.peek().text == "[" {
                let strides = c.parse_dims()?;
                let offset = if c.eat_keyword("offset") {
                    c.expect_usize("an element offset")?
                } else {
                    0
                };
                let row = if c.eat_keyword("row") {
                    let index = labels.lookup(c)?;
                    c.expect_keyword("rows")?;
                    let rows = c.expect_usize("a row count")?;
                    c.expect_keyword("stride")?;
                    let stride = c.expect_usize("a row stride")?;
                    Some(RowIndex { index, rows, stride })
                } else {
                    None
                };
                Some(Region { strides, offset, row })
            } else {
                None
            };
            c.expect_punct("=")?;
            let value = values.lookup(c)?;
            stores.push(Store { buf, value, region });
        } else if c.eat_keyword("reduce") {
            let op = parse_reduce_op(c)?;
            let buf = labels.lookup(c)?;
            c.expect_punct("=")?;
            let value = values.lookup(c)?;
            c.expect_keyword("axes")?;
            let axes = c.parse_dims()?;
            reductions.push(Reduction { op, value, axes, buf });
        } else {
            let what = if stores.is_empty() && reductions.is_empty() {
                "an instruction `%N = ...`, `store`, `reduce` or `}`"
            } else {
                "`store`, `reduce` or `}`"
            };
            return Err(c.expected(what));
        }
    }
    Ok(MirKernel {
        name,
        domain,
        body,
        stores,
        reductions,
    })
}

fn parse_inst(
    c: &mut Cursor<'_>,
    labels: &BufferLabels<'_>,
    values: &ValueNames<'_>,
) -> Result<MirInst, ParseError> {
    let op_tok = c.expect_ident("an op name")?;
    let (op, args) = match op_tok.text {
        "load" => {
            let buf = labels.lookup(c)?;
            let strides = c.parse_dims()?;
            let offset = if c.eat_keyword("offset") {
                c.expect_usize("an element offset")?
            } else {
                0
            };
            (MirOp::Load { buf, strides, offset }, Vec::new())
        }
        "gather" => {
            let buf = labels.lookup(c)?;
            (MirOp::Gather { buf }, vec![values.lookup(c)?])
        }
        "index" => (
            MirOp::Index {
                strides: c.parse_dims()?,
            },
            Vec::new(),
        ),
        "const" => {
            let literal = c.expect_literal()?;
            c.expect_punct(":")?;
            let dtype = c.parse_dtype()?;
            let value = parse_literal(literal, dtype)?;
            return Ok(MirInst {
                op: MirOp::Const(value),
                args: Vec::new(),
                dtype,
            });
        }
        name if ScanOp::from_name(name).is_some() => {
            let mut args = vec![values.lookup(c)?];
            while c.eat_punct(",") {
                args.push(values.lookup(c)?);
            }
            c.expect_keyword("axis")?;
            let axis = c.expect_usize("an axis")?;
            let reverse = c.eat_keyword("reverse");
            let op = ScanOp::from_name(name).map(|op| MirOp::Scan { op, axis, reverse });
            (op.ok_or_else(|| Cursor::error_at(op_tok, "a scan"))?, args)
        }
        name => {
            let op = op_from_name(name).ok_or_else(|| Cursor::error_at(op_tok, "an op name"))?;
            let mut args = vec![values.lookup(c)?];
            while c.eat_punct(",") {
                args.push(values.lookup(c)?);
            }
            (op, args)
        }
    };
    c.expect_punct(":")?;
    let dtype = c.parse_dtype()?;
    Ok(MirInst { op, args, dtype })
}

/// The elementwise op (other than `load` and `const`) named `name`.
fn op_from_name(name: &str) -> Option<MirOp> {
    match name {
        "select" => Some(MirOp::Select),
        "cast" => Some(MirOp::Cast),
        _ => UnaryOp::from_name(name)
            .map(MirOp::Unary)
            .or_else(|| BinaryOp::from_name(name).map(MirOp::Binary))
            .or_else(|| CmpOp::from_name(name).map(MirOp::Compare)),
    }
}

/// Parses a reduction name.
pub(crate) fn parse_reduce_op(c: &mut Cursor<'_>) -> Result<ReduceOp, ParseError> {
    let tok = c.peek();
    match (tok.kind, ReduceOp::from_name(tok.text)) {
        (TokenKind::Ident, Some(op)) => {
            c.bump();
            Ok(op)
        }
        _ => Err(c.expected("a reduction (`sum`, `prod`, `max`, `min` or `mean`)")),
    }
}

/// Reads a literal token in `dtype`.
pub(crate) fn parse_literal(tok: Token<'_>, dtype: DType) -> Result<crate::Scalar, ParseError> {
    parse_scalar(tok.text, dtype).ok_or_else(|| Cursor::error_at(tok, &format!("a {dtype} literal")))
}

/// Buffer labels seen so far, mapped to dense buffer ids in declaration order.
#[derive(Default)]
pub(crate) struct BufferLabels<'a> {
    ids: HashMap<&'a str, BufId>,
}

impl<'a> BufferLabels<'a> {
    /// Declares `label` as buffer number `index`.
    pub(crate) fn declare(&mut self, label: Token<'a>, index: usize) -> Result<(), ParseError> {
        if self.ids.insert(label.text, BufId::new(index)).is_some() {
            return Err(Cursor::message_at(
                label,
                format!("buffer `{}` is declared twice", label.text),
            ));
        }
        Ok(())
    }

    /// Consumes a buffer label and returns its id.
    pub(crate) fn lookup(&self, c: &mut Cursor<'_>) -> Result<BufId, ParseError> {
        let tok = c.peek();
        match self.ids.get(tok.text) {
            Some(&id) if tok.kind == TokenKind::Ident => {
                c.bump();
                Ok(id)
            }
            _ => Err(c.expected("a declared buffer")),
        }
    }
}

/// Value names of one kernel, mapped to dense ids in definition order.
#[derive(Default)]
struct ValueNames<'a> {
    ids: HashMap<&'a str, MirValue>,
}

impl<'a> ValueNames<'a> {
    fn define(&mut self, name: Token<'a>, index: usize) -> Result<(), ParseError> {
        if self.ids.insert(name.text, MirValue::new(index)).is_some() {
            return Err(Cursor::message_at(
                name,
                format!("value `{}` is defined twice", name.text),
            ));
        }
        Ok(())
    }

    fn lookup(&self, c: &mut Cursor<'_>) -> Result<MirValue, ParseError> {
        let tok = c.peek();
        match self.ids.get(tok.text) {
            Some(&id) if tok.kind == TokenKind::Value => {
                c.bump();
                Ok(id)
            }
            _ => Err(c.expected("a defined value")),
        }
    }
}
