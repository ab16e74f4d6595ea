// One skill of the catalog: its path, description, tools and warnings.

import type { Skill } from "../api";

export function SkillItem({ skill }: { skill: Skill }) {
  const id = `skill-${skill.path.replace(/[^A-Za-z0-9_-]/g, "-")}`;
  return (
    <li>
      <article class="skill" aria-labelledby={id}>
        <h3 id={id}>
          <code>{skill.path}</code>
        </h3>
        {skill.name && skill.name !== skill.path.split("/").pop() && <p class="muted">{skill.name}</p>}
        <p>{skill.description}</p>
        <p class="muted">
          Tools: {skill.tools === null ? "all" : skill.tools.length === 0 ? "none" : skill.tools.join(", ")}
          {skill.declared_tools && skill.declared_tools.length > 0 && ` (declared: ${skill.declared_tools.join(", ")})`}
        </p>
        {skill.warnings.length > 0 && (
          <ul class="warnings" aria-label={`Warnings for ${skill.path}`}>
            {skill.warnings.map((warning, index) => (
              <li key={index}>{warning}</li>
            ))}
          </ul>
        )}
      </article>
    </li>
  );
}
