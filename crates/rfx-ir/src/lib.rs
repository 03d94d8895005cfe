//! `rfx-ir`: the intermediate representations of rfx and their reference semantics.
//!
//! **Owns:** element types and shapes ([`DType`], [`Shape`], [`TensorType`]), host arrays
//! ([`Array`] and borrowed views), the op vocabularies ([`UnaryOp`], [`BinaryOp`], [`CmpOp`],
//! [`ReduceOp`], [`ScanOp`]) with their IEEE semantics ([`semantics`]), the three IR levels with
//! their text formats and verifiers ([`hir`]: a kernel as traced; [`mir`]: fused kernels over
//! iteration spaces; [`lir`]: slot-based instruction lists with a memory plan), the reference
//! interpreters ([`interp`]) that define what every pass and backend must compute, and Graphviz
//! export ([`dot`]).
//!
//! **Depends on:** no other rfx crate. **Invariant:** this is the leaf of the workspace; every
//! other compiler crate depends on it and it depends on none of them.

#![deny(missing_docs)]

mod array;
mod dtype;
mod error;
mod ids;
mod ops;
mod shape;
mod text;

pub mod dot;
pub mod hir;
pub mod interp;
pub mod lir;
pub mod mir;
pub mod repeat;
pub mod semantics;
#[cfg(feature = "testgen")]
pub mod testgen;

pub use array::{Array, ArrayData, ArrayLengthError, ArrayView, ArrayViewMut, DataMut, DataRef, Element};
pub use dtype::{DType, Scalar, parse_scalar};
pub use error::{ParseError, TypeError};
pub use ids::BufId;
pub use ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
pub use shape::{Shape, TensorType, broadcast_shapes};
