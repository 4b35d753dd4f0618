//! Nearest-neighbour Resize by whole factors on the last two dims (U-Net, FPN and YOLO
//! necks' 2x upsampling), found from the gather's per-dim index maps (`idx[o] == o / s`):
//! each input row is written once with every element repeated `sw` times, the next `sh - 1`
//! output rows copied from it; planes spread over the threads. The same bytes as the JIT's
//! general byte gather ([`super::movement`]), which moves one element per step on one
//! thread; any element size of 1, 2, 4 or 8 bytes.

use super::Ctx;
use crate::codegen::host::{HostKernel, input, output};
use crate::codegen::program::{Operand, Program};
use crate::error::Error;

/// A repeat of the last two dims: `planes` planes of `h x w` elements, each element
/// repeated `sh` times down and `sw` times across.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Repeat {
    planes: usize,
    h: usize,
    w: usize,
    sh: usize,
    sw: usize,
}

/// Whether index map `m` over an axis of `n` is a whole-factor repeat: `m[o] == o / s` for
/// every output `o` of `n * s`.
fn factor(m: &[usize], n: usize) -> Option<usize> {
    if n == 0 || !m.len().is_multiple_of(n) {
        return None;
    }
    let s = m.len() / n;
    m.iter().enumerate().all(|(o, &j)| j == o / s).then_some(s)
}

/// The [`Repeat`] the gather of `in_shape` through `maps` is, when every dim but the last
/// two is kept as it is and those two repeat by whole factors (not both 1).
pub(super) fn repeat(maps: &[Vec<usize>], in_shape: &[usize]) -> Option<Repeat> {
    let r = in_shape.len();
    if r < 2 || maps.len() != r {
        return None;
    }
    let lead = &in_shape[..r - 2];
    let kept = maps[..r - 2]
        .iter()
        .zip(lead)
        .all(|(m, &n)| m.len() == n && m.iter().enumerate().all(|(o, &j)| j == o));
    let (h, w) = (in_shape[r - 2], in_shape[r - 1]);
    let (sh, sw) = (factor(&maps[r - 2], h)?, factor(&maps[r - 1], w)?);
    (kept && (sh, sw) != (1, 1)).then_some(Repeat {
        planes: lead.iter().product(),
        h,
        w,
        sh,
        sw,
    })
}

/// Planes `p0..p1` of `x` repeated into `y` (whole planes: `h * w` and `h * sh * w * sw`
/// elements each, `x` and `y` starting at plane `p0`).
fn planes<T: Copy>(r: &Repeat, x: &[T], y: &mut [T]) {
    let ow = r.w * r.sw;
    for (src, rows) in x.chunks_exact(r.w).zip(y.chunks_exact_mut(ow * r.sh)) {
        let (first, rest) = rows.split_at_mut(ow);
        if r.sw == 2 {
            for (d, &v) in first.chunks_exact_mut(2).zip(src) {
                d[0] = v;
                d[1] = v;
            }
        } else {
            for (d, &v) in first.chunks_exact_mut(r.sw).zip(src) {
                d.fill(v);
            }
        }
        for row in rest.chunks_exact_mut(ow) {
            row.copy_from_slice(first);
        }
    }
}

/// Runs `r` on `x` into `y` (`T` the element), planes spread over the current pool.
///
/// # Safety
/// `x` readable for `planes * h * w` elements of `T`, `y` writable for `sh * sw` times as
/// many, both aligned to `T`, not overlapping.
unsafe fn run<T: Copy>(r: &Repeat, x: *const u8, y: *mut u8) {
    let (plane_in, plane_out) = (r.h * r.w, r.h * r.w * r.sh * r.sw);
    let width = crate::par::width(
        crate::par::cost::elems_ns(r.planes * plane_out),
        crate::par::threads(),
    );
    let tasks = r.planes.min(4 * width.max(1));
    let (xa, ya) = (x as usize, y as usize);
    crate::par::for_each(tasks, width, |task, _| {
        let (p0, p1) = (r.planes * task / tasks, r.planes * (task + 1) / tasks);
        // SAFETY: planes `p0..p1` of both, inside the contract's extents; each task's output
        // planes are its own.
        let (xs, ys) = unsafe {
            (
                input::<T>(
                    (xa as *mut u8).add(p0 * plane_in * size_of::<T>()),
                    (p1 - p0) * plane_in,
                ),
                output::<T>(
                    (ya as *mut u8).add(p0 * plane_out * size_of::<T>()),
                    (p1 - p0) * plane_out,
                ),
            )
        };
        planes(r, xs, ys);
    });
}

