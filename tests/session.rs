//! The session store (issue 2, "Session store"): pi's format version 3 read and written, the
//! three real pi/omp files in `tests/fixtures/pi-sessions` round-tripped, damaged files loaded
//! with warnings or refused with clear errors, the entry tree, context building, migration of
//! older versions in memory only, pi's file naming and permissions, and `list_sessions`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;

use common::{copy_fixture, lines, new_session, CWD};
use handoff_nvim::core::message::{Message, Role};
use handoff_nvim::core::session::{SessionError, SessionManager};
use serde_json::{json, Value};

const PIMONO: &str = "pimono-0.73.1-print-session.jsonl";
const PIMONO_PARENT: &str = "pimono-0.73.1-rpc-new-session-with-parent.jsonl";
const OMP: &str = "omp-18.2.3-print-session.jsonl";
const FIXTURES: [&str; 3] = [PIMONO, PIMONO_PARENT, OMP];

fn open(path: &Path, dir: &Path) -> SessionManager {
    SessionManager::open(path, &dir.join("sessions")).unwrap()
}

fn texts(messages: &[Message]) -> Vec<(Role, String)> {
    messages.iter().map(|m| (m.role.clone(), m.text())).collect()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new().append(true).open(path).unwrap().write_all(bytes).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Reading: accept the three files in tests/fixtures/pi-sessions/

#[test]
fn reading_accepts_every_pi_fixture_and_every_line_round_trips_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    for name in FIXTURES {
        let path = copy_fixture(name, dir.path());
        let session = open(&path, dir.path());
        assert!(session.warnings().is_empty(), "{name}: {:?}", session.warnings());
        let original = lines(&path);
        let header_at = original.iter().position(|v| v["type"] == "session").unwrap();
        // The header and every entry serialize back to exactly what pi wrote.
        assert_eq!(serde_json::to_value(session.header()).unwrap(), original[header_at], "{name}");
        let entries: Vec<Value> =
            session.get_entries().iter().map(|e| serde_json::to_value(e).unwrap()).collect();
        assert_eq!(entries, original[header_at + 1..].to_vec(), "{name}");
        // The messages inside the entries survive the typed view too (unknown fields included).
        for (entry, raw) in session.get_entries().iter().zip(&original[header_at + 1..]) {
            if let Some(m) = entry.message() {
                assert_eq!(serde_json::to_value(&m).unwrap(), raw["message"], "{name}");
            }
        }
        // The leaf is the last entry; the context is the user prompt and the reply.
        assert_eq!(session.leaf_id(), original.last().unwrap()["id"].as_str());
        let ctx = session.build_session_context();
        assert_eq!(ctx.messages.len(), 2, "{name}");
        assert_eq!(ctx.messages[0].role, Role::User);
        assert_eq!(ctx.messages[1].role, Role::Assistant);
        assert_eq!(ctx.model, Some(("mock".into(), "mock-model".into())), "{name}");
    }
}

#[test]
fn reading_pimono_print_session_gives_its_model_thinking_level_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let session = open(&copy_fixture(PIMONO, dir.path()), dir.path());
    assert_eq!(session.header().version, 3);
    assert_eq!(session.header().id, "01a228b5-e851-7653-bc71-048dfd6d0d93");
    assert_eq!(session.header().cwd, CWD);
    assert_eq!(session.cwd(), Path::new(CWD));
    assert_eq!(session.header().parent_session, None);
    let kinds: Vec<&str> = session.get_entries().iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change", "message", "message"]);
    let ctx = session.build_session_context();
    assert_eq!(ctx.thinking_level.as_deref(), Some("off"));
    assert_eq!(
        texts(&ctx.messages),
        [(Role::User, "Say hello".to_string()), (Role::Assistant, "Hello from the mock server.".to_string())]
    );
}

#[test]
fn reading_a_header_with_parent_session_keeps_the_parent_path() {
    let dir = tempfile::tempdir().unwrap();
    let session = open(&copy_fixture(PIMONO_PARENT, dir.path()), dir.path());
    assert_eq!(
        session.header().parent_session.as_deref(),
        Some("/home/dev/.pi/agent/sessions/--home-dev-project--/2026-11-29T19-09-19-407Z_01a228b6-34ae-70d6-be02-728aff4799e7.jsonl")
    );
}

#[test]
fn reading_omp_finds_the_header_after_the_title_line_and_keeps_the_title() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(OMP, dir.path());
    let session = open(&path, dir.path());
    assert_eq!(session.header().id, "01a228b7-6965-7311-8538-2822efaacbf2");
    assert_eq!(session.preamble().len(), 1);
    assert_eq!(session.preamble()[0], lines(&path)[0]);
    assert_eq!(session.preamble()[0]["type"], "title");
    // omp spells the model `provider/id` and may leave the thinking level null.
    let ctx = session.build_session_context();
    assert_eq!(ctx.model, Some(("mock".into(), "mock-model".into())));
    assert_eq!(ctx.thinking_level, None);
    // Its `custom` session_exit entry is kept but is no model input.
    let last = session.get_entries().last().unwrap();
    assert_eq!(last.kind, "custom");
    assert_eq!(last.fields()["data"]["reason"], "dispose");
    assert_eq!(texts(&ctx.messages)[1], (Role::Assistant, "Hello from the mock server.".to_string()));
}

// ---------------------------------------------------------------------------------------------
// Writes are append-only: a user's file is never rewritten

#[test]
fn appending_to_a_loaded_pi_file_keeps_earlier_lines_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    for name in FIXTURES {
        let path = copy_fixture(name, dir.path());
        let before = std::fs::read(&path).unwrap();
        let mut session = open(&path, dir.path());
        let leaf = session.leaf_id().unwrap().to_string();
        let id = session.append_message(&Message::user("one more")).unwrap();
        session.flush().unwrap();
        let after = std::fs::read(&path).unwrap();
        assert!(after.starts_with(&before), "{name}: earlier bytes changed");
        let added = std::str::from_utf8(&after[before.len()..]).unwrap();
        assert_eq!(added.matches('\n').count(), 1, "{name}: one complete line: {added:?}");
        assert!(added.ends_with('\n'));
        let entry: Value = serde_json::from_str(added).unwrap();
        assert_eq!(entry["id"], id.as_str());
        assert_eq!(entry["parentId"], leaf.as_str());
        // The appended file reads back whole, with the new entry as the leaf.
        let again = open(&path, dir.path());
        assert!(again.warnings().is_empty());
        assert_eq!(again.leaf_id(), Some(id.as_str()));
        assert_eq!(again.build_session_context().messages.last().unwrap().text(), "one more");
        if name == OMP {
            assert_eq!(again.preamble()[0]["type"], "title");
        }
    }
}

