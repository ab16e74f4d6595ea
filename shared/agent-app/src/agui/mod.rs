//! AG-UI: a turn offered as an AG-UI event stream (RunAgentInput in, AG-UI events out).
