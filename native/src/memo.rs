//! The memo: the decisions the pipeline handed the server (with its answers: `HttpAnswer.
//! decisions`), and the customers' grants that calls under them spend from.
//!
//! A decision applies to a later call in its scope (docs/architecture.md, "Scoped decisions"):
//! one whose request has the same path, Origin, Referer and Content-Type, and whose call is the
//! same bytes but for its id (`DecisionScope.EXACT`) or but for its id and every parameter but
//! the method's block parameter (`MASKED`, for the methods in `masks`: the block parameter is all
//! the stages read of them). The key of a call is those bytes with what is left out replaced by
//! marks no JSON can hold (json.rs finds where things are), so that two calls share a key exactly
//! when they are in one scope.
//!
//! A decision stands while every epoch slot it read holds the value it had (epochs.rs), and for
//! at most `forward_max_age` (a forward) or `answer_max_age` (an answer) after it was made: what
//! drifts without an event (answer times, time-outs, the `performance` order) is never older.
//! A request is served here only when every one of its calls has a standing decision, all with
//! the same answer headers, and the customers' grants cover what they spend; anything else is
//! the pipeline's.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::contract::Types;
use crate::contract_gen::{decision, DECISION_SCOPES};
use crate::epochs::{EpochStore, Epochs};
use crate::json::{read_calls, Call, Calls, Span};

/// Marks an id's place in a key, and a parameter left out: raw control bytes, which no body
/// the reader takes can hold outside a string, nor inside one.
const ID_MARK: u8 = 0;
const LEFT_OUT: u8 = 1;
/// Bytes an entry costs beyond its key and what it holds (its map slot, its queue place).
const ENTRY_OVERHEAD: usize = 256;
/// Requests whose path and header fields together are longer are left to the pipeline.
const MAX_FIELD_BYTES: usize = 4096;

/// A request as the server read it: what a call's key starts with.
pub struct Asked<'a> {
    pub path: &'a str,
    pub origin: Option<&'a str>,
    pub referer: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
}

impl Asked<'_> {
    fn field_bytes(&self) -> usize {
        let length = |field: Option<&str>| field.map_or(0, str::len);
        self.path.len() + length(self.origin) + length(self.referer) + length(self.content_type)
    }
}

/// What a decision does with a call in its scope.
pub enum Action {
    /// Send the call, as the client wrote it, to the node at `url`, waiting at most `timeout`,
    /// with at most `batch` calls of the request in one upstream batch; `flight`: identical
    /// calls in flight share one attempt, keyed by (chain, seen head).
    Forward {
        url: String,
        node_id: i64,
        timeout: Duration,
        batch: usize,
        flight: Option<(u64, i64)>,
    },
    /// Answer `"result":...` (the member) under the caller's id.
    Answer { member: Bytes },
}

/// One decision, as the server applies it.
pub struct Entry {
    /// The `Decision` object, handed back with every call it serves (its `booking`).
    pub decision: PyObject,
    read: Vec<(usize, u64)>,
    grant: Option<Arc<Grant>>,
    /// Spent from the grant per call, and per call that joins an identical one in flight.
    pub spend: i64,
    pub join_spend: i64,
    /// Every answer goes to the ledger to be read, however plain (settle.rs).
    pub judge_each: bool,
    /// Every `audit_every`-th call served goes to the ledger with its bytes, for the audits
    /// (0: none); `served` counts the calls toward it.
    audit_every: u64,
    served: AtomicU64,
    /// The most bytes its request's answers may take (`Decision.max_answer_bytes`; 0: any).
    pub max_answer_bytes: usize,
    pub action: Action,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    made: Instant,
    size: usize,
}

