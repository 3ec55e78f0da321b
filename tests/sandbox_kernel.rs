//! The sandbox's kernel-level confinement, round two (`:help handoff-sandbox`): what Landlock
//! does not cover, closed by the command's namespaces and its seccomp filter. Each way out is
//! tried as a prompt injection would, through the real CLI with `--yes` against the mock model
//! (default sandbox: `workspace-write`, network off), and each has its control: the same call
//! under `--sandbox off` reaches. Then what must keep working beside each.
//!
//! - metadata outside the writable folders (`chmod`, `chown`, `utimes`, `setxattr`): the whole
//!   tree is read-only in the command's mount namespace but those folders;
//! - the terminal: no controlling terminal (`TIOCSTI` would type into the user's shell), the
//!   user's other terminals (`/dev/pts/N`) not visible, `TIOCSTI`/`TIOCLINUX` refused;
//! - the kernel's keyrings; syscalls of another ABI (i386) or x32 numbers;
//! - addressed datagrams (`socketpair(AF_UNIX, SOCK_DGRAM)` + `sendmsg` to a path), and other
//!   programs' sockets with the network on;
//! - descriptors the namespace's pid 1 inherited, reachable as `/proc/1/fd/N`.
//!
//! Where this kernel cannot enforce the sandbox, a test prints `SKIPPED <name>: <why>` and
//! passes; with `HANDOFF_REQUIRE_SANDBOX=1` (CI) that is a failure instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;

use common::machine::{machine_with, turn, turn_wrapped, OFF};
use serde_json::json;

/// The model's bash calls, one per command, for [`turn_wrapped`].
fn bash_calls(commands: &[&str]) -> Vec<(&'static str, serde_json::Value)> {
    commands.iter().map(|c| ("bash", json!({ "command": c }))).collect()
}

/// The line of `text` from `label` on (a terminal may echo an injected byte before it), for a
/// precise failure message.
fn line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines().find_map(|l| l.find(label).map(|at| &l[at..])).unwrap_or_else(|| panic!("no {label} line in {text:?}"))
}

// ---------------------------------------------------------------------------------------------
// Metadata outside the writable folders

/// Each metadata change on `target`, as `name:ok` or `name:ERRNO`: the owner (to itself: no
/// right needed but a writable mount; first, as it clears a setuid bit), a setuid bit, the
/// times, an extended attribute.
fn metadata_changes(target: &Path) -> String {
    format!(
        r#"python3 - <<'PY'
import errno, os
target = "{}"
def attempt(name, change):
    try:
        change()
        print(name + ":ok")
    except OSError as e:
        print(name + ":" + errno.errorcode[e.errno])
attempt("chown", lambda: os.chown(target, os.getuid(), os.getgid()))
attempt("chmod", lambda: os.chmod(target, 0o4777))
attempt("utime", lambda: os.utime(target, (0, 0)))
attempt("setxattr", lambda: os.setxattr(target, "user.handoff", b"planted"))
PY"#,
        target.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_outside_the_writable_folders_cannot_change() {
    let Some((m, _)) = machine_with("metadata_outside_the_writable_folders_cannot_change", "python3") else { return };
    let target = m.outside.join("target.sh");
    std::fs::write(&target, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&target).unwrap();
    let inside = m.project.join("inside.sh");
    std::fs::write(&inside, "#!/bin/sh\n").unwrap();
    let (results, _) = turn(&m, &[&metadata_changes(&target), &metadata_changes(&inside), "touch -d 2001-01-01 \"$TMPDIR/t\" && echo tmp-ok"], &[], &[]).await;
    for op in ["chmod", "chown", "utime", "setxattr"] {
        assert_eq!(line(&results[0], op), format!("{op}:EROFS"), "{results:?}");
        // The project stays writable, metadata included.
        assert_eq!(line(&results[1], op), format!("{op}:ok"), "{results:?}");
    }
    assert!(results[2].contains("tmp-ok"), "the temp folder stays writable: {results:?}");
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(after.mode() & 0o7777, 0o644, "{results:?}");
    assert_eq!(after.mtime(), before.mtime(), "{results:?}");
    assert_eq!(after.ctime(), before.ctime(), "not even the owner was set: {results:?}");
    assert!(xattr(&target, "user.handoff").is_none(), "{results:?}");
    // Control: outside the sandbox each change lands.
    let (results, _) = turn(&m, &[&metadata_changes(&target)], OFF, &[]).await;
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(after.mode() & 0o7777, 0o4777, "{results:?}");
    assert_eq!(after.mtime(), 0, "{results:?}");
    assert_eq!(xattr(&target, "user.handoff").as_deref(), Some(&b"planted"[..]), "{results:?}");
}

/// The value of the extended attribute `name` of `path`, if it has one.
fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let name = std::ffi::CString::new(name).unwrap();
    let mut buf = [0u8; 256];
    // SAFETY: NUL-terminated strings and a buffer of ours with its length.
    let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).ok().map(|n| buf[..n].to_vec())
}

