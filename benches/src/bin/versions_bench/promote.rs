//! From a promote to the first turn that sees it: `set_default`'s own time and calls (it returns
//! once the index is written), then a turn of a warm process started right after, which must load
//! the new default's SKILL.md; and a new version published with `promote=true` in one call.

use std::sync::Arc;
use std::time::Duration;

use agent_core::skills::versions::{publish, set_default, SkillFileBytes};
use agent_core::turn::AgentConfig;
use agent_core::UserId;
use local_store::{MemoryObjectStore, MemorySessionStore};

use crate::library::{skill_path, version_line};
use crate::turns::{counted, service, turn, Calls};
use crate::{BenchResult, DEFAULT_VERSION, PROMOTES, SKILL, SKILL_INDEX, VERSIONS};

pub(crate) struct PromoteFigures {
    /// Each `set_default`'s wall time: promotes to the newest version and rollbacks to the middle
    /// one, alternately.
    pub(crate) set_default: Vec<Duration>,
    /// The calls of the first promote.
    pub(crate) set_default_calls: Calls,
    /// The turn started right after each, in a warm process: its wall time, and the calls of the
    /// one after the first promote.
    pub(crate) next_turn: Vec<Duration>,
    pub(crate) next_turn_calls: Calls,
    /// Turns that loaded the version just made the default (all of them, or the run stops).
    pub(crate) saw_it: usize,
    /// A fourth version of other skills published with `promote=true` (the index updated before it
    /// returns): wall time of each.
    pub(crate) publish_promote: Vec<Duration>,
    pub(crate) publish_promote_calls: Calls,
}

pub(crate) async fn promote_figures(
    objects: &Arc<MemoryObjectStore>,
    sessions: &Arc<MemorySessionStore>,
    user: &UserId,
    label: &str,
) -> BenchResult<PromoteFigures> {
    let budget = Some(AgentConfig::default().listing_tokens());
    let skill = skill_path(SKILL_INDEX)?;
    // A warm process: its catalog, the skill's SKILL.md and the session are cached.
    let (service, loaded) = service(objects, sessions);
    turn(&service, user, &format!("{label}-promote-warmup")).await?;

    let (mut set_times, mut turn_times) = (Vec::new(), Vec::new());
    let (mut set_calls, mut turn_calls) = (Calls::default(), Calls::default());
    let mut saw_it = 0;
    for round in 0..PROMOTES {
        // Promote the newest version, then roll back to the middle one.
        let version = if round % 2 == 0 { VERSIONS } else { DEFAULT_VERSION };
        let promoted =
            counted(objects, sessions, user, set_default(objects.as_ref(), user, &skill, version, "bench", 0, budget))
                .await;
        promoted.out?;
        set_times.push(promoted.wall);
        if round == 0 {
            set_calls = promoted.calls;
        }

        let next = counted(objects, sessions, user, turn(&service, user, &format!("{label}-promoted-{round}"))).await;
        let reply = next.out?;
        turn_times.push(next.wall);
        // The first promote's: a version this process has not loaded (later rounds find its
        // SKILL.md in the body cache).
        if round == 0 {
            turn_calls = next.calls;
        }
        let text = loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let served = reply.skill_versions.get(SKILL).copied();
        if !text.contains(&version_line(SKILL_INDEX, version)) || served != Some(version) {
            return Err(format!(
                "{label}: the turn after promoting version {version} loaded version {served:?}: {}",
                text.lines().find(|line| line.starts_with("This is version")).unwrap_or("no version line")
            )
            .into());
        }
        saw_it += 1;
    }

    let (mut publish_times, mut publish_calls) = (Vec::new(), Calls::default());
    for index in [SKILL_INDEX + 1, SKILL_INDEX + 2, SKILL_INDEX + 3] {
        let path = skill_path(index)?;
        let files = vec![SkillFileBytes {
            path: "SKILL.md".to_owned(),
            bytes: format!(
                "---\nname: {}\ndescription: Version {} of synthetic skill {index}.\n---\n\n{}\n",
                path.name(),
                VERSIONS + 1,
                version_line(index, VERSIONS + 1)
            )
            .into_bytes(),
        }];
        let published = counted(
            objects,
            sessions,
            user,
            publish(objects.as_ref(), user, &path, files, "bench", 0, Some(true), budget),
        )
        .await;
        let published = (published.out?, published.wall, published.calls);
        if !published.0.is_default || published.0.record.version != VERSIONS + 1 {
            return Err(format!("{label}: {path}'s new version was not made the default").into());
        }
        publish_times.push(published.1);
        publish_calls = published.2;
        // Each new version's calls are the same; the last one's are kept.
    }
    Ok(PromoteFigures {
        set_default: set_times,
        set_default_calls: set_calls,
        next_turn: turn_times,
        next_turn_calls: turn_calls,
        saw_it,
        publish_promote: publish_times,
        publish_promote_calls: publish_calls,
    })
}
