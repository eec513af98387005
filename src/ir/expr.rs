//! Typing `when` conditions and templates, and lowering conditions to JsonLogic.
//!
//! A path that failed to resolve types as [`Ty::Error`], which every check accepts
//! silently: one mistake, one diagnostic.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::scope::{all_paths, resolve};
use super::{Pack, Reference, SymbolKind, TemplateIr, Ty};
use crate::artifact::TemplatePart;
use crate::diagnostic::{nearest, Diagnostic};
use crate::span::Span;
use crate::syntax::ast::{CmpOp, Expr, ExprKind, StrLit};
use crate::syntax::template::{self, Piece};

/// The JsonLogic engine whose operator set raw `json { ... }` is checked against: the
/// same engine (and configuration) the runtime evaluates with.
pub fn engine() -> &'static datalogic_rs::Engine {
    static ENGINE: OnceLock<datalogic_rs::Engine> = OnceLock::new();
    ENGINE.get_or_init(datalogic_rs::Engine::new)
}

pub struct Checker<'a> {
    pub pack: &'a Pack,
    pub diags: &'a mut Vec<Diagnostic>,
    pub refs: &'a mut Vec<Reference>,
}

/// The result of typing a sub-expression.
struct Typed {
    ty: Ty,
    logic: Value,
}

