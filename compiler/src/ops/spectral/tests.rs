use super::*;
use crate::ops::test_util::{absent, attr_i, cnst_named, convert_inputs, data, eval_checked};

fn i64s(name: &str, v: i64) -> crate::ops::ctx::CtxInput {
    cnst_named(name, Tensor::i64(vec![], &[v]))
}

fn dft(opset: i64, x: &[usize], attrs: Vec<(&str, i64)>, len: Option<i64>) -> Result<Op, OpError> {
    let attrs = attrs.into_iter().map(|(n, v)| attr_i(n, v)).collect();
    let mut inputs = vec![data(x)];
    inputs.push(len.map_or_else(absent, |l| i64s("n", l)));
    convert_inputs("DFT", opset, attrs, inputs, &["y"]).map(|(op, _)| op)
}

#[test]
fn dft_converts_both_axis_forms_and_lengths() {
    let a = |op: Op| match op {
        Op::Dft(a) => a,
        other => panic!("{other:?}"),
    };
    // Opset 17: attribute axis, default 1; opset 20: input axis, default -2.
    assert_eq!(a(dft(17, &[2, 5, 3, 1], vec![], None).unwrap()).axis, 1);
    assert_eq!(a(dft(20, &[2, 5, 3, 1], vec![], None).unwrap()).axis, 2);
    let with_axis = convert_inputs(
        "DFT",
        20,
        vec![],
        vec![data(&[2, 5, 3, 2]), absent(), i64s("axis", -3)],
        &["y"],
    )
    .unwrap();
    assert_eq!(a(with_axis.0).axis, 1);
    // dft_length and the IRFFT default 2 * (bins - 1).
    assert_eq!(a(dft(20, &[4, 5, 1], vec![], Some(9)).unwrap()).length, 9);
    let irfft = a(dft(20, &[4, 5, 2], vec![("inverse", 1), ("onesided", 1)], None).unwrap());
    assert_eq!(
        (irfft.length, irfft.inverse, irfft.onesided),
        (8, true, true)
    );
    // The last dim is not an axis; nor is anything out of range.
    for axis in [2, -1, 3, -4] {
        let e = dft(17, &[4, 5, 1], vec![("axis", axis)], None).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
    assert!(dft(20, &[4, 5, 3], vec![], None).is_err());
    assert!(dft(20, &[4, 5, 1], vec![], Some(0)).is_err());
    let e = dft(20, &[4, 1, 2], vec![("inverse", 1), ("onesided", 1)], None).unwrap_err();
    assert!(e.to_string().contains("give dft_length"), "{e}");
}

#[test]
fn dft_shapes_follow_the_spec() {
    let out = |x: &[usize], attrs: Vec<(&str, i64)>, len: Option<i64>| {
        let op = dft(20, x, attrs, len).unwrap();
        let ty = TensorType::new(DType::F32, x.to_vec());
        op.infer(&[ty]).unwrap().remove(0).shape
    };
    assert_eq!(out(&[3, 10, 1], vec![], None), vec![3, 10, 2]);
    assert_eq!(out(&[3, 10, 1], vec![("onesided", 1)], None), vec![3, 6, 2]);
    assert_eq!(
        out(&[3, 10, 1], vec![("onesided", 1)], Some(7)),
        vec![3, 4, 2]
    );
    let irfft = vec![("inverse", 1), ("onesided", 1)];
    assert_eq!(out(&[3, 6, 2], irfft.clone(), None), vec![3, 10, 1]);
    assert_eq!(out(&[3, 6, 2], irfft, Some(11)), vec![3, 11, 1]);
    assert_eq!(
        out(&[2, 4, 5, 2], vec![("inverse", 1)], None),
        vec![2, 4, 5, 2]
    );
}

#[test]
fn dft_eval_round_trips_and_matches_known_transforms() {
    // The transform of an impulse is all ones; of a constant, n at bin 0.
    let op = dft(20, &[1, 6, 1], vec![], None).unwrap();
    let impulse = Tensor::f32(vec![1, 6, 1], &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let (_, y) = eval_checked(&op, &[&impulse]);
    for k in 0..6 {
        assert!((y[2 * k] - 1.0).abs() < 1e-12 && y[2 * k + 1].abs() < 1e-12);
    }
    let ones = Tensor::f32(vec![1, 6, 1], &[1.0; 6]);
    let (_, y) = eval_checked(&op, &[&ones]);
    assert!((y[0] - 6.0).abs() < 1e-12);
    assert!(y[2..].iter().all(|v| v.abs() < 1e-12));
    // IRFFT(RFFT(x)) = x for even and odd lengths.
    for n in [7usize, 8] {
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.7).sin() + 0.1).collect();
        let xt = Tensor::f32(vec![1, n, 1], &x);
        let rfft = dft(20, &[1, n, 1], vec![("onesided", 1)], None).unwrap();
        let spec = rfft.eval(&[&xt]).unwrap().remove(0);
        let irfft = dft(
            20,
            spec.shape(),
            vec![("inverse", 1), ("onesided", 1)],
            Some(n as i64),
        )
        .unwrap();
        let (shape, back) = eval_checked(&irfft, &[&spec]);
        assert_eq!(shape, vec![1, n, 1]);
        for (a, b) in back.iter().zip(&x) {
            assert!((a - f64::from(*b)).abs() < 1e-6, "{back:?} vs {x:?}");
        }
    }
}

