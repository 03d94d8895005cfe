//! Building derivative kernels: a thin layer over the HIR [`Builder`] with the shape helpers
//! both modes need, the copy of the primal kernel, input selection, and dead-node pruning.

use std::collections::HashMap;

use rfx_ir::hir::{Builder, Kernel, Node, Op, ValueId, verify};
use rfx_ir::{
    BinaryOp, CmpOp, DType, ReduceOp, Scalar, ScanOp, Shape, TensorType, UnaryOp, broadcast_shapes,
};

use crate::error::AdError;

/// An input chosen for differentiation: by name (`"x"`) or by position among the kernel's
/// inputs (`0` is the first `input` statement).
pub trait InputRef {
    /// The position of the chosen input among `kernel`'s inputs.
    fn position(&self, kernel: &Kernel) -> Result<usize, AdError>;
}

impl InputRef for &str {
    fn position(&self, kernel: &Kernel) -> Result<usize, AdError> {
        kernel
            .inputs()
            .position(|(_, name, _)| name == *self)
            .ok_or_else(|| AdError::UnknownInput {
                name: (*self).to_string(),
            })
    }
}

impl InputRef for String {
    fn position(&self, kernel: &Kernel) -> Result<usize, AdError> {
        self.as_str().position(kernel)
    }
}

impl InputRef for usize {
    fn position(&self, kernel: &Kernel) -> Result<usize, AdError> {
        let n_inputs = kernel.inputs().count();
        if *self < n_inputs {
            Ok(*self)
        } else {
            Err(AdError::InputPosition {
                position: *self,
                n_inputs,
            })
        }
    }
}

/// One input to differentiate with respect to.
#[derive(Clone, Debug)]
pub(crate) struct WrtInput {
    /// The input's value in the primal kernel.
    pub(crate) value: ValueId,
    pub(crate) name: String,
    pub(crate) ty: TensorType,
}

/// Verifies `kernel` and resolves `wrt` to distinct float inputs, in the order given.
pub(crate) fn resolve_wrt<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Vec<WrtInput>, AdError> {
    verify(kernel).map_err(AdError::InvalidKernel)?;
    if wrt.is_empty() {
        return Err(AdError::EmptyWrt);
    }
    let inputs: Vec<(ValueId, &str, &TensorType)> = kernel.inputs().collect();
    let mut resolved: Vec<WrtInput> = Vec::with_capacity(wrt.len());
    for w in wrt {
        let position = w.position(kernel)?;
        let Some(&(value, name, ty)) = inputs.get(position) else {
            return Err(AdError::InputPosition {
                position,
                n_inputs: inputs.len(),
            });
        };
        if !ty.dtype.is_float() {
            return Err(AdError::NonFloatInput {
                name: name.to_string(),
                dtype: ty.dtype,
            });
        }
        if resolved.iter().any(|r| r.value == value) {
            return Err(AdError::DuplicateWrt {
                name: name.to_string(),
            });
        }
        resolved.push(WrtInput {
            value,
            name: name.to_string(),
            ty: ty.clone(),
        });
    }
    Ok(resolved)
}

/// Which values depend on a `wrt` input through float values: only these carry derivatives.
pub(crate) fn active_values(kernel: &Kernel, wrt: &[WrtInput]) -> Vec<bool> {
    let mut active = vec![false; kernel.nodes().len()];
    for (index, node) in kernel.nodes().iter().enumerate() {
        let is_float = node.ty.dtype.is_float();
        let any_active = |args: &[ValueId]| {
            args.iter()
                .any(|a| active.get(a.index()).copied().unwrap_or(false))
        };
        active[index] = match node.op {
            Op::Input { .. } => wrt.iter().any(|w| w.value.index() == index),
            // A loop stands for all its carries, whatever carry 0's dtype: its float results
            // (`loop_output`s included) are active when any operand is.
            Op::Loop(_) => any_active(&node.args),
            Op::LoopOutput { .. } => is_float && any_active(&node.args),
            _ => {
                is_float
                    && node
                        .args
                        .iter()
                        .any(|a| active.get(a.index()).copied().unwrap_or(false))
            }
        };
    }
    active
}

/// The identity of a node for hash-consing: op, operands, and the target type of the ops
/// whose type the operands do not determine.
type NodeKey = (Op, Vec<ValueId>, Option<TensorType>);

