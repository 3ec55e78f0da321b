//! `mock-model-server [--port N] [--default-text TEXT] [--lean]`: the scriptable mock model server as a
//! process, for Lua end-to-end tests and benchmarks. Prints its base URL as the only line on
//! stdout once it listens, then serves until killed, interrupted or its stdin closes (so a
//! parent that dies cannot leave it behind). A stdin that is `/dev/null` is not watched, so
//! `mock-model-server &` in a script keeps running.
#![allow(clippy::print_stdout)]

use std::io::Write;

use clap::Parser;
use handoff_mock::{MockReply, MockServer};
use tokio::io::AsyncReadExt;

#[derive(Parser)]
#[command(about = "Scriptable OpenAI/Anthropic mock model server")]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Reply used when no scripted reply is queued.
    #[arg(long)]
    default_text: Option<String>,
    /// Keep serving when stdin closes.
    #[arg(long)]
    ignore_stdin: bool,
    /// Record each request's size only: no parsing or keeping of bodies (benchmarks of large
    /// requests, where the mock's own parse would be most of the measured time).
    #[arg(long)]
    lean: bool,
}

fn stdin_is_dev_null() -> bool {
    std::fs::read_link("/proc/self/fd/0").is_ok_and(|p| p == std::path::Path::new("/dev/null"))
}

async fn stdin_closed() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 4096];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = MockServer::start_on(args.port).await?;
    server.set_lean(args.lean);
    if let Some(text) = &args.default_text {
        server.set_default(MockReply::text(text));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.openai_base_url())?;
    out.flush()?;
    drop(out);
    if args.ignore_stdin || stdin_is_dev_null() {
        tokio::signal::ctrl_c().await?;
    } else {
        tokio::select! {
            _ = stdin_closed() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    // tokio's stdin reader sits on a blocking thread that would keep the runtime alive.
    std::process::exit(0)
}
