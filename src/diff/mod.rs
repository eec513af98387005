//! Semantic diff of two artifacts: what a version bump really does.
//!
//! [`diff`] compares two artifacts item by item — tools, policies, budget, prompts,
//! intents, context, redactors, blocks, prohibitions, dependencies — and collects the
//! changes that matter for safety (approval or risk raised or lowered, a policy
//! removed, an intent granted a tool, …) into one list, so that a reviewer reads those
//! first. [`render`] turns the result into the human or JSON output of `ctxpack diff`.
//!
//! Items are matched by name (context fields by path, prohibitions by tool). A
//! provenance that names the pack itself (`scope/name@version`) is compared as "this
//! pack", so that bumping the version does not report every item as changed.

pub mod logic;
pub mod render;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::artifact::{
    Artifact, Block, Bucket, ContextField, Dependency, Intent, Policy, Prohibition, Redactor, Tool,
};

/// The difference between two artifacts. Serialized, it is the `--format json`
/// document: keys in a fixed order, every section always present.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArtifactDiff {
    pub from: PackId,
    pub to: PackId,
    /// Whether anything differs (the hash alone never counts: it follows the content).
    pub differs: bool,
    /// Safety-relevant changes, the ones that weaken safety first.
    pub safety: Vec<SafetyNote>,
    /// What the change does to each intent's tool surface, intent by name.
    pub impact: Vec<IntentImpact>,
    /// Pack-level fields: name, version, library, description, compiler, format.
    pub pack: Vec<FieldChange>,
    pub tools: Section,
    pub policies: Section,
    pub budget: BudgetDiff,
    /// `system` and `developer`, as unified text diffs.
    pub prompts: Vec<FieldChange>,
    pub intents: Section,
    pub context: Section,
    pub redactors: Section,
    pub blocks: Section,
    pub prohibitions: Section,
    pub dependencies: Section,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackId {
    pub name: String,
    pub version: String,
    pub hash: Option<String>,
}

/// Items of one kind that were added, removed or changed, each list sorted by name.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Section {
    pub added: Vec<Entry>,
    pub removed: Vec<Entry>,
    pub changed: Vec<ItemChange>,
}

impl Section {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// An added or removed item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub name: String,
    /// The whole item as it appears in the artifact.
    pub item: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub safety: Option<SafetyKind>,
    /// A one-line description for human output.
    #[serde(skip)]
    pub summary: String,
    /// What the item does, in source syntax (a policy's condition and effects), for
    /// human output.
    #[serde(skip)]
    pub does: Vec<String>,
}

/// An item present on both sides whose fields differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemChange {
    pub name: String,
    pub changes: Vec<FieldChange>,
    /// What the item did before the change (see [`Entry::does`]).
    #[serde(skip)]
    pub did: Vec<String>,
}

/// How one intent's tool surface changes: the tools a run of the intent can be
/// offered (permitted by the intent and not prohibited by the pack), with their
/// approval modes. Policies that `deny` or `require_approval` at run time are listed
/// with the policies, not here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntentImpact {
    pub intent: String,
    pub changes: Vec<ImpactChange>,
}

/// One change to an intent's surface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImpactChange {
    /// One sentence, e.g. "`open_dispute` now surfaces with `auto` approval".
    pub change: String,
    /// Whether it widens what the intent can do (a tool newly surfaced, or surfaced
    /// with less approval).
    pub weakens: bool,
}

/// One changed field: either its old and new values, or, for prompt text, a unified
/// diff of the two texts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub field: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub safety: Vec<SafetyKind>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BudgetDiff {
    /// `total` and `tokenizer`.
    pub changes: Vec<FieldChange>,
    pub buckets: Section,
}

/// A safety-relevant change, for the list at the top of the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SafetyNote {
    pub kind: SafetyKind,
    pub effect: SafetyEffect,
    /// The section key: `tools`, `policies`, `intents`, `redactors`, `prohibitions`.
    pub section: &'static str,
    pub item: String,
    /// The changed field, or `None` when the item was added or removed.
    pub field: Option<String>,
    /// What changed, in words: `confirm → review`, the tools granted, the added or
    /// removed item's summary; empty when the change is shown as a diff below.
    pub detail: String,
}

