//! The agent's tools (`core::tools`) against real files in temp folders and real processes:
//! read's limits and continuation, a 500 MB sparse file read through a counting `FileAccess`,
//! bash's exit codes, timeout, abort of the whole process group, output tail and spill file,
//! bounded memory, environment policy; edit's rules; grep/find/ls with .gitignore, symlink loops
//! and unreadable folders; malformed arguments.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{process_alive, HANG_GUARD};
use handoff_nvim::core::tools::{
    current_todos, DiskFileAccess, EnvPolicy, FileAccess, ToolContext, ToolKind, ToolName,
    ToolOutput, ToolRegistry,
};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// Runs a tool of the host's own, every one enabled (as the agent runs them: the registry).
async fn execute(name: &str, args: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
    handoff_nvim::core::tools::ToolRegistry::all().execute(name, args, ctx).await
}

fn ctx(dir: &Path) -> ToolContext {
    ToolContext { spill_dir: Some(dir.join(".spill")), ..ToolContext::new(dir) }
        .with_env(EnvPolicy::default())
}

async fn run(dir: &Path, tool: &str, args: Value) -> ToolOutput {
    let c = ctx(dir);
    std::fs::create_dir_all(dir.join(".spill")).unwrap();
    execute(tool, args, &c).await
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| {
                l.split_whitespace().nth(2) == Some("0") // effective uid
            })
        })
        .unwrap_or(false)
}

/// Peak resident memory of this process in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------- registry and arguments

#[test]
fn the_registry_offers_pis_tools_with_kinds_and_defaults() {
    let defs = ToolRegistry::default().definitions();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_ref()).collect();
    assert_eq!(names, ["read", "bash", "edit", "write", "todo_write", "session_query"]);
    let all: Vec<String> = ToolRegistry::all().definitions().iter().map(|d| d.name.to_string()).collect();
    assert_eq!(all, ["read", "bash", "edit", "write", "grep", "find", "ls", "todo_write", "session_query"]);
    // A session without a parent is offered all but session_query.
    let alone: Vec<String> = ToolRegistry::all().offered(false).definitions().iter().map(|d| d.name.to_string()).collect();
    assert_eq!(alone, ["read", "bash", "edit", "write", "grep", "find", "ls", "todo_write"]);
    let read = ToolName::Read.definition();
    assert_eq!(read.parameters["required"], json!(["path"]));
    assert_eq!(read.parameters["properties"]["offset"]["type"], "number");
    let edit = ToolName::Edit.definition();
    assert_eq!(
        edit.parameters["properties"]["edits"]["items"]["required"],
        json!(["oldText", "newText"])
    );
    assert_eq!(ToolName::Bash.kind(), ToolKind::Execute);
    assert_eq!(ToolName::Edit.kind(), ToolKind::Edit);
    assert_eq!(ToolName::Ls.kind(), ToolKind::ReadOnly);
    let mut reg = ToolRegistry::default();
    reg.enable(ToolName::Grep);
    assert!(reg.get("grep").is_some());
    reg.disable(ToolName::Bash);
    assert!(reg.get("bash").is_none());
}

#[tokio::test]
async fn malformed_arguments_are_error_results() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        ("read", json!({"path": ["a"]}), "path: Expected string"),
        ("read", json!({}), "path: Required property is missing"),
        ("read", json!("not json"), "root: Expected object"),
        ("bash", json!({"command": "true", "timeout": "soon"}), "timeout: Expected number"),
        ("edit", json!({"path": "a", "edits": 3}), "edits: Expected array"),
        ("edit", json!({"path": "a", "edits": [{"oldText": "x"}]}), "edits.0.newText: Required"),
        ("write", json!({"path": "a"}), "content: Required property is missing"),
        ("grep", json!({"pattern": "x", "ignoreCase": "maybe"}), "ignoreCase: Expected boolean"),
        ("find", json!({"pattern": 7, "limit": {}}), "limit: Expected number"),
        ("ls", json!([]), "root: Expected object"),
        ("todo_write", json!({"todos": [{"content": "a"}]}), "todos.0.status: Required"),
    ];
    for (tool, args, expected) in cases {
        let out = run(d, tool, args.clone()).await;
        assert!(out.is_error, "{tool} {args}");
        let text = out.joined_text();
        assert!(text.starts_with(&format!("Validation failed for tool \"{tool}\":")), "{text}");
        assert!(text.contains(expected), "{tool}: {text}");
        assert!(text.contains("Received arguments:"), "{text}");
    }
    assert!(!d.join("a").exists());
}

