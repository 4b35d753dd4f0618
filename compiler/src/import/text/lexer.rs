//! The lexical layer of the text parser: whitespace and comments, punctuation, identifiers,
//! literals and error positions.

use super::*;

impl<'a> Parser<'a> {
    // ---------------------------------------------------------------- low level

    pub(super) fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    pub(super) fn cur(&self) -> u8 {
        self.bytes().get(self.pos).copied().unwrap_or(0)
    }

    pub(super) fn skip_ws(&mut self) {
        loop {
            while matches!(self.cur(), b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
                self.pos += 1;
            }
            if self.cur() != b'#' {
                return;
            }
            self.pos = self
                .src
                .get(self.pos..)
                .and_then(|s| s.find('\n'))
                .map_or(self.src.len(), |i| self.pos + i);
        }
    }

    /// The next non-blank byte (0 at the end), without consuming it.
    pub(super) fn peek(&mut self) -> u8 {
        self.skip_ws();
        self.cur()
    }

    pub(super) fn matches(&mut self, ch: u8) -> bool {
        self.skip_ws();
        if !self.at_end() && self.cur() == ch {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn expect(&mut self, ch: u8, what: &str) -> PResult<()> {
        if self.matches(ch) {
            Ok(())
        } else {
            Err(self.err(format!("expected '{}' {what}", ch as char)))
        }
    }

    /// A syntax error at the current position, naming what was found there.
    pub(super) fn err(&mut self, reason: impl Into<String>) -> Error {
        self.skip_ws();
        let found = match self.src.get(self.pos..).and_then(|s| s.chars().next()) {
            None => "end of input".to_string(),
            Some(c) => format!("'{c}'"),
        };
        self.err_at(self.pos, format!("{}, found {found}", reason.into()))
    }

    pub(super) fn err_at(&self, pos: usize, reason: impl Into<String>) -> Error {
        let before = self.src.get(..pos).unwrap_or(self.src);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        Error::Syntax {
            line,
            column,
            reason: reason.into(),
        }
    }

    pub(super) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ---------------------------------------------------------------- tokens

    /// `[A-Za-z_][A-Za-z0-9_]*`, or "" when none starts here.
    pub(super) fn opt_ident(&mut self) -> &'a str {
        self.skip_ws();
        let b = self.bytes();
        let from = self.pos;
        if from < b.len() && (b[from].is_ascii_alphabetic() || b[from] == b'_') {
            self.pos += 1;
            while self.pos < b.len() && (b[self.pos].is_ascii_alphanumeric() || b[self.pos] == b'_')
            {
                self.pos += 1;
            }
        }
        self.src.get(from..self.pos).unwrap_or("")
    }

    pub(super) fn ident(&mut self, what: &str) -> PResult<&'a str> {
        let id = self.opt_ident();
        if id.is_empty() {
            return Err(self.err(format!("expected {what}")));
        }
        Ok(id)
    }