/// The kinds of safety-relevant change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyKind {
    ApprovalLowered,
    ApprovalRaised,
    RiskLowered,
    RiskRaised,
    ToolAdded,
    IntentSafetyLowered,
    IntentSafetyRaised,
    IntentToolGranted,
    IntentToolRevoked,
    PolicyRemoved,
    PolicyAdded,
    PolicyMadeAdvisory,
    PolicyMadeEnforcing,
    PolicyConditionChanged,
    PolicyEffectsChanged,
    ProhibitionRemoved,
    ProhibitionAdded,
    RedactorRemoved,
    RedactorAdded,
    RedactorPatternChanged,
    /// Requests for an unknown intent go to an intent that surfaces a tool the old
    /// fallback did not, or has a lower safety mode (or there was no fallback, and
    /// they were refused).
    FallbackWidened,
    /// The fallback moved to an intent that reaches no further.
    FallbackMoved,
    /// No fallback any more: requests for an unknown intent are refused.
    FallbackRemoved,
    /// The user's standing constraints are no longer kept (`session directives`
    /// removed): a request's session state is refused instead of enforced.
    SessionDirectivesRemoved,
    SessionDirectivesAdded,
}

/// Which way a safety-relevant change goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyEffect {
    /// Fewer gates, wider reach: needs the closest look.
    Weakens,
    /// Neither clearly weaker nor stronger: read it.
    Review,
    /// More gates, narrower reach.
    Tightens,
}

impl SafetyKind {
    pub fn effect(self) -> SafetyEffect {
        use SafetyKind::*;
        match self {
            ApprovalLowered
            | RiskLowered
            | IntentSafetyLowered
            | IntentToolGranted
            | PolicyRemoved
            | PolicyMadeAdvisory
            | ProhibitionRemoved
            | RedactorRemoved
            | FallbackWidened
            | SessionDirectivesRemoved => SafetyEffect::Weakens,
            RiskRaised
            | ToolAdded
            | PolicyConditionChanged
            | PolicyEffectsChanged
            | RedactorPatternChanged
            | FallbackMoved => SafetyEffect::Review,
            ApprovalRaised
            | IntentSafetyRaised
            | IntentToolRevoked
            | PolicyAdded
            | PolicyMadeEnforcing
            | ProhibitionAdded
            | RedactorAdded
            | FallbackRemoved
            | SessionDirectivesAdded => SafetyEffect::Tightens,
        }
    }

    /// The words for human output: `approval raised`.
    pub fn describe(self) -> &'static str {
        use SafetyKind::*;
        match self {
            ApprovalLowered => "approval lowered",
            ApprovalRaised => "approval raised",
            RiskLowered => "risk lowered",
            RiskRaised => "risk raised",
            ToolAdded => "tool added",
            IntentSafetyLowered => "safety mode lowered",
            IntentSafetyRaised => "safety mode raised",
            IntentToolGranted => "tool granted",
            IntentToolRevoked => "tool revoked",
            PolicyRemoved => "policy removed",
            PolicyAdded => "policy added",
            PolicyMadeAdvisory => "policy made advisory",
            PolicyMadeEnforcing => "policy made enforcing",
            PolicyConditionChanged => "policy condition changed",
            PolicyEffectsChanged => "policy effects changed",
            ProhibitionRemoved => "prohibition removed",
            ProhibitionAdded => "prohibition added",
            RedactorRemoved => "redactor removed",
            RedactorAdded => "redactor added",
            RedactorPatternChanged => "redactor pattern changed",
            FallbackWidened => "fallback widened",
            FallbackMoved => "fallback moved",
            FallbackRemoved => "fallback removed",
            SessionDirectivesRemoved => "session directives removed",
            SessionDirectivesAdded => "session directives added",
        }
    }
}

impl SafetyEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            SafetyEffect::Weakens => "weakens",
            SafetyEffect::Review => "review",
            SafetyEffect::Tightens => "tightens",
        }
    }
}

