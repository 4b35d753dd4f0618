//! Attention and RotaryEmbedding, expanded at import into ordinary nodes: the JIT against the
//! reference evaluation of the expanded graph, and Attention's `Y` against a direct, naive
//! attention written here (an oracle independent of the expansion).

use crate::common::*;

/// Like `check`, but equal infinities also agree (qk_matmul_output carries the -inf bias).
fn check_inf(model: ModelProto, inputs: &[Tensor]) -> Executable {
    let g = import(&model);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(&g, inputs).expect("reference");
    assert_eq!(got.len(), want.len());
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.shape(), b.shape(), "output {o} shape");
        for (i, (x, y)) in a.to_f32_vec().iter().zip(b.to_f32_vec()).enumerate() {
            let ok =
                x == &y || (x - y).abs() <= 1e-5 + 1e-4 * y.abs() || (x.is_nan() && y.is_nan());
            assert!(ok, "output {o} element {i}: got {x}, want {y}");
        }
    }
    exe
}

/// One random Attention configuration.
#[derive(Clone, Debug)]
struct Cfg {
    rank3: bool,
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    q_len: usize,
    kv_len: usize,
    past: usize,
    head: usize,
    v_head: usize,
    /// None, or (bool?, rank, last dim shortened by)
    mask: Option<(bool, usize, usize)>,
    causal: bool,
    scale: Option<f32>,
    softcap: f32,
    mode: Option<i64>,
    nonpad: bool,
    /// (left, right) sliding window, -1 = unbounded (opset 25).
    window: (i64, i64),
}

fn random_cfg(rng: &mut Rng, i: usize) -> Cfg {
    let pick = |rng: &mut Rng, n: u64| (rng.next() % n) as usize;
    let kv_heads = 1 + pick(rng, 3);
    let q_heads = kv_heads * (1 + pick(rng, 3));
    let nonpad = i % 4 == 3;
    let past = if nonpad || pick(rng, 2) == 0 {
        0
    } else {
        1 + pick(rng, 4)
    };
    let kv_len = 1 + pick(rng, 6);
    let total = kv_len + past;
    let mask = match pick(rng, 3) {
        0 => None,
        _ => {
            let rank = 2 + pick(rng, 3);
            let short = if total > 1 { pick(rng, 2) } else { 0 };
            Some((pick(rng, 2) == 0, rank, short))
        }
    };
    Cfg {
        rank3: pick(rng, 2) == 0,
        batch: 1 + pick(rng, 2),
        q_heads,
        kv_heads,
        q_len: 1 + pick(rng, 5),
        kv_len,
        past,
        head: 2 + pick(rng, 6),
        v_head: 2 + pick(rng, 6),
        mask,
        causal: pick(rng, 2) == 0,
        scale: if pick(rng, 3) == 0 {
            Some(rng.f32(0.05, 0.5))
        } else {
            None
        },
        softcap: if pick(rng, 3) == 0 {
            rng.f32(1.0, 4.0)
        } else {
            0.0
        },
        mode: if pick(rng, 2) == 0 {
            Some(pick(rng, 4) as i64)
        } else {
            None
        },
        nonpad,
        window: if i % 3 == 2 {
            (pick(rng, 4) as i64 - 1, pick(rng, 4) as i64 - 1)
        } else {
            (-1, -1)
        },
    }
}

