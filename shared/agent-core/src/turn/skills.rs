//! A turn of the skills strategy: slash commands, the prompt's variables, the loop over
//! [`SkillsEnv`] and the per-turn state reset.

use std::sync::Arc;

use super::approval;
use super::summary::history_for_model;
use super::{Claims, ReplyFile, Strategy, TurnError, TurnReply, TurnRequest, TurnService};
use crate::agent::{self, Ending, Limits};
use crate::events::{TurnEvent, TurnObserver};
use crate::files::ShownFiles;
use crate::ids::{SkillPath, TicketId};
use crate::message::{Message, Usage};
use crate::prompt::{PromptTemplate, PromptVars};
use crate::skills::versions::{self, VersionError};
use crate::skills::Catalog;
use crate::skills::{Resolved, SkillDoc};
use crate::store::{PendingApproval, PendingCall, Session, SessionState};
use crate::telemetry;
use crate::tools::{Delegation, LoadSkillError, LoadedVersions, SandboxAccess, SkillSource, SkillsEnv, TurnShared};
use crate::vfs::{SavedMemories, Vfs};

/// Splits `/name rest` or `/category/name rest` into the command and the request.
pub fn parse_slash_command(message: &str) -> Option<(&str, &str)> {
    let rest = message.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let command = &rest[..end];
    (!command.is_empty()).then(|| (command, rest[end..].trim()))
}

/// The skill a slash command names: `category/name`, `name`, or a name that only one skill has.
async fn resolve_command(source: &SkillSource<'_>, command: &str) -> Result<Arc<SkillDoc>, TurnError> {
    let wanted = command.trim_end_matches('/');
    let unknown = |suggestions: Vec<String>| TurnError::UnknownSkill { command: format!("/{command}"), suggestions };
    match source.catalog.resolve(source.objects, wanted).await? {
        Resolved::Found(_) => {}
        Resolved::NotFound => {
            let closest = source.catalog.closest(source.objects, wanted, 3).await?;
            return Err(unknown(closest.iter().map(|path| format!("/{path}")).collect()));
        }
        Resolved::Ambiguous(many) => return Err(unknown(many.iter().map(|e| format!("/{}", e.path)).collect())),
    }
    source.load(wanted).await.map_err(|err| match err {
        LoadSkillError::Storage(store) => TurnError::from(store),
        LoadSkillError::NotFound(_) => unknown(Vec::new()),
    })
}