impl Checker<'_> {
    /// Types a policy condition and lowers it to JsonLogic.
    pub fn condition(&mut self, expr: &Expr) -> Value {
        let before = self.diags.iter().filter(|d| d.is_error()).count();
        let first = self.diags.len();
        let typed = self.expr(expr, &[]);
        // E0204 is reported at the whole condition (its operand labelled), like a whole
        // condition that is not boolean.
        for d in &mut self.diags[first..] {
            if d.code == "E0204" && d.span != expr.span {
                let operand = std::mem::replace(&mut d.span, expr.span);
                let label =
                    std::mem::replace(&mut d.label, "condition with a non-boolean operand".into());
                d.labels.insert(
                    0,
                    crate::diagnostic::Label {
                        span: operand,
                        message: label,
                    },
                );
            }
        }
        // One W0201 per optional field per condition, at its first unguarded use:
        // `ctx.total > 5 and ctx.total < 10` is one missing guard, not two.
        let mut warned = std::collections::HashSet::new();
        let mut condition = self.diags.split_off(first);
        condition.retain(|d| d.code != "W0201" || warned.insert(d.message.clone()));
        self.diags.append(&mut condition);
        let failed = self.diags.iter().filter(|d| d.is_error()).count() > before;
        if !failed && !matches!(typed.ty, Ty::Bool | Ty::Any | Ty::Error) {
            self.diags.push(
                Diagnostic::new(
                    "E0204",
                    expr.span,
                    format!(
                        "`when` condition is not boolean: it has type `{}`",
                        typed.ty.describe()
                    ),
                )
                .with_label("not a bool")
                .with_help(
                    "compare the value, e.g. `ctx.count > 0`, or test presence with `exists(...)`",
                ),
            );
        } else if let Some((label, help)) = constant_condition(expr).filter(|_| !failed) {
            self.diags.push(
                Diagnostic::new(
                    "W0202",
                    expr.span,
                    "condition is constant: the policy always or never fires",
                )
                .with_label(label)
                .with_help(help),
            );
        }
        typed.logic
    }

    /// Resolves the paths of a template and builds its artifact form.
    pub fn template(&mut self, lit: &StrLit) -> TemplateIr {
        let pieces = template::parse(lit, self.diags);
        let mut parts = Vec::with_capacity(pieces.len());
        for piece in pieces {
            match piece {
                Piece::Text(t) => parts.push(TemplatePart::Text(t)),
                Piece::Interp(i) => {
                    match resolve(self.pack, &i.path) {
                        None => self.unknown_path(&i.path, i.path_span),
                        Some(r) => {
                            if let Some(field) = &r.field {
                                self.refs.push(Reference {
                                    kind: SymbolKind::Field,
                                    name: field.as_str().into(),
                                    span: i.path_span,
                                });
                            }
                            if r.optional && i.default.is_none() {
                                self.diags.push(
                                    Diagnostic::new(
                                        "W0201",
                                        i.path_span,
                                        format!("optional field `{}` is interpolated without a default", i.path),
                                    )
                                    .with_label("may be absent")
                                    .with_help(format!(
                                        "give a default: `{{{{ {} | \"unknown\" }}}}` (absent fields render as empty text)",
                                        i.path
                                    )),
                                );
                            }
                        }
                    }
                    parts.push(TemplatePart::Path {
                        path: i.path,
                        default: i.default,
                    });
                }
            }
        }
        TemplateIr {
            text: crate::artifact::Template::text_of(&parts).into(),
            parts: parts.into(),
            span: lit.span,
        }
    }

    fn unknown_path(&mut self, path: &str, span: Span) {
        self.unknown_path_as(path, span, &|best| best.to_owned());
    }

    /// As [`Self::unknown_path`], where `span` holds the path written another way:
    /// `replacement` writes a suggested path so.
    fn unknown_path_as(&mut self, path: &str, span: Span, replacement: &dyn Fn(&str) -> String) {
        if let Some(field) = path.strip_prefix("ctx.") {
            if self.pack.unresolved_imports || self.pack.may_declare(field) {
                return;
            }
        }
        let candidates = all_paths(self.pack);
        let mut d = Diagnostic::new("E0201", span, format!("unknown field path `{path}`"))
            .with_label("no such field");
        let session = crate::ir::scope::SESSION_PATHS.contains(&path);
        if session && self.pack.session.is_none() {
            d = d.with_help(
                "`session.*` paths exist in packs that declare `session directives` (an item of its own)",
            );
        } else if let Some(best) = nearest(path, candidates.iter().map(String::as_str)) {
            d = d.with_suggestion(span, &replacement(best));
            d.help = Some(format!("did you mean `{best}`?"));
        } else if !path.starts_with("ctx.")
            && !path.starts_with("request.")
            && !path.starts_with("run.")
        {
            d = d.with_help(
                "paths start with `ctx.` (the pack's context), `request.`, `run.` or `session.`",
            );
        } else {
            d = d.with_help("declare the field in a `context { ... }` block");
        }
        self.diags.push(d);
    }

    fn expr(&mut self, e: &Expr, guards: &[String]) -> Typed {
        match &e.kind {
            ExprKind::Paren(inner) => self.expr(inner, guards),
            ExprKind::Str(s) => typed(Ty::String, json!(s.value)),
            ExprKind::Int(i) => typed(Ty::Int, json!(i)),
            ExprKind::Float(f) => typed(Ty::Float, json!(f)),
            ExprKind::Bool(b) => typed(Ty::Bool, json!(b)),
            ExprKind::Null => typed(Ty::Null, Value::Null),
            ExprKind::Path(p) => self.path(p, e.span, guards),
            ExprKind::Exists(p, span) => {
                match resolve(self.pack, p) {
                    None => self.unknown_path(p, *span),
                    Some(r) => {
                        if let Some(field) = r.field {
                            self.refs.push(Reference {
                                kind: SymbolKind::Field,
                                name: field.into(),
                                span: *span,
                            });
                        }
                    }
                }
                typed(Ty::Bool, json!({ "!==": [{ "var": p }, null] }))
            }
            ExprKind::Json(None, _) | ExprKind::Invalid => typed(Ty::Error, Value::Null),
            ExprKind::Json(Some(v), strings) => {
                self.json(v, &mut Locator::new(e.span, strings));
                typed(Ty::Any, v.clone())
            }
            ExprKind::List(items) => {
                let mut element: Option<Ty> = None;
                let mut logic = Vec::with_capacity(items.len());
                for item in items {
                    let t = self.expr(item, guards);
                    logic.push(t.logic);
                    if t.ty.is_unknown() || t.ty == Ty::Null {
                        continue;
                    }
                    match &element {
                        None => element = Some(t.ty),
                        Some(first) if !compatible(first, &t.ty) => {
                            self.diags.push(
                                Diagnostic::new(
                                    "E0202",
                                    item.span,
                                    format!(
                                        "list elements must share one type: found `{}` after `{}`",
                                        t.ty.describe(),
                                        first.describe()
                                    ),
                                )
                                .with_label(format!("`{}`", t.ty.describe()))
                                .with_help("write every element of a list with the same type"),
                            );
                        }
                        Some(_) => {}
                    }
                }
                typed(
                    Ty::List(Box::new(element.unwrap_or(Ty::Any))),
                    Value::Array(logic),
                )
            }
            ExprKind::Not(inner) => {
                let t = self.expr(inner, guards);
                self.expect_bool(&t.ty, inner, "not");
                typed(Ty::Bool, operation("!", vec![t.logic]))
            }
            ExprKind::And(items) => {
                let mut scope: Vec<String> = guards.to_vec();
                let mut logic = Vec::with_capacity(items.len());
                for item in items {
                    let t = self.expr(item, &scope);
                    self.expect_bool(&t.ty, item, "and");
                    logic.push(t.logic);
                    collect_guards(item, &mut scope);
                }
                typed(Ty::Bool, operation("and", logic))
            }
            ExprKind::Or(items) => {
                // `not exists(x) or x > 5`: an operand of `or` is read only when the
                // ones before it are false, so what their falsity proves present
                // guards it.
                let mut scope: Vec<String> = guards.to_vec();
                let mut logic = Vec::with_capacity(items.len());
                for item in items {
                    let t = self.expr(item, &scope);
                    self.expect_bool(&t.ty, item, "or");
                    logic.push(t.logic);
                    collect_absences(item, &mut scope);
                }
                typed(Ty::Bool, operation("or", logic))
            }
            ExprKind::Cmp {
                op,
                op_span,
                lhs,
                rhs,
            } => {
                // `x == null` and `x != null` test presence themselves: the path
                // needs no `exists()` guard there.
                let presence: Cow<'_, [String]> = match null_tested(*op, lhs, rhs) {
                    Some(path) => Cow::Owned([guards, std::slice::from_ref(path)].concat()),
                    None => Cow::Borrowed(guards),
                };
                let l = self.expr(lhs, &presence);
                let r = self.expr(rhs, &presence);
                self.compare(*op, *op_span, lhs, &l.ty, rhs, &r.ty);
                let name = match op {
                    CmpOp::Eq => "===",
                    CmpOp::Ne => "!==",
                    other => other.as_str(),
                };
                typed(Ty::Bool, operation(name, vec![l.logic, r.logic]))
            }
        }
    }

    fn path(&mut self, path: &str, span: Span, guards: &[String]) -> Typed {
        let logic = json!({ "var": path });
        let Some(r) = resolve(self.pack, path) else {
            self.unknown_path(path, span);
            return typed(Ty::Error, logic);
        };
        if let Some(field) = &r.field {
            self.refs.push(Reference {
                kind: SymbolKind::Field,
                name: field.as_str().into(),
                span,
            });
        }
        if r.optional && !guards.iter().any(|g| g == path) {
            self.diags.push(
                Diagnostic::new(
                    "W0201",
                    span,
                    format!("optional field `{path}` is used without an `exists()` guard"),
                )
                .with_label("may be absent")
                .with_help(format!(
                    "guard it in an earlier conjunct: `exists({path}) and ...`"
                )),
            );
        }
        typed(r.ty, logic)
    }

    fn expect_bool(&mut self, ty: &Ty, operand: &Expr, op: &str) {
        if !matches!(ty, Ty::Bool | Ty::Any | Ty::Error) {
            self.diags.push(
                Diagnostic::new(
                    "E0204",
                    operand.span,
                    format!(
                        "operand of `{op}` is not boolean: it has type `{}`",
                        ty.describe()
                    ),
                )
                .with_label("not a bool")
                .with_help(
                    "compare the value, e.g. `ctx.count > 0`, or test presence with `exists(...)`",
                ),
            );
        }
    }

    fn compare(&mut self, op: CmpOp, op_span: Span, lhs: &Expr, l: &Ty, rhs: &Expr, r: &Ty) {
        if l.is_unknown() || r.is_unknown() {
            return;
        }
        match op {
            CmpOp::Eq | CmpOp::Ne => {
                if self.intent_literal(lhs, rhs) || self.intent_literal(rhs, lhs) {
                    return;
                }
                if self.enum_literal(l, rhs) || self.enum_literal(r, lhs) {
                    return;
                }
                if self.enum_list_literal(l, rhs) || self.enum_list_literal(r, lhs) {
                    return;
                }
                if !compatible(l, r) {
                    self.mismatch(op, op_span, l, r);
                }
            }
            CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                if !(l.is_number() && r.is_number()) {
                    self.diags.push(
                        Diagnostic::new(
                            "E0202",
                            op_span,
                            format!(
                                "`{}` compares numbers, not `{}` and `{}`",
                                op.as_str(),
                                l.describe(),
                                r.describe()
                            ),
                        )
                        .with_label("needs two numbers")
                        .with_help("order comparisons take `int` or `float` operands"),
                    );
                }
            }
            CmpOp::In => match r {
                Ty::List(_) if matches!(&strip(lhs).kind, ExprKind::Path(p) if p == "request.intent") =>
                {
                    // `request.intent in ["a", "b"]`: each name must be a declared intent.
                    if let ExprKind::List(items) = &strip(rhs).kind {
                        for item in items {
                            self.intent_literal(lhs, item);
                        }
                    }
                }
                Ty::List(item) => {
                    if let ExprKind::List(items) = &strip(rhs).kind {
                        if let Ty::Enum(_) = l {
                            let mut reported = false;
                            for item in items {
                                reported |= self.enum_literal(l, item);
                            }
                            if reported {
                                return;
                            }
                        }
                    }
                    if self.enum_literal(item, lhs) {
                        return;
                    }
                    if !item.is_unknown() && !compatible(l, item) {
                        self.mismatch(op, op_span, l, r);
                    }
                }
                Ty::String if *l == Ty::String => {}
                // `x in "text"` tests a substring: the left must be a string too.
                Ty::String => {
                    self.diags.push(
                        Diagnostic::new(
                            "E0202",
                            op_span,
                            format!(
                                "`in` a string tests for a substring, so the left side must be a `string`, found `{}`",
                                l.describe()
                            ),
                        )
                        .with_label(format!("`{}` in `string`", l.describe()))
                        .with_help("compare with `==`, or test membership in a list: `x in [\"a\", \"b\"]`"),
                    );
                }
                _ => {
                    self.diags.push(
                        Diagnostic::new(
                            "E0202",
                            op_span,
                            format!(
                                "`in` needs a list (or a string) on its right, found `{}`",
                                r.describe()
                            ),
                        )
                        .with_label(format!("`{}` in `{}`", l.describe(), r.describe()))
                        .with_help("write `x in [\"a\", \"b\"]` or `\"tag\" in ctx.list_field`"),
                    );
                }
            },
        }
    }

    fn mismatch(&mut self, op: CmpOp, span: Span, l: &Ty, r: &Ty) {
        self.diags.push(
            Diagnostic::new(
                "E0202",
                span,
                format!("cannot compare `{}` with `{}` using `{}`", l.describe(), r.describe(), op.as_str()),
            )
            .with_label("incompatible types")
            .with_help("compare numbers with numbers, strings with strings, enums with one of their variants, bools with bools"),
        );
    }

    /// `request.intent == "x"`: `x` must name a declared intent. Returns true when
    /// this was such a comparison (and it has been checked).
    fn intent_literal(&mut self, path: &Expr, lit: &Expr) -> bool {
        let (ExprKind::Path(p), ExprKind::Str(s)) = (&strip(path).kind, &strip(lit).kind) else {
            return false;
        };
        if p != "request.intent" {
            return false;
        }
        let name = &s.value;
        if self.pack.declares(SymbolKind::Intent, name) {
            self.refs.push(Reference {
                kind: SymbolKind::Intent,
                name: name.as_str().into(),
                span: s.span,
            });
        } else if !self.pack.library {
            // Unknown, unless this is a library: a library declares no intents, the
            // packs that import it do, so there the name is theirs to resolve.
            let mut d = Diagnostic::new("E0102", s.span, format!("unknown intent `{name}`"))
                .with_label("no intent of this name");
            match nearest(name, self.pack.names(SymbolKind::Intent)) {
                Some(best) => {
                    let best = format!("\"{best}\"");
                    d = d.with_suggestion(s.span, &best);
                }
                None => d = d.with_help("declare it with `intent NAME { ... }`"),
            }
            self.diags.push(d);
        }
        true
    }

    /// An enum compared with a string literal: the literal must be a variant.
    /// Returns true when this was such a comparison (and it has been checked).
    fn enum_literal(&mut self, ty: &Ty, lit: &Expr) -> bool {
        let (Ty::Enum(variants), ExprKind::Str(s)) = (ty, &strip(lit).kind) else {
            return false;
        };
        if !variants.contains(&s.value) {
            let quoted: Vec<String> = variants.iter().map(|v| format!("\"{v}\"")).collect();
            let mut d = Diagnostic::new(
                "E0203",
                s.span,
                format!(
                    "`{}` is not a variant of `enum({})`",
                    s.value,
                    quoted.join(", ")
                ),
            )
            .with_label("not a variant");
            match nearest(&s.value, variants.iter().map(String::as_str)) {
                Some(best) => d = d.with_suggestion(s.span, &format!("\"{best}\"")),
                None => d = d.with_help(format!("the variants are {}", quoted.join(", "))),
            }
            self.diags.push(d);
        }
        true
    }

    /// A list of enums compared with a list literal (`ctx.tags == ["a", "b"]`, nested
    /// lists too): each string in it must be a variant. True when one was not (and
    /// has been reported).
    fn enum_list_literal(&mut self, ty: &Ty, lit: &Expr) -> bool {
        let (Ty::List(inner), ExprKind::List(items)) = (ty, &strip(lit).kind) else {
            return false;
        };
        let mut reported = false;
        for item in items {
            reported |= match &**inner {
                Ty::Enum(_) => {
                    let before = self.diags.len();
                    self.enum_literal(inner, item) && self.diags.len() > before
                }
                _ => self.enum_list_literal(inner, item),
            };
        }
        reported
    }

    /// Checks raw JsonLogic: operators the engine knows, one key per operation, `var`
    /// paths that exist, and the engine's own compilation.
    fn json(&mut self, value: &Value, at: &mut Locator<'_>) {
        let before = self.diags.len();
        self.json_walk(value, at, false);
        let span = at.whole;
        if self.diags.len() > before {
            return;
        }
        if let Err(e) = engine().compile(value.to_string().as_str()) {
            self.diags.push(
                Diagnostic::new("E0205", span, format!("malformed JsonLogic: {e}"))
                    .with_label("rejected by the JsonLogic engine")
                    .with_help("see `ctxpack explain E0205` for the accepted operators"),
            );
        }
    }

    fn json_walk(&mut self, value: &Value, at: &mut Locator<'_>, in_iteration: bool) {
        match value {
            Value::Array(items) => {
                for item in items {
                    self.json_walk(item, at, in_iteration);
                }
            }
            Value::Object(map) => {
                if map.len() != 1 {
                    self.diags.push(
                        Diagnostic::new(
                            "E0205",
                            at.whole,
                            format!("a JsonLogic operation is an object with exactly one key, found {} keys", map.len()),
                        )
                        .with_label("malformed JsonLogic")
                        .with_help("write `{ \"operator\": [arguments] }`"),
                    );
                    return;
                }
                let Some((op, args)) = map.iter().next() else {
                    return;
                };
                if !engine().builtin_operator_names().any(|known| known == op) {
                    let mut d = Diagnostic::new(
                        "E0205",
                        at.string(op),
                        format!("unknown JsonLogic operator `{op}`"),
                    )
                    .with_label("the runtime cannot evaluate this");
                    let known: Vec<&str> = engine().builtin_operator_names().collect();
                    match nearest(op, known.iter().copied()) {
                        Some(best) => d = d.with_help(format!("did you mean `{best}`?")),
                        None => {
                            d = d
                                .with_help("see `ctxpack explain E0205` for the accepted operators")
                        }
                    }
                    self.diags.push(d);
                    return;
                }
                if op == "val" && !in_iteration {
                    self.val_path(args, at);
                    return;
                }
                if op == "var" && !in_iteration {
                    let path = match args {
                        Value::String(s) => Some(s.as_str()),
                        Value::Array(a) => a.first().and_then(Value::as_str),
                        _ => None,
                    };
                    if let Some(path) = path.filter(|p| !p.is_empty()) {
                        let span = at.string(path);
                        if resolve(self.pack, path).is_none() {
                            self.unknown_path(path, span);
                        }
                    }
                    return;
                }
                if !in_iteration {
                    self.json_intent_names(op, args, at);
                    // `missing` and `missing_some` read the paths they name.
                    for path in presence_paths(op, args) {
                        let span = at.string(path);
                        if resolve(self.pack, path).is_none() {
                            self.unknown_path(path, span);
                        }
                    }
                }
                let iterates = matches!(
                    op.as_str(),
                    "map" | "filter" | "reduce" | "all" | "some" | "none"
                );
                match args {
                    Value::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            self.json_walk(item, at, in_iteration || (iterates && i > 0));
                        }
                    }
                    other => self.json_walk(other, at, in_iteration),
                }
            }
            _ => {}
        }
    }
}

