//! An embedded, in-process implementation of the storage ports, with the same semantics as the
//! S3/DynamoDB adapters (atomic versioned commits, ETags, usage counted with the commit), and
//! counters of every call: `objects` (the object store), `sessions/` (the session store) and
//! `support` (the counters and the lock both use).

mod objects;
mod sessions;
mod support;

pub use objects::MemoryObjectStore;
pub use sessions::MemorySessionStore;
pub use support::CallCounts;
