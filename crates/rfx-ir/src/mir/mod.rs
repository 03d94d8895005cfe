//! MIR.
