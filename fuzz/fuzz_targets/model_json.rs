//! model.json text into a validated model (`placer_ir::parse_model`), as `load_model`
//! reads it: bytes that are not UTF-8 never reach the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = placer_ir::parse_model(text);
    }
});
