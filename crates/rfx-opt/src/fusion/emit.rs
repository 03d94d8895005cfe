//! Emitting MIR from a [`Plan`]: one kernel per group of roots, each value computed at the
//! kernel's points through frames (pads, slices and unit-axis reshapes computed in place),
//! views (broadcasts, transposes and slices of buffers read with strides) and gathers.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rfx_ir::hir::{Op, ValueId};
use rfx_ir::mir::{BufKind, Buffer, MirInst, MirKernel, MirOp, MirProgram, MirValue, Reduction, Store};
use rfx_ir::{BinaryOp, BufId, Shape};

use super::plan::{LoopKind, Plan, is_view, regrouped, strides_in_domain, under_reshapes};
use crate::error::OptError;

impl Plan<'_> {
    /// Writes the MIR program: buffers for inputs, outputs and temporaries, one kernel per group.
    /// Also returns the roots stored in no buffer after all: every reader computes in the
    /// root's own kernel, at its own points (see [`drop_unread_temps`]).
    pub(super) fn emit(&self) -> Result<(MirProgram, BTreeSet<ValueId>), OptError> {
        let kernel = self.kernel;
        let mut buffers = Vec::new();
        let mut input_buf: HashMap<ValueId, BufId> = HashMap::new();
        for (v, name, ty) in kernel.inputs() {
            input_buf.insert(v, BufId::new(buffers.len()));
            buffers.push(Buffer {
                ty: ty.clone(),
                kind: BufKind::Input {
                    name: name.to_string(),
                },
            });
        }
        // A literal is read like an input, from a buffer of its values (one per distinct
        // literal: the e-graph merged equal ones).
        for (index, node) in kernel.nodes().iter().enumerate() {
            if let (Op::Literal(values), true) = (&node.op, self.live[index]) {
                input_buf.insert(ValueId::new(index), BufId::new(buffers.len()));
                buffers.push(Buffer {
                    ty: node.ty.clone(),
                    kind: BufKind::Literal {
                        values: values.clone(),
                    },
                });
            }
        }
        // Every buffer a root writes; the first one is where other kernels read it.
        let mut root_bufs: BTreeMap<ValueId, Vec<BufId>> = BTreeMap::new();
        for output in kernel.outputs() {
            let ty = kernel
                .value_type(output.value)
                .ok_or(OptError::InvalidValue(output.value))?;
            root_bufs
                .entry(output.value)
                .or_default()
                .push(BufId::new(buffers.len()));
            buffers.push(Buffer {
                ty: ty.clone(),
                kind: BufKind::Output {
                    name: output.name.clone(),
                },
            });
        }
        for &root in self.roots.keys() {
            if self.regions.contains_key(&root) {
                continue;
            }
            if let std::collections::btree_map::Entry::Vacant(slot) = root_bufs.entry(root) {
                let ty = kernel.value_type(root).ok_or(OptError::InvalidValue(root))?;
                slot.insert(vec![BufId::new(buffers.len())]);
                buffers.push(Buffer {
                    ty: ty.clone(),
                    kind: BufKind::Temp,
                });
            }
        }
        let fill_groups = self.fill_groups();
        let mut kernels = self.fill_kernels(&root_bufs, &fill_groups)?;
        for (g, (domain, roots)) in self.groups.iter().enumerate() {
            let mut emitter = KernelEmitter {
                plan: self,
                group: g,
                domain,
                input_buf: &input_buf,
                root_bufs: &root_bufs,
                body: Vec::new(),
                memo: HashMap::new(),
                numbered: HashMap::new(),
                frames: Vec::new(),
                root_values: HashMap::new(),
            };
            let mut stores = Vec::new();
            let mut reductions = Vec::new();
            for &root in roots {
                // Filled part by part by the kernels of its `pad`s.
                if self.split_wholes.contains_key(&root) {
                    continue;
                }
                if let (Some((whole, region)), Some(part)) = (self.regions.get(&root), self.placed_part(root))
                {
                    let value = emitter.value(part)?;
                    for &buf in root_bufs.get(whole).ok_or(OptError::InvalidValue(*whole))? {
                        stores.push(Store {
                            buf,
                            value,
                            region: Some(region.clone()),
                        });
                    }
                    continue;
                }
                let bufs = root_bufs.get(&root).ok_or(OptError::InvalidValue(root))?;
                match self.op(root) {
                    Some(Op::Reduce { op, axes, .. }) if self.is_reduce(root) => {
                        let operand = kernel
                            .node(root)
                            .and_then(|n| n.args.first().copied())
                            .ok_or(OptError::InvalidValue(root))?;
                        let value = emitter.value(operand)?;
                        for &buf in bufs {
                            reductions.push(Reduction {
                                op: *op,
                                value,
                                axes: axes.clone(),
                                buf,
                            });
                        }
                    }
                    _ => {
                        let value = emitter.root_value(root)?;
                        for &buf in bufs {
                            stores.push(Store::whole(buf, value));
                        }
                    }
                }
            }
            // The constant parts stored beside a part of the same value at the same points.
            for (fill, _) in fill_groups.iter().filter(|(_, fg)| *fg == Some(g)) {
                let value = emitter.push(MirOp::Const(fill.value), Vec::new(), fill.value.dtype());
                for &buf in root_bufs
                    .get(&fill.whole)
                    .ok_or(OptError::InvalidValue(fill.whole))?
                {
                    stores.push(Store {
                        buf,
                        value,
                        region: Some(fill.region.clone()),
                    });
                }
            }
            if stores.is_empty() && reductions.is_empty() {
                continue;
            }
            kernels.push(MirKernel {
                name: format!("k{}", kernels.len()),
                domain: domain.clone(),
                body: emitter.body,
                stores,
                reductions,
            });
        }
        let read: BTreeSet<BufId> = kernels.iter().flat_map(MirKernel::reads).collect();
        let unstored = root_bufs
            .iter()
            .filter(|(_, bufs)| {
                bufs.iter().all(|b| {
                    !read.contains(b)
                        && buffers
                            .get(b.index())
                            .is_some_and(|buf| buf.kind == BufKind::Temp)
                })
            })
            .map(|(&v, _)| v)
            .collect();
        Ok((
            drop_unread_temps(kernel.name(), buffers, kernels, &read),
            unstored,
        ))
    }
}

