//! Running the router's programs (`chainrouter.router.contract`) without an asyncio event loop.
//!
//! A program is a Python coroutine that awaits only the contract's commands. It is stepped here,
//! on the server's thread, and each command it yields is carried out:
//! - `Forward`: a POST to a node, done by `Upstream` while Python waits; resumed with the answer's
//!   bytes or a `Failure`;
//! - `Gather`: several programs at once (the calls of a batch), each driven the same way;
//! - `Race`: several programs, each from its own delay, until one returns a value (`race.rs`);
//!   the others are dropped where they wait and their coroutines closed;
//! - `Acquire`: the rate limiter, which is Python: the host's function answers at once (the
//!   in-process limiter) or with a `concurrent.futures.Future` (Redis, on the event loop's
//!   thread), waited for here without the GIL;
//! - `Join`: a `concurrent.futures.Future` of the host's (the response cache's Redis, a call in
//!   flight that others joined), waited for the same way;
//! - `Wait` and `Spawn`: a pause, and a program started on its own (the health checker runs here
//!   beside the requests).
//!
//! Anything else a program awaits is a bug in it, and is thrown back into it as a RuntimeError.
//!
//! A request whose repeated forward failed at its node (forward.rs) is driven `after_failed`:
//! its program's first `Forward`, if it is the same body to the same node, waiting no longer
//! than the repeat waited when it timed out, and the program waited for nothing before it, is
//! resumed with the repeat's failure instead of being sent. The pipeline then judges that failure as it would its own first attempt (its
//! classifier decides what it means for the node) and goes on to the next route.

use std::cell::RefCell;
use std::future::Future;
use std::net::IpAddr;
use std::os::raw::c_int;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use hyper::body::Bytes;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyCFunction, PyDict, PyFloat, PyList, PyTuple};
use pyo3::{ffi, AsPyPointer};

use crate::contract::{Kind, Types};
use crate::race::{first_some, Racer};
use crate::upstream::{Failure, Upstream, UpstreamSettings, Vet};

extern "C" {
    // pyo3-ffi 0.17 declares this without its result; CPython 3.10 and later export it.
    fn PyIter_Send(
        iter: *mut ffi::PyObject,
        arg: *mut ffi::PyObject,
        presult: *mut *mut ffi::PyObject,
    ) -> c_int;
}
const PYGEN_RETURN: c_int = 0;
const PYGEN_NEXT: c_int = 1;

const LOGGER: &str = "chainrouter.router.executors.native";

/// A node's failure the request met before its program ran: its repeated forward's (forward.rs).
pub struct FailedAttempt {
    pub url: String,
    pub body: Bytes,
    /// How long the repeat would wait on the node (its time-out): a time-out stands only for
    /// an attempt that would wait no longer.
    pub waited: Duration,
    pub failure: Failure,
}

impl FailedAttempt {
    /// Whether it is the attempt `Forward { url, body, timeout }` would make.
    fn stands_for(&self, url: &str, body: &[u8], timeout: Duration) -> bool {
        self.url == url
            && self.body == body
            && (self.failure.kind != Kind::Timeout || timeout <= self.waited)
    }
}

tokio::task_local! {
    /// The failed attempt of the request driven in this task, until its first `Forward`.
    static FAILED_ATTEMPT: RefCell<Option<FailedAttempt>>;
}

/// `driving`, a request's program, with `attempt` standing in for its first `Forward` if that is
/// the same attempt (`FailedAttempt::stands_for`). Only that first one, and only if the program
/// waited for nothing before it (a call in flight it joined, a pause): any later `Forward` is
/// another attempt, made now, when the node may have recovered.
pub async fn after_failed<F: Future>(attempt: FailedAttempt, driving: F) -> F::Output {
    FAILED_ATTEMPT.scope(RefCell::new(Some(attempt)), driving).await
}

/// The request's failed attempt stands for none of its `Forward`s from now on.
fn forget_failed_attempt() {
    let _ = FAILED_ATTEMPT.try_with(|slot| slot.borrow_mut().take()); // none outside a request
}

