use super::*;

#[test]
fn widen_narrow_round_trip_and_round_to_nearest_even() {
    // 1 + 2^-8 is halfway between two bf16 values: it rounds to the even one (1.0);
    // 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
    let x = [1.0f32, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -2.5, 65504.0];
    let mut b = [0u16; 5];
    narrow(N16::Bf16, &x, &mut b);
    let mut back = [0f32; 5];
    widen(N16::Bf16, &b, &mut back);
    assert_eq!(back, [1.0, 1.0, 1.0 + 1.0 / 64.0, -2.5, 65536.0]);
    narrow(N16::F16, &x, &mut b);
    widen(N16::F16, &b, &mut back);
    assert_eq!(
        back,
        [1.0, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -2.5, 65504.0]
    );
}

#[test]
fn unary_in_place_over_several_chunks() {
    let n = CHUNK * 2 + 7;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 1000.0).collect();
    let mut v = vec![0u16; n];
    narrow(N16::F16, &x, &mut v);
    let p = v.as_mut_ptr();
    // SAFETY: `p` holds `n` values; in place is allowed.
    unsafe {
        unary(N16::F16, n, p, p, &|s| {
            s.iter_mut().for_each(|e| *e = e.max(0.0))
        })
    };
    let mut back = vec![0f32; n];
    widen(N16::F16, &v, &mut back);
    for (i, (&a, &b)) in x.iter().zip(&back).enumerate() {
        assert_eq!(b, a.max(0.0), "element {i}");
    }
}

#[test]
fn conv_bands_cover_the_input_rows_they_read() {
    let p = crate::gemm::conv::ConvParams {
        n: 1,
        c: 2,
        h: 9,
        w: 5,
        m: 3,
        group: 1,
        kh: 3,
        kw: 3,
        stride_h: 2,
        stride_w: 1,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: 5,
        ow: 5,
        ..Default::default()
    };
    // Output rows 0..2 read input rows -1..=3 (row -1 staged as zeros): a valid band.
    let (q, lo) = conv::band(&p, 0, 2);
    assert_eq!((lo, q.h, q.pad_t, q.oh), (-1, 5, 0, 2));
    // Rows 2..5 read 3..=9, row 9 past the input (zeros).
    let (q, lo) = conv::band(&p, 2, 5);
    assert_eq!((lo, q.h, q.pad_t, q.oh), (3, 7, 0, 3));
}

#[test]
fn depthwise_bands_fill_the_lanes_within_the_budget() {
    // MobileNetV2's 3x3/s2 depthwise on 96 x 112x112: whole planes of 8 channels (490 KiB)
    // exceed the smallest budget, so 8-channel blocks go in row bands that fit it.
    let p = crate::gemm::conv::ConvParams {
        n: 1,
        c: 96,
        h: 112,
        w: 112,
        m: 96,
        group: 96,
        kh: 3,
        kw: 3,
        stride_h: 2,
        stride_w: 2,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: 56,
        ow: 56,
        ..Default::default()
    };
    let budget = conv::budgets(&p).last().copied().unwrap();
    let rows = conv::dw_bands(&p, budget).expect("banded");
    assert!((2..56).contains(&rows), "{rows} rows");
    assert!(conv::scratch_bytes(&p) as u64 <= budget);
    // 12 groups are not whole blocks of 8: whole planes, as before.
    let q = crate::gemm::conv::ConvParams {
        c: 12,
        m: 12,
        group: 12,
        ..p
    };
    assert_eq!(conv::dw_bands(&q, budget), None);
    assert!(conv::dw_block(&q, budget).is_some());
}