impl Plan<'_> {
    /// Each constant part of a split value with the group that stores it: the first
    /// elementwise group over the part's points that stores another part of the same value
    /// (every reader of the value runs after all its parts), else none.
    fn fill_groups(&self) -> Vec<(&super::regions::Fill, Option<usize>)> {
        self.fills
            .iter()
            .map(|fill| {
                let group = self.groups.iter().enumerate().position(|(g, (domain, roots))| {
                    *domain == fill.shape
                        && self.group_kinds.get(g) == Some(&LoopKind::Elementwise)
                        && roots
                            .iter()
                            .any(|r| self.regions.get(r).is_some_and(|(whole, _)| *whole == fill.whole))
                });
                (fill, group)
            })
            .collect()
    }

    /// The kernels storing the constant parts of split values that no group stores
    /// (`fill_groups`): one per shape, before every other kernel (they read nothing).
    fn fill_kernels(
        &self,
        root_bufs: &BTreeMap<ValueId, Vec<BufId>>,
        fill_groups: &[(&super::regions::Fill, Option<usize>)],
    ) -> Result<Vec<MirKernel>, OptError> {
        let mut kernels: Vec<MirKernel> = Vec::new();
        for fill in fill_groups.iter().filter(|(_, g)| g.is_none()).map(|(f, _)| *f) {
            let position = match kernels.iter().position(|k| k.domain == fill.shape) {
                Some(position) => position,
                None => {
                    kernels.push(MirKernel {
                        name: format!("k{}", kernels.len()),
                        domain: fill.shape.clone(),
                        body: Vec::new(),
                        stores: Vec::new(),
                        reductions: Vec::new(),
                    });
                    kernels.len() - 1
                }
            };
            let kernel = &mut kernels[position];
            let inst = MirInst {
                op: MirOp::Const(fill.value),
                args: Vec::new(),
                dtype: fill.value.dtype(),
            };
            let value = match kernel.body.iter().position(|i| *i == inst) {
                Some(at) => MirValue::new(at),
                None => {
                    kernel.body.push(inst);
                    MirValue::new(kernel.body.len() - 1)
                }
            };
            for &buf in root_bufs
                .get(&fill.whole)
                .ok_or(OptError::InvalidValue(fill.whole))?
            {
                kernel.stores.push(Store {
                    buf,
                    value,
                    region: Some(fill.region.clone()),
                });
            }
        }
        Ok(kernels)
    }
}

/// The program without the temporaries no kernel reads, nor the writes into them: a value
/// stored only because it is a root (a scan, which must be computed by its ordered kernel)
/// whose every reader computes in that kernel at its own points needs no buffer.
/// `read` holds every buffer some kernel reads.
fn drop_unread_temps(
    name: &str,
    buffers: Vec<Buffer>,
    mut kernels: Vec<MirKernel>,
    read: &BTreeSet<BufId>,
) -> MirProgram {
    let keep: Vec<bool> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| b.kind != BufKind::Temp || read.contains(&BufId::new(i)))
        .collect();
    if keep.iter().all(|&k| k) {
        return MirProgram::from_parts(name, buffers, kernels);
    }
    let mut renumbered = vec![None; buffers.len()];
    let mut kept = Vec::with_capacity(buffers.len());
    for (i, buffer) in buffers.into_iter().enumerate() {
        if keep[i] {
            renumbered[i] = Some(BufId::new(kept.len()));
            kept.push(buffer);
        }
    }
    let new_id = |buf: BufId| renumbered.get(buf.index()).copied().flatten();
    for kernel in &mut kernels {
        kernel.stores.retain(|s| new_id(s.buf).is_some());
        kernel.reductions.retain(|r| new_id(r.buf).is_some());
        for store in &mut kernel.stores {
            store.buf = new_id(store.buf).unwrap_or(store.buf);
        }
        for reduction in &mut kernel.reductions {
            reduction.buf = new_id(reduction.buf).unwrap_or(reduction.buf);
        }
        for inst in &mut kernel.body {
            if let MirOp::Load { buf, .. } | MirOp::Gather { buf } = &mut inst.op {
                *buf = new_id(*buf).unwrap_or(*buf);
            }
        }
    }
    kernels.retain(|k| !k.stores.is_empty() || !k.reductions.is_empty());
    MirProgram::from_parts(name, kept, kernels)
}

struct KernelEmitter<'p, 'k> {
    plan: &'p Plan<'k>,
    group: usize,
    domain: &'p Shape,
    input_buf: &'p HashMap<ValueId, BufId>,
    root_bufs: &'p BTreeMap<ValueId, Vec<BufId>>,
    body: Vec<MirInst>,
    /// The values computed so far at the points of the innermost frame.
    memo: HashMap<ValueId, MirValue>,
    /// Each instruction of `body`, to find equal ones.
    numbered: HashMap<MirInst, MirValue>,
    /// The pads whose operands are being computed, outermost first.
    frames: Vec<Frame>,
    /// The value of each of this kernel's elementwise roots at its points, once computed.
    root_values: HashMap<ValueId, MirValue>,
}

/// Where the elements of a value of `shape` lie: element `idx` at
/// `offset + sum(idx[i] * strides[i])` of a buffer (or, for an `iota`, that count).
#[derive(Clone, Copy)]
struct Layout<'a> {
    shape: &'a Shape,
    strides: &'a [usize],
    offset: usize,
}

/// Where the elements of a chain of views come from.
enum View {
    /// A splat constant.
    Splat(rfx_ir::Scalar),
    /// An `iota`: element `idx` is `offset + sum(idx[i] * strides[i])`.
    Count { strides: Vec<usize>, offset: usize },
    /// Element `idx` is at `offset + sum(idx[i] * strides[i])` of `buf` (of `len` elements).
    Buffer {
        buf: BufId,
        len: usize,
        strides: Vec<usize>,
        offset: usize,
    },
}

