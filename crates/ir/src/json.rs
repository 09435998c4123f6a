//! A small JSON reader that keeps the byte offset of every value.
//!
//! serde_json drops positions once a value is parsed, but validation must point at the
//! line and column of each problem (an unknown field, a bad shape, a tensor name that
//! does not exist), so model files are read through this tree instead.

use std::fmt;

/// Nesting deeper than this is refused: a model is at most a few levels deep, and a
/// bound keeps hostile input from exhausting the stack.
const MAX_DEPTH: usize = 64;

/// A value together with the byte offset where it starts in the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The literal text of the number, so integers are never routed through f64.
    Number(String),
    String(String),
    Array(Vec<Spanned<Json>>),
    /// Members in source order; duplicate keys are rejected by the parser.
    Object(Vec<(Spanned<String>, Spanned<Json>)>),
}

impl Json {
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub pos: usize,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Parses a complete JSON document.
pub fn parse(src: &str) -> Result<Spanned<Json>, SyntaxError> {
    let mut parser = Parser { src: src.as_bytes(), text: src, pos: 0 };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != parser.src.len() {
        return Err(parser.error("unexpected text after the end of the JSON document"));
    }
    Ok(value)
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError { pos: self.pos, message: message.into() }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), SyntaxError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {what}, found {}", self.describe_here())))
        }
    }

    fn describe_here(&self) -> String {
        match self.text.get(self.pos..).and_then(|rest| rest.chars().next()) {
            None => "end of input".to_string(),
            Some(c) => format!("'{}'", c.escape_default()),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Spanned<Json>, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        let pos = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Json::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => Json::Number(self.number()?),
            Some(b't') => self.keyword("true", Json::Bool(true))?,
            Some(b'f') => self.keyword("false", Json::Bool(false))?,
            Some(b'n') => self.keyword("null", Json::Null)?,
            _ => return Err(self.error(format!("expected a value, found {}", self.describe_here()))),
        };
        Ok(Spanned { value, pos })
    }

    fn keyword(&mut self, word: &str, value: Json) -> Result<Json, SyntaxError> {
        if self.src[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error(format!("expected a value, found {}", self.describe_here())))
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        self.pos += 1;
        let mut members: Vec<(Spanned<String>, Spanned<Json>)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_ws();
            let key_pos = self.pos;
            if self.peek() != Some(b'"') {
                return Err(self.error(format!("expected a quoted field name, found {}", self.describe_here())));
            }
            let key = self.string()?;
            if members.iter().any(|(k, _)| k.value == key) {
                return Err(SyntaxError {
                    pos: key_pos,
                    message: format!("field \"{key}\" appears twice in the same object"),
                });
            }
            self.skip_ws();
            self.expect(b':', "':' after a field name")?;
            self.skip_ws();
            let value = self.value(depth + 1)?;
            members.push((Spanned { value: key, pos: key_pos }, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(members));
                }
                _ => {
                    return Err(
                        self.error(format!("expected ',' or '}}' in an object, found {}", self.describe_here()))
                    );
                }
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                _ => {
                    return Err(self.error(format!("expected ',' or ']' in an array, found {}", self.describe_here())));
                }
            }
        }
    }

    fn number(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("a number needs a digit after '-'")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("a number needs a digit after '.'"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("a number needs a digit in its exponent"));
            }
            self.digits();
        }
        Ok(self.text[start..self.pos].to_string())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.error("control character inside a string")),
                None => {
                    return Err(SyntaxError { pos: open, message: "string is never closed".to_string() });
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        let Some(b) = self.peek() else {
            return Err(self.error("unfinished escape sequence"));
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(out),
            _ => {
                self.pos -= 1;
                return Err(self.error(format!("unknown escape sequence \\{}", self.describe_here())));
            }
        };
        out.push(c);
        Ok(())
    }

    fn unicode_escape(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) {
            if !self.src[self.pos..].starts_with(b"\\u") {
                return Err(self.error("unpaired surrogate in \\u escape"));
            }
            self.pos += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(self.error("unpaired surrogate in \\u escape"));
            }
            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        } else {
            high
        };
        match char::from_u32(code) {
            Some(c) => {
                out.push(c);
                Ok(())
            }
            None => Err(self.error("invalid \\u escape")),
        }
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let digits =
            self.src.get(self.pos..self.pos + 4).ok_or_else(|| self.error("\\u escape needs four hex digits"))?;
        let mut code = 0u32;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or_else(|| self.error("\\u escape needs four hex digits"))?;
            code = code * 16 + v;
        }
        self.pos += 4;
        Ok(code)
    }
}

/// Maps byte offsets to 1-based line and column (columns count characters).
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(src: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(src.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1));
        LineIndex { line_starts }
    }

    pub fn locate(&self, src: &str, pos: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&start| start <= pos) - 1;
        let start = self.line_starts[line];
        let end = pos.min(src.len());
        let column = src.get(start..end).map_or(end.saturating_sub(start), |s| s.chars().count());
        (line + 1, column + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_values_with_positions() {
        let src = "{\"a\": [1, -2.5e3, \"x\\u00e9\"],\n \"b\": {\"c\": null, \"d\": true}}";
        let doc = parse(src).expect("valid");
        let Json::Object(members) = &doc.value else { panic!("object expected") };
        assert_eq!(members[0].0.value, "a");
        let Json::Array(items) = &members[0].1.value else { panic!("array expected") };
        assert_eq!(items[1].value, Json::Number("-2.5e3".into()));
        assert_eq!(items[2].value, Json::String("xé".into()));
        let index = LineIndex::new(src);
        assert_eq!(index.locate(src, members[1].0.pos), (2, 2));
    }

    #[test]
    fn rejects_bad_documents_with_a_position() {
        for (src, needle) in [
            ("{\"a\": 1,}", "quoted field name"),
            ("[1 2]", "expected ',' or ']'"),
            ("{\"a\": 1, \"a\": 2}", "appears twice"),
            ("\"abc", "never closed"),
            ("01", "after the end"),
            ("-", "digit after '-'"),
            ("[1.]", "digit after '.'"),
            ("\"\\q\"", "unknown escape"),
            ("\"\\ud800\"", "unpaired surrogate"),
            ("", "expected a value"),
            ("{} {}", "after the end"),
        ] {
            let err = parse(src).expect_err(src);
            assert!(err.message.contains(needle), "{src}: {}", err.message);
        }
    }

    #[test]
    fn refuses_deep_nesting_without_overflowing() {
        let src = "[".repeat(10_000);
        let err = parse(&src).expect_err("too deep");
        assert!(err.message.contains("nesting"));
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let src = "{\"é\": x}";
        let err = parse(src).expect_err("bad");
        assert_eq!(LineIndex::new(src).locate(src, err.pos), (1, 7));
    }
}
