//! `session_query` on a large ancestor (Linux: the process's peak memory from /proc): the file
//! is read a line at a time, so searching 48 MB of session raises the peak by far less than the
//! file's size (loading it as a session would hold all of it, and more). Alone in its binary:
//! the peak is the process's, and no other test may allocate meanwhile.
#![allow(clippy::unwrap_used)]
#![cfg(target_os = "linux")]

use std::io::Write;

use handoff_nvim::core::tools::{self, ToolContext};
use serde_json::json;

/// The process's peak resident memory in KB (VmHWM).
fn peak_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_large_ancestor_is_searched_without_holding_it() {
    const SIZE: usize = 48 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(file, r#"{{"type":"session","version":3,"id":"01large","timestamp":"t","cwd":"/w"}}"#).unwrap();
    let filler = "cargo test output line ".repeat(40);
    let (mut written, mut n) = (0, 0u32);
    while written < SIZE {
        let text = match n {
            1_000 => "Decision: use SQLite for the cache.".to_string(),
            40_000 => "Switch the cache to Postgres.".to_string(),
            _ => format!("{filler}{n}"),
        };
        let line = format!(
            r#"{{"type":"message","id":"{n:08x}","parentId":null,"timestamp":"t","message":{{"role":"toolResult","toolCallId":"c{n}","toolName":"bash","content":[{{"type":"text","text":"{text}"}}],"isError":false,"timestamp":1}}}}"#
        );
        writeln!(file, "{line}").unwrap();
        written += line.len() + 1;
        n += 1;
    }
    file.flush().unwrap();
    drop(file);
    assert!(n > 40_000, "{n} entries");

    // The peak from here on: reset to what the process holds now.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = peak_kb();
    let ctx = ToolContext::new(dir.path()).with_parent_session(Some(path));
    let out = tools::ToolRegistry::all().execute("session_query", json!({"question": "SQLite or Postgres?", "mode": "search"}), &ctx).await;
    let grown_kb = peak_kb() - before;
    assert!(!out.is_error, "{}", out.joined_text());
    let text = out.joined_text();
    assert!(text.contains(&format!("[{:08x}]", 1_000)) && text.contains(&format!("[{:08x}]", 40_000)), "{text}");
    assert!(grown_kb < (SIZE as u64 / 1024) / 8, "searching a {} MB session raised the peak by {grown_kb} KB", SIZE >> 20);
}
