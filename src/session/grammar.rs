//! The canonical directive grammar: classification of raw input into no directive,
//! directive-shaped but invalid, or exactly one canonical directive.
//!
//! ```text
//! SET_PREMISE    := "set premise" SP VALUE
//! CHANGE_PREMISE := "change premise to" SP VALUE
//! USE_ITEM       := "use" SP ITEM
//! PROHIBIT_ITEM  := "prohibit" SP ITEM
//! REMOVE_POLICY  := "remove policy" SP ITEM
//! REPLACE_USE    := "use" SP NEW " instead of " OLD
//! CLEAR_PREMISE  := "clear premise"
//! RESET_POLICIES := "reset policies"
//! CLEAR_STATE    := "clear state"
//! ```
//!
//! The only normalisation is lexical: ASCII whitespace trimmed at both ends, runs of
//! spaces and tabs between keywords read as one separator, keywords matched with
//! `A`–`Z` case-insensitive. Operand text is kept exactly as written. Everything
//! else (aliases, quotes, punctuation, a second directive) is outside the language.

use std::fmt;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::text::{for_matching, has_content, is_separator, starts_with_token, trim_ascii_space};

/// The directive families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectiveKind {
    SetPremise,
    ChangePremise,
    UseItem,
    ProhibitItem,
    RemovePolicy,
    ReplaceUse,
    ClearPremise,
    ResetPolicies,
    ClearState,
}

impl DirectiveKind {
    /// Every family, in the order the specification lists them.
    pub const ALL: [DirectiveKind; 9] = [
        DirectiveKind::SetPremise,
        DirectiveKind::ChangePremise,
        DirectiveKind::UseItem,
        DirectiveKind::ProhibitItem,
        DirectiveKind::RemovePolicy,
        DirectiveKind::ReplaceUse,
        DirectiveKind::ClearPremise,
        DirectiveKind::ResetPolicies,
        DirectiveKind::ClearState,
    ];

    /// The stable name (`use_item`, `replace_use`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DirectiveKind::SetPremise => "set_premise",
            DirectiveKind::ChangePremise => "change_premise",
            DirectiveKind::UseItem => "use_item",
            DirectiveKind::ProhibitItem => "prohibit_item",
            DirectiveKind::RemovePolicy => "remove_policy",
            DirectiveKind::ReplaceUse => "replace_use",
            DirectiveKind::ClearPremise => "clear_premise",
            DirectiveKind::ResetPolicies => "reset_policies",
            DirectiveKind::ClearState => "clear_state",
        }
    }

    /// The family with this stable name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The names of the family's operands, in order.
    pub fn operand_names(self) -> &'static [&'static str] {
        match self {
            DirectiveKind::SetPremise | DirectiveKind::ChangePremise => &["value"],
            DirectiveKind::UseItem | DirectiveKind::ProhibitItem | DirectiveKind::RemovePolicy => {
                &["item"]
            }
            DirectiveKind::ReplaceUse => &["new_item", "old_item"],
            DirectiveKind::ClearPremise
            | DirectiveKind::ResetPolicies
            | DirectiveKind::ClearState => &[],
        }
    }

    /// The canonical text that begins a directive of this family.
    pub fn canonical_start(self) -> &'static str {
        match self {
            DirectiveKind::SetPremise => "set premise",
            DirectiveKind::ChangePremise => "change premise to",
            DirectiveKind::UseItem | DirectiveKind::ReplaceUse => "use",
            DirectiveKind::ProhibitItem => "prohibit",
            DirectiveKind::RemovePolicy => "remove policy",
            DirectiveKind::ClearPremise => "clear premise",
            DirectiveKind::ResetPolicies => "reset policies",
            DirectiveKind::ClearState => "clear state",
        }
    }
}

impl fmt::Display for DirectiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One canonical directive: its family and its operands, with the operand text
/// exactly as written. Constructed only by [`classify`] or [`CanonicalDirective::new`],
/// so its [`text`](Self::text) always classifies back to itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalDirective {
    kind: DirectiveKind,
    /// In the order of [`DirectiveKind::operand_names`].
    operands: Vec<String>,
}

