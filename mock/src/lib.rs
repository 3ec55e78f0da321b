//! A scriptable model server for tests, end-to-end runs and benchmarks: speaks OpenAI Chat
//! Completions, OpenAI Responses (`POST …/responses`: output items, reasoning items with
//! encrypted content) and Anthropic Messages over hand-parsed HTTP/1.1, so failure modes real servers
//! produce only by accident (torn streams, stalls, 429s, garbage events) can be staged on
//! demand. Every response is sent with `Connection: close`; streams use chunked encoding, so a
//! torn stream is a real transport error for the client, as it would be in the wild.
//!
//! In-process use: [`MockServer::start`], [`MockServer::push`]. Out of process (Lua tests, the
//! `mock-model-server` binary): `POST /__mock/push` with a [`MockReply`] JSON (or an array),
//! `POST /__mock/route` with a [`MockRoute`] (a reply for the first request whose last user
//! message contains a text), `POST /__mock/default`, `GET /__mock/requests`, `POST /__mock/reset`,
//! `POST /__mock/window` with a [`MockWindow`] JSON (`null` clears it), `POST /__mock/cache`
//! with a [`MockCache`] JSON (`null` clears it).
//!
//! A context window ([`MockServer::set_window`]): a request whose token count (the count the
//! mock reports as input, a quarter of the body's bytes) exceeds `tokens` is refused with the
//! real overflow error of the window's [`MockOverflow`] style. A refused request is recorded
//! with `refused: true` and takes no queued reply, so a test scripts replies for the accepted
//! requests only. The window stays until changed (`reset` keeps it, as it keeps the default).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};

/// What the server answers to one model request.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MockReply {
    /// A normal streamed reply: thinking chunks, then text chunks, then the stop reason.
    Text {
        chunks: Vec<String>,
        #[serde(default)]
        chunk_delay_ms: u64,
        #[serde(default)]
        first_delay_ms: u64,
        /// `stop`, `length` or `tool_calls` (mapped to Anthropic's names there).
        #[serde(default = "default_stop")]
        stop: String,
        #[serde(default)]
        thinking: Vec<String>,
    },
    /// A plain HTTP error with this body (and `retry-after` header when given).
    Status {
        status: u16,
        body: String,
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// Sends the chunks, then drops the connection mid-stream.
    Torn { chunks: Vec<String> },
    /// Sends the chunks, then the error event each API sends mid-stream (OpenAI an `error`
    /// chunk, Responses an `error` event, Anthropic `event: error`), and ends the stream.
    StreamError {
        #[serde(default)]
        chunks: Vec<String>,
        code: String,
        message: String,
    },
    /// Sends the chunks, then an event whose data is not JSON.
    Malformed { chunks: Vec<String> },
    /// OpenAI: a chunk with `choices: []` and no usage; Anthropic: an unknown event. Then the
    /// stream ends cleanly but without any finish.
    NoChoices,
    /// A complete reply without any content.
    Empty,
    /// Sends the chunks, then nothing, holding the connection until the client hangs up.
    Stall { chunks: Vec<String> },
    /// Reads the request and never answers.
    NoAnswer,
    /// One text delta of exactly `bytes` bytes (a–z repeating).
    Huge { bytes: usize },
    /// Streams back the text of the request's last user message.
    Echo,
    /// Optional text, then tool calls, streamed as each API does: OpenAI `tool_calls` deltas by
    /// `index` (id and name in the first, `function.arguments` in pieces) and finish_reason
    /// `tool_calls`; Anthropic a `tool_use` content block per call with `input_json_delta`
    /// pieces and stop_reason `tool_use`.
    ToolCalls {
        calls: Vec<MockToolCall>,
        /// Text chunks streamed before the calls.
        #[serde(default)]
        text_before: Vec<String>,
        #[serde(default)]
        chunk_delay_ms: u64,
        /// `tool_calls` unless told otherwise (`stop`, `length`: mapped for Anthropic).
        #[serde(default = "default_tool_stop")]
        stop: String,
        /// OpenAI only: all calls' first deltas, then their argument pieces alternately (call
        /// 0's first piece, call 1's first piece, …). Anthropic streams blocks one after another.
        #[serde(default)]
        interleave: bool,
    },
    /// Thinking, then optional text and tool calls, streamed as each API streams reasoning.
    /// Anthropic: a `redacted_thinking` block (when `redacted` is given), a `thinking` block of
    /// `thinking_delta`s closed by a `signature_delta` (when `signature` is given), then a text
    /// block and `tool_use` blocks. OpenAI: the thinking as deltas of `field`
    /// (`reasoning_content` unless told), then text and tool calls (signature and redacted data
    /// are Anthropic's only). Responses: a `reasoning` item of summary deltas whose
    /// `encrypted_content` is `signature` (made up when absent), then a `message` item and
    /// `function_call` items. Stops with `tool_calls` when there are calls, else `stop`.
    Reasoning {
        thinking: Vec<String>,
        #[serde(default)]
        signature: Option<String>,
        #[serde(default)]
        redacted: Option<String>,
        #[serde(default)]
        field: Option<String>,
        #[serde(default)]
        chunks: Vec<String>,
        #[serde(default)]
        calls: Vec<MockToolCall>,
    },
    /// `reply` reporting this usage, prompt-cache counts included, in each API's shape:
    /// Anthropic `input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens` in
    /// `message_start` (output in `message_delta`); OpenAI `prompt_tokens` (all of the prompt)
    /// with `prompt_tokens_details.cached_tokens` in the usage chunk (and, for cache writes,
    /// OpenRouter's `cache_write_tokens`, counted in `cached_tokens` as OpenRouter does).
    WithUsage { usage: MockUsage, reply: Box<MockReply> },
    /// These bytes as the body of a `200 text/event-stream` reply, exactly as given (a recorded
    /// or hand-written stream of any API), written in pieces of the `slices` lengths (the rest,
    /// if they add up to less, in one piece; none: all at once), each its own HTTP chunk,
    /// flushed apart, so the client reads the cuts where the test put them.
    Raw {
        bytes: Vec<u8>,
        #[serde(default)]
        slices: Vec<usize>,
    },
}

/// The mock's context window: requests of more than `tokens` tokens (a quarter of the body's
/// bytes) are refused the way `style` refuses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MockWindow {
    pub tokens: u64,
    pub style: MockOverflow,
}

/// A provider's prompt cache, as OpenAI's automatic one counts it: the longest prefix a request
/// shares with an earlier one (its tools, its system prompt, then its messages in order) is
/// read from the cache, from `min_tokens` on, in whole steps of `step` tokens. A request's
/// `cached_tokens` records it, and a reply's usage reports it (as cache reads) unless the reply
/// scripts its own. Off unless set; `reset` forgets the earlier requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MockCache {
    pub min_tokens: u64,
    pub step: u64,
}

/// Whose overflow error a [`MockWindow`] answers with, each as the real server sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MockOverflow {
    /// Chat Completions: 400, `code: context_length_exceeded`, "This model's maximum context
    /// length is N tokens. However, your messages resulted in M tokens. …".
    Openai,
    /// 400, `invalid_request_error`, "prompt is too long: M tokens > N maximum".
    Anthropic,
    /// llama.cpp's server: 400, `type: exceed_context_size_error`, "the request exceeds the
    /// available context size, try increasing it", with `n_prompt_tokens` and `n_ctx`.
    Llamacpp,
    /// 413 with a proxy's HTML page and no JSON at all.
    Bare413,
    /// The Responses API: a streamed request gets `response.created`, `response.in_progress`,
    /// then `response.failed` whose error code is `context_length_exceeded`; any other a 400
    /// with that code and `param: input`.
    Responses,
    /// llama-cpp-python's server (0.3.x, as measured): a streamed request gets 200 and an event
    /// stream that ends at once, without any event (the overflow is raised inside its stream
    /// generator), on a connection kept alive but dead: a request sent over it next is read and
    /// never answered. Any other request gets a 400 with `code: context_length_exceeded`, "This
    /// model's maximum context length is N tokens. However, you requested M tokens (P in the
    /// messages, C in the completion). …", C being the request's `max_tokens`.
    #[serde(rename = "llamacpp_python")]
    LlamacppPython,
}

