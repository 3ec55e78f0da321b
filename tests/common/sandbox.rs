//! What the sandbox tests share: whether this kernel enforces the sandbox (a test that finds it
//! cannot is SKIPPED, or fails when CI requires it), and a front end that answers approvals from
//! a list and records what it was asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use handoff_nvim::core::sandbox::Support;
use handoff_nvim::core::tools::consent::{ApprovalRequest, Consent, Decision};

/// Whether CI asked every sandbox test to run (`HANDOFF_REQUIRE_SANDBOX=1`).
pub fn required() -> bool {
    std::env::var("HANDOFF_REQUIRE_SANDBOX").is_ok_and(|v| v == "1")
}

/// Whether the sandbox can be enforced here; if not, says `test` is skipped (or fails, when CI
/// requires the sandbox).
pub fn enforced(test: &str) -> bool {
    match Support::probe().enforceable() {
        Ok(()) => true,
        Err(why) => skipped(test, &why),
    }
}

/// `test` cannot run here, for `why`: SKIPPED, or a failure when CI requires the sandbox.
pub fn skipped(test: &str, why: &str) -> bool {
    assert!(!required(), "{test}: HANDOFF_REQUIRE_SANDBOX=1 but the sandbox cannot be enforced: {why}");
    eprintln!("SKIPPED {test}: {why}");
    false
}

/// Answers from a list (then "not scripted") and records what it was asked.
pub struct Recorder {
    answers: Mutex<VecDeque<Decision>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Recorder {
    pub fn new(answers: Vec<Decision>) -> Arc<Recorder> {
        Arc::new(Recorder { answers: Mutex::new(answers.into()), asked: Mutex::new(Vec::new()) })
    }

    pub fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Consent for Recorder {
    async fn ask(&self, request: ApprovalRequest) -> Decision {
        self.asked.lock().unwrap().push(request);
        self.answers.lock().unwrap().pop_front().unwrap_or(Decision::Reject { reason: Some("not scripted".into()) })
    }
}