impl Checker<'_> {
    /// The path a `val` reads must exist (E0201), as a `var`'s must. The engine reads
    /// `val`'s arguments as the path's keys, one by one (`{"val": ["ctx", "user",
    /// "age"]}`, or that list as one argument), and a single string as one key: so
    /// `{"val": "ctx.user.age"}` reads a top-level key named `ctx.user.age`, which
    /// the data never has, and is always null. A path with a number (an index) or
    /// a scope level (`[[1], ...]`) is not checked.
    fn val_path(&mut self, args: &Value, at: &mut Locator<'_>) {
        let (segments, one_string): (&[Value], bool) = match args {
            Value::String(_) => (std::slice::from_ref(args), true),
            Value::Array(items) => match items.as_slice() {
                [Value::Array(inner)] => (inner, false),
                _ => (items, false),
            },
            _ => return,
        };
        let Some(keys) = segments
            .iter()
            .map(Value::as_str)
            .collect::<Option<Vec<&str>>>()
            .filter(|keys| !keys.is_empty())
        else {
            return;
        };
        // From the first key's text to the last's, inside their quotes; a single
        // string with its quotes, as a suggestion replaces it with a list.
        let spans: Vec<Span> = keys.iter().map(|k| at.string(k)).collect();
        let span = match (spans.first(), spans.last()) {
            (Some(first), Some(last)) if *first != at.whole && first.start <= last.end => {
                match one_string {
                    true => Span::new(first.start.saturating_sub(1), last.end + 1),
                    false => Span::new(first.start, last.end),
                }
            }
            _ => at.whole,
        };
        let keys_of = move |path: &str| {
            let listed = path.replace('.', "\", \"");
            match one_string {
                true => format!("[\"{listed}\"]"),
                false => listed,
            }
        };
        let path = keys.join(".");
        if let Some(dotted) = keys.iter().find(|k| k.contains('.')) {
            let mut d = Diagnostic::new(
                "E0201",
                span,
                format!("unknown field path `{dotted}`: `val` reads it as one key, dots included"),
            )
            .with_label("no key has this name: the value is always null");
            if resolve(self.pack, &path).is_some() && span != at.whole {
                d = d.with_suggestion(span, &keys_of(&path));
            }
            let quoted: Vec<String> = path.split('.').map(|k| format!("\"{k}\"")).collect();
            d.help = Some(format!(
                "`val` takes a path's keys one by one: write `{{\"val\": [{}]}}`, or `{{\"var\": \"{path}\"}}`",
                quoted.join(", ")
            ));
            self.diags.push(d);
            return;
        }
        if resolve(self.pack, &path).is_none() {
            self.unknown_path_as(&path, span, &keys_of);
        }
    }

    /// Raw JsonLogic that compares `request.intent` with strings (`==`, `===`, `!=`,
    /// `!==`, or `in` a list of strings): each string must name a declared intent, as
    /// in the expression syntax (E0102, at the `json { ... }` operand).
    fn json_intent_names(&mut self, op: &str, args: &Value, at: &mut Locator<'_>) {
        let Value::Array(args) = args else { return };
        let is_intent = |v: &Value| {
            let path = match v.get("var") {
                Some(Value::String(p)) => Some(p.as_str()),
                Some(Value::Array(a)) => a.first().and_then(Value::as_str),
                _ => None,
            };
            path == Some("request.intent")
        };
        let names: Vec<&str> = match (op, args.as_slice()) {
            ("==" | "===" | "!=" | "!==", [a, b]) if is_intent(a) => {
                b.as_str().into_iter().collect()
            }
            ("==" | "===" | "!=" | "!==", [a, b]) if is_intent(b) => {
                a.as_str().into_iter().collect()
            }
            ("in", [a, Value::Array(list)]) if is_intent(a) => {
                list.iter().filter_map(Value::as_str).collect()
            }
            _ => return,
        };
        for name in names {
            // A library's intents are its importers' (see `intent_literal`).
            if self.pack.library || self.pack.declares(SymbolKind::Intent, name) {
                continue;
            }
            let mut d =
                Diagnostic::new("E0102", at.string(name), format!("unknown intent `{name}`"))
                    .with_label("names no intent of this pack");
            d = match nearest(name, self.pack.names(SymbolKind::Intent)) {
                Some(best) => d.with_help(format!("did you mean `{best}`?")),
                None => d.with_help("declare it with `intent NAME { ... }`"),
            };
            self.diags.push(d);
        }
    }
}

