//! Every change the agent made in a session as hunks with a review state (pending, kept,
//! rejected): the durable half of the review (the editor's half, which finds each hunk in the
//! text as it is now and changes the buffer, is `lua/handoff/review.lua`).
//!
//! Each successful `edit` or `write` call (and each `bash` command, for the files the tool loop
//! read before it) is split into hunks against the file as it was before *that* call (its own
//! baseline), so rejecting a hunk restores that call's lines and never an
//! earlier call's kept work. A call keeps both versions of its file, content-addressed, so the
//! editor can find each hunk in the text of today (a diff of the call's result against it).
//!
//! Kept beside the session file, in its side folder next to the originals:
//! `<side dir>/review/index.json` lists the calls and their hunks, `<side dir>/review/blobs/<sha256>`
//! holds each version's bytes. Files are 0600 in 0700 folders, like the session itself; the
//! index is replaced atomically. pi never reads the side folder, so it still resumes the session.
//!
//! A handoff hands the calls with hunks not reviewed yet to the new session ([`Review::hand_over`]):
//! the new session's index names them (the review folder that owns them and their entries), and
//! every read and decision goes to that owner. So a hunk's state has one home: deciding it in
//! the new session, or after `/back` in the old one, is the same fact. Ids stay unique along a
//! chain: the new session counts on from the old one's next id, and the old one jumps a block
//! ahead ([`ID_BLOCK`]), so what either records later never meets the other's ids.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::changes::Before;
use super::store::file::{create_private_dir, write_private_file, IndexedDir};
use super::SessionError;

/// The review's folder inside a session's side folder.
pub const REVIEW_DIR: &str = "review";
const BLOBS_DIR: &str = "blobs";
const INDEX_VERSION: u32 = 1;
/// How far a session's ids jump when it hands calls over (see the module's doc): room for the
/// new session's own ids before the old one's later ones.
const ID_BLOCK: u64 = 1 << 24;
/// The `customType` of the note that tells the model what the user rejected.
pub const NOTE_CUSTOM_TYPE: &str = "handoff_review";

/// Where a hunk stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HunkState {
    Pending,
    Kept,
    Rejected,
}

impl HunkState {
    pub fn as_str(self) -> &'static str {
        match self {
            HunkState::Pending => "pending",
            HunkState::Kept => "kept",
            HunkState::Rejected => "rejected",
        }
    }
}

/// Lines `start..end` of a version of a file (0-based, end excluded; empty: a point before line
/// `start`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRange {
    pub start: u32,
    pub end: u32,
}

impl LineRange {
    pub fn len(self) -> u32 {
        self.end - self.start
    }

    pub fn is_empty(self) -> bool {
        self.end == self.start
    }
}

/// One changed place of one call: the call's baseline lines `before` became `after`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    /// Unique in the session (a split gives its parts new ids).
    pub id: u64,
    pub before: LineRange,
    pub after: LineRange,
    pub state: HunkState,
    /// Why the user rejected it, when said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Kept after the user changed its lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    /// Its last decision is in a note the model has seen (or needs none).
    #[serde(default = "yes")]
    pub told: bool,
}

fn yes() -> bool {
    true
}

/// One successful `edit`, `write` (or `bash`) call's change to one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewedCall {
    pub call_id: String,
    pub tool: String,
    /// The call's `toolResult` entry.
    pub entry_id: String,
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The blob of the file before the call; `None`: the call created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The blob of the file after the call.
    pub after: String,
    /// When it was recorded (ms since the epoch).
    pub recorded: i64,
    pub hunks: Vec<Hunk>,
    /// The review folder that owns it (its blobs and its states): the session's own, or the
    /// one a handoff inherited it from. Set as it is read, never stored.
    #[serde(skip)]
    pub owner: PathBuf,
}

impl ReviewedCall {
    /// The file holding its content before the call (`None`: the call created it).
    pub fn before_path(&self) -> Option<PathBuf> {
        self.before.as_deref().map(|b| self.owner.join(BLOBS_DIR).join(b))
    }

    /// The file holding its content after the call.
    pub fn after_path(&self) -> PathBuf {
        self.owner.join(BLOBS_DIR).join(&self.after)
    }
}

/// Calls a handoff handed to this session: the review folder that owns them, and their
/// `toolResult` entries there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inherited {
    review: PathBuf,
    entries: Vec<String>,
}

