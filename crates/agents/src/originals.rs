//! The originals of what an external agent changes, kept as our own tools' are
//! (`handoff_core::session::Originals`, shown by `:HandoffChanges`). Our tools read a file
//! before they change it; an agent writes with its own IO (codex-acp's `apply_patch`) or through
//! our `fs/write_text_file`, so a file's content is taken when we first hear of the change — the
//! agent's permission request or its call's start (both name the files in `locations`), or its
//! write through us — and recorded once the call has ended having changed the file.
//!
//! A call the agent runs without asking may have written before its start reaches us: then the
//! content taken is already the new one, the file is seen unchanged, and nothing is recorded.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use handoff_core::agent::MAX_WATCHED_BYTES;
use handoff_core::message::now_millis;
use handoff_core::session::review::{CallOf, Review, ReviewedCall};
use handoff_core::session::{Before, Originals};
use handoff_core::sync::lock;
use handoff_core::tools::Activity;

/// The files an agent's calls are about to change, each with its content before.
#[derive(Debug, Default)]
pub struct EditOriginals {
    taken: Mutex<Vec<Taken>>,
}

#[derive(Debug)]
struct Taken {
    /// The call whose `locations` named it; `None`: written through our `fs/write_text_file`.
    call: Option<String>,
    path: PathBuf,
    before: Before,
}

/// What `path` holds on disk now (`Missing` when it does not exist), or `None` when it cannot
/// be read or is larger than our commands' watch reads.
fn on_disk(path: &Path) -> Option<Before> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Before::Missing),
        Err(_) => None,
        Ok(meta) if !meta.is_file() || meta.len() > MAX_WATCHED_BYTES => None,
        Ok(_) => std::fs::read(path).ok().map(Before::Content),
    }
}

impl EditOriginals {
    /// Keeps `before` as `path`'s content before a change by `call`, unless the file is
    /// taken already (by this call, or by a write through us not recorded yet).
    pub fn take(&self, call: Option<&str>, path: &Path, before: Before) {
        let mut taken = lock(&self.taken);
        if taken.iter().any(|t| t.path == path && (t.call.is_none() || t.call.as_deref() == call)) {
            return;
        }
        taken.push(Taken { call: call.map(str::to_string), path: path.to_path_buf(), before });
    }

    /// An ACP tool call (or its update, or the call of a permission request) that edits (kind
    /// `edit`, `delete`, `move`) and has not ended: the files of its `locations` in `project`
    /// are taken from the disk, where the agent will change them. A file outside it is never
    /// read: what an agent names there (a token in the user's home) must not land beside the
    /// session, which handoffs carry on.
    pub fn take_call(&self, call: &Value, project: &Path) {
        use handoff_core::sandbox::paths::real_path;
        let activity = super::record::our_tool(call["kind"].as_str().unwrap_or_default(), &Value::Null).activity;
        let editing = matches!(activity, Activity::Edit | Activity::Delete | Activity::Move);
        let project = real_path(project);
        let ended = matches!(call["status"].as_str(), Some("completed" | "failed"));
        let Some(id) = call["toolCallId"].as_str().filter(|_| editing && !ended) else { return };
        for location in call["locations"].as_array().into_iter().flatten() {
            let Some(path) = location["path"].as_str().map(Path::new).filter(|p| p.is_absolute()) else { continue };
            if !real_path(path).starts_with(&project) {
                continue;
            }
            if let Some(before) = on_disk(path) {
                self.take(Some(id), path, before);
            }
        }
    }

