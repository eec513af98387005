//! The language server: document state, analysis off the message loop, and thin
//! protocol handlers.
//!
//! Every handler converts positions, calls one query of [`ctxpack::ide::Analysis`]
//! and converts the answer back. Edits are applied to a document's text (and its
//! line index) at once; analysing it runs on a blocking thread, one analysis per
//! document at a time. When an analysis ends and the text has changed meanwhile, its
//! result is kept for queries but not published, and the newest text is analysed
//! next: after a burst of edits only the last version's diagnostics go out, and never
//! after a newer one's. An edit that changes one item alone gets its diagnostics
//! from that item ([`Analysis::quick_diagnostics`]) before any full analysis, and the
//! full analysis then waits for the edits to pause (see [`Inner::settle`]).
//! Queries answer about the text the client has sent: when a check of an older text
//! is running, they wait for the check of the current one (queries about other
//! documents do not wait). A client that edits and then asks gets an answer about
//! its edit.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use ctxpack::diagnostic::{Diagnostic, Severity};
use ctxpack::ide::{Analysis, CompletionKind, OutlineKind, OutlineSymbol};
use serde_json::{json, Value};
use tokio::sync::{Mutex, Notify};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{self as lsp, *};
use tower_lsp_server::{Client, LanguageServer};

use crate::buffer::Buffer;
use crate::convert::{Encoding, Text};
use crate::workspace::Workspace;

/// The command that returns a diagnostic code's `explain` page (Markdown).
pub const EXPLAIN_COMMAND: &str = "ctxpack.explain";

/// The code action kind of "Explain E0401" actions.
const EXPLAIN_KIND: &str = "quickfix.explain";

/// Whether the client asked the server to shut down: the process exits 0 after
/// `exit` if it did, 1 if not, as the protocol asks.
pub static SHUT_DOWN: AtomicBool = AtomicBool::new(false);

pub struct Backend {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    encoding: OnceLock<Encoding>,
    /// The client lists hover formats and Markdown is not among them: hovers are
    /// sent as plain text (the same text, which reads as such).
    plain_hover: OnceLock<bool>,
    workspace: RwLock<Workspace>,
    documents: Mutex<HashMap<Uri, Doc>>,
    /// Wakes the queries waiting for an analysis, each time one is stored.
    analyzed: Notify,
}

/// How long the edits to a document must pause, while quick diagnostics cover them,
/// before it is analysed in full (see [`Inner::settle`]).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// An open document.
struct Doc {
    /// The current text and its version.
    buffer: Buffer,
    version: i32,
    /// The latest finished analysis, and the version it is of.
    analysis: Arc<Analysis>,
    analyzed: Option<i32>,
    /// An analysis task runs for this document.
    running: bool,
    /// The text changed since the running analysis took it.
    dirty: bool,
    /// Raised when the text changes under the running analysis: it stops at its
    /// next phase instead of finishing a check nobody will see.
    stale: Arc<AtomicBool>,
    /// The version whose diagnostics went out ahead of its analysis
    /// ([`Analysis::quick_diagnostics`]), and what they were: its analysis publishes
    /// them again only if it found otherwise.
    quick: Option<(i32, Vec<Diagnostic>)>,
    /// A query waits for this document's analysis: it goes ahead without settling.
    wanted: bool,
    /// Wakes its analysis while it settles (see [`Inner::settle`]): the document
    /// changed, or a query waits.
    wake: Arc<Notify>,
    /// Bumped when what imports resolve against changes (registry, lockfile,
    /// settings); `analysis` resolved them at `resolved`. Quick diagnostics take
    /// imports as the analysis resolved them, so they wait for one that is current.
    imports_epoch: u64,
    resolved: u64,
    /// Which opening of its URI this is (unique in the process): an analysis task
    /// serves one opening, and a document closed and opened again under the same URI
    /// while it ran is another's to check.
    opened: u64,
}

/// The next [`Doc::opened`].
static OPENINGS: AtomicU64 = AtomicU64::new(0);

/// The document `uri` if it is still the opening `opened`.
fn opening<'d>(docs: &'d mut HashMap<Uri, Doc>, uri: &Uri, opened: u64) -> Option<&'d mut Doc> {
    docs.get_mut(uri).filter(|doc| doc.opened == opened)
}

impl Backend {
    pub fn new(client: Client, registry: Option<PathBuf>) -> Self {
        Backend {
            inner: Arc::new(Inner {
                client,
                encoding: OnceLock::new(),
                plain_hover: OnceLock::new(),
                workspace: RwLock::new(Workspace {
                    registry,
                    ..Workspace::default()
                }),
                documents: Mutex::new(HashMap::new()),
                analyzed: Notify::new(),
            }),
        }
    }
}

impl Inner {
    fn encoding(&self) -> Encoding {
        self.encoding.get().copied().unwrap_or_default()
    }