// ---------------------------------------------------------------- read

#[tokio::test]
async fn read_continues_with_offset_until_the_whole_file_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=5000).map(|i| format!("line {i} {}\n", "x".repeat(i % 40))).collect();
    std::fs::write(dir.path().join("big.txt"), &text).unwrap();
    let mut seen = Vec::new();
    let mut offset = 1;
    let mut calls = 0;
    loop {
        calls += 1;
        let out = run(dir.path(), "read", json!({"path": "big.txt", "offset": offset})).await;
        assert!(!out.is_error, "{}", out.joined_text());
        let t = out.joined_text();
        match t.rfind("Use offset=") {
            Some(at) => {
                let next: usize = t[at + 11..].trim_end_matches(" to continue.]").parse().unwrap();
                let body = &t[..t.rfind("\n\n[Showing lines").unwrap()];
                assert!(
                    t.contains(&format!("[Showing lines {offset}-{} of 5001", next - 1)),
                    "{t}"
                );
                seen.extend(body.split('\n').map(str::to_owned));
                assert!(out.details["truncation"]["truncated"].as_bool().unwrap());
                offset = next;
            }
            None => {
                seen.extend(t.split('\n').map(str::to_owned));
                break;
            }
        }
    }
    assert!(calls >= 3);
    assert_eq!(seen.join("\n"), text);
}

#[tokio::test]
async fn read_of_binary_files_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"\x7fELF".to_vec();
    bytes.extend([0u8; 100]);
    std::fs::write(dir.path().join("prog"), &bytes).unwrap();
    let out = run(dir.path(), "read", json!({"path": "@prog"})).await;
    assert!(!out.is_error);
    assert!(out.joined_text().contains("prog is a binary file"), "{}", out.joined_text());
}

/// Counts the bytes read through it: the seam the Neovim host implements, over the disk.
struct CountingFiles {
    read: Arc<AtomicU64>,
}

struct CountingReader {
    inner: tokio::fs::File,
    read: Arc<AtomicU64>,
}

impl AsyncRead for CountingReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.read.fetch_add((buf.filled().len() - before) as u64, Ordering::Relaxed);
        r
    }
}

#[async_trait]
impl FileAccess for CountingFiles {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let inner = tokio::fs::File::open(path).await?;
        Ok(Box::new(CountingReader { inner, read: self.read.clone() }))
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        DiskFileAccess.write(path, bytes).await
    }
}

#[tokio::test]
async fn read_of_a_500_mb_file_reads_only_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.log");
    let head: String = (1..=3000).map(|i| format!("entry {i}\n")).collect();
    std::fs::write(&path, &head).unwrap();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(500 << 20).unwrap();
    let read = Arc::new(AtomicU64::new(0));
    let c = ctx(dir.path()).with_files(Arc::new(CountingFiles { read: read.clone() }));
    let rss_before = peak_rss_kib();
    let out = execute("read", json!({"path": "huge.log"}), &c).await;
    let t = out.joined_text();
    assert!(!out.is_error, "{t}");
    assert!(t.starts_with("entry 1\nentry 2\n"), "{}", &t[..t.len().min(300)]);
    assert!(
        t.contains("entry 2000\n\n[Showing lines 1-2000 of more than "),
        "{}",
        &t[t.len() - 200..]
    );
    assert!(t.ends_with("Use offset=2001 to continue.]"));
    let bytes = read.load(Ordering::Relaxed);
    // What it read, not how long it took (doc/benchmarks.md §6c times it): the bytes are the
    // same on a loaded machine.
    assert!(bytes < 12 << 20, "read {bytes} bytes of a 500 MB file");
    assert!(peak_rss_kib().saturating_sub(rss_before) < 100 * 1024, "memory grew");

    // Continuing reads on from line 2001 up to the zeros, which are one endless line.
    read.store(0, Ordering::Relaxed);
    let out = execute("read", json!({"path": "huge.log", "offset": 2001, "limit": 10}), &c).await;
    assert!(out.joined_text().starts_with("entry 2001\n"), "{}", out.joined_text());
    assert!(out.joined_text().contains("more lines in file. Use offset=2011 to continue.]"));
    assert!(read.load(Ordering::Relaxed) < 12 << 20);
}

