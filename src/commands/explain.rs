//! `ctxpack explain CODE`: the page of a diagnostic code. `ctxpack explain --tools
//! PACK`: for every intent and safety mode of a pack, each tool as surfaced, withheld
//! (with the reason) or conditional (with the policies that decide it and a witness
//! for each side), from the policy analysis ([`crate::analysis`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::error::CliError;
use super::exit;
use crate::analysis::{self, Status, ToolTable, Withheld};
use crate::check::check_source_with;
use crate::codes;
use crate::diagnostic::{self, FileReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A table per intent, with notes for conditional tools.
    #[default]
    Human,
    /// One JSON document.
    Json,
}

/// Arguments of `ctxpack explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// A code such as `E0401`.
    pub code: Option<String>,
    /// Instead of a code: for every intent and safety mode of this pack (a
    /// `.ctxpack` source, `-` for standard input), each tool as surfaced, withheld
    /// (and why) or conditional (on which policies, with a witness for each side).
    #[arg(long, value_name = "PACK", conflicts_with = "code")]
    pub tools: Option<PathBuf>,
    /// Output format of `--tools`.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Registry to resolve the pack's imports from, a directory or
    /// `oci://HOST[:PORT]/NAMESPACE` [default: $CTXPACK_REGISTRY or .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Set by the global `--json-errors`: failures are one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Dispatches `explain CODE` or `explain --tools PACK`.
pub fn run_args(args: &ExplainArgs) -> i32 {
    let result = match &args.tools {
        Some(pack) => tools(pack, args),
        None => code_page(args.code.as_deref()),
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            e.report(args.json_errors);
            if !args.json_errors && e.kind == "unknown_code" {
                eprintln!("help: `ctxpack explain` lists every code");
            }
            e.exit_code
        }
    }
}

/// Every code with its title, or one code's page.
fn code_page(code: Option<&str>) -> Result<(), CliError> {
    match code {
        None => {
            for info in codes::CODES {
                outln!(
                    "{}  {:<7}  {}",
                    info.code,
                    info.severity.as_str(),
                    info.title
                );
            }
            Ok(())
        }
        Some(code) => match codes::lookup(code) {
            Some(info) => {
                out!("{}", info.page());
                Ok(())
            }
            None => Err(CliError::new(
                "unknown_code",
                exit::USAGE,
                format!("unknown diagnostic code `{code}`"),
            )),
        },
    }
}

/// `explain --tools PACK`: the table, or `check_failed` (exit 1) when the pack has
/// errors (printed for people, carried in the object for machines) or declares no
/// intent, `unreadable_input` (exit 3) when it cannot be read.
fn tools(path: &std::path::Path, args: &ExplainArgs) -> Result<(), CliError> {
    let unreadable = |message| CliError::new("unreadable_input", exit::UNREADABLE, message);
    let source = crate::source::read(path).map_err(unreadable)?;
    let registry = crate::registry::Registry::for_pack(args.registry.as_deref(), path);
    let lock = crate::imports::Lockfile::read(&crate::imports::Lockfile::path_for(path))
        .map_err(unreadable)?;
    let (checked, _) = check_source_with(&source, &registry, lock.as_ref());
    if checked.has_errors() {
        let report = FileReport {
            path: super::files::display(path),
            source,
            diagnostics: checked.diagnostics,
        };
        if !args.json_errors {
            eprint!("{}", diagnostic::to_human(&report, super::stderr_color()));
        }
        let message = format!("`{}` has errors; fix them first", path.display());
        return Err(CliError::diagnostics("check_failed", &report, message));
    }
    let Some(table) = analysis::tool_table(&checked.pack) else {
        let message = format!(
            "`{}` declares no intent, so no tool is ever surfaced",
            path.display()
        );
        return Err(CliError::new("no_intent", exit::FAILED, message));
    };
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&table.to_json()).unwrap_or_default()
        ),
        Format::Human => out!("{}", to_human(&table)),
    }
    Ok(())
}

/// The table for people: per intent, a row per permitted tool and a column per safety
/// mode, then notes with the policies and witnesses of conditional entries.
pub fn to_human(table: &ToolTable) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: the tools each intent permits, by safety mode, over the requests the pack \
         does not refuse",
        table.pack
    );
    if !table.complete {
        let _ = writeln!(
            out,
            "(the analysis stopped at its limit: entries marked `not analysed` were not decided)"
        );
    }
    for intent in &table.intents {
        let fallback = if intent.fallback { ", fallback" } else { "" };
        let _ = writeln!(
            out,
            "\nintent {} (safety {}{fallback})",
            intent.intent,
            intent.safety.as_str()
        );
        let mut grid = Table::new();
        grid.load_preset(UTF8_FULL_CONDENSED);
        let mut header = vec!["tool".to_owned()];
        header.extend(intent.modes.iter().map(|m| m.mode.as_str().to_owned()));
        grid.set_header(header);
        let mut notes: Vec<String> = Vec::new();
        let tool_names: Vec<&str> = intent
            .modes
            .first()
            .map(|m| m.tools.iter().map(|t| t.tool.as_str()).collect())
            .unwrap_or_default();
        for (k, name) in tool_names.iter().enumerate() {
            let mut row = vec![(*name).to_owned()];
            for m in &intent.modes {
                let status = &m.tools[k].status;
                row.push(cell(status, name, m.mode.as_str(), &mut notes));
            }
            grid.add_row(row);
        }
        let _ = writeln!(out, "{grid}");
        for note in notes {
            let _ = writeln!(out, "{note}");
        }
    }
    out
}

/// One cell's text; conditional, refused and undetermined entries add a note.
fn cell(status: &Status, tool: &str, mode: &str, notes: &mut Vec<String>) -> String {
    let quoted = |ps: &[String]| -> String {
        ps.iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match status {
        Status::Surfaced => "surfaced".to_owned(),
        Status::Withheld(Withheld::Prohibited) => "withheld: prohibited".to_owned(),
        Status::Withheld(Withheld::ApprovalExceeds(a)) => {
            format!("withheld: approval {}", a.as_str())
        }
        Status::Withheld(Withheld::Policies(ps)) => format!("withheld by {}", quoted(ps)),
        Status::Conditional {
            policies,
            surfaced,
            withheld,
            unknown,
        } => {
            let n = notes.len() + 1;
            let mut note = format!(
                "  [{n}] {tool} in {mode}: withheld when {} fires\n      surfaced: {}\n      withheld: {}",
                policies
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(" or "),
                surfaced.text(),
                withheld.text()
            );
            if !unknown.is_empty() {
                let _ = write!(
                    note,
                    "\n      (provided {} do not fire: they are outside the analysis)",
                    quoted(unknown)
                );
            }
            notes.push(note);
            format!("conditional [{n}]")
        }
        Status::Refused { policies } => {
            let n = notes.len() + 1;
            notes.push(format!(
                "  [{n}] {mode}: every request is refused, by {}",
                quoted(policies)
            ));
            format!("refused [{n}]")
        }
        Status::Undetermined { policies } => {
            let n = notes.len() + 1;
            notes.push(format!(
                "  [{n}] {tool} in {mode}: surfaced unless {} fires (outside the analysis)",
                quoted(policies)
            ));
            format!("undetermined [{n}]")
        }
        Status::NotAnalysed => "not analysed".to_owned(),
    }
}
