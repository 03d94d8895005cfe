//! Register-resident AVX2 passes: a fused elementwise plan ([`crate::aot::fused::Plan`])
//! assembled into machine code with `iced-x86`, for x86-64 hosts with AVX2.
//!
//! Cranelift has no 256-bit vectors on x86-64, and the fused routine runs each step over a chunk
//! in memory, dispatching on the plan at every step; an assembled pass holds the plan in its
//! code. A plan of exact steps runs on one 256-bit vector at a time, every plan register in a
//! `ymm` register, reading its input rows as memory operands and writing its output rows, then
//! finishes the row's last elements one at a time with the same steps in scalar instructions:
//! the loop a C compiler would write for the body, in IEEE order (no contraction, no
//! reassociation). A plan with routine steps runs chunk by chunk ([`Emitter::chunked_pass`]):
//! its runs of exact steps as such loops over the chunk, each routine step as a call of its
//! tile routine on the chunk, values that cross from one to another through chunk buffers in
//! the frame; a plan with one routine step runs block by block instead (four vectors at a
//! time), the routine through its block entry (its AVX-512 compilation where the CPU has it).
//! An input row that several steps read is loaded once per vector into a spare register. A
//! reduction's body runs as a reduction pass ([`reduction`]): the plan's exact steps and a
//! fold of each reduced value into partials carried in `ymm` accumulators.
//!
//! Each step computes the fused routine's op (see [`crate::aot::fused`]), so an assembled pass
//! gives the bits of the fused pass and of the inline code: add, subtract, multiply, divide and
//! square root are IEEE operations; the minimum and maximum are NumPy's (NaN-propagating, the
//! second operand on ties: `vminps` then a blend of a NaN first operand); `floor`, `ceil` and
//! `round` are `vroundps` with the exception masked; negation and absolute value flip or clear
//! the sign bit; `rsqrt` and `recip` divide one by the square root or the value; a routine step
//! calls the routine the fused routine runs, or its block entry (the same bits at every
//! position and length).
//!
//! The code is position-independent (its constants are RIP-relative, after its `ret`; routines
//! are called through their absolute addresses), so a Cranelift module places it like any other
//! function ([`Module::define_function_bytes`]). Its ABI is System V: `pass(consts, rows, n)`,
//! with `consts` the plan's constants (one element each, broadcast into its registers), `rows`
//! its input rows then its output rows, and `n` the row length.
//!
//! [`Module::define_function_bytes`]: cranelift_module::Module::define_function_bytes

use iced_x86::IcedError;
use iced_x86::code_asm::*;

/// Why a pass was not written: the assembler refused an instruction, or the plan has a step
/// an assembled pass does not run.
#[derive(Debug)]
enum Fail {
    Iced,
    Step,
}

impl From<IcedError> for Fail {
    fn from(_: IcedError) -> Fail {
        Fail::Iced
    }
}

use crate::aot::AotFn;
use crate::aot::fused::{INPUT, OUTPUT, Plan, Step, op};

#[cfg(test)]
mod tests;

/// The most plan registers (constants included) an assembled pass maps onto `ymm` registers:
/// three more are its scratch (a step's result bound for an output row, a loaded first operand
/// and a NaN mask).
pub(crate) const MAX_PLAN_REGS: u32 = 13;

/// The most rows (inputs and outputs) an assembled pass keeps in general registers: the
/// caller-saved `r8`–`r11` and the callee-saved `rbx`, `rbp`, `r12`–`r15` (pushed and popped).
pub(crate) const MAX_ROWS: usize = 10;

/// The general registers of the rows, in the order they are given out.
const ROW_REGS: [AsmRegister64; MAX_ROWS] = [r8, r9, r10, r11, rbx, rbp, r12, r13, r14, r15];

/// How many of [`ROW_REGS`] (the first ones) the caller may clobber.
const CALLER_SAVED_ROWS: usize = 4;

const YMM: [AsmRegisterYmm; 16] = [
    ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13, ymm14, ymm15,
];
const XMM: [AsmRegisterXmm; 16] = [
    xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13, xmm14, xmm15,
];

/// The scratch registers: a result bound for an output row, a first operand loaded from a row,
/// a NaN mask.
const DST: usize = 13;
const LOADED: usize = 14;
const MASK: usize = 15;

/// `vroundps` immediates: the rounding mode with the precision exception suppressed (bit 3).
const ROUND_NEAREST: u32 = 0b1000;
const ROUND_DOWN: u32 = 0b1001;
const ROUND_UP: u32 = 0b1010;

/// The machine code of `plan` as an assembled pass (see the module), or `None` when the plan
/// is not one the fused routine would run ([`Plan::is_valid`]), has more than
/// [`MAX_PLAN_REGS`] registers or more rows than it keeps in registers (see [`MAX_ROWS`]), or
/// (on Windows) calls a routine.
///
/// `literals[c]` is the value of constant register `c` where it is a literal of the kernel
/// (not a value computed per call): a minimum or maximum with a literal that is not NaN needs
/// no NaN fix-up ([`Emitter::min_max`]).
pub(crate) fn assemble(plan: &Plan, literals: &[Option<f64>]) -> Option<Vec<u8>> {
    let h = plan.head;
    let rows = (h.inputs + h.outputs) as usize;
    if !plan.is_valid() || h.regs > MAX_PLAN_REGS || rows > MAX_ROWS {
        return None;
    }
    let f64 = match h.dtype_bytes {
        4 => false,
        8 => true,
        _ => return None,
    };
    let e = Emitter::new(plan, f64, literals).ok()?;
    let chunked = plan.steps.iter().any(|s| s.op >= op::ROUTINE);
    // The tile routines are `extern "C"`: System V's calls only where that is the C ABI.
    if chunked && cfg!(windows) {
        return None;
    }
    // An operand the pass has no place for (a constant as a routine's argument, too many rows
    // in one segment) or an encoding the assembler lacks: no pass, the fused routine runs it.
    if chunked {
        e.chunked_pass().ok()
    } else {
        e.pass().ok()
    }
}