/// A [`Builder`] for a derivative kernel, with the primal kernel copied into it.
///
/// Every node goes through a hash-consing table, so a partial derivative that several sweeps
/// (or the primal) already computed is reused instead of rebuilt: `jacfwd`'s sweeps share
/// their `cos(q)`s. Multiplying by a constant 1 is skipped when the other operand already has
/// the result's shape (exact in IEEE arithmetic), and broadcasting or reshaping a constant
/// gives a constant. Anything further is `rfx-opt`'s job.
pub(crate) struct Emitter {
    b: Builder,
    /// `map[i]` is primal value `%i` in the new kernel.
    map: Vec<ValueId>,
    /// Output names, in order, to detect clashes early.
    output_names: Vec<String>,
    nodes: HashMap<NodeKey, ValueId>,
    constants: HashMap<ValueId, Scalar>,
    /// Values to read in place of others when the kernel is finished (see
    /// [`Emitter::substitute`]).
    substitutions: HashMap<ValueId, ValueId>,
}

impl Emitter {
    /// Starts a kernel called `name` with `primal`'s inputs (in order), then `extra_inputs`,
    /// then a copy of every other node of `primal`.
    pub(crate) fn new(
        name: &str,
        primal: &Kernel,
        extra_inputs: &[(String, TensorType)],
    ) -> Result<(Emitter, Vec<ValueId>), AdError> {
        let mut b = Builder::new(name);
        let mut map: Vec<Option<ValueId>> = vec![None; primal.nodes().len()];
        let mut input_names = Vec::new();
        for (value, input_name, ty) in primal.inputs() {
            map[value.index()] = Some(b.input(input_name, ty.clone())?);
            input_names.push(input_name.to_string());
        }
        let mut extra = Vec::with_capacity(extra_inputs.len());
        for (input_name, ty) in extra_inputs {
            if input_names.iter().any(|n| n == input_name) {
                return Err(AdError::NameClash {
                    name: input_name.clone(),
                });
            }
            extra.push(b.input(input_name.clone(), ty.clone())?);
            input_names.push(input_name.clone());
        }
        let mut em = Emitter {
            b,
            map: Vec::new(),
            output_names: Vec::new(),
            nodes: HashMap::new(),
            constants: HashMap::new(),
            substitutions: HashMap::new(),
        };
        for (index, node) in primal.nodes().iter().enumerate() {
            if matches!(node.op, Op::Input { .. }) {
                continue;
            }
            let args = mapped_args(&map, &node.args, index)?;
            let target = match node.op {
                Op::Const(_)
                | Op::Literal(_)
                | Op::Cast
                | Op::BroadcastTo
                | Op::Reshape
                | Op::Slice { .. }
                | Op::Pad { .. }
                | Op::Iota { .. }
                | Op::LoopOutput { .. } => Some(node.ty.clone()),
                _ => None,
            };
            map[index] = Some(em.node(node.op.clone(), &args, target)?);
        }
        em.map = map
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or(AdError::Internal(rfx_ir::hir::BuildError::UnknownValue(
                    ValueId::new(i),
                )))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((em, extra))
    }

