//! `bash`: runs a command with `bash -c` in the session's cwd, stdout and stderr merged into one
//! pipe (so they interleave as in a terminal), stdin closed.
//!
//! Memory stays bounded whatever the command prints: only a rolling tail is kept (the result
//! shows its last 2000 lines / 50 KiB, as pi); once the output passes those limits everything
//! goes to a 0600 temp file named in `details.fullOutputPath`. The command runs in its own
//! process group; abort, timeout and dropping the future kill the whole group.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::time::Instant;

use crate::sandbox::command::SandboxedCommand;
use crate::sandbox::Sandboxed;

use super::args;
use super::truncate::{
    format_size, truncate_tail, TruncatedBy, Truncation, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES,
};
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};
use crate::process_groups;

/// pi's throttle for partial output updates.
const UPDATE_INTERVAL: Duration = Duration::from_millis(100);
/// How long output is still read after the shell exits (a background child may hold the pipe).
const EXIT_GRACE: Duration = Duration::from_millis(100);
const READ_CHUNK: usize = 64 * 1024;

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "bash".into(),
        description: format!(
            "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds.",
            DEFAULT_MAX_BYTES / 1024
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
            },
            "required": ["command"]
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    command: String,
    timeout: Option<f64>,
}

/// The shell pi would use: the configured one, else `/bin/bash`, else `bash` on PATH, else `sh`.
fn shell(configured: Option<&Path>) -> Result<PathBuf, ToolError> {
    if let Some(p) = configured {
        return if p.exists() {
            Ok(p.to_path_buf())
        } else {
            Err(ToolError::Failed(format!("Custom shell path not found: {}", p.display())))
        };
    }
    Ok(default_shell())
}

/// The shell bash runs when none is configured (the system prompt names it too).
pub fn default_shell() -> PathBuf {
    if Path::new("/bin/bash").exists() {
        return PathBuf::from("/bin/bash");
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("bash")).find(|p| p.is_file())
    });
    on_path.unwrap_or_else(|| PathBuf::from("sh"))
}

/// `5` not `5.0`, as JavaScript prints the number.
fn seconds(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e15 {
        format!("{}", s as i64)
    } else {
        s.to_string()
    }
}

enum Stop {
    Aborted,
    TimedOut(f64),
}

/// Kills the command's process group unless disarmed: on abort, on timeout, and when the tool's
/// future is dropped while the command runs. The group is the host's from its start
/// (`process_groups`): whatever of it is left when the host exits, killed or not, goes with it.
struct GroupKill {
    pgid: Option<i32>,
}

