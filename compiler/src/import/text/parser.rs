//! The grammar of the text parser: model, graph, types, tensors, nodes and attributes.

use super::*;

impl<'a> Parser<'a> {
    // ---------------------------------------------------------------- model and graph

    pub(super) fn model(&mut self) -> PResult<ModelProto> {
        let mut model = ModelProto::default();
        if self.matches(b'<') {
            loop {
                let key_at = {
                    self.skip_ws();
                    self.pos
                };
                let key = self.ident("a model property (ir_version, opset_import...)")?;
                self.expect(b':', &format!("after '{key}'"))?;
                match key {
                    "ir_version" => model.ir_version = Some(self.int("for ir_version")?),
                    "opset_import" => model.opset_import = self.opset_list()?,
                    "producer_name" => {
                        model.producer_name = Some(self.string("for producer_name")?);
                    }
                    "producer_version" => {
                        model.producer_version = Some(self.string("for producer_version")?);
                    }
                    "domain" => model.domain = Some(self.string("for domain")?),
                    "model_version" => model.model_version = Some(self.int("for model_version")?),
                    "doc_string" => model.doc_string = Some(self.string("for doc_string")?),
                    "metadata_props" => {
                        self.expect(b'[', "to open metadata_props")?;
                        if !self.matches(b']') {
                            model.metadata_props = self.string_pairs()?;
                            self.expect(b']', "to close metadata_props")?;
                        }
                    }
                    other => {
                        return Err(
                            self.err_at(key_at, format!("unknown model property '{other}'"))
                        );
                    }
                }
                if !self.matches(b',') {
                    break;
                }
            }
            self.expect(b'>', "to close the model properties")?;
        }
        model.graph = Some(self.graph()?);
        self.skip_ws();
        if !self.at_end() {
            return Err(self.err(
                "expected the end of the model (functions after the main graph are not supported)",
            ));
        }
        Ok(model)
    }

    pub(super) fn opset_list(&mut self) -> PResult<Vec<OperatorSetIdProto>> {
        self.expect(b'[', "to open opset_import")?;
        let mut out = Vec::new();
        if self.matches(b']') {
            return Ok(out);
        }
        loop {
            let domain = self.string("naming an opset domain")?;
            self.expect(b':', "between opset domain and version")?;
            let version = self.int("for the opset version")?;
            out.push(OperatorSetIdProto {
                domain: Some(domain),
                version: Some(version),
            });
            if !self.matches(b',') {
                break;
            }
        }
        self.expect(b']', "to close opset_import")?;
        Ok(out)
    }

    pub(super) fn string_pairs(&mut self) -> PResult<Vec<StringStringEntryProto>> {
        let mut out = Vec::new();
        loop {
            let key = self.string("as key")?;
            self.expect(b':', "between key and value")?;
            let value = self.string("as value")?;
            out.push(StringStringEntryProto {
                key: Some(key),
                value: Some(value),
            });
            if !self.matches(b',') {
                return Ok(out);
            }
        }
    }

