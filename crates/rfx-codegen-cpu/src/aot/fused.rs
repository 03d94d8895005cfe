//! Fused elementwise passes: one routine call runs a whole elementwise body (contiguous input
//! loads, exact float ops, the tile routines' transcendentals, contiguous output stores) over a
//! row, chunk by chunk, in AVX2 (or AVX-512) vectors.
//!
//! The body is a [`Plan`]: explicit data the code generator builds from the kernel's LIR (a
//! short list of [`Step`]s over a few registers of [`CHUNK`] elements, the program's input and
//! output rows, and constants broadcast into registers). The routine runs every step over one
//! chunk before the next chunk, so a value passes from its load through the ops around its
//! transcendental to its store while the chunk's registers stay in L1 — no staging buffer over
//! a whole tile, and every op at the host's full vector width (Cranelift's vectors are 128
//! bits on x86-64). The step sequence is fixed for a call, so the branch predictor learns the
//! dispatch.
//!
//! Each step computes what the inline code computes: the exact ops are IEEE operations (the
//! same bits at any vector width), and a transcendental step calls the op's tile routine on the
//! chunk (the same bits at every position and length). A fused pass therefore gives the bits of
//! the staged segments it replaces.

use super::AotFn;
#[cfg(target_arch = "x86_64")]
use super::avx512;

/// Elements per chunk: a register of `f32` is 1 KiB (32 AVX2 vectors), so that the
/// transcendental loops' set-up and a step's dispatch are spread over enough elements, and the
/// few registers a body uses stay in L1 (64 and 512 measured slower, 2026-11-28).
pub(crate) const CHUNK: usize = 256;

/// The shortest row of an elementwise body of one exact op that runs as a fused pass (its
/// whole-row loop, [`one_op_row`]); a shorter one keeps the inline code (128-bit vectors, no
/// call), which is faster below it (measured 2026-11-28 on rows in L1).
pub(crate) const MIN_ONE_OP_ELEMS: usize = 512;

/// The most registers a plan may use (constants included): 16 registers of 256 `f64` are
/// 32 KiB of the routine's stack, of which a body touches only the registers it uses.
pub(crate) const MAX_REGS: u32 = 16;

/// Operand codes at and above this one name an input row (`code - INPUT`).
pub(crate) const INPUT: u32 = 1 << 16;

/// Destination codes at and above this one name an output row (`code - OUTPUT`).
pub(crate) const OUTPUT: u32 = 2 << 16;

/// Opcodes of the exact steps; a transcendental step's opcode is `ROUTINE` plus its routine's
/// index in [`AotFn::ALL`].
pub(crate) mod op {
    pub(crate) const COPY: u32 = 0;
    pub(crate) const ADD: u32 = 1;
    pub(crate) const SUB: u32 = 2;
    pub(crate) const MUL: u32 = 3;
    pub(crate) const DIV: u32 = 4;
    pub(crate) const MIN: u32 = 5;
    pub(crate) const MAX: u32 = 6;
    pub(crate) const NEG: u32 = 7;
    pub(crate) const ABS: u32 = 8;
    pub(crate) const SQRT: u32 = 9;
    pub(crate) const RSQRT: u32 = 10;
    pub(crate) const RECIP: u32 = 11;
    pub(crate) const FLOOR: u32 = 12;
    pub(crate) const CEIL: u32 = 13;
    pub(crate) const ROUND: u32 = 14;
    /// A reduction's fold of a value into its partials (`dst` the reduction, `a` the value):
    /// a step of assembled reduction passes only ([`crate::asm::assemble_reduction`]), which
    /// the routine refuses ([`super::Plan::is_valid`]).
    pub(crate) const FOLD: u32 = 32;
    pub(crate) const ROUTINE: u32 = 64;
}

/// One step: `dst = op(a, b)` over a chunk. `a` and `b` are registers (below [`MAX_REGS`]) or
/// input rows (`INPUT + k`); `b` is unused by unary ops. `dst` is a register or an output row
/// (`OUTPUT + k`), and never one of the step's own source registers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) op: u32,
    pub(crate) dst: u32,
    pub(crate) a: u32,
    pub(crate) b: u32,
}

/// The head of a plan in memory, followed directly by its `steps` [`Step`]s. The routine's
/// arguments: the head, the constants (one element each, broadcast into registers
/// `0..consts`), the row pointers (`inputs` inputs, then `outputs` outputs) and the row length.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) steps: u32,
    pub(crate) regs: u32,
    pub(crate) consts: u32,
    pub(crate) inputs: u32,
    pub(crate) outputs: u32,
    pub(crate) dtype_bytes: u32,
}

/// A fused pass: its head and steps, as the code generator writes them into memory
/// ([`Plan::words`]) for the routine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) head: Head,
    pub(crate) steps: Vec<Step>,
}

impl Plan {
    /// The plan as the 32-bit words the routine reads: the head's six, then four per step.
    pub(crate) fn words(&self) -> Vec<u32> {
        let h = self.head;
        let mut words = vec![h.steps, h.regs, h.consts, h.inputs, h.outputs, h.dtype_bytes];
        for s in &self.steps {
            words.extend([s.op, s.dst, s.a, s.b]);
        }
        words
    }

    /// Whether the routine may run the plan: every operand in range, no step writing one of
    /// its own source registers, every routine of the plan's dtype and a one-result routine,
    /// every register read after it is written (or a constant), every constant register below
    /// `regs`. The routine checks this on entry and writes
    /// nothing for a plan that fails it.
    pub(crate) fn is_valid(&self) -> bool {
        valid(&self.head, &self.steps)
    }

    /// The plan without its [`op::FOLD`] steps: the exact and routine steps of a reduction's
    /// plan, which the routine's check ([`Plan::is_valid`]) applies to.
    pub(crate) fn without_folds(&self) -> Plan {
        let steps: Vec<Step> = self.steps.iter().copied().filter(|s| s.op != op::FOLD).collect();
        Plan {
            head: Head {
                steps: steps.len() as u32,
                ..self.head
            },
            steps,
        }
    }
}