impl MockWindow {
    /// The status and body this style refuses a request of `prompt` tokens and a reply limit of
    /// `completion` with (a streamed Responses refusal carries the body's error in its
    /// `response.failed` event).
    fn refusal(&self, prompt: u64, completion: u64) -> (u16, String) {
        let n = self.tokens;
        let responses_message = "Your input exceeds the context window of this model. Please adjust your input and try again.";
        let body = match self.style {
            MockOverflow::Openai => json!({ "error": {
                "message": format!("This model's maximum context length is {n} tokens. However, your messages resulted in {prompt} tokens. Please reduce the length of the messages."),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded" } }),
            MockOverflow::Anthropic => json!({ "type": "error", "error": {
                "type": "invalid_request_error", "message": format!("prompt is too long: {prompt} tokens > {n} maximum") } }),
            MockOverflow::Llamacpp => json!({ "error": {
                "code": 400, "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": n } }),
            MockOverflow::LlamacppPython => json!({ "error": {
                "message": format!("This model's maximum context length is {n} tokens. However, you requested {} tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the messages or completion.", prompt + completion),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded" } }),
            MockOverflow::Responses => json!({ "error": {
                "message": responses_message, "type": "invalid_request_error", "param": "input",
                "code": "context_length_exceeded" } }),
            MockOverflow::Bare413 => {
                let page = "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n\
                            <center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n\
                            </body>\r\n</html>\r\n";
                return (413, page.to_owned());
            }
        };
        (400, body.to_string())
    }
}

/// Token counts a reply reports, in pi's terms (`input` is the prompt not read from or written
/// to the cache).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MockUsage {
    #[serde(default)]
    pub input: u64,
    /// The reply's tokens; absent: one per chunk, as without a usage.
    #[serde(default)]
    pub output: Option<u64>,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
}

/// One tool call of [`MockReply::ToolCalls`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MockToolCall {
    /// Made up (`call_mock_<n>_<i>`, `toolu_mock_<n>_<i>`) when absent.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// The arguments text exactly as sent: it need not be valid JSON.
    pub arguments: String,
    /// How many pieces the arguments are cut into (at character boundaries).
    #[serde(default = "one")]
    pub chunks: usize,
    /// Responses only: a call of a free-form (`custom`) tool, such as Codex's grammar-defined
    /// `apply_patch`: a `custom_tool_call` item whose `input` is `arguments` (plain text, not
    /// JSON), streamed as `response.custom_tool_call_input.delta` pieces and `.done`. Chat
    /// Completions and Anthropic send it as any other call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free_form: bool,
}

impl MockToolCall {
    /// A call with these JSON arguments, sent in `chunks` pieces.
    pub fn new(name: &str, arguments: &Value, chunks: usize) -> MockToolCall {
        MockToolCall::raw(name, &arguments.to_string(), chunks)
    }

    /// A call whose arguments text is sent as given (to stage malformed arguments).
    pub fn raw(name: &str, arguments: &str, chunks: usize) -> MockToolCall {
        MockToolCall { id: None, name: name.into(), arguments: arguments.into(), chunks, free_form: false }
    }

    /// A call of a free-form tool (see [`MockToolCall::free_form`]) with this input text.
    pub fn free_form(name: &str, input: &str, chunks: usize) -> MockToolCall {
        MockToolCall { free_form: true, ..MockToolCall::raw(name, input, chunks) }
    }

    pub fn with_id(mut self, id: &str) -> MockToolCall {
        self.id = Some(id.into());
        self
    }

    /// The arguments cut into `chunks` pieces of about equal length.
    fn pieces(&self) -> Vec<String> {
        let chars: Vec<char> = self.arguments.chars().collect();
        let n = self.chunks.clamp(1, chars.len().max(1));
        let size = chars.len().div_ceil(n).max(1);
        let mut pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
        if pieces.is_empty() {
            pieces.push(String::new());
        }
        pieces
    }
}

fn default_stop() -> String {
    "stop".into()
}

fn default_tool_stop() -> String {
    "tool_calls".into()
}

fn one() -> usize {
    1
}

impl MockReply {
    /// The whole reply streamed in word-sized chunks (each keeps its trailing whitespace, so
    /// the chunks join back to `text`).
    pub fn text(text: &str) -> MockReply {
        MockReply::Text {
            chunks: split_words(text),
            chunk_delay_ms: 0,
            first_delay_ms: 0,
            stop: default_stop(),
            thinking: Vec::new(),
        }
    }

    /// This reply, reporting `usage` (see [`MockReply::WithUsage`]).
    pub fn with_usage(self, usage: MockUsage) -> MockReply {
        MockReply::WithUsage { usage, reply: Box::new(self) }
    }

    /// `n_chunks` chunks `"w0 "`, `"w1 "`, … for streaming-throughput and abort tests.
    pub fn long(n_chunks: usize) -> MockReply {
        MockReply::Text {
            chunks: (0..n_chunks).map(|i| format!("w{i} ")).collect(),
            chunk_delay_ms: 0,
            first_delay_ms: 0,
            stop: default_stop(),
            thinking: Vec::new(),
        }
    }
}

fn split_words(text: &str) -> Vec<String> {
    text.split_inclusive(char::is_whitespace).map(str::to_owned).collect()
}

/// One request as the server received it (model endpoints only, not `/__mock/*`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Lowercased names; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The JSON body, or the raw text as a string when it is not JSON.
    pub body: Value,
    /// The body's size in bytes as received (the mock reports a quarter of it as input tokens).
    #[serde(default)]
    pub raw_len: usize,
    /// When the whole request had arrived, in milliseconds since the Unix epoch (benchmarks time
    /// a client's work up to its request on the wire against it).
    #[serde(default)]
    pub arrived_unix_ms: f64,
    /// When the mock had written its whole reply to it (0 until then): the end of a paced
    /// reply, for benchmarks that time what a client does after it.
    #[serde(default)]
    pub answered_unix_ms: f64,
    /// The body's bytes as received, for tests that compare what went on the wire byte for
    /// byte (not part of `/__mock/requests`).
    #[serde(skip)]
    pub raw: Vec<u8>,
    /// The mock's window refused it (see [`MockServer::set_window`]): it took no queued reply.
    #[serde(default)]
    pub refused: bool,
    /// Of its input tokens, those read from the prompt cache ([`MockServer::set_cache`]).
    #[serde(default)]
    pub cached_tokens: u64,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

struct State {
    queue: VecDeque<MockReply>,
    /// Replies kept for the first request whose last user message contains the text
    /// ([`MockServer::push_for`]), before the queue: requests that race (a detached one beside
    /// the conversation's) each get theirs, whatever order they arrive in.
    routed: Vec<MockRoute>,
    default: MockReply,
    requests: Vec<RecordedRequest>,
    served: u64,
    window: Option<MockWindow>,
    cache: Option<MockCache>,
    /// The cacheable prefixes of the requests served since the last reset (with a cache set).
    prefixes: Vec<Vec<u8>>,
    /// Benchmarks: record only the body's size, neither parse nor keep it, so that the mock's
    /// own work does not grow with the request.
    lean: bool,
    copilot: MockCopilot,
    listing: MockListing,
}

/// A reply for the first request whose last user message (`last_user_text`) contains `when`
/// (`POST /__mock/route`, [`MockServer::push_for`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MockRoute {
    pub when: String,
    pub reply: MockReply,
}

/// The model lists of servers other than Copilot: an OpenAI-style `GET …/models` below the
/// root (`/v1/models`), and Ollama's native `/api/tags`, `/api/show` and `/api/ps`. Requests to
/// them are counted here, not recorded among the chat requests.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct MockListing {
    /// The `data` of `/v1/models` (empty: a server that names no limits, as llama.cpp's).
    pub models: Vec<Value>,
    /// Ollama: `(name, context_length of /api/show, context_length of /api/ps when loaded)`.
    pub ollama: Vec<(String, u64, Option<u64>)>,
    /// `/v1/models` answers this status with an error body (0: 200 with `models`).
    pub status: u16,
    /// Every list answer waits this long first: a slow provider (the editor must not wait).
    #[serde(default)]
    pub delay_ms: u64,
    /// The list requests that came, oldest first.
    pub served: Vec<RecordedRequest>,
}

/// GitHub Copilot's side: the token exchange (`GET /copilot_internal/v2/token`) and the model
/// list (`GET /models`, at the root: the chat base is the mock itself, `/v1/models` stays a
/// 404). Tokens are `copilot-token-<n>`, n counting the exchanges from 1.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MockCopilot {
    /// Seconds from the exchange until the token expires (`expires_at`).
    pub expires_in: u64,
    /// `refresh_in`, when given.
    pub refresh_in: Option<u64>,
    /// The next exchanges answered with 401 (a revoked GitHub token).
    pub refuse_exchanges: u32,
    /// `endpoints.api`; `None`: the mock itself (`http://127.0.0.1:port`).
    pub api: Option<String>,
    /// The `data` of `/models`.
    pub models: Vec<Value>,
    /// Enabling a model (`POST /models/{id}/policy`) answers after this long.
    #[serde(default)]
    pub policy_delay_ms: u64,
}

impl Default for MockCopilot {
    fn default() -> Self {
        MockCopilot {
            expires_in: 1800,
            refresh_in: Some(1500),
            refuse_exchanges: 0,
            api: None,
            models: vec![
                MockCopilot::model("claude-sonnet-4.5", &["/chat/completions", "/v1/messages"], 128_000, 16_000),
                MockCopilot::model("gpt-5-mini", &["/chat/completions", "/responses"], 264_000, 64_000),
                MockCopilot::model("gpt-4.1", &["/chat/completions"], 64_000, 8_192),
            ],
            policy_delay_ms: 0,
        }
    }
}

impl MockCopilot {
    /// A `/models` entry as Copilot writes one, enabled.
    pub fn model(id: &str, endpoints: &[&str], window: u64, output: u64) -> Value {
        json!({ "id": id, "name": id, "object": "model", "vendor": "mock", "model_picker_enabled": true,
            "capabilities": { "type": "chat", "family": id,
                "limits": { "max_context_window_tokens": window, "max_output_tokens": output, "max_prompt_tokens": window - output },
                "supports": { "streaming": true, "tool_calls": true } },
            "supported_endpoints": endpoints, "policy": { "state": "enabled", "terms": "" } })
    }
}

struct Inner {
    addr: SocketAddr,
    state: Mutex<State>,
    recorded: Notify,
    stop: CancellationToken,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Handle to a running mock server; clones share it, and the server stops when the last
/// handle is dropped.
#[derive(Clone)]
pub struct MockServer {
    inner: Arc<Inner>,
    _guard: Arc<DropGuard>,
}

impl MockServer {
    /// Binds an ephemeral port on 127.0.0.1 and serves on a tokio task.
    pub async fn start() -> std::io::Result<MockServer> {
        Self::start_on(0).await
    }

