//! One HTTP/1.1 exchange on a connection: write a request, read the one answer to it.
//!
//! It runs inside the caller's own future, so the request is written the moment the pipeline
//! asks for it and the caller is woken by its own socket when the answer arrives. (hyper's client
//! hands each request to a task per connection over a channel, and the answer back over another;
//! on a loaded server each hand-off waits behind every other task due in that turn of the loop.)
//!
//! Answers are framed by `Content-Length`, chunked transfer coding or the end of the connection;
//! interim (1xx) answers are skipped. Only a 2xx answer's body is read: for any other status the
//! status is the whole outcome, and the connection is not kept.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Answer heads are small; a node sending more than this is not speaking HTTP to us.
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 100;
const READ_CHUNK: usize = 8 * 1024;

pub struct Answer {
    pub status: u16,
    /// The body of a 2xx answer; empty for any other status.
    pub body: Bytes,
    /// Whether the connection may carry another request.
    pub reusable: bool,
}

pub enum Failed {
    /// The connection ended before any byte of an answer: on a kept connection, the node closed
    /// it while the request was on its way, and nothing was processed.
    Unanswered,
    /// The answer is larger than the size bound.
    TooLarge,
    /// Anything else: reset mid-answer, truncated, not HTTP.
    Broken(String),
}

/// Write `request` on `connection` and read the answer, its body at most `max_body` bytes.
pub async fn exchange<C>(
    connection: &mut C,
    request: &[u8],
    max_body: usize,
) -> Result<Answer, Failed>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    if let Err(error) = write_all(connection, request).await {
        return Err(match error.kind() {
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                Failed::Unanswered
            }
            _ => Failed::Broken(error.to_string()),
        });
    }
    let mut reader = Reader { connection, buffer: BytesMut::with_capacity(READ_CHUNK), read: 0 };
    loop {
        let head = reader.head().await?;
        if (100..200).contains(&head.status) && head.status != 101 {
            continue; // an interim answer: the real one follows on the same connection
        }
        if !(200..300).contains(&head.status) {
            return Ok(Answer { status: head.status, body: Bytes::new(), reusable: false });
        }
        let (body, framed) = match head.framing {
            Framing::Empty => (Bytes::new(), true),
            Framing::Length(length) => (reader.exactly(length, max_body).await?, true),
            Framing::Chunked => (reader.chunked(max_body).await?, true),
            Framing::UntilClose => (reader.until_close(max_body).await?, false),
        };
        // Bytes past the answer mean the node is out of step with us: never reuse that.
        let reusable = framed && head.keep_alive && reader.buffer.is_empty();
        return Ok(Answer { status: head.status, body, reusable });
    }
}

async fn write_all<C: AsyncWrite + Unpin>(connection: &mut C, bytes: &[u8]) -> std::io::Result<()> {
    connection.write_all(bytes).await?;
    connection.flush().await // TLS holds records back until flushed
}

enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

struct Head {
    status: u16,
    framing: Framing,
    keep_alive: bool,
}

struct Reader<'c, C> {
    connection: &'c mut C,
    buffer: BytesMut,
    /// Bytes of the answer received so far: none means the node never began one.
    read: usize,
}

