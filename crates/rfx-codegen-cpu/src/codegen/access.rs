//! Loads, stores, gathers and index values of the body's accesses.

use super::*;

/// Where body code runs: `w` lanes at loop position `pos`, with each access's element offset
/// (or pointer) `offs` there.
#[derive(Clone, Copy)]
pub(super) struct Place<'p> {
    pub(super) w: u8,
    pub(super) pos: Value,
    pub(super) offs: &'p [Value],
}

/// An element offset as an index value of `dtype` (exact: the verifier bounds every value).
pub(super) fn index_scalar(
    b: &mut FunctionBuilder<'_>,
    offset: Value,
    dtype: DType,
) -> Result<Value, BackendError> {
    Ok(match dtype {
        DType::I32 => b.ins().ireduce(types::I32, offset),
        DType::F32 => b.ins().fcvt_from_sint(types::F32, offset),
        DType::F64 => b.ins().fcvt_from_sint(types::F64, offset),
        DType::Bool => return Err(internal("index of dtype bool")),
    })
}

impl<'k> Gen<'_, 'k> {
    pub(super) fn load_scalar(
        &self,
        b: &mut FunctionBuilder<'_>,
        addr: Value,
        _k: Option<usize>,
        dtype: DType,
    ) -> Value {
        b.ins().load(cl_type(dtype, 1), mem(), addr, 0)
    }

    /// Access `k` of buffer `base` loaded at `place`: `place.w` lanes of `dtype`.
    pub(super) fn load(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        place: Place<'_>,
        k: usize,
        base: Value,
        dtype: DType,
    ) -> Result<Value, BackendError> {
        let Place { w, pos: at, offs } = place;
        let inner = self.inner_stride(k);
        if w == 1 || (inner == 1 && dtype != DType::Bool) {
            let (addr, disp) = self.address_disp(b, k, at, offs, 0);
            return Ok(b.ins().load(cl_type(dtype, w), mem(), addr, disp));
        }
        let lanes = if inner == 0 { 1 } else { w };
        if dtype == DType::F64 && lanes == 2 {
            return Ok(self.load_f64_pair(b, place, k, base));
        }
        let mut e_lanes = Vec::new();
        for lane in 0..lanes {
            let addr = self.address(b, k, base, at, offs, lane);
            e_lanes.push(self.load_scalar(b, addr, Some(k), dtype));
        }
        Ok(self.assemble(b, w, &e_lanes, dtype))
    }

    /// Two `f64` lanes of access `k` (inner stride `s` ≥ 2 elements) at `place`: the vector
    /// of elements `e + s - 1` and `e + s` (one 16-byte load: lane 1 is in place) with element
    /// `e` moved into lane 0 (`movsd` between registers). Both reads lie inside the elements
    /// `e ..= e + s` the two lanes span. Three instructions, none through a general register:
    /// building the vector from two scalars costs five (Cranelift folds a scalar load into
    /// `scalar_to_vector` only when the vector has one use).
    fn load_f64_pair(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        place: Place<'_>,
        k: usize,
        base: Value,
    ) -> Value {
        let Place { pos: at, offs, .. } = place;
        let step = (self.inner_stride(k) * DType::F64.size_bytes()) as i64;
        let (addr, disp) = self.address_disp(b, k, at, offs, 0);
        let pair_disp = i64::from(disp)
            .checked_add(step - 8)
            .and_then(|d| i32::try_from(d).ok());
        if let Some(pair_disp) = pair_disp {
            let first = b.ins().load(types::F64, mem(), addr, disp);
            let pair = b.ins().load(types::F64X2, mem(), addr, pair_disp);
            return b.ins().insertlane(pair, first, 0);
        }
        let addr = self.address(b, k, base, at, offs, 0);
        let first = self.load_scalar(b, addr, Some(k), DType::F64);
        let v = b.ins().scalar_to_vector(types::F64X2, first);
        let addr = self.address(b, k, base, at, offs, 1);
        let second = self.load_scalar(b, addr, Some(k), DType::F64);
        b.ins().insertlane(v, second, 1)
    }

    /// `buf[clamp(index, 0, len - 1)]` per lane of the value `index` (`w` lanes of an `i32`, or
    /// of an `f64` truncated toward zero), whose lanes step by `step` when that is known (see
    /// `Caches::lane_steps`, which tracks `i32` values only).
    ///
    /// Lanes that all hold one index (step 0) read one element. Consecutive lanes (step 1, the
    /// gathers of a pad's window) read one vector when they lie inside the buffer, and one
    /// element when they all lie on one side of it (every lane clamps to the same end);
    /// otherwise, and for other steps, each lane reads its own element.
    pub(super) fn gather(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        buf: BufId,
        (index, index_dtype): (Value, DType),
        step: Option<i64>,
        dtype: DType,
    ) -> Result<Value, BackendError> {
        let base = self.base(buf)?;
        let len = self
            .fx
            .info
            .buffer_lens
            .get(buf.index())
            .copied()
            .filter(|&n| n > 0)
            .ok_or_else(|| internal(format!("gather from {buf}, which has no elements")))?;
        // An `i32` index never exceeds `i32::MAX`: clamping there reaches no further.
        let last = i32::try_from(len - 1).unwrap_or(i32::MAX);
        let lanes = if w > 1 && step == Some(0) { 1 } else { w };
        // `f64` indices are read lane by lane: checking two lanes for a step of one, with a
        // branch per gather and the saturating conversions, measured slower than it saves.
        if index_dtype != DType::I32 || w == 1 || lanes == 1 || step != Some(1) || dtype == DType::Bool {
            let values = self.gather_lanes(b, (lanes, w), (base, last), (index, index_dtype), dtype);
            return Ok(self.assemble(b, w, &values, dtype));
        }
        // Lanes `lo ..= lo + w - 1` (no lane wraps when the sum fits an `i32`).
        let lo = b.ins().extractlane(index, 0);
        let lo = b.ins().sextend(types::I64, lo);
        let hi = b.ins().iadd_imm_s(lo, i64::from(w) - 1);
        let above_zero = b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, lo, 0);
        let below_end = b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThanOrEqual, hi, i64::from(last));
        let inside = b.ins().band(above_zero, below_end);
        let ty = cl_type(dtype, w);
        let (vector, not_inside, one, lanewise, join) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.append_block_param(join, ty);
        b.ins().brif(inside, vector, &[], not_inside, &[]);

        b.switch_to_block(vector);
        let bytes = self.scale(b, lo, dtype.size_bytes() as i64);
        let addr = b.ins().iadd(base, bytes);
        let v = b.ins().load(ty, mem(), addr, 0);
        b.ins().jump(join, &[BlockArg::Value(v)]);

        // All below the buffer, or all above it without wrapping: every lane clamps alike.
        b.switch_to_block(not_inside);
        let all_below = b.ins().icmp_imm_s(IntCC::SignedLessThan, hi, 0);
        let all_above = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, lo, i64::from(last));
        let no_wrap = b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThanOrEqual, hi, i64::from(i32::MAX));
        let all_above = b.ins().band(all_above, no_wrap);
        let alike = b.ins().bor(all_below, all_above);
        b.ins().brif(alike, one, &[], lanewise, &[]);

        b.switch_to_block(one);
        let values = self.gather_lanes(b, (1, w), (base, last), (index, index_dtype), dtype);
        let v = self.assemble(b, w, &values, dtype);
        b.ins().jump(join, &[BlockArg::Value(v)]);

        b.switch_to_block(lanewise);
        let values = self.gather_lanes(b, (w, w), (base, last), (index, index_dtype), dtype);
        let v = self.assemble(b, w, &values, dtype);
        b.ins().jump(join, &[BlockArg::Value(v)]);

        b.switch_to_block(join);
        Ok(b.block_params(join)[0])
    }

    /// `buf[clamp(index[lane], 0, last)]` for the first `lanes` lanes of the `w`-lane value
    /// `index` (`i32`, or `f64` truncated toward zero with NaN as 0), as scalars; `buf`
    /// starts at `base`.
    pub(super) fn gather_lanes(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (lanes, w): (u8, u8),
        (base, last): (Value, i32),
        (index, index_dtype): (Value, DType),
        dtype: DType,
    ) -> Vec<Value> {
        // Clamped as `i32`, or as `i64` after a saturating conversion (NaN gives 0).
        let int = if index_dtype == DType::I32 {
            types::I32
        } else {
            types::I64
        };
        let (zero, top) = (b.ins().iconst(int, 0), b.ins().iconst(int, i64::from(last)));
        let mut values = Vec::with_capacity(usize::from(lanes));
        for lane in 0..lanes {
            let i = if w == 1 {
                index
            } else {
                b.ins().extractlane(index, lane)
            };
            let i = if index_dtype == DType::I32 {
                i
            } else {
                b.ins().fcvt_to_sint_sat(types::I64, i)
            };
            let below = b.ins().icmp_imm_s(IntCC::SignedLessThan, i, 0);
            let i = b.ins().select(below, zero, i);
            let above = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, i, i64::from(last));
            let i = b.ins().select(above, top, i);
            let i = if int == self.fx.ptr {
                i
            } else {
                b.ins().uextend(self.fx.ptr, i)
            };
            let bytes = self.scale(b, i, dtype.size_bytes() as i64);
            let addr = b.ins().iadd(base, bytes);
            values.push(self.load_scalar(b, addr, None, dtype));
        }
        values
    }

    /// A vector of `w` lanes from scalar lanes (one lane broadcast when there is one).
    pub(super) fn assemble(
        &self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        e_lanes: &[Value],
        dtype: DType,
    ) -> Value {
        if w == 1 {
            return e_lanes[0];
        }
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.fx.imports,
        };
        let mut v = e.splat(e_lanes[0], dtype);
        for (lane, &x) in e_lanes.iter().enumerate().skip(1) {
            let x = if dtype == DType::Bool {
                let wide_ty = if w == 2 { types::I64 } else { types::I32 };
                let wide = b.ins().uextend(wide_ty, x);
                b.ins().ineg(wide)
            } else {
                x
            };
            v = b.ins().insertlane(v, x, lane as u8);
        }
        v
    }

    /// Converts the body's indices that the vector loop does not advance (see
    /// [`Cursor::row_indices`]) from the row's offsets `ptrs`, in the current block.
    pub(super) fn hoist_row_indices(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        self.cur.row_indices.clear();
        for (k, access) in self.fx.info.accesses.iter().enumerate() {
            if access.buf.is_none() && self.inner_stride(k) == 0 && self.cur.inner_axis.is_some() {
                let scalar = index_scalar(b, ptrs[k], access.dtype)?;
                let splat = Emitter {
                    b: &mut *b,
                    w: self.cur.width,
                    imports: self.fx.imports,
                }
                .splat(scalar, access.dtype);
                self.cur.row_indices.insert(k, (scalar, splat));
            }
        }
        Ok(())
    }

    /// The value of index access `k` at position `at` of the innermost loop: lane 0's offset
    /// converted to `dtype` (exact: the verifier bounds every value), plus `lane · stride` per
    /// lane from a constant vector.
    pub(super) fn index(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        k: usize,
        at: Value,
        offs: &[Value],
        dtype: DType,
    ) -> Result<Value, BackendError> {
        if let Some(&(scalar, splat)) = self.cur.row_indices.get(&k) {
            return Ok(if w == 1 { scalar } else { splat });
        }
        if w > 1
            && w == self.cur.width
            && let Some(&vector) = self.cur.col_indices.get(&k)
        {
            return Ok(vector);
        }
        let offset = self.address(b, k, at, at, offs, 0);
        let scalar = index_scalar(b, offset, dtype)?;
        let inner = self.inner_stride(k);
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.fx.imports,
        };
        let splat = e.splat(scalar, dtype);
        if w == 1 || inner == 0 {
            return Ok(splat);
        }
        let mut bytes = Vec::new();
        for lane in 0..usize::from(w) {
            let step = lane * inner;
            match dtype {
                DType::I32 => bytes.extend_from_slice(&(step as i32).to_le_bytes()),
                DType::F32 => bytes.extend_from_slice(&(step as f32).to_le_bytes()),
                _ => bytes.extend_from_slice(&(step as f64).to_le_bytes()),
            }
        }
        let ty = cl_type(dtype, w);
        let handle = b.func.dfg.constants.insert(bytes.into());
        let steps = b.ins().vconst(ty, handle);
        Ok(if dtype == DType::I32 {
            b.ins().iadd(splat, steps)
        } else {
            b.ins().fadd(splat, steps)
        })
    }

    /// `v` (`place.w` lanes) stored through access `k` of buffer `base` at `place`.
    pub(super) fn store(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        place: Place<'_>,
        k: usize,
        base: Value,
        v: Value,
    ) -> Result<(), BackendError> {
        let access = &self.fx.info.accesses[k];
        let (dtype, inner) = (access.dtype, self.inner_stride(k));
        if self.cur.joined.is_some() && dtype == DType::F64 && self.hold_store(b, place, k, v) {
            return Ok(());
        }
        let Place { w, pos: at, offs } = place;
        if w == 1 || (inner == 1 && dtype != DType::Bool) {
            let (addr, disp) = self.address_disp(b, k, at, offs, 0);
            b.ins().store(mem(), v, addr, disp);
            return Ok(());
        }
        for lane in 0..w {
            let addr = self.address(b, k, base, at, offs, lane);
            let mut e = Emitter {
                b: &mut *b,
                w,
                imports: self.fx.imports,
            };
            let x = e.lane(v, dtype, lane);
            b.ins().store(mem(), x, addr, 0);
        }
        Ok(())
    }
}
