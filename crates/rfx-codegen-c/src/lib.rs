//! Export of rfx kernels as portable C99 ([`c_source`]) and as `no_std` Rust ([`rust_source`]).
//!
//! [`c_source`] turns a lowered program ([`LirProgram`]) into a header and a source file with
//! one function of a fixed ABI:
//!
//! ```c
//! int NAME(const T *in_0, ..., T *out_0, ..., void *work);
//! ```
//!
//! inputs in the program's order, then outputs, then a work buffer of `NAME_WORK_BYTES` bytes
//! (a macro in the header, `NAME` upper-cased; `0` when the program has no temporaries, and
//! then `work` may be `NULL`). `T` is `float` for f32, `double` for f64, `int32_t` for i32 and
//! `uint8_t` (0 or 1; any non-zero input reads as true) for bool. The function returns 0, `1`
//! when a pointer it needs is null, and `2` when `work` is not aligned to `NAME_WORK_ALIGN`
//! bytes. It allocates nothing, has no mutable globals (literal data is `static const`), and is
//! re-entrant; the source needs C99 and `<stdint.h>` only.
//!
//! The code is a sequential walk of each kernel's loop nest in the order the LIR interpreter
//! ([`rfx_ir::interp::run_lir`]) defines, reductions included (the schedule's lanes and the
//! leaf tree of blocked reductions), so every op it emits gives the interpreter's bits when
//! compiled with IEEE-754 single and double arithmetic evaluated in its own type
//! (`FLT_EVAL_METHOD == 0`, checked at compile time with GCC and Clang) and without
//! floating-point contraction (`-ffp-contract=off`; ISO C modes such as `-std=c99` have it off
//! by default in GCC). Square root is `__builtin_sqrtf` / `__builtin_sqrt`, which GCC and Clang
//! compile to the hardware instruction with `-fno-math-errno` (without it they may call libm's
//! `sqrt` for negative arguments), or, on Arm targets without a double (single) precision FPU
//! or with `RFX_SOFT_SQRT` defined, an exact digit-by-digit integer square root; `floor`,
//! `ceil` and `round` are exact straight-line code, `abs` clears the sign bit. Nothing
//! needs libm.
//!
//! A program's loops over ranges of its kernels ([`rfx_ir::repeat`]) are `for` loops around
//! their kernels' blocks with the trip count as their one literal (the source for 10,000 trips
//! is the one for 100 with that literal changed), breaking after an iteration that leaves a
//! `while_loop`'s exit flag false; a loop of no trips is a comment.
//!
//! Every transcendental (`exp`, `exp2`, `log`, `log2`, `sin`, `cos`, `tan`, `tanh`, `atan`,
//! `asin`, `acos`, `sigmoid`, `erf`, `pow`, `atan2`) is `static inline` C within the CPU
//! backend's documented bound of 4 ULP of the `f64` oracle, in f32 and f64, over the whole
//! domain with C99's special values: the CPU backend's approximations ported to scalar C (the
//! same algorithms, coefficients and unfused operation order) where they need no `double` in
//! f32 code, fdlibm's float versions (`e_powf.c`, FreeBSD's `erf` in float) where the CPU
//! backend computes f32 in f64 lanes, and for `sin`, `cos` and `tan` an exact Payne–Hanek
//! argument reduction in integer arithmetic at every finite argument. f32 code uses no
//! `double` (but in the software `sqrt` for targets without a single-precision FPU), so it
//! needs no soft-float double helpers on a single-precision FPU. Float `fmod`
//! is exact (musl's integer long division). [`ExportError::Unsupported`] is kept for ops
//! added to the IR before the export learns them; no op of the IR is refused today.
//!
//! With the `backend` feature, `CBackend` is the JIT backend `"c"` (`rfx_lower::Backend`): the
//! exported C compiled by the system C compiler (`$CC`, else `cc`, with `JIT_FLAGS`) into a
//! shared object and loaded, so that the conformance suite and `rfx fuzz` run the generated
//! code; `CBackend::compile_many` compiles many programs with one compiler run. The feature
//! adds `libloading` and `tempfile`; the export alone depends on `rfx-ir`, `rfx-lower` and
//! `thiserror` only.
//!
//! [`rust_source`] prints the same walk of the program as a Rust module for a `#![no_std]`
//! crate ([`RustExport`]): `pub fn NAME(in_0: &[T], ..., out_0: &mut [T], ..., work: &mut Work)
//! -> Result<(), Error>` with `T` one of `f32`, `f64`, `i32`, `bool`, an `Error` enum for slices
//! of the wrong length (checked before anything is written) and a `Work` struct of one
//! fixed-size array per element type, so the work space can be neither too small nor
//! misaligned. The module has no `unsafe`, allocates nothing and needs `core` only, plus the
//! `libm` crate ([`LIBM_VERSION`] or later) where it calls a function `core` lacks on stable
//! Rust: `sqrt`, `floor`, `ceil`, `roundeven`, the transcendentals, `pow`, `atan2`, float
//! `fmod` (so the Rust export supports every op; its transcendentals are `libm`'s, within a
//! few ULP but not the CPU backend's bits). Exact ops give the interpreter's bits, as in C.

