//! A2A through the compiled stream-turn, driven by `a2a-sdk`'s client.
