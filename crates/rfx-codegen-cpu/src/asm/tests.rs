//! Assembled passes against the fused routine, which runs the same plans step by step (and is
//! itself tested against the inline code and the interpreter): bit for bit, on random plans of
//! every exact step, special values and every row length around the vector width.

use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Module, default_libcall_names};

use super::*;
use crate::aot::AotFn;
use crate::aot::fused::{Head, Step, rfx_aot_fused_f32, rfx_aot_fused_f64};
use crate::test_rng::Rng;

/// An element type of the passes.
trait Elem: Copy {
    const BYTES: u32;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn bits(self) -> u64;
    /// `acc ∘ v` as the inline code folds a reduction's value: IEEE add or multiply, NumPy's
    /// minimum or maximum (`acc` where it is smaller, or larger, or NaN; else `v`).
    fn fold(op: FoldOp, acc: Self, v: Self) -> Self;
    /// The fused routine of the type.
    unsafe fn fused(plan: *const u8, consts: *const Self, rows: *const *mut Self, n: usize);
}

impl Elem for f32 {
    const BYTES: u32 = 4;
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn fold(op: FoldOp, acc: f32, v: f32) -> f32 {
        match op {
            FoldOp::Add => acc + v,
            FoldOp::Mul => acc * v,
            FoldOp::Min if acc < v || acc.is_nan() => acc,
            FoldOp::Max if acc > v || acc.is_nan() => acc,
            FoldOp::Min | FoldOp::Max => v,
        }
    }
    unsafe fn fused(plan: *const u8, consts: *const f32, rows: *const *mut f32, n: usize) {
        // SAFETY: forwarded.
        unsafe { rfx_aot_fused_f32(plan, consts, rows, n) }
    }
}

impl Elem for f64 {
    const BYTES: u32 = 8;
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn fold(op: FoldOp, acc: f64, v: f64) -> f64 {
        match op {
            FoldOp::Add => acc + v,
            FoldOp::Mul => acc * v,
            FoldOp::Min if acc < v || acc.is_nan() => acc,
            FoldOp::Max if acc > v || acc.is_nan() => acc,
            FoldOp::Min | FoldOp::Max => v,
        }
    }
    unsafe fn fused(plan: *const u8, consts: *const f64, rows: *const *mut f64, n: usize) {
        // SAFETY: forwarded.
        unsafe { rfx_aot_fused_f64(plan, consts, rows, n) }
    }
}

/// A JIT module for the host, where the passes are placed as any kernel's code is.
fn module() -> JITModule {
    let mut flags = settings::builder();
    flags.set("is_pic", "false").expect("a flag");
    let isa = cranelift_native::builder()
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA flags");
    JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()))
}

type Pass<T> = unsafe extern "sysv64" fn(*const T, *const *mut T, usize);

/// Places `code` in `module` and returns it as a callable pass.
fn place<T>(module: &mut JITModule, code: &[u8]) -> Pass<T> {
    let sig = module.make_signature();
    let id = module.declare_anonymous_function(&sig).expect("declare");
    module.define_function_bytes(id, 32, code, &[]).expect("define");
    module.finalize_definitions().expect("finalize");
    let address = module.get_finalized_function(id);
    // SAFETY: the code is an assembled pass, whose ABI is `Pass`.
    unsafe { std::mem::transmute::<*const u8, Pass<T>>(address) }
}

/// Values that exercise every step's edge: zeros of both signs, infinities, NaN, subnormals,
/// halves (rounding), huge and tiny magnitudes, and ordinary ones.
fn sample(rng: &mut Rng) -> f64 {
    const SPECIAL: [f64; 14] = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-310,
        -1e-40,
        0.5,
        -2.5,
        1.5,
        1e300,
        -3.0e38,
        1.0,
        -1.0,
    ];
    if rng.next_u64().is_multiple_of(4) {
        SPECIAL[(rng.next_u64() % SPECIAL.len() as u64) as usize]
    } else {
        rng.uniform(-10.0, 10.0)
    }
}

const EXACT: [u32; 15] = [
    op::COPY,
    op::ADD,
    op::SUB,
    op::MUL,
    op::DIV,
    op::MIN,
    op::MAX,
    op::NEG,
    op::ABS,
    op::SQRT,
    op::RSQRT,
    op::RECIP,
    op::FLOOR,
    op::CEIL,
    op::ROUND,
];