    fn text<'a>(&self, a: &'a Analysis) -> Text<'a> {
        Text {
            text: a.text(),
            lines: a.line_index(),
            encoding: self.encoding(),
        }
    }

    fn workspace(&self) -> Workspace {
        self.workspace.read().map(|w| w.clone()).unwrap_or_default()
    }

    /// Checks a document's text, resolving imports as `ctxpack check` does from the
    /// document's root (see [`Workspace`]). A bug in the checker must not take the
    /// server down: the document then has no diagnostics until the next edit.
    fn analyze(workspace: &Workspace, uri: &Uri, text: String) -> Analysis {
        Self::with_source(workspace, uri, |source, lock| {
            guard(|| Analysis::with_imports(text.clone(), source, lock))
                .unwrap_or_else(|| Analysis::unchecked(text))
        })
    }

    /// [`Inner::analyze`] from `previous`, an analysis of an earlier text: only the
    /// items the edit touches are parsed again. `None` when `stale` is raised first.
    fn reanalyze_edit(
        workspace: &Workspace,
        uri: &Uri,
        text: String,
        previous: &Analysis,
        stale: &AtomicBool,
    ) -> Option<Analysis> {
        Self::with_source(workspace, uri, |source, lock| {
            guard(|| {
                previous
                    .edited_unless(text.clone(), source, lock, stale)
                    .ok()
            })
            .unwrap_or_else(|| Some(Analysis::unchecked(text)))
        })
    }

    /// Runs `f` with the registry and lockfile the document's imports resolve from.
    fn with_source<T>(
        workspace: &Workspace,
        uri: &Uri,
        f: impl FnOnce(&dyn ctxpack::imports::PackSource, Option<&ctxpack::imports::Lockfile>) -> T,
    ) -> T {
        let resolution = uri.to_file_path().map(|path| workspace.resolve(&path));
        let registry = resolution.as_ref().map(|r| r.registry());
        let lock = resolution.as_ref().and_then(|r| r.lock());
        let source: &dyn ctxpack::imports::PackSource = match &registry {
            Some(r) => r,
            None => &ctxpack::imports::NoSource,
        };
        f(source, lock.as_ref())
    }

    /// Analyses `text` off the message loop, from `previous` when there is one;
    /// `None` when `stale` was raised before it finished.
    async fn analyze_blocking(
        self: &Arc<Self>,
        uri: &Uri,
        text: String,
        previous: Option<Arc<Analysis>>,
        stale: Arc<AtomicBool>,
    ) -> Option<Analysis> {
        let workspace = self.workspace();
        let uri2 = uri.clone();
        let fallback = text.clone();
        tokio::task::spawn_blocking(move || match previous {
            Some(previous) => Inner::reanalyze_edit(&workspace, &uri2, text, &previous, &stale),
            None => Some(Inner::analyze(&workspace, &uri2, text)),
        })
        .await
        .unwrap_or_else(|_| Some(Analysis::unchecked(fallback)))
    }

    /// Marks a document changed and makes sure an analysis will pick the change up.
    fn schedule(self: &Arc<Self>, uri: &Uri, doc: &mut Doc) {
        doc.dirty = true;
        doc.stale.store(true, Ordering::Relaxed);
        doc.wake.notify_one();
        if !doc.running {
            doc.running = true;
            let inner = Arc::clone(self);
            let uri = uri.clone();
            let opened = doc.opened;
            tokio::spawn(async move { inner.analysis_task(uri, opened).await });
        }
    }

    /// After a change to the pack `uri` (its text, or its closing): the open test
    /// files beside it are checked again, since they read the pack from the editor
    /// while it is open.
    fn relint_tests_beside(self: &Arc<Self>, uri: &Uri, docs: &mut HashMap<Uri, Doc>) {
        if is_tests_file(uri) {
            return;
        }
        let Some(dir) = uri
            .to_file_path()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        else {
            return;
        };
        let beside: Vec<Uri> = docs
            .keys()
            .filter(|u| is_tests_file(u))
            .filter(|u| {
                u.to_file_path()
                    .is_some_and(|p| p.parent().is_some_and(|d| d == dir))
            })
            .cloned()
            .collect();
        for tests in beside {
            if let Some(doc) = docs.get_mut(&tests) {
                self.schedule(&tests, doc);
            }
        }
    }

    /// Analyses a document until its latest text is analysed, then publishes that
    /// version's diagnostics.
    async fn analysis_task(self: Arc<Self>, uri: Uri, opened: u64) {
        loop {
            if !self.settle(&uri, opened).await {
                return;
            }
            let (text, version, previous, stale, epoch) = {
                let mut docs = self.documents.lock().await;
                let Some(doc) = opening(&mut docs, &uri, opened) else {
                    return;
                };
                doc.dirty = false;
                doc.wanted = false;
                doc.stale = Arc::new(AtomicBool::new(false));
                let previous = doc.analyzed.map(|_| Arc::clone(&doc.analysis));
                (
                    doc.buffer.snapshot(),
                    doc.version,
                    previous,
                    Arc::clone(&doc.stale),
                    doc.imports_epoch,
                )
            };
            // Copied off the lock that every change takes.
            let text = Arc::unwrap_or_clone(text);
            let tests_file = is_tests_file(&uri);
            let (analysis, test_diagnostics) = if tests_file {
                let diagnostics = self.lint_tests(&uri, &text).await;
                (Arc::new(Analysis::unchecked(text)), Some(diagnostics))
            } else {
                match self.analyze_blocking(&uri, text, previous, stale).await {
                    Some(analysis) => (Arc::new(analysis), None),
                    None => continue, // stale: the newer text is next
                }
            };
            let mut docs = self.documents.lock().await;
            let Some(doc) = opening(&mut docs, &uri, opened) else {
                return; // closed meanwhile
            };
            // The analysis it replaces is freed after the publish, on a blocking
            // thread: on a large pack that takes a quarter of the time the check did.
            let replaced = std::mem::replace(&mut doc.analysis, Arc::clone(&analysis));
            doc.analyzed = Some(version);
            doc.resolved = epoch;
            self.analyzed.notify_waiters();
            if doc.dirty {
                drop(docs);
                free_later(replaced);
                continue; // superseded: analyse the newest text, publish nothing stale
            }
            doc.running = false;
            doc.wanted = false;
            let published = doc.quick.take();
            let known = published.is_some_and(|(v, d)| {
                v == version && d == analysis.diagnostics() && test_diagnostics.is_none()
            });
            if !known {
                let diagnostics = test_diagnostics.unwrap_or_else(|| {
                    self.diagnostics(&uri, &self.text(&analysis), analysis.diagnostics())
                });
                // Published under the lock: no later version can go out before this one.
                self.client
                    .publish_diagnostics(uri, diagnostics, Some(version))
                    .await;
            }
            drop(docs);
            free_later(replaced);
            return;
        }
    }

    /// The problems of a `*.tests.yaml` document, against the analysis of the pack it
    /// names (the open document when it is open, else the file), on the key or value
    /// they are about.
    async fn lint_tests(&self, uri: &Uri, text: &str) -> Vec<lsp::Diagnostic> {
        let pack_path = uri.to_file_path().and_then(|path| {
            let doc: serde_json::Value = ctxpack::commands::compile::parse_yaml_text(text)?;
            let rel = doc.get("pack")?.as_str()?.to_owned();
            Some(path.parent()?.join(rel))
        });
        let open = match pack_path.as_ref().and_then(Uri::from_file_path) {
            Some(pack_uri) => {
                let mut docs = self.documents.lock().await;
                docs.get_mut(&pack_uri).map(|d| d.buffer.snapshot())
            }
            None => None,
        }
        // Copied off the lock that every change takes.
        .map(Arc::unwrap_or_clone);
        let workspace = self.workspace();
        let yaml = text.to_owned();
        let found = tokio::task::spawn_blocking(move || {
            let pack_text = open.or_else(|| {
                pack_path
                    .as_ref()
                    .filter(|p| p.extension().is_some_and(|e| e == "ctxpack"))
                    .and_then(|p| std::fs::read_to_string(p).ok())
            });
            match pack_text.zip(pack_path.as_ref()) {
                Some((t, p)) => {
                    let resolution = workspace.resolve(p);
                    let registry = resolution.registry();
                    let analysis = Analysis::with_imports(t, &registry, resolution.lock().as_ref());
                    Ok(guard(|| analysis.test_file_diagnostics(&yaml)).unwrap_or_default())
                }
                // Without a readable pack, what the runner itself refuses.
                None => {
                    let lint = ctxpack::testing::lint::lint;
                    let mut problems = guard(|| lint(&yaml, None)).unwrap_or_default();
                    if let Some(missing) = pack_path.as_ref().filter(|p| !p.exists()) {
                        problems.push(ctxpack::testing::lint::missing_pack(&yaml, missing));
                        problems.sort_by_key(|p| p.line);
                    }
                    Err(problems)
                }
            }
        })
        .await
        .unwrap_or_else(|_| Ok(Vec::new()));
        let lines = ctxpack::span::LineIndex::new(text);
        let t = Text {
            text,
            lines: &lines,
            encoding: self.encoding(),
        };
        let found = match found {
            Ok(found) => found,
            Err(problems) => {
                // On the whole line the problem is on (clamped to the document).
                return problems
                    .into_iter()
                    .map(|p| {
                        let line = p.line.saturating_sub(1).min(lines.line_count() - 1);
                        let span = ctxpack::span::Span::new(
                            lines.line_start(line),
                            lines.line_end(text, line),
                        );
                        lsp::Diagnostic {
                            range: t.range(span),
                            severity: Some(DiagnosticSeverity::ERROR),
                            code: Some(NumberOrString::String(p.code.to_owned())),
                            source: Some("ctxpack test".to_owned()),
                            message: p.message,
                            ..lsp::Diagnostic::default()
                        }
                    })
                    .collect();
            }
        };
        found
            .into_iter()
            .map(|d| lsp::Diagnostic {
                range: t.range(d.span),
                severity: Some(match d.severity {
                    Severity::Error => DiagnosticSeverity::ERROR,
                    Severity::Warning => DiagnosticSeverity::WARNING,
                }),
                code: Some(NumberOrString::String(d.code.to_owned())),
                source: Some("ctxpack test".to_owned()),
                message: d.message,
                ..lsp::Diagnostic::default()
            })
            .collect()
    }

    /// The analysis of the current text: at once when it is there, else when the
    /// running analysis gets to it. Every query answers for the text the client has
    /// sent, so a client that edits and then asks gets an answer about its edit.
    async fn current(&self, uri: &Uri) -> Option<Arc<Analysis>> {
        // A test file has diagnostics only: it is not a pack to query.
        if is_tests_file(uri) {
            return None;
        }
        loop {
            let notified = self.analyzed.notified();
            {
                let mut docs = self.documents.lock().await;
                let doc = docs.get_mut(uri)?;
                if doc.analyzed == Some(doc.version) {
                    return Some(Arc::clone(&doc.analysis));
                }
                // An analysis settling after quick diagnostics goes ahead now.
                if !doc.wanted {
                    doc.wanted = true;
                    doc.wake.notify_one();
                }
            }
            notified.await;
        }
    }

    /// Re-analyses every open document (the registry, a lockfile or the settings
    /// changed); with `only_importing`, only those whose pack has imports.
    async fn reanalyze(self: &Arc<Self>, only_importing: bool) {
        let mut docs = self.documents.lock().await;
        let uris: Vec<Uri> = docs.keys().cloned().collect();
        for uri in uris {
            if let Some(doc) = docs.get_mut(&uri) {
                let imports = !doc.analysis.checked().pack.imports.is_empty();
                if !only_importing || imports || doc.analyzed.is_none() {
                    doc.imports_epoch += 1;
                    self.schedule(&uri, doc);
                }
            }
        }
    }

    fn diagnostics(
        &self,
        uri: &Uri,
        t: &Text<'_>,
        diagnostics: &[Diagnostic],
    ) -> Vec<lsp::Diagnostic> {
        let lock = self.lock_problem(uri).map(|problem| lsp::Diagnostic {
            range: lsp::Range::default(),
            severity: Some(DiagnosticSeverity::ERROR),
            source: Some("ctxpack".to_owned()),
            message: format!(
                "{problem}\nhelp: imports are not checked against it until it is fixed, and \
                 `ctxpack check` refuses the pack (exit 3); fix it, or delete it and run \
                 `ctxpack build` to write it anew"
            ),
            ..lsp::Diagnostic::default()
        });
        lock.into_iter()
            .chain(diagnostics.iter().map(|d| self.diagnostic(uri, t, d)))
            .collect()
    }

    /// Why the lockfile beside the document cannot be read, when it cannot (a
    /// missing one is no problem).
    fn lock_problem(&self, uri: &Uri) -> Option<String> {
        let path = uri.to_file_path()?;
        let lockfile = self.workspace().resolve(&path).lockfile;
        ctxpack::imports::Lockfile::read(&lockfile).err()
    }

    /// Before a document's full analysis: while quick diagnostics
    /// ([`Analysis::quick_diagnostics`]) cover its newest text, publishes them and
    /// waits for the edits to pause for [`SETTLE`], so that a burst of typing is
    /// not analysed in full keystroke by keystroke. A query that needs the analysis
    /// (see [`Inner::current`]) or an edit they do not cover ends the wait at once.
    /// The quick diagnostics are worked out off the documents' lock, so that changes
    /// keep coming in meanwhile; those of a superseded text are dropped. False when
    /// the document was closed.
    async fn settle(&self, uri: &Uri, opened: u64) -> bool {
        // Quick diagnostics worked out for a version and its text, or none where
        // they cannot be.
        let mut found: Option<(i32, Arc<String>, Option<Vec<Diagnostic>>)> = None;
        loop {
            let quick = {
                let mut docs = self.documents.lock().await;
                let Some(doc) = opening(&mut docs, uri, opened) else {
                    return false;
                };
                // Still the document's text: the same version, and the very text
                // (a client that reopens a document may give a version again).
                let current = |doc: &mut Doc, version: i32, text: &Arc<String>| {
                    version == doc.version && Arc::ptr_eq(text, &doc.buffer.snapshot())
                };
                match found.take() {
                    Some((version, text, None)) if current(doc, version, &text) => return true,
                    Some((version, text, Some(diagnostics)))
                        if current(doc, version, &text) && self.quick_covers(uri, doc) =>
                    {
                        // Published under the lock, like every publish, and only
                        // for the newest version: versions go out in order.
                        let t = doc.buffer.text(self.encoding());
                        let published = self.diagnostics(uri, &t, &diagnostics);
                        self.client
                            .publish_diagnostics(uri.clone(), published, Some(version))
                            .await;
                        doc.quick = Some((version, diagnostics));
                    }
                    // Superseded: the newest text is next.
                    _ => {}
                }
                if doc.quick.as_ref().is_some_and(|(v, _)| *v == doc.version) {
                    // Published even when a query waits: it waits for the full
                    // analysis, the diagnostics need not.
                    if doc.wanted {
                        return true;
                    }
                    Settle::Wait(Arc::clone(&doc.wake))
                } else if self.quick_covers(uri, doc) {
                    let text = doc.buffer.snapshot();
                    Settle::Quick(doc.version, text, Arc::clone(&doc.analysis))
                } else {
                    return true;
                }
            };
            match quick {
                Settle::Quick(version, text, analysis) => {
                    let diagnostics = guard(|| analysis.quick_diagnostics(&text)).flatten();
                    found = Some((version, text, diagnostics));
                }
                // A change or a query wakes it; one from before the wait is kept
                // by the `Notify` (as a permit), so none is lost.
                Settle::Wait(wake) => tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(SETTLE) => return true,
                },
            }
        }
    }

    /// Whether quick diagnostics may stand for the document's newest text: there is
    /// an analysis of an older text, with imports resolved as they are now.
    fn quick_covers(&self, uri: &Uri, doc: &Doc) -> bool {
        let current = doc.analyzed.is_some() && doc.resolved == doc.imports_epoch;
        current && doc.analyzed != Some(doc.version) && !is_tests_file(uri)
    }

    /// The one conversion of a core diagnostic to the protocol's: code, message with
    /// its help, related information. The code's `explain` page is one request away
    /// (hover, or the `ctxpack.explain` command), not in every publish.
    fn diagnostic(&self, uri: &Uri, t: &Text<'_>, d: &Diagnostic) -> lsp::Diagnostic {
        let related: Vec<DiagnosticRelatedInformation> = d
            .labels
            .iter()
            .map(|l| DiagnosticRelatedInformation {
                location: Location {
                    uri: uri.clone(),
                    range: t.range(l.span),
                },
                message: l.message.clone(),
            })
            .collect();
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        lsp::Diagnostic {
            range: t.range(d.span),
            severity: Some(match d.severity {
                Severity::Error => DiagnosticSeverity::ERROR,
                Severity::Warning => DiagnosticSeverity::WARNING,
            }),
            code: Some(NumberOrString::String(d.code.to_owned())),
            code_description: None,
            source: Some("ctxpack".to_owned()),
            message,
            related_information: (!related.is_empty()).then_some(related),
            tags: None,
            data: None,
        }
    }

    fn location(&self, uri: &Uri, a: &Analysis, span: ctxpack::span::Span) -> Location {
        Location {
            uri: uri.clone(),
            range: self.text(a).range(span),
        }
    }

    /// Asks the client to tell us when lockfiles, packs, tests or the registry change.
    async fn watch_files(self: Arc<Self>) {
        let mut globs = vec![
            "**/*.ctxpack".to_owned(),
            "**/ctxpack.lock".to_owned(),
            "**/*.tests.yaml".to_owned(),
            "**/.ctxpack/registry/**".to_owned(),
        ];
        if let Some(r) = self.workspace().registry.filter(|r| r.is_absolute()) {
            globs.push(format!("{}/**", r.display()));
        }
        let watchers = globs
            .into_iter()
            .map(|g| FileSystemWatcher {
                glob_pattern: GlobPattern::String(g),
                kind: None,
            })
            .collect();
        let options = DidChangeWatchedFilesRegistrationOptions { watchers };
        let registration = Registration {
            id: "ctxpack-watch".to_owned(),
            method: "workspace/didChangeWatchedFiles".to_owned(),
            register_options: serde_json::to_value(options).ok(),
        };
        let _ = self.client.register_capability(vec![registration]).await;
    }
}