impl Entry {
    /// Whether the call this decision serves now is one the audits sample (its bytes go to the
    /// ledger): every `audit_every`-th, counted here, the rate chosen by Python.
    pub fn audit_due(&self) -> bool {
        self.audit_every > 0
            && (self.served.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(self.audit_every)
    }
}

/// What a customer's calls under decisions may still spend, held aside for them by Python
/// (router/fast/grants.py): spent here, booked there.
#[derive(Default)]
pub struct Grant {
    left: AtomicI64,
}

impl Grant {
    /// Take `amount` if that much is left.
    fn spend(&self, amount: i64) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                (left >= amount).then_some(left - amount)
            })
            .is_ok()
    }

    fn refund(&self, amount: i64) {
        self.left.fetch_add(amount, Ordering::AcqRel);
    }
}

/// A call of a request, and the decision that serves it.
pub struct Planned {
    pub entry: Arc<Entry>,
    pub id: Span,
    pub object: Span,
    /// Spent from the grant for it so far.
    spent: i64,
}

impl Planned {
    /// The call joined an identical one in flight: it costs the join price, not the route's.
    pub fn joined(&mut self) {
        let back = self.spent - self.entry.join_spend;
        if let (Some(grant), true) = (&self.entry.grant, back > 0) {
            grant.refund(back);
            self.spent -= back;
        }
    }
}

/// A request the memo serves: each call with its decision, in the request's order.
pub struct Plan {
    pub calls: Vec<Planned>,
    pub batch: bool,
}

impl Plan {
    /// The request goes to the pipeline after all: what its calls spent goes back.
    pub fn refund(&mut self) {
        for planned in &mut self.calls {
            if let (Some(grant), true) = (&planned.entry.grant, planned.spent > 0) {
                grant.refund(planned.spent);
                planned.spent = 0;
            }
        }
    }
}

struct Kept {
    entry: Arc<Entry>,
    serial: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Arc<[u8]>, Kept>,
    /// Keys, oldest installed first, with the serial of their install; a key installed again
    /// leaves its older place behind, skipped when reached (and dropped when the places left
    /// behind outnumber the entries).
    order: VecDeque<(Arc<[u8]>, u64)>,
    serials: u64,
    bytes: usize,
}

pub struct Limits {
    pub max_bytes: usize,
    pub max_body_bytes: usize,
    pub max_calls: usize,
    pub max_params_depth: usize,
    pub forward_max_age: Duration,
    pub answer_max_age: Duration,
}

pub struct Memo {
    inner: Mutex<Inner>,
    /// Entries held, read without the lock: a request costs nothing here while there are none.
    held: AtomicUsize,
    epochs: Arc<EpochStore>,
    grants: Mutex<HashMap<i64, Arc<Grant>>>,
    limits: Limits,
    /// Method -> the index of its block parameter, the one parameter a MASKED key keeps.
    masks: HashMap<Box<[u8]>, usize>,
    batch_prefix: String,
    batches: AtomicU64,
}