/// The failure to resume the request's first `Forward` with, if a failed attempt stands for it.
fn failed_already(url: &str, body: &[u8], timeout: Duration) -> Option<Failure> {
    let taken = FAILED_ATTEMPT.try_with(|slot| slot.borrow_mut().take()).ok().flatten()?;
    taken.stands_for(url, body, timeout).then_some(taken.failure)
}

/// What every program the driver runs needs.
pub struct Shared {
    pub types: Types,
    /// `(Acquire) -> float | concurrent.futures.Future[float]`: the host's rate limiter (0.0: taken).
    pub acquire: PyObject,
    pub upstream: Upstream,
}

/// A tokio runtime on whichever thread calls in, with the client to nodes: `run` drives one
/// program to its end (the tests' way in); `NativeServer.serve` serves on it.
#[pyclass(module = "chainrouter._native")]
pub struct Driver {
    pub shared: Arc<Shared>,
    pub runtime: tokio::runtime::Runtime,
    /// One thread at a time drives the runtime: the client's connections belong to it.
    pub busy: Mutex<()>,
}

#[pymethods]
impl Driver {
    #[new]
    #[allow(clippy::too_many_arguments)] // the settings of the client, each named by the caller
    fn new(
        py: Python<'_>,
        acquire: PyObject,
        vet: Option<PyObject>,
        max_response_bytes: usize,
        connect_timeout_s: f64,
        idle_timeout_s: f64,
        ca_file: Option<String>,
        user_agent: String,
    ) -> PyResult<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let upstream = Upstream::new(&UpstreamSettings {
            max_response_bytes,
            connect_timeout: seconds(connect_timeout_s)?,
            idle_timeout: seconds(idle_timeout_s)?,
            ca_file,
            user_agent,
            vet: vet.map(host_vet),
        })
        .map_err(PyValueError::new_err)?;
        Ok(Driver {
            shared: Arc::new(Shared { types: Types::load(py)?, acquire, upstream }),
            runtime,
            busy: Mutex::new(()),
        })
    }

    /// Drive the program `coroutine` to its end on this thread, without the GIL while it waits.
    fn run(&self, py: Python<'_>, coroutine: PyObject) -> PyResult<PyObject> {
        let shared = self.shared.clone();
        py.allow_threads(|| {
            let _turn = self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            self.runtime.block_on(drive(shared, coroutine))
        })
    }

    /// Start the program `coroutine` on its own, from any thread; it runs whenever this driver's
    /// runtime is being driven (by `run`, or by a server's `serve`). Its failure is logged.
    fn spawn(&self, coroutine: PyObject) {
        drop(self.runtime.spawn(in_background(self.shared.clone(), coroutine)));
    }
}

/// The host's dial rule, `(address: str) -> str | None`, as the client asks it: once per address
/// of each new connection, under the GIL. A rule that fails refuses the address.
fn host_vet(rule: PyObject) -> Vet {
    Arc::new(move |ip: IpAddr| {
        Python::with_gil(|py| match rule.call1(py, (ip.to_string(),)) {
            Ok(answer) => answer.extract::<Option<String>>(py).unwrap_or_else(|_| Some("?".into())),
            Err(error) => {
                log_error(py, LOGGER, "the dial rule failed; the address is refused", error);
                Some("an address the dial rule could not judge".into())
            }
        })
    })
}

pub fn seconds(value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{value} is not a duration in seconds")))
}

/// What a program is resumed with.
enum Resume {
    Start,
    Nothing,
    Value(PyObject),
    Error(PyErr),
    Answer(Result<Bytes, Failure>),
    Results(Vec<PyObject>),
    /// A race's winner, or (-1, None), and the race's programs to close first.
    Raced(Option<(usize, PyObject)>, CloseOnDrop),
}

/// What a program asked for when it stopped.
pub enum Step {
    Done(PyObject),
    Forward {
        url: String,
        body: Bytes,
        timeout: Duration,
    },
    /// The programs of a batch, each already started (under the GIL that found them).
    Gather(Vec<(PyObject, PyResult<Step>)>),
    /// The programs of a race: the ones without delay already started, the others with theirs.
    Race(Vec<(PyObject, Racing)>),
    /// The host's answer to `Acquire`: its result, or a future of it (a `Join`'s future, too).
    Acquired(PyObject),
    AcquireLater(PyObject),
    Wait(Duration),
    Spawn(PyObject),
}

