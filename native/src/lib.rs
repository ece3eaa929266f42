//! `chainrouter._native`: the router's request path in Rust (see docs/decisions.md, "Native
//! request path"). The pipeline stays in Python; this module does the I/O around it.

mod driver;
mod server;
mod upstream;

use pyo3::prelude::*;

#[pymodule]
fn _native(_py: Python<'_>, module: &PyModule) -> PyResult<()> {
    module.add_class::<driver::Driver>()?;
    module.add_class::<server::NativeServer>()?;
    Ok(())
}
