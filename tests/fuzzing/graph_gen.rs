//! Structure-aware random graphs: a byte string decoded into a random DAG of f32 nodes with
//! consistent shapes (element-wise unary and binary with broadcasting, Conv 1-d/2-d, MatMul and
//! Gemm, Max/Average/Global pooling, Concat, Reshape, Transpose, Split, Softmax/LogSoftmax),
//! built with [`ModelBuilder`] at opset 13. Every graph it builds is valid ONNX: an import
//! error is a bug of the generator or of the importer, never an expected outcome.

use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;
use arenac_proto::ModelProto;

use super::source::{Rng, Source};

/// Most elements of any generated value (keeps a run fast).
const MAX_ELEMS: usize = 4096;

/// Highest rank generated.
const MAX_RANK: usize = 5;

/// A generated model with what it takes to run it.
#[derive(Clone, Debug)]
pub struct GenModel {
    /// The model.
    pub model: ModelProto,
    /// The graph inputs' shapes, in order (all f32).
    pub input_shapes: Vec<Vec<usize>>,
    /// Seed for input data.
    pub data_seed: u64,
    /// Nodes generated.
    pub nodes: usize,
}

#[derive(Clone, Debug)]
struct Val {
    name: String,
    shape: Vec<usize>,
}

struct Gen<'s, 'a> {
    src: &'s mut Source<'a>,
    rng: Rng,
    b: ModelBuilder,
    vals: Vec<Val>,
    consumed: Vec<bool>,
    produced: Vec<bool>,
    counter: usize,
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Numpy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let y = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        out[i] = match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

impl Gen<'_, '_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    /// A value index, biased towards recent ones.
    fn pick_val(&mut self) -> usize {
        let n = self.vals.len();
        if self.src.bool() {
            n - 1 - self.src.below(n.min(3))
        } else {
            self.src.below(n)
        }
    }

    fn use_val(&mut self, i: usize) -> String {
        self.consumed[i] = true;
        self.vals[i].name.clone()
    }

    fn init(&mut self, shape: &[usize], lo: f32, hi: f32) -> String {
        let name = self.fresh("w");
        let v = self.rng.f32s(numel(shape), lo, hi);
        let b = std::mem::take(&mut self.b);
        self.b = b.initializer(&name, &Tensor::f32(shape.to_vec(), &v));
        name
    }

    fn init_i64(&mut self, v: &[i64]) -> String {
        let name = self.fresh("s");
        let b = std::mem::take(&mut self.b);
        self.b = b.initializer(&name, &Tensor::i64(vec![v.len()], v));
        name
    }

    fn node(
        &mut self,
        op: &str,
        inputs: &[String],
        out_shapes: Vec<Vec<usize>>,
        attrs: Vec<(&str, Attr)>,
    ) {
        let name = self.fresh("n");
        let outs: Vec<String> = out_shapes.iter().map(|_| self.fresh("v")).collect();
        let ins: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let os: Vec<&str> = outs.iter().map(String::as_str).collect();
        let b = std::mem::take(&mut self.b);
        self.b = b.node(&name, op, &ins, &os, attrs);
        for (name, shape) in outs.into_iter().zip(out_shapes) {
            self.vals.push(Val { name, shape });
            self.consumed.push(false);
            self.produced.push(true);
        }
    }

    fn unary(&mut self, a: usize) {
        let op = *self
            .src
            .pick(&["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp"]);
        let shape = self.vals[a].shape.clone();
        let x = self.use_val(a);
        self.node(op, &[x], vec![shape], vec![]);
    }

    fn binary(&mut self, a: usize) {
        let op = *self.src.pick(&["Add", "Sub", "Mul", "Max", "Min", "Div"]);
        let sa = self.vals[a].shape.clone();
        // Another value that broadcasts with `a`, or a constant that broadcasts into it.
        let partners: Vec<usize> = (0..self.vals.len())
            .filter(|&j| {
                broadcast(&sa, &self.vals[j].shape)
                    .is_some_and(|s| s.len() <= MAX_RANK && numel(&s) <= MAX_ELEMS)
            })
            .collect();
        let (other, shape) = if op != "Div" && !partners.is_empty() && self.src.bool() {
            let j = partners[self.src.below(partners.len())];
            let s = broadcast(&sa, &self.vals[j].shape).unwrap_or_default();
            (self.use_val(j), s)
        } else {
            let drop = self.src.below(sa.len() + 1);
            let sb: Vec<usize> = sa[drop..]
                .iter()
                .map(|&d| if self.src.below(3) == 0 { 1 } else { d })
                .collect();
            let (lo, hi) = if op == "Div" { (0.5, 2.0) } else { (-1.0, 1.0) };
            (self.init(&sb, lo, hi), sa.clone())
        };
        let x = self.use_val(a);
        let ins = if op != "Div" && self.src.bool() {
            [other, x]
        } else {
            [x, other]
        };
        self.node(op, &ins, vec![shape], vec![]);
    }