/// What a settling analysis does next (see [`Inner::settle`]).
enum Settle {
    /// Works out the quick diagnostics of this version's text, from this analysis.
    Quick(i32, Arc<String>, Arc<Analysis>),
    /// Waits for a change or a query.
    Wait(Arc<Notify>),
}

/// A `*.tests.yaml` document: linted against its pack, not checked as a pack.
fn is_tests_file(uri: &Uri) -> bool {
    uri.path().as_str().ends_with(".tests.yaml")
}

/// A document to check as a pack: a `.ctxpack` file, or one the client says is
/// `ctxpack` (an unsaved one), or one it names no language for.
fn is_pack(uri: &Uri, language_id: &str) -> bool {
    uri.path().as_str().ends_with(".ctxpack") || language_id == "ctxpack" || language_id.is_empty()
}

/// Drops an analysis off the message loop.
fn free_later(analysis: Arc<Analysis>) {
    tokio::task::spawn_blocking(move || drop(analysis));
}

/// The `ctxpack.registry` setting, from `{"ctxpack": {"registry": ...}}` or
/// `{"registry": ...}`.
fn registry_setting(settings: &Value) -> Option<Option<PathBuf>> {
    let section = settings.get("ctxpack").unwrap_or(settings);
    match section.get("registry")? {
        Value::String(s) if !s.trim().is_empty() => Some(Some(PathBuf::from(s))),
        Value::String(_) | Value::Null => Some(None),
        _ => None,
    }
}

