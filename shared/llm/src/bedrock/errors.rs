//! Bedrock's failures as attempts: which are retried (throttling, unavailability, 5xx, timeouts) and which are final.

use super::*;

/// The modelled kind of an SDK error, read from its variant: an exception inside the event stream
/// carries no error code of its own, only the frame's `:exception-type`, which the SDK turns into the variant.
pub(super) trait ErrorKind: ProvideErrorMetadata {
    fn variant(&self) -> Option<&'static str>;

    fn kind(&self) -> String {
        self.variant().or(self.code()).unwrap_or("UnknownError").to_owned()
    }
}

impl ErrorKind for ConverseError {
    fn variant(&self) -> Option<&'static str> {
        Some(match self {
            ConverseError::AccessDeniedException(_) => "AccessDeniedException",
            ConverseError::InternalServerException(_) => "InternalServerException",
            ConverseError::ModelErrorException(_) => "ModelErrorException",
            ConverseError::ModelNotReadyException(_) => "ModelNotReadyException",
            ConverseError::ModelTimeoutException(_) => "ModelTimeoutException",
            ConverseError::ResourceNotFoundException(_) => "ResourceNotFoundException",
            ConverseError::ServiceUnavailableException(_) => "ServiceUnavailableException",
            ConverseError::ThrottlingException(_) => "ThrottlingException",
            ConverseError::ValidationException(_) => "ValidationException",
            _ => return None,
        })
    }
}

impl ErrorKind for ConverseStreamError {
    fn variant(&self) -> Option<&'static str> {
        Some(match self {
            ConverseStreamError::AccessDeniedException(_) => "AccessDeniedException",
            ConverseStreamError::InternalServerException(_) => "InternalServerException",
            ConverseStreamError::ModelErrorException(_) => "ModelErrorException",
            ConverseStreamError::ModelNotReadyException(_) => "ModelNotReadyException",
            ConverseStreamError::ModelStreamErrorException(_) => "ModelStreamErrorException",
            ConverseStreamError::ModelTimeoutException(_) => "ModelTimeoutException",
            ConverseStreamError::ResourceNotFoundException(_) => "ResourceNotFoundException",
            ConverseStreamError::ServiceUnavailableException(_) => "ServiceUnavailableException",
            ConverseStreamError::ThrottlingException(_) => "ThrottlingException",
            ConverseStreamError::ValidationException(_) => "ValidationException",
            _ => return None,
        })
    }
}

impl ErrorKind for ConverseStreamOutputError {
    fn variant(&self) -> Option<&'static str> {
        Some(match self {
            ConverseStreamOutputError::InternalServerException(_) => "InternalServerException",
            ConverseStreamOutputError::ModelStreamErrorException(_) => "ModelStreamErrorException",
            ConverseStreamOutputError::ServiceUnavailableException(_) => "ServiceUnavailableException",
            ConverseStreamOutputError::ThrottlingException(_) => "ThrottlingException",
            ConverseStreamOutputError::ValidationException(_) => "ValidationException",
            _ => return None,
        })
    }
}

/// The attempt an SDK error comes to. Service errors are classified by their kind, then by the
/// HTTP status (`status_of` reads it from the raw response, when there is one): throttling,
/// capacity, 429 and 5xx are retried; anything else the service said is a rejection.
pub(super) fn sdk_failure<T, E, R>(error: SdkError<E, R>, status_of: impl Fn(&R) -> Option<u16>) -> Attempt<T>
where
    E: ErrorKind + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match &error {
        SdkError::ServiceError(context) => {
            let status = status_of(context.raw());
            let kind = context.err().kind();
            let message = describe(&kind, context.err().message());
            let retryable =
                RETRYABLE_KINDS.contains(&kind.as_str()) || status.is_some_and(|status| status == 429 || status >= 500);
            match status {
                _ if retryable => Attempt::Retry { status, message, retry_after: None },
                // A success status whose body the SDK could not read as the reply.
                Some(status) if status < 300 => Attempt::Fail(ModelError::InvalidResponse(format!(
                    "{PROVIDER}: could not parse the response (HTTP {status}): {message}"
                ))),
                // An exception inside the event stream has no status; the only one not retried is a validation error.
                status => Attempt::Fail(ModelError::Rejected { status: status.unwrap_or(400), message }),
            }
        }
        SdkError::TimeoutError(_) => {
            Attempt::Retry { status: None, message: "request timed out".to_owned(), retry_after: None }
        }
        SdkError::DispatchFailure(failure) if failure.is_user() => {
            Attempt::Fail(ModelError::Config(format!("{PROVIDER}: {}", context(&error))))
        }
        // Connection failures, and credentials that could not be fetched this time.
        SdkError::DispatchFailure(_) => Attempt::Retry { status: None, message: context(&error), retry_after: None },
        SdkError::ResponseError(response) => match status_of(response.raw()) {
            Some(status) if status == 429 || status >= 500 => {
                Attempt::Retry { status: Some(status), message: context(&error), retry_after: None }
            }
            _ => Attempt::Fail(ModelError::InvalidResponse(format!("{PROVIDER}: {}", context(&error)))),
        },
        SdkError::ConstructionFailure(_) => {
            Attempt::Fail(ModelError::Config(format!("{PROVIDER}: could not build the request: {}", context(&error))))
        }
        _ => Attempt::Fail(ModelError::InvalidResponse(format!("{PROVIDER}: {}", context(&error)))),
    }
}

/// A failure while reading the event stream. Bytes that do not make a frame (a connection cut
/// mid-frame, say) are a transport failure and retried; a frame whose event cannot be read is not.
pub(super) fn stream_failure<T>(error: SdkError<ConverseStreamOutputError, RawMessage>) -> Attempt<T> {
    if let SdkError::ResponseError(response) = &error {
        return match response.raw() {
            RawMessage::Invalid(_) => Attempt::Retry { status: None, message: context(&error), retry_after: None },
            _ => Attempt::Fail(ModelError::InvalidResponse(format!("{PROVIDER}: {}", context(&error)))),
        };
    }
    sdk_failure(error, |_| None)
}

pub(super) fn describe(code: &str, message: Option<&str>) -> String {
    let text = match message.filter(|message| !message.is_empty()) {
        Some(message) => format!("{code}: {message}"),
        None => code.to_owned(),
    };
    truncate(&text, MAX_MESSAGE_CHARS)
}

/// An SDK error with its causes on one line. The SDK never puts credentials in its errors.
pub(super) fn context<E: std::error::Error>(error: &E) -> String {
    truncate(&DisplayErrorContext(error).to_string(), MAX_MESSAGE_CHARS)
}
