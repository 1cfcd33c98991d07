#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! `wsdr-local-tables`, the command `make invoke-local` creates its tables with: both tables
//! created on DynamoDB Local as the template defines them, left as they are when run again,
//! and a clear refusal for a wrong call.

mod common;

use std::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_wsdr-local-tables");

#[tokio::test]
async fn the_command_creates_both_tables_once_and_leaves_them_when_run_again() {
    let (state, connections) = (common::unique("local-state"), common::unique("local-conns"));
    let run = || {
        Command::new(BINARY)
            .args([common::endpoint(), state.clone(), connections.clone()])
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{first:?}");
    let said = String::from_utf8_lossy(&first.stderr).into_owned();
    assert!(said.contains(&format!("table {state} created")), "{said}");
    let client = common::client();
    for (table, key) in [(&state, "pk"), (&connections, "pk")] {
        let described = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .unwrap();
        let schema = described.table().unwrap().key_schema();
        assert_eq!(schema[0].attribute_name(), key, "{table}");
    }
    let again = run();
    assert!(again.status.success(), "{again:?}");
    let said = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(
        said.contains(&format!("table {connections} exists")),
        "{said}"
    );
}

#[test]
fn a_wrong_call_is_refused_with_its_usage() {
    let output = Command::new(BINARY).arg("only-one").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("usage: wsdr-local-tables"));
}