/// The operands an exact step's opcode reads (1 or 2); `None` for any other code.
pub(crate) fn exact_arity(code: u32) -> Option<usize> {
    match code {
        op::COPY
        | op::NEG
        | op::ABS
        | op::SQRT
        | op::RSQRT
        | op::RECIP
        | op::FLOOR
        | op::CEIL
        | op::ROUND => Some(1),
        op::ADD | op::SUB | op::MUL | op::DIV | op::MIN | op::MAX => Some(2),
        _ => None,
    }
}

fn valid(head: &Head, steps: &[Step]) -> bool {
    let h = head;
    if h.regs > MAX_REGS || h.consts > h.regs || h.steps as usize != steps.len() {
        return false;
    }
    // The registers written so far (the constants from the start), one bit each.
    let mut written: u64 = (1u64 << h.consts) - 1;
    let dst_ok =
        |code: u32| (h.consts..h.regs).contains(&code) || (OUTPUT..OUTPUT + h.outputs).contains(&code);
    steps.iter().all(|s| {
        let src_ok = |code: u32| {
            (code < h.regs && written & (1 << code) != 0) || (INPUT..INPUT + h.inputs).contains(&code)
        };
        let arity = match exact_arity(s.op) {
            Some(arity) => arity,
            None => match s
                .op
                .checked_sub(op::ROUTINE)
                .and_then(|i| AotFn::ALL.get(i as usize))
            {
                Some(r)
                    if r.results() == 1
                        && r.arity() <= 2
                        && r.dtype().size_bytes() == h.dtype_bytes as usize
                        && !matches!(r.computes(), super::table::Computes::Fused) =>
                {
                    r.arity()
                }
                _ => return false,
            },
        };
        let srcs: &[u32] = if arity == 2 { &[s.a, s.b] } else { &[s.a] };
        let ok = dst_ok(s.dst) && srcs.iter().all(|&c| src_ok(c) && c != s.dst);
        if s.dst < h.regs {
            written |= 1 << s.dst;
        }
        ok
    })
}

/// An operand of a one-op row: an input row (its index) or a constant (its register).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowOperand {
    Row(usize),
    Const(usize),
}

/// The op of a plan that is one exact step from input rows or constants (at least one row)
/// into an output row: its opcode, its operands and its output row. The routine runs such a
/// plan as one loop over the whole row, with no chunk registers and nothing staged.
fn one_op_row(head: &Head, steps: &[Step]) -> Option<(u32, RowOperand, RowOperand, usize)> {
    let [s] = steps else { return None };
    let operand = |code: u32| {
        if code >= INPUT {
            Some(RowOperand::Row((code - INPUT) as usize))
        } else if code < head.consts {
            Some(RowOperand::Const(code as usize))
        } else {
            None
        }
    };
    let (a, b) = (operand(s.a)?, operand(s.b)?);
    let unary = matches!(
        s.op,
        op::COPY | op::NEG | op::ABS | op::SQRT | op::RSQRT | op::RECIP | op::FLOOR | op::CEIL | op::ROUND
    );
    let binary = (op::ADD..=op::MAX).contains(&s.op);
    let has_row = matches!(a, RowOperand::Row(_)) || (binary && matches!(b, RowOperand::Row(_)));
    let out = s.dst.checked_sub(OUTPUT)? as usize;
    ((unary || binary) && has_row).then_some((s.op, a, b, out))
}

/// [`one_op_row`] of a plan that [`valid`] accepts, checked with only the tests such a plan
/// needs (a one-op row is the routine's shortest call, so its entry stays short): the
/// registers within [`MAX_REGS`], the operands' rows and constants and the output row in
/// range. `None` for any other plan (the routine then checks it with [`valid`]).
fn valid_one_op_row(head: &Head, steps: &[Step]) -> Option<(u32, RowOperand, RowOperand, usize)> {
    if head.regs > MAX_REGS || head.consts > head.regs || head.steps as usize != steps.len() {
        return None;
    }
    let (code, a, b, out) = one_op_row(head, steps)?;
    let in_range = |o: RowOperand| match o {
        RowOperand::Row(k) => k < head.inputs as usize,
        RowOperand::Const(c) => c < head.consts as usize,
    };
    let binary = (op::ADD..=op::MAX).contains(&code);
    (in_range(a) && (!binary || in_range(b)) && out < head.outputs as usize).then_some((code, a, b, out))
}

impl Plan {
    /// Whether the routine runs this plan as one loop over the whole row ([`one_op_row`]).
    pub(crate) fn is_one_op_row(&self) -> bool {
        one_op_row(&self.head, &self.steps).is_some()
    }
}

/// Computes `$body` with `$f` bound to the binary exact op `$code` of `$t` (ADD to MAX).
macro_rules! with_binary_op {
    ($code:expr, $t:ty, $f:ident => $body:expr) => {
        match $code {
            op::ADD => {
                let $f = |x: $t, y: $t| x + y;
                $body
            }
            op::SUB => {
                let $f = |x: $t, y: $t| x - y;
                $body
            }
            op::MUL => {
                let $f = |x: $t, y: $t| x * y;
                $body
            }
            op::DIV => {
                let $f = |x: $t, y: $t| x / y;
                $body
            }
            // NumPy's NaN-propagating minimum and maximum, the second operand on ties.
            op::MIN => {
                let $f = |x: $t, y: $t| if x < y || x.is_nan() { x } else { y };
                $body
            }
            _ => {
                let $f = |x: $t, y: $t| if x > y || x.is_nan() { x } else { y };
                $body
            }
        }
    };
}

/// Computes `$body` with `$f` bound to the unary exact op `$code` of `$t`.
macro_rules! with_unary_op {
    ($code:expr, $t:ty, $f:ident => $body:expr) => {
        match $code {
            op::NEG => {
                let $f = |x: $t| -x;
                $body
            }
            op::ABS => {
                let $f = <$t>::abs;
                $body
            }
            op::SQRT => {
                let $f = <$t>::sqrt;
                $body
            }
            op::RSQRT => {
                let $f = |x: $t| 1.0 / x.sqrt();
                $body
            }
            op::RECIP => {
                let $f = |x: $t| 1.0 / x;
                $body
            }
            op::FLOOR => {
                let $f = <$t>::floor;
                $body
            }
            op::CEIL => {
                let $f = <$t>::ceil;
                $body
            }
            op::ROUND => {
                let $f = <$t>::round_ties_even;
                $body
            }
            _ => {
                let $f = |x: $t| x;
                $body
            }
        }
    };
}

