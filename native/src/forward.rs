//! Repeated forwards: a call the Python pipeline forwarded to a node, and the node answered
//! plainly, is sent by this server alone to the same node when it comes again, and the answer
//! given once Python has billed it.
//!
//! The pipeline decides (docs/router.md, "Repeated forwards"): it hands a forward over
//! (`ReplayMemo.install_forward`) only for a read, from a key without a rate limit of its own,
//! that its first choice of node answered at the first try with a `result`, to a node without
//! rate limits. The memo keys it like a replay (replay.rs): every byte the pipeline read but the
//! call's id. The server then sends the body the pipeline sent, under the caller's id, to the same
//! node, within the time the pipeline would have waited before trying another node.
//!
//! Identical read-only calls in flight at once share one attempt (coalescing, as the pipeline's
//! flights do in router/flights.py): a grant with a flight key (the call's `cache_key`) is
//! repeated by one repeat at a time, which leads a flight; the repeats of that key meanwhile,
//! of any grant, join it and are given the leader's result under their own ids, and the
//! pipeline's calls of that key may `follow` it (their futures handed back to `settle`). While
//! the pipeline itself leads that key's flight (`flying` .. `landed`), repeats go to it.
//!
//! Nothing is answered before Python has billed it: the host's `settle`, given the fields of
//! `contract::SETTLE_FORWARD` for each repeat whose node has answered (`Settler`, in groups),
//! checks again what may have changed since the forward was handed over (the node's health and
//! cooldown, the key's seen head, the credits) and meters the call, its journal line written, as
//! the pipeline's closing stages would. Whatever is not a plain answer (a failure, an error, another id, a time-out),
//! and any call `settle` refuses, is forgotten and the request goes to the pipeline as if it had
//! never come here: the node's failure is never billed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Body, Response};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use tokio::sync::{oneshot, watch, Notify};

use crate::driver::{log_error, FailedAttempt};
use crate::replay::{hex_quantity, one_call, plain_answer, Memo};
use crate::upstream::Upstream;

const LOGGER: &str = "chainrouter.router.executors.native";

/// One forward to repeat.
pub struct Grant {
    pub token: u64,
    url: String,
    /// The body the pipeline sent the node, around the call's id.
    before_id: Bytes,
    sent_id: Bytes,
    after_id: Bytes,
    timeout: Duration,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The call's flight key (its `cache_key`): identical calls at once share one attempt
    /// (coalescing). None: every repeat goes to the node.
    flight: Option<Arc<str>>,
    /// `settle` is told the block the answer names (an `eth_blockNumber`: the key's head).
    hand_head: bool,
}

impl Grant {
    /// None when `sent` is not one call with one id echoed byte for byte.
    #[allow(clippy::too_many_arguments)] // each part of the forward, named by the caller
    pub fn new(
        token: u64,
        url: String,
        sent: &[u8],
        timeout: Duration,
        headers: Vec<(HeaderName, HeaderValue)>,
        flight: Option<String>,
        hand_head: bool,
    ) -> Option<Grant> {
        let (start, end) = one_call(sent)?;
        Some(Grant {
            token,
            url,
            before_id: Bytes::copy_from_slice(&sent[..start]),
            sent_id: Bytes::copy_from_slice(&sent[start..end]),
            after_id: Bytes::copy_from_slice(&sent[end..]),
            timeout,
            headers,
            flight: flight.map(Arc::from),
            hand_head,
        })
    }

    /// The id the pipeline's forward carried: the request's, which the memo checks.
    pub fn sent_id(&self) -> &[u8] {
        &self.sent_id
    }

    /// Bytes it holds, for the memo's bound.
    pub fn size(&self) -> usize {
        let headers: usize = self.headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
        let flight = self.flight.as_deref().map_or(0, str::len);
        self.url.len()
            + self.before_id.len()
            + self.sent_id.len()
            + self.after_id.len()
            + headers
            + flight
    }

    fn body_for(&self, id: &[u8]) -> Bytes {
        let mut body = Vec::with_capacity(self.before_id.len() + id.len() + self.after_id.len());
        body.extend_from_slice(&self.before_id);
        body.extend_from_slice(id);
        body.extend_from_slice(&self.after_id);
        Bytes::from(body)
    }
}

/// How a repeat's node call ended, as its joiners see it: the node's answer and the span of
/// its `result` when it answered plainly, else None.
type Landing = Option<(Bytes, (usize, usize))>;

/// A flight a repeat leads.
struct RepeatFlight {
    serial: u64,
    /// The leading repeat's grant token, for its joiners' `settle`.
    leader: u64,
    /// Its landing, once it has landed; closed unlanded if the leader was dropped.
    landing: watch::Receiver<Option<Landing>>,
    /// The futures of the pipeline's calls that follow it, for `settle`.
    followers: Vec<PyObject>,
}

#[derive(Default)]
struct Flying {
    /// Flight key -> the pipeline's calls leading it now.
    pipeline: HashMap<Arc<str>, usize>,
    /// Flight key -> the repeat leading it now.
    repeats: HashMap<Arc<str>, RepeatFlight>,
    serials: u64,
}

/// The flights in the air now, by flight key: the pipeline's (counted) and the repeats'. An
/// entry lives only while its flight does.
#[derive(Default)]
pub struct Flights {
    inner: Mutex<Flying>,
}

/// What a repeat of a grant with a flight key does.
enum Role {
    /// The pipeline leads the flight: the request is the pipeline's, to join.
    Pipeline,
    /// A repeat leads it: wait for its landing.
    Join { leader: u64, landing: watch::Receiver<Option<Landing>> },
    /// Lead it.
    Lead { serial: u64, landed: watch::Sender<Option<Landing>> },
}

impl Flights {
    fn lock(&self) -> MutexGuard<'_, Flying> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A pipeline call leads the flight `flight`.
    pub fn flying(&self, flight: &str) {
        *self.lock().pipeline.entry(Arc::from(flight)).or_insert(0) += 1;
    }

    /// A pipeline call that led `flight` ended (harmless without a `flying`).
    pub fn landed(&self, flight: &str) {
        let mut inner = self.lock();
        if let Some(count) = inner.pipeline.get_mut(flight) {
            *count -= 1;
            if *count == 0 {
                inner.pipeline.remove(flight);
            }
        }
    }

    /// Make `future` a follower of the repeat leading `flight`, if one does now.
    pub fn follow(&self, flight: &str, future: PyObject) -> bool {
        match self.lock().repeats.get_mut(flight) {
            Some(repeat) => {
                repeat.followers.push(future);
                true
            }
            None => false,
        }
    }