/// A pad or a slice whose operand this kernel computes: the operand's element at `idx` is
/// computed where the pad or slice holds it, at `idx + shift` (a pad's `low`, a slice's
/// negated `starts`). A pad's operand is also computed, from clamped reads, wherever else the
/// pad is read.
struct Frame {
    /// The operand's shape.
    inner: Shape,
    /// The pad's or slice's shape.
    outer: Shape,
    shift: Vec<i64>,
    /// Every point of the frame is a point of the operand (a slice, a reshape): reads stay
    /// inside their buffers, at offsets that are never negative.
    exact: bool,
    /// A reshape that inserts or removes axes of one (`shift` is unused): the operand's
    /// element is the frame's point with those axes dropped or added.
    regroup: bool,
}

impl KernelEmitter<'_, '_> {
    /// Appends an instruction, or returns the equal one already there: every MIR instruction
    /// is a pure function of the domain point, so equal instructions are equal values (a
    /// pad's frame recomputes what does not move, such as a broadcast input's element).
    fn push(&mut self, op: MirOp, args: Vec<MirValue>, dtype: rfx_ir::DType) -> MirValue {
        // A choice between equal values is that value (a frame can make both sides one load).
        if let (MirOp::Select, [_, a, b]) = (&op, args.as_slice())
            && a == b
        {
            return *a;
        }
        let inst = MirInst { op, args, dtype };
        if let Some(&value) = self.numbered.get(&inst) {
            return value;
        }
        let value = MirValue::new(self.body.len());
        self.numbered.insert(inst.clone(), value);
        self.body.push(inst);
        value
    }

    /// A load of `buf`, read as a row-major array of `shape`, at every point of the domain.
    fn load(
        &mut self,
        buf: BufId,
        shape: &Shape,
        dtype: rfx_ir::DType,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let layout = Layout {
            shape,
            strides: &shape.strides(),
            offset: 0,
        };
        self.read(buf, shape.numel(), layout, dtype, at)
    }

    /// Where the element `idx` of a value laid out by `layout` is taken at each domain point:
    /// strides over the domain and an offset. Inside a frame a point of the operand is the
    /// frame's point less `shift`, so inside a pad's frame the offset may be negative.
    fn place(&self, layout: Layout<'_>, at: ValueId) -> Result<(Vec<usize>, i64), OptError> {
        let range = || OptError::IndexRange(at);
        let mut offset = i64::try_from(layout.offset).map_err(|_| range())?;
        let mut shape = layout.shape.clone();
        let mut strides = layout.strides.to_vec();
        for frame in self.frames.iter().rev() {
            strides = strides_in_domain(&shape, &strides, &frame.inner).ok_or(OptError::InvalidValue(at))?;
            if frame.regroup {
                strides =
                    regrouped(&frame.inner, &strides, &frame.outer).ok_or(OptError::InvalidValue(at))?;
            }
            for (&shift, &stride) in frame.shift.iter().zip(&strides) {
                let step = i64::try_from(stride).ok().and_then(|s| s.checked_mul(shift));
                offset = step.and_then(|n| offset.checked_sub(n)).ok_or_else(range)?;
            }
            shape = frame.outer.clone();
        }
        let strides = strides_in_domain(&shape, &strides, self.domain).ok_or(OptError::InvalidValue(at))?;
        Ok((strides, offset))
    }

    /// Whether every frame is a slice's (or there is none): every point of the domain is then a
    /// point of every value computed in the innermost frame.
    fn exact(&self) -> bool {
        self.frames.iter().all(|f| f.exact)
    }

    /// The largest `sum(point[i] * strides[i])` over the domain (`None` past `i64`).
    fn reach(&self, strides: &[usize]) -> Option<i64> {
        self.domain
            .dims()
            .iter()
            .zip(strides)
            .try_fold(0usize, |acc, (&d, &s)| {
                d.saturating_sub(1)
                    .checked_mul(s)
                    .and_then(|n| acc.checked_add(n))
            })
            .and_then(|n| i64::try_from(n).ok())
    }

    /// `offset + sum(point[i] * strides[i])` at every domain point in `dtype`: in a float dtype
    /// when every value is an integer it holds exactly (so a kernel of `f64` values needs no
    /// `i32` lanes, which would keep it from running in vectors on the CPU), in `i32`
    /// otherwise, converted.
    fn index_in(
        &mut self,
        dtype: rfx_ir::DType,
        strides: Vec<usize>,
        offset: i64,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let exact = i64::try_from(rfx_ir::semantics::max_exact_index(dtype)).unwrap_or(i64::MAX);
        let fits = self
            .reach(&strides)
            .and_then(|r| r.checked_add(offset.checked_abs()?))
            .is_some_and(|n| n <= exact);
        if !dtype.is_float() || !fits {
            let index = self.index_i32(strides, offset, at)?;
            return Ok(match dtype {
                rfx_ir::DType::I32 => index,
                _ => self.push(MirOp::Cast, vec![index], dtype),
            });
        }
        let index = self.push(MirOp::Index { strides }, Vec::new(), dtype);
        if offset == 0 {
            return Ok(index);
        }
        // Exact: `|offset|` is at most the largest integer the dtype holds exactly.
        let constant = rfx_ir::Scalar::from_f64(dtype, offset as f64);
        let constant = self.push(MirOp::Const(constant), Vec::new(), dtype);
        Ok(self.push(MirOp::Binary(BinaryOp::Add), vec![index, constant], dtype))
    }