/// Lowers the repeat `r` of elements of `elem` bytes from `src` into `dst` as a host kernel.
pub(super) fn call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    elem: usize,
    r: Repeat,
    src: Operand,
    dst: Operand,
) -> Result<(), Error> {
    let f: unsafe fn(&Repeat, *const u8, *mut u8) = match elem {
        1 => run::<u8>,
        2 => run::<u16>,
        4 => run::<u32>,
        8 => run::<u64>,
        _ => return Err(cx.err(format!("no Resize kernel for {elem}-byte elements"))),
    };
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: the input and output planned for these shapes,
        // aligned to their element size.
        unsafe { f(&r, p[0], p[1]) }
    });
    super::act16::host_call(cx, prog, kernel, vec![src, dst])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general gather: output element of each index through the per-dim maps.
    fn gather<T: Copy + Default>(x: &[T], shape: &[usize], maps: &[Vec<usize>]) -> Vec<T> {
        let out: Vec<usize> = maps.iter().map(Vec::len).collect();
        let n: usize = out.iter().product();
        let mut y = vec![T::default(); n];
        for (i, v) in y.iter_mut().enumerate() {
            let (mut rem, mut stride, mut src) = (i, 1, 0);
            for d in (0..out.len()).rev() {
                let k = rem % out[d];
                rem /= out[d];
                src += maps[d][k] * stride;
                stride *= shape[d];
            }
            *v = x[src];
        }
        y
    }

    fn maps_for(shape: &[usize], sh: usize, sw: usize) -> Vec<Vec<usize>> {
        let r = shape.len();
        (0..r)
            .map(|d| {
                let s = if d == r - 2 {
                    sh
                } else if d == r - 1 {
                    sw
                } else {
                    1
                };
                (0..shape[d] * s).map(|o| o / s).collect()
            })
            .collect()
    }

    #[test]
    fn whole_factor_repeats_match_the_gather_at_every_element_size_and_thread_count() {
        for (shape, sh, sw) in [
            (vec![1, 3, 5, 7], 2, 2),
            (vec![2, 4, 3, 1], 3, 1),
            (vec![1, 1, 2, 9], 1, 2),
            (vec![5, 6, 2], 2, 3),
            (vec![3, 8], 4, 4),
        ] {
            let maps = maps_for(&shape, sh, sw);
            let r = repeat(&maps, &shape).expect("a repeat");
            let n: usize = shape.iter().product();
            let x16: Vec<u16> = (0..n).map(|i| (i * 7 + 3) as u16).collect();
            let x32: Vec<u32> = (0..n).map(|i| (i * 7919 + 1) as u32).collect();
            let x8: Vec<u8> = (0..n).map(|i| (i * 13) as u8).collect();
            for threads in [1, 2, 3] {
                let pool = crate::par::Pool::new(threads).expect("a pool");
                crate::par::with_pool(Some(&pool), || {
                    let mut y16 = vec![0u16; n * sh * sw];
                    let mut y32 = vec![0u32; n * sh * sw];
                    let mut y8 = vec![0u8; n * sh * sw];
                    // SAFETY: the vectors hold the extents `run` reads and writes.
                    unsafe {
                        run::<u16>(&r, x16.as_ptr().cast(), y16.as_mut_ptr().cast());
                        run::<u32>(&r, x32.as_ptr().cast(), y32.as_mut_ptr().cast());
                        run::<u8>(&r, x8.as_ptr(), y8.as_mut_ptr());
                    }
                    assert_eq!(y16, gather(&x16, &shape, &maps), "{shape:?} {sh}x{sw}");
                    assert_eq!(y32, gather(&x32, &shape, &maps), "{shape:?} {sh}x{sw}");
                    assert_eq!(y8, gather(&x8, &shape, &maps), "{shape:?} {sh}x{sw}");
                });
            }
        }
    }

    #[test]
    fn other_maps_are_not_repeats() {
        let shape = [1, 2, 4, 4];
        // Identity everywhere: nothing to repeat.
        assert_eq!(repeat(&maps_for(&shape, 1, 1), &shape), None);
        // A leading dim gathered, not kept.
        let mut m = maps_for(&shape, 2, 2);
        m[1] = vec![1, 0];
        assert_eq!(repeat(&m, &shape), None);
        // Half-pixel-like rounding: 0,1,1,2,2,3,3,3 is not o / 2.
        let mut m = maps_for(&shape, 2, 2);
        m[3] = vec![0, 1, 1, 2, 2, 3, 3, 3];
        assert_eq!(repeat(&m, &shape), None);
        // A downsample (every other element).
        let mut m = maps_for(&shape, 1, 1);
        m[3] = vec![0, 2];
        assert_eq!(repeat(&m, &shape), None);
        // The repeat itself.
        assert_eq!(
            repeat(&maps_for(&shape, 2, 3), &shape),
            Some(Repeat {
                planes: 2,
                h: 4,
                w: 4,
                sh: 2,
                sw: 3
            })
        );
    }
}
