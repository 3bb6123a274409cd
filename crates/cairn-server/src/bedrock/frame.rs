//! Framing of the Bedrock text protocol (reference §1.2, §1.3): reading one request out of a connection's buffer,
//! and writing a response. Pure functions over bytes, so the connection loop only moves bytes and the hostile
//! cases (partial, oversized, garbage) are tested here.
//!
//! A request is a method line, `Name: value` header lines, a blank line, and a body of `Content-Length` bytes (or
//! chunked). Line ends may be `\r\n`, `\n`, `\r` or `\n\r`; the header block ends at `\r\n\r\n` or `\n\n`.

use std::collections::BTreeMap;

use crate::bedrock::escape::{escape, unescape};

/// How much a request may hold; beyond it the connection gets an error and is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// The method line and headers, in bytes.
    pub max_header_bytes: usize,
    /// The body, in bytes.
    pub max_body_bytes: usize,
}

impl Default for FrameLimits {
    /// 1 MiB of headers (a `CreateJobs` carries its jobs in a header) and 1 MiB of body (Jobs never reads it).
    fn default() -> Self {
        FrameLimits {
            max_header_bytes: 1024 * 1024,
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// Why a request could not be framed. Each is answered with a status line, then the connection is closed: after
/// a framing error there is no telling where the next request starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The header block grew past the limit without ending.
    HeadersTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body is larger than the limit.
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// `Content-Length` is not a decimal number.
    BadContentLength(String),
    /// A chunked body is malformed.
    BadChunk,
    /// The method line is empty.
    NoMethod,
}

impl FrameError {
    /// The status line this error is answered with.
    pub fn status_line(&self) -> String {
        match self {
            FrameError::HeadersTooLarge { limit } => {
                format!("413 Request headers larger than {limit} bytes")
            }
            FrameError::BodyTooLarge { limit } => {
                format!("413 Request body larger than {limit} bytes")
            }
            FrameError::BadContentLength(value) => {
                format!(
                    "400 Malformed Content-Length {:?}",
                    value.chars().take(40).collect::<String>()
                )
            }
            FrameError::BadChunk => "400 Malformed chunked body".to_owned(),
            FrameError::NoMethod => "400 Missing method line".to_owned(),
        }
    }
}

/// Header names compared without case, as Bedrock does; the last of repeated headers wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(BTreeMap<String, String>);

impl Headers {
    /// The value of `name` (any case), unescaped; `Some("")` for a header sent with no value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    /// Whether `name` was sent, even empty.
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(&name.to_ascii_lowercase())
    }

    /// Every header, names lower-cased.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Headers from name and value pairs (values already unescaped), as CreateJobs reads its jobs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Headers {
        Headers(
            pairs
                .into_iter()
                .map(|(name, value)| (name.to_ascii_lowercase(), value))
                .collect(),
        )
    }
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The whole first line, such as `GetJob / HTTP/1.1`.
    pub method_line: String,
    /// The verb: the method line up to its first space, as sent (match it without case).
    pub verb: String,
    /// The headers, values unescaped.
    pub headers: Headers,
    /// The body (the Jobs commands never read it).
    pub body: Vec<u8>,
}

/// Reads requests out of a connection's buffer, one at a time, remembering its progress between calls so that a
/// client sending a byte at a time costs linear work, not quadratic.
#[derive(Debug)]
pub struct RequestReader {
    limits: FrameLimits,
    /// How far the search for the end of the header block got.
    scanned: usize,
    /// The request whose headers are read and whose body is still arriving.
    head: Option<Head>,
}

#[derive(Debug)]
struct Head {
    request: Request,
    body_start: usize,
    body: BodyProgress,
}

#[derive(Debug)]
enum BodyProgress {
    /// `Content-Length` bytes (0 without the header).
    Length(usize),
    /// A chunked body: where decoding stands, relative to the body's start.
    Chunked { at: usize },
}

