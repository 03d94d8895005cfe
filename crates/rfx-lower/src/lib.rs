//! `rfx-lower`: MIR → LIR lowering and the `Backend` trait that code generators implement.
//!
//! **Owns:** iteration-space canonicalisation (flat fast path, strided and broadcast index maps,
//! hoisted scalars), slot allocation with reuse, the memory plan for intermediate buffers
//! (liveness-based reuse, alignment, peak bytes), schedules (vector width, thread split, tiles),
//! the backend registry and the lowered executor that validates inputs before dispatching.
//!
//! **Depends on:** `rfx-ir` only. **May not depend on:** `rfx-opt`, any code generator or the
//! runtime; code generators depend on this crate, never the other way round.
//!
//! Status: lowering lands with the rfx-lower issue; see `ROADMAP.md`.
#![deny(missing_docs)]