/// Which call changed which file (what [`Review::record`] files the change under).
#[derive(Clone, Copy, Debug)]
pub struct CallOf<'a> {
    pub call_id: &'a str,
    pub tool: &'a str,
    /// The call's `toolResult` entry.
    pub entry_id: &'a str,
    pub path: &'a Path,
}

/// A decision on one hunk, as the editor made it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Decision {
    pub id: u64,
    pub state: HunkState,
    #[serde(default)]
    pub reason: Option<String>,
    /// The user's text differed from the agent's when it was kept.
    #[serde(default)]
    pub edited: bool,
}

/// A hunk cut in parts (a Visual selection inside it): each part's ranges, top to bottom.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Split {
    pub id: u64,
    pub parts: Vec<(LineRange, LineRange)>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    version: u32,
    next_id: u64,
    calls: Vec<ReviewedCall>,
    /// Calls owned by the sessions this one was handed off from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    inherited: Vec<Inherited>,
}

/// One index a session's review reads: its own (every call), or an owner's it inherited from
/// (only the calls of `entries`).
struct Source {
    review: Review,
    index: Index,
    entries: Option<Vec<String>>,
}

/// Whether a source that takes `entries` (`None`: all) shows `call`.
fn shown(entries: &Option<Vec<String>>, call: &ReviewedCall) -> bool {
    entries.as_ref().is_none_or(|e| e.contains(&call.entry_id))
}

/// The review of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    dir: IndexedDir,
}

impl Review {
    /// The review of the session stored in `session_file`.
    pub fn of_session(session_file: &Path) -> Self {
        Self { dir: IndexedDir::of_session(session_file, REVIEW_DIR) }
    }

    pub fn dir(&self) -> &Path {
        self.dir.dir()
    }

    /// Where the blob `name` is.
    pub fn blob_path(&self, name: &str) -> PathBuf {
        self.dir().join(BLOBS_DIR).join(name)
    }

    fn load(&self) -> Result<Index, SessionError> {
        let index: Option<Index> = self.dir.read("review index")?;
        let mut index = index.unwrap_or(Index { version: INDEX_VERSION, next_id: 1, calls: Vec::new(), inherited: Vec::new() });
        for call in &mut index.calls {
            call.owner = self.dir().to_path_buf();
        }
        Ok(index)
    }

    /// The session's own index, then each inherited owner's (an owner that cannot be read is
    /// skipped and logged: its calls are not shown, the session's own still are).
    fn sources(&self) -> Result<Vec<Source>, SessionError> {
        let own = self.load()?;
        let mut out = Vec::new();
        for inherited in &own.inherited {
            let review = Review { dir: IndexedDir::at(inherited.review.clone()) };
            match review.load() {
                Ok(index) => out.push(Source { review, index, entries: Some(inherited.entries.clone()) }),
                Err(e) => tracing::warn!(review = %inherited.review.display(), "cannot read the review a handoff inherited: {e}"),
            }
        }
        out.insert(0, Source { review: self.clone(), index: own, entries: None });
        Ok(out)
    }

    fn save(&self, index: &Index) -> Result<(), SessionError> {
        self.dir.write(index)
    }

    /// Keeps `bytes` as a blob (once per content) and returns its name.
    fn keep_blob(&self, bytes: &[u8]) -> Result<String, SessionError> {
        let name: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
        let path = self.blob_path(&name);
        if !path.exists() {
            create_private_dir(&self.dir().join(BLOBS_DIR))?;
            write_private_file(&path, bytes)?;
        }
        Ok(name)
    }

    /// Every call of the session, those a handoff handed to it first, each part oldest first.
    pub fn calls(&self) -> Result<Vec<ReviewedCall>, SessionError> {
        let mut sources = self.sources()?;
        sources.rotate_left(1);
        Ok(sources
            .into_iter()
            .flat_map(|s| {
                let Source { index, entries, .. } = s;
                index.calls.into_iter().filter(move |c| shown(&entries, c))
            })
            .collect())
    }

