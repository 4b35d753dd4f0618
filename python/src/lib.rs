//! arenac's Python extension module, `arenac._native`: the compiled-model [`Session`] and the
//! batch runner behind the pure-Python `arenac` package (`python/arenac/`), which gives them
//! ONNX Runtime's interface.

mod batches;
mod errors;
mod pool;
mod session;
mod types;

use pyo3::prelude::*;

pub use session::Session;

/// The native half of the `arenac` package.
#[pymodule]
mod _native {
    #[pymodule_export]
    use super::Session;
    #[pymodule_export]
    use super::batches::{auto_batch, run_files};

    use pyo3::prelude::*;

    /// The CPUs this process may run on (the default thread count).
    #[pyfunction]
    fn default_threads() -> usize {
        arenac::default_threads()
    }

    /// The version of the arenac crate this module was built from.
    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
