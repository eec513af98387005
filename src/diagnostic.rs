//! The one shape every compile-time diagnostic takes, and its renderings: miette's
//! graphical report for people, and the JSON, SARIF and GitHub forms for machines.
//!
//! A diagnostic is plain data (code, severity, message, spans, help) so the checker,
//! the CLI and the language server share it without any of them knowing the others'
//! formats. Codes come from the registry in [`crate::codes`]; a test keeps the two in
//! step.

use std::borrow::Cow;
use std::fmt;
use std::path::{Component, Path};

use percent_encoding::{percent_encode, AsciiSet, CONTROLS};
use serde::Serialize;
use serde_json::{json, Value};

pub use crate::codes::Severity;
use crate::span::{LineIndex, Span};

mod clip;

/// A secondary span with its label (e.g. the first definition of a duplicate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// A machine-applicable edit: replace `span` with `replacement` ("did you mean").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    pub span: Span,
    pub replacement: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub severity: Severity,
    /// Lowercase, no final period, user input in backticks.
    pub message: String,
    /// The offending token.
    pub span: Span,
    pub label: String,
    pub help: Option<String>,
    pub labels: Vec<Label>,
    pub suggestion: Option<Suggestion>,
    /// Concrete inputs that show the claim (policy analysis), shaped as a test case's
    /// `request` and `run`; in the JSON output and in SARIF `properties`.
    pub witness: Option<Value>,
}

impl Diagnostic {
    /// A diagnostic with the severity registered for `code`.
    pub fn new(code: &'static str, span: Span, message: impl Into<String>) -> Self {
        let severity = crate::codes::lookup(code).map_or(Severity::Error, |info| info.severity);
        Diagnostic {
            code,
            severity,
            message: message.into(),
            span,
            label: String::new(),
            help: None,
            labels: Vec::new(),
            suggestion: None,
            witness: None,
        }
    }

