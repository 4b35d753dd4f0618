//! Separable index gathers: `out[o_0, .., o_r] = in[map_0(o_0), .., map_r(o_r)]`, where each
//! dim's map is either affine (a byte stride from a base) or a table of byte offsets computed
//! at compile time and stored in the weights region. Pad (edge, reflect, wrap), Expand, Tile
//! and nearest Resize are all such gathers. Trailing dims that map onto themselves collapse
//! into one contiguous row copied per innermost step ([`super::copy_run`]).
//! Also the fill of a constant element pattern (constant-mode Pad).

use cranelift_codegen::ir::types::{I8, I16, I32, I32X4, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::super::{for_range, mem, offset};

/// How one output dim finds its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimMap {
    /// `i * bytes` (0 for a broadcast dim).
    Stride(i64),
    /// `table[i]`: an i64 byte offset at this byte offset of the tables operand.
    Table(usize),
}

/// A separable gather over `dims` (the output's dims, size-1 dims dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexGatherDesc {
    /// Bytes per element (1, 2, 4 or 8).
    pub elem: usize,
    /// Output dims before the row.
    pub dims: Vec<usize>,
    /// Source of each dim.
    pub maps: Vec<DimMap>,
    /// Elements copied contiguously per innermost step.
    pub row: usize,
    /// Byte offset added to the source once.
    pub base: i64,
}

impl IndexGatherDesc {
    /// Builds the gather for input `in_shape` (as many dims as `maps`) where output dim `k`
    /// takes input index `maps[k][o]` at output index `o`, and the i64 byte-offset tables it
    /// reads (empty when every dim is affine). Indices must be in range (callers clamp).
    pub fn new(elem: usize, in_shape: &[usize], maps: &[Vec<usize>]) -> (IndexGatherDesc, Vec<u8>) {
        let r = maps.len();
        let mut st = vec![1i64; r];
        for k in (0..r.saturating_sub(1)).rev() {
            st[k] = st[k + 1] * in_shape.get(k + 1).copied().unwrap_or(1) as i64;
        }
        let identity = |k: usize| {
            maps[k].len() == in_shape[k] && maps[k].iter().enumerate().all(|(i, &j)| i == j)
        };
        // Trailing identity dims: one contiguous row.
        let mut cut = r;
        while cut > 0 && identity(cut - 1) {
            cut -= 1;
        }
        let row: usize = maps[cut..].iter().map(Vec::len).product();
        let e = elem as i64;
        let mut d = IndexGatherDesc {
            elem,
            dims: Vec::new(),
            maps: Vec::new(),
            row,
            base: 0,
        };
        let mut tables: Vec<u8> = Vec::new();
        for (k, m) in maps[..cut].iter().enumerate() {
            let Some(&first) = m.first() else {
                // An empty output dim: nothing to copy.
                d.dims = vec![0];
                d.maps = vec![DimMap::Stride(0)];
                return (d, Vec::new());
            };
            d.base += first as i64 * st[k] * e;
            if m.len() == 1 {
                continue;
            }
            let step = m[1] as i64 - first as i64;
            let affine = m
                .iter()
                .enumerate()
                .all(|(i, &j)| j as i64 == first as i64 + step * i as i64);
            d.dims.push(m.len());
            if affine {
                d.maps.push(DimMap::Stride(step * st[k] * e));
            } else {
                d.maps.push(DimMap::Table(tables.len()));
                for &j in m {
                    let off = (j as i64 - first as i64) * st[k] * e;
                    tables.extend_from_slice(&off.to_le_bytes());
                }
            }
        }
        (d, tables)
    }

    /// Emits the body for `(src, tables, dst)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, src: Value, tables: Value, dst: Value) {
        if self.dims.contains(&0) || self.row == 0 {
            return;
        }
        let s = if self.base == 0 {
            src
        } else {
            b.ins().iadd_imm_s(src, self.base)
        };
        self.level(b, 0, s, tables, dst);
    }

    fn level(&self, b: &mut FunctionBuilder<'_>, k: usize, s: Value, t: Value, d: Value) {
        if k == self.dims.len() {
            super::copy_run(b, s, d, self.row * self.elem);
            return;
        }
        let out_step = self.dims[k + 1..].iter().product::<usize>() * self.row * self.elem;
        for_range(b, self.dims[k], &mut |b, i| {
            let sp = match self.maps[k] {
                DimMap::Stride(0) => s,
                DimMap::Stride(st) => {
                    let o = b.ins().imul_imm_s(i, st);
                    b.ins().iadd(s, o)
                }
                DimMap::Table(at) => {
                    let tp = offset(b, t, i, 8);
                    let o = b.ins().load(I64, mem(), tp, at as i32);
                    b.ins().iadd(s, o)
                }
            };
            let dp = offset(b, d, i, out_step);
            self.level(b, k + 1, sp, t, dp);
        });
    }
}

/// `dst[i] = value` for `count` elements of `elem` bytes: the value's LE bits known at compile
/// time, or loaded once at run time from the kernel's first pointer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillDesc {
    /// Bytes per element (1, 2, 4 or 8).
    pub elem: usize,
    /// Elements.
    pub count: usize,
    /// The element's bits; `None`: read from the first pointer (the output is then the
    /// second).
    pub bits: Option<u64>,
}

impl FillDesc {
    /// Emits the body for `(dst)`, or `(value, dst)` when `bits` is `None`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, ptrs: &[Value]) {
        let ty = match self.elem {
            1 => I8,
            2 => I16,
            8 => I64,
            _ => I32,
        };
        let mask = match self.elem {
            1 => 0xff,
            2 => 0xffff,
            8 => u64::MAX,
            _ => 0xffff_ffff,
        };
        let (x, dst) = match self.bits {
            Some(bits) => (b.ins().iconst(ty, (bits & mask) as i64), ptrs[0]),
            None => (b.ins().load(ty, mem(), ptrs[0], 0), ptrs[1]),
        };
        let bytes = self.count * self.elem;
        // The 16-byte pattern (the element repeated) when it tiles 4-byte words.
        let word = match self.elem {
            1 | 2 => {
                let w = b.ins().uextend(I32, x);
                let k = if self.elem == 1 {
                    0x0101_0101
                } else {
                    0x0001_0001
                };
                Some(b.ins().imul_imm_u(w, k))
            }
            4 => Some(x),
            _ => None,
        };
        let mut done = 0;
        if let Some(wd) = word {
            let v = b.ins().splat(I32X4, wd);
            for_range(b, bytes / 16, &mut |b, i| {
                let p = offset(b, dst, i, 16);
                b.ins().store(mem(), v, p, 0);
            });
            done = bytes / 16 * 16;
        }
        let rest = (bytes - done) / self.elem;
        if rest == 0 {
            return;
        }
        let start = b.ins().iadd_imm_u(dst, done as i64);
        for_range(b, rest, &mut |b, i| {
            let p = offset(b, start, i, self.elem);
            b.ins().store(mem(), x, p, 0);
        });
    }
}