impl GroupKill {
    fn new(pgid: Option<i32>) -> Self {
        if let Some(pgid) = pgid {
            process_groups::adopt(pgid);
        }
        GroupKill { pgid }
    }

    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            process_groups::kill(pgid);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs the command; in the sandbox (`sandboxed`: the context's sandbox and the command's side
/// of it, prepared by the caller, who finishes it after: see `sandbox::command`), else as is.
async fn run_prepared(
    arguments: Value,
    ctx: &ToolContext,
    mut sandboxed: Option<(&Sandboxed, &mut SandboxedCommand)>,
) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse("bash", &definition().parameters, arguments)?;
    if !ctx.cwd.exists() {
        return Err(ToolError::Failed(format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            ctx.cwd.display()
        )));
    }
    let shell = shell(ctx.shell.as_deref())?;
    let (tx, mut rx) =
        tokio::net::unix::pipe::pipe().map_err(|e| ToolError::io("Could not create a pipe", e))?;
    let out_fd = tx.into_blocking_fd().map_err(|e| ToolError::io("Could not create a pipe", e))?;
    let err_fd = out_fd.try_clone().map_err(|e| ToolError::io("Could not create a pipe", e))?;
    // In the sandbox, the helper restricts itself and execs the shell (see `core::sandbox`).
    let (program, mut cmd) = match &sandboxed {
        Some((sandbox, prepared)) => {
            let mut cmd = tokio::process::Command::new(sandbox.helper.path());
            cmd.args(prepared.helper_args(sandbox, &ctx.cwd, &shell, &["-c", &a.command]));
            prepared.pass_descriptors(&mut cmd);
            (sandbox.helper.source().to_path_buf(), cmd)
        }
        None => {
            let mut cmd = tokio::process::Command::new(&shell);
            cmd.arg("-c").arg(&a.command);
            (shell, cmd)
        }
    };
    cmd.current_dir(&ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_fd))
        .stderr(Stdio::from(err_fd))
        .process_group(0)
        .kill_on_drop(true);
    // The whole environment from the policy: nothing it did not let through is inherited.
    ctx.env.apply(&mut cmd, sandboxed.is_some());
    let spawned = cmd.spawn();
    // The Command holds our copies of the pipe's write end: without dropping it, the pipe
    // never reaches end of file.
    drop(cmd);
    if let Some((_, prepared)) = sandboxed.as_mut() {
        prepared.spawned();
    }
    let mut child =
        spawned.map_err(|e| ToolError::io(format!("Could not run {}", program.display()), e))?;
    let mut group = GroupKill::new(child.id().and_then(|p| i32::try_from(p).ok()));

    let spill_dir = ctx.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut output = OutputBuffer::new(spill_dir);
    let timeout = a.timeout.filter(|t| t.is_finite() && *t > 0.0);
    let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.min(1e9)));
    let far = Instant::now() + Duration::from_secs(86_400 * 365);

    if ctx.on_progress.is_some() {
        ctx.progress(ToolOutput { content: Vec::new(), details: Value::Null, is_error: false });
    }
    let mut buf = vec![0u8; READ_CHUNK];
    let mut pipe_open = true;
    let mut status: Option<std::io::Result<std::process::ExitStatus>> = None;
    let mut stop: Option<Stop> = None;
    let mut exited_at: Option<Instant> = None;
    let mut last_update = Instant::now();
    let mut dirty = false;
    loop {
        if status.is_some() && !pipe_open {
            break;
        }
        let grace = exited_at.map_or(far, |t| t + EXIT_GRACE);
        let next_update = if dirty { last_update + UPDATE_INTERVAL } else { far };
        tokio::select! {
            r = rx.read(&mut buf), if pipe_open => match r {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => {
                    output.append(&buf[..n]).await;
                    dirty = ctx.on_progress.is_some();
                }
            },
            s = child.wait(), if status.is_none() => {
                status = Some(s);
                exited_at = Some(Instant::now());
            }
            _ = ctx.cancel.cancelled(), if stop.is_none() => {
                stop = Some(Stop::Aborted);
                group.kill();
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or(far)), if stop.is_none() && deadline.is_some() => {
                stop = Some(Stop::TimedOut(timeout.unwrap_or_default()));
                group.kill();
            }
            _ = tokio::time::sleep_until(grace), if exited_at.is_some() => break,
            _ = tokio::time::sleep_until(next_update), if dirty => {}
        }
        if dirty && last_update.elapsed() >= UPDATE_INTERVAL {
            dirty = false;
            last_update = Instant::now();
            let snap = output.snapshot();
            ctx.progress(ToolOutput::text(snap.content.clone(), snap.details(output.spill_path())));
        }
    }
    if stop.is_none() {
        // The shell is gone; what it left running in the background runs on, as in pi, until
        // the host exits (the group stays the host's: `process_groups`).
        group.pgid = None;
    }
    drop(rx);
    output.finish().await;
    let snap = output.snapshot();
    let details = snap.details(output.spill_path());

    let status_line = match (&stop, &status) {
        (Some(Stop::Aborted), _) => Some("Command aborted".to_owned()),
        (Some(Stop::TimedOut(t)), _) => {
            Some(format!("Command timed out after {} seconds", seconds(*t)))
        }
        (None, Some(Ok(st))) => {
            match (st.code(), std::os::unix::process::ExitStatusExt::signal(st)) {
                (Some(0), _) => None,
                (Some(code), _) => Some(format!("Command exited with code {code}")),
                (None, Some(sig)) => Some(format!("Command was killed by signal {sig}")),
                (None, None) => Some("Command ended without an exit code".to_owned()),
            }
        }
        (None, Some(Err(e))) => Some(format!("Could not wait for the command: {e}")),
        (None, None) => Some("Command ended without an exit code".to_owned()),
    };
    let empty = if status_line.is_some() && stop.is_some() { "" } else { "(no output)" };
    let text = output.format(&snap, empty);
    Ok(match status_line {
        None => ToolOutput::text(text, details),
        Some(status) => {
            let text = if text.is_empty() { status } else { format!("{text}\n\n{status}") };
            ToolOutput { content: vec![crate::message::ContentBlock::text(text)], details, is_error: true }
        }
    })
}

