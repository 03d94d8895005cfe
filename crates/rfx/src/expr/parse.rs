//! The expression grammar: tokens and a recursive-descent parser producing an AST.

use super::ExprError;

/// A position in the source: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) col: usize,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num { value: f64, int: bool },
    Ident(String),
    Op(&'static str),
    Newline,
    End,
}

const OPS: [&str; 23] = [
    "**", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "@", "<", ">", "=", "&", "|", "~", "(", ")", "[",
    "]", ",", ";",
];

fn lex(src: &str) -> Result<Vec<(Tok, Pos)>, ExprError> {
    let mut toks = Vec::new();
    for (line_idx, line) in src.split('\n').enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let pos = |i: usize| Pos {
            line: line_idx + 1,
            col: i + 1,
        };
        while i < chars.len() {
            let c = chars[i];
            if c == '#' {
                break;
            }
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
            if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
                let mut int = true;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_') {
                    int &= chars[i] != '.';
                    i += 1;
                }
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    let mut j = i + 1;
                    if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                        j += 1;
                    }
                    if j < chars.len() && chars[j].is_ascii_digit() {
                        int = false;
                        i = j;
                        while i < chars.len() && chars[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let text: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
                let value = text
                    .parse::<f64>()
                    .map_err(|_| ExprError::at(src, pos(start), format!("invalid number `{text}`")))?;
                toks.push((Tok::Num { value, int }, pos(start)));
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                toks.push((Tok::Ident(chars[start..i].iter().collect()), pos(start)));
                continue;
            }
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            match OPS.iter().find(|op| rest.starts_with(**op)) {
                Some(op) => {
                    let tok = if *op == ";" { Tok::Newline } else { Tok::Op(op) };
                    toks.push((tok, pos(start)));
                    i += op.chars().count();
                }
                None => {
                    return Err(ExprError::at(
                        src,
                        pos(start),
                        format!("unexpected character `{c}`"),
                    ));
                }
            }
        }
        toks.push((
            Tok::Newline,
            Pos {
                line: line_idx + 1,
                col: chars.len() + 1,
            },
        ));
    }
    let end = toks.last().map_or(Pos { line: 1, col: 1 }, |(_, p)| *p);
    toks.push((Tok::End, end));
    Ok(toks)
}

/// An expression node.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    Num {
        value: f64,
        int: bool,
        pos: Pos,
    },
    Name {
        name: String,
        pos: Pos,
    },
    Unary {
        op: &'static str,
        arg: Box<Expr>,
        pos: Pos,
    },
    Binary {
        op: &'static str,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        pos: Pos,
    },
    Call {
        name: String,
        args: Vec<CallArg>,
        pos: Pos,
    },
    List {
        items: Vec<Expr>,
        pos: Pos,
    },
}

impl Expr {
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Expr::Num { pos, .. }
            | Expr::Name { pos, .. }
            | Expr::Unary { pos, .. }
            | Expr::Binary { pos, .. }
            | Expr::Call { pos, .. }
            | Expr::List { pos, .. } => *pos,
        }
    }
}

/// A function-call argument, positional or `name=value`.
#[derive(Clone, Debug)]
pub(crate) struct CallArg {
    pub(crate) keyword: Option<String>,
    pub(crate) value: Expr,
}