#[tokio::test]
async fn read_sends_images_as_image_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";
    std::fs::write(dir.path().join("dot.gif"), gif).unwrap();
    let out = run(dir.path(), "read", json!({"path": "dot.gif"})).await;
    assert_eq!(out.content[0].text.as_deref(), Some("Read image file [image/gif]"));
    assert_eq!(out.content[1].kind, "image");
    assert_eq!(out.content[1].extra_str("mimeType"), Some("image/gif"));
    let msg = serde_json::to_value(out.into_message("c1", "read")).unwrap();
    assert_eq!(msg["content"][1]["type"], "image");
    assert!(msg["content"][1]["data"].as_str().unwrap().starts_with("R0lGODlh"));
}

// ---------------------------------------------------------------- bash

#[tokio::test]
async fn bash_reports_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "bash", json!({"command": "echo fine"})).await;
    assert!(!out.is_error);
    assert_eq!(out.joined_text(), "fine\n");
    let out = run(dir.path(), "bash", json!({"command": "echo bad >&2; exit 42"})).await;
    assert!(out.is_error);
    assert_eq!(out.joined_text(), "bad\n\n\nCommand exited with code 42");
    let out = run(dir.path(), "bash", json!({"command": "exit 1"})).await;
    assert_eq!(out.joined_text(), "(no output)\n\nCommand exited with code 1");
    let out = run(dir.path(), "bash", json!({"command": "kill -TERM $$"})).await;
    assert!(out.is_error);
    assert!(out.joined_text().contains("killed by signal 15"), "{}", out.joined_text());
}

#[tokio::test]
async fn bash_timeout_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    // The command sleeps ten minutes: an end inside the hang guard is the 1 s timeout's doing.
    let out = tokio::time::timeout(
        HANG_GUARD,
        run(dir.path(), "bash", json!({"command": "echo begun; sleep 600", "timeout": 1})),
    )
    .await
    .expect("the timeout did not end the command");
    assert!(out.is_error);
    assert_eq!(out.joined_text(), "begun\n\n\nCommand timed out after 1 seconds");
}

#[tokio::test]
async fn bash_abort_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let latest = Arc::new(Mutex::new(String::new()));
    let updates = Arc::new(AtomicU64::new(0));
    let (l, u) = (latest.clone(), updates.clone());
    let c = ctx(dir.path()).with_cancel(cancel.clone()).with_progress(Arc::new(
        move |o: ToolOutput| {
            *l.lock().unwrap() = o.joined_text();
            u.fetch_add(1, Ordering::Relaxed);
        },
    ));
    // The shell and a child in the background, both in the command's process group.
    let task = tokio::spawn(async move {
        execute("bash", json!({"command": "sleep 1000 & echo $$ $!; wait"}), &c).await
    });
    let deadline = Instant::now() + HANG_GUARD;
    let pids: Vec<u32> = loop {
        let text = latest.lock().unwrap().clone();
        let pids: Vec<u32> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        if pids.len() == 2 {
            break pids;
        }
        assert!(Instant::now() < deadline, "no pids in partial output: {text:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(pids.iter().all(|p| process_alive(*p)));
    cancel.cancel();
    // The child sleeps 1000 s: an end inside the hang guard is the abort's doing.
    let out = tokio::time::timeout(HANG_GUARD, task).await.expect("the abort did not end the command").unwrap();
    assert!(out.is_error);
    assert!(out.joined_text().ends_with("\n\nCommand aborted"), "{}", out.joined_text());
    let gone_by = Instant::now() + HANG_GUARD;
    while pids.iter().any(|p| process_alive(*p)) {
        assert!(Instant::now() < gone_by, "processes {pids:?} survived the abort");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(updates.load(Ordering::Relaxed) >= 2, "the start and the output");
}

#[tokio::test]
async fn bash_keeps_the_tail_and_spills_everything_to_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "bash", json!({"command": "seq 1 100000"})).await;
    assert!(!out.is_error);
    let t = out.joined_text();
    assert!(
        t.ends_with(&format!(
            "99999\n100000\n\n\n[Showing lines 98002-100001 of 100001. Full output: {}]",
            out.details["fullOutputPath"].as_str().unwrap()
        )),
        "{}",
        &t[t.len() - 200..]
    );
    assert!(t.starts_with("98002\n"), "{}", &t[..100]);
    assert_eq!(out.details["truncation"]["truncatedBy"], "lines");
    assert_eq!(out.details["truncation"]["outputLines"], 2000);
    let spill = PathBuf::from(out.details["fullOutputPath"].as_str().unwrap());
    let mode = std::fs::metadata(&spill).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let full = std::fs::read_to_string(&spill).unwrap();
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
    // Small output: no file at all.
    let out = run(dir.path(), "bash", json!({"command": "echo small"})).await;
    assert!(out.details.is_null());
}

