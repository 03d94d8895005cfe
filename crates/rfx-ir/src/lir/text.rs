//! The LIR text format: printing and parsing.
//!
//! ```text
//! program  := "lir" NAME "arena" INT "align" INT "{" buffer* kernel* loop* "}"
//! buffer   := LABEL ":" TYPE "=" ("input" NAME | "output" NAME | "arena" INT)
//! kernel   := "kernel" NAME "dims" DIMS "reduce" INT "vector" INT "thread_min" INT "tile" INT "lanes" INT
//!             ["tree"] ["scan" ("forward" | "reverse")]
//!             "{" "slots" "[" (DTYPE ("," DTYPE)*)? "]" "preamble" block "body" block
//!             ["row" LABEL "at" SLOT "rows" INT "stride" INT] "}"
//! block    := "{" inst* "}"
//! inst     := SLOT "=" "load" LABEL DIMS | SLOT "=" "index" DIMS | SLOT "=" "const" LITERAL
//!           | SLOT "=" OPNAME SLOT ("," SLOT)* | "store" LABEL DIMS "=" SLOT
//!           | "reduce" REDUCEOP LABEL "=" SLOT | SLOT "=" SCANOP SLOT
//! loop     := "loop" "kernels" FIRST ".." END "trips" INT ["exit" LABEL]
//! ```
//!
//! The `loop` lines come after the kernels, as in the MIR format.
//!
//! Slots are written `sN` and refer to entry `N` of the kernel's `slots` list; a `const`
//! literal is read in its destination slot's dtype, and `cast` converts to its destination
//! slot's dtype. Buffer labels are renamed densely in declaration order.

use std::fmt::{self, Write as _};

use super::{
    Inst, LirBuffer, LirKernel, LirProgram, RowStore, ScanOrder, Schedule, SlotId, Storage, VerifyLocation,
};
use crate::error::ParseError;
use crate::ids::{write_index_list, write_list};
use crate::mir::text::{BufferLabels, parse_literal, parse_loop, parse_reduce_op, write_loop};
use crate::ops::{BinaryOp, CmpOp, ScanOp, UnaryOp};
use crate::text::{Cursor, TokenKind};
use crate::{BufId, DType};