/// Is an action of `kind` one the client asked for (`context.only`)?
fn wanted(only: Option<&Vec<CodeActionKind>>, kind: &str) -> bool {
    only.is_none_or(|only| {
        only.iter().any(|o| {
            let o = o.as_str();
            o.is_empty() || kind == o || kind.starts_with(&format!("{o}."))
        })
    })
}

/// Runs a query, turning a panic (a bug) into "no answer".
fn guard<T>(query: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(query)).ok()
}

fn completion_kind(kind: CompletionKind) -> CompletionItemKind {
    match kind {
        CompletionKind::Keyword => CompletionItemKind::KEYWORD,
        CompletionKind::Value => CompletionItemKind::VALUE,
        CompletionKind::Type => CompletionItemKind::TYPE_PARAMETER,
        CompletionKind::Tool => CompletionItemKind::FUNCTION,
        CompletionKind::Intent => CompletionItemKind::EVENT,
        CompletionKind::Redactor => CompletionItemKind::CONSTANT,
        CompletionKind::Bucket => CompletionItemKind::MODULE,
        CompletionKind::Field => CompletionItemKind::FIELD,
        CompletionKind::Builtin => CompletionItemKind::VARIABLE,
        CompletionKind::EnumMember => CompletionItemKind::ENUM_MEMBER,
    }
}

