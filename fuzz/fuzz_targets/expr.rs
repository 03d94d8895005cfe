//! The expression front end: the first line is a signature (`x=f32[3],y=f32[3]`), the rest an
//! expression. No panic, hang or unbounded allocation; what compiles is a verified kernel.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (signature, source) = text.split_once('\n').unwrap_or(("x=f32[4]", text));
    let Ok(signature) = signature.parse::<rfx::expr::Signature>() else { return };
    // Shapes are bounded by the parser of types, but a fuzzer can still ask for huge ones:
    // compiling is symbolic and allocates nothing per element, so any size is fine here.
    if let Ok(kernel) = rfx::expr::compile(source, &signature) {
        rfx_ir::hir::verify(&kernel).expect("a compiled expression verifies");
    }
});