/// Compares two artifacts.
pub fn diff(a: &Artifact, b: &Artifact) -> ArtifactDiff {
    let cx = Cx {
        own: [
            format!("{}@{}", a.name, a.version),
            format!("{}@{}", b.name, b.version),
        ],
    };
    let (a_budget, b_budget) = (a.budget.as_ref(), b.budget.as_ref());
    let (a_prompts, b_prompts) = (a.prompts.as_ref(), b.prompts.as_ref());
    let mut out = ArtifactDiff {
        from: pack_id(a),
        to: pack_id(b),
        differs: false,
        safety: Vec::new(),
        impact: impact(a, b),
        pack: value_changes(&[
            ("name", json!(a.name), json!(b.name)),
            ("version", json!(a.version), json!(b.version)),
            ("library", json!(a.library), json!(b.library)),
            ("description", json!(a.description), json!(b.description)),
            ("compiler", json!(a.compiler), json!(b.compiler)),
            ("format", json!(a.format), json!(b.format)),
            ("session", session(a), session(b)),
        ]),
        tools: diff_items(&a.tools, &b.tools, &cx),
        policies: diff_items(&a.policies, &b.policies, &cx),
        budget: BudgetDiff {
            changes: value_changes(&[
                (
                    "total",
                    json!(a_budget.map(|b| b.total)),
                    json!(b_budget.map(|b| b.total)),
                ),
                (
                    "tokenizer",
                    json!(a_budget.map(|b| b.tokenizer)),
                    json!(b_budget.map(|b| b.tokenizer)),
                ),
            ]),
            buckets: diff_items(
                a_budget.map_or(&[][..], |b| &b.buckets),
                b_budget.map_or(&[][..], |b| &b.buckets),
                &cx,
            ),
        },
        prompts: ["system", "developer"]
            .into_iter()
            .filter_map(|which| {
                let text = |p: Option<&crate::artifact::Prompts>| {
                    p.and_then(|p| {
                        if which == "system" {
                            Some(&p.system)
                        } else {
                            p.developer.as_ref()
                        }
                    })
                    .map_or("", |t| t.text.as_str())
                    .to_owned()
                };
                field_change(
                    which,
                    &cx,
                    &Field::Text(text(a_prompts)),
                    &Field::Text(text(b_prompts)),
                )
            })
            .collect(),
        intents: diff_items(&a.intents, &b.intents, &cx),
        context: diff_items(&a.context, &b.context, &cx),
        redactors: diff_items(&a.redactors, &b.redactors, &cx),
        blocks: diff_items(&a.blocks, &b.blocks, &cx),
        prohibitions: diff_items(&a.prohibitions, &b.prohibitions, &cx),
        dependencies: diff_items(&a.dependencies, &b.dependencies, &cx),
    };
    out.differs = !(out.pack.is_empty()
        && out.budget.changes.is_empty()
        && out.prompts.is_empty()
        && out.sections().iter().all(|(_, s)| s.is_empty()));
    out.safety = collect_safety(&out);
    out.safety.extend(fallback_note(a, b));
    if session(a) != session(b) {
        let kind = match b.session {
            None => SafetyKind::SessionDirectivesRemoved,
            Some(_) => SafetyKind::SessionDirectivesAdded,
        };
        let detail = format!(
            "{} → {}",
            render::compact(&session(a)),
            render::compact(&session(b))
        );
        out.safety
            .push(note(kind, "pack", &b.name, Some("session"), detail));
    }
    out.safety.sort_by_key(|n| n.effect);
    out
}

/// A pack's `session` item as the diff shows it: `"directives"` or `null`.
fn session(a: &Artifact) -> Value {
    json!(a.session.as_ref().map(|_| "directives"))
}

/// Where requests for an unknown intent go, when that changes: the fallback intent's
/// own changes (its tools, its safety mode) are noted on it; this is the move from
/// one intent to another, to one where there was none, or to none.
fn fallback_note(a: &Artifact, b: &Artifact) -> Option<SafetyNote> {
    let fallback = |x: &'_ Artifact| x.intents.iter().find(|i| i.fallback).cloned();
    let (old, new) = (fallback(a), fallback(b));
    let name = |i: &Option<Intent>| {
        i.as_ref()
            .map_or("none (refused)".to_owned(), |i| format!("`{}`", i.name))
    };
    let moved = format!(
        "unknown intents go to {} (before: {})",
        name(&new),
        name(&old)
    );
    match (&old, &new) {
        (Some(o), Some(n)) if o.name == n.name => None,
        (None, None) => None,
        (_, Some(n)) => {
            let granted: Vec<&str> = n
                .tools
                .iter()
                .filter(|t| old.as_ref().is_none_or(|o| !o.tools.contains(t)))
                .map(String::as_str)
                .collect();
            let lowered = old.as_ref().is_some_and(|o| n.safety < o.safety);
            let (kind, detail) = match (
                old.is_none() || !granted.is_empty() || lowered,
                granted.is_empty(),
            ) {
                (true, false) => (
                    SafetyKind::FallbackWidened,
                    format!("{moved}; tools {}", granted.join(", ")),
                ),
                (true, true) => (SafetyKind::FallbackWidened, moved),
                (false, _) => (SafetyKind::FallbackMoved, moved),
            };
            Some(note(kind, "intents", &n.name, Some("fallback"), detail))
        }
        (Some(o), None) => Some(note(
            SafetyKind::FallbackRemoved,
            "intents",
            &o.name,
            Some("fallback"),
            moved,
        )),
    }
}