// ---------------------------------------------------------------------------------------------
// The terminal

/// Runs the CLI (the arguments after the report's path) in a new pseudo-terminal, as a user's
/// shell would: its controlling terminal, the CLI's stdin, stdout and stderr. The terminal is
/// raw (no echo, no lines), so what is typed into it, or injected, waits in its input queue as
/// is; when the CLI has exited, that queue (what the user's shell would read next) is written
/// to the report. Exits with the CLI's status.
const IN_A_TERMINAL: &str = r#"
import fcntl, os, select, sys, termios
report, argv = sys.argv[1], sys.argv[2:]
master, slave = os.openpty()
attrs = termios.tcgetattr(slave)
attrs[3] &= ~(termios.ECHO | termios.ICANON)
termios.tcsetattr(slave, termios.TCSANOW, attrs)
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.close(master)
    os.close(slave)
    os.execv(argv[0], argv)
status = None
while status is None:
    ready, _, _ = select.select([master], [], [], 0.05)
    if ready:
        try:
            os.read(master, 65536)
        except OSError:
            pass
    done, raw = os.waitpid(pid, os.WNOHANG)
    if done:
        status = raw
os.set_blocking(slave, False)
try:
    pending = os.read(slave, 4096)
except BlockingIOError:
    pending = b""
with open(report, "wb") as f:
    f.write(pending)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// Types `ZQ` then `JX` (never written together, so only an injection makes `ZQJX`) into the
/// controlling terminal with `TIOCSTI`. (Not into the other terminals of `/dev/pts`: the
/// control, as root, would type into every terminal of the machine.)
const INJECT: &str = r#"python3 - <<'PY'
import fcntl, os, termios
word = b"ZQ" + b"JX"
for path in ["/dev/tty"]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
    except OSError as e:
        print(path, "open:", e.strerror)
        continue
    try:
        for byte in word:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
        print(path, "injected")
    except OSError as e:
        print(path, "TIOCSTI:", e.strerror)
    os.close(fd)
PY"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_type_into_the_terminal_the_cli_runs_in() {
    let Some((m, python)) = machine_with("a_command_cannot_type_into_the_terminal_the_cli_runs_in", "python3") else { return };
    let report = m.outside.join("typed");
    let wrapper = [python.as_os_str(), OsStr::new("-c"), OsStr::new(IN_A_TERMINAL), report.as_os_str()];
    let calls = bash_calls(&[INJECT]);
    let (results, _) = turn_wrapped(&m, &m.project, &wrapper, &calls, &[], &[]).await;
    let typed = std::fs::read(&report).unwrap();
    assert!(!String::from_utf8_lossy(&typed).contains("ZQJX"), "the user's shell would read {typed:?}: {results:?}");
    assert!(results[0].contains("/dev/tty open: No such device or address"), "no controlling terminal: {results:?}");
    // Control: outside the sandbox the command types into the terminal.
    let (results, _) = turn_wrapped(&m, &m.project, &wrapper, &calls, OFF, &[]).await;
    let typed = std::fs::read(&report).unwrap();
    assert!(String::from_utf8_lossy(&typed).contains("ZQJX"), "the control typed nothing ({typed:?}): {results:?}");
}

/// In a terminal of its own (`pty.fork`), as `script` makes one: the child, which leads a
/// session with it as its controlling terminal, says it runs and tries `TIOCSTI` and
/// `TIOCLINUX` on it; the parent prints what it read from the terminal.
const OWN_TERMINAL: &str = r#"python3 - <<'PY'
import errno, fcntl, os, pty, termios
pid, fd = pty.fork()
if pid == 0:
    print("in-pty", flush=True)
    for name, request in (("TIOCSTI", termios.TIOCSTI), ("TIOCLINUX", getattr(termios, "TIOCLINUX", 0x541C))):
        try:
            fcntl.ioctl(0, request, b"\x02" if name == "TIOCLINUX" else b"x")
            print(name + ":ok", flush=True)
        except OSError as e:
            print(name + ":" + errno.errorcode[e.errno], flush=True)
    os._exit(0)