#[test]
fn new_entries_have_8_hex_char_ids_and_iso_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = new_session(dir.path());
    for _ in 0..20 {
        session.append_message(&Message::user("x")).unwrap();
    }
    for e in session.get_entries() {
        assert_eq!(e.id.len(), 8, "{}", e.id);
        assert!(e.id.chars().all(|c| c.is_ascii_hexdigit()), "{}", e.id);
        assert!(time::OffsetDateTime::parse(&e.timestamp, &time::format_description::well_known::Rfc3339).is_ok());
        assert!(e.timestamp.ends_with('Z'));
    }
    let uuid = uuid::Uuid::parse_str(session.session_id()).unwrap();
    assert_eq!(uuid.get_version_num(), 7);
}

// ---------------------------------------------------------------------------------------------
// Crash safety: "a torn last line loads with a warning and everything before it intact"

#[test]
fn torn_last_line_loads_with_a_warning_and_everything_before_it_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(PIMONO, dir.path());
    let intact = open(&path, dir.path());
    let torn = br#"{"type":"message","id":"deadbeef","parentId":"59c14318","timestamp":"2026-11-29T19:09:00.000Z","message":{"role":"user","content":[{"type":"te"#;
    append_raw(&path, torn);
    let session = open(&path, dir.path());
    assert_eq!(session.warnings().len(), 1, "{:?}", session.warnings());
    assert!(session.warnings()[0].contains("incomplete"), "{}", session.warnings()[0]);
    assert!(session.warnings()[0].contains(&path.display().to_string()));
    assert_eq!(session.get_entries(), intact.get_entries());
    assert_eq!(session.leaf_id(), Some("59c14318"));
    assert_eq!(session.build_session_context(), intact.build_session_context());
}

#[test]
fn torn_last_line_a_later_append_starts_on_a_new_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture(PIMONO, dir.path());
    append_raw(&path, br#"{"type":"message","id":"deadbeef","parentI"#);
    let before = std::fs::read(&path).unwrap();
    let mut session = open(&path, dir.path());
    let id = session.append_message(&Message::user("after the crash")).unwrap();
    session.flush().unwrap();
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    let rest = std::str::from_utf8(&after[before.len()..]).unwrap();
    assert!(rest.starts_with('\n'), "the new entry must not be glued to the torn line: {rest:?}");
    let again = open(&path, dir.path());
    // The torn line is now a damaged middle line: skipped, named, and nothing else lost.
    assert_eq!(again.warnings().len(), 1, "{:?}", again.warnings());
    assert_eq!(again.get_entries().len(), 5);
    assert_eq!(again.leaf_id(), Some(id.as_str()));
    assert_eq!(again.get_entry(&id).unwrap().parent_id.as_deref(), Some("59c14318"));
    let ctx = again.build_session_context();
    assert_eq!(ctx.messages.len(), 3);
    assert_eq!(ctx.messages[2].text(), "after the crash");
}

#[test]
fn garbage_middle_line_is_skipped_with_a_warning_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = copy_fixture(PIMONO, dir.path());
    let text = std::fs::read_to_string(&src).unwrap();
    let mut l: Vec<&str> = text.lines().collect();
    l.insert(3, "this is not json at all");
    let path = dir.path().join("garbage.jsonl");
    std::fs::write(&path, l.join("\n") + "\n").unwrap();
    let session = open(&path, dir.path());
    assert_eq!(session.warnings().len(), 1, "{:?}", session.warnings());
    assert!(session.warnings()[0].contains("line 4"), "{}", session.warnings()[0]);
    assert!(session.warnings()[0].contains("garbage.jsonl"));
    assert_eq!(session.get_entries().len(), 4);
    assert_eq!(session.build_session_context().messages.len(), 2);
}

#[test]
fn invalid_utf8_line_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let src = copy_fixture(PIMONO, dir.path());
    let text = std::fs::read(&src).unwrap();
    let first_nl = text.iter().position(|b| *b == b'\n').unwrap();
    let mut bytes = text[..=first_nl].to_vec();
    bytes.extend_from_slice(b"{\"type\":\"message\",\"id\":\"\xff\xfe\"}\n");
    bytes.extend_from_slice(&text[first_nl + 1..]);
    let path = dir.path().join("utf8.jsonl");
    std::fs::write(&path, bytes).unwrap();
    let session = open(&path, dir.path());
    assert_eq!(session.warnings().len(), 1, "{:?}", session.warnings());
    assert!(session.warnings()[0].contains("line 2"), "{}", session.warnings()[0]);
    assert_eq!(session.get_entries().len(), 4);
    assert_eq!(session.build_session_context().messages.len(), 2);
}

#[test]
fn empty_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [("empty.jsonl", ""), ("blank.jsonl", "\n \n")] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let err = SessionManager::open(&path, dir.path()).unwrap_err();
        assert!(matches!(err, SessionError::Empty { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(name) && msg.contains("not a session file"), "{msg}");
    }
}

#[test]
fn file_without_header_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noheader.jsonl");
    let text = std::fs::read_to_string(copy_fixture(PIMONO, dir.path())).unwrap();
    std::fs::write(&path, text.lines().skip(1).collect::<Vec<_>>().join("\n")).unwrap();
    let err = SessionManager::open(&path, dir.path()).unwrap_err();
    assert!(matches!(err, SessionError::NoHeader { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("noheader.jsonl") && msg.contains("no session header"), "{msg}");
}

#[test]
fn directory_as_session_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("looks-like.jsonl");
    std::fs::create_dir(&folder).unwrap();
    let err = SessionManager::open(&folder, dir.path()).unwrap_err();
    assert!(matches!(err, SessionError::NotAFile { .. }), "{err:?}");
    assert!(err.to_string().contains("is not a regular file (a directory"), "{err}");
}

