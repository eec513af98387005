//! `ctxpack versions scope/name`: a pack's published versions with their hashes.

use std::path::PathBuf;

use super::{exit, CliError};
use crate::registry::{Index, PackName, Registry};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A table of versions and hashes.
    #[default]
    Human,
    /// The pack's index document: `{"name", "versions": [{"version", "hash"}]}`.
    Json,
}

#[derive(Debug, Clone, clap::Args)]
pub struct VersionsArgs {
    /// The pack, `scope/name` (without a version).
    pub name: String,
    /// The registry: a directory or `oci://HOST[:PORT]/NAMESPACE` [default:
    /// $CTXPACK_REGISTRY, else .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

pub fn run(args: &VersionsArgs) -> i32 {
    let registry = Registry::from_env_or(args.registry.as_deref());
    let versions = match PackName::parse(&args.name).and_then(|name| registry.versions(&name)) {
        Ok(versions) => versions,
        Err(e) => {
            let e = super::publish::registry_error(&e);
            e.report(args.json_errors);
            return e.exit_code;
        }
    };
    match args.format {
        Format::Human => {
            let mut table = comfy_table::Table::new();
            table
                .load_preset(comfy_table::presets::NOTHING)
                .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
                .set_header(["version", "hash"]);
            for (version, hash) in &versions {
                table.add_row([version.to_string(), hash.clone()]);
            }
            outln!("{}", table.trim_fmt());
        }
        Format::Json => {
            let index = Index::new(args.name.clone(), versions);
            match serde_json::to_string_pretty(&index) {
                Ok(json) => outln!("{json}"),
                Err(e) => {
                    let e = CliError::new("invalid_index", exit::INVALID, e.to_string());
                    e.report(args.json_errors);
                    return e.exit_code;
                }
            }
        }
    }
    exit::OK
}
