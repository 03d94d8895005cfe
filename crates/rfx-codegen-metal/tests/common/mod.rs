//! Helpers shared by the test files: lowering HIR text, running on the metal backend, comparing.

#![allow(dead_code, reason = "each test file uses a subset")]

use std::sync::OnceLock;

use rfx_codegen_metal::MetalBackend;
use rfx_ir::hir::Kernel;
use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, Scalar};
use rfx_lower::{Backend, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// `true` when a wgpu adapter exists (printing it once); otherwise prints why the calling test
/// is skipped and returns `false`.
pub(crate) fn adapter_or_skip() -> bool {
    static ADAPTER: OnceLock<Result<String, String>> = OnceLock::new();
    let adapter = ADAPTER.get_or_init(|| {
        let found = MetalBackend.adapter().map_err(|e| e.to_string());
        match &found {
            Ok(name) => eprintln!("metal backend runs on: {name}"),
            Err(reason) => eprintln!("no wgpu adapter: {reason}"),
        }
        found
    });
    match adapter {
        Ok(_) => true,
        Err(reason) => {
            eprintln!("skipped: no wgpu adapter ({reason})");
            false
        }
    }
}

pub(crate) fn parse(text: &str) -> Kernel {
    rfx_ir::hir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

pub(crate) fn lower_kernel(kernel: &Kernel) -> LirProgram {
    let (mir, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

/// Runs `lir` on the metal backend.
pub(crate) fn run_metal(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let compiled = MetalBackend
        .compile(lir, &Default::default())
        .unwrap_or_else(|e| panic!("compile: {e}\n{lir}"));
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    compiled
        .run_to_new(&views)
        .unwrap_or_else(|e| panic!("run: {e}\n{lir}"))
}

/// Bit-for-bit equality, any NaN equal to any NaN.
pub(crate) fn same_values(a: &Array, b: &Array) -> Option<usize> {
    if a.shape() != b.shape() || a.dtype() != b.dtype() {
        return Some(usize::MAX);
    }
    (0..a.data().len()).find(|&i| {
        let (x, y) = (a.get(i), b.get(i));
        let same = match (x, y) {
            (Some(Scalar::F32(x)), Some(Scalar::F32(y))) => {
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            }
            _ => x == y,
        };
        !same
    })
}
