//! The two-state system prompt: a validated base template with the skill listing, or the loaded
//! SKILL.md. What varies from day to day (the date) is kept apart, in a tail sent after the part a
//! provider caches, so the cached prefix holds for every call of a prompt state.

use std::str::FromStr;

use thiserror::Error;

use crate::skills::{Listing, SkillDoc};

/// Every placeholder a base template may use.
pub const PLACEHOLDERS: [&str; 7] =
    ["date", "name", "language", "profile", "initial_context_title", "initial_context_description", "skill"];
/// The placeholders a base template must use. The others are said in the prompt's tail when the
/// template leaves them out.
pub const REQUIRED_PLACEHOLDERS: [&str; 4] = ["name", "language", "profile", "skill"];
/// What `{date}` renders as inside a template: the date itself is in the tail, after the cached
/// part, so a template that names it does not make the cache expire every midnight.
pub const DATE_REFERENCE: &str = "today (the date is stated at the end of these instructions)";

/// The built-in base prompt, used when the tenant has no `BASE_PROMPT.md`.
pub const DEFAULT_TEMPLATE: &str = "\
You are a careful assistant working for {name}. Answer in {language}.

## About the user
{profile}

## Files
You have a virtual filesystem: /workspace is yours to read and write and is kept for this \
conversation; /ticket (when present) holds the files of the ticket you are working on, read-only; \
/skills appears once you load a skill and holds that skill's files. Use ls, read_file, write_file, \
edit_file, delete, glob and grep to work with them.

## Skills
Skills are expert instructions for specific tasks. When the user's request matches a skill, load it \
with load_skill before you start; loaded skills are cleared after every answer, so load the skill \
again in a later turn if you still need it.

{skill}
";

/// What `/memories` is for, added to the system prompt in both states (a tenant's own base prompt
/// and a loaded skill's instructions need not say it).
pub const MEMORY_SECTION: &str = "\n\n## Memory\n\
/memories is your long-term memory of this user, kept across all of their conversations (/workspace \
lasts for this one only). At the start of a conversation, or when the user refers to earlier work, check \
it (ls /memories). When you learn something a later conversation should know (their preferences, facts \
about their work, corrections), save it there in short files, one topic each. Never save secrets.\n";

/// A base template that cannot be used; the message names the problem precisely.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TemplateError {
    #[error("base prompt template uses an unknown placeholder {{{0}}}")]
    UnknownPlaceholder(String),
    #[error("base prompt template is missing the placeholder {{{0}}}")]
    MissingPlaceholder(&'static str),
    #[error("base prompt template has an unmatched brace at byte {0} (write {{{{ or }}}} for a literal brace)")]
    UnmatchedBrace(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Slot(usize),
}

/// A parsed base template: literal text and placeholder slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    pieces: Vec<Piece>,
    /// Whether the template places the conversation's context itself; if not, the tail says it.
    places_context: bool,
}

impl PromptTemplate {
    /// Parses `{placeholder}` slots and `{{`/`}}` escapes; every placeholder of
    /// [`REQUIRED_PLACEHOLDERS`] must appear and none outside [`PLACEHOLDERS`] may.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut seen = [false; PLACEHOLDERS.len()];
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'{' if bytes.get(i + 1) == Some(&b'{') => {
                    literal.push('{');
                    i += 2;
                }
                b'}' if bytes.get(i + 1) == Some(&b'}') => {
                    literal.push('}');
                    i += 2;
                }
                b'{' => {
                    let close = text[i + 1..].find('}').ok_or(TemplateError::UnmatchedBrace(i))? + i + 1;
                    let name = &text[i + 1..close];
                    if name.contains('{') {
                        return Err(TemplateError::UnmatchedBrace(i));
                    }
                    let slot = PLACEHOLDERS
                        .iter()
                        .position(|p| *p == name)
                        .ok_or_else(|| TemplateError::UnknownPlaceholder(name.to_owned()))?;
                    seen[slot] = true;
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Slot(slot));
                    i = close + 1;
                }
                b'}' => return Err(TemplateError::UnmatchedBrace(i)),
                _ => {
                    let next = text[i..].find(['{', '}']).map_or(text.len(), |offset| i + offset);
                    literal.push_str(&text[i..next]);
                    i = next;
                }
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        let seen_named = |name: &str| PLACEHOLDERS.iter().position(|p| *p == name).is_some_and(|slot| seen[slot]);
        if let Some(missing) = REQUIRED_PLACEHOLDERS.iter().find(|name| !seen_named(name)) {
            return Err(TemplateError::MissingPlaceholder(missing));
        }
        let places_context = seen_named("initial_context_title") || seen_named("initial_context_description");
        Ok(Self { pieces, places_context })
    }

    /// The whole prompt as one text, the tail last; values are inserted verbatim, so braces
    /// inside them are never re-read.
    pub fn render(&self, vars: &PromptVars, skill: &str) -> String {
        let prompt =
            SystemPrompt { sections: self.render_sections(vars, &Section::new(SectionKind::SkillDocument, skill)) };
        prompt.render() + &prompt.render_tail()
    }
}

