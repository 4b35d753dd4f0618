//! ONNX → [`Graph`]: decode the protobuf, read initializers (memory-mapped where possible),
//! bind input shapes, order the nodes, convert each node to an [`Op`], infer its output types,
//! and fold it when its result is known at compile time.
//!
//! Folding happens *during* import, node by node in topological order, because shapes
//! downstream depend on it (`Shape → Gather → Concat → Reshape`): a node is folded when every
//! data input is a constant, or when its op is computable from input types alone (Shape).
//! Folded nodes do not appear in the graph; their outputs are constant values.

mod affine;
pub mod builder;
pub mod control;
pub mod expand;
pub mod inputs;
mod order;
pub mod rnn;
pub mod scope;
pub mod tensor_proto;
pub mod text;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use arenac_proto::{GraphProto, Message, ModelProto, NodeProto};
use bytes::Bytes;

use crate::error::{Error, OpError, Result};
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::ctx::{CtxInput, NodeCtx};
use crate::ops::{self, MAX_OPSET, MIN_OPSET, Op};
use inputs::{DeclaredInput, bind_inputs, declared_inputs};
use order::{constant_node_value, node_label, topological_order, upstream_inputs};
use tensor_proto::{ExternalData, map_file, tensor_from_proto};

/// Options for [`import_model`].
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// User-given shapes: `(input name or symbolic dim, dims)`.
    pub shapes: Vec<(String, Vec<usize>)>,
    /// Most bytes of constants folding may produce in one import, all nodes together
    /// (default [`MAX_FOLD_BYTES`]). The reference evaluation briefly needs up to about three
    /// times a node's output (it computes in f64), so this also bounds import-time memory.
    pub max_fold_bytes: usize,
    /// Values of graph inputs known at compile time (e.g. `arenac run --input`). Their shapes
    /// bind the inputs' shapes like [`ImportOptions::shapes`] (unless a shape is given there).
    /// An input whose *value* decides a shape (a Reshape target, Slice bounds, Expand/Tile
    /// sizes, Pad amounts, Resize scales, TopK's k, Squeeze axes...) is frozen: it becomes a
    /// constant, is listed in [`Imported::frozen`] with the node that needed it, and is no
    /// longer a graph input; the graph is then right for that value only. The other given
    /// inputs stay inputs, including those feeding operands that decide no shape (Clip's
    /// bounds, Pad's constant_value, Trilu's k: read at run time).
    pub values: HashMap<String, Tensor>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            shapes: Vec::new(),
            max_fold_bytes: MAX_FOLD_BYTES,
            values: HashMap::new(),
        }
    }
}

/// Default cap on the constants folding may produce in one import (2 GiB, all nodes
/// together): beyond it a model is an error instead of an allocation that could abort the
/// process. VGG-19's ConstantOfShape weights, the largest folded set seen, are 548 MiB.
pub const MAX_FOLD_BYTES: usize = 2 << 30;

/// The result of an import.
#[derive(Debug)]
pub struct Imported {
    /// The typed, folded graph.
    pub graph: Graph,
    /// Things the user should know (dims defaulted to 1...).
    pub warnings: Vec<String>,
    /// Graph inputs frozen into constants because their values decide shapes (from
    /// [`ImportOptions::values`]), with their types and why, in the order they were frozen.
    /// The graph is then right only for those values.
    pub frozen: Vec<FrozenInput>,
}

/// A graph input compiled in as a constant ([`ImportOptions::values`]) and why: a node's
/// converter needed the value of an operand computed from it at compile time. The compiled
/// program is specific to the value given.
#[derive(Clone, Debug, PartialEq)]
pub struct FrozenInput {
    /// The graph input.
    pub name: String,
    /// Its type.
    pub ty: TensorType,
    /// The node that needed the value (its name, or `#index`).
    pub node: String,
    /// That node's op type.
    pub op: String,
    /// The operand's position among the node's inputs.
    pub input: usize,
    /// The operand's value name (the input itself, or a value computed from it).
    pub operand: String,
    /// Why the value was needed: the operand decides an output shape or the kernel's
    /// structure ([`OpError::NotConstant`]), or the output's shape depends on the values
    /// ([`OpError::DataDependent`]: NonZero, Unique, Compress...).
    pub data_dependent: bool,
}

