//! Einsum's equation: the terms of each operand and of the output as label lists, and each
//! label's size.
//!
//! Grammar (numpy's, as ONNX's reference runs it): `term (',' term)* ('->' term)?`, a term is
//! letters (`a-z`, `A-Z`) with at most one `...`; whitespace is ignored. `...` stands for the
//! operand's dims not named by letters, right-aligned across operands and broadcast (numpy
//! rules). Without `->` the output is the `...` dims, then the letters used exactly once, in
//! ASCII order. A label's sizes must agree across its uses or be 1 (broadcast); a label
//! repeated in one term (a diagonal) has one size there.

use std::collections::BTreeMap;

use crate::error::OpError;

/// A label: a letter's ASCII code, or [`ELLIPSIS`] + k for the k-th `...` dim (k counted
/// from the left of the widest `...`).
pub(super) type Label = u32;

/// First label of the `...` dims.
pub(super) const ELLIPSIS: Label = 1 << 16;

/// A parsed equation over operands of known shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Equation {
    /// One label per dim of each operand.
    pub inputs: Vec<Vec<Label>>,
    /// One label per dim of the output (distinct).
    pub output: Vec<Label>,
    /// Each label's size: the largest of its uses (the others are equal or 1).
    pub sizes: BTreeMap<Label, usize>,
}

/// One token of a term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Letter(Label),
    Dots,
}

/// The tokens of `term`; `what` names it in errors.
fn tokens(term: &str, what: &str) -> Result<Vec<Token>, OpError> {
    let mut out = Vec::new();
    let mut chars = term.chars().peekable();
    let mut dots = 0;
    while let Some(c) = chars.next() {
        match c {
            'a'..='z' | 'A'..='Z' => out.push(Token::Letter(c as Label)),
            '.' => {
                if chars.next() != Some('.') || chars.next() != Some('.') {
                    return Err(bad(format!("{what}: '.' must come as '...'")));
                }
                dots += 1;
                out.push(Token::Dots);
            }
            other => {
                return Err(bad(format!(
                    "{what}: '{other}' is not a label (labels are letters a-z, A-Z)"
                )));
            }
        }
    }
    if dots > 1 {
        return Err(bad(format!("{what}: '...' appears more than once")));
    }
    Ok(out)
}

fn bad(reason: String) -> OpError {
    OpError::attr("equation", reason)
}

/// The printed form of a label, for messages.
pub(super) fn label_name(l: Label) -> String {
    match char::from_u32(l) {
        Some(c) if l < ELLIPSIS => c.to_string(),
        _ => format!("...[{}]", l - ELLIPSIS),
    }
}

