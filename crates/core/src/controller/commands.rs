//! The slash commands, once: every command the prompt takes, with its argument and its help.
//! The controller parses input by this table ([`parse`], through `classify_input`), the ACP
//! agent advertises it (`available_commands_update`), the plugin completes it
//! (`lua/handoff/slash_commands.lua`, generated from it by the Neovim front end and checked by
//! `tests/commands.rs`), and the CLI's `prompt` runs what it parses. A new command is a new
//! variant here: every `match` on it, the parser's included, must then say what it does.

/// One slash command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlashCommand {
    Handoff,
    Pin,
    Pins,
    Unpin,
    Back,
    New,
    Sessions,
    Model,
    Thinking,
}

impl SlashCommand {
    /// Every command, in the order they are offered.
    pub const ALL: [SlashCommand; 9] = [
        SlashCommand::Handoff,
        SlashCommand::Pin,
        SlashCommand::Pins,
        SlashCommand::Unpin,
        SlashCommand::Back,
        SlashCommand::New,
        SlashCommand::Sessions,
        SlashCommand::Model,
        SlashCommand::Thinking,
    ];

    /// The name typed after `/`.
    pub fn name(self) -> &'static str {
        match self {
            SlashCommand::Handoff => "handoff",
            SlashCommand::Pin => "pin",
            SlashCommand::Pins => "pins",
            SlashCommand::Unpin => "unpin",
            SlashCommand::Back => "back",
            SlashCommand::New => "new",
            SlashCommand::Sessions => "sessions",
            SlashCommand::Model => "model",
            SlashCommand::Thinking => "thinking",
        }
    }

    /// Its argument as the prompt shows it (`[…]` optional, `{…}` required); `None`: it takes
    /// none, and only the name alone is the command (`/pins x` is a prompt, maybe a template).
    pub fn args(self) -> Option<&'static str> {
        match self {
            SlashCommand::Handoff => Some("[--to AGENT] [focus instructions]"),
            SlashCommand::Pin => Some("{text}"),
            SlashCommand::Unpin => Some("{number}"),
            SlashCommand::Model => Some("[name]"),
            SlashCommand::Thinking => Some("[off|minimal|low|medium|high]"),
            SlashCommand::Pins | SlashCommand::Back | SlashCommand::New | SlashCommand::Sessions => None,
        }
    }

    /// What it does, in one line.
    pub fn help(self) -> &'static str {
        match self {
            SlashCommand::Handoff => "Hand off: write a handoff document and continue in a new session that starts from it (--to: on that agent, or ours)",
            SlashCommand::Pin => "Pin a text for the whole task: sent with every request, carried whole by every handoff",
            SlashCommand::Pins => "List the pins, numbered",
            SlashCommand::Unpin => "Remove a pin (its number in /pins)",
            SlashCommand::Back => "Go back to the session this one was handed off from",
            SlashCommand::New => "Start a new, empty session",
            SlashCommand::Sessions => "List the sessions of this folder, newest first (the editor picks one to resume)",
            SlashCommand::Model => "Switch the model (no name: say which is in use)",
            SlashCommand::Thinking => "Set how hard the model thinks (no level: say which is in force)",
        }
    }

    /// The command called `name` (without the `/`).
    pub fn named(name: &str) -> Option<SlashCommand> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// `input` as a command and its argument (whitespace around it dropped; empty when none was
/// given), or `None` when it is no command: a prompt. Only input that starts with `/name`
/// (whitespace before it aside) is a command, and a command that takes no argument only alone.
pub fn parse(input: &str) -> Option<(SlashCommand, &str)> {
    let line = input.trim_start().strip_prefix('/')?;
    let (name, arg) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let command = SlashCommand::named(name)?;
    let arg = arg.trim();
    if command.args().is_none() && !arg.is_empty() {
        return None;
    }
    Some((command, arg))
}

/// What `/handoff`'s argument (and `:Handoff`'s) says: the focus instructions, and where the new
/// session goes on — `--to NAME` anywhere in it, an external agent's name or `ours` (`None`:
/// where this session runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandoffArgs {
    pub focus: String,
    pub to: Option<String>,
}

/// Why `--to` alone is refused.
pub const TO_NEEDS_A_NAME: &str = "--to needs an agent's name (or ours)";

/// `/handoff`'s argument split ([`HandoffArgs`]); `Err`: `--to` without a name.
pub fn handoff_args(arg: &str) -> Result<HandoffArgs, &'static str> {
    let mut words = arg.split_whitespace().map(|w| (w.as_ptr() as usize - arg.as_ptr() as usize, w));
    let Some((start, _)) = words.find(|(_, w)| *w == "--to") else {
        return Ok(HandoffArgs { focus: arg.trim().to_string(), to: None });
    };
    let Some((name_at, name)) = words.next() else {
        return Err(TO_NEEDS_A_NAME);
    };
    let (before, after) = (arg[..start].trim(), arg[name_at + name.len()..].trim());
    let focus = if before.is_empty() || after.is_empty() { format!("{before}{after}") } else { format!("{before} {after}") };
    Ok(HandoffArgs { focus, to: Some(name.to_string()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_args_take_to_anywhere() {
        let args = |focus: &str, to: Option<&str>| Ok(HandoffArgs { focus: focus.into(), to: to.map(str::to_string) });
        assert_eq!(handoff_args("keep it short"), args("keep it short", None));
        assert_eq!(handoff_args("keep it short --to codex"), args("keep it short", Some("codex")));
        assert_eq!(handoff_args("--to ours  the tests\nfirst"), args("the tests\nfirst", Some("ours")));
        assert_eq!(handoff_args("the  --to claude  tests"), args("the tests", Some("claude")));
        assert_eq!(handoff_args("--tone formal"), args("--tone formal", None));
        assert_eq!(handoff_args("focus --to"), Err(TO_NEEDS_A_NAME));
        assert_eq!(handoff_args(""), args("", None));
    }

    #[test]
    fn names_are_unique_and_parse_back() {
        for command in SlashCommand::ALL {
            assert_eq!(SlashCommand::named(command.name()), Some(command));
            assert_eq!(parse(&format!("/{}", command.name())), Some((command, "")));
        }
    }

    #[test]
    fn a_command_is_its_name_at_the_start_then_whitespace_or_the_end() {
        assert_eq!(parse("/handoff"), Some((SlashCommand::Handoff, "")));
        assert_eq!(parse("  /handoff  focus on tests "), Some((SlashCommand::Handoff, "focus on tests")));
        assert_eq!(parse("/pin\nline one\nline two"), Some((SlashCommand::Pin, "line one\nline two")));
        assert_eq!(parse("/handoffs"), None);
        assert_eq!(parse("please /handoff"), None);
        // One that takes no argument is a command only alone.
        assert_eq!(parse(" /back "), Some((SlashCommand::Back, "")));
        assert_eq!(parse("/pins x"), None);
        assert_eq!(parse("/new session please"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn the_thinking_hint_names_every_level() {
        let levels: Vec<&str> = crate::provider::ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
        assert_eq!(SlashCommand::Thinking.args(), Some(format!("[{}]", levels.join("|")).as_str()));
    }
}