out = b""
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
print(out.decode().replace("\r", ""))
PY"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_terminals_are_not_visible_and_a_terminal_of_its_own_works() {
    let Some((m, _)) = machine_with("other_terminals_are_not_visible_and_a_terminal_of_its_own_works", "python3") else { return };
    // A terminal of the user's (another shell, the editor's): open while the turn runs.
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills the two ints we own; the name and settings are not asked for.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    let name = std::fs::read_link(format!("/proc/self/fd/{slave}")).unwrap();
    let number = name.file_name().unwrap().to_str().unwrap().to_string();
    let list = "ls /dev/pts; echo listed";
    let (results, _) = turn(&m, &[list, OWN_TERMINAL], &[], &[]).await;
    assert!(results[0].contains("listed") && !results[0].lines().any(|l| l.trim() == number), "{} is visible: {results:?}", name.display());
    // `script` and the like still get a terminal, and it cannot be typed into either.
    assert!(results[1].contains("in-pty"), "{results:?}");
    assert_eq!(line(&results[1], "TIOCSTI"), "TIOCSTI:EPERM", "{results:?}");
    assert_eq!(line(&results[1], "TIOCLINUX"), "TIOCLINUX:EPERM", "{results:?}");
    // Control: outside the sandbox the user's terminal is listed, and the same ioctls reach the
    // terminal's driver (a pseudo-terminal takes TIOCSTI and has no TIOCLINUX).
    let (results, _) = turn(&m, &[list, OWN_TERMINAL], OFF, &[]).await;
    assert!(results[0].lines().any(|l| l.trim() == number), "the control did not see {}: {results:?}", name.display());
    assert_eq!(line(&results[1], "TIOCSTI"), "TIOCSTI:ok", "{results:?}");
    assert_ne!(line(&results[1], "TIOCLINUX"), "TIOCLINUX:EPERM", "{results:?}");
    // SAFETY: closing the descriptors openpty gave us.
    unsafe {
        libc::close(master);
        libc::close(slave);
    }
}

// ---------------------------------------------------------------------------------------------
// Keyrings and ABIs

/// Joins a new session keyring holding a `user` key `handoff-canary` (the payload is the
/// second argument), then runs the CLI (the arguments after it) in it: the session keyring a
/// user's login would give every program. The first argument: `SYS_keyctl,SYS_add_key`.
const IN_A_KEYRING: &str = r#"
import ctypes, os, sys
keyctl, add_key = (int(n) for n in sys.argv[1].split(","))
payload, argv = sys.argv[2].encode(), sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
KEYCTL_JOIN_SESSION_KEYRING, KEY_SPEC_SESSION_KEYRING = 1, -3
if libc.syscall(L(keyctl), L(KEYCTL_JOIN_SESSION_KEYRING), None) < 0:
    sys.exit("join: " + os.strerror(ctypes.get_errno()))
if libc.syscall(L(add_key), b"user", b"handoff-canary", payload, L(len(payload)), L(KEY_SPEC_SESSION_KEYRING)) < 0:
    sys.exit("add_key: " + os.strerror(ctypes.get_errno()))
os.execv(argv[0], argv)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_keyring_is_out_of_reach() {
    let Some((m, python)) = machine_with("the_session_keyring_is_out_of_reach", "python3") else { return };
    let canary = "keyring-canary-5c1e";
    let numbers = format!("{},{}", libc::SYS_keyctl, libc::SYS_add_key);
    let wrapper = [python.as_os_str(), OsStr::new("-c"), OsStr::new(IN_A_KEYRING), OsStr::new(&numbers), OsStr::new(canary)];
    let read = format!(
        r#"python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
KEYCTL_SEARCH, KEYCTL_READ, KEY_SPEC_SESSION_KEYRING = 10, 11, -3
key = libc.syscall(L({keyctl}), L(KEYCTL_SEARCH), L(KEY_SPEC_SESSION_KEYRING), b"user", b"handoff-canary", L(0))
if key < 0:
    print("search:", os.strerror(ctypes.get_errno()))
else:
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(L({keyctl}), L(KEYCTL_READ), L(key), buf, L(256))
    print("read:", buf.raw[:n].decode() if n >= 0 else os.strerror(ctypes.get_errno()))
added = libc.syscall(L({add_key}), b"user", b"planted", b"x", L(1), L(KEY_SPEC_SESSION_KEYRING))
print("add_key:", "ok" if added >= 0 else os.strerror(ctypes.get_errno()))
PY"#,
        keyctl = libc::SYS_keyctl,
        add_key = libc::SYS_add_key
    );
    let calls = bash_calls(&[&read]);
    let (results, bodies) = turn_wrapped(&m, &m.project, &wrapper, &calls, &[], &[]).await;
    assert!(!bodies.contains(canary), "the key reached the provider: {results:?}");
    assert!(results[0].contains("search: Operation not permitted"), "{results:?}");
    assert!(results[0].contains("add_key: Operation not permitted"), "{results:?}");
    // Control: outside the sandbox the command reads the key.
    let (results, bodies) = turn_wrapped(&m, &m.project, &wrapper, &calls, OFF, &[]).await;
    assert!(bodies.contains(canary), "the control did not read the key: {results:?}");
}

