//! The printer: walks the token stream of a file that parsed without syntax errors,
//! following the item structure of the grammar, and writes the canonical layout.
//!
//! Every function returns `None` when the tokens do not have the shape it expects.
//! That cannot happen for a file that parsed, but the printer must never panic, and
//! [`super::format`] turns it into an error instead of a half-formatted file.

use super::lexer::{Kind, Token, Tokens};

/// Indentation of one level.
const INDENT: usize = 2;

/// One-line items that may stay on consecutive lines, without the blank line between
/// items, when the author wrote them so: a run of imports, prohibitions or redactors.
const GROUPABLE: &[&str] = &["import", "prohibit", "redactor"];

struct Writer {
    out: String,
    /// Indentation of the entries of the innermost block.
    indent: usize,
    /// Indentation of the current output line.
    line_indent: usize,
    /// Nothing has been written on the current line yet.
    fresh: bool,
}

impl Writer {
    fn newline(&mut self) {
        if !self.fresh {
            self.out.push('\n');
            self.fresh = true;
        }
    }

    /// Ends the current line and makes sure one blank line follows it.
    fn blank_line(&mut self) {
        self.newline();
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn begin_line(&mut self, indent: usize) {
        self.out.extend(std::iter::repeat_n(' ', indent));
        self.line_indent = indent;
        self.fresh = false;
    }

    fn comment_line(&mut self, text: &str, indent: usize) {
        self.newline();
        self.begin_line(indent);
        self.out.push_str(text);
        self.newline();
    }
}

pub struct Printer<'t, 's> {
    toks: &'t [Token<'s>],
    end_comments: &'t [super::lexer::Comment],
    pos: usize,
    w: Writer,
    /// The next token is the first of an entry (an item, a field, an effect).
    entry_first: bool,
}

type Step = Option<()>;

impl<'t, 's> Printer<'t, 's> {
    pub fn new(tokens: &'t Tokens<'s>) -> Self {
        Printer {
            toks: &tokens.tokens,
            end_comments: &tokens.end_comments,
            pos: 0,
            w: Writer {
                out: String::new(),
                indent: 0,
                line_indent: 0,
                fresh: true,
            },
            entry_first: false,
        }
    }

    pub fn file(mut self) -> Option<String> {
        let mut first = true;
        // The previous item, when it was a one-line item that may be grouped.
        let mut groupable: Option<&str> = None;
        while self.pos < self.toks.len() {
            let keyword = self.cur()?.text;
            let grouped = groupable == Some(keyword) && !self.cur()?.blank_before_all();
            self.begin_entry(!first, !grouped);
            let begin = self.pos;
            self.item()?;
            groupable =
                (GROUPABLE.contains(&keyword) && self.one_line(begin, self.pos)).then_some(keyword);
            first = false;
        }
        for (k, c) in self.end_comments.iter().enumerate() {
            if c.blank_before && (k > 0 || !first) {
                self.w.blank_line();
            }
            self.w.comment_line(&c.text, 0);
        }
        self.w.newline();
        Some(self.w.out)
    }

    // -----------------------------------------------------------------------------
    // Tokens
    // -----------------------------------------------------------------------------

    fn cur(&self) -> Option<&'t Token<'s>> {
        self.toks.get(self.pos)
    }

    fn at(&self, text: &str) -> bool {
        self.cur().is_some_and(|t| t.is(text))
    }

    fn peek_is(&self, k: usize, text: &str) -> bool {
        self.toks.get(self.pos + k).is_some_and(|t| t.is(text))
    }

    fn at_kind(&self, kind: Kind) -> bool {
        self.cur().is_some_and(|t| t.kind == kind)
    }

    /// Starts a new entry on a new line at the block's indentation. `blank` allows a
    /// blank line before it when the author wrote one; `force` always puts one.
    fn begin_entry(&mut self, blank: bool, force: bool) {
        self.w.newline();
        let had_blank = self.cur().is_some_and(Token::blank_before_all);
        if blank && (force || had_blank) {
            self.w.blank_line();
        }
        self.entry_first = true;
    }

    /// Do the tokens `begin..end` print on one line? Only comments before the first
    /// or after the last, and no multi-line string.
    fn one_line(&self, begin: usize, end: usize) -> bool {
        let Some(toks) = self.toks.get(begin..end) else {
            return false;
        };
        toks.iter().enumerate().all(|(i, t)| {
            (i == 0 || t.leading.is_empty())
                && (i + 1 == toks.len() || t.trailing.is_none())
                && !(t.kind == Kind::Triple && t.text.contains('\n'))
        })
    }