#[tokio::test]
async fn bash_memory_stays_bounded_for_200_mb_of_output() {
    let dir = tempfile::tempdir().unwrap();
    let rss_before = peak_rss_kib();
    let out = run(
        dir.path(),
        "bash",
        json!({"command": "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 200000000; echo; echo last line"}),
    )
    .await;
    assert!(!out.is_error, "{}", &out.joined_text()[..200]);
    let t = out.joined_text();
    let kept = &t[..t.rfind("\n\n[Showing lines").unwrap()];
    assert!(kept.len() <= 50 * 1024, "kept {} bytes", kept.len());
    assert!(kept.ends_with("last line\n"));
    assert!(t.contains("(50.0KB limit). Full output: "), "{}", &t[t.len() - 200..]);
    let spill = out.details["fullOutputPath"].as_str().unwrap();
    assert_eq!(std::fs::metadata(spill).unwrap().len(), 200_000_000 + 1 + 10);
    assert_eq!(out.details["truncation"]["totalBytes"], 200_000_011);
    let grown = peak_rss_kib().saturating_sub(rss_before);
    assert!(grown < 100 * 1024, "peak memory grew by {grown} KiB");
}

#[tokio::test]
async fn bash_does_not_see_the_key_variables() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY-free on edition 2021; the variables are unique to this test.
    std::env::set_var("OPENAI_API_KEY", "sk-test-openai");
    std::env::set_var("ANTHROPIC_API_KEY", "sk-test-anthropic");
    // A configured provider's variable that no default pattern catches.
    std::env::set_var("HANDOFF_TEST_PROVIDER_CRED", "sk-test-provider");
    std::env::set_var("HANDOFF_TEST_KEEP", "kept");
    let c = ctx(dir.path()).with_env(EnvPolicy::default().with_secrets(["HANDOFF_TEST_PROVIDER_CRED"]));
    let out = execute("bash", json!({"command": "env"}), &c).await;
    let env = out.joined_text();
    assert!(env.contains("HANDOFF_TEST_KEEP=kept"), "{env}");
    assert!(!env.contains("sk-test"), "{env}");
    assert!(!env.contains("OPENAI_API_KEY"));
    assert!(!env.contains("ANTHROPIC_API_KEY"));
    assert!(!env.contains("HANDOFF_TEST_PROVIDER_CRED"));
}

// ---------------------------------------------------------------- edit and write

async fn edit(dir: &Path, args: Value) -> ToolOutput {
    run(dir, "edit", args).await
}

