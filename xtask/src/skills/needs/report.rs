//! The report of `needs`: the JSON of the image, of each skill's needs and of the totals, and the
//! text lines `skills validate` prints from that JSON.

use serde_json::{json, Value};

use super::{Need, Needs, Resolution};

/// A skill's problems shown in the text report; the JSON has them all.
const SHOWN_PROBLEMS: usize = 5;

impl Needs {
    /// The image's part of the report: where it is, or why needs were not checked.
    pub fn summary_json(&self) -> Value {
        match &self.image {
            Ok((root, provides)) => json!({
                "checked": true,
                "image": root.display().to_string(),
                "python": provides.python,
                "node": provides.node,
                "resolve": self.resolve,
            }),
            Err(err) => json!({ "checked": false, "reason": err }),
        }
    }

    /// A skill's `needs` in the report (`null` when not checked).
    pub fn skill_json(&self, skill: &str) -> Value {
        let Some(needs) = self.skills.get(skill) else { return Value::Null };
        let need_json = |need: &Need| {
            let mut value = json!({ "name": need.name, "from": need.from, "met": need.met });
            if let Some(import) = &need.import {
                value["import"] = json!(import);
            }
            if !need.specifier.is_empty() {
                value["specifier"] = json!(need.specifier);
            }
            if !need.files.is_empty() {
                value["files"] = json!(need.files);
            }
            match &need.resolution {
                None => {}
                Some(Resolution::NotChecked) => {
                    value["resolvable"] = Value::Null;
                    value["resolution"] = json!("not checked (--resolve)");
                }
                Some(Resolution::Resolvable(wheel)) => {
                    value["resolvable"] = json!(true);
                    value["resolution"] = json!("resolvable");
                    value["wheel"] = json!(wheel);
                }
                Some(Resolution::Unresolvable(error)) => {
                    value["resolvable"] = json!(false);
                    value["resolution"] = json!(format!("not resolvable: {error}"));
                }
                Some(Resolution::Offline) => {
                    value["resolvable"] = json!(false);
                    value["resolution"] = json!("not resolvable offline");
                }
            }
            value
        };
        let declared_from = match needs.declared_from.is_empty() {
            true => "imports".to_owned(),
            false => needs.declared_from.join(" + "),
        };
        json!({
            "declared_from": declared_from,
            "scripts": needs.scripts,
            "status": needs.status(),
            "python": needs.python.iter().map(need_json).collect::<Vec<_>>(),
            "node": needs.node.iter().map(need_json).collect::<Vec<_>>(),
            "problems": needs.problems,
        })
    }

    /// The counts for the report's totals.
    pub fn totals_json(&self) -> Value {
        let count = |status: &str| self.skills.values().filter(|skill| skill.status() == status).count();
        let (unmet, unresolvable) = (count("unmet"), count("unresolvable"));
        json!({
            "checked": self.image.is_ok(),
            "met": count("met"),
            "unmet": unmet + unresolvable,
            "unresolvable": unresolvable,
            "with_scripts": self.skills.values().filter(|skill| skill.scripts > 0).count(),
        })
    }
}

/// The text lines of a skill's `needs` (from its JSON): what the image lacks, on one line, each
/// need followed by its verdict (a run of needs with the same verdict shares it), then problems.
pub(in crate::skills) fn render_skill(needs: &Value) -> Vec<String> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (language, list) in [("python", &needs["python"]), ("node", &needs["node"])] {
        for need in list.as_array().into_iter().flatten().filter(|need| need["met"] == false) {
            let origin = match (need["import"].as_str(), text(&need["from"]).as_str()) {
                (Some(import), _) => format!("import {import}"),
                (None, "imports") => "require".to_owned(),
                (None, from) => from.to_owned(),
            };
            let label = format!("{language} {}{} ({origin})", text(&need["name"]), text(&need["specifier"]));
            let verdict = text(&need["resolution"]);
            match groups.last_mut() {
                Some((last, labels)) if *last == verdict => labels.push(label),
                _ => groups.push((verdict, vec![label])),
            }
        }
    }
    let mut lines = Vec::new();
    if !groups.is_empty() {
        let parts: Vec<String> =
            groups.into_iter().map(|(verdict, labels)| format!("{} — {verdict}", labels.join(", "))).collect();
        lines.push(format!("needs what the image lacks: {}", parts.join("; ")));
    }
    let problems: Vec<&Value> = needs["problems"].as_array().into_iter().flatten().collect();
    for problem in problems.iter().take(SHOWN_PROBLEMS) {
        lines.push(format!("needs problem: {}", text(problem)));
    }
    if problems.len() > SHOWN_PROBLEMS {
        lines.push(format!("needs problems: {} more (--json lists them)", problems.len() - SHOWN_PROBLEMS));
    }
    lines
}

/// The summary line of the needs, from the report's `needs` and its totals.
pub(in crate::skills) fn render_summary(image: &Value, totals: &Value) -> String {
    if image["checked"] != true {
        return format!("needs: not checked ({})\n", image["reason"].as_str().unwrap_or_default());
    }
    let count = |name: &str| totals[name].as_u64().unwrap_or(0);
    let resolution = match image["resolve"] == true {
        true => format!("{} of them unresolvable", count("unresolvable")),
        false => format!("{} of them known unresolvable; --resolve asks pip about the rest", count("unresolvable")),
    };
    format!(
        "needs, against the image at {} (Python {}): {} whose needs the image meets, {} with unmet needs ({resolution})\n",
        image["image"].as_str().unwrap_or_default(),
        image["python"].as_str().unwrap_or_default(),
        crate::counted(count("met"), "skill", "skills"),
        count("unmet"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unmet_needs_render_on_one_line() {
        let needs = json!({
            "python": [
                { "name": "openpyxl", "import": "openpyxl", "from": "imports", "met": true },
                { "name": "rdkit", "import": "rdkit", "from": "imports", "met": false, "resolution": "resolvable" },
                { "name": "ete3", "import": "ete3", "from": "imports", "met": false,
                  "resolution": "not resolvable: ERROR: No matching distribution found for ete3" },
                { "name": "anthropic", "specifier": ">=0.40", "from": "requirements.txt", "met": false,
                  "resolution": "not resolvable: ERROR: No matching distribution found for ete3" },
            ],
            "node": [{ "name": "left-pad", "from": "imports", "met": false, "resolution": "not resolvable offline" }],
            "problems": ["requirements.txt line 3: `git+https://x` is a URL or a path, not a package name"],
        });
        assert_eq!(
            render_skill(&needs),
            [
                "needs what the image lacks: python rdkit (import rdkit) — resolvable; python ete3 (import ete3), \
                 python anthropic>=0.40 (requirements.txt) — not resolvable: ERROR: No matching distribution found \
                 for ete3; node left-pad (require) — not resolvable offline",
                "needs problem: requirements.txt line 3: `git+https://x` is a URL or a path, not a package name",
            ]
        );
    }
}
