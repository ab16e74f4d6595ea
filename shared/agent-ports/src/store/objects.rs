//! What the object store port carries: listings, objects with their ETags, conditional reads and
//! writes, and the headers a presigned link is served with.

/// One object's listing entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub etag: String,
    pub size: u64,
    /// When the object was last written, in unix seconds; `None` when the store does not say.
    pub last_modified: Option<i64>,
}

/// One object's bytes with the ETag they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub bytes: Vec<u8>,
    pub etag: String,
}

/// The answer to a conditional read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The object still has the ETag the caller holds.
    NotModified,
    /// The object changed (or the caller held none): its bytes and new ETag.
    Changed(Object),
    /// There is no object at the key.
    Missing,
}

/// The precondition of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCondition {
    /// Only if no object exists at the key (S3 `If-None-Match: *`).
    Absent,
    /// Only if the object still has this ETag (S3 `If-Match`).
    Matches(String),
}

/// The response headers a presigned download is served with (S3's `response-content-type` and
/// `response-content-disposition`, signed into the link); `None` leaves the stored object's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkHeaders {
    pub content_type: Option<String>,
    pub content_disposition: Option<String>,
}

/// A presigned upload: the URL, and the headers the upload must send exactly as given (they are
/// part of the signature: the length and the checksum among them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadLink {
    pub url: String,
    pub headers: Vec<(String, String)>,
}