impl CanonicalDirective {
    /// A directive from its family and named operands, refused unless it is canonical:
    /// exactly the family's operands, each with content, and a rendered text that
    /// classifies back to this same directive.
    pub fn new<'a>(
        kind: DirectiveKind,
        operands: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, DirectiveError> {
        let given: Vec<(&str, &str)> = operands.into_iter().collect();
        let names = kind.operand_names();
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !given.iter().any(|(g, _)| g == n))
            .collect();
        if !missing.is_empty() {
            return Err(DirectiveError(format!(
                "Missing required operands for {kind}: {}",
                missing.join(", ")
            )));
        }
        let mut unexpected: Vec<&str> = given
            .iter()
            .map(|(g, _)| *g)
            .filter(|g| !names.contains(g))
            .collect();
        unexpected.sort_unstable();
        unexpected.dedup();
        if !unexpected.is_empty() {
            return Err(DirectiveError(format!(
                "Unexpected operands for {kind}: {}",
                unexpected.join(", ")
            )));
        }
        let mut values = Vec::with_capacity(names.len());
        for name in names {
            // The last value given under a name wins, as with keyword arguments.
            let value = given
                .iter()
                .rev()
                .find(|(g, _)| g == name)
                .map_or("", |(_, v)| *v);
            if !has_content(value) {
                return Err(DirectiveError(format!(
                    "Operand '{name}' for {kind} cannot be empty."
                )));
            }
            values.push(value.to_owned());
        }
        let directive = CanonicalDirective {
            kind,
            operands: values,
        };
        match classify(&directive.text()) {
            Classification::Directive(parsed) if parsed == directive => Ok(directive),
            _ => Err(DirectiveError(format!(
                "Operands do not produce a canonical {kind} directive."
            ))),
        }
    }

    /// Parses `text` as exactly one canonical directive.
    pub fn parse(text: &str) -> Result<Self, Classification> {
        match classify(text) {
            Classification::Directive(d) => Ok(d),
            other => Err(other),
        }
    }

    pub fn kind(&self) -> DirectiveKind {
        self.kind
    }

    /// The operand called `name`, if the family has one.
    pub fn operand(&self, name: &str) -> Option<&str> {
        let index = self.kind.operand_names().iter().position(|n| *n == name)?;
        self.operands.get(index).map(String::as_str)
    }

    /// The operands with their names, in the family's order.
    pub fn operands(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.kind
            .operand_names()
            .iter()
            .copied()
            .zip(self.operands.iter().map(String::as_str))
    }

    /// The canonical text: lowercase keywords, single spaces, operands as written.
    pub fn text(&self) -> String {
        let op = |i: usize| self.operands.get(i).map_or("", String::as_str);
        match self.kind {
            DirectiveKind::SetPremise => format!("set premise {}", op(0)),
            DirectiveKind::ChangePremise => format!("change premise to {}", op(0)),
            DirectiveKind::UseItem => format!("use {}", op(0)),
            DirectiveKind::ProhibitItem => format!("prohibit {}", op(0)),
            DirectiveKind::RemovePolicy => format!("remove policy {}", op(0)),
            DirectiveKind::ReplaceUse => format!("use {} instead of {}", op(0), op(1)),
            DirectiveKind::ClearPremise => "clear premise".to_owned(),
            DirectiveKind::ResetPolicies => "reset policies".to_owned(),
            DirectiveKind::ClearState => "clear state".to_owned(),
        }
    }

    /// A directive known to be canonical by construction.
    fn parsed(kind: DirectiveKind, operands: &[&str]) -> Self {
        CanonicalDirective {
            kind,
            operands: operands.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl fmt::Display for CanonicalDirective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// `{"kind", "text", "operands"}`.
impl Serialize for CanonicalDirective {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Operands<'a>(&'a CanonicalDirective);
        impl Serialize for Operands<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(self.0.operands.len()))?;
                for (name, value) in self.0.operands() {
                    map.serialize_entry(name, value)?;
                }
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("text", &self.text())?;
        map.serialize_entry("operands", &Operands(self))?;
        map.end()
    }
}

/// Operands that do not make a canonical directive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DirectiveError(String);

/// Why directive-shaped input is not canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectiveSyntaxFailure {
    /// More than one directive attempt in one input.
    CompoundDirective,
    /// A family's required operand is absent or empty.
    MissingRequiredOperand,
    /// Anything else: unexpected or missing keywords, a bad delimiter.
    MalformedDirective,
}

