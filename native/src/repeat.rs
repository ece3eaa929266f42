//! Serving a request under the decisions the memo found for its calls (memo.rs): each call is
//! sent, as the client wrote it, to its decision's node (or joins an identical call in flight, or
//! takes its decision's answer), and the receipts go to the ledger (settle.rs). When the ledger
//! takes them all, the answer is written here; otherwise the request goes to the pipeline with
//! what its nodes did, each call's attempt standing for the pipeline's first (`Attempted`): a
//! node is never asked the same call twice for one request, and its failure is judged by the
//! pipeline alone.
//!
//! Calls of one request going to the same node are sent to it in upstream batches of at most
//! the decision's `batch` calls (distinct ids only), and each call takes the answer under its
//! own id. A batch the node answers otherwise (not an array of answers, an id missing) leaves
//! those calls without an attempt: the pipeline asks each on its own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Body, Response};

use crate::flights::{landing, Boarding, Flights, Landing, Leader};
use crate::json::{plain_result, read_answers, result_quantity, Call};
use crate::memo::{call_template, Action, Memo, Plan, Planned};
use crate::settle::{ReceiptParts, Settler, Settling, Taken, Tallied, Verdict};
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
    /// Sent to the decision's node: its answer or failure.
    Own { outcome: Result<Bytes, Failure>, elapsed: f64 },
    /// Sent in a batch the node did not answer call by call: no attempt to speak of.
    Unanswered,
    /// Took the answer of an identical call in flight (None: that call got none), with the id
    /// that call was sent under.
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

/// A call to send to its node: its place in the request, its bytes and id.
struct ToSend {
    call: usize,
    sent: Bytes,
    id: Bytes,
    leader: Option<Leader>,
}

