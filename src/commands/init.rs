//! `ctxpack init [DIR] [--name scope/name]`: a starter project that checks, builds,
//! compiles and tests as written.
//!
//! It writes, into `DIR` (default `.`, created if missing), for a pack named
//! `scope/name`:
//!
//! | file | what it is |
//! | --- | --- |
//! | `name.ctxpack` | the pack: prompts, a budget, a tool of each risk level, two intents (one fallback), a policy of each effect, a redactor and a static block, with doc comments |
//! | `name.tests.yaml` | passing `ctxpack test` cases, at least one per policy effect |
//! | `examples/{run,request,evidence,memory}.json` | one request's inputs for `ctxpack compile` |
//! | `.github/workflows/ctxpack.yml` | a GitHub Actions workflow: check, fmt, build, test, compile the examples |
//!
//! The default name is `my-org/` and the directory's name, lowercased, with every run of
//! other characters than `a-z` and `0-9` turned into one `-` (`my-org/agent` when
//! nothing is left); `--name` must be a valid `scope/name` (exit 2).
//!
//! It never overwrites: when any of those files (or a file where one of their
//! directories goes) exists, it writes nothing, lists them and exits 1 (kind
//! `would_overwrite`, with `files`). A directory or file that cannot be created is exit
//! 3 (`unwritable_output`), after removing whatever this run had written.
//!
//! The templates live in `src/commands/init/`; placeholders are `@WORD@`, never the
//! `{{ }}` of pack templates.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use serde_json::json;

use super::{exit, CliError, Failures};
use crate::artifact::valid_pack_name;

/// The scope of a name derived from the directory.
pub const DEFAULT_SCOPE: &str = "my-org";
/// The starter pack's version.
pub const VERSION: &str = "0.1.0";
/// The `$id` of the schema of `*.tests.yaml` files, named on the first line of the
/// test file written.
pub const TESTS_SCHEMA_ID: &str = "https://ctxpack.invalid/schemas/ctxpack.tests.v1.json";
/// Where the CI workflow goes, relative to `DIR`.
pub const WORKFLOW_PATH: &str = ".github/workflows/ctxpack.yml";

const PACK: &str = include_str!("init/pack.ctxpack.tmpl");
const TESTS: &str = include_str!("init/tests.yaml.tmpl");
const RUN: &str = include_str!("init/run.json.tmpl");
const REQUEST: &str = include_str!("init/request.json.tmpl");
const EVIDENCE: &str = include_str!("init/evidence.json.tmpl");
const MEMORY: &str = include_str!("init/memory.json.tmpl");
const WORKFLOW: &str = include_str!("init/ci.yml.tmpl");

/// Arguments of `ctxpack init`.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// The directory to write into; created if missing.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The pack's name, `scope/name` [default: my-org/<the directory's name>].
    #[arg(long, value_name = "SCOPE/NAME", value_parser = parse_name)]
    pub name: Option<String>,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// `--name`'s parser: a usage error (exit 2) unless it is a valid `scope/name`.
fn parse_name(input: &str) -> Result<String, String> {
    if valid_pack_name(input) {
        Ok(input.to_owned())
    } else {
        Err(format!(
            "`{input}` is not a pack name: expected `scope/name`, each part made of lowercase \
             letters, digits and `-`, starting with a letter or a digit (e.g. `my-org/support-agent`)"
        ))
    }
}

/// One file of the starter project: its path relative to `DIR`, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StarterFile {
    pub path: PathBuf,
    pub text: String,
}

/// The starter project for the pack `name` (a valid `scope/name`), in the order it is
/// written. A pure function: `run` only adds the file system.
pub fn starter(name: &str) -> Vec<StarterFile> {
    let (scope, file) = name.split_once('/').unwrap_or((DEFAULT_SCOPE, name));
    let fill = |template: &str| {
        template
            .replace("@NAME@", name)
            .replace("@SCOPE@", scope)
            .replace("@FILE@", file)
            .replace("@VERSION@", VERSION)
            .replace("@TESTS_SCHEMA@", TESTS_SCHEMA_ID)
    };
    [
        (format!("{file}.ctxpack"), PACK),
        (format!("{file}.tests.yaml"), TESTS),
        ("examples/run.json".to_owned(), RUN),
        ("examples/request.json".to_owned(), REQUEST),
        ("examples/evidence.json".to_owned(), EVIDENCE),
        ("examples/memory.json".to_owned(), MEMORY),
        (WORKFLOW_PATH.to_owned(), WORKFLOW),
    ]
    .into_iter()
    .map(|(path, template)| StarterFile {
        path: PathBuf::from(path),
        text: fill(template),
    })
    .collect()
}

