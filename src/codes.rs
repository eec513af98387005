//! The registry of diagnostic codes.
//!
//! This module owns the list of every code the toolchain can report: the
//! checker's errors (`E…`) and warnings (`W…`) from the language spec, and the
//! runtime's codes (`R…`) that appear in a compiled envelope's `diagnostics`
//! list. Each code has one page in the shape *What it does / Why it matters /
//! Example / Fix*; `ctxpack explain CODE` prints [`CodeInfo::page`] and the
//! language server shows [`CodeInfo::markdown`] on hover.
//!
//! Codes are part of the contract: once published, a code keeps its meaning
//! and is never reused for something else. Add new codes here first, in sorted
//! order; the tests below fail if a code is duplicated, out of order, or has an
//! incomplete page.
//!
//! Conventions for the text fields, which the tests enforce where they can:
//!
//! - `title` is one line, lowercase, with no final period.
//! - `what` and `why` are prose, hard-wrapped so that a rendered page fits in
//!   80 columns.
//! - `example` is a `.ctxpack` snippet in the language's real syntax.
//! - `fix` is one paragraph of prose, a blank line, then the fixed snippet.

use std::fmt;

/// How serious a diagnostic is. Errors fail `ctxpack check`; warnings fail it
/// only under `--deny-warnings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The pack is wrong and cannot be built.
    Error,
    /// The pack builds, but probably does not do what its author meant.
    Warning,
}

impl Severity {
    /// The lowercase name used in every output format: `"error"` or `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The documentation page of one diagnostic code.
#[derive(Debug)]
pub struct CodeInfo {
    /// The stable code, such as `"E0102"`.
    pub code: &'static str,
    /// The severity every diagnostic with this code has.
    pub severity: Severity,
    /// One line, lowercase, no final period: `"unknown name"`.
    pub title: &'static str,
    /// What it does: when the checker (or the runtime) emits it.
    pub what: &'static str,
    /// Why it matters: what would go wrong if it were not reported.
    pub why: &'static str,
    /// A short `.ctxpack` snippet showing the mistake.
    pub example: &'static str,
    /// How to fix it: one paragraph of prose, a blank line, the fixed snippet.
    pub fix: &'static str,
}

impl CodeInfo {
    /// The full page as plain text, as `ctxpack explain CODE` prints it.
    ///
    /// The heading line is `CODE (severity): title`; each section follows a
    /// blank line, with its body indented by two spaces.
    pub fn page(&self) -> String {
        let mut out = format!("{} ({}): {}\n", self.code, self.severity, self.title);
        for (heading, body) in self.sections() {
            out.push('\n');
            out.push_str(heading);
            out.push('\n');
            push_indented(&mut out, body);
        }
        out
    }

    /// The page as Markdown, for editor hovers: snippets go in `ctxpack`
    /// code fences so that they keep their layout.
    pub fn markdown(&self) -> String {
        let (fix_prose, fix_snippet) = self.fix_parts();
        let mut out = format!("**{}** ({}): {}\n\n", self.code, self.severity, self.title);
        out.push_str("### What it does\n\n");
        out.push_str(self.what);
        out.push_str("\n\n### Why it matters\n\n");
        out.push_str(self.why);
        out.push_str("\n\n### Example\n\n");
        push_fenced(&mut out, self.example);
        out.push_str("\n### Fix\n\n");
        out.push_str(fix_prose);
        out.push_str("\n\n");
        push_fenced(&mut out, fix_snippet);
        out
    }

    /// Splits `fix` into its prose paragraph and the fixed snippet after it.
    ///
    /// The snippet may itself contain blank lines, so only the first blank
    /// line separates the two.
    pub fn fix_parts(&self) -> (&'static str, &'static str) {
        match self.fix.split_once("\n\n") {
            Some((prose, snippet)) => (prose, snippet),
            None => (self.fix, ""),
        }
    }

    fn sections(&self) -> [(&'static str, &'static str); 4] {
        [
            ("What it does", self.what),
            ("Why it matters", self.why),
            ("Example", self.example),
            ("Fix", self.fix),
        ]
    }
}

/// Appends `body` indented by two spaces, leaving blank lines empty so that
/// the page has no trailing whitespace.
fn push_indented(out: &mut String, body: &str) {
    for line in body.lines() {
        if !line.trim().is_empty() {
            out.push_str("  ");
            out.push_str(line);
        }
        out.push('\n');
    }
}

fn push_fenced(out: &mut String, snippet: &str) {
    out.push_str("```ctxpack\n");
    out.push_str(snippet);
    out.push_str("\n```\n");
}

/// Finds the page of `code`, ignoring ASCII case and surrounding whitespace:
/// `"e0102"` finds `E0102`.
pub fn lookup(code: &str) -> Option<&'static CodeInfo> {
    let code = code.trim();
    CODES
        .iter()
        .find(|info| info.code.eq_ignore_ascii_case(code))
}

