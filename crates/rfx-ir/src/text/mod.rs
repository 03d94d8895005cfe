//! The lexer and parsing cursor shared by the HIR, MIR and LIR text formats.
//!
//! All three formats use one token set: identifiers, `%`-prefixed value names, numeric and
//! special float literals, and punctuation. Newlines are not significant; `#` starts a comment
//! that runs to the end of the line. Every token remembers its 1-based line and column, so parse
//! errors point at the offending text.

use crate::error::ParseError;
use crate::{DType, Shape, TensorType};

/// The kind of a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// `[A-Za-z_][A-Za-z0-9_.]*` (dots allow op names such as `reduce.sum` in future).
    Ident,
    /// `%` followed by an identifier or digits: a value name.
    Value,
    /// A number or special float literal: `12`, `-3`, `2.5e-3`, `inf`, `-inf`, `nan`, `nan:0x7fc00001`.
    /// The words `inf` and `nan` lex as identifiers unless signed or with a payload; parsers accept
    /// both where a literal is expected.
    Number,
    /// One of `= : , ( ) [ ] { }` or `->`.
    Punct,
    /// The end of the input.
    Eof,
}

/// A token and where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub(crate) kind: TokenKind,
    pub(crate) text: &'a str,
    pub(crate) line: usize,
    pub(crate) col: usize,
}

impl Token<'_> {
    /// How the token is named in "expected X, found Y" messages.
    pub(crate) fn describe(&self) -> String {
        match self.kind {
            TokenKind::Eof => "end of input".to_string(),
            _ => format!("`{}`", self.text),
        }
    }
}

/// Splits `src` into tokens, or reports the first character that starts no token.
pub(crate) fn lex(src: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let mut tokens = Vec::new();
    let bytes = src.as_bytes();
    let (mut pos, mut line, mut line_start) = (0usize, 1usize, 0usize);
    let col_of = |pos: usize, line_start: usize| src[line_start..pos].chars().count() + 1;
    while pos < bytes.len() {
        let c = bytes[pos];
        let start = pos;
        let col = col_of(pos, line_start);
        let kind = match c {
            b'\n' => {
                pos += 1;
                line += 1;
                line_start = pos;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                pos += 1;
                continue;
            }
            b'#' => {
                while pos < bytes.len() && bytes[pos] != b'\n' {
                    pos += 1;
                }
                continue;
            }
            b'%' => {
                pos += 1;
                let name_start = pos;
                while pos < bytes.len() && is_ident_continue(bytes[pos]) {
                    pos += 1;
                }
                if pos == name_start {
                    return Err(ParseError {
                        line,
                        col,
                        message: "expected a value name after `%`".to_string(),
                    });
                }
                TokenKind::Value
            }
            b'-' if bytes.get(pos + 1) == Some(&b'>') => {
                pos += 2;
                TokenKind::Punct
            }
            b'=' | b':' | b',' | b'(' | b')' | b'[' | b']' | b'{' | b'}' => {
                pos += 1;
                TokenKind::Punct
            }
            b'-' | b'+' | b'0'..=b'9' | b'.' => {
                pos += 1;
                if matches!(c, b'-' | b'+') && src[pos..].starts_with("inf") {
                    pos += 3;
                } else if matches!(c, b'-' | b'+') && src[pos..].starts_with("nan") {
                    pos += 3;
                    pos = lex_nan_payload(bytes, pos);
                } else {
                    while pos < bytes.len() {
                        let d = bytes[pos];
                        let exponent_sign = matches!(d, b'-' | b'+') && matches!(bytes[pos - 1], b'e' | b'E');
                        if d.is_ascii_alphanumeric() || d == b'.' || exponent_sign {
                            pos += 1;
                        } else {
                            break;
                        }
                    }
                }
                TokenKind::Number
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while pos < bytes.len() && (is_ident_continue(bytes[pos]) || bytes[pos] == b'.') {
                    pos += 1;
                }
                if &src[start..pos] == "nan" && src[pos..].starts_with(":0x") {
                    pos = lex_nan_payload(bytes, pos);
                    TokenKind::Number
                } else {
                    TokenKind::Ident
                }
            }
            _ => {
                let ch = src[pos..].chars().next().unwrap_or('?');
                return Err(ParseError {
                    line,
                    col,
                    message: format!("unexpected character `{ch}`"),
                });
            }
        };
        tokens.push(Token {
            kind,
            text: &src[start..pos],
            line,
            col,
        });
    }
    tokens.push(Token {
        kind: TokenKind::Eof,
        text: "",
        line,
        col: col_of(bytes.len(), line_start),
    });
    Ok(tokens)
}

