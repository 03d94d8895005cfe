//! The optimiser's corpus (`crates/rfx-opt/tests/corpus/*.rfx`) parsed, for rfx-opt's corpus
//! tests and, through a `#[path]` include, rfx-lower's lowering tests.

use std::path::Path;

use rfx_ir::hir::{self, Kernel};
use rfx_ir::testgen::read_corpus;

/// Every kernel of the corpus with its file stem, in name order.
pub(crate) fn corpus() -> Vec<(String, Kernel)> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../rfx-opt/tests/corpus"));
    read_corpus(dir)
        .expect("corpus dir")
        .into_iter()
        .map(|(name, text)| {
            let kernel = hir::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, kernel)
        })
        .collect()
}