fn stft(x: &[usize], window: Option<usize>, step: i64, len: Option<i64>) -> Result<Op, OpError> {
    let mut inputs = vec![data(x), i64s("step", step)];
    inputs.push(match window {
        Some(w) => crate::ops::test_util::data_named("w", TensorType::new(DType::F32, vec![w])),
        None => absent(),
    });
    inputs.push(len.map_or_else(absent, |l| i64s("len", l)));
    convert_inputs("STFT", 17, vec![], inputs, &["y"]).map(|(op, _)| op)
}

#[test]
fn stft_converts_and_infers_frames() {
    let op = stft(&[2, 100, 1], Some(16), 8, None).unwrap();
    let tys = [
        TensorType::new(DType::F32, vec![2, 100, 1]),
        TensorType::new(DType::F32, vec![16]),
    ];
    assert_eq!(op.infer(&tys).unwrap()[0].shape, vec![2, 11, 9, 2]);
    let op = stft(&[2, 100], None, 10, Some(20)).unwrap();
    let real = TensorType::new(DType::F32, vec![2, 100]);
    assert_eq!(op.infer(&[real]).unwrap()[0].shape, vec![2, 9, 11, 2]);
    let e = stft(&[2, 100, 1], Some(16), 8, Some(15)).unwrap_err();
    assert!(e.to_string().contains("frame_length (15)"), "{e}");
    let e = stft(&[2, 10, 1], None, 8, Some(15)).unwrap_err();
    assert!(e.to_string().contains("no frame fits"), "{e}");
    assert!(stft(&[2, 100, 1], None, 0, Some(15)).is_err());
    assert!(stft(&[2, 100, 3], None, 1, None).is_err());
}

#[test]
fn stft_eval_is_the_dft_of_windowed_frames() {
    let n = 8;
    let x: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).cos()).collect();
    let w: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 / 16.0).collect();
    let op = stft(&[1, 20, 1], Some(n), 4, None).unwrap();
    let (shape, y) = eval_checked(
        &op,
        &[&Tensor::f32(vec![1, 20, 1], &x), &Tensor::f32(vec![n], &w)],
    );
    assert_eq!(shape, vec![1, 4, 5, 2]);
    // Frame 2 (samples 8..16), bin 1, by the definition.
    let (mut re, mut im) = (0.0f64, 0.0f64);
    for t in 0..n {
        let v = f64::from(x[8 + t]) * f64::from(w[t]);
        let a = -2.0 * std::f64::consts::PI * t as f64 / n as f64;
        re += v * a.cos();
        im += v * a.sin();
    }
    let q = (2 * 5 + 1) * 2;
    assert!((y[q] - re).abs() < 1e-6 && (y[q + 1] - im).abs() < 1e-6);
}

#[test]
fn mel_matrix_has_unit_peaks_and_checks_its_edges() {
    let a = MelAttrs {
        num_mel_bins: 8,
        dft_length: 64,
        dtype: DType::F32,
    };
    let m = mel_weights(&a, 8000.0, 0.0, 4000.0, false).unwrap();
    assert_eq!(m.len(), 33 * 8);
    for band in 0..8 {
        let col: Vec<f64> = (0..33).map(|r| m[r * 8 + band]).collect();
        let peak = col.iter().cloned().fold(0.0, f64::max);
        assert_eq!(peak, 1.0, "band {band}: {col:?}");
        assert!(col.iter().all(|v| (0.0..=1.0).contains(v)));
    }
    let e = mel_weights(&a, 8000.0, 0.0, 40000.0, false).unwrap_err();
    assert!(
        e.to_string().contains("outside the 33 spectrogram bins"),
        "{e}"
    );
    assert!(mel_weights(&a, 0.0, 0.0, 100.0, false).is_err());
    // Sizes are constants; the rest are data and fold with the node when constant.
    let (op, data_inputs) = convert_inputs(
        "MelWeightMatrix",
        17,
        vec![attr_i("output_datatype", 11)],
        vec![
            i64s("bins", 8),
            i64s("n", 64),
            i64s("sr", 8000),
            cnst_named("lo", Tensor::f32(vec![], &[0.0])),
            cnst_named("hi", Tensor::f32(vec![], &[4000.0])),
        ],
        &["y"],
    )
    .unwrap();
    assert_eq!(data_inputs, vec![2, 3, 4]);
    let sr = Tensor::i64(vec![], &[8000]);
    let lo = Tensor::f32(vec![], &[0.0]);
    let hi = Tensor::f32(vec![], &[4000.0]);
    let (shape, y) = eval_checked(&op, &[&sr, &lo, &hi]);
    assert_eq!(shape, vec![33, 8]);
    assert_eq!(
        op.infer(&[sr.ty(), lo.ty(), hi.ty()]).unwrap()[0].dtype,
        DType::F64
    );
    assert_eq!(y.iter().filter(|&&v| v == 1.0).count(), 8);
}
