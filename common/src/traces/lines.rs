//! The log lines' formats, and the request they name without a span.
//!
//! A request served by query-api is named in every line its work logs:
//! `request{request_id=.. method=.. path=..}:` before the target in text
//! lines, a `request` span in JSON lines, as if it were a `tracing` span.
//! It is not one: a span is made, entered and left (at each poll of the
//! request's future), and closed on every request, under the registry's
//! and each layer's bookkeeping (0.7 to 1.2 µs of a cached read's 12 to 13
//! µs of CPU, `bench/wrk-ab.sh`), to be read only by the rare line logged
//! under it. A
//! [`RequestContext`] is set around each poll in a thread-local instead,
//! and read only when a line is written. A request whose trace is exported
//! gets a span as before, and no context: its lines name its span.

use std::fmt;

use nu_ansi_term::{Color, Style};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Json, JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

scoped_tls::scoped_thread_local!(static CURRENT_REQUEST: RequestContext);

/// The request whose work runs now on this thread, as its log lines name it.
#[derive(Debug, Clone)]
pub struct RequestContext {
    request_id: http::HeaderValue,
    method: http::Method,
    uri: http::Uri,
}

impl RequestContext {
    /// The context of the request `request_id` (the `X-Request-Id` it came
    /// with or was given), `method` and `uri`.
    pub fn new(request_id: http::HeaderValue, method: http::Method, uri: http::Uri) -> RequestContext {
        RequestContext { request_id, method, uri }
    }

    /// Runs `work` with this request named in the lines it logs.
    pub fn in_scope<T>(&self, work: impl FnOnce() -> T) -> T {
        CURRENT_REQUEST.set(self, work)
    }

    /// The request whose work runs now, if any: for work handed to another
    /// thread (the HBase calls' blocking pool), which logs in its name too.
    pub fn current() -> Option<RequestContext> {
        CURRENT_REQUEST.is_set().then(|| CURRENT_REQUEST.with(RequestContext::clone))
    }

    /// The request's id, this context done with: what its answer carries.
    pub fn into_request_id(self) -> http::HeaderValue {
        self.request_id
    }

    /// The id as the lines write it: `-` for one that is not visible ASCII.
    fn request_id(&self) -> &str {
        self.request_id.to_str().unwrap_or("-")
    }

