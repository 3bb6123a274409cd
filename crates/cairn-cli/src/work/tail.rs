//! [`Tail`]: the last few KiB of a command's stderr, which become the job's error text when the command fails.
//! Copying stderr through to the manager's own stderr is `runner`'s business.

use std::collections::VecDeque;

/// How much of a command's stderr is kept as its error text.
pub(crate) const TAIL_BYTES: usize = 4096;

/// The last `capacity` bytes written to it.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// Whether earlier bytes were dropped, so the text starts mid-stream.
    is_cut: bool,
}

impl Tail {
    /// An empty tail that keeps at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Self {
        Tail {
            bytes: VecDeque::with_capacity(capacity),
            capacity,
            is_cut: false,
        }
    }

    /// Appends `chunk`, dropping the oldest bytes beyond the capacity.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let keep = &chunk[chunk.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.capacity);
        if overflow > 0 || keep.len() < chunk.len() {
            self.is_cut = true;
        }
        self.bytes.drain(..overflow.min(self.bytes.len()));
        self.bytes.extend(keep);
    }

    /// The kept bytes as text, trimmed, starting with `…` when older output was dropped.
    pub(crate) fn text(&self) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let mut start = 0;
        if self.is_cut {
            // The cut may have split a UTF-8 sequence: skip its continuation bytes rather than show a U+FFFD.
            while bytes
                .get(start)
                .is_some_and(|b| b & 0b1100_0000 == 0b1000_0000)
            {
                start += 1;
            }
        }
        let text = String::from_utf8_lossy(&bytes[start..]);
        let text = text.trim();
        if self.is_cut && !text.is_empty() {
            format!("…{text}")
        } else {
            text.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(capacity: usize, chunks: &[&[u8]], expected: &str) {
        let mut tail = Tail::new(capacity);
        for chunk in chunks {
            tail.push(chunk);
        }
        assert_eq!(tail.text(), expected, "chunks {chunks:?}");
    }

    #[test]
    fn keeps_the_last_bytes_and_marks_a_cut() {
        check(8, &[], "");
        check(8, &[b"boom\n"], "boom");
        check(8, &[b"  a", b"b  "], "ab");
        check(8, &[b"0123456789"], "…23456789");
        check(8, &[b"01234", b"56789"], "…23456789");
        check(8, &[b"0123", b"4567"], "01234567");
        check(8, &[b"0123", b"4567", b"8"], "…12345678");
    }

    #[test]
    fn never_starts_with_half_a_character() {
        // "é" is two bytes; cutting after its first byte leaves a continuation byte at the front.
        check(3, &["éab".as_bytes()], "…ab");
        check(4, &["xéab".as_bytes()], "…éab");
    }
}