impl ArtifactDiff {
    /// The item sections with their keys, in output order.
    pub fn sections(&self) -> [(&'static str, &Section); 9] {
        [
            ("tools", &self.tools),
            ("policies", &self.policies),
            ("buckets", &self.budget.buckets),
            ("intents", &self.intents),
            ("context", &self.context),
            ("redactors", &self.redactors),
            ("blocks", &self.blocks),
            ("prohibitions", &self.prohibitions),
            ("dependencies", &self.dependencies),
        ]
    }
}

impl ArtifactDiff {
    /// Whether any change weakens safety: a safety note or an intent impact that does.
    pub fn weakens(&self) -> bool {
        self.safety
            .iter()
            .any(|n| n.effect == SafetyEffect::Weakens)
            || self
                .impact
                .iter()
                .flat_map(|i| &i.changes)
                .any(|c| c.weakens)
    }
}

/// The tools each intent can surface on each side, and how that changes.
fn impact(a: &Artifact, b: &Artifact) -> Vec<IntentImpact> {
    let surface = |x: &Artifact| -> BTreeMap<String, BTreeMap<String, crate::artifact::Approval>> {
        x.intents
            .iter()
            .map(|intent| {
                let tools = intent
                    .tools
                    .iter()
                    .filter(|t| !x.prohibitions.iter().any(|p| &p.tool == *t))
                    .filter_map(|t| x.tools.iter().find(|tool| &tool.name == t))
                    .map(|tool| (tool.name.clone(), tool.approval))
                    .collect();
                (intent.name.clone(), tools)
            })
            .collect()
    };
    let (before, after) = (surface(a), surface(b));
    let empty = BTreeMap::new();
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let (was, now) = (
            before.get(name).unwrap_or(&empty),
            after.get(name).unwrap_or(&empty),
        );
        let mut changes = Vec::new();
        let mut push =
            |weakens: bool, change: String| changes.push(ImpactChange { change, weakens });
        match (before.contains_key(name), after.contains_key(name)) {
            (false, true) => push(false, "intent added".to_owned()),
            (true, false) => push(false, "intent removed".to_owned()),
            _ => {}
        }
        for (tool, approval) in now {
            match was.get(tool) {
                None => push(
                    true,
                    format!(
                        "`{tool}` now surfaces with `{}` approval",
                        approval.as_str()
                    ),
                ),
                Some(old) if old > approval => push(
                    true,
                    format!(
                        "`{tool}` now surfaces with `{}` approval (was `{}`)",
                        approval.as_str(),
                        old.as_str()
                    ),
                ),
                Some(old) if old < approval => push(
                    false,
                    format!(
                        "`{tool}` now needs `{}` approval (was `{}`)",
                        approval.as_str(),
                        old.as_str()
                    ),
                ),
                Some(_) => {}
            }
        }
        for tool in was.keys().filter(|t| !now.contains_key(*t)) {
            push(false, format!("`{tool}` no longer surfaces"));
        }
        if !changes.is_empty() {
            out.push(IntentImpact {
                intent: name.clone(),
                changes,
            });
        }
    }
    out
}

fn pack_id(a: &Artifact) -> PackId {
    PackId {
        name: a.name.clone(),
        version: a.version.clone(),
        hash: a.hash.clone(),
    }
}

/// Gathers the safety kinds recorded on entries and field changes into the list shown
/// first, weakening changes first, then in section and name order.
fn collect_safety(d: &ArtifactDiff) -> Vec<SafetyNote> {
    let mut notes = Vec::new();
    for (section, s) in d.sections() {
        for e in s.added.iter().chain(&s.removed) {
            if let Some(kind) = e.safety {
                notes.push(note(kind, section, &e.name, None, e.summary.clone()));
            }
        }
        for item in &s.changed {
            for c in &item.changes {
                for &kind in &c.safety {
                    let detail = safety_detail(kind, c);
                    notes.push(note(kind, section, &item.name, Some(&c.field), detail));
                }
            }
        }
    }
    // A stable sort: within one effect, the order above (section, then added,
    // removed, changed, each by name) is kept.
    notes.sort_by_key(|n| n.effect);
    notes
}

