//! LIR.
