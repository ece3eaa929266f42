//! `chainrouter._native`: the native executor (docs/architecture.md). The pipeline stays in
//! Python and does no I/O; this module serves HTTP, steps the pipeline's programs and carries out
//! the commands they await (`contract.rs`, generated from `chainrouter.router.contract`), and
//! applies the pipeline's decisions to later calls in their scope:
//!
//! - the executor: `server.rs` (HTTP), `driver.rs` (programs and their commands), `race.rs`,
//!   `upstream.rs`, `http1.rs`, `target.rs` (the client to nodes), `limit.rs` (connections);
//! - the fast path: `json.rs` (reading bodies), `memo.rs` (decisions and grants), `epochs.rs`,
//!   `repeat.rs` (serving a request under decisions), `settle.rs` (receipts to the ledger),
//!   `flights.rs` (the one flight table, with the pipeline's `Coalesce`).

mod contract;
#[rustfmt::skip]
mod contract_gen;
mod driver;
mod epochs;
mod flights;
mod http1;
mod json;
mod limit;
mod memo;
mod race;
mod repeat;
mod server;
mod settle;
mod target;
mod upstream;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// How the client to nodes reads a node URL: `((host, port, tls), request head)`, the head ending
/// in `Content-Length: `; ValueError for a URL it refuses. The same rules as the Python client's
/// `parse_target`, and the tests check both.
#[pyfunction]
fn parse_node_url(
    py: Python<'_>,
    url: &str,
    user_agent: &str,
) -> PyResult<((String, u16, bool), PyObject)> {
    let target = target::parse(url, user_agent).map_err(PyValueError::new_err)?;
    let origin = target.origin;
    Ok(((origin.host, origin.port, origin.tls), PyBytes::new(py, &target.head).into()))
}

/// The span of `answer`'s result when it is a plain answer under the id `id` (json.rs), for the
/// tests that hold it to the pipeline's judge.
#[pyfunction]
fn plain_result(answer: &[u8], id: &[u8]) -> Option<(usize, usize)> {
    json::plain_result(answer, id)
}

/// The number a plain result holds (json.rs): for the tests that hold the server's reading to
/// router/belief.py's.
#[pyfunction]
fn result_quantity(result: &[u8]) -> Option<u64> {
    json::result_quantity(result)
}

/// For each call of `body`, its key in the MASKED scope (None: none for its method) and in the
/// EXACT scope, without the request's fields (memo.rs); None when the reader refuses the body.
/// For the tests that hold the reader to the pipeline's parser.
#[pyfunction]
fn call_keys(
    py: Python<'_>,
    body: &[u8],
    masks: std::collections::HashMap<String, usize>,
    max_params_depth: usize,
) -> Option<Vec<(Option<PyObject>, PyObject)>> {
    let calls = json::read_calls(body, max_params_depth)?;
    let keys = calls.calls.iter().map(|call| {
        let keep = call.method.and_then(|(start, end)| {
            let method = std::str::from_utf8(&body[start..end]).ok()?;
            call.elements.as_ref().and(masks.get(method).copied())
        });
        let key = |keep| {
            let mut key = Vec::new();
            memo::call_template(&mut key, body, call, keep);
            PyObject::from(PyBytes::new(py, &key))
        };
        (keep.map(|keep| key(Some(keep))), key(None))
    });
    Some(keys.collect())
}

#[pymodule]
fn _native(_py: Python<'_>, module: &PyModule) -> PyResult<()> {
    module.add_class::<driver::Driver>()?;
    module.add_class::<server::NativeServer>()?;
    module.add_class::<memo::PyMemo>()?;
    module.add_class::<epochs::Epochs>()?;
    module.add_class::<flights::Leading>()?;
    module.add_function(wrap_pyfunction!(parse_node_url, module)?)?;
    module.add_function(wrap_pyfunction!(contract::contract, module)?)?;
    module.add_function(wrap_pyfunction!(plain_result, module)?)?;
    module.add_function(wrap_pyfunction!(result_quantity, module)?)?;
    module.add_function(wrap_pyfunction!(call_keys, module)?)?;
    Ok(())
}
