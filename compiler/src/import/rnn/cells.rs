//! One direction of an LSTM, GRU or RNN, unrolled over time. The input projection of every
//! step is one MatMul over the whole sequence (bias added once); each step Gathers its row,
//! adds the recurrent MatMul and applies the gate equations of the ONNX spec. A state that
//! is absent (no `initial_h` / `initial_c`) is zero: the terms it would multiply are omitted.

use crate::error::Result;

use super::act::{Act, apply};
use super::emit::Emitter;
use super::{Kind, Spec};

/// The states one direction produced.
pub(super) struct DirOut {
    /// Hidden state at each time position (in time order, whatever the direction).
    pub(super) hs: Vec<String>,
    /// The last hidden state computed (time `seq - 1` forwards, `0` backwards).
    pub(super) h: String,
    /// The last cell state (LSTM).
    pub(super) c: Option<String>,
}

/// Per-direction weights, sliced from W, R, B and the initial states.
struct Dir {
    w: String,
    r: String,
    b: Option<String>,
    h0: Option<String>,
}

/// Unrolls direction `d` of `s`.
pub(super) fn direction(em: &mut Emitter<'_>, s: &Spec, d: usize) -> Result<DirOut> {
    em.scope = format!("d{d}");
    let dir = Dir {
        w: em.pick("W", &s.w, d, 0)?,
        r: em.pick("R", &s.r, d, 0)?,
        b: match &s.b {
            Some(b) => Some(em.pick("B", b, d, 0)?),
            None => None,
        },
        h0: match &s.h0 {
            Some(h) => Some(em.pick("h0", h, d, s.layout)?),
            None => None,
        },
    };
    match s.kind {
        Kind::Lstm => lstm(em, s, d, dir),
        Kind::Gru => gru(em, s, d, dir),
        Kind::Rnn => rnn(em, s, d, dir),
    }
}

/// `X · rowsᵀ (+ bias)`: `[seq, batch, k]` (layout 0) or `[batch, seq, k]` (layout 1).
fn project(
    em: &mut Emitter<'_>,
    s: &Spec,
    what: &str,
    rows: &str,
    bias: Option<&str>,
) -> Result<String> {
    let t = em.transpose(&format!("{what}.wt"), rows)?;
    let xw = em.bin("MatMul", &format!("{what}.xw"), &s.x, &t)?;
    em.add_opt(what, &xw, bias)
}

/// The clip of the spec applied to a gate's input, when set.
fn pre(em: &mut Emitter<'_>, s: &Spec, what: &str, x: String) -> Result<String> {
    match s.clip {
        Some(c) => em.clip(&format!("{what}.clip"), &x, c),
        None => Ok(x),
    }
}

/// `act(clip(x))`.
fn gate(em: &mut Emitter<'_>, s: &Spec, act: &Act, what: &str, x: String) -> Result<String> {
    let x = pre(em, s, what, x)?;
    apply(em, act, what, &x)
}

/// Time positions in the order direction `d` visits them.
fn times(s: &Spec, d: usize) -> Vec<usize> {
    if s.reverse.get(d).copied().unwrap_or(false) {
        (0..s.seq).rev().collect()
    } else {
        (0..s.seq).collect()
    }
}

/// The transpose of `rows` when a recurrent product will be needed (an initial state, or
/// more than one step).
fn recurrent(em: &mut Emitter<'_>, s: &Spec, what: &str, rows: &str) -> Result<Option<String>> {
    if s.h0.is_some() || s.seq > 1 {
        Ok(Some(em.transpose(what, rows)?))
    } else {
        Ok(None)
    }
}

/// `x + h · rt` when there is a previous state.
fn add_rec(
    em: &mut Emitter<'_>,
    what: &str,
    x: String,
    h: Option<&String>,
    rt: Option<&String>,
) -> Result<String> {
    match (h, rt) {
        (Some(h), Some(rt)) => {
            let hr = em.bin("MatMul", &format!("{what}.hr"), h, rt)?;
            em.bin("Add", what, &x, &hr)
        }
        _ => Ok(x),
    }
}

fn finish(hs: Vec<Option<String>>, h: Option<String>, c: Option<String>) -> Result<DirOut> {
    let hs: Option<Vec<String>> = hs.into_iter().collect();
    match (hs, h) {
        (Some(hs), Some(h)) => Ok(DirOut { hs, h, c }),
        _ => Err(crate::error::Error::InvalidModel(
            "a recurrent node unrolled into no steps (an arenac bug)".into(),
        )),
    }
}

