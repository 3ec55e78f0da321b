//! Host → Lua: every record reaches one Lua function, `require("handoff.events").dispatch(batch)`.
//!
//! Two tasks. The *collector* drains the agent's broadcast at once (so it never lags behind a
//! fast stream) into the [`Outbox`], merging consecutive deltas. The *flusher* is the only task
//! that calls Neovim for events: it sends what has accumulated, at most once per
//! [`FRAME`], and awaits each call to the end (an nvim-rs call future must never be dropped, and
//! calls in flight together are not ordered — one caller keeps the buffer edits in order).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, Notify};
use tokio::time::Instant;

use super::protocol::{self, Record};
use super::stdio::Writer;
use super::transcript;
use handoff_core::agent::{lock, AgentSession};
use handoff_core::controller::Controller;

/// The shortest time between two event batches sent to Neovim.
pub const FRAME: Duration = Duration::from_millis(8);

/// Bytes of streamed text per batch at most; the rest goes in the next frame. Neovim's cost is
/// per byte, and mostly after the call returns: the redraw runs the chat's markdown regex syntax
/// over every new line (~0.2 ms per line here) before the main loop takes its next event, so
/// what a batch carries bounds how long the editor is blocked. Measured with bench/bench.py §4
/// (full-speed mock, p99 of a timer's lateness): 256 KiB per 16 ms frame 63 ms, 16 KiB 48 ms,
/// 4 KiB 4.8 ms on a quiet machine; a redraw after 4 KiB took ~7 ms, after 2 KiB ~3.9 ms. Half
/// as much twice as often keeps the throughput (~32k tokens/s, ten times the fastest hosted
/// models) and halves the longest block: under load, p99 22 ms → 14.6 ms (8 runs, interleaved).
const MAX_BATCH_TEXT: usize = 2 * 1024;

const DISPATCH: &str = "return require('handoff.events').dispatch(...)";

enum Item {
    Delta { thinking: bool, text: String, tokens: u64 },
    /// Boxed: a record (a handoff's outcome with its document and paths) is many times a
    /// delta's size, and the queue holds mostly deltas.
    Record(Box<Record>),
}

#[derive(Default)]
struct Pending {
    items: VecDeque<Item>,
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
    /// Queues a record. A running tool's output replaces its previous update still waiting:
    /// only the newest is worth showing, and while Neovim is slow or stopped (suspended with
    /// `^Z`, a blocking prompt) updates would otherwise pile up here for as long as the command
    /// prints, then all be drawn at once.
    pub fn push(&self, record: Record) {
        self.push_all([record]);
    }

