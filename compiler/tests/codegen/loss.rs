//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, expanded at import into ordinary
//! nodes: the JIT against the reference evaluation of the expanded graph on random shapes,
//! labels, weights, reductions and ignore indices (in range, negative, above the class count),
//! and both against a direct loss written here from ONNX's reference (an oracle independent
//! of the expansion).

use crate::common::*;

/// One random loss configuration.
#[derive(Clone, Debug)]
struct Cfg {
    sce: bool,
    /// Scores shape [N, C, d...].
    shape: Vec<usize>,
    weight: bool,
    reduction: &'static str,
    ignore_index: Option<i64>,
    log_prob: bool,
    target_i32: bool,
    opset: i64,
}

fn random_cfg(rng: &mut Rng, i: usize) -> Cfg {
    let pick = |rng: &mut Rng, n: u64| (rng.next() % n) as usize;
    let rank = 2 + pick(rng, 4);
    let mut shape = vec![1 + pick(rng, 3), 1 + pick(rng, 6)];
    for _ in 2..rank {
        shape.push(1 + pick(rng, 4));
    }
    let c = shape[1] as i64;
    let ignore_index = match pick(rng, 4) {
        0 => None,
        // In range (with one class that would ignore everything: above it instead).
        1 if c > 1 => Some(pick(rng, c as u64) as i64),
        1 => Some(c),
        2 => Some(-1 - pick(rng, 6) as i64),
        _ => Some(c + pick(rng, 4) as i64),
    };
    let sce = i % 2 == 1;
    Cfg {
        sce,
        shape,
        weight: pick(rng, 2) == 0,
        reduction: ["none", "sum", "mean"][pick(rng, 3)],
        ignore_index,
        log_prob: sce && pick(rng, 2) == 0,
        target_i32: pick(rng, 4) == 0,
        opset: [12, 13, 22][pick(rng, 3)],
    }
}

/// The model of `c` and its inputs. Labels are random classes, about a quarter replaced by
/// the ignore index; position 0 is never ignored (so a mean never divides by zero weight).
fn loss_case(c: &Cfg, rng: &mut Rng) -> (ModelProto, Vec<Tensor>) {
    let classes = c.shape[1];
    let mut t_shape = vec![c.shape[0]];
    t_shape.extend_from_slice(&c.shape[2..]);
    let n: usize = t_shape.iter().product();
    let labels: Vec<i64> = (0..n)
        .map(|k| match c.ignore_index {
            Some(ii) if k > 0 && rng.next().is_multiple_of(4) => ii,
            Some(ii) => loop {
                let v = (rng.next() % classes as u64) as i64;
                if v != ii {
                    break v;
                }
            },
            None => (rng.next() % classes as u64) as i64,
        })
        .collect();
    let t_dtype = if c.target_i32 { DType::I32 } else { DType::I64 };
    let target = Tensor::from_i64(t_dtype, t_shape.clone(), &labels);
    let (op, x, y, w) = if c.sce {
        ("SoftmaxCrossEntropyLoss", "scores", "labels", "weights")
    } else {
        ("NegativeLogLikelihoodLoss", "input", "target", "weight")
    };
    let mut m = ModelBuilder::new("loss", c.opset)
        .input(x, DType::F32, &dims(&c.shape))
        .input(y, t_dtype, &dims(&t_shape));
    let lo = if c.sce { -3.0 } else { -4.0 };
    let hi = if c.sce { 3.0 } else { 0.0 };
    let mut inputs = vec![rng.tensor(&c.shape, lo, hi), target];
    let mut names = vec![x, y];
    if c.weight {
        m = m.input(w, DType::F32, &dims(&[classes]));
        inputs.push(rng.tensor(&[classes], 0.1, 2.0));
        names.push(w);
    }
    let mut attrs = vec![("reduction", Attr::Str(c.reduction.to_string()))];
    if let Some(ii) = c.ignore_index {
        attrs.push(("ignore_index", Attr::Int(ii)));
    }
    let mut outs = vec!["loss"];
    m = m.output("loss", DType::F32, &[]);
    if c.log_prob {
        outs.push("log_prob");
        m = m.output("log_prob", DType::F32, &[]);
    }
    (m.node("l", op, &names, &outs, attrs).build(), inputs)
}

