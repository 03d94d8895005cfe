//! Arguments checked once and reused by every call: the real-time call path.

use std::sync::atomic::{AtomicU64, Ordering};

use rfx_ir::{ArrayView, ArrayViewMut, DType, DataMut, DataRef, Element, TensorType};

use crate::backend::Compiled;
use crate::error::CallError;

/// Bytes of a cache line: every array of a [`CallArgs`] starts on one.
pub const CALL_ARGS_ALIGN: usize = 64;

/// A page: the span of 4 KiB aliasing, and the size from which arrays are staggered.
const PAGE: usize = 4096;

/// Lines in a [`PAGE`].
const PAGE_LINES: usize = PAGE / CALL_ARGS_ALIGN;

/// Arguments up to this many keep their addresses in the [`CallArgs`] itself (with its id, in
/// its first cache line), so that a call reads them with the `CallArgs` rather than from one
/// more allocation: a miss fewer before the kernel starts where the `CallArgs` is not in the
/// cache, as when a caller cycles through many of them.
const INLINE_ADDRESSES: usize = 6;

/// One cache line of storage. A [`CallArgs`] keeps all its arrays in one buffer of lines, so
/// the buffer, and each array in it, starts on a line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; CALL_ARGS_ALIGN]);

/// A zero-filled buffer of [`Line`]s, owned through a raw pointer so that slices of disjoint
/// parts of it can be lent at once and the addresses handed to compiled code stay valid: no
/// reference to the whole buffer is ever made while it lives (a `&mut` to all of it would,
/// under Rust's aliasing rules, invalidate the addresses taken before).
struct Lines {
    /// From `Box::<[Line]>::into_raw`: the allocation of `len` lines (dangling, and never
    /// read, when `len` is 0).
    ptr: *mut Line,
    len: usize,
}

// SAFETY: `Lines` owns its allocation alone, as a `Box<[Line]>` would: `&Lines` lends only
// shared slices of it and mutable slices need `&mut Lines` (see `CallArgs`), so sending or
// sharing it across threads is as sound as for the box.
unsafe impl Send for Lines {}
// SAFETY: as for `Send`.
unsafe impl Sync for Lines {}

impl Lines {
    /// `len` zero-filled lines.
    fn zeroed(len: usize) -> Lines {
        let boxed: Box<[Line]> = vec![Line([0; CALL_ARGS_ALIGN]); len].into_boxed_slice();
        let len = boxed.len();
        Lines {
            ptr: Box::into_raw(boxed).cast::<Line>(),
            len,
        }
    }

    /// The address of line `line` (at most `self.len`).
    fn at(&self, line: usize) -> *mut u8 {
        debug_assert!(line <= self.len);
        // SAFETY: `line <= len`, so the pointer stays inside the allocation or one past it.
        unsafe { self.ptr.add(line).cast() }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let all = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: `ptr` and `len` came from `Box::into_raw` of a `Box<[Line]>` of `len` lines,
        // freed only here; no slice lent from it outlives the borrow of `self` it came from.
        drop(unsafe { Box::from_raw(all) });
    }
}

/// Where one argument lives in the buffer.
#[derive(Clone, Debug)]
struct Slot {
    ty: TensorType,
    /// The first line of the elements.
    line: usize,
    /// The element count (the shape's).
    len: usize,
}

/// Where every argument goes: each starts on a cache line (one line at least, so that no two
/// share an address), the outputs first in the buffer and the inputs after them.
///
/// The placement is for 4 KiB aliasing: a load whose address matches, in its low 12 bits, that
/// of an earlier store still in flight waits for the store (the CPU's memory disambiguation
/// sees them alike). An elementwise loop that loads `x[i]` has stored `out[j]` for every
/// `j < i`; with `x` starting `δ` bytes past `out` modulo 4 KiB (`0 < δ`), the load of `x`'s
/// byte `u` matches the store of `out`'s byte `u − (4096 − δ)`, so the nearest matching store
/// lies `4096 − δ` bytes behind the loop (a page behind when `δ` is 0).
///
/// - An array of a page or more takes room up to a whole number of pages plus one line, so each
///   starts one line further into its page than the one before it: every large input a few
///   lines past every output, its matching stores almost a page behind, long retired (a
///   1024-element PID whose inputs lay a little *before* its output in the page stalled on
///   them). No more room than that: a loop streaming its rows from beyond the L2 cache ran
///   measurably faster on rows packed this close (their page crossings coincide) than on rows
///   spread 1 KiB and more apart within their pages.
/// - Smaller arrays are packed, line after line, where that keeps every matching store out of
///   the row: an input of `b` bytes goes to the first line, from the next free one, at which
///   every output lies `δ ≤ 4096 − b` bytes before it (or at its offset, `δ = 0`), so that no
///   element of the input matches an earlier store of the call ([`first_clear_line`]). A PID
///   of 256 `f32`s so has its four rows in one page rather than one page each: cycling through
///   1,024 such argument sets, as `rfx bench` does, each call then walked four pages of the TLB
///   where gcc's driver walks about one, and took 250 ns against 185 packed (gcc: 158).
struct Layout {
    slots: Vec<Slot>,
    lines: usize,
}

