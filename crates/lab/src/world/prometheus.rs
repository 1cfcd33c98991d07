//! `/metrics`: the lab's state in Prometheus text format (version 0.0.4), so a drill can be
//! watched from Grafana. Each metric is named after the CloudWatch metric it stands for
//! (`wsdr_<namespace>_<metric>`), and times are AWS-equivalent seconds (lab time x the time
//! scale), like the drill report's `_aws_s` fields. docs/LAB.md lists them.

use crate::world::health::AlarmState;
use crate::world::status::{RegionStatus, Status};
use crate::world::World;
use std::fmt::Write;

/// One of a Region's counters, read from its status.
type RegionCounter = fn(&RegionStatus) -> u64;

/// The exposition for one scrape.
pub fn render(lab: &World) -> String {
    let status = lab.status();
    let scale = status.time_scale;
    let mut out = Exposition::default();

    out.family(
        "wsdr_app_websocket_health",
        "gauge",
        "Last canary datapoint per Region (CloudWatch App/WebSocketHealth): 1 healthy, 0 unhealthy.",
    );
    for r in &status.regions {
        if let Some(last) = r.canary.last() {
            out.sample(
                "wsdr_app_websocket_health",
                &[("region", &r.name)],
                f64::from(u8::from(*last)),
            );
        }
    }
    out.family(
        "wsdr_apigateway_connections",
        "gauge",
        "Open WebSocket connections per Region (API Gateway has no such metric; ConnectCount counts handshakes).",
    );
    for r in &status.regions {
        out.sample(
            "wsdr_apigateway_connections",
            &[("region", &r.name)],
            r.sockets as f64,
        );
    }
    let counters: [(&str, &str, RegionCounter); 4] = [
        (
            "wsdr_apigateway_connect_count_total",
            "Handshakes per Region (AWS/ApiGateway ConnectCount).",
            |r| r.handshakes,
        ),
        (
            "wsdr_apigateway_client_error_429_total",
            "Handshakes refused over the new-connection quota (part of AWS/ApiGateway ClientError).",
            |r| r.throttled_429,
        ),
        (
            "wsdr_apigateway_integration_error_total",
            "Frames the integration failed (AWS/ApiGateway IntegrationError).",
            |r| r.integration_errors,
        ),
        (
            "wsdr_app_bids_accepted_total",
            "Bids answered accepted per Region.",
            |r| r.bids_accepted,
        ),
    ];
    for (name, help, value) in counters {
        out.family(name, "counter", help);
        for r in &status.regions {
            out.sample(name, &[("region", &r.name)], value(r) as f64);
        }
    }
    out.family(
        "wsdr_cloudwatch_alarm_state",
        "gauge",
        "The Region's verdict alarm: 1 for the state it is in (CloudWatch alarm state).",
    );
    for r in &status.regions {
        for (state, name) in [
            (AlarmState::Ok, "OK"),
            (AlarmState::Alarm, "ALARM"),
            (AlarmState::InsufficientData, "INSUFFICIENT_DATA"),
        ] {
            out.sample(
                "wsdr_cloudwatch_alarm_state",
                &[("region", &r.name), ("state", name)],
                f64::from(u8::from(r.alarm == state)),
            );
        }
    }
    out.family(
        "wsdr_route53_health_check_status",
        "gauge",
        "The Region's failover record health check (AWS/Route53 HealthCheckStatus): 1 healthy.",
    );
    for r in &status.regions {
        out.sample(
            "wsdr_route53_health_check_status",
            &[("region", &r.name)],
            f64::from(u8::from(r.health_check_healthy)),
        );
    }
    out.family(
        "wsdr_route53_dns_answer",
        "gauge",
        "1 for the Region the failover name resolves to now.",
    );
    for r in &status.regions {
        out.sample(
            "wsdr_route53_dns_answer",
            &[("region", &r.name)],
            f64::from(u8::from(
                status.dns_answer.as_deref() == Some(r.name.as_str()),
            )),
        );
    }
    replication(&mut out, &status, scale);
    faults_and_users(&mut out, lab, &status);
    out.text
}

