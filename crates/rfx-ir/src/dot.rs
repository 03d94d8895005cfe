//! Graphviz export.
