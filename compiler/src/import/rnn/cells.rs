//! One direction of an LSTM, GRU or RNN as a loop: the input projection of every step is one
//! MatMul over the whole sequence (bias added once), outside the loop; a `Scan` over its time
//! axis runs one body per step — the recurrent MatMul with the transposed recurrent weights
//! (a constant prepared once and shared by every step), then the gate equations of the ONNX
//! spec — carrying the hidden (and cell) state and stacking each step's hidden state. An
//! absent initial state is zeros.

use crate::error::Result;

use super::act::{Act, apply};
use super::emit::Emitter;
use super::{Kind, Spec};

/// The states one direction produced.
pub(super) struct DirOut {
    /// The hidden state at every time position, in time order whatever the direction:
    /// `[seq, batch, hidden]` (layout 0) or `[batch, seq, hidden]` (layout 1).
    pub(super) y: String,
    /// The last hidden state computed (time `seq - 1` forwards, `0` backwards), `[batch,
    /// hidden]`.
    pub(super) h: String,
    /// The last cell state (LSTM).
    pub(super) c: Option<String>,
}

/// Per-direction weights, sliced from W, R, B and the initial state.
struct Dir {
    w: String,
    r: String,
    b: Option<String>,
    /// The initial hidden state `[batch, hidden]` (zeros when absent).
    h0: String,
}