    /// Hands the calls with hunks not reviewed yet to the review of a new session (a handoff):
    /// it names them and counts its ids on from this one's, and this one's ids jump a block
    /// ahead. Returns how many hunks in how many files were handed over.
    pub fn hand_over(&self, to: &Review) -> Result<Unreviewed, SessionError> {
        let unreviewed = self.unreviewed()?;
        // Nothing to hand over: neither review is written (a handoff's commit fsyncs each
        // file it writes). The new session shows none of this one's calls, so their ids
        // cannot meet.
        if unreviewed.is_empty() {
            return Ok(Unreviewed::of(&unreviewed));
        }
        let mut inherited: Vec<Inherited> = Vec::new();
        for call in &unreviewed {
            match inherited.iter_mut().find(|i| i.review == call.owner) {
                Some(i) if i.entries.contains(&call.entry_id) => {}
                Some(i) => i.entries.push(call.entry_id.clone()),
                None => inherited.push(Inherited { review: call.owner.clone(), entries: vec![call.entry_id.clone()] }),
            }
        }
        let mut own = self.load()?;
        let start = own.next_id.max(1);
        to.save(&Index { version: INDEX_VERSION, next_id: start, calls: Vec::new(), inherited })?;
        own.version = INDEX_VERSION;
        own.next_id = start.saturating_add(ID_BLOCK);
        self.save(&own)?;
        Ok(Unreviewed::of(&unreviewed))
    }

    /// Records call `call_id` of `tool` (stored as entry `entry_id`) that changed `path` from
    /// `before` to `after`, split in pending hunks. A call that changed nothing is not kept
    /// (`Ok(None)`).
    pub fn record(&self, call: &CallOf<'_>, before: &Before, after: &[u8], now: i64) -> Result<Option<ReviewedCall>, SessionError> {
        let CallOf { call_id, tool, entry_id, path } = *call;
        let old: &[u8] = match before {
            Before::Missing => b"",
            Before::Content(bytes) => bytes,
        };
        let ranges = split_hunks(old, after);
        if ranges.is_empty() && *before != Before::Missing {
            return Ok(None);
        }
        let mut index = self.load()?;
        index.version = INDEX_VERSION;
        index.next_id = index.next_id.max(1);
        // The blobs first: the index never names one that is not there.
        let before_blob = match before {
            Before::Missing => None,
            Before::Content(bytes) => Some(self.keep_blob(bytes)?),
        };
        let after_blob = self.keep_blob(after)?;
        let hunks = ranges
            .into_iter()
            .map(|(b, a)| {
                let id = index.next_id;
                index.next_id += 1;
                Hunk { id, before: b, after: a, state: HunkState::Pending, reason: None, edited: false, told: true }
            })
            .collect();
        let call = ReviewedCall {
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            entry_id: entry_id.to_string(),
            path: path.to_path_buf(),
            before: before_blob,
            after: after_blob,
            recorded: now,
            hunks,
            owner: self.dir().to_path_buf(),
        };
        index.calls.push(call.clone());
        self.save(&index)?;
        Ok(Some(call))
    }

    /// Applies the editor's decisions; returns the ids it did not know.
    pub fn decide(&self, decisions: &[Decision]) -> Result<Vec<u64>, SessionError> {
        let mut sources = self.sources()?;
        let mut changed_sources = vec![false; sources.len()];
        let mut unknown = Vec::new();
        for d in decisions {
            let found = sources.iter_mut().enumerate().find_map(|(at, s)| {
                let Source { index, entries, .. } = s;
                index.calls.iter_mut().filter(|c| shown(entries, c)).flat_map(|c| c.hunks.iter_mut()).find(|h| h.id == d.id).map(|h| (at, h))
            });
            let Some((at, hunk)) = found else {
                unknown.push(d.id);
                continue;
            };
            changed_sources[at] = true;
            let changed = hunk.state != d.state || hunk.edited != d.edited;
            hunk.state = d.state;
            hunk.reason = if d.state == HunkState::Rejected { d.reason.clone().filter(|r| !r.trim().is_empty()) } else { None };
            hunk.edited = d.state == HunkState::Kept && d.edited;
            if changed {
                // A rejection, or a keep of the user's own text, is news for the model; an undo
                // back to pending takes back a note not sent yet.
                hunk.told = !(d.state == HunkState::Rejected || hunk.edited);
            }
        }
        for (source, changed) in sources.iter().zip(changed_sources) {
            if changed {
                source.review.save(&source.index)?;
            }
        }
        Ok(unknown)
    }

