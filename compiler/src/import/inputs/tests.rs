use super::*;
use arenac_proto::{
    TensorShapeProto, TypeProto,
    tensor_shape_proto::Dimension,
    type_proto::{Tensor as TensorTypeProto, Value as TypeValue},
};

fn decl(name: &str, dims: Vec<DeclDim>) -> DeclaredInput {
    DeclaredInput {
        name: name.into(),
        dtype: DType::F32,
        dims: Some(dims),
    }
}

fn sym(s: &str) -> DeclDim {
    DeclDim::Symbol(s.into())
}

fn shapes(given: &[(&str, &[usize])]) -> Vec<(String, Shape)> {
    given
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_vec()))
        .collect()
}

fn bound(ins: &[DeclaredInput], given: &[(&str, &[usize])]) -> (Vec<Shape>, Vec<String>) {
    let (types, warnings) = bind_inputs(ins, &shapes(given)).unwrap();
    (types.into_iter().map(|t| t.shape).collect(), warnings)
}

fn bind_err(ins: &[DeclaredInput], given: &[(&str, &[usize])]) -> String {
    bind_inputs(ins, &shapes(given)).unwrap_err().to_string()
}

/// A `ValueInfoProto` for an f32 input with the given dims.
fn value_info(name: &str, dims: Vec<Option<DimValue>>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorTypeProto {
                elem_type: Some(DType::F32.to_onnx()),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .into_iter()
                        .map(|value| Dimension {
                            value,
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn spec_parsing() {
    assert_eq!(
        parse_shape_spec("x=1x3x224x224").unwrap(),
        ("x".into(), vec![1, 3, 224, 224])
    );
    assert_eq!(parse_shape_spec("s=").unwrap(), ("s".into(), vec![]));
    // The sizes follow the last '='; names keep '/', ':', '=' and '[i]'.
    assert_eq!(
        parse_shape_spec("gpu_0/data_0=1x3").unwrap(),
        ("gpu_0/data_0".into(), vec![1, 3])
    );
    assert_eq!(parse_shape_spec("a=b=2").unwrap(), ("a=b".into(), vec![2]));
    assert_eq!(
        parse_shape_spec("x[0]=8").unwrap(),
        ("x[0]".into(), vec![8])
    );
    assert!(parse_shape_spec("x").is_err());
    assert!(parse_shape_spec("x=1xb").is_err());
}

#[test]
fn binds_symbols_across_inputs() {
    let ins = [
        decl("a", vec![sym("N"), DeclDim::Fixed(3)]),
        decl("b", vec![sym("N")]),
    ];
    let (s, w) = bound(&ins, &[("a", &[4, 3])]);
    assert_eq!(s[1], vec![4]);
    assert!(w.is_empty());
    let (s, w) = bound(&ins, &[]);
    assert_eq!(s[0], vec![1, 3]);
    assert!(w[0].contains("'N'"), "{w:?}");
    assert!(bind_inputs(&ins, &shapes(&[("a", &[4, 5])])).is_err());
    let (s, _) = bound(&ins, &[("N", &[7])]);
    assert_eq!(s[1], vec![7]);
    assert!(bind_inputs(&ins, &shapes(&[("zz", &[7])])).is_err());
}

#[test]
fn minus_one_question_mark_and_empty_dims_are_anonymous() {
    let vi = value_info(
        "x",
        vec![
            Some(DimValue::DimValue(-1)),
            Some(DimValue::DimValue(3)),
            Some(DimValue::DimParam("?".into())),
            None,
            Some(DimValue::DimParam(String::new())),
            Some(DimValue::DimParam("N".into())),
        ],
    );
    let d = DeclaredInput::from_proto(&vi).unwrap();
    use DeclDim::{Anonymous as A, Fixed};
    assert_eq!(d.dims, Some(vec![A, Fixed(3), A, A, A, sym("N")]));
    assert_eq!(d.declared_text(), "[?,3,?,?,?,N]");
    assert_eq!(d.leading_symbol().as_deref(), Some("x[0]"));
    assert_eq!(d.dim_label(1), None);
    assert_eq!(d.dim_label(2).as_deref(), Some("x[2]"));
    assert_eq!(d.dim_label(5).as_deref(), Some("N"));
    assert_eq!(d.dim_label(6), None);

    // Other negative sizes are refused, naming the input.
    let vi = value_info("y", vec![Some(DimValue::DimValue(-2))]);
    let err = DeclaredInput::from_proto(&vi).unwrap_err().to_string();
    assert!(err.contains("'y'") && err.contains("dim -2"), "{err}");
}

#[test]
fn anonymous_dims_are_independent() {
    use DeclDim::{Anonymous as A, Fixed};
    let ins = [decl("x", vec![A, Fixed(3), A, A]), decl("y", vec![A, A])];
    // A whole shape binds x's dims, and nothing of y's.
    let (s, w) = bound(&ins, &[("x", &[2, 3, 224, 160])]);
    assert_eq!(s, vec![vec![2, 3, 224, 160], vec![1, 1]]);
    assert_eq!(
        w,
        vec![
            "unbound symbolic dims default to 1: y[0], y[1]; bind them with --shape: an \
             unnamed dim (-1, '?' or none) as y[0]=8, a whole input as y=DxD"
        ]
    );
    // Single dims, each its own symbol.
    let (s, w) = bound(&ins, &[("x[2]", &[5]), ("y[1]", &[7])]);
    assert_eq!(s, vec![vec![1, 3, 5, 1], vec![1, 7]]);
    assert_eq!(
        w,
        vec![
            "unbound symbolic dims default to 1: x[0], x[3], y[0]; bind them with --shape: \
             an unnamed dim (-1, '?' or none) as x[0]=8, a whole input as x=Dx3xDxD"
        ]
    );
    // A single dim and a whole shape must agree.
    let (s, _) = bound(&ins, &[("x[0]", &[2]), ("x", &[2, 3, 4, 4])]);
    assert_eq!(s[0], vec![2, 3, 4, 4]);
    let err = bind_err(&ins, &[("x[0]", &[2]), ("x", &[1, 3, 4, 4])]);
    assert_eq!(err, "--shape x=1x3x4x4: binds x[0]=1 but x[0]=2 already");
    // A fixed dim named by index must agree with the model.
    let (s, _) = bound(&ins, &[("x[1]", &[3])]);
    assert_eq!(s[0], vec![1, 3, 1, 1]);
    let err = bind_err(&ins, &[("x[1]", &[4])]);
    assert_eq!(
        err,
        "--shape x[1]=4: dim 1 of input 'x' is 3 in the model ([?,3,?,?])"
    );
    // Past the rank, more than one size, an unknown name.
    let err = bind_err(&ins, &[("x[4]", &[2])]);
    assert_eq!(
        err,
        "--shape x[4]=2: input 'x' has 4 dims ([?,3,?,?]): no dim 4"
    );
    let err = bind_err(&ins, &[("x[0]", &[2, 2])]);
    assert!(
        err.contains("'x[0]' is one dim: it takes one size"),
        "{err}"
    );
    let err = bind_err(&ins, &[("z[0]", &[2])]);
    assert!(err.contains("'z[0]' names no graph input"), "{err}");
    assert!(err.contains("(inputs: x, y)"), "{err}");
}

#[test]
fn named_dims_by_index_bind_their_symbol() {
    let ins = [
        decl("a", vec![sym("N"), DeclDim::Fixed(3)]),
        decl("b", vec![DeclDim::Anonymous, sym("N")]),
    ];
    let (s, w) = bound(&ins, &[("a[0]", &[6])]);
    assert_eq!(s, vec![vec![6, 3], vec![1, 6]]);
    assert_eq!(
        w,
        vec![
            "unbound symbolic dims default to 1: b[0]; bind them with --shape: an unnamed \
             dim (-1, '?' or none) as b[0]=8, a whole input as b=DxD"
        ]
    );
    let err = bind_err(&ins, &[("a[0]", &[6]), ("N", &[5])]);
    assert_eq!(err, "--shape N=5: binds N=5 but N=6 already");
    let (_, w) = bound(&ins, &[("b[0]", &[2])]);
    assert_eq!(
        w,
        vec![
            "unbound symbolic dims default to 1: 'N'; bind them with --shape: a symbol as \
             N=8, a whole input as a=Dx3"
        ]
    );
}

#[test]
fn input_names_win_over_dim_references() {
    // An input literally called "x[0]" is bound whole, not as dim 0 of "x".
    let ins = [
        decl("x", vec![DeclDim::Anonymous]),
        decl("x[0]", vec![DeclDim::Anonymous, DeclDim::Anonymous]),
    ];
    let (s, _) = bound(&ins, &[("x[0]", &[4, 5])]);
    assert_eq!(s, vec![vec![1], vec![4, 5]]);
    let (s, _) = bound(&ins, &[("x[0][1]", &[9])]);
    assert_eq!(s, vec![vec![1], vec![1, 9]]);
}

#[test]
fn inputs_without_a_shape() {
    let ins = [DeclaredInput {
        name: "s".into(),
        dtype: DType::F32,
        dims: None,
    }];
    assert_eq!(bound(&ins, &[("s", &[2, 2])]).0, vec![vec![2, 2]]);
    let err = bind_err(&ins, &[("s[0]", &[2])]);
    assert!(err.contains("input 's' declares no shape"), "{err}");
    let err = bind_err(&ins, &[]);
    assert!(
        err.contains("declares no shape; give one with --shape"),
        "{err}"
    );
}
