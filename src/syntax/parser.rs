//! The parser driver: pest, one item at a time, with recovery at item boundaries.
//!
//! Parsing never fails. A syntax error in an item is reported once (E0001, saying
//! what was expected) and the driver resynchronizes on the next top-level item
//! keyword outside any braces, so the items after it are still parsed and checked.
//! When an item's head (`tool NAME`, ...) parsed, its name stays declared.

use pest::iterators::Pair;
use pest::Parser as _;

use super::ast::*;
use super::strings;
use crate::artifact::{Approval, Overflow, Risk, SafetyMode, Tokenizer};
use crate::diagnostic::Diagnostic;
use crate::span::{Span, TextEdit};

#[derive(pest_derive::Parser)]
#[grammar = "grammar/ctxpack.pest"]
struct CtxpackParser;

/// Brackets (and `not`s) nested deeper than this are refused before parsing: the
/// parser and the checkers recurse, and no real pack comes near it.
pub const MAX_NESTING: usize = 64;

/// Parses a whole file. Always returns a tree; diagnostics are in source order.
pub fn parse(source: &str) -> (File, Vec<Diagnostic>) {
    let mut p = Driver::new(source);
    let file = p.file();
    let mut diags = p.diags;
    diags.sort_by_key(|d| d.span.start);
    (file, diags)
}

/// Parses `new` given the parse of `old`, the text before an edit: the items before
/// the edit are kept, the items after it are moved, and only what lies between is
/// parsed again. Equal to `parse(new)` (a test holds it to that on random edits);
/// `None` when the edit needs a whole parse (it touches the header, or adds one).
pub fn reparse(
    old: &str,
    old_file: &File,
    old_diags: &[Diagnostic],
    new: &str,
) -> Option<(File, Vec<Diagnostic>)> {
    reparse_at(old_file, old_diags, new, TextEdit::between(old, new)).map(|(f, d, _)| (f, d))
}

/// Which items of a reparsed file are items of the old one, the same text moved by
/// the edit (doc comments included): the `before` first items, and from `after`
/// on (`(old index, new index)`) the rest. What was derived from such an item alone
/// holds for the new file with its spans moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kept {
    pub before: usize,
    pub after: Option<(usize, usize)>,
}

impl Kept {
    /// The index in the old file of the new file's item `k`, when it is kept.
    pub fn old_index(&self, k: usize) -> Option<usize> {
        if k < self.before {
            return Some(k);
        }
        let (old, new) = self.after?;
        k.checked_sub(new).map(|d| old + d)
    }
}

/// [`reparse`] for a caller that has the edit already ([`TextEdit::between`] of the
/// old text and `new`); also says which items are the old file's ([`Kept`]).
pub fn reparse_at(
    old_file: &File,
    old_diags: &[Diagnostic],
    new: &str,
    edit: TextEdit,
) -> Option<(File, Vec<Diagnostic>, Kept)> {
    use super::shift::Shift;
    let delta = edit.delta();
    let region = Region::parse(old_file, old_diags, new, edit)?;
    let items = &old_file.items;
    let header_broken = match &old_file.header {
        Some(h) => Driver::new(new).header_trailing(h.span.end),
        None => old_file.header_broken,
    };
    let mut file = File {
        header: old_file.header.clone(),
        header_broken,
        items: items[..region.first].to_vec(),
    };
    file.items
        .extend(region.items.into_iter().map(std::sync::Arc::new));
    let mut diags: Vec<Diagnostic> = old_diags
        .iter()
        .filter(|d| d.span.start < region.begin.min(edit.start))
        .cloned()
        .collect();
    diags.extend(region.diags);
    let mut kept = Kept {
        before: region.first,
        after: None,
    };
    if let Some(j) = region.resume {
        kept.after = Some((j, file.items.len()));
        let resume_old = items[j].span.start;
        for it in &items[j..] {
            let mut it = Item::clone(it);
            it.shift(delta);
            file.items.push(std::sync::Arc::new(it));
        }
        // A diagnostic exactly at the resumed item's keyword belongs to the item
        // before it (which ran into that keyword): an item that parsed (resumption
        // is only at those) cannot fail at its start.
        for d in old_diags.iter().filter(|d| d.span.start > resume_old) {
            let mut d = d.clone();
            d.shift(delta);
            diags.push(d);
        }
    }
    diags.sort_by_key(|d| d.span.start);
    Some((file, diags, kept))
}

/// The one item an edit changes: `Some(Some((index, item)))` when reparsing the
/// text the edit touches gives back the old file's items there, all as they were
/// (moved) but the one at `index`, and no syntax error there before or after;
/// `Some(None)` when it gives them all back (the edit was to comments or blank
/// lines). For a caller that works out what the edit changed from that item alone;
/// `None` otherwise.
pub fn reparse_item(
    old_file: &File,
    old_diags: &[Diagnostic],
    new: &str,
    edit: TextEdit,
) -> Option<Option<(usize, Item)>> {
    use super::shift::Shift;
    let region = Region::parse(old_file, old_diags, new, edit)?;
    let items = &old_file.items;
    let end = region.resume.unwrap_or(items.len());
    let old = items.get(region.first..end)?;
    let resume_old = items.get(end).map_or(usize::MAX, |it| it.span.start);
    let diagnosed = old_diags
        .iter()
        .any(|d| (region.begin..=resume_old).contains(&d.span.start));
    if !region.diags.is_empty() || diagnosed || old.len() != region.items.len() {
        return None;
    }
    let mut changed = None;
    for (i, (new_item, old_item)) in region.items.into_iter().zip(old).enumerate() {
        // The item holding the edit's start is unmoved when the edit lies past it
        // (in the trivia it owns); every later one is moved by the edit.
        let same = if new_item.span.end <= edit.start {
            new_item == **old_item
        } else {
            let mut back = new_item.clone();
            back.shift(-edit.delta());
            back == **old_item
        };
        if !same {
            if changed.is_some() {
                return None;
            }
            changed = Some((region.first + i, new_item));
        }
    }
    Some(changed)
}

/// The text an edit touches, parsed again: from the item holding its start until
/// an old item that can be kept (moved) after it.
struct Region {
    /// The first old item not kept before the edit.
    first: usize,
    /// Where parsing began (before the edit: the same offset in both texts).
    begin: usize,
    /// The items parsed, in the new text.
    items: Vec<Item>,
    diags: Vec<Diagnostic>,
    /// The old item from which the rest are kept, moved; `None`: to the end.
    resume: Option<usize>,
}

impl Region {
    fn parse(
        old_file: &File,
        old_diags: &[Diagnostic],
        new: &str,
        edit: TextEdit,
    ) -> Option<Region> {
        let (start, old_end, new_end) = (edit.start, edit.old_end, edit.new_end);
        let delta = edit.delta();
        let header = old_file.header.as_ref()?;
        if start <= header.span.end {
            return None;
        }
        let items = &old_file.items;
        // The item whose text holds the start of the edit: each item owns the text from
        // its start to the next item's (its trailing comments, the next one's doc; a
        // span can end in the whitespace before the next item, so an edit right at an
        // item's start belongs to the one before).
        // Items are in source order: a binary search, not a scan of every item after
        // the edit (each one a pointer to follow).
        let mut first = items
            .partition_point(|it| it.span.start < start)
            .saturating_sub(1);
        // An item cut short by the one after it, which starts right at its last
        // character with no space between, may have been cut there by what its rule
        // saw further on: a `"""` left open reads as `""` and leaves its third quote
        // to the next item, until a later `"""` closes it. Such an item is parsed again
        // with the one the edit is in (and the header, when it is the one, by a full
        // parse). The text before the edit is the old text.
        while items.get(first).is_some_and(|it| {
            let before_end = match first {
                0 => header.span.end,
                k => items[k - 1].span.end,
            };
            let last = it
                .span
                .start
                .checked_sub(1)
                .and_then(|i| new.as_bytes().get(i));
            before_end >= it.span.start && last.is_some_and(|b| !b.is_ascii_whitespace())
        }) {
            if first == 0 {
                return None;
            }
            first -= 1;
        }
        // A broken item that cannot recover inside unbalanced braces looks past the next
        // item for where to resume, so text after the edit can change it.
        if items[..first]
            .iter()
            .any(|it| matches!(it.kind, ItemKind::Broken(_)))
        {
            return None;
        }
        let from = match first {
            0 => header.span.end,
            k => items[k].span.start,
        };
        // Old items that can be kept after the edit: they, and the item before them
        // (whose text holds their doc comment), start after it.
        let resumable = |old_pos: usize| -> Option<usize> {
            let j = items
                .binary_search_by_key(&old_pos, |it| it.span.start)
                .ok()?;
            let whole = !matches!(items[j].kind, ItemKind::Broken(_));
            (j > first && whole && items[j - 1].span.start >= old_end).then_some(j)
        };
        let mut p = Driver::new(new);
        let begin = p.skip_trivia(from);
        // Recovering from a syntax error may look past the next item for where to go on
        // (inside unbalanced braces, up to the end of the file): with one before the
        // edit, what comes after the edit can change the parse before it.
        if old_diags.iter().any(|d| d.span.start < begin) {
            return None;
        }
        let mut reparsed = Vec::new();
        let mut pos = begin;
        let resume = loop {
            if pos >= new.len() {
                break None;
            }
            if pos >= new_end {
                if let Some(j) = resumable(pos.checked_add_signed(-delta)?) {
                    break Some(j);
                }
            }
            if starts_with_word(&new[pos..], "pack") {
                return None;
            }
            pos = p.item_at(pos, &mut reparsed);
        };
        Some(Region {
            first,
            begin,
            items: reparsed,
            diags: p.diags,
            resume,
        })
    }
}

struct Driver<'s> {
    source: &'s str,
    diags: Vec<Diagnostic>,
}