    /// Adds (or reuses) the node `op(args)`; `target` is the type for `const`, `cast`,
    /// `broadcast_to`, `reshape` and `iota`.
    fn node(&mut self, op: Op, args: &[ValueId], target: Option<TensorType>) -> Result<ValueId, AdError> {
        let key = (op, args.to_vec(), target);
        if let Some(&v) = self.nodes.get(&key) {
            return Ok(v);
        }
        let first = || {
            args.first()
                .copied()
                .ok_or(rfx_ir::hir::BuildError::UnknownValue(ValueId::new(0)))
        };
        let v = match (&key.0, &key.2) {
            (Op::Const(value), Some(t)) => {
                let v = self.b.constant(*value, t.shape.clone());
                self.constants.insert(v, *value);
                v
            }
            (Op::Cast, Some(t)) => self.b.cast(first()?, t.dtype)?,
            (Op::LoopOutput { index }, _) => self.b.loop_output(first()?, *index)?,
            (Op::Iota { axis }, Some(t)) => self.b.iota(t.dtype, t.shape.clone(), *axis)?,
            (Op::Literal(values), Some(t)) => self.b.literal_values(t.clone(), values.clone())?,
            (Op::Transpose { .. }, _) if self.constants.contains_key(&first()?) => {
                let value = self.constants[&first()?];
                let shape = rfx_ir::hir::result_type(&key.0, &[self.b.value_type(first()?)?], None)
                    .map_err(|source| rfx_ir::hir::BuildError::Type {
                        op: "transpose",
                        source,
                    })?
                    .shape;
                return self.node(Op::Const(value), &[], Some(TensorType::new(value.dtype(), shape)));
            }
            // A lookup in a splat is the splat, of the index's shape.
            (Op::Gather { .. }, _) if self.constants.contains_key(&first()?) => {
                let value = self.constants[&first()?];
                let index = args
                    .get(1)
                    .copied()
                    .ok_or(rfx_ir::hir::BuildError::UnknownValue(ValueId::new(0)))?;
                let shape = self.b.value_type(index)?.shape.clone();
                return self.node(Op::Const(value), &[], Some(TensorType::new(value.dtype(), shape)));
            }
            // A window of a splat is a splat; zeros around a splat of zero are that splat.
            (Op::Slice { starts }, Some(t)) => match self.constants.get(&first()?) {
                Some(&value) => return self.node(Op::Const(value), &[], Some(t.clone())),
                None => self.b.slice(first()?, starts, t.shape.clone())?,
            },
            (Op::Pad { low }, Some(t)) => match self.constants.get(&first()?) {
                Some(&value) if value.to_bits() == rfx_ir::Scalar::zero(value.dtype()).to_bits() => {
                    return self.node(Op::Const(value), &[], Some(t.clone()));
                }
                _ => self.b.pad(first()?, low, t.shape.clone())?,
            },
            (Op::BroadcastTo | Op::Reshape, Some(t)) => match self.constants.get(&first()?) {
                Some(&value) => return self.node(Op::Const(value), &[], Some(t.clone())),
                None if matches!(key.0, Op::Reshape) => self.b.reshape(first()?, t.shape.clone())?,
                None => self.b.broadcast_to(first()?, t.shape.clone())?,
            },
            (op, _) => self.b.op(op.clone(), args)?,
        };
        self.nodes.insert(key, v);
        Ok(v)
    }

    /// Adds (or reuses) the loop `spec` over `operands` and returns its final carries in order.
    pub(crate) fn loop_(
        &mut self,
        spec: rfx_ir::hir::Loop,
        operands: &[ValueId],
    ) -> Result<Vec<ValueId>, AdError> {
        let carries = spec.carries;
        let first = self.node(Op::Loop(Box::new(spec)), operands, None)?;
        let mut finals = vec![first];
        for index in 1..carries {
            finals.push(self.node(Op::LoopOutput { index }, &[first], None)?);
        }
        Ok(finals)
    }

    /// `true` when `v` is a constant equal to `value`.
    fn is_constant(&self, v: ValueId, value: f64) -> bool {
        self.constants
            .get(&v)
            .is_some_and(|s| s.dtype().is_float() && s.to_f64() == value)
    }

    /// Primal value `v` in the new kernel.
    pub(crate) fn primal(&self, v: ValueId) -> ValueId {
        self.map.get(v.index()).copied().unwrap_or(v)
    }

    pub(crate) fn shape(&self, v: ValueId) -> Result<Shape, AdError> {
        Ok(self.b.value_type(v)?.shape.clone())
    }

    pub(crate) fn dtype(&self, v: ValueId) -> Result<DType, AdError> {
        Ok(self.b.value_type(v)?.dtype)
    }

    /// A `[]` constant of `dtype`.
    pub(crate) fn scalar(&mut self, dtype: DType, value: f64) -> ValueId {
        self.constant(dtype, value, Shape::scalar())
    }

    /// A `[]` constant of `like`'s dtype.
    pub(crate) fn scalar_like(&mut self, like: ValueId, value: f64) -> Result<ValueId, AdError> {
        let dtype = self.dtype(like)?;
        Ok(self.scalar(dtype, value))
    }

    /// A constant splatted to `shape`.
    pub(crate) fn constant(&mut self, dtype: DType, value: f64, shape: Shape) -> ValueId {
        let scalar = Scalar::from_f64(dtype, value);
        let ty = TensorType::new(dtype, shape);
        match self.node(Op::Const(scalar), &[], Some(ty.clone())) {
            Ok(v) => v,
            // A constant cannot fail to type-check; build it directly if the table says so.
            Err(_) => self.b.constant(scalar, ty.shape),
        }
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, x: ValueId) -> Result<ValueId, AdError> {
        self.node(Op::Unary(op), &[x], None)
    }

