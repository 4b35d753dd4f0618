//! The GEMM core: a hand-checked product here, every available kernel against a plain
//! triple loop in `differential.rs`.

use super::*;

mod accumulate;
mod differential;

#[test]
fn small_product() {
    // A 2x3, B 3x2 given transposed (n x k storage: rs = 1, cs = 3).
    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let bt = [7.0f32, 9.0, 11.0, 8.0, 10.0, 12.0];
    let mut packed = vec![0.0; packed_b_len(3, 2)];
    pack_b(3, 2, &bt, 1, 3, &mut packed);
    let mut c = [1.0f32; 4];
    let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS + 1];
    // SAFETY: sizes match the contract.
    unsafe {
        arenac_sgemm(
            2,
            2,
            3,
            a.as_ptr(),
            3,
            packed.as_ptr(),
            c.as_mut_ptr(),
            2,
            1,
            scratch.as_mut_ptr(),
            1,
        )
    };
    assert_eq!(c, [59.0, 65.0, 140.0, 155.0]);
}
