//! Name scopes of nested graphs (the bodies of `If`, `Loop` and `Scan`).
//!
//! A subgraph may read values of the graphs around it by name (ONNX's outer-scope reads). For
//! the importer these are *implicit inputs* of the node holding the subgraph: the node can run
//! only after they are computed (node ordering), and a value frozen for a shape operand inside a
//! body traces back through them to the graph inputs (freezing). This module computes them
//! syntactically, from the protobuf, before anything is imported.

use std::collections::BTreeSet;

use arenac_proto::{GraphProto, NodeProto};

/// The subgraphs held by `node`'s attributes (`GRAPH` and `GRAPHS`), in attribute order.
pub fn subgraphs(node: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    node.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
}

/// The names `g` reads that it does not define, in order of first use (its nodes' inputs, the
/// implicit inputs of its nodes' own subgraphs, then its outputs). Names a graph defines are
/// its inputs, its initializers and its nodes' outputs.
pub fn free_names(g: &GraphProto) -> Vec<String> {
    let mut defined: BTreeSet<&str> = BTreeSet::new();
    defined.extend(g.input.iter().map(|i| i.name()));
    defined.extend(g.initializer.iter().map(|t| t.name()));
    for n in &g.node {
        defined.extend(n.output.iter().map(String::as_str));
    }
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut free = Vec::new();
    let mut note = |name: &str| {
        if !name.is_empty() && !defined.contains(name) && seen.insert(name.to_string()) {
            free.push(name.to_string());
        }
    };
    for n in &g.node {
        for i in &n.input {
            note(i);
        }
        for i in implicit_inputs(n) {
            note(&i);
        }
    }
    for o in &g.output {
        note(o.name());
    }
    free
}

/// The outer-scope names `node`'s subgraphs read (none for a node without subgraphs), in order
/// of first use, without the node's explicit inputs.
pub fn implicit_inputs(node: &NodeProto) -> Vec<String> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for g in subgraphs(node) {
        for name in free_names(g) {
            if seen.insert(name.clone()) {
                out.push(name);
            }
        }
    }
    out
}

/// Every name `node` reads: its inputs (empty names skipped), then its implicit inputs.
pub fn all_inputs(node: &NodeProto) -> Vec<String> {
    let mut names: Vec<String> = node
        .input
        .iter()
        .filter(|n| !n.is_empty())
        .cloned()
        .collect();
    for i in implicit_inputs(node) {
        if !names.contains(&i) {
            names.push(i);
        }
    }
    names
}

/// Every name read anywhere in `g`, its subgraphs included, and its outputs.
pub fn read_names(g: &GraphProto) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    collect_reads(g, &mut names);
    names
}

fn collect_reads(g: &GraphProto, names: &mut BTreeSet<String>) {
    for n in &g.node {
        names.extend(n.input.iter().filter(|s| !s.is_empty()).cloned());
        for sub in subgraphs(n) {
            collect_reads(sub, names);
        }
    }
    names.extend(g.output.iter().map(|o| o.name().to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::text::parse_model_text as parse_model;

    #[test]
    fn implicit_inputs_of_nested_branches() {
        let m = parse_model(
            r#"<ir_version: 8, opset_import: ["" : 17]>
            g (bool c, float[2] x, float[2] y) => (float[2] z) {
                z = If (c) <then_branch = t () => (float[2] a) {
                    a = Add (x, y)
                }, else_branch = e () => (float[2] b) {
                    b = If (c) <then_branch = t2 () => (float[2] q) { q = Identity (y) },
                               else_branch = e2 () => (float[2] r) { r = Neg (x) }>
                }>
            }"#,
        )
        .expect("parses");
        let g = m.graph.as_ref().expect("graph");
        let node = &g.node[0];
        assert_eq!(implicit_inputs(node), vec!["x", "y", "c"]);
        assert_eq!(all_inputs(node), vec!["c", "x", "y"]);
        let reads = read_names(g);
        assert!(reads.contains("x") && reads.contains("c") && reads.contains("z"));
        assert!(free_names(g).is_empty());
    }
}
