//! Scans along an axis: running sums, products and extrema, linear recurrences and
//! neighbour differences.

use rfx_ir::{BinaryOp, DType, ScanOp};

use super::ops::{axis_extent, broadcast_error};
use super::tensor::{Operand, Tensor};

impl Tensor {
    /// Running sums along `axis` (NumPy's `cumsum`): element `i` is the sum of elements `0`
    /// to `i`, added one at a time in order, so the results are NumPy's bits (`-0.0` stays; a
    /// NaN or an infinity reaches only the sums from its position on). A `bool` operand is
    /// counted as `i32`. One loop nest (a HIR `cumsum`: the backends run the axis in order with
    /// a running total); it differentiates (the adjoint is the running sum from the end), maps
    /// over batches and fuses with elementwise work around it. [`Tensor::scan`] runs from the
    /// end.
    ///
    /// ```
    /// use rfx::{ScanOp, Tensor};
    ///
    /// // Positions from velocities: one loop nest computes the steps, the sums and the offset.
    /// let p = rfx::jit(|v: Tensor| (v * 0.5).cumsum(0) + 1.0);
    /// let out = p.call((&[1.0f64, 2.0, 3.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[1.5, 2.5, 4.0][..]));
    /// // The cost still to come from each step: the running sum from the end.
    /// let to_go = rfx::jit(|c: Tensor| c.scan(ScanOp::Sum, 0, true));
    /// let out = to_go.call((&[1.0f64, 2.0, 3.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[6.0, 5.0, 3.0][..]));
    /// # Ok::<(), rfx::JitError>(())
    /// ```
    pub fn cumsum(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Sum, axis, false)
    }

    /// Running products along `axis` (NumPy's `cumprod`), multiplied in order; a `bool`
    /// operand is counted as `i32`. Its derivatives are exact at zeros (no division) and cost
    /// `O(n)` per line: linear recurrences ([`Tensor::linrec`]).
    pub fn cumprod(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Prod, axis, false)
    }

    /// The running maximum along `axis` (NumPy's `maximum.accumulate`, JAX's `lax.cummax`):
    /// NaN-propagating, a tie going to the later element, whose derivative it takes. A `bool`
    /// operand gives `bool` (a running `or`).
    pub fn cummax(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Max, axis, false)
    }

    /// The running minimum along `axis` (NumPy's `minimum.accumulate`, JAX's `lax.cummin`),
    /// as [`Tensor::cummax`]; a `bool` operand gives a running `and`.
    pub fn cummin(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Min, axis, false)
    }

    /// The running fold `op` along `axis` ([`ScanOp`]: sum, product, maximum, minimum; the
    /// linear recurrence takes a coefficient, [`Tensor::linrec`], and is an arity error here), from
    /// the axis's last element toward its first when `reverse` (JAX's `reverse=True`: the
    /// cost-to-go of per-step costs is `costs.scan(ScanOp::Sum, 0, true)`). A `bool` operand
    /// is counted as `i32`, and the running maximum or minimum of one cast back to `bool`. An
    /// axis past the rank is a typed error ([`rfx_ir::TypeError::AxisOutOfRange`]).
    pub fn scan(self, op: ScanOp, axis: usize, reverse: bool) -> Tensor {
        Tensor::record(op.name(), &[self.into()], move |b, ids| {
            let ty = b.value_type(ids[0])?.clone();
            if ty.dtype != DType::Bool {
                return b.scan(op, ids[0], axis, reverse);
            }
            let counted = b.cast(ids[0], DType::I32)?;
            let folded = b.scan(op, counted, axis, reverse)?;
            match op {
                ScanOp::Max | ScanOp::Min => b.cast(folded, DType::Bool),
                ScanOp::Sum | ScanOp::Prod | ScanOp::Linear => Ok(folded),
            }
        })
    }

    /// The first-order linear recurrence `y[i] = coef[i] * y[i-1] + self[i]` along `axis`,
    /// from `y[-1] = 0` (from the axis's last element toward its first when `reverse`, then
    /// `y[i] = coef[i] * y[i+1] + self[i]`): a discrete low-pass filter run over a whole signal,
    /// a scalar linear rollout, a discounted cost-to-go. `coef` is a tensor or a number
    /// broadcast with `self` (NumPy's rules). Each step rounds the product and then the sum
    /// (the bits of the plain loop `y = coef[i] * y + x[i]`, never a fused multiply-add), and
    /// `y[0] = self[0]` exactly whenever `coef[0] >= 0`. One ordered loop nest (a HIR `linrec`,
    /// [`ScanOp::Linear`]) that fuses with the work around it, as [`Tensor::cumsum`] does; it
    /// differentiates in `O(n)` per line with respect to both operands (the adjoint is the
    /// same recurrence run backwards) and maps over batches. Numeric operands of one dtype;
    /// shapes that do not broadcast are a typed error.
    ///
    /// ```
    /// use rfx::Tensor;
    ///
    /// // An exponential low-pass filter of a whole signal: y[i] = 0.75 y[i-1] + 0.25 x[i].
    /// let lowpass = rfx::jit(|x: Tensor| (x * 0.25).linrec(0.75, 0, false));
    /// let out = lowpass.call((&[4.0f64, 4.0, 0.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[1.0, 1.75, 1.3125][..]));
    /// // A discounted cost-to-go: g[i] = c[i] + 0.5 g[i+1].
    /// let to_go = rfx::jit(|c: Tensor| c.linrec(0.5, 0, true));
    /// let out = to_go.call((&[1.0f64, 2.0, 4.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[3.0, 4.0, 4.0][..]));
    /// # Ok::<(), rfx::JitError>(())
    /// ```
    pub fn linrec(self, coef: impl Into<Operand>, axis: usize, reverse: bool) -> Tensor {
        Tensor::record("linrec", &[self.into(), coef.into()], move |b, ids| {
            let x = b.value_type(ids[0])?.shape.clone();
            let c = b.value_type(ids[1])?.shape.clone();
            let shape = rfx_ir::broadcast_shapes(&x, &c).ok_or_else(|| broadcast_error("linrec", &x, &c))?;
            let mut operands = [ids[0], ids[1]];
            for (id, own) in operands.iter_mut().zip([&x, &c]) {
                if *own != shape {
                    *id = b.broadcast_to(*id, shape.clone())?;
                }
            }
            b.linrec(operands[0], operands[1], axis, reverse)
        })
    }

    /// Differences of neighbours along `axis` (NumPy's `diff`): `x[i + 1] - x[i]`, the axis
    /// one shorter (empty when it has at most one element). Two windows of `self`: it fuses
    /// and reads an input in place.
    pub fn diff(self, axis: usize) -> Tensor {
        Tensor::record("diff", &[self.into()], move |b, ids| {
            let dims = b.value_type(ids[0])?.shape.dims().to_vec();
            let n = axis_extent("diff", &dims, axis)?;
            let mut window = dims.clone();
            window[axis] = n.saturating_sub(1);
            let mut starts = vec![0; dims.len()];
            let lower = b.slice(ids[0], &starts, window.clone())?;
            starts[axis] = n.min(1);
            let upper = b.slice(ids[0], &starts, window)?;
            b.binary(BinaryOp::Sub, upper, lower)
        })
    }
}
