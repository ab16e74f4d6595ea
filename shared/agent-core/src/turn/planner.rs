//! A turn of the planner strategy: the stored plan, the experts and the commit of the reply.

use super::{Claimed, TurnError, TurnReply, TurnRequest, TurnService};
use crate::agent::{Ending, Limits};
use crate::events::TurnObserver;
use crate::expert::{ExpertSession, NoExperts};
use crate::message::Message;
use crate::planner::{PlanState, Planner};
use crate::store::{Session, SessionState};
use crate::telemetry;

impl TurnService {
    /// A turn of the planner strategy. Only the user's message and the final reply enter the
    /// history; the plan, with its position and any pending prompt choice, is stored in `plan`.
    pub(super) async fn run_planner_turn(
        &self,
        request: TurnRequest,
        claim: Option<&Claimed>,
        events: &dyn TurnObserver,
    ) -> Result<TurnReply, TurnError> {
        let session =
            telemetry::measured(telemetry::storage_span(telemetry::SESSION_LOAD), self.load_within_budget(&request))
                .await?;
        let session = session.unwrap_or_else(|| Session::new(request.user.clone(), request.session.clone()));
        events.session_loaded(&session.state);
        let plan: Option<PlanState> = match &session.state.plan {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => match serde_json::from_value(value.clone()) {
                Ok(plan) => Some(plan),
                Err(err) => {
                    // A plan written by another version is dropped rather than failing every turn.
                    tracing::warn!(error = %err, "the stored plan does not decode; starting without it");
                    None
                }
            },
        };
        let opened: Box<dyn ExpertSession> = match &self.experts {
            Some(experts) => experts.open(&request.user).await,
            None => Box::new(NoExperts),
        };
        let planner =
            Planner { model: self.model.as_ref(), experts: opened.as_ref(), config: &self.config.planner, events };
        let limits = Limits {
            max_steps: self.config.max_steps,
            deadline: request.deadline,
            reserve: self.config.deadline_reserve,
            input_tokens: self.config.input_tokens(),
        };
        let outcome = planner.run(plan, &session.history, &request.message, &limits).await;
        opened.close().await;
        let outcome = outcome?;
        // A turn in which no model call came back has nothing to say: a canned reply committed in
        // its place would hide the failure and use up the user's message.
        if outcome.ending == Ending::Deadline {
            return Err(TurnError::OutOfTime);
        }

        let plan = outcome
            .plan
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|err| TurnError::Internal(format!("encoding the plan: {err}")))?;
        // What the observer is told once the commit succeeded (a plan is small).
        let committed_plan = plan.clone();
        let state = SessionState { current_skill: None, loaded_skills: Vec::new(), plan, ..session.state.clone() };
        let new_messages = vec![Message::user(request.message.clone()), Message::assistant(outcome.reply.clone())];
        let reply = TurnReply {
            session_id: request.session.clone(),
            reply: outcome.reply,
            current_skill: None,
            forced_skill: None,
            refused_tool_calls: 0,
            steps: outcome.steps,
            usage: outcome.usage,
            cost: super::usage::Meter::current().map(|meter| meter.cost()).unwrap_or_default(),
            ending: outcome.ending,
            version: session.version + 1,
            files: Vec::new(),
            executions: 0,
            pending_approval: Vec::new(),
            replayed: false,
            skill_versions: Default::default(),
        };
        telemetry::measured(
            telemetry::storage_span(telemetry::COMMIT),
            self.commit(&request, &session, new_messages, state, &reply, claim),
        )
        .await?;
        events.plan_committed(committed_plan.as_ref());
        tracing::info!(
            session = %request.session,
            steps = outcome.steps,
            input_tokens = outcome.usage.input_tokens,
            output_tokens = outcome.usage.output_tokens,
            ending = ?outcome.ending,
            plan_tasks = outcome.plan.as_ref().map_or(0, |plan| plan.tasks.len()),
            "planner turn committed"
        );
        Ok(reply)
    }
}