/// The instructions of an assembled pass as text (GNU syntax, as Cranelift's listings), one a
/// line with its offset, up to its `ret`; the constants after it are counted, not decoded.
pub(crate) fn disassemble(code: &[u8]) -> String {
    use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Mnemonic};
    let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut formatter = GasFormatter::new();
    formatter.options_mut().set_branch_leading_zeros(false);
    formatter.options_mut().set_uppercase_hex(false);
    let mut text = String::new();
    let mut line = String::new();
    while decoder.can_decode() {
        let inst = decoder.decode();
        line.clear();
        formatter.format(&inst, &mut line);
        text += &format!("  {:4x}:  {line}\n", inst.ip());
        if inst.mnemonic() == Mnemonic::Ret {
            let rest = code.len() - decoder.position();
            text += &format!("  ; {rest} bytes of constants\n");
            break;
        }
    }
    text
}

/// The row (inputs, then outputs) an operand or destination code names, for a plan of
/// `inputs` input rows; `None` for a register.
fn row_of(inputs: u32, code: u32) -> Option<usize> {
    if code >= OUTPUT {
        Some((inputs + code - OUTPUT) as usize)
    } else if code >= INPUT {
        Some((code - INPUT) as usize)
    } else {
        None
    }
}

/// The number of operands a step reads.
fn arity(code: u32) -> usize {
    if code == op::FOLD {
        return 1;
    }
    crate::aot::fused::exact_arity(code).unwrap_or_else(|| {
        AotFn::ALL
            .get(code.wrapping_sub(op::ROUTINE) as usize)
            .map_or(1, |r| r.arity())
    })
}

/// The segments of a plan with routine steps: maximal runs of exact steps, and each routine
/// step alone, in order.
fn segments(steps: &[Step]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (j, s) in steps.iter().enumerate() {
        let exact = s.op < op::ROUTINE;
        match out.last_mut() {
            Some(last) if exact && steps[last.start].op < op::ROUTINE => last.end = j + 1,
            _ => out.push(j..j + 1),
        }
    }
    out
}

/// Elements per chunk of a pass with routine steps: each routine runs over a chunk, between
/// the exact steps' loops over it (the fused routine's chunk, whose registers stay in L1).
const CHUNK: i32 = crate::aot::fused::CHUNK as i32;

/// How far ahead of a block-by-block pass its rows' lines are fetched, in bytes, on rows of
/// [`LONG_ROW`] bytes or more. `sin(x*2)+y` out of L3 (`compare.sh`, 2026-11-29): at 16,384
/// and 65,536 elements 1.10–1.17× gcc's speed with it against 0.94–0.99 without, at 4,096 about
/// the same, at 1,024 (4 KiB rows) 0.88–0.92 against 0.97–1.00, so shorter rows are not
/// fetched ahead. Exact passes (the PID clip at 65,536, bound by memory bandwidth) measured the
/// same with and without.
const FETCH_AHEAD: i32 = 1024;

/// The shortest row (in bytes) a block-by-block pass fetches ahead ([`FETCH_AHEAD`]).
const LONG_ROW: i32 = 16 * 1024;

/// Bytes per step of a block-by-block pass ([`Emitter::chunked_pass`]): a block of the
/// routines' block entries ([`crate::aot::BLOCK_BYTES`]), four vectors.
const BLOCK: i32 = crate::aot::BLOCK_BYTES as i32;

/// The general registers of a chunked pass's rows within one segment of exact steps: the
/// caller-saved ones that are not the loop's offset (`rax`) and bound (`rcx`).
const SEGMENT_ROW_REGS: [AsmRegister64; 7] = [r8, r9, r10, r11, rdi, rsi, rdx];

/// An operand of a step: a `ymm` register, or the element at the loop's offset of a row (its
/// address in a general register) or of a chunk buffer (its offset in the frame).
#[derive(Clone, Copy)]
enum Src {
    Reg(usize),
    Row(AsmRegister64),
    Buf(i32),
}

/// How a step's instructions act: on a whole vector, or on the lowest element.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Width {
    Vector,
    Scalar,
}

/// The instruction forms of one step: packed or scalar, single or double.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Ps,
    Pd,
    Ss,
    Sd,
}

/// Writes a pass: [`Emitter::pass`].
struct Emitter<'p> {
    a: CodeAssembler,
    plan: &'p Plan,
    f64: bool,
    /// The literal value of each constant register that has one ([`assemble`]).
    literals: &'p [Option<f64>],
    /// The general register holding each row's address (inputs, then outputs) in the code being
    /// written: every row in a pass without routines, the segment's rows in a chunked pass.
    rows: Vec<Option<AsmRegister64>>,
    /// The frame offset of each plan register's chunk buffer, where its values cross from one
    /// segment of a chunked pass to another ([`Emitter::chunked_pass`]).
    bufs: Vec<Option<i32>>,
    /// For each step, whether its result is also stored into its register's chunk buffer.
    spilled: Vec<bool>,
    /// The plan registers holding their current value in their `ymm` register, one bit each
    /// (the constants, and each register written so far in the steps being written).
    live: u32,
    /// The sign bit of each element, then every bit but it, then `1.0` in each element (one
    /// vector each, after the code).
    sign: CodeLabel,
    magnitude: CodeLabel,
    one: CodeLabel,
    /// In a reduction pass ([`reduction`]): its reductions' folds, the register of the first
    /// accumulator (each reduction has `vectors` in a row, one per vector of a step), and the
    /// vector of the step being written.
    folds: &'p [Fold],
    first_acc: usize,
    vectors: usize,
    vector: usize,
    /// For each input row, the register its element is loaded into once in the steps being
    /// written, where more than one step reads it ([`Emitter::load_shared_rows`]).
    loaded_rows: Vec<Option<usize>>,
}

