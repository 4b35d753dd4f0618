//! One test per error class: each bad model gives its typed error with a message that names
//! what is wrong — never a panic.

use std::path::Path;

use arenac_compiler::Error;
use arenac_compiler::OpError;
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder, tensor_proto};
use arenac_compiler::import::{ImportOptions, Imported, decode_model, import_file, import_model};
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;
use arenac_proto::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, StringStringEntryProto,
    TensorProto, attribute_proto::AttributeType, tensor_proto::DataLocation,
};

fn import(m: &ModelProto) -> Result<Imported, Error> {
    import_model(m, None, &ImportOptions::default())
}

fn relu_model() -> ModelBuilder {
    ModelBuilder::new("g", 13)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3)])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y", DType::F32, &[])
}

#[test]
fn random_bytes_are_a_decode_error() {
    // A fixed pseudo-random sequence (xorshift), so the test is reproducible.
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for len in [1usize, 7, 64, 4096] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect();
        match decode_model(bytes.into()).and_then(|m| import(&m)) {
            Err(Error::Decode { .. } | Error::InvalidModel(_) | Error::UnsupportedOpset { .. }) => {
            }
            other => panic!("len {len}: {other:?}"),
        }
    }
}

#[test]
fn truncated_and_empty_files_are_decode_errors() {
    let full = relu_model()
        .initializer("w", &Tensor::f32(vec![4], &[1.0, 2.0, 3.0, 4.0]))
        .build()
        .encode_to_vec();
    assert!(import(&decode_model(full.clone().into()).unwrap()).is_ok());
    for cut in [full.len() - 1, full.len() / 2, 3] {
        let e = decode_model(full[..cut].to_vec().into()).unwrap_err();
        assert!(matches!(e, Error::Decode { .. }), "cut {cut}: {e:?}");
    }
    let e = decode_model(Vec::new().into()).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
}

#[test]
fn deeply_nested_protobuf_is_a_decode_error() {
    // A graph attribute holding a graph holding a node with a graph attribute... 2,000 deep.
    let bytes = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let mut g = GraphProto::default();
            for _ in 0..2000 {
                let mut a = AttributeProto {
                    name: Some("body".into()),
                    g: Some(g),
                    ..AttributeProto::default()
                };
                a.set_type(AttributeType::Graph);
                g = GraphProto {
                    node: vec![NodeProto {
                        op_type: Some("If".into()),
                        attribute: vec![a],
                        ..NodeProto::default()
                    }],
                    ..GraphProto::default()
                };
            }
            let m = ModelProto {
                graph: Some(g),
                ..ModelProto::default()
            };
            let bytes = m.encode_to_vec();
            // Drop the deep structure on this big stack too.
            drop(m);
            bytes
        })
        .unwrap()
        .join()
        .unwrap();
    let e = decode_model(bytes.into()).unwrap_err();
    assert!(matches!(e, Error::Decode { .. }), "{e:?}");
    assert!(e.to_string().to_lowercase().contains("recursion"), "{e}");
}

#[test]
fn missing_graph_and_opset() {
    let e = import(&ModelProto::default()).unwrap_err();
    assert!(matches!(e, Error::InvalidModel(_)), "{e:?}");
    for opset in [0, 99] {
        let e = import(&ModelBuilder::new("g", opset).build()).unwrap_err();
        assert!(
            matches!(e, Error::UnsupportedOpset { version, .. } if version == opset),
            "{e:?}"
        );
    }
}

#[test]
fn unsupported_op_names_node_op_and_opset() {
    let m = relu_model()
        .node("mystery", "FooBar", &["y"], &["z"], vec![])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedOp { op, node, opset: 13, .. } if op == "FooBar" && node == "mystery"),
        "{e:?}"
    );
    assert!(e.to_string().contains("arenac ops"), "{e}");
    let mut m = relu_model().build();
    m.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedOp { domain, .. } if domain == "com.microsoft"),
        "{e:?}"
    );
}