impl<'s> Driver<'s> {
    fn new(source: &'s str) -> Driver<'s> {
        Driver {
            source,
            diags: Vec::new(),
        }
    }

    fn file(&mut self) -> File {
        let mut pos = self.skip_trivia(0);
        let mut header = None;
        // A `pack` header that failed to parse has been reported; it is not also
        // "missing".
        let mut header_attempted = false;
        // Something on the header's line that is not an item (`librar`): the header
        // did not say all it meant to.
        let mut header_trailing = false;
        let mut missing_reported = false;
        let mut items = Vec::new();
        while pos < self.source.len() {
            let rest = &self.source[pos..];
            if starts_with_word(rest, "pack") {
                match self.parse_rule(Rule::header, pos) {
                    Ok((pair, end)) => {
                        let h = self.header(pair);
                        if header.is_some() {
                            self.diags.push(
                                Diagnostic::new(
                                    "E0105",
                                    h.keyword,
                                    "the `pack` header is declared twice",
                                )
                                .with_label("second header")
                                .with_help("a file declares exactly one pack"),
                            );
                        } else {
                            // Items before it were reported as "expected the pack
                            // header" once; that is the mistake, not this header.
                            if !items.is_empty() && !missing_reported {
                                self.diags.push(
                                    Diagnostic::new("E0001", h.keyword, "the `pack` header must be the first item")
                                        .with_label("header after other items")
                                        .with_help("move `pack \"scope/name\" version \"X.Y.Z\"` to the top of the file"),
                                );
                            }
                            header_trailing = self.header_trailing(end);
                            header = Some(h);
                        }
                        pos = self.skip_trivia(end);
                    }
                    Err(error_at) => {
                        header_attempted = true;
                        pos = self.recover(pos, error_at);
                    }
                }
                continue;
            }
            let first = header.is_none() && items.is_empty() && !header_attempted;
            if first {
                let end = token_end(self.source, pos);
                self.diags.push(
                    Diagnostic::new("E0001", Span::new(pos, end), "expected the pack header")
                        .with_label("expected `pack` here")
                        .with_help("a file starts with `pack \"scope/name\" version \"X.Y.Z\"`"),
                );
                missing_reported = true;
            }
            let (start, before) = (pos, self.diags.len());
            pos = self.item_at(pos, &mut items);
            if first {
                // A word that is no item either (`foo` before the header) is the one
                // mistake already reported: not a second E0001 at the same place.
                let item = self.diags.split_off(before);
                self.diags.extend(
                    item.into_iter()
                        .filter(|d| d.code != "E0001" || d.span.start != start),
                );
            }
        }
        File {
            header_broken: header_trailing || (header.is_none() && header_attempted),
            header,
            items: items.into_iter().map(std::sync::Arc::new).collect(),
        }
    }

    /// Parses the item at `pos` (a broken one on a syntax error) and returns where
    /// the next one starts.
    fn item_at(&mut self, pos: usize, items: &mut Vec<Item>) -> usize {
        // Brackets or `not`s nested deeper than pest's recursion should go: the item
        // holding them (the next item starts after them) is reported there and
        // skipped, never handed to pest; the items after it are parsed as usual.
        if let Some(at) = too_deep_in_item(self.source, pos) {
            if self.recover(pos, pos) > at {
                self.diags.push(too_deep(self.source, at));
                if let Some(item) = self.broken_item(pos) {
                    items.push(item);
                }
                return self.skip_trivia(self.recover(pos, at));
            }
        }
        let before = self.diags.len();
        match self.parse_rule(Rule::item, pos) {
            Ok((pair, end)) => {
                let item = self.item(pair);
                // A number the body could not hold (E0001) leaves the item as one whose
                // body failed: its name is declared, the checks that need its body are
                // skipped, so the one mistake is reported once.
                let invalid = self.diags[before..].iter().any(|d| d.code == "E0001");
                let mut item = if invalid { self.broken_item(pos) } else { item };
                let end = item
                    .as_mut()
                    .and_then(|item| self.trailing_comma(item))
                    .unwrap_or(end);
                if let Some(item) = item {
                    items.push(item);
                }
                self.skip_trivia(end)
            }
            Err(error_at) => {
                let end = self.recover(pos, error_at);
                if end < error_at {
                    self.unclosed(pos, end);
                }
                if let Some(mut item) = self.broken_item(pos) {
                    if let ItemKind::Broken(b) = &mut item.kind {
                        if b.kind == BrokenKind::Context {
                            self.salvage_fields(b, pos, end.min(self.source.len()), error_at);
                        } else if end > error_at {
                            self.salvage_body(b.kind, pos, end, error_at);
                        }
                    }
                    items.push(item);
                }
                end
            }
        }
    }

    /// `prohibit a,` followed by the next item: names take any word, so the list runs
    /// on into it (`intent`, then a syntax error at its name). A name that is an item
    /// keyword starting its line ends the list before it instead: the `,` is one
    /// E0001 and the next item is read as an item. Returns where the item now ends.
    fn trailing_comma(&mut self, item: &mut Item) -> Option<usize> {
        let ItemKind::Prohibit(names) = &mut item.kind else {
            return None;
        };
        let src = self.source.as_bytes();
        let k = names.iter().enumerate().skip(1).find_map(|(k, n)| {
            (at_line_start(src, n.span.start) && is_item_keyword(self.source, n.span.start))
                .then_some(k)
        })?;
        let next = names[k].span.start;
        let comma = self.source[..next].rfind(',')?;
        let keyword = &self.source[next..token_end(self.source, next)];
        self.diags.push(
            Diagnostic::new("E0001", Span::new(comma, comma + 1), format!("trailing `,` in `prohibit`: the list ends before `{keyword}`, which starts the next item"))
                .with_label("a name is expected after `,`")
                .with_help("remove the `,` (or name another tool after it)"),
        );
        names.truncate(k);
        let last = names.last()?.span.end;
        item.span = Span::new(item.span.start, last);
        Some(comma + 1)
    }

    /// The E0001 just reported for the item at `pos`, when the item's braces never
    /// close and the next item starts the line of the error (`prompt system` read as
    /// a field `prompt` missing its `:`): said as what it is, an unclosed block.
    fn unclosed(&mut self, pos: usize, next: usize) {
        let Some(d) = self.diags.last_mut().filter(|d| d.code == "E0001") else {
            return;
        };
        let keyword = &self.source[pos..token_end(self.source, pos)];
        let found = Span::new(next, token_end(self.source, next));
        *d = Diagnostic::new(
            "E0001",
            found,
            format!(
                "expected `}}` before `{}`: this `{keyword}` is never closed",
                &self.source[found.start..found.end]
            ),
        )
        .with_label("expected `}` before this item")
        .with_secondary(Span::new(pos, pos + keyword.len()), "opened here")
        .with_help(format!(
            "close the `{keyword}` with `}}` before the next item"
        ));
    }

    /// The field declarations of a broken `context` block (from `pos` to `end`) that
    /// parse on their own, into `b.fields`: each is tried where the previous one
    /// ended, and a line that does not parse is skipped, the path it begins with
    /// recorded in `b.holes`. The first bad line's E0001 (at `error_at`) is already
    /// reported; each later bad line gets its own.
    fn salvage_fields(&mut self, b: &mut Broken, pos: usize, end: usize, error_at: usize) {
        let src = self.source.as_bytes();
        let mut i = self.skip_trivia(token_end(self.source, pos));
        if i >= end || src.get(i) != Some(&b'{') {
            b.unknown_fields = true;
            return;
        }
        i += 1;
        let reported_to = self.source[error_at.min(end)..end]
            .find('\n')
            .map_or(end, |nl| error_at.min(end) + nl);
        loop {
            i = self.skip_trivia(i);
            if i >= end || src.get(i) == Some(&b'}') {
                return;
            }
            let rest = &self.source[i..end];
            if let Ok(Some(pair)) =
                CtxpackParser::parse(Rule::field_decl, rest).map(|mut p| p.next())
            {
                let next = i + pair.as_span().end();
                let before = self.diags.len();
                let field = self.field_decl(i, pair);
                if self.diags[before..].iter().all(|d| d.code != "E0001") {
                    b.fields.push(field);
                }
                i = next;
                continue;
            }
            match CtxpackParser::parse(Rule::field_path, rest).map(|mut p| p.next()) {
                Ok(Some(path)) => b.holes.push(path.as_str().to_owned()),
                _ => b.unknown_fields = true,
            }
            if i > reported_to {
                let _ = self.parse_rule(Rule::field_decl, i);
            }
            match rest.find('\n') {
                Some(nl) => i += nl + 1,
                None => return,
            }
        }
    }

    /// The later mistakes in the body of a broken item (from `pos` to `end`, its first
    /// syntax error at `error_at`, in its body): each field that starts a line after
    /// the error's line, at the top of the body, is parsed on its own, and one that
    /// does not parse gets its own E0001 — a misspelt `risk` does not hide a misspelt
    /// `approval` below it. A line that starts no field of the item is passed over
    /// without a word: it may be what is left of the field the first error broke.
    /// The item stays broken (the checks that need its body are skipped). An error in
    /// the item's head (before its `{`) salvages nothing: the body was never reached.
    fn salvage_body(&mut self, kind: BrokenKind, pos: usize, end: usize, error_at: usize) {
        let fields = body_fields(kind);
        if fields.is_empty() {
            return;
        }
        let src = self.source.as_bytes();
        let end = end.min(src.len());
        let line_end = |at: usize| {
            self.source[at.min(end)..end]
                .find('\n')
                .map_or(end, |nl| at.min(end) + nl)
        };
        // Fields are looked for from here on: after the line of the last error.
        let mut from = line_end(error_at);
        let mut depth = 0i64;
        let mut i = pos;
        while i < end {
            if depth == 1 && i >= from && at_line_start(src, i) {
                let field = fields
                    .iter()
                    .find(|(keyword, _)| starts_with_word(&self.source[i..], keyword));
                if let Some(&(_, rule)) = field {
                    match self.parse_rule(rule, i) {
                        // Its braces, if any, are balanced: the depth is unchanged.
                        Ok((_, field_end)) => {
                            i = field_end;
                            continue;
                        }
                        Err(at) => from = line_end(at.max(i)),
                    }
                }
            }
            let (lexeme, next) = lexeme(src, i, end);
            match lexeme {
                Lexeme::Open(b'{') => {
                    depth += 1;
                    if depth == 1 && i >= error_at {
                        return;
                    }
                }
                Lexeme::Close(b'}') => {
                    depth -= 1;
                    if depth <= 0 {
                        return;
                    }
                }
                _ => {}
            }
            i = next;
        }
    }

    /// Parses `rule` at `pos`. On failure reports E0001 and returns the error offset.
    fn parse_rule(&mut self, rule: Rule, pos: usize) -> Result<(Pair<'s, Rule>, usize), usize> {
        let input = &self.source[pos..];
        match CtxpackParser::parse(rule, input) {
            Ok(mut pairs) => match pairs.next() {
                Some(pair) => {
                    let end = pos + pair.as_span().end();
                    Ok((pair, end))
                }
                None => Err(pos),
            },
            Err(err) => {
                let at = pos
                    + match err.location {
                        pest::error::InputLocation::Pos(p) => p,
                        pest::error::InputLocation::Span((s, _)) => s,
                    };
                let expected = match err.variant {
                    pest::error::ErrorVariant::ParsingError { positives, .. } => positives,
                    pest::error::ErrorVariant::CustomError { .. } => Vec::new(),
                };
                let (furthest, tokens) = expected_tokens(rule, input);
                match furthest {
                    // The detailed attempts got further than pest's summary: report
                    // there, with the tokens expected there.
                    Some(f) if pos + f > at && !tokens.is_empty() => {
                        let at = self.skip_trivia(pos + f);
                        self.syntax_error(at, &[], &tokens);
                        Err(at)
                    }
                    _ => {
                        let punctuation: Vec<String> = tokens
                            .into_iter()
                            .filter(|t| PUNCT.iter().any(|p| t.trim_matches('`') == *p))
                            .collect();
                        self.syntax_error(at, &expected, &punctuation);
                        Err(at)
                    }
                }
            }
        }
    }

    fn syntax_error(&mut self, at: usize, expected: &[Rule], punctuation: &[String]) {
        if self.unterminated_triple(at) {
            return;
        }
        let mut names: Vec<&str> = expected.iter().filter_map(|r| describe(*r)).collect();
        let has_cmp = names.contains(&"a comparison operator");
        names.extend(
            punctuation
                .iter()
                .map(String::as_str)
                .filter(|p| !(has_cmp && (*p == "`<`" || *p == "`>`"))),
        );
        names.sort_unstable();
        names.dedup();
        let found_end = token_end(self.source, at);
        let found = if at >= self.source.len() {
            "end of file".to_owned()
        } else if self.source[at..].starts_with('"') {
            "a string".to_owned()
        } else {
            format!("`{}`", &self.source[at..found_end])
        };
        // `10 %`: the `%` is there, only not where a percentage's digits end.
        if names == ["`%`"] && self.source.get(at..).is_some_and(|r| r.starts_with('%')) {
            self.diags.push(
                Diagnostic::new(
                    "E0001",
                    Span::new(at, at + 1),
                    "no space is allowed before `%`",
                )
                .with_label("write the percentage as one word")
                .with_help("write `10%`, not `10 %`"),
            );
            return;
        }
        let expected_text = match names.len() {
            0 => "valid syntax".to_owned(),
            1 => names[0].to_owned(),
            n => format!("{} or {}", names[..n - 1].join(", "), names[n - 1]),
        };
        let span = if at >= self.source.len() {
            // At the end of the file: just after its last token, on that token's line
            // (not on the empty line a final newline starts).
            let end = self.source.trim_end().len();
            Span::new(end, end)
        } else {
            Span::new(at, found_end)
        };
        if self.source[at.min(self.source.len())..].starts_with(['\n', '\r'])
            && names.iter().any(|n| n.contains("escape"))
        {
            self.diags.push(
                Diagnostic::new("E0001", span, "unterminated string: a `\"...\"` string cannot span lines")
                    .with_label("the line ends inside a string")
                    .with_help("close the string with `\"`, or use `\"\"\"...\"\"\"` for text on several lines"),
            );
            return;
        }
        let rest = &self.source[at.min(self.source.len())..];
        let escape = names.contains(&"`u{`") && at > 0 && self.source[..at].ends_with('\\');
        // The span reported, the token found, the help, and where the token found is
        // when the span is elsewhere.
        let (span, found, help, found_at) = match (mistaken_operator(rest, &names), escape) {
            (Some((token, fix)), _) => (
                Span::new(at, at + token.len()),
                format!("`{token}`"),
                Some(fix.to_owned()),
                None,
            ),
            (None, true) => (
                span,
                found,
                Some(format!(
                    "`\\{}` is not an escape: strings know `\\\"`, `\\\\`, `\\n`, `\\t`, `\\u{{…}}` and `\\{{{{`. Write a backslash as `\\\\`: the regular expression `\\d` is the string `\"\\\\d\"`",
                    rest.chars().next().unwrap_or(' ')
                )),
                None,
            ),
            (None, false) => match self.missing_before_line_break(at, &names) {
                // What is missing belongs at the end of the line before: point there,
                // as rustc does (`pack "a/b"` and then `prompt` on the next line is
                // a header without its version, on line 1), with the token found.
                Some(end) => (Span::new(end, end), found, syntax_help(&names), Some(span)),
                None => {
                    let mut help = syntax_help(&names);
                    // A misspelt item keyword: say which one.
                    let word = &self.source[span.start.min(self.source.len())..span.end.min(self.source.len())];
                    let near = crate::diagnostic::nearest(word, ITEM_KEYWORDS.iter().copied());
                    if let (Some(near), true) = (near, names.iter().any(|n| n.contains("an item"))) {
                        help = help.map(|h| {
                            let (first, rest) = h.split_at(h.chars().next().map_or(0, char::len_utf8));
                            format!("did you mean `{near}`? {}{rest}", first.to_uppercase())
                        });
                    }
                    (span, found, help, None)
                }
            },
        };
        let mut diagnostic = Diagnostic::new(
            "E0001",
            span,
            format!("expected {expected_text}, found {found}"),
        )
        .with_label(format!("expected {expected_text}"))
        .with_help_opt(help);
        if let Some(found_at) = found_at {
            diagnostic = diagnostic.with_secondary(found_at, format!("found {found}"));
        }
        self.diags.push(diagnostic);
    }

    /// Is the token at `at` on a later line than the code before it, and not itself
    /// the mistake? Then what is missing (a value, a keyword, a `{`) ends that code.
    /// Not where the code before is complete: where an item could start (a misspelt
    /// item keyword is the mistake) or a block could close (so could a field or an
    /// effect start: the word found is the mistake); nor when the word found is one
    /// edit away from a keyword expected there. Returns where that code ends.
    fn missing_before_line_break(&self, at: usize, names: &[&str]) -> Option<usize> {
        if at >= self.source.len() || names.iter().any(|n| n.contains("an item") || *n == "`}`") {
            return None;
        }
        let end = previous_code_end(self.source, at);
        if !self.source[end..at].contains('\n') {
            return None;
        }
        let word = &self.source[at..token_end(self.source, at)];
        // Keywords only: any one-letter word is one edit from `>` or `)`.
        let keywords = names
            .iter()
            .filter_map(|n| n.strip_prefix('`')?.strip_suffix('`'))
            .filter(|k| k.starts_with(|c: char| c.is_ascii_alphabetic()));
        crate::diagnostic::nearest(word, keywords)
            .is_none()
            .then_some(end)
    }

    /// A `"""` that never closes reads as `""` (an empty string) followed by a stray
    /// quote, where the parse stops: reported as the unterminated string it is, at its
    /// opening quotes. True when this was the case.
    fn unterminated_triple(&mut self, at: usize) -> bool {
        let src = self.source;
        let opened = at >= 2
            && src[at..].starts_with('"')
            && src[..at].ends_with("\"\"")
            && !src[at + 1..].contains("\"\"\"");
        if opened {
            self.diags.push(
                Diagnostic::new(
                    "E0001",
                    Span::new(at - 2, at + 1),
                    "unterminated string: this `\"\"\"` is never closed",
                )
                .with_label("the text runs to the end of the file")
                .with_help("close the text with `\"\"\"`"),
            );
        }
        opened
    }

    /// After a syntax error at `error_at` in the item that starts at `item_start`:
    /// the offset of the next top-level item keyword at brace depth 0 after the error.
    fn recover(&self, item_start: usize, error_at: usize) -> usize {
        let src = self.source.as_bytes();
        let mut depth: i64 = 0;
        let mut i = item_start;
        let mut fallback: Option<usize> = None;
        // Inside braces that never close, the error can be on the next item's own line
        // (`prompt system` read as a field `prompt` missing its `:`): an item keyword
        // that starts the error's line counts.
        let error_line = self.source[..error_at.min(src.len())]
            .rfind('\n')
            .map_or(0, |nl| nl + 1);
        while i < src.len() {
            if i > item_start
                && (i >= error_at || (depth > 0 && i >= error_line))
                && (at_line_start(src, i)
                    || (depth <= 0 && (i == error_at || after_item_end(src, i))))
                && (is_item_keyword(self.source, i)
                    || (depth <= 0 && is_misspelt_item(self.source, i)))
            {
                if depth <= 0 {
                    return i;
                }
                // An item keyword at the start of a line inside unbalanced braces: the
                // braces may never close, so remember it in case they do not.
                fallback.get_or_insert(i);
            }
            let (lexeme, next) = lexeme(src, i, src.len());
            match lexeme {
                Lexeme::Open(b'{') => depth += 1,
                Lexeme::Close(b'}') => {
                    depth -= 1;
                    // The braces closed after all: a keyword seen inside them was part
                    // of the broken item's body, not the next item.
                    if depth <= 0 {
                        fallback = None;
                    }
                }
                _ => {}
            }
            i = next;
        }
        fallback.unwrap_or(src.len())
    }

    /// What is left of an item whose body failed to parse: its kind (from the
    /// keyword) and, when its head parsed, its name.
    fn broken_item(&mut self, pos: usize) -> Option<Item> {
        let input = &self.source[pos..];
        let keyword_end = token_end(self.source, pos);
        let keyword = Span::new(pos, keyword_end);
        let kind = broken_kind(&self.source[pos..keyword_end]);
        let head = CtxpackParser::parse(Rule::item_head, input)
            .ok()
            .and_then(|mut pairs| pairs.next());
        let fallback = head.as_ref().is_some_and(|h| {
            h.clone()
                .into_inner()
                .any(|p| p.as_rule() == Rule::kw_fallback)
        });
        let name = head
            .and_then(|pair| pair.into_inner().nth(1))
            .map(|p| Ident {
                name: p.as_str().into(),
                span: self.span_at(pos, &p),
            })
            .or_else(|| {
                // A misspelt keyword's head does not parse: the identifier after it on
                // its line is the name of the item it stands for.
                let named = matches!(
                    kind,
                    BrokenKind::Tool
                        | BrokenKind::Intent
                        | BrokenKind::Policy
                        | BrokenKind::Redactor
                        | BrokenKind::Block
                );
                let rest = &self.source[keyword_end..];
                let at = keyword_end + (rest.len() - rest.trim_start_matches([' ', '\t']).len());
                let pair = CtxpackParser::parse(Rule::ident, &self.source[at..])
                    .ok()?
                    .next()?;
                named.then(|| Ident {
                    name: pair.as_str().into(),
                    span: self.span_at(at, &pair),
                })
            })
            // A name that goes on past what an identifier may hold (`get-order`,
            // `lookupOrder`) is not declared cut short: two such would be duplicates
            // (`get`), and a tool called `get` would be taken for it.
            .filter(|n| {
                self.source[n.span.end..]
                    .chars()
                    .next()
                    .is_none_or(|c| c.is_whitespace() || c == '{' || c == '"' || c == '/')
            });
        let declares = match &self.source[pos..keyword_end] {
            "description" => Some(Declares::Description),
            "budget" => Some(Declares::Budget),
            "intent" => Some(Declares::Intent),
            "session" => Some(Declares::Session),
            "prompt" => {
                let rest = self.source[keyword_end..].trim_start_matches([' ', '\t']);
                let role = match &rest[..token_end(rest, 0)] {
                    "system" => Some(Role::System),
                    "developer" => Some(Role::Developer),
                    _ => None,
                };
                Some(Declares::Prompt(role))
            }
            _ => None,
        };
        Some(Item {
            kind: ItemKind::Broken(Broken {
                kind,
                declares,
                name,
                fields: Vec::new(),
                fallback,
                holes: Vec::new(),
                unknown_fields: false,
            }),
            span: Span::new(pos, keyword_end),
            keyword,
            doc: self.doc_above(pos),
        })
    }

    fn span_at(&self, base: usize, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        Span::new(base + s.start(), base + s.end())
    }

    /// Does something that starts no item follow the header (which ends at `end`) on
    /// its line, such as a misspelt `library`?
    fn header_trailing(&self, end: usize) -> bool {
        let pos = self.skip_trivia(end);
        let next = &self.source[pos..];
        pos < self.source.len()
            && !self.source[end..pos].contains('\n')
            && !ITEM_KEYWORDS.iter().any(|k| starts_with_word(next, k))
    }

    fn skip_trivia(&self, mut pos: usize) -> usize {
        let src = self.source.as_bytes();
        loop {
            while pos < src.len() && matches!(src[pos], b' ' | b'\t' | b'\r' | b'\n') {
                pos += 1;
            }
            if self.source[pos..].starts_with('\u{FEFF}') {
                pos += '\u{FEFF}'.len_utf8();
                continue;
            }
            if src.get(pos) == Some(&b'/') && src.get(pos + 1) == Some(&b'/') {
                while pos < src.len() && src[pos] != b'\n' {
                    pos += 1;
                }
                continue;
            }
            return pos;
        }
    }

    /// The `///` lines directly above `offset`, joined with newlines.
    fn doc_above(&self, offset: usize) -> Option<String> {
        doc_above(self.source, offset)
    }

    // -----------------------------------------------------------------------------
    // Building the tree. Pairs come from the item's own parse, so their offsets are
    // relative to the item start; `Ctx` carries that base.
    // -----------------------------------------------------------------------------

    fn header(&mut self, pair: Pair<'s, Rule>) -> Header {
        let base = self.base_of(&pair);
        let span = self.abs(base, &pair);
        let mut keyword = span;
        let mut strings = Vec::new();
        let mut library = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::kw_pack => keyword = self.abs(base, &p),
                Rule::string => strings.push(self.string(base, p)),
                Rule::kw_library => library = Some(self.abs(base, &p)),
                _ => {}
            }
        }
        let mut strings = strings.into_iter();
        let name = strings.next().unwrap_or_else(|| empty_lit(span.end));
        let version = strings.next().unwrap_or_else(|| empty_lit(span.end));
        Header {
            keyword,
            name,
            version,
            library,
            span,
        }
    }

    /// Offsets in a pair are relative to the slice it was parsed from; this recovers
    /// the slice's start from the pair's input pointer.
    fn base_of(&self, pair: &Pair<'s, Rule>) -> usize {
        let input = pair.get_input();
        (input.as_ptr() as usize).saturating_sub(self.source.as_ptr() as usize)
    }

    fn abs(&self, base: usize, pair: &Pair<'_, Rule>) -> Span {
        self.span_at(base, pair)
    }

    fn ident(&self, base: usize, pair: &Pair<'_, Rule>) -> Ident {
        Ident {
            name: pair.as_str().into(),
            span: self.abs(base, pair),
        }
    }

    fn string(&mut self, base: usize, pair: Pair<'s, Rule>) -> StrLit {
        let span = self.abs(base, &pair);
        let triple = pair
            .clone()
            .into_inner()
            .next()
            .is_some_and(|p| p.as_rule() == Rule::triple_string);
        strings::decode(self.source, span, triple, &mut self.diags)
    }

    fn item(&mut self, pair: Pair<'s, Rule>) -> Option<Item> {
        let base = self.base_of(&pair);
        let inner = pair.into_inner().next()?;
        let span = self.abs(base, &inner);
        let doc = self.doc_above(span.start);
        let mut parts = inner.clone().into_inner();
        let keyword = parts.next().map_or(span, |p| self.abs(base, &p));
        let kind = match inner.as_rule() {
            Rule::import_item => {
                let mut name = None;
                let mut version = None;
                for p in parts {
                    if p.as_rule() == Rule::string {
                        let s = self.string(base, p);
                        if name.is_none() {
                            name = Some(s);
                        } else {
                            version = Some(s);
                        }
                    }
                }
                ItemKind::Import(Import {
                    name: name.unwrap_or_else(|| empty_lit(span.end)),
                    version,
                })
            }
            Rule::description_item => {
                let s = parts.find(|p| p.as_rule() == Rule::string)?;
                ItemKind::Description(self.string(base, s))
            }
            Rule::context_item => ItemKind::Context(
                parts
                    .filter(|p| p.as_rule() == Rule::field_decl)
                    .map(|p| self.field_decl(base, p))
                    .collect(),
            ),
            Rule::prompt_item => {
                let role_pair = parts.next()?;
                let role = if role_pair.as_str() == "system" {
                    Role::System
                } else {
                    Role::Developer
                };
                let role_span = self.abs(base, &role_pair);
                let text = self.string(base, parts.next()?);
                ItemKind::Prompt(Prompt {
                    role,
                    role_span,
                    text,
                })
            }
            Rule::budget_item => ItemKind::Budget(self.budget(base, parts)),
            Rule::tool_item => ItemKind::Tool(self.tool(base, parts)?),
            Rule::prohibit_item => ItemKind::Prohibit(self.name_list(base, parts.next()?, "tool")),
            Rule::intent_item => ItemKind::Intent(self.intent(base, parts)?),
            Rule::redactor_item => {
                let name = self.ident(base, &parts.next()?);
                let pattern = parts.find(|p| p.as_rule() == Rule::string)?;
                ItemKind::Redactor(Redactor {
                    name,
                    pattern: self.string(base, pattern),
                })
            }
            Rule::policy_item => ItemKind::Policy(self.policy(base, parts)?),
            Rule::session_item => {
                let directives = parts.next().map_or(span, |p| self.abs(base, &p));
                ItemKind::Session(directives)
            }
            Rule::block_item => {
                let name = self.ident(base, &parts.next()?);
                let mut bucket = None;
                let mut priority = None;
                let mut text = None;
                for p in parts {
                    match p.as_rule() {
                        Rule::ident => bucket = Some(self.ident(base, &p)),
                        Rule::policy_priority => priority = self.priority(base, p),
                        Rule::string => text = Some(self.string(base, p)),
                        _ => {}
                    }
                }
                ItemKind::Block(Block {
                    name,
                    bucket: bucket?,
                    priority,
                    text: text?,
                })
            }
            _ => return None,
        };
        Some(Item {
            kind,
            span,
            keyword,
            doc,
        })
    }

    fn field_decl(&mut self, base: usize, pair: Pair<'s, Rule>) -> FieldDecl {
        let span = self.abs(base, &pair);
        let mut inner = pair.into_inner();
        let path = inner.next().map_or(
            Ident {
                name: "".into(),
                span,
            },
            |p| self.ident(base, &p),
        );
        let ty = inner.next().map_or(
            TypeExpr {
                kind: TypeKind::String,
                optional: false,
                span,
            },
            |p| self.type_expr(base, p),
        );
        FieldDecl {
            doc: self.doc_above(span.start),
            path,
            ty,
        }
    }

    fn type_expr(&mut self, base: usize, pair: Pair<'s, Rule>) -> TypeExpr {
        let span = self.abs(base, &pair);
        let mut kind = TypeKind::String;
        let mut optional = false;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::base_type => kind = self.base_type(base, p),
                Rule::optional_mark => optional = true,
                _ => {}
            }
        }
        TypeExpr {
            kind,
            optional,
            span,
        }
    }

    fn base_type(&mut self, base: usize, pair: Pair<'s, Rule>) -> TypeKind {
        let Some(inner) = pair.into_inner().next() else {
            return TypeKind::String;
        };
        match inner.as_rule() {
            Rule::prim_type => match inner.as_str().trim() {
                "int" => TypeKind::Int,
                "float" => TypeKind::Float,
                "bool" => TypeKind::Bool,
                "timestamp" => TypeKind::Timestamp,
                _ => TypeKind::String,
            },
            Rule::list_type => {
                let item = inner
                    .into_inner()
                    .next()
                    .map_or(TypeKind::String, |p| self.base_type(base, p));
                TypeKind::List(Box::new(item))
            }
            Rule::enum_type => {
                let variants: Vec<StrLit> = inner
                    .into_inner()
                    .filter(|p| p.as_rule() == Rule::string)
                    .map(|p| self.string(base, p))
                    .collect();
                self.repeats(
                    variants.iter().map(|v| (v.value.as_str(), v.span)),
                    "variant",
                    "declared",
                );
                let values = variants.iter().map(|v| v.value.clone()).collect();
                TypeKind::Enum(variants, values)
            }
            _ => TypeKind::String,
        }
    }

    fn int_value(&mut self, base: usize, pair: &Pair<'_, Rule>) -> Option<Spanned<i64>> {
        let span = self.abs(base, pair);
        let digits: String = pair.as_str().chars().filter(|c| *c != '_').collect();
        match digits.parse::<i64>() {
            Ok(value) => Some(Spanned { value, span }),
            Err(_) => {
                self.diags.push(
                    Diagnostic::new(
                        "E0001",
                        span,
                        format!("integer `{}` is out of range", pair.as_str()),
                    )
                    .with_label("too large")
                    .with_help("integers range from -9223372036854775808 to 9223372036854775807"),
                );
                None
            }
        }
    }

    fn percent(&mut self, base: usize, pair: &Pair<'_, Rule>) -> Option<Spanned<u64>> {
        let span = self.abs(base, pair);
        let text: String = pair
            .as_str()
            .trim_end_matches('%')
            .chars()
            .filter(|c| *c != '_')
            .collect();
        let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
        let ppm = if frac.len() > 4 {
            None
        } else {
            let frac_ppm = format!("{frac:0<4}").parse::<u64>().ok();
            whole
                .parse::<u64>()
                .ok()
                .and_then(|w| w.checked_mul(10_000))
                .zip(frac_ppm)
                .and_then(|(w, f)| w.checked_add(f))
        };
        match ppm {
            Some(value) => Some(Spanned { value, span }),
            None => {
                self.diags.push(
                    Diagnostic::new(
                        "E0001",
                        span,
                        format!("percentage `{}` cannot be represented", pair.as_str()),
                    )
                    .with_label("invalid percentage")
                    .with_help("percentages take at most four decimal places, e.g. `12.5%`"),
                );
                None
            }
        }
    }

    fn priority(&mut self, base: usize, pair: Pair<'s, Rule>) -> Option<Spanned<i64>> {
        let int = pair.into_inner().find(|p| p.as_rule() == Rule::int)?;
        self.int_value(base, &int)
    }

    /// Reports a field declared a second time (E0105). The first declaration holds:
    /// callers assign through [`keep_first`], so the duplicate's value is not checked
    /// further (it would only report the same mistake again, e.g. E0402 on a second
    /// `risk`).
    fn duplicate_field(&mut self, seen: bool, keyword: Span, name: &str) {
        if seen {
            self.diags.push(
                Diagnostic::new("E0105", keyword, format!("`{name}` is declared twice"))
                    .with_label("second declaration")
                    .with_help(format!("keep one `{name}`")),
            );
        }
    }

    fn budget(&mut self, base: usize, parts: pest::iterators::Pairs<'s, Rule>) -> Budget {
        let mut budget = Budget {
            total: None,
            tokenizer: None,
            buckets: Vec::new(),
        };
        for p in parts {
            match p.as_rule() {
                Rule::total_entry => {
                    let kw = self.first_span(base, &p);
                    self.duplicate_field(budget.total.is_some(), kw, "total");
                    if let Some(int) = p.into_inner().find(|q| q.as_rule() == Rule::int) {
                        keep_first(&mut budget.total, self.int_value(base, &int));
                    }
                }
                Rule::tokenizer_entry => {
                    let kw = self.first_span(base, &p);
                    self.duplicate_field(budget.tokenizer.is_some(), kw, "tokenizer");
                    if let Some(t) = p.into_inner().find(|q| q.as_rule() == Rule::tokenizer_name) {
                        if let Some(value) = Tokenizer::parse(t.as_str()) {
                            let span = self.abs(base, &t);
                            keep_first(&mut budget.tokenizer, Some(Spanned { value, span }));
                        }
                    }
                }
                Rule::bucket => {
                    let b = self.bucket(base, p);
                    budget.buckets.push(b);
                }
                _ => {}
            }
        }
        budget
    }

    fn first_span(&self, base: usize, pair: &Pair<'_, Rule>) -> Span {
        pair.clone()
            .into_inner()
            .next()
            .map_or_else(|| self.abs(base, pair), |p| self.abs(base, &p))
    }

    fn bucket(&mut self, base: usize, pair: Pair<'s, Rule>) -> BucketDecl {
        let span = self.abs(base, &pair);
        let mut inner = pair.into_inner();
        inner.next(); // `bucket`
        let name = inner.next().map_or(
            Ident {
                name: "".into(),
                span,
            },
            |p| self.ident(base, &p),
        );
        let mut b = BucketDecl {
            name,
            share: None,
            priority: None,
            min: None,
            overflow: None,
            span,
            doc: self.doc_above(span.start),
        };
        for p in inner {
            let kw = self.first_span(base, &p);
            match p.as_rule() {
                Rule::share_field => {
                    self.duplicate_field(b.share.is_some(), kw, "share");
                    if let Some(v) = p.into_inner().find(|q| q.as_rule() == Rule::percent) {
                        keep_first(&mut b.share, self.percent(base, &v));
                    }
                }
                Rule::priority_field => {
                    self.duplicate_field(b.priority.is_some(), kw, "priority");
                    if let Some(v) = p.into_inner().find(|q| q.as_rule() == Rule::int) {
                        keep_first(&mut b.priority, self.int_value(base, &v));
                    }
                }
                Rule::min_field => {
                    self.duplicate_field(b.min.is_some(), kw, "min");
                    if let Some(v) = p.into_inner().find(|q| q.as_rule() == Rule::int) {
                        keep_first(&mut b.min, self.int_value(base, &v));
                    }
                }
                Rule::overflow_field => {
                    self.duplicate_field(b.overflow.is_some(), kw, "overflow");
                    if let Some(v) = p.into_inner().find(|q| q.as_rule() == Rule::overflow_mode) {
                        let value = match v.as_str() {
                            "truncate" => Overflow::Truncate,
                            "error" => Overflow::Error,
                            _ => Overflow::Drop,
                        };
                        let span = self.abs(base, &v);
                        keep_first(&mut b.overflow, Some(Spanned { value, span }));
                    }
                }
                _ => {}
            }
        }
        b
    }

    fn tool(&mut self, base: usize, mut parts: pest::iterators::Pairs<'s, Rule>) -> Option<Tool> {
        let name = self.ident(base, &parts.next()?);
        let mut tool = Tool {
            name,
            description: None,
            kind: None,
            risk: None,
            approval: None,
            input: None,
        };
        for p in parts {
            let kw = self.first_span(base, &p);
            let rule = p.as_rule();
            let mut inner = p.into_inner();
            inner.next(); // the field keyword
            match rule {
                Rule::description_field => {
                    self.duplicate_field(tool.description.is_some(), kw, "description");
                    if let Some(s) = inner.next() {
                        let description = self.string(base, s);
                        keep_first(&mut tool.description, Some(description));
                    }
                }
                Rule::kind_field => {
                    self.duplicate_field(tool.kind.is_some(), kw, "kind");
                    let kind = inner.next().map(|s| self.ident(base, &s));
                    keep_first(&mut tool.kind, kind);
                }
                Rule::risk_field => {
                    self.duplicate_field(tool.risk.is_some(), kw, "risk");
                    let risk = inner.next().map(|s| Spanned {
                        value: match s.as_str() {
                            "medium" => Risk::Medium,
                            "high" => Risk::High,
                            "critical" => Risk::Critical,
                            _ => Risk::Low,
                        },
                        span: self.abs(base, &s),
                    });
                    keep_first(&mut tool.risk, risk);
                }
                Rule::approval_field => {
                    self.duplicate_field(tool.approval.is_some(), kw, "approval");
                    let approval = inner.next().map(|s| Spanned {
                        value: match s.as_str() {
                            "confirm" => Approval::Confirm,
                            "review" => Approval::Review,
                            _ => Approval::Auto,
                        },
                        span: self.abs(base, &s),
                    });
                    keep_first(&mut tool.approval, approval);
                }
                Rule::input_field => {
                    self.duplicate_field(tool.input.is_some(), kw, "input");
                    let decls = inner
                        .filter(|q| q.as_rule() == Rule::input_decl)
                        .map(|q| {
                            let span = self.abs(base, &q);
                            let mut parts = q.into_inner();
                            let name = parts.next().map_or(
                                Ident {
                                    name: "".into(),
                                    span,
                                },
                                |n| self.ident(base, &n),
                            );
                            let ty = parts.next().map_or(
                                TypeExpr {
                                    kind: TypeKind::String,
                                    optional: false,
                                    span,
                                },
                                |t| self.type_expr(base, t),
                            );
                            InputDecl {
                                doc: self.doc_above(span.start),
                                name,
                                ty,
                            }
                        })
                        .collect();
                    keep_first(&mut tool.input, Some(decls));
                }
                _ => {}
            }
        }
        Some(tool)
    }

    /// The names of a list (`tools`, `prohibit`, an effect's tools or redactors); a
    /// name listed twice is E0101.
    fn name_list(&mut self, base: usize, pair: Pair<'_, Rule>, what: &str) -> Vec<Ident> {
        let names: Vec<Ident> = pair
            .into_inner()
            .filter(|p| p.as_rule() == Rule::ident)
            .map(|p| self.ident(base, &p))
            .collect();
        self.repeats(names.iter().map(|n| (&*n.name, n.span)), what, "listed");
        names
    }

    /// Reports E0101 for every entry of a list equal to an earlier one (`what` is
    /// the entry's noun, `how` the verb: "listed", "declared").
    fn repeats<'n>(
        &mut self,
        entries: impl Iterator<Item = (&'n str, Span)>,
        what: &str,
        how: &str,
    ) {
        let mut first: std::collections::HashMap<&str, Span> = std::collections::HashMap::new();
        for (name, span) in entries {
            match first.get(name) {
                Some(&earlier) => self.diags.push(
                    Diagnostic::new("E0101", span, format!("{what} `{name}` is {how} twice"))
                        .with_label(format!("{how} again here"))
                        .with_secondary(earlier, format!("first {how} here"))
                        .with_help(format!("remove the second `{name}`")),
                ),
                None => {
                    first.insert(name, span);
                }
            }
        }
    }

    fn intent(
        &mut self,
        base: usize,
        mut parts: pest::iterators::Pairs<'s, Rule>,
    ) -> Option<Intent> {
        let name = self.ident(base, &parts.next()?);
        let mut intent = Intent {
            name,
            fallback: None,
            description: None,
            safety: None,
            tools: Vec::new(),
            task: None,
            budget: None,
        };
        let mut saw_tools = false;
        for p in parts {
            let kw = self.first_span(base, &p);
            let rule = p.as_rule();
            if rule == Rule::kw_fallback {
                intent.fallback = Some(self.abs(base, &p));
                continue;
            }
            let mut inner = p.into_inner();
            inner.next(); // the field keyword
            match rule {
                Rule::description_field => {
                    self.duplicate_field(intent.description.is_some(), kw, "description");
                    if let Some(s) = inner.next() {
                        let description = self.string(base, s);
                        keep_first(&mut intent.description, Some(description));
                    }
                }
                Rule::safety_field => {
                    self.duplicate_field(intent.safety.is_some(), kw, "safety");
                    let safety = inner.next().map(|s| Spanned {
                        value: match s.as_str() {
                            "supervised" => SafetyMode::Supervised,
                            "reviewed" => SafetyMode::Reviewed,
                            _ => SafetyMode::Autonomous,
                        },
                        span: self.abs(base, &s),
                    });
                    keep_first(&mut intent.safety, safety);
                }
                Rule::tools_field => {
                    self.duplicate_field(saw_tools, kw, "tools");
                    saw_tools = true;
                    if let Some(list) = inner.next() {
                        intent.tools.extend(self.name_list(base, list, "tool"));
                    }
                }
                Rule::task_field => {
                    self.duplicate_field(intent.task.is_some(), kw, "task");
                    if let Some(s) = inner.next() {
                        let task = self.string(base, s);
                        keep_first(&mut intent.task, Some(task));
                    }
                }
                Rule::intent_budget => {
                    self.duplicate_field(intent.budget.is_some(), kw, "budget");
                    let mut overrides = Vec::new();
                    for o in inner.filter(|q| q.as_rule() == Rule::share_override) {
                        let mut op = o.into_inner();
                        let (Some(n), Some(v)) = (op.next(), op.next()) else {
                            continue;
                        };
                        let bucket = self.ident(base, &n);
                        let share = self.percent(base, &v);
                        // The same bucket twice: the first share holds, as for fields.
                        let seen = overrides
                            .iter()
                            .any(|(b, _): &(Ident, _)| b.name == bucket.name);
                        self.duplicate_field(seen, bucket.span, &bucket.name);
                        if let (Some(share), false) = (share, seen) {
                            overrides.push((bucket, share));
                        }
                    }
                    keep_first(
                        &mut intent.budget,
                        Some(IntentBudget {
                            keyword: kw,
                            overrides,
                        }),
                    );
                }
                _ => {}
            }
        }
        Some(intent)
    }

    fn policy(
        &mut self,
        base: usize,
        mut parts: pest::iterators::Pairs<'s, Rule>,
    ) -> Option<Policy> {
        let name = self.ident(base, &parts.next()?);
        let mut priority = None;
        let mut advisory = None;
        let mut when = None;
        let mut effects = Vec::new();
        for p in parts {
            match p.as_rule() {
                Rule::policy_priority => priority = self.priority(base, p),
                Rule::kw_advisory => advisory = Some(self.abs(base, &p)),
                Rule::when_clause => {
                    if let Some(e) = p.into_inner().find(|q| q.as_rule() == Rule::expr) {
                        when = Some(self.expr(base, e));
                    }
                }
                Rule::refuse_effect
                | Rule::escalate_effect
                | Rule::require_effect
                | Rule::deny_effect
                | Rule::redact_effect
                | Rule::instruct_effect => {
                    let rule = p.as_rule();
                    let mut inner = p.into_inner();
                    let Some(kw) = inner.next() else { continue };
                    let keyword = self.abs(base, &kw);
                    let Some(arg) = inner.next() else { continue };
                    let kind = match rule {
                        Rule::refuse_effect => EffectKind::Refuse(self.string(base, arg)),
                        Rule::escalate_effect => EffectKind::Escalate(self.string(base, arg)),
                        Rule::instruct_effect => EffectKind::Instruct(self.string(base, arg)),
                        Rule::require_effect => {
                            EffectKind::RequireApproval(self.name_list(base, arg, "tool"))
                        }
                        Rule::deny_effect => EffectKind::Deny(self.name_list(base, arg, "tool")),
                        _ => EffectKind::Redact(self.name_list(base, arg, "redactor")),
                    };
                    effects.push(Effect { kind, keyword });
                }
                _ => {}
            }
        }
        Some(Policy {
            name,
            priority,
            advisory,
            when: when?,
            effects,
        })
    }

    fn expr(&mut self, base: usize, pair: Pair<'s, Rule>) -> Expr {
        let span = self.abs(base, &pair);
        let rule = pair.as_rule();
        if rule == Rule::string {
            let lit = self.string(base, pair);
            return Expr {
                kind: ExprKind::Str(lit),
                span,
            };
        }
        let mut inner: Vec<Pair<'s, Rule>> = pair.into_inner().collect();
        let kind = match rule {
            Rule::expr => match inner.pop() {
                Some(p) => return self.expr(base, p),
                None => ExprKind::Null,
            },
            Rule::or_expr | Rule::and_expr => {
                let operands: Vec<Expr> = inner
                    .into_iter()
                    .filter(|p| !matches!(p.as_rule(), Rule::or_op | Rule::and_op))
                    .map(|p| self.expr(base, p))
                    .collect();
                if operands.len() == 1 {
                    return operands.into_iter().next().unwrap_or(Expr {
                        kind: ExprKind::Null,
                        span,
                    });
                }
                if rule == Rule::or_expr {
                    ExprKind::Or(operands)
                } else {
                    ExprKind::And(operands)
                }
            }
            Rule::not_expr => {
                if inner.first().is_some_and(|p| p.as_rule() == Rule::not_op) {
                    match inner.pop() {
                        Some(operand) => ExprKind::Not(Box::new(self.expr(base, operand))),
                        None => ExprKind::Null,
                    }
                } else {
                    match inner.pop() {
                        Some(p) => return self.expr(base, p),
                        None => ExprKind::Null,
                    }
                }
            }
            Rule::cmp_expr => {
                if inner.len() == 3 {
                    let rhs = inner.pop().map(|p| self.expr(base, p));
                    let op = inner.pop();
                    let lhs = inner.pop().map(|p| self.expr(base, p));
                    match (lhs, op, rhs) {
                        (Some(lhs), Some(op), Some(rhs)) => {
                            let op_span = self.abs(base, &op);
                            let op = match op.as_str() {
                                "==" => CmpOp::Eq,
                                "!=" => CmpOp::Ne,
                                "<" => CmpOp::Lt,
                                "<=" => CmpOp::Le,
                                ">" => CmpOp::Gt,
                                ">=" => CmpOp::Ge,
                                _ => CmpOp::In,
                            };
                            ExprKind::Cmp {
                                op,
                                op_span,
                                lhs: Box::new(lhs),
                                rhs: Box::new(rhs),
                            }
                        }
                        _ => ExprKind::Null,
                    }
                } else {
                    match inner.pop() {
                        Some(p) => return self.expr(base, p),
                        None => ExprKind::Null,
                    }
                }
            }
            Rule::paren_expr => match inner.pop() {
                Some(p) => ExprKind::Paren(Box::new(self.expr(base, p))),
                None => ExprKind::Null,
            },
            Rule::list_expr => {
                ExprKind::List(inner.into_iter().map(|p| self.expr(base, p)).collect())
            }
            Rule::exists_call => match inner.pop() {
                Some(p) => ExprKind::Exists(p.as_str().to_owned(), self.abs(base, &p)),
                None => ExprKind::Null,
            },
            Rule::json_expr => {
                let (text, at) = inner
                    .pop()
                    .map(|p| (p.as_str().to_owned(), self.abs(base, &p).start))
                    .unwrap_or_default();
                match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(v) => ExprKind::Json(Some(v), super::jsonlex::strings(&text, at)),
                    Err(e) => {
                        self.diags.push(
                            Diagnostic::new("E0205", span, format!("{MALFORMED_JSON}: {e}"))
                                .with_label("not valid JSON")
                                .with_help("write a JSON object, e.g. `json { \"==\": [{ \"var\": \"ctx.a\" }, 1] }`"),
                        );
                        ExprKind::Json(None, Vec::new())
                    }
                }
            }
            Rule::path => ExprKind::Path(span_text(self.source, span).to_owned()),
            Rule::true_lit => ExprKind::Bool(true),
            Rule::false_lit => ExprKind::Bool(false),
            Rule::null_lit => ExprKind::Null,
            Rule::int => match self.int_value_span(span) {
                Some(v) => ExprKind::Int(v),
                None => ExprKind::Invalid,
            },
            Rule::float => self.float_value(span),
            _ => ExprKind::Null,
        };
        let span = ends_with_last_operand(&kind, span);
        Expr { kind, span }
    }

    /// A float literal, or E0001 when it does not fit a 64-bit float (it would lower to
    /// `null` and change what the condition means).
    fn float_value(&mut self, span: Span) -> ExprKind {
        let text: String = span_text(self.source, span)
            .chars()
            .filter(|c| *c != '_')
            .collect();
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => ExprKind::Float(v),
            _ => {
                self.diags.push(
                    Diagnostic::new(
                        "E0001",
                        span,
                        "number out of range: it does not fit a 64-bit float",
                    )
                    .with_label("too large")
                    .with_help("numbers range up to about 1.8e308 in magnitude"),
                );
                ExprKind::Invalid
            }
        }
    }

    fn int_value_span(&mut self, span: Span) -> Option<i64> {
        let text = span_text(self.source, span);
        let digits: String = text.chars().filter(|c| *c != '_').collect();
        match digits.parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.diags.push(
                    Diagnostic::new("E0001", span, format!("integer `{text}` is out of range"))
                        .with_label("too large")
                        .with_help(
                            "integers range from -9223372036854775808 to 9223372036854775807",
                        ),
                );
                None
            }
        }
    }
}

