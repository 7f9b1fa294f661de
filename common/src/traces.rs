//! Logs and distributed traces: the `tracing` subscriber every binary
//! installs, and the OpenTelemetry export of its spans.
//!
//! Log lines go to stderr always. Spans leave the process only when the
//! OpenTelemetry SDK's standard variables name an OTLP endpoint
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! OTLP over HTTP with protobuf); the SDK's other variables apply too
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
//! and its argument: by default a caller's sampling decision is followed
//! and every trace begun here is sampled). When no endpoint is set, no span
//! is made for export at all: [`exporting`] is false, and the spans below
//! that exist only for traces (HBase calls, a request's route and status)
//! are never created or recorded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Whether spans are exported (set once, by [`init`]).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// The variables that turn the export on, most specific first.
const ENDPOINT_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// How long the end of a process waits for its last spans to be sent.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(5);

/// Whether spans leave this process: callers skip the work that only a
/// trace would read.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Keeps the export running; dropping it sends the spans still batched
/// (waiting at most five seconds) and stops the exporter. Hold it in `main`
/// until the process ends.
#[derive(Debug)]
#[must_use = "dropping it at once stops the export of spans"]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Tracing {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(error) = provider.shutdown_with_timeout(FLUSH_AT_EXIT) {
                tracing::warn!(%error, "the last spans could not be exported");
            }
        }
    }
}

/// Installs the subscriber every binary uses: human-readable lines on
/// stderr, or JSON lines when `REVIEWS_LOG_FORMAT=json`, at the levels of
/// `RUST_LOG` (default `info`); and, when an OTLP endpoint is set, the
/// export of every `info` span (whatever `RUST_LOG` says) as service
/// `service_name` unless `OTEL_SERVICE_NAME` names it. A second install (tests
/// that start several services in one process) keeps the first.
pub fn init(service_name: &'static str) -> Tracing {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only where a person reads the log live: redirected to a file
    // or collected by journald, every line would carry escape sequences.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(colour);
    let lines = if std::env::var("REVIEWS_LOG_FORMAT").is_ok_and(|format| format == "json") {
        lines.json().with_filter(filter).boxed()
    } else {
        lines.with_filter(filter).boxed()
    };
    let endpoint_set = ENDPOINT_VARIABLES.iter().any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()));
    let (provider, export_error) = if endpoint_set {
        match span_exporter(service_name) {
            Ok(provider) => (Some(provider), None),
            Err(error) => (None, Some(error)),
        }
    } else {
        (None, None)
    };
    let export = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(service_name))
            // Only what an engineer reads off a trace: no idle and busy
            // times, no source location, thread or target attributes, each
            // an allocation per span on the service's hottest path.
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            // Nothing here reads OpenTelemetry's own current context (the
            // parent of a span is the tracing span it was made under), so
            // entering a span, several times per request, need not set it.
            .with_context_activation(false)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
    });
    if tracing_subscriber::registry().with(lines).with(export).try_init().is_err() {
        // Installed before: the first install's export (if any) stays.
        return Tracing { provider: None };
    }
    if let Some(error) = export_error {
        tracing::warn!(%error, "OTLP endpoint set, but the span exporter could not be built; no spans are exported");
    }
    if provider.is_some() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Tracing { provider }
}

/// The tracer provider sending batches of spans over OTLP/HTTP to the
/// endpoint the standard variables name.
fn span_exporter(service_name: &'static str) -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|error| format!("OTLP span exporter: {error}"))?;
    let resource = if std::env::var("OTEL_SERVICE_NAME").is_ok_and(|name| !name.is_empty()) {
        Resource::builder().build()
    } else {
        Resource::builder().with_service_name(service_name).build()
    };
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// Makes `span` continue the trace of the caller whose W3C `traceparent`
/// (and `tracestate`) headers are `headers`; without them, or when nothing
/// is exported, `span` stays the root of its own trace.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !exporting() {
        return;
    }
    let context = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
    });
    // Fails only when the span is disabled: then there is nothing to continue.
    let _ = span.set_parent(context);
}