/// Every diagnostic code, sorted by code in plain string order: errors, then
/// runtime codes, then warnings.
pub static CODES: &[CodeInfo] = &[
    // ── Errors: syntax ───────────────────────────────────────────────────
    CodeInfo {
        code: "E0001",
        severity: Severity::Error,
        title: "syntax error",
        what: r#"The parser could not read the text: a token is missing, misplaced or
misspelt. The message says what was expected, at the line and column where
parsing stopped. Parsing then resumes at the next item, so one broken item
costs one diagnostic; an item whose header parsed (`tool NAME`,
`intent NAME`, ...) still declares its name, and checks that need its body
are skipped."#,
        why: r#"Nothing inside an item can be checked until it parses, and a pack with
a syntax error cannot be built or compiled."#,
        example: r#"policy minors_on_voice priority 100 {
  ctx.user.age < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
        fix: r#"Write what the parser expected at the reported position; here every
policy body starts with `when` followed by its condition.

policy minors_on_voice priority 100 {
  when ctx.user.age < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
    },
    // ── Errors: names and items ──────────────────────────────────────────
    CodeInfo {
        code: "E0101",
        severity: Severity::Error,
        title: "duplicate definition",
        what: r#"Two tools, intents, policies, buckets, redactors or blocks share a name,
or a context field is declared twice (context blocks are merged, so this
also applies across blocks). The same goes for an enum's variant
declared twice, and for a name listed twice in one list (an intent's
`tools`, a `prohibit`, a `require_approval`, `deny` or `redact`). The
diagnostic points at the second one and labels the first."#,
        why: r#"Every reference to the name would be ambiguous, and keeping either
definition silently would make the pack's behaviour depend on the order of
its items."#,
        example: r#"redactor email pattern "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}"

redactor email pattern "[^@\\s]+@[^@\\s]+""#,
        fix: r#"Delete one definition, or rename it and update the references that
meant it.

redactor email pattern "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}"

redactor loose_email pattern "[^@\\s]+@[^@\\s]+""#,
    },
    CodeInfo {
        code: "E0102",
        severity: Severity::Error,
        title: "unknown name",
        what: r#"A reference names a tool, redactor, bucket or intent that neither this
pack nor its imports declare: in an intent's `tools`, a `prohibit`, a
policy's `require_approval`, `deny` or `redact`, a block's `in BUCKET`, an
intent's budget override, or a string compared with `request.intent`. The
help suggests the nearest declared name."#,
        why: r#"A misspelt name would otherwise be dropped silently: a tool the intent
never offers, a redaction that never runs, a policy that never matches its
intent. Most of these fail open, which is the wrong way for safety
controls to fail."#,
        example: r#"tool issue_refund {
  description "Refund an order, up to its total."
  kind write
  risk high
  approval confirm
}

intent refund {
  safety supervised
  tools issue_refnud
  task "Help the customer get a refund."
}"#,
        fix: r#"Use the declared name (the help shows the nearest one), or declare the
item if it is missing.

intent refund {
  safety supervised
  tools issue_refund
  task "Help the customer get a refund."
}"#,
    },
    CodeInfo {
        code: "E0103",
        severity: Severity::Error,
        title: "missing required item",
        what: r#"An application pack (one not marked `library`) lacks something the
runtime needs: the `prompt system`, the `budget`, at least one intent, or
an intent's `task`. A file that is empty, or holds only comments, lacks
the `pack` header itself: it is reported at its start."#,
        why: r#"The runtime cannot compile a context without a system prompt, a budget
to split and an intent to route to. Reporting it at check time keeps the
failure out of production runs."#,
        example: r#"pack "acme/support-agent" version "1.0.0"

prompt system "You are ACME's support assistant."

intent general fallback {
  task "Answer general questions about ACME."
}"#,
        fix: r#"Declare the missing item; here, the budget. If the pack only holds shared
definitions for other packs, mark it `library` instead.

budget {
  total 16_000
  bucket policy   { share 10% priority 90 }
  bucket tools    { share 10% priority 80 }
  bucket evidence { share 50% priority 50 overflow truncate }
  bucket memory   { share 10% priority 40 }
  bucket session  { share 20% priority 30 overflow drop }
}"#,
    },
    CodeInfo {
        code: "E0104",
        severity: Severity::Error,
        title: "malformed pack name or version",
        what: r#"A pack name in the header or in an import is not `scope/name` with each
part matching `[a-z0-9][a-z0-9-]*` (at most 64 characters), or a version is
not a semantic version such as `1.4.0` or `2.0.0-rc.1` (at most 64
characters)."#,
        why: r#"Names and versions are the keys of the registry and the lockfile, and
exact versions are what make a build reproducible: `1.4` does not say
which release was meant."#,
        example: r#"pack "ACME/Support Agent" version "1.4""#,
        fix: r#"Use lowercase letters, digits and dashes on each side of the slash, and
a full `MAJOR.MINOR.PATCH` version.

pack "acme/support-agent" version "1.4.0""#,
    },
    CodeInfo {
        code: "E0105",
        severity: Severity::Error,
        title: "singleton declared twice",
        what: r#"An item that a pack may declare at most once appears a second time:
`description`, `prompt system`, `prompt developer` or `budget`. The
diagnostic points at the second one and labels the first."#,
        why: r#"Unlike context blocks, these are not merged; keeping either one silently
would drop text or limits that the author wrote."#,
        example: r#"prompt system "You are ACME's support assistant."

prompt system "Never promise delivery dates.""#,
        fix: r#"Merge the two into one declaration.

prompt system """
  You are ACME's support assistant.
  Never promise delivery dates.
""""#,
    },
    CodeInfo {
        code: "E0106",
        severity: Severity::Error,
        title: "more than one fallback intent",
        what: r#"More than one intent is marked `fallback`. The diagnostic points at the
second and labels the first."#,
        why: r#"The fallback intent is the one the runtime uses when a request names no
catalogued intent. With two, routing such a request would be ambiguous."#,
        example: r#"intent general fallback {
  tools lookup_order
  task "Answer general questions about ACME."
}

intent small_talk fallback {
  task "Chat politely with the customer."
}"#,
        fix: r#"Keep `fallback` on exactly one intent.

intent general fallback {
  tools lookup_order
  task "Answer general questions about ACME."
}

intent small_talk {
  task "Chat politely with the customer."
}"#,
    },
    CodeInfo {
        code: "E0107",
        severity: Severity::Error,
        title: "library pack declares a prompt, budget, intent or session",
        what: r#"A pack marked `library` declares a `prompt`, a `budget` or an `intent`.
Libraries hold shared definitions only: context fields, tools,
prohibitions, redactors, policies and blocks."#,
        why: r#"An import never brings in prompts, budgets or intents, which stay the
importing pack's own, and the runtime refuses to compile a library. Such
declarations would be dead text that looks as if it took effect."#,
        example: r#"pack "acme/base-safety" version "2.1.0" library

prompt system "Never reveal internal notes."

redactor email pattern "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}""#,
        fix: r#"Move the prompt, budget or intent into the application packs that import
the library, or drop `library` if this pack is meant to be compiled.

pack "acme/base-safety" version "2.1.0" library

redactor email pattern "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}""#,
    },
    // ── Errors: expressions, types and templates ─────────────────────────
    CodeInfo {
        code: "E0201",
        severity: Severity::Error,
        title: "unknown field path",
        what: r#"A path in a condition or a `{{ }}` template names neither a declared
context field (reached as `ctx.PATH`) nor a built-in field (`request.*`,
`run.*`). The help suggests the nearest known path. No type errors are
reported further up an expression whose path failed to resolve. In raw
JsonLogic, the same holds for a `var` path and for the keys of a `val`
(`{"val": ["ctx", "user", "age"]}`): a `val` of one dotted string reads a
single key named with its dots, which never exists."#,
        why: r#"At run time an unknown path reads as null, so a misspelt condition would
quietly never fire (or always fire), and a template would render empty.
Policies must not fail open because of a typo."#,
        example: r#"context {
  user.age: int
}

