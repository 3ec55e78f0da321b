//! The settings schema (`crates/core/src/config/schema.rs`) against what derives from it: the plugin's
//! schema file, the help's option list, the CLI's flags and the README's list of them; the
//! plugin's validation of it in a real headless Neovim; and the session folder both front ends
//! use under `NVIM_APPNAME`.
//!
//! `HANDOFF_BLESS=1 cargo test --test settings` rewrites `lua/handoff/schema.lua` and the
//! "All options" block of `doc/handoff.txt` from the schema.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::CommandFactory;
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::cli::Cli;
use handoff_nvim::core::config::schema;
use handoff_nvim::core::provider::ThinkingLevel;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bless() -> bool {
    std::env::var_os("HANDOFF_BLESS").is_some()
}

#[test]
fn the_plugins_schema_file_is_the_schemas() {
    let path = root().join("lua/handoff/schema.lua");
    let want = schema::lua_file();
    if bless() {
        std::fs::write(&path, &want).unwrap();
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "{} is stale: HANDOFF_BLESS=1 cargo test --test settings rewrites it", path.display());
}

/// `doc/handoff.txt` with its "All options" block: the text before, the block, the text after.
fn help_parts() -> (String, String, String) {
    let text = std::fs::read_to_string(root().join("doc/handoff.txt")).unwrap();
    let start = text.find("All options, with their").expect("the \"All options\" paragraph");
    let open = start + text[start..].find(">lua\n").expect("its >lua block") + ">lua\n".len();
    let close = open + text[open..].find("\n<\n").expect("the block's end") + 1;
    (text[..open].to_string(), text[open..close].to_string(), text[close..].to_string())
}

#[test]
fn the_help_lists_every_option_and_only_those() {
    let (before, block, after) = help_parts();
    let want = schema::help_block();
    if bless() {
        std::fs::write(root().join("doc/handoff.txt"), format!("{before}{want}{after}")).unwrap();
        return;
    }
    // Named before compared, so a failure says which option drifted.
    for s in schema::SETTINGS {
        let name = s.key.rsplit('.').next().unwrap();
        assert!(block.contains(&format!(" {name} = ")), "doc/handoff.txt's \"All options\" leaves out {}", s.key);
    }
    assert!(block == want, "doc/handoff.txt's \"All options\" differs from the schema: HANDOFF_BLESS=1 cargo test --test settings rewrites it");
}

/// Every global flag of the command line and its variable: `(long, env)`.
fn cli_flags() -> Vec<(String, Option<String>)> {
    let cmd = Cli::command();
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?.to_string();
            Some((long, a.get_env().map(|e| e.to_string_lossy().into_owned())))
        })
        .collect()
}

#[test]
fn the_cli_has_a_flag_for_each_setting_that_names_one_and_no_other() {
    let mut want: Vec<(String, Option<String>)> = schema::SETTINGS
        .iter()
        .filter_map(|s| s.cli.map(|f| (f.long.to_string(), f.env.map(str::to_string))))
        .collect();
    // Not settings: the policy shortcut, the trust of the project's MCP file and the CLI's own
    // log file.
    want.push(("yes".into(), None));
    want.push(("trust-project-mcp".into(), None));
    want.push(("log-file".into(), Some("HANDOFF_LOG_FILE".into())));
    let mut got = cli_flags();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // The names the README and scripts use stay as they were.
    for (flag, env) in [
        ("provider", Some("HANDOFF_PROVIDER")),
        ("base-url", Some("HANDOFF_BASE_URL")),
        ("model", Some("HANDOFF_MODEL")),
        ("api-key-env", None),
        ("api-key-cmd", None),
        ("context-window", Some("HANDOFF_CONTEXT_WINDOW")),
        ("max-tokens", None),
        ("provider-name", None),
        ("session-dir", Some("HANDOFF_SESSION_DIR")),
        ("templates-dir", Some("HANDOFF_TEMPLATES_DIR")),
        ("max-retries", None),
        ("timeout", None),
        ("system-prompt", None),
        ("tools", None),
        ("max-turns", None),
        ("thinking", Some("HANDOFF_THINKING")),
        ("reasoning-effort", None),
    ] {
        assert!(got.contains(&(flag.to_string(), env.map(str::to_string))), "--{flag} ({env:?}) is gone");
    }
}

