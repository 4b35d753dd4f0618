//! `.npy` reading and writing: every supported dtype (all but bf16 and the storage types)
//! round-trips and reads
//! what numpy writes, version 2.0 headers and big-endian data read, anything else is a
//! one-line error naming the file.

use arenac::DType;
use arenac::io::npy::{SUPPORTED, descr, encode_npy, parse_npy, read_npy, write_npy};
use arenac::io::{IoError, TensorBuf, read_tensor_file};

mod common;

/// Distinct values of every dtype, extremes included: element `i` of a sample.
fn sample_bytes(dtype: DType, i: usize) -> Vec<u8> {
    let k = i as i64;
    match dtype {
        DType::F32 => (k as f32 * 0.5 - 3.0).to_le_bytes().to_vec(),
        DType::F64 => (k as f64 / 3.0).to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f32(k as f32 * 0.25 - 1.0)
            .to_le_bytes()
            .to_vec(),
        DType::BF16 => half::bf16::from_f32(k as f32 * -1.5).to_le_bytes().to_vec(),
        DType::I8 => [i8::MIN, -1, 0, 7, i8::MAX][i % 5].to_le_bytes().to_vec(),
        DType::I16 => [i16::MIN, -300, 0, 1234, i16::MAX][i % 5]
            .to_le_bytes()
            .to_vec(),
        DType::I32 => (k as i32 * -7).to_le_bytes().to_vec(),
        DType::I64 => (k - 5).to_le_bytes().to_vec(),
        DType::U8 => vec![(i * 37 % 256) as u8],
        DType::U16 => [0, 1, 300, u16::MAX][i % 4].to_le_bytes().to_vec(),
        DType::U32 => [0, 7, 70_000, u32::MAX][i % 4].to_le_bytes().to_vec(),
        DType::U64 => [0, 9, 1 << 40, u64::MAX][i % 4].to_le_bytes().to_vec(),
        DType::Bool => vec![i.is_multiple_of(3) as u8],
        // Storage types: one byte each, never written to .npy.
        _ => vec![(i % 7) as u8],
    }
}

fn sample(dtype: DType, shape: &[usize]) -> TensorBuf {
    let n: usize = shape.iter().product();
    let data = (0..n).flat_map(|i| sample_bytes(dtype, i)).collect();
    TensorBuf::new(dtype, shape.to_vec(), data).unwrap()
}

#[test]
fn every_dtype_numpy_has_is_supported() {
    for dtype in DType::ALL {
        let numpy_has = dtype != DType::BF16 && !dtype.is_storage();
        assert_eq!(SUPPORTED.contains(&dtype), numpy_has, "{dtype}");
        assert_eq!(descr(dtype).is_some(), numpy_has, "{dtype}");
    }
}

#[test]
fn every_supported_dtype_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in SUPPORTED {
        for shape in [&[][..], &[0][..], &[5][..], &[2, 3][..], &[2, 1, 4][..]] {
            let t = sample(dtype, shape);
            let path = dir.path().join(format!("{dtype}.npy"));
            write_npy(&path, t.view()).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            // Format 1.0, header padded so the data starts on a 64-byte boundary.
            assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0);
            assert_eq!(read_npy(&path).unwrap(), t, "{dtype} {shape:?}");
            let (back, name) = read_tensor_file(&path).unwrap();
            assert_eq!((back, name), (t, None));
        }
    }
}

#[test]
fn reads_the_shipped_digits_files() {
    let samples = read_npy(&common::repo("models/digits/samples.npy")).unwrap();
    assert_eq!(
        (samples.dtype(), samples.shape()),
        (DType::F32, &[100, 64][..])
    );
    let px = samples.view().to_f32_vec();
    assert!(px.iter().all(|&x| (0.0..=1.0).contains(&x)));
    let labels = read_npy(&common::repo("models/digits/labels.npy")).unwrap();
    assert_eq!((labels.dtype(), labels.shape()), (DType::I64, &[100][..]));
    let probs = read_npy(&common::repo("models/digits/expected_probs.npy")).unwrap();
    assert_eq!(probs.shape(), &[100, 10]);
    // Re-encoding reproduces numpy's file byte for byte.
    let original = std::fs::read(common::repo("models/digits/samples.npy")).unwrap();
    assert_eq!(encode_npy(samples.view()).unwrap(), original);
}

fn v1(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn version_2_and_3_headers_and_header_variants() {
    let header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n";
    let data = [1u8, 0, 0, 0, 2, 0, 0, 0];
    for major in [2u8, 3] {
        let mut bytes = vec![0x93, b'N', b'U', b'M', b'P', b'Y', major, 0];
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&data);
        let t = parse_npy(&bytes).unwrap();
        assert_eq!(
            (t.dtype(), t.shape(), t.bytes()),
            (DType::I32, &[2][..], &data[..])
        );
    }
    // Key order, double quotes, no trailing comma, a scalar shape, '=' byte order.
    let t = parse_npy(&v1(
        "{\"shape\": (), \"fortran_order\": False, \"descr\": \"=f8\"}   \n",
        &1.5f64.to_le_bytes(),
    ))
    .unwrap();
    assert_eq!((t.dtype(), t.shape()), (DType::F64, &[][..]));
    assert_eq!(t.view().get_f32(0), Some(1.5));
}