/// Where the strings of a raw JSON condition are written: a diagnostic on a path,
/// operator or intent name inside the JSON points at its text. The JSON value has no
/// positions, so the walk takes the literals in source order: each string found is
/// the first unclaimed literal with its value. A string written with escapes is not
/// found, and the diagnostic is on the whole `json { ... }`.
struct Locator<'a> {
    /// The whole `json { ... }`.
    whole: Span,
    strings: &'a [(String, Span)],
    claimed: Vec<bool>,
}

impl<'a> Locator<'a> {
    fn new(whole: Span, strings: &'a [(String, Span)]) -> Self {
        Locator {
            whole,
            strings,
            claimed: vec![false; strings.len()],
        }
    }

    /// The span of the next unclaimed literal `value`, or the whole JSON.
    fn string(&mut self, value: &str) -> Span {
        let found = self
            .strings
            .iter()
            .zip(self.claimed.iter_mut())
            .find(|((s, _), claimed)| !**claimed && s == value);
        match found {
            Some(((_, span), claimed)) => {
                *claimed = true;
                *span
            }
            None => self.whole,
        }
    }
}

fn typed(ty: Ty, logic: Value) -> Typed {
    Typed { ty, logic }
}

fn strip(e: &Expr) -> &Expr {
    match &e.kind {
        ExprKind::Paren(inner) => strip(inner),
        _ => e,
    }
}