impl DirectiveSyntaxFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            DirectiveSyntaxFailure::CompoundDirective => "compound_directive",
            DirectiveSyntaxFailure::MissingRequiredOperand => "missing_required_operand",
            DirectiveSyntaxFailure::MalformedDirective => "malformed_directive",
        }
    }
}

/// Directive-shaped input that fails the grammar: a grammar failure, never a semantic
/// error, and never a state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct InvalidDirectiveSyntax {
    pub failure: DirectiveSyntaxFailure,
    /// The family attempted, when the input says which.
    pub directive_kind: Option<DirectiveKind>,
    /// The missing operand's name, for `missing_required_operand`.
    pub missing_operand: Option<&'static str>,
}

impl fmt::Display for InvalidDirectiveSyntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.failure, self.directive_kind, self.missing_operand) {
            (DirectiveSyntaxFailure::CompoundDirective, ..) => {
                f.write_str("more than one directive in one input")
            }
            (DirectiveSyntaxFailure::MissingRequiredOperand, Some(kind), Some(name)) => {
                write!(f, "`{kind}` is missing its `{name}` operand")
            }
            (_, Some(kind), _) => write!(f, "not a canonical `{kind}` directive"),
            _ => f.write_str("not a canonical directive"),
        }
    }
}

/// The classification of one raw input.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Classification {
    /// Not a directive: the host handles it (usually by calling the model).
    NoDirective,
    /// Begins like a directive but is not canonical.
    Invalid(InvalidDirectiveSyntax),
    /// Exactly one canonical directive.
    Directive(CanonicalDirective),
}

/// The introducers that make input directive-shaped. `change premise` (without `to`)
/// counts, so that `change premise concise` is a malformed attempt, not chat.
/// The flag says whether an operand must follow (a separator or the end after the
/// keywords); otherwise the next character must not be an ASCII letter.
const FAMILY_STARTS: [(&str, bool); 8] = [
    ("change premise", true),
    ("set premise", true),
    ("remove policy", true),
    ("reset policies", false),
    ("clear premise", false),
    ("clear state", false),
    ("prohibit", true),
    ("use", true),
];

/// The starts of canonical directives, looked for anywhere in an input to find a
/// second directive attempt.
const CANONICAL_STARTS: [(&str, bool); 8] = [
    ("change premise to", true),
    ("set premise", true),
    ("remove policy", true),
    ("reset policies", false),
    ("clear premise", false),
    ("clear state", false),
    ("prohibit", true),
    ("use", true),
];

/// Matches `token` (lowercase ASCII words separated by single spaces) at byte `start`
/// of `text`: letters compare `A`–`Z` case-insensitively, a space in the token matches
/// one or more spaces or tabs. Returns the end of the match.
fn match_token(text: &[u8], start: usize, token: &str, needs_operand: bool) -> Option<usize> {
    let mut i = start;
    for t in token.bytes() {
        let &b = text.get(i)?;
        if t == b' ' {
            if !is_separator(b) {
                return None;
            }
            while text.get(i).is_some_and(|&b| is_separator(b)) {
                i += 1;
            }
        } else if b.to_ascii_lowercase() == t {
            i += 1;
        } else {
            return None;
        }
    }
    match text.get(i) {
        None => Some(i),
        Some(&next) if needs_operand => is_separator(next).then_some(i),
        Some(&next) => (!next.is_ascii_alphabetic()).then_some(i),
    }
}

/// Whether a canonical directive starts at byte `start` (not inside a word).
fn canonical_start_at(text: &[u8], start: usize) -> Option<usize> {
    if start >= text.len() || (start > 0 && text[start - 1].is_ascii_alphabetic()) {
        return None;
    }
    CANONICAL_STARTS
        .iter()
        .find_map(|(token, needs)| match_token(text, start, token, *needs))
}

/// Whether the input starts like a directive and later holds another directive start.
/// Quotes protect nothing: the grammar has no quoting.
fn is_compound(text: &[u8]) -> bool {
    let Some(first_end) = canonical_start_at(text, 0) else {
        return false;
    };
    (first_end..text.len()).any(|i| canonical_start_at(text, i).is_some())
}

fn starts_like_directive(text: &[u8]) -> bool {
    FAMILY_STARTS
        .iter()
        .any(|(token, needs)| match_token(text, 0, token, *needs).is_some())
}