policy minors_on_voice priority 100 {
  when ctx.user.ag < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
        fix: r#"Use the declared path, or declare the field in a `context` block.

policy minors_on_voice priority 100 {
  when ctx.user.age < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
    },
    CodeInfo {
        code: "E0202",
        severity: Severity::Error,
        title: "type mismatch in a comparison or `in`",
        what: r#"The two sides of a comparison have incompatible types, or the right side
of `in` is not a list of the left side's type. Numbers compare with
numbers, strings with strings, enums with their variants and bools with
bools."#,
        why: r#"`==` lowers to JsonLogic's strict `===`, so a number never equals a
string and the policy would never fire; ordering comparisons would fall
back to loose coercion rules instead. Either way the condition does not
mean what it says."#,
        example: r#"context {
  user.age: int
}

policy minors_on_voice priority 100 {
  when ctx.user.age < "18" and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
        fix: r#"Compare values of the same type; here, the integer literal.

policy minors_on_voice priority 100 {
  when ctx.user.age < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
    },
    CodeInfo {
        code: "E0203",
        severity: Severity::Error,
        title: "value is not a variant of the enum",
        what: r#"A string compared with an enum field (with `==`, `!=` or `in`) is not one
of that enum's variants. This covers declared enums and the built-in
`run.safety_mode`."#,
        why: r#"The runtime rejects context values outside the declared variants, so the
comparison can never be true: the policy is dead, usually because of a
typo or a renamed variant."#,
        example: r#"context {
  user.tier: enum("free", "pro", "enterprise")
}

policy enterprise_escalation priority 60 {
  when ctx.user.tier == "premium"
  escalate "enterprise-desk"
}"#,
        fix: r#"Use one of the declared variants, or add the new variant to the enum.

policy enterprise_escalation priority 60 {
  when ctx.user.tier == "enterprise"
  escalate "enterprise-desk"
}"#,
    },
    CodeInfo {
        code: "E0204",
        severity: Severity::Error,
        title: "`when` condition is not boolean",
        what: r#"A policy's `when` condition has a type other than `bool`: a bare string,
number or list field, or a literal such as `"yes"` or `1`."#,
        why: r#"JsonLogic would decide by truthiness, where `""`, `0` and `[]` are false
and everything else is true. A policy's condition should state its test
rather than lean on those rules."#,
        example: r#"context {
  order.total: float?
}

policy large_refunds priority 80 {
  when ctx.order.total
  require_approval issue_refund
}"#,
        fix: r#"Write the comparison or `exists()` test that you mean.

policy large_refunds priority 80 {
  when exists(ctx.order.total) and ctx.order.total > 500.0
  require_approval issue_refund
}"#,
    },
    CodeInfo {
        code: "E0205",
        severity: Severity::Error,
        title: "malformed or unknown-operator raw JsonLogic",
        what: r#"A `json { ... }` operand embeds raw JsonLogic that is not well formed
(for example an operator object with more than one key, or the wrong
arguments) or that uses an operator the runtime does not know. The set of
known operators is exactly the one the runtime's JsonLogic engine
evaluates. Its `var` paths are checked like any other path."#,
        why: r#"The runtime's engine reports an error for an unknown operator, so an
enforcing policy would fail every compile closed (`policy_eval_error`)
and an advisory one would always be skipped (R0201). Some JsonLogic
engines instead pass an unknown operator through as a truthy object,
which would make the policy always fire."#,
        example: r#"policy large_refunds priority 80 {
  when json { "grater": [{ "var": "ctx.order.total" }, 500] }
  require_approval issue_refund
}"#,
        fix: r#"Use an operator the engine evaluates, or better, write the condition in
the typed expression language, which is checked more thoroughly.

policy large_refunds priority 80 {
  when exists(ctx.order.total) and ctx.order.total > 500.0
  require_approval issue_refund
}"#,
    },
    CodeInfo {
        code: "E0206",
        severity: Severity::Error,
        title: "context path is both a field and a prefix",
        what: r#"A context path is declared as a field and is also the prefix of another
field, such as `user` next to `user.tier`."#,
        why: r#"The caller's context is JSON: `user` cannot be a string and an object at
once, so no request could ever satisfy the schema."#,
        example: r#"context {
  user: string
  user.tier: enum("free", "pro", "enterprise")
}"#,
        fix: r#"Give the leaf value its own name under the prefix.

context {
  user.name: string
  user.tier: enum("free", "pro", "enterprise")
}"#,
    },
    CodeInfo {
        code: "E0207",
        severity: Severity::Error,
        title: "malformed template",
        what: r#"A template string (a prompt, a task, an `instruct` text or a block) has a
`{{` without its closing `}}`, or an interpolation with an empty path. The
diagnostic points at the opening `{{`."#,
        why: r#"The interpolation would otherwise swallow the rest of the text or be
rendered literally into the prompt, braces and all."#,
        example: r#"intent refund {
  safety supervised
  tools lookup_order
  task """
    Help with a refund for order {{ ctx.order.id.
  """
}"#,
        fix: r#"Close the interpolation (with a default if the field is optional), or
write a literal `{{` as `\{{`.

intent refund {
  safety supervised
  tools lookup_order
  task """
    Help with a refund for order {{ ctx.order.id | "(not given)" }}.
  """
}"#,
    },
    // ── Errors: policies ─────────────────────────────────────────────────
    CodeInfo {
        code: "E0301",
        severity: Severity::Error,
        title: "policy with no effect",
        what: r#"A policy has a `when` condition but no effect: no `refuse`, `escalate`,
`require_approval`, `deny`, `redact` or `instruct`."#,
        why: r#"Such a policy is evaluated on every run and changes nothing, while it
reads like a safeguard; most often an effect line was lost in an edit."#,
        example: r#"policy minors_on_voice priority 100 {
  when ctx.user.age < 18 and request.channel == "voice"
}"#,
        fix: r#"Add the effect the policy is meant to have, or delete the policy.

policy minors_on_voice priority 100 {
  when ctx.user.age < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
    },
    // ── Errors: tools, safety and approval ───────────────────────────────
    CodeInfo {
        code: "E0401",
        severity: Severity::Error,
        title: "tool's approval mode exceeds the intent's safety mode",
        what: r#"An intent permits a tool whose approval mode is above the ceiling of the
intent's safety mode (`safety`, default `autonomous`). Approval modes are
ordered `auto < confirm < review`, and each safety mode honors them up to
a ceiling:

- `autonomous` honors `auto` only;
- `supervised` honors `auto` and `confirm`;
- `reviewed` honors `auto`, `confirm` and `review`.

The diagnostic points at the tool's name in the intent's `tools` list."#,
        why: r#"The runtime withholds every tool whose approval mode exceeds what the
run's safety mode honors. An intent that lists such a tool is written for
a mode in which the tool can never be offered: either the task silently
loses the tool, or the intent understates how much human oversight it
needs. The intent's `safety` line is where reviewers read that."#,
        example: r#"tool issue_refund {
  description "Refund an order, up to its total."
  kind write
  risk high
  approval confirm
}

intent refund {
  tools lookup_order, issue_refund
  task "Help the customer get a refund."
}"#,
        fix: r#"Declare the safety mode the intent really needs (here `supervised`,
whose ceiling is `confirm`), or remove the tool from the intent.