/// The name `init` gives a pack written into `dir`: `my-org/` and the directory's name,
/// sanitized to `[a-z0-9][a-z0-9-]*` and cut to 64 characters.
pub fn default_name(dir: &Path) -> String {
    let base = directory_name(dir).unwrap_or_default();
    let mut part = String::new();
    for c in base.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            part.push(c);
        } else if !part.is_empty() && !part.ends_with('-') {
            part.push('-');
        }
    }
    // At most the 64 characters a name part may have, without a `-` left at its end.
    let part: String = part.chars().take(crate::artifact::MAX_PART_LEN).collect();
    let part = part.trim_end_matches('-');
    let part = if part.is_empty() { "agent" } else { part };
    format!("{DEFAULT_SCOPE}/{part}")
}

/// The last component of `dir` once made absolute and `.`/`..` resolved, so that `.`
/// names the current directory.
fn directory_name(dir: &Path) -> Option<String> {
    let absolute = std::path::absolute(dir).ok()?;
    let mut parts: Vec<Component> = Vec::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    match parts.last()? {
        Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// Runs `ctxpack init`.
pub fn run(args: &InitArgs) -> i32 {
    let mut failures = Failures::new(args.json_errors);
    let name = args.name.clone().unwrap_or_else(|| default_name(&args.dir));
    let files = starter(&name);
    match write_all(&args.dir, &files) {
        Ok(()) => {
            out!("{}", summary(&args.dir, &name, &files));
            exit::OK
        }
        Err(error) => {
            failures.push(error);
            failures.finish(exit::OK)
        }
    }
}

/// Writes every file or none: existing files are refused before anything is written,
/// and a failed write removes what this call created.
fn write_all(dir: &Path, files: &[StarterFile]) -> Result<(), CliError> {
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::new(
            "unwritable_output",
            exit::UNREADABLE,
            format!("`{}` exists and is not a directory", dir.display()),
        ));
    }
    let conflicts = conflicts(dir, files);
    if !conflicts.is_empty() {
        let message = format!(
            "`ctxpack init` never overwrites, and `{}` already has {}: {}; nothing was written",
            dir.display(),
            if conflicts.len() == 1 {
                "a file it would write"
            } else {
                "files it would write"
            },
            conflicts.join(", ")
        );
        return Err(
            CliError::new("would_overwrite", exit::FAILED, message).with("files", json!(conflicts))
        );
    }
    let mut created = Created::default();
    for file in files {
        if let Err(e) = created.write(&dir.join(&file.path), &file.text) {
            created.undo();
            return Err(e);
        }
    }
    Ok(())
}

/// The files (relative to `dir`, `/`-separated) that stand in the way: a target that
/// exists in any form (a dangling link included), or a file where a directory must go.
fn conflicts(dir: &Path, files: &[StarterFile]) -> Vec<String> {
    let mut out = Vec::new();
    for file in files {
        let mut prefix = PathBuf::new();
        for component in file.path.components() {
            prefix.push(component);
            let is_target = prefix == file.path;
            let in_the_way = match std::fs::symlink_metadata(dir.join(&prefix)) {
                Err(_) => false,
                Ok(_) if is_target => true,
                Ok(_) => !dir.join(&prefix).is_dir(),
            };
            if in_the_way {
                let shown = prefix.to_string_lossy().replace('\\', "/");
                if !out.contains(&shown) {
                    out.push(shown);
                }
                break;
            }
        }
    }
    out
}