impl RequestReader {
    /// A reader for a new connection.
    pub fn new(limits: FrameLimits) -> Self {
        RequestReader {
            limits,
            scanned: 0,
            head: None,
        }
    }

    /// Reads the next request from the start of `buffer` (which holds what the connection sent since the last
    /// request, and grows between calls).
    ///
    /// Returns `Ok(None)` while the request is incomplete, or `Ok(Some((request, consumed)))` with the number of
    /// bytes it took: drop those from the buffer, the rest is the next pipelined request.
    ///
    /// # Errors
    /// A [`FrameError`] when the bytes cannot be a request within the limits.
    pub fn next(&mut self, buffer: &[u8]) -> Result<Option<(Request, usize)>, FrameError> {
        if self.head.is_none() {
            let Some(head) = self.read_head(buffer)? else {
                return Ok(None);
            };
            self.head = Some(head);
        }
        let head = self.head.as_mut().expect("set just above");
        let rest = &buffer[head.body_start..];
        let used = match &mut head.body {
            BodyProgress::Length(length) => {
                if rest.len() < *length {
                    return Ok(None);
                }
                head.request.body = rest[..*length].to_vec();
                *length
            }
            BodyProgress::Chunked { at } => {
                match dechunk(rest, at, &mut head.request.body, self.limits.max_body_bytes)? {
                    Some(used) => used,
                    None => return Ok(None),
                }
            }
        };
        let head = self.head.take().expect("a head is being read");
        self.scanned = 0;
        Ok(Some((head.request, head.body_start + used)))
    }

    fn read_head(&mut self, buffer: &[u8]) -> Result<Option<Head>, FrameError> {
        // The terminator may straddle what was scanned and what is new.
        let from = self.scanned.saturating_sub(3);
        let Some((header_len, body_start)) = header_block_end(buffer, from) else {
            self.scanned = buffer.len();
            // Up to three bytes of the terminator may have arrived without the rest: only beyond those is the
            // block sure to outgrow the limit, however the bytes are cut.
            if buffer.len() > self.limits.max_header_bytes.saturating_add(3) {
                return Err(FrameError::HeadersTooLarge {
                    limit: self.limits.max_header_bytes,
                });
            }
            return Ok(None);
        };
        if header_len > self.limits.max_header_bytes {
            return Err(FrameError::HeadersTooLarge {
                limit: self.limits.max_header_bytes,
            });
        }
        // Bytes that are not UTF-8 become U+FFFD: garbage then reads as an unknown verb or a bad value, never a
        // panic.
        let text = String::from_utf8_lossy(&buffer[..header_len]);
        let mut lines = split_lines(&text).into_iter();
        let method_line = lines.next().unwrap_or_default().to_owned();
        let verb = method_line.split(' ').next().unwrap_or_default().to_owned();
        if verb.is_empty() {
            return Err(FrameError::NoMethod);
        }
        let headers = parse_headers(lines);
        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            BodyProgress::Chunked { at: 0 }
        } else {
            // Without Content-Length the body is empty. (Bedrock takes everything left in the buffer, which
            // swallows pipelined requests; see docs/bedrock.md.)
            let length = match headers.get("content-length") {
                None => 0,
                Some(text) => text
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| FrameError::BadContentLength(text.to_owned()))?,
            };
            if length > self.limits.max_body_bytes {
                return Err(FrameError::BodyTooLarge {
                    limit: self.limits.max_body_bytes,
                });
            }
            BodyProgress::Length(length)
        };
        Ok(Some(Head {
            request: Request {
                method_line,
                verb,
                headers,
                body: Vec::new(),
            },
            body_start,
            body,
        }))
    }
}

/// Reads one whole request from the start of `buffer`, as a fresh [`RequestReader`] would.
///
/// # Errors
/// As [`RequestReader::next`].
pub fn parse(buffer: &[u8], limits: &FrameLimits) -> Result<Option<(Request, usize)>, FrameError> {
    RequestReader::new(*limits).next(buffer)
}