/// The text after `words` and the separator run that follows them, as the operand of
/// `word SP word ... SP OPERAND`; `None` when the words or the separator are absent.
fn operand_after<'a>(text: &'a str, words: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let end = match_token(bytes, 0, words, true)?;
    let mut i = end;
    while bytes.get(i).is_some_and(|&b| is_separator(b)) {
        i += 1;
    }
    // Separators are ASCII, so `i` is a character boundary.
    (i > end).then(|| text.get(i..)).flatten()
}

/// An operand as the grammar's `.+` reads it: non-empty and on one line.
fn one_line(operand: Option<&str>) -> Option<&str> {
    operand.filter(|o| !o.is_empty() && !o.contains('\n'))
}

fn invalid(
    failure: DirectiveSyntaxFailure,
    kind: Option<DirectiveKind>,
    missing: Option<&'static str>,
) -> Classification {
    Classification::Invalid(InvalidDirectiveSyntax {
        failure,
        directive_kind: kind,
        missing_operand: missing,
    })
}

fn missing(kind: DirectiveKind, operand: &'static str) -> Classification {
    invalid(
        DirectiveSyntaxFailure::MissingRequiredOperand,
        Some(kind),
        Some(operand),
    )
}

fn malformed(kind: Option<DirectiveKind>) -> Classification {
    invalid(DirectiveSyntaxFailure::MalformedDirective, kind, None)
}

fn directive(kind: DirectiveKind, operands: &[&str]) -> Classification {
    Classification::Directive(CanonicalDirective::parsed(kind, operands))
}

const DELIMITER: &str = " instead of ";

/// Classifies one raw input. Total and deterministic: every string gets exactly one
/// classification, and the same string always the same one.
pub fn classify(input: &str) -> Classification {
    let text = trim_ascii_space(input);
    let bytes = text.as_bytes();
    if text.is_empty() || !starts_like_directive(bytes) {
        return Classification::NoDirective;
    }
    if is_compound(bytes) {
        return invalid(DirectiveSyntaxFailure::CompoundDirective, None, None);
    }
    let matched = for_matching(text);
    match matched.as_str() {
        "clear premise" => return directive(DirectiveKind::ClearPremise, &[]),
        "reset policies" => return directive(DirectiveKind::ResetPolicies, &[]),
        "clear state" => return directive(DirectiveKind::ClearState, &[]),
        "set premise" => return missing(DirectiveKind::SetPremise, "value"),
        "change premise to" => return missing(DirectiveKind::ChangePremise, "value"),
        _ => {}
    }
    if matched.starts_with("set premise ") {
        return set_premise(text);
    }
    if matched.starts_with("change premise to ") {
        return change_premise(text);
    }
    if let Some(replacement) = replace_use(text, &matched) {
        return replacement;
    }
    if matched == "use" {
        return missing(DirectiveKind::UseItem, "item");
    }
    if matched.starts_with("use ") {
        return use_item(text);
    }
    for (kind, words) in [
        (DirectiveKind::ProhibitItem, "prohibit"),
        (DirectiveKind::RemovePolicy, "remove policy"),
    ] {
        if matched == words {
            return missing(kind, "item");
        }
        if matched
            .strip_prefix(words)
            .is_some_and(|rest| rest.starts_with(' '))
        {
            return match one_line(operand_after(text, words)) {
                Some(item) if has_content(item) => directive(kind, &[item]),
                _ => missing(kind, "item"),
            };
        }
    }
    // `change premise` without `to`, or an operand-less command with extra text.
    malformed(None)
}

fn set_premise(text: &str) -> Classification {
    match one_line(operand_after(text, "set premise")) {
        // `set premise to X` is the near-miss of `change premise to X`, not a premise
        // that happens to begin with "to".
        Some(value) if has_content(value) && !starts_with_token(value, "to") => {
            directive(DirectiveKind::SetPremise, &[value])
        }
        _ => malformed(Some(DirectiveKind::SetPremise)),
    }
}

fn change_premise(text: &str) -> Classification {
    match one_line(operand_after(text, "change premise to")) {
        Some(value) if has_content(value) => directive(DirectiveKind::ChangePremise, &[value]),
        _ => missing(DirectiveKind::ChangePremise, "value"),
    }
}

