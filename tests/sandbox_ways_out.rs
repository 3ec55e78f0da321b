//! The ways out of the sandbox that a prompt injection would try (`:help handoff-sandbox`),
//! each through the real CLI and a scripted model turn, with the default sandbox
//! (`workspace-write`, network off) and `--yes`: the editor's RPC socket, an AF_UNIX path
//! socket and an abstract one, `core.fsmonitor`, a hook written by bash, a credential read by
//! `cat`. Each has its control: with `--sandbox off` the same call does reach, so the test can
//! fail. Then what must keep working in the sandbox (git, a socketpair, a build, the temp
//! folder), and a system without user namespaces (simulated), where every command asks.
//!
//! Where this kernel cannot enforce the sandbox, a test prints `SKIPPED <name>: <why>` and
//! passes; with `HANDOFF_REQUIRE_SANDBOX=1` (CI) that is a failure instead.

mod common;

use common::machine::{enforced, git, machine, machine_with, turn, which, BIN, OFF};

use std::io::ErrorKind;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::process::Command;

use handoff_nvim::core::sandbox::SIMULATED_NO_MOUNTS_VAR;

// ---------------------------------------------------------------------------------------------
// Sockets

/// 1. `nvim --server $NVIM --remote-expr 'writefile(…)'`: the editor's socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editors_socket_is_out_of_reach() {
    if !enforced("the_editors_socket_is_out_of_reach") {
        return;
    }
    let m = machine();
    let nvim = common::nvim::nvim_bin();
    let socket = m.outside.join("nvim.sock");
    let mut editor = Command::new(&nvim)
        .args(["--headless", "--clean", "--listen"])
        .arg(&socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_until("Neovim's socket", std::time::Duration::from_secs(10), || socket.exists()).await;
    let pwned = m.outside.join("pwned");
    // The socket is named outright, as an injection that found it would (the variable may be
    // cleared from the command's environment, the socket is still there).
    let command = format!(
        "{} --server \"${{NVIM:-{}}}\" --remote-expr 'writefile([\"x\"], \"{}\")'",
        nvim.display(),
        socket.display(),
        pwned.display()
    );
    let env = [("NVIM", socket.to_str().unwrap())];
    let (results, _) = turn(&m, &[&command], &[], &env).await;
    assert!(!pwned.exists(), "the editor wrote for a sandboxed command: {results:?}");
    // Control: outside the sandbox the same call reaches the editor.
    let (results, _) = turn(&m, &[&command], OFF, &env).await;
    assert!(pwned.exists(), "the control did not reach the editor: {results:?}");
    editor.kill().unwrap();
    editor.wait().unwrap();
}

/// 2. A path socket outside the project (D-Bus, Docker, an SSH agent), stream and datagram.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_socket_outside_the_project_is_out_of_reach() {
    let Some((m, _)) = machine_with("a_path_socket_outside_the_project_is_out_of_reach", "python3") else { return };
    let stream = m.outside.join("agent.sock");
    let datagram = m.outside.join("log.sock");
    let listener = UnixListener::bind(&stream).unwrap();
    listener.set_nonblocking(true).unwrap();
    let log = UnixDatagram::bind(&datagram).unwrap();
    log.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); s.send(b\"in\"); print(\"connected\")'",
        stream.display()
    );
    let send = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b\"in\", \"{}\"); print(\"sent\")'",
        datagram.display()
    );
    let seen = |listener: &UnixListener, log: &UnixDatagram| {
        let accepted = match listener.accept() {
            Ok(_) => true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => panic!("{e}"),
        };
        let mut buf = [0u8; 8];
        let received = log.recv(&mut buf).is_ok();
        (accepted, received)
    };
    let (results, _) = turn(&m, &[&connect, &send], &[], &[]).await;
    assert_eq!(seen(&listener, &log), (false, false), "{results:?}");
    assert!(results[0].contains("Operation not permitted"), "{results:?}");
    // Control.
    let (results, _) = turn(&m, &[&connect, &send], OFF, &[]).await;
    assert_eq!(seen(&listener, &log), (true, true), "{results:?}");
}