impl<C: AsyncRead + Unpin> Reader<'_, C> {
    /// Read more into the buffer; an end of the connection is a failure here.
    async fn fill(&mut self) -> Result<(), Failed> {
        self.buffer.reserve(READ_CHUNK);
        match self.connection.read_buf(&mut self.buffer).await {
            Ok(0) if self.read == 0 => Err(Failed::Unanswered),
            Ok(0) => Err(Failed::Broken("connection closed mid-answer".into())),
            Ok(n) => {
                self.read += n;
                Ok(())
            }
            Err(error) if self.read == 0 && is_reset(&error) => Err(Failed::Unanswered),
            Err(error) => Err(Failed::Broken(error.to_string())),
        }
    }

    async fn head(&mut self) -> Result<Head, Failed> {
        loop {
            if !self.buffer.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut response = httparse::Response::new(&mut headers);
                match response.parse(&self.buffer) {
                    Ok(httparse::Status::Complete(length)) => {
                        let head = read_head(&response)?;
                        self.buffer.advance(length);
                        return Ok(head);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(error) => {
                        return Err(Failed::Broken(format!("not an HTTP answer: {error}")))
                    }
                }
            }
            if self.buffer.len() > MAX_HEAD_BYTES {
                return Err(Failed::Broken("answer head too large".into()));
            }
            self.fill().await?;
        }
    }

    async fn exactly(&mut self, length: u64, max: usize) -> Result<Bytes, Failed> {
        if length > max as u64 {
            return Err(Failed::TooLarge);
        }
        let length = length as usize;
        while self.buffer.len() < length {
            self.fill().await?;
        }
        Ok(self.buffer.split_to(length).freeze())
    }

    async fn until_close(&mut self, max: usize) -> Result<Bytes, Failed> {
        loop {
            if self.buffer.len() > max {
                return Err(Failed::TooLarge);
            }
            self.buffer.reserve(READ_CHUNK);
            match self.connection.read_buf(&mut self.buffer).await {
                Ok(0) => return Ok(self.buffer.split().freeze()),
                Ok(_) => {}
                Err(error) => return Err(Failed::Broken(error.to_string())),
            }
        }
    }

    async fn chunked(&mut self, max: usize) -> Result<Bytes, Failed> {
        let mut body = BytesMut::new();
        loop {
            let size = loop {
                match httparse::parse_chunk_size(&self.buffer) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.buffer.advance(used);
                        break size;
                    }
                    Ok(httparse::Status::Partial) => self.fill().await?,
                    Err(_) => return Err(Failed::Broken("malformed chunked body".into())),
                }
            };
            if size == 0 {
                self.trailers().await?;
                return Ok(body.freeze());
            }
            if body.len() as u64 + size > max as u64 {
                return Err(Failed::TooLarge);
            }
            let size = size as usize;
            while self.buffer.len() < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.buffer[..size]);
            if &self.buffer[size..size + 2] != b"\r\n" {
                return Err(Failed::Broken("malformed chunked body".into()));
            }
            self.buffer.advance(size + 2);
        }
    }

    /// Skip the trailer lines after the last chunk, up to the blank line that ends them.
    async fn trailers(&mut self) -> Result<(), Failed> {
        loop {
            match self.buffer.windows(2).position(|pair| pair == b"\r\n") {
                Some(0) => {
                    self.buffer.advance(2);
                    return Ok(());
                }
                Some(end) => self.buffer.advance(end + 2),
                None if self.buffer.len() > MAX_HEAD_BYTES => {
                    return Err(Failed::Broken("trailers too large".into()))
                }
                None => self.fill().await?,
            }
        }
    }
}

fn is_reset(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    )
}