#[test]
fn the_help_names_every_flag_and_variable_as_the_cli_has_them() {
    // `:help handoff-cli`'s options paragraph (the README points there).
    let readme = std::fs::read_to_string(root().join("doc/handoff.txt")).unwrap();
    let start = readme.find("Options on every command").expect("the help's options paragraph (:help handoff-cli)");
    let paragraph = &readme[start..start + readme[start..].find("\n\n").unwrap_or(readme.len() - start)];
    let flags = cli_flags();
    for (long, env) in &flags {
        if long == "help" || long == "version" {
            continue;
        }
        assert!(paragraph.contains(&format!("`--{long}")), "the help's options paragraph leaves out --{long}");
        if let Some(env) = env {
            assert!(paragraph.contains(env.as_str()), "the help's options paragraph leaves out {env}");
        }
    }
    let words = paragraph.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    for word in words {
        if let Some(long) = word.strip_prefix("--") {
            let alias = Cli::command().get_arguments().any(|a| a.get_visible_aliases().is_some_and(|v| v.contains(&long)));
            assert!(alias || flags.iter().any(|(l, _)| l == long), "the help names --{long}, which the CLI does not have");
        } else if word.starts_with("HANDOFF_") {
            assert!(flags.iter().any(|(_, e)| e.as_deref() == Some(word)), "the help names {word}, which no flag reads");
        }
    }
}

/// Runs `code` in a headless Neovim with the plugin on 'runtimepath' (XDG folders in `dir`,
/// `env` added) and returns what it wrote to stdout.
fn nvim_lua(dir: &Path, env: &[(&str, &str)], code: &str) -> String {
    let script = dir.join("script.lua");
    std::fs::write(&script, format!("vim.opt.rtp:prepend({:?})\n{code}\nio.stdout:write('\\n')\nos.exit(0)\n", root().display().to_string()))
        .unwrap();
    let mut cmd = common::clean_command(common::nvim::nvim_bin());
    cmd.args(["--clean", "--headless", "-l"]).arg(&script).current_dir(dir);
    for sub in ["config", "data", "state", "cache"] {
        cmd.env(format!("XDG_{}_HOME", sub.to_uppercase()), dir.join(sub));
    }
    cmd.env("HOME", dir).env_remove("NVIM_APPNAME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run Neovim");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "Neovim failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn setup_takes_every_thinking_level_the_host_takes() {
    let dir = tempfile::tempdir().unwrap();
    for name in schema::thinking_names() {
        // The engine's own parsers take it (the CLI's flag, `set_thinking`, the setup table)…
        assert!(name.parse::<ThinkingLevel>().is_ok(), "{name}");
        assert!(serde_json::from_value::<ThinkingLevel>(serde_json::json!(name)).is_ok(), "{name}");
    }
    let names = schema::thinking_names().iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
    let out = nvim_lua(
        dir.path(),
        &[],
        &format!(
            "for _, level in ipairs({{ {names} }}) do
               local ok, err = pcall(require('handoff.config').setup, {{ provider = {{ thinking = level }} }})
               io.stdout:write(level, '=', ok and 'ok' or tostring(err), '\\n')
             end"
        ),
    );
    // …and so does setup().
    for name in schema::thinking_names() {
        assert!(out.contains(&format!("{name}=ok\n")), "setup() refuses the thinking level {name}:\n{out}");
    }
}