/// Builds direction `d` of `s`.
pub(super) fn direction(em: &mut Emitter<'_>, s: &Spec, d: usize) -> Result<DirOut> {
    em.scope = format!("d{d}");
    let h0 = match &s.h0 {
        Some(h) => em.pick("h0", h, d, s.layout)?,
        None => em.zeros(&[s.batch, s.hidden])?,
    };
    let dir = Dir {
        w: em.pick("W", &s.w, d, 0)?,
        r: em.pick("R", &s.r, d, 0)?,
        b: match &s.b {
            Some(b) => Some(em.pick("B", b, d, 0)?),
            None => None,
        },
        h0,
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

/// `x + h · rt`.
fn add_rec(em: &mut Emitter<'_>, what: &str, x: &str, h: &str, rt: &str) -> Result<String> {
    let hr = em.bin("MatMul", &format!("{what}.hr"), h, rt)?;
    em.bin("Add", what, x, &hr)
}

/// Runs the body built since `begin_body` (inputs: the carried states, then one slice per
/// scanned sequence; outputs: the next states, the last one also stacked) as a `Scan` over the
/// time axis in `d`'s direction. Returns the final states and the stacked hidden states.
fn run(
    em: &mut Emitter<'_>,
    s: &Spec,
    d: usize,
    body_inputs: &[String],
    states: &[String],
    next: &[String],
    sequences: &[&str],
) -> Result<(Vec<String>, String)> {
    // The stacked output is a view of the new hidden state (the body's first next state).
    let y = em.node("Identity", "y", &[&next[0]], vec![], None)?;
    let mut outs = next.to_vec();
    outs.push(y);
    let body = em.end_body(body_inputs, &outs);
    em.scope = format!("d{d}");
    let mut inputs: Vec<&str> = states.iter().map(String::as_str).collect();
    inputs.extend(sequences);
    let reverse = s.reverse.get(d).copied().unwrap_or(false);
    let time_axis = s.layout;
    let mut outs = em.scan(&inputs, sequences.len(), time_axis, reverse, body)?;
    let y = outs.pop().unwrap_or_default();
    Ok((outs, y))
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
    let rt = em.transpose("Rt", &dir.r)?;
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
    let one = if s.input_forget {
        Some(em.scalar(1.0)?)
    } else {
        None
    };
    let c0 = match &s.c0 {
        Some(c) => em.pick("c0", c, d, s.layout)?,
        None => em.zeros(&[s.batch, h])?,
    };
    let (f_act, g_act, h_act) = (s.act(d, 0), s.act(d, 1), s.act(d, 2));
    em.begin_body();
    em.scope = format!("d{d}.step");
    let (hp, cp, x) = (em.body_input("h"), em.body_input("c"), em.body_input("x"));
    let g = add_rec(em, "gates", &x, &hp, &rt)?;
    let peephole = |em: &mut Emitter<'_>, what: &str, x: String, k: usize, c: &str| match &peep {
        Some(p) => {
            let pc = em.bin("Mul", &format!("{what}.pc"), &p[k], c)?;
            em.bin("Add", &format!("{what}.peep"), &x, &pc)
        }
        None => Ok(x),
    };
    let i_pre = em.range("i.pre", &g, 0, h, 1)?;
    let i_pre = peephole(em, "i", i_pre, 0, &cp)?;
    let i = gate(em, s, f_act, "i", i_pre)?;
    let c_pre = em.range("c.pre", &g, 3 * h, h, 1)?;
    let cc = gate(em, s, g_act, "c", c_pre)?;
    let ic = em.bin("Mul", "ic", &i, &cc)?;
    let f = match &one {
        Some(one) => em.bin("Sub", "f", one, &i)?,
        None => {
            let f_pre = em.range("f.pre", &g, 2 * h, h, 1)?;
            let f_pre = peephole(em, "f", f_pre, 2, &cp)?;
            gate(em, s, f_act, "f", f_pre)?
        }
    };
    let fc = em.bin("Mul", "fc", &f, &cp)?;
    let c_new = em.bin("Add", "C", &fc, &ic)?;
    let o_pre = em.range("o.pre", &g, h, h, 1)?;
    let o_pre = peephole(em, "o", o_pre, 1, &c_new)?;
    let o = gate(em, s, f_act, "o", o_pre)?;
    let hc = apply(em, h_act, "hC", &c_new)?;
    let h_new = em.bin("Mul", "H", &o, &hc)?;
    let inputs = [hp, cp, x];
    let (last, y) = run(
        em,
        s,
        d,
        &inputs,
        &[dir.h0, c0],
        &[h_new, c_new],
        &[xw.as_str()],
    )?;
    let mut last = last.into_iter();
    Ok(DirOut {
        y,
        h: last.next().unwrap_or_default(),
        c: last.next(),
    })
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
    let rzr_t = em.transpose("Rzr.t", &rzr)?;
    let rh = em.range("Rh", &dir.r, 2 * h, h, 0)?;
    let rh_t = em.transpose("Rh.t", &rh)?;
    let (f_act, g_act) = (s.act(d, 0), s.act(d, 1));
    em.begin_body();
    em.scope = format!("d{d}.step");
    let (hp, x, hx) = (
        em.body_input("h"),
        em.body_input("xzr"),
        em.body_input("xh"),
    );
    let zr = add_rec(em, "zr", &x, &hp, &rzr_t)?;
    let z_pre = em.range("z.pre", &zr, 0, h, 1)?;
    let z = gate(em, s, f_act, "z", z_pre)?;
    let r_pre = em.range("r.pre", &zr, h, h, 1)?;
    let r = gate(em, s, f_act, "r", r_pre)?;
    let h_pre = if s.linear_before_reset {
        let m = em.bin("MatMul", "hr", &hp, &rh_t)?;
        let m = em.add_opt("hr.b", &m, rbh.as_deref())?;
        let rm = em.bin("Mul", "r.hr", &r, &m)?;
        em.bin("Add", "h.pre", &hx, &rm)?
    } else {
        let rh = em.bin("Mul", "r.h", &r, &hp)?;
        let m = em.bin("MatMul", "rhR", &rh, &rh_t)?;
        em.bin("Add", "h.pre", &hx, &m)?
    };
    let hh = gate(em, s, g_act, "h", h_pre)?;
    // H = (1 - z) * hh + z * H_prev = hh + z * (H_prev - hh).
    let diff = em.bin("Sub", "dh", &hp, &hh)?;
    let zd = em.bin("Mul", "zdh", &z, &diff)?;
    let h_new = em.bin("Add", "H", &hh, &zd)?;
    let inputs = [hp, x, hx];
    let (last, y) = run(
        em,
        s,
        d,
        &inputs,
        &[dir.h0],
        &[h_new],
        &[xzr.as_str(), xh.as_str()],
    )?;
    Ok(DirOut {
        y,
        h: last.into_iter().next().unwrap_or_default(),
        c: None,
    })
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
    let rt = em.transpose("Rt", &dir.r)?;
    let f_act = s.act(d, 0);
    em.begin_body();
    em.scope = format!("d{d}.step");
    let (hp, x) = (em.body_input("h"), em.body_input("x"));
    let g = add_rec(em, "pre", &x, &hp, &rt)?;
    let h_new = gate(em, s, f_act, "H", g)?;
    let inputs = [hp, x];
    let (last, y) = run(em, s, d, &inputs, &[dir.h0], &[h_new], &[xw.as_str()])?;
    Ok(DirOut {
        y,
        h: last.into_iter().next().unwrap_or_default(),
        c: None,
    })
}
