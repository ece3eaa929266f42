//! What this crate expects of `chainrouter.router.contract`, the one declared contract between
//! the Python pipeline and this executor. Every name the Rust side reads or builds is here, and
//! `contract()` returns them in the shape of the Python module's `describe()`, which
//! `tests/router/test_contract.py` compares: a change on one side alone fails that test, and a
//! module of another version is refused when a `Driver` is made.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

pub const VERSION: u32 = 8;
pub const MODULE: &str = "chainrouter.router.contract";

/// `HttpRequest`'s fields, in the order the server passes them.
pub const REQUEST: [&str; 10] = [
    "method",
    "path",
    "origin",
    "referer",
    "forwarded_for",
    "content_type",
    "peer",
    "body",
    "websocket_key",
    "waited_s",
];
/// `HttpAnswer`: a tuple the server reads in this order.
pub const ANSWER: [&str; 3] = ["status", "headers", "body"];
/// `Failure`'s fields, in the order the driver passes them.
pub const FAILURE: [&str; 3] = ["kind", "detail", "status"];

/// The commands and the fields the driver reads of each.
pub const FORWARD: (&str, [&str; 3]) = ("Forward", ["url", "body", "timeout_s"]);
pub const GATHER: (&str, [&str; 1]) = ("Gather", ["programs"]);
pub const RACE: (&str, [&str; 2]) = ("Race", ["programs", "delays_s"]);
pub const ACQUIRE: (&str, [&str; 1]) = ("Acquire", ["buckets"]);
pub const JOIN: (&str, [&str; 1]) = ("Join", ["future"]);
pub const WAIT: (&str, [&str; 1]) = ("Wait", ["seconds"]);
pub const SPAWN: (&str, [&str; 1]) = ("Spawn", ["program"]);

/// `ReplayMemo` (replay.rs): each method and its parameters, in order; Python calls them with
/// these names as keywords.
pub const REPLAY_MEMO: [(&str, &[&str]); 14] = [
    ("__new__", &["max_bytes", "max_body_bytes", "max_age_s", "batch_prefix"]),
    (
        "install",
        &[
            "token",
            "generation",
            "path",
            "origin",
            "referer",
            "content_type",
            "body",
            "status",
            "headers",
            "answer",
        ],
    ),
    (
        "install_forward",
        &[
            "token",
            "generation",
            "path",
            "origin",
            "referer",
            "content_type",
            "body",
            "url",
            "sent",
            "answer",
            "timeout_s",
            "headers",
            "flight",
            "hand_head",
        ],
    ),
    ("replay", &["path", "origin", "referer", "content_type", "body"]),
    ("flying", &["flight"]),
    ("landed", &["flight"]),
    ("follow", &["flight", "future"]),
    ("holds_forward", &["path", "origin", "referer", "content_type", "body"]),
    ("clear", &[]),
    ("generation", &[]),
    ("next_batch_id", &[]),
    ("drain", &[]),
    ("stats", &[]),
    ("scan_ids", &["body"]),
];

/// The host's `settle` for repeated forwards: forward.rs calls it with a list of tuples of
/// these fields, in this order, and reads back one verdict for each.
pub const SETTLE_FORWARD: [&str; 7] =
    ["token", "elapsed_s", "answered", "head", "leader", "answer", "followers"];

/// Why a node gave no usable answer: `FailureKind`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Transport,
    Timeout,
    RateLimited,
    HttpStatus,
    TooLarge,
}

impl Kind {
    pub const ALL: [Kind; 5] =
        [Kind::Transport, Kind::Timeout, Kind::RateLimited, Kind::HttpStatus, Kind::TooLarge];

    pub fn value(self) -> &'static str {
        match self {
            Kind::Transport => "transport",
            Kind::Timeout => "timeout",
            Kind::RateLimited => "rate_limited",
            Kind::HttpStatus => "http_status",
            Kind::TooLarge => "too_large",
        }
    }
}

