//! Reference interpreters.