    /// Attaches a witness (see [`Diagnostic::witness`]).
    pub fn with_witness(mut self, witness: Value) -> Self {
        self.witness = Some(witness);
        self
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_help_opt(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    /// Adds "did you mean `x`?" help and the matching quick fix.
    pub fn with_suggestion(mut self, span: Span, replacement: &str) -> Self {
        self.help = Some(format!("did you mean `{replacement}`?"));
        self.suggestion = Some(Suggestion {
            span,
            replacement: replacement.to_owned(),
        });
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The nearest name to `wanted` among `candidates`, if one is close enough to be a
/// plausible typo.
pub fn nearest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_len = wanted.chars().count();
    let wanted_counts = CharCounts::of(wanted);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        if candidate == wanted {
            continue;
        }
        let candidate_len = candidate.chars().count();
        let limit = (wanted_len.max(candidate_len) / 3).max(1);
        // The edit distance is at least what two cheap bounds say: the difference in
        // length, and half the characters the two do not share (an edit changes at
        // most two counts). A file with thousands of names and of unknown ones is
        // checked in time only if most candidates stop here.
        let reach = best.map_or(limit, |(d, _)| d.min(limit));
        if wanted_len.abs_diff(candidate_len) > reach
            || wanted_counts.distance(candidate).div_ceil(2) > reach
        {
            continue;
        }
        let distance = strsim::damerau_levenshtein(wanted, candidate);
        if distance <= limit && best.is_none_or(|(d, c)| (distance, candidate) < (d, c)) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// How many times each ASCII byte occurs in a text, and how many other characters.
struct CharCounts {
    ascii: [u32; 128],
    other: u32,
}

impl CharCounts {
    fn of(text: &str) -> CharCounts {
        let mut counts = CharCounts {
            ascii: [0; 128],
            other: 0,
        };
        for c in text.chars() {
            match counts.ascii.get_mut(c as usize) {
                Some(n) => *n += 1,
                None => counts.other += 1,
            }
        }
        counts
    }

    /// The sum over characters of the difference of their counts in the two texts
    /// (non-ASCII characters counted as one kind, so it never overstates).
    fn distance(&self, text: &str) -> usize {
        let theirs = CharCounts::of(text);
        let mut total = self.other.abs_diff(theirs.other);
        for (mine, theirs) in self.ascii.iter().zip(theirs.ascii.iter()) {
            total += mine.abs_diff(*theirs);
        }
        total as usize
    }
}

/// One file's text and its diagnostics, ready to render.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The path as given on the command line (relative paths stay relative).
    pub path: String,
    pub source: String,
    pub diagnostics: Vec<Diagnostic>,
}

/// A diagnostic with its line and column resolved, as the machine formats print it.
#[derive(Debug, Clone, Serialize)]
pub struct Located {
    pub code: &'static str,
    pub severity: &'static str,
    pub message: String,
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub help: Option<String>,
    pub labels: Vec<LocatedLabel>,
    /// Only present for diagnostics that carry one (policy analysis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LocatedLabel {
    pub message: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
}

impl FileReport {
    pub fn located(&self) -> Vec<Located> {
        let index = LineIndex::new(&self.source);
        self.diagnostics
            .iter()
            .map(|d| {
                let start = index.line_col(&self.source, d.span.start);
                let end = index.line_col(&self.source, d.span.end);
                let mut labels = Vec::with_capacity(d.labels.len() + 1);
                labels.push(LocatedLabel {
                    message: d.label.clone(),
                    line: start.line,
                    column: start.column,
                    end_line: end.line,
                    end_column: end.column,
                });
                for label in &d.labels {
                    let s = index.line_col(&self.source, label.span.start);
                    let e = index.line_col(&self.source, label.span.end);
                    labels.push(LocatedLabel {
                        message: label.message.clone(),
                        line: s.line,
                        column: s.column,
                        end_line: e.line,
                        end_column: e.column,
                    });
                }
                Located {
                    code: d.code,
                    severity: d.severity.as_str(),
                    message: d.message.clone(),
                    file: self.path.clone(),
                    line: start.line,
                    column: start.column,
                    end_line: end.line,
                    end_column: end.column,
                    help: d.help.clone(),
                    labels,
                    witness: d.witness.clone(),
                }
            })
            .collect()
    }
}

/// Counts of errors and warnings over a set of reports.
pub fn tally(reports: &[FileReport]) -> (usize, usize) {
    let mut errors = 0;
    let mut warnings = 0;
    for d in reports.iter().flat_map(|r| &r.diagnostics) {
        match d.severity {
            Severity::Error => errors += 1,
            Severity::Warning => warnings += 1,
        }
    }
    (errors, warnings)
}

/// `{ "diagnostics": [...], "errors": N, "warnings": N }`.
pub fn to_json(reports: &[FileReport]) -> Value {
    let (errors, warnings) = tally(reports);
    let diagnostics: Vec<Located> = reports.iter().flat_map(FileReport::located).collect();
    json!({ "diagnostics": diagnostics, "errors": errors, "warnings": warnings })
}

/// `{ "diagnostics": [...], "errors": N, "warnings": N }` of the files that were read,
/// with `"unreadable": ["cannot read ...", ...]` added when some input could not be:
/// a document that lists no diagnostics is then not mistaken for a clean check.
pub fn to_json_with(reports: &[FileReport], unreadable: &[String]) -> Value {
    let mut doc = to_json(reports);
    if let (false, Some(map)) = (unreadable.is_empty(), doc.as_object_mut()) {
        map.insert("unreadable".to_owned(), json!(unreadable));
    }
    doc
}

/// SARIF 2.1.0, one run, one rule per code that occurs. Paths in `reports` are taken
/// relative to the current directory, which becomes the `%SRCROOT%` base; see
/// [`to_sarif_in`]. `unreadable` lists the inputs that could not be read.
pub fn to_sarif(reports: &[FileReport], unreadable: &[String]) -> Value {
    to_sarif_in(reports, unreadable, std::env::current_dir().ok().as_deref())
}

/// The `uriBaseId` of artifact URIs relative to the directory the paths were given in.
pub const SARIF_SRCROOT: &str = "%SRCROOT%";

/// SARIF 2.1.0 for `reports`, whose relative paths are relative to `cwd`.
///
/// Every `artifactLocation.uri` is an RFC 3986 URI reference (SARIF §3.4.3), its path
/// segments percent-encoded as UTF-8. A file under `cwd` (given relative or absolute)
/// gets a relative reference with `uriBaseId` `%SRCROOT%`, declared in
/// `run.originalUriBaseIds` as the `file:` URI of `cwd`; any other file gets an
/// absolute `file:` URI. With no `cwd` (or a relative one), relative paths are still
/// relative to `%SRCROOT%` but the base is left undeclared (§3.14.14 allows that).
/// Paths are normalized lexically (`.` dropped, `..` folded), as URI resolution would.
///
/// The run has one invocation: `executionSuccessful` is false when an input could not
/// be read, and each such input is a `toolExecutionNotifications` entry of level
/// `error` (SARIF §3.20.14, §3.20.21), so a log with no results is not taken for a
/// clean run.
pub fn to_sarif_in(reports: &[FileReport], unreadable: &[String], cwd: Option<&Path>) -> Value {
    let base = cwd.filter(|c| c.is_absolute()).map(lexical);
    let located: Vec<Located> = reports.iter().flat_map(FileReport::located).collect();
    let mut codes: Vec<&'static str> = located.iter().map(|l| l.code).collect();
    codes.sort_unstable();
    codes.dedup();
    let rules: Vec<Value> = codes
        .iter()
        .map(|code| {
            let info = crate::codes::lookup(code);
            json!({
                "id": code,
                "shortDescription": { "text": info.map_or("", |i| i.title) },
                "fullDescription": { "text": info.map_or("", |i| i.what) },
                "help": { "text": info.map_or(String::new(), |i| i.page()) },
                "defaultConfiguration": {
                    "level": info.map_or("error", |i| sarif_level(i.severity))
                },
            })
        })
        .collect();
    let mut uses_srcroot = false;
    let results: Vec<Value> = located
        .iter()
        .map(|l| {
            let mut message = l.message.clone();
            if let Some(help) = &l.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            let artifact = artifact_location(&l.file, base.as_deref());
            uses_srcroot |= artifact.base.is_some();
            let mut result = json!({
                "ruleId": l.code,
                "ruleIndex": codes.iter().position(|c| *c == l.code).unwrap_or(0),
                "level": if l.severity == "error" { "error" } else { "warning" },
                "message": { "text": message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": artifact.to_json(),
                        "region": {
                            "startLine": l.line,
                            "startColumn": l.column,
                            "endLine": l.end_line,
                            "endColumn": l.end_column,
                        }
                    }
                }],
            });
            if let (Some(witness), Some(map)) = (&l.witness, result.as_object_mut()) {
                map.insert("properties".to_owned(), json!({ "witness": witness }));
            }
            result
        })
        .collect();
    let mut run = json!({
        "tool": {
            "driver": {
                "name": "ctxpack",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }
        },
        "columnKind": "unicodeCodePoints",
        "invocations": [invocation(unreadable)],
        "results": results,
    });
    if let (true, Some(base), Some(map)) = (uses_srcroot, &base, run.as_object_mut()) {
        map.insert(
            "originalUriBaseIds".to_owned(),
            json!({
                SARIF_SRCROOT: {
                    "uri": directory_uri(base),
                    "description": { "text": "The directory ctxpack ran in." },
                }
            }),
        );
    }
    json!({
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    })
}

fn invocation(unreadable: &[String]) -> Value {
    if unreadable.is_empty() {
        return json!({ "executionSuccessful": true });
    }
    let notifications: Vec<Value> = unreadable
        .iter()
        .map(|message| json!({ "level": "error", "message": { "text": message } }))
        .collect();
    json!({ "executionSuccessful": false, "toolExecutionNotifications": notifications })
}

fn sarif_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// What RFC 3986 does not allow raw in a path segment: everything but `pchar`
/// (unreserved, sub-delims, `:` and `@`). Non-ASCII bytes are always encoded.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// The first segment of a relative reference: a `:` there would read as a scheme
/// delimiter (RFC 3986 §4.2), so it is encoded too.
const FIRST_SEGMENT: &AsciiSet = &SEGMENT.add(b':');

/// A SARIF `artifactLocation`: `uri`, relative to `base` when that is set.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ArtifactUri {
    uri: String,
    base: Option<&'static str>,
}