    /// Conv over rank 3 or 4 input `[N, C, spatial...]`.
    fn conv(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        if !(3..=4).contains(&sa.len()) {
            return false;
        }
        let c = sa[1];
        let divisors: Vec<usize> = (1..=c).filter(|&g| c.is_multiple_of(g)).collect();
        let group = *self.src.pick(&divisors);
        let m = group * self.src.range(1, 3);
        let (mut ks, mut pads_b, mut pads_e, mut strides, mut dils, mut out) =
            (vec![], vec![], vec![], vec![], vec![], vec![sa[0], m]);
        for &d in &sa[2..] {
            let (p0, p1, s, mut dil) = (
                self.src.below(2),
                self.src.below(2),
                self.src.range(1, 2),
                self.src.range(1, 2),
            );
            let mut k = self.src.range(1, 3);
            if (k - 1) * dil + 1 > d + p0 + p1 {
                (k, dil) = (1, 1);
            }
            let eff = (k - 1) * dil + 1;
            out.push((d + p0 + p1 - eff) / s + 1);
            ks.push(k);
            pads_b.push(p0 as i64);
            pads_e.push(p1 as i64);
            strides.push(s as i64);
            dils.push(dil as i64);
        }
        if numel(&out) > MAX_ELEMS {
            return false;
        }
        let mut wshape = vec![m, c / group];
        wshape.extend(&ks);
        let scale = 1.0 / (numel(&wshape[1..]) as f32).sqrt();
        let w = self.init(&wshape, -scale, scale);
        let x = self.use_val(a);
        let mut ins = vec![x, w];
        if self.src.bool() {
            ins.push(self.init(&[m], -0.5, 0.5));
        }
        pads_b.extend(pads_e);
        let mut attrs = vec![
            ("pads", Attr::Ints(pads_b)),
            ("strides", Attr::Ints(strides)),
            ("dilations", Attr::Ints(dils)),
            ("group", Attr::Int(group as i64)),
        ];
        if self.src.bool() {
            attrs.push((
                "kernel_shape",
                Attr::Ints(ks.iter().map(|&k| k as i64).collect()),
            ));
        }
        self.node("Conv", &ins, vec![out], attrs);
        true
    }

    fn matmul(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        if sa.len() < 2 {
            return false;
        }
        let k = sa[sa.len() - 1];
        let n = self.src.range(1, 8);
        let mut out = sa.clone();
        if let Some(l) = out.last_mut() {
            *l = n;
        }
        if numel(&out) > MAX_ELEMS {
            return false;
        }
        let scale = 1.0 / (k as f32).sqrt();
        if sa.len() == 2 && self.src.bool() {
            let trans_b = self.src.bool();
            let wshape = if trans_b { [n, k] } else { [k, n] };
            let w = self.init(&wshape, -scale, scale);
            let x = self.use_val(a);
            let mut ins = vec![x, w];
            if self.src.bool() {
                let c = if self.src.bool() { vec![n] } else { vec![1, n] };
                ins.push(self.init(&c, -1.0, 1.0));
            }
            let attrs = vec![
                ("transB", Attr::Int(trans_b as i64)),
                ("alpha", Attr::Float(*self.src.pick(&[1.0, 0.5, -2.0]))),
                ("beta", Attr::Float(*self.src.pick(&[1.0, 0.25]))),
            ];
            self.node("Gemm", &ins, vec![out], attrs);
        } else {
            // B: [K, N], or batched with a's leading dims.
            let mut wshape = if self.src.bool() {
                sa[..sa.len() - 2].to_vec()
            } else {
                vec![]
            };
            wshape.extend([k, n]);
            let w = self.init(&wshape, -scale, scale);
            let x = self.use_val(a);
            self.node("MatMul", &[x, w], vec![out], vec![]);
        }
        true
    }

