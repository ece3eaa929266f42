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
//! Nothing is answered before Python has billed it: the host's `settle`, given `(token,
//! elapsed_s, answered, answer)` for each repeat whose node has answered (`Settler`, in groups),
//! checks again what may have changed since the forward was handed over (the node's health and
//! cooldown, the key's seen head, the credits) and meters the call, its journal line written, as
//! the pipeline's closing stages would. Whatever is not a plain answer (a failure, an error, another id, a time-out),
//! and any call `settle` refuses, is forgotten and the request goes to the pipeline as if it had
//! never come here: the node's failure is never billed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Body, Response};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use tokio::sync::{oneshot, Notify};

use crate::driver::log_error;
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
    /// At most one repeat in flight: identical calls at once are the pipeline's, which lets them
    /// share one attempt (coalescing).
    alone: bool,
    busy: AtomicBool,
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
        alone: bool,
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
            alone,
            busy: AtomicBool::new(false),
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
        self.url.len() + self.before_id.len() + self.sent_id.len() + self.after_id.len() + headers
    }

    fn body_for(&self, id: &[u8]) -> Bytes {
        let mut body = Vec::with_capacity(self.before_id.len() + id.len() + self.after_id.len());
        body.extend_from_slice(&self.before_id);
        body.extend_from_slice(id);
        body.extend_from_slice(&self.after_id);
        Bytes::from(body)
    }
}

/// Marks a grant free again however its repeat ends (the client may go away mid-flight).
struct Busy<'a>(Option<&'a AtomicBool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self.0 {
            flag.store(false, Ordering::Release);
        }
    }
}

/// What a repeat hands Python to settle: the grant's token, the node's time, whether it answered
/// plainly and, for an `eth_blockNumber`, the block its answer names.
struct Pending {
    token: u64,
    elapsed: f64,
    answered: bool,
    head: Option<u64>,
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