/// The fused opcodes of the routines a plan of `dtype_bytes` elements may call (one result,
/// one or two arguments).
fn routine_codes(dtype_bytes: u32) -> Vec<u32> {
    AotFn::ALL
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.results() == 1
                && r.arity() <= 2
                && r.dtype().size_bytes() == dtype_bytes as usize
                && !matches!(r.computes(), crate::aot::Computes::Fused)
        })
        .map(|(k, _)| op::ROUTINE + k as u32)
        .collect()
}

/// A random valid plan with `consts` constants, `inputs` input rows and `outputs` output rows
/// (each written at least once), within [`MAX_PLAN_REGS`] registers: exact steps and, with
/// `routines`, about one routine step in four.
fn random_plan(rng: &mut Rng, shape: (u32, u32, u32), dtype_bytes: u32, routines: bool) -> Plan {
    random_plan_within(rng, shape, dtype_bytes, routines, MAX_PLAN_REGS)
}

/// [`random_plan`] within `max_regs` registers (more than `consts`).
fn random_plan_within(
    rng: &mut Rng,
    (consts, inputs, outputs): (u32, u32, u32),
    dtype_bytes: u32,
    routines: bool,
    max_regs: u32,
) -> Plan {
    let calls = routine_codes(dtype_bytes);
    let mut steps = Vec::new();
    let mut written: Vec<u32> = (0..consts).collect();
    let len = 1 + rng.next_u64() % 12;
    let pick = |rng: &mut Rng, written: &[u32]| -> u32 {
        let choices = written.len() as u64 + u64::from(inputs);
        let k = rng.next_u64() % choices;
        if (k as usize) < written.len() {
            written[k as usize]
        } else {
            INPUT + (k - written.len() as u64) as u32
        }
    };
    let mut out = 0;
    for j in 0..len + u64::from(outputs) {
        let code = if routines && rng.next_u64().is_multiple_of(4) {
            calls[(rng.next_u64() % calls.len() as u64) as usize]
        } else {
            EXACT[(rng.next_u64() % EXACT.len() as u64) as usize]
        };
        let (a, b) = (pick(rng, &written), pick(rng, &written));
        // The last steps write the outputs; the others a register that is not a source.
        let dst = if j >= len {
            out += 1;
            OUTPUT + out - 1
        } else {
            let free: Vec<u32> = (consts..max_regs).filter(|&r| r != a && r != b).collect();
            let r = free[(rng.next_u64() % free.len() as u64) as usize];
            if !written.contains(&r) {
                written.push(r);
            }
            r
        };
        steps.push(Step { op: code, dst, a, b });
    }
    let regs = written
        .iter()
        .copied()
        .max()
        .map_or(consts, |r| r + 1)
        .max(consts);
    Plan {
        head: Head {
            steps: steps.len() as u32,
            regs,
            consts,
            inputs,
            outputs,
            dtype_bytes,
        },
        steps,
    }
}

/// Elements after each output row's end that a pass must leave alone.
const GUARD: usize = 40;

/// Runs `plan` over rows of `n` random elements through its assembled pass and through the
/// fused routine, and checks that every output element has the same bits. About half the
/// constants are given to the assembler as literals.
fn check<T: Elem>(module: &mut JITModule, rng: &mut Rng, plan: &Plan, n: usize) {
    let h = plan.head;
    let consts: Vec<T> = (0..h.consts).map(|_| T::from_f64(sample(rng))).collect();
    let literals: Vec<Option<f64>> = consts
        .iter()
        .map(|c| rng.next_u64().is_multiple_of(2).then(|| c.to_f64()))
        .collect();
    let code = assemble(plan, &literals).unwrap_or_else(|| panic!("{plan:?} assembles"));
    let pass = place::<T>(module, &code);
    let inputs: Vec<Vec<T>> = (0..h.inputs)
        .map(|_| (0..n).map(|_| T::from_f64(sample(rng))).collect())
        .collect();
    // Each output row has guard elements after its `n`, which no pass may write.
    let fresh = || -> Vec<Vec<T>> {
        (0..h.outputs)
            .map(|_| vec![T::from_f64(7.0); n + GUARD])
            .collect()
    };
    let (mut ours, mut theirs) = (fresh(), fresh());
    let words = plan.words();
    for (outputs, assembled) in [(&mut ours, true), (&mut theirs, false)] {
        let mut rows: Vec<*mut T> = inputs.iter().map(|r| r.as_ptr().cast_mut()).collect();
        rows.extend(outputs.iter_mut().map(|r| r.as_mut_ptr()));
        // SAFETY: every row holds `n` elements, the outputs are distinct vectors, and the plan
        // is valid (the fused routine checks it too).
        unsafe {
            if assembled {
                pass(consts.as_ptr(), rows.as_ptr(), n);
            } else {
                T::fused(words.as_ptr().cast(), consts.as_ptr(), rows.as_ptr(), n);
            }
        }
    }
    for (k, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        for (i, (x, y)) in o.iter().zip(t).enumerate() {
            assert_eq!(
                x.bits(),
                y.bits(),
                "output {k} element {i} of {n}, {plan:?}, {literals:?}"
            );
        }
        assert!(
            o[n..].iter().all(|g| g.bits() == T::from_f64(7.0).bits()),
            "output {k} written past its {n} elements, {plan:?}"
        );
    }
}

