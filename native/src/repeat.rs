//! Serving a request under the decisions the memo found for its calls (memo.rs): each call is
//! sent, as the client wrote it, to its decision's node (or joins an identical call in flight, or
//! takes its decision's answer), and the receipts go to the ledger (settle.rs). When the ledger
//! takes them all, the answer is written here; otherwise the request goes to the pipeline with
//! what its nodes did, each call's attempt standing for the pipeline's first (`Attempted`): a
//! node is never asked the same call twice for one request, and its failure is judged by the
//! pipeline alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Body, Response};

use crate::flights::{landing, Boarding, Flights, Landing};
use crate::memo::{call_template, Action, Memo, Plan, Planned};
use crate::settle::{ReceiptParts, Settler, Verdict};
use crate::upstream::{Failure, Upstream};

/// How a request under decisions ended.
pub enum Served {
    /// The ledger took every call: the answer to write.
    Answer(Response<Body>),
    /// The pipeline's to answer, with the calls the server sent meanwhile.
    Pipeline { attempts: Vec<Made>, waited: f64 },
}

/// A call the server sent to a node: `contract.Attempted`.
pub struct Made {
    pub call: usize,
    pub node_id: i64,
    pub outcome: Result<Bytes, Failure>,
    pub elapsed: f64,
    pub timeout: Duration,
}

enum Outcome {
    /// Sent to the decision's node: its answer or failure, and the id it was sent under.
    Own { outcome: Result<Bytes, Failure>, elapsed: f64 },
    /// Took the answer of an identical call in flight (None: that call got none), sent under
    /// the leader's id.
    Joined { answer: Option<(Bytes, Bytes)>, elapsed: f64 },
    /// The decision's own answer.
    Answer,
}

/// What a server needs to serve requests under decisions.
pub struct Applying<'a> {
    pub upstream: &'a Upstream,
    pub flights: &'a Arc<Flights>,
    pub memo: &'a Memo,
    pub settler: &'a Settler,
}

/// Serve `plan`, the calls of the request whose body is `body`.
pub async fn serve(applying: Applying<'_>, mut plan: Plan, body: &Bytes) -> Served {
    let started = Instant::now();
    let sending = plan.calls.iter().map(|planned| send(&applying, planned, body, plan.batch));
    let outcomes = join_all(sending).await;
    for (planned, outcome) in plan.calls.iter_mut().zip(&outcomes) {
        if matches!(outcome, Outcome::Joined { .. }) {
            planned.joined();
        }
    }
    let verdicts = settle(&applying, &plan, &outcomes, body).await;
    if let Some(verdicts) = verdicts.filter(|v| v.iter().all(|verdict| verdict.served)) {
        return Served::Answer(answer(applying.memo, &plan, &outcomes, &verdicts, body));
    }
    plan.refund();
    let attempts = plan
        .calls
        .iter()
        .zip(outcomes)
        .enumerate()
        .filter_map(|(call, (planned, outcome))| match (outcome, &planned.entry.action) {
            (Outcome::Own { outcome, elapsed }, Action::Forward { node_id, timeout, .. }) => {
                Some(Made { call, node_id: *node_id, outcome, elapsed, timeout: *timeout })
            }
            _ => None,
        })
        .collect();
    Served::Pipeline { attempts, waited: started.elapsed().as_secs_f64() }
}

/// Send one call under its decision.
async fn send(applying: &Applying<'_>, planned: &Planned, body: &Bytes, batch: bool) -> Outcome {
    let Action::Forward { url, timeout, flight, .. } = &planned.entry.action else {
        return Outcome::Answer;
    };
    let sent = if batch { body.slice(planned.object.0..planned.object.1) } else { body.clone() };
    let Some((chain, seen)) = flight else {
        return own(applying.upstream, url, sent, *timeout).await;
    };
    let mut key = Vec::with_capacity(planned.object.1 - planned.object.0 + 24);
    key.push(b's');
    key.extend_from_slice(&chain.to_le_bytes());
    key.extend_from_slice(&seen.to_le_bytes());
    call_template(&mut key, body, &call_of(planned), None);
    match applying.flights.board(&key) {
        Boarding::Lead(leader) => {
            let outcome = own(applying.upstream, url, sent, *timeout).await;
            let id = body.slice(planned.id.0..planned.id.1);
            let landed = match &outcome {
                Outcome::Own { outcome: Ok(answer), .. } => Some((answer.clone(), id)),
                _ => None,
            };
            leader.land(Landing::Answer(landed));
            outcome
        }
        Boarding::Join(awaiting) => {
            let started = Instant::now();
            let landed = tokio::time::timeout(*timeout, landing(awaiting)).await.ok().flatten();
            let answer = match landed {
                Some(Landing::Answer(answer)) => answer,
                _ => None,
            };
            Outcome::Joined { answer, elapsed: started.elapsed().as_secs_f64() }
        }
    }
}