impl PromptTemplate {
    /// Like [`PromptTemplate::render`], but keeps the template's own text apart from what fills
    /// `{skill}`, and ends with the [`SectionKind::Tail`]: the date, and the conversation's context
    /// unless the template places it.
    pub fn render_sections(&self, vars: &PromptVars, skill: &Section) -> Vec<Section> {
        let mut sections = Vec::new();
        let mut base = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Slot(6) => {
                    if !base.is_empty() {
                        sections.push(Section::new(SectionKind::Base, std::mem::take(&mut base)));
                    }
                    sections.push(skill.clone());
                }
                Piece::Text(_) | Piece::Slot(_) => {
                    base.push_str(&self.render_piece(piece, vars));
                }
            }
        }
        if !base.is_empty() {
            sections.push(Section::new(SectionKind::Base, base));
        }
        sections.push(self.tail(vars));
        sections
    }

    /// What varies between days and conversations, said after the cached part.
    fn tail(&self, vars: &PromptVars) -> Section {
        let mut tail = String::from("\n\n");
        if !self.places_context {
            tail.push_str(&format!(
                "## Context of this conversation\n{}\n{}\n\n",
                vars.initial_context_title, vars.initial_context_description
            ));
        }
        tail.push_str(&format!("Today is {}.\n", vars.date));
        Section::new(SectionKind::Tail, tail)
    }

    fn render_piece(&self, piece: &Piece, vars: &PromptVars) -> String {
        match piece {
            Piece::Text(text) => text.clone(),
            Piece::Slot(0) => DATE_REFERENCE.to_owned(),
            Piece::Slot(slot) => vars.slot_values("")[*slot].to_owned(),
        }
    }
}

/// What a part of the system prompt is, which decides whether the context budget may trim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionKind {
    /// The base template's own text: trimmed first.
    Base,
    /// The state-1 listing of skills: shrunk tier by tier (see `fallbacks`), never dropped whole.
    SkillListing,
    /// Descriptions of the offered tools (forced skills): may be trimmed.
    Tools,
    /// A loaded SKILL.md (state 2): never cut.
    SkillDocument,
    /// A forced skill's `<mandatory-skill>` block: never cut.
    MandatorySkill,
    /// The trailing `<skill-reminder>`: never cut.
    Reminder,
    /// What `/memories` is for ([`MEMORY_SECTION`]): may be trimmed.
    Memory,
    /// What varies between days and conversations (the date, the conversation's context): sent
    /// after the cached part of the prompt, wherever it sits among the sections; never cut.
    Tail,
}

/// One part of a system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub kind: SectionKind,
    pub text: String,
    /// Smaller renderings of the same content, largest first, for the context budget to shrink to.
    pub fallbacks: Vec<String>,
}

impl Section {
    pub fn new(kind: SectionKind, text: impl Into<String>) -> Self {
        Self { kind, text: text.into(), fallbacks: Vec::new() }
    }

    /// The skill listing, with its smaller tiers.
    pub fn listing(listing: &Listing) -> Self {
        Self { kind: SectionKind::SkillListing, text: listing.text.clone(), fallbacks: listing.fallbacks.clone() }
    }

    /// The base prompt (the tenant's policy), skill instructions, their reminder and the tail are
    /// never trimmed.
    pub fn is_protected(&self) -> bool {
        matches!(
            self.kind,
            SectionKind::Base
                | SectionKind::SkillDocument
                | SectionKind::MandatorySkill
                | SectionKind::Reminder
                | SectionKind::Tail
        )
    }
}