    /// Like [`MockServer::start`] on a chosen port (0 = any).
    pub async fn start_on(port: u16) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let stop = CancellationToken::new();
        let inner = Arc::new(Inner {
            addr: listener.local_addr()?,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                routed: Vec::new(),
                default: MockReply::text("Hello from the mock server."),
                requests: Vec::new(),
                served: 0,
                window: None,
                cache: None,
                prefixes: Vec::new(),
                lean: false,
                copilot: MockCopilot::default(),
                listing: MockListing::default(),
            }),
            recorded: Notify::new(),
            stop: stop.clone(),
        });
        tokio::spawn(accept_loop(listener, inner.clone()));
        Ok(MockServer { inner, _guard: Arc::new(stop.drop_guard()) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// Lean mode (see `mock-model-server --lean`): requests are recorded with their size only.
    pub fn set_lean(&self, lean: bool) {
        self.inner.state().lean = lean;
    }

    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.inner.addr)
    }

    pub fn anthropic_base_url(&self) -> String {
        self.openai_base_url()
    }

    /// Gemini's base URL (`GOOGLE_GEMINI_BASE_URL`): the client adds `/v1beta/models/…`.
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    /// Queues a reply; each model request takes the oldest one.
    pub fn push(&self, reply: MockReply) {
        self.inner.state().queue.push_back(reply);
    }

    /// Keeps `reply` for the first request whose last user message contains `when` (it takes
    /// it before the queue's oldest).
    pub fn push_for(&self, when: &str, reply: MockReply) {
        self.inner.state().routed.push(MockRoute { when: when.to_string(), reply });
    }

    /// The context window: requests larger than it are refused with its style's overflow
    /// error, recorded as refused, and take no queued reply. `None` accepts every request.
    pub fn set_window(&self, window: Option<MockWindow>) {
        self.inner.state().window = window;
    }

    /// The prompt cache ([`MockCache`]); `None` reads nothing from one.
    pub fn set_cache(&self, cache: Option<MockCache>) {
        self.inner.state().cache = cache;
    }

    /// The URL of the mock's Copilot token exchange.
    pub fn copilot_token_url(&self) -> String {
        format!("http://{}/copilot_internal/v2/token", self.inner.addr)
    }

    /// Changes what the Copilot side answers (see [`MockCopilot`]).
    pub fn copilot(&self, change: impl FnOnce(&mut MockCopilot)) {
        change(&mut self.inner.state().copilot);
    }

    /// The reply used when the queue is empty.
    /// Changes the model lists (`/v1/models`, Ollama's API) the mock answers.
    pub fn listing(&self, change: impl FnOnce(&mut MockListing)) {
        change(&mut self.inner.state().listing);
    }

    /// The list requests served so far, oldest first.
    pub fn listing_requests(&self) -> Vec<RecordedRequest> {
        self.inner.state().listing.served.clone()
    }

    pub fn set_default(&self, reply: MockReply) {
        self.inner.state().default = reply;
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner.state().requests.clone()
    }

    /// Waits until at least `n` requests were recorded; false on timeout.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.recorded.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.state().requests.len() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.inner.state().requests.len() >= n;
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    loop {
        let accepted = tokio::select! {
            _ = inner.stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((socket, _)) = accepted else { continue };
        let inner = inner.clone();
        tokio::spawn(async move {
            let stop = inner.stop.clone();
            tokio::select! {
                _ = stop.cancelled() => {}
                result = handle(socket, inner) => {
                    if let Err(e) = result {
                        tracing::debug!("mock connection ended: {e}");
                    }
                }
            }
        });
    }
}

struct Request {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

async fn read_line(rd: &mut BufReader<OwnedReadHalf>) -> std::io::Result<String> {
    let mut buf = Vec::new();
    rd.read_until(b'\n', &mut buf).await?;
    Ok(String::from_utf8_lossy(&buf).trim_end().to_owned())
}

/// Parses one HTTP/1.1 request (Content-Length or chunked body); `None` if the peer left.
async fn read_request(
    rd: &mut BufReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<Option<Request>> {
    let line = read_line(rd).await?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else { return Ok(None) };
    let (method, path) = (method.to_owned(), target.split('?').next().unwrap_or("").to_owned());
    let mut headers = BTreeMap::<String, String>::new();
    loop {
        let line = read_line(rd).await?;
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
            headers.entry(name).and_modify(|v| *v = format!("{v}, {value}")).or_insert(value);
        }
    }
    if headers.get("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        wr.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    let mut body = Vec::new();
    if headers.get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let size_line = read_line(rd).await?;
            let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| std::io::Error::other("bad chunk size"))?;
            if size == 0 {
                while !read_line(rd).await?.is_empty() {}
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            rd.read_exact(&mut body[start..]).await?;
            read_line(rd).await?;
        }
    } else if let Some(len) = headers.get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        rd.read_exact(&mut body).await?;
    }
    Ok(Some(Request { method, path, headers, body }))
}

async fn handle(socket: TcpStream, inner: Arc<Inner>) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let (rd, mut wr) = socket.into_split();
    let mut rd = BufReader::new(rd);
    let Some(req) = read_request(&mut rd, &mut wr).await? else { return Ok(()) };
    let arrived_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3);
    if let Some(action) = req.path.strip_prefix("/__mock/") {
        return control(&inner, action, &req, &mut wr).await;
    }
    let lean = inner.state().lean;
    let body: Value = if lean {
        Value::Null
    } else {
        serde_json::from_slice(&req.body).unwrap_or_else(|_| {
            if req.body.is_empty() {
                Value::Null
            } else {
                Value::String(String::from_utf8_lossy(&req.body).into_owned())
            }
        })
    };
    let raw_len = req.body.len();
    let record = RecordedRequest {
        method: req.method.clone(),
        path: req.path.clone(),
        headers: req.headers.clone(),
        raw_len,
        arrived_unix_ms,
        answered_unix_ms: 0.0,
        body: body.clone(),
        raw: if lean { Vec::new() } else { req.body },
        refused: false,
        cached_tokens: 0,
    };
    if req.method == "GET" && (req.path == "/copilot_internal/v2/token" || req.path == "/models") {
        let (status, answer) = {
            let mut state = inner.state();
            state.requests.push(record);
            copilot_answer(&mut state, &req.path, inner.addr)
        };
        inner.recorded.notify_waiters();
        return respond(&mut wr, status, &answer.to_string(), None).await;
    }
    if req.method == "POST" && req.path.starts_with("/models/") && req.path.ends_with("/policy") {
        let delay = inner.state().copilot.policy_delay_ms;
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let (status, answer) = {
            let mut state = inner.state();
            state.requests.push(record);
            let id = req.path.trim_start_matches("/models/").trim_end_matches("/policy");
            let enabled = body.get("state").and_then(Value::as_str) == Some("enabled");
            match state.copilot.models.iter_mut().find(|m| m["id"] == id) {
                Some(model) if enabled => {
                    model["policy"]["state"] = json!("enabled");
                    (200, json!({ "state": "enabled" }))
                }
                Some(_) => (400, json!({ "message": "state must be enabled" })),
                None => (404, json!({ "message": format!("no model {id}") })),
            }
        };
        inner.recorded.notify_waiters();
        return respond(&mut wr, status, &answer.to_string(), None).await;
    }
    let listing = match req.method.as_str() {
        "GET" => req.path.ends_with("/models") || req.path == "/api/tags" || req.path == "/api/ps",
        "POST" => req.path == "/api/show",
        _ => false,
    };
    if listing {
        let delay = inner.state().listing.delay_ms;
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let (status, answer) = listing_answer(&mut inner.state().listing, record);
        return respond(&mut wr, status, &answer.to_string(), None).await;
    }
    // Gemini's own API (`models/NAME:generateContent`, `:streamGenerateContent?alt=sse`). The
    // conversation streams; a call that does not (Gemini CLI's routing call before each
    // prompt) takes the default reply, never a scripted one.
    if req.path.contains(":generateContent") || req.path.contains(":streamGenerateContent") {
        let stream = req.path.contains(":streamGenerateContent");
        let reply = {
            let mut state = inner.state();
            state.requests.push(record);
            state.served += 1;
            let schema = &body["generationConfig"]["responseJsonSchema"];
            match stream {
                true => next_reply(&mut state, &body),
                // Structured output asked for: the least object of its schema.
                false if schema.is_object() => MockReply::text(&least_instance(schema).to_string()),
                false => state.default.clone(),
            }
        };
        inner.recorded.notify_waiters();
        return serve_gemini(reply, stream, &mut wr).await;
    }
    let format = if req.path.ends_with("/chat/completions") {
        Format::OpenAi
    } else if req.path.ends_with("/responses") {
        Format::Responses
    } else if req.path.ends_with("/messages") {
        Format::Anthropic
    } else {
        inner.state().requests.push(record);
        inner.recorded.notify_waiters();
        let msg = json!({ "error": { "message": format!("no endpoint {}", req.path) } });
        return respond(&mut wr, 404, &msg.to_string(), None).await;
    };
    let prompt_tokens = (raw_len / 4) as u64;
    let (reply, n, index, cached) = {
        let mut state = inner.state();
        let refusal = state.window.filter(|w| prompt_tokens > w.tokens);
        let mut record = record;
        record.refused = refusal.is_some();
        if let (Some(cache), false) = (state.cache, record.refused || lean) {
            record.cached_tokens = cached_tokens(&mut state.prefixes, cache, &body).min(prompt_tokens);
        }
        let cached = record.cached_tokens;
        let index = state.requests.len();
        state.requests.push(record);
        let reply = match refusal {
            Some(window) => Err(window),
            None => {
                state.served += 1;
                Ok(next_reply(&mut state, &body))
            }
        };
        (reply, state.served, index, cached)
    };
    inner.recorded.notify_waiters();
    let ctx = Ctx {
        format,
        id: format!("mock-{n}"),
        model: body.get("model").and_then(Value::as_str).unwrap_or("mock").to_owned(),
        prompt_tokens,
        cached,
        // Lean mode reads no body: both clients always ask for a stream.
        stream: lean || body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        usage: None,
    };
    let reply = match reply {
        Ok(reply) => reply,
        Err(window) => {
            let completion = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
            return refuse(window, &ctx, completion, &mut rd, &mut wr).await;
        }
    };
    let (mut reply, mut ctx) = (reply, ctx);
    while let MockReply::WithUsage { usage, reply: inner } = reply {
        // The outermost usage wins.
        ctx.usage = ctx.usage.or(Some(usage));
        reply = *inner;
    }
    let served = serve(reply, &ctx, &body, &mut rd, &mut wr).await;
    let answered = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1e3);
    // The same request still (a reset may have cleared the list meanwhile).
    if let Some(record) = inner.state().requests.get_mut(index).filter(|r| r.arrived_unix_ms == arrived_unix_ms) {
        record.answered_unix_ms = answered;
    }
    served
}