    /// Call `call` (our tool `tool` for it) ended, its result recorded as entry `entry_id`.
    /// When it succeeded, each file it was about to change, and each the agent wrote through
    /// us, that differs now from what was taken is recorded in `originals` and split into
    /// pending hunks in `review`, as our own tools' changes are (a failure is logged: the
    /// change is done). Returns the calls recorded for review. The call's files are forgotten
    /// either way.
    pub fn ended(&self, call: &str, tool: &str, succeeded: bool, originals: &Originals, review: &Review, entry_id: &str) -> Vec<ReviewedCall> {
        let ours: Vec<Taken> = {
            let mut taken = lock(&self.taken);
            let (ours, rest) = std::mem::take(&mut *taken)
                .into_iter()
                .partition(|t| t.call.as_deref() == Some(call) || (succeeded && t.call.is_none()));
            *taken = rest;
            ours
        };
        let mut reviewed = Vec::new();
        if !succeeded {
            return reviewed;
        }
        let mut seen = std::collections::HashSet::new();
        for t in ours {
            // A file taken twice (asked about, then written through us) is one change, as it
            // was first.
            let now = on_disk(&t.path);
            if !seen.insert(t.path.clone()) || now.as_ref().is_some_and(|now| *now == t.before) {
                continue;
            }
            if let Err(e) = originals.record(&t.path, &t.before, entry_id, now_millis()) {
                tracing::error!(path = %t.path.display(), "cannot keep the original of the agent's change: {e}");
            }
            // A file it removed has no lines to review: it is in the changes only.
            let Some(Before::Content(after)) = now else { continue };
            let of = CallOf { call_id: call, tool, entry_id, path: &t.path };
            match review.record(&of, &t.before, &after, now_millis()) {
                Ok(Some(recorded)) => reviewed.push(recorded),
                Ok(None) => {}
                Err(e) => tracing::error!(path = %t.path.display(), "cannot record the agent's change for review: {e}"),
            }
        }
        reviewed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_file_is_recorded_when_its_call_succeeded_having_changed_it() {
        let dir = tempfile::tempdir().unwrap();
        let originals = Originals::of_session(&dir.path().join("s.jsonl"));
        let review = Review::of_session(&dir.path().join("s.jsonl"));
        let (changed, same, refused) = (dir.path().join("a.txt"), dir.path().join("b.txt"), dir.path().join("c.txt"));
        for f in [&changed, &same, &refused] {
            std::fs::write(f, "before\n").unwrap();
        }
        let edits = EditOriginals::default();
        let call = |id: &str, paths: &[&PathBuf], status: &str| {
            json!({ "toolCallId": id, "kind": "edit", "status": status,
                    "locations": paths.iter().map(|p| json!({ "path": p })).collect::<Vec<_>>() })
        };
        edits.take_call(&call("c1", &[&changed, &same], "pending"), dir.path());
        edits.take_call(&call("c2", &[&refused], "pending"), dir.path());
        // A read, or a call that ended, takes nothing.
        edits.take_call(&json!({ "toolCallId": "r", "kind": "read", "status": "pending", "locations": [{ "path": changed }] }), dir.path());
        std::fs::write(&changed, "after\n").unwrap();
        edits.take_call(&call("c1", &[&changed], "in_progress"), dir.path());
        // Through us: a new file.
        let created = dir.path().join("new.txt");
        edits.take(None, &created, Before::Missing);
        std::fs::write(&created, "new\n").unwrap();
        // Asked about, then written through us: one change, against its content when asked.
        edits.take(None, &changed, Before::Content(b"between\n".to_vec()));
        std::fs::write(&refused, "changed by the user\n").unwrap();

        edits.ended("c2", "edit", false, &originals, &review, "e2");
        assert!(originals.list().unwrap().is_empty(), "a failed call records nothing");
        let reviewed = edits.ended("c1", "edit", true, &originals, &review, "e1");
        let files: Vec<(PathBuf, bool)> = originals.list().unwrap().into_iter().map(|f| (f.path, f.created)).collect();
        assert_eq!(files, [(created.clone(), true), (changed.clone(), false)]);
        let kept = originals.list().unwrap().into_iter().find(|f| f.path == changed).unwrap();
        assert_eq!(originals.original_bytes(&kept).unwrap(), b"before\n", "taken at its first mention");
        assert_eq!(kept.changes, 1);
        assert!(lock(&edits.taken).is_empty(), "{:?}", edits.taken);
        // Each file changed is pending hunks of its call, against its content when taken.
        let mut paths: Vec<&PathBuf> = reviewed.iter().map(|c| &c.path).collect();
        paths.sort();
        let mut want = vec![&changed, &created];
        want.sort();
        assert_eq!(paths, want);
        assert!(reviewed.iter().all(|c| c.call_id == "c1" && c.tool == "edit" && !c.hunks.is_empty()), "{reviewed:?}");
        assert_eq!(review.unreviewed().unwrap().len(), 2);
    }

    /// An injected agent names a file outside the project in its edit's `locations` (a name no
    /// list of ours holds) and changes it with its own IO: its content never reaches the
    /// session's originals or review (beside the session file, carried by handoffs).
    #[test]
    fn a_file_outside_the_project_named_by_a_call_is_never_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (project, home) = (dir.path().join("project"), dir.path().join("home"));
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::create_dir_all(home.join(".config/acme")).unwrap();
        let (secret, inside) = (home.join(".config/acme/session-token"), project.join("src/a.txt"));
        std::fs::write(&secret, "tok-4921\n").unwrap();
        std::fs::write(&inside, "a\n").unwrap();
        let session = project.join("s.jsonl");
        let (originals, review) = (Originals::of_session(&session), Review::of_session(&session));
        let edits = EditOriginals::default();
        let call = json!({ "toolCallId": "c1", "kind": "edit", "status": "pending",
                           "locations": [{ "path": secret }, { "path": project.join("src/../../home/.config/acme/session-token") }, { "path": inside }] });
        edits.take_call(&call, &project);
        std::fs::write(&secret, "tok-5000\n").unwrap();
        std::fs::write(&inside, "b\n").unwrap();
        let reviewed = edits.ended("c1", "edit", true, &originals, &review, "e1");
        let kept: Vec<PathBuf> = originals.list().unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(kept, std::slice::from_ref(&inside), "only the project's file");
        assert_eq!(reviewed.iter().map(|c| &c.path).collect::<Vec<_>>(), [&inside]);
    }
}