/// A system prompt as sections; rendering concatenates them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemPrompt {
    pub sections: Vec<Section>,
}

impl SystemPrompt {
    /// The stable part, which a provider may cache: every section but the tail, in order.
    pub fn render(&self) -> String {
        self.sections.iter().filter(|section| section.kind != SectionKind::Tail).map(|s| s.text.as_str()).collect()
    }

    /// What varies, sent after the stable part ([`SectionKind::Tail`]).
    pub fn render_tail(&self) -> String {
        self.sections.iter().filter(|section| section.kind == SectionKind::Tail).map(|s| s.text.as_str()).collect()
    }

    /// The length in bytes of [`Self::render`] and of [`Self::render_tail`], without rendering them.
    pub fn rendered_lens(&self) -> (usize, usize) {
        self.sections.iter().fold((0, 0), |(stable, tail), section| match section.kind {
            SectionKind::Tail => (stable, tail + section.text.len()),
            _ => (stable + section.text.len(), tail),
        })
    }
}

/// The per-turn values of the base template, apart from `{skill}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptVars {
    pub date: String,
    pub name: String,
    pub language: String,
    pub profile: String,
    pub initial_context_title: String,
    pub initial_context_description: String,
}

impl PromptVars {
    /// The values of the slots, in the order of [`PLACEHOLDERS`].
    fn slot_values<'a>(&'a self, skill: &'a str) -> [&'a str; 7] {
        [
            &self.date,
            &self.name,
            &self.language,
            &self.profile,
            &self.initial_context_title,
            &self.initial_context_description,
            skill,
        ]
    }
}

/// How a loaded skill enters the prompt (`SKILL_PROMPT_MODE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SkillPromptMode {
    /// The whole SKILL.md replaces the system prompt (seed 000).
    #[default]
    Replace,
    /// The SKILL.md fills `{skill}` of the base template (seed 001).
    Inject,
}

impl FromStr for SkillPromptMode {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "replace" => Ok(Self::Replace),
            "inject" => Ok(Self::Inject),
            other => Err(format!("SKILL_PROMPT_MODE must be `replace` or `inject`, not `{other}`")),
        }
    }
}