/// What a provider caches of `body`, in order: its tools, its system prompt (or instructions),
/// then each message (or input item), each written with its keys sorted (whatever order the
/// client sent them in, and whether or not serde_json keeps the order it read).
fn cacheable_prefix(body: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for key in ["tools", "system", "instructions"] {
        if let Some(part) = body.get(key) {
            write_sorted(part, &mut out);
            out.push(b'\n');
        }
    }
    for key in ["messages", "input"] {
        for item in body.get(key).and_then(Value::as_array).into_iter().flatten() {
            write_sorted(item, &mut out);
            out.push(b'\n');
        }
    }
    out
}

/// `value` as JSON with every object's keys sorted.
fn write_sorted(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(key.clone()).to_string().as_bytes());
                out.push(b':');
                write_sorted(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_sorted(item, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// The tokens of `body` read from the cache: its longest prefix in common with an earlier
/// request's, a quarter of its bytes, from `min_tokens` on in whole steps. The request's own
/// prefix is kept for the next.
fn cached_tokens(prefixes: &mut Vec<Vec<u8>>, cache: MockCache, body: &Value) -> u64 {
    let prefix = cacheable_prefix(body);
    let common = prefixes.iter().map(|earlier| common_prefix_len(earlier, &prefix)).max().unwrap_or(0);
    prefixes.push(prefix);
    let tokens = (common / 4) as u64;
    match tokens >= cache.min_tokens {
        true => tokens / cache.step.max(1) * cache.step.max(1),
        false => 0,
    }
}

/// The bytes `a` and `b` begin with alike: whole blocks compared as slices (a memcmp), then the
/// last block byte by byte. A benchmark's task compares each request with every earlier one.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n].iter().zip(&b[at..n]).take_while(|(x, y)| x == y).count()
}

/// A model list's answer (see [`MockListing`]).
fn listing_answer(listing: &mut MockListing, request: RecordedRequest) -> (u16, Value) {
    let (path, body) = (request.path.clone(), request.body.clone());
    listing.served.push(request);
    match path.as_str() {
        "/api/tags" => {
            let models: Vec<Value> = listing.ollama.iter().map(|(name, _, _)| json!({ "name": name, "model": name })).collect();
            (200, json!({ "models": models }))
        }
        "/api/ps" => {
            let models: Vec<Value> = listing
                .ollama
                .iter()
                .filter_map(|(name, _, loaded)| Some(json!({ "name": name, "model": name, "context_length": (*loaded)? })))
                .collect();
            (200, json!({ "models": models }))
        }
        "/api/show" => {
            let wanted = body.get("model").and_then(Value::as_str).unwrap_or_default();
            match listing.ollama.iter().find(|(name, _, _)| name == wanted) {
                Some((_, own, _)) => (200, json!({ "model_info": { "general.architecture": "llama", "llama.context_length": own },
                    "capabilities": ["completion", "tools"] })),
                None => (404, json!({ "error": format!("model '{wanted}' not found") })),
            }
        }
        _ if listing.status != 0 && listing.status != 200 => {
            (listing.status, json!({ "error": { "message": "the model list is not available", "type": "server_error" } }))
        }
        _ => (200, json!({ "object": "list", "data": listing.models })),
    }
}

/// The token exchange's or the model list's answer.
fn copilot_answer(state: &mut State, path: &str, addr: SocketAddr) -> (u16, Value) {
    let copilot = &mut state.copilot;
    if path.ends_with("/models") {
        return (200, json!({ "object": "list", "data": copilot.models }));
    }
    if copilot.refuse_exchanges > 0 {
        copilot.refuse_exchanges -= 1;
        return (401, json!({ "message": "Bad credentials", "documentation_url": "https://docs.github.com/rest" }));
    }
    let n = state.requests.iter().filter(|r| r.path.ends_with("/copilot_internal/v2/token")).count();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let api = copilot.api.clone().unwrap_or_else(|| format!("http://{addr}"));
    let mut answer = json!({ "token": format!("copilot-token-{n}"), "expires_at": now + copilot.expires_in,
        "endpoints": { "api": api, "proxy": "http://127.0.0.1:9", "telemetry": "http://127.0.0.1:9" },
        "chat_enabled": true, "sku": "mock" });
    if let Some(refresh) = copilot.refresh_in {
        answer["refresh_in"] = json!(refresh);
    }
    (200, answer)
}

/// Answers a request larger than `window`, asking for at most `completion` tokens, with its
/// style's overflow error.
async fn refuse(
    window: MockWindow,
    ctx: &Ctx,
    completion: u64,
    rd: &mut BufReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let (status, body) = window.refusal(ctx.prompt_tokens, completion);
    if !ctx.stream || !matches!(window.style, MockOverflow::Responses | MockOverflow::LlamacppPython) {
        return respond(wr, status, &body, None).await;
    }
    if window.style == MockOverflow::LlamacppPython {
        // uvicorn's head and an empty chunked body, without `Connection: close`: the client
        // keeps the connection for its next request, which dies with it.
        wr.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-store\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        )
        .await?;
        read_request(rd, wr).await?;
        return Ok(());
    }
    // The Responses stream: created, in progress, then failed with the same error.
    let error = serde_json::from_str::<Value>(&body).unwrap_or_default()["error"].clone();
    let mut sse = Sse::start(wr, ctx).await?;
    let response = json!({ "id": ctx.id, "object": "response", "status": "failed", "model": ctx.model,
        "output": [], "error": { "code": error["code"], "message": error["message"] }, "incomplete_details": null });
    sse.data(&json!({ "type": "response.failed", "response": response })).await?;
    sse.wr.write_all(b"0\r\n\r\n").await?;
    sse.wr.shutdown().await
}

