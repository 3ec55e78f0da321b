//! Issue 39, round two: what a command does cannot widen what is reached later, by the next
//! command or by a process it left running (`:help handoff-sandbox`).
//!
//! - The helper that confines commands is not a file a command can write: a dev build in the
//!   project's `target/` whose `handoff-sandbox` a command replaces still confines the next
//!   command (the host runs a sealed copy it made as it started).
//! - A process a command left running cannot read a credential made after it started: in a
//!   hidden folder that existed, in a folder that did not, a file that did not exist.
//!
//! Each through the real CLI and a scripted model turn with `--yes` (the default sandbox,
//! `workspace-write`, network off), each with its control: `--sandbox off` reaches. Both were
//! checked red on the code before the change (the swapped helper ran the next command
//! unconfined; the new credentials were copied into the project).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::machine::{enforced, machine, turn, turn_of, Machine, OFF};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const HELPER: &str = env!("CARGO_BIN_EXE_handoff-sandbox");

/// The host (and its helper, `with_helper`) as a build inside the project leaves them
/// (`target/debug/`): the host found there is the one the turn runs.
fn build_in_project(m: &Machine, with_helper: bool) -> PathBuf {
    let build = m.project.join("target/debug");
    let _ = std::fs::remove_dir_all(&build);
    std::fs::create_dir_all(&build).unwrap();
    let host = build.join("handoff-nvim");
    // The host is never written (a running program cannot be): a hard link spares a copy of it.
    if std::fs::hard_link(BIN, &host).is_err() {
        std::fs::copy(BIN, &host).unwrap();
    }
    if with_helper {
        std::fs::copy(HELPER, build.join("handoff-sandbox")).unwrap();
    }
    host
}

/// A "helper" that confines nothing: it skips the sandbox's options and runs the command. Put in
/// place by a rename (a running helper's file cannot be written in place), over the helper the
/// build made or, where it made none, beside the host (where the host looks for one).
const SWAP: &str = r#"cat > target/debug/swap <<'EOF'
#!/bin/sh
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
EOF
chmod +x target/debug/swap && mv target/debug/swap target/debug/handoff-sandbox && echo swapped"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_swap_the_helper_that_confines_the_next() {
    if !enforced("a_command_cannot_swap_the_helper_that_confines_the_next") {
        return;
    }
    let m = machine();
    let pwned = m.outside.join("pwned");
    let escape = format!("echo out > {} && echo escaped", pwned.display());
    let calls = [("bash", json!({ "command": SWAP })), ("bash", json!({ "command": escape }))];
    // With the helper the build made (run from a sealed copy), and without one (the host's own
    // binary re-entered), where the command plants one.
    for with_helper in [true, false] {
        let host = build_in_project(&m, with_helper);
        let (results, _) = turn_of(&host, &m, &m.project, &calls, &[], &[]).await;
        assert!(results[0].contains("swapped"), "with_helper {with_helper}: {results:?}");
        let swapped = std::fs::read_to_string(m.project.join("target/debug/handoff-sandbox")).unwrap_or_default();
        assert!(swapped.starts_with("#!/bin/sh"), "the swap did not land: the test would prove nothing");
        assert!(!pwned.exists(), "with_helper {with_helper}: the next command ran through the swapped helper, unconfined: {results:?}");
        // Refused by the read-only tree (EROFS) or, without a mount namespace, by Landlock.
        assert!(
            results[1].contains("Read-only file system") || results[1].contains("Permission denied"),
            "with_helper {with_helper}: {results:?}"
        );
        // Control: unconfined, the same command reaches.
        let host = build_in_project(&m, with_helper);
        let (results, _) = turn_of(&host, &m, &m.project, &calls, OFF, &[]).await;
        assert!(pwned.exists(), "with_helper {with_helper}: the control did not reach: {results:?}");
        std::fs::remove_file(&pwned).unwrap();
    }
}

/// Credentials the test makes while a command's background process waits (none exists as it
/// starts), with where each lands.
const LATER: [(&str, &str); 4] = [
    (".ssh/new_key", "in a hidden folder that existed"),
    (".aws/credentials", "in a credential folder that did not exist"),
    (".netrc", "a credential file that did not exist"),
    (".pi/agent/models.json", "a credential file in a folder that existed (not a credential)"),
];

/// A file that is no credential, made at the same time: the process does read it (the layer
/// that keeps credentials out does not keep everything made later out).
const PLAIN: &str = "notes/later.txt";

fn secret(i: usize) -> String {
    format!("canary-secret-{i}-9f2c")
}