    pub(crate) fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        if op == BinaryOp::Mul {
            // x * 1 = x exactly (NaN payloads aside) when no broadcast is needed.
            let (sa, sb) = (self.shape(a)?, self.shape(b)?);
            let result = broadcast_shapes(&sa, &sb);
            if self.is_constant(b, 1.0) && result.as_ref() == Some(&sa) {
                return Ok(a);
            }
            if self.is_constant(a, 1.0) && result.as_ref() == Some(&sb) {
                return Ok(b);
            }
        }
        self.node(Op::Binary(op), &[a, b], None)
    }

    pub(crate) fn add(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        self.binary(BinaryOp::Add, a, b)
    }

    pub(crate) fn sub(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        self.binary(BinaryOp::Sub, a, b)
    }

    pub(crate) fn mul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        self.binary(BinaryOp::Mul, a, b)
    }

    pub(crate) fn div(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        self.binary(BinaryOp::Div, a, b)
    }

    pub(crate) fn neg(&mut self, x: ValueId) -> Result<ValueId, AdError> {
        self.unary(UnaryOp::Neg, x)
    }

    pub(crate) fn compare(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        self.node(Op::Compare(op), &[a, b], None)
    }

    pub(crate) fn select(&mut self, cond: ValueId, a: ValueId, b: ValueId) -> Result<ValueId, AdError> {
        self.node(Op::Select, &[cond, a, b], None)
    }

    pub(crate) fn cast(&mut self, x: ValueId, dtype: DType) -> Result<ValueId, AdError> {
        let shape = self.shape(x)?;
        self.node(Op::Cast, &[x], Some(TensorType::new(dtype, shape)))
    }

    pub(crate) fn reshape(&mut self, x: ValueId, shape: Shape) -> Result<ValueId, AdError> {
        if self.shape(x)? == shape {
            return Ok(x);
        }
        let dtype = self.dtype(x)?;
        self.node(Op::Reshape, &[x], Some(TensorType::new(dtype, shape)))
    }

    /// The index along `axis` of a `dtype` tensor of `shape`.
    pub(crate) fn iota(&mut self, dtype: DType, shape: Shape, axis: usize) -> Result<ValueId, AdError> {
        self.node(Op::Iota { axis }, &[], Some(TensorType::new(dtype, shape)))
    }

    /// The identity of shape `shape ++ shape` in `dtype`: 1 where the two halves of the index
    /// agree, else 0. Built from indices inside the kernel, so it costs no input and no memory:
    /// it fuses into whatever reads it. The indices are of `dtype` itself where it counts them
    /// exactly (so a vector backend keeps one lane width), else `i32`.
    pub(crate) fn identity(&mut self, dtype: DType, shape: &Shape) -> Result<ValueId, AdError> {
        match self.identity_mask(dtype, shape)? {
            Some(mask) => self.cast(mask, dtype),
            None => {
                let full = Shape::new([shape.dims(), shape.dims()].concat());
                Ok(self.constant(dtype, 1.0, full))
            }
        }
    }

    /// The bool mask of shape `shape ++ shape` that is true where the two halves of the index
    /// agree (indices counted in `dtype` where it counts them exactly, else `i32`); `None`
    /// when every extent is 1 (the mask is all true).
    pub(crate) fn identity_mask(&mut self, dtype: DType, shape: &Shape) -> Result<Option<ValueId>, AdError> {
        let rank = shape.rank();
        let full = Shape::new([shape.dims(), shape.dims()].concat());
        let mut mask: Option<ValueId> = None;
        for (axis, &extent) in shape.dims().iter().enumerate() {
            if extent == 1 {
                continue;
            }
            let index_dtype = if extent <= rfx_ir::semantics::max_exact_index(dtype) {
                dtype
            } else {
                DType::I32
            };
            let row = self.iota(index_dtype, full.clone(), axis)?;
            let col = self.iota(index_dtype, full.clone(), rank + axis)?;
            let same = self.compare(CmpOp::Eq, row, col)?;
            mask = Some(match mask {
                Some(m) => self.binary(BinaryOp::And, m, same)?,
                None => same,
            });
        }
        Ok(mask)
    }

    /// `x` with its axes permuted (`x` itself for the identity permutation).
    pub(crate) fn transpose(&mut self, x: ValueId, perm: &[usize]) -> Result<ValueId, AdError> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.node(Op::Transpose { perm: perm.to_vec() }, &[x], None)
    }

    /// The window of `x` at `starts` of extents `shape` (`x` itself when it is all of `x`).
    pub(crate) fn slice(&mut self, x: ValueId, starts: &[usize], shape: Shape) -> Result<ValueId, AdError> {
        if self.shape(x)? == shape {
            return Ok(x);
        }
        let dtype = self.dtype(x)?;
        self.node(
            Op::Slice {
                starts: starts.to_vec(),
            },
            &[x],
            Some(TensorType::new(dtype, shape)),
        )
    }

    /// `x` placed at `low` in zeros of `shape` (`x` itself when it fills `shape`).
    pub(crate) fn pad(&mut self, x: ValueId, low: &[usize], shape: Shape) -> Result<ValueId, AdError> {
        if self.shape(x)? == shape {
            return Ok(x);
        }
        let dtype = self.dtype(x)?;
        self.node(
            Op::Pad { low: low.to_vec() },
            &[x],
            Some(TensorType::new(dtype, shape)),
        )
    }

    /// `table` read along `axis` at `index` (a splat table gives the splat).
    pub(crate) fn gather(&mut self, table: ValueId, index: ValueId, axis: usize) -> Result<ValueId, AdError> {
        self.node(Op::Gather { axis }, &[table, index], None)
    }

    /// The row a `gather` of a table of `extent` rows reads at `index`, `clamp(trunc(index), 0,
    /// extent - 1)`, in a dtype that counts to `extent` exactly: the index's own, or `i32`.
    pub(crate) fn gather_row(&mut self, index: ValueId, extent: usize) -> Result<ValueId, AdError> {
        let mut dtype = self.dtype(index)?;
        let mut index = index;
        if dtype.is_float() && extent > rfx_ir::semantics::max_exact_index(dtype) {
            // The cast truncates toward zero, saturates and maps NaN to 0, as the clamp wants.
            index = self.cast(index, DType::I32)?;
            dtype = DType::I32;
        }
        let last = self.scalar(dtype, extent.saturating_sub(1) as f64);
        let zero = self.scalar(dtype, 0.0);
        if dtype.is_float() {
            // `index >= 0` is false for NaN and the negatives; `floor` truncates the rest.
            let floor = self.unary(UnaryOp::Floor, index)?;
            let low = self.binary(BinaryOp::Min, floor, last)?;
            let positive = self.compare(CmpOp::Ge, index, zero)?;
            self.select(positive, low, zero)
        } else {
            let low = self.binary(BinaryOp::Min, index, last)?;
            self.binary(BinaryOp::Max, low, zero)
        }
    }

    /// `x` (`batch_rank` batch axes, then its rows) with row `index` (an `i32` scalar, clamped)
    /// replaced by `row` (`x`'s shape without the row axis): a `set_row` without batch axes,
    /// else a select by row.
    pub(crate) fn set_row(
        &mut self,
        x: ValueId,
        row: ValueId,
        index: ValueId,
        batch_rank: usize,
    ) -> Result<ValueId, AdError> {
        if batch_rank == 0 {
            return self.node(Op::SetRow, &[x, row, index], None);
        }
        let dims = self.shape(x)?.dims().to_vec();
        let rows = dims.get(batch_rank).copied().unwrap_or(1);
        let at = self.gather_row(index, rows)?;
        let mut column = vec![1; dims.len()];
        column[batch_rank] = rows;
        let iota = self.iota(DType::I32, Shape::new(column), batch_rank)?;
        let here = self.compare(CmpOp::Eq, iota, at)?;
        let mut one_row = dims;
        one_row[batch_rank] = 1;
        let row = self.reshape(row, Shape::new(one_row))?;
        self.select(here, row, x)
    }

    /// Row `index` (an `i32` scalar, clamped) of `x` along `axis`, without that axis.
    pub(crate) fn row_at(&mut self, x: ValueId, index: ValueId, axis: usize) -> Result<ValueId, AdError> {
        let dims = self.shape(x)?.dims().to_vec();
        let mut one_row = dims.clone();
        one_row[axis] = 1;
        let at = self.reshape(index, Shape::new(vec![1; dims.len()]))?;
        let at = self.broadcast_to(at, Shape::new(one_row))?;
        let row = self.gather(x, at, axis)?;
        let mut rest = dims;
        rest.remove(axis);
        self.reshape(row, Shape::new(rest))
    }

    pub(crate) fn broadcast_to(&mut self, x: ValueId, shape: Shape) -> Result<ValueId, AdError> {
        if self.shape(x)? == shape {
            return Ok(x);
        }
        let dtype = self.dtype(x)?;
        self.node(Op::BroadcastTo, &[x], Some(TensorType::new(dtype, shape)))
    }

    pub(crate) fn reduce(
        &mut self,
        op: ReduceOp,
        x: ValueId,
        axes: &[usize],
        keepdims: bool,
    ) -> Result<ValueId, AdError> {
        let mut axes = axes.to_vec();
        axes.sort_unstable();
        self.node(Op::Reduce { op, axes, keepdims }, &[x], None)
    }

    /// The running fold `op` of `x` along `axis`, from its end when `reverse`.
    pub(crate) fn scan(
        &mut self,
        op: ScanOp,
        x: ValueId,
        axis: usize,
        reverse: bool,
    ) -> Result<ValueId, AdError> {
        self.node(Op::Scan { op, axis, reverse }, &[x], None)
    }

    /// The linear recurrence `y[i] = coef[i] * y[i-1] + x[i]` along `axis`, from its end when
    /// `reverse` (`coef` has `x`'s shape).
    pub(crate) fn linrec(
        &mut self,
        x: ValueId,
        coef: ValueId,
        axis: usize,
        reverse: bool,
    ) -> Result<ValueId, AdError> {
        let op = Op::Scan {
            op: ScanOp::Linear,
            axis,
            reverse,
        };
        self.node(op, &[x, coef], None)
    }

    /// `v` moved one step along `axis` in a scan's order: element `i` holds element `i - 1`
    /// (`i + 1` with `reverse`), and the first element in that order holds `fill`.
    pub(crate) fn shift_along(
        &mut self,
        v: ValueId,
        axis: usize,
        reverse: bool,
        fill: f64,
    ) -> Result<ValueId, AdError> {
        let shape = self.shape(v)?;
        let extent = shape.dims().get(axis).copied().unwrap_or(0);
        if extent == 0 {
            return Ok(v);
        }
        let mut starts = vec![0; shape.rank()];
        let mut low = vec![0; shape.rank()];
        if reverse {
            starts[axis] = 1;
        } else {
            low[axis] = 1;
        }
        let mut window = shape.dims().to_vec();
        window[axis] = extent - 1;
        let kept = self.slice(v, &starts, Shape::new(window))?;
        let shifted = self.pad(kept, &low, shape.clone())?;
        if fill == 0.0 {
            return Ok(shifted);
        }
        let position = self.iota(DType::I32, shape, axis)?;
        let first = self.scalar(DType::I32, if reverse { (extent - 1) as f64 } else { 0.0 });
        let at_first = self.compare(CmpOp::Eq, position, first)?;
        let fill = self.scalar_like(v, fill)?;
        self.select(at_first, fill, shifted)
    }

    /// `select(cond, x, 0)` (or `select(cond, 0, x)` when `pass_when` is false).
    pub(crate) fn mask(&mut self, cond: ValueId, pass_when: bool, x: ValueId) -> Result<ValueId, AdError> {
        let zero = self.scalar_like(x, 0.0)?;
        if pass_when {
            self.select(cond, x, zero)
        } else {
            self.select(cond, zero, x)
        }
    }

    /// `a + b` where `None` is a zero of the right shape.
    pub(crate) fn add_opt(
        &mut self,
        a: Option<ValueId>,
        b: Option<ValueId>,
    ) -> Result<Option<ValueId>, AdError> {
        Ok(match (a, b) {
            (Some(a), Some(b)) => Some(self.add(a, b)?),
            (a, None) => a,
            (None, b) => b,
        })
    }

    /// Sums `v` (shape `batch ++ X`, with `target` broadcasting to `X`) down to
    /// `batch ++ target`: the adjoint of NumPy's implicit broadcasting.
    pub(crate) fn unbroadcast(
        &mut self,
        v: ValueId,
        batch_rank: usize,
        target: &Shape,
    ) -> Result<ValueId, AdError> {
        let full = self.shape(v)?;
        let batch = &full.dims()[..batch_rank.min(full.rank())];
        let x_dims = &full.dims()[batch.len()..];
        let extra = x_dims.len().saturating_sub(target.rank());
        let mut leading = Vec::new();
        let mut aligned = Vec::new();
        for (j, &d) in x_dims.iter().enumerate() {
            if j < extra {
                leading.push(batch.len() + j);
            } else if target.dims()[j - extra] == 1 && d != 1 {
                aligned.push(batch.len() + j);
            }
        }
        let want = Shape::new([batch, target.dims()].concat());
        let summed = match (leading.is_empty(), aligned.is_empty()) {
            (true, true) => v,
            (false, true) => self.reduce(ReduceOp::Sum, v, &leading, false)?,
            (true, false) => self.reduce(ReduceOp::Sum, v, &aligned, true)?,
            (false, false) => {
                let all = [leading, aligned].concat();
                self.reduce(ReduceOp::Sum, v, &all, true)?
            }
        };
        self.reshape(summed, want)
    }

    /// Marks the copy of each of `primal`'s outputs as an output of the same name, in order.
    pub(crate) fn primal_outputs(&mut self, primal: &Kernel) -> Result<(), AdError> {
        for output in primal.outputs() {
            let value = self.primal(output.value);
            self.output(&output.name, value)?;
        }
        Ok(())
    }

    /// Marks `value` as the output `name`.
    pub(crate) fn output(&mut self, name: &str, value: ValueId) -> Result<(), AdError> {
        if self.output_names.iter().any(|n| n == name) {
            return Err(AdError::NameClash {
                name: name.to_string(),
            });
        }
        self.b.output(name, value)?;
        self.output_names.push(name.to_string());
        Ok(())
    }

    /// Finishes the kernel, dropping nodes that no output needs (inputs stay: they are the
    /// signature).
    pub(crate) fn finish(self) -> Result<Kernel, AdError> {
        let kernel = self.b.finish()?;
        if !self.substitutions.is_empty()
            && let Some(substituted) = substituted(&kernel, &self.substitutions)?
        {
            return prune(&substituted);
        }
        prune(&kernel)
    }

    /// Makes every reader of `old` read `new` instead once the kernel is finished: `new`
    /// computes the same value (a derivative loop also computes the primal loop's carries, so
    /// the primal loop need not run twice). The first substitution of a value wins.
    pub(crate) fn substitute(&mut self, old: ValueId, new: ValueId) {
        if old != new {
            self.substitutions.entry(old).or_insert(new);
        }
    }
}

