//! Logs and distributed traces: the `tracing` subscriber every binary
//! installs, and the OpenTelemetry export of its spans.
//!
//! Log lines go to stderr always. Spans leave the process only when the
//! OpenTelemetry SDK's standard variables name an OTLP endpoint
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! OTLP over HTTP with protobuf); the SDK's other variables apply too
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
//! and its argument: by default a caller's sampling decision is followed
//! and every trace begun here is kept; the decision is taken before a root
//! span exists, [`root_span`]). When no endpoint is set, no span
//! is made for export at all: [`exporting`] is false, and the spans that
//! exist only for traces (a request's, a ranker command's, the HBase calls
//! under them) are never created or recorded. The request a log line
//! belongs to is named in it without a span ([`RequestContext`], `lines`).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanKind, TraceContextExt as _, TraceId, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SdkTracerProvider, ShouldSample};
use opentelemetry_sdk::Resource;
use tracing::level_filters::LevelFilter;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _, Registry};

mod lines;

pub use lines::RequestContext;

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

/// Whether the work running now belongs to a trace that is exported: the
/// spans made only for a trace (an HBase call's) are skipped otherwise,
/// since even a span the export never sees is formatted for the log lines.
pub fn in_kept_trace() -> bool {
    exporting() && tracing::Span::current().context().span().span_context().is_sampled()
}

/// Keeps the export running; dropping it sends the spans still batched
/// (waiting at most five seconds) and stops the exporter. Held by
/// [`crate::shutdown::run_main`] until the process's tasks are gone.
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
/// export of the `info` spans of every kept trace ([`root_span`]), whatever
/// `RUST_LOG` says, as service `service_name` unless `OTEL_SERVICE_NAME`
/// names it. A second install (tests
/// that start several services in one process) keeps the first.
pub fn init(service_name: &'static str) -> Tracing {
    let format = if std::env::var("REVIEWS_LOG_FORMAT").is_ok_and(|format| format == "json") {
        LogFormat::Json
    } else {
        // Colour codes only where a person reads the log live: redirected to a file
        // or collected by journald, every line would carry escape sequences.
        LogFormat::Text { colour: std::io::IsTerminal::is_terminal(&std::io::stderr()) }
    };
    let lines = log_lines(format, std::env::var(EnvFilter::DEFAULT_ENV).ok().as_deref(), std::io::stderr);
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
            .with_filter(
                tracing_subscriber::filter::dynamic_filter_fn(exported)
                    // Decided once per call site, not on every event: the
                    // export never takes what is finer than `info`.
                    .with_callsite_filter(|metadata| {
                        if *metadata.level() > tracing::Level::INFO {
                            tracing::subscriber::Interest::never()
                        } else {
                            tracing::subscriber::Interest::sometimes()
                        }
                    })
                    .with_max_level_hint(LevelFilter::INFO),
            )
    });
    if tracing_subscriber::registry().with(lines).with(export).try_init().is_err() {
        // Installed before: the first install's export (if any) stays.
        return Tracing { provider: None };
    }
    if let Some(error) = export_error {
        tracing::warn!(%error, "OTLP endpoint set, but the span exporter could not be built; no spans are exported");
    }
    if provider.is_some() {
        // The standard variables' sampler decides before a root span exists
        // (`root_span`); what reaches the export is then all kept.
        let _ = HEAD_SAMPLER.set(opentelemetry_sdk::trace::Config::default().sampler);
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Tracing { provider }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// For a person: time, level, the request and spans, target, message and fields.
    Text { colour: bool },
    /// One JSON object a line, for a log store.
    Json,
}

/// The log lines [`init`] installs, in `format` to `writer` (stderr there; a
/// test's buffer in tests), at the levels of `directives` in `RUST_LOG`'s
/// syntax (`info` when there are none); each line logged for a request
/// names it ([`RequestContext`]).
pub fn log_lines<Lines>(
    format: LogFormat,
    directives: Option<&str>,
    writer: Lines,
) -> Box<dyn tracing_subscriber::Layer<Registry> + Send + Sync>
where
    Lines: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    let filter = LogFilter::of(directives);
    let lines = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Json => filter.over(lines.json().event_format(lines::JsonLines::default())),
        LogFormat::Text { colour } => filter.over(lines.with_ansi(colour).event_format(lines::TextLines::default())),
    }
}