struct Snapshot {
    content: String,
    truncation: Truncation,
}

impl Snapshot {
    /// pi's bash details: `{truncation, fullOutputPath}` when the output was cut, else none.
    fn details(&self, path: Option<&Path>) -> Value {
        if !self.truncation.truncated {
            return Value::Null;
        }
        let mut d = Map::new();
        d.insert("truncation".into(), self.truncation.to_value());
        if let Some(p) = path {
            d.insert("fullOutputPath".into(), Value::String(p.display().to_string()));
        }
        Value::Object(d)
    }
}

/// The command's output: counts, a rolling tail, and the full bytes in a temp file once they
/// pass the limits.
struct OutputBuffer {
    total_bytes: u64,
    total_lines: u64,
    current_line_bytes: u64,
    tail: Vec<u8>,
    tail_at_line_start: bool,
    /// Bytes not yet in the temp file (only before it exists).
    pending: Vec<u8>,
    spill: Option<BufWriter<tokio::fs::File>>,
    spill_path: Option<PathBuf>,
    spill_error: Option<String>,
    spill_dir: PathBuf,
}

impl OutputBuffer {
    /// The tail is trimmed back to this many bytes whenever it grows to twice as much.
    const ROLLING: usize = 2 * DEFAULT_MAX_BYTES;

    fn new(spill_dir: PathBuf) -> Self {
        Self {
            total_bytes: 0,
            total_lines: 1,
            current_line_bytes: 0,
            tail: Vec::new(),
            tail_at_line_start: true,
            pending: Vec::new(),
            spill: None,
            spill_path: None,
            spill_error: None,
            spill_dir,
        }
    }

    fn over_limits(&self) -> bool {
        self.total_bytes > DEFAULT_MAX_BYTES as u64 || self.total_lines > DEFAULT_MAX_LINES as u64
    }

    async fn append(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len() as u64;
        match memchr::memrchr(b'\n', chunk) {
            Some(last) => {
                self.total_lines += memchr::memchr_iter(b'\n', chunk).count() as u64;
                self.current_line_bytes = (chunk.len() - last - 1) as u64;
            }
            None => self.current_line_bytes += chunk.len() as u64,
        }
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > 2 * Self::ROLLING {
            let start = self.tail.len() - Self::ROLLING;
            self.tail_at_line_start = self.tail[start - 1] == b'\n';
            self.tail.drain(..start);
        }
        if self.spill.is_some() {
            self.write_spill(chunk).await;
        } else if self.spill_error.is_none() {
            self.pending.extend_from_slice(chunk);
            if self.over_limits() {
                self.open_spill().await;
            }
        }
    }

    async fn open_spill(&mut self) {
        let path = self.spill_dir.join(format!("handoff-bash-{:016x}.log", rand::random::<u64>()));
        let opened = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await;
        match opened {
            Ok(file) => {
                self.spill = Some(BufWriter::with_capacity(256 * 1024, file));
                self.spill_path = Some(path);
                let pending = std::mem::take(&mut self.pending);
                self.write_spill(&pending).await;
            }
            Err(e) => {
                tracing::warn!("bash: cannot create {}: {e}", path.display());
                self.spill_error = Some(e.to_string());
                self.pending = Vec::new();
            }
        }
    }

    async fn write_spill(&mut self, bytes: &[u8]) {
        let Some(w) = self.spill.as_mut() else { return };
        if let Err(e) = w.write_all(bytes).await {
            tracing::warn!("bash: writing the full output failed: {e}");
            self.spill_error = Some(e.to_string());
            self.spill = None;
        }
    }

    async fn finish(&mut self) {
        if let Some(mut w) = self.spill.take() {
            if let Err(e) = w.flush().await {
                self.spill_error = Some(e.to_string());
            }
        }
    }

    fn spill_path(&self) -> Option<&Path> {
        self.spill_path.as_deref()
    }