    /// The fields its lines show, in order, as its span's would be.
    fn fields(&self) -> [(&'static str, &str); 3] {
        [("request_id", self.request_id()), ("method", self.method.as_str()), ("path", self.uri.path())]
    }
}

/// The plain-text lines: tracing-subscriber's full format (time, level,
/// spans, target, fields), with the current request, when there is one,
/// written where its span would be, first of the spans.
#[derive(Debug)]
pub(super) struct TextLines {
    /// The full format from the spans on: this writes the time and level before the request.
    from_the_spans_on: Format<Full, ()>,
}

impl Default for TextLines {
    fn default() -> TextLines {
        TextLines { from_the_spans_on: Format::default().without_time().with_level(false) }
    }
}

impl<S, N> FormatEvent<S, N> for TextLines
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
    N: for<'writer> FormatFields<'writer> + 'static,
{
    fn format_event(&self, context: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        // What the full format writes before the spans, colours included
        // (its own helpers are private to tracing-subscriber).
        let ansi = writer.has_ansi_escapes();
        let dimmed = if ansi { Style::new().dimmed() } else { Style::new() };
        write!(writer, "{}", dimmed.prefix())?;
        if SystemTime.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        write!(writer, "{} ", dimmed.suffix())?;
        let (level, colour) = match *event.metadata().level() {
            Level::TRACE => ("TRACE", Color::Purple),
            Level::DEBUG => ("DEBUG", Color::Blue),
            Level::INFO => (" INFO", Color::Green),
            Level::WARN => (" WARN", Color::Yellow),
            Level::ERROR => ("ERROR", Color::Red),
        };
        if ansi {
            write!(writer, "{} ", colour.paint(level))?;
        } else {
            write!(writer, "{level} ")?;
        }
        if CURRENT_REQUEST.is_set() {
            let (bold, italic) =
                if ansi { (Style::new().bold(), Style::new().italic()) } else { (Style::new(), Style::new()) };
            CURRENT_REQUEST.with(|request| {
                write!(writer, "{}{}", bold.paint("request"), bold.paint("{"))?;
                for (index, (name, value)) in request.fields().into_iter().enumerate() {
                    let separator = if index == 0 { "" } else { " " };
                    write!(writer, "{separator}{}{}{value}", italic.paint(name), dimmed.paint("="))?;
                }
                write!(writer, "{}{}", bold.paint("}"), dimmed.paint(":"))
            })?;
            // The spans under it follow at once; without any, the target after a space.
            if context.event_scope().is_none() {
                writer.write_char(' ')?;
            }
        }
        self.from_the_spans_on.format_event(context, writer, event)
    }
}

/// The JSON lines: tracing-subscriber's, with the current request, when
/// there is one, as the outermost of `spans` (and as `span` when it is the
/// only one), its fields and `"name":"request"`, as its span would be.
#[derive(Debug)]
pub(super) struct JsonLines {
    json: Format<Json, SystemTime>,
}

impl Default for JsonLines {
    fn default() -> JsonLines {
        JsonLines { json: Format::default().json() }
    }
}

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if !CURRENT_REQUEST.is_set() {
            return self.json.format_event(context, writer, event);
        }
        // Rare (a line logged while a request is served, at the levels
        // `RUST_LOG` asks for), so the line is made, read back and amended.
        let mut line = String::new();
        self.json.format_event(context, Writer::new(&mut line), event)?;
        let mut object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&line).map_err(|_| fmt::Error)?;
        let request = CURRENT_REQUEST.with(|request| {
            let mut span: serde_json::Map<String, serde_json::Value> =
                request.fields().into_iter().map(|(name, value)| (name.to_owned(), value.into())).collect();
            span.insert("name".to_owned(), "request".into());
            serde_json::Value::Object(span)
        });
        match object.get_mut("spans") {
            Some(serde_json::Value::Array(spans)) => spans.insert(0, request),
            _ => {
                object.insert("span".to_owned(), request.clone());
                object.insert("spans".to_owned(), serde_json::Value::Array(vec![request]));
            }
        }
        let amended = serde_json::to_string(&object).map_err(|_| fmt::Error)?;
        writer.write_str(&amended)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tracing_subscriber::fmt::format::DefaultFields;
    use tracing_subscriber::fmt::MakeWriter as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Registry;

    use super::*;

    /// A buffer for the log lines of a test, which reads them back:
    /// `move || buffer.make_writer()` writes to it. Leaked, so that the
    /// subscriber may borrow it as long as it lives; a test's process is short.
    fn log_buffer() -> &'static Mutex<Vec<u8>> {
        Box::leak(Box::default())
    }

    /// The lines written to `buffer` so far, taken.
    fn take_lines(buffer: &Mutex<Vec<u8>>) -> String {
        String::from_utf8(std::mem::take(&mut *buffer.lock().expect("the lines"))).expect("utf-8 lines")
    }

    const REQUEST_ID: &str = "caller-chosen-id";
    const PATH: &str = "/v1/products/P000000001/comments/ranked";

    fn request() -> RequestContext {
        let uri = format!("{PATH}?size=5").parse().expect("a URI");
        RequestContext::new(http::HeaderValue::from_static(REQUEST_ID), http::Method::GET, uri)
    }

    /// What a request's work logs: a line, and a line in a span of its own.
    fn log_a_requests_work() {
        tracing::warn!(target: "query_api::routes", code = "unavailable", "request failed");
        let call = tracing::info_span!("hbase call", db.operation.name = "getRows");
        call.in_scope(|| tracing::info!(target: "common::hbase", rows = 3, "read"));
    }

    /// The same work under the request's span, as the lines named it before
    /// the context replaced the span.
    fn log_a_requests_work_in_its_span() {
        tracing::info_span!("request", request_id = %REQUEST_ID, method = %http::Method::GET, path = %PATH)
            .in_scope(log_a_requests_work);
    }

    /// The lines `log` writes, as `subscriber` writes them into `buffer`.
    fn lines_of(
        subscriber: impl tracing::Subscriber + Send + Sync,
        buffer: &Mutex<Vec<u8>>,
        log: impl FnOnce(),
    ) -> Vec<String> {
        tracing::subscriber::with_default(subscriber, log);
        take_lines(buffer).lines().map(str::to_owned).collect()
    }

    /// Text lines from the level on: the time is the line's first word.
    fn without_time(lines: Vec<String>) -> Vec<String> {
        lines.into_iter().map(|line| line.split_once(' ').expect("a time, then the rest").1.to_owned()).collect()
    }

    /// The text lines `log` writes with `format`, in colour or not.
    fn text_lines<Lines>(format: Lines, ansi: bool, log: impl FnOnce()) -> Vec<String>
    where
        Lines: FormatEvent<Registry, DefaultFields> + Send + Sync + 'static,
    {
        let buffer = log_buffer();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(ansi)
            .event_format(format)
            .with_writer(move || buffer.make_writer())
            .finish();
        lines_of(subscriber, buffer, log)
    }

    #[test]
    fn text_lines_name_the_request_as_its_span_did() {
        for ansi in [false, true] {
            let by_context = text_lines(TextLines::default(), ansi, || request().in_scope(log_a_requests_work));
            let by_span = text_lines(Format::default(), ansi, log_a_requests_work_in_its_span);
            assert_eq!(by_context.len(), 2);
            if !ansi {
                let expected = format!(
                    " WARN request{{request_id={REQUEST_ID} method=GET path={PATH}}}: query_api::routes: \
                     request failed code=\"unavailable\""
                );
                assert_eq!(without_time(by_context.clone())[0], expected);
            }
            assert_eq!(without_time(by_context), without_time(by_span), "in colour: {ansi}");
        }
    }

    #[test]
    fn text_lines_outside_a_request_read_as_tracing_subscribers() {
        let ours = text_lines(TextLines::default(), false, log_a_requests_work);
        assert_eq!(without_time(ours), without_time(text_lines(Format::default(), false, log_a_requests_work)));
    }

    /// The JSON lines `log` writes, by [`JsonLines`] or by tracing-subscriber's own format, without their times.
    fn json_lines(ours: bool, log: impl FnOnce()) -> Vec<serde_json::Value> {
        let buffer = log_buffer();
        let layer = tracing_subscriber::fmt::layer().json().with_writer(move || buffer.make_writer());
        let lines = if ours {
            lines_of(Registry::default().with(layer.event_format(JsonLines::default())), buffer, log)
        } else {
            lines_of(Registry::default().with(layer), buffer, log)
        };
        lines
            .iter()
            .map(|line| {
                let mut line: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
                line.as_object_mut().expect("an object").remove("timestamp").expect("a time");
                line
            })
            .collect()
    }

    #[test]
    fn json_lines_name_the_request_as_its_span_did() {
        let by_context = json_lines(true, || request().in_scope(log_a_requests_work));
        assert_eq!(by_context.len(), 2);
        assert_eq!(by_context[0]["span"]["request_id"], REQUEST_ID);
        assert_eq!(by_context[1]["spans"][0]["path"], PATH);
        assert_eq!(by_context[1]["spans"][1]["name"], "hbase call");
        assert_eq!(by_context, json_lines(false, log_a_requests_work_in_its_span));
        assert_eq!(json_lines(true, log_a_requests_work), json_lines(false, log_a_requests_work));
    }

    #[test]
    fn the_current_request_is_the_innermost_and_only_while_its_work_runs() {
        assert!(RequestContext::current().is_none());
        let outer = request();
        let inner = RequestContext::new(
            http::HeaderValue::from_static("inner"),
            http::Method::HEAD,
            http::Uri::from_static("/"),
        );
        outer.in_scope(|| {
            assert_eq!(RequestContext::current().expect("the outer request").request_id(), REQUEST_ID);
            inner.in_scope(|| assert_eq!(RequestContext::current().expect("the inner request").request_id(), "inner"));
            assert_eq!(RequestContext::current().expect("the outer request again").request_id(), REQUEST_ID);
        });
        assert!(RequestContext::current().is_none());
    }
}