/// Where the header block ends, searching from `from`: its length without the terminator, and where the body
/// starts.
fn header_block_end(buffer: &[u8], from: usize) -> Option<(usize, usize)> {
    let from = from.min(buffer.len());
    let crlf = find(&buffer[from..], b"\r\n\r\n").map(|at| (from + at, from + at + 4));
    let lf = find(&buffer[from..], b"\n\n").map(|at| (from + at, from + at + 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits on any of `\r\n`, `\n\r`, `\n` and `\r`.
fn split_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\r' || c == b'\n' {
            lines.push(&text[start..i]);
            let pair = if c == b'\r' { b'\n' } else { b'\r' };
            i += if bytes.get(i + 1) == Some(&pair) {
                2
            } else {
                1
            };
            start = i;
        } else {
            i += 1;
        }
    }
    lines.push(&text[start..]);
    lines
}

/// Header lines to headers: `Name: value` (name without trailing spaces, value without surrounding spaces), a line
/// starting with a space or tab continues the previous value as it stands, and values are unescaped at the end.
fn parse_headers<'a>(lines: impl Iterator<Item = &'a str>) -> Headers {
    let mut raw: Vec<(String, String)> = Vec::new();
    for line in lines {
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = raw.last_mut() {
                value.push_str(line);
            }
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            // Not a header; Bedrock ignores such lines too.
            continue;
        };
        let name = name.trim_end_matches(' ');
        if name.is_empty() {
            continue;
        }
        raw.push((
            name.to_ascii_lowercase(),
            value.trim_matches(' ').to_owned(),
        ));
    }
    Headers(
        raw.into_iter()
            .map(|(name, value)| (name, unescape(&value)))
            .collect(),
    )
}

/// The longest chunk size line, extensions included: a size is a few hex digits, and a line longer than this is
/// refused however it arrives.
const MAX_CHUNK_LINE: usize = 64;

/// Goes on decoding a chunked body from `at` (relative to the body's start), appending to `body`: how many bytes
/// the whole body took once it is complete, `None` while it is not (`at` then marks the progress).
fn dechunk(
    buffer: &[u8],
    at: &mut usize,
    body: &mut Vec<u8>,
    limit: usize,
) -> Result<Option<usize>, FrameError> {
    loop {
        let Some(line_end) = find(&buffer[*at..], b"\r\n") else {
            // Its CR may have arrived without its LF: only past that is the line sure to be too long.
            return if buffer.len() - *at > MAX_CHUNK_LINE + 1 {
                Err(FrameError::BadChunk)
            } else {
                Ok(None)
            };
        };
        if line_end > MAX_CHUNK_LINE {
            return Err(FrameError::BadChunk);
        }
        let size_text = String::from_utf8_lossy(&buffer[*at..*at + line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| FrameError::BadChunk)?;
        let data = *at + line_end + 2;
        if size == 0 {
            // Trailers are not supported: the body ends with an empty line.
            if buffer.len() < data + 2 {
                return Ok(None);
            }
            if &buffer[data..data + 2] != b"\r\n" {
                return Err(FrameError::BadChunk);
            }
            return Ok(Some(data + 2));
        }
        if body.len().saturating_add(size) > limit {
            return Err(FrameError::BodyTooLarge { limit });
        }
        if buffer.len() < data + size + 2 {
            return Ok(None);
        }
        if &buffer[data + size..data + size + 2] != b"\r\n" {
            return Err(FrameError::BadChunk);
        }
        body.extend_from_slice(&buffer[data..data + size]);
        *at = data + size + 2;
    }
}

/// A response: a status line, headers, a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Such as `200 OK` or `402 Missing name`.
    pub status: String,
    /// Headers other than `Content-Length`, which is always added last.
    pub headers: Vec<(String, String)>,
    /// The body: a JSON object or nothing.
    pub body: Vec<u8>,
    /// The jobs this response hands to the client (GetJob): if it cannot be delivered, they are given back.
    pub handed_out: Vec<cairn::JobId>,
}