impl TurnService {
    pub(super) async fn run_claimed(
        &self,
        request: TurnRequest,
        claims: &Claims,
        events: &dyn TurnObserver,
    ) -> Result<TurnReply, TurnError> {
        if self.config.strategy == Strategy::Planner {
            if request.decisions.is_some() {
                return Err(TurnError::NotPending("this agent's turns never wait for approval".to_owned()));
            }
            // The planner's experts are sent text: a file would be dropped without a word.
            if !request.attachments.is_empty() {
                return Err(TurnError::InvalidInput(
                    "this agent plans across expert servers, which take no files: send the message without \
                     `attachments`"
                        .to_owned(),
                ));
            }
            if !request.pins.is_empty() {
                return Err(TurnError::InvalidInput(
                    "this agent plans across expert servers and loads no skills: send the turn without \
                     `skill_versions`"
                        .to_owned(),
                ));
            }
            return self.run_planner_turn(request, claims.key.as_ref(), events).await;
        }
        // The session (with the day's usage under a budget) and the catalog are independent reads:
        // fetch them concurrently.
        let (session, catalog) = tokio::try_join!(
            telemetry::measured(telemetry::storage_span(telemetry::SESSION_LOAD), self.load_within_budget(&request)),
            telemetry::measured(telemetry::storage_span(telemetry::CATALOG), async {
                self.skills.catalog(self.objects.as_ref(), &request.user).await.map_err(TurnError::from)
            }),
        )?;
        let session = session.unwrap_or_else(|| Session::new(request.user.clone(), request.session.clone()));
        events.session_loaded(&session.state);
        let resumed = approval::paused_turn(&session, request.decisions.as_ref())?;
        if resumed.is_some() {
            // One request at a time answers a pause, whatever keys the requests carry.
            self.claim_pause(&request, session.version, claims).await?;
        }
        let catalog = match request.pins.is_empty() {
            true => catalog,
            false => Arc::new(self.pinned(&request, &catalog).await?),
        };
        let loaded = LoadedVersions::default();
        let source = SkillSource {
            library: &self.skills,
            objects: self.objects.as_ref(),
            user: &request.user,
            catalog: &catalog,
            loaded: &loaded,
        };
        let forced = match (&resumed, parse_slash_command(&request.message)) {
            // A paused turn goes on inside the skill it was forced into.
            (Some(paused), _) => match &paused.pending.forced_skill {
                Some(path) => Some(resolve_command(&source, &path.to_string()).await?),
                None => None,
            },
            (None, Some((command, _))) => Some(resolve_command(&source, command).await?),
            (None, None) => None,
        };
        let ticket = match &resumed {
            Some(paused) => paused.pending.ticket.clone(),
            None => request.ticket.clone(),
        };
        let custom_template = catalog.base_prompt().map(PromptTemplate::parse).transpose()?;
        let template = custom_template.as_ref().unwrap_or(&self.default_template);
        let vars = self.prompt_vars(&request, ticket.as_ref());
        let user_message = match (&forced, parse_slash_command(&request.message)) {
            (Some(doc), Some((_, ""))) => {
                format!("(The user started the skill /{} without further instructions.)", doc.path.name())
            }
            (Some(_), Some((_, rest))) => rest.to_owned(),
            _ => request.message.clone(),
        };

        let mut usage = Usage::default();
        // A paused turn's history is summarised once it is over, not in its middle.
        let (summary, summary_retry_at) = match resumed {
            Some(_) => (session.state.summary.clone(), session.state.summary_retry_at),
            None => self.summarise_if_needed(&session, request.deadline, &mut usage).await,
        };
        let history = history_for_model(&session, summary.as_ref());

        let shown = ShownFiles::new(
            self.objects.as_ref(),
            request.user.clone(),
            request.session.clone(),
            self.model.file_input(),
            self.config.media.clone(),
            self.config.input_tokens(),
        );
        let mut workspace = session.state.workspace.clone();
        let (attached, attached_files) = if request.attachments.is_empty() || resumed.is_some() {
            (String::new(), Vec::new())
        } else {
            self.attach(&request.user, &request.session, &request.attachments, &mut workspace, &shown, events).await?
        };
        let user_message = match (user_message.is_empty(), attached.is_empty()) {
            (_, true) => user_message,
            (true, false) => attached,
            (false, false) => format!("{user_message}\n\n{attached}"),
        };
        let vfs =
            Vfs::new(self.objects.as_ref(), request.user.clone(), request.session.clone(), ticket.clone(), workspace)
                .with_file_cache(&self.files)
                .with_catalog(&catalog);
        let listing = catalog.listing(self.objects.as_ref(), self.config.listing_tokens()).await?;
        let limits = Limits {
            max_steps: self.config.max_steps,
            deadline: request.deadline,
            reserve: self.config.deadline_reserve,
            input_tokens: self.config.input_tokens(),
        };
        let mut shared = TurnShared::new(vfs, source, listing, template, &vars, self.config.prompt_mode);
        if let Some(sandbox) = &self.sandbox {
            shared = shared.with_sandbox(
                SandboxAccess {
                    sandbox: sandbox.as_ref(),
                    deadline: request.deadline,
                    reserve: self.config.deadline_reserve,
                },
                session.state.sandbox_session.clone(),
            );
        }
        // The tenant's rules from its settings.json apply beside the deployment's.
        shared = shared.with_approvals(&self.config.approvals).with_approvals(catalog.approvals()).with_files(&shown);
        if self.config.subagents.max_depth > 0 {
            let mut delegation = Delegation::new(self.model.as_ref(), limits.clone(), self.config.subagents);
            if let Some(paused) = &resumed {
                let pending = paused.pending;
                delegation =
                    delegation.resuming(pending.subagents.clone(), pending.subagents_started, paused.decisions.clone());
            }
            shared = shared.with_subagents(delegation);
        }
        let mut env = SkillsEnv::new(shared, session.state.todos.clone());
        // A session stored mid-skill (by a strategy that keeps one) resumes in state 2.
        // A paused forced turn stored its forced skill as current: forcing it below loads it once.
        let not_forced = |skill: &&SkillPath| forced.as_ref().is_none_or(|doc| &doc.path != *skill);
        for skill in session.state.loaded_skills.iter().filter(not_forced) {
            let _ = env.load_skill(&skill.to_string()).await;
        }
        if let Some(skill) = session.state.current_skill.as_ref().filter(not_forced) {
            let _ = env.load_skill(&skill.to_string()).await;
        }
        if let Some(doc) = forced {
            events.event(TurnEvent::SkillLoaded { skill: doc.path.to_string(), forced: true, version: doc.version });
            env.force(doc).await;
        }

        let outcome = match &resumed {
            Some(paused) => {
                let turn_start = paused.turn_start_in(&session, &history)?;
                let paused = agent::Paused {
                    conversation: &history,
                    turn_start,
                    steps: paused.pending.steps,
                    decisions: paused.decisions,
                };
                agent::resume(self.model.as_ref(), &mut env, paused, &limits, events).await?
            }
            None => {
                let message = Message::User { content: user_message, files: attached_files };
                agent::run(self.model.as_ref(), &mut env, history, message, &limits, events).await?
            }
        };
        // A turn that never reached the model has nothing to say: a canned "out of time" reply
        // committed in its place would hide the failure and use up the user's message.
        if outcome.steps == 0 && outcome.ending == Ending::Deadline {
            return Err(TurnError::OutOfTime);
        }
        usage.add(outcome.usage);
        let ended_in = env.current_skill().map(|doc| doc.path.clone());
        let forced_skill = env.forced_skill().map(|doc| doc.path.clone());
        let refused_tool_calls = env.refused_tool_calls();
        let executions = env.executions();
        let sandbox_session = env.sandbox_session().or_else(|| session.state.sandbox_session.clone());
        let awaiting = outcome.ending == Ending::AwaitingApproval;
        let subagents_started = env.subagents_started();
        let mut paused_subagents = outcome.pause.subagents.clone();
        paused_subagents.extend(env.unresumed_subagents());
        let (vfs, todos) = env.into_parts();
        // A paused turn keeps what it goes on with: its skills, its paused subagents and where it stands.
        let pending_approval = awaiting.then(|| PendingApproval {
            calls: outcome
                .pause
                .waiting
                .iter()
                .map(|waiting| PendingCall {
                    id: waiting.call.id.clone(),
                    name: waiting.call.name.clone(),
                    subagent: waiting.subagent.clone(),
                })
                .collect(),
            turn_start: resumed.as_ref().map_or(session.history_end(), |paused| paused.pending.turn_start),
            steps: outcome.steps,
            forced_skill: forced_skill.clone(),
            ticket: ticket.clone(),
            subagents: paused_subagents,
            subagents_started,
        });
        let loaded_skills = if awaiting { vfs.loaded_skills().to_vec() } else { Vec::new() };
        // The turn's memory changes and the blobs its manifest names go to the store before the
        // commit, so a committed turn has lost none of them and names no missing blob (see
        // `vfs::memories` for what this costs).
        let (_, saved) = tokio::try_join!(vfs.save_workspace(), vfs.save_memories())?;
        if saved != SavedMemories::default() {
            tracing::info!(written = saved.written, deleted = saved.deleted, "memories saved");
        }
        let files: Vec<ReplyFile> = vfs
            .written_files()
            .into_iter()
            .map(|(rel, file)| ReplyFile { path: format!("/workspace/{rel}"), size: file.size })
            .collect();
        let workspace = vfs.into_workspace();

        // The cleanup of seed 001: the loaded (or forced) skill lasts one turn (a paused turn's
        // until it is over).
        let state = SessionState {
            current_skill: if awaiting { ended_in.clone() } else { None },
            loaded_skills,
            plan: session.state.plan.clone(),
            workspace,
            todos,
            summary,
            summary_retry_at,
            sandbox_session,
            pending_approval,
        };
        let reply = TurnReply {
            session_id: request.session.clone(),
            reply: outcome.reply,
            current_skill: ended_in.clone(),
            forced_skill: forced_skill.clone(),
            refused_tool_calls,
            steps: outcome.steps,
            usage,
            cost: super::usage::Meter::current().map(|meter| meter.cost()).unwrap_or_default(),
            ending: outcome.ending,
            version: session.version + 1,
            files,
            executions,
            pending_approval: outcome.pause.waiting.iter().map(approval::shown).collect(),
            replayed: false,
            skill_versions: loaded.loaded(),
        };
        telemetry::measured(
            telemetry::storage_span(telemetry::COMMIT),
            self.commit(&request, &session, outcome.messages, state, &reply, claims.key.as_ref()),
        )
        .await?;
        tracing::info!(
            session = %request.session,
            steps = outcome.steps,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            ending = ?outcome.ending,
            skill = ?ended_in.as_ref().map(ToString::to_string),
            forced_skill = ?forced_skill.as_ref().map(ToString::to_string),
            refused_tool_calls,
            "turn committed"
        );
        Ok(reply)
    }