/// Parses `equation` for operands of these shapes.
pub(super) fn parse(equation: &str, shapes: &[&[usize]]) -> Result<Equation, OpError> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != shapes.len() {
        return Err(bad(format!(
            "'{equation}' has {} input terms for {} inputs",
            terms.len(),
            shapes.len()
        )));
    }
    // Tokens and the width of each operand's `...`.
    let mut parsed = Vec::with_capacity(terms.len());
    let mut widest = 0;
    for (i, (term, shape)) in terms.iter().zip(shapes).enumerate() {
        let toks = tokens(term, &format!("input term {i} '{term}'"))?;
        let letters = toks.iter().filter(|t| **t != Token::Dots).count();
        let has_dots = toks.contains(&Token::Dots);
        let width = match shape.len().checked_sub(letters) {
            Some(w) if has_dots || w == 0 => w,
            _ => {
                return Err(bad(format!(
                    "input term {i} '{term}' names {letters} dims; input {i} has rank {}",
                    shape.len()
                )));
            }
        };
        widest = widest.max(width);
        parsed.push((toks, width));
    }
    let expand = |toks: &[Token], width: usize| -> Vec<Label> {
        let mut labels = Vec::new();
        for t in toks {
            match *t {
                Token::Letter(l) => labels.push(l),
                Token::Dots => {
                    labels.extend((widest - width..widest).map(|k| ELLIPSIS + k as Label))
                }
            }
        }
        labels
    };
    let inputs: Vec<Vec<Label>> = parsed.iter().map(|(t, w)| expand(t, *w)).collect();

    // Sizes: equal or 1 across uses, equal within one term.
    let mut sizes: BTreeMap<Label, usize> = BTreeMap::new();
    for (i, (labels, shape)) in inputs.iter().zip(shapes).enumerate() {
        let mut own: BTreeMap<Label, usize> = BTreeMap::new();
        for (&l, &d) in labels.iter().zip(shape.iter()) {
            if let Some(&prev) = own.get(&l)
                && prev != d
            {
                return Err(OpError::shape(
                    format!(
                        "label '{}' is repeated in input {i} over dims of sizes {prev} and {d}",
                        label_name(l)
                    ),
                    &[shape],
                ));
            }
            own.insert(l, d);
            let s = sizes.entry(l).or_insert(d);
            if *s != d && *s != 1 && d != 1 {
                return Err(OpError::shape(
                    format!(
                        "label '{}' has sizes {} and {d} (input {i})",
                        label_name(l),
                        *s
                    ),
                    shapes,
                ));
            }
            if *s == 1 {
                *s = d;
            }
        }
    }

    let output = match rhs {
        Some(term) => {
            let toks = tokens(term, &format!("output term '{term}'"))?;
            let mut out = Vec::new();
            for t in toks {
                match t {
                    Token::Letter(l) => {
                        if !sizes.contains_key(&l) {
                            return Err(bad(format!(
                                "output label '{}' is in no input term",
                                label_name(l)
                            )));
                        }
                        if out.contains(&l) {
                            return Err(bad(format!(
                                "output label '{}' is repeated",
                                label_name(l)
                            )));
                        }
                        out.push(l);
                    }
                    Token::Dots => out.extend((0..widest).map(|k| ELLIPSIS + k as Label)),
                }
            }
            out
        }
        None => {
            let mut count: BTreeMap<Label, usize> = BTreeMap::new();
            for l in inputs.iter().flatten().filter(|&&l| l < ELLIPSIS) {
                *count.entry(*l).or_default() += 1;
            }
            (0..widest)
                .map(|k| ELLIPSIS + k as Label)
                .chain(count.into_iter().filter(|&(_, n)| n == 1).map(|(l, _)| l))
                .collect()
        }
    };
    Ok(Equation {
        inputs,
        output,
        sizes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Vec<Label> {
        s.chars().map(|c| c as Label).collect()
    }

    #[test]
    fn explicit_and_implicit_outputs() {
        let e = parse("ij,jk->ik", &[&[2, 3], &[3, 4]]).unwrap();
        assert_eq!(e.inputs, vec![l("ij"), l("jk")]);
        assert_eq!(e.output, l("ik"));
        assert_eq!(e.sizes[&('j' as Label)], 3);
        // Implicit: letters used once, ASCII order (upper case first).
        let e = parse("ba,aC", &[&[2, 3], &[3, 4]]).unwrap();
        assert_eq!(e.output, l("Cb"));
        let e = parse(" i , i ", &[&[5], &[5]]).unwrap();
        assert!(e.output.is_empty());
    }

    #[test]
    fn ellipsis_right_aligned_and_broadcast() {
        let e = parse("...ij,...jk", &[&[7, 2, 2, 3], &[2, 3, 4]]).unwrap();
        assert_eq!(e.inputs[0][..2], [ELLIPSIS, ELLIPSIS + 1]);
        assert_eq!(e.inputs[1][0], ELLIPSIS + 1);
        assert_eq!(
            e.output,
            vec![ELLIPSIS, ELLIPSIS + 1, 'i' as Label, 'k' as Label]
        );
        let e = parse("...i,...i->...", &[&[3, 1, 4], &[5, 4]]).unwrap();
        assert_eq!(e.sizes[&(ELLIPSIS + 1)], 5);
        assert_eq!(e.output.len(), 2);
        // An empty `...`.
        let e = parse("...ii->...i", &[&[3, 3]]).unwrap();
        assert_eq!(e.output, l("i"));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let msg = |eq: &str, shapes: &[&[usize]]| parse(eq, shapes).unwrap_err().to_string();
        assert!(msg("ij,jk", &[&[2, 3]]).contains("2 input terms for 1 inputs"));
        assert!(msg("ijk->i", &[&[2, 3]]).contains("rank 2"));
        assert!(msg("ij->ix", &[&[2, 3]]).contains("'x' is in no input"));
        assert!(msg("ij->ii", &[&[2, 3]]).contains("repeated"));
        assert!(msg("i1->i", &[&[2, 3]]).contains("not a label"));
        assert!(msg("i..->i", &[&[2, 3]]).contains("'...'"));
        assert!(msg("......->", &[&[2, 3]]).contains("more than once"));
        assert!(msg("ij,jk->ik", &[&[2, 3], &[4, 5]]).contains("sizes 3 and 4"));
        assert!(msg("ii->i", &[&[2, 3]]).contains("repeated in input 0"));
    }
}