fn note(
    kind: SafetyKind,
    section: &'static str,
    item: &str,
    field: Option<&str>,
    detail: String,
) -> SafetyNote {
    SafetyNote {
        kind,
        effect: kind.effect(),
        section,
        item: item.to_owned(),
        field: field.map(str::to_owned),
        detail,
    }
}

/// The detail of a changed field's note: the tools granted or revoked, `from → to`,
/// or nothing when the change is too long for one line (its diff is in its section).
fn safety_detail(kind: SafetyKind, c: &FieldChange) -> String {
    let (from, to) = (
        c.from.as_ref().unwrap_or(&Value::Null),
        c.to.as_ref().unwrap_or(&Value::Null),
    );
    match kind {
        SafetyKind::IntentToolGranted | SafetyKind::IntentToolRevoked => {
            let (gained, lost) = string_set_delta(from, to);
            let names = if kind == SafetyKind::IntentToolGranted {
                gained
            } else {
                lost
            };
            names.join(", ")
        }
        _ if c.diff.is_some() => String::new(),
        _ => format!("{} → {}", render::compact(from), render::compact(to)),
    }
}

/// The strings in `to` but not `from`, and those in `from` but not `to`.
pub(crate) fn string_set_delta<'v>(from: &'v Value, to: &'v Value) -> (Vec<&'v str>, Vec<&'v str>) {
    let strings = |v: &'v Value| -> Vec<&'v str> {
        v.as_array()
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let (from, to) = (strings(from), strings(to));
    let gained = to.iter().filter(|t| !from.contains(t)).copied().collect();
    let lost = from.iter().filter(|f| !to.contains(f)).copied().collect();
    (gained, lost)
}

// ---------------------------------------------------------------------------------
// The generic item diff
// ---------------------------------------------------------------------------------

/// The two sides' own `scope/name@version`, for comparing provenance.
struct Cx {
    own: [String; 2],
}

/// A field's value, as compared.
enum Field {
    Json(Value),
    /// Prompt text: a change is shown as a unified diff.
    Text(String),
    /// A provenance: equal when both name their own pack.
    Provenance(String),
}