async fn control(
    inner: &Inner,
    action: &str,
    req: &Request,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let ok = json!({ "ok": true }).to_string();
    let parsed = |body: &[u8]| -> Result<Vec<MockReply>, String> {
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let list = if v.is_array() { v } else { Value::Array(vec![v]) };
        serde_json::from_value(list).map_err(|e| e.to_string())
    };
    let bad = |e: String| json!({ "error": { "message": e } }).to_string();
    match action {
        "push" | "default" => match parsed(&req.body) {
            Ok(replies) => {
                {
                    let mut state = inner.state();
                    if action == "push" {
                        state.queue.extend(replies);
                    } else if let Some(last) = replies.into_iter().last() {
                        state.default = last;
                    }
                }
                respond(wr, 200, &ok, None).await
            }
            Err(e) => respond(wr, 400, &bad(e), None).await,
        },
        "route" => match serde_json::from_slice::<MockRoute>(&req.body) {
            Ok(route) => {
                inner.state().routed.push(route);
                respond(wr, 200, &ok, None).await
            }
            Err(e) => respond(wr, 400, &bad(e.to_string()), None).await,
        },
        "cache" => match serde_json::from_slice::<Option<MockCache>>(&req.body) {
            Ok(cache) => {
                inner.state().cache = cache;
                respond(wr, 200, &ok, None).await
            }
            Err(e) => respond(wr, 400, &bad(e.to_string()), None).await,
        },
        "window" => match serde_json::from_slice::<Option<MockWindow>>(&req.body) {
            Ok(window) => {
                inner.state().window = window;
                respond(wr, 200, &ok, None).await
            }
            Err(e) => respond(wr, 400, &bad(e.to_string()), None).await,
        },
        "requests" => {
            let list = serde_json::to_string(&inner.state().requests).unwrap_or_default();
            respond(wr, 200, &list, None).await
        }
        "reset" => {
            {
                let mut state = inner.state();
                state.queue.clear();
                state.routed.clear();
                state.requests.clear();
                state.prefixes.clear();
            }
            respond(wr, 200, &ok, None).await
        }
        _ => respond(wr, 404, &bad(format!("no control action {action}")), None).await,
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn respond(
    wr: &mut OwnedWriteHalf,
    status: u16,
    body: &str,
    retry_after: Option<&str>,
) -> std::io::Result<()> {
    let kind = if serde_json::from_str::<Value>(body).is_ok() {
        "application/json"
    } else if body.starts_with('<') {
        "text/html"
    } else {
        "text/plain"
    };
    let retry = retry_after.map(|r| format!("Retry-After: {r}\r\n")).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    wr.write_all(head.as_bytes()).await?;
    wr.write_all(body.as_bytes()).await?;
    wr.shutdown().await
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    OpenAi,
    Responses,
    Anthropic,
}

struct Ctx {
    format: Format,
    id: String,
    model: String,
    prompt_tokens: u64,
    /// Of them, read from the prompt cache.
    cached: u64,
    stream: bool,
    /// The usage to report instead of the estimate (`MockReply::WithUsage`).
    usage: Option<MockUsage>,
}

impl Ctx {
    /// The usage of a reply of `output` tokens (one per chunk) as this request reports it.
    fn usage(&self, output: u64) -> MockUsage {
        match self.usage {
            Some(u) => MockUsage { output: Some(u.output.unwrap_or(output)), ..u },
            None => MockUsage { input: self.prompt_tokens - self.cached, output: Some(output), cache_read: self.cached, cache_write: 0 },
        }
    }
}

/// `usage` as OpenAI's `usage` object.
fn openai_usage(u: MockUsage) -> Value {
    let prompt = u.input + u.cache_read + u.cache_write;
    let output = u.output.unwrap_or(0);
    let mut usage = json!({ "prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output });
    if u.cache_read > 0 || u.cache_write > 0 {
        let mut details = json!({ "cached_tokens": u.cache_read + u.cache_write });
        if u.cache_write > 0 {
            details["cache_write_tokens"] = u.cache_write.into();
        }
        usage["prompt_tokens_details"] = details;
    }
    usage
}

/// `usage` as the Responses API's `usage` object (`input_tokens` counts the cached prompt too).
fn responses_usage(u: MockUsage) -> Value {
    let input = u.input + u.cache_read + u.cache_write;
    let output = u.output.unwrap_or(0);
    json!({ "input_tokens": input, "input_tokens_details": { "cached_tokens": u.cache_read },
            "output_tokens": output, "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": input + output })
}

/// A finished Responses `message` item.
fn responses_message(id: &str, text: &str) -> Value {
    json!({ "id": id, "type": "message", "status": "completed",
            "content": [{ "type": "output_text", "annotations": [], "text": text }], "role": "assistant" })
}

/// A Responses call item of `call`, `status` (`in_progress` when added, its arguments or input
/// still empty; `completed` when done): `function_call` with `arguments`, or for a free-form
/// call `custom_tool_call` with `input`.
fn responses_call(id: &str, call_id: &str, call: &MockToolCall, status: &str) -> Value {
    let text = if status == "completed" { call.arguments.as_str() } else { "" };
    let (kind, field) = if call.free_form { ("custom_tool_call", "input") } else { ("function_call", "arguments") };
    json!({ "id": id, "type": kind, "status": status, field: text, "call_id": call_id, "name": call.name })
}

/// A Responses call item's id: `fc_…` for a function call, `ctc_…` for a free-form one, as
/// OpenAI names them.
fn responses_item_id(call: &MockToolCall, response_id: &str, i: usize) -> String {
    format!("{}_{}_{i}", if call.free_form { "ctc" } else { "fc" }, response_id.replace('-', "_"))
}

/// `usage` as Anthropic's `usage` object (with the output count given).
fn anthropic_usage(u: MockUsage, output: u64) -> Value {
    let mut usage = json!({ "input_tokens": u.input, "output_tokens": output });
    if u.cache_read > 0 || u.cache_write > 0 {
        usage["cache_read_input_tokens"] = u.cache_read.into();
        usage["cache_creation_input_tokens"] = u.cache_write.into();
    }
    usage
}

/// Holds the connection until the client hangs up (or the server stops).
async fn hold(rd: &mut BufReader<OwnedReadHalf>) -> std::io::Result<()> {
    let mut buf = [0u8; 1024];
    while rd.read(&mut buf).await? > 0 {}
    Ok(())
}

async fn serve(
    reply: MockReply,
    ctx: &Ctx,
    body: &Value,
    rd: &mut BufReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let (chunks, thinking, first_ms, chunk_ms, stop) = match reply {
        MockReply::Status { status, body, retry_after } => {
            return respond(wr, status, &body, retry_after.as_deref()).await
        }
        MockReply::NoAnswer => return hold(rd).await,
        MockReply::Raw { bytes, slices } => return serve_raw(&bytes, &slices, wr).await,
        MockReply::ToolCalls { calls, text_before, chunk_delay_ms, stop, interleave } => {
            let reply = ToolCallReply {
                calls,
                text_before,
                chunk_delay_ms,
                stop,
                interleave,
                reasoning: Reasoning::default(),
            };
            return serve_tool_calls(reply, ctx, wr).await;
        }
        MockReply::Reasoning { thinking, signature, redacted, field, chunks, calls } => {
            let stop = if calls.is_empty() { default_stop() } else { default_tool_stop() };
            let reasoning = Reasoning { thinking, signature, redacted, field };
            let reply = ToolCallReply { calls, text_before: chunks, chunk_delay_ms: 0, stop, interleave: false, reasoning };
            return serve_tool_calls(reply, ctx, wr).await;
        }
        MockReply::Text { chunks, chunk_delay_ms, first_delay_ms, stop, thinking } => {
            (chunks, thinking, first_delay_ms, chunk_delay_ms, stop)
        }
        MockReply::Empty => (Vec::new(), Vec::new(), 0, 0, default_stop()),
        MockReply::Huge { bytes } => {
            let text: String = (0..bytes).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            (vec![text], Vec::new(), 0, 0, default_stop())
        }
        MockReply::Echo => (split_words(&last_user_text(body)), Vec::new(), 0, 0, default_stop()),
        // `handle` unwraps these before serving.
        MockReply::WithUsage { .. } => {
            return respond(wr, 500, r#"{"error":{"message":"mock: with_usage not unwrapped"}}"#, None).await
        }
        broken @ (MockReply::Torn { .. }
        | MockReply::StreamError { .. }
        | MockReply::Malformed { .. }
        | MockReply::NoChoices
        | MockReply::Stall { .. }) => return serve_broken(broken, ctx, rd, wr).await,
    };
    // tokio rounds a zero sleep up to the next 1 ms timer tick: only sleep when asked to, or
    // "full speed" streams at 1,000 chunks/s.
    if first_ms > 0 {
        tokio::time::sleep(Duration::from_millis(first_ms)).await;
    }
    let usage = ctx.usage((chunks.len() + thinking.len()) as u64);
    if !ctx.stream {
        let text = chunks.concat();
        let reply = match ctx.format {
            Format::OpenAi => json!({
                "id": ctx.id, "object": "chat.completion", "model": ctx.model,
                "choices": [{ "index": 0, "message": { "role": "assistant", "content": text },
                              "finish_reason": stop }],
                "usage": openai_usage(usage),
            }),
            Format::Responses => json!({
                "id": ctx.id, "object": "response", "model": ctx.model,
                "status": if stop == "length" { "incomplete" } else { "completed" },
                "output": [responses_message(&format!("msg_{}", ctx.id.replace('-', "_")), &text)],
                "usage": responses_usage(usage),
            }),
            Format::Anthropic => json!({
                "id": ctx.id, "type": "message", "role": "assistant", "model": ctx.model,
                "content": [{ "type": "text", "text": text }],
                "stop_reason": anthropic_stop(&stop),
                "usage": anthropic_usage(usage, usage.output.unwrap_or(0)),
            }),
        };
        return respond(wr, 200, &reply.to_string(), None).await;
    }
    let mut sse = Sse::start(wr, ctx).await?;
    for (i, (chunk, is_thinking)) in
        thinking.iter().map(|t| (t, true)).chain(chunks.iter().map(|t| (t, false))).enumerate()
    {
        if i > 0 && chunk_ms > 0 {
            tokio::time::sleep(Duration::from_millis(chunk_ms)).await;
        }
        sse.delta(chunk, is_thinking).await?;
    }
    sse.finish(&stop, usage).await?;
    sse.wr.write_all(b"0\r\n\r\n").await?;
    sse.wr.shutdown().await
}

/// [`MockReply::Raw`]: `bytes` in pieces of the `slices` lengths, then the end of the body.
async fn serve_raw(bytes: &[u8], slices: &[usize], wr: &mut OwnedWriteHalf) -> std::io::Result<()> {
    wr.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )
    .await?;
    let mut rest = bytes;
    for &len in slices.iter().chain(std::iter::once(&usize::MAX)) {
        if rest.is_empty() {
            break;
        }
        let (piece, after) = rest.split_at(len.clamp(1, rest.len()));
        wr.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
        wr.write_all(piece).await?;
        wr.write_all(b"\r\n").await?;
        wr.flush().await?;
        rest = after;
    }
    wr.write_all(b"0\r\n\r\n").await?;
    wr.shutdown().await
}

async fn serve_broken(
    reply: MockReply,
    ctx: &Ctx,
    rd: &mut BufReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let mut sse = Sse::start(wr, ctx).await?;
    match reply {
        MockReply::Torn { chunks } => {
            for c in &chunks {
                sse.delta(c, false).await?;
            }
            // Dropping the socket without the terminating chunk tears the body.
        }
        MockReply::StreamError { chunks, code, message } => {
            for c in &chunks {
                sse.delta(c, false).await?;
            }
            match ctx.format {
                Format::OpenAi => sse.data(&json!({ "error": { "code": code, "message": message } })).await?,
                Format::Responses => {
                    sse.data(&json!({ "type": "error", "code": code, "message": message, "param": null })).await?
                }
                Format::Anthropic => {
                    sse.data(&json!({ "type": "error", "error": { "type": code, "message": message } })).await?
                }
            }
            sse.wr.write_all(b"0\r\n\r\n").await?;
        }
        MockReply::Malformed { chunks } => {
            for c in &chunks {
                sse.delta(c, false).await?;
            }
            sse.event("content_block_delta", "{\"choices\": [{\"delta\": {\"content\": \"x\"")
                .await?;
            sse.wr.write_all(b"0\r\n\r\n").await?;
        }
        MockReply::NoChoices => {
            match ctx.format {
                Format::OpenAi => sse.data(&json!({ "id": ctx.id, "choices": [] })).await?,
                Format::Responses => sse.event("response.mystery", "{\"type\":\"response.mystery\"}").await?,
                Format::Anthropic => sse.event("mystery", "{\"type\":\"mystery\"}").await?,
            }
            sse.wr.write_all(b"0\r\n\r\n").await?;
        }
        MockReply::Stall { chunks } => {
            for c in &chunks {
                sse.delta(c, false).await?;
            }
            hold(rd).await?;
        }
        _ => {}
    }
    Ok(())
}

struct ToolCallReply {
    calls: Vec<MockToolCall>,
    text_before: Vec<String>,
    chunk_delay_ms: u64,
    stop: String,
    interleave: bool,
    reasoning: Reasoning,
}

/// What [`MockReply::Reasoning`] streams before its text.
#[derive(Default)]
struct Reasoning {
    thinking: Vec<String>,
    signature: Option<String>,
    redacted: Option<String>,
    field: Option<String>,
}

async fn serve_tool_calls(
    reply: ToolCallReply,
    ctx: &Ctx,
    wr: &mut OwnedWriteHalf,
) -> std::io::Result<()> {
    let ToolCallReply { calls, text_before, chunk_delay_ms, stop, interleave, reasoning } = reply;
    let prefix = match ctx.format {
        Format::OpenAi | Format::Responses => "call",
        Format::Anthropic => "toolu",
    };
    let ids: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| c.id.clone().unwrap_or_else(|| format!("{prefix}_{}_{i}", ctx.id.replace('-', "_"))))
        .collect();
    let pieces: Vec<Vec<String>> = calls.iter().map(MockToolCall::pieces).collect();
    let output = (reasoning.thinking.len() + text_before.len() + pieces.iter().map(Vec::len).sum::<usize>()) as u64;
    let usage = ctx.usage(output.max(1));
    if !ctx.stream {
        let text = text_before.concat();
        let body = match ctx.format {
            Format::Responses => {
                let mut output = Vec::new();
                if !text.is_empty() {
                    output.push(responses_message(&format!("msg_{}", ctx.id.replace('-', "_")), &text));
                }
                for (i, (c, id)) in calls.iter().zip(&ids).enumerate() {
                    output.push(responses_call(&responses_item_id(c, &ctx.id, i), id, c, "completed"));
                }
                json!({ "id": ctx.id, "object": "response", "model": ctx.model, "status": "completed",
                        "output": output, "usage": responses_usage(usage) })
            }
            Format::OpenAi => {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .zip(&ids)
                    .map(|(c, id)| json!({ "id": id, "type": "function",
                        "function": { "name": c.name, "arguments": c.arguments } }))
                    .collect();
                json!({
                    "id": ctx.id, "object": "chat.completion", "model": ctx.model,
                    "choices": [{ "index": 0, "finish_reason": stop, "message": {
                        "role": "assistant",
                        "content": if text.is_empty() { Value::Null } else { text.into() },
                        "tool_calls": tool_calls } }],
                    "usage": openai_usage(usage),
                })
            }
            Format::Anthropic => {
                let mut content = Vec::new();
                if let Some(data) = &reasoning.redacted {
                    content.push(json!({ "type": "redacted_thinking", "data": data }));
                }
                if !reasoning.thinking.is_empty() || reasoning.signature.is_some() {
                    content.push(json!({ "type": "thinking", "thinking": reasoning.thinking.concat(),
                                         "signature": reasoning.signature.clone().unwrap_or_default() }));
                }
                if !text.is_empty() {
                    content.push(json!({ "type": "text", "text": text }));
                }
                for (c, id) in calls.iter().zip(&ids) {
                    let input = serde_json::from_str::<Value>(&c.arguments).unwrap_or_else(|_| json!({}));
                    content.push(json!({ "type": "tool_use", "id": id, "name": c.name, "input": input }));
                }
                json!({
                    "id": ctx.id, "type": "message", "role": "assistant", "model": ctx.model,
                    "content": content, "stop_reason": anthropic_stop(&stop),
                    "usage": anthropic_usage(usage, usage.output.unwrap_or(0)),
                })
            }
        };
        return respond(wr, 200, &body.to_string(), None).await;
    }
    let mut sse = Sse::start(wr, ctx).await?;
    let mut first = true;
    let mut pause = || {
        let wait = !first && chunk_delay_ms > 0;
        first = false;
        async move {
            if wait {
                tokio::time::sleep(Duration::from_millis(chunk_delay_ms)).await;
            }
        }
    };
    if let Some(field) = &reasoning.field {
        sse.reasoning_field = field.clone();
    }
    if let Some(data) = &reasoning.redacted {
        sse.redacted(data).await?;
    }
    for t in &reasoning.thinking {
        pause().await;
        sse.delta(t, true).await?;
    }
    if let Some(signature) = &reasoning.signature {
        sse.signature(signature).await?;
    }
    for t in &text_before {
        pause().await;
        sse.delta(t, false).await?;
    }
    match ctx.format {
        Format::Responses => {
            sse.close_item().await?;
            for (i, list) in pieces.iter().enumerate() {
                let call = &calls[i];
                let item_id = responses_item_id(call, &ctx.id, i);
                let output_index = sse.next_index;
                sse.next_index += 1;
                pause().await;
                let added = responses_call(&item_id, &ids[i], call, "in_progress");
                sse.data(&json!({ "type": "response.output_item.added", "output_index": output_index, "item": added })).await?;
                let (event, field) = match call.free_form {
                    true => ("response.custom_tool_call_input", "input"),
                    false => ("response.function_call_arguments", "arguments"),
                };
                for p in list {
                    pause().await;
                    sse.data(&json!({ "type": format!("{event}.delta"), "item_id": item_id,
                        "output_index": output_index, "delta": p })).await?;
                }
                sse.data(&json!({ "type": format!("{event}.done"), "item_id": item_id,
                    "output_index": output_index, field: call.arguments })).await?;
                let done = responses_call(&item_id, &ids[i], call, "completed");
                sse.output.push(done.clone());
                sse.data(&json!({ "type": "response.output_item.done", "output_index": output_index, "item": done })).await?;
            }
        }
        Format::OpenAi => {
            let header = |i: usize| {
                json!({ "tool_calls": [{ "index": i, "id": ids[i], "type": "function",
                                         "function": { "name": calls[i].name, "arguments": "" } }] })
            };
            let piece = |i: usize, p: &str| {
                json!({ "tool_calls": [{ "index": i, "function": { "arguments": p } }] })
            };
            if interleave {
                for i in 0..calls.len() {
                    pause().await;
                    sse.openai_chunk(header(i), Value::Null).await?;
                }
                let rounds = pieces.iter().map(Vec::len).max().unwrap_or(0);
                for r in 0..rounds {
                    for (i, list) in pieces.iter().enumerate() {
                        if let Some(p) = list.get(r) {
                            pause().await;
                            sse.openai_chunk(piece(i, p), Value::Null).await?;
                        }
                    }
                }
            } else {
                for (i, list) in pieces.iter().enumerate() {
                    pause().await;
                    sse.openai_chunk(header(i), Value::Null).await?;
                    for p in list {
                        pause().await;
                        sse.openai_chunk(piece(i, p), Value::Null).await?;
                    }
                }
            }
        }
        Format::Anthropic => {
            sse.close_block().await?;
            for (i, list) in pieces.iter().enumerate() {
                let index = sse.next_index;
                sse.next_index += 1;
                let block = json!({ "type": "tool_use", "id": ids[i], "name": calls[i].name, "input": {} });
                pause().await;
                sse.data(&json!({ "type": "content_block_start", "index": index, "content_block": block }))
                    .await?;
                // The real API opens every tool_use block with an empty piece.
                for p in std::iter::once("").chain(list.iter().map(String::as_str)) {
                    if !p.is_empty() {
                        pause().await;
                    }
                    let delta = json!({ "type": "input_json_delta", "partial_json": p });
                    sse.data(&json!({ "type": "content_block_delta", "index": index, "delta": delta }))
                        .await?;
                }
                sse.data(&json!({ "type": "content_block_stop", "index": index })).await?;
            }
        }
    }
    sse.finish(&stop, usage).await?;
    sse.wr.write_all(b"0\r\n\r\n").await?;
    sse.wr.shutdown().await
}

fn anthropic_stop(stop: &str) -> &'static str {
    match stop {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        _ => "end_turn",
    }
}

/// The text of the last user message of an OpenAI, Responses or Anthropic request body.
/// The reply for `body`: the one routed to its last user message's words, else the queue's
/// oldest, else the default.
fn next_reply(state: &mut State, body: &Value) -> MockReply {
    let routed = if state.routed.is_empty() {
        None
    } else {
        let text = last_user_text(body);
        state.routed.iter().position(|r| text.contains(&r.when)).map(|at| state.routed.remove(at).reply)
    };
    routed.or_else(|| state.queue.pop_front()).unwrap_or_else(|| state.default.clone())
}

/// The least value of a (Gemini or JSON) schema: its required properties, each the least of its
/// type (a structured-output request answered without a script).
fn least_instance(schema: &Value) -> Value {
    let kind = schema["type"].as_str().unwrap_or("OBJECT").to_ascii_uppercase();
    match kind.as_str() {
        "STRING" => json!("mock"),
        "INTEGER" | "NUMBER" => json!(1),
        "BOOLEAN" => json!(false),
        "ARRAY" => json!([]),
        _ => {
            let mut object = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                object.insert(name.to_string(), least_instance(&schema["properties"][name]));
            }
            Value::Object(object)
        }
    }
}

/// A reply in Gemini's format: `candidates[0].content.parts` (text, `functionCall`s), streamed
/// as SSE `data:` lines (`stream`) or whole. Text and tool calls only: anything else is a 500
/// that says so.
async fn serve_gemini(reply: MockReply, stream: bool, wr: &mut OwnedWriteHalf) -> std::io::Result<()> {
    let (parts, delay): (Vec<Value>, u64) = match reply {
        MockReply::Text { chunks, chunk_delay_ms, .. } => (chunks.iter().map(|c| json!({ "text": c })).collect(), chunk_delay_ms),
        MockReply::ToolCalls { calls, text_before, .. } => {
            let mut parts: Vec<Value> = text_before.iter().map(|c| json!({ "text": c })).collect();
            for call in calls {
                let args: Value = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
                parts.push(json!({ "functionCall": { "name": call.name, "args": args } }));
            }
            (parts, 0)
        }
        MockReply::Status { status, body, retry_after } => return respond(wr, status, &body, retry_after.as_deref()).await,
        other => {
            let message = json!({ "error": { "code": 500, "message": format!("the mock serves no {other:?} in Gemini's format") } });
            return respond(wr, 500, &message.to_string(), None).await;
        }
    };
    let usage = json!({ "promptTokenCount": 10, "candidatesTokenCount": parts.len(), "totalTokenCount": 10 + parts.len() });
    let candidate = |parts: Vec<Value>, last: bool| {
        let mut c = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
        if last {
            c["finishReason"] = json!("STOP");
        }
        c
    };
    if !stream {
        let answer = json!({ "candidates": [candidate(parts, true)], "usageMetadata": usage, "modelVersion": "mock" });
        return respond(wr, 200, &answer.to_string(), None).await;
    }
    wr.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )
    .await?;
    let n = parts.len().max(1);
    let mut parts = parts.into_iter();
    for i in 0..n {
        let part: Vec<Value> = parts.next().into_iter().collect();
        let last = i + 1 == n;
        let mut event = json!({ "candidates": [candidate(part, last)], "modelVersion": "mock" });
        if last {
            event["usageMetadata"] = usage.clone();
        }
        let payload = format!("data: {event}\r\n\r\n");
        wr.write_all(format!("{:x}\r\n{payload}\r\n", payload.len()).as_bytes()).await?;
        wr.flush().await?;
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
    }
    wr.write_all(b"0\r\n\r\n").await?;
    wr.shutdown().await
}

