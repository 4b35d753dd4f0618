//! 2-d convolution as im2col panels fed to the GEMM core, called from JIT code.
//!
//! For each image and group, the output pixels are cut into tiles of at most
//! [`crate::ops::IM2COL_TILE`]; each tile's im2col panel (`K = C/group * kh * kw` rows, one
//! column per output pixel) is written straight in the packed-B layout of
//! [`super::arenac_sgemm`] (16-wide column panels, zero for padding taps and past the tile),
//! then one `M/group x tile x K` product writes the output tile; bias is added per channel.

use super::{NR, arenac_sgemm, packed_b_len};
use crate::ops::IM2COL_TILE;

/// Geometry of one 2-d convolution (all sizes in elements; NCHW input, OIHW weights).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvParams {
    /// Batch size.
    pub n: u64,
    /// Input channels (all groups).
    pub c: u64,
    /// Input height.
    pub h: u64,
    /// Input width.
    pub w: u64,
    /// Output channels (all groups).
    pub m: u64,
    /// Groups (divides `c` and `m`).
    pub group: u64,
    /// Kernel height.
    pub kh: u64,
    /// Kernel width.
    pub kw: u64,
    /// Vertical stride.
    pub stride_h: u64,
    /// Horizontal stride.
    pub stride_w: u64,
    /// Top padding.
    pub pad_t: u64,
    /// Left padding.
    pub pad_l: u64,
    /// Vertical dilation.
    pub dil_h: u64,
    /// Horizontal dilation.
    pub dil_w: u64,
    /// Output height.
    pub oh: u64,
    /// Output width.
    pub ow: u64,
    /// Non-zero when a bias (`m` floats) is given.
    pub has_bias: u64,
}

impl ConvParams {
    /// The struct as bytes (for the weights region).
    pub fn to_bytes(&self) -> Vec<u8> {
        [
            self.n,
            self.c,
            self.h,
            self.w,
            self.m,
            self.group,
            self.kh,
            self.kw,
            self.stride_h,
            self.stride_w,
            self.pad_t,
            self.pad_l,
            self.dil_h,
            self.dil_w,
            self.oh,
            self.ow,
            self.has_bias,
        ]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect()
    }

    /// Rows of one group's im2col matrix: `C/group * kh * kw`.
    pub fn k(&self) -> usize {
        (self.c / self.group.max(1) * self.kh * self.kw) as usize
    }

    /// Floats of the panel part of the scratch (rounded up to 64 bytes).
    pub fn panel_floats(&self) -> usize {
        let tile = ((self.oh * self.ow) as usize).min(IM2COL_TILE);
        packed_b_len(self.k(), tile).next_multiple_of(16)
    }
}

/// Scratch bytes [`arenac_conv2d`] needs: the packed panel of one tile (rounded up to 64
/// bytes) and the GEMM core's A scratch for `M/group x K`.
pub fn conv2d_scratch_bytes(p: &ConvParams) -> usize {
    let mg = (p.m / p.group.max(1)) as usize;
    (p.panel_floats() + super::a_scratch_floats(mg, p.k())) * 4
}