    /// `offset + sum(point[i] * strides[i])` at every domain point, as an `i32` (an error when
    /// some point's value does not fit).
    fn index_i32(&mut self, strides: Vec<usize>, offset: i64, at: ValueId) -> Result<MirValue, OptError> {
        let range = || OptError::IndexRange(at);
        let reach = self.reach(&strides).ok_or_else(range)?;
        let (i32_max, i32_min) = (i64::from(i32::MAX), i64::from(i32::MIN));
        if reach > i32_max || offset < i32_min || reach.saturating_add(offset) > i32_max {
            return Err(range());
        }
        let i32 = rfx_ir::DType::I32;
        let index = self.push(MirOp::Index { strides }, Vec::new(), i32);
        if offset == 0 {
            return Ok(index);
        }
        let (op, magnitude) = match offset {
            o if o < 0 => (BinaryOp::Sub, o.unsigned_abs()),
            o => (BinaryOp::Add, o.unsigned_abs()),
        };
        // `|offset| <= 2^31`, and `2^31` is `i32::MIN`, which subtracts like `+2^31` wrapping.
        let constant = i32::try_from(magnitude).unwrap_or(i32::MIN);
        let constant = self.push(MirOp::Const(rfx_ir::Scalar::I32(constant)), Vec::new(), i32);
        Ok(self.push(MirOp::Binary(op), vec![index, constant], i32))
    }

    /// `buf`'s element for the element `idx` of a value laid out in it by `layout`, at every
    /// domain point: a strided load, or inside a pad's frame, where some
    /// point's element lies outside `buf` (of `len` elements), a gather by clamped index (the
    /// index leaves the buffer only outside the pad's window, whose values the pad discards;
    /// an `i32`, or an `f64` for an `f64` buffer).
    fn read(
        &mut self,
        buf: BufId,
        len: usize,
        layout: Layout<'_>,
        dtype: rfx_ir::DType,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let (strides, shifted) = self.place(layout, at)?;
        // Along an axis where the operand has one element, a pad's shift moves no read.
        let inside = || {
            let last = i64::try_from(len).ok().and_then(|n| n.checked_sub(1));
            shifted >= 0
                && self
                    .reach(&strides)
                    .and_then(|r| r.checked_add(shifted))
                    .zip(last)
                    .is_some_and(|(r, last)| r <= last)
        };
        if self.exact() || inside() {
            let offset = usize::try_from(shifted).map_err(|_| OptError::InvalidValue(at))?;
            return Ok(self.push(MirOp::Load { buf, strides, offset }, Vec::new(), dtype));
        }
        // An `f64` read counts its index in `f64` (exact, see `index_in`), so that an `f64`
        // kernel needs no `i32` lanes.
        let index = match dtype {
            rfx_ir::DType::F64 => self.index_in(dtype, strides, shifted, at)?,
            _ => self.index_i32(strides, shifted, at)?,
        };
        Ok(self.push(MirOp::Gather { buf }, vec![index], dtype))
    }

    /// The count `layout` gives the element `idx` of its value, at every domain point, in
    /// `dtype`: what an `iota` and its views read.
    fn count(&mut self, layout: Layout<'_>, dtype: rfx_ir::DType, at: ValueId) -> Result<MirValue, OptError> {
        let (strides, shifted) = self.place(layout, at)?;
        if !self.exact() {
            // Exact wherever the pad keeps the value (an index of the operand).
            return self.index_in(dtype, strides, shifted, at);
        }
        let index = self.push(MirOp::Index { strides }, Vec::new(), dtype);
        if shifted == 0 {
            return Ok(index);
        }
        // Exact: the sum is an index of the unsliced `iota`, which its dtype holds.
        let start = usize::try_from(shifted)
            .ok()
            .and_then(|n| rfx_ir::semantics::index_value(n, dtype))
            .ok_or(OptError::InvalidValue(at))?;
        let start = self.push(MirOp::Const(start), Vec::new(), dtype);
        Ok(self.push(MirOp::Binary(BinaryOp::Add), vec![index, start], dtype))
    }

    /// The buffer other kernels read `v` from: its input buffer, or the first buffer its root
    /// writes.
    fn stored_buf(&self, v: ValueId) -> Result<BufId, OptError> {
        match self.input_buf.get(&v) {
            Some(&buf) => Ok(buf),
            None => self
                .root_bufs
                .get(&v)
                .and_then(|b| b.first().copied())
                .ok_or(OptError::InvalidValue(v)),
        }
    }

    /// The value whose buffer holds `v` row-major: under `v`'s chain of reshapes, the first
    /// input, literal or stored value (`v` itself when there is none).
    fn buffer_under_reshapes(&self, v: ValueId) -> ValueId {
        let stored = |u: ValueId| self.input_buf.contains_key(&u) || self.plan.roots.contains_key(&u);
        let source = under_reshapes(self.plan.kernel, v, stored);
        if stored(source) { source } else { v }
    }

    /// An `iota` of type `ty` along `axis`, at every domain point.
    fn iota(&mut self, ty: &rfx_ir::TensorType, axis: usize, at: ValueId) -> Result<MirValue, OptError> {
        let unit: Vec<usize> = (0..ty.shape.rank()).map(|i| usize::from(i == axis)).collect();
        let layout = Layout {
            shape: &ty.shape,
            strides: &unit,
            offset: 0,
        };
        self.count(layout, ty.dtype, at)
    }

