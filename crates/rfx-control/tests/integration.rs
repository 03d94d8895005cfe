//! The integration tests of `rfx-control` in one test binary (one link instead of one per file);
//! each file is a module of it. `alloc.rs` and `alloc_state.rs` (counting global allocators) stay binaries of their own.

mod chain_ref;
mod reference;

#[path = "chain.rs"]
mod chain;
#[path = "chain_errors.rs"]
mod chain_errors;
#[path = "kalman_filter.rs"]
mod kalman_filter;
#[path = "kernels.rs"]
mod kernels;
#[path = "stateful.rs"]
mod stateful;
