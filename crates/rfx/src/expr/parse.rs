//! The expression grammar: tokens and an operator-precedence parser with explicit stacks,
//! producing the AST as a vector of nodes in post-order.

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

/// The deepest nesting an expression may have: open parentheses, brackets and calls, plus
/// operators waiting for their right operand (a unary `-`, each `**` of a right-associative
/// chain). A flat chain of left-associative operators (`x + x + ... + x`) nests one level
/// however long it is. Deeper input is an [`ExprError`] naming this limit; the parser, the
/// evaluator and every later stage walk the expression with explicit stacks, so the limit
/// bounds the work per level, not the native stack.
pub const MAX_NESTING: usize = 100_000;

/// An index into [`Program::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeId(usize);

impl NodeId {
    pub(crate) fn index(self) -> usize {
        self.0
    }
}

/// An expression node. Operands are earlier nodes of the same [`Program`]: the nodes are in
/// post-order (every operand before its user, left operands before right ones), so evaluating
/// them in index order is evaluating the tree depth first, left to right, without recursion
/// (and dropping the tree drops a flat vector).
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    Num {
        value: f64,
        int: bool,
    },
    Name {
        name: String,
    },
    Unary {
        op: &'static str,
        arg: NodeId,
    },
    Binary {
        op: &'static str,
        lhs: NodeId,
        rhs: NodeId,
    },
    Call {
        name: String,
        args: Vec<CallArg>,
    },
    List {
        items: Vec<NodeId>,
    },
}

/// A node and where it was written.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) expr: Expr,
    pub(crate) pos: Pos,
}

/// A function-call argument, positional or `name=value`.
#[derive(Clone, Debug)]
pub(crate) struct CallArg {
    pub(crate) keyword: Option<String>,
    pub(crate) value: NodeId,
}

/// A statement: `name = expr` or a bare expression. Its nodes are `first..=value`.
#[derive(Clone, Debug)]
pub(crate) struct Stmt {
    pub(crate) target: Option<(String, Pos)>,
    pub(crate) first: usize,
    pub(crate) value: NodeId,
}

/// A parsed program: every statement's nodes, in one vector.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(crate) nodes: Vec<Node>,
    pub(crate) stmts: Vec<Stmt>,
}

impl Program {
    pub(crate) fn pos(&self, id: NodeId) -> Pos {
        self.nodes.get(id.0).map_or(Pos { line: 1, col: 1 }, |n| n.pos)
    }
}

/// An operator waiting for its right operand.
#[derive(Clone, Copy, Debug)]
struct Pending {
    op: &'static str,
    pos: Pos,
    prec: u8,
    unary: bool,
}

/// A bracket the parser is inside of.
enum Open {
    Paren,
    Call {
        name: String,
        pos: Pos,
        args: Vec<CallArg>,
        keyword: Option<String>,
    },
    List {
        pos: Pos,
        items: Vec<NodeId>,
    },
}

/// An open bracket and the height of the operator stack when it opened: the operators above it
/// belong to it.
struct Context {
    open: Open,
    ops_base: usize,
}

/// Binding strengths, loosest first; `|` is 1. Unary operators bind at [`UNARY`].
fn binary_prec(op: &str) -> Option<u8> {
    Some(match op {
        "|" => 1,
        "&" => 2,
        "<" | "<=" | ">" | ">=" | "==" | "!=" => 3,
        "+" | "-" => 4,
        "*" | "/" | "%" | "@" => 5,
        "**" => POWER,
        _ => return None,
    })
}

const COMPARISON: u8 = 3;
const UNARY: u8 = 6;
/// `**` binds tighter than a unary minus on its left (`-x**2 = -(x**2)`) and is
/// right-associative; its right operand may start with a unary operator (`2**-1`).
const POWER: u8 = 7;