#[test]
fn a_pipe_or_device_as_session_file_is_a_clear_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let err = SessionManager::open(Path::new("/dev/zero"), dir.path()).unwrap_err();
    assert!(matches!(err, SessionError::NotAFile { .. }), "{err:?}");
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = SessionManager::open(&dir.path().join("nope.jsonl"), dir.path()).unwrap_err();
    assert!(matches!(err, SessionError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// "keep unknown entry types and fields intact"

#[test]
fn unknown_entry_types_and_fields_are_preserved() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unknown.jsonl");
    let original = [
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-11-29T19:08:59.865Z","cwd":"/p","futureHeaderField":{"a":1}}"#,
        r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-11-29T19:09:00.000Z","message":{"role":"user","content":[{"type":"text","text":"hi","cacheControl":"x"}],"timestamp":1,"attribution":"user"},"zeta":[1,2,3]}"#,
        r#"{"type":"hologram","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2026-11-29T19:09:01.000Z","payload":{"deep":[{"x":null}]}}"#,
        r#"{"type":"label","id":"cccccccc","parentId":"bbbbbbbb","timestamp":"2026-11-29T19:09:02.000Z","targetId":"aaaaaaaa","label":"start"}"#,
        r#"{"type":"session_info","id":"dddddddd","parentId":"cccccccc","timestamp":"2026-11-29T19:09:03.000Z","name":"my session"}"#,
    ];
    std::fs::write(&path, original.join("\n") + "\n").unwrap();
    let mut session = open(&path, dir.path());
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    assert_eq!(session.header().extra["futureHeaderField"], json!({"a": 1}));
    for (entry, raw) in session.get_entries().iter().zip(&original[1..]) {
        assert_eq!(serde_json::to_string(entry).unwrap(), *raw);
    }
    // Unknown types sit in the tree like any entry; the user message still reaches the model.
    assert_eq!(session.get_branch(None).len(), 4);
    let ctx = session.build_session_context();
    assert_eq!(texts(&ctx.messages), [(Role::User, "hi".to_string())]);
    // An unknown content block field stays on the message handed to providers.
    assert_eq!(serde_json::to_value(&ctx.messages[0]).unwrap()["content"][0]["cacheControl"], "x");
    session.append_message(&Message::user("next")).unwrap();
    session.flush().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(&(original.join("\n") + "\n")));
}

// ---------------------------------------------------------------------------------------------
// Tree and branch operations

#[test]
fn tree_get_branch_from_a_mid_entry_walks_to_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    let u1 = s.append_message(&Message::user("u1")).unwrap();
    let a1 = s.append_message(&common::assistant("a1")).unwrap();
    let u2 = s.append_message(&Message::user("u2")).unwrap();
    let a2 = s.append_message(&common::assistant("a2")).unwrap();
    let ids = |v: Vec<&handoff_nvim::core::session::SessionEntry>| v.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(s.get_branch(None)), [u1.clone(), a1.clone(), u2.clone(), a2.clone()]);
    assert_eq!(ids(s.get_branch(Some(&a1))), [u1.clone(), a1.clone()]);
    assert_eq!(ids(s.get_branch(Some(&u1))), std::slice::from_ref(&u1));
    assert!(s.get_branch(Some("00000000")).is_empty());
    assert_eq!(s.get_entry(&u1).unwrap().parent_id, None);
    assert_eq!(s.get_entry(&u2).unwrap().parent_id.as_deref(), Some(a1.as_str()));
}

#[test]
fn tree_branch_moves_the_leaf_and_new_children_grow_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    let u1 = s.append_message(&Message::user("u1")).unwrap();
    let a1 = s.append_message(&common::assistant("a1")).unwrap();
    let _u2 = s.append_message(&Message::user("u2")).unwrap();
    let a2 = s.append_message(&common::assistant("a2")).unwrap();
    assert_eq!(s.leaf_id(), Some(a2.as_str()));
    s.branch(&a1).unwrap();
    assert_eq!(s.leaf_id(), Some(a1.as_str()));
    let u3 = s.append_message(&Message::user("u3")).unwrap();
    assert_eq!(s.get_entry(&u3).unwrap().parent_id.as_deref(), Some(a1.as_str()));
    assert_eq!(s.leaf_id(), Some(u3.as_str()));
    let ctx = texts(&s.build_session_context().messages);
    assert_eq!(ctx.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(), ["u1", "a1", "u3"]);
    // The old branch is still there, entries are never removed.
    assert_eq!(s.get_entries().len(), 5);
    assert_eq!(s.get_branch(Some(&a2)).len(), 4);
    // Only the current branch counts (the handoff guard's rule).
    assert_eq!(s.count_branch_messages(), 3);
    // On reload, the leaf is the last entry written.
    s.flush().unwrap();
    let again = SessionManager::open(s.path(), s.session_dir()).unwrap();
    assert_eq!(again.leaf_id(), Some(u3.as_str()));
    assert_eq!(again.get_branch(None).first().unwrap().id, u1);
    // An unknown id is refused and leaves the leaf alone.
    let err = s.branch("ffffffff").unwrap_err();
    assert!(matches!(err, SessionError::UnknownEntry(_)), "{err:?}");
    assert_eq!(s.leaf_id(), Some(u3.as_str()));
}

// ---------------------------------------------------------------------------------------------
// build_session_context

#[test]
fn context_with_compaction_is_summary_first_then_kept_entries_then_later_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    s.append_message(&Message::user("u1")).unwrap();
    s.append_message(&common::assistant("a1")).unwrap();
    let u2 = s.append_message(&Message::user("u2")).unwrap();
    s.append_message(&common::assistant("a2")).unwrap();
    s.append_compaction("SUMMARY OF u1 a1", &u2, 1234).unwrap();
    s.append_message(&Message::user("u3")).unwrap();
    s.append_message(&common::assistant("a3")).unwrap();
    let ctx = s.build_session_context();
    let t = texts(&ctx.messages);
    assert_eq!(t.len(), 5, "{t:?}");
    assert_eq!(t[0].0, Role::User);
    assert!(t[0].1.contains("<summary>\nSUMMARY OF u1 a1\n</summary>"), "{}", t[0].1);
    assert!(!t[0].1.contains("u1\n"));
    assert_eq!(
        t[1..].iter().map(|(_, x)| x.as_str()).collect::<Vec<_>>(),
        ["u2", "a2", "u3", "a3"]
    );
    // The same holds after a reload from disk.
    s.flush().unwrap();
    let again = SessionManager::open(s.path(), s.session_dir()).unwrap();
    assert_eq!(again.build_session_context(), ctx);
}

#[test]
fn context_uses_the_latest_compaction_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    let u1 = s.append_message(&Message::user("u1")).unwrap();
    s.append_compaction("FIRST", &u1, 1).unwrap();
    let u2 = s.append_message(&Message::user("u2")).unwrap();
    s.append_compaction("SECOND", &u2, 1).unwrap();
    s.append_message(&Message::user("u3")).unwrap();
    let t = texts(&s.build_session_context().messages);
    assert_eq!(t.len(), 3, "{t:?}");
    assert!(t[0].1.contains("SECOND") && !t[0].1.contains("FIRST"));
    assert_eq!(t[1].1, "u2");
    assert_eq!(t[2].1, "u3");
}

