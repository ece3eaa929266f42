//! POSTing one JSON-RPC body to a node: kept connections per origin, a time-out per attempt, a
//! size bound.
//!
//! Every way a node can fail maps to one of the contract's failure kinds (`contract::Kind`); the
//! pipeline decides what each one means.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::io::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::contract::Kind;
use crate::http1::{self, Failed};
use crate::target::{self, Origin, Target};

/// Parsed node URLs kept; there are far fewer nodes than this.
const MAX_TARGETS: usize = 65_536;
const MAX_IDLE_PER_ORIGIN: usize = 256;

/// Why a node gave no usable answer.
#[derive(Clone, Debug)]
pub struct Failure {
    pub kind: Kind,
    pub detail: String,
    pub status: Option<u16>,
}

impl Failure {
    fn new(kind: Kind, detail: impl Into<String>) -> Self {
        Failure { kind, detail: detail.into(), status: None }
    }
}

/// Why an address must not be dialled (the host's dial rule, `chainrouter.net.outbound`), or
/// None when it may.
pub type Vet = Arc<dyn Fn(IpAddr) -> Option<String> + Send + Sync>;

pub struct UpstreamSettings {
    pub max_response_bytes: usize,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub ca_file: Option<String>,
    pub user_agent: String,
    /// Checked on every address a new connection would use; None dials anything.
    pub vet: Option<Vet>,
}

pub struct Upstream {
    max_response_bytes: usize,
    connect_timeout: Duration,
    vet: Option<Vet>,
    user_agent: String,
    tls: TlsConnector,
    targets: Mutex<HashMap<String, Arc<Target>>>,
    pool: Arc<Mutex<Pool>>,
}