/// Emits `$ps`/`$pd`/`$ss`/`$sd` `d, a, b` on the form's registers, `b` a register or a row.
macro_rules! three {
    ($e:expr, $form:expr, [$ps:ident, $pd:ident, $ss:ident, $sd:ident], $d:expr, $a:expr, $b:expr) => {{
        let (d, a) = ($d, $a);
        match ($form, $e.operand($b)) {
            (Form::Ps, Ok(b)) => $e.a.$ps(YMM[d], YMM[a], YMM[b]),
            (Form::Pd, Ok(b)) => $e.a.$pd(YMM[d], YMM[a], YMM[b]),
            (Form::Ss, Ok(b)) => $e.a.$ss(XMM[d], XMM[a], XMM[b]),
            (Form::Sd, Ok(b)) => $e.a.$sd(XMM[d], XMM[a], XMM[b]),
            (Form::Ps, Err(m)) => $e.a.$ps(YMM[d], YMM[a], ymmword_ptr(m)),
            (Form::Pd, Err(m)) => $e.a.$pd(YMM[d], YMM[a], ymmword_ptr(m)),
            (Form::Ss, Err(m)) => $e.a.$ss(XMM[d], XMM[a], dword_ptr(m)),
            (Form::Sd, Err(m)) => $e.a.$sd(XMM[d], XMM[a], qword_ptr(m)),
        }
    }};
}

// After `three!`, which it uses.
mod reduction;
pub(crate) use reduction::{Fold, FoldOp, assemble_reduction};

