//! Block folding: a kernel that writes a small block per point of an earlier kernel's loop nest
//! is written out inside that kernel.
//!
//! The rule: a consumer kernel `C` over `L ++ B` (an earlier producer kernel `P` runs over `L`,
//! `L` not empty, `B` a block of at most [`MAX_BLOCK_POSITIONS`] points) whose body is small (at
//! most [`MAX_FOLDED_INSTS`] instructions over all block positions, no more than
//! [`MAX_CONSUMER_WORK`] work per position: no transcendental) and reads at least one value `P`
//! stores at the same point of `L` is folded into `P`: after `P`'s body, `C`'s body runs once per
//! block position (row-major), its block indices made constants. A load of an element `P` stored
//! at this point of `L` becomes the slot `P` stored; a load of a buffer that a kernel between `P`
//! and `C` fills with constants alone (a kernel over no dims storing `const`s) becomes that
//! constant; every other load reads a buffer no kernel from `P` to `C` writes, at the point's
//! offset. `C`'s stores go to buffers that no kernel from `P` to `C` reads or writes. Such a
//! consumer is store-bound on its own (nothing to overlap its stores with) and reads back what
//! `P` just wrote; folded, its stores overlap `P`'s arithmetic and the temporaries between them
//! are never stored. Every point computes the same ops on the same values in the same order per
//! element, so the results are the same bits.
//!
//! After folding, a temporary no kernel reads is no longer stored, and a kernel that then
//! stores nothing is dropped. Programs with kernel loops are left alone.

use std::collections::{HashMap, HashSet};

use rfx_ir::lir::{Inst, LirKernel, SlotId};
use rfx_ir::{BufId, DType, Scalar};

use crate::report::KernelReport;

/// The most block positions (points of `B`) a consumer may have to be folded.
pub const MAX_BLOCK_POSITIONS: usize = 64;
/// The most instructions a folded consumer may add to its producer's body (its body's length
/// times its block positions).
pub const MAX_FOLDED_INSTS: usize = 1024;
/// A folded consumer is store-bound: its other instructions are at most this many times its
/// stores. A consumer with more arithmetic or loads of its own runs as well in its own
/// (vectorised) loop.
pub const STORE_SHARE: usize = 2;
/// The most work ([`Inst::work`]) of a folded consumer's body per block position.
pub const MAX_CONSUMER_WORK: usize = 64;

/// What one load of the consumer's body reads.
#[derive(Clone, Copy)]
enum Source {
    /// An element the producer stores at the same point of `L`: per block position, the
    /// element's offset (looked up in the producer's stores).
    Forwarded,
    /// A buffer filled with constants by a kernel over no dims (that kernel's index).
    Constant(usize),
    /// A buffer no kernel from the producer to the consumer writes.
    Plain,
}

/// Folds every foldable consumer into its producer (see the module docs); `reports` runs
/// beside `kernels`. `is_temp` tells the arena temporaries. Returns whether anything was folded.
pub(crate) fn fold_blocks(
    kernels: &mut Vec<LirKernel>,
    reports: &mut Vec<KernelReport>,
    is_temp: &dyn Fn(BufId) -> bool,
) -> bool {
    let mut folded = false;
    'outer: loop {
        for c in 0..kernels.len() {
            for p in (0..c).rev() {
                if let Some(sources) = plan(kernels, p, c) {
                    let consumer = kernels.remove(c);
                    if c < reports.len() {
                        reports.remove(c);
                    }
                    fold(kernels, p, &consumer, &sources);
                    let k = &kernels[p];
                    if let Some(r) = reports.get_mut(p) {
                        r.slots = k.slots.len();
                        r.preamble_insts = k.preamble.len();
                        r.body_insts = k.body.len();
                    }
                    folded = true;
                    continue 'outer;
                }
            }
        }
        break;
    }
    if folded {
        drop_dead_stores(kernels, reports, is_temp);
    }
    folded
}

fn writes(k: &LirKernel, buf: BufId) -> bool {
    k.writes().any(|b| b == buf)
}

fn reads(k: &LirKernel, buf: BufId) -> bool {
    k.reads().any(|b| b == buf)
}