    /// The role of a repeat of grant `token` in the flight `flight`.
    fn board(&self, flight: &Arc<str>, token: u64) -> Role {
        let mut inner = self.lock();
        if inner.pipeline.contains_key(&**flight) {
            return Role::Pipeline;
        }
        if let Some(repeat) = inner.repeats.get(&**flight) {
            return Role::Join { leader: repeat.leader, landing: repeat.landing.clone() };
        }
        inner.serials += 1;
        let serial = inner.serials;
        let (landed, landing) = watch::channel(None);
        let repeat = RepeatFlight { serial, leader: token, landing, followers: Vec::new() };
        inner.repeats.insert(flight.clone(), repeat);
        Role::Lead { serial, landed }
    }

    /// End the repeat flight `serial` of `flight`: its followers.
    fn land(&self, flight: &str, serial: u64) -> Vec<PyObject> {
        let mut inner = self.lock();
        match inner.repeats.get(flight) {
            Some(repeat) if repeat.serial == serial => {
                inner.repeats.remove(flight).map(|r| r.followers).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }

    /// `(pipeline flights, repeat flights)` in the air: for the tests.
    #[cfg(test)]
    fn in_air(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.pipeline.len(), inner.repeats.len())
    }
}

/// A repeat leading a flight: however it ends, its flight lands. Dropped before it landed (the
/// client went away mid-flight), it sends its joiners to the pipeline and hands its followers
/// to `settle` as unanswered.
struct Leading<'a> {
    flights: &'a Flights,
    settler: &'a Settler,
    flight: Arc<str>,
    serial: u64,
    token: u64,
    started: Instant,
    landed: Option<watch::Sender<Option<Landing>>>,
}

impl Leading<'_> {
    /// Land with `landing`: the flight is left, its joiners told; its followers.
    fn land(&mut self, landing: Landing) -> Vec<PyObject> {
        let followers = self.flights.land(&self.flight, self.serial);
        if let Some(landed) = self.landed.take() {
            let _ = landed.send(Some(landing)); // no joiner: nobody to tell
        }
        followers
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if self.landed.is_none() {
            return;
        }
        let followers = self.flights.land(&self.flight, self.serial);
        self.landed = None; // closed unlanded: the joiners go to the pipeline
        if !followers.is_empty() {
            let (billed, _) = oneshot::channel(); // no verdict awaited: nobody to answer
            let elapsed = self.started.elapsed().as_secs_f64();
            self.settler.push(Pending {
                token: self.token,
                elapsed,
                answered: false,
                head: None,
                leader: 0,
                answer: None,
                followers,
                billed,
            });
        }
    }
}

/// What a repeat hands Python to settle: the fields of `contract::SETTLE_FORWARD`.
struct Pending {
    token: u64,
    elapsed: f64,
    answered: bool,
    head: Option<u64>,
    /// 0 for a repeat that went to the node; the leading repeat's grant token for a joiner.
    leader: u64,
    /// The node's answer, for the followers.
    answer: Option<Bytes>,
    followers: Vec<PyObject>,
    billed: oneshot::Sender<bool>,
}

/// Settles repeats in groups: every repeat whose node has answered waits here until the host's
/// `settle` has billed it. One GIL acquisition and one call settle all that are waiting, so a
/// loaded server pays for Python once per group rather than once per request, and no answer
/// leaves before its usage is in the journal (group commit).
pub struct Settler {
    settle: PyObject,
    waiting: Mutex<Vec<Pending>>,
    wake: Notify,
}

impl Settler {
    pub fn new(settle: PyObject) -> Settler {
        Settler { settle, waiting: Mutex::new(Vec::new()), wake: Notify::new() }
    }

    /// Queue `pending` for the next group.
    fn push(&self, pending: Pending) {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).push(pending);
        self.wake.notify_one();
    }

    /// Whether Python billed the repeat.
    async fn settle(&self, pending: Pending, receiver: oneshot::Receiver<bool>) -> bool {
        self.push(pending);
        receiver.await.unwrap_or(false)
    }

    /// Settle what is waiting, group by group, for as long as the server runs.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            let group =
                std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
            if group.is_empty() {
                continue;
            }
            Python::with_gil(|py| {
                let billed = self.call(py, &group);
                for (pending, billed) in group.into_iter().zip(billed) {
                    let _ = pending.billed.send(billed); // a client gone meanwhile: nothing to tell
                }
            });
        }
    }

    /// The host's verdict on each of `group`, in order; all false if it failed.
    fn call(&self, py: Python<'_>, group: &[Pending]) -> Vec<bool> {
        // The fields of `contract::SETTLE_FORWARD`, in its order.
        let items = PyList::empty(py);
        for pending in group {
            let answer = pending.answer.as_ref().map(|a| PyObject::from(PyBytes::new(py, a)));
            let followers = (!pending.followers.is_empty())
                .then(|| PyObject::from(PyList::new(py, &pending.followers)));
            let item = (
                pending.token,
                pending.elapsed,
                pending.answered,
                pending.head,
                pending.leader,
                answer,
                followers,
            );
            if items.append(item).is_err() {
                return vec![false; group.len()];
            }
        }
        let verdicts =
            self.settle.call1(py, (items,)).and_then(|verdicts| verdicts.extract::<Vec<bool>>(py));
        match verdicts {
            Ok(verdicts) if verdicts.len() == group.len() => verdicts,
            Ok(_) => {
                let error = PyValueError::new_err("settle gave another number of verdicts");
                log_error(py, LOGGER, "settling repeated forwards failed", error);
                vec![false; group.len()]
            }
            Err(error) => {
                log_error(py, LOGGER, "settling repeated forwards failed", error);
                vec![false; group.len()]
            }
        }
    }
}

/// A repeat's call to its node.
struct Sent {
    landing: Landing,
    elapsed: f64,
    /// The attempt, if the node failed it: the pipeline's first (`driver::after_failed`).
    failed: Option<FailedAttempt>,
}

/// Send `grant`'s call under `id` to its node.
async fn send(upstream: &Upstream, grant: &Grant, id: &[u8]) -> Sent {
    let started = Instant::now();
    let body = grant.body_for(id);
    let answered = upstream.post(&grant.url, body.clone(), grant.timeout).await;
    let elapsed = started.elapsed().as_secs_f64();
    match answered {
        Ok(answer) => {
            let landing = plain_answer(&answer, id).map(|result| (answer, result));
            Sent { landing, elapsed, failed: None }
        }
        Err(failure) => {
            let url = grant.url.clone();
            let failed = Some(FailedAttempt { url, body, waited: grant.timeout, failure });
            Sent { landing: None, elapsed, failed }
        }
    }
}

