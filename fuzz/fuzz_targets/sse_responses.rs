//! The SSE parser and the Responses event decoder on an arbitrary body, cut into network chunks at
//! arbitrary points (the first byte picks the chunk size). Never panics; the same body gives the
//! same text and verdict however it is chunked.
#![no_main]

use handoff_nvim::core::provider::fuzzing::chunking_keeps_the_verdict;
use handoff_nvim::core::provider::Api;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, body)) = data.split_first() else { return };
    if let Err(e) = chunking_keeps_the_verdict(Api::OpenaiResponses, body, usize::from(size % 64) + 1) {
        panic!("{e}");
    }
});