/// Can values of these types be compared with `==`?
fn compatible(a: &Ty, b: &Ty) -> bool {
    if a.is_unknown() || b.is_unknown() || *a == Ty::Null || *b == Ty::Null {
        return true;
    }
    match (a, b) {
        (x, y) if x.is_number() && y.is_number() => true,
        (Ty::String | Ty::Enum(_) | Ty::Timestamp, Ty::String | Ty::Enum(_) | Ty::Timestamp) => {
            true
        }
        (Ty::Bool, Ty::Bool) => true,
        (Ty::List(x), Ty::List(y)) => compatible(x, y),
        _ => false,
    }
}

/// The path compared with `null` by `==` or `!=` (`ctx.a != null`, `null == ctx.a`).
fn null_tested<'e>(op: CmpOp, lhs: &'e Expr, rhs: &'e Expr) -> Option<&'e String> {
    if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
        return None;
    }
    match (&strip(lhs).kind, &strip(rhs).kind) {
        (ExprKind::Path(p), ExprKind::Null) | (ExprKind::Null, ExprKind::Path(p)) => Some(p),
        _ => None,
    }
}

/// The paths an operand of `or` proves present when it is false, for the operands
/// after it: `not exists(x)`, `x == null`, and `or`s of those.
fn collect_absences(e: &Expr, out: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Not(inner) => collect_guards(inner, out),
        ExprKind::Cmp {
            op: CmpOp::Eq,
            lhs,
            rhs,
            ..
        } => out.extend(null_tested(CmpOp::Eq, lhs, rhs).cloned()),
        ExprKind::Paren(inner) => collect_absences(inner, out),
        ExprKind::Or(items) => items.iter().for_each(|i| collect_absences(i, out)),
        _ => {}
    }
}