fn replication(out: &mut Exposition, status: &Status, scale: f64) {
    out.family(
        "wsdr_dynamodb_replication_latency_seconds",
        "gauge",
        "Replication lag of the link, AWS seconds (AWS/DynamoDB ReplicationLatency, which CloudWatch gives in ms).",
    );
    for l in &status.replication {
        out.sample(
            "wsdr_dynamodb_replication_latency_seconds",
            &[("from", &l.from), ("to", &l.to)],
            l.lag_ms / 1000.0 * scale,
        );
    }
    out.family(
        "wsdr_dynamodb_replication_backlog_items",
        "gauge",
        "Writes committed in `from` and not yet applied in `to` (at risk if `from` never returns).",
    );
    for l in &status.replication {
        out.sample(
            "wsdr_dynamodb_replication_backlog_items",
            &[("from", &l.from), ("to", &l.to)],
            l.in_flight.items as f64,
        );
    }
    out.family(
        "wsdr_dynamodb_replication_cut",
        "gauge",
        "1 while the link is cut by a fault.",
    );
    for l in &status.replication {
        out.sample(
            "wsdr_dynamodb_replication_cut",
            &[("from", &l.from), ("to", &l.to)],
            f64::from(u8::from(l.cut)),
        );
    }
}

fn faults_and_users(out: &mut Exposition, lab: &World, status: &Status) {
    out.family(
        "wsdr_lab_time_scale",
        "gauge",
        "AWS seconds per lab second.",
    );
    out.sample("wsdr_lab_time_scale", &[], status.time_scale);
    out.family(
        "wsdr_lab_fault_active",
        "gauge",
        "1 while a fault is in force.",
    );
    out.sample(
        "wsdr_lab_fault_active",
        &[],
        f64::from(u8::from(status.fault.is_some())),
    );
    if let Some((fault, _)) = lab.last_fault_in(&status.key_events) {
        out.family(
            "wsdr_lab_last_fault_age_seconds",
            "gauge",
            "AWS seconds since the last fault was injected.",
        );
        out.sample("wsdr_lab_last_fault_age_seconds", &[], fault.since_aws_s);
        if let Some(restored) = fault.restored {
            out.family(
                "wsdr_lab_last_fault_users_restored",
                "gauge",
                "Users restored in another Region since the last fault.",
            );
            out.sample("wsdr_lab_last_fault_users_restored", &[], restored as f64);
        }
        if let Some(rto) = fault.rto_so_far_aws_s {
            out.family(
                "wsdr_lab_last_fault_rto_seconds",
                "gauge",
                "The slowest restore after the last fault so far, AWS seconds (its RTO once everyone is back).",
            );
            out.sample("wsdr_lab_last_fault_rto_seconds", &[], rto);
        }
    }
    if let Some(users) = &status.users {
        out.family("wsdr_lab_users", "gauge", "Simulated users in the run.");
        out.sample("wsdr_lab_users", &[], users.total as f64);
        out.family(
            "wsdr_lab_users_online",
            "gauge",
            "Simulated users connected with their state restored.",
        );
        out.sample("wsdr_lab_users_online", &[], users.online as f64);
    }
}

#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let _ = write!(self.text, "{{{}}}", labels.join(","));
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Label values escape backslash, double quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_well_formed() {
        let mut out = Exposition::default();
        out.family("wsdr_x", "gauge", "A test.");
        out.sample("wsdr_x", &[("region", "us-\"east\"-1")], 1.5);
        out.sample("wsdr_x", &[], 0.0);
        assert_eq!(
            out.text,
            "# HELP wsdr_x A test.\n# TYPE wsdr_x gauge\nwsdr_x{region=\"us-\\\"east\\\"-1\"} 1.5\nwsdr_x 0\n"
        );
    }
}