/// 3. An abstract socket (no file: Landlock's scope and the filter keep it out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abstract_socket_is_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let Some((m, _)) = machine_with("an_abstract_socket_is_out_of_reach", "python3") else { return };
    let name = format!("handoff-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); s.send(b\"in\"); print(\"connected\")'"
    );
    let accepted = |l: &UnixListener| l.accept().is_ok();
    let (results, _) = turn(&m, &[&connect], &[], &[]).await;
    assert!(!accepted(&listener), "{results:?}");
    let (results, _) = turn(&m, &[&connect], OFF, &[]).await;
    assert!(accepted(&listener), "the control did not connect: {results:?}");
}

// ---------------------------------------------------------------------------------------------
// Planted code

/// 4. `git config core.fsmonitor …`: git runs it later, outside the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_fsmonitor_cannot_be_planted() {
    if !enforced("core_fsmonitor_cannot_be_planted") {
        return;
    }
    let m = machine();
    let ran = m.outside.join("fsmonitor-ran");
    let hook = m.project.join("monitor.sh");
    let command = format!(
        "printf '#!/bin/sh\\ntouch {}\\n' > monitor.sh && chmod +x monitor.sh && git config core.fsmonitor {}",
        ran.display(),
        hook.display()
    );
    let (results, _) = turn(&m, &[&command], &[], &[]).await;
    assert!(results[0].contains(".git/config"), "{results:?}");
    git(&m.project, &["status", "--short"]);
    assert!(!ran.exists(), "git ran a planted fsmonitor: {results:?}");
    let (results, _) = turn(&m, &[&command], OFF, &[]).await;
    git(&m.project, &["status", "--short"]);
    assert!(ran.exists(), "the control's fsmonitor did not run: {results:?}");
}

/// 5. A pre-commit hook written by bash (and the folder swapped for another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_hook_cannot_be_planted_by_a_command() {
    if !enforced("a_git_hook_cannot_be_planted_by_a_command") {
        return;
    }
    let m = machine();
    let ran = m.outside.join("hook-ran");
    let plant = format!("printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit", ran.display());
    // The same through a new .git, or the hooks folder renamed away.
    let swap = "mv .git/hooks .git/old-hooks; mv .git .git-old";
    let (results, _) = turn(&m, &[&plant, swap], &[], &[]).await;
    assert!(m.project.join(".git/HEAD").exists(), "the repository was moved away: {results:?}");
    std::fs::write(m.project.join("change.txt"), "x").unwrap();
    git(&m.project, &["add", "change.txt"]);
    git(&m.project, &["commit", "-q", "-m", "second"]);
    assert!(!ran.exists(), "git ran a planted hook: {results:?}");
    assert!(results[0].contains("did not apply this command's changes to .git/hooks/pre-commit"), "{results:?}");
    let (results, _) = turn(&m, &[&plant], OFF, &[]).await;
    std::fs::write(m.project.join("change.txt"), "y").unwrap();
    git(&m.project, &["commit", "-q", "-am", "third"]);
    assert!(ran.exists(), "the control's hook did not run: {results:?}");
}

// ---------------------------------------------------------------------------------------------
// Credentials

/// 8. `cat ~/.ssh/id_ed25519`: the key never reaches the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_file_cannot_be_read_by_a_command() {
    if !enforced("a_credential_file_cannot_be_read_by_a_command") {
        return;
    }
    let m = machine();
    let secret = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUtdGhlLXNlY3JldA";
    let (results, bodies) = turn(&m, &["cat ~/.ssh/id_ed25519; ls -a ~/.ssh"], &[], &[]).await;
    assert!(!bodies.contains(secret), "the key reached the provider: {results:?}");
    assert!(!results[0].contains("id_ed25519\n"), "the folder's names are hidden too: {results:?}");
    let (results, bodies) = turn(&m, &["cat ~/.ssh/id_ed25519"], OFF, &[]).await;
    assert!(bodies.contains(secret), "the control did not read the key: {results:?}");
}