/// What one `init` created, so that a failure part-way can take it back.
#[derive(Default)]
struct Created {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Created {
    fn write(&mut self, path: &Path, text: &str) -> Result<(), CliError> {
        let unwritable = |what: &str, path: &Path, e: std::io::Error| {
            CliError::new(
                "unwritable_output",
                exit::UNREADABLE,
                format!("cannot {what} `{}`: {e}", path.display()),
            )
        };
        if let Some(parent) = path.parent() {
            // Outermost first, so that `undo` can remove them innermost first.
            let missing: Vec<&Path> = parent
                .ancestors()
                .filter(|a| !a.as_os_str().is_empty() && !a.exists())
                .collect();
            for d in missing.into_iter().rev() {
                std::fs::create_dir(d).map_err(|e| unwritable("create", d, e))?;
                self.dirs.push(d.to_path_buf());
            }
        }
        // `create_new`: a file that appeared since the check is still never overwritten.
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| unwritable("create", path, e))?;
        self.files.push(path.to_path_buf());
        f.write_all(text.as_bytes())
            .map_err(|e| unwritable("write", path, e))
    }

    fn undo(self) {
        for f in self.files.iter().rev() {
            let _ = std::fs::remove_file(f);
        }
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// What was written and what to run next.
fn summary(dir: &Path, name: &str, files: &[StarterFile]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let at = if dir == Path::new(".") {
        String::new()
    } else {
        format!(" in {}", dir.display())
    };
    let _ = writeln!(out, "created {name}@{VERSION}{at}:");
    for f in files {
        let _ = writeln!(out, "  {}", f.path.to_string_lossy().replace('\\', "/"));
    }
    let file = name.split_once('/').map_or(name, |(_, n)| n);
    let _ = writeln!(out, "\nnext:");
    if dir != Path::new(".") {
        let _ = writeln!(out, "  cd {}", shell_quote(&dir.to_string_lossy()));
    }
    for command in [
        "ctxpack check --deny-warnings .".to_owned(),
        "ctxpack test .".to_owned(),
        format!("ctxpack build {file}.ctxpack"),
        format!(
            "ctxpack compile --pack target/ctxpack/{name}/{VERSION}.json --run examples/run.json \\\n      \
             --request examples/request.json --evidence examples/evidence.json \\\n      \
             --memory examples/memory.json --explain"
        ),
    ] {
        let _ = writeln!(out, "  {command}");
    }
    let _ = writeln!(
        out,
        "\n{WORKFLOW_PATH} runs the same in CI; docs/getting-started.md explains every file."
    );
    out
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+:@%,=".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_are_valid_pack_names() {
        for (dir, expected) in [
            ("support-bot", "my-org/support-bot"),
            ("Support Bot", "my-org/support-bot"),
            ("--My__Agent v2--", "my-org/my-agent-v2"),
            ("agents/triage.d", "my-org/triage-d"),
            ("x/y/..", "my-org/x"),
            ("ÉTÉ", "my-org/t"),
            ("___", "my-org/agent"),
            ("/", "my-org/agent"),
            (&"a".repeat(65), &format!("my-org/{}", "a".repeat(64))),
            (
                &format!("{}-b", "a".repeat(63)),
                &format!("my-org/{}", "a".repeat(63)),
            ),
        ] {
            let name = default_name(Path::new(dir));
            assert_eq!(name, expected, "{dir}");
            assert!(valid_pack_name(&name), "{name}");
        }
        assert!(valid_pack_name(&default_name(Path::new("."))));
    }

    #[test]
    fn names_are_checked() {
        assert!(parse_name("acme/support").is_ok());
        for bad in ["acme", "Acme/x", "acme/x_y", "a/b/c", "acme/x@1.0.0", ""] {
            assert!(parse_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        let placeholder = regex::Regex::new("@[A-Z_]+@").unwrap();
        for f in starter("acme/helpdesk") {
            assert!(
                !placeholder.is_match(&f.text),
                "{}: {:?}",
                f.path.display(),
                placeholder.find(&f.text)
            );
        }
        let files = starter("acme/helpdesk");
        assert_eq!(files[0].path, Path::new("helpdesk.ctxpack"));
        assert!(files[0]
            .text
            .contains(&format!("pack \"acme/helpdesk\" version \"{VERSION}\"")));
        assert!(files[1].text.starts_with(&format!(
            "# yaml-language-server: $schema={TESTS_SCHEMA_ID}\n"
        )));
    }

    #[test]
    fn shell_words() {
        assert_eq!(shell_quote("agents/new"), "agents/new");
        assert_eq!(shell_quote("my agent"), "'my agent'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
