//! The whole-process benchmarks, one tiny iteration of each, so they cannot rot: runs
//! `bench/bench.py --smoke` against the binaries of this build (debug), the checkout's Neovim
//! and pi (`$PI_BIN`, else `.cache/pi`; pi's columns stay empty when it is not installed), and
//! rg for §6b (`.cache/rg-venv`, else PATH; its column and pi's grep stay empty without it),
//! and server-everything for §14 (`.cache/mcp-everything`; the section is skipped without it).
//! The in-process benchmarks (benches/inprocess.rs) run once each under `cargo test` as well.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn every_benchmark_runs_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_handoff-nvim")).parent().unwrap();
    // bench.py runs the mock from the same folder as the host.
    assert_eq!(common::mock_server_bin().parent(), Some(bin_dir));
    let started = Instant::now();
    let json = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("python3")
        .arg(root.join("bench/bench.py"))
        .arg("--smoke")
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--json")
        .arg(json.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench.py --smoke failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    for section in ["### 1.", "### 2.", "### 3.", "### 4.", "### 5.", "### 6.", "### 7.", "### 9.", "### 10.", "### 11."] {
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
    // 57 s with §10 (10 s of it, two pi runs among them) at load 3.3 on the 2 cores; 16 s before §10, quiet.
    assert!(started.elapsed() < Duration::from_secs(90), "the smoke run took {:?}", started.elapsed());
}
