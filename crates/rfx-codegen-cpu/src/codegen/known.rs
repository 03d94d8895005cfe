//! Compares, selects and `and`/`or` whose operands are constants when the code is emitted: an
//! index at the fixed positions of written-out code (a concatenation read as a value selects
//! its parts by position), a literal. They are evaluated here, lane by lane, as the
//! instruction would evaluate them, and a select whose condition is known keeps only the
//! operand it picks; Cranelift's mid-end folds neither a float comparison of constants nor a
//! select on one. The same bits: nothing but the choice is computed.

use cranelift_codegen::ir::{DataFlowGraph, InstructionData, Opcode};
use rfx_ir::CmpOp;

use super::*;

/// A constant's lanes: integers (sign-extended from their lane width) or floats (an `f32`
/// lane held exactly as an `f64`).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Lanes {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

/// How many definitions deep [`lanes`] follows a value (an index is a conversion of a
/// constant, splatted, plus a constant vector of lane steps).
const MAX_DEPTH: u8 = 6;

/// `x`'s low `bits` bits, sign-extended.
fn sign_extend(x: i64, bits: u32) -> i64 {
    if bits >= 64 {
        x
    } else {
        let shift = 64 - bits;
        (x << shift) >> shift
    }
}

/// The lanes of `v` when it is built from constants only by the operations the emitter uses
/// for indices and constants (`None` otherwise).
pub(super) fn lanes(dfg: &DataFlowGraph, v: Value) -> Option<Lanes> {
    lanes_within(dfg, v, MAX_DEPTH)
}

fn lanes_within(dfg: &DataFlowGraph, v: Value, depth: u8) -> Option<Lanes> {
    let depth = depth.checked_sub(1)?;
    let ty = dfg.value_type(v);
    let n = ty.lane_count() as usize;
    let bits = ty.lane_bits();
    let f32_lanes = ty.lane_type() == types::F32;
    let inst = dfg.value_def(v).inst()?;
    Some(match dfg.insts[inst] {
        InstructionData::UnaryImm {
            opcode: Opcode::Iconst,
            imm,
        } => Lanes::Int(vec![sign_extend(imm.bits(), bits); n]),
        InstructionData::UnaryIeee64 {
            opcode: Opcode::F64const,
            imm,
        } => Lanes::Float(vec![f64::from_bits(imm.bits()); n]),
        InstructionData::UnaryIeee32 {
            opcode: Opcode::F32const,
            imm,
        } => Lanes::Float(vec![f64::from(f32::from_bits(imm.bits())); n]),
        InstructionData::Unary {
            opcode: Opcode::Splat,
            arg,
        } => match lanes_within(dfg, arg, depth)? {
            Lanes::Int(x) if x.len() == 1 => Lanes::Int(vec![sign_extend(x[0], bits); n]),
            Lanes::Float(x) if x.len() == 1 => Lanes::Float(vec![x[0]; n]),
            _ => return None,
        },
        InstructionData::Unary {
            opcode: Opcode::FcvtFromSint,
            arg,
        } => match lanes_within(dfg, arg, depth)? {
            Lanes::Int(x) => Lanes::Float(
                x.iter()
                    .map(|&i| if f32_lanes { f64::from(i as f32) } else { i as f64 })
                    .collect(),
            ),
            Lanes::Float(_) => return None,
        },
        InstructionData::Unary {
            opcode: Opcode::Ireduce,
            arg,
        } => match lanes_within(dfg, arg, depth)? {
            Lanes::Int(x) => Lanes::Int(x.iter().map(|&i| sign_extend(i, bits)).collect()),
            Lanes::Float(_) => return None,
        },
        // A bool splatted to a lane mask: `splat(ineg(uextend(b)))`.
        InstructionData::Unary {
            opcode: Opcode::Uextend,
            arg,
        } => match lanes_within(dfg, arg, depth)? {
            Lanes::Int(x) => {
                let from = dfg.value_type(arg).lane_bits();
                let mask = if from >= 64 { -1 } else { (1i64 << from) - 1 };
                Lanes::Int(x.iter().map(|&i| i & mask).collect())
            }
            Lanes::Float(_) => return None,
        },
        InstructionData::Unary {
            opcode: Opcode::Ineg,
            arg,
        } => match lanes_within(dfg, arg, depth)? {
            Lanes::Int(x) => Lanes::Int(x.iter().map(|&i| sign_extend(i.wrapping_neg(), bits)).collect()),
            Lanes::Float(_) => return None,
        },
        InstructionData::UnaryConst {
            opcode: Opcode::Vconst,
            constant_handle,
        } => {
            let bytes = dfg.constants.get(constant_handle).as_slice();
            let width = (bits / 8) as usize;
            if width == 0 || bytes.len() != width * n {
                return None;
            }
            let chunks = bytes.chunks_exact(width);
            match (ty.lane_type(), width) {
                (types::F64, 8) => Lanes::Float(
                    chunks
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect(),
                ),
                (types::F32, 4) => Lanes::Float(
                    chunks
                        .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                        .collect(),
                ),
                (_, 8) => Lanes::Int(
                    chunks
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect(),
                ),
                (_, 4) => Lanes::Int(
                    chunks
                        .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                        .collect(),
                ),
                _ => return None,
            }
        }
        InstructionData::Binary {
            opcode: opcode @ (Opcode::Fadd | Opcode::Iadd),
            args: [x, y],
        } => match (lanes_within(dfg, x, depth)?, lanes_within(dfg, y, depth)?) {
            (Lanes::Float(x), Lanes::Float(y)) if opcode == Opcode::Fadd && x.len() == y.len() => {
                Lanes::Float(
                    x.iter()
                        .zip(&y)
                        .map(|(&a, &b)| {
                            if f32_lanes {
                                f64::from(a as f32 + b as f32)
                            } else {
                                a + b
                            }
                        })
                        .collect(),
                )
            }
            (Lanes::Int(x), Lanes::Int(y)) if opcode == Opcode::Iadd && x.len() == y.len() => Lanes::Int(
                x.iter()
                    .zip(&y)
                    .map(|(&a, &b)| sign_extend(a.wrapping_add(b), bits))
                    .collect(),
            ),
            _ => return None,
        },
        _ => return None,
    })
}