fn symbol_kind(kind: OutlineKind) -> SymbolKind {
    match kind {
        OutlineKind::Pack => SymbolKind::PACKAGE,
        OutlineKind::Import => SymbolKind::MODULE,
        OutlineKind::Description | OutlineKind::Prompt => SymbolKind::STRING,
        OutlineKind::Context => SymbolKind::STRUCT,
        OutlineKind::Field => SymbolKind::FIELD,
        OutlineKind::Budget => SymbolKind::NAMESPACE,
        OutlineKind::Bucket => SymbolKind::ARRAY,
        OutlineKind::Tool => SymbolKind::FUNCTION,
        OutlineKind::Prohibit => SymbolKind::KEY,
        OutlineKind::Intent => SymbolKind::EVENT,
        OutlineKind::Redactor => SymbolKind::CONSTANT,
        OutlineKind::Policy => SymbolKind::INTERFACE,
        OutlineKind::Block => SymbolKind::OBJECT,
    }
}

impl Inner {
    #[expect(
        deprecated,
        reason = "`DocumentSymbol::deprecated` must still be written"
    )]
    fn symbol(&self, a: &Analysis, s: &OutlineSymbol) -> DocumentSymbol {
        let t = self.text(a);
        DocumentSymbol {
            name: if s.name.is_empty() {
                "(unnamed)".to_owned()
            } else {
                s.name.clone()
            },
            detail: s.detail.clone(),
            kind: symbol_kind(s.kind),
            tags: None,
            deprecated: None,
            range: t.range(s.span),
            selection_range: t.range(s.selection),
            children: Some(s.children.iter().map(|c| self.symbol(a, c)).collect()),
        }
    }

    /// The capabilities this server offers, for the negotiated encoding.
    fn capabilities(encoding: Encoding) -> ServerCapabilities {
        ServerCapabilities {
            position_encoding: Some(match encoding {
                Encoding::Utf8 => PositionEncodingKind::UTF8,
                Encoding::Utf16 => PositionEncodingKind::UTF16,
            }),
            text_document_sync: Some(TextDocumentSyncCapability::Kind(
                TextDocumentSyncKind::INCREMENTAL,
            )),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            definition_provider: Some(OneOf::Left(true)),
            references_provider: Some(OneOf::Left(true)),
            document_symbol_provider: Some(OneOf::Left(true)),
            document_formatting_provider: Some(OneOf::Left(true)),
            rename_provider: Some(OneOf::Right(RenameOptions {
                prepare_provider: Some(true),
                work_done_progress_options: WorkDoneProgressOptions::default(),
            })),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![
                    CodeActionKind::QUICKFIX,
                    CodeActionKind::new(EXPLAIN_KIND),
                ]),
                ..CodeActionOptions::default()
            })),
            execute_command_provider: Some(ExecuteCommandOptions {
                commands: vec![EXPLAIN_COMMAND.to_owned()],
                work_done_progress_options: WorkDoneProgressOptions::default(),
            }),
            completion_provider: Some(CompletionOptions {
                trigger_characters: Some(vec![".".to_owned()]),
                ..CompletionOptions::default()
            }),
            inlay_hint_provider: Some(OneOf::Left(true)),
            code_lens_provider: Some(CodeLensOptions {
                resolve_provider: Some(false),
            }),
            folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
            workspace_symbol_provider: Some(OneOf::Left(true)),
            semantic_tokens_provider: Some(
                SemanticTokensServerCapabilities::SemanticTokensOptions(SemanticTokensOptions {
                    legend: crate::features::legend(),
                    range: Some(true),
                    full: Some(SemanticTokensFullOptions::Bool(true)),
                    work_done_progress_options: WorkDoneProgressOptions::default(),
                }),
            ),
            ..ServerCapabilities::default()
        }
    }

    /// The quick fixes and "Explain CODE" actions for `range` of `uri`.
    fn code_actions(
        &self,
        uri: &Uri,
        a: &Analysis,
        range: lsp::Range,
        only: Option<&Vec<CodeActionKind>>,
    ) -> Vec<CodeActionOrCommand> {
        let t = self.text(a);
        let span = t.span(range);
        let mut actions = Vec::new();
        if wanted(only, CodeActionKind::QUICKFIX.as_str()) {
            for fix in guard(|| a.quick_fixes(span)).unwrap_or_default() {
                let diagnostic = a
                    .diagnostics()
                    .get(fix.diagnostic)
                    .map(|d| self.diagnostic(uri, &self.text(a), d));
                let edit = TextEdit {
                    range: t.range(fix.edit.span),
                    new_text: fix.edit.text,
                };
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: fix.title,
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: diagnostic.map(|d| vec![d]),
                    edit: Some(WorkspaceEdit {
                        changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                        ..WorkspaceEdit::default()
                    }),
                    is_preferred: Some(true),
                    ..CodeAction::default()
                }));
            }
        }
        if wanted(only, EXPLAIN_KIND) {
            let mut codes: Vec<&str> = a
                .diagnostics()
                .iter()
                .filter(|d| d.span.start <= span.end && span.start <= d.span.end)
                .map(|d| d.code)
                .collect();
            codes.sort_unstable();
            codes.dedup();
            for code in codes {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: format!("Explain {code}"),
                    kind: Some(CodeActionKind::new(EXPLAIN_KIND)),
                    command: Some(Command {
                        title: format!("Explain {code}"),
                        command: EXPLAIN_COMMAND.to_owned(),
                        arguments: Some(vec![json!(code)]),
                    }),
                    ..CodeAction::default()
                }));
            }
        }
        actions
    }
}

