//! Address arithmetic: buffer bases, offsets of loop positions, and integer values folded and shared within a block.

use super::*;

/// `(x / d, x % d)` for a constant `d`: a shift and a mask for a power of two; with `small`
/// (the caller knows `x <= 2^32`), a multiply-high by `ceil(2^64 / d)`, exact for every such `x`
/// and `d < 2^32` (the error `x * e / 2^64 < 2^-32` never reaches the next multiple, which is at
/// least `1/d` away); otherwise a division.
pub(super) fn div_rem_const(b: &mut FunctionBuilder<'_>, x: Value, d: u64, small: bool) -> (Value, Value) {
    if d <= 1 {
        // `x / 1`; a dimension of 0 has no points, so its code never runs.
        let zero = b.ins().iconst(types::I64, 0);
        return (x, zero);
    }
    if d.is_power_of_two() {
        let q = b.ins().ushr_imm_s(x, i64::from(d.trailing_zeros()));
        let r = b.ins().band_imm_s(x, (d - 1) as i64);
        return (q, r);
    }
    if small && d < 1 << 32 {
        let magic = (u128::from(u64::MAX) + 1).div_ceil(u128::from(d)) as u64;
        let m = b.ins().iconst(types::I64, magic as i64);
        let q = b.ins().umulhi(x, m);
        let qd = b.ins().imul_imm_s(q, d as i64);
        let r = b.ins().isub(x, qd);
        return (q, r);
    }
    let q = b.ins().udiv_imm_s(x, d as i64);
    let r = b.ins().urem_imm_s(x, d as i64);
    (q, r)
}