/// The block a result names, if the grant hands heads.
fn head_of(grant: &Grant, landing: &Landing) -> Option<u64> {
    match landing {
        Some((answer, (start, end))) if grant.hand_head => hex_quantity(&answer[*start..*end]),
        _ => None,
    }
}

/// `body` with the grant's headers and a fresh batch id.
fn respond(memo: &Memo, grant: &Grant, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    for (name, value) in &grant.headers {
        headers.append(name.clone(), value.clone());
    }
    if let Ok(value) = HeaderValue::from_str(&memo.next_batch_id()) {
        headers.insert(HeaderName::from_static("x-batch-id"), value);
    }
    response
}

/// How a repeat ended.
pub enum Repeated {
    /// Billed: the answer to write.
    Answered(Response<Body>),
    /// The pipeline's to answer, with the node's failure if the repeat's node failed it: that
    /// stands for the pipeline's first attempt (`driver::after_failed`), so a failing node is
    /// not asked the same call twice before the pipeline fails over.
    Pipeline(Option<FailedAttempt>),
}

/// Repeat `grant` for the call whose id is `id` (the caller's bytes). The grant is forgotten if
/// the node failed it or Python refused it.
pub async fn repeat(
    upstream: &Upstream,
    memo: &Memo,
    settler: &Settler,
    grant: Arc<Grant>,
    id: &[u8],
    key: &[u8],
) -> Repeated {
    let Some(flight) = grant.flight.clone() else {
        let sent = send(upstream, &grant, id).await;
        return settle_own(memo, settler, &grant, key, sent, Vec::new()).await;
    };
    match memo.flights.board(&flight, grant.token) {
        // The pipeline's flight: its coalescing joins the call.
        Role::Pipeline => Repeated::Pipeline(None),
        Role::Join { leader, landing } => {
            match join(memo, settler, &grant, id, key, leader, landing).await {
                Some(response) => Repeated::Answered(response),
                None => Repeated::Pipeline(None),
            }
        }
        Role::Lead { serial, landed } => {
            let mut leading = Leading {
                flights: &memo.flights,
                settler,
                flight,
                serial,
                token: grant.token,
                started: Instant::now(),
                landed: Some(landed),
            };
            let sent = send(upstream, &grant, id).await;
            let followers = leading.land(sent.landing.clone());
            settle_own(memo, settler, &grant, key, sent, followers).await
        }
    }
}

/// Settle a repeat that went to the node itself, with the followers of its flight.
async fn settle_own(
    memo: &Memo,
    settler: &Settler,
    grant: &Grant,
    key: &[u8],
    sent: Sent,
    followers: Vec<PyObject>,
) -> Repeated {
    let Sent { landing, elapsed, failed } = sent;
    let head = head_of(grant, &landing);
    let answer = match &landing {
        Some((answer, _)) if !followers.is_empty() => Some(answer.clone()),
        _ => None,
    };
    let (billed, receiver) = oneshot::channel();
    let pending = Pending {
        token: grant.token,
        elapsed,
        answered: landing.is_some(),
        head,
        leader: 0,
        answer,
        followers,
        billed,
    };
    let billed = settler.settle(pending, receiver).await;
    match landing {
        Some((answer, _)) if billed => Repeated::Answered(respond(memo, grant, answer)),
        _ => {
            memo.revoke(key, grant.token);
            Repeated::Pipeline(failed)
        }
    }
}