/// pest puts the whitespace (and comments) after a rule's last operand into the span
/// of a rule that ends with a repetition or an option; a compound expression ends
/// where its last operand does.
fn ends_with_last_operand(kind: &ExprKind, span: Span) -> Span {
    let last_end = match kind {
        ExprKind::Or(items) | ExprKind::And(items) => items.last().map(|e| e.span.end),
        ExprKind::Not(operand) => Some(operand.span.end),
        ExprKind::Cmp { rhs, .. } => Some(rhs.span.end),
        _ => None,
    };
    match last_end {
        Some(end) if end > span.start && end < span.end => Span::new(span.start, end),
        _ => span,
    }
}

/// Punctuation is not a rule, so pest's positives cannot name it, and pest's summary
/// position can fall short of where the parse really got stuck. Error paths are rare,
/// so we parse the failing item again with pest's detailed attempt tracking on, and
/// return the furthest position reached and the literal tokens expected there.
///
/// pest's switch for that tracking is one global flag, so the detailed parses of
/// several threads (the language server's, parallel checks) take turns: without the
/// lock one thread could switch it off in the middle of another's parse, which would
/// then name fewer expected tokens.
fn expected_tokens(rule: Rule, input: &str) -> (Option<usize>, Vec<String>) {
    static DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let result = {
        let _turn = DETAIL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pest::set_error_detail(true);
        let result = CtxpackParser::parse(rule, input);
        pest::set_error_detail(false);
        result
    };
    let Err(err) = result else {
        return (None, Vec::new());
    };
    let Some(attempts) = err.parse_attempts() else {
        return (None, Vec::new());
    };
    let mut out: Vec<String> = attempts
        .expected_tokens()
        .into_iter()
        .map(|t| t.to_string())
        // Whitespace, comments and the continuations of words and numbers are
        // expected everywhere and say nothing.
        .filter(|t| !noise(t))
        .map(|t| format!("`{t}`"))
        .collect();
    out.sort();
    out.dedup();
    (Some(attempts.max_position), out)
}

