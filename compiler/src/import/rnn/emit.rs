//! Emitting the nodes of a recurrence through the importer's ordinary path: every node is a
//! synthetic `NodeProto` handed to `Importer::import_node`, so conversion, shape inference and
//! folding (weights that are initializers fold at import) apply as for any node of the file.
//! Between [`Emitter::begin_body`] and [`Emitter::end_body`] the nodes are collected into the
//! body graph of a `Scan` instead ([`Emitter::scan`] imports it); the constants they read are
//! still defined in the enclosing graph (the body reads them as outer constants). Names derive
//! from the recurrent node's label, so an error names it.

use std::collections::{HashMap, HashSet};

use arenac_proto::attribute_proto::AttributeType;
use arenac_proto::{AttributeProto, GraphProto, NodeProto, ValueInfoProto};

use crate::error::Result;
use crate::ir::graph::ValueKind;
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;

use super::super::Importer;

/// An attribute of an emitted node.
pub(super) enum A {
    /// INT.
    Int(i64),
    /// INTS.
    Ints(Vec<i64>),
    /// FLOAT.
    Float(f32),
}

fn attribute(name: &str, value: A) -> AttributeProto {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ..AttributeProto::default()
    };
    let kind = match value {
        A::Int(i) => {
            a.i = Some(i);
            AttributeType::Int
        }
        A::Ints(v) => {
            a.ints = v;
            AttributeType::Ints
        }
        A::Float(f) => {
            a.f = Some(f);
            AttributeType::Float
        }
    };
    a.set_type(kind);
    a
}

/// Adds nodes and constants on behalf of one recurrent node.
pub(super) struct Emitter<'a> {
    pub(super) imp: &'a mut Importer,
    /// The recurrent node's label (its name, or `#index`).
    label: String,
    /// Its position in the file (for the importer's messages).
    index: usize,
    /// Prefix of the names made now (direction and step), e.g. `d0.t3`.
    pub(super) scope: String,
    /// The element type of X (constants are made in it).
    pub(super) dtype: DType,
    /// Index and scalar constants made so far, by value, shared by every step.
    cache: HashMap<ConstKey, String>,
    /// While a body is being built: its nodes, in order.
    body: Option<Vec<NodeProto>>,
    /// Names defined by body nodes so far (not in the importer until the body is imported).
    body_names: HashSet<String>,
}

/// A constant that is made once and reused: i64 indices (scalar or 1-d), or a scalar of X's
/// dtype (by its bits).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ConstKey {
    Index(usize),
    Range(usize, usize),
    Scalar(u64),
    Shape(Vec<usize>),
    Zeros(Vec<usize>),
}

impl<'a> Emitter<'a> {
    /// An emitter for node `label` (file position `index`) computing in `dtype`.
    pub(super) fn new(imp: &'a mut Importer, label: &str, index: usize, dtype: DType) -> Self {
        Emitter {
            imp,
            label: label.to_string(),
            index,
            scope: String::new(),
            dtype,
            cache: HashMap::new(),
            body: None,
            body_names: HashSet::new(),
        }
    }

    /// A value name not defined yet and not read by any node of the file.
    fn fresh(&self, what: &str) -> String {
        let base = if self.scope.is_empty() {
            format!("{}/{what}", self.label)
        } else {
            format!("{}/{}.{what}", self.label, self.scope)
        };
        let taken = |n: &str| {
            self.imp.by_name.contains_key(n)
                || self.imp.read_names.contains(n)
                || self.body_names.contains(n)
        };
        if !taken(&base) {
            return base;
        }
        (1usize..)
            .map(|k| format!("{base}_{k}"))
            .find(|n| !taken(n))
            .unwrap_or(base)
    }

