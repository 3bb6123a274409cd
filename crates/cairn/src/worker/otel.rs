//! With the `opentelemetry` feature: a job's span is made a child of the W3C trace context the job was pushed with,
//! so that an application whose subscriber has a `tracing-opentelemetry` layer sees one trace from the request that
//! enqueued the job to the handler that ran it.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::names::TraceParent;

/// Makes `span` (not entered yet) a child of `parent`, a remote span. Without an OpenTelemetry layer in the
/// subscriber there is nothing to set, and the span keeps its fields only.
pub(crate) fn follow(span: &tracing::Span, parent: &TraceParent) {
    // A TraceParent holds W3C's rules, so both parse; a failure would leave the span as it is.
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(parent.trace_id()),
        SpanId::from_hex(parent.parent_id()),
    ) else {
        return;
    };
    let flags = if parent.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let remote = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    if let Err(e) = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote))
    {
        tracing::trace!(error = %e, "a job's span was not linked to its trace");
    }
}