    /// Queues records that go out in one batch (a session switch and its transcript: the chat
    /// never shows the old session under the new one's name).
    pub fn push_all(&self, records: impl IntoIterator<Item = Record>) {
        let mut pending = lock(&self.pending);
        for record in records {
            if record.starts_message() {
                pending.tokens = 0;
            }
            if let Record::ToolUpdate { id, .. } = &record {
                let waiting = pending
                    .items
                    .iter_mut()
                    .rev()
                    .find(|item| matches!(item, Item::Record(r) if matches!(&**r, Record::ToolUpdate { id: w, .. } if w == id)));
                if let Some(waiting) = waiting {
                    *waiting = Item::Record(Box::new(record));
                    continue;
                }
            }
            pending.items.push_back(Item::Record(Box::new(record)));
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// Whether streamed text waits for the next frame (text is sent at most once per frame,
    /// so that a fast stream is a few batches a frame, not one per token). Not once its
    /// message's end is queued behind it: nothing more will join it, and the reply's end would
    /// reach the chat a frame late (bench/agent_editor.py: 13 ms from prompt to the reply's
    /// end against 6 ms in codecompanion).
    /// Text beyond one batch still waits: the frames pace a backlog (Neovim fell behind).
    fn text_waits_for_frame(&self) -> bool {
        let pending = lock(&self.pending);
        let text: usize = pending.items.iter().map(|i| if let Item::Delta { text, .. } = i { text.len() } else { 0 }).sum();
        match pending.items.iter().rposition(|i| matches!(i, Item::Delta { .. })) {
            Some(last) => {
                text > MAX_BATCH_TEXT
                    || !pending.items.iter().skip(last).any(|i| matches!(i, Item::Record(r) if matches!(**r, Record::MessageEnd(_))))
            }
            None => false,
        }
    }

    fn push_delta(&self, thinking: bool, text: &str) {
        let mut pending = lock(&self.pending);
        pending.tokens += 1;
        let tokens = pending.tokens;
        match pending.items.back_mut() {
            Some(Item::Delta { thinking: t, text: buf, tokens: n }) if *t == thinking => {
                buf.push_str(text);
                *n = tokens;
            }
            _ => pending.items.push_back(Item::Delta { thinking, text: text.to_string(), tokens }),
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// Takes what is pending, up to `MAX_BATCH_TEXT` bytes of text (a longer delta is split).
    fn take(&self) -> Vec<Record> {
        let delta = |thinking: bool, text: String, tokens: u64| {
            if thinking {
                Record::ThinkingDelta { text, tokens }
            } else {
                Record::Delta { text, tokens }
            }
        };
        let mut pending = lock(&self.pending);
        let mut out = Vec::new();
        let mut room = MAX_BATCH_TEXT;
        while room > 0 {
            let Some(item) = pending.items.front_mut() else { break };
            if let Item::Delta { thinking, text, tokens } = item {
                if text.len() > room {
                    let mut cut = room;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    if cut > 0 {
                        let head: String = text.drain(..cut).collect();
                        out.push(delta(*thinking, head, *tokens));
                    }
                    break;
                }
                room -= text.len();
            }
            match pending.items.pop_front() {
                Some(Item::Delta { thinking, text, tokens }) => out.push(delta(thinking, text, tokens)),
                Some(Item::Record(v)) => out.push(*v),
                None => break,
            }
        }
        out
    }

    fn is_empty(&self) -> bool {
        lock(&self.pending).items.is_empty()
    }
}

/// Moves the agent's events into the outbox until its channel closes.
/// Starts the external agent the controller's session runs on, if it does, in the background:
/// what it offers (its modes, models, commands) is there before the session's first prompt.
pub fn start_external_agent(controller: &Arc<Controller>) {
    let controller = controller.clone();
    handoff_core::task::spawn("starting the session's external agent", async move {
        if let Err(e) = controller.agent().start_external().await {
            tracing::warn!("the session's external agent did not start: {e}");
        }
    });
}

pub fn spawn_collector(controller: Arc<Controller>, outbox: Arc<Outbox>) -> tokio::task::JoinHandle<()> {
    let mut events = controller.agent().subscribe();
    handoff_core::task::spawn("the event collector", async move {
        let agent: &AgentSession = controller.agent();
        // Events were lost to a lag during a run: the reply streaming then is in no transcript
        // yet (it is stored at its end), so the run's end draws the session again, whole.
        let mut redraw_at_end = false;
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some((thinking, delta)) = transcript::delta_of(&event) {
                        outbox.push_delta(thinking, delta);
                        continue;
                    }
                    match transcript::event_record(&event, agent) {
                        Some(switch @ Record::SessionSwitch { .. }) => {
                            // Drawn as it was at the switch: a run that started in it since
                            // (the automatic handoff's continuation) comes as the events that
                            // follow, once.
                            let leaf = match &event {
                                handoff_core::agent::AgentEvent::SessionSwitch { leaf, .. } => leaf.clone(),
                                _ => None,
                            };
                            let transcript = transcript::opened_upto(&controller, leaf).await;
                            outbox.push_all([switch, Record::Transcript(Box::new(transcript))]);
                            start_external_agent(&controller);
                        }
                        Some(end @ Record::HandoffEnd { .. }) => {
                            let redraw = match &event {
                                handoff_core::agent::AgentEvent::HandoffEnd { redraw_upto, .. } => redraw_upto.clone(),
                                _ => None,
                            };
                            match redraw {
                                // An automatic handoff that created nothing: its request and
                                // reply were drawn as they streamed but are in no session.
                                Some(leaf) => {
                                    let transcript = transcript::opened_upto(&controller, Some(leaf)).await;
                                    outbox.push_all([end, Record::Transcript(Box::new(transcript))]);
                                }
                                None => outbox.push(end),
                            }
                        }
                        Some(end @ Record::AgentEnd { .. }) if redraw_at_end => {
                            redraw_at_end = false;
                            let transcript = transcript::transcript(&controller, transcript::PAGE);
                            outbox.push_all([end, Record::Transcript(Box::new(transcript))]);
                        }
                        Some(record) => outbox.push(record),
                        None => {}
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    // Only when the machine stalls or the model streams faster than the editor
                    // reads: resync now, and again at the run's end (the reply in flight).
                    tracing::warn!(missed = n, "event collector lagged; sending the whole transcript");
                    outbox.push(Record::Transcript(Box::new(transcript::transcript(&controller, transcript::PAGE))));
                    redraw_at_end = true;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    })
}

/// Sends batches to Neovim until the connection breaks.
pub fn spawn_flusher(nvim: nvim_rs::Neovim<Writer>, outbox: Arc<Outbox>) -> tokio::task::JoinHandle<()> {
    handoff_core::task::spawn("the event flusher", async move {
        let mut last = Instant::now() - FRAME;
        loop {
            if outbox.is_empty() {
                outbox.ready.notified().await;
            }
            // Streamed text waits for the next frame; lifecycle records alone (a handoff's end,
            // a session switch) go out at once, so the editor reacts without a frame's delay.
            if outbox.text_waits_for_frame() {
                tokio::time::sleep_until(last + FRAME).await;
            }
            let batch = outbox.take();
            if batch.is_empty() {
                continue;
            }
            // A transcript follows a session's load: once it is sent, what the load freed goes
            // back to the system (see `memory`).
            let loaded = batch.iter().any(|r| matches!(r, Record::Transcript(_)));
            // Only text starts the frame: a turn's first records (sent at once) must not hold
            // its first text back by a frame (bench/agent_editor.py --stamp: 7.8 ms from the
            // agent's first chunk to the chat, 0.6 ms in codecompanion).
            if batch.iter().any(|r| matches!(r, Record::Delta { .. } | Record::ThinkingDelta { .. })) {
                last = Instant::now();
            }
            let arg = match protocol::encode("an event batch", &batch) {
                Ok(v) => v,
                Err(e) => {
                    // Nothing is dropped silently: the user hears that updates were lost.
                    tracing::error!("{e}");
                    let notice = Record::Notice(handoff_core::agent::Notice::new(
                        handoff_core::agent::Level::Error,
                        format!("handoff.nvim: some updates could not be shown ({e}); reopen the chat to redraw it"),
                    ));
                    match protocol::encode("a notice", &vec![notice]) {
                        Ok(v) => v,
                        Err(_) => continue,
                    }
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
            if loaded {
                tokio::task::spawn_blocking(super::memory::release_freed_memory);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Item;

    #[test]
    fn consecutive_deltas_merge_and_records_keep_their_place() {
        let outbox = Outbox::default();
        outbox.push(Record::MessageStart(Item::bare_assistant(None)));
        outbox.push_delta(true, "hm");
        outbox.push_delta(false, "a");
        outbox.push_delta(false, "b");
        outbox.push(Record::MessageEnd(Item::bare_assistant(None)));
        outbox.push(Record::MessageStart(Item::bare_assistant(None)));
        outbox.push_delta(false, "c");
        let batch = outbox.take();
        assert!(matches!(batch[0], Record::MessageStart(_)));
        assert!(matches!(&batch[1], Record::ThinkingDelta { text, .. } if text == "hm"));
        assert_eq!(batch[2], Record::Delta { text: "ab".into(), tokens: 3 });
        assert!(matches!(batch[3], Record::MessageEnd(_)));
        assert!(matches!(batch[4], Record::MessageStart(_)));
        assert_eq!(batch[5], Record::Delta { text: "c".into(), tokens: 1 }, "a new message counts from zero");
        assert_eq!(batch.len(), 6);
        assert!(outbox.is_empty());
    }

    #[test]
    fn text_waits_for_a_frame_until_its_message_ends() {
        let outbox = Outbox::default();
        assert!(!outbox.text_waits_for_frame(), "nothing queued");
        outbox.push(Record::MessageStart(Item::bare_assistant(None)));
        assert!(!outbox.text_waits_for_frame(), "records alone go at once");
        outbox.push_delta(false, "a");
        assert!(outbox.text_waits_for_frame(), "text streaming");
        outbox.push(Record::MessageEnd(Item::bare_assistant(None)));
        assert!(!outbox.text_waits_for_frame(), "its message ended: nothing more joins it");
        outbox.push(Record::MessageStart(Item::bare_assistant(None)));
        outbox.push_delta(false, "b");
        assert!(outbox.text_waits_for_frame(), "the next message's text streams");
        let _ = outbox.take();
        // A backlog larger than a batch is still paced, its end queued or not.
        outbox.push_delta(false, &"x".repeat(MAX_BATCH_TEXT + 1));
        outbox.push(Record::MessageEnd(Item::bare_assistant(None)));
        assert!(outbox.text_waits_for_frame(), "a backlog goes a batch a frame");
    }

    #[test]
    fn a_tool_update_replaces_the_one_still_waiting_for_that_tool() {
        let outbox = Outbox::default();
        let update = |id: &str, n: u64| Record::ToolUpdate { id: id.into(), tail: format!("line {n}\n"), earlier: n };
        outbox.push(update("a", 1));
        outbox.push(update("b", 1));
        outbox.push(Record::Notice(handoff_core::agent::Notice::new(handoff_core::agent::Level::Info, "n")));
        for n in 2..1000 {
            outbox.push(update("a", n));
        }
        let batch = outbox.take();
        assert_eq!(batch.len(), 3, "{batch:?}");
        assert_eq!(batch[0], update("a", 999), "the newest, where the first waited");
        assert_eq!(batch[1], update("b", 1));
        // Once sent, the next update is queued again.
        outbox.push(update("a", 1000));
        assert_eq!(outbox.take(), vec![update("a", 1000)]);
    }

    #[test]
    fn a_huge_delta_is_split_across_batches_on_char_boundaries() {
        let outbox = Outbox::default();
        let big = "é".repeat(MAX_BATCH_TEXT); // two bytes each
        outbox.push_delta(false, &big);
        let mut joined = String::new();
        let mut batches = 0;
        while !outbox.is_empty() {
            let batch = outbox.take();
            assert_eq!(batch.len(), 1);
            let Record::Delta { text, .. } = &batch[0] else { panic!("{batch:?}") };
            assert!(text.len() <= MAX_BATCH_TEXT);
            joined.push_str(text);
            batches += 1;
        }
        assert_eq!(batches, 2);
        assert_eq!(joined, big);
    }

    #[test]
    fn a_batch_carries_a_bounded_amount_of_text() {
        let outbox = Outbox::default();
        let big = "x".repeat(MAX_BATCH_TEXT);
        outbox.push_delta(false, &big);
        outbox.push(Record::MessageEnd(Item::bare_assistant(None)));
        outbox.push_delta(false, "tail");
        assert_eq!(outbox.take().len(), 1);
        let rest = outbox.take();
        assert_eq!(rest.len(), 2);
        assert!(matches!(&rest[1], Record::Delta { text, .. } if text == "tail"));
    }
}
