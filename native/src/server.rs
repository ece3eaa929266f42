//! The HTTP/1.1 server: reads a request within the body limit, hands it to the Python handler,
//! drives the coroutine the handler returns, and writes the answer it ends with.
//!
//! The server holds no routing or policy of its own: paths, statuses, headers and bodies are
//! all the handler's (`chainrouter.router.http_face`), so both executors answer alike. The
//! handler takes the contract's `HttpRequest` and its program ends with an `HttpAnswer`, whose
//! decisions the server keeps (memo.rs) and applies to later calls in their scope before it
//! hands a request to the handler (repeat.rs); a request it cannot serve so goes to the handler
//! with the calls it sent meanwhile (`HttpRequest.attempts`).

use std::convert::Infallible;
use std::os::unix::io::{FromRawFd, IntoRawFd};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Bytes, HttpBody};
use hyper::header::{
    HeaderName, HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS,
    CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION, UPGRADE,
    VARY,
};
use hyper::server::conn::AddrIncoming;
use hyper::service::{make_service_fn, service_fn};
use hyper::upgrade::OnUpgrade;
use hyper::{Body, Method, Request, Response, Server, StatusCode};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use tokio::sync::Notify;

use crate::contract::{fields, Types};
use crate::contract_gen::{attempted, http_answer, http_request};
use crate::driver::{drive_from, log_error, seconds, start, Driver, Shared, Step};
use crate::json::Calls;
use crate::limit::{Counted, Limited};
use crate::memo::{Asked, Memo, PyMemo};
use crate::repeat::{serve, Applying, Made, Served};
use crate::settle::Settler;

const HEARTBEAT: Duration = Duration::from_secs(1);
const LOGGER: &str = "chainrouter.router.executors.native";
const INTERNAL_ERROR: &[u8] =
    br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#;
const BODY_TIMED_OUT: &[u8] = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the body did not arrive in time"}}"#;

struct Decisions {
    memo: Arc<Memo>,
    settler: Arc<Settler>,
}

/// One worker's server. `serve` blocks its thread until `stop` is called from another.
#[pyclass(module = "chainrouter._native")]
pub struct NativeServer {
    state: Arc<State>,
    driver: Py<Driver>,
    stopping: Arc<Notify>,
    header_timeout: Duration,
    max_connections: usize,
}

/// What each request needs: the driver's part, the Python handlers, the body's bounds.
struct State {
    shared: Arc<Shared>,
    handler: PyObject,
    /// Takes an accepted WebSocket connection: `(request, fd)`, the fd one end of a socket
    /// pair whose other end this server relays to the client. None: upgrades are refused.
    websocket_handler: Option<PyObject>,
    /// The decisions the server applies, and the ledger its calls go to. None: every request
    /// goes to the handler.
    decisions: Option<Decisions>,
    max_body_bytes: usize,
    /// The whole body must arrive within this of the head: a client dripping it holds no
    /// connection for long.
    body_timeout: Duration,
}

#[pymethods]
impl NativeServer {
    #[new]
    fn new(
        py: Python<'_>,
        handler: PyObject,
        driver: Py<Driver>,
        max_body_bytes: usize,
        header_timeout_s: f64,
        body_timeout_s: f64,
        max_connections: usize,
    ) -> PyResult<Self> {
        if max_connections == 0 {
            return Err(PyValueError::new_err("max_connections must be at least 1"));
        }
        let shared = driver.borrow(py).shared.clone();
        Ok(NativeServer {
            state: Arc::new(State {
                shared,
                handler,
                websocket_handler: None,
                decisions: None,
                max_body_bytes,
                body_timeout: seconds(body_timeout_s)?,
            }),
            driver,
            stopping: Arc::new(Notify::new()),
            header_timeout: seconds(header_timeout_s)?,
            max_connections,
        })
    }

