//! The contract's Python types as this crate reads and builds them (`chainrouter.router.contract`,
//! declared once there). Their names and fields come from `contract_gen.rs`, which is generated
//! from that declaration: objects are built with keyword arguments and read by attribute, each
//! field named by its generated index constant, never by position. `contract()` reports what this
//! build was generated from, and `tests/router/test_contract.py` compares it with the Python
//! module field by field; a module of another version is refused when a `Driver` is made.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

use crate::contract_gen::{self as declared, *};

/// Why a node gave no usable answer: `FailureKind`'s values, in declared order.
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
        FAILURE_KINDS[self.index()]
    }

    fn index(self) -> usize {
        Kind::ALL.iter().position(|k| *k == self).expect("every kind is listed")
    }
}

/// One declared type: the class, and its field names interned in declared order.
pub struct Declared<const N: usize> {
    pub class: Py<PyType>,
    names: [Py<PyString>; N],
}

impl<const N: usize> Declared<N> {
    fn load(module: &PyModule, name: &str, fields: [&str; N]) -> PyResult<Self> {
        let py = module.py();
        let class = module.getattr(name)?.downcast::<PyType>()?.into();
        Ok(Declared { class, names: fields.map(|field| PyString::intern(py, field).into()) })
    }

    /// Whether `object` is of this type exactly.
    pub fn is(&self, py: Python<'_>, object: &PyAny) -> bool {
        object.get_type().is(self.class.as_ref(py))
    }

    /// The field at `index` (a generated constant) of `object`.
    pub fn get<'py>(&self, object: &'py PyAny, index: usize) -> PyResult<&'py PyAny> {
        object.getattr(self.names[index].as_ref(object.py()))
    }

    /// An object of this type from every field's value, each at its generated index.
    pub fn build(&self, py: Python<'_>, values: [Option<PyObject>; N]) -> PyResult<PyObject> {
        let kwargs = PyDict::new(py);
        for (name, value) in self.names.iter().zip(values) {
            let value = value.ok_or_else(|| {
                PyValueError::new_err(format!("{} built without its {}", self.class, name))
            })?;
            kwargs.set_item(name.as_ref(py), value)?;
        }
        Ok(self.class.as_ref(py).call((), Some(kwargs))?.into())
    }
}

/// Every field unset, to be filled by index before `build`.
pub fn fields<const N: usize>() -> [Option<PyObject>; N] {
    [(); N].map(|_| None)
}

