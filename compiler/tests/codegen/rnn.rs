//! LSTM, GRU and RNN, expanded at import into a Scan per direction (compiler/src/import/rnn):
//! the JIT against the reference evaluation of the expanded graph on random sizes and
//! attributes, and against the gate equations written out directly here (an LSTM and a GRU
//! loop in f64); long sequences compile to one loop body.

use arenac_proto::AttributeProto;
use arenac_proto::attribute_proto::AttributeType;

use crate::common::*;

/// One random recurrent case.
struct Case {
    op: &'static str,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    direction: &'static str,
    layout: i64,
    bias: bool,
    h0: bool,
    c0: bool,
    peep: bool,
    /// W, R (and B, P) as initializers instead of run-time inputs.
    weights_const: bool,
    opset: i64,
    extra: Vec<(&'static str, Attr)>,
    activations: Option<Vec<&'static str>>,
    /// Which outputs are declared (Y, Y_h, Y_c).
    outs: [bool; 3],
}

fn gates(op: &str) -> usize {
    match op {
        "LSTM" => 4,
        "GRU" => 3,
        _ => 1,
    }
}

impl Case {
    fn random(op: &'static str, rng: &mut Rng) -> Case {
        let pick = |rng: &mut Rng, n: u64| (rng.next() % n) as usize;
        let direction = ["forward", "reverse", "bidirectional"][pick(rng, 3)];
        let lstm = op == "LSTM";
        let mut extra = Vec::new();
        if pick(rng, 3) == 0 {
            extra.push(("clip", Attr::Float(rng.f32(0.5, 3.0))));
        }
        if lstm && pick(rng, 3) == 0 {
            extra.push(("input_forget", Attr::Int(1)));
        }
        if op == "GRU" {
            extra.push(("linear_before_reset", Attr::Int(pick(rng, 2) as i64)));
        }
        let n_out = if lstm { 3 } else { 2 };
        let mut outs = [false; 3];
        for o in outs.iter_mut().take(n_out) {
            *o = pick(rng, 3) != 0;
        }
        if !outs.iter().any(|&o| o) {
            outs[1] = true;
        }
        let activations = match (op, pick(rng, 4)) {
            ("RNN", 0) => Some(vec!["Relu"]),
            ("RNN", 1) => {
                extra.push(("activation_alpha", Attr::Floats(vec![0.3, 0.05])));
                Some(vec!["LeakyRelu"])
            }
            ("GRU", 0) => Some(vec!["HardSigmoid", "Affine"]),
            ("LSTM", 0) => Some(vec!["Sigmoid", "ScaledTanh", "Tanh"]),
            _ => None,
        };
        // Clip takes attributes below opset 11; layout exists from 14.
        let opset = [7, 10, 13, 22][pick(rng, 4)];
        Case {
            op,
            opset,
            seq: 1 + pick(rng, 5),
            batch: 1 + pick(rng, 3),
            input: 1 + pick(rng, 5),
            hidden: 1 + pick(rng, 6),
            dirs: if direction == "bidirectional" { 2 } else { 1 },
            direction,
            layout: if opset >= 14 { pick(rng, 2) as i64 } else { 0 },
            bias: pick(rng, 2) == 0,
            h0: pick(rng, 2) == 0,
            c0: lstm && pick(rng, 2) == 0,
            peep: lstm && pick(rng, 2) == 0,
            weights_const: pick(rng, 2) == 0,
            extra,
            activations,
            outs,
        }
    }

    fn state_shape(&self) -> Vec<usize> {
        if self.layout == 0 {
            vec![self.dirs, self.batch, self.hidden]
        } else {
            vec![self.batch, self.dirs, self.hidden]
        }
    }