#[tokio::test]
async fn edit_applies_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("src.rs");
    std::fs::write(&p, "fn a() {}\nfn b() {}\nfn c() {}\n").unwrap();
    let out = edit(
        d,
        json!({"path": "src.rs", "edits": [
        {"oldText": "fn c", "newText": "fn z"}, {"oldText": "fn a", "newText": "fn y"}]}),
    )
    .await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert_eq!(out.joined_text(), "Successfully replaced 2 block(s) in src.rs.");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "fn y() {}\nfn b() {}\nfn z() {}\n");
    assert_eq!(out.details["firstChangedLine"], 1);
    let diff = out.details["diff"].as_str().unwrap();
    assert!(diff.contains("-1 fn a() {}\n+1 fn y() {}"), "{diff}");
    assert!(diff.contains("-3 fn c() {}\n+3 fn z() {}"), "{diff}");

    let before = std::fs::read_to_string(&p).unwrap();
    let refused = [
        (json!([{"oldText": "fn", "newText": "x"}]), "Found 3 occurrences of the text in src.rs."),
        (json!([{"oldText": "fn q", "newText": "x"}]), "Could not find the exact text in src.rs."),
        (
            json!([{"oldText": "fn y() {}\nfn b", "newText": "x"}, {"oldText": "fn b() {}\nfn z", "newText": "y"}]),
            "edits[0] and edits[1] overlap in src.rs.",
        ),
        (
            json!([{"oldText": "fn b", "newText": "fn B"}, {"oldText": "nope", "newText": "x"}]),
            "Could not find edits[1] in src.rs.",
        ),
    ];
    for (edits, expected) in refused {
        let out = edit(d, json!({"path": "src.rs", "edits": edits})).await;
        assert!(out.is_error);
        assert!(out.joined_text().starts_with(expected), "{}", out.joined_text());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before, "file untouched");
    }
}

#[tokio::test]
async fn edit_keeps_crlf_and_bom_and_accepts_legacy_and_string_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("win.txt");
    std::fs::write(&p, "\u{FEFF}alpha\r\nbeta\r\ngamma\r\n").unwrap();
    // Legacy single pair; the model writes LF.
    let out =
        edit(d, json!({"path": "win.txt", "oldText": "alpha\nbeta", "newText": "ALPHA\nBETA"}))
            .await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert_eq!(std::fs::read(&p).unwrap(), "\u{FEFF}ALPHA\r\nBETA\r\ngamma\r\n".as_bytes());
    // `edits` as a JSON string.
    let edits = json!([{"oldText": "gamma", "newText": "GAMMA"}]).to_string();
    let out = edit(d, json!({"path": "win.txt", "edits": edits})).await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert_eq!(std::fs::read(&p).unwrap(), "\u{FEFF}ALPHA\r\nBETA\r\nGAMMA\r\n".as_bytes());
    // The whole arguments object as a JSON string.
    let args =
        json!({"path": "win.txt", "edits": [{"oldText": "BETA", "newText": "beta"}]}).to_string();
    let out = edit(d, Value::String(args)).await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert_eq!(std::fs::read(&p).unwrap(), "\u{FEFF}ALPHA\r\nbeta\r\nGAMMA\r\n".as_bytes());
}

#[tokio::test]
async fn edit_refuses_files_that_are_not_utf8() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
    let out = edit(
        dir.path(),
        json!({"path": "latin1.txt", "edits": [{"oldText": "caf", "newText": "x"}]}),
    )
    .await;
    assert!(out.is_error);
    assert!(out.joined_text().contains("not valid UTF-8"));
    assert_eq!(std::fs::read(dir.path().join("latin1.txt")).unwrap(), b"caf\xe9\n");
}

/// An in-memory `FileAccess`, as a front end holding buffers would be.
#[derive(Default)]
struct MemoryFiles {
    files: Mutex<std::collections::HashMap<PathBuf, Vec<u8>>>,
}

#[async_trait]
impl FileAccess for MemoryFiles {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let bytes = self.files.lock().unwrap().get(path).cloned();
        match bytes {
            Some(b) => Ok(Box::new(io::Cursor::new(b))),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "no such buffer")),
        }
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.files.lock().unwrap().insert(path.to_path_buf(), bytes.to_vec());
        Ok(())
    }
}

#[tokio::test]
async fn read_edit_and_write_go_through_the_file_access_seam() {
    let dir = tempfile::tempdir().unwrap();
    let files = Arc::new(MemoryFiles::default());
    let c = ctx(dir.path()).with_files(files.clone());
    let out = execute("write", json!({"path": "mem.txt", "content": "one\ntwo\n"}), &c).await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert!(!dir.path().join("mem.txt").exists(), "nothing on disk");
    let out = execute(
        "edit",
        json!({"path": "mem.txt", "edits": [{"oldText": "two", "newText": "2"}]}),
        &c,
    )
    .await;
    assert!(!out.is_error, "{}", out.joined_text());
    let out = execute("read", json!({"path": "mem.txt"}), &c).await;
    assert_eq!(out.joined_text(), "one\n2\n");
    let stored = files.files.lock().unwrap().get(&dir.path().join("mem.txt")).cloned().unwrap();
    assert_eq!(stored, b"one\n2\n");
}