/// The contract's Python objects, looked up once per driver.
pub struct Types {
    pub request: Declared<{ http_request::FIELDS.len() }>,
    pub answer: Declared<{ http_answer::FIELDS.len() }>,
    pub failure: Declared<{ failure::FIELDS.len() }>,
    pub attempted: Declared<{ attempted::FIELDS.len() }>,
    pub decision: Declared<{ decision::FIELDS.len() }>,
    pub receipt: Declared<{ receipt::FIELDS.len() }>,
    pub tally: Declared<{ tally::FIELDS.len() }>,
    pub verdict: Declared<{ verdict::FIELDS.len() }>,
    pub settled: Declared<{ settled::FIELDS.len() }>,
    pub forward: Declared<{ forward::FIELDS.len() }>,
    pub gather: Declared<{ gather::FIELDS.len() }>,
    pub race: Declared<{ race::FIELDS.len() }>,
    pub acquire: Declared<{ acquire::FIELDS.len() }>,
    pub join: Declared<{ join::FIELDS.len() }>,
    pub wait: Declared<{ wait::FIELDS.len() }>,
    pub spawn: Declared<{ spawn::FIELDS.len() }>,
    pub coalesce: Declared<{ coalesce::FIELDS.len() }>,
    /// `FailureKind` members, in `Kind::ALL`'s order.
    kinds: Vec<PyObject>,
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
        let failure_kind = module.getattr("FailureKind")?;
        let kinds = Kind::ALL
            .iter()
            .map(|kind| failure_kind.call1((kind.value(),)).map(Into::into))
            .collect::<PyResult<Vec<PyObject>>>()?;
        Ok(Types {
            request: Declared::load(module, http_request::NAME, http_request::FIELDS)?,
            answer: Declared::load(module, http_answer::NAME, http_answer::FIELDS)?,
            failure: Declared::load(module, failure::NAME, failure::FIELDS)?,
            attempted: Declared::load(module, attempted::NAME, attempted::FIELDS)?,
            decision: Declared::load(module, decision::NAME, decision::FIELDS)?,
            receipt: Declared::load(module, receipt::NAME, receipt::FIELDS)?,
            tally: Declared::load(module, tally::NAME, tally::FIELDS)?,
            verdict: Declared::load(module, verdict::NAME, verdict::FIELDS)?,
            settled: Declared::load(module, settled::NAME, settled::FIELDS)?,
            forward: Declared::load(module, forward::NAME, forward::FIELDS)?,
            gather: Declared::load(module, gather::NAME, gather::FIELDS)?,
            race: Declared::load(module, race::NAME, race::FIELDS)?,
            acquire: Declared::load(module, acquire::NAME, acquire::FIELDS)?,
            join: Declared::load(module, join::NAME, join::FIELDS)?,
            wait: Declared::load(module, wait::NAME, wait::FIELDS)?,
            spawn: Declared::load(module, spawn::NAME, spawn::FIELDS)?,
            coalesce: Declared::load(module, coalesce::NAME, coalesce::FIELDS)?,
            kinds,
        })
    }

    pub fn kind(&self, py: Python<'_>, kind: Kind) -> PyObject {
        self.kinds[kind.index()].clone_ref(py)
    }

    /// A `Failure` object.
    pub fn failure(
        &self,
        py: Python<'_>,
        kind: Kind,
        detail: &str,
        status: Option<u16>,
    ) -> PyResult<PyObject> {
        let mut values = fields();
        values[failure::KIND] = Some(self.kind(py, kind));
        values[failure::DETAIL] = Some(detail.into_py(py));
        values[failure::STATUS] = Some(status.into_py(py));
        self.failure.build(py, values)
    }
}

/// The contract as this build knows it: what it was generated from.
#[pyfunction]
pub fn contract(py: Python<'_>) -> PyResult<PyObject> {
    let described = PyDict::new(py);
    described.set_item("version", VERSION)?;
    described.set_item("module", MODULE)?;
    described.set_item("failure_kinds", FAILURE_KINDS.to_vec())?;
    described.set_item("decision_scopes", DECISION_SCOPES.to_vec())?;
    let types = PyDict::new(py);
    let add = |name: &str, fields: &[&str]| types.set_item(name, fields.to_vec());
    add(declared::http_request::NAME, &http_request::FIELDS)?;
    add(declared::http_answer::NAME, &http_answer::FIELDS)?;
    add(declared::failure::NAME, &failure::FIELDS)?;
    add(declared::attempted::NAME, &attempted::FIELDS)?;
    add(declared::decision::NAME, &decision::FIELDS)?;
    add(declared::receipt::NAME, &receipt::FIELDS)?;
    add(declared::tally::NAME, &tally::FIELDS)?;
    add(declared::verdict::NAME, &verdict::FIELDS)?;
    add(declared::settled::NAME, &settled::FIELDS)?;
    add(declared::landed::NAME, &landed::FIELDS)?;
    add(declared::forward::NAME, &forward::FIELDS)?;
    add(declared::gather::NAME, &gather::FIELDS)?;
    add(declared::race::NAME, &race::FIELDS)?;
    add(declared::acquire::NAME, &acquire::FIELDS)?;
    add(declared::join::NAME, &join::FIELDS)?;
    add(declared::wait::NAME, &wait::FIELDS)?;
    add(declared::spawn::NAME, &spawn::FIELDS)?;
    add(declared::coalesce::NAME, &coalesce::FIELDS)?;
    described.set_item("types", types)?;
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