/// The CLI's `sessions` for `cwd`, with `env`: the session files it lists.
fn cli_sessions(cwd: &Path, env: &[(&str, &str)], xdg_data: &Path, home: &Path) -> Vec<PathBuf> {
    let mut cmd = common::clean_command(env!("CARGO_BIN_EXE_handoff-nvim"));
    cmd.args(["sessions", "--cwd"]).arg(cwd);
    cmd.env("XDG_DATA_HOME", xdg_data).env("HOME", home).env_remove("NVIM_APPNAME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| PathBuf::from(serde_json::from_str::<serde_json::Value>(l).unwrap()["path"].as_str().unwrap()))
        .collect()
}

/// A session the plugin writes under `NVIM_APPNAME` (real host, mock model) is one the CLI
/// lists without being told the folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_finds_the_plugins_sessions_under_nvim_appname() {
    let mock = MockServer::start().await.unwrap();
    mock.push(MockReply::text("hello from the mock"));
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let work = work.canonicalize().unwrap();
    let env = [("NVIM_APPNAME", "handoff-appname-test")];
    let base_url = mock.openai_base_url();
    let (path, work2) = (dir.path().to_path_buf(), work.clone());
    let out = tokio::task::spawn_blocking(move || {
        nvim_lua(
            &path,
            &env,
            &format!(
                "vim.cmd.cd({work:?})
                 require('handoff').setup({{ bin = {bin:?}, provider = {{ api = 'openai', base_url = {base_url:?}, model = 'mock-model', max_retries = 0, timeout = 10 }} }})
                 local done = false
                 vim.api.nvim_create_autocmd('User', {{ pattern = 'HandoffAgentEnd', callback = function() done = true end }})
                 require('handoff').prompt('hi')
                 local ok = vim.wait(15000, function() return done end, 20)
                 io.stdout:write('data=', vim.fn.stdpath('data'), '\\n')
                 io.stdout:write('done=', tostring(ok), '\\n')
                 io.stdout:write('session=', tostring(require('handoff').status().session_file), '\\n')
                 require('handoff.host').stop()",
                work = work2.display().to_string(),
                bin = env!("CARGO_BIN_EXE_handoff-nvim"),
            ),
        )
    })
    .await
    .unwrap();
    let field = |name: &str| {
        out.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap_or_else(|| panic!("no {name} in:\n{out}")).to_string()
    };
    assert_eq!(field("done"), "true", "the prompt did not finish:\n{out}");
    let session = PathBuf::from(field("session"));
    let data = PathBuf::from(field("data"));
    assert_eq!(data, dir.path().join("data/handoff-appname-test"), "Neovim's data folder under NVIM_APPNAME");
    assert!(session.starts_with(data.join(schema::SESSION_SUBDIR)), "{}", session.display());
    // Let the host write the file out.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !session.is_file() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let listed = cli_sessions(&work, &env, &dir.path().join("data"), dir.path());
    assert_eq!(listed, vec![session.clone()], "the CLI under the same NVIM_APPNAME lists the plugin's session");
    // Without NVIM_APPNAME both use `nvim`: the CLI does not see this one there.
    assert!(cli_sessions(&work, &[], &dir.path().join("data"), dir.path()).is_empty());
}

/// Every `HANDOFF_*` variable the source reads is in `schema::variables()` (which the tests'
/// `common::clean_command` removes), but the sandbox's test switches, which the tests remove
/// by name.
#[test]
fn every_variable_the_binary_reads_is_in_the_schemas_list() {
    use handoff_nvim::core::sandbox::{SIMULATED_ABI_VAR, SIMULATED_NO_MOUNTS_VAR};
    let listed = handoff_nvim::core::config::schema::variables();
    let mut missing = Vec::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stack = vec![root.join("src"), root.join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (at, _) in text.match_indices("\"HANDOFF_") {
                let name: String = text[at + 1..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                if !listed.contains(&name.as_str()) && name != SIMULATED_ABI_VAR && name != SIMULATED_NO_MOUNTS_VAR {
                    missing.push(format!("{}: {name}", path.display()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "read but not in schema::variables(): {missing:?}");
}
