//! `read`: a text file from `offset` (1-based line) for at most `limit` lines, cut at 2000 lines
//! or 50 KiB with a notice saying how to continue; images (jpg, png, gif, webp) as image blocks.
//!
//! Unlike pi, which loads the whole file, the file is read in chunks and only as far as needed:
//! up to the requested lines, then at most [`COUNT_BUDGET`] more bytes to count the remaining
//! lines for the notice. Past that budget the notice says the count is a lower bound. Files that
//! look binary (a NUL byte in the first 8 KiB) get a message instead of garbage.

use std::path::Path;

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::args;
use super::paths::resolve_read_path;
use super::truncate::{format_size, TruncatedBy, Truncation, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use super::{image_block, ToolContext, ToolDefinition, ToolError, ToolOutput};

/// Bytes read past the shown lines only to count the rest of the file.
pub const COUNT_BUDGET: u64 = 8 * 1024 * 1024;
/// pi's inline image limit is 4.5 MB of base64; this is the raw size that encodes to it.
const MAX_IMAGE_BYTES: usize = 9 * 1024 * 1024 / 2 * 3 / 4;
const CHUNK: usize = 64 * 1024;
const SNIFF_BYTES: usize = 8 * 1024;

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "read".into(),
        description: format!(
            "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.",
            DEFAULT_MAX_BYTES / 1024
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                "limit": {"type": "number", "description": "Maximum number of lines to read"}
            },
            "required": ["path"]
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    path: String,
    offset: Option<f64>,
    limit: Option<f64>,
}

pub(crate) async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse("read", &definition().parameters, arguments)?;
    let abs = ctx.target(|| resolve_read_path(&a.path, &ctx.cwd));
    ctx.abortable(read_file(ctx, &a.path, &abs, args::count(a.offset), args::count(a.limit))).await
}