fn random_plans<T: Elem>(seed: u64, routines: bool) {
    if !crate::aot::available() {
        return;
    }
    let mut module = module();
    let mut rng = Rng(seed);
    // Lengths around the vector width and, with routines, around the block and the chunk,
    // and rows long enough to be fetched ahead.
    let lengths: &[usize] = if routines {
        &[
            0, 1, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 513, 1027, 4100,
        ]
    } else {
        &[0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1027]
    };
    for round in 0..600 {
        let consts = (rng.next_u64() % 4) as u32;
        let inputs = 1 + (rng.next_u64() % 3) as u32;
        let outputs = 1 + (rng.next_u64() % 3) as u32;
        let plan = random_plan(&mut rng, (consts, inputs, outputs), T::BYTES, routines);
        assert!(plan.is_valid(), "{plan:?}");
        check::<T>(&mut module, &mut rng, &plan, lengths[round % lengths.len()]);
    }
}

#[test]
fn random_f32_plans_give_the_fused_routines_bits() {
    random_plans::<f32>(0x5eed_a5e0, false);
}

#[test]
fn random_f64_plans_give_the_fused_routines_bits() {
    random_plans::<f64>(0x5eed_a5e1, false);
}

#[test]
fn random_f32_plans_with_routines_give_the_fused_routines_bits() {
    random_plans::<f32>(0x5eed_a5e2, true);
}

#[test]
fn random_f64_plans_with_routines_give_the_fused_routines_bits() {
    random_plans::<f64>(0x5eed_a5e3, true);
}

/// The row registers: a plan of ten rows (six pushed and popped) computes every output.
#[test]
fn ten_rows_use_the_callee_saved_registers() {
    if !crate::aot::available() {
        return;
    }
    let mut module = module();
    let mut rng = Rng(17);
    let steps: Vec<Step> = (0..5)
        .map(|k| Step {
            op: op::ADD,
            dst: OUTPUT + k,
            a: INPUT + k,
            b: INPUT + 4 - k,
        })
        .collect();
    let plan = Plan {
        head: Head {
            steps: 5,
            regs: 0,
            consts: 0,
            inputs: 5,
            outputs: 5,
            dtype_bytes: 4,
        },
        steps,
    };
    for n in [5, 64, 70] {
        check::<f32>(&mut module, &mut rng, &plan, n);
    }
}

/// NumPy's minimum and maximum: a NaN in either operand gives NaN, and a tie of zeros gives
/// the second operand (closed forms, not the fused routine).
#[test]
fn min_and_max_propagate_nan_and_take_the_second_zero() {
    if !crate::aot::available() {
        return;
    }
    let mut module = module();
    let plan = |code| Plan {
        head: Head {
            steps: 1,
            regs: 0,
            consts: 0,
            inputs: 2,
            outputs: 1,
            dtype_bytes: 4,
        },
        steps: vec![Step {
            op: code,
            dst: OUTPUT,
            a: INPUT,
            b: INPUT + 1,
        }],
    };
    let x = [f32::NAN, 1.0, 0.0, -0.0, 2.0, -3.0, f32::NAN, 5.0, 1.0];
    let y = [1.0, f32::NAN, -0.0, 0.0, 3.0, -4.0, f32::NAN, 5.0, f32::INFINITY];
    for (code, expect) in [
        (
            op::MIN,
            [f32::NAN, f32::NAN, -0.0, 0.0, 2.0, -4.0, f32::NAN, 5.0, 1.0],
        ),
        (
            op::MAX,
            [
                f32::NAN,
                f32::NAN,
                -0.0,
                0.0,
                3.0,
                -3.0,
                f32::NAN,
                5.0,
                f32::INFINITY,
            ],
        ),
    ] {
        let pass = place::<f32>(&mut module, &assemble(&plan(code), &[]).expect("assembles"));
        let mut out = [0.0f32; 9];
        let rows = [x.as_ptr().cast_mut(), y.as_ptr().cast_mut(), out.as_mut_ptr()];
        // SAFETY: three rows of nine elements.
        unsafe { pass(std::ptr::null(), rows.as_ptr(), 9) };
        for (o, e) in out.iter().zip(expect) {
            assert!(
                o.to_bits() == e.to_bits() || (o.is_nan() && e.is_nan()),
                "{code}: {out:?}"
            );
        }
    }
}

