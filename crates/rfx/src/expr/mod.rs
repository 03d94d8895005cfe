//! Expressions: numexpr-like strings compiled to HIR kernels.