/// Tokens that are expected almost everywhere and say nothing useful: whitespace,
/// comments, character ranges and the continuations of words and numbers.
fn noise(t: &str) -> bool {
    let range = t.len() > 2 && t.contains("..");
    t.trim().is_empty() || range || matches!(t, "BUILTIN_RULE" | "_" | "." | "//" | "\u{feff}")
}

const PUNCT: &[&str] = &["{", "}", "(", ")", "[", "]", ",", ":", "<", ">", "?", "|"];

fn span_text(source: &str, span: Span) -> &str {
    source.get(span.start..span.end).unwrap_or("")
}

fn empty_lit(at: usize) -> StrLit {
    StrLit {
        value: String::new(),
        span: Span::new(at, at),
        offsets: std::sync::Arc::new([0]),
        literal_braces: Vec::new(),
    }
}

/// The `///` lines directly above `offset` (blank lines end the run).
pub fn doc_above(source: &str, offset: usize) -> Option<String> {
    let before = source.get(..offset)?;
    let mut lines: Vec<&str> = Vec::new();
    // Skip the rest of the line the item starts on (it may be indented).
    let mut rest = match before.rfind('\n') {
        Some(nl) => {
            if !before[nl + 1..].trim().is_empty() {
                return None;
            }
            &before[..nl]
        }
        None => return None,
    };
    loop {
        let (prefix, line) = match rest.rfind('\n') {
            Some(nl) => (&rest[..nl], &rest[nl + 1..]),
            None => ("", rest),
        };
        let trimmed = line.trim();
        match trimmed.strip_prefix("///") {
            Some(text) if !text.starts_with('/') => {
                lines.push(text.strip_prefix(' ').unwrap_or(text).trim_end());
            }
            _ => break,
        }
        if prefix.is_empty() && !rest.contains('\n') {
            break;
        }
        rest = prefix;
    }
    if lines.is_empty() {
        return None;
    }
    lines.reverse();
    Some(lines.join("\n"))
}

