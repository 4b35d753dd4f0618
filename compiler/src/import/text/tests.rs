//! Unit tests of the text parser.

use super::*;

fn parse(src: &str) -> ModelProto {
    match parse_model_text(src) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    }
}

fn syntax_err(src: &str) -> (usize, usize, String) {
    match parse_model_text(src) {
        Err(Error::Syntax {
            line,
            column,
            reason,
        }) => (line, column, reason),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

const MLP: &str = r#"
<ir_version: 8, opset_import: ["" : 13, "com.microsoft": 1], producer_name: "test">
mlp (float[N, 4] x, float s) => (float[N, 2] y)
<int64[2] shape = {1, -1}, float[2, 2] w = {1, 2.5, -3e2, 4}, float[2] vi>
{
# a comment line
[first] h = MatMul(x, w)   # trailing comment
a, b = Split <axis = 1> (h)
y = Clip(a, , s)
z = com.microsoft.Foo(y)
}
"#;

#[test]
fn header_graph_and_nodes() {
    let m = parse(MLP);
    assert_eq!(m.ir_version, Some(8));
    assert_eq!(m.producer_name(), "test");
    assert_eq!(m.opset_import.len(), 2);
    assert_eq!(m.opset_import[0].domain(), "");
    assert_eq!(m.opset_import[0].version(), 13);
    assert_eq!(m.opset_import[1].domain(), "com.microsoft");
    let g = m.graph.unwrap();
    assert_eq!(g.name(), "mlp");
    assert_eq!(g.input.len(), 2);
    let Some(type_proto::Value::TensorType(tt)) =
        g.input[0].r#type.as_ref().unwrap().value.as_ref()
    else {
        panic!("not a tensor type")
    };
    assert_eq!(tt.elem_type, Some(1));
    let dims = &tt.shape.as_ref().unwrap().dim;
    assert_eq!(dims[0].value, Some(dimension::Value::DimParam("N".into())));
    assert_eq!(dims[1].value, Some(dimension::Value::DimValue(4)));
    // A bare `float` is a scalar: a shape with no dims.
    let Some(type_proto::Value::TensorType(st)) =
        g.input[1].r#type.as_ref().unwrap().value.as_ref()
    else {
        panic!("not a tensor type")
    };
    assert_eq!(st.shape, Some(TensorShapeProto::default()));
    assert_eq!(g.initializer.len(), 2);
    assert_eq!(g.initializer[0].name(), "shape");
    assert_eq!(g.initializer[0].int64_data, vec![1, -1]);
    assert_eq!(g.initializer[0].dims, vec![2]);
    assert_eq!(g.initializer[1].float_data, vec![1.0, 2.5, -300.0, 4.0]);
    assert_eq!(g.value_info.len(), 1);
    assert_eq!(g.node.len(), 4);
    assert_eq!(g.node[0].name(), "first");
    assert_eq!(g.node[0].op_type(), "MatMul");
    assert_eq!(g.node[1].output, vec!["a", "b"]);
    assert_eq!(g.node[1].attribute[0].i, Some(1));
    assert_eq!(g.node[2].input, vec!["a", "", "s"]);
    assert_eq!(g.node[3].domain(), "com.microsoft");
    assert_eq!(g.node[3].op_type(), "Foo");
}

#[test]
fn attribute_kinds() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["": 13]>
g (float[2] x) => (float[2] y) {
  y = Op <i = -3, f = 1e-5, f2 = 2., s = "a\"b", il = [1, 2], fl = [1.0, 2], sl = ["p", "q"],
      t = float[2] {1.0, 2.0}, t2 = int64 {3}, ft: float = 1, e: ints = [], n = -inf,
      tn = float[1] named = {0.5}> (x)
  z = Op2 (x) <k = 4>
}"#,
    );
    let g = m.graph.unwrap();
    let a = &g.node[0].attribute;
    let get = |n: &str| a.iter().find(|x| x.name() == n).unwrap();
    assert_eq!(get("i").r#type(), AttributeType::Int);
    assert_eq!(get("i").i, Some(-3));
    assert_eq!(get("f").f, Some(1e-5));
    assert_eq!(get("f2").f, Some(2.0));
    assert_eq!(get("s").s.as_deref(), Some(&b"a\"b"[..]));
    assert_eq!(get("il").ints, vec![1, 2]);
    assert_eq!(get("il").r#type(), AttributeType::Ints);
    assert_eq!(get("fl").floats, vec![1.0, 2.0]);
    assert_eq!(get("sl").strings, vec![b"p".to_vec(), b"q".to_vec()]);
    let t = get("t").t.as_ref().unwrap();
    assert_eq!(
        (t.dims.clone(), t.float_data.clone()),
        (vec![2], vec![1.0, 2.0])
    );
    let t2 = get("t2").t.as_ref().unwrap();
    assert!(t2.dims.is_empty());
    assert_eq!(t2.int64_data, vec![3]);
    assert_eq!(t2.data_type, Some(7));
    assert_eq!(get("ft").r#type(), AttributeType::Float);
    assert_eq!(get("ft").f, Some(1.0));
    assert_eq!(get("e").r#type(), AttributeType::Ints);
    assert!(get("e").ints.is_empty());
    assert_eq!(get("n").f, Some(f32::NEG_INFINITY));
    assert_eq!(get("tn").t.as_ref().unwrap().name(), "named");
    assert_eq!(g.node[1].attribute[0].i, Some(4));
}

#[test]
fn element_types_and_storage() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["": 13]>
g (float[2] x) => (float[2] y)
<bool[2] b = {1, 0}, double[2] d = {1.5, 2}, float16[1] h = {15360}, int8[2] i8 = {-1, 2},
 uint8[1] u8 = {255}, uint64[1] u64 = {5}, int32[1] i32 = {7}, uint32[1] u32 = {3},
 int16[1] i16 = {-4}, uint16[1] u16 = {9}, float[2, 2] f = {1, 2, 3, 4}, float fs = {2.5},
 int64[0] empty = {}>
{ y = Identity(x) }"#,
    );
    let g = m.graph.unwrap();
    let t = |n: &str| {
        g.initializer
            .iter()
            .find(|t| t.name() == n)
            .unwrap()
            .clone()
    };
    assert_eq!(t("b").int32_data, vec![1, 0]);
    assert_eq!(t("b").data_type, Some(9));
    assert_eq!(t("d").double_data, vec![1.5, 2.0]);
    assert_eq!(t("h").int32_data, vec![15360]);
    assert_eq!(t("i8").int32_data, vec![-1, 2]);
    assert_eq!(t("u64").uint64_data, vec![5]);
    assert_eq!(t("u32").uint64_data, vec![3]);
    assert_eq!(t("f").dims, vec![2, 2]);
    assert!(t("fs").dims.is_empty());
    assert_eq!(t("fs").float_data, vec![2.5]);
    assert_eq!(t("empty").dims, vec![0]);
}

#[test]
fn optional_inputs_and_quoted_names() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["": 13]>
"my graph" (float["batch", ?, 3] "x.0") => (float[2] y)
{ y, , z = Op(, "x.0", , w) }"#,
    );
    let g = m.graph.unwrap();
    assert_eq!(g.name(), "my graph");
    assert_eq!(g.input[0].name(), "x.0");
    assert_eq!(g.node[0].input, vec!["", "x.0", "", "w"]);
    assert_eq!(g.node[0].output, vec!["y", "", "z"]);
}

