//! Joined stores: the `f64` elements a unit of small blocks stores
//! ([`Gen::emit_units_written_out`]), held back and stored two adjacent elements per 16-byte
//! store, whatever store instruction, row or position computed them.
//!
//! A batch of small matrices written block by block (a Jacobian of 3×3 blocks) stores each
//! block's row of three as a vector and a scalar; the blocks side by side in a row of the
//! matrix then take two stores per three elements where joined ones take one per two. A
//! kernel whose only work is such stores is bound by their count (a lane move or shuffle
//! builds each joined pair, on another port). Each element still gets the value its own
//! store computed, the last store of an element wins as in the body's order, and a held
//! store moves past no load of its buffer, so the bits are those of the stores one by one.

use super::*;

/// A kernel joins its stores when it has at least one store per this many other body
/// instructions: its time is then mostly its stores, while a longer body loses more to the
/// values it holds in registers across positions (spilled) than joined stores save.
const STORE_BOUND_RATIO: usize = 2;

/// What an element's byte displacement is from: an access's pointer resolved to the value it
/// is a constant displacement from, plus, for a position that is not a constant, the
/// position's base (resolved the same way) times the access's step in bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Root {
    ptr: Value,
    at: Option<(Value, i64)>,
}

impl JoinedStores {
    /// For a vector loop's position: whole vectors stored in place go at once.
    pub(super) fn lanes() -> Self {
        JoinedStores {
            vectors_direct: true,
            ..Default::default()
        }
    }
}

impl Root {
    /// A deterministic order of roots (by value numbers).
    fn order(self) -> (u32, Option<(u32, i64)>) {
        (self.ptr.as_u32(), self.at.map(|(v, s)| (v.as_u32(), s)))
    }
}

/// An element held back: its value (a lane of a vector, or a scalar when `lane` is `None`).
#[derive(Clone, Copy)]
struct Held {
    value: Value,
    lane: Option<u8>,
    /// The buffer the element is of.
    buf: Option<BufId>,
}

/// The elements held back since the last [`Gen::flush_joined`], by base address (each
/// access's pointer resolved to the value it is a constant displacement from) and byte
/// displacement. Elements pair up by their displacement (`2m` with `2m + 1` elements): a pair
/// is stored as soon as both are held, so only elements whose partner is still to come stay
/// in registers.
#[derive(Default)]
pub(super) struct JoinedStores {
    held: HashMap<(Root, i64), Held>,
    /// Whether a whole vector stored in place (contiguous lanes) is stored at once rather
    /// than held (a vector loop's position, where the other stores are strided).
    vectors_direct: bool,
    /// Scalars splat into vectors for a pair, by scalar.
    splats: HashMap<Value, Value>,
}

