//! AG-UI through the compiled stream-turn, driven by `@ag-ui/client`'s HttpAgent.
