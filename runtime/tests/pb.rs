//! ONNX `TensorProto` `.pb` inputs: raw data and typed fields, with one-line errors.

use arenac::DType;
use arenac::io::pb::{decode_pb, encode_pb, read_pb};
use arenac::io::{TensorBuf, read_tensor_file};
use arenac_compiler::ir::lowp;
use arenac_proto::{Message, TensorProto};

#[test]
fn raw_data_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = [1.0f32, -2.5, 3.25, 0.0, 7.0, 8.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let t = TensorBuf::new(DType::F32, vec![2, 3], data).unwrap();
    let path = dir.path().join("input_0.pb");
    std::fs::write(&path, encode_pb("pixels", &t)).unwrap();
    let (back, name) = read_pb(&path).unwrap();
    assert_eq!(back, t);
    assert_eq!(name.as_deref(), Some("pixels"));
    // Any extension other than .npy is read as a TensorProto.
    assert_eq!(read_tensor_file(&path).unwrap().0, t);
}

#[test]
fn typed_fields_decode() {
    let p = TensorProto {
        data_type: Some(DType::I64.to_onnx()),
        dims: vec![3],
        int64_data: vec![4, -5, 6],
        ..TensorProto::default()
    };
    let (t, name) = decode_pb(&p.encode_to_vec()).unwrap();
    assert_eq!(name, None);
    assert_eq!((t.dtype(), t.shape()), (DType::I64, &[3][..]));
    assert_eq!(t.view().to_f32_vec(), vec![4.0, -5.0, 6.0]);

    let p = TensorProto {
        name: Some("x".into()),
        data_type: Some(DType::F32.to_onnx()),
        dims: vec![2, 1],
        float_data: vec![0.5, 1.5],
        ..TensorProto::default()
    };
    let (t, _) = decode_pb(&p.encode_to_vec()).unwrap();
    assert_eq!(
        t.view()
            .as_f32()
            .map(<[f32]>::to_vec)
            .unwrap_or(t.view().to_f32_vec()),
        [0.5, 1.5]
    );
}

#[test]
fn bad_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pb");
    std::fs::write(&junk, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").unwrap();
    let err = read_pb(&junk).unwrap_err().to_string();
    assert!(
        err.contains("junk.pb: not a valid ONNX TensorProto"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");

    // Too few bytes of raw data for the dims.
    let p = TensorProto {
        name: Some("short".into()),
        data_type: Some(DType::F32.to_onnx()),
        dims: vec![4],
        raw_data: Some(vec![0u8; 8].into()),
        ..TensorProto::default()
    };
    let err = decode_pb(&p.encode_to_vec()).unwrap_err();
    assert!(err.contains("short"), "{err}");

    // External data has no place in an input file.
    let p = TensorProto {
        name: Some("ext".into()),
        data_type: Some(DType::F32.to_onnx()),
        dims: vec![1],
        data_location: Some(arenac_proto::tensor_proto::DataLocation::External as i32),
        ..TensorProto::default()
    };
    let err = decode_pb(&p.encode_to_vec()).unwrap_err();
    assert!(err.contains("ext"), "{err}");

    let err = read_pb(&dir.path().join("none.pb"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("cannot read"), "{err}");
}

/// Every dtype, bf16 included, writes and reads back byte for byte (raw data).
#[test]
fn every_dtype_round_trips() {
    use arenac::io::pb::write_pb;
    use arenac::io::write_output_file;
    let dir = tempfile::tempdir().unwrap();
    for dtype in DType::ALL {
        let shape = vec![2, 3];
        let data: Vec<u8> = (0..6 * dtype.size())
            .map(|i| match dtype {
                DType::Bool => (i % 2) as u8,
                // One byte per element, as a session holds them (packed in the file).
                d if d.is_storage() => lowp::canonical(d, (i * 53 % 251) as u8),
                _ => (i * 53 % 251) as u8,
            })
            .collect();
        let t = TensorBuf::new(dtype, shape, data).unwrap();
        let (back, name) = decode_pb(&encode_pb("t", &t)).unwrap();
        assert_eq!((back, name.as_deref()), (t.clone(), Some("t")), "{dtype}");
        let path = dir.path().join(format!("{dtype}.pb"));
        write_pb(&path, "out", t.view()).unwrap();
        assert_eq!(read_pb(&path).unwrap(), (t.clone(), Some("out".into())));
        // Output files: .npy where numpy has the dtype, .pb for bf16 and the storage types.
        let written = write_output_file(dir.path(), &format!("o_{dtype}"), "o", t.view()).unwrap();
        let ext = if dtype == DType::BF16 || dtype.is_storage() {
            "pb"
        } else {
            "npy"
        };
        assert_eq!(written, dir.path().join(format!("o_{dtype}.{ext}")));
        assert_eq!(read_tensor_file(&written).unwrap().0, t, "{dtype}");
    }
}

/// 4- and 2-bit tensors are packed in files as ONNX packs them (low bits first), one byte per
/// element in memory; int32_data holds packed bytes too.
#[test]
fn sub_byte_types_are_packed_in_files() {
    let t = TensorBuf::new(DType::I4, vec![3], vec![0xff, 2, 0xf8]).unwrap();
    let proto = TensorProto::decode(encode_pb("t", &t).as_slice()).unwrap();
    assert_eq!(proto.raw_data.as_deref(), Some(&[0x2f, 0x08][..]));
    assert_eq!(decode_pb(&proto.encode_to_vec()).unwrap().0, t);
    let typed = TensorProto {
        data_type: Some(DType::U2.to_onnx()),
        dims: vec![5],
        int32_data: vec![0b1001_0011, 0b01],
        ..TensorProto::default()
    };
    let (u2, _) = decode_pb(&typed.encode_to_vec()).unwrap();
    assert_eq!(u2.bytes(), &[3, 0, 1, 2, 1]);
    let short = TensorProto {
        data_type: Some(DType::U4.to_onnx()),
        dims: vec![5],
        raw_data: Some(vec![0x21].into()),
        ..TensorProto::default()
    };
    let err = decode_pb(&short.encode_to_vec()).unwrap_err();
    assert!(err.contains("packed u4") && err.contains("need 3"), "{err}");
}
