//! arenac: an ONNX graph compiler for CPUs whose heart is static memory planning.
//!
//! This crate is the library face and the `arenac` CLI. Today it compiles a model into a
//! typed, statically shaped, constant-folded graph and reports what it holds; planning,
//! kernels and the runtime land on top of the same [`Model`].
//!
//! ```no_run
//! use arenac::{CompileOptions, compile_file};
//!
//! let opts = CompileOptions::default().with_shape("pixels", vec![8, 64]);
//! let model = compile_file("models/digits/digits.onnx".as_ref(), &opts)?;
//! println!("{} nodes, {} weight bytes", model.summary().nodes, model.summary().weights_bytes);
//! # Ok::<(), arenac::Error>(())
//! ```

#![deny(missing_docs)]

use std::collections::BTreeSet;
use std::path::Path;

use arenac_compiler::import::{ImportOptions, import_file};
use arenac_compiler::ir::graph::{Graph, ValueId, ValueKind};

pub use arenac_compiler::Error;
pub use arenac_compiler::import::inputs::parse_shape_spec;
pub use arenac_compiler::ir::print::print_graph;

/// Options for [`compile_file`].
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Shapes to bind: `(graph input or symbolic dim name, dims)`.
    pub shapes: Vec<(String, Vec<usize>)>,
}

impl CompileOptions {
    /// Adds a shape binding (an input's full shape, or one symbolic dim as `[n]`).
    pub fn with_shape(mut self, name: impl Into<String>, dims: Vec<usize>) -> Self {
        self.shapes.push((name.into(), dims));
        self
    }
}

/// A compiled model: the typed graph and what the compiler had to say about it.
#[derive(Debug)]
pub struct Model {
    graph: Graph,
    warnings: Vec<String>,
}

/// Sizes of a compiled model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Nodes left after folding.
    pub nodes: usize,
    /// Values in the graph (inputs, constants, computed).
    pub values: usize,
    /// Constant tensors the nodes read (weights, folded constants).
    pub weight_tensors: usize,
    /// Their total bytes, each distinct buffer counted once (folded views share bytes).
    pub weights_bytes: usize,
    /// Sum of the bytes of every computed value: the memory a runtime that never frees or
    /// reuses would need (the "naive" figure planning is measured against).
    pub naive_intermediate_bytes: usize,
}

impl Model {
    /// The typed graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Warnings raised while compiling (e.g. symbolic dims defaulted to 1).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The deterministic text form of the graph.
    pub fn print_ir(&self) -> String {
        print_graph(&self.graph)
    }

    /// Node, value and byte counts.
    pub fn summary(&self) -> Summary {
        let g = &self.graph;
        let mut read: BTreeSet<ValueId> = g.outputs.iter().copied().collect();
        for (_, n) in g.nodes() {
            read.extend(n.inputs.iter().copied());
        }
        let mut weight_tensors = 0;
        let mut weights_bytes = 0;
        // Folded views (Identity, Reshape of an initializer) share their source's bytes: count
        // each distinct buffer once.
        let mut buffers: BTreeSet<(usize, usize)> = BTreeSet::new();
        for &v in &read {
            if let ValueKind::Constant(t) = &g.value(v).kind {
                weight_tensors += 1;
                if buffers.insert((t.bytes().as_ptr() as usize, t.bytes().len())) {
                    weights_bytes += t.bytes().len();
                }
            }
        }
        let naive_intermediate_bytes = g
            .values()
            .iter()
            .filter(|v| matches!(v.kind, ValueKind::Computed(_)))
            .map(|v| v.ty.bytes().unwrap_or(0))
            .sum();
        Summary {
            nodes: g.node_count(),
            values: g.values().len(),
            weight_tensors,
            weights_bytes,
            naive_intermediate_bytes,
        }
    }
}

/// Loads an `.onnx` file (external data relative to its folder), binds shapes, infers every
/// value's type and folds constants.
pub fn compile_file(path: &Path, opts: &CompileOptions) -> Result<Model, Error> {
    let imported = import_file(
        path,
        &ImportOptions {
            shapes: opts.shapes.clone(),
        },
    )?;
    if cfg!(debug_assertions)
        && let Err(e) = arenac_compiler::ir::verify::verify(&imported.graph)
    {
        return Err(Error::InvalidModel(format!(
            "IR verifier (an arenac bug): {e}"
        )));
    }
    Ok(Model {
        graph: imported.graph,
        warnings: imported.warnings,
    })
}

/// One supported op type with its opset range, for `arenac ops`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSupport {
    /// ONNX op type (default domain).
    pub op_type: &'static str,
    /// First supported opset.
    pub since: i64,
    /// Last supported opset.
    pub until: i64,
}

/// Every supported op, sorted by name (the `Constant` node included).
pub fn supported_ops() -> Vec<OpSupport> {
    let mut ops: Vec<OpSupport> = arenac_compiler::ops::registry()
        .map(|d| OpSupport {
            op_type: d.op_type,
            since: d.since,
            until: d.until,
        })
        .collect();
    ops.push(OpSupport {
        op_type: "Constant",
        since: arenac_compiler::ops::MIN_OPSET,
        until: arenac_compiler::ops::MAX_OPSET,
    });
    ops.sort_by(|a, b| a.op_type.cmp(b.op_type).then(a.since.cmp(&b.since)));
    ops
}