fn tls_config(ca_file: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    // A system store with a few unreadable certificates is still usable; an empty one is not.
    for cert in rustls_native_certs::load_native_certs().unwrap_or_default() {
        let _ = roots.add(&rustls::Certificate(cert.0));
    }
    if let Some(path) = ca_file {
        let file = File::open(path).map_err(|e| format!("CA file {path}: {e}"))?;
        let certs = rustls_pemfile::certs(&mut BufReader::new(file))
            .map_err(|e| format!("CA file {path}: {e}"))?;
        if certs.is_empty() {
            return Err(format!("CA file {path}: no PEM certificate in it"));
        }
        for cert in certs {
            roots.add(&rustls::Certificate(cert)).map_err(|e| format!("CA file {path}: {e}"))?;
        }
    }
    let mut config = rustls::ClientConfig::builder()
        .with_safe_defaults()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl Upstream {
    pub fn new(settings: &UpstreamSettings) -> Result<Self, String> {
        if settings.user_agent.bytes().any(|b| !(0x20..=0x7e).contains(&b)) {
            return Err("the user agent is not a valid header value".to_string());
        }
        Ok(Upstream {
            max_response_bytes: settings.max_response_bytes,
            connect_timeout: settings.connect_timeout,
            vet: settings.vet.clone(),
            user_agent: settings.user_agent.clone(),
            tls: TlsConnector::from(Arc::new(tls_config(settings.ca_file.as_deref())?)),
            targets: Mutex::new(HashMap::new()),
            pool: Arc::new(Mutex::new(Pool {
                idle: HashMap::new(),
                idle_timeout: settings.idle_timeout,
                sweeping: false,
            })),
        })
    }

    /// POST `body` to `url`; a 2xx answer's body, or why there is none, within `timeout`.
    pub async fn post(&self, url: &str, body: Bytes, timeout: Duration) -> Result<Bytes, Failure> {
        let target = self.target(url)?;
        match tokio::time::timeout(timeout, self.exchange(&target, &body)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::new(
                Kind::Timeout,
                format!("no complete answer within {:.3} s", timeout.as_secs_f64()),
            )),
        }
    }

    fn target(&self, url: &str) -> Result<Arc<Target>, Failure> {
        let mut targets = lock(&self.targets);
        if let Some(target) = targets.get(url) {
            return Ok(target.clone());
        }
        let target = Arc::new(
            target::parse(url, &self.user_agent).map_err(|e| Failure::new(Kind::Transport, e))?,
        );
        if targets.len() >= MAX_TARGETS {
            targets.clear();
        }
        targets.insert(url.to_string(), target.clone());
        Ok(target)
    }

    async fn exchange(&self, target: &Target, body: &[u8]) -> Result<Bytes, Failure> {
        let request = target.request(body);
        let mut kept = self.take_idle(&target.origin);
        loop {
            let reused = kept.is_some();
            let mut connection = match kept.take() {
                Some(connection) => connection,
                None => self.connect(&target.origin).await?,
            };
            let answer = match http1::exchange(&mut connection, &request, self.max_response_bytes)
                .await
            {
                Ok(answer) => answer,
                // A kept connection the node closed as the call went out (its idle time-out,
                // say): nothing was answered, so the call goes once more, on a fresh one.
                Err(Failed::Unanswered) if reused => {
                    lock(&self.pool).idle.remove(&target.origin); // its siblings are likely closed too
                    continue;
                }
                Err(Failed::Unanswered) => {
                    return Err(Failure::new(
                        Kind::Transport,
                        "connection closed without an answer",
                    ))
                }
                Err(Failed::TooLarge) => {
                    return Err(Failure::new(
                        Kind::TooLarge,
                        format!("answer larger than {} bytes", self.max_response_bytes),
                    ))
                }
                Err(Failed::Broken(detail)) => return Err(Failure::new(Kind::Transport, detail)),
            };
            if answer.reusable {
                self.keep(&target.origin, connection);
            }
            return match answer.status {
                200..=299 => Ok(answer.body),
                429 => Err(Failure {
                    kind: Kind::RateLimited,
                    detail: "HTTP 429".to_string(),
                    status: Some(429),
                }),
                status => Err(Failure {
                    kind: Kind::HttpStatus,
                    detail: format!("HTTP {status}"),
                    status: Some(status),
                }),
            };
        }
    }

    async fn connect(&self, origin: &Origin) -> Result<Connection, Failure> {
        let tcp = match tokio::time::timeout(self.connect_timeout, self.dial(origin)).await {
            Ok(outcome) => outcome?,
            Err(_) => {
                return Err(Failure::new(
                    Kind::Timeout,
                    format!("no connection in {:.3} s", self.connect_timeout.as_secs_f64()),
                ))
            }
        };
        tcp.set_nodelay(true).map_err(|e| Failure::new(Kind::Transport, e.to_string()))?;
        if !origin.tls {
            return Ok(Connection::Plain(tcp));
        }
        let name = rustls::ServerName::try_from(origin.host.as_str()).map_err(|_| {
            Failure::new(Kind::Transport, "the node's host is not a valid TLS name")
        })?;
        let handshake = self.tls.connect(name, tcp);
        match tokio::time::timeout(self.connect_timeout, handshake).await {
            Ok(Ok(tls)) => Ok(Connection::Tls(Box::new(tls))),
            Ok(Err(error)) => Err(Failure::new(Kind::Transport, format!("TLS: {error}"))),
            Err(_) => Err(Failure::new(Kind::Timeout, "no TLS handshake in time")),
        }
    }

    /// Resolve the host, check every address it resolves to against the dial rule (at connect
    /// time: a name may resolve differently from when it was screened), then connect to the
    /// first that answers.
    async fn dial(&self, origin: &Origin) -> Result<TcpStream, Failure> {
        let found = tokio::net::lookup_host((origin.host.as_str(), origin.port))
            .await
            .map_err(|e| Failure::new(Kind::Transport, format!("{}: {e}", origin.host)))?;
        let addresses: Vec<SocketAddr> = found.collect();
        if let Some(vet) = &self.vet {
            for address in &addresses {
                if let Some(problem) = vet(address.ip()) {
                    return Err(Failure::new(
                        Kind::Transport,
                        format!("{} resolves to {problem}: not dialled", origin.host),
                    ));
                }
            }
        }
        let mut last = None;
        for address in addresses {
            match TcpStream::connect(address).await {
                Ok(tcp) => return Ok(tcp),
                Err(error) => last = Some(error),
            }
        }
        Err(Failure::new(
            Kind::Transport,
            last.map_or_else(|| format!("{} has no address", origin.host), |e| e.to_string()),
        ))
    }

    /// The most recently used kept connection to `origin` that still looks open.
    fn take_idle(&self, origin: &Origin) -> Option<Connection> {
        let mut pool = lock(&self.pool);
        let expired = Instant::now().checked_sub(pool.idle_timeout);
        let kept = pool.idle.get_mut(origin)?;
        while let Some(idle) = kept.pop() {
            if expired.is_some_and(|before| idle.since <= before) {
                kept.clear(); // the others were left even earlier
                return None;
            }
            if idle.connection.looks_open() {
                return Some(idle.connection);
            }
        }
        None
    }

    fn keep(&self, origin: &Origin, connection: Connection) {
        let mut pool = lock(&self.pool);
        let kept = pool.idle.entry(origin.clone()).or_default();
        if kept.len() >= MAX_IDLE_PER_ORIGIN {
            return;
        }
        kept.push(Idle { connection, since: Instant::now() });
        if !pool.sweeping {
            pool.sweeping = true;
            drop(tokio::spawn(sweep(Arc::downgrade(&self.pool))));
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Kept connections by origin, oldest first.
struct Pool {
    idle: HashMap<Origin, Vec<Idle>>,
    idle_timeout: Duration,
    /// Whether a sweep is scheduled; there is none while nothing is kept.
    sweeping: bool,
}

struct Idle {
    connection: Connection,
    since: Instant,
}

/// Close connections idle longer than the time-out, every time-out, while any are kept: without
/// it, every node ever called would hold a socket until its next call, and with thousands of
/// nodes checked in slow rounds that is thousands of descriptors.
async fn sweep(pool: Weak<Mutex<Pool>>) {
    loop {
        let Some(every) = pool.upgrade().map(|pool| lock(&pool).idle_timeout) else { return };
        tokio::time::sleep(every.max(Duration::from_millis(10))).await;
        let Some(pool) = pool.upgrade() else { return };
        let mut pool = lock(&pool);
        let expired = Instant::now().checked_sub(pool.idle_timeout);
        pool.idle.retain(|_, kept| {
            kept.retain(|idle| expired.is_none_or(|before| idle.since > before));
            !kept.is_empty()
        });
        if pool.idle.is_empty() {
            pool.sweeping = false;
            return;
        }
    }
}

enum Connection {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection {
    /// False when the node has closed the connection, reset it, or sent something unasked while
    /// it sat idle (a late answer, or TLS's closing alert): it must not carry a request.
    fn looks_open(&self) -> bool {
        let socket = match self {
            Connection::Plain(tcp) => tcp,
            Connection::Tls(tls) => tls.get_ref().0,
        };
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local buffer on a descriptor this connection owns.
        let peeked = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        peeked < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Connection::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Connection::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Connection::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Connection::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Connection::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream as StdStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;

    /// What a scripted node does with the `request`th request on its `connection`th connection:
    /// answer these bytes, or hang up without a word (None).
    type Script = fn(connection: usize, request: usize) -> Option<Vec<u8>>;

    struct Node {
        url: String,
        accepted: Arc<AtomicUsize>,
    }

    fn node(script: Script) -> Node {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/rpc", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let connection = counter.fetch_add(1, Ordering::SeqCst);
                let Ok(stream) = stream else { return };
                thread::spawn(move || serve(stream, connection, script));
            }
        });
        Node { url, accepted }
    }

    fn serve(stream: StdStream, connection: usize, script: Script) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        for request in 0.. {
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            match script(connection, request) {
                Some(answer) => writer.write_all(&answer).unwrap(),
                None => return,
            }
        }
    }

    fn ok() -> Option<Vec<u8>> {
        Some(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec())
    }

    /// The client on a runtime of its own, as a driver keeps it: its kept connections belong
    /// to that runtime.
    struct Client {
        runtime: tokio::runtime::Runtime,
        upstream: Upstream,
    }

    fn upstream(idle_timeout: Duration) -> Client {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let upstream = Upstream::new(&UpstreamSettings {
            max_response_bytes: 1024,
            connect_timeout: Duration::from_secs(2),
            idle_timeout,
            ca_file: None,
            user_agent: "test".into(),
            vet: None,
        })
        .unwrap();
        Client { runtime, upstream }
    }

    fn post(client: &Client, url: &str, timeout: Duration) -> Result<Bytes, Failure> {
        let call = client.upstream.post(url, Bytes::from_static(b"{}"), timeout);
        client.runtime.block_on(call)
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn sequential_calls_share_one_kept_connection() {
        let node = node(|_, _| ok());
        let client = upstream(Duration::from_secs(30));
        for _ in 0..3 {
            assert_eq!(&post(&client, &node.url, SECOND).unwrap()[..], b"{}");
        }
        assert_eq!(node.accepted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_connection_idle_past_the_limit_is_not_used_again() {
        let node = node(|_, _| ok());
        let client = upstream(Duration::ZERO);
        for _ in 0..2 {
            post(&client, &node.url, SECOND).unwrap();
        }
        assert_eq!(node.accepted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_kept_connection_closed_unanswered_is_retried_once_on_a_fresh_one() {
        // The first connection answers once, then hangs up on the next request.
        let node = node(|connection, request| (connection > 0 || request == 0).then(ok).flatten());
        let client = upstream(Duration::from_secs(30));
        post(&client, &node.url, SECOND).unwrap();
        assert_eq!(&post(&client, &node.url, SECOND).unwrap()[..], b"{}");
        assert_eq!(node.accepted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_fresh_connection_closed_unanswered_is_a_transport_failure() {
        let node = node(|_, _| None);
        let failure = post(&upstream(SECOND), &node.url, SECOND).unwrap_err();
        assert_eq!(failure.kind, Kind::Transport);
        assert_eq!(node.accepted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn statuses_are_classified_with_their_number() {
        let node = node(|connection, _| {
            let status = if connection == 0 { 429 } else { 502 };
            Some(format!("HTTP/1.1 {status} No\r\nContent-Length: 0\r\n\r\n").into_bytes())
        });
        let client = upstream(SECOND);
        let limited = post(&client, &node.url, SECOND).unwrap_err();
        assert_eq!((limited.kind, limited.status), (Kind::RateLimited, Some(429)));
        let failed = post(&client, &node.url, SECOND).unwrap_err(); // not kept: a new connection
        assert_eq!((failed.kind, failed.status), (Kind::HttpStatus, Some(502)));
    }

    #[test]
    fn a_node_that_never_answers_times_out_at_the_deadline() {
        let node = node(|_, _| {
            thread::sleep(Duration::from_secs(3));
            None
        });
        let started = Instant::now();
        let failure = post(&upstream(SECOND), &node.url, Duration::from_millis(200)).unwrap_err();
        assert_eq!(failure.kind, Kind::Timeout);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_refused_connection_and_an_unusable_url_are_transport_failures() {
        let unused = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let client = upstream(SECOND);
        let refused = post(&client, &format!("http://{unused}/"), SECOND).unwrap_err();
        assert_eq!(refused.kind, Kind::Transport);
        let unusable = post(&client, "http://node.example/a b", SECOND).unwrap_err();
        assert_eq!(unusable.kind, Kind::Transport);
    }
}

#[cfg(test)]
mod dial_rule_tests {
    use super::*;

    fn refusing_loopback() -> Upstream {
        let vet: Vet = Arc::new(|ip: IpAddr| ip.is_loopback().then(|| "a loopback address".into()));
        Upstream::new(&UpstreamSettings {
            max_response_bytes: 1024,
            connect_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(1),
            ca_file: None,
            user_agent: "test".into(),
            vet: Some(vet),
        })
        .unwrap()
    }

    #[test]
    fn an_address_the_rule_refuses_is_never_dialled_however_the_host_is_written() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let client = refusing_loopback();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for host in ["127.0.0.1", "localhost", "[::1]"] {
            let url = format!("http://{host}:{port}/");
            let call = client.post(&url, Bytes::from_static(b"{}"), Duration::from_secs(1));
            let failure = runtime.block_on(call).unwrap_err();
            assert_eq!(failure.kind, Kind::Transport);
            assert!(failure.detail.contains("a loopback address"), "{}", failure.detail);
        }
        // Nothing reached the listener.
        assert!(listener.accept().is_err());
    }
}