impl Memo {
    pub fn new(
        epochs: Arc<EpochStore>,
        limits: Limits,
        masks: HashMap<String, usize>,
        batch_prefix: String,
    ) -> Memo {
        Memo {
            inner: Mutex::new(Inner::default()),
            held: AtomicUsize::new(0),
            epochs,
            grants: Mutex::new(HashMap::new()),
            limits,
            masks: masks.into_iter().map(|(m, i)| (m.into_bytes().into_boxed_slice(), i)).collect(),
            batch_prefix,
            batches: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn holds_any(&self) -> bool {
        self.held.load(Ordering::Relaxed) > 0
    }

    /// The worker's next batch id: one sequence for the pipeline's answers and the memo's.
    pub fn next_batch_id(&self) -> String {
        let number = self.batches.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}{number:x}", self.batch_prefix)
    }

    /// The calls of `body`, if the memo could key them at all.
    pub fn read(&self, body: &[u8]) -> Option<Calls> {
        if body.len() > self.limits.max_body_bytes {
            return None;
        }
        let calls = read_calls(body, self.limits.max_params_depth)?;
        (calls.calls.len() <= self.limits.max_calls).then_some(calls)
    }

    /// The decisions that serve every call of the request now, their grants spent; None when
    /// the pipeline must answer it (nothing spent then).
    pub fn plan(&self, asked: &Asked<'_>, calls: &Calls) -> Option<Plan> {
        let mut plan = self.find(asked, calls)?;
        for index in 0..plan.calls.len() {
            let planned = &plan.calls[index];
            let (spend, grant) = (planned.entry.spend, planned.entry.grant.clone());
            if spend > 0 {
                if !grant.is_some_and(|grant| grant.spend(spend)) {
                    plan.refund();
                    return None;
                }
                plan.calls[index].spent = spend;
            }
        }
        Some(plan)
    }

    /// The standing decisions for every call, nothing spent.
    fn find(&self, asked: &Asked<'_>, calls: &Calls) -> Option<Plan> {
        if !self.holds_any() || asked.field_bytes() > MAX_FIELD_BYTES {
            return None;
        }
        let mut found = Vec::with_capacity(calls.calls.len());
        {
            let inner = self.lock();
            for call in &calls.calls {
                let entry = self
                    .masked_key(asked, call)
                    .and_then(|key| self.standing(&inner, &key))
                    .or_else(|| self.standing(&inner, &key_of(asked, call, None)))?;
                found.push(Planned { entry, id: call.id, object: call.object, spent: 0 });
            }
        }
        let headers = &found.first()?.entry.headers;
        if found.iter().any(|planned| planned.entry.headers != *headers) {
            return None; // answered together, the pipeline would give other headers
        }
        Some(Plan { calls: found, batch: calls.batch })
    }

    fn standing(&self, inner: &Inner, key: &[u8]) -> Option<Arc<Entry>> {
        let entry = &inner.entries.get(key)?.entry;
        let max_age = match entry.action {
            Action::Forward { .. } => self.limits.forward_max_age,
            Action::Answer { .. } => self.limits.answer_max_age,
        };
        (entry.made.elapsed() < max_age && self.epochs.hold(&entry.read)).then(|| entry.clone())
    }

    /// The key of `call` in the MASKED scope, if its method has one.
    fn masked_key(&self, asked: &Asked<'_>, call: &Call) -> Option<Vec<u8>> {
        let (start, end) = call.method?;
        let keep = *self.masks.get(&asked.body[start..end])?;
        call.elements.as_ref()?;
        Some(key_of(asked, call, Some(keep)))
    }

    /// Keep each of `decisions` (a list of `Decision`s) for the call of `calls` it names, under
    /// the key of its scope. How many were kept.
    pub fn install(
        &self,
        py: Python<'_>,
        types: &Types,
        asked: &Asked<'_>,
        calls: &Calls,
        decisions: &PyList,
    ) -> PyResult<usize> {
        if asked.field_bytes() > MAX_FIELD_BYTES {
            return Ok(0);
        }
        let mut kept = 0;
        for made in decisions {
            let Some((key, entry)) = self.entry_of(py, types, asked, calls, made)? else {
                continue;
            };
            if entry.size <= self.limits.max_bytes / 4 {
                self.keep(key, entry);
                kept += 1;
            }
        }
        Ok(kept)
    }

    fn entry_of(
        &self,
        py: Python<'_>,
        types: &Types,
        asked: &Asked<'_>,
        calls: &Calls,
        made: &PyAny,
    ) -> PyResult<Option<(Vec<u8>, Entry)>> {
        let get = |field| types.decision.get(made, field);
        let index: usize = get(decision::CALL)?.extract()?;
        let Some(call) = calls.calls.get(index) else {
            return Ok(None);
        };
        let scope: String = get(decision::SCOPE)?.str()?.extract()?;
        let key = if scope == DECISION_SCOPES[1] {
            match self.masked_key(asked, call) {
                Some(key) => key,
                None => return Ok(None), // no masked scope for this call: nothing to share
            }
        } else if scope == DECISION_SCOPES[0] {
            key_of(asked, call, None)
        } else {
            return Err(PyValueError::new_err(format!("no decision scope {scope:?}")));
        };
        let slots: Vec<usize> = get(decision::EPOCH_SLOTS)?.extract()?;
        let values: Vec<u64> = get(decision::EPOCH_VALUES)?.extract()?;
        if slots.len() != values.len() {
            return Err(PyValueError::new_err(
                "a decision's epoch slots and values differ in length",
            ));
        }
        let customer: i64 = get(decision::CUSTOMER_ID)?.extract()?;
        let spend: i64 = get(decision::SPEND_NANO)?.extract()?;
        let join_spend: i64 = get(decision::JOIN_SPEND_NANO)?.extract()?;
        let url: String = get(decision::URL)?.extract()?;
        let member: Option<&PyBytes> = get(decision::MEMBER)?.extract()?;
        let action = if !url.is_empty() {
            let timeout = crate::driver::seconds(get(decision::TIMEOUT_S)?.extract()?)?;
            let chain: u64 = get(decision::FLIGHT_CHAIN)?.extract()?;
            let seen: i64 = get(decision::FLIGHT_SEEN)?.extract()?;
            let node_id: i64 = get(decision::NODE_ID)?.extract()?;
            let batch: usize = get(decision::NODE_BATCH)?.extract()?;
            let flight = (chain != 0).then_some((chain, seen));
            Action::Forward { url, node_id, timeout, batch: batch.max(1), flight }
        } else if let Some(member) = member {
            Action::Answer { member: Bytes::copy_from_slice(member.as_bytes()) }
        } else {
            return Ok(None);
        };
        let judge_each: bool = get(decision::JUDGE_EACH)?.extract()?;
        let audit_every: u64 = get(decision::AUDIT_EVERY)?.extract()?;
        let max_answer_bytes: usize = get(decision::MAX_ANSWER_BYTES)?.extract()?;
        let pairs: Vec<(String, String)> = get(decision::HEADERS)?.extract()?;
        let headers = header_pairs(pairs)?;
        let grant = (spend > 0 || join_spend > 0).then(|| self.grant_of(customer));
        let held = match &action {
            Action::Forward { url, .. } => url.len(),
            Action::Answer { member } => member.len(),
        };
        let header_bytes: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
        let size = 2 * key.len() + held + header_bytes + 16 * slots.len() + ENTRY_OVERHEAD;
        let entry = Entry {
            decision: made.into_py(py),
            read: slots.into_iter().zip(values).collect(),
            grant,
            spend,
            join_spend,
            judge_each,
            audit_every,
            served: AtomicU64::new(0),
            max_answer_bytes,
            action,
            headers,
            made: Instant::now(),
            size,
        };
        Ok(Some((key, entry)))
    }

    fn keep(&self, key: Vec<u8>, entry: Entry) {
        let size = entry.size;
        let mut inner = self.lock();
        // Made again: the new entry takes over the old one's key, so that the place the old one
        // leaves in `order` holds no buffer of its own.
        let key: Arc<[u8]> = match inner.entries.remove_entry(key.as_slice()) {
            Some((same, old)) => {
                inner.bytes -= old.entry.size;
                same
            }
            None => key.into(),
        };
        while inner.bytes + size > self.limits.max_bytes {
            let Some((oldest, serial)) = inner.order.pop_front() else {
                break;
            };
            if inner.entries.get(&oldest).is_some_and(|kept| kept.serial == serial) {
                let old = inner.entries.remove(&oldest).expect("just found");
                inner.bytes -= old.entry.size;
            }
        }
        inner.serials += 1;
        let serial = inner.serials;
        inner.bytes += size;
        inner.order.push_back((key.clone(), serial));
        inner.entries.insert(key, Kept { entry: Arc::new(entry), serial });
        if inner.order.len() > 2 * inner.entries.len() + 16 {
            let Inner { entries, order, .. } = &mut *inner;
            order.retain(|(key, serial)| entries.get(key).is_some_and(|k| k.serial == *serial));
        }
        self.held.store(inner.entries.len(), Ordering::Relaxed);
    }

    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.order.clear();
        inner.bytes = 0;
        self.held.store(0, Ordering::Relaxed);
    }