/// The model of `c` and its inputs (random values; bool masks keep one key per row).
fn attention_case(c: &Cfg, rng: &mut Rng) -> (ModelProto, Vec<Tensor>) {
    let total = c.kv_len + c.past;
    let opset = if c.window != (-1, -1) {
        25
    } else if c.nonpad {
        24
    } else {
        23
    };
    let (q_s, k_s, v_s) = if c.rank3 {
        (
            vec![c.batch, c.q_len, c.q_heads * c.head],
            vec![c.batch, c.kv_len, c.kv_heads * c.head],
            vec![c.batch, c.kv_len, c.kv_heads * c.v_head],
        )
    } else {
        (
            vec![c.batch, c.q_heads, c.q_len, c.head],
            vec![c.batch, c.kv_heads, c.kv_len, c.head],
            vec![c.batch, c.kv_heads, c.kv_len, c.v_head],
        )
    };
    let mut m = ModelBuilder::new("attn", opset)
        .input("Q", DType::F32, &dims(&q_s))
        .input("K", DType::F32, &dims(&k_s))
        .input("V", DType::F32, &dims(&v_s));
    let mut inputs = vec![
        rng.tensor(&q_s, -2.0, 2.0),
        rng.tensor(&k_s, -2.0, 2.0),
        rng.tensor(&v_s, -2.0, 2.0),
    ];
    let mut names = vec!["Q", "K", "V"];
    if let Some((is_bool, rank, short)) = c.mask {
        let full = [c.batch, c.q_heads, c.q_len, total - short];
        let s = full[4 - rank..].to_vec();
        let n: usize = s.iter().product();
        let t = if is_bool {
            let v: Vec<i64> = (0..n)
                .map(|i| i64::from(i.is_multiple_of(s[rank - 1]) || !rng.next().is_multiple_of(3)))
                .collect();
            Tensor::from_i64(DType::Bool, s.clone(), &v)
        } else {
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    if rng.next().is_multiple_of(5) {
                        f64::NEG_INFINITY
                    } else {
                        f64::from(rng.f32(-1.0, 1.0))
                    }
                })
                .collect();
            Tensor::from_f64(DType::F32, s.clone(), &v)
        };
        m = m.input("attn_mask", t.dtype(), &dims(&s));
        inputs.push(t);
        names.push("attn_mask");
    } else {
        names.push("");
    }
    if c.past > 0 {
        let pk = [c.batch, c.kv_heads, c.past, c.head];
        let pv = [c.batch, c.kv_heads, c.past, c.v_head];
        m = m
            .input("past_key", DType::F32, &dims(&pk))
            .input("past_value", DType::F32, &dims(&pv));
        inputs.push(rng.tensor(&pk, -2.0, 2.0));
        inputs.push(rng.tensor(&pv, -2.0, 2.0));
        names.extend(["past_key", "past_value"]);
    } else {
        names.extend(["", ""]);
    }
    if c.nonpad {
        let v: Vec<i64> = (0..c.batch)
            .map(|_| 1 + (rng.next() % total as u64) as i64)
            .collect();
        m = m.input("nonpad_kv_seqlen", DType::I64, &dims(&[c.batch]));
        inputs.push(Tensor::i64(vec![c.batch], &v));
        names.push("nonpad_kv_seqlen");
    }
    while names.last() == Some(&"") {
        names.pop();
    }
    let mut attrs = vec![("is_causal", Attr::Int(i64::from(c.causal)))];
    if c.window.0 >= 0 {
        attrs.push(("left_window_size", Attr::Int(c.window.0)));
    }
    if c.window.1 >= 0 {
        attrs.push(("right_window_size", Attr::Int(c.window.1)));
    }
    if c.rank3 {
        attrs.push(("q_num_heads", Attr::Int(c.q_heads as i64)));
        attrs.push(("kv_num_heads", Attr::Int(c.kv_heads as i64)));
    }
    if let Some(s) = c.scale {
        attrs.push(("scale", Attr::Float(s)));
    }
    if c.softcap > 0.0 {
        attrs.push(("softcap", Attr::Float(c.softcap)));
    }
    let mut outs = vec!["Y"];
    m = m.output("Y", DType::F32, &[]);
    if c.past > 0 {
        outs.extend(["present_key", "present_value"]);
        m = m
            .output("present_key", DType::F32, &[])
            .output("present_value", DType::F32, &[]);
    }
    if let Some(mode) = c.mode {
        attrs.push(("qk_matmul_output_mode", Attr::Int(mode)));
        while outs.len() < 3 {
            outs.push("");
        }
        outs.push("qk");
        m = m.output("qk", DType::F32, &[]);
    }
    let m = m.node("attn", "Attention", &names, &outs, attrs).build();
    (m, inputs)
}

