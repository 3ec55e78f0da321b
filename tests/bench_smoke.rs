//! The whole-process benchmarks, one tiny iteration of each, so they cannot rot: runs
//! `bench/bench.py --smoke` against the binaries of this build (debug), the checkout's Neovim
//! and pi (`$PI_BIN`, else `.cache/pi`; pi's columns stay empty when it is not installed), and
//! rg for §6b (`.cache/rg-venv`, else PATH; its column and pi's grep stay empty without it),
//! and server-everything for §14 (`.cache/mcp-everything`; the section is skipped without it).
//! The in-process benchmarks (benches/inprocess.rs) run once each under `cargo test` as well.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Only stops a hung run: the smoke run checks that every benchmark runs and writes its
/// figures, not how long they take (bench/run.sh measures that). It takes about a minute on a
/// quiet 2-core machine, a few with the machine busy; this is many times either.
const HANG_GUARD: Duration = Duration::from_secs(900);

/// Runs `cmd` in a process group of its own, its output to files (a pipe that fills would stall
/// it); kills the whole group (Neovim, the host, pi, the mock) if it outlives [`HANG_GUARD`].
fn run_guarded(cmd: &mut Command) -> (ExitStatus, String, String, Duration) {
    let (stdout, stderr) = (tempfile::tempfile().unwrap(), tempfile::tempfile().unwrap());
    let read = |mut f: &std::fs::File| {
        use std::io::{Read, Seek};
        let mut text = String::new();
        f.rewind().unwrap();
        f.read_to_string(&mut text).unwrap();
        text
    };
    let started = Instant::now();
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().unwrap())
        .stderr(stderr.try_clone().unwrap())
        .spawn()
        .expect("python3");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG_GUARD {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            panic!(
                "bench.py --smoke still ran after {HANG_GUARD:?}: it hung\n--- stdout\n{}\n--- stderr\n{}",
                read(&stdout),
                read(&stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, read(&stdout), read(&stderr), started.elapsed())
}

#[test]
fn every_benchmark_runs_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_handoff-nvim")).parent().unwrap();
    // bench.py runs the mock from the same folder as the host.
    assert_eq!(common::mock_server_bin().parent(), Some(bin_dir));
    let json = tempfile::NamedTempFile::new().unwrap();
    let (status, stdout, stderr, took) = run_guarded(
        Command::new("python3")
            .arg(root.join("bench/bench.py"))
            .arg("--smoke")
            .arg("--bin-dir")
            .arg(bin_dir)
            .arg("--json")
            .arg(json.path())
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY"),
    );
    // Where the time went, for whoever reads the test's output: bench.py logs each section's start.
    let sections: Vec<&str> = stderr.lines().filter(|l| l.starts_with("[bench ")).collect();
    eprintln!("bench.py --smoke took {took:?}\n{}", sections.join("\n"));
    assert!(status.success(), "bench.py --smoke failed ({status})\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    for section in ["### 1.", "### 2.", "### 3.", "### 4.", "### 5.", "### 6.", "### 7.", "### 8b.", "### 9.", "### 10.", "### 11.", "### 17."] {
        assert!(stdout.contains(section), "no {section} in\n{stdout}");
    }
    let raw: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    // Each figure exists and is a real measurement.
    assert!(raw["cold_start"]["ours"].as_f64().unwrap() > 0.0);
    assert!(raw["resume"][0]["ours"].as_f64().unwrap() > 0.0);
    assert!(raw["handoff"]["ours"].as_f64().unwrap() > 0.0);
    assert!(raw["handoff_nvim"]["ours"].as_f64().unwrap() > 0.0);
    assert!(raw["stream"]["syntax"]["tps"].as_f64().unwrap() > 0.0);
    assert!(raw["idle_rss"].as_f64().unwrap() > 0.0);
    assert!(raw["resume_rss"]["loaded_rss_kib"].as_f64().unwrap() > 0.0);
    // resume() in Neovim at each size: the chat on screen (render and redraw) and RSS vs the file.
    for row in raw["resume_nvim"].as_array().unwrap() {
        assert!(row["rendered_ms"].as_f64().unwrap() > 0.0, "{row}");
        // Neovim's redraw is a part of the time to the chat on screen, and takes some.
        let (rendered, redraw) = (row["rendered_ms"].as_f64().unwrap(), row["redraw_ms"].as_f64().unwrap());
        assert!(redraw > 0.0 && redraw <= rendered, "{row}");
        assert!(row["rss_ratio"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["items"].as_u64().unwrap() > 0, "{row}");
    }
    // At the wall before the prompt (§8b): bench.py checks the two requests; a folder of many
    // sessions (§17): that the host started in the newest and the picker got the whole list.
    assert!(raw["resume_prompt_wall"]["ours"].as_f64().unwrap() > 0.0);
    let folder = &raw["sessions_folder"];
    assert!(folder["startup"].as_f64().unwrap() > 0.0 && folder["first_shown"].as_f64().unwrap() > 0.0, "{folder}");
    // The tools (§6): bench.py itself checks the files the turn leaves, the grep matches against
    // rg's and pi's (when installed) and the read's first line; here, that they ran.
    assert!(raw["tool_turn"]["ours"].as_f64().unwrap() > 0.0);
    // The sandbox (§11): bench.py checks that the helper enforces and both turns' files.
    assert!(raw["sandbox"]["cmd_on"].as_f64().unwrap() > 0.0 && raw["sandbox"]["turn_on"].as_f64().unwrap() > 0.0);
    assert!(raw["sandbox"]["cmd_on_full"].as_f64().unwrap() > 0.0, "the helper with the mount namespace was timed");
    assert!(raw["grep"]["ours"].as_f64().unwrap() > 0.0);
    assert!(raw["grep"]["matches"].as_u64().unwrap() > 0);
    assert!(raw["read"][1]["ours_peak"].as_f64().unwrap() > 0.0);
    // Tool output (§7): bench.py checks the chat showed the command's lines live and its last
    // line after; here, that the figures are there.
    assert!(raw["tool_memory"]["host_hwm"].as_f64().unwrap() > 0.0);
    assert!(raw["tool_memory"]["cli_peak"].as_f64().unwrap() > 0.0);
    assert!(raw["tool_latency"]["updates"].as_f64().unwrap() > 0.0);
    // Lateness percentiles, from samples that exist: in order, and not all zero.
    let lateness = |k: &str| raw["tool_latency"][k].as_f64().unwrap_or_else(|| panic!("tool_latency.{k}: {}", raw["tool_latency"]));
    assert!(lateness("p50") <= lateness("p99") && lateness("p99") <= lateness("max"), "{}", raw["tool_latency"]);
    assert!(lateness("max") > 0.0, "{}", raw["tool_latency"]);
    // A large session handed off (§9): bench.py checks the new session and the one request; here,
    // that the time to the request was measured from the mock's arrival and within the handoff.
    for row in raw["big_handoff"].as_array().unwrap() {
        let (to_request, whole) = (row["ours_to_request"].as_f64().unwrap(), row["ours_wall"].as_f64().unwrap());
        assert!(to_request > 0.0 && to_request < whole, "{row}");
        assert!(row["rss_ratio"].as_f64().unwrap() > 0.0 && row["ours_body"].as_u64().unwrap() > 0, "{row}");
    }
    // The automatic handoff at the wall (§10): bench.py checks each run's requests (the handoff's
    // first, then the prompt in the new session; the refused prompt, the attempts, the
    // continuation), the exit status and the sessions named; here, that the times were measured
    // from the mock's arrivals and in order.
    let wall = &raw["at_the_wall"];
    for row in wall["rows"].as_array().unwrap() {
        let (spawn, loaded) = (row["ours_to_request"].as_f64().unwrap(), row["ours_from_open"].as_f64().unwrap());
        assert!(loaded > 0.0 && loaded < spawn, "{row}");
        assert!(row["ours_body"].as_f64().unwrap() > 0.0 && row["ours_peak"].as_f64().unwrap() > 0.0, "{row}");
    }
    let overflow = &wall["overflow"];
    let (first, accepted) = (overflow["ours_to_handoff"].as_f64().unwrap(), overflow["ours_to_accepted"].as_f64().unwrap());
    assert!(first > 0.0 && first <= accepted && accepted < overflow["ours_to_next"].as_f64().unwrap(), "{overflow}");
    assert!(overflow["ours_attempts"].as_f64().unwrap() >= 1.0, "{overflow}");
    // MCP (§14): the call's round trip through the host and the server's own, both measured;
    // the first prompt with three servers, and one server's own start.
    let everything = root.join(".cache/mcp-everything/node_modules/.bin/mcp-server-everything");
    if everything.exists() || std::env::var_os("MCP_EVERYTHING_BIN").is_some() {
        assert!(stdout.contains("### 14."), "no ### 14. in\n{stdout}");
        let mcp = &raw["mcp"];
        for transport in ["stdio", "http"] {
            // One smoke run: the per-call figure (a difference of two turns) may be noise, the
            // turns' gaps and the server's own round trip are measured.
            let t = &mcp[transport];
            assert!(t["host"].as_f64().unwrap().is_finite() && t["own"].as_f64().unwrap() > 0.0, "{mcp}");
            assert!(t["gap_one"].as_f64().unwrap() > 0.0 && t["gap_many"].as_f64().unwrap() > 0.0, "{mcp}");
        }
        assert!(mcp["prompt"]["three"].as_f64().unwrap() > 0.0 && mcp["alone"].as_f64().unwrap() > 0.0, "{mcp}");
    }
}