intent refund {
  safety supervised
  tools lookup_order, issue_refund
  task "Help the customer get a refund."
}"#,
    },
    CodeInfo {
        code: "E0402",
        severity: Severity::Error,
        title: "risk and approval mismatch",
        what: r#"A tool's approval mode is too weak for its risk: a `critical` tool needs
`approval review`, and a `high` tool needs at least `approval confirm`."#,
        why: r#"The approval mode is what keeps a person in the loop. A high-risk tool
with `approval auto` would be surfaced to autonomous runs and called with
nobody checking it."#,
        example: r#"tool close_account {
  description "Close the customer's account."
  kind admin
  risk critical
  approval confirm
}"#,
        fix: r#"Raise the approval mode to what the risk needs, or lower the risk if it
was overstated.

tool close_account {
  description "Close the customer's account."
  kind admin
  risk critical
  approval review
}"#,
    },
    CodeInfo {
        code: "E0403",
        severity: Severity::Error,
        title: "intent permits a prohibited tool",
        what: r#"An intent's `tools` list names a tool that the pack, or a pack it
imports, prohibits with `prohibit`. The diagnostic points at the tool's
name in the intent's `tools` list."#,
        why: r#"A prohibition always wins at run time, so the tool will never be
surfaced. The two declarations contradict each other: either the intent
expects a tool it can never have, or the prohibition no longer says what
the pack means. The error makes someone decide which."#,
        example: r#"prohibit close_account

intent account {
  safety reviewed
  tools lookup_order, close_account
  task "Help with account questions."
}"#,
        fix: r#"Remove the tool from the intent; if the tool really should be available,
remove the prohibition deliberately, in review.

prohibit close_account

intent account {
  safety reviewed
  tools lookup_order
  task "Help with account questions."
}"#,
    },
    CodeInfo {
        code: "E0404",
        severity: Severity::Error,
        title: "tool name too long for the providers",
        what: r#"A tool's name is longer than 64 characters. Provider APIs take tool names
of 1 to 64 characters from `[a-zA-Z0-9_-]`: OpenAI's `function.name` and
Anthropic's tool `name` alike. ctxpack names already use only those
characters, so the length is what can break."#,
        why: r#"The pack would check and build, and then every request that surfaces the
tool would be rejected by the provider (HTTP 400) at run time. Tool names
are sent as they are declared, so the limit is the pack's to keep."#,
        example: r#"tool look_up_the_customer_order_by_its_identifier_in_the_order_system_x {
  description "Fetch an order by its id."
  kind read
  risk low
  approval auto
}"#,
        fix: r#"Give the tool a shorter name (at most 64 characters) and put the detail
in its description, which the model reads too.

tool lookup_order {
  description "Look the customer's order up in the order system."
  kind read
  risk low
  approval auto
}"#,
    },
    CodeInfo {
        code: "E0501",
        severity: Severity::Error,
        title: "bucket shares sum over 100%",
        what: r#"The shares of the budget's buckets add up to more than 100%, either in
the pack's `budget` or once an intent's `budget` override is applied over
it."#,
        why: r#"Shares divide the tokens that remain after the fixed text. Over 100%
promises more tokens than exist, and the runtime would have to decide
arbitrarily whose allocation to cut."#,
        example: r#"budget {
  total 16_000
  bucket policy   { share 10% priority 90 }
  bucket tools    { share 10% priority 80 }
  bucket evidence { share 60% priority 50 overflow truncate }
  bucket memory   { share 10% priority 40 }
  bucket session  { share 20% priority 30 overflow drop }
}"#,
        fix: r#"The shares here add up to 110%; lower them to 100% or less.

