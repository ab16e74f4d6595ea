//! The agent card (`/.well-known/agent-card.json`): the deployment's name, description and version,
//! its JSON-RPC interface, streaming, bearer-JWT security, and — for an authenticated caller only —
//! the tenant's skills, bounded, each named by its skill path.

use agent_core::skills::SkillEntry;
use serde_json::{json, Value};

use super::rpc::cut;
use super::PROTOCOL_VERSION;

/// Most skills a card lists (the first by path); a tenant with more finds them with `find_skills`.
pub const MAX_CARD_SKILLS: usize = 200;
/// Longest skill description a card carries, in bytes.
const MAX_SKILL_DESCRIPTION_BYTES: usize = 1024;
/// The media types a message and a reply may have.
const MODES: [&str; 2] = ["text/plain", "application/json"];
/// The security scheme's name in the card.
const BEARER: &str = "bearer";

/// What the deployment says about itself on its card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    pub name: String,
    pub description: String,
    pub version: String,
    /// The JSON-RPC endpoint's absolute URL.
    pub url: String,
}

impl AgentInfo {
    /// The deployment's card settings: `A2A_AGENT_NAME`, `A2A_AGENT_DESCRIPTION` and `A2A_URL`
    /// (else `https://{domain}/a2a`, the Function URL the request came to).
    pub fn from_env(domain: &str) -> Self {
        let var = |name: &str| std::env::var(name).ok().map(|value| value.trim().to_owned()).filter(|v| !v.is_empty());
        Self {
            name: var("A2A_AGENT_NAME").unwrap_or_else(|| "Skills agent".to_owned()),
            description: var("A2A_AGENT_DESCRIPTION").unwrap_or_else(|| {
                "An agent that answers with the skills of your library: it reads their instructions, runs their \
                 tools and keeps each conversation as a session."
                    .to_owned()
            }),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            url: var("A2A_URL").unwrap_or_else(|| format!("https://{domain}/a2a")),
        }
    }
}

/// The card. `skills` is the tenant's skills, `None` for an anonymous caller (whose card names no
/// skill: a tenant's library is its own).
pub fn agent_card<'a>(info: &AgentInfo, skills: Option<impl IntoIterator<Item = &'a SkillEntry>>) -> Value {
    let skills: Vec<Value> = skills
        .into_iter()
        .flatten()
        .take(MAX_CARD_SKILLS)
        .map(|entry| {
            let description = cut(&entry.description, MAX_SKILL_DESCRIPTION_BYTES);
            let tags: Vec<&str> = entry.category.as_deref().into_iter().collect();
            let id = entry.path.to_string();
            let name = if entry.name.is_empty() { id.clone() } else { entry.name.clone() };
            json!({
                "id": id,
                "name": name,
                "description": description,
                "tags": tags,
            })
        })
        .collect();
    json!({
        "name": info.name,
        "description": info.description,
        "version": info.version,
        // The same endpoint speaks 0.3 under 0.3's method names; a client that speaks both takes 1.0.
        "supportedInterfaces": [
            {"url": info.url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION},
            {"url": info.url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "securitySchemes": {
            BEARER: {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT",
                     "description": "the same JWT the streaming endpoint verifies"}},
        },
        "securityRequirements": [{"schemes": {BEARER: {"list": []}}}],
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": skills,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::SkillPath;

    fn info() -> AgentInfo {
        AgentInfo {
            name: "n".into(),
            description: "d".into(),
            version: "1".into(),
            url: "https://x.lambda-url.us-east-1.on.aws/a2a".into(),
        }
    }

    fn entry(path: &str, category: Option<&str>) -> SkillEntry {
        SkillEntry {
            path: SkillPath::parse(path).unwrap(),
            etag: String::new(),
            size: 1,
            name: "Compraventa".into(),
            description: "é".repeat(1000),
            category: category.map(str::to_owned),
            tools: None,
            declared_tools: None,
            warnings: Vec::new(),
            unmet_needs: Vec::new(),
            version: None,
        }
    }

    #[test]
    fn an_anonymous_card_has_no_skills_and_a_caller_sees_theirs_bounded() {
        let card = agent_card(&info(), None::<Vec<&SkillEntry>>);
        assert_eq!(card["skills"], json!([]));
        assert_eq!(card["supportedInterfaces"][0]["url"], "https://x.lambda-url.us-east-1.on.aws/a2a");
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["bearerFormat"], "JWT");

        let entries: Vec<SkillEntry> =
            (0..MAX_CARD_SKILLS + 5).map(|n| entry(&format!("area/skill-{n:04}"), Some("legal"))).collect();
        let card = agent_card(&info(), Some(&entries));
        let skills = card["skills"].as_array().unwrap();
        assert_eq!(skills.len(), MAX_CARD_SKILLS);
        assert_eq!(skills[0]["id"], "area/skill-0000");
        assert_eq!(skills[0]["tags"], json!(["legal"]));
        assert!(skills[0]["description"].as_str().unwrap().len() <= MAX_SKILL_DESCRIPTION_BYTES);
    }
}