pub enum Racing {
    Started(PyResult<Step>),
    After(Duration),
}

/// After one turn under the GIL: more to wait for, or the caller's result.
enum Next<T> {
    Wait(Step),
    Finished(T),
}

pub type Driven = Pin<Box<dyn Future<Output = PyResult<PyObject>> + Send>>;

/// Start `coroutine`: run it up to its first await.
pub fn start(py: Python<'_>, shared: &Shared, coroutine: &PyAny) -> PyResult<Step> {
    advance(py, shared, coroutine, Resume::Start)
}

/// Run `coroutine` to its end; its return value, or the exception it ended with.
pub fn drive(shared: Arc<Shared>, coroutine: PyObject) -> Driven {
    let first = Python::with_gil(|py| start(py, &shared, coroutine.as_ref(py)));
    drive_started(shared, coroutine, first)
}

/// The same, for a coroutine already run up to its first wait.
fn drive_started(shared: Arc<Shared>, coroutine: PyObject, first: PyResult<Step>) -> Driven {
    Box::pin(async move {
        match first {
            Ok(Step::Done(value)) => Ok(value), // a call answered without waiting
            Ok(step) => drive_from(shared, coroutine, step, |_, outcome| outcome).await,
            Err(error) => Err(error),
        }
    })
}

/// Carry out `step` and the ones after it, then hand the coroutine's outcome to `finish` while
/// still holding the GIL that resumed it last: each wait costs one GIL acquisition, no more.
pub async fn drive_from<T, F>(shared: Arc<Shared>, coroutine: PyObject, first: Step, finish: F) -> T
where
    F: FnOnce(Python<'_>, PyResult<PyObject>) -> T,
{
    let mut finish = Some(finish);
    let mut step = first;
    loop {
        let resume = match step {
            Step::Done(value) => {
                let finish = finish.take().expect("finished once");
                return Python::with_gil(|py| finish(py, Ok(value)));
            }
            Step::Forward { url, body, timeout } => match failed_already(&url, &body, timeout) {
                Some(failure) => Resume::Answer(Err(failure)),
                None => Resume::Answer(shared.upstream.post(&url, body, timeout).await),
            },
            Step::Gather(children) => {
                let driven = children
                    .into_iter()
                    .map(|(child, first)| drive_started(shared.clone(), child, first));
                let mut results = Vec::new();
                let mut failure = None;
                for outcome in join_all(driven).await {
                    match outcome {
                        Ok(value) => results.push(value),
                        Err(error) => {
                            failure.get_or_insert(error);
                        }
                    }
                }
                match failure {
                    Some(error) => Resume::Error(error),
                    None => Resume::Results(results),
                }
            }
            Step::Race(entries) => race(&shared, entries).await,
            Step::Acquired(value) => Resume::Value(value),
            Step::AcquireLater(future) => {
                forget_failed_attempt(); // waited on something else: no longer the first try
                match wait_for(future).await {
                    Ok(value) => Resume::Value(value),
                    Err(error) => Resume::Error(error),
                }
            }
            Step::Wait(pause) => {
                forget_failed_attempt();
                tokio::time::sleep(pause).await;
                Resume::Nothing
            }
            Step::Spawn(child) => {
                drop(tokio::spawn(in_background(shared.clone(), child)));
                Resume::Nothing
            }
        };
        let next =
            Python::with_gil(|py| match advance(py, &shared, coroutine.as_ref(py), resume) {
                Ok(Step::Done(value)) => {
                    Next::Finished(finish.take().expect("once")(py, Ok(value)))
                }
                Ok(waiting) => Next::Wait(waiting),
                Err(error) => Next::Finished(finish.take().expect("once")(py, Err(error))),
            });
        match next {
            Next::Wait(waiting) => step = waiting,
            Next::Finished(result) => return result,
        }
    }
}

/// Carry out a `Race`: each program from its delay, until one returns something other than None;
/// then every program's coroutine is closed (a finished one is left as it is).
async fn race(shared: &Arc<Shared>, entries: Vec<(PyObject, Racing)>) -> Resume {
    let closing = CloseOnDrop(entries.iter().map(|(coroutine, _)| coroutine.clone()).collect());
    let racers: Vec<Racer<'_, PyObject, PyErr>> = entries
        .into_iter()
        .map(|(coroutine, racing)| -> Racer<'_, PyObject, PyErr> {
            let shared = shared.clone();
            Box::pin(async move {
                let first = match racing {
                    Racing::Started(first) => first?,
                    Racing::After(delay) => {
                        tokio::time::sleep(delay).await;
                        Python::with_gil(|py| start(py, &shared, coroutine.as_ref(py)))?
                    }
                };
                drive_racer(shared, coroutine, first).await
            })
        })
        .collect();
    let outcome = first_some(racers).await;
    match outcome {
        // Closed under the GIL that resumes the parent: no turn of the GIL of their own.
        Ok(winner) => Resume::Raced(winner, closing),
        Err(error) => Resume::Error(error), // `closing` closes them as it goes
    }
}

