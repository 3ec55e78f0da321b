//! The run loop: the queues a running response reads, the run slot (one response at a time),
//! turns of streaming and tool calls until the model stops, and the todo reminder. Each
//! assistant message is assembled from its stream by [`MessageAssembler`].

use super::*;

impl AgentSession {
    /// Queues a message for the next turn boundary of the running response.
    pub fn steer(&self, text: &str) {
        self.state().steering.push_back(Message::user(text));
    }

    /// Queues a message to be sent when the running response would stop.
    pub fn follow_up(&self, text: &str) {
        self.state().follow_up.push_back(Message::user(text));
    }

    /// Queues a message to go along with the next prompt.
    pub fn queue_next_turn(&self, message: Message) {
        self.state().pending_next_turn.push(message);
    }

    /// Sends `text` as a user prompt and runs the agent until it stops. Only the holder of the
    /// agent starts a run (`hold`: the lifecycle's phase guard carries it).
    pub(crate) async fn prompt(&self, hold: &Hold, text: &str, options: RunOptions) -> Result<RunResult, AgentError> {
        let claim = self.claim_run(hold, &CancellationToken::new())?;
        self.run_claimed(claim, text, options).await
    }

    /// Sends `message` as it is (no template expansion: the host's own message, or one a run
    /// did not send) and runs the agent until it stops.
    pub(crate) async fn prompt_message(&self, hold: &Hold, message: Message, options: RunOptions) -> Result<RunResult, AgentError> {
        let claim = self.claim_run(hold, &CancellationToken::new())?;
        self.run_claimed_message(claim, message, options).await
    }