/// Plans an assembled pass does not run: an unknown routine, too many registers, too many
/// rows.
#[test]
fn plans_beyond_the_registers_or_with_routines_are_refused() {
    let one = |code, regs, inputs| Plan {
        head: Head {
            steps: 1,
            regs,
            consts: 0,
            inputs,
            outputs: 1,
            dtype_bytes: 4,
        },
        steps: vec![Step {
            op: code,
            dst: OUTPUT,
            a: INPUT,
            b: INPUT,
        }],
    };
    assert!(assemble(&one(op::ADD, 0, 1), &[]).is_some());
    assert!(assemble(&one(op::ADD, MAX_PLAN_REGS + 1, 1), &[]).is_none());
    assert!(assemble(&one(op::ADD, 0, MAX_ROWS as u32), &[]).is_none());
    assert!(assemble(&one(op::ROUTINE + AotFn::ALL.len() as u32, 0, 1), &[]).is_none());
}

type ReductionPass<T> = unsafe extern "sysv64" fn(*const T, *const *mut T, usize, *mut T);

/// Places `code` in `module` and returns it as a callable reduction pass.
fn place_reduction<T>(module: &mut JITModule, code: &[u8]) -> ReductionPass<T> {
    let pass = place::<T>(module, code);
    // SAFETY: the code is an assembled reduction pass, whose ABI is `ReductionPass`.
    unsafe { std::mem::transmute::<Pass<T>, ReductionPass<T>>(pass) }
}

const FOLD_OPS: [FoldOp; 4] = [FoldOp::Add, FoldOp::Mul, FoldOp::Min, FoldOp::Max];

