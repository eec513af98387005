//! The language server: document state and thin protocol handlers.
//!
//! Every handler converts positions, calls one query of [`ctxpack::ide::Analysis`]
//! and converts the answer back. The only state is the open documents. Handlers run
//! concurrently, so document updates are serialized by one async mutex, held from
//! applying a change until its diagnostics are published: diagnostics always go out
//! in the order of the edits, and a query never sees a half-applied change.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ctxpack::diagnostic::{Diagnostic, Severity};
use ctxpack::ide::{Analysis, CompletionKind, OutlineKind, OutlineSymbol};
use ctxpack::imports::Lockfile;
use ctxpack::registry::Registry;
use serde_json::json;
use tokio::sync::Mutex;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{self as lsp, *};
use tower_lsp_server::{Client, LanguageServer};

use crate::convert::{Encoding, Text};

pub struct Backend {
    client: Client,
    /// `--registry DIR`; otherwise `$CTXPACK_REGISTRY` or `.ctxpack/registry`, as for
    /// `ctxpack check`.
    registry: Option<PathBuf>,
    encoding: OnceLock<Encoding>,
    /// The open documents, each with the analysis of its current text.
    documents: Mutex<HashMap<Uri, Arc<Analysis>>>,
}

impl Backend {
    pub fn new(client: Client, registry: Option<PathBuf>) -> Self {
        Backend {
            client,
            registry,
            encoding: OnceLock::new(),
            documents: Mutex::new(HashMap::new()),
        }
    }

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

    /// Checks a document's text, resolving imports from the registry and the lockfile
    /// beside the file.
    fn analyze(&self, uri: &Uri, text: String) -> Analysis {
        let registry = Registry::from_env_or(self.registry.as_deref());
        let lock = uri
            .to_file_path()
            .and_then(|path| Lockfile::read(&Lockfile::path_for(&path)).ok().flatten());
        Analysis::with_imports(text, &registry, lock.as_ref())
    }

    async fn analysis(&self, uri: &Uri) -> Option<Arc<Analysis>> {
        let docs = self.documents.lock().await;
        docs.get(uri).map(Arc::clone)
    }

    /// Stores a new version and publishes its diagnostics. The caller holds the
    /// documents lock until this returns.
    async fn update(
        &self,
        docs: &mut HashMap<Uri, Arc<Analysis>>,
        uri: Uri,
        version: i32,
        text: String,
    ) {
        // A bug in the checker must not take the editor's server down with it: the
        // document then keeps its text, without diagnostics, until the next edit.
        let analysis =
            guard(|| self.analyze(&uri, text.clone())).unwrap_or_else(|| Analysis::unchecked(text));
        let analysis = Arc::new(analysis);
        let diagnostics = self.diagnostics(&uri, &analysis);
        docs.insert(uri.clone(), analysis);
        self.client
            .publish_diagnostics(uri, diagnostics, Some(version))
            .await;
    }

    fn diagnostics(&self, uri: &Uri, a: &Analysis) -> Vec<lsp::Diagnostic> {
        a.diagnostics()
            .iter()
            .map(|d| self.diagnostic(uri, a, d))
            .collect()
    }

    /// The one conversion of a core diagnostic to the protocol's.
    fn diagnostic(&self, uri: &Uri, a: &Analysis, d: &Diagnostic) -> lsp::Diagnostic {
        let t = self.text(a);
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
            data: Some(json!({
                "label": d.label,
                "help": d.help,
                "explain": ctxpack::codes::lookup(d.code).map(|i| i.markdown()),
            })),
        }
    }

    fn location(&self, uri: &Uri, a: &Analysis, span: ctxpack::span::Span) -> Location {
        Location {
            uri: uri.clone(),
            range: self.text(a).range(span),
        }
    }
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