impl ArtifactUri {
    fn to_json(&self) -> Value {
        match self.base {
            Some(base) => json!({ "uri": self.uri, "uriBaseId": base }),
            None => json!({ "uri": self.uri }),
        }
    }
}

/// The location of `path` (as given on the command line, so relative to `cwd`), where
/// `cwd` is absolute and already [`lexical`].
fn artifact_location(path: &str, cwd: Option<&[Component<'_>]>) -> ArtifactUri {
    let given = Path::new(path);
    let mut parts = Vec::new();
    if let (Some(cwd), false) = (cwd, given.is_absolute()) {
        parts.extend_from_slice(cwd);
    }
    push_lexical(&mut parts, given);
    if let Some(rest) = cwd.and_then(|cwd| parts.strip_prefix(cwd)) {
        if !rest.is_empty() {
            return ArtifactUri {
                uri: relative_uri(rest),
                base: Some(SARIF_SRCROOT),
            };
        }
    }
    if parts.iter().any(|c| matches!(c, Component::RootDir)) {
        ArtifactUri {
            uri: file_uri(&parts),
            base: None,
        }
    } else {
        // Relative with no known cwd (or `C:x` on Windows): still a relative reference.
        ArtifactUri {
            uri: relative_uri(&parts),
            base: Some(SARIF_SRCROOT),
        }
    }
}

/// `path`'s components with `.` dropped and `..` folded into its parent where there is
/// one, as RFC 3986 §5.2.4 removes dot segments.
fn lexical(path: &Path) -> Vec<Component<'_>> {
    let mut parts = Vec::new();
    push_lexical(&mut parts, path);
    parts
}

