//! The SSE parser and the anthropic event decoder on an arbitrary body, cut into network chunks at
//! arbitrary points (the first byte picks the chunk size). Never panics; the same body gives the
//! same text and verdict however it is chunked.
#![no_main]

use handoff_nvim::provider::fuzzing::decode_body;
use handoff_nvim::provider::Api;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, body)) = data.split_first() else { return };
    let size = usize::from(size % 64) + 1;
    let chunked: Vec<bytes::Bytes> = body.chunks(size).map(bytes::Bytes::copy_from_slice).collect();
    let whole = vec![bytes::Bytes::copy_from_slice(body)];
    let a = decode_body(Api::Anthropic, chunked);
    let b = decode_body(Api::Anthropic, whole);
    match (&a, &b) {
        (Ok((ta, ea)), Ok((tb, eb))) => {
            assert_eq!(ta, tb);
            assert_eq!(ea, eb);
        }
        (Err(_), Err(_)) => {}
        _ => panic!("chunking changed the verdict: {a:?} vs {b:?}"),
    }
});