#[test]
fn graph_attribute_and_input_initializer() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["": 13]>
g (bool c, int64[2] k = {1, 2}) => (float[2] y)
{ y = If(c) <then_branch = t () => (float[1] a) { a = Constant <value = float[1] {1}> () },
         else_branch = e () => (float[1] b) { b = Constant <value = float[1] {2}> () }> }"#,
    );
    let g = m.graph.unwrap();
    assert_eq!(g.input.len(), 2);
    assert_eq!(g.initializer[0].name(), "k");
    let a = &g.node[0].attribute[0];
    assert_eq!(a.r#type(), AttributeType::Graph);
    assert_eq!(a.g.as_ref().unwrap().node.len(), 1);
}

#[test]
fn syntax_errors_have_positions() {
    let (line, col, reason) =
        syntax_err("<ir_version: 8>\ng (float[2] x) => (float[2] y)\n{ y = Relu(x }");
    assert_eq!((line, col), (3, 14), "{reason}");
    assert!(reason.contains("')'"), "{reason}");
    let (line, col, _) = syntax_err("<ir_version: 8>\ng (flot[2] x) => (float y) { }");
    assert_eq!((line, col), (2, 4));
    let (line, _, reason) = syntax_err("<bogus: 1> g () => () {}");
    assert_eq!(line, 1);
    assert!(reason.contains("bogus"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () { y = Op <a = [1, 2.5]> (x) }");
    assert!(reason.contains("FLOAT"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () { y = Op <a = []> (x) }");
    assert!(reason.contains("type annotation"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () <int64[2] k = {1.5, 2}> { }");
    assert!(reason.contains("integer"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () <float[] k = {1}> { }");
    assert!(reason.contains("shape"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () <float[1] k = {1e99}> { }");
    assert!(reason.contains("out of range"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () <int64[1] k = {99999999999999999999}> { }");
    assert!(reason.contains("out of range"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () <int8[1] k = {3000000000}> { }");
    assert!(reason.contains("32-bit"), "{reason}");
    let (_, _, reason) = syntax_err("g () = > () { }");
    assert!(reason.contains("=>"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () { } extra () => () { }");
    assert!(reason.contains("functions"), "{reason}");
    let (_, _, reason) = syntax_err("g () => () { y = Op <s = \"abc> (x) }");
    assert!(reason.contains("unterminated"), "{reason}");
    // Unicode before the error counts as one column per character.
    let (_, col, _) = syntax_err("g (float[2] \"é\") => () { y = }");
    assert_eq!(col, 30);
}

#[test]
fn never_panics_on_truncations_and_junk() {
    for end in 0..MLP.len() {
        if MLP.is_char_boundary(end) {
            let _ = parse_model_text(&MLP[..end]);
        }
    }
    for junk in [
        "", "<", "<>", "\"", "-", "g(", "g()=>", "g()=>(){", "@@@", "\u{0}", "1e",
    ] {
        let _ = parse_model_text(junk);
    }
    let deep = format!(
        "g () => () {{ y = Op <t = {}float{}> () }}",
        "seq(".repeat(200),
        ")".repeat(200)
    );
    let (_, _, reason) = syntax_err(&deep);
    assert!(reason.contains("nesting"), "{reason}");
}
