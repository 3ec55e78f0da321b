//! Host → Lua: every record reaches one Lua function, `require("handoff.events").dispatch(batch)`.
//!
//! Two tasks. The *collector* drains the agent's broadcast at once (so it never lags behind a
//! fast stream) into the [`Outbox`], merging consecutive deltas. The *flusher* is the only task
//! that calls Neovim for events: it sends what has accumulated, at most once per
//! [`FRAME`], and awaits each call to the end (an nvim-rs call future must never be dropped, and
//! calls in flight together are not ordered — one caller keeps the buffer edits in order).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{broadcast, Notify};
use tokio::time::Instant;

use super::transcript;
use super::stdio::Writer;
use crate::agent::{lock, AgentEvent, AgentSession};

/// The shortest time between two event batches sent to Neovim (one frame at 60 Hz).
pub const FRAME: Duration = Duration::from_millis(16);

/// Bytes of streamed text per batch at most; the rest goes in the next frame, so one call
/// never makes Neovim chew on megabytes at once.
const MAX_BATCH_TEXT: usize = 256 * 1024;

const DISPATCH: &str = "return require('handoff.events').dispatch(...)";

enum Item {
    Delta { thinking: bool, text: String, tokens: u64 },
    Record(Value),
}

#[derive(Default)]
struct Pending {
    items: Vec<Item>,
    /// Deltas of the assistant message being streamed (an estimate of its output tokens).
    tokens: u64,
}

/// Records waiting for the next flush.
#[derive(Default)]
pub struct Outbox {
    pending: Mutex<Pending>,
    ready: Notify,
}

impl Outbox {
    /// Queues a record (a table with a `type` member).
    pub fn push(&self, record: Value) {
        let mut pending = lock(&self.pending);
        if record.get("type").and_then(Value::as_str) == Some("message_start") {
            pending.tokens = 0;
        }
        pending.items.push(Item::Record(record));
        drop(pending);
        self.ready.notify_one();
    }

    fn push_delta(&self, thinking: bool, text: &str) {
        let mut pending = lock(&self.pending);
        pending.tokens += 1;
        let tokens = pending.tokens;
        match pending.items.last_mut() {
            Some(Item::Delta { thinking: t, text: buf, tokens: n }) if *t == thinking => {
                buf.push_str(text);
                *n = tokens;
            }
            _ => pending.items.push(Item::Delta { thinking, text: text.to_string(), tokens }),
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// Takes what is pending, up to about `MAX_BATCH_TEXT` bytes of text.
    fn take(&self) -> Vec<Value> {
        let mut pending = lock(&self.pending);
        let mut size = 0;
        let mut n = 0;
        for item in &pending.items {
            if size >= MAX_BATCH_TEXT {
                break;
            }
            if let Item::Delta { text, .. } = item {
                size += text.len();
            }
            n += 1;
        }
        pending
            .items
            .drain(..n)
            .map(|item| match item {
                Item::Delta { thinking, text, tokens } => json!({
                    "type": if thinking { "thinking_delta" } else { "delta" },
                    "text": text,
                    "tokens": tokens,
                }),
                Item::Record(v) => v,
            })
            .collect()
    }

    fn is_empty(&self) -> bool {
        lock(&self.pending).items.is_empty()
    }
}

/// Moves agent events into the outbox until the agent's channel closes.
pub fn spawn_collector(agent: Arc<AgentSession>, outbox: Arc<Outbox>) -> tokio::task::JoinHandle<()> {
    let mut events = agent.subscribe();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some((thinking, delta)) = transcript::delta_of(&event) {
                        outbox.push_delta(thinking, delta);
                        continue;
                    }
                    if let Some(record) = transcript::event_record(&event, &agent) {
                        outbox.push(record);
                    }
                    if matches!(event, AgentEvent::SessionSwitch { .. }) {
                        outbox.push(transcript::transcript(&agent));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    // Cannot happen at this channel size unless the machine stalls: resync.
                    tracing::warn!(missed = n, "event collector lagged; sending the whole transcript");
                    outbox.push(transcript::transcript(&agent));
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    })
}

/// Sends batches to Neovim until the connection breaks.
pub fn spawn_flusher(nvim: nvim_rs::Neovim<Writer>, outbox: Arc<Outbox>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = Instant::now() - FRAME;
        loop {
            if outbox.is_empty() {
                outbox.ready.notified().await;
            }
            tokio::time::sleep_until(last + FRAME).await;
            let batch = outbox.take();
            if batch.is_empty() {
                continue;
            }
            last = Instant::now();
            let arg = match rmpv::ext::to_value(Value::Array(batch)) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!("cannot encode an event batch: {e}");
                    continue;
                }
            };
            // Awaited to the end, never raced against anything (nvim-rs trap 1).
            if let Err(e) = nvim.exec_lua(DISPATCH, vec![arg]).await {
                if e.is_channel_closed() {
                    tracing::info!("Neovim went away; event flusher stops");
                    break;
                }
                tracing::error!("dispatching events to Lua failed: {e}");
            }
        }
    })
}
