//! Tests of the normalizations and Softmax/LogSoftmax.

use super::*;
use crate::ops::test_util::{attr_f, attr_i, convert_inputs, data_inputs, f32t};
use arenac_proto::AttributeProto;

/// Converts a node whose inputs all have type `ty` (no constants).
fn convert(
    op_type: &str,
    opset: i64,
    inputs: &[TensorType],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> Result<Op, OpError> {
    convert_inputs(op_type, opset, attrs, data_inputs(inputs), outputs).map(|(op, _)| op)
}

fn run(op: &Op, inputs: &[Tensor]) -> Vec<f64> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = eval(op, &refs).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(vec![out[0].ty()], infer(op, &types).unwrap());
    out[0].to_f64_vec()
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}

#[test]
fn batchnorm() {
    let c = f32t(&[2]);
    let ins = [
        f32t(&[1, 2, 1, 2]),
        c.clone(),
        c.clone(),
        c.clone(),
        c.clone(),
    ];
    let op = convert(
        "BatchNormalization",
        15,
        &ins,
        &["y"],
        vec![attr_f("epsilon", 0.0)],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::BatchNormalization {
            epsilon: 0.0,
            training: None
        }
    );
    assert_eq!(name(&op), "BatchNormalization");
    assert_eq!(attrs(&op), vec![("epsilon", "0.0".to_string())]);
    // y = (x - mean) / sqrt(var) * scale + B, per channel.
    let y = run(
        &op,
        &[
            Tensor::f32(vec![1, 2, 1, 2], &[1.0, 2.0, 3.0, 4.0]),
            Tensor::f32(vec![2], &[1.0, 2.0]),
            Tensor::f32(vec![2], &[0.0, 1.0]),
            Tensor::f32(vec![2], &[1.0, 3.0]),
            Tensor::f32(vec![2], &[4.0, 1.0]),
        ],
    );
    close(&y, &[0.0, 0.5, 1.0, 3.0]);
    // Default epsilon.
    let op = convert("BatchNormalization", 9, &ins, &["y"], vec![]).unwrap();
    assert_eq!(
        op,
        Op::BatchNormalization {
            epsilon: 1e-5,
            training: None
        }
    );
}

#[test]
fn batchnorm_errors() {
    let c = f32t(&[2]);
    let ins = [f32t(&[1, 2, 3]), c.clone(), c.clone(), c.clone(), c.clone()];
    let e = convert("BatchNormalization", 15, &ins, &["y", "m"], vec![]);
    assert!(matches!(e, Err(OpError::Unsupported(_))));
    let e = convert(
        "BatchNormalization",
        7,
        &ins,
        &["y"],
        vec![attr_i("spatial", 0)],
    );
    assert!(matches!(e, Err(OpError::Unsupported(_))));
    let e = convert("BatchNormalization", 9, &ins, &["y", "m", "v"], vec![]);
    assert!(matches!(e, Err(OpError::Unsupported(_))));
    let op = Op::BatchNormalization {
        epsilon: 1e-5,
        training: None,
    };
    let bad = [
        f32t(&[1, 2, 3]),
        f32t(&[3]),
        c.clone(),
        c.clone(),
        c.clone(),
    ];
    assert!(matches!(
        infer(&op, &bad),
        Err(OpError::ShapeMismatch { .. })
    ));
    let mut bad = ins.clone();
    bad[0].dtype = DType::I32;
    assert!(matches!(infer(&op, &bad), Err(OpError::DType { .. })));
    assert!(infer(&op, &ins[..4]).is_err());
}