fn use_item(text: &str) -> Classification {
    let Some(item) = one_line(operand_after(text, "use")).filter(|i| has_content(i)) else {
        return missing(DirectiveKind::UseItem, "item");
    };
    let matched = for_matching(item);
    if matched == "instead of" || matched.starts_with("instead of ") {
        return missing(DirectiveKind::ReplaceUse, "new_item");
    }
    if matched.ends_with(" instead of") {
        return missing(DirectiveKind::ReplaceUse, "old_item");
    }
    if matched.contains(DELIMITER) {
        return malformed(Some(DirectiveKind::UseItem));
    }
    directive(DirectiveKind::UseItem, &[item])
}

/// `use NEW instead of OLD`, split at the first delimiter (separators around
/// `instead` and `of`, keywords ASCII case-insensitive). `None` when the input is
/// not exactly one well-formed replacement; the caller then reads it as `use ITEM`.
fn replace_use(text: &str, matched: &str) -> Option<Classification> {
    if text.contains('\n') {
        return None;
    }
    let rest = operand_after(text, "use")?;
    let bytes = rest.as_bytes();
    let (new_end, old_start) = (1..bytes.len())
        .filter(|&e| is_separator(bytes[e]) && !is_separator(bytes[e - 1]))
        .find_map(|e| delimiter_at(bytes, e).map(|old| (e, old)))?;
    let new_item = rest.get(..new_end)?;
    let old_item = rest.get(old_start..)?;
    let well_formed = has_content(new_item)
        && has_content(old_item)
        && !for_matching(new_item).contains(DELIMITER)
        && !for_matching(old_item).contains(DELIMITER)
        && matched.matches(DELIMITER).count() == 1;
    well_formed.then(|| directive(DirectiveKind::ReplaceUse, &[new_item, old_item]))
}