/// The first place in the item that starts at `from` where brackets or `not`s nest
/// deeper than [`MAX_NESTING`]. The scan ends where the item's first brackets close
/// again, or where a word in the first column starts the next item outside brackets
/// (or at the end of the text), so that a reparse that parses one item scans that
/// item, not the rest of the file, and a file of many items is scanned once.
fn too_deep_in_item(source: &str, from: usize) -> Option<usize> {
    let src = source.as_bytes();
    let mut depth = 0usize;
    let mut nots = 0usize;
    let mut i = from;
    while i < src.len() {
        let (lexeme, next) = lexeme(src, i, src.len());
        match lexeme {
            Lexeme::Open(_) => {
                depth += 1;
                nots = 0;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            Lexeme::Close(_) => {
                depth = depth.saturating_sub(1);
                nots = 0;
                if depth == 0 {
                    return None;
                }
            }
            // Outside brackets, a word in the first column starts the next item: an
            // item without brackets (`block`, `redactor`, `prohibit`) ends the scan
            // there, not at the end of the file.
            Lexeme::Other(b'\n')
                if depth == 0 && src.get(next).is_some_and(u8::is_ascii_lowercase) =>
            {
                return None;
            }
            Lexeme::Word if &src[i..next] == b"not" => {
                nots += 1;
                if nots > MAX_NESTING {
                    return Some(i);
                }
            }
            Lexeme::Comment | Lexeme::Other(b' ' | b'\t' | b'\r' | b'\n') => {}
            Lexeme::Text | Lexeme::Word | Lexeme::Other(_) => nots = 0,
        }
        i = next;
    }
    None
}

/// What a recovery scan meets at an offset (see [`lexeme`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lexeme {
    /// A `"..."` or `"""..."""` string.
    Text,
    /// A `//` comment, to the end of its line.
    Comment,
    /// An identifier or keyword (lowercase ASCII, digits and `_`), whole.
    Word,
    /// `{`, `[` or `(`.
    Open(u8),
    /// `}`, `]` or `)`.
    Close(u8),
    /// Any other byte, alone.
    Other(u8),
}

