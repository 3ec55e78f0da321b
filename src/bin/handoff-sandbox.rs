//! `handoff-sandbox sandbox-exec …`: the sandbox's helper on its own, the same as `handoff-nvim
//! sandbox-exec …` (`crates/core/src/sandbox`) but quicker to start: it links only the helper's code,
//! so the loader has little to relocate before each command.

fn main() -> std::process::ExitCode {
    handoff_sandbox::sandbox_exec_main(std::env::args_os().skip(1))
}