    /// The catalog for a turn that pins versions: each pinned version read (one GET and one
    /// listing each); a version that does not exist fails the turn before any model call.
    async fn pinned(&self, request: &TurnRequest, catalog: &Catalog) -> Result<Catalog, TurnError> {
        let objects = self.objects.as_ref();
        let reads =
            request.pins.iter().map(|(skill, number)| versions::pinned_entry(objects, &request.user, skill, *number));
        let pinned = futures::future::try_join_all(reads).await.map_err(|err| match err {
            VersionError::Storage(err) => TurnError::from(err),
            other => TurnError::InvalidInput(format!("`skill_versions`: {other}")),
        })?;
        Ok(catalog.with_pins(pinned))
    }

    fn prompt_vars(&self, request: &TurnRequest, ticket: Option<&TicketId>) -> PromptVars {
        let date = request.now.date();
        let profile = &request.profile;
        let (title, description) = match ticket {
            Some(ticket) => (
                format!("Ticket {ticket}"),
                "This conversation is about a ticket; its files are under /ticket (read-only).".to_owned(),
            ),
            None => ("No ticket".to_owned(), "This conversation has no ticket attached.".to_owned()),
        };
        PromptVars {
            date: format!("{}-{:02}-{:02}", date.year(), u8::from(date.month()), date.day()),
            name: profile.name.clone().unwrap_or_else(|| "the user".to_owned()),
            language: profile.language.clone().unwrap_or_else(|| self.config.default_language.clone()),
            profile: profile.description.clone().unwrap_or_else(|| "No profile information.".to_owned()),
            initial_context_title: title,
            initial_context_description: description,
        }
    }
}
