//! The one shape every compile-time diagnostic takes, and its renderings: miette's
//! graphical report for people, and the JSON, SARIF and GitHub forms for machines.
//!
//! A diagnostic is plain data (code, severity, message, spans, help) so the checker,
//! the CLI and the language server share it without any of them knowing the others'
//! formats. Codes come from the registry in [`crate::codes`]; a test keeps the two in
//! step.

use std::fmt;

use serde::Serialize;
use serde_json::{json, Value};

pub use crate::codes::Severity;
use crate::span::{LineIndex, Span};

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
        }
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
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
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

/// SARIF 2.1.0, one run, one rule per code that occurs.
pub fn to_sarif(reports: &[FileReport]) -> Value {
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
    let results: Vec<Value> = located
        .iter()
        .map(|l| {
            let mut message = l.message.clone();
            if let Some(help) = &l.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            json!({
                "ruleId": l.code,
                "ruleIndex": codes.iter().position(|c| *c == l.code).unwrap_or(0),
                "level": if l.severity == "error" { "error" } else { "warning" },
                "message": { "text": message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": sarif_uri(&l.file) },
                        "region": {
                            "startLine": l.line,
                            "startColumn": l.column,
                            "endLine": l.end_line,
                            "endColumn": l.end_column,
                        }
                    }
                }],
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "ctxpack",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": "https://example.invalid/ctxpack",
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    })
}

fn sarif_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

fn sarif_uri(path: &str) -> String {
    path.replace('\\', "/")
}

/// GitHub workflow commands, one line per diagnostic, exactly
/// `::error file=..,line=..,col=..::[CODE] message` (`::warning` for warnings).
pub fn to_github(reports: &[FileReport]) -> String {
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
    pub source: &'a miette::NamedSource<String>,
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
pub fn to_human(report: &FileReport, color: bool) -> String {
    let source = miette::NamedSource::new(&report.path, report.source.clone());
    let theme = if color {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme).with_width(100);
    let mut out = String::new();
    for diagnostic in &report.diagnostics {
        let rendered = Rendered {
            diagnostic,
            source: &source,
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