    /// The model and its run-time input values, in graph-input order.
    fn model(&self, rng: &mut Rng) -> (ModelProto, Vec<Tensor>) {
        let (nd, h, g) = (self.dirs, self.hidden, gates(self.op));
        let x_shape = if self.layout == 0 {
            vec![self.seq, self.batch, self.input]
        } else {
            vec![self.batch, self.seq, self.input]
        };
        let mut operands: Vec<(&str, Vec<usize>, bool)> = vec![
            ("X", x_shape, false),
            ("W", vec![nd, g * h, self.input], self.weights_const),
            ("R", vec![nd, g * h, h], self.weights_const),
        ];
        let mut names = vec!["X", "W", "R"];
        let mut optional = |name: &'static str, on: bool, shape: Vec<usize>, c: bool| {
            if on {
                operands.push((name, shape, c));
                names.push(name);
            } else {
                names.push("");
            }
        };
        optional("B", self.bias, vec![nd, 2 * g * h], self.weights_const);
        optional("", false, vec![], false);
        optional("initial_h", self.h0, self.state_shape(), false);
        if self.op == "LSTM" {
            optional("initial_c", self.c0, self.state_shape(), false);
            optional("P", self.peep, vec![nd, 3 * h], self.weights_const);
        }
        while names.last() == Some(&"") {
            names.pop();
        }
        let mut b = ModelBuilder::new("rnn", self.opset);
        let mut values = Vec::new();
        for (name, shape, c) in &operands {
            let t = rng.tensor(shape, -0.8, 0.8);
            if *c {
                b = b.initializer(name, &t);
            } else {
                b = b.input(name, DType::F32, &dims(shape));
                values.push(t);
            }
        }
        let y_shape = if self.layout == 0 {
            vec![self.seq, nd, self.batch, h]
        } else {
            vec![self.batch, self.seq, nd, h]
        };
        let out_names = ["Y", "Y_h", "Y_c"];
        let mut outs: Vec<&str> = Vec::new();
        for (k, &on) in self.outs.iter().enumerate() {
            outs.push(if on { out_names[k] } else { "" });
            if on {
                let shape = if k == 0 {
                    y_shape.clone()
                } else {
                    self.state_shape()
                };
                b = b.output(out_names[k], DType::F32, &dims(&shape));
            }
        }
        while outs.last() == Some(&"") {
            outs.pop();
        }
        let mut attrs = vec![
            ("hidden_size", Attr::Int(h as i64)),
            ("direction", Attr::Str(self.direction.into())),
        ];
        if self.opset >= 14 {
            attrs.push(("layout", Attr::Int(self.layout)));
        }
        attrs.extend(self.extra.iter().cloned());
        let mut m = b.node("rec", self.op, &names, &outs, attrs).build();
        if let Some(acts) = &self.activations {
            let node = &mut m.graph.as_mut().expect("graph").node[0];
            node.attribute.push(strings_attr("activations", acts));
        }
        (m, values)
    }
}

fn strings_attr(name: &str, v: &[&str]) -> AttributeProto {
    let mut a = AttributeProto {
        name: Some(name.into()),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..AttributeProto::default()
    };
    a.set_type(AttributeType::Strings);
    a
}

fn random_cases(op: &'static str, seed: u64, n: usize) {
    let mut rng = Rng(seed);
    for _ in 0..n {
        let case = Case::random(op, &mut rng);
        let (m, inputs) = case.model(&mut rng);
        check(m, &inputs, 1e-4, 1e-5);
    }
}

#[test]
fn lstm_random_against_reference() {
    random_cases("LSTM", 0x157a, 24);
}

#[test]
fn gru_random_against_reference() {
    random_cases("GRU", 0x6e0, 24);
}