#[test]
fn shape_mismatch_names_node_and_both_shapes() {
    let m = ModelBuilder::new("g", 13)
        .input("a", DType::F32, &[Dim::N(2), Dim::N(3)])
        .input("b", DType::F32, &[Dim::N(4)])
        .node("add1", "Add", &["a", "b"], &["c"], vec![])
        .output("c", DType::F32, &[])
        .build();
    let e = import(&m).unwrap_err();
    match &e {
        Error::Node {
            node,
            op,
            source: OpError::ShapeMismatch { shapes, .. },
        } => {
            assert_eq!((node.as_str(), op.as_str()), ("add1", "Add"));
            assert_eq!(shapes, &vec![vec![2, 3], vec![4]]);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("[2,3], [4]"), "{e}");
}

#[test]
fn missing_input_or_initializer() {
    let m = relu_model()
        .node("mm", "MatMul", &["y", "weights"], &["z"], vec![])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::MissingValue { node, value, .. } if node == "mm" && value == "weights"),
        "{e:?}"
    );
    let m = relu_model().output("nowhere", DType::F32, &[]).build();
    assert!(matches!(import(&m), Err(Error::MissingOutput(n)) if n == "nowhere"));
}

#[test]
fn cycle_is_reported() {
    let m = ModelBuilder::new("g", 13)
        .input("x", DType::F32, &[Dim::N(2)])
        .node("a", "Add", &["x", "d"], &["c"], vec![])
        .node("b", "Relu", &["c"], &["d"], vec![])
        .output("d", DType::F32, &[])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::Cycle { node } if node == "a" || node == "b"),
        "{e:?}"
    );
}

#[test]
fn duplicate_value_names() {
    let m = relu_model()
        .node("r2", "Relu", &["x"], &["y"], vec![])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::DuplicateValue { name, .. } if name == "y"),
        "{e:?}"
    );
    let m = relu_model()
        .initializer("w", &Tensor::f32(vec![1], &[1.0]))
        .initializer("w", &Tensor::f32(vec![1], &[2.0]))
        .build();
    assert!(matches!(import(&m), Err(Error::DuplicateValue { name, .. }) if name == "w"));
}

#[test]
fn tensors_whose_data_does_not_match_their_dims() {
    let short = TensorProto {
        name: Some("w".into()),
        dims: vec![2, 2],
        data_type: Some(DType::F32.to_onnx()),
        raw_data: Some(vec![0u8; 12].into()),
        ..TensorProto::default()
    };
    let e = import(&relu_model().initializer_proto(short.clone()).build()).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidTensor { name, .. } if name == "w"),
        "{e:?}"
    );
    assert!(e.to_string().contains("16"), "{e}");
    let negative = TensorProto {
        dims: vec![-2, 2],
        ..short.clone()
    };
    let e = import(&relu_model().initializer_proto(negative).build()).unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
    let overflow = TensorProto {
        dims: vec![1 << 40, 1 << 40],
        ..short.clone()
    };
    let e = import(&relu_model().initializer_proto(overflow).build()).unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
    let strings = TensorProto {
        data_type: Some(8),
        ..short
    };
    let e = import(&relu_model().initializer_proto(strings).build()).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedDType { code: 8, .. }),
        "{e:?}"
    );
    // The message names the type, not only its code.
    assert!(e.to_string().contains("element type STRING (8)"), "{e}");
}

fn external(
    name: &str,
    location: &str,
    offset: usize,
    length: usize,
    dims: Vec<i64>,
) -> TensorProto {
    let kv = |k: &str, v: String| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v),
    };
    let mut t = TensorProto {
        name: Some(name.into()),
        dims,
        data_type: Some(DType::F32.to_onnx()),
        external_data: vec![
            kv("location", location.into()),
            kv("offset", offset.to_string()),
            kv("length", length.to_string()),
        ],
        ..TensorProto::default()
    };
    t.set_data_location(DataLocation::External);
    t
}