/// LSTM gates i, o, f, c (in that order in W, R, B; peepholes P in order i, o, f).
fn lstm(em: &mut Emitter<'_>, s: &Spec, d: usize, dir: Dir) -> Result<DirOut> {
    let h = s.hidden;
    let gh = 4 * h;
    let bias = match &dir.b {
        Some(b) => {
            let wb = em.range("Wb", b, 0, gh, 0)?;
            let rb = em.range("Rb", b, gh, gh, 0)?;
            Some(em.bin("Add", "bias", &wb, &rb)?)
        }
        None => None,
    };
    let xw = project(em, s, "xw", &dir.w, bias.as_deref())?;
    let rt = recurrent(em, s, "Rt", &dir.r)?;
    let peep = match &s.p {
        Some(p) => {
            let pd = em.pick("P", p, d, 0)?;
            Some([
                em.range("Pi", &pd, 0, h, 0)?,
                em.range("Po", &pd, h, h, 0)?,
                em.range("Pf", &pd, 2 * h, h, 0)?,
            ])
        }
        None => None,
    };
    let one = if s.input_forget && (s.c0.is_some() || s.seq > 1) {
        Some(em.scalar(1.0)?)
    } else {
        None
    };
    let c0 = match &s.c0 {
        Some(c) => Some(em.pick("c0", c, d, s.layout)?),
        None => None,
    };
    let (f_act, g_act, h_act) = (s.act(d, 0), s.act(d, 1), s.act(d, 2));
    let mut hs = vec![None; s.seq];
    let (mut hp, mut cp) = (dir.h0, c0);
    for t in times(s, d) {
        em.scope = format!("d{d}.t{t}");
        let x = em.pick("x", &xw, t, s.layout)?;
        let g = add_rec(em, "gates", x, hp.as_ref(), rt.as_ref())?;
        let peephole =
            |em: &mut Emitter<'_>, what: &str, x: String, k: usize, c: Option<&String>| match (
                &peep, c,
            ) {
                (Some(p), Some(c)) => {
                    let pc = em.bin("Mul", &format!("{what}.pc"), &p[k], c)?;
                    em.bin("Add", &format!("{what}.peep"), &x, &pc)
                }
                _ => Ok(x),
            };
        let i_pre = em.range("i.pre", &g, 0, h, 1)?;
        let i_pre = peephole(em, "i", i_pre, 0, cp.as_ref())?;
        let i = gate(em, s, f_act, "i", i_pre)?;
        let c_pre = em.range("c.pre", &g, 3 * h, h, 1)?;
        let cc = gate(em, s, g_act, "c", c_pre)?;
        let ic = em.bin("Mul", "ic", &i, &cc)?;
        let c_new = match &cp {
            Some(c) => {
                let f = match &one {
                    Some(one) => em.bin("Sub", "f", one, &i)?,
                    None => {
                        let f_pre = em.range("f.pre", &g, 2 * h, h, 1)?;
                        let f_pre = peephole(em, "f", f_pre, 2, Some(c))?;
                        gate(em, s, f_act, "f", f_pre)?
                    }
                };
                let fc = em.bin("Mul", "fc", &f, c)?;
                em.bin("Add", "C", &fc, &ic)?
            }
            None => ic,
        };
        let o_pre = em.range("o.pre", &g, h, h, 1)?;
        let o_pre = peephole(em, "o", o_pre, 1, Some(&c_new))?;
        let o = gate(em, s, f_act, "o", o_pre)?;
        let hc = apply(em, h_act, "hC", &c_new)?;
        let h_new = em.bin("Mul", "H", &o, &hc)?;
        hs[t] = Some(h_new.clone());
        hp = Some(h_new);
        cp = Some(c_new);
    }
    finish(hs, hp, cp)
}

