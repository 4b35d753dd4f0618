//! The dims of a row that the model leaves free, bound from the input files.
//!
//! A model declared `x[N, 3, H, W]` streams files of shape `[rows, 3, 224, 224]`: the batch
//! dim `N` is set by the batch size, and `H` and `W` by the file — as a whole-array
//! `arenac run --input` binds them — unless `--shape` already binds them.

use std::path::Path;

use arenac_compiler::import::inputs::declared_inputs;
use arenac_compiler::import::load_model_file;

use super::{MappedNpy, StreamError};
use crate::CompileOptions;

/// `opts` plus a binding `NAME[i]=size` for every free dim `i >= 1` of each given input that
/// `opts` does not already bind (by the symbol, `NAME[i]` or the whole shape), its size taken
/// from that file's rows (`shape[i]`). A file whose rank differs from the declared one is left
/// alone: the runner's check names it. Conflicts (two files giving a shared symbol different
/// sizes, or a `--shape` disagreeing with a file) surface as the compile error naming them.
pub fn bind_row_dims(
    model: &Path,
    opts: &CompileOptions,
    inputs: &[(&str, &MappedNpy)],
) -> Result<CompileOptions, StreamError> {
    let proto = load_model_file(model)?;
    let graph = proto.graph.as_ref().ok_or_else(|| {
        StreamError::Input(format!("{}: the model has no graph", model.display()))
    })?;
    let declared = declared_inputs(graph)?;
    let mut out = opts.clone();
    for (name, file) in inputs {
        let Some(d) = declared.iter().find(|d| d.name == *name) else {
            continue;
        };
        let Some(dims) = d.dims.as_deref() else {
            continue;
        };
        if dims.len() != file.shape().len() || opts.shapes.iter().any(|(n, _)| n == name) {
            continue;
        }
        for (i, &size) in file.shape().iter().enumerate().skip(1) {
            let Some(label) = d.dim_label(i) else {
                continue;
            };
            let indexed = format!("{name}[{i}]");
            if opts
                .shapes
                .iter()
                .any(|(n, _)| *n == label || *n == indexed)
            {
                continue;
            }
            out = out.with_shape(indexed, vec![size]);
        }
    }
    Ok(out)
}