/// A `FileAccess` whose saves format the text, as an editor with format-on-save does: `x=1`
/// becomes `x = 1`.
#[derive(Default)]
struct FormattingFiles {
    memory: MemoryFiles,
}

#[async_trait]
impl FileAccess for FormattingFiles {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        self.memory.open(path).await
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let formatted = String::from_utf8_lossy(bytes).replace("=", " = ");
        self.memory.write(path, formatted.as_bytes()).await
    }
}

#[tokio::test]
async fn a_file_changed_as_it_was_saved_is_read_back_and_the_model_told_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path()).with_files(Arc::new(FormattingFiles::default()));
    let out = execute("write", json!({"path": "conf.py", "content": "x=1\ny=2\n"}), &c).await;
    let text = out.joined_text();
    assert!(!out.is_error, "{text}");
    assert!(text.starts_with("Successfully wrote 8 bytes to conf.py\n\nThe file changed as the editor saved it"), "{text}");
    assert!(text.contains("-1 x=1") && text.contains("+1 x = 1") && text.contains("+2 y = 2"), "{text}");

    // The model edits the file as it now is; the edit's own save changes it again.
    let out = execute("edit", json!({"path": "conf.py", "edits": [{"oldText": "y = 2", "newText": "y=3"}]}), &c).await;
    let text = out.joined_text();
    assert!(!out.is_error, "{text}");
    assert!(text.contains("+2 y = 3"), "{text}");
    let diff = out.details["diff"].as_str().unwrap();
    assert!(diff.contains("-2 y = 2") && diff.contains("+2 y = 3"), "the diff shown ends at what the file holds: {diff}");

    // Control: a save that keeps the text adds nothing.
    let c = ctx(dir.path()).with_files(Arc::new(MemoryFiles::default()));
    let out = execute("write", json!({"path": "conf.py", "content": "x = 1\n"}), &c).await;
    assert_eq!(out.joined_text(), "Successfully wrote 6 bytes to conf.py");
}

#[tokio::test]
async fn write_creates_folders_and_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        run(dir.path(), "write", json!({"path": "deep/er/file.md", "content": "# hi\n"})).await;
    assert_eq!(out.joined_text(), "Successfully wrote 5 bytes to deep/er/file.md");
    let out = run(dir.path(), "write", json!({"path": "deep/er/file.md", "content": "new"})).await;
    assert!(!out.is_error);
    assert_eq!(std::fs::read_to_string(dir.path().join("deep/er/file.md")).unwrap(), "new");
}

// ---------------------------------------------------------------- grep, find, ls