/// The row-major block positions of `block`, each as its coordinates.
fn positions(block: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &d in block {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

fn block_offset(strides: &[usize], position: &[usize]) -> usize {
    strides.iter().zip(position).map(|(s, i)| s * i).sum()
}

/// The producer's stores into `buf` if they are forwardable: all with the same strides, which
/// are the row-major strides of its dims times a row width that every offset lies within (so
/// each point of the loop nest writes its own elements). Returns `offset -> slot of the last
/// store` and the strides.
fn forwardable(p: &LirKernel, buf: BufId) -> Option<(Vec<usize>, HashMap<usize, usize>)> {
    let mut strides: Option<&Vec<usize>> = None;
    let mut last = HashMap::new();
    for (at, inst) in p.body.iter().enumerate() {
        match inst {
            Inst::Store {
                buf: b,
                strides: s,
                offset,
                ..
            } if *b == buf => {
                if strides.is_some_and(|t| t != s) {
                    return None;
                }
                strides = Some(s);
                last.insert(*offset, at);
            }
            Inst::Reduce { buf: b, .. } if *b == buf => return None,
            _ => {}
        }
    }
    let strides = strides?.clone();
    let width = *strides.last()?;
    let mut expect = width;
    for (s, d) in strides.iter().zip(&p.dims).rev() {
        if *s != expect {
            return None;
        }
        expect = expect.checked_mul(*d)?;
    }
    if last.keys().any(|o| *o >= width) {
        return None;
    }
    Some((strides, last))
}

/// The constant a kernel over no dims stores at `offset` of `buf`, if it stores exactly one
/// there and its value is a `const`.
fn constant_at(k: &LirKernel, buf: BufId, offset: usize) -> Option<Scalar> {
    let mut found = None;
    for (at, inst) in k.body.iter().enumerate() {
        if let Inst::Store {
            buf: b,
            offset: o,
            src,
            ..
        } = inst
            && *b == buf
            && *o == offset
        {
            let def = k
                .preamble
                .iter()
                .chain(&k.body[..at])
                .rev()
                .find(|i| i.dst() == Some(*src));
            match def {
                Some(Inst::Const { value, .. }) if found.is_none() => found = Some(*value),
                _ => return None,
            }
        }
    }
    found
}

/// Whether the consumer `c` folds into the producer `p` (see the module docs); the source of
/// each of its body's loads, in body order.
fn plan(kernels: &[LirKernel], p: usize, c: usize) -> Option<Vec<Source>> {
    let (pk, ck) = (&kernels[p], &kernels[c]);
    let lead = pk.dims.len();
    let plain = |k: &LirKernel| k.reduce_dims == 0 && k.scan.is_none() && k.row_store.is_none();
    if !plain(pk) || !plain(ck) || lead == 0 || ck.dims.len() <= lead || ck.dims[..lead] != pk.dims[..] {
        return None;
    }
    let block = &ck.dims[lead..];
    let count: usize = block.iter().product();
    let work: usize = ck.body.iter().map(Inst::work).sum();
    let stores = ck.body.iter().filter(|i| matches!(i, Inst::Store { .. })).count();
    if count == 0
        || stores * STORE_SHARE < ck.body.len() - stores
        || count > MAX_BLOCK_POSITIONS
        || ck.body.len().saturating_mul(count) > MAX_FOLDED_INSTS
        || work > MAX_CONSUMER_WORK
    {
        return None;
    }
    let between = &kernels[p + 1..c];
    let written_between = |buf: BufId| between.iter().any(|k| writes(k, buf));
    // The consumer's stores move before the kernels between: nothing there may touch them.
    for inst in &ck.body {
        match inst {
            Inst::Store { buf, .. }
                if writes(pk, *buf)
                    || reads(pk, *buf)
                    || between.iter().any(|k| writes(k, *buf) || reads(k, *buf)) =>
            {
                return None;
            }
            // Every point of `L` stores its own elements (no store shared by points).
            Inst::Store { strides, .. } if strides[..lead].contains(&0) => return None,
            Inst::Reduce { .. } | Inst::Scan { .. } => return None,
            _ => {}
        }
    }
    for inst in &ck.preamble {
        if let Some(buf) = inst.buf()
            && (writes(pk, buf) || written_between(buf))
        {
            return None;
        }
    }
    let all = positions(block);
    let mut sources = Vec::new();
    for inst in &ck.body {
        match inst {
            Inst::Load {
                buf, strides, offset, ..
            } => {
                let (outer, inner) = strides.split_at(lead);
                if writes(pk, *buf) {
                    let (pstrides, last) = forwardable(pk, *buf)?;
                    if written_between(*buf) || outer != &pstrides[..] {
                        return None;
                    }
                    if !all
                        .iter()
                        .all(|b| last.contains_key(&(offset + block_offset(inner, b))))
                    {
                        return None;
                    }
                    sources.push(Source::Forwarded);
                } else if written_between(*buf) {
                    let writers: Vec<usize> = (p + 1..c).filter(|&k| writes(&kernels[k], *buf)).collect();
                    let [w] = writers[..] else { return None };
                    let wk = &kernels[w];
                    if !wk.dims.is_empty() || !plain(wk) || outer.iter().any(|s| *s != 0) {
                        return None;
                    }
                    if !all
                        .iter()
                        .all(|b| constant_at(wk, *buf, offset + block_offset(inner, b)).is_some())
                    {
                        return None;
                    }
                    sources.push(Source::Constant(w));
                } else {
                    sources.push(Source::Plain);
                }
            }
            Inst::Gather { buf, .. } if writes(pk, *buf) || written_between(*buf) => return None,
            Inst::Index { strides, .. } if strides[..lead].iter().any(|s| *s != 0) => return None,
            _ => {}
        }
    }
    if !sources.iter().any(|s| matches!(s, Source::Forwarded)) {
        return None;
    }
    Some(sources)
}

fn set_dst(inst: &mut Inst, slot: SlotId) {
    if let Some(dst) = inst.dst_mut() {
        *dst = slot;
    }
}

/// Makes the slot stored by the producer's store at `at` hold its value to the end of the
/// body: a later definition of it, and everything after that reads or redefines it, gets a
/// fresh slot instead.
fn keep_to_end(k: &mut LirKernel, at: usize) {
    let Some(Inst::Store { src, .. }) = k.body.get(at) else {
        return;
    };
    let src = *src;
    let Some(redef) = (at + 1..k.body.len()).find(|&j| k.body[j].dst() == Some(src)) else {
        return;
    };
    let fresh = SlotId::new(k.slots.len());
    k.slots.push(k.slots[src.index()]);
    set_dst(&mut k.body[redef], fresh);
    for inst in &mut k.body[redef + 1..] {
        let rename = |s: SlotId| if s == src { fresh } else { s };
        let mut next = inst.map_srcs(rename);
        if next.dst() == Some(src) {
            set_dst(&mut next, fresh);
        }
        *inst = next;
    }
}

/// A key telling scalars apart bit by bit (`-0.0` from `0.0`).
fn scalar_key(value: Scalar) -> (u8, u64) {
    match value {
        Scalar::Bool(b) => (0, u64::from(b)),
        Scalar::I32(v) => (1, u64::from(v as u32)),
        Scalar::F32(v) => (2, u64::from(v.to_bits())),
        Scalar::F64(v) => (3, v.to_bits()),
    }
}

/// The value `index` gives at a block position (`value`) in `dtype`.
fn index_scalar(dtype: DType, value: usize) -> Scalar {
    match dtype {
        DType::I32 => Scalar::I32(value as i32),
        DType::F32 => Scalar::F32(value as f32),
        DType::Bool => Scalar::Bool(value != 0),
        _ => Scalar::F64(value as f64),
    }
}

/// A load of one element at every point: its buffer, its strides over the producer's dims and
/// its offset.
type LoadKey = (BufId, Vec<usize>, usize);

/// The constant each of the consumer's loads reads at each block position (`None` for a load
/// that is not of a constant buffer), read before the producer changes.
fn constant_loads(
    kernels: &[LirKernel],
    lead: usize,
    ck: &LirKernel,
    sources: &[Source],
    all: &[Vec<usize>],
) -> Vec<Vec<Option<Scalar>>> {
    let constant = |w: usize, buf: BufId, offset: usize| constant_at(&kernels[w], buf, offset);
    let mut const_loads: Vec<Vec<Option<Scalar>>> = Vec::new();
    for b in all {
        let mut row = Vec::new();
        let mut loads = sources.iter();
        for inst in &ck.body {
            if let Inst::Load {
                buf, strides, offset, ..
            } = inst
            {
                let value = match loads.next() {
                    Some(Source::Constant(w)) => {
                        constant(*w, *buf, offset + block_offset(&strides[lead..], b))
                    }
                    _ => None,
                };
                row.push(value);
            }
        }
        const_loads.push(row);
    }
    const_loads
}

/// Makes each producer slot whose stored value the consumer reads hold it to the end of the
/// producer's body.
fn keep_forwarded(pk: &mut LirKernel, ck: &LirKernel, sources: &[Source], lead: usize, all: &[Vec<usize>]) {
    let mut needed: Vec<usize> = Vec::new();
    for (inst, source) in ck
        .body
        .iter()
        .filter(|i| matches!(i, Inst::Load { .. }))
        .zip(sources)
    {
        if let (
            Inst::Load {
                buf, strides, offset, ..
            },
            Source::Forwarded,
        ) = (inst, source)
            && let Some((_, last)) = forwardable(pk, *buf)
        {
            for b in all {
                if let Some(at) = last.get(&(offset + block_offset(&strides[lead..], b))) {
                    needed.push(*at);
                }
            }
        }
    }
    needed.sort_unstable();
    needed.dedup();
    for at in needed {
        keep_to_end(pk, at);
    }
}

/// Folds `ck` into kernel `p` (the plan said it folds, with these load sources).
fn fold(kernels: &mut [LirKernel], p: usize, ck: &LirKernel, sources: &[Source]) {
    let lead = kernels[p].dims.len();
    let block = ck.dims[lead..].to_vec();
    let all = positions(&block);
    let const_loads = constant_loads(kernels, lead, ck, sources, &all);
    let pk = &mut kernels[p];
    keep_forwarded(pk, ck, sources, lead, &all);
    let stored = |pk: &LirKernel, buf: BufId, offset: usize| {
        let (_, last) = forwardable(pk, buf)?;
        match pk.body.get(*last.get(&offset)?) {
            Some(Inst::Store { src, .. }) => Some(*src),
            _ => None,
        }
    };
    let base = pk.slots.len();
    pk.slots.extend(ck.slots.iter().copied());
    let shift = |s: SlotId| SlotId::new(s.index() + base);
    for inst in &ck.preamble {
        let mut next = inst.map_srcs(shift);
        if let Some(d) = inst.dst() {
            set_dst(&mut next, shift(d));
        }
        if let Inst::Load { strides, .. } | Inst::Index { strides, .. } = &mut next {
            strides.truncate(lead);
        }
        pk.preamble.push(next);
    }
    let mut consts: Vec<((u8, u64), SlotId)> = Vec::new();
    let mut hoisted: Vec<(LoadKey, SlotId)> = Vec::new();
    let sort_stores = stores_sortable(ck, lead, &all);
    let mut stores = Vec::new();
    let mut body = Vec::new();
    for (b, row) in all.iter().zip(&const_loads) {
        let mut map: HashMap<SlotId, SlotId> = HashMap::new();
        let mut loads = sources.iter().zip(row);
        for inst in &ck.body {
            let mut const_slot = |pk: &mut LirKernel, value: Scalar| {
                let key = scalar_key(value);
                if let Some((_, s)) = consts.iter().find(|(k, _)| *k == key) {
                    return *s;
                }
                let s = SlotId::new(pk.slots.len());
                pk.slots.push(value.dtype());
                pk.preamble.push(Inst::Const { dst: s, value });
                consts.push((key, s));
                s
            };
            let lookup = |s: SlotId| map.get(&s).copied().unwrap_or(shift(s));
            let mut next = inst.map_srcs(lookup);
            match &mut next {
                Inst::Load {
                    dst,
                    buf,
                    strides,
                    offset,
                } => {
                    let at = *offset + block_offset(&strides[lead..], b);
                    match loads.next() {
                        Some((Source::Forwarded, _)) if let Some(s) = stored(pk, *buf, at) => {
                            map.insert(*dst, s);
                            continue;
                        }
                        Some((Source::Constant(_), Some(value))) => {
                            let s = const_slot(pk, *value);
                            map.insert(*dst, s);
                            continue;
                        }
                        _ => {
                            // A load that reads the same element at every block position is
                            // loaded once (the consumer does not store into its buffer).
                            let invariant = strides[lead..].iter().all(|s| *s == 0)
                                && !ck
                                    .body
                                    .iter()
                                    .any(|i| matches!(i, Inst::Store { buf: b, .. } if b == buf));
                            let key = (*buf, strides[..lead].to_vec(), at);
                            if invariant && let Some((_, s)) = hoisted.iter().find(|(k, _)| *k == key) {
                                map.insert(*dst, *s);
                                continue;
                            }
                            strides.truncate(lead);
                            *offset = at;
                            if invariant {
                                let s = SlotId::new(pk.slots.len());
                                pk.slots.push(ck.slots[dst.index()]);
                                hoisted.push((key, s));
                                map.insert(*dst, s);
                                *dst = s;
                                body.push(next);
                                continue;
                            }
                        }
                    }
                }
                Inst::Index { dst, strides } => {
                    let dtype = ck.slots[dst.index()];
                    let s = const_slot(pk, index_scalar(dtype, block_offset(&strides[lead..], b)));
                    map.insert(*dst, s);
                    continue;
                }
                Inst::Store { strides, offset, .. } => {
                    *offset += block_offset(&strides[lead..], b);
                    strides.truncate(lead);
                }
                _ => {}
            }
            if let Some(d) = inst.dst() {
                set_dst(&mut next, shift(d));
                map.insert(d, shift(d));
            }
            if sort_stores && matches!(next, Inst::Store { .. }) {
                stores.push(next);
            } else {
                body.push(next);
            }
        }
        stores.sort_by_key(|i| match i {
            Inst::Store { buf, offset, .. } => (buf.index(), *offset),
            _ => (0, 0),
        });
        body.append(&mut stores);
    }
    pk.body.extend(body);
}

/// Whether the consumer's stores at one block position may run in address order after its
/// other instructions: it reads none of the buffers it stores, the stores into one buffer step
/// alike along the producer's dims (so at every point their elements differ where their
/// offsets do) and no two of its stores at a position write one element.
fn stores_sortable(ck: &LirKernel, lead: usize, all: &[Vec<usize>]) -> bool {
    let stored: Vec<(BufId, &[usize], usize)> = ck
        .body
        .iter()
        .filter_map(|i| match i {
            Inst::Store {
                buf, strides, offset, ..
            } => Some((*buf, &strides[lead..], *offset)),
            _ => None,
        })
        .collect();
    if stored.iter().any(|(buf, ..)| reads(ck, *buf)) {
        return false;
    }
    let mut outer: HashMap<BufId, &[usize]> = HashMap::new();
    for inst in &ck.body {
        if let Inst::Store { buf, strides, .. } = inst
            && *outer.entry(*buf).or_insert(&strides[..lead]) != &strides[..lead]
        {
            return false;
        }
    }
    all.iter().all(|b| {
        let mut at: Vec<(usize, usize)> = stored
            .iter()
            .map(|(buf, strides, offset)| (buf.index(), offset + block_offset(strides, b)))
            .collect();
        at.sort_unstable();
        at.windows(2).all(|w| w[0] != w[1])
    })
}

/// Stops storing temporaries no kernel reads, and drops kernels that then store nothing.
fn drop_dead_stores(
    kernels: &mut Vec<LirKernel>,
    reports: &mut Vec<KernelReport>,
    is_temp: &dyn Fn(BufId) -> bool,
) {
    loop {
        let read: HashSet<BufId> = kernels.iter().flat_map(LirKernel::reads).collect();
        let dead = |buf: BufId| is_temp(buf) && !read.contains(&buf);
        let mut changed = false;
        for k in kernels.iter_mut() {
            let before = k.body.len();
            k.body
                .retain(|inst| !matches!(inst, Inst::Store { buf, .. } if dead(*buf)));
            changed |= k.body.len() != before;
        }
        let mut i = 0;
        while i < kernels.len() {
            let k = &kernels[i];
            let effect = k.row_store.is_some()
                || k.body
                    .iter()
                    .any(|inst| matches!(inst, Inst::Store { .. } | Inst::Reduce { .. }));
            if effect {
                if let Some(r) = reports.get_mut(i) {
                    r.body_insts = k.body.len();
                }
                i += 1;
            } else {
                kernels.remove(i);
                if i < reports.len() {
                    reports.remove(i);
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

#[cfg(test)]
#[path = "block_fold_tests.rs"]
mod tests;