/// `Y` of `c` computed directly: per batch, head and query row, softmax over the keys of
/// scaled (softcapped) dot products plus the mask/causal/padding bias.
fn naive_attention(c: &Cfg, inputs: &[Tensor]) -> Vec<f32> {
    let total = c.kv_len + c.past;
    let q = inputs[0].to_f32_vec();
    let k = inputs[1].to_f32_vec();
    let v = inputs[2].to_f32_vec();
    let mut next = 3;
    let mask = c.mask.map(|(is_bool, rank, short)| {
        next += 1;
        (inputs[next - 1].clone(), is_bool, rank, short)
    });
    let (pk, pv) = if c.past > 0 {
        next += 2;
        (inputs[next - 2].to_f32_vec(), inputs[next - 1].to_f32_vec())
    } else {
        (vec![], vec![])
    };
    let nonpad = c.nonpad.then(|| inputs[next].to_i64_vec());
    let rep = c.q_heads / c.kv_heads;
    // Element accessors in the [b, h, s, d] sense.
    let qa = |b: usize, h: usize, s: usize, d: usize| {
        if c.rank3 {
            q[(b * c.q_len + s) * c.q_heads * c.head + h * c.head + d]
        } else {
            q[((b * c.q_heads + h) * c.q_len + s) * c.head + d]
        }
    };
    let kvat = |x: &[f32], p: &[f32], hs: usize, b: usize, h: usize, s: usize, d: usize| {
        if s < c.past {
            return p[((b * c.kv_heads + h) * c.past + s) * hs + d];
        }
        let s = s - c.past;
        if c.rank3 {
            x[(b * c.kv_len + s) * c.kv_heads * hs + h * hs + d]
        } else {
            x[((b * c.kv_heads + h) * c.kv_len + s) * hs + d]
        }
    };
    let scale = c.scale.unwrap_or(1.0 / (c.head as f32).sqrt());
    let mut y = vec![0f32; c.batch * c.q_heads * c.q_len * c.v_head];
    for b in 0..c.batch {
        for h in 0..c.q_heads {
            let kh = h / rep;
            for i in 0..c.q_len {
                let mut logits = vec![0f64; total];
                let mut bias = vec![0f64; total];
                for (j, (l, bj)) in logits.iter_mut().zip(bias.iter_mut()).enumerate() {
                    let mut dot = 0f64;
                    for d in 0..c.head {
                        dot += f64::from(qa(b, h, i, d))
                            * f64::from(kvat(&k, &pk, c.head, b, kh, j, d));
                    }
                    let mut x = dot * f64::from(scale);
                    if c.softcap > 0.0 {
                        let sc = f64::from(c.softcap);
                        x = (x / sc).tanh() * sc;
                    }
                    *l = x;
                    if let Some((t, is_bool, rank, short)) = &mask {
                        let full = [b, h, i, j];
                        let s = t.shape();
                        let width = total - short;
                        let val = if j >= width {
                            f64::NEG_INFINITY
                        } else {
                            let mut idx = 0;
                            for (a, &dim) in s.iter().enumerate() {
                                let f = full[4 - rank + a];
                                idx = idx * dim + if dim == 1 { 0 } else { f };
                            }
                            let m = t.to_f64_vec()[idx];
                            if *is_bool {
                                if m != 0.0 { 0.0 } else { f64::NEG_INFINITY }
                            } else {
                                m
                            }
                        };
                        *bj += val;
                    }
                    let offset = match &nonpad {
                        Some(n) => n[b] - c.q_len as i64,
                        None => c.past as i64,
                    };
                    let diff = i as i64 + offset - j as i64;
                    if (c.causal && diff < 0)
                        || (c.window.0 >= 0 && diff > c.window.0)
                        || (c.window.1 >= 0 && -diff > c.window.1)
                    {
                        *bj = f64::NEG_INFINITY;
                    }
                    if let Some(n) = &nonpad
                        && j as i64 >= n[b]
                    {
                        *bj = f64::NEG_INFINITY;
                    }
                }
                let all_masked = bias.iter().all(|&x| x == f64::NEG_INFINITY);
                let z: Vec<f64> = logits.iter().zip(&bias).map(|(l, b)| l + b).collect();
                let mx = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = z.iter().map(|x| (x - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                for d in 0..c.v_head {
                    let mut acc = 0f64;
                    if !all_masked {
                        for (j, ej) in e.iter().enumerate() {
                            acc += ej / sum * f64::from(kvat(&v, &pv, c.v_head, b, kh, j, d));
                        }
                    }
                    let at = if c.rank3 {
                        (b * c.q_len + i) * c.q_heads * c.v_head + h * c.v_head + d
                    } else {
                        ((b * c.q_heads + h) * c.q_len + i) * c.v_head + d
                    };
                    y[at] = acc as f32;
                }
            }
        }
    }
    y
}

#[test]
fn attention_random_configurations() {
    let mut rng = Rng(0xa77e);
    for i in 0..150 {
        let c = random_cfg(&mut rng, i);
        let (m, inputs) = attention_case(&c, &mut rng);
        let exe = check_inf(m, &inputs);
        let got = run(&exe, &inputs);
        let want = naive_attention(&c, &inputs);
        let y = got[0].to_f32_vec();
        assert_eq!(y.len(), want.len(), "{c:?}");
        for (k, (a, b)) in y.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                "{c:?}: Y[{k}] = {a}, want {b}"
            );
        }
    }
}

#[test]
fn attention_errors_name_the_node() {
    let s = [1, 2, 3, 4];
    let m = ModelBuilder::new("attn", 23)
        .input("Q", DType::F32, &dims(&s))
        .input("K", DType::F32, &dims(&[1, 2, 3, 5]))
        .input("V", DType::F32, &dims(&s))
        .output("Y", DType::F32, &[])
        .node("my_attn", "Attention", &["Q", "K", "V"], &["Y"], vec![])
        .build();
    let err = import_model(&m, None, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("my_attn") && err.contains("Attention"),
        "{err}"
    );
    let m = ModelBuilder::new("attn", 22)
        .input("Q", DType::F32, &dims(&s))
        .input("K", DType::F32, &dims(&s))
        .input("V", DType::F32, &dims(&s))
        .output("Y", DType::F32, &[])
        .node("old", "Attention", &["Q", "K", "V"], &["Y"], vec![])
        .build();
    let err = import_model(&m, None, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("old") && err.contains("opset 23"), "{err}");
    // A causal mask too large to build at import is an error, not an allocation.
    let big = [1, 1, 1 << 17, 1];
    let m = ModelBuilder::new("attn", 23)
        .input("Q", DType::F32, &dims(&big))
        .input("K", DType::F32, &dims(&big))
        .input("V", DType::F32, &dims(&big))
        .output("Y", DType::F32, &[])
        .node(
            "huge",
            "Attention",
            &["Q", "K", "V"],
            &["Y"],
            vec![("is_causal", Attr::Int(1))],
        )
        .build();
    let err = import_model(&m, None, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("huge") && err.contains("too large"), "{err}");
}

