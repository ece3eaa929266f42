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
use crate::replay::{hex_quantity, plain_answer, scan, Memo};
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
        let ids = scan(sent)?;
        let [(start, end)] = ids[..] else {
            return None;
        };
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
            let group = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
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
        let verdicts = self
            .settle
            .call1(py, (items,))
            .and_then(|verdicts| verdicts.extract::<Vec<bool>>(py));
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