/// A program that calls `getpid` as x32 would (its number with bit 30 set), or with an
/// argument through i386's `int 0x80` (where getpid is 20).
const ABI_PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        long pid;
        __asm__ volatile("int $0x80" : "=a"(pid) : "a"(20L) : "memory");
        printf("ia32 getpid: %ld\n", pid);
        return 0;
    }
    long r = syscall(0x40000000L | SYS_getpid);
    printf("x32 getpid: %ld errno %d\n", r, r < 0 ? errno : 0);
    return 0;
}
"#;

#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syscalls_of_other_abis_are_refused_or_killed() {
    let Some((m, gcc)) = machine_with("syscalls_of_other_abis_are_refused_or_killed", "gcc") else { return };
    let source = m.outside.join("abi.c");
    let program = m.outside.join("abi");
    std::fs::write(&source, ABI_PROGRAM).unwrap();
    let out = std::process::Command::new(gcc).arg("-o").arg(&program).arg(&source).output().unwrap();
    assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
    let commands = [format!("{}", program.display()), format!("{} ia32; echo \"ia32 exit: $?\"", program.display())];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (results, _) = turn(&m, &refs, &[], &[]).await;
    // The filter answers x32 itself (EPERM), before the kernel's dispatch is reached.
    assert_eq!(line(&results[0], "x32"), format!("x32 getpid: -1 errno {}", libc::EPERM), "{results:?}");
    // An i386 call is killed (SIGSYS) before it runs.
    assert!(!results[1].contains("ia32 getpid"), "{results:?}");
    assert_eq!(line(&results[1], "ia32 exit"), format!("ia32 exit: {}", 128 + libc::SIGSYS), "{results:?}");
    // Control: outside the sandbox both reach the kernel (x32: a pid where the kernel has x32,
    // ENOSYS where it does not; i386: a pid where it has IA32 emulation).
    let (results, _) = turn(&m, &refs, OFF, &[]).await;
    assert_ne!(line(&results[0], "x32"), format!("x32 getpid: -1 errno {}", libc::EPERM), "{results:?}");
    assert_ne!(line(&results[1], "ia32 exit"), format!("ia32 exit: {}", 128 + libc::SIGSYS), "{results:?}");
}

// ---------------------------------------------------------------------------------------------
// Sockets

/// Sends `in-<kind>` from one end of an AF_UNIX socketpair of each datagram kind to `path`
/// (sendmsg's own destination), and makes a socket of each kind, saying what each did.
fn datagram_attack(path: &Path) -> String {
    format!(
        r#"python3 - <<'PY'
import errno, socket
for name in ("SOCK_DGRAM", "SOCK_SEQPACKET", "SOCK_RAW"):
    kind = getattr(socket, name)
    try:
        a, b = socket.socketpair(socket.AF_UNIX, kind)
        a.sendmsg([b"in-" + name.encode()], [], 0, "{path}")
        print(name, "pair: sent")
    except OSError as e:
        print(name, "pair:", errno.errorcode[e.errno])
    try:
        socket.socket(socket.AF_UNIX, kind)
        print(name, "socket: made")
    except OSError as e:
        print(name, "socket:", errno.errorcode[e.errno])
PY"#,
        path = path.display()
    )
}