#[test]
fn rnn_random_against_reference() {
    random_cases("RNN", 0x2a11, 24);
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `sum_k a[k] * m[row][k]` for row-major `m` with `cols` columns.
fn dot_row(a: &[f64], m: &[f64], row: usize, cols: usize) -> f64 {
    a.iter()
        .zip(&m[row * cols..(row + 1) * cols])
        .map(|(x, y)| x * y)
        .sum()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_f32_vec().into_iter().map(f64::from).collect()
}

fn compile_run(m: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let g = import(m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    run(&exe, inputs)
}

fn assert_close(got: &Tensor, want: &[f64], what: &str) {
    let got = got.to_f32_vec();
    assert_eq!(got.len(), want.len(), "{what} length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let ok = (f64::from(*a) - b).abs() <= 1e-5 + 1e-4 * b.abs();
        assert!(ok, "{what}[{i}]: got {a}, want {b}");
    }
}

/// A forward LSTM with bias, peepholes and initial states, by its equations (ONNX spec).
#[test]
fn lstm_against_direct_loop() {
    let mut rng = Rng(77);
    let (seq, batch, inp, h) = (4, 2, 3, 5);
    let x = rng.tensor(&[seq, batch, inp], -1.0, 1.0);
    let w = rng.tensor(&[1, 4 * h, inp], -0.7, 0.7);
    let r = rng.tensor(&[1, 4 * h, h], -0.7, 0.7);
    let b = rng.tensor(&[1, 8 * h], -0.5, 0.5);
    let h0 = rng.tensor(&[1, batch, h], -1.0, 1.0);
    let c0 = rng.tensor(&[1, batch, h], -1.0, 1.0);
    let p = rng.tensor(&[1, 3 * h], -0.5, 0.5);
    let state = dims(&[1, batch, h]);
    let m = ModelBuilder::new("lstm", 14)
        .input("X", DType::F32, &dims(&[seq, batch, inp]))
        .input("h0", DType::F32, &state)
        .input("c0", DType::F32, &state)
        .initializer("W", &w)
        .initializer("R", &r)
        .initializer("B", &b)
        .initializer("P", &p)
        .output("Y", DType::F32, &dims(&[seq, 1, batch, h]))
        .output("Y_h", DType::F32, &state)
        .output("Y_c", DType::F32, &state)
        .node(
            "lstm",
            "LSTM",
            &["X", "W", "R", "B", "", "h0", "c0", "P"],
            &["Y", "Y_h", "Y_c"],
            vec![("hidden_size", Attr::Int(h as i64))],
        )
        .build();
    let got = compile_run(&m, &[x.clone(), h0.clone(), c0.clone()]);

    let (xv, wv, rv, bv, pv) = (f64s(&x), f64s(&w), f64s(&r), f64s(&b), f64s(&p));
    let mut hs = f64s(&h0);
    let mut cs = f64s(&c0);
    let mut y = Vec::new();
    for t in 0..seq {
        let mut hn = vec![0.0; batch * h];
        let mut cn = vec![0.0; batch * h];
        for n in 0..batch {
            let xt = &xv[(t * batch + n) * inp..(t * batch + n + 1) * inp];
            let hp = &hs[n * h..(n + 1) * h];
            // Gate k (i, o, f, c), unit j: pre-activation.
            let pre = |k: usize, j: usize| {
                let row = k * h + j;
                dot_row(xt, &wv, row, inp) + dot_row(hp, &rv, row, h) + bv[row] + bv[4 * h + row]
            };
            for j in 0..h {
                let c_prev = cs[n * h + j];
                let i = sigmoid(pre(0, j) + pv[j] * c_prev);
                let f = sigmoid(pre(2, j) + pv[2 * h + j] * c_prev);
                let c = f * c_prev + i * pre(3, j).tanh();
                let o = sigmoid(pre(1, j) + pv[h + j] * c);
                cn[n * h + j] = c;
                hn[n * h + j] = o * c.tanh();
            }
        }
        y.extend_from_slice(&hn);
        hs = hn;
        cs = cn;
    }
    assert_close(&got[0], &y, "Y");
    assert_close(&got[1], &hs, "Y_h");
    assert_close(&got[2], &cs, "Y_c");
}

/// A reverse GRU with bias, both `linear_before_reset` modes, by its equations (ONNX spec).
#[test]
fn gru_against_direct_loop() {
    for lbr in [0usize, 1] {
        let mut rng = Rng(91 + lbr as u64);
        let (seq, batch, inp, h) = (3, 2, 4, 3);
        let x = rng.tensor(&[seq, batch, inp], -1.0, 1.0);
        let w = rng.tensor(&[1, 3 * h, inp], -0.7, 0.7);
        let r = rng.tensor(&[1, 3 * h, h], -0.7, 0.7);
        let b = rng.tensor(&[1, 6 * h], -0.5, 0.5);
        let state = dims(&[1, batch, h]);
        let m = ModelBuilder::new("gru", 14)
            .input("X", DType::F32, &dims(&[seq, batch, inp]))
            .input("W", DType::F32, &dims(&[1, 3 * h, inp]))
            .input("R", DType::F32, &dims(&[1, 3 * h, h]))
            .input("B", DType::F32, &dims(&[1, 6 * h]))
            .output("Y", DType::F32, &dims(&[seq, 1, batch, h]))
            .output("Y_h", DType::F32, &state)
            .node(
                "gru",
                "GRU",
                &["X", "W", "R", "B"],
                &["Y", "Y_h"],
                vec![
                    ("hidden_size", Attr::Int(h as i64)),
                    ("direction", Attr::Str("reverse".into())),
                    ("linear_before_reset", Attr::Int(lbr as i64)),
                ],
            )
            .build();
        let got = compile_run(&m, &[x.clone(), w.clone(), r.clone(), b.clone()]);

        let (xv, wv, rv, bv) = (f64s(&x), f64s(&w), f64s(&r), f64s(&b));
        let mut hs = vec![0.0; batch * h];
        let mut y = vec![0.0; seq * batch * h];
        for t in (0..seq).rev() {
            let mut hn = vec![0.0; batch * h];
            for n in 0..batch {
                let xt = &xv[(t * batch + n) * inp..(t * batch + n + 1) * inp];
                let hp = &hs[n * h..(n + 1) * h];
                let xpart = |k: usize, j: usize| dot_row(xt, &wv, k * h + j, inp) + bv[k * h + j];
                let hpart = |v: &[f64], k: usize, j: usize| {
                    dot_row(v, &rv, k * h + j, h) + bv[3 * h + k * h + j]
                };
                let z: Vec<f64> = (0..h)
                    .map(|j| sigmoid(xpart(0, j) + hpart(hp, 0, j)))
                    .collect();
                let rg: Vec<f64> = (0..h)
                    .map(|j| sigmoid(xpart(1, j) + hpart(hp, 1, j)))
                    .collect();
                let rh: Vec<f64> = (0..h).map(|j| rg[j] * hp[j]).collect();
                for j in 0..h {
                    let cand = if lbr == 1 {
                        (xpart(2, j) + rg[j] * hpart(hp, 2, j)).tanh()
                    } else {
                        (xpart(2, j) + hpart(&rh, 2, j)).tanh()
                    };
                    hn[n * h + j] = (1.0 - z[j]) * cand + z[j] * hp[j];
                }
            }
            y[t * batch * h..(t + 1) * batch * h].copy_from_slice(&hn);
            hs = hn;
        }
        assert_close(&got[0], &y, &format!("Y (linear_before_reset {lbr})"));
        assert_close(&got[1], &hs, &format!("Y_h (linear_before_reset {lbr})"));
    }
}

fn import_err(m: &ModelProto) -> String {
    match import_model(m, None, &ImportOptions::default()) {
        Ok(_) => panic!("expected an import error"),
        Err(e) => e.to_string(),
    }
}

fn rnn_model(seq: usize, lens: Option<&[i32]>, acts: Option<&[&str]>) -> ModelProto {
    let (batch, inp, h) = (2, 3, 4);
    let mut rng = Rng(5);
    let mut b = ModelBuilder::new("rnn", 14)
        .input("X", DType::F32, &dims(&[seq, batch, inp]))
        .initializer("W", &rng.tensor(&[1, h, inp], -1.0, 1.0))
        .initializer("R", &rng.tensor(&[1, h, h], -1.0, 1.0))
        .output("Y_h", DType::F32, &dims(&[1, batch, h]));
    let mut inputs = vec!["X", "W", "R"];
    if let Some(lens) = lens {
        let t = Tensor::from_bytes(
            DType::I32,
            vec![lens.len()],
            lens.iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
        )
        .expect("i32 tensor");
        b = b.initializer("lens", &t);
        inputs.extend(["", "lens"]);
    }
    let mut m = b
        .node(
            "my_rnn",
            "RNN",
            &inputs,
            &["", "Y_h"],
            vec![("hidden_size", Attr::Int(h as i64))],
        )
        .build();
    if let Some(acts) = acts {
        m.graph.as_mut().expect("graph").node[0]
            .attribute
            .push(strings_attr("activations", acts));
    }
    m
}

#[test]
fn sequence_lens_equal_to_the_length_is_accepted() {
    let m = rnn_model(3, Some(&[3, 3]), None);
    let mut rng = Rng(8);
    check(m, &[rng.tensor(&[3, 2, 3], -1.0, 1.0)], 1e-4, 1e-5);
}

#[test]
fn typed_errors_name_the_node() {
    let e = import_err(&rnn_model(3, Some(&[3, 2]), None));
    assert!(
        e.contains("my_rnn") && e.contains("variable sequence lengths"),
        "{e}"
    );
    let e = import_err(&rnn_model(2, None, Some(&["Gelu"])));
    assert!(
        e.contains("my_rnn") && e.contains("activation 'Gelu'"),
        "{e}"
    );
    let e = import_err(&rnn_model(2, None, Some(&["Tanh", "Tanh", "Tanh"])));
    assert!(e.contains("my_rnn") && e.contains("activations"), "{e}");
}

#[test]
fn long_sequences_are_one_loop_body() {
    // 5,000 steps (more than the old unrolling allowed): one Scan whose body holds one step.
    let m = rnn_model(5000, None, None);
    let g = import(&m);
    let scans: Vec<_> = g
        .nodes()
        .filter(|(_, n)| n.op.name() == "Scan")
        .map(|(_, n)| n)
        .collect();
    assert_eq!(scans.len(), 1);
    let body = &scans[0].op.subgraphs()[0].1;
    assert!(body.node_count() <= 4, "one step: {}", body.node_count());
    let x = Rng(9).tensor(&[5000, 2, 3], -1.0, 1.0);
    check_graph(&g, &[x], 1e-4, 1e-5);
}
