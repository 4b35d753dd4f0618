//! Index-driven movement (GatherElements, GatherND, the scatters, OneHot, Trilu,
//! DepthToSpace/SpaceToDepth, ReverseSequence, Compress, EyeLike) against the reference on
//! random shapes, attributes and indices (negative ones included); the data-dependent ops'
//! errors.

use crate::common::*;

impl Rng {
    /// Uniform integer in `[lo, hi)`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo).max(1) as u64) as i64
    }

    fn shape(&mut self, rank: usize, lo: usize, hi: usize) -> Vec<usize> {
        (0..rank)
            .map(|_| self.int(lo as i64, hi as i64 + 1) as usize)
            .collect()
    }

    /// Indices in `[-dim, dim)` of `dtype` (i32 or i64).
    fn indices(&mut self, shape: &[usize], dim: usize, dtype: DType) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<i64> = (0..n)
            .map(|_| self.int(-(dim as i64), dim as i64))
            .collect();
        Tensor::from_i64(dtype, shape.to_vec(), &v)
    }
}

/// A one-node model: runtime inputs `ins` (with their values), initializers `consts`.
fn one_node(
    op: &str,
    opset: i64,
    ins: &[(&str, &Tensor)],
    consts: &[(&str, &Tensor)],
    attrs: Vec<(&str, Attr)>,
    out_dtype: DType,
) -> ModelProto {
    let mut b = ModelBuilder::new("t", opset);
    for (name, t) in ins {
        b = b.input(name, t.dtype(), &dims(t.shape()));
    }
    for (name, t) in consts {
        b = b.initializer(name, t);
    }
    let names: Vec<&str> = ins.iter().chain(consts).map(|(n, _)| *n).collect();
    b.output("y", out_dtype, &[])
        .node("n", op, &names, &["y"], attrs)
        .build()
}

fn run_one(
    op: &str,
    opset: i64,
    ins: &[(&str, &Tensor)],
    consts: &[(&str, &Tensor)],
    attrs: Vec<(&str, Attr)>,
    out_dtype: DType,
) {
    let m = one_node(op, opset, ins, consts, attrs, out_dtype);
    let values: Vec<Tensor> = ins.iter().map(|(_, t)| (*t).clone()).collect();
    check(m, &values, RTOL, ATOL);
}

const REDUCTIONS: [&str; 5] = ["none", "add", "mul", "max", "min"];

#[test]
fn gather_and_scatter_elements() {
    let mut rng = Rng(0x5eed_e1e1);
    for case in 0..24 {
        let rank = 1 + case % 3;
        let data_shape = rng.shape(rank, 1, 5);
        let axis = rng.int(0, rank as i64) as usize;
        let mut idx_shape: Vec<usize> = data_shape
            .iter()
            .map(|&d| rng.int(1, d as i64 + 1) as usize)
            .collect();
        idx_shape[axis] = rng.int(1, 7) as usize;
        let it = if case % 2 == 0 {
            DType::I64
        } else {
            DType::I32
        };
        let idx = rng.indices(&idx_shape, data_shape[axis], it);
        let data = rng.tensor(&data_shape, -2.0, 2.0);
        let axis_attr = || vec![("axis", Attr::Int(axis as i64 - rank as i64))];
        run_one(
            "GatherElements",
            13,
            &[("x", &data), ("i", &idx)],
            &[],
            axis_attr(),
            DType::F32,
        );
        // Constant indices, runtime data.
        run_one(
            "GatherElements",
            13,
            &[("x", &data)],
            &[("i", &idx)],
            axis_attr(),
            DType::F32,
        );
        let upd = rng.tensor(&idx_shape, -2.0, 2.0);
        let red = REDUCTIONS[case % 5];
        let mut attrs = axis_attr();
        attrs.push(("reduction", Attr::Str(red.into())));
        run_one(
            "ScatterElements",
            18,
            &[("x", &data), ("i", &idx), ("u", &upd)],
            &[],
            attrs,
            DType::F32,
        );
        // Integer data with integer reductions.
        let to_int = |t: &Tensor| {
            let v: Vec<i64> = t.to_f32_vec().iter().map(|x| (x * 3.0) as i64).collect();
            Tensor::from_i64(DType::I32, t.shape().to_vec(), &v)
        };
        let mut attrs = axis_attr();
        attrs.push(("reduction", Attr::Str(red.into())));
        run_one(
            "ScatterElements",
            18,
            &[("x", &to_int(&data)), ("i", &idx), ("u", &to_int(&upd))],
            &[],
            attrs,
            DType::I32,
        );
    }
}

