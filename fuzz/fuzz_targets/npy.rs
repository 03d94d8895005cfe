//! The `.npy` reader of the `rfx` command: no panic, hang or allocation beyond the input's
//! size on any bytes. The reader is included by path: it depends on npyz and rfx-ir only.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/rfx-cli/src/npy_read.rs"]
mod npy_read;

fuzz_target!(|data: &[u8]| {
    if let Ok(array) = npy_read::read_bytes(data) {
        let bytes = array.data().len() * array.dtype().size_bytes();
        assert!(bytes <= data.len(), "an array larger than its file");
    }
});