fn push_lexical<'a>(parts: &mut Vec<Component<'a>>, path: &'a Path) {
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir) => {}
                _ => parts.push(component),
            },
            // A rooted path replaces what it is joined to, keeping a drive prefix
            // (`C:`) on Windows as `Path::join` does.
            Component::RootDir => {
                let prefix = parts
                    .first()
                    .copied()
                    .filter(|p| matches!(p, Component::Prefix(_)));
                parts.clear();
                parts.extend(prefix);
                parts.push(component);
            }
            Component::Prefix(_) => {
                parts.clear();
                parts.push(component);
            }
            Component::Normal(_) => parts.push(component),
        }
    }
}

/// A relative reference from relative components (no root or prefix).
fn relative_uri(parts: &[Component<'_>]) -> String {
    let mut uri = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            uri.push('/');
        }
        let set = if i == 0 { FIRST_SEGMENT } else { SEGMENT };
        push_segment(&mut uri, part, set);
    }
    uri
}

/// `file:` + an absolute path with an empty authority (RFC 8089): `file:///a/b`.
fn file_uri(parts: &[Component<'_>]) -> String {
    let mut uri = String::from("file://");
    for part in parts {
        if *part != Component::RootDir {
            uri.push('/');
            push_segment(&mut uri, part, SEGMENT);
        }
    }
    if uri.len() == "file://".len() {
        uri.push('/');
    }
    uri
}

/// The `file:` URI of a directory, ending with `/` as SARIF §3.14.14 requires.
fn directory_uri(parts: &[Component<'_>]) -> String {
    let mut uri = file_uri(parts);
    if !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

fn push_segment(uri: &mut String, part: &Component<'_>, set: &'static AsciiSet) {
    match part {
        Component::ParentDir => uri.push_str(".."),
        Component::CurDir => uri.push('.'),
        other => {
            let bytes = os_bytes(other.as_os_str());
            uri.extend(percent_encode(&bytes, set));
        }
    }
}

/// A path component's bytes: exact on Unix, where names need not be UTF-8; elsewhere
/// its UTF-8 (lossy) form.
#[cfg(unix)]
fn os_bytes(s: &std::ffi::OsStr) -> Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    Cow::Borrowed(s.as_bytes())
}

#[cfg(not(unix))]
fn os_bytes(s: &std::ffi::OsStr) -> Cow<'_, [u8]> {
    match s.to_string_lossy() {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

/// GitHub workflow commands, one line per diagnostic, exactly
/// `::error file=..,line=..,col=..::[CODE] message` (`::warning` for warnings), then
/// one `::error::message` line per input that could not be read.
pub fn to_github(reports: &[FileReport], unreadable: &[String]) -> String {
    let mut out = String::new();
    for l in reports.iter().flat_map(FileReport::located) {
        out.push_str(&format!(
            "::{} file={},line={},col={}::{}\n",
            l.severity,
            escape_property(&l.file),
            l.line,
            l.column,
            escape_data(&format!("[{}] {}", l.code, l.message))
        ));
    }
    for message in unreadable {
        out.push_str(&format!("::error::{}\n", escape_data(message)));
    }
    out
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// A diagnostic bound to its file, for miette's graphical handler.
pub struct Rendered<'a> {
    pub diagnostic: &'a Diagnostic,
    pub source: &'a dyn miette::SourceCode,
}

/// A file's text for miette's excerpts. miette's own sources report, as an excerpt's
/// `line_count`, the line number where the excerpt ends rather than how many lines it
/// has, so its renderer merges the excerpts of two labels that are far apart into one
/// long one (every line between a duplicate and its first definition). This source
/// reports the excerpt's own number of lines: labels far apart get an excerpt each.
///
/// An excerpt is read from the line where it starts, found in a line index, rather than
/// from the start of the text as miette's own sources do: a report of many
/// diagnostics on a long file costs each one its excerpt, not the whole file.
pub struct Excerpts {
    name: String,
    text: String,
    lines: LineIndex,
}

impl Excerpts {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        Excerpts {
            name: name.into(),
            lines: LineIndex::new(&text),
            text,
        }
    }

    /// The text and its line index, for a view of long lines ([`clip`]).
    fn lines(&self) -> clip::Lines<'_> {
        clip::Lines::new(&self.text, &self.lines)
    }
}

impl miette::SourceCode for Excerpts {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        // From a line start before the excerpt's first line: miette reads the text
        // from where it is given, up to the excerpt.
        let start = span.offset().min(self.text.len());
        let first = self
            .lines
            .line_of(start)
            .saturating_sub(context_lines_before + 1);
        let base = self.lines.line_start(first).min(start);
        let rest = self.text.get(base..).unwrap_or_default();
        let local = miette::SourceSpan::new((start - base).into(), span.len());
        let inner = rest.read_span(&local, context_lines_before, context_lines_after)?;
        let at = miette::SourceSpan::new((inner.span().offset() + base).into(), inner.span().len());
        // miette counts a span's column in bytes; the header (`file:line:col`) is
        // read with no context lines, and says it in Unicode scalar values, as the
        // machine formats do.
        let column = match context_lines_before {
            0 => self.lines.line_col(&self.text, start).column - 1,
            _ => inner.column(),
        };
        Ok(excerpt(
            self.name.clone(),
            inner.data(),
            at,
            first + inner.line(),
            column,
        ))
    }
}

