//! The command-line face of `Settings`: one flag (and `HANDOFF_*` variable) per setting of the
//! schema (`core::config::schema`) that names one, typed and bounded as the schema says, plus
//! `--yes`. The engine's settings struct stays plain; clap lives here, in the front end that
//! parses a command line.

use clap::builder::{PossibleValuesParser, ValueParser};
use clap::{Arg, ArgAction, ArgMatches};
use serde_json::{Map, Value};

use handoff_core::config::schema::{self, Setting, Type};
use handoff_core::config::Settings;
use handoff_core::tools::consent;

/// The settings of the command line (flags over `HANDOFF_*` variables over the defaults).
#[derive(Clone, Debug, Default)]
pub struct SettingsArgs {
    pub settings: Settings,
}

impl From<SettingsArgs> for Settings {
    fn from(args: SettingsArgs) -> Self {
        args.settings
    }
}

/// `--yes`: a shortcut for the policy `allow_all`, not a setting of its own.
const YES: &str = "yes";

/// The settings that have a flag, with it.
fn flagged() -> impl Iterator<Item = (&'static Setting, schema::Flag)> {
    schema::SETTINGS.iter().filter_map(|s| s.cli.map(|flag| (s, flag)))
}

/// The help of a flag: the setting's doc without the editor's cross-references.
fn help(doc: &str) -> String {
    let doc = match doc.find(" See |") {
        Some(at) => &doc[..at],
        None => doc,
    };
    doc.replace('|', "")
}

fn arg(setting: &Setting, flag: schema::Flag) -> Arg {
    let mut arg = Arg::new(flag.long)
        .long(flag.long)
        .global(true)
        .value_name(flag.long.to_ascii_uppercase().replace('-', "_"))
        .help(match setting.ty {
            // clap lists the possible values of the others itself.
            Type::Int { .. } | Type::Fraction | Type::Size => format!("{} Accepts {}.", help(setting.doc), setting.accepts()),
            _ => help(setting.doc),
        });
    if let Some(env) = flag.env {
        arg = arg.env(env);
    }
    if let Some(alias) = flag.alias {
        arg = arg.visible_alias(alias);
    }
    let (parser, list): (ValueParser, bool) = match setting.ty {
        Type::Bool => (clap::value_parser!(bool), false),
        Type::Int { min, max } => (clap::value_parser!(i64).range(min..=max).into(), false),
        Type::Fraction | Type::Size => (clap::value_parser!(f64).into(), false),
        Type::OneOf(names) => (PossibleValuesParser::new(names()).into(), false),
        Type::List(Type::OneOf(names)) => (PossibleValuesParser::new(names()).into(), true),
        Type::List(_) => (clap::value_parser!(String), true),
        Type::Text | Type::Path | Type::Table { .. } | Type::Map(_) | Type::Record(_) | Type::Object | Type::Key => {
            (clap::value_parser!(String), false)
        }
    };
    arg = arg.value_parser(parser).ignore_case(names_any_case(setting.ty));
    if list {
        arg.value_delimiter(',').action(ArgAction::Append)
    } else {
        arg.action(ArgAction::Set)
    }
}

/// Whether the flag takes names of the schema's, in any case (not a list of paths).
fn names_any_case(ty: Type) -> bool {
    matches!(ty, Type::OneOf(_) | Type::List(Type::OneOf(_)))
}

/// The flag's value as JSON, as the setting's type parsed it; `None` when it is not given.
fn value(matches: &ArgMatches, setting: &Setting, id: &str) -> Option<Value> {
    let text = |s: &String| match names_any_case(setting.ty) {
        // Accepted in any case, spelled as the schema does.
        true => Value::from(s.to_ascii_lowercase()),
        false => Value::from(s.clone()),
    };
    match setting.ty {
        Type::Bool => matches.get_one::<bool>(id).map(|b| Value::from(*b)),
        Type::Int { .. } => matches.get_one::<i64>(id).map(|n| Value::from(*n)),
        Type::Fraction | Type::Size => matches.get_one::<f64>(id).map(|n| Value::from(*n)),
        Type::List(_) => matches.get_many::<String>(id).map(|items| Value::Array(items.map(text).collect())),
        // A table on the command line is written as JSON (`--agents '{"x": {"command": […]}}'`).
        Type::Map(_) | Type::Record(_) | Type::Object => {
            matches.get_one::<String>(id).map(|s| serde_json::from_str(s).unwrap_or_else(|_| Value::from(s.clone())))
        }
        _ => matches.get_one::<String>(id).map(text),
    }
}

/// Puts `value` at the dotted `path` of `root`.
fn insert(root: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            root.insert(path.to_string(), value);
        }
        Some((table, rest)) => {
            let entry = root.entry(table.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

impl clap::FromArgMatches for SettingsArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = SettingsArgs::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        let mut given = serde_json::to_value(&self.settings)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        given.retain(|_, v| !v.is_null());
        for (setting, flag) in flagged() {
            if let (Some(host), Some(value)) = (setting.host, value(matches, setting, flag.long)) {
                insert(&mut given, host, value);
            }
        }
        if matches.get_flag(YES) {
            let policy = serde_json::to_value(consent::Level::AllowAll).unwrap_or_default();
            insert(&mut given, "tools.policy", policy);
        }
        let invalid = |e: String| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"));
        let settings: Settings = serde_json::from_value(Value::Object(given)).map_err(|e| invalid(e.to_string()))?;
        schema::check(&settings).map_err(invalid)?;
        self.settings = settings;
        Ok(())
    }
}

impl clap::Args for SettingsArgs {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for (setting, flag) in flagged() {
            cmd = cmd.arg(arg(setting, flag));
        }
        cmd.arg(
            Arg::new(YES)
                .long(YES)
                .global(true)
                .action(ArgAction::SetTrue)
                .help("Run edits and commands without asking (tools.policy \"allow_all\"); never lifts the sandbox nor answers a protected path or a sandbox with holes (see --sandbox)."),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse(args: &[&str]) -> Settings {
        let cmd = SettingsArgs::augment_args(clap::Command::new("t"));
        let matches = cmd.try_get_matches_from(args).unwrap();
        SettingsArgs::from_arg_matches(&matches).unwrap().settings
    }

    #[test]
    fn names_are_taken_in_any_case_and_paths_as_written() {
        let s = parse(&["t", "--tools", "READ,Bash", "--mcp-config", "/Tmp/A.json,/tmp/b.json"]);
        assert_eq!(s.tools.unwrap().enabled.unwrap(), ["read", "bash"]);
        let files = s.mcp.unwrap().config_files.unwrap();
        assert_eq!(files, [std::path::PathBuf::from("/Tmp/A.json"), "/tmp/b.json".into()]);
    }
}
