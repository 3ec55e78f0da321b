//! `handoff-nvim`: dispatches to the Neovim host (`rpc`, the default) or the headless CLI.

use std::process::ExitCode;

use clap::Parser;
use handoff_nvim::cli::{exit, Cli, Command};
use handoff_nvim::core::config::Settings;

fn init_logging(cli: &Cli, is_rpc: bool) {
    use tracing_subscriber::EnvFilter;
    // rmcp logs each server's whole handshake at info: its warnings are what the log needs.
    let filter = EnvFilter::try_from_env("HANDOFF_LOG").unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    if let Some(path) = &cli.log_file {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        if let Ok(file) = options.open(path) {
            // The host's stderr goes to the log too: Neovim drops it, and a panic's default
            // report or a library's complaint written there would be lost.
            #[cfg(unix)]
            if is_rpc {
                use std::os::fd::AsRawFd;
                // SAFETY: dup2 on two descriptors this process owns; nothing else writes yet.
                unsafe { libc::dup2(file.as_raw_fd(), libc::STDERR_FILENO) };
            }
            tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(file).init();
            handoff_nvim::core::task::install_panic_hook();
            return;
        }
    }
    // The host's stdout is the RPC channel and its stderr is discarded: no file, no logs.
    // The CLI tells the user what matters itself (one line per failure or load warning), so its
    // stderr only carries errors unless HANDOFF_LOG asks for more.
    if !is_rpc {
        use std::io::IsTerminal;
        let filter = EnvFilter::try_from_env("HANDOFF_LOG").unwrap_or_else(|_| EnvFilter::new("error"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init();
    }
}

fn main() -> ExitCode {
    // The sandbox's helper, once per bash command: nothing else is set up for it.
    let helper = [
        handoff_nvim::core::sandbox::HELPER_COMMAND,
        handoff_nvim::core::sandbox::PROBE_COMMAND,
        handoff_nvim::core::sandbox::READ_RULES_COMMAND,
    ];
    if std::env::args_os().nth(1).is_some_and(|a| helper.iter().any(|h| a == *h)) {
        return handoff_nvim::sandbox::sandbox_exec_main(std::env::args_os().skip(1));
    }
    let cli = Cli::parse();
    // The ACP agent's stdout is its JSON-RPC channel too: it logs as the host does.
    let is_rpc = cli.command.as_ref().is_none_or(|c| matches!(c, Command::Rpc | Command::Acp));
    init_logging(&cli, is_rpc);
    let Cli { settings, command, trust_project_mcp, .. } = cli;
    let mut settings = Settings::from(settings);
    if trust_project_mcp {
        settings.mcp.get_or_insert_with(Default::default).trust_project = true;
    }
    let command = command.unwrap_or(Command::Rpc);
    if let Some(result) = handoff_nvim::cli::run_local(&command, &settings) {
        return exit_code(result);
    }
    // What confines sandboxed commands is taken now, before any command can run: nothing a
    // command writes later changes it (`sandbox::helper`).
    handoff_nvim::core::sandbox::helper::take_at_start();
    handoff_nvim::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let result = runtime.block_on(async move {
        // The front ends do not depend on each other: the executable picks the one named.
        match command {
            Command::Rpc => handoff_nvim::nvim::serve(settings).await.map(|()| ExitCode::from(exit::OK)),
            Command::Acp => handoff_nvim::acp::serve(settings).await.map(|()| ExitCode::from(exit::OK)),
            command => handoff_nvim::cli::run(command, settings).await,
        }
    });
    // MCP servers (and every other process group the host holds) end with the process.
    handoff_nvim::core::process_groups::end_all();
    // tokio's stdin reader would keep the runtime alive: do not wait for blocking tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    handoff_nvim::core::sandbox::remove_private_tmpdir();
    exit_code(result)
}

fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::FAILURE)
        }
    }
}

