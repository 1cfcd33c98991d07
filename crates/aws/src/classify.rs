use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// Error codes AWS services use to say "slow down".
const THROTTLING_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "TooManyRequestsException",
];

/// Map any SDK error to what the caller must do about it. Service error text goes to the
/// variant (for the log), never to a client frame.
pub fn classify<E>(error: &SdkError<E, HttpResponse>) -> wsdr_core::Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match error {
        SdkError::TimeoutError(_) => wsdr_core::Error::Transient("request timed out".into()),
        SdkError::DispatchFailure(failure) => {
            wsdr_core::Error::Transient(format!("dispatch failure: {failure:?}"))
        }
        SdkError::ResponseError(_) => {
            wsdr_core::Error::Transient("response could not be read".into())
        }
        SdkError::ConstructionFailure(_) => {
            wsdr_core::Error::Internal("request could not be built".into())
        }
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let code = error.code().unwrap_or("Unknown");
            let message = error.message().unwrap_or("");
            let detail = format!("{code} (HTTP {status}): {message}");
            if status == 410 || code == "GoneException" {
                wsdr_core::Error::Gone
            } else if code == "ReplicatedWriteConflictException" {
                // MRSC: another Region is writing the item; nothing was written here.
                wsdr_core::Error::WriteConflict(detail)
            } else if status == 429 || THROTTLING_CODES.contains(&code) {
                wsdr_core::Error::Throttled(detail)
            } else if status >= 500 {
                wsdr_core::Error::Transient(detail)
            } else {
                wsdr_core::Error::Internal(detail)
            }
        }
        _ => wsdr_core::Error::Internal(format!("unclassified SDK error: {error}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;

    fn raw(status: u16) -> HttpResponse {
        HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty())
    }

    #[test]
    fn failures_before_an_answer_are_transient_and_a_request_never_built_is_internal() {
        let timeout: SdkError<GetItemError, HttpResponse> = SdkError::timeout_error("slow");
        assert_eq!(
            classify(&timeout),
            wsdr_core::Error::Transient("request timed out".into())
        );
        let unreadable: SdkError<GetItemError, HttpResponse> =
            SdkError::response_error("truncated", raw(200));
        assert_eq!(
            classify(&unreadable),
            wsdr_core::Error::Transient("response could not be read".into())
        );
        let unbuilt: SdkError<GetItemError, HttpResponse> =
            SdkError::construction_failure("no region");
        assert_eq!(
            classify(&unbuilt),
            wsdr_core::Error::Internal("request could not be built".into())
        );
    }
}
