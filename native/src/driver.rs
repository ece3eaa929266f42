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
//!   beside the requests);
//! - `Coalesce`: the worker's one flight table (flights.rs), shared with the calls the server
//!   serves under decisions: resumed at once with a `Leading` handle, or, once the flight lands,
//!   with its leader's `Landed` (None: cut short).
//!
//! Anything else a program awaits is a bug in it, and is thrown back into it as a RuntimeError.

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

use crate::contract::Types;
use crate::contract_gen::{coalesce, forward, gather, join, race, spawn, wait};
use crate::flights::{landing, Boarding, Flights, Landing, Leading};
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

/// What every program the driver runs needs.
pub struct Shared {
    pub types: Arc<Types>,
    /// `(Acquire) -> float | concurrent.futures.Future[float]`: the host's rate limiter (0.0: taken).
    pub acquire: PyObject,
    pub upstream: Upstream,
    /// The worker's one flight table: the pipeline's `Coalesce` and the server's calls.
    pub flights: Arc<Flights>,
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
            shared: Arc::new(Shared {
                types: Arc::new(Types::load(py)?),
                acquire,
                upstream,
                flights: Arc::new(Flights::default()),
            }),
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
    /// The flight a `Coalesce` leads.
    Leading(crate::flights::Leader),
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
    Coalesce(Vec<u8>),
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
            Step::Forward { url, body, timeout } => {
                Resume::Answer(shared.upstream.post(&url, body, timeout).await)
            }
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
            Step::AcquireLater(future) => match wait_for(future).await {
                Ok(value) => Resume::Value(value),
                Err(error) => Resume::Error(error),
            },
            Step::Wait(pause) => {
                tokio::time::sleep(pause).await;
                Resume::Nothing
            }
            Step::Coalesce(key) => match shared.flights.board(&key) {
                Boarding::Lead(leader) => Resume::Leading(leader),
                Boarding::Join(awaiting) => match landing(awaiting).await {
                    Some(Landing::Landed(Some(landed))) => Resume::Value(landed),
                    _ => Resume::Nothing, // cut short: this call is attempted on its own
                },
            },
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
            shared.types.failure(py, failure.kind, &failure.detail, failure.status)?
        }
        Resume::Leading(leader) => Py::new(py, Leading::new(leader))?.into_py(py),
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
    let types = &shared.types;
    if types.forward.is(py, yielded) {
        let body: &PyBytes = types.forward.get(yielded, forward::BODY)?.downcast()?;
        let timeout_s: f64 = types.forward.get(yielded, forward::TIMEOUT_S)?.extract()?;
        return Ok(Step::Forward {
            url: types.forward.get(yielded, forward::URL)?.extract()?,
            body: Bytes::copy_from_slice(body.as_bytes()),
            timeout: Duration::from_secs_f64(bounded_seconds(timeout_s)),
        });
    }
    if types.gather.is(py, yielded) {
        let programs: &PyList = types.gather.get(yielded, gather::PROGRAMS)?.downcast()?;
        let children = programs.iter().map(|child| (child.into(), start(py, shared, child)));
        return Ok(Step::Gather(children.collect()));
    }
    if types.race.is(py, yielded) {
        let programs: &PyList = types.race.get(yielded, race::PROGRAMS)?.downcast()?;
        let delays_s: Vec<f64> = types.race.get(yielded, race::DELAYS_S)?.extract()?;
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
    if types.acquire.is(py, yielded) {
        let answer = shared.acquire.call1(py, (yielded,))?;
        return Ok(if answer.as_ref(py).is_instance_of::<PyFloat>()? {
            Step::Acquired(answer)
        } else {
            Step::AcquireLater(answer)
        });
    }
    if types.join.is(py, yielded) {
        return Ok(Step::AcquireLater(types.join.get(yielded, join::FUTURE)?.into()));
    }
    if types.wait.is(py, yielded) {
        let seconds: f64 = types.wait.get(yielded, wait::SECONDS)?.extract()?;
        return Ok(Step::Wait(Duration::from_secs_f64(bounded_seconds(seconds))));
    }
    if types.spawn.is(py, yielded) {
        return Ok(Step::Spawn(types.spawn.get(yielded, spawn::PROGRAM)?.into()));
    }
    if types.coalesce.is(py, yielded) {
        let key: &str = types.coalesce.get(yielded, coalesce::KEY)?.extract()?;
        let mut flight = Vec::with_capacity(key.len() + 1);
        flight.push(b'p'); // the pipeline's keys: apart from the server's own (repeat.rs)
        flight.extend_from_slice(key.as_bytes());
        return Ok(Step::Coalesce(flight));
    }
    let kind = yielded.get_type();
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

    #[test]
    fn no_duration_from_python_can_panic() {
        assert_eq!(bounded_seconds(f64::NAN), 0.0);
        assert_eq!(bounded_seconds(-5.0), 0.0);
        assert_eq!(bounded_seconds(f64::INFINITY), 1e9);
        assert_eq!(bounded_seconds(0.25), 0.25);
    }
}