/// What the generic diff needs to know about one kind of item.
trait Item: Serialize {
    fn key(&self) -> String;
    fn fields(&self) -> Vec<(&'static str, Field)>;
    fn summary(&self) -> String;
    /// What the item does, for a reviewer; only policies say more than their summary.
    fn does(&self) -> Vec<String> {
        Vec::new()
    }
    fn added_safety(&self) -> Option<SafetyKind> {
        None
    }
    fn removed_safety(&self) -> Option<SafetyKind> {
        None
    }
    /// The safety kinds of a change to `field` from `self` to `to`.
    fn field_safety(&self, _to: &Self, _field: &str) -> Vec<SafetyKind> {
        Vec::new()
    }
}

fn diff_items<T: Item>(a: &[T], b: &[T], cx: &Cx) -> Section {
    let (a, b) = (keyed(a), keyed(b));
    let entry = |name: &String, item: &T, safety| Entry {
        name: name.clone(),
        item: serde_json::to_value(item).unwrap_or(Value::Null),
        safety,
        summary: item.summary(),
        does: item.does(),
    };
    let mut section = Section::default();
    for (name, x) in &a {
        match b.get(name) {
            None => section.removed.push(entry(name, x, x.removed_safety())),
            Some(y) => {
                let changes: Vec<FieldChange> = x
                    .fields()
                    .into_iter()
                    .zip(y.fields())
                    .filter_map(|((field, fx), (_, fy))| {
                        let mut change = field_change(field, cx, &fx, &fy)?;
                        change.safety = x.field_safety(y, field);
                        Some(change)
                    })
                    .collect();
                if !changes.is_empty() {
                    section.changed.push(ItemChange {
                        name: name.clone(),
                        changes,
                        did: x.does(),
                    });
                }
            }
        }
    }
    for (name, y) in &b {
        if !a.contains_key(name) {
            section.added.push(entry(name, y, y.added_safety()));
        }
    }
    section
}

/// Items by key. Keys are unique in a well-formed artifact; a duplicate is kept under
/// a numbered key rather than dropped, so that nothing goes unreported.
fn keyed<T: Item>(items: &[T]) -> BTreeMap<String, &T> {
    let mut map = BTreeMap::new();
    for item in items {
        let key = item.key();
        let mut unique = key.clone();
        let mut n = 1;
        while map.contains_key(&unique) {
            n += 1;
            unique = format!("{key} ({n})");
        }
        map.insert(unique, item);
    }
    map
}

fn field_change(field: &str, cx: &Cx, a: &Field, b: &Field) -> Option<FieldChange> {
    match (a, b) {
        (Field::Json(x), Field::Json(y)) => json_change(field, x, y),
        (Field::Provenance(x), Field::Provenance(y)) => {
            let own = |p: &String, side: usize| *p == cx.own[side];
            let same = x == y || (own(x, 0) && own(y, 1));
            (!same).then(|| change(field, Some(json!(x)), Some(json!(y)), None))
        }
        (Field::Text(x), Field::Text(y)) => {
            (x != y).then(|| change(field, None, None, Some(text_diff(x, y))))
        }
        // Both sides come from the same `fields()` of one item type.
        _ => None,
    }
}

fn json_change(field: &str, x: &Value, y: &Value) -> Option<FieldChange> {
    (x != y).then(|| {
        change(
            field,
            Some(x.clone()),
            Some(y.clone()),
            structure_diff(x, y),
        )
    })
}

fn change(
    field: &str,
    from: Option<Value>,
    to: Option<Value>,
    diff: Option<String>,
) -> FieldChange {
    FieldChange {
        field: field.to_owned(),
        from,
        to,
        diff,
        safety: Vec::new(),
    }
}

fn value_changes(fields: &[(&str, Value, Value)]) -> Vec<FieldChange> {
    fields
        .iter()
        .filter_map(|(field, a, b)| json_change(field, a, b))
        .collect()
}

/// For structured values too long to compare on one line (a JsonLogic condition, an
/// input schema), a unified diff of their pretty-printed forms.
fn structure_diff(a: &Value, b: &Value) -> Option<String> {
    const ONE_LINE: usize = 60;
    let structured = |v: &Value| v.is_object() || v.is_array();
    let long = |v: &Value| v.to_string().len() > ONE_LINE;
    if !(structured(a) && structured(b)) || !(long(a) || long(b)) {
        return None;
    }
    let pretty = |v: &Value| serde_json::to_string_pretty(v).map(|s| s + "\n").ok();
    Some(text_diff(&pretty(a)?, &pretty(b)?))
}

/// Above this product of the two texts' line counts, the lines between the common
/// first and last ones are shown as replaced, not diffed line by line.
const EXACT_DIFF_LIMIT: u64 = 25_000_000;

/// A unified diff of two texts, hunks only, three lines of context.
///
/// Myers' algorithm takes time proportional to the texts' length times the number of
/// differences: two unrelated texts of 50,000 lines took half a minute. Past
/// [`EXACT_DIFF_LIMIT`] the diff is exact only around the common first and last
/// lines: the algorithm is given a deadline already past, so it gives up at once and
/// reports the rest as replaced. That is decided by the sizes alone, never by the
/// clock, so the same texts always give the same diff.
fn text_diff(a: &str, b: &str) -> String {
    line_diff(a, b).unified_diff().context_radius(3).to_string()
}

/// The line diff of two texts, bounded as [`text_diff`] says (`fmt --diff` uses it
/// too).
pub(crate) fn line_diff<'a>(a: &'a str, b: &'a str) -> similar::TextDiff<'a, 'a, 'a, str> {
    let lines = |t: &str| t.lines().count() as u64;
    let mut config = similar::TextDiff::configure();
    if lines(a).saturating_mul(lines(b)) > EXACT_DIFF_LIMIT {
        let now = std::time::Instant::now();
        config.deadline(
            now.checked_sub(std::time::Duration::from_secs(1))
                .unwrap_or(now),
        );
    }
    config.diff_lines(a, b)
}

fn ordering_kind<T: Ord>(
    from: T,
    to: T,
    raised: SafetyKind,
    lowered: SafetyKind,
) -> Vec<SafetyKind> {
    match from.cmp(&to) {
        std::cmp::Ordering::Less => vec![raised],
        std::cmp::Ordering::Greater => vec![lowered],
        std::cmp::Ordering::Equal => Vec::new(),
    }
}

fn json<T: Serialize>(value: &T) -> Field {
    Field::Json(serde_json::to_value(value).unwrap_or(Value::Null))
}

// ---------------------------------------------------------------------------------
// The item kinds
// ---------------------------------------------------------------------------------

impl Item for Tool {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("description", json(&self.description)),
            ("kind", json(&self.kind)),
            ("risk", json(&self.risk)),
            ("approval", json(&self.approval)),
            ("input", json(&self.input)),
            ("doc", json(&self.doc)),
            ("provenance", Field::Provenance(self.provenance.clone())),
        ]
    }
    fn summary(&self) -> String {
        format!(
            "kind {}, risk {}, approval {}",
            self.kind,
            self.risk.as_str(),
            self.approval.as_str()
        )
    }
    fn added_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::ToolAdded)
    }
    fn field_safety(&self, to: &Self, field: &str) -> Vec<SafetyKind> {
        match field {
            "risk" => ordering_kind(
                self.risk,
                to.risk,
                SafetyKind::RiskRaised,
                SafetyKind::RiskLowered,
            ),
            "approval" => ordering_kind(
                self.approval,
                to.approval,
                SafetyKind::ApprovalRaised,
                SafetyKind::ApprovalLowered,
            ),
            _ => Vec::new(),
        }
    }
}

