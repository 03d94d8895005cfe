//! Proves that the HIR, MIR and LIR verifiers really raise each listed `VerifyErrorKind`: every
//! case breaks one thing in a valid program and checks that the verifier reports that kind.

use std::fmt::{Debug, Display};

use rfx_ir::lir::{self, Inst, LirKernel, LirProgram, SlotId};
use rfx_ir::mir::{self, MirKernel, MirOp, MirProgram, MirValue};
use rfx_ir::{BufId, ParseError, hir};

/// How a case's malformed program is made from its level's valid base program.
enum Source<P> {
    /// The base text with each `(from, to)` edit applied; each `from` occurs exactly once.
    Text(&'static [(&'static str, &'static str)]),
    /// The parsed base program changed through the public API, for breakage that the text
    /// parser itself rejects.
    Api(fn(P) -> P),
}

/// One malformed program and the error kind the verifier must report for it.
struct Case<P, K> {
    /// The expected kind's pattern, as written in the source.
    name: &'static str,
    source: Source<P>,
    expected: fn(&K) -> bool,
}

/// A case expecting the kinds that match `$kind`, a pattern naming one `VerifyErrorKind` variant.
macro_rules! case {
    ($source:expr, $kind:pat) => {
        Case {
            name: stringify!($kind),
            source: $source,
            expected: |kind| matches!(kind, $kind),
        }
    };
}

/// Applies `edits` to `base`, failing if some `from` does not occur exactly once.
fn apply_edits(base: &str, edits: &[(&str, &str)]) -> Result<String, String> {
    let mut text = base.to_string();
    for &(from, to) in edits {
        match text.matches(from).count() {
            1 => text = text.replacen(from, to, 1),
            n => return Err(format!("edit source {from:?} occurs {n} times instead of once")),
        }
    }
    Ok(text)
}

/// Runs every case of one level and panics with a list of the cases whose program did not
/// produce the expected kind (and what the verifier said instead).
fn check_cases<P: Display, K: Debug>(
    level: &str,
    base: &str,
    parse: fn(&str) -> Result<P, ParseError>,
    verify: fn(&P) -> Vec<K>,
    cases: &[Case<P, K>],
) {
    let mut failures = Vec::new();
    match parse(base) {
        Ok(program) => {
            let errors = verify(&program);
            if !errors.is_empty() {
                failures.push(format!("the valid base program fails to verify: {errors:?}"));
            }
        }
        Err(e) => failures.push(format!("the valid base program does not parse: {e}")),
    }
    for case in cases {
        let program = match &case.source {
            Source::Text(edits) => apply_edits(base, edits)
                .and_then(|text| parse(&text).map_err(|e| format!("does not parse: {e}\n{text}"))),
            Source::Api(change) => parse(base)
                .map(change)
                .map_err(|e| format!("base does not parse: {e}")),
        };
        match program {
            Ok(program) => {
                let errors = verify(&program);
                if !errors.iter().any(case.expected) {
                    failures.push(format!(
                        "{}: not reported; the verifier returned {errors:?} for\n{program}",
                        case.name
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{level}: {} of {} case(s) failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

const HIR_BASE: &str = "\
kernel base {
  %x = input x : f32[2,3]
  %y = sin %x : f32[2,3]
  %z = mul %y, %y : f32[2,3]
  %s = sum %z axes [0,1] : f32[]
  output out = %s
}
";

fn hir_errors(kernel: &hir::Kernel) -> Vec<hir::VerifyErrorKind> {
    hir::verify(kernel).map_or_else(
        |e| e.errors().iter().map(|e| e.kind.clone()).collect(),
        |()| Vec::new(),
    )
}

#[test]
fn hir_verifier_raises_each_kind() {
    use Source::Text;
    let cases: Vec<Case<hir::Kernel, hir::VerifyErrorKind>> = vec![
        // `%y` gets a wrong type, so `%z`, which uses it, has an invalid operand.
        case!(
            Text(&[("%y = sin %x : f32[2,3]", "%y = sin %x : f32[3]")]),
            hir::VerifyErrorKind::InvalidOperand(_)
        ),
        case!(
            Text(&[("axes [0,1]", "axes [1,0]")]),
            hir::VerifyErrorKind::UnsortedAxes
        ),
    ];
    check_cases("HIR", HIR_BASE, hir::parse_unverified, hir_errors, &cases);
}

/// Two kernels: `k0` fills a temp, `k1` reads it and an input, stores one output and reduces
/// into two more (one f32, one i32).
const MIR_BASE: &str = "\
mir base {
  buf0: f32[2,3] = input x
  buf1: i32[3] = input n
  buf2: f32[2,3] = temp
  buf3: f32[2,3] = output y
  buf4: f32[2] = output s
  buf5: i32[3] = output c
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    %1 = mul %0, %0 : f32
    store buf2 = %1
  }
  kernel k1 [2,3] {
    %0 = load buf2 [3,1] : f32
    %1 = load buf1 [0,1] : i32
    %2 = cast %1 : f32
    %3 = add %0, %2 : f32
    store buf3 = %3
    reduce sum buf4 = %3 axes [1]
    reduce sum buf5 = %1 axes [0]
  }
}
";

fn mir_errors(program: &MirProgram) -> Vec<mir::VerifyErrorKind> {
    mir::verify(program).map_or_else(
        |e| e.errors().iter().map(|e| e.kind.clone()).collect(),
        |()| Vec::new(),
    )
}

/// `program` with its kernels changed by `change`.
fn with_mir_kernels(program: MirProgram, change: impl FnOnce(&mut [MirKernel])) -> MirProgram {
    let mut kernels = program.kernels().to_vec();
    change(&mut kernels);
    MirProgram::from_parts(program.name(), program.buffers().to_vec(), kernels)
}

#[test]
fn mir_verifier_raises_each_kind() {
    use Source::{Api, Text};
    let cases: Vec<Case<MirProgram, mir::VerifyErrorKind>> = vec![
        case!(
            Text(&[("axes [1]", "axes [1,0]")]),
            mir::VerifyErrorKind::AxesNotSorted { .. }
        ),
        case!(
            Text(&[("axes [1]", "axes [2]")]),
            mir::VerifyErrorKind::AxisOutOfRange { .. }
        ),
        case!(
            Text(&[("input n", "input x")]),
            mir::VerifyErrorKind::DuplicateInputName(_)
        ),
        case!(
            Text(&[("output s", "output y")]),
            mir::VerifyErrorKind::DuplicateOutputName(_)
        ),
        case!(
            Text(&[("%1 = load buf1 [0,1] : i32", "%1 = load buf1 [0,1] : f32")]),
            mir::VerifyErrorKind::LoadDType { .. }
        ),
        case!(
            Text(&[("load buf0 [3,1]", "load buf0 [4,1]")]),
            mir::VerifyErrorKind::LoadOutOfBounds { .. }
        ),
        case!(
            Text(&[("store buf3 = %3", "store buf3 = %3\n    store buf3 = %3")]),
            mir::VerifyErrorKind::MultipleWrites { .. }
        ),
        case!(
            Text(&[("    reduce sum buf4 = %3 axes [1]\n", "")]),
            mir::VerifyErrorKind::OutputNotWritten(_)
        ),
        // `k0` reads the output that only the later `k1` writes.
        case!(
            Text(&[("load buf0 [3,1]", "load buf3 [3,1]")]),
            mir::VerifyErrorKind::ReadBeforeWrite(_)
        ),
        // `k1` reads the output it writes itself.
        case!(
            Text(&[("load buf2 [3,1]", "load buf3 [3,1]")]),
            mir::VerifyErrorKind::ReadOwnWrite(_)
        ),
        case!(
            Text(&[("reduce sum buf5", "reduce mean buf5")]),
            mir::VerifyErrorKind::ReduceDType { .. }
        ),
        case!(
            Text(&[("load buf0 [3,1]", "load buf0 [1]")]),
            mir::VerifyErrorKind::StrideCount { .. }
        ),
        // An `f32` index reaching 2^24 + 1, one past what `f32` counts exactly.
        case!(
            Text(&[("%1 = mul %0, %0 : f32", "%1 = index [16777217,0] : f32")]),
            mir::VerifyErrorKind::IndexRange { .. }
        ),
        case!(
            Text(&[("%1 = mul %0, %0 : f32", "%1 = index [1] : f32")]),
            mir::VerifyErrorKind::StrideCount { .. }
        ),
        // The parser only accepts declared buffer labels.
        case!(
            Api(|p| with_mir_kernels(p, |k| {
                k[1].body[1].op = MirOp::Load {
                    buf: BufId::new(9),
                    strides: vec![0, 1],
                    offset: 0,
                }
            })),
            mir::VerifyErrorKind::UnknownBuffer(_)
        ),
        // The parser only accepts values defined earlier: make `%1 = mul %0, %0` use itself.
        case!(
            Api(|p| with_mir_kernels(p, |k| k[0].body[1].args[0] = MirValue::new(1))),
            mir::VerifyErrorKind::UseBeforeDef(_)
        ),
        case!(
            Text(&[("store buf3 = %3", "store buf3 = %1")]),
            mir::VerifyErrorKind::WriteDType { .. }
        ),
        case!(
            Text(&[("buf4: f32[2]", "buf4: f32[3]")]),
            mir::VerifyErrorKind::WriteNumel { .. }
        ),
        case!(
            Text(&[("store buf3 = %3", "store buf0 = %3")]),
            mir::VerifyErrorKind::WriteToInput(_)
        ),
        // `k0` stores into what is now literal data.
        case!(
            Text(&[(
                "buf2: f32[2,3] = temp",
                "buf2: f32[2,3] = literal [1, 2, 3, 4, 5, 6]"
            )]),
            mir::VerifyErrorKind::WriteToLiteral(_)
        ),
        // `k0` scans its square along both axes.
        case!(
            Text(&[(
                "%1 = mul %0, %0 : f32\n",
                "%1 = cumsum %0 axis 1 : f32\n    %2 = cummax %1 axis 0 : f32\n"
            )]),
            mir::VerifyErrorKind::ScanMismatch { .. }
        ),
        case!(
            Text(&[(
                "%1 = mul %0, %0 : f32\n",
                "%1 = cumsum %0 axis 1 reverse : f32\n    %2 = cumsum %1 axis 1 : f32\n"
            )]),
            mir::VerifyErrorKind::ScanMismatch { .. }
        ),
        case!(
            Text(&[("%1 = mul %0, %0 : f32", "%1 = cumprod %0 axis 2 : f32")]),
            mir::VerifyErrorKind::AxisOutOfRange { .. }
        ),
        // `k1`, which reduces, also scans.
        case!(
            Text(&[("%3 = add %0, %2 : f32", "%3 = cumsum %0 axis 1 : f32")]),
            mir::VerifyErrorKind::ScanWithReduction
        ),
        // A region of a 2x3 domain with row stride 4 reaches element 6 + 2 = 8 of 6.
        case!(
            Text(&[("store buf2 = %1", "store buf2 [4,1] offset 2 = %1")]),
            mir::VerifyErrorKind::StoreOutOfBounds { .. }
        ),
        // The region writes row 0 twice (stride 0 along rows) and row 1 never.
        case!(
            Text(&[("store buf2 = %1", "store buf2 [0,1] = %1")]),
            mir::VerifyErrorKind::RegionCoverage { .. }
        ),
        case!(
            Text(&[("buf1: i32[3] = input n", "buf1: i32[3] = literal [1, 2]")]),
            mir::VerifyErrorKind::Type(rfx_ir::TypeError::LiteralLength {
                expected: 3,
                found: 2
            })
        ),
    ];
    check_cases("MIR", MIR_BASE, mir::parse, mir_errors, &cases);
}

/// Two kernels: `k0` (preamble load of a scalar input) fills an arena temp; `k1` (preamble
/// constant, one reduced dim, two reduce lanes) reads it, stores one output and reduces into two
/// more (one f32, one i32).
const LIR_BASE: &str = "\
lir base arena 32 align 16 {
  buf0: f32[2,3] = input x
  buf1: f32[] = input k
  buf2: f32[2,3] = arena 0
  buf3: f32[2,3] = output y
  buf4: f32[2] = output s
  buf5: i32[2] = output c
  kernel k0 dims [2,3] reduce 0 vector 8 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {
      s1 = load buf1 [0,0]
    }
    body {
      s0 = load buf0 [3,1]
      s0 = mul s0, s1
      store buf2 [3,1] = s0
    }
  }
  kernel k1 dims [2,3] reduce 1 vector 4 thread_min 16384 tile 1024 lanes 2 {
    slots [f32, f32, i32]
    preamble {
      s1 = const 1.0
    }
    body {
      s0 = load buf2 [3,1]
      s0 = add s0, s1
      s2 = cast s0
      store buf3 [3,1] = s0
      reduce sum buf4 = s0
      reduce sum buf5 = s2
    }
  }
}
";

fn lir_errors(program: &LirProgram) -> Vec<lir::VerifyErrorKind> {
    lir::verify(program).map_or_else(
        |e| e.errors().iter().map(|e| e.kind.clone()).collect(),
        |()| Vec::new(),
    )
}

/// `program` with its kernels changed by `change`.
fn with_lir_kernels(program: LirProgram, change: impl FnOnce(&mut [LirKernel])) -> LirProgram {
    let mut kernels = program.kernels().to_vec();
    change(&mut kernels);
    LirProgram::from_parts(
        program.name(),
        program.buffers().to_vec(),
        program.arena_bytes(),
        program.arena_align(),
        kernels,
    )
}

#[test]
fn lir_verifier_raises_each_kind() {
    use Source::{Api, Text};
    let cases: Vec<Case<LirProgram, lir::VerifyErrorKind>> = vec![
        case!(
            Text(&[("align 16", "align 24")]),
            lir::VerifyErrorKind::ArenaAlign(_)
        ),
        case!(
            Text(&[("= arena 0", "= arena 2")]),
            lir::VerifyErrorKind::ArenaMisaligned { .. }
        ),
        case!(
            Text(&[("arena 32", "arena 16")]),
            lir::VerifyErrorKind::ArenaOverflow { .. }
        ),
        case!(
            Text(&[("input k", "input x")]),
            lir::VerifyErrorKind::DuplicateInputName(_)
        ),
        case!(
            Text(&[("output s", "output y")]),
            lir::VerifyErrorKind::DuplicateOutputName(_)
        ),
        // The preamble loads the f32 input into a slot now declared i32.
        case!(
            Text(&[("slots [f32, f32]", "slots [f32, i32]")]),
            lir::VerifyErrorKind::LoadDType { .. }
        ),
        case!(
            Text(&[("load buf0 [3,1]", "load buf0 [4,1]")]),
            lir::VerifyErrorKind::OutOfBounds { .. }
        ),
        case!(
            Text(&[("      reduce sum buf4 = s0\n", "")]),
            lir::VerifyErrorKind::OutputNotWritten(_)
        ),
        // `k0`'s body reads preamble slot `s1` and then overwrites it.
        case!(
            Text(&[("s0 = mul s0, s1", "s1 = mul s0, s1")]),
            lir::VerifyErrorKind::PreambleSlotClobbered(_)
        ),
        // `k0` reads the output that only the later `k1` writes.
        case!(
            Text(&[("load buf0 [3,1]", "load buf3 [3,1]")]),
            lir::VerifyErrorKind::ReadBeforeWrite(_)
        ),
        case!(
            Text(&[("reduce sum buf5", "reduce mean buf5")]),
            lir::VerifyErrorKind::ReduceDType { .. }
        ),
        case!(
            Text(&[("reduce 1 vector", "reduce 3 vector")]),
            lir::VerifyErrorKind::ReduceDims { .. }
        ),
        case!(Text(&[("lanes 2", "lanes 0")]), lir::VerifyErrorKind::ReduceLanes),
        case!(
            Text(&[("s0 = mul s0, s1", "s0 = cumsum s0")]),
            lir::VerifyErrorKind::ScanWithoutOrder
        ),
        // `k1` reduces, and names a scan order too.
        case!(
            Text(&[("lanes 2 {", "lanes 2 scan forward {")]),
            lir::VerifyErrorKind::ScanLoopNest { .. }
        ),
        case!(
            Text(&[(
                "s1 = load buf1 [0,0]\n",
                "s1 = load buf1 [0,0]\n      s1 = cummax s1\n"
            )]),
            lir::VerifyErrorKind::WriteInPreamble("cummax")
        ),
        case!(
            Text(&[("buf4: f32[2]", "buf4: f32[3]")]),
            lir::VerifyErrorKind::ReduceNumel { .. }
        ),
        // `k1`'s body reads `s1`, which the preamble no longer writes.
        case!(
            Text(&[("      s1 = const 1.0\n", "")]),
            lir::VerifyErrorKind::SlotReadBeforeWrite(_)
        ),
        case!(
            Text(&[("load buf0 [3,1]", "load buf0 [1]")]),
            lir::VerifyErrorKind::StrideCount { .. }
        ),
        // The parser only accepts declared buffer labels.
        case!(
            Api(|p| with_lir_kernels(p, |k| {
                k[1].body[0] = Inst::Load {
                    dst: SlotId::new(0),
                    buf: BufId::new(9),
                    strides: vec![3, 1],
                    offset: 0,
                }
            })),
            lir::VerifyErrorKind::UnknownBuffer(_)
        ),
        // The parser only accepts slots below the declared count: `s0 = mul s0, s9`.
        case!(
            Api(|p| with_lir_kernels(p, |k| {
                k[0].body[1] = Inst::Binary {
                    dst: SlotId::new(0),
                    op: rfx_ir::BinaryOp::Mul,
                    lhs: SlotId::new(0),
                    rhs: SlotId::new(9),
                }
            })),
            lir::VerifyErrorKind::UnknownSlot(_)
        ),
        case!(
            Text(&[("load buf1 [0,0]", "load buf1 [0,1]")]),
            lir::VerifyErrorKind::VaryingPreambleLoad(_)
        ),
        case!(
            Text(&[("s1 = load buf1 [0,0]", "s1 = index [0,1]")]),
            lir::VerifyErrorKind::VaryingPreambleLoad(_)
        ),
        // An `f32` index reaching 2^24 + 1, one past what `f32` counts exactly.
        case!(
            Text(&[("s0 = mul s0, s1", "s0 = index [16777217,0]")]),
            lir::VerifyErrorKind::IndexRange { .. }
        ),
        case!(
            Text(&[("vector 8", "vector 3")]),
            lir::VerifyErrorKind::VectorWidth(_)
        ),
        case!(
            Text(&[("store buf3 [3,1] = s0", "store buf3 [3,1] = s2")]),
            lir::VerifyErrorKind::WriteDType { .. }
        ),
        case!(
            Text(&[(
                "s1 = load buf1 [0,0]\n",
                "s1 = load buf1 [0,0]\n      store buf2 [0,0] = s1\n"
            )]),
            lir::VerifyErrorKind::WriteInPreamble(_)
        ),
        case!(
            Text(&[("store buf3 [3,1] = s0", "store buf0 [3,1] = s0")]),
            lir::VerifyErrorKind::WriteToInput(_)
        ),
        // `k0` stores into what is now literal data.
        case!(
            Text(&[(
                "buf2: f32[2,3] = arena 0",
                "buf2: f32[2,3] = literal [1, 2, 3, 4, 5, 6]"
            )]),
            lir::VerifyErrorKind::WriteToLiteral(_)
        ),
        // The parser reads values in the buffer's dtype: a mixed list needs the API.
        case!(
            Api(|p| {
                let mut buffers = p.buffers().to_vec();
                buffers[1].storage = lir::Storage::Literal {
                    values: vec![rfx_ir::Scalar::F64(1.0)],
                };
                LirProgram::from_parts(
                    p.name(),
                    buffers,
                    p.arena_bytes(),
                    p.arena_align(),
                    p.kernels().to_vec(),
                )
            }),
            lir::VerifyErrorKind::Type(rfx_ir::TypeError::ConstantDType { .. })
        ),
    ];
    check_cases("LIR", LIR_BASE, lir::parse, lir_errors, &cases);
}
