// @ts-check
// What the console's demo model answers, decided from the request as a model would decide: the
// user's words, the tool results since them and the system prompt (state 1, or state 2 with a
// skill's SKILL.md, loaded or forced by a slash command, or a subagent's, which ends with
// `<subagent>`). `cargo xtask console` answers with it when
// no real model is set, and the browser tests check the page against it.

/** What the note skill writes: the browser test downloads it and compares the bytes. */
export const NOTE_TEXT = "# Nota\n\n- Reunión con la notaría el martes a las 10:00.\n- Llevar la nota simple del piso.\n";

/** What the Word skill's own script writes, from the note. */
export const WORD_FILE = "nota.docx";

/** The answer to anything else: what this model can do, long enough that its words stream for a few seconds. */
export const GREETING =
  "Hola. Soy el modelo de demostración de la consola: respondo con guion a unas pocas peticiones, " +
  "«Toma nota de la reunión del martes» y después «Pásame el borrador en Word», o «Investiga en " +
  "paralelo la compraventa y la hipoteca», que reparto entre dos subagentes, o «Cambia la hora de la " +
  "reunión a las 11:00», que espera tu aprobación, o «Encarga a un subagente mover la reunión a las " +
  "12:00», cuyo cambio también la espera; mi texto llega " +
  "palabra a palabra, como lo escribe un modelo. Para un modelo de verdad, arranca la consola con " +
  "LLM_PROVIDER, LLM_MODEL y LLM_API_KEY.";

/** The answer when the Word skill's script did not make the document (no note yet, say). */
export const WORD_FAILED =
  "No he podido hacer la minuta: el script de la habilidad no la generó (mira su resultado en la " +
  "línea de tiempo; necesita /workspace/nota.md). Pide primero «Toma nota de la reunión del martes» " +
  "y vuelve a pedírmela.";

/** The request that makes this model edit the note: an `edit_file` call the console's policy asks about. */
export const RESCHEDULE = "Cambia la hora de la reunión a las 11:00";

/** The answers once the person decided on the edit. */
export const RESCHEDULED = "He cambiado la hora de la reunión a las 11:00 en /workspace/nota.md.";
export const NOT_RESCHEDULED = "De acuerdo: la hora de la reunión sigue como estaba.";

/** The request that makes this model delegate: two `task` calls in one reply, run at once. */
export const DELEGATION = "Investiga en paralelo la compraventa y la hipoteca";

/** What each of the two subagents is told, the file it writes and what it writes there. */
export const SUBTASKS = [
  {
    topic: "compraventa",
    description: "Anota en /workspace/compraventa.md qué documentos pide la notaría para firmar una compraventa.",
    file: "/workspace/compraventa.md",
    content: "# Compraventa\n\n- DNI de quien compra y de quien vende.\n- Escritura anterior y nota simple del piso.\n- Último recibo del IBI.\n",
  },
  {
    topic: "hipoteca",
    description: "Anota en /workspace/hipoteca.md qué documentos pide la notaría para firmar una hipoteca.",
    file: "/workspace/hipoteca.md",
    content: "# Hipoteca\n\n- Oferta vinculante del banco (FEIN).\n- Tasación del piso.\n- Acta de transparencia firmada ante notario.\n",
  },
];

/** A subagent's answer, whose first line the timeline shows as its summary. */
export const subtaskAnswer = (/** @type {typeof SUBTASKS[number]} */ task) =>
  `Anotado en ${task.file}: tres documentos para la ${task.topic}.`;

/** The answer once both subagents have answered. */
export const DELEGATED =
  "Dos subagentes lo han investigado a la vez: lo que pide la notaría para la compraventa está en " +
  "/workspace/compraventa.md y para la hipoteca en /workspace/hipoteca.md.";

/** The request that makes this model hand the note's edit to one subagent, whose `edit_file` call the console's policy asks about. */
export const DELEGATED_RESCHEDULE = "Encarga a un subagente mover la reunión a las 12:00";

/** What that subagent is told. */
export const RESCHEDULE_TASK = "Cambia en /workspace/nota.md la hora de la reunión del martes de las 10:00 a las 12:00.";