fn last_user_text(body: &Value) -> String {
    // Gemini: `contents[]` of `{role, parts: [{text}]}`.
    if let Some(contents) = body.get("contents").and_then(Value::as_array) {
        let text = contents
            .iter()
            .rev()
            .find(|c| c.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|c| c.get("parts").and_then(Value::as_array))
            .map(|parts| parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"));
        return text.unwrap_or_else(|| "(no user message)".into());
    }
    let messages = body.get("messages").or_else(|| body.get("input")).and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(content) = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
    else {
        return "(no user message)".into();
    };
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| matches!(p.get("type").and_then(Value::as_str), Some("text" | "input_text")))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Writes SSE events in either format as HTTP chunks.
struct Sse<'a> {
    wr: &'a mut OwnedWriteHalf,
    format: Format,
    id: String,
    model: String,
    /// Anthropic's `message_start` usage: the input and cache counts.
    start_usage: MockUsage,
    /// Anthropic: the open content block (index, is thinking).
    block: Option<(usize, bool)>,
    next_index: usize,
    /// OpenAI: the delta field thinking streams in.
    reasoning_field: String,
    /// Responses: the output item streaming now.
    item: Option<OpenItem>,
    /// Responses: the finished output items (the final response lists them).
    output: Vec<Value>,
}