    /// The chain of transposes, slices and broadcasts ending at `v`, resolved down to what is
    /// under it (a root below `v` ends it: it is read stored).
    fn view(&self, v: ValueId) -> Result<View, OptError> {
        let kernel = self.plan.kernel;
        let mut chain = Vec::new();
        let mut base = v;
        while let Some(n) = kernel.node(base)
            && is_view(&n.op)
            && !(base != v && self.plan.roots.contains_key(&base))
        {
            chain.push(base);
            base = n.args.first().copied().ok_or(OptError::InvalidValue(base))?;
        }
        let base_node = kernel.node(base).ok_or(OptError::InvalidValue(base))?;
        // A reshape of a buffer reads it in place: its elements lie row-major there.
        let stored = self.buffer_under_reshapes(base);
        // Where element `idx` of the base sits: row-major in its buffer, or the index along an
        // `iota`'s axis.
        let iota = match &base_node.op {
            Op::Const(value) => return Ok(View::Splat(*value)),
            Op::Iota { axis } if !self.plan.roots.contains_key(&base) => Some(*axis),
            _ => None,
        };
        let mut strides: Vec<usize> = match iota {
            Some(axis) => (0..base_node.ty.shape.rank())
                .map(|i| usize::from(i == axis))
                .collect(),
            None => base_node.ty.shape.strides(),
        };
        let mut shape = base_node.ty.shape.clone();
        // The element (or index) at the chain's first point.
        let mut offset = 0usize;
        for &link in chain.iter().rev() {
            let n = kernel.node(link).ok_or(OptError::InvalidValue(link))?;
            strides = match &n.op {
                Op::Transpose { perm } => perm
                    .iter()
                    .map(|&a| strides.get(a).copied().ok_or(OptError::InvalidValue(link)))
                    .collect::<Result<_, _>>()?,
                Op::Slice { starts } => {
                    offset += starts.iter().zip(&strides).map(|(a, s)| a * s).sum::<usize>();
                    strides
                }
                _ => strides_in_domain(&shape, &strides, &n.ty.shape).ok_or(OptError::InvalidValue(link))?,
            };
            shape = n.ty.shape.clone();
        }
        Ok(match iota {
            Some(_) => View::Count { strides, offset },
            None => View::Buffer {
                buf: self.stored_buf(stored)?,
                len: base_node.ty.shape.numel(),
                strides,
                offset,
            },
        })
    }

    /// A chain of transposes and broadcasts ending at `v`, read from what is under it: a splat
    /// constant, an `iota` (an index with the chain's strides), or a buffer (with the chain's
    /// strides).
    fn transposed(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let ty = &self.plan.kernel.node(v).ok_or(OptError::InvalidValue(v))?.ty;
        match self.view(v)? {
            View::Splat(value) => Ok(self.push(MirOp::Const(value), Vec::new(), ty.dtype)),
            View::Count { strides, offset } => {
                let layout = Layout {
                    shape: &ty.shape,
                    strides: &strides,
                    offset,
                };
                self.count(layout, ty.dtype, v)
            }
            View::Buffer {
                buf,
                len,
                strides,
                offset,
            } => {
                let layout = Layout {
                    shape: &ty.shape,
                    strides: &strides,
                    offset,
                };
                self.read(buf, len, layout, ty.dtype, v)
            }
        }
    }