    /// Cuts hunk `split.id` in its parts (new ids, the same state); returns the parts' ids, or
    /// `None` when the hunk is not known or the parts do not tile it.
    /// The parts' ids come from this session's count (an inherited hunk's parts too, so ids stay
    /// unique in what this session shows); the owner's count moves past them.
    pub fn split(&self, split: &Split) -> Result<Option<Vec<u64>>, SessionError> {
        let mut sources = self.sources()?;
        let mut next = sources[0].index.next_id.max(1);
        let mut ids = Vec::new();
        let mut found = None;
        'sources: for (source_at, source) in sources.iter_mut().enumerate() {
            let Source { index, entries, .. } = source;
            for call in index.calls.iter_mut().filter(|c| shown(entries, c)) {
                let Some(at) = call.hunks.iter().position(|h| h.id == split.id) else { continue };
                let whole = call.hunks[at].clone();
                if !tiles(&whole, &split.parts) {
                    return Ok(None);
                }
                let parts: Vec<Hunk> = split
                    .parts
                    .iter()
                    .map(|&(before, after)| {
                        let id = next;
                        next += 1;
                        ids.push(id);
                        Hunk { id, before, after, ..whole.clone() }
                    })
                    .collect();
                call.hunks.splice(at..=at, parts);
                found = Some(source_at);
                break 'sources;
            }
        }
        let Some(owner) = found else { return Ok(None) };
        sources[owner].index.next_id = sources[owner].index.next_id.max(next);
        sources[0].index.next_id = next;
        if owner != 0 {
            sources[owner].review.save(&sources[owner].index)?;
        }
        sources[0].review.save(&sources[0].index)?;
        Ok(Some(ids))
    }

    /// The note for the model about decisions it has not been told yet (rejected hunks, hunks
    /// kept with the user's edits), marking them told; `None` when there is nothing new.
    pub fn take_note(&self, cwd: &Path) -> Result<Option<String>, SessionError> {
        let mut sources = self.sources()?;
        let mut lines = Vec::new();
        let mut changed_sources = vec![false; sources.len()];
        for (source_at, source) in sources.iter_mut().enumerate() {
            let Source { index, entries, .. } = source;
            for call in index.calls.iter_mut().filter(|c| shown(entries, c)) {
                let name = call.path.strip_prefix(cwd).unwrap_or(&call.path).display().to_string();
                for hunk in call.hunks.iter_mut().filter(|h| !h.told) {
                    hunk.told = true;
                    changed_sources[source_at] = true;
                    let at = line_span(hunk.after);
                    match hunk.state {
                        HunkState::Rejected => {
                            let reason = hunk.reason.as_deref().map(|r| format!(" (reason: {r})")).unwrap_or_default();
                            lines.push(format!(
                                "- rejected: {name} {at} as your {} call {} wrote them; those lines are back to what they were before that call{reason}",
                                call.tool, call.call_id
                            ));
                        }
                        HunkState::Kept => lines.push(format!("- kept with the user's edits: {name} {at} (from your {} call {})", call.tool, call.call_id)),
                        HunkState::Pending => {}
                    }
                }
            }
        }
        for (source, changed) in sources.iter().zip(changed_sources) {
            if changed {
                source.review.save(&source.index)?;
            }
        }
        if lines.is_empty() {
            return Ok(None);
        }
        Ok(Some(format!(
            "[Written by handoff.nvim, not by the user: what the user decided while reviewing your changes.]\n{}\nRead a file again before editing it: its content is not what you last wrote.",
            lines.join("\n")
        )))
    }

    /// The calls with hunks not reviewed yet (inherited ones too), each with only those hunks.
    pub fn unreviewed(&self) -> Result<Vec<ReviewedCall>, SessionError> {
        Ok(self
            .calls()?
            .into_iter()
            .filter_map(|mut c| {
                c.hunks.retain(|h| h.state == HunkState::Pending);
                (!c.hunks.is_empty()).then_some(c)
            })
            .collect())
    }
}

/// Hunks not reviewed yet, and the files they are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unreviewed {
    pub hunks: usize,
    pub files: usize,
}

impl Unreviewed {
    /// Counts the hunks of `calls` (as [`Review::unreviewed`] gives them) and their files.
    pub fn of(calls: &[ReviewedCall]) -> Unreviewed {
        let files: std::collections::BTreeSet<&Path> = calls.iter().map(|c| c.path.as_path()).collect();
        Unreviewed { hunks: calls.iter().map(|c| c.hunks.len()).sum(), files: files.len() }
    }
}

/// `lines 3-5`, `line 3`, or `after line 2` (a deletion), 1-based.
pub fn line_span(r: LineRange) -> String {
    match r.len() {
        0 => format!("after line {}", r.start),
        1 => format!("line {}", r.start + 1),
        _ => format!("lines {}-{}", r.start + 1, r.end),
    }
}