impl<'k> Gen<'_, 'k> {
    /// Whether the kernel's `f64` stores are held back within a unit and joined: they may move
    /// ([`Gen::stores_may_move`]) and the body is bound by its stores ([`STORE_BOUND_RATIO`]).
    pub(super) fn joins_stores(&self) -> bool {
        let body = &self.kernel().body;
        let stores = (body.iter())
            .filter(|inst| matches!(inst, Inst::Store { .. }))
            .count();
        let others = body.len() - stores;
        self.stores_may_move() && STORE_BOUND_RATIO * stores >= others
    }

    /// Whether a vector loop's position joins the lanes of its strided `f64` stores: they may
    /// move ([`Gen::stores_may_move`]) and at least two of them step by more than one element
    /// along the loop (each vector otherwise takes one store per lane; two joined take one
    /// store per two elements).
    pub(super) fn joins_lane_stores(&self) -> bool {
        let info = &self.fx.info;
        let strided = (info.kernel.body.iter().enumerate())
            .filter(|(i, inst)| {
                matches!(inst, Inst::Store { buf, .. } if info.buffer_dtypes.get(buf.index()) == Some(&DType::F64))
                    && info.access_of.get(*i).copied().flatten().is_some_and(|k| self.inner_stride(k) > 1)
            })
            .count();
        self.cur.width == 2 && strided >= 2 && self.stores_may_move()
    }

    /// Whether the kernel's `f64` stores may be held back and stored in another order: no
    /// instruction reads a buffer the body writes (a held store then moves past no load of its
    /// buffer; buffers of one kernel share no bytes otherwise), no reductions or scans, no row
    /// store, vectors of at most two `f64` lanes, and some `f64` store.
    fn stores_may_move(&self) -> bool {
        let kernel = self.kernel();
        if self.cur.width > 2 || kernel.row_store.is_some() {
            return false;
        }
        let mut written = Vec::new();
        for inst in &kernel.body {
            match inst {
                Inst::Store { buf, .. } => written.push(*buf),
                Inst::Reduce { .. } | Inst::Scan { .. } => return false,
                _ => {}
            }
        }
        let reads_written = kernel.reads().any(|buf| written.contains(&buf));
        !reads_written
            && written
                .iter()
                .any(|buf| self.fx.info.buffer_dtypes.get(buf.index()) == Some(&DType::F64))
    }

    /// Holds back the `w` lanes of `v` stored through `f64` access `k` at `place` and stores
    /// each pair both of whose elements are then held; `false` when the caller is to store `v`
    /// itself (the held elements that may share its bytes stored first).
    pub(super) fn hold_store(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        place: Place<'_>,
        k: usize,
        v: Value,
    ) -> bool {
        let Place { w, pos: at, offs } = place;
        let step = (self.inner_stride(k) * DType::F64.size_bytes()) as i64;
        let known = self.caches.known.borrow();
        let (at_root, pos) = match known.get(&at) {
            Some(&Known::Const(p)) => (None, p),
            Some(&Known::Offset(r, c)) => (Some((r, step)), c),
            None => (Some((at, step)), 0),
        };
        let (ptr, disp) = match offs.get(k).map(|p| (*p, known.get(p))) {
            Some((_, Some(&Known::Offset(root, c)))) => (root, c),
            Some((p, _)) => (p, 0),
            None => {
                drop(known);
                self.flush_joined(b);
                return false;
            }
        };
        drop(known);
        let root = Root { ptr, at: at_root };
        let buf = self.fx.info.accesses.get(k).and_then(|a| a.buf);
        // One element reached through two roots (two accesses of a buffer with other strides,
        // or pointers not resolved to one value) would be held twice, under two keys, and
        // stored in the order of the keys: the elements of the buffer held through another
        // root are stored first, so the later store is the one left in memory.
        let other_root = (self.cur.joined.as_ref())
            .is_some_and(|j| j.held.iter().any(|((r, _), h)| h.buf == buf && *r != root));
        if other_root {
            self.flush_joined(b);
        }
        let Some(mut joined) = self.cur.joined.take() else {
            return false;
        };
        if joined.vectors_direct && w > 1 && step == 8 {
            // A whole vector in place: stored now, after any held element of its buffer.
            let shares = joined.held.iter().any(|((r, _), h)| r.ptr == ptr || h.buf == buf);
            self.cur.joined = Some(joined);
            if shares {
                self.flush_joined(b);
            }
            return false;
        }
        let mut bytes = Vec::with_capacity(usize::from(w));
        for lane in 0..w {
            let byte = pos
                .checked_add(i64::from(lane))
                .and_then(|p| p.checked_mul(step))
                .and_then(|d| d.checked_add(disp))
                .filter(|d| d.checked_add(8).is_some());
            match byte {
                Some(byte) => bytes.push(byte),
                None => {
                    self.cur.joined = Some(joined);
                    self.flush_joined(b);
                    return false;
                }
            }
        }
        for (lane, byte) in (0..w).zip(bytes) {
            let held = Held {
                value: v,
                lane: (w > 1).then_some(lane),
                buf,
            };
            // A later store of an element replaces a held one.
            joined.held.insert((root, byte), held);
            let first = if byte.div_euclid(8).rem_euclid(2) == 0 {
                byte
            } else {
                byte - 8
            };
            let pair =
                (joined.held.get(&(root, first)).copied()).zip(joined.held.get(&(root, first + 8)).copied());
            if let Some((x, y)) = pair {
                joined.held.remove(&(root, first));
                joined.held.remove(&(root, first + 8));
                let value = pair_vector(b, &mut joined.splats, x, y);
                let base = self.root_address(b, root);
                store_at(self, b, value, base, first);
            }
        }
        self.cur.joined = Some(joined);
        true
    }

    /// Stores the elements still held, one by one in address order.
    pub(super) fn flush_joined(&mut self, b: &mut FunctionBuilder<'_>) {
        let Some(joined) = self.cur.joined.as_mut() else {
            return;
        };
        let mut held: Vec<((Root, i64), Held)> = joined.held.drain().collect();
        held.sort_by_key(|((root, byte), _)| (root.order(), *byte));
        for ((root, byte), h) in held {
            let value = element(b, h);
            let base = self.root_address(b, root);
            store_at(self, b, value, base, byte);
        }
    }

    /// The address `root` stands for.
    fn root_address(&self, b: &mut FunctionBuilder<'_>, root: Root) -> Value {
        match root.at {
            None => root.ptr,
            Some((at, step)) => {
                let offset = self.scale(b, at, step);
                self.add(b, root.ptr, offset)
            }
        }
    }
}