/// Matches `SP+ "instead" SP+ "of" SP+` at byte `at` followed by at least one byte;
/// returns where the old item starts.
fn delimiter_at(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = match_token(bytes, at, " instead of", true)?;
    while bytes.get(i).is_some_and(|&b| is_separator(b)) {
        i += 1;
    }
    (i < bytes.len()).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> (DirectiveKind, Vec<String>) {
        match classify(text) {
            Classification::Directive(d) => {
                (d.kind(), d.operands().map(|(_, v)| v.to_owned()).collect())
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }

    fn bad(text: &str) -> InvalidDirectiveSyntax {
        match classify(text) {
            Classification::Invalid(i) => i,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn canonical_forms() {
        use DirectiveKind::*;
        assert_eq!(
            ok("set premise short answers"),
            (SetPremise, vec!["short answers".into()])
        );
        assert_eq!(
            ok("Change  Premise\tTO x"),
            (ChangePremise, vec!["x".into()])
        );
        assert_eq!(
            ok(" use  Yarn Berry "),
            (UseItem, vec!["Yarn Berry".into()])
        );
        assert_eq!(
            ok("PROHIBIT shellfish."),
            (ProhibitItem, vec!["shellfish.".into()])
        );
        assert_eq!(ok("remove policy x"), (RemovePolicy, vec!["x".into()]));
        assert_eq!(
            ok("use pnpm   INSTEAD\tof npm"),
            (ReplaceUse, vec!["pnpm".into(), "npm".into()])
        );
        assert_eq!(ok("clear premise").0, ClearPremise);
        assert_eq!(ok("reset\tpolicies").0, ResetPolicies);
        assert_eq!(ok("CLEAR STATE").0, ClearState);
    }

    #[test]
    fn not_directives() {
        for text in [
            "",
            "   ",
            "hello",
            "please use x",
            "\"use x\"",
            "allow x",
            "uſe x",
            "ｕｓｅ x",
            "use\nx",
            "user x",
            "clear premises",
            "set premisex",
        ] {
            assert_eq!(classify(text), Classification::NoDirective, "{text:?}");
        }
    }

    #[test]
    fn directive_shaped_failures() {
        use DirectiveKind::*;
        use DirectiveSyntaxFailure::*;
        let b = bad("use x and prohibit y");
        assert_eq!((b.failure, b.directive_kind), (CompoundDirective, None));
        assert_eq!(bad("use x\nuse y").failure, CompoundDirective);
        assert_eq!(bad("use x-use").failure, CompoundDirective);
        let b = bad("set premise to x");
        assert_eq!(
            (b.failure, b.directive_kind),
            (MalformedDirective, Some(SetPremise))
        );
        let b = bad("use instead of x");
        assert_eq!(
            (b.directive_kind, b.missing_operand),
            (Some(ReplaceUse), Some("new_item"))
        );
        let b = bad("use  instead of x");
        assert_eq!(
            (b.directive_kind, b.missing_operand),
            (Some(ReplaceUse), Some("new_item"))
        );
        let b = bad("use x instead of");
        assert_eq!(
            (b.directive_kind, b.missing_operand),
            (Some(ReplaceUse), Some("old_item"))
        );
        let b = bad("use a instead of b instead of c");
        assert_eq!(
            (b.failure, b.directive_kind),
            (MalformedDirective, Some(UseItem))
        );
        assert_eq!(bad("change premise x").directive_kind, None);
        assert_eq!(bad("clear state now").failure, MalformedDirective);
        assert_eq!(bad("clear premise.").failure, MalformedDirective);
        let b = bad("set premise a\nb");
        assert_eq!(
            (b.failure, b.directive_kind),
            (MalformedDirective, Some(SetPremise))
        );
        let b = bad("change premise to a\nb");
        assert_eq!(b.missing_operand, Some("value"));
        // Whitespace of any kind is not content.
        let b = bad("use \u{3000}");
        assert_eq!(b.missing_operand, Some("item"));
        assert_eq!(bad("set premise \u{a0}").directive_kind, Some(SetPremise));
    }

    #[test]
    fn delimiter_keywords_are_ascii_only() {
        assert_eq!(ok("use a inſtead of b").0, DirectiveKind::UseItem);
        // An occurrence glued to `of` is not the delimiter; the next one is.
        assert_eq!(
            ok("use a instead ofx instead of b").1,
            vec!["a instead ofx".to_owned(), "b".to_owned()]
        );
        // The second `instead of` starts where the first ends: one delimiter.
        assert_eq!(
            ok("use a instead of instead of b").1,
            vec!["a".to_owned(), "instead of b".to_owned()]
        );
    }

    #[test]
    fn operand_text_is_kept() {
        let d = CanonicalDirective::parse("Use    Docker   Engine").unwrap();
        assert_eq!(d.text(), "use Docker   Engine");
        let d = CanonicalDirective::parse("use café ").unwrap();
        assert_eq!(d.operand("item"), Some("café"));
        assert_eq!(d.operand("value"), None);
    }

    #[test]
    fn construction_requires_a_canonical_round_trip() {
        let d = CanonicalDirective::new(
            DirectiveKind::ReplaceUse,
            [("old_item", "npm"), ("new_item", "pnpm")],
        )
        .unwrap();
        assert_eq!(d.text(), "use pnpm instead of npm");
        let err = |kind, ops: &[(&str, &str)]| {
            CanonicalDirective::new(kind, ops.iter().copied())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(DirectiveKind::UseItem, &[("item", "instead of x")]),
            "Operands do not produce a canonical use_item directive."
        );
        assert!(err(DirectiveKind::UseItem, &[("item", " x")]).contains("canonical use_item"));
        assert!(err(DirectiveKind::UseItem, &[("item", "x instead of")]).contains("canonical"));
        assert!(err(DirectiveKind::SetPremise, &[("value", "to x")]).contains("canonical"));
        assert!(err(DirectiveKind::UseItem, &[("item", "a and use b")]).contains("canonical"));
        assert_eq!(
            err(DirectiveKind::UseItem, &[]),
            "Missing required operands for use_item: item"
        );
        assert_eq!(
            err(DirectiveKind::ClearState, &[("x", "y")]),
            "Unexpected operands for clear_state: x"
        );
        assert_eq!(
            err(DirectiveKind::UseItem, &[("item", " ")]),
            "Operand 'item' for use_item cannot be empty."
        );
    }

    #[test]
    fn serializes_as_kind_text_operands() {
        let d = CanonicalDirective::parse("use pnpm instead of npm").unwrap();
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            serde_json::json!({
                "kind": "replace_use",
                "text": "use pnpm instead of npm",
                "operands": {"new_item": "pnpm", "old_item": "npm"}
            })
        );
    }
}
