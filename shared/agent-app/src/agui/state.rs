//! The agent state an AG-UI front-end is shown: the skill the turn is in, the session's todo list
//! and the planner's plan. Sent whole as `STATE_SNAPSHOT` when a run starts, and as RFC 6902
//! `replace` operations (`STATE_DELTA`) whenever one of the three changes.

use agent_core::store::SessionState;
use serde_json::{json, Map, Value};

/// The state's members, each a top-level JSON Pointer of the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Skill,
    Todos,
    Plan,
}

impl Member {
    /// The member's JSON Pointer.
    pub fn path(self) -> &'static str {
        match self {
            Member::Skill => "/skill",
            Member::Todos => "/todos",
            Member::Plan => "/plan",
        }
    }
}

/// The state as last sent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentState {
    skill: Value,
    todos: Value,
    plan: Value,
}

impl Default for AgentState {
    /// A new thread: no skill, no todos, no plan.
    fn default() -> Self {
        Self { skill: Value::Null, todos: Value::Array(Vec::new()), plan: Value::Null }
    }
}

impl AgentState {
    /// The state a stored session is in before a turn: no skill is current between turns, the todo
    /// list is kept, and so is the planner's plan (shown by [`plan_view`]).
    pub fn of_session(state: &SessionState) -> Self {
        let todos = serde_json::to_value(&state.todos).unwrap_or_else(|_| Value::Array(Vec::new()));
        Self { skill: Value::Null, todos, plan: plan_view(state.plan.as_ref()) }
    }

    /// The whole state as one JSON object.
    pub fn snapshot(&self) -> Value {
        json!({"skill": self.skill, "todos": self.todos, "plan": self.plan})
    }

    pub fn get(&self, member: Member) -> &Value {
        match member {
            Member::Skill => &self.skill,
            Member::Todos => &self.todos,
            Member::Plan => &self.plan,
        }
    }

    /// Sets `member` to `value`; false when it already had that value (nothing to send).
    pub fn set(&mut self, member: Member, value: Value) -> bool {
        let slot = match member {
            Member::Skill => &mut self.skill,
            Member::Todos => &mut self.todos,
            Member::Plan => &mut self.plan,
        };
        if *slot == value {
            return false;
        }
        *slot = value;
        true
    }
}

/// What a front-end is shown of the planner's stored plan: the request it answers, its tasks and
/// the position of the one being worked on. The rest (prompts offered, arguments asked) is the
/// planner's own bookkeeping. `null` without a plan.
pub fn plan_view(stored: Option<&Value>) -> Value {
    let Some(Value::Object(plan)) = stored else { return Value::Null };
    let mut view = Map::new();
    for key in ["request", "tasks", "position"] {
        if let Some(value) = plan.get(key) {
            view.insert(key.to_owned(), value.clone());
        }
    }
    Value::Object(view)
}

/// The todo list a `todowrite` call's arguments set, as the tool keeps it: each item's `content`
/// (trimmed) and `status`. `None` when the arguments are not a list the tool accepts.
pub fn todos_of(arguments: &Value) -> Option<Value> {
    let items = arguments.get("todos")?.as_array()?;
    let todos = items
        .iter()
        .map(|item| {
            let content = item.get("content")?.as_str()?.trim();
            let status = item.get("status")?.as_str()?;
            Some(json!({"content": content, "status": status}))
        })
        .collect::<Option<Vec<Value>>>()?;
    Some(Value::Array(todos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::store::{Session, TodoItem, TodoStatus};
    use agent_core::{SessionId, UserId};

    #[test]
    fn a_sessions_state_shows_its_todos_and_the_plans_tasks() {
        let mut session = Session::new(UserId::parse("u").unwrap(), SessionId::parse("s").unwrap());
        session.state.todos = vec![TodoItem { content: "Leer".into(), status: TodoStatus::InProgress }];
        session.state.plan = Some(json!({"request": "r", "tasks": [{"goal": "g"}], "position": 0, "selection": {}}));
        let state = AgentState::of_session(&session.state);
        assert_eq!(
            state.snapshot(),
            json!({"skill": null, "todos": [{"content": "Leer", "status": "in_progress"}],
                   "plan": {"request": "r", "tasks": [{"goal": "g"}], "position": 0}})
        );
        assert_eq!(AgentState::default().snapshot(), json!({"skill": null, "todos": [], "plan": null}));
    }

    #[test]
    fn setting_the_same_value_changes_nothing() {
        let mut state = AgentState::default();
        assert!(state.set(Member::Skill, json!("a/b")));
        assert!(!state.set(Member::Skill, json!("a/b")));
        assert_eq!(state.get(Member::Skill), "a/b");
        assert_eq!(Member::Todos.path(), "/todos");
    }

    #[test]
    fn todos_are_read_from_a_todowrite_calls_arguments() {
        let arguments = json!({"todos": [{"content": " Uno ", "status": "pending"}]});
        assert_eq!(todos_of(&arguments), Some(json!([{"content": "Uno", "status": "pending"}])));
        assert_eq!(todos_of(&json!({"todos": [{"content": "x"}]})), None);
        assert_eq!(todos_of(&json!({})), None);
    }
}
