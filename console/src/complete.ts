// The slash-command completion: what is being typed after a leading `/`, the skills that match
// it, and the message once one is picked.

import type { Skill } from "./api";

/** The text typed after a leading `/` up to the caret, or null when no command is being typed. */
export function slashQuery(value: string, caret: number): string | null {
  if (!value.startsWith("/")) return null;
  const typed = value.slice(1, caret);
  if (caret < 1 || /\s/.test(typed)) return null;
  return typed;
}

/** Skills whose path contains the query, those whose path or name starts with it first. */
export function matchSkills(skills: Skill[], query: string, limit = 20): Skill[] {
  const wanted = query.toLowerCase();
  const scored: { skill: Skill; rank: number }[] = [];
  for (const skill of skills) {
    const path = skill.path.toLowerCase();
    const name = skill.name.toLowerCase();
    let rank: number;
    if (wanted === "" || path.startsWith(wanted)) rank = 0;
    else if (name.startsWith(wanted) || path.split("/").some((part) => part.startsWith(wanted))) rank = 1;
    else if (path.includes(wanted) || name.includes(wanted)) rank = 2;
    else continue;
    scored.push({ skill, rank });
  }
  scored.sort((a, b) => a.rank - b.rank || a.skill.path.localeCompare(b.skill.path));
  return scored.slice(0, limit).map((entry) => entry.skill);
}

/** The message with its command replaced by `/path `, and where the caret goes. */
export function insertSkill(value: string, path: string): { value: string; caret: number } {
  const match = /^\/\S*\s?/.exec(value);
  const rest = match ? value.slice(match[0].length) : value;
  const command = `/${path} `;
  return { value: command + rest, caret: command.length };
}