#[test]
fn context_branch_summary_becomes_a_user_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    let u1 = s.append_message(&Message::user("u1")).unwrap();
    s.append_message(&common::assistant("abandoned")).unwrap();
    s.branch(&u1).unwrap();
    s.append_branch_summary(&u1, "We tried X and it failed.").unwrap();
    s.append_message(&common::assistant("a1 again")).unwrap();
    let t = texts(&s.build_session_context().messages);
    assert_eq!(t.len(), 3, "{t:?}");
    assert_eq!(t[1].0, Role::User);
    assert!(t[1].1.contains("We tried X and it failed."), "{}", t[1].1);
    assert!(t.iter().all(|(_, x)| x != "abandoned"));
}

#[test]
fn context_custom_message_is_a_user_message_without_display_or_details() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    s.append_message(&Message::user("u1")).unwrap();
    s.append_custom_message_entry("handoff", "<handoff-context>\nDOC\n</handoff-context>", true).unwrap();
    // One with details, as pi's extensions write them.
    let mut fields = serde_json::Map::new();
    fields.insert("customType".into(), json!("note"));
    fields.insert("content".into(), json!([{"type": "text", "text": "hidden note"}]));
    fields.insert("display".into(), json!(false));
    fields.insert("details".into(), json!({"secret": "ui only"}));
    s.append("custom_message", fields).unwrap();
    let ctx = s.build_session_context();
    let t = texts(&ctx.messages);
    assert_eq!(
        t,
        [
            (Role::User, "u1".to_string()),
            (Role::User, "<handoff-context>\nDOC\n</handoff-context>".to_string()),
            (Role::User, "hidden note".to_string()),
        ]
    );
    for m in &ctx.messages[1..] {
        let v = serde_json::to_value(m).unwrap();
        let obj = v.as_object().unwrap();
        for key in ["display", "details", "customType"] {
            assert!(!obj.contains_key(key), "{key} leaked into the context: {v}");
        }
        assert!(!v.to_string().contains("ui only"));
    }
    // The entry itself keeps them.
    let entry = s.get_entries().last().unwrap();
    assert_eq!(entry.fields()["details"]["secret"], "ui only");
    let cm = s.get_entries()[1].custom_message().unwrap();
    assert_eq!((cm.custom_type.as_str(), cm.display), ("handoff", true));
}

/// The context as `write_context_json` writes it (what `handoff-nvim context` prints).
fn context_json(s: &SessionManager) -> (String, Value) {
    let mut out = Vec::new();
    s.write_context_json(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (text, value)
}

#[test]
fn context_json_is_the_built_context_with_stored_messages_copied_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    // Every kind of entry that reaches the context, and messages written in unusual ways:
    // `role` not first, an escaped role, an extension role, a role the model never sees, and
    // an unknown field (kept as written).
    let path = dir.path().join("kinds.jsonl");
    let raw_user = r#"{"role":"user","content":[{"type":"text","text":"u1 \"quoted\" \u00e9"}],"timestamp":1,"futureField":{"x":[1,2]}}"#;
    let lines = [
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-11-29T20:00:00.000Z","cwd":"/p"}"#.to_string(),
        format!(r#"{{"type":"message","id":"e1","parentId":null,"timestamp":"2026-11-29T20:00:01.000Z","message":{raw_user}}}"#),
        r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-11-29T20:00:02.000Z","message":{"content":[{"type":"text","text":"a1"}],"role":"assistant","stopReason":"stop","provider":"p","model":"m","timestamp":2}}"#.into(),
        r#"{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-11-29T20:00:03.000Z","message":{"role":"us\u0065r","content":"escaped role","timestamp":3}}"#.into(),
        r#"{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-11-29T20:00:04.000Z","message":{"role":"bashExecution","command":"ls","output":"a b","exitCode":2,"timestamp":4}}"#.into(),
        r#"{"type":"message","id":"e5","parentId":"e4","timestamp":"2026-11-29T20:00:05.000Z","message":{"role":"notForTheModel","content":"hidden","timestamp":5}}"#.into(),
        r#"{"type":"custom_message","id":"e6","parentId":"e5","timestamp":"2026-11-29T20:00:06.000Z","customType":"handoff","content":"DOC","display":true}"#.into(),
        r#"{"type":"branch_summary","id":"e7","parentId":"e6","timestamp":"2026-11-29T20:00:07.000Z","fromId":"e1","summary":"tried X"}"#.into(),
        r#"{"type":"message","id":"e8","parentId":"e7","timestamp":"2026-11-29T20:00:08.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],"isError":false,"timestamp":8}}"#.into(),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let mut sessions = vec![open(&path, dir.path())];
    for name in FIXTURES {
        sessions.push(open(&copy_fixture(name, dir.path()), dir.path()));
    }
    // And one with a compaction, made through the API.
    let mut s = new_session(dir.path());
    let u1 = s.append_message(&Message::user("u1")).unwrap();
    s.append_message(&common::assistant("a1")).unwrap();
    s.append_compaction("SUMMARY", &u1, 1).unwrap();
    s.append_message(&Message::user("u2")).unwrap();
    sessions.push(s);
    for s in &sessions {
        let built = serde_json::to_value(&s.build_session_context().messages).unwrap();
        let (_, written) = context_json(s);
        assert_eq!(written, built, "{}", s.path().display());
    }
    let (text, written) = context_json(&sessions[0]);
    assert!(text.starts_with(&format!("[{raw_user},")), "{text}");
    let roles: Vec<&str> = written.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "user", "user", "user", "toolResult"]);
    assert!(!text.contains("hidden"), "{text}");
}