    fn pool(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        if !(3..=4).contains(&sa.len()) {
            return false;
        }
        let kind = self.src.below(4);
        if kind >= 2 {
            let op = if kind == 2 {
                "GlobalAveragePool"
            } else {
                "GlobalMaxPool"
            };
            let mut out = sa[..2].to_vec();
            out.extend(std::iter::repeat_n(1, sa.len() - 2));
            let x = self.use_val(a);
            self.node(op, &[x], vec![out], vec![]);
            return true;
        }
        let ceil = self.src.below(4) == 0;
        let (mut ks, mut pb, mut pe, mut ss, mut out) =
            (vec![], vec![], vec![], vec![], sa[..2].to_vec());
        for &d in &sa[2..] {
            let k = self.src.range(1, 3.min(d));
            let (p0, p1) = (self.src.below(k), self.src.below(k));
            let s = self.src.range(1, 2);
            let span = d + p0 + p1 - k;
            let mut o = if ceil {
                span.div_ceil(s) + 1
            } else {
                span / s + 1
            };
            if ceil && (o - 1) * s >= d + p0 {
                o -= 1;
            }
            out.push(o);
            ks.push(k as i64);
            pb.push(p0 as i64);
            pe.push(p1 as i64);
            ss.push(s as i64);
        }
        pb.extend(pe);
        let mut attrs = vec![
            ("kernel_shape", Attr::Ints(ks)),
            ("pads", Attr::Ints(pb)),
            ("strides", Attr::Ints(ss)),
            ("ceil_mode", Attr::Int(ceil as i64)),
        ];
        let op = if kind == 0 {
            "MaxPool"
        } else {
            attrs.push(("count_include_pad", Attr::Int(self.src.below(2) as i64)));
            "AveragePool"
        };
        let x = self.use_val(a);
        self.node(op, &[x], vec![out], attrs);
        true
    }

    fn concat(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        if sa.is_empty() {
            return false;
        }
        let axis = self.src.below(sa.len());
        let fits =
            |s: &[usize]| s.len() == sa.len() && (0..s.len()).all(|i| i == axis || s[i] == sa[i]);
        let partners: Vec<usize> = (0..self.vals.len())
            .filter(|&j| fits(&self.vals[j].shape))
            .collect();
        let mut ins = vec![self.use_val(a)];
        let mut out = sa.clone();
        for _ in 0..self.src.range(1, 2) {
            let (name, d) = if !partners.is_empty() && self.src.bool() {
                let j = partners[self.src.below(partners.len())];
                (self.use_val(j), self.vals[j].shape[axis])
            } else {
                let mut s = sa.clone();
                s[axis] = self.src.range(1, 3);
                (self.init(&s, -1.0, 1.0), s[axis])
            };
            ins.push(name);
            out[axis] += d;
        }
        if numel(&out) > MAX_ELEMS {
            return false;
        }
        let neg = self.src.bool();
        let ax = if neg {
            axis as i64 - sa.len() as i64
        } else {
            axis as i64
        };
        self.node("Concat", &ins, vec![out], vec![("axis", Attr::Int(ax))]);
        true
    }

    fn reshape(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        let mut t = sa.clone();
        match self.src.below(4) {
            0 => t = vec![numel(&sa)],
            1 if sa.len() >= 2 => {
                let i = self.src.below(sa.len() - 1);
                let m = t[i] * t[i + 1];
                t.splice(i..i + 2, [m]);
            }
            2 if sa.len() < MAX_RANK => {
                let i = self.src.below(sa.len() + 1);
                t.insert(i, 1);
            }
            _ => {
                let i = self.src.below(sa.len().max(1));
                let d = sa.get(i).copied().unwrap_or(1);
                let f = (2..d).find(|&f| d.is_multiple_of(f));
                match f {
                    Some(f) if sa.len() < MAX_RANK => {
                        t.splice(i..i + 1, [f, d / f]);
                    }
                    _ => t = vec![numel(&sa)],
                }
            }
        }
        // Spell it with ONNX's 0 (copy) and -1 (infer) now and then.
        let mut spec: Vec<i64> = t.iter().map(|&d| d as i64).collect();
        if !spec.is_empty() && self.src.below(3) == 0 {
            let i = self.src.below(spec.len());
            spec[i] = -1;
        }
        if let Some(i) = (0..spec.len()).find(|&i| i < sa.len() && sa[i] == t[i] && spec[i] != -1)
            && self.src.below(3) == 0
        {
            spec[i] = 0;
        }
        let s = self.init_i64(&spec);
        let x = self.use_val(a);
        self.node("Reshape", &[x, s], vec![t], vec![]);
        true
    }

    fn transpose(&mut self, a: usize) {
        let sa = self.vals[a].shape.clone();
        let mut perm: Vec<usize> = (0..sa.len()).collect();
        for i in (1..perm.len()).rev() {
            let j = self.src.below(i + 1);
            perm.swap(i, j);
        }
        let explicit = self.src.below(4) != 0;
        if !explicit {
            perm = (0..sa.len()).rev().collect();
        }
        let out = perm.iter().map(|&p| sa[p]).collect();
        let attrs = if explicit {
            vec![("perm", Attr::Ints(perm.iter().map(|&p| p as i64).collect()))]
        } else {
            vec![]
        };
        let x = self.use_val(a);
        self.node("Transpose", &[x], vec![out], attrs);
    }