/// Join the flight the repeat of grant `leader` leads: its result under the caller's id, if it
/// landed with a plain answer and Python bills it; else None (the pipeline's).
async fn join(
    memo: &Memo,
    settler: &Settler,
    grant: &Grant,
    id: &[u8],
    key: &[u8],
    leader: u64,
    mut landing: watch::Receiver<Option<Landing>>,
) -> Option<Response<Body>> {
    let started = Instant::now();
    let landed = async {
        loop {
            let now = landing.borrow().clone();
            if let Some(landed) = now {
                return landed;
            }
            if landing.changed().await.is_err() {
                return None; // the leader was dropped: no answer
            }
        }
    };
    let landed = tokio::time::timeout(grant.timeout, landed).await.ok().flatten();
    let elapsed = started.elapsed().as_secs_f64();
    let head = head_of(grant, &landed);
    let Some((answer, (start, end))) = landed else {
        return None; // the leader's node failed it, or it took too long: not billed
    };
    let (billed, receiver) = oneshot::channel();
    let pending = Pending {
        token: grant.token,
        elapsed,
        answered: true,
        head,
        leader,
        answer: None,
        followers: Vec::new(),
        billed,
    };
    if !settler.settle(pending, receiver).await {
        memo.revoke(key, grant.token);
        return None;
    }
    let result = &answer[start..end];
    let mut body = Vec::with_capacity(40 + id.len() + result.len());
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id);
    body.extend_from_slice(br#","result":"#);
    body.extend_from_slice(result);
    body.push(b'}');
    Some(respond(memo, grant, Bytes::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Kind;
    use crate::replay::{scan, Asked, Found};
    use crate::upstream::UpstreamSettings;
    use pyo3::types::PyDict;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::thread;

    const AGE: Duration = Duration::from_secs(60);
    const CALL: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]}"#;
    const AGAIN: &[u8] =
        br#"{"jsonrpc":"2.0","id":"q-1","method":"eth_getBalance","params":["0xab","latest"]}"#;

    const PATH: &str = "/rpc/1/crk_x";

    fn asked(body: &[u8]) -> Asked<'_> {
        asked_at(PATH, body)
    }

    fn asked_at<'a>(path: &'a str, body: &'a [u8]) -> Asked<'a> {
        Asked {
            path,
            origin: Some("https://app.example"),
            referer: None,
            content_type: Some("application/json"),
            body,
        }
    }

    fn grant(sent: &[u8]) -> Option<Grant> {
        let url = "http://127.0.0.1:1/rpc".to_string();
        Grant::new(1, url, sent, Duration::from_secs(1), vec![], None, false)
    }

    fn header(name: &'static str, value: &'static str) -> (HeaderName, HeaderValue) {
        (HeaderName::from_static(name), HeaderValue::from_static(value))
    }

    // Grants.

    #[test]
    fn a_grant_is_one_call_with_a_plain_id_never_a_batch_a_notification_or_another_id() {
        assert_eq!(grant(CALL).unwrap().sent_id(), b"7");
        assert_eq!(grant(br#" {"id":"a-1","method":"m"} "#).unwrap().sent_id(), b"\"a-1\"");
        assert_eq!(grant(br#"{"id":null,"method":"m"}"#).unwrap().sent_id(), b"null");
        for sent in [
            &br#"[{"id":1,"method":"a"},{"id":2,"method":"b"}]"#[..],
            br#"[{"id":1,"method":"a"}]"#, // a batch of one is answered with an array
            br#" [ {"id":1,"method":"a"} ] "#,
            br#"{"jsonrpc":"2.0","method":"m"}"#, // a notification
            br#"{"id":1.0,"method":"m"}"#,        // an id not echoed byte for byte
            br#"{"id":1,"method":"m"} x"#,
            br#"{"id":1,"method":"m""#,
            b"",
        ] {
            assert!(grant(sent).is_none(), "{}", String::from_utf8_lossy(sent));
        }
    }

    #[test]
    fn a_grant_sends_the_body_it_was_given_with_the_callers_id_in_place_of_its_own() {
        let sent =
            b" {\"jsonrpc\":\"2.0\",\n \"id\" : 7 ,\"method\":\"m\",\"params\":[{\"id\":3}]}\n";
        let grant = grant(sent).unwrap();
        assert_eq!(&grant.body_for(b"7")[..], &sent[..]);
        let expected =
            b" {\"jsonrpc\":\"2.0\",\n \"id\" : \"q-1\" ,\"method\":\"m\",\"params\":[{\"id\":3}]}\n";
        assert_eq!(&grant.body_for(b"\"q-1\"")[..], &expected[..]);
        let with_null = String::from_utf8_lossy(sent).replacen('7', "null", 1);
        assert_eq!(&grant.body_for(b"null")[..], with_null.as_bytes());
    }

    #[test]
    fn a_grants_size_counts_its_url_body_and_headers() {
        let url = "http://node.example/rpc".to_string();
        let headers = vec![header("content-type", "application/json")];
        let grant = Grant::new(1, url.clone(), CALL, AGE, headers, None, false).unwrap();
        assert_eq!(grant.size(), url.len() + CALL.len() + "content-type".len() + 16);
        let flight = Some("eth_getBalance:0xab".to_string());
        let with_flight = Grant::new(1, url.clone(), CALL, AGE, vec![], flight, false).unwrap();
        assert_eq!(with_flight.size(), url.len() + CALL.len() + "eth_getBalance:0xab".len());
    }

    #[test]
    fn the_memo_finds_a_forward_whose_body_carries_the_callers_id_for_the_node() {
        let memo = Memo::new(1 << 20, 8192, AGE, "abc-r".into());
        assert!(memo.install_forward(0, &asked(CALL), grant(CALL).unwrap()));
        let Some(Found::Forward { grant, id, .. }) = memo.lookup(&asked(AGAIN)) else {
            panic!("no forward found");
        };
        assert_eq!(&AGAIN[id.0..id.1], b"\"q-1\"");
        assert_eq!(&grant.body_for(&AGAIN[id.0..id.1])[..], AGAIN);
    }

    // The host's `settle`, in Python.

    /// A `settle` item as the host saw it, its followers by identity (`id()`).
    type Item = (u64, f64, bool, Option<u64>, u64, Option<Vec<u8>>, Option<Vec<usize>>);

    /// A Python `settle` that notes each group it is given, then runs `body` (indented).
    struct Host {
        settle: PyObject,
        calls: PyObject,
    }

    fn host(body: &str) -> Host {
        pyo3::prepare_freethreaded_python();
        Python::with_gil(|py| {
            let globals = PyDict::new(py);
            let code = format!(
                "import logging\n\
                 logging.getLogger({LOGGER:?}).disabled = True  # the failures tested are logged\n\
                 calls = []\n\
                 def settle(items):\n    \
                 calls.append([(*i[:6], i[6] and [id(f) for f in i[6]]) for i in items])\n\
                 {body}\n"
            );
            py.run(&code, Some(globals), None).unwrap();
            let settle = globals.get_item("settle").unwrap().into();
            let calls = globals.get_item("calls").unwrap().into();
            Host { settle, calls }
        })
    }

    impl Host {
        /// Each group `settle` was called with, in order.
        fn calls(&self) -> Vec<Vec<Item>> {
            Python::with_gil(|py| self.calls.extract(py).unwrap())
        }

        fn settler(&self) -> Arc<Settler> {
            Arc::new(Settler::new(Python::with_gil(|py| self.settle.clone_ref(py))))
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// Settle `items`, all waiting at once, with a settler running as the server runs it.
    fn settle_at_once(settler: &Arc<Settler>, items: &[Item]) -> Vec<bool> {
        runtime().block_on(async {
            let running = tokio::spawn(settler.clone().run());
            let waiting = items.iter().map(|item| {
                let (token, elapsed, answered, head, leader, _, _) = item.clone();
                let answer = item.5.clone().map(Bytes::from);
                let (billed, receiver) = oneshot::channel();
                let pending = Pending {
                    token,
                    elapsed,
                    answered,
                    head,
                    leader,
                    answer,
                    followers: Vec::new(),
                    billed,
                };
                settler.settle(pending, receiver)
            });
            let verdicts = futures_util::future::join_all(waiting).await;
            running.abort();
            verdicts
        })
    }

    fn items() -> Vec<Item> {
        vec![
            (1, 0.5, true, None, 0, None, None),
            (2, 0.25, true, Some(16), 0, None, None),
            (3, 1.0, false, None, 0, None, None),
            (4, 0.0, true, None, 1, None, None),
        ]
    }

    #[test]
    fn the_repeats_waiting_at_once_are_settled_in_one_call_each_with_its_own_verdict_in_order() {
        let host = host("    return [token % 2 == 0 for token, *_ in items]");
        let settler = host.settler();
        assert_eq!(settle_at_once(&settler, &items()), vec![false, true, false, true]);
        assert_eq!(host.calls(), vec![items()]); // the fields of contract::SETTLE_FORWARD
        assert_eq!(settle_at_once(&settler, &items()[..1]), vec![false]);
        assert_eq!(settle_at_once(&settler, &items()[1..2]), vec![true]);
        assert_eq!(host.calls().len(), 3, "a repeat waiting alone is settled alone");
    }

    #[test]
    fn a_settle_that_raises_bills_nothing() {
        let host = host("    raise RuntimeError('the journal is gone')");
        assert_eq!(settle_at_once(&host.settler(), &items()), vec![false; 4]);
        assert_eq!(host.calls().len(), 1);
    }

    #[test]
    fn a_settle_that_gives_another_number_of_verdicts_bills_nothing() {
        let fewer = host("    return [True] * (len(items) - 1)");
        assert_eq!(settle_at_once(&fewer.settler(), &items()), vec![false; 4]);
        let more = host("    return [True] * (len(items) + 1)");
        assert_eq!(settle_at_once(&more.settler(), &items()), vec![false; 4]);
    }

    #[test]
    fn a_settle_whose_verdicts_are_not_booleans_bills_nothing() {
        for body in ["    return [1] * len(items)", "    return None", "    return 'yy'"] {
            let host = host(body);
            assert_eq!(settle_at_once(&host.settler(), &items()[..2]), vec![false; 2], "{body}");
        }
    }

    #[test]
    fn a_repeat_whose_client_went_away_leaves_the_others_of_its_group_their_verdicts() {
        let host = host("    return [True] * len(items)");
        let settler = host.settler();
        let (billed, gone) = oneshot::channel();
        drop(gone);
        let pending = Pending {
            token: 9,
            elapsed: 0.1,
            answered: true,
            head: None,
            leader: 0,
            answer: None,
            followers: Vec::new(),
            billed,
        };
        settler.waiting.lock().unwrap().push(pending);
        assert_eq!(settle_at_once(&settler, &items()[..1]), vec![true]);
        let tokens: Vec<Vec<u64>> =
            host.calls().iter().map(|c| c.iter().map(|i| i.0).collect()).collect();
        assert_eq!(tokens, vec![vec![9, 1]]);
    }

    // Repeats, end to end, against a node on 127.0.0.1.

    /// What a scripted node answers to a body: after how long, and the bytes of its answer.
    type Script = fn(&[u8]) -> (Duration, Vec<u8>);

    struct Node {
        url: String,
        bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Node {
        fn bodies(&self) -> Vec<Vec<u8>> {
            self.bodies.lock().unwrap().clone()
        }
    }

    fn node(script: Script) -> Node {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/rpc", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let seen = seen.clone();
                thread::spawn(move || serve(stream, script, &seen));
            }
        });
        Node { url, bodies }
    }

    fn serve(stream: TcpStream, script: Script, seen: &Mutex<Vec<Vec<u8>>>) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        loop {
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
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            seen.lock().unwrap().push(body.clone());
            let (after, answer) = script(&body);
            thread::sleep(after);
            if writer.write_all(&answer).is_err() {
                return; // the client gave up on it
            }
        }
    }

    fn http(status: u16, body: &[u8]) -> Vec<u8> {
        let head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n", body.len());
        [head.as_bytes(), body].concat()
    }

    /// A node's JSON-RPC answer to `body` under the id it was sent, with `members` after it.
    fn echoing(body: &[u8], members: &str) -> Vec<u8> {
        let (start, end) = scan(body).unwrap()[0];
        let id = String::from_utf8_lossy(&body[start..end]);
        http(200, format!(r#"{{"jsonrpc":"2.0","id":{id},{members}}}"#).as_bytes())
    }

    const NOW: Duration = Duration::ZERO;

    fn balance(body: &[u8]) -> (Duration, Vec<u8>) {
        (NOW, echoing(body, r#""result":"0x10""#))
    }

    fn slow_balance(body: &[u8]) -> (Duration, Vec<u8>) {
        (Duration::from_millis(500), echoing(body, r#""result":"0x10""#))
    }

    /// The memo, the client and the settler a server would repeat `CALL`'s forward with.
    struct Server {
        url: String,
        runtime: tokio::runtime::Runtime,
        memo: Memo,
        upstream: Upstream,
        settler: Arc<Settler>,
        host: Host,
    }

    const TOKEN: u64 = 41;

    fn server(
        node: &Node,
        settle: &str,
        timeout: Duration,
        flight: Option<&str>,
        head: bool,
    ) -> Server {
        let memo = Memo::new(1 << 20, 8192, AGE, "abc-r".into());
        let headers = vec![header("content-type", "application/json"), header("x-node", "a")];
        let url = node.url.clone();
        let flight = flight.map(str::to_string);
        let grant = Grant::new(TOKEN, url, CALL, timeout, headers, flight, head).unwrap();
        assert!(memo.install_forward(memo.generation(), &asked(CALL), grant));
        let upstream = Upstream::new(&UpstreamSettings {
            max_response_bytes: 1 << 16,
            connect_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(30),
            ca_file: None,
            user_agent: "test".into(),
            vet: None,
        })
        .unwrap();
        let host = host(settle);
        let settler = host.settler();
        Server { url: node.url.clone(), runtime: runtime(), memo, upstream, settler, host }
    }

    const YES: &str = "    return [True] * len(items)";
    const NO: &str = "    return [False] * len(items)";

    impl Server {
        /// The repeat of the forward `body` finds, as the server's `answer` makes it.
        async fn repeat(&self, body: &[u8]) -> Option<Response<Body>> {
            self.repeat_at(PATH, body).await
        }

        /// `repeat`, and how long it took.
        async fn timed(&self, body: &[u8]) -> (Option<Response<Body>>, Duration) {
            let started = Instant::now();
            let response = self.repeat(body).await;
            (response, started.elapsed())
        }

        /// The repeat of the forward a request to `path` finds: its answer, if billed.
        async fn repeat_at(&self, path: &str, body: &[u8]) -> Option<Response<Body>> {
            match self.repeated(path, body).await {
                Repeated::Answered(response) => Some(response),
                Repeated::Pipeline(_) => None,
            }
        }

        /// How the repeat of the forward a request to `path` finds ended.
        async fn repeated(&self, path: &str, body: &[u8]) -> Repeated {
            let Some(Found::Forward { grant, id, key }) = self.memo.lookup(&asked_at(path, body))
            else {
                panic!("no forward found");
            };
            repeat(&self.upstream, &self.memo, &self.settler, grant, &body[id.0..id.1], &key).await
        }

        /// `run` with the settler running beside it.
        fn run<T>(&self, run: impl std::future::Future<Output = T>) -> T {
            self.runtime.block_on(async {
                let settling = tokio::spawn(self.settler.clone().run());
                let out = run.await;
                settling.abort();
                out
            })
        }

        fn holds_forward(&self) -> bool {
            self.holds_forward_at(PATH)
        }

        fn holds_forward_at(&self, path: &str) -> bool {
            matches!(self.memo.lookup(&asked_at(path, CALL)), Some(Found::Forward { .. }))
        }

        /// Hand over another grant of `CALL`'s forward, for requests to `path` (another key).
        fn install_at(&self, path: &str, token: u64, flight: &str, head: bool) {
            let headers = vec![header("x-node", "b")];
            let (url, timeout, flight) = (self.url.clone(), Duration::from_secs(2), flight.into());
            let grant = Grant::new(token, url, CALL, timeout, headers, Some(flight), head).unwrap();
            let asked = asked_at(path, CALL);
            assert!(self.memo.install_forward(self.memo.generation(), &asked, grant));
        }

        /// A second grant, at OTHER_PATH, with the same flight key as the first: the first
        /// grant's repeat, then 100 ms later the second's, which joins it in the air.
        fn another_grant_joins(
            &self,
            head: bool,
        ) -> (Option<Response<Body>>, Option<Response<Body>>) {
            self.install_at(OTHER_PATH, OTHER_TOKEN, FLIGHT, head);
            self.run(futures_util::future::join(
                self.repeat(AGAIN),
                after(100, self.repeat_at(OTHER_PATH, CALL)),
            ))
        }

        /// Each item `settle` was given, in the order given.
        fn items(&self) -> Vec<Item> {
            self.host.calls().into_iter().flatten().collect()
        }

        /// `(pipeline, repeat)` flights in the air.
        fn in_air(&self) -> (usize, usize) {
            self.memo.flights.in_air()
        }

        fn body_of(&self, response: Response<Body>) -> Vec<u8> {
            self.runtime.block_on(hyper::body::to_bytes(response.into_body())).unwrap().to_vec()
        }
    }

    #[test]
    fn a_repeat_python_bills_is_the_nodes_answer_with_the_grants_headers_and_a_fresh_batch_id() {
        let node = node(balance);
        let server = server(&node, YES, Duration::from_secs(2), None, false);
        let response = server.run(server.repeat(AGAIN)).unwrap();
        assert_eq!(node.bodies(), vec![AGAIN.to_vec()], "the pipeline's body, the caller's id");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.headers()["x-node"], "a");
        assert_eq!(response.headers()["x-batch-id"], "abc-r1");
        assert_eq!(server.memo.next_batch_id(), "abc-r2"); // one sequence with the pipeline's
        let answer = br#"{"jsonrpc":"2.0","id":"q-1","result":"0x10"}"#;
        assert_eq!(server.body_of(response), answer);
        let calls = server.host.calls();
        assert_eq!(calls.len(), 1);
        let [(token, elapsed, answered, head, leader, ref answer, ref followers)] = calls[0][..]
        else {
            panic!("{calls:?}")
        };
        assert_eq!((token, answered, head, leader), (TOKEN, true, None, 0)); // no head unless asked
        assert_eq!((answer, followers), (&None, &None), "no followers, no answer for them");
        assert!(elapsed > 0.0 && elapsed < 2.0, "{elapsed}");
        assert!(server.holds_forward(), "repeated again next time");
        assert_eq!(server.memo.drain(), (vec![], vec![]), "a repeat is no replay to count");
    }

    #[test]
    fn a_repeat_of_an_eth_block_number_hands_python_the_block_its_answer_names() {
        fn head(body: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, echoing(body, r#""result":"0x1b4""#))
        }
        let node = node(head);
        let server = server(&node, YES, Duration::from_secs(2), None, true);
        assert!(server.run(server.repeat(AGAIN)).is_some());
        assert_eq!(server.host.calls()[0][0].3, Some(0x1b4));
    }

    #[test]
    fn a_repeat_python_refuses_goes_to_the_pipeline_and_its_grant_is_forgotten() {
        let node = node(balance);
        let server = server(&node, NO, Duration::from_secs(2), None, false);
        assert!(server.run(server.repeat(AGAIN)).is_none());
        assert!(server.host.calls()[0][0].2, "the node did answer");
        assert!(!server.holds_forward());
        assert_eq!(server.memo.drain(), (vec![], vec![TOKEN]));
        assert_eq!(server.memo.stats(), (0, 0));
    }

    #[test]
    fn a_node_answer_that_is_not_plain_is_never_given_even_if_python_would_bill_it() {
        fn error(body: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, echoing(body, r#""error":{"code":-32000,"message":"header not found"}"#))
        }
        fn extra(body: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, echoing(body, r#""result":"0x10","cached":true"#))
        }
        fn other_id(_: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, http(200, br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#))
        }
        fn failed(body: &[u8]) -> (Duration, Vec<u8>) {
            let (_, answer) = balance(body);
            (NOW, [b"HTTP/1.1 502 X".as_slice(), &answer[b"HTTP/1.1 200 X".len()..]].concat())
        }
        fn truncated(body: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, http(200, &echoing(body, r#""result":"0x10""#)[..60]))
        }
        for script in [error as Script, extra, other_id, failed, truncated] {
            let node = node(script);
            let server = server(&node, YES, Duration::from_secs(2), None, false);
            assert!(server.run(server.repeat(AGAIN)).is_none());
            assert_eq!(node.bodies().len(), 1);
            let calls = server.host.calls();
            assert_eq!((calls[0][0].0, calls[0][0].2), (TOKEN, false), "told unanswered");
            assert!(!server.holds_forward());
            assert_eq!(server.memo.drain(), (vec![], vec![TOKEN]));
        }
    }

    #[test]
    fn a_repeat_its_node_failed_hands_the_pipeline_that_attempt_and_no_other_ending_does() {
        fn failed(_: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, http(503, b"down"))
        }
        fn error(body: &[u8]) -> (Duration, Vec<u8>) {
            (NOW, echoing(body, r#""error":{"code":-32000,"message":"header not found"}"#))
        }
        let attempt_of = |script: Script, settle: &str, timeout: Duration| {
            let node = node(script);
            let server = server(&node, settle, timeout, None, false);
            let Repeated::Pipeline(attempt) = server.run(server.repeated(PATH, AGAIN)) else {
                panic!("answered");
            };
            (attempt, node)
        };
        let (attempt, node) = attempt_of(failed, YES, SECOND);
        let attempt = attempt.expect("the node failed it");
        assert_eq!((attempt.url.as_str(), &attempt.body[..]), (node.url.as_str(), AGAIN));
        assert_eq!(node.bodies(), vec![AGAIN.to_vec()], "the body the node was sent");
        assert_eq!((attempt.failure.kind, attempt.failure.status), (Kind::HttpStatus, Some(503)));
        assert_eq!(attempt.waited, SECOND);
        let (timed_out, _) = attempt_of(slow_balance, YES, Duration::from_millis(100));
        let timed_out = timed_out.expect("the node failed it");
        assert_eq!(timed_out.failure.kind, Kind::Timeout);
        assert_eq!(timed_out.waited, Duration::from_millis(100));
        // An answer, even an error, is the pipeline's to ask for again and judge; so is one
        // Python refused to bill.
        assert!(attempt_of(error, YES, SECOND).0.is_none());
        assert!(attempt_of(balance, NO, SECOND).0.is_none());
    }

    #[test]
    fn a_repeat_the_node_answers_too_late_goes_to_the_pipeline_and_its_grant_is_forgotten() {
        let node = node(slow_balance);
        let server = server(&node, YES, Duration::from_millis(100), None, false);
        let started = Instant::now();
        assert!(server.run(server.repeat(AGAIN)).is_none());
        assert!(started.elapsed() < Duration::from_millis(450), "{:?}", started.elapsed());
        let (_, elapsed, answered, ..) = server.host.calls()[0][0];
        assert!(!answered);
        assert!((0.09..0.45).contains(&elapsed), "{elapsed}");
        assert!(!server.holds_forward());
    }

    // Coalescing: identical calls in flight at once share one node call.

    const FLIGHT: &str = "1:eth_getBalance:[\"0xab\",\"latest\"]";
    const OTHER_PATH: &str = "/rpc/1/crk_y";
    const OTHER_TOKEN: u64 = 42;
    const SECOND: Duration = Duration::from_secs(2);

    async fn after<T>(wait: u64, run: impl std::future::Future<Output = T>) -> T {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        run.await
    }

    /// A stand-in for a pipeline call's future: a fresh Python list, and its identity.
    fn future() -> (PyObject, usize) {
        Python::with_gil(|py| {
            let future: PyObject = PyList::empty(py).into();
            let identity = pyo3::AsPyPointer::as_ptr(&future) as usize;
            (future, identity)
        })
    }

    /// Each follower's identity, every time `settle` was handed one.
    fn handed(items: &[Item]) -> Vec<usize> {
        items.iter().flat_map(|item| item.6.clone().unwrap_or_default()).collect()
    }

    fn failed_slowly(_: &[u8]) -> (Duration, Vec<u8>) {
        (Duration::from_millis(300), http(502, b"bad gateway"))
    }

    #[test]
    fn identical_repeats_of_one_flight_at_once_make_one_node_call_each_answered_under_its_own_id() {
        let node = node(slow_balance);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        let third =
            br#"{"jsonrpc":"2.0","id":"z","method":"eth_getBalance","params":["0xab","latest"]}"#;
        let (first, second, third) = server.run(futures_util::future::join3(
            server.repeat(AGAIN),
            after(100, server.timed(CALL)),
            after(150, server.timed(third)),
        ));
        assert_eq!(node.bodies(), vec![AGAIN.to_vec()], "one node call: the leader's");
        let ((second, second_waited), (third, third_waited)) = (second, third);
        assert!(second_waited >= Duration::from_millis(300), "joined: {second_waited:?}");
        assert!(third_waited >= Duration::from_millis(250), "joined: {third_waited:?}");
        let first = server.body_of(first.unwrap());
        assert_eq!(first, br#"{"jsonrpc":"2.0","id":"q-1","result":"0x10"}"#);
        let second = second.unwrap();
        assert_eq!(second.headers()["x-node"], "a");
        assert_eq!(second.headers()["content-type"], "application/json");
        assert!(second.headers().contains_key("x-batch-id"));
        assert_eq!(server.body_of(second), br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#);
        assert_eq!(
            server.body_of(third.unwrap()),
            br#"{"jsonrpc":"2.0","id":"z","result":"0x10"}"#
        );
        let mut items = server.items();
        items.sort_by_key(|item| item.4);
        let billed: Vec<_> = items.iter().map(|i| (i.0, i.2, i.3, i.4, i.5.is_some())).collect();
        let expected = [(TOKEN, true, None, 0, false), (TOKEN, true, None, TOKEN, false)];
        assert_eq!(billed, [&expected[..], &expected[1..]].concat(), "joiners billed as such");
        assert!(items[1].1 < items[0].1 && items[2].1 < items[1].1, "each its own wait");
        assert_eq!(server.in_air(), (0, 0), "landed: no flight left");
        assert!(server.holds_forward());
        // Landed, the key leads again.
        assert!(server.run(server.repeat(CALL)).is_some());
        assert_eq!(node.bodies().len(), 2);
    }

    #[test]
    fn repeats_of_different_grants_with_the_same_flight_key_share_one_node_call() {
        let node = node(slow_balance);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        let (first, second) = server.another_grant_joins(true);
        assert_eq!(node.bodies().len(), 1);
        assert!(first.is_some());
        let second = second.unwrap();
        assert_eq!(second.headers()["x-node"], "b", "the joiner's own grant's headers");
        assert_eq!(server.body_of(second), br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#);
        let mut items = server.items();
        items.sort_by_key(|item| item.4);
        let billed: Vec<_> = items.iter().map(|i| (i.0, i.2, i.3, i.4)).collect();
        let joiner = (OTHER_TOKEN, true, Some(0x10), TOKEN); // its own grant hands heads
        assert_eq!(billed, vec![(TOKEN, true, None, 0), joiner]);
    }

    #[test]
    fn a_leader_whose_node_fails_sends_its_joiners_to_the_pipeline_without_settling_them() {
        let node = node(failed_slowly);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        let (first, second) = server.another_grant_joins(false);
        assert!(first.is_none() && second.is_none());
        assert_eq!(node.bodies().len(), 1);
        let billed: Vec<_> = server.items().iter().map(|i| (i.0, i.2, i.4)).collect();
        assert_eq!(billed, vec![(TOKEN, false, 0)], "the leader alone, told unanswered");
        assert!(!server.holds_forward(), "the leader's grant is forgotten");
        assert!(server.holds_forward_at(OTHER_PATH), "the joiner's is not");
        assert_eq!(server.in_air(), (0, 0));
    }

    #[test]
    fn a_pipeline_flight_sends_repeats_of_its_key_to_the_pipeline_until_it_has_landed() {
        let node = node(balance);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        server.memo.flights.landed(FLIGHT); // without `flying`: harmless
        assert_eq!(server.in_air(), (0, 0));
        server.memo.flights.flying(FLIGHT);
        server.memo.flights.flying(FLIGHT);
        server.memo.flights.flying("another key");
        assert!(server.run(server.repeat(AGAIN)).is_none());
        server.memo.flights.landed(FLIGHT);
        assert!(server.run(server.repeat(AGAIN)).is_none(), "one pipeline call still leads");
        assert!(node.bodies().is_empty() && server.items().is_empty());
        assert!(server.holds_forward(), "the grant is kept");
        server.memo.flights.landed(FLIGHT);
        assert_eq!(server.in_air(), (1, 0), "the key's entry is gone at 0");
        assert!(server.run(server.repeat(AGAIN)).is_some());
        assert_eq!(node.bodies().len(), 1);
        server.memo.flights.landed("another key");
        assert_eq!(server.in_air(), (0, 0));
    }

    #[test]
    fn follow_registers_a_future_only_while_a_repeat_leads_that_key_and_settle_gets_it_once() {
        let node = node(slow_balance);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        let (early, _) = future();
        assert!(!server.memo.flights.follow(FLIGHT, early), "no flight yet");
        let (follower, identity) = future();
        let (first, (followed, elsewhere)) = server.run(futures_util::future::join(
            server.repeat(AGAIN),
            after(100, async {
                let (other, _) = future();
                let elsewhere = server.memo.flights.follow("another key", other);
                (server.memo.flights.follow(FLIGHT, follower), elsewhere)
            }),
        ));
        assert!(followed && !elsewhere);
        let (late, _) = future();
        assert!(!server.memo.flights.follow(FLIGHT, late), "landed: no flight to follow");
        let answer = br#"{"jsonrpc":"2.0","id":"q-1","result":"0x10"}"#;
        assert_eq!(server.body_of(first.unwrap()), answer);
        let items = server.items();
        assert_eq!(items.len(), 1);
        let (token, _, answered, _, leader, given, followers) = items[0].clone();
        assert_eq!((token, answered, leader), (TOKEN, true, 0));
        assert_eq!(given.as_deref(), Some(&answer[..]), "the node's whole answer, for them");
        assert_eq!(followers, Some(vec![identity]));
        assert_eq!(server.in_air(), (0, 0));
    }

    #[test]
    fn followers_of_a_leader_whose_node_fails_or_times_out_are_settled_unanswered_once() {
        for (script, timeout) in
            [(failed_slowly as Script, SECOND), (slow_balance, Duration::from_millis(250))]
        {
            let node = node(script);
            let server = server(&node, YES, timeout, Some(FLIGHT), false);
            let (follower, identity) = future();
            let (first, followed) = server.run(futures_util::future::join(
                server.repeat(AGAIN),
                after(100, async { server.memo.flights.follow(FLIGHT, follower) }),
            ));
            assert!(first.is_none() && followed);
            let items = server.items();
            assert_eq!(handed(&items), vec![identity], "handed exactly once");
            let (token, _, answered, head, leader, answer, _) = items[0].clone();
            assert_eq!((token, answered, head, leader, answer), (TOKEN, false, None, 0, None));
            assert_eq!(server.in_air(), (0, 0));
        }
    }

    #[test]
    fn a_leader_dropped_mid_flight_sends_joiners_to_the_pipeline_and_followers_to_settle() {
        let node = node(slow_balance);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        let (follower, identity) = future();
        let (abandoned, (followed, (joiner, waited))) = server.run(async {
            let out = futures_util::future::join(
                tokio::time::timeout(Duration::from_millis(200), server.repeat(AGAIN)),
                after(100, async {
                    let followed = server.memo.flights.follow(FLIGHT, follower);
                    let started = Instant::now();
                    (followed, (server.repeat(CALL).await, started.elapsed()))
                }),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(50)).await; // the settler's turn
            out
        });
        assert!(abandoned.is_err(), "dropped while the node works");
        assert!(followed && joiner.is_none());
        assert!(waited < Duration::from_millis(300), "woken by the drop: {waited:?}");
        let items = server.items();
        assert_eq!(handed(&items), vec![identity], "handed exactly once");
        let (token, _, answered, _, leader, answer, _) = items[0].clone();
        assert_eq!((token, answered, leader, answer), (TOKEN, false, 0, None));
        assert_eq!(items.len(), 1, "the joiner is not settled");
        assert_eq!(server.in_air(), (0, 0));
        assert!(server.holds_forward(), "nothing failed: the grant stands");
        assert!(server.run(server.repeat(CALL)).is_some(), "and the key leads again");
    }

    #[test]
    fn a_leader_dropped_mid_flight_without_followers_settles_nothing() {
        let node = node(slow_balance);
        let server = server(&node, YES, SECOND, Some(FLIGHT), false);
        let abandoned = server.run(async {
            let out = tokio::time::timeout(Duration::from_millis(100), server.repeat(AGAIN)).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            out
        });
        assert!(abandoned.is_err());
        assert!(server.items().is_empty());
        assert_eq!(server.in_air(), (0, 0));
        assert!(server.holds_forward());
    }

    #[test]
    fn repeats_of_grants_without_a_flight_key_do_not_coalesce() {
        let node = node(slow_balance);
        let server = server(&node, YES, SECOND, None, false);
        let started = Instant::now();
        let (first, (second, in_air)) = server.run(futures_util::future::join(
            server.repeat(AGAIN),
            after(100, async {
                let in_air = server.in_air();
                (server.repeat(CALL).await, in_air)
            }),
        ));
        assert_eq!(in_air, (0, 0), "no flight at all");
        assert!(first.is_some() && second.is_some());
        assert!(started.elapsed() < Duration::from_millis(950), "{:?}", started.elapsed());
        assert_eq!(node.bodies().len(), 2);
        assert!(server.items().iter().all(|item| item.4 == 0), "none joined another");
        let first = server.body_of(first.unwrap());
        assert_eq!(first, br#"{"jsonrpc":"2.0","id":"q-1","result":"0x10"}"#);
        let second = server.body_of(second.unwrap());
        assert_eq!(second, br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#);
    }
}