/// A batched derivative of a value of shape `S`: a forward tangent or a reverse adjoint of
/// shape `batch ++ S` (`None` stands for zero where it is optional).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Batched {
    /// The derivative itself, of shape `batch ++ S` (a forward tangent may also broadcast to
    /// it from the right, once lifted).
    Dense(ValueId),
    /// A diagonal derivative, where the batch is `S` itself (an identity seed carried through
    /// elementwise ops of that shape): `d[s]` where the batch index equals `s`, zero
    /// elsewhere; `d` broadcasts to `S`. Kept as the diagonal `d`, so an elementwise chain
    /// costs `|S|`, not `|S|²`, and the entries off the diagonal are exact zeros (a dense
    /// sweep computes them as `0 · ∂`, which is NaN where the partial `∂` is not finite).
    Diag(ValueId),
}

impl Batched {
    /// The derivative as a value of shape `batch ++ out` (`out`: the primal value's shape). A
    /// diagonal one is `select(identity mask, d, 0)`.
    pub(crate) fn dense(self, em: &mut Emitter, batch: &Shape, out: &Shape) -> Result<ValueId, AdError> {
        match self {
            Batched::Dense(t) => Ok(t),
            Batched::Diag(d) => {
                let dtype = em.dtype(d)?;
                let full = Shape::new([batch.dims(), out.dims()].concat());
                // Indexed by the batch half (`d[b]`, equal to `d[s]` where it is kept): a row
                // of a Jacobian laid out `out ++ in` reads one value.
                let d = if em.shape(d)?.numel() == 1 {
                    d
                } else {
                    let whole = em.broadcast_to(d, out.clone())?;
                    let ones = vec![1; out.rank()];
                    em.reshape(whole, Shape::new([out.dims(), &ones].concat()))?
                };
                let spread = em.broadcast_to(d, full.clone())?;
                match em.identity_mask(dtype, out)? {
                    Some(mask) => em.mask(mask, true, spread),
                    None => Ok(spread),
                }
            }
        }
    }
}

