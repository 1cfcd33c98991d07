#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Secrets read at cold start, with the SDK's own mocking tool: the exact GetSecretValue
//! request, and what a function's configuration lookup gets.

use aws_sdk_secretsmanager::operation::get_secret_value::{
    GetSecretValueError, GetSecretValueOutput,
};
use aws_sdk_secretsmanager::Client;
use aws_smithy_mocks::{mock, mock_client};
use std::collections::HashMap;
use wsdr_aws::secrets::{resolve_secret_vars, Secrets};

#[tokio::test]
async fn a_secret_is_read_by_name_and_fills_its_variable_unless_set() {
    let rule = mock!(Client::get_secret_value)
        .match_requests(|req| req.secret_id() == Some("wsdr/canary"))
        .then_output(|| {
            GetSecretValueOutput::builder()
                .secret_string("0123456789abcdef0123456789abcdef")
                .build()
        });
    let secrets = Secrets::new(mock_client!(aws_sdk_secretsmanager, [&rule]));
    let env = HashMap::from([
        ("CANARY_HS256_SECRET_ID", "wsdr/canary"),
        (
            "JWT_HS256_SECRET",
            "set-in-plain-for-a-local-run-0123456789",
        ),
        ("JWT_HS256_SECRET_ID", "never-read"),
    ]);
    let resolved = resolve_secret_vars(
        &secrets,
        &["CANARY_HS256_SECRET", "JWT_HS256_SECRET", "UNSET_SECRET"],
        |k| env.get(k).map(|v| v.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(
        resolved,
        vec![(
            "CANARY_HS256_SECRET".to_owned(),
            "0123456789abcdef0123456789abcdef".to_owned()
        )]
    );
    assert_eq!(
        rule.num_calls(),
        1,
        "the plain variable wins; unset ids are not read"
    );
}

#[tokio::test]
async fn a_missing_or_binary_secret_is_an_error_that_names_it() {
    let missing = mock!(Client::get_secret_value).then_error(|| {
        GetSecretValueError::ResourceNotFoundException(
            aws_sdk_secretsmanager::types::error::ResourceNotFoundException::builder()
                .message("Secrets Manager can't find the specified secret.")
                .build(),
        )
    });
    let secrets = Secrets::new(mock_client!(aws_sdk_secretsmanager, [&missing]));
    let error = secrets.secret_string("wsdr/nope").await.unwrap_err();
    assert!(error.to_string().contains("wsdr/nope"), "{error}");

    let binary = mock!(Client::get_secret_value).then_output(|| {
        GetSecretValueOutput::builder()
            .secret_binary(aws_smithy_types::Blob::new(vec![1, 2, 3]))
            .build()
    });
    let secrets = Secrets::new(mock_client!(aws_sdk_secretsmanager, [&binary]));
    let error = secrets.secret_string("wsdr/binary").await.unwrap_err();
    assert!(error.to_string().contains("no SecretString"), "{error}");
}