/// Whether `parts` cover `whole` exactly, in order.
fn tiles(whole: &Hunk, parts: &[(LineRange, LineRange)]) -> bool {
    let (mut b, mut a) = (whole.before.start, whole.after.start);
    for &(pb, pa) in parts {
        if pb.start != b || pa.start != a || pb.end < pb.start || pa.end < pa.start || (pb.is_empty() && pa.is_empty()) {
            return false;
        }
        (b, a) = (pb.end, pa.end);
    }
    !parts.is_empty() && b == whole.before.end && a == whole.after.end
}

/// A file's text as lines, as a buffer shows them: no BOM, no CR of CRLF endings, no final
/// newline (the editor's `changes.lines_of` does the same).
pub fn lines_of(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.is_empty() {
        return Vec::new();
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect()
}

/// The changed places between two versions: `(before, after)` line ranges, top to bottom, each
/// a maximal run of lines that differ.
pub fn split_hunks(before: &[u8], after: &[u8]) -> Vec<(LineRange, LineRange)> {
    let (old, new) = (lines_of(before), lines_of(after));
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &old, &new);
    let mut out: Vec<(LineRange, LineRange)> = Vec::new();
    let mut open: Option<(LineRange, LineRange)> = None;
    for op in ops {
        let (tag, o, n) = op.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            out.extend(open.take());
            continue;
        }
        let (o, n) = (range(o), range(n));
        open = Some(match open {
            Some((b, a)) => (LineRange { start: b.start, end: o.end }, LineRange { start: a.start, end: n.end }),
            None => (o, n),
        });
    }
    out.extend(open);
    out
}