    /// Imports `out = op(inputs) {attrs}`; `out` is a fresh name derived from `what` unless
    /// `name` gives it (a declared output of the recurrent node). Returns the output's name.
    pub(super) fn node(
        &mut self,
        op: &str,
        what: &str,
        inputs: &[&str],
        attrs: Vec<(&str, A)>,
        name: Option<&str>,
    ) -> Result<String> {
        let out = match name {
            Some(n) => n.to_string(),
            None => self.fresh(what),
        };
        let proto = NodeProto {
            name: Some(out.clone()),
            op_type: Some(op.to_string()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            attribute: attrs.into_iter().map(|(k, v)| attribute(k, v)).collect(),
            ..NodeProto::default()
        };
        match &mut self.body {
            Some(body) => {
                body.push(proto);
                self.body_names.insert(out.clone());
            }
            None => self.imp.import_node(&proto, self.index, None)?,
        }
        Ok(out)
    }

    /// Starts collecting the nodes of a loop body.
    pub(super) fn begin_body(&mut self) {
        self.body = Some(Vec::new());
    }

    /// A fresh name for an input of the body being built.
    pub(super) fn body_input(&mut self, what: &str) -> String {
        let name = self.fresh(what);
        self.body_names.insert(name.clone());
        name
    }

    /// The body collected since [`Emitter::begin_body`], with these inputs and outputs (their
    /// types come from the loop's operands when it is imported).
    pub(super) fn end_body(&mut self, inputs: &[String], outputs: &[String]) -> GraphProto {
        let info = |n: &String| ValueInfoProto {
            name: Some(n.clone()),
            ..ValueInfoProto::default()
        };
        GraphProto {
            name: Some(format!("{}/{}", self.label, self.scope)),
            node: self.body.take().unwrap_or_default(),
            input: inputs.iter().map(info).collect(),
            output: outputs.iter().map(info).collect(),
            ..GraphProto::default()
        }
    }

    /// Imports `Scan(inputs)` over `body`: the first `inputs.len() - 1` inputs are carried,
    /// the last is scanned along `axis` (backwards when `reverse`), and the body's last output
    /// is stacked along the same axis in time order. Returns the output names: the carried
    /// values' final values, then the stacked output.
    pub(super) fn scan(
        &mut self,
        inputs: &[&str],
        scanned: usize,
        axis: usize,
        reverse: bool,
        body: GraphProto,
    ) -> Result<Vec<String>> {
        let carried = inputs.len().saturating_sub(scanned);
        let mut outputs: Vec<String> = (0..carried)
            .map(|k| self.fresh(&format!("last{k}")))
            .collect();
        outputs.push(self.fresh("seq"));
        let ints = |name: &str, v: Vec<i64>| attribute(name, A::Ints(v));
        let mut graph = AttributeProto {
            name: Some("body".into()),
            g: Some(body),
            ..AttributeProto::default()
        };
        graph.set_type(AttributeType::Graph);
        let dir = i64::from(reverse);
        let proto = NodeProto {
            name: Some(self.fresh("scan")),
            op_type: Some("Scan".into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.clone(),
            attribute: vec![
                graph,
                attribute("num_scan_inputs", A::Int(scanned as i64)),
                ints("scan_input_axes", vec![axis as i64; scanned]),
                ints("scan_input_directions", vec![dir; scanned]),
                ints("scan_output_axes", vec![axis as i64]),
                ints("scan_output_directions", vec![dir]),
            ],
            ..NodeProto::default()
        };
        let label = proto.name().to_string();
        crate::import::control::import_recurrence(self.imp, &proto, &label)?;
        Ok(outputs)
    }

    /// Zeros of X's dtype in `shape` (an absent initial state).
    pub(super) fn zeros(&mut self, shape: &[usize]) -> Result<String> {
        let dtype = self.dtype;
        let n: usize = shape.iter().product();
        self.cached(ConstKey::Zeros(shape.to_vec()), "zeros", || {
            Tensor::from_f64(dtype, shape.to_vec(), &vec![0.0; n])
        })
    }

    /// Defines a constant value and returns its name.
    fn constant(&mut self, what: &str, t: Tensor) -> Result<String> {
        let name = self.fresh(what);
        let by = format!("the expansion of node '{}'", self.label);
        self.imp.define(&name, by, t.ty(), ValueKind::Constant(t))?;
        Ok(name)
    }

    /// The constant `key`, made by `make` the first time (unscoped, shared by all steps).
    fn cached(
        &mut self,
        key: ConstKey,
        what: &str,
        make: impl FnOnce() -> Tensor,
    ) -> Result<String> {
        if let Some(name) = self.cache.get(&key) {
            return Ok(name.clone());
        }
        let scope = std::mem::take(&mut self.scope);
        let name = self.constant(what, make());
        self.scope = scope;
        let name = name?;
        self.cache.insert(key, name.clone());
        Ok(name)
    }

    /// A scalar constant of X's dtype.
    pub(super) fn scalar(&mut self, v: f64) -> Result<String> {
        let dtype = self.dtype;
        self.cached(ConstKey::Scalar(v.to_bits()), &format!("const{v}"), || {
            Tensor::from_f64(dtype, vec![], &[v])
        })
    }

    /// `x[index]` along `axis` (the axis is removed).
    pub(super) fn pick(
        &mut self,
        what: &str,
        x: &str,
        index: usize,
        axis: usize,
    ) -> Result<String> {
        let idx = self.cached(ConstKey::Index(index), &format!("index{index}"), || {
            Tensor::i64(vec![], &[index as i64])
        })?;
        self.node(
            "Gather",
            what,
            &[x, &idx],
            vec![("axis", A::Int(axis as i64))],
            None,
        )
    }

    /// `x[start..start + len]` along `axis`.
    pub(super) fn range(
        &mut self,
        what: &str,
        x: &str,
        start: usize,
        len: usize,
        axis: usize,
    ) -> Result<String> {
        let idx = self.cached(
            ConstKey::Range(start, len),
            &format!("range{start}+{len}"),
            || {
                let ids: Vec<i64> = (start..start + len).map(|i| i as i64).collect();
                Tensor::i64(vec![len], &ids)
            },
        )?;
        self.node(
            "Gather",
            what,
            &[x, &idx],
            vec![("axis", A::Int(axis as i64))],
            None,
        )
    }

    /// A two-input node.
    pub(super) fn bin(&mut self, op: &str, what: &str, a: &str, b: &str) -> Result<String> {
        self.node(op, what, &[a, b], vec![], None)
    }

    /// `a + b` where `b` may be absent (then `a`).
    pub(super) fn add_opt(&mut self, what: &str, a: &str, b: Option<&str>) -> Result<String> {
        match b {
            Some(b) => self.bin("Add", what, a, b),
            None => Ok(a.to_string()),
        }
    }

    /// The transpose of a 2-d value.
    pub(super) fn transpose(&mut self, what: &str, x: &str) -> Result<String> {
        self.node(
            "Transpose",
            what,
            &[x],
            vec![("perm", A::Ints(vec![1, 0]))],
            None,
        )
    }

    /// `x` reshaped to `shape`.
    pub(super) fn reshape(&mut self, what: &str, x: &str, shape: &[usize]) -> Result<String> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let s = self.cached(ConstKey::Shape(shape.to_vec()), "shape", || {
            Tensor::i64(vec![dims.len()], &dims)
        })?;
        self.node("Reshape", what, &[x, &s], vec![], None)
    }

    /// Concatenation of `parts` along `axis`, named `name` when given (a single part is copied
    /// by an Identity when it must take a name, else returned as is).
    pub(super) fn concat(
        &mut self,
        what: &str,
        parts: &[String],
        axis: usize,
        name: Option<&str>,
    ) -> Result<String> {
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        match (refs.as_slice(), name) {
            ([one], None) => Ok(one.to_string()),
            ([one], Some(_)) => self.node("Identity", what, &[one], vec![], name),
            _ => self.node(
                "Concat",
                what,
                &refs,
                vec![("axis", A::Int(axis as i64))],
                name,
            ),
        }
    }

    /// `Clip(x, -threshold, threshold)` in the form the model's opset takes.
    pub(super) fn clip(&mut self, what: &str, x: &str, threshold: f32) -> Result<String> {
        if self.imp.graph.opset < 11 {
            let attrs = vec![("min", A::Float(-threshold)), ("max", A::Float(threshold))];
            return self.node("Clip", what, &[x], attrs, None);
        }
        let lo = self.scalar(-f64::from(threshold))?;
        let hi = self.scalar(f64::from(threshold))?;
        self.node("Clip", what, &[x, &lo, &hi], vec![], None)
    }
}