/// An excerpt as miette renders it, `line_count` being the excerpt's own number of
/// lines (see [`Excerpts`]).
fn excerpt<'a>(
    name: String,
    data: &'a [u8],
    span: miette::SourceSpan,
    line: usize,
    column: usize,
) -> Box<dyn miette::SpanContents<'a> + 'a> {
    let lines = data.iter().filter(|&&b| b == b'\n').count() + usize::from(!data.ends_with(b"\n"));
    Box::new(miette::MietteSpanContents::new_named(
        name,
        data,
        span,
        line,
        column,
        lines.saturating_sub(1),
    ))
}

impl fmt::Debug for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rendered")
            .field("diagnostic", self.diagnostic)
            .finish()
    }
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

impl std::error::Error for Rendered<'_> {}

impl miette::Diagnostic for Rendered<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diagnostic
            .help
            .as_ref()
            .map(|h| Box::new(h.as_str()) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let primary = miette::LabeledSpan::new_primary_with_span(
            (!self.diagnostic.label.is_empty()).then(|| self.diagnostic.label.clone()),
            self.diagnostic.span,
        );
        let secondary = self
            .diagnostic
            .labels
            .iter()
            .map(|l| miette::LabeledSpan::new_with_span(Some(l.message.clone()), l.span));
        Some(Box::new(std::iter::once(primary).chain(secondary)))
    }
}