    /// A `gather` at every domain point: its index computed here, clamped into the table's
    /// extent along `axis`, and the table's element there read from its buffer by a MIR
    /// `gather` (fusion stores a computed table). A whole one-axis table is read by the index
    /// itself (the MIR `gather` clamps into the buffer, truncating a float).
    fn gathered(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        use rfx_ir::DType;
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Gather { axis }, [table, index]) = (&node.op, node.args.as_slice()) else {
            return Err(OptError::InvalidValue(v));
        };
        let (axis, dtype) = (*axis, node.ty.dtype);
        let table_shape = &kernel
            .value_type(*table)
            .ok_or(OptError::InvalidValue(*table))?
            .shape;
        let extent = table_shape
            .dims()
            .get(axis)
            .copied()
            .ok_or(OptError::InvalidValue(v))?;
        if table_shape.numel() == 0 {
            // Another axis is empty, and so is the gather: no point reads the table.
            return Ok(self.push(MirOp::Const(rfx_ir::Scalar::zero(dtype)), Vec::new(), dtype));
        }
        let (buf, len, mut strides, offset) = match self.view(*table)? {
            View::Splat(value) => return Ok(self.push(MirOp::Const(value), Vec::new(), dtype)),
            View::Buffer {
                buf,
                len,
                strides,
                offset,
            } => (buf, len, strides, offset),
            // Fusion stores a table that is an `iota`.
            View::Count { .. } => return Err(OptError::InvalidValue(v)),
        };
        let index_dtype = kernel
            .value_type(*index)
            .ok_or(OptError::InvalidValue(*index))?
            .dtype;
        let mut at = self.value(*index)?;
        // The count's dtype: `f64` for a float index into an `f64` table (a kernel of `f64`
        // values then needs no `i32` lanes), `i32` otherwise (a float cast to it truncates
        // toward zero, saturates and maps NaN to 0, as the clamp below wants).
        let count = match (index_dtype, dtype) {
            (DType::F64, _) | (DType::F32, DType::F64) => DType::F64,
            _ => DType::I32,
        };
        if index_dtype != count {
            at = self.push(MirOp::Cast, vec![at], count);
        }
        let step = strides.get(axis).copied().ok_or(OptError::InvalidValue(v))?;
        let rest_zero = strides
            .iter()
            .zip(table_shape.dims())
            .enumerate()
            .all(|(d, (&s, &n))| d == axis || s == 0 || n == 1);
        if rest_zero && offset == 0 && (step == 1 || extent == 1) && len == extent {
            return Ok(self.push(MirOp::Gather { buf }, vec![at], dtype));
        }
        let constant = |e: &mut Self, n: usize| -> Result<MirValue, OptError> {
            let value = rfx_ir::semantics::index_value(n, count).ok_or(OptError::IndexRange(v))?;
            Ok(e.push(MirOp::Const(value), Vec::new(), count))
        };
        // `clamp(trunc(at), 0, extent - 1)`: in `f64`, `at >= 0` is false for NaN and the
        // negatives, and `floor` truncates the rest.
        let last = constant(self, extent - 1)?;
        let zero = constant(self, 0)?;
        let row = if count == DType::F64 {
            let floor = self.push(MirOp::Unary(rfx_ir::UnaryOp::Floor), vec![at], count);
            let low = self.push(MirOp::Binary(BinaryOp::Min), vec![floor, last], count);
            let positive = self.push(MirOp::Compare(rfx_ir::CmpOp::Ge), vec![at, zero], DType::Bool);
            self.push(MirOp::Select, vec![positive, low, zero], count)
        } else {
            let low = self.push(MirOp::Binary(BinaryOp::Min), vec![at, last], count);
            self.push(MirOp::Binary(BinaryOp::Max), vec![low, zero], count)
        };
        // The element at the point's other coordinates, plus the row's.
        if let Some(s) = strides.get_mut(axis) {
            *s = 0;
        }
        let layout = Layout {
            shape: &node.ty.shape,
            strides: &strides,
            offset,
        };
        let (strides, shifted) = self.place(layout, v)?;
        let base = match count {
            DType::F64 => self.index_in(count, strides, shifted, v)?,
            _ => self.index_i32(strides, shifted, v)?,
        };
        let row = match step {
            0 => None,
            1 => Some(row),
            s => {
                let s = constant(self, s)?;
                Some(self.push(MirOp::Binary(BinaryOp::Mul), vec![row, s], count))
            }
        };
        let flat = match row {
            Some(row) => self.push(MirOp::Binary(BinaryOp::Add), vec![base, row], count),
            None => base,
        };
        Ok(self.push(MirOp::Gather { buf }, vec![flat], dtype))
    }

    /// A `pad` at every domain point: its operand where the point lies inside the operand's
    /// window, zero elsewhere. The operand is computed in this kernel at the pad's point less
    /// `low` (in a frame), or read there by clamped index from its buffer.
    fn padded(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Pad { low }, Some(&operand)) = (&node.op, node.args.first()) else {
            return Err(OptError::InvalidValue(v));
        };
        let ty = &node.ty;
        let inner = kernel
            .value_type(operand)
            .ok_or(OptError::InvalidValue(operand))?
            .shape
            .clone();
        let zero = self.push(MirOp::Const(rfx_ir::Scalar::zero(ty.dtype)), Vec::new(), ty.dtype);
        if inner.numel() == 0 {
            return Ok(zero);
        }
        // Inside the window along every axis the operand does not fill.
        let mut inside = None;
        for (axis, ((&lo, &n), &p)) in low.iter().zip(inner.dims()).zip(ty.shape.dims()).enumerate() {
            if n == p {
                continue;
            }
            let unit: Vec<usize> = (0..ty.shape.rank()).map(|i| usize::from(i == axis)).collect();
            let layout = Layout {
                shape: &ty.shape,
                strides: &unit,
                offset: 0,
            };
            let (strides, offset) = self.place(layout, v)?;
            // Counted in `f64` for an `f64` pad (`index_in` keeps it exact): a kernel of `f64`
            // values then needs no `i32` lanes, which would keep it from running in vectors on
            // the CPU (four `i32` lanes against two `f64`). In `i32` otherwise.
            let count = match ty.dtype {
                rfx_ir::DType::F64 => rfx_ir::DType::F64,
                _ => rfx_ir::DType::I32,
            };
            let at = self.index_in(count, strides, offset, v)?;
            let mut bounds = Vec::new();
            if lo > 0 {
                bounds.push((rfx_ir::CmpOp::Ge, lo));
            }
            if lo + n < p {
                bounds.push((rfx_ir::CmpOp::Lt, lo + n));
            }
            for (cmp, bound) in bounds {
                let bound = rfx_ir::semantics::index_value(bound, count).ok_or(OptError::IndexRange(v))?;
                let bound = self.push(MirOp::Const(bound), Vec::new(), count);
                let test = self.push(MirOp::Compare(cmp), vec![at, bound], rfx_ir::DType::Bool);
                inside = Some(match inside {
                    None => test,
                    Some(acc) => {
                        self.push(MirOp::Binary(BinaryOp::And), vec![acc, test], rfx_ir::DType::Bool)
                    }
                });
            }
        }
        // The operand at the pad's points less `low`; its values computed at this kernel's
        // own points do not hold there.
        let shift = low
            .iter()
            .map(|&l| i64::try_from(l).map_err(|_| OptError::IndexRange(v)))
            .collect::<Result<_, _>>()?;
        let value = self.in_frame(
            Frame {
                inner,
                outer: ty.shape.clone(),
                shift,
                exact: false,
                regroup: false,
            },
            operand,
        )?;
        Ok(match inside {
            Some(inside) => self.push(MirOp::Select, vec![inside, value, zero], ty.dtype),
            None => value,
        })
    }

    /// A slice of a value this kernel computes: the value computed at the slice's point plus
    /// `starts`.
    fn sliced(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Slice { starts }, Some(&operand)) = (&node.op, node.args.first()) else {
            return Err(OptError::InvalidValue(v));
        };
        let inner = kernel
            .value_type(operand)
            .ok_or(OptError::InvalidValue(operand))?
            .shape
            .clone();
        let shift = starts
            .iter()
            .map(|&s| i64::try_from(s).map(|s| -s).map_err(|_| OptError::IndexRange(v)))
            .collect::<Result<_, _>>()?;
        self.in_frame(
            Frame {
                inner,
                outer: node.ty.shape.clone(),
                shift,
                exact: true,
                regroup: false,
            },
            operand,
        )
    }

    /// A reduction combining a few elements per result element (see [`unrolled_reductions`]),
    /// at every domain point: its operand computed at each of the result element's reduced
    /// points (a frame each, as a slice's window), combined in row-major order of those points
    /// as the reference interpreter combines them.
    fn unrolled(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        use rfx_ir::ReduceOp;
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Reduce { op, axes, .. }, Some(&operand), Some(extents)) =
            (&node.op, node.args.first(), self.plan.unrolled.get(&v))
        else {
            return Err(OptError::InvalidValue(v));
        };
        let inner = &kernel
            .value_type(operand)
            .ok_or(OptError::InvalidValue(operand))?
            .shape;
        // The operand with the reduced axes kept as one: the result with `keepdims`.
        let mut kept_dims = inner.dims().to_vec();
        for &axis in axes {
            *kept_dims.get_mut(axis).ok_or(OptError::InvalidValue(v))? = 1;
        }
        let kept = Shape::new(kept_dims);
        let combine = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        let dtype = node.ty.dtype;
        let count: usize = extents.iter().product();
        let windows = |e: &mut Self| -> Result<MirValue, OptError> {
            let mut acc = None;
            for flat in 0..count {
                // The reduced point's coordinates, row-major (the last reduced axis fastest).
                let mut shift = vec![0i64; inner.rank()];
                let mut rest = flat;
                for (&axis, &extent) in axes.iter().zip(extents).rev() {
                    let at = i64::try_from(rest % extent).map_err(|_| OptError::IndexRange(v))?;
                    *shift.get_mut(axis).ok_or(OptError::InvalidValue(v))? = -at;
                    rest /= extent;
                }
                let frame = Frame {
                    inner: inner.clone(),
                    outer: kept.clone(),
                    shift,
                    exact: true,
                    regroup: false,
                };
                let x = e.in_frame(frame, operand)?;
                acc = Some(match acc {
                    None => x,
                    Some(a) => e.push(MirOp::Binary(combine), vec![a, x], dtype),
                });
            }
            acc.ok_or(OptError::InvalidValue(v))
        };
        let mut acc = if kept == node.ty.shape {
            windows(self)?
        } else {
            // Without `keepdims` the reduced axes are removed: the result's point with axes of
            // one inserted.
            let regroup = Frame {
                inner: kept.clone(),
                outer: node.ty.shape.clone(),
                shift: Vec::new(),
                exact: true,
                regroup: true,
            };
            self.within(regroup, windows)?
        };
        if *op == ReduceOp::Mean {
            let count = rfx_ir::Scalar::from_f64(dtype, count as f64);
            let count = self.push(MirOp::Const(count), Vec::new(), dtype);
            acc = self.push(MirOp::Binary(BinaryOp::Div), vec![acc, count], dtype);
        }
        Ok(acc)
    }

    /// The root `root` at every domain point: computed here, in a frame that inserts or
    /// removes axes of one where its iteration space differs from the kernel's by those
    /// ([`super::plan::same_points`]). Both have the same points in the same row-major order,
    /// so its buffer is written whole.
    fn root_value(&mut self, root: ValueId) -> Result<MirValue, OptError> {
        let shape = self.plan.shape(root);
        let value = if shape == *self.domain {
            self.compute(root)?
        } else {
            let frame = Frame {
                inner: shape,
                outer: self.domain.clone(),
                shift: Vec::new(),
                exact: true,
                regroup: true,
            };
            self.within(frame, |e| e.compute(root))?
        };
        self.root_values.insert(root, value);
        Ok(value)
    }

    /// `operand` computed at the points `frame` maps this kernel's points to. Its values
    /// computed at the frame's own points do not hold there, so the frame has its own memo.
    fn in_frame(&mut self, frame: Frame, operand: ValueId) -> Result<MirValue, OptError> {
        self.within(frame, |e| e.value(operand))
    }

    /// What `compute` gives inside `frame`, with the frame's own memo.
    fn within(
        &mut self,
        frame: Frame,
        compute: impl FnOnce(&mut Self) -> Result<MirValue, OptError>,
    ) -> Result<MirValue, OptError> {
        self.frames.push(frame);
        let outside = std::mem::take(&mut self.memo);
        let value = compute(self);
        self.memo = outside;
        self.frames.pop();
        value
    }

    /// The value of `v` at every domain point: loaded when it lives in a buffer this kernel
    /// does not write, computed otherwise.
    ///
    /// The operands that `v`'s computation reads in this frame are made first, by an explicit
    /// post-order walk (operands left to right, as a recursive evaluation would, so the body
    /// is the same), so that a chain of any length costs no native stack: `compute` then finds
    /// every operand in the memo. Only a new frame (a pad, a slice or reshape computed in
    /// place, an unrolled reduction, a gather's index) recurses, once per nested frame.
    fn value(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        if let Some(&m) = self.memo.get(&v) {
            return Ok(m);
        }
        let mut stack = vec![(v, false)];
        while let Some((u, expanded)) = stack.pop() {
            if self.memo.contains_key(&u) {
                continue;
            }
            let node = self.plan.kernel.node(u).ok_or(OptError::InvalidValue(u))?;
            if !expanded && self.computes_in_frame(u, &node.op) {
                stack.push((u, true));
                stack.extend(node.args.iter().rev().map(|&a| (a, false)));
                continue;
            }
            if !expanded && let Some(index) = self.gather_index_first(u, node) {
                stack.push((u, true));
                stack.push((index, false));
                continue;
            }
            self.value_here(u)?;
        }
        self.memo.get(&v).copied().ok_or(OptError::InvalidValue(v))
    }

    /// Whether `value_here(v)` computes `v` from operands read in this frame (its operands'
    /// `value`s and nothing else), so they can be made before it.
    fn computes_in_frame(&self, v: ValueId, op: &Op) -> bool {
        let plain = matches!(
            op,
            Op::Unary(_)
                | Op::Binary(_)
                | Op::Compare(_)
                | Op::Select
                | Op::Clamp
                | Op::Cast
                | Op::BroadcastTo
                | Op::Scan { .. }
        );
        plain && !self.input_buf.contains_key(&v) && !self.reads_stored(v) && self.root_here(v).is_none()
    }

    /// The index operand of the gather `v` when `gathered` computes it (a chain of lookups,
    /// each indexed by the one before, is then made iteratively too).
    fn gather_index_first(&self, v: ValueId, node: &rfx_ir::hir::Node) -> Option<ValueId> {
        let (Op::Gather { .. }, [table, index]) = (&node.op, node.args.as_slice()) else {
            return None;
        };
        if self.input_buf.contains_key(&v) || self.reads_stored(v) || self.root_here(v).is_some() {
            return None;
        }
        let table_elems = self.plan.kernel.value_type(*table)?.shape.numel();
        match self.view(*table) {
            Ok(View::Buffer { .. }) if table_elems > 0 => Some(*index),
            _ => None,
        }
    }

    /// Whether `v` is a root this kernel reads from its buffer.
    fn reads_stored(&self, v: ValueId) -> bool {
        self.plan.roots.contains_key(&v)
            && (self.plan.group_of.get(&v) != Some(&self.group)
                || self.plan.is_reduce(v)
                || !self.frames.is_empty())
    }

    /// A root of this kernel computed already, read inside frames that only insert or remove
    /// axes of one: they map each point to the element of the same row-major index, and fusion
    /// reads a root of the kernel there only when it has as many elements as the kernel's
    /// points, so its value at the kernel's point is the one needed (a kernel's roots come in
    /// definition order, operands first).
    fn root_here(&self, v: ValueId) -> Option<MirValue> {
        if self.frames.iter().all(|f| f.regroup) {
            self.root_values.get(&v).copied()
        } else {
            None
        }
    }

    /// [`Self::value`] of `v` alone: its operands are either in the memo already or made here
    /// recursively.
    fn value_here(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        if let Some(&m) = self.memo.get(&v) {
            return Ok(m);
        }
        let node = self.plan.kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let result = if let Some(value) = self.root_here(v) {
            value
        } else if let Some(&buf) = self.input_buf.get(&v) {
            self.load(buf, &node.ty.shape, node.ty.dtype, v)?
        } else if let Op::Const(value) = node.op {
            self.push(MirOp::Const(value), Vec::new(), node.ty.dtype)
        } else if let (Op::Iota { axis }, false) = (&node.op, self.plan.roots.contains_key(&v)) {
            self.iota(&node.ty, *axis, v)?
        } else if self.reads_stored(v) {
            let buf = self.stored_buf(v)?;
            self.load(buf, &node.ty.shape, node.ty.dtype, v)?
        } else {
            return self.compute(v);
        };
        self.memo.insert(v, result);
        Ok(result)
    }

    /// Computes `v` in this kernel from its operands.
    fn compute(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        if let Some(&m) = self.memo.get(&v) {
            return Ok(m);
        }
        let node = self.plan.kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let dtype = node.ty.dtype;
        let operand = |i: usize| node.args.get(i).copied().ok_or(OptError::InvalidValue(v));
        let result = match &node.op {
            Op::Input { .. } | Op::Const(_) | Op::Literal(_) => return self.value_here(v),
            // `optimize` splits a kernel at its loops first: a stage holds none.
            Op::Loop(_) | Op::LoopOutput { .. } => return Err(OptError::InvalidValue(v)),
            Op::Iota { axis } => self.iota(&node.ty, *axis, v)?,
            Op::Slice { .. } if self.plan.slice_in_frame(v) => self.sliced(v)?,
            Op::Transpose { .. } | Op::Slice { .. } => self.transposed(v)?,
            Op::Pad { .. } => self.padded(v)?,
            Op::Gather { .. } => self.gathered(v)?,
            // `decompose` rewrites every `set_row` into a `select` by row.
            Op::SetRow => return Err(OptError::InvalidValue(v)),
            Op::Unary(op) => {
                let x = self.value(operand(0)?)?;
                self.push(MirOp::Unary(*op), vec![x], dtype)
            }
            Op::Binary(op) => {
                let (a, b) = (self.value(operand(0)?)?, self.value(operand(1)?)?);
                self.push(MirOp::Binary(*op), vec![a, b], dtype)
            }
            Op::Compare(op) => {
                let (a, b) = (self.value(operand(0)?)?, self.value(operand(1)?)?);
                self.push(MirOp::Compare(*op), vec![a, b], dtype)
            }
            Op::Select => {
                let c = self.value(operand(0)?)?;
                let (a, b) = (self.value(operand(1)?)?, self.value(operand(2)?)?);
                self.push(MirOp::Select, vec![c, a, b], dtype)
            }
            // `clamp` is `min(max(x, lo), hi)` by definition; `decompose` normally removed it.
            Op::Clamp => {
                let x = self.value(operand(0)?)?;
                let (lo, hi) = (self.value(operand(1)?)?, self.value(operand(2)?)?);
                let lower = self.push(MirOp::Binary(BinaryOp::Max), vec![x, lo], dtype);
                self.push(MirOp::Binary(BinaryOp::Min), vec![lower, hi], dtype)
            }
            Op::Cast => {
                let x = self.value(operand(0)?)?;
                self.push(MirOp::Cast, vec![x], dtype)
            }
            Op::BroadcastTo => self.value(operand(0)?)?,
            Op::Reshape => {
                let source = operand(0)?;
                let src_node = self
                    .plan
                    .kernel
                    .node(source)
                    .ok_or(OptError::InvalidValue(source))?;
                let stored = self.buffer_under_reshapes(source);
                if let Op::Const(value) = src_node.op {
                    self.push(MirOp::Const(value), Vec::new(), dtype)
                } else if !self.input_buf.contains_key(&stored)
                    && (!self.plan.roots.contains_key(&stored) || self.root_here(stored).is_some())
                {
                    // Only axes of one move (fusion stores the operand of any other reshape):
                    // the operand computed at this point with them dropped or added.
                    let inner = src_node.ty.shape.clone();
                    let frame = Frame {
                        shift: Vec::new(),
                        inner,
                        outer: node.ty.shape.clone(),
                        exact: true,
                        regroup: true,
                    };
                    self.in_frame(frame, source)?
                } else {
                    let buf = self.stored_buf(stored)?;
                    self.load(buf, &node.ty.shape, dtype, v)?
                }
            }
            Op::Reduce { .. } => self.unrolled(v)?,
            // Only a scan's own kernel computes it, at its own points (fusion makes every scan a
            // root, read stored elsewhere): its axis is one of the domain's.
            &Op::Scan { op, axis, reverse } => {
                let mut args = vec![self.value(operand(0)?)?];
                if op.arity() > 1 {
                    args.push(self.value(operand(1)?)?);
                }
                self.push(MirOp::Scan { op, axis, reverse }, args, dtype)
            }
        };
        self.memo.insert(v, result);
        Ok(result)
    }
}
