//! NumPy `.npy` files: format versions 1.0, 2.0 (and 3.0, a UTF-8 header), C order, every
//! arenac dtype numpy has (float16/32/64, int8/16/32/64, uint8/16/32/64, bool; big-endian
//! files are read and swapped). bfloat16 and the storage types (8-/4-bit floats, 4-/2-bit
//! integers) have no numpy dtype (ml_dtypes saves them as raw `<V1` bytes, without their
//! type): they go through TensorProto `.pb` files ([`super::pb`]). Anything else is a clear
//! error.

use std::path::Path;

use arenac_compiler::ir::types::DType;

use super::{IoError, TensorBuf};
use crate::session::TensorRef;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The dtypes `.npy` reading and writing support: every arenac dtype but bf16.
pub const SUPPORTED: [DType; 12] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
];

/// The `descr` numpy writes for a dtype (`None` for bf16 and the storage types, which numpy
/// lacks).
pub fn descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        // numpy has no dtype for these (ml_dtypes saves them as raw '<V1' bytes).
        DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => return None,
    })
}

/// The dtype of a `descr` and whether its data is big-endian.
fn dtype_of(descr: &str) -> Result<(DType, bool), String> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let dtype = match code {
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => {
            return Err(format!(
                "unsupported dtype '{descr}' (supported: float16/32/64, int8/16/32/64, \
                 uint8/16/32/64, bool; numpy has no bfloat16, float8, float4, int4 or int2: \
                 give those as a TensorProto .pb, e.g. from onnx.numpy_helper.from_array)"
            ));
        }
    };
    Ok((dtype, order == '>' && dtype.size() > 1))
}

/// Reads a `.npy` file.
pub fn read_npy(path: &Path) -> Result<TensorBuf, IoError> {
    let bytes = std::fs::read(path).map_err(|source| IoError::Io {
        what: "read",
        path: path.to_path_buf(),
        source,
    })?;
    parse_npy(&bytes).map_err(|reason| IoError::Format {
        path: path.to_path_buf(),
        reason,
    })
}

/// Parses the bytes of a `.npy` file; the error is a one-line reason.
pub fn parse_npy(bytes: &[u8]) -> Result<TensorBuf, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            let b = bytes.get(8..12).ok_or(".npy header is truncated")?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => {
            return Err(format!(
                "unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)"
            ));
        }
    };
    let header = start
        .checked_add(hlen)
        .and_then(|end| bytes.get(start..end))
        .ok_or(".npy header is truncated")?;
    let header = std::str::from_utf8(header).map_err(|_| ".npy header is not text")?;
    let h = parse_header(header)?;
    let (dtype, big_endian) = dtype_of(&h.descr)?;
    if h.fortran_order {
        return Err("Fortran-order arrays are not supported (save a C-order array)".into());
    }
    let data = &bytes[start + hlen..];
    let expected = arenac_compiler::ir::types::checked_numel(&h.shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| format!("shape {:?} is too large", h.shape))?;
    if data.len() != expected {
        return Err(format!(
            "data has {} bytes but {}{} needs {expected}",
            data.len(),
            dtype,
            arenac_compiler::ir::types::ShapeDisplay(&h.shape)
        ));
    }
    if dtype == DType::Bool && data.iter().any(|&b| b > 1) {
        return Err("bool data holds a byte other than 0 or 1".into());
    }
    let mut data = data.to_vec();
    if big_endian {
        for element in data.chunks_exact_mut(dtype.size()) {
            element.reverse();
        }
    }
    TensorBuf::new(dtype, h.shape, data).map_err(|e| e.to_string())
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// Parses the header: a Python dict literal with the keys `descr`, `fortran_order`, `shape`.
fn parse_header(text: &str) -> Result<Header, String> {
    let bad = |what: &str| format!("bad .npy header ({what}): {}", text.trim_end());
    let mut p = Parser {
        s: text.trim_end_matches(['\n', ' ', '\0']).as_bytes(),
        i: 0,
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    p.expect(b'{').map_err(|_| bad("no '{'"))?;
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string().map_err(|e| bad(&e))?;
        p.ws();
        p.expect(b':').map_err(|_| bad("no ':'"))?;
        p.ws();
        match key.as_str() {
            "descr" => descr = Some(p.string().map_err(|e| bad(&e))?),
            "fortran_order" => fortran = Some(p.boolean().map_err(|e| bad(&e))?),
            "shape" => shape = Some(p.tuple().map_err(|e| bad(&e))?),
            other => return Err(bad(&format!("unknown key '{other}'"))),
        }
        p.ws();
        if !p.eat(b',') {
            p.ws();
            p.expect(b'}').map_err(|_| bad("no '}'"))?;
            break;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(bad("text after '}'"));
    }
    Ok(Header {
        descr: descr.ok_or_else(|| bad("no 'descr'"))?,
        fortran_order: fortran.ok_or_else(|| bad("no 'fortran_order'"))?,
        shape: shape.ok_or_else(|| bad("no 'shape'"))?,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        let hit = self.s.get(self.i) == Some(&c);
        if hit {
            self.i += 1;
        }
        hit
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}'", c as char))
        }
    }
    fn string(&mut self) -> Result<String, String> {
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err("expected a quoted string".into()),
        };
        self.i += 1;
        let start = self.i;
        while self.s.get(self.i).is_some_and(|&c| c != q) {
            self.i += 1;
        }
        let end = self.i;
        self.expect(q)?;
        Ok(String::from_utf8_lossy(&self.s[start..end]).into_owned())
    }
    fn boolean(&mut self) -> Result<bool, String> {
        let rest = &self.s[self.i..];
        if rest.starts_with(b"True") {
            self.i += 4;
            Ok(true)
        } else if rest.starts_with(b"False") {
            self.i += 5;
            Ok(false)
        } else {
            Err("expected True or False".into())
        }
    }
    fn tuple(&mut self) -> Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                return Ok(dims);
            }
            let start = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            dims.push(
                digits
                    .parse()
                    .map_err(|_| "expected a dimension".to_string())?,
            );
            // Python writes 'L' after longs in old files.
            self.eat(b'L');
            self.ws();
            if !self.eat(b',') {
                self.ws();
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

/// Encodes a tensor as `.npy` bytes (format 1.0, or 2.0 when the header needs it).
pub fn encode_npy(t: TensorRef<'_>) -> Result<Vec<u8>, String> {
    let descr = descr(t.dtype()).ok_or_else(|| {
        format!(
            "cannot write {} as .npy (numpy has no such dtype): write a TensorProto .pb",
            t.dtype()
        )
    })?;
    let dims: Vec<String> = t.shape().iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Padding adds at most 64 bytes; the 1.0 header length is a u16.
    let v1 = header.len() + 64 < u16::MAX as usize;
    let prefix = if v1 { 10 } else { 12 };
    while !(prefix + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(prefix + header.len() + t.bytes().len());
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(t.bytes());
    Ok(out)
}

/// Writes a tensor as a `.npy` file.
pub fn write_npy(path: &Path, t: TensorRef<'_>) -> Result<(), IoError> {
    let bytes = encode_npy(t).map_err(|reason| IoError::Format {
        path: path.to_path_buf(),
        reason,
    })?;
    std::fs::write(path, bytes).map_err(|source| IoError::Io {
        what: "write",
        path: path.to_path_buf(),
        source,
    })
}