#[test]
fn a_large_damaged_file_loads_on_every_core_with_the_right_lines_named() {
    // Over 8 MiB, so the lines are parsed on several threads: the damage is spread over the
    // file, and each warning must still name its own line.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.jsonl");
    let mut file: Vec<u8> =
        br#"{"type":"session","version":3,"id":"s1","timestamp":"2026-11-29T20:00:00.000Z","cwd":"/p"}"#.to_vec();
    let filler = "lorem ipsum ".repeat(700);
    let mut parent = "null".to_string();
    let mut line_no = 1;
    let (mut bad_utf8, mut garbage) = (0, 0);
    let mut good = Vec::new();
    for i in 0..1200 {
        file.push(b'\n');
        line_no += 1;
        if i == 300 {
            file.extend_from_slice(b"{\"type\":\"message\",\"id\":\"\xff\xfe\"}");
            bad_utf8 = line_no;
            continue;
        }
        if i == 900 {
            file.extend_from_slice(b"not json");
            garbage = line_no;
            continue;
        }
        let id = format!("{i:08x}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let line = format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-11-29T20:00:00.000Z","message":{{"role":"{role}","content":"{i} {filler}","timestamp":{i}}}}}"#
        );
        file.extend_from_slice(line.as_bytes());
        if i == 600 {
            // pi's re-append: the same entry again, which is not a new entry.
            file.push(b'\n');
            line_no += 1;
            file.extend_from_slice(line.as_bytes());
        }
        parent = format!("\"{id}\"");
        good.push(id);
    }
    file.extend_from_slice(b"\n{\"type\":\"message\",\"id\":\"torn\",\"par");
    let torn = line_no + 1;
    assert!(file.len() > 8 << 20, "{} bytes: too small for the parallel path", file.len());
    std::fs::write(&path, &file).unwrap();
    let s = open(&path, dir.path());
    let w = s.warnings();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].contains(&format!("line {bad_utf8} ")), "{}", w[0]);
    assert!(w[1].contains(&format!("line {garbage} ")), "{}", w[1]);
    assert!(w[2].contains("last line") && w[2].contains("incomplete"), "{} (line {torn})", w[2]);
    let ids: Vec<&str> = s.get_entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, good);
    assert_eq!(s.leaf_id(), good.last().map(String::as_str));
    // The damaged lines were no entries of the tree: the branch runs through all the others.
    let ctx = s.build_session_context();
    assert_eq!(ctx.messages.len(), good.len());
    assert_eq!(ctx.messages.last().unwrap().timestamp, Some(1199));
}

#[test]
fn context_reports_model_and_thinking_level_of_the_branch() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    assert_eq!(s.build_session_context().model, None);
    s.append_model_change("openai", "gpt-a").unwrap();
    s.append_thinking_level_change("low").unwrap();
    let ctx = s.build_session_context();
    assert_eq!(ctx.model, Some(("openai".into(), "gpt-a".into())));
    assert_eq!(ctx.thinking_level.as_deref(), Some("low"));
    s.append_message(&Message::user("u")).unwrap();
    // An assistant reply records which model wrote it: that model is in force afterwards.
    s.append_message(&common::assistant("a")).unwrap();
    assert_eq!(s.build_session_context().model, Some(("mock".into(), "mock-model".into())));
    s.append_model_change("anthropic", "claude-x").unwrap();
    s.append_thinking_level_change("high").unwrap();
    let ctx = s.build_session_context();
    assert_eq!(ctx.model, Some(("anthropic".into(), "claude-x".into())));
    assert_eq!(ctx.thinking_level.as_deref(), Some("high"));
    // model/thinking entries are settings, not messages.
    assert_eq!(ctx.messages.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// "migrate version 1/2 files in memory, never rewrite a user's file silently"

const V1: &str = r#"{"type":"session","id":"v1-session","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}
{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"old question","timestamp":1}}
{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"old answer"}],"stopReason":"stop","timestamp":2}}
{"type":"message","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"user","content":"second question","timestamp":3}}
"#;

#[test]
fn migration_version_1_without_ids_is_chained_in_memory_and_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    std::fs::write(&path, V1).unwrap();
    let s = open(&path, dir.path());
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    let entries = s.get_entries();
    assert_eq!(entries.len(), 3);
    assert!(entries.iter().all(|e| !e.id.is_empty()));
    assert_eq!(entries[0].parent_id, None);
    assert_eq!(entries[1].parent_id.as_deref(), Some(entries[0].id.as_str()));
    assert_eq!(entries[2].parent_id.as_deref(), Some(entries[1].id.as_str()));
    assert_eq!(s.leaf_id(), Some(entries[2].id.as_str()));
    let t = texts(&s.build_session_context().messages);
    assert_eq!(t.iter().map(|(_, x)| x.as_str()).collect::<Vec<_>>(), ["old question", "old answer", "second question"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), V1);
}

#[test]
fn migration_version_1_appending_then_reloading_keeps_the_whole_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    std::fs::write(&path, V1).unwrap();
    let mut s = open(&path, dir.path());
    s.append_message(&common::assistant("new answer")).unwrap();
    s.flush().unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().starts_with(V1));
    // The appended entry names a migrated parent: that parent must be found again on reload.
    let again = open(&path, dir.path());
    let t = texts(&again.build_session_context().messages);
    assert_eq!(
        t.iter().map(|(_, x)| x.as_str()).collect::<Vec<_>>(),
        ["old question", "old answer", "second question", "new answer"]
    );
}

