//! `arenac._native.Session`: the compiled model(s) behind `arenac.InferenceSession`.
//!
//! The model file is read once, at creation, for its declared inputs and outputs. When every
//! input's shape is known (fixed dims, or bound with `shapes=`) it is compiled at once;
//! otherwise each distinct set of feed shapes compiles the model once, bound to those shapes,
//! and the compiled models are kept (the [`CACHE`] most recently used). Compiling and running
//! release the GIL.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use arenac::{ActType, CompileOptions, TensorRef, WeightType, compile_file};
use arenac_compiler::import::inputs::{DeclDim, DeclaredInput, declared_inputs};
use arenac_compiler::import::load_model_file;
use numpy::{IntoPyArray, PyArray1, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{Failure, Kind};
use crate::pool::Compiled;
use crate::types::{accepts, dtype_of_numpy, numpy_name, ort_type, ort_type_of_numpy};

/// Compiled shapes kept per session; the least recently used beyond this is dropped.
pub const CACHE: usize = 8;

/// One output of a run for the Python side: name, numpy dtype name, shape and its bytes
/// (copied out of the arena; the numpy array owns them).
type PyOutput<'py> = (String, &'static str, Vec<usize>, Bound<'py, PyArray1<u8>>);

/// One output of a run before it reaches Python: name, numpy dtype name, shape, bytes.
type RawOutput = (String, &'static str, Vec<usize>, Vec<u8>);

/// A declared graph input or output for `get_inputs()` / `get_outputs()`: name, ONNX Runtime
/// type and dims (ints, symbol strings, `None` for anonymous dims).
type PyArg = (String, &'static str, Vec<Py<PyAny>>);

/// One feed, borrowed from its numpy array for the duration of a call.
struct Feed<'a> {
    name: String,
    dtype: String,
    shape: Vec<usize>,
    data: &'a [u8],
}

/// The compiled model(s) of one model file.
#[pyclass(frozen, module = "arenac._native")]
pub struct Session {
    path: PathBuf,
    opts: CompileOptions,
    inputs: Vec<DeclaredInput>,
    outputs: Vec<DeclaredInput>,
    /// Compile for each new set of feed shapes (some input's shape is not bound).
    dynamic: bool,
    max_sessions: Option<usize>,
    /// Compiled models, most recently used last.
    cache: Mutex<Vec<Arc<Compiled>>>,
}

impl Session {
    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The compile options given at creation (shapes, memory limit, threads).
    pub fn options(&self) -> &CompileOptions {
        &self.opts
    }

    fn cache(&self) -> MutexGuard<'_, Vec<Arc<Compiled>>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn latest(&self) -> Result<Arc<Compiled>, Failure> {
        self.cache().last().cloned().ok_or_else(|| {
            Failure::new(
                Kind::Error,
                format!(
                    "{}: the inputs' shapes are not bound yet (symbolic dims): pass shapes= or \
                     run once to compile",
                    self.path.display()
                ),
            )
        })
    }

    /// The compiled model for these input shapes (graph-input order), compiled now if new.
    fn compiled_for(&self, shapes: &[Vec<usize>]) -> Result<Arc<Compiled>, Failure> {
        let mut cache = self.cache();
        if !self.dynamic {
            return cache
                .first()
                .cloned()
                .ok_or_else(|| Failure::new(Kind::Error, "no compiled model (an arenac bug)"));
        }
        if let Some(i) = cache.iter().position(|c| c.shapes == shapes) {
            let c = cache.remove(i);
            cache.push(c.clone());
            return Ok(c);
        }
        let mut opts = self.opts.clone();
        for (d, s) in self.inputs.iter().zip(shapes) {
            opts = opts.with_shape(d.name.clone(), s.clone());
        }
        let c = Arc::new(self.compile(&opts, shapes.to_vec())?);
        if cache.len() >= CACHE {
            cache.remove(0);
        }
        cache.push(c.clone());
        Ok(c)
    }

    fn compile(&self, opts: &CompileOptions, shapes: Vec<Vec<usize>>) -> Result<Compiled, Failure> {
        let model = compile_file(&self.path, opts)?;
        let exe = model
            .executable()
            .ok_or_else(|| Failure::new(Kind::Error, "compiled without code (an arenac bug)"))?;
        let shapes = if shapes.is_empty() {
            exe.inputs().iter().map(|s| s.ty.shape.clone()).collect()
        } else {
            shapes
        };
        let max = match self.max_sessions {
            Some(n) => n,
            None => default_sessions(opts, &model)?,
        };
        Ok(Compiled::new(shapes, model, max))
    }

    /// Checks the feeds against the declared inputs and returns their shapes in graph-input
    /// order.
    fn feed_shapes(&self, feeds: &[Feed<'_>]) -> Result<Vec<Vec<usize>>, Failure> {
        for f in feeds {
            let Some(d) = self.inputs.iter().find(|d| d.name == f.name) else {
                return Err(Failure::new(
                    Kind::InvalidInput,
                    format!(
                        "unknown input '{}'; the model's inputs are: {}",
                        f.name,
                        describe(&self.inputs)
                    ),
                ));
            };
            if !accepts(d.dtype, &f.dtype) {
                let message = match dtype_of_numpy(&f.dtype) {
                    Some(given) => arenac::RunError::WrongDType {
                        name: f.name.clone(),
                        expected: d.dtype,
                        given,
                    }
                    .to_string(),
                    None => format!(
                        "input '{}': expected dtype {}, given {}",
                        f.name,
                        d.dtype,
                        ort_type_of_numpy(&f.dtype)
                    ),
                };
                return Err(Failure::new(
                    Kind::InvalidInput,
                    format!("{message} (numpy {} needed)", numpy_name(d.dtype)),
                ));
            }
        }
        self.inputs
            .iter()
            .map(|d| {
                feeds
                    .iter()
                    .find(|f| f.name == d.name)
                    .map(|f| f.shape.clone())
                    .ok_or_else(|| {
                        Failure::new(
                            Kind::InvalidInput,
                            format!(
                                "missing input '{}' (expected {}{})",
                                d.name,
                                d.dtype,
                                d.declared_text()
                            ),
                        )
                    })
            })
            .collect()
    }

    /// One run, without the GIL: outputs `wanted` (indices) copied out of the arena.
    fn run_detached(
        &self,
        feeds: &[Feed<'_>],
        wanted: Option<&[String]>,
    ) -> Result<Vec<RawOutput>, Failure> {
        let shapes = self.feed_shapes(feeds)?;
        let compiled = self.compiled_for(&shapes)?;
        let mut lease = compiled.lease()?;
        let session = lease.session();
        let slots = session.inputs();
        let mut views = Vec::with_capacity(feeds.len());
        for f in feeds {
            // Known names were checked; the slot's dtype reads carrier arrays (bf16 as uint16).
            let dtype = slots
                .iter()
                .find(|s| s.name == f.name)
                .map_or(arenac::DType::F32, |s| s.ty.dtype);
            views.push((
                f.name.as_str(),
                TensorRef::from_bytes(dtype, &f.shape, f.data)?,
            ));
        }
        let out_slots = session.outputs().to_vec();
        let indices: Vec<usize> = match wanted {
            None => (0..out_slots.len()).collect(),
            Some(names) => names
                .iter()
                .map(|n| {
                    out_slots.iter().position(|s| s.name == *n).ok_or_else(|| {
                        Failure::new(
                            Kind::InvalidInput,
                            format!(
                                "unknown output '{n}'; the model's outputs are: {}",
                                out_slots
                                    .iter()
                                    .map(|s| format!("{} {}", s.name, s.ty))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let outputs = session.run(&views)?;
        let mut result = Vec::with_capacity(indices.len());
        for i in indices {
            let (Some(slot), Some(t)) = (out_slots.get(i), outputs.get(i)) else {
                return Err(Failure::new(Kind::Error, "output missing (an arenac bug)"));
            };
            result.push((
                slot.name.clone(),
                numpy_name(slot.ty.dtype),
                slot.ty.shape.clone(),
                t.bytes().to_vec(),
            ));
        }
        Ok(result)
    }
}

/// How many sessions (arenas) of a compiled model may exist at once when not given: as many
/// as fit the memory limit beside the weights, at most one per CPU, at least one.
fn default_sessions(opts: &CompileOptions, model: &arenac::Model) -> Result<usize, Failure> {
    let cpus = arenac::default_threads().max(1);
    let Some(spec) = &opts.memory_limit else {
        return Ok(cpus);
    };
    let budget = spec.limit.resolve(&spec.text)?;
    let s = model.summary();
    let arena = s.arena_bytes.max(1);
    let spare = budget.bytes.saturating_sub(s.weights_bytes);
    Ok((spare / arena).clamp(1, cpus))
}

fn describe(decl: &[DeclaredInput]) -> String {
    decl.iter()
        .map(|d| format!("{} {}{}", d.name, d.dtype, d.declared_text()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `shapes` (input or symbol name → dims) fixes every dim of every input.
fn all_bound(inputs: &[DeclaredInput], shapes: &[(String, Vec<usize>)]) -> bool {
    let given = |n: &str| shapes.iter().any(|(s, _)| s == n);
    inputs.iter().all(|d| {
        given(&d.name)
            || d.dims.as_ref().is_some_and(|dims| {
                dims.iter().all(|x| match x {
                    DeclDim::Fixed(_) => true,
                    DeclDim::Symbol(s) => given(s),
                    DeclDim::Anonymous => false,
                })
            })
    })
}

/// Reads the model's declared inputs and outputs.
fn declared(path: &Path) -> Result<(Vec<DeclaredInput>, Vec<DeclaredInput>), Failure> {
    let proto = load_model_file(path)?;
    let graph = proto.graph.as_ref().ok_or_else(|| {
        Failure::new(
            Kind::InvalidModel,
            format!("{}: the model has no graph", path.display()),
        )
    })?;
    let inputs = declared_inputs(graph)?;
    let outputs = graph
        .output
        .iter()
        .map(DeclaredInput::from_proto)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((inputs, outputs))
}

fn py_dims(py: Python<'_>, d: &DeclaredInput) -> PyResult<Vec<Py<PyAny>>> {
    let Some(dims) = &d.dims else {
        return Ok(Vec::new());
    };
    dims.iter()
        .map(|x| {
            Ok(match x {
                DeclDim::Fixed(n) => n.into_pyobject(py)?.into_any().unbind(),
                DeclDim::Symbol(s) => s.into_pyobject(py)?.into_any().unbind(),
                DeclDim::Anonymous => py.None(),
            })
        })
        .collect()
}

fn py_fixed(py: Python<'_>, dims: &[usize]) -> PyResult<Vec<Py<PyAny>>> {
    dims.iter()
        .map(|n| Ok(n.into_pyobject(py)?.into_any().unbind()))
        .collect()
}

impl Session {
    /// The compiled slots (`slots` of the latest executable) when the model is compiled for
    /// fixed shapes, else the declared values: as (name, ONNX Runtime type, dims).
    fn args(
        &self,
        py: Python<'_>,
        slots: impl Fn(&arenac_compiler::codegen::Executable) -> &[arenac_compiler::codegen::IoSlot],
        declared: &[DeclaredInput],
    ) -> PyResult<Vec<PyArg>> {
        if !self.dynamic
            && let Ok(c) = self.latest()
            && let Some(exe) = c.model.executable()
        {
            return slots(exe)
                .iter()
                .map(|s| {
                    Ok((
                        s.name.clone(),
                        ort_type(s.ty.dtype),
                        py_fixed(py, &s.ty.shape)?,
                    ))
                })
                .collect();
        }
        declared
            .iter()
            .map(|d| Ok((d.name.clone(), ort_type(d.dtype), py_dims(py, d)?)))
            .collect()
    }
}

#[pymethods]
impl Session {
    /// Reads the model and, when every input's shape is known, compiles it (without the GIL).
    #[new]
    // The Python keyword arguments, one parameter each.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, shapes=None, memory_limit=None, threads=None, max_sessions=None, weights=None, activations=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        shapes: Option<Vec<(String, Vec<usize>)>>,
        memory_limit: Option<String>,
        threads: Option<usize>,
        max_sessions: Option<usize>,
        weights: Option<String>,
        activations: Option<String>,
    ) -> PyResult<Session> {
        let session = py.detach(|| -> Result<Session, Failure> {
            let mut opts = CompileOptions::default();
            if let Some(w) = &weights {
                opts.weights = WeightType::parse(w).ok_or_else(|| {
                    let names: Vec<&str> = WeightType::ALL.iter().map(|t| t.name()).collect();
                    Failure::new(
                        Kind::InvalidArgument,
                        format!("weights: unknown type '{w}' (one of {})", names.join(", ")),
                    )
                })?;
            }
            if let Some(a) = &activations {
                opts.activations = ActType::parse(a).ok_or_else(|| {
                    let names: Vec<&str> = ActType::ALL.iter().map(|t| t.name()).collect();
                    Failure::new(
                        Kind::InvalidArgument,
                        format!(
                            "activations: unknown type '{a}' (one of {})",
                            names.join(", ")
                        ),
                    )
                })?;
            }
            if let Some(t) = threads {
                if t == 0 {
                    return Err(Failure::new(
                        Kind::InvalidArgument,
                        "threads must be at least 1",
                    ));
                }
                opts = opts.with_threads(t);
            }
            if let Some(m) = &memory_limit {
                opts = opts.with_memory_limit(m)?;
            }
            if max_sessions == Some(0) {
                return Err(Failure::new(
                    Kind::InvalidArgument,
                    "max_sessions must be at least 1",
                ));
            }
            let shapes = shapes.unwrap_or_default();
            for (name, dims) in &shapes {
                opts = opts.with_shape(name.clone(), dims.clone());
            }
            let (inputs, outputs) = declared(&path)?;
            let dynamic = !all_bound(&inputs, &shapes);
            let mut s = Session {
                path,
                opts,
                inputs,
                outputs,
                dynamic,
                max_sessions,
                cache: Mutex::new(Vec::new()),
            };
            if !dynamic {
                let c = s.compile(&s.opts, Vec::new())?;
                s.cache = Mutex::new(vec![Arc::new(c)]);
            }
            Ok(s)
        })?;
        Ok(session)
    }

    /// Runs the model. `feeds`: `(name, C-contiguous array, numpy dtype name)`; `output_names`:
    /// the outputs wanted (all when `None`). Returns `(name, numpy dtype, shape, bytes)` per
    /// output, the bytes in a new numpy array (one copy out of the arena).
    #[pyo3(signature = (feeds, output_names=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        feeds: Vec<(String, Bound<'py, PyUntypedArray>, String)>,
        output_names: Option<Vec<String>>,
    ) -> PyResult<Vec<PyOutput<'py>>> {
        let mut borrowed = Vec::with_capacity(feeds.len());
        for (name, array, dtype) in &feeds {
            if !array.is_c_contiguous() {
                return Err(Failure::new(
                    Kind::InvalidInput,
                    format!("input '{name}': the array is not C-contiguous"),
                )
                .into());
            }
            let itemsize = array.dtype().itemsize();
            let count: usize = array.shape().iter().product();
            let len = count.checked_mul(itemsize).ok_or_else(|| {
                Failure::new(Kind::InvalidInput, format!("input '{name}': too large"))
            })?;
            let data: &[u8] = if count == 0 {
                &[]
            } else {
                // SAFETY: numpy's array object is alive for this call (held in `feeds`), its
                // data is C-contiguous (checked above), so `count * itemsize` bytes from
                // `data` are its elements. Another Python thread may write them meanwhile,
                // as with onnxruntime; they are only read.
                // `len` did not overflow (checked).
                unsafe {
                    let p = (*array.as_array_ptr())
                        .fields
                        .data
                        .cast::<u8>()
                        .cast_const();
                    std::slice::from_raw_parts(p, len)
                }
            };
            borrowed.push(Feed {
                name: name.clone(),
                dtype: dtype.clone(),
                shape: array.shape().to_vec(),
                data,
            });
        }
        let outs = py.detach(|| self.run_detached(&borrowed, output_names.as_deref()))?;
        Ok(outs
            .into_iter()
            .map(|(name, dtype, shape, bytes)| (name, dtype, shape, bytes.into_pyarray(py)))
            .collect())
    }

    /// The declared inputs (or the bound ones when the model is compiled for fixed shapes).
    fn inputs(&self, py: Python<'_>) -> PyResult<Vec<PyArg>> {
        self.args(py, |exe| exe.inputs(), &self.inputs)
    }

    /// The declared outputs (or the compiled ones when the model is compiled for fixed shapes).
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<PyArg>> {
        self.args(py, |exe| exe.outputs(), &self.outputs)
    }

    /// The plan report of the most recently used compiled model, as `arenac plan --json`
    /// prints it.
    fn plan_json(&self, py: Python<'_>) -> PyResult<String> {
        let c = self.latest()?;
        Ok(py.detach(|| c.model.plan_report().to_json()))
    }

    /// Arena bytes of the most recently used compiled model.
    fn arena_bytes(&self) -> PyResult<usize> {
        Ok(self.latest()?.model.summary().arena_bytes)
    }

    /// Weights bytes of the most recently used compiled model.
    fn weights_bytes(&self) -> PyResult<usize> {
        Ok(self.latest()?.model.summary().weights_bytes)
    }

    /// Graph inputs frozen into constants (their names).
    fn frozen_inputs(&self) -> PyResult<Vec<String>> {
        Ok(self
            .latest()?
            .model
            .frozen()
            .iter()
            .map(|f| f.name.clone())
            .collect())
    }

    /// Input shapes of every compiled model kept, least recently used first.
    fn compiled_shapes(&self) -> Vec<Vec<Vec<usize>>> {
        self.cache().iter().map(|c| c.shapes.clone()).collect()
    }

    /// Sessions (arenas) created for the most recently used compiled model.
    fn arenas(&self) -> usize {
        self.cache().last().map_or(0, |c| c.sessions())
    }

    /// Threads a run uses.
    fn threads(&self) -> usize {
        self.opts.threads
    }

    /// Compiler warnings of the most recently used compiled model.
    fn warnings(&self) -> Vec<String> {
        self.cache()
            .last()
            .map_or_else(Vec::new, |c| c.model.warnings().to_vec())
    }
}