/// The lexeme at `i` (before `end`) and the offset after it: the one step the scans
/// that recover from a syntax error (`recover`, `salvage_body`, `too_deep_in_item`)
/// share, so that they agree on what is a string, a comment and a whole word, and a
/// keyword is only ever seen at a word's start.
fn lexeme(src: &[u8], i: usize, end: usize) -> (Lexeme, usize) {
    let b = src[i];
    match b {
        b'"' => (Lexeme::Text, skip_string(src, i)),
        b'/' if src.get(i + 1) == Some(&b'/') => {
            let line = src[i..end].iter().position(|&c| c == b'\n');
            (Lexeme::Comment, line.map_or(end, |n| i + n))
        }
        b'{' | b'[' | b'(' => (Lexeme::Open(b), i + 1),
        b'}' | b']' | b')' => (Lexeme::Close(b), i + 1),
        b if b.is_ascii_lowercase() || b == b'_' => {
            let word = src[i..end]
                .iter()
                .position(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'));
            (Lexeme::Word, word.map_or(end, |n| i + n))
        }
        _ => (Lexeme::Other(b), i + 1),
    }
}

fn too_deep(source: &str, at: usize) -> Diagnostic {
    Diagnostic::new(
        "E0001",
        Span::new(at, token_end(source, at)),
        format!("nesting deeper than {MAX_NESTING} levels"),
    )
    .with_label("too deeply nested")
    .with_help("split the expression; no pack needs this much nesting")
}

fn starts_with_word(text: &str, word: &str) -> bool {
    text.starts_with(word)
        && !text[word.len()..]
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The fields an item's body holds at its top level, by keyword, and the rule that
/// reads each (see [`Driver::salvage_body`]); none for items without such a body.
fn body_fields(kind: BrokenKind) -> &'static [(&'static str, Rule)] {
    match kind {
        BrokenKind::Tool => &[
            ("description", Rule::description_field),
            ("kind", Rule::kind_field),
            ("risk", Rule::risk_field),
            ("approval", Rule::approval_field),
            ("input", Rule::input_field),
        ],
        BrokenKind::Intent => &[
            ("description", Rule::description_field),
            ("safety", Rule::safety_field),
            ("tools", Rule::tools_field),
            ("task", Rule::task_field),
            ("budget", Rule::intent_budget),
        ],
        BrokenKind::Policy => &[
            ("when", Rule::when_clause),
            ("refuse", Rule::refuse_effect),
            ("escalate", Rule::escalate_effect),
            ("require_approval", Rule::require_effect),
            ("deny", Rule::deny_effect),
            ("redact", Rule::redact_effect),
            ("instruct", Rule::instruct_effect),
        ],
        BrokenKind::Budget => &[
            ("total", Rule::total_entry),
            ("tokenizer", Rule::tokenizer_entry),
            ("bucket", Rule::bucket),
        ],
        _ => &[],
    }
}

