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

#[pymodule]
fn _native(_py: Python<'_>, module: &PyModule) -> PyResult<()> {
    module.add_class::<driver::Driver>()?;
    module.add_class::<server::NativeServer>()?;
    module.add_class::<memo::PyMemo>()?;
    module.add_class::<epochs::Epochs>()?;
    module.add_class::<flights::Leading>()?;
    module.add_function(wrap_pyfunction!(parse_node_url, module)?)?;
    module.add_function(wrap_pyfunction!(contract::contract, module)?)?;
    Ok(())
}