    /// Writes the current token with its comments, after a space when `space`.
    fn tok(&mut self, space: bool) -> Step {
        let t = self.cur()?;
        let first = self.entry_first;
        let indent = if first {
            self.w.indent
        } else {
            self.w.indent + INDENT
        };
        for (k, c) in t.leading.iter().enumerate() {
            if first && k > 0 && c.blank_before {
                self.w.blank_line();
            }
            self.w.comment_line(&c.text, indent);
        }
        if first && !t.leading.is_empty() && t.blank_before {
            self.w.blank_line();
        }
        if self.w.fresh {
            self.w.begin_line(indent);
        } else if space {
            self.w.out.push(' ');
        }
        if t.kind == Kind::Triple {
            let text = reindent(t.text, self.w.line_indent);
            self.w.out.push_str(&text);
        } else {
            self.w.out.push_str(t.text);
        }
        if let Some(c) = &t.trailing {
            self.w.out.push(' ');
            self.w.out.push_str(c);
            self.w.newline();
        }
        self.entry_first = false;
        self.pos += 1;
        Some(())
    }

    fn sp(&mut self) -> Step {
        self.tok(true)
    }

    fn nsp(&mut self) -> Step {
        self.tok(false)
    }

    /// Expects the current token to be `text` and writes it.
    fn expect(&mut self, text: &str, space: bool) -> Step {
        if !self.at(text) {
            return None;
        }
        self.tok(space)
    }

    /// A `{ ... }` block with one entry per line. The `{` is the current token.
    fn block(&mut self, mut entry: impl FnMut(&mut Self) -> Step) -> Step {
        self.expect("{", true)?;
        self.w.indent += INDENT;
        let mut entries = 0usize;
        while !self.at("}") {
            if self.pos >= self.toks.len() {
                return None;
            }
            self.begin_entry(entries > 0, false);
            entry(self)?;
            entries += 1;
        }
        let close = self.cur()?;
        for (k, c) in close.leading.iter().enumerate() {
            if c.blank_before && (k > 0 || entries > 0) {
                self.w.blank_line();
            }
            self.w.comment_line(&c.text, self.w.indent);
        }
        self.w.indent -= INDENT;
        // An empty block stays `{}` on its line; otherwise `}` gets a line of its own.
        let inline_empty = entries == 0 && close.leading.is_empty() && !self.w.fresh;
        if !inline_empty {
            self.w.newline();
        }
        if self.w.fresh {
            self.w.begin_line(self.w.indent);
        }
        // The brace's leading comments were written above, as the block's last lines.
        self.w.out.push('}');
        if let Some(c) = &close.trailing {
            self.w.out.push(' ');
            self.w.out.push_str(c);
            self.w.newline();
        }
        self.entry_first = false;
        self.pos += 1;
        Some(())
    }

    // -----------------------------------------------------------------------------
    // Items
    // -----------------------------------------------------------------------------

    fn item(&mut self) -> Step {
        let keyword = self.cur()?.text;
        self.sp()?;
        match keyword {
            "pack" => {
                self.sp()?;
                self.expect("version", true)?;
                self.sp()?;
                if self.at("library") {
                    self.sp()?;
                }
            }
            "import" => {
                self.sp()?;
                if self.at("version") {
                    self.sp()?;
                    self.sp()?;
                }
            }
            "description" | "session" => self.sp()?,
            "prompt" => {
                self.sp()?;
                self.sp()?;
            }
            "prohibit" => self.name_list()?,
            "redactor" => {
                self.sp()?;
                self.expect("pattern", true)?;
                self.sp()?;
            }
            "block" => {
                self.sp()?;
                self.expect("in", true)?;
                self.sp()?;
                if self.at("priority") {
                    self.sp()?;
                    self.sp()?;
                }
                self.sp()?;
            }
            "context" => self.block(Self::decl)?,
            "budget" => {
                let width = self.bucket_widths();
                self.block(|p| p.budget_entry(width))?;
            }
            "tool" => {
                self.sp()?;
                self.block(Self::tool_entry)?;
            }
            "intent" => {
                self.sp()?;
                if self.at("fallback") {
                    self.sp()?;
                }
                self.block(Self::intent_entry)?;
            }
            "policy" => {
                self.sp()?;
                if self.at("priority") {
                    self.sp()?;
                    self.sp()?;
                }
                if self.at("advisory") {
                    self.sp()?;
                }
                self.block(Self::policy_entry)?;
            }
            _ => return None,
        }
        Some(())
    }