/// The outline as `SymbolInformation[]`, parents before their children, each child
/// naming its parent as its container.
#[expect(
    deprecated,
    reason = "`SymbolInformation::deprecated` must still be written"
)]
fn flatten(
    uri: &Uri,
    symbols: &[DocumentSymbol],
    container: Option<&str>,
    out: &mut Vec<SymbolInformation>,
) {
    for s in symbols {
        out.push(SymbolInformation {
            name: s.name.clone(),
            kind: s.kind,
            tags: None,
            deprecated: None,
            location: Location {
                uri: uri.clone(),
                range: s.range,
            },
            container_name: container.map(str::to_owned),
        });
        flatten(
            uri,
            s.children.as_deref().unwrap_or_default(),
            Some(&s.name),
            out,
        );
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let inner = &self.inner;
        let offers_utf8 = params
            .capabilities
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_ref())
            .is_some_and(|e| e.contains(&PositionEncodingKind::UTF8));
        let encoding = if offers_utf8 {
            Encoding::Utf8
        } else {
            Encoding::Utf16
        };
        let _ = inner.encoding.set(encoding);
        let hover_formats = params
            .capabilities
            .text_document
            .as_ref()
            .and_then(|t| t.hover.as_ref())
            .and_then(|h| h.content_format.as_ref());
        let _ = inner.plain_hover.set(
            hover_formats.is_some_and(|f| !f.is_empty() && !f.contains(&MarkupKind::Markdown)),
        );
        #[expect(deprecated, reason = "clients that send only `rootUri` still exist")]
        let root = params.root_uri.clone();
        let mut folders: Vec<PathBuf> = params
            .workspace_folders
            .iter()
            .flatten()
            .filter_map(|f| f.uri.to_file_path().map(|p| p.into_owned()))
            .collect();
        if folders.is_empty() {
            folders.extend(root.and_then(|r| r.to_file_path().map(|p| p.into_owned())));
        }
        let watch = params
            .capabilities
            .workspace
            .as_ref()
            .and_then(|w| w.did_change_watched_files.as_ref())
            .and_then(|d| d.dynamic_registration)
            .unwrap_or(false);
        if let Ok(mut ws) = inner.workspace.write() {
            ws.folders = folders;
            if let Some(Some(r)) = params
                .initialization_options
                .as_ref()
                .and_then(registry_setting)
            {
                ws.registry = Some(r);
            }
            if let Some(options) = &params.initialization_options {
                crate::features::apply_toggles(options, &mut ws);
            }
            ws.watch = watch;
            ws.hierarchical_symbols = params
                .capabilities
                .text_document
                .as_ref()
                .and_then(|t| t.document_symbol.as_ref())
                .and_then(|d| d.hierarchical_document_symbol_support)
                .unwrap_or(false);
            let workspace = params.capabilities.workspace.as_ref();
            ws.refresh_hints = workspace
                .and_then(|w| w.inlay_hint.as_ref())
                .and_then(|h| h.refresh_support)
                .unwrap_or(false);
            ws.refresh_lenses = workspace
                .and_then(|w| w.code_lens.as_ref())
                .and_then(|l| l.refresh_support)
                .unwrap_or(false);
        }
        Ok(InitializeResult {
            capabilities: Inner::capabilities(encoding),
            server_info: Some(ServerInfo {
                name: "ctxpack-lsp".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        if self.inner.workspace().watch {
            // Not awaited here: the client answers after it has read this message.
            tokio::spawn(Arc::clone(&self.inner).watch_files());
        }
    }

    async fn shutdown(&self) -> Result<()> {
        SHUT_DOWN.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        // A client with a broad document selector may open anything: only packs and
        // test files are checked (a README would be all syntax errors).
        if !is_tests_file(&doc.uri) && !is_pack(&doc.uri, &doc.language_id) {
            return;
        }
        let mut docs = self.inner.documents.lock().await;
        let entry = docs.entry(doc.uri.clone()).or_insert_with(|| Doc {
            buffer: Buffer::new(String::new()),
            version: doc.version,
            analysis: Arc::new(Analysis::unchecked(String::new())),
            analyzed: None,
            running: false,
            dirty: false,
            stale: Arc::new(AtomicBool::new(false)),
            quick: None,
            wanted: false,
            wake: Arc::new(Notify::new()),
            imports_epoch: 0,
            resolved: 0,
            opened: OPENINGS.fetch_add(1, Ordering::Relaxed),
        });
        entry.buffer = Buffer::new(doc.text);
        entry.version = doc.version;
        entry.quick = None;
        self.inner.schedule(&doc.uri, entry);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let mut docs = self.inner.documents.lock().await;
        let Some(doc) = docs.get_mut(&uri) else {
            return;
        };
        let encoding = self.inner.encoding();
        for change in params.content_changes {
            doc.buffer.change(change.range, change.text, encoding);
        }
        doc.version = params.text_document.version;
        self.inner.schedule(&uri, doc);
        self.inner.relint_tests_beside(&uri, &mut docs);
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        let mut docs = self.inner.documents.lock().await;
        docs.remove(&uri);
        // Its tests now read the pack from disk.
        self.inner.relint_tests_beside(&uri, &mut docs);
        // Queries waiting for this document's check now answer nothing.
        self.inner.analyzed.notify_waiters();
        self.inner
            .client
            .publish_diagnostics(uri, Vec::new(), None)
            .await;
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        // Packs depend on the registry and their lockfile: a change to either
        // re-checks the open packs that import. Other files (a pack or test file on
        // disk) change no open pack's diagnostics.
        let relevant = params.changes.iter().any(|c| {
            let path = c.uri.path().as_str();
            path.ends_with(ctxpack::imports::LOCKFILE_NAME)
                || path.contains("/.ctxpack/")
                || path.ends_with(".json")
        });
        if relevant {
            self.inner.reanalyze(true).await;
        }
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        let mut refresh = (false, false);
        if let Ok(mut ws) = self.inner.workspace.write() {
            if let Some(registry) = registry_setting(&params.settings) {
                ws.registry = registry;
            }
            let before = (ws.inlay_hints, ws.code_lens);
            crate::features::apply_toggles(&params.settings, &mut ws);
            refresh = (
                ws.refresh_hints && before.0 != ws.inlay_hints,
                ws.refresh_lenses && before.1 != ws.code_lens,
            );
        }
        self.inner.reanalyze(false).await;
        // Hints and lenses turned on or off show (or go) at once in a client that
        // lets the server ask; others ask again on their next edit or scroll.
        // Not awaited: notifications are handled in order, and the client's answer
        // may wait behind this one.
        let client = self.inner.client.clone();
        tokio::spawn(async move {
            if refresh.0 {
                let _ = client.inlay_hint_refresh().await;
            }
            if refresh.1 {
                let _ = client.code_lens_refresh().await;
            }
        });
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        if params.command != EXPLAIN_COMMAND {
            return Err(Error::invalid_params(format!(
                "unknown command `{}`",
                params.command
            )));
        }
        let code = params
            .arguments
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Error::invalid_params("`ctxpack.explain` takes a code, such as \"E0401\"")
            })?;
        let info = ctxpack::codes::lookup(code)
            .ok_or_else(|| Error::invalid_params(format!("`{code}` is not a ctxpack code")))?;
        Ok(Some(json!(info.markdown())))
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let p = params.text_document_position_params;
        let Some(a) = self.inner.current(&p.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.inner.text(&a);
        Ok(guard(|| a.hover(t.offset(p.position)))
            .flatten()
            .map(|h| Hover {
                contents: HoverContents::Markup(MarkupContent {
                    kind: if self.inner.plain_hover.get() == Some(&true) {
                        MarkupKind::PlainText
                    } else {
                        MarkupKind::Markdown
                    },
                    value: h.markdown,
                }),
                range: Some(t.range(h.span)),
            }))
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let p = params.text_document_position_params;
        let uri = p.text_document.uri;
        let Some(a) = self.inner.current(&uri).await else {
            return Ok(None);
        };
        let offset = self.inner.text(&a).offset(p.position);
        let spans = guard(|| a.definition(offset)).unwrap_or_default();
        let locations: Vec<Location> = spans
            .into_iter()
            .map(|s| self.inner.location(&uri, &a, s))
            .collect();
        Ok((!locations.is_empty()).then_some(GotoDefinitionResponse::Array(locations)))
    }

    async fn references(&self, params: ReferenceParams) -> Result<Option<Vec<Location>>> {
        let p = params.text_document_position;
        let uri = p.text_document.uri;
        let Some(a) = self.inner.current(&uri).await else {
            return Ok(None);
        };
        let offset = self.inner.text(&a).offset(p.position);
        let spans =
            guard(|| a.references(offset, params.context.include_declaration)).unwrap_or_default();
        Ok(Some(
            spans
                .into_iter()
                .map(|s| self.inner.location(&uri, &a, s))
                .collect(),
        ))
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let p = params.text_document_position;
        let Some(a) = self.inner.current(&p.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.inner.text(&a);
        // A line the document does not have: the client's text is not the server's,
        // and no edit range could contain the position.
        if p.position.line as usize >= t.lines.line_count() {
            return Ok(Some(CompletionResponse::Array(Vec::new())));
        }
        let items = guard(|| a.completion(t.offset(p.position)))
            .unwrap_or_default()
            .into_iter()
            .map(|c| CompletionItem {
                kind: Some(completion_kind(c.kind)),
                detail: c.detail,
                text_edit: Some(CompletionTextEdit::Edit(TextEdit {
                    range: t.range(c.replace),
                    new_text: c.insert,
                })),
                label: c.label,
                ..CompletionItem::default()
            })
            .collect();
        Ok(Some(CompletionResponse::Array(items)))
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        let symbols: Vec<DocumentSymbol> = guard(|| a.document_symbols())
            .unwrap_or_default()
            .iter()
            .map(|s| self.inner.symbol(&a, s))
            .collect();
        if self.inner.workspace().hierarchical_symbols {
            return Ok(Some(DocumentSymbolResponse::Nested(symbols)));
        }
        let mut flat = Vec::new();
        flatten(&params.text_document.uri, &symbols, None, &mut flat);
        Ok(Some(DocumentSymbolResponse::Flat(flat)))
    }

    async fn formatting(&self, params: DocumentFormattingParams) -> Result<Option<Vec<TextEdit>>> {
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        // A file with syntax errors is not formatted.
        let Some(formatted) = guard(|| a.format()).flatten() else {
            return Ok(None);
        };
        if formatted == a.text() {
            return Ok(Some(Vec::new()));
        }
        let whole = ctxpack::span::Span::new(0, a.text().len());
        Ok(Some(vec![TextEdit {
            range: self.inner.text(&a).range(whole),
            new_text: formatted,
        }]))
    }

    async fn prepare_rename(
        &self,
        params: TextDocumentPositionParams,
    ) -> Result<Option<PrepareRenameResponse>> {
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.inner.text(&a);
        Ok(guard(|| a.prepare_rename(t.offset(params.position)))
            .flatten()
            .map(|s| PrepareRenameResponse::Range(t.range(s))))
    }

    async fn rename(&self, params: RenameParams) -> Result<Option<WorkspaceEdit>> {
        let p = params.text_document_position;
        let uri = p.text_document.uri;
        let Some(a) = self.inner.current(&uri).await else {
            return Ok(None);
        };
        let t = self.inner.text(&a);
        let offset = t.offset(p.position);
        let workspace = self.inner.workspace();
        let (a2, uri2, name) = (Arc::clone(&a), uri.clone(), params.new_name.clone());
        // The renamed text is checked as the document is (imports included): a rename
        // that would make a diagnostic appear is refused with it.
        let edits = tokio::task::spawn_blocking(move || {
            guard(|| {
                a2.rename_checked(offset, &name, &|text| {
                    Inner::analyze(&workspace, &uri2, text)
                })
            })
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| Err("rename failed".to_owned()))
        .map_err(Error::invalid_params)?;
        let edits = edits
            .into_iter()
            .map(|e| TextEdit {
                range: t.range(e.span),
                new_text: e.text,
            })
            .collect();
        Ok(Some(WorkspaceEdit {
            changes: Some(HashMap::from([(uri, edits)])),
            ..WorkspaceEdit::default()
        }))
    }

    async fn inlay_hint(&self, params: InlayHintParams) -> Result<Option<Vec<InlayHint>>> {
        if !self.inner.workspace().inlay_hints {
            return Ok(Some(Vec::new()));
        }
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        let range = self.inner.text(&a).span(params.range);
        let a2 = Arc::clone(&a);
        // Counting may prepare the pack (tokenizing its tools): off the message loop.
        let hints = tokio::task::spawn_blocking(move || guard(|| a2.inlay_hints(range)))
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        Ok(Some(crate::features::inlay_hints(
            &self.inner.text(&a),
            hints,
        )))
    }

    async fn code_lens(&self, params: CodeLensParams) -> Result<Option<Vec<CodeLens>>> {
        if !self.inner.workspace().code_lens {
            return Ok(Some(Vec::new()));
        }
        let uri = params.text_document.uri;
        let Some(a) = self.inner.current(&uri).await else {
            return Ok(None);
        };
        let a2 = Arc::clone(&a);
        let path = uri.to_file_path().map(|p| p.into_owned());
        let path2 = path.clone();
        let (lenses, tests) = tokio::task::spawn_blocking(move || {
            let lenses = guard(|| a2.intent_lenses()).unwrap_or_default();
            let tests = path2
                .as_deref()
                .map(ctxpack::testing::cases_by_intent)
                .unwrap_or_default();
            (lenses, tests)
        })
        .await
        .unwrap_or_default();
        Ok(Some(crate::features::code_lenses(
            &self.inner.text(&a),
            &a,
            lenses,
            &tests,
        )))
    }

    async fn folding_range(&self, params: FoldingRangeParams) -> Result<Option<Vec<FoldingRange>>> {
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        Ok(Some(crate::features::folding_ranges(
            guard(|| a.folding_ranges()).unwrap_or_default(),
        )))
    }

    async fn semantic_tokens_full(
        &self,
        params: SemanticTokensParams,
    ) -> Result<Option<SemanticTokensResult>> {
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        let tokens = guard(|| a.semantic_tokens(None)).unwrap_or_default();
        Ok(Some(SemanticTokensResult::Tokens(crate::features::encode(
            &self.inner.text(&a),
            &tokens,
        ))))
    }

    async fn semantic_tokens_range(
        &self,
        params: SemanticTokensRangeParams,
    ) -> Result<Option<SemanticTokensRangeResult>> {
        let Some(a) = self.inner.current(&params.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.inner.text(&a);
        let range = t.span(params.range);
        let tokens = guard(|| a.semantic_tokens(Some(range))).unwrap_or_default();
        Ok(Some(SemanticTokensRangeResult::Tokens(
            crate::features::encode(&t, &tokens),
        )))
    }

    async fn symbol(
        &self,
        params: WorkspaceSymbolParams,
    ) -> Result<Option<WorkspaceSymbolResponse>> {
        let folders = self.inner.workspace().folders;
        let encoding = self.inner.encoding();
        let open: Vec<(Uri, Arc<String>)> = {
            let mut docs = self.inner.documents.lock().await;
            docs.iter_mut()
                .map(|(u, d)| (u.clone(), d.buffer.snapshot()))
                .collect()
        };
        // Copied off the lock that every change takes.
        let open: Vec<(Uri, String)> = open
            .into_iter()
            .map(|(u, t)| (u, Arc::unwrap_or_clone(t)))
            .collect();
        let query = params.query;
        let symbols = tokio::task::spawn_blocking(move || {
            crate::features::workspace_symbols(&folders, open, &query, encoding)
        })
        .await
        .unwrap_or_default();
        Ok(Some(WorkspaceSymbolResponse::Flat(symbols)))
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let Some(a) = self.inner.current(&uri).await else {
            return Ok(None);
        };
        let only = params.context.only.as_ref();
        Ok(Some(self.inner.code_actions(&uri, &a, params.range, only)))
    }
}