/// `y = conv(x, w) + bias`.
///
/// # Safety
/// `p` points to a valid [`ConvParams`] whose output size matches its input geometry; `x` is
/// readable for `n*c*h*w` floats, `w` for `m * c/group * kh * kw`, `bias` for `m` when
/// `has_bias != 0`; `y` writable for `n*m*oh*ow` floats; `scratch` writable for
/// [`conv2d_scratch_bytes`] bytes; `y` and `scratch` overlap nothing else.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_conv2d(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: valid by the contract.
    let p = unsafe { *p };
    let u = |v: u64| v as usize;
    let (g, ch, cg) = (u(p.group.max(1)), u(p.c), u(p.c / p.group.max(1)));
    let (mg, h, wd) = (u(p.m / p.group.max(1)), u(p.h), u(p.w));
    let (kh, kw, oh, ow) = (u(p.kh), u(p.kw), u(p.oh), u(p.ow));
    let (sh, sw, pt, pl) = (u(p.stride_h), u(p.stride_w), u(p.pad_t), u(p.pad_l));
    let (dh, dw) = (u(p.dil_h), u(p.dil_w));
    let k = p.k();
    let pixels = oh * ow;
    let panel_floats = p.panel_floats();
    // SAFETY: the A scratch follows the panel inside the scratch block.
    let a_scratch = unsafe { scratch.add(panel_floats) };
    for img in 0..u(p.n) {
        for gi in 0..g {
            // SAFETY: image img, channels gi*cg.. of the input (within n*c*h*w floats).
            let xg = unsafe { x.add((img * ch + gi * cg) * h * wd) };
            // SAFETY: output channels gi*mg..(gi+1)*mg of image img (within n*m*oh*ow).
            let yg = unsafe { y.add((img * u(p.m) + gi * mg) * pixels) };
            let mut t0 = 0;
            while t0 < pixels {
                let tile = IM2COL_TILE.min(pixels - t0);
                // SAFETY: packed_b_len(k, tile) <= panel_floats, writable by the contract
                // and disjoint from x.
                let panel =
                    unsafe { std::slice::from_raw_parts_mut(scratch, packed_b_len(k, tile)) };
                for (jp, pan) in panel.chunks_exact_mut((k * NR).max(1)).enumerate() {
                    // Input coordinates of tap (0, 0) for each column (offset by the padding,
                    // so they stay unsigned); None past the tile.
                    let mut base = [None::<(usize, usize)>; NR];
                    for (jj, b) in base.iter_mut().enumerate() {
                        let j = jp * NR + jj;
                        if j < tile {
                            let (oy, ox) = ((t0 + j) / ow, (t0 + j) % ow);
                            *b = Some((oy * sh, ox * sw));
                        }
                    }
                    // Row r of K is tap (ci, ky, kx) in OIHW weight order.
                    for (r, row) in pan.chunks_exact_mut(NR).enumerate() {
                        let (ci, ky, kx) = (r / (kh * kw), r / kw % kh, r % kw);
                        for (dst, b) in row.iter_mut().zip(&base) {
                            *dst = match *b {
                                Some((by, bx)) => {
                                    let iy = (by + ky * dh).wrapping_sub(pt);
                                    let ix = (bx + kx * dw).wrapping_sub(pl);
                                    if iy < h && ix < wd {
                                        // SAFETY: ci < cg, iy < h, ix < w: inside this
                                        // group's input channels.
                                        unsafe { *xg.add((ci * h + iy) * wd + ix) }
                                    } else {
                                        0.0
                                    }
                                }
                                None => 0.0,
                            };
                        }
                    }
                }
                // SAFETY: W of group gi is mg x k row-major; the panel holds packed_b_len(k,
                // tile) floats; C is mg rows of tile floats at stride pixels inside y; the A
                // scratch has a_scratch_floats(mg, k) floats after the panel; y overlaps
                // neither weights nor scratch.
                unsafe {
                    arenac_sgemm(
                        mg,
                        tile,
                        k,
                        w.add(gi * mg * k),
                        k,
                        scratch,
                        yg.add(t0),
                        pixels,
                        0,
                        a_scratch,
                    )
                };
                t0 += tile;
            }
            if p.has_bias != 0 {
                for mi in 0..mg {
                    // SAFETY: channel gi*mg+mi < m of the bias (m floats by the contract).
                    let b = unsafe { *bias.add(gi * mg + mi) };
                    // SAFETY: one output channel row of `pixels` floats inside y.
                    let row =
                        unsafe { std::slice::from_raw_parts_mut(yg.add(mi * pixels), pixels) };
                    row.iter_mut().for_each(|v| *v += b);
                }
            }
        }
    }
}