/// A statement: `name = expr` or a bare expression.
#[derive(Clone, Debug)]
pub(crate) struct Stmt {
    pub(crate) target: Option<(String, Pos)>,
    pub(crate) value: Expr,
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<(Tok, Pos)>,
    at: usize,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Num { value, .. } => format!("number `{value}`"),
        Tok::Ident(name) => format!("`{name}`"),
        Tok::Op(op) => format!("`{op}`"),
        Tok::Newline => "end of line".to_string(),
        Tok::End => "end of input".to_string(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].0
    }

    fn pos(&self) -> Pos {
        self.toks[self.at].1
    }

    fn bump(&mut self) -> (Tok, Pos) {
        let tok = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        tok
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Tok::Op(o) if *o == op) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn error(&self, message: String) -> ExprError {
        ExprError::at(self.src, self.pos(), message)
    }

    fn expect(&mut self, op: &str) -> Result<(), ExprError> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{op}`, found {}", describe(self.peek()))))
        }
    }

    fn program(&mut self) -> Result<Vec<Stmt>, ExprError> {
        let mut stmts = Vec::new();
        loop {
            while matches!(self.peek(), Tok::Newline) {
                self.bump();
            }
            if matches!(self.peek(), Tok::End) {
                break;
            }
            stmts.push(self.statement()?);
            match self.peek() {
                Tok::Newline | Tok::End => {}
                other => {
                    return Err(self.error(format!("expected end of statement, found {}", describe(other))));
                }
            }
        }
        if stmts.is_empty() {
            return Err(self.error("empty expression".to_string()));
        }
        Ok(stmts)
    }

    fn statement(&mut self) -> Result<Stmt, ExprError> {
        if let (Tok::Ident(name), Some((Tok::Op("="), _))) = (self.peek().clone(), self.toks.get(self.at + 1))
        {
            let pos = self.pos();
            self.bump();
            self.bump();
            let value = self.expr()?;
            return Ok(Stmt {
                target: Some((name, pos)),
                value,
            });
        }
        Ok(Stmt {
            target: None,
            value: self.expr()?,
        })
    }

    /// `|` binds loosest, then `&`, then comparisons: `x > 0 & y < 1` means what it says
    /// (unlike Python, where `&` binds tighter than comparisons).
    fn expr(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.and()?;
        while matches!(self.peek(), Tok::Op("|")) {
            let pos = self.pos();
            self.bump();
            let rhs = self.and()?;
            lhs = binary("|", lhs, rhs, pos);
        }
        Ok(lhs)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.comparison()?;
        while matches!(self.peek(), Tok::Op("&")) {
            let pos = self.pos();
            self.bump();
            let rhs = self.comparison()?;
            lhs = binary("&", lhs, rhs, pos);
        }
        Ok(lhs)
    }

    fn comparison(&mut self) -> Result<Expr, ExprError> {
        let lhs = self.additive()?;
        if let Tok::Op(op @ ("<" | "<=" | ">" | ">=" | "==" | "!=")) = *self.peek() {
            let pos = self.pos();
            self.bump();
            let rhs = self.additive()?;
            if let Tok::Op("<" | "<=" | ">" | ">=" | "==" | "!=") = self.peek() {
                return Err(self.error("chained comparisons are not supported; use `&`".to_string()));
            }
            return Ok(binary(op, lhs, rhs, pos));
        }
        Ok(lhs)
    }

    fn additive(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.multiplicative()?;
        while let Tok::Op(op @ ("+" | "-")) = *self.peek() {
            let pos = self.pos();
            self.bump();
            let rhs = self.multiplicative()?;
            lhs = binary(op, lhs, rhs, pos);
        }
        Ok(lhs)
    }

    fn multiplicative(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        while let Tok::Op(op @ ("*" | "/" | "%" | "@")) = *self.peek() {
            let pos = self.pos();
            self.bump();
            let rhs = self.unary()?;
            lhs = binary(op, lhs, rhs, pos);
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if let Tok::Op(op @ ("-" | "+" | "~")) = *self.peek() {
            let pos = self.pos();
            self.bump();
            let arg = self.unary()?;
            return Ok(Expr::Unary {
                op,
                arg: Box::new(arg),
                pos,
            });
        }
        self.power()
    }

    /// `**` is right-associative and binds tighter than unary minus on its left:
    /// `-x**2 = -(x**2)`, `2**-1` is allowed.
    fn power(&mut self) -> Result<Expr, ExprError> {
        let base = self.atom()?;
        if matches!(self.peek(), Tok::Op("**")) {
            let pos = self.pos();
            self.bump();
            let exponent = self.unary()?;
            return Ok(binary("**", base, exponent, pos));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let (tok, pos) = self.bump();
        match tok {
            Tok::Num { value, int } => Ok(Expr::Num { value, int, pos }),
            Tok::Ident(name) => {
                if !self.eat("(") {
                    return Ok(Expr::Name { name, pos });
                }
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        let keyword = match (self.peek().clone(), self.toks.get(self.at + 1)) {
                            (Tok::Ident(kw), Some((Tok::Op("="), _))) => {
                                self.bump();
                                self.bump();
                                Some(kw)
                            }
                            _ => None,
                        };
                        args.push(CallArg {
                            keyword,
                            value: self.expr()?,
                        });
                        if self.eat(")") {
                            break;
                        }
                        if !self.eat(",") {
                            return Err(
                                self.error(format!("expected `,` or `)`, found {}", describe(self.peek())))
                            );
                        }
                    }
                }
                Ok(Expr::Call { name, args, pos })
            }
            Tok::Op("(") => {
                let inner = self.expr()?;
                self.expect(")")?;
                Ok(inner)
            }
            Tok::Op("[") => {
                let mut items = Vec::new();
                if !self.eat("]") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::List { items, pos })
            }
            other => Err(ExprError::at(
                self.src,
                pos,
                format!("expected an operand, found {}", describe(&other)),
            )),
        }
    }
}

fn binary(op: &'static str, lhs: Expr, rhs: Expr, pos: Pos) -> Expr {
    Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
        pos,
    }
}

/// Parses `src` into statements.
pub(crate) fn parse(src: &str) -> Result<Vec<Stmt>, ExprError> {
    let toks = lex(src)?;
    Parser { src, toks, at: 0 }.program()
}
