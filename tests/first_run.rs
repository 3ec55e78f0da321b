//! The first run as a new user makes it: `scripts/run.sh` started from a project, the plugin
//! loaded by lazy.nvim with the README's spec, every command there from start-up, and the
//! layout table (doc/design.md) naming paths that exist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd` to its end, killed after `limit` (a hang fails the test instead of the suite).
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}\n--- stdout:\n{}\n--- stderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// XDG folders of a throwaway editor.
fn isolated(cmd: &mut Command, dir: &Path) {
    for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        cmd.env(var, dir.join(sub));
    }
    cmd.env_remove("ANTHROPIC_API_KEY").env_remove("OPENAI_API_KEY");
}

/// The user commands plugin/handoff.lua defines, read from its source.
fn plugin_commands() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("plugin/handoff.lua")).unwrap();
    let names: Vec<String> = text
        .split("nvim_create_user_command(\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 10, "plugin/handoff.lua: only {names:?}");
    names
}

/// Lua that writes, for each name, whether `:name` exists, as JSON into `out`.
fn commands_probe(names: &[String], out: &Path) -> String {
    let list = names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
    format!(
        "lua local r = {{ exists = {{}}, loaded = {{}} }} \
         for _, n in ipairs({{ {list} }}) do r.exists[n] = vim.fn.exists(':' .. n) == 2 end \
         for m in pairs(package.loaded) do if m:match('^handoff') then table.insert(r.loaded, m) end end \
         vim.fn.writefile({{ vim.json.encode(r) }}, {out:?})"
    )
}

fn read_json(path: &Path, output: &Output) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{} not written ({e})\n--- stdout:\n{}\n--- stderr:\n{}",
            path.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn missing_commands(probe: &Value) -> Vec<String> {
    probe["exists"].as_object().unwrap().iter().filter(|(_, v)| **v != Value::Bool(true)).map(|(k, _)| k.clone()).collect()
}

/// Bug: run.sh changed into the checkout, so the agent worked on the plugin's sources and a file
/// named on the command line opened relative to the checkout. The build still runs there.
#[test]
fn run_sh_keeps_the_callers_folder_and_builds_in_the_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("notes.txt"), "the project's own notes\n").unwrap();
    // A `cargo` that records where and how it was called: the test checks the build step
    // without a release build of its own (the plugin then finds the debug host beside it).
    let shims = dir.path().join("bin");
    std::fs::create_dir_all(&shims).unwrap();
    let cargo_log = dir.path().join("cargo.log");
    let shim = shims.join("cargo");
    std::fs::write(&shim, format!("#!/bin/sh\necho \"$PWD $*\" >> {:?}\n", cargo_log)).unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out_file = dir.path().join("probe.json");
    let probe = format!(
        "lua local r = {{ cwd = vim.fn.getcwd(), files = {{}} }} \
         for _, b in ipairs(vim.api.nvim_list_bufs()) do \
           if vim.bo[b].buftype == '' and vim.api.nvim_buf_get_name(b) ~= '' then \
             r.files[vim.api.nvim_buf_get_name(b)] = vim.api.nvim_buf_get_lines(b, 0, -1, false) end end \
         vim.fn.writefile({{ vim.json.encode(r) }}, {out_file:?})"
    );
    let mut cmd = common::clean_command(root().join("scripts/run.sh"));
    isolated(&mut cmd, dir.path());
    cmd.current_dir(&project)
        .env("PATH", format!("{}:{}", shims.display(), std::env::var("PATH").unwrap_or_default()))
        .env("NVIM_BIN", common::nvim::nvim_bin())
        // A key (never used: nothing is sent) keeps run.sh from starting the local model.
        .env("OPENAI_API_KEY", "sk-not-a-real-key")
        .args(["--headless", "-c", &probe, "-c", "qa!", "notes.txt"]);
    let output = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(output.status.success(), "run.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    let r = read_json(&out_file, &output);
    let project = project.canonicalize().unwrap();
    assert_eq!(PathBuf::from(r["cwd"].as_str().unwrap()).canonicalize().unwrap(), project, "Neovim's folder");
    let notes = project.join("notes.txt");
    let files = r["files"].as_object().unwrap();
    let opened = files.iter().find(|(p, _)| Path::new(p).canonicalize().ok().as_deref() == Some(notes.as_path()));
    let (_, lines) = opened.unwrap_or_else(|| panic!("notes.txt not opened from the project: {files:?}"));
    assert_eq!(lines, &serde_json::json!(["the project's own notes"]));
    let calls = std::fs::read_to_string(&cargo_log).expect("cargo was not called");
    let checkout = root().canonicalize().unwrap();
    assert_eq!(calls.trim(), format!("{} build --release --locked", checkout.display()), "the build step");
}