impl FrozenInput {
    /// One line: which node needed which operand, and why.
    pub fn reason(&self) -> String {
        let via = if self.operand == self.name {
            String::new()
        } else {
            format!(", computed from '{}'", self.name)
        };
        let why = if self.data_dependent {
            "the output's shape depends on its values"
        } else {
            "it decides a shape (or the kernel's structure)"
        };
        format!(
            "node '{}' ({}) needs input {} ('{}'{via}) at compile time: {why}",
            self.node, self.op, self.input, self.operand
        )
    }
}

/// Reads and decodes a `.onnx` file. The file is memory-mapped and decoded zero-copy: tensor
/// `raw_data` fields point into the map.
pub fn load_model_file(path: &Path) -> Result<ModelProto> {
    let bytes = map_file(path)?;
    decode_model(bytes)
}

/// Decodes ONNX protobuf bytes.
pub fn decode_model(bytes: Bytes) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(Error::Decode {
            reason: "the file is empty".into(),
        });
    }
    ModelProto::decode(bytes).map_err(|e| Error::Decode {
        reason: e.to_string(),
    })
}

/// Loads and imports a `.onnx` file; external data resolves against its folder.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Imported> {
    let model = load_model_file(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    import_model(&model, Some(dir), opts)
}

/// The lowest default-domain opset a model may import: each op's converter then decides
/// ([`ops::OpDef::since`]); most start at [`MIN_OPSET`], whose earlier versions differ (e.g.
/// Add's `broadcast` attribute before 7), a few (Not) are unchanged since opset 1.
pub const LOWEST_MODEL_OPSET: i64 = 1;

/// The model's default-domain opset, checked against the supported range.
pub fn default_opset(model: &ModelProto) -> Result<i64> {
    let version = model
        .opset_import
        .iter()
        .find(|o| o.domain().is_empty() || o.domain() == "ai.onnx")
        .map(|o| o.version())
        .ok_or_else(|| Error::InvalidModel("no opset_import for the default ONNX domain".into()))?;
    if !(LOWEST_MODEL_OPSET..=MAX_OPSET).contains(&version) {
        return Err(Error::UnsupportedOpset {
            domain: String::new(),
            version,
            supported: format!(
                "{LOWEST_MODEL_OPSET} to {MAX_OPSET}, per op; most ops from {MIN_OPSET}"
            ),
        });
    }
    Ok(version)
}