/** The subagent's answer once its edit ran, which becomes its task call's result. */
export const SUBAGENT_RESCHEDULED = "He cambiado la hora de la reunión a las 12:00 en /workspace/nota.md.";

/** The answer once the subagent answered that it made the edit. */
export const DELEGATED_RESCHEDULED = "Un subagente ha cambiado la hora de la reunión a las 12:00 en /workspace/nota.md.";

/**
 * @typedef {{ role: string, content?: string | null, name?: string, tool_call_id?: string,
 *   tool_calls?: { id: string, function: { name: string, arguments: string } }[] }} Message
 * @typedef {{ tool: string, args: Record<string, unknown> }} Call
 * @typedef {{ text: string } | Call | { calls: Call[] }} Reply
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
  const results = since.filter((m) => m.role === "tool");
  const done = results.map((m) => m.name ?? names.get(m.tool_call_id ?? "") ?? "");
  // A subagent's prompt ends with `<subagent>…</subagent>`; its task is its user message.
  if (system.includes("<subagent>")) {
    if (user.includes(RESCHEDULE_TASK)) {
      if (!done.includes("edit_file")) {
        return { tool: "edit_file", args: { file_path: "/workspace/nota.md", old_string: "10:00", new_string: "12:00" } };
      }
      const edited = String(results[done.lastIndexOf("edit_file")]?.content ?? "");
      if (edited.startsWith("The user rejected")) return { text: "No he cambiado la hora: la persona lo rechazó." };
      if (edited.startsWith("Error")) return { text: `No he podido cambiarla: ${edited.split("\n", 1)[0]}` };
      return { text: SUBAGENT_RESCHEDULED };
    }
    const task = SUBTASKS.find((subtask) => user.includes(subtask.file));
    if (!task) return { text: "Soy un subagente del modelo de demostración y no sé hacer esta tarea." };
    if (!done.includes("write_file")) return { tool: "write_file", args: { file_path: task.file, content: task.content } };
    return { text: subtaskAnswer(task) };
  }
  if (/un subagente/i.test(user)) {
    if (!done.includes("task")) {
      return { tool: "task", args: { description: RESCHEDULE_TASK, subagent_type: "general-purpose" } };
    }
    const answered = String(results[done.lastIndexOf("task")]?.content ?? "");
    if (answered !== SUBAGENT_RESCHEDULED) return { text: `El subagente no cambió la hora: ${answered.split("\n", 1)[0]}` };
    return { text: DELEGATED_RESCHEDULED };
  }
  if (/en paralelo/i.test(user)) {
    if (!done.includes("task")) {
      return {
        calls: SUBTASKS.map((task) => ({
          tool: "task",
          args: { description: task.description, subagent_type: "general-purpose" },
        })),
      };
    }
    const failed = results.find((result) => String(result.content ?? "").startsWith("Error"));
    if (failed) return { text: `Un subagente no terminó su parte: ${String(failed.content).split("\n", 1)[0]}` };
    return { text: DELEGATED };
  }
  if (/cambia la hora/i.test(user)) {
    if (!done.includes("edit_file")) {
      return { tool: "edit_file", args: { file_path: "/workspace/nota.md", old_string: "10:00", new_string: "11:00" } };
    }
    const edited = String(results[done.lastIndexOf("edit_file")]?.content ?? "");
    if (edited.startsWith("The user rejected")) return { text: NOT_RESCHEDULED };
    if (edited.startsWith("Error")) return { text: `No he podido cambiarla: ${edited.split("\n", 1)[0]}` };
    return { text: RESCHEDULED };
  }
  const wordSkill = system.includes("# Minuta en Word");
  if (/word/i.test(user) || wordSkill) {
    if (!wordSkill && !done.includes("load_skill")) {
      return { tool: "load_skill", args: { skill_path: "documentos/minuta-word" } };
    }
    if (!done.includes("execute")) {
      return { tool: "execute", args: { command: `python /skills/minuta-word/scripts/md_a_docx.py nota.md ${WORD_FILE}` } };
    }
    const ran = String(results[done.lastIndexOf("execute")]?.content ?? "");
    if (!ran.includes("[Command succeeded")) return { text: WORD_FAILED };
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

