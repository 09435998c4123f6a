//! An hwloc XML export's text (`placer_host::HostTopology::from_xml_str`): hwloc's own
//! parser, then placer's reading of the topology and its classification of the nodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = placer_host::HostTopology::from_xml_str(text, Path::new("fuzz.xml"));
    }
});