#[cfg(feature = "backend")]
mod backend;
mod emit;
mod helpers;
mod rust;
mod walk;

#[cfg(feature = "backend")]
pub use backend::{CBackend, CCompiled, JIT_FLAGS};

pub use rust::{LIBM_VERSION, RustExport, rust_source, validate_rust_name};

use std::fmt::Write as _;

use rfx_ir::lir::LirProgram;
use rfx_ir::{DType, TensorType};

/// The generated files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CExport {
    /// `NAME.h`: the ABI, the work-buffer macros and the prototype.
    pub header: String,
    /// `NAME.c`: the implementation; it includes `"NAME.h"`.
    pub source: String,
}

/// Why a program cannot be exported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The function name is not a C identifier (ASCII letters, digits and `_`, not starting
    /// with a digit) or is a C keyword.
    #[error(
        "`{0}` is not a valid C function name (letters, digits and `_`, not starting with a digit, no keyword)"
    )]
    InvalidName(String),
    /// The function name is not a Rust identifier for the Rust export (ASCII letters, digits
    /// and `_`, not starting with a digit, at most 63 characters), is a Rust keyword, or starts
    /// with `rfx_` (the module's own items use that prefix).
    #[error(
        "`{0}` is not a valid Rust function name (letters, digits and `_`, not starting with a digit, no keyword, no `rfx_` prefix)"
    )]
    InvalidRustName(String),
    /// The program uses an op the C export cannot emit within its documented accuracy. Every op
    /// of the IR is exported today; the variant stays for ops added to the IR before the
    /// export supports them.
    #[error("the C export does not support `{0}` yet")]
    Unsupported(String),
    /// The program fails LIR verification.
    #[error("invalid LIR program: {0}")]
    InvalidProgram(String),
}

const C_KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Bool",
    "_Complex",
    "_Imaginary",
    "main",
];

/// The GCC and Clang flags the generated source is tested with on the host: it compiles
/// without a warning under them, and `-ffp-contract=off` and `-fno-math-errno` are the ones the
/// numeric guarantees need (docs/export.md).
pub const TESTED_FLAGS: &[&str] = &[
    "-std=c99",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-ffp-contract=off",
    "-fno-math-errno",
];

/// Checks that `name` can be the exported C function's name.
pub fn validate_name(name: &str) -> Result<(), ExportError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !first_ok || !rest_ok || C_KEYWORDS.contains(&name) || name.len() > 63 {
        return Err(ExportError::InvalidName(name.to_string()));
    }
    Ok(())
}

/// The C type of a buffer element of `dtype`.
pub fn c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "uint8_t",
        DType::I32 => "int32_t",
        DType::F32 => "float",
        DType::F64 => "double",
    }
}

/// Exports `program` as C99: a function called `name` with the ABI in the crate docs.
pub fn c_source(program: &LirProgram, name: &str) -> Result<CExport, ExportError> {
    validate_name(name)?;
    rfx_ir::lir::verify(program).map_err(|e| ExportError::InvalidProgram(e.to_string()))?;
    let body = emit::emit_program(program, name)?;
    Ok(CExport {
        header: header(program, name),
        source: body,
    })
}

fn describe(ty: &TensorType) -> String {
    let dims: Vec<String> = ty.shape.dims().iter().map(ToString::to_string).collect();
    format!(
        "{}[{}] ({} elements)",
        ty.dtype,
        dims.join(", "),
        ty.shape.numel()
    )
}

/// Where each arena buffer lives in the work buffer, and the work buffer's size.
///
/// The program's memory plan is kept when every two arena buffers whose bytes overlap have the
/// same dtype (or one of them is bool, a character type in C). Otherwise each arena buffer gets
/// bytes of its own: C's effective-type rules would let a compiler reorder a `float` access
/// and an `int32_t` access to the same bytes, so reused bytes must keep one type.
pub(crate) struct WorkLayout {
    /// Byte offset per buffer (`None` for buffers not in the arena).
    pub(crate) offsets: Vec<Option<usize>>,
    pub(crate) bytes: usize,
}

