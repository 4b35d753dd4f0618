//! Input checking: unknown, duplicate, missing, wrong dtype, wrong shape — each a typed
//! `RunError` with a message naming the input, expected vs given. The checks are pure
//! functions over the model's input slots (tested directly) and run before anything is
//! copied, so a session stays usable after a refused run (tested once codegen is available).

use arenac::session::{validate_named, validate_positional};
use arenac::{DType, IoSlot, RunError, TensorRef, TensorType};

mod common;

fn slots() -> Vec<IoSlot> {
    vec![
        IoSlot::new("pixels", TensorType::new(DType::F32, vec![1, 64]), 0),
        IoSlot::new("mask", TensorType::new(DType::Bool, vec![3]), 256),
    ]
}

fn msg(r: Result<(), RunError>) -> (RunError, String) {
    let e = r.unwrap_err();
    let m = e.to_string();
    assert!(!m.contains('\n'), "{m}");
    (e, m)
}

#[test]
fn named_inputs() {
    let slots = slots();
    let px = vec![0.5f32; 64];
    let px2 = vec![0.5f32; 128];
    let px64 = vec![0.5f64; 64];
    let mask = [true, false, true];
    let pixels = TensorRef::from_slice(&[1, 64], &px).unwrap();
    let m = TensorRef::from_slice(&[3], &mask).unwrap();

    validate_named(&slots, &[("pixels", pixels), ("mask", m)]).unwrap();
    validate_named(&slots, &[("mask", m), ("pixels", pixels)]).unwrap();

    let (e, text) = msg(validate_named(
        &slots,
        &[
            ("pixels", TensorRef::from_slice(&[1, 64], &px64).unwrap()),
            ("mask", m),
        ],
    ));
    assert!(matches!(
        e,
        RunError::WrongDType {
            expected: DType::F32,
            given: DType::F64,
            ..
        }
    ));
    assert_eq!(text, "input 'pixels': expected dtype f32, given f64");

    let (e, text) = msg(validate_named(
        &slots,
        &[
            ("pixels", TensorRef::from_slice(&[2, 64], &px2).unwrap()),
            ("mask", m),
        ],
    ));
    assert!(matches!(e, RunError::WrongShape { .. }));
    assert!(
        text.starts_with("input 'pixels': expected shape [1,64], given [2,64]"),
        "{text}"
    );

    // Same element count, different shape: still refused.
    let (_, text) = msg(validate_named(
        &slots,
        &[
            ("pixels", TensorRef::from_slice(&[64], &px).unwrap()),
            ("mask", m),
        ],
    ));
    assert!(text.contains("expected shape [1,64], given [64]"), "{text}");

    let (e, text) = msg(validate_named(&slots, &[("pixels", pixels)]));
    assert!(matches!(e, RunError::MissingInput { .. }));
    assert_eq!(text, "missing input 'mask' (expected bool[3])");

    let (e, text) = msg(validate_named(
        &slots,
        &[("pixels", pixels), ("mask", m), ("pixel", pixels)],
    ));
    assert!(matches!(e, RunError::UnknownInput { .. }));
    assert_eq!(
        text,
        "unknown input 'pixel'; the model's inputs are: pixels f32[1,64], mask bool[3]"
    );

    let (e, text) = msg(validate_named(
        &slots,
        &[("pixels", pixels), ("mask", m), ("pixels", pixels)],
    ));
    assert!(matches!(e, RunError::DuplicateInput { .. }));
    assert_eq!(text, "input 'pixels' is given twice");

    let (_, text) = msg(validate_named(&slots, &[]));
    assert!(text.starts_with("missing input 'pixels'"), "{text}");
}