impl<'k> Gen<'_, 'k> {
    /// Moves the base of a row store's buffer to its row, once, at the kernel's entry:
    /// `base + clamp(index, 0, rows - 1) * stride` elements, `index` the preamble's slot.
    pub(super) fn shift_row_base(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        row: &rfx_ir::lir::RowStore,
    ) -> Result<(), BackendError> {
        let index = self
            .fx
            .pre_scalar
            .get(row.index.index())
            .copied()
            .flatten()
            .ok_or_else(|| internal("a row store's index is not a preamble value"))?;
        let last = i64::try_from(row.rows.saturating_sub(1)).map_err(|_| internal("too many rows"))?;
        let elem = self
            .fx
            .info
            .buffer_dtypes
            .get(row.buf.index())
            .map_or(1, |d| d.size_bytes());
        let bytes = row
            .stride
            .checked_mul(elem)
            .and_then(|n| i64::try_from(n).ok())
            .ok_or_else(|| internal("a row store's rows do not fit an address"))?;
        let zero = b.ins().iconst(types::I32, 0);
        let top = b.ins().iconst(types::I32, last.min(i64::from(i32::MAX)));
        let at = b.ins().smax(index, zero);
        let at = b.ins().smin(at, top);
        let at = b.ins().uextend(self.fx.ptr, at);
        let shift = b.ins().imul_imm_s(at, bytes);
        let base = self.base(row.buf)?;
        let shifted = b.ins().iadd(base, shift);
        if let Some(slot) = self.fx.bases.get_mut(row.buf.index()) {
            *slot = Some(shifted);
        }
        Ok(())
    }

    pub(super) fn base(&self, buf: BufId) -> Result<Value, BackendError> {
        self.fx
            .bases
            .get(buf.index())
            .copied()
            .flatten()
            .ok_or_else(|| internal(format!("no base for {buf}")))
    }

    /// Element offsets (per access) of the point whose index over `dims` (the loop dims
    /// `first..first + dims.len()`) is `linear`.
    pub(super) fn offsets(
        &self,
        b: &mut FunctionBuilder<'_>,
        linear: Value,
        first: usize,
        dims: &[usize],
        start: &[Value],
    ) -> Vec<Value> {
        let mut offs = start.to_vec();
        let mut rem = linear;
        // `linear` is below the product of `dims`: below 2^32, a division by a constant is a
        // multiply-high (Cranelift's mid-end, which would do it, is off).
        let small = dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
            .is_some_and(|n| n <= 1 << 32);
        for d in (0..dims.len()).rev() {
            let size = dims[d] as u64;
            if size == 1 {
                continue;
            }
            let idx = if d == 0 {
                rem
            } else {
                let (quotient, remainder) = div_rem_const(b, rem, size, small);
                rem = quotient;
                remainder
            };
            // Shared within the block (`Caches::memo`): accesses with the same strides (the
            // loads of one row at several offsets) get one offset value, so one pointer.
            for (k, access) in self.fx.info.accesses.iter().enumerate() {
                let stride = access.strides.get(first + d).copied().unwrap_or(0) as i64;
                if stride != 0 {
                    let step = self.scale(b, idx, stride);
                    offs[k] = self.add(b, offs[k], step);
                }
            }
        }
        offs
    }

    /// The value `make` builds, or the one it built earlier in the current block for the same
    /// `(op, a, b)`.
    pub(super) fn pure(
        &self,
        b: &mut FunctionBuilder<'_>,
        op: Pure,
        a: u32,
        imm: i64,
        make: impl FnOnce(&mut FunctionBuilder<'_>) -> Value,
    ) -> Value {
        let Some(block) = b.current_block() else {
            return make(b);
        };
        let key = (block, op, a, imm);
        if let Some(&value) = self.caches.memo.borrow().get(&key) {
            return value;
        }
        let value = make(b);
        self.caches.memo.borrow_mut().insert(key, value);
        value
    }

    /// The `i64` constant `c` (its form known to the folds below).
    pub(super) fn const_i64(&self, b: &mut FunctionBuilder<'_>, c: i64) -> Value {
        let value = b.ins().iconst(types::I64, c);
        self.caches.known.borrow_mut().insert(value, Known::Const(c));
        value
    }

    /// `v + imm` (an `i64`, wrapping), shared within the block: a constant for a constant `v`,
    /// and one addition to the base for a `v` that is itself a base plus a constant.
    pub(super) fn add_imm(&self, b: &mut FunctionBuilder<'_>, v: Value, imm: i64) -> Value {
        if imm == 0 {
            return v;
        }
        let known = self.caches.known.borrow().get(&v).copied();
        match known {
            Some(Known::Const(c)) => self.const_i64(b, c.wrapping_add(imm)),
            Some(Known::Offset(base, c)) => self.add_imm(b, base, c.wrapping_add(imm)),
            None => {
                let sum = self.pure(b, Pure::AddImm, v.as_u32(), imm, |b| b.ins().iadd_imm_s(v, imm));
                self.caches.known.borrow_mut().insert(sum, Known::Offset(v, imm));
                sum
            }
        }
    }

    /// `v * factor` (a shift for powers of two: a byte size or a stride; wrapping), shared within
    /// the block; a constant for a constant `v`.
    pub(super) fn scale(&self, b: &mut FunctionBuilder<'_>, v: Value, factor: i64) -> Value {
        let known = self.caches.known.borrow().get(&v).copied();
        if let Some(Known::Const(c)) = known {
            return self.const_i64(b, c.wrapping_mul(factor));
        }
        self.pure(b, Pure::Scale, v.as_u32(), factor, |b| {
            if factor > 0 && (factor as u64).is_power_of_two() {
                b.ins().ishl_imm_u(v, i64::from(factor.trailing_zeros()))
            } else {
                b.ins().imul_imm_s(v, factor)
            }
        })
    }

    /// `x + y` (integers), shared within the block; an addition of a constant when either is
    /// one (see [`Gen::add_imm`]).
    pub(super) fn add(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let (kx, ky) = {
            let known = self.caches.known.borrow();
            (known.get(&x).copied(), known.get(&y).copied())
        };
        match (kx, ky) {
            (_, Some(Known::Const(c))) => self.add_imm(b, x, c),
            (Some(Known::Const(c)), _) => self.add_imm(b, y, c),
            _ => self.pure(b, Pure::Add, x.as_u32(), i64::from(y.as_u32()), |b| {
                b.ins().iadd(x, y)
            }),
        }
    }

    /// The address of stack slot `slot`, shared within the block.
    pub(super) fn stack_base(&self, b: &mut FunctionBuilder<'_>, slot: StackSlot) -> Value {
        let ptr = self.fx.ptr;
        self.pure(b, Pure::StackAddr, slot.as_u32(), 0, |b| {
            b.ins().stack_addr(ptr, slot, 0)
        })
    }

    /// The byte address of element `offs[k] + (at + lane) * inner_stride` of access `k`.
    pub(super) fn address(
        &self,
        b: &mut FunctionBuilder<'_>,
        k: usize,
        _base: Value,
        at: Value,
        ptrs: &[Value],
        lane: u8,
    ) -> Value {
        // `ptrs[k]` is the byte address of access `k` at position 0 of the innermost loop.
        let access = &self.fx.info.accesses[k];
        let step_bytes = (self.inner_stride(k) * access.elem_bytes()) as i64;
        if step_bytes == 0 {
            return ptrs[k];
        }
        let pos = self.add_imm(b, at, i64::from(lane));
        let step = self.scale(b, pos, step_bytes);
        self.add(b, ptrs[k], step)
    }

    /// [`Gen::address`] of a buffer access as a base and a constant displacement: a position
    /// that is another one plus a constant (the chunks of a vector loop's step) shares that
    /// position's address, and the constant goes into the load's or store's immediate offset
    /// (one address computation for the chunks instead of one per chunk).
    pub(super) fn address_disp(
        &self,
        b: &mut FunctionBuilder<'_>,
        k: usize,
        at: Value,
        ptrs: &[Value],
        lane: u8,
    ) -> (Value, i32) {
        let access = &self.fx.info.accesses[k];
        let step_bytes = (self.inner_stride(k) * access.elem_bytes()) as i64;
        let known = self.caches.known.borrow().get(&at).copied();
        if let Some(Known::Offset(root, c)) = known
            && step_bytes != 0
            && let Some(disp) = c
                .checked_add(i64::from(lane))
                .and_then(|p| p.checked_mul(step_bytes))
                .and_then(|d| i32::try_from(d).ok())
        {
            return (self.address(b, k, root, root, ptrs, 0), disp);
        }
        (self.address(b, k, at, at, ptrs, lane), 0)
    }

    /// Byte addresses from element offsets (per access).
    pub(super) fn pointers(
        &self,
        b: &mut FunctionBuilder<'_>,
        offs: &[Value],
    ) -> Result<Vec<Value>, BackendError> {
        self.fx
            .info
            .accesses
            .iter()
            .zip(offs)
            .map(|(access, &off)| match access.buf {
                Some(buf) => {
                    let base = self.base(buf)?;
                    let size = access.dtype.size_bytes();
                    let bytes = self.scale(b, off, size as i64);
                    let at = self.add(b, base, bytes);
                    Ok(self.add_imm(b, at, (access.offset * size) as i64))
                }
                // An index's "address" is its value: the element offset itself.
                None => Ok(off),
            })
            .collect()
    }

    /// The pointers (as [`Gen::pointers`] makes them) of row `row` of a kernel whose rows
    /// span the loop dims `0..outer.len()` of extents `outer`, as constants: each access's base
    /// plus a constant byte offset, which instruction selection folds into every load and store.
    pub(super) fn row_pointers(
        &self,
        b: &mut FunctionBuilder<'_>,
        row: usize,
        outer: &[usize],
    ) -> Result<Vec<Value>, BackendError> {
        let zero = self.const_i64(b, 0);
        let first = self.pointers(b, &vec![zero; self.fx.info.accesses.len()])?;
        Ok(self.displaced_pointers(b, &first, row, 0, outer))
    }

    /// `ptrs` (as [`Gen::pointers`] makes them) moved to row `row` of a block that spans the
    /// loop dims `first..first + block.len()` of extents `block`: a constant displacement per
    /// access, in bytes for a buffer's pointer and in elements for an index's value.
    pub(super) fn displaced_pointers(
        &self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
        row: usize,
        first: usize,
        block: &[usize],
    ) -> Vec<Value> {
        let mut idx = vec![0usize; block.len()];
        let mut rem = row;
        for d in (0..block.len()).rev() {
            let n = block[d].max(1);
            idx[d] = rem % n;
            rem /= n;
        }
        self.fx
            .info
            .accesses
            .iter()
            .zip(ptrs)
            .map(|(access, &ptr)| {
                let elems: usize = idx
                    .iter()
                    .enumerate()
                    .map(|(d, &i)| i * access.strides.get(first + d).copied().unwrap_or(0))
                    .sum();
                let unit = if access.buf.is_some() {
                    access.dtype.size_bytes()
                } else {
                    1
                };
                // Inside the buffer (or below the verified index bound): far below i64::MAX.
                self.add_imm(b, ptr, (elems * unit) as i64)
            })
            .collect()
    }

    /// Bytes (an index: counts) each access advances per step of dim `rank - 1`, the last of a
    /// rank-`rank` loop nest.
    pub(super) fn last_dim_step_bytes(&self, rank: usize) -> Vec<i64> {
        self.fx
            .info
            .accesses
            .iter()
            .map(|a| (a.strides.get(rank - 1).copied().unwrap_or(0) * a.elem_bytes()) as i64)
            .collect()
    }

    /// Elements access `k` advances per step of the vector loop.
    pub(super) fn inner_stride(&self, k: usize) -> usize {
        self.cur
            .inner_axis
            .and_then(|a| self.fx.info.accesses[k].strides.get(a).copied())
            .unwrap_or(0)
    }

    /// Records that the lanes of the `i32` vector `v` step by `step` (see `Caches::lane_steps`).
    pub(super) fn note_step(&mut self, v: Value, step: i64) {
        if let Some(steps) = &mut self.caches.lane_steps {
            steps.insert(v, step);
        }
    }

    /// How the lanes of `v` step, when known.
    pub(super) fn step_of(&self, v: Value) -> Option<i64> {
        self.caches.lane_steps.as_ref()?.get(&v).copied()
    }
}
