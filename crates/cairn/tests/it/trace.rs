//! Trace context: a push may carry a W3C `traceparent`, which the job keeps and its worker runs it in.

use cairn::Jobs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::{ErrorKind, JobState, Push, Worker};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use super::harness::TestQueue;

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn a_job_keeps_the_trace_context_it_was_pushed_with() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("traced").trace_parent(TRACE))
        .await
        .unwrap()
        .id;
    let job = t.queue.get(id).await.unwrap();
    let parent = job.trace_parent.expect("the job keeps it");
    assert_eq!(parent.as_str(), TRACE);
    assert_eq!(parent.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(parent.parent_id(), "00f067aa0ba902b7");
    assert!(parent.sampled());
    let claimed = t.take("w").await.unwrap();
    assert_eq!(
        claimed.job.trace_parent.as_ref().map(|p| p.as_str()),
        Some(TRACE)
    );
    t.close().await;
}

#[tokio::test]
async fn a_bad_trace_context_is_refused_naming_the_field() {
    let t = TestQueue::new().await;
    let zeros = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
    for bad in [
        TRACE.to_uppercase(),
        TRACE.replacen("00-", "01-", 1),
        zeros,
        "00-4bf92f35-00f067aa0ba902b7-01".to_owned(),
        format!("{TRACE}-extra"),
    ] {
        let err = t
            .queue
            .enqueue(Push::new("traced").trace_parent(bad.as_str()))
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind(), err.field()),
            (ErrorKind::InvalidInput, Some("trace_parent")),
            "{bad}: {err}"
        );
    }
    // A recurring job's runs are each a trace of their own.
    let err = t
        .queue
        .enqueue(
            Push::new("hourly")
                .schedule("0 * * * *")
                .trace_parent(TRACE),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("trace_parent"))
    );
    t.close().await;
}

/// A span's fields, as (name, text).
type SpanFields = Vec<(String, String)>;

/// What a test subscriber saw of `cairn.job` spans: each one's id and its fields.
#[derive(Clone, Default)]
struct JobSpans(Arc<Mutex<Vec<(Id, SpanFields)>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for JobSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "cairn.job" {
            let mut fields = Vec::new();
            attrs.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push((id.clone(), fields));
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, fields)) = spans.iter_mut().find(|(span, _)| span == id) {
            values.record(&mut Fields(fields));
        }
    }
}

/// A worker runs a traced job's handler in a `cairn.job` span that carries the trace's ids.
#[tokio::test]
async fn a_worker_runs_a_traced_job_in_a_span_of_its_trace() {
    let spans = JobSpans::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("traced").trace_parent(TRACE))
        .await
        .unwrap()
        .id;
    let ran_in: Arc<Mutex<Option<Id>>> = Arc::default();
    let seen = ran_in.clone();
    let worker = Worker::builder(&t.queue, "w")
        .handler("traced", move |_| {
            let seen = seen.clone();
            async move {
                *seen.lock().unwrap() = tracing::Span::current().id();
                Ok(())
            }
        })
        .start()
        .unwrap();
    let job = t.queue.wait(id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    worker.stop(Duration::from_secs(5)).await.unwrap();
    let ran_in = ran_in
        .lock()
        .unwrap()
        .clone()
        .expect("the handler ran in a span");
    let fields = spans
        .0
        .lock()
        .unwrap()
        .iter()
        .find(|(span, _)| *span == ran_in)
        .map(|(_, fields)| fields.clone())
        .expect("the handler's span is the job's");
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(field("trace_id"), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
    assert_eq!(field("parent_id"), Some("00f067aa0ba902b7"));
    assert_eq!(field("traceparent"), Some(TRACE));
    assert_eq!(field("name"), Some("traced"));
    t.close().await;
}

/// With the `opentelemetry` feature (the tests build with it) and a `tracing-opentelemetry` layer, the handler's
/// span is in the pushed trace: its OpenTelemetry context carries the pushed trace's id, under the pushing span.
#[tokio::test]
async fn a_handlers_span_is_a_child_of_the_pushed_trace_in_opentelemetry() {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    let _default = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(tracing_opentelemetry::layer()),
    );
    let t = TestQueue::new().await;
    let traced = t
        .queue
        .enqueue(Push::new("traced").trace_parent(TRACE))
        .await
        .unwrap()
        .id;
    let untraced = t.queue.enqueue(Push::new("plain")).await.unwrap().id;
    let contexts: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
    let seen = contexts.clone();
    let handler = move |_| {
        let seen = seen.clone();
        async move {
            let cx = tracing::Span::current().context();
            let span = cx.span();
            let sc = span.span_context();
            seen.lock().unwrap().push((
                sc.trace_id().to_string(),
                sc.span_id().to_string(),
                sc.is_sampled(),
            ));
            Ok(())
        }
    };
    let worker = Worker::builder(&t.queue, "w")
        .handler("traced", handler.clone())
        .handler("plain", handler)
        .start()
        .unwrap();
    for id in [traced, untraced] {
        let job = t.queue.wait(id, Duration::from_secs(10)).await.unwrap();
        assert_eq!(job.state, JobState::Completed);
    }
    worker.stop(Duration::from_secs(5)).await.unwrap();
    let contexts = contexts.lock().unwrap().clone();
    assert!(
        contexts.contains(&(
            "4bf92f3577b34da6a3ce929d0e0e4736".to_owned(),
            "00f067aa0ba902b7".to_owned(),
            true
        )),
        "the traced job's span is under the pushing span: {contexts:?}"
    );
    assert!(
        contexts
            .iter()
            .any(|(trace, _, _)| trace == "00000000000000000000000000000000"),
        "the job pushed without a trace is in none: {contexts:?}"
    );
    t.close().await;
}
