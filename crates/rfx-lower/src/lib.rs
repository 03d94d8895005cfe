//! `rfx-lower`: MIR → LIR lowering and the [`Backend`] trait that code generators implement.
//!
//! **Owns:** iteration-space canonicalisation (reduced axes last, adjacent dims coalesced so
//! contiguous kernels become flat loops, broadcast and scalar operands as zero strides, loop
//! invariants hoisted to the preamble), slot allocation with reuse and constant pooling, the
//! memory plan for temporaries ([`plan_memory`]: liveness-based reuse, alignment, peak bytes;
//! [`live_across_loops`]: a buffer touched inside a program loop is live over its range),
//! schedules (vector width, thread split, tile), the [`Backend`]/[`Compiled`] contract, the
//! backend [`Registry`] with the `"interp"` backend, call validation ([`validate_call`]), the
//! lowered executor ([`execute_lowered`]) and the coefficient tables of the approximations
//! several code generators evaluate ([`coefficients`]).
//!
//! **Depends on:** `rfx-ir` only. **May not depend on:** `rfx-opt`, any code generator or the
//! runtime; code generators depend on this crate, never the other way round.

#![deny(missing_docs)]

mod accuracy;
mod args;
mod backend;
mod block_fold;
pub mod coefficients;
mod config;
mod error;
mod executor;
mod indices;
mod interp_backend;
mod lower;
mod memplan;
mod program;
mod registry;
mod report;

pub use accuracy::{Transcendental, ulps};
pub use args::{CALL_ARGS_ALIGN, CallArgs, new_compiled_id};
pub use backend::{
    Backend, CompileOptions, Compiled, CpuTarget, DirectEntry, Scratch, Signature, check_type, validate_call,
};
pub use block_fold::{MAX_BLOCK_POSITIONS, MAX_CONSUMER_WORK, MAX_FOLDED_INSTS, STORE_SHARE};
pub use config::LowerConfig;
pub use error::{BackendError, CallError, LowerError, Unsupported};
pub use executor::{execute_lowered, order_inputs};
pub use indices::indices_fit_i32;
pub use interp_backend::InterpBackend;
pub use memplan::{Interval, MemoryPlan, arena_footprint, live_across_loops, plan_memory};
pub use program::lower;
pub use registry::{KNOWN_BACKENDS, Registry};
pub use report::{KernelReport, LowerReport};