/// miette's graphical rendering of every diagnostic in `report`, with or without color.
/// The most secondary labels the human report draws for one diagnostic.
const MAX_HUMAN_LABELS: usize = 16;

/// The diagnostic as the human report draws it: past [`MAX_HUMAN_LABELS`] secondary
/// labels (an E0501 over 20,000 buckets labels each one), the first ones and a help
/// line that counts the rest. A drawing of thousands of labels is unreadable, and
/// miette lays them out in quadratic time; the machine formats keep them all.
fn few_labels(diagnostic: &Diagnostic) -> std::borrow::Cow<'_, Diagnostic> {
    let hidden = diagnostic.labels.len().saturating_sub(MAX_HUMAN_LABELS);
    if hidden == 0 {
        return std::borrow::Cow::Borrowed(diagnostic);
    }
    let mut shown = diagnostic.clone();
    shown.labels.truncate(MAX_HUMAN_LABELS);
    let note = format!(
        "{hidden} more {} not shown here (`--format json` lists every one)",
        if hidden == 1 {
            "label is"
        } else {
            "labels are"
        }
    );
    shown.help = Some(match shown.help.take() {
        Some(help) => format!("{help}\n{note}"),
        None => note,
    });
    std::borrow::Cow::Owned(shown)
}

pub fn to_human(report: &FileReport, color: bool) -> String {
    let source = Excerpts::new(&report.path, report.source.clone());
    let theme = if color {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme).with_width(100);
    let lines = source.lines();
    let mut out = String::new();
    for diagnostic in &report.diagnostics {
        let diagnostic = &*few_labels(diagnostic);
        // A diagnostic on a very long line is shown from a window of it.
        let clipped = clip::View::of(&report.path, &lines, diagnostic);
        let rendered = match &clipped {
            Some((view, moved)) => Rendered {
                diagnostic: moved,
                source: view,
            },
            None => Rendered {
                diagnostic,
                source: &source,
            },
        };
        if handler.render_report(&mut out, &rendered).is_err() {
            out.push_str(&format!(
                "{}[{}]: {}\n",
                diagnostic.severity, diagnostic.code, diagnostic.message
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod human_tests {
    use super::{to_human, Diagnostic, FileReport, Label, MAX_HUMAN_LABELS};
    use crate::span::Span;

    fn report(labels: usize) -> String {
        let source: String = (0..labels).map(|i| format!("b{i}\n")).collect();
        let mut d = Diagnostic::new("E0501", Span::new(0, 2), "m").with_help("fix it");
        let mut at = 0;
        for i in 0..labels {
            let len = format!("b{i}").len();
            d.labels.push(Label {
                span: Span::new(at, at + len),
                message: format!("label {i}"),
            });
            at += len + 1;
        }
        to_human(
            &FileReport {
                path: "t".into(),
                source,
                diagnostics: vec![d],
            },
            false,
        )
    }

    #[test]
    fn labels_past_the_limit_are_counted_not_drawn() {
        let all = report(MAX_HUMAN_LABELS);
        assert!(
            all.contains(&format!("label {}", MAX_HUMAN_LABELS - 1)),
            "{all}"
        );
        assert!(!all.contains("not shown"), "{all}");
        let one_more = report(MAX_HUMAN_LABELS + 1);
        assert!(
            !one_more.contains(&format!("label {MAX_HUMAN_LABELS}")),
            "{one_more}"
        );
        assert!(one_more.contains("fix it"), "{one_more}");
        assert!(
            one_more.contains("1 more label is not shown here"),
            "{one_more}"
        );
        // 20,000 labels: drawn in well under a second (miette's layout of all of
        // them took minutes).
        let started = std::time::Instant::now();
        let many = report(20_000);
        assert!(
            many.contains("19984 more labels are not shown here"),
            "{many}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}

#[cfg(test)]
mod sarif_uri_tests {
    use std::path::Path;

    use super::{artifact_location, directory_uri, lexical, ArtifactUri, SARIF_SRCROOT};

    fn at(path: &str, cwd: Option<&str>) -> ArtifactUri {
        let cwd = cwd.map(Path::new);
        let base = cwd.map(lexical);
        artifact_location(path, base.as_deref())
    }

    fn relative(uri: &str) -> ArtifactUri {
        ArtifactUri {
            uri: uri.to_owned(),
            base: Some(SARIF_SRCROOT),
        }
    }

    fn absolute(uri: &str) -> ArtifactUri {
        ArtifactUri {
            uri: uri.to_owned(),
            base: None,
        }
    }

    #[test]
    fn relative_paths_are_encoded_segment_by_segment() {
        let cwd = Some("/w");
        assert_eq!(
            at("sub/my file.ctxpack", cwd),
            relative("sub/my%20file.ctxpack")
        );
        assert_eq!(
            at("sub/we,ird:100%.ctxpack", cwd),
            relative("sub/we,ird:100%25.ctxpack")
        );
        assert_eq!(at("a:b/c:d.ctxpack", cwd), relative("a%3Ab/c:d.ctxpack"));
        assert_eq!(at("./x#?.ctxpack", cwd), relative("x%23%3F.ctxpack"));
        assert_eq!(at("café.ctxpack", cwd), relative("caf%C3%A9.ctxpack"));
        assert_eq!(at("a\\b.ctxpack", cwd), relative("a%5Cb.ctxpack"));
        assert_eq!(at("sub//./x/../y", cwd), relative("sub/y"));
    }

    #[test]
    fn absolute_paths_are_relative_under_cwd_and_file_uris_elsewhere() {
        let cwd = Some("/w d");
        assert_eq!(at("/w d/s/a b", cwd), relative("s/a%20b"));
        assert_eq!(at("/w d/../w d/a:b", cwd), relative("a%3Ab"));
        assert_eq!(at("/w dx/a", cwd), absolute("file:///w%20dx/a"));
        assert_eq!(
            at("/elsewhere/a:b%", cwd),
            absolute("file:///elsewhere/a:b%25")
        );
        assert_eq!(at("../up/a", cwd), absolute("file:///up/a"));
        assert_eq!(at("../../../a", cwd), absolute("file:///a"));
        assert_eq!(at("/a b", None), absolute("file:///a%20b"));
    }

    #[test]
    fn without_a_cwd_relative_paths_stay_relative() {
        assert_eq!(at("x/../../a:b", None), relative("../a:b"));
        assert_eq!(at("a:b", None), relative("a%3Ab"));
    }

    #[test]
    fn directory_uris_end_with_a_slash() {
        assert_eq!(directory_uri(&lexical(Path::new("/"))), "file:///");
        assert_eq!(
            directory_uri(&lexical(Path::new("/tmp/wörk dir/"))),
            "file:///tmp/w%C3%B6rk%20dir/"
        );
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// `nearest` without its bounds: every candidate's distance computed.
    fn nearest_by_distance<'a>(wanted: &str, candidates: &[&'a str]) -> Option<&'a str> {
        let mut best: Option<(usize, &str)> = None;
        for &candidate in candidates {
            if candidate == wanted {
                continue;
            }
            let distance = strsim::damerau_levenshtein(wanted, candidate);
            let limit = (wanted.chars().count().max(candidate.chars().count()) / 3).max(1);
            if distance <= limit && best.is_none_or(|(d, c)| (distance, candidate) < (d, c)) {
                best = Some((distance, candidate));
            }
        }
        best.map(|(_, c)| c)
    }

    proptest! {
        /// The bounds only skip candidates that could not win.
        #[test]
        fn the_bounds_change_no_answer(
            wanted in "[a-dé_]{0,9}",
            candidates in proptest::collection::vec("[a-dü_]{0,9}", 0..12),
        ) {
            let candidates: Vec<&str> = candidates.iter().map(String::as_str).collect();
            prop_assert_eq!(
                super::nearest(&wanted, candidates.iter().copied()),
                nearest_by_distance(&wanted, &candidates)
            );
        }
    }

    #[test]
    fn typos_find_their_name() {
        let names = ["lookup_order", "issue_refund", "close_account", "t_1997"];
        assert_eq!(super::nearest("lookup_ordr", names), Some("lookup_order"));
        assert_eq!(super::nearest("isue_refund", names), Some("issue_refund"));
        assert_eq!(super::nearest("refund", names), None);
    }
}