#[test]
fn header_errors_are_clear() {
    let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    let f4 = [0u8; 8];
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"PK\x03\x04 not numpy".to_vec(), "not a .npy file"),
        (b"\x93NUMPY".to_vec(), "not a .npy file"),
        (
            {
                let mut b = v1(ok, &f4);
                b[6] = 4;
                b
            },
            "unsupported .npy format version 4.0",
        ),
        (
            {
                let mut b = v1(ok, &f4);
                b[8] = 0xff;
                b
            },
            "truncated",
        ),
        (
            v1(&ok.replace("<f4", "<c8"), &f4),
            "unsupported dtype '<c8'",
        ),
        (
            v1(&ok.replace("<f4", "<V2"), &f4[..4]),
            "give those as a TensorProto .pb",
        ),
        (
            v1(&ok.replace("<f4", "<U3"), &f4),
            "unsupported dtype '<U3'",
        ),
        (v1(&ok.replace("<f4", "|O"), &f4), "unsupported dtype '|O'"),
        (
            v1(&ok.replace("False", "True"), &f4),
            "Fortran-order arrays are not supported",
        ),
        (v1(ok, &f4[..7]), "data has 7 bytes but f32[2] needs 8"),
        (v1(ok, &[0u8; 12]), "data has 12 bytes but f32[2] needs 8"),
        (
            v1("{'descr': '<f4', 'shape': (2,)}", &f4),
            "no 'fortran_order'",
        ),
        (
            v1(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,x)}",
                &f4,
            ),
            "bad .npy header",
        ),
        (v1("not a dict", &f4), "bad .npy header"),
        (
            v1(&ok.replace("<f4", "|b1"), &[0, 2]),
            "bool data holds a byte other than 0 or 1",
        ),
    ];
    for (bytes, needle) in cases {
        let err = parse_npy(&bytes).unwrap_err();
        assert!(err.contains(needle), "{err:?} should contain {needle:?}");
        assert!(!err.contains('\n'), "{err:?}");
    }
}

#[test]
fn file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.npy");
    let err = read_npy(&missing).unwrap_err();
    assert!(matches!(err, IoError::Io { .. }));
    assert!(err.to_string().starts_with("cannot read "), "{err}");
    assert!(err.to_string().contains("missing.npy"), "{err}");

    let bad = dir.path().join("bad.npy");
    std::fs::write(&bad, b"hello").unwrap();
    let err = read_npy(&bad).unwrap_err().to_string();
    assert!(err.contains("bad.npy: not a .npy file"), "{err}");

    // bf16 has no numpy dtype: refused, pointing at .pb.
    let t = TensorBuf::new(DType::BF16, vec![1], vec![0, 0]).unwrap();
    let err = write_npy(&dir.path().join("h.npy"), t.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "cannot write bf16 as .npy (numpy has no such dtype): write a TensorProto .pb"
        ),
        "{err}"
    );
}

#[test]
fn big_endian_data_is_swapped() {
    let be: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let t = parse_npy(&v1(
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
        &be,
    ))
    .unwrap();
    assert_eq!(
        (t.dtype(), t.view().to_f32_vec()),
        (DType::F32, vec![1.5, -2.0])
    );
    let be: Vec<u8> = [300u16, 2].iter().flat_map(|x| x.to_be_bytes()).collect();
    let t = parse_npy(&v1(
        "{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }",
        &be,
    ))
    .unwrap();
    assert_eq!(
        (t.dtype(), t.view().to_f32_vec()),
        (DType::U16, vec![300.0, 2.0])
    );
    // One-byte dtypes have no byte order.
    let t = parse_npy(&v1(
        "{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }",
        &[0xff, 0x02],
    ))
    .unwrap();
    assert_eq!(
        (t.dtype(), t.view().to_f32_vec()),
        (DType::I8, vec![-1.0, 2.0])
    );
}

/// Files numpy itself wrote, one per dtype, read back with the values numpy was given.
#[test]
fn reads_what_numpy_writes() {
    let Some(py) = std::env::var("ARENAC_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        println!("ARENAC_PYTHON is unset: skipping (bash scripts/test.sh sets it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import sys, numpy as np
d = sys.argv[1]
for name in ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64", "bool"]:
    a = np.array([[0, 1, 2], [3, 4, 5]]).astype(name)
    np.save(f"{d}/{name}.npy", a)
"#;
    let status = std::process::Command::new(&py)
        .args(["-c", script, dir.path().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    for (name, dtype) in [
        ("float16", DType::F16),
        ("float32", DType::F32),
        ("float64", DType::F64),
        ("int8", DType::I8),
        ("int16", DType::I16),
        ("int32", DType::I32),
        ("int64", DType::I64),
        ("uint8", DType::U8),
        ("uint16", DType::U16),
        ("uint32", DType::U32),
        ("uint64", DType::U64),
        ("bool", DType::Bool),
    ] {
        let path = dir.path().join(format!("{name}.npy"));
        let t = read_npy(&path).unwrap();
        assert_eq!((t.dtype(), t.shape()), (dtype, &[2, 3][..]), "{name}");
        let want: Vec<f32> = if dtype == DType::Bool {
            vec![0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        } else {
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        };
        assert_eq!(t.view().to_f32_vec(), want, "{name}");
        // Writing it again reproduces numpy's file byte for byte.
        assert_eq!(
            encode_npy(t.view()).unwrap(),
            std::fs::read(&path).unwrap(),
            "{name}"
        );
    }
}