/// The kind of the broken item that starts with `word`: the item its keyword names,
/// or, for a misspelt keyword (`budgt`, `intnet`, `tol`), the item it is one edit
/// from, so that its name is declared and what it would hold is not reported
/// missing (the one mistake is one E0001).
fn broken_kind(word: &str) -> BrokenKind {
    const KINDS: &[(&str, BrokenKind)] = &[
        ("tool", BrokenKind::Tool),
        ("intent", BrokenKind::Intent),
        ("policy", BrokenKind::Policy),
        ("redactor", BrokenKind::Redactor),
        ("block", BrokenKind::Block),
        ("budget", BrokenKind::Budget),
        ("context", BrokenKind::Context),
        ("prompt", BrokenKind::Prompt),
        ("import", BrokenKind::Import),
    ];
    let kind_of = |w: &str| KINDS.iter().find(|(k, _)| *k == w).map(|(_, kind)| *kind);
    kind_of(word)
        .or_else(|| {
            kind_of(crate::diagnostic::nearest(
                word,
                KINDS.iter().map(|(k, _)| *k),
            )?)
        })
        .unwrap_or(BrokenKind::Other)
}

/// The words that start a top-level item (the `pack` header excepted).
pub const ITEM_KEYWORDS: &[&str] = &[
    "import",
    "description",
    "context",
    "prompt",
    "budget",
    "tool",
    "prohibit",
    "intent",
    "redactor",
    "policy",
    "block",
    "session",
];

fn is_item_keyword(source: &str, at: usize) -> bool {
    let Some(text) = source.get(at..) else {
        return false;
    };
    let prev_is_word = at > 0
        && source.as_bytes()[at - 1]
            .to_ascii_lowercase()
            .is_ascii_alphanumeric();
    !prev_is_word
        && (starts_with_word(text, "pack")
            || ITEM_KEYWORDS.iter().any(|k| starts_with_word(text, k)))
}

/// A word close to an item keyword in the first column (`tol lookup {`): after a
/// broken item, the next misspelt one is an item of its own, not more of the first.
/// Only in the first column: an indented `tools lookup` or `bucket b { .. }` is the
/// body of an item whose `{` is missing, not a misspelt `tool` or `budget`.
fn is_misspelt_item(source: &str, at: usize) -> bool {
    let end = token_end(source, at);
    let first_column = at == 0 || source.as_bytes()[at - 1] == b'\n';
    first_column && end > at && broken_kind(&source[at..end]) != BrokenKind::Other
}

/// Whether what comes before `i` on its line ends an item (`}` or a string's closing
/// quote): `tool t { .. } intent i { .. }` on one line. A keyword after anything else
/// (`bucket policy { .. }` in a budget whose `{` is missing) is a name, not an item.
fn after_item_end(src: &[u8], i: usize) -> bool {
    src[..i]
        .iter()
        .rev()
        .find(|b| !matches!(b, b' ' | b'\t'))
        .is_some_and(|b| matches!(b, b'}' | b'"'))
}

fn at_line_start(src: &[u8], i: usize) -> bool {
    src[..i]
        .iter()
        .rev()
        .take_while(|b| **b != b'\n')
        .all(|b| *b == b' ' || *b == b'\t')
}