    pub(super) fn graph(&mut self) -> PResult<GraphProto> {
        let name = self.quotable_id("a graph name")?;
        let mut g = GraphProto {
            name: Some(name),
            ..Default::default()
        };
        self.expect(b'(', "to open the graph inputs")?;
        if !self.matches(b')') {
            loop {
                let vi = self.value_info()?;
                if self.matches(b'=') {
                    let t = self.tensor_data(vi.name().to_string(), vi.r#type.as_ref())?;
                    g.initializer.push(t);
                }
                g.input.push(vi);
                if !self.matches(b',') {
                    break;
                }
            }
            self.expect(b')', "to close the graph inputs")?;
        }
        self.expect(b'=', "('=>') between graph inputs and outputs")?;
        if self.cur() != b'>' {
            return Err(self.err_at(self.pos, "expected '=>' between graph inputs and outputs"));
        }
        self.pos += 1;
        self.expect(b'(', "to open the graph outputs")?;
        if !self.matches(b')') {
            loop {
                g.output.push(self.value_info()?);
                if !self.matches(b',') {
                    break;
                }
            }
            self.expect(b')', "to close the graph outputs")?;
        }
        if self.matches(b'<') && !self.matches(b'>') {
            loop {
                let vi = self.value_info()?;
                if self.matches(b'=') {
                    let t = self.tensor_data(vi.name().to_string(), vi.r#type.as_ref())?;
                    g.initializer.push(t);
                } else {
                    g.value_info.push(vi);
                }
                if !self.matches(b',') {
                    break;
                }
            }
            self.expect(b'>', "to close the initializer list")?;
        }
        self.expect(b'{', "to open the graph's node list")?;
        while !self.matches(b'}') {
            if self.at_end() {
                return Err(self.err("expected '}' to close the node list"));
            }
            g.node.push(self.node()?);
        }
        Ok(g)
    }

    pub(super) fn value_info(&mut self) -> PResult<ValueInfoProto> {
        let ty = if self.next_is_type() {
            Some(self.type_proto()?)
        } else {
            None
        };
        self.skip_ws();
        let at = self.pos;
        let name = self.quotable_id("a value name")?;
        if ty.is_none() && self.peek() == b'[' {
            return Err(self.err_at(at, format!("unknown element type '{name}'")));
        }
        Ok(ValueInfoProto {
            name: Some(name),
            r#type: ty,
            ..Default::default()
        })
    }

    // ---------------------------------------------------------------- types and tensors

    pub(super) fn type_proto(&mut self) -> PResult<TypeProto> {
        self.enter()?;
        let r = self.type_proto_inner();
        self.leave();
        r
    }

    pub(super) fn type_proto_inner(&mut self) -> PResult<TypeProto> {
        self.skip_ws();
        let at = self.pos;
        let id = self.ident("a type")?;
        let value = if let Some(code) = elem_type(id) {
            type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(code),
                shape: self.opt_shape()?,
            })
        } else {
            match id {
                "seq" => {
                    self.expect(b'(', "after 'seq'")?;
                    let elem = self.type_proto()?;
                    self.expect(b')', "to close 'seq('")?;
                    type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
                        elem_type: Some(Box::new(elem)),
                    }))
                }
                "optional" => {
                    self.expect(b'(', "after 'optional'")?;
                    let elem = self.type_proto()?;
                    self.expect(b')', "to close 'optional('")?;
                    type_proto::Value::OptionalType(Box::new(type_proto::Optional {
                        elem_type: Some(Box::new(elem)),
                    }))
                }
                "map" => {
                    self.expect(b'(', "after 'map'")?;
                    self.skip_ws();
                    let key_at = self.pos;
                    let key = self.ident("a map key type")?;
                    let key = elem_type(key).ok_or_else(|| {
                        self.err_at(key_at, "expected a primitive type as map key type")
                    })?;
                    self.expect(b',', "after the map key type")?;
                    let value = self.type_proto()?;
                    self.expect(b')', "to close 'map('")?;
                    type_proto::Value::MapType(Box::new(type_proto::Map {
                        key_type: Some(key),
                        value_type: Some(Box::new(value)),
                    }))
                }
                "sparse_tensor" => {
                    self.expect(b'(', "after 'sparse_tensor'")?;
                    self.skip_ws();
                    let elem_at = self.pos;
                    let elem = self.ident("an element type")?;
                    let elem = elem_type(elem).ok_or_else(|| {
                        self.err_at(elem_at, "expected a primitive sparse-tensor element type")
                    })?;
                    let shape = self.opt_shape()?;
                    self.expect(b')', "to close 'sparse_tensor('")?;
                    type_proto::Value::SparseTensorType(type_proto::SparseTensor {
                        elem_type: Some(elem),
                        shape,
                    })
                }
                "opaque" => {
                    self.expect(b'(', "after 'opaque'")?;
                    let mut op = type_proto::Opaque::default();
                    if !self.matches(b')') {
                        let mut name = self.ident("an opaque type name")?.to_string();
                        while self.matches(b'.') {
                            name.push('.');
                            name.push_str(self.ident("a name component")?);
                        }
                        if self.matches(b',') {
                            op.domain = Some(name);
                            op.name = Some(self.ident("an opaque type name")?.to_string());
                        } else {
                            op.name = Some(name);
                        }
                        self.expect(b')', "to close 'opaque('")?;
                    }
                    type_proto::Value::OpaqueType(op)
                }
                other => return Err(self.err_at(at, format!("unknown type '{other}'"))),
            }
        };
        Ok(TypeProto {
            value: Some(value),
            ..Default::default()
        })
    }

    /// `[d, ...]` → dims; `[]` → no shape (unknown rank); nothing → rank 0.
    pub(super) fn opt_shape(&mut self) -> PResult<Option<TensorShapeProto>> {
        if !self.matches(b'[') {
            return Ok(Some(TensorShapeProto::default()));
        }
        if self.matches(b']') {
            return Ok(None);
        }
        let mut shape = TensorShapeProto::default();
        loop {
            let value = if self.matches(b'?') {
                None
            } else if self.peek() == b'"' {
                Some(dimension::Value::DimParam(self.string("")?))
            } else {
                let id = self.opt_ident();
                if id.is_empty() {
                    Some(dimension::Value::DimValue(self.int("as a dimension")?))
                } else {
                    Some(dimension::Value::DimParam(id.to_string()))
                }
            };
            shape.dim.push(Dimension {
                value,
                ..Default::default()
            });
            if !self.matches(b',') {
                break;
            }
        }
        self.expect(b']', "to close the dimensions")?;
        Ok(Some(shape))
    }

    /// The data of a tensor of type `ty`: `{v, ...}`, external `["location": "..."]`, or nothing.
    pub(super) fn tensor_data(
        &mut self,
        name: String,
        ty: Option<&TypeProto>,
    ) -> PResult<TensorProto> {
        let at = self.pos;
        let Some(type_proto::Value::TensorType(tt)) = ty.and_then(|t| t.value.as_ref()) else {
            return Err(self.err_at(at, "a tensor value needs a tensor type"));
        };
        let Some(shape) = &tt.shape else {
            return Err(self.err_at(at, "a tensor value needs a shape (not '[]')"));
        };
        let mut t = TensorProto {
            name: Some(name),
            data_type: tt.elem_type,
            ..Default::default()
        };
        for d in &shape.dim {
            match d.value {
                Some(dimension::Value::DimValue(v)) => t.dims.push(v),
                _ => return Err(self.err_at(at, "a tensor value needs numeric dimensions")),
            }
        }
        let code = tt.elem_type.unwrap_or(0);
        if self.matches(b'{') {
            if self.matches(b'}') {
                return Ok(t);
            }
            loop {
                self.skip_ws();
                let vat = self.pos;
                let lit = self.literal()?;
                let bad = |p: &Self, want: &str| {
                    p.err_at(
                        vat,
                        format!("expected {want} for a tensor of element type {}", {
                            ELEM_TYPES
                                .iter()
                                .find(|(_, c)| *c == code)
                                .map_or("?", |(n, _)| n)
                        }),
                    )
                };
                match (code, &lit) {
                    (7, Lit::Int(s)) => t.int64_data.push(self.to_i64(s, vat)?),
                    (12 | 13, Lit::Int(s)) => t.uint64_data.push(
                        s.parse::<u64>()
                            .map_err(|_| self.err_at(vat, format!("{s} is not a uint64")))?,
                    ),
                    (1 | 14, Lit::Int(s) | Lit::Float(s)) => {
                        t.float_data.push(self.to_f32(s, vat)?)
                    }
                    (11 | 15, Lit::Int(s) | Lit::Float(s)) => {
                        t.double_data.push(self.to_f64(s, vat)?);
                    }
                    (8, Lit::Str(s)) => t.string_data.push(s.clone().into_bytes()),
                    (2..=6 | 9 | 10 | 16..=28, Lit::Int(s)) => {
                        let v = self.to_i64(s, vat)?;
                        let v = i32::try_from(v).map_err(|_| {
                            self.err_at(vat, format!("{v} does not fit the 32-bit storage"))
                        })?;
                        t.int32_data.push(v);
                    }
                    (7 | 12 | 13 | 2..=6 | 9 | 10 | 16..=28, _) => {
                        return Err(bad(self, "an integer"));
                    }
                    (1 | 14 | 11 | 15, _) => return Err(bad(self, "a number")),
                    (8, _) => return Err(bad(self, "a quoted string")),
                    _ => return Err(self.err_at(vat, format!("unhandled element type {code}"))),
                }
                if !self.matches(b',') {
                    break;
                }
            }
            self.expect(b'}', "to close the tensor values")?;
        } else if self.matches(b'[') {
            t.data_location = Some(DataLocation::External as i32);
            t.external_data = self.string_pairs()?;
            self.expect(b']', "to close the external-data entries")?;
        }
        Ok(t)
    }

    // ---------------------------------------------------------------- nodes and attributes

    pub(super) fn node(&mut self) -> PResult<NodeProto> {
        let mut node = NodeProto::default();
        if self.matches(b'[') {
            node.name = Some(self.opt_quotable_id()?.0);
            self.expect(b']', "to close the node name")?;
        }
        node.output = self.id_list()?;
        self.expect(b'=', "after the node outputs")?;
        let mut id = self.ident("an op type")?.to_string();
        let mut domain = String::new();
        while self.matches(b'.') {
            if !domain.is_empty() {
                domain.push('.');
            }
            domain.push_str(&id);
            id = self.ident("an op type after the domain")?.to_string();
        }
        node.domain = Some(domain);
        node.op_type = Some(id);
        if self.matches(b':') {
            node.overload = Some(self.ident("an overload name")?.to_string());
        }
        node.attribute = self.attr_list()?;
        self.expect(b'(', "to open the node inputs")?;
        node.input = self.id_list()?;
        self.expect(b')', "to close the node inputs")?;
        if node.attribute.is_empty() {
            node.attribute = self.attr_list()?;
        }
        Ok(node)
    }

    pub(super) fn attr_list(&mut self) -> PResult<Vec<AttributeProto>> {
        let mut out = Vec::new();
        if self.matches(b'<') {
            loop {
                out.push(self.attribute()?);
                if !self.matches(b',') {
                    break;
                }
            }
            self.expect(b'>', "to close the attribute list")?;
        }
        Ok(out)
    }

    pub(super) fn attribute(&mut self) -> PResult<AttributeProto> {
        let name = self.ident("an attribute name")?.to_string();
        let mut attr = AttributeProto {
            name: Some(name),
            ..Default::default()
        };
        if self.matches(b':') {
            self.skip_ws();
            let at = self.pos;
            let ty = self.ident("an attribute type")?;
            let ty = attr_type(ty)
                .ok_or_else(|| self.err_at(at, format!("unknown attribute type '{ty}'")))?;
            attr.set_type(ty);
        }
        self.expect(b'=', "after the attribute name")?;
        if self.matches(b'[') {
            if self.peek() != b']' {
                loop {
                    let mut v = AttributeProto::default();
                    self.single_attr_value(&mut v, singleton(attr.r#type()))?;
                    match v.r#type() {
                        AttributeType::Int => {
                            attr.set_type(AttributeType::Ints);
                            attr.ints.push(v.i());
                        }
                        AttributeType::Float => {
                            attr.set_type(AttributeType::Floats);
                            attr.floats.push(v.f());
                        }
                        AttributeType::String => {
                            attr.set_type(AttributeType::Strings);
                            attr.strings.push(v.s.unwrap_or_default());
                        }
                        AttributeType::Tensor => {
                            attr.set_type(AttributeType::Tensors);
                            attr.tensors.extend(v.t);
                        }
                        AttributeType::Graph => {
                            attr.set_type(AttributeType::Graphs);
                            attr.graphs.extend(v.g);
                        }
                        AttributeType::TypeProto => {
                            attr.set_type(AttributeType::TypeProtos);
                            attr.type_protos.extend(v.tp);
                        }
                        _ => return Err(self.err("unsupported value in an attribute list")),
                    }
                    if !self.matches(b',') {
                        break;
                    }
                }
            } else {
                let t = attr.r#type();
                if t == AttributeType::Undefined {
                    return Err(self.err(
                        "an empty list attribute needs a type annotation (e.g. 'axes: ints = []')",
                    ));
                }
                if is_singleton(t) {
                    return Err(self.err("a singleton attribute type cannot take a list value"));
                }
            }
            self.expect(b']', "to close the attribute list value")?;
        } else {
            let expected = attr.r#type();
            self.single_attr_value(&mut attr, expected)?;
        }
        Ok(attr)
    }

    pub(super) fn single_attr_value(
        &mut self,
        attr: &mut AttributeProto,
        expected: AttributeType,
    ) -> PResult<()> {
        let next = self.peek();
        let at = self.pos;
        if next.is_ascii_alphabetic() || next == b'_' {
            if self.next_is_type() {
                let ty = self.type_proto()?;
                let n = self.peek();
                if n == b'{' || n == b'=' || !self.peek_ident().is_empty() || n == b'"' {
                    let name = self.opt_quotable_id()?.0;
                    let _ = self.matches(b'=');
                    attr.t = Some(self.tensor_data(name, Some(&ty))?);
                    attr.set_type(AttributeType::Tensor);
                } else {
                    attr.tp = Some(ty);
                    attr.set_type(AttributeType::TypeProto);
                }
            } else if self.next_is_special_float() {
                let Lit::Float(s) = self.literal()? else {
                    return Err(self.err_at(at, "invalid float"));
                };
                attr.f = Some(self.to_f32(&s, at)?);
                attr.set_type(AttributeType::Float);
            } else {
                self.enter()?;
                let g = self.graph();
                self.leave();
                attr.g = Some(g?);
                attr.set_type(AttributeType::Graph);
            }
        } else if self.matches(b'@') {
            attr.ref_attr_name = Some(self.quotable_id("an attribute reference")?);
        } else {
            match self.literal()? {
                Lit::Int(s) if expected == AttributeType::Float => {
                    attr.f = Some(self.to_f32(&s, at)?);
                    attr.set_type(AttributeType::Float);
                }
                Lit::Int(s) => {
                    attr.i = Some(self.to_i64(&s, at)?);
                    attr.set_type(AttributeType::Int);
                }
                Lit::Float(s) => {
                    attr.f = Some(self.to_f32(&s, at)?);
                    attr.set_type(AttributeType::Float);
                }
                Lit::Str(s) => {
                    attr.s = Some(s.into_bytes());
                    attr.set_type(AttributeType::String);
                }
            }
        }
        if attr.ref_attr_name.is_none()
            && expected != AttributeType::Undefined
            && expected != attr.r#type()
        {
            return Err(self.err_at(
                at,
                format!(
                    "attribute value of type {} where {} was declared",
                    attr.r#type().as_str_name(),
                    expected.as_str_name()
                ),
            ));
        }
        Ok(())
    }
}
