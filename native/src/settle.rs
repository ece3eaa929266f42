//! Settling: the calls the server served under decisions go to the one ledger (Python's
//! `settle`, router/fast/settle.py) in groups, and each request's answer leaves only once the
//! ledger has taken its calls (their usage in the journal: group commit). One GIL acquisition
//! and one call settle every request waiting, so a loaded server pays for Python once per group
//! rather than once per request.
//!
//! A call whose node answered plainly (json.rs, `plain_result`), or that took its decision's own
//! answer, needs no judging: it goes in its decision's `Tally`. Any other goes as a `Receipt`,
//! which the ledger judges as the pipeline judges a node's answer; a request is served only if
//! each of its receipts is (`Verdict.served`), and the ledger books none of a request refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hyper::body::Bytes;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use tokio::sync::{oneshot, Notify};

use crate::contract::{fields, Types};
use crate::contract_gen::{receipt, settled, tally, verdict};
use crate::driver::log_error;
use crate::memo::Entry;

const LOGGER: &str = "chainrouter.router.executors.native";

/// A call for the ledger to judge: the fields of `contract.Receipt` but its request's number.
pub struct ReceiptParts {
    pub entry: Arc<Entry>,
    pub call_id: Bytes,
    pub answer: Option<Bytes>,
    pub elapsed: f64,
    pub joined: bool,
    /// The call's bytes, when the audits sample it (memo.rs, `audit_due`).
    pub audited: Option<Bytes>,
}

/// A call with nothing to judge, for its decision's `Tally` (with its answer, for a decision
/// whose every answer the ledger reads).
pub struct Tallied {
    pub entry: Arc<Entry>,
    pub elapsed: f64,
    /// For a decision whose every answer the ledger reads (`judge_each`): the head its plain
    /// result holds (json.rs, `result_quantity`), -1 where it holds none.
    pub head: Option<i64>,
}

/// The ledger's word on one receipt.
pub struct Verdict {
    pub served: bool,
    /// For a call that joined: the answer's `"result":...`, to give under its own id.
    pub member: Option<Bytes>,
}

/// One request's calls.
pub struct Settling {
    pub receipts: Vec<ReceiptParts>,
    pub tallied: Vec<Tallied>,
}

/// The ledger's word on one request: its receipts' verdicts, in order, and whether it refused
/// the request whole.
pub struct Taken {
    pub verdicts: Vec<Verdict>,
    pub refused: bool,
}

struct Pending {
    settling: Settling,
    /// None: nobody waits for the verdicts (free answers, taken whatever they are).
    reply: Option<oneshot::Sender<Option<Taken>>>,
}

pub struct Settler {
    settle: PyObject,
    waiting: Mutex<Vec<Pending>>,
    wake: Notify,
}

impl Settler {
    pub fn new(settle: PyObject) -> Settler {
        Settler { settle, waiting: Mutex::new(Vec::new()), wake: Notify::new() }
    }

