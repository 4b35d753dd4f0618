//! The deterministic text form of the IR — the format of `arenac compile --print-ir` and of the
//! snapshot tests. Values print as `%N` (their index), followed by the file's name in quotes.
//!
//! ```text
//! graph "mlp" opset 17
//!   input %0 "x": f32[1,64]
//!   const %1 "w": f32[64,10]
//!   const %3 "shape": i64[2] = [1,-1]
//!   %4 "y": f32[1,10] = MatMul(%0, %1)  # node "mm"
//!   output %4
//! ```
//! Constants with at most [`MAX_PRINTED_ELEMENTS`] elements print their values. Only constants
//! that some node or output uses are listed.
//!
//! A node holding graphs (an `If`) is followed by each of them, indented under it, with its
//! own value numbering; an outer value prints the node input it reads:
//!
//! ```text
//!   %2 "y": f32[4] = If(%1, %0)  # node "if"
//!     then_branch "t"
//!       outer %0 "x": f32[4] = node input 1
//!       %1 "a": f32[4] = Relu(%0)  # node "if/then#0"
//!       output %1 "a": f32[4]
//!     else_branch "e"
//!       ...
//! ```

use std::collections::BTreeSet;
use std::fmt::Write;

use super::graph::{Graph, ValueId, ValueKind};
use super::tensor::Tensor;

/// Constants up to this many elements print their values.
pub const MAX_PRINTED_ELEMENTS: usize = 16;

/// Prints the whole graph.
pub fn print_graph(g: &Graph) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "graph \"{}\" opset {}", g.name, g.opset);
    write_body(&mut s, g, "  ");
    s
}

/// The inputs, outer values, used constants, nodes (with their subgraphs) and outputs of `g`,
/// each line starting with `pad`.
fn write_body(s: &mut String, g: &Graph, pad: &str) {
    for &v in &g.inputs {
        let val = g.value(v);
        let _ = writeln!(s, "{pad}input {v} \"{}\": {}", val.name, val.ty);
    }
    for v in g.value_ids() {
        let val = g.value(v);
        if let ValueKind::Outer(k) = val.kind {
            let _ = writeln!(
                s,
                "{pad}outer {v} \"{}\": {} = node input {k}",
                val.name, val.ty
            );
        }
    }
    let mut used: BTreeSet<ValueId> = g.outputs.iter().copied().collect();
    for (_, n) in g.nodes() {
        used.extend(n.inputs.iter().copied());
    }
    for v in used {
        let val = g.value(v);
        if let ValueKind::Constant(t) = &val.kind {
            let _ = write!(s, "{pad}const {v} \"{}\": {}", val.name, val.ty);
            if t.numel() <= MAX_PRINTED_ELEMENTS {
                let _ = write!(s, " = {}", tensor_values(t));
            }
            s.push('\n');
        }
    }
    for (_, n) in g.nodes() {
        s.push_str(pad);
        for (i, &o) in n.outputs.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let val = g.value(o);
            let _ = write!(s, "{o} \"{}\": {}", val.name, val.ty);
        }
        let args: Vec<String> = n.inputs.iter().map(|v| v.to_string()).collect();
        let _ = write!(s, " = {}({})", n.op.name(), args.join(", "));
        let attrs = n.op.attrs();
        if !attrs.is_empty() {
            let parts: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(s, " {{{}}}", parts.join(", "));
        }
        let _ = writeln!(s, "  # node \"{}\"", n.name);
        let unrunnable = match &n.op {
            crate::ops::Op::If(a) => a.unrunnable.as_ref(),
            _ => None,
        };
        for (what, sub) in n.op.subgraphs() {
            if let Some(u) = unrunnable.filter(|u| u.which() == what) {
                let _ = writeln!(
                    s,
                    "{pad}  {what}: cannot run with these shapes, a run taking it fails ({})",
                    u.reason
                );
                continue;
            }
            let _ = writeln!(s, "{pad}  {what} \"{}\"", sub.name);
            write_body(s, sub, &format!("{pad}    "));
        }
    }
    for &v in &g.outputs {
        let _ = writeln!(
            s,
            "{pad}output {v} \"{}\": {}",
            g.value(v).name,
            g.value(v).ty
        );
    }
}

/// `[1,2,3]` for a tensor's elements (flattened), floats in shortest round-trip form.
pub fn tensor_values(t: &Tensor) -> String {
    let items: Vec<String> = if t.dtype().is_float() {
        t.to_f64_vec()
            .into_iter()
            .map(|v| {
                if t.dtype() == super::types::DType::F64 {
                    format!("{v:?}")
                } else {
                    format!("{:?}", v as f32)
                }
            })
            .collect()
    } else {
        t.to_i64_vec().into_iter().map(|v| v.to_string()).collect()
    };
    if t.shape().is_empty() {
        items.into_iter().next().unwrap_or_default()
    } else {
        format!("[{}]", items.join(","))
    }
}
