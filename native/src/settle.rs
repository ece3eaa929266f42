//! Settling: the calls the server served under decisions go to the one ledger (Python's
//! `settle`, router/fast/settle.py) as `Receipt`s, in groups, and each request's answer leaves
//! only once the ledger has taken its calls (their usage in the journal: group commit). One GIL
//! acquisition and one call settle every request waiting, so a loaded server pays for Python
//! once per group rather than once per request.
//!
//! The ledger judges each node's answer as the pipeline judges its own, and takes a request's
//! receipts all or none (`Verdict.served`); a request it does not take goes to the pipeline.

use std::sync::{Arc, Mutex};

use hyper::body::Bytes;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use tokio::sync::{oneshot, Notify};

use crate::contract::{fields, Types};
use crate::contract_gen::{receipt, verdict};
use crate::driver::log_error;
use crate::memo::Entry;

const LOGGER: &str = "chainrouter.router.executors.native";

/// One call served under a decision: the fields of `contract.Receipt` but its request's number
/// (the decision is the entry's).
pub struct ReceiptParts {
    pub entry: Arc<Entry>,
    pub call_id: Bytes,
    pub answer: Option<Bytes>,
    pub elapsed: f64,
    pub joined: bool,
}

/// The ledger's word on one receipt.
pub struct Verdict {
    pub served: bool,
    /// For a call that joined: the answer's `"result":...`, to give under its own id.
    pub member: Option<Bytes>,
}

struct Pending {
    receipts: Vec<ReceiptParts>,
    /// None: nobody waits for the verdicts (free answers, taken whatever they are).
    reply: Option<oneshot::Sender<Option<Vec<Verdict>>>>,
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

    fn push(&self, pending: Pending) {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).push(pending);
        self.wake.notify_one();
    }

    /// The ledger's verdicts on one request's receipts, in order; None if it failed.
    pub async fn settle(&self, receipts: Vec<ReceiptParts>) -> Option<Vec<Verdict>> {
        let (reply, verdicts) = oneshot::channel();
        self.push(Pending { receipts, reply: Some(reply) });
        verdicts.await.ok().flatten()
    }

    /// Hand receipts over without waiting for their verdicts.
    pub fn hand(&self, receipts: Vec<ReceiptParts>) {
        self.push(Pending { receipts, reply: None });
    }

    /// Settle what is waiting, group by group, for as long as the server runs.
    pub async fn run(self: Arc<Self>, types: Arc<Types>) {
        loop {
            self.wake.notified().await;
            let group =
                std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
            if group.is_empty() {
                continue;
            }
            Python::with_gil(|py| {
                let mut verdicts = self.call(py, &types, &group).map(Vec::into_iter);
                for pending in group {
                    let taken = verdicts.as_mut().map(|all| {
                        all.by_ref().take(pending.receipts.len()).collect::<Vec<Verdict>>()
                    });
                    if let Some(reply) = pending.reply {
                        let _ = reply.send(taken); // a client gone meanwhile: nothing to tell
                    }
                }
            });
        }
    }

    /// The ledger's verdicts on every receipt of `group`, in order; None if it failed.
    fn call(&self, py: Python<'_>, types: &Types, group: &[Pending]) -> Option<Vec<Verdict>> {
        let outcome = (|| -> PyResult<Vec<Verdict>> {
            let receipts = PyList::empty(py);
            let mut count = 0;
            for (request, pending) in group.iter().enumerate() {
                for parts in &pending.receipts {
                    receipts.append(build(py, types, request, parts)?)?;
                    count += 1;
                }
            }
            let returned = self.settle.call1(py, (receipts,))?;
            let returned: &PyList = returned.as_ref(py).downcast()?;
            if returned.len() != count {
                return Err(PyValueError::new_err("settle gave another number of verdicts"));
            }
            returned.iter().map(|given| read(types, given)).collect()
        })();
        outcome
            .map_err(|error| {
                log_error(py, LOGGER, "settling calls served under decisions failed", error)
            })
            .ok()
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
    types.receipt.build(py, values)
}

fn read(types: &Types, given: &PyAny) -> PyResult<Verdict> {
    let served: bool = types.verdict.get(given, verdict::SERVED)?.extract()?;
    let member: Option<&PyBytes> = types.verdict.get(given, verdict::MEMBER)?.extract()?;
    Ok(Verdict { served, member: member.map(|m| Bytes::copy_from_slice(m.as_bytes())) })
}