/// The new values of node `index`'s operands `args` through `map` (old value index → new value),
/// or an internal error when one has none (operands are defined before their users, so every
/// one has been mapped).
pub(crate) fn mapped_args<T: Copy>(
    map: &[Option<T>],
    args: &[ValueId],
    index: usize,
) -> Result<Vec<T>, AdError> {
    args.iter()
        .map(|a| map.get(a.index()).copied().flatten())
        .collect::<Option<Vec<_>>>()
        .ok_or(AdError::Internal(rfx_ir::hir::BuildError::UnknownValue(
            ValueId::new(index),
        )))
}

/// Copies `node` with rebuilt operands `args` into `b`.
pub(crate) fn copy_node(b: &mut Builder, node: &Node, args: &[ValueId]) -> Result<ValueId, AdError> {
    Ok(b.copy(&node.op, args, &node.ty)?)
}

/// `kernel` with only its inputs and the nodes `outputs` need, returning `outputs` (name,
/// value in `kernel`) in order.
pub(crate) fn rebuild(kernel: &Kernel, outputs: &[(String, ValueId)]) -> Result<Kernel, AdError> {
    let mut live = vec![false; kernel.nodes().len()];
    let mut stack: Vec<ValueId> = outputs.iter().map(|(_, v)| *v).collect();
    while let Some(v) = stack.pop() {
        if let Some(slot) = live.get_mut(v.index())
            && !*slot
        {
            *slot = true;
            if let Some(node) = kernel.node(v) {
                stack.extend(node.args.iter().copied());
            }
        }
    }
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    for (index, node) in kernel.nodes().iter().enumerate() {
        if !live[index] && !matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let args = mapped_args(&map, &node.args, index)?;
        map[index] = Some(copy_node(&mut b, node, &args)?);
    }
    for (name, value) in outputs {
        let v = map
            .get(value.index())
            .copied()
            .flatten()
            .ok_or(rfx_ir::hir::BuildError::UnknownValue(*value))?;
        b.output(name.clone(), v)?;
    }
    Ok(b.finish()?)
}

