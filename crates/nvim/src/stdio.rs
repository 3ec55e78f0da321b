//! The RPC channel on stdin/stdout.
//!
//! Neovim's `jobstart(…, {rpc = true})` hands the job socketpairs as fds 0 and 1. Used as the
//! Unix sockets they are, a round trip costs 20–50 µs; through tokio's blocking stdin reader
//! (nvim-rs's `new_parent`) 60–100 µs, and that reader also keeps the runtime alive at exit.
//! Plain pipes (a host started by hand, a test harness) fall back to tokio's stdin/stdout.

use std::pin::Pin;

use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Where msgpack-RPC is read from.
pub type Reader = Pin<Box<dyn futures::io::AsyncRead + Send>>;
/// Where msgpack-RPC is written to (the `Handler::Writer` of the host).
pub type Writer = Box<dyn futures::io::AsyncWrite + Send + Unpin>;

/// The two halves of the channel to Neovim.
pub fn channel() -> std::io::Result<(Reader, Writer)> {
    #[cfg(unix)]
    if let Some(pair) = unix_sockets()? {
        return Ok(pair);
    }
    let reader: Reader = Box::pin(tokio::io::stdin().compat());
    let stdout = tokio::fs::File::from_std(nvim_rs::create::unbuffered_stdout()?);
    let writer: Writer = Box::new(stdout.compat_write());
    Ok((reader, writer))
}

/// fds 0 and 1 as tokio Unix streams, when both are sockets.
#[cfg(unix)]
fn unix_sockets() -> std::io::Result<Option<(Reader, Writer)>> {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    fn socket(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Option<UnixStream>> {
        let owned: OwnedFd = fd.try_clone_to_owned()?;
        let stream = UnixStream::from(owned);
        // getsockname fails with ENOTSOCK on a pipe or a file: then it is not ours to use.
        if stream.local_addr().is_err() {
            return Ok(None);
        }
        stream.set_nonblocking(true)?;
        Ok(Some(stream))
    }
    let (Some(input), Some(output)) = (socket(std::io::stdin().as_fd())?, socket(std::io::stdout().as_fd())?)
    else {
        return Ok(None);
    };
    let input = tokio::net::UnixStream::from_std(input)?;
    let output = tokio::net::UnixStream::from_std(output)?;
    let reader: Reader = Box::pin(input.compat());
    let writer: Writer = Box::new(output.compat_write());
    Ok(Some((reader, writer)))
}