/// The coroutines of a race, closed when the race ends, or when the request it is part of is
/// dropped (its client gone, the server stopping): a program never started must still be
/// closed, or Python warns that it was never awaited.
pub struct CloseOnDrop(Vec<PyObject>);

impl CloseOnDrop {
    fn close(&mut self, py: Python<'_>) {
        for coroutine in self.0.drain(..) {
            if let Err(error) = coroutine.call_method0(py, "close") {
                log_error(py, LOGGER, "a program of a race failed as it was closed", error);
            }
        }
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        // SAFETY: a plain query of the interpreter's state; nothing is closed once it is gone.
        if self.0.is_empty() || unsafe { ffi::Py_IsInitialized() } == 0 {
            return;
        }
        Python::with_gil(|py| self.close(py));
    }
}

/// One program of a race, driven to its end: None when it returned None. Boxed, as `Driven` is,
/// so that a race inside a race is a future the compiler can see is `Send`.
fn drive_racer(
    shared: Arc<Shared>,
    coroutine: PyObject,
    first: Step,
) -> Racer<'static, PyObject, PyErr> {
    Box::pin(drive_from(shared, coroutine, first, |py, outcome| {
        outcome.map(|value| if value.is_none(py) { None } else { Some(value) })
    }))
}

/// Resume the coroutine once, and read what it asks for next.
fn advance(py: Python<'_>, shared: &Shared, coroutine: &PyAny, resume: Resume) -> PyResult<Step> {
    let sent: PyObject = match resume {
        Resume::Start | Resume::Nothing => py.None(),
        Resume::Error(error) => return throw(py, shared, coroutine, error),
        Resume::Value(value) => value,
        Resume::Answer(Ok(body)) => PyBytes::new(py, &body).into(),
        Resume::Answer(Err(failure)) => {
            let kind = shared.types.kind(py, failure.kind);
            shared.types.failure.as_ref(py).call1((kind, failure.detail, failure.status))?.into()
        }
        Resume::Results(values) => PyList::new(py, values).into(),
        Resume::Raced(winner, mut closing) => {
            closing.close(py);
            match winner {
                Some((index, value)) => (index, value).into_py(py),
                None => (-1, py.None()).into_py(py),
            }
        }
    };
    let mut result: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: both pointers are live references held under the GIL; `result` receives a new
    // reference (or NULL with an exception set), which `from_owned_ptr_or_err` takes over.
    let status = unsafe { PyIter_Send(coroutine.as_ptr(), sent.as_ptr(), &mut result) };
    let value: PyObject = unsafe { PyObject::from_owned_ptr_or_err(py, result)? };
    match status {
        PYGEN_RETURN => Ok(Step::Done(value)),
        PYGEN_NEXT => classify(py, shared, coroutine, value.as_ref(py)),
        _ => Err(PyErr::fetch(py)),
    }
}