/// Skips a `"..."` or `"""..."""` string starting at `i`; returns the offset after it
/// (or the end of the line for an unterminated plain string). Shared with the
/// formatter's lexer so both agree on where a string ends.
pub fn skip_string(src: &[u8], i: usize) -> usize {
    if src[i..].starts_with(b"\"\"\"") {
        let mut j = i + 3;
        while j < src.len() {
            if src[j] == b'\\' {
                j += 2;
                continue;
            }
            if src[j..].starts_with(b"\"\"\"") {
                return j + 3;
            }
            j += 1;
        }
        return src.len();
    }
    let mut j = i + 1;
    while j < src.len() {
        match src[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            b'\n' => return j,
            _ => j += 1,
        }
    }
    src.len()
}

/// Where the code before `at` ends: past whitespace, blank lines and `//` comments
/// (at most a thousand lines back; `at` itself if there is no code before it).
fn previous_code_end(source: &str, at: usize) -> usize {
    let mut end = at;
    for _ in 0..1000 {
        let line_start = source[..end].rfind('\n').map_or(0, |nl| nl + 1);
        let code = without_comment(&source[line_start..end]).trim_end();
        if !code.is_empty() {
            return line_start + code.len();
        }
        if line_start == 0 {
            break;
        }
        end = line_start - 1;
    }
    at
}

/// A line without its `//` comment (a `//` inside a string is no comment).
fn without_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = skip_string(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => i += 1,
        }
    }
    line
}

/// The end of the token starting at `at`: a word, a string opener, or one character.
fn token_end(source: &str, at: usize) -> usize {
    let bytes = source.as_bytes();
    if at >= bytes.len() {
        return bytes.len();
    }
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    if is_word(bytes[at]) {
        let mut j = at;
        while j < bytes.len() && (is_word(bytes[j]) || bytes[j] == b'.') {
            j += 1;
        }
        return j;
    }
    // A two-character operator is one token (`==`, not `=`).
    const OPERATORS: [&str; 6] = ["==", "!=", "<=", ">=", "&&", "||"];
    if OPERATORS.iter().any(|op| source[at..].starts_with(op)) {
        return at + 2;
    }
    let mut end = at + 1;
    while !source.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// How a rule is named in "expected ..." messages; `None` for rules that only add
/// noise.
fn describe(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::ident => "an identifier",
        Rule::string | Rule::simple_string | Rule::triple_string => "a string",
        Rule::int => "an integer",
        Rule::float => "a float",
        Rule::percent => "a percentage such as `10%`",
        Rule::field_path => "a field path",
        Rule::path => "a path such as `ctx.user.tier`",
        Rule::type_expr | Rule::base_type | Rule::prim_type => "a type",
        Rule::list_type => "`list<...>`",
        Rule::enum_type => "`enum(...)`",
        Rule::item => "an item",
        Rule::header => "the pack header",
        Rule::prompt_role => "`system` or `developer`",
        Rule::tokenizer_name => "`o200k`, `cl100k` or `approx`",
        Rule::overflow_mode => "`drop`, `truncate` or `error`",
        Rule::risk_level => "`low`, `medium`, `high` or `critical`",
        Rule::approval_mode => "`auto`, `confirm` or `review`",
        Rule::safety_mode => "`autonomous`, `supervised` or `reviewed`",
        Rule::expr
        | Rule::or_expr
        | Rule::and_expr
        | Rule::not_expr
        | Rule::cmp_expr
        | Rule::true_lit
        | Rule::false_lit
        | Rule::null_lit
        | Rule::exists_call
        | Rule::list_expr
        | Rule::paren_expr
        | Rule::json_expr => "an expression",
        Rule::cmp_op => "a comparison operator",
        Rule::and_op => "`and`",
        Rule::or_op => "`or`",
        Rule::not_op => "`not`",
        Rule::escape => "an escape (`\\\"`, `\\\\`, `\\n`, `\\t`, `\\u{...}`, `\\{{`)",
        Rule::json_object => "a JSON object",
        Rule::json_string => "a JSON string",
        Rule::refuse_effect
        | Rule::escalate_effect
        | Rule::require_effect
        | Rule::deny_effect
        | Rule::redact_effect
        | Rule::instruct_effect => "an effect",
        Rule::when_clause => "`when`",
        Rule::kw_import => "`import`",
        Rule::kw_description => "`description`",
        Rule::kw_context => "`context`",
        Rule::kw_prompt => "`prompt`",
        Rule::kw_budget => "`budget`",
        Rule::kw_tool => "`tool`",
        Rule::kw_prohibit => "`prohibit`",
        Rule::kw_intent => "`intent`",
        Rule::kw_redactor => "`redactor`",
        Rule::kw_policy => "`policy`",
        Rule::kw_block => "`block`",
        Rule::kw_pack => "`pack`",
        Rule::kw_version => "`version`",
        Rule::kw_library => "`library`",
        Rule::kw_total => "`total`",
        Rule::kw_tokenizer => "`tokenizer`",
        Rule::kw_bucket => "`bucket`",
        Rule::kw_share => "`share`",
        Rule::kw_priority => "`priority`",
        Rule::kw_min => "`min`",
        Rule::kw_overflow => "`overflow`",
        Rule::kw_kind => "`kind`",
        Rule::kw_risk => "`risk`",
        Rule::kw_approval => "`approval`",
        Rule::kw_input => "`input`",
        Rule::kw_fallback => "`fallback`",
        Rule::kw_safety => "`safety`",
        Rule::kw_tools => "`tools`",
        Rule::kw_task => "`task`",
        Rule::kw_pattern => "`pattern`",
        Rule::kw_advisory => "`advisory`",
        Rule::kw_when => "`when`",
        Rule::kw_in => "`in`",
        Rule::kw_refuse => "`refuse`",
        Rule::kw_escalate => "`escalate`",
        Rule::kw_require_approval => "`require_approval`",
        Rule::kw_deny => "`deny`",
        Rule::kw_redact => "`redact`",
        Rule::kw_instruct => "`instruct`",
        Rule::kw_exists => "`exists`",
        Rule::kw_json => "`json`",
        Rule::share_field => "`share`",
        Rule::priority_field | Rule::policy_priority => "`priority`",
        Rule::min_field => "`min`",
        Rule::overflow_field => "`overflow`",
        Rule::total_entry => "`total`",
        Rule::tokenizer_entry => "`tokenizer`",
        Rule::bucket => "`bucket`",
        Rule::description_field => "`description`",
        Rule::kind_field => "`kind`",
        Rule::risk_field => "`risk`",
        Rule::approval_field => "`approval`",
        Rule::input_field => "`input`",
        Rule::input_decl | Rule::field_decl => "a field declaration `name: type`",
        Rule::safety_field => "`safety`",
        Rule::tools_field => "`tools`",
        Rule::task_field => "`task`",
        Rule::intent_budget => "`budget`",
        Rule::share_override => "a share override such as `evidence 50%`",
        Rule::name_list => "a name",
        Rule::optional_mark => "`?`",
        _ => return None,
    })
}

/// Help for the syntax errors where the expected list alone does not tell the story.
/// An operator from another language where the grammar wanted a comparison or a
/// boolean operator: the token and the fix.
fn mistaken_operator(rest: &str, expected: &[&str]) -> Option<(&'static str, &'static str)> {
    let comparison_expected = expected.contains(&"a comparison operator");
    if rest.starts_with('!') && !rest.starts_with("!=") && expected.contains(&"an expression") {
        Some((
            "!",
            "write `not` instead of `!`: conditions use `and`, `or` and `not`",
        ))
    } else if rest.starts_with("&&") {
        Some((
            "&&",
            "write `and` instead of `&&`: conditions use `and`, `or` and `not`",
        ))
    } else if rest.starts_with("||") {
        Some((
            "||",
            "write `or` instead of `||`: conditions use `and`, `or` and `not`",
        ))
    } else if comparison_expected && rest.starts_with('=') && !rest.starts_with("==") {
        Some((
            "=",
            "did you mean `==`? Conditions compare with `==` and `!=`; `=` assigns nothing here",
        ))
    } else {
        None
    }
}

fn syntax_help(expected: &[&str]) -> Option<String> {
    let has = |s: &str| expected.iter().any(|e| e.contains(s));
    if expected.is_empty() {
        Some("see the language reference for the item's form (`ctxpack explain E0001`)".to_owned())
    } else if has("`approval`") && has("`risk`") {
        Some(
            "a tool's body takes `description`, `kind`, `risk`, `approval` and `input`, then `}`"
                .to_owned(),
        )
    } else if has("`safety`") && has("`task`") {
        Some("an intent's body takes `description`, `safety`, `tools`, `task` and `budget`, then `}`".to_owned())
    } else if has("`refuse`") {
        Some("after `when CONDITION` come the effects: `refuse`, `escalate`, `require_approval`, `deny`, `redact`, `instruct`".to_owned())
    } else if expected == ["`version`"] {
        Some("the header is `pack \"scope/name\" version \"X.Y.Z\"`".to_owned())
    } else if has("an item") {
        Some("items start with `import`, `description`, `context`, `prompt`, `budget`, `tool`, `prohibit`, `intent`, `redactor`, `policy` or `block`".to_owned())
    } else {
        None
    }
}

/// How E0205 begins for `json { ... }` text that is not JSON at all: the formatter
/// treats it as a syntax error (it cannot lay out what is not JSON).
pub const MALFORMED_JSON: &str = "malformed JSON in `json { ... }`";

/// Assigns a field's value unless an earlier declaration already set it.
fn keep_first<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}

#[cfg(test)]
mod tests {
    use super::{too_deep_in_item, MAX_NESTING};

    /// The nesting scan of an item without brackets ends where the next item starts
    /// (a word in the first column), so a file of many such items is scanned once, not
    /// once per item; the next item's own scan still finds what is nested in it.
    #[test]
    fn the_nesting_scan_ends_at_the_next_item() {
        let deep = "(".repeat(MAX_NESTING + 1);
        let text = format!("block a in x \"t\"\npolicy p {{ when {deep}true }}\n");
        assert_eq!(too_deep_in_item(&text, 0), None);
        let next = text.find("policy").unwrap_or(0);
        assert!(too_deep_in_item(&text, next).is_some());
        // Indented lines and brackets opened before a new line go on being scanned.
        let text = format!("policy p\n{{ when\n  {deep}true }}\n");
        assert!(too_deep_in_item(&text, 0).is_some());
    }
}