    fn split(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        let axes: Vec<usize> = (0..sa.len()).filter(|&i| sa[i] >= 2).collect();
        if axes.is_empty() {
            return false;
        }
        let axis = *self.src.pick(&axes);
        let d = sa[axis];
        let first = self.src.range(1, d - 1);
        let mut parts = vec![first];
        let rest = d - first;
        if rest >= 2 && self.src.bool() {
            let second = self.src.range(1, rest - 1);
            parts.extend([second, rest - second]);
        } else {
            parts.push(rest);
        }
        let outs = parts
            .iter()
            .map(|&p| {
                let mut s = sa.clone();
                s[axis] = p;
                s
            })
            .collect();
        let x = self.use_val(a);
        let mut ins = vec![x];
        let equal = parts.iter().all(|&p| p == parts[0]);
        if !(equal && self.src.bool()) {
            let v: Vec<i64> = parts.iter().map(|&p| p as i64).collect();
            ins.push(self.init_i64(&v));
        }
        self.node("Split", &ins, outs, vec![("axis", Attr::Int(axis as i64))]);
        true
    }

    fn softmax(&mut self, a: usize) -> bool {
        let sa = self.vals[a].shape.clone();
        if sa.is_empty() {
            return false;
        }
        let r = sa.len() as i64;
        let axis = self.src.below(2 * sa.len()) as i64 - r;
        let op = if self.src.bool() {
            "Softmax"
        } else {
            "LogSoftmax"
        };
        let x = self.use_val(a);
        self.node(op, &[x], vec![sa], vec![("axis", Attr::Int(axis))]);
        true
    }

    fn input_shape(&mut self) -> Vec<usize> {
        match self.src.below(5) {
            0 => vec![
                self.src.range(1, 2),
                self.src.range(1, 4),
                self.src.range(1, 8),
                self.src.range(1, 8),
            ],
            1 => vec![
                self.src.range(1, 2),
                self.src.range(1, 4),
                self.src.range(1, 12),
            ],
            r => (0..r).map(|_| self.src.range(1, 6)).collect(),
        }
    }
}

/// Decodes `src` into a random valid model of 1 to `max_nodes` nodes.
pub fn random_model(src: &mut Source<'_>, max_nodes: usize) -> GenModel {
    let n_inputs = src.range(1, 2);
    let nodes = src.range(1, max_nodes.max(1));
    let rng = Rng(src.seed());
    let data_seed = src.seed();
    let mut g = Gen {
        src,
        rng,
        b: ModelBuilder::new("fuzz", 13),
        vals: vec![],
        consumed: vec![],
        produced: vec![],
        counter: 0,
    };
    let mut input_shapes = vec![];
    for i in 0..n_inputs {
        let s = g.input_shape();
        let name = format!("in{i}");
        let dims: Vec<Dim> = s.iter().map(|&d| Dim::N(d)).collect();
        g.b = std::mem::take(&mut g.b).input(&name, DType::F32, &dims);
        g.vals.push(Val {
            name,
            shape: s.clone(),
        });
        g.consumed.push(false);
        g.produced.push(false);
        input_shapes.push(s);
    }
    for _ in 0..nodes {
        let a = g.pick_val();
        let done = match g.src.below(12) {
            0 => {
                g.unary(a);
                true
            }
            1 | 2 => {
                g.binary(a);
                true
            }
            3 => g.conv(a),
            4 => g.matmul(a),
            5 => g.pool(a),
            6 => g.concat(a),
            7 => g.reshape(a),
            8 => {
                g.transpose(a);
                true
            }
            9 => g.split(a),
            10 => g.softmax(a),
            _ => {
                g.unary(a);
                true
            }
        };
        if !done {
            g.unary(a);
        }
    }
    // Outputs: every value a node produced that nothing reads, and now and then one that is read.
    let mut outputs: Vec<usize> = (0..g.vals.len())
        .filter(|&i| g.produced[i] && !g.consumed[i])
        .collect();
    if let Some(j) = (0..g.vals.len()).find(|&i| g.produced[i] && g.consumed[i])
        && g.src.bool()
    {
        outputs.push(j);
    }
    let mut b = std::mem::take(&mut g.b);
    for &i in &outputs {
        b = b.output(&g.vals[i].name, DType::F32, &[]);
    }
    GenModel {
        model: b.build(),
        input_shapes,
        data_seed,
        nodes,
    }
}

/// Random input tensors for `m` (uniform in [-1, 1)).
pub fn random_inputs(m: &GenModel) -> Vec<Tensor> {
    let mut rng = Rng(m.data_seed);
    m.input_shapes
        .iter()
        .map(|s| Tensor::f32(s.clone(), &rng.f32s(numel(s), -1.0, 1.0)))
        .collect()
}