async fn read_file(
    ctx: &ToolContext,
    shown_path: &str,
    abs: &Path,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<ToolOutput, ToolError> {
    let reader = ctx
        .files
        .open(abs)
        .await
        .map_err(|e| ToolError::io(format!("Could not read {}", abs.display()), e))?;
    let mut lines = LineReader::new(reader);
    let head = lines
        .peek(SNIFF_BYTES)
        .await
        .map_err(|e| ToolError::io(format!("Could not read {}", abs.display()), e))?;
    if let Some(mime) = image_mime(head) {
        return read_image(lines, mime, abs).await;
    }
    if head.contains(&0) {
        return Ok(ToolOutput::text(
            format!(
                "[{shown_path} is a binary file and is not shown as text. Use bash (e.g. `file`, `xxd | head`, `strings`) to inspect it.]"
            ),
            Value::Null,
        ));
    }
    read_text(lines, shown_path, offset, limit).await.map_err(|e| match e {
        ReadError::Io(e) => ToolError::io(format!("Could not read {}", abs.display()), e),
        ReadError::Tool(t) => t,
    })
}

enum ReadError {
    Io(std::io::Error),
    Tool(ToolError),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

async fn read_text(
    mut lines: LineReader<Box<dyn AsyncRead + Send + Unpin>>,
    shown_path: &str,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<ToolOutput, ReadError> {
    let start = offset.map_or(0, |o| o.saturating_sub(1));
    let start_display = start + 1;
    for skipped in 0..start {
        if lines.next_line(0, u64::MAX).await?.is_none() {
            return Err(ReadError::Tool(ToolError::Failed(format!(
                "Offset {} is beyond end of file ({skipped} lines total)",
                offset.unwrap_or(0)
            ))));
        }
    }
    // The first selected line (the file has at least one: an empty file is one empty line).
    let Some(first) = lines.next_line(DEFAULT_MAX_BYTES + 1, COUNT_BUDGET).await? else {
        return Err(ReadError::Tool(ToolError::Failed(format!(
            "Offset {} is beyond end of file ({start} lines total)",
            offset.unwrap_or(0)
        ))));
    };
    let max_lines = limit.map_or(DEFAULT_MAX_LINES, |l| l.min(DEFAULT_MAX_LINES));
    if limit == Some(0) {
        // Nothing selected: only say how much follows.
        let rest = 1 + lines.count_rest(COUNT_BUDGET).await?;
        return Ok(ToolOutput::text(
            more_lines_notice("", rest, start + 1, lines.exhausted()),
            Value::Null,
        ));
    }
    if first.len > DEFAULT_MAX_BYTES as u64 {
        let size = if first.complete {
            format_size(first.len)
        } else {
            format!("more than {}", format_size(first.len))
        };
        let text = format!(
            "[Line {start_display} is {size}, exceeds {} limit. Use bash: sed -n '{start_display}p' {shown_path} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES as u64)
        );
        let t = Truncation {
            truncated: true,
            truncated_by: Some(TruncatedBy::Bytes),
            total_lines: start + 1,
            total_bytes: first.len as usize,
            output_lines: 0,
            output_bytes: 0,
            last_line_partial: false,
            first_line_exceeds_limit: true,
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
        };
        return Ok(ToolOutput::text(text, json!({ "truncation": t.to_value() })));
    }

    let mut out: Vec<u8> = first.bytes;
    let mut out_lines = 1usize;
    let mut cut: Option<TruncatedBy> = None;
    // The line that stopped the output, when it was scanned to its end (it then counts as one
    // of the lines that follow).
    let mut pending = 0usize;
    let mut user_limited = false;
    loop {
        if out_lines == max_lines {
            if limit.is_some_and(|l| l <= DEFAULT_MAX_LINES) {
                user_limited = true;
            } else if !lines.exhausted() {
                cut = Some(TruncatedBy::Lines);
            }
            break;
        }
        let room = DEFAULT_MAX_BYTES - out.len();
        // A line that does not fit with its separator stops the output (it is never cut).
        let Some(line) = lines.next_line(room, room as u64).await? else {
            break;
        };
        if line.len + 1 > room as u64 {
            cut = Some(TruncatedBy::Bytes);
            pending = usize::from(line.complete);
            break;
        }
        out.push(b'\n');
        out.extend_from_slice(&line.bytes);
        out_lines += 1;
    }
    let content = String::from_utf8_lossy(&out).into_owned();
    let end_display = start_display + out_lines - 1;
    let next = end_display + 1;

    if let Some(by) = cut {
        let rest = pending + lines.count_rest(COUNT_BUDGET).await?;
        let total = end_display + rest;
        let total_text =
            if lines.exhausted() { total.to_string() } else { format!("more than {total}") };
        let notice = match by {
            TruncatedBy::Lines => {
                format!("[Showing lines {start_display}-{end_display} of {total_text}. Use offset={next} to continue.]")
            }
            TruncatedBy::Bytes => format!(
                "[Showing lines {start_display}-{end_display} of {total_text} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES as u64)
            ),
        };
        let t = Truncation {
            truncated: true,
            truncated_by: Some(by),
            total_lines: total - start,
            total_bytes: lines.consumed as usize,
            output_lines: out_lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
        };
        return Ok(ToolOutput::text(
            format!("{content}\n\n{notice}"),
            json!({ "truncation": t.to_value() }),
        ));
    }
    if user_limited {
        let rest = lines.count_rest(COUNT_BUDGET).await?;
        if rest > 0 {
            let text = more_lines_notice(&content, rest, next, lines.exhausted());
            return Ok(ToolOutput::text(text, Value::Null));
        }
    }
    Ok(ToolOutput::text(content, Value::Null))
}

fn more_lines_notice(content: &str, rest: usize, next: usize, exact: bool) -> String {
    let count = if exact { rest.to_string() } else { format!("More than {rest}") };
    format!("{content}\n\n[{count} more lines in file. Use offset={next} to continue.]")
}

async fn read_image(
    mut lines: LineReader<Box<dyn AsyncRead + Send + Unpin>>,
    mime: &'static str,
    abs: &Path,
) -> Result<ToolOutput, ToolError> {
    let bytes = lines
        .read_all(MAX_IMAGE_BYTES + 1)
        .await
        .map_err(|e| ToolError::io(format!("Could not read {}", abs.display()), e))?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Ok(ToolOutput::text(
            format!("Read image file [{mime}]\n[Image omitted: could not be resized below the inline image size limit.]"),
            Value::Null,
        ));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(ToolOutput {
        content: vec![
            crate::message::ContentBlock::text(format!("Read image file [{mime}]")),
            image_block(data, mime),
        ],
        details: Value::Null,
        is_error: false,
    })
}

/// The image types pi sends as attachments, by their magic bytes.
fn image_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// One line (the bytes between two `\n`) as far as it was kept.
struct Line {
    /// The line's first bytes, at most the `keep` asked for.
    bytes: Vec<u8>,
    /// Its length so far: all of it when `complete`, else at least the scan budget.
    len: u64,
    complete: bool,
}

/// Lines of a reader, in pi's sense (`text.split("\n")`: the text after the last `\n`, even
/// empty, is a line), pulled chunk by chunk with one fixed buffer.
struct LineReader<R> {
    reader: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// The final line (after the last `\n`) has been returned.
    done: bool,
    /// Bytes taken from the reader so far.
    consumed: u64,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(reader: R) -> Self {
        Self { reader, buf: vec![0; CHUNK], pos: 0, end: 0, eof: false, done: false, consumed: 0 }
    }

    /// Reads more into the buffer (moving what is unread to its front); false at end of file.
    async fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            return Ok(true);
        }
        let n = self.reader.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        self.end += n;
        self.consumed += n as u64;
        Ok(true)
    }

    /// At least `n` bytes from the current position, or all that is left.
    async fn peek(&mut self, n: usize) -> std::io::Result<&[u8]> {
        let n = n.min(self.buf.len());
        while self.end - self.pos < n && self.fill().await? {}
        Ok(&self.buf[self.pos..self.end.min(self.pos + n)])
    }

    fn exhausted(&self) -> bool {
        self.done
    }

    /// The next line, keeping at most `keep` of its bytes and scanning at most about `budget`
    /// bytes for its end; `None` after the last line.
    async fn next_line(&mut self, keep: usize, budget: u64) -> std::io::Result<Option<Line>> {
        if self.done {
            return Ok(None);
        }
        let mut line = Line { bytes: Vec::new(), len: 0, complete: true };
        loop {
            let window = &self.buf[self.pos..self.end];
            let found = memchr::memchr(b'\n', window);
            let take = found.unwrap_or(window.len());
            let room = keep.saturating_sub(line.bytes.len());
            line.bytes.extend_from_slice(&window[..take.min(room)]);
            line.len += take as u64;
            if let Some(i) = found {
                self.pos += i + 1;
                return Ok(Some(line));
            }
            self.pos = self.end;
            if line.len > budget {
                line.complete = false;
                return Ok(Some(line));
            }
            if !self.fill().await? {
                self.done = true;
                return Ok(Some(line));
            }
        }
    }

    /// How many lines follow, scanning at most about `budget` bytes; when the budget runs out
    /// the count is a lower bound and [`Self::exhausted`] stays false.
    async fn count_rest(&mut self, budget: u64) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        let mut newlines = 0usize;
        let mut scanned = 0u64;
        loop {
            let window = &self.buf[self.pos..self.end];
            newlines += memchr::memchr_iter(b'\n', window).count();
            scanned += window.len() as u64;
            self.pos = self.end;
            if scanned > budget {
                return Ok(newlines);
            }
            if !self.fill().await? {
                self.done = true;
                return Ok(newlines + 1);
            }
        }
    }

    /// Everything left, up to `max` bytes (more means the caller refuses it).
    async fn read_all(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let window = &self.buf[self.pos..self.end];
            let room = (max + 1).saturating_sub(out.len());
            out.extend_from_slice(&window[..window.len().min(room)]);
            self.pos = self.end;
            if out.len() > max || !self.fill().await? {
                return Ok(out);
            }
        }
    }
}

