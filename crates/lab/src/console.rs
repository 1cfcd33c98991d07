//! The lab's logging: its timeline events (target [`TIMELINE`]) and everything else through
//! `tracing`. On a terminal a timeline event is one aligned line with lab and AWS time; with
//! `--log-format json` every event is a JSON object (`fields.kind`, `fields.lab_s`,
//! `fields.aws_s`, `fields.region`, `fields.message`) for whatever collects logs.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The target of timeline events.
pub const TIMELINE: &str = "wsdr::timeline";

/// How log events are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Timeline lines for people; other events as `LEVEL target: message`.
    Text,
    /// One JSON object per event.
    Json,
}

/// Install the subscriber (stderr). The emulated Lambdas' own logs are off unless RUST_LOG
/// asks for them: injected faults make them log errors by design.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        "error,wsdr::timeline=info,wsdr_core=off,ws_handler=off,authorizer=off,canary=off".into()
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.event_format(Console).init(),
    }
}

/// The text format.
#[derive(Debug, Clone, Copy)]
pub struct Console;

impl<S, N> FormatEvent<S, N> for Console
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        if meta.target() == TIMELINE {
            let mut fields = TimelineFields::default();
            event.record(&mut fields);
            return writeln!(
                writer,
                "  [{:>7.2} s lab | {:>6.0} s AWS] {}: {}",
                fields.lab_s, fields.aws_s, fields.kind, fields.message
            );
        }
        write!(writer, "{} {}: ", meta.level(), meta.target())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[derive(Default)]
struct TimelineFields {
    lab_s: f64,
    aws_s: f64,
    kind: String,
    message: String,
}

impl Visit for TimelineFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        match field.name() {
            "lab_s" => self.lab_s = value,
            "aws_s" => self.aws_s = value,
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "kind" => self.kind = value.to_owned(),
            "message" => self.message = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}
