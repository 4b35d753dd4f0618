//! The IR verifier. Checks, for a [`Graph`]:
//! 1. every node input is defined before the node runs (graph input, constant, or output of a
//!    node earlier in the order);
//! 2. every node output is recorded as computed by that node, and values have one producer;
//! 3. each node's output types equal what its op infers from its input types (an f32
//!    constant read by a node whose first input is f16/bf16 is taken as that type: nodes
//!    staged by `--activations` keep f32 weights, `crate::analysis::act_type`);
//! 4. graph outputs exist;
//! 5. the subgraphs a node holds (an `If`'s branches) satisfy all of this themselves; outer
//!    values ([`ValueKind::Outer`]) are defined from the start, and what ties them to the node
//!    (their types, which inputs they read) is checked by the node's inference (rule 3).
//!
//! Runs after import in tests and debug builds.

use std::collections::BTreeSet;

use super::graph::{Graph, ValueId, ValueKind};
use super::types::TensorType;

/// `types` (of `inputs`) with f32 constants retyped to the first input's f16/bf16 (rule 3).
pub fn constants_as_data(
    g: &Graph,
    inputs: &[ValueId],
    mut types: Vec<TensorType>,
) -> Vec<TensorType> {
    use super::types::DType;
    let Some(dt) = types.first().map(|t| t.dtype) else {
        return types;
    };
    if !matches!(dt, DType::F16 | DType::BF16) {
        return types;
    }
    for (t, &v) in types.iter_mut().zip(inputs) {
        if t.dtype == DType::F32 && matches!(g.value(v).kind, ValueKind::Constant(_)) {
            t.dtype = dt;
        }
    }
    types
}

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
        let in_types = constants_as_data(g, &n.inputs, in_types);
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