/// `kernel` with the values `substitutions` maps read in place of the old ones, its nodes put
/// back in an order where each follows its operands (a substitute may be defined after the
/// readers of the value it replaces). `None` when a substitution would make a value depend
/// on itself (then the kernel stays as it is).
fn substituted(
    kernel: &Kernel,
    substitutions: &HashMap<ValueId, ValueId>,
) -> Result<Option<Kernel>, AdError> {
    let resolve = |mut v: ValueId| {
        // A chain is at most as long as the table.
        for _ in 0..=substitutions.len() {
            match substitutions.get(&v) {
                Some(&next) => v = next,
                None => break,
            }
        }
        v
    };
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Unseen,
        Open,
        Done,
    }
    let mut state = vec![State::Unseen; kernel.nodes().len()];
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    for (value, name, ty) in kernel.inputs() {
        map[value.index()] = Some(b.input(name, ty.clone())?);
        state[value.index()] = State::Done;
    }
    let mut stack: Vec<(ValueId, bool)> = kernel
        .outputs()
        .iter()
        .rev()
        .map(|o| (resolve(o.value), false))
        .collect();
    while let Some((v, operands_done)) = stack.pop() {
        let Some(node) = kernel.node(v) else {
            return Err(AdError::Internal(rfx_ir::hir::BuildError::UnknownValue(v)));
        };
        let args: Vec<ValueId> = node.args.iter().map(|&a| resolve(a)).collect();
        match (state[v.index()], operands_done) {
            (State::Done, _) => {}
            (State::Open, false) => return Ok(None),
            (State::Open, true) => {
                let operands = mapped_args(&map, &args, v.index())?;
                map[v.index()] = Some(copy_node(&mut b, node, &operands)?);
                state[v.index()] = State::Done;
            }
            (State::Unseen, _) => {
                state[v.index()] = State::Open;
                stack.push((v, true));
                stack.extend(args.iter().rev().map(|&a| (a, false)));
            }
        }
    }
    for output in kernel.outputs() {
        let v = resolve(output.value);
        let value = map[v.index()].ok_or(rfx_ir::hir::BuildError::UnknownValue(v))?;
        b.output(output.name.clone(), value)?;
    }
    Ok(Some(b.finish()?))
}