/// A project with a .gitignore'd folder, a symlink loop and (unless root) an unreadable folder.
fn project() -> (tempfile::TempDir, bool) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (p, text) in [
        ("src/main.rs", "fn main() { needle(); }\n"),
        ("src/lib.rs", "pub fn needle() {}\n"),
        ("target/debug/out.rs", "needle in build output\n"),
        (".config/settings.toml", "needle = true\n"),
        ("locked/secret.rs", "needle hidden\n"),
        ("notes.log", "needle in a log\n"),
    ] {
        std::fs::create_dir_all(d.join(p).parent().unwrap()).unwrap();
        std::fs::write(d.join(p), text).unwrap();
    }
    std::fs::write(d.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::os::unix::fs::symlink(".", d.join("src/loop")).unwrap();
    std::os::unix::fs::symlink("ping", d.join("pong")).unwrap();
    std::os::unix::fs::symlink("pong", d.join("ping")).unwrap();
    let locked = !is_root();
    if locked {
        std::fs::set_permissions(d.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    } else {
        // Root reads every folder: the unreadable-folder part of the walk tests cannot run.
        eprintln!("SKIPPED (the locked-folder checks of grep, find and ls): running as root, who reads a 0000 folder");
    }
    (dir, locked)
}

fn unlock(dir: &Path) {
    let _ = std::fs::set_permissions(dir.join("locked"), std::fs::Permissions::from_mode(0o755));
}

#[tokio::test]
async fn grep_respects_gitignore_and_survives_loops_and_locked_folders() {
    let (dir, locked) = project();
    let d = dir.path();
    // A walk that follows the loop never ends.
    let out = tokio::time::timeout(HANG_GUARD, run(d, "grep", json!({"pattern": "needle"})))
        .await
        .expect("grep never ended: it walks the symlink loop");
    assert!(!out.is_error, "{}", out.joined_text());
    let t = out.joined_text();
    let mut expected = vec![
        ".config/settings.toml:1: needle = true",
        "src/lib.rs:1: pub fn needle() {}",
        "src/main.rs:1: fn main() { needle(); }",
    ];
    if !locked {
        expected.insert(1, "locked/secret.rs:1: needle hidden");
    }
    assert_eq!(t, expected.join("\n"));
    let out = run(d, "grep", json!({"pattern": "needle", "limit": 1})).await;
    assert!(out
        .joined_text()
        .ends_with("[1 matches limit reached. Use limit=2 for more, or refine pattern]"));
    let out = run(
        d,
        "grep",
        json!({"pattern": "NEEDLE", "path": "src", "ignoreCase": true, "glob": "main*"}),
    )
    .await;
    assert_eq!(out.joined_text(), "main.rs:1: fn main() { needle(); }");
    unlock(d);
}

/// What a one-threaded walk with sorted names finds (the order grep's output has always had):
/// depth first, each folder's entries sorted by name bytes, lines containing `needle`.
fn sorted_walk_matches(root: &Path, dir: &Path, needle: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        if e.file_type().unwrap().is_dir() {
            sorted_walk_matches(root, &path, needle, out);
            continue;
        }
        let rel = path.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| l.contains(needle)) {
            out.push(format!("{rel}:{}: {line}", i + 1));
        }
    }
}

