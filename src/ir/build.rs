//! AST → IR. Two passes: the first declares every name (so that references may
//! point forward and a broken item still declares its name); the second lowers the
//! bodies, typing expressions and templates against the declared context.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::expr::Checker;
use super::reuse::{self, EarlierBuild, ItemBody, Marks};
use super::*;
use crate::artifact::{valid_pack_name, Artifact, Effect};
use crate::diagnostic::Diagnostic;
use crate::imports::ImportedPack;
use crate::syntax::ast::{self, BrokenKind, Declares, EffectKind, ItemKind, Role};

/// Builds the IR of one parsed file with its resolved imports merged in.
/// Diagnostics come back unsorted.
pub fn build(
    file: &ast::File,
    imports: &[ImportedPack],
    unresolved_imports: bool,
) -> (Pack, Vec<Diagnostic>) {
    build_unless(file, imports, unresolved_imports, None, &|| Ok(()))
        .unwrap_or_else(|never: std::convert::Infallible| match never {})
}

/// [`build`], reusing the bodies of the items an `earlier` build of the same file
/// made where the edit kept them and left the declarations as they were (see
/// [`super::reuse`]); the result is the same as without it. Given up with `stop`'s
/// error once it returns one; it is asked every few items.
pub fn build_unless<E>(
    file: &ast::File,
    imports: &[ImportedPack],
    unresolved_imports: bool,
    earlier: Option<EarlierBuild<'_>>,
    stop: &dyn Fn() -> Result<(), E>,
) -> Result<(Pack, Vec<Diagnostic>), E> {
    let mut b = Builder {
        pack: Pack {
            unresolved_imports,
            ..Pack::default()
        },
        diags: Vec::new(),
        first: foldhash::HashMap::with_capacity_and_hasher(
            file.items.iter().map(|it| names_declared(&it.kind)).sum(),
            Default::default(),
        ),
        clashed: Default::default(),
    };
    b.header(file);
    stop()?;
    b.declare(file);
    for import in imports {
        b.merge(import);
    }
    // After the imports: an imported field can be a prefix of a local one, or the
    // other way round.
    b.field_conflicts();
    b.pack.index();
    stop()?;
    let earlier = earlier.filter(|e| reuse::same_declarations(e.pack, &b.pack, e.edit));
    b.bodies(file, earlier, stop)?;
    b.pack.index_tools();
    Ok((b.pack, b.diags))
}

/// The imports a file declares, for resolution before [`build`].
pub fn import_decls(file: &ast::File) -> Vec<ImportDecl> {
    file.items
        .iter()
        .filter_map(|item| match &item.kind {
            ItemKind::Import(i) => Some(ImportDecl {
                name: i.name.value.clone(),
                version: i.version.as_ref().map(|v| v.value.clone()),
                keyword: item.keyword,
                name_span: i.name.span,
            }),
            _ => None,
        })
        .collect()
}

/// The label of an E0104 on `version`.
fn version_label(version: &str) -> &'static str {
    if version.len() > crate::artifact::MAX_VERSION_LEN {
        "longer than 64 characters"
    } else {
        "not a semantic version"
    }
}