fn prune(kernel: &Kernel) -> Result<Kernel, AdError> {
    let outputs: Vec<(String, ValueId)> = kernel
        .outputs()
        .iter()
        .map(|o| (o.name.clone(), o.value))
        .collect();
    rebuild(kernel, &outputs)
}

/// `kernel` with only the outputs called `names`, in that order, and the nodes they need.
///
/// Useful for composing transforms: `grad(&keep_outputs(&value_and_grad(k, &["x"])?, &["grad_x"])?, ...)`
/// differentiates only the gradient output.
pub fn keep_outputs(kernel: &Kernel, names: &[&str]) -> Result<Kernel, AdError> {
    verify(kernel).map_err(AdError::InvalidKernel)?;
    if names.is_empty() {
        return Err(AdError::NoOutputsKept);
    }
    if let Some((_, name)) = names
        .iter()
        .enumerate()
        .find(|&(i, name)| names[..i].contains(name))
    {
        return Err(AdError::DuplicateOutput {
            name: (*name).to_string(),
        });
    }
    let outputs = names
        .iter()
        .map(|&name| {
            kernel
                .outputs()
                .iter()
                .find(|o| o.name == name)
                .map(|o| (o.name.clone(), o.value))
                .ok_or_else(|| AdError::UnknownOutput {
                    name: name.to_string(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    rebuild(kernel, &outputs)
}
