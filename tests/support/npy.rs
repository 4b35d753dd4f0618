//! `.npy` reading and writing for the model tests.

use std::path::Path;

use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;

/// A minimal `.npy` reader (format 1.0-3.0, little-endian, C order): dtype descr, shape, data.
pub fn read_npy(path: &Path) -> Result<(String, Vec<usize>, Vec<u8>), String> {
    let err = |what: &str| format!("{}: {what}", path.display());
    let bytes = std::fs::read(path).map_err(|e| err(&e.to_string()))?;
    if bytes.get(..6) != Some(b"\x93NUMPY".as_slice()) || bytes.len() < 12 {
        return Err(err("not a .npy file"));
    }
    let (hlen, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = bytes
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| err("bad header"))?;
    let field = |key: &str| -> Result<&str, String> {
        let at = header
            .find(key)
            .ok_or_else(|| err(&format!("no {key} in {header}")))?;
        Ok(header[at + key.len()..].trim_start_matches([' ', ':']))
    };
    let descr = field("'descr'")?;
    let descr = descr
        .get(1..)
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| err("bad descr"))?
        .to_string();
    if !field("'fortran_order'")?.starts_with("False") {
        return Err(err("Fortran order"));
    }
    let shape_text = field("'shape'")?;
    let close = shape_text.find(')').ok_or_else(|| err("bad shape"))?;
    let shape = shape_text[1..close]
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(|_| err("bad dim")))
        .collect::<Result<Vec<usize>, String>>()?;
    Ok((descr, shape, bytes[start + hlen..].to_vec()))
}

/// The `.npy` descr of a dtype (the ones numpy has): the runtime's.
pub fn npy_descr(dtype: DType) -> Option<&'static str> {
    arenac::io::npy::descr(dtype)
}

/// Writes a tensor as `.npy` (format 1.0).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), String> {
    let descr = npy_descr(t.dtype()).ok_or_else(|| format!("no .npy dtype for {}", t.ty()))?;
    let dims: Vec<String> = t.shape().iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(t.bytes());
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// A tensor read from `.npy`.
pub fn npy_tensor(path: &Path) -> Result<Tensor, String> {
    let (descr, shape, data) = read_npy(path)?;
    let dtype = DType::ALL
        .into_iter()
        .find(|&d| npy_descr(d) == Some(descr.as_str()))
        .ok_or_else(|| format!("{}: dtype {descr}", path.display()))?;
    Tensor::from_bytes(dtype, shape, data.into()).map_err(|e| e.to_string())
}
