//! SwiGLU and CausalConvWithState (expanded at import) and LinearAttention (a host kernel):
//! the JIT against the reference evaluation, and against plain formulas written here.

use crate::common::*;

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn swiglu_is_a_swish_gate() {
    let mut rng = Rng(0x5eed_0d01);
    for alpha in [1.0f32, 0.5] {
        let m = ModelBuilder::new("swiglu", 28)
            .input("a", DType::F32, &dims(&[3, 5]))
            .input("b", DType::F32, &dims(&[3, 5]))
            .output("y", DType::F32, &[])
            .node(
                "my_glu",
                "SwiGLU",
                &["a", "b"],
                &["y"],
                vec![("alpha", Attr::Float(alpha))],
            )
            .build();
        let (a, b) = (
            rng.tensor(&[3, 5], -3.0, 3.0),
            rng.tensor(&[3, 5], -1.0, 1.0),
        );
        let exe = check(m, &[a.clone(), b.clone()], 1e-5, 1e-6);
        let y = run(&exe, &[a.clone(), b.clone()])[0].to_f32_vec();
        for ((y, a), b) in y.iter().zip(a.to_f32_vec()).zip(b.to_f32_vec()) {
            let want = a * sigmoid(alpha * a) * b;
            assert!(
                (y - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{y} vs {want}"
            );
        }
    }
}

fn causal_model(k: usize, bias: bool, past: bool, act: &str) -> ModelProto {
    let (b, c, l) = (2, 3, 5);
    let mut m = ModelBuilder::new("causal", 27)
        .input("x", DType::F32, &dims(&[b, c, l]))
        .input("w", DType::F32, &dims(&[c, 1, k]));
    if bias {
        m = m.input("bias", DType::F32, &dims(&[c]));
    }
    if past {
        m = m.input("past", DType::F32, &dims(&[b, c, k - 1]));
    }
    let ins = [
        "x",
        "w",
        if bias { "bias" } else { "" },
        if past { "past" } else { "" },
    ];
    let n = if past {
        4
    } else if bias {
        3
    } else {
        2
    };
    m.output("y", DType::F32, &[])
        .output("state", DType::F32, &[])
        .node(
            "my_conv",
            "CausalConvWithState",
            &ins[..n],
            &["y", "state"],
            vec![("activation", Attr::Str(act.into()))],
        )
        .build()
}

#[test]
fn causal_conv_with_state_matches_a_plain_loop() {
    let mut rng = Rng(0x5eed_0d02);
    let (b, c, l) = (2usize, 3usize, 5usize);
    for (k, bias, past, act) in [
        (3, false, false, "none"),
        (4, true, true, "silu"),
        (2, false, true, "swish"),
        (1, true, false, "none"),
    ] {
        let m = causal_model(k, bias, past, act);
        let mut ins = vec![
            rng.tensor(&[b, c, l], -1.0, 1.0),
            rng.tensor(&[c, 1, k], -1.0, 1.0),
        ];
        if bias {
            ins.push(rng.tensor(&[c], -1.0, 1.0));
        }
        if past {
            ins.push(rng.tensor(&[b, c, k - 1], -1.0, 1.0));
        }
        let exe = check(m, &ins, 1e-5, 1e-6);
        let got = run(&exe, &ins);
        let (x, w) = (ins[0].to_f32_vec(), ins[1].to_f32_vec());
        let bv = bias.then(|| ins[2].to_f32_vec());
        let pv = past.then(|| ins[ins.len() - 1].to_f32_vec());
        // Padded sequence per (batch, channel): past (or zeros) then x.
        let padded = |n: usize, ch: usize, j: usize| -> f32 {
            if j < k - 1 {
                pv.as_ref().map_or(0.0, |p| p[(n * c + ch) * (k - 1) + j])
            } else {
                x[(n * c + ch) * l + j - (k - 1)]
            }
        };
        let (y, state) = (got[0].to_f32_vec(), got[1].to_f32_vec());
        for n in 0..b {
            for ch in 0..c {
                for t in 0..l {
                    let mut s: f32 = (0..k).map(|i| w[ch * k + i] * padded(n, ch, t + i)).sum();
                    s += bv.as_ref().map_or(0.0, |bv| bv[ch]);
                    if act != "none" {
                        s *= sigmoid(s);
                    }
                    let g = y[(n * c + ch) * l + t];
                    assert!(
                        (g - s).abs() <= 1e-5 * (1.0 + s.abs()),
                        "k {k} {act}: {g} vs {s}"
                    );
                }
                for j in 0..k - 1 {
                    assert_eq!(state[(n * c + ch) * (k - 1) + j], padded(n, ch, l + j));
                }
            }
        }
    }
}

fn linear_model(
    rule: &str,
    hq: usize,
    hk: usize,
    past: bool,
    decay_w: usize,
    beta_w: usize,
) -> ModelProto {
    let (b, t, dk, dv) = (2, 3, 4, 5);
    let mut m = ModelBuilder::new("linear", 27)
        .input("q", DType::F32, &dims(&[b, t, hq * dk]))
        .input("k", DType::F32, &dims(&[b, t, hk * dk]))
        .input("v", DType::F32, &dims(&[b, t, hk * dv]));
    let mut ins = vec!["q", "k", "v"];
    if past {
        m = m.input("p", DType::F32, &dims(&[b, hk, dk, dv]));
    }
    ins.push(if past { "p" } else { "" });
    if decay_w > 0 {
        m = m.input("g", DType::F32, &dims(&[b, t, decay_w]));
    }
    ins.push(if decay_w > 0 { "g" } else { "" });
    if beta_w > 0 {
        m = m.input("beta", DType::F32, &dims(&[b, t, beta_w]));
    }
    ins.push(if beta_w > 0 { "beta" } else { "" });
    while ins.last() == Some(&"") {
        ins.pop();
    }
    m.output("y", DType::F32, &[])
        .output("s", DType::F32, &[])
        .node(
            "my_lin",
            "LinearAttention",
            &ins,
            &["y", "s"],
            vec![
                ("update_rule", Attr::Str(rule.into())),
                ("q_num_heads", Attr::Int(hq as i64)),
                ("kv_num_heads", Attr::Int(hk as i64)),
            ],
        )
        .build()
}

#[test]
fn linear_attention_rules_match_the_reference() {
    let mut rng = Rng(0x5eed_0d03);
    let (b, t, dk, dv) = (2, 3, 4, 5);
    for (rule, hq, hk, past, dw, bw) in [
        ("linear", 2, 2, false, 0, 0),
        ("gated", 4, 2, true, 2, 0),
        ("gated", 2, 2, false, 2 * dk, 0),
        ("delta", 2, 1, false, 0, 1),
        ("gated_delta", 4, 2, true, 2 * dk, 2),
    ] {
        let mut ins = vec![
            rng.tensor(&[b, t, hq * dk], -1.0, 1.0),
            rng.tensor(&[b, t, hk * dk], -0.5, 0.5),
            rng.tensor(&[b, t, hk * dv], -1.0, 1.0),
        ];
        if past {
            ins.push(rng.tensor(&[b, hk, dk, dv], -1.0, 1.0));
        }
        if dw > 0 {
            ins.push(rng.tensor(&[b, t, dw], -1.0, 0.0));
        }
        if bw > 0 {
            ins.push(rng.tensor(&[b, t, bw], 0.0, 1.0));
        }
        check(linear_model(rule, hq, hk, past, dw, bw), &ins, 1e-4, 1e-5);
    }
}

#[test]
fn linear_attention_linear_rule_is_a_causal_sum() {
    // o_t = q_t^T sum_{s <= t} k_s v_s^T / sqrt(d_k), one head.
    let mut rng = Rng(0x5eed_0d04);
    let (b, t, dk, dv) = (2, 3, 4, 5);
    let m = linear_model("linear", 1, 1, false, 0, 0);
    let ins = vec![
        rng.tensor(&[b, t, dk], -1.0, 1.0),
        rng.tensor(&[b, t, dk], -1.0, 1.0),
        rng.tensor(&[b, t, dv], -1.0, 1.0),
    ];
    let exe = check(m, &ins, 1e-4, 1e-5);
    let y = run(&exe, &ins)[0].to_f32_vec();
    let (q, k, v) = (
        ins[0].to_f32_vec(),
        ins[1].to_f32_vec(),
        ins[2].to_f32_vec(),
    );
    for n in 0..b {
        for i in 0..t {
            for mm in 0..dv {
                let mut o = 0.0f32;
                for s in 0..=i {
                    let qk: f32 = (0..dk)
                        .map(|d| q[(n * t + i) * dk + d] * k[(n * t + s) * dk + d])
                        .sum();
                    o += qk * v[(n * t + s) * dv + mm];
                }
                o /= (dk as f32).sqrt();
                let g = y[(n * t + i) * dv + mm];
                assert!((g - o).abs() <= 1e-5 * (1.0 + o.abs()), "{g} vs {o}");
            }
        }
    }
}
