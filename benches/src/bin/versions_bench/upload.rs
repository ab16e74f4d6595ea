//! An upload's time against its size: a zip of half compressible text, half random bytes, read
//! with `versions::read_zip` and stored with `versions::publish` (its first version, so it becomes
//! the default and the tenant's index is updated before `publish` returns), over the in-memory
//! store, in a new tenant each run.

use std::time::{Duration, Instant};

use agent_core::skills::versions::{publish, read_zip, write_zip};
use agent_core::turn::AgentConfig;
use agent_core::{SkillPath, UserId};
use local_store::MemoryObjectStore;
use sha2::{Digest, Sha256};

use crate::{median, BenchResult};

/// Largest file in an upload; bigger uploads have more files.
const FILE_BYTES: usize = 1_000_000;

pub(crate) struct UploadFigure {
    /// Inflated bytes, and the zip's own size.
    pub(crate) size: usize,
    pub(crate) zip_bytes: usize,
    pub(crate) files: usize,
    /// Medians over the runs: `read_zip`, then `publish`.
    pub(crate) read_zip: Duration,
    pub(crate) publish: Duration,
    pub(crate) total: Duration,
    /// One SHA-256 pass over the inflated files (outside the runs' times): `publish` makes one to
    /// name the files, and the in-memory store one more for its ETags.
    pub(crate) one_hash: Duration,
    pub(crate) runs: usize,
}

/// Text that deflates well: numbered lines of prose.
fn text(len: usize, seed: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 80);
    let mut line = 0;
    while out.len() < len {
        out.extend_from_slice(
            format!("{seed}.{line}: the skill's reference text, which compresses as prose does.\n").as_bytes(),
        );
        line += 1;
    }
    out.truncate(len);
    out
}

/// Bytes that do not deflate (xorshift).
fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A skill of `size` bytes in all: its SKILL.md, then `reference-{n}.md` and `data-{n}.bin` files
/// alternately (half of the rest each), none larger than [`FILE_BYTES`].
fn skill_files(name: &str, size: usize) -> Vec<(String, Vec<u8>)> {
    let skill_md = format!(
        "---\nname: {name}\ndescription: An uploaded skill of {size} bytes, half text and half binary data.\n---\n\n\
         # {name}\n\nRead `reference-0.md` first.\n"
    );
    let rest = size.saturating_sub(skill_md.len());
    let mut files = vec![("SKILL.md".to_owned(), skill_md.into_bytes())];
    let (text_bytes, data_bytes) = (rest / 2, rest - rest / 2);
    for (kind, mut left) in [("text", text_bytes), ("data", data_bytes)] {
        let mut n = 0;
        while left > 0 {
            let len = left.min(FILE_BYTES);
            files.push(match kind {
                "text" => (format!("reference-{n}.md"), text(len, n)),
                _ => (format!("data-{n}.bin"), random(len, n as u64 + 1)),
            });
            left -= len;
            n += 1;
        }
    }
    files
}

pub(crate) async fn upload_figure(size: usize, runs: usize) -> BenchResult<UploadFigure> {
    let name = format!("upload-{size}");
    let skill = SkillPath::parse(&name)?;
    let files = skill_files(&name, size);
    let zip = write_zip(files.iter().map(|(path, bytes)| (path.as_str(), bytes.as_slice())))?;
    drop(files);
    let budget = Some(AgentConfig::default().listing_tokens());
    let (mut reads, mut publishes, mut totals, mut hashes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut count = 0;
    for run in 0..runs {
        let objects = MemoryObjectStore::new();
        let user = UserId::parse(format!("upload-{run}"))?;
        let started = Instant::now();
        let read = read_zip(&zip).map_err(|problems| format!("{name}: {problems:?}"))?;
        let read_at = started.elapsed();
        count = read.len();
        let inflated: usize = read.iter().map(|file| file.bytes.len()).sum();
        if inflated != size {
            return Err(format!("{name}: inflated to {inflated} bytes").into());
        }
        let hashing = Instant::now();
        for file in &read {
            std::hint::black_box(Sha256::digest(&file.bytes));
        }
        hashes.push(hashing.elapsed());
        let published_at = Instant::now();
        let published = publish(&objects, &user, &skill, read, "bench", 0, None, budget).await?;
        let publish_time = published_at.elapsed();
        let total = read_at + publish_time;
        if !published.created || !published.is_default {
            return Err(format!("{name}: not published as the skill's default").into());
        }
        reads.push(read_at);
        publishes.push(publish_time);
        totals.push(total);
    }
    Ok(UploadFigure {
        size,
        zip_bytes: zip.len(),
        files: count,
        read_zip: median(&reads),
        publish: median(&publishes),
        total: median(&totals),
        one_hash: median(&hashes),
        runs,
    })
}