fn throw(py: Python<'_>, shared: &Shared, coroutine: &PyAny, error: PyErr) -> PyResult<Step> {
    match coroutine.call_method1("throw", (error.into_value(py),)) {
        Ok(yielded) => classify(py, shared, coroutine, yielded),
        Err(stop) if stop.is_instance_of::<PyStopIteration>(py) => {
            Ok(Step::Done(stop.value(py).getattr("value")?.into()))
        }
        Err(other) => Err(other),
    }
}

fn classify(py: Python<'_>, shared: &Shared, coroutine: &PyAny, yielded: &PyAny) -> PyResult<Step> {
    let kind = yielded.get_type();
    let types = &shared.types;
    if kind.is(types.forward.as_ref(py)) {
        let [url, body, timeout_s] = &types.forward_fields;
        let body: &PyBytes = yielded.getattr(body.as_ref(py))?.downcast()?;
        let timeout_s: f64 = yielded.getattr(timeout_s.as_ref(py))?.extract()?;
        return Ok(Step::Forward {
            url: yielded.getattr(url.as_ref(py))?.extract()?,
            body: Bytes::copy_from_slice(body.as_bytes()),
            timeout: Duration::from_secs_f64(bounded_seconds(timeout_s)),
        });
    }
    if kind.is(types.gather.as_ref(py)) {
        let [programs] = &types.gather_fields;
        let programs: &PyList = yielded.getattr(programs.as_ref(py))?.downcast()?;
        let children = programs.iter().map(|child| (child.into(), start(py, shared, child)));
        return Ok(Step::Gather(children.collect()));
    }
    if kind.is(types.race.as_ref(py)) {
        let [programs, delays_s] = &types.race_fields;
        let programs: &PyList = yielded.getattr(programs.as_ref(py))?.downcast()?;
        let delays_s: Vec<f64> = yielded.getattr(delays_s.as_ref(py))?.extract()?;
        if delays_s.len() != programs.len() {
            let message = "Race needs one delay per program";
            return throw(py, shared, coroutine, PyValueError::new_err(message));
        }
        let entries = programs.iter().zip(delays_s).map(|(child, delay_s)| {
            let delay = Duration::from_secs_f64(bounded_seconds(delay_s));
            let racing = if delay.is_zero() {
                Racing::Started(start(py, shared, child))
            } else {
                Racing::After(delay)
            };
            (child.into(), racing)
        });
        return Ok(Step::Race(entries.collect()));
    }
    if kind.is(types.acquire.as_ref(py)) {
        let answer = shared.acquire.call1(py, (yielded,))?;
        return Ok(if answer.as_ref(py).is_instance_of::<PyFloat>()? {
            Step::Acquired(answer)
        } else {
            Step::AcquireLater(answer)
        });
    }
    if kind.is(types.join.as_ref(py)) {
        let [future] = &types.join_fields;
        return Ok(Step::AcquireLater(yielded.getattr(future.as_ref(py))?.into()));
    }
    if kind.is(types.wait.as_ref(py)) {
        let [seconds] = &types.wait_fields;
        let seconds: f64 = yielded.getattr(seconds.as_ref(py))?.extract()?;
        return Ok(Step::Wait(Duration::from_secs_f64(bounded_seconds(seconds))));
    }
    if kind.is(types.spawn.as_ref(py)) {
        let [program] = &types.spawn_fields;
        return Ok(Step::Spawn(yielded.getattr(program.as_ref(py))?.into()));
    }
    let message = format!("a program awaited {}, which is not a command", kind.name()?);
    throw(py, shared, coroutine, PyRuntimeError::new_err(message))
}

/// No value from Python may make a duration panic: NaN and negatives are 0, the rest capped.
fn bounded_seconds(seconds: f64) -> f64 {
    if seconds.is_nan() {
        0.0
    } else {
        seconds.clamp(0.0, 1e9)
    }
}

/// Wait here, without the GIL, for a `concurrent.futures.Future` of the host's to end.
async fn wait_for(future: PyObject) -> PyResult<PyObject> {
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    Python::with_gil(|py| -> PyResult<()> {
        let done = Mutex::new(Some(done));
        let callback = PyCFunction::new_closure(
            move |_: &PyTuple, _: Option<&PyDict>| {
                if let Some(done) = done.lock().ok().and_then(|mut d| d.take()) {
                    let _ = done.send(());
                }
            },
            py,
        )?;
        future.call_method1(py, "add_done_callback", (callback,))?;
        Ok(())
    })?;
    // The sender is dropped unsent only if the callback is; the future's outcome then says why.
    let _ = finished.await;
    Python::with_gil(|py| future.call_method0(py, "result"))
}