#[test]
fn layernorm() {
    let ins = [f32t(&[2, 3]), f32t(&[3]), f32t(&[3])];
    let op = convert(
        "LayerNormalization",
        17,
        &ins,
        &["y"],
        vec![attr_f("epsilon", 0.0)],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::LayerNormalization {
            axis: 1,
            epsilon: 0.0,
            stats: None
        }
    );
    assert_eq!(name(&op), "LayerNormalization");
    // Row [1,2,3]: mean 2, var 2/3. Row [0,0,3]: mean 1, var 2.
    let a = (1.5f64).sqrt();
    let h = (0.5f64).sqrt();
    let y = run(
        &op,
        &[
            Tensor::f32(vec![2, 3], &[1.0, 2.0, 3.0, 0.0, 0.0, 3.0]),
            Tensor::f32(vec![3], &[1.0, 1.0, 2.0]),
            Tensor::f32(vec![3], &[0.0, 1.0, 0.0]),
        ],
    );
    close(&y, &[-a, 1.0, 2.0 * a, -h, 1.0 - h, 4.0 * h]);
    // No bias.
    let op = Op::LayerNormalization {
        axis: 0,
        epsilon: 0.0,
        stats: None,
    };
    let y = run(
        &op,
        &[
            Tensor::f32(vec![2, 3], &[1.0, 2.0, 3.0, 0.0, 0.0, 3.0]),
            Tensor::f32(vec![1], &[2.0]),
        ],
    );
    // mean 1.5, var (0.25+0.25+2.25+2.25+2.25+2.25)/6 = 19/12.
    let s = 2.0 / (19.0f64 / 12.0).sqrt();
    close(
        &y,
        &[-0.5 * s, 0.5 * s, 1.5 * s, -1.5 * s, -1.5 * s, 1.5 * s],
    );
}