#[test]
fn positional_inputs() {
    let slots = slots();
    let px = vec![0.0f32; 64];
    let mask = [false; 3];
    let pixels = TensorRef::from_slice(&[1, 64], &px).unwrap();
    let m = TensorRef::from_slice(&[3], &mask).unwrap();
    validate_positional(&slots, &[pixels, m]).unwrap();

    let (e, text) = msg(validate_positional(&slots, &[pixels]));
    assert_eq!(
        e,
        RunError::InputCount {
            expected: 2,
            given: 1
        }
    );
    assert_eq!(text, "the model has 2 inputs, 1 were given");
    let (_, text) = msg(validate_positional(&slots, &[m, pixels]));
    assert_eq!(text, "input 'pixels': expected dtype f32, given bool");
}

#[test]
fn tensor_refs_check_their_length() {
    let v = [1.0f32, 2.0, 3.0];
    let err = TensorRef::from_slice(&[2, 2], &v).unwrap_err();
    assert_eq!(
        err.to_string(),
        "data of 12 bytes does not fit f32[2,2] (needs 16 bytes)"
    );
    let err = TensorRef::from_bytes(DType::I64, &[usize::MAX, 2], &[]).unwrap_err();
    assert!(err.to_string().contains("too many elements"), "{err}");

    let t = TensorRef::from_slice(&[3], &v).unwrap();
    assert_eq!((t.dtype(), t.shape(), t.numel()), (DType::F32, &[3][..], 3));
    assert_eq!(t.as_f32(), Some(&v[..]));
    assert_eq!(t.to_f32_vec(), v);
    let mut out = [0.0f32; 3];
    t.copy_to_f32(&mut out).unwrap();
    assert_eq!(out, v);
    assert!(t.copy_to_f32(&mut [0.0; 2]).is_err());
    let i = [-3i64, 4];
    let t = TensorRef::from_slice(&[2], &i).unwrap();
    assert_eq!(t.as_f32(), None);
    assert_eq!(t.to_f32_vec(), [-3.0, 4.0]);
    assert_eq!(t.get_f32(2), None);
    // Unaligned bytes: no typed view, but conversion still works.
    let bytes: Vec<u8> = std::iter::once(0u8).chain(2.5f32.to_le_bytes()).collect();
    let t = TensorRef::from_bytes(DType::F32, &[1], &bytes[1..]).unwrap();
    assert_eq!(t.get_f32(0), Some(2.5));
}

#[test]
fn session_stays_usable_after_refused_runs() {
    let model = common::digits(1);
    let mut session = model.session().unwrap();
    let px = vec![0.25f32; 64];
    let px64 = vec![0.25f64; 64];
    let px2 = vec![0.25f32; 128];
    let good = TensorRef::from_slice(&[1, 64], &px).unwrap();
    let first = session
        .run(&[("pixels", good)])
        .unwrap()
        .get(0)
        .unwrap()
        .to_f32_vec();

    let refused = [
        session
            .run(&[("pixels", TensorRef::from_slice(&[1, 64], &px64).unwrap())])
            .unwrap_err(),
        session
            .run(&[("pixels", TensorRef::from_slice(&[2, 64], &px2).unwrap())])
            .unwrap_err(),
        session.run(&[]).unwrap_err(),
        session
            .run(&[("pixels", good), ("extra", good)])
            .unwrap_err(),
        session
            .run(&[("pixels", good), ("pixels", good)])
            .unwrap_err(),
        session.run_positional(&[]).unwrap_err(),
    ];
    let texts: Vec<String> = refused.iter().map(ToString::to_string).collect();
    assert_eq!(texts[0], "input 'pixels': expected dtype f32, given f64");
    assert!(texts[1].starts_with("input 'pixels': expected shape [1,64], given [2,64]"));
    assert_eq!(texts[2], "missing input 'pixels' (expected f32[1,64])");
    assert!(texts[3].starts_with("unknown input 'extra'"));
    assert_eq!(texts[4], "input 'pixels' is given twice");
    assert_eq!(texts[5], "the model has 1 inputs, 0 were given");

    let again = session.run(&[("pixels", good)]).unwrap();
    assert_eq!(again.by_name("probs").unwrap().to_f32_vec(), first);
    let positional = session.run_positional(&[good]).unwrap();
    assert_eq!(positional.get(0).unwrap().to_f32_vec(), first);
}