    /// `path: type` in `context` and `input`.
    fn decl(&mut self) -> Step {
        self.sp()?;
        self.expect(":", false)?;
        self.base_type(true)?;
        if self.at("?") {
            self.nsp()?;
        }
        Some(())
    }

    fn base_type(&mut self, space: bool) -> Step {
        if self.at("list") && self.peek_is(1, "<") {
            self.tok(space)?;
            self.nsp()?;
            self.base_type(false)?;
            self.expect(">", false)
        } else if self.at("enum") && self.peek_is(1, "(") {
            self.tok(space)?;
            self.nsp()?;
            self.nsp()?;
            while self.at(",") {
                if self.peek_is(1, ")") {
                    self.trailing_comma()?;
                    break;
                }
                self.nsp()?;
                self.sp()?;
            }
            self.expect(")", false)
        } else {
            self.tok(space)
        }
    }

    /// A comma before a closing bracket is dropped, unless a comment hangs on it.
    fn trailing_comma(&mut self) -> Step {
        if self.cur()?.has_comments() {
            self.nsp()
        } else {
            self.pos += 1;
            Some(())
        }
    }

    fn name_list(&mut self) -> Step {
        self.sp()?;
        while self.at(",") {
            self.nsp()?;
            self.sp()?;
        }
        Some(())
    }

    /// The longest bucket name in the budget block that starts at the current `{`.
    /// The longest bucket name and the widest `share` value in the budget block that
    /// starts at the current `{`, for aligning the bucket lines.
    fn bucket_widths(&self) -> (usize, usize) {
        let mut depth = 0usize;
        let mut width = (0, 0);
        for (i, t) in self.toks.iter().enumerate().skip(self.pos) {
            match t.text {
                "{" => depth += 1,
                "}" => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                "bucket" if depth == 1 => {
                    if let Some(name) = self.toks.get(i + 1) {
                        width.0 = width.0.max(name.text.chars().count());
                    }
                }
                "share" if depth == 2 => {
                    if let Some(value) = self.toks.get(i + 1) {
                        width.1 = width.1.max(value.text.chars().count());
                    }
                }
                _ => {}
            }
        }
        width
    }

    fn budget_entry(&mut self, (width, share_width): (usize, usize)) -> Step {
        match self.cur()?.text {
            "total" | "tokenizer" => {
                self.sp()?;
                self.sp()
            }
            "bucket" => {
                self.sp()?;
                let name = self.cur()?.text.chars().count();
                self.sp()?;
                if !self.w.fresh {
                    let pad = width.saturating_sub(name);
                    self.w.out.extend(std::iter::repeat_n(' ', pad));
                }
                self.inline_braces(share_width)
            }
            _ => None,
        }
    }