impl Response {
    /// A response with no body.
    pub fn status(status: impl Into<String>) -> Response {
        Response {
            status: status.into(),
            headers: Vec::new(),
            body: Vec::new(),
            handed_out: Vec::new(),
        }
    }

    /// A `200 OK` with a JSON body.
    pub fn json(body: String) -> Response {
        Response {
            status: "200 OK".to_owned(),
            headers: Vec::new(),
            body: body.into_bytes(),
            handed_out: Vec::new(),
        }
    }

    /// The bytes on the wire: status line, headers sorted by name without case and escaped, `Content-Length`
    /// (always, and always last), a blank line, the body; every line ends in CRLF.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut headers: Vec<&(String, String)> = self
            .headers
            .iter()
            .filter(|(name, _)| !name.eq_ignore_ascii_case("content-length"))
            .collect();
        headers.sort_by_key(|(name, _)| name.to_ascii_lowercase());
        let mut out = Vec::with_capacity(64 + self.body.len());
        out.extend_from_slice(escape(&self.status).as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in headers {
            out.extend_from_slice(format!("{name}: {}\r\n", escape(value)).as_bytes());
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.body.len()).as_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

/// A JSON object with its keys in Bedrock's order (sorted without case), as its responses have them.
pub fn json_object(fields: Vec<(&str, serde_json::Value)>) -> String {
    let mut fields = fields;
    fields.sort_by_key(|(name, _)| name.to_ascii_lowercase());
    let mut out = String::from("{");
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::String((*name).to_owned()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn parse_one(text: &str) -> Request {
        let (request, consumed) = parse(text.as_bytes(), &FrameLimits::default())
            .unwrap()
            .expect("a complete request");
        assert_eq!(consumed, text.len(), "{text:?}");
        request
    }

    #[test]
    fn reads_the_verb_headers_and_body() {
        let r = parse_one("GetJob / HTTP/1.1\r\nName: foo\r\nCONTENT-length: 3\r\n\r\nabc");
        assert_eq!(r.verb, "GetJob");
        assert_eq!(r.method_line, "GetJob / HTTP/1.1");
        assert_eq!(r.headers.get("name"), Some("foo"));
        assert_eq!(r.headers.get("NAME"), Some("foo"));
        assert_eq!(r.body, b"abc");
    }

    #[test]
    fn accepts_every_line_end_and_both_block_ends() {
        for text in [
            "GetJob\nname: a\ntimeout: 5\n\n",
            "GetJob\rname: a\rtimeout: 5\r\n\r\n",
            "GetJob\n\rname: a\n\rtimeout: 5\r\n\r\n",
        ] {
            let r = parse_one(text);
            assert_eq!(
                (r.headers.get("name"), r.headers.get("timeout")),
                (Some("a"), Some("5")),
                "{text:?}"
            );
        }
    }

    #[test]
    fn header_values_are_trimmed_of_spaces_unescaped_and_the_last_wins() {
        let r = parse_one(
            "CreateJob\r\nname :  first  \r\nname: second\r\ndata: {\"a\":\"x\\\\\"y\"}\r\nempty:\r\ntabbed:\tkeep\t\r\n\r\n",
        );
        assert_eq!(r.headers.get("name"), Some("second"));
        assert_eq!(r.headers.get("data"), Some(r#"{"a":"x\"y"}"#));
        assert_eq!(r.headers.get("empty"), Some(""));
        assert!(r.headers.contains("empty"));
        assert_eq!(r.headers.get("tabbed"), Some("\tkeep\t"));
        assert_eq!(r.headers.get("missing"), None);
    }

    #[test]
    fn a_line_starting_with_whitespace_continues_the_previous_value() {
        let r = parse_one("CreateJob\r\ndata: {\"a\":\r\n 1}\r\n\r\n");
        assert_eq!(r.headers.get("data"), Some("{\"a\": 1}"));
    }

    #[test]
    fn pipelined_requests_are_read_one_at_a_time() {
        let two = "GetJob\r\nname: a\r\nContent-Length: 0\r\n\r\nQueryJob\r\njobID: 5\r\n\r\n";
        let (first, used) = parse(two.as_bytes(), &FrameLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(first.verb, "GetJob");
        let (second, rest) = parse(&two.as_bytes()[used..], &FrameLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            (second.verb.as_str(), second.headers.get("jobid")),
            ("QueryJob", Some("5"))
        );
        assert_eq!(used + rest, two.len());
    }

    #[test]
    fn incomplete_requests_wait_for_more() {
        let limits = FrameLimits::default();
        for partial in [
            "",
            "GetJob",
            "GetJob\r\nname: a\r\n",
            "X\r\nContent-Length: 5\r\n\r\nabc",
        ] {
            assert_eq!(parse(partial.as_bytes(), &limits), Ok(None), "{partial:?}");
        }
    }

    #[test]
    fn oversized_and_malformed_requests_are_errors() {
        let limits = FrameLimits {
            max_header_bytes: 64,
            max_body_bytes: 8,
        };
        let endless = "GetJob\r\nname: ".to_owned() + &"a".repeat(100);
        assert_eq!(
            parse(endless.as_bytes(), &limits),
            Err(FrameError::HeadersTooLarge { limit: 64 })
        );
        assert_eq!(
            parse(b"X\r\nContent-Length: 9\r\n\r\n", &limits),
            Err(FrameError::BodyTooLarge { limit: 8 })
        );
        assert_eq!(
            parse(b"X\r\nContent-Length: -1\r\n\r\n", &limits),
            Err(FrameError::BadContentLength("-1".into()))
        );
        assert_eq!(parse(b"\r\n\r\n", &limits), Err(FrameError::NoMethod));
        assert_eq!(
            FrameError::HeadersTooLarge { limit: 64 }.status_line(),
            "413 Request headers larger than 64 bytes"
        );
    }

    #[test]
    fn regression_24_a_header_block_at_the_limit_is_read_however_it_arrives() {
        // See: 24
        let limits = FrameLimits {
            max_header_bytes: 18,
            max_body_bytes: 8,
        };
        // The method line and a header are 18 bytes, then the terminator.
        let text = b"GetJob\r\nname: abcd\r\n\r\n";
        let mut reader = RequestReader::new(limits);
        for end in 0..text.len() {
            assert_eq!(reader.next(&text[..end]), Ok(None), "{end} bytes");
        }
        let (request, used) = reader.next(text).unwrap().unwrap();
        assert_eq!(
            (request.headers.get("name"), used),
            (Some("abcd"), text.len())
        );
        let longer = b"GetJob\r\nname: abcde\r\n\r";
        assert_eq!(
            RequestReader::new(limits).next(longer),
            Err(FrameError::HeadersTooLarge { limit: 18 })
        );
    }

    #[test]
    fn regression_24_a_long_chunk_size_line_is_refused_however_it_arrives() {
        // See: 24
        let limits = FrameLimits::default();
        let head = "X\r\nTransfer-Encoding: chunked\r\n\r\n";
        let line =
            |extension: usize| format!("{head}3;{}\r\nabc\r\n0\r\n\r\n", "e".repeat(extension));
        // 64 bytes of size line are read whole and a byte at a time.
        let fits = line(62);
        let mut reader = RequestReader::new(limits);
        for end in 0..fits.len() {
            assert_eq!(
                reader.next(&fits.as_bytes()[..end]),
                Ok(None),
                "{end} bytes"
            );
        }
        assert_eq!(
            reader.next(fits.as_bytes()).unwrap().unwrap().0.body,
            b"abc"
        );
        // 65 are refused whole, and as soon as they are sure to be that long.
        let long = line(63);
        assert_eq!(parse(long.as_bytes(), &limits), Err(FrameError::BadChunk));
        let mut reader = RequestReader::new(limits);
        let refused = (0..long.len())
            .find(|&end| reader.next(&long.as_bytes()[..end]).is_err())
            .unwrap();
        assert_eq!(refused, head.len() + 65 + 1);
    }

    #[test]
    fn chunked_bodies_are_decoded() {
        let text = "X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext\r\nde\r\n0\r\n\r\nNext\r\n\r\n";
        let (r, used) = parse(text.as_bytes(), &FrameLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(r.body, b"abcde");
        assert_eq!(&text[used..], "Next\r\n\r\n");
        let partial = "X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab";
        assert_eq!(parse(partial.as_bytes(), &FrameLimits::default()), Ok(None));
        let bad = "X\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n";
        assert_eq!(
            parse(bad.as_bytes(), &FrameLimits::default()),
            Err(FrameError::BadChunk)
        );
    }

    #[test]
    fn responses_sort_headers_escape_values_and_end_with_content_length() {
        let response = Response {
            status: "200 OK".into(),
            headers: vec![
                ("nodeName".into(), "cairn".into()),
                ("Content-Length".into(), "999".into()),
                ("commitCount".into(), "line\nbreak".into()),
            ],
            body: b"{}".to_vec(),
            handed_out: Vec::new(),
        };
        assert_eq!(
            String::from_utf8(response.to_bytes()).unwrap(),
            "200 OK\r\ncommitCount: line\\nbreak\r\nnodeName: cairn\r\nContent-Length: 2\r\n\r\n{}"
        );
        assert_eq!(
            Response::status("404 No job found").to_bytes(),
            b"404 No job found\r\nContent-Length: 0\r\n\r\n"
        );
    }

    #[test]
    fn json_objects_have_their_keys_sorted_without_case() {
        let text = json_object(vec![
            ("name", json!("a")),
            ("jobID", json!(5)),
            ("Zeta", json!(null)),
            ("data", json!({"b": 1})),
        ]);
        assert_eq!(text, r#"{"data":{"b":1},"jobID":5,"name":"a","Zeta":null}"#);
    }

    #[test]
    fn a_reader_fed_a_byte_at_a_time_reads_the_same_requests() {
        let text = "CreateJob\r\nname: a\r\nContent-Length: 2\r\n\r\nokX\r\nTransfer-Encoding: chunked\r\n\r\n\
                    2\r\nab\r\n0\r\n\r\n";
        let mut reader = RequestReader::new(FrameLimits::default());
        let mut buffer = Vec::new();
        let mut got = Vec::new();
        for byte in text.bytes() {
            buffer.push(byte);
            if let Some((request, used)) = reader.next(&buffer).unwrap() {
                buffer.drain(..used);
                got.push((request.verb, request.body));
            }
        }
        assert!(buffer.is_empty());
        assert_eq!(
            got,
            [
                ("CreateJob".to_owned(), b"ok".to_vec()),
                ("X".to_owned(), b"ab".to_vec())
            ]
        );
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&bytes, &FrameLimits { max_header_bytes: 256, max_body_bytes: 64 });
        }

        #[test]
        fn a_request_split_anywhere_is_incomplete_until_whole(
            value in "[a-zA-Z0-9 {}\":,]{0,40}",
            cut in 0usize..80,
        ) {
            let text = format!("CreateJob\r\nname: job\r\ndata: {value}\r\nContent-Length: 2\r\n\r\nok");
            let cut = cut.min(text.len());
            let limits = FrameLimits::default();
            if cut < text.len() {
                prop_assert_eq!(parse(&text.as_bytes()[..cut], &limits), Ok(None));
            }
            let (request, used) = parse(text.as_bytes(), &limits).unwrap().unwrap();
            prop_assert_eq!(used, text.len());
            prop_assert_eq!(request.headers.get("data"), Some(value.trim_matches(' ')));
        }
    }
}