/// Imports a decoded model. `dir` is the model's folder, for external data (`None` forbids it).
///
/// When a converter needs an input as a constant ([`OpError::NotConstant`]) and that input is a
/// graph input with a value in [`ImportOptions::values`], the input is frozen and the import
/// starts over with it as a constant (so nodes before the one that needed it fold too); once per
/// frozen input. [`Imported::frozen`] records each with the node, op and operand that needed
/// it.
///
/// Last, [`crate::analysis::widen::widen_floats`] rewrites nodes that have an f32 kernel but
/// none for their f16/bf16/f64 data into Cast → f32 op → Cast.
pub fn import_model(
    model: &ModelProto,
    dir: Option<&Path>,
    opts: &ImportOptions,
) -> Result<Imported> {
    let opset = default_opset(model)?;
    let gp = model
        .graph
        .as_ref()
        .ok_or_else(|| Error::InvalidModel("the model has no graph".into()))?;
    let declared: Vec<DeclaredInput> = declared_inputs(gp)?;
    // Given values bind their inputs' shapes unless the user gave a shape for that input (a
    // name that is no graph input is an error there).
    let mut shapes = opts.shapes.clone();
    let mut value_names: Vec<&String> = opts.values.keys().collect();
    value_names.sort();
    for name in value_names {
        if !shapes.iter().any(|(n, _)| n == name) {
            shapes.push((name.clone(), opts.values[name].shape().to_vec()));
        }
    }
    let mut frozen: Vec<(String, Tensor)> = Vec::new();
    let mut reasons: Vec<FrozenInput> = Vec::new();
    loop {
        let mut external = dir.map(ExternalData::new);
        let mut importer = Importer::new(gp, opset);
        importer.max_fold_bytes = opts.max_fold_bytes;
        importer.domain_opsets = model
            .opset_import
            .iter()
            .map(|o| (o.domain().to_string(), o.version()))
            .collect();
        match importer.run(gp, external.as_mut(), &declared, &shapes, &frozen) {
            Err(
                e @ Error::Node {
                    source: OpError::NotConstant { .. } | OpError::DataDependent { .. },
                    ..
                },
            ) => {
                let Error::Node {
                    node,
                    op,
                    source:
                        source @ (OpError::NotConstant { input, name }
                        | OpError::DataDependent { input, name }),
                } = &e
                else {
                    return Err(e);
                };
                // Freeze the given graph inputs the value is computed from (itself, when it
                // is one); without any new one to freeze, the error stands.
                let mut fresh: Vec<String> = upstream_inputs(gp, name)
                    .into_iter()
                    .filter(|n| declared.iter().any(|d| d.name == *n))
                    .filter(|n| !frozen.iter().any(|(f, _)| f == n))
                    .filter(|n| opts.values.contains_key(n))
                    .collect();
                if fresh.is_empty() {
                    return Err(e);
                }
                fresh.sort();
                for input_name in fresh {
                    let value = opts.values[&input_name].clone();
                    reasons.push(FrozenInput {
                        name: input_name.clone(),
                        ty: value.ty(),
                        node: node.clone(),
                        op: op.clone(),
                        input: *input,
                        operand: name.clone(),
                        data_dependent: matches!(source, OpError::DataDependent { .. }),
                    });
                    frozen.push((input_name, value));
                }
            }
            Ok(mut imported) => {
                imported.frozen = reasons;
                unrunnable_warnings(&imported.graph, &mut imported.warnings);
                // Nodes with an f32 kernel only, on f16/bf16/f64 data: computed in f32.
                crate::analysis::widen::widen_floats(&mut imported.graph);
                return Ok(imported);
            }
            Err(e) => return Err(e),
        }
    }
}

/// One warning per run-time `If` branch (at any depth) that cannot run with these shapes
/// ([`crate::ops::control::Unrunnable`]).
fn unrunnable_warnings(g: &Graph, out: &mut Vec<String>) {
    for (_, n) in g.nodes() {
        if let Op::If(a) = &n.op
            && let Some(u) = &a.unrunnable
        {
            out.push(format!(
                "node '{}' (If): its {} cannot run with these shapes, so a run whose condition \
                 takes it fails ({})",
                n.name,
                u.which(),
                u.reason
            ));
        }
        for (_, sub) in n.op.subgraphs() {
            unrunnable_warnings(sub, out);
        }
    }
}

struct Importer {
    graph: Graph,
    by_name: HashMap<String, ValueId>,
    /// Who defined each name, for duplicate-definition messages.
    definer: HashMap<String, String>,
    /// Every name some node reads or the graph outputs.
    read_names: BTreeSet<String>,
    /// The model's opset per domain, for messages about foreign-domain ops.
    domain_opsets: HashMap<String, i64>,
    /// Bytes of constants produced by folding so far, and the cap.
    folded_bytes: usize,
    max_fold_bytes: usize,
    /// Prefix of the labels of unnamed nodes (empty in the main graph; `<node>/then` and the
    /// like while importing a subgraph's nodes).
    prefix: String,
    /// Int64 values known as a run-time base plus constants (for slices moving at run time
    /// by a static length: [`affine`]).
    affine: HashMap<ValueId, affine::Affine>,
    /// While the nodes of an expansion are imported: the opset they are read at (the model's,
    /// or [`expand::EXPANSION_OPSET`] when that is higher: expansions are written against it).
    node_opset: Option<i64>,
}

impl Importer {
    fn new(gp: &GraphProto, opset: i64) -> Importer {
        Importer {
            graph: Graph::new(gp.name(), opset),
            by_name: HashMap::new(),
            definer: HashMap::new(),
            read_names: scope::read_names(gp),
            domain_opsets: HashMap::new(),
            folded_bytes: 0,
            max_fold_bytes: MAX_FOLD_BYTES,
            prefix: String::new(),
            affine: HashMap::new(),
            node_opset: None,
        }
    }