/// `value` stored at `root + byte`.
fn store_at(g: &Gen<'_, '_>, b: &mut FunctionBuilder<'_>, value: Value, root: Value, byte: i64) {
    match i32::try_from(byte) {
        Ok(disp) => {
            b.ins().store(mem(), value, root, disp);
        }
        Err(_) => {
            let addr = g.add_imm(b, root, byte);
            b.ins().store(mem(), value, addr, 0);
        }
    }
}

/// The element `h` as a scalar `f64`.
fn element(b: &mut FunctionBuilder<'_>, h: Held) -> Value {
    match h.lane {
        Some(lane) => b.ins().extractlane(h.value, lane),
        None => h.value,
    }
}

/// The `f64x2` of the elements `first` (lane 0) and `second` (lane 1): the vector itself when
/// they are its two lanes in order, else one lane move or shuffle.
fn pair_vector(
    b: &mut FunctionBuilder<'_>,
    splats: &mut HashMap<Value, Value>,
    first: Held,
    second: Held,
) -> Value {
    // Both lanes of a splat hold its value: take the lane the cheaper moves below use.
    let first = Held {
        lane: first.lane.map(|l| if is_splat(b, first.value) { 0 } else { l }),
        ..first
    };
    let second = Held {
        lane: second.lane.map(|l| if is_splat(b, second.value) { 1 } else { l }),
        ..second
    };
    match (first.lane, second.lane) {
        (Some(0), Some(1)) if first.value == second.value => first.value,
        // Lane 0 replaced (`movsd`) or lane 1 replaced (`movlhps`).
        (None, Some(1)) => b.ins().insertlane(second.value, first.value, 0),
        (Some(0), None) => b.ins().insertlane(first.value, second.value, 1),
        (None, None) => {
            let x = splat(b, splats, first.value);
            b.ins().insertlane(x, second.value, 1)
        }
        _ => {
            let (x, lx) = match first.lane {
                Some(lane) => (first.value, lane),
                None => (splat(b, splats, first.value), 0),
            };
            let (y, ly) = match second.lane {
                Some(lane) => (second.value, lane),
                None => (splat(b, splats, second.value), 0),
            };
            // One `shufps`, `punpck*qdq` or `palignr`.
            let xb = b.ins().bitcast(types::I8X16, bitcast_flags(), x);
            let yb = b.ins().bitcast(types::I8X16, bitcast_flags(), y);
            let mut mask = [0u8; 16];
            for i in 0..8u8 {
                mask[usize::from(i)] = 8 * lx + i;
                mask[usize::from(8 + i)] = 16 + 8 * ly + i;
            }
            let mask = b.func.dfg.immediates.push(ConstantData::from(&mask[..]));
            let v = b.ins().shuffle(xb, yb, mask);
            b.ins().bitcast(types::F64X2, bitcast_flags(), v)
        }
    }
}

/// `x` in both lanes of an `f64x2`, built once per flush.
fn splat(b: &mut FunctionBuilder<'_>, splats: &mut HashMap<Value, Value>, x: Value) -> Value {
    *splats.entry(x).or_insert_with(|| b.ins().splat(types::F64X2, x))
}

/// Whether `v` is a `splat` (every lane the same).
fn is_splat(b: &FunctionBuilder<'_>, v: Value) -> bool {
    match b.func.dfg.value_def(v) {
        cranelift_codegen::ir::ValueDef::Result(inst, _) => {
            b.func.dfg.insts[inst].opcode() == cranelift_codegen::ir::Opcode::Splat
        }
        _ => false,
    }
}