    fn snapshot(&self) -> Snapshot {
        let mut bytes = &self.tail[..];
        if !self.tail_at_line_start {
            if let Some(i) = memchr::memchr(b'\n', bytes) {
                bytes = &bytes[i + 1..];
            }
        }
        let text = String::from_utf8_lossy(bytes);
        let (content, mut t) = truncate_tail(&text, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
        t.truncated = self.over_limits();
        t.truncated_by = if t.truncated {
            t.truncated_by.or(Some(if self.total_bytes > DEFAULT_MAX_BYTES as u64 {
                TruncatedBy::Bytes
            } else {
                TruncatedBy::Lines
            }))
        } else {
            None
        };
        t.total_lines = self.total_lines as usize;
        t.total_bytes = self.total_bytes as usize;
        Snapshot { content, truncation: t }
    }

    /// The result text: the kept output and, when it was cut, pi's notice naming the file.
    fn format(&self, snap: &Snapshot, empty: &str) -> String {
        let mut text =
            if snap.content.is_empty() { empty.to_owned() } else { snap.content.clone() };
        let t = &snap.truncation;
        if t.truncated {
            let full = match (&self.spill_path, &self.spill_error) {
                (Some(p), None) => p.display().to_string(),
                (Some(p), Some(e)) => format!("{} (incomplete: {e})", p.display()),
                (None, Some(e)) => format!("unavailable ({e})"),
                (None, None) => "unavailable".to_owned(),
            };
            let end = t.total_lines;
            let start = (end + 1).saturating_sub(t.output_lines);
            let notice = if t.last_line_partial {
                format!(
                    "[Showing last {} of line {end} (line is {}). Full output: {full}]",
                    format_size(t.output_bytes as u64),
                    format_size(self.current_line_bytes)
                )
            } else if t.truncated_by == Some(TruncatedBy::Lines) {
                format!("[Showing lines {start}-{end} of {end}. Full output: {full}]")
            } else {
                format!(
                    "[Showing lines {start}-{end} of {end} ({} limit). Full output: {full}]",
                    format_size(DEFAULT_MAX_BYTES as u64)
                )
            };
            text = format!("{text}\n\n{notice}");
        }
        text
    }
}

/// How a bash call ended, from its stored result: the exit code its text names (`Command exited
/// with code N`), 0 for a success, else (aborted, timed out) the last line of its text.
fn ending(result: &crate::message::Message) -> (Option<i32>, Option<String>) {
    let text = result.text();
    if let Some((_, rest)) = text.rsplit_once("Command exited with code ") {
        return (rest.split_whitespace().next().and_then(|c| c.parse().ok()), None);
    }
    if !result.tool_result().is_some_and(|r| r.is_error()) {
        return (Some(0), None);
    }
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed");
    (None, Some(last.trim().to_string()))
}

/// Adds `note` to a command's result, for the model (its text) and the front ends (`details.key`).
fn note_in_result(output: &mut ToolOutput, key: &str, note: String) {
    output.content.push(crate::message::ContentBlock::text(format!("\n{note}")));
    if !output.details.is_object() {
        output.details = Value::Object(Map::new());
    }
    if let Value::Object(details) = &mut output.details {
        details.insert(key.into(), Value::String(note));
    }
}

/// The `bash` tool (see [`super::Tool`]).
pub struct Bash;

#[async_trait::async_trait]
impl super::Tool for Bash {
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Execute
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Execute
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        use crate::sandbox::protected;
        // What the sandbox could not mount over, since it did not exist: said if it appears.
        let absent = ctx.sandbox.as_ref().map(|_| protected::absent_planted_code(&ctx.cwd));
        // The sandbox's side looks at the project's files with other hard links before and
        // after: said if the command changes one (the sandbox lets a command write the
        // project, and a link carries the write out).
        let mut prepared = match &ctx.sandbox {
            Some(sandbox) => Some((
                sandbox,
                SandboxedCommand::prepare(sandbox, &ctx.cwd)
                    .await
                    .map_err(|e| ToolError::io("Could not set up the sandbox for this command", e))?,
            )),
            None => None,
        };
        let ran = run_prepared(arguments, ctx, prepared.as_mut().map(|(sandbox, command)| (*sandbox, command))).await;
        let finished = match prepared {
            Some((sandbox, command)) => command.finish(sandbox).await,
            None => Default::default(),
        };
        let mut output = ran?;
        if let Some(note) = finished.git {
            note_in_result(&mut output, "gitRefused", note);
        }
        if let Some(note) = absent.and_then(|absent| protected::created_planted_code(&ctx.cwd, &absent)) {
            note_in_result(&mut output, "plantedCode", note);
        }
        if let Some(note) = finished.hard_links {
            note_in_result(&mut output, "hardLinks", note);
        }
        Ok(output)
    }