/// The first line (1-based) and the number of lines a call asks for, as the call reads them
/// (an offset of 0 is the first line).
fn lines_asked(args: &Value) -> (Option<usize>, Option<usize>) {
    let number = |key: &str| args::count(args.get(key).and_then(Value::as_f64));
    (number("offset").map(|o| o.max(1)), number("limit"))
}

/// The `read` tool (see [`super::Tool`]).
pub struct Read;

#[async_trait::async_trait]
impl super::Tool for Read {
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::ReadOnly
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Read
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run(arguments, ctx).await
    }

    /// The path, and the lines asked for when the call names them (`src/main.rs:10-40`;
    /// `src/main.rs:10-` from line 10 on).
    fn summary(&self, args: &Value) -> String {
        let path = super::argument_summary(args, "path");
        let (offset, limit) = lines_asked(args);
        match (offset, limit) {
            (None, None) => path,
            (start, Some(limit)) => {
                let start = start.unwrap_or(1);
                format!("{path}:{start}-{}", start + limit.max(1) - 1)
            }
            (Some(start), None) => format!("{path}:{start}-"),
        }
    }

    fn location(&self, args: &Value, cwd: &Path) -> Option<super::Location> {
        let path = resolve_read_path(args.get("path")?.as_str()?, cwd);
        Some(super::Location { path, line: lines_asked(args).0.and_then(|line| u32::try_from(line).ok()) })
    }

    fn reach(&self, args: &Value, cwd: &Path) -> Option<super::Reach> {
        Some(super::Reach::Read(resolve_read_path(args.get("path")?.as_str()?, cwd)))
    }

    fn fact(&self, args: &Value, result: &crate::message::Message) -> Option<super::CallFact> {
        super::tool::path_if_done(args, result).map(super::CallFact::Read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{execute, ToolContext};

    async fn read(dir: &Path, args: Value) -> ToolOutput {
        execute("read", args, &ToolContext::new(dir)).await
    }

    #[tokio::test]
    async fn a_small_file_comes_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let out = read(dir.path(), json!({"path": "a.txt"})).await;
        assert!(!out.is_error);
        assert_eq!(out.joined_text(), "one\ntwo\n");
        assert!(out.details.is_null());
    }

    #[tokio::test]
    async fn offset_and_limit_select_lines_and_say_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = read(dir.path(), json!({"path": "a.txt", "offset": 3, "limit": 2})).await;
        // 10 lines and the empty one after the last newline: 11, as pi counts.
        assert_eq!(
            out.joined_text(),
            "l3\nl4\n\n[7 more lines in file. Use offset=5 to continue.]"
        );
        let out = read(dir.path(), json!({"path": "a.txt", "offset": 10})).await;
        assert_eq!(out.joined_text(), "l10\n");
        let out = read(dir.path(), json!({"path": "a.txt", "offset": 30})).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Offset 30 is beyond end of file (11 lines total)");
    }

    #[tokio::test]
    async fn many_lines_are_cut_at_2000() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = read(dir.path(), json!({"path": "a.txt"})).await;
        let t = out.joined_text();
        assert!(t.starts_with("1\n2\n"));
        assert!(
            t.ends_with("2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"),
            "{}",
            &t[t.len() - 100..]
        );
        assert_eq!(out.details["truncation"]["truncatedBy"], "lines");
        let out = read(dir.path(), json!({"path": "a.txt", "offset": 2001})).await;
        assert!(out.joined_text().starts_with("2001\n"));
        assert!(out.joined_text().ends_with("2500\n"));
    }

    #[tokio::test]
    async fn big_lines_are_cut_at_50_kib() {
        let dir = tempfile::tempdir().unwrap();
        let line = "x".repeat(1000);
        let text: String = (0..100).map(|_| format!("{line}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = read(dir.path(), json!({"path": "a.txt"})).await;
        let t = out.joined_text();
        // 51 lines of 1001 bytes fit in 51200 bytes (the first has no separator before it).
        assert!(
            t.ends_with("[Showing lines 1-51 of 101 (50.0KB limit). Use offset=52 to continue.]"),
            "{}",
            &t[t.len() - 120..]
        );
        assert_eq!(out.details["truncation"]["truncatedBy"], "bytes");
    }

    #[tokio::test]
    async fn a_first_line_over_the_limit_points_to_bash() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.min.js"), "y".repeat(60 * 1024)).unwrap();
        let out = read(dir.path(), json!({"path": "a.min.js"})).await;
        assert_eq!(
            out.joined_text(),
            "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' a.min.js | head -c 51200]"
        );
    }

    #[tokio::test]
    async fn binary_files_and_images() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.bin"), b"ELF\0\0\x01\x02").unwrap();
        let out = read(dir.path(), json!({"path": "a.bin"})).await;
        assert!(out.joined_text().contains("binary file"), "{}", out.joined_text());
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        std::fs::write(dir.path().join("p.png"), &png).unwrap();
        let out = read(dir.path(), json!({"path": "p.png"})).await;
        assert_eq!(out.content.len(), 2);
        assert_eq!(out.content[0].text.as_deref(), Some("Read image file [image/png]"));
        assert_eq!(out.content[1].kind, "image");
        assert_eq!(out.content[1].extra_str("mimeType"), Some("image/png"));
        let data = out.content[1].extra_str("data").unwrap();
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), png);
    }

    #[tokio::test]
    async fn missing_files_and_folders_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = read(dir.path(), json!({"path": "nope.txt"})).await;
        assert!(out.is_error);
        assert!(out.joined_text().contains("Could not read"), "{}", out.joined_text());
        let out = read(dir.path(), json!({"path": "."})).await;
        assert!(out.is_error);
        assert!(out.joined_text().contains("Is a directory"), "{}", out.joined_text());
    }

    #[tokio::test]
    async fn crlf_and_empty_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("e.txt"), "").unwrap();
        assert_eq!(read(dir.path(), json!({"path": "e.txt"})).await.joined_text(), "");
        std::fs::write(dir.path().join("w.txt"), "a\r\nb").unwrap();
        assert_eq!(read(dir.path(), json!({"path": "w.txt"})).await.joined_text(), "a\r\nb");
    }

    #[tokio::test]
    async fn line_reader_reads_only_what_it_needs() {
        let text: Vec<u8> = (0..100_000).flat_map(|i| format!("{i}\n").into_bytes()).collect();
        let mut r = LineReader::new(&text[..]);
        let first = r.next_line(10, u64::MAX).await.unwrap().unwrap();
        assert_eq!(first.bytes, b"0");
        assert!(r.consumed <= CHUNK as u64);
        assert_eq!(r.count_rest(u64::MAX).await.unwrap(), 100_000);
        assert!(r.exhausted());
    }
}