/// The system prompt for the next model call: state 1 (no skill: template + listing) or
/// state 2 (a skill is current: its SKILL.md, replacing or injected per `mode`); both end with
/// [`MEMORY_SECTION`], and a template's rendering with its tail.
pub fn system_prompt(
    template: &PromptTemplate,
    vars: &PromptVars,
    listing: &Listing,
    current_skill: Option<&SkillDoc>,
    mode: SkillPromptMode,
) -> SystemPrompt {
    let mut sections = match (current_skill, mode) {
        (None, _) => template.render_sections(vars, &Section::listing(listing)),
        (Some(skill), SkillPromptMode::Replace) => {
            vec![Section::new(SectionKind::SkillDocument, skill.content.to_string())]
        }
        (Some(skill), SkillPromptMode::Inject) => {
            let section = format!("Loaded skill: {}\n\n{}", skill.path, skill.content);
            template.render_sections(vars, &Section::new(SectionKind::SkillDocument, section))
        }
    };
    sections.push(Section::new(SectionKind::Memory, MEMORY_SECTION));
    SystemPrompt { sections }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> PromptVars {
        PromptVars {
            date: "2026-11-22".into(),
            name: "Ana".into(),
            language: "Spanish".into(),
            profile: "Notary".into(),
            initial_context_title: "None".into(),
            initial_context_description: "-".into(),
        }
    }

    #[test]
    fn default_template_is_valid() {
        let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();
        let text = template.render(&vars(), "SKILLS HERE");
        assert!(text.starts_with("You are a careful assistant working for Ana. Answer in Spanish."), "{text}");
        assert!(text.contains("SKILLS HERE"));
        assert!(text.trim_end().ends_with("Today is 2026-11-22."), "the date comes last: {text}");
        let sections = template.render_sections(&vars(), &Section::new(SectionKind::MandatorySkill, "SKILLS HERE"));
        let prompt = SystemPrompt { sections: sections.clone() };
        assert_eq!(prompt.render() + &prompt.render_tail(), text);
        assert!(sections.iter().all(Section::is_protected), "the base prompt is the tenant's policy: never trimmed");
    }

    #[test]
    fn the_date_and_the_conversation_come_after_the_stable_part() {
        let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();
        let listing = Section::new(SectionKind::SkillListing, "LISTING");
        let today = SystemPrompt { sections: template.render_sections(&vars(), &listing) };
        let tomorrow_vars =
            PromptVars { date: "2026-11-23".into(), initial_context_title: "Ticket T-1".into(), ..vars() };
        let tomorrow = SystemPrompt { sections: template.render_sections(&tomorrow_vars, &listing) };
        assert_eq!(today.render(), tomorrow.render(), "the cached part holds across days and tickets");
        assert!(!today.render().contains("2026-11-22"));
        assert_eq!(today.render_tail(), "\n\n## Context of this conversation\nNone\n-\n\nToday is 2026-11-22.\n");
        assert!(tomorrow.render_tail().contains("Ticket T-1") && tomorrow.render_tail().contains("2026-11-23"));

        // A tenant's template that names the date and places the context keeps them where it put
        // them; the date there refers to the tail, which says it.
        let own = PromptTemplate::parse("Hoy: {date}. {name} {language} {profile}\n{initial_context_title}\n{skill}")
            .unwrap();
        let rendered = SystemPrompt { sections: own.render_sections(&vars(), &listing) };
        assert!(rendered.render().starts_with(&format!("Hoy: {DATE_REFERENCE}. Ana Spanish Notary\nNone\nLISTING")));
        assert_eq!(rendered.render_tail(), "\n\nToday is 2026-11-22.\n");
    }

    #[test]
    fn both_states_say_what_the_memories_are_for() {
        let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();
        let listing =
            Listing { text: "LISTING".into(), fallbacks: Vec::new(), total: 1, shown_in_full: 1, search: false };
        let frontmatter = crate::skills::Frontmatter {
            name: "compraventa".into(),
            description: "Escrituras".into(),
            category: None,
            tools: None,
            declared_tools: None,
        };
        let path = crate::ids::SkillPath::parse("notaria/compraventa").unwrap();
        let doc = SkillDoc { path, frontmatter, content: "# Compraventa".into(), version: None };
        for (skill, mode) in [
            (None, SkillPromptMode::Replace),
            (Some(&doc), SkillPromptMode::Replace),
            (Some(&doc), SkillPromptMode::Inject),
        ] {
            let prompt = system_prompt(&template, &vars(), &listing, skill, mode);
            let last = prompt.sections.last().unwrap();
            assert_eq!((last.kind, last.text.as_str()), (SectionKind::Memory, MEMORY_SECTION));
            assert!(!last.is_protected(), "the budget may trim it");
            assert_eq!(prompt.sections.iter().filter(|s| s.kind == SectionKind::Memory).count(), 1);
        }
        assert!(MEMORY_SECTION.len() < 500, "{} bytes", MEMORY_SECTION.len());
    }

    #[test]
    fn rejects_unknown_and_missing_placeholders() {
        let all = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect::<String>();
        assert!(PromptTemplate::parse(&all).is_ok());
        let required = REQUIRED_PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect::<String>();
        assert!(PromptTemplate::parse(&required).is_ok(), "the date and the context are optional");
        assert_eq!(
            PromptTemplate::parse(&format!("{all}{{usr}}")),
            Err(TemplateError::UnknownPlaceholder("usr".into()))
        );
        assert_eq!(
            PromptTemplate::parse(&all.replace("{profile}", "")),
            Err(TemplateError::MissingPlaceholder("profile"))
        );
        for bad in [" }x", " {x", " {date", " {da{te}"] {
            assert!(
                matches!(PromptTemplate::parse(&(all.clone() + bad)), Err(TemplateError::UnmatchedBrace(_))),
                "{bad:?} should be an unmatched brace"
            );
        }
        assert!(PromptTemplate::parse(&(all.clone() + " {{literal}}")).is_ok());
    }

    #[test]
    fn escapes_and_values_are_literal() {
        let all = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect::<String>();
        let template = PromptTemplate::parse(&format!("{{{{json}}}} {all}")).unwrap();
        let mut vars = vars();
        vars.name = "{skill}".into();
        let text = template.render(&vars, "S");
        assert!(text.starts_with(&format!("{{json}} {DATE_REFERENCE}{{skill}}Spanish")), "{text}");
    }
}