struct Parser<'s> {
    src: &'s str,
    toks: Vec<(Tok, Pos)>,
    at: usize,
    nodes: Vec<Node>,
    /// Operators waiting for their right operand, innermost last.
    ops: Vec<Pending>,
    /// Finished operands not yet taken by an operator or a bracket.
    vals: Vec<NodeId>,
    contexts: Vec<Context>,
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

    fn program(mut self) -> Result<Program, ExprError> {
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
        Ok(Program {
            nodes: self.nodes,
            stmts,
        })
    }

    fn statement(&mut self) -> Result<Stmt, ExprError> {
        let first = self.nodes.len();
        let mut target = None;
        if let (Tok::Ident(name), Some((Tok::Op("="), _))) = (self.peek().clone(), self.toks.get(self.at + 1))
        {
            target = Some((name, self.pos()));
            self.bump();
            self.bump();
        }
        let value = self.expr()?;
        Ok(Stmt { target, first, value })
    }

    fn push_node(&mut self, expr: Expr, pos: Pos) -> NodeId {
        let id = NodeId(self.nodes.len());
        self.nodes.push(Node { expr, pos });
        id
    }

    fn pop_val(&mut self) -> Result<NodeId, ExprError> {
        self.vals
            .pop()
            .ok_or_else(|| self.error("internal: the expression parser lost an operand".to_string()))
    }

    /// Rejects one more level of nesting past [`MAX_NESTING`].
    fn check_nesting(&self) -> Result<(), ExprError> {
        if self.ops.len() + self.contexts.len() >= MAX_NESTING {
            return Err(self.error(format!(
                "expression nested deeper than {MAX_NESTING} levels (the limit `rfx::expr::MAX_NESTING`)"
            )));
        }
        Ok(())
    }

    /// Applies the pending operators above `base` while `keep_going` says so for the innermost.
    fn reduce(&mut self, base: usize, keep_going: impl Fn(&Pending) -> bool) -> Result<(), ExprError> {
        while self.ops.len() > base {
            let Some(&top) = self.ops.last() else { break };
            if !keep_going(&top) {
                break;
            }
            self.ops.pop();
            let rhs = self.pop_val()?;
            let expr = if top.unary {
                Expr::Unary { op: top.op, arg: rhs }
            } else {
                let lhs = self.pop_val()?;
                Expr::Binary { op: top.op, lhs, rhs }
            };
            let id = self.push_node(expr, top.pos);
            self.vals.push(id);
        }
        Ok(())
    }

    fn ops_base(&self) -> usize {
        self.contexts.last().map_or(0, |c| c.ops_base)
    }

    fn open(&mut self, open: Open) -> Result<(), ExprError> {
        self.check_nesting()?;
        self.contexts.push(Context {
            open,
            ops_base: self.ops.len(),
        });
        Ok(())
    }

    /// `kw=` at the start of a call argument.
    fn keyword(&mut self) -> Option<String> {
        match (self.peek().clone(), self.toks.get(self.at + 1)) {
            (Tok::Ident(kw), Some((Tok::Op("="), _))) => {
                self.bump();
                self.bump();
                Some(kw)
            }
            _ => None,
        }
    }

    /// One expression, by operator precedence with explicit stacks (no recursion, so nesting
    /// is bounded by [`MAX_NESTING`], not by the thread's stack). `|` binds loosest, then `&`,
    /// then comparisons: `x > 0 & y < 1` means what it says (unlike Python, where `&` binds
    /// tighter than comparisons).
    fn expr(&mut self) -> Result<NodeId, ExprError> {
        let (ops_floor, vals_floor, contexts_floor) = (self.ops.len(), self.vals.len(), self.contexts.len());
        loop {
            // An operand is expected.
            let (tok, pos) = self.bump();
            match tok {
                Tok::Op(op @ ("-" | "+" | "~")) => {
                    self.check_nesting()?;
                    self.ops.push(Pending {
                        op,
                        pos,
                        prec: UNARY,
                        unary: true,
                    });
                    continue;
                }
                Tok::Num { value, int } => {
                    let id = self.push_node(Expr::Num { value, int }, pos);
                    self.vals.push(id);
                }
                Tok::Ident(name) => {
                    if self.eat("(") {
                        if self.eat(")") {
                            let id = self.push_node(
                                Expr::Call {
                                    name,
                                    args: Vec::new(),
                                },
                                pos,
                            );
                            self.vals.push(id);
                        } else {
                            let keyword = self.keyword();
                            self.open(Open::Call {
                                name,
                                pos,
                                args: Vec::new(),
                                keyword,
                            })?;
                            continue;
                        }
                    } else {
                        let id = self.push_node(Expr::Name { name }, pos);
                        self.vals.push(id);
                    }
                }
                Tok::Op("(") => {
                    self.open(Open::Paren)?;
                    continue;
                }
                Tok::Op("[") => {
                    if self.eat("]") {
                        let id = self.push_node(Expr::List { items: Vec::new() }, pos);
                        self.vals.push(id);
                    } else {
                        self.open(Open::List {
                            pos,
                            items: Vec::new(),
                        })?;
                        continue;
                    }
                }
                other => {
                    return Err(ExprError::at(
                        self.src,
                        pos,
                        format!("expected an operand, found {}", describe(&other)),
                    ));
                }
            }
            // An operand was read: an operator, a closing bracket or the end follows.
            loop {
                if let Tok::Op(op) = *self.peek()
                    && let Some(prec) = binary_prec(op)
                {
                    let base = self.ops_base();
                    // `**` is right-associative, comparisons do not chain, and every other
                    // binary operator is left-associative.
                    let left_assoc = prec != POWER && prec != COMPARISON;
                    self.reduce(base, |top| top.prec > prec || (top.prec == prec && left_assoc))?;
                    if prec == COMPARISON
                        && self.ops.len() > base
                        && self.ops.last().is_some_and(|t| t.prec == COMPARISON)
                    {
                        return Err(self.error("chained comparisons are not supported; use `&`".to_string()));
                    }
                    self.check_nesting()?;
                    let pos = self.pos();
                    self.bump();
                    self.ops.push(Pending {
                        op,
                        pos,
                        prec,
                        unary: false,
                    });
                    break;
                }
                // The innermost open expression ends here.
                let base = self.ops_base();
                self.reduce(base, |_| true)?;
                if self.contexts.len() == contexts_floor {
                    let value = self.pop_val()?;
                    if self.ops.len() != ops_floor || self.vals.len() != vals_floor {
                        return Err(
                            self.error("internal: the expression parser left operands behind".to_string())
                        );
                    }
                    return Ok(value);
                }
                let value = self.pop_val()?;
                let found = describe(self.peek());
                match self.contexts.last_mut().map(|c| &mut c.open) {
                    Some(Open::Paren) => {
                        if !self.eat(")") {
                            return Err(self.error(format!("expected `)`, found {found}")));
                        }
                        self.contexts.pop();
                        self.vals.push(value);
                    }
                    Some(Open::Call { args, keyword, .. }) => {
                        args.push(CallArg {
                            keyword: keyword.take(),
                            value,
                        });
                        if self.eat(")") {
                            if let Some(Context {
                                open: Open::Call { name, pos, args, .. },
                                ..
                            }) = self.contexts.pop()
                            {
                                let id = self.push_node(Expr::Call { name, args }, pos);
                                self.vals.push(id);
                            }
                        } else if self.eat(",") {
                            let next = self.keyword();
                            if let Some(Open::Call { keyword, .. }) =
                                self.contexts.last_mut().map(|c| &mut c.open)
                            {
                                *keyword = next;
                            }
                            break;
                        } else {
                            return Err(self.error(format!("expected `,` or `)`, found {found}")));
                        }
                    }
                    Some(Open::List { items, .. }) => {
                        items.push(value);
                        if self.eat("]") {
                            if let Some(Context {
                                open: Open::List { pos, items },
                                ..
                            }) = self.contexts.pop()
                            {
                                let id = self.push_node(Expr::List { items }, pos);
                                self.vals.push(id);
                            }
                        } else if self.eat(",") {
                            break;
                        } else {
                            return Err(self.error(format!("expected `,`, found {found}")));
                        }
                    }
                    None => {
                        return Err(self.error("internal: the expression parser lost a bracket".to_string()));
                    }
                }
            }
        }
    }
}