    /// `{ a b c }` on one line: a bucket's fields, an intent's share overrides. A
    /// bucket's `share` value is padded to `share_width` when more fields follow, so
    /// that the fields after it line up across the budget.
    fn inline_braces(&mut self, share_width: usize) -> Step {
        self.expect("{", true)?;
        while !self.at("}") {
            if self.pos >= self.toks.len() {
                return None;
            }
            let is_share = self.at("share");
            self.sp()?;
            if is_share && !self.at("}") {
                let value = self.cur()?.text.chars().count();
                self.sp()?;
                if !self.at("}") && !self.w.fresh {
                    let pad = share_width.saturating_sub(value);
                    self.w.out.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
        // `{}` when empty, `{ share 10% }` otherwise.
        let empty = self
            .toks
            .get(self.pos.wrapping_sub(1))
            .is_some_and(|t| t.is("{"));
        self.tok(!empty)
    }

    fn tool_entry(&mut self) -> Step {
        match self.cur()?.text {
            "description" | "kind" | "risk" | "approval" => {
                self.sp()?;
                self.sp()
            }
            "input" => {
                self.sp()?;
                self.block(Self::decl)
            }
            _ => None,
        }
    }

    fn intent_entry(&mut self) -> Step {
        match self.cur()?.text {
            "description" | "safety" | "task" => {
                self.sp()?;
                self.sp()
            }
            "tools" => {
                self.sp()?;
                self.name_list()
            }
            "budget" => {
                self.sp()?;
                self.inline_braces(0)
            }
            _ => None,
        }
    }

    fn policy_entry(&mut self) -> Step {
        match self.cur()?.text {
            "when" => {
                self.sp()?;
                self.expr(true)
            }
            "refuse" | "escalate" | "instruct" => {
                self.sp()?;
                self.sp()
            }
            "require_approval" | "deny" | "redact" => {
                self.sp()?;
                self.name_list()
            }
            _ => None,
        }
    }

    // -----------------------------------------------------------------------------
    // Expressions: one line, single spaces around operators
    // -----------------------------------------------------------------------------

    fn expr(&mut self, space: bool) -> Step {
        self.and_expr(space)?;
        while self.at("or") {
            self.sp()?;
            self.and_expr(true)?;
        }
        Some(())
    }

    fn and_expr(&mut self, space: bool) -> Step {
        self.not_expr(space)?;
        while self.at("and") {
            self.sp()?;
            self.not_expr(true)?;
        }
        Some(())
    }

    fn not_expr(&mut self, space: bool) -> Step {
        if self.at("not") {
            self.tok(space)?;
            return self.not_expr(true);
        }
        self.operand(space)?;
        let is_cmp = self
            .cur()
            .is_some_and(|t| matches!(t.text, "==" | "!=" | "<" | "<=" | ">" | ">=" | "in"));
        if is_cmp {
            self.sp()?;
            self.operand(true)?;
        }
        Some(())
    }

    fn operand(&mut self, space: bool) -> Step {
        let t = self.cur()?;
        match t.text {
            "(" => {
                self.tok(space)?;
                self.expr(false)?;
                self.expect(")", false)
            }
            "[" => {
                self.tok(space)?;
                if self.at("]") {
                    return self.nsp();
                }
                self.expr(false)?;
                while self.at(",") {
                    if self.peek_is(1, "]") {
                        self.trailing_comma()?;
                        break;
                    }
                    self.nsp()?;
                    self.expr(true)?;
                }
                self.expect("]", false)
            }
            "exists" if self.peek_is(1, "(") => {
                self.tok(space)?;
                self.nsp()?;
                self.nsp()?;
                self.expect(")", false)
            }
            "json" if self.peek_is(1, "{") => {
                self.tok(space)?;
                self.json_value(true)
            }
            _ if matches!(t.kind, Kind::Punct) => None,
            _ => self.tok(space),
        }
    }

    /// Raw JSON: `{"key": value, ...}` and `[a, b]`, on one line.
    fn json_value(&mut self, space: bool) -> Step {
        if self.at("{") {
            self.tok(space)?;
            if self.at("}") {
                return self.nsp();
            }
            let mut first = true;
            loop {
                if !self.at_kind(Kind::Str) {
                    return None;
                }
                self.tok(!first)?;
                self.expect(":", false)?;
                self.json_value(true)?;
                if !self.at(",") {
                    break;
                }
                self.nsp()?;
                first = false;
            }
            self.expect("}", false)
        } else if self.at("[") {
            self.tok(space)?;
            if self.at("]") {
                return self.nsp();
            }
            self.json_value(false)?;
            while self.at(",") {
                self.nsp()?;
                self.json_value(true)?;
            }
            self.expect("]", false)
        } else if self.at_kind(Kind::Punct) {
            None
        } else {
            self.tok(space)
        }
    }
}

/// Re-indents a `"""` string so that its lines sit `indent + 2` spaces in and its
/// closing quotes at `indent`, without changing its value: the value is the dedented
/// text (see `syntax::strings`), and the common indentation is replaced, not edited.
/// A string whose text starts on the line of its opening quotes is left as written.
pub fn reindent(raw: &str, indent: usize) -> String {
    let Some(inner) = raw
        .strip_prefix("\"\"\"")
        .and_then(|r| r.strip_suffix("\"\"\""))
    else {
        return raw.to_owned();
    };
    let Some(body) = inner
        .strip_prefix("\r\n")
        .or_else(|| inner.strip_prefix('\n'))
    else {
        return raw.to_owned();
    };
    let body = body.trim_end_matches([' ', '\t', '\r', '\n']);
    let close = " ".repeat(indent);
    if body.is_empty() {
        return format!("\"\"\"\n{close}\"\"\"");
    }
    let leading = |line: &str| line.len() - line.trim_start_matches([' ', '\t']).len();
    let common = body
        .split('\n')
        .filter(|line| !line.trim().is_empty())
        .map(leading)
        .min()
        .unwrap_or(0);
    let pad = " ".repeat(indent + INDENT);
    let mut out = String::with_capacity(raw.len() + 16);
    out.push_str("\"\"\"\n");
    for line in body.split('\n') {
        let cut = common.min(leading(line));
        let rest = &line[cut..];
        let rest = rest.strip_suffix('\r').unwrap_or(rest);
        if !rest.is_empty() {
            out.push_str(&pad);
            out.push_str(rest);
        }
        out.push('\n');
    }
    out.push_str(&close);
    out.push_str("\"\"\"");
    out
}
