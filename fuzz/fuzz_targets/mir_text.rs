//! The MIR text parser: no panic, hang or unbounded allocation; a parsed program round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(program) = rfx_ir::mir::parse(text) {
        let printed = program.to_string();
        let again = rfx_ir::mir::parse(&printed).expect("printed MIR parses");
        assert_eq!(again.to_string(), printed, "MIR text round trip");
    }
});