#[test]
fn rotary_embedding_random() {
    let mut rng = Rng(0x40be);
    for i in 0..24 {
        let pick = |rng: &mut Rng, n: u64| (rng.next() % n) as usize;
        let (b, s, h) = (
            1 + pick(&mut rng, 2),
            1 + pick(&mut rng, 4),
            1 + pick(&mut rng, 3),
        );
        let d = 2 * (1 + pick(&mut rng, 4));
        let rot = if i % 2 == 0 {
            d
        } else {
            2 * (1 + pick(&mut rng, (d / 2) as u64))
        };
        let interleaved = pick(&mut rng, 2) as i64;
        let rank3 = i % 3 == 0;
        let x_s = if rank3 {
            vec![b, s, h * d]
        } else {
            vec![b, h, s, d]
        };
        let with_pos = i % 4 < 2;
        let cache_s = if with_pos {
            vec![10, rot / 2]
        } else {
            vec![b, s, rot / 2]
        };
        let mut attrs = vec![("interleaved", Attr::Int(interleaved))];
        if rot != d {
            attrs.push(("rotary_embedding_dim", Attr::Int(rot as i64)));
        }
        if rank3 {
            attrs.push(("num_heads", Attr::Int(h as i64)));
        }
        let mut m = ModelBuilder::new("rope", 23)
            .input("x", DType::F32, &dims(&x_s))
            .input("cos", DType::F32, &dims(&cache_s))
            .input("sin", DType::F32, &dims(&cache_s));
        let mut inputs = vec![
            rng.tensor(&x_s, -2.0, 2.0),
            rng.tensor(&cache_s, -1.0, 1.0),
            rng.tensor(&cache_s, -1.0, 1.0),
        ];
        let mut names = vec!["x", "cos", "sin"];
        if with_pos {
            m = m.input("pos", DType::I64, &dims(&[b, s]));
            let v: Vec<i64> = (0..b * s).map(|_| (rng.next() % 10) as i64).collect();
            inputs.push(Tensor::i64(vec![b, s], &v));
            names.push("pos");
        }
        let m = m
            .output("y", DType::F32, &[])
            .node("rope", "RotaryEmbedding", &names, &["y"], attrs)
            .build();
        let exe = check(m, &inputs, RTOL, ATOL);
        // Direct oracle: pair (a, b) of each head's first `rot` features rotated by angle t.
        let got = run(&exe, &inputs)[0].to_f32_vec();
        let x = inputs[0].to_f32_vec();
        let (cos, sin) = (inputs[1].to_f32_vec(), inputs[2].to_f32_vec());
        let pos = with_pos.then(|| inputs[3].to_i64_vec());
        for bi in 0..b {
            for si in 0..s {
                for hi in 0..h {
                    let at = |f: usize| {
                        if rank3 {
                            (bi * s + si) * h * d + hi * d + f
                        } else {
                            ((bi * h + hi) * s + si) * d + f
                        }
                    };
                    for f in 0..d {
                        let want = if f >= rot {
                            x[at(f)]
                        } else {
                            let pair = if interleaved == 1 {
                                f / 2
                            } else {
                                f % (rot / 2)
                            };
                            let (a, bb) = if interleaved == 1 {
                                (at(2 * pair), at(2 * pair + 1))
                            } else {
                                (at(pair), at(pair + rot / 2))
                            };
                            let row = match &pos {
                                Some(p) => p[bi * s + si] as usize,
                                None => bi * s + si,
                            };
                            let (cv, sv) = (cos[row * rot / 2 + pair], sin[row * rot / 2 + pair]);
                            let first = if interleaved == 1 {
                                f % 2 == 0
                            } else {
                                f < rot / 2
                            };
                            if first {
                                cv * x[a] - sv * x[bb]
                            } else {
                                sv * x[a] + cv * x[bb]
                            }
                        };
                        let g = got[at(f)];
                        assert!(
                            (g - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                            "case {i} [{bi},{si},{hi},{f}]: {g} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