/// Every command is defined by plugin/handoff.lua as Neovim starts, before `setup()`, and
/// loading it requires none of the plugin's modules (what makes eager loading cheap).
#[test]
fn every_command_exists_at_start_up_before_setup_and_nothing_else_loads() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("probe.json");
    let names = plugin_commands();
    let mut cmd = common::clean_command(common::nvim::nvim_bin());
    isolated(&mut cmd, dir.path());
    cmd.current_dir(dir.path())
        .args(["--clean", "--headless", "-n", "--cmd"])
        .arg(format!("set rtp^={}", root().display()))
        .args(["-c", &commands_probe(&names, &out_file), "-c", "qa!"]);
    let output = run_bounded(&mut cmd, Duration::from_secs(30));
    let r = read_json(&out_file, &output);
    assert_eq!(missing_commands(&r), Vec::<String>::new(), "commands missing at start-up: {r}");
    assert_eq!(r["loaded"], serde_json::json!([]), "plugin/handoff.lua loaded modules at start-up");
}

/// Bug: with the README's spec (`cmd = {…}`), the commands it did not list did not exist until
/// another one loaded the plugin. Run with lazy.nvim itself (`common::lazy_nvim`).
#[test]
fn readme_lazy_spec_defines_every_command_at_start_up() {
    let lazy = common::lazy_nvim();
    assert!(lazy.join("lua/lazy/init.lua").is_file(), "{} is not a lazy.nvim checkout (HANDOFF_LAZY_NVIM)", lazy.display());
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("probe.json");
    let names = plugin_commands();
    // The spec exactly as the README writes it, pointed at this checkout instead of a clone;
    // its `build` is not run (lazy.nvim builds on install, and a `dir` plugin is not installed).
    let init = format!(
        "vim.opt.rtp:prepend({lazy:?})\n\
         local spec = (function() return {spec} end)()\n\
         spec[1] = nil\n\
         spec.dir = {root:?}\n\
         require('lazy').setup({{ spec = {{ spec }}, root = {plugins:?}, lockfile = {lockfile:?},\n\
           install = {{ missing = false }}, checker = {{ enabled = false }},\n\
           change_detection = {{ enabled = false }}, rocks = {{ enabled = false }} }})\n",
        lazy = lazy.display().to_string(),
        spec = common::readme_lazy_spec(),
        root = root().display().to_string(),
        plugins = dir.path().join("lazy").display().to_string(),
        lockfile = dir.path().join("lazy-lock.json").display().to_string(),
    );
    let init_file = dir.path().join("init.lua");
    std::fs::write(&init_file, init).unwrap();
    let mut cmd = common::clean_command(common::nvim::nvim_bin());
    isolated(&mut cmd, dir.path());
    cmd.current_dir(dir.path())
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(&init_file)
        .args(["-c", &commands_probe(&names, &out_file), "-c", "qa!"]);
    let output = run_bounded(&mut cmd, Duration::from_secs(30));
    let r = read_json(&out_file, &output);
    assert_eq!(missing_commands(&r), Vec::<String>::new(), "with the README's lazy.nvim spec: {r}");
    // lazy.nvim ran the spec's `opts` through setup() (a stub command would not have).
    assert!(r["loaded"].as_array().unwrap().iter().any(|m| m == "handoff.config"), "setup() did not run: {r}");
}

/// The layout table (`doc/design.md`) names only paths that exist, and every folder of the
/// checkout, every crate of `crates/` and every module of `src/` and of the engine,
/// `crates/core/src/` (each file or folder there), has its row.
#[test]
fn the_layout_table_matches_the_tree() {
    let design = std::fs::read_to_string(root().join("doc/design.md")).unwrap();
    let section = &design[design.find("\n## Layout").expect("a Layout section in doc/design.md")..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |i| i + 1)];
    let mut checked = 0;
    let mut missing = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first_cell = row.split('|').nth(1).unwrap();
        for path in first_cell.split('`').skip(1).step_by(2) {
            checked += 1;
            if !root().join(path).exists() {
                missing.push(path.to_string());
            }
        }
    }
    assert!(checked >= 10, "only {checked} paths in the layout table");
    assert!(missing.is_empty(), "doc/design.md's layout names paths that do not exist: {missing:?}");
    let named: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|row| row.split('|').nth(1).unwrap().split('`').skip(1).step_by(2).map(|p| p.trim_end_matches('/').to_string()).collect::<Vec<_>>())
        .collect();
    let mut unnamed = Vec::new();
    let entries = |rel: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root().join(rel))
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .map(|n| if rel.is_empty() { n } else { format!("{rel}/{n}") })
            .collect();
        names.sort();
        names
    };
    for path in entries("") {
        // Folders only (files at the top are the usual ones), named or a folder in them named;
        // git's and the build's own left out.
        let covered = named.iter().any(|n| n == &path || n.starts_with(&format!("{path}/")));
        // `dist/` is scripts/release.sh's output, ignored by git as `target/` is.
        if root().join(&path).is_dir() && !path.starts_with('.') && path != "target" && path != "dist" && !covered {
            unnamed.push(path);
        }
    }
    for dir in ["src", "crates", "crates/core/src"] {
        for path in entries(dir) {
            let module_root = path.ends_with("/mod.rs") || path.ends_with("/lib.rs");
            let covered = named.iter().any(|n| n == &path || n.starts_with(&format!("{path}/")));
            if !module_root && !covered {
                unnamed.push(path);
            }
        }
    }
    assert!(unnamed.is_empty(), "doc/design.md's layout has no row for {unnamed:?}");
}