fn write_model(dir: &Path, m: &ModelProto) -> std::path::PathBuf {
    let path = dir.join("model.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

#[test]
fn external_data_is_mapped_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let values = [1.5f32, -2.0, 3.25, 4.0];
    let mut data = vec![0u8; 8]; // an 8-byte prefix, so the tensor sits at an offset
    for v in values {
        data.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(dir.path().join("weights.bin"), &data).unwrap();
    let m = relu_model()
        .initializer_proto(external("w", "weights.bin", 8, 16, vec![2, 2]))
        .node("add", "Add", &["w", "w"], &["w2"], vec![])
        .output("w2", DType::F32, &[])
        .build();
    let imported = import_file(&write_model(dir.path(), &m), &ImportOptions::default()).unwrap();
    let g = &imported.graph;
    // A constant graph output is copied into the arena by one node; its input is the constant.
    let arenac_compiler::ir::graph::ValueKind::Computed(copy) = g.value(g.outputs[1]).kind else {
        panic!("the output w2 should be computed by a copy node");
    };
    let w2 = g.node(copy).inputs[0];
    match &g.value(w2).kind {
        arenac_compiler::ir::graph::ValueKind::Constant(t) => {
            assert_eq!(t.to_f32_vec(), vec![3.0, -4.0, 6.5, 8.0]);
        }
        other => panic!("w2 should fold to a constant: {other:?}"),
    }

    for (location, offset, length, want) in [
        ("../../etc/passwd", 0, 16, "inside the model's folder"),
        ("/etc/passwd", 0, 16, "inside the model's folder"),
        ("weights.bin", 16, 16, "exceeds"),
        ("weights.bin", usize::MAX, 16, "exceeds"),
    ] {
        let m = relu_model()
            .initializer_proto(external("w", location, offset, length, vec![2, 2]))
            .build();
        let e = import_file(&write_model(dir.path(), &m), &ImportOptions::default()).unwrap_err();
        assert!(matches!(e, Error::ExternalData { .. }), "{location}: {e:?}");
        assert!(e.to_string().contains(want), "{location}: {e}");
    }
    let m = relu_model()
        .initializer_proto(external("w", "missing.bin", 0, 16, vec![2, 2]))
        .build();
    let e = import_file(&write_model(dir.path(), &m), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    // Without a model folder (bytes decoded in memory), external data is refused.
    let e = import(&m).unwrap_err();
    assert!(matches!(e, Error::ExternalData { .. }), "{e:?}");
}

#[test]
fn non_constant_shape_operand() {
    let m = ModelBuilder::new("g", 13)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3)])
        .input("s", DType::I64, &[Dim::N(2)])
        .node("reshape", "Reshape", &["x", "s"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::Node { node, source: OpError::NotConstant { name, .. }, .. } if node == "reshape" && name == "s"),
        "{e:?}"
    );
}

#[test]
fn bad_attribute_names_it() {
    let m = ModelBuilder::new("g", 13)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3)])
        .node(
            "t",
            "Transpose",
            &["x"],
            &["y"],
            vec![("perm", Attr::Ints(vec![0, 0]))],
        )
        .output("y", DType::F32, &[])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::Node { node, source: OpError::InvalidAttribute { attr, .. }, .. } if node == "t" && attr == "perm"),
        "{e:?}"
    );
}

#[test]
fn input_shapes_bind_and_mismatch() {
    let m = ModelBuilder::new("g", 13)
        .input("x", DType::F32, &[Dim::Sym("N"), Dim::N(3)])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let ok = import(&m).unwrap();
    assert!(ok.warnings[0].contains("'N'"), "{:?}", ok.warnings);
    let opts = ImportOptions {
        shapes: vec![("x".into(), vec![5, 4])],
        ..Default::default()
    };
    let e = import_model(&m, None, &opts).unwrap_err();
    assert!(e.to_string().contains("[N,3]"), "{e}");
    let opts = ImportOptions {
        shapes: vec![("N".into(), vec![5])],
        ..Default::default()
    };
    let g = import_model(&m, None, &opts).unwrap().graph;
    assert_eq!(g.value(g.outputs[0]).ty.shape, vec![5, 3]);
}

#[test]
fn tensor_roundtrip_through_builder() {
    let t = Tensor::i64(vec![2], &[1, -1]);
    let p = tensor_proto("s", &t);
    assert_eq!(p.dims, vec![2]);
}

