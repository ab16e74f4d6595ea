//! The stored form: a small catalog in its head alone, a large one split into parts by folder
//! name, and either read back whole.

use super::*;
use crate::skills::index::SkillEntry;

fn entry(path: &str, name: &str, description: &str) -> SkillEntry {
    let path = SkillPath::parse(path).unwrap();
    SkillEntry {
        name: name.to_owned(),
        description: description.to_owned(),
        etag: format!("etag-{path}"),
        size: 100,
        category: None,
        tools: None,
        declared_tools: None,
        warnings: Vec::new(),
        unmet_needs: Vec::new(),
        version: None,
        path,
    }
}

fn catalog(skills: usize) -> CatalogIndex {
    let mut index = CatalogIndex::default();
    for i in 0..skills {
        let e = entry(&format!("cat{}/skill-{i}", i % 7), &format!("skill-{i}"), &"words ".repeat(40));
        index.files.insert(
            e.path.to_string(),
            vec![IndexedFile { rel: "reference.md".to_owned(), size: 10, etag: format!("\"e{i}\"") }],
        );
        index.skills.insert(e.path.to_string(), e);
    }
    index
        .skipped
        .insert("a/b/c/d/SKILL.md".to_owned(), SkippedEntry { file: "a/b/c/d/SKILL.md".into(), reason: "deep".into() });
    index
}

#[test]
fn a_small_catalog_is_its_head_alone() {
    let index = catalog(20);
    let encoded = encode(&index, &[3584], Vec::new());
    assert!(encoded.parts.is_empty() && encoded.head.parts.is_empty());
    assert!(encoded.head.listings.is_empty(), "rendered from the entries, at no cost that grows");
    assert_eq!((encoded.head.total, encoded.head.skipped), (20, 1));
    let head: IndexHead = serde_json::from_slice(&encoded.head_bytes).unwrap();
    assert_eq!(join(&head, []), index);
}

#[test]
fn a_large_catalog_is_split_by_folder_name_and_joins_back_whole() {
    let index = catalog(3000);
    let encoded = encode(&index, &[3584, 1000], Vec::new());
    let count = encoded.parts.len();
    assert_eq!(count, 16, "3,000 skills at about 256 a part, rounded up to a power of two");
    assert!(encoded.head_bytes.len() < 64 * 1024, "the head stays small: {} bytes", encoded.head_bytes.len());
    assert_eq!(encoded.head.listings.iter().map(|l| l.budget).collect::<Vec<_>>(), [3584, 1000]);
    let hidden = hidden_skills(&index.skills);
    let usable = usable_entries(&index, &hidden);
    assert_eq!(encoded.head.listings[0].listing, listing::render(&usable, 3584), "the listing a turn would render");
    let parts: Vec<IndexPart> = encoded.parts.iter().map(|(_, bytes)| serde_json::from_slice(bytes).unwrap()).collect();
    for (i, part) in parts.iter().enumerate() {
        assert!(part.skills.values().all(|e| part_of(&e.path.name().to_lowercase(), count) == i));
        assert!(!part.skills.is_empty(), "the hash spreads the skills");
    }
    assert_eq!(join(&encoded.head, parts), index);
    // The same content gives the same ids, so an update rewrites only the parts it changed.
    let mut changed = index.clone();
    changed.skills.get_mut("cat1/skill-1").unwrap().description = "new".into();
    let again = encode(&changed, &[3584], Vec::new());
    let differing = again.head.parts.iter().zip(&encoded.head.parts).filter(|(a, b)| a.id != b.id).count();
    assert_eq!(differing, 1);
}

#[test]
fn a_skill_inside_a_plain_skill_is_hidden_and_names_are_found_in_their_own_part() {
    let mut index = CatalogIndex::default();
    for e in [entry("pdf", "pdf", "d"), entry("pdf/forms", "forms", "d"), entry("docs/memo", "Memo Writer", "d")] {
        index.skills.insert(e.path.to_string(), e);
    }
    let hidden = hidden_skills(&index.skills);
    assert_eq!(hidden.into_iter().collect::<Vec<_>>(), ["pdf/forms"]);
    let part = to_part(&index, &hidden_skills(&index.skills), |_| true);
    assert_eq!(part.names["memo writer"], ["docs/memo"]);
    assert_eq!(encode(&index, &[], Vec::new()).head.total, 2);
}

#[test]
fn part_of_is_stable_and_ignores_case() {
    assert_eq!(part_of("pdf", 64), part_of("PDF", 64));
    // FNV-1a of "pdf": every process and every build must agree.
    assert_eq!(part_of("pdf", 1 << 20), (0x77c0_7019_566e_7455_u64 % (1 << 20)) as usize);
    assert_eq!(part_of("anything", 1), 0);
}

#[test]
fn file_etags_are_kept_apart_so_builds_before_them_read_the_part_and_theirs_read_here() {
    let file = |rel: &str, size: u64, etag: &str| IndexedFile { rel: rel.into(), size, etag: etag.into() };
    let mut part = IndexPart::default();
    part.files.insert("pdf".into(), vec![file("a.md", 1, "e1"), file("b/c.md", 2, "e2")]);
    part.files.insert("memo".into(), vec![file("x.md", 3, "")]);
    let bytes = serde_json::to_vec(&part).unwrap();
    let stored: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(stored["files"]["pdf"], serde_json::json!([["a.md", 1], ["b/c.md", 2]]), "{stored}");
    assert_eq!(stored["etags"], serde_json::json!({"pdf": ["e1", "e2"]}), "only lists with an ETag: {stored}");
    assert_eq!(serde_json::from_slice::<IndexPart>(&bytes).unwrap(), part);

    // A build before the ETags reads the same part (it ignores a field it does not know).
    #[derive(Deserialize)]
    struct EarlierPart {
        #[serde(default)]
        files: BTreeMap<String, Vec<(String, u64)>>,
    }
    let earlier: EarlierPart = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(earlier.files["pdf"], [("a.md".to_owned(), 1), ("b/c.md".to_owned(), 2)]);

    // Its parts read here with no ETags, and so do ETags that do not match the list one for one.
    let written_earlier = br#"{"skills":[],"files":{"pdf":[["a.md",1],["b/c.md",2]]},"etags":{"pdf":["e1"]}}"#;
    let read: IndexPart = serde_json::from_slice(written_earlier).unwrap();
    assert_eq!(read.files["pdf"], [file("a.md", 1, ""), file("b/c.md", 2, "")]);
}