    pub(super) fn peek_ident(&mut self) -> &'a str {
        let save = self.pos;
        let id = self.opt_ident();
        self.pos = save;
        id
    }

    pub(super) fn next_is_type(&mut self) -> bool {
        let id = self.peek_ident();
        elem_type(id).is_some() || TYPE_KEYWORDS.contains(&id)
    }

    /// `inf`, `infinity` or `nan` (any case) starts here, not followed by a digit or `_`.
    pub(super) fn next_is_special_float(&mut self) -> bool {
        let save = self.pos;
        let id = self.opt_ident();
        self.pos = save;
        let lower = id.to_ascii_lowercase();
        matches!(lower.as_str(), "inf" | "infinity" | "nan")
    }

    pub(super) fn literal(&mut self) -> PResult<Lit> {
        self.skip_ws();
        let from = self.pos;
        let b = self.bytes();
        if self.cur() == b'"' {
            self.pos += 1;
            let mut out = String::new();
            let mut seg = self.pos;
            loop {
                match b.get(self.pos) {
                    None => return Err(self.err_at(from, "unterminated string literal")),
                    Some(b'"') => break,
                    Some(b'\\') => {
                        out.push_str(self.src.get(seg..self.pos).unwrap_or(""));
                        self.pos += 1;
                        let Some(c) = self.src.get(self.pos..).and_then(|s| s.chars().next())
                        else {
                            return Err(self.err_at(from, "unterminated string literal"));
                        };
                        out.push(c);
                        self.pos += c.len_utf8();
                        seg = self.pos;
                    }
                    Some(_) => self.pos += 1,
                }
            }
            out.push_str(self.src.get(seg..self.pos).unwrap_or(""));
            self.pos += 1;
            return Ok(Lit::Str(out));
        }
        if self.cur() == b'-' {
            self.pos += 1;
        }
        let c = self.cur();
        if c.is_ascii_alphabetic() {
            if self.next_is_special_float() {
                self.opt_ident();
                return Ok(Lit::Float(self.slice(from)));
            }
            return Err(self.err_at(from, "invalid number"));
        }
        if !c.is_ascii_digit() {
            return Err(self.err_at(from, "expected a value (a number or a quoted string)"));
        }
        let mut float = false;
        while self.cur().is_ascii_digit() || self.cur() == b'.' {
            if self.cur() == b'.' {
                if float {
                    break;
                }
                float = true;
            }
            self.pos += 1;
        }
        if matches!(self.cur(), b'e' | b'E') {
            float = true;
            self.pos += 1;
            if matches!(self.cur(), b'+' | b'-') {
                self.pos += 1;
            }
            if !self.cur().is_ascii_digit() {
                return Err(self.err_at(from, "exponent without digits"));
            }
            while self.cur().is_ascii_digit() {
                self.pos += 1;
            }
        }
        let text = self.slice(from);
        Ok(if float {
            Lit::Float(text)
        } else {
            Lit::Int(text)
        })
    }

    pub(super) fn slice(&self, from: usize) -> String {
        self.src.get(from..self.pos).unwrap_or("").to_string()
    }

    pub(super) fn to_i64(&self, text: &str, at: usize) -> PResult<i64> {
        text.parse::<i64>()
            .map_err(|_| self.err_at(at, format!("integer {text} is out of range")))
    }

    pub(super) fn to_f32(&self, text: &str, at: usize) -> PResult<f32> {
        let v = parse_float::<f32>(text)
            .ok_or_else(|| self.err_at(at, format!("invalid float {text}")))?;
        if v.is_infinite() && !text.to_ascii_lowercase().contains("inf") {
            return Err(self.err_at(at, format!("{text} is out of range for float")));
        }
        Ok(v)
    }

    pub(super) fn to_f64(&self, text: &str, at: usize) -> PResult<f64> {
        let v = parse_float::<f64>(text)
            .ok_or_else(|| self.err_at(at, format!("invalid double {text}")))?;
        if v.is_infinite() && !text.to_ascii_lowercase().contains("inf") {
            return Err(self.err_at(at, format!("{text} is out of range for double")));
        }
        Ok(v)
    }

    pub(super) fn int(&mut self, what: &str) -> PResult<i64> {
        self.skip_ws();
        let at = self.pos;
        match self.literal()? {
            Lit::Int(t) => self.to_i64(&t, at),
            _ => Err(self.err_at(at, format!("expected an integer {what}"))),
        }
    }

    pub(super) fn string(&mut self, what: &str) -> PResult<String> {
        self.skip_ws();
        let at = self.pos;
        if self.cur() != b'"' {
            return Err(self.err(format!("expected a quoted string {what}")));
        }
        match self.literal()? {
            Lit::Str(s) => Ok(s),
            _ => Err(self.err_at(at, format!("expected a quoted string {what}"))),
        }
    }

    pub(super) fn quotable_id(&mut self, what: &str) -> PResult<String> {
        if self.peek() == b'"' {
            return self.string(what);
        }
        Ok(self.ident(what)?.to_string())
    }

    /// An optional name; `found` also when the slot is empty but a `,` follows (`(X, , Y)`).
    pub(super) fn opt_quotable_id(&mut self) -> PResult<(String, bool)> {
        if self.peek() == b'"' {
            return Ok((self.string("")?, true));
        }
        let id = self.opt_ident().to_string();
        let found = !id.is_empty() || self.peek() == b',';
        Ok((id, found))
    }

    /// A comma-separated list of names where empty entries are allowed (optional inputs).
    pub(super) fn id_list(&mut self) -> PResult<Vec<String>> {
        let mut out = Vec::new();
        let (id, found) = self.opt_quotable_id()?;
        if !found {
            return Ok(out);
        }
        out.push(id);
        while self.matches(b',') {
            let (id, found) = self.opt_quotable_id()?;
            if !found {
                break;
            }
            out.push(id);
        }
        Ok(out)
    }
}

/// Parses a float literal as the lexer delimits it (digits, `.`, exponent, `inf`, `nan`).
fn parse_float<T: std::str::FromStr>(text: &str) -> Option<T> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let canon = match lower.as_str() {
        "inf" | "infinity" => "inf".to_string(),
        "nan" => "NaN".to_string(),
        _ => body.to_string(),
    };
    let canon = if neg { format!("-{canon}") } else { canon };
    canon.parse::<T>().ok()
}
