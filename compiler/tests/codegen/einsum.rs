//! Einsum, expanded at import into Transpose/Reshape/Slice/ReduceSum/Mul/MatMul: the JIT
//! against the reference evaluation of the expanded graph, and against a naive einsum written
//! here (every assignment of every label visited; an oracle independent of the expansion).

use crate::common::*;

/// A naive einsum over f32 operands in f64: `(output shape, values)`. Labels are letters,
/// `...` is right-aligned and broadcast; a size-1 dim broadcasts.
fn naive(eq: &str, xs: &[(&[usize], Vec<f32>)]) -> (Vec<usize>, Vec<f64>) {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let widest = lhs
        .split(',')
        .zip(xs)
        .map(|(t, (s, _))| s.len() + 3 * usize::from(t.contains("...")) - t.len())
        .max()
        .unwrap_or(0);
    // Labels: letters as themselves, `...` dims as '0', '1', ...
    let expand = |t: &str, rank: usize| -> Vec<char> {
        let mut v = Vec::new();
        let w = rank + 3 * usize::from(t.contains("...")) - t.len();
        for (i, part) in t.split("...").enumerate() {
            if i == 1 {
                v.extend((widest - w..widest).map(|k| (b'0' + k as u8) as char));
            }
            v.extend(part.chars());
        }
        v
    };
    let terms: Vec<Vec<char>> = lhs
        .split(',')
        .zip(xs)
        .map(|(t, (s, _))| expand(t, s.len()))
        .collect();
    let mut size = std::collections::BTreeMap::new();
    for (t, (s, _)) in terms.iter().zip(xs) {
        for (&c, &d) in t.iter().zip(s.iter()) {
            let e = size.entry(c).or_insert(d);
            if *e == 1 {
                *e = d;
            }
        }
    }
    let out: Vec<char> = match rhs {
        Some(r) => expand(r, widest + r.len() - 3 * usize::from(r.contains("..."))),
        None => {
            let mut v: Vec<char> = (0..widest).map(|k| (b'0' + k as u8) as char).collect();
            let mut once: Vec<char> = size
                .keys()
                .copied()
                .filter(|c| c.is_alphabetic())
                .filter(|c| terms.iter().flatten().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort();
            v.extend(once);
            v
        }
    };
    let labels: Vec<char> = size.keys().copied().collect();
    let out_shape: Vec<usize> = out.iter().map(|c| size[c]).collect();
    let mut acc = vec![0.0f64; out_shape.iter().product()];
    let total: usize = labels.iter().map(|c| size[c]).product();
    for flat in 0..total {
        let mut rem = flat;
        let mut val = std::collections::BTreeMap::new();
        for c in labels.iter().rev() {
            val.insert(*c, rem % size[c]);
            rem /= size[c];
        }
        let mut p = 1.0f64;
        for (t, (s, v)) in terms.iter().zip(xs) {
            let mut idx = 0;
            for (c, &d) in t.iter().zip(s.iter()) {
                idx = idx * d + if d == 1 { 0 } else { val[c] };
            }
            p *= f64::from(v[idx]);
        }
        let o = out.iter().fold(0, |a, c| a * size[c] + val[c]);
        acc[o] += p;
    }
    (out_shape, acc)
}

fn model(eq: &str, shapes: &[&[usize]], consts: &[Option<Tensor>]) -> ModelProto {
    let names: Vec<String> = (0..shapes.len()).map(|i| format!("x{i}")).collect();
    let mut m = ModelBuilder::new("einsum", 13);
    for (i, s) in shapes.iter().enumerate() {
        m = match consts.get(i).cloned().flatten() {
            Some(t) => m.initializer(&names[i], &t),
            None => m.input(&names[i], DType::F32, &dims(s)),
        };
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    m.output("y", DType::F32, &[])
        .node(
            "my_einsum",
            "Einsum",
            &refs,
            &["y"],
            vec![("equation", Attr::Str(eq.to_string()))],
        )
        .build()
}

/// Runs `eq` through the JIT (operands listed in `consts` as initializers) and checks it
/// against the reference evaluation and the naive einsum. Returns the imported graph.
fn check_eq(eq: &str, shapes: &[&[usize]], weights: &[usize], rng: &mut Rng) -> Graph {
    let tensors: Vec<Tensor> = shapes.iter().map(|s| rng.tensor(s, -1.0, 1.0)).collect();
    let consts: Vec<Option<Tensor>> = (0..shapes.len())
        .map(|i| weights.contains(&i).then(|| tensors[i].clone()))
        .collect();
    let g = import(&model(eq, shapes, &consts));
    let inputs: Vec<Tensor> = (0..shapes.len())
        .filter(|i| !weights.contains(i))
        .map(|i| tensors[i].clone())
        .collect();
    let exe = check_graph(&g, &inputs, RTOL, ATOL);
    let got = run(&exe, &inputs);
    let xs: Vec<(&[usize], Vec<f32>)> = shapes
        .iter()
        .zip(&tensors)
        .map(|(s, t)| (*s, t.to_f32_vec()))
        .collect();
    let (shape, want) = naive(eq, &xs);
    assert_eq!(got[0].shape(), shape.as_slice(), "{eq}: shape");
    for (i, (a, b)) in got[0].to_f32_vec().iter().zip(&want).enumerate() {
        let b = *b as f32;
        assert!(
            (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
            "{eq} {shapes:?}: y[{i}] = {a}, want {b}"
        );
    }
    g
}

#[test]
fn einsum_equations_match_a_naive_einsum() {
    let mut rng = Rng(0x5eed_00e1);
    let cases: &[(&str, &[&[usize]])] = &[
        ("ij,jk->ik", &[&[3, 4], &[4, 5]]),
        ("ij,jk", &[&[3, 4], &[4, 5]]),
        ("ij,kj->ik", &[&[3, 4], &[5, 4]]),
        ("bij,bjk->bik", &[&[2, 3, 4], &[2, 4, 5]]),
        ("bhid,bhjd->bhij", &[&[2, 3, 4, 5], &[2, 3, 6, 5]]),
        ("bhij,bhjd->bhid", &[&[2, 3, 4, 6], &[2, 3, 6, 5]]),
        ("i,i", &[&[7], &[7]]),
        ("i,i->", &[&[7], &[7]]),
        ("i,j->ij", &[&[3], &[4]]),
        ("i,j", &[&[3], &[4]]),
        ("ij,ij->ij", &[&[3, 4], &[3, 4]]),
        ("ij,ij->i", &[&[3, 4], &[3, 4]]),
        ("bi,bi->b", &[&[5, 6], &[5, 6]]),
        ("ii->i", &[&[4, 4]]),
        ("ii", &[&[4, 4]]),
        ("iii->i", &[&[3, 3, 3]]),
        ("bii->bi", &[&[2, 3, 3]]),
        ("ibi->bi", &[&[3, 2, 3]]),
        ("ij->ji", &[&[3, 4]]),
        ("ij->", &[&[3, 4]]),
        ("ijk->kji", &[&[2, 3, 4]]),
        ("ijk->j", &[&[2, 3, 4]]),
        ("ba", &[&[2, 3]]),
        ("...ij,...jk->...ik", &[&[2, 1, 3, 4], &[5, 4, 2]]),
        ("...ii->...i", &[&[2, 3, 3]]),
        ("...i->...", &[&[2, 3, 4]]),
        ("i...->...", &[&[2, 3, 4]]),
        ("a...,a...->...", &[&[3, 2, 4], &[3, 1, 4]]),
        ("...ij,...jk", &[&[2, 3, 4], &[4, 5]]),
        ("abc,cd,de->abe", &[&[2, 3, 4], &[4, 5], &[5, 3]]),
        ("ij,jk,kl->il", &[&[2, 3], &[3, 4], &[4, 5]]),
        ("bn,anm,bm->ba", &[&[2, 3], &[4, 3, 5], &[2, 5]]),
        ("ab,ab,ab->ab", &[&[2, 3], &[2, 3], &[2, 3]]),
        ("i,i,i->", &[&[5], &[5], &[5]]),
        ("iij,jk->ik", &[&[3, 3, 4], &[4, 2]]),
        ("ij,jj->i", &[&[3, 4], &[4, 4]]),
        ("ijk,ikl->jl", &[&[2, 3, 4], &[2, 4, 5]]),
        ("bsd,dh->bsh", &[&[2, 3, 4], &[4, 5]]),
        ("ij,k->", &[&[2, 3], &[4]]),
        ("ij,jk->ki", &[&[3, 4], &[4, 5]]),
        ("iJ,Jk->ki", &[&[3, 4], &[4, 5]]),
        ("ij,ij->", &[&[3, 1], &[3, 4]]),
        ("ik,kj->ij", &[&[1, 4], &[4, 5]]),
        ("i j , j k -> i k", &[&[3, 4], &[4, 5]]),
    ];
    for (eq, shapes) in cases {
        check_eq(eq, shapes, &[], &mut rng);
    }
}

#[test]
fn einsum_with_a_weight_folds_its_transpose() {
    let mut rng = Rng(0x5eed_00e2);
    // The weight [h, d] is needed as [d, h]: the transpose folds at import.
    let g = check_eq("bsd,hd->bsh", &[&[2, 3, 4], &[5, 4]], &[1], &mut rng);
    let text = arenac_compiler::ir::print::print_graph(&g);
    assert!(text.contains("= MatMul("), "{text}");
    assert!(!text.contains("= Transpose("), "{text}");
}

#[test]
fn einsum_contraction_is_one_matmul() {
    let mut rng = Rng(0x5eed_00e3);
    let g = check_eq(
        "bhid,bhjd->bhij",
        &[&[2, 3, 4, 5], &[2, 3, 6, 5]],
        &[],
        &mut rng,
    );
    let text = arenac_compiler::ir::print::print_graph(&g);
    assert_eq!(text.matches("= MatMul(").count(), 1, "{text}");
    assert!(!text.contains("= Mul("), "{text}");
}

#[test]
fn einsum_errors_name_the_node() {
    for (eq, shapes, want) in [
        ("ij,jk->ik", &[&[2, 3][..], &[4, 5]][..], "sizes 3 and 4"),
        ("ij->ix", &[&[2, 3][..]][..], "no input term"),
        ("ijk->i", &[&[2, 3][..]][..], "rank 2"),
    ] {
        let err = import_model(&model(eq, shapes, &[]), None, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("my_einsum") && err.contains("Einsum") && err.contains(want),
            "{eq}: {err}"
        );
    }
}