    /// The requests waiting, leaving room for as many (a loaded server's groups keep their
    /// size, up to 1,024: no growing the list again, request by request).
    fn take_waiting(&self) -> Vec<Pending> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let room = waiting.capacity().min(1024);
        std::mem::replace(&mut *waiting, Vec::with_capacity(room))
    }

    fn push(&self, pending: Pending) {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).push(pending);
        self.wake.notify_one();
    }

    /// The ledger's word on one request; None if the ledger failed.
    pub async fn settle(&self, settling: Settling) -> Option<Taken> {
        let (reply, verdicts) = oneshot::channel();
        self.push(Pending { settling, reply: Some(reply) });
        verdicts.await.ok().flatten()
    }

    /// Hand a request's calls over without waiting for the ledger.
    pub fn hand(&self, settling: Settling) {
        self.push(Pending { settling, reply: None });
    }

    /// Settle what is waiting, group by group, for as long as the server runs.
    pub async fn run(self: Arc<Self>, types: Arc<Types>) {
        loop {
            self.wake.notified().await;
            let group = self.take_waiting();
            if group.is_empty() {
                continue;
            }
            Python::with_gil(|py| {
                let settled = self.call(py, &types, &group);
                let (mut verdicts, refused) = match settled {
                    Some((verdicts, refused)) => (Some(verdicts.into_iter()), refused),
                    None => (None, Vec::new()),
                };
                for (request, pending) in group.into_iter().enumerate() {
                    let count = pending.settling.receipts.len();
                    let taken = verdicts.as_mut().map(|all| Taken {
                        verdicts: all.by_ref().take(count).collect(),
                        refused: refused.contains(&request),
                    });
                    if let Some(reply) = pending.reply {
                        let _ = reply.send(taken); // a client gone meanwhile: nothing to tell
                    }
                }
            });
        }
    }

    /// The ledger's verdicts on every receipt of `group`, in order, and the requests it refused
    /// whole; None if it failed.
    fn call(
        &self,
        py: Python<'_>,
        types: &Types,
        group: &[Pending],
    ) -> Option<(Vec<Verdict>, Vec<usize>)> {
        let outcome = (|| -> PyResult<(Vec<Verdict>, Vec<usize>)> {
            let receipts = PyList::empty(py);
            let mut count = 0;
            // By decision (its entry), in the order first met: each call's request, time and,
            // for a decision whose answers the ledger reads, the head it tells.
            let mut tallies: Vec<Gathered<'_>> = Vec::new();
            let mut tally_of: HashMap<*const Entry, usize> = HashMap::new();
            for (request, pending) in group.iter().enumerate() {
                for parts in &pending.settling.receipts {
                    receipts.append(build(py, types, request, parts)?)?;
                    count += 1;
                }
                for call in &pending.settling.tallied {
                    let at = *tally_of.entry(Arc::as_ptr(&call.entry)).or_insert_with(|| {
                        tallies.push(Gathered::of(&call.entry));
                        tallies.len() - 1
                    });
                    let tally = &mut tallies[at];
                    tally.requests.push(request);
                    tally.elapsed.push(call.elapsed);
                    if let Some(head) = call.head {
                        tally.heads.push(head);
                    }
                }
            }
            let built = PyList::empty(py);
            for Gathered { entry, requests, elapsed, heads } in tallies {
                let mut values = fields();
                values[tally::DECISION] = Some(entry.decision.clone_ref(py));
                values[tally::REQUESTS] = Some(requests.into_py(py));
                values[tally::ELAPSED_S] = Some(elapsed.into_py(py));
                let heads = entry.judge_each.then_some(heads);
                values[tally::HEADS] = Some(heads.into_py(py));
                built.append(types.tally.build(py, values)?)?;
            }
            let returned = self.settle.call1(py, (receipts, built))?;
            let returned = returned.as_ref(py);
            let verdicts: &PyList = types.settled.get(returned, settled::VERDICTS)?.downcast()?;
            let refused: Vec<usize> = types.settled.get(returned, settled::REFUSED)?.extract()?;
            if verdicts.len() != count {
                return Err(PyValueError::new_err("settle gave another number of verdicts"));
            }
            let verdicts =
                verdicts.iter().map(|given| read(types, given)).collect::<PyResult<_>>()?;
            Ok((verdicts, refused))
        })();
        outcome
            .map_err(|error| {
                log_error(py, LOGGER, "settling calls served under decisions failed", error)
            })
            .ok()
    }
}

/// One decision's plain calls in a group, gathered into the lists its Tally carries.
struct Gathered<'a> {
    entry: &'a Arc<Entry>,
    requests: Vec<usize>,
    elapsed: Vec<f64>,
    heads: Vec<i64>,
}

impl<'a> Gathered<'a> {
    fn of(entry: &'a Arc<Entry>) -> Self {
        Gathered { entry, requests: Vec::new(), elapsed: Vec::new(), heads: Vec::new() }
    }
}

fn build(
    py: Python<'_>,
    types: &Types,
    request: usize,
    parts: &ReceiptParts,
) -> PyResult<PyObject> {
    let bytes = |data: &Bytes| PyObject::from(PyBytes::new(py, data));
    let mut values = fields();
    values[receipt::DECISION] = Some(parts.entry.decision.clone_ref(py));
    values[receipt::REQUEST] = Some(request.into_py(py));
    values[receipt::CALL_ID] = Some(bytes(&parts.call_id));
    values[receipt::ANSWER] = Some(parts.answer.as_ref().map(bytes).into_py(py));
    values[receipt::ELAPSED_S] = Some(parts.elapsed.into_py(py));
    values[receipt::JOINED] = Some(parts.joined.into_py(py));
    values[receipt::AUDITED] = Some(parts.audited.as_ref().map(bytes).into_py(py));
    types.receipt.build(py, values)
}

fn read(types: &Types, given: &PyAny) -> PyResult<Verdict> {
    let served: bool = types.verdict.get(given, verdict::SERVED)?.extract()?;
    let member: Option<&PyBytes> = types.verdict.get(given, verdict::MEMBER)?.extract()?;
    Ok(Verdict { served, member: member.map(|m| Bytes::copy_from_slice(m.as_bytes())) })
}