#[test]
fn dropout_mask_is_dropped_unless_read() {
    let base = || {
        ModelBuilder::new("g", 13)
            .input("x", DType::F32, &[Dim::N(2)])
            .node("drop", "Dropout", &["x"], &["y", "mask"], vec![])
            .output("y", DType::F32, &[])
    };
    let g = import(&base().build()).unwrap().graph;
    assert_eq!(g.node_count(), 1);
    let text = arenac_compiler::ir::print::print_graph(&g);
    assert!(text.contains("Identity("), "{text}");
    // Dropout's mask, when read, is produced (all true at inference).
    let g = import(&base().output("mask", DType::Bool, &[]).build())
        .unwrap()
        .graph;
    assert_eq!(g.node_count(), 1);
    assert_eq!(g.outputs.len(), 2);
}

#[test]
fn absurd_attributes_are_errors_not_allocations() {
    let conv = |attrs: Vec<(&str, Attr)>| {
        ModelBuilder::new("g", 13)
            .input(
                "x",
                DType::F32,
                &[Dim::N(1), Dim::N(1), Dim::N(8), Dim::N(8)],
            )
            .initializer("w", &Tensor::f32(vec![1, 1, 1, 1], &[1.0]))
            .node("c", "Conv", &["x", "w"], &["y"], attrs)
            .output("y", DType::F32, &[])
            .build()
    };
    let huge = 1i64 << 31;
    for attrs in [
        vec![("kernel_shape", Attr::Ints(vec![huge, huge]))],
        vec![("strides", Attr::Ints(vec![0, 1]))],
        vec![("pads", Attr::Ints(vec![-1, 0, 0, 0]))],
        vec![("group", Attr::Int(0))],
    ] {
        let e = import(&conv(attrs.clone())).unwrap_err();
        assert!(
            matches!(&e, Error::Node { node, .. } if node == "c"),
            "{attrs:?}: {e:?}"
        );
    }
    // A huge dilation of a 1x1 kernel is harmless (the window stays 1 wide); pads larger than
    // the input are legal for Conv (the output grows): neither is an error.
    assert!(import(&conv(vec![("dilations", Attr::Ints(vec![huge, huge]))])).is_ok());
    assert!(import(&conv(vec![("pads", Attr::Ints(vec![100, 100, 100, 100]))])).is_ok());
    // A pooling window larger than the padded input is an error.
    let m = ModelBuilder::new("g", 13)
        .input(
            "x",
            DType::F32,
            &[Dim::N(1), Dim::N(1), Dim::N(4), Dim::N(4)],
        )
        .node(
            "p",
            "MaxPool",
            &["x"],
            &["y"],
            vec![("kernel_shape", Attr::Ints(vec![huge, 2]))],
        )
        .output("y", DType::F32, &[])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::Node { node, .. } if node == "p"),
        "{e:?}"
    );
}

#[test]
fn constants_too_large_to_fold_are_errors() {
    // ConstantOfShape of 2^20 x 2^20 f32 (4 TiB): refused before allocating.
    let m = ModelBuilder::new("g", 13)
        .initializer("s", &Tensor::i64(vec![2], &[1 << 20, 1 << 20]))
        .node("big", "ConstantOfShape", &["s"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let e = import(&m).unwrap_err();
    assert!(
        matches!(&e, Error::Node { node, source: OpError::Overflow(_), .. } if node == "big"),
        "{e:?}"
    );
    // Dims whose product overflows usize.
    let m = ModelBuilder::new("g", 13)
        .initializer("s", &Tensor::i64(vec![3], &[1 << 40, 1 << 40, 1 << 40]))
        .node("big", "ConstantOfShape", &["s"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    assert!(import(&m).is_err());
}

/// A one-node model `y = op(x)` over `x: f32[1, 1, 4, 4]` (plus `w: f32[1, 1, 1, 1]` for Conv).
fn window_model(op: &str, attrs: Vec<(&str, Attr)>) -> ModelProto {
    let mut b = ModelBuilder::new("g", 13).input(
        "x",
        DType::F32,
        &[Dim::N(1), Dim::N(1), Dim::N(4), Dim::N(4)],
    );
    let inputs: &[&str] = if op == "Conv" {
        b = b.initializer("w", &Tensor::f32(vec![1, 1, 1, 1], &[1.0]));
        &["x", "w"]
    } else {
        &["x"]
    };
    b.node("p", op, inputs, &["y"], attrs)
        .output("y", DType::F32, &[])
        .build()
}

#[test]
fn absurd_window_attributes_are_node_errors() {
    let huge = 1i64 << 31;
    let cases: Vec<(&str, Vec<(&str, Attr)>)> = vec![
        // Negative and zero dilations.
        ("Conv", vec![("dilations", Attr::Ints(vec![-1, -1]))]),
        ("Conv", vec![("dilations", Attr::Ints(vec![0, 1]))]),
        // Kernel size 2^31 and zero strides in pooling.
        (
            "AveragePool",
            vec![("kernel_shape", Attr::Ints(vec![huge, huge]))],
        ),
        (
            "MaxPool",
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![0, 0])),
            ],
        ),
        // Pads larger than the input and than the window: windows entirely in padding.
        (
            "MaxPool",
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![100, 100, 100, 100])),
            ],
        ),
        (
            "AveragePool",
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![huge, 0, huge, 0])),
            ],
        ),
        // Attribute lists of the wrong length.
        ("Conv", vec![("strides", Attr::Ints(vec![1, 1, 1]))]),
    ];
    for (op, attrs) in cases {
        let e = import(&window_model(op, attrs.clone())).unwrap_err();
        assert!(
            matches!(&e, Error::Node { node, .. } if node == "p"),
            "{op} {attrs:?}: {e:?}"
        );
    }
}

