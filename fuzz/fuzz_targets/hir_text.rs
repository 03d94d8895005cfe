//! The HIR text parser: no panic, hang or unbounded allocation on any input; whatever parses
//! (and verifies) prints back to text that parses to the same kernel.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = rfx_ir::hir::parse_unverified(text);
    if let Ok(kernel) = rfx_ir::hir::parse(text) {
        let printed = kernel.to_string();
        let again = rfx_ir::hir::parse(&printed).expect("printed HIR parses");
        assert_eq!(again.to_string(), printed, "HIR text round trip");
    }
});