    fn grant_of(&self, customer: i64) -> Arc<Grant> {
        let mut grants = self.grants.lock().unwrap_or_else(|p| p.into_inner());
        grants.entry(customer).or_default().clone()
    }

    fn left(&self, customer: i64) -> i64 {
        let grants = self.grants.lock().unwrap_or_else(|p| p.into_inner());
        grants.get(&customer).map_or(0, |grant| grant.left.load(Ordering::Acquire))
    }

    pub fn stats(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
    }
}

/// The key of `call`: the request's fields, each after its length (or a mark of its absence),
/// so that no two sets of fields run together alike; then the call, its id's value replaced by
/// `ID_MARK` and, with `keep` (a MASKED key), each parameter but the one at `keep` by `LEFT_OUT`.
fn key_of(asked: &Asked<'_>, call: &Call, keep: Option<usize>) -> Vec<u8> {
    let (start, end) = call.object;
    let mut key = Vec::with_capacity(asked.path.len() + (end - start) + 64);
    for field in [Some(asked.path), asked.origin, asked.referer, asked.content_type] {
        match field {
            Some(value) => {
                key.extend_from_slice(&(value.len() as u32).to_le_bytes());
                key.extend_from_slice(value.as_bytes());
            }
            None => key.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    key.push(if keep.is_some() { b'm' } else { b'e' });
    call_template(&mut key, asked.body, call, keep);
    key
}

/// `call` as bytes of a key: its id marked, and with `keep` its parameters but one left out.
pub fn call_template(key: &mut Vec<u8>, body: &[u8], call: &Call, keep: Option<usize>) {
    if keep.is_none() {
        // The exact scope: only the id is cut out.
        let ((start, end), (id_start, id_end)) = (call.object, call.id);
        key.extend_from_slice(&body[start..id_start]);
        key.push(ID_MARK);
        key.extend_from_slice(&body[id_end..end]);
        return;
    }
    let mut cuts: Vec<(Span, u8)> = vec![(call.id, ID_MARK)];
    if let (Some(keep), Some(elements)) = (keep, &call.elements) {
        let left_out = elements.iter().enumerate().filter(|(i, _)| *i != keep);
        cuts.extend(left_out.map(|(_, &span)| (span, LEFT_OUT)));
    }
    cuts.sort_unstable_by_key(|((start, _), _)| *start);
    let mut from = call.object.0;
    for ((start, end), mark) in cuts {
        key.extend_from_slice(&body[from..start]);
        key.push(mark);
        from = end;
    }
    key.extend_from_slice(&body[from..call.object.1]);
}

pub fn header_pairs(headers: Vec<(String, String)>) -> PyResult<Vec<(HeaderName, HeaderValue)>> {
    let mut pairs = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| PyValueError::new_err(format!("bad header name {name:?}")))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| PyValueError::new_err(format!("bad value for header {name}")))?;
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// The memo as Python holds it (router/fast/memo.py); the server applies it.
#[pyclass(module = "chainrouter._native", name = "Memo")]
pub struct PyMemo {
    pub memo: Arc<Memo>,
}

#[pymethods]
impl PyMemo {
    #[new]
    #[allow(clippy::too_many_arguments)] // the memo's bounds, each named by the caller
    fn new(
        epochs: &Epochs,
        max_bytes: usize,
        max_body_bytes: usize,
        max_calls: usize,
        max_params_depth: usize,
        forward_max_age_s: f64,
        answer_max_age_s: f64,
        masks: HashMap<String, usize>,
        batch_prefix: String,
    ) -> PyResult<Self> {
        let limits = Limits {
            max_bytes,
            max_body_bytes,
            max_calls,
            max_params_depth,
            forward_max_age: crate::driver::seconds(forward_max_age_s)?,
            answer_max_age: crate::driver::seconds(answer_max_age_s)?,
        };
        let memo = Memo::new(epochs.store.clone(), limits, masks, batch_prefix);
        Ok(PyMemo { memo: Arc::new(memo) })
    }

    fn next_batch_id(&self) -> String {
        self.memo.next_batch_id()
    }

    fn grant(&self, customer_id: i64, nano: i64) -> PyResult<()> {
        if nano < 0 {
            return Err(PyValueError::new_err("a grant only grows; `reclaim` takes it back"));
        }
        self.memo.grant_of(customer_id).refund(nano);
        Ok(())
    }

    fn granted(&self, customer_id: i64) -> i64 {
        self.memo.left(customer_id)
    }

    fn reclaim(&self, customer_id: i64) -> i64 {
        let grants = self.memo.grants.lock().unwrap_or_else(|p| p.into_inner());
        grants.get(&customer_id).map_or(0, |grant| grant.left.swap(0, Ordering::AcqRel))
    }

    fn entries(&self) -> usize {
        self.memo.stats().0
    }

    fn held_bytes(&self) -> usize {
        self.memo.stats().1
    }

    fn clear(&self) {
        self.memo.clear();
    }

    fn applying(
        &self,
        py: Python<'_>,
        path: &str,
        origin: Option<&str>,
        referer: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Option<Vec<PyObject>> {
        let asked = Asked { path, origin, referer, content_type, body };
        let calls = self.memo.read(body)?;
        let plan = self.memo.find(&asked, &calls)?;
        Some(plan.calls.iter().map(|planned| planned.entry.decision.clone_ref(py)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]}"#;

    fn asked(body: &[u8]) -> Asked<'_> {
        Asked {
            path: "/rpc/1/crk_x",
            origin: Some("https://app.example"),
            referer: None,
            content_type: Some("application/json"),
            body,
        }
    }

    fn keys(body: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let calls = read_calls(body, 64).unwrap();
        let call = &calls.calls[0];
        (key_of(&asked(body), call, Some(1)), key_of(&asked(body), call, None))
    }

    #[test]
    fn a_masked_key_leaves_out_the_id_and_every_parameter_but_the_block() {
        let (masked, exact) = keys(CALL);
        let other =
            br#"{"jsonrpc":"2.0","id":"q","method":"eth_getBalance","params":["0xcd","latest"]}"#;
        let (other_masked, other_exact) = keys(other);
        assert_eq!(masked, other_masked);
        assert_ne!(exact, other_exact);
        let again =
            br#"{"jsonrpc":"2.0","id":8,"method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert_eq!(keys(again).1, exact, "the id is left out of both");
    }

    #[test]
    fn a_key_keeps_the_block_parameter_the_method_the_shape_and_the_request_fields() {
        let (masked, _) = keys(CALL);
        for body in [
            &br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","0x10"]}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"method":"eth_getCode","params":["0xab","latest"]}"#,
            br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab"]}"#,
            br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest",1]}"#,
            br#"{"jsonrpc":"2.0", "id":7,"method":"eth_getBalance","params":["0xab","latest"]}"#,
        ] {
            assert_ne!(keys(body).0, masked, "{}", String::from_utf8_lossy(body));
        }
        let calls = read_calls(CALL, 64).unwrap();
        let call = &calls.calls[0];
        let elsewhere = Asked { origin: Some("https://evil.example"), ..asked(CALL) };
        assert_ne!(key_of(&elsewhere, call, Some(1)), masked);
        let other_key = Asked { path: "/rpc/1/crk_y", ..asked(CALL) };
        assert_ne!(key_of(&other_key, call, Some(1)), masked);
        let no_type = Asked { content_type: None, ..asked(CALL) };
        assert_ne!(key_of(&no_type, call, Some(1)), masked);
    }

    #[test]
    fn fields_cannot_run_together_into_the_same_key() {
        let calls = read_calls(CALL, 64).unwrap();
        let call = &calls.calls[0];
        let one = Asked { origin: Some("ab"), referer: Some("c"), ..asked(CALL) };
        let two = Asked { origin: Some("a"), referer: Some("bc"), ..asked(CALL) };
        assert_ne!(key_of(&one, call, None), key_of(&two, call, None));
    }

    const MASKS: [(&str, usize); 1] = [("eth_getBalance", 1)];

    fn memo(epochs: &Arc<EpochStore>) -> Memo {
        let limits = Limits {
            max_bytes: 1 << 20,
            max_body_bytes: 8192,
            max_calls: 10,
            max_params_depth: 64,
            forward_max_age: Duration::from_secs(60),
            answer_max_age: Duration::from_secs(60),
        };
        let masks = MASKS.iter().map(|(m, i)| (m.to_string(), *i)).collect();
        Memo::new(epochs.clone(), limits, masks, "t-".into())
    }

    fn entry(read: Vec<(usize, u64)>, grant: Option<Arc<Grant>>, spend: i64) -> Entry {
        pyo3::prepare_freethreaded_python();
        let decision = Python::with_gil(|py| py.None());
        let action = Action::Forward {
            url: "http://n/".into(),
            node_id: 1,
            timeout: Duration::from_secs(1),
            batch: 1,
            flight: None,
        };
        Entry {
            decision,
            read,
            grant,
            spend,
            join_spend: 0,
            judge_each: false,
            audit_every: 0,
            served: AtomicU64::new(0),
            max_answer_bytes: 0,
            action,
            headers: vec![],
            made: Instant::now(),
            size: 512,
        }
    }

    fn masked(memo: &Memo, body: &[u8]) -> Vec<u8> {
        let calls = read_calls(body, 64).unwrap();
        memo.masked_key(&asked(body), &calls.calls[0]).unwrap()
    }

    fn plan(memo: &Memo, body: &[u8]) -> Option<Plan> {
        memo.plan(&asked(body), &memo.read(body)?)
    }

    #[test]
    fn a_decision_serves_any_call_of_its_scope_while_the_epochs_it_read_hold() {
        let epochs = Arc::new(EpochStore::new(8));
        let memo = memo(&epochs);
        memo.keep(masked(&memo, CALL), entry(vec![(3, epochs.read(3))], None, 0));
        let other =
            br#"{"jsonrpc":"2.0","id":"q","method":"eth_getBalance","params":["0xcd","latest"]}"#;
        assert!(plan(&memo, other).is_some());
        epochs.bump(4);
        assert!(plan(&memo, other).is_some(), "a slot it did not read");
        epochs.bump(3);
        assert!(plan(&memo, other).is_none());
        assert!(plan(&memo, CALL).is_none());
    }

    #[test]
    fn a_decision_stands_no_longer_than_its_kinds_age() {
        let epochs = Arc::new(EpochStore::new(8));
        let memo = memo(&epochs);
        let mut old = entry(vec![], None, 0);
        old.made -= Duration::from_secs(61);
        memo.keep(masked(&memo, CALL), old);
        assert!(plan(&memo, CALL).is_none());
    }

    #[test]
    fn a_batch_is_planned_only_when_every_call_has_a_standing_decision_alike() {
        let epochs = Arc::new(EpochStore::new(8));
        let memo = memo(&epochs);
        memo.keep(masked(&memo, CALL), entry(vec![], None, 0));
        let two = br#"[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","latest"]},
                       {"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["0x2","latest"]}]"#;
        let planned = plan(&memo, two).unwrap();
        assert_eq!((planned.calls.len(), planned.batch), (2, true));
        let other =
            br#"[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","latest"]},
                         {"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":[]}]"#;
        assert!(plan(&memo, other).is_none(), "one call without a decision");
        let exact = key_of(&asked(CHAIN_ID), &read_calls(CHAIN_ID, 64).unwrap().calls[0], None);
        let mut hit = entry(vec![], None, 0);
        hit.headers = vec![(HeaderName::from_static("x-cache"), HeaderValue::from_static("HIT"))];
        memo.keep(exact, hit);
        let mixed =
            br#"[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","latest"]},
                         {"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":[]}]"#;
        assert!(plan(&memo, mixed).is_none(), "answered together, they would get other headers");
    }

    const CHAIN_ID: &[u8] = br#"{"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":[]}"#;

    #[test]
    fn a_plan_spends_every_calls_price_from_the_grant_or_nothing() {
        let epochs = Arc::new(EpochStore::new(8));
        let memo = memo(&epochs);
        let grant = memo.grant_of(7);
        grant.refund(25);
        memo.keep(masked(&memo, CALL), entry(vec![], Some(grant.clone()), 10));
        let two = br#"[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","latest"]},
                       {"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["0x2","latest"]}]"#;
        let mut planned = plan(&memo, two).unwrap();
        assert_eq!(memo.left(7), 5);
        assert!(plan(&memo, two).is_none(), "5 left: neither call is spent for");
        assert_eq!(memo.left(7), 5);
        planned.refund();
        assert_eq!(memo.left(7), 25);
        planned.refund(); // twice: nothing more
        assert_eq!(memo.left(7), 25);
    }

    #[test]
    fn a_call_that_joins_one_in_flight_spends_the_join_price_only() {
        let epochs = Arc::new(EpochStore::new(8));
        let memo = memo(&epochs);
        let grant = memo.grant_of(7);
        grant.refund(100);
        let mut joining = entry(vec![], Some(grant.clone()), 10);
        joining.join_spend = 2;
        memo.keep(masked(&memo, CALL), joining);
        let mut planned = plan(&memo, CALL).unwrap();
        assert_eq!(memo.left(7), 90);
        planned.calls[0].joined();
        assert_eq!(memo.left(7), 98);
        planned.refund();
        assert_eq!(memo.left(7), 100);
    }

    #[test]
    fn past_its_byte_bound_the_memo_lets_the_oldest_decisions_go_first() {
        let epochs = Arc::new(EpochStore::new(8));
        let mut limited = memo(&epochs);
        limited.limits.max_bytes = 4 * 512;
        let body = |n: u8| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","0x{n:x}"]}}"#
            )
        };
        for n in 0..10 {
            limited.keep(masked(&limited, body(n).as_bytes()), entry(vec![], None, 0));
            assert!(limited.stats().1 <= 4 * 512);
        }
        assert_eq!(limited.stats().0, 4);
        assert!(plan(&limited, body(9).as_bytes()).is_some());
        assert!(plan(&limited, body(0).as_bytes()).is_none());
        limited.clear();
        assert_eq!(limited.stats(), (0, 0));
    }

    #[test]
    fn a_grant_spends_only_what_is_left_and_takes_refunds() {
        let grant = Grant::default();
        grant.refund(10);
        assert!(grant.spend(7));
        assert!(!grant.spend(4));
        assert!(grant.spend(3));
        grant.refund(4);
        assert!(grant.spend(4));
        assert_eq!(grant.left.load(Ordering::Acquire), 0);
    }

    #[test]
    fn concurrent_spends_never_take_more_than_was_granted() {
        let grant = Arc::new(Grant::default());
        grant.refund(1000);
        let spenders: Vec<_> = (0..8)
            .map(|_| {
                let grant = grant.clone();
                std::thread::spawn(move || (0..500).filter(|_| grant.spend(1)).count())
            })
            .collect();
        let spent: usize = spenders.into_iter().map(|s| s.join().unwrap()).sum();
        assert_eq!(spent, 1000);
        assert_eq!(grant.left.load(Ordering::Acquire), 0);
    }
}
