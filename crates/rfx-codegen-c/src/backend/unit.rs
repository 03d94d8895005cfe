//! The translation unit the `"c"` backend compiles: the exported C of several programs, each
//! under a name of its own, and a packed entry per program with one fixed signature.

use std::fmt::Write as _;

use rfx_ir::lir::LirProgram;

use crate::{CExport, ExportError, c_source, c_type};

/// The C function name of the `index`-th program of a unit.
pub(crate) fn function_name(index: usize) -> String {
    format!("rfx_jit_{index}")
}

/// The packed entry of the `index`-th program: the symbol the backend loads.
pub(crate) fn entry_name(index: usize) -> String {
    format!("{}_packed", function_name(index))
}

/// One program's part of a unit: its header (written beside the unit, which includes it by
/// name) and its source followed by its packed entry.
pub(crate) struct UnitPart {
    /// `rfx_jit_K.h`.
    pub(crate) header_file: String,
    pub(crate) header: String,
    pub(crate) source: String,
}

/// Exports `program` as function `rfx_jit_{index}` and appends its packed entry:
///
/// ```c
/// int rfx_jit_K_packed(void *const *args) { return rfx_jit_K((const T *)args[0], ..., args[N]); }
/// ```
///
/// `args` holds the inputs' and outputs' first elements in call order, then `work`. The entry
/// exists only in the JIT's unit; the exported files are [`c_source`]'s.
pub(crate) fn part(program: &LirProgram, index: usize) -> Result<UnitPart, ExportError> {
    let name = function_name(index);
    let CExport { header, mut source } = c_source(program, &name)?;
    let mut params = Vec::new();
    let mut slot = 0usize;
    for (_, _, ty) in program.inputs() {
        params.push(format!("(const {} *)args[{slot}]", c_type(ty.dtype)));
        slot += 1;
    }
    for (_, _, ty) in program.outputs() {
        params.push(format!("({} *)args[{slot}]", c_type(ty.dtype)));
        slot += 1;
    }
    params.push(format!("args[{slot}]"));
    let _ = write!(
        source,
        "\nint {}(void *const *args);\nint {}(void *const *args) {{\n  return {name}({});\n}}\n",
        entry_name(index),
        entry_name(index),
        params.join(", ")
    );
    Ok(UnitPart {
        header_file: format!("{name}.h"),
        header,
        source,
    })
}

/// The unit's text: every part's source, one after the other (each includes its own header;
/// helpers, literal tables and functions are prefixed by their function's name, so parts
/// never clash).
pub(crate) fn unit_source(parts: &[&UnitPart]) -> String {
    let mut text = String::from("/* rfx \"c\" backend: exported programs and their packed entries. */\n");
    for part in parts {
        text.push('\n');
        text.push_str(&part.source);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `y = x * 2` (f32) and `m = -n` (i32): the entry casts each slot to its argument's type.
    #[test]
    fn the_packed_entry_casts_each_slot_in_call_order() {
        let mir = rfx_ir::mir::parse(
            "mir m {\n  buf0: f32[3] = input x\n  buf1: i32[2] = input n\n  buf2: f32[3] = output y\n  buf3: i32[2] = output m\n  kernel k0 [3] {\n    %0 = load buf0 [1] : f32\n    %1 = add %0, %0 : f32\n    store buf2 = %1\n  }\n  kernel k1 [2] {\n    %0 = load buf1 [1] : i32\n    %1 = neg %0 : i32\n    store buf3 = %1\n  }\n}\n",
        )
        .expect("parses");
        let (lir, _) = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default()).expect("lowers");
        let part = part(&lir, 3).expect("exports");
        assert_eq!(part.header_file, "rfx_jit_3.h");
        assert!(part.source.contains("#include \"rfx_jit_3.h\""));
        assert!(
            part.source.ends_with(
                "int rfx_jit_3_packed(void *const *args) {\n  return rfx_jit_3((const float *)args[0], (const int32_t *)args[1], (float *)args[2], (int32_t *)args[3], args[4]);\n}\n"
            ),
            "{}",
            part.source
        );
    }
}
