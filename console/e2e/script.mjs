// @ts-check
// What the console's scripted model answers, decided from the request as a model would decide:
// the user's words, the tool results since them and the system prompt (state 1, or state 2 with
// the note skill's SKILL.md). Shared by the model server and the browser tests' expectations.

/** What the note skill writes: the browser test downloads it and compares the bytes. */
export const NOTE_TEXT = "# Nota\n\n- Reunión con la notaría el martes a las 10:00.\n- Llevar la nota simple del piso.\n";

/** What the Word skill's own script writes, from the note. */
export const WORD_FILE = "nota.docx";

/** The answer to anything else: long enough that its words stream for a few seconds. */
export const GREETING =
  "Hola. Esta respuesta llega palabra a palabra, como la escribe un modelo, para que la consola " +
  "la muestre mientras el turno sigue en marcha y no solo al final.";

/**
 * @typedef {{ role: string, content?: string | null, name?: string, tool_call_id?: string,
 *   tool_calls?: { id: string, function: { name: string, arguments: string } }[] }} Message
 * @typedef {{ text: string } | { tool: string, args: Record<string, unknown> }} Reply
 */

/**
 * The reply to one request.
 * @param {Message[]} messages
 * @returns {Reply}
 */
export function decide(messages) {
  const system = messages[0]?.role === "system" ? String(messages[0].content ?? "") : "";
  // A forced skill's per-step reminder is a user message of the runtime's, not the user's.
  const lastUserIndex = messages.findLastIndex(
    (m) => m.role === "user" && !String(m.content ?? "").startsWith("[SKILL REMINDER]"),
  );
  const user = String(messages[lastUserIndex]?.content ?? "");
  const since = messages.slice(lastUserIndex + 1);
  /** @type {Map<string, string>} */
  const names = new Map();
  for (const message of since) {
    for (const call of message.tool_calls ?? []) names.set(call.id, call.function.name);
  }
  const done = since.filter((m) => m.role === "tool").map((m) => m.name ?? names.get(m.tool_call_id ?? "") ?? "");
  const wordSkill = system.includes("# Minuta en Word");
  if (/word/i.test(user) || wordSkill) {
    if (!wordSkill && !done.includes("load_skill")) {
      return { tool: "load_skill", args: { skill_path: "documentos/minuta-word" } };
    }
    if (!done.includes("execute")) {
      return { tool: "execute", args: { command: `python /skills/minuta-word/scripts/md_a_docx.py nota.md ${WORD_FILE}` } };
    }
    return { text: `La minuta está en /workspace/${WORD_FILE}: descárgala desde el espacio de trabajo.` };
  }
  const noteSkill = system.includes("# Nota rápida");
  if (/nota/i.test(user) || noteSkill) {
    if (!noteSkill && !done.includes("load_skill")) {
      return { tool: "load_skill", args: { skill_path: "borradores/nota-rapida" } };
    }
    if (!done.includes("write_file")) {
      return { tool: "write_file", args: { file_path: "/workspace/nota.md", content: NOTE_TEXT } };
    }
    return { text: "He guardado la nota en /workspace/nota.md con la reunión del martes y lo que hay que llevar." };
  }
  return { text: GREETING };
}

