//! A catalog snapshot for one turn that pins published versions (an A/B test, an eval): the same
//! head and parts, with those skills served by the pinned versions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::{Catalog, Pinned};
use crate::ids::SkillPath;
use crate::skills::index::{IndexedFile, SkillEntry};

impl Catalog {
    /// This snapshot for one turn that pins `pinned` versions (each entry with its files besides
    /// SKILL.md): the parts already read are shared, and those skills resolve to the pinned
    /// versions, even a skill the index does not list.
    pub fn with_pins(&self, pinned: impl IntoIterator<Item = (SkillEntry, Vec<IndexedFile>)>) -> Catalog {
        let pins: HashMap<SkillPath, Pinned> = pinned
            .into_iter()
            .map(|(entry, files)| (entry.path.clone(), (Arc::new(entry), Arc::from(files))))
            .collect();
        Catalog {
            user: self.user.clone(),
            head: self.head.clone(),
            etag: self.etag.clone(),
            parts: self.parts.clone(),
            view: OnceCell::new(),
            listing: Mutex::new(None),
            approvals: self.approvals.clone(),
            weight: self.weight,
            pins,
        }
    }
}