    fn summary(&self, args: &Value) -> String {
        super::argument_summary(args, "command")
    }

    /// "Always" covers this exact command only.
    fn consent_key(&self, args: &Value) -> Option<super::ConsentKey> {
        args.get("command").and_then(Value::as_str).map(|c| super::ConsentKey::Exact(c.to_string()))
    }

    /// Past its limits the result keeps the last lines (pi's `details.truncation`).
    fn lines_not_kept(&self, result: &crate::message::Message) -> u64 {
        let Some(t) = result.tool_result().and_then(|r| r.details()).and_then(|d| d.get("truncation")) else { return 0 };
        if t["truncated"] != true {
            return 0;
        }
        let count = |key: &str| t[key].as_u64().unwrap_or(0);
        count("totalLines").saturating_sub(count("outputLines"))
    }

    fn fact(&self, args: &Value, result: &crate::message::Message) -> Option<super::CallFact> {
        let command = args.get("command").and_then(Value::as_str).unwrap_or_default().to_string();
        let (exit_code, ended) = ending(result);
        Some(super::CallFact::Command { command, exit_code, ended })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{execute, ToolContext};

    async fn bash(dir: &Path, command: &str) -> ToolOutput {
        let ctx = ToolContext { spill_dir: Some(dir.to_path_buf()), ..ToolContext::new(dir) };
        execute("bash", json!({"command": command}), &ctx).await
    }

    #[tokio::test]
    async fn stdout_and_stderr_are_merged_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), "echo one; echo two >&2; echo three").await;
        assert!(!out.is_error);
        assert_eq!(out.joined_text(), "one\ntwo\nthree\n");
        assert!(out.details.is_null());
    }

    #[tokio::test]
    async fn a_failing_command_is_an_error_with_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), "echo oops; exit 3").await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "oops\n\n\nCommand exited with code 3");
        let out = bash(dir.path(), "true").await;
        assert_eq!(out.joined_text(), "(no output)");
    }

    #[tokio::test]
    async fn runs_in_the_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), "pwd").await;
        let pwd = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(out.joined_text().trim(), pwd.display().to_string());
    }

    #[tokio::test]
    async fn a_background_child_holding_the_pipe_does_not_hang_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        // The child holds the pipe for ten minutes: an end inside the hang guard (two, far
        // more than a loaded machine needs) is the tool not waiting for it.
        let run = bash(dir.path(), "sleep 600 & echo $! > child.pid; echo started");
        let out = tokio::time::timeout(Duration::from_secs(120), run).await.expect("the tool waited for the background child");
        assert_eq!(out.joined_text(), "started\n");
        let child = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
        let _ = std::process::Command::new("kill").arg(child.trim()).status();
    }

    #[test]
    fn the_tail_stays_small_and_ends_on_the_last_lines() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut out = OutputBuffer::new(dir.path().to_path_buf());
            for i in 0..100_000 {
                out.append(format!("line {i}\n").as_bytes()).await;
                assert!(out.tail.len() <= 2 * OutputBuffer::ROLLING);
            }
            out.finish().await;
            let snap = out.snapshot();
            assert!(snap.content.ends_with("line 99999\n"));
            assert_eq!(snap.truncation.output_lines, DEFAULT_MAX_LINES);
            assert_eq!(snap.truncation.total_lines, 100_001);
            let text = out.format(&snap, "");
            assert!(
                text.contains("[Showing lines 98002-100001 of 100001. Full output: "),
                "{}",
                &text[text.len() - 200..]
            );
            let spilled = std::fs::read(out.spill_path().unwrap()).unwrap();
            assert_eq!(spilled.len() as u64, out.total_bytes);
        });
    }
}