/// A random reduction pass over `lanes` partials: a random exact plan with `folds` fold steps
/// put at random places, each of a value written before it (a register, a constant or an
/// input row). Checked against the fused routine running the same plan with each fold a copy
/// into an extra output row instead, whose values are then folded in lane order in Rust: the
/// output rows' whole steps must have the routine's bits and the rest (and guard elements after
/// the rows) untouched, and every
/// partial the bits of the fold (any NaN for a NaN).
fn check_reduction<T: Elem>(module: &mut JITModule, rng: &mut Rng, lanes: u32, folds: u32, n: usize) {
    let vectors = lanes * T::BYTES / 32;
    // At least five plan registers left beside the accumulators.
    let folds = folds.min((DST as u32 - 5) / vectors);
    let consts = (rng.next_u64() % 3) as u32;
    let inputs = 1 + (rng.next_u64() % 3) as u32;
    let outputs = (rng.next_u64() % 3) as u32;
    let max_regs = DST as u32 - folds * vectors;
    let exact = random_plan_within(rng, (consts, inputs, outputs.max(1)), T::BYTES, false, max_regs);
    // Fewer outputs than the random plan wrote: its last steps' output rows become registers
    // nobody reads (a plan may have no output rows).
    let mut exact_steps = exact.steps.clone();
    if outputs == 0 {
        let spare = exact.head.regs.max(consts);
        if spare >= max_regs {
            return;
        }
        for s in &mut exact_steps {
            if s.dst >= OUTPUT {
                s.dst = spare;
            }
        }
    }
    let regs = exact_steps
        .iter()
        .filter(|s| s.dst < OUTPUT)
        .map(|s| s.dst + 1)
        .max()
        .unwrap_or(0)
        .max(consts);
    // Where each fold goes (before step `at`) and what it reads.
    let mut places: Vec<(usize, u32)> = Vec::new();
    for _ in 0..folds {
        let at = (rng.next_u64() % (exact_steps.len() as u64 + 1)) as usize;
        let mut written: Vec<u32> = (0..consts).collect();
        written.extend(exact_steps[..at].iter().filter(|s| s.dst < OUTPUT).map(|s| s.dst));
        written.extend((0..inputs).map(|k| INPUT + k));
        places.push((at, written[(rng.next_u64() % written.len() as u64) as usize]));
    }
    places.sort_by_key(|&(at, _)| at);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    // The folds in their places' order, or in reverse (a pass folds in any order).
    let reversed = rng.next_u64().is_multiple_of(2);
    let index = |f: usize| if reversed { folds - 1 - f as u32 } else { f as u32 };
    let mut next = places.iter().enumerate().peekable();
    for (j, s) in exact_steps
        .iter()
        .enumerate()
        .chain([(exact_steps.len(), &exact_steps[0])])
    {
        while let Some((f, &(_, src))) = next.next_if(|(_, (at, _))| *at == j) {
            ours.push(Step {
                op: op::FOLD,
                dst: index(f),
                a: src,
                b: src,
            });
            theirs.push(Step {
                op: op::COPY,
                dst: OUTPUT + outputs + index(f),
                a: src,
                b: src,
            });
        }
        if j < exact_steps.len() {
            ours.push(*s);
            theirs.push(*s);
        }
    }
    let head = Head {
        steps: ours.len() as u32,
        regs,
        consts,
        inputs,
        outputs,
        dtype_bytes: T::BYTES,
    };
    let pass_plan = Plan { head, steps: ours };
    let reference = Plan {
        head: Head {
            steps: theirs.len() as u32,
            outputs: outputs + folds,
            ..head
        },
        steps: theirs,
    };
    assert!(reference.is_valid(), "{reference:?}");
    let fold_ops: Vec<Fold> = (0..folds)
        .map(|f| Fold {
            op: FOLD_OPS[(rng.next_u64() % 4) as usize],
            offset: f * lanes * T::BYTES,
        })
        .collect();
    let constants: Vec<T> = (0..consts).map(|_| T::from_f64(sample(rng))).collect();
    let literals: Vec<Option<f64>> = constants
        .iter()
        .map(|c| rng.next_u64().is_multiple_of(2).then(|| c.to_f64()))
        .collect();
    let code = assemble_reduction(&pass_plan, &fold_ops, lanes, &literals)
        .unwrap_or_else(|| panic!("{pass_plan:?} assembles"));
    let pass = place_reduction::<T>(module, &code);
    let rows_in: Vec<Vec<T>> = (0..inputs)
        .map(|_| (0..n).map(|_| T::from_f64(sample(rng))).collect())
        .collect();
    let fresh = |k: u32| -> Vec<Vec<T>> { (0..k).map(|_| vec![T::from_f64(7.0); n + GUARD]).collect() };
    let (mut got, mut want) = (fresh(outputs), fresh(outputs + folds));
    let start: Vec<T> = (0..folds * lanes).map(|_| T::from_f64(sample(rng))).collect();
    let mut partials = start.clone();
    let words = reference.words();
    let row_table = |outs: &mut Vec<Vec<T>>| -> Vec<*mut T> {
        let mut rows: Vec<*mut T> = rows_in.iter().map(|r| r.as_ptr().cast_mut()).collect();
        rows.extend(outs.iter_mut().map(|r| r.as_mut_ptr()));
        rows
    };
    let (ours_rows, theirs_rows) = (row_table(&mut got), row_table(&mut want));
    // SAFETY: every row holds `n` elements, the outputs are distinct vectors, the partials
    // hold `folds × lanes` elements, and the reference plan is valid.
    unsafe {
        pass(constants.as_ptr(), ours_rows.as_ptr(), n, partials.as_mut_ptr());
        T::fused(words.as_ptr().cast(), constants.as_ptr(), theirs_rows.as_ptr(), n);
    }
    let whole = n - n % lanes as usize;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        for i in 0..n + GUARD {
            let expect = if i < whole {
                w[i].bits()
            } else {
                T::from_f64(7.0).bits()
            };
            assert_eq!(
                g[i].bits(),
                expect,
                "output {k} element {i} of {n}, {pass_plan:?}"
            );
        }
    }
    for (f, fold) in fold_ops.iter().enumerate() {
        let values = &want[(outputs as usize) + f];
        for lane in 0..lanes as usize {
            let mut acc = start[f * lanes as usize + lane];
            for v in values[..whole].iter().skip(lane).step_by(lanes as usize) {
                acc = T::fold(fold.op, acc, *v);
            }
            let g = partials[f * lanes as usize + lane];
            // Any NaN for NaN: which operand's payload an add keeps is not part of the op (nor
            // is it Rust's, which may swap the operands).
            let nan = |x: T| x.to_f64().is_nan();
            assert!(
                g.bits() == acc.bits() || (nan(g) && nan(acc)),
                "fold {f} ({:?}) lane {lane} of {lanes}, n {n}: {} vs {}, {pass_plan:?}",
                fold.op,
                g.to_f64(),
                acc.to_f64()
            );
        }
    }
}

