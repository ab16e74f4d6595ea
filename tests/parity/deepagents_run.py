"""Runs file-tool calls through LangChain deepagents' real filesystem tools, for the parity test.

Reads a JSON list of calls (`{"name": ..., "args": {...}}`) on stdin and runs them one after the
other through the tools of deepagents' `FilesystemMiddleware` over its default backend
(`StateBackend`, files kept in the graph state), each call in its own graph invocation so every
call sees the files the previous calls left. Prints a JSON list with, for every call, whether the
tool answered success (`ok`), the text it answered (`content`) and every file's content afterwards
(`files`). `shared/agent-core/tests/deepagents_parity.rs` runs the same calls through ours.
"""

import json
import sys

try:
    from deepagents.middleware.filesystem import FilesystemMiddleware, FilesystemState
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode
except ImportError as error:  # The Rust test turns this exit code into a clear failure.
    print(f"deepagents is not installed in {sys.executable}: {error}", file=sys.stderr)
    sys.exit(3)


def file_text(data):
    """A state file's content as one string (older deepagents kept a list of lines)."""
    content = data["content"]
    return "\n".join(content) if isinstance(content, list) else content


def main():
    calls = json.load(sys.stdin)
    middleware = FilesystemMiddleware()
    # The tools as the middleware builds them; `wrap_tool_call` adds only result eviction, which
    # deepagents skips for its file tools, and a check on parallel calls, which this never makes.
    graph = StateGraph(FilesystemState)
    graph.add_node("tools", ToolNode(middleware.tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()

    files = {}
    results = []
    for index, call in enumerate(calls):
        request = AIMessage(content="", tool_calls=[{"name": call["name"], "args": call["args"], "id": f"call_{index}"}])
        state = app.invoke({"messages": [request], "files": files})
        files = state.get("files", {})
        answer = [message for message in state["messages"] if isinstance(message, ToolMessage)][-1]
        results.append(
            {
                "ok": answer.status == "success",
                "content": answer.content if isinstance(answer.content, str) else json.dumps(answer.content),
                "files": {path: file_text(data) for path, data in sorted(files.items())},
            }
        )
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