#[test]
fn gather_and_scatter_nd() {
    let mut rng = Rng(0x0ddb_a110);
    for case in 0..24 {
        let rank = 1 + case % 4;
        let data_shape = rng.shape(rank, 1, 4);
        let batch_dims = if case % 3 == 0 {
            rng.int(0, rank as i64) as usize
        } else {
            0
        };
        let k = rng.int(1, (rank - batch_dims) as i64 + 1) as usize;
        let mut idx_shape = data_shape[..batch_dims].to_vec();
        idx_shape.extend(rng.shape(case % 3, 1, 3));
        idx_shape.push(k);
        let n: usize = idx_shape.iter().product();
        let v: Vec<i64> = (0..n)
            .map(|i| {
                let d = data_shape[batch_dims + i % k] as i64;
                rng.int(-d, d)
            })
            .collect();
        let it = if case % 2 == 0 {
            DType::I64
        } else {
            DType::I32
        };
        let idx = Tensor::from_i64(it, idx_shape.clone(), &v);
        let data = rng.tensor(&data_shape, -2.0, 2.0);
        run_one(
            "GatherND",
            13,
            &[("x", &data), ("i", &idx)],
            &[],
            vec![("batch_dims", Attr::Int(batch_dims as i64))],
            DType::F32,
        );
        if batch_dims == 0 {
            let mut upd_shape = idx_shape[..idx_shape.len() - 1].to_vec();
            upd_shape.extend_from_slice(&data_shape[k..]);
            let upd = rng.tensor(&upd_shape, -2.0, 2.0);
            run_one(
                "ScatterND",
                18,
                &[("x", &data), ("i", &idx), ("u", &upd)],
                &[],
                vec![("reduction", Attr::Str(REDUCTIONS[case % 5].into()))],
                DType::F32,
            );
        }
    }
}

#[test]
fn one_hot_indices_of_every_kind() {
    let mut rng = Rng(0x0001_4071);
    for case in 0..12 {
        let shape = rng.shape(1 + case % 3, 1, 4);
        let depth = rng.int(1, 7);
        let axis = rng.int(-(shape.len() as i64) - 1, shape.len() as i64 + 1);
        let n: usize = shape.iter().product();
        let v: Vec<i64> = (0..n).map(|_| rng.int(-depth - 2, depth + 2)).collect();
        let idx = match case % 3 {
            0 => Tensor::from_i64(DType::I64, shape.clone(), &v),
            1 => Tensor::from_i64(DType::I32, shape.clone(), &v),
            // Float indices, some not integral (they hit nothing).
            _ => {
                let f: Vec<f32> = v
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| k as f32 + if i % 4 == 3 { 0.5 } else { 0.0 })
                    .collect();
                Tensor::f32(shape.clone(), &f)
            }
        };
        let values = rng.tensor(&[2], -3.0, 3.0);
        let depth_t = Tensor::from_i64(DType::I64, vec![], &[depth]);
        let m = ModelBuilder::new("t", 11)
            .input("i", idx.dtype(), &dims(idx.shape()))
            .input("v", DType::F32, &dims(&[2]))
            .initializer("d", &depth_t)
            .output("y", DType::F32, &[])
            .node(
                "n",
                "OneHot",
                &["i", "d", "v"],
                &["y"],
                vec![("axis", Attr::Int(axis))],
            )
            .build();
        check(m, &[idx, values], 0.0, 0.0);
    }
}

