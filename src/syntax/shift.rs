//! Moving a parsed item by a number of bytes: what lets an edit reuse the items after
//! it instead of parsing them again. Every span of the item moves by the same delta.

use super::ast::*;
use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// Moves every span by `delta` bytes.
pub(crate) trait Shift {
    fn shift(&mut self, delta: isize);
}

fn moved(at: usize, delta: isize) -> usize {
    at.saturating_add_signed(delta)
}

impl Shift for Span {
    fn shift(&mut self, delta: isize) {
        *self = Span::new(moved(self.start, delta), moved(self.end, delta));
    }
}

impl<T: Shift> Shift for Option<T> {
    fn shift(&mut self, delta: isize) {
        if let Some(x) = self {
            x.shift(delta);
        }
    }
}

impl<T: Shift> Shift for Vec<T> {
    fn shift(&mut self, delta: isize) {
        for x in self {
            x.shift(delta);
        }
    }
}

impl<T: Shift> Shift for Box<T> {
    fn shift(&mut self, delta: isize) {
        (**self).shift(delta);
    }
}

impl<T> Shift for Spanned<T> {
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
    }
}

impl Shift for Ident {
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
    }
}

impl Shift for StrLit {
    /// The offsets are relative to the span: only the span moves.
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
    }
}

impl Shift for Item {
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
        self.keyword.shift(delta);
        self.kind.shift(delta);
    }
}

impl Shift for ItemKind {
    fn shift(&mut self, delta: isize) {
        match self {
            ItemKind::Import(i) => {
                i.name.shift(delta);
                i.version.shift(delta);
            }
            ItemKind::Description(s) => s.shift(delta),
            ItemKind::Context(fields) => fields.shift(delta),
            ItemKind::Prompt(p) => {
                p.role_span.shift(delta);
                p.text.shift(delta);
            }
            ItemKind::Budget(b) => {
                b.total.shift(delta);
                b.tokenizer.shift(delta);
                for k in &mut b.buckets {
                    k.name.shift(delta);
                    k.share.shift(delta);
                    k.priority.shift(delta);
                    k.min.shift(delta);
                    k.overflow.shift(delta);
                    k.span.shift(delta);
                }
            }
            ItemKind::Tool(t) => {
                t.name.shift(delta);
                t.description.shift(delta);
                t.kind.shift(delta);
                t.risk.shift(delta);
                t.approval.shift(delta);
                for i in t.input.iter_mut().flatten() {
                    i.name.shift(delta);
                    i.ty.shift(delta);
                }
            }
            ItemKind::Prohibit(names) => names.shift(delta),
            ItemKind::Intent(i) => {
                i.name.shift(delta);
                i.fallback.shift(delta);
                i.description.shift(delta);
                i.safety.shift(delta);
                i.tools.shift(delta);
                i.task.shift(delta);
                if let Some(b) = &mut i.budget {
                    b.keyword.shift(delta);
                    for (name, share) in &mut b.overrides {
                        name.shift(delta);
                        share.shift(delta);
                    }
                }
            }
            ItemKind::Redactor(r) => {
                r.name.shift(delta);
                r.pattern.shift(delta);
            }
            ItemKind::Policy(p) => {
                p.name.shift(delta);
                p.priority.shift(delta);
                p.advisory.shift(delta);
                p.when.shift(delta);
                for e in &mut p.effects {
                    e.keyword.shift(delta);
                    match &mut e.kind {
                        EffectKind::Refuse(s)
                        | EffectKind::Escalate(s)
                        | EffectKind::Instruct(s) => s.shift(delta),
                        EffectKind::RequireApproval(n)
                        | EffectKind::Deny(n)
                        | EffectKind::Redact(n) => n.shift(delta),
                    }
                }
            }
            ItemKind::Block(b) => {
                b.name.shift(delta);
                b.bucket.shift(delta);
                b.priority.shift(delta);
                b.text.shift(delta);
            }
            ItemKind::Session(s) => s.shift(delta),
            ItemKind::Broken(b) => {
                b.name.shift(delta);
                b.fields.shift(delta);
            }
        }
    }
}

impl Shift for FieldDecl {
    fn shift(&mut self, delta: isize) {
        self.path.shift(delta);
        self.ty.shift(delta);
    }
}

impl Shift for TypeExpr {
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
        self.kind.shift(delta);
    }
}

impl Shift for TypeKind {
    fn shift(&mut self, delta: isize) {
        match self {
            TypeKind::List(inner) => inner.shift(delta),
            TypeKind::Enum(variants, _) => variants.shift(delta),
            TypeKind::String
            | TypeKind::Int
            | TypeKind::Float
            | TypeKind::Bool
            | TypeKind::Timestamp => {}
        }
    }
}

impl Shift for Expr {
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
        match &mut self.kind {
            ExprKind::Or(items) | ExprKind::And(items) | ExprKind::List(items) => {
                items.shift(delta)
            }
            ExprKind::Not(inner) | ExprKind::Paren(inner) => inner.shift(delta),
            ExprKind::Cmp {
                op_span, lhs, rhs, ..
            } => {
                op_span.shift(delta);
                lhs.shift(delta);
                rhs.shift(delta);
            }
            ExprKind::Str(s) => s.shift(delta),
            ExprKind::Exists(_, span) => span.shift(delta),
            ExprKind::Json(_, strings) => {
                for (_, span) in strings {
                    span.shift(delta);
                }
            }
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Invalid
            | ExprKind::Path(_) => {}
        }
    }
}

impl Shift for Diagnostic {
    fn shift(&mut self, delta: isize) {
        self.span.shift(delta);
        for l in &mut self.labels {
            l.span.shift(delta);
        }
        if let Some(s) = &mut self.suggestion {
            s.span.shift(delta);
        }
    }
}