/// One turn: a command leaves a process that waits for `go`, then copies each of [`LATER`] and
/// [`PLAIN`] into the project; the next command waits for it to be done. Meanwhile (outside
/// the sandbox) the test makes them once the process started, and says `go`.
async fn later_turn(m: &Machine, flags: &[&str]) -> (Vec<String>, String) {
    for name in ["started", "go", "done"] {
        let _ = std::fs::remove_file(m.project.join(name));
    }
    for (path, _) in LATER {
        let _ = std::fs::remove_file(m.home.join(path));
    }
    let _ = std::fs::remove_dir_all(m.home.join(".aws"));
    let _ = std::fs::remove_file(m.home.join(PLAIN));
    let copies: String = LATER
        .iter()
        .map(|(p, _)| *p)
        .chain([PLAIN])
        .enumerate()
        .map(|(i, p)| format!("cat ~/{p} > leak{i} 2>&1; "))
        .collect();
    let left = format!("(touch started; while [ ! -e go ]; do sleep 0.05; done; {copies}touch done) >/dev/null 2>&1 & echo left running");
    let wait = "for i in $(seq 1200); do [ -e done ] && break; sleep 0.05; done; ls; cat leak*";
    let plant = async {
        common::wait_until("the background process", Duration::from_secs(60), || m.project.join("started").exists()).await;
        for (i, (path, _)) in LATER.iter().enumerate() {
            let file = m.home.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, secret(i)).unwrap();
        }
        std::fs::write(m.home.join(PLAIN), secret(LATER.len())).unwrap();
        std::fs::write(m.project.join("go"), "").unwrap();
    };
    let commands = [left.as_str(), wait];
    let (turned, ()) = tokio::join!(turn(m, &commands, flags, &[]), plant);
    turned
}

fn leaked(project: &Path, i: usize) -> bool {
    std::fs::read_to_string(project.join(format!("leak{i}"))).unwrap_or_default().contains(&secret(i))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_left_running_cannot_read_a_credential_made_after_it_started() {
    if !enforced("a_process_left_running_cannot_read_a_credential_made_after_it_started") {
        return;
    }
    let m = machine();
    std::fs::create_dir_all(m.home.join(".pi/agent")).unwrap();
    std::fs::write(m.home.join(".pi/agent/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(m.home.join("notes")).unwrap();
    let (results, bodies) = later_turn(&m, &[]).await;
    assert!(m.project.join("done").exists(), "the process never got to copy: {results:?}");
    let got: Vec<String> = LATER.iter().enumerate().filter(|(i, _)| leaked(&m.project, *i)).map(|(_, (p, why))| format!("~/{p} ({why})")).collect();
    assert!(got.is_empty(), "a process started before them read {got:?}: {results:?}");
    for i in 0..LATER.len() {
        assert!(!bodies.contains(&secret(i)), "a credential reached the provider: {results:?}");
    }
    assert!(leaked(&m.project, LATER.len()), "a file made later that is no credential was not read: {results:?}");
    // Control: unconfined, the same process reads every one of them.
    let (results, _) = later_turn(&m, OFF).await;
    let missed: Vec<&str> = LATER.iter().enumerate().filter(|(i, _)| !leaked(&m.project, *i)).map(|(_, (p, _))| *p).collect();
    assert!(missed.is_empty(), "the control did not read {missed:?}: {results:?}");
}

/// Whether this system can make the command's namespaces is asked once (the probe: a process
/// of its own) and kept for the next host process while everything it depends on reads the
/// same; another helper file is asked about again, and so is a kept answer that is not this
/// system's. The probe keeps a yes by writing a new file, so one left in place (same inode)
/// means it did not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespaces_probe_is_kept_across_processes_and_asked_again_when_the_helper_changes() {
    use std::os::unix::fs::MetadataExt;
    if !enforced("the_namespaces_probe_is_kept_across_processes_and_asked_again_when_the_helper_changes") {
        return;
    }
    let m = machine();
    let bin = m.outside.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let host = bin.join("handoff-nvim");
    std::fs::copy(BIN, &host).unwrap();
    let kept_dir = m.home.join(".cache/handoff-nvim/sandbox");
    let kept_file = || {
        let mut found: Vec<_> = std::fs::read_dir(&kept_dir).unwrap().flatten().map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("namespaces-probe-")).collect();
        assert_eq!(found.len(), 1, "one kept yes for this helper: {found:?}");
        found.pop().unwrap()
    };
    let calls = [("bash", json!({ "command": "echo ran" }))];
    let run = || async {
        let (results, _) = turn_of(&host, &m, &m.project, &calls, &[], &[]).await;
        assert!(results[0].contains("ran"), "{results:?}");
        std::fs::metadata(kept_file()).expect("the probe's yes is kept").ino()
    };
    let first = run().await;
    assert_eq!(run().await, first, "the second process probed again");
    // Another helper file (a rebuild, an upgrade): asked again, and a new yes kept.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(&host).unwrap().set_modified(later).unwrap();
    let after_change = run().await;
    assert_ne!(after_change, first, "the helper changed, and the kept yes was used");
    // A kept yes for another system.
    std::fs::write(kept_file(), b"another system").unwrap();
    let after_forgery = run().await;
    assert_ne!(after_forgery, after_change, "a kept yes that is not this system's was used");
    assert_ne!(std::fs::read(kept_file()).unwrap(), b"another system");
}