/// A tree large enough for grep's search threads: the output is still the sorted walk's, with
/// the limit cutting in the middle of a file; a test that fails if the threads' order showed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_over_many_files_keeps_the_sorted_order_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Names whose component order differs from plain string order ("a/…" before "a.txt") and
    // from creation order; files of different sizes so the threads finish out of order; 1,200
    // matches, under the 50 KiB output limit.
    let folders = ["a", "a.b", "a-b", "a_b", "B", "b", "b10", "b9", "deep/er/est", "z"];
    let mut n = 0;
    for (f, folder) in folders.iter().enumerate() {
        for i in (0..40).rev() {
            let path = d.join(folder).join(format!("f{i}.txt"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let filler = "nothing to see here\n".repeat((i * 37 + f * 11) % 400);
            let text: String = (0..3)
                .map(|k| {
                    n += 1;
                    format!("{filler}needle {n} ({k})\n")
                })
                .collect();
            std::fs::write(path, text).unwrap();
        }
    }
    std::fs::write(d.join("a.txt"), "needle in a.txt\n").unwrap();
    std::fs::write(d.join("B.txt"), "needle in B.txt\n").unwrap();
    let mut all = Vec::new();
    sorted_walk_matches(d, d, "needle", &mut all);
    assert_eq!(all.len(), folders.len() * 40 * 3 + 2);
    assert!(all.join("\n").len() < 50 * 1024, "under grep's byte limit");
    for _ in 0..3 {
        let out = run(d, "grep", json!({"pattern": "needle", "limit": 100_000})).await;
        assert_eq!(out.joined_text(), all.join("\n"));
        let out = run(d, "grep", json!({"pattern": "needle", "limit": 1000})).await;
        assert_eq!(
            out.joined_text(),
            format!(
                "{}\n\n[1000 matches limit reached. Use limit=2000 for more, or refine pattern]",
                all[..1000].join("\n")
            )
        );
        assert_eq!(out.details["matchLimitReached"], 1000);
        let out = run(d, "grep", json!({"pattern": "needle"})).await;
        assert!(out
            .joined_text()
            .starts_with(&format!("{}\n\n[100 matches", all[..100].join("\n"))));
    }
    let out = run(d, "grep", json!({"pattern": "needle", "limit": all.len()})).await;
    assert!(out.joined_text().ends_with(&format!(
        "{}\n\n[{} matches limit reached. Use limit={} for more, or refine pattern]",
        all[all.len() - 1],
        all.len(),
        all.len() * 2
    )));
    let out = run(d, "grep", json!({"pattern": "needle", "path": "b9", "limit": 5})).await;
    let b9: Vec<String> =
        all.iter().filter_map(|l| l.strip_prefix("b9/").map(str::to_owned)).take(5).collect();
    assert!(out.joined_text().starts_with(&b9.join("\n")), "{}", out.joined_text());
}

#[tokio::test]
async fn find_respects_gitignore_and_survives_loops_and_locked_folders() {
    let (dir, locked) = project();
    let d = dir.path();
    let out = run(d, "find", json!({"pattern": "*.rs"})).await;
    assert!(!out.is_error, "{}", out.joined_text());
    let mut expected = vec!["src/lib.rs", "src/main.rs"];
    if !locked {
        expected.insert(0, "locked/secret.rs");
    }
    assert_eq!(out.joined_text(), expected.join("\n"));
    let out = run(d, "find", json!({"pattern": "*"})).await;
    let t = out.joined_text();
    assert!(t.contains(".gitignore") && t.contains("src/loop") && t.contains("locked/"), "{t}");
    assert!(!t.contains("target") && !t.contains("notes.log"), "{t}");
    let out = run(d, "find", json!({"pattern": "**", "limit": 2})).await;
    assert!(out
        .joined_text()
        .ends_with("[2 results limit reached. Use limit=4 for more, or refine pattern]"));
    unlock(d);
}

#[tokio::test]
async fn ls_lists_everything_and_survives_loops_and_locked_folders() {
    let (dir, locked) = project();
    let d = dir.path();
    let out = run(d, "ls", json!({})).await;
    // The ping/pong loop cannot be stat'ed and is left out, as pi does.
    assert_eq!(
        out.joined_text(),
        ".config/\n.gitignore\n.spill/\nlocked/\nnotes.log\nsrc/\ntarget/"
    );
    let out = run(d, "ls", json!({"path": "src"})).await;
    assert_eq!(out.joined_text(), "lib.rs\nloop/\nmain.rs");
    let out = run(d, "ls", json!({"path": "locked"})).await;
    if locked {
        assert!(out.is_error);
        assert!(out.joined_text().starts_with("Cannot read directory: "), "{}", out.joined_text());
    } else {
        assert_eq!(out.joined_text(), "secret.rs");
    }
    let out = run(d, "ls", json!({"limit": 3})).await;
    assert!(out.joined_text().ends_with("[3 entries limit reached. Use limit=6 for more]"));
    unlock(d);
}

// ---------------------------------------------------------------- todo_write

#[tokio::test]
async fn todos_are_rebuilt_from_stored_results() {
    let dir = tempfile::tempdir().unwrap();
    let a = run(
        dir.path(),
        "todo_write",
        json!({"todos": [
        {"content": "Plan", "status": "completed", "activeForm": "Planning"},
        {"content": "Build", "status": "in_progress", "activeForm": "Building"}]}),
    )
    .await;
    let b = run(
        dir.path(),
        "todo_write",
        json!({"todos": [
        {"content": "Plan", "status": "completed", "activeForm": "Planning"},
        {"content": "Build", "status": "completed", "activeForm": "Building"},
        {"content": "Ship", "status": "pending", "activeForm": "Shipping"}]}),
    )
    .await;
    let lines: Vec<String> =
        [a.into_message("t1", "todo_write"), b.into_message("t2", "todo_write")]
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect();
    let stored: Vec<handoff_nvim::core::message::Message> =
        lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let now = current_todos(&stored);
    assert_eq!(
        now.iter().filter(|t| t.is_open()).map(|t| t.content.as_str()).collect::<Vec<_>>(),
        ["Ship"]
    );
    let branch = current_todos(&stored[..1]);
    assert_eq!(
        branch.iter().filter(|t| t.is_open()).map(|t| t.active_form.as_str()).collect::<Vec<_>>(),
        ["Building"]
    );
}