/// The paths an operand of `and` proves present for the conjuncts after it.
fn collect_guards(e: &Expr, out: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Exists(p, _) => out.push(p.clone()),
        // `x != null`, as `exists(x)`.
        ExprKind::Cmp {
            op: CmpOp::Ne,
            lhs,
            rhs,
            ..
        } => out.extend(null_tested(CmpOp::Ne, lhs, rhs).cloned()),
        ExprKind::Paren(inner) => collect_guards(inner, out),
        ExprKind::And(items) => items.iter().for_each(|i| collect_guards(i, out)),
        _ => {}
    }
}

/// W0202's label and help for a constant condition other than `when true`: one that
/// reads no field, or one whose value is decided whatever the fields it reads
/// (`X or true`, `X and false`). `None` for any other condition.
fn constant_condition(e: &Expr) -> Option<(&'static str, &'static str)> {
    const DECIDED: &str = "a literal `true` or `false` decides the condition whatever the \
                           fields hold: remove it, or write `when true` for a policy that \
                           always applies";
    if matches!(e.kind, ExprKind::Bool(true)) {
        return None;
    }
    if is_constant(e) {
        return Some((
            "reads no field",
            "write `when true` for a policy that always applies, or compare a `ctx`, \
             `request` or `run` field",
        ));
    }
    Some(match folded(e)? {
        true => ("always true, whatever the fields", DECIDED),
        false => ("always false, whatever the fields", DECIDED),
    })
}

