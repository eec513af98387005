//! Static types of context fields, built-ins and expressions.

use serde_json::{json, Value};

use crate::artifact::Type;
use crate::syntax::ast::TypeKind;

/// The type of a field or an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    String,
    Int,
    Float,
    Bool,
    Timestamp,
    List(Box<Ty>),
    /// Shared with the syntax tree's type (and every field of that type).
    Enum(std::sync::Arc<[String]>),
    /// The `null` literal.
    Null,
    /// Raw JsonLogic: its type is not known statically.
    Any,
    /// The type of an expression that already failed; never reported again.
    Error,
}

impl Ty {
    pub fn from_ast(kind: &TypeKind) -> Ty {
        match kind {
            TypeKind::String => Ty::String,
            TypeKind::Int => Ty::Int,
            TypeKind::Float => Ty::Float,
            TypeKind::Bool => Ty::Bool,
            TypeKind::Timestamp => Ty::Timestamp,
            TypeKind::List(item) => Ty::List(Box::new(Ty::from_ast(item))),
            TypeKind::Enum(_, values) => Ty::Enum(values.clone()),
        }
    }

    pub fn from_artifact(ty: &Type) -> Ty {
        match ty {
            Type::String => Ty::String,
            Type::Int => Ty::Int,
            Type::Float => Ty::Float,
            Type::Bool => Ty::Bool,
            Type::Timestamp => Ty::Timestamp,
            Type::List { items } => Ty::List(Box::new(Ty::from_artifact(items))),
            Type::Enum { variants } => Ty::Enum(variants.as_slice().into()),
        }
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    /// `Error` and `Any` are compatible with everything, so one mistake is reported once.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Ty::Error | Ty::Any)
    }

    /// How the type is written in source, for messages.
    pub fn describe(&self) -> String {
        match self {
            Ty::String => "string".into(),
            Ty::Int => "int".into(),
            Ty::Float => "float".into(),
            Ty::Bool => "bool".into(),
            Ty::Timestamp => "timestamp".into(),
            Ty::List(item) => format!("list<{}>", item.describe()),
            Ty::Enum(variants) => {
                let quoted: Vec<String> = variants.iter().map(|v| format!("\"{v}\"")).collect();
                format!("enum({})", quoted.join(", "))
            }
            Ty::Null => "null".into(),
            Ty::Any => "json".into(),
            Ty::Error => "{unknown}".into(),
        }
    }

    /// The artifact's type model.
    pub fn to_artifact(&self) -> Type {
        match self {
            Ty::Int => Type::Int,
            Ty::Float => Type::Float,
            Ty::Bool => Type::Bool,
            Ty::Timestamp => Type::Timestamp,
            Ty::List(item) => Type::List {
                items: Box::new(item.to_artifact()),
            },
            Ty::Enum(variants) => Type::Enum {
                variants: variants.to_vec(),
            },
            Ty::String | Ty::Null | Ty::Any | Ty::Error => Type::String,
        }
    }

    /// A JSON Schema for values of this type.
    pub fn json_schema(&self) -> Value {
        match self {
            Ty::Int => json!({ "type": "integer" }),
            Ty::Float => json!({ "type": "number" }),
            Ty::Bool => json!({ "type": "boolean" }),
            Ty::Timestamp => json!({ "type": "string", "format": "date-time" }),
            Ty::List(item) => json!({ "type": "array", "items": item.json_schema() }),
            Ty::Enum(variants) => json!({ "type": "string", "enum": variants }),
            Ty::String | Ty::Null | Ty::Any | Ty::Error => json!({ "type": "string" }),
        }
    }
}