budget {
  total 16_000
  bucket policy   { share 10% priority 90 }
  bucket tools    { share 10% priority 80 }
  bucket evidence { share 50% priority 50 overflow truncate }
  bucket memory   { share 10% priority 40 }
  bucket session  { share 20% priority 30 overflow drop }
}"#,
    },
    CodeInfo {
        code: "E0502",
        severity: Severity::Error,
        title: "budget total missing or not positive",
        what: r#"The `budget` has no `total`, or its total is 0. When this is reported,
the checks that depend on the total (E0503, E0504) are skipped."#,
        why: r#"Every allocation is computed from the total; without a positive one no
context can be compiled."#,
        example: r#"budget {
  tokenizer o200k
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
        fix: r#"Set `total` to the number of tokens the whole compiled prompt may use.

budget {
  total 16_000
  tokenizer o200k
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
    },
    CodeInfo {
        code: "E0503",
        severity: Severity::Error,
        title: "bucket `min` exceeds its share of the total",
        what: r#"A bucket's `min` is larger than its share of the budget's total: for
example `min 5_000` with `share 50%` of `total 8_000` (4,000 tokens).
Checked only when the total is valid."#,
        why: r#"The minimum can only be met by taking tokens from other buckets, which
contradicts their shares; the declaration cannot mean what it says."#,
        example: r#"budget {
  total 8_000
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% min 5_000 }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
        fix: r#"Lower the `min`, or raise the bucket's share or the total.

budget {
  total 8_000
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% min 3_000 }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
    },
    CodeInfo {
        code: "E0504",
        severity: Severity::Error,
        title: "fixed text exceeds the budget total",
        what: r#"The system prompt, the developer prompt and the longest intent `task`,
counted with the pack's tokenizer, already need more tokens than the
budget's `total`. Checked only when the total is valid."#,
        why: r#"Fixed text is never truncated and is paid for before the buckets are
split, so every compile of that intent would fail with `budget_exhausted`
(exit 5)."#,
        example: r#"prompt system """
  You are ACME's support assistant. Answer order, refund, shipping
  and account questions for ACME customers, concisely and factually,
  in the customer's language.
"""

budget {
  total 20
  bucket evidence { share 60% }
  bucket session  { share 40% }
}"#,
        fix: r#"Raise the total, shorten the fixed text, or move reference material into
a `block` in a bucket, where it is budgeted and can be truncated.

prompt system """
  You are ACME's support assistant.
"""

block refund_rules in business priority 10 """
  Refunds are possible within 30 days of delivery.
"""

budget {
  total 4_000
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket business { share 20% }
  bucket evidence { share 40% }
  bucket memory   { share 5% }
  bucket session  { share 15% }
}"#,
    },
    // ── Errors: imports ──────────────────────────────────────────────────
    CodeInfo {
        code: "E0701",
        severity: Severity::Error,
        title: "import without a version",
        what: r#"An `import` names no `version`. The diagnostic points at the `import`
keyword."#,
        why: r#"There is no "latest": an import pins an exact version so that builds are
reproducible and a new upstream release cannot change the pack's
policies or tools without a review."#,
        example: r#"import "acme/base-safety""#,
        fix: r#"Name the exact version to use.

import "acme/base-safety" version "2.1.0""#,
    },
    CodeInfo {
        code: "E0702",
        severity: Severity::Error,
        title: "import not found in the registry",
        what: r#"The registry has no pack with the imported name, or no published version
equal to the one the import names."#,
        why: r#"The pack cannot be built without the definitions it imports."#,
        example: r#"import "acme/base-safty" version "2.1.0""#,
        fix: r#"Correct the name or the version, or publish the library first.

import "acme/base-safety" version "2.1.0""#,
    },
    CodeInfo {
        code: "E0703",
        severity: Severity::Error,
        title: "lockfile hash mismatch for an import",
        what: r#"The lockfile records the content hash of every imported pack, and for a
pack from an OCI registry the digest of its manifest. The content found for
this import no longer has that hash, or the version's tag in the OCI
registry was moved to another manifest. The same holds for the packs an
import was built against: the copy it carries must be the locked one, and
two imports may not bring in two different contents of one version."#,
        why: r#"A published version must never change. A mismatch means it was
republished or tampered with (or its tag pushed again), and the policies,
tools and redactors it brings in may not be the ones that were reviewed."#,
        example: r#"// The lockfile pins acme/base-safety 2.1.0 to a hash that the registry's
// copy of 2.1.0 no longer has.
import "acme/base-safety" version "2.1.0""#,
        fix: r#"Do not just update the lockfile. If the change is unexpected, treat it
as a supply-chain incident and restore the published content. If it is
intended, it belongs in a new version: import that version and let the
lockfile record its hash.

import "acme/base-safety" version "2.1.1""#,
    },
    CodeInfo {
        code: "E0704",
        severity: Severity::Error,
        title: "imported name conflicts with another name",
        what: r#"A name brought in by an import is also defined locally or by another
import: a tool, policy, redactor, block or context field."#,
        why: r#"References to the name would be ambiguous, and letting one definition
shadow the other could silently replace a shared safety policy or
redactor with a weaker local one."#,
        example: r#"// acme/base-safety 2.1.0 defines a policy named `pii`.
import "acme/base-safety" version "2.1.0"

policy pii {
  when request.channel == "web"
  redact email
}"#,
        fix: r#"Rename the local definition and update its references, or drop it and
rely on the imported one.

import "acme/base-safety" version "2.1.0"

policy web_pii {
  when request.channel == "web"
  redact email
}"#,
    },
    CodeInfo {
        code: "E0705",
        severity: Severity::Error,
        title: "import cycle",
        what: r#"Packs import each other, directly or through other packs. The message
lists the cycle."#,
        why: r#"A cycle has no order in which to resolve names, and each pack's pinned
hash would depend on the other's."#,
        example: r#"// acme/base-safety 2.1.0
pack "acme/base-safety" version "2.1.0" library
import "acme/pii" version "1.0.0"

// acme/pii 1.0.0
pack "acme/pii" version "1.0.0" library
import "acme/base-safety" version "2.1.0""#,
        fix: r#"Move the definitions both packs need into a third library that both
import, and remove one direction of the cycle.

// acme/pii 1.1.0
pack "acme/pii" version "1.1.0" library
import "acme/common" version "1.0.0""#,
    },
    // ── Errors: redactors ────────────────────────────────────────────────
    CodeInfo {
        code: "E0801",
        severity: Severity::Error,
        title: "redactor pattern is not a valid regular expression",
        what: r#"A redactor's `pattern` does not compile as a regular expression. The
syntax is that of the Rust `regex` crate, which has no look-around and no
backreferences. Remember that the pattern is a string first: `\\d` in the
source is the regular expression `\d`."#,
        why: r#"A pattern that cannot compile cannot redact anything; finding that out
at check time is far better than leaking the data it was meant to hide."#,
        example: r#"redactor card_number pattern "(?<!\\d)\\d{16}(?!\\d)""#,
        fix: r#"Rewrite the pattern without the unsupported construct; here, word
boundaries replace the look-arounds.

redactor card_number pattern "\\b\\d{16}\\b""#,
    },
    // ── Runtime warnings, reported in a compiled envelope's `diagnostics` ───
    CodeInfo {
        code: "R0201",
        severity: Severity::Warning,
        title: "advisory policy failed to evaluate",
        what: r#"At run time, a policy's JsonLogic raised an error for this run's inputs.
The policy is `advisory`, so it is skipped: its effects are not applied,
its `policy_manifest` entry records the error, and the envelope's
`diagnostics` list names it. An enforcing policy would instead fail the
compile closed with `policy_eval_error` (exit 5)."#,
        why: r#"A skipped policy is a control that did not run. Advisory is meant for
policies whose failure is tolerable; the diagnostic keeps the failure
visible so that it can be fixed rather than silently ignored."#,
        example: r#"context {
  order.id: string?
}

// "+" casts to a number; an id such as "A-1234" is not one, so evaluation
// raises an error for that run.
policy legacy_orders priority 20 advisory {
  when json { "<": [{ "+": [{ "var": "ctx.order.id" }] }, 100000] }
  instruct "Orders below 100000 were placed in the old shop."
}"#,
        fix: r#"Make the condition total over every valid input: prefer typed fields and
expressions to raw JsonLogic, and guard optional fields with `exists()`.
If the policy must always apply, drop `advisory` so that a failure stops
the compile instead of skipping it.

context {
  order.id: string?
  order.number: int?
}

policy legacy_orders priority 20 advisory {
  when exists(ctx.order.number) and ctx.order.number < 100000
  instruct "Orders below 100000 were placed in the old shop."
}"#,
    },
    CodeInfo {
        code: "R0501",
        severity: Severity::Warning,
        title: "optional template field rendered empty",
        what: r#"At run time, a template referenced an optional field that the request
did not supply, and the interpolation had no default, so it rendered as
the empty string. This is the run-time side of W0201."#,
        why: r#"The prompt reads wrongly ("refund for order ."), and the model may fill
the gap by guessing a value."#,
        example: r#"context {
  order.id: string?
}

intent refund {
  safety supervised
  tools lookup_order, issue_refund
  task "Help the customer get a refund for order {{ ctx.order.id }}."
}"#,
        fix: r#"Give the interpolation a default, or make the field required if every
request must carry it.

intent refund {
  safety supervised
  tools lookup_order, issue_refund
  task """
    Help with a refund for order {{ ctx.order.id | "(not given)" }}.
  """
}"#,
    },
    // ── Warnings ─────────────────────────────────────────────────────────
    CodeInfo {
        code: "W0201",
        severity: Severity::Warning,
        title: "optional field used without a guard or default",
        what: r#"An optional field (a type ending in `?`, or a built-in such as
`run.tenant`) is read in a condition that does not test it with
`exists()` first, or in a template without a `| "default"`."#,
        why: r#"A missing field reads as null. Ordering comparisons treat null like 0, so
`ctx.user.age < 18` fires for every caller who sent no age, and a template
renders the empty string (R0501 at run time)."#,
        example: r#"context {
  user.age: int?
}

policy minors_on_voice priority 100 {
  when ctx.user.age < 18 and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
        fix: r#"Guard the condition with `exists()`, or in a template give a default:
`{{ ctx.order.id | "(not given)" }}`. Make the field required if every
request must carry it.

policy minors_on_voice priority 100 {
  when exists(ctx.user.age) and ctx.user.age < 18
    and request.channel == "voice"
  refuse "We cannot serve minors over the phone."
}"#,
    },
    CodeInfo {
        code: "W0202",
        severity: Severity::Warning,
        title: "constant condition",
        what: r#"A `when` condition has the same value for every request, so the policy
always or never fires: it reads no field (`when false`, `when 1 < 2`), a
literal `true` or `false` decides it whatever the fields hold
(`when ctx.age > 18 or true`), or the policy analysis proves that every
request satisfies it (`when ctx.age >= 18 or ctx.age < 18`). `when true`
is the idiom for an always-on policy and is not reported."#,
        why: r#"A policy that never fires looks like a safeguard but protects nothing;
one that always fires hides the condition its author meant to write."#,
        example: r#"policy pii {
  when false
  redact email
}"#,
        fix: r#"Write the intended condition, use `when true` for a policy that always
applies, or delete the policy.

policy pii {
  when true
  redact email
}"#,
    },
    CodeInfo {
        code: "W0301",
        severity: Severity::Warning,
        title: "policy can never fire",
        what: r#"No request satisfies the policy's `when` condition, given the context
schema (types, enum variants, required fields), the declared intents and
the safety modes. The help names a smallest set of the condition's parts
that cannot hold together, and the constraints they rely on. Constant
conditions (no field read, or a literal `false` deciding: `X and false`)
are W0202's; conditions the analysis cannot decide
(arithmetic, raw JsonLogic outside its fragment) are never reported."#,
        why: r#"A policy that never fires looks like a safeguard but protects nothing.
Usually two comparisons were meant to be joined by `or`, a bound points
the wrong way, or an enum lost the variant the condition names."#,
        example: r#"policy out_of_range priority 50 {
  when ctx.user.age < 18 and ctx.user.age > 65
  escalate "age-review"
}"#,
        fix: r#"Write the condition you meant, usually with `or`; delete the policy if it
is no longer needed.

policy out_of_range priority 50 {
  when ctx.user.age < 18 or ctx.user.age > 65
  escalate "age-review"
}"#,
    },
    CodeInfo {
        code: "W0302",
        severity: Severity::Warning,
        title: "policy shadowed by a higher-priority refusal",
        what: r#"Every request that fires the policy also fires a `refuse` policy of
higher priority, so the request is refused and the policy's effects never
apply. The help gives a request where both fire, to paste into a test
case (the JSON output carries it as `witness`), and names the refusals."#,
        why: r#"The author of the shadowed policy expected it to do something: escalate,
gate a tool, add an instruction. It never will, and reviewers reading it
will believe otherwise."#,
        example: r#"policy minors priority 100 {
  when ctx.user.age < 18
  refuse "We cannot serve minors."
}

policy young_voice priority 50 {
  when ctx.user.age < 16 and request.channel == "voice"
  escalate "youth-desk"
}"#,
        fix: r#"Give the shadowed policy a higher priority than the refusal if its effects
must apply first, narrow the refusal, or delete the shadowed policy.

policy young_voice priority 110 {
  when ctx.user.age < 16 and request.channel == "voice"
  escalate "youth-desk"
}"#,
    },
    CodeInfo {
        code: "W0303",
        severity: Severity::Warning,
        title: "policies of equal priority with contradictory effects",
        what: r#"Two policies of the same priority can fire for the same request with
effects that contradict each other: different refusal reasons, different
escalation targets, or one requires approval for a tool the other denies.
Only where no higher-priority policy already decides the matter. The help
gives a request where both fire (`witness` in the JSON output)."#,
        why: r#"Equal priorities are evaluated in name order, so the reason a customer
hears or the queue a request goes to is decided by how the policies are
spelled. A rename would silently change the outcome."#,
        example: r#"policy fraud_hold priority 80 {
  when "fraud" in ctx.flags
  refuse "Your account is under review."
}

policy sanctions priority 80 {
  when ctx.customer.country in ["KP", "IR"]
  refuse "We cannot serve your region."
}"#,
        fix: r#"Decide which policy wins and give it the higher priority, or make the
conditions exclusive.

policy sanctions priority 90 {
  when ctx.customer.country in ["KP", "IR"]
  refuse "We cannot serve your region."
}"#,
    },
    CodeInfo {
        code: "W0304",
        severity: Severity::Warning,
        title: "policy analysis stopped at its limit",
        what: r#"The policy analysis behind W0301, W0302, W0303 and W0405 decides its
questions within a fixed budget of work, so that `check` stays fast in an
editor. On this pack it ran out: the findings reported before the limit
stand, and the rest was not analysed. The budget counts work, not time,
so every machine stops at the same place."#,
        why: r#"A clean `check` would otherwise suggest that the policies were shown to
be free of dead, shadowed and conflicting rules when they were not."#,
        example: r#"// the fields `a0`..`a19` and `b0`..`b19` declared `bool`
policy many_pairs priority 10 {
  when (ctx.a0 and ctx.b0) or (ctx.a1 and ctx.b1) or (ctx.a2 and ctx.b2)
    or (ctx.a3 and ctx.b3) or (ctx.a4 and ctx.b4) or (ctx.a5 and ctx.b5)
    or (ctx.a6 and ctx.b6) or (ctx.a7 and ctx.b7) or (ctx.a8 and ctx.b8)
    or (ctx.a9 and ctx.b9) or (ctx.a10 and ctx.b10) or (ctx.a11 and ctx.b11)
    or (ctx.a12 and ctx.b12) or (ctx.a13 and ctx.b13) or (ctx.a14 and ctx.b14)
    or (ctx.a15 and ctx.b15) or (ctx.a16 and ctx.b16) or (ctx.a17 and ctx.b17)
    or (ctx.a18 and ctx.b18) or (ctx.a19 and ctx.b19)
  instruct "..."
}

policy crossed_pairs priority 10 {
  when (ctx.a0 and ctx.b7) or (ctx.a1 and ctx.b8) or (ctx.a2 and ctx.b9)
    or (ctx.a3 and ctx.b10) or (ctx.a4 and ctx.b11) or (ctx.a5 and ctx.b12)
    or (ctx.a6 and ctx.b13) or (ctx.a7 and ctx.b14) or (ctx.a8 and ctx.b15)
    or (ctx.a9 and ctx.b16) or (ctx.a10 and ctx.b17) or (ctx.a11 and ctx.b18)
    or (ctx.a12 and ctx.b19) or (ctx.a13 and ctx.b0) or (ctx.a14 and ctx.b1)
    or (ctx.a15 and ctx.b2) or (ctx.a16 and ctx.b3) or (ctx.a17 and ctx.b4)
    or (ctx.a18 and ctx.b5) or (ctx.a19 and ctx.b6)
  refuse "..."
}"#,
        fix: r#"Conditions that combine many fields in many alternatives are the costly
ones: split such a policy into several smaller ones.

policy pair_1 priority 10 {
  when ctx.a1 and ctx.b1
  instruct "..."
}"#,
    },
    CodeInfo {
        code: "W0401",
        severity: Severity::Warning,
        title: "tool permitted by no intent",
        what: r#"A tool is declared but no intent lists it in `tools`, so it can never be
surfaced. Prohibited tools are not reported. The diagnostic points at the
tool's name."#,
        why: r#"An unreachable tool is dead weight in the artifact, and usually means an
intent's `tools` list is missing an entry."#,
        example: r#"tool export_orders {
  description "Export the customer's orders as CSV."
  kind read
  risk medium
  approval auto
}

intent general fallback {
  tools lookup_order
  task "Answer general questions about ACME."
}"#,
        fix: r#"Add the tool to the intents that need it, delete it, or `prohibit` it if
it is declared only to be forbidden.

intent general fallback {
  tools lookup_order, export_orders
  task "Answer general questions about ACME."
}"#,
    },
    CodeInfo {
        code: "W0402",
        severity: Severity::Warning,
        title: "tool without description",
        what: r#"A tool has no `description`. The diagnostic points at the tool's name."#,
        why: r#"The description is what the model reads to decide when to call the tool:
it fills the `tools` bucket and the provider's tool definitions. Without
one, the model has to guess from the name."#,
        example: r#"tool lookup_order {
  kind read
  risk low
  approval auto
}"#,
        fix: r#"Say what the tool does and when to use it.

tool lookup_order {
  description "Fetch an order by its id."
  kind read
  risk low
  approval auto
}"#,
    },
    CodeInfo {
        code: "W0403",
        severity: Severity::Warning,
        title: "`require_approval` raises a tool above an intent's safety mode",
        what: r#"A policy's `require_approval` raises a tool to at least `confirm`, and an
intent permits that tool with a safety mode whose ceiling is lower (an
`autonomous` intent honors only `auto`). Intents in which the policy
provably cannot fire (`when request.intent == "refund"`) are not named."#,
        why: r#"In runs where the policy fires, the raised tool exceeds what the safety
mode honors, so it is withheld altogether instead of being gated behind
a confirmation. That may be what you want, but it is easy to miss."#,
        example: r#"tool apply_coupon {
  description "Apply a coupon to the customer's cart."
  kind write
  risk medium
  approval auto
}

intent checkout {
  safety autonomous
  tools apply_coupon
  task "Help the customer check out."
}

policy large_carts priority 50 {
  when exists(ctx.cart.total) and ctx.cart.total > 1000.0
  require_approval apply_coupon
}"#,
        fix: r#"Declare the safety mode the intent needs when the policy fires, or, if
withholding the tool is the point, say so with `deny apply_coupon`.

intent checkout {
  safety supervised
  tools apply_coupon
  task "Help the customer check out."
}"#,
    },
    CodeInfo {
        code: "W0404",
        severity: Severity::Warning,
        title: "tool kind one edit away from a standard kind",
        what: r#"A tool's `kind` is free (`kind query` is fine), but this one is one edit
(a letter added, dropped, changed, or two swapped) away from a standard kind:
`read`, `search`, `write`, `delete`, `notify`, `execute`, `deploy`,
`payment`, `admin`. A standard kind with a suffix (`reads`, `payments`) and
a kind written with the `x_` prefix (`x_wirte`) are not reported."#,
        why: r#"Hosts and reviewers group tools by kind (the envelope's
`capability_metadata.kind`), so a misspelled kind such as `wirte` would
silently put a writing tool in no group at all."#,
        example: r#"tool update_address {
  description "Change the shipping address of an order."
  kind wirte
  risk medium
  approval confirm
}"#,
        fix: r#"Use the standard kind the label suggests, or, if the kind is meant,
prefix it with `x_`.

tool update_address {
  description "Change the shipping address of an order."
  kind write
  risk medium
  approval confirm
}"#,
    },
    CodeInfo {
        code: "W0405",
        severity: Severity::Warning,
        title: "tool never surfaced",
        what: r#"An intent permits the tool, but in every safety mode each request of
every such intent that is not refused fires a policy that withholds it:
one that denies it, or raises it with `require_approval` above what the
mode honors. The diagnostic points at the tool's name and names the
policies. `ctxpack explain --tools PACK` shows the whole table."#,
        why: r#"The intent's `tools` list promises a capability the agent never gets;
the model is told to do work it has no tool for, and reviewers are
misled about what the agent can do."#,
        example: r#"intent refund {
  safety supervised
  tools issue_refund
  task "Help the customer get a refund."
}

policy refunds_paused priority 90 {
  when request.intent == "refund"
  deny issue_refund
}"#,
        fix: r#"Narrow the withholding policy to the requests it is meant for, or remove
the tool from the intents if it is not meant to be used.

policy refunds_paused priority 90 {
  when request.intent == "refund" and "chargeback" in ctx.flags
  deny issue_refund
}"#,
    },
    // ── Errors: budget ───────────────────────────────────────────────────
    CodeInfo {
        code: "W0501",
        severity: Severity::Warning,
        title: "bucket shares sum under 100%",
        what: r#"The shares of the budget's buckets add up to less than 100%."#,
        why: r#"Each bucket gets its share of the available tokens and no more, so the
rest of the budget is never used: the context is smaller than the total
allows."#,
        example: r#"budget {
  total 16_000
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 40% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
        fix: r#"Give the remainder to the buckets that can use it, or lower the total.

budget {
  total 16_000
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
    },
    CodeInfo {
        code: "W0502",
        severity: Severity::Warning,
        title: "runtime source has no bucket",
        what: r#"The runtime routes its inputs to buckets with fixed names: `policy`
(fired `instruct` texts), `tools` (descriptions of surfaced tools),
`evidence`, `memory` and `session` (history turns). The budget declares
no bucket for one of them."#,
        why: r#"Every block from that source is dropped on every compile. It is listed
in `dropped_block_ids`, but the model never sees it."#,
        example: r#"budget {
  total 16_000
  bucket policy   { share 10% }
  bucket evidence { share 60% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
        fix: r#"Declare the missing bucket and rebalance the shares.

budget {
  total 16_000
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}"#,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The codes the language spec's diagnostics table defines, plus the
    /// runtime's codes. A code may be added, never removed.
    const EXPECTED: &[(&str, Severity)] = &[
        ("E0001", Severity::Error),
        ("E0101", Severity::Error),
        ("E0102", Severity::Error),
        ("E0103", Severity::Error),
        ("E0104", Severity::Error),
        ("E0105", Severity::Error),
        ("E0106", Severity::Error),
        ("E0107", Severity::Error),
        ("E0201", Severity::Error),
        ("E0202", Severity::Error),
        ("E0203", Severity::Error),
        ("E0204", Severity::Error),
        ("E0205", Severity::Error),
        ("E0206", Severity::Error),
        ("E0207", Severity::Error),
        ("W0201", Severity::Warning),
        ("W0202", Severity::Warning),
        ("W0301", Severity::Warning),
        ("W0302", Severity::Warning),
        ("W0303", Severity::Warning),
        ("W0304", Severity::Warning),
        ("E0301", Severity::Error),
        ("E0401", Severity::Error),
        ("E0402", Severity::Error),
        ("E0403", Severity::Error),
        ("E0404", Severity::Error),
        ("W0401", Severity::Warning),
        ("W0402", Severity::Warning),
        ("W0403", Severity::Warning),
        ("W0404", Severity::Warning),
        ("W0405", Severity::Warning),
        ("E0501", Severity::Error),
        ("W0501", Severity::Warning),
        ("E0502", Severity::Error),
        ("E0503", Severity::Error),
        ("E0504", Severity::Error),
        ("W0502", Severity::Warning),
        ("E0701", Severity::Error),
        ("E0702", Severity::Error),
        ("E0703", Severity::Error),
        ("E0704", Severity::Error),
        ("E0705", Severity::Error),
        ("E0801", Severity::Error),
        ("R0201", Severity::Warning),
        ("R0501", Severity::Warning),
    ];

    #[test]
    fn codes_are_unique_and_sorted() {
        let mut seen = HashSet::new();
        for info in CODES {
            assert!(seen.insert(info.code), "{} is listed twice", info.code);
        }
        for pair in CODES.windows(2) {
            assert!(
                pair[0].code < pair[1].code,
                "{} must come after {}",
                pair[0].code,
                pair[1].code
            );
        }
    }

    #[test]
    fn codes_are_well_formed_and_severity_matches_letter() {
        for info in CODES {
            let bytes = info.code.as_bytes();
            assert_eq!(bytes.len(), 5, "{} is not a letter and 4 digits", info.code);
            assert!(
                bytes[1..].iter().all(u8::is_ascii_digit),
                "{} is not a letter and 4 digits",
                info.code
            );
            let expected = match bytes[0] {
                b'E' => Severity::Error,
                b'W' | b'R' => Severity::Warning,
                _ => panic!("{} does not start with E, W or R", info.code),
            };
            assert_eq!(
                info.severity, expected,
                "{} has the wrong severity",
                info.code
            );
        }
    }

    #[test]
    fn every_spec_code_is_registered() {
        for &(code, severity) in EXPECTED {
            let info = lookup(code).unwrap_or_else(|| panic!("{code} has no page"));
            assert_eq!(info.severity, severity, "{code} has the wrong severity");
        }
        assert_eq!(
            CODES.len(),
            EXPECTED.len(),
            "a code is missing from EXPECTED"
        );
    }

    #[test]
    fn every_field_is_filled_in() {
        for info in CODES {
            for (name, text) in [
                ("title", info.title),
                ("what", info.what),
                ("why", info.why),
                ("example", info.example),
                ("fix", info.fix),
            ] {
                assert!(!text.trim().is_empty(), "{}: `{name}` is empty", info.code);
                assert_eq!(
                    text,
                    text.trim(),
                    "{}: `{name}` has outer whitespace",
                    info.code
                );
            }
        }
    }

    #[test]
    fn titles_follow_the_message_style() {
        for info in CODES {
            let title = info.title;
            assert!(!title.contains('\n'), "{}: title spans lines", info.code);
            assert!(
                !title.ends_with('.'),
                "{}: title ends with a period",
                info.code
            );
            assert!(
                !title.starts_with(|c: char| c.is_uppercase()),
                "{}: title is not lowercase",
                info.code
            );
        }
    }

    #[test]
    fn every_fix_has_prose_and_a_snippet() {
        for info in CODES {
            let (prose, snippet) = info.fix_parts();
            assert!(!prose.trim().is_empty(), "{}: fix has no prose", info.code);
            assert!(
                !snippet.trim().is_empty(),
                "{}: fix has no snippet",
                info.code
            );
        }
    }

    #[test]
    fn lookup_ignores_case() {
        assert_eq!(lookup("E0102").map(|i| i.code), Some("E0102"));
        assert_eq!(lookup("e0102").map(|i| i.code), Some("E0102"));
        assert_eq!(lookup("w0501").map(|i| i.code), Some("W0501"));
        assert_eq!(lookup("r0201").map(|i| i.code), Some("R0201"));
    }

    #[test]
    fn lookup_rejects_unknown_codes() {
        for code in ["E9999", "X0102", "", "E010", "E01020", "unknown name"] {
            assert!(lookup(code).is_none(), "{code:?} should not be found");
        }
    }

    #[test]
    fn page_has_the_documented_shape() {
        for info in CODES {
            let page = info.page();
            let heading = format!(
                "{} ({}): {}\n",
                info.code,
                info.severity.as_str(),
                info.title
            );
            assert!(page.starts_with(&heading), "{}: bad heading", info.code);
            assert!(page.contains(info.code) && page.contains(info.title));
            for section in [
                "\n\nWhat it does\n  ",
                "\n\nWhy it matters\n  ",
                "\n\nExample\n  ",
                "\n\nFix\n  ",
            ] {
                assert!(page.contains(section), "{}: no {section:?}", info.code);
            }
            assert!(page.ends_with('\n') && !page.ends_with("\n\n"));
        }
    }

    #[test]
    fn page_renders_snippets_indented() {
        let page = lookup("E0102").unwrap().page();
        assert!(page.starts_with("E0102 (error): unknown name\n\nWhat it does\n  "));
        assert!(page.contains("\nExample\n  tool issue_refund {"));
        assert!(page.contains("\n    tools issue_refnud\n"));
    }

    #[test]
    fn pages_fit_a_terminal() {
        for info in CODES {
            for line in info.page().lines() {
                assert!(
                    line.chars().count() <= 80,
                    "{}: line too long: {line:?}",
                    info.code
                );
                assert_eq!(line, line.trim_end(), "{}: trailing whitespace", info.code);
            }
        }
    }

    #[test]
    fn markdown_fences_the_snippets() {
        let md = lookup("E0401").unwrap().markdown();
        assert!(md.starts_with("**E0401** (error): "));
        assert_eq!(md.matches("```ctxpack\n").count(), 2);
        assert!(md.contains("`supervised` honors `auto` and `confirm`"));
    }

    #[test]
    fn severity_names() {
        assert_eq!(Severity::Error.as_str(), "error");
        assert_eq!(Severity::Warning.as_str(), "warning");
        assert_eq!(Severity::Warning.to_string(), "warning");
    }
}