/// GRU gates z, r, h (in that order in W, R, B).
fn gru(em: &mut Emitter<'_>, s: &Spec, d: usize, dir: Dir) -> Result<DirOut> {
    let h = s.hidden;
    let wzr = em.range("Wzr", &dir.w, 0, 2 * h, 0)?;
    let wh = em.range("Wh", &dir.w, 2 * h, h, 0)?;
    let (bzr, bh, rbh) = match &dir.b {
        Some(b) => {
            let wbzr = em.range("Wbzr", b, 0, 2 * h, 0)?;
            let rbzr = em.range("Rbzr", b, 3 * h, 2 * h, 0)?;
            let bzr = em.bin("Add", "bzr", &wbzr, &rbzr)?;
            let wbh = em.range("Wbh", b, 2 * h, h, 0)?;
            let rbh = em.range("Rbh", b, 5 * h, h, 0)?;
            if s.linear_before_reset {
                (Some(bzr), Some(wbh), Some(rbh))
            } else {
                (Some(bzr), Some(em.bin("Add", "bh", &wbh, &rbh)?), None)
            }
        }
        None => (None, None, None),
    };
    let xzr = project(em, s, "xzr", &wzr, bzr.as_deref())?;
    let xh = project(em, s, "xh", &wh, bh.as_deref())?;
    let rzr = em.range("Rzr", &dir.r, 0, 2 * h, 0)?;
    let rzr_t = recurrent(em, s, "Rzr.t", &rzr)?;
    let rh = em.range("Rh", &dir.r, 2 * h, h, 0)?;
    let rh_t = recurrent(em, s, "Rh.t", &rh)?;
    let (f_act, g_act) = (s.act(d, 0), s.act(d, 1));
    let mut hs = vec![None; s.seq];
    let mut hp = dir.h0;
    for t in times(s, d) {
        em.scope = format!("d{d}.t{t}");
        let x = em.pick("xzr", &xzr, t, s.layout)?;
        let zr = add_rec(em, "zr", x, hp.as_ref(), rzr_t.as_ref())?;
        let z_pre = em.range("z.pre", &zr, 0, h, 1)?;
        let z = gate(em, s, f_act, "z", z_pre)?;
        let hx = em.pick("xh", &xh, t, s.layout)?;
        let reset = |em: &mut Emitter<'_>| -> Result<String> {
            let r_pre = em.range("r.pre", &zr, h, h, 1)?;
            gate(em, s, f_act, "r", r_pre)
        };
        let h_pre = match (&hp, &rh_t) {
            (Some(prev), Some(rh_t)) if s.linear_before_reset => {
                let m = em.bin("MatMul", "hr", prev, rh_t)?;
                let m = em.add_opt("hr.b", &m, rbh.as_deref())?;
                let r = reset(em)?;
                let rm = em.bin("Mul", "r.hr", &r, &m)?;
                em.bin("Add", "h.pre", &hx, &rm)?
            }
            (Some(prev), Some(rh_t)) => {
                let r = reset(em)?;
                let rh = em.bin("Mul", "r.h", &r, prev)?;
                let m = em.bin("MatMul", "rhR", &rh, rh_t)?;
                em.bin("Add", "h.pre", &hx, &m)?
            }
            _ => match &rbh {
                Some(rbh) => {
                    let r = reset(em)?;
                    let rm = em.bin("Mul", "r.hr", &r, rbh)?;
                    em.bin("Add", "h.pre", &hx, &rm)?
                }
                None => hx,
            },
        };
        let hh = gate(em, s, g_act, "h", h_pre)?;
        // H = (1 - z) * hh + z * H_prev = hh + z * (H_prev - hh).
        let h_new = match &hp {
            Some(prev) => {
                let diff = em.bin("Sub", "dh", prev, &hh)?;
                let zd = em.bin("Mul", "zdh", &z, &diff)?;
                em.bin("Add", "H", &hh, &zd)?
            }
            None => {
                let zh = em.bin("Mul", "zh", &z, &hh)?;
                em.bin("Sub", "H", &hh, &zh)?
            }
        };
        hs[t] = Some(h_new.clone());
        hp = Some(h_new);
    }
    finish(hs, hp, None)
}

/// RNN: `H = f(X·Wᵀ + H·Rᵀ + Wb + Rb)`.
fn rnn(em: &mut Emitter<'_>, s: &Spec, d: usize, dir: Dir) -> Result<DirOut> {
    let h = s.hidden;
    let bias = match &dir.b {
        Some(b) => {
            let wb = em.range("Wb", b, 0, h, 0)?;
            let rb = em.range("Rb", b, h, h, 0)?;
            Some(em.bin("Add", "bias", &wb, &rb)?)
        }
        None => None,
    };
    let xw = project(em, s, "xw", &dir.w, bias.as_deref())?;
    let rt = recurrent(em, s, "Rt", &dir.r)?;
    let f_act = s.act(d, 0);
    let mut hs = vec![None; s.seq];
    let mut hp = dir.h0;
    for t in times(s, d) {
        em.scope = format!("d{d}.t{t}");
        let x = em.pick("x", &xw, t, s.layout)?;
        let g = add_rec(em, "pre", x, hp.as_ref(), rt.as_ref())?;
        let h_new = gate(em, s, f_act, "H", g)?;
        hs[t] = Some(h_new.clone());
        hp = Some(h_new);
    }
    finish(hs, hp, None)
}