    /// Serve the listening socket `fd` (not taken over: it is duplicated) until `stop`.
    fn serve(&self, py: Python<'_>, fd: i32) -> PyResult<()> {
        // SAFETY: dup only reads the descriptor number; a bad one gives -1 and errno.
        let own = unsafe { libc::dup(fd) };
        if own < 0 {
            return Err(PyOSError::new_err(std::io::Error::last_os_error().to_string()));
        }
        // SAFETY: `own` is a fresh descriptor that nothing else owns.
        let listener = unsafe { std::net::TcpListener::from_raw_fd(own) };
        let state = self.state.clone();
        let stopping = self.stopping.clone();
        let bounds = (self.header_timeout, self.max_connections);
        let driver = self.driver.borrow(py);
        let driver: &Driver = &driver;
        py.allow_threads(|| {
            let _turn = driver.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            driver.runtime.block_on(run(listener, state, stopping, bounds))
        })
        .map_err(PyRuntimeError::new_err)
    }

    /// Accept WebSocket upgrades from now on: `handler(request, fd)` takes each accepted one
    /// (router/executors/native.py). Before `serve`.
    fn accept_websockets(&mut self, handler: PyObject) -> PyResult<()> {
        let state = Arc::get_mut(&mut self.state)
            .ok_or_else(|| PyRuntimeError::new_err("accept_websockets comes before serve"))?;
        state.websocket_handler = Some(handler);
        Ok(())
    }

    /// Apply the decisions the handler's answers carry to later calls in their scope (memo.rs),
    /// the calls served so going to `settle` (the ledger) in groups. Before `serve`.
    fn apply_decisions(&mut self, memo: &PyMemo, settle: PyObject) -> PyResult<()> {
        let state = Arc::get_mut(&mut self.state)
            .ok_or_else(|| PyRuntimeError::new_err("apply_decisions comes before serve"))?;
        let settler = Arc::new(Settler::new(settle));
        state.decisions = Some(Decisions { memo: memo.memo.clone(), settler });
        Ok(())
    }

    /// Stop accepting, finish the requests in flight, then let `serve` return. Any thread.
    fn stop(&self) {
        self.stopping.notify_one();
    }
}

/// Serve until `stopping`: `bounds` are the time a request's head may take and the most
/// connections held open at once.
async fn run(
    listener: std::net::TcpListener,
    state: Arc<State>,
    stopping: Arc<Notify>,
    bounds: (Duration, usize),
) -> Result<(), String> {
    let (header_timeout, max_connections) = bounds;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    let mut incoming = AddrIncoming::from_listener(listener).map_err(|e| e.to_string())?;
    incoming.set_nodelay(true);
    let settling = state
        .decisions
        .as_ref()
        .map(|decisions| tokio::spawn(decisions.settler.clone().run(state.shared.types.clone())));
    let make = make_service_fn(move |connection: &Counted| {
        let peer: Arc<str> = connection.stream.remote_addr().ip().to_string().into();
        let deadline = connection.deadline.clone();
        let state = state.clone();
        async move {
            Ok::<_, Infallible>(service_fn(move |request| {
                // The head is in: no head deadline while the request is served; the next
                // head's runs from the answer.
                deadline.disarm();
                let answering = answer(state.clone(), peer.clone(), request);
                let deadline = deadline.clone();
                async move {
                    let answered = answering.await;
                    // After a 101 the connection carries WebSocket frames, not request heads:
                    // the session keeps it alive or drops it (pings), not the head deadline.
                    let upgraded = matches!(
                        &answered,
                        Ok(response) if response.status() == StatusCode::SWITCHING_PROTOCOLS
                    );
                    if !upgraded {
                        deadline.arm();
                    }
                    answered
                }
            }))
        }
    });
    // tokio writes to its own wake-up descriptor whenever a new timer is due before all the
    // others, which a call's time-out is whenever the server is otherwise idle: a syscall and one
    // more turn of the loop per request at low load. A timer due within every second keeps the
    // time-outs (seconds long) behind it.
    let heartbeat = tokio::spawn(async {
        let mut beat = tokio::time::interval(HEARTBEAT);
        loop {
            beat.tick().await;
        }
    });
    let served = Server::builder(Limited::new(incoming, max_connections, header_timeout))
        .serve(make)
        .with_graceful_shutdown(async move { stopping.notified().await })
        .await
        .map_err(|e| e.to_string());
    heartbeat.abort();
    if let Some(settling) = settling {
        settling.abort(); // after the last request: none waits on it
    }
    served
}