/// Serve `plan`, the calls of the request whose body is `body`.
pub async fn serve(applying: Applying<'_>, mut plan: Plan, body: &Bytes) -> Served {
    let started = Instant::now();
    let outcomes = outcomes(&applying, &plan, body).await;
    for (planned, outcome) in plan.calls.iter_mut().zip(&outcomes) {
        if matches!(outcome, Outcome::Joined { .. }) {
            planned.joined();
        }
    }
    // Answers past the bound the decisions carry are the pipeline's to withhold, one by one
    // (router/stages/bounds.py): nothing of the request is settled here.
    let verdicts = if within_bound(&plan, &outcomes) {
        settle(&applying, &plan, &outcomes, body).await
    } else {
        None
    };
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

/// Whether the request's answers, each counted as `answer` writes it (a call that joined, as
/// the answer it joined), take at most the bound its decisions carry.
fn within_bound(plan: &Plan, outcomes: &[Outcome]) -> bool {
    let bound = plan.calls.iter().map(|planned| planned.entry.max_answer_bytes).min();
    let Some(bound) = bound.filter(|bound| *bound > 0) else {
        return true;
    };
    let mut total = 0usize;
    for (planned, outcome) in plan.calls.iter().zip(outcomes) {
        total += match (outcome, &planned.entry.action) {
            (Outcome::Own { outcome: Ok(answer), .. }, _) => answer.len(),
            (Outcome::Joined { answer: Some((answer, _)), .. }, _) => answer.len(),
            (Outcome::Answer, Action::Answer { member }) => {
                MEMBER_FRAME + (planned.id.1 - planned.id.0) + member.len()
            }
            _ => 0, // not served here at all: the pipeline's
        };
        if total > bound {
            return false;
        }
    }
    true
}

/// The bytes `member_answer` adds to an id and a member.
const MEMBER_FRAME: usize = br#"{"jsonrpc":"2.0","id":,}"#.len();

/// What became of each call: answers taken, flights joined, the rest sent to their nodes.
async fn outcomes(applying: &Applying<'_>, plan: &Plan, body: &Bytes) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = (0..plan.calls.len()).map(|_| None).collect();
    let mut joining = Vec::new();
    // By node: the calls to send it, in the request's order.
    let mut sending: Vec<(&Planned, Vec<ToSend>)> = Vec::new();
    for (call, planned) in plan.calls.iter().enumerate() {
        let Action::Forward { flight, .. } = &planned.entry.action else {
            outcomes[call] = Some(Outcome::Answer);
            continue;
        };
        let sent = if plan.batch { slice(body, planned.object) } else { body.clone() };
        let id = slice(body, planned.id);
        let leader = match flight {
            None => None,
            Some(flight) => match applying.flights.board(&flight_key(body, planned, *flight)) {
                Boarding::Lead(leader) => Some(leader),
                Boarding::Join(awaiting) => {
                    joining.push((call, planned.entry.clone(), awaiting));
                    continue;
                }
            },
        };
        let to_send = ToSend { call, sent, id, leader };
        match sending.iter_mut().find(|(first, _)| same_node(first, planned)) {
            Some((_, calls)) => calls.push(to_send),
            None => sending.push((planned, vec![to_send])),
        }
    }
    if joining.is_empty() && sending.len() == 1 && sending[0].1.len() == 1 {
        // The usual request: one call to one node, awaited as it is.
        let (first, calls) = sending.pop().expect("one node to send to");
        let Action::Forward { url, timeout, .. } = &first.entry.action else {
            unreachable!("only forwards are sent");
        };
        for (call, outcome) in send(applying.upstream, url.clone(), *timeout, calls).await {
            outcomes[call] = Some(outcome);
        }
        return outcomes.into_iter().map(|o| o.unwrap_or(Outcome::Unanswered)).collect();
    }
    let sends = sending.into_iter().flat_map(|(first, calls)| {
        let Action::Forward { url, timeout, batch, .. } = &first.entry.action else {
            unreachable!("only forwards are sent");
        };
        batches(calls, *batch)
            .into_iter()
            .map(move |group| send(applying.upstream, url.clone(), *timeout, group))
    });
    let joins = joining.into_iter().map(|(call, entry, awaiting)| async move {
        let Action::Forward { timeout, .. } = &entry.action else {
            unreachable!("only forwards join flights");
        };
        let started = Instant::now();
        let landed = tokio::time::timeout(*timeout, landing(awaiting)).await.ok().flatten();
        let answer = match landed {
            Some(Landing::Answer(answer)) => answer,
            _ => None,
        };
        vec![(call, Outcome::Joined { answer, elapsed: started.elapsed().as_secs_f64() })]
    });
    let sent = join_all(sends);
    let joined = join_all(joins);
    let (sent, joined) = futures_util::future::join(sent, joined).await;
    for (call, outcome) in sent.into_iter().chain(joined).flatten() {
        outcomes[call] = Some(outcome);
    }
    outcomes.into_iter().map(|outcome| outcome.unwrap_or(Outcome::Unanswered)).collect()
}

fn slice(body: &Bytes, (start, end): (usize, usize)) -> Bytes {
    body.slice(start..end)
}

fn same_node(first: &Planned, other: &Planned) -> bool {
    match (&first.entry.action, &other.entry.action) {
        (Action::Forward { url: a, .. }, Action::Forward { url: b, .. }) => a == b,
        _ => false,
    }
}

/// The key of a call's flight: chain and seen head, then the call with its id marked.
fn flight_key(body: &[u8], planned: &Planned, (chain, seen): (u64, i64)) -> Vec<u8> {
    let mut key = Vec::with_capacity(planned.object.1 - planned.object.0 + 24);
    key.push(b's'); // the server's keys: apart from the pipeline's (driver.rs)
    key.extend_from_slice(&chain.to_le_bytes());
    key.extend_from_slice(&seen.to_le_bytes());
    let call = Call { object: planned.object, id: planned.id, method: None, elements: None };
    call_template(&mut key, body, &call, None);
    key
}

/// The calls to one node in groups of at most `batch`, each group's ids distinct (a call whose
/// id is already in every open group goes alone).
fn batches(calls: Vec<ToSend>, batch: usize) -> Vec<Vec<ToSend>> {
    if calls.len() == 1 {
        return vec![calls]; // the usual case: no ids to keep apart
    }
    let mut groups: Vec<(Vec<ToSend>, HashSet<Bytes>)> = Vec::new();
    for call in calls {
        let open =
            groups.iter_mut().find(|(group, ids)| group.len() < batch && !ids.contains(&call.id));
        match open {
            Some((group, ids)) => {
                ids.insert(call.id.clone());
                group.push(call);
            }
            None => {
                let ids = HashSet::from([call.id.clone()]);
                groups.push((vec![call], ids));
            }
        }
    }
    groups.into_iter().map(|(group, _)| group).collect()
}

/// Send one group of calls to the node at `url`: one call as it is, several as a batch. Each
/// flight the group's calls lead lands with its call's answer.
async fn send(
    upstream: &Upstream,
    url: String,
    timeout: Duration,
    group: Vec<ToSend>,
) -> Vec<(usize, Outcome)> {
    let started = Instant::now();
    let body = if group.len() == 1 {
        group[0].sent.clone()
    } else {
        let size = group.iter().map(|call| call.sent.len() + 1).sum::<usize>() + 1;
        let mut batch = Vec::with_capacity(size);
        batch.push(b'[');
        for (index, call) in group.iter().enumerate() {
            if index > 0 {
                batch.push(b',');
            }
            batch.extend_from_slice(&call.sent);
        }
        batch.push(b']');
        Bytes::from(batch)
    };
    let single = group.len() == 1;
    let answered = upstream.post(&url, body, timeout).await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut answers: HashMap<Bytes, Bytes> = HashMap::new();
    if let (Ok(answer), false) = (&answered, single) {
        for (id, object) in read_answers(answer).unwrap_or_default() {
            answers.insert(slice(answer, id), slice(answer, object));
        }
    }
    group
        .into_iter()
        .map(|ToSend { call, id, leader, .. }| {
            let outcome = match &answered {
                Err(failure) => Some(Err(failure.clone())),
                Ok(answer) if single => Some(Ok(answer.clone())),
                Ok(_) => answers.get(&id).cloned().map(Ok),
            };
            if let Some(leader) = leader {
                let landed = match &outcome {
                    Some(Ok(answer)) => Some((answer.clone(), id.clone())),
                    _ => None,
                };
                leader.land(Landing::Answer(landed));
            }
            let outcome = match outcome {
                Some(outcome) => Outcome::Own { outcome, elapsed },
                None => Outcome::Unanswered,
            };
            (call, outcome)
        })
        .collect()
}

/// The ledger's verdicts on the request's calls (each served call's, in order); None when it
/// cannot take them all (a node's failure, a call its node did not answer, one that joined a
/// call that got no answer) or it failed.
async fn settle(
    applying: &Applying<'_>,
    plan: &Plan,
    outcomes: &[Outcome],
    body: &Bytes,
) -> Option<Vec<Verdict>> {
    let mut settling = Settling { receipts: Vec::new(), tallied: Vec::new() };
    // Per call: None for a tallied one, else its receipt's index.
    let mut judged = Vec::with_capacity(outcomes.len());
    let mut waits = false;
    for (planned, outcome) in plan.calls.iter().zip(outcomes) {
        let entry = planned.entry.clone();
        let own_id = slice(body, planned.id);
        let parts = match outcome {
            Outcome::Own { outcome: Ok(answer), elapsed } => {
                waits = true;
                let audited = entry.audit_due().then(|| slice(body, planned.object));
                let plain = if audited.is_none() { plain_result(answer, &own_id) } else { None };
                if let Some((start, end)) = plain {
                    let head = entry.judge_each.then(|| {
                        result_quantity(&answer[start..end])
                            .and_then(|head| i64::try_from(head).ok())
                            .unwrap_or(-1)
                    });
                    settling.tallied.push(Tallied { entry, elapsed: *elapsed, head });
                    judged.push(None);
                    continue;
                }
                ReceiptParts {
                    entry,
                    call_id: own_id,
                    answer: Some(answer.clone()),
                    elapsed: *elapsed,
                    joined: false,
                    audited,
                }
            }
            Outcome::Joined { answer: Some((answer, leader_id)), elapsed } => {
                waits = true;
                ReceiptParts {
                    entry,
                    call_id: leader_id.clone(),
                    answer: Some(answer.clone()),
                    elapsed: *elapsed,
                    joined: true,
                    audited: None,
                }
            }
            Outcome::Answer => {
                waits |= entry.spend > 0;
                settling.tallied.push(Tallied { entry, elapsed: 0.0, head: None });
                judged.push(None);
                continue;
            }
            _ => return None,
        };
        judged.push(Some(settling.receipts.len()));
        settling.receipts.push(parts);
    }
    let served = |taken: Taken| -> Vec<Verdict> {
        let mut verdicts: Vec<Option<Verdict>> = taken.verdicts.into_iter().map(Some).collect();
        let refused = taken.refused;
        judged
            .iter()
            .map(|at| match at {
                None => Verdict { served: !refused, member: None },
                Some(at) => verdicts[*at].take().unwrap_or(Verdict { served: false, member: None }),
            })
            .collect()
    };
    if !waits {
        // Free answers only: nothing is charged, so nothing needs to be in the journal before
        // the answer leaves; the ledger books them as they come (a `kill -9` in between loses
        // them from usage, and they cost nothing).
        applying.settler.hand(settling);
        return Some(served(Taken { verdicts: Vec::new(), refused: false }));
    }
    applying.settler.settle(settling).await.map(served)
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