#[test]
fn trilu_upper_and_lower() {
    let mut rng = Rng(0x0007_1217);
    for case in 0..16 {
        let shape = rng.shape(2 + case % 3, 1, 6);
        let k = Tensor::i64(vec![], &[rng.int(-5, 6)]);
        let upper = Attr::Int((case % 2) as i64);
        let x = rng.tensor(&shape, -2.0, 2.0);
        run_one(
            "Trilu",
            14,
            &[("x", &x)],
            &[("k", &k)],
            vec![("upper", upper.clone())],
            DType::F32,
        );
        let xi = Tensor::from_i64(
            DType::I64,
            shape.clone(),
            &(0..shape.iter().product::<usize>() as i64).collect::<Vec<_>>(),
        );
        run_one(
            "Trilu",
            14,
            &[("x", &xi)],
            &[],
            vec![("upper", upper)],
            DType::I64,
        );
    }
}

#[test]
fn depth_space_round_trip() {
    let mut rng = Rng(0x0d25);
    for case in 0..8 {
        let b = rng.int(1, 4) as usize;
        let (n, c, h, w) = (
            rng.int(1, 3) as usize,
            rng.int(1, 3) as usize,
            rng.int(1, 4) as usize,
            rng.int(1, 4) as usize,
        );
        let mode = Attr::Str(if case % 2 == 0 { "DCR" } else { "CRD" }.into());
        let x = rng.tensor(&[n, c * b * b, h, w], -1.0, 1.0);
        let attrs = || vec![("blocksize", Attr::Int(b as i64)), ("mode", mode.clone())];
        run_one("DepthToSpace", 13, &[("x", &x)], &[], attrs(), DType::F32);
        let x = rng.tensor(&[n, c, h * b, w * b], -1.0, 1.0);
        let opset = if case % 2 == 0 { 13 } else { 28 };
        let mut a = attrs();
        if opset == 13 {
            a.pop();
        }
        run_one("SpaceToDepth", opset, &[("x", &x)], &[], a, DType::F32);
    }
}

#[test]
fn reverse_sequence_both_layouts() {
    let mut rng = Rng(0x0002_e5e9);
    for case in 0..8 {
        let (bsz, t) = (rng.int(1, 5) as usize, rng.int(1, 6) as usize);
        let rest = rng.shape(case % 3, 1, 3);
        let batch_axis = case % 2;
        let mut shape = if batch_axis == 0 {
            vec![bsz, t]
        } else {
            vec![t, bsz]
        };
        shape.extend(rest);
        let lens: Vec<i64> = (0..bsz).map(|_| rng.int(0, t as i64 + 1)).collect();
        let lens = Tensor::i64(vec![bsz], &lens);
        let x = rng.tensor(&shape, -1.0, 1.0);
        run_one(
            "ReverseSequence",
            10,
            &[("x", &x), ("l", &lens)],
            &[],
            vec![
                ("batch_axis", Attr::Int(batch_axis as i64)),
                ("time_axis", Attr::Int(1 - batch_axis as i64)),
            ],
            DType::F32,
        );
    }
}

#[test]
fn compress_and_eye_like() {
    let mut rng = Rng(0x00c0_4e55);
    for case in 0..10 {
        let shape = rng.shape(1 + case % 3, 1, 5);
        let x = rng.tensor(&shape, -1.0, 1.0);
        let (attrs, len) = if case % 2 == 0 {
            let a = rng.int(0, shape.len() as i64) as usize;
            (vec![("axis", Attr::Int(a as i64))], shape[a])
        } else {
            (vec![], shape.iter().product())
        };
        let len = rng.int(0, len as i64 + 1) as usize;
        let cond: Vec<i64> = (0..len).map(|_| rng.int(0, 2)).collect();
        let cond = Tensor::from_i64(DType::Bool, vec![len], &cond);
        run_one(
            "Compress",
            11,
            &[("x", &x)],
            &[("c", &cond)],
            attrs,
            DType::F32,
        );
        let m2 = rng.tensor(&[shape[0], 3], 0.0, 1.0);
        let dtype = if case % 2 == 0 { 11 } else { 6 };
        let out = if case % 2 == 0 {
            DType::F64
        } else {
            DType::I32
        };
        run_one(
            "EyeLike",
            13,
            &[("x", &m2)],
            &[],
            vec![
                ("k", Attr::Int(rng.int(-3, 4))),
                ("dtype", Attr::Int(dtype)),
            ],
            out,
        );
    }
}