/// Writes the program; after each line, writes one `# error: ...` line for each note that
/// `notes` returns for the line's location.
pub(crate) fn print_program(
    out: &mut String,
    program: &LirProgram,
    notes: &dyn Fn(&VerifyLocation) -> Vec<String>,
) -> fmt::Result {
    let annotate = |out: &mut String, loc: VerifyLocation, indent: &str| -> fmt::Result {
        for note in notes(&loc) {
            writeln!(out, "{indent}# error: {note}")?;
        }
        Ok(())
    };
    writeln!(
        out,
        "lir {} arena {} align {} {{",
        program.name(),
        program.arena_bytes(),
        program.arena_align()
    )?;
    annotate(out, VerifyLocation::Program, "  ")?;
    for (i, buffer) in program.buffers().iter().enumerate() {
        let id = BufId::new(i);
        write!(out, "  {id}: {} = ", buffer.ty)?;
        match &buffer.storage {
            Storage::Input { name } => writeln!(out, "input {name}")?,
            Storage::Output { name } => writeln!(out, "output {name}")?,
            Storage::Arena { offset } => writeln!(out, "arena {offset}")?,
            Storage::Literal { values } => {
                out.push_str("literal ");
                crate::text::write_literals(out, values)?;
                out.push('\n');
            }
        }
        annotate(out, VerifyLocation::Buffer(id), "  ")?;
    }
    for (k, kernel) in program.kernels().iter().enumerate() {
        let Schedule {
            vector_width,
            min_elems_per_thread,
            tile,
            reduce_lanes,
            gpu_tree,
        } = kernel.schedule;
        write!(out, "  kernel {} dims ", kernel.name)?;
        write_index_list(out, &kernel.dims)?;
        write!(
            out,
            " reduce {} vector {vector_width} thread_min {min_elems_per_thread} tile {tile} lanes {reduce_lanes}",
            kernel.reduce_dims
        )?;
        if gpu_tree {
            out.push_str(" tree");
        }
        if let Some(order) = kernel.scan {
            write!(out, " scan {}", order.name())?;
        }
        out.push_str(" {\n");
        annotate(out, VerifyLocation::Kernel { kernel: k }, "    ")?;
        out.push_str("    slots [");
        write_list(out, &kernel.slots)?;
        out.push_str("]\n");
        for (section, insts) in [("preamble", &kernel.preamble), ("body", &kernel.body)] {
            if insts.is_empty() {
                writeln!(out, "    {section} {{}}")?;
                continue;
            }
            writeln!(out, "    {section} {{")?;
            for (index, inst) in insts.iter().enumerate() {
                out.push_str("      ");
                write_inst(out, inst)?;
                out.push('\n');
                let loc = if section == "preamble" {
                    VerifyLocation::Preamble { kernel: k, index }
                } else {
                    VerifyLocation::Body { kernel: k, index }
                };
                annotate(out, loc, "      ")?;
            }
            writeln!(out, "    }}")?;
        }
        if let Some(row) = &kernel.row_store {
            writeln!(
                out,
                "    row {} at {} rows {} stride {}",
                row.buf, row.index, row.rows, row.stride
            )?;
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

fn write_inst(out: &mut String, inst: &Inst) -> fmt::Result {
    match inst {
        Inst::Load {
            dst,
            buf,
            strides,
            offset,
        } => {
            write!(out, "{dst} = load {buf} ")?;
            write_index_list(out, strides)?;
            if *offset != 0 {
                write!(out, " offset {offset}")?;
            }
            Ok(())
        }
        Inst::Gather { dst, buf, index } => write!(out, "{dst} = gather {buf} {index}"),
        Inst::Index { dst, strides } => {
            write!(out, "{dst} = index ")?;
            write_index_list(out, strides)
        }
        Inst::Const { dst, value } => write!(out, "{dst} = const {value}"),
        Inst::Unary { dst, op, src } => write!(out, "{dst} = {op} {src}"),
        Inst::Binary { dst, op, lhs, rhs } => write!(out, "{dst} = {op} {lhs}, {rhs}"),
        Inst::Compare { dst, op, lhs, rhs } => write!(out, "{dst} = {op} {lhs}, {rhs}"),
        Inst::Select {
            dst,
            cond,
            on_true,
            on_false,
        } => {
            write!(out, "{dst} = select {cond}, {on_true}, {on_false}")
        }
        Inst::Cast { dst, src } => write!(out, "{dst} = cast {src}"),
        Inst::Store {
            buf,
            strides,
            offset,
            src,
        } => {
            write!(out, "store {buf} ")?;
            write_index_list(out, strides)?;
            if *offset != 0 {
                write!(out, " offset {offset}")?;
            }
            write!(out, " = {src}")
        }
        Inst::Reduce { op, buf, src } => write!(out, "reduce {op} {buf} = {src}"),
        Inst::Scan { dst, op, src, coef } => {
            write!(out, "{dst} = {op} {src}")?;
            match coef {
                Some(coef) => write!(out, ", {coef}"),
                None => Ok(()),
            }
        }
    }
}

/// Parses a program in the LIR text format (see the module docs for the grammar).
///
/// The result is not verified: run [`super::verify`] on it. Errors carry the 1-based line and
/// column of the offending token.
pub fn parse(src: &str) -> Result<LirProgram, ParseError> {
    let mut c = Cursor::new(src)?;
    c.expect_keyword("lir")?;
    let name = c.expect_ident("a program name")?.text.to_string();
    c.expect_keyword("arena")?;
    let arena_bytes = c.expect_usize("an arena size in bytes")?;
    c.expect_keyword("align")?;
    let arena_align = c.expect_usize("an arena alignment in bytes")?;
    c.expect_punct("{")?;
    let mut labels = BufferLabels::default();
    let mut buffers = Vec::new();
    while c.peek().kind == TokenKind::Ident && c.peek2().text == ":" {
        let label = c.bump();
        labels.declare(label, buffers.len())?;
        c.expect_punct(":")?;
        let ty = c.parse_tensor_type()?;
        c.expect_punct("=")?;
        let storage = if c.eat_keyword("input") {
            Storage::Input {
                name: c.expect_ident("an input name")?.text.to_string(),
            }
        } else if c.eat_keyword("output") {
            Storage::Output {
                name: c.expect_ident("an output name")?.text.to_string(),
            }
        } else if c.eat_keyword("arena") {
            Storage::Arena {
                offset: c.expect_usize("an arena offset in bytes")?,
            }
        } else if c.eat_keyword("literal") {
            let tokens = c.parse_literal_list()?;
            Storage::Literal {
                values: crate::text::typed_literals(&tokens, ty.dtype)?,
            }
        } else {
            return Err(c.expected("`input`, `output`, `arena` or `literal`"));
        };
        buffers.push(LirBuffer { ty, storage });
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
    Ok(LirProgram::from_parts(name, buffers, arena_bytes, arena_align, kernels).with_loops(loops))
}

fn parse_kernel(c: &mut Cursor<'_>, labels: &BufferLabels<'_>) -> Result<LirKernel, ParseError> {
    c.expect_keyword("kernel")?;
    let name = c.expect_ident("a kernel name")?.text.to_string();
    c.expect_keyword("dims")?;
    let dims = c.parse_dims()?;
    c.expect_keyword("reduce")?;
    let reduce_dims = c.expect_usize("a count of reduced dims")?;
    c.expect_keyword("vector")?;
    let width_tok = c.peek();
    let vector_width = u32::try_from(c.expect_usize("a vector width")?)
        .map_err(|_| Cursor::message_at(width_tok, "vector width is too large"))?;
    c.expect_keyword("thread_min")?;
    let min_elems_per_thread = c.expect_usize("a minimum of points per thread")?;
    c.expect_keyword("tile")?;
    let tile = c.expect_usize("a tile size")?;
    c.expect_keyword("lanes")?;
    let lanes_tok = c.peek();
    let reduce_lanes = u32::try_from(c.expect_usize("a count of reduction lanes")?)
        .map_err(|_| Cursor::message_at(lanes_tok, "reduction lane count is too large"))?;
    let gpu_tree = c.eat_keyword("tree");
    let scan = if c.eat_keyword("scan") {
        if c.eat_keyword("forward") {
            Some(ScanOrder::Forward)
        } else if c.eat_keyword("reverse") {
            Some(ScanOrder::Reverse)
        } else {
            return Err(c.expected("`forward` or `reverse`"));
        }
    } else {
        None
    };
    c.expect_punct("{")?;
    c.expect_keyword("slots")?;
    c.expect_punct("[")?;
    let mut slots = Vec::new();
    if !c.eat_punct("]") {
        loop {
            slots.push(c.parse_dtype()?);
            if c.eat_punct("]") {
                break;
            }
            c.expect_punct(",")?;
        }
    }
    c.expect_keyword("preamble")?;
    let preamble = parse_block(c, labels, &slots)?;
    c.expect_keyword("body")?;
    let body = parse_block(c, labels, &slots)?;
    let row_store = if c.eat_keyword("row") {
        let buf = labels.lookup(c)?;
        c.expect_keyword("at")?;
        let index = parse_slot(c, &slots)?;
        c.expect_keyword("rows")?;
        let rows = c.expect_usize("a row count")?;
        c.expect_keyword("stride")?;
        let stride = c.expect_usize("a row stride")?;
        Some(RowStore {
            buf,
            index,
            rows,
            stride,
        })
    } else {
        None
    };
    c.expect_punct("}")?;
    let schedule = Schedule {
        vector_width,
        min_elems_per_thread,
        tile,
        reduce_lanes,
        gpu_tree,
    };
    Ok(LirKernel {
        name,
        dims,
        reduce_dims,
        scan,
        schedule,
        slots,
        preamble,
        body,
        row_store,
    })
}

fn parse_block(
    c: &mut Cursor<'_>,
    labels: &BufferLabels<'_>,
    slots: &[DType],
) -> Result<Vec<Inst>, ParseError> {
    c.expect_punct("{")?;
    let mut insts = Vec::new();
    while !c.eat_punct("}") {
        insts.push(parse_inst(c, labels, slots)?);
    }
    Ok(insts)
}

fn parse_inst(c: &mut Cursor<'_>, labels: &BufferLabels<'_>, slots: &[DType]) -> Result<Inst, ParseError> {
    if c.eat_keyword("store") {
        let buf = labels.lookup(c)?;
        let strides = c.parse_dims()?;
        let offset = if c.eat_keyword("offset") {
            c.expect_usize("an element offset")?
        } else {
            0
        };
        c.expect_punct("=")?;
        let src = parse_slot(c, slots)?;
        return Ok(Inst::Store {
            buf,
            strides,
            offset,
            src,
        });
    }
    if c.eat_keyword("reduce") {
        let op = parse_reduce_op(c)?;
        let buf = labels.lookup(c)?;
        c.expect_punct("=")?;
        let src = parse_slot(c, slots)?;
        return Ok(Inst::Reduce { op, buf, src });
    }
    if slot_index(c.peek().text).is_none() || c.peek().kind != TokenKind::Ident {
        return Err(c.expected("an instruction (`sN = ...`, `store`, `reduce`) or `}`"));
    }
    let dst = parse_slot(c, slots)?;
    c.expect_punct("=")?;
    let op_tok = c.expect_ident("an op name")?;
    let inst = match op_tok.text {
        "load" => {
            let buf = labels.lookup(c)?;
            let strides = c.parse_dims()?;
            let offset = if c.eat_keyword("offset") {
                c.expect_usize("an element offset")?
            } else {
                0
            };
            Inst::Load {
                dst,
                buf,
                strides,
                offset,
            }
        }
        "gather" => {
            let buf = labels.lookup(c)?;
            Inst::Gather {
                dst,
                buf,
                index: parse_slot(c, slots)?,
            }
        }
        "index" => Inst::Index {
            dst,
            strides: c.parse_dims()?,
        },
        "const" => {
            let literal = c.expect_literal()?;
            // `parse_slot` checked the index.
            let dtype = slots.get(dst.index()).copied().unwrap_or(DType::F32);
            Inst::Const {
                dst,
                value: parse_literal(literal, dtype)?,
            }
        }
        "cast" => Inst::Cast {
            dst,
            src: parse_slot(c, slots)?,
        },
        "select" => {
            let cond = parse_slot(c, slots)?;
            c.expect_punct(",")?;
            let on_true = parse_slot(c, slots)?;
            c.expect_punct(",")?;
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false: parse_slot(c, slots)?,
            }
        }
        name => {
            if let Some(op) = UnaryOp::from_name(name) {
                Inst::Unary {
                    dst,
                    op,
                    src: parse_slot(c, slots)?,
                }
            } else if let Some(op) = BinaryOp::from_name(name) {
                let lhs = parse_slot(c, slots)?;
                c.expect_punct(",")?;
                Inst::Binary {
                    dst,
                    op,
                    lhs,
                    rhs: parse_slot(c, slots)?,
                }
            } else if let Some(op) = CmpOp::from_name(name) {
                let lhs = parse_slot(c, slots)?;
                c.expect_punct(",")?;
                Inst::Compare {
                    dst,
                    op,
                    lhs,
                    rhs: parse_slot(c, slots)?,
                }
            } else if let Some(op) = ScanOp::from_name(name) {
                let src = parse_slot(c, slots)?;
                let coef = if op.arity() > 1 {
                    c.expect_punct(",")?;
                    Some(parse_slot(c, slots)?)
                } else {
                    None
                };
                Inst::Scan { dst, op, src, coef }
            } else {
                return Err(Cursor::error_at(op_tok, "an op name"));
            }
        }
    };
    Ok(inst)
}

/// `Some(N)` for the text `sN` (decimal digits, no sign).
fn slot_index(text: &str) -> Option<usize> {
    let digits = text.strip_prefix('s')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Consumes a slot `sN` with `N` below the number of declared slots.
fn parse_slot(c: &mut Cursor<'_>, slots: &[DType]) -> Result<SlotId, ParseError> {
    let tok = c.peek();
    match slot_index(tok.text) {
        Some(index) if tok.kind == TokenKind::Ident && index < slots.len() => {
            c.bump();
            Ok(SlotId::new(index))
        }
        _ => Err(c.expected(&format!("a declared slot `sN` (N < {})", slots.len()))),
    }
}