fn range(r: std::ops::Range<usize>) -> LineRange {
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    LineRange { start: clamp(r.start), end: clamp(r.end) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u32, end: u32) -> LineRange {
        LineRange { start, end }
    }

    #[test]
    fn a_change_in_three_places_is_three_hunks_against_that_calls_baseline() {
        let before = b"a\nb\nc\nd\ne\nf\ng\n";
        let after = b"a\nB\nc\nd\nX\nY\ne\nf\n";
        assert_eq!(
            split_hunks(before, after),
            [(r(1, 2), r(1, 2)), (r(4, 4), r(4, 6)), (r(6, 7), r(8, 8))]
        );
        assert_eq!(split_hunks(b"x\r\ny\r\n", b"x\ny\n"), []);
        assert_eq!(split_hunks(b"", b"new\n"), [(r(0, 0), r(0, 1))]);
    }

    #[test]
    fn decisions_splits_and_the_note() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("w");
        let review = Review::of_session(&dir.path().join("s.jsonl"));
        let file = cwd.join("a.txt");
        let call = review
            .record(&CallOf { call_id: "call_1", tool: "write", entry_id: "e1", path: &file }, &Before::Content(b"1\n2\n3\n4\n5\n".to_vec()), b"1\nTWO\n3\n4\nFIVE\nSIX\n", 7)
            .unwrap()
            .unwrap();
        assert_eq!(call.hunks.iter().map(|h| h.id).collect::<Vec<_>>(), [1, 2]);
        // Nothing changed: nothing kept.
        assert_eq!(review.record(&CallOf { call_id: "call_2", tool: "edit", entry_id: "e2", path: &file }, &Before::Content(b"x\n".to_vec()), b"x\n", 8).unwrap(), None);
        assert_eq!(review.take_note(&cwd).unwrap(), None);
        // Parts that do not tile the hunk are refused.
        assert_eq!(review.split(&Split { id: 2, parts: vec![(r(4, 5), r(4, 5))] }).unwrap(), None);
        let ids = review.split(&Split { id: 2, parts: vec![(r(4, 5), r(4, 5)), (r(5, 5), r(5, 6))] }).unwrap().unwrap();
        assert_eq!(ids, [3, 4]);
        review
            .decide(&[
                Decision { id: 1, state: HunkState::Rejected, reason: Some("keep it lower case".into()), edited: false },
                Decision { id: 3, state: HunkState::Kept, reason: None, edited: true },
                Decision { id: 4, state: HunkState::Kept, reason: None, edited: false },
            ])
            .unwrap();
        let note = review.take_note(&cwd).unwrap().unwrap();
        assert!(note.starts_with("[Written by handoff.nvim, not by the user"), "{note}");
        assert!(note.contains("- rejected: a.txt line 2 as your write call call_1 wrote them"), "{note}");
        assert!(note.contains("(reason: keep it lower case)"), "{note}");
        assert!(note.contains("- kept with the user's edits: a.txt line 5"), "{note}");
        assert!(!note.contains("line 6"), "a plain keep is not news: {note}");
        assert_eq!(review.take_note(&cwd).unwrap(), None, "told once");
        assert_eq!(review.unreviewed().unwrap().len(), 0);
        assert_eq!(review.decide(&[Decision { id: 99, state: HunkState::Kept, reason: None, edited: false }]).unwrap(), [99]);
        let blob = review.blob_path(&review.calls().unwrap()[0].after);
        assert_eq!(std::fs::read(blob).unwrap(), b"1\nTWO\n3\n4\nFIVE\nSIX\n");
    }

    #[test]
    fn a_handoff_hands_the_pending_calls_over_and_their_states_stay_with_their_owner() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("w");
        let (a, b, c) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"), dir.path().join("c.jsonl"));
        let parent = Review::of_session(&a);
        let file = cwd.join("f.txt");
        let of = |call_id, entry_id| CallOf { call_id, tool: "write", entry_id, path: &file };
        parent.record(&of("c1", "e1"), &Before::Content(b"1\n2\n3\n".to_vec()), b"ONE\n2\nTHREE\n", 1).unwrap();
        parent.record(&of("c2", "e2"), &Before::Content(b"x\n".to_vec()), b"y\n", 2).unwrap();
        parent.decide(&[Decision { id: 3, state: HunkState::Kept, reason: None, edited: false }]).unwrap();
        let child = Review::of_session(&b);
        assert_eq!(parent.hand_over(&child).unwrap(), Unreviewed { hunks: 2, files: 1 });
        assert_eq!(child.calls().unwrap().len(), 1, "only the call with pending hunks");
        assert_eq!(child.unreviewed().unwrap()[0].after_path(), parent.blob_path(&parent.calls().unwrap()[0].after));
        // A split in the child counts on from the parent's ids; its own calls too.
        let ids = child.split(&Split { id: 2, parts: vec![(r(2, 3), r(2, 3))] }).unwrap().unwrap();
        assert_eq!(ids, [4]);
        let own = child.record(&of("c3", "e3"), &Before::Content(b"p\n".to_vec()), b"q\n", 3).unwrap().unwrap();
        assert_eq!(own.hunks[0].id, 5);
        // The parent's later ids never meet the child's.
        let later = parent.record(&of("c4", "e4"), &Before::Content(b"p\n".to_vec()), b"r\n", 4).unwrap().unwrap();
        assert!(later.hunks[0].id > ID_BLOCK, "{later:?}");
        // A decision in the child is the parent's state; the note is the child's to tell.
        child.decide(&[Decision { id: 4, state: HunkState::Rejected, reason: None, edited: false }]).unwrap();
        let state = |r: &Review, id| r.calls().unwrap().iter().flat_map(|c| c.hunks.clone()).find(|h| h.id == id).unwrap().state;
        assert_eq!(state(&parent, 4), HunkState::Rejected);
        assert!(child.take_note(&cwd).unwrap().unwrap().contains("f.txt line 3"));
        assert_eq!(parent.take_note(&cwd).unwrap(), None, "told once, wherever");
        // A second handoff: the grandchild sees the parent's pending hunk and the child's own.
        let grandchild = Review::of_session(&c);
        assert_eq!(child.hand_over(&grandchild).unwrap(), Unreviewed { hunks: 2, files: 1 });
        let mut seen: Vec<u64> = grandchild.unreviewed().unwrap().iter().flat_map(|c| c.hunks.iter().map(|h| h.id)).collect();
        seen.sort_unstable();
        assert_eq!(seen, [1, 5]);
    }

    #[test]
    fn a_handoff_with_nothing_to_review_writes_no_review() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        let (parent, child) = (Review::of_session(&a), Review::of_session(&b));
        assert_eq!(parent.hand_over(&child).unwrap(), Unreviewed { hunks: 0, files: 0 });
        assert!(!parent.dir().exists() && !child.dir().exists(), "a handoff's commit writes (and fsyncs) no empty review");
        // Everything reviewed: the same.
        let file = dir.path().join("f.txt");
        parent.record(&CallOf { call_id: "c1", tool: "write", entry_id: "e1", path: &file }, &Before::Missing, b"x\n", 1).unwrap();
        parent.decide(&[Decision { id: 1, state: HunkState::Kept, reason: None, edited: false }]).unwrap();
        assert_eq!(parent.hand_over(&child).unwrap(), Unreviewed { hunks: 0, files: 0 });
        assert!(!child.dir().exists());
    }
}
