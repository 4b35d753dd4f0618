//! `.npy` reading and writing: every supported dtype round-trips, version 2.0 headers read,
//! anything else is a one-line error naming the file.

use arenac::DType;
use arenac::io::npy::{SUPPORTED, encode_npy, parse_npy, read_npy, write_npy};
use arenac::io::{IoError, TensorBuf, read_tensor_file};

mod common;

fn sample(dtype: DType, shape: &[usize]) -> TensorBuf {
    let n: usize = shape.iter().product();
    let data: Vec<u8> = match dtype {
        DType::F32 => (0..n)
            .flat_map(|i| (i as f32 * 0.5 - 3.0).to_le_bytes())
            .collect(),
        DType::F64 => (0..n)
            .flat_map(|i| (i as f64 / 3.0).to_le_bytes())
            .collect(),
        DType::I64 => (0..n).flat_map(|i| (i as i64 - 5).to_le_bytes()).collect(),
        DType::I32 => (0..n).flat_map(|i| (i as i32 * -7).to_le_bytes()).collect(),
        DType::U8 => (0..n).map(|i| (i * 37 % 256) as u8).collect(),
        DType::Bool => (0..n).map(|i| (i % 3 == 0) as u8).collect(),
        d => panic!("no sample for {d}"),
    };
    TensorBuf::new(dtype, shape.to_vec(), data).unwrap()
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
            v1(&ok.replace("<f4", ">f4"), &f4),
            "big-endian dtype '>f4' is not supported",
        ),
        (
            v1(&ok.replace("<f4", "<f2"), &f4[..4]),
            "unsupported dtype '<f2'",
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

    // Writing an unsupported dtype is refused.
    let t = TensorBuf::new(DType::F16, vec![1], vec![0, 0]).unwrap();
    let err = write_npy(&dir.path().join("h.npy"), t.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot write f16 as .npy"), "{err}");
}