#[test]
fn col2im_sums_overlapping_blocks() {
    let mut rng = Rng(0x0c01_2137);
    let mut ran = 0;
    for case in 0..12 {
        let nd = 1 + case % 3;
        let image = rng.shape(nd, 2, 6);
        let block: Vec<usize> = image
            .iter()
            .map(|&d| rng.int(1, d as i64 + 1) as usize)
            .collect();
        let strides = rng.shape(nd, 1, 2);
        let dilations: Vec<usize> = (0..nd)
            .map(|d| if block[d] > 1 && case % 2 == 1 { 2 } else { 1 })
            .collect();
        let pads = rng.shape(2 * nd, 0, 1);
        let blocks: Vec<usize> = (0..nd)
            .map(|d| {
                let span = dilations[d] * (block[d] - 1) + 1;
                (image[d] + pads[d] + pads[d + nd]).saturating_sub(span) / strides[d] + 1
            })
            .collect();
        let c = rng.int(1, 3) as usize;
        let x = rng.tensor(
            &[
                2,
                c * block.iter().product::<usize>(),
                blocks.iter().product(),
            ],
            -1.0,
            1.0,
        );
        let ints = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let (img, blk) = (
            Tensor::i64(vec![nd], &ints(&image)),
            Tensor::i64(vec![nd], &ints(&block)),
        );
        let dil_ok =
            (0..nd).all(|d| dilations[d] * (block[d] - 1) < image[d] + pads[d] + pads[d + nd]);
        if !dil_ok {
            continue;
        }
        ran += 1;
        run_one(
            "Col2Im",
            18,
            &[("x", &x)],
            &[("img", &img), ("blk", &blk)],
            vec![
                ("strides", Attr::Ints(ints(&strides))),
                ("dilations", Attr::Ints(ints(&dilations))),
                ("pads", Attr::Ints(ints(&pads))),
            ],
            DType::F32,
        );
    }
    assert!(ran >= 6, "only {ran} geometries ran");
}
#[test]
fn data_dependent_ops_say_why() {
    let x = Tensor::f32(vec![2, 3], &[0.0, 1.0, 0.0, 2.0, 0.0, 3.0]);
    let cond = Tensor::from_i64(DType::Bool, vec![2], &[1, 0]);
    for op in ["NonZero", "Unique", "Compress"] {
        let mut b = ModelBuilder::new("d", 13).input("x", DType::F32, &dims(x.shape()));
        let inputs: &[&str] = if op == "Compress" {
            b = b.input("c", DType::Bool, &dims(&[2]));
            &["x", "c"]
        } else {
            &["x"]
        };
        let m = b
            .output("y", DType::F32, &[])
            .node("dd", op, inputs, &["y"], vec![])
            .build();
        let e = import_model(&m, None, &ImportOptions::default())
            .expect_err("data-dependent")
            .to_string();
        assert!(
            e.contains("output shape depends on the input's values")
                && e.contains("'dd'")
                && e.contains(op),
            "{e}"
        );
        // Given the input's value, it is frozen: the node is computed at compile time, or
        // (Compress, its condition frozen) keeps only its data input.
        let mut opts = ImportOptions::default();
        opts.values.insert("x".into(), x.clone());
        if op == "Compress" {
            opts.values.insert("c".into(), cond.clone());
        }
        let imported = import_model(&m, None, &opts).expect("frozen");
        let kept = imported.graph.nodes().any(|(_, n)| n.name == "dd");
        assert_eq!(kept, op == "Compress", "{op}");
    }
}
