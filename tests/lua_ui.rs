//! The Lua side's fast UI tests (tests/lua/*_spec.lua) against a fake host: no binary, no
//! model, a headless Neovim running `tests/lua/run.lua`, one test per spec file. Each case's
//! result is printed (`cargo test --test lua_ui -- --nocapture`); a failure names every failing
//! case with its error. The end-to-end tests beside this one drive the real host.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

/// The spec files, each run by the test of its name below.
const SPECS: &[&str] = &["config_spec", "context_spec", "layout_spec", "state_spec", "thinking_spec", "ui_spec"];

/// One case's line of run.lua's report.
#[derive(Debug)]
struct Case {
    name: String,
    passed: bool,
    error: String,
}

/// Parses run.lua's report: "ok   spec: name" / "FAIL spec: name" + indented error lines, then
/// "N passed, N failed".
fn parse(stdout: &str) -> (Vec<Case>, Option<(usize, usize)>) {
    let mut cases: Vec<Case> = Vec::new();
    let mut summary = None;
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix("ok   ") {
            cases.push(Case { name: name.to_string(), passed: true, error: String::new() });
        } else if let Some(name) = line.strip_prefix("FAIL ") {
            cases.push(Case { name: name.to_string(), passed: false, error: String::new() });
        } else if let Some(err) = line.strip_prefix("    ") {
            if let Some(last) = cases.last_mut() {
                last.error.push_str(err);
                last.error.push('\n');
            }
        } else if let Some((p, f)) = line.split_once(" passed, ") {
            if let (Ok(p), Some(Ok(f))) = (p.trim().parse(), f.strip_suffix(" failed").map(str::parse)) {
                summary = Some((p, f));
            }
        }
    }
    (cases, summary)
}

/// Runs one spec file and fails naming each failing case (or where the run stopped).
fn run_spec(spec: &str) {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::nvim::nvim_bin())
        .args(["--clean", "--headless", "-l"])
        .arg(format!("{root}/tests/lua/run.lua"))
        .arg(spec)
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .expect("run Neovim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (cases, summary) = parse(&stdout);
    for c in &cases {
        // To the test's captured output (shown with --nocapture or on failure).
        eprintln!("{} {}", if c.passed { "ok  " } else { "FAIL" }, c.name);
    }
    let failing: Vec<String> =
        cases.iter().filter(|c| !c.passed).map(|c| format!("FAIL {}\n{}", c.name, c.error.trim_end())).collect();
    assert!(failing.is_empty(), "{} of {} Lua cases failed:\n{}\n--- stderr:\n{stderr}", failing.len(), cases.len(), failing.join("\n"));
    let last = cases.last().map_or("(none)", |c| c.name.as_str());
    let Some((passed, failed)) = summary else {
        panic!("the run stopped before its summary (exit {:?}); last case reported: {last}\n{stdout}\n--- stderr:\n{stderr}", out.status.code());
    };
    assert_eq!((passed, failed), (cases.len(), 0), "the summary disagrees with the cases reported:\n{stdout}");
    assert!(out.status.success(), "Neovim exited {:?} after the last case ({last}):\n{stderr}", out.status.code());
    assert!(!cases.is_empty(), "no case ran:\n{stdout}");
}

#[test]
fn config_spec() {
    run_spec("config_spec");
}

#[test]
fn context_spec() {
    run_spec("context_spec");
}

#[test]
fn layout_spec() {
    run_spec("layout_spec");
}

#[test]
fn state_spec() {
    run_spec("state_spec");
}

#[test]
fn thinking_spec() {
    run_spec("thinking_spec");
}

#[test]
fn ui_spec() {
    run_spec("ui_spec");
}

/// A spec file added without its test here would never run.
#[test]
fn every_spec_file_has_its_test() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lua");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix("_spec.lua").map(|s| format!("{s}_spec")))
        .collect();
    found.sort();
    assert_eq!(found, SPECS, "tests/lua/*_spec.lua and lua_ui.rs's SPECS (each needs its #[test])");
}

/// The report's parser itself: a failing case is named with its error, a cut-off run has no
/// summary.
#[test]
fn the_report_names_failing_cases() {
    let (cases, summary) = parse("ok   ui_spec: one\nFAIL ui_spec: two\n    boom\n    at line 3\n1 passed, 1 failed\n");
    assert_eq!(summary, Some((1, 1)));
    assert_eq!(cases.len(), 2);
    assert!(cases[0].passed && !cases[1].passed);
    assert_eq!(cases[1].name, "ui_spec: two");
    assert_eq!(cases[1].error, "boom\nat line 3\n");
    assert_eq!(parse("ok   ui_spec: one\n").1, None);
}