/// The contract's Python objects, looked up once per driver.
pub struct Types {
    pub request: Py<PyType>,
    pub failure: Py<PyType>,
    pub forward: Py<PyType>,
    pub gather: Py<PyType>,
    pub race: Py<PyType>,
    pub acquire: Py<PyType>,
    pub join: Py<PyType>,
    pub wait: Py<PyType>,
    pub spawn: Py<PyType>,
    /// The field names of each command, interned, in the order declared above.
    pub forward_fields: [Py<PyString>; 3],
    pub gather_fields: [Py<PyString>; 1],
    pub race_fields: [Py<PyString>; 2],
    pub join_fields: [Py<PyString>; 1],
    pub wait_fields: [Py<PyString>; 1],
    pub spawn_fields: [Py<PyString>; 1],
    /// `FailureKind` members, in `Kind::ALL`'s order.
    kinds: Vec<PyObject>,
}

fn interned<const N: usize>(py: Python<'_>, names: [&str; N]) -> [Py<PyString>; N] {
    names.map(|name| PyString::intern(py, name).into())
}

impl Types {
    /// Import the contract module, refusing one of another version.
    pub fn load(py: Python<'_>) -> PyResult<Types> {
        let module = py.import(MODULE)?;
        let version: u32 = module.getattr("VERSION")?.extract()?;
        if version != VERSION {
            return Err(PyRuntimeError::new_err(format!(
                "the native executor speaks contract version {VERSION}, but {MODULE} is version \
                 {version}: rebuild it with `make setup`"
            )));
        }
        let type_of = |name: &str| -> PyResult<Py<PyType>> {
            Ok(module.getattr(name)?.downcast::<PyType>()?.into())
        };
        let failure_kind = module.getattr("FailureKind")?;
        let kinds = Kind::ALL
            .iter()
            .map(|kind| failure_kind.call1((kind.value(),)).map(Into::into))
            .collect::<PyResult<Vec<PyObject>>>()?;
        Ok(Types {
            request: type_of("HttpRequest")?,
            failure: type_of("Failure")?,
            forward: type_of(FORWARD.0)?,
            gather: type_of(GATHER.0)?,
            race: type_of(RACE.0)?,
            acquire: type_of(ACQUIRE.0)?,
            join: type_of(JOIN.0)?,
            wait: type_of(WAIT.0)?,
            spawn: type_of(SPAWN.0)?,
            forward_fields: interned(py, FORWARD.1),
            gather_fields: interned(py, GATHER.1),
            race_fields: interned(py, RACE.1),
            join_fields: interned(py, JOIN.1),
            wait_fields: interned(py, WAIT.1),
            spawn_fields: interned(py, SPAWN.1),
            kinds,
        })
    }

    pub fn kind(&self, py: Python<'_>, kind: Kind) -> PyObject {
        let index = Kind::ALL.iter().position(|k| *k == kind).expect("every kind is listed");
        self.kinds[index].clone_ref(py)
    }
}

/// The contract as this crate declares it, in the shape of `contract.describe()`.
#[pyfunction]
pub fn contract(py: Python<'_>) -> PyResult<PyObject> {
    let described = PyDict::new(py);
    described.set_item("version", VERSION)?;
    described.set_item("module", MODULE)?;
    described.set_item("request", REQUEST.to_vec())?;
    described.set_item("answer", ANSWER.to_vec())?;
    described.set_item("failure", FAILURE.to_vec())?;
    described.set_item("failure_kinds", Kind::ALL.iter().map(|k| k.value()).collect::<Vec<_>>())?;
    let commands = PyDict::new(py);
    commands.set_item(FORWARD.0, FORWARD.1.to_vec())?;
    commands.set_item(GATHER.0, GATHER.1.to_vec())?;
    commands.set_item(RACE.0, RACE.1.to_vec())?;
    commands.set_item(ACQUIRE.0, ACQUIRE.1.to_vec())?;
    commands.set_item(JOIN.0, JOIN.1.to_vec())?;
    commands.set_item(WAIT.0, WAIT.1.to_vec())?;
    commands.set_item(SPAWN.0, SPAWN.1.to_vec())?;
    described.set_item("commands", commands)?;
    let memo = PyDict::new(py);
    for (method, parameters) in REPLAY_MEMO {
        memo.set_item(method, parameters.to_vec())?;
    }
    described.set_item("replay_memo", memo)?;
    described.set_item("settle_forward", SETTLE_FORWARD.to_vec())?;
    Ok(described.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_kind_has_its_own_value() {
        let mut values: Vec<&str> = Kind::ALL.iter().map(|k| k.value()).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), Kind::ALL.len());
    }
}
