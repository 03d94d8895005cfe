//! `rfx-autodiff`: automatic differentiation as HIR → HIR transforms.
//!
//! **Owns:** reverse mode (`vjp`, `grad`, `value_and_grad`), forward mode (`jvp`), Jacobians and
//! Hessian-vector products, producing one HIR kernel that computes values and gradients together
//! so that `rfx-opt` can fuse them into a single loop.
//!
//! **Depends on:** `rfx-ir` only. **May not depend on:** the optimiser, lowering, code generators or
//! the runtime: a gradient is just another HIR kernel.
//!
//! Status: the transforms land with the rfx-autodiff issue; see `ROADMAP.md`.
#![deny(missing_docs)]