impl Backend {
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
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
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
        let _ = self.encoding.set(encoding);
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
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
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                        ..CodeActionOptions::default()
                    },
                )),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec![".".to_owned()]),
                    ..CompletionOptions::default()
                }),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "ctxpack-lsp".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            offset_encoding: None,
        })
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        let mut docs = self.documents.lock().await;
        self.update(&mut docs, doc.uri, doc.version, doc.text).await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let mut docs = self.documents.lock().await;
        let mut text = docs
            .get(&uri)
            .map(|a| a.text().to_owned())
            .unwrap_or_default();
        for change in params.content_changes {
            match change.range {
                None => text = change.text,
                Some(range) => {
                    let lines = ctxpack::span::LineIndex::new(&text);
                    let t = Text {
                        text: &text,
                        lines: &lines,
                        encoding: self.encoding(),
                    };
                    let span = t.span(range);
                    text.replace_range(span.start..span.end, &change.text);
                }
            }
        }
        self.update(&mut docs, uri, params.text_document.version, text)
            .await;
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        let mut docs = self.documents.lock().await;
        docs.remove(&uri);
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let p = params.text_document_position_params;
        let Some(a) = self.analysis(&p.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.text(&a);
        Ok(guard(|| a.hover(t.offset(p.position)))
            .flatten()
            .map(|h| Hover {
                contents: HoverContents::Markup(MarkupContent {
                    kind: MarkupKind::Markdown,
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
        let Some(a) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let spans = guard(|| a.definition(self.text(&a).offset(p.position))).unwrap_or_default();
        let locations: Vec<Location> = spans
            .into_iter()
            .map(|s| self.location(&uri, &a, s))
            .collect();
        Ok((!locations.is_empty()).then_some(GotoDefinitionResponse::Array(locations)))
    }

    async fn references(&self, params: ReferenceParams) -> Result<Option<Vec<Location>>> {
        let p = params.text_document_position;
        let uri = p.text_document.uri;
        let Some(a) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let offset = self.text(&a).offset(p.position);
        let spans =
            guard(|| a.references(offset, params.context.include_declaration)).unwrap_or_default();
        Ok(Some(
            spans
                .into_iter()
                .map(|s| self.location(&uri, &a, s))
                .collect(),
        ))
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let p = params.text_document_position;
        let Some(a) = self.analysis(&p.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.text(&a);
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
        let Some(a) = self.analysis(&params.text_document.uri).await else {
            return Ok(None);
        };
        let symbols = guard(|| a.document_symbols())
            .unwrap_or_default()
            .iter()
            .map(|s| self.symbol(&a, s))
            .collect();
        Ok(Some(DocumentSymbolResponse::Nested(symbols)))
    }

    async fn formatting(&self, params: DocumentFormattingParams) -> Result<Option<Vec<TextEdit>>> {
        let Some(a) = self.analysis(&params.text_document.uri).await else {
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
            range: self.text(&a).range(whole),
            new_text: formatted,
        }]))
    }

    async fn prepare_rename(
        &self,
        params: TextDocumentPositionParams,
    ) -> Result<Option<PrepareRenameResponse>> {
        let Some(a) = self.analysis(&params.text_document.uri).await else {
            return Ok(None);
        };
        let t = self.text(&a);
        Ok(guard(|| a.prepare_rename(t.offset(params.position)))
            .flatten()
            .map(|s| PrepareRenameResponse::Range(t.range(s))))
    }

    async fn rename(&self, params: RenameParams) -> Result<Option<WorkspaceEdit>> {
        let p = params.text_document_position;
        let uri = p.text_document.uri;
        let Some(a) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let t = self.text(&a);
        let edits = guard(|| a.rename(t.offset(p.position), &params.new_name))
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

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let Some(a) = self.analysis(&uri).await else {
            return Ok(None);
        };
        let t = self.text(&a);
        let actions = guard(|| a.quick_fixes(t.span(params.range)))
            .unwrap_or_default()
            .into_iter()
            .map(|fix| {
                let diagnostic = a
                    .diagnostics()
                    .get(fix.diagnostic)
                    .map(|d| self.diagnostic(&uri, &a, d));
                let edit = TextEdit {
                    range: t.range(fix.edit.span),
                    new_text: fix.edit.text,
                };
                CodeActionOrCommand::CodeAction(CodeAction {
                    title: fix.title,
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: diagnostic.map(|d| vec![d]),
                    edit: Some(WorkspaceEdit {
                        changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                        ..WorkspaceEdit::default()
                    }),
                    is_preferred: Some(true),
                    ..CodeAction::default()
                })
            })
            .collect();
        Ok(Some(actions))
    }
}