async fn answer(
    state: Arc<State>,
    peer: Arc<str>,
    mut request: Request<Body>,
) -> Result<Response<Body>, Infallible> {
    let websocket_key = match state.websocket_handler {
        Some(_) => websocket_key(&request),
        None => None,
    };
    let upgrading = websocket_key.as_ref().map(|_| hyper::upgrade::on(&mut request));
    let (head, body) = request.into_parts();
    let reading = read_within(body, declared_length(&head.headers), state.max_body_bytes);
    let Ok(body) = tokio::time::timeout(state.body_timeout, reading).await else {
        return Ok(too_slow());
    };
    let header = |name: &str| head.headers.get(name).and_then(|v| v.to_str().ok());
    let path = head.uri.path();
    let asked = |body| Asked {
        path,
        origin: header("origin"),
        referer: header("referer"),
        content_type: header("content-type"),
        body,
    };
    // Time spent on calls sent under decisions before the handler got the request, and what
    // their nodes did: the pipeline's first attempts.
    let (mut waited, mut attempts) = (0.0, Vec::new());
    let mut calls = None;
    let applying = match (&state.decisions, &body, &websocket_key) {
        (Some(decisions), Some(body), None) if head.method == Method::POST && keyed(path) => {
            Some((decisions, body))
        }
        _ => None,
    };
    if let Some((decisions, body)) = applying {
        if decisions.memo.holds_any() {
            calls = decisions.memo.read(body);
            let plan = calls.as_ref().and_then(|read| decisions.memo.plan(&asked(body), read));
            if let Some(plan) = plan {
                let shared = &state.shared;
                let applying = Applying {
                    upstream: &shared.upstream,
                    flights: &shared.flights,
                    memo: &decisions.memo,
                    settler: &decisions.settler,
                };
                match serve(applying, plan, body).await {
                    Served::Answer(response) => return Ok(response),
                    Served::Pipeline { attempts: made, waited: spent } => {
                        (attempts, waited) = (made, spent);
                    }
                }
            }
        }
    }
    // What the handler's decisions are installed under, once it has answered.
    let install = applying.map(|(decisions, body)| Install {
        memo: decisions.memo.clone(),
        path: path.to_owned(),
        origin: header("origin").map(str::to_owned),
        referer: header("referer").map(str::to_owned),
        content_type: header("content-type").map(str::to_owned),
        body: body.clone(),
        calls,
    });
    // One GIL acquisition starts the handler and runs it up to its first wait; one more per
    // wait resumes it, and the last one also turns its answer into the response.
    let mut kept: Option<PyObject> = None; // the request, for the WebSocket handler
    let types = state.shared.types.clone();
    let started = Python::with_gil(|py| {
        let request = http_request_of(
            py,
            &types,
            &head,
            &peer,
            body.as_ref(),
            websocket_key.as_deref(),
            waited,
            attempts,
        );
        if let (Ok(request), Some(_)) = (&request, &upgrading) {
            kept = Some(request.clone_ref(py));
        }
        let coroutine = request.and_then(|request| state.handler.call1(py, (request,)));
        let first = coroutine.and_then(|c| Ok((start(py, &state.shared, c.as_ref(py))?, c)));
        match first {
            Ok((Step::Done(answer), _)) => {
                Started::Answered(finish(py, &types, Ok(answer), install))
            }
            Ok((step, coroutine)) => Started::Waiting(step, coroutine, install),
            Err(error) => Started::Answered(finish(py, &types, Err(error), install)),
        }
    });
    let mut response = match started {
        Started::Waiting(step, coroutine, install) => {
            let types = types.clone();
            let finishing = move |py: Python<'_>, outcome| finish(py, &types, outcome, install);
            drive_from(state.shared.clone(), coroutine, step, finishing).await
        }
        Started::Answered(response) => response,
    };
    if body.is_none() {
        // The rest of an over-size body was never read: the connection cannot carry another.
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    if let (Some(upgrade), Some(request)) = (upgrading, kept) {
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            tokio::spawn(relay_websocket(state, upgrade, request));
        }
    }
    Ok(response)
}