struct Builder<'a> {
    pack: Pack,
    diags: Vec<Diagnostic>,
    /// The first definition of each (kind, name), for duplicate reports.
    first: foldhash::HashMap<(SymbolKind, &'a str), Span>,
    /// Imported items already reported as clashing (kind, name, provenance): an item
    /// two imports bring in (a diamond) is one clash, not one per import.
    clashed: std::collections::HashSet<(SymbolKind, &'a str, String)>,
}

/// How many names an item declares at most: room for them in the definition table.
fn names_declared(kind: &ItemKind) -> usize {
    match kind {
        ItemKind::Context(fields) => fields.len(),
        ItemKind::Broken(b) => b.fields.len().max(1),
        ItemKind::Budget(budget) => budget.buckets.len(),
        _ => 1,
    }
}

/// The singletons seen while building bodies, for E0105/E0106 and the missing-item
/// checks.
#[derive(Default)]
struct Seen {
    description: Option<Span>,
    session: Option<Span>,
    system: Option<Span>,
    developer: Option<Span>,
    budget: Option<Span>,
    fallback: Option<Span>,
}

/// What building bodies produces besides the IR, kept apart from the pack because the
/// expression checker reads the pack while it writes them.
#[derive(Default)]
struct BodyOut {
    diags: Vec<Diagnostic>,
    refs: Vec<Reference>,
}

impl BodyOut {
    /// The expression checker over `pack`'s declarations, writing here.
    fn checker<'a>(&'a mut self, pack: &'a Pack) -> Checker<'a> {
        Checker {
            pack,
            diags: &mut self.diags,
            refs: &mut self.refs,
        }
    }
}

impl<'a> Builder<'a> {
    fn header(&mut self, file: &ast::File) {
        self.pack.header_broken = file.header_broken;
        let Some(h) = &file.header else {
            // With items, the parser has said that the header is missing (E0001). An
            // empty file, or one of comments only, declares nothing: it is not a pack.
            // A header that did not parse has been reported already.
            if file.items.is_empty() && !file.header_broken {
                self.diags.push(
                    Diagnostic::new("E0103", Span::new(0, 0), "the file declares no pack: the `pack` header is missing")
                        .with_label("expected `pack \"scope/name\" version \"X.Y.Z\"` here")
                        .with_help("a file starts with `pack \"scope/name\" version \"X.Y.Z\"`, then its items"),
                );
            }
            return;
        };
        self.pack.header_span = h.keyword;
        self.pack.name = h.name.value.clone();
        self.pack.version = h.version.value.clone();
        self.pack.library = h.library.is_some();
        if !valid_pack_name(&h.name.value) {
            self.diags.push(
                Diagnostic::new("E0104", h.name.span, format!("malformed pack name `{}`", h.name.value))
                    .with_label("expected `scope/name`")
                    .with_help("pack names are `scope/name`, each part `[a-z0-9][a-z0-9-]*` of at most 64 characters, e.g. `acme/support-agent`"),
            );
        }
        if crate::artifact::parse_version(&h.version.value).is_err() {
            self.diags.push(
                Diagnostic::new(
                    "E0104",
                    h.version.span,
                    format!("malformed version `{}`", h.version.value),
                )
                .with_label(version_label(&h.version.value))
                .with_help("write a semantic version such as `1.4.0` or `2.0.0-rc.1`"),
            );
        }
    }

    /// Records a definition; reports E0101 for a second one.
    fn define(&mut self, kind: SymbolKind, name: &'a str, span: Span) -> bool {
        let key = (kind, name);
        if let Some(first) = self.first.get(&key) {
            self.diags.push(
                Diagnostic::new(
                    "E0101",
                    span,
                    format!("duplicate {} `{name}`", kind.as_str()),
                )
                .with_label("defined again here")
                .with_secondary(*first, "first defined here")
                .with_help(format!(
                    "rename one of them or remove the second {}",
                    kind.as_str()
                )),
            );
            self.pack.duplicates.push(Definition {
                kind,
                name: name.into(),
                span,
            });
            return false;
        }
        self.first.insert(key, span);
        true
    }

    /// Declares a context block's fields (E0101 for a path declared twice).
    fn declare_fields(&mut self, fields: &'a [ast::FieldDecl]) {
        for f in fields {
            if self.define(SymbolKind::Field, &f.path.name, f.path.span) {
                self.def(SymbolKind::Field, &f.path);
                self.pack
                    .field_index
                    .insert(f.path.name.clone(), self.pack.fields.len());
                self.pack.fields.push(Field {
                    path: f.path.name.clone(),
                    ty: Ty::from_ast(&f.ty.kind),
                    optional: f.ty.optional,
                    span: f.path.span,
                    doc: f.doc.clone(),
                });
            }
        }
    }

    fn declare(&mut self, file: &'a ast::File) {
        let mut seen_budget = false;
        for item in &file.items {
            match &item.kind {
                ItemKind::Tool(t) => self.declare_named(SymbolKind::Tool, &t.name),
                ItemKind::Intent(i) => self.declare_named(SymbolKind::Intent, &i.name),
                ItemKind::Policy(p) => self.declare_named(SymbolKind::Policy, &p.name),
                ItemKind::Redactor(r) => self.declare_named(SymbolKind::Redactor, &r.name),
                ItemKind::Block(bl) => self.declare_named(SymbolKind::Block, &bl.name),
                // Declared up front: conditions and templates anywhere may read
                // `session.*`.
                ItemKind::Session(directives)
                    if self.pack.session.is_none() && !self.pack.library =>
                {
                    self.pack.session = Some(item.keyword.to(*directives));
                }
                // A second budget is E0105; its buckets are not declared, so that one
                // mistake does not also report every bucket as a duplicate.
                ItemKind::Budget(budget) if !seen_budget => {
                    seen_budget = true;
                    for bucket in &budget.buckets {
                        self.declare_named(SymbolKind::Bucket, &bucket.name);
                    }
                }
                ItemKind::Context(fields) => self.declare_fields(fields),
                ItemKind::Broken(broken) => {
                    let kind = match broken.kind {
                        BrokenKind::Tool => SymbolKind::Tool,
                        BrokenKind::Intent => SymbolKind::Intent,
                        BrokenKind::Policy => SymbolKind::Policy,
                        BrokenKind::Redactor => SymbolKind::Redactor,
                        BrokenKind::Block => SymbolKind::Block,
                        BrokenKind::Bucket => SymbolKind::Bucket,
                        BrokenKind::Context => {
                            // The lines that parsed are declared; what the broken ones
                            // declare is unknown: do not report uses of unknown paths.
                            self.declare_fields(&broken.fields);
                            self.pack.unresolved_fields = true;
                            self.pack.fields_unknown |= broken.unknown_fields;
                            self.pack.field_holes.extend(broken.holes.iter().cloned());
                            continue;
                        }
                        BrokenKind::Import => {
                            self.pack.unresolved_imports = true;
                            continue;
                        }
                        BrokenKind::Budget | BrokenKind::Prompt | BrokenKind::Other => continue,
                    };
                    if kind == SymbolKind::Intent {
                        self.pack.broken_intent = true;
                    }
                    // Its head parsed, so it declares its name: a second definition
                    // of a name is E0101 whichever copy is broken.
                    if let Some(name) = &broken.name {
                        if !self.define(kind, &name.name, name.span) {
                            continue;
                        }
                        self.pack.broken.push(Definition {
                            kind,
                            name: name.name.clone(),
                            span: name.span,
                        });
                    }
                }
                _ => {}
            }
        }
    }

    /// Merges an imported artifact's shareable items: context fields, tools,
    /// prohibitions, redactors, policies and blocks (never its prompts, description,
    /// budget or intents). An item already brought in from the same pack (a diamond
    /// import) is merged once; any other clash of names is E0704.
    fn merge(&mut self, import: &'a ImportedPack) {
        let a: &Artifact = &import.artifact;
        let at = import.span;
        let here = format!("{}@{}", a.name, a.version);
        let nref = |n: &String| NameRef {
            name: n.as_str().into(),
            span: at,
        };
        for f in &a.context {
            if self.import_clash(SymbolKind::Field, &f.path, &f.provenance, at, &here) {
                continue;
            }
            self.pack
                .field_index
                .insert(f.path.as_str().into(), self.pack.fields.len());
            self.pack.fields.push(Field {
                path: f.path.as_str().into(),
                ty: Ty::from_artifact(&f.ty),
                optional: f.optional,
                span: at,
                doc: f.doc.clone(),
            });
        }
        for t in &a.tools {
            if self.import_clash(SymbolKind::Tool, &t.name, &t.provenance, at, &here) {
                continue;
            }
            self.pack.tools.push(ToolIr {
                name: t.name.clone(),
                name_span: at,
                description: Some(t.description.clone()).filter(|d| !d.is_empty()),
                kind: Some(t.kind.clone()),
                kind_span: None,
                risk: Some((t.risk, at)),
                approval: Some((t.approval, at)),
                input: Arc::new(t.input.clone()),
                doc: t.doc.clone(),
            });
        }
        for p in &a.prohibitions {
            if !self.pack.prohibitions.iter().any(|q| *q.name == *p.tool) {
                self.pack.prohibitions.push(nref(&p.tool));
                self.pack
                    .prohibition_origins
                    .insert(p.tool.clone(), p.provenance.clone());
            }
        }
        for r in &a.redactors {
            if self.import_clash(SymbolKind::Redactor, &r.name, &r.provenance, at, &here) {
                continue;
            }
            self.pack.redactors.push(RedactorIr {
                name: r.name.clone(),
                name_span: at,
                pattern: r.pattern.clone(),
                pattern_span: at,
                doc: r.doc.clone(),
            });
        }
        for p in &a.policies {
            if self.import_clash(SymbolKind::Policy, &p.name, &p.bundle, at, &here) {
                continue;
            }
            let effects = p
                .effects
                .iter()
                .map(|e| match e {
                    Effect::Refuse(s) => EffectIr::Refuse(s.clone()),
                    Effect::Escalate(s) => EffectIr::Escalate(s.clone()),
                    Effect::RequireApproval(n) => {
                        EffectIr::RequireApproval(n.iter().map(nref).collect())
                    }
                    Effect::Deny(n) => EffectIr::Deny(n.iter().map(nref).collect()),
                    Effect::Redact(n) => EffectIr::Redact(n.iter().map(nref).collect()),
                    Effect::Instruct(t) => EffectIr::Instruct(TemplateIr {
                        text: t.text.as_str().into(),
                        parts: t.parts.as_slice().into(),
                        span: at,
                    }),
                })
                .collect();
            self.pack.policies.push(PolicyIr {
                name: p.name.clone(),
                name_span: at,
                priority: p.priority,
                advisory: !p.enforcing,
                when: Arc::new(p.when.clone()),
                when_span: at,
                effects,
                doc: p.doc.clone(),
            });
        }
        for bl in &a.blocks {
            if self.import_clash(SymbolKind::Block, &bl.name, &bl.provenance, at, &here) {
                continue;
            }
            self.pack.blocks.push(BlockIr {
                name: bl.name.clone(),
                name_span: at,
                bucket: nref(&bl.bucket),
                priority: bl.priority,
                text: TemplateIr {
                    text: bl.text.text.as_str().into(),
                    parts: bl.text.parts.as_slice().into(),
                    span: at,
                },
                doc: bl.doc.clone(),
            });
        }
    }

    /// Declares an imported item, or reports why it cannot be: returns true when the
    /// item must be skipped (a clash, or the same item already merged).
    fn import_clash(
        &mut self,
        kind: SymbolKind,
        name: &'a str,
        provenance: &str,
        at: Span,
        via: &str,
    ) -> bool {
        let key = (kind, name);
        if let Some(first) = self.first.get(&key).copied() {
            match self.pack.origins.get(&(kind, name.to_owned())) {
                Some(existing) if existing == provenance => return true,
                _ if !self.clashed.insert((kind, name, provenance.to_owned())) => return true,
                existing => {
                    let other =
                        existing.map_or_else(|| "this pack".to_owned(), |e| format!("`{e}`"));
                    // The primary span is the later of the two in the file.
                    let brings = format!("brings in {} `{name}`", kind.as_str());
                    let (primary, label, secondary, secondary_label) = if first.start > at.start {
                        (first, "defined again here".to_owned(), at, brings)
                    } else {
                        (at, brings, first, "already defined here".to_owned())
                    };
                    self.diags.push(
                        Diagnostic::new(
                            "E0704",
                            primary,
                            format!("{} `{name}` imported from `{via}` conflicts with the one from {other}", kind.as_str()),
                        )
                        .with_label(label)
                        .with_secondary(secondary, secondary_label)
                        .with_help("rename one of them in its own pack, or import only one of the packs"),
                    );
                    return true;
                }
            }
        }
        self.first.insert(key, at);
        self.pack
            .origins
            .insert((kind, name.to_owned()), provenance.to_owned());
        self.pack.definitions.push(Definition {
            kind,
            name: name.into(),
            span: at,
        });
        false
    }

    /// Whether `ident` is the first definition of its name (not an E0101 duplicate).
    fn is_first(&self, kind: SymbolKind, ident: &ast::Ident) -> bool {
        self.first.get(&(kind, ident.name.as_ref())) == Some(&ident.span)
    }

    fn declare_named(&mut self, kind: SymbolKind, ident: &'a ast::Ident) {
        if self.define(kind, &ident.name, ident.span) {
            self.def(kind, ident);
        }
    }

    fn def(&mut self, kind: SymbolKind, ident: &ast::Ident) {
        self.pack.definitions.push(Definition {
            kind,
            name: ident.name.clone(),
            span: ident.span,
        });
    }

    /// E0206: a path cannot be both a field and a prefix of another field. Reported
    /// at the later of the two.
    fn field_conflicts(&mut self) {
        let (fields, index) = (&self.pack.fields, &self.pack.field_index);
        // One diagnostic per conflicting (later) field, however many it clashes with.
        let mut reported: HashSet<Span> = HashSet::new();
        for Field { path, span, .. } in fields {
            let mut prefix_end = 0;
            while let Some(dot) = path[prefix_end..].find('.') {
                let prefix = &path[..prefix_end + dot];
                prefix_end += dot + 1;
                if let Some(other) = index.get(prefix).and_then(|&i| fields.get(i)) {
                    let other = other.span;
                    let (later, earlier, later_path, earlier_path) = if other.start > span.start {
                        (other, *span, prefix, &**path)
                    } else {
                        (*span, other, &**path, prefix)
                    };
                    if reported.insert(later) {
                        self.diags.push(
                            Diagnostic::new(
                                "E0206",
                                later,
                                format!("`{later_path}` conflicts with `{earlier_path}`: a path cannot be both a field and a prefix"),
                            )
                            .with_label("conflicting field")
                            .with_secondary(earlier, "declared here")
                            .with_help("rename one of the fields, e.g. `user.name` and `user.id` instead of `user` and `user.id`"),
                        );
                    }
                }
            }
        }
    }

    fn singleton(&mut self, seen: &mut Option<Span>, span: Span, what: &str) -> bool {
        if let Some(first) = seen {
            self.diags.push(
                Diagnostic::new("E0105", span, format!("{what} is declared twice"))
                    .with_label("second declaration")
                    .with_secondary(*first, "first declared here")
                    .with_help(format!("a pack has at most one {what}")),
            );
            return false;
        }
        *seen = Some(span);
        true
    }

    fn library_forbids(&mut self, item: &ast::Item, what: &str) -> bool {
        if self.pack.library {
            self.diags.push(
                Diagnostic::new("E0107", item.keyword, format!("a `library` pack cannot declare {what}"))
                    .with_label("not allowed in a library")
                    .with_help("libraries hold shared context fields, tools, prohibitions, redactors, policies and blocks; prompts, budgets and intents belong to the importing pack"),
            );
            return true;
        }
        false
    }

    fn bodies<E>(
        &mut self,
        file: &ast::File,
        earlier: Option<EarlierBuild<'_>>,
        stop: &dyn Fn() -> Result<(), E>,
    ) -> Result<(), E> {
        let mut seen = Seen::default();
        let mut out = BodyOut::default();
        self.pack.bodies.reserve_exact(file.items.len());
        // An edit mostly keeps the lists as long as they were: room for them up front
        // spares growing (copying, and touching fresh memory) item by item.
        if let Some(e) = &earlier {
            fn room<T>(list: &mut Vec<T>, was: usize) {
                list.reserve(was.saturating_sub(list.len()));
            }
            let (old, p) = (e.pack, &mut self.pack);
            room(&mut p.tools, old.tools.len());
            room(&mut p.intents, old.intents.len());
            room(&mut p.policies, old.policies.len());
            room(&mut p.blocks, old.blocks.len());
            room(&mut p.redactors, old.redactors.len());
            room(&mut p.prohibitions, old.prohibitions.len());
            room(&mut out.refs, old.references.len());
        }
        for (k, item) in file.items.iter().enumerate() {
            if k % 64 == 63 {
                stop()?;
            }
            let from = Marks::of(&self.pack, &out.refs);
            let diags = out.diags.len();
            let reused = earlier.is_some_and(|e| {
                reuse::reuse_body(&e, k, &mut self.pack, &mut out.refs, &mut out.diags)
            });
            if !reused {
                self.body(item, &mut seen, &mut out);
            }
            let to = Marks::of(&self.pack, &out.refs);
            // Not the items checked against the others of their kind in file order
            // (singletons, fallbacks), broken ones included.
            let reusable = !matches!(
                &item.kind,
                ItemKind::Import(_)
                    | ItemKind::Description(_)
                    | ItemKind::Prompt(_)
                    | ItemKind::Budget(_)
                    | ItemKind::Session(_)
            ) && !matches!(&item.kind, ItemKind::Intent(i) if i.fallback.is_some())
                && !matches!(&item.kind, ItemKind::Broken(b) if b.declares.is_some() || b.fallback);
            let own = out.diags.get(diags..).unwrap_or_default();
            self.pack
                .bodies
                .push(ItemBody::new(reusable, from, to, own));
        }
        self.missing_items(file, &mut seen, &mut out);
        self.diags.extend(out.diags);
        self.pack.references.extend(out.refs);
        Ok(())
    }

    /// One item's body: typed, its references resolved, into the pack.
    fn body(&mut self, item: &ast::Item, seen: &mut Seen, out: &mut BodyOut) {
        match &item.kind {
            ItemKind::Import(i) => self.import(item, i, out),
            ItemKind::Description(d) => {
                if self.singleton(&mut seen.description, item.keyword, "`description`") {
                    self.pack.description = Some(d.value.clone());
                }
            }
            ItemKind::Prompt(p) => self.prompt(item, p, seen, out),
            ItemKind::Budget(b) => self.budget(item, b, seen, out),
            ItemKind::Session(_) => {
                if !self.library_forbids(item, "`session directives`") {
                    self.singleton(&mut seen.session, item.keyword, "`session directives`");
                }
            }
            // A second definition was reported (E0101); checking its body too
            // would report the first mistake again in other words (E0401, E0301,
            // E0106, ...). So for every named item below.
            ItemKind::Tool(t) if self.is_first(SymbolKind::Tool, &t.name) => {
                let tool = tool(t, item.doc.clone(), &mut out.diags);
                self.pack.tools.push(tool);
            }
            ItemKind::Tool(_) => {}
            ItemKind::Prohibit(names) => {
                for n in names {
                    self.pack.prohibitions.push(NameRef {
                        name: n.name.clone(),
                        span: n.span,
                    });
                }
            }
            ItemKind::Intent(i) if self.is_first(SymbolKind::Intent, &i.name) => {
                self.intent(item, i, seen, out)
            }
            ItemKind::Redactor(r) if self.is_first(SymbolKind::Redactor, &r.name) => {
                self.pack.redactors.push(redactor(item, r))
            }
            ItemKind::Policy(p) if self.is_first(SymbolKind::Policy, &p.name) => {
                let policy = policy(&self.pack, item, p, out);
                self.pack.policies.push(policy);
            }
            ItemKind::Block(bl) if self.is_first(SymbolKind::Block, &bl.name) => {
                let block = block(&self.pack, item, bl, out);
                self.pack.blocks.push(block);
            }
            // A broken item's keyword still says what it is: a second singleton is
            // E0105, and an item a library may not hold E0107, as if it had parsed.
            ItemKind::Broken(b) if b.declares.is_some() => self.broken_declares(item, b, seen, out),
            ItemKind::Intent(_)
            | ItemKind::Redactor(_)
            | ItemKind::Policy(_)
            | ItemKind::Block(_)
            | ItemKind::Context(_)
            | ItemKind::Broken(_) => {}
        }
    }

    /// What a broken item declares (see [`ast::Declares`]), checked in its place.
    fn broken_declares(
        &mut self,
        item: &ast::Item,
        b: &ast::Broken,
        seen: &mut Seen,
        out: &mut BodyOut,
    ) {
        let Some(declares) = b.declares else {
            return;
        };
        let (slot, what) = match declares {
            Declares::Description => (&mut seen.description, "`description`"),
            Declares::Prompt(role) => {
                if self.library_forbids(item, "a prompt") {
                    return;
                }
                match role {
                    Some(Role::System) => (&mut seen.system, "`prompt system`"),
                    Some(Role::Developer) => (&mut seen.developer, "`prompt developer`"),
                    None => return,
                }
            }
            Declares::Budget => {
                if self.library_forbids(item, "a budget") {
                    return;
                }
                (&mut seen.budget, "`budget`")
            }
            Declares::Session => {
                if self.library_forbids(item, "`session directives`") {
                    return;
                }
                (&mut seen.session, "`session directives`")
            }
            Declares::Intent => {
                if self.library_forbids(item, "an intent") {
                    return;
                }
                // Its head still says whether it is the fallback.
                if let Some(name) = b
                    .name
                    .as_ref()
                    .filter(|n| b.fallback && self.is_first(SymbolKind::Intent, n))
                {
                    second_fallback(name, seen, out);
                }
                return;
            }
        };
        self.singleton(slot, item.keyword, what);
    }

    /// E0701 and E0104 for an import; the import itself.
    fn import(&mut self, item: &ast::Item, i: &ast::Import, out: &mut BodyOut) {
        if i.version.is_none() {
            out.diags.push(
                Diagnostic::new(
                    "E0701",
                    item.keyword,
                    format!("import of `{}` has no version", i.name.value),
                )
                .with_label("unpinned import")
                .with_help(format!(
                    "pin it: `import \"{}\" version \"X.Y.Z\"` (there is no \"latest\")",
                    i.name.value
                )),
            );
        }
        if !valid_pack_name(&i.name.value) {
            out.diags.push(
                Diagnostic::new(
                    "E0104",
                    i.name.span,
                    format!("malformed pack name `{}`", i.name.value),
                )
                .with_label("expected `scope/name`")
                .with_help("pack names are `scope/name`, each part `[a-z0-9][a-z0-9-]*`"),
            );
        }
        if let Some(v) = &i.version {
            if crate::artifact::parse_version(&v.value).is_err() {
                out.diags.push(
                    Diagnostic::new("E0104", v.span, format!("malformed version `{}`", v.value))
                        .with_label(version_label(&v.value))
                        .with_help("write an exact semantic version such as `2.1.0`"),
                );
            }
        }
        self.pack.imports.push(ImportDecl {
            name: i.name.value.clone(),
            version: i.version.as_ref().map(|v| v.value.clone()),
            keyword: item.keyword,
            name_span: i.name.span,
        });
    }

    fn prompt(&mut self, item: &ast::Item, p: &ast::Prompt, seen: &mut Seen, out: &mut BodyOut) {
        if self.library_forbids(item, "a prompt") {
            return;
        }
        let (slot, what) = match p.role {
            Role::System => (&mut seen.system, "`prompt system`"),
            Role::Developer => (&mut seen.developer, "`prompt developer`"),
        };
        if self.singleton(slot, item.keyword, what) {
            let t = out.checker(&self.pack).template(&p.text);
            match p.role {
                Role::System => self.pack.system = Some(t),
                Role::Developer => self.pack.developer = Some(t),
            }
        }
    }

    fn budget(&mut self, item: &ast::Item, b: &ast::Budget, seen: &mut Seen, out: &mut BodyOut) {
        if self.library_forbids(item, "a budget") {
            return;
        }
        if self.singleton(&mut seen.budget, item.keyword, "`budget`") {
            self.pack.budget = Some(BudgetIr {
                keyword: item.keyword,
                total: b.total.map(|t| (t.value, t.span)),
                tokenizer: b
                    .tokenizer
                    .map_or(crate::artifact::Tokenizer::O200k, |t| t.value),
                buckets: b
                    .buckets
                    .iter()
                    .map(|bk| BucketIr {
                        name: bk.name.name.to_string(),
                        name_span: bk.name.span,
                        share_ppm: bk.share.map(|s| s.value),
                        share_span: bk.share.map(|s| s.span),
                        priority: bk.priority.map_or(0, |p| p.value),
                        min: bk.min.map(|m| (m.value, m.span)),
                        overflow: bk
                            .overflow
                            .map_or(crate::artifact::Overflow::Drop, |o| o.value),
                        doc: bk.doc.clone(),
                    })
                    .collect(),
            });
            for bk in &b.buckets {
                if bk.share.is_none() {
                    out.diags.push(
                        Diagnostic::new(
                            "E0103",
                            bk.name.span,
                            format!("bucket `{}` has no `share`", bk.name.name),
                        )
                        .with_label("missing `share`")
                        .with_help("give every bucket a share of the budget, e.g. `share 10%`"),
                    );
                }
            }
        }
    }

    fn intent(&mut self, item: &ast::Item, i: &ast::Intent, seen: &mut Seen, out: &mut BodyOut) {
        if self.library_forbids(item, "an intent") {
            return;
        }
        if i.fallback.is_some() {
            second_fallback(&i.name, seen, out);
        }
        let intent = intent(&self.pack, item, i, out);
        self.pack.intents.push(intent);
    }

    /// E0103 for the items an application pack cannot do without.
    fn missing_items(&mut self, file: &ast::File, seen: &mut Seen, out: &mut BodyOut) {
        let broken = |kind: BrokenKind| {
            file.items
                .iter()
                .any(|i| matches!(&i.kind, ItemKind::Broken(b) if b.kind == kind))
        };
        if broken(BrokenKind::Prompt) {
            seen.system = seen.system.or(Some(self.pack.header_span));
        }
        if broken(BrokenKind::Budget) {
            seen.budget = seen.budget.or(Some(self.pack.header_span));
        }
        if !self.pack.library && file.header.is_some() && !file.header_broken {
            let at = self.pack.header_span;
            let pack = self.pack.name.clone();
            if seen.system.is_none() {
                out.diags.push(missing(
                    at,
                    &pack,
                    "`prompt system`",
                    "add `prompt system \"\"\"...\"\"\"`",
                ));
            }
            if seen.budget.is_none() {
                out.diags.push(missing(
                    at,
                    &pack,
                    "`budget`",
                    "add `budget { total 16_000 bucket ... }`",
                ));
            }
            let has_intent = !self.pack.intents.is_empty() || broken(BrokenKind::Intent);
            if !has_intent {
                out.diags.push(missing(
                    at,
                    &pack,
                    "intent",
                    "declare at least one `intent NAME { task \"...\" }`",
                ));
            }
        }
    }
}

fn missing(at: Span, pack: &str, what: &str, help: &str) -> Diagnostic {
    Diagnostic::new("E0103", at, format!("pack `{pack}` has no {what}"))
        .with_label(format!("missing {what}"))
        .with_help(format!(
            "{help} (or mark the pack `library` if it only holds shared definitions)"
        ))
}

fn name_ref(i: &ast::Ident) -> NameRef {
    NameRef {
        name: i.name.clone(),
        span: i.span,
    }
}

// The bodies of the items whose IR reads nothing but the item and the pack's
// declarations: a later edit of that item alone rebuilds it with these.

fn tool(t: &ast::Tool, doc: Option<String>, diags: &mut Vec<Diagnostic>) -> ToolIr {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for decl in t.input.iter().flatten() {
        if let Some(first) = seen.get(decl.name.name.as_ref()) {
            diags.push(
                Diagnostic::new(
                    "E0101",
                    decl.name.span,
                    format!("duplicate input field `{}`", decl.name.name),
                )
                .with_label("defined again here")
                .with_secondary(*first, "first defined here")
                .with_help("rename or remove one of the fields"),
            );
            continue;
        }
        seen.insert(&decl.name.name, decl.name.span);
        let mut schema = Ty::from_ast(&decl.ty.kind).json_schema();
        if let (Some(d), Value::Object(m)) = (&decl.doc, &mut schema) {
            m.insert("description".into(), json!(d));
        }
        properties.insert(decl.name.name.to_string(), schema);
        if !decl.ty.optional {
            required.push(json!(decl.name.name));
        }
    }
    // Built around its parts: `json!` would copy them.
    let mut input = Map::new();
    input.insert("type".into(), json!("object"));
    input.insert("properties".into(), Value::Object(properties));
    input.insert("required".into(), Value::Array(required));
    input.insert("additionalProperties".into(), Value::Bool(false));
    let input = Value::Object(input);
    for (present, what) in [
        (t.kind.is_some(), "kind"),
        (t.risk.is_some(), "risk"),
        (t.approval.is_some(), "approval"),
    ] {
        if !present {
            diags.push(
                Diagnostic::new(
                    "E0103",
                    t.name.span,
                    format!("tool `{}` has no `{what}`", t.name.name),
                )
                .with_label(format!("missing `{what}`"))
                .with_help(match what {
                    "kind" => {
                        "say what the tool does: `kind read` (free text such as read, write, admin)"
                    }
                    "risk" => "declare its risk: `risk low | medium | high | critical`",
                    _ => "declare how it is approved: `approval auto | confirm | review`",
                }),
            );
        }
    }
    ToolIr {
        name: t.name.name.to_string(),
        name_span: t.name.span,
        description: t.description.as_ref().map(|d| d.value.clone()),
        kind: t.kind.as_ref().map(|k| k.name.to_string()),
        kind_span: t.kind.as_ref().map(|k| k.span),
        risk: t.risk.map(|r| (r.value, r.span)),
        approval: t.approval.map(|a| (a.value, a.span)),
        input: Arc::new(input),
        doc,
    }
}

fn intent(pack: &Pack, item: &ast::Item, i: &ast::Intent, out: &mut BodyOut) -> IntentIr {
    let task = match &i.task {
        Some(t) => Some(out.checker(pack).template(t)),
        None => {
            out.diags.push(
                Diagnostic::new(
                    "E0103",
                    i.name.span,
                    format!("intent `{}` has no `task`", i.name.name),
                )
                .with_label("missing `task`")
                .with_help("every intent states its task: `task \"...\"`"),
            );
            None
        }
    };
    IntentIr {
        name: i.name.name.to_string(),
        name_span: i.name.span,
        fallback: i.fallback.is_some(),
        description: i.description.as_ref().map(|d| d.value.clone()),
        safety: i
            .safety
            .map_or(crate::artifact::SafetyMode::Autonomous, |s| s.value),
        tools: i.tools.iter().map(name_ref).collect(),
        task,
        budget: i.budget.as_ref().map(|b| IntentBudgetIr {
            keyword: b.keyword,
            overrides: b
                .overrides
                .iter()
                .map(|(n, s)| (name_ref(n), s.value))
                .collect(),
        }),
        doc: item.doc.clone(),
    }
}

fn policy(pack: &Pack, item: &ast::Item, p: &ast::Policy, out: &mut BodyOut) -> PolicyIr {
    let when = out.checker(pack).condition(&p.when);
    let mut effects = Vec::with_capacity(p.effects.len());
    for e in &p.effects {
        effects.push(match &e.kind {
            EffectKind::Refuse(s) => EffectIr::Refuse(s.value.clone()),
            EffectKind::Escalate(s) => EffectIr::Escalate(s.value.clone()),
            EffectKind::RequireApproval(n) => {
                EffectIr::RequireApproval(n.iter().map(name_ref).collect())
            }
            EffectKind::Deny(n) => EffectIr::Deny(n.iter().map(name_ref).collect()),
            EffectKind::Redact(n) => EffectIr::Redact(n.iter().map(name_ref).collect()),
            EffectKind::Instruct(s) => EffectIr::Instruct(out.checker(pack).template(s)),
        });
    }
    if effects.is_empty() {
        out.diags.push(
            Diagnostic::new("E0301", p.name.span, format!("policy `{}` has no effect", p.name.name))
                .with_label("does nothing when it fires")
                .with_help("add an effect: `refuse`, `escalate`, `require_approval`, `deny`, `redact` or `instruct`"),
        );
    }
    PolicyIr {
        name: p.name.name.to_string(),
        name_span: p.name.span,
        priority: p.priority.map_or(0, |p| p.value),
        advisory: p.advisory.is_some(),
        when: Arc::new(when),
        when_span: p.when.span,
        effects,
        doc: item.doc.clone(),
    }
}

fn block(pack: &Pack, item: &ast::Item, bl: &ast::Block, out: &mut BodyOut) -> BlockIr {
    let text = out.checker(pack).template(&bl.text);
    BlockIr {
        name: bl.name.name.to_string(),
        name_span: bl.name.span,
        bucket: name_ref(&bl.bucket),
        priority: bl.priority.map_or(0, |p| p.value),
        text,
        doc: item.doc.clone(),
    }
}

fn redactor(item: &ast::Item, r: &ast::Redactor) -> RedactorIr {
    RedactorIr {
        name: r.name.name.to_string(),
        name_span: r.name.span,
        pattern: r.pattern.value.clone(),
        pattern_span: r.pattern.span,
        doc: item.doc.clone(),
    }
}

/// One item's IR, built alone: see [`item_alone`].
#[derive(Debug)]
pub(crate) enum ItemIr {
    Tool(ToolIr),
    Intent(IntentIr),
    Policy(PolicyIr),
    Redactor(RedactorIr),
    Block(BlockIr),
}

/// The IR of `item` against `pack`'s declarations, as [`build`] makes it of a tool,
/// (not `fallback`) intent, policy, redactor or block that is the first of its name
/// in an application pack (the caller knows that much from an earlier build), with
/// the body's diagnostics; `None` for the other items.
pub(crate) fn item_alone(pack: &Pack, item: &ast::Item) -> Option<(ItemIr, Vec<Diagnostic>)> {
    let mut out = BodyOut::default();
    let built = match &item.kind {
        ItemKind::Tool(t) => ItemIr::Tool(tool(t, item.doc.clone(), &mut out.diags)),
        ItemKind::Intent(i) if i.fallback.is_none() && !pack.library => {
            ItemIr::Intent(intent(pack, item, i, &mut out))
        }
        ItemKind::Policy(p) => ItemIr::Policy(policy(pack, item, p, &mut out)),
        ItemKind::Redactor(r) => ItemIr::Redactor(redactor(item, r)),
        ItemKind::Block(bl) => ItemIr::Block(block(pack, item, bl, &mut out)),
        _ => return None,
    };
    Some((built, out.diags))
}

/// Records the fallback intent `name`; E0106 when it is the second.
fn second_fallback(name: &ast::Ident, seen: &mut Seen, out: &mut BodyOut) {
    if let Some(first) = seen.fallback {
        out.diags.push(
            Diagnostic::new(
                "E0106",
                name.span,
                format!("intent `{}` is a second `fallback`", name.name),
            )
            .with_label("second fallback intent")
            .with_secondary(first, "first fallback here")
            .with_help(
                "a pack has at most one fallback intent; remove `fallback` from one of them",
            ),
        );
    } else {
        seen.fallback = Some(name.span);
    }
}