    /// Whether Python billed the repeat.
    async fn settle(&self, pending: Pending, receiver: oneshot::Receiver<bool>) -> bool {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).push(pending);
        self.wake.notify_one();
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
            let billed = Python::with_gil(|py| self.call(py, &group));
            for (pending, billed) in group.into_iter().zip(billed) {
                let _ = pending.billed.send(billed); // a client gone meanwhile: nothing to tell
            }
        }
    }

    /// The host's verdict on each of `group`, in order; all false if it failed.
    fn call(&self, py: Python<'_>, group: &[Pending]) -> Vec<bool> {
        // The fields of `contract::SETTLE_FORWARD`, in its order.
        let items = PyList::empty(py);
        for pending in group {
            let item = (pending.token, pending.elapsed, pending.answered, pending.head);
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

/// Repeat `grant` for the call whose id is `id` (the caller's bytes): the answer to write, or
/// None when the pipeline must answer the request (the grant is then forgotten, unless another
/// repeat of it was in flight).
pub async fn repeat(
    upstream: &Upstream,
    memo: &Memo,
    settler: &Settler,
    grant: Arc<Grant>,
    id: &[u8],
    key: &[u8],
) -> Option<Response<Body>> {
    if grant.alone && grant.busy.swap(true, Ordering::AcqRel) {
        return None; // an identical call is in flight: the pipeline's to join or lead
    }
    let busy = Busy(grant.alone.then_some(&grant.busy));
    let started = Instant::now();
    let answered = upstream.post(&grant.url, grant.body_for(id), grant.timeout).await;
    let elapsed = started.elapsed().as_secs_f64();
    drop(busy);
    let (answer, result) = match answered {
        Ok(answer) => match plain_answer(&answer, id) {
            Some(result) => (Some(answer), Some(result)),
            None => (None, None),
        },
        Err(_) => (None, None),
    };
    let head = match (&answer, result) {
        (Some(answer), Some((start, end))) if grant.hand_head => hex_quantity(&answer[start..end]),
        _ => None,
    };
    let (billed, receiver) = oneshot::channel();
    let pending = Pending { token: grant.token, elapsed, answered: answer.is_some(), head, billed };
    let billed = settler.settle(pending, receiver).await;
    let answer = match answer {
        Some(answer) if billed => answer,
        _ => {
            memo.revoke(key, grant.token);
            return None;
        }
    };
    let mut response = Response::new(Body::from(answer));
    let headers = response.headers_mut();
    for (name, value) in &grant.headers {
        headers.append(name.clone(), value.clone());
    }
    if let Ok(value) = HeaderValue::from_str(&memo.next_batch_id()) {
        headers.insert(HeaderName::from_static("x-batch-id"), value);
    }
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn asked(body: &[u8]) -> Asked<'_> {
        Asked {
            path: "/rpc/1/crk_x",
            origin: Some("https://app.example"),
            referer: None,
            content_type: Some("application/json"),
            body,
        }
    }

    fn grant(sent: &[u8]) -> Option<Grant> {
        let url = "http://127.0.0.1:1/rpc".to_string();
        Grant::new(1, url, sent, Duration::from_secs(1), vec![], false, false)
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
        let grant = Grant::new(1, url.clone(), CALL, AGE, headers, false, false).unwrap();
        assert_eq!(grant.size(), url.len() + CALL.len() + "content-type".len() + 16);
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

    type Item = (u64, f64, bool, Option<u64>);

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
                 def settle(items):\n    calls.append(list(items))\n{body}\n"
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
            let waiting = items.iter().map(|&(token, elapsed, answered, head)| {
                let (billed, receiver) = oneshot::channel();
                settler.settle(Pending { token, elapsed, answered, head, billed }, receiver)
            });
            let verdicts = futures_util::future::join_all(waiting).await;
            running.abort();
            verdicts
        })
    }

    const ITEMS: [Item; 4] = [
        (1, 0.5, true, None),
        (2, 0.25, true, Some(16)),
        (3, 1.0, false, None),
        (4, 0.0, true, None),
    ];

    #[test]
    fn the_repeats_waiting_at_once_are_settled_in_one_call_each_with_its_own_verdict_in_order() {
        let host = host("    return [token % 2 == 0 for token, _, _, _ in items]");
        let settler = host.settler();
        assert_eq!(settle_at_once(&settler, &ITEMS), vec![false, true, false, true]);
        assert_eq!(host.calls(), vec![ITEMS.to_vec()]); // the fields of contract::SETTLE_FORWARD
        assert_eq!(settle_at_once(&settler, &ITEMS[..1]), vec![false]);
        assert_eq!(settle_at_once(&settler, &ITEMS[1..2]), vec![true]);
        assert_eq!(host.calls().len(), 3, "a repeat waiting alone is settled alone");
    }

    #[test]
    fn a_settle_that_raises_bills_nothing() {
        let host = host("    raise RuntimeError('the journal is gone')");
        assert_eq!(settle_at_once(&host.settler(), &ITEMS), vec![false; 4]);
        assert_eq!(host.calls().len(), 1);
    }

    #[test]
    fn a_settle_that_gives_another_number_of_verdicts_bills_nothing() {
        let fewer = host("    return [True] * (len(items) - 1)");
        assert_eq!(settle_at_once(&fewer.settler(), &ITEMS), vec![false; 4]);
        let more = host("    return [True] * (len(items) + 1)");
        assert_eq!(settle_at_once(&more.settler(), &ITEMS), vec![false; 4]);
    }

    #[test]
    fn a_settle_whose_verdicts_are_not_booleans_bills_nothing() {
        for body in ["    return [1] * len(items)", "    return None", "    return 'yy'"] {
            let host = host(body);
            assert_eq!(settle_at_once(&host.settler(), &ITEMS[..2]), vec![false; 2], "{body}");
        }
    }

    #[test]
    fn a_repeat_whose_client_went_away_leaves_the_others_of_its_group_their_verdicts() {
        let host = host("    return [True] * len(items)");
        let settler = host.settler();
        let (billed, gone) = oneshot::channel();
        drop(gone);
        let pending = Pending { token: 9, elapsed: 0.1, answered: true, head: None, billed };
        settler.waiting.lock().unwrap().push(pending);
        assert_eq!(settle_at_once(&settler, &ITEMS[..1]), vec![true]);
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
        runtime: tokio::runtime::Runtime,
        memo: Memo,
        upstream: Upstream,
        settler: Arc<Settler>,
        host: Host,
    }

    const TOKEN: u64 = 41;

    fn server(node: &Node, settle: &str, timeout: Duration, alone: bool, head: bool) -> Server {
        let memo = Memo::new(1 << 20, 8192, AGE, "abc-r".into());
        let headers = vec![header("content-type", "application/json"), header("x-node", "a")];
        let url = node.url.clone();
        let grant = Grant::new(TOKEN, url, CALL, timeout, headers, alone, head).unwrap();
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
        Server { runtime: runtime(), memo, upstream, settler, host }
    }

    const YES: &str = "    return [True] * len(items)";
    const NO: &str = "    return [False] * len(items)";

    impl Server {
        /// The repeat of the forward `body` finds, as the server's `answer` makes it.
        async fn repeat(&self, body: &[u8]) -> Option<Response<Body>> {
            let Some(Found::Forward { grant, id, key }) = self.memo.lookup(&asked(body)) else {
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
            matches!(self.memo.lookup(&asked(CALL)), Some(Found::Forward { .. }))
        }

        fn body_of(&self, response: Response<Body>) -> Vec<u8> {
            self.runtime.block_on(hyper::body::to_bytes(response.into_body())).unwrap().to_vec()
        }
    }

    #[test]
    fn a_repeat_python_bills_is_the_nodes_answer_with_the_grants_headers_and_a_fresh_batch_id() {
        let node = node(balance);
        let server = server(&node, YES, Duration::from_secs(2), false, false);
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
        let [(token, elapsed, answered, head)] = calls[0][..] else { panic!("{calls:?}") };
        assert_eq!((token, answered, head), (TOKEN, true, None)); // no head unless asked
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
        let server = server(&node, YES, Duration::from_secs(2), false, true);
        assert!(server.run(server.repeat(AGAIN)).is_some());
        assert_eq!(server.host.calls()[0][0].3, Some(0x1b4));
    }

    #[test]
    fn a_repeat_python_refuses_goes_to_the_pipeline_and_its_grant_is_forgotten() {
        let node = node(balance);
        let server = server(&node, NO, Duration::from_secs(2), false, false);
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
            let server = server(&node, YES, Duration::from_secs(2), false, false);
            assert!(server.run(server.repeat(AGAIN)).is_none());
            assert_eq!(node.bodies().len(), 1);
            let calls = server.host.calls();
            assert_eq!((calls[0][0].0, calls[0][0].2), (TOKEN, false), "told unanswered");
            assert!(!server.holds_forward());
            assert_eq!(server.memo.drain(), (vec![], vec![TOKEN]));
        }
    }

    #[test]
    fn a_repeat_the_node_answers_too_late_goes_to_the_pipeline_and_its_grant_is_forgotten() {
        let node = node(slow_balance);
        let server = server(&node, YES, Duration::from_millis(100), false, false);
        let started = Instant::now();
        assert!(server.run(server.repeat(AGAIN)).is_none());
        assert!(started.elapsed() < Duration::from_millis(450), "{:?}", started.elapsed());
        let (_, elapsed, answered, _) = server.host.calls()[0][0];
        assert!(!answered);
        assert!((0.09..0.45).contains(&elapsed), "{elapsed}");
        assert!(!server.holds_forward());
    }

    #[test]
    fn alone_a_second_repeat_while_the_first_is_in_flight_goes_to_the_pipeline_grant_kept() {
        let node = node(slow_balance);
        let server = server(&node, YES, Duration::from_secs(2), true, false);
        let (first, second) = server.run(async {
            let first = server.repeat(AGAIN);
            let second = async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let started = Instant::now();
                let second = server.repeat(CALL).await;
                (second, started.elapsed())
            };
            futures_util::future::join(first, second).await
        });
        assert!(first.is_some());
        let (second, waited) = second;
        assert!(second.is_none());
        assert!(waited < Duration::from_millis(100), "it did not wait for the node: {waited:?}");
        assert_eq!(node.bodies(), vec![AGAIN.to_vec()], "the second never reached the node");
        assert_eq!(server.host.calls().iter().map(Vec::len).sum::<usize>(), 1);
        assert!(server.holds_forward(), "the grant is the first one's, still standing");
        // Once the first is done, the grant is free again.
        assert!(server.run(server.repeat(CALL)).is_some());
        assert_eq!(node.bodies().len(), 2);
    }

    #[test]
    fn not_alone_repeats_of_one_grant_go_to_the_node_at_once() {
        let node = node(slow_balance);
        let server = server(&node, YES, Duration::from_secs(2), false, false);
        let started = Instant::now();
        let (first, second) = server.run(async {
            futures_util::future::join(server.repeat(AGAIN), server.repeat(CALL)).await
        });
        assert!(first.is_some() && second.is_some());
        assert!(started.elapsed() < Duration::from_millis(950), "{:?}", started.elapsed());
        assert_eq!(node.bodies().len(), 2);
        assert_eq!(server.host.calls().iter().map(Vec::len).sum::<usize>(), 2);
        let first = server.body_of(first.unwrap());
        assert_eq!(first, br#"{"jsonrpc":"2.0","id":"q-1","result":"0x10"}"#);
        let second = server.body_of(second.unwrap());
        assert_eq!(second, br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#);
    }

    #[test]
    fn alone_a_repeat_whose_client_went_away_mid_flight_frees_its_grant() {
        let node = node(slow_balance);
        let server = server(&node, YES, Duration::from_secs(2), true, false);
        let abandoned = server.run(async {
            tokio::time::timeout(Duration::from_millis(100), server.repeat(AGAIN)).await
        });
        assert!(abandoned.is_err(), "dropped while the node works");
        assert!(server.host.calls().is_empty());
        assert!(server.holds_forward());
        assert!(server.run(server.repeat(CALL)).is_some());
    }
}