#[test]
fn opsets_out_of_range_are_errors() {
    // 6: arenac implements Relu from opset 7 on.
    for opset in [i64::MIN, -1, 0, 6, 29, i64::MAX] {
        let e = import(&relu_model_at(opset)).unwrap_err();
        assert!(
            matches!(e, Error::UnsupportedOpset { version, .. } if version == opset),
            "{opset}: {e:?}"
        );
        assert!(e.to_string().contains(&opset.to_string()), "{e}");
    }
}

#[test]
fn opsets_below_7_only_for_ops_unchanged_since() {
    // Not has one version (opset 1): a model importing opset 1 is fine.
    let not = ModelBuilder::new("g", 1)
        .input("x", DType::Bool, &[Dim::N(2)])
        .node("n", "Not", &["x"], &["y"], vec![])
        .output("y", DType::Bool, &[])
        .build();
    assert!(import(&not).is_ok());
    // Add before opset 7 has `broadcast`/`axis` attributes: refused, naming op and node.
    let add = ModelBuilder::new("g", 6)
        .input("x", DType::F32, &[Dim::N(2)])
        .node("plus", "Add", &["x", "x"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let e = import(&add).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedOpset { version: 6, .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("opset 6") && text.contains("Add") && text.contains("'plus'"),
        "{text}"
    );
}

fn relu_model_at(opset: i64) -> ModelProto {
    ModelBuilder::new("g", opset)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3)])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build()
}

#[test]
fn code_generation_refuses_plans_it_cannot_run() {
    // Found by the `jit_diff` fuzzer: a plan without kernel scratch gave the GEMM a null
    // workspace. Such plans (and under-aligned ones) are now a typed error.
    use arenac_compiler::analysis::liveness::LivenessOptions;
    use arenac_compiler::arena::{PlanOptions, plan_arena};
    use arenac_compiler::codegen::compile;
    let m = ModelBuilder::new("g", 13)
        .input("a", DType::F32, &[Dim::N(5), Dim::N(2), Dim::N(5)])
        .initializer("b", &Tensor::f32(vec![5, 1], &[0.5; 5]))
        .node("mm", "MatMul", &["a", "b"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let g = import(&m).unwrap().graph;
    for opts in [
        PlanOptions {
            liveness: LivenessOptions::layer_wise(),
            ..PlanOptions::default()
        },
        PlanOptions {
            align: 16,
            ..PlanOptions::default()
        },
    ] {
        let plan = plan_arena(&g, &opts).unwrap();
        let e = compile(&g, &plan).unwrap_err();
        assert!(matches!(e, Error::PlanInternal(_)), "{e:?}");
        assert!(e.to_string().contains("scratch"), "{e}");
    }
    assert!(compile(&g, &plan_arena(&g, &PlanOptions::default()).unwrap()).is_ok());
}