/// Parses `src` into statements.
pub(crate) fn parse(src: &str) -> Result<Program, ExprError> {
    let toks = lex(src)?;
    Parser {
        src,
        toks,
        at: 0,
        nodes: Vec::new(),
        ops: Vec::new(),
        vals: Vec::new(),
        contexts: Vec::new(),
    }
    .program()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statement's tree written with every operation parenthesised, built without recursion
    /// (the nodes are in post-order).
    fn shape_of(src: &str) -> String {
        let program = parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let stmt = program.stmts.last().expect("a statement");
        let mut text: Vec<Option<String>> = Vec::new();
        let take = |text: &mut Vec<Option<String>>, id: NodeId| text[id.index()].take().expect("once");
        for node in &program.nodes {
            let s = match &node.expr {
                Expr::Num { value, .. } => format!("{value}"),
                Expr::Name { name } => name.clone(),
                Expr::Unary { op, arg } => format!("({op}{})", take(&mut text, *arg)),
                Expr::Binary { op, lhs, rhs } => {
                    let (a, b) = (take(&mut text, *lhs), take(&mut text, *rhs));
                    format!("({a}{op}{b})")
                }
                Expr::Call { name, args } => {
                    let args: Vec<String> = args
                        .iter()
                        .map(|a| match &a.keyword {
                            Some(kw) => format!("{kw}={}", take(&mut text, a.value)),
                            None => take(&mut text, a.value),
                        })
                        .collect();
                    format!("{name}({})", args.join(","))
                }
                Expr::List { items } => {
                    let items: Vec<String> = items.iter().map(|&i| take(&mut text, i)).collect();
                    format!("[{}]", items.join(","))
                }
            };
            text.push(Some(s));
        }
        take(&mut text, stmt.value)
    }

    #[test]
    fn precedence_and_associativity() {
        let cases = [
            ("-x**2", "(-(x**2))"),
            ("2**-x**2", "(2**(-(x**2)))"),
            ("2**-x*3", "((2**(-x))*3)"),
            ("-x**-y", "(-(x**(-y)))"),
            ("a-b-c", "((a-b)-c)"),
            ("a**b**c", "(a**(b**c))"),
            ("a+b*c-d/e%f@g", "((a+(b*c))-(((d/e)%f)@g))"),
            ("a < b & c >= d | ~e", "(((a<b)&(c>=d))|(~e))"),
            ("(a+b)*c", "((a+b)*c)"),
            ("f(a, k=b+c)[0]", "f(a,k=(b+c))"),
            ("sum(x, [0, 1], keepdims=true)", "sum(x,[0,1],keepdims=true)"),
            ("g() + [] ", "(g()+[])"),
            ("--+x", "(-(-(+x)))"),
            ("(a < b) < c", "((a<b)<c)"),
        ];
        for (src, want) in cases {
            // `f(...)[0]` is not indexing: the statement ends before `[`.
            if src.contains("[0]") {
                assert!(parse(src).is_err(), "{src}");
                continue;
            }
            assert_eq!(shape_of(src), want, "{src}");
        }
    }

    #[test]
    fn statements_split_the_nodes() {
        let program = parse("a = x + 1; b = a * 2\nb - a").expect("parses");
        let firsts: Vec<usize> = program.stmts.iter().map(|s| s.first).collect();
        let values: Vec<usize> = program.stmts.iter().map(|s| s.value.index()).collect();
        assert_eq!(firsts, [0, 3, 6]);
        assert_eq!(values, [2, 5, 8]);
        assert_eq!(program.stmts[0].target.as_ref().map(|t| t.0.as_str()), Some("a"));
        assert!(program.stmts[2].target.is_none());
    }

    /// Nesting far past what a recursive parser survives on a 2 MiB test thread.
    #[test]
    fn deep_nesting_parses_without_recursion() {
        let depth = 20_000;
        let parens = format!("{}x{}", "(".repeat(depth), ")".repeat(depth));
        assert_eq!(shape_of(&parens), "x");
        let sines = format!("{}x{}", "sin(".repeat(depth), ")".repeat(depth));
        let program = parse(&sines).expect("sines");
        assert_eq!(program.nodes.len(), depth + 1);
        let negs = format!("{}x", "-(".repeat(depth)) + &")".repeat(depth);
        assert_eq!(parse(&negs).expect("negations").nodes.len(), depth + 1);
        let lists = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(parse(&lists).expect("lists").nodes.len(), depth + 1);
        let powers = format!("x{}", "**x".repeat(depth));
        assert_eq!(parse(&powers).expect("powers").nodes.len(), 2 * depth + 1);
        // A flat sum nests one level however long it is.
        let terms = 100_000;
        let sum = vec!["x"; terms].join("+");
        assert_eq!(parse(&sum).expect("sum").nodes.len(), 2 * terms - 1);
    }

    #[test]
    fn nesting_past_the_limit_is_an_error_naming_it() {
        let ok = format!("{}x{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert_eq!(shape_of(&ok), "x");
        for deep in [
            format!("{}x{}", "(".repeat(MAX_NESTING + 1), ")".repeat(MAX_NESTING + 1)),
            format!("{}x", "-".repeat(MAX_NESTING + 1)),
            format!("x{}", "**x".repeat(MAX_NESTING + 1)),
            // Unclosed: the error comes at the limit, before the end of the input is read.
            "sin(".repeat(10 * MAX_NESTING),
        ] {
            let err = parse(&deep).expect_err("too deep");
            assert!(err.message.contains("rfx::expr::MAX_NESTING"), "{}", err.message);
            assert!(err.message.contains(&MAX_NESTING.to_string()), "{}", err.message);
            assert_eq!(err.line, 1);
        }
    }
}