    /// Takes the run slot (one response at a time), or `Busy`. The run stops when `cancel` (a
    /// token of the caller's: the handoff's own) or `abort()` fires. The handoff takes the slot
    /// before it announces itself, so that a prompt racing it is refused instead of the handoff.
    pub(crate) fn claim_run(&self, _hold: &Hold, cancel: &CancellationToken) -> Result<RunClaim<'_>, AgentError> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(AgentError::Busy);
        }
        let token = cancel.child_token();
        state.run = Some(token.clone());
        let scope = CancellationToken::new();
        state.run_scope = Some(scope.clone());
        Ok(RunClaim { slot: &self.state, token, pending: std::mem::take(&mut state.pending_next_turn), scope })
    }

    /// Runs `text` in the slot `claim` holds, and frees the slot.
    pub(crate) async fn run_claimed(&self, claim: RunClaim<'_>, text: &str, options: RunOptions) -> Result<RunResult, AgentError> {
        let text = if options.expand_prompt_templates {
            // `/skill:name args` first, then `/template args` (pi's order).
            let skill = system_prompt::skills::expand_command(text, &self.system_prompt().skills);
            templates::expand(skill.as_deref().unwrap_or(text), self.templates_dir.as_deref())
        } else {
            text.to_string()
        };
        self.run_claimed_message(claim, Message::user(text), options).await
    }

    /// Runs `prompt` as it is (a caller's own message: the handoff marks its request) in the
    /// slot `claim` holds, and frees the slot.
    pub(crate) async fn run_claimed_message(&self, mut claim: RunClaim<'_>, prompt: Message, options: RunOptions) -> Result<RunResult, AgentError> {
        let pending = std::mem::take(&mut claim.pending);
        // The claim lives across the run and frees the slot when dropped: on return, and also
        // when this future panics or is dropped.
        self.run(pending, prompt, options, &claim.token).await
    }

    /// Appends a message to the in-memory context and to the session file (pi persists at
    /// `message_end`); with `record` off (a detached run), to the run's result only.
    /// The file comes first: a message that could not be written (full disk) does not enter
    /// the in-memory context either, so the next request matches what a reload would see.
    /// Returns the id of the message's entry (empty when not recorded).
    pub(super) fn commit_message(&self, message: &Message, result: &mut RunResult, record: bool) -> Result<String, AgentError> {
        self.emit(AgentEvent::MessageEnd { message: message.clone() });
        result.messages.push(message.clone());
        if !record {
            return Ok(String::new());
        }
        let id = self.session().append_message(message)?;
        if let Some(replaced) = self.state().messages.as_mut() {
            replaced.push(message.clone());
        }
        Ok(id)
    }

    /// Tells the model what the user decided while reviewing its changes since the last
    /// prompt (rejected hunks, hunks kept with the user's edits): a `custom_message` entry of
    /// type `handoff_review` written by the host, stored before the prompt, so the next request
    /// carries it and a resume (pi's too) sees it. A failure is told, never fatal.
    fn note_review(&self) {
        let cwd = self.session().cwd().to_path_buf();
        let note = match self.review().take_note(&cwd) {
            Ok(Some(note)) => note,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("cannot read the review for the model's note: {e}");
                return;
            }
        };
        let stored = self.session().append_custom_message_entry(crate::session::review::NOTE_CUSTOM_TYPE, &note, true);
        match stored {
            Ok(_) => {
                if let Some(replaced) = self.state().messages.as_mut() {
                    replaced.push(Message::user(note));
                }
            }
            Err(e) => tracing::error!("cannot store the review's note: {e}"),
        }
    }

    /// Records the messages of a detached run (`RunOptions::record` off) in the session, as a
    /// recorded run would have, once the caller keeps them.
    pub fn record_messages(&self, messages: &[Message]) -> Result<(), AgentError> {
        for message in messages {
            self.session().append_message(message)?;
            if let Some(replaced) = self.state().messages.as_mut() {
                replaced.push(message.clone());
            }
        }
        Ok(())
    }

    async fn run(
        &self,
        pending: Vec<Message>,
        prompt: Message,
        options: RunOptions,
        cancel: &CancellationToken,
    ) -> Result<RunResult, AgentError> {
        if let Some(runner) = self.external_runner() {
            return self.run_external(&*runner, pending, prompt, options, cancel).await;
        }
        let mut result = RunResult::default();
        self.emit(AgentEvent::AgentStart);
        let mut inbox: Vec<Message> = pending;
        if options.record {
            self.note_review();
        }
        inbox.push(prompt);
        // The wall below reads the model's window: for Copilot it is known once its model list
        // was read (a no-op after that, and for every other provider).
        let provider = lock(&self.provider).clone();
        provider.prepare(cancel).await;
        // MCP servers start on the first prompt, all at once, each within its start-up timeout;
        // after that this returns at once.
        tokio::select! {
            () = self.tools.ready() => {}
            () = cancel.cancelled() => {}
        }
        // One level for the whole run: a change while it runs applies from the next prompt, so
        // a tool loop never switches thinking on halfway (Anthropic refuses a tool-use turn
        // without the thinking that led to it once thinking is on).
        let thinking = self.thinking_level();
        let mut turns = 0u32;
        // The last turn ran tools: the task is in flight.
        let mut after_tools = false;
        let outcome = 'turns: loop {
            // The wall, before anything new goes out (every call of the last turn has its
            // result by now): what would have been sent stays unsent, for the next session.
            if !(turns == 0 && options.send_first) {
                let boundary = if after_tools { wall::Boundary::AfterTools } else { wall::Boundary::BeforePrompt };
                if let Some(wall) = self.wall_at(boundary, after_tools, &inbox, options) {
                    result.unsent = std::mem::take(&mut inbox);
                    result.wall = Some(wall);
                    break Ok(());
                }
            }
            self.emit(AgentEvent::TurnStart);
            for message in std::mem::take(&mut inbox) {
                self.emit(AgentEvent::MessageStart { message: message.clone() });
                if let Err(e) = self.commit_message(&message, &mut result, options.record) {
                    break 'turns Err(e);
                }
            }
            turns += 1;
            // The reply's calls, with their arguments or why they are malformed (the message
            // already holds them as `toolCall` blocks).
            let (assistant, tool_calls) = self.stream_turn(options, thinking, cancel, &mut result).await;
            let stop = assistant.stop_reason.unwrap_or_default();
            if let Err(e) = self.commit_message(&assistant, &mut result, options.record) {
                break Err(e);
            }
            // A failed or stopped reply runs none of its calls (the wire layer answers them).
            let failed = matches!(stop, StopReason::Error | StopReason::Aborted);
            let start = result.messages.len();
            let tools = if failed || tool_calls.is_empty() || !options.use_tools || !options.record {
                None
            } else {
                match self.run_tool_calls(tool_calls, cancel, &mut result).await {
                    Ok(outcome) => Some(outcome),
                    Err(e) => break Err(e),
                }
            };
            let tool_results = result.messages[start..].to_vec();
            self.emit(AgentEvent::TurnEnd { message: assistant.clone(), tool_results });
            after_tools = tools.is_some();
            // A request refused as too large, or a reply that counted more input than the
            // window holds, is the wall (once the batch it asked for has run).
            if stop != StopReason::Aborted && tools != Some(ToolsOutcome::Stop) {
                if let Some(wall) = self.overflow_wall(&assistant, result.failure, failed || after_tools, options) {
                    result.wall = Some(wall);
                    break Ok(());
                }
            }
            if failed || tools == Some(ToolsOutcome::Stop) {
                break Ok(());
            }
            // A single-turn run (the handoff's) answers only its prompt: messages queued
            // meanwhile are meant for the conversation. They stay queued.
            if options.single_turn {
                break Ok(());
            }
            if tools.is_some() && turns >= self.max_turns {
                self.emit(AgentEvent::Notice(Notice::new(
                    Level::Warn,
                    format!("Stopped after {turns} turns (the turn limit of one prompt); send a prompt to go on"),
                )));
                break Ok(());
            }
            {
                let mut state = self.state();
                // After tool results the model goes on, with any steering typed meanwhile.
                if tools.is_some() || !state.steering.is_empty() {
                    inbox.extend(state.steering.drain(..));
                    continue;
                }
                if let Some(next) = state.follow_up.pop_front() {
                    inbox.push(next);
                    continue;
                }
            }
            // The model would stop: with open items on its list, it is reminded of them; the
            // wall after the final reply comes first (with open items the work is in flight,
            // and the next session is told to go on instead).
            let reminder = self.todo_reminder(stop, options, cancel);
            if let Some(wall) = self.wall_at(wall::Boundary::AfterReply, reminder.is_some(), reminder.as_slice(), options) {
                result.wall = Some(wall);
                break Ok(());
            }
            match reminder {
                Some(reminder) => inbox.push(reminder),
                None => break Ok(()),
            }
        };
        self.emit(AgentEvent::AgentEnd {
            messages: result.messages.clone(),
            failure: result.failure,
            at_wall: result.wall.is_some(),
        });
        outcome.map(|()| result)
    }

    /// The reminder to send when the model stopped normally (no tool calls) with open items on
    /// its todo list, as an ordinary user message; counted, at most `max_todo_reminders` times
    /// between two resets. `None`: nothing to remind of, or no more reminders.
    fn todo_reminder(&self, stop: StopReason, options: RunOptions, cancel: &CancellationToken) -> Option<Message> {
        if stop != StopReason::Stop
            || !options.use_tools
            || options.single_turn
            || cancel.is_cancelled()
            || self.tools.get(todo::TOOL_NAME).is_none()
            || self.state().todo_reminder_counter >= self.max_todo_reminders
        {
            return None;
        }
        let todos = self.todos();
        if !todos.iter().any(Todo::is_open) {
            return None;
        }
        let mut state = self.state();
        if state.todo_reminder_counter >= self.max_todo_reminders {
            return None;
        }
        state.todo_reminder_counter += 1;
        // Marked as the host's: never carried or shown as the user's words.
        let mut reminder = Message::user(todo::reminder_text(&todos));
        crate::session::mark_host(&mut reminder, crate::session::HostMessage::TodoReminder);
        Some(reminder)
    }

    /// Streams one assistant message. Provider failures end up in the message
    /// (`stopReason: error|aborted`, `errorMessage`), as pi records them.
    ///
    /// Tool calls become `toolCall` blocks where they started in the stream, with the arguments
    /// object (`{}` when the model's arguments are malformed, as pi stores what it cannot
    /// parse); the complete calls are also returned, with the malformed text, in order.
    async fn stream_turn(
        &self,
        options: RunOptions,
        thinking: ThinkingLevel,
        cancel: &CancellationToken,
        result: &mut RunResult,
    ) -> (Message, Vec<ToolCall>) {
        let provider = if options.document_model { self.document_provider() } else { lock(&self.provider).clone() };
        provider.prepare(cancel).await;
        // The session's context as it is stored (unparsed), and the run's messages when they are
        // not recorded.
        let mut context = self.request_messages();
        if !options.record {
            context.extend(result.messages.iter().cloned().map(ContextMessage::from));
        }
        let request = self.request_of(&provider, context, options, thinking, result);
        self.stream_request(&provider, &request, cancel, true, result).await
    }

    /// One reply to `prompt` after `context` (the session's, as read by the caller), outside the conversation: the run
    /// slot is not taken (a response may be running), no event is sent and nothing is recorded.
    /// The request is built as a run's is (`options`: the system prompt, the same context, the
    /// tool definitions, the session's thinking level), so it shares their prompt-cache prefix.
    /// The result holds the prompt and the reply.
    pub async fn reply_detached(
        &self,
        mut context: Vec<ContextMessage>,
        prompt: Message,
        options: RunOptions,
        cancel: &CancellationToken,
    ) -> RunResult {
        let mut result = RunResult { messages: vec![prompt.clone()], ..RunResult::default() };
        let provider = if options.document_model { self.document_provider() } else { lock(&self.provider).clone() };
        provider.prepare(cancel).await;
        context.push(ContextMessage::from(prompt));
        let request = self.request_of(&provider, context, options, self.thinking_level(), &mut result);
        let (reply, _) = self.stream_request(&provider, &request, cancel, false, &mut result).await;
        result.messages.push(reply);
        result
    }

    /// `context` with old tool results cleared when `handoff.clear_tool_results` says so (every
    /// request of the session the same way, the handoff's too: one prefix for the prompt cache).
    pub(super) fn cleared(&self, context: Vec<ContextMessage>) -> Vec<ContextMessage> {
        match self.clear_tool_results {
            Some(keep) => clear::clear_old_tool_results(context, keep),
            None => context,
        }
    }

    /// The request of a turn over `context`: fitted to the window when `options` say so (its
    /// estimate and what was left out go to `result`), with the system prompt and the tool
    /// definitions (tool choice "none" without tools: the same prefix, for a prompt-cache hit).
    fn request_of(
        &self,
        provider: &Provider,
        context: Vec<ContextMessage>,
        options: RunOptions,
        thinking: ThinkingLevel,
        result: &mut RunResult,
    ) -> ChatRequest {
        let config = &provider.current_config();
        let system = self.system_prompt();
        // The system prompt and tool definitions, estimated once for the fit and the request.
        let fixed = self.fixed_request_tokens();
        let context = self.cleared(context);
        let messages = if options.fit_to_window {
            // Room for the reply: max_tokens, at most a quarter of the window.
            let reply_tokens = fit::reply_room(config.max_tokens as u64, config.context_window);
            let room = config.context_window.saturating_sub(reply_tokens);
            let budget = options.fit_limit.map_or(room, |limit| limit.min(room));
            let budget = budget.saturating_sub(fixed).saturating_sub(256) as usize;
            let (fitted, elisions) = fit::fit_request(context, budget);
            if !elisions.is_empty() {
                tracing::info!(?elisions, budget, "conversation shortened to fit the context window");
                result.elisions = Some(elisions);
            }
            fitted
        } else {
            context
        };
        // What the request weighs by the estimate, for a caller that trims it again when the
        // provider refuses it (the automatic handoff).
        let sent: u64 = messages.iter().map(|m| fit::estimate_context_tokens(m) as u64).sum();
        result.request_tokens = Some(sent + fixed);
        // Without tools (the handoff) the definitions still go along, for a prompt-cache hit.
        let tool_choice = if options.use_tools { ToolChoice::Auto } else { ToolChoice::None };
        ChatRequest {
            system: Some(system.text.clone()),
            messages,
            tools: self.offered_tools().definitions(),
            tool_choice,
            thinking,
            cache_key: Some(self.session().session_id().to_string()),
        }
    }

    /// Streams `request`'s reply into a message, telling subscribers as it streams when `emit`.
    /// Provider failures end up in the message (`stopReason: error|aborted`, `errorMessage`),
    /// as pi records them.
    async fn stream_request(
        &self,
        provider: &Provider,
        request: &ChatRequest,
        cancel: &CancellationToken,
        emit: bool,
        result: &mut RunResult,
    ) -> (Message, Vec<ToolCall>) {
        let config = &provider.current_config();
        let mut assembler = MessageAssembler::new(Message::assistant(config.api.pi_name(), &config.name, &config.model));
        if emit {
            self.emit(AgentEvent::MessageStart { message: assembler.message().clone() });
        }
        let events = self.events.clone();
        // The sandbox's work ahead, when it waits for a reply to begin: started by its first
        // event (the request is out, the model's time is the host's idle time).
        let mut prefetch = self
            .prefetch_pending
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| self.session().cwd().to_path_buf());
        let mut on_event = |event: StreamEvent| {
            if let Some(cwd) = prefetch.take() {
                if self.prefetch_pending.swap(false, std::sync::atomic::Ordering::Relaxed) {
                    crate::sandbox::prefetch(&cwd, self.sandbox);
                }
            }
            let pushed = assembler.push(event);
            if !emit {
                return;
            }
            let event = match pushed {
                Assembled::Nothing => return,
                Assembled::Update(event) => AgentEvent::MessageUpdate { assistant_message_event: event },
                Assembled::Notice(text) => AgentEvent::Notice(Notice::new(Level::Warn, text)),
            };
            let _ = events.send(event);
        };
        let outcome = provider.stream(request, cancel, &mut on_event).await;
        let (mut message, tool_calls) = assembler.finish();
        match outcome {
            Ok(end) => {
                message.stop_reason = Some(end.stop_reason);
                message.usage = Some(end.usage);
                if let Some(id) = end.response_id {
                    message.extra.insert("responseId".into(), id.into());
                }
            }
            Err(ProviderError::Aborted) => {
                message.stop_reason = Some(StopReason::Aborted);
                message.error_message = Some("Request was aborted".into());
            }
            Err(e) => {
                // Reported to the user through the message (every front end shows it): only
                // logged here, below the CLI's stderr level, so the failure is not said twice.
                tracing::info!(error = %e, "model request failed");
                message.stop_reason = Some(StopReason::Error);
                message.error_message = Some(e.to_string());
                result.failure = Some(e.kind());
            }
        }
        (message, tool_calls)
    }
}
