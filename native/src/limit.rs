//! What bounds a worker's connections (docs/security.md, "Slow clients"):
//! - at most `max_connections` open at once: past it the server stops accepting, and new
//!   connections wait in the kernel's backlog (or time out there) instead of taking memory and
//!   descriptors here. Each accepted connection carries a permit it gives back when it closes;
//! - a request's head must arrive within `head_timeout` of the connection's opening or of the
//!   previous answer: a connection that sends nothing, or drips its head, is closed. (hyper
//!   0.14.19, Debian's, has a header read timeout that never fires, and none for a silent
//!   connection.) The server disarms the deadline while it serves a request (`HeadDeadline`),
//!   and leaves it disarmed after a 101: a WebSocket's liveness is its session's pings;
//! - what the server sends must move within `head_timeout` too: a client that stops reading its
//!   answers (its window full, a write waiting) is closed instead of holding its place for ever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::accept::Accept;
use hyper::server::conn::{AddrIncoming, AddrStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

type Waiting = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// `AddrIncoming`, accepting only while fewer than its bound of connections are open.
pub struct Limited {
    incoming: AddrIncoming,
    permits: Arc<Semaphore>,
    waiting: Option<Waiting>,
    held: Option<OwnedSemaphorePermit>,
    head_timeout: Duration,
}

impl Limited {
    pub fn new(incoming: AddrIncoming, max_connections: usize, head_timeout: Duration) -> Self {
        Limited {
            incoming,
            permits: Arc::new(Semaphore::new(max_connections)),
            waiting: None,
            held: None,
            head_timeout,
        }
    }
}

/// When a connection's next request head must have arrived by; none while a request is served.
pub struct HeadDeadline {
    at: Mutex<Option<Instant>>,
    timeout: Duration,
}

impl HeadDeadline {
    fn new(timeout: Duration) -> Self {
        HeadDeadline { at: Mutex::new(Some(Instant::now() + timeout)), timeout }
    }

    /// A request's head arrived: its serving takes the time it takes (the body has its own).
    pub fn disarm(&self) {
        *self.at.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    /// An answer is made: the next head must come within the timeout.
    pub fn arm(&self) {
        let next = Instant::now() + self.timeout;
        *self.at.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(next);
    }

    fn at(&self) -> Option<Instant> {
        *self.at.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// An accepted connection, its permit (closing it frees a place) and its head deadline: a read
/// that waits past the deadline fails, and hyper closes the connection.
pub struct Counted {
    pub stream: AddrStream,
    pub deadline: Arc<HeadDeadline>,
    _permit: OwnedSemaphorePermit,
    sleep: Pin<Box<Sleep>>,
    sleeping_until: Option<Instant>,
    /// How long a write may wait for the client to read, and since when one has waited.
    send_timeout: Duration,
    send_sleep: Pin<Box<Sleep>>,
    send_stalled: bool,
}

impl Counted {
    fn new(stream: AddrStream, permit: OwnedSemaphorePermit, head_timeout: Duration) -> Self {
        let deadline = Arc::new(HeadDeadline::new(head_timeout));
        let first = deadline.at();
        Counted {
            stream,
            deadline,
            _permit: permit,
            sleep: Box::pin(tokio::time::sleep_until(first.unwrap_or_else(Instant::now))),
            sleeping_until: first,
            send_timeout: head_timeout,
            send_sleep: Box::pin(tokio::time::sleep(head_timeout)),
            send_stalled: false,
        }
    }

    /// A write's outcome, or a time-out once writes have waited `send_timeout` in a row for
    /// the client to read.
    fn sent<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if outcome.is_ready() {
            self.send_stalled = false;
            return outcome;
        }
        if !self.send_stalled {
            self.send_stalled = true;
            self.send_sleep.as_mut().reset(Instant::now() + self.send_timeout);
        }
        match self.send_sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read what it was sent in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Accept for Limited {
    type Conn = Counted;
    type Error = io::Error;

    fn poll_accept(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Self::Conn, Self::Error>>> {
        let this = self.get_mut();
        if this.held.is_none() {
            let permits = this.permits.clone();
            let waiting = this.waiting.get_or_insert_with(|| Box::pin(permits.acquire_owned()));
            match waiting.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(permit)) => {
                    this.waiting = None;
                    this.held = Some(permit);
                }
                // The semaphore is never closed; were it, no connection could be served.
                Poll::Ready(Err(error)) => return Poll::Ready(Some(Err(io::Error::other(error)))),
            }
        }
        match Pin::new(&mut this.incoming).poll_accept(cx) {
            Poll::Ready(Some(Ok(stream))) => {
                let permit = this.held.take().expect("a permit is held before accepting");
                Poll::Ready(Some(Ok(Counted::new(stream, permit, this.head_timeout))))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Poll::Ready(read) = Pin::new(&mut this.stream).poll_read(cx, buf) {
            return Poll::Ready(read);
        }
        let Some(at) = this.deadline.at() else {
            return Poll::Pending; // a request is being served
        };
        if this.sleeping_until != Some(at) {
            this.sleep.as_mut().reset(at);
            this.sleeping_until = Some(at);
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the request's head did not arrive in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.sent(cx, outcome)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.stream).poll_flush(cx);
        this.sent(cx, outcome)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.sent(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// A `Limited` on a fresh loopback port, and that port's address (inside a runtime).
    fn listening(max: usize, head_timeout: Duration) -> (Limited, std::net::SocketAddr) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let incoming = AddrIncoming::from_listener(listener).unwrap();
        (Limited::new(incoming, max, head_timeout), address)
    }

    async fn accept(limited: &mut Limited) -> Option<Counted> {
        let next = std::future::poll_fn(|cx| Pin::new(&mut *limited).poll_accept(cx));
        match tokio::time::timeout(Duration::from_millis(200), next).await {
            Ok(Some(Ok(connection))) => Some(connection),
            _ => None,
        }
    }

    #[test]
    fn no_more_than_the_bound_is_accepted_until_one_closes() {
        runtime().block_on(async {
            let (mut limited, address) = listening(2, Duration::from_secs(30));
            let clients: Vec<_> =
                (0..3).map(|_| std::net::TcpStream::connect(address).unwrap()).collect();
            let first = accept(&mut limited).await.expect("the first is accepted");
            let _second = accept(&mut limited).await.expect("the second is accepted");
            assert!(accept(&mut limited).await.is_none(), "the third waits");
            drop(first);
            assert!(accept(&mut limited).await.is_some(), "then takes the freed place");
            drop(clients);
        });
    }

    #[test]
    fn a_client_that_stops_reading_fails_the_write_waiting_for_it() {
        runtime().block_on(async {
            use tokio::io::AsyncWriteExt;
            let (mut limited, address) = listening(2, Duration::from_millis(200));
            let _not_reading = std::net::TcpStream::connect(address).unwrap();
            let mut connection = accept(&mut limited).await.expect("accepted");
            connection.deadline.disarm();
            let chunk = vec![0u8; 1 << 16];
            let writing = async {
                loop {
                    if let Err(error) = connection.write_all(&chunk).await {
                        break error;
                    }
                }
            };
            let failed = tokio::time::timeout(Duration::from_secs(5), writing)
                .await
                .expect("the write waited past its deadline");
            assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
        });
    }

    #[test]
    fn a_connection_silent_past_its_head_deadline_fails_its_read_unless_disarmed() {
        runtime().block_on(async {
            let (mut limited, address) = listening(2, Duration::from_millis(100));
            let _silent = std::net::TcpStream::connect(address).unwrap();
            let mut connection = accept(&mut limited).await.expect("accepted");
            let mut buffer = [0u8; 16];
            let started = Instant::now();
            let read = connection.read(&mut buffer).await;
            assert_eq!(read.unwrap_err().kind(), io::ErrorKind::TimedOut);
            assert!(started.elapsed() < Duration::from_secs(2));
            // Disarmed while a request is served: the read just waits.
            let _other = std::net::TcpStream::connect(address).unwrap();
            let mut served = accept(&mut limited).await.expect("accepted");
            served.deadline.disarm();
            let waited = tokio::time::timeout(Duration::from_millis(300), served.read(&mut buffer));
            assert!(waited.await.is_err(), "no deadline while serving");
        });
    }
}