fn lex_nan_payload(bytes: &[u8], mut pos: usize) -> usize {
    if bytes[pos..].starts_with(b":0x") {
        pos += 3;
        while pos < bytes.len() && bytes[pos].is_ascii_hexdigit() {
            pos += 1;
        }
    }
    pos
}

fn is_ident_continue(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A cursor over tokens with the helpers every parser needs.
pub(crate) struct Cursor<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Lexes `src` and positions the cursor on the first token.
    pub(crate) fn new(src: &'a str) -> Result<Cursor<'a>, ParseError> {
        Ok(Cursor {
            tokens: lex(src)?,
            pos: 0,
        })
    }

    /// The current token (the last one is always `Eof`).
    pub(crate) fn peek(&self) -> Token<'a> {
        self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    /// The token after the current one.
    pub(crate) fn peek2(&self) -> Token<'a> {
        self.tokens[(self.pos + 1).min(self.tokens.len() - 1)]
    }

    /// Consumes and returns the current token.
    pub(crate) fn bump(&mut self) -> Token<'a> {
        let tok = self.peek();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        tok
    }

    /// An error at `tok` saying what was expected there.
    pub(crate) fn error_at(tok: Token<'_>, expected: &str) -> ParseError {
        ParseError {
            line: tok.line,
            col: tok.col,
            message: format!("expected {expected}, found {}", tok.describe()),
        }
    }

    /// An error at `tok` with a free-form message.
    pub(crate) fn message_at(tok: Token<'_>, message: impl Into<String>) -> ParseError {
        ParseError {
            line: tok.line,
            col: tok.col,
            message: message.into(),
        }
    }

    /// An error at the current token saying what was expected.
    pub(crate) fn expected(&self, expected: &str) -> ParseError {
        Cursor::error_at(self.peek(), expected)
    }

    /// `true` (and consumes it) when the current token is the punctuation `p`.
    pub(crate) fn eat_punct(&mut self, p: &str) -> bool {
        let tok = self.peek();
        if tok.kind == TokenKind::Punct && tok.text == p {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Consumes the punctuation `p` or fails.
    pub(crate) fn expect_punct(&mut self, p: &str) -> Result<Token<'a>, ParseError> {
        let tok = self.peek();
        if tok.kind == TokenKind::Punct && tok.text == p {
            Ok(self.bump())
        } else {
            Err(self.expected(&format!("`{p}`")))
        }
    }

    /// `true` when the current token is the identifier `word`.
    pub(crate) fn at_keyword(&self, word: &str) -> bool {
        let tok = self.peek();
        tok.kind == TokenKind::Ident && tok.text == word
    }

    /// `true` (and consumes it) when the current token is the identifier `word`.
    pub(crate) fn eat_keyword(&mut self, word: &str) -> bool {
        if self.at_keyword(word) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Consumes the identifier `word` or fails.
    pub(crate) fn expect_keyword(&mut self, word: &str) -> Result<Token<'a>, ParseError> {
        if self.at_keyword(word) {
            Ok(self.bump())
        } else {
            Err(self.expected(&format!("`{word}`")))
        }
    }

    /// Consumes any identifier or fails with "expected {what}".
    pub(crate) fn expect_ident(&mut self, what: &str) -> Result<Token<'a>, ParseError> {
        if self.peek().kind == TokenKind::Ident {
            Ok(self.bump())
        } else {
            Err(self.expected(what))
        }
    }

    /// Consumes a `%name` or fails.
    pub(crate) fn expect_value(&mut self) -> Result<Token<'a>, ParseError> {
        if self.peek().kind == TokenKind::Value {
            Ok(self.bump())
        } else {
            Err(self.expected("a value `%name`"))
        }
    }

    /// Consumes a non-negative integer that fits `usize`.
    pub(crate) fn expect_usize(&mut self, what: &str) -> Result<usize, ParseError> {
        let tok = self.peek();
        if tok.kind == TokenKind::Number && tok.text.bytes().all(|b| b.is_ascii_digit()) {
            let value = tok
                .text
                .parse::<usize>()
                .map_err(|_| Cursor::message_at(tok, format!("{what} `{}` is too large", tok.text)))?;
            self.bump();
            Ok(value)
        } else {
            Err(self.expected(what))
        }
    }

    /// Consumes a literal token: a number, or one of the words `true`, `false`, `inf`, `nan`.
    pub(crate) fn expect_literal(&mut self) -> Result<Token<'a>, ParseError> {
        let tok = self.peek();
        let word_literal =
            tok.kind == TokenKind::Ident && matches!(tok.text, "true" | "false" | "inf" | "nan");
        if tok.kind == TokenKind::Number || word_literal {
            Ok(self.bump())
        } else {
            Err(self.expected("a literal"))
        }
    }

    /// Parses a list of literal tokens `[v0, v1, ...]` (possibly `[]`); their dtype is known
    /// only later (see [`typed_literals`]).
    pub(crate) fn parse_literal_list(&mut self) -> Result<Vec<Token<'a>>, ParseError> {
        self.expect_punct("[")?;
        let mut values = Vec::new();
        if !self.eat_punct("]") {
            loop {
                values.push(self.expect_literal()?);
                if self.eat_punct("]") {
                    break;
                }
                if !self.eat_punct(",") {
                    return Err(self.expected("`,` or `]`"));
                }
            }
        }
        Ok(values)
    }

    /// Parses `[d0,d1,...]` (possibly `[]`).
    pub(crate) fn parse_dims(&mut self) -> Result<Vec<usize>, ParseError> {
        self.expect_punct("[")?;
        let mut dims = Vec::new();
        if !self.eat_punct("]") {
            loop {
                dims.push(self.expect_usize("a dimension")?);
                if self.eat_punct("]") {
                    break;
                }
                self.expect_punct(",")?;
            }
        }
        Ok(dims)
    }

    /// Parses a dtype name.
    pub(crate) fn parse_dtype(&mut self) -> Result<DType, ParseError> {
        let tok = self.peek();
        match (tok.kind, DType::from_name(tok.text)) {
            (TokenKind::Ident, Some(dtype)) => {
                self.bump();
                Ok(dtype)
            }
            _ => Err(self.expected("a dtype (`bool`, `i32`, `f32` or `f64`)")),
        }
    }

    /// Parses a tensor type `f32[2,3]`.
    pub(crate) fn parse_tensor_type(&mut self) -> Result<TensorType, ParseError> {
        let dtype = self.parse_dtype()?;
        let dims = self.parse_dims()?;
        Ok(TensorType {
            dtype,
            shape: Shape::new(dims),
        })
    }

    /// Fails unless all input was consumed.
    pub(crate) fn expect_eof(&self) -> Result<(), ParseError> {
        if self.peek().kind == TokenKind::Eof {
            Ok(())
        } else {
            Err(self.expected("end of input"))
        }
    }
}

/// Reads literal tokens as values of `dtype`; the error names the first token that is not one.
pub(crate) fn typed_literals(tokens: &[Token<'_>], dtype: DType) -> Result<Vec<crate::Scalar>, ParseError> {
    tokens
        .iter()
        .map(|&tok| {
            crate::parse_scalar(tok.text, dtype).ok_or_else(|| {
                Cursor::message_at(tok, format!("`{}` is not a literal of dtype {dtype}", tok.text))
            })
        })
        .collect()
}

/// Writes `[v0, v1, ...]` in the form [`typed_literals`] reads back bit for bit.
pub(crate) fn write_literals(f: &mut dyn std::fmt::Write, values: &[crate::Scalar]) -> std::fmt::Result {
    f.write_char('[')?;
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{value}")?;
    }
    f.write_char(']')
}