/// A Responses output item being streamed: reasoning or a message, its id and text so far.
struct OpenItem {
    thinking: bool,
    id: String,
    output_index: usize,
    text: String,
}

impl<'a> Sse<'a> {
    async fn start(wr: &'a mut OwnedWriteHalf, ctx: &Ctx) -> std::io::Result<Sse<'a>> {
        wr.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
              Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        )
        .await?;
        let mut sse = Sse {
            wr,
            format: ctx.format,
            id: ctx.id.clone(),
            model: ctx.model.clone(),
            start_usage: ctx.usage(0),
            block: None,
            next_index: 0,
            reasoning_field: "reasoning_content".into(),
            item: None,
            output: Vec::new(),
        };
        if sse.format == Format::Responses {
            let response = json!({ "id": sse.id, "object": "response", "status": "in_progress",
                "model": sse.model, "output": [] });
            sse.data(&json!({ "type": "response.created", "response": response })).await?;
            sse.data(&json!({ "type": "response.in_progress", "response": response })).await?;
        }
        if sse.format == Format::Anthropic {
            let start = json!({ "type": "message_start", "message": {
                "id": sse.id, "type": "message", "role": "assistant", "model": sse.model,
                "content": [], "stop_reason": null,
                "usage": anthropic_usage(sse.start_usage, 1) } });
            sse.event("message_start", &start.to_string()).await?;
            sse.event("ping", "{\"type\":\"ping\"}").await?;
        }
        Ok(sse)
    }

    async fn chunk(&mut self, payload: &str) -> std::io::Result<()> {
        let framed = format!("{:x}\r\n{payload}\r\n", payload.len());
        self.wr.write_all(framed.as_bytes()).await
    }

    async fn event(&mut self, name: &str, data: &str) -> std::io::Result<()> {
        match self.format {
            Format::OpenAi => self.chunk(&format!("data: {data}\n\n")).await,
            Format::Responses | Format::Anthropic => self.chunk(&format!("event: {name}\ndata: {data}\n\n")).await,
        }
    }