fn call_of(planned: &Planned) -> crate::json::Call {
    crate::json::Call { object: planned.object, id: planned.id, method: None, elements: None }
}

async fn own(upstream: &Upstream, url: &str, sent: Bytes, timeout: Duration) -> Outcome {
    let started = Instant::now();
    let outcome = upstream.post(url, sent, timeout).await;
    Outcome::Own { outcome, elapsed: started.elapsed().as_secs_f64() }
}

/// The ledger's verdicts on the request's calls; None when it cannot take them all (a node's
/// failure, a joined call whose leader got no answer) or failed.
async fn settle(
    applying: &Applying<'_>,
    plan: &Plan,
    outcomes: &[Outcome],
    body: &Bytes,
) -> Option<Vec<Verdict>> {
    let mut receipts = Vec::with_capacity(outcomes.len());
    let mut waits = false;
    for (planned, outcome) in plan.calls.iter().zip(outcomes) {
        let own_id = body.slice(planned.id.0..planned.id.1);
        let (call_id, answer, elapsed, joined) = match outcome {
            Outcome::Own { outcome: Ok(answer), elapsed } => {
                (own_id, Some(answer.clone()), *elapsed, false)
            }
            Outcome::Own { outcome: Err(_), .. } => return None,
            Outcome::Joined { answer: Some((answer, leader_id)), elapsed } => {
                (leader_id.clone(), Some(answer.clone()), *elapsed, true)
            }
            Outcome::Joined { answer: None, .. } => return None,
            Outcome::Answer => (own_id, None, 0.0, false),
        };
        waits |= answer.is_some() || planned.entry.spend > 0;
        let entry = planned.entry.clone();
        receipts.push(ReceiptParts { entry, call_id, answer, elapsed, joined });
    }
    if !waits {
        // Free answers only: nothing is charged, so nothing needs to be in the journal before
        // the answer leaves; the ledger books them as they come (a `kill -9` in between loses
        // them from usage, and they cost nothing).
        let count = receipts.len();
        applying.settler.hand(receipts);
        return Some((0..count).map(|_| Verdict { served: true, member: None }).collect());
    }
    applying.settler.settle(receipts).await
}

/// The request's answer: each call's, in order, under the caller's ids.
fn answer(
    memo: &Memo,
    plan: &Plan,
    outcomes: &[Outcome],
    verdicts: &[Verdict],
    body: &Bytes,
) -> Response<Body> {
    let mut items: Vec<Bytes> = Vec::with_capacity(outcomes.len());
    for ((planned, outcome), verdict) in plan.calls.iter().zip(outcomes).zip(verdicts) {
        let id = &body[planned.id.0..planned.id.1];
        let item = match (outcome, &planned.entry.action) {
            (Outcome::Own { outcome: Ok(answer), .. }, _) => answer.clone(),
            (Outcome::Joined { .. }, _) => {
                member_answer(id, verdict.member.as_deref().unwrap_or(b"\"result\":null"))
            }
            (_, Action::Answer { member }) => member_answer(id, member),
            _ => unreachable!("only served calls are answered"),
        };
        items.push(item);
    }
    let whole = if plan.batch {
        let size = items.iter().map(Bytes::len).sum::<usize>() + items.len() + 1;
        let mut whole = Vec::with_capacity(size);
        whole.push(b'[');
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                whole.push(b',');
            }
            whole.extend_from_slice(item);
        }
        whole.push(b']');
        Bytes::from(whole)
    } else {
        items.pop().unwrap_or_default()
    };
    let mut response = Response::new(Body::from(whole));
    let headers = response.headers_mut();
    if let Some(first) = plan.calls.first() {
        for (name, value) in &first.entry.headers {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(value) = HeaderValue::from_str(&memo.next_batch_id()) {
        headers.insert(HeaderName::from_static("x-batch-id"), value);
    }
    response
}

/// `{"jsonrpc":"2.0","id":<id>,<member>}`.
fn member_answer(id: &[u8], member: &[u8]) -> Bytes {
    let mut item = Vec::with_capacity(24 + id.len() + member.len());
    item.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    item.extend_from_slice(id);
    item.push(b',');
    item.extend_from_slice(member);
    item.push(b'}');
    Bytes::from(item)
}