fn read_head(response: &httparse::Response<'_, '_>) -> Result<Head, Failed> {
    let status = response.code.unwrap_or_default();
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let mut close = false;
    let mut keep_alive_asked = false;
    for header in response.headers.iter() {
        let value = std::str::from_utf8(header.value).unwrap_or_default().trim();
        if header.name.eq_ignore_ascii_case("content-length") {
            let parsed = value.parse::<u64>().ok().filter(|_| !value.starts_with('+'));
            match (parsed, length) {
                (None, _) => return Err(Failed::Broken("invalid Content-Length".into())),
                (Some(new), Some(old)) if new != old => {
                    return Err(Failed::Broken("conflicting Content-Length".into()))
                }
                (new, _) => length = new,
            }
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            // Only the last coding decides how the body ends.
            let last = value.rsplit(',').next().unwrap_or_default().trim();
            chunked = Some(last.eq_ignore_ascii_case("chunked"));
        } else if header.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                close |= token.eq_ignore_ascii_case("close");
                keep_alive_asked |= token.eq_ignore_ascii_case("keep-alive");
            }
        }
    }
    let framing = match (status, chunked, length) {
        (204 | 304, _, _) | (100..=199, _, _) => Framing::Empty,
        (_, Some(true), _) => Framing::Chunked,
        (_, Some(false), _) => Framing::UntilClose,
        (_, None, Some(length)) => Framing::Length(length),
        (_, None, None) => Framing::UntilClose,
    };
    let http11 = response.version == Some(1);
    let keep_alive = !close && (http11 || keep_alive_asked);
    Ok(Head { status, framing, keep_alive })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{duplex, DuplexStream};

    fn run<F: std::future::Future>(future: F) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(future)
    }

    const REQUEST: &[u8] = b"POST / HTTP/1.1\r\n\r\n";

    /// The exchange against a node that reads the request, sends `raw` and then, if `close`,
    /// hangs up (else it stays until the exchange has ended).
    fn exchange_with(raw: &[u8], close: bool, max: usize) -> Result<Answer, Failed> {
        let raw = raw.to_vec();
        run(async move {
            let (mut ours, node): (DuplexStream, DuplexStream) = duplex(1 << 17);
            let (ended, end) = tokio::sync::oneshot::channel::<()>();
            drop(tokio::spawn(async move {
                let mut node = node;
                let mut asked = vec![0; REQUEST.len()];
                node.read_exact(&mut asked).await.unwrap();
                node.write_all(&raw).await.unwrap();
                if !close {
                    let _ = end.await;
                }
            }));
            let outcome = exchange(&mut ours, REQUEST, max).await;
            let _ = ended.send(());
            outcome
        })
    }

    fn answered(raw: &[u8], close: bool) -> Answer {
        match exchange_with(raw, close, 1024) {
            Ok(answer) => answer,
            Err(Failed::Unanswered) => panic!("unanswered"),
            Err(Failed::TooLarge) => panic!("too large"),
            Err(Failed::Broken(detail)) => panic!("broken: {detail}"),
        }
    }

    #[test]
    fn a_body_framed_by_its_length_is_read_and_the_connection_kept() {
        let answer = answered(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", false);
        assert_eq!((answer.status, &answer.body[..], answer.reusable), (200, &b"{}"[..], true));
    }

    #[test]
    fn a_chunked_body_with_trailers_is_read_whole() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3\r\na\":\r\n2\r\n1}\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let answer = answered(raw, false);
        assert_eq!(&answer.body[..], b"{\"a\":1}");
        assert!(answer.reusable);
    }

    #[test]
    fn a_body_ended_by_the_close_is_read_and_the_connection_not_kept() {
        let answer = answered(b"HTTP/1.0 200 OK\r\n\r\n{\"ok\":1}", true);
        assert_eq!((&answer.body[..], answer.reusable), (&b"{\"ok\":1}"[..], false));
    }

    #[test]
    fn an_interim_answer_is_skipped() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(&answered(raw, false).body[..], b"{}");
    }

    #[test]
    fn another_status_is_the_whole_outcome_and_its_body_is_not_read() {
        let answer = answered(b"HTTP/1.1 503 Busy\r\nContent-Length: 100000\r\n\r\n", false);
        assert_eq!((answer.status, answer.body.len(), answer.reusable), (503, 0, false));
    }

    #[test]
    fn connection_close_and_bytes_past_the_answer_forbid_reuse() {
        let closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}";
        assert!(!answered(closing, false).reusable);
        let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n";
        assert!(!answered(extra, false).reusable);
    }

    #[test]
    fn an_answer_over_the_bound_is_too_large_however_it_is_framed() {
        for raw in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n"[..],
        ] {
            assert!(matches!(exchange_with(raw, false, 1024), Err(Failed::TooLarge)));
        }
        let endless = [&b"HTTP/1.0 200 OK\r\n\r\n"[..], &[b'x'; 2000][..]].concat();
        assert!(matches!(exchange_with(&endless, true, 1024), Err(Failed::TooLarge)));
    }

    #[test]
    fn nothing_at_all_is_unanswered_and_half_an_answer_is_broken() {
        assert!(matches!(exchange_with(b"", true, 1024), Err(Failed::Unanswered)));
        let truncated = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}";
        assert!(matches!(exchange_with(truncated, true, 1024), Err(Failed::Broken(_))));
        let cut_head = b"HTTP/1.1 200 OK\r\nContent-Len";
        assert!(matches!(exchange_with(cut_head, true, 1024), Err(Failed::Broken(_))));
    }

    #[test]
    fn what_is_not_http_or_frames_itself_twice_is_broken() {
        for raw in [
            &b"SSH-2.0-OpenSSH_9.2\r\n\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}"[..],
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
        ] {
            assert!(matches!(exchange_with(raw, true, 1024), Err(Failed::Broken(_))));
        }
    }

    #[test]
    fn a_head_larger_than_the_bound_is_broken_not_read_forever() {
        let mut raw = b"HTTP/1.1 200 OK\r\nX-Filler: ".to_vec();
        raw.resize(MAX_HEAD_BYTES + 100, b'a'); // a header line that never ends
        assert!(matches!(exchange_with(&raw, false, 1024), Err(Failed::Broken(_))));
    }
}