/// The value of a condition that `true` or `false` operands decide on their own:
/// `X or true` is true and `X and false` is false whatever `X` reads.
fn folded(e: &Expr) -> Option<bool> {
    match &e.kind {
        ExprKind::Bool(b) => Some(*b),
        ExprKind::Paren(inner) => folded(inner),
        ExprKind::Not(inner) => folded(inner).map(|b| !b),
        ExprKind::And(items) => decided_by(items, false),
        ExprKind::Or(items) => decided_by(items, true),
        _ => None,
    }
}

/// `and` (`absorbing` false) and `or` (`absorbing` true): one operand equal to the
/// absorbing value decides the whole; so do operands all equal to the other value.
fn decided_by(items: &[Expr], absorbing: bool) -> Option<bool> {
    let values: Vec<Option<bool>> = items.iter().map(folded).collect();
    if values.contains(&Some(absorbing)) {
        return Some(absorbing);
    }
    values
        .iter()
        .all(|v| *v == Some(!absorbing))
        .then_some(!absorbing)
}

/// Does the condition read no field at all?
fn is_constant(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Path(_) | ExprKind::Exists(..) => false,
        ExprKind::Json(Some(v), _) => !mentions_var(v),
        ExprKind::Json(None, _) | ExprKind::Invalid => false,
        ExprKind::Str(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Bool(_)
        | ExprKind::Null => true,
        ExprKind::Paren(inner) | ExprKind::Not(inner) => is_constant(inner),
        ExprKind::And(items) | ExprKind::Or(items) | ExprKind::List(items) => {
            items.iter().all(is_constant)
        }
        ExprKind::Cmp { lhs, rhs, .. } => is_constant(lhs) && is_constant(rhs),
    }
}

/// The paths that JsonLogic's `missing` (`["a", "b"]`) and `missing_some`
/// (`[1, ["a", "b"]]`) test for presence.
fn presence_paths<'v>(op: &str, args: &'v Value) -> Vec<&'v str> {
    let strings = |v: &'v Value| match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut paths = match (op, args) {
        ("missing", args) => strings(args),
        ("missing_some", Value::Array(a)) => a.get(1).map(strings).unwrap_or_default(),
        _ => Vec::new(),
    };
    paths.retain(|p| !p.is_empty());
    paths
}

fn mentions_var(v: &Value) -> bool {
    match v {
        Value::Object(map) => map.iter().any(|(k, v)| {
            matches!(k.as_str(), "var" | "val" | "missing" | "missing_some") || mentions_var(v)
        }),
        Value::Array(items) => items.iter().any(mentions_var),
        _ => false,
    }
}

/// The JsonLogic operation `{ name: args }`, built around its arguments: `json!`
/// would copy each argument (and so every subexpression, once per level above it).
fn operation(name: &str, args: Vec<Value>) -> Value {
    let mut map = serde_json::Map::new();
    map.insert(name.to_owned(), Value::Array(args));
    Value::Object(map)
}