impl Layout {
    /// The layout of `types`: the inputs (the first `n_inputs`), then the outputs.
    fn of<'a>(types: impl Iterator<Item = &'a TensorType>, n_inputs: usize) -> Layout {
        let types: Vec<&TensorType> = types.collect();
        let n_inputs = n_inputs.min(types.len());
        let mut lines_of = vec![0usize; types.len()];
        // The first line and the byte length of every output placed so far.
        let mut outputs: Vec<(usize, usize)> = Vec::new();
        let mut next = 0usize;
        for k in (n_inputs..types.len()).chain(0..n_inputs) {
            let ty = types[k];
            let bytes = ty.shape.numel().saturating_mul(ty.dtype.size_bytes());
            let (start, room) = if bytes >= PAGE {
                let room = bytes
                    .checked_next_multiple_of(PAGE)
                    .unwrap_or(usize::MAX)
                    .saturating_add(CALL_ARGS_ALIGN);
                (next, room)
            } else if k < n_inputs {
                (first_clear_line(next, bytes, &outputs), bytes.max(1))
            } else {
                (next, bytes.max(1))
            };
            if k >= n_inputs {
                outputs.push((start, bytes));
            }
            lines_of[k] = start;
            next = start.saturating_add(room.div_ceil(CALL_ARGS_ALIGN));
        }
        let slots = types
            .iter()
            .zip(lines_of)
            .map(|(ty, line)| Slot {
                ty: (*ty).clone(),
                line,
                len: ty.shape.numel(),
            })
            .collect();
        Layout { slots, lines: next }
    }
}

/// The line, from `next` on, at which an input of `bytes` (under a page) matches no earlier
/// store to any of `outputs` (first line, bytes) within its own length (see [`Layout`]): the
/// first of the page of lines from `next` at which the nearest matching store of every output
/// lies at least `bytes` behind, or, where no line of that page does, the first at which the
/// nearest one lies furthest behind.
fn first_clear_line(next: usize, bytes: usize, outputs: &[(usize, usize)]) -> usize {
    // How far behind the loop the nearest matching store of any output lies, capped at
    // `bytes` (all that matters), for the input at `line`.
    let clearance = |line: usize| {
        outputs
            .iter()
            .filter(|&&(_, len)| len > 0)
            .map(|&(start, _)| {
                let delta = (line.wrapping_sub(start) % PAGE_LINES) * CALL_ARGS_ALIGN;
                if delta == 0 { PAGE } else { PAGE - delta }
            })
            .min()
            .unwrap_or(PAGE)
            .min(bytes)
    };
    let mut best = (clearance(next), next);
    for line in next.saturating_add(1)..next.saturating_add(PAGE_LINES) {
        if best.0 >= bytes {
            break;
        }
        let c = clearance(line);
        if c > best.0 {
            best = (c, line);
        }
    }
    best.1
}

/// The elements of `slot`, at `at` (its line in the buffer), shared.
///
/// # Safety
/// `at` is the slot's line in a live buffer holding its dtype's initialised elements, and
/// nothing writes them while the result lives.
unsafe fn data_ref<'a>(at: *mut u8, slot: &Slot) -> DataRef<'a> {
    let n = slot.len;
    // SAFETY: guaranteed by the caller; the slot's dtype says which type its elements have,
    // and a line's address is aligned for every element type.
    unsafe {
        match slot.ty.dtype {
            DType::Bool => DataRef::Bool(std::slice::from_raw_parts(at.cast(), n)),
            DType::I32 => DataRef::I32(std::slice::from_raw_parts(at.cast(), n)),
            DType::F32 => DataRef::F32(std::slice::from_raw_parts(at.cast(), n)),
            DType::F64 => DataRef::F64(std::slice::from_raw_parts(at.cast(), n)),
        }
    }
}

