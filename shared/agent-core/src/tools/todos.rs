//! The todo list tools, `todowrite` and `todoread`: a list kept across the turns of a session,
//! bounded and validated.

use serde_json::Value;

use super::SkillsEnv;
use crate::store::{TodoItem, TodoStatus};

const MAX_TODOS: usize = 50;
const MAX_TODO_CHARS: usize = 500;

impl SkillsEnv<'_> {
    pub(super) fn run_todo_write(&mut self, args: &Value) -> String {
        match parse_todos(args) {
            Ok(todos) => {
                let count = |status| todos.iter().filter(|t| t.status == status).count();
                let summary = format!(
                    "Todo list updated: {} items ({} pending, {} in progress, {} completed).",
                    todos.len(),
                    count(TodoStatus::Pending),
                    count(TodoStatus::InProgress),
                    count(TodoStatus::Completed)
                );
                self.todos = todos;
                summary
            }
            Err(message) => format!("Error: {message}"),
        }
    }

    pub(super) fn run_todo_read(&self) -> String {
        if self.todos.is_empty() {
            return "The todo list is empty.".to_owned();
        }
        self.todos
            .iter()
            .enumerate()
            .map(|(i, todo)| {
                let status = match todo.status {
                    TodoStatus::Pending => "pending",
                    TodoStatus::InProgress => "in_progress",
                    TodoStatus::Completed => "completed",
                };
                format!("{}. [{status}] {}", i + 1, todo.content)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn parse_todos(args: &Value) -> Result<Vec<TodoItem>, String> {
    let items =
        args.get("todos").and_then(Value::as_array).ok_or("todowrite needs `todos`, a list of {content, status}")?;
    if items.len() > MAX_TODOS {
        return Err(format!("at most {MAX_TODOS} todos are kept"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let content = item
                .get("content")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("todo {} needs a non-empty `content` string", i + 1))?;
            if content.chars().count() > MAX_TODO_CHARS {
                return Err(format!("todo {} is longer than {MAX_TODO_CHARS} characters", i + 1));
            }
            let status = match item.get("status").and_then(Value::as_str) {
                Some("pending") => TodoStatus::Pending,
                Some("in_progress") => TodoStatus::InProgress,
                Some("completed") => TodoStatus::Completed,
                _ => return Err(format!("todo {} needs `status`: pending, in_progress or completed", i + 1)),
            };
            Ok(TodoItem { content: content.to_owned(), status })
        })
        .collect()
}