#[test]
fn layernorm_errors() {
    let e = convert(
        "LayerNormalization",
        17,
        &[f32t(&[2, 3]), f32t(&[3])],
        &["y", "mean"],
        vec![attr_i("stash_type", 7)],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert(
        "LayerNormalization",
        17,
        &[f32t(&[2, 3]), f32t(&[3])],
        &["y"],
        vec![attr_i("axis", 2)],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let op = Op::LayerNormalization {
        axis: 1,
        epsilon: 1e-5,
        stats: None,
    };
    let e = infer(&op, &[f32t(&[2, 3]), f32t(&[2])]);
    assert!(matches!(e, Err(OpError::ShapeMismatch { .. })));
    let e = infer(&op, &[f32t(&[2, 3]), f32t(&[2, 2, 3])]);
    assert!(matches!(e, Err(OpError::ShapeMismatch { .. })));
    let e = infer(&op, &[TensorType::new(DType::I64, vec![2, 3]), f32t(&[3])]);
    assert!(matches!(e, Err(OpError::DType { .. })));
}

#[test]
fn lrn() {
    let x = f32t(&[1, 3, 1, 1]);
    let op = convert(
        "LRN",
        13,
        std::slice::from_ref(&x),
        &["y"],
        vec![attr_i("size", 3), attr_f("alpha", 3.0), attr_f("beta", 1.0)],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::Lrn(LrnAttrs {
            size: 3,
            alpha: 3.0,
            beta: 1.0,
            bias: 1.0
        })
    );
    assert_eq!(name(&op), "LRN");
    assert_eq!(attrs(&op)[0], ("size", "3".to_string()));
    // alpha/size = 1: y_c = x_c / (1 + sum of squares of the window).
    // Windows: c0 {0,1} = 5, c1 {0,1,2} = 14, c2 {1,2} = 13.
    let t = Tensor::f32(vec![1, 3, 1, 1], &[1.0, 2.0, 3.0]);
    close(
        &run(&op, std::slice::from_ref(&t)),
        &[1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0],
    );
    // Even size 2: window [c, c+1]: c0 {0,1} = 5, c1 {1,2} = 13, c2 {2} = 9.
    let op = Op::Lrn(LrnAttrs {
        size: 2,
        alpha: 2.0,
        beta: 1.0,
        bias: 1.0,
    });
    close(&run(&op, &[t]), &[1.0 / 6.0, 2.0 / 14.0, 3.0 / 10.0]);
    // beta 0.5, bias 2, alpha 1, size 1: y = x / sqrt(2 + x^2).
    let op = Op::Lrn(LrnAttrs {
        size: 1,
        alpha: 1.0,
        beta: 0.5,
        bias: 2.0,
    });
    let y = run(&op, &[Tensor::f32(vec![1, 2], &[1.0, 2.0])]);
    close(&y, &[1.0 / 3.0f64.sqrt(), 2.0 / 6.0f64.sqrt()]);
}

#[test]
fn lrn_errors() {
    let x = f32t(&[1, 3, 1, 1]);
    let e = convert("LRN", 13, std::slice::from_ref(&x), &["y"], vec![]);
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert("LRN", 13, &[x], &["y"], vec![attr_i("size", 0)]);
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let op = Op::Lrn(LrnAttrs {
        size: 3,
        alpha: 1.0,
        beta: 1.0,
        bias: 1.0,
    });
    assert!(matches!(
        infer(&op, &[f32t(&[3])]),
        Err(OpError::ShapeMismatch { .. })
    ));
}

#[test]
fn softmax_old_vs_new_axis() {
    let x = f32t(&[2, 3, 4]);
    let vals: Vec<f32> = (0..24).map(|i| i as f32 * 0.25).collect();
    let t = Tensor::f32(vec![2, 3, 4], &vals);
    let v: Vec<f64> = vals.iter().map(|&v| f64::from(v)).collect();

    // Opset 11, default axis 1: each batch's 12 elements form one row.
    let old = convert("Softmax", 11, std::slice::from_ref(&x), &["y"], vec![]).unwrap();
    assert_eq!(
        old,
        Op::Softmax {
            axis: 1,
            log: false,
            coerce_2d: true
        }
    );
    let y_old = run(&old, std::slice::from_ref(&t));
    for b in 0..2 {
        let row = &v[b * 12..b * 12 + 12];
        let sum: f64 = row.iter().map(|x| x.exp()).sum();
        for k in 0..12 {
            assert!((y_old[b * 12 + k] - row[k].exp() / sum).abs() < 1e-6);
        }
    }

    // Opset 13, axis 1: each line of 3 along axis 1 (stride 4).
    let new = convert(
        "Softmax",
        13,
        std::slice::from_ref(&x),
        &["y"],
        vec![attr_i("axis", 1)],
    )
    .unwrap();
    assert_eq!(
        new,
        Op::Softmax {
            axis: 1,
            log: false,
            coerce_2d: false
        }
    );
    let y_new = run(&new, std::slice::from_ref(&t));
    for b in 0..2 {
        for k in 0..4 {
            let idx = |c: usize| b * 12 + c * 4 + k;
            let sum: f64 = (0..3).map(|c| v[idx(c)].exp()).sum();
            for c in 0..3 {
                assert!((y_new[idx(c)] - v[idx(c)].exp() / sum).abs() < 1e-6);
            }
        }
    }
    assert!((y_old[0] - y_new[0]).abs() > 1e-3, "the semantics differ");

    // Opset 13 default axis is the last one; LogSoftmax is the log of Softmax.
    let last = convert("LogSoftmax", 13, std::slice::from_ref(&x), &["y"], vec![]).unwrap();
    assert_eq!(
        last,
        Op::Softmax {
            axis: 2,
            log: true,
            coerce_2d: false
        }
    );
    assert_eq!(name(&last), "LogSoftmax");
    assert_eq!(
        attrs(&last),
        vec![("axis", "2".to_string()), ("coerce_2d", "0".to_string())]
    );
    let y_log = run(&last, std::slice::from_ref(&t));
    let y_soft = run(
        &Op::Softmax {
            axis: 2,
            log: false,
            coerce_2d: false,
        },
        &[t],
    );
    // Rows of [a, a+.25, a+.5, a+.75]: softmax independent of a.
    let e: Vec<f64> = (0..4).map(|k| (k as f64 * 0.25).exp()).collect();
    let s: f64 = e.iter().sum();
    for i in 0..24 {
        assert!((y_soft[i] - e[i % 4] / s).abs() < 1e-6);
        assert!((y_log[i] - y_soft[i].ln()).abs() < 1e-6);
    }
}

#[test]
fn softmax_errors() {
    let e = convert(
        "Softmax",
        13,
        &[f32t(&[2, 3])],
        &["y"],
        vec![attr_i("axis", 2)],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let op = Op::Softmax {
        axis: 1,
        log: false,
        coerce_2d: false,
    };
    assert!(matches!(
        infer(&op, &[f32t(&[3])]),
        Err(OpError::ShapeMismatch { .. })
    ));
    let e = infer(&op, &[TensorType::new(DType::I32, vec![2, 3])]);
    assert!(matches!(e, Err(OpError::DType { .. })));
}