/// 10. `/proc/$PPID/environ`: the host's (and the editor's) environment holds the provider's
/// key; a command sees no process outside its own pid namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_processes_environments_are_out_of_reach() {
    if !enforced("other_processes_environments_are_out_of_reach") {
        return;
    }
    let m = machine();
    let key = "sk-canary-environ-7d3f";
    let command = "tr '\\0' '\\n' < /proc/$PPID/environ; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null | grep -a canary; ls -d /proc/[0-9]* | wc -l";
    let env = [("OPENAI_API_KEY", key)];
    let (results, bodies) = turn(&m, &[command], &[], &env).await;
    assert!(!bodies.contains(key), "a process's environment reached the provider: {results:?}");
    let processes: usize = results[0].lines().last().unwrap().trim().parse().unwrap_or(usize::MAX);
    assert!(processes <= 4, "the command sees processes outside its namespace: {results:?}");
    let (results, bodies) = turn(&m, &[command], OFF, &env).await;
    assert!(bodies.contains(key), "the control did not read the host's environment: {results:?}");
}

// ---------------------------------------------------------------------------------------------
// What keeps working

/// Writes and deletes in the project, git add/commit/checkout -b/stash, a socketpair, a build
/// writing its output in the project, the temp folder: all in one sandboxed turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_still_works_in_the_sandbox() {
    if !enforced("the_work_still_works_in_the_sandbox") {
        return;
    }
    let m = machine();
    let mut commands = vec![
        "echo a > a.txt && mkdir -p d/e && echo b > d/e/b.txt && rm a.txt && echo files-ok".to_string(),
        "git add d && git -c user.name=t -c user.email=t@t commit -q -m work && git checkout -q -b feature && echo c > c.txt && git add c.txt && git stash -q && git stash list | grep -c stash && git log --format=%s | head -1".to_string(),
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"".to_string(),
        "printf 'all:\\n\\tmkdir -p build && echo built > build/out\\n' > Makefile && make -s && cat build/out".to_string(),
        // A background process outlives the command's shell (as without the sandbox; it ends
        // with the run), and the exit code comes through.
        "(sleep 0.3; echo later > later.txt) & echo started; exit 3".to_string(),
        "for i in $(seq 100); do [ -f later.txt ] && break; sleep 0.1; done; cat later.txt".to_string(),
    ];
    if which("python3").is_some() {
        commands.push("python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"pair-ok\"); print(b.recv(16).decode())'".into());
    }
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (results, _) = turn(&m, &refs, &[], &[]).await;
    assert!(results[0].contains("files-ok"), "{results:?}");
    assert!(results[1].contains("1\nwork"), "{results:?}");
    assert!(results[2].starts_with("t"), "{results:?}");
    if which("make").is_some() {
        assert!(results[3].contains("built"), "{results:?}");
    }
    assert!(results[4].contains("started") && results[4].contains("Command exited with code 3"), "{results:?}");
    assert!(results[5].contains("later"), "{results:?}");
    if commands.len() > 6 {
        assert!(results[6].contains("pair-ok"), "{results:?}");
    }
    assert_eq!(git(&m.project, &["branch", "--show-current"]).stdout, b"feature\n");
}

// ---------------------------------------------------------------------------------------------
// Fail loud

/// Without user namespaces (simulated) the planted-code and credential protections cannot
/// hold: the command is asked about whatever the policy, and the CLI without a terminal
/// refuses it under `--yes`, saying what is not protected and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_mount_namespace_each_command_asks_and_says_why() {
    if !enforced("without_a_mount_namespace_each_command_asks_and_says_why") {
        return;
    }
    let m = machine();
    let marker = m.project.join("ran.txt");
    let (results, _) = turn(&m, &["echo ran > ran.txt"], &[], &[(SIMULATED_NO_MOUNTS_VAR, "1")]).await;
    assert!(!marker.exists(), "ran without asking: {results:?}");
    let text = &results[0];
    assert!(text.contains("--yes never answers that"), "{text}");
    // Control: with the namespace, the same turn runs.
    let (results, _) = turn(&m, &["echo ran > ran.txt"], &[], &[]).await;
    assert!(marker.exists(), "{results:?}");
}