/// The `Sec-WebSocket-Key` of a well-formed WebSocket upgrade request (RFC 6455, 4.2.1).
fn websocket_key(request: &Request<Body>) -> Option<String> {
    let headers = request.headers();
    let value = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let upgrades = value(UPGRADE).is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let connection = value(CONNECTION)
        .is_some_and(|v| v.split(',').any(|token| token.trim().eq_ignore_ascii_case("upgrade")));
    let version = value(SEC_WEBSOCKET_VERSION) == Some("13");
    let key = value(SEC_WEBSOCKET_KEY).filter(|key| !key.is_empty() && key.len() <= 64)?;
    (request.method() == Method::GET && upgrades && connection && version).then(|| key.to_owned())
}

/// After the 101: relay the client's connection, byte for byte, to one end of a socket pair,
/// and give the other end's descriptor to the Python WebSocket handler (which runs the session
/// on the worker's event loop).
async fn relay_websocket(state: Arc<State>, upgrade: OnUpgrade, request: PyObject) {
    let Ok(mut client) = upgrade.await else {
        return;
    };
    let Ok((mut ours, theirs)) = tokio::net::UnixStream::pair() else {
        return;
    };
    let handed = theirs.into_std().and_then(|theirs| {
        theirs.set_nonblocking(false)?;
        Ok(theirs.into_raw_fd())
    });
    let Ok(fd) = handed else {
        return;
    };
    let taken = Python::with_gil(|py| match &state.websocket_handler {
        Some(handler) => handler.call1(py, (request, fd)).map(|_| true).unwrap_or_else(|error| {
            log_failure(py, error);
            false
        }),
        None => false,
    });
    if !taken {
        // SAFETY: the descriptor is ours alone: nothing took it.
        unsafe { libc::close(fd) };
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut ours).await;
}

