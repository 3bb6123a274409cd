//! The harness of the `bedrock_frames` fuzz target (`fuzz/` at the repository's root runs it under libFuzzer; see
//! `docs/fuzzing.md`): bytes read off a connection as `connection.rs` reads them. Not part of the API: `mod.rs`
//! exposes it hidden, as `__fuzz`, for the fuzz target alone.
//!
//! The first two bytes of the input choose the limits and how the rest arrives; the rest is what the client sent,
//! any number of pipelined requests. It is read twice: in chunks, by one [`RequestReader`] kept across reads as a
//! connection keeps it, and whole, request after request, each by a fresh reader. Both must see the same requests
//! and end the same way: a request must not depend on how TCP happened to cut it.

use crate::bedrock::escape::{escape, unescape};
use crate::bedrock::frame::{FrameError, FrameLimits, Request, RequestReader};

/// How a stream of bytes was read: the requests, then an error or the bytes left waiting for more.
#[derive(Debug, PartialEq, Eq)]
struct Reading {
    requests: Vec<Request>,
    end: Result<Vec<u8>, FrameError>,
}

/// The `bedrock_frames` target.
pub fn frames(data: &[u8]) {
    let [limits, cuts, stream @ ..] = data else {
        return;
    };
    // Small limits, so that inputs reach them: headers up to 1 KiB, bodies up to 255 bytes.
    let limits = FrameLimits {
        max_header_bytes: usize::from(limits & 0x0f) * 64 + usize::from(limits >> 4),
        max_body_bytes: usize::from(*limits),
    };
    let chunked = read_in_chunks(stream, limits, *cuts);
    let whole = read_whole(stream, limits);
    assert_eq!(chunked, whole, "read in chunks (cuts {cuts}) and whole");
    for request in &chunked.requests {
        assert!(!request.verb.is_empty());
        assert!(request.body.len() <= limits.max_body_bytes);
        for (_, value) in request.headers.iter() {
            // A value goes back out in a response escaped, and must reach the client as it is.
            assert_eq!(unescape(&escape(value)), value);
        }
    }
}

/// Reads as a connection does: bytes arrive in chunks (sizes from `cuts`: 1 to 16 bytes, cycling through its
/// bits), and after each every complete request is taken off the front of the buffer.
fn read_in_chunks(stream: &[u8], limits: FrameLimits, cuts: u8) -> Reading {
    let mut reader = RequestReader::new(limits);
    let mut buffer = Vec::new();
    let mut requests = Vec::new();
    let mut rest = stream;
    let mut turn = 0u32;
    while !rest.is_empty() {
        let size = 1 + usize::from(cuts.rotate_left(turn) & 0x0f);
        turn += 1;
        let (chunk, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        buffer.extend_from_slice(chunk);
        loop {
            match reader.next(&buffer) {
                Ok(Some((request, used))) => {
                    assert!(
                        used > 0 && used <= buffer.len(),
                        "used {used} of {}",
                        buffer.len()
                    );
                    buffer.drain(..used);
                    requests.push(request);
                }
                Ok(None) => break,
                Err(e) => {
                    return Reading {
                        requests,
                        end: Err(e),
                    };
                }
            }
        }
    }
    Reading {
        requests,
        end: Ok(buffer),
    }
}

/// Reads everything at once, each request with a fresh reader.
fn read_whole(stream: &[u8], limits: FrameLimits) -> Reading {
    let mut requests = Vec::new();
    let mut rest = stream;
    loop {
        match RequestReader::new(limits).next(rest) {
            Ok(Some((request, used))) => {
                rest = &rest[used..];
                requests.push(request);
            }
            Ok(None) => {
                return Reading {
                    requests,
                    end: Ok(rest.to_vec()),
                };
            }
            Err(e) => {
                return Reading {
                    requests,
                    end: Err(e),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bedrock_frames_corpus_replays_without_a_failure() {
        cairn::__fuzz::replay_corpus("bedrock_frames", frames);
    }
}
