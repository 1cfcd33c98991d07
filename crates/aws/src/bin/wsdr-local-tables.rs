//! Create the state and connections tables on a local DynamoDB endpoint, identical to
//! `template.yaml`'s, so the Lambdas can run locally (`cargo lambda watch`, `make invoke-local`).
//!
//! `cargo run -p wsdr-aws --bin wsdr-local-tables -- <endpoint> <state table> <connections table>`
//!
//! An existing table is left as it is, so the command can be repeated.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [endpoint, state, connections] = args.as_slice() else {
        eprintln!("usage: wsdr-local-tables <endpoint> <state table> <connections table>");
        return ExitCode::from(2);
    };
    let client = wsdr_aws::local::dynamo_client(endpoint, "us-east-1");
    let existing = match client.list_tables().send().await {
        Ok(out) => out.table_names.unwrap_or_default(),
        Err(e) => {
            eprintln!(
                "cannot list tables at {endpoint}: {}",
                wsdr_aws::classify(&e)
            );
            return ExitCode::FAILURE;
        }
    };
    for (name, is_state) in [(state, true), (connections, false)] {
        if existing.contains(name) {
            eprintln!("table {name} exists");
            continue;
        }
        let created = if is_state {
            wsdr_aws::schema::create_state_table(&client, name).await
        } else {
            wsdr_aws::schema::create_connections_table(&client, name).await
        };
        if let Err(e) = created {
            eprintln!("cannot create table {name}: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!("table {name} created");
    }
    ExitCode::SUCCESS
}
