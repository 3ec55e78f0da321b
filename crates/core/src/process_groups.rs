//! The process groups the host starts and must not outlive it: each MCP stdio server leads one
//! (with whatever it starts), and so does each bash command (with what it leaves in the
//! background). The host kills a group when it is done with it, and every group left at its
//! exit ([`end_all`]). When the host is killed outright (SIGKILL, the OOM killer) nothing of it
//! runs any more: a *keeper* does it.
//!
//! The keeper is a small `sh` started with the first group (on a thread: its fork and exec stay
//! off the command's path), in a process group of its own (a Ctrl-C in the terminal does not
//! reach it). It reads the groups as they come and go from a pipe whose write end only the host
//! holds (close-on-exec: no child inherits it), and when that end closes (the host exits,
//! however it died) it kills the groups still listed and ends. A group the host ended or let go
//! is taken off the list first, so the keeper never signals a group number the system may since
//! have given to someone else.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Mutex};

use crate::sync::lock;

/// The keeper's program: the groups as lines on stdin (`N` adds one, `-N` takes it off), until
/// the end of the input; then each group still listed is killed. Builtins only (no process is
/// started per line).
const KEEPER: &str = r#"set --
while read -r g; do
  case $g in
    -*) n=${g#-}; kept=; for x in "$@"; do [ "$x" = "$n" ] || kept="$kept $x"; done; set -- $kept ;;
    *) set -- "$@" "$g" ;;
  esac
done
for g in "$@"; do kill -s KILL -- "-$g" 2>/dev/null; done"#;

struct Groups {
    /// The groups the host started and has not ended yet.
    live: Vec<i32>,
    /// The lines for the keeper, to the thread that starts it and writes them to it (made with
    /// the first group: the keeper's fork and exec stay off the command's path).
    keeper: Option<mpsc::Sender<String>>,
}

static GROUPS: Mutex<Groups> = Mutex::new(Groups { live: Vec::new(), keeper: None });

impl Groups {
    /// Tells the keeper a line (in order), starting it with the first one.
    fn tell(&mut self, line: String) {
        let keeper = self.keeper.get_or_insert_with(keeper_thread);
        // A keeper that is gone was told in the log once; its lines go nowhere.
        let _ = keeper.send(line);
    }
}

/// Starts the keeper on a thread of its own and hands it each line sent.
fn keeper_thread() -> mpsc::Sender<String> {
    let (lines, received) = mpsc::channel::<String>();
    let started = std::thread::Builder::new().name("process-groups-keeper".into()).spawn(move || {
        let (_process, mut tell) = match start_keeper() {
            Ok(keeper) => keeper,
            Err(e) => return tracing::warn!("cannot start the keeper of the host's process groups (they outlive a killed host): {e}"),
        };
        for line in received {
            // One short line: a pipe takes it whole (at most PIPE_BUF bytes are written at once).
            if let Err(e) = tell.write_all(line.as_bytes()) {
                return tracing::warn!("the keeper of the host's process groups is gone: {e}");
            }
        }
    });
    if let Err(e) = started {
        tracing::warn!("cannot start the keeper of the host's process groups (they outlive a killed host): {e}");
    }
    lines
}

/// The keeper, and the write end of its input (kept with it for the host's life; the keeper is
/// never waited for).
fn start_keeper() -> std::io::Result<(Child, ChildStdin)> {
    let mut command = Command::new("/bin/sh");
    command.args(["-c", KEEPER]).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).current_dir("/").env_clear();
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut process = command.spawn()?;
    let tell = process.stdin.take().ok_or_else(|| std::io::Error::other("no pipe to the keeper"))?;
    Ok((process, tell))
}

/// `group` (a child that leads a process group: its pid) is the host's until [`release`] or
/// [`kill`]: it is killed with the host.
pub fn adopt(group: i32) {
    if group <= 1 {
        return;
    }
    let mut groups = lock(&GROUPS);
    // A bash command's background group stays listed after its command; one whose processes
    // have all ended is let go here, before its number can be given to anyone else's group.
    let ended: Vec<i32> = groups.live.iter().copied().filter(|g| !group_exists(*g)).collect();
    for gone in ended {
        groups.live.retain(|g| *g != gone);
        groups.tell(format!("-{gone}\n"));
    }
    groups.live.push(group);
    groups.tell(format!("{group}\n"));
}

#[cfg(unix)]
fn group_exists(group: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists and may be signalled.
    unsafe { libc::kill(-group, 0) == 0 }
}

#[cfg(not(unix))]
fn group_exists(_group: i32) -> bool {
    true
}

/// `group` is no longer the host's to end (it ended, or is left running on purpose).
pub fn release(group: i32) {
    let mut groups = lock(&GROUPS);
    if let Some(at) = groups.live.iter().position(|g| *g == group) {
        groups.live.swap_remove(at);
        groups.tell(format!("-{group}\n"));
    }
}

/// Kills `group` now (and releases it).
pub fn kill(group: i32) {
    release(group);
    kill_now(group);
}

/// Kills every group the host still holds (its exit).
pub fn end_all() {
    let live = {
        let mut groups = lock(&GROUPS);
        let live = std::mem::take(&mut groups.live);
        for group in &live {
            groups.tell(format!("-{group}\n"));
        }
        live
    };
    for group in live {
        kill_now(group);
    }
}

#[cfg(unix)]
fn kill_now(group: i32) {
    if group <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill_now(_group: i32) {}
