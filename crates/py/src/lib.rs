//! The Rust core under the `placer_torch` Python package. Python captures a torch
//! training step and describes it as model.json text; this module is the one place that
//! text is checked and written, by placer-ir itself, so the package can never write a
//! model the rest of placer would read differently.
//!
//! Every function takes and returns plain Python values (str, int, dict): no Rust type
//! crosses into Python, so the surface stays as small as the format.

mod cores;
mod homes;
mod hook;
mod placement;
mod profile;

use placer_host::{EmulateChoice, Host, HostOptions};
use placer_ir::{Liveness, MemoryProfile, Model, Role};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

create_exception!(_core, ModelError, PyValueError, "A model placer-ir refuses, or cannot write.");
create_exception!(_core, ProfileError, PyRuntimeError, "A profile that could not be measured or saved.");

/// This host's memory tiers, opened as `placer run` and `placer profile` open them (the
/// same cache directory, PLACER_CACHE_DIR).
pub(crate) fn open_host() -> PyResult<Host> {
    let options = HostOptions {
        topology_xml: None,
        host_file: None,
        emulate: EmulateChoice::Default,
        cache_dir: placer_host::cache::default_dir(),
    };
    Host::open(&options).map_err(|e| ModelError::new_err(format!("cannot determine the memory pools: {e}")))
}

/// Parses and validates model.json text; the error is one line: how many problems, and
/// the first with its location.
fn parse(text: &str) -> PyResult<Model> {
    placer_ir::parse_model(text).map_err(|d| {
        let first = d.0.first().map(ToString::to_string).unwrap_or_default();
        ModelError::new_err(format!("{} problem(s) in the captured model; first: {first}", d.len()))
    })
}

/// What a user checks a capture against: counts, the parameter total and the peak.
fn summary<'py>(py: Python<'py>, model: &Model) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (weight_bytes, weight_elements) = placer_ir::analysis::role_totals(model, Role::Weight);
    let (state_bytes, _) = placer_ir::analysis::role_totals(model, Role::OptimizerState);
    let memory = MemoryProfile::new(model, &Liveness::new(model));
    d.set_item("name", model.name())?;
    d.set_item("tensors", model.tensors().len())?;
    d.set_item("nodes", model.nodes().len())?;
    d.set_item("parameters", weight_elements)?;
    d.set_item("parameter_bytes", weight_bytes)?;
    d.set_item("optimizer_state_bytes", state_bytes)?;
    d.set_item("peak_live_bytes", memory.peak_bytes)?;
    d.set_item("content_hash", model.content_hash())?;
    Ok(d)
}

/// Checks model.json text as `placer` would read it, and summarises it.
#[pyfunction]
fn check_model<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let model = parse(text)?;
    summary(py, &model)
}

/// Checks model.json text and writes it to `path` atomically, in placer's own layout.
#[pyfunction]
fn save_model<'py>(py: Python<'py>, text: &str, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let model = parse(text)?;
    placer_ir::save_model(&model, &path).map_err(|e| ModelError::new_err(e.to_string()))?;
    summary(py, &model)
}

/// A node's name, its inputs' names, and the names of the tensors it writes.
type NodeOperands = (String, Vec<String>, Vec<String>);

/// Every node of the model at `path`, in the order the executor numbers them: (name,
/// input tensor names, written tensor names: its updates, then its outputs), as a
/// kernel runner receives their bytes.
#[pyfunction]
fn node_operands(path: PathBuf) -> PyResult<Vec<NodeOperands>> {
    let model = placer_ir::load_model(&path).map_err(|e| ModelError::new_err(e.to_string()))?;
    let name = |t: &placer_ir::TensorId| model.tensor(*t).name.clone();
    Ok(model
        .nodes()
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                n.inputs.iter().map(name).collect(),
                n.updates.iter().chain(&n.outputs).map(name).collect(),
            )
        })
        .collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ModelError", m.py().get_type::<ModelError>())?;
    m.add("ProfileError", m.py().get_type::<ProfileError>())?;
    m.add("FORMAT_VERSION", placer_ir::FORMAT_VERSION)?;
    m.add_function(wrap_pyfunction!(profile::profile, m)?)?;
    m.add_function(wrap_pyfunction!(node_operands, m)?)?;
    m.add_function(wrap_pyfunction!(check_model, m)?)?;
    m.add_function(wrap_pyfunction!(save_model, m)?)?;
    m.add_function(wrap_pyfunction!(placement::busy_wait, m)?)?;
    m.add_function(wrap_pyfunction!(placement::sleep_wait, m)?)?;
    m.add_function(wrap_pyfunction!(hook::entry_points, m)?)?;
    m.add_function(wrap_pyfunction!(cores::pin_here, m)?)?;
    m.add_function(wrap_pyfunction!(cores::keep_off, m)?)?;
    m.add_class::<cores::Pin>()?;
    m.add_class::<placement::Placement>()?;
    m.add_class::<homes::Homes>()?;
    Ok(())
}