/// Defines the fused routine of one float type: the C-ABI entry, which checks the plan and
/// picks the AVX-512 body where the CPU has it, and the body compiled for each target.
macro_rules! fused_routine {
    ($name:ident, $t:ty, $unary:ty, $binary:ty, $avx2:ident, $avx512:ident, $run:ident, $inline:ident, $one_op:ident) => {
        /// The fused pass of a plan over one row of `n` elements (see the module).
        ///
        /// # Safety
        /// `plan` must point to a [`Head`] followed by its steps; `consts` must be valid for
        /// `head.consts` reads; `ptrs` for `head.inputs + head.outputs` row pointers, each
        /// input valid for `n` reads and each output for `n` writes, no output overlapping an
        /// input or another output; the CPU must have AVX2 and FMA
        /// ([`available`](super::available)).
        pub(crate) unsafe extern "C" fn $name(
            plan: *const u8,
            consts: *const $t,
            ptrs: *const *mut $t,
            n: usize,
        ) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract; the plan is checked before use.
            unsafe {
                let head = *(plan as *const Head);
                let steps = std::slice::from_raw_parts(
                    plan.add(std::mem::size_of::<Head>()) as *const Step,
                    head.steps as usize,
                );
                if head.dtype_bytes as usize != std::mem::size_of::<$t>() {
                    return;
                }
                let consts = std::slice::from_raw_parts(consts, head.consts as usize);
                let ptrs = std::slice::from_raw_parts(ptrs, (head.inputs + head.outputs) as usize);
                if let Some(op) = valid_one_op_row(&head, steps) {
                    // One op streams its rows: the AVX2 body measured faster than the AVX-512
                    // one on rows that are not 64-byte aligned (each 512-bit access of such a
                    // row splits two cache lines).
                    return $one_op(op, consts, ptrs, head.inputs as usize, n);
                }
                if !valid(&head, steps) {
                    return;
                }
                if avx512() {
                    $avx512(&head, steps, consts, ptrs, n)
                } else {
                    $avx2(&head, steps, consts, ptrs, n)
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (plan, consts, ptrs, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $avx2(head: &Head, steps: &[Step], consts: &[$t], ptrs: &[*mut $t], n: usize) {
            // SAFETY: forwarded.
            unsafe { $run(head, steps, consts, ptrs, n) }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        unsafe fn $avx512(head: &Head, steps: &[Step], consts: &[$t], ptrs: &[*mut $t], n: usize) {
            // SAFETY: forwarded.
            unsafe { $run(head, steps, consts, ptrs, n) }
        }

        /// A plan of one op ([`one_op_row`]) over the whole row, from its rows (and a
        /// constant) straight into its output row.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $one_op(
            (code, a, b, out): (u32, RowOperand, RowOperand, usize),
            consts: &[$t],
            ptrs: &[*mut $t],
            inputs: usize,
            n: usize,
        ) {
            // SAFETY: the plan was checked (`valid`), so the operands are in range; rows hold
            // `n` elements and the output overlaps no input (the contract).
            unsafe {
                let row = |k: usize| std::slice::from_raw_parts(ptrs[k].cast_const(), n);
                let d = std::slice::from_raw_parts_mut(ptrs[inputs + out], n);
                match (a, b) {
                    (RowOperand::Row(a), _) if !(op::ADD..=op::MAX).contains(&code) => {
                        with_unary_op!(code, $t, f => unary(row(a), d, f))
                    }
                    (RowOperand::Row(a), RowOperand::Row(b)) => {
                        with_binary_op!(code, $t, f => binary(row(a), row(b), d, f))
                    }
                    (RowOperand::Row(a), RowOperand::Const(c)) => {
                        let c = consts[c];
                        with_binary_op!(code, $t, f => unary(row(a), d, |x| f(x, c)))
                    }
                    (RowOperand::Const(c), RowOperand::Row(b)) => {
                        let c = consts[c];
                        with_binary_op!(code, $t, f => unary(row(b), d, |y| f(c, y)))
                    }
                    // `one_op_row` gives an op of constants only no plan.
                    (RowOperand::Const(_), _) => {}
                }
            }
        }

        /// The chunk loop (inlined into each target's body, which gives it its vectors).
        #[inline(always)]
        unsafe fn $run(head: &Head, steps: &[Step], consts: &[$t], ptrs: &[*mut $t], n: usize) {
            // Only the constants are initialised: `valid` checked that every register a step
            // reads is a constant or written by an earlier step, over the same chunk.
            let mut regs = [const { std::mem::MaybeUninit::<[$t; CHUNK]>::uninit() }; MAX_REGS as usize];
            for (reg, &c) in regs.iter_mut().zip(consts) {
                reg.write([c; CHUNK]);
            }
            let regs = regs.as_mut_ptr().cast::<$t>();
            let inputs = head.inputs;
            let mut base = 0;
            while base < n {
                let len = (n - base).min(CHUNK);
                // The input rows' next chunk is fetched while this one computes: each pass over
                // a chunk is short, so the hardware would otherwise wait for each row's lines
                // pass by pass (a prefetch never faults, past a row's end included).
                for &row in &ptrs[..inputs as usize] {
                    let next = row.wrapping_add(base + CHUNK).cast::<i8>().cast_const();
                    for line in (0..CHUNK * std::mem::size_of::<$t>()).step_by(64) {
                        // SAFETY: a prefetch reads nothing and never faults.
                        unsafe {
                            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                                next.wrapping_add(line),
                            )
                        };
                    }
                }
                // SAFETY: registers are `CHUNK` long and `len <= CHUNK`; rows hold `n`
                // elements and `base + len <= n`; a step never writes its own sources
                // (`valid`), and outputs overlap no input or other output (the contract).
                unsafe {
                    let src = |code: u32| -> &[$t] {
                        let p = if code < INPUT {
                            regs.add(code as usize * CHUNK).cast_const()
                        } else {
                            ptrs[(code - INPUT) as usize].add(base).cast_const()
                        };
                        std::slice::from_raw_parts(p, len)
                    };
                    let dst = |code: u32| -> &mut [$t] {
                        let p = if code < OUTPUT {
                            regs.add(code as usize * CHUNK)
                        } else {
                            ptrs[(inputs + code - OUTPUT) as usize].add(base)
                        };
                        std::slice::from_raw_parts_mut(p, len)
                    };
                    for s in steps {
                        let d = dst(s.dst);
                        match s.op {
                            op::COPY => d.copy_from_slice(src(s.a)),
                            op::ADD => binary(src(s.a), src(s.b), d, |x, y| x + y),
                            op::SUB => binary(src(s.a), src(s.b), d, |x, y| x - y),
                            op::MUL => binary(src(s.a), src(s.b), d, |x, y| x * y),
                            op::DIV => binary(src(s.a), src(s.b), d, |x, y| x / y),
                            // NumPy's NaN-propagating minimum and maximum, the second operand
                            // on ties (the inline code's select).
                            op::MIN => binary(src(s.a), src(s.b), d, |x, y| {
                                if x < y || x.is_nan() { x } else { y }
                            }),
                            op::MAX => binary(src(s.a), src(s.b), d, |x, y| {
                                if x > y || x.is_nan() { x } else { y }
                            }),
                            op::NEG => unary(src(s.a), d, |x| -x),
                            op::ABS => unary(src(s.a), d, <$t>::abs),
                            op::SQRT => unary(src(s.a), d, <$t>::sqrt),
                            op::RSQRT => unary(src(s.a), d, |x| 1.0 / x.sqrt()),
                            op::RECIP => unary(src(s.a), d, |x| 1.0 / x),
                            op::FLOOR => unary(src(s.a), d, <$t>::floor),
                            op::CEIL => unary(src(s.a), d, <$t>::ceil),
                            op::ROUND => unary(src(s.a), d, <$t>::round_ties_even),
                            code => {
                                // `valid` checked the index, the dtype and the arity.
                                let routine = AotFn::ALL[(code - op::ROUTINE) as usize];
                                let (a, b) = (src(s.a).as_ptr(), src(s.b).as_ptr());
                                if $inline(routine, (a, b), d.as_mut_ptr(), len) {
                                    // Computed by the routine's loops, inlined.
                                } else if routine.arity() == 2 {
                                    let f = std::mem::transmute::<*const u8, $binary>(routine.address());
                                    f(src(s.a).as_ptr(), src(s.b).as_ptr(), d.as_mut_ptr(), len);
                                } else {
                                    let f = std::mem::transmute::<*const u8, $unary>(routine.address());
                                    f(src(s.a).as_ptr(), d.as_mut_ptr(), len);
                                }
                            }
                        }
                    }
                }
                base += len;
            }
        }
    };
}

/// `d[i] = f(a[i])`.
#[inline(always)]
fn unary<T: Copy>(a: &[T], d: &mut [T], f: impl Fn(T) -> T) {
    for (d, &a) in d.iter_mut().zip(a) {
        *d = f(a);
    }
}

/// `d[i] = f(a[i], b[i])`.
#[inline(always)]
fn binary<T: Copy>(a: &[T], b: &[T], d: &mut [T], f: impl Fn(T, T) -> T) {
    for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
        *d = f(a, b);
    }
}

fused_routine!(
    rfx_aot_fused_f32,
    f32,
    super::TileFn,
    super::Tile2Fn,
    fused_f32_avx2,
    fused_f32_avx512,
    run_f32,
    inline_f32,
    one_op_f32
);
fused_routine!(
    rfx_aot_fused_f64,
    f64,
    super::TileFnF64,
    super::Tile2FnF64,
    fused_f64_avx2,
    fused_f64_avx512,
    run_f64,
    inline_f64,
    one_op_f64
);

/// Defines the whole-row routines of the binary exact ops: `d[i] = op(a[i], b[i])` over rows
/// of `n` elements (the binary tile routines' C ABI). A plan of one such op on two input rows
/// ([`Plan::row_binary`]) is called as its routine directly: no plan to write, check or
/// dispatch on, so a row of a thousand elements pays no more around its loop than a C
/// function's call. Each computes the fused pass's op, so the bits are the pass's.
macro_rules! row_routines {
    ($($name:ident, $body:ident, $t:ty, $code:expr;)*) => {$(
        /// `d[i] = op(a[i], b[i])` for `i < n` (see [`row_routines`]).
        ///
        /// # Safety
        /// `a` and `b` must be valid for `n` reads and `d` for `n` writes, `d` overlapping
        /// neither (`a` and `b` may be the same row); the CPU must have AVX2 and FMA
        /// ([`available`](super::available)).
        pub(crate) unsafe extern "C" fn $name(a: *const $t, b: *const $t, d: *mut $t, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the contract.
            unsafe {
                $body(
                    std::slice::from_raw_parts(a, n),
                    std::slice::from_raw_parts(b, n),
                    std::slice::from_raw_parts_mut(d, n),
                )
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (a, b, d, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        fn $body(a: &[$t], b: &[$t], d: &mut [$t]) {
            with_binary_op!($code, $t, f => binary(a, b, d, f))
        }
    )*};
}

row_routines! {
    rfx_aot_add_f32, add_f32_avx2, f32, op::ADD;
    rfx_aot_sub_f32, sub_f32_avx2, f32, op::SUB;
    rfx_aot_mul_f32, mul_f32_avx2, f32, op::MUL;
    rfx_aot_div_f32, div_f32_avx2, f32, op::DIV;
    rfx_aot_min_f32, min_f32_avx2, f32, op::MIN;
    rfx_aot_max_f32, max_f32_avx2, f32, op::MAX;
    rfx_aot_add_f64, add_f64_avx2, f64, op::ADD;
    rfx_aot_sub_f64, sub_f64_avx2, f64, op::SUB;
    rfx_aot_mul_f64, mul_f64_avx2, f64, op::MUL;
    rfx_aot_div_f64, div_f64_avx2, f64, op::DIV;
    rfx_aot_min_f64, min_f64_avx2, f64, op::MIN;
    rfx_aot_max_f64, max_f64_avx2, f64, op::MAX;
}

impl Plan {
    /// The binary exact op of a one-op row plan whose operands are both input rows, with the
    /// rows (`a`, `b`: input indices) and the output index: a plan its op's whole-row routine
    /// runs ([`row_routines`]).
    pub(crate) fn row_binary(&self) -> Option<(rfx_ir::BinaryOp, usize, usize, usize)> {
        use rfx_ir::BinaryOp as B;
        let (code, RowOperand::Row(a), RowOperand::Row(b), out) = one_op_row(&self.head, &self.steps)? else {
            return None;
        };
        let op = match code {
            op::ADD => B::Add,
            op::SUB => B::Sub,
            op::MUL => B::Mul,
            op::DIV => B::Div,
            op::MIN => B::Min,
            op::MAX => B::Max,
            _ => return None,
        };
        Some((op, a, b, out))
    }
}

/// Runs the `f32` `routine` on a chunk with its loops inlined into the caller (so compiled for
/// the caller's target, with the caller's vectors): calling a routine per chunk costs more than
/// the chunk's ops. `false` for a routine without inline loops (the caller calls it).
///
/// # Safety
/// As the routine's, for `n` elements.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn inline_f32(routine: AotFn, (a, b): (*const f32, *const f32), d: *mut f32, n: usize) -> bool {
    use super::{f32 as m, pow};
    // SAFETY: forwarded.
    unsafe {
        match routine {
            AotFn::SinF32 => m::sin_f32_avx2::chunk(a, d, n),
            AotFn::CosF32 => m::cos_f32_avx2::chunk(a, d, n),
            AotFn::TanF32 => m::tan_f32_avx2::chunk(a, d, n),
            AotFn::ExpF32 => m::exp_f32_avx2::chunk(a, d, n),
            AotFn::Exp2F32 => m::exp2_f32_avx2::chunk(a, d, n),
            AotFn::LogF32 => m::log_f32_avx2::chunk(a, d, n),
            AotFn::Log2F32 => m::log2_f32_avx2::chunk(a, d, n),
            AotFn::TanhF32 => m::tanh_f32_avx2::chunk(a, d, n),
            AotFn::SigmoidF32 => m::sigmoid_f32_avx2::chunk(a, d, n),
            AotFn::AtanF32 => m::atan_f32_avx2::chunk(a, d, n),
            AotFn::AsinF32 => m::asin_f32_avx2::chunk(a, d, n),
            AotFn::AcosF32 => m::acos_f32_avx2::chunk(a, d, n),
            AotFn::Atan2F32 => m::atan2_f32_avx2::chunk(a, b, d, n),
            AotFn::PowF32 => pow::pow_f32_avx2::chunk(a, b, d, n),
            _ => return false,
        }
    }
    true
}

/// [`inline_f32`] for the `f64` routines.
///
/// # Safety
/// As the routine's, for `n` elements.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn inline_f64(routine: AotFn, (a, b): (*const f64, *const f64), d: *mut f64, n: usize) -> bool {
    use super::f64 as m;
    // SAFETY: forwarded.
    unsafe {
        match routine {
            AotFn::SinF64 => m::sin_f64_avx2::chunk(a, d, n),
            AotFn::CosF64 => m::cos_f64_avx2::chunk(a, d, n),
            AotFn::TanF64 => m::tan_f64_avx2::chunk(a, d, n),
            AotFn::ExpF64 => m::exp_f64_avx2::chunk(a, d, n),
            AotFn::Exp2F64 => m::exp2_f64_avx2::chunk(a, d, n),
            AotFn::LogF64 => m::log_f64_avx2::chunk(a, d, n),
            AotFn::Log2F64 => m::log2_f64_avx2::chunk(a, d, n),
            AotFn::TanhF64 => m::tanh_f64_avx2::chunk(a, d, n),
            AotFn::SigmoidF64 => m::sigmoid_f64_avx2::chunk(a, d, n),
            AotFn::AtanF64 => m::atan_f64_avx2::chunk(a, d, n),
            AotFn::AsinF64 => m::asin_f64_avx2::chunk(a, d, n),
            AotFn::AcosF64 => m::acos_f64_avx2::chunk(a, d, n),
            AotFn::Atan2F64 => m::atan2_f64_avx2::chunk(a, b, d, n),
            _ => return false,
        }
    }
    true
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use rfx_ir::DType;

    fn plan(consts: u32, regs: u32, inputs: u32, outputs: u32, steps: Vec<Step>) -> Plan {
        Plan {
            head: Head {
                steps: steps.len() as u32,
                regs,
                consts,
                inputs,
                outputs,
                dtype_bytes: 4,
            },
            steps,
        }
    }

    fn step(op: u32, dst: u32, a: u32, b: u32) -> Step {
        Step { op, dst, a, b }
    }

    fn routine(r: AotFn) -> u32 {
        op::ROUTINE + AotFn::ALL.iter().position(|&x| x == r).expect("listed") as u32
    }

    /// Every one-op row form (unary, two rows, a constant on either side), f32 and f64, at
    /// every length 0-80 with the output row right after its input rows in one buffer: each
    /// element as the scalar op gives it, and nothing written past the output row. (The code
    /// generator sends rows of at least `MIN_ONE_OP_ELEMS` here; the entry takes any length.)
    #[test]
    fn one_op_rows_with_the_output_right_after_the_inputs() {
        macro_rules! check {
            ($t:ty, $entry:ident) => {{
                let forms: [(u32, u32, u32, fn($t, $t, $t) -> $t); 6] = [
                    (op::NEG, INPUT, INPUT, |a, _, _| -a),
                    (op::SQRT, INPUT, INPUT, |a, _, _| a.sqrt()),
                    (op::ADD, INPUT, INPUT + 1, |a, b, _| a + b),
                    (op::MIN, INPUT, INPUT + 1, |a, b, _| {
                        if a < b || a.is_nan() { a } else { b }
                    }),
                    (op::DIV, INPUT, 0, |a, _, c| a / c),
                    (op::SUB, 0, INPUT, |a, _, c| c - a),
                ];
                for (code, x, y, want) in forms {
                    let mut plan = plan(1, 1, 2, 1, vec![step(code, OUTPUT, x, y)]);
                    plan.head.dtype_bytes = std::mem::size_of::<$t>() as u32;
                    assert!(plan.is_one_op_row() && plan.is_valid());
                    let words = plan.words();
                    let c: $t = 0.75;
                    for n in 0..=80usize {
                        // [a | b | out | guard]
                        let mut buffer: Vec<$t> = (0..3 * n + 8).map(|i| (i as $t) * 0.37 - 9.5).collect();
                        let guard: Vec<$t> = buffer[3 * n..].to_vec();
                        let base = buffer.as_mut_ptr();
                        // SAFETY: three rows of `n` in one buffer, the output overlapping no
                        // input; AVX2 and FMA checked by the caller.
                        let ptrs = unsafe { [base, base.add(n), base.add(2 * n)] };
                        unsafe { $entry(words.as_ptr().cast(), &c, ptrs.as_ptr(), n) };
                        for i in 0..n {
                            let (a, b) = (buffer[i], buffer[n + i]);
                            let got = buffer[2 * n + i];
                            let expected = want(a, b, c);
                            assert!(
                                got.to_bits() == expected.to_bits() || (got.is_nan() && expected.is_nan()),
                                "op {code} n {n} element {i}: {got} against {expected}"
                            );
                        }
                        assert_eq!(buffer[3 * n..], guard[..], "op {code} n {n}: past the row");
                    }
                }
            }};
        }
        if !super::super::available() {
            return;
        }
        check!(f32, rfx_aot_fused_f32);
        check!(f64, rfx_aot_fused_f64);
    }

    #[test]
    fn plans_that_would_misuse_memory_are_refused() {
        let ok = plan(
            1,
            3,
            2,
            1,
            vec![
                step(op::MUL, 1, INPUT, 0),
                step(routine(AotFn::SinF32), 2, 1, 1),
                step(op::ADD, OUTPUT, 2, INPUT + 1),
            ],
        );
        assert!(ok.is_valid());
        let bad = [
            // A step writing its own source.
            plan(
                1,
                3,
                1,
                1,
                vec![step(op::MUL, 1, INPUT, 0), step(op::NEG, 1, 1, 1)],
            ),
            // A register read before any step writes it.
            plan(1, 3, 1, 1, vec![step(op::ADD, OUTPUT, 2, INPUT)]),
            // A constant overwritten, an input written, an output read.
            plan(1, 2, 1, 1, vec![step(op::NEG, 0, INPUT, INPUT)]),
            plan(0, 1, 1, 1, vec![step(op::NEG, INPUT, INPUT, INPUT)]),
            plan(0, 1, 1, 1, vec![step(op::NEG, 0, OUTPUT, OUTPUT)]),
            // Rows out of range, too many registers, an unknown op.
            plan(0, 1, 1, 1, vec![step(op::NEG, OUTPUT + 1, INPUT, INPUT)]),
            plan(0, 1, 1, 1, vec![step(op::NEG, 0, INPUT + 1, INPUT)]),
            plan(0, MAX_REGS + 1, 1, 1, vec![step(op::NEG, OUTPUT, INPUT, INPUT)]),
            plan(0, 1, 1, 1, vec![step(40, OUTPUT, INPUT, INPUT)]),
            // A routine of the other dtype, a two-result routine, the fused pass itself.
            plan(
                0,
                1,
                1,
                1,
                vec![step(routine(AotFn::SinF64), OUTPUT, INPUT, INPUT)],
            ),
            plan(
                0,
                1,
                1,
                1,
                vec![step(routine(AotFn::SinCosF32), OUTPUT, INPUT, INPUT)],
            ),
            plan(
                0,
                1,
                1,
                1,
                vec![step(routine(AotFn::FusedF32), OUTPUT, INPUT, INPUT)],
            ),
        ];
        for p in bad {
            assert!(!p.is_valid(), "{p:?}");
        }
    }

    /// The routine's short entry check of a one-op row accepts exactly the one-op rows that
    /// [`valid`] accepts, over every small one-step plan (operands, output, counts, ops).
    #[test]
    fn the_one_op_row_check_accepts_what_valid_accepts() {
        let codes = [
            0,
            1,
            2,
            3,
            INPUT,
            INPUT + 1,
            INPUT + 2,
            OUTPUT,
            OUTPUT + 1,
            OUTPUT + 2,
        ];
        let ops = [
            op::COPY,
            op::ADD,
            op::MAX,
            op::NEG,
            op::ROUND,
            15,
            40,
            routine(AotFn::SinF32),
        ];
        let mut accepted = 0;
        for (consts, regs) in [(0, 0), (0, 1), (1, 1), (2, 3), (1, MAX_REGS + 1)] {
            for (inputs, outputs) in [(0, 1), (1, 0), (1, 1), (2, 1), (1, 2)] {
                for op in ops {
                    for dst in codes {
                        for a in codes {
                            for b in codes {
                                let p = plan(consts, regs, inputs, outputs, vec![step(op, dst, a, b)]);
                                let fast = valid_one_op_row(&p.head, &p.steps);
                                let full = p.is_valid().then(|| one_op_row(&p.head, &p.steps)).flatten();
                                assert_eq!(fast, full, "{p:?}");
                                accepted += usize::from(fast.is_some());
                            }
                        }
                    }
                }
            }
        }
        assert!(accepted > 100, "{accepted}");
        // A plan of more steps is never a one-op row.
        let two = plan(
            0,
            1,
            1,
            1,
            vec![step(op::NEG, 0, INPUT, INPUT), step(op::NEG, OUTPUT, 0, 0)],
        );
        assert!(two.is_valid() && valid_one_op_row(&two.head, &two.steps).is_none());
    }

    /// Every exact op and every routine of one dtype in one plan, run by the AVX2 body, the
    /// AVX-512 body (where the CPU has it) and the C entry: the same bits, the bits of each
    /// routine called alone (its AVX-512 compilation where the CPU has it), and at every length
    /// the bits of each element computed alone.
    macro_rules! every_step_test {
        ($test:ident, $t:ty, $dtype:ident, $avx2:ident, $avx512:ident, $entry:ident, $sin:ident, $exp:ident, $unary:ty, $binary:ty, $pair:ty) => {
            #[test]
            fn $test() {
                if !super::super::available() {
                    return;
                }
                let exact = [
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
                let routines: Vec<AotFn> = AotFn::ALL
                    .iter()
                    .copied()
                    .filter(|r| r.dtype() == rfx_ir::DType::$dtype && r.results() == 1 && r.arity() <= 2)
                    .filter(|r| !matches!(r.computes(), super::super::table::Computes::Fused))
                    .collect();
                // Each op of (x, y) into its own output row.
                let mut steps = Vec::new();
                for (k, &code) in exact
                    .iter()
                    .chain(&routines.iter().map(|&r| routine(r)).collect::<Vec<_>>())
                    .enumerate()
                {
                    steps.push(step(code, OUTPUT + k as u32, INPUT, INPUT + 1));
                }
                // A chain through registers: ((x * c) sin) + y, then exp of it.
                steps.push(step(op::MUL, 1, INPUT, 0));
                steps.push(step(routine(AotFn::$sin), 2, 1, 1));
                steps.push(step(op::ADD, 3, 2, INPUT + 1));
                let outputs = exact.len() + routines.len() + 1;
                steps.push(step(
                    routine(AotFn::$exp),
                    OUTPUT + outputs as u32 - 1,
                    3,
                    3,
                ));
                let mut p = plan(1, 4, 2, outputs as u32, steps);
                p.head.dtype_bytes = std::mem::size_of::<$t>() as u32;
                assert!(p.is_valid());
                let mut state = 0x2545_f491_4f6c_dd1du64;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                for n in [1usize, 7, 8, 9, 255, 256, 257, 1023, 1025] {
                    let xs: Vec<$t> = (0..n)
                        .map(|_| match next() % 8 {
                            0 => <$t>::from_bits(next() as _),
                            _ => (next() % 40_001) as $t / 1000.0 - 20.0,
                        })
                        .collect();
                    let ys: Vec<$t> = (0..n)
                        .map(|_| (next() % 40_001) as $t / 1000.0 - 20.0)
                        .collect();
                    let consts: [$t; 1] = [1.5];
                    let run = |which: u8, xs: &[$t], ys: &[$t]| -> Vec<Vec<u64>> {
                        let m = xs.len();
                        let mut outs = vec![vec![0.0 as $t; m]; outputs];
                        let mut ptrs: Vec<*mut $t> = vec![xs.as_ptr().cast_mut(), ys.as_ptr().cast_mut()];
                        ptrs.extend(outs.iter_mut().map(|o| o.as_mut_ptr()));
                        // SAFETY: the plan is valid, every row holds `m` elements, the outputs
                        // are distinct allocations, and the CPU has AVX2 and FMA (AVX-512 where
                        // run).
                        unsafe {
                            match which {
                                0 => $avx2(&p.head, &p.steps, &consts, &ptrs, m),
                                1 => $avx512(&p.head, &p.steps, &consts, &ptrs, m),
                                _ => {
                                    let words = p.words();
                                    $entry(words.as_ptr().cast(), consts.as_ptr(), ptrs.as_ptr(), m);
                                }
                            }
                        }
                        outs.iter()
                            .map(|o| o.iter().map(|v| u64::from(v.to_bits())).collect())
                            .collect()
                    };
                    let avx2 = run(0, &xs, &ys);
                    if avx512() {
                        assert_eq!(run(1, &xs, &ys), avx2, "n = {n}");
                    }
                    assert_eq!(run(2, &xs, &ys), avx2, "n = {n}");
                    for (k, r) in routines.iter().enumerate() {
                        let mut out = vec![0.0 as $t; n];
                        // SAFETY: the routine's C ABI (by its arity), rows of `n` elements.
                        unsafe {
                            if r.arity() == 2 {
                                let f = std::mem::transmute::<*const u8, $binary>(r.address());
                                f(xs.as_ptr(), ys.as_ptr(), out.as_mut_ptr(), n);
                            } else {
                                let f = std::mem::transmute::<*const u8, $unary>(r.address());
                                f(xs.as_ptr(), out.as_mut_ptr(), n);
                            }
                        }
                        let bits: Vec<u64> = out.iter().map(|v| u64::from(v.to_bits())).collect();
                        assert_eq!(bits, avx2[exact.len() + k], "{r:?} alone, n = {n}");
                    }
                    // The `sincos` routine alone: the bits of the `sin` and `cos` steps.
                    let pair = AotFn::$sin.sincos_part().expect("sin pairs").0;
                    let (mut first, mut second) = (vec![0.0 as $t; n], vec![0.0 as $t; n]);
                    // SAFETY: the pair routine's C ABI, rows of `n` elements.
                    unsafe {
                        let f = std::mem::transmute::<*const u8, $pair>(pair.address());
                        f(xs.as_ptr(), first.as_mut_ptr(), second.as_mut_ptr(), n);
                    }
                    let at = |r: AotFn| exact.len() + routines.iter().position(|&x| x == r).expect("listed");
                    let cos = routines
                        .iter()
                        .copied()
                        .find(|r| r.sincos_part() == Some((pair, 1)));
                    let bits = |v: &[$t]| {
                        v.iter()
                            .map(|x| u64::from(x.to_bits()))
                            .collect::<Vec<u64>>()
                    };
                    assert_eq!(bits(&first), avx2[at(AotFn::$sin)], "sincos's sin, n = {n}");
                    assert_eq!(
                        bits(&second),
                        avx2[at(cos.expect("cos"))],
                        "sincos's cos, n = {n}"
                    );
                    for i in (0..n).step_by(97) {
                        let alone = run(0, &xs[i..=i], &ys[i..=i]);
                        for (k, out) in alone.iter().enumerate() {
                            assert_eq!(out[0], avx2[k][i], "n = {n}, output {k}, element {i}");
                        }
                    }
                }
            }
        };
    }

    /// A plan of one exact op (from two rows, a row and a constant, a constant and a row; each
    /// unary op of a row) runs as the whole-row loop through the C entry and gives the bits of
    /// the chunk loop at every length.
    macro_rules! one_op_test {
        ($test:ident, $t:ty, $avx2:ident, $entry:ident) => {
            #[test]
            fn $test() {
                if !super::super::available() {
                    return;
                }
                let mut plans = Vec::new();
                for code in op::ADD..=op::MAX {
                    for (a, b) in [(INPUT, INPUT + 1), (INPUT, 0), (0, INPUT + 1)] {
                        plans.push(plan(1, 1, 2, 1, vec![step(code, OUTPUT, a, b)]));
                    }
                }
                for code in [
                    op::COPY,
                    op::NEG,
                    op::ABS,
                    op::SQRT,
                    op::RSQRT,
                    op::RECIP,
                    op::FLOOR,
                    op::CEIL,
                    op::ROUND,
                ] {
                    plans.push(plan(
                        1,
                        1,
                        2,
                        1,
                        vec![step(code, OUTPUT, INPUT + 1, INPUT + 1)],
                    ));
                }
                // Not one op: two steps, a constant op only, a routine.
                let not = [
                    plan(
                        1,
                        2,
                        2,
                        1,
                        vec![
                            step(op::MUL, 1, INPUT, 0),
                            step(op::ADD, OUTPUT, 1, INPUT + 1),
                        ],
                    ),
                    plan(1, 1, 2, 1, vec![step(op::ADD, OUTPUT, 0, 0)]),
                    plan(
                        0,
                        0,
                        2,
                        1,
                        vec![step(routine(AotFn::SinF32), OUTPUT, INPUT, INPUT)],
                    ),
                ];
                for p in &not {
                    assert!(!p.is_one_op_row(), "{p:?}");
                }
                let consts: [$t; 1] = [-0.75];
                let mut direct_rows = 0;
                for mut p in plans {
                    p.head.dtype_bytes = std::mem::size_of::<$t>() as u32;
                    assert!(p.is_valid() && p.is_one_op_row(), "{p:?}");
                    for n in [0usize, 1, 255, 256, 257, 4097] {
                        let xs: Vec<$t> = (0..n)
                            .map(|i| ((i * 7919) % 2003) as $t / 100.0 - 10.0)
                            .collect();
                        let ys: Vec<$t> = (0..n)
                            .map(|i| match i % 7 {
                                0 => <$t>::NAN,
                                1 => -0.0,
                                _ => ((i * 104_729) % 1009) as $t / 50.0 - 10.0,
                            })
                            .collect();
                        let (mut whole, mut chunks) = (vec![0.0 as $t; n], vec![0.0 as $t; n]);
                        let ptrs = |out: &mut Vec<$t>| {
                            vec![
                                xs.as_ptr().cast_mut(),
                                ys.as_ptr().cast_mut(),
                                out.as_mut_ptr(),
                            ]
                        };
                        let words = p.words();
                        // SAFETY: the plan is valid, every row holds `n` elements, the output is
                        // its own allocation, and the CPU has AVX2 and FMA.
                        unsafe {
                            $entry(
                                words.as_ptr().cast(),
                                consts.as_ptr(),
                                ptrs(&mut whole).as_ptr(),
                                n,
                            );
                            $avx2(&p.head, &p.steps, &consts, &ptrs(&mut chunks), n);
                        }
                        let bits = |v: &[$t]| v.iter().map(|x| u64::from(x.to_bits())).collect::<Vec<_>>();
                        assert_eq!(bits(&whole), bits(&chunks), "{p:?}, n = {n}");
                        // A binary op on two rows also runs as its whole-row routine, with the
                        // same bits, on two rows and on one row twice.
                        if let Some((bop, a, b, 0)) = p.row_binary() {
                            direct_rows += 1;
                            let dtype = if std::mem::size_of::<$t>() == 4 {
                                DType::F32
                            } else {
                                DType::F64
                            };
                            let routine = AotFn::whole_row(bop, dtype).expect("a whole-row routine");
                            assert_eq!(routine.dtype(), dtype);
                            // SAFETY: the table coerced the address from this ABI.
                            let f: unsafe extern "C" fn(*const $t, *const $t, *mut $t, usize) =
                                unsafe { std::mem::transmute(routine.address()) };
                            let rows = [xs.as_ptr(), ys.as_ptr()];
                            let twice = plan(0, 0, 1, 1, vec![step(p.steps[0].op, OUTPUT, INPUT, INPUT)]);
                            let (mut direct, mut same, mut same_chunks) =
                                (vec![0.0 as $t; n], vec![0.0 as $t; n], vec![0.0 as $t; n]);
                            // SAFETY: the rows hold `n` elements, the outputs are their own
                            // allocations, and the CPU has AVX2 and FMA.
                            unsafe {
                                f(rows[a], rows[b], direct.as_mut_ptr(), n);
                                f(rows[0], rows[0], same.as_mut_ptr(), n);
                                $avx2(
                                    &twice.head,
                                    &twice.steps,
                                    &[],
                                    &[rows[0].cast_mut(), same_chunks.as_mut_ptr()],
                                    n,
                                );
                            }
                            assert_eq!(bits(&direct), bits(&chunks), "{routine:?}, n = {n}");
                            assert_eq!(
                                bits(&same),
                                bits(&same_chunks),
                                "{routine:?} on one row, n = {n}"
                            );
                        }
                    }
                }
                // Add to max, each from two rows, at each length.
                assert_eq!(direct_rows, 6 * 6);
            }
        };
    }

    one_op_test!(
        one_f32_op_runs_over_the_whole_row_with_the_chunk_loops_bits,
        f32,
        fused_f32_avx2,
        rfx_aot_fused_f32
    );
    one_op_test!(
        one_f64_op_runs_over_the_whole_row_with_the_chunk_loops_bits,
        f64,
        fused_f64_avx2,
        rfx_aot_fused_f64
    );

    every_step_test!(
        every_f32_step_gives_the_same_bits_at_every_width_and_length,
        f32,
        F32,
        fused_f32_avx2,
        fused_f32_avx512,
        rfx_aot_fused_f32,
        SinF32,
        ExpF32,
        super::super::TileFn,
        super::super::Tile2Fn,
        super::super::TilePairFn
    );
    every_step_test!(
        every_f64_step_gives_the_same_bits_at_every_width_and_length,
        f64,
        F64,
        fused_f64_avx2,
        fused_f64_avx512,
        rfx_aot_fused_f64,
        SinF64,
        ExpF64,
        super::super::TileFnF64,
        super::super::Tile2FnF64,
        super::super::TilePairFnF64
    );
}