impl Item for Policy {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("priority", json(&self.priority)),
            ("enforcing", json(&self.enforcing)),
            ("when", json(&self.when)),
            ("effects", json(&self.effects)),
            ("doc", json(&self.doc)),
            ("bundle", Field::Provenance(self.bundle.clone())),
        ]
    }
    fn summary(&self) -> String {
        let mode = if self.enforcing {
            "enforcing"
        } else {
            "advisory"
        };
        format!("{mode}, priority {}", self.priority)
    }
    fn does(&self) -> Vec<String> {
        logic::describe(self)
    }
    fn added_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::PolicyAdded)
    }
    fn removed_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::PolicyRemoved)
    }
    fn field_safety(&self, _to: &Self, field: &str) -> Vec<SafetyKind> {
        match field {
            "enforcing" if self.enforcing => vec![SafetyKind::PolicyMadeAdvisory],
            "enforcing" => vec![SafetyKind::PolicyMadeEnforcing],
            "when" => vec![SafetyKind::PolicyConditionChanged],
            "effects" => vec![SafetyKind::PolicyEffectsChanged],
            _ => Vec::new(),
        }
    }
}

impl Item for Bucket {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("share_ppm", json(&self.share_ppm)),
            ("priority", json(&self.priority)),
            ("min", json(&self.min)),
            ("overflow", json(&self.overflow)),
        ]
    }
    fn summary(&self) -> String {
        format!(
            "share {}, priority {}, min {}, overflow {}",
            render::percent(self.share_ppm),
            self.priority,
            self.min,
            render::compact(&json!(self.overflow))
        )
    }
}

impl Item for Intent {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("description", json(&self.description)),
            ("safety", json(&self.safety)),
            ("tools", json(&self.tools)),
            ("task", Field::Text(self.task.text.clone())),
            ("budget", json(&self.budget)),
            ("fallback", json(&self.fallback)),
            ("doc", json(&self.doc)),
        ]
    }
    fn summary(&self) -> String {
        let tools = if self.tools.is_empty() {
            "no tools".to_owned()
        } else {
            format!("tools {}", self.tools.join(", "))
        };
        let fallback = if self.fallback { ", fallback" } else { "" };
        format!("safety {}, {tools}{fallback}", self.safety.as_str())
    }
    /// A new intent grants its tools to the requests that name it.
    fn added_safety(&self) -> Option<SafetyKind> {
        (!self.tools.is_empty()).then_some(SafetyKind::IntentToolGranted)
    }
    fn field_safety(&self, to: &Self, field: &str) -> Vec<SafetyKind> {
        match field {
            "safety" => ordering_kind(
                self.safety,
                to.safety,
                SafetyKind::IntentSafetyRaised,
                SafetyKind::IntentSafetyLowered,
            ),
            "tools" => {
                let mut kinds = Vec::new();
                if to.tools.iter().any(|t| !self.tools.contains(t)) {
                    kinds.push(SafetyKind::IntentToolGranted);
                }
                if self.tools.iter().any(|t| !to.tools.contains(t)) {
                    kinds.push(SafetyKind::IntentToolRevoked);
                }
                kinds
            }
            _ => Vec::new(),
        }
    }
}

