//! Unit tests of the virtual filesystem and its tools over an in-memory object store, by topic; this
//! module holds the store they read and the helpers they share.

mod arguments;
mod files;
mod roots;
mod search;

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::*;
use crate::store::{Object, ObjectMeta};
use local_store::MemoryObjectStore as MemStore;

const SECRET: &str = "SECRETO-DEL-INQUILINO-U2";
const SKILL_MD: &str = "---\nname: compraventa\n---\n# Compraventa\nRedacta escrituras de compraventa.\n";
const EJEMPLO: &str = "linea uno\nlinea dos\nlinea tres\nlinea cuatro\nlinea cinco\n";

/// The store the tests read: tenant `u1`'s skills and tickets, and tenant `u2`'s secrets.
fn seeded() -> MemStore {
    let store = MemStore::recording();
    let skill = "u1/skills/escrituras/compraventa";
    let mut pdf = b"%PDF-1.4\n".to_vec();
    pdf.extend_from_slice(&[0, 1, 2, 0]);
    pdf.extend_from_slice(b"clausula escondida\n");
    for (key, bytes) in [
        (format!("{skill}/SKILL.md"), SKILL_MD.as_bytes().to_vec()),
        (format!("{skill}/disclosure_clausulas.md"), b"# Clausulas\nLa clausula penal.\nOtra clausula.\n".to_vec()),
        (format!("{skill}/resources/plantilla.pdf"), pdf),
        (format!("{skill}/resources/ejemplo.md"), EJEMPLO.as_bytes().to_vec()),
        (format!("{skill}/resources/"), Vec::new()), // a "directory marker", must stay invisible
        ("u1/skills/escrituras/compraventa2/SKILL.md".to_owned(), b"otra skill\n".to_vec()),
        ("u1/skills/escrituras/hipoteca/SKILL.md".to_owned(), b"# Hipoteca\nclausula hipotecaria\n".to_vec()),
        ("u1/skills/contratos/compraventa/SKILL.md".to_owned(), b"# Compraventa de contratos\n".to_vec()),
        ("u1/tickets/T1/a.txt".to_owned(), b"ticket: clausula del cliente\nsegunda\n".to_vec()),
        ("u1/tickets/T1/latin1.txt".to_owned(), vec![b'c', 0xE9, b'\n']),
        ("u1/tickets/T2/otro.txt".to_owned(), b"otro ticket\n".to_vec()),
        ("u2/skills/escrituras/compraventa/SKILL.md".to_owned(), format!("{SECRET}\nclausula\n").into_bytes()),
        ("u2/tickets/T1/a.txt".to_owned(), format!("{SECRET}\n").into_bytes()),
    ] {
        store.insert(&key, bytes);
    }
    store
}

/// A store whose backend always fails with a message full of things the model must not see.
struct BrokenStore;

#[async_trait]
impl ObjectStore for BrokenStore {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        Err(StoreError::Backend(format!("bucket secret-bucket denied list of {prefix}")))
    }
    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError> {
        Err(StoreError::Backend(format!("bucket secret-bucket denied get of {key}")))
    }
    async fn put(&self, key: &str, _bytes: Vec<u8>) -> Result<(), StoreError> {
        Err(StoreError::Backend(format!("bucket secret-bucket denied put of {key}")))
    }
}

fn user() -> UserId {
    UserId::parse("u1").unwrap()
}

fn session() -> SessionId {
    SessionId::parse("S1").unwrap()
}

fn skill(path: &str) -> SkillPath {
    SkillPath::parse(path).unwrap()
}

fn vfs(store: &MemStore) -> Vfs<'_> {
    Vfs::new(store, user(), session(), Some(TicketId::parse("T1").unwrap()), BTreeMap::new())
}

fn mounted(store: &MemStore) -> Vfs<'_> {
    let mut vfs = vfs(store);
    vfs.mount_skill(skill("escrituras/compraventa"));
    vfs
}

fn text<T>(result: Result<T, VfsError>) -> String
where
    T: Into<String>,
{
    match result {
        Ok(ok) => ok.into(),
        Err(error) => error.to_string(),
    }
}

fn vfs_empty(store: &MemStore) -> Vfs<'_> {
    Vfs::new(store, user(), session(), None, BTreeMap::new())
}