#[test]
fn migration_version_1_compaction_index_becomes_first_kept_entry_id() {
    // pi v1 compactions name the first kept entry by its index among the file's lines (the
    // header is index 0); pi's migration turns it into `firstKeptEntryId`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1c.jsonl");
    let text = format!(
        "{V1}{}\n{}\n",
        r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"S","firstKeptEntryIndex":2,"tokensBefore":10}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:05.000Z","message":{"role":"user","content":"after","timestamp":5}}"#
    );
    std::fs::write(&path, &text).unwrap();
    let s = open(&path, dir.path());
    let t = texts(&s.build_session_context().messages);
    assert_eq!(t.len(), 4, "{t:?}");
    assert!(t[0].1.contains("<summary>\nS\n</summary>"));
    assert_eq!(
        t[1..].iter().map(|(_, x)| x.as_str()).collect::<Vec<_>>(),
        ["old answer", "second question", "after"]
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn migration_version_2_hook_message_role_becomes_custom_in_memory_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.jsonl");
    let text = r#"{"type":"session","version":2,"id":"v2","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/p"}
{"type":"message","id":"a1a1a1a1","parentId":null,"timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"message","id":"b2b2b2b2","parentId":"a1a1a1a1","timestamp":"2025-06-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"todo","content":"remember the tests","display":true,"timestamp":2}}
"#;
    std::fs::write(&path, text).unwrap();
    let s = open(&path, dir.path());
    let msg = s.get_entry("b2b2b2b2").unwrap().message().unwrap();
    assert_eq!(msg.role, Role::Other("custom".into()));
    let ctx = s.build_session_context();
    assert_eq!(texts(&ctx.messages), [(Role::User, "hi".into()), (Role::User, "remember the tests".into())]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

// ---------------------------------------------------------------------------------------------
// Files: pi's naming scheme, dir 0700, files 0600, header written at once

#[test]
fn files_new_session_is_named_by_pis_scheme_and_written_with_its_first_message() {
    let dir = tempfile::tempdir().unwrap();
    let session_dir = dir.path().join("sessions");
    let mut s = SessionManager::create(&session_dir, Path::new("/home/dev/my:project"), None).unwrap();
    let h = s.header().clone();
    let stamp = h.timestamp.replace([':', '.'], "-");
    assert_eq!(
        s.path(),
        session_dir.join("--home-dev-my-project--").join(format!("{stamp}_{}.jsonl", h.id))
    );
    // Like pi, an unused session leaves no file: not for its settings, not for a flush.
    s.append_model_change("mock", "m").unwrap();
    s.append_thinking_level_change("off").unwrap();
    s.flush().unwrap();
    assert!(!s.path().exists() && !s.is_written());
    // The first message writes the header, the settings and itself, at once.
    s.append_message(&Message::user("hi")).unwrap();
    assert!(s.is_written());
    let on_disk = lines(s.path());
    assert_eq!(on_disk.len(), 4);
    let kinds: Vec<&str> = on_disk[1..].iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change", "message"]);
    assert_eq!(on_disk[0], serde_json::to_value(&h).unwrap());
    assert_eq!(on_disk[0]["type"], "session");
    assert_eq!(on_disk[0]["version"], 3);
    assert_eq!(on_disk[0]["cwd"], "/home/dev/my:project");
    assert!(on_disk[0].get("parentSession").is_none());
    // Written under a temporary name and renamed: nothing else is left in the folder.
    let names: Vec<_> = std::fs::read_dir(s.path().parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, [s.path().file_name().unwrap().to_owned()]);
}

#[cfg(unix)]
#[test]
fn files_session_dir_is_0700_and_session_files_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let session_dir = dir.path().join("sessions");
    let mut s = SessionManager::create(&session_dir, Path::new(CWD), Some("/x/parent.jsonl".into())).unwrap();
    s.append_message(&Message::user("hi")).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&session_dir), 0o700);
    assert_eq!(mode(s.path().parent().unwrap()), 0o700);
    assert_eq!(mode(s.path()), 0o600);
    assert_eq!(lines(s.path())[0]["parentSession"], "/x/parent.jsonl");
}

/// Appends are unbuffered: a second reader sees each entry as soon as `append` returns, before
/// any `flush`.
#[test]
fn files_appends_are_visible_to_a_second_reader_without_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = new_session(dir.path());
    s.append_model_change("mock", "m").unwrap();
    s.append_message(&Message::user("visible")).unwrap();
    let other = SessionManager::open(s.path(), s.session_dir()).unwrap();
    assert_eq!(other.get_entries(), s.get_entries());
}

/// Linux FIEMAP: how many extents of `path` are delayed allocations (`FIEMAP_EXTENT_DELALLOC`),
/// i.e. written data the kernel has not yet put on the disk. `None` when the file system cannot
/// say (tmpfs, for one, does not answer FIEMAP).
#[cfg(target_os = "linux")]
fn delalloc_extents(path: &Path) -> Option<usize> {
    use std::os::fd::AsRawFd;
    // struct fiemap (32 bytes) followed by struct fiemap_extent[N] (56 bytes each).
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B; // _IOWR('f', 11, struct fiemap)
    const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
    const N: usize = 64;
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Extent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    #[repr(C)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped_extents: u32,
        extent_count: u32,
        reserved: u32,
        extents: [Extent; N],
    }
    // No FIEMAP_FLAG_SYNC: asking must not itself write the data back.
    let mut map = Fiemap { start: 0, length: u64::MAX, flags: 0, mapped_extents: 0, extent_count: N as u32, reserved: 0, extents: [Extent::default(); N] };
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: FS_IOC_FIEMAP reads and fills `map`, a `struct fiemap` with room for N extents.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut map as *mut Fiemap) };
    if rc != 0 {
        return None;
    }
    let mapped = (map.mapped_extents as usize).min(N);
    Some(map.extents[..mapped].iter().filter(|e| e.flags & FIEMAP_EXTENT_DELALLOC != 0).count())
}

