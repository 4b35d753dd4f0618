//! The three transforms of Winograd F(4x4, 3x3) (Lavin & Gray's matrices, points 0, ±1, ±2
//! and ∞), each over [`L`] lanes at once: 16 tiles side by side (input and output) or 16
//! output channels (weights). Plain array arithmetic that LLVM vectorizes in the
//! `target_feature` wrappers of [`super`]; no FMA contraction, so every variant gives the
//! same bits.
//!
//! - weights `U = G g Gᵀ` (`g` 3 x 3, `U` 6 x 6), `G = [[1/4,0,0], [-1/6,-1/6,-1/6],
//!   [-1/6,1/6,-1/6], [1/24,1/12,1/6], [1/24,-1/12,1/6], [0,0,1]]`;
//! - input `V = Bᵀ d B` (`d` the 6 x 6 input patch of a 4 x 4 output tile), rows of `Bᵀ`:
//!   `[4,0,-5,0,1,0], [0,-4,-4,1,1,0], [0,4,-4,-1,1,0], [0,-2,-1,2,1,0], [0,2,-1,-2,1,0],
//!   [0,4,0,-5,0,1]`;
//! - output `Y = Aᵀ M A` (`M` the 6 x 6 products summed over input channels, `Y` 4 x 4),
//!   rows of `Aᵀ`: `[1,1,1,1,1,0], [0,1,-1,2,-2,0], [0,1,1,4,4,0], [0,1,-1,8,-8,1]`.

/// Lanes of every transform.
pub(super) const L: usize = 16;

/// One value per lane.
pub(super) type Lanes = [f32; L];

/// `Bᵀ x` for 6 lane vectors.
#[inline(always)]
fn bt(x: [&Lanes; 6]) -> [Lanes; 6] {
    let mut y = [[0.0f32; L]; 6];
    for i in 0..L {
        let (x0, x1, x2, x3, x4, x5) = (x[0][i], x[1][i], x[2][i], x[3][i], x[4][i], x[5][i]);
        // Shared sums as in the usual factorization (exact reorderings are not needed: every
        // variant runs this same code).
        let a = x4 - 4.0 * x2;
        let b = x3 - 4.0 * x1;
        let c = x4 - x2;
        let d = 2.0 * (x3 - x1);
        y[0][i] = 4.0 * x0 - 5.0 * x2 + x4;
        y[1][i] = a + b;
        y[2][i] = a - b;
        y[3][i] = c + d;
        y[4][i] = c - d;
        y[5][i] = 4.0 * x1 - 5.0 * x3 + x5;
    }
    y
}

/// The input transform of one 6 x 6 patch per lane (`d[r][k]`, row `r`, column `k`) into
/// `v[6 i + j]`.
#[inline(always)]
pub(super) fn input(d: &[[Lanes; 6]; 6], v: &mut [Lanes; 36]) {
    // Columns first: t[r] = Bᵀ applied along each row's 6 columns, i.e. (d B) row r.
    let mut t = [[[0.0f32; L]; 6]; 6];
    for r in 0..6 {
        let row = &d[r];
        t[r] = bt([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
    }
    // Then rows: for column j, Bᵀ over t[0..6][j].
    for j in 0..6 {
        let col = bt([&t[0][j], &t[1][j], &t[2][j], &t[3][j], &t[4][j], &t[5][j]]);
        for i in 0..6 {
            v[6 * i + j] = col[i];
        }
    }
}

/// `Aᵀ m` for 6 lane vectors.
#[inline(always)]
fn at(m: [&Lanes; 6]) -> [Lanes; 4] {
    let mut o = [[0.0f32; L]; 4];
    for i in 0..L {
        let (m0, m1, m2, m3, m4, m5) = (m[0][i], m[1][i], m[2][i], m[3][i], m[4][i], m[5][i]);
        let s12 = m1 + m2;
        let d12 = m1 - m2;
        let s34 = m3 + m4;
        let d34 = m3 - m4;
        o[0][i] = m0 + s12 + s34;
        o[1][i] = d12 + 2.0 * d34;
        o[2][i] = s12 + 4.0 * s34;
        o[3][i] = d12 + 8.0 * d34 + m5;
    }
    o
}

/// The output transform: `m[6 i + j]` (per lane) into `y[4 i + j]`.
#[inline(always)]
pub(super) fn output(m: &[&Lanes; 36], y: &mut [Lanes; 16]) {
    // Rows first: for column j, Aᵀ over m[0..6][j].
    let mut t = [[[0.0f32; L]; 6]; 4];
    for j in 0..6 {
        let col = at([m[j], m[6 + j], m[12 + j], m[18 + j], m[24 + j], m[30 + j]]);
        for i in 0..4 {
            t[i][j] = col[i];
        }
    }
    for i in 0..4 {
        let r = &t[i];
        let row = at([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
        for j in 0..4 {
            y[4 * i + j] = row[j];
        }
    }
}

/// `G g` for 3 lane vectors.
#[inline(always)]
fn g3(g: [&Lanes; 3]) -> [Lanes; 6] {
    let mut u = [[0.0f32; L]; 6];
    for i in 0..L {
        let (g0, g1, g2) = (g[0][i], g[1][i], g[2][i]);
        let s = g0 + g2;
        u[0][i] = g0 * 0.25;
        u[1][i] = (s + g1) * (-1.0 / 6.0);
        u[2][i] = (s - g1) * (-1.0 / 6.0);
        let q = g0 * (1.0 / 24.0) + g2 * (1.0 / 6.0);
        u[3][i] = q + g1 * (1.0 / 12.0);
        u[4][i] = q - g1 * (1.0 / 12.0);
        u[5][i] = g2;
    }
    u
}

/// The weight transform of one 3 x 3 kernel per lane (`g[3 r + k]`) into `u[6 i + j]`.
#[inline(always)]
pub(super) fn weights(g: &[Lanes; 9], u: &mut [Lanes; 36]) {
    // Columns of g first: t[.][k] = G g[.][k] (6 x 3).
    let mut t = [[[0.0f32; L]; 3]; 6];
    for k in 0..3 {
        let col = g3([&g[k], &g[3 + k], &g[6 + k]]);
        for i in 0..6 {
            t[i][k] = col[i];
        }
    }
    for i in 0..6 {
        let r = &t[i];
        let row = g3([&r[0], &r[1], &r[2]]);
        for j in 0..6 {
            u[6 * i + j] = row[j];
        }
    }
}