/// The log lines' filter, of `RUST_LOG`'s directives (`info` when there
/// are none, or they cannot be read).
///
/// Directives of targets and levels alone (`info`, `warn,query_api=debug`,
/// what is set in practice) make a [`Targets`] filter, which decides once per
/// call site. Only directives that name spans or fields
/// (`common[hbase call]=debug`) need an [`EnvFilter`], which also looks
/// each span up, under a lock the threads share, when it is made, entered,
/// left and closed: for nothing when no directive names a span. (Spans
/// exist only in exported traces; a request is named in its lines without
/// one, [`RequestContext`], so no directive selects a request by its span.)
#[expect(clippy::large_enum_variant, reason = "made once, at start, and consumed at once")]
enum LogFilter {
    Targets(Targets),
    Spans(EnvFilter),
}

impl LogFilter {
    /// The filter of `directives`, in `RUST_LOG`'s syntax.
    fn of(directives: Option<&str>) -> LogFilter {
        let directives = directives.filter(|directives| !directives.trim().is_empty()).unwrap_or("info");
        let spans_or_fields =
            || LogFilter::Spans(EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new("info")));
        // Every span or field is named in brackets. `Targets` would read
        // `[request]=debug` as a target of that name, so it never sees them.
        if directives.contains('[') {
            return spans_or_fields();
        }
        directives.parse::<Targets>().map_or_else(|_| spans_or_fields(), LogFilter::Targets)
    }

    /// `lines` filtered by this filter.
    fn over<Lines>(self, lines: Lines) -> Box<dyn tracing_subscriber::Layer<Registry> + Send + Sync>
    where
        Lines: tracing_subscriber::Layer<Registry> + Send + Sync,
    {
        match self {
            LogFilter::Targets(targets) => lines.with_filter(targets).boxed(),
            LogFilter::Spans(filter) => lines.with_filter(filter).boxed(),
        }
    }
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
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        // Sampled already, by `root_span`, before the spans exist.
        .with_sampler(Sampler::AlwaysOn)
        .build())
}

/// The W3C Trace Context header a caller's trace arrives in.
const TRACEPARENT: &str = "traceparent";

thread_local! {
    /// Whether [`root_span`] is making the root span of a kept trace.
    static MAKING_KEPT_ROOT: Cell<bool> = const { Cell::new(false) };
}

/// The sampler of the SDK's standard variables, asked once per trace
/// begun here, before its root span exists.
static HEAD_SAMPLER: OnceLock<Box<dyn ShouldSample>> = OnceLock::new();

/// The root span of a piece of work (a request, a command), made with
/// `make` when its trace is kept, `Span::none()` otherwise (and always when
/// nothing is exported): the caller's decision when `headers` carry a W3C
/// `traceparent`, else the sampler of `OTEL_TRACES_SAMPLER`. A kept span
/// continues the caller's trace. Work left out of the sample makes no span,
/// so neither does any span or event under it reach the export: it costs
/// what it costs with the export off. (A request's log lines name it without
/// a span: [`RequestContext`].)
pub fn root_span(headers: Option<&http::HeaderMap>, make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if !exporting() {
        return tracing::Span::none();
    }
    // Most requests carry no `traceparent`; only one that does is parsed.
    let parent = match headers {
        Some(headers) if headers.contains_key(TRACEPARENT) => {
            TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers))
        }
        _ => opentelemetry::Context::new(),
    };
    if !kept(&parent) {
        return tracing::Span::none();
    }
    let span = {
        let _deciding = RootDecision::hold();
        make()
    };
    if parent.has_active_span() {
        // Fails only when the span is disabled: then there is nothing to continue.
        let _ = span.set_parent(parent);
    }
    span
}

/// That the root span being made is kept, told to the export's filter
/// ([`exported`]) through [`MAKING_KEPT_ROOT`] for as long as it is held,
/// and withdrawn when dropped, even when making the span panics: a decision
/// left behind would export the thread's next spans as roots.
struct RootDecision {
    /// What was held before (a root made while making a root), put back on drop.
    previous: bool,
}

impl RootDecision {
    fn hold() -> RootDecision {
        RootDecision { previous: MAKING_KEPT_ROOT.with(|making| making.replace(true)) }
    }
}

impl Drop for RootDecision {
    fn drop(&mut self) {
        MAKING_KEPT_ROOT.with(|making| making.set(self.previous));
    }
}

/// Whether the trace of a root span under `parent` (a remote caller's, or
/// none) is kept, by the head sampler.
fn kept(parent: &opentelemetry::Context) -> bool {
    HEAD_SAMPLER.get().is_some_and(|sampler| sampled(sampler.as_ref(), parent))
}

/// Whether `sampler` keeps a trace whose root span is under `parent`.
fn sampled(sampler: &dyn ShouldSample, parent: &opentelemetry::Context) -> bool {
    let remote = parent.span().span_context().clone();
    // A trace begun here has no id yet; a ratio sampler needs one, and any
    // random one keeps the same share of traces.
    let trace_id = if remote.is_valid() { remote.trace_id() } else { TraceId::from(rand::random::<u128>()) };
    let decision = sampler.should_sample(Some(parent), trace_id, "root", &SpanKind::Server, &[], &[]).decision;
    decision == SamplingDecision::RecordAndSample
}