pub(crate) fn work_layout(program: &LirProgram) -> WorkLayout {
    use rfx_ir::lir::Storage;
    let arena: Vec<(usize, usize, usize, DType)> = program
        .buffers()
        .iter()
        .enumerate()
        .filter_map(|(i, b)| match b.storage {
            Storage::Arena { offset } if touched(program, i) => Some((
                i,
                offset,
                b.ty.shape.numel() * b.ty.dtype.size_bytes(),
                b.ty.dtype,
            )),
            _ => None,
        })
        .collect();
    let conflict = arena.iter().enumerate().any(|(n, &(_, a0, alen, at))| {
        arena[n + 1..].iter().any(|&(_, b0, blen, bt)| {
            at != bt && at != DType::Bool && bt != DType::Bool && a0 < b0 + blen && b0 < a0 + alen
        })
    });
    let mut offsets = vec![None; program.buffers().len()];
    if !conflict {
        for &(i, offset, _, _) in &arena {
            offsets[i] = Some(offset);
        }
        return WorkLayout {
            offsets,
            bytes: program.arena_bytes(),
        };
    }
    let mut end = 0usize;
    for &(i, _, len, _) in &arena {
        offsets[i] = Some(end);
        end = (end + len).next_multiple_of(8);
    }
    WorkLayout { offsets, bytes: end }
}

/// Whether a kernel reads or writes buffer `index` (lowering leaves a temporary whose kernels
/// were folded into others untouched; it gets no room in `work`).
pub(crate) fn touched(program: &LirProgram, index: usize) -> bool {
    program.kernels().iter().any(|k| {
        k.preamble
            .iter()
            .chain(&k.body)
            .any(|i| i.buf().is_some_and(|b| b.index() == index))
    })
}

/// The work buffer's alignment: the arena's, at least 8 so that every dtype is aligned.
fn work_align(program: &LirProgram) -> usize {
    program.arena_align().max(8)
}

fn header(program: &LirProgram, name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    let mut h = String::new();
    let _ = writeln!(
        h,
        "/* {name}.h: rfx program `{}` exported as C99. */",
        program.name()
    );
    let _ = writeln!(h, "#ifndef RFX_EXPORT_{upper}_H");
    let _ = writeln!(h, "#define RFX_EXPORT_{upper}_H\n");
    h.push_str("#include <stdint.h>\n\n");
    h.push_str("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
    let _ = writeln!(
        h,
        "/* Bytes of the work buffer `work` (0: none is needed and `work` may be NULL). */"
    );
    let _ = writeln!(h, "#define {upper}_WORK_BYTES {}u", work_layout(program).bytes);
    let _ = writeln!(h, "/* Alignment in bytes `work` must have. */");
    let _ = writeln!(h, "#define {upper}_WORK_ALIGN {}u\n", work_align(program));
    h.push_str("/*\n");
    let _ = writeln!(h, " * int {name}(inputs..., outputs..., void *work);");
    h.push_str(" *\n * Arrays are dense and row-major; element types: float (f32), double (f64),\n");
    h.push_str(" * int32_t (i32), uint8_t 0/1 (bool; a non-zero input reads as true).\n *\n");
    for (i, (_, input, ty)) in program.inputs().enumerate() {
        let _ = writeln!(h, " * in_{i}:  input `{input}`, {}", describe(ty));
    }
    for (i, (_, output, ty)) in program.outputs().enumerate() {
        let _ = writeln!(h, " * out_{i}: output `{output}`, {}", describe(ty));
    }
    let _ = writeln!(
        h,
        " * work:  {upper}_WORK_BYTES bytes of scratch aligned to {upper}_WORK_ALIGN (contents on\n *        entry do not matter; overwritten)."
    );
    h.push_str(" *\n * Aliasing: no output may overlap an input, another output or `work`; inputs\n");
    h.push_str(" * may overlap each other (they are only read).\n");
    h.push_str(" * Returns 0; 1 when an array pointer (or `work` while WORK_BYTES > 0) is NULL,\n");
    h.push_str(" * 2 when `work` is misaligned. Nothing is written when it returns non-zero.\n");
    h.push_str(" * No allocation, no mutable globals: re-entrant and thread-safe.\n */\n");
    let _ = writeln!(h, "{};\n", emit::signature(program, name));
    h.push_str("#ifdef __cplusplus\n}\n#endif\n\n");
    let _ = writeln!(h, "#endif /* RFX_EXPORT_{upper}_H */");
    h
}
