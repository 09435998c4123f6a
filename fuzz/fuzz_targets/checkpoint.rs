//! A profile checkpoint's bytes (`placer_profile::checkpoint::decode`): the header, the
//! format version and the bincode body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = placer_profile::checkpoint::decode(data, Path::new("fuzz.ckpt"));
});