/// Drive a coroutine nobody waits for; a failure goes to the log, as nothing else would see it.
async fn in_background(shared: Arc<Shared>, coroutine: PyObject) {
    if let Err(error) = drive(shared, coroutine).await {
        Python::with_gil(|py| log_error(py, LOGGER, "a background coroutine failed", error));
    }
}

/// `error` with its traceback in the process's log, under `logger`; on stderr if logging fails.
pub fn log_error(py: Python<'_>, logger: &str, message: &str, error: PyErr) {
    let logged = (|| -> PyResult<()> {
        let logger = py.import("logging")?.call_method1("getLogger", (logger,))?;
        let kwargs = [("exc_info", error.value(py))].into_py_dict(py);
        logger.call_method("error", (message,), Some(kwargs))?;
        Ok(())
    })();
    if logged.is_err() {
        error.print(py); // logging itself is broken: stderr is all that is left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:9/rpc";
    const BODY: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#;
    const WAITED: Duration = Duration::from_millis(300);

    fn failed(kind: Kind) -> FailedAttempt {
        let failure = Failure { kind, detail: "scripted".into(), status: None };
        FailedAttempt { url: URL.into(), body: Bytes::from_static(BODY), waited: WAITED, failure }
    }

    /// The failures the request's `Forward`s in turn would be resumed with.
    fn forwards(attempt: Option<FailedAttempt>, asked: &[(&str, &[u8], Duration)]) -> Vec<bool> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let asking = async {
            let taken = |(url, body, timeout): &(&str, &[u8], Duration)| {
                failed_already(url, body, *timeout).is_some()
            };
            asked.iter().map(taken).collect::<Vec<bool>>()
        };
        runtime.block_on(async {
            match attempt {
                Some(attempt) => after_failed(attempt, asking).await,
                None => asking.await,
            }
        })
    }

    #[test]
    fn a_failed_attempt_stands_for_the_first_forward_only_if_it_is_the_same_attempt() {
        let same = (URL, BODY, Duration::from_secs(2));
        let again = [same, same];
        assert_eq!(forwards(Some(failed(Kind::Transport)), &again), [true, false], "once");
        assert_eq!(forwards(None, &again), [false, false], "a request without one");
        let other_node = ("http://127.0.0.1:10/rpc", BODY, Duration::from_secs(2));
        let other_body = (URL, &BODY[1..], Duration::from_secs(2));
        for first in [other_node, other_body] {
            // The first attempt is another one: the failure stands for nothing after it.
            assert_eq!(forwards(Some(failed(Kind::HttpStatus)), &[first, same]), [false, false]);
        }
    }

    #[test]
    fn a_failed_attempt_stands_for_nothing_once_the_request_has_waited_for_something_else() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let asking = async {
            forget_failed_attempt();
            failed_already(URL, BODY, Duration::from_secs(2)).is_some()
        };
        assert!(!runtime.block_on(after_failed(failed(Kind::Transport), asking)));
    }

    #[test]
    fn a_time_out_stands_only_for_an_attempt_that_would_wait_no_longer() {
        let within = (URL, BODY, WAITED);
        let longer = (URL, BODY, WAITED + Duration::from_millis(1));
        assert_eq!(forwards(Some(failed(Kind::Timeout)), &[within]), [true]);
        assert_eq!(forwards(Some(failed(Kind::Timeout)), &[longer]), [false]);
        assert_eq!(forwards(Some(failed(Kind::RateLimited)), &[longer]), [true]);
    }

    #[test]
    fn no_duration_from_python_can_panic() {
        assert_eq!(bounded_seconds(f64::NAN), 0.0);
        assert_eq!(bounded_seconds(-5.0), 0.0);
        assert_eq!(bounded_seconds(f64::INFINITY), 1e9);
        assert_eq!(bounded_seconds(0.25), 0.25);
    }
}