/// The elements of `slot`, at `at`, writable.
///
/// # Safety
/// As for [`data_ref`], and nothing else reads or writes them while the result lives.
unsafe fn data_mut<'a>(at: *mut u8, slot: &Slot) -> DataMut<'a> {
    let n = slot.len;
    // SAFETY: as in `data_ref`.
    unsafe {
        match slot.ty.dtype {
            DType::Bool => DataMut::Bool(std::slice::from_raw_parts_mut(at.cast(), n)),
            DType::I32 => DataMut::I32(std::slice::from_raw_parts_mut(at.cast(), n)),
            DType::F32 => DataMut::F32(std::slice::from_raw_parts_mut(at.cast(), n)),
            DType::F64 => DataMut::F64(std::slice::from_raw_parts_mut(at.cast(), n)),
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh identity for a compiled program, never handed out twice in a process: a backend
/// takes one at compile time and returns it from [`Compiled::args_id`], so that [`CallArgs`]
/// made for it are recognised, and no others.
pub fn new_compiled_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A compiled program's inputs and outputs, owned and checked once, for calls that validate
/// nothing: a control loop writes its inputs in place ([`CallArgs::input_mut`]), calls
/// [`Compiled::run_args`] and reads its outputs ([`CallArgs::output`]).
///
/// The arrays are allocated with the program's exact dtypes and shapes when the `CallArgs` is
/// made, all in one zero-filled buffer, each starting on a cache line
/// ([`CALL_ARGS_ALIGN`] bytes, as wide vector loops want) and large ones at staggered
/// offsets within a page. Only their elements are ever lent out, so their lengths and
/// addresses cannot change: the backend that made the program runs it on the recorded
/// addresses without looking at the arrays again. Passed to another program, a `CallArgs` is
/// checked like any call ([`crate::CallError`] when it does not fit).
///
/// ```
/// use rfx_lower::{Backend, CallArgs, InterpBackend, LowerConfig, Scratch};
///
/// let kernel = rfx_ir::hir::parse(
///     "kernel k {\n %x = input x : f32[2]\n %y = add %x, %x : f32[2]\n output y = %y\n}",
/// )?;
/// let (mir, _) = rfx_opt::optimize(&kernel, &Default::default())?;
/// let (lir, _) = rfx_lower::lower(&mir, &LowerConfig::default())?;
/// let compiled = InterpBackend.compile(&lir, &Default::default())?;
/// let mut args = CallArgs::new(compiled.as_ref());
/// let mut scratch = Scratch::new();
/// for step in 0..3 {
///     args.input_mut::<f32>(0).ok_or("x is f32")?.copy_from_slice(&[step as f32, 1.0]);
///     compiled.run_args(&mut args, &mut scratch)?;
///     assert_eq!(args.output::<f32>(0), Some(&[2.0 * step as f32, 2.0][..]));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
// The first cache line holds what a call reads (the id and, for up to `INLINE_ADDRESSES`
// arguments, the addresses): `repr(C)` keeps the fields in this order.
#[repr(C, align(64))]
pub struct CallArgs {
    /// The [`Compiled::args_id`] of the program the arrays were made for (0: none).
    id: u64,
    /// How many arguments (inputs and outputs) there are.
    n_addresses: usize,
    /// The base address of every input's elements, then every output's, where there are at
    /// most [`INLINE_ADDRESSES`] of them (the rest of the array is 0).
    inline: [usize; INLINE_ADDRESSES],
    /// The same, where there are more (empty otherwise).
    heap: Vec<usize>,
    /// Every input's place, then every output's.
    slots: Vec<Slot>,
    n_inputs: usize,
    /// The inputs' names (for errors).
    input_names: Vec<String>,
    /// The elements of every argument (see [`Layout`]). The only way to them is through the
    /// methods below, each of which lends slices of distinct slots for a borrow of `self`:
    /// shared ones for `&self`, mutable ones for `&mut self`.
    lines: Lines,
}

impl std::fmt::Debug for CallArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallArgs")
            .field("id", &self.id)
            .field("inputs", &self.inputs().collect::<Vec<_>>())
            .field("outputs", &self.outputs().collect::<Vec<_>>())
            .finish()
    }
}

impl CallArgs {
    /// Zero-filled inputs and outputs for `compiled`, with its dtypes and shapes.
    pub fn new(compiled: &dyn Compiled) -> CallArgs {
        let program = compiled.program();
        let Layout { slots, lines } = Layout::of(
            program.inputs().chain(program.outputs()).map(|(_, _, ty)| ty),
            program.inputs().count(),
        );
        let lines = Lines::zeroed(lines);
        let addresses: Vec<usize> = slots
            .iter()
            .map(|slot| lines.at(slot.line).expose_provenance())
            .collect();
        let mut inline = [0; INLINE_ADDRESSES];
        let heap = match inline.get_mut(..addresses.len()) {
            Some(first) => {
                first.copy_from_slice(&addresses);
                Vec::new()
            }
            None => addresses.clone(),
        };
        CallArgs {
            id: compiled.args_id().unwrap_or(0),
            n_addresses: addresses.len(),
            inline,
            heap,
            slots,
            n_inputs: program.inputs().count(),
            input_names: program.inputs().map(|(_, name, _)| name.to_string()).collect(),
            lines,
        }
    }

    /// The input slots, then the output slots.
    fn split(&self) -> (&[Slot], &[Slot]) {
        self.slots.split_at(self.n_inputs.min(self.slots.len()))
    }

    /// A view of `slot`'s elements.
    fn view<'a>(&'a self, slot: &'a Slot) -> Option<ArrayView<'a>> {
        // SAFETY: `slot` is one of `self.slots`, inside `lines`; elements are written only
        // through `&mut self`, which `&self` excludes while the view lives.
        let data = unsafe { data_ref(self.lines.at(slot.line), slot) };
        ArrayView::from_data(&slot.ty.shape, data).ok()
    }

    /// Views of the inputs, in call order (one per input: every array holds its shape's
    /// element count).
    pub fn inputs(&self) -> impl Iterator<Item = ArrayView<'_>> + '_ {
        self.split().0.iter().filter_map(|slot| self.view(slot))
    }

    /// Views of the outputs, in call order (one per output).
    pub fn outputs(&self) -> impl Iterator<Item = ArrayView<'_>> + '_ {
        self.split().1.iter().filter_map(|slot| self.view(slot))
    }

    /// The elements of input `index` to write, or `None` when there is no such input or its
    /// dtype is not `T`'s.
    pub fn input_mut<T: Element>(&mut self, index: usize) -> Option<&mut [T]> {
        let slot = self.split().0.get(index)?;
        if slot.ty.dtype != T::DTYPE {
            return None;
        }
        // SAFETY: the slot is inside `lines` and holds `len` elements of its dtype, `T`'s;
        // `&mut self` is borrowed for the slice's life, so nothing else reads or writes it.
        Some(unsafe { std::slice::from_raw_parts_mut(self.lines.at(slot.line).cast::<T>(), slot.len) })
    }

    /// Copies `value` into input `index`; it must have the input's dtype and shape.
    pub fn set_input(&mut self, index: usize, value: ArrayView<'_>) -> Result<(), CallError> {
        let n_inputs = self.n_inputs;
        let (Some(slot), Some(name)) = (self.split().0.get(index), self.input_names.get(index)) else {
            return Err(CallError::Arity {
                what: "inputs",
                expected: n_inputs,
                found: index.saturating_add(1),
            });
        };
        if value.dtype() != slot.ty.dtype {
            return Err(CallError::DType {
                name: name.clone(),
                expected: slot.ty.dtype,
                found: value.dtype(),
            });
        }
        if *value.shape() != slot.ty.shape {
            return Err(CallError::Shape {
                name: name.clone(),
                expected: slot.ty.shape.clone(),
                found: value.shape().clone(),
            });
        }
        // SAFETY: as in `input_mut`: the slot's elements, lent for this borrow of `&mut self`.
        match (unsafe { data_mut(self.lines.at(slot.line), slot) }, value.data()) {
            (DataMut::Bool(to), DataRef::Bool(from)) => to.copy_from_slice(from),
            (DataMut::I32(to), DataRef::I32(from)) => to.copy_from_slice(from),
            (DataMut::F32(to), DataRef::F32(from)) => to.copy_from_slice(from),
            (DataMut::F64(to), DataRef::F64(from)) => to.copy_from_slice(from),
            // The dtypes and shapes were compared above.
            _ => {}
        }
        Ok(())
    }

    /// The elements of output `index`, or `None` when there is no such output or its dtype is
    /// not `T`'s.
    pub fn output<T: Element>(&self, index: usize) -> Option<&[T]> {
        let slot = self.split().1.get(index)?;
        if slot.ty.dtype != T::DTYPE {
            return None;
        }
        // SAFETY: the slot is inside `lines` and holds `len` elements of `T`; `&self` is
        // borrowed for the slice's life, which excludes every writer.
        Some(unsafe { std::slice::from_raw_parts(self.lines.at(slot.line).cast::<T>(), slot.len) })
    }

    /// The [`Compiled::args_id`] of the program these arguments were made for.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The base address of every input's elements, then every output's: each array has the
    /// dtype and shape of the program that [`CallArgs::id`] names, starts on a cache line
    /// ([`CALL_ARGS_ALIGN`]), overlaps no other, and stays valid and in place as long as
    /// `self` lives (moving `self` moves none of them). Code that writes the outputs through
    /// these addresses must hold `&mut self` while it does, as [`Compiled::run_args`] does.
    pub fn addresses(&self) -> &[usize] {
        self.inline.get(..self.n_addresses).unwrap_or(&self.heap)
    }

    /// Views of the inputs and the outputs, for the checked path ([`Compiled::run`]): what a
    /// backend without a faster path runs on, and what every backend runs on with arguments
    /// made for another program. Allocates the two lists.
    pub fn views(&mut self) -> (Vec<ArrayView<'_>>, Vec<ArrayViewMut<'_>>) {
        let (inputs, outputs) = self.split();
        let lines = &self.lines;
        (
            // SAFETY: the slots are distinct parts of `lines`; the input slots are only read and
            // each output slot is lent once, for the borrow of `&mut self`.
            inputs
                .iter()
                .filter_map(|slot| {
                    ArrayView::from_data(&slot.ty.shape, unsafe { data_ref(lines.at(slot.line), slot) }).ok()
                })
                .collect(),
            outputs
                .iter()
                .filter_map(|slot| {
                    ArrayViewMut::from_data(&slot.ty.shape, unsafe { data_mut(lines.at(slot.line), slot) })
                        .ok()
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, InterpBackend, LowerConfig, Scratch};
    use rfx_ir::{Array, Shape};

    fn compiled(text: &str) -> std::sync::Arc<dyn Compiled> {
        let kernel = rfx_ir::hir::parse(text).expect("kernel");
        let (mir, _) = rfx_opt::optimize(&kernel, &Default::default()).expect("optimize");
        let (lir, _) = crate::lower(&mir, &LowerConfig::default()).expect("lower");
        InterpBackend.compile(&lir, &Default::default()).expect("compile")
    }

    /// Three inputs and three outputs of 1,024 `f32`s (a page each), and smaller ones of every
    /// dtype, including an empty one.
    const MIXED: &str = "kernel k {
      %a = input a : f32[1024]
      %b = input b : f32[1024]
      %c = input c : f32[1024]
      %n = input n : i32[3]
      %e = input e : f64[0]
      %p = input p : bool[5]
      %s = add %a, %b : f32[1024]
      %t = mul %s, %c : f32[1024]
      %u = sub %t, %a : f32[1024]
      %m = neg %n : i32[3]
      %q = not %p : bool[5]
      output s = %s
      output t = %t
      output u = %u
      output m = %m
      output q = %q
    }";

    #[test]
    fn every_array_starts_on_its_own_cache_line_and_large_ones_at_distinct_page_offsets() {
        let compiled = compiled(MIXED);
        let args = CallArgs::new(compiled.as_ref());
        let addresses = args.addresses();
        assert_eq!(addresses.len(), 11);
        for &a in addresses {
            assert_eq!(a % CALL_ARGS_ALIGN, 0, "{a:#x}");
        }
        let mut distinct = addresses.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), addresses.len(), "{addresses:x?}");
        // a, b, c (inputs 0-2) and s, t, u (outputs 0-2) are a page each.
        let large = [0, 1, 2, 6, 7, 8];
        let mut offsets: Vec<usize> = large.iter().map(|&k| addresses[k] % PAGE).collect();
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets.len(), large.len(), "{offsets:?}");
        // The views lie at the addresses and do not overlap.
        let views = args.inputs().chain(args.outputs()).map(|v| {
            let len = match v.data() {
                DataRef::Bool(d) => std::mem::size_of_val(d),
                DataRef::I32(d) => std::mem::size_of_val(d),
                DataRef::F32(d) => std::mem::size_of_val(d),
                DataRef::F64(d) => std::mem::size_of_val(d),
            };
            let start = match v.data() {
                DataRef::Bool(d) => d.as_ptr() as usize,
                DataRef::I32(d) => d.as_ptr() as usize,
                DataRef::F32(d) => d.as_ptr() as usize,
                DataRef::F64(d) => d.as_ptr() as usize,
            };
            (start, start + len)
        });
        let ranges: Vec<(usize, usize)> = views.collect();
        assert_eq!(ranges.iter().map(|r| r.0).collect::<Vec<_>>(), addresses);
        for (i, a) in ranges.iter().enumerate() {
            for b in &ranges[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "{a:x?} and {b:x?} overlap");
            }
        }
    }

    /// The start of every array of `args` within its page.
    fn page_offsets(args: &CallArgs) -> Vec<usize> {
        args.addresses().iter().map(|a| a % PAGE).collect()
    }

    #[test]
    fn inputs_start_a_few_lines_past_the_outputs_within_their_pages() {
        // Three inputs and an output of a page each, as a PID's, and the MIXED kernel's six
        // large arrays among small ones.
        let pid = compiled(
            "kernel pid {
              %e = input e : f32[1024]
              %i = input i : f32[1024]
              %d = input d : f32[1024]
              %b = add %e, %i : f32[1024]
              %u = sub %b, %d : f32[1024]
              output u = %u
            }",
        );
        for (program, inputs, outputs) in [
            (pid, vec![0, 1, 2], vec![3]),
            (compiled(MIXED), vec![0, 1, 2], vec![6, 7, 8]),
        ] {
            let args = CallArgs::new(program.as_ref());
            let base = args.lines.at(0).expose_provenance() % PAGE;
            // Offsets from the buffer's own page offset: the layout's, wherever the buffer lies.
            let offsets: Vec<usize> = page_offsets(&args)
                .iter()
                .map(|o| (o + PAGE - base) % PAGE)
                .collect();
            let last_output = outputs.iter().map(|&k| offsets[k]).max().expect("outputs");
            for &k in &inputs {
                assert!(
                    offsets[k] > last_output,
                    "input {k} at {} within its page, outputs up to {last_output}",
                    offsets[k]
                );
                assert!(
                    offsets[k] - last_output < 1024,
                    "input {k} at {} is not a few lines past the outputs",
                    offsets[k]
                );
            }
        }
    }

    /// The byte offset of every slot of `layout` from the buffer's start.
    fn byte_offsets(layout: &Layout) -> Vec<usize> {
        layout.slots.iter().map(|s| s.line * CALL_ARGS_ALIGN).collect()
    }

    /// `f32` arrays of `lens` elements: `n_inputs` inputs, then the outputs.
    fn f32_layout(lens: &[usize], n_inputs: usize) -> Layout {
        let types: Vec<TensorType> = lens
            .iter()
            .map(|&n| TensorType::new(DType::F32, Shape::new([n])))
            .collect();
        Layout::of(types.iter(), n_inputs)
    }

    /// Whether the input of `bytes` at `x` matches no earlier store of the output at `o` within
    /// its own length: `x` lies `δ` bytes past `o` modulo a page, with `δ` 0 or at most a page
    /// less the input's length.
    fn clear_of(x: usize, bytes: usize, o: usize) -> bool {
        let delta = (x - o) % PAGE;
        delta == 0 || PAGE - delta >= bytes
    }

    #[test]
    fn a_small_pid_is_packed_into_one_page() {
        // Three inputs and an output of 256 f32s (1 KiB each): the output, then the inputs,
        // back to back.
        let layout = f32_layout(&[256, 256, 256, 256], 3);
        assert_eq!(byte_offsets(&layout), [1024, 2048, 3072, 0]);
        assert_eq!(layout.lines * CALL_ARGS_ALIGN, PAGE);
        // Half a page each: two pages.
        let layout = f32_layout(&[512, 512, 512, 512], 3);
        assert_eq!(byte_offsets(&layout), [2048, 4096, 6144, 0]);
        assert_eq!(layout.lines * CALL_ARGS_ALIGN, 2 * PAGE);
    }

    #[test]
    fn an_input_that_would_start_just_before_the_output_in_its_page_moves_to_the_outputs_offset() {
        // Two inputs and an output of 1,000 f32s (4,000 bytes, under a page): packed, `x` would
        // start a line before `z` modulo a page (its first element's matching store a line
        // behind), so each input moves on to the next page's start, `z`'s offset.
        let layout = f32_layout(&[1000, 1000, 1000], 2);
        assert_eq!(byte_offsets(&layout), [PAGE, 2 * PAGE, 0]);
        assert_eq!(layout.lines, 2 * PAGE_LINES + 4000usize.div_ceil(CALL_ARGS_ALIGN));
        // 768 f32s (3 KiB): packed, `x` would lie 3 KiB past `z` and match stores 1 KiB behind.
        let layout = f32_layout(&[768, 768], 1);
        assert_eq!(byte_offsets(&layout), [PAGE, 0]);
    }

    #[test]
    fn inputs_under_a_page_take_the_first_line_clear_of_every_output() {
        // Lengths up to a page and a little past, as one to three inputs of one or two outputs,
        // against a search of every line in the page after the array before each input: an
        // input under a page takes the first line there that is clear of every output (one
        // always is with one output: its own offset), or, where none is, a line in that page.
        for n in (1..=1100)
            .step_by(7)
            .chain([255, 256, 257, 511, 512, 513, 1023, 1024])
        {
            for (lens, n_inputs) in [
                (vec![n, n], 1),
                (vec![n, n, n, n], 3),
                (vec![n, n / 2 + 1, n, n / 3 + 1], 2),
                (vec![n / 4 + 1, n, 3, n], 2),
                (vec![n, 5, n / 2 + 1, 2 * n], 3),
            ] {
                let layout = f32_layout(&lens, n_inputs);
                let at = byte_offsets(&layout);
                let bytes: Vec<usize> = lens.iter().map(|&l| 4 * l).collect();
                let outputs: Vec<usize> = (n_inputs..lens.len()).collect();
                let mut end = 0;
                for k in outputs.iter().copied().chain(0..n_inputs) {
                    assert!(at[k] >= end, "{lens:?}: array {k} at {} overlaps {end}", at[k]);
                    if k < n_inputs && bytes[k] < PAGE {
                        let first = end.next_multiple_of(CALL_ARGS_ALIGN);
                        let clear = |x: usize| outputs.iter().all(|&o| clear_of(x, bytes[k], at[o]));
                        let want = (first..first + PAGE).step_by(CALL_ARGS_ALIGN).find(|&x| clear(x));
                        match want {
                            Some(x) => assert_eq!(at[k], x, "{lens:?}: input {k}"),
                            None => {
                                assert!(outputs.len() > 1, "{lens:?}: no clear line for input {k}");
                                assert!(at[k] < first + PAGE, "{lens:?}: input {k} at {}", at[k]);
                            }
                        }
                    }
                    // An array of a page or more is followed by room up to whole pages and a line.
                    end = at[k]
                        + if bytes[k] >= PAGE {
                            bytes[k].next_multiple_of(PAGE) + CALL_ARGS_ALIGN
                        } else {
                            bytes[k].max(1)
                        };
                }
            }
        }
    }

    #[test]
    fn addresses_are_the_views_whether_kept_inline_or_not() {
        // Three arguments (inline) and eleven (more than `INLINE_ADDRESSES`).
        let small = compiled(
            "kernel k {\n %x = input x : f32[4]\n %y = input y : f32[4]\n %z = add %x, %y : f32[4]\n output z = %z\n}",
        );
        for (program, count) in [(small, 3), (compiled(MIXED), 11)] {
            let mut args = CallArgs::new(program.as_ref());
            assert_eq!(count <= INLINE_ADDRESSES, args.heap.is_empty());
            let expected = args.addresses().to_vec();
            assert_eq!(expected.len(), count);
            let (inputs, outputs) = args.views();
            let starts: Vec<usize> = inputs
                .iter()
                .map(|v| start_of(v.data()))
                .chain(outputs.iter().map(|v| match v.data() {
                    DataMut::Bool(d) => d.as_ptr() as usize,
                    DataMut::I32(d) => d.as_ptr() as usize,
                    DataMut::F32(d) => d.as_ptr() as usize,
                    DataMut::F64(d) => d.as_ptr() as usize,
                }))
                .collect();
            assert_eq!(starts, expected);
        }
    }

    fn start_of(data: DataRef<'_>) -> usize {
        match data {
            DataRef::Bool(d) => d.as_ptr() as usize,
            DataRef::I32(d) => d.as_ptr() as usize,
            DataRef::F32(d) => d.as_ptr() as usize,
            DataRef::F64(d) => d.as_ptr() as usize,
        }
    }

    #[test]
    fn arrays_start_zeroed_and_keep_what_is_written() {
        let compiled = compiled(MIXED);
        let mut args = CallArgs::new(compiled.as_ref());
        let zeros: Vec<Array> = args
            .inputs()
            .chain(args.outputs())
            .map(|v| v.to_owned())
            .collect();
        for (array, (_, _, ty)) in zeros
            .iter()
            .zip(compiled.program().inputs().chain(compiled.program().outputs()))
        {
            assert_eq!((array.dtype(), array.shape()), (ty.dtype, &ty.shape));
            assert!(array.to_f64_vec().iter().all(|&x| x == 0.0));
        }
        let a: Vec<f32> = (0..1024).map(|i| i as f32 * 0.5 - 7.0).collect();
        let b: Vec<f32> = (0..1024).map(|i| 3.0 - i as f32).collect();
        let c: Vec<f32> = (0..1024).map(|i| (i % 7) as f32 - 2.5).collect();
        args.input_mut::<f32>(0).expect("a").copy_from_slice(&a);
        args.set_input(1, Array::from_slice(&b).view()).expect("b");
        args.set_input(2, Array::from_slice(&c).view()).expect("c");
        args.set_input(3, Array::from_slice(&[4i32, -5, 6]).view())
            .expect("n");
        args.set_input(
            4,
            Array::from_vec(Shape::new([0]), Vec::<f64>::new())
                .expect("e")
                .view(),
        )
        .expect("e");
        args.input_mut::<bool>(5)
            .expect("p")
            .copy_from_slice(&[true, false, true, true, false]);
        compiled.run_args(&mut args, &mut Scratch::new()).expect("run");
        let s: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let t: Vec<f32> = s.iter().zip(&c).map(|(x, y)| x * y).collect();
        let u: Vec<f32> = t.iter().zip(&a).map(|(x, y)| x - y).collect();
        assert_eq!(args.output::<f32>(0), Some(&s[..]));
        assert_eq!(args.output::<f32>(1), Some(&t[..]));
        assert_eq!(args.output::<f32>(2), Some(&u[..]));
        assert_eq!(args.output::<i32>(3), Some(&[-4, 5, -6][..]));
        assert_eq!(
            args.output::<bool>(4),
            Some(&[false, true, false, false, true][..])
        );
        assert_eq!(
            args.inputs().nth(1).map(|v| v.to_owned()),
            Some(Array::from_slice(&b))
        );
        // The checked path's views are the same arrays.
        let (inputs, outputs) = args.views();
        assert_eq!((inputs.len(), outputs.len()), (6, 5));
        assert_eq!(inputs[2].to_owned(), Array::from_slice(&c));
        assert_eq!(outputs[3].data(), &DataMut::I32(&mut [-4, 5, -6]));
    }

    #[test]
    fn accessors_refuse_other_dtypes_and_indices() {
        let compiled = compiled(MIXED);
        let mut args = CallArgs::new(compiled.as_ref());
        assert!(args.input_mut::<f64>(0).is_none());
        assert!(args.input_mut::<f32>(6).is_none());
        assert!(args.output::<f32>(3).is_none());
        assert!(args.output::<bool>(5).is_none());
        assert_eq!(args.inputs().count(), 6);
        assert_eq!(args.outputs().count(), 5);
        assert!(matches!(
            args.set_input(3, Array::from_slice(&[1.0f32, 2.0, 3.0]).view()),
            Err(CallError::DType { .. })
        ));
        assert!(matches!(
            args.set_input(3, Array::from_slice(&[1i32, 2]).view()),
            Err(CallError::Shape { .. })
        ));
        assert!(matches!(
            args.set_input(6, Array::from_slice(&[1i32]).view()),
            Err(CallError::Arity {
                expected: 6,
                found: 7,
                ..
            })
        ));
    }

    #[test]
    fn arguments_move_between_threads_with_their_addresses() {
        let compiled = compiled(MIXED);
        let mut args = CallArgs::new(compiled.as_ref());
        args.input_mut::<i32>(3).expect("n").copy_from_slice(&[1, 2, 3]);
        let before = args.addresses().to_vec();
        let args = std::thread::spawn(move || args).join().expect("thread");
        assert_eq!(args.addresses(), before);
        assert_eq!(
            args.inputs().nth(3).map(|v| v.to_owned()),
            Some(Array::from_slice(&[1i32, 2, 3]))
        );
    }
}
