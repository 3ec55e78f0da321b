//! The session-file reader on arbitrary bytes. Properties, beyond "never panics":
//! - a file that loads can be appended to, and the reload keeps every entry it had plus the new
//!   one (nothing the user wrote is lost, whatever damage came before);
//! - a load never changes the file.
#![no_main]

use std::io::Write;

use handoff_nvim::core::message::Message;
use handoff_nvim::core::session::SessionManager;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("handoff-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("s.jsonl");
    {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(data).unwrap();
    }
    let Ok(mut s) = SessionManager::open(&path, &dir) else { return };
    assert_eq!(std::fs::read(&path).unwrap(), data, "loading changed the file");
    let before: Vec<String> = s.get_entries().iter().map(|e| e.id.to_string()).collect();
    let _ = s.build_session_context();
    let _ = s.count_branch_messages();
    let id = s.append_message(&Message::user("fuzz")).unwrap();
    s.flush().unwrap();
    drop(s);
    let again = SessionManager::open(&path, &dir).expect("a file we appended to no longer loads");
    let after: Vec<String> = again.get_entries().iter().map(|e| e.id.to_string()).collect();
    for id in &before {
        assert!(after.contains(id), "entry {id} lost by an append");
    }
    assert!(after.contains(&id), "the appended entry was lost");
    assert!(std::fs::read(&path).unwrap().starts_with(data), "an append rewrote earlier bytes");
});