    fn define(
        &mut self,
        name: &str,
        by: String,
        ty: TensorType,
        kind: ValueKind,
    ) -> Result<ValueId> {
        if let Some(first) = self.definer.get(name) {
            return Err(Error::DuplicateValue {
                name: name.to_string(),
                first: first.clone(),
                second: by,
            });
        }
        let id = self.graph.add_value(name, ty, kind);
        self.by_name.insert(name.to_string(), id);
        self.definer.insert(name.to_string(), by);
        Ok(id)
    }

    fn run(
        mut self,
        gp: &GraphProto,
        mut external: Option<&mut ExternalData>,
        declared: &[DeclaredInput],
        shapes: &[(String, Vec<usize>)],
        frozen: &[(String, Tensor)],
    ) -> Result<Imported> {
        // Graph inputs (those without initializers; older files list initializers as inputs).
        let (types, warnings) = bind_inputs(declared, shapes)?;
        for (decl, ty) in declared.iter().zip(types) {
            if let Some((_, value)) = frozen.iter().find(|(n, _)| *n == decl.name) {
                if value.ty() != ty {
                    return Err(Error::InputType {
                        input: decl.name.clone(),
                        reason: format!(
                            "its value is frozen into a constant (it decides a shape), but the \
                             value given is {} where the input is {ty}",
                            value.ty()
                        ),
                    });
                }
                let kind = ValueKind::Constant(value.clone());
                self.define(&decl.name, "a frozen graph input".into(), ty, kind)?;
                continue;
            }
            let id = self.define(&decl.name, "a graph input".into(), ty, ValueKind::Input)?;
            self.graph.inputs.push(id);
        }
        for t in &gp.initializer {
            let tensor = tensor_from_proto(t, external.as_deref_mut())?;
            self.define(
                t.name(),
                "an initializer".into(),
                tensor.ty(),
                ValueKind::Constant(tensor),
            )?;
        }

        for i in topological_order(gp, &self.by_name, "")? {
            let node = &gp.node[i];
            self.import_node(node, i, external.as_deref_mut())?;
        }

        for out in &gp.output {
            let id = *self
                .by_name
                .get(out.name())
                .ok_or_else(|| Error::MissingOutput(out.name().to_string()))?;
            let id = self.output_value(out.name(), id);
            self.graph.outputs.push(id);
        }
        // The caller (`import_model`) knows why each was frozen and fills `frozen` in.
        Ok(Imported {
            graph: self.graph,
            warnings,
            frozen: Vec::new(),
        })
    }

    /// The value graph output `name` reads from the arena, given the value `id` the name
    /// resolves to. A graph output that folded to a constant (a Shape, a Constant, a
    /// ConstantOfShape...) still needs bytes in the arena, where outputs are read: an identity
    /// `Expand` node copies it from the weights into an arena value named `name` (the constant
    /// renamed when it had that name). A value known under another name (an output of an `If`
    /// whose taken branch was inlined is the branch's value) gets an `Identity` view named
    /// `name`. Other values are returned unchanged.
    fn output_value(&mut self, name: &str, id: ValueId) -> ValueId {
        let val = self.graph.value(id);
        let ty = val.ty.clone();
        let is_constant = matches!(val.kind, ValueKind::Constant(_));
        if !is_constant && val.name == name {
            return id;
        }
        if is_constant && val.name == name {
            let mut fresh = format!("{name}.constant");
            while self.by_name.contains_key(&fresh) {
                fresh.push('_');
            }
            self.graph.rename_value(id, fresh.clone());
            self.by_name.insert(fresh, id);
        }
        let op = if is_constant {
            Op::Expand {
                shape: ty.shape.clone(),
            }
        } else {
            Op::Identity
        };
        let node =
            self.graph
                .add_node(format!("{name}.copy"), op, &[id], &[(name.to_string(), ty)]);
        let out = self.graph.node(node).outputs[0];
        self.by_name.insert(name.to_string(), out);
        out
    }