impl Item for ContextField {
    fn key(&self) -> String {
        self.path.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("type", json(&self.ty)),
            ("optional", json(&self.optional)),
            ("doc", json(&self.doc)),
            ("provenance", Field::Provenance(self.provenance.clone())),
        ]
    }
    fn summary(&self) -> String {
        let optional = if self.optional { "optional " } else { "" };
        format!("{optional}{}", self.ty)
    }
}

impl Item for Redactor {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("pattern", json(&self.pattern)),
            ("doc", json(&self.doc)),
            ("provenance", Field::Provenance(self.provenance.clone())),
        ]
    }
    fn summary(&self) -> String {
        format!("pattern {}", render::compact(&json!(self.pattern)))
    }
    fn added_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::RedactorAdded)
    }
    fn removed_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::RedactorRemoved)
    }
    fn field_safety(&self, _to: &Self, field: &str) -> Vec<SafetyKind> {
        match field {
            "pattern" => vec![SafetyKind::RedactorPatternChanged],
            _ => Vec::new(),
        }
    }
}

impl Item for Block {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("bucket", json(&self.bucket)),
            ("priority", json(&self.priority)),
            ("text", Field::Text(self.text.text.clone())),
            ("doc", json(&self.doc)),
            ("provenance", Field::Provenance(self.provenance.clone())),
        ]
    }
    fn summary(&self) -> String {
        format!("bucket {}, priority {}", self.bucket, self.priority)
    }
}

impl Item for Prohibition {
    fn key(&self) -> String {
        self.tool.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![("provenance", Field::Provenance(self.provenance.clone()))]
    }
    fn summary(&self) -> String {
        format!("tool {}", self.tool)
    }
    fn added_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::ProhibitionAdded)
    }
    fn removed_safety(&self) -> Option<SafetyKind> {
        Some(SafetyKind::ProhibitionRemoved)
    }
}

impl Item for Dependency {
    fn key(&self) -> String {
        self.name.clone()
    }
    fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![("version", json(&self.version)), ("hash", json(&self.hash))]
    }
    fn summary(&self) -> String {
        format!("{} ({})", self.version, self.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_delta() {
        let (from, to) = (json!(["a", "b"]), json!(["b", "c"]));
        let (gained, lost) = string_set_delta(&from, &to);
        assert_eq!((gained, lost), (vec!["c"], vec!["a"]));
    }

    fn text(lines: impl Iterator<Item = String>) -> String {
        lines.map(|l| l + "\n").collect()
    }

    #[test]
    fn large_unrelated_texts_are_shown_as_replaced_between_their_common_lines() {
        // 6,000 lines each: the first and last 5 shared, and one in a hundred between
        // them (which an exact diff would show as context).
        let side = |tag: &str| {
            text((0..6000).map(|i| match i {
                0..5 | 5995.. => format!("common {i}"),
                _ if i % 100 == 50 => format!("shared {i}"),
                _ => format!("{tag} {i}"),
            }))
        };
        let (a, b) = (side("old"), side("new"));
        let started = std::time::Instant::now();
        let diff = text_diff(&a, &b);
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(diff.lines().filter(|l| l.starts_with("@@")).count(), 1);
        assert!(
            diff.starts_with("@@ -3,5996 +3,5996 @@\n common 2\n"),
            "{}",
            &diff[..80]
        );
        assert!(diff.contains("\n-old 5\n") && diff.contains("\n+new 5994\n"));
        assert!(diff.contains("\n-shared 150\n") && diff.contains("\n+shared 150\n"));
        assert!(diff.ends_with(" common 5997\n"));
        assert_eq!(diff, text_diff(&a, &b), "decided by size, not by the clock");
        // Below the limit the diff is exact: a line shared in the middle is context.
        let small = |tag: &str| {
            text((0..40).map(|i| {
                if i == 20 {
                    "shared".into()
                } else {
                    format!("{tag} {i}")
                }
            }))
        };
        let exact = text_diff(&small("old"), &small("new"));
        assert!(exact.contains("\n shared\n"), "{exact}");
    }
}
