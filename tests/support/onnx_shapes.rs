//! What ONNX's shape inference says, and the comparison with our graph.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use arenac_compiler::ir::graph::Graph;
use arenac_compiler::ir::types::DType;

use super::json::{Json, JsonParser};
use super::repo_root;

/// One dim as onnx.shape_inference knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Dim {
    Known(usize),
    Symbol(String),
    Unknown,
}

/// `elem_type` code and dims (`None`: rank unknown).
pub type OnnxType = (i64, Option<Vec<Dim>>);

pub fn parse_onnx_shapes(text: &str) -> Result<BTreeMap<String, OnnxType>, String> {
    let Json::Obj(items) = JsonParser::parse(text)? else {
        return Err("expected a JSON object".into());
    };
    let mut out = BTreeMap::new();
    for (name, v) in items {
        let bad = || format!("value '{name}': expected [elem_type, dims]");
        let Json::Arr(pair) = v else {
            return Err(bad());
        };
        let [Json::Int(elem), dims] = pair.as_slice() else {
            return Err(bad());
        };
        let dims = match dims {
            Json::Null => None,
            Json::Arr(ds) => Some(
                ds.iter()
                    .map(|d| match d {
                        Json::Int(n) => usize::try_from(*n).map(Dim::Known).map_err(|_| bad()),
                        Json::Str(s) => Ok(Dim::Symbol(s.clone())),
                        Json::Null => Ok(Dim::Unknown),
                        _ => Err(bad()),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => return Err(bad()),
        };
        out.insert(name, (*elem, dims));
    }
    Ok(out)
}

/// Runs `scripts/onnx_shapes.py` on `model` with `python`.
pub fn onnx_shapes(python: &str, model: &Path) -> Result<BTreeMap<String, OnnxType>, String> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let out = std::env::temp_dir().join(format!(
        "arenac-onnx-shapes-{}-{}.json",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let script = repo_root().join("scripts").join("onnx_shapes.py");
    let run = Command::new(python)
        .arg(&script)
        .arg(model)
        .arg(&out)
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "onnx_shapes.py failed ({}): {}",
            run.status,
            String::from_utf8_lossy(&run.stderr).trim()
        ));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()));
    let _ = std::fs::remove_file(&out);
    parse_onnx_shapes(&text?)
}

/// How our graph compares with ONNX shape inference.
#[derive(Debug, Default)]
pub struct ShapeReport {
    /// Names known to both with a known rank: dtype and every dim compared.
    pub compared: usize,
    /// Names known to both, rank unknown to ONNX: dtype compared only.
    pub dtype_only: usize,
    /// Names ONNX knows that our graph has no value for.
    pub missing: Vec<String>,
    /// Disagreements, one line each.
    pub mismatches: Vec<String>,
    /// Symbolic dims and the size our graph gave them.
    pub symbols: BTreeMap<String, usize>,
}

impl ShapeReport {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} values compared with onnx shape inference, {} mismatches",
            self.compared + self.dtype_only,
            self.mismatches.len()
        );
        if self.dtype_only > 0 {
            s += &format!(", {} dtype only (rank unknown to onnx)", self.dtype_only);
        }
        if !self.missing.is_empty() {
            s += &format!(", {} not in our graph", self.missing.len());
        }
        // onnx names dims it cannot compute `unk__K`; they are checked but not listed.
        let generated = self
            .symbols
            .keys()
            .filter(|k| k.starts_with("unk__"))
            .count();
        let user: Vec<String> = self
            .symbols
            .iter()
            .filter(|(k, _)| !k.starts_with("unk__"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !user.is_empty() {
            s += &format!(" (symbols: {})", user.join(", "));
        }
        if generated > 0 {
            s += &format!(" ({generated} onnx-generated unk__ dims, consistent)");
        }
        s
    }
}

pub fn fmt_onnx_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Known(n) => n.to_string(),
            Dim::Symbol(s) => s.clone(),
            Dim::Unknown => "?".into(),
        })
        .collect();
    format!("[{}]", parts.join(","))
}

/// Compares every name present in both. A symbolic dim must get the same size everywhere;
/// an unknown dim matches anything.
pub fn compare_shapes(g: &Graph, onnx: &BTreeMap<String, OnnxType>) -> ShapeReport {
    let mut r = ShapeReport::default();
    for (name, (elem, dims)) in onnx {
        let Some(id) = g.find_value(name) else {
            r.missing.push(name.clone());
            continue;
        };
        let ty = &g.value(id).ty;
        let mut problems = Vec::new();
        if DType::from_onnx(*elem as i32) != Some(ty.dtype) {
            problems.push(format!(
                "dtype {} vs onnx elem_type {elem}",
                ty.dtype.name()
            ));
        }
        match dims {
            None => r.dtype_only += 1,
            Some(dims) => {
                r.compared += 1;
                let ok = dims.len() == ty.shape.len()
                    && dims.iter().zip(&ty.shape).all(|(d, &n)| match d {
                        Dim::Known(k) => *k == n,
                        Dim::Unknown => true,
                        Dim::Symbol(s) => *r.symbols.entry(s.clone()).or_insert(n) == n,
                    });
                if !ok {
                    problems.push(format!(
                        "shape {:?} vs onnx {}",
                        ty.shape,
                        fmt_onnx_dims(dims)
                    ));
                }
            }
        }
        if !problems.is_empty() {
            r.mismatches
                .push(format!("'{name}': {}", problems.join("; ")));
        }
    }
    r
}