/// HTTP 408 for a body that did not arrive in time; the connection is not kept.
fn too_slow() -> Response<Body> {
    let mut response = Response::new(Body::from(BODY_TIMED_OUT));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

enum Started {
    Waiting(Step, PyObject, Option<Install>),
    Answered(Response<Body>),
}

/// Whether `path` is the keyed RPC route, the one decisions are made for.
fn keyed(path: &str) -> bool {
    path.starts_with("/rpc/") && !path.starts_with("/rpc/evm/")
}

/// The contract's `HttpRequest` for a request, with the calls sent for it under decisions.
#[allow(clippy::too_many_arguments)] // the request's parts, each named
fn http_request_of(
    py: Python<'_>,
    types: &Types,
    head: &hyper::http::request::Parts,
    peer: &str,
    body: Option<&Bytes>,
    websocket_key: Option<&str>,
    waited: f64,
    attempts: Vec<Made>,
) -> PyResult<PyObject> {
    let header = |name: &str| head.headers.get(name).and_then(|v| v.to_str().ok()).into_py(py);
    let made = PyList::empty(py);
    for attempt in attempts {
        made.append(attempted_of(py, types, attempt)?)?;
    }
    let mut values = fields();
    values[http_request::METHOD] = Some(method_name(py, &head.method).into_py(py));
    values[http_request::PATH] = Some(head.uri.path().into_py(py));
    values[http_request::ORIGIN] = Some(header("origin"));
    values[http_request::REFERER] = Some(header("referer"));
    values[http_request::FORWARDED_FOR] = Some(header("x-forwarded-for"));
    values[http_request::CONTENT_TYPE] = Some(header("content-type"));
    values[http_request::PEER] = Some(peer.into_py(py));
    values[http_request::BODY] = Some(body.map(|b| PyBytes::new(py, b)).into_py(py));
    values[http_request::WEBSOCKET_KEY] = Some(websocket_key.into_py(py));
    values[http_request::WAITED_S] = Some(waited.into_py(py));
    values[http_request::ATTEMPTS] = Some(made.into_py(py));
    types.request.build(py, values)
}

fn attempted_of(py: Python<'_>, types: &Types, made: Made) -> PyResult<PyObject> {
    let (answer, failure) = match made.outcome {
        Ok(answer) => (Some(PyObject::from(PyBytes::new(py, &answer))), None),
        Err(failure) => {
            (None, Some(types.failure(py, failure.kind, &failure.detail, failure.status)?))
        }
    };
    let mut values = fields();
    values[attempted::CALL] = Some(made.call.into_py(py));
    values[attempted::NODE_ID] = Some(made.node_id.into_py(py));
    values[attempted::ANSWER] = Some(answer.into_py(py));
    values[attempted::FAILURE] = Some(failure.into_py(py));
    values[attempted::ELAPSED_S] = Some(made.elapsed.into_py(py));
    values[attempted::TIMEOUT_S] = Some(made.timeout.as_secs_f64().into_py(py));
    types.attempted.build(py, values)
}

/// What a request's decisions are kept under: its fields, and its calls once read.
struct Install {
    memo: Arc<Memo>,
    path: String,
    origin: Option<String>,
    referer: Option<String>,
    content_type: Option<String>,
    body: Bytes,
    calls: Option<Calls>,
}

impl Install {
    fn run(self, py: Python<'_>, types: &Types, decisions: &PyList) -> PyResult<()> {
        let Install { memo, path, origin, referer, content_type, body, calls } = self;
        let Some(calls) = calls.or_else(|| memo.read(&body)) else {
            return Ok(()); // not a body the memo can key: nothing to keep
        };
        let asked = Asked {
            path: &path,
            origin: origin.as_deref(),
            referer: referer.as_deref(),
            content_type: content_type.as_deref(),
            body: &body,
        };
        memo.install(py, types, &asked, &calls, decisions)?;
        Ok(())
    }
}

/// The handler's answer as a response, its decisions kept; a 500 with a JSON-RPC error if it
/// failed or is malformed.
fn finish(
    py: Python<'_>,
    types: &Types,
    outcome: PyResult<PyObject>,
    install: Option<Install>,
) -> Response<Body> {
    let answered = outcome.and_then(|answer| {
        let response = response_of(py, types, answer.as_ref(py))?;
        let decisions: &PyList =
            types.answer.get(answer.as_ref(py), http_answer::DECISIONS)?.downcast()?;
        if let (Some(install), false) = (install, decisions.is_empty()) {
            if let Err(error) = install.run(py, types, decisions) {
                // The answer goes out all the same; only its decisions are not applied.
                log_error(py, LOGGER, "the decisions of an answer could not be kept", error);
            }
        }
        Ok(response)
    });
    match answered {
        Ok(response) => response,
        Err(error) => {
            log_failure(py, error);
            let mut response = Response::new(Body::from(INTERNAL_ERROR));
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            response
                .headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            response
        }
    }
}

/// A failed or malformed answer is a bug in the handler: it goes to the process's log, with
/// its traceback, as the pipeline's own failures do (`http_face`), not straight to stderr.
fn log_failure(py: Python<'_>, error: PyErr) {
    log_error(py, LOGGER, "the request handler failed; answered 500", error);
}

fn declared_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// The body, or None once it is known to be larger than `max` (the rest is not read).
async fn read_within(mut body: Body, declared: Option<u64>, max: usize) -> Option<Bytes> {
    if declared.is_some_and(|n| n > max as u64) {
        return None;
    }
    let first = match body.data().await {
        None => return Some(Bytes::new()),
        Some(chunk) => chunk.ok()?,
    };
    let mut whole: Vec<u8> = Vec::new();
    let mut next = body.data().await;
    if next.is_none() {
        return (first.len() <= max).then_some(first);
    }
    whole.extend_from_slice(&first);
    while let Some(chunk) = next {
        let chunk = chunk.ok()?;
        if whole.len() + chunk.len() > max {
            return None;
        }
        whole.extend_from_slice(&chunk);
        next = body.data().await;
    }
    (whole.len() <= max).then(|| Bytes::from(whole))
}

/// The handler's `HttpAnswer` as a hyper response.
fn response_of(py: Python<'_>, types: &Types, answer: &PyAny) -> PyResult<Response<Body>> {
    let _ = py;
    let status: u16 = types.answer.get(answer, http_answer::STATUS)?.extract()?;
    let headers: &PyList = types.answer.get(answer, http_answer::HEADERS)?.downcast()?;
    let body: &PyBytes = types.answer.get(answer, http_answer::BODY)?.downcast()?;
    let mut response = Response::new(Body::from(Bytes::copy_from_slice(body.as_bytes())));
    *response.status_mut() = StatusCode::from_u16(status)
        .map_err(|_| PyValueError::new_err(format!("{status} is not an HTTP status")))?;
    let map = response.headers_mut();
    for pair in headers {
        let (name, value): (&str, &str) = pair.extract()?;
        let value = match value {
            "application/json" => HeaderValue::from_static("application/json"),
            _ => HeaderValue::from_str(value)
                .map_err(|_| PyValueError::new_err(format!("bad value for header {name}")))?,
        };
        map.append(header_name(name)?, value);
    }
    Ok(response)
}

/// The names the handler sends on every answer are known here, and cost no parsing.
fn header_name(name: &str) -> PyResult<HeaderName> {
    Ok(match name {
        "content-type" => CONTENT_TYPE,
        "x-batch-id" => HeaderName::from_static("x-batch-id"),
        "access-control-allow-origin" => ACCESS_CONTROL_ALLOW_ORIGIN,
        "access-control-expose-headers" => ACCESS_CONTROL_EXPOSE_HEADERS,
        "vary" => VARY,
        _ => HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| PyValueError::new_err(format!("bad header name {name:?}")))?,
    })
}