fn random_reductions<T: Elem>(seed: u64) {
    if !crate::aot::available() {
        return;
    }
    let mut module = module();
    let mut rng = Rng(seed);
    let lanes: Vec<u32> = [1u32, 2, 4].iter().map(|v| v * 32 / T::BYTES).collect();
    for round in 0..400 {
        let l = lanes[round % lanes.len()];
        let lengths = [
            0,
            1,
            l as usize - 1,
            l as usize,
            l as usize + 1,
            3 * l as usize + 5,
            100,
            1027,
        ];
        let folds = 1 + (rng.next_u64() % 3) as u32;
        check_reduction::<T>(
            &mut module,
            &mut rng,
            l,
            folds,
            lengths[(round / 3) % lengths.len()],
        );
    }
}

#[test]
fn random_f32_reduction_passes_fold_in_lane_order() {
    random_reductions::<f32>(31);
}

#[test]
fn random_f64_reduction_passes_fold_in_lane_order() {
    random_reductions::<f64>(37);
}

/// Reduction plans a pass does not run: lanes that are not a power of two or do not fill whole
/// vectors, too many accumulators, a reduction folded twice or not at all, a fold of an
/// unwritten register, a
/// routine step.
#[test]
fn reduction_plans_beyond_the_pass_are_refused() {
    let plan = |steps: Vec<Step>, regs| Plan {
        head: Head {
            steps: steps.len() as u32,
            regs,
            consts: 0,
            inputs: 1,
            outputs: 0,
            dtype_bytes: 4,
        },
        steps,
    };
    let mul = Step {
        op: op::MUL,
        dst: 0,
        a: INPUT,
        b: INPUT,
    };
    let fold = |r: u32, a: u32| Step {
        op: op::FOLD,
        dst: r,
        a,
        b: a,
    };
    let add = |offset| Fold {
        op: FoldOp::Add,
        offset,
    };
    let good = plan(vec![mul, fold(0, 0)], 1);
    assert!(assemble_reduction(&good, &[add(0)], 16, &[]).is_some());
    assert!(assemble_reduction(&good, &[add(0)], 8, &[]).is_some());
    // Lanes: not a power of two, less than a vector.
    assert!(assemble_reduction(&good, &[add(0)], 24, &[]).is_none());
    assert!(assemble_reduction(&good, &[add(0)], 4, &[]).is_none());
    // One register and seven reductions of two vectors: more than the 13 registers.
    let seven: Vec<Step> = [mul].into_iter().chain((0..7).map(|r| fold(r, 0))).collect();
    let adds: Vec<Fold> = (0..7).map(|r| add(64 * r)).collect();
    assert!(assemble_reduction(&plan(seven.clone(), 1), &adds, 8, &[]).is_some());
    assert!(assemble_reduction(&plan(seven, 1), &adds, 16, &[]).is_none());
    // Folds in any order, but a reduction folded twice, a fold missing, an unwritten
    // register folded.
    let two = |a, b| plan(vec![mul, fold(a, 0), fold(b, 0)], 1);
    assert!(assemble_reduction(&two(0, 1), &[add(0), add(64)], 16, &[]).is_some());
    assert!(assemble_reduction(&two(1, 0), &[add(0), add(64)], 16, &[]).is_some());
    assert!(assemble_reduction(&two(1, 1), &[add(0), add(64)], 16, &[]).is_none());
    assert!(assemble_reduction(&good, &[add(0), add(64)], 16, &[]).is_none());
    assert!(assemble_reduction(&plan(vec![fold(0, 0), mul], 1), &[add(0)], 16, &[]).is_none());
    // A routine step; the plan of an elementwise pass is not a reduction's.
    let routine = Step {
        op: op::ROUTINE,
        dst: 0,
        a: INPUT,
        b: INPUT,
    };
    assert!(assemble_reduction(&plan(vec![routine, fold(0, 0)], 1), &[add(0)], 16, &[]).is_none());
    assert!(assemble(&good, &[]).is_none());
}