/// What the listener at `log` received, as text.
fn received(log: &UnixDatagram) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        match log.recv(&mut buf) {
            Ok(n) => out.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return out,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_datagram_is_addressed_outside_and_stream_pairs_still_talk() {
    let Some((m, _)) = machine_with("no_datagram_is_addressed_outside_and_stream_pairs_still_talk", "python3") else { return };
    // A listener outside the project, as the journal's socket is.
    let path = m.outside.join("journal.sock");
    let log = UnixDatagram::bind(&path).unwrap();
    log.set_nonblocking(true).unwrap();
    let attack = datagram_attack(&path);
    let pair = "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"pair-ok\"); print(b.recv(16).decode())'";
    let (results, _) = turn(&m, &[&attack, pair], &[], &[]).await;
    assert_eq!(received(&log), Vec::<String>::new(), "{results:?}");
    for name in ["SOCK_DGRAM", "SOCK_SEQPACKET", "SOCK_RAW"] {
        assert_eq!(line(&results[0], &format!("{name} pair")), format!("{name} pair: EPERM"), "{results:?}");
        assert_eq!(line(&results[0], &format!("{name} socket")), format!("{name} socket: EPERM"), "{results:?}");
    }
    assert!(results[1].contains("pair-ok"), "a stream socketpair still talks: {results:?}");
    // Control: outside the sandbox the datagram reaches the listener.
    let (results, _) = turn(&m, &[&attack], OFF, &[]).await;
    assert!(received(&log).contains(&"in-SOCK_DGRAM".to_string()), "the control's datagram did not arrive: {results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_network_on_other_programs_sockets_stay_out_of_reach() {
    let Some((m, _)) = machine_with("with_the_network_on_other_programs_sockets_stay_out_of_reach", "python3") else { return };
    // Another editor's socket, and a TCP server (IP is what the network setting opens).
    let editor = m.outside.join("other-editor.sock");
    let listener = UnixListener::bind(&editor).unwrap();
    listener.set_nonblocking(true).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let connect = format!(
        r#"python3 - <<'PY'
import errno, socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect("{}")
    s.send(b"in")
    print("unix: connected")
except OSError as e:
    print("unix:", errno.errorcode[e.errno])
s = socket.create_connection(("127.0.0.1", {port}))
s.send(b"in")
print("tcp: connected")
PY"#,
        editor.display()
    );
    let network = ["--network", "true"];
    let (results, _) = turn(&m, &[&connect], &network, &[]).await;
    assert!(listener.accept().is_err(), "another program's socket was reached: {results:?}");
    assert_eq!(line(&results[0], "unix"), "unix: EPERM", "{results:?}");
    assert!(results[0].contains("tcp: connected") && tcp.accept().is_ok(), "the network is on: {results:?}");
    // Control: outside the sandbox the same connect reaches it.
    let (results, _) = turn(&m, &[&connect], OFF, &[]).await;
    assert!(listener.accept().is_ok(), "the control did not connect: {results:?}");
}

// ---------------------------------------------------------------------------------------------
// The namespace's pid 1

/// Runs the CLI (the arguments after the report's path) with a pipe's write end as its
/// descriptor 7, inherited as an editor's leaked descriptor would be; once the CLI has exited,
/// what came through the pipe (until every holder closed it, or a bound) goes to the report.
const WITH_A_DESCRIPTOR: &str = r#"
import os, select, sys, time
report, argv = sys.argv[1], sys.argv[2:]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.dup2(w, 7, inheritable=True)
    os.close(w)
    os.execv(argv[0], argv)
os.close(w)
_, raw = os.waitpid(pid, 0)
got, deadline = b"", time.monotonic() + 10
while time.monotonic() < deadline:
    ready, _, _ = select.select([r], [], [], 0.1)
    if ready:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        got += chunk
with open(report, "wb") as f:
    f.write(got)
sys.exit(os.waitstatus_to_exitcode(raw))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_pid_1_inherited_are_out_of_reach() {
    let Some((m, python)) = machine_with("descriptors_pid_1_inherited_are_out_of_reach", "python3") else { return };
    let report = m.outside.join("through-the-descriptor");
    let wrapper = [python.as_os_str(), OsStr::new("-c"), OsStr::new(WITH_A_DESCRIPTOR), report.as_os_str()];
    // The command's parent: pid 1 of its namespace in the sandbox, the CLI outside it.
    let calls = bash_calls(&["echo pwned > /proc/$PPID/fd/7; echo \"tried $PPID: $?\""]);
    let (results, _) = turn_wrapped(&m, &m.project, &wrapper, &calls, &[], &[]).await;
    assert!(results[0].contains("tried 1:"), "{results:?}");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "", "the command wrote through pid 1's descriptor: {results:?}");
    // Control: outside the sandbox the command writes through its parent's descriptor.
    let (results, _) = turn_wrapped(&m, &m.project, &wrapper, &calls, OFF, &[]).await;
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "pwned\n", "{results:?}");
}