/// What the export sees: a root span made by [`root_span`] when its trace is
/// kept, and `info` spans and events under a span it sees; nothing else.
fn exported<S>(metadata: &tracing::Metadata<'_>, context: &tracing_subscriber::layer::Context<'_, S>) -> bool
where
    S: tracing::Subscriber + for<'lookup> tracing_subscriber::registry::LookupSpan<'lookup>,
{
    if *metadata.level() > tracing::Level::INFO {
        return false;
    }
    (metadata.is_span() && MAKING_KEPT_ROOT.with(Cell::get)) || context.lookup_current().is_some()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceState};

    use super::*;

    /// Counts the events that reach it.
    struct CountingEvents(Arc<AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountingEvents {
        fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many of `log`'s events pass the filter of `directives`.
    fn events_passed(directives: &str, log: impl FnOnce()) -> usize {
        let passed = Arc::new(AtomicUsize::new(0));
        let layer = LogFilter::of(Some(directives)).over(CountingEvents(passed.clone()));
        tracing::subscriber::with_default(Registry::default().with(layer), log);
        passed.load(Ordering::Relaxed)
    }

    #[test]
    fn directives_of_targets_and_levels_filter_without_looking_at_spans() {
        assert!(matches!(LogFilter::of(None), LogFilter::Targets(_)));
        assert!(matches!(LogFilter::of(Some(" ")), LogFilter::Targets(_)));
        assert!(matches!(LogFilter::of(Some("warn,common=debug")), LogFilter::Targets(_)));
        let passed = events_passed("warn,common=debug", || {
            tracing::debug!(target: "common::hbase", "passes: its target is at debug");
            tracing::trace!(target: "common::hbase", "held: finer than debug");
            tracing::info!(target: "query_api", "held: other targets are at warn");
            tracing::warn!(target: "query_api", "passes");
        });
        assert_eq!(passed, 2);
    }

    #[test]
    fn directives_that_name_a_span_still_filter_by_it() {
        assert!(matches!(LogFilter::of(Some("warn,[request]=debug")), LogFilter::Spans(_)));
        let passed = events_passed("warn,[request]=debug", || {
            tracing::debug!("held: outside the span");
            let span = tracing::info_span!("request");
            let _entered = span.enter();
            tracing::debug!("passes: inside it");
        });
        assert_eq!(passed, 1);
    }

    #[test]
    fn no_empty_or_unreadable_directives_log_at_info() {
        let at_info_and_debug = || {
            tracing::info!(target: "common::hbase", "passes");
            tracing::debug!(target: "common::hbase", "held");
        };
        assert_eq!(events_passed("", at_info_and_debug), 1);
        assert_eq!(events_passed("common=loud", at_info_and_debug), 1);
        assert_eq!(LogFilter::of(None).over(CountingEvents(Arc::default())).max_level_hint(), Some(LevelFilter::INFO));
    }

    fn caller(sampled: bool) -> opentelemetry::Context {
        let flags = if sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        let remote = SpanContext::new(TraceId::from(7_u128), SpanId::from(3_u64), flags, true, TraceState::default());
        opentelemetry::Context::new().with_remote_span_context(remote)
    }

    #[test]
    fn a_parent_based_sampler_follows_the_callers_decision_and_samples_its_own_traces_by_ratio() {
        let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(0.0)));
        assert!(sampled(&sampler, &caller(true)), "a caller's kept trace is continued");
        assert!(!sampled(&sampler, &caller(false)), "a caller's dropped trace stays dropped");
        assert!(!sampled(&sampler, &opentelemetry::Context::new()), "ratio 0 keeps none of its own");
        let all = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(1.0)));
        assert!(sampled(&all, &opentelemetry::Context::new()), "ratio 1 keeps every trace begun here");
        // A ratio sampler needs a trace id even for a trace begun here: a
        // random one keeps about the share asked for.
        let tenth = Sampler::TraceIdRatioBased(0.1);
        let kept = (0..10_000).filter(|_| sampled(&tenth, &opentelemetry::Context::new())).count();
        assert!((700..1_300).contains(&kept), "{kept} of 10,000 kept at 0.1");
    }

    #[test]
    fn a_root_decision_is_withdrawn_even_when_making_the_span_panics() {
        let outcome = std::panic::catch_unwind(|| {
            let _deciding = RootDecision::hold();
            panic!("making the span failed");
        });
        assert!(outcome.is_err());
        assert!(!MAKING_KEPT_ROOT.with(Cell::get));
    }
}
