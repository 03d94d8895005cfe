//! Loop skeletons: counted loops with carried values, vector positions with a scalar rest.

use super::*;

/// Values a loop carries from one position to the next: `init` at the start, `advance` gives
/// the next position's from the current ones, `fresh` the ones at a position (the ragged
/// end's).
pub(super) struct Carried<'v, 'f, G> {
    pub(super) init: &'v [Value],
    pub(super) advance: &'f mut CarryAdvance<'f, G>,
    pub(super) fresh: &'f mut CarryFresh<'f, G>,
}

/// A loop block's arguments: the position, then the carried values.
pub(super) fn position_args(at: Value, vals: &[Value]) -> Vec<BlockArg> {
    std::iter::once(at)
        .chain(vals.iter().copied())
        .map(BlockArg::Value)
        .collect()
}

impl<'k> Gen<'_, 'k> {
    /// The points `start..end` of the innermost loop one at a time (scalar code); with
    /// `partials`, reductions fold into partial `j % lanes` through the slot.
    pub(super) fn emit_scalar_points(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        offs: &[Value],
        partials: Option<&Partials>,
    ) -> Result<(), BackendError> {
        self.emit_loop(b, start, end, 1, &[], &mut |g, b, at, _| {
            let mut reduced = Vec::new();
            g.emit_body(b, 1, at, offs, &mut reduced)?;
            if let Some(p) = partials {
                let lane = p.lane_of(b, at);
                for (r, (_, value)) in p.reduces.iter().zip(reduced) {
                    p.fold_scalar(b, g.fx.ptr, g.fx.imports, r, lane, value)?;
                }
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// Runs `body` at every vector position `at` of `start..end` (at least a vector long): one
    /// body, entered once more at `end - w` for a ragged end (recomputing a few points is
    /// harmless: no output overlaps an input, so the same values are stored again). One body
    /// copy keeps compile time low.
    pub(super) fn emit_vector_positions(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        body: &mut PositionBody<'_, Self>,
    ) -> Result<(), BackendError> {
        self.emit_vector_positions_carrying(
            b,
            (start, end),
            Carried {
                init: &[],
                advance: &mut |_, _, _: &[Value]| Ok(Vec::new()),
                fresh: &mut |_, _, _: Value| Ok(Vec::new()),
            },
            &mut |g, b, at, _| body(g, b, at),
        )
    }

    /// [`Gen::emit_vector_positions`] over `start..end` carrying values from one position to
    /// the next ([`Carried`]).
    pub(super) fn emit_vector_positions_carrying(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (start, end): (Value, Value),
        carried: Carried<'_, '_, Self>,
        body: &mut LoopBody<'_, Self, ()>,
    ) -> Result<(), BackendError> {
        let Carried { init, advance, fresh } = carried;
        let w = i64::from(self.cur.width);
        let header = b.create_block();
        let body_block = b.create_block();
        let ragged = b.create_block();
        let exit = b.create_block();
        for block in [header, body_block, ragged] {
            b.append_block_param(block, types::I64);
        }
        for &v in init {
            let ty = b.func.dfg.value_type(v);
            b.append_block_param(header, ty);
            b.append_block_param(body_block, ty);
        }
        b.ins().jump(header, &position_args(start, init));
        b.switch_to_block(header);
        let params = b.block_params(header).to_vec();
        let (at, vals) = (params[0], &params[1..]);
        let next = b.ins().iadd_imm_s(at, w);
        let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, next, end);
        b.ins().brif(
            fits,
            body_block,
            &position_args(at, vals),
            ragged,
            &[BlockArg::Value(at)],
        );
        b.switch_to_block(body_block);
        let params = b.block_params(body_block).to_vec();
        let (at, vals) = (params[0], &params[1..]);
        body(self, b, at, vals)?;
        let next = b.ins().iadd_imm_s(at, w);
        let next_vals = advance(self, b, vals)?;
        b.ins().jump(header, &position_args(next, &next_vals));
        // Points left over: run the body once more on the last `w` points of the range.
        b.switch_to_block(ragged);
        let at = b.block_params(ragged)[0];
        let left = b.ins().icmp(IntCC::UnsignedLessThan, at, end);
        let last = b.ins().iadd_imm_s(end, -w);
        if init.is_empty() {
            b.ins()
                .brif(left, body_block, &[BlockArg::Value(last)], exit, &[]);
        } else {
            // The carried values at `end - w` are only made when a ragged end is there.
            let ragged_end = b.create_block();
            b.ins().brif(left, ragged_end, &[], exit, &[]);
            b.switch_to_block(ragged_end);
            let last_vals = fresh(self, b, last)?;
            b.ins().jump(body_block, &position_args(last, &last_vals));
        }
        b.switch_to_block(exit);
        Ok(())
    }

    /// `for at in (start..end).step_by(step)` while a whole step fits (`at + step <= end`),
    /// carrying `carried` values through block parameters. Returns the first `at` not processed
    /// and the final carried values.
    pub(super) fn emit_loop(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        step: i64,
        carried: &[Value],
        body: &mut LoopBody<'_, Self>,
    ) -> Result<(Value, Vec<Value>), BackendError> {
        let header = b.create_block();
        let body_block = b.create_block();
        let exit = b.create_block();
        b.append_block_param(header, types::I64);
        b.append_block_param(exit, types::I64);
        for &v in carried {
            let ty = b.func.dfg.value_type(v);
            b.append_block_param(header, ty);
            b.append_block_param(exit, ty);
        }
        b.ins().jump(header, &position_args(start, carried));
        b.switch_to_block(header);
        let params = b.block_params(header).to_vec();
        let (at, vals) = (params[0], params[1..].to_vec());
        let next = b.ins().iadd_imm_s(at, step);
        let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, next, end);
        b.ins()
            .brif(fits, body_block, &[], exit, &position_args(at, &vals));
        b.switch_to_block(body_block);
        let new_vals = body(self, b, at, &vals)?;
        let new_vals = if new_vals.is_empty() {
            vals.clone()
        } else {
            new_vals
        };
        let next = b.ins().iadd_imm_s(at, step);
        b.ins().jump(header, &position_args(next, &new_vals));
        b.switch_to_block(exit);
        let out = b.block_params(exit).to_vec();
        Ok((out[0], out[1..].to_vec()))
    }

    /// `for at in (start..end).step_by(step)` while a whole step fits, as [`Gen::emit_loop`],
    /// with the test at the end of the body (one branch per iteration, and none when the range
    /// holds no whole step). Returns the first `at` not processed and the final carried values.
    pub(super) fn emit_loop_tested_at_end(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        step: i64,
        carried: &[Value],
        body: &mut LoopBody<'_, Self>,
    ) -> Result<(Value, Vec<Value>), BackendError> {
        let body_block = b.create_block();
        let exit = b.create_block();
        for block in [body_block, exit] {
            b.append_block_param(block, types::I64);
            for &v in carried {
                let ty = b.func.dfg.value_type(v);
                b.append_block_param(block, ty);
            }
        }
        // Positions are far below `i64::MAX`, so `end - step` compares as a signed number.
        let last = b.ins().iadd_imm_s(end, -step);
        let enter = b.ins().icmp(IntCC::SignedLessThanOrEqual, start, last);
        let args = position_args(start, carried);
        b.ins().brif(enter, body_block, &args, exit, &args);
        b.switch_to_block(body_block);
        let params = b.block_params(body_block).to_vec();
        let (at, vals) = (params[0], params[1..].to_vec());
        let new_vals = body(self, b, at, &vals)?;
        let new_vals = if new_vals.is_empty() { vals } else { new_vals };
        let next = b.ins().iadd_imm_s(at, step);
        let again = b.ins().icmp(IntCC::SignedLessThanOrEqual, next, last);
        let args = position_args(next, &new_vals);
        b.ins().brif(again, body_block, &args, exit, &args);
        b.switch_to_block(exit);
        let out = b.block_params(exit).to_vec();
        Ok((out[0], out[1..].to_vec()))
    }
}