    fn import_node(
        &mut self,
        node: &NodeProto,
        index: usize,
        external: Option<&mut ExternalData>,
    ) -> Result<()> {
        let label = node_label(node, index, &self.prefix);
        let op_type = node.op_type().to_string();
        let node_err = |source: OpError| Error::Node {
            node: label.clone(),
            op: op_type.clone(),
            source,
        };
        let domain = node.domain();
        if !(domain.is_empty() || domain == "ai.onnx") {
            return Err(Error::UnsupportedOp {
                op: op_type.clone(),
                domain: domain.to_string(),
                opset: self.domain_opsets.get(domain).copied().unwrap_or(0),
                node: label,
            });
        }
        if expand::expanded_since(&op_type).is_some() {
            return self.import_expanded(node, index, &label);
        }
        if op_type == "Constant" {
            let tensor = constant_node_value(node, external).map_err(node_err)?;
            let name = node.output.first().map(String::as_str).unwrap_or_default();
            self.define(
                name,
                format!("node '{label}'"),
                tensor.ty(),
                ValueKind::Constant(tensor),
            )?;
            return Ok(());
        }
        if rnn::is_recurrent(&op_type) {
            return rnn::expand(self, node, index, &label);
        }
        if control::is_control(&op_type) {
            return control::import(self, node, &label, external);
        }
        let opset = self.node_opset.unwrap_or(self.graph.opset);
        let def = ops::lookup(&op_type, opset).ok_or_else(|| {
            // An op arenac knows at other opsets: the model's opset is what is unsupported.
            let ranges: Vec<String> = ops::registry()
                .filter(|d| d.op_type == op_type)
                .map(|d| format!("{} to {}", d.since, d.until))
                .collect();
            if ranges.is_empty() {
                Error::UnsupportedOp {
                    op: op_type.clone(),
                    domain: domain.to_string(),
                    opset,
                    node: label.clone(),
                }
            } else {
                Error::UnsupportedOpset {
                    domain: domain.to_string(),
                    version: opset,
                    supported: format!(
                        "{} for {op_type}, needed by node '{label}'",
                        ranges.join(", ")
                    ),
                }
            }
        })?;

        let mut ctx_inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                ctx_inputs.push(CtxInput {
                    name: String::new(),
                    ty: None,
                    value: None,
                });
                continue;
            }
            // topological_order already checked every name is defined.
            let id = *self.by_name.get(name).ok_or_else(|| Error::MissingValue {
                node: label.clone(),
                op: op_type.clone(),
                value: name.clone(),
            })?;
            let v = self.graph.value(id);
            ctx_inputs.push(CtxInput {
                name: name.clone(),
                ty: Some(v.ty.clone()),
                value: match &v.kind {
                    ValueKind::Constant(t) => Some(t.clone()),
                    _ => None,
                },
            });
        }
        let mut ctx = NodeCtx::new(node, opset, ctx_inputs);
        let op: Op = match (def.convert)(&mut ctx) {
            Ok(op) => op,
            // Bounds moving at run time by a static length (`x[i : i + 1]` in a loop body).
            Err(e @ OpError::NotConstant { .. }) if op_type == "Slice" && opset >= 10 => {
                if affine::import_moving_slice(self, node, &label)? {
                    return Ok(());
                }
                return Err(node_err(e));
            }
            // `Range(i, i + k, s)` with `i` known at run time only (a loop's counter).
            Err(e @ OpError::NotConstant { .. }) if op_type == "Range" => {
                if affine::import_moving_range(self, node, &label)? {
                    return Ok(());
                }
                return Err(node_err(e));
            }
            Err(e) => return Err(node_err(e)),
        };
        // Dropout's mask declared but read by nothing: the plain view (no copy, no mask).
        let op = match op {
            Op::Sample(ops::SampleOp::Dropout(a))
                if a.mask
                    && !a.check
                    && !a.ratio
                    && !node
                        .output
                        .get(1)
                        .is_some_and(|n| self.read_names.contains(n.as_str())) =>
            {
                Op::Identity
            }
            op => op,
        };
        let data_ids: Vec<ValueId> = ctx
            .data_inputs()
            .into_iter()
            .filter_map(|i| self.by_name.get(&node.input[i]).copied())
            .collect();
        let in_types: Vec<TensorType> = data_ids
            .iter()
            .map(|&v| self.graph.value(v).ty.clone())
            .collect();
        let out_types = op.infer(&in_types).map_err(node_err)?;
        // Constant indices out of range are errors now, not clamped reads at run time.
        let values: Vec<Option<&Tensor>> = data_ids
            .iter()
            .map(|&v| match &self.graph.value(v).kind {
                ValueKind::Constant(t) => Some(t),
                _ => None,
            })
            .collect();
        ops::movement::check_constant_indices(&op, &in_types, &values).map_err(node_err)?;
        let mut out_bytes = 0usize;
        for t in &out_types {
            out_bytes = t
                .bytes()
                .and_then(|b| b.checked_add(out_bytes))
                .ok_or_else(|| node_err(OpError::Overflow(format!("output {t} is too large"))))?;
        }

        // Outputs the file declares, by position (empty names are omitted optional outputs).
        let mut declared: Vec<(usize, &str)> = Vec::new();
        for (k, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            if k >= out_types.len() {
                if self.read_names.contains(name.as_str()) {
                    return Err(node_err(OpError::Unsupported(format!(
                        "output {k} ('{name}') is used, but arenac produces only {} output(s) \
                         for this op (inference only)",
                        out_types.len()
                    ))));
                }
                // Declared but never read (e.g. Dropout's mask at inference): dropped.
                continue;
            }
            declared.push((k, name));
        }

        let consts: Option<Vec<&Tensor>> = data_ids
            .iter()
            .map(|&v| match &self.graph.value(v).kind {
                ValueKind::Constant(t) => Some(t),
                _ => None,
            })
            .collect();
        let folded = match (op.fold_from_types(&in_types), consts) {
            (Some(values), _) => Some(values),
            (None, Some(_))
                if self.folded_bytes.saturating_add(out_bytes) > self.max_fold_bytes =>
            {
                return Err(node_err(OpError::Overflow(format!(
                    "folding this node would bring the constants computed at compile time to \
                     {} bytes (limit {})",
                    self.folded_bytes.saturating_add(out_bytes),
                    self.max_fold_bytes
                ))));
            }
            (None, Some(consts)) => {
                self.folded_bytes += out_bytes;
                Some(op.eval(&consts).map_err(node_err)?)
            }
            (None, None) => None,
        };
        let by = format!("node '{label}'");
        match folded {
            Some(values) => {
                for (k, name) in declared {
                    let t = values.get(k).cloned().ok_or_else(|| {
                        node_err(OpError::Unsupported(format!(
                            "evaluation produced no output {k}"
                        )))
                    })?;
                    if t.ty() != out_types[k] {
                        return Err(node_err(OpError::Unsupported(format!(
                            "evaluation gave {} but inference said {} (an arenac bug)",
                            t.ty(),
                            out_types[k]
                        ))));
                    }
                    self.define(name, by.clone(), t.ty(), ValueKind::Constant(t))?;
                }
            }
            None => {
                for &(_, name) in &declared {
                    if let Some(first) = self.definer.get(name) {
                        return Err(Error::DuplicateValue {
                            name: name.to_string(),
                            first: first.clone(),
                            second: by,
                        });
                    }
                }
                // Every op output becomes a value; undeclared optional ones get a synthetic name.
                let outputs: Vec<(String, TensorType)> = out_types
                    .iter()
                    .enumerate()
                    .map(|(k, t)| {
                        let name = declared
                            .iter()
                            .find(|(j, _)| *j == k)
                            .map_or_else(|| format!("{label}:unused{k}"), |(_, n)| n.to_string());
                        (name, t.clone())
                    })
                    .collect();
                let moving = affine::derive(&self.graph, &self.affine, &op, &data_ids);
                let nid = self.graph.add_node(label.clone(), op, &data_ids, &outputs);
                let out_ids = self.graph.node(nid).outputs.clone();
                if let (Some(a), Some(&out)) = (moving, out_ids.first()) {
                    self.affine.insert(out, a);
                }
                for (k, name) in declared {
                    self.by_name.insert(name.to_string(), out_ids[k]);
                    self.definer.insert(name.to_string(), by.clone());
                }
            }
        }
        Ok(())
    }
}
