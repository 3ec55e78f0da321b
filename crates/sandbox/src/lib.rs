//! The sandbox helper's entry: `handoff-sandbox sandbox-exec …` (and `handoff-nvim
//! sandbox-exec …`, the same), run once per sandboxed bash command. Over the engine's sandbox
//! only (`handoff_core::sandbox`), so that the helper's binary links little and starts fast.

use std::process::ExitCode;

/// `handoff-nvim sandbox-exec …` (and `handoff-sandbox sandbox-exec …`): the helper bash runs a
/// sandboxed command through. Restricts this process and execs the command; returns only when
/// it cannot (the command did not run). Read before anything else (no settings, no logging):
/// it runs once per command. `args`: the line after the program's name.
pub fn sandbox_exec_main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|a| a == handoff_core::sandbox::PROBE_COMMAND) {
        let within = args.nth(1).map(std::path::PathBuf::from);
        // A yes goes out on stdout as soon as it is known (`sandbox::mount_namespaces`): the
        // host goes on while this process removes the probe's folders.
        #[cfg(target_os = "linux")]
        let probed = handoff_core::sandbox::linux::probe_mounts(within.as_deref(), |probed| {
            if probed.is_ok() {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(handoff_core::sandbox::PROBE_YES).and_then(|()| out.flush());
                // The host reads to the end: stdout is given up (onto /dev/null, so that no
                // descriptor opened later takes its number).
                // SAFETY: open and dup2 on descriptors this process owns; no pointers but the
                // NUL-terminated path.
                unsafe {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if null >= 0 {
                        libc::dup2(null, 1);
                        libc::close(null);
                    }
                }
            }
        });
        #[cfg(not(target_os = "linux"))]
        let probed: Result<(), String> = Err("no mount namespaces off Linux".into());
        return match probed {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("error: {why}");
                ExitCode::FAILURE
            }
        };
    }
    if args.peek().is_some_and(|a| a == handoff_core::sandbox::READ_RULES_COMMAND) {
        return print_read_rules();
    }
    let why = match handoff_core::sandbox::HelperArgs::parse(args) {
        Err(usage) => usage,
        #[cfg(target_os = "linux")]
        Ok(args) => handoff_core::sandbox::linux::exec(&args),
        #[cfg(not(target_os = "linux"))]
        Ok(_) => format!(
            "the sandbox cannot be enforced: {}: the command was not run (--sandbox off runs commands outside the sandbox)",
            handoff_core::sandbox::Support::probe().enforceable().err().unwrap_or_default()
        ),
    };
    eprintln!("error: {why}");
    ExitCode::FAILURE
}

/// `handoff-nvim sandbox-read-rules`: what a sandboxed command would be let read now, as the host
/// hands it to the helper (`sandbox::read_rules`: NUL-separated, each a tag then a path), for
/// the benchmark and for a look (`| tr '\0' '\n'`).
fn print_read_rules() -> ExitCode {
    use std::io::Write;
    let locations = handoff_core::sandbox::protected::credential_locations();
    let (rules, _) = handoff_core::sandbox::read_rules::rules_for(&locations);
    let bytes = handoff_core::sandbox::read_rules::encode(&rules);
    match std::io::stdout().lock().write_all(&bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
