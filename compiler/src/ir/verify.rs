//! The IR verifier. Checks, for a [`Graph`]:
//! 1. every node input is defined before the node runs (graph input, constant, or output of a
//!    node earlier in the order);
//! 2. every node output is recorded as computed by that node, and values have one producer;
//! 3. each node's output types equal what its op infers from its input types;
//! 4. graph outputs exist;
//! 5. the subgraphs a node holds (an `If`'s branches) satisfy all of this themselves; outer
//!    values ([`ValueKind::Outer`]) are defined from the start, and what ties them to the node
//!    (their types, which inputs they read) is checked by the node's inference (rule 3).
//!
//! Runs after import in tests and debug builds.

use std::collections::BTreeSet;

use super::graph::{Graph, ValueId, ValueKind};
use super::types::TensorType;

/// Checks the invariants above; the error names the node and the broken rule.
pub fn verify(g: &Graph) -> Result<(), String> {
    let mut defined: BTreeSet<ValueId> = BTreeSet::new();
    for v in g.value_ids() {
        if matches!(
            g.value(v).kind,
            ValueKind::Input | ValueKind::Constant(_) | ValueKind::Outer(_)
        ) {
            defined.insert(v);
        }
    }
    for (id, n) in g.nodes() {
        for &i in &n.inputs {
            if !defined.contains(&i) {
                return Err(format!(
                    "node '{}': input {i} used before it is defined",
                    n.name
                ));
            }
        }
        for &o in &n.outputs {
            if g.value(o).kind != ValueKind::Computed(id) {
                return Err(format!(
                    "node '{}': output {o} not marked as computed by it",
                    n.name
                ));
            }
            if !defined.insert(o) {
                return Err(format!("node '{}': output {o} defined twice", n.name));
            }
        }
        let in_types: Vec<TensorType> = n.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
        let out_types: Vec<TensorType> = n.outputs.iter().map(|&v| g.value(v).ty.clone()).collect();
        match n.op.infer(&in_types) {
            Ok(t) if t == out_types => {}
            Ok(t) => {
                return Err(format!(
                    "node '{}' ({}): outputs typed {out_types:?} but the op infers {t:?}",
                    n.name,
                    n.op.name()
                ));
            }
            Err(e) => return Err(format!("node '{}' ({}): {e}", n.name, n.op.name())),
        }
        for (what, sub) in n.op.subgraphs() {
            verify(sub).map_err(|e| format!("node '{}' ({}), {what}: {e}", n.name, n.op.name()))?;
        }
    }
    for &o in &g.outputs {
        if !defined.contains(&o) {
            return Err(format!("graph output {o} is never defined"));
        }
    }
    Ok(())
}