/// The loss of `c` computed directly (as onnx/reference/ops/op_*_loss.py): log-softmax over
/// the classes for SCE, then `-w[t] * x[n, t, d]` per position (0 where ignored), reduced.
/// Returns the loss values and, for SCE, the log-probabilities.
fn naive_loss(c: &Cfg, inputs: &[Tensor]) -> (Vec<f64>, Vec<f64>) {
    let (n, classes) = (c.shape[0], c.shape[1]);
    let d: usize = c.shape[2..].iter().product();
    let mut x: Vec<f64> = inputs[0]
        .to_f32_vec()
        .iter()
        .map(|&v| f64::from(v))
        .collect();
    if c.sce {
        for b in 0..n {
            for k in 0..d {
                let at = |j: usize| (b * classes + j) * d + k;
                let max = (0..classes).map(|j| x[at(j)]).fold(f64::MIN, f64::max);
                let sum: f64 = (0..classes).map(|j| (x[at(j)] - max).exp()).sum();
                for j in 0..classes {
                    x[at(j)] = x[at(j)] - max - sum.ln();
                }
            }
        }
    }
    let t = inputs[1].to_i64_vec();
    let w = c.weight.then(|| inputs[2].to_f32_vec());
    let mut loss = Vec::with_capacity(n * d);
    let mut weights = Vec::with_capacity(n * d);
    for b in 0..n {
        for k in 0..d {
            let label = t[b * d + k];
            if Some(label) == c.ignore_index {
                loss.push(0.0);
                weights.push(0.0);
                continue;
            }
            let label = usize::try_from(label).expect("labels in range");
            let wt = w.as_ref().map_or(1.0, |w| f64::from(w[label]));
            loss.push(-wt * x[(b * classes + label) * d + k]);
            weights.push(wt);
        }
    }
    let out = match c.reduction {
        "none" => loss,
        "sum" => vec![loss.iter().sum()],
        _ => vec![loss.iter().sum::<f64>() / weights.iter().sum::<f64>()],
    };
    (out, if c.sce { x } else { Vec::new() })
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what} length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (f64::from(g) - w).abs() <= 1e-4 + 1e-4 * w.abs();
        assert!(ok, "{what} element {i}: got {g}, want {w}");
    }
}

/// Random NLL and SCE configurations: JIT vs reference evaluation, and the loss (and
/// log_prob) vs the direct oracle.
#[test]
fn loss_random_vs_reference_and_naive() {
    let mut rng = Rng(0x1055_c0de_0bad_f00d);
    for i in 0..96 {
        let c = random_cfg(&mut rng, i);
        let (model, inputs) = loss_case(&c, &mut rng);
        let exe = check(model, &inputs, RTOL, ATOL);
        let got = run(&exe, &inputs);
        let (want, log_prob) = naive_loss(&c, &inputs);
        let mut t_shape = vec![c.shape[0]];
        t_shape.extend_from_slice(&c.shape[2..]);
        let want_shape: &[usize] = if c.reduction == "none" { &t_shape } else { &[] };
        assert_eq!(got[0].shape(), want_shape, "case {i} {c:?}: loss shape");
        assert_close(
            &got[0].to_f32_vec(),
            &want,
            &format!("case {i} {c:?}: loss"),
        );
        if c.log_prob {
            assert_eq!(got[1].shape(), &c.shape[..], "case {i}: log_prob shape");
            assert_close(
                &got[1].to_f32_vec(),
                &log_prob,
                &format!("case {i}: log_prob"),
            );
        }
    }
}

/// A bad reduction, a target of the wrong shape and float labels are typed import errors.
#[test]
fn loss_rejects_bad_models() {
    let base = |reduction: &str, t_shape: &[usize], t_dtype: DType| {
        ModelBuilder::new("loss", 13)
            .input("x", DType::F32, &dims(&[2, 3, 4]))
            .input("t", t_dtype, &dims(t_shape))
            .output("loss", DType::F32, &[])
            .node(
                "l",
                "NegativeLogLikelihoodLoss",
                &["x", "t"],
                &["loss"],
                vec![("reduction", Attr::Str(reduction.to_string()))],
            )
            .build()
    };
    for (m, want) in [
        (base("avg", &[2, 4], DType::I64), "reduction"),
        (base("sum", &[2, 3], DType::I64), "target"),
        (base("sum", &[2, 4], DType::F32), "int32 or int64"),
    ] {
        let err = import_model(&m, None, &ImportOptions::default())
            .err()
            .unwrap_or_else(|| panic!("expected an error mentioning {want}"));
        let text = err.to_string();
        assert!(
            text.contains(want) && text.contains("NegativeLogLikelihoodLoss"),
            "{text}"
        );
    }
}