/// `flush` is the store's fsync: appends already reach the kernel at once (see above), so what
/// flush adds is that they reach the disk. File systems with delayed allocation (ext4, xfs,
/// btrfs) show that through FIEMAP: freshly written data is a delayed-allocation extent until it
/// is written back, which flush must force. Runs in cargo's target folder, on the disk the build
/// is on; where that file system cannot show it (no FIEMAP, no delayed allocation), the test
/// says so and checks only that flush succeeds.
#[cfg(target_os = "linux")]
#[test]
fn files_flush_puts_appended_data_on_the_disk() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut s = new_session(dir.path());
    // Well past the header's block: new blocks, which the kernel allocates only on writeback.
    s.append_message(&Message::user("x".repeat(256 * 1024))).unwrap();
    let before = delalloc_extents(s.path());
    s.flush().unwrap();
    match before {
        Some(n) if n > 0 => {
            assert_eq!(delalloc_extents(s.path()), Some(0), "data still waiting for writeback after flush");
        }
        _ => eprintln!(
            "files_flush_puts_appended_data_on_the_disk: {} shows no delayed allocation (FIEMAP: {before:?}); \
             cannot observe the fsync here, checked only that flush succeeds",
            dir.path().display()
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// list_sessions(cwd)

#[test]
fn list_sessions_is_newest_first_with_first_message_and_parent() {
    let dir = tempfile::tempdir().unwrap();
    let session_dir = dir.path().join("sessions");
    let cwd = Path::new(CWD);
    let mut first = SessionManager::create(&session_dir, cwd, None).unwrap();
    first.append_model_change("mock", "m").unwrap();
    first.append_message(&Message::user("  fix the parser  \nwith details")).unwrap();
    first.append_message(&common::assistant("ok")).unwrap();
    // Sessions are listed by their headers' millisecond timestamps: each next one is later.
    common::wait_past(&first.header().timestamp);
    let parent = first.path().to_string_lossy().into_owned();
    let mut second = SessionManager::create(&session_dir, cwd, Some(parent.clone())).unwrap();
    second.append_custom_message_entry("handoff", "doc", true).unwrap();
    second.append_message(&Message::user("continue")).unwrap();
    common::wait_past(&second.header().timestamp);
    let third = SessionManager::create(&session_dir, cwd, None).unwrap();
    // A header-only file (an older version, or pi, may leave one): listed, and empty.
    std::fs::create_dir_all(third.path().parent().unwrap()).unwrap();
    std::fs::write(third.path(), format!("{}\n", serde_json::to_string(third.header()).unwrap())).unwrap();
    let third = SessionManager::open(third.path(), &session_dir).unwrap();
    // A session never used leaves no file, so it is not listed.
    common::wait_past(&third.header().timestamp);
    SessionManager::create(&session_dir, cwd, None).unwrap();
    // Another project's session is not listed; a stray non-session file does not break it.
    SessionManager::create(&session_dir, Path::new("/elsewhere"), None)
        .unwrap()
        .append_message(&Message::user("elsewhere"))
        .unwrap();
    std::fs::write(third.path().with_file_name("junk.jsonl"), "not a session").unwrap();

    let list = SessionManager::list_sessions(&session_dir, cwd).unwrap();
    let ids: Vec<&str> = list.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, [third.session_id(), second.session_id(), first.session_id()]);
    assert_eq!(list[2].first_message, "fix the parser");
    assert_eq!(list[2].message_count, 2);
    assert_eq!(list[2].parent_session, None);
    assert_eq!(list[1].first_message, "continue");
    assert_eq!(list[1].parent_session.as_deref(), Some(parent.as_str()));
    assert_eq!(list[0].first_message, "");
    assert_eq!(list[0].path, third.path());
    // Only the session nothing was said in is empty (a handoff-only session is not).
    assert_eq!(list.iter().map(|i| i.empty).collect::<Vec<_>>(), [true, false, false]);
    assert!(SessionManager::list_sessions(&session_dir, Path::new("/nothing/here")).unwrap().is_empty());
}

/// Issue 40: every listing (the picker, start-up) loaded every session file of the folder. Now a
/// file is summarized once per (size, modification time): a second listing reads only what
/// changed; an append (a new size) is seen, a file gone is dropped. The control: a file whose
/// bytes change under the same size and time is not read again, which only a cache explains.
#[test]
fn a_listing_summarizes_each_file_once_per_size_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let session_dir = dir.path().join("sessions");
    let cwd = Path::new("/cached/project");
    let mut a = SessionManager::create(&session_dir, cwd, None).unwrap();
    a.append_message(&Message::user("alpha one")).unwrap();
    a.flush().unwrap();
    common::wait_past(&a.header().timestamp);
    let mut b = SessionManager::create(&session_dir, cwd, None).unwrap();
    b.append_message(&Message::user("bravo one")).unwrap();
    b.flush().unwrap();
    let first = SessionManager::list_sessions(&session_dir, cwd).unwrap();
    assert_eq!(first.iter().map(|i| i.first_message.as_str()).collect::<Vec<_>>(), ["bravo one", "alpha one"]);
    // The same size and time, other bytes: the summary made before stands.
    let text = std::fs::read_to_string(a.path()).unwrap();
    let modified = std::fs::metadata(a.path()).unwrap().modified().unwrap();
    std::fs::write(a.path(), text.replace("alpha one", "ALPHA ONE")).unwrap();
    std::fs::File::options().write(true).open(a.path()).unwrap().set_modified(modified).unwrap();
    let cached = SessionManager::list_sessions(&session_dir, cwd).unwrap();
    assert_eq!(cached[1].first_message, "alpha one", "read again although neither size nor time changed");
    // An append is a new size: read again.
    b.append_message(&common::assistant("ok")).unwrap();
    b.flush().unwrap();
    let grown = SessionManager::list_sessions(&session_dir, cwd).unwrap();
    assert_eq!(grown[0].message_count, 2);
    // A file gone is gone from the list.
    std::fs::remove_file(a.path()).unwrap();
    let left = SessionManager::list_sessions(&session_dir, cwd).unwrap();
    assert_eq!(left.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), [b.session_id()]);
    // The newest, by the headers alone.
    assert_eq!(SessionManager::newest_session(&session_dir, cwd).unwrap().as_deref(), Some(b.path()));
}

#[test]
fn new_session_replaces_the_current_one_with_an_empty_tree() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = common::seeded_session(dir.path(), 1);
    let old = s.path().to_path_buf();
    let old_bytes = std::fs::read(&old).unwrap();
    s.new_session(Some(old.to_string_lossy().into_owned())).unwrap();
    assert_ne!(s.path(), old);
    assert!(s.get_entries().is_empty());
    assert_eq!(s.leaf_id(), None);
    assert!(!s.path().exists(), "a new session has no file until it is used");
    assert_eq!(std::fs::read(&old).unwrap(), old_bytes);
    let id = s.append_message(&Message::user("fresh")).unwrap();
    assert_eq!(s.get_entry(&id).unwrap().parent_id, None);
    assert_eq!(lines(s.path()).len(), 2);
}