impl<'p> Emitter<'p> {
    fn new(plan: &'p Plan, f64: bool, literals: &'p [Option<f64>]) -> Result<Emitter<'p>, IcedError> {
        let mut a = CodeAssembler::new(64)?;
        let (sign, magnitude, one) = (a.create_label(), a.create_label(), a.create_label());
        Ok(Emitter {
            a,
            plan,
            f64,
            literals,
            rows: Vec::new(),
            bufs: vec![None; plan.head.regs as usize],
            spilled: vec![false; plan.steps.len()],
            live: 0,
            sign,
            magnitude,
            one,
            folds: &[],
            first_acc: 0,
            vectors: 1,
            vector: 0,
            loaded_rows: Vec::new(),
        })
    }

    /// The element size in bytes.
    fn size(&self) -> u32 {
        if self.f64 { 8 } else { 4 }
    }

    fn form(&self, width: Width) -> Form {
        match (width, self.f64) {
            (Width::Vector, false) => Form::Ps,
            (Width::Vector, true) => Form::Pd,
            (Width::Scalar, false) => Form::Ss,
            (Width::Scalar, true) => Form::Sd,
        }
    }

    /// The whole pass: the prologue (rows into general registers, constants broadcast), the
    /// vector loop, the scalar loop over the last elements, the epilogue and the constants.
    fn pass(mut self) -> Result<Vec<u8>, Fail> {
        // System V: rdi = consts, rsi = rows, rdx = n.
        let saved = self.rows_into_registers()?;
        self.a.shl(rdx, self.shift())?;
        let steps = 0..self.plan.steps.len();
        self.exact_loops(steps, rdx)?;
        self.epilogue(saved)
    }

    /// The end of a pass that kept its rows in registers: the upper halves cleared (the
    /// caller's code uses SSE encodings), the callee-saved registers of `saved` popped, the
    /// return, the constants; the machine code.
    fn epilogue(mut self, saved: &[AsmRegister64]) -> Result<Vec<u8>, Fail> {
        self.a.vzeroupper()?;
        for &r in saved.iter().rev() {
            self.a.pop(r)?;
        }
        self.a.ret()?;
        self.constants()?;
        Ok(self.a.assemble(0)?)
    }

    /// The prologue of a pass that keeps every row in a register: the callee-saved ones it
    /// uses pushed (returned, to pop), each row's address from the table at `rsi` into its
    /// register, the constants at `rdi` broadcast.
    fn rows_into_registers(&mut self) -> Result<&'static [AsmRegister64], Fail> {
        let h = self.plan.head;
        let rows = (h.inputs + h.outputs) as usize;
        let saved = &ROW_REGS[CALLER_SAVED_ROWS.min(rows)..rows];
        for &r in saved {
            self.a.push(r)?;
        }
        for (k, &r) in ROW_REGS[..rows].iter().enumerate() {
            self.a.mov(r, qword_ptr(rsi + 8 * k as i32))?;
        }
        self.rows = ROW_REGS[..rows].iter().map(|&r| Some(r)).collect();
        self.broadcast_constants(rdi)?;
        Ok(saved)
    }

    /// log2 of the element size.
    fn shift(&self) -> u32 {
        if self.f64 { 3 } else { 2 }
    }

    /// Broadcasts the plan's constants, read from `consts`, into their registers.
    fn broadcast_constants(&mut self, consts: AsmRegister64) -> Result<(), IcedError> {
        for (c, &reg) in YMM.iter().enumerate().take(self.plan.head.consts as usize) {
            let at = consts + (c as u32 * self.size()) as i32;
            if self.f64 {
                self.a.vbroadcastsd(reg, qword_ptr(at))?;
            } else {
                self.a.vbroadcastss(reg, dword_ptr(at))?;
            }
        }
        Ok(())
    }

    /// The exact steps `steps` over the elements at byte offsets `0..bytes` of the rows (and
    /// chunk buffers): a loop of whole vectors, then a loop of single elements. Uses `rax` (the
    /// offset) and `rcx`.
    ///
    /// The vector loop is not unrolled: two or four vectors a step measured the same on the
    /// PID clip at 1,024 elements (each step's vectors are independent of the last step's).
    fn exact_loops(&mut self, steps: std::ops::Range<usize>, bytes: AsmRegister64) -> Result<(), Fail> {
        self.a.mov(rcx, bytes)?;
        self.a.and(rcx, -32)?;
        self.a.xor(eax, eax)?;
        let mut vector_loop = self.a.create_label();
        let mut scalar_start = self.a.create_label();
        let mut scalar_loop = self.a.create_label();
        let mut done = self.a.create_label();
        self.a.test(rcx, rcx)?;
        self.a.jz(scalar_start)?;
        self.a.set_label(&mut vector_loop)?;
        self.body(Width::Vector, steps.clone())?;
        self.a.add(rax, 32)?;
        self.a.cmp(rax, rcx)?;
        self.a.jb(vector_loop)?;
        self.a.set_label(&mut scalar_start)?;
        self.a.cmp(rax, bytes)?;
        self.a.jae(done)?;
        self.a.set_label(&mut scalar_loop)?;
        self.body(Width::Scalar, steps)?;
        self.a.add(rax, self.size() as i32)?;
        self.a.cmp(rax, bytes)?;
        self.a.jb(scalar_loop)?;
        self.a.set_label(&mut done)?;
        Ok(())
    }

    /// A pass with routine steps. The plan's steps fall into segments: runs of exact steps,
    /// and single routine steps. The pass runs over the row chunk by chunk: each segment in
    /// turn over the whole chunk, an exact run as the loops of a pass without routines, a
    /// routine step as one call of its tile routine on the chunk. A value read in another
    /// segment than its own, or by or from a routine, also lives in its register's chunk
    /// buffer in the frame; a routine reads and writes rows in place.
    ///
    /// A plan with one routine step runs block by block ([`BLOCK`] bytes, four vectors): the
    /// exact runs on the block's vectors, the routine through its block entry
    /// ([`AotFn::block`]), the rows' lines fetched ahead on long rows ([`FETCH_AHEAD`]); the
    /// elements after the last whole block run as one short chunk, through the tile routine.
    /// A block entry's sources and result never overlap (its references promise it): the
    /// result is an output row or its register's own buffer, a source an input row or another
    /// register's buffer (a step never writes one of its sources).
    /// Memory traffic then interleaves with the routine's arithmetic as in the loop a C
    /// compiler writes around a vector math call: `sin(x*2)+y` out of L3 at 1,024 elements ran
    /// at 0.97–1.00× gcc's speed with blocks of two vectors against 0.89–0.94× in chunks of
    /// 256, and at 1.14–1.42× with blocks of four through the AVX-512 entries (`compare.sh`,
    /// 2026-11-29). With more routine steps the chunks ([`CHUNK`] elements) stay: the 10-op
    /// chain, three routines, measured the same either way (1.30–1.38× gcc's speed block by
    /// block, 1.27–1.30× in chunks, at 1,024).
    ///
    /// Registers: `rbx` the constants, `rbp` the row table, `r12` the chunk's byte offset,
    /// `r13` the row's bytes, `r14` the chunk's bytes (block by block: the first offset not to
    /// fetch ahead from), `r15` the caller's stack pointer: all callee-saved, so that they
    /// survive the routines' calls.
    fn chunked_pass(mut self) -> Result<Vec<u8>, Fail> {
        let plan = self.plan;
        let h = plan.head;
        let segments = segments(&plan.steps);
        // Each step's segment.
        let mut segment_of = vec![0; plan.steps.len()];
        for (k, range) in segments.iter().enumerate() {
            for j in range.clone() {
                segment_of[j] = k;
            }
        }
        let routine = |j: usize| plan.steps[j].op >= op::ROUTINE;
        let by_block = plan.steps.iter().filter(|s| s.op >= op::ROUTINE).count() == 1;
        // The values that cross segments, and the registers that therefore need buffers.
        let chunk_bytes = if by_block {
            BLOCK
        } else {
            CHUNK * self.size() as i32
        };
        let mut frame = 0;
        for (j, step) in plan.steps.iter().enumerate() {
            if step.dst >= h.regs {
                continue;
            }
            let r = step.dst;
            let mut crosses = routine(j);
            for (k, later) in plan.steps.iter().enumerate().skip(j + 1) {
                let reads = later.a == r || (later.b == r && arity(later.op) == 2);
                if reads && (routine(k) || segment_of[k] != segment_of[j]) {
                    crosses = true;
                }
                if later.dst == r {
                    break;
                }
            }
            if crosses {
                self.spilled[j] = !routine(j);
                if self.bufs[r as usize].is_none() {
                    self.bufs[r as usize] = Some(frame);
                    frame += chunk_bytes;
                }
            }
        }
        // A constant a routine reads is broadcast into a chunk buffer once.
        let mut filled = Vec::new();
        for (k, step) in plan.steps.iter().enumerate() {
            if !routine(k) {
                continue;
            }
            let srcs: &[u32] = if arity(step.op) == 2 {
                &[step.a, step.b]
            } else {
                &[step.a]
            };
            for &c in srcs {
                if c < h.consts && self.bufs[c as usize].is_none() {
                    self.bufs[c as usize] = Some(frame);
                    filled.push((c, frame));
                    frame += chunk_bytes;
                }
            }
        }
        for &r in [rbp, rbx, r12, r13, r14, r15].iter() {
            self.a.push(r)?;
        }
        self.a.mov(r15, rsp)?;
        // The frame's pages are touched in order (a thread's stack has one guard page), then
        // the stack pointer moves below the frame, aligned for 32-byte accesses (and calls).
        for page in 1..=(frame + 64) / 4096 {
            self.a.mov(byte_ptr(rsp - 4096 * page), 0)?;
        }
        self.a.sub(rsp, frame + 64)?;
        self.a.and(rsp, -64)?;
        self.a.mov(rbx, rdi)?;
        self.a.mov(rbp, rsi)?;
        for (c, off) in filled {
            let at = rbx + (c * self.size()) as i32;
            if self.f64 {
                self.a.vbroadcastsd(ymm0, qword_ptr(at))?;
            } else {
                self.a.vbroadcastss(ymm0, dword_ptr(at))?;
            }
            for v in (0..chunk_bytes).step_by(32) {
                self.a.vmovups(ymmword_ptr(rsp + off + v), ymm0)?;
            }
        }
        self.a.mov(r13, rdx)?;
        self.a.shl(r13, self.shift())?;
        self.a.xor(r12d, r12d)?;
        let mut done = self.a.create_label();
        if by_block {
            // Whole blocks: each segment on the block's vectors, a routine through its block
            // entry; then the elements left (fewer than a block) as one short chunk.
            let mut vector_loop = self.a.create_label();
            let mut rest = self.a.create_label();
            let mut short = self.a.create_label();
            self.a.xor(r14d, r14d)?;
            self.a.cmp(r13, LONG_ROW)?;
            self.a.jb(short)?;
            self.a.lea(r14, qword_ptr(r13 - FETCH_AHEAD))?;
            self.a.set_label(&mut short)?;
            self.a.cmp(r13, BLOCK)?;
            self.a.jb(rest)?;
            self.a.set_label(&mut vector_loop)?;
            // Rows' lines fetched `FETCH_AHEAD` bytes ahead, inputs for reading and outputs for
            // writing, up to the rows' end, on rows of `LONG_ROW` bytes or more (r14: the first
            // offset not to fetch from).
            let mut skip = self.a.create_label();
            self.prefetch_rows(&mut skip)?;
            self.a.set_label(&mut skip)?;
            for range in &segments {
                let first = plan.steps[range.start];
                if first.op >= op::ROUTINE {
                    self.routine_call(first, true)?;
                } else {
                    self.segment_rows(range.clone())?;
                    self.broadcast_constants(rbx)?;
                    self.a.xor(eax, eax)?;
                    for v in 0..BLOCK / 32 {
                        if v > 0 {
                            self.a.add(rax, 32)?;
                        }
                        self.body(Width::Vector, range.clone())?;
                    }
                }
            }
            self.a.add(r12, BLOCK)?;
            self.a.lea(rax, qword_ptr(r12 + BLOCK))?;
            self.a.cmp(rax, r13)?;
            self.a.jbe(vector_loop)?;
            self.a.set_label(&mut rest)?;
            self.a.mov(r14, r13)?;
            self.a.sub(r14, r12)?;
            self.a.jz(done)?;
            self.chunk_segments(&segments)?;
            // A jump to the next instruction: the last segment's own end label and `done` may
            // not mark the same instruction.
            self.a.jmp(done)?;
        } else {
            let mut chunk_loop = self.a.create_label();
            self.a.test(r13, r13)?;
            self.a.jz(done)?;
            self.a.set_label(&mut chunk_loop)?;
            // r14 = min(the chunk's bytes, the bytes left).
            self.a.mov(r14, r13)?;
            self.a.sub(r14, r12)?;
            self.a.mov(eax, chunk_bytes)?;
            self.a.cmp(r14, rax)?;
            self.a.cmova(r14, rax)?;
            // The input rows' next chunk is fetched while this one computes (as the fused routine
            // does): each segment's pass over a chunk is short, and the hardware would otherwise
            // wait for each row's lines segment by segment (`sin(x*2)+y` at 65,536 elements, in
            // chunks). A prefetch never faults, past a row's end included.
            for k in 0..h.inputs as i32 {
                self.a.mov(rax, qword_ptr(rbp + 8 * k))?;
                self.a.add(rax, r12)?;
                for line in (0..chunk_bytes).step_by(64) {
                    self.a.prefetcht0(byte_ptr(rax + chunk_bytes + line))?;
                }
            }
            self.chunk_segments(&segments)?;
            self.a.add(r12, r14)?;
            self.a.cmp(r12, r13)?;
            self.a.jb(chunk_loop)?;
        }
        self.a.set_label(&mut done)?;
        self.a.vzeroupper()?;
        self.a.mov(rsp, r15)?;
        for &r in [r15, r14, r13, r12, rbx, rbp].iter() {
            self.a.pop(r)?;
        }
        self.a.ret()?;
        self.constants()?;
        Ok(self.a.assemble(0)?)
    }

    /// The segments over the chunk at r12 of r14 bytes: an exact run's loops, or a routine's
    /// call on the chunk.
    fn chunk_segments(&mut self, segments: &[std::ops::Range<usize>]) -> Result<(), Fail> {
        for range in segments {
            let first = self.plan.steps[range.start];
            if first.op >= op::ROUTINE {
                self.routine_call(first, false)?;
            } else {
                self.segment_rows(range.clone())?;
                self.broadcast_constants(rbx)?;
                self.exact_loops(range.clone(), r14)?;
            }
        }
        Ok(())
    }

    /// In a block-by-block pass, before each block: unless the block's offset (r12) is at or
    /// past r14 (then to `skip`), fetches the block's lines `FETCH_AHEAD` bytes on in every row,
    /// an input's for reading and an output's for writing. Every line: with blocks of two
    /// lines, fetching only the first read 1.12–1.14× gcc's speed on `sin(x*2)+y` at 16,384
    /// and 65,536 elements against 1.17–1.26× with both (`compare.sh`, 2026-11-29).
    fn prefetch_rows(&mut self, skip: &mut CodeLabel) -> Result<(), IcedError> {
        let h = self.plan.head;
        self.a.cmp(r12, r14)?;
        self.a.jae(*skip)?;
        for k in 0..(h.inputs + h.outputs) as i32 {
            self.a.mov(rax, qword_ptr(rbp + 8 * k))?;
            for line in 0..BLOCK / 64 {
                let at = byte_ptr(rax + r12 + FETCH_AHEAD + 64 * line);
                if k < h.inputs as i32 {
                    self.a.prefetcht0(at)?;
                } else {
                    self.a.prefetchw(at)?;
                }
            }
        }
        Ok(())
    }

    /// Loads the addresses at the chunk's offset of the rows the exact steps `steps` read or
    /// write into [`SEGMENT_ROW_REGS`].
    fn segment_rows(&mut self, steps: std::ops::Range<usize>) -> Result<(), Fail> {
        let h = self.plan.head;
        let mut used: Vec<usize> = Vec::new();
        for s in &self.plan.steps[steps] {
            let mut codes = vec![s.a];
            if arity(s.op) == 2 {
                codes.push(s.b);
            }
            used.extend(
                codes
                    .into_iter()
                    .chain([s.dst])
                    .filter_map(|c| row_of(h.inputs, c)),
            );
        }
        used.sort_unstable();
        used.dedup();
        if used.len() > SEGMENT_ROW_REGS.len() {
            return Err(Fail::Step);
        }
        self.rows = vec![None; (h.inputs + h.outputs) as usize];
        for (&k, &reg) in used.iter().zip(&SEGMENT_ROW_REGS) {
            self.a.mov(reg, qword_ptr(rbp + 8 * k as i32))?;
            self.a.add(reg, r12)?;
            self.rows[k] = Some(reg);
        }
        Ok(())
    }

    /// One routine step over the chunk: its arguments' addresses (rows at the chunk's offset,
    /// or chunk buffers), the element count, and the call.
    fn routine_call(&mut self, step: Step, vector: bool) -> Result<(), Fail> {
        let h = self.plan.head;
        let routine = AotFn::ALL
            .get((step.op - op::ROUTINE) as usize)
            .copied()
            .ok_or(Fail::Step)?;
        let unary = routine.arity() == 1;
        let srcs: &[u32] = if unary { &[step.a] } else { &[step.a, step.b] };
        let args: [AsmRegister64; 4] = [rdi, rsi, rdx, rcx];
        for (&code, &reg) in srcs.iter().chain([&step.dst]).zip(&args) {
            if let Some(k) = row_of(h.inputs, code) {
                self.a.mov(reg, qword_ptr(rbp + 8 * k as i32))?;
                self.a.add(reg, r12)?;
            } else {
                let off = self
                    .bufs
                    .get(code as usize)
                    .copied()
                    .flatten()
                    .ok_or(Fail::Step)?;
                self.a.lea(reg, qword_ptr(rsp + off))?;
            }
        }
        match routine.block().filter(|_| vector) {
            Some(entry) => self.a.mov(rax, entry as u64)?,
            None => {
                // The tile routine on the chunk (one vector's elements, in the main loop).
                let count = args[srcs.len() + 1];
                if vector {
                    self.a.mov(count, (BLOCK / self.size() as i32) as u64)?;
                } else {
                    self.a.mov(count, r14)?;
                    self.a.shr(count, self.shift())?;
                }
                self.a.mov(rax, routine.address() as u64)?;
            }
        }
        self.a.call(rax)?;
        Ok(())
    }

    /// The three vector constants after the code.
    fn constants(&mut self) -> Result<(), IcedError> {
        let (sign, one): (u64, u64) = if self.f64 {
            (1 << 63, 1.0f64.to_bits())
        } else {
            let s = 1u64 << 31;
            let o = u64::from(1.0f32.to_bits());
            (s << 32 | s, o << 32 | o)
        };
        self.a.set_label(&mut self.sign)?;
        self.a.dq(&[sign; 4])?;
        self.a.set_label(&mut self.magnitude)?;
        self.a.dq(&[!sign; 4])?;
        self.a.set_label(&mut self.one)?;
        self.a.dq(&[one; 4])
    }

    /// The element of row `k` (inputs, then outputs) at the loop's offset.
    fn row(&self, k: usize) -> Result<AsmMemoryOperand, Fail> {
        let reg = self.rows.get(k).copied().flatten().ok_or(Fail::Step)?;
        Ok(reg + rax)
    }

    /// A step's operand: its register, or (`Err`) its memory.
    fn operand(&self, src: Src) -> Result<usize, AsmMemoryOperand> {
        match src {
            Src::Reg(r) => Ok(r),
            Src::Row(reg) => Err(reg + rax),
            Src::Buf(off) => Err(rsp + rax + off),
        }
    }

    /// Where the step operand `code` is: an input row, a register holding its value, or (a
    /// register whose value was written in another segment) its chunk buffer.
    fn src(&self, code: u32) -> Result<Src, Fail> {
        if code >= INPUT {
            let k = (code - INPUT) as usize;
            if let Some(r) = self.loaded_rows.get(k).copied().flatten() {
                return Ok(Src::Reg(r));
            }
            return Ok(Src::Row(self.rows.get(k).copied().flatten().ok_or(Fail::Step)?));
        }
        if self.live & (1 << code) != 0 {
            return Ok(Src::Reg(code as usize));
        }
        let off = self
            .bufs
            .get(code as usize)
            .copied()
            .flatten()
            .ok_or(Fail::Step)?;
        Ok(Src::Buf(off))
    }

    /// Loads `src` into register `into` unless it is a register already; the register holding it.
    fn in_register(&mut self, form: Form, src: Src, into: usize) -> Result<usize, IcedError> {
        match self.operand(src) {
            Ok(r) => Ok(r),
            Err(m) => {
                self.load(form, into, m)?;
                Ok(into)
            }
        }
    }

    fn load(&mut self, form: Form, d: usize, m: AsmMemoryOperand) -> Result<(), IcedError> {
        match form {
            Form::Ps => self.a.vmovups(YMM[d], ymmword_ptr(m)),
            Form::Pd => self.a.vmovupd(YMM[d], ymmword_ptr(m)),
            Form::Ss => self.a.vmovss(XMM[d], dword_ptr(m)),
            Form::Sd => self.a.vmovsd(XMM[d], qword_ptr(m)),
        }
    }

    fn store(&mut self, form: Form, m: AsmMemoryOperand, s: usize) -> Result<(), IcedError> {
        match form {
            Form::Ps => self.a.vmovups(ymmword_ptr(m), YMM[s]),
            Form::Pd => self.a.vmovupd(ymmword_ptr(m), YMM[s]),
            Form::Ss => self.a.vmovss(dword_ptr(m), XMM[s]),
            Form::Sd => self.a.vmovsd(qword_ptr(m), XMM[s]),
        }
    }

    /// Register to register copy (the whole vector: only its lanes of the form are read).
    fn copy(&mut self, d: usize, s: usize) -> Result<(), IcedError> {
        if d != s {
            self.a.vmovaps(YMM[d], YMM[s])?;
        }
        Ok(())
    }

    /// `d = blend(d, s, mask)`: the lanes of `s` where `mask`'s sign bit is set.
    fn blend(&mut self, form: Form, d: usize, s: usize, mask: usize) -> Result<(), IcedError> {
        match form {
            Form::Ps => self.a.vblendvps(YMM[d], YMM[d], YMM[s], YMM[mask]),
            Form::Pd => self.a.vblendvpd(YMM[d], YMM[d], YMM[s], YMM[mask]),
            Form::Ss => self.a.vblendvps(XMM[d], XMM[d], XMM[s], XMM[mask]),
            Form::Sd => self.a.vblendvpd(XMM[d], XMM[d], XMM[s], XMM[mask]),
        }
    }

    /// `d = a op label's vector` for the bitwise and division ops on a constant of the pass.
    fn with_constant(
        &mut self,
        form: Form,
        which: u32,
        d: usize,
        a: usize,
        label: CodeLabel,
    ) -> Result<(), IcedError> {
        let m = AsmMemoryOperand::from(label);
        let vector = matches!(form, Form::Ps | Form::Pd);
        match (which, vector) {
            (0, true) => self.a.vxorps(YMM[d], YMM[a], ymmword_ptr(m)),
            (0, false) => self.a.vxorps(XMM[d], XMM[a], xmmword_ptr(m)),
            (1, true) => self.a.vandps(YMM[d], YMM[a], ymmword_ptr(m)),
            _ => self.a.vandps(XMM[d], XMM[a], xmmword_ptr(m)),
        }
    }

    /// The exact steps `steps` once, at `width`.
    fn body(&mut self, width: Width, steps: std::ops::Range<usize>) -> Result<(), Fail> {
        let form = self.form(width);
        let inputs = self.plan.head.inputs as usize;
        self.live = (1u32 << self.plan.head.consts) - 1;
        self.load_shared_rows(form, steps.clone())?;
        for j in steps {
            let s = self.plan.steps[j];
            let to_row = s.dst >= OUTPUT;
            let d = if to_row { DST } else { s.dst as usize };
            let a = self.src(s.a)?;
            let b = if arity(s.op) == 2 { self.src(s.b)? } else { a };
            match s.op {
                op::FOLD => {
                    self.fold(form, s.dst as usize, a)?;
                    continue;
                }
                op::COPY => match self.operand(a) {
                    Ok(r) if to_row => {
                        let m = self.row(inputs + (s.dst - OUTPUT) as usize)?;
                        self.store(form, m, r)?;
                        continue;
                    }
                    Ok(r) => self.copy(d, r)?,
                    Err(m) => self.load(form, d, m)?,
                },
                op::ADD => {
                    let a = self.in_register(form, a, d)?;
                    three!(self, form, [vaddps, vaddpd, vaddss, vaddsd], d, a, b)?;
                }
                op::SUB => {
                    let a = self.in_register(form, a, d)?;
                    three!(self, form, [vsubps, vsubpd, vsubss, vsubsd], d, a, b)?;
                }
                op::MUL => {
                    let a = self.in_register(form, a, d)?;
                    three!(self, form, [vmulps, vmulpd, vmulss, vmulsd], d, a, b)?;
                }
                op::DIV => {
                    let a = self.in_register(form, a, d)?;
                    three!(self, form, [vdivps, vdivpd, vdivss, vdivsd], d, a, b)?;
                }
                op::MIN | op::MAX => self.min_max(form, s.op == op::MIN, d, a, b)?,
                op::NEG | op::ABS => {
                    let a = self.in_register(form, a, d)?;
                    let (which, label) = if s.op == op::NEG {
                        (0, self.sign)
                    } else {
                        (1, self.magnitude)
                    };
                    self.with_constant(form, which, d, a, label)?;
                }
                op::SQRT => self.sqrt(form, d, a)?,
                op::RSQRT => {
                    self.sqrt(form, LOADED, a)?;
                    self.load(form, d, AsmMemoryOperand::from(self.one))?;
                    three!(
                        self,
                        form,
                        [vdivps, vdivpd, vdivss, vdivsd],
                        d,
                        d,
                        Src::Reg(LOADED)
                    )?;
                }
                op::RECIP => {
                    // `a` is read after `d` is loaded with ones: a row is read in place.
                    self.load(form, d, AsmMemoryOperand::from(self.one))?;
                    three!(self, form, [vdivps, vdivpd, vdivss, vdivsd], d, d, a)?;
                }
                op::FLOOR | op::CEIL | op::ROUND => {
                    let mode = match s.op {
                        op::FLOOR => ROUND_DOWN,
                        op::CEIL => ROUND_UP,
                        _ => ROUND_NEAREST,
                    };
                    self.round(form, d, a, mode)?;
                }
                // `assemble` takes only exact steps.
                _ => return Err(Fail::Step),
            }
            if to_row {
                let m = self.row(inputs + (s.dst - OUTPUT) as usize)?;
                self.store(form, m, d)?;
            } else {
                self.live |= 1 << d;
                if self.spilled[j] {
                    let off = self.bufs[d].ok_or(Fail::Step)?;
                    self.store(form, rsp + rax + off, d)?;
                }
            }
        }
        Ok(())
    }

    /// Loads each input row that more than one of `steps` reads into a register of its own
    /// (above the plan's registers and the accumulators, below the scratch ones), while
    /// there are such registers: one load of the element instead of one per step.
    fn load_shared_rows(&mut self, form: Form, steps: std::ops::Range<usize>) -> Result<(), Fail> {
        let h = self.plan.head;
        let mut reads = vec![0usize; h.inputs as usize];
        for s in &self.plan.steps[steps] {
            let srcs: &[u32] = if arity(s.op) == 2 { &[s.a, s.b] } else { &[s.a] };
            for &c in srcs {
                if let Some(n) = c.checked_sub(INPUT).and_then(|k| reads.get_mut(k as usize)) {
                    *n += 1;
                }
            }
        }
        self.loaded_rows = vec![None; reads.len()];
        let mut free = (h.regs as usize).max(self.first_acc) + self.folds.len() * self.vectors;
        for (k, &n) in reads.iter().enumerate() {
            if n < 2 || free >= DST {
                continue;
            }
            let Some(reg) = self.rows.get(k).copied().flatten() else {
                continue;
            };
            self.load(form, free, reg + rax)?;
            self.loaded_rows[k] = Some(free);
            free += 1;
        }
        Ok(())
    }

    /// The literal value of `src`, if it is a constant register holding a literal.
    fn literal(&self, src: Src) -> Option<f64> {
        match src {
            Src::Reg(r) => self.literals.get(r).copied().flatten(),
            Src::Row(_) | Src::Buf(_) => None,
        }
    }

    /// `d = min(a, b)` or `max(a, b)`, NumPy's: `a` where `a < b` (`a > b`) or `a` is NaN,
    /// else `b`. `vminps x, y` gives `x < y ? x : y`, which is the op when `a` cannot be NaN
    /// (a literal that is not NaN); and with the operands swapped, when `b` is a literal
    /// neither NaN nor zero (`a` NaN: `a`; a tie: equal values of the same bits). Otherwise
    /// the op's result is blended with `a` where `a` is NaN.
    fn min_max(&mut self, form: Form, min: bool, d: usize, a: Src, b: Src) -> Result<(), IcedError> {
        let not_nan = |v: Option<f64>| v.is_some_and(|v| !v.is_nan());
        let (a, b, fix) = if not_nan(self.literal(a)) {
            (a, b, false)
        } else if not_nan(self.literal(b)) && self.literal(b) != Some(0.0) {
            (b, a, false)
        } else {
            (a, b, true)
        };
        // `d` is never `a`'s register (a step never writes its sources), but a row's value is
        // kept apart from `d`: the blend reads it after the op.
        let a = self.in_register(form, a, LOADED)?;
        if min {
            three!(self, form, [vminps, vminpd, vminss, vminsd], d, a, b)?;
        } else {
            three!(self, form, [vmaxps, vmaxpd, vmaxss, vmaxsd], d, a, b)?;
        }
        if fix {
            let a_src = Src::Reg(a);
            three!(
                self,
                form,
                [vcmpunordps, vcmpunordpd, vcmpunordss, vcmpunordsd],
                MASK,
                a,
                a_src
            )?;
            self.blend(form, d, a, MASK)?;
        }
        Ok(())
    }

    fn sqrt(&mut self, form: Form, d: usize, a: Src) -> Result<(), IcedError> {
        match (form, self.operand(a)) {
            (Form::Ps, Ok(r)) => self.a.vsqrtps(YMM[d], YMM[r]),
            (Form::Pd, Ok(r)) => self.a.vsqrtpd(YMM[d], YMM[r]),
            (Form::Ps, Err(m)) => self.a.vsqrtps(YMM[d], ymmword_ptr(m)),
            (Form::Pd, Err(m)) => self.a.vsqrtpd(YMM[d], ymmword_ptr(m)),
            // The scalar forms merge into their first source: `d` itself.
            (Form::Ss, Ok(r)) => self.a.vsqrtss(XMM[d], XMM[d], XMM[r]),
            (Form::Sd, Ok(r)) => self.a.vsqrtsd(XMM[d], XMM[d], XMM[r]),
            (Form::Ss, Err(m)) => self.a.vsqrtss(XMM[d], XMM[d], dword_ptr(m)),
            (Form::Sd, Err(m)) => self.a.vsqrtsd(XMM[d], XMM[d], qword_ptr(m)),
        }
    }

    fn round(&mut self, form: Form, d: usize, a: Src, mode: u32) -> Result<(), IcedError> {
        match (form, self.operand(a)) {
            (Form::Ps, Ok(r)) => self.a.vroundps(YMM[d], YMM[r], mode),
            (Form::Pd, Ok(r)) => self.a.vroundpd(YMM[d], YMM[r], mode),
            (Form::Ps, Err(m)) => self.a.vroundps(YMM[d], ymmword_ptr(m), mode),
            (Form::Pd, Err(m)) => self.a.vroundpd(YMM[d], ymmword_ptr(m), mode),
            (Form::Ss, Ok(r)) => self.a.vroundss(XMM[d], XMM[d], XMM[r], mode),
            (Form::Sd, Ok(r)) => self.a.vroundsd(XMM[d], XMM[d], XMM[r], mode),
            (Form::Ss, Err(m)) => self.a.vroundss(XMM[d], XMM[d], dword_ptr(m), mode),
            (Form::Sd, Err(m)) => self.a.vroundsd(XMM[d], XMM[d], qword_ptr(m), mode),
        }
    }
}