    /// Responses: the open output item of this kind, opening one (and finishing the other
    /// kind's) when needed.
    async fn open_item(&mut self, thinking: bool) -> std::io::Result<(String, usize)> {
        if self.item.as_ref().is_some_and(|i| i.thinking != thinking) {
            self.close_item().await?;
        }
        if let Some(item) = &self.item {
            return Ok((item.id.clone(), item.output_index));
        }
        let output_index = self.next_index;
        self.next_index += 1;
        let id = format!("{}_{}_{output_index}", if thinking { "rs" } else { "msg" }, self.id.replace('-', "_"));
        let added = if thinking {
            json!({ "id": id, "type": "reasoning", "summary": [] })
        } else {
            json!({ "id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant" })
        };
        self.data(&json!({ "type": "response.output_item.added", "output_index": output_index, "item": added })).await?;
        let part = if thinking {
            json!({ "type": "response.reasoning_summary_part.added", "item_id": id, "output_index": output_index,
                    "summary_index": 0, "part": { "type": "summary_text", "text": "" } })
        } else {
            json!({ "type": "response.content_part.added", "item_id": id, "output_index": output_index,
                    "content_index": 0, "part": { "type": "output_text", "annotations": [], "text": "" } })
        };
        self.data(&part).await?;
        self.item = Some(OpenItem { thinking, id: id.clone(), output_index, text: String::new() });
        Ok((id, output_index))
    }

    /// Responses: finishes the open item; a reasoning item carries `encrypted` (made up when
    /// none is given: the real API always sends one when asked to).
    async fn close_item_with(&mut self, encrypted: Option<&str>) -> std::io::Result<()> {
        let Some(item) = self.item.take() else { return Ok(()) };
        let (id, output_index, text) = (&item.id, item.output_index, &item.text);
        let done = if item.thinking {
            self.data(&json!({ "type": "response.reasoning_summary_text.done", "item_id": id,
                "output_index": output_index, "summary_index": 0, "text": text })).await?;
            self.data(&json!({ "type": "response.reasoning_summary_part.done", "item_id": id,
                "output_index": output_index, "summary_index": 0, "part": { "type": "summary_text", "text": text } })).await?;
            let summary = if text.is_empty() { json!([]) } else { json!([{ "type": "summary_text", "text": text }]) };
            let encrypted = encrypted.map_or_else(|| format!("gAAAAmock-{id}"), str::to_owned);
            json!({ "id": id, "type": "reasoning", "summary": summary, "encrypted_content": encrypted })
        } else {
            self.data(&json!({ "type": "response.output_text.done", "item_id": id, "output_index": output_index,
                "content_index": 0, "text": text })).await?;
            self.data(&json!({ "type": "response.content_part.done", "item_id": id, "output_index": output_index,
                "content_index": 0, "part": { "type": "output_text", "annotations": [], "text": text } })).await?;
            responses_message(id, text)
        };
        self.output.push(done.clone());
        self.data(&json!({ "type": "response.output_item.done", "output_index": output_index, "item": done })).await
    }

    async fn close_item(&mut self) -> std::io::Result<()> {
        self.close_item_with(None).await
    }

    async fn data(&mut self, v: &Value) -> std::io::Result<()> {
        let name = v.get("type").and_then(Value::as_str).unwrap_or("message").to_owned();
        self.event(&name, &v.to_string()).await
    }

    async fn openai_chunk(&mut self, delta: Value, finish: Value) -> std::io::Result<()> {
        let v = json!({ "id": self.id, "object": "chat.completion.chunk", "model": self.model,
                        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
        self.data(&v).await
    }

    async fn close_block(&mut self) -> std::io::Result<()> {
        if let Some((index, _)) = self.block.take() {
            self.data(&json!({ "type": "content_block_stop", "index": index })).await?;
        }
        Ok(())
    }

    /// Anthropic: a `redacted_thinking` block, whole (OpenAI: nothing).
    async fn redacted(&mut self, data: &str) -> std::io::Result<()> {
        if self.format != Format::Anthropic {
            return Ok(());
        }
        self.close_block().await?;
        let index = self.next_index;
        self.next_index += 1;
        let block = json!({ "type": "redacted_thinking", "data": data });
        self.data(&json!({ "type": "content_block_start", "index": index, "content_block": block })).await?;
        self.data(&json!({ "type": "content_block_stop", "index": index })).await
    }

    /// Anthropic: the signature of the thinking block (opened when none is), as the API sends
    /// it just before the block stops (OpenAI: nothing).
    async fn signature(&mut self, signature: &str) -> std::io::Result<()> {
        if self.format == Format::OpenAi {
            return Ok(());
        }
        if self.format == Format::Responses {
            self.open_item(true).await?;
            return self.close_item_with(Some(signature)).await;
        }
        let index = self.open_block(true).await?;
        let delta = json!({ "type": "signature_delta", "signature": signature });
        self.data(&json!({ "type": "content_block_delta", "index": index, "delta": delta })).await?;
        self.close_block().await
    }

    async fn delta(&mut self, text: &str, thinking: bool) -> std::io::Result<()> {
        if self.format == Format::OpenAi {
            let key = if thinking { self.reasoning_field.clone() } else { "content".to_owned() };
            return self.openai_chunk(json!({ key: text }), Value::Null).await;
        }
        if self.format == Format::Responses {
            let (id, output_index) = self.open_item(thinking).await?;
            if let Some(item) = &mut self.item {
                item.text.push_str(text);
            }
            let event = if thinking {
                json!({ "type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": output_index,
                        "summary_index": 0, "delta": text })
            } else {
                json!({ "type": "response.output_text.delta", "item_id": id, "output_index": output_index,
                        "content_index": 0, "delta": text })
            };
            return self.data(&event).await;
        }
        let index = self.open_block(thinking).await?;
        let delta = if thinking {
            json!({ "type": "thinking_delta", "thinking": text })
        } else {
            json!({ "type": "text_delta", "text": text })
        };
        self.data(&json!({ "type": "content_block_delta", "index": index, "delta": delta })).await
    }

    /// Anthropic: the index of the open block of this kind, opening one (and closing the other
    /// kind's) when needed.
    async fn open_block(&mut self, thinking: bool) -> std::io::Result<usize> {
        if self.block.is_some_and(|(_, t)| t != thinking) {
            self.close_block().await?;
        }
        let index = match self.block {
            Some((index, _)) => index,
            None => {
                let index = self.next_index;
                self.next_index += 1;
                self.block = Some((index, thinking));
                let block = if thinking {
                    json!({ "type": "thinking", "thinking": "" })
                } else {
                    json!({ "type": "text", "text": "" })
                };
                let start = json!({ "type": "content_block_start", "index": index, "content_block": block });
                self.data(&start).await?;
                index
            }
        };
        Ok(index)
    }

    async fn finish(&mut self, stop: &str, usage: MockUsage) -> std::io::Result<()> {
        let output = usage.output.unwrap_or(0);
        if self.format == Format::Responses {
            self.close_item().await?;
            let mut response = json!({ "id": self.id, "object": "response", "model": self.model,
                "status": "completed", "output": self.output, "usage": responses_usage(usage) });
            if stop == "length" {
                response["status"] = "incomplete".into();
                response["incomplete_details"] = json!({ "reason": "max_output_tokens" });
                return self.data(&json!({ "type": "response.incomplete", "response": response })).await;
            }
            return self.data(&json!({ "type": "response.completed", "response": response })).await;
        }
        if self.format == Format::OpenAi {
            self.openai_chunk(json!({}), json!(stop)).await?;
            let usage = json!({ "id": self.id, "object": "chat.completion.chunk", "choices": [],
                "usage": openai_usage(usage) });
            self.data(&usage).await?;
            return self.chunk("data: [DONE]\n\n").await;
        }
        self.close_block().await?;
        let delta = json!({ "type": "message_delta",
            "delta": { "stop_reason": anthropic_stop(stop), "stop_sequence": null },
            "usage": { "output_tokens": output } });
        self.data(&delta).await?;
        self.data(&json!({ "type": "message_stop" })).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_reads_the_longest_prefix_shared_with_an_earlier_request_in_whole_steps() {
        let cache = MockCache { min_tokens: 100, step: 50 };
        let long = "x".repeat(2000); // 500 tokens a message
        let body = |messages: &[&str]| json!({ "model": "m", "stream": true, "tools": [{ "name": "read" }],
            "messages": messages.iter().map(|m| json!({ "role": "user", "content": m })).collect::<Vec<_>>() });
        let mut prefixes = Vec::new();
        assert_eq!(cached_tokens(&mut prefixes, cache, &body(&[&long])), 0, "nothing before it");
        // The same first message and one more: the first message's tokens and the tools', in steps.
        let second = cached_tokens(&mut prefixes, cache, &body(&[&long, &long]));
        assert!((500..=550).contains(&second) && second % 50 == 0, "{second}");
        // Keys in another order, `stream` changed: the same prefix.
        let reordered = json!({ "messages": [{ "content": long, "role": "user" }, { "role": "user", "content": long }],
            "stream": false, "tools": [{ "name": "read" }], "model": "m" });
        assert!(cached_tokens(&mut prefixes, cache, &reordered) >= 1000, "the whole of the earlier two");
        // Another first message: nothing shared past the tools, under the minimum.
        assert_eq!(cached_tokens(&mut prefixes, cache, &body(&["other", &long])), 0);
    }
}