/// The lanes of a bool value `v` (an `i8` 0 or 1 at one lane, all-ones or all-zeros masks at
/// several), when they are known.
pub(super) fn bool_lanes(dfg: &DataFlowGraph, v: Value) -> Option<Vec<bool>> {
    match lanes(dfg, v)? {
        Lanes::Int(x) => Some(x.iter().map(|&i| i != 0).collect()),
        Lanes::Float(_) => None,
    }
}

/// `op` on the known lanes `x` and `y` of a float (`float`) or integer comparison, lane by
/// lane as `fcmp` (ordered, except `!=`) or a signed `icmp` evaluates it.
pub(super) fn compare_lanes(op: CmpOp, x: &Lanes, y: &Lanes) -> Option<Vec<bool>> {
    match (x, y) {
        (Lanes::Float(x), Lanes::Float(y)) if x.len() == y.len() => {
            Some(x.iter().zip(y).map(|(a, b)| op.holds(a, b)).collect())
        }
        (Lanes::Int(x), Lanes::Int(y)) if x.len() == y.len() => {
            Some(x.iter().zip(y).map(|(a, b)| op.holds(a, b)).collect())
        }
        _ => None,
    }
}

/// A bool value of `w` lanes holding `lanes` (one per lane), as the emitter represents bools.
pub(super) fn bool_constant(b: &mut FunctionBuilder<'_>, w: u8, lanes: &[bool]) -> Value {
    if w == 1 {
        return b
            .ins()
            .iconst(types::I8, i64::from(lanes.first().copied().unwrap_or(false)));
    }
    let lane_bytes = 16 / usize::from(w);
    let bytes: Vec<u8> = lanes
        .iter()
        .flat_map(|&t| std::iter::repeat_n(if t { 0xff } else { 0 }, lane_bytes))
        .collect();
    let handle = b.func.dfg.constants.insert(bytes.into());
    b.ins().vconst(cl_type(DType::Bool, w), handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_of_known_lanes_are_fcmps_and_signed_icmps() {
        let (nan, one) = (Lanes::Float(vec![f64::NAN, 1.0]), Lanes::Float(vec![1.0, 1.0]));
        // Ordered comparisons are false on NaN; `!=` is true.
        for op in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq] {
            assert_eq!(compare_lanes(op, &nan, &one).map(|l| l[0]), Some(false), "{op:?}");
        }
        assert_eq!(compare_lanes(CmpOp::Ne, &nan, &one), Some(vec![true, false]));
        let zeros = (Lanes::Float(vec![-0.0]), Lanes::Float(vec![0.0]));
        assert_eq!(compare_lanes(CmpOp::Eq, &zeros.0, &zeros.1), Some(vec![true]));
        assert_eq!(compare_lanes(CmpOp::Lt, &zeros.0, &zeros.1), Some(vec![false]));
        let ints = (Lanes::Int(vec![-1, 3]), Lanes::Int(vec![2, 3]));
        assert_eq!(
            compare_lanes(CmpOp::Lt, &ints.0, &ints.1),
            Some(vec![true, false])
        );
        assert_eq!(compare_lanes(CmpOp::Le, &ints.0, &ints.1), Some(vec![true, true]));
        // Lanes of different kinds or counts are not compared.
        assert_eq!(compare_lanes(CmpOp::Eq, &ints.0, &one), None);
        assert_eq!(compare_lanes(CmpOp::Eq, &Lanes::Int(vec![1]), &ints.1), None);
    }

    #[test]
    fn sign_extension_keeps_the_low_bits() {
        assert_eq!(sign_extend(0xff, 8), -1);
        assert_eq!(sign_extend(0x7f, 8), 127);
        assert_eq!(sign_extend(-1, 64), -1);
        assert_eq!(sign_extend(0x1_0000_0001, 32), 1);
    }
}