#[test]
fn reading_a_file_pi_re_appended_whole_loads_without_duplicates_or_warnings() {
    // pi 0.73.1, resuming a file that has no assistant reply yet (a handoff session), writes
    // nothing until the first reply and then appends every entry it holds, header included.
    let dir = tempfile::tempdir().unwrap();
    let ours = [
        r#"{"type":"session","version":3,"id":"01a228f8-0000-7000-8000-000000000001","timestamp":"2026-11-29T20:21:19.225Z","cwd":"/p","parentSession":"/x/old.jsonl"}"#,
        r#"{"type":"model_change","id":"1a07469a","parentId":null,"timestamp":"2026-11-29T20:21:19.240Z","provider":"mock","modelId":"mock-model"}"#,
        r#"{"type":"thinking_level_change","id":"5ba3217b","parentId":"1a07469a","timestamp":"2026-11-29T20:21:19.240Z","thinkingLevel":"off"}"#,
        r#"{"type":"custom_message","id":"b677a918","parentId":"5ba3217b","timestamp":"2026-11-29T20:21:19.240Z","customType":"handoff","content":"DOC","display":true}"#,
    ];
    let pis = [
        r#"{"type":"message","id":"0705894b","parentId":"b677a918","timestamp":"2026-11-29T20:22:18.810Z","message":{"role":"user","content":[{"type":"text","text":"go on"}],"timestamp":1}}"#,
        r#"{"type":"message","id":"d304c84f","parentId":"0705894b","timestamp":"2026-11-29T20:22:18.949Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop","timestamp":2}}"#,
    ];
    let path = dir.path().join("reappended.jsonl");
    let text = [&ours[..], &ours[..], &pis[..]].concat().join("\n") + "\n";
    std::fs::write(&path, &text).unwrap();
    let s = open(&path, dir.path());
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    let kinds: Vec<&str> = s.get_entries().iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change", "custom_message", "message", "message"]);
    assert_eq!(s.header().parent_session.as_deref(), Some("/x/old.jsonl"));
    let t = texts(&s.build_session_context().messages);
    assert_eq!(t.iter().map(|(_, x)| x.as_str()).collect::<Vec<_>>(), ["DOC", "go on", "ok"]);
    // A repeated id with different content is still reported (the later line wins).
    let clash = r#"{"type":"message","id":"d304c84f","parentId":"0705894b","timestamp":"2026-11-29T20:22:19.000Z","message":{"role":"assistant","content":[{"type":"text","text":"changed"}],"stopReason":"stop","timestamp":3}}"#;
    std::fs::write(&path, format!("{text}{clash}\n")).unwrap();
    let s = open(&path, dir.path());
    assert_eq!(s.warnings().len(), 1, "{:?}", s.warnings());
    assert!(s.warnings()[0].contains("d304c84f"));
    // A second header of another session is not taken for an entry.
    let other = r#"{"type":"session","version":3,"id":"another","timestamp":"2026-11-29T20:23:00.000Z","cwd":"/p"}"#;
    std::fs::write(&path, format!("{text}{other}\n")).unwrap();
    let s = open(&path, dir.path());
    assert_eq!(s.get_entries().len(), 5);
    assert_eq!(s.warnings().len(), 1, "{:?}", s.warnings());
    assert!(s.warnings()[0].contains("line 11"), "{}", s.warnings()[0]);
}

// ---------------------------------------------------------------------------------------------
// The entry index: parents as positions, cycles, ids met twice, tool results by name

/// A line of a `message` entry.
fn message_line(id: &str, parent: Option<&str>, message: Value) -> String {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-30T10:00:00.000Z", "message": message})
        .to_string()
}

fn session_of(dir: &Path, lines: &[String]) -> SessionManager {
    let header = r#"{"type":"session","version":3,"id":"idx","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/p"}"#;
    let path = dir.join("index.jsonl");
    std::fs::write(&path, format!("{header}\n{}\n", lines.join("\n"))).unwrap();
    open(&path, dir)
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

fn ids(branch: &[&handoff_nvim::core::session::SessionEntry]) -> Vec<String> {
    branch.iter().map(|e| e.id.to_string()).collect()
}

#[test]
fn branches_follow_parents_a_cycle_is_cut_and_a_reused_id_means_its_later_entry() {
    let dir = tempfile::tempdir().unwrap();
    // a ← b ← c, and d ← e with e's parent "b": two branches from b.
    let s = session_of(
        dir.path(),
        &[
            message_line("a", None, user("1")),
            message_line("b", Some("a"), user("2")),
            message_line("c", Some("b"), user("3")),
            message_line("d", Some("b"), user("4")),
        ],
    );
    assert_eq!(ids(&s.get_branch(None)), ["a", "b", "d"]);
    assert_eq!(ids(&s.get_branch(Some("c"))), ["a", "b", "c"]);
    // x → y → x: each entry once, the walk stops where it came round.
    let s = session_of(
        dir.path(),
        &[message_line("x", Some("y"), user("1")), message_line("y", Some("x"), user("2"))],
    );
    assert_eq!(ids(&s.get_branch(None)), ["x", "y"]);
    // "m" twice with different content: the later one wins, for itself and as a parent.
    let mut s = session_of(
        dir.path(),
        &[
            message_line("m", None, user("first")),
            message_line("r", None, user("root")),
            message_line("m", Some("r"), user("second")),
            message_line("k", Some("m"), user("child")),
        ],
    );
    assert_eq!(s.warnings().len(), 1, "{:?}", s.warnings());
    assert_eq!(ids(&s.get_branch(None)), ["r", "m", "k"]);
    assert_eq!(s.get_entry("m").unwrap().message().unwrap().text(), "second");
    // Appended entries are indexed as they come: parent, lookup, a branch through them.
    let id = s.append_message(&Message::user("appended")).unwrap();
    assert_eq!(s.get_entry(&id).unwrap().parent_id.as_deref(), Some("k"));
    assert_eq!(ids(&s.get_branch(None)), ["r", "m", "k", id.as_str()]);
    s.branch("r").unwrap();
    let fork = s.append_message(&Message::user("fork")).unwrap();
    assert_eq!(ids(&s.get_branch(None)), ["r", fork.as_str()]);
    assert!(matches!(s.branch("nope"), Err(SessionError::UnknownEntry(_))));
}

#[test]
fn tool_results_are_found_by_their_tool_name_wherever_the_writer_put_it() {
    let dir = tempfile::tempdir().unwrap();
    let result = |id: &str, parent: &str, fields: Value| {
        let mut m = json!({"role": "toolResult", "toolCallId": format!("call_{id}")});
        m.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        message_line(id, Some(parent), m)
    };
    let s = session_of(
        dir.path(),
        &[
            message_line("u", None, user("go")),
            // pi's order: the name before the content.
            result("r1", "u", json!({"toolName": "todo_write", "content": [{"type": "text", "text": "one"}], "isError": false})),
            // A name that starts like it, and a content that mentions it.
            result("r2", "r1", json!({"toolName": "todo_write_v2", "content": [{"type": "text", "text": "todo_write"}]})),
            result("r3", "r2", json!({"toolName": "bash", "content": [{"type": "text", "text": "\"toolName\":\"todo_write\""}]})),
            // Another writer's order: the content first, the name after it.
            result("r4", "r3", json!({"content": [{"type": "text", "text": "four"}], "toolName": "todo_write"})),
            // A nested object naming another tool before the message's own name.
            result("r5", "r4", json!({"details": {"toolName": "bash"}, "toolName": "todo_write", "content": "five"})),
            // An escaped name is still its name.
            r#"{"type":"message","id":"r6","parentId":"r5","timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"toolResult","toolName":"todo\u005fwrite","content":"six"}}"#.to_string(),
        ],
    );
    let found: Vec<String> = s.branch_tool_results("todo_write").iter().map(|m| m.text()).collect();
    assert_eq!(found, ["one", "four", "five", "six"]);
    assert_eq!(s.branch_tool_results("todo_write_v2").len(), 1);
    assert_eq!(s.branch_tool_results("bash").len(), 1);
}