/// The helper itself refuses to run a command with a mount it cannot make (it never runs one
/// with a hole it was told to close).
#[test]
fn the_helper_refuses_mounts_it_cannot_make() {
    let m = machine();
    let out = Command::new(BIN)
        .args(["sandbox-exec", "--sandbox", "workspace-write", "--network", "false", "--writable"])
        .arg(&m.project)
        .arg("--read-only")
        .arg(m.project.join(".git/config"))
        .arg("--tmpdir")
        .arg(&m.tmp)
        .args(["--", "touch"])
        .arg(m.project.join("ran"))
        .env(SIMULATED_NO_MOUNTS_VAR, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!m.project.join("ran").exists());
    assert!(stderr.contains("mount namespace") || stderr.contains("cannot be enforced"), "{stderr}");
    let probe = Command::new(BIN).arg("sandbox-probe").env(SIMULATED_NO_MOUNTS_VAR, "1").output().unwrap();
    assert!(!probe.status.success());
}

/// A planted-code file that did not exist (nothing to mount over) and that a command creates is
/// reported in the result, for the model and the user; one that existed stays read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_project_config_file_is_reported_and_an_existing_one_is_read_only() {
    if !enforced("a_new_project_config_file_is_reported_and_an_existing_one_is_read_only") {
        return;
    }
    let m = machine();
    std::fs::write(m.project.join(".lazy.lua"), "return {}\n").unwrap();
    let (results, _) = turn(&m, &["echo 'os.execute(\"touch /tmp/x\")' > .nvim.lua; echo 'evil' >> .lazy.lua"], &[], &[]).await;
    assert!(results[0].contains("This command created .nvim.lua (Neovim runs it ('exrc'))"), "{results:?}");
    assert!(results[0].contains(".lazy.lua: Read-only file system"), "{results:?}");
    assert_eq!(std::fs::read_to_string(m.project.join(".lazy.lua")).unwrap(), "return {}\n");
}

/// 12. The sandbox's own temp folder, when the user's `$TMPDIR` is inside the project (a
/// project-local `TMPDIR`, as some shells' per-project settings make): a command renames the
/// folder above it and leaves a link to the home folder by its name, so that the next command's
/// writable temp folder would be the home folder. No list of ours names that folder: it is the
/// sandbox's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temp_folder_inside_the_project_cannot_be_swapped_for_a_link() {
    if !enforced("a_temp_folder_inside_the_project_cannot_be_swapped_for_a_link") {
        return;
    }
    let m = machine();
    let tmpdir = m.project.join(".tmp/session");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let env = [("TMPDIR", tmpdir.to_str().unwrap())];
    // The host's other folders there (git's views' state) are made again, so that the next
    // command can start.
    let swap = r#"up="$(dirname "$TMPDIR")"; mv "$up" "$up-old" && mkdir "$up" && for d in "$up-old"/handoff-git-*; do mkdir "$up/${d##*/}"; done; ln -s "$HOME" "$TMPDIR" && echo swapped"#;
    let write = r#"echo pwned > "$TMPDIR/planted.txt"; echo "wrote: $?""#;
    let planted = m.home.join("planted.txt");
    let (results, _) = turn(&m, &[swap, write], &[], &env).await;
    assert!(!planted.exists(), "the second command wrote in the home folder: {results:?}");
    // Refused before it runs, and said why.
    assert!(results[0].contains("Set TMPDIR to a folder outside the project"), "{results:?}");
    // Control: outside the sandbox the same two commands reach the home folder.
    std::fs::remove_dir_all(m.project.join(".tmp")).unwrap();
    let _ = std::fs::remove_dir_all(m.project.join(".tmp-old"));
    std::fs::create_dir_all(&tmpdir).unwrap();
    let (results, _) = turn(&m, &[swap, write], OFF, &env).await;
    assert!(planted.exists(), "the control did not reach the home folder: {results:?}");
}