fn method_name<'py>(py: Python<'py>, method: &Method) -> &'py PyString {
    if method == Method::POST {
        intern!(py, "POST")
    } else {
        PyString::new(py, method.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::read_within;
    use hyper::body::{Body, Bytes};

    fn read(body: Body, declared: Option<u64>, max: usize) -> Option<Bytes> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(read_within(body, declared, max))
    }

    fn chunked(chunks: &[&'static [u8]]) -> Body {
        let stream = futures_util::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from_static(c)))
                .collect::<Vec<_>>(),
        );
        Body::wrap_stream(stream)
    }

    #[test]
    fn a_body_within_the_limit_is_read_whole_in_one_piece_or_several() {
        assert_eq!(read(Body::from("{}"), Some(2), 2).as_deref(), Some(&b"{}"[..]));
        assert_eq!(read(chunked(&[b"ab", b"cd"]), None, 4).as_deref(), Some(&b"abcd"[..]));
        assert_eq!(read(Body::empty(), Some(0), 2).as_deref(), Some(&b""[..]));
    }

    #[test]
    fn a_body_over_the_limit_is_not_read_whether_declared_or_streamed() {
        assert_eq!(read(Body::from("{}"), Some(3), 2), None); // declared: nothing is read
        assert_eq!(read(chunked(&[b"ab", b"cd", b"e"]), None, 4), None);
        assert_eq!(read(Body::from("abc"), None, 2), None);
    }
}
